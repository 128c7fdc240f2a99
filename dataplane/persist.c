/* SPDX-License-Identifier: Apache-2.0 */
/*
 * persist.c - persistence workers. Each worker is a plain pthread (it blocks in write,
 * fdatasync and SQLite) owning one mailbox (dataplane/mbox.c) and one catalog handle; it
 * sleeps on its mailbox's doorbell and on nothing else (no timeout: a stop request kicks
 * the doorbell). A frame id always maps to the same worker, so duplicates of one id
 * serialise.
 *
 * Per burst: verify crc32c, look the id up, write the new frames (temp + fdatasync +
 * rename + dir fsync), insert all their catalog rows in ONE transaction (group commit),
 * then send every frame, good or bad, back to control (ING_EV_DONE on its mailbox). A frame
 * is ACKed durable only after
 * both its file and its catalog row are durable. A catalogued id is a duplicate only while
 * its file is there with the catalogued length (one stat) or its object is verified in the
 * object store (location both or tiered); a file lost or cut short is written again from
 * the re-sent copy, outside the group (its row already exists).
 *
 * Workers get their cpu affinity set explicitly at start (planned cpu, or the unpinned
 * set): inherited, it would be the EAL main thread's single control cpu.
 *
 * Workers run at a lower cpu priority than control (SCHED_BATCH, nice o->nice): on a
 * small machine they share cpus with the control thread, and a worker copying 4 MiB into
 * the page cache or waking from fdatasync could take the cpu from control while it was
 * receiving the next frame, delaying that frame's RECEIVED ack and every ack behind it
 * (docs/LATENCY.md). Persistence only needs throughput; backpressure (pool slots) bounds
 * how far it may fall behind.
 *
 * The crc32c of a gRPC fallback frame arrives computed (crc_done: control computed it as
 * it copied the bytes in); it is still compared with the declared one here. Other frames
 * (RDMA) are read once more to compute it.
 */
#include "dataplane/dataplane_internal.h"
#include "dataplane/hwm.h"
#include "dataplane/store/store.h"
#include "common/clock.h"
#include "common/crc32c.h"
#include "common/log.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define COMP "persist"
#define BURST 32
#define GROUP_BYTES (64ull << 20)  /* written bytes per catalog transaction, at most */

struct worker {
	struct ing_persist *p;
	unsigned idx;
	pthread_t th;
	bool started;
	bool exited;                  /* set by the worker when its loop has ended */
	struct ing_mbox *in;          /* ING_EV_PERSIST messages */
	struct ing_catalog *cat;
	struct ing_persist_stats st;  /* written by the worker (relaxed atomics), read by anyone */
	struct ing_frame *burst[BURST];
	struct ing_msg msgs[BURST];
	struct ing_frame *ok[BURST];
	struct ing_catalog_row rows[BURST];
	int dir_rc[BURST];
	struct ing_frame *dup_src[BURST]; /* per group position: same-id original */
	int cpu;                      /* planned cpu, -1: not pinned (runs on p->unpinned) */
	unsigned group;               /* its pool region's group */
} __attribute__((aligned(64)));

struct ing_persist {
	char data_dir[PATH_MAX - 64];
	enum ing_sink sink;
	bool verify_crc;
	unsigned nice;        /* 0: leave the workers' scheduling alone */
	cpu_set_t unpinned;   /* where workers that are not pinned run */
	unsigned nworkers;
	unsigned ngroups;       /* >= 1; group g: workers g*per_group .. */
	unsigned per_group;
	int group_node[ING_POOL_MAX_REGIONS];
	struct ing_mbox *ctl;   /* the control thread's mailbox: ING_EV_DONE */
	struct ing_hwm *hwm;    /* the bytes of the rows inserted (NULL: not counted) */
	int stop;       /* drain, then exit */
	int abort;      /* deadline passed: fail what is left, exit */
	struct worker *w;
};

void ing_persist_opts_init(struct ing_persist_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->data_dir = NULL;
	o->workers = ING_DEFAULT_WORKERS;
	o->ring_size = ING_DEFAULT_RING_SIZE;
	o->sink = ING_SINK_FILE;
	o->verify_crc = true;
	o->nice = ING_DEFAULT_WORKER_NICE;
}

static inline void stat_add(uint64_t *c, uint64_t v)
{
	__atomic_fetch_add(c, v, __ATOMIC_RELAXED);
}

