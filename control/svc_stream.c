/* SPDX-License-Identifier: Apache-2.0 */
/*
 * svc_stream.c - PushFrames, the fallback data path: FrameChunk messages parsed as they
 * stream in (svc_chunk.c), data copied once, straight into the frame's pool slot.
 *
 * Per message: the fields before `data` decide where its bytes go (resolve): into the
 * frame's slot at the chunk offset (MSG_DIRECT), nowhere after a per-frame error
 * (MSG_DISCARD, the Ack already sent), or into the call's stage buffer (MSG_STAGE) when
 * the fields came out of order or the frame must wait for a slot or a credit. A waiting
 * message blocks the call: its input is paused and it sits on the service's waiter list
 * until a slot or credit comes back. Messages the gRPC layer still delivers meanwhile are
 * kept, bounded, in the call's backlog and replayed in order.
 *
 * Per-frame errors become Ack{ok=false} and free the slot; the stream carries on.
 * Malformed protobuf or an unknown session fails the call.
 *
 * One copy: the gRPC layer reads the data field's bytes from the socket straight into
 * the slot where it can (stream_msg_sink / stream_msg_placed: runs of DATA frames), so
 * the kernel's copy is the only one; the crc32c is then computed over the slot right
 * after the read, while the bytes are in the cache. What still comes through
 * stream_msg_data (the few data bytes that share a read with frame headers and protobuf
 * keys) is copied into the slot by ing_crc32c_copy, which computes the crc32c in the same
 * pass. Chunks land in offset order, so the crc chains: a message starts from the
 * frame's crc_run (the crc of buf[0..filled)), pc->msg_crc follows its data, and only
 * advance() (the message accepted) makes it the new crc_run. A frame that completes carries crc_done, and persistence verifies the
 * declared crc against it instead of reading the frame again.
 */
#include "control/admit.h"
#include "control/grpc/grpc.h"
#include "control/service.h"
#include "control/svc_chunk.h"
#include "control/xport.h"
#include "dataplane/dataplane.h"
#include "common/clock.h"
#include "common/crc32c.h"
#include "common/ident.h"
#include "common/log.h"
#include "h3000.pb-c.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum resolve_result { R_DIRECT, R_DISCARD, R_WAIT, R_FAIL };
enum msg_mode { MSG_UNDECIDED = 0, MSG_DIRECT, MSG_STAGE, MSG_DISCARD };

#define E_CALLFAIL (-EPROTO)   /* a callback failed the call: pc->c.err_status/err_msg */
#define REFUSED_MAX 16u        /* refused frames whose later chunks are dropped */

/* A PushFrames call: the core's part first, then what only this transport needs. */
struct stream_call {
	struct svc_call c;
	/* the message being parsed */
	struct chunk_parser cp;
	int mode;                /* enum msg_mode */
	struct svc_frame *cur;   /* the frame its data goes to (MSG_DIRECT) */
	char snap_frame_id[CP_ID_MAX + 1];
	uint64_t snap_offset, snap_session;
	uint32_t msg_crc;        /* crc32c of the frame's bytes through this message's data;
				  * becomes the frame's crc_run only if the message is accepted */
	/* frames refused or failed on this call whose later chunks are dropped silently (one
	 * frame, one final answer): a small ring of their ids, forgotten at `last` */
	struct {
		bool used;
		char id[CP_ID_MAX + 1];   /* as the chunk parser keeps it ("" is an id here) */
	} refused[REFUSED_MAX];
	unsigned refused_next;
	/* a first chunk waiting for admission (c.blocked); its data is in stage */
	struct admit_req req;
	uint8_t *stage;
	size_t stage_cap;
	/* messages that arrive while blocked: [u32 len][payload]... */
	uint8_t *bl;
	size_t bl_len, bl_cap;
	size_t bl_open;          /* 1 + offset of the open (incomplete) record, 0 none */
};

