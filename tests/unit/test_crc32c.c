/* SPDX-License-Identifier: Apache-2.0 */
/* test_crc32c.c - common/crc32c.c against known vectors and a bitwise reference. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/crc32c.h"

/* ingestd registers ISA-L's crc (common/crc32c_isal.c): so do these tests, so that every
 * test below runs on it, and test_variants checks it and every built-in one */
static bool registered;

static uint32_t ref_crc32c(uint32_t crc, const uint8_t *p, size_t n)
{
	crc = ~crc;
	while (n--) {
		crc ^= *p++;
		for (int k = 0; k < 8; k++)
			crc = (crc >> 1) ^ (0x82f63b78u & (0u - (crc & 1u)));
	}
	return ~crc;
}

static uint64_t rng_state = 0x243f6a8885a308d3ull;

static uint8_t rnd8(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (uint8_t)rng_state;
}

static void test_vectors(void **state)
{
	(void)state;
	uint8_t zeros[32] = { 0 }, ones[32], inc[32];
	memset(ones, 0xff, sizeof(ones));
	for (int i = 0; i < 32; i++)
		inc[i] = (uint8_t)i;
	assert_int_equal(ing_crc32c(0, "123456789", 9), 0xe3069283u);
	assert_int_equal(ing_crc32c(0, "", 0), 0);
	assert_int_equal(ing_crc32c(0, "a", 1), 0xc1d04330u);
	/* RFC 3720 B.4 iSCSI test vectors */
	assert_int_equal(ing_crc32c(0, zeros, 32), 0x8a9136aau);
	assert_int_equal(ing_crc32c(0, ones, 32), 0x62a8ab43u);
	assert_int_equal(ing_crc32c(0, inc, 32), 0x46dd794eu);
}

static void test_chaining(void **state)
{
	(void)state;
	const char *s = "123456789";
	for (size_t cut = 0; cut <= 9; cut++) {
		uint32_t c = ing_crc32c(0, s, cut);
		assert_int_equal(ing_crc32c(c, s + cut, 9 - cut), 0xe3069283u);
	}
}

static void test_against_reference(void **state)
{
	(void)state;
	size_t max = 3 * 8192 * 3 + 4099;   /* several rounds of the 3-stream hw path */
	uint8_t *buf = malloc(max + 16);
	assert_non_null(buf);
	for (size_t i = 0; i < max + 16; i++)
		buf[i] = rnd8();
	static const size_t sizes[] = { 1, 2, 3, 7, 8, 9, 15, 63, 255, 1023, 4097, 8191, 24575,
					24576, 24577, 49153, 3 * 8192 * 3 + 4099 };
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		for (size_t off = 0; off < 8; off += 3) {   /* odd start alignment too */
			uint32_t want = ref_crc32c(0, buf + off, sizes[s]);
			assert_int_equal(ing_crc32c(0, buf + off, sizes[s]), want);
			/* chained in two uneven pieces */
			size_t half = sizes[s] / 3;
			uint32_t c = ing_crc32c(0, buf + off, half);
			assert_int_equal(ing_crc32c(c, buf + off + half, sizes[s] - half), want);
		}
	}
	free(buf);
}

static void test_long_buffer(void **state)
{
	(void)state;
	size_t n = (4u << 20) + 13;   /* a frame-sized odd length */
	uint8_t *buf = malloc(n);
	assert_non_null(buf);
	for (size_t i = 0; i < n; i++)
		buf[i] = rnd8();
	assert_int_equal(ing_crc32c(0, buf, n), ref_crc32c(0, buf, n));
	free(buf);
}

/*
 * ing_crc32c_copy: every byte copied, nothing around dst touched, and the crc equal to
 * the reference, for lengths around each path's edges (bytes, words, 3 x 512, 3 x 8192)
 * and every src/dst misalignment mix; chained over uneven pieces as the fallback path
 * chains chunks.
 */
