/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Placement in the gRPC server (control/net/grpc_server.c): DATA frame data read straight
 * into a handler's memory (on_msg_sink / on_msg_placed). The client's bytes are written
 * here frame by frame and fed through grpc_server_feed(), the server's own receive path
 * with reads of sizes the test chooses (no socket, no thread, no timing); what the server
 * writes back is parsed for WINDOW_UPDATE, RST_STREAM and GOAWAY.
 *
 * The method under test reads messages of a 7-byte head (copy path: "Mkkkkkk") followed
 * by data whose every byte is known (pattern(k, i)); the data goes to a slot of exactly its
 * length with guard bytes after it. At each message end the slot must hold the pattern,
 * the guard must be intact, and the crc of the bytes as they were copied or placed must
 * equal the slot's.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "control/net/grpc_server.h"
#include "control/net/grpc_internal.h"
#include "control/net/loop.h"
#include "common/crc32c.h"
#include "common/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HEAD 7u
#define GUARD 64u
#define MAXMSG 64
#define MAXCALL 8

static uint8_t pattern(unsigned k, size_t i)
{
	return (uint8_t)(k * 31u + i * 7u + (i >> 9));
}

/* ---------------------------------------------------------------- the method */

struct msgrec {
	unsigned k;          /* message number from its head */
	size_t len;          /* data bytes */
	size_t placed;       /* of them placed */
	bool ok;             /* pattern, guard and crc all right */
};

struct tcall {
	struct ing_grpc_call *c;
	int32_t id;          /* order of on_start */
	size_t len, pos;     /* message payload length, bytes of it seen */
	uint8_t head[HEAD];
	uint8_t *slot;       /* len - HEAD data bytes + GUARD */
	uint32_t crc;
	size_t placed;
	struct msgrec msgs[MAXMSG];
	unsigned nmsgs;
	int closes, close_status;
	bool half_closed;
};

static struct {
	struct ing_loop *loop;
	struct tcall calls[MAXCALL];
	unsigned ncalls;
	bool decline;            /* the sink announces its runs but places nothing */
	bool pause_at_start;     /* every call starts paused (flow control test) */
	unsigned pause_after;    /* pause after this message (1-based), resumed by a timer */
	struct ing_timer resume;
	struct ing_grpc_call *paused;
} T;

static void resume_cb(void *arg)
{
	(void)arg;
	if (T.paused)
		ing_grpc_call_resume(T.paused);
	T.paused = NULL;
}

static int t_start(struct ing_grpc_call *c, void *ctx)
{
	(void)ctx;
	if (T.ncalls == MAXCALL)
		return ING_GRPC_RESOURCE_EXHAUSTED;
	struct tcall *t = &T.calls[T.ncalls];
	memset(t, 0, sizeof(*t));
	t->c = c;
	t->id = (int32_t)T.ncalls++;
	ing_grpc_call_set_user(c, t);
	if (T.pause_at_start)
		ing_grpc_call_pause(c);
	return ING_GRPC_OK;
}

static int t_begin(struct ing_grpc_call *c, size_t len)
{
	struct tcall *t = ing_grpc_call_user(c);
	if (len < HEAD)
		return ING_GRPC_INVALID_ARGUMENT;
	t->len = len;
	t->pos = 0;
	t->crc = 0;
	t->placed = 0;
	free(t->slot);
	t->slot = malloc(len - HEAD + GUARD);
	if (!t->slot)
		return ING_GRPC_RESOURCE_EXHAUSTED;
	memset(t->slot, 0xa5, len - HEAD + GUARD);
	return 0;
}

static int t_data(struct ing_grpc_call *c, const uint8_t *p, size_t n)
{
	struct tcall *t = ing_grpc_call_user(c);
	while (n && t->pos < HEAD) {
		t->head[t->pos++] = *p++;
		n--;
	}
	if (n) {
		memcpy(t->slot + t->pos - HEAD, p, n);
		t->crc = ing_crc32c(t->crc, p, n);
		t->pos += n;
	}
	return 0;
}

static uint8_t *t_sink(struct ing_grpc_call *c, size_t *n)
{
	struct tcall *t = ing_grpc_call_user(c);
	*n = 0;
	if (t->pos < HEAD)
		return NULL;   /* the head comes first: through on_msg_data */
	*n = t->len - t->pos;
	return T.decline ? NULL : t->slot + t->pos - HEAD;
}

static int t_placed(struct ing_grpc_call *c, size_t n)
{
	struct tcall *t = ing_grpc_call_user(c);
	assert_true(t->pos >= HEAD);
	assert_true(n > 0 && n <= t->len - t->pos);
	assert_false(T.decline);
	t->crc = ing_crc32c(t->crc, t->slot + t->pos - HEAD, n);
	t->pos += n;
	t->placed += n;
	return 0;
}

