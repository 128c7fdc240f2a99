/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tier.c - the tier thread (tier.h): uploads from the catalog's outbox, verification against
 * the store's own digest, deletion of local copies, the store's state and the high-water
 * mark.
 *
 * One thread drives every transfer through one libcurl multi handle (uploads at once:
 * --tier-parallel; two deletion checks; one probe of the store; the reads of GetFrame). A
 * frame's upload:
 *   HASH     read the local file once, 1 MiB per transfer and loop pass (the loop stays
 *            responsive): SHA-256, MD5 and CRC-32C, the last of which must be the
 *            catalog's; as many frames as are on the wire are hashed ahead, so the next
 *            PUT is ready when one ends
 *   PUT      create-only (If-None-Match: *), the SHA-256 signed as the payload's and the
 *            MD5 as Content-MD5 (the store checks the bytes it receives against both and
 *            refuses others), the body read again from the file, its CRC-32C checked once
 *            more as it goes out
 *   VERIFY   HEAD: the store's ETag of a single-part PUT is its own MD5 of the bytes it
 *            keeps; equal to the frame's MD5 and the length equal, the object is this
 *            frame's bytes (after a 412 too: the node's own object, done). Where the ETag
 *            is not the frame's MD5 (a store whose ETags are no MD5s: SSE-KMS, multipart;
 *            or one that kept other bytes), READBACK: the object read back once, its
 *            length and CRC-32C against the catalog's.
 * then 'both' (with the ETag it was verified by) and out of the outbox, in one catalog
 * transaction. A deletion: HEAD again (the length and the ETag verified), unlink, fsync
 * the directory, then 'tiered'.
 *
 * What the store says is believed only as far as its own digest goes: the metadata the
 * node sent (x-amz-meta-crc32c, -sha256) only tells the node's own upload from another
 * object under the key, never whether the bytes are right. A wrong answer is re-checked
 * (HEAD again a second later) before it is acted on: an object that is not the node's is
 * a conflict only when it still is; the node's own object with other bytes (the store kept
 * something else than it acknowledged) is counted (digestMismatches), named in Stats, and
 * replaced (PUT If-Match: that ETag); the local copy stays until an object is verified.
 *
 * One mailbox, as every thread here (dataplane/mbox.c): control posts ING_EV_TIER_WAKE when
 * it has finished frames (their outbox rows are committed by then; one message however many
 * frames, ing_tier_frame_finished), ING_EV_TIER_READ for GetFrame and ING_EV_TIER_STOP. The
 * loop sleeps in curl_multi_poll with the mailbox's doorbell as its extra fd, until a
 * message, a transfer's socket, or the next thing due by time: a frame's retry, a re-check,
 * the store's probe, a stalled request's end, a local copy the retention lets go, what is
 * used (the file system and the catalog's counts, once a second: other writers fill the
 * one, ingest-catalog prune empties the other, so a node refusing at its mark takes frames
 * again and Stats show the prune), the rate's sample while uploading. Nothing polls the
 * outbox. Stats: per-field relaxed atomics this thread
 * alone writes, storeError through a sequence lock; control reads them without a lock.
 *
 * Failures: a store-wide one (unreachable, no progress for --tier-timeout, 5xx,
 * credentials, clock skew, bucket) stops new work and probes the bucket with back-off
 * (250 ms doubling to 10 s); the frame stays due. A store that answers but answers wrong
 * (kept other bytes, acknowledged and kept nothing, contradicts itself, bytes changed in
 * transit) is "misbehaving": uploads go on one at a time at that back-off (a canary), no
 * local copy is deleted, and the first upload verified clears it. A frame's own failure
 * (local file missing or corrupt, a conflict) backs that frame off (1 s doubling to 5 min;
 * conflicts 1 h) with the reason in tier_outbox.last_error.
 */
#include "dataplane/tier/tier.h"
#include "dataplane/tier/tier_internal.h"
#include "dataplane/dataplane.h"
#include "dataplane/hwm.h"
#include "common/clock.h"
#include "common/crc32c.h"
#include "common/log.h"
#include "common/parse.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <openssl/evp.h>

#define COMP "tier"
#define MAX_SLEEP_MS 60000       /* the loop's longest sleep: nothing is due, no message */
#define HASH_CHUNK (1u << 20)
#define DEL_SLOTS 2u
#define PROBE_MIN_MS 250u
#define PROBE_MAX_MS 10000u
#define RETRY_MIN_MS 1000ll
#define RETRY_MAX_MS 300000ll
#define STORE_RETRY_MAX_MS 10000ll  /* a frame failed by the store: the store's back-off */
#define CONFLICT_RETRY_MS 3600000ll
#define RECHECK_MS 1000ull        /* a wrong answer is asked again this much later, once */
#define BACKLOG_EVERY_MS 500u    /* the outbox counted at most this often (count(*) of it) */
#define USAGE_EVERY_MS 1000u     /* what is used measured again (other writers fill the file
				  * system, ingest-catalog prune empties the catalog) */
#define RATE_SAMPLES 11          /* one a second: a 10 s window */
/* uploads: --tier-parallel on the wire and as many more being hashed ahead */
#define MAX_XFERS (2 * ING_TIER_MAX_PARALLEL + DEL_SLOTS + 1 + ING_TIER_MAX_READS)
/* the tier's mailbox: a READ per read at most, one WAKE (ing_tier_frame_finished posts one
 * until the thread has taken it), one STOP: it is never full */
#define MBOX_SIZE (ING_TIER_MAX_READS + 2)

enum xkind { XK_UPLOAD, XK_DELETE, XK_PROBE, XK_READ };
enum xstate {
	XS_FREE = 0,
	XS_HASH,      /* upload: the hash pass */
	XS_READY,     /* upload: hashed, waiting for a place on the wire */
	XS_PUT,       /* upload: the PUT (create-only, or the replacement of a damaged object) */
	XS_VERIFY,    /* upload: the HEAD after it */
	XS_WAIT,      /* upload: a wrong answer, asked again at due_ns */
	XS_READBACK,  /* upload: the object read back (its ETag is not the frame's MD5) */
	XS_CHECK,     /* deletion: the HEAD before it */
	XS_PROBE,
	XS_GET,       /* a GetFrame read's chunk */
};

/* How objects are verified ($ING_TIER_VERIFY; docs/TIER.md). */
enum verify_mode {
	VERIFY_ETAG,       /* the store's ETag against the frame's MD5; read back where it is not */
	VERIFY_READ_BACK,  /* every object read back and its CRC-32C checked */
	VERIFY_NONE,       /* the node's own metadata only (the cost of verifying, for the bench):
			    * no local copy is ever deleted */
};
static const char *const verify_names[] = { "etag", "read-back", "none" };

/* What is wrong with the store (Stats storeCause, /metrics ingest_tier_store_problem). */
enum cause {
	CAUSE_NONE = 0,
	CAUSE_UNREACHABLE,    /* connect failed, reset */
	CAUSE_TIMEOUT,        /* no progress for --tier-timeout */
	CAUSE_SERVER,         /* 5xx */
	CAUSE_CREDENTIALS,    /* 403 */
	CAUSE_NO_BUCKET,
	CAUSE_CLOCK_SKEW,     /* the request's time refused */
	CAUSE_ERROR,
	CAUSE_TRANSIT,        /* the store received other bytes than were sent (BadDigest) */
	CAUSE_DIGEST,         /* the store keeps other bytes than it acknowledged */
	CAUSE_LOST,           /* acknowledged, and then no such object */
	CAUSE_INCONSISTENT,   /* its answers contradict each other */
};
static const char *const cause_names[] = {
	"none", "unreachable", "timeout", "server_error", "credentials", "no_bucket", "clock_skew",
	"error", "transit_corruption", "digest_mismatch", "object_missing", "inconsistent_answers",
};

struct xfer {
	enum xkind kind;
	enum xstate st;
	bool exists;               /* the last PUT found an object there (412) */
	bool replaced;             /* this attempt replaced the frame's damaged object once */
	bool quoted;               /* ... with If-Match in the quoted form */
	unsigned rechecks;         /* HEADs asked again this attempt */
	uint64_t due_ns;           /* XS_WAIT: when */
	struct tier_row row;
	int fd;
	uint64_t hashed;
	uint32_t crc;
	EVP_MD_CTX *sha, *md5;
	char sha_hex[65];          /* the body's SHA-256 (hash pass) */
	char md5_hex[33];          /* its MD5, as an ETag shows it */
	char md5_b64[25];          /* as Content-MD5 carries it */
	struct ing_s3_object seen; /* the object as the last HEAD showed it */
	uint64_t rb_len;           /* XS_READBACK: bytes read back, their CRC-32C */
	uint32_t rb_crc;
	struct s3_req req;
	bool in_multi;
	struct ing_tier_read *rd;  /* XK_READ: the read whose chunk this GET fetches */
};

/*
 * Stats for the control thread: each field written by the tier thread alone with a relaxed
 * atomic store (publish, at the end of each loop pass), read with relaxed loads, as the
 * dataplane lcores' counters; the one string, storeError, through a sequence lock
 * (tier_seqstr, tier_internal.h).
 */
struct tier_pub {
	uint64_t store_state, cause, verification;
	uint64_t backlog_frames, backlog_bytes;
	int64_t oldest_ms;
	uint64_t uploaded_frames, uploaded_bytes, already_stored, upload_errors, in_progress;
	uint64_t conflicts, digest_mismatches, read_backs, local_deleted;
	uint64_t census_done, frames[3], bytes[3];
	uint64_t refusing;
	uint64_t usage_pct, rate;    /* doubles, as their bits */
	struct tier_seqstr err;
};

struct ing_tier {
	struct ing_s3 s3;
	bool enabled;
	char data_dir[PATH_MAX];
	unsigned parallel;
	int64_t retention_ms;
	unsigned hw_pct;
	uint64_t hw_bytes;
	enum verify_mode verify;
	cpu_set_t cpus;
	unsigned nice;
	/* thread */
	pthread_t th;
	bool started;
	_Atomic bool stop;
	CURLM *multi;
	struct tier_db *db;
	uint8_t *buf;              /* HASH_CHUNK */
	struct xfer x[MAX_XFERS];
	unsigned n_up, n_del;      /* uploads (hashing, hashed, on the wire), deletion checks */
	bool probing;
	/* catalog view */
	bool outbox_on, census_done;
	struct tier_census census; /* the catalog's own counts (tier_usage) */
	int64_t digest_since_ns;   /* 'both' rows verified before: verified again first */
	uint64_t next_setup_ns, next_del_ns, next_usage_ns, next_backlog_ns;
	int64_t next_retry_ms;     /* the next backed-off row's next_ms (0: none) */
	bool poll_due;             /* look for due outbox rows (a wake-up, a finished upload) */
	bool usage_due;            /* measure what is used again (frames finished or deleted) */
	bool backlog_dirty;        /* the outbox changed since it was last counted */
	bool wake_posted;          /* __atomic: a WAKE is in the mailbox, not yet taken */
	/* the store */
	enum ing_tier_store_state store_state;
	enum cause cause;
	bool misbehaving;          /* ERROR from wrong answers: uploads go on, one at a time */
	bool error_coded;          /* store_error came from an answer with an S3 error code */
	char store_error[TIER_SEQSTR_BYTES];
	char published_error[TIER_SEQSTR_BYTES];  /* what pub.err holds */
	uint64_t next_probe_ns;
	unsigned probe_ms;
	bool etags_not_md5;        /* learned: this store's ETags are not MD5s (read back instead) */
	/* usage */
	double usage_pct;
	uint64_t used_bytes;       /* the measure the mark is in: bytes, or the fs's used bytes */
	bool purge;                /* above the low-water mark: delete verified copies early */
	bool at_mark;              /* used >= mark (logged on change) */
	/*
	 * For control's admission (ing_tier_refusing): the mark, and what is used as hwm counts
	 * it (dataplane/hwm.h: this thread's measure less what persistence had inserted by
	 * then, plus the frames control finished whose rows persistence inserted) plus the
	 * bytes control has admitted and not finished: each frame once, in any order.
	 */
	_Atomic uint64_t mark_bytes, backlog_now;
	struct ing_hwm *hwm;       /* opts.hwm, or own */
	struct ing_hwm own;        /* no persistence counts for it: the measure alone */
	/* counters (this thread) */
	uint64_t uploaded_frames, uploaded_bytes, already_stored, upload_errors, conflicts;
	uint64_t digest_mismatches, read_backs;
	uint64_t local_deleted;
	struct tier_backlog backlog;
	uint64_t rate_t[RATE_SAMPLES], rate_b[RATE_SAMPLES];
	unsigned rate_n;
	uint64_t next_rate_ns;
	double rate;
	/* what Stats shows (ing_tier_get_stats), written by this thread alone (publish) */
	struct tier_pub pub;
	/* reads (GetFrame): control -> this thread's mailbox (ING_EV_TIER_READ) -> this thread
	 * -> control's mailbox (the call r->done(r)) -> control */
	char catalog[PATH_MAX];
	struct ing_mbox *in, *ctl;
	struct ing_catalog *cat;   /* read-only handle for the lookups (this thread) */
	struct ing_tier_read reads[ING_TIER_MAX_READS];
	uint64_t reads_served;
};

