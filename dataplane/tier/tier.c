/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tier.c - the tier thread (tier.h): uploads from the catalog's outbox, verification,
 * deletion of local copies, the store's state and the high-water mark.
 *
 * One thread drives every transfer through one libcurl multi handle (uploads at once:
 * --tier-parallel; two deletion checks; one probe of the store; the reads of GetFrame). A
 * frame's upload:
 *   HASH   read the local file once, 1 MiB per transfer and loop pass (the loop stays
 *          responsive): SHA-256 and CRC-32C, which must be the catalog's; as many frames
 *          as are on the wire are hashed ahead, so the next PUT is ready when one ends
 *   PUT    create-only (If-None-Match: *), the SHA-256 signed as the payload's (the store
 *          checks the bytes it receives against it), the body read again from the file,
 *          its CRC-32C checked once more as it goes out
 *   VERIFY HEAD: length, x-amz-meta-crc32c and -sha256 as sent; after a 412 the same check
 *          decides whether the object there is this frame (done) or not (a conflict: the
 *          frame stays local, retried hourly, counted)
 * then 'both' (with the object's ETag) and out of the outbox, in one catalog transaction.
 * A deletion: HEAD again (length, CRC-32C, the ETag recorded), unlink, fsync the directory,
 * then 'tiered'.
 *
 * Why SHA-256 and not Content-MD5: the store checks either, and here (SHA-NI) SHA-256 runs
 * at 1.7 GB/s against MD5's 0.7 (openssl speed, this machine): the hash pass is most of the
 * thread's CPU, which a node shares with its ingest.
 *
 * New outbox rows are committed by the persistence workers in their own transactions; this
 * thread looks for them every POLL_MS (an indexed LIMIT query: microseconds), which bounds
 * the delay a new frame waits before its upload starts, and needs no wake-up from four
 * other threads. The loop sleeps in curl_multi_poll (woken by its transfers, or by
 * curl_multi_wakeup at stop).
 *
 * Failures: a store-wide one (unreachable, 5xx, credentials, bucket) stops new work and
 * probes the bucket with back-off (250 ms doubling to 10 s); the frame stays due. A
 * frame's own (local file missing or corrupt, BadDigest, a conflict) backs that frame off
 * (1 s doubling to 5 min; conflicts 1 h) with the reason in tier_outbox.last_error.
 */
#include "dataplane/tier/tier.h"
#include "dataplane/tier/tier_internal.h"
#include "dataplane/dataplane.h"
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
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <openssl/evp.h>

#define COMP "tier"
#define POLL_MS 100
#define IDLE_POLL_MS 1000        /* no store: nothing to do but stop */
#define HASH_CHUNK (1u << 20)
#define DEL_SLOTS 2u
#define PROBE_MIN_MS 250u
#define PROBE_MAX_MS 10000u
#define RETRY_MIN_MS 1000ll
#define RETRY_MAX_MS 300000ll
#define CONFLICT_RETRY_MS 3600000ll
#define STATS_EVERY_MS 500u
#define USAGE_EVERY_MS 50u      /* the mark is held to what the node takes in about this */
#define DELETE_EVERY_MS 1000u
#define RATE_SAMPLES 11          /* one a second: a 10 s window */
/* uploads: --tier-parallel on the wire and as many more being hashed ahead */
#define MAX_XFERS (2 * ING_TIER_MAX_PARALLEL + DEL_SLOTS + 1 + ING_TIER_MAX_READS)
#define READ_RING 16             /* the tier's mailbox: >= ING_TIER_MAX_READS */

enum xkind { XK_UPLOAD, XK_DELETE, XK_PROBE, XK_READ };
enum xstate { XS_FREE = 0, XS_HASH, XS_READY, XS_PUT, XS_VERIFY, XS_CHECK, XS_PROBE, XS_GET };

struct xfer {
	enum xkind kind;
	enum xstate st;
	bool exists;               /* the PUT found an object (412) */
	struct tier_row row;
	int fd;
	uint64_t hashed;
	uint32_t crc;
	EVP_MD_CTX *md;
	char sha_hex[65];          /* the body's SHA-256 (hash pass) */
	struct s3_req req;
	bool in_multi;
	struct ing_tier_read *rd;  /* XK_READ: the read whose chunk this GET fetches */
};

struct ing_tier {
	struct ing_s3 s3;
	bool enabled;
	char data_dir[PATH_MAX];
	unsigned parallel;
	int64_t retention_ms;
	unsigned hw_pct;
	uint64_t hw_bytes;
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
	unsigned n_wire;           /* uploads on the wire (PUT or its HEAD): at most parallel */
	bool probing;
	/* catalog view */
	bool outbox_on, census_done;
	int64_t seen_seq;
	struct tier_census census;
	uint64_t next_setup_ns, next_poll_ns, next_del_ns, next_stats_ns, next_usage_ns;
	bool poll_due;             /* look for due outbox rows (after a poll or a finished upload) */
	/* the store */
	enum ing_tier_store_state store_state;
	char store_error[512];
	uint64_t next_probe_ns;
	unsigned probe_ms;
	/* usage */
	double usage_pct;
	uint64_t used_bytes;       /* the measure the mark is in: bytes, or the fs's used bytes */
	bool purge;                /* above the low-water mark: delete verified copies early */
	bool at_mark;              /* used >= mark (logged on change) */
	/* for control's admission: the mark and what is used, in bytes (0 mark: none yet) */
	_Atomic uint64_t mark_bytes, used_bytes_now, backlog_now;
	/* counters (this thread) */
	uint64_t uploaded_frames, uploaded_bytes, already_stored, upload_errors, conflicts;
	uint64_t local_deleted;
	uint64_t backlog_frames, backlog_bytes;
	int64_t oldest_ms;
	uint64_t rate_t[RATE_SAMPLES], rate_b[RATE_SAMPLES];
	unsigned rate_n;
	uint64_t next_rate_ns;
	/* snapshot for other threads */
	pthread_mutex_t mu;
	struct ing_tier_stats snap;
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
	       r == ING_S3_NO_BUCKET;
}

static void store_bad(struct ing_tier *t, enum ing_s3_result r, const char *why)
{
	enum ing_tier_store_state s = state_of(r);
	bool news = s != t->store_state || strcmp(why, t->store_error) != 0;
	if (news) {
		/* a wrong key or bucket is the operator's to fix: ERR; an outage: WARN */
		enum ing_log_level lvl = s == ING_TIER_STORE_UNREACHABLE ? ING_LOG_WARN : ING_LOG_ERR;
		ING_LOG_RL(lvl, COMP, "object store %s: %s; frames stay local and queued (backlog %" PRIu64
			   " frames), retrying", ing_tier_store_state_name(s), why, t->backlog_frames);
	}
	if (t->store_state == ING_TIER_STORE_OK || t->store_state == ING_TIER_STORE_UNKNOWN)
		t->probe_ms = PROBE_MIN_MS;
	t->store_state = s;
	snprintf(t->store_error, sizeof(t->store_error), "%s", why);
	t->next_probe_ns = ing_now_ns() + (uint64_t)t->probe_ms * 1000000ull;
	t->probe_ms = t->probe_ms * 2 > PROBE_MAX_MS ? PROBE_MAX_MS : t->probe_ms * 2;
}

static void store_good(struct ing_tier *t)
{
	if (t->store_state != ING_TIER_STORE_OK)
		ING_INFO(COMP, "object store %s: bucket reachable, credentials accepted%s", t->s3.display,
			 t->store_state == ING_TIER_STORE_UNKNOWN ? "" : " (again): uploads resume");
	t->store_state = ING_TIER_STORE_OK;
	t->store_error[0] = 0;
	t->probe_ms = PROBE_MIN_MS;
	t->poll_due = true;
}

/* ---------------------------------------------------------------- transfers */

static struct xfer *xfer_get(struct ing_tier *t, enum xkind k)
{
	for (unsigned i = 0; i < MAX_XFERS; i++)
		if (t->x[i].st == XS_FREE) {
			struct xfer *x = &t->x[i];
			memset(x, 0, sizeof(*x));
			x->kind = k;
			x->fd = -1;
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

static void xfer_put(struct ing_tier *t, struct xfer *x)
{
	if (x->in_multi)
		curl_multi_remove_handle(t->multi, x->req.easy);
	x->in_multi = false;
	s3_req_release(&x->req);
	if (x->fd >= 0) {
		/* done with the bytes: do not keep them in the page cache for nothing */
		(void)posix_fadvise(x->fd, 0, 0, POSIX_FADV_DONTNEED);
		close(x->fd);
	}
	x->fd = -1;
	EVP_MD_CTX_free(x->md);
	x->md = NULL;
	if (x->kind == XK_UPLOAD) {
		t->n_up--;
		if (x->st == XS_PUT || x->st == XS_VERIFY)
			t->n_wire--;
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

/* A frame's own failure: back it off and say why in its outbox row. */
static void row_failed(struct ing_tier *t, struct xfer *x, int64_t delay_ms, const char *why)
{
	t->upload_errors++;
	unsigned a = x->row.attempts;
	if (!delay_ms) {
		delay_ms = RETRY_MIN_MS << (a < 20 ? a : 20);
		if (delay_ms > RETRY_MAX_MS)
			delay_ms = RETRY_MAX_MS;
	}
	ING_LOG_RL(ING_LOG_ERR, COMP, "frame %s/%s: %s; retry in %lld s (attempt %u)", x->row.wafer_id,
		   x->row.frame_id, why, (long long)(delay_ms / 1000), a + 1);
	(void)tier_db_failed(t->db, &x->row, now_ms() + delay_ms, why);
}

static void census_move(struct ing_tier *t, enum ing_location from, enum ing_location to, uint64_t len)
{
	if (t->census.frames[from])
		t->census.frames[from]--;
	t->census.bytes[from] = t->census.bytes[from] > len ? t->census.bytes[from] - len : 0;
	t->census.frames[to]++;
	t->census.bytes[to] += len;
}

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
	if (x->fd < 0 || fstat(x->fd, &st) != 0 || (uint64_t)st.st_size != row->length) {
		if (x->fd < 0)
			snprintf(why, sizeof(why), "local copy %s: %s (not uploaded)", path, strerror(errno));
		else
			snprintf(why, sizeof(why), "local copy %s holds %lld bytes, the catalog %" PRIu64
				 " (not uploaded)", path, (long long)st.st_size, row->length);
		row_failed(t, x, 0, why);
		xfer_put(t, x);
		return;
	}
	x->md = EVP_MD_CTX_new();
	if (!x->md || !EVP_DigestInit_ex(x->md, EVP_sha256(), NULL)) {
		row_failed(t, x, 0, "SHA-256 unavailable (OpenSSL)");
		xfer_put(t, x);
		return;
	}
	x->st = XS_HASH;
}

/* The hash pass is done: the bytes must be the catalog's; then the frame waits its turn. */
static void upload_hashed(struct ing_tier *t, struct xfer *x)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned mdl = 0;
	char why[700];

	EVP_DigestFinal_ex(x->md, md, &mdl);
	if (x->crc != x->row.crc32c) {
		snprintf(why, sizeof(why), "local copy %s is corrupt: crc32c 0x%08x, the catalog says 0x%08x "
			 "(not uploaded; re-send the frame to restore it)", x->row.path, x->crc,
			 x->row.crc32c);
		row_failed(t, x, 0, why);
		xfer_put(t, x);
		return;
	}
	for (unsigned i = 0; i < mdl && i < 32; i++)
		snprintf(x->sha_hex + 2 * i, 3, "%02x", md[i]);
	x->st = XS_READY;
}

/* A hashed frame goes on the wire: the create-only PUT. */
static void upload_put(struct ing_tier *t, struct xfer *x)
{
	char key[ING_S3_KEY_MAX + 1];
	if (ing_s3_key(&t->s3, key, sizeof(key), x->row.wafer_id, x->row.frame_id)) {
		row_failed(t, x, CONFLICT_RETRY_MS, "no object key for these ids");
		xfer_put(t, x);
		return;
	}
	x->req.fd = x->fd;
	x->req.len = x->row.length;
	if (!xfer_start(t, x, s3_req_put(&x->req, &t->s3, key, x->sha_hex, x->row.crc32c,
					 x->row.wafer_id, x->row.frame_id), XS_PUT)) {
		xfer_put(t, x);
		return;
	}
	t->n_wire++;
}

/* Hashed frames go on the wire, oldest first, while fewer than parallel are there. */
static void start_puts(struct ing_tier *t)
{
	while (t->n_wire < t->parallel && t->store_state == ING_TIER_STORE_OK) {
		struct xfer *first = NULL;
		for (unsigned i = 0; i < MAX_XFERS; i++) {
			struct xfer *x = &t->x[i];
			if (x->st == XS_READY && (!first || x->row.seq < first->row.seq))
				first = x;
		}
		if (!first)
			return;
		upload_put(t, first);
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
			row_failed(t, x, 0, why);
			xfer_put(t, x);
			continue;
		}
		EVP_DigestUpdate(x->md, t->buf, (size_t)got);
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
	if (ing_s3_key(&t->s3, key, sizeof(key), x->row.wafer_id, x->row.frame_id) ||
	    !xfer_start(t, x, s3_req_head(&x->req, &t->s3, key), st))
		xfer_put(t, x);
}

/*
 * The object as HEAD saw it is this frame: its length and CRC-32C; the SHA-256 when both
 * sides have one (an upload's: the store checked it); the ETag when one was recorded (a
 * deletion's check: the object is still the one verified).
 */
static bool object_matches(const struct ing_s3_object *o, const struct tier_row *r, const char *sha,
			   const char *etag)
{
	if (o->length < 0 || (uint64_t)o->length != r->length || !o->has_crc || o->crc32c != r->crc32c)
		return false;
	if (sha && sha[0] && o->sha256[0] && strcmp(o->sha256, sha))
		return false;
	return !etag || !etag[0] || !strcmp(o->etag, etag);
}

static void upload_done(struct ing_tier *t, struct xfer *x, enum ing_s3_result res)
{
	char why[1024];
	if (res != ING_S3_OK && res != ING_S3_EXISTS)
		s3_req_describe(&x->req, res, why, sizeof(why));
	if (store_wide(res)) {
		t->upload_errors++;
		store_bad(t, res, why);
		xfer_put(t, x);   /* the frame stays due: it goes once the store answers */
		return;
	}
	if (x->st == XS_PUT) {
		if (res == ING_S3_OK && (x->req.sent != x->row.length || x->req.crc_sent != x->row.crc32c)) {
			res = ING_S3_LOCAL;
			snprintf(why, sizeof(why), "local copy %s changed while it was uploaded", x->row.path);
		}
		if (res == ING_S3_OK || res == ING_S3_EXISTS) {
			x->exists = res == ING_S3_EXISTS;
			s3_req_release(&x->req);
			x->in_multi = false;
			head_of(t, x, XS_VERIFY);
			return;
		}
		row_failed(t, x, 0, why);
		xfer_put(t, x);
		return;
	}
	/* XS_VERIFY */
	if (res == ING_S3_OK && object_matches(&x->req.obj, &x->row, x->sha_hex, NULL) &&
	    (x->exists || !strcmp(x->req.obj.sha256, x->sha_hex))) {
		if (tier_db_uploaded(t->db, &x->row, x->req.obj.etag, ing_wall_ns()) == 0) {
			census_move(t, ING_LOC_LOCAL, ING_LOC_BOTH, x->row.length);
			if (x->exists) {
				t->already_stored++;
				ING_LOG_RL(ING_LOG_INFO, COMP, "frame %s/%s: already in the store with the same "
					   "bytes (an earlier attempt got through, or another node stored it): "
					   "done", x->row.wafer_id, x->row.frame_id);
			} else {
				t->uploaded_frames++;
				t->uploaded_bytes += x->row.length;
			}
		}
		xfer_put(t, x);
		t->poll_due = true;
		return;
	}
	if (res == ING_S3_OK && x->exists) {
		const struct ing_s3_object *o = &x->req.obj;
		t->conflicts++;
		snprintf(why, sizeof(why), "another object is stored under key %s (%lld bytes, crc32c %s%08x, "
			 "sha256 %.16s...; this frame: %" PRIu64 " bytes, crc32c %08x, sha256 %.16s...): the "
			 "frame stays local; move that object away to tier it", x->req.key,
			 (long long)o->length, o->has_crc ? "" : "none/", o->crc32c,
			 o->sha256[0] ? o->sha256 : "none", x->row.length, x->row.crc32c, x->sha_hex);
		row_failed(t, x, CONFLICT_RETRY_MS, why);
	} else if (res == ING_S3_OK) {
		snprintf(why, sizeof(why), "the object under %s does not read back as uploaded "
			 "(%lld bytes, crc32c %08x, sha256 %.16s...)", x->req.key, (long long)x->req.obj.length,
			 x->req.obj.crc32c, x->req.obj.sha256);
		row_failed(t, x, 0, why);
	} else {
		row_failed(t, x, 0, why);
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

static void delete_done(struct ing_tier *t, struct xfer *x, enum ing_s3_result res)
{
	char why[1024];
	if (store_wide(res)) {
		s3_req_describe(&x->req, res, why, sizeof(why));
		store_bad(t, res, why);
		xfer_put(t, x);
		return;
	}
	if (res == ING_S3_OK && object_matches(&x->req.obj, &x->row, NULL, x->row.object_md5)) {
		char path[PATH_MAX + 600];
		snprintf(path, sizeof(path), "%s/%s", t->data_dir, x->row.path);
		int rc = unlink(path) == 0 || errno == ENOENT ? 0 : -errno;
		if (rc == 0)
			rc = fsync_parent(path);   /* gone for good before the catalog says so */
		if (rc == 0 && tier_db_local_deleted(t->db, &x->row, ing_wall_ns()) == 0) {
			census_move(t, ING_LOC_BOTH, ING_LOC_TIERED, x->row.length);
			t->local_deleted++;
		} else if (rc) {
			ING_LOG_RL(ING_LOG_ERR, COMP, "deleting the local copy %s: %s", path, strerror(-rc));
		}
		xfer_put(t, x);
		return;
	}
	if (res == ING_S3_OK || res == ING_S3_NOT_FOUND) {
		ING_LOG_RL(ING_LOG_WARN, COMP, "frame %s/%s: its object %s before deleting the local copy: "
			   "local copy kept, uploading it again", x->row.wafer_id, x->row.frame_id,
			   res == ING_S3_NOT_FOUND ? "is gone from the store" : "differs from the one verified");
		if (tier_db_requeue(t->db, &x->row) == 0)
			census_move(t, ING_LOC_BOTH, ING_LOC_LOCAL, x->row.length);
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

static void reads_poll(struct ing_tier *t)
{
	struct ing_msg m[ING_TIER_MAX_READS];
	unsigned n;
	while ((n = ing_mbox_pop(t->in, m, ING_TIER_MAX_READS)) > 0) {
		for (unsigned i = 0; i < n; i++) {
			struct ing_tier_read *r = m[i].arg;   /* ING_EV_TIER_READ, the only kind */
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
		rc = tier_db_census(t->db, &t->census, &t->seen_seq);
	if (rc) {
		ING_LOG_RL(ING_LOG_WARN, COMP, "outbox set-up: %s; retrying", strerror(-rc));
		t->next_setup_ns = now + 1000000000ull;
		return;
	}
	t->outbox_on = true;
	t->census_done = true;
	ING_INFO(COMP, "catalog: %" PRIu64 " frames local, %" PRIu64 " both, %" PRIu64 " tiered",
		 t->census.frames[ING_LOC_LOCAL], t->census.frames[ING_LOC_BOTH],
		 t->census.frames[ING_LOC_TIERED]);
}

static void probe(struct ing_tier *t, uint64_t now)
{
	if (t->probing || now < t->next_probe_ns)
		return;
	struct xfer *x = xfer_get(t, XK_PROBE);
	if (x && !xfer_start(t, x, s3_req_head_bucket(&x->req, &t->s3), XS_PROBE))
		xfer_put(t, x);
}

static bool in_flight(struct ing_tier *t, const struct tier_row *r)
{
	for (unsigned i = 0; i < MAX_XFERS; i++) {
		const struct xfer *x = &t->x[i];
		if (x->st != XS_FREE && x->kind != XK_PROBE && !strcmp(x->row.frame_id, r->frame_id) &&
		    !strcmp(x->row.wafer_id, r->wafer_id))
			return true;
	}
	return false;
}

/* Frames made durable since the last look, into the census (the high-water mark in bytes
 * counts them, whatever the store's state). */
static void count_new(struct ing_tier *t)
{
	uint64_t f = 0, b = 0;
	if (tier_db_new_rows(t->db, &t->seen_seq, &f, &b) == 0) {
		t->census.frames[ING_LOC_LOCAL] += f;
		t->census.bytes[ING_LOC_LOCAL] += b;
	}
}

static void poll_new(struct ing_tier *t, uint64_t now)
{
	if (now < t->next_poll_ns)
		return;
	t->next_poll_ns = now + POLL_MS * 1000000ull;
	t->poll_due = true;
	count_new(t);
}

static void start_uploads(struct ing_tier *t)
{
	struct tier_row rows[ING_TIER_MAX_PARALLEL * 4];
	/* as many more as are on the wire are read and hashed ahead, so the next PUT is ready
	 * when one ends (the hash pass is most of a frame's time at --tier-parallel 1) */
	if (t->n_up >= 2 * t->parallel || !t->poll_due)
		return;
	t->poll_due = false;
	int n = tier_db_due(t->db, now_ms(), t->seen_seq, rows, 2 * t->parallel + t->n_up);
	for (int i = 0; i < n && t->n_up < 2 * t->parallel; i++)
		if (!in_flight(t, &rows[i]))
			upload_begin(t, &rows[i]);
}

static void start_deletions(struct ing_tier *t, uint64_t now)
{
	struct tier_row rows[DEL_SLOTS * 2];
	int64_t cutoff;
	if (t->n_del >= DEL_SLOTS || now < t->next_del_ns)
		return;
	if (t->retention_ms >= 0)
		cutoff = ing_wall_ns() - t->retention_ms * 1000000ll;
	else if (t->purge)
		cutoff = INT64_MAX;   /* pressure: any verified copy, oldest first */
	else
		return;
	int n = tier_db_candidates(t->db, cutoff, rows, DEL_SLOTS + t->n_del);
	if (n < (int)(DEL_SLOTS + t->n_del))
		t->next_del_ns = now + DELETE_EVERY_MS * 1000000ull;   /* nothing more due now */
	for (int i = 0; i < n && t->n_del < DEL_SLOTS; i++) {
		if (in_flight(t, &rows[i]))
			continue;
		struct xfer *x = xfer_get(t, XK_DELETE);
		if (!x)
			break;
		x->row = rows[i];
		head_of(t, x, XS_CHECK);
	}
}

/*
 * The high-water mark in bytes and what is used now: the data dir's file system (N %: used
 * as df counts it, against N % of used + available) or the frames with a local copy (a
 * size). Published for control, which adds the frames it has admitted and not yet made
 * durable (ing_tier_refusing); the purge (deletion under pressure) starts above
 * ING_TIER_LOW_WATER_PCT of the mark.
 */
static void update_usage(struct ing_tier *t, uint64_t now)
{
	struct statvfs v;
	uint64_t used = 0, mark = 0;
	t->next_usage_ns = now + USAGE_EVERY_MS * 1000000ull;
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
		count_new(t);   /* the frames committed since the last poll count at once */
		used = t->census.bytes[ING_LOC_LOCAL] + t->census.bytes[ING_LOC_BOTH];
		mark = t->hw_bytes;
	}
	if (!mark)
		return;
	t->used_bytes = used;
	t->purge = used > mark / 100 * ING_TIER_LOW_WATER_PCT;
	atomic_store_explicit(&t->used_bytes_now, used, memory_order_relaxed);
	atomic_store_explicit(&t->backlog_now, t->backlog_frames, memory_order_relaxed);
	atomic_store_explicit(&t->mark_bytes, mark, memory_order_relaxed);
	bool at = used >= mark;
	if (at != t->at_mark) {
		t->at_mark = at;
		if (at)
			ING_WARN(COMP, "local disk at the high-water mark (%.1f of %.1f MiB%s): new frames are "
				 "refused NO_SPACE (retryable) until the tier has freed space; backlog %" PRIu64
				 " frames, store %s", used / 1048576.0, mark / 1048576.0,
				 t->hw_pct ? " of the file system" : " of frames", t->backlog_frames,
				 ing_tier_store_state_name(t->store_state));
		else
			ING_INFO(COMP, "local disk below the high-water mark again: frames are taken");
	}
}

static void refresh_stats(struct ing_tier *t, uint64_t now)
{
	t->next_stats_ns = now + STATS_EVERY_MS * 1000000ull;
	if (t->outbox_on)
		(void)tier_db_backlog(t->db, &t->backlog_frames, &t->backlog_bytes, &t->oldest_ms);
	if (now >= t->next_rate_ns) {   /* one sample a second */
		t->next_rate_ns = now + 1000000000ull;
		if (t->rate_n == RATE_SAMPLES) {
			memmove(t->rate_t, t->rate_t + 1, sizeof(t->rate_t[0]) * (RATE_SAMPLES - 1));
			memmove(t->rate_b, t->rate_b + 1, sizeof(t->rate_b[0]) * (RATE_SAMPLES - 1));
			t->rate_n--;
		}
		t->rate_t[t->rate_n] = now;
		t->rate_b[t->rate_n] = t->uploaded_bytes;
		t->rate_n++;
	}
	pthread_mutex_lock(&t->mu);
	struct ing_tier_stats *s = &t->snap;
	s->store_state = t->store_state;
	snprintf(s->store_error, sizeof(s->store_error), "%s", t->store_error);
	s->backlog_frames = t->backlog_frames;
	s->backlog_bytes = t->backlog_bytes;
	int64_t wall = now_ms();
	s->lag_seconds = t->backlog_frames && t->oldest_ms && wall > t->oldest_ms ?
				 (double)(wall - t->oldest_ms) / 1000.0 : 0.0;
	s->uploaded_frames = t->uploaded_frames;
	s->uploaded_bytes = t->uploaded_bytes;
	s->already_stored = t->already_stored;
	s->upload_errors = t->upload_errors;
	s->uploads_in_progress = t->n_wire;
	s->conflicts = t->conflicts;
	s->census_done = t->census_done;
	s->frames_local = t->census.frames[ING_LOC_LOCAL];
	s->frames_both = t->census.frames[ING_LOC_BOTH];
	s->frames_tiered = t->census.frames[ING_LOC_TIERED];
	s->local_bytes = t->census.bytes[ING_LOC_LOCAL] + t->census.bytes[ING_LOC_BOTH];
	s->local_deleted = t->local_deleted;
	s->refusing = t->at_mark;
	s->usage_pct = t->usage_pct;
	s->upload_bytes_per_second = 0;
	if (t->rate_n >= 2 && t->rate_t[t->rate_n - 1] > t->rate_t[0])
		s->upload_bytes_per_second = (double)(t->rate_b[t->rate_n - 1] - t->rate_b[0]) * 1e9 /
					     (double)(t->rate_t[t->rate_n - 1] - t->rate_t[0]);
	pthread_mutex_unlock(&t->mu);
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
		enum ing_s3_result res = s3_req_done(&x->req, cc);
		switch (x->st) {
		case XS_PUT:
		case XS_VERIFY:
			upload_done(t, x, res);
			break;
		case XS_CHECK:
			delete_done(t, x, res);
			break;
		case XS_GET:
			read_get_done(t, x, res);
			break;
		case XS_PROBE: {
			char why[1024];
			if (res == ING_S3_OK) {
				store_good(t);
			} else {
				s3_req_describe(&x->req, res, why, sizeof(why));
				store_bad(t, res, why);
			}
			xfer_put(t, x);
			break;
		}
		default:
			xfer_put(t, x);
		}
	}
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
		uint64_t now = ing_now_ns();
		bool busy = false;
		if (t->enabled) {
			if (!t->outbox_on)
				setup_outbox(t, now);
			if (now >= t->next_usage_ns)
				update_usage(t, now);
			if (t->outbox_on)
				poll_new(t, now);
			if (t->outbox_on && t->store_state != ING_TIER_STORE_OK)
				probe(t, now);
			if (t->outbox_on && t->store_state == ING_TIER_STORE_OK) {
				start_uploads(t);
				start_deletions(t, now);
			}
			busy = hash_step(t);
		}
		reads_poll(t);
		int running = 0;
		curl_multi_perform(t->multi, &running);
		collect(t);
		if (t->enabled)
			start_puts(t);   /* hashed frames, into the places the finished ones left */
		if (now >= t->next_stats_ns)
			refresh_stats(t, now);
		int timeout = busy ? 0 : !t->enabled ? IDLE_POLL_MS :
			      t->hw_pct || t->hw_bytes ? (int)USAGE_EVERY_MS : POLL_MS;
		if (t->enabled && t->store_state != ING_TIER_STORE_OK && !t->probing) {
			uint64_t n2 = ing_now_ns();
			uint64_t left = t->next_probe_ns > n2 ? (t->next_probe_ns - n2) / 1000000ull + 1 : 0;
			if (left < (uint64_t)timeout)
				timeout = (int)left;
		}
		if (!ing_mbox_idle(t->in))   /* re-armed its doorbell; a read came in meanwhile */
			timeout = 0;
		curl_multi_poll(t->multi, &wake, 1, timeout, NULL);
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
		read_fail(t, m.arg, -ECANCELED, "the ingest node is stopping");
	return NULL;
}

/* ---------------------------------------------------------------- life */

struct ing_tier *ing_tier_start(const struct ing_tier_opts *o)
{
	struct ing_tier *t = calloc(1, sizeof(*t));
	if (!t) {
		ING_ERR(COMP, "out of memory");
		return NULL;
	}
	pthread_mutex_init(&t->mu, NULL);
	snprintf(t->data_dir, sizeof(t->data_dir), "%s", o->data_dir);
	snprintf(t->catalog, sizeof(t->catalog), "%s/catalog.db", o->data_dir);
	t->enabled = o->s3 != NULL;
	t->parallel = o->parallel ? o->parallel : ING_TIER_DEFAULT_PARALLEL;
	if (t->parallel > ING_TIER_MAX_PARALLEL)
		t->parallel = ING_TIER_MAX_PARALLEL;
	t->retention_ms = o->retention_ms;
	t->hw_pct = o->high_water_pct;
	t->hw_bytes = o->high_water_bytes;
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
	t->snap.enabled = t->enabled;
	t->snap.store_state = t->store_state;
	t->snap.high_water_pct = t->hw_pct;
	t->snap.high_water_bytes = t->hw_bytes;
	t->snap.retention_ms = t->retention_ms;
	for (unsigned i = 0; i < ING_TIER_MAX_READS; i++)
		t->reads[i].fd = -1;
	t->db = tier_db_open(t->catalog);
	if (!t->db)
		goto fail;
	if (!t->enabled) {
		(void)tier_db_disable(t->db);
	} else {
		t->s3 = *o->s3;
		snprintf(t->snap.store, sizeof(t->snap.store), "%s", t->s3.display);
	}
	t->buf = malloc(HASH_CHUNK);
	t->ctl = o->ctl;
	t->in = ing_mbox_create("tier", READ_RING);
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
		 "%u s fails a request; local retention %s, high-water mark %s", t->s3.display,
		 t->s3.region, t->s3.path_style ? "path-style" : "virtual-hosted", t->parallel,
		 t->s3.timeout_ms / 1000, ret, hw);
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
	curl_multi_wakeup(t->multi);
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
	pthread_mutex_destroy(&t->mu);
	free(t);
}

bool ing_tier_refusing(struct ing_tier *t, uint64_t pending, char *why, size_t whylen)
{
	uint64_t mark = t ? atomic_load_explicit(&t->mark_bytes, memory_order_relaxed) : 0;
	if (!mark)
		return false;
	uint64_t used = atomic_load_explicit(&t->used_bytes_now, memory_order_relaxed);
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

void ing_tier_get_stats(struct ing_tier *t, struct ing_tier_stats *st)
{
	memset(st, 0, sizeof(*st));
	if (!t)
		return;
	pthread_mutex_lock(&t->mu);
	*st = t->snap;
	pthread_mutex_unlock(&t->mu);
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
