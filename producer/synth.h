/* SPDX-License-Identifier: Apache-2.0 */
/*
 * synth.h - deterministic synthetic frames, shared by ingest-send (generates), ingest-verify
 * and the tests (regenerate and compare). Anyone can re-implement it from this comment:
 *
 *   mix64(z):  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
 *              z = (z ^ (z >> 27)) * 0x94d049bb133111eb
 *              return z ^ (z >> 31)                          (splitmix64's finaliser)
 *   G        = 0x9e3779b97f4a7c15
 *   n        = synth_key(frame id) = 64-bit FNV-1a of the id's bytes
 *              (offset basis 0xcbf29ce484222325, prime 0x100000001b3)
 *   key      = mix64(seed ^ mix64(n + G))
 *   word[i]  = mix64(key + (i + 1) * G)                      (i = 0, 1, 2, ...; mod 2^64)
 *   byte[j]  = (word[j / 8] >> (8 * (j % 8))) & 0xff         (little-endian words)
 *
 *   length(n) with sizes [lo, hi]:
 *              lo + mix64(seed ^ 0x5bd1e9955bd1e995 ^ mix64(n)) % (hi - lo + 1)
 *   with a list of k > 1 sizes or ranges (--sizes 64K,4M,16M-64M): item
 *              i = mix64(seed ^ 0x2545f4914f6cdd1d ^ mix64(n)) % k
 *   then the length above over item i's [lo, hi] (a single size: lo = hi).
 *
 * So frame content depends only on (frame id, seed), a prefix of a longer frame equals the
 * shorter one, and "--sizes 1M-16M --seed S" yields uniformly mixed, mostly unaligned sizes.
 * Internal to the project (not exported from libingest.so).
 */
#ifndef ING_PRODUCER_SYNTH_H
#define ING_PRODUCER_SYNTH_H

#include <stdint.h>
#include <stddef.h>
#include <string.h>

#include "common/ident.h"
#include "common/parse.h"

/* The number a frame id's synthetic content and length derive from (frame_id below). */
static inline uint64_t synth_key(const char *frame_id)
{
	return ing_id_hash(frame_id, strlen(frame_id));
}

struct synth_spec {
	uint64_t seed;
	unsigned nsizes;     /* 1..ING_SIZES_MAX */
	struct ing_size_range sizes[ING_SIZES_MAX];   /* bytes, lo >= 1, hi >= lo */
};

/* One size for every frame. */
void synth_spec_fixed(struct synth_spec *s, uint64_t seed, uint64_t size);
/* --sizes LIST (common/parse.h's one grammar, ing_parse_sizes). 0 or -EINVAL with why. */
int synth_spec_sizes(struct synth_spec *s, const char *list, char *why, size_t whylen);
/* The largest length the spec makes. */
uint64_t synth_spec_max(const struct synth_spec *s);

uint64_t synth_mix64(uint64_t z);
/* Length of frame key n (synth_key) under spec. */
uint64_t synth_frame_len(const struct synth_spec *s, uint64_t n);
/* Fill buf[0..len) with the content of frame key n (synth_key). ~ memory speed. */
void synth_fill(void *buf, uint64_t len, uint64_t n, uint64_t seed);
/* synth_fill, returning ing_crc32c(0, buf, len) computed in the same pass (~2x faster). */
uint32_t synth_fill_crc(void *buf, uint64_t len, uint64_t n, uint64_t seed);
/* Offset of the first byte differing from the generated content, UINT64_MAX if none. */
uint64_t synth_compare(const void *buf, uint64_t len, uint64_t n, uint64_t seed);

#endif
