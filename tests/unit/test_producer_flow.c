/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_producer_flow.c - libingest's producer logic (producer/producer.c) against a fake
 * gRPC client (the ing_grpc_* client functions are defined here, so the real client is
 * not linked): Negotiate contents, session header, chunking and zero-copy bodies,
 * credits, acks held while the transport still owns the bytes, -ENOBUFS resumption,
 * server failures, local frame timeouts, connection loss (reconnect and re-send, the limit,
 * reconnect off), a failure of one frame that is no lost connection, a re-send the node
 * still holds in flight, ing_producer_wake, ing_producer_open's codes, the frame pool.
 * Every client function libingest calls is defined here, so the real grpc_client.o is never
 * pulled out of the archives.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/clock.h"
#include "common/crc32c.h"
#include "control/net/grpc.h"
#include "h3000.pb-c.h"
#include "ingest/producer.h"
#include "producer/producer_internal.h"

/* ================================================================ fake client */

#define FAKE_MAX_MSGS 256

struct fake_msg {
	uint8_t head[PRODUCER_CHUNK_HEAD_MAX];
	size_t head_len;
	const uint8_t *body;
	size_t body_len;
	void (*done)(void *);
	void *arg;
	bool released;
};

struct ing_grpc_chan {
	int unused;
};
struct ing_grpc_ccall {
	struct ing_grpc_ccall_cbs cbs;
	bool closed;
};

static struct fake {
	struct ing_grpc_chan ch;
	struct ing_grpc_ccall call;
	bool chan_open, call_open;
	/* Negotiate */
	H3000__NegotiateRequest *req;
	unsigned reply_credits;
	uint64_t reply_max_frame;
	uint32_t reply_chunk;
	int negotiate_status;
	/* stream */
	char path[128];
	char session_hdr[32];
	struct fake_msg msgs[FAKE_MAX_MSGS];
	unsigned nmsgs;
	bool nobufs;
	unsigned accept_max;  /* > 0: -ENOBUFS once this many messages were taken */
	int dead;           /* chan_poll returns this (<0) once set; a new connection clears it */
	bool half_closed;
	int refuse;         /* > 0: chan_connect fails with this errno */
	unsigned connects;
} F;

void ing_grpc_chan_opts_init(struct ing_grpc_chan_opts *o)
{
	memset(o, 0, sizeof(*o));
}

struct ing_grpc_chan *ing_grpc_chan_connect(const struct ing_grpc_chan_opts *o, char *err,
					    size_t errlen)
{
	(void)o;
	if (F.refuse) {
		snprintf(err, errlen, "connect %s: %s", o->target, strerror(F.refuse));
		errno = F.refuse;
		return NULL;
	}
	F.chan_open = true;
	F.dead = 0;
	F.connects++;
	return &F.ch;
}

static void release_all(void)
{
	for (unsigned i = 0; i < F.nmsgs; i++) {
		if (!F.msgs[i].released) {
			F.msgs[i].released = true;
			if (F.msgs[i].done)
				F.msgs[i].done(F.msgs[i].arg);
		}
	}
}

static void close_call(int status, const char *msg)
{
	if (!F.call_open || F.call.closed)
		return;
	F.call.closed = true;
	F.call.cbs.on_close(&F.call, F.call.cbs.arg, status, msg);
}

void ing_grpc_chan_close(struct ing_grpc_chan *ch)
{
	assert_ptr_equal(ch, &F.ch);
	close_call(ING_GRPC_UNAVAILABLE, "connection closed");
	release_all();
	F.chan_open = false;
}

int ing_grpc_unary(struct ing_grpc_chan *ch, const char *path, const char *const *md,
		   const uint8_t *req, size_t req_len, uint8_t **resp, size_t *resp_len,
		   int timeout_ms, char *errmsg, size_t errlen)
{
	(void)ch;
	(void)md;
	(void)timeout_ms;
	(void)errmsg;
	(void)errlen;
	assert_string_equal(path, "/h3000.RDMASvc/Negotiate");
	if (F.req)
		h3000__negotiate_request__free_unpacked(F.req, NULL);
	F.req = h3000__negotiate_request__unpack(NULL, req_len, req);
	assert_non_null(F.req);
	if (F.negotiate_status)
		return F.negotiate_status;
	H3000__NegotiateReply r = H3000__NEGOTIATE_REPLY__INIT;
	H3000__Transport av[1] = { H3000__TRANSPORT__TRANSPORT_GRPC_STREAM };
	r.version = 1;
	r.sessionid = 4242;
	r.transport = H3000__TRANSPORT__TRANSPORT_GRPC_STREAM;
	r.n_available = 1;
	r.available = av;
	r.maxframesize = F.reply_max_frame;
	r.credits = F.reply_credits;
	r.maxchunksize = F.reply_chunk;
	r.message = "no RDMA device";
	*resp_len = h3000__negotiate_reply__get_packed_size(&r);
	*resp = malloc(*resp_len);
	assert_non_null(*resp);
	h3000__negotiate_reply__pack(&r, *resp);
	return ING_GRPC_OK;
}

struct ing_grpc_ccall *ing_grpc_chan_call(struct ing_grpc_chan *ch, const char *path,
					  const char *const *md, int timeout_ms,
					  const struct ing_grpc_ccall_cbs *cbs)
{
	(void)ch;
	(void)timeout_ms;
	snprintf(F.path, sizeof(F.path), "%s", path);
	for (size_t i = 0; md && md[i]; i += 2)
		if (!strcmp(md[i], "h3000-session-id"))
			snprintf(F.session_hdr, sizeof(F.session_hdr), "%s", md[i + 1]);
	F.call.cbs = *cbs;
	F.call.closed = false;
	F.call_open = true;
	return &F.call;
}

