/* SPDX-License-Identifier: Apache-2.0 */
/*
 * stripe.c - a striped frame (FrameMeta.stripe, docs/ARCHITECTURE.md "Striping"): one
 * frame admitted once on its home session (one slot, one credit, one catalog row, one
 * Ack), its byte range moved in parts, each by the lcore of the rail of the producer's
 * session the part names, all into the one slot; control is the one owner of the parts'
 * progress (the lcores post ING_EV_PART_IN, or a failed part's ING_EV_DONE, on its
 * mailbox) and hands the frame to persistence when every part is in (xport_filled: the
 * CRC-32C of the whole slot is checked there, once, as for the gRPC fallback).
 *
 * A part that comes back failed and retryable (its connection lost and not back within
 * the lcore's park time, its rail down, no connection) is moved again, alone, over
 * another rail of the frame whose session still has its RDMA connection (the producer's
 * registration there covers the whole frame: the address is that part's base + offset);
 * parts already in are never moved again. A part whose own descriptor is wrong (an
 * access error: bad rkey or address) fails the frame, once every other part is back
 * (no lcore may still write into a slot that goes back to the pool).
 *
 * Push (docs/PUSH.md "Striped push"): on a session that negotiated RDMA WRITE the parts
 * are granted instead of read: each part's lcore binds a window over the part's range of
 * the slot on its own rail's PD/QP (or grants the pool MR's rkey), control answers one
 * Ack{GRANTED, grantStriped, grantPart, grantOffset, grantRail} per part on the home
 * stream, the producer writes each part over that rail with the part's grant id, and the
 * lcore posts ING_EV_PART_IN when the write is in and the window invalidated. A part lost
 * with its rail is granted again alone over another rail (a new grant, the same range).
 *
 * Control thread only.
 */
#include "control/service/transport.h"
#include "control/service/state.h"
#include "control/service/xport/rdma_job.h"
#include "common/stripe.h"
#include "dataplane/rdma/rdma.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STRIPE_MAX_MOVES 4   /* a part moved more often fails the frame (retryable) */

/* Over a rail: the producer's session there and the frame's base address and rkey in
 * that rail's registration. */
struct stripe_via {
	bool set;
	uint64_t session;
	uint64_t base;           /* producer address of the frame's byte 0 */
	uint32_t rkey;
};

struct svc_stripe {
	struct ing_stripe st;
	struct ing_frame part[ING_STRIPE_MAX_PARTS];   /* what the lcores hold */
	bool out[ING_STRIPE_MAX_PARTS];                /* part i is in an lcore now */
	unsigned nout;
	struct stripe_via via[ING_RDMA_MAX_RAILS];
	int fail_code;                                 /* a part failed the frame: answered once
							* nothing is out */
	bool fail_retry;
	bool push;                                     /* parts granted for the producer's RDMA
							* WRITE (docs/PUSH.md "Striped push"),
							* not READ */
	char fail_msg[ING_FRAME_MSG_MAX];
	unsigned moved;                                /* parts moved again (log) */
	unsigned home_rail;                            /* the FrameMeta's session's rail: the
							* frame counts once in its frames */
};

int xport_stripe_check(const H3000__FrameMeta *m, unsigned nrails, char *why, size_t whylen)
{
	struct ing_stripe_part p[ING_STRIPE_MAX_PARTS];
	struct ing_stripe s;
	const char *w = NULL;

	if (m->n_stripe > ING_STRIPE_MAX_PARTS) {
		snprintf(why, whylen, "striped frame: %zu parts (at most %u)", m->n_stripe, ING_STRIPE_MAX_PARTS);
		return -EINVAL;
	}
	for (size_t i = 0; i < m->n_stripe; i++) {
		const H3000__StripePart *sp = m->stripe[i];
		p[i] = (struct ing_stripe_part){ .off = sp->offset, .len = sp->length,
						 .rail = sp->rail < 256 ? (uint8_t)sp->rail : 255 };
		if (!sp->sessionid && !w)
			w = "striped frame: a part names no session";
		if (sp->addr + sp->length < sp->addr && !w)
			w = "striped frame: a part's address range wraps";
	}
	if (!w && ing_stripe_init(&s, m->length, p, (unsigned)m->n_stripe, nrails, &w) == 0)
		return 0;
	snprintf(why, whylen, "%s", w ? w : "striped frame: bad parts");
	return -EINVAL;
}

/* A session the home session's producer may move parts over: its own, or one negotiated
 * by the same client (same identity, same authentication). */
