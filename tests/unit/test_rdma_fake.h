/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_rdma_fake.h - fake verbs for the RDMA lcore unit tests (no device): a "hardware"
 * model that executes posted RDMA READs in order per QP (memcpy from raddr to the SGE),
 * generates CQEs like rxe (signaled successes, every error/flush), moves a QP to ERROR on
 * its first failure, raises the completion channel (an eventfd) when armed, and checks SQ
 * accounting (WRs posted minus WRs retired by polled signaled CQEs never above the QP's
 * SQ depth). Memory-window binds and local invalidates complete like any signaled WR (no
 * data moves); windows come from fake_ops.alloc_mw (counted, rkeys from 0x5000 up).
 * Thread-safe (one mutex) so a test thread can play the hardware while the lcore runs in
 * its own thread.
 */
#ifndef TEST_RDMA_FAKE_H
#define TEST_RDMA_FAKE_H

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "dataplane/rdma/rdma.h"

#define FAKE_MAX_WR 8192
#define FAKE_MAX_QP 8
#define FAKE_MAX_XCQ 4    /* CQs besides the default one: one per extra lcore */

struct fake_wr {
	uint64_t wr_id;
	unsigned qp;          /* index */
	unsigned seq;         /* per-QP sequence */
	bool signaled, done;
	uint64_t raddr, laddr;
	uint32_t len, rkey, lkey;
	int opcode;
};

struct fake_qp {
	struct ibv_qp qp;     /* qp_num is what the lcore sees */
	unsigned sq_depth;
	bool error;
	unsigned posted, retired;   /* SQ accounting */
	unsigned max_inflight;      /* max (posted - retired) seen at post time */
	unsigned unsig_run, max_unsig_run;
	int xcq;                    /* its CQ: -1 the default one (fake->cq), else fake->xcq[i] */
	uint64_t recv_wr_id;        /* push: the wr_id of its receive WRs (fake_ops.post_recv) */
	unsigned recvs;             /* receive WRs posted and not consumed */
};

/* An extra CQ (its own lcore; multi-lcore tests drive it by polling, never armed). */
struct fake_xcq {
	struct ibv_cq cq;
	struct ibv_wc cqe[FAKE_MAX_WR];
	unsigned head, tail;
};

struct fake_dev {
	pthread_mutex_t mu;
	struct fake_wr wr[FAKE_MAX_WR];
	unsigned nwr, hw_next;     /* posted, next to execute */
	struct fake_qp qps[FAKE_MAX_QP];
	unsigned nqp;
	struct ibv_wc cqe[FAKE_MAX_WR];
	unsigned cq_head, cq_tail;
	bool auto_hw;              /* execute every posted WR at once */
	bool armed;
	int chan_fd;               /* fake completion channel */
	uint32_t bad_rkey;         /* READs with this rkey fail with REM_ACCESS_ERR */
	int post_ret;              /* forced ibv_post_send result */
	unsigned sq_violations;
	unsigned posts, events;
	unsigned mws_alive, mws_made;  /* memory windows allocated and not freed; ever */
	struct ibv_cq cq;          /* identity only */
	struct ibv_comp_channel ch;
	struct fake_xcq xcq[FAKE_MAX_XCQ];
};

static struct fake_dev *fake;

static inline struct fake_qp *fake_qp_of(struct ibv_qp *qp)
{
	return (struct fake_qp *)qp;
}

static inline unsigned fake_qp_idx(struct ibv_qp *qp)
{
	return (unsigned)(fake_qp_of(qp) - fake->qps);
}

static inline struct ibv_qp *fake_qp_new(unsigned sq_depth)
{
	struct fake_qp *q = &fake->qps[fake->nqp];
	memset(q, 0, sizeof(*q));
	q->qp.qp_num = 0x100 + fake->nqp;
	q->sq_depth = sq_depth;
	q->xcq = -1;
	fake->nqp++;
	return &q->qp;
}

/* A QP whose completions go to extra CQ i (fake_xcq_of(i)). */
static inline struct ibv_qp *fake_qp_new_on(unsigned sq_depth, int xcq)
{
	struct ibv_qp *qp = fake_qp_new(sq_depth);
	fake_qp_of(qp)->xcq = xcq;
	return qp;
}