int ing_grpc_ccall_send_zc(struct ing_grpc_ccall *cc, const uint8_t *head, size_t head_len,
			   const uint8_t *body, size_t body_len, bool end,
			   void (*done)(void *body_arg), void *body_arg)
{
	assert_ptr_equal(cc, &F.call);
	assert_false(end);
	if (cc->closed)
		return -EPIPE;
	if (F.nobufs || (F.accept_max && F.nmsgs >= F.accept_max))
		return -ENOBUFS;
	assert_true(F.nmsgs < FAKE_MAX_MSGS);
	assert_true(head_len <= PRODUCER_CHUNK_HEAD_MAX);
	struct fake_msg *m = &F.msgs[F.nmsgs++];
	memcpy(m->head, head, head_len);
	m->head_len = head_len;
	m->body = body;
	m->body_len = body_len;
	m->done = done;
	m->arg = body_arg;
	m->released = false;
	return 0;
}

/* Copied sends are the RDMA transport's (FrameMeta); the fallback never uses them. */
int ing_grpc_ccall_send(struct ing_grpc_ccall *cc, const uint8_t *msg, size_t len, bool end)
{
	(void)cc;
	(void)msg;
	(void)len;
	(void)end;
	fail_msg("unexpected copied send on the fallback path");
	return -EPIPE;
}

size_t ing_grpc_chan_pending(const struct ing_grpc_chan *ch)
{
	(void)ch;
	return 0;
}

int ing_grpc_chan_fd(const struct ing_grpc_chan *ch)
{
	(void)ch;
	return -1;
}

int ing_grpc_ccall_half_close(struct ing_grpc_ccall *cc)
{
	(void)cc;
	F.half_closed = true;
	/* the node finishes the call once it has nothing left to ack */
	close_call(ING_GRPC_OK, "");
	return 0;
}

void ing_grpc_ccall_cancel(struct ing_grpc_ccall *cc)
{
	(void)cc;
	close_call(ING_GRPC_CANCELLED, "Cancelled");
}

int ing_grpc_chan_poll(struct ing_grpc_chan *ch, int timeout_ms)
{
	(void)ch;
	if (F.dead) {
		close_call(ING_GRPC_UNAVAILABLE, "connection lost");
		release_all();
		return F.dead;
	}
	if (timeout_ms > 0)
		usleep(timeout_ms > 2 ? 2000 : (useconds_t)timeout_ms * 1000);
	return 0;
}

/* The node acks: deliver an h3000.Ack on the stream. */
static void fake_ack(uint64_t id, bool ok, int stage, int code, bool dup)
{
	H3000__Ack a = H3000__ACK__INIT;
	uint8_t buf[1024];
	char ids[24];
	snprintf(ids, sizeof(ids), "%llu", (unsigned long long)id);
	a.frameid = ids;
	a.ok = ok;
	a.stage = (H3000__AckStage)stage;
	a.code = (H3000__ErrorCode)code;
	a.duplicate = dup;
	a.msg = ok ? "" : "refused by the fake";
	size_t n = h3000__ack__pack(&a, buf);
	F.call.cbs.on_message(&F.call, F.call.cbs.arg, buf, n);
}

/* The node refuses a frame: an h3000.Ack{ok=false} with code, retryable and msg. */
static void fake_nack(uint64_t id, int code, bool retryable, const char *msg)
{
	H3000__Ack a = H3000__ACK__INIT;
	uint8_t buf[1024];
	char ids[24];
	snprintf(ids, sizeof(ids), "%llu", (unsigned long long)id);
	a.frameid = ids;
	a.code = (H3000__ErrorCode)code;
	a.retryable = retryable;
	a.msg = (char *)msg;
	size_t n = h3000__ack__pack(&a, buf);
	F.call.cbs.on_message(&F.call, F.call.cbs.arg, buf, n);
}

static int setup(void **state)
{
	(void)state;
	memset(&F, 0, sizeof(F));
	F.reply_credits = 4;
	F.reply_max_frame = 1u << 20;
	F.reply_chunk = 4096;
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	if (F.req)
		h3000__negotiate_request__free_unpacked(F.req, NULL);
	F.req = NULL;
	return 0;
}

static struct ing_producer *connect_opts(unsigned credits, int frame_timeout_ms,
					 int reconnect_ms, enum ing_ack_stage recycle_on)
{
	struct ing_producer_opts o;
	char err[256];
	ing_producer_opts_init(&o);
	o.server = "127.0.0.1:1";
	o.credits = credits;
	o.client_name = "unit";
	o.reconnect_timeout_ms = reconnect_ms;
	o.recycle_on = recycle_on;
	if (frame_timeout_ms)
		o.frame_timeout_ms = frame_timeout_ms;
	struct ing_producer *p = ing_producer_connect(&o, err, sizeof(err));
	assert_non_null(p);
	return p;
}

static struct ing_producer *connect_default(unsigned credits, int frame_timeout_ms)
{
	return connect_opts(credits, frame_timeout_ms, 0, ING_ACK_NONE);
}

/* The frame id of fake message i (its chunk's head decoded). */
static void msg_frame_id(unsigned i, char *id, size_t idlen)
{
	struct fake_msg *m = &F.msgs[i];
	uint8_t *whole = malloc(m->head_len + m->body_len);
	assert_non_null(whole);
	memcpy(whole, m->head, m->head_len);
	memcpy(whole + m->head_len, m->body, m->body_len);
	H3000__FrameChunk *c = h3000__frame_chunk__unpack(NULL, m->head_len + m->body_len, whole);
	assert_non_null(c);
	snprintf(id, idlen, "%s", c->frameid);
	h3000__frame_chunk__free_unpacked(c, NULL);
	free(whole);
}

