/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rdma_poller.c - one dataplane lcore: its connection table, chunked READ posting, CQ
 * polling in bursts, frame hand-off, and the busy/adaptive idle policy.
 *
 * Everything in struct ing_rdma_lcore below its mailbox is touched by the lcore thread only.
 * Control talks to it through the lcore's mailbox (jobs, attach, detach, in the order
 * control posted them); the lcore answers on control's mailbox with the frame itself
 * (RECEIVED, GRANTED, DONE when it failed) and connection events. No malloc, lock or
 * printf on the hot path: all tables are sized at creation, and logging happens on
 * failures only (rate-limited).
 *
 * Work-request bookkeeping: every posted READ has a record in its connection's ring
 * (wr_id = the record's address; the record carries the frame pointer, the chunk length
 * and the connection generation). RC completes a QP's WRs in order, so a signaled
 * completion retires every record up to its own, and a WR's error implies the success of
 * the WRs before it. Records outlive QPs (they belong to the lcore), and a generation
 * number makes completions of a QP the lcore already gave up on harmless.
 */
#include "dataplane/rdma/rdma.h"

#include "common/clock.h"
#include "common/log.h"

#include <rte_common.h>
#include <rte_pause.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define COMP "rdma"

/*
 * Statistics: written by the owning lcore only, read by the control thread (Stats) with
 * relaxed loads (ing_rdma_lcore_get_stats). One writer, so a relaxed load + store is an
 * exact increment and never a data race.
 */
#define STAT_ADD(lc, field, v)                                                          \
	__atomic_store_n(&(lc)->st.field,                                               \
			 __atomic_load_n(&(lc)->st.field, __ATOMIC_RELAXED) + (uint64_t)(v), \
			 __ATOMIC_RELAXED)

/* ---------------------------------------------------------------- state */

enum conn_state {
	CONN_FREE = 0,
	CONN_ACTIVE,    /* posting on its QP */
	CONN_DRAINING,  /* QP in ERROR / detached: waiting for its WRs to flush */
	CONN_PARKED,    /* no QP; frames wait for the session to reconnect */
};

#define REC_LAST 1u
#define REC_SIGNALED 2u
#define REC_BIND 4u     /* push: the memory window bind of a grant */
#define REC_INV 8u      /* push: the invalidation that ends a grant (also REC_LAST) */

/*
 * RDMA WRITE push (docs/PUSH.md). A push frame sits in its connection's FIFO like a READ
 * job, but instead of READs the lcore posts one IBV_WR_BIND_MW (a type-2 memory window
 * over exactly [buf, buf+length), remote write) and, when that completes, tells control
 * GRANTED (grant id + rkey). The producer writes with IMM = grant id; the receive
 * completion (IBV_WC_RECV_RDMA_WITH_IMM) on this lcore's CQ names the grant; byte_len must
 * be the frame's length. Then IBV_WR_LOCAL_INV ends remote access, and only its
 * completion hands the frame on (persistence checks the crc32c). MR mode (no type-2 MWs):
 * no bind/invalidate, the grant carries the pool MR's rkey. Receive WRs carry no SGE
 * (a WRITE WITH IMM consumes one and writes no data into it); wr_id = connection | 1.
 * Remote access never outlives the grant: on a dead QP the lcore deallocates the bound
 * windows (ibv_dealloc_mw, error path only) and allocates fresh ones.
 */
enum push_state {
	PS_NEW = 0,     /* needs a grant (bind) */
	PS_BINDING,     /* bind WR posted */
	PS_GRANTED,     /* announced; waiting for the producer's WRITE WITH IMM */
	PS_INV_WAIT,    /* grant over (written, or expired): invalidate when the window has room */
	PS_INV,         /* invalidate posted: its completion ends the frame */
};

struct push_mw {
	struct ibv_mw *mw;
	uint32_t rkey;  /* current key of the window (ibv_inc_rkey per bind) */
};
#define REC_CAP 256u  /* records per connection: the window can never exceed this */

struct rdma_conn;
struct rdma_rec {
	struct ing_frame *f;
	struct rdma_conn *c;
	uint32_t len;
	uint32_t gen;
	uint32_t flags;
};

struct rdma_conn {
	enum conn_state state;
	uint32_t gen;
	struct ibv_qp *qp;
	uint32_t qp_num;
	uint32_t old_qp_num;      /* the QP it had before a reconnect (late jobs) */
	uint64_t session_id;
	struct ing_rdma_plan plan;
	unsigned outstanding;     /* WRs posted, not yet retired: SQ slots in use */
	unsigned unsig_run;
	uint32_t rec_head, rec_tail; /* free-running */
	struct rdma_rec *recs;    /* REC_CAP */
	uint32_t f_head, f_tail;  /* frames assigned, not finished (free-running) */
	uint32_t post_idx;        /* frame being posted: f_head <= post_idx <= f_tail */
	uint64_t post_off;        /* next byte of fifo[post_idx] */
	struct ing_frame **fifo;
	uint64_t deadline_ns;     /* DRAINING: give up on flushes; PARKED: give up on reconnect */
	bool unpark;              /* its rail's link is down (ING_EV_UNPARK): park for no time */
	unsigned recvs;           /* push: receive WRs posted on the current QP */
	unsigned inv_wait;        /* push: frames in PS_INV_WAIT */
};

struct ing_rdma_lcore {
	struct ing_rdma_lcore_stats st;
	/* --- shared with control --- */
	struct ing_mbox *in;      /* this lcore's mailbox: ING_EV_JOB, _ATTACH, _DETACH */
	bool stop;
	unsigned held;            /* frames in the lcore (relaxed counter) */
	/* --- lcore only --- */
	struct ing_rdma_lcore_opts o __attribute__((aligned(64)));
	const struct ing_rdma_ops *ops;
	struct ibv_cq *cq;
	struct ibv_comp_channel *ch;
	int ch_fd;
	struct ing_rdma_lcore_io io;
	uint32_t lkeys[ING_POOL_MAX_CLASSES];
	unsigned nlkeys;
	uint32_t fmask;
	struct rdma_conn *conns;
	unsigned nconns;          /* high-water mark of used slots */
	unsigned frames_max;      /* frames it may hold (its connections' FIFOs) */
	unsigned idle;
	uint64_t idle_t0;         /* start of the current idle spell */
	bool armed;
	unsigned unacked_events;
	uint64_t next_timer_ns;   /* earliest conn deadline, 0: none */
	struct rdma_rec *rec_mem;
	struct ing_frame **fifo_mem;
	/* push (ing_rdma_lcore_set_push) */
	bool push;
	struct ibv_pd *pd;
	struct ibv_mr *mrs[ING_POOL_MAX_CLASSES];
	unsigned nmr;
	struct push_mw *mws;      /* all windows (MW mode) */
	unsigned nmw;
	struct push_mw **mw_free; /* free stack */
	unsigned nmw_free;
	uint32_t next_grant;
};

void ing_rdma_lcore_opts_init(struct ing_rdma_lcore_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->mode = ING_RDMA_POLL_ADAPTIVE;
	o->busy_polls = ING_RDMA_DEFAULT_BUSY_POLLS;
	o->busy_us = ING_RDMA_DEFAULT_BUSY_US;
	o->sleep_ms = ING_RDMA_DEFAULT_SLEEP_MS;
	o->chunk_size = ING_RDMA_DEFAULT_CHUNK;
	o->max_conns = ING_RDMA_DEFAULT_MAX_CONNS;
	o->conn_frames = ING_RDMA_DEFAULT_CONN_FRAMES;
	o->park_ms = ING_RDMA_DEFAULT_PARK_MS;
	o->drain_ms = ING_RDMA_DEFAULT_DRAIN_MS;
	o->region = -1;
	o->ops = &ing_rdma_verbs_ops;
	o->grant_ms = ING_RDMA_DEFAULT_GRANT_MS;
	o->recv_depth = ING_RDMA_DEFAULT_RECV_DEPTH;
}

static inline void held_add(struct ing_rdma_lcore *lc, int d)
{
	__atomic_fetch_add(&lc->held, (unsigned)d, __ATOMIC_RELAXED);
}

unsigned ing_rdma_lcore_frames_held(const struct ing_rdma_lcore *lc)
{
	return lc ? __atomic_load_n(&lc->held, __ATOMIC_RELAXED) : 0;
}

/* ---------------------------------------------------------------- messages to control, hand-off */

/*
 * A message to control. Control's mailbox cannot be full: it holds three messages per
 * pool slot (GRANTED, RECEIVED, DONE: at most so many of a frame wait there at once), two
 * per connection and room for calls (control/node/node.c sizes it from the pool); a
 * refusal would be a sizing bug: counted, logged, lost.
 */