static inline struct ibv_cq *fake_xcq_of(int i)
{
	return &fake->xcq[i].cq;
}

/* Execute up to n WRs in order (the "wire"). Caller holds mu. */
static void fake_hw_locked(unsigned n)
{
	while (n-- && fake->hw_next < fake->nwr) {
		struct fake_wr *w = &fake->wr[fake->hw_next++];
		struct fake_qp *q = &fake->qps[w->qp];
		enum ibv_wc_status st = IBV_WC_SUCCESS;
		if (q->error)
			st = IBV_WC_WR_FLUSH_ERR;
		else if (fake->bad_rkey && w->rkey == fake->bad_rkey)
			st = IBV_WC_REM_ACCESS_ERR;
		if (st != IBV_WC_SUCCESS)
			q->error = true;
		else if (w->opcode == IBV_WR_RDMA_READ)
			memcpy((void *)(uintptr_t)w->laddr, (const void *)(uintptr_t)w->raddr, w->len);
		w->done = true;
		if (st != IBV_WC_SUCCESS || w->signaled) {
			struct ibv_wc *c = q->xcq >= 0 ? &fake->xcq[q->xcq].cqe[fake->xcq[q->xcq].tail++ % FAKE_MAX_WR]
						       : &fake->cqe[fake->cq_tail++ % FAKE_MAX_WR];
			memset(c, 0, sizeof(*c));
			c->wr_id = w->wr_id;
			c->status = st;
			c->opcode = w->opcode == IBV_WR_BIND_MW ? IBV_WC_BIND_MW :
				    w->opcode == IBV_WR_LOCAL_INV ? IBV_WC_LOCAL_INV : IBV_WC_RDMA_READ;
			c->byte_len = st == IBV_WC_SUCCESS ? w->len : 0;
			c->qp_num = q->qp.qp_num;
			/* remember the WR for SQ retirement at poll time */
			c->imm_data = (uint32_t)(w - fake->wr);
			if (fake->armed && q->xcq < 0) {
				uint64_t one = 1;
				fake->armed = false;
				fake->events++;
				(void)!write(fake->chan_fd, &one, sizeof(one));
			}
		}
	}
}

static inline void fake_hw(unsigned n)
{
	pthread_mutex_lock(&fake->mu);
	fake_hw_locked(n);
	pthread_mutex_unlock(&fake->mu);
}

static inline unsigned fake_pending(void)
{
	pthread_mutex_lock(&fake->mu);
	unsigned n = fake->nwr - fake->hw_next;
	pthread_mutex_unlock(&fake->mu);
	return n;
}

static int f_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	pthread_mutex_lock(&fake->mu);
	struct fake_qp *q = fake_qp_of(qp);
	fake->posts++;
	if (fake->post_ret) {
		*bad = wr;
		pthread_mutex_unlock(&fake->mu);
		return fake->post_ret;
	}
	for (; wr; wr = wr->next) {
		struct fake_wr *w = &fake->wr[fake->nwr++];
		memset(w, 0, sizeof(*w));
		w->wr_id = wr->wr_id;
		w->qp = fake_qp_idx(qp);
		w->seq = q->posted++;
		w->signaled = wr->send_flags & IBV_SEND_SIGNALED;
		w->opcode = wr->opcode;
		if (wr->opcode == IBV_WR_RDMA_READ) {
			w->raddr = wr->wr.rdma.remote_addr;
			w->rkey = wr->wr.rdma.rkey;
			w->laddr = wr->sg_list[0].addr;
			w->len = wr->sg_list[0].length;
			w->lkey = wr->sg_list[0].lkey;
		} else if (wr->opcode == IBV_WR_BIND_MW) {
			w->rkey = wr->bind_mw.rkey;   /* the key the bind gives the window */
			w->laddr = wr->bind_mw.bind_info.addr;
			w->len = (uint32_t)wr->bind_mw.bind_info.length;
			w->lkey = wr->bind_mw.bind_info.mr ? wr->bind_mw.bind_info.mr->lkey : 0;   /* the MR it binds in */
		} else {
			w->rkey = wr->invalidate_rkey;
		}
		unsigned inflight = q->posted - q->retired;
		if (inflight > q->max_inflight)
			q->max_inflight = inflight;
		if (inflight > q->sq_depth)
			fake->sq_violations++;
		q->unsig_run = w->signaled ? 0 : q->unsig_run + 1;
		if (q->unsig_run > q->max_unsig_run)
			q->max_unsig_run = q->unsig_run;
	}
	if (fake->auto_hw)
		fake_hw_locked(FAKE_MAX_WR);
	pthread_mutex_unlock(&fake->mu);
	return 0;
}