static int t_end(struct ing_grpc_call *c)
{
	struct tcall *t = ing_grpc_call_user(c);
	assert_int_equal(t->pos, t->len);
	assert_true(t->nmsgs < MAXMSG);
	struct msgrec *r = &t->msgs[t->nmsgs++];
	size_t dl = t->len - HEAD;
	r->k = (unsigned)strtoul((const char *)t->head + 1, NULL, 10);
	r->len = dl;
	r->placed = t->placed;
	r->ok = t->head[0] == 'M' && ing_crc32c(0, t->slot, dl) == t->crc;
	for (size_t i = 0; r->ok && i < dl; i++)
		r->ok = t->slot[i] == pattern(r->k, i);
	for (size_t i = 0; r->ok && i < GUARD; i++)
		r->ok = t->slot[dl + i] == 0xa5;
	if (T.pause_after && t->nmsgs == T.pause_after) {
		ing_grpc_call_pause(c);
		T.paused = c;
		ing_timer_arm(T.loop, &T.resume, 0);
	}
	return 0;
}

static void t_half_close(struct ing_grpc_call *c)
{
	struct tcall *t = ing_grpc_call_user(c);
	t->half_closed = true;
	ing_grpc_call_finish(c, ING_GRPC_OK, NULL);
}

static void t_close(struct ing_grpc_call *c, int status)
{
	struct tcall *t = ing_grpc_call_user(c);
	t->closes++;
	t->close_status = status;
	free(t->slot);
	t->slot = NULL;
	if (T.paused == c)
		T.paused = NULL;
}

static const struct ing_grpc_method methods[] = {
	{ .path = "/t.T/Place", .on_start = t_start, .on_msg_begin = t_begin,
	  .on_msg_data = t_data, .on_msg_end = t_end, .on_msg_sink = t_sink,
	  .on_msg_placed = t_placed, .on_half_close = t_half_close, .on_close = t_close },
};

/* ---------------------------------------------------------------- the client's bytes */

struct wbuf {
	uint8_t *p;
	size_t len, cap;
	/* offsets where a read split is interesting: frame header, pad length, prefix,
	 * head, data start and end, padding */
	size_t marks[4096];
	size_t nmarks;
};

static void put(struct wbuf *w, const void *p, size_t n)
{
	if (w->len + n > w->cap) {
		w->cap = (w->len + n) * 2 + 4096;
		w->p = realloc(w->p, w->cap);
		assert_non_null(w->p);
	}
	memcpy(w->p + w->len, p, n);
	w->len += n;
}

static void mark(struct wbuf *w)
{
	if (w->nmarks < sizeof(w->marks) / sizeof(w->marks[0]))
		w->marks[w->nmarks++] = w->len;
}

static void frame_hd(struct wbuf *w, size_t len, uint8_t type, uint8_t flags, uint32_t sid)
{
	uint8_t h[9] = { (uint8_t)(len >> 16), (uint8_t)(len >> 8), (uint8_t)len, type, flags,
			 (uint8_t)(sid >> 24), (uint8_t)(sid >> 16), (uint8_t)(sid >> 8), (uint8_t)sid };
	mark(w);
	put(w, h, 9);
}

static void preface(struct wbuf *w)
{
	put(w, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 24);
	frame_hd(w, 0, 4, 0, 0);   /* empty SETTINGS */
	frame_hd(w, 0, 4, 1, 0);   /* ACK of the server's (its windows apply from here) */
}

static void hpack_lit(struct wbuf *w, const char *n, const char *v)
{
	uint8_t b[2] = { 0, (uint8_t)strlen(n) };
	put(w, b, 2);
	put(w, n, strlen(n));
	b[0] = (uint8_t)strlen(v);
	put(w, b, 1);
	put(w, v, strlen(v));
}

static void headers(struct wbuf *w, uint32_t sid)
{
	struct wbuf h = { 0 };
	hpack_lit(&h, ":method", "POST");
	hpack_lit(&h, ":scheme", "http");
	hpack_lit(&h, ":path", "/t.T/Place");
	hpack_lit(&h, ":authority", "127.0.0.1");
	hpack_lit(&h, "content-type", "application/grpc");
	hpack_lit(&h, "te", "trailers");
	frame_hd(w, h.len, 1, 0x4, sid);
	put(w, h.p, h.len);
	free(h.p);
}

static void rst(struct wbuf *w, uint32_t sid, uint32_t code)
{
	uint8_t c[4] = { (uint8_t)(code >> 24), (uint8_t)(code >> 16), (uint8_t)(code >> 8),
			 (uint8_t)code };
	frame_hd(w, 4, 3, 0, sid);
	put(w, c, 4);
}

/* The gRPC bytes of one stream: messages k (head "M%06u") of dlen data bytes each. */
struct gstream {
	struct wbuf b;
	size_t off;   /* bytes already put into DATA frames */
};