const char *ing_tier_store_state_name(enum ing_tier_store_state s)
{
	static const char *const n[] = { "off", "unknown", "ok", "unreachable", "credentials refused",
					 "no bucket", "error" };
	return (unsigned)s < sizeof(n) / sizeof(n[0]) ? n[s] : "?";
}

void ing_tier_opts_init(struct ing_tier_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->parallel = ING_TIER_DEFAULT_PARALLEL;
	o->retention_ms = -1;
}

static int64_t now_ms(void)
{
	return ing_wall_ns() / 1000000;
}

/* ---------------------------------------------------------------- the store's state */

static enum ing_tier_store_state state_of(enum ing_s3_result r)
{
	switch (r) {
	case ING_S3_OK: return ING_TIER_STORE_OK;
	case ING_S3_DENIED: return ING_TIER_STORE_DENIED;
	case ING_S3_NO_BUCKET: return ING_TIER_STORE_NO_BUCKET;
	case ING_S3_UNREACHABLE:
	case ING_S3_SERVER: return ING_TIER_STORE_UNREACHABLE;
	default: return ING_TIER_STORE_ERROR;
	}
}

static bool store_wide(enum ing_s3_result r)
{
	return r == ING_S3_UNREACHABLE || r == ING_S3_SERVER || r == ING_S3_DENIED ||
	       r == ING_S3_NO_BUCKET || r == ING_S3_CLOCK_SKEW;
}

static enum cause cause_of(const struct s3_req *q, enum ing_s3_result r)
{
	switch (r) {
	case ING_S3_UNREACHABLE: return q->stalled ? CAUSE_TIMEOUT : CAUSE_UNREACHABLE;
	case ING_S3_SERVER: return CAUSE_SERVER;
	case ING_S3_DENIED: return CAUSE_CREDENTIALS;
	case ING_S3_NO_BUCKET: return CAUSE_NO_BUCKET;
	case ING_S3_CLOCK_SKEW: return CAUSE_CLOCK_SKEW;
	case ING_S3_BAD_DIGEST: return CAUSE_TRANSIT;
	default: return CAUSE_ERROR;
	}
}

static void backoff_probe(struct ing_tier *t)
{
	t->next_probe_ns = ing_now_ns() + (uint64_t)t->probe_ms * 1000000ull;
	t->probe_ms = t->probe_ms * 2 > PROBE_MAX_MS ? PROBE_MAX_MS : t->probe_ms * 2;
}

/* The store is not OK (s, for cause c, why): the back-off starts again from its shortest
 * when it was OK (or misbehaved and now fails otherwise, or the other way round). */
static void store_not_ok(struct ing_tier *t, enum ing_tier_store_state s, enum cause c,
			 bool misbehaving, bool coded, const char *why)
{
	if (t->store_state == ING_TIER_STORE_OK || t->store_state == ING_TIER_STORE_UNKNOWN ||
	    misbehaving != t->misbehaving)
		t->probe_ms = PROBE_MIN_MS;
	t->store_state = s;
	t->cause = c;
	t->misbehaving = misbehaving;
	t->error_coded = coded;
	snprintf(t->store_error, sizeof(t->store_error), "%s", why);
	backoff_probe(t);
}

/*
 * A store-wide failure of request q: uploads stop, the bucket is probed with back-off.
 * Its cause stays in Stats until a request succeeds: a later answer of the same state
 * that says less (a HEAD's 403 or 503 has no body, so no S3 error code) does not replace
 * one that named it.
 */
static void store_bad(struct ing_tier *t, const struct s3_req *q, enum ing_s3_result r)
{
	enum ing_tier_store_state s = state_of(r);
	enum cause c = cause_of(q, r);
	bool coded = q->code[0] || r == ING_S3_CLOCK_SKEW;
	char why[1024];
	s3_req_describe(q, r, why, sizeof(why));
	if (s == t->store_state && t->error_coded && !coded && !t->misbehaving) {
		backoff_probe(t);
		return;
	}
	bool news = s != t->store_state || c != t->cause || strcmp(why, t->store_error) != 0;
	if (news) {
		/* a wrong key, clock or bucket is the operator's to fix: ERR; an outage: WARN */
		enum ing_log_level lvl = s == ING_TIER_STORE_UNREACHABLE ? ING_LOG_WARN : ING_LOG_ERR;
		ING_LOG_RL(lvl, COMP, "object store %s: %s; frames stay local and queued (backlog %" PRIu64
			   " frames), retrying", ing_tier_store_state_name(s), why, t->backlog.frames);
	}
	store_not_ok(t, s, c, false, coded, why);
}

/*
 * The store answered, but wrong (why: what it said and what the frame is). Uploads go on,
 * one at a time at the probe's back-off, no local copy is deleted, until one is verified.
 */
static void store_misbehaves(struct ing_tier *t, enum cause c, const char *why)
{
	if (t->store_state != ING_TIER_STORE_ERROR || c != t->cause || !t->misbehaving)
		ING_LOG_RL(ING_LOG_ERR, COMP, "object store %s misbehaves: %s; local copies are kept and "
			   "no local copy is deleted until an upload is verified again (backlog %" PRIu64
			   " frames)", t->s3.display, why, t->backlog.frames);
	store_not_ok(t, ING_TIER_STORE_ERROR, c, true, true, why);
}

static void store_good(struct ing_tier *t)
{
	if (t->store_state != ING_TIER_STORE_OK)
		ING_INFO(COMP, "object store %s: %s%s", t->s3.display, t->misbehaving ?
			 "an upload verified against the store's digest again" :
			 "bucket reachable, credentials accepted",
			 t->store_state == ING_TIER_STORE_UNKNOWN ? "" : " (again): uploads resume");
	t->store_state = ING_TIER_STORE_OK;
	t->cause = CAUSE_NONE;
	t->misbehaving = false;
	t->error_coded = false;
	t->store_error[0] = 0;
	t->probe_ms = PROBE_MIN_MS;
	t->poll_due = true;
	t->next_del_ns = 0;
}

/* ---------------------------------------------------------------- transfers */

static bool on_wire(enum xstate st)
{
	return st == XS_PUT || st == XS_VERIFY || st == XS_WAIT || st == XS_READBACK;
}

/* uploads on the wire (a PUT, its HEAD or read-back, or a re-check's wait) */
static unsigned n_wire(const struct ing_tier *t)
{
	unsigned n = 0;
	for (unsigned i = 0; i < MAX_XFERS; i++)
		n += t->x[i].kind == XK_UPLOAD && on_wire(t->x[i].st);
	return n;
}

static struct xfer *xfer_get(struct ing_tier *t, enum xkind k)
{
	for (unsigned i = 0; i < MAX_XFERS; i++)
		if (t->x[i].st == XS_FREE) {
			struct xfer *x = &t->x[i];
			memset(x, 0, sizeof(*x));
			x->kind = k;
			x->fd = -1;
			x->req.fd = -1;
			if (k == XK_UPLOAD)
				t->n_up++;
			else if (k == XK_DELETE)
				t->n_del++;
			else if (k == XK_PROBE)
				t->probing = true;
			return x;
		}
	return NULL;
}

/* the transfer's request ends (it was taken off the multi handle, or never on it) */
static void xfer_req_end(struct ing_tier *t, struct xfer *x)
{
	if (x->in_multi)
		curl_multi_remove_handle(t->multi, x->req.easy);
	x->in_multi = false;
	s3_req_release(&x->req);
}

static void xfer_put(struct ing_tier *t, struct xfer *x)
{
	xfer_req_end(t, x);
	if (x->fd >= 0) {
		/* done with the bytes: do not keep them in the page cache for nothing */
		(void)posix_fadvise(x->fd, 0, 0, POSIX_FADV_DONTNEED);
		close(x->fd);
	}
	x->fd = -1;
	EVP_MD_CTX_free(x->sha);
	EVP_MD_CTX_free(x->md5);
	x->sha = x->md5 = NULL;
	if (x->kind == XK_UPLOAD) {
		t->n_up--;
		t->poll_due = true;   /* a place for the next due row */
	} else if (x->kind == XK_DELETE)
		t->n_del--;
	else if (x->kind == XK_PROBE)
		t->probing = false;
	x->st = XS_FREE;
}

static bool xfer_start(struct ing_tier *t, struct xfer *x, int setup_rc, enum xstate st)
{
	if (setup_rc == 0 && curl_multi_add_handle(t->multi, x->req.easy) == CURLM_OK) {
		x->in_multi = true;
		x->st = st;
		return true;
	}
	ING_LOG_RL(ING_LOG_ERR, COMP, "cannot start a request to the store (out of memory?)");
	s3_req_release(&x->req);
	return false;
}

static void backoff_row(struct ing_tier *t, struct xfer *x, int64_t delay_ms, const char *why)
{
	t->upload_errors++;
	ING_LOG_RL(ING_LOG_ERR, COMP, "frame %s/%s: %s; retry in %lld s (attempt %u)", x->row.wafer_id,
		   x->row.frame_id, why, (long long)((delay_ms + 999) / 1000), x->row.attempts + 1);
	int64_t at = now_ms() + delay_ms;
	if (tier_db_failed(t->db, &x->row, at, why) == 0 && (!t->next_retry_ms || at < t->next_retry_ms))
		t->next_retry_ms = at;   /* the loop wakes for it */
	t->backlog_dirty = true;
}

static int64_t doubling(unsigned attempts, int64_t max_ms)
{
	int64_t d = RETRY_MIN_MS << (attempts < 20 ? attempts : 20);
	return d > max_ms ? max_ms : d;
}

/* A frame's own failure: back it off (1 s doubling to 5 min) and say why in its row. */
static void row_failed(struct ing_tier *t, struct xfer *x, const char *why)
{
	backoff_row(t, x, doubling(x->row.attempts, RETRY_MAX_MS), why);
}