static void to_control(struct ing_rdma_lcore *lc, const struct ing_msg *m)
{
	if (ing_mbox_post(lc->io.ctl, m) == 0) {
		if (m->kind == ING_EV_DONE || m->kind == ING_EV_PART_IN)
			held_add(lc, -1);   /* the frame (or part) is not the lcore's any more */
		return;
	}
	STAT_ADD(lc, out_dropped, 1);
	ING_LOG_RL(ING_LOG_ERR, COMP, "lcore %u: control's mailbox full: event %u (qp 0x%x) lost",
		   lc->o.lcore_id, m->kind, m->val);
}

/* A received frame to persistence. A worker's mailbox holds every pool slot, so it cannot
 * refuse one; should it, the frame goes back to control failed (retryable). */
static void to_persistence(struct ing_rdma_lcore *lc, struct ing_frame *f)
{
	if (lc->io.deliver(lc->io.arg, f) == 0) {
		held_add(lc, -1);
		return;
	}
	STAT_ADD(lc, backpressure, 1);
	f->status = ING_E_INTERNAL;
	f->retryable = true;
	snprintf(f->msg, sizeof(f->msg), "the persistence mailbox is full (it holds every pool slot)");
	to_control(lc, &(struct ing_msg){ .kind = ING_EV_DONE, .f = f });
}

static uint32_t conn_qp(const struct rdma_conn *c)
{
	return c->qp_num ? c->qp_num : c->old_qp_num;
}

/* Connection events for control: ING_EV_CONN_ERROR (status) or ING_EV_CONN_RELEASED. */
static void conn_event(struct ing_rdma_lcore *lc, uint32_t kind, uint32_t qp_num, int32_t status)
{
	struct ing_msg m = { .kind = kind, .val = qp_num, .u64 = (uint64_t)(uint32_t)status };

	to_control(lc, &m);
}

static void __attribute__((format(printf, 5, 6)))
fail_frame(struct ing_rdma_lcore *lc, struct ing_frame *f, int err, bool retryable, const char *fmt, ...)
{
	va_list ap;

	f->status = err;
	f->retryable = retryable;
	va_start(ap, fmt);
	vsnprintf(f->msg, sizeof(f->msg), fmt, ap);
	va_end(ap);
	STAT_ADD(lc, frames_failed, 1);
	to_control(lc, &(struct ing_msg){ .kind = ING_EV_DONE, .f = f });
}

/* ---------------------------------------------------------------- connections */

static inline uint32_t fifo_count(const struct rdma_conn *c)
{
	return c->f_tail - c->f_head;
}

static void fifo_remove(struct ing_rdma_lcore *lc, struct rdma_conn *c, struct ing_frame *f)
{
	uint32_t i;

	for (i = c->f_head; i != c->f_tail; i++)
		if (c->fifo[i & lc->fmask] == f)
			break;
	if (i == c->f_tail) {
		ING_LOG_RL(ING_LOG_ERR, COMP, "lcore %u qp 0x%x: frame %s not queued on its connection",
			   lc->o.lcore_id, c->qp_num, f->frame_id);
		return;
	}
	if (i == c->f_head) {
		/* the usual case: the oldest frame completed (indices of the others unchanged) */
		c->f_head++;
		if (c->post_idx == i) {
			c->post_idx = c->f_head;
			c->post_off = 0;
		}
		return;
	}
	uint32_t pos = i;
	for (; i + 1 != c->f_tail; i++)
		c->fifo[i & lc->fmask] = c->fifo[(i + 1) & lc->fmask];
	c->f_tail--;
	if (c->post_idx == pos)
		c->post_off = 0;   /* it was being posted: the frame now at pos starts at 0 */
	else if ((int32_t)(c->post_idx - pos) > 0)
		c->post_idx--;
}

static void arm_timer(struct ing_rdma_lcore *lc, uint64_t t)
{
	if (!lc->next_timer_ns || t < lc->next_timer_ns)
		lc->next_timer_ns = t;
}

static struct rdma_conn *conn_by_qp(struct ing_rdma_lcore *lc, uint32_t qp_num)
{
	for (unsigned i = 0; i < lc->nconns; i++) {
		struct rdma_conn *c = &lc->conns[i];
		if (c->state != CONN_FREE && (c->qp_num == qp_num || c->old_qp_num == qp_num))
			return c;
	}
	return NULL;
}

static struct rdma_conn *conn_free_slot(struct ing_rdma_lcore *lc)
{
	for (unsigned i = 0; i < lc->o.max_conns; i++) {
		struct rdma_conn *c = &lc->conns[i];
		if (c->state == CONN_FREE) {
			if (i >= lc->nconns)
				lc->nconns = i + 1;
			return c;
		}
	}
	return NULL;
}

static void conn_reset_progress(struct rdma_conn *c)
{
	c->post_idx = c->f_head;
	c->post_off = 0;
	c->unsig_run = 0;
}

static void conn_free(struct rdma_conn *c)
{
	c->state = CONN_FREE;
	c->gen++;
	c->qp = NULL;
	c->qp_num = c->old_qp_num = 0;
	c->session_id = 0;
	c->unpark = false;
	c->outstanding = 0;
	c->rec_head = c->rec_tail = 0;
	c->f_head = c->f_tail = 0;
	conn_reset_progress(c);
}

/* The QP is no longer used by this lcore: tell control, keep or drop the frames. */
static void push_conn_reset(struct ing_rdma_lcore *lc, struct rdma_conn *c);

static void conn_finish_drain(struct ing_rdma_lcore *lc, struct rdma_conn *c)
{
	if (lc->push)
		push_conn_reset(lc, c);
	conn_event(lc, ING_EV_CONN_RELEASED, conn_qp(c), 0);
	STAT_ADD(lc, conns_released, 1);
	c->gen++; /* any late completion of the old QP is now stale */
	c->qp = NULL;
	if (c->qp_num)
		c->old_qp_num = c->qp_num;
	c->qp_num = 0;
	c->outstanding = 0;
	c->rec_head = c->rec_tail = 0;
	conn_reset_progress(c);
	/* Parked even when empty: jobs for the old QP may still be in the job ring, and the
	 * session's next QP adopts them (and this slot's FIFO order). */
	c->state = CONN_PARKED;
	c->deadline_ns = ing_now_ns() + (c->unpark ? 0 : (uint64_t)lc->o.park_ms * 1000000ull);
	arm_timer(lc, c->deadline_ns);
	if (fifo_count(c) && !c->unpark)
		ING_INFO(COMP, "lcore %u session %llu: %u frame(s) parked for %u ms awaiting reconnect",
			 lc->o.lcore_id, (unsigned long long)c->session_id, fifo_count(c), lc->o.park_ms);
}

static void conn_enter_draining(struct ing_rdma_lcore *lc, struct rdma_conn *c, const char *why)
{
	if (c->state != CONN_ACTIVE)
		return;
	ING_INFO(COMP, "lcore %u qp 0x%x session %llu: %s; %u WR(s) outstanding, %u frame(s) kept",
		 lc->o.lcore_id, c->qp_num, (unsigned long long)c->session_id, why, c->outstanding,
		 fifo_count(c));
	c->state = CONN_DRAINING;
	conn_reset_progress(c);
	STAT_ADD(lc, frames_requeued, fifo_count(c));
	if (!c->outstanding) {
		conn_finish_drain(lc, c);
		return;
	}
	c->deadline_ns = ing_now_ns() + (uint64_t)lc->o.drain_ms * 1000000ull;
	arm_timer(lc, c->deadline_ns);
}

static void conn_fail_all(struct ing_rdma_lcore *lc, struct rdma_conn *c, int err, bool retryable,
			  const char *why)
{
	while (fifo_count(c)) {
		struct ing_frame *f = c->fifo[c->f_head & lc->fmask];
		c->f_head++;
		fail_frame(lc, f, err, retryable, "%s", why);
	}
	conn_reset_progress(c);
}

static void frame_done(struct ing_rdma_lcore *lc, struct rdma_conn *c, struct ing_frame *f);

/* ---------------------------------------------------------------- push (RDMA WRITE) */