static void gmsg(struct gstream *g, unsigned k, size_t dlen)
{
	size_t len = HEAD + dlen;
	uint8_t pfx[5] = { 0, (uint8_t)(len >> 24), (uint8_t)(len >> 16), (uint8_t)(len >> 8),
			   (uint8_t)len };
	char head[HEAD + 1];
	snprintf(head, sizeof(head), "M%06u", k);
	mark(&g->b);
	put(&g->b, pfx, 5);
	mark(&g->b);
	put(&g->b, head, HEAD);
	mark(&g->b);
	for (size_t i = 0; i < dlen; i++) {
		uint8_t v = pattern(k, i);
		put(&g->b, &v, 1);
	}
	mark(&g->b);
}

/*
 * The next n bytes of stream g as one DATA frame on sid (pad: -1 none, else PADDED with
 * that many bytes of padding). The stream's own marks inside the frame are carried over.
 */
static void data(struct wbuf *w, uint32_t sid, struct gstream *g, size_t n, int pad, bool end)
{
	size_t plen = n + (pad >= 0 ? 1u + (size_t)pad : 0u);
	frame_hd(w, plen, 0, (uint8_t)((end ? 0x1 : 0) | (pad >= 0 ? 0x8 : 0)), sid);
	if (pad >= 0) {
		uint8_t pl = (uint8_t)pad;
		mark(w);
		put(w, &pl, 1);
	}
	size_t base = w->len;
	mark(w);
	for (size_t i = 0; i < g->b.nmarks; i++)
		if (g->b.marks[i] > g->off && g->b.marks[i] < g->off + n &&
		    w->nmarks < sizeof(w->marks) / sizeof(w->marks[0]))
			w->marks[w->nmarks++] = base + g->b.marks[i] - g->off;
	put(w, g->b.p + g->off, n);
	g->off += n;
	if (pad > 0) {
		mark(w);
		uint8_t z[256] = { 0 };
		put(w, z, (size_t)pad);
	}
}

/* At most n more bytes of stream g as one unpadded DATA frame on sid, END_STREAM with its
 * last byte; false when nothing is left. */
static bool data_next(struct wbuf *w, uint32_t sid, struct gstream *g, size_t n)
{
	if (g->off == g->b.len)
		return false;
	if (n > g->b.len - g->off)
		n = g->b.len - g->off;
	data(w, sid, g, n, -1, g->off + n == g->b.len);
	return true;
}

/* ---------------------------------------------------------------- the server's bytes */

struct seen {
	uint64_t wu[16];        /* WINDOW_UPDATE increments by stream id (0: connection) */
	int rst[16];            /* RST_STREAM code by stream id, -1 none */
	int goaway;             /* GOAWAY error code, -1 none */
	size_t frames;
};

static void parse_out(const uint8_t *p, size_t n, struct seen *s)
{
	memset(s, 0, sizeof(*s));
	s->goaway = -1;
	for (int i = 0; i < 16; i++)
		s->rst[i] = -1;
	size_t o = 0;
	while (o + 9 <= n) {
		size_t len = (size_t)p[o] << 16 | (size_t)p[o + 1] << 8 | p[o + 2];
		uint8_t type = p[o + 3];
		uint32_t sid = ((uint32_t)p[o + 5] << 24 | (uint32_t)p[o + 6] << 16 |
				(uint32_t)p[o + 7] << 8 | p[o + 8]) & 0x7fffffff;
		const uint8_t *pl = p + o + 9;
		assert_true(o + 9 + len <= n);
		uint32_t v = len >= 4 ? ((uint32_t)pl[0] << 24 | (uint32_t)pl[1] << 16 |
					 (uint32_t)pl[2] << 8 | pl[3]) : 0;
		if (type == 8 && sid < 16)
			s->wu[sid] += v & 0x7fffffff;
		else if (type == 3 && sid < 16)
			s->rst[sid] = (int)v;
		else if (type == 7 && len >= 8)
			s->goaway = (int)((uint32_t)pl[4] << 24 | (uint32_t)pl[5] << 16 |
					  (uint32_t)pl[6] << 8 | pl[7]);
		s->frames++;
		o += 9 + len;
	}
	assert_int_equal(o, n);
}

/* ---------------------------------------------------------------- harness */

static uint8_t outbuf[1u << 20];

static struct ing_grpc_server *server(uint32_t window, uint32_t conn_window, uint32_t place_min)
{
	struct ing_grpc_server_opts o;
	ing_grpc_server_opts_init(&o);
	o.no_listen = true;
	o.max_frame_size = 16384;
	o.window_bytes = window;
	o.conn_window_bytes = conn_window;
	o.place_min = place_min;
	o.max_recv_msg = 1u << 20;
	struct ing_grpc_server *s = ing_grpc_server_create(T.loop, &o, methods, 1);
	assert_non_null(s);
	return s;
}