static int f_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc)
{
	int k = 0;
	pthread_mutex_lock(&fake->mu);
	struct fake_xcq *x = NULL;
	for (int i = 0; i < FAKE_MAX_XCQ; i++)
		if (cq == &fake->xcq[i].cq)
			x = &fake->xcq[i];
	unsigned *head = x ? &x->head : &fake->cq_head, *tail = x ? &x->tail : &fake->cq_tail;
	struct ibv_wc *ring = x ? x->cqe : fake->cqe;
	while (k < n && *head != *tail) {
		wc[k] = ring[(*head)++ % FAKE_MAX_WR];
		if (wc[k].opcode == IBV_WC_RECV_RDMA_WITH_IMM) {   /* fake_inject_write: no send WR */
			k++;
			continue;
		}
		struct fake_wr *w = &fake->wr[wc[k].imm_data];
		struct fake_qp *q = &fake->qps[w->qp];
		if (w->seq + 1 > q->retired)
			q->retired = w->seq + 1; /* a CQE retires its WR and every earlier one */
		wc[k].imm_data = 0;
		k++;
	}
	pthread_mutex_unlock(&fake->mu);
	return k;
}

static int f_req_notify(struct ibv_cq *cq, int solicited)
{
	(void)cq;
	(void)solicited;
	pthread_mutex_lock(&fake->mu);
	fake->armed = true;
	pthread_mutex_unlock(&fake->mu);
	return 0;
}

static int f_get_cq_event(struct ibv_comp_channel *ch, struct ibv_cq **cq, void **ctx)
{
	uint64_t v;
	(void)ch;
	if (read(fake->chan_fd, &v, sizeof(v)) != sizeof(v))
		return -1;
	*cq = &fake->cq;
	*ctx = NULL;
	return 0;
}

static void f_ack_cq_events(struct ibv_cq *cq, unsigned n)
{
	(void)cq;
	(void)n;
}

static struct ibv_mw *f_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type)
{
	struct ibv_mw *mw = calloc(1, sizeof(*mw));
	(void)pd;
	if (!mw || type != IBV_MW_TYPE_2)
		return NULL;
	pthread_mutex_lock(&fake->mu);
	mw->rkey = 0x5000u + (fake->mws_made++ << 8);
	mw->type = type;
	fake->mws_alive++;
	pthread_mutex_unlock(&fake->mu);
	return mw;
}

static int f_dealloc_mw(struct ibv_mw *mw)
{
	pthread_mutex_lock(&fake->mu);
	fake->mws_alive--;
	pthread_mutex_unlock(&fake->mu);
	free(mw);
	return 0;
}

/* Receive WRs (push): counted per QP, their wr_id kept for fake_inject_write. */
static int f_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	(void)bad;
	pthread_mutex_lock(&fake->mu);
	for (; wr; wr = wr->next) {
		fake_qp_of(qp)->recv_wr_id = wr->wr_id;
		fake_qp_of(qp)->recvs++;
	}
	pthread_mutex_unlock(&fake->mu);
	return 0;
}

/*
 * The peer's RDMA WRITE WITH IMM of len bytes landed on qp (the test copied them where the
 * grant says): a receive completion with immediate imm on qp's CQ, consuming one of its
 * receive WRs. Returns false when qp has none posted (the write would fail RNR).
 */