/* Remember that frame_id was refused or failed: its later chunks are dropped without
 * another Ack. refused_take: true when it was (forget: and drop it from the ring, at its
 * last chunk or a new first chunk). */
static bool refused_take(struct stream_call *pc, const char *frame_id, bool forget)
{
	for (unsigned i = 0; i < REFUSED_MAX; i++) {
		if (pc->refused[i].used && strcmp(pc->refused[i].id, frame_id) == 0) {
			if (forget)
				pc->refused[i].used = false;
			return true;
		}
	}
	return false;
}

static void refused_add(struct stream_call *pc, const char *frame_id)
{
	if (!frame_id || refused_take(pc, frame_id, false))
		return;
	pc->refused[pc->refused_next].used = true;
	snprintf(pc->refused[pc->refused_next].id, sizeof(pc->refused[0].id), "%s", frame_id);
	pc->refused_next = (pc->refused_next + 1) % REFUSED_MAX;
}

/* Refuse a frame: its one answer; its later chunks are dropped. */
static void stream_nack(struct stream_call *pc, const char *wafer, const char *frame_id, int code,
		      bool retryable, const char *fmt, ...) __attribute__((format(printf, 6, 7)));
static void stream_nack(struct stream_call *pc, const char *wafer, const char *frame_id, int code,
		      bool retryable, const char *fmt, ...)
{
	va_list ap;
	refused_add(pc, frame_id);
	va_start(ap, fmt);
	svc_vnack(&pc->c, wafer, frame_id, code, retryable, fmt, ap);
	va_end(ap);
}