/* Receive WRs for WRITE WITH IMM: no SGE, wr_id = connection | 1 (records are aligned). */
static void push_post_recvs(struct ing_rdma_lcore *lc, struct rdma_conn *c, unsigned k)
{
	struct ibv_recv_wr wrs[16], *bad = NULL;

	while (k) {
		unsigned n = k < 16 ? k : 16;
		memset(wrs, 0, n * sizeof(wrs[0]));
		for (unsigned i = 0; i < n; i++) {
			wrs[i].wr_id = (uintptr_t)c | 1u;
			wrs[i].next = i + 1 < n ? &wrs[i + 1] : NULL;
		}
		int rc = lc->ops->post_recv(c->qp, wrs, &bad);
		unsigned ok = rc ? ((bad >= wrs && bad < wrs + n) ? (unsigned)(bad - wrs) : 0) : n;
		c->recvs += ok;
		if (rc) {
			STAT_ADD(lc, post_errors, 1);
			ING_LOG_RL(ING_LOG_ERR, COMP, "lcore %u qp 0x%x session %llu: ibv_post_recv failed: %s (%u of %u posted)",
				   lc->o.lcore_id, c->qp_num, (unsigned long long)c->session_id,
				   strerror(rc), ok, n);
			return;
		}
		k -= n;
	}
}

static void push_mw_put(struct ing_rdma_lcore *lc, struct push_mw *m)
{
	lc->mw_free[lc->nmw_free++] = m;
}

/*
 * A window that may still be bound (its QP died or its bind failed): deallocate it, which
 * ends any remote access through it, and allocate a fresh one in its place. Error path
 * only (two uverbs calls), never per frame on a healthy connection.
 */
static void push_mw_replace(struct ing_rdma_lcore *lc, struct push_mw *m)
{
	if (m->mw && lc->ops->dealloc_mw(m->mw))
		ING_LOG_RL(ING_LOG_WARN, COMP, "lcore %u: ibv_dealloc_mw failed", lc->o.lcore_id);
	m->mw = lc->ops->alloc_mw(lc->pd, IBV_MW_TYPE_2);
	STAT_ADD(lc, push_mw_replaced, 1);
	if (!m->mw) {
		ING_LOG_RL(ING_LOG_ERR, COMP, "lcore %u: ibv_alloc_mw failed: %s; one grant fewer can be in flight",
			   lc->o.lcore_id, strerror(errno));
		return;
	}
	m->rkey = m->mw->rkey;
	push_mw_put(lc, m);
}

/* f gives its window back: unbound (after a completed invalidate) or maybe bound. */
static void push_release_mw(struct ing_rdma_lcore *lc, struct ing_frame *f, bool maybe_bound)
{
	struct push_mw *m = f->grant_mw;

	f->grant_mw = NULL;
	if (!m)
		return;
	if (maybe_bound)
		push_mw_replace(lc, m);
	else
		push_mw_put(lc, m);
}

static void __attribute__((format(printf, 4, 5)))
push_set_fail(struct ing_frame *f, int err, bool retryable, const char *fmt, ...)
{
	va_list ap;

	f->status = err;
	f->retryable = retryable;
	va_start(ap, fmt);
	vsnprintf(f->msg, sizeof(f->msg), fmt, ap);
	va_end(ap);
}

/* The slot is open for the producer: tell control (Ack GRANTED). */
static void push_granted(struct ing_rdma_lcore *lc, struct rdma_conn *c, struct ing_frame *f)
{
	if (++lc->next_grant == 0)
		lc->next_grant = 1;
	f->grant_id = lc->next_grant;
	f->push_state = PS_GRANTED;
	f->grant_deadline_ns = ing_now_ns() + (uint64_t)lc->o.grant_ms * 1000000ull;
	arm_timer(lc, f->grant_deadline_ns);
	STAT_ADD(lc, push_grants, 1);
	to_control(lc, &(struct ing_msg){ .kind = ING_EV_GRANTED, .f = f, .val = f->grant_id,
				   .u64 = (uint64_t)f->grant_rkey << 32 | conn_qp(c) });
}

/* Grant over and remote access ended: hand the frame on (f->status says how). */
static void push_finish(struct ing_rdma_lcore *lc, struct rdma_conn *c, struct ing_frame *f)
{
	push_release_mw(lc, f, false);
	f->grant_id = 0;
	if (f->status == ING_E_NONE) {
		frame_done(lc, c, f);
		return;
	}
	fifo_remove(lc, c, f);
	STAT_ADD(lc, frames_failed, 1);
	to_control(lc, &(struct ing_msg){ .kind = ING_EV_DONE, .f = f });
}

/* Post the invalidate of f's window. 0; -ENOSPC (window full: retried from conn_post);
 * -EIO (post failed: the connection is draining). */
static int push_post_inv(struct ing_rdma_lcore *lc, struct rdma_conn *c, struct ing_frame *f)
{
	struct push_mw *m = f->grant_mw;
	struct ibv_send_wr wr, *bad = NULL;

	if (c->outstanding >= c->plan.limit)
		return -ENOSPC;
	struct rdma_rec *rec = &c->recs[c->rec_head & (REC_CAP - 1)];
	rec->f = f;
	rec->c = c;
	rec->len = 0;
	rec->gen = c->gen;
	rec->flags = REC_LAST | REC_INV | REC_SIGNALED;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = (uintptr_t)rec;
	wr.opcode = IBV_WR_LOCAL_INV;
	wr.invalidate_rkey = m->rkey;
	wr.send_flags = IBV_SEND_SIGNALED;
	int rc = lc->ops->post_send(c->qp, &wr, &bad);
	if (rc) {
		STAT_ADD(lc, post_errors, 1);
		ING_LOG_RL(ING_LOG_ERR, COMP, "lcore %u qp 0x%x session %llu frame %s: posting the invalidate failed: %s",
			   lc->o.lcore_id, c->qp_num, (unsigned long long)c->session_id, f->frame_id,
			   strerror(rc));
		conn_event(lc, ING_EV_CONN_ERROR, conn_qp(c), 0);
		conn_enter_draining(lc, c, "post_send (invalidate) failed");
		return -EIO;
	}
	c->rec_head++;
	c->outstanding++;
	c->unsig_run = 0;
	f->push_state = PS_INV;
	return 0;
}

/* The grant of f ends (written, wrong length or expired; f->status set): close the window,
 * then finish. MR mode: nothing to close. */
static void push_end(struct ing_rdma_lcore *lc, struct rdma_conn *c, struct ing_frame *f)
{
	if (!f->grant_mw) {
		push_finish(lc, c, f);
		return;
	}
	if (push_post_inv(lc, c, f) == -ENOSPC) {
		f->push_state = PS_INV_WAIT;
		c->inv_wait++;
	}
}

/* Invalidates that waited for room in the send window. Returns WRs posted. */
static unsigned push_post_waiting(struct ing_rdma_lcore *lc, struct rdma_conn *c)
{
	unsigned n = 0;

	for (uint32_t i = c->f_head; i != c->f_tail && c->inv_wait; i++) {
		struct ing_frame *f = c->fifo[i & lc->fmask];
		if (!f->push || f->push_state != PS_INV_WAIT)
			continue;
		int rc = push_post_inv(lc, c, f);
		if (rc)
			break;
		c->inv_wait--;
		n++;
	}
	return n;
}

