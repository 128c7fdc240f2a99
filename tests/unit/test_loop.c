/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for control/net/loop.c: timers (order, cancel, re-arm), fd callbacks, before_sleep hooks, stop. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "control/net/loop.h"
#include "common/clock.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#define MS 1000000ull

struct rec {
	int order[64];
	int n;
};

struct tctx {
	struct rec *r;
	int id;
	struct ing_loop *l;
	struct ing_timer *other;   /* cancel this one when fired */
	int rearm_left;
	struct ing_timer *self;
};

static void fire(void *arg)
{
	struct tctx *t = arg;
	if (t->r->n < 64)
		t->r->order[t->r->n++] = t->id;
	if (t->other)
		ing_timer_cancel(t->l, t->other);
	if (t->rearm_left > 0) {
		t->rearm_left--;
		ing_timer_arm(t->l, t->self, ing_now_ns());
	}
}

static void run_for(struct ing_loop *l, uint64_t ns)
{
	uint64_t end = ing_now_ns() + ns;
	while (ing_now_ns() < end)
		ing_loop_run_once(l, 5);
}

static void test_timer_order(void **state)
{
	(void)state;
	struct ing_loop *l = ing_loop_create();
	assert_non_null(l);
	struct rec r = { 0 };
	enum { N = 40 };
	struct ing_timer t[N];
	struct tctx c[N];
	uint64_t now = ing_now_ns();
	/* Deadlines in a scrambled order; ids equal the expected firing rank. */
	for (int i = 0; i < N; i++) {
		int rank = (i * 17) % N;
		c[i] = (struct tctx){ .r = &r, .id = rank, .l = l };
		ing_timer_init(&t[i], fire, &c[i]);
		assert_false(ing_timer_armed(&t[i]));
		ing_timer_arm(l, &t[i], now + (uint64_t)(rank + 1) * 100000ull);
		assert_true(ing_timer_armed(&t[i]));
	}
	run_for(l, 30 * MS);
	assert_int_equal(r.n, N);
	for (int i = 0; i < N; i++)
		assert_int_equal(r.order[i], i);
	for (int i = 0; i < N; i++)
		assert_false(ing_timer_armed(&t[i]));
	ing_loop_destroy(l);
}

static void test_timer_cancel_rearm(void **state)
{
	(void)state;
	struct ing_loop *l = ing_loop_create();
	struct rec r = { 0 };
	struct ing_timer a, b, c, d;
	struct tctx ca = { &r, 1, l, NULL, 0, &a }, cb = { &r, 2, l, NULL, 0, &b },
		    cc = { &r, 3, l, NULL, 0, &c }, cd = { &r, 4, l, NULL, 0, &d };
	ing_timer_init(&a, fire, &ca);
	ing_timer_init(&b, fire, &cb);
	ing_timer_init(&c, fire, &cc);
	ing_timer_init(&d, fire, &cd);
	uint64_t now = ing_now_ns();
	ing_timer_arm(l, &a, now + 1 * MS);
	ing_timer_arm(l, &b, now + 2 * MS);
	ing_timer_arm(l, &c, now + 3 * MS);
	ing_timer_arm(l, &d, now + 4 * MS);
	ing_timer_cancel(l, &b);
	ing_timer_cancel(l, &b);              /* no-op */
	ing_timer_arm(l, &a, now + 5 * MS);   /* later */
	ing_timer_arm(l, &d, now + 500000);   /* earlier */
	ca.other = &c;                        /* never: c fires before a */
	cd.other = NULL;
	run_for(l, 20 * MS);
	assert_int_equal(r.n, 3);
	assert_int_equal(r.order[0], 4);
	assert_int_equal(r.order[1], 3);
	assert_int_equal(r.order[2], 1);

	/* A timer cancelling another that is due in the same round. */
	r.n = 0;
	now = ing_now_ns();
	ca.other = &b;
	ing_timer_arm(l, &a, now + 1 * MS);
	ing_timer_arm(l, &b, now + 1 * MS + 1);
	run_for(l, 10 * MS);
	assert_int_equal(r.n, 1);
	assert_int_equal(r.order[0], 1);

	/* Re-arming at "now" from the callback runs once per round, not forever. */
	r.n = 0;
	ca.other = NULL;
	ca.rearm_left = 5;
	ing_timer_arm(l, &a, ing_now_ns());
	int rounds = 0;
	while (ing_timer_armed(&a) && rounds < 100) {
		ing_loop_run_once(l, 10);
		rounds++;
	}
	assert_int_equal(r.n, 6);
	assert_true(rounds >= 6);
	ing_loop_destroy(l);
}