/* Decide where the current message's data goes; NACKs per-frame errors itself. */
static int resolve_msg(struct stream_call *pc, uint64_t n)
{
	struct ing_svc *s = pc->c.svc;
	struct chunk_parser *p = &pc->cp;
	const char *F = p->frame_id;
	uint64_t O = p->offset;
	struct svc_frame *e;

	memcpy(pc->snap_frame_id, p->frame_id, sizeof(pc->snap_frame_id));
	pc->snap_offset = O;
	pc->snap_session = p->session_id;
	pc->cur = NULL;
	if (!svc_call_session(&pc->c)) {
		if (svc_call_bind_session(&pc->c, p->session_id))
			return R_FAIL;
	} else if (p->session_id && p->session_id != svc_call_session(&pc->c)) {
		stream_nack(pc, NULL, F, ING_E_INVALID_ARGUMENT, false,
			 "frame %s: sessionId %" PRIu64 " differs from the stream's session %" PRIu64,
			 F, p->session_id, svc_call_session(&pc->c));
		return R_DISCARD;
	}

	if (O == 0 && (p->seen & (1u << CP_F_META))) {
		/* first chunk */
		if (ing_svc_stopping(s)) {
			stream_nack(pc, NULL, F, ING_E_SHUTTING_DOWN, true,
				 "frame %s: ingest node is shutting down", F);
			return R_DISCARD;
		}
		if (p->meta_oversize) {
			stream_nack(pc, NULL, F, ING_E_INVALID_ARGUMENT, false,
				 "frame %s: meta larger than %u bytes", F, SVC_META_MAX);
			return R_DISCARD;
		}
		ProtobufCAllocator a;
		svc_arena_allocator(&pc->c, &a);
		H3000__FrameMeta *m = h3000__frame_meta__unpack(&a, p->meta_len, p->meta);
		if (!m) {
			stream_nack(pc, NULL, F, ING_E_INVALID_ARGUMENT, false, "frame %s: malformed meta", F);
			return R_DISCARD;
		}
		if (svc_pb_string_has_nul(p->meta, p->meta_len, 1, 5)) {
			stream_nack(pc, NULL, F, ING_E_INVALID_ARGUMENT, false,
				 "frame %s: meta.frameId or meta.waferId contains a NUL byte: both must be "
				 ING_ID_RULE, F);
			return R_DISCARD;
		}
		char why[ING_FRAME_MSG_MAX];
		const char *wafer;
		int code = svc_meta_check(&pc->c, F, p->id_len, m->frameid, m->length, m->waferid,
					  &wafer, why, sizeof(why));
		if (code) {
			stream_nack(pc, code == ING_E_NO_SPACE ? wafer : NULL, F, code, code == ING_E_NO_SPACE,
				    "%s", why);
			return R_DISCARD;
		}
		e = svc_frame_find_call(s, &pc->c, F);
		if (e && svc_frame_filling(e)) {
			svc_frame_fail(e, ING_E_INVALID_ARGUMENT, false,
				       "frame %s: duplicate first chunk while the frame is in progress; frame dropped",
				       F);
			return R_DISCARD;
		}
		if (svc_frame_find(s, wafer, F)) {
			/* as svc_ctl.c: the only retryable INVALID_ARGUMENT (fleet.c ack_in_flight) */
			stream_nack(pc, wafer, F, ING_E_INVALID_ARGUMENT, true,
				 "frame %s of wafer %s: already in flight in this node", F, wafer);
			return R_DISCARD;
		}
		if (n > m->length) {
			stream_nack(pc, wafer, F, ING_E_INVALID_ARGUMENT, false,
				 "frame %s: chunk of %" PRIu64 " bytes past the declared length %" PRIu64,
				 F, n, m->length);
			return R_DISCARD;
		}
		/* credit and slot through the admission queue (first come, first served per
		 * size class, shared with the other transports); a retry keeps its place */
		struct admit_req *r = &pc->req;
		struct ing_frame *f;
		svc_call_admit_req(&pc->c, r, &xport_grpc_stream, pc, m->length);
		int rc = admit_try(svc_admission(s), r, &f);
		if (rc == -EAGAIN)
			return R_WAIT;
		if (rc) {
			stream_nack(pc, wafer, F, ING_E_TOO_LARGE, false, "frame %s: %" PRIu64 " bytes fit no slot",
				  F, m->length);
			return R_DISCARD;
		}
		memcpy(f->frame_id, F, p->id_len + 1);   /* checked: id_len <= ING_ID_MAX */
		snprintf(f->wafer_id, sizeof(f->wafer_id), "%s", wafer);
		f->session_id = svc_call_session(&pc->c);
		f->length = m->length;
		f->filled = 0;
		f->timestamp = m->timestamp;
		f->crc32c = m->crc32c;
		f->has_crc = m->hascrc32c;
		f->transport = ING_XPORT_GRPC;
		f->t_admit_ns = ing_now_ns();
		e = svc_frame_admit(s, &pc->c, &xport_grpc_stream, f, &rc);
		if (!e) {
			stream_nack(pc, wafer, F, ING_E_BUSY, true, "frame %s: cannot be admitted (%d)", F, rc);
			return R_DISCARD;
		}
		refused_take(pc, F, true);   /* a retry of a frame refused earlier */
		pc->cur = e;
		return R_DIRECT;
	}

	/* continuation */
	e = svc_frame_find_call(s, &pc->c, F);
	if (!e && refused_take(pc, F, p->last))
		return R_DISCARD;   /* the frame was refused or failed: it had its one answer */
	if (O == 0 && !e) {
		stream_nack(pc, NULL, F, ING_E_INVALID_ARGUMENT, false,
			 "frame %s: first chunk (offset 0) carries no meta", F);
		return R_DISCARD;
	}
	if (!e) {
		stream_nack(pc, NULL, F, ING_E_INVALID_ARGUMENT, false,
			 "frame %s: chunk at offset %" PRIu64
			 " but the frame is not in progress on this stream (missing first chunk?)", F, O);
		return R_DISCARD;
	}
	struct ing_frame *ef = svc_frame_ing(e);
	if (!svc_frame_filling(e)) {
		if (O == ef->length && n == 0)
			return R_DISCARD; /* an empty closing chunk after the frame completed */
		stream_nack(pc, ef->wafer_id, F, ING_E_INVALID_ARGUMENT, false,
			 "frame %s: chunk at offset %" PRIu64 " after the frame was complete", F, O);
		return R_DISCARD;
	}
	if (O != ef->filled) {
		svc_frame_fail(e, ING_E_INVALID_ARGUMENT, false,
			       "frame %s: chunk at offset %" PRIu64 ", expected %" PRIu64
			       " (gap or overlap); frame dropped", F, O, ef->filled);
		return R_DISCARD;
	}
	if (n > ef->length - O) {
		svc_frame_fail(e, ING_E_INVALID_ARGUMENT, false,
			       "frame %s: chunk [%" PRIu64 ", %" PRIu64 ") past the declared length %" PRIu64
			       "; frame dropped", F, O, O + n, ef->length);
		return R_DISCARD;
	}
	pc->cur = e;
	return R_DIRECT;
}

