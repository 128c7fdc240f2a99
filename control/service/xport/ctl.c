/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ctl.c - ControlStream, the seed RPC: one FrameMeta per frame the node should pull with
 * RDMA READ from the producer's registered memory (transport xport_rdma_read, rdma.c), or
 * grant for the producer's RDMA WRITE when the session negotiated push (xport_rdma_write).
 * Until an RDMA engine serves the node, every valid descriptor is answered with
 * Ack{ok=false, code=ERROR_NO_TRANSPORT}; invalid ones with INVALID_ARGUMENT/TOO_LARGE; the
 * stream stays open either way. Each frame gets one final Ack (DURABLE or the failure), as
 * the seed's consumer gave; RECEIVED first only for sessions that asked. A descriptor that
 * finds no free slot or credit waits (see "Backpressure" below); it is never refused as
 * busy while the node still makes progress.
 *
 * Backpressure. With no free slot or no credit the FrameMeta waits in the admission queue
 * (control/service/admit.h), in turn with every other transport's frames: the call is
 * held (xport_pause: the gRPC layer then delivers nothing more, and HTTP/2 flow control
 * stops the client) and the unpacked FrameMeta stays in the call's arena. At most one
 * parked FrameMeta per call, so memory is bounded by the number of calls. Its turn comes
 * back through progress when a slot or credit is given back; one that waited
 * frame_timeout_ms with nothing coming back meanwhile is answered Ack{ERROR_BUSY,
 * retryable} by the core and the call goes on.
 */
#include "control/service/transport.h"
#include "control/service/xport/rdma_job.h"
#include "common/log.h"
#include "dataplane/rdma/rdma.h"

#include <inttypes.h>
#include <string.h>

/* A ControlStream call: the core's part first. */
struct ctl_call {
	struct svc_call c;
	struct xport_req req;        /* the parked FrameMeta's request (NULL meta: none) */
};

static void ctl_progress(struct svc_call *pc, bool expired);

/* The two RDMA transports: they differ in how a frame starts (rdma_job.c). */
const struct xport_ops xport_rdma_write = {
	.name = "rdma-write",
	.rpc = "ControlStream",
	.xport = ING_XPORT_RDMA,
	.flags = XPORT_F_DATAPLANE,
	.start = xport_rdma_write_start,
	.progress = ctl_progress,
};

const struct xport_ops xport_rdma_read = {
	.name = "rdma-read",
	.rpc = "ControlStream",
	.xport = ING_XPORT_RDMA,
	.flags = XPORT_F_DATAPLANE,
	.start = xport_rdma_read_start,
	.progress = ctl_progress,
	.push = &xport_rdma_write,   /* a session that negotiated RDMA WRITE: every frame granted */
};

/* The parked FrameMeta is answered or admitted: let the input flow again. */
static void ctl_unpark(struct ctl_call *cc)
{
	cc->req.meta = NULL;
	xport_resume(&cc->c);   /* may deliver (and park) the next FrameMeta */
}

/* The parked FrameMeta's turn came (or it waited too long: the core answered it BUSY). */
static void ctl_progress(struct svc_call *pc, bool expired)
{
	struct ctl_call *cc = (struct ctl_call *)pc;
	struct svc_frame *e;

	if (!cc->req.meta)
		return;
	if (!expired && xport_admit(pc, &cc->req, &e) == XPORT_WAIT)
		return;
	ctl_unpark(cc);
}

static int ctl_start(struct ing_grpc_call *c, void *ctx)
{
	int st;
	return xport_open(c, ctx, &xport_rdma_read, sizeof(struct ctl_call), &st) ? ING_GRPC_OK : st;
}

static int ctl_message(struct ing_grpc_call *c, const uint8_t *msg, size_t len)
{
	struct ctl_call *cc = ing_grpc_call_user(c);
	struct xport_req *r;
	H3000__FrameMeta *m;
	struct svc_frame *e;

	if (!cc || cc->c.closing)
		return 0;
	r = &cc->req;
	if (r->meta) {
		/* cannot happen: a paused call gets no message; never overwrite the arena */
		ING_ERR("svc", "ControlStream call %" PRIu64 ": FrameMeta delivered while one waits", cc->c.id);
		return ING_GRPC_INTERNAL;
	}
	/*
	 * The core decides authentication before anything else is said about the message: a
	 * stream that has no session yet binds one first (here FrameMeta.sessionId, or an
	 * implicit session when the node takes unauthenticated clients). A message that cannot
	 * even be parsed names no session, so on an authenticating node it ends the call
	 * UNAUTHENTICATED.
	 */
	r->bad = svc_pb_meta(&cc->c.arena, msg, len, "", &m, r->bad_why, sizeof(r->bad_why));
	if (!r->bad && m && m->n_stripe &&
	    xport_stripe_check(m, cc->c.env->rdma ? ing_rdma_nrails(cc->c.env->rdma) : 0, r->bad_why,
			       sizeof(r->bad_why)))
		r->bad = ING_E_INVALID_ARGUMENT;
	r->xp = &xport_rdma_read;
	r->session_id = m ? m->sessionid : 0;
	r->frame_id = m && m->frameid ? m->frameid : "";
	r->id_len = strlen(r->frame_id);
	r->meta = m;
	r->unready = cc->c.env->rdma ? NULL :
		"no RDMA connection for this session, so the node cannot read it; connect RDMA "
		"(Negotiate + rdma_cm) or send the bytes with PushFrames";
	switch (xport_admit(&cc->c, r, &e)) {
	case XPORT_WAIT:
		xport_pause(&cc->c);   /* parked: r->meta stays in the arena */
		return 0;
	case XPORT_CLOSED:
		r->meta = NULL;
		return cc->c.status;
	default:
		r->meta = NULL;
		return 0;
	}
}

static void ctl_half_close(struct ing_grpc_call *c)
{
	struct ctl_call *cc = ing_grpc_call_user(c);
	if (cc)
		xport_done(&cc->c);
}

static const struct ing_grpc_method ctl_method = {
	.path = "/h3000.RDMASvc/ControlStream",
	.on_start = ctl_start,
	.on_message = ctl_message,
	.on_half_close = ctl_half_close,
};
SVC_XPORT_REGISTER(ctl_method)