static void fail(struct ing_frame *f, enum ing_err e, bool retryable, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static void fail(struct ing_frame *f, enum ing_err e, bool retryable, const char *fmt, ...)
{
	va_list ap;

	f->status = e;
	f->retryable = retryable;
	va_start(ap, fmt);
	vsnprintf(f->msg, sizeof(f->msg), fmt, ap);
	va_end(ap);
}

/* wall-clock time of a monotonic stamp (the catalog stores wall time) */
static int64_t mono_to_wall(uint64_t mono, uint64_t now_mono, int64_t now_wall)
{
	if (!mono || mono > now_mono)
		return now_wall;
	return now_wall - (int64_t)(now_mono - mono);
}

/* crc + argument checks shared by both sinks; false when f has failed */
static bool check_frame(struct ing_persist *p, struct ing_frame *f)
{
	if (!f->length || f->length > f->cap) {
		fail(f, ING_E_INVALID_ARGUMENT, false, "frame %s: length %llu outside 1..%llu",
		     f->frame_id, (unsigned long long)f->length,
		     (unsigned long long)f->cap);
		return false;
	}
	if (f->crc_done)
		f->crc_computed = f->crc_run;   /* computed by control as the bytes came in */
	else if (p->verify_crc || !f->has_crc)
		f->crc_computed = ing_crc32c(0, f->buf, f->length);
	else
		f->crc_computed = f->crc32c;
	if (f->has_crc && f->crc_computed != f->crc32c) {
		fail(f, ING_E_CRC_MISMATCH, true, "crc32c mismatch: expected 0x%08x, got 0x%08x",
		     f->crc32c, f->crc_computed);
		return false;
	}
	if (p->sink == ING_SINK_FILE && (ing_id_check(f->wafer_id, strlen(f->wafer_id)) ||
					 ing_id_check(f->frame_id, strlen(f->frame_id)))) {
		fail(f, ING_E_INVALID_ARGUMENT, false, "waferId and frameId must be " ING_ID_RULE);
		return false;
	}
	f->t_crc_ns = ing_now_ns();   /* the end of the Ack's crc stage */
	return true;
}

/*
 * true when an earlier frame of this group (written, not yet committed) has the same id;
 * *src is set to it so the verdict can follow the original's commit (finish_group)
 */
static bool dup_in_group(struct worker *w, unsigned nok, struct ing_frame *f, struct ing_frame **src)
{
	for (unsigned i = 0; i < nok; i++) {
		if (strcmp(w->ok[i]->frame_id, f->frame_id) != 0 ||
		    strcmp(w->ok[i]->wafer_id, f->wafer_id) != 0)
			continue;
		*src = w->ok[i];
		if (w->ok[i]->crc_computed == f->crc_computed)
			f->duplicate = true;
		else
			fail(f, ING_E_DUPLICATE_CONFLICT, false,
			     "frame %s of wafer %s already stored with crc32c 0x%08x, this one has 0x%08x",
			     f->frame_id, f->wafer_id, w->ok[i]->crc_computed, f->crc_computed);
		return true;
	}
	return false;
}

/*
 * 0 when <data_dir>/<rel> is a regular file of len bytes; -ENOENT missing, -EFBIG other
 * size or not a regular file, other -errno when it cannot be checked. Cheap: one stat,
 * the bytes are not read again (a file of the right length is trusted).
 */
static int file_intact(const char *data_dir, const char *rel, uint64_t len)
{
	char path[PATH_MAX];
	struct stat st;

	if ((size_t)snprintf(path, sizeof(path), "%s/%s", data_dir, rel) >= sizeof(path))
		return -ENAMETOOLONG;
	if (stat(path, &st) < 0)
		return errno == ENOTDIR ? -ENOENT : -errno;
	if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size != len)
		return -EFBIG;
	return 0;
}

/*
 * Same id, same crc and length as a catalogued frame. Its file present: a duplicate, not
 * rewritten. Its file gone or of another length (deleted, lost, truncated): the catalog row
 * promises bytes that are not there, so write them again from this copy, where the row
 * says (directory fsync included: the frame has no row to commit, the existing one stays)
 * and ACK it as stored, not as a duplicate.
 */
