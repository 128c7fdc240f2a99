/* SPDX-License-Identifier: Apache-2.0 */
/*
 * json.h - writing JSON by hand (the programs' --json outputs): a string, quoted, with '"'
 * and '\' escaped and control characters as \u00XX; other bytes (UTF-8) pass as they are.
 */
#ifndef ING_COMMON_JSON_H
#define ING_COMMON_JSON_H

#include <stdio.h>

void ing_json_str(FILE *f, const char *s);

#endif
