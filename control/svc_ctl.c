/* SPDX-License-Identifier: Apache-2.0 */
/*
 * svc_ctl.c - ControlStream, the seed RPC: one FrameMeta per frame the node should pull
 * with RDMA READ from the producer's registered memory (transport xport_rdma_read,
 * svc_rdma.c). Until an RDMA connection backs the session, every valid descriptor is
 * answered with
 * Ack{ok=false, code=ERROR_NO_TRANSPORT}; invalid ones with INVALID_ARGUMENT/TOO_LARGE;
 * the stream stays open either way. Each frame gets one final Ack (DURABLE or the
 * failure), as the seed's consumer gave; RECEIVED first only for sessions that asked.
 * Acks go out in the order the descriptors came in. A descriptor that finds no free slot
 * or credit waits (the call is paused; see "Backpressure" below), it is never refused
 * as busy while the node still makes progress.
 */
#include "control/admit.h"
#include "control/grpc/grpc.h"
#include "control/service.h"
#include "control/xport.h"
#include "common/clock.h"
#include "common/ident.h"
#include "common/log.h"
#include "h3000.pb-c.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/*
 * Backpressure. With no free slot or no credit (or the lcore's job ring full) the
 * FrameMeta waits in the admission queue (control/admit.h), in turn with every other
 * transport's frames: the call is paused (the gRPC layer then delivers nothing more, and
 * HTTP/2 flow control stops the client) and the unpacked FrameMeta stays in the call's
 * arena. At most one parked FrameMeta per call, so memory is bounded by the number of
 * calls. The admission layer retries it (svc_ctl_progress) when a slot or credit comes
 * back; one that waited frame_timeout_ms with nothing coming back meanwhile is answered
 * Ack{ERROR_BUSY, retryable} and the call goes on.
 */

/* A ControlStream call: the core's part first. */
struct ctl_call {
	struct svc_call c;
	struct admit_req req;        /* the parked FrameMeta's admission request */
	H3000__FrameMeta *meta;      /* parked (in the arena), NULL none */
};

enum ctl_verdict { CTL_DONE = 0, CTL_WAIT = 1 };

/* The wafer a validated FrameMeta is filed under (empty: the default wafer). */
static const char *ctl_wafer(const H3000__FrameMeta *m)
{
	return m->waferid && *m->waferid ? m->waferid : ING_DEFAULT_WAFER;
}

/* Try to admit a validated FrameMeta: CTL_DONE when it was started or answered. */
static int ctl_admit(struct ctl_call *cc, const H3000__FrameMeta *m)
{
	struct svc_call *pc = &cc->c;
	struct ing_svc *s = pc->svc;
	const char *F = m->frameid, *W = ctl_wafer(m);
	/* a session that negotiated RDMA_WRITE has every frame granted and pushed */
	const struct xport_ops *xp = svc_call_push(pc) ? &xport_rdma_write : &xport_rdma_read;
	struct admit_req *r = &cc->req;
	struct ing_frame *f;
	int rc;

	if (svc_frame_find(s, W, F)) {
		/* an earlier send still here (a lost session's): retryable, the only retryable
		 * INVALID_ARGUMENT, which libingest waits out (producer/fleet.c ack_in_flight) */
		svc_nack(pc, W, F, ING_E_INVALID_ARGUMENT, true, "frame %s of wafer %s: already in flight in this node", F, W);
		goto done;
	}
	if (ing_svc_stopping(s)) {
		svc_nack(pc, W, F, ING_E_SHUTTING_DOWN, true, "frame %s: ingest node is shutting down", F);
		goto done;
	}
	if (!svc_rdma_engine(s)) {
		rc = -ENOTCONN;
		goto refused;
	}
	svc_call_admit_req(pc, r, xp, cc, m->length);
	rc = admit_try(svc_admission(s), r, &f);
	if (rc == -EAGAIN)
		return CTL_WAIT;
	if (rc)
		goto refused;
	snprintf(f->frame_id, sizeof(f->frame_id), "%s", F);
	snprintf(f->wafer_id, sizeof(f->wafer_id), "%s", W);
	f->session_id = svc_call_session(pc);
	f->length = m->length;
	f->timestamp = m->timestamp;
	f->crc32c = m->crc32c;
	f->has_crc = m->hascrc32c;
	f->transport = xp->xport;
	f->raddr = m->addr;
	f->rkey = m->rkey;
	f->t_admit_ns = ing_now_ns();
	if (svc_frame_admit(s, pc, xp, f, &rc))
		return CTL_DONE;
	if (rc == -ENOBUFS)   /* the lcore's job ring is full: wait for it like for a slot */
		return admit_defer(svc_admission(s), r) == -EAGAIN ? CTL_WAIT : CTL_DONE;
refused:
	if (rc == -ENOTCONN) {
		svc_nack(pc, W, F, ING_E_NO_TRANSPORT, false,
			 "frame %s: no RDMA connection for this session, so the node cannot read it; "
			 "connect RDMA (Negotiate + rdma_cm) or send the bytes with PushFrames", F);
	} else {
		svc_nack(pc, W, F, ING_E_BUSY, true, "frame %s: cannot queue the RDMA read (%d)", F, rc);
	}
done:
	admit_cancel(svc_admission(s), r);
	return CTL_DONE;
}

