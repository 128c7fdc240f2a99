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

/* "isa-l", "sse4.2", "armv8-crc" or "table": the implementation in use (start-up logs). */
const char *ing_crc32c_impl(void);

/*
 * An implementation from a library only some programs link (ingestd: ISA-L, common/
 * crc32c_isal.c): crc(raw, p, n) takes and returns the raw (not inverted) register, as
 * the built-in ones do. Registered before the threads that compute crcs start; it becomes
 * the one in use unless $ING_CRC32C names another. ing_crc32c_copy keeps the built-in
 * fused copy. Not thread-safe (call it at start-up).
 */
struct ing_crc32c_ext {
	const char *name;
	uint32_t (*crc)(uint32_t raw, const uint8_t *p, size_t n);
};
void ing_crc32c_register(const struct ing_crc32c_ext *e);
/* ISA-L's crc32_iscsi as ing_crc32c (common/crc32c_isal.c, target ing_crc_isal). */
void ing_crc32c_use_isal(void);

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
