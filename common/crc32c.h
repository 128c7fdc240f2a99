/* SPDX-License-Identifier: Apache-2.0 */
#ifndef ING_COMMON_CRC32C_H
#define ING_COMMON_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/*
 * CRC-32C (Castagnoli, reflected, init/xorout 0xffffffff): ing_crc32c(0, "123456789", 9)
 * == 0xe3069283. Chainable: ing_crc32c(ing_crc32c(0, a, n), b, m) == crc of a||b.
 * SSE4.2 when the CPU has it and it is faster than the table (it is not under qemu TCG:
 * both are timed once at load; ING_CRC32C=hw|sw forces one), the table otherwise.
 * Any thread.
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

/* "sse4.2" or "table": the implementation in use (for start-up logs). */
const char *ing_crc32c_impl(void);

#endif