/* Poll until n acks came (each poll bounded; the loop a watchdog of 30 s). */
static int poll_until(struct ing_producer *p, struct ing_ack *acks, int n)
{
	int got = 0;
	for (int i = 0; i < 300 && got < n; i++) {
		int r = ing_producer_poll(p, acks + got, (unsigned)(n - got), 100);
		if (r < 0)
			return r;
		got += r;
	}
	return got;
}

static struct ing_frame_desc desc(uint64_t id, const void *data, uint64_t len, void *user)
{
	static char ids[8][24];   /* the library copies the id at submit */
	static unsigned k;
	char *sid = ids[k++ % 8];
	snprintf(sid, sizeof(ids[0]), "%llu", (unsigned long long)id);
	struct ing_frame_desc d = { .frame_id = sid, .wafer_id = "W1", .data = data, .length = len,
				    .user = user };
	return d;
}

/* Submit frames first..first+n-1 (ids in decimal, wafer W1), each len bytes of buf. */
static void submit_frames(struct ing_producer *p, uint64_t first, unsigned n, const uint8_t *buf,
			  uint64_t len)
{
	for (uint64_t id = first; id < first + n; id++) {
		struct ing_frame_desc d = desc(id, buf, len, NULL);
		assert_int_equal(ing_producer_submit(p, &d), 0);
	}
}

/* Poll until the fake holds n sent messages, no ack delivered meanwhile (a watchdog of
 * 30 s). */
static void poll_until_sent(struct ing_producer *p, unsigned n)
{
	struct ing_ack acks[8];
	for (int i = 0; i < 300 && F.nmsgs < n; i++)
		assert_int_equal(ing_producer_poll(p, acks, 8, 100), 0);
	assert_int_equal(F.nmsgs, n);
}

/* Fake message i is (the first chunk of) frame id. */
static void assert_sent_frame(unsigned i, const char *id)
{
	char got[32];
	msg_frame_id(i, got, sizeof(got));
	assert_string_equal(got, id);
}

/* ================================================================ tests */

static void test_negotiate_and_session(void **state)
{
	(void)state;
	struct ing_producer *p = connect_default(16, 0);
	assert_int_equal(F.req->versionmin, 1);
	assert_int_equal(F.req->versionmax, 1);
	/* AUTO: RDMA first when built in and a device is there, the fallback always last */
	assert_true(F.req->n_transports == 1 || F.req->n_transports == 2);
	assert_int_equal(F.req->transports[F.req->n_transports - 1],
			 H3000__TRANSPORT__TRANSPORT_GRPC_STREAM);
	assert_int_equal(F.req->credits, 16);
	assert_string_equal(F.req->clientname, "unit");
	assert_string_equal(F.path, "/h3000.RDMASvc/PushFrames");
	assert_string_equal(F.session_hdr, "4242");
	assert_int_equal(ing_producer_session_id(p), 4242);
	assert_int_equal(ing_producer_credits(p), 4);     /* the node's answer wins when lower */
	assert_int_equal(ing_producer_max_frame(p), 1u << 20);
	assert_int_equal(ing_producer_transport(p), ING_TRANSPORT_GRPC);
	assert_true(!strncmp(ing_producer_transport_note(p), "fallback: ", 10));
	ing_producer_close(p, 100);
	assert_true(F.half_closed);
	assert_false(F.chan_open);
}

static void test_rdma_only_fails(void **state)
{
	(void)state;
	struct ing_producer_opts o;
	char err[256];
	ing_producer_opts_init(&o);
	o.server = "127.0.0.1:1";
	o.transport = ING_TRANSPORT_RDMA;
	assert_null(ing_producer_connect(&o, err, sizeof(err)));
	assert_non_null(strstr(err, "rdma"));
	o.transport = ING_TRANSPORT_GRPC;
	F.negotiate_status = ING_GRPC_UNIMPLEMENTED;
	assert_null(ing_producer_connect(&o, err, sizeof(err)));
	assert_non_null(strstr(err, "Negotiate"));
	assert_false(F.chan_open);
	o.server = NULL;
	assert_null(ing_producer_connect(&o, err, sizeof(err)));
}

static void test_validation(void **state)
{
	(void)state;
	struct ing_producer *p = connect_default(0, 0);
	static uint8_t buf[8192];
	struct ing_frame_desc d = desc(1, buf, 0, NULL);
	assert_int_equal(ing_producer_submit(p, &d), -EINVAL);          /* empty */
	d.length = (1u << 20) + 1;
	assert_int_equal(ing_producer_submit(p, &d), -EINVAL);          /* too big */
	d.length = 10;
	d.wafer_id = "bad\twafer";                                      /* control character */
	assert_int_equal(ing_producer_submit(p, &d), -EINVAL);
	char longid[ING_ID_MAX + 2];
	memset(longid, 'w', sizeof(longid) - 1);
	longid[sizeof(longid) - 1] = '\0';
	d.wafer_id = longid;                                             /* 257 bytes */
	assert_int_equal(ing_producer_submit(p, &d), -EINVAL);
	d.wafer_id = "ok";
	d.frame_id = "";                                                 /* empty id */
	assert_int_equal(ing_producer_submit(p, &d), -EINVAL);
	d.frame_id = "\xff\xfe";                                         /* not UTF-8 */
	assert_int_equal(ing_producer_submit(p, &d), -EINVAL);
	d.frame_id = longid;
	assert_int_equal(ing_producer_submit(p, &d), -EINVAL);
	d.frame_id = "1";
	d.data = NULL;
	assert_int_equal(ing_producer_submit(p, &d), -EINVAL);
	d.data = buf;
	assert_int_equal(ing_producer_submit(p, &d), 0);
	assert_int_equal(ing_producer_submit(p, &d), -EINVAL);          /* (wafer, id) in flight */
	d.wafer_id = "other";                                            /* same id, other wafer: */
	assert_int_equal(ing_producer_submit(p, &d), 0);                /* another frame */
	d.wafer_id = NULL;                                               /* the default wafer */
	assert_int_equal(ing_producer_submit(p, &d), 0);
	assert_int_equal(ing_producer_submit(NULL, &d), -EINVAL);
	ing_producer_close(p, 0);
}

