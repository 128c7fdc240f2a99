/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ident.h - frame and wafer identifiers: strings, as in the seed contract
 * (rdma_stream.proto: string frameId = 1, string waferId = 5).
 *
 * The rule, the same for the node and for libingest: 1 to ING_ID_MAX bytes of valid
 * UTF-8 (shortest form, no surrogates, at most U+10FFFF) with no control character
 * (C0, DEL, C1). A frame is identified by (waferId, frameId); an empty waferId means the
 * default wafer ING_DEFAULT_WAFER. Pure functions, any thread.
 */
#ifndef ING_COMMON_IDENT_H
#define ING_COMMON_IDENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ING_ID_MAX 256                  /* bytes of a frame or wafer id */
#define ING_DEFAULT_WAFER "default"     /* where frames with an empty waferId are filed */
/* The rule in words, for error messages. */
#define ING_ID_RULE "1 to 256 bytes of UTF-8 without control characters"

/*
 * NULL when id[0..len) follows the rule, else a static reason ("is empty", "is longer
 * than 256 bytes", "is not valid UTF-8", "contains a control character").
 */
const char *ing_id_check(const char *id, size_t len);

/* true when s[0..len) is valid UTF-8 (any length, control characters allowed). */
bool ing_utf8_valid(const char *s, size_t len);

/* 64-bit FNV-1a of id[0..len): for hash tables and routing, not for security. */
uint64_t ing_id_hash(const char *id, size_t len);
/* ing_id_hash of the pair (wafer, frame), the identity of a frame. */
uint64_t ing_id_pair_hash(const char *wafer, const char *frame);

/*
 * Copy id[0..len) into out (cap bytes) as text safe for logs: control bytes and invalid
 * UTF-8 become \xNN, the result is cut (with "...") to fit. Returns out.
 */
char *ing_id_printable(char *out, size_t cap, const char *id, size_t len);

/*
 * The file-system name of a frame or wafer id (one path component, lossless and safe):
 * an id of at most 200 bytes of [A-Za-z0-9._-] other than "." and ".." is used as it
 * is; any other id is
 * percent-encoded (every byte outside [A-Za-z0-9_-] becomes %XX); an encoded name above
 * 200 bytes becomes its first 120 bytes + '~' + the SHA-256 of the id in hex. Distinct
 * ids get distinct names; no name is "." or ".." or holds '/'. 0, -EINVAL (the id
 * breaks the rule), -ENAMETOOLONG (cap < ING_ID_FILE_NAME_MAX + 1 may not do).
 */
#define ING_ID_FILE_NAME_MAX 200
int ing_id_file_name(char *out, size_t cap, const char *id);

/*
 * The id whose ing_id_file_name is name (catalog recovery): a plain name is the id, a
 * percent-encoded one is decoded. 0; -ENOENT for a shortened name (prefix + '~' + SHA-256:
 * the id is not in it); -EINVAL when no id has this name (checked by encoding the result
 * again), -ENAMETOOLONG when cap is too small.
 */
int ing_id_from_file_name(char *out, size_t cap, const char *name);

/*
 * One token of a text manifest: bytes <= 0x20, '%' and >= 0x7f become %XX, so an id
 * with spaces or non-ASCII stays one whitespace-free word. ing_id_unescape reverses it
 * (-EINVAL: a bad %XX or a result longer than cap - 1).
 */
char *ing_id_escape(char *out, size_t cap, const char *id);
int ing_id_unescape(char *out, size_t cap, const char *tok);

#endif
