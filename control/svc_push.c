/* SPDX-License-Identifier: Apache-2.0 */
/*
 * svc_push.c - PushFrames, the fallback data path: FrameChunk messages parsed as they
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
 * CRC: the bytes are copied into the slot by ing_crc32c_copy, which computes the crc32c
 * in the same pass while the input is still in the cache. Chunks land in offset order, so
 * the crc chains: a message starts from the frame's crc_run (the crc of buf[0..filled)),
 * pc->msg_crc follows its data, and only advance() (the message accepted) makes it the
 * new crc_run. A frame that completes carries crc_done, and persistence verifies the
 * declared crc against it instead of reading the frame again.
 */
#include "control/svc_internal.h"
#include "common/clock.h"
#include "common/crc32c.h"
#include "common/ident.h"
#include "common/log.h"
#include "h3000.pb-c.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum resolve_result { R_DIRECT, R_DISCARD, R_WAIT, R_FAIL };

#define E_CALLFAIL (-EPROTO)   /* a callback failed the call: pc->err_status/err_msg */

/* Decide where the current message's data goes; NACKs per-frame errors itself. */
static int resolve(struct svc_call *pc, uint64_t n)
{
	struct ing_svc *s = pc->svc;
	struct chunk_parser *p = &pc->cp;
	const char *F = p->frame_id;
	uint64_t O = p->offset;
	struct svc_frame *e;

	memcpy(pc->snap_frame_id, p->frame_id, sizeof(pc->snap_frame_id));
	pc->snap_offset = O;
	pc->snap_session = p->session_id;
	pc->cur = NULL;
	if (!pc->sess) {
		if (svc_call_bind_session(pc, p->session_id))
			return R_FAIL;
	} else if (p->session_id && p->session_id != pc->sess->id) {
		svc_nack(pc, F, ING_E_INVALID_ARGUMENT, false,
			 "frame %s: sessionId %" PRIu64 " differs from the stream's session %" PRIu64,
			 F, p->session_id, pc->sess->id);
		return R_DISCARD;
	}

	if (O == 0 && (p->seen & (1u << CP_F_META))) {
		/* first chunk */
		if (s->stopping) {
			svc_nack(pc, F, ING_E_SHUTTING_DOWN, true,
				 "frame %s: ingest node is shutting down", F);
			return R_DISCARD;
		}
		if (p->meta_oversize) {
			svc_nack(pc, F, ING_E_INVALID_ARGUMENT, false,
				 "frame %s: meta larger than %u bytes", F, SVC_META_MAX);
			return R_DISCARD;
		}
		ProtobufCAllocator a;
		svc_arena_allocator(pc, &a);
		H3000__FrameMeta *m = h3000__frame_meta__unpack(&a, p->meta_len, p->meta);
		if (!m) {
			svc_nack(pc, F, ING_E_INVALID_ARGUMENT, false, "frame %s: malformed meta", F);
			return R_DISCARD;
		}
		if (svc_pb_string_has_nul(p->meta, p->meta_len, 1, 5)) {
			svc_nack(pc, F, ING_E_INVALID_ARGUMENT, false,
				 "frame %s: meta.frameId or meta.waferId contains a NUL byte: both must be "
				 ING_ID_RULE, F);
			return R_DISCARD;
		}
		char why[ING_FRAME_MSG_MAX];
		const char *wafer;
		int code = svc_meta_check(s, pc->sess, F, p->id_len, m->frameid, m->length,
					  m->waferid, &wafer, why, sizeof(why));
		if (code) {
			svc_nack(pc, F, code, false, "%s", why);
			return R_DISCARD;
		}
		e = svc_frame_find_call(s, pc, F);
		if (e && e->state == FE_FILLING) {
			svc_frame_fail(e, ING_E_INVALID_ARGUMENT, false,
				       "frame %s: duplicate first chunk while the frame is in progress; frame dropped",
				       F);
			return R_DISCARD;
		}
		if (svc_frame_find(s, wafer, F)) {
			svc_nack(pc, F, ING_E_INVALID_ARGUMENT, true,
				 "frame %s of wafer %s: already in flight in this node", F, wafer);
			return R_DISCARD;
		}
		if (n > m->length) {
			svc_nack(pc, F, ING_E_INVALID_ARGUMENT, false,
				 "frame %s: chunk of %" PRIu64 " bytes past the declared length %" PRIu64,
				 F, n, m->length);
			return R_DISCARD;
		}
		if (pc->sess->inflight >= pc->sess->credits) {
			pc->wants_slot = false;     /* its own session's limit: blocks nobody else */
			return R_WAIT;
		}
		/* Slots are first come, first served: smaller frames fall back to larger
		 * classes, so without the queue a steady flow of them could take every slot a
		 * waiting large frame needs, for ever. */
		struct ing_frame *f = svc_slot_waiter_ahead(s, pc) ? NULL : ing_pool_get(s->pool, m->length);
		pc->wants_slot = !f;
		if (!f)
			return R_WAIT;
		memcpy(f->frame_id, F, p->id_len + 1);   /* checked: id_len <= ING_ID_MAX */
		snprintf(f->wafer_id, sizeof(f->wafer_id), "%s", wafer);
		f->session_id = pc->sess->id;
		f->length = m->length;
		f->filled = 0;
		f->timestamp = m->timestamp;
		f->crc32c = m->crc32c;
		f->has_crc = m->hascrc32c;
		f->transport = ING_XPORT_GRPC;
		f->t_admit_ns = ing_now_ns();
		e = svc_frame_admit(s, pc, f);
		if (!e) {
			ing_pool_put(f);
			return R_WAIT;
		}
		svc_refused_take(pc, F, true);   /* a retry of a frame refused earlier */
		pc->cur = e;
		return R_DIRECT;
	}

	/* continuation */
	e = svc_frame_find_call(s, pc, F);
	if (!e && svc_refused_take(pc, F, p->last))
		return R_DISCARD;   /* the frame was refused or failed: it had its one answer */
	if (O == 0 && !e) {
		svc_nack(pc, F, ING_E_INVALID_ARGUMENT, false,
			 "frame %s: first chunk (offset 0) carries no meta", F);
		return R_DISCARD;
	}
	if (!e) {
		svc_nack(pc, F, ING_E_INVALID_ARGUMENT, false,
			 "frame %s: chunk at offset %" PRIu64
			 " but the frame is not in progress on this stream (missing first chunk?)", F, O);
		return R_DISCARD;
	}
	if (e->state != FE_FILLING) {
		if (O == e->length && n == 0)
			return R_DISCARD; /* an empty closing chunk after the frame completed */
		svc_nack(pc, F, ING_E_INVALID_ARGUMENT, false,
			 "frame %s: chunk at offset %" PRIu64 " after the frame was complete", F, O);
		return R_DISCARD;
	}
	if (O != e->f->filled) {
		svc_frame_fail(e, ING_E_INVALID_ARGUMENT, false,
			       "frame %s: chunk at offset %" PRIu64 ", expected %" PRIu64
			       " (gap or overlap); frame dropped", F, O, e->f->filled);
		return R_DISCARD;
	}
	if (n > e->length - O) {
		svc_frame_fail(e, ING_E_INVALID_ARGUMENT, false,
			       "frame %s: chunk [%" PRIu64 ", %" PRIu64 ") past the declared length %" PRIu64
			       "; frame dropped", F, O, O + n, e->length);
		return R_DISCARD;
	}
	pc->cur = e;
	return R_DIRECT;
}