/* Random arm/cancel/re-arm against a brute-force model. */
static void test_timer_heap_random(void **state)
{
	(void)state;
	struct ing_loop *l = ing_loop_create();
	enum { N = 300 };
	static struct ing_timer t[N];
	static struct tctx c[N];
	static bool armed[N];
	static uint64_t dl[N];
	struct rec r = { 0 };
	srand(3);
	uint64_t base = ing_now_ns() + 3600ull * 1000 * MS;   /* far future: nothing fires */
	for (int i = 0; i < N; i++) {
		c[i] = (struct tctx){ .r = &r, .id = i, .l = l };
		ing_timer_init(&t[i], fire, &c[i]);
	}
	for (int step = 0; step < 20000; step++) {
		int i = rand() % N;
		if (rand() % 3 == 0) {
			ing_timer_cancel(l, &t[i]);
			armed[i] = false;
		} else {
			dl[i] = base + (uint64_t)(rand() % 1000);
			ing_timer_arm(l, &t[i], dl[i]);
			armed[i] = true;
		}
		assert_int_equal(ing_timer_armed(&t[i]), armed[i]);
	}
	/* Pull the deadlines in, in model order, and check they fire in that order. */
	uint64_t now = ing_now_ns();
	int expect = 0;
	for (int i = 0; i < N; i++)
		if (armed[i]) {
			ing_timer_arm(l, &t[i], now + (dl[i] - base) * 1000);   /* < 1 ms apart */
			expect++;
		}
	run_for(l, 20 * MS);
	assert_int_equal(r.n, expect > 64 ? 64 : expect);
	uint64_t prev = 0;
	for (int k = 0; k < r.n; k++) {
		assert_true(dl[r.order[k]] >= prev);
		prev = dl[r.order[k]];
	}
	ing_loop_destroy(l);
}

struct fdctx {
	struct ing_loop *l;
	int fd;
	int calls;
	uint32_t last;
	int del_other;   /* fd to delete from the callback */
	bool del_self;
};

static void on_fd(void *arg, uint32_t ev)
{
	struct fdctx *f = arg;
	char b[16];
	f->calls++;
	f->last = ev;
	if (f->del_self) {
		ing_loop_del_fd(f->l, f->fd);
		return;
	}
	if (f->del_other >= 0)
		ing_loop_del_fd(f->l, f->del_other);
	if (ev & EPOLLIN) {
		ssize_t n = read(f->fd, b, sizeof(b));
		(void)n;
	}
}