/* The store failed this frame (a wrong answer): the store's back-off, not the frame's. */
static void row_failed_by_store(struct ing_tier *t, struct xfer *x, const char *why)
{
	backoff_row(t, x, doubling(x->row.attempts, STORE_RETRY_MAX_MS), why);
}

/* ---------------------------------------------------------------- uploads */

static void upload_begin(struct ing_tier *t, const struct tier_row *row)
{
	struct xfer *x = xfer_get(t, XK_UPLOAD);
	char path[PATH_MAX + 600], why[PATH_MAX + 700];
	struct stat st;
	if (!x)
		return;
	x->row = *row;
	snprintf(path, sizeof(path), "%s/%s", t->data_dir, row->path);
	x->fd = open(path, O_RDONLY | O_CLOEXEC);
	int loc;
	if (x->fd < 0 && errno == ENOENT && (loc = tier_db_location(t->db, row)) != ING_LOC_LOCAL &&
	    loc != -EIO) {
		/* not a local frame any more (ingest-catalog prune deleted it, or it is in the
		 * store already): nothing to upload; a file missing for a local frame is below */
		ING_LOG_RL(ING_LOG_INFO, COMP, "frame %s/%s is %s: dropped from the upload queue",
			   row->wafer_id, row->frame_id, loc == -ENOENT ? "no longer in the catalog "
			   "(ingest-catalog prune?)" : "in the object store already");
		(void)tier_db_dequeue(t->db, row);
		t->backlog_dirty = true;
		xfer_put(t, x);
		return;
	}
	if (x->fd < 0 || fstat(x->fd, &st) != 0 || (uint64_t)st.st_size != row->length) {
		if (x->fd < 0)
			snprintf(why, sizeof(why), "local copy %s: %s (not uploaded)", path, strerror(errno));
		else
			snprintf(why, sizeof(why), "local copy %s holds %lld bytes, the catalog %" PRIu64
				 " (not uploaded)", path, (long long)st.st_size, row->length);
		row_failed(t, x, why);
		xfer_put(t, x);
		return;
	}
	x->req.fd = x->fd;
	x->sha = EVP_MD_CTX_new();
	x->md5 = t->verify != VERIFY_NONE ? EVP_MD_CTX_new() : NULL;
	if (!x->sha || !EVP_DigestInit_ex(x->sha, EVP_sha256(), NULL) ||
	    (t->verify != VERIFY_NONE && (!x->md5 || !EVP_DigestInit_ex(x->md5, EVP_md5(), NULL)))) {
		row_failed(t, x, "SHA-256 or MD5 unavailable (OpenSSL)");
		xfer_put(t, x);
		return;
	}
	x->st = XS_HASH;
}

static void hex(char *out, const unsigned char *p, unsigned n)
{
	static const char d[] = "0123456789abcdef";
	for (unsigned i = 0; i < n; i++) {
		out[2 * i] = d[p[i] >> 4];
		out[2 * i + 1] = d[p[i] & 15];
	}
	out[2 * n] = 0;
}

/* The hash pass is done: the bytes must be the catalog's; then the frame waits its turn. */
static void upload_hashed(struct ing_tier *t, struct xfer *x)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned mdl = 0;
	char why[700];

	EVP_DigestFinal_ex(x->sha, md, &mdl);
	if (x->crc != x->row.crc32c) {
		snprintf(why, sizeof(why), "local copy %s is corrupt: crc32c 0x%08x, the catalog says 0x%08x "
			 "(not uploaded; re-send the frame to restore it)", x->row.path, x->crc,
			 x->row.crc32c);
		row_failed(t, x, why);
		xfer_put(t, x);
		return;
	}
	hex(x->sha_hex, md, mdl < 32 ? mdl : 32);
	if (x->md5) {
		EVP_DigestFinal_ex(x->md5, md, &mdl);
		hex(x->md5_hex, md, mdl < 16 ? mdl : 16);
		EVP_EncodeBlock((unsigned char *)x->md5_b64, md, 16);
	}
	x->st = XS_READY;
}

static int key_of(struct ing_tier *t, const struct xfer *x, char *key)
{
	return ing_s3_key(&t->s3, key, ING_S3_KEY_MAX + 1, x->row.wafer_id, x->row.frame_id);
}

/*
 * The frame's PUT: create-only, or (if_match) the replacement of the object with that
 * ETag. False when it could not be started (x released).
 */
static bool upload_put(struct ing_tier *t, struct xfer *x, const char *if_match)
{
	char key[ING_S3_KEY_MAX + 1];
	if (key_of(t, x, key)) {
		backoff_row(t, x, CONFLICT_RETRY_MS, "no object key for these ids");
		xfer_put(t, x);
		return false;
	}
	/* a prepared upload may wait long for the wire (the store down): its queued row may
	 * have been dropped meanwhile (ingest-catalog prune --include-unverified), and then
	 * nothing goes to the store (the open file would still read) */
	if (!if_match && tier_db_queued(t->db, &x->row) == 0) {
		ING_LOG_RL(ING_LOG_INFO, COMP, "frame %s/%s: its upload left the queue while it waited "
			   "(ingest-catalog prune?): not uploaded", x->row.wafer_id, x->row.frame_id);
		t->backlog_dirty = true;
		xfer_put(t, x);
		return false;
	}
	xfer_req_end(t, x);
	x->req.fd = x->fd;
	x->req.len = x->row.length;
	struct s3_put_args a = {
		.sha256_hex = x->sha_hex,
		.md5_b64 = t->verify != VERIFY_NONE ? x->md5_b64 : NULL,
		.crc32c = x->row.crc32c,
		.wafer_id = x->row.wafer_id,
		.frame_id = x->row.frame_id,
		.if_match = if_match,
	};
	if (!xfer_start(t, x, s3_req_put(&x->req, &t->s3, key, &a), XS_PUT)) {
		xfer_put(t, x);
		return false;
	}
	return true;
}

/* Hashed frames go on the wire, oldest first, while fewer than parallel are there (one,
 * at the probe's back-off, while the store misbehaves). */
static void start_puts(struct ing_tier *t, uint64_t now)
{
	unsigned limit = t->parallel;
	if (t->store_state != ING_TIER_STORE_OK) {
		if (!t->misbehaving || now < t->next_probe_ns)
			return;
		limit = 1;
	}
	unsigned wire = n_wire(t);
	while (wire < limit) {
		struct xfer *first = NULL;
		for (unsigned i = 0; i < MAX_XFERS; i++) {
			struct xfer *x = &t->x[i];
			if (x->st == XS_READY && (!first || x->row.seq < first->row.seq))
				first = x;
		}
		if (!first)
			return;
		if (upload_put(t, first, NULL))
			wire++;
		if (t->next_rate_ns == UINT64_MAX) {   /* uploading again: a new window from now */
			t->rate_n = 0;
			t->next_rate_ns = now;
		}
	}
}

/* Hash up to HASH_CHUNK bytes of one pending upload; true while hashing remains. */
static bool hash_step(struct ing_tier *t)
{
	bool more = false;
	for (unsigned i = 0; i < MAX_XFERS; i++) {
		struct xfer *x = &t->x[i];
		if (x->st != XS_HASH)
			continue;   /* one chunk of each a pass: the transfers in flight keep moving */
		size_t want = x->row.length - x->hashed < HASH_CHUNK ? (size_t)(x->row.length - x->hashed) :
									HASH_CHUNK;
		ssize_t got;
		do
			got = pread(x->fd, t->buf, want, (off_t)x->hashed);
		while (got < 0 && errno == EINTR);
		if (got <= 0) {
			char why[600];
			snprintf(why, sizeof(why), "reading local copy %s: %s", x->row.path,
				 got < 0 ? strerror(errno) : "shorter than catalogued");
			row_failed(t, x, why);
			xfer_put(t, x);
			continue;
		}
		EVP_DigestUpdate(x->sha, t->buf, (size_t)got);
		if (x->md5)
			EVP_DigestUpdate(x->md5, t->buf, (size_t)got);
		x->crc = ing_crc32c(x->crc, t->buf, (size_t)got);
		x->hashed += (uint64_t)got;
		if (x->hashed == x->row.length)
			upload_hashed(t, x);
		else
			more = true;
	}
	return more;
}

static void head_of(struct ing_tier *t, struct xfer *x, enum xstate st)
{
	char key[ING_S3_KEY_MAX + 1];
	xfer_req_end(t, x);
	if (key_of(t, x, key) || !xfer_start(t, x, s3_req_head(&x->req, &t->s3, key), st))
		xfer_put(t, x);
}

/* A wrong answer is asked again a second later, once per attempt: true if it will be. */
static bool recheck(struct ing_tier *t, struct xfer *x)
{
	if (x->rechecks >= 1)
		return false;
	x->rechecks++;
	xfer_req_end(t, x);
	x->st = XS_WAIT;
	x->due_ns = ing_now_ns() + RECHECK_MS * 1000000ull;
	return true;
}

/* The frame's object is verified (etag: the store's digest it was verified by). */
static void upload_verified(struct ing_tier *t, struct xfer *x, const char *etag)
{
	if (tier_db_uploaded(t->db, &x->row, etag, ing_wall_ns()) == 0) {
		if (x->exists && !x->replaced) {
			t->already_stored++;
			ING_LOG_RL(ING_LOG_INFO, COMP, "frame %s/%s: already in the store with the same "
				   "bytes (an earlier attempt got through, or another node stored it): "
				   "done", x->row.wafer_id, x->row.frame_id);
		} else {
			t->uploaded_frames++;
			t->uploaded_bytes += x->row.length;
		}
	}
	if (t->store_state != ING_TIER_STORE_OK)
		store_good(t);   /* the store keeps what it acknowledges again */
	xfer_put(t, x);
	t->poll_due = true;
	t->backlog_dirty = true;
	t->next_del_ns = 0;      /* a copy the retention may let go */
}

static void frame_desc(const struct xfer *x, char *out, size_t n)
{
	snprintf(out, n, "%" PRIu64 " bytes, MD5 %s, crc32c %08x, sha256 %.16s...", x->row.length,
		 x->md5_hex[0] ? x->md5_hex : "(not computed)", x->row.crc32c, x->sha_hex);
}

static void object_desc(const struct ing_s3_object *o, char *out, size_t n)
{
	char crc[16] = "(none)";
	if (o->has_crc)
		snprintf(crc, sizeof(crc), "%08x", o->crc32c);
	snprintf(out, n, "%lld bytes, ETag %s, crc32c %s, sha256 %.16s%s", (long long)o->length,
		 o->etag[0] ? o->etag : "(none)", crc, o->sha256[0] ? o->sha256 : "(none)",
		 o->sha256[0] ? "..." : "");
}

/*
 * The frame's own object under its key holds other bytes than the frame (the store kept
 * something else than it acknowledged): loud, and replaced once per attempt (If-Match:
 * that exact object), else the frame tries again at the store's back-off.
 */
