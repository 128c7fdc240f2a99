/* SPDX-License-Identifier: Apache-2.0 */
#include "common/crc32c.h"
#include <time.h>
#include <stdlib.h>

#include <string.h>
#include <x86intrin.h>

#define POLY 0x82f63b78u /* Castagnoli, reflected */

static uint32_t table[8][256];

/*
 * Stream lengths of the 3-way interleaved hardware loops, and x^(8*len), x^(16*len) mod P
 * to merge their partial CRCs: filled once by the constructor, so no lazily built state
 * is shared between threads.
 */
#define BLK_BIG 8192u
#define BLK_SMALL 512u
static uint32_t shift_big[2], shift_small[2];
static int have_hw;

static uint32_t gf2_xpow8n(size_t nbytes);
static uint32_t crc32c_sw(uint32_t c, const uint8_t *p, size_t n);
static uint32_t crc32c_hw(uint32_t c, const uint8_t *p, size_t n);
static void crc32c_pick(void);

__attribute__((constructor)) static void crc32c_init_table(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = (c >> 1) ^ (POLY & (0u - (c & 1u)));
		table[0][i] = c;
	}
	for (uint32_t i = 0; i < 256; i++)
		for (int t = 1; t < 8; t++)
			table[t][i] = (table[t - 1][i] >> 8) ^ table[0][table[t - 1][i] & 0xff];
	shift_big[0] = gf2_xpow8n(BLK_BIG);
	shift_big[1] = gf2_xpow8n(2 * BLK_BIG);
	shift_small[0] = gf2_xpow8n(BLK_SMALL);
	shift_small[1] = gf2_xpow8n(2 * BLK_SMALL);
	__builtin_cpu_init();
	have_hw = __builtin_cpu_supports("sse4.2") ? 1 : 0;
	crc32c_pick();
}

/* slicing-by-8, for CPUs without SSE4.2 */
static uint32_t crc32c_sw(uint32_t c, const uint8_t *p, size_t n)
{
	while (n && ((uintptr_t)p & 7)) {
		c = table[0][(c ^ *p++) & 0xff] ^ (c >> 8);
		n--;
	}
	while (n >= 8) {
		uint64_t w;
		memcpy(&w, p, 8);
		w ^= c;
		c = table[7][w & 0xff] ^ table[6][(w >> 8) & 0xff] ^ table[5][(w >> 16) & 0xff] ^
		    table[4][(w >> 24) & 0xff] ^ table[3][(w >> 32) & 0xff] ^
		    table[2][(w >> 40) & 0xff] ^ table[1][(w >> 48) & 0xff] ^ table[0][w >> 56];
		p += 8;
		n -= 8;
	}
	while (n--)
		c = table[0][(c ^ *p++) & 0xff] ^ (c >> 8);
	return c;
}

/* multiply a (reflected) by b (reflected) modulo P */
static uint32_t gf2_mul(uint32_t a, uint32_t b)
{
	uint32_t prod = 0;
	for (int i = 0; i < 32; i++) {
		if (a & 0x80000000u)
			prod ^= b;
		a <<= 1;
		b = (b >> 1) ^ (POLY & (0u - (b & 1u)));
	}
	return prod;
}

/* x^(8*nbytes) mod P, by square-and-multiply on x^8 */
static uint32_t gf2_xpow8n(size_t nbytes)
{
	uint32_t result = 0x80000000u; /* x^0 */
	uint32_t base = 0x00800000u;   /* x^8 (reflected) */
	size_t e = nbytes;
	while (e) {
		if (e & 1)
			result = gf2_mul(result, base);
		base = gf2_mul(base, base);
		e >>= 1;
	}
	return result;
}

/*
 * Hardware path: three independent crc32q streams over the three thirds of each block
 * hide the instruction's 3-cycle latency; the partial CRCs are merged with a GF(2)
 * multiply by the precomputed x^(8*len) (raw, non-inverted registers:
 * c = c0*x^(2B) ^ c1*x^B ^ c2).
 */
__attribute__((target("sse4.2"))) static uint32_t crc32c_hw(uint32_t c, const uint8_t *p, size_t n)
{
	while (n && ((uintptr_t)p & 7)) {
		c = __builtin_ia32_crc32qi(c, *p++);
		n--;
	}
	while (n >= 3 * BLK_BIG) {
		uint64_t c0 = c, c1 = 0, c2 = 0;
		const uint8_t *p1 = p + BLK_BIG, *p2 = p + 2 * BLK_BIG;
		for (size_t i = 0; i < BLK_BIG; i += 8) {
			uint64_t a, b, d;
			memcpy(&a, p + i, 8);
			memcpy(&b, p1 + i, 8);
			memcpy(&d, p2 + i, 8);
			c0 = __builtin_ia32_crc32di(c0, a);
			c1 = __builtin_ia32_crc32di(c1, b);
			c2 = __builtin_ia32_crc32di(c2, d);
		}
		c = gf2_mul((uint32_t)c0, shift_big[1]) ^ gf2_mul((uint32_t)c1, shift_big[0]) ^
		    (uint32_t)c2;
		p += 3 * BLK_BIG;
		n -= 3 * BLK_BIG;
	}
	uint64_t c64 = c;
	while (n >= 8) {
		uint64_t w;
		memcpy(&w, p, 8);
		c64 = __builtin_ia32_crc32di(c64, w);
		p += 8;
		n -= 8;
	}
	c = (uint32_t)c64;
	while (n--)
		c = __builtin_ia32_crc32qi(c, *p++);
	return c;
}

