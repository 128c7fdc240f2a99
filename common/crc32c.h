/* SPDX-License-Identifier: Apache-2.0 */
#ifndef ING_COMMON_CRC32C_H
#define ING_COMMON_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/*
 * CRC-32C (Castagnoli, reflected, init/xorout 0xffffffff): ing_crc32c(0, "123456789", 9)
 * == 0xe3069283. Chainable: ing_crc32c(ing_crc32c(0, a, n), b, m) == crc of a||b.
 * The implementation is chosen once at load from the CPU's features (SSE4.2 on x86-64,
 * the CRC32 extension on arm64, else a slicing-by-8 table); $ING_CRC32C=NAME forces
 * one of ing_crc32c_variant()'s names. Any thread.
 */
__attribute__((visibility("default"))) uint32_t ing_crc32c(uint32_t crc, const void *buf, size_t len);
/*
 * Copy len bytes from src to dst (not overlapping) and return ing_crc32c(crc, src, len),
 * in one pass over src. Large copies use non-temporal stores (dst is not pulled into the
 * cache: meant for frame slots the caller does not read back) and end with a store fence,
 * so the bytes are visible to another thread once dst is published. Any thread.
 */
__attribute__((visibility("default"))) uint32_t ing_crc32c_copy(uint32_t crc, void *dst,
								 const void *src, size_t len);

/* "sse4.2", "armv8-crc" or "table": the implementation in use (for start-up logs). */
const char *ing_crc32c_impl(void);

/*
 * Every implementation built for this architecture, for tests: ing_crc32c_variant(i, &ok)
 * names the i-th (NULL past the last) and sets ok when this CPU can run it;
 * ing_crc32c_variant_run(i, &crc, dst, src, len) chains crc over src with that one (and
 * copies into dst unless dst is NULL, like ing_crc32c_copy): 0, or -ENOTSUP.
 */
size_t ing_crc32c_variants(void);
const char *ing_crc32c_variant(size_t i, int *usable);
int ing_crc32c_variant_run(size_t i, uint32_t *crc, void *dst, const void *src, size_t len);

#endif