static void test_copy(void **state)
{
	(void)state;
	size_t max = 3 * 8192 * 2 + 3 * 512 * 3 + 77;
	uint8_t *src = malloc(max + 16), *dst = malloc(max + 64);
	assert_non_null(src);
	assert_non_null(dst);
	for (size_t i = 0; i < max + 16; i++)
		src[i] = rnd8();
	static const size_t sizes[] = { 0, 1, 7, 8, 9, 1023, 1024, 1025, 1535, 1536, 1537, 3071,
					24575, 24576, 24577, 24576 + 1536 + 5,
					3 * 8192 * 2 + 3 * 512 * 3 + 77 };
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		size_t n = sizes[s];
		for (size_t so = 0; so < 8; so += 3) {
			for (size_t dof = 0; dof < 16; dof += 5) {
				memset(dst, 0xa5, max + 64);
				uint32_t want = ref_crc32c(0x12345678u, src + so, n);
				uint32_t got = ing_crc32c_copy(0x12345678u, dst + 16 + dof, src + so, n);
				assert_int_equal(got, want);
				assert_memory_equal(dst + 16 + dof, src + so, n);
				for (size_t i = 0; i < 16 + dof; i++)
					assert_int_equal(dst[i], 0xa5);
				for (size_t i = 16 + dof + n; i < max + 64; i++)
					assert_int_equal(dst[i], 0xa5);
			}
		}
		/* chained in three uneven pieces, as chunks arrive */
		size_t a = n / 7, b = n / 2;
		uint32_t c = ing_crc32c_copy(0, dst, src, a);
		c = ing_crc32c_copy(c, dst + a, src + a, b - a);
		c = ing_crc32c_copy(c, dst + b, src + b, n - b);
		assert_int_equal(c, ref_crc32c(0, src, n));
		assert_memory_equal(dst, src, n);
	}
	free(src);
	free(dst);
}

/*
 * Every implementation built for this architecture that this CPU can run (sse4.2 or
 * armv8-crc, and the table) against the bitwise reference: random lengths 0..100 KiB,
 * random start alignments, random chaining seeds, plain and fused with a copy. The one in
 * use must be one of them, and the best usable one unless $ING_CRC32C forced another.
 */
static void test_variants(void **state)
{
	(void)state;
	size_t max = 100 * 1024 + 64;
	uint8_t *src = malloc(max), *dst = malloc(max);
	assert_non_null(src);
	assert_non_null(dst);
	for (size_t i = 0; i < max; i++)
		src[i] = rnd8();
	size_t nv = ing_crc32c_variants(), ran = 0, first_usable = nv;
	int in_use = 0;
	assert_true(nv >= 1);
	assert_null(ing_crc32c_variant(nv, NULL));
	for (size_t v = 0; v < nv; v++) {
		int ok = 0;
		const char *name = ing_crc32c_variant(v, &ok);
		assert_non_null(name);
		if (!strcmp(name, ing_crc32c_impl()))
			in_use = 1;
		if (!ok) {
			uint32_t c = 0;
			assert_int_equal(ing_crc32c_variant_run(v, &c, NULL, src, 8), -ENOTSUP);
			printf("crc32c variant %s: not supported by this CPU\n", name);
			continue;
		}
		if (first_usable == nv)
			first_usable = v;
		ran++;
		for (int r = 0; r < 400; r++) {
			size_t len = (size_t)(((uint32_t)rnd8() << 16 | (uint32_t)rnd8() << 8 | rnd8()) %
					      (100 * 1024));
			if (r < 64)
				len = (size_t)r;          /* every short length */
			size_t off = rnd8() % 64;
			uint32_t seed = r & 1 ? ((uint32_t)rnd8() << 24 | rnd8()) : 0;
			uint32_t want = ref_crc32c(seed, src + off, len), c = seed;
			assert_int_equal(ing_crc32c_variant_run(v, &c, NULL, src + off, len), 0);
			assert_int_equal(c, want);
			size_t doff = rnd8() % 16;
			memset(dst, 0x5a, max);
			c = seed;
			assert_int_equal(ing_crc32c_variant_run(v, &c, dst + doff, src + off, len), 0);
			assert_int_equal(c, want);
			assert_memory_equal(dst + doff, src + off, len);
			for (size_t i = 0; i < doff; i++)
				assert_int_equal(dst[i], 0x5a);
			for (size_t i = doff + len; i < max; i++)
				assert_int_equal(dst[i], 0x5a);
		}
		printf("crc32c variant %s: checked against the reference\n", name);
	}
	assert_true(ran >= 1);
	assert_true(in_use);
	/* the one in use: the registered one (ISA-L, as ingestd registers it), else the first
	 * built-in this CPU can run */
	if (!getenv("ING_CRC32C"))
		assert_string_equal(ing_crc32c_impl(), registered ? "isa-l" :
				    ing_crc32c_variant(first_usable, NULL));
	free(src);
	free(dst);
}

int main(void)
{
	ing_crc32c_use_isal();
	registered = true;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_vectors),
		cmocka_unit_test(test_chaining),
		cmocka_unit_test(test_against_reference),
		cmocka_unit_test(test_long_buffer),
		cmocka_unit_test(test_copy),
		cmocka_unit_test(test_variants),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
