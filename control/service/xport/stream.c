/* SPDX-License-Identifier: Apache-2.0 */
/*
 * stream.c - transport xport_grpc_stream: PushFrames, the fallback data path. FrameChunk
 * messages are parsed as they stream in (chunk.c), their data copied once, straight into
 * the frame's pool slot.
 *
 * Per message: the fields before `data` decide where its bytes go (resolve): into the
 * frame's slot at the chunk offset (MSG_DIRECT), nowhere after a per-frame error
 * (MSG_DISCARD, the Ack already sent), or into the call's stage buffer (MSG_STAGE) when
 * the fields came out of order or the frame must wait for a slot or a credit. A waiting
 * message holds the call (xport_pause) until its turn comes back (progress). Messages the
 * gRPC layer still delivers meanwhile are kept, bounded, in the call's backlog and
 * replayed in order.
 *
 * Per-frame errors become Ack{ok=false} (the core's answer) and free the slot; the stream
 * carries on. Malformed protobuf or an unknown session fails the call.
 *
 * One copy: the gRPC layer reads the data field's bytes from the socket straight into
 * the slot where it can (stream_msg_sink / stream_msg_placed: runs of DATA frames), so
 * the kernel's copy is the only one; the crc32c is then computed over the slot right
 * after the read, while the bytes are in the cache. What still comes through
 * stream_msg_data (the few data bytes that share a read with frame headers and protobuf
 * keys) is copied into the slot by ing_crc32c_copy, which computes the crc32c in the same
 * pass. Chunks land in offset order, so the crc chains: a message starts from the
 * frame's crc_run (the crc of buf[0..filled)), pc->msg_crc follows its data, and only
 * advance() (the message accepted) makes it the new crc_run; the core marks a frame it
 * completes crc_done (XPORT_F_CRC), and persistence verifies the declared crc against it
 * instead of reading the frame again.
 */
#include "control/service/transport.h"
#include "control/service/xport/chunk.h"
#include "common/crc32c.h"
#include "common/ident.h"
#include "common/log.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum resolve_result { R_DIRECT, R_DISCARD, R_WAIT, R_FAIL };
enum msg_mode { MSG_UNDECIDED = 0, MSG_DIRECT, MSG_STAGE, MSG_DISCARD };

#define E_CALLFAIL (-EPROTO)   /* a callback failed the call: pc->c.status */
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
	/* a first chunk waiting for admission (held); its data is in stage */
	bool held;
	bool input_over;         /* the client half-closed (delivered once nothing is held) */
	struct xport_req req;
	uint8_t *stage;
	size_t stage_cap;
	/* messages that arrive while held: [u32 len][payload]... */
	uint8_t *bl;
	size_t bl_len, bl_cap;
	size_t bl_open;          /* 1 + offset of the open (incomplete) record, 0 none */
};

const struct xport_ops xport_grpc_stream;

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

/* The core's verdict on a first chunk, as this transport goes on with the message. */
static int verdict(struct stream_call *pc, enum xport_verdict v, struct svc_frame *e)
{
	switch (v) {
	case XPORT_GO:
		refused_take(pc, pc->req.frame_id, true);   /* a retry of a frame refused earlier */
		pc->cur = e;
		return R_DIRECT;
	case XPORT_WAIT:
		return R_WAIT;
	case XPORT_ANSWERED:
		refused_add(pc, pc->req.frame_id);
		return R_DISCARD;
	default:
		return R_FAIL;
	}
}

