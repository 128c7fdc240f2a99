/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dataplane_internal.h - private helpers shared by the dataplane/ sources (no ing_ prefix).
 */
#ifndef ING_DATAPLANE_INTERNAL_H
#define ING_DATAPLANE_INTERNAL_H

#include "dataplane/dataplane.h"

#define ING_PAGE_4K 4096ull

static inline uint64_t round_up_u64(uint64_t v, uint64_t a)
{
	return (v + a - 1) / a * a;
}

/*
 * The two halves of ing_mbox_post (mbox.c), for tests that force an interleaving between
 * them: put n messages in (0 or -ENOBUFS), then ring the doorbell if the owner re-armed it.
 */
int mbox_enqueue(struct ing_mbox *mb, const struct ing_msg *m, unsigned n);
void mbox_ring(struct ing_mbox *mb);

/* Unique rte object name "<prefix><counter>" cut to fit len (rte_ring / rte_mempool). */
void dp_unique_name(char *out, size_t len, const char *prefix);

#endif
