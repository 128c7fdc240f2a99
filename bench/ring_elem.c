// SPDX-License-Identifier: Apache-2.0
/*
 * ring_elem - the RDMA lcore's value rings (commands, notices: dataplane/rdma/rdma_poller.c)
 * as DPDK rte_ring elem rings against the hand-written SP/SC ring they replaced (kept here,
 * verbatim, as the baseline). One producer thread, one consumer thread, 56-byte elements
 * (struct ing_rdma_notice), a ring of 4096; rounds alternate baseline / rte_ring in the same
 * run so both see the same machine load: first in one thread (batches of 1024 pushed, then
 * popped: the rings' own cost), then across two threads (adds cache-line transfer and, on a
 * loaded machine, scheduling). Prints ns per element and the ratios. Not a test.
 * Usage: bench_ring_elem [elements per round, default 4000000] [rounds, default 3]
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rte_common.h>
#include <rte_ring.h>
#include <rte_ring_elem.h>

struct elem {   /* the size of struct ing_rdma_notice */
	uint32_t kind, qp_num;
	uint64_t session_id, gen, cookie, length, t_ns;
	int32_t status;
	uint32_t lcore;
};

/* ---- the baseline: the SP/SC ring rdma_poller.c had before */
struct spsc {
	uint32_t head __attribute__((aligned(64)));
	uint32_t tail __attribute__((aligned(64)));
	uint32_t mask;
	uint32_t esz;
	uint8_t *data;
};
static int spsc_init(struct spsc *r, unsigned n, unsigned esz)
{
	unsigned sz = 1;
	while (sz < n)
		sz <<= 1;
	r->data = calloc(sz, esz);
	if (!r->data)
		return -1;
	r->head = r->tail = 0;
	r->mask = sz - 1;
	r->esz = esz;
	return 0;
}
static int spsc_push(struct spsc *r, const void *e)
{
	uint32_t h = __atomic_load_n(&r->head, __ATOMIC_RELAXED);
	uint32_t t = __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE);
	if (h - t > r->mask)
		return -1;
	memcpy(r->data + (size_t)(h & r->mask) * r->esz, e, r->esz);
	__atomic_store_n(&r->head, h + 1, __ATOMIC_RELEASE);
	return 0;
}
static bool spsc_pop(struct spsc *r, void *e)
{
	uint32_t t = __atomic_load_n(&r->tail, __ATOMIC_RELAXED);
	uint32_t h = __atomic_load_n(&r->head, __ATOMIC_ACQUIRE);
	if (t == h)
		return false;
	memcpy(e, r->data + (size_t)(t & r->mask) * r->esz, r->esz);
	__atomic_store_n(&r->tail, t + 1, __ATOMIC_RELEASE);
	return true;
}

/* ---- the replacement, as rdma_poller.c creates it */
static struct rte_ring *vring_create(unsigned n, unsigned esz)
{
	unsigned cap = 1;
	while (cap < n)
		cap <<= 1;
	ssize_t sz = rte_ring_get_memsize_elem(esz, rte_align32pow2(cap + 1));
	if (sz < 0)
		return NULL;
	struct rte_ring *r = aligned_alloc(RTE_CACHE_LINE_SIZE, ((size_t)sz + 63) & ~(size_t)63);
	if (r && rte_ring_init(r, "bench", cap, RING_F_SP_ENQ | RING_F_SC_DEQ | RING_F_EXACT_SZ)) {
		free(r);
		r = NULL;
	}
	return r;
}

struct run {
	bool use_rte;
	struct spsc s;
	struct rte_ring *r;
	uint64_t n;
	uint64_t sum;   /* consumer's checksum: every element arrived, in order */
};

static void *consumer(void *arg)
{
	struct run *x = arg;
	struct elem e;
	uint64_t got = 0, sum = 0;
	while (got < x->n) {
		bool ok = x->use_rte ? rte_ring_sc_dequeue_elem(x->r, &e, sizeof(e)) == 0 : spsc_pop(&x->s, &e);
		if (!ok)
			continue;   /* bounded: the producer pushes exactly n */
		if (e.gen != got)
			abort();    /* out of order: a broken ring, not a slow one */
		sum += e.cookie;
		got++;
	}
	x->sum = sum;
	return NULL;
}