static void upload_damaged(struct ing_tier *t, struct xfer *x, const char *extra)
{
	char key[ING_S3_KEY_MAX + 1], fd[200], od[300], why[1400];
	bool replace = !x->replaced;
	(void)key_of(t, x, key);
	frame_desc(x, fd, sizeof(fd));
	object_desc(&x->seen, od, sizeof(od));
	t->digest_mismatches++;
	snprintf(why, sizeof(why), "the object store keeps other bytes under %s than this node uploaded: "
		 "its object: %s (the ETag is the store's MD5 of what it keeps)%s; the frame's (this "
		 "node's copy): %s; the local copy is kept%s", key, od, extra ? extra : "", fd,
		 replace ? "; replacing the object" : "");
	store_misbehaves(t, CAUSE_DIGEST, why);
	if (!replace) {
		row_failed_by_store(t, x, why);
		xfer_put(t, x);
		return;
	}
	x->replaced = true;
	x->quoted = false;
	x->rechecks = 0;
	(void)upload_put(t, x, x->seen.etag);
}

/*
 * The replacement found another object than the damaged one (412): radosgw (Pacific)
 * compares If-Match with the ETag as stored, unquoted, where HTTP's form is quoted; so the
 * quoted form is tried next, and after that the object is looked at again. True if x went on.
 */
static bool replace_again(struct ing_tier *t, struct xfer *x)
{
	if (!x->replaced || x->quoted)
		return false;
	char etag[sizeof(x->seen.etag) + 2];
	snprintf(etag, sizeof(etag), "\"%s\"", x->seen.etag);
	x->quoted = true;
	(void)upload_put(t, x, etag);
	return true;
}

/* The object is read back whole (never held: CRC-32C and length as it comes). */
static int readback_sink(void *arg, const uint8_t *p, size_t n)
{
	struct xfer *x = arg;
	if (x->rb_len + n > x->row.length)
		return -EFBIG;   /* longer than the frame: not its bytes */
	x->rb_crc = ing_crc32c(x->rb_crc, p, n);
	x->rb_len += n;
	return 0;
}

static void upload_read_back(struct ing_tier *t, struct xfer *x)
{
	char key[ING_S3_KEY_MAX + 1];
	xfer_req_end(t, x);
	x->rb_len = 0;
	x->rb_crc = 0;
	x->req.sink = readback_sink;
	x->req.sink_arg = x;
	if (key_of(t, x, key) || !xfer_start(t, x, s3_req_get(&x->req, &t->s3, key, 0, 0), XS_READBACK))
		xfer_put(t, x);
}

/* The HEAD after the PUT answered: is the object under the key this frame's bytes? */
static void upload_check(struct ing_tier *t, struct xfer *x)
{
	const struct ing_s3_object *o = &x->req.obj;
	char key[ING_S3_KEY_MAX + 1], fd[200], od[300], why[1400];
	x->seen = *o;
	(void)key_of(t, x, key);
	bool own = o->sha256[0] && !strcmp(o->sha256, x->sha_hex);   /* this node's upload */
	bool len_ok = o->length >= 0 && (uint64_t)o->length == x->row.length;
	bool md5_ok = x->md5_hex[0] && !strcasecmp(o->etag, x->md5_hex);

	if (t->verify == VERIFY_NONE) {
		/* the node's own metadata only: whether the store keeps the bytes is not known,
		 * and no local copy is ever deleted in this mode */
		if (len_ok && o->has_crc && o->crc32c == x->row.crc32c && (own || (x->exists && !o->sha256[0]))) {
			upload_verified(t, x, NULL);
			return;
		}
	} else if (md5_ok && len_ok) {
		/* the store's own digest is the frame's: this frame's bytes, whoever put them */
		if (t->verify == VERIFY_ETAG)
			upload_verified(t, x, o->etag);
		else
			upload_read_back(t, x);
		return;
	} else if (md5_ok) {
		if (recheck(t, x))
			return;
		object_desc(o, od, sizeof(od));
		frame_desc(x, fd, sizeof(fd));
		snprintf(why, sizeof(why), "the object store's answers for %s contradict each other: its ETag "
			 "is the frame's MD5, its length is not (its object: %s; the frame's: %s); the local "
			 "copy is kept", key, od, fd);
		store_misbehaves(t, CAUSE_INCONSISTENT, why);
		row_failed_by_store(t, x, why);
		xfer_put(t, x);
		return;
	}
	if (!own && x->exists) {
		/* not this node's upload: another object under the key, if it still is a second
		 * later (a wrong answer once is not a conflict) */
		if (recheck(t, x))
			return;
		object_desc(o, od, sizeof(od));
		frame_desc(x, fd, sizeof(fd));
		t->conflicts++;
		snprintf(why, sizeof(why), "another object is stored under key %s: the store's object: %s; "
			 "this frame's (the bytes this node holds): %s: the frame stays local; move that object "
			 "away to tier it", key, od, fd);
		backoff_row(t, x, CONFLICT_RETRY_MS, why);
		xfer_put(t, x);
		return;
	}
	if (!own || t->verify == VERIFY_NONE) {
		if (recheck(t, x))
			return;
		object_desc(o, od, sizeof(od));
		frame_desc(x, fd, sizeof(fd));
		snprintf(why, sizeof(why), "the object store acknowledged the upload of %s, and then shows "
			 "another object there (%s; the frame's: %s); the local copy is kept", key, od, fd);
		store_misbehaves(t, CAUSE_INCONSISTENT, why);
		row_failed_by_store(t, x, why);
		xfer_put(t, x);
		return;
	}
	if (!len_ok) {   /* the node's own upload, another length: damaged, if it still is */
		if (recheck(t, x))
			return;
		upload_damaged(t, x, NULL);
		return;
	}
	/* the node's own upload, the frame's length, an ETag that is not the frame's MD5 (or
	 * every object is read back): its bytes decide */
	upload_read_back(t, x);
}

static void upload_read_back_done(struct ing_tier *t, struct xfer *x, enum ing_s3_result res)
{
	char why[1200], extra[160];
	if (res == ING_S3_OK && strcmp(x->req.obj.etag, x->seen.etag)) {
		/* another object than the one the HEAD showed: look again */
		if (!recheck(t, x)) {
			row_failed_by_store(t, x, "the object changed while it was read back; retrying");
			xfer_put(t, x);
		}
		return;
	}
	if (res == ING_S3_OK && x->rb_len == x->row.length && x->rb_crc == x->row.crc32c) {
		t->read_backs++;
		if (t->verify == VERIFY_ETAG && !t->etags_not_md5 && ing_s3_etag_is_md5(x->seen.etag)) {
			t->etags_not_md5 = true;
			ING_INFO(COMP, "object store %s: its ETag of %s/%s is not the MD5 of the bytes it holds "
				 "(read back: they are the frame's): its ETags are no MD5s (server-side "
				 "encryption?); objects are verified by reading them back", t->s3.display,
				 x->row.wafer_id, x->row.frame_id);
		}
		upload_verified(t, x, x->seen.etag);
		return;
	}
	if (res == ING_S3_OK || (res == ING_S3_LOCAL && x->req.sink_failed)) {
		snprintf(extra, sizeof(extra), "; read back: %" PRIu64 "%s bytes, crc32c %08x",
			 x->rb_len, res == ING_S3_OK ? "" : " and more", x->rb_crc);
		upload_damaged(t, x, extra);
		return;
	}
	if (store_wide(res)) {
		t->upload_errors++;
		store_bad(t, &x->req, res);
		xfer_put(t, x);
		return;
	}
	s3_req_describe(&x->req, res, why, sizeof(why));
	row_failed_by_store(t, x, why);
	xfer_put(t, x);
}

static void upload_done(struct ing_tier *t, struct xfer *x, enum ing_s3_result res)
{
	char why[1400], key[ING_S3_KEY_MAX + 1];
	if (x->st == XS_READBACK) {
		upload_read_back_done(t, x, res);
		return;
	}
	if (store_wide(res)) {
		t->upload_errors++;
		store_bad(t, &x->req, res);
		xfer_put(t, x);   /* the frame stays due: it goes once the store answers */
		return;
	}
	if (res != ING_S3_OK && res != ING_S3_EXISTS)
		s3_req_describe(&x->req, res, why, sizeof(why));
	(void)key_of(t, x, key);
	if (x->st == XS_PUT) {
		bool sent_frame = x->req.sent == x->row.length && x->req.crc_sent == x->row.crc32c;
		if ((res == ING_S3_OK || res == ING_S3_BAD_DIGEST) && !sent_frame) {
			snprintf(why, sizeof(why), "local copy %s changed while it was uploaded", x->row.path);
			row_failed(t, x, why);
		} else if (res == ING_S3_EXISTS && replace_again(t, x)) {
			return;
		} else if (res == ING_S3_OK || res == ING_S3_EXISTS) {
			x->exists = res == ING_S3_EXISTS;
			x->rechecks = 0;
			head_of(t, x, XS_VERIFY);
			return;
		} else if (res == ING_S3_BAD_DIGEST) {
			/* the bytes that left were the frame's (their CRC-32C is the catalog's) */
			store_misbehaves(t, CAUSE_TRANSIT, why);
			row_failed_by_store(t, x, why);
		} else {
			row_failed(t, x, why);
		}
		xfer_put(t, x);
		return;
	}
	/* XS_VERIFY */
	if (res == ING_S3_OK) {
		upload_check(t, x);
		return;
	}
	if (res == ING_S3_NOT_FOUND && !x->exists) {
		if (recheck(t, x))
			return;
		snprintf(why, sizeof(why), "the object store acknowledged the upload of %s (HTTP 200) and then "
			 "has no such object: it keeps nothing of what it acknowledges; the local copy is "
			 "kept", key);
		store_misbehaves(t, CAUSE_LOST, why);
		row_failed_by_store(t, x, why);
	} else if (res == ING_S3_NOT_FOUND) {
		snprintf(why, sizeof(why), "the object under %s went away between the upload's 412 and its "
			 "check: uploading again", key);
		row_failed_by_store(t, x, why);
	} else {
		row_failed(t, x, why);
	}
	xfer_put(t, x);
}

/* ---------------------------------------------------------------- local copies */

static int fsync_parent(const char *path)
{
	char dir[PATH_MAX + 600];
	snprintf(dir, sizeof(dir), "%s", path);
	char *slash = strrchr(dir, '/');
	if (!slash)
		return 0;
	*slash = 0;
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	int rc = fsync(fd) ? -errno : 0;
	close(fd);
	return rc;
}

/* The HEAD before a deletion: the object is still the one verified (its length and the
 * ETag it was verified by, the store's digest of what it keeps), or the copy stays. */