/* Every outcome but waiting ends the message's admission request. */
static int resolve(struct stream_call *pc, uint64_t n)
{
	int r = resolve_msg(pc, n);
	if (r != R_WAIT)
		admit_cancel(svc_admission(pc->c.svc), &pc->req);
	return r;
}

/* A staged message's data goes to its frame, which resolve() just chose (R_DIRECT). */
static void copy_staged(struct stream_call *pc)
{
	struct ing_frame *f = svc_frame_ing(pc->cur);
	pc->msg_crc = ing_crc32c_copy(f->crc_run, f->buf + pc->snap_offset, pc->stage,
				      pc->cp.data_len);
}

/* The message's n bytes are in the slot: advance, complete or fail on an early `last`. */
static void advance(struct stream_call *pc, uint64_t n)
{
	struct svc_frame *e = pc->cur;
	struct ing_frame *f;

	pc->cur = NULL;
	if (!e || !svc_frame_filling(e))
		return;
	f = svc_frame_ing(e);
	f->filled += n;
	f->crc_run = pc->msg_crc;
	if (n)
		svc_frame_progress(e);
	if (f->filled == f->length) {
		f->crc_done = true;
		svc_frame_complete(e);
	} else if (pc->cp.last) {
		svc_frame_fail(e, ING_E_INVALID_ARGUMENT, false,
			       "frame %s: last chunk ends at %" PRIu64 " of %" PRIu64 " bytes; frame dropped",
			       f->frame_id, f->filled, f->length);
	}
}

/* The stage buffer grows to the largest data field staged on this call (<= max_msg). */
static int stage_prepare(struct stream_call *pc, uint64_t len)
{
	size_t max = svc_opts(pc->c.svc)->max_msg;
	if (len > max) {
		svc_call_error(&pc->c, ING_GRPC_RESOURCE_EXHAUSTED, "chunk data of %" PRIu64 " bytes above %zu",
			       len, max);
		return E_CALLFAIL;
	}
	if (len > pc->stage_cap || !pc->stage) {
		size_t cap = 65536;
		while (cap < len)
			cap *= 2;
		if (cap > max)
			cap = max;
		uint8_t *n = realloc(pc->stage, cap);
		if (!n) {
			svc_call_error(&pc->c, ING_GRPC_RESOURCE_EXHAUSTED, "out of memory for the stage buffer");
			return E_CALLFAIL;
		}
		pc->stage = n;
		pc->stage_cap = cap;
	}
	pc->mode = MSG_STAGE;
	return 0;
}

/* ---------------------------------------------------------------- parser callbacks */