static void test_chunks_and_acks(void **state)
{
	(void)state;
	struct ing_producer *p = connect_default(0, 0);
	size_t len = 4096 * 2 + 100;   /* three chunks of 4096, 4096, 100 */
	uint8_t *buf = malloc(len);
	assert_non_null(buf);
	for (size_t i = 0; i < len; i++)
		buf[i] = (uint8_t)(i * 7);
	int tag;
	struct ing_frame_desc d = desc(77, buf, len, &tag);
	assert_int_equal(ing_producer_submit(p, &d), 0);
	assert_int_equal(F.nmsgs, 3);
	uint64_t off = 0;
	for (unsigned i = 0; i < 3; i++) {
		struct fake_msg *m = &F.msgs[i];
		/* zero copy: the body is the caller's memory */
		assert_ptr_equal(m->body, buf + off);
		uint8_t *whole = malloc(m->head_len + m->body_len);
		memcpy(whole, m->head, m->head_len);
		memcpy(whole + m->head_len, m->body, m->body_len);
		H3000__FrameChunk *c = h3000__frame_chunk__unpack(NULL, m->head_len + m->body_len, whole);
		assert_non_null(c);
		assert_string_equal(c->frameid, "77");
		assert_int_equal(c->offset, off);
		assert_int_equal(c->last, i == 2);
		assert_int_equal(c->sessionid, 4242);
		assert_int_equal(c->data.len, i == 2 ? 100 : 4096);
		if (i == 0) {
			assert_non_null(c->meta);
			assert_int_equal(c->meta->length, len);
			assert_string_equal(c->meta->waferid, "W1");
			assert_true(c->meta->hascrc32c);
			assert_int_equal(c->meta->crc32c, ing_crc32c(0, buf, len));
			assert_true(c->meta->timestamp > 0);
		} else {
			assert_null(c->meta);
		}
		off += c->data.len;
		h3000__frame_chunk__free_unpacked(c, NULL);
		free(whole);
	}
	assert_int_equal(ing_producer_in_flight(p), 1);

	/* RECEIVED arrives while the bodies are still queued: held back */
	struct ing_ack acks[8];
	fake_ack(77, true, H3000__ACK_STAGE__ACK_STAGE_RECEIVED, 0, false);
	assert_int_equal(ing_producer_poll(p, acks, 8, 0), 0);
	release_all();    /* the bytes are on the socket */
	assert_int_equal(ing_producer_poll(p, acks, 8, 0), 1);
	assert_string_equal(acks[0].frame_id, "77");
	assert_int_equal(acks[0].stage, ING_ACK_RECEIVED);
	assert_true(acks[0].ok);
	assert_false(acks[0].stored);   /* RECEIVED: not stored yet */
	assert_ptr_equal(acks[0].user, &tag);
	assert_int_equal(ing_producer_in_flight(p), 1);

	fake_ack(77, true, H3000__ACK_STAGE__ACK_STAGE_DURABLE, 0, true);
	fake_ack(77, true, H3000__ACK_STAGE__ACK_STAGE_DURABLE, 0, true);  /* repeated: ignored */
	fake_ack(999, true, H3000__ACK_STAGE__ACK_STAGE_DURABLE, 0, false); /* unknown: ignored */
	assert_int_equal(ing_producer_poll(p, acks, 8, 0), 1);
	assert_int_equal(acks[0].stage, ING_ACK_DURABLE);
	assert_true(acks[0].ok);
	assert_true(acks[0].stored);
	assert_true(acks[0].duplicate);
	assert_int_equal(ing_producer_in_flight(p), 0);
	struct ing_producer_stats st;
	ing_producer_get_stats(p, &st);
	assert_int_equal(st.submitted, 1);
	assert_int_equal(st.received, 1);
	assert_int_equal(st.durable, 1);
	assert_int_equal(st.duplicates, 1);
	assert_int_equal(st.bytes, len);
	ing_producer_close(p, 100);
	free(buf);
}

static void test_credits_and_failures(void **state)
{
	(void)state;
	struct ing_producer *p = connect_default(0, 0);   /* 4 credits */
	static uint8_t buf[100];
	struct ing_ack acks[8];
	submit_frames(p, 1, 4, buf, sizeof(buf));
	struct ing_frame_desc d5 = desc(5, buf, sizeof(buf), NULL);
	assert_int_equal(ing_producer_submit(p, &d5), -EAGAIN);
	release_all();
	/* a node failure ends frame 2; its credit returns only once the ack is delivered */
	fake_ack(2, false, 0, H3000__ERROR_CODE__ERROR_CRC_MISMATCH, false);
	assert_int_equal(ing_producer_submit(p, &d5), -EAGAIN);
	assert_int_equal(ing_producer_poll(p, acks, 8, 0), 1);
	assert_string_equal(acks[0].frame_id, "2");
	assert_false(acks[0].ok);
	assert_false(acks[0].stored);
	assert_int_equal(acks[0].code, 3);
	assert_int_equal(acks[0].stage, ING_ACK_NONE);
	assert_string_equal(acks[0].msg, "refused by the fake");
	assert_int_equal(ing_producer_submit(p, &d5), 0);
	ing_producer_close(p, 0);
}

