/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Strict parsing of command-line numbers, shared by every program and option parser.
 * No sign, no trailing garbage, no overflow. Any thread.
 */
#ifndef ING_COMMON_PARSE_H
#define ING_COMMON_PARSE_H

#include <stddef.h>
#include <stdint.h>

/*
 * A byte size: decimal digits and an optional binary multiple K, M, G, T (also Ki/KiB/KB,
 * any case, so "16M", "16MiB" and "16mb" are all 16 << 20), or a plain "B".
 * 0, -EINVAL (malformed) or -ERANGE (does not fit in 64 bits).
 */
int ing_parse_size(const char *s, uint64_t *out);
/* The same over exactly n bytes of s (no terminator needed), for lists like "4M:16,16M:8". */
int ing_parse_size_n(const char *s, size_t n, uint64_t *out);
/* A whole number, decimal or 0x-hex, at most max. 0, -EINVAL or -ERANGE. */
int ing_parse_u64(const char *s, uint64_t max, uint64_t *out);
/*
 * A duration: a number with a unit, "500ms", "30s", "2m", "1h", "7d", "1.5s" (a fraction is fine as
 * long as the result is whole milliseconds), or several from the largest unit down, added up:
 * "2h30m", "1m30s", "1d12h", "1s500ms" (each unit once). A bare number counts in bare_unit_ms
 * (1000: the flag's old unit was seconds, 1: milliseconds; 0: a unit is required). Result in milliseconds, at most max_ms.
 * 0, -EINVAL (malformed, or finer than 1 ms) or -ERANGE (above max_ms).
 */
int ing_parse_duration_ms(const char *s, uint64_t bare_unit_ms, uint64_t max_ms, uint64_t *out);
/* "30s", "500ms", "2m", "1h", "1500ms": the shortest exact spelling of ms into buf (days as
 * hours: "168h"). */
const char *ing_fmt_duration(uint64_t ms, char *buf, size_t len);
/* bytes as ing_parse_size takes them back: "4M", "1G", "1536K", "1000" */
const char *ing_fmt_size(uint64_t v, char *buf, size_t len);

/* One item of a size list: a size (lo == hi) or a range lo-hi. */
struct ing_size_range {
	uint64_t lo, hi;
};
#define ING_SIZES_MAX 8
/*
 * A size list, the one grammar of every --sizes flag: items separated by ',', each a size
 * ("4M") or a range of sizes ("1M-16M"), e.g. "4M", "1M-16M", "64K,4M,16M-64M". Sizes are
 * ing_parse_size's, at least 1 byte; a range has lo <= hi. At most max items (<=
 * ING_SIZES_MAX). 0 with *n items in out, or -EINVAL with the reason in why.
 */
int ing_parse_sizes(const char *s, struct ing_size_range *out, unsigned max, unsigned *n,
		    char *why, size_t whylen);

/* The value of one hex digit (either case), or -1 (percent-decoding: ids, grpc-message). */
int ing_hex_digit(char c);

#endif
