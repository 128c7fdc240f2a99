/* SPDX-License-Identifier: Apache-2.0 */
/* ident.c - the frame/wafer id rule (see ident.h). */
#include "common/ident.h"
#include "common/parse.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <openssl/sha.h>

/*
 * Length of the valid UTF-8 sequence at s[0..n), or 0 when it is not one (overlong
 * forms, surrogates and code points above U+10FFFF are invalid, RFC 3629). *cp gets the
 * code point.
 */
static size_t utf8_seq(const unsigned char *s, size_t n, uint32_t *cp)
{
	unsigned char c = s[0];
	size_t len;
	uint32_t v, min;

	if (c < 0x80) {
		*cp = c;
		return 1;
	}
	if (c >= 0xc2 && c <= 0xdf) {
		len = 2, v = c & 0x1f, min = 0x80;
	} else if (c >= 0xe0 && c <= 0xef) {
		len = 3, v = c & 0x0f, min = 0x800;
	} else if (c >= 0xf0 && c <= 0xf4) {
		len = 4, v = c & 0x07, min = 0x10000;
	} else {
		return 0;
	}
	if (n < len)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		v = (v << 6) | (s[i] & 0x3f);
	}
	if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
		return 0;
	*cp = v;
	return len;
}

static bool is_control(uint32_t cp)
{
	return cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp <= 0x9f);
}

const char *ing_id_check(const char *id, size_t len)
{
	const unsigned char *s = (const unsigned char *)id;

	if (!id || len == 0)
		return "is empty";
	if (len > ING_ID_MAX)
		return "is longer than 256 bytes";
	for (size_t i = 0; i < len;) {
		uint32_t cp;
		size_t k = utf8_seq(s + i, len - i, &cp);
		if (k == 0)
			return "is not valid UTF-8";
		if (is_control(cp))
			return "contains a control character";
		i += k;
	}
	return NULL;
}

bool ing_utf8_valid(const char *str, size_t len)
{
	const unsigned char *s = (const unsigned char *)str;
	for (size_t i = 0; i < len;) {
		uint32_t cp;
		size_t k = utf8_seq(s + i, len - i, &cp);
		if (k == 0)
			return false;
		i += k;
	}
	return true;
}