static void test_nobufs_resumes(void **state)
{
	(void)state;
	struct ing_producer *p = connect_default(0, 0);
	static uint8_t buf[4096 * 3];
	struct ing_ack acks[8];
	F.nobufs = true;
	struct ing_frame_desc d = desc(9, buf, sizeof(buf), NULL);
	assert_int_equal(ing_producer_submit(p, &d), 0);
	assert_int_equal(F.nmsgs, 0);
	assert_int_equal(ing_producer_poll(p, acks, 8, 0), 0);
	assert_int_equal(F.nmsgs, 0);
	F.nobufs = false;
	assert_int_equal(ing_producer_poll(p, acks, 8, 0), 0);
	assert_int_equal(F.nmsgs, 3);
	ing_producer_close(p, 0);
}

static void test_node_failure_stops_sending(void **state)
{
	(void)state;
	struct ing_producer *p = connect_default(0, 0);
	static uint8_t buf[4096 * 3];
	struct ing_ack acks[8];
	F.accept_max = 1;
	struct ing_frame_desc d = desc(21, buf, sizeof(buf), NULL);
	assert_int_equal(ing_producer_submit(p, &d), 0);
	struct ing_frame_desc d2 = desc(22, buf, 100, NULL);
	assert_int_equal(ing_producer_submit(p, &d2), 0);
	assert_int_equal(F.nmsgs, 1);
	/* the node refuses frame 21 after its first chunk: the rest of it is not sent */
	fake_ack(21, false, 0, H3000__ERROR_CODE__ERROR_TOO_LARGE, false);
	F.accept_max = 0;
	assert_int_equal(ing_producer_poll(p, acks, 8, 0), 0);   /* held: chunk 1 not written */
	assert_int_equal(F.nmsgs, 2);                             /* frame 22 went next */
	uint8_t whole[PRODUCER_CHUNK_HEAD_MAX + 100];
	memcpy(whole, F.msgs[1].head, F.msgs[1].head_len);
	memcpy(whole + F.msgs[1].head_len, F.msgs[1].body, F.msgs[1].body_len);
	H3000__FrameChunk *c = h3000__frame_chunk__unpack(NULL, F.msgs[1].head_len + F.msgs[1].body_len,
							  whole);
	assert_non_null(c);
	assert_string_equal(c->frameid, "22");
	h3000__frame_chunk__free_unpacked(c, NULL);
	release_all();
	assert_int_equal(ing_producer_poll(p, acks, 8, 0), 1);
	assert_string_equal(acks[0].frame_id, "21");
	assert_false(acks[0].ok);
	assert_int_equal(acks[0].code, 2);
	assert_false(acks[0].retryable);
	ing_producer_close(p, 0);
}

static void test_frame_timeout(void **state)
{
	(void)state;
	struct ing_producer *p = connect_default(0, 30);
	static uint8_t buf[10];
	struct ing_ack acks[8];
	struct ing_frame_desc d = desc(11, buf, sizeof(buf), NULL);
	assert_int_equal(ing_producer_submit(p, &d), 0);
	release_all();
	fake_ack(11, true, H3000__ACK_STAGE__ACK_STAGE_RECEIVED, 0, false);
	int n = ing_producer_poll(p, acks, 8, 0);
	assert_int_equal(n, 1);
	int got = 0;
	for (int i = 0; i < 100 && !got; i++)
		got = ing_producer_poll(p, acks, 8, 20);
	assert_int_equal(got, 1);
	assert_false(acks[0].ok);
	assert_false(acks[0].stored);
	assert_int_equal(acks[0].code, ING_ERR_DEADLINE);
	assert_int_equal(acks[0].stage, ING_ACK_RECEIVED);
	assert_true(acks[0].retryable);
	assert_int_equal(ing_producer_in_flight(p), 0);
	/* the late DURABLE is ignored */
	fake_ack(11, true, H3000__ACK_STAGE__ACK_STAGE_DURABLE, 0, false);
	assert_int_equal(ing_producer_poll(p, acks, 8, 0), 0);
	ing_producer_close(p, 0);
}

/* reconnect_timeout_ms < 0: 1.3's behaviour, the frames in flight fail at once */
static void test_connection_lost_no_reconnect(void **state)
{
	(void)state;
	struct ing_producer *p = connect_opts(0, 0, -1, ING_ACK_NONE);
	static uint8_t buf[4096 * 2];
	struct ing_ack acks[8];
	submit_frames(p, 1, 2, buf, sizeof(buf));
	F.dead = -ECONNRESET;
	int n = ing_producer_poll(p, acks, 8, 0);
	assert_int_equal(n, 2);
	for (int i = 0; i < n; i++) {
		assert_false(acks[i].ok);
		assert_int_equal(acks[i].code, ING_ERR_TRANSFER);
		assert_true(acks[i].retryable);
	}
	assert_int_equal(ing_producer_poll(p, acks, 8, 0), -ECONNRESET);
	struct ing_frame_desc d = desc(3, buf, 10, NULL);
	assert_int_equal(ing_producer_submit(p, &d), -EPIPE);
	assert_int_equal(F.connects, 1);   /* never redialled */
	ing_producer_close(p, 100);
}

/*
 * The default: the connection is lost, the library redials, and the frames that were not
 * DURABLE are sent again in submit order on the new session; a frame whose buffer went back
 * at RECEIVED (recycle_on RECEIVED) fails instead, retryable.
 */
