/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_parse - the flag and config parsers: ing_parse_size/_n, ing_parse_u64, the
 * durations and --sizes lists (common/parse.c) and the --pool class list
 * (ing_pool_spec_parse, dataplane/pool_spec.c). Input: one selector byte, then the text.
 * Oracles: an independent 128-bit reference computes every accepted value (no silent
 * overflow, no trailing garbage accepted); ing_parse_size(s) == ing_parse_size_n(s,
 * strlen(s)); an accepted pool list has 1..max classes, each of 1 byte..1 TiB and
 * 1..1000000 slots, exactly as many as the text lists; an accepted duration is at most
 * its maximum and reads back the same from its shortest spelling; an accepted --sizes
 * list has one item per ',', each 1 <= lo <= hi.
 */
#include "common/parse.h"
#include "common/log.h"
#include "dataplane/dataplane.h"

#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef unsigned __int128 u128;

/* reference: digits then an optional K/M/G/T (+ i, + B) or B; -1 malformed, -2 too big */
static int ref_size(const char *s, size_t n, uint64_t *out)
{
	size_t i = 0;
	u128 v = 0;
	bool big = false;
	while (i < n && s[i] >= '0' && s[i] <= '9') {
		v = v * 10 + (unsigned)(s[i] - '0');
		if (v > UINT64_MAX)
			big = true, v = (u128)UINT64_MAX + 1;
		i++;
	}
	if (i == 0)
		return -1;
	unsigned shift = 0;
	if (i < n) {
		char u = (char)toupper((unsigned char)s[i]);
		const char *units = "KMGT";
		const char *q = u ? strchr(units, u) : NULL;
		if (q) {
			shift = 10u * (unsigned)(q - units + 1);
			i++;
			if (i < n && toupper((unsigned char)s[i]) == 'I')
				i++;
			if (i < n && toupper((unsigned char)s[i]) == 'B')
				i++;
		} else if (u == 'B') {
			i++;
		} else {
			return -1;
		}
	}
	if (i != n)
		return -1;
	if (big || (v << shift) > UINT64_MAX)
		return -2;
	*out = (uint64_t)(v << shift);
	return 0;
}

static int ref_u64(const char *s, uint64_t max, uint64_t *out)
{
	unsigned base = 10;
	u128 v = 0;
	bool big = false;
	if (!*s)
		return -1;
	if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
		base = 16;
		s += 2;
		if (!*s)
			return -1;
	}
	for (; *s; s++) {
		unsigned d;
		if (*s >= '0' && *s <= '9')
			d = (unsigned)(*s - '0');
		else if (base == 16 && isxdigit((unsigned char)*s))
			d = (unsigned)(tolower((unsigned char)*s) - 'a' + 10);
		else
			return -1;
		v = v * base + d;
		if (v > UINT64_MAX)
			big = true, v = (u128)UINT64_MAX + 1;
	}
	if (big || v > max)
		return -2;
	*out = (uint64_t)v;
	return 0;
}

static void check(int rc, int ref, uint64_t got, uint64_t want)
{
	if (ref == 0 && (rc != 0 || got != want))
		abort();
	/* garbage after an overflowing number may be reported as either */
	if (ref == -1 && rc != -EINVAL && rc != -ERANGE)
		abort();
	if (ref == -2 && rc != -ERANGE)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static bool quiet;
	if (!quiet) {
		ing_log_set_level(ING_LOG_ERR);
		quiet = true;
	}
	if (size < 1 || size > 4096)
		return 0;
	uint8_t sel = data[0];
	size_t n = size - 1;
	char *s = malloc(n + 1);
	if (!s)
		abort();
	memcpy(s, data + 1, n);
	s[n] = 0;
	size_t sl = strlen(s);
	uint64_t v = 0, w = 0;
	int rc, ref;

	if (sel & 0x40) {
		if (sel & 1) {
			struct ing_size_range r[ING_SIZES_MAX];
			unsigned k = 0, commas = 0;
			char why[160];
			if (ing_parse_sizes(s, r, ING_SIZES_MAX, &k, why, sizeof(why)) == 0) {
				for (size_t i = 0; i < sl; i++)
					commas += s[i] == ',';
				if (k < 1 || k > ING_SIZES_MAX || k != commas + 1)
					abort();
				for (unsigned i = 0; i < k; i++)
					if (!r[i].lo || r[i].lo > r[i].hi)
						abort();
			}
		} else {
			uint64_t max = (sel & 0x80) ? UINT64_MAX : 86400000, bare = (sel & 2) ? 1 : 1000;
			char buf[48];
			if (ing_parse_duration_ms(s, bare, max, &v) == 0) {
				if (v > max || ing_parse_duration_ms(ing_fmt_duration(v, buf, sizeof(buf)), 0,
								     UINT64_MAX, &w) || w != v)
					abort();
			}
		}
		free(s);
		return 0;
	}
	switch (sel % 3) {
	case 0:
		rc = ing_parse_size_n(s, n, &v);
		ref = ref_size(s, n, &w);
		if (memchr(s, 0, n))
			break;   /* embedded NUL: the _n form must still not read past n */
		check(rc, ref, v, w);
		rc = ing_parse_size(s, &v);
		check(rc, ref, v, w);
		break;
	case 1: {
		uint64_t max = (sel & 0x80) ? UINT64_MAX : ((uint64_t)1 << (sel & 63)) - 1;
		rc = ing_parse_u64(s, max, &v);
		ref = ref_u64(s, max, &w);
		check(rc, ref, v, w);
		break;
	}
	default: {
		struct ing_pool_opts o;
		ing_pool_opts_init(&o);
		rc = ing_pool_parse_classes(&o, s);
		if (rc != 0)
			break;
		unsigned commas = 0;
		for (size_t i = 0; i < sl; i++)
			commas += s[i] == ',';
		if (o.nclasses < 1 || o.nclasses > ING_POOL_MAX_CLASSES || o.nclasses != commas + 1)
			abort();
		for (unsigned i = 0; i < o.nclasses; i++)
			if (o.cls[i].slot_size == 0 || o.cls[i].slot_size > (1ull << 40) ||
			    o.cls[i].count == 0 || o.cls[i].count > 1000000)
				abort();
		break;
	}
	}
	free(s);
	return 0;
}
