/* SPDX-License-Identifier: Apache-2.0 */
#include "common/token.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int ing_secret_file_open(const char *path, char *why, size_t whylen)
{
	struct stat st;
	int rc = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		rc = -errno;
		snprintf(why, whylen, "%s", strerror(-rc));
		return rc;
	}
	if (fstat(fd, &st) != 0) {
		rc = -errno;
		snprintf(why, whylen, "%s", strerror(-rc));
	} else if (!S_ISREG(st.st_mode)) {
		rc = -EINVAL;
		snprintf(why, whylen, "not a regular file");
	} else if (st.st_mode & (S_IRWXG | S_IRWXO)) {
		rc = -EPERM;
		snprintf(why, whylen, "mode %03o lets group/other at the secret: chmod 600 %s",
			 (unsigned)(st.st_mode & 0777), path);
	}
	if (rc) {
		close(fd);
		return rc;
	}
	return fd;
}

int ing_token_file_read(const char *path, char *tok, size_t cap, char *why, size_t whylen)
{
	char buf[ING_AUTH_TOKEN_MAX + 2];
	ssize_t n;
	int rc = 0;

	int fd = ing_secret_file_open(path, why, whylen);
	if (fd < 0)
		return fd;
	size_t len = 0;
	while (len < sizeof(buf) && (n = read(fd, buf + len, sizeof(buf) - len)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = -errno;
			snprintf(why, whylen, "%s", strerror(-rc));
			break;
		}
		len += (size_t)n;
	}
	close(fd);
	if (!rc && len > 0 && buf[len - 1] == '\n')
		len--;
	if (!rc && (len < ING_AUTH_TOKEN_MIN || len > ING_AUTH_TOKEN_MAX || len >= cap)) {
		rc = -EINVAL;
		snprintf(why, whylen, "the token must be one line of %u..%u printable characters%s",
			 ING_AUTH_TOKEN_MIN, ING_AUTH_TOKEN_MAX, len < ING_AUTH_TOKEN_MIN ? " (too short)" :
			 " (too long)");
	}
	for (size_t i = 0; !rc && i < len; i++) {
		if (buf[i] < 0x20 || buf[i] > 0x7e) {
			rc = -EINVAL;
			snprintf(why, whylen, "the token must be one line of %u..%u printable characters "
				 "(character %zu is not)", ING_AUTH_TOKEN_MIN, ING_AUTH_TOKEN_MAX, i + 1);
		}
	}
	if (!rc) {
		memcpy(tok, buf, len);
		tok[len] = '\0';
	}
	explicit_bzero(buf, sizeof(buf));
	return rc;
}
