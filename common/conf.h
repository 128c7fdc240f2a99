/* SPDX-License-Identifier: Apache-2.0 */
/*
 * conf.h - a "key = value" configuration file reader (ingestd --config).
 *
 * Syntax, one setting per line: `key = value`, or a bare `key` (a setting that is on or
 * off: the callback gets value NULL). Blank lines and lines whose first non-blank character
 * is '#' are ignored; a '#' at the start of a value or after a blank begins a comment
 * (`frame-timeout = 30s  # per frame`; `a#b` is a value); spaces around key and value are
 * trimmed; a value in double quotes keeps its inner spaces and '#' (no escapes), and only a
 * comment may follow it. Keys are the program's long flag names without the leading "--".
 */
#ifndef ING_COMMON_CONF_H
#define ING_COMMON_CONF_H

#include <stddef.h>

/* One setting. Return 0 to go on; anything else stops the read and is returned. */
typedef int (*ing_conf_cb)(void *arg, const char *key, const char *value, unsigned line);

/*
 * Read path into buf (cap bytes; the strings handed to cb point into it and stay valid as
 * long as buf does) and call cb for each setting, in file order (value NULL for a bare key). Returns 0; cb's non-zero
 * return (*line is that setting's line); -EINVAL on a line that is not `key = value` or a
 * file larger than cap - 1 (*line names it, why says what is wrong); -errno when the file
 * cannot be read (*line 0). Any thread; no allocation.
 */
int ing_conf_read(const char *path, char *buf, size_t cap, ing_conf_cb cb, void *arg,
		  unsigned *line, char *why, size_t whylen);

#endif