static void restore_frame(struct worker *w, struct ing_frame *f, const struct ing_catalog_row *row)
{
	struct ing_persist *p = w->p;
	int rc = file_intact(p->data_dir, row->path, row->length);

	/* a frame whose object is verified in the store (dataplane/tier/) is stored, with or
	 * without its local copy (deleted by the retention): nothing to write again */
	if (rc == 0 || row->location != ING_LOC_LOCAL) {
		f->duplicate = true;
		return;
	}
	if (rc != -ENOENT && rc != -EFBIG) {
		fail(f, ING_E_IO, true, "checking %s: %s", row->path, strerror(-rc));
		ING_LOGC_RL(ING_LOG_ERR, COMP, (&(struct ing_log_ctx){ .wafer = f->wafer_id,
							      .frame = f->frame_id }),
			    "worker %u: frame %s: %s", w->idx, f->frame_id, f->msg);
		return;
	}
	bool missing = rc == -ENOENT;
	rc = ing_store_write(p->data_dir, row->path, f->buf, f->length, f->cap, true, NULL);
	if (rc < 0) {
		if (rc == -ENOSPC || rc == -EDQUOT)
			fail(f, ING_E_NO_SPACE, true, "no space left rewriting %s", row->path);
		else
			fail(f, ING_E_IO, true, "rewriting %s: %s", row->path, strerror(-rc));
		ING_LOGC_RL(ING_LOG_ERR, COMP, (&(struct ing_log_ctx){ .wafer = f->wafer_id,
							      .frame = f->frame_id }),
			    "worker %u: frame %s: %s", w->idx, f->frame_id, f->msg);
		return;
	}
	ING_LOG_RL(ING_LOG_WARN, COMP,
		   "worker %u: frame %s/%s: catalog row without its file: rewritten %s (it was %s)",
		   w->idx, f->wafer_id, f->frame_id, row->path,
		   missing ? "missing" : "of the wrong length");
	stat_add(&w->st.fsyncs, 1);
	stat_add(&w->st.rewrites, 1);
}

static void store_frame(struct worker *w, struct ing_frame *f, unsigned *nok,
			struct ing_frame **src)
{
	struct ing_persist *p = w->p;
	struct ing_catalog_row *row = &w->rows[*nok];
	int rc;

	if (dup_in_group(w, *nok, f, src))
		return;
	rc = ing_catalog_lookup(w->cat, f->wafer_id, f->frame_id, row);
	if (rc == 0) {
		if (row->crc32c != f->crc_computed || row->length != f->length)
			fail(f, ING_E_DUPLICATE_CONFLICT, false,
			     "frame %s of wafer %s already stored with crc32c 0x%08x (%llu bytes), "
			     "this one has 0x%08x (%llu bytes)",
			     f->frame_id, f->wafer_id, row->crc32c,
			     (unsigned long long)row->length, f->crc_computed,
			     (unsigned long long)f->length);
		else
			restore_frame(w, f, row);
		return;
	}
	if (rc != -ENOENT) {
		fail(f, ING_E_IO, true, "catalog lookup failed (%s)", strerror(-rc));
		return;
	}
	memset(row, 0, sizeof(*row));
	rc = ing_store_rel_path(row->path, sizeof(row->path), f->wafer_id, f->frame_id);
	if (rc == 0)
		rc = ing_store_write(p->data_dir, row->path, f->buf, f->length, f->cap, false,
				    &f->t_written_ns);
	f->t_synced_ns = ing_now_ns();
	if (rc < 0) {
		if (rc == -ENOSPC || rc == -EDQUOT)
			fail(f, ING_E_NO_SPACE, true, "no space left writing %s", row->path);
		else
			fail(f, ING_E_IO, true, "writing %s: %s", row->path, strerror(-rc));
		ING_LOGC_RL(ING_LOG_ERR, COMP, (&(struct ing_log_ctx){ .wafer = f->wafer_id,
							      .frame = f->frame_id }),
			    "worker %u: frame %s: %s", w->idx, f->frame_id, f->msg);
		return;
	}
	memcpy(row->frame_id, f->frame_id, sizeof(row->frame_id));
	memcpy(row->wafer_id, f->wafer_id, sizeof(row->wafer_id));
	row->timestamp = f->timestamp;
	row->length = f->length;
	row->crc32c = f->crc_computed;
	row->transport = f->transport;
	w->ok[(*nok)++] = f;
}

static bool same_dir(const char *a, const char *b)
{
	const char *sa = strrchr(a, '/'), *sb = strrchr(b, '/');
	return sa && sb && sa - a == sb - b && memcmp(a, b, (size_t)(sa - a)) == 0;
}

/*
 * Make the renames of the group durable: one fsync per directory (not per frame). Frames
 * whose directory fails are failed and dropped from the group. Returns the new nok.
 */