static int cb_data_begin(void *arg, struct chunk_parser *p, uint64_t len)
{
	struct stream_call *pc = arg;

	/* Data first, or fields out of order: what follows may still change the target. */
	if (!p->ordered || p->seen == (1u << CP_F_DATA))
		return stage_prepare(pc, len);
	switch (resolve(pc, len)) {
	case R_DIRECT:
		pc->mode = MSG_DIRECT;
		pc->msg_crc = svc_frame_ing(pc->cur)->crc_run;   /* resolve: filled == snap_offset */
		return 0;
	case R_DISCARD:
		pc->mode = MSG_DISCARD;
		return 0;
	case R_WAIT:
		return stage_prepare(pc, len);
	default:
		return E_CALLFAIL;
	}
}

static int cb_data(void *arg, struct chunk_parser *p, uint64_t off, const uint8_t *d, size_t n)
{
	struct stream_call *pc = arg;
	(void)p;
	if (pc->mode == MSG_DIRECT)
		pc->msg_crc = ing_crc32c_copy(pc->msg_crc, svc_frame_ing(pc->cur)->buf + pc->snap_offset + off,
					      d, n);
	else if (pc->mode == MSG_STAGE)
		memcpy(pc->stage + off, d, n);
	return 0;
}

static const struct chunk_parser_cbs parser_cbs = {
	.data_begin = cb_data_begin,
	.data = cb_data,
};

/* ---------------------------------------------------------------- messages */

static void msg_begin(struct stream_call *pc, size_t len)
{
	chunk_parser_begin(&pc->cp, len);
	pc->mode = MSG_UNDECIDED;
	pc->cur = NULL;
}

/* A parse error becomes the call's status. */
static int call_error(struct stream_call *pc, int rc)
{
	if (rc == E_CALLFAIL && pc->c.err_status)
		return pc->c.err_status;
	svc_call_error(&pc->c, ING_GRPC_INVALID_ARGUMENT, "malformed FrameChunk: %s",
		       pc->cp.err ? pc->cp.err : "parse error");
	return pc->c.err_status;
}

/* The message waits for admission (its request is queued): stop the input. */
static void block(struct stream_call *pc)
{
	struct ing_log_ctx lc = svc_log_call(&pc->c);
	lc.frame = pc->cp.frame_id;
	ING_LOGC(ING_LOG_DEBUG, "svc", &lc, "frame %s: waits for a %s (call %" PRIu64 ")", pc->cp.frame_id,
		 pc->req.why == ADMIT_CREDIT ? "credit" : "pool slot", pc->c.id);
	svc_call_set_blocked(&pc->c, true);
	svc_call_pause(&pc->c, SVC_PAUSE_BLOCKED);
}

/* The whole message is in. 0, or a gRPC status that fails the call. */
static int msg_finish(struct stream_call *pc)
{
	struct chunk_parser *p = &pc->cp;
	int r;

	switch (pc->mode) {
	case MSG_DISCARD:
		return 0;
	case MSG_DIRECT:
		if (p->late_fields && (strcmp(p->frame_id, pc->snap_frame_id) != 0 ||
				       p->offset != pc->snap_offset || p->session_id != pc->snap_session)) {
			/* the bytes went to the frame the earlier fields named; refuse the chunk */
			stream_nack(pc, NULL, p->frame_id, ING_E_INVALID_ARGUMENT, false,
				 "frame %s: frameId/offset/sessionId after data are not supported",
				 p->frame_id);
			pc->cur = NULL;
			return 0;
		}
		advance(pc, p->data_len);
		return 0;
	case MSG_UNDECIDED:
	case MSG_STAGE:
		r = resolve(pc, p->data_len);
		if (r == R_FAIL)
			return call_error(pc, E_CALLFAIL);
		if (r == R_DISCARD)
			return 0;
		if (r == R_WAIT) {
			block(pc);
			return 0;
		}
		copy_staged(pc);
		advance(pc, p->data_len);
		return 0;
	default:
		return 0;
	}
}

/* ---------------------------------------------------------------- backlog */