static void delete_done(struct ing_tier *t, struct xfer *x, enum ing_s3_result res)
{
	char why[1024];
	t->next_del_ns = 0;   /* its slot is free: the next candidates */
	const struct ing_s3_object *o = &x->req.obj;
	if (store_wide(res)) {
		store_bad(t, &x->req, res);
		xfer_put(t, x);
		return;
	}
	if (res == ING_S3_OK && t->store_state == ING_TIER_STORE_OK && o->length >= 0 &&
	    (uint64_t)o->length == x->row.length && x->row.object_md5[0] &&
	    !strcmp(o->etag, x->row.object_md5)) {
		char path[PATH_MAX + 600];
		if (tier_db_location(t->db, &x->row) != ING_LOC_BOTH) {
			/* the frame left 'both' during the check (ingest-catalog prune forgot it,
			 * and it may have been stored again since): its file is not this copy */
			xfer_put(t, x);
			return;
		}
		snprintf(path, sizeof(path), "%s/%s", t->data_dir, x->row.path);
		int rc = unlink(path) == 0 || errno == ENOENT ? 0 : -errno;
		if (rc == 0)
			rc = fsync_parent(path);   /* gone for good before the catalog says so */
		if (rc == 0 && tier_db_local_deleted(t->db, &x->row, ing_wall_ns()) == 0) {
			t->local_deleted++;
			t->usage_due = true;
		}
		else if (rc)
			ING_LOG_RL(ING_LOG_ERR, COMP, "deleting the local copy %s: %s", path, strerror(-rc));
		xfer_put(t, x);
		return;
	}
	if (res == ING_S3_OK || res == ING_S3_NOT_FOUND) {
		char od[300];
		object_desc(o, od, sizeof(od));
		ING_LOG_RL(ING_LOG_WARN, COMP, "frame %s/%s: its object %s before deleting the local copy "
			   "(verified: %" PRIu64 " bytes, ETag %s; now: %s): local copy kept, verifying it "
			   "again", x->row.wafer_id, x->row.frame_id, res == ING_S3_NOT_FOUND ?
			   "is gone from the store" : "differs from the one verified", x->row.length,
			   x->row.object_md5, res == ING_S3_NOT_FOUND ? "no such object" : od);
		(void)tier_db_requeue(t->db, &x->row);
		t->poll_due = true;
		t->backlog_dirty = true;
	} else {
		s3_req_describe(&x->req, res, why, sizeof(why));
		ING_LOG_RL(ING_LOG_WARN, COMP, "frame %s/%s: checking its object before deleting the local "
			   "copy: %s", x->row.wafer_id, x->row.frame_id, why);
	}
	xfer_put(t, x);
}

/* ---------------------------------------------------------------- reads (GetFrame) */

static void read_answer(struct ing_tier *t, struct ing_tier_read *r)
{
	void *m = r;
	if (r->status || r->last) {
		if (r->fd >= 0)
			close(r->fd);
		r->fd = -1;
	}
	/* control's mailbox has room for every frame's messages and more: full only if the
	 * control thread is stuck, and then the call's deadline ends it */
	if (ing_mbox_call(t->ctl, r->done, m, 0))
		ING_ERR(COMP, "control's mailbox full: a GetFrame answer is lost");
	t->reads_served++;
}

static void read_fail(struct ing_tier *t, struct ing_tier_read *r, int status, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void read_fail(struct ing_tier *t, struct ing_tier_read *r, int status, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->msg, sizeof(r->msg), fmt, ap);
	va_end(ap);
	r->status = status;
	r->n = 0;
	read_answer(t, r);
}

/* The chunk is in r->buf: its CRC-32C, and with the last one the frame's check. */
static void read_chunk_done(struct ing_tier *t, struct ing_tier_read *r)
{
	r->crc_run = ing_crc32c(r->crc_run, r->buf, r->n);
	r->last = r->offset + r->n == r->length;
	if (r->last && r->crc_run != r->crc32c) {
		bool local = r->from == ING_TIER_FROM_LOCAL;
		ING_LOG_RL(ING_LOG_ERR, COMP, "frame %s/%s: the %s copy is corrupt: crc32c 0x%08x, the "
			   "catalog says 0x%08x", r->wafer_id, r->frame_id, local ? "local" : "store's",
			   r->crc_run, r->crc32c);
		read_fail(t, r, -EBADMSG, "the %s copy of frame %s/%s is corrupt: crc32c 0x%08x, the "
			  "catalog says 0x%08x: discard the bytes%s", local ? "local" : "object store's",
			  r->wafer_id, r->frame_id, r->crc_run, r->crc32c,
			  local && r->location == ING_LOC_BOTH ? "; the object store has a verified copy "
								"(ask for source STORE)" : "");
		return;
	}
	read_answer(t, r);
}

static int read_sink(void *arg, const uint8_t *p, size_t n)
{
	struct ing_tier_read *r = arg;
	size_t want = ING_TIER_READ_CHUNK;
	if (r->length - r->offset < want)
		want = (size_t)(r->length - r->offset);
	if (r->n + n > want)
		return -EFBIG;   /* more than asked for: not this object's range */
	memcpy(r->buf + r->n, p, n);
	r->n += n;
	return 0;
}

static void read_get_done(struct ing_tier *t, struct xfer *x, enum ing_s3_result res)
{
	struct ing_tier_read *r = x->rd;
	size_t want = r->length - r->offset < ING_TIER_READ_CHUNK ? (size_t)(r->length - r->offset) :
								     ING_TIER_READ_CHUNK;
	char why[1024];
	if (res == ING_S3_OK && r->n == want) {
		xfer_put(t, x);
		read_chunk_done(t, r);
		return;
	}
	if (res == ING_S3_OK)
		snprintf(why, sizeof(why), "the object store returned %zu bytes at offset %" PRIu64
			 " of frame %s/%s, %zu were asked for", r->n, r->offset, r->wafer_id, r->frame_id,
			 want);
	else
		s3_req_describe(&x->req, res, why, sizeof(why));
	int st = res == ING_S3_NOT_FOUND ? -ENOENT : store_wide(res) ? -EAGAIN : -EIO;
	if (res == ING_S3_NOT_FOUND)
		snprintf(why + strlen(why), sizeof(why) - strlen(why),
			 " (the catalog says the frame is %s: the object is lost)",
			 ing_location_name((enum ing_location)r->location));
	xfer_put(t, x);
	read_fail(t, r, st, "%s", why);
}

/* The next chunk of r: from the local copy at once, from the store through a GET. */
static void read_next(struct ing_tier *t, struct ing_tier_read *r)
{
	size_t want = r->length - r->offset < ING_TIER_READ_CHUNK ? (size_t)(r->length - r->offset) :
								     ING_TIER_READ_CHUNK;
	r->n = 0;
	if (r->from == ING_TIER_FROM_LOCAL) {
		while (r->n < want) {
			ssize_t got = pread(r->fd, r->buf + r->n, want - r->n, (off_t)(r->offset + r->n));
			if (got < 0 && errno == EINTR)
				continue;
			if (got <= 0) {
				read_fail(t, r, got < 0 ? -EIO : -EBADMSG, "reading the local copy of frame %s/%s: %s",
					  r->wafer_id, r->frame_id, got < 0 ? strerror(errno) :
					  "it is shorter than catalogued");
				return;
			}
			r->n += (size_t)got;
		}
		read_chunk_done(t, r);
		return;
	}
	struct xfer *x = xfer_get(t, XK_READ);
	char key[ING_S3_KEY_MAX + 1];
	if (!x) {
		read_fail(t, r, -EAGAIN, "no transfer slot for the read (retry)");
		return;
	}
	x->rd = r;
	x->req.sink = read_sink;
	x->req.sink_arg = r;
	if (ing_s3_key(&t->s3, key, sizeof(key), r->wafer_id, r->frame_id) ||
	    !xfer_start(t, x, s3_req_get(&x->req, &t->s3, key, r->offset, want), XS_GET)) {
		xfer_put(t, x);
		read_fail(t, r, -EIO, "cannot start the read of frame %s/%s from the store", r->wafer_id,
			  r->frame_id);
	}
}

/* First chunk: the catalog says what the frame is and where it is; pick the copy. */
static void read_begin(struct ing_tier *t, struct ing_tier_read *r)
{
	struct ing_catalog_row row;
	if (!t->cat && !(t->cat = ing_catalog_open_ro(t->catalog))) {
		read_fail(t, r, -EAGAIN, "the catalog cannot be read (see the node's log)");
		return;
	}
	int rc = ing_catalog_lookup(t->cat, r->wafer_id, r->frame_id, &row);
	if (rc == -ENOENT) {
		read_fail(t, r, -ENOENT, "no frame %s of wafer %s in this node's catalog", r->frame_id,
			  r->wafer_id);
		return;
	}
	if (rc) {
		read_fail(t, r, -EAGAIN, "catalog lookup failed (%s)", strerror(-rc));
		return;
	}
	r->length = row.length;
	r->crc32c = row.crc32c;
	r->timestamp = row.timestamp;
	r->location = row.location;
	r->offset = 0;
	r->crc_run = 0;
	/* the local copy is there with its length (a 'both' frame's may be mid-deletion) */
	bool local = false;
	if (row.location != ING_LOC_TIERED) {
		char path[PATH_MAX + 600];
		struct stat st;
		snprintf(path, sizeof(path), "%s/%s", t->data_dir, row.path);
		r->fd = open(path, O_RDONLY | O_CLOEXEC);
		local = r->fd >= 0 && fstat(r->fd, &st) == 0 && (uint64_t)st.st_size == row.length;
		if (!local && r->fd >= 0) {
			close(r->fd);
			r->fd = -1;
		}
	}
	bool store = t->enabled && row.location != ING_LOC_LOCAL;
	if (r->want != ING_TIER_FROM_STORE && local) {
		r->from = ING_TIER_FROM_LOCAL;
	} else if (r->want != ING_TIER_FROM_LOCAL && store) {
		r->from = ING_TIER_FROM_STORE;
		if (r->fd >= 0)
			close(r->fd);
		r->fd = -1;
	} else {
		const char *where = ing_location_name((enum ing_location)row.location);
		if (r->want == ING_TIER_FROM_LOCAL)
			read_fail(t, r, -ENODATA, "frame %s/%s has no local copy (location %s%s)", r->wafer_id,
				  r->frame_id, where, row.location == ING_LOC_TIERED ?
				  ": deleted after its object was verified; ask for source STORE" : "");
		else if (r->want == ING_TIER_FROM_STORE)
			read_fail(t, r, -ENODATA, "frame %s/%s is not in the object store (%s)", r->wafer_id,
				  r->frame_id, !t->enabled ? "this node has no --tier" :
				  "location local: its upload is pending");
		else
			read_fail(t, r, row.location == ING_LOC_LOCAL ? -EIO : -EAGAIN,
				  "frame %s/%s: its local copy %s is missing or of the wrong length%s",
				  r->wafer_id, r->frame_id, row.path, t->enabled ? "" :
				  " and this node has no --tier to read it from the store");
		return;
	}
	read_next(t, r);
}

/* Everything other threads told this one: reads, wake-ups (frames finished), stop. */
static void take_messages(struct ing_tier *t)
{
	struct ing_msg m[MBOX_SIZE];
	unsigned n;
	while ((n = ing_mbox_pop(t->in, m, MBOX_SIZE)) > 0) {
		for (unsigned i = 0; i < n; i++) {
			if (m[i].kind == ING_EV_TIER_WAKE) {
				/* taken: the next finished frame posts again; reading control's flag
				 * orders its frames' commits before the outbox read below */
				(void)__atomic_exchange_n(&t->wake_posted, false, __ATOMIC_ACQ_REL);
				t->poll_due = t->usage_due = t->backlog_dirty = true;
				continue;
			}
			if (m[i].kind == ING_MSG_CALL) {   /* ing_tier_set_credentials */
				m[i].fn(m[i].arg, m[i].val);
				continue;
			}
			if (m[i].kind != ING_EV_TIER_READ)
				continue;   /* ING_EV_TIER_STOP: the stop flag is set */
			struct ing_tier_read *r = m[i].arg;
			r->status = 0;
			r->msg[0] = 0;
			if (r->n == 0 && r->offset == 0 && !r->last) {
				read_begin(t, r);
			} else {
				r->offset += r->n;
				read_next(t, r);
			}
		}
	}
}

/* ---------------------------------------------------------------- the loop's steps */