static bool same_producer(const struct svc_session *home, const struct svc_session *o)
{
	return o && o->in_use && o->authed == home->authed &&
	       !strcmp(o->owner_ident, home->owner_ident) && !strcmp(o->client, home->client);
}

/* Queue part i over its rail's session. 0 or -errno (the part is not out). */
static int part_submit(struct svc_frame *e, struct svc_stripe *sp, unsigned i)
{
	struct ing_frame *f = e->f, *p = &sp->part[i];
	const struct ing_stripe_part *sp_i = &sp->st.part[i];
	const struct stripe_via *v = &sp->via[sp_i->rail];
	unsigned rail;

	if (!v->set)
		return -ENOTCONN;
	memset(p, 0, sizeof(*p));
	memcpy(p->frame_id, f->frame_id, sizeof(p->frame_id));
	memcpy(p->wafer_id, f->wafer_id, sizeof(p->wafer_id));
	p->part_of = f;
	p->part = (uint8_t)i;
	p->session_id = v->session;
	p->buf = f->buf + sp_i->off;
	p->cap = sp_i->len;
	p->length = sp_i->len;
	if (sp->push) {
		p->push = true;   /* the part's lcore grants its range; the producer writes it */
	} else {
		p->raddr = v->base + sp_i->off;
		p->rkey = v->rkey;
	}
	p->cls = f->cls;
	p->region = f->region;
	p->index = UINT32_MAX;   /* never a pool slot */
	p->t_admit_ns = f->t_admit_ns;
	int rc = ing_rdma_submit_part(e->env->rdma, p, &rail);
	if (rc)
		return rc;
	if (rail != sp_i->rail)   /* the session moved rails since: it moves there */
		sp->st.part[i].rail = (uint8_t)rail;
	sp->out[i] = true;
	sp->nout++;
	return 0;
}

/* Rails whose session still has its RDMA connection (the order of the rails). */
static unsigned rails_up(struct svc_frame *e, struct svc_stripe *sp, uint8_t *up)
{
	unsigned n = 0;
	for (unsigned r = 0; r < ING_RDMA_MAX_RAILS; r++)
		if (sp->via[r].set && ing_rdma_session_rail(e->env->rdma, sp->via[r].session) == (int)r)
			up[n++] = (uint8_t)r;
	return n;
}

/* Part i could not move over its rail: move it over another (round robin from the next
 * rail), alone. 0, or -errno when no other rail takes it. */
static int part_move(struct svc_frame *e, struct svc_stripe *sp, unsigned i)
{
	uint8_t up[ING_RDMA_MAX_RAILS];
	unsigned n = rails_up(e, sp, up);
	uint8_t from = sp->st.part[i].rail;

	if (sp->st.part[i].moves >= STRIPE_MAX_MOVES)
		return -ELOOP;
	for (unsigned k = 0; k < n; k++) {
		uint8_t to = up[(k + i + 1) % n];
		if (to == from && n > 1)
			continue;
		sp->st.part[i].rail = to;
		sp->st.part[i].moves++;
		if (part_submit(e, sp, i) == 0) {
			sp->moved++;
			ING_LOGC_RL(ING_LOG_WARN, "svc", &e->lc, "frame %s: part %u (%" PRIu64 " bytes at %" PRIu64
				    ") moved from rail %u to rail %u", e->f->frame_id, i, sp->st.part[i].len,
				    sp->st.part[i].off, from, to);
			return 0;
		}
	}
	return -ENOTCONN;
}

/* Nothing of the frame is out any more and a part failed it: its one answer. */
static void maybe_fail(struct svc_frame *e, struct svc_stripe *sp)
{
	if (sp->nout || !sp->fail_code)
		return;
	xport_fail(e, sp->fail_code, sp->fail_retry, "%s", sp->fail_msg);
}