/* A staged message's data goes to its frame, which resolve() just chose (R_DIRECT). */
static void copy_staged(struct svc_call *pc)
{
	struct ing_frame *f = pc->cur->f;
	pc->msg_crc = ing_crc32c_copy(f->crc_run, f->buf + pc->snap_offset, pc->stage,
				      pc->cp.data_len);
}

/* The message's n bytes are in the slot: advance, complete or fail on an early `last`. */
static void advance(struct svc_call *pc, uint64_t n)
{
	struct svc_frame *e = pc->cur;
	struct ing_frame *f;

	pc->cur = NULL;
	if (!e || e->state != FE_FILLING)
		return;
	f = e->f;
	f->filled += n;
	f->crc_run = pc->msg_crc;
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
static int stage_prepare(struct svc_call *pc, uint64_t len)
{
	size_t max = pc->svc->o.max_msg;
	if (len > max) {
		pc->err_status = ING_GRPC_RESOURCE_EXHAUSTED;
		snprintf(pc->err_msg, sizeof(pc->err_msg), "chunk data of %" PRIu64 " bytes above %zu",
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
			pc->err_status = ING_GRPC_RESOURCE_EXHAUSTED;
			snprintf(pc->err_msg, sizeof(pc->err_msg), "out of memory for the stage buffer");
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
	struct svc_call *pc = arg;

	/* Data first, or fields out of order: what follows may still change the target. */
	if (!p->ordered || p->seen == (1u << CP_F_DATA))
		return stage_prepare(pc, len);
	switch (resolve(pc, len)) {
	case R_DIRECT:
		pc->mode = MSG_DIRECT;
		pc->msg_crc = pc->cur->f->crc_run;   /* resolve: filled == snap_offset */
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
	struct svc_call *pc = arg;
	(void)p;
	if (pc->mode == MSG_DIRECT)
		pc->msg_crc = ing_crc32c_copy(pc->msg_crc, pc->cur->f->buf + pc->snap_offset + off,
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

static void msg_begin(struct svc_call *pc, size_t len)
{
	chunk_parser_begin(&pc->cp, len);
	pc->mode = MSG_UNDECIDED;
	pc->cur = NULL;
}

/* A parse error becomes the call's status. */
static int call_error(struct svc_call *pc, int rc)
{
	if (rc == E_CALLFAIL && pc->err_status)
		return pc->err_status;
	pc->err_status = ING_GRPC_INVALID_ARGUMENT;
	snprintf(pc->err_msg, sizeof(pc->err_msg), "malformed FrameChunk: %s",
		 pc->cp.err ? pc->cp.err : "parse error");
	return pc->err_status;
}

static void block(struct svc_call *pc)
{
	ING_DBG("svc", "frame %s: waits for a %s (call %" PRIu64 ")", pc->cp.frame_id,
		pc->sess && pc->sess->inflight >= pc->sess->credits ? "credit" : "pool slot", pc->id);
	pc->blocked = true;
	pc->ticket = ++pc->svc->tickets;   /* retries keep it: see svc_slot_waiter_ahead */
	svc_call_pause(pc, SVC_PAUSE_BLOCKED);
	svc_wait(pc);
}

/* The whole message is in. 0, or a gRPC status that fails the call. */
static int msg_finish(struct svc_call *pc)
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
			svc_nack(pc, p->frame_id, ING_E_INVALID_ARGUMENT, false,
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

static int bl_reserve(struct svc_call *pc, size_t need)
{
	if (pc->bl_len + need <= pc->bl_cap)
		return 0;
	size_t cap = pc->bl_cap ? pc->bl_cap : 65536;
	while (cap < pc->bl_len + need)
		cap *= 2;
	if (cap > pc->svc->o.backlog_max) {
		if (pc->bl_len + need > pc->svc->o.backlog_max) {
			pc->err_status = ING_GRPC_RESOURCE_EXHAUSTED;
			snprintf(pc->err_msg, sizeof(pc->err_msg),
				 "more than %zu bytes sent while the stream was paused", pc->svc->o.backlog_max);
			return -ENOBUFS;
		}
		cap = pc->svc->o.backlog_max;
	}
	uint8_t *n = realloc(pc->bl, cap);
	if (!n) {
		pc->err_status = ING_GRPC_RESOURCE_EXHAUSTED;
		snprintf(pc->err_msg, sizeof(pc->err_msg), "out of memory for the stream backlog");
		return -ENOMEM;
	}
	pc->bl = n;
	pc->bl_cap = cap;
	return 0;
}

/* Fail the call from the loop (not inside a gRPC callback). */
static void fail_later(struct svc_call *pc, int status)
{
	svc_call_finish_later(pc, status, pc->err_msg);
}

/* Input is done and nothing is held: frames still partial can never complete. */
static void end_of_input(struct svc_call *pc)
{
	struct ing_svc *s = pc->svc;
	if (!pc->half_closed || pc->blocked || pc->bl_len)
		return;
	for (uint32_t i = 0; i < s->nfr && pc->open_frames; i++) {
		struct svc_frame *e = &s->fr[i];
		if (e->state == FE_FILLING && e->call == pc)
			svc_frame_fail(e, ING_E_CANCELLED, true,
				       "frame %s: stream ended after %" PRIu64 " of %" PRIu64 " bytes",
				       e->f->frame_id, e->f->filled, e->length);
	}
	svc_call_check_done(pc);
}

static void replay(struct svc_call *pc)
{
	size_t pos = 0;
	int rc;

	while (pos < pc->bl_len && !pc->blocked && !pc->want_finish && !pc->finished) {
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
	if (pc->want_finish || pc->finished)
		pos = pc->bl_len;
	memmove(pc->bl, pc->bl + pos, pc->bl_len - pos);
	pc->bl_len -= pos;
	if (pc->bl_open)
		pc->bl_open -= pos;
}

/* From the service's kick: a slot or credit came back. */
void svc_push_retry(struct svc_call *pc)
{
	if (!pc->blocked || pc->finished || pc->want_finish)
		return;
	struct chunk_parser *p = &pc->cp;
	pc->retrying = true;
	int r = resolve(pc, p->data_len);
	pc->retrying = false;
	if (r == R_WAIT) {
		svc_wait(pc);
		return;
	}
	pc->blocked = false;
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
	if (!pc->blocked && !pc->want_finish) {
		svc_call_unpause(pc, SVC_PAUSE_BLOCKED);
		end_of_input(pc);
		svc_call_check_done(pc);
	}
}

void svc_push_close(struct svc_call *pc)
{
	free(pc->stage);
	pc->stage = NULL;
	free(pc->bl);
	pc->bl = NULL;
	pc->bl_len = pc->bl_cap = 0;
}

/* ---------------------------------------------------------------- gRPC hooks */

static int push_start(struct ing_grpc_call *c, void *ctx)
{
	struct ing_svc *s = ctx;
	if (ing_svc_stopping(s)) {
		ing_grpc_call_finish(c, ING_GRPC_UNAVAILABLE, "ingest node is shutting down");
		return ING_GRPC_UNAVAILABLE;
	}
	struct svc_call *pc = svc_call_new(s, c, SVC_CALL_PUSH);
	if (!pc) {
		ing_grpc_call_finish(c, ING_GRPC_RESOURCE_EXHAUSTED, "out of memory");
		return ING_GRPC_RESOURCE_EXHAUSTED;
	}
	chunk_parser_init(&pc->cp, &parser_cbs, pc);
	if (svc_call_bind_header(pc)) {
		int st = pc->err_status;
		ING_INFO("svc", "PushFrames from %s refused: %s", ing_grpc_call_peer(c), pc->err_msg);
		ing_grpc_call_finish(c, st, pc->err_msg);
		svc_call_free(pc);
		return st;
	}
	ing_grpc_call_set_user(c, pc);
	return ING_GRPC_OK;
}

static int push_msg_begin(struct ing_grpc_call *c, size_t len)
{
	struct svc_call *pc = ing_grpc_call_user(c);
	if (!pc || pc->finished)
		return 0;
	if (pc->blocked || pc->bl_len) {
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
	ing_grpc_call_finish(c, pc->err_status, pc->err_msg);
	return pc->err_status;
}

static int push_msg_data(struct ing_grpc_call *c, const uint8_t *d, size_t n)
{
	struct svc_call *pc = ing_grpc_call_user(c);
	int rc;
	if (!pc || pc->finished)
		return 0;
	if (pc->bl_open) {
		if (bl_reserve(pc, n)) {
			ing_grpc_call_finish(c, pc->err_status, pc->err_msg);
			return pc->err_status;
		}
		memcpy(pc->bl + pc->bl_len, d, n);
		pc->bl_len += n;
		return 0;
	}
	rc = chunk_parser_feed(&pc->cp, d, n);
	if (rc < 0) {
		int st = call_error(pc, rc);
		ING_LOG_RL(ING_LOG_WARN, "svc", "PushFrames from %s: %s", ing_grpc_call_peer(c), pc->err_msg);
		ing_grpc_call_finish(c, st, pc->err_msg);
		return st;
	}
	return 0;
}

static int push_msg_end(struct ing_grpc_call *c)
{
	struct svc_call *pc = ing_grpc_call_user(c);
	int rc;
	if (!pc || pc->finished)
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
		ING_LOG_RL(ING_LOG_WARN, "svc", "PushFrames from %s: %s", ing_grpc_call_peer(c), pc->err_msg);
		ing_grpc_call_finish(c, rc, pc->err_msg);
		return rc;
	}
	return 0;
}

static void push_half_close(struct ing_grpc_call *c)
{
	struct svc_call *pc = ing_grpc_call_user(c);
	if (!pc)
		return;
	pc->half_closed = true;
	end_of_input(pc);
}


const struct ing_grpc_method svc_push_method = {
	.path = "/h3000.RDMASvc/PushFrames",
	.on_start = push_start,
	.on_msg_begin = push_msg_begin,
	.on_msg_data = push_msg_data,
	.on_msg_end = push_msg_end,
	.on_half_close = push_half_close,
	.on_writable = svc_on_writable,
	.on_close = svc_on_close,
};
