/* SPDX-License-Identifier: Apache-2.0 */
/*
 * CRC-32C with one implementation per instruction set, chosen once at load by what the
 * CPU says it has (cpuid on x86, AT_HWCAP on arm64), never by timing:
 *   sse4.2     x86-64 crc32q, three interleaved streams merged by a GF(2) multiply
 *   armv8-crc  arm64 crc32cx, the same three-stream layout
 *   table      slicing-by-8, any CPU
 * and, registered by programs that link it (ing_crc32c_register), ISA-L's crc32_iscsi
 * (PCLMUL folding): ingestd's fallback computes the crc32c over slot bytes still in the
 * cache right after the recv that placed them, where the three-stream crc32q loop (~8
 * bytes a cycle) is the limit and ISA-L is 2.3x faster (docs/ARCHITECTURE.md).
 * $ING_CRC32C=table|sse4.2|armv8-crc overrides the choice (e.g. the table under qemu TCG,
 * where crc32 is emulated and slower than the table); an unknown or unsupported name is
 * ignored with a warning.
 */
#include "common/crc32c.h"
#include "common/log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#elif defined(__aarch64__)
#include <arm_acle.h>
#include <sys/auxv.h>
#ifndef HWCAP_CRC32
#define HWCAP_CRC32 (1 << 7)
#endif
#endif

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

static uint32_t gf2_xpow8n(size_t nbytes);

/* slicing-by-8: raw (non-inverted) register in and out */
static uint32_t crc_table(uint32_t c, const uint8_t *p, size_t n)
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

static uint32_t copy_generic(uint32_t (*crc)(uint32_t, const uint8_t *, size_t), uint32_t c,
			     uint8_t *dst, const uint8_t *src, size_t n)
{
	memcpy(dst, src, n);
	return crc(c, src, n);
}

