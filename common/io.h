/* SPDX-License-Identifier: Apache-2.0 */
#ifndef ING_COMMON_IO_H
#define ING_COMMON_IO_H

#include <stddef.h>

/* Read exactly len bytes from fd (retrying EINTR and short reads). 0, -EIO when the file
 * ends first, or -errno. Any thread. */
int ing_read_full(int fd, void *buf, size_t len);

#endif