/* A WRITE WITH IMM (or a flushed receive) on connection c. */
static void push_recv(struct ing_rdma_lcore *lc, const struct ibv_wc *wc)
{
	struct rdma_conn *c = (struct rdma_conn *)(uintptr_t)(wc->wr_id & ~(uint64_t)1);

	if (c->state != CONN_ACTIVE || wc->qp_num != c->qp_num) {
		STAT_ADD(lc, wc_flushed, 1);   /* a flushed receive of a QP already given up */
		return;
	}
	if (c->recvs)
		c->recvs--;
	if (wc->status != IBV_WC_SUCCESS) {
		if (wc->status == IBV_WC_WR_FLUSH_ERR)
			STAT_ADD(lc, wc_flushed, 1);
		else
			STAT_ADD(lc, wc_errors, 1);
		ING_LOG_RL(wc->status == IBV_WC_WR_FLUSH_ERR ? ING_LOG_INFO : ING_LOG_WARN, COMP,
			   "lcore %u qp 0x%x session %llu: receive completion %s (vendor_err 0x%x): the QP is in error (disconnected, or a write outside its grant); grants kept for a reconnect",
			   lc->o.lcore_id, c->qp_num, (unsigned long long)c->session_id,
			   ibv_wc_status_str(wc->status), wc->vendor_err);
		conn_event(lc, ING_EV_CONN_ERROR, conn_qp(c), (int32_t)wc->status);
		conn_enter_draining(lc, c, ibv_wc_status_str(wc->status));
		return;
	}
	STAT_ADD(lc, push_recvs, 1);
	push_post_recvs(lc, c, 1);
	if (wc->opcode != IBV_WC_RECV_RDMA_WITH_IMM || !(wc->wc_flags & IBV_WC_WITH_IMM)) {
		STAT_ADD(lc, push_grant_errors, 1);
		ING_LOG_RL(ING_LOG_WARN, COMP, "lcore %u qp 0x%x session %llu: a SEND (opcode %d) where only RDMA WRITE WITH IMM is expected: ignored",
			   lc->o.lcore_id, c->qp_num, (unsigned long long)c->session_id, (int)wc->opcode);
		return;
	}
	uint32_t gid = be32toh(wc->imm_data);
	struct ing_frame *f = NULL;
	for (uint32_t i = c->f_head; i != c->f_tail; i++) {
		struct ing_frame *x = c->fifo[i & lc->fmask];
		if (x->push && x->push_state == PS_GRANTED && x->grant_id == gid) {
			f = x;
			break;
		}
	}
	if (!f) {
		STAT_ADD(lc, push_grant_errors, 1);
		ING_LOG_RL(ING_LOG_WARN, COMP, "lcore %u qp 0x%x session %llu: RDMA WRITE (%u bytes) names grant %u, which is not open on this connection (stale or unknown): ignored; the frame it wrote into fails when its grant expires",
			   lc->o.lcore_id, c->qp_num, (unsigned long long)c->session_id, wc->byte_len, gid);
		return;
	}
	if (wc->byte_len != f->length) {
		STAT_ADD(lc, push_grant_errors, 1);
		ING_LOG_RL(ING_LOG_WARN, COMP, "lcore %u qp 0x%x session %llu frame %s: RDMA WRITE of %u bytes for a grant of %llu: failing this frame",
			   lc->o.lcore_id, c->qp_num, (unsigned long long)c->session_id, f->frame_id,
			   wc->byte_len, (unsigned long long)f->length);
		push_set_fail(f, ING_E_INVALID_ARGUMENT, false,
			      "RDMA WRITE of %u bytes for grant %u of %llu bytes", wc->byte_len, gid,
			      (unsigned long long)f->length);
	} else {
		f->status = ING_E_NONE;
		f->filled = f->length;
		STAT_ADD(lc, push_frames_ok, 1);
	}
	push_end(lc, c, f);
}

/* Grants past their deadline fail (retryable): the producer never wrote them. */
static void push_timers(struct ing_rdma_lcore *lc, struct rdma_conn *c, uint64_t now)
{
	struct ing_frame *exp[ING_RDMA_CQ_BURST];
	unsigned n = 0;

	for (uint32_t i = c->f_head; i != c->f_tail; i++) {
		struct ing_frame *f = c->fifo[i & lc->fmask];
		if (!f->push || f->push_state != PS_GRANTED)
			continue;
		if (now >= f->grant_deadline_ns && n < ING_RDMA_CQ_BURST)
			exp[n++] = f;
		else
			arm_timer(lc, now >= f->grant_deadline_ns ? now : f->grant_deadline_ns);
	}
	for (unsigned k = 0; k < n && c->state == CONN_ACTIVE; k++) {
		struct ing_frame *f = exp[k];
		STAT_ADD(lc, push_grant_errors, 1);
		ING_LOG_RL(ING_LOG_WARN, COMP, "lcore %u qp 0x%x session %llu frame %s: grant %u not written within %u ms: failing this frame",
			   lc->o.lcore_id, c->qp_num, (unsigned long long)c->session_id, f->frame_id,
			   f->grant_id, lc->o.grant_ms);
		push_set_fail(f, ING_E_DEADLINE, true, "grant %u not written within %u ms",
			      f->grant_id, lc->o.grant_ms);
		push_end(lc, c, f);
	}
}

/*
 * The QP of c is gone: windows bound on it are deallocated (remote access ends), grants
 * whose write was already judged finish now, the others wait for the session's next QP
 * (bound again, announced with a new grant id).
 */
static void push_conn_reset(struct ing_rdma_lcore *lc, struct rdma_conn *c)
{
	struct ing_frame *judged[256];
	unsigned n = 0;

	c->recvs = 0;
	c->inv_wait = 0;
	for (uint32_t i = c->f_head; i != c->f_tail; i++) {
		struct ing_frame *f = c->fifo[i & lc->fmask];
		if (!f->push)
			continue;
		push_release_mw(lc, f, true);
		if ((f->push_state == PS_INV || f->push_state == PS_INV_WAIT) && n < 256) {
			judged[n++] = f;
			continue;
		}
		f->push_state = PS_NEW;
		f->grant_id = 0;
	}
	for (unsigned k = 0; k < n; k++)
		push_finish(lc, c, judged[k]);
}

/* attach / detach, as control posted them on the lcore's mailbox */
struct rdma_cmd {
	struct ibv_qp *qp;
	uint32_t qp_num;
	uint64_t session_id;
	uint32_t rd_atom;
	uint32_t sq_depth;
};

static void cmd_attach(struct ing_rdma_lcore *lc, const struct rdma_cmd *m)
{
	struct rdma_conn *c = NULL, *old = NULL;

	/* the session's previous connection: one holding frames first (parked, or still
	 * flushing), else an empty parked one (late jobs may name its QP) */
	for (unsigned i = 0; i < lc->nconns; i++) {
		struct rdma_conn *x = &lc->conns[i];
		if (x->session_id != m->session_id ||
		    (x->state != CONN_PARKED && x->state != CONN_DRAINING))
			continue;
		if (fifo_count(x)) {
			old = x;
			break;
		}
		if (!old && x->state == CONN_PARKED)
			old = x;
	}
	if (old && old->state == CONN_PARKED) {
		c = old; /* adopt the slot, its frames and its FIFO order */
	} else {
		c = conn_free_slot(lc);
		if (!c) {
			ING_ERR(COMP, "lcore %u: no free connection slot (max %u) for qp 0x%x session %llu",
				lc->o.lcore_id, lc->o.max_conns, m->qp_num,
				(unsigned long long)m->session_id);
			conn_event(lc, ING_EV_CONN_ERROR, m->qp_num, 0);
			conn_event(lc, ING_EV_CONN_RELEASED, m->qp_num, 0);
			return;
		}
		c->f_head = c->f_tail = 0;
		c->old_qp_num = 0;
		if (old) { /* old QP still flushing: move its frames over, in order */
			while (fifo_count(old)) {
				c->fifo[c->f_tail++ & lc->fmask] = old->fifo[old->f_head++ & lc->fmask];
			}
			conn_reset_progress(old);
			c->old_qp_num = old->qp_num;
		}
	}
	c->gen++;
	c->state = CONN_ACTIVE;
	c->unpark = false;
	c->qp = m->qp;
	c->qp_num = m->qp_num;
	c->session_id = m->session_id;
	c->outstanding = 0;
	c->rec_head = c->rec_tail = 0;
	c->deadline_ns = 0;
	conn_reset_progress(c);
	unsigned sq = m->sq_depth ? m->sq_depth : ING_RDMA_DEFAULT_SQ_DEPTH;
	if (sq > REC_CAP)
		sq = REC_CAP;
	(void)ing_rdma_plan_init(&c->plan, lc->o.chunk_size, lc->o.max_msg_sz, m->rd_atom, sq);
	c->recvs = 0;
	c->inv_wait = 0;
	if (lc->push)
		push_post_recvs(lc, c, lc->o.recv_depth);
	STAT_ADD(lc, conns_attached, 1);
	ING_INFO(COMP, "lcore %u: qp 0x%x session %llu attached (chunk %u, window %u, signal every %u%s)",
		 lc->o.lcore_id, c->qp_num, (unsigned long long)c->session_id, c->plan.chunk,
		 c->plan.limit, c->plan.sig_every,
		 fifo_count(c) ? ", re-reading parked frames" : "");
}

static void cmd_detach(struct ing_rdma_lcore *lc, const struct rdma_cmd *m)
{
	struct rdma_conn *c = conn_by_qp(lc, m->qp_num);

	if (!c || c->qp_num != m->qp_num) {
		/* unknown, or already released: control still waits for the release */
		if (!c)
			conn_event(lc, ING_EV_CONN_RELEASED, m->qp_num, 0);
		return;
	}
	conn_enter_draining(lc, c, "detached by control");
}

