/* SPDX-License-Identifier: Apache-2.0 */
#include "common/hist.h"

#include <string.h>

static unsigned bucket_of(uint64_t v)
{
	if (v < ING_HIST_SUB)
		return (unsigned)v;
	unsigned msb = 63u - (unsigned)__builtin_clzll(v); /* >= ING_HIST_SUB_BITS */
	unsigned sh = msb - ING_HIST_SUB_BITS;
	unsigned sub = (unsigned)(v >> sh) & (ING_HIST_SUB - 1);
	return (sh + 1) * ING_HIST_SUB + sub;
}

uint64_t ing_hist_bucket_upper(unsigned b)
{
	if (b < ING_HIST_SUB)
		return b;
	unsigned sh = b / ING_HIST_SUB - 1, sub = b % ING_HIST_SUB;
	uint64_t lo = ((uint64_t)(ING_HIST_SUB + sub)) << sh;
	return lo + ((1ull << sh) - 1);
}

void ing_hist_reset(struct ing_hist *h)
{
	memset(h, 0, sizeof(*h));
}

/* 100 us .. 30 s: a frame of 1..64 MiB takes ~1 ms (memory) to seconds (slow disk, queue) */
const uint64_t ing_hist_prom_le_ns[ING_HIST_PROM_NB] = {
	100000ull, 250000ull, 500000ull, 1000000ull, 2500000ull, 5000000ull, 10000000ull,
	25000000ull, 50000000ull, 100000000ull, 250000000ull, 500000000ull, 1000000000ull,
	2500000000ull, 5000000000ull, 10000000000ull, 20000000000ull, 30000000000ull,
};

void ing_hist_add(struct ing_hist *h, uint64_t v)
{
	unsigned p = 0;
	while (p < ING_HIST_PROM_NB && v > ing_hist_prom_le_ns[p])   /* le: inclusive */
		p++;
	h->prom[p]++;
	unsigned b = bucket_of(v);
	if (b >= ING_HIST_BUCKETS)
		b = ING_HIST_BUCKETS - 1;
	h->b[b]++;
	if (!h->count || v < h->min)
		h->min = v;
	if (v > h->max)
		h->max = v;
	h->count++;
	h->sum += v;
}

void ing_hist_merge(struct ing_hist *dst, const struct ing_hist *src)
{
	if (!src->count)
		return;
	if (!dst->count || src->min < dst->min)
		dst->min = src->min;
	if (src->max > dst->max)
		dst->max = src->max;
	dst->count += src->count;
	dst->sum += src->sum;
	for (unsigned i = 0; i <= ING_HIST_PROM_NB; i++)
		dst->prom[i] += src->prom[i];
	for (unsigned i = 0; i < ING_HIST_BUCKETS; i++)
		dst->b[i] += src->b[i];
}

uint64_t ing_hist_quantile(const struct ing_hist *h, double q)
{
	if (!h->count)
		return 0;
	uint64_t rank = (uint64_t)(q * (double)h->count + 0.5);
	if (rank < 1)
		rank = 1;
	if (rank > h->count)
		rank = h->count;
	uint64_t seen = 0;
	for (unsigned b = 0; b < ING_HIST_BUCKETS; b++) {
		seen += h->b[b];
		if (seen >= rank) {
			uint64_t up = ing_hist_bucket_upper(b);
			return up > h->max ? h->max : up;
		}
	}
	return h->max;
}


uint64_t ing_hist_prom_quantile(const uint64_t *counts, const uint64_t *le, unsigned n, double q,
				bool *over)
{
	uint64_t total = 0, cum = 0;
	*over = false;
	for (unsigned i = 0; i <= n; i++)
		total += counts[i];
	if (!total || !n)
		return 0;
	double rank = q * (double)total;
	for (unsigned i = 0; i < n; i++) {
		if (counts[i] && (double)(cum + counts[i]) >= rank) {
			double lo = i ? (double)le[i - 1] : 0.0, hi = (double)le[i];
			double in = (rank - (double)cum) / (double)counts[i];
			return (uint64_t)(lo + (hi - lo) * (in < 0 ? 0 : in));
		}
		cum += counts[i];
	}
	*over = true;
	return le[n - 1];
}