int xport_stripe_start(struct svc_frame *e, const H3000__FrameMeta *m, bool push)
{
	struct ing_rdma *r = e->env->rdma;
	struct svc_session *home = e->sess;
	struct svc_stripe *sp;
	struct ing_stripe_part p[ING_STRIPE_MAX_PARTS];
	int home_rail;

	if (!r || !home)
		return -ENOTCONN;
	if (!ing_rdma_stripes(r))   /* a node that does not stripe moves it whole */
		return push ? xport_rdma_write_start(e) : xport_rdma_read_start(e);
	home_rail = ing_rdma_session_rail(r, home->id);
	if (home_rail < 0)
		return -ENOTCONN;
	sp = calloc(1, sizeof(*sp));
	if (!sp)
		return -ENOMEM;
	for (size_t i = 0; i < m->n_stripe; i++)
		p[i] = (struct ing_stripe_part){ .off = m->stripe[i]->offset, .len = m->stripe[i]->length,
						 .rail = (uint8_t)m->stripe[i]->rail };
	const char *why = NULL;
	if (ing_stripe_init(&sp->st, m->length, p, (unsigned)m->n_stripe, ing_rdma_nrails(r), &why)) {
		free(sp);   /* xport_stripe_check passed it: cannot be */
		return -EINVAL;
	}
	sp->home_rail = (unsigned)home_rail;
	/* the home session's rail: the FrameMeta's own addr/rkey cover the whole frame there */
	sp->via[home_rail] = (struct stripe_via){ .set = true, .session = home->id, .base = m->addr,
						  .rkey = m->rkey };
	for (size_t i = 0; i < m->n_stripe; i++) {
		const H3000__StripePart *x = m->stripe[i];
		struct svc_session *o = svc_session_find(e->svc, x->sessionid);
		if (x->rail >= ING_RDMA_MAX_RAILS || sp->via[x->rail].set || !same_producer(home, o))
			continue;   /* its part moves over another rail (below) */
		sp->via[x->rail] = (struct stripe_via){ .set = true, .session = x->sessionid,
							.base = x->addr - x->offset, .rkey = x->rkey };
	}
	sp->push = push;
	e->stripe = sp;
	for (unsigned i = 0; i < sp->st.nparts; i++)
		if (part_submit(e, sp, i) && part_move(e, sp, i)) {
			/* no rail takes it: fail the frame once the parts already out are back */
			sp->fail_code = ING_E_NO_TRANSPORT;
			sp->fail_retry = true;
			snprintf(sp->fail_msg, sizeof(sp->fail_msg), "frame %s: striped part %u: no RDMA "
				 "connection of this producer takes it", e->f->frame_id, i);
			break;
		}
	if (!sp->nout) {
		e->stripe = NULL;
		free(sp);
		return -ENOTCONN;
	}
	return 0;
}

void xport_stripe_part_in(struct svc_frame *e, struct ing_frame *p)
{
	struct svc_stripe *sp = e->stripe;
	unsigned i = p->part;

	if (!sp || i >= sp->st.nparts || !sp->out[i] || p != &sp->part[i])
		return;   /* logged by the caller's checks: cannot be */
	sp->out[i] = false;
	sp->nout--;
	int last = ing_stripe_part_in(&sp->st, i);
	if (last < 0)
		return;
	if (sp->fail_code) {
		maybe_fail(e, sp);
		return;
	}
	/* each part's bytes add to the frame; the last part's complete it: persistence, CRC
	 * over the whole slot, and one frame in its home rail's count (each rail counted its
	 * part in its parts) */
	if (last)
		ing_rdma_striped_frame_in(e->env->rdma, sp->home_rail);
	xport_filled(e, p->length, false);
}

void xport_stripe_part_failed(struct svc_frame *e, struct ing_frame *p)
{
	struct svc_stripe *sp = e->stripe;
	unsigned i = p->part;

	if (!sp || i >= sp->st.nparts || !sp->out[i] || p != &sp->part[i])
		return;
	sp->out[i] = false;
	sp->nout--;
	e->svc->c_rdma_errors++;
	if (!sp->fail_code && p->retryable && !e->env->stopping) {
		ING_LOGC_RL(ING_LOG_WARN, "svc", &e->lc, "frame %s: part %u on rail %u lost: %s", e->f->frame_id,
			    i, sp->st.part[i].rail, p->msg[0] ? p->msg : "transfer failed");
		if (part_move(e, sp, i) == 0)
			return;
	}
	if (!sp->fail_code) {
		sp->fail_code = p->status ? p->status : ING_E_TRANSFER;
		sp->fail_retry = p->retryable;
		snprintf(sp->fail_msg, sizeof(sp->fail_msg), "frame %s: striped part %u (%" PRIu64
			 " bytes at %" PRIu64 "): %.200s", e->f->frame_id, i, sp->st.part[i].len,
			 sp->st.part[i].off, p->msg[0] ? p->msg : "transfer failed");
	}
	maybe_fail(e, sp);
}

void xport_stripe_free(struct svc_frame *e)
{
	free(e->stripe);
	e->stripe = NULL;
}