static int bl_reserve(struct stream_call *pc, size_t need)
{
	if (pc->bl_len + need <= pc->bl_cap)
		return 0;
	size_t cap = pc->bl_cap ? pc->bl_cap : 65536;
	while (cap < pc->bl_len + need)
		cap *= 2;
	size_t max = svc_opts(pc->c.svc)->backlog_max;
	if (cap > max) {
		if (pc->bl_len + need > max) {
			svc_call_error(&pc->c, ING_GRPC_RESOURCE_EXHAUSTED,
				       "more than %zu bytes sent while the stream was paused", max);
			return -ENOBUFS;
		}
		cap = max;
	}
	uint8_t *n = realloc(pc->bl, cap);
	if (!n) {
		svc_call_error(&pc->c, ING_GRPC_RESOURCE_EXHAUSTED, "out of memory for the stream backlog");
		return -ENOMEM;
	}
	pc->bl = n;
	pc->bl_cap = cap;
	return 0;
}

/* Fail the call from the loop (not inside a gRPC callback). */
static void fail_later(struct stream_call *pc, int status)
{
	svc_call_finish_later(&pc->c, status, pc->c.err_msg);
}

/* Input is done and nothing is held: frames still partial can never complete. */
static void end_of_input(struct stream_call *pc)
{
	if (!pc->c.half_closed || pc->c.blocked || pc->bl_len)
		return;
	svc_call_end_frames(&pc->c, "stream ended");
	svc_call_check_done(&pc->c);
}

static void replay(struct stream_call *pc)
{
	size_t pos = 0;
	int rc;

	while (pos < pc->bl_len && !pc->c.blocked && !svc_call_closing(&pc->c)) {
		uint32_t len;
		memcpy(&len, pc->bl + pos, sizeof(len));
		bool open = pc->bl_open == pos + 1;
		size_t have = open ? pc->bl_len - pos - 4 : len;
		msg_begin(pc, len);
		rc = chunk_parser_feed(&pc->cp, pc->bl + pos + 4, have);
		pos += 4 + have;
		if (rc < 0) {
			fail_later(pc, call_error(pc, rc));
			break;
		}
		if (open) {
			pc->bl_open = 0; /* the rest of this message arrives live */
			break;
		}
		rc = chunk_parser_end(&pc->cp);
		if (rc < 0) {
			fail_later(pc, call_error(pc, rc));
			break;
		}
		rc = msg_finish(pc);
		if (rc) {
			fail_later(pc, rc);
			break;
		}
	}
	if (svc_call_closing(&pc->c))
		pos = pc->bl_len;
	memmove(pc->bl, pc->bl + pos, pc->bl_len - pos);
	pc->bl_len -= pos;
	if (pc->bl_open)
		pc->bl_open -= pos;
}

/* The blocked message may go on (its admission request's turn), or waited too long. */
static void stream_progress(struct admit_req *ar, bool expired)
{
	struct stream_call *pc = ar->owner;
	if (svc_call_closing(&pc->c)) {
		admit_cancel(svc_admission(pc->c.svc), ar);   /* the call is ending: hold nothing back */
		return;
	}
	if (!pc->c.blocked)
		return;   /* not parked yet (the message is still arriving): its end retries */
	struct chunk_parser *p = &pc->cp;
	int r;
	if (expired) {
		stream_nack(pc, NULL, p->frame_id, ING_E_BUSY, true, "frame %s: no pool slot or credit for %u ms",
			  p->frame_id, svc_opts(pc->c.svc)->frame_timeout_ms);
		r = R_DISCARD;
	} else {
		r = resolve(pc, p->data_len);
		if (r == R_WAIT)
			return;
	}
	svc_call_set_blocked(&pc->c, false);
	if (r == R_FAIL) {
		fail_later(pc, call_error(pc, E_CALLFAIL));
		return;
	}
	if (r == R_DIRECT) {
		copy_staged(pc);
		advance(pc, p->data_len);
	}
	if (pc->bl_len)
		replay(pc);
	if (!pc->c.blocked && !svc_call_closing(&pc->c)) {
		svc_call_unpause(&pc->c, SVC_PAUSE_BLOCKED);
		end_of_input(pc);
		svc_call_check_done(&pc->c);
	}
}