uint64_t ing_id_hash(const char *id, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (size_t i = 0; i < len; i++) {
		h ^= (unsigned char)id[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

uint64_t ing_id_pair_hash(const char *wafer, const char *frame)
{
	uint64_t h = ing_id_hash(wafer, strlen(wafer));
	/* a separator no valid id contains, so ("a", "bc") and ("ab", "c") differ */
	h ^= 0xff;
	h *= 0x100000001b3ull;
	uint64_t f = ing_id_hash(frame, strlen(frame));
	return h ^ (f + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2));
}

char *ing_id_printable(char *out, size_t cap, const char *id, size_t len)
{
	const unsigned char *s = (const unsigned char *)id;
	size_t o = 0;

	if (cap == 0)
		return out;
	for (size_t i = 0; i < len;) {
		uint32_t cp;
		size_t k = utf8_seq(s + i, len - i, &cp);
		char tmp[8];
		size_t tn;
		if (k == 0 || is_control(cp)) {
			k = 1;
			tn = (size_t)snprintf(tmp, sizeof(tmp), "\\x%02x", s[i]);
		} else {
			memcpy(tmp, s + i, k);
			tn = k;
		}
		if (o + tn + 4 > cap) {     /* room for "..." and the NUL */
			if (o + 4 <= cap) {
				memcpy(out + o, "...", 3);
				o += 3;
			}
			break;
		}
		memcpy(out + o, tmp, tn);
		o += tn;
		i += k;
	}
	out[o < cap ? o : cap - 1] = '\0';
	return out;
}

/*
 * On-disk names. An id made only of [A-Za-z0-9._-] that is not "." or ".." and has at
 * most NAME_LONG bytes is its own name. Any other id is percent-encoded: every byte outside [A-Za-z0-9_-] (the dot too)
 * becomes %XX, so the name always holds a '%' and never equals a plain one. An encoded
 * name longer than NAME_LONG keeps a prefix and ends in '~' plus the SHA-256 of
 * the id ('~' is never in the other two forms). So distinct ids get distinct names, no
 * name is "." or ".." or holds a '/', and "<name>.frame.tmp.<pid>" fits NAME_MAX (255).
 * The catalog keeps the original id; the name is only where the bytes live.
 */
#define NAME_LONG 200u
#define NAME_PREFIX 120u

static bool plain_char(unsigned char ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
	       ch == '_' || ch == '-';
}

int ing_id_file_name(char *out, size_t cap, const char *id)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t n = id ? strlen(id) : 0;
	bool plain = n > 0 && strcmp(id, ".") != 0 && strcmp(id, "..") != 0;
	size_t o = 0;

	if (!id || ing_id_check(id, n))
		return -EINVAL;
	for (size_t i = 0; plain && i < n; i++)
		plain = plain_char((unsigned char)id[i]) || id[i] == '.';
	if (plain && n <= NAME_LONG) {
		if (n + 1 > cap)
			return -ENAMETOOLONG;
		memcpy(out, id, n + 1);
		return 0;
	}
	char enc[3 * ING_ID_MAX + 1];
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)id[i];
		if (plain_char(ch)) {
			enc[o++] = (char)ch;
		} else {
			enc[o++] = '%';
			enc[o++] = hex[ch >> 4];
			enc[o++] = hex[ch & 15];
		}
	}
	enc[o] = '\0';
	if (o > NAME_LONG) {
		unsigned char md[SHA256_DIGEST_LENGTH];
		size_t k = NAME_PREFIX;
		/* never cut a %XX apart */
		if (enc[k - 1] == '%')
			k -= 1;
		else if (enc[k - 2] == '%')
			k -= 2;
		SHA256((const unsigned char *)id, n, md);
		o = k;
		enc[o++] = '~';
		for (size_t i = 0; i < sizeof(md); i++) {
			enc[o++] = hex[md[i] >> 4];
			enc[o++] = hex[md[i] & 15];
		}
		enc[o] = '\0';
	}
	if (o + 1 > cap)
		return -ENAMETOOLONG;
	memcpy(out, enc, o + 1);
	return 0;
}

int ing_id_from_file_name(char *out, size_t cap, const char *name)
{
	char id[ING_ID_MAX + 1], again[ING_ID_FILE_NAME_MAX + 1];
	size_t n;

	if (strchr(name, '~'))
		return -ENOENT;   /* '~' is escaped everywhere but in a shortened name */
	if (ing_id_unescape(id, sizeof(id), name))
		return -EINVAL;   /* a bad %XX, or longer than any id */
	/* only the one encoding of an id is its name (no "%41" for "A", no lower-case hex) */
	if (ing_id_file_name(again, sizeof(again), id) || strcmp(again, name))
		return -EINVAL;
	n = strlen(id);
	if (n + 1 > cap)
		return -ENAMETOOLONG;
	memcpy(out, id, n + 1);
	return 0;
}

char *ing_id_escape(char *out, size_t cap, const char *id)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t o = 0;

	if (!cap)
		return out;
	for (const unsigned char *s = (const unsigned char *)id; *s; s++) {
		bool esc = *s <= 0x20 || *s == '%' || *s >= 0x7f;
		if (o + (esc ? 3 : 1) >= cap)
			break;
		if (esc) {
			out[o++] = '%';
			out[o++] = hex[*s >> 4];
			out[o++] = hex[*s & 15];
		} else {
			out[o++] = (char)*s;
		}
	}
	out[o] = '\0';
	return out;
}

int ing_id_unescape(char *out, size_t cap, const char *tok)
{
	size_t o = 0;

	for (const char *s = tok; *s; s++) {
		int c = (unsigned char)*s;
		if (c == '%') {
			int hi = ing_hex_digit(s[1]), lo = hi < 0 ? -1 : ing_hex_digit(s[2]);
			if (hi < 0 || lo < 0)
				return -EINVAL;
			c = hi * 16 + lo;
			s += 2;
		}
		if (o + 1 >= cap)
			return -EINVAL;
		out[o++] = (char)c;
	}
	if (!cap)
		return -EINVAL;
	out[o] = '\0';
	return 0;
}
