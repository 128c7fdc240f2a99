/* SPDX-License-Identifier: Apache-2.0 */
/* Private helpers shared by the numa/ sources (not for callers outside numa/ and its programs). */
#ifndef ING_NUMA_INTERNAL_H
#define ING_NUMA_INTERNAL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Write s as a JSON string literal (with the quotes). */
void json_str(FILE *f, const char *s);
/* snprintf into err (if non-NULL) and return -e. */
int set_err(char *err, size_t errlen, int e, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/*
 * Read the first line of <root>/<rel> (formatted) into buf, trailing newline stripped.
 * 0 or -errno.
 */
int read_line(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Same, parsed as a long; -EINVAL if not a number. */
int read_long(long *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* b as "1 GiB", "1.5 GiB", "8 MiB", "64 KiB" or "123 bytes" into buf; returns buf. */
const char *human_bytes(uint64_t b, char *buf, size_t len);

#endif