/* The frame is failed by the core: its message goes nowhere, its later chunks are dropped. */
static void stream_cancel(struct svc_frame *e)
{
	struct stream_call *pc = (struct stream_call *)svc_frame_call(e);
	refused_add(pc, svc_frame_ing(e)->frame_id);
	if (pc->cur == e) {
		pc->cur = NULL;
		if (pc->mode == MSG_DIRECT)
			pc->mode = MSG_DISCARD;
	}
}

static void stream_conn_lost(struct svc_call *c)
{
	struct stream_call *pc = (struct stream_call *)c;
	admit_cancel(svc_admission(c->svc), &pc->req);
	free(pc->stage);
	pc->stage = NULL;
	free(pc->bl);
	pc->bl = NULL;
	pc->bl_len = pc->bl_cap = 0;
}

/* The fallback: bytes in FrameChunk messages, copied by control into the slot. */
const struct xport_ops xport_grpc_stream = {
	.name = "grpc-stream",
	.xport = ING_XPORT_GRPC,
	.progress = stream_progress,
	.cancel = stream_cancel,
	.conn_lost = stream_conn_lost,
};

/* ---------------------------------------------------------------- gRPC hooks */

static int stream_start(struct ing_grpc_call *c, void *ctx)
{
	struct ing_svc *s = ctx;
	if (ing_svc_stopping(s)) {
		ing_grpc_call_finish(c, ING_GRPC_UNAVAILABLE, "ingest node is shutting down");
		return ING_GRPC_UNAVAILABLE;
	}
	struct stream_call *pc = (struct stream_call *)svc_call_new(s, c, &xport_grpc_stream,
								 sizeof(struct stream_call));
	if (!pc) {
		ing_grpc_call_finish(c, ING_GRPC_RESOURCE_EXHAUSTED, "out of memory");
		return ING_GRPC_RESOURCE_EXHAUSTED;
	}
	chunk_parser_init(&pc->cp, &parser_cbs, pc);
	if (svc_call_bind_header(&pc->c)) {
		int st = pc->c.err_status;
		struct ing_log_ctx lc = svc_log_call(&pc->c);
		ING_LOGC(ING_LOG_INFO, "svc", &lc, "PushFrames from %s refused: %s", ing_grpc_call_peer(c),
			 pc->c.err_msg);
		ing_grpc_call_finish(c, st, pc->c.err_msg);
		svc_call_free(&pc->c);
		return st;
	}
	ing_grpc_call_set_user(c, pc);
	return ING_GRPC_OK;
}

static int stream_msg_begin(struct ing_grpc_call *c, size_t len)
{
	struct stream_call *pc = ing_grpc_call_user(c);
	if (!pc || pc->c.finished)
		return 0;
	if (pc->c.blocked || pc->bl_len) {
		/* paused but the layer still delivers: keep it, in order, bounded */
		if (bl_reserve(pc, 4))
			goto fail;
		uint32_t l = (uint32_t)len;
		memcpy(pc->bl + pc->bl_len, &l, 4);
		pc->bl_open = pc->bl_len + 1;
		pc->bl_len += 4;
		return 0;
	}
	msg_begin(pc, len);
	return 0;
fail:
	ing_grpc_call_finish(c, pc->c.err_status, pc->c.err_msg);
	return pc->c.err_status;
}