/* ING_EV_UNPARK: the parked (and still draining) connections of session_id (0: all). */
static void cmd_unpark(struct ing_rdma_lcore *lc, uint64_t session_id)
{
	uint64_t now = ing_now_ns();

	for (unsigned i = 0; i < lc->nconns; i++) {
		struct rdma_conn *c = &lc->conns[i];
		if ((session_id && c->session_id != session_id) ||
		    (c->state != CONN_PARKED && c->state != CONN_DRAINING))
			continue;
		c->unpark = true;
		if (c->state == CONN_PARKED) {
			c->deadline_ns = now;
			arm_timer(lc, now);
		}
	}
}

/* ---------------------------------------------------------------- posting */

/* The bind WR of f's grant (n-th of the batch): a free window over exactly its slot, remote
 * write, under the window's next key. */
static void wr_bind(struct ing_rdma_lcore *lc, struct rdma_conn *c, struct ing_frame *f,
		    struct ibv_send_wr *wr, unsigned n)
{
	struct push_mw *mw = lc->mw_free[--lc->nmw_free];
	struct rdma_rec *rec = &c->recs[(c->rec_head + n) & (REC_CAP - 1)];
	uint32_t key = ibv_inc_rkey(mw->rkey);

	rec->f = f;
	rec->c = c;
	rec->len = 0;
	rec->gen = c->gen;
	rec->flags = REC_BIND | REC_SIGNALED;
	memset(wr, 0, sizeof(*wr));
	wr->wr_id = (uintptr_t)rec;
	wr->opcode = IBV_WR_BIND_MW;
	wr->send_flags = IBV_SEND_SIGNALED;
	wr->bind_mw.mw = mw->mw;
	wr->bind_mw.rkey = key;
	wr->bind_mw.bind_info.mr = f->part_of ? (struct ibv_mr *)f->part_mr : lc->mrs[f->cls];
	wr->bind_mw.bind_info.addr = (uintptr_t)f->buf;
	wr->bind_mw.bind_info.length = f->length;
	wr->bind_mw.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_WRITE;
	mw->rkey = key;
	f->grant_mw = mw;
	f->grant_rkey = key;
	f->push_state = PS_BINDING;
	c->unsig_run = 0;
	c->post_idx++;
	c->post_off = 0;
}

/* The READ WR of f's next chunk (n-th of the batch), signaled as the plan says; moves the
 * connection's post position. Returns the chunk's bytes. */
static uint32_t wr_read(struct rdma_conn *c, struct ing_frame *f, uint32_t lkey,
			struct ibv_send_wr *wr, struct ibv_sge *sge, unsigned n)
{
	uint64_t off = c->post_off, left = f->length - off;
	uint32_t len = left < c->plan.chunk ? (uint32_t)left : c->plan.chunk;
	bool last = off + len == f->length;
	bool sig = ing_rdma_plan_signal(&c->plan, last, c->unsig_run, c->outstanding + n + 1);
	struct rdma_rec *rec = &c->recs[(c->rec_head + n) & (REC_CAP - 1)];

	rec->f = f;
	rec->c = c;
	rec->len = len;
	rec->gen = c->gen;
	rec->flags = (last ? REC_LAST : 0) | (sig ? REC_SIGNALED : 0);
	sge->addr = (uintptr_t)f->buf + off;
	sge->length = len;
	sge->lkey = lkey;
	memset(wr, 0, sizeof(*wr));
	wr->wr_id = (uintptr_t)rec;
	wr->sg_list = sge;
	wr->num_sge = 1;
	wr->opcode = IBV_WR_RDMA_READ;
	wr->send_flags = sig ? IBV_SEND_SIGNALED : 0;
	wr->wr.rdma.remote_addr = f->raddr + off;
	wr->wr.rdma.rkey = f->rkey;
	c->unsig_run = sig ? 0 : c->unsig_run + 1;
	if (last) {
		c->post_idx++;
		c->post_off = 0;
	} else {
		c->post_off = off + len;
	}
	return len;
}

static unsigned conn_post(struct ing_rdma_lcore *lc, struct rdma_conn *c)
{
	struct ibv_send_wr wrs[ING_RDMA_POST_BURST], *bad = NULL;
	struct ibv_sge sges[ING_RDMA_POST_BURST];
	unsigned n = 0, nreads = 0;
	uint64_t bytes = 0;

	if (c->inv_wait) {
		unsigned k = push_post_waiting(lc, c);
		if (c->state != CONN_ACTIVE)
			return k;
		n = 0;
	}
	while (c->post_idx != c->f_tail && c->outstanding + n < c->plan.limit &&
	       n < ING_RDMA_POST_BURST) {
		struct ing_frame *f = c->fifo[c->post_idx & lc->fmask];
		if (f->push) {
			if (f->push_state != PS_NEW) {
				c->post_idx++;
				c->post_off = 0;
				continue;
			}
			if (!lc->nmw) {          /* MR mode: the pool MR's rkey, granted now */
				f->grant_rkey = f->part_of ? ((struct ibv_mr *)f->part_mr)->rkey :
						f->cls < lc->nmr ? lc->mrs[f->cls]->rkey : 0;
				c->post_idx++;
				c->post_off = 0;
				push_granted(lc, c, f);
				continue;
			}
			if (!lc->nmw_free)
				break;           /* every window is in a grant: wait for one */
			wr_bind(lc, c, f, &wrs[n], n);
			if (n)
				wrs[n - 1].next = &wrs[n];
			n++;
			continue;
		}
		uint32_t lkey = f->part_of ? f->part_lkey :
				lc->nlkeys && f->cls < lc->nlkeys ? lc->lkeys[f->cls] : 0;
		bytes += wr_read(c, f, lkey, &wrs[n], &sges[n], n);
		if (n)
			wrs[n - 1].next = &wrs[n];
		nreads++;
		n++;
	}
	if (!n)
		return 0;
	int rc = lc->ops->post_send(c->qp, wrs, &bad);
	unsigned posted = rc ? ((bad >= wrs && bad < wrs + n) ? (unsigned)(bad - wrs) : 0) : n;
	/* the provider names a window by its current rkey (ibv_mw.rkey, read at post time):
	 * after a posted bind, that is the key the bind gave it */
	for (unsigned i = 0; i < posted; i++)
		if (wrs[i].opcode == IBV_WR_BIND_MW)
			wrs[i].bind_mw.mw->rkey = wrs[i].bind_mw.rkey;
	if (rc) {
		unsigned ok = posted;
		STAT_ADD(lc, post_errors, 1);
		ING_LOG_RL(ING_LOG_ERR, COMP, "lcore %u qp 0x%x session %llu: ibv_post_send failed: %s (%u of %u WRs posted)",
			   lc->o.lcore_id, c->qp_num, (unsigned long long)c->session_id, strerror(rc), ok, n);
		c->rec_head += ok;
		c->outstanding += ok;
		STAT_ADD(lc, reads_posted, ok < nreads ? ok : nreads);
		conn_event(lc, ING_EV_CONN_ERROR, conn_qp(c), 0);
		conn_enter_draining(lc, c, "post_send failed");
		return n;
	}
	c->rec_head += n;
	c->outstanding += n;
	STAT_ADD(lc, reads_posted, nreads);
	STAT_ADD(lc, bytes_posted, bytes);
	return n;
}

/* ---------------------------------------------------------------- completions */

static void frame_done(struct ing_rdma_lcore *lc, struct rdma_conn *c, struct ing_frame *f)
{
	fifo_remove(lc, c, f);
	f->status = ING_E_NONE;
	f->filled = f->length;
	f->t_received_ns = ing_now_ns();
	STAT_ADD(lc, bytes_received, f->length);
	if (f->part_of) {
		/* a part of a striped frame: its owner (control) gathers the parts and hands the
		 * frame to persistence once every one is in */
		STAT_ADD(lc, parts_ok, 1);
		to_control(lc, &(struct ing_msg){ .kind = ING_EV_PART_IN, .f = f });
		return;
	}
	STAT_ADD(lc, frames_ok, 1);
	/* RECEIVED on control's mailbox first, then the frame to persistence, whose DONE comes
	 * later on the same mailbox: control sees a frame's stages in order */
	to_control(lc, &(struct ing_msg){ .kind = ING_EV_RECEIVED, .f = f });
	to_persistence(lc, f);
}

/* Retire records [rec_tail, upto) that completed successfully. */
static void retire_ok(struct ing_rdma_lcore *lc, struct rdma_conn *c, uint32_t upto)
{
	while (c->rec_tail != upto) {
		struct rdma_rec *rec = &c->recs[c->rec_tail & (REC_CAP - 1)];
		c->rec_tail++;
		c->outstanding--;
		if (rec->flags & REC_BIND) {
			if (rec->f->push_state == PS_BINDING)
				push_granted(lc, c, rec->f);
		} else if (rec->flags & REC_INV) {
			push_finish(lc, c, rec->f);
		} else if (rec->flags & REC_LAST) {
			frame_done(lc, c, rec->f);
		}
	}
}