static void ctl_park(struct ctl_call *cc, H3000__FrameMeta *m)
{
	struct svc_call *pc = &cc->c;

	struct ing_log_ctx lc = svc_log_call(pc);
	lc.wafer = m->waferid;
	lc.frame = m->frameid;
	ING_LOGC(ING_LOG_DEBUG, "svc", &lc, "frame %s: waits for a %s (ControlStream call %" PRIu64 ")",
		 m->frameid, cc->req.why == ADMIT_CREDIT ? "credit" : "pool slot", pc->id);
	cc->meta = m;
	svc_call_set_blocked(pc, true);   /* svc_call_check_done: not done while a frame waits */
	svc_note_parked(pc->svc);
	svc_call_pause(pc, SVC_PAUSE_BLOCKED);
}

/* The parked FrameMeta is handled: let the input flow again. */
static void ctl_unpark(struct ctl_call *cc)
{
	struct svc_call *pc = &cc->c;
	cc->meta = NULL;
	svc_call_set_blocked(pc, false);
	if (svc_call_closing(pc))
		return;
	svc_call_unpause(pc, SVC_PAUSE_BLOCKED);  /* may deliver (and park) the next FrameMeta */
	svc_call_check_done(pc);
}

void svc_ctl_progress(struct admit_req *r, bool expired)
{
	struct ctl_call *cc = r->owner;
	struct svc_call *pc = &cc->c;
	H3000__FrameMeta *m = cc->meta;

	if (!m)
		return;
	if (svc_call_closing(pc)) {
		admit_cancel(svc_admission(pc->svc), r);   /* the call is ending: hold nothing back */
	} else {
		if (expired)
			svc_nack(pc, ctl_wafer(m), m->frameid, ING_E_BUSY, true, "frame %s: no pool slot or credit for %u ms",
				 m->frameid, svc_opts(pc->svc)->frame_timeout_ms);
		else if (ctl_admit(cc, m) == CTL_WAIT)
			return;
	}
	ctl_unpark(cc);
}

/* The call is over: a FrameMeta still parked is dropped with it (never admitted). */
void svc_ctl_conn_lost(struct svc_call *pc)
{
	struct ctl_call *cc = (struct ctl_call *)pc;
	admit_cancel(svc_admission(pc->svc), &cc->req);
	cc->meta = NULL;
	svc_call_set_blocked(pc, false);
}

static int ctl_start(struct ing_grpc_call *c, void *ctx)
{
	struct ing_svc *s = ctx;
	struct svc_call *pc = svc_call_new(s, c, &xport_rdma_read, sizeof(struct ctl_call));
	if (!pc) {
		ing_grpc_call_finish(c, ING_GRPC_RESOURCE_EXHAUSTED, "out of memory");
		return ING_GRPC_RESOURCE_EXHAUSTED;
	}
	if (svc_call_bind_header(pc)) {
		int st = pc->err_status;
		struct ing_log_ctx lc = svc_log_call(pc);
		ING_LOGC(ING_LOG_INFO, "svc", &lc, "ControlStream from %s refused: %s", ing_grpc_call_peer(c),
			 pc->err_msg);
		ing_grpc_call_finish(c, st, pc->err_msg);
		svc_call_free(pc);
		return st;
	}
	ing_grpc_call_set_user(c, pc);
	return ING_GRPC_OK;
}