static void reconnect_case(enum ing_ack_stage recycle_on)
{
	struct ing_producer *p = connect_opts(0, 0, 0, recycle_on);
	static uint8_t buf[100];
	struct ing_ack acks[8];
	submit_frames(p, 1, 3, buf, sizeof(buf));
	assert_int_equal(F.nmsgs, 3);
	release_all();
	fake_ack(1, true, H3000__ACK_STAGE__ACK_STAGE_RECEIVED, 0, false);
	fake_ack(2, true, H3000__ACK_STAGE__ACK_STAGE_RECEIVED, 0, false);
	fake_ack(2, true, H3000__ACK_STAGE__ACK_STAGE_DURABLE, 0, false);
	assert_int_equal(poll_until(p, acks, 3), 3);   /* RECEIVED 1, RECEIVED 2, DURABLE 2 */
	assert_true(acks[2].stored);
	F.dead = -ECONNRESET;
	F.nmsgs = 0;
	bool resend1 = recycle_on == ING_ACK_DURABLE;
	/* the new session gets frame 3 (and 1 when its bytes are still ours) */
	int got = 0;
	if (!resend1) {
		got = poll_until(p, acks, 1);
		assert_int_equal(got, 1);
		assert_string_equal(acks[0].frame_id, "1");
		assert_false(acks[0].ok);
		assert_int_equal(acks[0].stage, ING_ACK_RECEIVED);
		assert_int_equal(acks[0].code, ING_ERR_TRANSFER);
		assert_true(acks[0].retryable);
		assert_non_null(strstr(acks[0].msg, "recycle_on DURABLE"));
	}
	poll_until_sent(p, resend1 ? 2 : 1);
	assert_int_equal(F.connects, 2);
	unsigned k = 0;
	if (resend1)
		assert_sent_frame(k++, "1");   /* submit order */
	assert_sent_frame(k, "3");
	release_all();
	if (resend1)
		fake_ack(1, true, H3000__ACK_STAGE__ACK_STAGE_DURABLE, 0, true);
	fake_ack(3, true, H3000__ACK_STAGE__ACK_STAGE_DURABLE, 0, false);
	int want = resend1 ? 2 : 1;
	assert_int_equal(poll_until(p, acks, want), want);
	for (int i = 0; i < want; i++) {
		assert_true(acks[i].ok);
		assert_true(acks[i].stored);
		assert_int_equal(acks[i].resends, 1);
	}
	struct ing_producer_stats st;
	ing_producer_get_stats(p, &st);
	assert_int_equal(st.failovers, 1);
	assert_int_equal(st.rerouted, resend1 ? 2 : 1);
	assert_int_equal(st.durable, resend1 ? 3 : 2);
	assert_int_equal(st.failed, resend1 ? 0 : 1);
	assert_int_equal(ing_producer_in_flight(p), 0);
	ing_producer_close(p, 100);
}

static void test_reconnect_resends(void **state)
{
	(void)state;
	reconnect_case(ING_ACK_NONE);     /* RECEIVED, the default */
	memset(&F.msgs, 0, sizeof(F.msgs));
	F.nmsgs = 0;
	F.connects = 0;
	reconnect_case(ING_ACK_DURABLE);
}

/* The node does not come back within reconnect_timeout_ms: the frames fail, poll says why. */
static void test_reconnect_gives_up(void **state)
{
	(void)state;
	struct ing_producer *p = connect_opts(0, 0, 300, ING_ACK_DURABLE);
	static uint8_t buf[100];
	struct ing_ack acks[8];
	struct ing_frame_desc d = desc(1, buf, sizeof(buf), NULL);
	assert_int_equal(ing_producer_submit(p, &d), 0);
	F.dead = -ECONNRESET;
	F.refuse = ECONNREFUSED;
	/* while it redials, submit still takes frames (kept for the next session) */
	assert_int_equal(ing_producer_poll(p, acks, 8, 0), 0);
	struct ing_frame_desc d2 = desc(2, buf, sizeof(buf), NULL);
	assert_int_equal(ing_producer_submit(p, &d2), 0);
	assert_int_equal(poll_until(p, acks, 2), 2);
	for (int i = 0; i < 2; i++) {
		assert_false(acks[i].ok);
		assert_int_equal(acks[i].code, ING_ERR_TRANSFER);
		assert_true(acks[i].retryable);
		assert_non_null(strstr(acks[i].msg, "not back within 300 ms"));
	}
	assert_int_equal(ing_producer_poll(p, acks, 8, 0), -ECONNREFUSED);
	struct ing_frame_desc d3 = desc(3, buf, sizeof(buf), NULL);
	assert_int_equal(ing_producer_submit(p, &d3), -EPIPE);
	assert_true(F.connects == 1);
	ing_producer_close(p, 0);
}

/*
 * An answer about one frame is not a lost connection (one server): a transfer the hardware
 * refused (the node's RDMA READ with a bad rkey: ERROR_TRANSFER, not retryable; the node
 * re-establishes the QP within the session) and a frame not finished in time (a push grant
 * never written: ERROR_DEADLINE) fail that frame alone, as the node said; nothing is
 * redialled or sent again, the other frames go on. ERROR_TRANSFER marked retryable (the
 * node's frames of an RDMA connection that did not come back) is the connection's: redial.
 */