/* The frame's own descriptor is wrong (rkey, address, length): fail it, not the others. */
static bool wc_frame_fault(enum ibv_wc_status s)
{
	return s == IBV_WC_REM_ACCESS_ERR || s == IBV_WC_REM_INV_REQ_ERR ||
	       s == IBV_WC_MW_BIND_ERR || s == IBV_WC_LOC_PROT_ERR || s == IBV_WC_LOC_LEN_ERR || s == IBV_WC_REM_OP_ERR ||
	       s == IBV_WC_LOC_ACCESS_ERR;
}

static void handle_wc(struct ing_rdma_lcore *lc, const struct ibv_wc *wc)
{
	if (wc->wr_id & 1u) {   /* receive WRs are counted apart (push_recvs, wc_flushed); their
				 * wr_id is a tagged value, never a record to dereference */
		push_recv(lc, wc);
		return;
	}
	struct rdma_rec *rec = (struct rdma_rec *)(uintptr_t)wc->wr_id;
	struct rdma_conn *c = rec ? rec->c : NULL;
	STAT_ADD(lc, completions, 1);
	if (!c || rec->gen != c->gen || (c->state != CONN_ACTIVE && c->state != CONN_DRAINING)) {
		STAT_ADD(lc, wc_stale, 1);
		return;
	}
	uint32_t idx = (uint32_t)(rec - c->recs);
	uint32_t r = c->rec_tail + ((idx - c->rec_tail) & (REC_CAP - 1));
	if (r - c->rec_tail >= c->rec_head - c->rec_tail) {
		STAT_ADD(lc, wc_stale, 1);
		return;
	}
	if (c->state == CONN_DRAINING) {
		/* flushes (or late successes) of a QP we gave up on: only the SQ slots matter */
		if (wc->status != IBV_WC_SUCCESS)
			STAT_ADD(lc, wc_flushed, 1);
		c->outstanding -= r + 1 - c->rec_tail;
		c->rec_tail = r + 1;
		if (!c->outstanding)
			conn_finish_drain(lc, c);
		return;
	}
	if (wc->status == IBV_WC_SUCCESS) {
		retire_ok(lc, c, r + 1);
		return;
	}
	/* First error on this QP: everything before it succeeded (RC completes in order). */
	retire_ok(lc, c, r);
	c->rec_tail++;
	c->outstanding--;
	STAT_ADD(lc, wc_errors, 1);
	struct ing_frame *f = rec->f;
	if (wc->status == IBV_WC_WR_FLUSH_ERR) {
		ING_LOG_RL(ING_LOG_WARN, COMP, "lcore %u qp 0x%x session %llu: READ flushed (QP already in error)",
			   lc->o.lcore_id, c->qp_num, (unsigned long long)c->session_id);
	} else if (f->push && wc_frame_fault(wc->status)) {
		ING_LOG_RL(ING_LOG_WARN, COMP, "lcore %u qp 0x%x session %llu frame %s: %s failed: %s (vendor_err 0x%x); failing this frame",
			   lc->o.lcore_id, c->qp_num, (unsigned long long)c->session_id, f->frame_id,
			   rec->flags & REC_BIND ? "memory window bind" : "invalidate",
			   ibv_wc_status_str(wc->status), wc->vendor_err);
		fifo_remove(lc, c, f);
		push_release_mw(lc, f, true);
		fail_frame(lc, f, ING_E_INTERNAL, true, "push grant: %s failed: %s",
			   rec->flags & REC_BIND ? "memory window bind" : "invalidate",
			   ibv_wc_status_str(wc->status));
	} else if (wc_frame_fault(wc->status)) {
		ING_LOG_RL(ING_LOG_WARN, COMP, "lcore %u qp 0x%x session %llu frame %s: READ failed: %s (vendor_err 0x%x); failing this frame, reconnecting for the others",
			   lc->o.lcore_id, c->qp_num, (unsigned long long)c->session_id,
			   f->frame_id, ibv_wc_status_str(wc->status), wc->vendor_err);
		fifo_remove(lc, c, f);
		fail_frame(lc, f, ING_E_TRANSFER, false, "RDMA READ failed: %s (bad addr/rkey/length?)",
			   ibv_wc_status_str(wc->status));
	} else {
		ING_LOG_RL(ING_LOG_WARN, COMP, "lcore %u qp 0x%x session %llu frame %s: READ failed: %s (vendor_err 0x%x); connection lost, frames kept for a reconnect",
			   lc->o.lcore_id, c->qp_num, (unsigned long long)c->session_id,
			   f->frame_id, ibv_wc_status_str(wc->status), wc->vendor_err);
	}
	conn_event(lc, ING_EV_CONN_ERROR, conn_qp(c), (int32_t)wc->status);
	conn_enter_draining(lc, c, ibv_wc_status_str(wc->status));
}

/* ---------------------------------------------------------------- timers */

static void run_timers(struct ing_rdma_lcore *lc, uint64_t now)
{
	lc->next_timer_ns = 0;
	for (unsigned i = 0; i < lc->nconns; i++) {
		struct rdma_conn *c = &lc->conns[i];
		if (lc->push && c->state == CONN_ACTIVE)
			push_timers(lc, c, now);
		if (c->state == CONN_DRAINING) {
			if (now >= c->deadline_ns) {
				ING_WARN(COMP, "lcore %u qp 0x%x: %u WR(s) never flushed in %u ms; releasing the QP anyway",
					 lc->o.lcore_id, c->qp_num, c->outstanding, lc->o.drain_ms);
				conn_finish_drain(lc, c);
			} else {
				arm_timer(lc, c->deadline_ns);
			}
		}
		if (c->state == CONN_PARKED) {
			if (now >= c->deadline_ns && !fifo_count(c)) {
				conn_free(c);
			} else if (now >= c->deadline_ns && c->unpark) {
				ING_WARN(COMP, "lcore %u session %llu: failing %u parked frame(s) at once: the "
					 "rail's link is down (the producer moves them over another rail)",
					 lc->o.lcore_id, (unsigned long long)c->session_id, fifo_count(c));
				conn_fail_all(lc, c, ING_E_TRANSFER, true,
					      "RDMA connection lost with its rail's link down: the frame moves "
					      "over another rail");
				conn_free(c);
			} else if (now >= c->deadline_ns) {
				char why[ING_FRAME_MSG_MAX];
				snprintf(why, sizeof(why),
					 "RDMA connection lost and the producer did not reconnect within %u ms",
					 lc->o.park_ms);
				ING_WARN(COMP, "lcore %u session %llu: failing %u parked frame(s): no reconnect in %u ms",
					 lc->o.lcore_id, (unsigned long long)c->session_id, fifo_count(c),
					 lc->o.park_ms);
				conn_fail_all(lc, c, ING_E_TRANSFER, true, why);
				conn_free(c);
			} else {
				arm_timer(lc, c->deadline_ns);
			}
		}
	}
}

/* ---------------------------------------------------------------- the pass */

static void take_job(struct ing_rdma_lcore *lc, struct ing_frame *f)
{
	struct rdma_conn *c = conn_by_qp(lc, f->qp_num);

	held_add(lc, 1);
	if (c && c->state != CONN_ACTIVE) {
		/* a job for a QP that died: the session may already have its next QP */
		for (unsigned k = 0; k < lc->nconns; k++)
			if (lc->conns[k].state == CONN_ACTIVE &&
			    lc->conns[k].session_id == c->session_id) {
				c = &lc->conns[k];
				break;
			}
	}
	if (!c) {
		STAT_ADD(lc, jobs_rejected, 1);
		fail_frame(lc, f, ING_E_NO_TRANSPORT, true, "no RDMA connection for this frame (qp gone)");
		return;
	}
	if (fifo_count(c) > lc->fmask) {
		STAT_ADD(lc, jobs_rejected, 1);
		fail_frame(lc, f, ING_E_BUSY, true, "too many frames queued on this RDMA connection");
		return;
	}
	if (!f->length || f->length > f->cap) {
		STAT_ADD(lc, jobs_rejected, 1);
		fail_frame(lc, f, ING_E_INVALID_ARGUMENT, false, "READ job length %llu outside slot (cap %llu)",
			   (unsigned long long)f->length, (unsigned long long)f->cap);
		return;
	}
	if (lc->o.region >= 0 && f->region != lc->o.region && !f->part_of) {
		/* its lkeys are its rail's region's: never post a slot of another region (a
		 * part of a striped frame carries the lkey its rail registered that slot with) */
		STAT_ADD(lc, jobs_rejected, 1);
		fail_frame(lc, f, ING_E_INTERNAL, true, "slot in pool region %u, but this lcore's rail "
			   "registered region %d only", f->region, lc->o.region);
		return;
	}
	f->filled = 0;
	c->fifo[c->f_tail++ & lc->fmask] = f;
	if (c->state == CONN_PARKED || c->state == CONN_DRAINING)
		STAT_ADD(lc, frames_requeued, 1);
}

