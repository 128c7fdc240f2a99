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

/* Wake the consumer of r unconditionally (stop requests). No-op without a doorbell. */
void fring_kick(struct ing_fring *r);

/* Unique rte object name "<prefix><counter>" cut to fit len (rte_ring / rte_mempool). */
void dp_unique_name(char *out, size_t len, const char *prefix);

/* mkdir -p of path (absolute or relative), fsync'ing the parent of every created level. */
int dp_mkdirs(const char *path, int mode);

/*
 * ing_store_write without the final directory fsync when !sync_dir: the caller batches it
 * with dp_store_sync_dir (once per directory per group) before declaring the frames durable.
 * t_written_ns (NULL: not wanted) gets ing_now_ns() between the last write and fdatasync.
 */
int dp_store_write(const char *data_dir, const char *rel, const uint8_t *buf, uint64_t len,
		   uint64_t cap, bool sync_dir, uint64_t *t_written_ns);
/* fsync the directory holding <data_dir>/<rel>. 0 or -errno. */
int dp_store_sync_dir(const char *data_dir, const char *rel);
/* Remove "*.frame.tmp.<pid>" files of dead writers below <data_dir>/frames. Count or -errno. */
int dp_store_sweep_tmp(const char *data_dir);

#endif