static void reset(void)
{
	for (unsigned i = 0; i < T.ncalls; i++)
		free(T.calls[i].slot);
	ing_timer_cancel(T.loop, &T.resume);
	struct ing_loop *l = T.loop;
	memset(&T, 0, sizeof(T));
	T.loop = l;
	ing_timer_init(&T.resume, resume_cb, NULL);
}

/* Feed w with reads of the sizes in pieces (cycled); the server's output parsed. */
static void feed(struct ing_grpc_server *s, const struct wbuf *w, const size_t *pieces,
		 size_t np, struct grpc_feed *f, struct seen *seen)
{
	memset(f, 0, sizeof(*f));
	f->in = w->p;
	f->n = w->len;
	f->pieces = pieces;
	f->npieces = np;
	f->out = outbuf;
	f->out_cap = sizeof(outbuf);
	assert_int_equal(grpc_server_feed(s, f), 0);
	assert_true(f->out_len <= sizeof(outbuf));
	parse_out(outbuf, f->out_len, seen);
}

static void check_msgs(const struct tcall *t, unsigned first_k, unsigned n, const size_t *dlen)
{
	assert_int_equal(t->nmsgs, n);
	for (unsigned i = 0; i < n; i++) {
		assert_int_equal(t->msgs[i].k, first_k + i);
		assert_int_equal(t->msgs[i].len, dlen[i]);
		assert_true(t->msgs[i].ok);
	}
}

static size_t placed_total(const struct tcall *t)
{
	size_t n = 0;
	for (unsigned i = 0; i < t->nmsgs; i++)
		n += t->msgs[i].placed;
	return n;
}

/* ---------------------------------------------------------------- tests */

/* Three messages over padded and plain DATA frames on one stream. */
static const size_t three[] = { 40000, 1, 70000 };

static size_t build_three(struct wbuf *w)
{
	struct gstream g = { 0 };
	for (unsigned k = 0; k < 3; k++)
		gmsg(&g, 100 + k, three[k]);
	preface(w);
	headers(w, 1);
	size_t hdr_end = w->len;
	int pads[] = { -1, 0, 5, -1, 255, 1 };
	unsigned i = 0;
	while (g.off < g.b.len) {
		size_t n = g.b.len - g.off;
		int pad = pads[i++ % 6];
		size_t room = 16384 - (pad >= 0 ? 1u + (size_t)pad : 0u);
		if (n > room)
			n = room;
		if (i == 3)
			n = 1000;   /* a short frame: the next one starts mid-data */
		data(w, 1, &g, n, pad, g.off + n == g.b.len);
	}
	free(g.b.p);
	return hdr_end;   /* a first read that ends here: the call exists, then placement */
}

/* Reads split at every boundary the stream has (frame header, pad length, gRPC prefix,
 * head, data, padding): each message arrives whole and right, placed where reads allow. */
static void test_place_splits(void **state)
{
	(void)state;
	struct wbuf w = { 0 };
	size_t hdr_end = build_three(&w);
	uint64_t placed_any = 0;
	for (size_t m = 0; m <= w.nmarks; m++) {
		for (int d = -1; d <= 1; d++) {
			reset();
			size_t b = m < w.nmarks ? w.marks[m] : 0;
			if ((long)b + d <= 0)
				continue;
			size_t pieces[2] = { b + (size_t)(long)d, 0 };   /* split there, then any */
			struct ing_grpc_server *s = server(1u << 20, 4u << 20, 1);
			struct grpc_feed f;
			struct seen sn;
			feed(s, &w, pieces, m < w.nmarks ? 2 : 1, &f, &sn);
			assert_int_equal(T.ncalls, 1);
			check_msgs(&T.calls[0], 100, 3, three);
			assert_true(T.calls[0].half_closed);
			assert_int_equal(T.calls[0].closes, 1);
			assert_int_equal(T.calls[0].close_status, ING_GRPC_OK);
			assert_int_equal(sn.goaway, -1);
			assert_int_equal(sn.rst[1], -1);
			assert_int_equal(f.placed, placed_total(&T.calls[0]));
			placed_any += f.placed;
			ing_grpc_server_destroy(s);
		}
	}
	assert_true(placed_any > 0);
	/* one byte per read: placed a byte at a time where runs are long enough */
	reset();
	struct ing_grpc_server *s = server(1u << 20, 4u << 20, 64);
	size_t one = 1;
	struct grpc_feed f;
	struct seen sn;
	feed(s, &w, &one, 1, &f, &sn);
	check_msgs(&T.calls[0], 100, 3, three);
	assert_int_equal(f.placed, placed_total(&T.calls[0]));
	assert_int_equal(T.calls[0].close_status, ING_GRPC_OK);
	ing_grpc_server_destroy(s);
	/* reads of any size after the headers: nearly all data placed (default place_min) */
	reset();
	s = server(1u << 20, 4u << 20, 0);
	const size_t after_hdr[2] = { hdr_end, 0 };
	feed(s, &w, after_hdr, 2, &f, &sn);
	check_msgs(&T.calls[0], 100, 3, three);
	assert_true(f.placed > (three[0] + three[2]) * 9 / 10);
	ing_grpc_server_destroy(s);
	free(w.p);
}

