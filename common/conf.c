/* SPDX-License-Identifier: Apache-2.0 */
#include "common/conf.h"

#include <ctype.h>
#include <stdbool.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static char *trim(char *s, char *end)
{
	while (s < end && isspace((unsigned char)*s))
		s++;
	while (end > s && isspace((unsigned char)end[-1]))
		end--;
	*end = 0;
	return s;
}

static bool key_ok(const char *k)
{
	if (!*k)
		return false;
	for (; *k; k++)
		if (!isalnum((unsigned char)*k) && *k != '-' && *k != '_')
			return false;
	return true;
}

/*
 * The value after '=' (NUL-terminated, trimmed in place): a '#' at its start or after a
 * blank begins a comment; a value in double quotes keeps its spaces and '#'s, and only a
 * comment may follow it.
 */
static int value_of(char *v, const char *key, char **out, char *why, size_t whylen)
{
	char *end = v + strlen(v);
	while (v < end && isspace((unsigned char)*v))
		v++;
	if (*v == '"') {
		char *close = strchr(v + 1, '"');
		if (!close) {
			snprintf(why, whylen, "unterminated \" in the value of %.64s", key);
			return -EINVAL;
		}
		char *rest = close + 1;
		while (isspace((unsigned char)*rest))
			rest++;
		if (*rest && *rest != '#') {
			snprintf(why, whylen, "'%.32s' after the quoted value of %.64s (a comment starts "
				 "with ' #')", rest, key);
			return -EINVAL;
		}
		*close = 0;
		*out = v + 1;
		return 0;
	}
	for (char *c = v; *c; c++)
		if (*c == '#' && (c == v || isspace((unsigned char)c[-1]))) {
			end = c;
			break;
		}
	*out = trim(v, end);
	return 0;
}

int ing_conf_read(const char *path, char *buf, size_t cap, ing_conf_cb cb, void *arg,
		  unsigned *line, char *why, size_t whylen)
{
	size_t len = 0;
	int fd, rc = 0;

	*line = 0;
	why[0] = 0;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		snprintf(why, whylen, "%s", strerror(-rc));
		return rc;
	}
	for (;;) {
		char probe;
		bool full = len >= cap - 1;
		ssize_t n = full ? read(fd, &probe, 1) : read(fd, buf + len, cap - 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = -errno;
			snprintf(why, whylen, "%s", strerror(-rc));
			break;
		}
		if (n == 0)
			break;
		if (full) {
			rc = -EINVAL;
			snprintf(why, whylen, "file larger than %zu bytes", cap - 1);
			break;
		}
		len += (size_t)n;
	}
	close(fd);
	if (rc)
		return rc;
	buf[len] = 0;
	if (memchr(buf, 0, len)) {
		snprintf(why, whylen, "a NUL byte: not a text file");
		return -EINVAL;
	}

	char *p = buf, *end = buf + len;
	for (unsigned ln = 1; p < end; ln++) {
		char *nl = memchr(p, '\n', (size_t)(end - p));
		char *eol = nl ? nl : end;
		char *s = trim(p, eol);
		p = nl ? nl + 1 : end;
		if (!*s || *s == '#')
			continue;
		*line = ln;
		char *eq = strchr(s, '='), *kend = eq;
		if (!eq) {   /* a bare key, perhaps with a comment */
			for (kend = s; *kend && !(*kend == '#' && isspace((unsigned char)kend[-1])); kend++)
				;
		}
		char *key = trim(s, kend);
		if (!key_ok(key)) {
			if (!eq)
				snprintf(why, whylen, "want 'key = value' (or a bare key for a setting "
					 "that is on or off)");
			else
				snprintf(why, whylen, "'%.64s' is not a key", key);
			return -EINVAL;
		}
		char *val = NULL;   /* a bare key: no value */
		if (eq && (rc = value_of(eq + 1, key, &val, why, whylen)))
			return rc;
		rc = cb(arg, key, val, ln);
		if (rc)
			return rc;
	}
	*line = 0;
	return 0;
}
