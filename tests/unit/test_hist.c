/* SPDX-License-Identifier: Apache-2.0 */
/* test_hist.c - common/hist.c: quantiles within 1 % of exact percentiles. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/hist.h"

static struct ing_hist h;

static void assert_close(uint64_t got, uint64_t want)
{
	/* upper bucket edge: never below the true value, at most 1/128 (< 1 %) above it */
	double lo = (double)want, hi = (double)want * (1.0 + 1.0 / 128) + 1.0;
	if ((double)got < lo || (double)got > hi)
		fail_msg("quantile %llu not within [%llu, %.0f]", (unsigned long long)got,
			 (unsigned long long)want, hi);
}

static void test_empty(void **state)
{
	(void)state;
	ing_hist_reset(&h);
	assert_int_equal(ing_hist_quantile(&h, 0.5), 0);
	assert_int_equal(h.count, 0);
}

static void test_small_exact(void **state)
{
	(void)state;
	ing_hist_reset(&h);
	for (uint64_t v = 0; v < 128; v++)
		ing_hist_add(&h, v);
	assert_int_equal(ing_hist_quantile(&h, 0.0), 0);
	assert_int_equal(ing_hist_quantile(&h, 0.5), 63);   /* rank 64 of 0..127 */
	assert_int_equal(ing_hist_quantile(&h, 1.0), 127);
	assert_int_equal(h.min, 0);
	assert_int_equal(h.max, 127);
}

static void test_uniform_quantiles(void **state)
{
	(void)state;
	const uint64_t n = 100000;
	ing_hist_reset(&h);
	for (uint64_t v = 1; v <= n; v++)
		ing_hist_add(&h, v * 1000);   /* 1 us .. 100 ms */
	assert_int_equal(h.count, n);
	static const double qs[] = { 0.01, 0.1, 0.5, 0.9, 0.99, 0.999, 1.0 };
	for (size_t i = 0; i < sizeof(qs) / sizeof(qs[0]); i++) {
		uint64_t rank = (uint64_t)(qs[i] * (double)n + 0.5);
		assert_close(ing_hist_quantile(&h, qs[i]), rank * 1000);
	}
	assert_int_equal(ing_hist_quantile(&h, 1.0), n * 1000);   /* capped at max */
	assert_int_equal(h.sum, 1000 * n * (n + 1) / 2);
}

static void test_huge_values(void **state)
{
	(void)state;
	ing_hist_reset(&h);
	ing_hist_add(&h, UINT64_MAX / 3);
	ing_hist_add(&h, 1ull << 62);
	assert_close(ing_hist_quantile(&h, 0.5), 1ull << 62);
	assert_int_equal(ing_hist_quantile(&h, 1.0), UINT64_MAX / 3);
}

/* Prometheus buckets of the same histogram: "le" is inclusive, above the last bound is
 * +Inf, sum and count kept; the quantiles see the same samples */