static void setup_outbox(struct ing_tier *t, uint64_t now)
{
	if (now < t->next_setup_ns)
		return;
	int rc = tier_db_enable(t->db);
	if (rc == 0)
		rc = tier_db_usage(t->db, &t->census);
	if (rc) {
		ING_LOG_RL(ING_LOG_WARN, COMP, "outbox set-up: %s; retrying", strerror(-rc));
		t->next_setup_ns = now + 1000000000ull;
		return;
	}
	t->digest_since_ns = tier_db_digest_since(t->db);
	t->outbox_on = true;
	t->census_done = true;
	t->poll_due = true;
	t->usage_due = true;
	t->backlog_dirty = true;
	ING_INFO(COMP, "catalog: %" PRIu64 " frames local, %" PRIu64 " both, %" PRIu64 " tiered",
		 t->census.frames[ING_LOC_LOCAL], t->census.frames[ING_LOC_BOTH],
		 t->census.frames[ING_LOC_TIERED]);
}

static void probe(struct ing_tier *t, uint64_t now)
{
	if (t->probing || t->misbehaving || now < t->next_probe_ns)
		return;
	struct xfer *x = xfer_get(t, XK_PROBE);
	if (x && !xfer_start(t, x, s3_req_head_bucket(&x->req, &t->s3), XS_PROBE))
		xfer_put(t, x);
}

static bool in_flight(struct ing_tier *t, const struct tier_row *r)
{
	for (unsigned i = 0; i < MAX_XFERS; i++) {
		const struct xfer *x = &t->x[i];
		if (x->st != XS_FREE && x->kind != XK_PROBE && x->kind != XK_READ &&
		    !strcmp(x->row.frame_id, r->frame_id) && !strcmp(x->row.wafer_id, r->wafer_id))
			return true;
	}
	return false;
}

static void start_uploads(struct ing_tier *t)
{
	struct tier_row rows[ING_TIER_MAX_PARALLEL * 4];
	/* as many more as are on the wire are read and hashed ahead, so the next PUT is ready
	 * when one ends (the hash pass is most of a frame's time at --tier-parallel 1) */
	if (t->n_up >= 2 * t->parallel || !t->poll_due)
		return;
	t->poll_due = false;
	int64_t now = now_ms();
	int n = tier_db_due(t->db, now, rows, 2 * t->parallel + t->n_up);
	for (int i = 0; i < n && t->n_up < 2 * t->parallel; i++)
		if (!in_flight(t, &rows[i]))
			upload_begin(t, &rows[i]);
	/* the rows backed off: the loop wakes when the first is due */
	t->next_retry_ms = tier_db_next_due(t->db, now);
}

/* A HEAD asked again once its second has passed. */
static void start_rechecks(struct ing_tier *t, uint64_t now)
{
	for (unsigned i = 0; i < MAX_XFERS; i++) {
		struct xfer *x = &t->x[i];
		if (x->st == XS_WAIT && now >= x->due_ns)
			head_of(t, x, XS_VERIFY);
	}
}

static void start_deletions(struct ing_tier *t, uint64_t now)
{
	struct tier_row rows[DEL_SLOTS * 2];
	int64_t cutoff;
	/* only while the store answers as it should: one that keeps lying never gets a copy */
	if (now < t->next_del_ns || t->store_state != ING_TIER_STORE_OK)
		return;
	if (t->verify == VERIFY_NONE || (t->retention_ms < 0 && !t->purge) || t->n_del >= DEL_SLOTS) {
		t->next_del_ns = UINT64_MAX;   /* until a rule applies again, or a check ends */
		return;
	}
	if (t->retention_ms >= 0)
		cutoff = ing_wall_ns() - t->retention_ms * 1000000ll;
	else
		cutoff = INT64_MAX;   /* pressure: any verified copy, oldest first */
	int n = tier_db_candidates(t->db, cutoff, rows, DEL_SLOTS + t->n_del);
	if (n < (int)(DEL_SLOTS + t->n_del)) {
		/* nothing more due now: the next is due at the oldest verified copy's time plus
		 * the retention (a new one comes with an upload, which looks again); under the
		 * mark alone, when a measure finds the disk above the low-water mark again */
		int64_t oldest = t->retention_ms >= 0 ? tier_db_oldest_both(t->db) : INT64_MAX;
		int64_t at = oldest < INT64_MAX - t->retention_ms * 1000000ll ?
			     oldest + t->retention_ms * 1000000ll : INT64_MAX;
		int64_t wall = ing_wall_ns();
		t->next_del_ns = at == INT64_MAX ? UINT64_MAX : at <= wall ? now + 1000000ull :
				 now + (uint64_t)(at - wall);
	}
	for (int i = 0; i < n && t->n_del < DEL_SLOTS; i++) {
		if (in_flight(t, &rows[i]))
			continue;
		if (!rows[i].object_md5[0] || rows[i].tiered_ns < t->digest_since_ns) {
			/* verified before objects were checked against the store's own digest (by
			 * the metadata this node had sent): verified again before the copy may go */
			ING_LOG_RL(ING_LOG_INFO, COMP, "frame %s/%s: verified in the store before this node "
				   "checked the store's own digest: verifying it again before its local copy "
				   "goes", rows[i].wafer_id, rows[i].frame_id);
			(void)tier_db_requeue(t->db, &rows[i]);
			t->poll_due = true;
			continue;
		}
		struct xfer *x = xfer_get(t, XK_DELETE);
		if (!x)
			break;
		x->row = rows[i];
		head_of(t, x, XS_CHECK);
	}
}

/*
 * The high-water mark in bytes and what is used now: the data dir's file system (N %: used
 * as df counts it, against N % of used + available) or the frames with a local copy as the
 * catalog counts them (a size). Published for control, which adds the frames it has
 * admitted and not yet finished (ing_tier_refusing); the purge (deletion under pressure)
 * starts above ING_TIER_LOW_WATER_PCT of the mark.
 */
static void update_usage(struct ing_tier *t, uint64_t now)
{
	struct statvfs v;
	uint64_t used = 0, mark = 0;
	t->usage_due = false;
	t->next_usage_ns = now + USAGE_EVERY_MS * 1000000ull;
	/* the measure and what persistence had inserted by then, as one step (no insert
	 * between them): a frame is in both or in neither */
	ing_hwm_measure_begin(t->hwm);
	if (t->outbox_on && tier_db_usage(t->db, &t->census) == 0)
		t->census_done = true;
	if (statvfs(t->data_dir, &v) == 0 && v.f_blocks) {
		uint64_t fs_used = (uint64_t)(v.f_blocks - v.f_bfree) * v.f_frsize;
		uint64_t avail = (uint64_t)v.f_bavail * v.f_frsize;
		t->usage_pct = fs_used + avail ? 100.0 * (double)fs_used / (double)(fs_used + avail) : 0.0;
		if (t->hw_pct) {
			used = fs_used;
			mark = (fs_used + avail) / 100 * t->hw_pct;
		}
	}
	if (t->hw_bytes && t->census_done) {
		used = t->census.bytes[ING_LOC_LOCAL] + t->census.bytes[ING_LOC_BOTH];
		mark = t->hw_bytes;
	}
	ing_hwm_measure_end(t->hwm, used);
	if (!mark)
		return;
	t->used_bytes = used;
	bool purge = used > mark / 100 * ING_TIER_LOW_WATER_PCT;
	if (purge && !t->purge)
		t->next_del_ns = 0;   /* above the low-water mark again: delete verified copies */
	t->purge = purge;
	atomic_store_explicit(&t->backlog_now, t->backlog.frames, memory_order_relaxed);
	atomic_store_explicit(&t->mark_bytes, mark, memory_order_relaxed);
	bool at = used >= mark;
	if (at != t->at_mark) {
		t->at_mark = at;
		if (at)
			ING_WARN(COMP, "local disk at the high-water mark (%.1f of %.1f MiB%s): new frames are "
				 "refused NO_SPACE (retryable) until the tier has freed space; backlog %" PRIu64
				 " frames, store %s", used / 1048576.0, mark / 1048576.0,
				 t->hw_pct ? " of the file system" : " of frames", t->backlog.frames,
				 ing_tier_store_state_name(t->store_state));
		else
			ING_INFO(COMP, "local disk below the high-water mark again: frames are taken");
	}
}

/* The upload rate's samples, one a second while there is something to show. */
static void sample_rate(struct ing_tier *t, uint64_t now)
{
	if (now < t->next_rate_ns)
		return;
	if (t->rate_n == RATE_SAMPLES) {
		memmove(t->rate_t, t->rate_t + 1, sizeof(t->rate_t[0]) * (RATE_SAMPLES - 1));
		memmove(t->rate_b, t->rate_b + 1, sizeof(t->rate_b[0]) * (RATE_SAMPLES - 1));
		t->rate_n--;
	}
	t->rate_t[t->rate_n] = now;
	t->rate_b[t->rate_n] = t->uploaded_bytes;
	t->rate_n++;
	t->rate = 0;
	if (t->rate_n >= 2 && t->rate_t[t->rate_n - 1] > t->rate_t[0])
		t->rate = (double)(t->rate_b[t->rate_n - 1] - t->rate_b[0]) * 1e9 /
			  (double)(t->rate_t[t->rate_n - 1] - t->rate_t[0]);
	/* the window holds no upload and none is on the wire: no tick until one is */
	bool active = t->rate_b[t->rate_n - 1] != t->rate_b[0] || n_wire(t) > 0;
	t->next_rate_ns = active ? now + 1000000000ull : UINT64_MAX;
}

#define PUB(field, v) __atomic_store_n(&t->pub.field, (v), __ATOMIC_RELAXED)

static uint64_t dbits(double d)
{
	uint64_t u;
	memcpy(&u, &d, sizeof(u));
	return u;
}

/* What Stats shows, for control (ing_tier_get_stats): relaxed stores, this thread only. */
static void publish(struct ing_tier *t, uint64_t now)
{
	if (t->outbox_on && t->backlog_dirty && now >= t->next_backlog_ns) {
		t->backlog_dirty = false;
		t->next_backlog_ns = now + BACKLOG_EVERY_MS * 1000000ull;
		(void)tier_db_backlog(t->db, &t->backlog);
		if (tier_db_usage(t->db, &t->census) == 0)
			t->census_done = true;
		atomic_store_explicit(&t->backlog_now, t->backlog.frames, memory_order_relaxed);
	}
	PUB(store_state, (uint64_t)t->store_state);
	PUB(cause, (uint64_t)t->cause);
	PUB(verification, t->verify == VERIFY_ETAG && t->etags_not_md5 ? (uint64_t)VERIFY_READ_BACK :
			  (uint64_t)t->verify);
	PUB(backlog_frames, t->backlog.frames);
	PUB(backlog_bytes, t->backlog.bytes);
	PUB(oldest_ms, t->backlog.oldest_ms);
	PUB(uploaded_frames, t->uploaded_frames);
	PUB(uploaded_bytes, t->uploaded_bytes);
	PUB(already_stored, t->already_stored);
	PUB(upload_errors, t->upload_errors);
	PUB(in_progress, (uint64_t)n_wire(t));
	PUB(conflicts, t->conflicts);
	PUB(digest_mismatches, t->digest_mismatches);
	PUB(read_backs, t->read_backs);
	PUB(local_deleted, t->local_deleted);
	PUB(census_done, (uint64_t)t->census_done);
	for (unsigned l = 0; l < 3; l++) {
		PUB(frames[l], t->census.frames[l]);
		PUB(bytes[l], t->census.bytes[l]);
	}
	PUB(refusing, (uint64_t)t->at_mark);
	PUB(usage_pct, dbits(t->usage_pct));
	PUB(rate, dbits(t->rate));
	if (strcmp(t->published_error, t->store_error)) {
		memcpy(t->published_error, t->store_error, sizeof(t->published_error));
		tier_seqstr_write(&t->pub.err, t->published_error);
	}
}