/*
 * One 3-stream round of CRC + copy: blk bytes per stream, dst 8-byte aligned. Each word
 * is loaded once, fed to crc32q and written with a non-temporal store (movnti): the
 * destination is a frame slot that this thread will not read again, so it is not worth
 * the read-for-ownership and the cache lines a normal store would cost.
 */
__attribute__((target("sse4.2"), always_inline)) static inline uint32_t
copy_round(uint32_t c, uint8_t *dst, const uint8_t *src, size_t blk, const uint32_t shift[2])
{
	uint64_t c0 = c, c1 = 0, c2 = 0;
	const uint8_t *s1 = src + blk, *s2 = src + 2 * blk;
	long long *d0 = (long long *)(void *)dst;
	long long *d1 = (long long *)(void *)(dst + blk);
	long long *d2 = (long long *)(void *)(dst + 2 * blk);
	for (size_t i = 0; i < blk / 8; i++) {
		uint64_t a, b, d;
		memcpy(&a, src + 8 * i, 8);
		memcpy(&b, s1 + 8 * i, 8);
		memcpy(&d, s2 + 8 * i, 8);
		c0 = __builtin_ia32_crc32di(c0, a);
		c1 = __builtin_ia32_crc32di(c1, b);
		c2 = __builtin_ia32_crc32di(c2, d);
		_mm_stream_si64(d0 + i, (long long)a);
		_mm_stream_si64(d1 + i, (long long)b);
		_mm_stream_si64(d2 + i, (long long)d);
	}
	return gf2_mul((uint32_t)c0, shift[1]) ^ gf2_mul((uint32_t)c1, shift[0]) ^ (uint32_t)c2;
}

__attribute__((target("sse4.2"))) static uint32_t crc32c_copy_hw(uint32_t c, uint8_t *dst,
								  const uint8_t *src, size_t n)
{
	while (n && ((uintptr_t)dst & 7)) {
		uint8_t b = *src++;
		*dst++ = b;
		c = __builtin_ia32_crc32qi(c, b);
		n--;
	}
	while (n >= 3 * BLK_BIG) {
		c = copy_round(c, dst, src, BLK_BIG, shift_big);
		dst += 3 * BLK_BIG;
		src += 3 * BLK_BIG;
		n -= 3 * BLK_BIG;
	}
	while (n >= 3 * BLK_SMALL) {
		c = copy_round(c, dst, src, BLK_SMALL, shift_small);
		dst += 3 * BLK_SMALL;
		src += 3 * BLK_SMALL;
		n -= 3 * BLK_SMALL;
	}
	uint64_t c64 = c;
	while (n >= 8) {
		uint64_t w;
		memcpy(&w, src, 8);
		c64 = __builtin_ia32_crc32di(c64, w);
		_mm_stream_si64((long long *)(void *)dst, (long long)w);
		src += 8;
		dst += 8;
		n -= 8;
	}
	c = (uint32_t)c64;
	while (n--) {
		uint8_t b = *src++;
		*dst++ = b;
		c = __builtin_ia32_crc32qi(c, b);
	}
	/* Non-temporal stores are weakly ordered: make them visible before the caller
	 * publishes the buffer to another thread (a ring push). */
	_mm_sfence();
	return c;
}

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/*
 * Under binary translation (qemu TCG: the Soft-RoCE test guest) the crc32 instruction is
 * emulated and runs at ~135 MB/s against ~650 MB/s for the table, so having SSE4.2 is not
 * enough: time both once at load (64 KiB, best of 3: well under a millisecond on real
 * hardware) and keep the faster. ING_CRC32C=hw|sw forces one (benchmarks, tests).
 */
static void crc32c_pick(void)
{
	static uint8_t buf[64 * 1024];
	const char *force = getenv("ING_CRC32C");

	if (force && !strcmp(force, "sw")) {
		have_hw = 0;
		return;
	}
	if (!have_hw || (force && !strcmp(force, "hw")))
		return;
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(i * 131u);
	uint64_t best_hw = UINT64_MAX, best_sw = UINT64_MAX;
	volatile uint32_t sink = 0;
	for (int r = 0; r < 3; r++) {
		uint64_t t0 = mono_ns();
		sink ^= crc32c_hw(0, buf, sizeof(buf));
		uint64_t t1 = mono_ns();
		sink ^= crc32c_sw(0, buf, sizeof(buf));
		uint64_t t2 = mono_ns();
		if (t1 - t0 < best_hw)
			best_hw = t1 - t0;
		if (t2 - t1 < best_sw)
			best_sw = t2 - t1;
	}
	(void)sink;
	if (best_sw < best_hw)
		have_hw = 0;
}

const char *ing_crc32c_impl(void)
{
	return have_hw ? "sse4.2" : "table";
}

uint32_t ing_crc32c(uint32_t crc, const void *buf, size_t len)
{
	crc = ~crc;
	crc = have_hw ? crc32c_hw(crc, buf, len) : crc32c_sw(crc, buf, len);
	return ~crc;
}

/* Below this a plain memcpy into (soon cached) lines beats the non-temporal set-up. */
#define COPY_NT_MIN 1024u

uint32_t ing_crc32c_copy(uint32_t crc, void *dst, const void *src, size_t len)
{
	if (!len)
		return crc;
	if (!have_hw || len < COPY_NT_MIN) {
		memcpy(dst, src, len);
		return ing_crc32c(crc, src, len);
	}
	return ~crc32c_copy_hw(~crc, dst, src, len);
}
