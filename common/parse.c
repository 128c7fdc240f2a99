/* SPDX-License-Identifier: Apache-2.0 */
#include "common/parse.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

int ing_parse_size_n(const char *s, size_t n, uint64_t *out)
{
	size_t i = 0;
	uint64_t v = 0;

	if (!s || !n || !isdigit((unsigned char)s[0]))
		return -EINVAL;
	for (; i < n && isdigit((unsigned char)s[i]); i++) {
		unsigned d = (unsigned)(s[i] - '0');
		if (v > (UINT64_MAX - d) / 10)
			return -ERANGE;
		v = v * 10 + d;
	}
	unsigned shift = 0;
	if (i < n) {
		switch (toupper((unsigned char)s[i])) {
		case 'K': shift = 10; break;
		case 'M': shift = 20; break;
		case 'G': shift = 30; break;
		case 'T': shift = 40; break;
		case 'B': shift = 0; break;
		default: return -EINVAL;
		}
		if (toupper((unsigned char)s[i]) != 'B') {
			i++;
			if (i < n && toupper((unsigned char)s[i]) == 'I')
				i++;
			if (i < n && toupper((unsigned char)s[i]) == 'B')
				i++;
		} else {
			i++;
		}
	}
	if (i != n)
		return -EINVAL;
	if (shift && v > (UINT64_MAX >> shift))
		return -ERANGE;
	*out = v << shift;
	return 0;
}

int ing_parse_size(const char *s, uint64_t *out)
{
	return s ? ing_parse_size_n(s, strlen(s), out) : -EINVAL;
}

int ing_parse_u64(const char *s, uint64_t max, uint64_t *out)
{
	unsigned base = 10;
	uint64_t v = 0;

	if (!s || !*s)
		return -EINVAL;
	if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
		base = 16;
		s += 2;
		if (!*s)
			return -EINVAL;
	}
	for (; *s; s++) {
		unsigned d;
		if (isdigit((unsigned char)*s))
			d = (unsigned)(*s - '0');
		else if (base == 16 && isxdigit((unsigned char)*s))
			d = (unsigned)(toupper((unsigned char)*s) - 'A' + 10);
		else
			return -EINVAL;
		if (v > (UINT64_MAX - d) / base)
			return -ERANGE;
		v = v * base + d;
	}
	if (v > max)
		return -ERANGE;
	*out = v;
	return 0;
}

int ing_hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* one "NUMBER[.FRACTION]" of a duration at *pp: whole and frac/frac_div; 0 or -errno */
static int duration_number(const char **pp, uint64_t *whole, uint64_t *frac, uint64_t *frac_div)
{
	const char *p = *pp;
	*whole = *frac = 0;
	*frac_div = 1;
	if (!isdigit((unsigned char)*p))
		return -EINVAL;
	for (; isdigit((unsigned char)*p); p++) {
		if (*whole > (UINT64_MAX - 9) / 10)
			return -ERANGE;
		*whole = *whole * 10 + (uint64_t)(*p - '0');
	}
	if (*p == '.') {
		p++;
		if (!isdigit((unsigned char)*p))
			return -EINVAL;
		for (; isdigit((unsigned char)*p); p++) {
			if (*frac_div >= 1000000000ull)
				return -EINVAL;   /* finer than any unit needs */
			*frac = *frac * 10 + (uint64_t)(*p - '0');
			*frac_div *= 10;
		}
	}
	*pp = p;
	return 0;
}

/* the unit at *pp (longest match: "ms" before "m"), its size in ms; 0: none there */
static uint64_t duration_unit(const char **pp)
{
	static const struct { const char *name; uint64_t ms; } units[] = {
		{ "ms", 1 }, { "min", 60000 }, { "s", 1000 }, { "m", 60000 }, { "h", 3600000 },
		{ "d", 86400000 },
	};
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		size_t n = strlen(units[i].name);
		if (!strncmp(*pp, units[i].name, n) && !isalpha((unsigned char)(*pp)[n])) {
			*pp += n;
			return units[i].ms;
		}
	}
	return 0;
}