void tier_seqstr_write(struct tier_seqstr *x, const char *s)
{
	char buf[sizeof(x->w)];
	uint32_t seq = __atomic_load_n(&x->seq, __ATOMIC_RELAXED);   /* this thread's own */
	memset(buf, 0, sizeof(buf));
	snprintf(buf, sizeof(buf), "%s", s);
	__atomic_store_n(&x->seq, seq + 1, __ATOMIC_RELAXED);
	for (size_t i = 0; i < sizeof(x->w) / 8; i++) {
		uint64_t w;
		memcpy(&w, buf + 8 * i, 8);
		/* release: the odd number above is seen by whoever sees this word */
		__atomic_store_n(&x->w[i], w, __ATOMIC_RELEASE);
	}
	__atomic_store_n(&x->seq, seq + 2, __ATOMIC_RELEASE);
}

bool tier_seqstr_read(struct tier_seqstr *x, char *out)
{
	/* the writer takes a microsecond: a bounded number of tries, then nothing rather than
	 * a torn string */
	for (unsigned tries = 0; tries < 1000; tries++) {
		uint32_t s1 = __atomic_load_n(&x->seq, __ATOMIC_ACQUIRE);
		if (s1 & 1) {
			sched_yield();
			continue;
		}
		for (size_t i = 0; i < sizeof(x->w) / 8; i++) {
			/* acquire: the number read below is no older than the write of this word */
			uint64_t w = __atomic_load_n(&x->w[i], __ATOMIC_ACQUIRE);
			memcpy(out + 8 * i, &w, 8);
		}
		if (__atomic_load_n(&x->seq, __ATOMIC_RELAXED) == s1) {
			out[sizeof(x->w) - 1] = 0;
			return true;
		}
	}
	out[0] = 0;
	return false;
}

/* A transfer's request ended with res (taken off the multi handle): on to its next step. */
static void xfer_done(struct ing_tier *t, struct xfer *x, enum ing_s3_result res)
{
	switch (x->st) {
	case XS_PUT:
	case XS_VERIFY:
	case XS_READBACK:
		upload_done(t, x, res);
		break;
	case XS_CHECK:
		delete_done(t, x, res);
		break;
	case XS_GET:
		read_get_done(t, x, res);
		break;
	case XS_PROBE:
		if (res == ING_S3_OK)
			store_good(t);
		else
			store_bad(t, &x->req, res);
		xfer_put(t, x);
		break;
	default:
		xfer_put(t, x);
	}
}

static void collect(struct ing_tier *t)
{
	CURLMsg *m;
	int left;
	while ((m = curl_multi_info_read(t->multi, &left))) {
		if (m->msg != CURLMSG_DONE)
			continue;
		struct s3_req *r = NULL;
		curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&r);
		struct xfer *x = NULL;
		for (unsigned i = 0; i < MAX_XFERS && !x; i++)
			if (&t->x[i].req == r)
				x = &t->x[i];
		if (!x)
			continue;
		CURLcode cc = m->data.result;
		curl_multi_remove_handle(t->multi, x->req.easy);
		x->in_multi = false;
		xfer_done(t, x, s3_req_done(&x->req, cc));
	}
}

/*
 * Transfers that moved nothing for --tier-timeout end here (libcurl's progress callback
 * says so only when libcurl runs the transfer); returns the ms until the next one could.
 */
static uint64_t expire_stalled(struct ing_tier *t, uint64_t now)
{
	uint64_t next = UINT64_MAX;
	for (unsigned i = 0; i < MAX_XFERS; i++) {
		struct xfer *x = &t->x[i];
		uint64_t left;
		if (!x->in_multi)
			continue;
		if (!s3_req_stalled(&x->req, now, &left)) {
			if (left < next)
				next = left;
			continue;
		}
		curl_multi_remove_handle(t->multi, x->req.easy);
		x->in_multi = false;
		xfer_done(t, x, s3_req_done(&x->req, CURLE_OPERATION_TIMEDOUT));
	}
	return next == UINT64_MAX ? UINT64_MAX : next / 1000000ull + 1;
}

/* ms from now to at_ns into *ms if sooner (UINT64_MAX: never) */
static void sooner(uint64_t *ms, uint64_t now, uint64_t at_ns)
{
	if (at_ns == UINT64_MAX)
		return;
	uint64_t left = at_ns > now ? (at_ns - now + 999999) / 1000000 : 0;
	if (left < *ms)
		*ms = left;
}

/* How long the loop may sleep on its mailbox and transfers: until the next thing that is
 * due by time (MAX_SLEEP_MS at most), 0 if something can go on now. */
static int sleep_ms(struct ing_tier *t, uint64_t now, uint64_t stall_ms)
{
	uint64_t ms = stall_ms < MAX_SLEEP_MS ? stall_ms : MAX_SLEEP_MS;
	if (!ing_mbox_idle(t->in))   /* re-armed its doorbell; a message came in meanwhile */
		return 0;
	if (!t->enabled)
		return (int)ms;
	bool usable = t->store_state == ING_TIER_STORE_OK || t->misbehaving;
	if (!t->outbox_on)
		sooner(&ms, now, t->next_setup_ns);
	if (t->store_state != ING_TIER_STORE_OK && !t->misbehaving && !t->probing)
		sooner(&ms, now, t->next_probe_ns);   /* the probe */
	if (t->misbehaving && n_wire(t) == 0) {   /* the canary, once one is ready to go */
		for (unsigned i = 0; i < MAX_XFERS; i++)
			if (t->x[i].st == XS_READY) {
				sooner(&ms, now, t->next_probe_ns);
				break;
			}
	}
	if (t->poll_due && usable && t->outbox_on && t->n_up < 2 * t->parallel)
		return 0;
	if (t->next_retry_ms) {
		int64_t left = t->next_retry_ms - now_ms();
		sooner(&ms, now, now + (left > 0 ? (uint64_t)left * 1000000ull : 0));
	}
	if (t->usage_due)
		return 0;
	sooner(&ms, now, t->next_usage_ns);
	if (t->store_state == ING_TIER_STORE_OK)
		sooner(&ms, now, t->next_del_ns);
	sooner(&ms, now, t->next_rate_ns);
	if (t->backlog_dirty && t->outbox_on)
		sooner(&ms, now, t->next_backlog_ns);
	for (unsigned i = 0; i < MAX_XFERS; i++)
		if (t->x[i].st == XS_WAIT)
			sooner(&ms, now, t->x[i].due_ns);
	return (int)ms;
}

static void *tier_main(void *arg)
{
	struct ing_tier *t = arg;
	struct curl_waitfd wake = { .fd = ing_mbox_fd(t->in), .events = CURL_WAIT_POLLIN };

	/* background work, like the persistence workers: off the control thread's single cpu
	 * (threads inherit their creator's mask, which EAL pinned) and below it in priority */
	int arc = pthread_setaffinity_np(pthread_self(), sizeof(t->cpus), &t->cpus);
	if (arc)
		ING_WARN(COMP, "tier thread: setting its cpus: %s (left on the control thread's)", strerror(arc));
	ing_thread_lower_priority(t->nice, "tier thread");

	while (!atomic_load(&t->stop)) {
		take_messages(t);
		uint64_t now = ing_now_ns();
		bool busy = false;
		if (t->enabled) {
			if (!t->outbox_on)
				setup_outbox(t, now);
			if (t->usage_due || now >= t->next_usage_ns)
				update_usage(t, now);
			if (t->next_retry_ms && now_ms() >= t->next_retry_ms) {
				t->next_retry_ms = 0;
				t->poll_due = true;
			}
			if (t->outbox_on && t->store_state != ING_TIER_STORE_OK)
				probe(t, now);
			if (t->outbox_on && (t->store_state == ING_TIER_STORE_OK || t->misbehaving))
				start_uploads(t);
			if (t->outbox_on)
				start_deletions(t, now);
			start_rechecks(t, now);
			busy = hash_step(t);
		}
		int running = 0;
		curl_multi_perform(t->multi, &running);
		collect(t);
		now = ing_now_ns();
		uint64_t stall_ms = expire_stalled(t, now);
		if (t->enabled) {
			start_puts(t, now);   /* hashed frames, into the places the finished ones left */
			sample_rate(t, now);
			if (t->usage_due)
				update_usage(t, now);   /* copies deleted in this pass */
		}
		publish(t, now);
		curl_multi_poll(t->multi, &wake, 1, busy ? 0 : sleep_ms(t, now, stall_ms), NULL);
	}
	/* stopping: reads held here go back answered, transfers are abandoned */
	for (unsigned i = 0; i < MAX_XFERS; i++) {
		struct xfer *x = &t->x[i];
		if (x->st == XS_FREE)
			continue;
		struct ing_tier_read *r = x->kind == XK_READ ? x->rd : NULL;
		xfer_put(t, x);
		if (r)
			read_fail(t, r, -ECANCELED, "the ingest node is stopping");
	}
	struct ing_msg m;
	while (ing_mbox_pop(t->in, &m, 1) == 1)
		if (m.kind == ING_EV_TIER_READ)
			read_fail(t, m.arg, -ECANCELED, "the ingest node is stopping");
		else if (m.kind == ING_MSG_CALL)
			m.fn(m.arg, m.val);   /* frees what it carried */
	return NULL;
}

/* ---------------------------------------------------------------- life */

static enum verify_mode verify_from_env(void)
{
	const char *v = getenv("ING_TIER_VERIFY");
	if (!v || !*v)
		return VERIFY_ETAG;
	for (unsigned i = 0; i < sizeof(verify_names) / sizeof(verify_names[0]); i++)
		if (!strcmp(v, verify_names[i]))
			return (enum verify_mode)i;
	ING_WARN(COMP, "ING_TIER_VERIFY=%s is not etag, read-back or none: using etag", v);
	return VERIFY_ETAG;
}

