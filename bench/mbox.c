// SPDX-License-Identifier: Apache-2.0
/*
 * bench_mbox - the cost of one mechanism: the mailbox (dataplane/mbox.c: 24-byte messages,
 * multi-producer RTS / single-consumer rte_ring on memory of our own) against the
 * frame-pointer rings it replaced (8-byte pointers, the same ring modes). Rounds alternate
 * the two in the same run so both see the same machine load: first in one thread (batches
 * of 1024 posted, then popped: the queue's own cost), then across two threads (adds the
 * cache-line transfer and, on a loaded machine, scheduling). Prints ns per element and the
 * ratio. Not a test.
 * Usage: bench_mbox [elements per round, default 4000000] [rounds, default 3]
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <rte_common.h>
#include <rte_ring.h>

#include "dataplane/dataplane.h"

#define CAP 4096

/* the baseline: a pointer ring as dataplane/fring.c made them (MP RTS / SC), with its
 * doorbell protocol's exchange on every push (the eventfd itself is never written here:
 * as in the mailbox's runs, the consumer never re-arms) */
static int ring_rung;
static struct rte_ring *ptr_ring(void)
{
	ssize_t sz = rte_ring_get_memsize(rte_align32pow2(CAP + 1));
	struct rte_ring *r = sz < 0 ? NULL : aligned_alloc(RTE_CACHE_LINE_SIZE, RTE_ALIGN_CEIL((size_t)sz, 64));
	if (r && rte_ring_init(r, "bench", CAP, RING_F_MP_RTS_ENQ | RING_F_SC_DEQ | RING_F_EXACT_SZ)) {
		free(r);
		r = NULL;
	}
	return r;
}

struct run {
	bool mbox;
	struct ing_mbox *mb;
	struct rte_ring *r;
	uint64_t n;
	uint64_t sum;   /* consumer's checksum: every element arrived, in order */
};

static bool put(struct run *x, uint64_t i)
{
	if (x->mbox) {
		struct ing_msg m = { .kind = 1, .f = (struct ing_frame *)(uintptr_t)(i + 1), .u64 = i };
		return ing_mbox_post(x->mb, &m) == 0;
	}
	if (rte_ring_enqueue(x->r, (void *)(uintptr_t)(i + 1)))
		return false;
	(void)__atomic_exchange_n(&ring_rung, 1, __ATOMIC_SEQ_CST);
	return true;
}

static bool get(struct run *x, uint64_t *v)
{
	if (x->mbox) {
		struct ing_msg m;
		if (ing_mbox_pop(x->mb, &m, 1) != 1)
			return false;
		*v = (uint64_t)(uintptr_t)m.f - 1;
		return true;
	}
	void *p;
	if (rte_ring_dequeue(x->r, &p))
		return false;
	*v = (uint64_t)(uintptr_t)p - 1;
	return true;
}

static double ns_since(const struct timespec *a, uint64_t n)
{
	struct timespec b;
	clock_gettime(CLOCK_MONOTONIC, &b);
	return ((double)(b.tv_sec - a->tv_sec) * 1e9 + (double)(b.tv_nsec - a->tv_nsec)) / (double)n;
}

static void *consumer(void *arg)
{
	struct run *x = arg;
	uint64_t got = 0, sum = 0, v;
	while (got < x->n) {
		if (!get(x, &v))
			continue;   /* bounded: the producer posts exactly n */
		if (v != got)
			abort();    /* out of order: a broken queue, not a slow one */
		sum += v;
		got++;
	}
	x->sum = sum;
	return NULL;
}

static double run_two(struct run *x)
{
	struct timespec a;
	pthread_t t;
	clock_gettime(CLOCK_MONOTONIC, &a);
	if (pthread_create(&t, NULL, consumer, x))
		abort();
	for (uint64_t i = 0; i < x->n; i++)
		while (!put(x, i))
			;
	pthread_join(t, NULL);
	if (x->sum != x->n * (x->n - 1) / 2)
		abort();
	return ns_since(&a, x->n);
}

static double run_one(struct run *x)
{
	struct timespec a;
	uint64_t sum = 0, v;
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (uint64_t i = 0; i < x->n; i += 1024) {
		for (uint64_t j = 0; j < 1024; j++)
			if (!put(x, i + j))
				abort();
		for (uint64_t j = 0; j < 1024; j++) {
			if (!get(x, &v))
				abort();
			sum += v;
		}
	}
	if (!sum && x->n > 1024)
		abort();
	return ns_since(&a, x->n);
}

int main(int argc, char **argv)
{
	uint64_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : 4000000;
	int rounds = argc > 2 ? atoi(argv[2]) : 3;
	n = (n + 1023) / 1024 * 1024;
	struct run ring = { .mbox = false, .n = n }, mbox = { .mbox = true, .n = n };
	if (!(ring.r = ptr_ring()) || !(mbox.mb = ing_mbox_create("bench", CAP))) {
		fprintf(stderr, "bench_mbox: out of memory\n");
		return 1;
	}
	double r1 = 1e30, m1 = 1e30, r2 = 1e30, m2 = 1e30;
	for (int i = 0; i < rounds; i++) {
		double r = run_one(&ring), m = run_one(&mbox);
		printf("round %d, one thread: pointer ring %.1f ns/elem, mailbox %.1f ns/elem\n", i + 1, r, m);
		r1 = r < r1 ? r : r1;
		m1 = m < m1 ? m : m1;
	}
	for (int i = 0; i < rounds; i++) {
		double r = run_two(&ring), m = run_two(&mbox);
		printf("round %d, two threads: pointer ring %.1f ns/elem, mailbox %.1f ns/elem\n", i + 1, r, m);
		r2 = r < r2 ? r : r2;
		m2 = m < m2 ? m : m2;
	}
	printf("best of %d x %llu elements, post+pop per element:\n"
	       "  one thread:  pointer ring %.1f ns, mailbox %.1f ns, ratio mailbox/ring %.2f\n"
	       "  two threads: pointer ring %.1f ns, mailbox %.1f ns, ratio mailbox/ring %.2f\n",
	       rounds, (unsigned long long)n, r1, m1, m1 / r1, r2, m2, m2 / r2);
	free(ring.r);
	ing_mbox_destroy(mbox.mb);
	return 0;
}
