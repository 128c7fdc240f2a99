/* SPDX-License-Identifier: Apache-2.0 */
/* test_fring.c - dataplane/fring.c: hand-off between pthreads, doorbell, timeouts. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <time.h>

#include <cmocka.h>

#include "common/clock.h"
#include "dataplane/dataplane.h"

#define N_FRAMES 100000u
#define TAG(p, i) ((struct ing_frame *)(uintptr_t)(((uint64_t)(p) << 32) | ((uint64_t)(i) + 1)))

static int eal_setup(void **state)
{
	(void)state;
	struct ing_eal_opts o;
	ing_eal_opts_init(&o);
	o.lcores = "0";
	return ing_eal_start(&o) == 0 ? 0 : -1;
}

static int eal_teardown(void **state)
{
	(void)state;
	ing_eal_stop();
	return 0;
}

struct prod_arg {
	struct ing_fring *r;
	unsigned id, n;
};

static void *producer(void *arg)
{
	struct prod_arg *a = arg;
	struct timespec ts = { 0, 10000 };
	for (unsigned i = 0; i < a->n;) {
		struct ing_frame *f[4];
		unsigned k = a->n - i < 4 ? a->n - i : 4;
		for (unsigned j = 0; j < k; j++)
			f[j] = TAG(a->id, i + j);
		if (ing_fring_push(a->r, f, k) == 0)
			i += k;
		else
			nanosleep(&ts, NULL);   /* full: the consumer catches up */
	}
	return NULL;
}

/* one consumer, nprod producers: everything arrives once and in per-producer order */
static void run_handoff(unsigned flags, unsigned nprod)
{
	struct ing_fring *r = ing_fring_create("t_handoff", 256, flags, true);
	assert_non_null(r);
	pthread_t th[4];
	struct prod_arg a[4];
	/* ThreadSanitizer tree (ING_TEST_TIME_SCALE=10): fewer frames, the same interleavings */
	const char *e = getenv("ING_TEST_TIME_SCALE");
	long k = e ? strtol(e, NULL, 10) : 1;
	unsigned next[4] = { 0 }, got = 0, total = N_FRAMES / (unsigned)(k > 1 ? k : 1);
	unsigned per = total / nprod;
	for (unsigned p = 0; p < nprod; p++) {
		a[p] = (struct prod_arg){ .r = r, .id = p, .n = per };
		assert_int_equal(pthread_create(&th[p], NULL, producer, &a[p]), 0);
	}
	uint64_t deadline = ing_now_ns() + 60ull * 1000000000ull;
	while (got < per * nprod) {
		struct ing_frame *f[64];
		ing_fring_clear(r);
		unsigned n = ing_fring_pop(r, f, 64);
		for (unsigned i = 0; i < n; i++) {
			uint64_t v = (uint64_t)(uintptr_t)f[i];
			unsigned p = (unsigned)(v >> 32), idx = (unsigned)(v & 0xffffffffu) - 1;
			assert_true(p < nprod);
			assert_int_equal(idx, next[p]);
			next[p]++;
		}
		got += n;
		if (!n) {
			assert_true(ing_now_ns() < deadline);
			assert_true(ing_fring_wait(r, 1000) >= 0);
		}
	}
	for (unsigned p = 0; p < nprod; p++) {
		pthread_join(th[p], NULL);
		assert_int_equal(next[p], per);
	}
	assert_int_equal(ing_fring_count(r), 0);
	ing_fring_destroy(r);
}

static void test_spsc_handoff(void **state)
{
	(void)state;
	run_handoff(ING_FRING_SP | ING_FRING_SC, 1);
}

static void test_mpsc_handoff(void **state)
{
	(void)state;
	run_handoff(ING_FRING_SC, 3);
}

