/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_mbox.c - dataplane/mbox.c, the one mailbox per thread: messages come out in the
 * order they went in, calls run on the owner, a full mailbox refuses (all or none); the
 * doorbell is never lost, first in every interleaving of a post's two halves (enqueue,
 * ring) with the owner's last look and re-arm (forced step by step in one thread; the old
 * RDMA notice ring lost its doorbell in one of them), then with three posting threads and
 * an owner that sleeps on the fd; and a frame's stages sent by two threads (RECEIVED by
 * the "lcore", DONE by the "persistence worker" it handed the frame to) arrive in order.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sched.h>
#include <time.h>

#include <cmocka.h>

#include "common/clock.h"
#include "dataplane/dataplane.h"
#include "dataplane/dataplane_internal.h"

/* ThreadSanitizer tree (ING_TEST_TIME_SCALE=10): fewer messages, the same interleavings */
static unsigned scaled(unsigned n)
{
	const char *e = getenv("ING_TEST_TIME_SCALE");
	long k = e ? strtol(e, NULL, 10) : 1;
	return k > 1 ? n / (unsigned)k : n;
}

/* the doorbell's state as the owner would find it: 1 readable, 0 not */
static int rung(struct ing_mbox *mb)
{
	return ing_mbox_wait(mb, 0);
}

static unsigned calls_seen, call_last_val;
static void *call_last_arg;

static void count_call(void *arg, uint32_t val)
{
	calls_seen++;
	call_last_arg = arg;
	call_last_val = val;
}

struct seen {
	uint32_t kind[64];
	uint64_t u64[64];
	unsigned n;
	unsigned calls_before[64];
};

static void on_event(void *ctx, const struct ing_msg *m)
{
	struct seen *s = ctx;
	s->calls_before[s->n] = calls_seen;
	s->kind[s->n] = m->kind;
	s->u64[s->n++] = m->u64;
}

/* ing_mbox_drain, an fd-driven owner's turn: within its budget it leaves the doorbell
 * rung (the loop comes back); once the mailbox is empty the doorbell is consumed and
 * re-armed, and the next post rings it again. */
static void test_drain(void **state)
{
	(void)state;
	struct ing_mbox *mb = ing_mbox_create("t_drain", 64);
	struct seen s = { .n = 0 };
	assert_non_null(mb);
	for (uint64_t i = 0; i < 5; i++)
		assert_int_equal(ing_mbox_post(mb, &(struct ing_msg){ .kind = 7, .u64 = i }), 0);
	assert_int_equal(ing_mbox_wait(mb, 0), 1);
	assert_int_equal(ing_mbox_drain(mb, 3, on_event, &s), 3);
	assert_int_equal(ing_mbox_wait(mb, 0), 1);   /* budget spent: still rung */
	assert_int_equal(ing_mbox_drain(mb, 10, on_event, &s), 2);
	assert_int_equal(ing_mbox_wait(mb, 0), 0);   /* empty: consumed, re-armed */
	assert_int_equal(ing_mbox_post(mb, &(struct ing_msg){ .kind = 7, .u64 = 5 }), 0);
	assert_int_equal(ing_mbox_wait(mb, 0), 1);
	assert_int_equal(ing_mbox_drain(mb, 10, on_event, &s), 1);
	assert_int_equal(s.n, 6);
	for (unsigned i = 0; i < 6; i++)
		assert_int_equal(s.u64[i], i);
	ing_mbox_destroy(mb);
}

/* Events and calls, interleaved, come out in order; calls run on the owner. */
static void test_order_and_calls(void **state)
{
	(void)state;
	struct ing_mbox *mb = ing_mbox_create("t_order", 64);
	struct seen s = { .n = 0 };
	int token;
	assert_non_null(mb);
	calls_seen = 0;
	for (uint64_t i = 0; i < 10; i++) {
		struct ing_msg m = { .kind = 7, .u64 = i };
		assert_int_equal(ing_mbox_post(mb, &m), 0);
		if (i == 4)
			assert_int_equal(ing_mbox_call(mb, count_call, &token, 42), 0);
	}
	assert_int_equal(ing_mbox_count(mb), 11);
	assert_int_equal(ing_mbox_run(mb, 100, on_event, &s), 11);
	assert_int_equal(s.n, 10);
	for (unsigned i = 0; i < 10; i++) {
		assert_int_equal(s.u64[i], i);
		assert_int_equal(s.calls_before[i], i < 5 ? 0 : 1);   /* the call ran between 4 and 5 */
	}
	assert_int_equal(calls_seen, 1);
	assert_ptr_equal(call_last_arg, &token);
	assert_int_equal(call_last_val, 42);
	/* a frame event carries the frame pointer */
	struct ing_frame f;
	struct ing_msg out;
	assert_int_equal(ing_mbox_send(mb, 3, &f), 0);
	assert_int_equal(ing_mbox_pop(mb, &out, 1), 1);
	assert_int_equal(out.kind, 3);
	assert_ptr_equal(out.f, &f);
	assert_int_equal(ing_mbox_pop(mb, &out, 1), 0);
	ing_mbox_destroy(mb);
}