static int ctl_message(struct ing_grpc_call *c, const uint8_t *msg, size_t len)
{
	struct svc_call *pc = ing_grpc_call_user(c);
	struct ctl_call *cc = (struct ctl_call *)pc;
	ProtobufCAllocator a;
	char why[ING_FRAME_MSG_MAX];

	if (!pc || svc_call_closing(pc))
		return 0;
	if (cc->meta) {
		/* cannot happen: a paused call gets no message; never overwrite the arena */
		ING_ERR("svc", "ControlStream call %" PRIu64 ": FrameMeta delivered while one waits", pc->id);
		return ING_GRPC_INTERNAL;
	}
	/*
	 * Authentication is decided before anything else is said about the message: a
	 * stream that has no session yet binds one first (the h3000-session-id header was
	 * tried at start; here FrameMeta.sessionId, or an implicit session when the node
	 * takes unauthenticated clients). A message that cannot even be parsed names no
	 * session, so on an authenticating node it ends the call UNAUTHENTICATED.
	 */
	H3000__FrameMeta *m = NULL;
	bool nul = len <= SVC_META_MAX && svc_pb_string_has_nul(msg, len, 1, 5);
	svc_arena_allocator(pc, &a);
	if (len <= SVC_META_MAX)
		m = h3000__frame_meta__unpack(&a, len, msg);
	if (!svc_call_session(pc) && svc_call_bind_session(pc, m ? m->sessionid : 0)) {
		struct ing_log_ctx lc = svc_log_call(pc);
		ING_LOGC(ING_LOG_INFO, "svc", &lc, "ControlStream from %s: %s", ing_grpc_call_peer(c), pc->err_msg);
		ing_grpc_call_finish(c, pc->err_status, pc->err_msg);
		return pc->err_status;
	}
	if (len > SVC_META_MAX) {
		svc_nack(pc, NULL, "", ING_E_INVALID_ARGUMENT, false,
			 "FrameMeta of %zu bytes is larger than %u", len, SVC_META_MAX);
		return 0;
	}
	if (!m) {
		svc_nack(pc, NULL, "", ING_E_INVALID_ARGUMENT, false, "malformed FrameMeta (%zu bytes)", len);
		return 0;
	}
	const char *F = m->frameid;
	if (nul) {
		svc_nack(pc, NULL, F, ING_E_INVALID_ARGUMENT, false,
			 "frameId or waferId contains a NUL byte: both must be " ING_ID_RULE);
		return 0;
	}
	if (m->sessionid && m->sessionid != svc_call_session(pc)) {
		svc_nack(pc, NULL, F, ING_E_INVALID_ARGUMENT, false,
			 "frame %s: sessionId %" PRIu64 " differs from the stream's session %" PRIu64,
			 F, m->sessionid, svc_call_session(pc));
		return 0;
	}
	const char *wafer;
	int code = svc_meta_check(pc, F, strlen(F), NULL, m->length, m->waferid, &wafer, why,
				  sizeof(why));
	if (code) {
		svc_nack(pc, code == ING_E_NO_SPACE ? wafer : NULL, F, code, code == ING_E_NO_SPACE, "%s",
			 why);
		return 0;
	}
	if (ctl_admit(cc, m) == CTL_WAIT)
		ctl_park(cc, m);
	return 0;
}

static void ctl_half_close(struct ing_grpc_call *c)
{
	struct svc_call *pc = ing_grpc_call_user(c);
	if (!pc)
		return;
	svc_call_half_close(pc);
	svc_call_check_done(pc);
}


const struct ing_grpc_method svc_ctl_method = {
	.path = "/h3000.RDMASvc/ControlStream",
	.on_start = ctl_start,
	.on_message = ctl_message,
	.on_half_close = ctl_half_close,
	.on_writable = svc_on_writable,
	.on_close = svc_on_close,
};
