/* SPDX-License-Identifier: Apache-2.0 */
/*
 * svc_rdma.c - the service's side of the RDMA data path (glue to dataplane/rdma/rdma.h), kept
 * in one file so the rest of the service only calls three hooks:
 *   svc_rdma_enqueue()     ControlStream FrameMeta -> slot -> admission -> READ job
 *   svc_rdma_from_lcore()  frame_durable(): a frame the lcore returned while FILLING
 *                          (READ failed, or DURABLE overtook the RECEIVED notice)
 *   ing_svc_attach_rdma()  ingestd: the engine's callbacks (session check, RECEIVED,
 *                          device removal) point here.
 * Ownership: a frame admitted for RDMA belongs to the lcore from ing_rdma_submit until it
 * comes back on the ack ring; the service never frees its slot before that (no frame
 * timer, a closing call only detaches), which the lcore bounds by park_ms / drain_ms.
 */
#include "control/svc_internal.h"
#include "common/clock.h"
#include "common/log.h"
#include "dataplane/rdma/rdma.h"
#include "h3000.pb-c.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>

#define COMP "svc-rdma"

/* Bytes are in the node: RECEIVED ack; persistence already has the frame (the lcore
 * submitted it). */
static void rdma_received(struct ing_svc *s, struct svc_frame *e, uint64_t t_received_ns)
{
	uint64_t t_admit = e->f->t_admit_ns;

	s->c_received++;
	s->c_bytes_rx += e->length;
	svc_metrics_received(s, ING_XPORT_RDMA, e->length,
			     t_received_ns > t_admit ? t_received_ns - t_admit : 0);
	s->persisting++;
	e->state = FE_PERSISTING;
	svc_ack_received(e, t_received_ns > t_admit ? t_received_ns - t_admit : 0);
}

static struct svc_frame *rdma_entry(struct ing_svc *s, uint64_t idx, uint64_t gen)
{
	if (idx >= s->nfr)
		return NULL;
	struct svc_frame *e = &s->fr[idx];
	if (e->state != FE_FILLING || !e->f || e->gen != gen ||
	    e->f->transport != ING_XPORT_RDMA)
		return NULL;
	return e;
}

bool svc_rdma_from_lcore(struct ing_svc *s, struct ing_frame *f)
{
	struct svc_frame *e = rdma_entry(s, f->cookie, f->gen);

	/* its slot and credit are about to come back (frame_durable releases it after us):
	 * parked ControlStream FrameMetas retry from a zero-delay timer */
	svc_ctl_wake(s);
	if (!e || e->f != f)
		return false;
	if (f->status == ING_E_NONE) {
		/* DURABLE overtook the RECEIVED notice: do the RECEIVED step first */
		rdma_received(s, e, f->t_received_ns);
		return false; /* frame_durable goes on with it (state PERSISTING now) */
	}
	s->c_rdma_errors++;
	svc_frame_fail(e, f->status, f->retryable, "frame %s: %s", f->frame_id,
		       f->msg[0] ? f->msg : "RDMA READ failed");
	return true;
}

int svc_rdma_enqueue(struct svc_call *pc, const H3000__FrameMeta *m, const char *wafer)
{
	struct ing_svc *s = pc->svc;
	struct svc_session *ss = pc->sess;

	/* no "connected" test: a session between a failed QP and its reconnect still takes
	 * jobs (the lcore parks them); ing_rdma_submit says -ENOTCONN if it never connected */
	if (!s->rdma || !ss)
		return -ENOTCONN;
	if (ss->inflight >= ss->credits || !svc_peer_slot_ok(s, pc->peer))
		return -EAGAIN;
	struct ing_frame *f = ing_pool_get(s->pool, m->length);
	if (!f)
		return -EAGAIN;
	snprintf(f->frame_id, sizeof(f->frame_id), "%s", m->frameid);
	snprintf(f->wafer_id, sizeof(f->wafer_id), "%s", wafer);
	f->session_id = ss->id;
	f->length = m->length;
	f->timestamp = m->timestamp;
	f->crc32c = m->crc32c;
	f->has_crc = m->hascrc32c;
	f->transport = ING_XPORT_RDMA;
	f->raddr = m->addr;
	f->rkey = m->rkey;
	f->t_admit_ns = ing_now_ns();
	struct svc_frame *e = svc_frame_admit(s, pc, f);
	if (!e) {
		ing_pool_put(f);
		return -EAGAIN;
	}
	/* the lcore bounds the READ (transport retries, park_ms): no service timer, so the
	 * slot is never freed under an lcore that still writes into it */
	ing_timer_cancel(s->loop, &e->timer);
	int rc = ing_rdma_submit(s->rdma, f);
	if (rc) {
		svc_frame_release(e);
		return rc;
	}
	return 0;
}

/* ---------------------------------------------------------------- engine callbacks */

static int cb_session_check(void *arg, uint64_t session_id)
{
	struct ing_svc *s = arg;
	struct svc_session *ss = svc_session_find(s, session_id);

	if (s->stopping)
		return -ESHUTDOWN;
	if (!ss)
		return -ENOENT;
	if (ss->transport != ING_XPORT_RDMA)
		return -EPERM;
	return 0;
}

static void cb_conn_state(void *arg, uint64_t session_id, bool up)
{
	struct ing_svc *s = arg;
	struct svc_session *ss = up ? svc_session_find(s, session_id) : NULL;
	if (ss && ss->rdma_seen)
		s->m.rdma_reconnects++;
	if (ss)
		ss->rdma_seen = true;
	ING_INFO(COMP, "session %" PRIu64 ": RDMA connection %s", session_id, up ? "up" : "down");
}

static void cb_received(void *arg, const struct ing_rdma_notice *n)
{
	struct ing_svc *s = arg;
	struct svc_frame *e = rdma_entry(s, n->cookie, n->gen);

	if (e) /* else: DURABLE (or a failure) got there first */
		rdma_received(s, e, n->t_ns);
}

static void cb_device_lost(void *arg, const char *why)
{
	struct ing_svc *s = arg;

	s->o.rdma.rdma_available = false;
	snprintf(s->note, sizeof(s->note), "rdma: %s; fallback active", why);
	s->c_fallback++;
	ING_ERR(COMP, "%s: Negotiate offers only the gRPC stream from now on", why);
}

void ing_svc_attach_rdma(struct ing_svc *s, struct ing_rdma *r)
{
	struct ing_rdma_cbs cbs = {
		.arg = s,
		.session_check = cb_session_check,
		.conn_state = cb_conn_state,
		.received = cb_received,
		.device_lost = cb_device_lost,
	};

	s->rdma = r;
	if (r)
		ing_rdma_set_cbs(r, &cbs);
}
