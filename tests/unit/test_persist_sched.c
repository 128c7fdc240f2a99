/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_persist_sched.c - dataplane/persist.c: the workers' cpu priority. With a nice
 * level the workers run SCHED_BATCH at that nice (below the control thread that starts
 * them); with 0 they are left as the control thread's peers. Read back the way an
 * operator would: /proc/self/task/<tid>/stat of the thread named ing-persist<i>.
 */
#include <sched.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <setjmp.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/clock.h"
#include "dataplane/dataplane.h"
#include "test_eal.h"
#include "test_thread.h"

static struct ing_mbox *acks;

static int setup(void **state)
{
	(void)state;
	if (test_eal_start(0) != 0)
		return -1;
	acks = ing_mbox_create("acks", 256);
	return acks ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	ing_mbox_destroy(acks);
	return 0;
}

/* policy and nice of the thread named ing-persist<idx> (/proc stat fields 41 and 19) */
static void worker_sched(unsigned idx, int *policy, int *nice)
{
	char name[32], buf[4096];
	snprintf(name, sizeof(name), "ing-persist%u", idx);
	test_thread_file(name, "stat", buf, sizeof(buf));
	/* fields after the ")" of comm: 3 state ... 19 nice ... 41 policy */
	char *p = strrchr(buf, ')');
	assert_non_null(p);
	p += 2;
	long v[64];
	int n = 1;
	v[0] = 0;   /* field 3, the state, is a letter */
	p += strcspn(p, " ");
	while (n < 64 && *p && *p != '\n') {
		char *end;
		v[n++] = strtol(p, &end, 10);
		if (end == p)
			break;
		p = end;
	}
	assert_true(n >= 39);
	*nice = (int)v[19 - 3];
	*policy = (int)v[41 - 3];
}

static struct ing_persist *start(unsigned nice)
{
	struct ing_persist_opts o;
	ing_persist_opts_init(&o);
	o.sink = ING_SINK_NULL;
	o.workers = 2;
	o.ring_size = 64;
	o.nice = nice;
	return ing_persist_start(&o, acks);
}

/* wait until the worker has applied its settings (it names itself first, then sets its
 * policy, then its nice) */
static void worker_sched_settled(unsigned idx, int want_policy, int want_nice, int *policy,
				 int *nice)
{
	uint64_t deadline = ing_now_ns() + 60000000000ull;   /* a cap for a hang */
	for (;;) {
		worker_sched(idx, policy, nice);
		if ((*policy == want_policy && *nice == want_nice) || ing_now_ns() >= deadline)
			return;
		struct timespec ts = { 0, 1000000 };
		nanosleep(&ts, NULL);
	}
}

static void test_default_is_batch_below_control(void **state)
{
	(void)state;
	struct ing_persist_opts o;
	ing_persist_opts_init(&o);
	assert_int_equal(o.nice, ING_DEFAULT_WORKER_NICE);
	assert_true(ING_DEFAULT_WORKER_NICE > 0);
}

static void test_nice_workers(void **state)
{
	(void)state;
	int base = getpriority(PRIO_PROCESS, 0);
	int want = base > 7 ? base : 7;   /* a level, never above the process's priority */
	struct ing_persist *p = start(7);
	assert_non_null(p);
	for (unsigned i = 0; i < 2; i++) {
		int policy = -1, nice = -100;
		worker_sched_settled(i, SCHED_BATCH, want, &policy, &nice);
		print_message("worker %u: policy %d nice %d (control: policy %d nice %d)\n", i,
			      policy, nice, sched_getscheduler(0), base);
		assert_int_equal(policy, SCHED_BATCH);
		assert_int_equal(nice, want);
	}
	/* the caller (the control thread) is left alone */
	assert_int_equal(sched_getscheduler(0), SCHED_OTHER);
	assert_int_equal(getpriority(PRIO_PROCESS, 0), base);
	ing_persist_stop(p, 2000);
}

static void test_nice_zero_leaves_workers_alone(void **state)
{
	(void)state;
	int base = getpriority(PRIO_PROCESS, 0);
	struct ing_persist *p = start(0);
	assert_non_null(p);
	for (unsigned i = 0; i < 2; i++) {
		int policy = -1, nice = -100;
		worker_sched_settled(i, SCHED_OTHER, base, &policy, &nice);
		assert_int_equal(policy, SCHED_OTHER);
		assert_int_equal(nice, base);
	}
	ing_persist_stop(p, 2000);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_default_is_batch_below_control),
		cmocka_unit_test(test_nice_workers),
		cmocka_unit_test(test_nice_zero_leaves_workers_alone),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
