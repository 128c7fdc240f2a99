/* SPDX-License-Identifier: Apache-2.0 */
#include "common/crc32c.h"

#include <string.h>

#define POLY 0x82f63b78u /* Castagnoli, reflected */

static uint32_t table[8][256];

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

/*
 * Hardware path: three independent crc32q streams over the three thirds of each block
 * hide the instruction's 3-cycle latency; the partial CRCs are merged by shifting with
 * the table-free method below (crc of zeros via repeated crc32 on the shifted value
 * would be slow, so the merge uses a small GF(2) multiply).
 */
static uint32_t gf2_mul_x8n(uint32_t crc, size_t nbytes); /* crc * x^(8*nbytes) mod P */

__attribute__((target("sse4.2"))) static uint32_t crc32c_hw(uint32_t c, const uint8_t *p, size_t n)
{
	while (n && ((uintptr_t)p & 7)) {
		c = __builtin_ia32_crc32qi(c, *p++);
		n--;
	}
	enum { BLK = 8192 }; /* bytes per stream per round */
	while (n >= 3 * BLK) {
		uint64_t c0 = c, c1 = 0, c2 = 0;
		const uint8_t *p1 = p + BLK, *p2 = p + 2 * BLK;
		for (size_t i = 0; i < BLK; i += 8) {
			uint64_t a, b, d;
			memcpy(&a, p + i, 8);
			memcpy(&b, p1 + i, 8);
			memcpy(&d, p2 + i, 8);
			c0 = __builtin_ia32_crc32di(c0, a);
			c1 = __builtin_ia32_crc32di(c1, b);
			c2 = __builtin_ia32_crc32di(c2, d);
		}
		/* raw (non-inverted) register merge: c = c0*x^(2B) ^ c1*x^B ^ c2 */
		c = gf2_mul_x8n((uint32_t)c0, 2 * BLK) ^ gf2_mul_x8n((uint32_t)c1, BLK) ^ (uint32_t)c2;
		p += 3 * BLK;
		n -= 3 * BLK;
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

static uint32_t gf2_mul_x8n(uint32_t crc, size_t nbytes)
{
	/* x^(8*nbytes) mod P, computed by square-and-multiply on x^8 ... cached per size */
	static __thread size_t cached_n[2];
	static __thread uint32_t cached_v[2];
	for (int i = 0; i < 2; i++)
		if (cached_n[i] == nbytes)
			return gf2_mul(crc, cached_v[i]);
	uint32_t result = 0x80000000u; /* x^0 */
	uint32_t base = 0x00800000u;   /* x^8 (reflected) */
	size_t e = nbytes;
	while (e) {
		if (e & 1)
			result = gf2_mul(result, base);
		base = gf2_mul(base, base);
		e >>= 1;
	}
	int slot = cached_n[0] ? 1 : 0;
	cached_n[slot] = nbytes;
	cached_v[slot] = result;
	return gf2_mul(crc, result);
}

uint32_t ing_crc32c(uint32_t crc, const void *buf, size_t len)
{
	static int have_hw = -1;
	if (have_hw < 0) {
		__builtin_cpu_init();
		have_hw = __builtin_cpu_supports("sse4.2") ? 1 : 0;
	}
	crc = ~crc;
	crc = have_hw ? crc32c_hw(crc, buf, len) : crc32c_sw(crc, buf, len);
	return ~crc;
}
