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

/*
 * Where a frame's bytes are (catalog column `location`, schema 3): only the local file
 * (also while its upload to the object store is pending), the local file and a verified
 * object in the store, or the verified object only (the local copy was deleted by the
 * local retention or the high-water mark). dataplane/tier/ moves a frame along.
 */
enum ing_location { ING_LOC_LOCAL = 0, ING_LOC_BOTH = 1, ING_LOC_TIERED = 2 };
/* "local", "both", "tiered" (the column's values); NULL for anything else */
const char *ing_location_name(enum ing_location l);
/* ING_LOC_* of a column value; -1 when it is none of them */
int ing_location_parse(const char *s);

#define ING_OBJECT_MD5_HEX 32

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
	/* --- the object store tier (schema 3; inserts leave them zero: local) --- */
	uint8_t location;     /* enum ing_location */
	char object_md5[ING_OBJECT_MD5_HEX + 1];  /* the object's MD5 (its ETag), hex; "" */
	int64_t tiered_ns;    /* wall clock when the object was verified; 0: not yet */
	int64_t local_deleted_ns; /* wall clock when the local copy was deleted; 0: kept */
};
/*
 * Open/create <path> (WAL, synchronous=FULL, busy timeout). One handle per thread. Older
 * catalogs are migrated in one transaction on open: schema 1 (INTEGER frame ids: the ids
 * become their decimal text, the rows and paths stay, a decimal id is its own file name)
 * and schema 2 (no tier columns: every frame becomes location 'local').
 */
struct ing_catalog *ing_catalog_open(const char *path);
/*
 * Open an existing catalog read-only (ingest-verify, tools): no create, no migration, no
 * pragma that writes; a catalog ingestd is writing can be read (WAL). Lookup and count
 * work (a schema 1 or 2 file reads as location 'local'), insert returns -EROFS. NULL + log
 * when it is missing, not a catalog, or of a newer schema. One handle per thread.
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
 * Write f->buf[0..length) durably to <data_dir>/<rel> (temp file, O_DIRECT when aligned,
 * fdatasync, rename, directory fsync). 0 or -errno (-ENOSPC, -EIO, ...).
 */
int ing_store_write(const char *data_dir, const char *rel, const uint8_t *buf, uint64_t len,
		    uint64_t cap);

/* ---------------------------------------------------------------- for the persistence workers */

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