static void test_frame_failure_is_not_a_lost_connection(void **state)
{
	(void)state;
	struct ing_producer *p = connect_opts(0, 0, 0, ING_ACK_DURABLE);
	static uint8_t buf[100];
	struct ing_ack acks[8];
	submit_frames(p, 1, 4, buf, sizeof(buf));
	assert_int_equal(F.nmsgs, 4);
	release_all();
	fake_nack(2, H3000__ERROR_CODE__ERROR_TRANSFER, false,
		  "RDMA READ failed: remote access error (bad addr/rkey/length?)");
	fake_nack(4, H3000__ERROR_CODE__ERROR_DEADLINE, true, "grant 7 not written within 10000 ms");
	assert_int_equal(poll_until(p, acks, 2), 2);
	assert_string_equal(acks[0].frame_id, "2");
	assert_false(acks[0].ok);
	assert_false(acks[0].stored);
	assert_int_equal(acks[0].code, ING_ERR_TRANSFER);
	assert_false(acks[0].retryable);
	assert_non_null(strstr(acks[0].msg, "remote access error"));
	assert_int_equal(acks[0].resends, 0);
	assert_string_equal(acks[1].frame_id, "4");
	assert_false(acks[1].ok);
	assert_int_equal(acks[1].code, ING_ERR_DEADLINE);
	assert_true(acks[1].retryable);
	/* the session goes on: no redial, nothing sent again, the others are acked on it */
	assert_int_equal(ing_producer_poll(p, acks, 8, 50), 0);
	assert_int_equal(F.connects, 1);
	assert_int_equal(F.nmsgs, 4);
	fake_ack(1, true, H3000__ACK_STAGE__ACK_STAGE_DURABLE, 0, false);
	fake_ack(3, true, H3000__ACK_STAGE__ACK_STAGE_DURABLE, 0, false);
	assert_int_equal(poll_until(p, acks, 2), 2);
	for (int i = 0; i < 2; i++) {
		assert_true(acks[i].ok);
		assert_true(acks[i].stored);
		assert_int_equal(acks[i].resends, 0);
	}
	struct ing_producer_stats st;
	ing_producer_get_stats(p, &st);
	assert_int_equal(st.failovers, 0);
	assert_int_equal(st.rerouted, 0);
	assert_int_equal(st.durable, 2);
	assert_int_equal(st.failed, 2);
	/* the node failed a frame with its RDMA connection: that is the connection's */
	submit_frames(p, 5, 1, buf, sizeof(buf));
	release_all();
	fake_nack(5, H3000__ERROR_CODE__ERROR_TRANSFER, true,
		  "RDMA connection lost and the producer did not reconnect within 5000 ms");
	F.nmsgs = 0;
	poll_until_sent(p, 1);
	assert_int_equal(F.connects, 2);
	assert_sent_frame(0, "5");
	release_all();
	fake_ack(5, true, H3000__ACK_STAGE__ACK_STAGE_DURABLE, 0, false);
	assert_int_equal(poll_until(p, acks, 1), 1);
	assert_true(acks[0].stored);
	assert_int_equal(acks[0].resends, 1);
	ing_producer_close(p, 100);
}

/*
 * The connection drops while the node holds a frame in flight (RECEIVED, its persistence
 * not done); the node lives on and finishes it. The reconnect's re-send of that frame finds
 * it still there: the node answers "already in flight" (ERROR_INVALID_ARGUMENT, retryable).
 * That is no failure: the frame goes to the node again after a back-off until the earlier
 * send has ended, and is then acked DURABLE (as a duplicate: the earlier send was stored)
 * once; the other frame's re-send is stored as usual.
 */
static void test_reconnect_resend_in_flight_waits(void **state)
{
	(void)state;
	struct ing_producer *p = connect_opts(0, 0, 0, ING_ACK_DURABLE);
	static uint8_t buf[100];
	struct ing_ack acks[8];
	submit_frames(p, 1, 2, buf, sizeof(buf));
	release_all();
	fake_ack(1, true, H3000__ACK_STAGE__ACK_STAGE_RECEIVED, 0, false);
	assert_int_equal(poll_until(p, acks, 1), 1);
	F.dead = -ECONNRESET;
	F.nmsgs = 0;
	poll_until_sent(p, 2);   /* 1 and 2 on the new session */
	assert_int_equal(F.connects, 2);
	release_all();
	fake_nack(1, H3000__ERROR_CODE__ERROR_INVALID_ARGUMENT, true,
		  "frame 1 of wafer W1: already in flight in this node");
	/* not failed, not sent again at once */
	assert_int_equal(ing_producer_poll(p, acks, 8, 0), 0);
	assert_int_equal(F.nmsgs, 2);
	fake_ack(2, true, H3000__ACK_STAGE__ACK_STAGE_DURABLE, 0, false);
	assert_int_equal(poll_until(p, acks, 1), 1);
	assert_string_equal(acks[0].frame_id, "2");
	assert_true(acks[0].stored);
	/* ... but after the back-off, to the same session; refused again, and again later */
	poll_until_sent(p, 3);
	assert_sent_frame(2, "1");
	release_all();
	fake_nack(1, H3000__ERROR_CODE__ERROR_INVALID_ARGUMENT, true,
		  "frame 1 of wafer W1: already in flight in this node");
	poll_until_sent(p, 4);
	assert_sent_frame(3, "1");
	release_all();
	/* the earlier send is stored by now: this one is its duplicate, DURABLE once */
	fake_ack(1, true, H3000__ACK_STAGE__ACK_STAGE_DURABLE, 0, true);
	assert_int_equal(poll_until(p, acks, 1), 1);
	assert_string_equal(acks[0].frame_id, "1");
	assert_true(acks[0].ok);
	assert_true(acks[0].stored);
	assert_true(acks[0].duplicate);
	assert_int_equal(acks[0].resends, 3);   /* after the loss, then twice while held */
	assert_int_equal(ing_producer_poll(p, acks, 8, 50), 0);
	struct ing_producer_stats st;
	ing_producer_get_stats(p, &st);
	assert_int_equal(st.failovers, 1);
	assert_int_equal(F.connects, 2);
	assert_int_equal(st.durable, 2);
	assert_int_equal(st.failed, 0);
	assert_int_equal(st.duplicates, 1);
	assert_int_equal(ing_producer_in_flight(p), 0);
	ing_producer_close(p, 100);
}