static unsigned sync_dirs(struct worker *w, unsigned nok)
{
	struct ing_persist *p = w->p;
	unsigned keep = 0;
	int rc = 0;

	for (unsigned i = 0; i < nok; i++) {
		unsigned j;
		for (j = 0; j < i; j++)
			if (same_dir(w->rows[j].path, w->rows[i].path))
				break;
		if (j == i) {   /* first frame of this directory */
			rc = ing_store_sync_dir(p->data_dir, w->rows[i].path);
			w->dir_rc[i] = rc;
		} else {
			rc = w->dir_rc[j];
			w->dir_rc[i] = rc;
		}
		if (rc < 0) {
			fail(w->ok[i], ING_E_IO, true, "fsync of the directory of %s: %s",
			     w->rows[i].path, strerror(-rc));
			ING_LOG_RL(ING_LOG_ERR, COMP, "worker %u: %s", w->idx, w->ok[i]->msg);
		}
	}
	for (unsigned i = 0; i < nok; i++) {
		if (w->dir_rc[i] < 0)
			continue;
		if (keep != i) {
			w->ok[keep] = w->ok[i];
			w->rows[keep] = w->rows[i];
		}
		keep++;
	}
	stat_add(&w->st.fsyncs, keep);
	return keep;
}

/* one transaction for the group; on a clash fall back to row by row to find the culprit */
static void commit_rows(struct worker *w, unsigned nok)
{
	struct ing_persist *p = w->p;
	uint64_t now;
	int64_t wall;
	int rc;

	nok = sync_dirs(w, nok);
	if (!nok)
		return;
	now = ing_now_ns();
	wall = ing_wall_ns();
	for (unsigned i = 0; i < nok; i++) {
		w->rows[i].received_ns = mono_to_wall(w->ok[i]->t_received_ns, now, wall);
		w->rows[i].durable_ns = wall;
	}
	/* the insert and the count of its bytes are one step for the tier's measure */
	ing_hwm_commit_begin(p->hwm);
	rc = ing_catalog_insert(w->cat, w->rows, nok);
	stat_add(&w->st.batches, 1);
	if (rc == 0) {
		uint64_t bytes = 0;
		for (unsigned i = 0; i < nok; i++) {
			w->ok[i]->cataloged = true;
			bytes += w->rows[i].length;
		}
		ing_hwm_commit_end(p->hwm, bytes);
		return;
	}
	uint64_t bytes = 0;
	for (unsigned i = 0; i < nok; i++) {
		struct ing_frame *f = w->ok[i];
		int r = rc == -EEXIST ? ing_catalog_insert(w->cat, &w->rows[i], 1) : rc;
		if (r == 0) {
			f->cataloged = true;
			bytes += w->rows[i].length;
			continue;
		}
		if (r == -EEXIST) {
			struct ing_catalog_row old;
			if (ing_catalog_lookup(w->cat, f->wafer_id, f->frame_id, &old) == 0 &&
			    old.crc32c == f->crc_computed)
				f->duplicate = true;
			else
				fail(f, ING_E_DUPLICATE_CONFLICT, false,
				     "frame %s of wafer %s was stored concurrently with another crc32c",
				     f->frame_id, f->wafer_id);
		} else if (r == -ENOSPC) {
			fail(f, ING_E_NO_SPACE, true, "no space left for the catalog row");
		} else {
			fail(f, ING_E_IO, true, "catalog insert failed (%s)", strerror(-r));
		}
	}
	ing_hwm_commit_end(p->hwm, bytes);
	ING_LOG_RL(ING_LOG_ERR, COMP, "worker %u: catalog insert of %u rows: %s", w->idx, nok,
		   strerror(-rc));
}

/*
 * Every frame back to control, in order (ING_EV_DONE). Control's mailbox cannot be full: it
 * holds three messages per pool slot, more than a frame ever has waiting there, plus room
 * for connection events and calls (control/node/node.c sizes it from the pool), so no
 * wait is needed; a refusal would be a sizing bug: logged, the frames unanswered.
 */
static void post_done(struct worker *w, struct ing_frame **f, unsigned n)
{
	struct ing_persist *p = w->p;

	for (unsigned i = 0; i < n; i++)
		w->msgs[i] = (struct ing_msg){ .kind = ING_EV_DONE, .f = f[i] };
	if (ing_mbox_post_n(p->ctl, w->msgs, n) != 0)
		ING_ERR(COMP, "worker %u: control's mailbox full (%u messages): %u frames not answered",
			w->idx, ing_mbox_count(p->ctl), n);
}

