/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_grpc_server - the gRPC server's request path (control/net/grpc_server.c + nghttp2 +
 * the message deframer) fed whole client byte streams through grpc_server_feed(): no
 * socket, the server's output is dropped. The methods stand in for the service: a unary
 * one that decodes NegotiateRequest, a streaming one that runs every message through the
 * real FrameChunk parser (control/service/xport/chunk.c), and a whole-message one that decodes
 * FrameMeta; both streams pause and resume (from a loop timer) and send acks into a small
 * outbound buffer. The streaming one places: the data field's bytes are read straight
 * into a "slot" of exactly the field's length (on_msg_sink/on_msg_placed, place_min 1),
 * every other message's worth copied through on_msg_data, so a DATA frame's data is split
 * at every boundary the reads fall on (frame header, padding, gRPC prefix, protobuf key,
 * payload). Input: byte 0 bits 0-1 + 1 = how many read sizes follow (cycled; 0 = no
 * limit), byte 1 bit 0 prepends the client preface and SETTINGS. Oracles: ASan/UBSan (a
 * placement outside the slot), the slot's crc32c equal to the crc of the bytes as they
 * were copied or placed (every byte landed where it belongs, once), every accepted call
 * closed exactly once, no call or connection left when the input ends.
 */
#include "control/net/grpc_server.h"
#include "control/net/grpc_internal.h"
#include "control/net/loop.h"
#include "control/service/xport/chunk.h"
#include "common/clock.h"
#include "common/crc32c.h"
#include "common/log.h"
#include "h3000.pb-c.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct fcall {
	struct ing_grpc_call *c;
	struct ing_timer resume;
	struct chunk_parser cp;
	unsigned msgs;
	bool closed;
	/* the data field of the current FrameChunk: its slot and the crc of its bytes */
	uint8_t *slot;
	uint64_t slot_len;
	uint32_t crc;
};

static struct ing_loop *loop;
static struct ing_grpc_server *srv;
static long live;   /* started calls not closed yet */

static void resume_cb(void *arg)
{
	struct fcall *f = arg;
	ing_grpc_call_resume(f->c);
}

static void ack(struct fcall *f, const char *id, bool ok)
{
	H3000__Ack a = H3000__ACK__INIT;
	uint8_t buf[64 + CP_ID_MAX];
	a.frameid = (char *)id;
	a.ok = ok;
	a.stage = H3000__ACK_STAGE__ACK_STAGE_RECEIVED;
	size_t n = h3000__ack__pack(&a, buf);
	(void)ing_grpc_call_send(f->c, buf, n);   /* -ENOBUFS: the ack is dropped, as a test */
}

static void maybe_pause(struct fcall *f)
{
	if (++f->msgs % 3 == 0) {
		ing_grpc_call_pause(f->c);
		ing_timer_arm(loop, &f->resume, ing_now_ns());
	}
}

static const struct chunk_parser_cbs slot_cbs;

static int s_start(struct ing_grpc_call *c, void *ctx)
{
	(void)ctx;
	struct fcall *f = calloc(1, sizeof(*f));
	if (!f)
		return ING_GRPC_RESOURCE_EXHAUSTED;
	f->c = c;
	ing_timer_init(&f->resume, resume_cb, f);
	chunk_parser_init(&f->cp, &slot_cbs, f);
	ing_grpc_call_set_user(c, f);
	live++;
	return ING_GRPC_OK;
}

static void s_close(struct ing_grpc_call *c, int status)
{
	(void)status;
	struct fcall *f = ing_grpc_call_user(c);
	if (!f || f->closed)
		abort();   /* on_close twice, or for a call never started */
	f->closed = true;
	ing_timer_cancel(loop, &f->resume);
	live--;
	free(f->slot);
	free(f);
}

static void s_half_close(struct ing_grpc_call *c)
{
	ing_grpc_call_finish(c, ING_GRPC_OK, NULL);
}

static void s_writable(struct ing_grpc_call *c)
{
	struct fcall *f = ing_grpc_call_user(c);
	ack(f, "", true);
}

/* unary: NegotiateRequest */
static int neg_message(struct ing_grpc_call *c, const uint8_t *msg, size_t len)
{
	H3000__NegotiateRequest *r = h3000__negotiate_request__unpack(NULL, len, msg);
	if (!r)
		return ING_GRPC_INVALID_ARGUMENT;
	H3000__NegotiateReply rep = H3000__NEGOTIATE_REPLY__INIT;
	rep.version = r->versionmax;
	rep.credits = r->credits;
	rep.message = r->clientname;
	size_t n = h3000__negotiate_reply__get_packed_size(&rep);
	uint8_t *b = malloc(n ? n : 1);
	if (b) {
		h3000__negotiate_reply__pack(&rep, b);
		(void)ing_grpc_call_send(c, b, n);
		free(b);
	}
	h3000__negotiate_request__free_unpacked(r, NULL);
	ing_grpc_call_finish(c, ING_GRPC_OK, "negotiated");
	return 0;
}

/* streaming: FrameChunk through the real parser; the data field goes to a slot */
static int slot_begin(void *arg, struct chunk_parser *p, uint64_t len)
{
	struct fcall *f = arg;
	(void)p;
	free(f->slot);
	f->slot = malloc(len ? len : 1);   /* exactly the field: ASan sees a byte past it */
	if (!f->slot)
		return -ENOMEM;
	f->slot_len = len;
	f->crc = 0;
	return 0;
}