/* Messages one per DATA frame, reads as large as asked: a placed run that ends the data
 * brings the next frame's header and the next message's head in the same read, so each
 * message costs one read (not one for its head, then one for its data). */
static void test_place_one_read_per_message(void **state)
{
	(void)state;
	enum { N = 8, DLEN = 12000 };
	size_t dl[N];
	struct wbuf w = { 0 };
	struct gstream g = { 0 };
	for (unsigned k = 0; k < N; k++) {
		dl[k] = DLEN;
		gmsg(&g, 200 + k, DLEN);
	}
	preface(&w);
	headers(&w, 1);
	size_t hdr_end = w.len;
	size_t msg = g.b.len / N;
	for (unsigned k = 0; k < N; k++)
		data(&w, 1, &g, msg, -1, k == N - 1);
	free(g.b.p);
	reset();
	struct ing_grpc_server *s = server(1u << 20, 4u << 20, 0);
	size_t after_hdr[4 * N] = { hdr_end };   /* (cycled: zeros, any size, past the end) */
	struct grpc_feed f;
	struct seen sn;
	feed(s, &w, after_hdr, 4 * N, &f, &sn);
	check_msgs(&T.calls[0], 200, N, dl);
	assert_int_equal(T.calls[0].close_status, ING_GRPC_OK);
	assert_true(f.placed > (size_t)N * DLEN * 9 / 10);
	/* the headers, the first message's head, then one read per message */
	assert_true(f.reads <= 2 + N);
	ing_grpc_server_destroy(s);
	free(w.p);
}

/* The sink announces its runs and places nothing: all of it comes through on_msg_data. */
static void test_place_declined(void **state)
{
	(void)state;
	struct wbuf w = { 0 };
	size_t hdr_end = build_three(&w);
	const size_t after_hdr[2] = { hdr_end, 0 };
	reset();
	T.decline = true;
	struct ing_grpc_server *s = server(1u << 20, 4u << 20, 1);
	struct grpc_feed f;
	struct seen sn;
	feed(s, &w, after_hdr, 2, &f, &sn);
	check_msgs(&T.calls[0], 100, 3, three);
	assert_int_equal(f.placed, 0);
	assert_int_equal(T.calls[0].close_status, ING_GRPC_OK);
	ing_grpc_server_destroy(s);
	free(w.p);
}

/* A pause between messages (its held bytes are copied when it resumes), then placed again. */
static void test_place_pause_resume(void **state)
{
	(void)state;
	struct wbuf w = { 0 };
	build_three(&w);
	static const size_t pieces[] = { 3000, 20000, 0 };
	for (unsigned after = 1; after <= 2; after++) {
		reset();
		T.pause_after = after;
		struct ing_grpc_server *s = server(1u << 20, 4u << 20, 1);
		struct grpc_feed f;
		struct seen sn;
		feed(s, &w, pieces, 3, &f, &sn);
		check_msgs(&T.calls[0], 100, 3, three);
		assert_int_equal(T.calls[0].close_status, ING_GRPC_OK);
		ing_grpc_server_destroy(s);
	}
	free(w.p);
}

/* Two streams whose DATA frames alternate, every frame ending mid-data. */
static void test_place_two_streams(void **state)
{
	(void)state;
	struct gstream a = { 0 }, b = { 0 };
	static const size_t la[] = { 50000, 30000 }, lb[] = { 20000, 60000 };
	for (unsigned k = 0; k < 2; k++) {
		gmsg(&a, 10 + k, la[k]);
		gmsg(&b, 20 + k, lb[k]);
	}
	struct wbuf w = { 0 };
	preface(&w);
	headers(&w, 1);
	headers(&w, 3);
	size_t hdr_end = w.len;   /* the first read ends here: the calls exist, then placement */
	for (bool more = true; more;) {
		size_t n = a.b.len - a.off < 9999 ? a.b.len - a.off : 9999;
		if (n)   /* stream 1's odd-sized frames are padded */
			data(&w, 1, &a, n, n % 2 ? 3 : -1, a.off + n == a.b.len);
		more = data_next(&w, 3, &b, 12345) || a.off < a.b.len;
	}
	const size_t sizes[][2] = { { hdr_end, 0 }, { 4096, 0 }, { 777, 9 } };
	for (unsigned v = 0; v < 3; v++) {
		reset();
		struct ing_grpc_server *s = server(1u << 20, 4u << 20, 1);
		struct grpc_feed f;
		struct seen sn;
		feed(s, &w, sizes[v], 2, &f, &sn);
		assert_int_equal(T.ncalls, 2);
		check_msgs(&T.calls[0], 10, 2, la);
		check_msgs(&T.calls[1], 20, 2, lb);
		assert_true(placed_total(&T.calls[0]) > 0);
		assert_true(placed_total(&T.calls[1]) > 0);
		assert_int_equal(f.placed, placed_total(&T.calls[0]) + placed_total(&T.calls[1]));
		assert_int_equal(T.calls[0].close_status, ING_GRPC_OK);
		assert_int_equal(T.calls[1].close_status, ING_GRPC_OK);
		ing_grpc_server_destroy(s);
	}
	free(a.b.p);
	free(b.b.p);
	free(w.p);
}