/* commit the group's catalog rows, stamp and count its frames, send them back to control */
static void finish_group(struct worker *w, struct ing_frame **fr, unsigned n, unsigned nok)
{
	struct ing_persist *p = w->p;
	uint64_t now, bytes = 0, ok = 0, dups = 0, bad = 0;

	if (p->sink == ING_SINK_FILE)
		commit_rows(w, nok);
	else
		stat_add(&w->st.batches, 1);
	now = ing_now_ns();
	for (unsigned i = 0; i < n; i++) {
		struct ing_frame *f = fr[i], *src = w->dup_src[i];
		if (f->duplicate && src && src->status != ING_E_NONE) {
			/* its original did not make it: neither does the copy */
			f->duplicate = false;
			f->status = src->status;
			f->retryable = src->retryable;
			memcpy(f->msg, src->msg, sizeof(f->msg));
		}
		if (f->status == ING_E_NONE) {
			f->t_durable_ns = now;
			ok++;
			dups += f->duplicate;
			bytes += f->duplicate ? 0 : f->length;
		} else {
			bad++;
		}
	}
	stat_add(&w->st.frames, ok);
	stat_add(&w->st.bytes, bytes);
	stat_add(&w->st.duplicates, dups);
	stat_add(&w->st.failures, bad);
	post_done(w, fr, n);
}

/*
 * A burst is committed as one group, or as several when it carries more than GROUP_BYTES,
 * so the first frame of a burst of large frames is not held back by all the others.
 */
static void process_burst(struct worker *w, struct ing_frame **fr, unsigned n)
{
	struct ing_persist *p = w->p;
	bool aborting = __atomic_load_n(&p->abort, __ATOMIC_ACQUIRE);
	unsigned nok = 0, start = 0;
	uint64_t pending = 0, taken = ing_now_ns();

	for (unsigned i = 0; i < n; i++) {
		struct ing_frame *f = fr[i];
		f->t_persist_ns = taken;   /* stage timestamps for /metrics, read by control */
		f->persist_worker = (uint8_t)w->idx;
		f->status = ING_E_NONE;
		f->retryable = false;
		f->duplicate = false;
		f->cataloged = false;
		f->msg[0] = 0;
		w->dup_src[i - start] = NULL;
		if (aborting)
			fail(f, ING_E_SHUTTING_DOWN, true, "ingest node shutting down");
		else if (check_frame(p, f) && p->sink == ING_SINK_FILE) {
			unsigned before = nok;
			store_frame(w, f, &nok, &w->dup_src[i - start]);
			if (nok != before)
				pending += f->length;
		}
		if (pending >= GROUP_BYTES || i == n - 1) {
			finish_group(w, fr + start, i + 1 - start, nok);
			start = i + 1;
			nok = 0;
			pending = 0;
		}
	}
}

void ing_thread_lower_priority(unsigned nice, const char *who)
{
	struct sched_param sp = { .sched_priority = 0 };
	int rc;

	if (!nice)
		return;
	rc = pthread_setschedparam(pthread_self(), SCHED_BATCH, &sp);
	if (rc)
		ING_WARN(COMP, "%s: SCHED_BATCH: %s", who, strerror(rc));
	errno = 0;
	int cur = getpriority(PRIO_PROCESS, (id_t)gettid());
	if (errno == 0 && cur >= (int)nice)
		return;   /* already that low (ingestd run under nice): never raise it */
	if (setpriority(PRIO_PROCESS, (id_t)gettid(), (int)nice) < 0)
		ING_WARN(COMP, "%s: nice %u: %s", who, nice, strerror(errno));
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct ing_persist *p = w->p;
	char name[16];

	snprintf(name, sizeof(name), "ing-persist%u", w->idx);
	pthread_setname_np(pthread_self(), name);
	ing_thread_lower_priority(p->nice, name);
	for (;;) {
		unsigned n = ing_mbox_pop(w->in, w->msgs, BURST);
		if (n) {
			for (unsigned i = 0; i < n; i++)
				w->burst[i] = w->msgs[i].f;   /* ING_EV_PERSIST, the only kind */
			process_burst(w, w->burst, n);
			continue;
		}
		/* about to sleep: re-arm the doorbell and look once more (no lost wake-up) */
		if (!ing_mbox_idle(w->in))
			continue;
		if (__atomic_load_n(&p->stop, __ATOMIC_ACQUIRE))
			break;   /* drained */
		/* no timeout: frames and the stop request (ing_mbox_kick) both ring the doorbell */
		int rc = ing_mbox_wait(w->in, -1);
		if (rc < 0) {
			ING_LOG_RL(ING_LOG_ERR, COMP, "worker %u: wait: %s", w->idx, strerror(-rc));
			struct timespec ts = { 0, 1000000 };
			nanosleep(&ts, NULL);
		}
	}
	__atomic_store_n(&w->exited, true, __ATOMIC_RELEASE);
	return NULL;
}

