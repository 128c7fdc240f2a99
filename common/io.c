/* SPDX-License-Identifier: Apache-2.0 */
#include "common/io.h"

#include <errno.h>
#include <stdint.h>
#include <unistd.h>

int ing_read_full(int fd, void *buf, size_t len)
{
	size_t off = 0;
	while (off < len) {
		ssize_t n = read(fd, (uint8_t *)buf + off, len - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO;
		off += (size_t)n;
	}
	return 0;
}
