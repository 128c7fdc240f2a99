/* SPDX-License-Identifier: Apache-2.0 */
/* synth.c - deterministic synthetic frame content and sizes (definition in synth.h). */
#include "common/parse.h"
#include "producer/synth.h"
#include "common/crc32c.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define G 0x9e3779b97f4a7c15ull

static inline uint64_t mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

uint64_t synth_mix64(uint64_t z)
{
	return mix64(z);
}

uint64_t synth_frame_len(const struct synth_spec *s, uint64_t frame_id)
{
	const struct ing_size_range *r = &s->sizes[0];
	if (s->nsizes > 1)
		r = &s->sizes[mix64(s->seed ^ 0x2545f4914f6cdd1dull ^ mix64(frame_id)) % s->nsizes];
	if (r->hi <= r->lo)
		return r->lo;
	uint64_t span = r->hi - r->lo + 1;
	return r->lo + mix64(s->seed ^ 0x5bd1e9955bd1e995ull ^ mix64(frame_id)) % span;
}

void synth_spec_fixed(struct synth_spec *s, uint64_t seed, uint64_t size)
{
	memset(s, 0, sizeof(*s));
	s->seed = seed;
	s->nsizes = 1;
	s->sizes[0].lo = s->sizes[0].hi = size;
}

int synth_spec_sizes(struct synth_spec *s, const char *list, char *why, size_t whylen)
{
	struct ing_size_range r[ING_SIZES_MAX];
	unsigned n;
	if (ing_parse_sizes(list, r, ING_SIZES_MAX, &n, why, whylen))
		return -EINVAL;
	memcpy(s->sizes, r, sizeof(r[0]) * n);
	s->nsizes = n;
	return 0;
}

uint64_t synth_spec_max(const struct synth_spec *s)
{
	uint64_t m = 0;
	for (unsigned i = 0; i < s->nsizes; i++)
		if (s->sizes[i].hi > m)
			m = s->sizes[i].hi;
	return m;
}

static inline uint64_t frame_key(uint64_t frame_id, uint64_t seed)
{
	return mix64(seed ^ mix64(frame_id + G));
}

void synth_fill(void *buf, uint64_t len, uint64_t frame_id, uint64_t seed)
{
	uint8_t *b = buf;
	uint64_t key = frame_key(frame_id, seed), i = 0, nw = len / 8;

	for (; i < nw; i++) {
		uint64_t w = mix64(key + (i + 1) * G);
		memcpy(b + 8 * i, &w, 8);   /* x86: little-endian, as the definition says */
	}
	if (len % 8) {
		uint64_t w = mix64(key + (i + 1) * G);
		for (uint64_t j = 0; j < len % 8; j++)
			b[8 * i + j] = (uint8_t)(w >> (8 * j));
	}
}

/* Generation and CRC-32C in one pass: the word just made is still in a register. */
__attribute__((target("sse4.2"))) static uint32_t fill_crc_hw(uint8_t *b, uint64_t len, uint64_t key)
{
	uint64_t c = 0xffffffffu, i = 0, nw = len / 8;

	for (; i < nw; i++) {
		uint64_t w = mix64(key + (i + 1) * G);
		memcpy(b + 8 * i, &w, 8);
		c = __builtin_ia32_crc32di(c, w);
	}
	if (len % 8) {
		uint64_t w = mix64(key + (i + 1) * G);
		for (uint64_t j = 0; j < len % 8; j++) {
			uint8_t v = (uint8_t)(w >> (8 * j));
			b[8 * i + j] = v;
			c = __builtin_ia32_crc32qi((uint32_t)c, v);
		}
	}
	return ~(uint32_t)c;
}

uint32_t synth_fill_crc(void *buf, uint64_t len, uint64_t frame_id, uint64_t seed)
{
	if (__builtin_cpu_supports("sse4.2"))
		return fill_crc_hw(buf, len, frame_key(frame_id, seed));
	synth_fill(buf, len, frame_id, seed);
	return ing_crc32c(0, buf, len);
}

/* Byte-exact position of the first difference in words [i0, i0 + n) of b. */
static uint64_t first_diff(const uint8_t *b, uint64_t len, uint64_t key, uint64_t i0, uint64_t n)
{
	for (uint64_t i = i0; i < i0 + n; i++) {
		uint64_t w = mix64(key + (i + 1) * G);
		for (uint64_t j = 0; j < 8 && 8 * i + j < len; j++)
			if (b[8 * i + j] != (uint8_t)(w >> (8 * j)))
				return 8 * i + j;
	}
	return UINT64_MAX;
}

uint64_t synth_compare(const void *buf, uint64_t len, uint64_t frame_id, uint64_t seed)
{
	enum { BLK = 512 };   /* words per block: branch once per 4 KiB */
	const uint8_t *b = buf;
	uint64_t key = frame_key(frame_id, seed), nw = len / 8, i = 0;

	while (i < nw) {
		uint64_t n = nw - i < BLK ? nw - i : BLK, acc = 0;
		for (uint64_t k = i; k < i + n; k++) {
			uint64_t got;
			memcpy(&got, b + 8 * k, 8);
			acc |= got ^ mix64(key + (k + 1) * G);
		}
		if (acc)
			return first_diff(b, len, key, i, n);
		i += n;
	}
	return len % 8 ? first_diff(b, len, key, nw, 1) : UINT64_MAX;
}