/* "0-3,8" */
static void format_cpus(const cpu_set_t *set, char *buf, size_t len)
{
	size_t off = 0;

	buf[0] = 0;
	for (int c = 0; c < CPU_SETSIZE && off < len; c++) {
		if (!CPU_ISSET(c, set))
			continue;
		int e = c;
		while (e + 1 < CPU_SETSIZE && CPU_ISSET(e + 1, set))
			e++;
		int n = e == c ? snprintf(buf + off, len - off, "%s%d", off ? "," : "", c)
			       : snprintf(buf + off, len - off, "%s%d-%d", off ? "," : "", c, e);
		if (n < 0)
			break;
		off += (size_t)n;
		c = e;
	}
	if (off >= len && len > 4)
		strcpy(buf + len - 4, "...");
}

/* fill the per-worker cpus and the unpinned set from the options */
static void plan_cpus(struct ing_persist *p, const struct ing_persist_opts *o)
{
	long nconf = sysconf(_SC_NPROCESSORS_CONF);

	CPU_ZERO(&p->unpinned);
	for (unsigned i = 0; o->unpinned_cpus && i < o->n_unpinned_cpus; i++)
		if (o->unpinned_cpus[i] >= 0 && o->unpinned_cpus[i] < CPU_SETSIZE)
			CPU_SET(o->unpinned_cpus[i], &p->unpinned);
	if (!CPU_COUNT(&p->unpinned)) {
		/* every configured cpu; the kernel intersects it with the cgroup's cpuset */
		for (long c = 0; c < (nconf > 0 ? nconf : 1) && c < CPU_SETSIZE; c++)
			CPU_SET((int)c, &p->unpinned);
	}
	for (unsigned i = 0; i < p->nworkers; i++) {
		int cpu = -1;
		if (o->worker_cpus && o->n_worker_cpus)
			cpu = o->worker_cpus[i % o->n_worker_cpus];
		if (cpu >= CPU_SETSIZE) {
			ING_WARN(COMP, "worker %u: cpu %d does not exist: not pinned", i, cpu);
			cpu = -1;
		}
		p->w[i].cpu = cpu < 0 ? -1 : cpu;
	}
}

/*
 * Set a started worker's affinity: its cpu, or the unpinned set (threads inherit their
 * creator's mask, which is the control lcore's single cpu when that is the EAL main
 * thread). On failure the worker keeps running where it is, with a warning.
 */
static void place_worker(struct ing_persist *p, struct worker *w)
{
	cpu_set_t set;
	char l[128];
	int rc;

	if (w->cpu >= 0) {
		CPU_ZERO(&set);
		CPU_SET(w->cpu, &set);
	} else {
		set = p->unpinned;
	}
	rc = pthread_setaffinity_np(w->th, sizeof(set), &set);
	if (rc) {
		format_cpus(&set, l, sizeof(l));
		ING_WARN(COMP, "worker %u: setting its cpus to %s: %s (left on its creator's cpus)",
			 w->idx, l, strerror(rc));
	}
}

/* one line: where each worker actually runs (as the kernel reports it) */
static void log_placement(const struct ing_persist *p)
{
	char line[512], l[128];
	size_t off = 0;

	line[0] = 0;
	for (unsigned i = 0; i < p->nworkers && off < sizeof(line); i++) {
		cpu_set_t set;
		if (pthread_getaffinity_np(p->w[i].th, sizeof(set), &set) == 0)
			format_cpus(&set, l, sizeof(l));
		else
			snprintf(l, sizeof(l), "?");
		char grp[32] = "";
		if (p->ngroups > 1)
			snprintf(grp, sizeof(grp), " (region %u, node %d)", p->w[i].group,
				 p->group_node[p->w[i].group]);
		int n = snprintf(line + off, sizeof(line) - off, "%s%u: cpu %s%s%s", i ? ", " : "", i,
				 l, p->w[i].cpu >= 0 ? "" : " (not pinned)", grp);
		if (n < 0)
			break;
		off += (size_t)n;
	}
	ING_INFO(COMP, "worker placement: %s", line);
}

