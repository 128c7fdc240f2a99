/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_svc_limits.c - control/service/auth.c and state.c: the credential and per-peer
 * pieces that need no loop, pool or network: the length-exact token compare, the
 * failed-authentication bucket and back-off, the peer table and the work-conserving slot
 * share (admit.c). A bare struct ing_svc with only the fields these functions read.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/clock.h"
#include "control/service/state.h"
#include "control/service/auth.h"

#define TOKEN "h3000-unit-token-0123456789"

static struct ing_svc *svc_with_token(const char *tok)
{
	struct ing_svc *s = calloc(1, sizeof(*s));
	assert_non_null(s);
	if (tok) {
		s->auth = true;
		s->auth_len = strlen(tok);
		memcpy(s->auth_token, tok, s->auth_len + 1);
	}
	s->o.auth_fail_burst = 20;
	s->o.auth_backoff_max_ms = 60000;
	s->npeers = 4;
	s->peers = calloc(s->npeers, sizeof(*s->peers));
	assert_non_null(s->peers);
	s->max_slots_per_peer = 3;
	return s;
}

static void svc_free(struct ing_svc *s)
{
	free(s->peers);
	free(s);
}

static void test_token_exact(void **state)
{
	(void)state;
	struct ing_svc *s = svc_with_token(TOKEN);
	size_t n = strlen(TOKEN);
	char buf[128];

	assert_true(svc_auth_token_ok(s, TOKEN, n));
	/* the token followed by NUL and anything: longer on the wire, refused */
	memcpy(buf, TOKEN "\0anything", n + 9);
	assert_false(svc_auth_token_ok(s, buf, n + 9));
	assert_false(svc_auth_token_ok(s, buf, n + 1));
	/* a prefix, one byte off, empty, NULL */
	assert_false(svc_auth_token_ok(s, TOKEN, n - 1));
	memcpy(buf, TOKEN, n + 1);
	buf[n - 1] ^= 1;
	assert_false(svc_auth_token_ok(s, buf, n));
	assert_false(svc_auth_token_ok(s, "", 0));
	assert_false(svc_auth_token_ok(s, NULL, 0));
	svc_free(s);

	/* authentication off: nothing is "the token" */
	s = svc_with_token(NULL);
	assert_false(svc_auth_token_ok(s, TOKEN, n));
	svc_free(s);
}

static void test_auth_backoff(void **state)
{
	(void)state;
	struct ing_svc *s = svc_with_token(TOKEN);
	char why[160];
	struct svc_peer *p = svc_peer_get(s, "192.0.2.7");
	struct svc_peer *q = svc_peer_get(s, "192.0.2.8");
	assert_non_null(p);
	assert_non_null(q);

	/* the burst passes unchecked by the back-off */
	for (unsigned i = 0; i < s->o.auth_fail_burst; i++) {
		assert_false(svc_auth_locked(s, p, why, sizeof(why)));
		svc_auth_failed(s, p);
	}
	assert_false(svc_auth_locked(s, p, why, sizeof(why)));
	/* one more: refused for a while, and the reason names the address and the wait */
	svc_auth_failed(s, p);
	assert_true(svc_auth_locked(s, p, why, sizeof(why)));
	assert_non_null(strstr(why, "192.0.2.7"));
	assert_non_null(strstr(why, "retry in"));
	assert_int_equal(p->strikes, 1);
	/* another address is not affected */
	assert_false(svc_auth_locked(s, q, why, sizeof(why)));
	/* every further failure doubles the back-off, capped */
	uint64_t before = p->locked_until_ns;
	svc_auth_failed(s, p);
	assert_true(p->locked_until_ns > before);
	for (int i = 0; i < 40; i++)
		svc_auth_failed(s, p);
	assert_true(p->locked_until_ns - ing_now_ns() <= 60000ull * 1000000ull);
	/* success clears the strikes (the bucket still drains at its own pace) */
	svc_auth_succeeded(p);
	assert_int_equal(p->strikes, 0);
	/* no peer (table full): never locked */
	assert_false(svc_auth_locked(s, NULL, why, sizeof(why)));
	svc_peer_put(s, p);
	svc_peer_put(s, q);
	svc_free(s);
}

static void test_peer_table(void **state)
{
	(void)state;
	struct ing_svc *s = svc_with_token(NULL);
	struct svc_peer *a = svc_peer_get(s, "10.0.0.1");
	struct svc_peer *a2 = svc_peer_get(s, "10.0.0.1");
	assert_ptr_equal(a, a2);
	assert_int_equal(a->refs, 2);
	struct svc_peer *b = svc_peer_get(s, "10.0.0.2");
	struct svc_peer *c = svc_peer_get(s, "10.0.0.3");
	struct svc_peer *d = svc_peer_get(s, "10.0.0.4");
	assert_non_null(d);
	/* full: a fifth address is not tracked */
	assert_null(svc_peer_get(s, "10.0.0.5"));
	/* an entry nothing points at (and with no failures to remember) is reused */
	svc_peer_put(s, d);
	struct svc_peer *e = svc_peer_get(s, "10.0.0.5");
	assert_ptr_equal(e, d);
	assert_string_equal(e->ip, "10.0.0.5");
	/* ... but not while its address is refused after failed authentication */
	s->auth = true;
	for (int i = 0; i < 25; i++)
		svc_auth_failed(s, e);
	svc_peer_put(s, e);
	assert_null(svc_peer_get(s, "10.0.0.6"));
	svc_peer_put(s, a);
	svc_peer_put(s, a2);
	svc_peer_put(s, b);
	svc_peer_put(s, c);
	svc_free(s);
}

/* The slot share lives in the admission layer (control/service/admit.c) now; the peers here. */
static void test_slot_share(void **state)
{
	(void)state;
	struct ing_svc *s = svc_with_token(NULL);
	struct svc_peer *hog = svc_peer_get(s, "10.0.0.1");
	struct svc_peer *other = svc_peer_get(s, "10.0.0.2");
	struct admit a;
	struct admit_req w;

	memset(&a, 0, sizeof(a));
	a.max_slots_per_peer = s->max_slots_per_peer;
	hog->share.slots = 3;   /* at its share (max_slots_per_peer 3) */
	/* nobody else waits: work-conserving, it may take more */
	assert_true(admit_peer_slot_ok(&a, &hog->share));
	/* another address waits for a slot: no more for the hog */
	memset(&w, 0, sizeof(w));
	w.share = &other->share;
	w.why = ADMIT_SLOT;
	w.queued = true;
	a.head = a.tail = &w;
	assert_false(admit_peer_slot_ok(&a, &hog->share));
	assert_true(admit_peer_slot_ok(&a, &other->share));
	/* a waiter of its own address does not hold it back */
	w.share = &hog->share;
	assert_true(admit_peer_slot_ok(&a, &hog->share));
	/* nor another address's call waiting for a credit of its own session */
	w.share = &other->share;
	w.why = ADMIT_CREDIT;
	assert_true(admit_peer_slot_ok(&a, &hog->share));
	/* under its share: always */
	w.why = ADMIT_SLOT;
	hog->share.slots = 2;
	assert_true(admit_peer_slot_ok(&a, &hog->share));
	/* untracked peer: no limit */
	assert_true(admit_peer_slot_ok(&a, NULL));
	svc_peer_put(s, hog);
	svc_peer_put(s, other);
	svc_free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_token_exact),
		cmocka_unit_test(test_auth_backoff),
		cmocka_unit_test(test_peer_table),
		cmocka_unit_test(test_slot_share),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