static void *wake_later(void *arg)
{
	usleep(20000);
	ing_producer_wake(arg);
	return NULL;
}

/* A poll waiting for acks returns at once when woken (before it or from another thread). */
static void test_wake(void **state)
{
	(void)state;
	struct ing_producer *p = connect_default(0, 0);
	struct ing_ack acks[8];
	ing_producer_wake(p);
	uint64_t t0 = ing_now_ns();
	assert_int_equal(ing_producer_poll(p, acks, 8, 30000), 0);
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, wake_later, p), 0);
	assert_int_equal(ing_producer_poll(p, acks, 8, 30000), 0);
	pthread_join(th, NULL);
	/* not a timing budget: a poll that was not woken would have waited its full 2 x 30 s */
	assert_true(ing_now_ns() - t0 < 30ull * 1000000000ull);
	ing_producer_wake(NULL);   /* tolerated */
	ing_producer_close(p, 0);
}

/* ing_producer_open: the reason as a code too; ing_error_retryable on those codes. */
static void test_open_codes(void **state)
{
	(void)state;
	struct ing_producer_opts o;
	struct ing_producer *p = (struct ing_producer *)&o;
	char err[256];
	ing_producer_opts_init(&o);
	assert_int_equal(ing_producer_open(&p, &o, err, sizeof(err)), -EINVAL);   /* no server */
	assert_null(p);
	assert_string_equal(err, "no server address");
	assert_false(ing_error_retryable(-EINVAL));
	o.server = "127.0.0.1:1";
	F.refuse = ECONNREFUSED;
	assert_int_equal(ing_producer_open(&p, &o, err, sizeof(err)), -ECONNREFUSED);
	assert_null(p);
	assert_non_null(strstr(err, "Connection refused"));
	assert_true(ing_error_retryable(-ECONNREFUSED));
	F.refuse = 0;
	F.negotiate_status = ING_GRPC_UNAUTHENTICATED;
	assert_int_equal(ing_producer_open(&p, &o, err, sizeof(err)), -EACCES);
	assert_non_null(strstr(err, "UNAUTHENTICATED"));
	assert_false(ing_error_retryable(-EACCES));
	F.negotiate_status = 0;
	o.transport = ING_TRANSPORT_RDMA;   /* no RDMA here: this side cannot */
	assert_int_equal(ing_producer_open(&p, &o, err, sizeof(err)), -EOPNOTSUPP);
	assert_false(ing_error_retryable(-EOPNOTSUPP));
	o.transport = ING_TRANSPORT_AUTO;
	assert_int_equal(ing_producer_open(&p, &o, err, sizeof(err)), 0);
	assert_non_null(p);
	ing_producer_close(p, 0);
	/* acks' codes */
	assert_true(ing_error_retryable(ING_ERR_BUSY));
	assert_true(ing_error_retryable(ING_ERR_SHUTTING_DOWN));
	assert_false(ing_error_retryable(ING_ERR_DUPLICATE_CONFLICT));
	assert_false(ing_error_retryable(ING_ERR_TOO_LARGE));
}

static void test_frame_pool(void **state)
{
	(void)state;
	struct ing_producer_opts o;
	char err[256];
	ing_producer_opts_init(&o);
	o.server = "127.0.0.1:1";
	o.pool_frames = 2;
	o.pool_frame_size = 5000;    /* rounded up to 8 KiB */
	struct ing_producer *p = ing_producer_connect(&o, err, sizeof(err));
	assert_non_null(p);
	void *a = ing_frame_alloc(p, 8192);
	void *b = ing_frame_alloc(p, 1);
	assert_non_null(a);
	assert_non_null(b);
	assert_null(ing_frame_alloc(p, 1));            /* empty */
	ing_frame_free(p, b);
	assert_null(ing_frame_alloc(p, 8193));         /* too large */
	void *c = ing_frame_alloc(p, 100);
	assert_ptr_equal(b, c);
	ing_frame_free(p, c);
	ing_frame_free(p, c);                          /* double free: refused, logged */
	ing_frame_free(p, (uint8_t *)a + 1);           /* not a frame start: refused */
	ing_frame_free(p, a);
	assert_non_null(ing_frame_alloc(p, 1));
	assert_non_null(ing_frame_alloc(p, 1));
	assert_null(ing_frame_alloc(p, 1));
	ing_producer_close(p, 0);
	ing_producer_close(NULL, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_negotiate_and_session, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rdma_only_fails, setup, teardown),
		cmocka_unit_test_setup_teardown(test_validation, setup, teardown),
		cmocka_unit_test_setup_teardown(test_chunks_and_acks, setup, teardown),
		cmocka_unit_test_setup_teardown(test_credits_and_failures, setup, teardown),
		cmocka_unit_test_setup_teardown(test_nobufs_resumes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_node_failure_stops_sending, setup, teardown),
		cmocka_unit_test_setup_teardown(test_frame_timeout, setup, teardown),
		cmocka_unit_test_setup_teardown(test_connection_lost_no_reconnect, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reconnect_resends, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reconnect_gives_up, setup, teardown),
		cmocka_unit_test_setup_teardown(test_frame_failure_is_not_a_lost_connection, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_reconnect_resend_in_flight_waits, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_wake, setup, teardown),
		cmocka_unit_test_setup_teardown(test_open_codes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_frame_pool, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