/* A continuation chunk refused: its one answer; the frame's later chunks are dropped. */
static void stream_refuse(struct stream_call *pc, const char *wafer, const char *frame_id,
			  const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void stream_refuse(struct stream_call *pc, const char *wafer, const char *frame_id,
			  const char *fmt, ...)
{
	char why[ING_FRAME_MSG_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	refused_add(pc, frame_id);
	xport_refuse(&pc->c, wafer, frame_id, ING_E_INVALID_ARGUMENT, false, "%s", why);
}

/* The first chunk of a frame: its meta asks the core in (xport_admit). */
static int resolve_first(struct stream_call *pc, uint64_t n)
{
	struct chunk_parser *p = &pc->cp;
	struct xport_req *r = &pc->req;
	H3000__FrameMeta *m = NULL;
	struct svc_frame *e;

	r->xp = &xport_grpc_stream;
	r->session_id = p->session_id;
	r->frame_id = p->frame_id;
	r->id_len = p->id_len;
	r->chunk_id = true;
	r->first_bytes = n;
	r->unready = NULL;
	r->bad = p->meta_oversize ?
		svc_pb_meta(&pc->c.arena, p->meta, SVC_META_MAX + 1, p->frame_id, &m, r->bad_why,
			    sizeof(r->bad_why)) :
		svc_pb_meta(&pc->c.arena, p->meta, p->meta_len, p->frame_id, &m, r->bad_why,
			    sizeof(r->bad_why));
	r->meta = m;
	enum xport_verdict v = xport_admit(&pc->c, r, &e);
	return verdict(pc, v, e);
}

/* Decide where the current message's data goes; per-frame errors are answered inside. */
static int resolve_msg(struct stream_call *pc, uint64_t n)
{
	struct chunk_parser *p = &pc->cp;
	const char *F = p->frame_id;
	uint64_t O = p->offset;
	struct svc_frame *e;

	memcpy(pc->snap_frame_id, p->frame_id, sizeof(pc->snap_frame_id));
	pc->snap_offset = O;
	pc->snap_session = p->session_id;
	pc->cur = NULL;
	if (O == 0 && (p->seen & (1u << CP_F_META)))
		return resolve_first(pc, n);

	/* continuation */
	enum xport_verdict v = xport_frame(&pc->c, p->session_id, F, &e);
	if (v == XPORT_ANSWERED) {
		refused_add(pc, F);
		return R_DISCARD;
	}
	if (v != XPORT_GO)
		return R_FAIL;
	if (!e && refused_take(pc, F, p->last))
		return R_DISCARD;   /* the frame was refused or failed: it had its one answer */
	if (O == 0 && !e) {
		stream_refuse(pc, NULL, F, "frame %s: first chunk (offset 0) carries no meta", F);
		return R_DISCARD;
	}
	if (!e) {
		stream_refuse(pc, NULL, F, "frame %s: chunk at offset %" PRIu64
			      " but the frame is not in progress on this stream (missing first chunk?)", F, O);
		return R_DISCARD;
	}
	struct ing_frame *ef = e->f;
	if (e->state != FE_FILLING) {
		if (O == ef->length && n == 0)
			return R_DISCARD; /* an empty closing chunk after the frame completed */
		stream_refuse(pc, ef->wafer_id, F, "frame %s: chunk at offset %" PRIu64
			      " after the frame was complete", F, O);
		return R_DISCARD;
	}
	if (O != ef->filled) {
		xport_fail(e, ING_E_INVALID_ARGUMENT, false, "frame %s: chunk at offset %" PRIu64
			   ", expected %" PRIu64 " (gap or overlap); frame dropped", F, O, ef->filled);
		return R_DISCARD;
	}
	if (n > ef->length - O) {
		xport_fail(e, ING_E_INVALID_ARGUMENT, false, "frame %s: chunk [%" PRIu64 ", %" PRIu64
			   ") past the declared length %" PRIu64 "; frame dropped", F, O, O + n, ef->length);
		return R_DISCARD;
	}
	pc->cur = e;
	return R_DIRECT;
}

/* A staged message's data goes to its frame, which resolve just chose (R_DIRECT). */
static void copy_staged(struct stream_call *pc)
{
	struct ing_frame *f = pc->cur->f;
	pc->msg_crc = ing_crc32c_copy(f->crc_run, f->buf + pc->snap_offset, pc->stage,
				      pc->cp.data_len);
}

/* The message's n bytes are in the slot: the core moves the frame on (complete, or failed
 * on an early `last`). */
static void advance(struct stream_call *pc, uint64_t n)
{
	struct svc_frame *e = pc->cur;

	pc->cur = NULL;
	if (!e || e->state != FE_FILLING)
		return;
	e->f->crc_run = pc->msg_crc;
	xport_filled(e, n, pc->cp.last);
}

/* The stage buffer grows to the largest data field staged on this call (<= max_msg). */
static int stage_prepare(struct stream_call *pc, uint64_t len)
{
	size_t max = pc->c.env->max_msg;
	if (len > max) {
		xport_close(&pc->c, ING_GRPC_RESOURCE_EXHAUSTED, "chunk data of %" PRIu64 " bytes above %zu",
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
			xport_close(&pc->c, ING_GRPC_RESOURCE_EXHAUSTED, "out of memory for the stage buffer");
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
	switch (resolve_msg(pc, len)) {
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
	struct stream_call *pc = arg;
	(void)p;
	if (pc->mode == MSG_DIRECT)
		pc->msg_crc = ing_crc32c_copy(pc->msg_crc, pc->cur->f->buf + pc->snap_offset + off, d, n);
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

/* A parse error fails the call (unless a callback failed it already). */
static int parse_error(struct stream_call *pc, int rc)
{
	if (rc == E_CALLFAIL || pc->c.closing)
		return pc->c.status ? pc->c.status : ING_GRPC_INTERNAL;
	return xport_close(&pc->c, ING_GRPC_INVALID_ARGUMENT, "malformed FrameChunk: %s",
			   pc->cp.err ? pc->cp.err : "parse error");
}

/* The message waits for admission (its request is queued): hold it, stop the input. */
static void hold(struct stream_call *pc)
{
	pc->held = true;
	xport_pause(&pc->c);
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
			stream_refuse(pc, NULL, p->frame_id,
				      "frame %s: frameId/offset/sessionId after data are not supported",
				      p->frame_id);
			pc->cur = NULL;
			return 0;
		}
		advance(pc, p->data_len);
		return 0;
	case MSG_UNDECIDED:
	case MSG_STAGE:
		r = resolve_msg(pc, p->data_len);
		if (r == R_FAIL)
			return parse_error(pc, E_CALLFAIL);
		if (r == R_DISCARD)
			return 0;
		if (r == R_WAIT) {
			hold(pc);
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
	size_t max = pc->c.env->backlog_max;
	if (cap > max) {
		if (pc->bl_len + need > max)
			return xport_close(&pc->c, ING_GRPC_RESOURCE_EXHAUSTED,
					   "more than %zu bytes sent while the stream was paused", max);
		cap = max;
	}
	uint8_t *n = realloc(pc->bl, cap);
	if (!n)
		return xport_close(&pc->c, ING_GRPC_RESOURCE_EXHAUSTED, "out of memory for the stream backlog");
	pc->bl = n;
	pc->bl_cap = cap;
	return 0;
}

/* The client's input is over and none of it is held: the core ends the call's frames. */
static void end_of_input(struct stream_call *pc)
{
	if (pc->input_over && !pc->held && !pc->bl_len && !pc->c.closing)
		xport_done(&pc->c);
}

static void replay(struct stream_call *pc)
{
	size_t pos = 0;
	int rc;

	while (pos < pc->bl_len && !pc->held && !pc->c.closing) {
		uint32_t len;
		memcpy(&len, pc->bl + pos, sizeof(len));
		bool open = pc->bl_open == pos + 1;
		size_t have = open ? pc->bl_len - pos - 4 : len;
		msg_begin(pc, len);
		rc = chunk_parser_feed(&pc->cp, pc->bl + pos + 4, have);
		pos += 4 + have;
		if (rc < 0) {
			parse_error(pc, rc);
			break;
		}
		if (open) {
			pc->bl_open = 0; /* the rest of this message arrives live */
			break;
		}
		rc = chunk_parser_end(&pc->cp);
		if (rc < 0 || msg_finish(pc)) {
			if (rc < 0)
				parse_error(pc, rc);
			break;
		}
	}
	if (pc->c.closing)
		pos = pc->bl_len;
	memmove(pc->bl, pc->bl + pos, pc->bl_len - pos);
	pc->bl_len -= pos;
	if (pc->bl_open)
		pc->bl_open -= pos;
}

/* The held message's turn came (or it waited too long: the core answered it BUSY). */
static void stream_progress(struct svc_call *c, bool expired)
{
	struct stream_call *pc = (struct stream_call *)c;
	struct svc_frame *e = NULL;
	int r;

	if (!pc->held)
		return;   /* not held yet (the message is still arriving): its end retries */
	if (expired) {
		refused_add(pc, pc->req.frame_id);
		r = R_DISCARD;
	} else {
		enum xport_verdict v = xport_admit(c, &pc->req, &e);
		r = verdict(pc, v, e);
		if (r == R_WAIT)
			return;
	}
	pc->held = false;
	if (r == R_FAIL)
		return;   /* the call is closing */
	if (r == R_DIRECT) {
		copy_staged(pc);
		advance(pc, pc->cp.data_len);
	}
	if (pc->bl_len)
		replay(pc);
	if (!pc->held && !pc->c.closing) {
		xport_resume(c);
		end_of_input(pc);
	}
}

/* The frame is failed by the core: its message goes nowhere, its later chunks are dropped. */
static void stream_cancel(struct svc_frame *e)
{
	struct stream_call *pc = (struct stream_call *)e->call;
	refused_add(pc, e->f->frame_id);
	if (pc->cur == e) {
		pc->cur = NULL;
		if (pc->mode == MSG_DIRECT)
			pc->mode = MSG_DISCARD;
	}
}

static void stream_conn_lost(struct svc_call *c)
{
	struct stream_call *pc = (struct stream_call *)c;
	free(pc->stage);
	pc->stage = NULL;
	free(pc->bl);
	pc->bl = NULL;
	pc->bl_len = pc->bl_cap = 0;
}

/* The fallback: bytes in FrameChunk messages, copied by control into the slot. */
const struct xport_ops xport_grpc_stream = {
	.name = "grpc-stream",
	.rpc = "PushFrames",
	.xport = ING_XPORT_GRPC,
	.flags = XPORT_F_CRC,
	.progress = stream_progress,
	.cancel = stream_cancel,
	.conn_lost = stream_conn_lost,
};

/* ---------------------------------------------------------------- gRPC hooks */

static int stream_start(struct ing_grpc_call *c, void *ctx)
{
	int st;
	struct stream_call *pc = (struct stream_call *)xport_open(c, ctx, &xport_grpc_stream,
								 sizeof(struct stream_call), &st);
	if (!pc)
		return st;
	chunk_parser_init(&pc->cp, &parser_cbs, pc);
	return ING_GRPC_OK;
}

static int stream_msg_begin(struct ing_grpc_call *c, size_t len)
{
	struct stream_call *pc = ing_grpc_call_user(c);
	if (!pc || pc->c.closing)
		return 0;
	if (pc->held || pc->bl_len) {
		/* paused but the layer still delivers: keep it, in order, bounded */
		int rc = bl_reserve(pc, 4);
		if (rc)
			return rc;
		uint32_t l = (uint32_t)len;
		memcpy(pc->bl + pc->bl_len, &l, 4);
		pc->bl_open = pc->bl_len + 1;
		pc->bl_len += 4;
		return 0;
	}
	msg_begin(pc, len);
	return 0;
}

static int stream_msg_data(struct ing_grpc_call *c, const uint8_t *d, size_t n)
{
	struct stream_call *pc = ing_grpc_call_user(c);
	int rc;
	if (!pc || pc->c.closing)
		return 0;
	if (pc->bl_open) {
		rc = bl_reserve(pc, n);
		if (rc)
			return rc;
		memcpy(pc->bl + pc->bl_len, d, n);
		pc->bl_len += n;
		return 0;
	}
	rc = chunk_parser_feed(&pc->cp, d, n);
	return rc < 0 ? parse_error(pc, rc) : 0;
}

/* Where the data field's next bytes go, for the gRPC layer to read them there: the slot
 * (MSG_DIRECT) or the stage buffer (MSG_STAGE, sized for the whole field). A discarded
 * field's bytes come through stream_msg_data (dropped); so does everything else. */
static uint8_t *stream_msg_sink(struct ing_grpc_call *c, size_t *n)
{
	struct stream_call *pc = ing_grpc_call_user(c);
	uint64_t off = 0, run;
	*n = 0;
	if (!pc || pc->c.closing || pc->bl_open || !(run = chunk_parser_data_run(&pc->cp, &off)))
		return NULL;
	*n = run > SIZE_MAX ? SIZE_MAX : (size_t)run;
	if (pc->mode == MSG_DIRECT && pc->cur)
		return pc->cur->f->buf + pc->snap_offset + off;
	if (pc->mode == MSG_STAGE)
		return pc->stage + off;
	return NULL;
}

/* n bytes are where stream_msg_sink said: crc over the slot while they are in the cache. */
static int stream_msg_placed(struct ing_grpc_call *c, size_t n)
{
	struct stream_call *pc = ing_grpc_call_user(c);
	uint64_t off = 0;
	if (!pc || pc->c.closing || pc->bl_open || chunk_parser_data_run(&pc->cp, &off) < n)
		return ING_GRPC_INTERNAL;   /* cannot be: the sink was asked right before */
	if (pc->mode == MSG_DIRECT && pc->cur)
		pc->msg_crc = ing_crc32c(pc->msg_crc, pc->cur->f->buf + pc->snap_offset + off, n);
	chunk_parser_skip_data(&pc->cp, n);
	return 0;
}

static int stream_msg_end(struct ing_grpc_call *c)
{
	struct stream_call *pc = ing_grpc_call_user(c);
	int rc;
	if (!pc || pc->c.closing)
		return 0;
	if (pc->bl_open) {
		pc->bl_open = 0;
		return 0;
	}
	rc = chunk_parser_end(&pc->cp);
	return rc < 0 ? parse_error(pc, rc) : msg_finish(pc);
}

static void stream_half_close(struct ing_grpc_call *c)
{
	struct stream_call *pc = ing_grpc_call_user(c);
	if (!pc)
		return;
	pc->input_over = true;
	end_of_input(pc);
}

static const struct ing_grpc_method stream_method = {
	.path = "/h3000.RDMASvc/PushFrames",
	.on_start = stream_start,
	.on_msg_begin = stream_msg_begin,
	.on_msg_data = stream_msg_data,
	.on_msg_end = stream_msg_end,
	.on_msg_sink = stream_msg_sink,
	.on_msg_placed = stream_msg_placed,
	.on_half_close = stream_half_close,
};
SVC_XPORT_REGISTER(stream_method)
