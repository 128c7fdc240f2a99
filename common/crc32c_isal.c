/* SPDX-License-Identifier: Apache-2.0 */
/*
 * crc32c_isal.c - ISA-L's crc32_iscsi (CRC-32C, PCLMUL folding, its own CPU dispatch) as
 * an ing_crc32c implementation. A target of its own (ing_crc_isal), linked by the node
 * only: libingest keeps no dependency beyond the ones it documents.
 */
#include "common/crc32c.h"

#include <isa-l/crc.h>

/* raw register in and out, as common/crc32c.c's: crc32_iscsi takes and returns it too */
static uint32_t crc_isal(uint32_t raw, const uint8_t *p, size_t n)
{
	while (n) {
		int k = n > (1u << 30) ? 1 << 30 : (int)n;   /* its length is an int */
		raw = crc32_iscsi((unsigned char *)p, k, raw);
		p += k;
		n -= (size_t)k;
	}
	return raw;
}

void ing_crc32c_use_isal(void)
{
	static const struct ing_crc32c_ext e = { "isa-l", crc_isal };
	ing_crc32c_register(&e);
}
