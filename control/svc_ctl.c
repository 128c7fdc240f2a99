/* SPDX-License-Identifier: Apache-2.0 */
/*
 * svc_ctl.c - ControlStream, the seed RPC: one FrameMeta per frame the node should pull
 * with RDMA READ from the producer's registered memory. Until an RDMA connection backs
 * the session (svc_rdma_enqueue), every valid descriptor is answered with
 * Ack{ok=false, code=ERROR_NO_TRANSPORT}; invalid ones with INVALID_ARGUMENT/TOO_LARGE;
 * the stream stays open either way. Each frame gets one final Ack (DURABLE or the
 * failure), as the seed's consumer gave; RECEIVED first only for sessions that asked.
 * Acks go out in the order the descriptors came in. A descriptor that finds no free slot
 * or credit waits (the call is paused; see "Backpressure" below), it is never refused
 * as busy while the node still makes progress.
 */
#include "control/svc_internal.h"
#include "common/clock.h"
#include "common/ident.h"
#include "common/log.h"
#include "h3000.pb-c.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* RDMA hook: svc_rdma_enqueue() in control/svc_rdma.c (slot, admission, READ job). */

/*
 * Backpressure. With no free slot or no credit (or the lcore's job ring full) the
 * FrameMeta waits: the call is paused (the gRPC layer then delivers nothing more, and
 * HTTP/2 flow control stops the client), the unpacked FrameMeta stays in the call's
 * arena, and the call sits on svc->ctl_wait_head. At most one parked FrameMeta per call,
 * so memory is bounded by the number of calls. Retried, oldest first, whenever a frame
 * releases its slot or credit (svc_ctl_wake from svc_kick's timer and from
 * svc_rdma_from_lcore), and every CTL_RECHECK_NS while anything is parked as a backstop
 * (credit limits can change without a release). A FrameMeta that waited
 * frame_timeout_ms is answered Ack{ERROR_BUSY, retryable} and the call goes on.
 */
#define CTL_RECHECK_NS 2000000ull

enum ctl_verdict { CTL_DONE = 0, CTL_WAIT = 1 };

/* The wafer a validated FrameMeta is filed under (empty: the default wafer). */
static const char *ctl_wafer(const H3000__FrameMeta *m)
{
	return m->waferid && *m->waferid ? m->waferid : ING_DEFAULT_WAFER;
}

/* Try to admit a validated FrameMeta: CTL_DONE when it was queued or answered. */
static int ctl_admit(struct svc_call *pc, const H3000__FrameMeta *m)
{
	struct ing_svc *s = pc->svc;
	const char *F = m->frameid, *W = ctl_wafer(m);

	if (svc_frame_find(s, W, F)) {
		svc_nack(pc, F, ING_E_INVALID_ARGUMENT, true, "frame %s of wafer %s: already in flight in this node", F, W);
		return CTL_DONE;
	}
	if (ing_svc_stopping(s)) {
		svc_nack(pc, F, ING_E_SHUTTING_DOWN, true, "frame %s: ingest node is shutting down", F);
		return CTL_DONE;
	}
	int rc = svc_rdma_enqueue(pc, m, W);
	if (rc == -EAGAIN || rc == -ENOBUFS)
		return CTL_WAIT;
	if (rc == -ENOTCONN) {
		svc_nack(pc, F, ING_E_NO_TRANSPORT, false,
			 "frame %s: no RDMA connection for this session, so the node cannot read it; "
			 "connect RDMA (Negotiate + rdma_cm) or send the bytes with PushFrames", F);
	} else if (rc) {
		svc_nack(pc, F, ING_E_BUSY, true, "frame %s: cannot queue the RDMA read (%d)", F, rc);
	}
	return CTL_DONE;
}

static void ctl_timer_cb(void *arg);

static void ctl_timer_arm(struct ing_svc *s, uint64_t at)
{
	if (!s->ctl_timer_ready) {
		ing_timer_init(&s->ctl_timer, ctl_timer_cb, s);
		s->ctl_timer_ready = true;
	}
	if (!ing_timer_armed(&s->ctl_timer) || s->ctl_timer.deadline_ns > at)
		ing_timer_arm(s->loop, &s->ctl_timer, at);
}

static void ctl_list_append(struct ing_svc *s, struct svc_call *pc)
{
	pc->ctl_next = NULL;
	if (s->ctl_wait_tail)
		s->ctl_wait_tail->ctl_next = pc;
	else
		s->ctl_wait_head = pc;
	s->ctl_wait_tail = pc;
}

static void ctl_list_remove(struct ing_svc *s, struct svc_call *pc)
{
	struct svc_call **pp = &s->ctl_wait_head, *prev = NULL;

	while (*pp && *pp != pc) {
		prev = *pp;
		pp = &(*pp)->ctl_next;
	}
	if (!*pp)
		return;
	*pp = pc->ctl_next;
	if (s->ctl_wait_tail == pc)
		s->ctl_wait_tail = prev;
	pc->ctl_next = NULL;
}

static void ctl_park(struct svc_call *pc, H3000__FrameMeta *m)
{
	struct ing_svc *s = pc->svc;

	ING_DBG("svc", "frame %s: waits for a %s (ControlStream call %" PRIu64 ")", m->frameid,
		pc->sess->inflight >= pc->sess->credits ? "credit" : "pool slot", pc->id);
	pc->ctl_meta = m;
	pc->ctl_parked_ns = ing_now_ns();
	pc->blocked = true;        /* svc_call_check_done: not done while a frame waits */
	s->ctl_nparked++;
	s->c_ctl_parked++;
	ctl_list_append(s, pc);
	svc_call_pause(pc, SVC_PAUSE_BLOCKED);
	ctl_timer_arm(s, pc->ctl_parked_ns + CTL_RECHECK_NS);
}

