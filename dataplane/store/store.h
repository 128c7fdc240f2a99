/* SPDX-License-Identifier: Apache-2.0 */
/*
 * store.h - where frames rest: one file per frame below <data_dir>/frames and the SQLite
 * catalog (catalog.db) that names them. No DPDK: ingestd's persistence workers
 * (dataplane/persist.c) and ingest-verify link the same code (library ing_store).
 */
#ifndef ING_DATAPLANE_STORE_H
#define ING_DATAPLANE_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/ident.h"

/* ---------------------------------------------------------------- catalog */

struct ing_catalog;
struct ing_catalog_row {
	char frame_id[ING_ID_MAX + 1];
	char wafer_id[ING_ID_MAX + 1];
	int64_t timestamp;
	uint64_t length;
	uint32_t crc32c;
	char path[512];
	uint8_t transport;
	int64_t received_ns;  /* wall clock */
	int64_t durable_ns;
};
/*
 * Open/create <path> (WAL, synchronous=FULL, busy timeout). One handle per thread. A
 * catalog written before frame ids were strings (schema 1: INTEGER frame ids) is
 * migrated in one transaction on open: the ids become their decimal text, the rows and
 * paths stay (a decimal id is its own file name).
 */
struct ing_catalog *ing_catalog_open(const char *path);
/*
 * Open an existing catalog read-only (ingest-verify, tools): no create, no migration, no
 * pragma that writes; a catalog ingestd is writing can be read (WAL). Lookup and count
 * work, insert returns -EROFS. NULL + log when it is missing, not a catalog, or of a newer
 * schema. One handle per thread.
 */
struct ing_catalog *ing_catalog_open_ro(const char *path);
void ing_catalog_close(struct ing_catalog *c);
/* Look up (wafer_id, frame_id). 0 found, -ENOENT absent, -EIO on error. */
int ing_catalog_lookup(struct ing_catalog *c, const char *wafer_id, const char *frame_id,
		       struct ing_catalog_row *row);
/* Insert rows in one transaction. 0, -EEXIST ((wafer, frame) already present: nothing
 * inserted), -EIO, -ENOSPC, -EROFS (read-only handle). */
int ing_catalog_insert(struct ing_catalog *c, const struct ing_catalog_row *rows, unsigned n);
int64_t ing_catalog_count(struct ing_catalog *c);

/* ---------------------------------------------------------------- store */

/* "frames/<wafer name>/<frame name>.frame" relative to data_dir, names from
 * ing_id_file_name (common/ident.h); -EINVAL, -ENAMETOOLONG. */
int ing_store_rel_path(char *out, size_t outlen, const char *wafer_id, const char *frame_id);
/*
 * Write buf[0..len) durably to <data_dir>/<rel> (temp file, O_DIRECT when aligned (cap: the
 * buffer's size, for the rounded-up O_DIRECT write), fdatasync, rename, and with sync_dir
 * the directory's fsync; without it the caller batches that with ing_store_sync_dir, once
 * per directory per group, before declaring the frames durable). t_written_ns (NULL: not
 * wanted) gets ing_now_ns() between the last write and the fdatasync. 0 or -errno
 * (-ENOSPC, -EIO, ...).
 */
int ing_store_write(const char *data_dir, const char *rel, const uint8_t *buf, uint64_t len,
		    uint64_t cap, bool sync_dir, uint64_t *t_written_ns);
/* fsync the directory holding <data_dir>/<rel>. 0 or -errno. */
int ing_store_sync_dir(const char *data_dir, const char *rel);
/* Remove "*.frame.tmp.<pid>" files of dead writers below <data_dir>/frames. Count or -errno. */
int ing_store_sweep_tmp(const char *data_dir);
/* mkdir -p of path (absolute or relative), fsync'ing the parent of every created level. */
int ing_store_mkdirs(const char *path, int mode);

#endif
