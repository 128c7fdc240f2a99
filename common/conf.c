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
		char *eq = strchr(s, '=');
		if (!eq) {
			snprintf(why, whylen, "want 'key = value'");
			return -EINVAL;
		}
		char *key = trim(s, eq);
		char *val = trim(eq + 1, eq + 1 + strlen(eq + 1));
		if (!key_ok(key)) {
			snprintf(why, whylen, "'%.64s' is not a key", key);
			return -EINVAL;
		}
		size_t vl = strlen(val);
		if (vl && val[0] == '"') {
			if (vl < 2 || val[vl - 1] != '"') {
				snprintf(why, whylen, "unterminated \" in the value of %.64s", key);
				return -EINVAL;
			}
			val[vl - 1] = 0;
			val++;
		}
		rc = cb(arg, key, val, ln);
		if (rc)
			return rc;
	}
	*line = 0;
	return 0;
}