int ing_parse_duration_ms(const char *s, uint64_t bare_unit_ms, uint64_t max_ms, uint64_t *out)
{
	uint64_t total = 0, last_unit = UINT64_MAX;
	const char *p = s;

	if (!s || !*s)
		return -EINVAL;
	/* "30s", or parts from the largest unit down: "2h30m", "1m30s", "1s500ms" */
	do {
		uint64_t whole, frac, frac_div, unit;
		int rc = duration_number(&p, &whole, &frac, &frac_div);
		if (rc)
			return rc;
		if (!*p && p != s && total == 0 && last_unit == UINT64_MAX)
			unit = bare_unit_ms;   /* a bare number: the flag's old unit */
		else if (!(unit = duration_unit(&p)) || unit >= last_unit)
			return -EINVAL;   /* no unit after a part, or units not largest first */
		if (!unit || (frac * unit) % frac_div)
			return -EINVAL;   /* a bare number where none is allowed, or not whole ms */
		if (whole > UINT64_MAX / unit)
			return -ERANGE;
		uint64_t ms = whole * unit + frac * unit / frac_div;
		if (ms < whole * unit || total + ms < total)
			return -ERANGE;
		total += ms;
		last_unit = unit;
	} while (*p);
	if (total > max_ms)
		return -ERANGE;
	*out = total;
	return 0;
}

const char *ing_fmt_duration(uint64_t ms, char *buf, size_t len)
{
	if (ms && ms % 3600000 == 0)
		snprintf(buf, len, "%lluh", (unsigned long long)(ms / 3600000));
	else if (ms && ms % 60000 == 0)
		snprintf(buf, len, "%llum", (unsigned long long)(ms / 60000));
	else if (ms % 1000 == 0)
		snprintf(buf, len, "%llus", (unsigned long long)(ms / 1000));
	else
		snprintf(buf, len, "%llums", (unsigned long long)ms);
	return buf;
}

const char *ing_fmt_size(uint64_t v, char *buf, size_t len)
{
	static const char u[] = "KMGT";
	unsigned k = 0;
	while (k < 4 && v && v % 1024 == 0) {
		v /= 1024;
		k++;
	}
	if (k)
		snprintf(buf, len, "%llu%c", (unsigned long long)v, u[k - 1]);
	else
		snprintf(buf, len, "%llu", (unsigned long long)v);
	return buf;
}

int ing_parse_sizes(const char *s, struct ing_size_range *out, unsigned max, unsigned *n,
		    char *why, size_t whylen)
{
	unsigned k = 0;

	if (!s || !*s) {
		snprintf(why, whylen, "empty: give sizes like 4M or 1M-16M, separated by ','");
		return -EINVAL;
	}
	if (max > ING_SIZES_MAX)
		max = ING_SIZES_MAX;
	for (const char *p = s;;) {
		const char *end = strchr(p, ',');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		const char *dash = memchr(p, '-', len);
		struct ing_size_range r;
		if (k == max) {
			snprintf(why, whylen, "more than %u sizes", max);
			return -EINVAL;
		}
		if (!len) {
			snprintf(why, whylen, "item %u is empty (a stray ',')", k + 1);
			return -EINVAL;
		}
		if (dash ? ing_parse_size_n(p, (size_t)(dash - p), &r.lo) ||
			   ing_parse_size_n(dash + 1, len - (size_t)(dash - p) - 1, &r.hi)
			 : ing_parse_size_n(p, len, &r.lo)) {
			snprintf(why, whylen, "'%.*s' is not a size (4096, 64K, 4M, 1G) or a range MIN-MAX",
				 (int)(len > 64 ? 64 : len), p);
			return -EINVAL;
		}
		if (!dash)
			r.hi = r.lo;
		if (!r.lo || r.lo > r.hi) {
			snprintf(why, whylen, "'%.*s': sizes are at least 1 byte and a range is MIN-MAX",
				 (int)(len > 64 ? 64 : len), p);
			return -EINVAL;
		}
		out[k++] = r;
		if (!end)
			break;
		p = end + 1;
	}
	*n = k;
	return 0;
}
