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
/* Insert rows in one transaction (their tier columns too: zeroed, a frame is 'local').
 * 0, -EEXIST ((wafer, frame) already present: nothing inserted), -EIO, -ENOSPC, -EROFS
 * (read-only handle). */
int ing_catalog_insert(struct ing_catalog *c, const struct ing_catalog_row *rows, unsigned n);
int64_t ing_catalog_count(struct ing_catalog *c);
/* SQLite's PRAGMA quick_check: 0, or -EBADMSG with what it found (or the error) in why. */
int ing_catalog_quick_check(struct ing_catalog *c, char *why, size_t whylen);
/* Frame files below <data_dir>/frames (frames/<wafer>/<name>.frame), or -errno. */
int64_t ing_store_count_frames(const char *data_dir);

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

/*
 * The one check of a stored frame's file (ingest-verify, and its --fleet check of every
 * node's copy): path holds exactly len bytes, read whole into *buf (grown as needed; *cap
 * its size) for a caller that compares them further, with *crc_out their CRC-32C. 0 when
 * intact (and, with crc set, the bytes have that CRC-32C); -EFBIG / -ENODATA: the file is
 * longer / shorter (*size_out its size); -EBADMSG: another CRC-32C; -ENOMEM; or the open
 * or read error as -errno.
 */
int ing_store_check_file(const char *path, uint64_t len, const uint32_t *crc, uint8_t **buf,
			 size_t *cap, uint64_t *size_out, uint32_t *crc_out);

/*
 * One process at a time may own a data dir (one ingestd; or ingest-catalog rebuilding the
 * catalog): an flock on <dir>/.ingestd.lock, held until the fd is closed or the process
 * ends (kill -9 included), with the owner's pid written in it. The fd, or -EBUSY with
 * holder set to "another ingestd (pid N)" / the owner's name, or -errno.
 */
int ing_store_lock(const char *dir, char *holder, size_t holderlen);

/* ---------------------------------------------------------------- catalog recovery */

struct ing_catalog_rebuild_report {
	uint64_t files;          /* frame files found below frames/ */
	uint64_t catalogued;     /* rows written to the new catalog */
	uint64_t ids_from_names; /* ids decoded from the file names */
	uint64_t ids_from_old;   /* ids only the old catalog had (shortened names) */
	uint64_t salvaged_rows;  /* rows the old catalog still gave (timestamps, crc) */
	uint64_t not_catalogued; /* shortened names the old catalog did not have: listed */
	uint64_t crc_differs;    /* files whose CRC-32C is not the one the old catalog had */
	uint64_t unreadable;     /* files that could not be read */
	uint64_t tiered;         /* rows of frames whose bytes are in the object store only
				  * (no file by design), kept from the old catalog */
	uint64_t bytes;
	char kept_as[256];       /* the damaged catalog's new name ("" if there was none) */
};

/*
 * Rebuild <data_dir>/catalog.db from the frame files (docs/OPERATIONS.md, Catalog
 * recovery), with the data dir locked (-EBUSY: ingestd runs on it). Every
 * frames/<wafer>/<frame>.frame becomes a row: ids from the escaped names (or, for a name
 * shortened with a SHA-256, from whatever rows the old catalog still gives), length from
 * the file, CRC-32C recomputed (the old catalog's value kept, and the file counted in
 * crc_differs, when they disagree, so that ingest-verify still sees the damage),
 * timestamps from the old row or the file's mtime; a frame the old catalog had in the
 * object store keeps that (location both, or tiered: its row is kept though it has no
 * file, and so is a 'both' row whose file is gone, as tiered). The new catalog is written beside the
 * old one and renamed over it; the old one (and its -wal) is kept as
 * catalog.db.damaged-<time>, never deleted; the new file gets the data dir's owner.
 * progress (may be NULL) is called about every 2 s. 0 (see the report), or -errno (logged).
 */
int ing_catalog_rebuild(const char *data_dir, struct ing_catalog_rebuild_report *r,
			void (*progress)(void *arg, uint64_t done, uint64_t total, uint64_t bytes),
			void *arg);

/* fsync the directory holding <data_dir>/<rel>. 0 or -errno. */
int ing_store_sync_dir(const char *data_dir, const char *rel);
/* Remove "*.frame.tmp.<pid>" files of dead writers below <data_dir>/frames. Count or -errno. */
int ing_store_sweep_tmp(const char *data_dir);
/* mkdir -p of path (absolute or relative), fsync'ing the parent of every created level. */
int ing_store_mkdirs(const char *path, int mode);

#endif
