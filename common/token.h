/* SPDX-License-Identifier: Apache-2.0 */
/* The shared-secret token of --auth-token-file (ingestd and ingest-send read the same file). */
#ifndef ING_COMMON_TOKEN_H
#define ING_COMMON_TOKEN_H

#include <stddef.h>

#define ING_AUTH_TOKEN_MIN 16u
#define ING_AUTH_TOKEN_MAX 256u

/*
 * The file's one line (a trailing newline stripped), ING_AUTH_TOKEN_MIN..MAX printable
 * ASCII characters, in a regular file no group or other may touch, into tok (cap bytes,
 * NUL-terminated). 0, or -errno with the reason in why (never the token's bytes).
 */
int ing_token_file_read(const char *path, char *tok, size_t cap, char *why, size_t whylen);

/*
 * Open a file that holds a secret (a token, an object store's keys) for reading: it must be
 * a regular file that no group or other may touch. The fd (close it), or -errno with the
 * reason in why ("mode 644 lets group/other read the secret: chmod 600 PATH").
 */
int ing_secret_file_open(const char *path, char *why, size_t whylen);

#endif