static void on_mail(void *ctx, const struct ing_msg *m)
{
	struct ing_rdma_lcore *lc = ctx;

	switch (m->kind) {
	case ING_EV_JOB:
		take_job(lc, m->f);
		break;
	case ING_EV_ATTACH: {
		struct ibv_qp *qp = m->arg;
		struct rdma_cmd a = { .qp = qp, .qp_num = qp->qp_num, .session_id = m->u64,
				      .rd_atom = m->val >> 16, .sq_depth = m->val & 0xffffu };
		cmd_attach(lc, &a);
		break;
	}
	case ING_EV_DETACH:
		cmd_detach(lc, &(struct rdma_cmd){ .qp_num = m->val });
		break;
	case ING_EV_UNPARK:
		cmd_unpark(lc, m->u64);
		break;
	default:
		ING_LOG_RL(ING_LOG_ERR, COMP, "lcore %u: unknown message %u ignored", lc->o.lcore_id, m->kind);
		break;
	}
}

/* The lcore's mailbox, in order, as far as its connections have room for the frames it
 * brings. */
static unsigned take_mail(struct ing_rdma_lcore *lc)
{
	unsigned held = ing_rdma_lcore_frames_held(lc);
	unsigned room = held < lc->frames_max ? lc->frames_max - held : 0;
	unsigned max = room < ING_RDMA_CQ_BURST ? room : ING_RDMA_CQ_BURST;

	return max ? ing_mbox_run(lc->in, max, on_mail, lc) : 0;
}

int ing_rdma_lcore_poll(struct ing_rdma_lcore *lc)
{
	struct ibv_wc wc[ING_RDMA_CQ_BURST];
	unsigned work = 0;

	STAT_ADD(lc, polls, 1);
	work += take_mail(lc);
	for (unsigned i = 0; i < lc->nconns; i++) {
		struct rdma_conn *c = &lc->conns[i];
		if (c->state == CONN_ACTIVE && (c->post_idx != c->f_tail || c->inv_wait))
			work += conn_post(lc, c);
	}
	int n = lc->ops->poll_cq(lc->cq, ING_RDMA_CQ_BURST, wc);
	if (n < 0) {
		ING_LOG_RL(ING_LOG_ERR, COMP, "lcore %u: ibv_poll_cq failed: %d", lc->o.lcore_id, n);
	} else {
		for (int i = 0; i < n; i++)
			handle_wc(lc, &wc[i]);
		work += (unsigned)n;
		/* a completion freed window slots: post again in the same pass */
		if (n)
			for (unsigned i = 0; i < lc->nconns; i++) {
				struct rdma_conn *c = &lc->conns[i];
				if (c->state == CONN_ACTIVE && (c->post_idx != c->f_tail || c->inv_wait))
					work += conn_post(lc, c);
			}
	}
	if (lc->next_timer_ns) {
		uint64_t now = ing_now_ns();
		if (now >= lc->next_timer_ns)
			run_timers(lc, now);
	}
	return (int)work;
}

int ing_rdma_lcore_step(struct ing_rdma_lcore *lc)
{
	uint64_t t0 = ing_now_ns();
	int n = ing_rdma_lcore_poll(lc);

	if (n > 0) {
		STAT_ADD(lc, busy_ns, ing_now_ns() - t0);
		lc->idle = 0;
		return n;
	}
	STAT_ADD(lc, idle_polls, 1);
	if (lc->o.mode == ING_RDMA_POLL_BUSY) {
		rte_pause();   /* x86 PAUSE, aarch64 YIELD: DPDK picks the architecture's */
		return 0;
	}
	if (++lc->idle == 1)
		lc->idle_t0 = t0;
	/* Spin for busy_polls passes or busy_us, whichever ends first: with READs in flight
	 * the next completion is a whole chunk away (~100 us on a 100 Gb/s NIC, ms on
	 * Soft-RoCE), and a spinning lcore takes the core from persistence, control and, on
	 * rxe, the kernel's own packet processing. The CQ event wakes us for the next one. */
	if (lc->idle < lc->o.busy_polls &&
	    !(lc->o.busy_us && lc->idle >= ING_RDMA_MIN_IDLE_POLLS &&
	      t0 - lc->idle_t0 >= (uint64_t)lc->o.busy_us * 1000ull)) {
		rte_pause();   /* x86 PAUSE, aarch64 YIELD: DPDK picks the architecture's */
		return 0;
	}
	if (!lc->armed) {
		int rc = lc->ops->req_notify_cq(lc->cq, 0);
		if (rc) {
			ING_LOG_RL(ING_LOG_ERR, COMP, "lcore %u: ibv_req_notify_cq failed: %s",
				   lc->o.lcore_id, strerror(rc));
		} else {
			lc->armed = true;
			STAT_ADD(lc, arms, 1);
		}
	}
	/* A completion that arrived between the last poll and the arm raised no event. */
	t0 = ing_now_ns();
	n = ing_rdma_lcore_poll(lc);
	if (n > 0) {
		STAT_ADD(lc, busy_ns, ing_now_ns() - t0);
		lc->idle = 0;
		return n;
	}
	int timeout = lc->o.sleep_ms;
	if (lc->next_timer_ns) {
		uint64_t now = ing_now_ns();
		int64_t ms = lc->next_timer_ns > now ? (int64_t)((lc->next_timer_ns - now) / 1000000ull) + 1 : 0;
		if (ms < timeout)
			timeout = (int)ms;
	}
	/* the mailbox's doorbell, re-armed: a message posted from here on rings it */
	if (!ing_mbox_idle(lc->in))
		return 0;                    /* mail came in meanwhile: the next pass takes it */
	/* asleep on two fds: the mailbox (everything other threads say) and, when armed, the
	 * CQ's completion channel (what the device says) */
	struct pollfd pfd[2];
	int nfd = 0, i_ch = -1, i_mb;
	if (lc->armed && lc->ch_fd >= 0) {
		i_ch = nfd;
		pfd[nfd++] = (struct pollfd){ .fd = lc->ch_fd, .events = POLLIN };
	}
	i_mb = nfd;
	pfd[nfd++] = (struct pollfd){ .fd = ing_mbox_fd(lc->in), .events = POLLIN };
	if (__atomic_load_n(&lc->stop, __ATOMIC_ACQUIRE))
		return 0;
	STAT_ADD(lc, sleeps, 1);
	int r = poll(pfd, (nfds_t)nfd, timeout);
	if (r <= 0) {
		STAT_ADD(lc, wake_timeout, 1);
		lc->idle = lc->o.busy_polls; /* nothing happened: sleep again on the next step */
		return 0;
	}
	if (i_ch >= 0 && (pfd[i_ch].revents & POLLIN)) {
		struct ibv_cq *ev_cq = NULL;
		void *ev_ctx = NULL;
		if (lc->ops->get_cq_event(lc->ch, &ev_cq, &ev_ctx) == 0) {
			lc->armed = false;
			STAT_ADD(lc, wake_cq, 1);
			if (++lc->unacked_events >= 64 && lc->ops->ack_cq_events) {
				lc->ops->ack_cq_events(lc->cq, lc->unacked_events);
				lc->unacked_events = 0;
			}
		}
	}
	if (pfd[i_mb].revents & POLLIN)
		STAT_ADD(lc, wake_mbox, 1);   /* consumed by the next ing_mbox_idle */
	lc->idle = 0;
	return 0;
}

int ing_rdma_lcore_run(void *arg)
{
	struct ing_rdma_lcore *lc = arg;

	ING_INFO(COMP, "lcore %u: poller running (%s, chunk %u)", lc->o.lcore_id,
		 lc->o.mode == ING_RDMA_POLL_BUSY ? "busy" : "adaptive", lc->o.chunk_size);
	while (!__atomic_load_n(&lc->stop, __ATOMIC_ACQUIRE))
		(void)ing_rdma_lcore_step(lc);
	ING_INFO(COMP, "lcore %u: poller stopped (%llu READs, %llu frames ok, %llu failed)",
		 lc->o.lcore_id, (unsigned long long)lc->st.reads_posted,
		 (unsigned long long)lc->st.frames_ok, (unsigned long long)lc->st.frames_failed);
	return 0;
}