static uint32_t copy_table(uint32_t c, uint8_t *dst, const uint8_t *src, size_t n)
{
	return copy_generic(crc_table, c, dst, src, n);
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

#if defined(__x86_64__)
/*
 * Hardware path: three independent crc32q streams over the three thirds of each block
 * hide the instruction's 3-cycle latency; the partial CRCs are merged with a GF(2)
 * multiply by the precomputed x^(8*len) (raw, non-inverted registers:
 * c = c0*x^(2B) ^ c1*x^B ^ c2).
 */
__attribute__((target("sse4.2"))) static uint32_t crc_sse42(uint32_t c, const uint8_t *p, size_t n)
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

/* Below this a plain memcpy into (soon cached) lines beats the non-temporal set-up. */
#define COPY_NT_MIN 1024u

__attribute__((target("sse4.2"))) static uint32_t copy_sse42(uint32_t c, uint8_t *dst,
							      const uint8_t *src, size_t n)
{
	if (n < COPY_NT_MIN)
		return copy_generic(crc_sse42, c, dst, src, n);
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

static int have_sse42(void)
{
	__builtin_cpu_init();
	return __builtin_cpu_supports("sse4.2") ? 1 : 0;
}
#endif /* __x86_64__ */

#if defined(__aarch64__)
/* ARMv8 CRC32 extension: crc32cx has a 3-cycle latency too, so the same 3-stream layout. */
__attribute__((target("+crc"))) static uint32_t crc_armv8(uint32_t c, const uint8_t *p, size_t n)
{
	while (n && ((uintptr_t)p & 7)) {
		c = __crc32cb(c, *p++);
		n--;
	}
	while (n >= 3 * BLK_BIG) {
		uint32_t c0 = c, c1 = 0, c2 = 0;
		const uint8_t *p1 = p + BLK_BIG, *p2 = p + 2 * BLK_BIG;
		for (size_t i = 0; i < BLK_BIG; i += 8) {
			uint64_t a, b, d;
			memcpy(&a, p + i, 8);
			memcpy(&b, p1 + i, 8);
			memcpy(&d, p2 + i, 8);
			c0 = __crc32cd(c0, a);
			c1 = __crc32cd(c1, b);
			c2 = __crc32cd(c2, d);
		}
		c = gf2_mul(c0, shift_big[1]) ^ gf2_mul(c1, shift_big[0]) ^ c2;
		p += 3 * BLK_BIG;
		n -= 3 * BLK_BIG;
	}
	while (n >= 8) {
		uint64_t w;
		memcpy(&w, p, 8);
		c = __crc32cd(c, w);
		p += 8;
		n -= 8;
	}
	while (n--)
		c = __crc32cb(c, *p++);
	return c;
}

static uint32_t copy_armv8(uint32_t c, uint8_t *dst, const uint8_t *src, size_t n)
{
	return copy_generic(crc_armv8, c, dst, src, n);
}

static int have_armv8_crc(void)
{
	return (getauxval(AT_HWCAP) & HWCAP_CRC32) ? 1 : 0;
}
#endif /* __aarch64__ */

struct crc_impl {
	const char *name;
	int (*supported)(void);                        /* NULL: always */
	uint32_t (*crc)(uint32_t raw, const uint8_t *p, size_t n);
	uint32_t (*copy)(uint32_t raw, uint8_t *dst, const uint8_t *src, size_t n);
};

/* best first */
static const struct crc_impl impls[] = {
#if defined(__x86_64__)
	{ "sse4.2", have_sse42, crc_sse42, copy_sse42 },
#endif
#if defined(__aarch64__)
	{ "armv8-crc", have_armv8_crc, crc_armv8, copy_armv8 },
#endif
	{ "table", NULL, crc_table, copy_table },
};
#define NIMPLS (sizeof(impls) / sizeof(impls[0]))

static const struct crc_impl *active = &impls[NIMPLS - 1];
static struct crc_impl ext;   /* registered (ing_crc32c_register); name NULL: none */
static const struct crc_impl *builtin = &impls[NIMPLS - 1];   /* its copy: ext's too */

static uint32_t copy_ext(uint32_t c, uint8_t *dst, const uint8_t *src, size_t n)
{
	return builtin->copy(c, dst, src, n);
}

static int impl_usable(const struct crc_impl *im)
{
	return !im->supported || im->supported();
}

static size_t nvariants(void)
{
	return NIMPLS + (ext.name ? 1 : 0);
}

static const struct crc_impl *variant(size_t i)
{
	return i < NIMPLS ? &impls[i] : &ext;
}

/* The best usable (a registered one first), or the one $ING_CRC32C names. */
static void select_impl(void)
{
	for (size_t i = 0; i < NIMPLS; i++) {
		if (impl_usable(&impls[i])) {
			builtin = &impls[i];
			break;
		}
	}
	active = ext.name ? &ext : builtin;
	const char *force = getenv("ING_CRC32C");
	if (force && *force) {
		size_t i;
		for (i = 0; i < nvariants(); i++)
			if (!strcmp(force, variant(i)->name) && impl_usable(variant(i)))
				break;
		if (i < nvariants())
			active = variant(i);
		else if (ext.name || NIMPLS > 1)
			ING_WARN("crc32c", "ING_CRC32C=%s is not an implementation this CPU can run: using %s",
				 force, active->name);
	}
}

void ing_crc32c_register(const struct ing_crc32c_ext *e)
{
	ext.name = e->name;
	ext.supported = NULL;
	ext.crc = e->crc;
	ext.copy = copy_ext;
	select_impl();
}

__attribute__((constructor)) static void crc32c_init(void)
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

	select_impl();
}

const char *ing_crc32c_impl(void)
{
	return active->name;
}

uint32_t ing_crc32c(uint32_t crc, const void *buf, size_t len)
{
	return ~active->crc(~crc, buf, len);
}

uint32_t ing_crc32c_copy(uint32_t crc, void *dst, const void *src, size_t len)
{
	if (!len)
		return crc;
	return ~active->copy(~crc, dst, src, len);
}

size_t ing_crc32c_variants(void)
{
	return nvariants();
}

const char *ing_crc32c_variant(size_t i, int *usable)
{
	if (i >= nvariants())
		return NULL;
	if (usable)
		*usable = impl_usable(variant(i));
	return variant(i)->name;
}

int ing_crc32c_variant_run(size_t i, uint32_t *crc, void *dst, const void *src, size_t len)
{
	if (i >= nvariants() || !impl_usable(variant(i)))
		return -ENOTSUP;
	if (dst)
		*crc = len ? ~variant(i)->copy(~*crc, dst, src, len) : *crc;
	else
		*crc = ~variant(i)->crc(~*crc, src, len);
	return 0;
}