/* Exactly `size` messages fit; a full mailbox refuses, post_n is all or none. */
static void test_full_all_or_none(void **state)
{
	(void)state;
	struct ing_mbox *mb = ing_mbox_create("t_full", 5);
	struct ing_msg m[4] = { { .kind = 1 }, { .kind = 2 }, { .kind = 3 }, { .kind = 4 } }, out[8];
	assert_non_null(mb);
	assert_int_equal(ing_mbox_post_n(mb, m, 4), 0);
	assert_int_equal(ing_mbox_post_n(mb, m, 2), -ENOBUFS);   /* one place left: none taken */
	assert_int_equal(ing_mbox_count(mb), 4);
	assert_int_equal(ing_mbox_post(mb, &m[0]), 0);
	assert_int_equal(ing_mbox_post(mb, &m[1]), -ENOBUFS);
	assert_int_equal(ing_mbox_pop(mb, out, 8), 5);
	assert_int_equal(out[0].kind, 1);
	assert_int_equal(out[3].kind, 4);
	assert_int_equal(out[4].kind, 1);
	assert_null(ing_mbox_create("t_bad", 0));
	ing_mbox_destroy(mb);
	ing_mbox_destroy(NULL);
}

/*
 * Every interleaving of one post's two halves (E: enqueue, R: ring the doorbell if the owner
 * re-armed it) with the owner's going to sleep (P: pop until empty, I: ing_mbox_idle, i.e.
 * consume the doorbell, re-arm, look again), from both starting states (owner asleep with the
 * doorbell armed; owner awake with an earlier message's doorbell still pending). The owner
 * then either sees the message when it looks or pops, or goes to sleep on a doorbell that is
 * readable: the message never waits unannounced. The old notice ring decided "ring?" by
 * whether its ring was empty before the enqueue; in the order "owner empties the ring and
 * re-arms, then E" that look had already said "not empty" and the notice stayed unread.
 */
static void test_doorbell_interleavings(void **state)
{
	(void)state;
	/* all six: E before R, P before I */
	static const char *const orders[] = { "ERPI", "EPRI", "EPIR", "PERI", "PEIR", "PIER" };
	for (int start = 0; start < 2; start++) {
		for (size_t o = 0; o < sizeof(orders) / sizeof(orders[0]); o++) {
			const char *ord = orders[o];
			struct ing_mbox *mb = ing_mbox_create("t_steps", 16);
			struct ing_msg a = { .kind = 1 }, b = { .kind = 2 }, out[4];
			unsigned got_b = 0;
			bool asleep_ok = false;
			if (start == 0) {             /* owner idle and asleep, doorbell armed */
				assert_true(ing_mbox_idle(mb));
			} else {                      /* message a announced, owner not woken yet */
				assert_int_equal(ing_mbox_post(mb, &a), 0);
				assert_int_equal(rung(mb), 1);
			}
			for (const char *c = ord; *c; c++) {
				unsigned k;
				switch (*c) {
				case 'E':
					assert_int_equal(mbox_enqueue(mb, &b, 1), 0);
					break;
				case 'R':
					mbox_ring(mb);
					break;
				case 'P':
					while ((k = ing_mbox_pop(mb, out, 4)) > 0)
						for (unsigned i = 0; i < k; i++)
							got_b += out[i].kind == 2;
					break;
				case 'I':
					asleep_ok = ing_mbox_idle(mb);
					if (!asleep_ok)   /* it looked again and found b: pops it */
						while ((k = ing_mbox_pop(mb, out, 4)) > 0)
							for (unsigned i = 0; i < k; i++)
								got_b += out[i].kind == 2;
					break;
				}
			}
			/* the owner is asleep now (or about to be): b was seen, or the doorbell says so */
			if (!got_b) {
				assert_true(asleep_ok);
				assert_int_equal(rung(mb), 1);
				assert_int_equal(ing_mbox_pop(mb, out, 4), 1);
				assert_int_equal(out[0].kind, 2);
			}
			ing_mbox_destroy(mb);
		}
	}
}