/* ---------------------------------------------------------------- control side */

int ing_rdma_lcore_submit(struct ing_rdma_lcore *lc, struct ing_frame *f)
{
	return ing_mbox_send(lc->in, ING_EV_JOB, f);
}

int ing_rdma_lcore_attach(struct ing_rdma_lcore *lc, struct ibv_qp *qp, uint64_t session_id,
			  unsigned rd_atom, unsigned sq_depth)
{
	struct ing_msg m = {
		.kind = ING_EV_ATTACH,
		.val = (rd_atom > 0xffffu ? 0xffffu : rd_atom) << 16 | (sq_depth > 0xffffu ? 0xffffu : sq_depth),
		.arg = qp,
		.u64 = session_id,
	};
	return ing_mbox_post(lc->in, &m);
}

int ing_rdma_lcore_detach(struct ing_rdma_lcore *lc, uint32_t qp_num)
{
	struct ing_msg m = { .kind = ING_EV_DETACH, .val = qp_num };

	return ing_mbox_post(lc->in, &m);
}

int ing_rdma_lcore_unpark(struct ing_rdma_lcore *lc, uint64_t session_id)
{
	struct ing_msg m = { .kind = ING_EV_UNPARK, .u64 = session_id };

	return ing_mbox_post(lc->in, &m);
}

void ing_rdma_lcore_stop(struct ing_rdma_lcore *lc)
{
	if (!lc)
		return;
	__atomic_store_n(&lc->stop, true, __ATOMIC_RELEASE);
	ing_mbox_kick(lc->in);
}

void ing_rdma_lcore_get_stats(const struct ing_rdma_lcore *lc, struct ing_rdma_lcore_stats *s)
{
	const uint64_t *src = (const uint64_t *)&lc->st;
	uint64_t *dst = (uint64_t *)s;

	memset(s, 0, sizeof(*s));
	for (size_t i = 0; i < offsetof(struct ing_rdma_lcore_stats, parts_ok) / 8 + 1; i++)
		dst[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
}

struct ing_rdma_lcore *ing_rdma_lcore_create(const struct ing_rdma_lcore_opts *o,
					     struct ibv_cq *cq, struct ibv_comp_channel *ch,
					     int ch_fd, const struct ing_rdma_lcore_io *io,
					     const uint32_t *lkeys, unsigned nlkeys)
{
	struct ing_rdma_lcore *lc;
	unsigned fr = 1;

	if (!o || !io || !io->ctl || !io->deliver || !o->max_conns || nlkeys > ING_POOL_MAX_CLASSES) {
		ING_ERR(COMP, "lcore create: bad arguments");
		return NULL;
	}
	lc = aligned_alloc(64, (sizeof(*lc) + 63) & ~(size_t)63);
	if (!lc) {
		ING_ERR(COMP, "lcore create: out of memory");
		return NULL;
	}
	memset(lc, 0, sizeof(*lc));
	lc->o = *o;
	lc->ops = o->ops ? o->ops : &ing_rdma_verbs_ops;
	lc->cq = cq;
	lc->ch = ch;
	lc->ch_fd = ch_fd;
	lc->io = *io;
	if (nlkeys)
		memcpy(lc->lkeys, lkeys, nlkeys * sizeof(*lkeys));
	lc->nlkeys = nlkeys;
	while (fr < (o->conn_frames ? o->conn_frames : ING_RDMA_DEFAULT_CONN_FRAMES))
		fr <<= 1;
	lc->fmask = fr - 1;
	lc->frames_max = o->max_conns * fr + ING_RDMA_CQ_BURST;
	lc->conns = calloc(o->max_conns, sizeof(*lc->conns));
	lc->rec_mem = calloc((size_t)o->max_conns * REC_CAP, sizeof(*lc->rec_mem));
	lc->fifo_mem = calloc((size_t)o->max_conns * fr, sizeof(*lc->fifo_mem));
	/* its mailbox: a job per frame it may be given, and the attach/detach commands */
	lc->in = ing_mbox_create("lcore", (io->mbox_size ? io->mbox_size : ING_DEFAULT_RING_SIZE) + 256);
	if (!lc->conns || !lc->rec_mem || !lc->fifo_mem || !lc->in) {
		ING_ERR(COMP, "lcore %u create: out of memory or no mailbox: %s", o->lcore_id, strerror(errno));
		ing_rdma_lcore_destroy(lc);
		return NULL;
	}
	for (unsigned i = 0; i < o->max_conns; i++) {
		lc->conns[i].recs = &lc->rec_mem[(size_t)i * REC_CAP];
		lc->conns[i].fifo = &lc->fifo_mem[(size_t)i * fr];
		lc->conns[i].gen = 1;
	}
	return lc;
}

int ing_rdma_lcore_set_push(struct ing_rdma_lcore *lc, struct ibv_pd *pd,
			    struct ibv_mr *const *mrs, unsigned nmr, unsigned nmw)
{
	if (!lc || !mrs || !nmr || nmr > ING_POOL_MAX_CLASSES || (nmw && !pd) || lc->push ||
	    !lc->ops->post_recv || (nmw && (!lc->ops->alloc_mw || !lc->ops->dealloc_mw)))
		return -EINVAL;
	lc->pd = pd;
	memcpy(lc->mrs, mrs, nmr * sizeof(*mrs));
	lc->nmr = nmr;
	if (nmw) {
		lc->mws = calloc(nmw, sizeof(*lc->mws));
		lc->mw_free = calloc(nmw, sizeof(*lc->mw_free));
		if (!lc->mws || !lc->mw_free) {
			ING_ERR(COMP, "lcore %u: out of memory for %u memory windows", lc->o.lcore_id, nmw);
			return -ENOMEM;
		}
		for (unsigned i = 0; i < nmw; i++) {
			lc->mws[i].mw = lc->ops->alloc_mw(pd, IBV_MW_TYPE_2);
			if (!lc->mws[i].mw) {
				int e = errno ? errno : ENOMEM;
				ING_ERR(COMP, "lcore %u: ibv_alloc_mw(type 2) #%u failed: %s", lc->o.lcore_id,
					i, strerror(e));
				lc->nmw = i;
				return -e;
			}
			lc->mws[i].rkey = lc->mws[i].mw->rkey;
			lc->nmw = i + 1;
			push_mw_put(lc, &lc->mws[i]);
		}
	}
	if (!lc->o.recv_depth)
		lc->o.recv_depth = ING_RDMA_DEFAULT_RECV_DEPTH;
	if (!lc->o.grant_ms)
		lc->o.grant_ms = ING_RDMA_DEFAULT_GRANT_MS;
	lc->push = true;
	return 0;
}

void ing_rdma_lcore_destroy(struct ing_rdma_lcore *lc)
{
	ing_rdma_lcore_destroy_why(lc, "ingest node shutting down");
}

void ing_rdma_lcore_destroy_why(struct ing_rdma_lcore *lc, const char *why)
{
	if (!lc)
		return;
	if (lc->conns) {
		for (unsigned i = 0; i < lc->nconns; i++) {
			struct rdma_conn *c = &lc->conns[i];
			if (c->state != CONN_FREE) {
				conn_fail_all(lc, c, ING_E_SHUTTING_DOWN, true, why);
				conn_free(c);
			}
		}
	}
	if (lc->in) {   /* jobs never taken: failed too, everything else is moot */
		struct ing_msg m[32];
		unsigned n;
		while ((n = ing_mbox_pop(lc->in, m, 32)) > 0)
			for (unsigned i = 0; i < n; i++)
				if (m[i].kind == ING_EV_JOB) {
					held_add(lc, 1);
					fail_frame(lc, m[i].f, ING_E_SHUTTING_DOWN, true, "%s", why);
				}
	}
	if (lc->unacked_events && lc->ops && lc->ops->ack_cq_events)
		lc->ops->ack_cq_events(lc->cq, lc->unacked_events);
	ing_mbox_destroy(lc->in);
	free(lc->conns);
	free(lc->rec_mem);
	free(lc->fifo_mem);
	for (unsigned i = 0; lc->mws && i < lc->nmw; i++)
		if (lc->mws[i].mw && lc->ops->dealloc_mw(lc->mws[i].mw))
			ING_WARN(COMP, "lcore %u: ibv_dealloc_mw failed", lc->o.lcore_id);
	free(lc->mws);
	free(lc->mw_free);
	free(lc);
}
