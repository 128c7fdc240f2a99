/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tier_internal.h - private pieces of dataplane/tier/: the tier's catalog access (tier_db.c:
 * the upload outbox and the frames' location) and the sequence lock of its Stats string
 * (tier.c), unit-tested on their own. Only the tier thread (and tests) hold a handle.
 */
#ifndef ING_TIER_INTERNAL_H
#define ING_TIER_INTERNAL_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/ident.h"
#include "dataplane/store/store.h"

/*
 * A string one thread writes and any thread reads without a lock (Stats' storeError, which
 * the tier thread alone writes): a sequence lock over 8-byte words. The sequence number is
 * odd while the words change; the words are stored with release and loaded with acquire
 * (plain moves on x86, as relaxed ones), which orders them against the number without a
 * standalone fence: a reader that saw a word of a write in progress also sees, after it,
 * that write's odd number (or a later one), and reads again. (ThreadSanitizer checks no
 * atomic_thread_fence, and GCC refuses one under -fsanitize=thread.)
 */
#define TIER_SEQSTR_BYTES 1400u
struct tier_seqstr {
	uint32_t seq;
	uint64_t w[TIER_SEQSTR_BYTES / 8];
};
/* The one writer: s (cut to TIER_SEQSTR_BYTES - 1 bytes) is what readers get from now on. */
void tier_seqstr_write(struct tier_seqstr *x, const char *s);
/* Any thread: a copy into out (TIER_SEQSTR_BYTES bytes, NUL-terminated); false, and "",
 * when the writer kept changing it through a bounded number of tries (never a torn mix). */
bool tier_seqstr_read(struct tier_seqstr *x, char *out);

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
	int64_t tiered_ns;                 /* deletion candidates: when it was verified */
};

/* The outbox: frames, bytes, queued_ms of the oldest (0 when empty), and the smallest
 * next_ms (when the next backed-off row is due; 0 when one is due now or none). */
struct tier_backlog {
	uint64_t frames, bytes;
	int64_t oldest_ms, next_due_ms;
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
 * Create the outbox trigger that queues every new catalog row and the location counts'
 * triggers, and count the locations from the catalog, in one transaction; every frame
 * still 'local' and not queued is queued too (first start with --tier, one after a run
 * without it: a frame already in the store is then found there, 412, the same bytes,
 * done), and queued rows of frames no longer in the catalog are dropped. Records, once,
 * since when objects are verified against the store's own digest (tier_db_digest_since).
 * 0, -ENOENT (no frames table), -EBUSY, -EIO.
 */
int tier_db_enable(struct tier_db *t);
/* Drop the triggers (a run without --tier): the outbox stops growing. 0 or -errno. */
int tier_db_disable(struct tier_db *t);
/* Wall-clock ns since which 'both' rows were verified against the store's own digest
 * (INT64_MAX before tier_db_enable): one verified earlier is verified again before its
 * local copy may go. */
int64_t tier_db_digest_since(struct tier_db *t);
/* Up to max queued rows due at now_ms (next_ms <= now_ms), oldest first. Count or -errno. */
int tier_db_due(struct tier_db *t, int64_t now_ms, struct tier_row *rows, unsigned max);
/*
 * The frame's object is verified: location 'both' with the ETag it was verified by (NULL:
 * not against the store's digest), outbox row gone, in one transaction. Only while r's
 * outbox row is there: a frame deleted meanwhile (ingest-catalog prune) and stored again is
 * left to its own upload. 0 or -errno.
 */
int tier_db_uploaded(struct tier_db *t, const struct tier_row *r, const char *etag,
		     int64_t tiered_ns);
/* The row leaves the outbox without an upload (its frame is no longer local). 0 or -errno. */
int tier_db_dequeue(struct tier_db *t, const struct tier_row *r);
/* Whether r's upload is still queued (its outbox row, seq, is there): 1, 0 (dropped
 * meanwhile: ingest-catalog prune --include-unverified) or -EIO. */
int tier_db_queued(struct tier_db *t, const struct tier_row *r);
/* Where the frame of r is now: an enum ing_location, -ENOENT (no such frame: deleted from
 * the catalog meanwhile) or -EIO. */
int tier_db_location(struct tier_db *t, const struct tier_row *r);
/* An attempt failed: count it, next try at next_ms, why in last_error. 0 or -errno. */
int tier_db_failed(struct tier_db *t, const struct tier_row *r, int64_t next_ms, const char *why);
/* Frames whose object is verified and local copy still here, durable at or before
 * cutoff_ns, oldest first. Count or -errno. */
int tier_db_candidates(struct tier_db *t, int64_t cutoff_ns, struct tier_row *rows, unsigned max);
/* The local copy is gone: location 'tiered'. 0 or -errno. */
int tier_db_local_deleted(struct tier_db *t, const struct tier_row *r, int64_t deleted_ns);
/* The object is to be verified again (not found as recorded, or verified before the
 * store's digest was): back to 'local' and queued again. 0 or -errno. */
int tier_db_requeue(struct tier_db *t, const struct tier_row *r);
/* The smallest next_ms after now_ms (when the next backed-off row is due), 0 if none. */
int64_t tier_db_next_due(struct tier_db *t, int64_t now_ms);
/* durable_ns of the oldest 'both' frame (the next the retention lets go), INT64_MAX if none. */
int64_t tier_db_oldest_both(struct tier_db *t);
/* The outbox now. 0 or -errno. */
int tier_db_backlog(struct tier_db *t, struct tier_backlog *b);
/* Frames and bytes per location as the catalog counts them (tier_usage, kept by its own
 * transactions; exact after tier_db_enable). 0 or -errno. */
int tier_db_usage(struct tier_db *t, struct tier_census *c);

#endif