static void test_fd_callbacks(void **state)
{
	(void)state;
	struct ing_loop *l = ing_loop_create();
	int p1[2], p2[2];
	assert_int_equal(pipe(p1), 0);
	assert_int_equal(pipe(p2), 0);
	struct fdctx f1 = { l, p1[0], 0, 0, -1, false }, f2 = { l, p2[0], 0, 0, -1, false };
	assert_int_equal(ing_loop_add_fd(l, p1[0], EPOLLIN, on_fd, &f1), 0);
	assert_int_equal(ing_loop_add_fd(l, p1[0], EPOLLIN, on_fd, &f1), -EEXIST);
	assert_int_equal(ing_loop_add_fd(l, p2[0], EPOLLIN, on_fd, &f2), 0);
	assert_int_equal(ing_loop_run_once(l, 0), 0);
	assert_int_equal(write(p1[1], "x", 1), 1);
	assert_int_equal(ing_loop_run_once(l, 1000), 1);
	assert_int_equal(f1.calls, 1);
	assert_true(f1.last & EPOLLIN);
	/* Level-triggered: unread data keeps firing. */
	assert_int_equal(write(p2[1], "yy", 2), 2);
	f2.del_self = false;
	assert_int_equal(ing_loop_run_once(l, 1000), 1);
	assert_int_equal(f2.calls, 1);   /* read 2 bytes */
	/* Both ready; the first to run deletes the other: the other must not run. */
	assert_int_equal(write(p1[1], "a", 1), 1);
	assert_int_equal(write(p2[1], "b", 1), 1);
	f1.del_other = p2[0];
	f2.del_other = p1[0];
	int before1 = f1.calls, before2 = f2.calls;
	assert_int_equal(ing_loop_run_once(l, 1000), 1);
	assert_int_equal((f1.calls - before1) + (f2.calls - before2), 1);
	int r1 = ing_loop_del_fd(l, p1[0]), r2 = ing_loop_del_fd(l, p2[0]);
	assert_true((r1 == 0) != (r2 == 0));   /* exactly the one that ran is still there */
	assert_true(r1 == -ENOENT || r2 == -ENOENT);
	/* mod_fd: EPOLLOUT on the write end. */
	struct fdctx f3 = { l, p1[1], 0, 0, -1, false };
	assert_int_equal(ing_loop_add_fd(l, p1[1], 0, on_fd, &f3), 0);
	assert_int_equal(ing_loop_run_once(l, 0), 0);
	assert_int_equal(ing_loop_mod_fd(l, p1[1], EPOLLOUT), 0);
	assert_int_equal(ing_loop_run_once(l, 1000), 1);
	assert_true(f3.last & EPOLLOUT);
	f3.del_self = true;
	assert_int_equal(ing_loop_run_once(l, 1000), 1);
	assert_int_equal(ing_loop_run_once(l, 0), 0);
	assert_int_equal(ing_loop_mod_fd(l, p1[1], EPOLLOUT), -ENOENT);
	close(p1[0]);
	close(p1[1]);
	close(p2[0]);
	close(p2[1]);
	ing_loop_destroy(l);
}

/* Another thread reaches the loop through an fd it watches (the node: the control
 * thread's mailbox): the fd's callback runs on the loop thread, and may stop the loop. */
static int bell_fd = -1;
static int bell_rung;   /* the loop read the first ring (the waker rings again only then) */

static void on_bell(void *arg, uint32_t ev)
{
	uint64_t v;
	(void)ev;
	assert_int_equal(read(bell_fd, &v, sizeof(v)), (ssize_t)sizeof(v));
	__atomic_store_n(&bell_rung, 1, __ATOMIC_RELEASE);
	if (v >= 2)
		ing_loop_stop(arg);
}

static void *waker(void *arg)
{
	uint64_t one = 1, two = 2;
	(void)arg;
	usleep(50000);
	assert_int_equal(write(bell_fd, &one, sizeof(one)), (ssize_t)sizeof(one));   /* wakes it */
	while (!__atomic_load_n(&bell_rung, __ATOMIC_ACQUIRE))
		usleep(1000);
	assert_int_equal(write(bell_fd, &two, sizeof(two)), (ssize_t)sizeof(two));   /* stops it */
	return NULL;
}

static void test_wake_and_stop(void **state)
{
	(void)state;
	struct ing_loop *l = ing_loop_create();
	pthread_t th;
	bell_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	assert_true(bell_fd >= 0);
	assert_false(ing_loop_stopping(l));
	assert_int_equal(ing_loop_add_fd(l, bell_fd, EPOLLIN, on_bell, l), 0);
	assert_int_equal(pthread_create(&th, NULL, waker, NULL), 0);
	uint64_t t0 = ing_now_ns();
	/* woken by the fd: its callback, long before the 60 s timeout (a busy machine may take
	 * seconds, never a minute: the bound tells a wake from a timeout, not a speed) */
	assert_int_equal(ing_loop_run_once(l, 60000), 1);
	uint64_t dt = ing_now_ns() - t0;
	assert_true(dt < 30000 * MS);
	assert_false(ing_loop_stopping(l));
	/* run() returns after the turn whose callback stopped it */
	assert_int_equal(ing_loop_run(l), 0);
	assert_true(ing_loop_stopping(l));
	assert_true(ing_now_ns() - t0 < 60000 * MS);
	pthread_join(th, NULL);
	close(bell_fd);
	ing_loop_destroy(l);
	ing_loop_destroy(NULL);
}

/* before_sleep: a hook runs before the sleep only in a turn it was armed in, once, in the
 * order added; hooks armed by a hook run again (bounded), and no sleep while one is left. */
struct hook_rec {
	char order[64];
	unsigned n;
	int work[2];                    /* per hook: calls that find work, until 0 */
	struct ing_loop_hook *arms[2];  /* what a hook that found work arms */
};