/* A kick wakes the owner without a message (stop flags). */
static void test_kick(void **state)
{
	(void)state;
	struct ing_mbox *mb = ing_mbox_create("t_kick", 4);
	assert_true(ing_mbox_idle(mb));
	assert_int_equal(rung(mb), 0);
	ing_mbox_kick(mb);
	assert_int_equal(rung(mb), 1);
	assert_true(ing_mbox_idle(mb));
	assert_int_equal(rung(mb), 0);
	ing_mbox_destroy(mb);
}

/* ---------------------------------------------------------------- threads */

#define NPOST 3

struct poster {
	struct ing_mbox *mb;
	unsigned id, n;
	int *done;
	unsigned *begun, *ended;   /* posts started / returned, all posters */
};

static void *poster_main(void *arg)
{
	struct poster *p = arg;
	struct timespec ts = { 0, 20000 };
	for (unsigned i = 0; i < p->n;) {
		struct ing_msg m = { .kind = 1, .val = p->id, .u64 = i };
		__atomic_fetch_add(p->begun, 1, __ATOMIC_SEQ_CST);
		int rc = ing_mbox_post(p->mb, &m);
		__atomic_fetch_add(p->ended, 1, __ATOMIC_SEQ_CST);
		if (rc == 0)
			i++;
		else
			nanosleep(&ts, NULL);   /* full: the owner catches up */
	}
	__atomic_fetch_add(p->done, 1, __ATOMIC_SEQ_CST);
	return NULL;
}

/*
 * Three posting threads, an owner that sleeps on the fd whenever the mailbox looks empty.
 * Everything arrives once and in per-poster order. A lost doorbell shows as a sleep that
 * ends without a ring while a message is inside and no post is half done: such a message's
 * post has rung or found the doorbell rung, so the eventfd must be readable.
 */
static void test_mp_no_lost_doorbell(void **state)
{
	(void)state;
	struct ing_mbox *mb = ing_mbox_create("t_mp", 64);
	struct poster p[NPOST];
	pthread_t th[NPOST];
	int done = 0;
	unsigned begun = 0, ended = 0;
	unsigned per = scaled(60000), next[NPOST] = { 0 }, got = 0, sleeps = 0;
	for (unsigned i = 0; i < NPOST; i++) {
		p[i] = (struct poster){ .mb = mb, .id = i, .n = per, .done = &done, .begun = &begun,
					.ended = &ended };
		assert_int_equal(pthread_create(&th[i], NULL, poster_main, &p[i]), 0);
	}
	/* a watchdog for a hang, not a budget: no message for 60 s (the machine may be slow,
	 * the run long: 3 x 6000 posts under ThreadSanitizer took 90-120 s on a busy host) */
	const uint64_t stall_ns = 60ull * 1000000000ull;
	uint64_t deadline = ing_now_ns() + stall_ns;
	while (got < per * NPOST) {
		struct ing_msg m[16];
		unsigned n = ing_mbox_pop(mb, m, 16);
		for (unsigned i = 0; i < n; i++) {
			assert_true(m[i].val < NPOST);
			assert_int_equal(m[i].u64, next[m[i].val]);
			next[m[i].val]++;
		}
		got += n;
		if (n)
			deadline = ing_now_ns() + stall_ns;
		if (n || !ing_mbox_idle(mb))
			continue;
		sleeps++;
		if (ing_mbox_wait(mb, 200) == 0) {
			/* in this order: a message inside, then no post half done (so the one that
			 * put it in has returned, after its ring), then the doorbell */
			unsigned inside = ing_mbox_count(mb);
			unsigned e = __atomic_load_n(&ended, __ATOMIC_SEQ_CST);
			unsigned b = __atomic_load_n(&begun, __ATOMIC_SEQ_CST);
			if (inside && b == e && rung(mb) == 0)
				fail_msg("lost doorbell: %u messages inside, nothing rung", inside);
		}
		if (ing_now_ns() >= deadline)
			fail_msg("no message for 60 s: %u of %u arrived", got, per * NPOST);
	}
	for (unsigned i = 0; i < NPOST; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(next[i], per);
	}
	assert_true(sleeps > 0);
	assert_int_equal(ing_mbox_count(mb), 0);
	ing_mbox_destroy(mb);
}

/* ---- one ordered channel per frame: "lcore" -> "persistence" -> owner */

#define NFR 64