static inline bool fake_inject_write(struct ibv_qp *qp, uint32_t imm, uint32_t len)
{
	pthread_mutex_lock(&fake->mu);
	struct fake_qp *q = fake_qp_of(qp);
	if (!q->recvs || q->error) {
		pthread_mutex_unlock(&fake->mu);
		return false;
	}
	q->recvs--;
	struct ibv_wc *c = q->xcq >= 0 ? &fake->xcq[q->xcq].cqe[fake->xcq[q->xcq].tail++ % FAKE_MAX_WR]
				       : &fake->cqe[fake->cq_tail++ % FAKE_MAX_WR];
	memset(c, 0, sizeof(*c));
	c->wr_id = q->recv_wr_id;
	c->status = IBV_WC_SUCCESS;
	c->opcode = IBV_WC_RECV_RDMA_WITH_IMM;
	c->wc_flags = IBV_WC_WITH_IMM;
	c->imm_data = htobe32(imm);
	c->byte_len = len;
	c->qp_num = q->qp.qp_num;
	pthread_mutex_unlock(&fake->mu);
	return true;
}

static const struct ing_rdma_ops fake_ops = {
	.post_send = f_post_send,
	.post_recv = f_post_recv,
	.poll_cq = f_poll_cq,
	.req_notify_cq = f_req_notify,
	.get_cq_event = f_get_cq_event,
	.ack_cq_events = f_ack_cq_events,
	.alloc_mw = f_alloc_mw,
	.dealloc_mw = f_dealloc_mw,
};

static inline void fake_init(void)
{
	fake = calloc(1, sizeof(*fake));
	pthread_mutex_init(&fake->mu, NULL);
	fake->chan_fd = eventfd(0, EFD_NONBLOCK);
}

static inline void fake_fini(void)
{
	close(fake->chan_fd);
	pthread_mutex_destroy(&fake->mu);
	free(fake);
	fake = NULL;
}

/* cmocka group/test setup and teardown around fake_init / fake_fini */
static inline int fake_setup(void **state)
{
	(void)state;
	fake_init();
	return 0;
}

static inline int fake_teardown(void **state)
{
	(void)state;
	fake_fini();
	return 0;
}

/* ---------------------------------------------------------------- fake node io */

/*
 * The lcore's surroundings: a fake persistence (deliver), and the control thread's
 * mailbox, which the test reads: DONE messages (failed frames) land in failed[], the other
 * events in notes[] (fake_notes pops them). The mailbox has one consumer at a time (mu).
 */
#define IO_MAX 1024

struct fake_note {            /* one control-mailbox event other than DONE */
	uint32_t kind;            /* ING_EV_RECEIVED, _GRANTED, _CONN_ERROR, _CONN_RELEASED */
	uint32_t qp_num;
	int32_t status;           /* CONN_ERROR: ibv_wc_status */
	uint64_t gen;             /* RECEIVED, GRANTED: the frame's number (its id) */
	uint64_t length;          /* RECEIVED, GRANTED: the frame's length */
	uint32_t grant_id, grant_rkey;
	struct ing_frame *f;
};

struct fake_io {
	pthread_mutex_t mu;
	struct ing_mbox *ctl;
	struct ing_rdma_lcore *lc;     /* the last lcore made on it (io_push_job) */
	struct ing_frame *delivered[IO_MAX];
	unsigned ndelivered;
	struct ing_frame *failed[IO_MAX];
	unsigned nfailed;
	struct fake_note notes[IO_MAX];
	unsigned nh, nt;
	unsigned refuse_deliver;   /* next n deliver calls return -ENOBUFS */
};

/* Caller holds mu. */
static void fake_drain_locked(struct fake_io *io)
{
	struct ing_msg m[64];
	unsigned k;

	while ((k = ing_mbox_pop(io->ctl, m, 64)) > 0)
		for (unsigned i = 0; i < k; i++) {
			if (m[i].kind == ING_EV_DONE) {
				io->failed[io->nfailed++] = m[i].f;
				continue;
			}
			struct fake_note n = { .kind = m[i].kind, .f = m[i].f };
			if (m[i].kind == ING_EV_CONN_ERROR || m[i].kind == ING_EV_CONN_RELEASED) {
				n.qp_num = m[i].val;
				n.status = (int32_t)m[i].u64;
			} else {
				n.gen = strtoull(m[i].f->frame_id, NULL, 10);
				n.length = m[i].f->length;
				if (m[i].kind == ING_EV_GRANTED) {
					n.grant_id = m[i].val;
					n.grant_rkey = (uint32_t)(m[i].u64 >> 32);
					n.qp_num = (uint32_t)m[i].u64;
				}
			}
			io->notes[io->nt++ % IO_MAX] = n;
		}
}

