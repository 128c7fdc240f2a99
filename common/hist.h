/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The project's one latency histogram: fixed-size log-linear (HDR-style: 128 linear
 * sub-buckets per power of two, so a quantile is within 1/128 < 1 % of the true sample value
 * over the whole uint64 range, 1 ns .. centuries), plus exact counts at the fixed Prometheus
 * bounds (ing_hist_prom_le_ns: 100 us .. 30 s), so that quantiles (Acks, Stats) and /metrics
 * buckets come from the same samples. No allocation, one owner thread. Values in ns.
 * Debian packages no C HDR histogram library, hence this one (tests/unit/test_hist.c
 * checks it against exact percentiles of random samples).
 */
#ifndef ING_COMMON_HIST_H
#define ING_COMMON_HIST_H

#include <stdbool.h>
#include <stdint.h>

#define ING_HIST_SUB_BITS 7
#define ING_HIST_SUB (1u << ING_HIST_SUB_BITS)
#define ING_HIST_BUCKETS ((64 - ING_HIST_SUB_BITS + 1) * ING_HIST_SUB)

/* Prometheus bucket bounds (le, ns, inclusive): 100 us .. 30 s, then +Inf */
#define ING_HIST_PROM_NB 18
extern const uint64_t ing_hist_prom_le_ns[ING_HIST_PROM_NB];

struct ing_hist {
	uint64_t count;
	uint64_t min, max, sum;
	uint64_t prom[ING_HIST_PROM_NB + 1];   /* per Prometheus bucket (not cumulative); last +Inf */
	uint32_t b[ING_HIST_BUCKETS];
};

void ing_hist_reset(struct ing_hist *h);
void ing_hist_add(struct ing_hist *h, uint64_t v);
/* dst += src: dst then holds both histograms' samples (ingest-bench's repetitions). */
void ing_hist_merge(struct ing_hist *dst, const struct ing_hist *src);
/*
 * q in [0,1]; the upper edge of the bucket holding the q-quantile sample (rank
 * round(q*count), at least 1), capped at max: never below that sample, less than 1/128
 * above it. 0 if empty.
 */
uint64_t ing_hist_quantile(const struct ing_hist *h, double q);
/*
 * The q-quantile (q in [0,1]) of Prometheus-style bucket counts: counts[0..n] per bucket
 * (not cumulative), le[0..n-1] the buckets' inclusive upper bounds, counts[n] the +Inf
 * bucket; interpolated linearly within the bucket that holds rank q*total, the first bucket
 * from 0, as Prometheus's histogram_quantile() does (so within that bucket's bounds, no
 * closer). 0 when empty; le[n-1] with *over true when the rank falls in +Inf. For the
 * difference of two snapshots (ingest-stat's figures over a window).
 */
uint64_t ing_hist_prom_quantile(const uint64_t *counts, const uint64_t *le, unsigned n, double q,
				bool *over);
/* Largest value that falls into bucket b (b < ING_HIST_BUCKETS): for walking h->b (CDFs). */
uint64_t ing_hist_bucket_upper(unsigned b);


#endif