/* The parked FrameMeta is handled (or dropped with its call): let the input flow again. */
static void ctl_unpark(struct svc_call *pc)
{
	pc->ctl_meta = NULL;
	pc->blocked = false;
	pc->svc->ctl_nparked--;
	if (pc->finished || pc->want_finish)
		return;
	svc_call_unpause(pc, SVC_PAUSE_BLOCKED);  /* may deliver (and park) the next FrameMeta */
	svc_call_check_done(pc);
}

/* Retry one parked call (already off the list). true: its FrameMeta is no longer parked. */
static bool ctl_retry(struct svc_call *pc, uint64_t now)
{
	struct ing_svc *s = pc->svc;
	H3000__FrameMeta *m = pc->ctl_meta;

	if (!pc->finished && !pc->want_finish && ctl_admit(pc, m) == CTL_WAIT) {
		uint64_t waited = now - pc->ctl_parked_ns;
		if (waited < (uint64_t)s->o.frame_timeout_ms * 1000000ull)
			return false;
		svc_nack(pc, m->frameid, ING_E_BUSY, true,
			 "frame %s: no pool slot or credit for %u ms", m->frameid,
			 s->o.frame_timeout_ms);
	}
	ctl_unpark(pc);
	return true;
}

static void ctl_timer_cb(void *arg)
{
	struct ing_svc *s = arg;
	uint64_t now = ing_now_ns();
	struct svc_call *w = s->ctl_wait_head, *keep = NULL, *keep_tail = NULL;

	/* Detach the list: a call that is admitted and resumed may park its next FrameMeta,
	 * which goes to the (now empty) service list, behind the ones still waiting. No call
	 * is freed under us (calls end from the gRPC layer's own loop callbacks). */
	s->ctl_wait_head = s->ctl_wait_tail = NULL;
	while (w) {
		struct svc_call *nx = w->ctl_next;
		w->ctl_next = NULL;
		if (!ctl_retry(w, now)) {
			if (keep_tail)
				keep_tail->ctl_next = w;
			else
				keep = w;
			keep_tail = w;
		}
		w = nx;
	}
	if (keep) {   /* they waited longer than anything parked meanwhile */
		keep_tail->ctl_next = s->ctl_wait_head;
		if (!s->ctl_wait_head)
			s->ctl_wait_tail = keep_tail;
		s->ctl_wait_head = keep;
	}
	if (s->ctl_wait_head)
		ctl_timer_arm(s, ing_now_ns() + CTL_RECHECK_NS);
}

void svc_ctl_wake(struct ing_svc *s)
{
	if (s->ctl_wait_head)
		ctl_timer_arm(s, ing_now_ns());
}

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
	if (pc->ctl_meta) {
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
	if (!pc->sess && svc_call_bind_session(pc, m ? m->sessionid : 0)) {
		ING_INFO("svc", "ControlStream from %s: %s", ing_grpc_call_peer(c), pc->err_msg);
		ing_grpc_call_finish(c, pc->err_status, pc->err_msg);
		return pc->err_status;
	}
	if (len > SVC_META_MAX) {
		svc_nack(pc, "", ING_E_INVALID_ARGUMENT, false,
			 "FrameMeta of %zu bytes is larger than %u", len, SVC_META_MAX);
		return 0;
	}
	if (!m) {
		svc_nack(pc, "", ING_E_INVALID_ARGUMENT, false, "malformed FrameMeta (%zu bytes)", len);
		return 0;
	}
	const char *F = m->frameid;
	if (nul) {
		svc_nack(pc, F, ING_E_INVALID_ARGUMENT, false,
			 "frameId or waferId contains a NUL byte: both must be " ING_ID_RULE);
		return 0;
	}
	if (m->sessionid && m->sessionid != pc->sess->id) {
		svc_nack(pc, F, ING_E_INVALID_ARGUMENT, false,
			 "frame %s: sessionId %" PRIu64 " differs from the stream's session %" PRIu64,
			 F, m->sessionid, pc->sess->id);
		return 0;
	}
	const char *wafer;
	int code = svc_meta_check(s, pc->sess, F, strlen(F), NULL, m->length, m->waferid, &wafer,
				  why, sizeof(why));
	if (code) {
		svc_nack(pc, F, code, false, "%s", why);
		return 0;
	}
	if (ctl_admit(pc, m) == CTL_WAIT)
		ctl_park(pc, m);
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


/* The call is over: a FrameMeta still parked is dropped with it (never admitted). */
static void ctl_close(struct ing_grpc_call *c, int status)
{
	struct svc_call *pc = ing_grpc_call_user(c);

	if (pc && pc->ctl_meta) {
		struct ing_svc *s = pc->svc;
		ctl_list_remove(s, pc);
		pc->ctl_meta = NULL;
		pc->blocked = false;
		s->ctl_nparked--;
		if (!s->ctl_wait_head && s->ctl_timer_ready)
			ing_timer_cancel(s->loop, &s->ctl_timer);
	}
	svc_on_close(c, status);
}

const struct ing_grpc_method svc_ctl_method = {
	.path = "/h3000.RDMASvc/ControlStream",
	.on_start = ctl_start,
	.on_message = ctl_message,
	.on_half_close = ctl_half_close,
	.on_writable = svc_on_writable,
	.on_close = ctl_close,
};