static int hook_run(struct hook_rec *r, int i)
{
	if (r->n < sizeof(r->order) - 1)
		r->order[r->n] = (char)('a' + i);
	r->n++;
	if (r->work[i] <= 0)
		return 0;
	r->work[i]--;
	ing_loop_hook_arm(r->arms[i]);
	return 1;
}

static int hook_a(void *arg)
{
	return hook_run(arg, 0);
}

static int hook_b(void *arg)
{
	return hook_run(arg, 1);
}

static void test_before_sleep(void **state)
{
	(void)state;
	struct ing_loop *l = ing_loop_create();
	struct ing_loop_hook a, b;
	struct hook_rec r = { 0 };
	ing_loop_hook_init(&a, hook_a, &r);
	ing_loop_hook_init(&b, hook_b, &r);
	ing_loop_before_sleep(l, &a);
	ing_loop_before_sleep(l, &b);
	ing_loop_before_sleep(l, &a);   /* added once */
	/* nothing armed: an idle turn runs no hook */
	assert_int_equal(ing_loop_run_once(l, 0), 0);
	assert_int_equal(r.n, 0);
	/* armed (twice: once), in the order added, then not again in the next turn */
	ing_loop_hook_arm(&b);
	ing_loop_hook_arm(&a);
	ing_loop_hook_arm(&a);
	assert_int_equal(ing_loop_run_once(l, 0), 0);
	assert_string_equal(r.order, "ab");
	assert_int_equal(ing_loop_run_once(l, 0), 0);
	assert_int_equal(r.n, 2);
	/* a hook that arms another (and one that arms itself): they run again this turn */
	memset(&r, 0, sizeof(r));
	r.work[0] = 1;
	r.arms[0] = &b;
	r.work[1] = 2;
	r.arms[1] = &b;
	ing_loop_hook_arm(&a);
	assert_int_equal(ing_loop_run_once(l, 0), 3);   /* a's work 1, b's 2 */
	assert_string_equal(r.order, "abbb");
	/* armed on every pass: ING_LOOP_HOOK_PASSES passes, then no sleep at all */
	memset(&r, 0, sizeof(r));
	r.work[0] = 1000;
	r.arms[0] = &a;
	ing_loop_hook_arm(&a);
	uint64_t t0 = ing_now_ns();
	(void)ing_loop_run_once(l, 5000);
	assert_true(ing_now_ns() - t0 < 2000 * MS);
	assert_int_equal(r.n, ING_LOOP_HOOK_PASSES);
	/* deleted: not run any more, armed or not */
	memset(&r, 0, sizeof(r));
	ing_loop_hook_del(l, &a);
	ing_loop_hook_del(l, &a);
	ing_loop_hook_arm(&a);
	ing_loop_hook_arm(&b);
	assert_int_equal(ing_loop_run_once(l, 0), 0);
	assert_string_equal(r.order, "b");
	ing_loop_hook_del(l, &b);
	ing_loop_hook_arm(&b);
	assert_int_equal(ing_loop_run_once(l, 0), 0);
	assert_int_equal(r.n, 1);
	ing_loop_destroy(l);
}

static void test_timeout_waits_for_timer(void **state)
{
	(void)state;
	struct ing_loop *l = ing_loop_create();
	struct rec r = { 0 };
	struct ing_timer a;
	struct tctx ca = { &r, 1, l, NULL, 0, &a };
	ing_timer_init(&a, fire, &ca);
	uint64_t t0 = ing_now_ns();
	ing_timer_arm(l, &a, t0 + 20 * MS);
	/* -1: sleep until the timer; it must not fire early. */
	while (r.n == 0 && ing_now_ns() - t0 < 60000 * MS)   /* a cap for a hang */
		ing_loop_run_once(l, -1);
	assert_int_equal(r.n, 1);
	assert_true(ing_now_ns() - t0 >= 20 * MS);
	ing_loop_destroy(l);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_timer_order),
		cmocka_unit_test(test_timer_cancel_rearm),
		cmocka_unit_test(test_timer_heap_random),
		cmocka_unit_test(test_fd_callbacks),
		cmocka_unit_test(test_wake_and_stop),
		cmocka_unit_test(test_before_sleep),
		cmocka_unit_test(test_timeout_waits_for_timer),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
