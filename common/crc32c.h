/* SPDX-License-Identifier: Apache-2.0 */
#ifndef ING_COMMON_CRC32C_H
#define ING_COMMON_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/*
 * CRC-32C (Castagnoli, reflected, init/xorout 0xffffffff): ing_crc32c(0, "123456789", 9)
 * == 0xe3069283. Chainable: ing_crc32c(ing_crc32c(0, a, n), b, m) == crc of a||b.
 * SSE4.2 when the CPU has it, a table otherwise. Any thread.
 */
__attribute__((visibility("default"))) uint32_t ing_crc32c(uint32_t crc, const void *buf, size_t len);

#endif