static void persist_free(struct ing_persist *p)
{
	if (!p)
		return;
	for (unsigned i = 0; p->w && i < p->nworkers; i++) {
		ing_catalog_close(p->w[i].cat);
		ing_mbox_destroy(p->w[i].in);
	}
	free(p->w);
	free(p);
}

struct ing_persist *ing_persist_start(const struct ing_persist_opts *o, struct ing_mbox *ctl)
{
	struct ing_persist *p;
	char path[PATH_MAX];

	unsigned ngroups = o && o->groups ? o->groups : 1;
	if (!o || !ctl || !o->workers || ngroups > ING_POOL_MAX_REGIONS || o->workers * ngroups > 64) {
		ING_ERR(COMP, "need options, control's mailbox and 1..64 workers (in 1..%d groups)",
			ING_POOL_MAX_REGIONS);
		return NULL;
	}
	if (o->sink == ING_SINK_FILE && (!o->data_dir || !*o->data_dir)) {
		ING_ERR(COMP, "file sink needs a data_dir");
		return NULL;
	}
	p = calloc(1, sizeof(*p));
	if (!p) {
		ING_ERR(COMP, "out of memory");
		return NULL;
	}
	p->sink = o->sink;
	p->verify_crc = o->verify_crc;
	p->hwm = o->hwm;
	p->nice = o->nice > 19 ? 19 : o->nice;
	p->ctl = ctl;
	if (o->data_dir &&
	    (size_t)snprintf(p->data_dir, sizeof(p->data_dir), "%s", o->data_dir) >= sizeof(p->data_dir)) {
		ING_ERR(COMP, "data_dir too long");
		goto fail;
	}
	p->ngroups = ngroups;
	p->per_group = o->workers;
	for (unsigned g = 0; g < ngroups; g++)
		p->group_node[g] = o->groups ? o->group_node[g] : -1;
	if (posix_memalign((void **)&p->w, 64, sizeof(*p->w) * o->workers * ngroups)) {
		ING_ERR(COMP, "out of memory");
		goto fail;
	}
	memset(p->w, 0, sizeof(*p->w) * o->workers * ngroups);
	p->nworkers = o->workers * ngroups;
	plan_cpus(p, o);
	if (p->sink == ING_SINK_FILE) {
		snprintf(path, sizeof(path), "%s/frames", p->data_dir);
		int rc = ing_store_mkdirs(path, 0755);
		if (rc < 0) {
			ING_ERR(COMP, "creating %s: %s", path, strerror(-rc));
			goto fail;
		}
		rc = ing_store_sweep_tmp(p->data_dir);
		if (rc > 0)
			ING_WARN(COMP, "removed %d temp files left by a crashed writer in %s", rc, path);
		snprintf(path, sizeof(path), "%s/catalog.db", p->data_dir);
	}
	for (unsigned i = 0; i < p->nworkers; i++) {
		struct worker *w = &p->w[i];
		w->p = p;
		w->idx = i;
		w->group = i / p->per_group;
		w->in = ing_mbox_create("persist", o->ring_size ? o->ring_size : ING_DEFAULT_RING_SIZE);
		if (!w->in)
			goto fail;
		if (p->sink == ING_SINK_FILE) {
			w->cat = ing_catalog_open(path);
			if (!w->cat)
				goto fail;
		}
	}
	for (unsigned i = 0; i < p->nworkers; i++) {
		int rc = pthread_create(&p->w[i].th, NULL, worker_main, &p->w[i]);
		if (rc) {
			ING_ERR(COMP, "starting worker %u: %s", i, strerror(rc));
			ing_persist_stop(p, 1000);
			return NULL;
		}
		p->w[i].started = true;
		place_worker(p, &p->w[i]);
	}
	ING_INFO(COMP, "%u workers%s, sink %s%s, crc check %s, %s%u", p->nworkers,
		 p->ngroups > 1 ? " in groups per pool region" : "",
		 p->sink == ING_SINK_FILE ? "file " : "null", p->sink == ING_SINK_FILE ? p->data_dir : "",
		 p->verify_crc ? "on" : "off", p->nice ? "SCHED_BATCH nice " : "normal priority, nice ",
		 p->nice);
	log_placement(p);
	return p;
fail:
	persist_free(p);
	return NULL;
}

static bool join_until(struct worker *w, uint64_t deadline_ns)
{
	struct timespec ts = { 0, 2000000 };

	while (!__atomic_load_n(&w->exited, __ATOMIC_ACQUIRE)) {
		if (ing_now_ns() >= deadline_ns)
			return false;
		nanosleep(&ts, NULL);
	}
	pthread_join(w->th, NULL);
	w->started = false;
	return true;
}

