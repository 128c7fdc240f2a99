/* SPDX-License-Identifier: Apache-2.0 */
/*
 * svc_ctl.c - ControlStream, the seed RPC: one FrameMeta per frame the node should pull
 * with RDMA READ from the producer's registered memory. Until an RDMA connection backs
 * the session (svc_rdma_enqueue), every valid descriptor is answered with
 * Ack{ok=false, code=ERROR_NO_TRANSPORT}; invalid ones with INVALID_ARGUMENT/TOO_LARGE.
 * Acks go out in the order the descriptors came in.
 */
#include "control/svc_internal.h"
#include "common/log.h"
#include "h3000.pb-c.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>

/* RDMA hook: svc_rdma_enqueue() in control/svc_rdma.c (slot, admission, READ job). */

static int ctl_start(struct ing_grpc_call *c, void *ctx)
{
	struct ing_svc *s = ctx;
	struct svc_call *pc = svc_call_new(s, c, SVC_CALL_CTL);
	if (!pc) {
		ing_grpc_call_finish(c, ING_GRPC_RESOURCE_EXHAUSTED, "out of memory");
		return ING_GRPC_RESOURCE_EXHAUSTED;
	}
	if (svc_call_bind_header(pc)) {
		int st = pc->err_status;
		ING_INFO("svc", "ControlStream from %s refused: %s", ing_grpc_call_peer(c), pc->err_msg);
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
	struct ing_svc *s;
	ProtobufCAllocator a;
	char why[ING_FRAME_MSG_MAX];

	if (!pc || pc->finished || pc->want_finish)
		return 0;
	s = pc->svc;
	if (len > SVC_META_MAX) {
		svc_nack(pc, 0, ING_E_INVALID_ARGUMENT, false,
			 "FrameMeta of %zu bytes is larger than %u", len, SVC_META_MAX);
		return 0;
	}
	svc_arena_allocator(pc, &a);
	H3000__FrameMeta *m = h3000__frame_meta__unpack(&a, len, msg);
	if (!m) {
		svc_nack(pc, 0, ING_E_INVALID_ARGUMENT, false, "malformed FrameMeta (%zu bytes)", len);
		return 0;
	}
	uint64_t F = m->frameid;
	if (!pc->sess) {
		if (svc_call_bind_session(pc, m->sessionid)) {
			ING_INFO("svc", "ControlStream from %s: %s", ing_grpc_call_peer(c), pc->err_msg);
			ing_grpc_call_finish(c, pc->err_status, pc->err_msg);
			return pc->err_status;
		}
	} else if (m->sessionid && m->sessionid != pc->sess->id) {
		svc_nack(pc, F, ING_E_INVALID_ARGUMENT, false,
			 "frame %" PRIu64 ": sessionId %" PRIu64 " differs from the stream's session %" PRIu64,
			 F, m->sessionid, pc->sess->id);
		return 0;
	}
	int code = svc_meta_check(s, pc->sess, F, F, m->length, m->waferid, why, sizeof(why));
	if (code) {
		svc_nack(pc, F, code, false, "%s", why);
		return 0;
	}
	if (svc_frame_find(s, F)) {
		svc_nack(pc, F, ING_E_INVALID_ARGUMENT, true, "frame %" PRIu64 ": already in flight in this node", F);
		return 0;
	}
	if (ing_svc_stopping(s)) {
		svc_nack(pc, F, ING_E_SHUTTING_DOWN, true, "frame %" PRIu64 ": ingest node is shutting down", F);
		return 0;
	}
	int rc = svc_rdma_enqueue(pc, m);
	if (rc == -ENOTCONN) {
		struct svc_ack ack = { .frame_id = F, .ok = false, .code = ING_E_NO_TRANSPORT };
		snprintf(ack.msg, sizeof(ack.msg),
			 "no RDMA connection for this session; send the bytes with PushFrames");
		s->c_refused++;
		svc_send_ack(pc, &ack);
	} else if (rc) {
		svc_nack(pc, F, ING_E_BUSY, true, "frame %" PRIu64 ": cannot queue the RDMA read (%d)", F, rc);
	}
	return 0;
}

static void ctl_half_close(struct ing_grpc_call *c)
{
	struct svc_call *pc = ing_grpc_call_user(c);
	if (!pc)
		return;
	pc->half_closed = true;
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