static double run_once(struct run *x)
{
	struct timespec a, b;
	pthread_t t;
	struct elem e = { .kind = 1 };
	clock_gettime(CLOCK_MONOTONIC, &a);
	if (pthread_create(&t, NULL, consumer, x))
		abort();
	for (uint64_t i = 0; i < x->n; i++) {
		e.gen = i;
		e.cookie = i * 3;
		while (x->use_rte ? rte_ring_sp_enqueue_elem(x->r, &e, sizeof(e)) != 0 : spsc_push(&x->s, &e) != 0)
			;
	}
	pthread_join(t, NULL);
	clock_gettime(CLOCK_MONOTONIC, &b);
	if (x->sum != 3 * (x->n * (x->n - 1) / 2))
		abort();
	return ((double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec)) / (double)x->n;
}

/* One thread: push a batch of 1024, pop it, repeat: the ring's own cost per element
 * (push + pop) without the cross-core cache traffic and scheduling of the 2-thread run. */
static double run_single(struct run *x)
{
	struct timespec a, b;
	struct elem e = { .kind = 1 }, o;
	uint64_t sum = 0;
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (uint64_t i = 0; i < x->n; i += 1024) {
		for (uint64_t j = 0; j < 1024; j++) {
			e.gen = i + j;
			if (x->use_rte ? rte_ring_sp_enqueue_elem(x->r, &e, sizeof(e)) != 0 : spsc_push(&x->s, &e) != 0)
				abort();
		}
		for (uint64_t j = 0; j < 1024; j++) {
			if (!(x->use_rte ? rte_ring_sc_dequeue_elem(x->r, &o, sizeof(o)) == 0 : spsc_pop(&x->s, &o)))
				abort();
			sum += o.gen;
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &b);
	if (!sum && x->n > 1024)
		abort();
	return ((double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec)) / (double)x->n;
}

int main(int argc, char **argv)
{
	uint64_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : 4000000;
	int rounds = argc > 2 ? atoi(argv[2]) : 3;
	struct run base = { .use_rte = false, .n = n }, rte = { .use_rte = true, .n = n };
	if (spsc_init(&base.s, 4096, sizeof(struct elem)) || !(rte.r = vring_create(4096, sizeof(struct elem)))) {
		fprintf(stderr, "ring_elem: out of memory\n");
		return 1;
	}
	double best_b = 1e30, best_r = 1e30, s_b = 1e30, s_r = 1e30;
	for (int i = 0; i < rounds; i++) {
		double b = run_single(&base), r = run_single(&rte);
		printf("round %d, one thread: hand-written SP/SC %.1f ns/elem, rte_ring elem SP/SC %.1f ns/elem\n",
		       i + 1, b, r);
		s_b = b < s_b ? b : s_b;
		s_r = r < s_r ? r : s_r;
	}
	for (int i = 0; i < rounds; i++) {
		double b = run_once(&base), r = run_once(&rte);
		printf("round %d, two threads: hand-written SP/SC %.1f ns/elem, rte_ring elem SP/SC %.1f ns/elem\n", i + 1, b, r);
		best_b = b < best_b ? b : best_b;
		best_r = r < best_r ? r : best_r;
	}
	printf("best of %d x %llu elements of %zu bytes, push+pop per element:\n"
	       "  one thread:  hand-written %.1f ns, rte_ring %.1f ns, ratio rte_ring/hand-written %.2f\n"
	       "  two threads: hand-written %.1f ns, rte_ring %.1f ns, ratio rte_ring/hand-written %.2f\n",
	       rounds, (unsigned long long)n, sizeof(struct elem), s_b, s_r, s_r / s_b, best_b, best_r,
	       best_r / best_b);
	free(base.s.data);
	free(rte.r);
	return 0;
}
