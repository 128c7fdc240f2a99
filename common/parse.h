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
/* The value of one hex digit (either case), or -1 (percent-decoding: ids, grpc-message). */
int ing_hex_digit(char c);

#endif