static int stream_msg_data(struct ing_grpc_call *c, const uint8_t *d, size_t n)
{
	struct stream_call *pc = ing_grpc_call_user(c);
	int rc;
	if (!pc || pc->c.finished)
		return 0;
	if (pc->bl_open) {
		if (bl_reserve(pc, n)) {
			ing_grpc_call_finish(c, pc->c.err_status, pc->c.err_msg);
			return pc->c.err_status;
		}
		memcpy(pc->bl + pc->bl_len, d, n);
		pc->bl_len += n;
		return 0;
	}
	rc = chunk_parser_feed(&pc->cp, d, n);
	if (rc < 0) {
		int st = call_error(pc, rc);
		struct ing_log_ctx lc = svc_log_call(&pc->c);
		ING_LOGC_RL(ING_LOG_WARN, "svc", &lc, "PushFrames from %s: %s", ing_grpc_call_peer(c),
			    pc->c.err_msg);
		ing_grpc_call_finish(c, st, pc->c.err_msg);
		return st;
	}
	return 0;
}

/* Where the data field's next bytes go, for the gRPC layer to read them there: the slot
 * (MSG_DIRECT) or the stage buffer (MSG_STAGE, sized for the whole field). A discarded
 * field's bytes come through stream_msg_data (dropped); so does everything else. */
static uint8_t *stream_msg_sink(struct ing_grpc_call *c, size_t *n)
{
	struct stream_call *pc = ing_grpc_call_user(c);
	uint64_t off = 0, run;
	*n = 0;
	if (!pc || pc->c.finished || pc->bl_open || !(run = chunk_parser_data_run(&pc->cp, &off)))
		return NULL;
	*n = run > SIZE_MAX ? SIZE_MAX : (size_t)run;
	if (pc->mode == MSG_DIRECT && pc->cur)
		return svc_frame_ing(pc->cur)->buf + pc->snap_offset + off;
	if (pc->mode == MSG_STAGE)
		return pc->stage + off;
	return NULL;
}

/* n bytes are where stream_msg_sink said: crc over the slot while they are in the cache. */
static int stream_msg_placed(struct ing_grpc_call *c, size_t n)
{
	struct stream_call *pc = ing_grpc_call_user(c);
	uint64_t off = 0;
	if (!pc || pc->c.finished || pc->bl_open || chunk_parser_data_run(&pc->cp, &off) < n)
		return ING_GRPC_INTERNAL;   /* cannot be: the sink was asked right before */
	if (pc->mode == MSG_DIRECT && pc->cur)
		pc->msg_crc = ing_crc32c(pc->msg_crc, svc_frame_ing(pc->cur)->buf + pc->snap_offset + off, n);
	chunk_parser_skip_data(&pc->cp, n);
	return 0;
}

static int stream_msg_end(struct ing_grpc_call *c)
{
	struct stream_call *pc = ing_grpc_call_user(c);
	int rc;
	if (!pc || pc->c.finished)
		return 0;
	if (pc->bl_open) {
		pc->bl_open = 0;
		return 0;
	}
	rc = chunk_parser_end(&pc->cp);
	if (rc == 0)
		rc = msg_finish(pc);
	else
		rc = call_error(pc, rc);
	if (rc) {
		struct ing_log_ctx lc = svc_log_call(&pc->c);
		ING_LOGC_RL(ING_LOG_WARN, "svc", &lc, "PushFrames from %s: %s", ing_grpc_call_peer(c),
			    pc->c.err_msg);
		ing_grpc_call_finish(c, rc, pc->c.err_msg);
		return rc;
	}
	return 0;
}

static void stream_half_close(struct ing_grpc_call *c)
{
	struct stream_call *pc = ing_grpc_call_user(c);
	if (!pc)
		return;
	svc_call_half_close(&pc->c);
	end_of_input(pc);
}


const struct ing_grpc_method svc_stream_method = {
	.path = "/h3000.RDMASvc/PushFrames",
	.on_start = stream_start,
	.on_msg_begin = stream_msg_begin,
	.on_msg_data = stream_msg_data,
	.on_msg_end = stream_msg_end,
	.on_msg_sink = stream_msg_sink,
	.on_msg_placed = stream_msg_placed,
	.on_half_close = stream_half_close,
	.on_writable = svc_on_writable,
	.on_close = svc_on_close,
};
