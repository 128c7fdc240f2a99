/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_grpc_server - the gRPC server's request path (control/grpc/grpc_server.c + nghttp2 +
 * the message deframer) fed whole client byte streams through grpc_server_feed(): no
 * socket, the server's output is dropped. The methods stand in for the service: a unary
 * one that decodes NegotiateRequest, a streaming one that runs every message through the
 * real FrameChunk parser (control/svc_chunk.c), and a whole-message one that decodes
 * FrameMeta; both streams pause and resume (from a loop timer) and send acks into a small
 * outbound buffer. Input: byte 0 picks the piece size, byte 1 bit 0 prepends the client
 * preface and SETTINGS. Oracles: ASan/UBSan, every accepted call closed exactly once,
 * no call or connection left when the input ends.
 */
#include "control/grpc/grpc.h"
#include "control/grpc/grpc_internal.h"
#include "control/grpc/loop.h"
#include "control/svc_internal.h"
#include "common/clock.h"
#include "common/log.h"
#include "h3000.pb-c.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct fcall {
	struct ing_grpc_call *c;
	struct ing_timer resume;
	struct chunk_parser cp;
	unsigned msgs;
	bool closed;
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

static int s_start(struct ing_grpc_call *c, void *ctx)
{
	(void)ctx;
	struct fcall *f = calloc(1, sizeof(*f));
	if (!f)
		return ING_GRPC_RESOURCE_EXHAUSTED;
	f->c = c;
	ing_timer_init(&f->resume, resume_cb, f);
	chunk_parser_init(&f->cp, NULL, NULL);
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

/* streaming: FrameChunk through the real parser */
static int push_begin(struct ing_grpc_call *c, size_t len)
{
	struct fcall *f = ing_grpc_call_user(c);
	chunk_parser_begin(&f->cp, len);
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
	  .on_msg_data = push_data, .on_msg_end = push_end, .on_half_close = s_half_close,
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
	size_t piece = data[0] ? (size_t)data[0] * 7 : 0;   /* 0: all at once */
	bool add_preface = data[1] & 1;
	data += 2;
	size -= 2;
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
	if (grpc_server_feed(srv, in, n, piece) != 0)
		abort();
	free(in);
	/* every call the server accepted was closed, once; nothing left behind */
	if (live != 0 || ing_grpc_server_ncalls(srv) != 0)
		abort();
	return 0;
}
