/* SPDX-License-Identifier: Apache-2.0 */
#include "common/parse.h"

#include <ctype.h>
#include <errno.h>
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