struct chain {
	struct ing_mbox *ctl, *worker;
	struct ing_frame fr[NFR];
	unsigned rounds;
	int stop;
};

static void post_until(struct ing_mbox *mb, uint32_t kind, struct ing_frame *f)
{
	struct timespec ts = { 0, 20000 };
	while (ing_mbox_send(mb, kind, f))
		nanosleep(&ts, NULL);
}

/* the lcore: RECEIVED on control's mailbox, then the frame to the worker */
static void *lcore_main(void *arg)
{
	struct chain *c = arg;
	for (unsigned r = 0; r < c->rounds; r++)
		for (unsigned i = 0; i < NFR; i++) {
			struct ing_frame *f = &c->fr[(r * NFR + i) % NFR];
			while (__atomic_load_n(&f->filled, __ATOMIC_ACQUIRE) != 0)   /* still out */
				sched_yield();
			__atomic_store_n(&f->filled, 1, __ATOMIC_RELAXED);
			f->t_received_ns = r + 1;
			f->length = 1;
			post_until(c->ctl, ING_EV_RECEIVED, f);
			post_until(c->worker, ING_EV_PERSIST, f);
		}
	return NULL;
}

/* the persistence worker: stamps the frame, DONE on control's mailbox; sleeps on its own */
static void *worker_main(void *arg)
{
	struct chain *c = arg;
	struct ing_msg m[8];
	for (;;) {
		unsigned n = ing_mbox_pop(c->worker, m, 8);
		for (unsigned i = 0; i < n; i++) {
			m[i].f->t_durable_ns = m[i].f->t_received_ns;
			post_until(c->ctl, ING_EV_DONE, m[i].f);
		}
		if (n || !ing_mbox_idle(c->worker))
			continue;
		if (__atomic_load_n(&c->stop, __ATOMIC_ACQUIRE))
			return NULL;
		ing_mbox_wait(c->worker, -1);
	}
}

static void test_frame_stages_in_order(void **state)
{
	(void)state;
	struct chain *c = calloc(1, sizeof(*c));
	c->ctl = ing_mbox_create("t_ctl", 4 * NFR);
	c->worker = ing_mbox_create("t_worker", NFR);
	c->rounds = scaled(500);
	uint8_t st[NFR] = { 0 };   /* 0 with the lcore, 1 RECEIVED seen */
	pthread_t tl, tw;
	assert_int_equal(pthread_create(&tw, NULL, worker_main, c), 0);
	assert_int_equal(pthread_create(&tl, NULL, lcore_main, c), 0);
	unsigned done = 0, total = c->rounds * NFR;
	const uint64_t stall_ns = 60ull * 1000000000ull;   /* a hang: nothing for 60 s */
	uint64_t deadline = ing_now_ns() + stall_ns;
	while (done < total) {
		struct ing_msg m[16];
		unsigned n = ing_mbox_pop(c->ctl, m, 16);
		for (unsigned i = 0; i < n; i++) {
			unsigned k = (unsigned)(m[i].f - c->fr);
			if (m[i].kind == ING_EV_RECEIVED) {
				assert_int_equal(st[k], 0);
				st[k] = 1;
			} else {
				assert_int_equal(m[i].kind, ING_EV_DONE);
				assert_int_equal(st[k], 1);   /* DONE never overtakes RECEIVED */
				assert_int_equal(m[i].f->t_durable_ns, m[i].f->t_received_ns);
				st[k] = 0;
				done++;
				/* back to the lcore, as control returns a slot to the pool */
				__atomic_store_n(&m[i].f->filled, 0, __ATOMIC_RELEASE);
			}
		}
		if (n)
			deadline = ing_now_ns() + stall_ns;
		if (!n && ing_mbox_idle(c->ctl))
			assert_true(ing_mbox_wait(c->ctl, 1000) >= 0);
		if (ing_now_ns() >= deadline)
			fail_msg("no message for 60 s: %u of %u frames done", done, total);
	}
	pthread_join(tl, NULL);
	__atomic_store_n(&c->stop, 1, __ATOMIC_RELEASE);
	ing_mbox_kick(c->worker);
	pthread_join(tw, NULL);
	ing_mbox_destroy(c->ctl);
	ing_mbox_destroy(c->worker);
	free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_order_and_calls),
		cmocka_unit_test(test_drain),
		cmocka_unit_test(test_full_all_or_none),
		cmocka_unit_test(test_doorbell_interleavings),
		cmocka_unit_test(test_kick),
		cmocka_unit_test(test_mp_no_lost_doorbell),
		cmocka_unit_test(test_frame_stages_in_order),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
