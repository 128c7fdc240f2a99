/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tier_internal.h - private pieces of dataplane/tier/: the tier's catalog access (tier_db.c:
 * the upload outbox and the frames' location), unit-tested on its own. Only the tier
 * thread (and tests) hold a handle.
 */
#ifndef ING_TIER_INTERNAL_H
#define ING_TIER_INTERNAL_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/ident.h"
#include "dataplane/store/store.h"

/* One frame on its way to the store (a tier_outbox row), or one local copy to delete. */
struct tier_row {
	int64_t seq;                       /* outbox order; 0 for a deletion candidate */
	char wafer_id[ING_ID_MAX + 1];
	char frame_id[ING_ID_MAX + 1];
	uint64_t length;
	uint32_t crc32c;
	char path[512];                    /* relative to the data dir, as in the catalog */
	int64_t queued_ms;                 /* Unix ms of the catalog commit */
	unsigned attempts;                 /* failed attempts so far */
	char object_md5[ING_OBJECT_MD5_HEX + 1];  /* deletion candidates: the verified ETag */
	int64_t durable_ns;
};

/* Where the catalog's frames are: counts and bytes per enum ing_location. */
struct tier_census {
	uint64_t frames[3];
	uint64_t bytes[3];
};

struct tier_db;

/*
 * Open the node's catalog.db for the tier (its own connection, WAL, synchronous=NORMAL:
 * every state it writes can be lost by a power cut without harm, see tier_db.c). The
 * frames table must exist (ingestd opens the catalog in persistence first). NULL + log.
 */
struct tier_db *tier_db_open(const char *catalog_path);
void tier_db_close(struct tier_db *t);
/*
 * Create the outbox table and the trigger that queues every new catalog row, in one
 * transaction; when the trigger did not exist (first start with --tier, or one after a run
 * without it), every frame still 'local' is queued too (a frame already in the store is
 * then found there: 412, same bytes, done). 0, -ENOENT (no frames table), -EBUSY, -EIO.
 */
int tier_db_enable(struct tier_db *t);
/* Drop the trigger (a run without --tier): the outbox stops growing. 0 or -errno. */
int tier_db_disable(struct tier_db *t);
/* Up to max queued rows due at now_ms (next_ms <= now_ms) with seq <= max_seq (rows the
 * census already saw), oldest first. Count or -errno. */
int tier_db_due(struct tier_db *t, int64_t now_ms, int64_t max_seq, struct tier_row *rows,
		unsigned max);
/*
 * The frame's object is verified: location 'both' with its MD5, outbox row gone, in one
 * transaction. 0 or -errno.
 */
int tier_db_uploaded(struct tier_db *t, const struct tier_row *r, const char *md5_hex,
		     int64_t tiered_ns);
/* An attempt failed: count it, next try at next_ms, why in last_error. 0 or -errno. */
int tier_db_failed(struct tier_db *t, const struct tier_row *r, int64_t next_ms, const char *why);
/* Frames whose object is verified and local copy still here, durable at or before
 * cutoff_ns, oldest first. Count or -errno. */
int tier_db_candidates(struct tier_db *t, int64_t cutoff_ns, struct tier_row *rows, unsigned max);
/* The local copy is gone: location 'tiered'. 0 or -errno. */
int tier_db_local_deleted(struct tier_db *t, const struct tier_row *r, int64_t deleted_ns);
/* The object was not found as recorded: back to 'local' and queued again. 0 or -errno. */
int tier_db_requeue(struct tier_db *t, const struct tier_row *r);
/* The outbox: frames, bytes, and queued_ms of the oldest (0 when empty). 0 or -errno. */
int tier_db_backlog(struct tier_db *t, uint64_t *frames, uint64_t *bytes, int64_t *oldest_ms);
/* Rows queued after seq (the new catalog rows since then): count, bytes, the newest
 * seq (unchanged when none). 0 or -errno. */
int tier_db_new_rows(struct tier_db *t, int64_t *seq, uint64_t *frames, uint64_t *bytes);
/* Counts and bytes of every location (one pass over the catalog) and the outbox's newest
 * seq, of one moment. 0 or -errno. */
int tier_db_census(struct tier_db *t, struct tier_census *c, int64_t *seq);

#endif