struct ing_tier *ing_tier_start(const struct ing_tier_opts *o)
{
	struct ing_tier *t = calloc(1, sizeof(*t));
	if (!t) {
		ING_ERR(COMP, "out of memory");
		return NULL;
	}
	snprintf(t->data_dir, sizeof(t->data_dir), "%s", o->data_dir);
	snprintf(t->catalog, sizeof(t->catalog), "%s/catalog.db", o->data_dir);
	t->enabled = o->s3 != NULL;
	t->parallel = o->parallel ? o->parallel : ING_TIER_DEFAULT_PARALLEL;
	if (t->parallel > ING_TIER_MAX_PARALLEL)
		t->parallel = ING_TIER_MAX_PARALLEL;
	t->retention_ms = o->retention_ms;
	t->hw_pct = o->high_water_pct;
	t->hw_bytes = o->high_water_bytes;
	ing_hwm_init(&t->own);
	t->hwm = o->hwm ? o->hwm : &t->own;
	t->verify = verify_from_env();
	t->digest_since_ns = INT64_MAX;
	t->nice = o->nice;
	CPU_ZERO(&t->cpus);
	for (unsigned i = 0; o->cpus && i < o->ncpus; i++)
		if (o->cpus[i] >= 0 && o->cpus[i] < CPU_SETSIZE)
			CPU_SET(o->cpus[i], &t->cpus);
	if (!CPU_COUNT(&t->cpus)) {
		long n = sysconf(_SC_NPROCESSORS_CONF);
		for (long c = 0; c < (n > 0 ? n : 1) && c < CPU_SETSIZE; c++)
			CPU_SET((int)c, &t->cpus);
	}
	t->store_state = t->enabled ? ING_TIER_STORE_UNKNOWN : ING_TIER_STORE_OFF;
	t->probe_ms = PROBE_MIN_MS;
	t->pub.store_state = t->store_state;
	t->pub.verification = t->verify;
	t->next_usage_ns = t->next_rate_ns = t->next_backlog_ns = 0;
	for (unsigned i = 0; i < ING_TIER_MAX_READS; i++)
		t->reads[i].fd = -1;
	t->db = tier_db_open(t->catalog);
	if (!t->db)
		goto fail;
	if (!t->enabled) {
		(void)tier_db_disable(t->db);
	} else {
		t->s3 = *o->s3;
	}
	t->buf = malloc(HASH_CHUNK);
	t->ctl = o->ctl;
	t->in = ing_mbox_create("tier", MBOX_SIZE);
	if (!t->buf || !t->in || !t->ctl)
		goto fail;
	if (ing_s3_global_init() || !(t->multi = curl_multi_init())) {
		ING_ERR(COMP, "cannot set up the object store client");
		goto fail;
	}
	/* keep connections to the store open for the next uploads */
	curl_multi_setopt(t->multi, CURLMOPT_MAX_HOST_CONNECTIONS,
			  (long)(t->parallel + DEL_SLOTS + 1 + ING_TIER_MAX_READS));
	int rc = pthread_create(&t->th, NULL, tier_main, t);
	if (rc) {
		ING_ERR(COMP, "cannot start the tier thread: %s", strerror(rc));
		goto fail;
	}
	t->started = true;
	pthread_setname_np(t->th, "ingest-tier");
	if (!t->enabled)
		return t;
	char ret[48] = "off", hw[48] = "off";
	if (t->retention_ms >= 0)
		ing_fmt_duration((uint64_t)t->retention_ms, ret, sizeof(ret));
	if (t->hw_pct)
		snprintf(hw, sizeof(hw), "%u %% of the file system", t->hw_pct);
	else if (t->hw_bytes)
		snprintf(hw, sizeof(hw), "%" PRIu64 " MiB of frames", t->hw_bytes >> 20);
	ING_INFO(COMP, "object store tier: %s (region %s, %s), %u uploads at once, no progress for "
		 "%u s fails a request; objects verified by %s; local retention %s, high-water mark %s",
		 t->s3.display, t->s3.region, t->s3.path_style ? "path-style" : "virtual-hosted", t->parallel,
		 t->s3.timeout_ms / 1000, t->verify == VERIFY_ETAG ? "the store's ETag (its MD5) against "
		 "the frame's MD5" : t->verify == VERIFY_READ_BACK ? "reading them back (CRC-32C)" :
		 "nothing (ING_TIER_VERIFY=none)", ret, hw);
	if (t->verify == VERIFY_NONE && (t->retention_ms >= 0 || t->hw_pct || t->hw_bytes))
		ING_WARN(COMP, "ING_TIER_VERIFY=none: objects are not checked against the store's digest, so "
			 "no local copy is deleted (--local-retention and the mark's purge do nothing)");
	return t;
fail:
	ing_tier_stop(t);
	ing_tier_destroy(t);
	return NULL;
}

void ing_tier_stop(struct ing_tier *t)
{
	if (!t || !t->started)
		return;
	atomic_store(&t->stop, true);
	/* through its mailbox, which always has room for it (MBOX_SIZE); were it full, the
	 * thread would still see the flag within MAX_SLEEP_MS */
	if (ing_mbox_post(t->in, &(struct ing_msg){ .kind = ING_EV_TIER_STOP }))
		ING_WARN(COMP, "tier thread: its mailbox is full; it stops within %d s", MAX_SLEEP_MS / 1000);
	pthread_join(t->th, NULL);
	t->started = false;
}

void ing_tier_destroy(struct ing_tier *t)
{
	if (!t)
		return;
	ing_tier_stop(t);
	if (t->multi)
		curl_multi_cleanup(t->multi);
	tier_db_close(t->db);
	ing_catalog_close(t->cat);
	ing_mbox_destroy(t->in);
	for (unsigned i = 0; i < ING_TIER_MAX_READS; i++) {
		if (t->reads[i].fd >= 0)
			close(t->reads[i].fd);
		free(t->reads[i].buf);
	}
	free(t->buf);
	explicit_bzero(&t->s3, sizeof(t->s3));
	ing_hwm_destroy(&t->own);
	free(t);
}

/* new keys on their way to the tier thread (ing_tier_set_credentials) */
struct tier_keys {
	struct ing_tier *t;
	char access_key[ING_S3_CRED_MAX + 1];
	char secret_key[ING_S3_CRED_MAX + 1];
};

/* on the tier thread: the requests started from now on sign with the new keys */
static void tier_keys_take(void *arg, uint32_t val)
{
	struct tier_keys *k = arg;
	struct ing_tier *t = k->t;
	(void)val;
	if (t->enabled) {
		memcpy(t->s3.access_key, k->access_key, sizeof(t->s3.access_key));
		memcpy(t->s3.secret_key, k->secret_key, sizeof(t->s3.secret_key));
		ING_INFO(COMP, "object store %s: new credentials for the requests from now on",
			 t->s3.display);
	}
	explicit_bzero(k, sizeof(*k));
	free(k);
}

int ing_tier_set_credentials(struct ing_tier *t, const char *access_key, const char *secret_key)
{
	if (!t)
		return -EINVAL;
	struct tier_keys *k = calloc(1, sizeof(*k));
	if (!k)
		return -ENOMEM;
	k->t = t;
	snprintf(k->access_key, sizeof(k->access_key), "%s", access_key);
	snprintf(k->secret_key, sizeof(k->secret_key), "%s", secret_key);
	if (ing_mbox_call(t->in, tier_keys_take, k, 0)) {
		explicit_bzero(k, sizeof(*k));
		free(k);
		return -EAGAIN;
	}
	return 0;
}

void ing_tier_frame_finished(struct ing_tier *t, uint64_t length, bool stored)
{
	if (!t)
		return;
	ing_hwm_finished(t->hwm, length, stored);
	/* and the tier looks at its outbox and measures again: one WAKE until it took it */
	if (!__atomic_exchange_n(&t->wake_posted, true, __ATOMIC_ACQ_REL) &&
	    ing_mbox_post(t->in, &(struct ing_msg){ .kind = ING_EV_TIER_WAKE }))
		__atomic_store_n(&t->wake_posted, false, __ATOMIC_RELEASE);   /* cannot be: MBOX_SIZE */
}

bool ing_tier_refusing(struct ing_tier *t, uint64_t pending, char *why, size_t whylen)
{
	uint64_t mark = t ? atomic_load_explicit(&t->mark_bytes, memory_order_relaxed) : 0;
	if (!mark)
		return false;
	uint64_t used = ing_hwm_used(t->hwm);
	if (used + pending < mark)
		return false;
	if (why) {
		uint64_t backlog = atomic_load_explicit(&t->backlog_now, memory_order_relaxed);
		if (t->hw_pct)
			snprintf(why, whylen, "local disk at --local-high-water %u %% (%" PRIu64 " MiB used and "
				 "%" PRIu64 " MiB on their way, of %" PRIu64 " MiB); %" PRIu64 " frames wait for "
				 "the object store: retry later", t->hw_pct, used >> 20, pending >> 20, mark >> 20,
				 backlog);
		else
			snprintf(why, whylen, "local frames at --local-high-water %" PRIu64 " MiB (%" PRIu64
				 " MiB stored and %" PRIu64 " MiB on their way); %" PRIu64 " frames wait for the "
				 "object store: retry later", mark >> 20, used >> 20, pending >> 20, backlog);
	}
	return true;
}

#define GET(field) __atomic_load_n(&t->pub.field, __ATOMIC_RELAXED)

static double dget(const uint64_t *p)
{
	uint64_t u = __atomic_load_n(p, __ATOMIC_RELAXED);
	double d;
	memcpy(&d, &u, sizeof(d));
	return d;
}

void ing_tier_get_stats(struct ing_tier *t, struct ing_tier_stats *st)
{
	memset(st, 0, sizeof(*st));
	if (!t)
		return;
	/* set before the thread started, never written again */
	st->enabled = t->enabled;
	snprintf(st->store, sizeof(st->store), "%s", t->enabled ? t->s3.display : "");
	st->high_water_pct = t->hw_pct;
	st->high_water_bytes = t->hw_bytes;
	st->retention_ms = t->retention_ms;
	/* the tier thread's, field by field */
	st->store_state = (enum ing_tier_store_state)GET(store_state);
	uint64_t c = GET(cause), v = GET(verification);
	st->store_cause = cause_names[c < sizeof(cause_names) / sizeof(cause_names[0]) ? c : CAUSE_ERROR];
	st->verification = verify_names[v < sizeof(verify_names) / sizeof(verify_names[0]) ? v : 0];
	st->backlog_frames = GET(backlog_frames);
	st->backlog_bytes = GET(backlog_bytes);
	int64_t oldest = GET(oldest_ms), wall = now_ms();
	st->lag_seconds = st->backlog_frames && oldest && wall > oldest ? (double)(wall - oldest) / 1000.0 : 0.0;
	st->uploaded_frames = GET(uploaded_frames);
	st->uploaded_bytes = GET(uploaded_bytes);
	st->already_stored = GET(already_stored);
	st->upload_errors = GET(upload_errors);
	st->uploads_in_progress = GET(in_progress);
	st->conflicts = GET(conflicts);
	st->digest_mismatches = GET(digest_mismatches);
	st->read_backs = GET(read_backs);
	st->census_done = GET(census_done) != 0;
	st->frames_local = GET(frames[ING_LOC_LOCAL]);
	st->frames_both = GET(frames[ING_LOC_BOTH]);
	st->frames_tiered = GET(frames[ING_LOC_TIERED]);
	st->local_bytes = GET(bytes[ING_LOC_LOCAL]) + GET(bytes[ING_LOC_BOTH]);
	st->local_deleted = GET(local_deleted);
	st->refusing = GET(refusing) != 0;
	st->usage_pct = dget(&t->pub.usage_pct);
	st->upload_bytes_per_second = dget(&t->pub.rate);
	_Static_assert(sizeof(st->store_error) >= TIER_SEQSTR_BYTES, "store_error holds pub.err");
	(void)tier_seqstr_read(&t->pub.err, st->store_error);
}

/* ---------------------------------------------------------------- reads: control's side */

struct ing_tier_read *ing_tier_read_get(struct ing_tier *t)
{
	for (unsigned i = 0; t && i < ING_TIER_MAX_READS; i++) {
		struct ing_tier_read *r = &t->reads[i];
		if (r->in_use)
			continue;
		if (!r->buf && !(r->buf = malloc(ING_TIER_READ_CHUNK)))
			return NULL;
		uint8_t *buf = r->buf;
		memset(r, 0, sizeof(*r));
		r->buf = buf;
		r->fd = -1;
		r->in_use = true;
		return r;
	}
	return NULL;
}

void ing_tier_read_put(struct ing_tier *t, struct ing_tier_read *r)
{
	(void)t;
	if (r->fd >= 0)
		close(r->fd);
	r->fd = -1;
	r->in_use = false;
}

int ing_tier_read_submit(struct ing_tier *t, struct ing_tier_read *r)
{
	return ing_mbox_post(t->in, &(struct ing_msg){ .kind = ING_EV_TIER_READ, .arg = r });
}