static void test_all_or_none(void **state)
{
	(void)state;
	struct ing_fring *r = ing_fring_create("t_bulk", 4, 0, false);
	assert_non_null(r);
	assert_int_equal(ing_fring_fd(r), -1);
	struct ing_frame *f[4] = { TAG(0, 0), TAG(0, 1), TAG(0, 2), TAG(0, 3) }, *out[8];
	assert_int_equal(ing_fring_push(r, f, 3), 0);
	assert_int_equal(ing_fring_push(r, f, 2), -ENOBUFS);
	assert_int_equal(ing_fring_count(r), 3);
	assert_int_equal(ing_fring_push(r, f + 3, 1), 0);   /* exactly 4 fit */
	assert_int_equal(ing_fring_pop(r, out, 8), 4);
	for (int i = 0; i < 4; i++)
		assert_ptr_equal(out[i], f[i]);
	assert_int_equal(ing_fring_pop(r, out, 8), 0);
	/* no doorbell: wait is a bounded poll */
	assert_int_equal(ing_fring_wait(r, 20), 0);
	assert_int_equal(ing_fring_push(r, f, 1), 0);
	assert_int_equal(ing_fring_wait(r, 20), 1);
	ing_fring_destroy(r);
	ing_fring_destroy(NULL);
	assert_null(ing_fring_create("t_bad", 0, 0, false));
}

static void test_same_name_twice(void **state)
{
	(void)state;
	struct ing_fring *a = ing_fring_create("same", 16, 0, true);
	struct ing_fring *b = ing_fring_create("same", 16, 0, true);
	assert_non_null(a);
	assert_non_null(b);
	assert_true(ing_fring_fd(a) >= 0);
	assert_true(ing_fring_fd(b) >= 0);
	ing_fring_destroy(a);
	ing_fring_destroy(b);
}

struct waiter_arg {
	struct ing_fring *r;
	int rc;
	uint64_t woke_ns;
};

static void *waiter(void *arg)
{
	struct waiter_arg *w = arg;
	w->rc = ing_fring_wait(w->r, 5000);
	w->woke_ns = ing_now_ns();
	return NULL;
}

static void test_doorbell_wakes_waiter(void **state)
{
	(void)state;
	struct ing_fring *r = ing_fring_create("t_bell", 16, ING_FRING_SC, true);
	assert_non_null(r);
	ing_fring_clear(r);
	struct waiter_arg w = { .r = r, .rc = -100 };
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, waiter, &w), 0);
	struct timespec ts = { 0, 50000000 };
	nanosleep(&ts, NULL);
	struct ing_frame *f = TAG(1, 1), *out;
	uint64_t t0 = ing_now_ns();
	assert_int_equal(ing_fring_push(r, &f, 1), 0);
	pthread_join(th, NULL);
	assert_int_equal(w.rc, 1);
	assert_true(w.woke_ns - t0 < 2000000000ull);   /* woken, not timed out */
	ing_fring_clear(r);
	assert_int_equal(ing_fring_pop(r, &out, 1), 1);
	assert_ptr_equal(out, f);
	/* a push while the consumer is awake (ring not yet cleared) still leaves a wake-up */
	assert_int_equal(ing_fring_push(r, &f, 1), 0);
	assert_int_equal(ing_fring_push(r, &f, 1), 0);
	assert_int_equal(ing_fring_wait(r, 0), 1);
	struct ing_frame *rest[4];
	assert_int_equal(ing_fring_pop(r, rest, 4), 2);
	ing_fring_destroy(r);
}

static void test_wait_times_out(void **state)
{
	(void)state;
	struct ing_fring *r = ing_fring_create("t_timeout", 16, 0, true);
	assert_non_null(r);
	struct ing_frame *f = TAG(2, 2), *out;
	/* a rung doorbell that was consumed does not wake a later wait */
	assert_int_equal(ing_fring_push(r, &f, 1), 0);
	ing_fring_clear(r);
	assert_int_equal(ing_fring_pop(r, &out, 1), 1);
	uint64_t t0 = ing_now_ns();
	assert_int_equal(ing_fring_wait(r, 60), 0);
	uint64_t dt = ing_now_ns() - t0;
	assert_true(dt >= 50000000ull);
	assert_true(dt < 3000000000ull);
	ing_fring_destroy(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_spsc_handoff),
		cmocka_unit_test(test_mpsc_handoff),
		cmocka_unit_test(test_all_or_none),
		cmocka_unit_test(test_same_name_twice),
		cmocka_unit_test(test_doorbell_wakes_waiter),
		cmocka_unit_test(test_wait_times_out),
	};
	return cmocka_run_group_tests(tests, eal_setup, eal_teardown);
}