/* RST_STREAM in the middle of a message's data: that call ends CANCELLED, once, with no
 * message; the other stream's messages arrive whole; the connection stays up. */
static void test_place_reset_mid_payload(void **state)
{
	(void)state;
	struct gstream a = { 0 }, b = { 0 };
	gmsg(&a, 1, 60000);
	gmsg(&b, 2, 60000);
	static const size_t lb[] = { 60000 };
	struct wbuf w = { 0 };
	preface(&w);
	headers(&w, 1);
	data(&w, 1, &a, 16000, -1, false);
	data(&w, 1, &a, 16000, 2, false);
	rst(&w, 1, 8 /* CANCEL */);
	headers(&w, 3);
	while (data_next(&w, 3, &b, 16000))
		;
	reset();
	struct ing_grpc_server *s = server(1u << 20, 4u << 20, 1);
	struct grpc_feed f;
	struct seen sn;
	static const size_t pieces[] = { 20000, 5000 };
	feed(s, &w, pieces, 2, &f, &sn);
	assert_int_equal(T.ncalls, 2);
	assert_int_equal(T.calls[0].nmsgs, 0);
	assert_int_equal(T.calls[0].closes, 1);
	assert_int_equal(T.calls[0].close_status, ING_GRPC_CANCELLED);
	check_msgs(&T.calls[1], 2, 1, lb);
	assert_true(placed_total(&T.calls[1]) > 0);
	assert_int_equal(T.calls[1].close_status, ING_GRPC_OK);
	assert_int_equal(sn.goaway, -1);
	ing_grpc_server_destroy(s);
	free(a.b.p);
	free(b.b.p);
	free(w.p);
}

/* The connection ends in the middle of a DATA frame's data (after bytes were placed):
 * the call ends UNAVAILABLE, once, without the message. */
static void test_place_closed_mid_payload(void **state)
{
	(void)state;
	struct gstream g = { 0 };
	gmsg(&g, 1, 100000);
	struct wbuf w = { 0 };
	preface(&w);
	headers(&w, 1);
	const size_t pieces[2] = { w.len, 0 };   /* the call exists after the first read */
	data(&w, 1, &g, 16000, -1, false);
	data(&w, 1, &g, 16000, -1, false);
	size_t cut = w.len - 5000;
	for (size_t c = cut; c <= w.len - 1; c += 2000) {
		reset();
		struct wbuf part = w;
		part.len = c;
		struct ing_grpc_server *s = server(1u << 20, 4u << 20, 1);
		struct grpc_feed f;
		struct seen sn;
		feed(s, &part, pieces, 2, &f, &sn);
		assert_true(f.placed > 0);
		assert_false(f.server_closed);
		assert_int_equal(T.calls[0].nmsgs, 0);
		assert_int_equal(T.calls[0].closes, 1);
		assert_int_equal(T.calls[0].close_status, ING_GRPC_UNAVAILABLE);
		ing_grpc_server_destroy(s);
	}
	free(g.b.p);
	free(w.p);
}

/*
 * Flow control with placement. A client that sends only what it was granted (the
 * initial window, then what each WINDOW_UPDATE gives back) gets everything through
 * without an error, every byte given back no more than once (the grants never exceed
 * what was sent; what is not given back yet is below nghttp2's threshold, half a window),
 * whatever the reads. A call that consumes nothing (paused) lets the client send exactly
 * its window: one byte more is a FLOW_CONTROL_ERROR for the connection.
 */