static int io_deliver(void *arg, struct ing_frame *f)
{
	struct fake_io *io = arg;
	pthread_mutex_lock(&io->mu);
	fake_drain_locked(io);   /* what the lcore posted before this hand-off */
	if (io->refuse_deliver) {
		io->refuse_deliver--;
		pthread_mutex_unlock(&io->mu);
		return -ENOBUFS;
	}
	io->delivered[io->ndelivered++] = f;
	pthread_mutex_unlock(&io->mu);
	return 0;
}

static inline void io_push_job(struct fake_io *io, struct ing_frame *f)
{
	assert_int_equal(ing_rdma_lcore_submit(io->lc, f), 0);
}

/* A counter of io (ndelivered, nfailed), after taking in what control's mailbox holds. */
static inline unsigned io_count(struct fake_io *io, unsigned *n)
{
	pthread_mutex_lock(&io->mu);
	fake_drain_locked(io);
	unsigned v = *n;
	pthread_mutex_unlock(&io->mu);
	return v;
}

/* Pop up to max notes (oldest first). */
static inline unsigned fake_notes(struct fake_io *io, struct fake_note *n, unsigned max)
{
	unsigned k = 0;
	pthread_mutex_lock(&io->mu);
	fake_drain_locked(io);
	while (k < max && io->nh != io->nt)
		n[k++] = io->notes[io->nh++ % IO_MAX];
	pthread_mutex_unlock(&io->mu);
	return k;
}

static struct fake_io *fake_io_cur;   /* the last one made (fake_notes from test helpers) */

static inline struct fake_io *fake_io_new(void)
{
	struct fake_io *io = calloc(1, sizeof(*io));
	fake_io_cur = io;
	pthread_mutex_init(&io->mu, NULL);
	io->ctl = ing_mbox_create("t_ctl", 4 * IO_MAX);
	return io;
}

static inline void fake_io_free(struct fake_io *io)
{
	pthread_mutex_lock(&io->mu);
	fake_drain_locked(io);
	pthread_mutex_unlock(&io->mu);
	ing_mbox_destroy(io->ctl);
	pthread_mutex_destroy(&io->mu);
	free(io);
}

static inline struct ing_rdma_lcore *fake_lcore(struct fake_io *io, const struct ing_rdma_lcore_opts *base)
{
	struct ing_rdma_lcore_opts o;
	static const uint32_t lkeys[2] = { 0x1111, 0x2222 };
	if (base)
		o = *base;
	else
		ing_rdma_lcore_opts_init(&o);
	o.ops = &fake_ops;
	struct ing_rdma_lcore_io lio = { .ctl = io->ctl, .arg = io, .deliver = io_deliver };
	io->lc = ing_rdma_lcore_create(&o, &fake->cq, &fake->ch, fake->chan_fd, &lio, lkeys, 2);
	return io->lc;
}

/* A frame whose slot is a plain heap buffer; raddr points at src (the "producer"). */
static inline struct ing_frame *frame_new(uint64_t id, uint64_t len, const uint8_t *src, uint32_t rkey,
				   uint32_t qp_num)
{
	struct ing_frame *f = calloc(1, sizeof(*f));
	snprintf(f->frame_id, sizeof(f->frame_id), "%llu", (unsigned long long)id);
	f->session_id = 7;
	f->length = len;
	f->cap = (len + 4095) & ~4095ull;
	f->buf = aligned_alloc(4096, f->cap);
	memset(f->buf, 0, f->cap);
	f->raddr = (uintptr_t)src;
	f->rkey = rkey;
	f->qp_num = qp_num;
	f->cls = 1;
	return f;
}

static inline void frame_free(struct ing_frame *f)
{
	if (!f)
		return;
	free(f->buf);
	free(f);
}

#endif
