/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tier.h - the object store tier: after DURABLE, a second, verified copy of every frame in
 * an S3 store (Ceph radosgw in the tests), and a bounded local disk.
 *
 * One thread per node (the tier thread), never on the ack path: a frame is DURABLE when its
 * file and catalog row are (dataplane/persist.c), and only then does the tier see it, as a
 * row in the catalog's tier_outbox (queued by a trigger in the persistence worker's own
 * transaction, so a crash loses none). The thread uploads each frame as one object
 * (create-only PUT with Content-MD5 and the signed SHA-256, then a HEAD whose ETag, the
 * store's own MD5 of what it keeps, must be the frame's MD5; or the object read back and
 * CRC-32C-checked where a store's ETags are no MD5s), marks it 'both' in the catalog, and
 * deletes local copies whose object it found as verified again once the retention has
 * passed (or, with only a high-water mark, oldest first while the disk is above 90 % of
 * the mark). Above the high-water mark new frames are refused NO_SPACE (retryable) until
 * the tier has made room: a store that is down grows the backlog and then refuses frames,
 * it never loses one; a store that keeps other bytes than it acknowledged never gets a
 * local copy deleted.
 *
 * It also serves reads of any frame (rpc GetFrame), from the local copy or the store.
 *
 * Threads: ing_tier_start/stop from the node's start and teardown; ing_tier_refusing,
 * ing_tier_frame_finished and ing_tier_get_stats from the control thread (atomics the tier
 * thread alone writes, no lock). Everything reaches the tier thread through its one
 * mailbox, on which it sleeps: ING_EV_TIER_WAKE when control finished frames (their outbox
 * rows are committed by then), ING_EV_TIER_READ for reads, ING_EV_TIER_STOP (the kinds:
 * dataplane/msg.h); reads go back on control's as the read's own done call. Everything
 * else happens on the tier thread.
 */
#ifndef ING_TIER_TIER_H
#define ING_TIER_TIER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dataplane/store/s3.h"
#include "dataplane/store/store.h"

#define ING_TIER_DEFAULT_PARALLEL 4u
#define ING_TIER_MAX_PARALLEL 32u
#define ING_TIER_LOW_WATER_PCT 90u   /* deletion under pressure stops at this % of the mark */

/* The store as the tier last saw it (h3000.TierStoreState). */
enum ing_tier_store_state {
	ING_TIER_STORE_OFF = 0,          /* no --tier */
	ING_TIER_STORE_UNKNOWN = 1,      /* not checked yet */
	ING_TIER_STORE_OK = 2,
	ING_TIER_STORE_UNREACHABLE = 3,  /* connect failed, timed out, or 5xx */
	ING_TIER_STORE_DENIED = 4,       /* credentials refused (403) */
	ING_TIER_STORE_NO_BUCKET = 5,
	ING_TIER_STORE_ERROR = 6,        /* clock skew refused, or the store misbehaves: it keeps
					  * other bytes than it acknowledged, none, or contradicts
					  * itself (store_cause says which) */
};
const char *ing_tier_store_state_name(enum ing_tier_store_state s);

struct ing_hwm;
struct ing_tier_opts {
	const char *data_dir;       /* catalog.db and frames/ */
	const struct ing_s3 *s3;    /* the store (copied); NULL: no tier */
	unsigned parallel;          /* uploads at once (ING_TIER_DEFAULT_PARALLEL) */
	int64_t retention_ms;       /* keep a local copy this long after DURABLE; -1: no time rule */
	unsigned high_water_pct;    /* 1..99 % of the data dir's file system; 0: none */
	uint64_t high_water_bytes;  /* bytes of frames with a local copy; 0: none */
	struct ing_mbox *ctl;       /* the control thread's mailbox: read answers go there */
	struct ing_hwm *hwm;        /* the mark's count, shared with persistence (dataplane/hwm.h);
				     * NULL: a mark is not enforced */
	/* where the thread runs (as unpinned persistence workers: the process's cpus from
	 * before EAL pinned the control thread; NULL: every configured cpu) and at what
	 * priority (SCHED_BATCH at this nice, as the workers: background work) */
	const int *cpus;
	unsigned ncpus;
	unsigned nice;
};

/* (The events on the tier thread's mailbox, ING_EV_TIER_*: dataplane/msg.h.) */
void ing_tier_opts_init(struct ing_tier_opts *o);

struct ing_tier;

/*
 * Start the tier thread over the node's catalog (which must exist: start after
 * persistence; the rings need EAL). With no store it only serves reads of local copies
 * and drops the outbox trigger a run with --tier left (so the outbox does not grow
 * unread). NULL + log on error.
 */
struct ing_tier *ing_tier_start(const struct ing_tier_opts *o);
/*
 * Stop the thread: transfers in progress are abandoned (their frames stay queued and go
 * again at the next start), reads it holds are answered -ECANCELED. Then
 * ing_tier_destroy, after control has let go of every read. NULL ok.
 */
void ing_tier_stop(struct ing_tier *t);
void ing_tier_destroy(struct ing_tier *t);

/*
 * True when a new frame must be refused: what is used locally plus pending (the bytes of
 * the frames admitted and not yet finished, this one included) reaches the high-water
 * mark. why (may be NULL) then says so, with the numbers and the backlog. What is used is
 * the tier thread's last measure (the catalog's count of local bytes, or the file
 * system's) less the rows persistence had inserted by then, plus every frame control
 * finished whose row persistence inserted (ing_tier_frame_finished, dataplane/hwm.h): each
 * admitted frame counts once from its admission on, whatever the order of the insert, the
 * measure and the finish. The control thread; cheap (relaxed loads).
 */
bool ing_tier_refusing(struct ing_tier *t, uint64_t pending, char *why, size_t whylen);
/* Control finished a frame it had admitted (durable or failed) of length bytes: it leaves
 * pending; stored (persistence inserted its row, ing_frame.cataloged) it counts as used from
 * now on. The tier thread is woken (ING_EV_TIER_WAKE, one until it took it) to upload it.
 * The control thread only; NULL ok. */
void ing_tier_frame_finished(struct ing_tier *t, uint64_t length, bool stored);

/*
 * New store credentials (ingestd's SIGHUP, keys rotated in --tier-credentials): handed to
 * the tier thread through its mailbox; requests it starts from then on sign with them, the
 * ones in flight finish with the old. The caller may wipe its copies at once. 0, -EAGAIN
 * (mailbox full: try at the next reload), -ENOMEM, -EINVAL (no tier). Control thread.
 */
int ing_tier_set_credentials(struct ing_tier *t, const char *access_key, const char *secret_key);

struct ing_tier_stats {
	bool enabled;                 /* a store is configured */
	char store[400];              /* s3://host:port/bucket (no credentials) */
	enum ing_tier_store_state store_state;
	char store_error[1400];       /* what is wrong and how to fix it; "" when ok */
	uint64_t backlog_frames;      /* durable frames not yet verified in the store */
	uint64_t backlog_bytes;
	double lag_seconds;           /* age of the oldest of them (0: none) */
	uint64_t uploaded_frames;     /* objects created and verified since start */
	uint64_t uploaded_bytes;
	uint64_t already_stored;      /* found in the store with the same bytes (412), since start */
	double upload_bytes_per_second; /* over the last ~10 s */
	uint64_t upload_errors;       /* failed attempts since start (retried) */
	uint64_t uploads_in_progress;
	uint64_t conflicts;           /* objects found with other bytes since start (frame kept local) */
	uint64_t digest_mismatches;   /* the frame's own object found with other bytes than the
				       * frame's (the store's ETag or a read-back), since start */
	uint64_t read_backs;          /* objects verified by reading them back, since start */
	const char *store_cause;      /* what is wrong with the store, one word ("none", "timeout",
				       * "clock_skew", "digest_mismatch", ...; static storage) */
	const char *verification;     /* "etag", "read-back" or "none" (static storage) */
	bool census_done;             /* the location counts below are known */
	uint64_t frames_local, frames_both, frames_tiered;
	uint64_t local_bytes;         /* bytes of frames with a local copy */
	uint64_t local_deleted;       /* local copies deleted since start */
	bool refusing;                /* what is stored locally has reached the mark */
	unsigned high_water_pct;      /* the mark (0: none) */
	uint64_t high_water_bytes;
	double usage_pct;             /* the data dir's file system, used % */
	int64_t retention_ms;         /* -1: none */
};
void ing_tier_get_stats(struct ing_tier *t, struct ing_tier_stats *st);

/* ---------------------------------------------------------------- reads (rpc GetFrame) */

/*
 * Any catalogued frame back, from the local disk or the store, a chunk at a time: the
 * control thread takes a read (ing_tier_read_get), names the frame and submits it; the tier
 * thread answers with up to ING_TIER_READ_CHUNK bytes in r->buf and hands r back
 * (the call r->done(r) on control's mailbox); control sends them and
 * submits r again for the next chunk, or puts it back. The running CRC-32C of the bytes
 * handed out is checked against the catalog with the last chunk (r->last). A read belongs
 * to control while it is not submitted, to the tier thread while it is. The tier owns the
 * reads' memory (at most ING_TIER_MAX_READS at once, a chunk buffer each).
 */
#define ING_TIER_READ_CHUNK (4u << 20)
#define ING_TIER_MAX_READS 8u

enum ing_tier_source { ING_TIER_FROM_ANY = 0, ING_TIER_FROM_LOCAL = 1, ING_TIER_FROM_STORE = 2 };

struct ing_tier_read {
	/* --- control, before the first submit --- */
	char wafer_id[ING_ID_MAX + 1];
	char frame_id[ING_ID_MAX + 1];
	enum ing_tier_source want;
	void *owner;                 /* control's handle */
	void (*done)(void *r, uint32_t val);   /* control's: runs on control's thread, with r,
					      * each time the tier thread hands r back */
	/* --- the tier thread's answer (control reads it between submits) --- */
	int status;                  /* 0; -ENOENT no such frame (or object), -ENODATA no copy
				      * where asked, -EAGAIN store or disk unavailable, -EBADMSG
				      * the bytes fail their CRC-32C (nothing to trust), -EIO */
	char msg[600];               /* the reason when status != 0 */
	uint64_t length;             /* the frame's, from the catalog */
	uint32_t crc32c;
	int64_t timestamp;
	uint8_t location;            /* enum ing_location */
	enum ing_tier_source from;   /* where the bytes come from: LOCAL or STORE */
	uint64_t offset;             /* buf holds [offset, offset + n) */
	size_t n;
	bool last;                   /* the frame's last bytes, CRC-32C checked */
	uint8_t *buf;                /* ING_TIER_READ_CHUNK bytes */
	/* --- the tier thread's own --- */
	uint32_t crc_run;            /* CRC-32C of [0, offset + n) */
	int fd;                      /* the local copy, -1 */
	bool in_use;
};

/* A free read with its buffer (control thread), or NULL: ING_TIER_MAX_READS in use. */
struct ing_tier_read *ing_tier_read_get(struct ing_tier *t);
/* Give a read back (control thread; a read not submitted). */
void ing_tier_read_put(struct ing_tier *t, struct ing_tier_read *r);
/* Hand r to the tier thread for its next chunk (the first: offset 0): ING_EV_TIER_READ on
 * its mailbox. 0 or -ENOBUFS. */
int ing_tier_read_submit(struct ing_tier *t, struct ing_tier_read *r);

#endif