static void test_place_flow_control(void **state)
{
	(void)state;
	const uint32_t win = 64 * 1024;
	struct gstream g = { 0 };
	static const size_t lens[] = { 150001, 99999, 200000 };
	for (unsigned k = 0; k < 3; k++)
		gmsg(&g, 1 + k, lens[k]);
	static const size_t sizes[][3] = { { 0 }, { 1000, 17000, 3 }, { 9, 16384, 0 } };
	for (unsigned v = 0; v < 3; v++) {
		reset();
		struct ing_grpc_server *s = server(win, 2 * win, 1);
		struct wbuf w = { 0 };
		preface(&w);
		headers(&w, 1);
		g.off = 0;
		uint64_t sent = 0, sent_conn = 0, granted = win, granted_conn = 65535;
		uint64_t wu_stream = 0, wu_conn = 0;
		unsigned rounds = 0;
		while (g.off < g.b.len) {
			/* what the windows allow, in frames of up to 16 KiB with 2 bytes of padding */
			for (;;) {
				uint64_t room = granted - sent < granted_conn - sent_conn ?
					granted - sent : granted_conn - sent_conn;
				size_t n = g.b.len - g.off;
				if (room <= 3 || !n)
					break;
				if (n > 16384 - 3)
					n = 16384 - 3;
				if (n > room - 3)
					n = (size_t)room - 3;
				data(&w, 1, &g, n, 2, g.off + n == g.b.len);
				sent += n + 3;
				sent_conn += n + 3;
			}
			struct grpc_feed f = { .keep_open = true };
			struct seen sn;
			memset(&f, 0, sizeof(f));
			f.in = w.p;
			f.n = w.len;
			f.pieces = sizes[v];
			f.npieces = v ? 3 : 0;
			f.out = outbuf;
			f.out_cap = sizeof(outbuf);
			f.keep_open = true;
			assert_int_equal(grpc_server_feed(s, &f), 0);
			parse_out(outbuf, f.out_len, &sn);
			assert_false(f.server_closed);
			assert_int_equal(sn.goaway, -1);
			assert_int_equal(sn.rst[1], -1);
			wu_stream += sn.wu[1];
			wu_conn += sn.wu[0];
			granted = win + wu_stream;
			granted_conn = 65535 + wu_conn;
			w.len = 0;
			w.nmarks = 0;
			assert_true(++rounds < 1000);   /* each round grants something, or it hangs */
		}
		check_msgs(&T.calls[0], 1, 3, lens);
		assert_true(placed_total(&T.calls[0]) > 0);
		assert_int_equal(T.calls[0].close_status, ING_GRPC_OK);
		assert_true(wu_stream <= sent);
		assert_true(wu_stream + win / 2 >= sent);
		/* the connection: opened to 2*win at start (2*win - 65535), then given back */
		assert_true(wu_conn <= sent + 2 * win - 65535);
		assert_true(wu_conn + win >= sent + 2 * win - 65535);
		struct grpc_feed end = { 0 };
		assert_int_equal(grpc_server_feed(s, &end), 0);   /* closes it */
		ing_grpc_server_destroy(s);
		free(w.p);
	}
	free(g.b.p);

	/* a call that consumes nothing (paused): exactly the window, then one byte more */
	struct gstream h = { 0 };
	gmsg(&h, 3, win + 1000);
	for (int over = 0; over <= 1; over++) {
		struct wbuf x = { 0 };
		preface(&x);
		headers(&x, 1);
		h.off = 0;
		size_t left = win + (size_t)over;
		while (left) {
			size_t n = left < 16384 ? left : 16384;
			data(&x, 1, &h, n, -1, false);
			left -= n;
		}
		reset();
		T.pause_at_start = true;
		struct ing_grpc_server *s = server(win, 4 * win, 1);
		struct grpc_feed f;
		struct seen sn;
		feed(s, &x, NULL, 0, &f, &sn);
		assert_int_equal(f.placed, 0);
		assert_int_equal(sn.rst[1], over ? 3 /* FLOW_CONTROL_ERROR */ : -1);
		assert_int_equal(sn.goaway, -1);
		assert_int_equal(sn.wu[1], 0);
		assert_int_equal(T.calls[0].nmsgs, 0);
		assert_int_equal(T.calls[0].closes, 1);
		assert_int_equal(T.calls[0].close_status,
				 over ? ING_GRPC_CANCELLED : ING_GRPC_UNAVAILABLE);
		ing_grpc_server_destroy(s);
		free(x.p);
	}
	free(h.b.p);
}

static void ping(struct wbuf *w)
{
	frame_hd(w, 8, 6, 0, 0);
	put(w, "pingpong", 8);
}

/*
 * Read-ahead: runs of DATA frames of one stream and one length (as .NET sends them, 16 KiB
 * each) are read into place by one scatter read, the frame headers guessed. Where a guess
 * is wrong (a PING, a frame of another length, a padded one, another stream's, the end of
 * the stream) the rest of that read is copied back and takes the copy path: every byte
 * still lands right, and most are placed.
 */