void ing_persist_stop(struct ing_persist *p, int timeout_ms)
{
	bool stuck = false;

	if (!p)
		return;
	__atomic_store_n(&p->stop, 1, __ATOMIC_RELEASE);
	for (unsigned i = 0; i < p->nworkers; i++)
		if (p->w[i].started)
			ing_mbox_kick(p->w[i].in);
	uint64_t deadline = ing_now_ns() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000ull;
	for (unsigned i = 0; i < p->nworkers; i++)
		if (p->w[i].started && !join_until(&p->w[i], deadline))
			stuck = true;
	if (stuck) {
		/* deadline passed: fail what is queued (acked SHUTTING_DOWN), then a grace period */
		ING_WARN(COMP, "workers not drained after %d ms, failing the rest", timeout_ms);
		__atomic_store_n(&p->abort, 1, __ATOMIC_RELEASE);
		deadline = ing_now_ns() + 5000000000ull;
		for (unsigned i = 0; i < p->nworkers; i++) {
			if (p->w[i].started && !join_until(&p->w[i], deadline)) {
				ING_ERR(COMP, "worker %u stuck (blocked in I/O?): leaking it", i);
				return;   /* its ring and catalog stay alive with it */
			}
		}
	}
	struct ing_persist_stats s;
	ing_persist_get_stats(p, &s);
	ING_INFO(COMP, "stopped: %llu frames, %llu bytes, %llu duplicates, %llu failures",
		 (unsigned long long)s.frames, (unsigned long long)s.bytes,
		 (unsigned long long)s.duplicates, (unsigned long long)s.failures);
	persist_free(p);
}

/* The frame's region's group, then a worker of it by the frame's identity. */
static inline unsigned route(const struct ing_persist *p, const struct ing_frame *f)
{
	uint64_t h = ing_id_pair_hash(f->wafer_id, f->frame_id) * 0x9e3779b97f4a7c15ull;
	unsigned g = f->region < p->ngroups ? f->region : 0;
	return g * p->per_group + (unsigned)((h >> 32) % p->per_group);
}

int ing_persist_submit(struct ing_persist *p, struct ing_frame *f)
{
	if (__atomic_load_n(&p->stop, __ATOMIC_RELAXED))
		return -ESHUTDOWN;
	return ing_mbox_send(p->w[route(p, f)].in, ING_EV_PERSIST, f);
}

static void sum_stats(const struct ing_persist *p, unsigned first, unsigned n,
		      struct ing_persist_stats *s)
{
	memset(s, 0, sizeof(*s));
	for (unsigned i = first; p && i < first + n && i < p->nworkers; i++) {
		const struct ing_persist_stats *w = &p->w[i].st;
		s->frames += __atomic_load_n(&w->frames, __ATOMIC_RELAXED);
		s->bytes += __atomic_load_n(&w->bytes, __ATOMIC_RELAXED);
		s->duplicates += __atomic_load_n(&w->duplicates, __ATOMIC_RELAXED);
		s->failures += __atomic_load_n(&w->failures, __ATOMIC_RELAXED);
		s->fsyncs += __atomic_load_n(&w->fsyncs, __ATOMIC_RELAXED);
		s->batches += __atomic_load_n(&w->batches, __ATOMIC_RELAXED);
		s->rewrites += __atomic_load_n(&w->rewrites, __ATOMIC_RELAXED);
	}
}

void ing_persist_get_stats(const struct ing_persist *p, struct ing_persist_stats *s)
{
	sum_stats(p, 0, p ? p->nworkers : 0, s);
}

int ing_persist_get_group_stats(const struct ing_persist *p, unsigned g, struct ing_persist_stats *s)
{
	if (!p || g >= p->ngroups)
		return -ENOENT;
	sum_stats(p, g * p->per_group, p->per_group, s);
	return 0;
}

unsigned ing_persist_nworkers(const struct ing_persist *p)
{
	return p ? p->nworkers : 0;
}

unsigned ing_persist_ngroups(const struct ing_persist *p)
{
	return p ? p->ngroups : 0;
}

int ing_persist_worker_group(const struct ing_persist *p, unsigned w, unsigned *group, int *node)
{
	if (!p || w >= p->nworkers)
		return -ENOENT;
	if (group)
		*group = p->w[w].group;
	if (node)
		*node = p->group_node[p->w[w].group];
	return 0;
}