static void test_prom_buckets(void **state)
{
	struct ing_hist ph;
	(void)state;
	ing_hist_reset(&ph);
	ing_hist_add(&ph, 0);
	ing_hist_add(&ph, ing_hist_prom_le_ns[0]);         /* on the bound: that bucket */
	ing_hist_add(&ph, ing_hist_prom_le_ns[0] + 1);     /* just above: the next */
	ing_hist_add(&ph, 1000000000ull);                  /* 1 s */
	ing_hist_add(&ph, 3600000000000ull);               /* an hour: +Inf */
	assert_int_equal(ph.prom[0], 2);
	assert_int_equal(ph.prom[1], 1);
	unsigned one_s = 0;
	while (ing_hist_prom_le_ns[one_s] != 1000000000ull)
		one_s++;
	assert_int_equal(ph.prom[one_s], 1);
	assert_int_equal(ph.prom[ING_HIST_PROM_NB], 1);
	assert_int_equal(ph.count, 5);
	assert_true(ph.sum == 2 * ing_hist_prom_le_ns[0] + 1 + 1000000000ull + 3600000000000ull);
	for (unsigned i = 1; i < ING_HIST_PROM_NB; i++)
		assert_true(ing_hist_prom_le_ns[i] > ing_hist_prom_le_ns[i - 1]);
	assert_int_equal(ing_hist_quantile(&ph, 1.0), 3600000000000ull);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* xorshift64*: deterministic, so a failure reproduces */
static uint64_t rnd(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 2685821657736338717ull;
}

/*
 * Random samples spread evenly over the powers of two from 1 us to 60 s (the benchmark's range) plus a dense
 * cluster, compared with the exact percentiles of the sorted samples: every quantile the
 * benchmark prints is within 1 % (and never below the true sample).
 */
/* a window's quantile: the difference of two snapshots, interpolated as histogram_quantile() */
static void test_prom_window(void **state)
{
	static struct ing_hist wh;
	uint64_t before[ING_HIST_PROM_NB + 1], diff[ING_HIST_PROM_NB + 1];
	bool over;
	(void)state;
	ing_hist_reset(&wh);
	for (unsigned i = 0; i < 1000; i++)   /* a slow week: 20 ms each */
		ing_hist_add(&wh, 20000000ull);
	memcpy(before, wh.prom, sizeof(before));
	for (unsigned i = 0; i < 100; i++)    /* this minute: 200 us each */
		ing_hist_add(&wh, 200000ull);
	for (unsigned i = 0; i <= ING_HIST_PROM_NB; i++)
		diff[i] = wh.prom[i] - before[i];
	/* since start the P99 is the slow frames'; over the window, the fast ones' bucket */
	assert_true(ing_hist_quantile(&wh, 0.99) >= 20000000ull);
	uint64_t p99 = ing_hist_prom_quantile(diff, ing_hist_prom_le_ns, ING_HIST_PROM_NB, 0.99, &over);
	assert_false(over);
	assert_true(p99 == 100000ull + (uint64_t)(150000.0 * 0.99));   /* 100..250 us, linear */
	assert_int_equal(ing_hist_prom_quantile(diff, ing_hist_prom_le_ns, ING_HIST_PROM_NB, 0.0, &over),
			 100000ull);
	/* the first bucket starts at 0 */
	memset(diff, 0, sizeof(diff));
	diff[0] = 4;
	assert_int_equal(ing_hist_prom_quantile(diff, ing_hist_prom_le_ns, ING_HIST_PROM_NB, 0.5, &over),
			 50000ull);
	/* beyond the last bound: that bound, marked */
	diff[ING_HIST_PROM_NB] = 96;
	assert_int_equal(ing_hist_prom_quantile(diff, ing_hist_prom_le_ns, ING_HIST_PROM_NB, 0.99, &over),
			 30000000000ull);
	assert_true(over);
	memset(diff, 0, sizeof(diff));
	assert_int_equal(ing_hist_prom_quantile(diff, ing_hist_prom_le_ns, ING_HIST_PROM_NB, 0.99, &over), 0);
}

/* two repetitions merged: the same as one histogram of both's samples */
static void test_merge(void **state)
{
	static struct ing_hist a, b, both;
	(void)state;
	ing_hist_reset(&a);
	ing_hist_reset(&b);
	ing_hist_reset(&both);
	for (uint64_t i = 1; i <= 1000; i++) {
		ing_hist_add(i % 2 ? &a : &b, i * 7919);
		ing_hist_add(&both, i * 7919);
	}
	ing_hist_merge(&a, &b);
	assert_memory_equal(&a, &both, sizeof(a));
	ing_hist_reset(&b);
	ing_hist_merge(&a, &b);   /* an empty one changes nothing */
	assert_memory_equal(&a, &both, sizeof(a));
	ing_hist_reset(&b);
	ing_hist_merge(&b, &both);   /* into an empty one: a copy */
	assert_memory_equal(&b, &both, sizeof(b));
}

static void test_random_vs_exact(void **state)
{
	(void)state;
	enum { N = 200003 };
	static uint64_t v[N];
	uint64_t seed = 0x9e3779b97f4a7c15ull;
	ing_hist_reset(&h);
	for (unsigned i = 0; i < N; i++) {
		unsigned e = 10 + (unsigned)(rnd(&seed) % 26);   /* 2^10 ns (1 us) .. 2^36 (69 s) */
		if (i % 4 == 0)   /* a cluster around 2.6 ms, like an unloaded median */
			v[i] = 2600000 + rnd(&seed) % 50000;
		else
			v[i] = (1ull << e) + rnd(&seed) % (1ull << e);
		ing_hist_add(&h, v[i]);
	}
	qsort(v, N, sizeof(v[0]), cmp_u64);
	static const double qs[] = { 0.0, 0.001, 0.25, 0.5, 0.9, 0.95, 0.99, 0.999, 0.9999, 1.0 };
	for (size_t i = 0; i < sizeof(qs) / sizeof(qs[0]); i++) {
		uint64_t rank = (uint64_t)(qs[i] * (double)N + 0.5);
		if (rank < 1)
			rank = 1;
		uint64_t want = v[rank - 1], got = ing_hist_quantile(&h, qs[i]);
		double rel = ((double)got - (double)want) / (double)want;
		if (got < want || rel > 0.01)
			fail_msg("q=%g: histogram %llu, exact %llu (%.3f %%)", qs[i],
				 (unsigned long long)got, (unsigned long long)want, rel * 100);
	}
	assert_int_equal(h.min, v[0]);
	assert_int_equal(h.max, v[N - 1]);
	/* every bucket's upper edge maps back into that bucket, and edges increase */
	for (unsigned b = 1; b < ING_HIST_BUCKETS; b++)
		assert_true(ing_hist_bucket_upper(b) > ing_hist_bucket_upper(b - 1));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_empty),
		cmocka_unit_test(test_prom_window),
		cmocka_unit_test(test_merge),
		cmocka_unit_test(test_small_exact),
		cmocka_unit_test(test_uniform_quantiles),
		cmocka_unit_test(test_huge_values),
		cmocka_unit_test(test_prom_buckets),
		cmocka_unit_test(test_random_vs_exact),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