static void test_place_read_ahead(void **state)
{
	(void)state;
	struct gstream a = { 0 }, b = { 0 };
	static const size_t la[] = { 300000, 5, 250000, 180001 }, lb[] = { 70000 };
	for (unsigned k = 0; k < 4; k++)
		gmsg(&a, 40 + k, la[k]);
	gmsg(&b, 50, lb[0]);
	struct wbuf w = { 0 };
	preface(&w);
	headers(&w, 1);
	size_t hdr_end = w.len;
	unsigned f = 0;
	while (a.off < a.b.len) {
		size_t n = a.b.len - a.off < 16384 ? a.b.len - a.off : 16384;
		int pad = -1;
		switch (f++ % 23) {
		case 7:
			ping(&w);
			break;
		case 11:
			n = n < 1000 ? n : 1000;   /* a frame of another length */
			break;
		case 13:
			pad = 3;
			n -= n > 4 ? 4 : 0;
			break;
		case 17:
			if (b.off == 0)
				headers(&w, 3);
			(void)data_next(&w, 3, &b, 16384);
			break;
		default:
			break;
		}
		data(&w, 1, &a, n, pad, a.off + n == a.b.len);
	}
	while (data_next(&w, 3, &b, 16384))
		;
	const size_t sizes[][3] = { { hdr_end, 0, 0 }, { hdr_end, 100000, 0 },
				    { hdr_end, 16393, 9 }, { hdr_end, 40000, 5000 } };
	for (unsigned v = 0; v < 4; v++) {
		reset();
		struct ing_grpc_server *s = server(16u << 20, 64u << 20, 0);
		struct grpc_feed fd;
		struct seen sn;
		feed(s, &w, sizes[v], 3, &fd, &sn);
		assert_int_equal(T.ncalls, 2);
		check_msgs(&T.calls[0], 40, 4, la);
		check_msgs(&T.calls[1], 50, 1, lb);
		assert_int_equal(T.calls[0].close_status, ING_GRPC_OK);
		assert_int_equal(T.calls[1].close_status, ING_GRPC_OK);
		assert_int_equal(sn.goaway, -1);
		struct ing_grpc_server_rx rx;
		ing_grpc_server_get_rx(s, &rx);
		assert_int_equal(rx.placed, fd.placed);
		assert_int_equal(rx.placed + rx.copied, w.len);
		/* most bytes placed, some guesses wrong (the PINGs, odd frames, stream 3) */
		assert_true(rx.placed > (la[0] + la[2] + la[3]) * 8 / 10);
		if (v != 2)
			assert_true(rx.spilled > 0);
		ing_grpc_server_destroy(s);
	}
	free(a.b.p);
	free(b.b.p);
	free(w.p);
}

/* The tracker: where a byte stream stands, any split. */
static void test_track(void **state)
{
	(void)state;
	struct wbuf w = { 0 };
	build_three(&w);
	/* walk it whole, and byte by byte: the same positions at the end of each frame */
	struct h2_track a, b;
	h2_track_init(&a);
	h2_track_init(&b);
	h2_track_advance(&a, w.p, w.len);
	for (size_t i = 0; i < w.len; i++)
		h2_track_advance(&b, w.p + i, 1);
	assert_int_equal(a.pos, H2P_HEAD);
	assert_int_equal(b.pos, H2P_HEAD);
	assert_int_equal(a.left, 9);
	/* inside the data of a padded frame */
	struct wbuf x = { 0 };
	struct gstream g = { 0 };
	gmsg(&g, 1, 100);
	preface(&x);
	data(&x, 1, &g, 50, 7, false);
	h2_track_init(&a);
	h2_track_advance(&a, x.p, 24 + 9 + 9 + 9 + 1 + 10);
	assert_int_equal(a.pos, H2P_DATA);
	assert_int_equal(a.sid, 1);
	assert_int_equal(a.left, 40);
	h2_track_advance(&a, x.p + 24 + 9 + 9 + 9 + 1 + 10, 40 + 3);
	assert_int_equal(a.pos, H2P_PADDING);
	assert_int_equal(a.left, 4);
	/* padding longer than the frame: lost */
	uint8_t bad[] = { 0, 0, 2, 0, 0x8, 0, 0, 0, 1, 5, 0 };
	h2_track_init(&a);
	h2_track_advance(&a, x.p, 24);
	h2_track_advance(&a, bad, sizeof(bad));
	assert_int_equal(a.pos, H2P_LOST);
	free(g.b.p);
	free(x.p);
	free(w.p);
}

static int setup(void **state)
{
	(void)state;
	ing_log_set_level(ING_LOG_ERR);
	T.loop = ing_loop_create();
	ing_timer_init(&T.resume, resume_cb, NULL);
	return T.loop ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	reset();
	ing_loop_destroy(T.loop);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_track),
		cmocka_unit_test(test_place_splits),
		cmocka_unit_test(test_place_declined),
		cmocka_unit_test(test_place_one_read_per_message),
		cmocka_unit_test(test_place_pause_resume),
		cmocka_unit_test(test_place_two_streams),
		cmocka_unit_test(test_place_read_ahead),
		cmocka_unit_test(test_place_reset_mid_payload),
		cmocka_unit_test(test_place_closed_mid_payload),
		cmocka_unit_test(test_place_flow_control),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