static int slot_data(void *arg, struct chunk_parser *p, uint64_t off, const uint8_t *d, size_t n)
{
	struct fcall *f = arg;
	(void)p;
	memcpy(f->slot + off, d, n);
	f->crc = ing_crc32c(f->crc, d, n);
	return 0;
}

static const struct chunk_parser_cbs slot_cbs = { .data_begin = slot_begin, .data = slot_data };

static int push_begin(struct ing_grpc_call *c, size_t len)
{
	struct fcall *f = ing_grpc_call_user(c);
	chunk_parser_begin(&f->cp, len);
	return 0;
}

/* Every fourth message's data is declined (copy path, the run announced), the rest placed. */
static uint8_t *push_sink(struct ing_grpc_call *c, size_t *n)
{
	struct fcall *f = ing_grpc_call_user(c);
	uint64_t off = 0, run = chunk_parser_data_run(&f->cp, &off);
	*n = (size_t)run;
	if (!run || f->msgs % 4 == 3)
		return NULL;
	return f->slot + off;
}

static int push_placed(struct ing_grpc_call *c, size_t n)
{
	struct fcall *f = ing_grpc_call_user(c);
	uint64_t off = 0, run = chunk_parser_data_run(&f->cp, &off);
	if (n == 0 || n > run || f->msgs % 4 == 3)
		abort();   /* placed more than the sink gave, or where it gave nothing */
	f->crc = ing_crc32c(f->crc, f->slot + off, n);
	chunk_parser_skip_data(&f->cp, n);
	return 0;
}

static int push_data(struct ing_grpc_call *c, const uint8_t *p, size_t n)
{
	struct fcall *f = ing_grpc_call_user(c);
	return chunk_parser_feed(&f->cp, p, n) ? ING_GRPC_INVALID_ARGUMENT : 0;
}

static int push_end(struct ing_grpc_call *c)
{
	struct fcall *f = ing_grpc_call_user(c);
	if (chunk_parser_end(&f->cp))
		return ING_GRPC_INVALID_ARGUMENT;
	if (f->cp.has_data && ing_crc32c(0, f->slot, f->slot_len) != f->crc)
		abort();   /* a byte of the data field missing, misplaced or overwritten */
	ack(f, f->cp.frame_id, true);
	maybe_pause(f);
	return 0;
}

/* whole messages: FrameMeta */
static int ctl_message(struct ing_grpc_call *c, const uint8_t *msg, size_t len)
{
	struct fcall *f = ing_grpc_call_user(c);
	H3000__FrameMeta *m = h3000__frame_meta__unpack(NULL, len, msg);
	if (!m) {
		ack(f, "", false);
		return 0;
	}
	ack(f, m->frameid, true);
	h3000__frame_meta__free_unpacked(m, NULL);
	maybe_pause(f);
	return 0;
}

static const struct ing_grpc_method methods[] = {
	{ .path = "/h3000.RDMASvc/Negotiate", .on_start = s_start, .on_message = neg_message,
	  .on_close = s_close },
	{ .path = "/h3000.RDMASvc/PushFrames", .on_start = s_start, .on_msg_begin = push_begin,
	  .on_msg_data = push_data, .on_msg_end = push_end, .on_msg_sink = push_sink,
	  .on_msg_placed = push_placed, .on_half_close = s_half_close,
	  .on_writable = s_writable, .on_close = s_close },
	{ .path = "/h3000.RDMASvc/ControlStream", .on_start = s_start, .on_message = ctl_message,
	  .on_half_close = s_half_close, .on_writable = s_writable, .on_close = s_close },
};

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	ing_log_set_level(ING_LOG_ERR);
	loop = ing_loop_create();
	struct ing_grpc_server_opts o;
	ing_grpc_server_opts_init(&o);
	o.no_listen = true;
	o.max_recv_msg = 64 * 1024;       /* small limits, so inputs reach them */
	o.max_send_buffer = 256;
	o.window_bytes = 128 * 1024;
	o.conn_window_bytes = 256 * 1024;
	o.max_frame_size = 16384;
	o.max_concurrent_streams = 16;
	o.place_min = 1;                  /* place runs of any length */
	srv = ing_grpc_server_create(loop, &o, methods, sizeof(methods) / sizeof(methods[0]));
	if (!loop || !srv)
		abort();
	return 0;
}

static const uint8_t preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
				 "\x00\x00\x00\x04\x00\x00\x00\x00\x00";   /* + empty SETTINGS */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	size_t npieces = (data[0] & 3u) + 1, pieces[4];
	bool add_preface = data[1] & 1;
	data += 2;
	size -= 2;
	if (size < npieces)
		return 0;
	for (size_t i = 0; i < npieces; i++)   /* read sizes: 1..255 bytes, or (0) no limit */
		pieces[i] = data[i];
	data += npieces;
	size -= npieces;
	uint8_t *in = malloc(sizeof(preface) - 1 + size + 1);
	if (!in)
		abort();
	size_t n = 0;
	if (add_preface) {
		memcpy(in, preface, sizeof(preface) - 1);
		n = sizeof(preface) - 1;
	}
	memcpy(in + n, data, size);
	n += size;
	struct grpc_feed feed = { .in = in, .n = n, .pieces = pieces, .npieces = npieces };
	if (grpc_server_feed(srv, &feed) != 0)
		abort();
	free(in);
	/* every call the server accepted was closed, once; nothing left behind */
	if (live != 0 || ing_grpc_server_ncalls(srv) != 0)
		abort();
	return 0;
}
