/* SPDX-License-Identifier: Apache-2.0 */
/*
 * grpc_server.c - gRPC server over nghttp2 on the control thread's event loop.
 *
 * One nghttp2_session_server per TCP (or TLS) connection, non-blocking sockets registered
 * with the loop, no library threads. Reads go from one 256 KiB server-wide buffer into
 * nghttp2_session_mem_recv(); DATA payload pieces are deframed in place and handed to
 * the method (streaming hooks) or reassembled (whole messages, bounded by max_recv_msg).
 *
 * Placement (one copy): the connection follows the client's byte stream (struct h2_track)
 * over exactly the bytes it gives nghttp2, so before each read it knows whether the next
 * bytes are a DATA frame's data, of which stream, and how many. When that stream's method
 * can place (on_msg_sink: e.g. the data field of a FrameChunk, whose bytes go to a pool
 * slot), the read goes from the socket (or TLS, decrypted by SSL_read) straight into the
 * handler's memory, at most the run the frame and the message still hold; those bytes are
 * then given to nghttp2 from there, so it still parses, accounts and flow-controls every
 * byte, and its on_data_chunk_recv sees the very address that was read into: the call
 * reports them as placed (on_msg_placed) instead of copying them. Around such runs, reads
 * stay small (SRV_SMALL_READ past the known end of what cannot be placed), so frame
 * headers, gRPC prefixes and protobuf keys take the copy path without pulling the bulk
 * after them into the buffer; a placed run that ends the handler's field brings those
 * SRV_SMALL_READ bytes after it in the same readv (one read per message, not two).
 *
 * Flow control: NGHTTP2_OPT_NO_AUTO_WINDOW_UPDATE. Bytes are consumed (and thus window
 * given back to the client) only once the deframer has processed them, i.e. once the
 * handler has taken them. A paused call keeps what still arrives (bounded by the window
 * it granted) in its hold buffer without consuming it, so the client's window closes:
 * that is the backpressure for credits and a full slot pool.
 *
 * Re-entrancy and batching: API functions called by handlers (send/finish/resume) never
 * write to the socket themselves; they mark the connection dirty (conn_kick), and the
 * server's before_sleep hook (srv_flush) serves every dirty connection once per loop turn:
 * the held input of the calls resumed meanwhile first, then one write of everything queued
 * (Redis' beforesleep). So a call object is never freed under a handler that is still
 * running, the socket is written from the top of the loop only, and a burst of acks from
 * one turn leaves in one write. Connections are torn down only from loop callbacks.
 *
 * Call lifetime: a call whose on_start returned ING_GRPC_OK gets exactly one on_close
 * (OK or the finish status once the trailers are written; CANCELLED on client RST_STREAM;
 * DEADLINE_EXCEEDED when grpc-timeout expired; UNAVAILABLE on connection loss or server
 * destroy). A call rejected by on_start gets no on_close. While paused, nothing is
 * delivered (not even END_STREAM, which waits behind the held bytes).
 */
#include "control/net/grpc_server.h"
#include "control/net/grpc_internal.h"
#include "common/clock.h"
#include "common/log.h"
#include "health.pb-c.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <nghttp2/nghttp2.h>
#include <poll.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#define SRV_RBUF (256u * 1024)      /* one read(2) */
#define SRV_BYTES_PER_EVENT (2u * 1024 * 1024)  /* fairness between connections */
#define SRV_READS_PER_EVENT 64
#define SRV_SMALL_READ 512u         /* read past the last byte known not to be placed */
#define SRV_PLACE_MAX (1024u * 1024) /* one placed read */
#define SRV_PLACE_MIN (4u * 1024)   /* default place_min */
#define SRV_SPEC_MAX 64             /* frames read ahead into place by one readv */
#define SRV_LOWAT_MAX (256u * 1024) /* SO_RCVLOWAT while a frame's data is due (conn_lowat) */
#define SRV_WRITES_PER_FLUSH 64
#define SRV_MAX_HDRS 64
#define SRV_MAX_HDR_BYTES (16u * 1024)
#define SRV_MSG_MAX 1024            /* grpc-message after percent-encoding */
#define HEALTH_CHECK_PATH "/grpc.health.v1.Health/Check"

struct hdr {
	char *name;
	char *value;
};

struct conn;

struct ing_grpc_call {
	struct conn *conn;
	struct ing_grpc_call *prev, *next;
	const struct ing_grpc_method *m;   /* NULL until dispatched / when rejected */
	int32_t sid;
	uint64_t id;
	void *user;

	/* request headers */
	struct hdr hdrs[SRV_MAX_HDRS];
	unsigned nhdrs;
	size_t hdr_bytes;
	char *path;
	char http_method[8];
	bool ct_ok, ct_seen, hdr_overflow, has_timeout;
	uint64_t timeout_ns;

	/* state */
	bool started;        /* on_start accepted: on_close is owed */
	bool closed;         /* on_close delivered (or being delivered) */
	bool resp_sent;      /* response HEADERS submitted (with a data provider) */
	bool finish_called;
	bool trailers_sent;  /* END_STREAM frame written */
	bool remote_closed;  /* client END_STREAM received */
	bool half_close_pending;
	bool paused, feeding, discard;
	bool sink;           /* started, and its method places (counted in conn->nsink) */
	bool data_deferred;
	bool want_writable, writable_due;
	bool resume_due;     /* resumed: its held input is delivered at the next flush */
	bool deadline_hit;
	bool rst_after;
	uint32_t rst_code;
	int status;
	char *status_msg;

	/* inbound */
	struct grpc_deframer df;
	uint8_t *msg;        /* reassembly (methods without streaming hooks) */
	size_t msg_cap, msg_len;
	uint8_t *held;       /* received while paused, not consumed */
	size_t held_off, held_len, held_cap;

	/* outbound: framed messages not yet handed to nghttp2 */
	uint8_t *out;
	size_t out_off, out_len, out_cap;

	struct ing_timer deadline;
};

struct conn {
	struct ing_grpc_server *srv;
	struct conn *prev, *next;
	int fd;
	SSL *ssl;
	bool handshake_done;
	bool epout;
	bool dying;
	bool writable_due;
	bool out_now;             /* a handler queued a message during this read burst */
	nghttp2_session *h2;
	const uint8_t *pend;      /* mem_send output not yet written */
	size_t pend_len;
	struct ing_grpc_call *calls;
	bool dirty;               /* served by the next srv_flush (conn_kick) */
	/* placement: where the client's stream stands; the address nghttp2 is being fed a
	 * placed run from (its on_data_chunk_recv pointer names it); calls that can place */
	struct h2_track tr;
	int lowat;                /* SO_RCVLOWAT set (0: the kernel's 1) */
	const uint8_t *place;
	unsigned nsink;
	/* in-memory connection (grpc_server_feed): input not read yet, read sizes, output */
	struct grpc_feed *mem;
	char peer[64];
	/* fair sharing (see ing_grpc_server_opts) */
	uint64_t id;
	unsigned nstreams;        /* calls (streams) open on it */
	bool preface_done;        /* client SETTINGS received (and TLS handshake done) */
	bool linger;              /* closing because the HTTP/2 session is done: FIN, then wait
				   * for the client's close before close() (linger_start) */
	bool health_only;         /* accepted in the health reserve: Health/Check only */
	uint64_t t_idle_ns;       /* when it last became idle (accepted, or last stream ended) */
	struct ing_timer limit;   /* handshake deadline, then idle deadline */
	char peer_ip[INET6_ADDRSTRLEN];
	char identity[256];       /* verified client certificate's subject, "" without mTLS */
};

struct ing_grpc_server {
	struct ing_loop *loop;
	struct ing_grpc_server_opts o;
	struct ing_grpc_method *methods;   /* user's + built-ins */
	unsigned nmethods;
	int lfd;
	int port;
	bool shutting_down;
	bool serving;
	unsigned nconns, ncalls;
	unsigned nhealth;         /* connections in the health reserve */
	struct ing_grpc_server_limits lim; /* what the fair-sharing limits did (counters) */
	struct {                           /* receive path counters */
		uint64_t bytes, placed, spilled, reads;
	} rx;
	uint8_t spec_hdr[SRV_SPEC_MAX][9]; /* frame headers read ahead (read_plan) */
	uint64_t next_conn_id;
	struct conn *conns;
	struct lconn *lingers;   /* connections half-closed, waiting for the client's close */
	SSL_CTX *ssl_ctx;
	nghttp2_session_callbacks *cbs;
	nghttp2_option *h2opt;
	uint8_t *rbuf;
	char *listen_str;
	struct ing_loop_hook flush;   /* before_sleep: srv_flush */
	unsigned ndirty;              /* connections marked dirty */
};

static uint64_t next_call_id = 1;   /* atomic: unique per process (several servers) */

static void conn_kick(struct conn *cn);
static void conn_close(struct conn *cn, const char *why);
static void conn_idle_begin(struct conn *cn);
static int call_finish(struct ing_grpc_call *c, int status, const char *message, uint32_t rst);

/* ================================================================ options */

void ing_grpc_server_opts_init(struct ing_grpc_server_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->listen = "127.0.0.1:50051";
	o->max_recv_msg = 4u * 1024 * 1024 + 64 * 1024;
	o->max_send_buffer = 8u * 1024 * 1024;
	o->window_bytes = 16u * 1024 * 1024;
	o->conn_window_bytes = 64u * 1024 * 1024;
	o->max_frame_size = 1u * 1024 * 1024;
	o->max_concurrent_streams = 256;
	o->max_connections = 256;
	o->handshake_timeout_ms = 5000;
	o->idle_timeout_ms = 60000;
	o->max_conns_per_peer = 32;
	o->health_reserve = 8;
	o->place_min = SRV_PLACE_MIN;
}

/* ================================================================ call helpers */

static void consume(struct ing_grpc_call *c, size_t n)
{
	if (n)
		(void)nghttp2_session_consume(c->conn->h2, c->sid, n);
}

/* Forget what a paused call held, giving its window back (only the connection's when
 * the stream is closing: no WINDOW_UPDATE for a dead stream). */
static void drop_held(struct ing_grpc_call *c, bool stream_alive)
{
	size_t rem = c->held_len - c->held_off;
	if (rem && stream_alive)
		(void)nghttp2_session_consume(c->conn->h2, c->sid, rem);
	else if (rem)
		(void)nghttp2_session_consume_connection(c->conn->h2, rem);
	c->held_off = c->held_len = 0;
}

static int held_append(struct ing_grpc_call *c, const uint8_t *p, size_t n)
{
	struct ing_grpc_server *s = c->conn->srv;
	if (c->held_off) {
		memmove(c->held, c->held + c->held_off, c->held_len - c->held_off);
		c->held_len -= c->held_off;
		c->held_off = 0;
	}
	/* The client cannot send more than the window we granted; this is a sanity bound. */
	size_t limit = (size_t)s->o.window_bytes + s->o.max_frame_size + 65536;
	if (c->held_len + n > limit)
		return -ENOBUFS;
	if (c->held_len + n > c->held_cap) {
		size_t cap = c->held_cap ? c->held_cap : 65536;
		while (cap < c->held_len + n)
			cap *= 2;
		uint8_t *nb = realloc(c->held, cap);
		if (!nb)
			return -ENOMEM;
		c->held = nb;
		c->held_cap = cap;
	}
	memcpy(c->held + c->held_len, p, n);
	c->held_len += n;
	return 0;
}

static bool streaming(const struct ing_grpc_method *m)
{
	return m->on_msg_data != NULL;
}

/* Handler failed or the message is unacceptable: finish, and ignore the rest. */
static void call_fail(struct ing_grpc_call *c, int status, const char *msg)
{
	if (status == ING_GRPC_OK)
		status = ING_GRPC_UNKNOWN;
	call_finish(c, status, msg, NGHTTP2_NO_ERROR);
	c->discard = true;
}

/*
 * Reassembly buffer for methods without streaming hooks. It grows with the bytes that
 * actually arrived (never to a length the prefix merely claims), so memory follows the
 * flow-control windows, not what a client announces.
 */
static int msg_reserve(struct ing_grpc_call *c, size_t need)
{
	if (need <= c->msg_cap)
		return 0;
	size_t cap = c->msg_cap ? c->msg_cap : 4096;
	while (cap < need)
		cap *= 2;
	if (cap > c->df.len)
		cap = c->df.len;
	uint8_t *nb = realloc(c->msg, cap);
	if (!nb)
		return -ENOMEM;
	c->msg = nb;
	c->msg_cap = cap;
	return 0;
}

/*
 * Run the deframer over p/n and hand messages to the method until the input is used up,
 * the call pauses, or it fails. Returns the bytes processed (to be consumed).
 */
static size_t call_feed(struct ing_grpc_call *c, const uint8_t *p, size_t n)
{
	const struct ing_grpc_method *m = c->m;
	size_t max = c->conn->srv->o.max_recv_msg;
	const uint8_t *q = p;
	size_t left = n;

	while (!c->paused && !c->discard) {
		const uint8_t *d = NULL;
		size_t dl = 0;
		int rc = 0;
		enum grpc_wire_ev ev = grpc_deframe_next(&c->df, &q, &left, &d, &dl);
		if (ev == GRPC_WIRE_NEED)
			break;
		switch (ev) {
		case GRPC_WIRE_BEGIN:
			if (c->df.flags & GRPC_FLAG_COMPRESSED) {
				call_fail(c, ING_GRPC_UNIMPLEMENTED,
					  "compressed messages not supported");
				break;
			}
			if (c->df.len > max) {
				char b[128];
				snprintf(b, sizeof(b), "received message larger than max (%u vs. %zu)",
					 c->df.len, max);
				call_fail(c, ING_GRPC_RESOURCE_EXHAUSTED, b);
				break;
			}
			if (streaming(m)) {
				if (m->on_msg_begin)
					rc = m->on_msg_begin(c, c->df.len);
			} else {
				c->msg_len = 0;
			}
			break;
		case GRPC_WIRE_DATA:
			if (streaming(m)) {
				rc = m->on_msg_data(c, d, dl);
			} else {
				if (msg_reserve(c, c->msg_len + dl) < 0) {
					call_fail(c, ING_GRPC_RESOURCE_EXHAUSTED, "out of memory");
					break;
				}
				memcpy(c->msg + c->msg_len, d, dl);
				c->msg_len += dl;
			}
			break;
		case GRPC_WIRE_END:
			if (streaming(m)) {
				if (m->on_msg_end)
					rc = m->on_msg_end(c);
			} else if (m->on_message) {
				const uint8_t *msg = c->msg ? c->msg : (const uint8_t *)"";
				rc = m->on_message(c, msg, c->msg_len);
			}
			break;
		default:
			break;
		}
		if (rc)
			call_fail(c, rc, NULL);
		if (c->finish_called)
			c->discard = true;
	}
	return n - left;
}

static void deliver_half_close(struct ing_grpc_call *c)
{
	c->half_close_pending = false;
	if (!c->started || c->discard || c->finish_called)
		return;
	if (!grpc_deframer_idle(&c->df)) {
		call_fail(c, ING_GRPC_INTERNAL, "stream ended inside a message");
		return;
	}
	if (c->m->on_half_close)
		c->m->on_half_close(c);
}

/* Inbound DATA payload for a call (from nghttp2's on_data_chunk_recv). */
static void call_input(struct ing_grpc_call *c, const uint8_t *p, size_t n)
{
	if (!c->started || c->discard) {
		consume(c, n);
		return;
	}
	if (c->paused || c->held_len > c->held_off) {
		if (held_append(c, p, n) < 0) {
			consume(c, n);
			call_fail(c, ING_GRPC_RESOURCE_EXHAUSTED, "receive buffer full");
		}
		return;
	}
	c->feeding = true;
	size_t used = call_feed(c, p, n);
	c->feeding = false;
	if (c->discard) {
		consume(c, n);
		return;
	}
	consume(c, used);
	if (used < n && held_append(c, p + used, n - used) < 0) {
		consume(c, n - used);
		call_fail(c, ING_GRPC_RESOURCE_EXHAUSTED, "receive buffer full");
	}
}

/*
 * Where the next DATA bytes of call c may be read to (read_plan): the handler's buffer,
 * with *n the run it takes; or NULL with *n the bytes ahead that take the copy path
 * (SIZE_MAX: all of them; 0: unknown, e.g. a gRPC prefix comes first).
 */
static uint8_t *call_sink(struct ing_grpc_call *c, size_t *n)
{
	*n = SIZE_MAX;
	if (!c->sink || c->discard || c->paused || c->remote_closed || c->held_len > c->held_off)
		return NULL;
	size_t left = grpc_deframer_payload_left(&c->df);
	*n = 0;
	if (!left)
		return NULL;   /* a gRPC prefix, or the message's END, comes first */
	size_t k = 0;
	uint8_t *p = c->m->on_msg_sink(c, &k);
	*n = k < left ? k : left;
	return p;
}

/*
 * n bytes of the current message were read straight to where the handler's sink said
 * (nghttp2 has just accounted them as DATA of this stream): the deframer and the handler
 * advance over them without a copy. Nothing ran between the sink and the read, so the
 * call is still as the sink saw it; the check guards that invariant.
 */
static void call_placed(struct ing_grpc_call *c, size_t n)
{
	static const uint8_t none;
	if (c->discard || !c->sink) {
		consume(c, n);
		return;
	}
	if (c->paused || c->held_len > c->held_off || grpc_deframer_payload_left(&c->df) < n) {
		consume(c, n);
		call_fail(c, ING_GRPC_INTERNAL, "placed bytes out of step with the call");
		return;
	}
	c->feeding = true;
	grpc_deframer_skip(&c->df, (uint32_t)n);
	int rc = c->m->on_msg_placed(c, n);
	if (rc)
		call_fail(c, rc, NULL);
	if (c->finish_called)
		c->discard = true;
	if (!c->discard)
		(void)call_feed(c, &none, 0);   /* the message's END when it is complete */
	c->feeding = false;
	consume(c, n);
}

/* Deliver what was held while paused, until paused again. */
static void call_drain_held(struct ing_grpc_call *c)
{
	if (c->feeding)
		return;   /* resume from inside our own delivery: the outer loop continues */
	c->feeding = true;
	while (c->held_len > c->held_off && !c->paused && !c->discard) {
		size_t used = call_feed(c, c->held + c->held_off, c->held_len - c->held_off);
		c->held_off += used;
		consume(c, used);
		if (!used)
			break;
	}
	c->feeding = false;
	if (c->discard) {
		size_t rem = c->held_len - c->held_off;
		consume(c, rem);
		c->held_off = c->held_len = 0;
	}
	if (c->held_off == c->held_len) {
		c->held_off = c->held_len = 0;
		if (!c->paused && !c->discard && c->df.in_msg && !grpc_deframer_payload_left(&c->df)) {
			static const uint8_t none;
			c->feeding = true;   /* the END of a message placed whole before a pause */
			(void)call_feed(c, &none, 0);
			c->feeding = false;
		}
		if (c->half_close_pending && !c->paused)
			deliver_half_close(c);
	}
}

/* ================================================================ responses */

#define NV(n, v) { (uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, strlen(v), NGHTTP2_NV_FLAG_NONE }

static ssize_t data_read_cb(nghttp2_session *h2, int32_t sid, uint8_t *buf, size_t length,
			    uint32_t *flags, nghttp2_data_source *src, void *user)
{
	struct ing_grpc_call *c = src->ptr;
	struct conn *cn = user;
	(void)sid;
	size_t avail = c->out_len - c->out_off;
	if (avail) {
		size_t n = avail < length ? avail : length;
		memcpy(buf, c->out + c->out_off, n);
		c->out_off += n;
		if (c->out_off == c->out_len)
			c->out_off = c->out_len = 0;
		if (c->want_writable &&
		    c->out_len - c->out_off <= cn->srv->o.max_send_buffer / 4) {
			c->want_writable = false;
			c->writable_due = true;
			cn->writable_due = true;
		}
		return (ssize_t)n;
	}
	if (c->finish_called) {
		char st[16];
		snprintf(st, sizeof(st), "%d", c->status);
		nghttp2_nv nv[2] = { NV("grpc-status", st) };
		size_t nn = 1;
		if (c->status_msg && *c->status_msg)
			nv[nn++] = (nghttp2_nv)NV("grpc-message", c->status_msg);
		if (nghttp2_submit_trailer(h2, c->sid, nv, nn) == 0) {
			*flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
			return 0;
		}
		*flags |= NGHTTP2_DATA_FLAG_EOF;   /* cannot happen; at least end the stream */
		return 0;
	}
	c->data_deferred = true;
	return NGHTTP2_ERR_DEFERRED;
}

/*
 * Every response names the message encodings the node accepts (only identity): the gRPC
 * compression spec asks for grpc-accept-encoding with the UNIMPLEMENTED answer to a
 * compressed message, and sending it always lets a client pick right from the start.
 */
#define ACCEPT_ENCODING NV("grpc-accept-encoding", "identity")

static int submit_headers_with_data(struct ing_grpc_call *c)
{
	nghttp2_nv nv[] = { NV(":status", "200"), NV("content-type", "application/grpc"),
			    ACCEPT_ENCODING };
	nghttp2_data_provider prd = { .source.ptr = c, .read_callback = data_read_cb };
	int rv = nghttp2_submit_response(c->conn->h2, c->sid, nv, 3, &prd);
	if (rv)
		return -EIO;
	c->resp_sent = true;
	return 0;
}

/* Trailers-only (or a plain HTTP error): one HEADERS frame with END_STREAM. */
static int submit_trailers_only(struct ing_grpc_call *c, const char *http_status)
{
	char st[16];
	snprintf(st, sizeof(st), "%d", c->status);
	nghttp2_nv nv[5] = { NV(":status", http_status), NV("content-type", "application/grpc"),
			     ACCEPT_ENCODING, NV("grpc-status", st) };
	size_t nn = 4;
	if (c->status_msg && *c->status_msg)
		nv[nn++] = (nghttp2_nv)NV("grpc-message", c->status_msg);
	c->resp_sent = true;
	return nghttp2_submit_response(c->conn->h2, c->sid, nv, nn, NULL) ? -EIO : 0;
}

static int finish_common(struct ing_grpc_call *c, int status, const char *message, uint32_t rst)
{
	if (c->finish_called)
		return 0;
	c->finish_called = true;
	c->discard = true;
	c->status = status;
	if (message && *message) {
		c->status_msg = malloc(SRV_MSG_MAX);
		if (c->status_msg)
			grpc_pct_encode(message, c->status_msg, SRV_MSG_MAX);
	}
	drop_held(c, true);
	if (!c->remote_closed) {
		c->rst_after = true;
		c->rst_code = rst;
	}
	ing_timer_cancel(c->conn->srv->loop, &c->deadline);
	return 0;
}

static int call_finish(struct ing_grpc_call *c, int status, const char *message, uint32_t rst)
{
	if (c->finish_called)
		return 0;
	finish_common(c, status, message, rst);
	int rv = 0;
	if (!c->resp_sent)
		rv = submit_trailers_only(c, "200");
	else if (c->data_deferred) {
		c->data_deferred = false;
		rv = nghttp2_session_resume_data(c->conn->h2, c->sid) ? -EIO : 0;
	}
	conn_kick(c->conn);
	return rv;
}

/* Non-gRPC requests: an HTTP error status, still with grpc-status for gRPC-aware peers. */
static void respond_http(struct ing_grpc_call *c, const char *http, int status, const char *msg)
{
	finish_common(c, status, msg, NGHTTP2_NO_ERROR);
	submit_trailers_only(c, http);
	conn_kick(c->conn);
}

/* ================================================================ public call API */

int ing_grpc_call_send(struct ing_grpc_call *c, const uint8_t *msg, size_t len)
{
	if (!c || c->closed || c->finish_called || c->conn->dying)
		return -EPIPE;
	if (len > UINT32_MAX)
		return -EMSGSIZE;
	size_t buffered = c->out_len - c->out_off;
	size_t need = GRPC_PREFIX_LEN + len;
	if (buffered && buffered + need > c->conn->srv->o.max_send_buffer) {
		c->want_writable = true;
		return -ENOBUFS;
	}
	if (c->out_off && c->out_len + need > c->out_cap) {
		memmove(c->out, c->out + c->out_off, buffered);
		c->out_len = buffered;
		c->out_off = 0;
	}
	if (c->out_len + need > c->out_cap) {
		size_t cap = c->out_cap ? c->out_cap : 4096;
		while (cap < c->out_len + need)
			cap *= 2;
		uint8_t *nb = realloc(c->out, cap);
		if (!nb)
			return -ENOMEM;
		c->out = nb;
		c->out_cap = cap;
	}
	grpc_put_prefix(c->out + c->out_len, 0, (uint32_t)len);
	if (len)
		memcpy(c->out + c->out_len + GRPC_PREFIX_LEN, msg, len);
	c->out_len += need;
	if (!c->resp_sent) {
		if (submit_headers_with_data(c) < 0)
			return -EIO;
	} else if (c->data_deferred) {
		c->data_deferred = false;
		(void)nghttp2_session_resume_data(c->conn->h2, c->sid);
	}
	c->conn->out_now = true;
	conn_kick(c->conn);
	return 0;
}

int ing_grpc_call_finish(struct ing_grpc_call *c, int status, const char *message)
{
	if (!c || c->closed || c->conn->dying)
		return -EPIPE;
	return call_finish(c, status, message, NGHTTP2_NO_ERROR);
}

void ing_grpc_call_pause(struct ing_grpc_call *c)
{
	if (c)
		c->paused = true;
}

void ing_grpc_call_resume(struct ing_grpc_call *c)
{
	if (!c || !c->paused || c->closed || c->conn->dying)
		return;
	c->paused = false;
	c->resume_due = true;   /* held input and WINDOW_UPDATEs: at the next flush */
	conn_kick(c->conn);
}

const char *ing_grpc_call_header(const struct ing_grpc_call *c, const char *name)
{
	for (unsigned i = 0; c && i < c->nhdrs; i++)
		if (strcmp(c->hdrs[i].name, name) == 0)
			return c->hdrs[i].value;
	return NULL;
}

void ing_grpc_call_set_user(struct ing_grpc_call *c, void *user)
{
	c->user = user;
}

void *ing_grpc_call_user(const struct ing_grpc_call *c)
{
	return c->user;
}

const char *ing_grpc_call_peer(const struct ing_grpc_call *c)
{
	return c->conn->peer;
}

const char *ing_grpc_call_peer_addr(const struct ing_grpc_call *c)
{
	return c->conn->peer_ip;
}

const char *ing_grpc_call_identity(const struct ing_grpc_call *c)
{
	return c->conn->identity[0] ? c->conn->identity : NULL;
}

uint64_t ing_grpc_call_conn_id(const struct ing_grpc_call *c)
{
	return c->conn->id;
}

uint64_t ing_grpc_call_id(const struct ing_grpc_call *c)
{
	return c->id;
}

size_t ing_grpc_call_send_buffered(const struct ing_grpc_call *c)
{
	return c->out_len - c->out_off;
}

/* ================================================================ health */

static int health_on_message(struct ing_grpc_call *c, const uint8_t *msg, size_t len)
{
	struct ing_grpc_server *s = c->conn->srv;
	Grpc__Health__V1__HealthCheckRequest *req =
		grpc__health__v1__health_check_request__unpack(NULL, len, msg);
	if (!req)
		return ING_GRPC_INVALID_ARGUMENT;
	bool known = !req->service || !*req->service || strcmp(req->service, "h3000.RDMASvc") == 0;
	grpc__health__v1__health_check_request__free_unpacked(req, NULL);
	if (!known) {
		call_finish(c, ING_GRPC_NOT_FOUND, "unknown service", NGHTTP2_NO_ERROR);
		return 0;
	}
	Grpc__Health__V1__HealthCheckResponse resp = GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__INIT;
	resp.status = s->serving ? GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING
				 : GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__NOT_SERVING;
	uint8_t buf[16];
	size_t n = grpc__health__v1__health_check_response__pack(&resp, buf);
	int rc = ing_grpc_call_send(c, buf, n);
	if (rc < 0)
		return ING_GRPC_INTERNAL;
	call_finish(c, ING_GRPC_OK, NULL, NGHTTP2_NO_ERROR);
	return 0;
}

static void health_on_close(struct ing_grpc_call *c, int status)
{
	(void)c;
	(void)status;
}

void ing_grpc_server_set_serving(struct ing_grpc_server *s, bool serving)
{
	s->serving = serving;
}

void ing_grpc_server_get_rx(const struct ing_grpc_server *s, struct ing_grpc_server_rx *rx)
{
	memset(rx, 0, sizeof(*rx));
	if (!s)
		return;
	rx->placed = s->rx.placed;
	rx->copied = s->rx.bytes - s->rx.placed;
	rx->spilled = s->rx.spilled;
	rx->reads = s->rx.reads;
}

void ing_grpc_server_get_limits(const struct ing_grpc_server *s, struct ing_grpc_server_limits *l)
{
	if (s)
		*l = s->lim;
	else
		memset(l, 0, sizeof(*l));
}

unsigned ing_grpc_server_ncalls(const struct ing_grpc_server *s)
{
	return s->ncalls;
}

unsigned ing_grpc_server_nconns(const struct ing_grpc_server *s)
{
	return s ? s->nconns : 0;
}

bool ing_grpc_server_flushed(const struct ing_grpc_server *s)
{
	if (s->ndirty)
		return false;   /* queued output not handed to nghttp2 yet */
	for (const struct conn *cn = s->conns; cn; cn = cn->next)
		if (cn->pend_len || (cn->h2 && nghttp2_session_want_write(cn->h2)))
			return false;
	return true;
}

/* ================================================================ nghttp2 callbacks */

static void deadline_cb(void *arg)
{
	struct ing_grpc_call *c = arg;
	c->deadline_hit = true;
	if (!c->finish_called) {
		/* Trailers, then RST_STREAM(CANCEL) if the client is still sending. */
		call_finish(c, ING_GRPC_DEADLINE_EXCEEDED, "Deadline Exceeded", NGHTTP2_CANCEL);
	} else if (!c->trailers_sent) {
		(void)nghttp2_submit_rst_stream(c->conn->h2, NGHTTP2_FLAG_NONE, c->sid,
						NGHTTP2_CANCEL);
		conn_kick(c->conn);
	}
}

static struct ing_grpc_call *call_new(struct conn *cn, int32_t sid)
{
	struct ing_grpc_call *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->conn = cn;
	c->sid = sid;
	c->id = __atomic_fetch_add(&next_call_id, 1, __ATOMIC_RELAXED);
	grpc_deframer_init(&c->df);
	ing_timer_init(&c->deadline, deadline_cb, c);
	if (cn->nstreams++ == 0 && cn->preface_done && !cn->health_only)
		ing_timer_cancel(cn->srv->loop, &cn->limit);   /* busy: no idle deadline */
	c->next = cn->calls;
	if (cn->calls)
		cn->calls->prev = c;
	cn->calls = c;
	return c;
}

/* Unlink, tell the handler (once), free. status is what on_close reports. */
static void call_release(struct ing_grpc_call *c, int status)
{
	struct conn *cn = c->conn;
	ing_timer_cancel(cn->srv->loop, &c->deadline);
	if (c->prev)
		c->prev->next = c->next;
	else
		cn->calls = c->next;
	if (c->next)
		c->next->prev = c->prev;
	if (--cn->nstreams == 0 && !cn->dying)
		conn_idle_begin(cn);
	if (c->sink) {
		c->sink = false;
		cn->nsink--;
	}
	if (c->started && !c->closed) {
		c->closed = true;
		cn->srv->ncalls--;
		if (c->m->on_close)
			c->m->on_close(c, status);
	}
	for (unsigned i = 0; i < c->nhdrs; i++) {
		free(c->hdrs[i].name);
		free(c->hdrs[i].value);
	}
	free(c->path);
	free(c->status_msg);
	free(c->msg);
	free(c->held);
	free(c->out);
	free(c);
}

static int on_begin_headers(nghttp2_session *h2, const nghttp2_frame *f, void *user)
{
	struct conn *cn = user;
	if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST)
		return 0;
	struct ing_grpc_call *c = call_new(cn, f->hd.stream_id);
	if (!c)
		return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;   /* RST_STREAM(INTERNAL_ERROR) */
	nghttp2_session_set_stream_user_data(h2, f->hd.stream_id, c);
	return 0;
}

static bool ct_is_grpc(const uint8_t *v, size_t n)
{
	static const char pfx[] = "application/grpc";
	size_t pl = sizeof(pfx) - 1;
	if (n < pl || memcmp(v, pfx, pl) != 0)
		return false;
	return n == pl || v[pl] == '+' || v[pl] == ';';
}

static int on_header(nghttp2_session *h2, const nghttp2_frame *f, const uint8_t *name,
		     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
		     void *user)
{
	(void)flags;
	(void)user;
	if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST)
		return 0;   /* client trailers carry nothing we use */
	struct ing_grpc_call *c = nghttp2_session_get_stream_user_data(h2, f->hd.stream_id);
	if (!c)
		return 0;
	if (namelen && name[0] == ':') {
		if (namelen == 7 && memcmp(name, ":method", 7) == 0) {
			size_t k = valuelen < sizeof(c->http_method) - 1 ? valuelen
									 : sizeof(c->http_method) - 1;
			memcpy(c->http_method, value, k);
			c->http_method[k] = '\0';
		} else if (namelen == 5 && memcmp(name, ":path", 5) == 0 && !c->path) {
			c->path = strndup((const char *)value, valuelen);
			if (!c->path)
				return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
		}
		return 0;
	}
	if (namelen == 12 && memcmp(name, "content-type", 12) == 0) {
		c->ct_seen = true;
		c->ct_ok = ct_is_grpc(value, valuelen);
	} else if (namelen == 12 && memcmp(name, "grpc-timeout", 12) == 0) {
		c->has_timeout = grpc_timeout_parse((const char *)value, valuelen, &c->timeout_ns) == 0;
	}
	if (c->nhdrs == SRV_MAX_HDRS || c->hdr_bytes + namelen + valuelen > SRV_MAX_HDR_BYTES) {
		c->hdr_overflow = true;
		return 0;
	}
	char *n = strndup((const char *)name, namelen);
	char *v = strndup((const char *)value, valuelen);
	if (!n || !v) {
		free(n);
		free(v);
		return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
	}
	c->hdrs[c->nhdrs].name = n;
	c->hdrs[c->nhdrs].value = v;
	c->nhdrs++;
	c->hdr_bytes += namelen + valuelen;
	return 0;
}

static const struct ing_grpc_method *find_method(struct ing_grpc_server *s, const char *path)
{
	for (unsigned i = 0; path && i < s->nmethods; i++)
		if (strcmp(s->methods[i].path, path) == 0)
			return &s->methods[i];
	return NULL;
}

/* Request headers complete: validate and hand to the method. */
static void call_dispatch(struct ing_grpc_call *c)
{
	struct ing_grpc_server *s = c->conn->srv;
	if (strcmp(c->http_method, "POST") != 0) {
		respond_http(c, "405", ING_GRPC_INTERNAL, "only POST is supported");
		return;
	}
	if (!c->ct_ok) {
		respond_http(c, "415", ING_GRPC_INTERNAL, "invalid gRPC request content-type");
		return;
	}
	if (c->hdr_overflow) {
		call_finish(c, ING_GRPC_RESOURCE_EXHAUSTED, "too much metadata", NGHTTP2_NO_ERROR);
		return;
	}
	const struct ing_grpc_method *m = find_method(s, c->path);
	if (!m) {
		char b[256];
		snprintf(b, sizeof(b), "Method not found: %s", c->path ? c->path : "");
		call_finish(c, ING_GRPC_UNIMPLEMENTED, b, NGHTTP2_NO_ERROR);
		return;
	}
	if (c->conn->health_only && strcmp(m->path, HEALTH_CHECK_PATH) != 0) {
		call_finish(c, ING_GRPC_UNAVAILABLE,
			    "connection limit reached: this connection may carry only grpc.health.v1 Health/Check",
			    NGHTTP2_NO_ERROR);
		return;
	}
	c->m = m;
	if (c->has_timeout) {
		uint64_t now = ing_now_ns();
		uint64_t dl = c->timeout_ns > UINT64_MAX - now ? UINT64_MAX : now + c->timeout_ns;
		ing_timer_arm(s->loop, &c->deadline, dl);
	}
	int rc = m->on_start ? m->on_start(c, m->ctx) : ING_GRPC_OK;
	if (rc != ING_GRPC_OK) {
		if (!c->finish_called)
			call_finish(c, rc, NULL, NGHTTP2_NO_ERROR);
		return;
	}
	c->started = true;
	s->ncalls++;
	if (m->on_msg_sink && m->on_msg_placed && m->on_msg_data) {
		c->sink = true;
		c->conn->nsink++;
	}
}

static void remote_half_close(struct ing_grpc_call *c)
{
	c->remote_closed = true;
	c->rst_after = false;   /* nothing left to reset once both sides ended */
	if (c->held_len > c->held_off || c->paused)
		c->half_close_pending = true;
	else
		deliver_half_close(c);
}

static int on_frame_recv(nghttp2_session *h2, const nghttp2_frame *f, void *user)
{
	struct conn *cn = user;
	if (f->hd.type == NGHTTP2_SETTINGS && !(f->hd.flags & NGHTTP2_FLAG_ACK) &&
	    !cn->preface_done) {
		/* the client's preface and SETTINGS are in: the handshake deadline is met */
		cn->preface_done = true;
		if (cn->health_only)
			return 0;   /* its one deadline, set at accept, stays */
		ing_timer_cancel(cn->srv->loop, &cn->limit);
		if (cn->nstreams == 0)
			conn_idle_begin(cn);
		return 0;
	}
	if (f->hd.type != NGHTTP2_HEADERS && f->hd.type != NGHTTP2_DATA)
		return 0;
	struct ing_grpc_call *c = nghttp2_session_get_stream_user_data(h2, f->hd.stream_id);
	if (!c)
		return 0;
	if (f->hd.type == NGHTTP2_HEADERS && f->headers.cat == NGHTTP2_HCAT_REQUEST)
		call_dispatch(c);
	if (f->hd.flags & NGHTTP2_FLAG_END_STREAM)
		remote_half_close(c);
	return 0;
}

static int on_data_chunk(nghttp2_session *h2, uint8_t flags, int32_t sid, const uint8_t *data,
			 size_t len, void *user)
{
	(void)flags;
	struct conn *cn = user;
	bool placed = cn->place && data == cn->place;
	if (placed) {
		cn->place += len;   /* (nghttp2 hands a run over in one piece; follow it anyway) */
		cn->srv->rx.placed += len;
		if (cn->mem)
			cn->mem->placed += len;
	}
	struct ing_grpc_call *c = nghttp2_session_get_stream_user_data(h2, sid);
	if (!c) {
		(void)nghttp2_session_consume(h2, sid, len);
		return 0;
	}
	if (placed)
		call_placed(c, len);
	else
		call_input(c, data, len);
	return 0;
}

static int on_frame_send(nghttp2_session *h2, const nghttp2_frame *f, void *user)
{
	(void)user;
	if ((f->hd.type != NGHTTP2_HEADERS && f->hd.type != NGHTTP2_DATA) ||
	    !(f->hd.flags & NGHTTP2_FLAG_END_STREAM))
		return 0;
	struct ing_grpc_call *c = nghttp2_session_get_stream_user_data(h2, f->hd.stream_id);
	if (!c)
		return 0;
	c->trailers_sent = true;
	if (c->rst_after)
		(void)nghttp2_submit_rst_stream(h2, NGHTTP2_FLAG_NONE, c->sid, c->rst_code);
	return 0;
}

static int on_stream_close(nghttp2_session *h2, int32_t sid, uint32_t error_code, void *user)
{
	(void)user;
	(void)error_code;
	struct ing_grpc_call *c = nghttp2_session_get_stream_user_data(h2, sid);
	if (!c)
		return 0;
	nghttp2_session_set_stream_user_data(h2, sid, NULL);
	int status;
	if (c->deadline_hit)
		status = ING_GRPC_DEADLINE_EXCEEDED;
	else if (c->trailers_sent)
		status = c->status;
	else
		status = ING_GRPC_CANCELLED;
	drop_held(c, false);
	call_release(c, status);
	return 0;
}

/* ================================================================ connections */

/*
 * One read: into the server's buffer (rd.c NULL, one iovec), or placement for call rd.c:
 * iov[0] the rest of the current DATA frame's data where the handler wants it, then
 * optionally read-ahead pairs (a frame header into the server's spec_hdr, that frame's
 * data into place after the previous run) for frames guessed alike (h2_track.same), and,
 * when the placed run ends the handler's field, a tail (rd.tail) of SRV_SMALL_READ into
 * the end of the server's buffer: what follows it (the next message's prefix and fields,
 * the next frame's header) comes in the same read instead of one more small read.
 */
struct rd {
	struct ing_grpc_call *c;
	unsigned niov;
	bool tail;           /* the last iovec is the tail, taking the copy path */
	size_t want;
	struct iovec iov[2 + 2 * SRV_SPEC_MAX];
};

static ssize_t conn_read(struct conn *cn, struct rd *rd)
{
	struct grpc_feed *f = cn->mem;
	if (!f) {
		if (rd->niov == 1)
			return grpc_sock_read(cn->fd, cn->ssl, rd->iov[0].iov_base, rd->iov[0].iov_len);
		ssize_t n = readv(cn->fd, rd->iov, (int)rd->niov);   /* cleartext only */
		if (n < 0)
			return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? -EAGAIN : -errno;
		return n;
	}
	size_t k = f->n - f->in_off;   /* grpc_server_feed: the kernel's copy, done here */
	if (!k)
		return -EAGAIN;
	if (k > rd->want)
		k = rd->want;
	if (f->npieces) {
		size_t piece = f->pieces[f->reads % f->npieces];
		if (piece && k > piece)
			k = piece;
	}
	size_t done = 0;
	for (unsigned i = 0; i < rd->niov && done < k; i++) {
		size_t m = rd->iov[i].iov_len < k - done ? rd->iov[i].iov_len : k - done;
		memcpy(rd->iov[i].iov_base, f->in + f->in_off + done, m);
		done += m;
	}
	f->in_off += k;
	f->reads++;
	return (ssize_t)k;
}

static ssize_t conn_write(struct conn *cn, const uint8_t *p, size_t len)
{
	struct grpc_feed *f = cn->mem;
	if (!f)
		return grpc_sock_write(cn->fd, cn->ssl, p, len);
	if (f->out && f->out_len < f->out_cap) {   /* grpc_server_feed: kept, or dropped */
		size_t k = f->out_cap - f->out_len < len ? f->out_cap - f->out_len : len;
		memcpy(f->out + f->out_len, p, k);
	}
	f->out_len += len;
	return (ssize_t)len;
}

/* The call whose DATA the tracker is in, if nghttp2 still reads (NULL: none). */
static struct ing_grpc_call *data_call(struct conn *cn)
{
	const struct h2_track *t = &cn->tr;
	if (t->pos != H2P_DATA || !t->left || !nghttp2_session_want_read(cn->h2))
		return NULL;
	return nghttp2_session_get_stream_user_data(cn->h2, (int32_t)t->sid);
}

/*
 * Plan the next read (see Placement at the top). Into the buffer: up to SRV_SMALL_READ
 * past the bytes known to take the copy path (the rest of a frame that is not DATA,
 * padding, a run the handler will not place). Into place: the run the handler's sink
 * gives within this frame's data, and on cleartext connections, while the data field goes
 * on, the frames after it guessed alike (as many as came alike in a row, at most
 * SRV_SPEC_MAX): a wrong guess costs a copy (feed_read), never a wrong byte.
 */
static void read_plan(struct conn *cn, struct rd *rd)
{
	struct ing_grpc_server *s = cn->srv;
	const struct h2_track *t = &cn->tr;
	size_t copy;   /* bytes ahead that take the copy path for sure */
	rd->c = NULL;
	rd->niov = 1;
	rd->tail = false;
	rd->iov[0].iov_base = s->rbuf;
	switch (t->pos) {
	case H2P_DATA: {
		struct ing_grpc_call *c = data_call(cn);
		size_t n = SIZE_MAX;
		uint8_t *p = c ? call_sink(c, &n) : NULL;
		size_t run = n < t->left ? n : t->left;
		if (p && run) {
			size_t data = run < SRV_PLACE_MAX ? run : SRV_PLACE_MAX, total = data;
			rd->iov[0].iov_base = p;
			rd->iov[0].iov_len = data;
			unsigned spec = t->same < SRV_SPEC_MAX ? t->same : SRV_SPEC_MAX;
			if (cn->ssl || (t->flags & 0x1 /* END_STREAM */) || data < run)
				spec = 0;
			for (unsigned k = 0; k < spec && data < n && total + 9 < SRV_PLACE_MAX; k++) {
				size_t m = n - data;
				if (m > t->len)
					m = t->len;
				if (m > SRV_PLACE_MAX - total - 9)
					m = SRV_PLACE_MAX - total - 9;
				rd->iov[rd->niov].iov_base = s->spec_hdr[k];
				rd->iov[rd->niov++].iov_len = 9;
				rd->iov[rd->niov].iov_base = p + data;
				rd->iov[rd->niov++].iov_len = m;
				data += m;
				total += 9 + m;
			}
			if (data >= s->o.place_min) {
				rd->c = c;
				rd->want = total;
				if (data == n && !cn->ssl) {
					/* the field ends here: its successor's headers come along */
					rd->tail = true;
					rd->iov[rd->niov].iov_base = s->rbuf + SRV_PLACE_MAX;
					rd->iov[rd->niov++].iov_len = SRV_SMALL_READ;
					rd->want += SRV_SMALL_READ;
				}
				return;
			}
			rd->niov = 1;
			rd->iov[0].iov_base = s->rbuf;
		}
		copy = run;
		break;
	}
	case H2P_PADDING:
	case H2P_PAYLOAD:
		copy = t->left;
		break;
	case H2P_LOST:
		copy = SRV_RBUF;
		break;
	default:
		copy = 0;   /* preface, frame header, pad length: what follows is not known yet */
		break;
	}
	rd->want = copy < SRV_RBUF - SRV_SMALL_READ ? copy + SRV_SMALL_READ : SRV_RBUF;
	rd->iov[0].iov_len = rd->want;
}

/*
 * Wake-ups: while the rest of a DATA frame's data is due to be read into place, epoll
 * need not wake the loop before up to SRV_LOWAT_MAX of it is in the socket (SO_RCVLOWAT;
 * the frame was sent whole, so those bytes come; the kernel still wakes early when its
 * buffer is under pressure, and on FIN). Elsewhere (frame headers, other frames, TLS, whose
 * socket bytes are records) the kernel's default of one byte.
 */
static void conn_lowat(struct conn *cn)
{
	if (cn->fd < 0 || (!cn->nsink && !cn->lowat))
		return;
	int want = 0;
	struct ing_grpc_call *c = cn->ssl ? NULL : data_call(cn);
	size_t n = 0;
	if (c && call_sink(c, &n)) {
		if (n > cn->tr.left)
			n = cn->tr.left;
		want = n > SRV_LOWAT_MAX ? (int)SRV_LOWAT_MAX : (int)n;
	}
	if (want == cn->lowat)
		return;
	int v = want ? want : 1;
	if (setsockopt(cn->fd, SOL_SOCKET, SO_RCVLOWAT, &v, sizeof(v)) == 0)
		cn->lowat = want;
}

/* Give nghttp2 n bytes the connection read (placed: where call's sink said, at p), and
 * follow them. nghttp2's return. */
static ssize_t conn_feed(struct conn *cn, const uint8_t *p, size_t n, bool placed)
{
	if (placed)
		cn->place = p;
	ssize_t rv = nghttp2_session_mem_recv(cn->h2, p, n);
	cn->place = NULL;
	if (rv >= 0) {
		if ((size_t)rv == n)
			h2_track_advance(&cn->tr, p, n);
		else
			cn->tr.pos = H2P_LOST;   /* not every byte taken: no position any more */
	}
	return rv;
}

/* Of the n bytes at p, how many are where call c wants its next DATA bytes (0: none). */
static size_t placeable(struct conn *cn, struct ing_grpc_call *c, const uint8_t *p, size_t n)
{
	const struct h2_track *t = &cn->tr;
	if (data_call(cn) != c || t->sid != (uint32_t)c->sid)
		return 0;
	size_t k = 0;
	if (call_sink(c, &k) != p)
		return 0;
	if (k > t->left)
		k = t->left;
	return n < k ? n : k;
}

/*
 * Feed what a read brought (n bytes over rd's iovecs), in order. A read-ahead header goes
 * to nghttp2 when a frame header is due there; a run read into place goes from where it
 * is while that is where the call wants its next bytes (the header before it was the one
 * guessed). From the first piece that is not, the rest of the read is copied to the
 * server's buffer before anything else is fed (it may sit where the call's bytes will be
 * copied to) and fed from there. Nothing fed before that writes to the call's memory:
 * headers carry no DATA, placed runs are only accounted. nghttp2's error, or 0.
 */
static ssize_t feed_read(struct conn *cn, struct rd *rd, size_t n)
{
	struct ing_grpc_server *s = cn->srv;
	if (!rd->c)
		return conn_feed(cn, rd->iov[0].iov_base, n, false);
	for (unsigned i = 0; i < rd->niov && n; i++) {
		uint8_t *b = rd->iov[i].iov_base;
		size_t len = rd->iov[i].iov_len < n ? rd->iov[i].iov_len : n, ok = len;
		ssize_t rv;
		if (rd->tail && i == rd->niov - 1)
			return (rv = conn_feed(cn, b, len, false)) < 0 ? rv : 0;   /* the copy path */
		if (i % 2 == 0)
			ok = placeable(cn, rd->c, b, len);
		else if (cn->tr.pos != H2P_HEAD || cn->tr.hd_got)
			ok = 0;   /* the frame before goes on: these are not a header's bytes */
		if (ok) {
			rv = conn_feed(cn, b, ok, i % 2 == 0);
			if (rv < 0)
				return rv;
			n -= ok;
		}
		if (ok == len)
			continue;
		/* a guess was wrong: the rest of the read, through the buffer */
		size_t spill = 0;
		for (unsigned j = i; j < rd->niov && n; j++) {
			size_t off = j == i ? ok : 0;
			size_t m = rd->iov[j].iov_len - off < n ? rd->iov[j].iov_len - off : n;
			/* (the tail sits past where the spill reaches before it: memmove) */
			memmove(s->rbuf + spill, (uint8_t *)rd->iov[j].iov_base + off, m);
			spill += m;
			n -= m;
		}
		s->rx.spilled += spill;
		rv = conn_feed(cn, s->rbuf, spill, false);
		return rv < 0 ? rv : 0;
	}
	return 0;
}

static void conn_set_epout(struct conn *cn, bool on)
{
	if (cn->epout == on || cn->fd < 0)
		return;
	cn->epout = on;
	(void)ing_loop_mod_fd(cn->srv->loop, cn->fd, EPOLLIN | (on ? EPOLLOUT : 0));
}

/* Write what nghttp2 has. 1: connection finished (close it), 0: ok, -errno: broken. */
static int conn_flush(struct conn *cn)
{
	bool blocked = false;
	cn->out_now = false;
	for (int i = 0; i < SRV_WRITES_PER_FLUSH; i++) {
		if (!cn->pend_len) {
			const uint8_t *d;
			ssize_t n = nghttp2_session_mem_send(cn->h2, &d);
			if (n < 0)
				return -EIO;
			if (n == 0)
				break;
			cn->pend = d;
			cn->pend_len = (size_t)n;
		}
		ssize_t w = conn_write(cn, cn->pend, cn->pend_len);
		if (w == -EAGAIN) {
			blocked = true;
			break;
		}
		if (w < 0)
			return (int)w;
		cn->pend += w;
		cn->pend_len -= (size_t)w;
	}
	/* Blocked, or the write budget used up: come back when writable. */
	bool more = blocked || cn->pend_len || nghttp2_session_want_write(cn->h2);
	conn_set_epout(cn, more);
	if (cn->writable_due) {
		/* Buffers drained below the low-water mark during mem_send. Handlers may send
		 * from on_writable; that only arms the kick timer. */
		cn->writable_due = false;
		struct ing_grpc_call *c = cn->calls;
		while (c) {
			struct ing_grpc_call *nx = c->next;
			if (c->writable_due) {
				c->writable_due = false;
				if (c->started && !c->closed && c->m->on_writable)
					c->m->on_writable(c);
			}
			c = nx;
		}
	}
	if (!more && !nghttp2_session_want_read(cn->h2) && !nghttp2_session_want_write(cn->h2))
		return 1;
	return 0;
}

/* With mTLS: the verified client certificate's subject, RFC 2253 ("CN=a,O=b"), logged once. */
static void conn_identity(struct conn *cn)
{
	X509 *x = SSL_get1_peer_certificate(cn->ssl);
	if (!x)
		return;
	BIO *b = BIO_new(BIO_s_mem());
	if (b && X509_NAME_print_ex(b, X509_get_subject_name(x), 0, XN_FLAG_RFC2253) >= 0) {
		int n = BIO_read(b, cn->identity, (int)sizeof(cn->identity) - 1);
		cn->identity[n > 0 ? n : 0] = '\0';
	}
	BIO_free(b);
	X509_free(x);
	if (!cn->identity[0])
		snprintf(cn->identity, sizeof(cn->identity), "(empty subject)");
	ING_INFO("grpc", "%s: client certificate verified: identity \"%s\"", cn->peer, cn->identity);
}

static int conn_handshake(struct conn *cn)
{
	int rc = grpc_ssl_handshake(cn->ssl);
	if (rc == 1) {
		const unsigned char *alpn = NULL;
		unsigned alen = 0;
		SSL_get0_alpn_selected(cn->ssl, &alpn, &alen);
		if (alen != 2 || memcmp(alpn, "h2", 2) != 0) {
			ING_LOG_RL(ING_LOG_WARN, "grpc", "%s: TLS client did not negotiate h2",
				   cn->peer);
			return -EPROTO;
		}
		cn->handshake_done = true;
		conn_identity(cn);
		return 0;
	}
	int e = SSL_get_error(cn->ssl, rc);
	if (e == SSL_ERROR_WANT_READ) {
		conn_set_epout(cn, false);
		return -EAGAIN;
	}
	if (e == SSL_ERROR_WANT_WRITE) {
		conn_set_epout(cn, true);
		return -EAGAIN;
	}
	char ebuf[256];
	ING_LOG_RL(ING_LOG_WARN, "grpc", "%s: TLS handshake failed: %s", cn->peer,
		   grpc_ssl_errstr(ERR_get_error(), ebuf, sizeof(ebuf), "connection closed"));
	ERR_clear_error();
	return -EPROTO;
}

/* Read and feed nghttp2, then write. Returns false when the connection was closed. */
static bool conn_service(struct conn *cn, bool readable)
{
	struct ing_grpc_server *s = cn->srv;
	if (cn->ssl && !cn->handshake_done) {
		int rc = conn_handshake(cn);
		if (rc == -EAGAIN)
			return true;
		if (rc < 0) {
			conn_close(cn, NULL);
			return false;
		}
		readable = true;
	}
	size_t budget = SRV_BYTES_PER_EVENT;
	bool more = false;   /* stopped with input (maybe) left: budget used up */
	for (int i = 0; readable; i++) {
		if (i == SRV_READS_PER_EVENT || !budget) {
			more = true;
			break;
		}
		struct rd rd;
		if (cn->nsink) {
			read_plan(cn, &rd);
		} else {
			rd.c = NULL;
			rd.niov = 1;
			rd.want = SRV_RBUF;
			rd.iov[0].iov_base = s->rbuf;
			rd.iov[0].iov_len = SRV_RBUF;
		}
		size_t want = rd.want;
		ssize_t n = conn_read(cn, &rd);
		if (n == -EAGAIN)
			break;
		if (n <= 0) {
			conn_close(cn, n == 0 ? NULL : "read error");
			return false;
		}
		ssize_t rv = feed_read(cn, &rd, (size_t)n);
		if (rv < 0) {
			ING_LOG_RL(ING_LOG_INFO, "grpc", "%s: closing connection: %s", cn->peer,
				   nghttp2_strerror((int)rv));
			(void)conn_flush(cn);   /* GOAWAY, best effort */
			conn_close(cn, NULL);
			return false;
		}
		s->rx.reads++;
		s->rx.bytes += (uint64_t)n;
		budget -= (size_t)n < budget ? (size_t)n : budget;
		if ((size_t)n < want && !(cn->ssl && SSL_pending(cn->ssl)))
			break;
		if (cn->out_now) {
			/* A handler answered (a RECEIVED ack) while input is still coming: write it
			 * now, not after up to SRV_READS_PER_EVENT more reads of the next frame. */
			int frc = conn_flush(cn);
			if (frc != 0) {
				cn->linger = frc > 0;
				conn_close(cn, frc < 0 ? "write error" : NULL);
				return false;
			}
		}
	}
	if (more && cn->ssl && SSL_pending(cn->ssl))
		conn_kick(cn);   /* decrypted bytes epoll cannot see */
	conn_lowat(cn);
	int rc = conn_flush(cn);
	if (rc != 0) {
		cn->linger = rc > 0;
		conn_close(cn, rc < 0 ? "write error" : NULL);
		return false;
	}
	return true;
}

static void conn_event(void *arg, uint32_t events)
{
	struct conn *cn = arg;
	if ((events & (EPOLLERR | EPOLLHUP)) && !(events & EPOLLIN)) {
		conn_close(cn, NULL);
		return;
	}
	(void)conn_service(cn, (events & EPOLLIN) != 0);
}

/* Serve cn at this turn's flush (srv_flush). */
static void conn_kick(struct conn *cn)
{
	if (cn->dying || cn->dirty)
		return;
	cn->dirty = true;
	cn->srv->ndirty++;
	ing_loop_hook_arm(&cn->srv->flush);
}

static void conn_clean(struct conn *cn)
{
	if (!cn->dirty)
		return;
	cn->dirty = false;
	cn->srv->ndirty--;
}

/* A dirty connection: the held input of its resumed calls, then read what TLS has
 * decrypted already and write everything queued. False when it was closed. */
static bool conn_flush_now(struct conn *cn)
{
	conn_clean(cn);
	for (struct ing_grpc_call *c = cn->calls, *nx; c; c = nx) {
		nx = c->next;
		if (!c->resume_due)
			continue;
		c->resume_due = false;
		if (!c->paused && !c->closed)
			call_drain_held(c);   /* a handler may finish or pause calls: not free them */
	}
	return conn_service(cn, cn->ssl && cn->handshake_done && SSL_pending(cn->ssl));
}

/* before_sleep: every connection marked since the last turn, once. */
static int srv_flush(void *arg)
{
	struct ing_grpc_server *s = arg;
	int n = 0;

	for (struct conn *cn = s->conns, *nx; cn && s->ndirty; cn = nx) {
		nx = cn->next;
		if (!cn->dirty)
			continue;
		(void)conn_flush_now(cn);
		n++;
	}
	return n;
}

/*
 * Lingering close. When the HTTP/2 session is over (GOAWAY sent, no stream left) the
 * client may still be reading the last messages and sending WINDOW_UPDATEs for them; a
 * close() with such input unread answers with RST, and an RST makes the client's kernel
 * drop what the client had not read yet (the last messages, the trailers). So: read and
 * discard until the client closes or LINGER_MS pass, then close(). No FIN before that:
 * .NET's SocketsHttpHandler fails every stream its application has not finished yet (a
 * duplex call whose trailers it has not read) with "the HTTP/2 server closed the
 * connection" as soon as it reads EOF, even when the trailers came before it; a client
 * closes by itself once GOAWAY came and its streams are done (interop.seed_dotnet, case
 * stop). At most MAX_LINGERS at once (beyond: drain and close at once, as before).
 */
#define LINGER_MS 2000
#define MAX_LINGERS 256
struct lconn {
	struct ing_grpc_server *s;
	int fd;
	struct ing_timer t;
	struct lconn *prev, *next;
};
static unsigned nlingers(const struct ing_grpc_server *s)
{
	unsigned n = 0;
	for (const struct lconn *l = s->lingers; l; l = l->next)
		n++;
	return n;
}

static void linger_end(struct lconn *l)
{
	struct ing_grpc_server *s = l->s;
	(void)ing_loop_del_fd(s->loop, l->fd);
	ing_timer_cancel(s->loop, &l->t);
	close(l->fd);
	if (l->prev)
		l->prev->next = l->next;
	else
		s->lingers = l->next;
	if (l->next)
		l->next->prev = l->prev;
	free(l);
}

/* Read what came; true once the client has closed (or the connection is gone). */
static bool linger_drain(int fd)
{
	char sink[4096];
	ssize_t r;
	for (int i = 0; i < 64; i++) {
		r = recv(fd, sink, sizeof(sink), MSG_DONTWAIT);
		if (r > 0)
			continue;
		return r == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
	}
	return false;
}

static void linger_event(void *arg, uint32_t events)
{
	struct lconn *l = arg;
	(void)events;
	if (linger_drain(l->fd))
		linger_end(l);
}

static void linger_timeout(void *arg)
{
	struct lconn *l = arg;
	(void)linger_drain(l->fd);   /* nothing unread: close() sends FIN, not RST */
	linger_end(l);
}

/* Hand fd over to a linger; false (the caller closes it) when that cannot be done. */
static bool linger_start(struct ing_grpc_server *s, int fd)
{
	if (nlingers(s) >= MAX_LINGERS)
		return false;
	struct lconn *l = calloc(1, sizeof(*l));
	if (!l)
		return false;
	l->s = s;
	l->fd = fd;
	ing_timer_init(&l->t, linger_timeout, l);
	if (ing_loop_add_fd(s->loop, fd, EPOLLIN, linger_event, l)) {
		free(l);
		return false;
	}
	ing_timer_arm(s->loop, &l->t, ing_now_ns() + LINGER_MS * 1000000ull);
	l->next = s->lingers;
	if (l->next)
		l->next->prev = l;
	s->lingers = l;
	return true;
}

/* Tear down: every live call gets on_close(UNAVAILABLE). Loop callbacks only. */
static void conn_close(struct conn *cn, const char *why)
{
	struct ing_grpc_server *s = cn->srv;
	if (why)
		ING_INFO("grpc", "%s: connection closed (%s)", cn->peer, why);
	conn_clean(cn);
	cn->dying = true;
	ing_timer_cancel(s->loop, &cn->limit);
	if (cn->health_only)
		s->nhealth--;
	if (cn->fd >= 0)
		(void)ing_loop_del_fd(s->loop, cn->fd);
	while (cn->calls) {
		struct ing_grpc_call *c = cn->calls;
		if (cn->h2)
			nghttp2_session_set_stream_user_data(cn->h2, c->sid, NULL);
		c->held_off = c->held_len = 0;
		call_release(c, ING_GRPC_UNAVAILABLE);
	}
	nghttp2_session_del(cn->h2);
	if (cn->ssl) {
		SSL_free(cn->ssl);
	}
	/* close() with unread input sends RST, and an RST makes the peer's kernel drop what
	 * the peer has not read yet (the last acks, the trailers): read the input away first */
	if (cn->fd >= 0 && cn->lowat) {   /* the linger must wake on any byte */
		int one = 1;
		(void)setsockopt(cn->fd, SOL_SOCKET, SO_RCVLOWAT, &one, sizeof(one));
	}
	if (cn->fd >= 0 && !(cn->linger && linger_start(s, cn->fd))) {
		(void)linger_drain(cn->fd);
		close(cn->fd);
	}
	if (cn->prev)
		cn->prev->next = cn->next;
	else
		s->conns = cn->next;
	if (cn->next)
		cn->next->prev = cn->prev;
	s->nconns--;
	free(cn);
}

/* "1.2.3.4:5" / "[::1]:5" into out, the address alone into ip (INET6_ADDRSTRLEN). */
static void fmt_peer(const struct sockaddr_storage *ss, char *out, size_t len, char *ip)
{
	snprintf(ip, INET6_ADDRSTRLEN, "?");
	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *a = (const void *)ss;
		inet_ntop(AF_INET, &a->sin_addr, ip, INET6_ADDRSTRLEN);
		snprintf(out, len, "%s:%u", ip, ntohs(a->sin_port));
	} else if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *a = (const void *)ss;
		inet_ntop(AF_INET6, &a->sin6_addr, ip, INET6_ADDRSTRLEN);
		snprintf(out, len, "[%s]:%u", ip, ntohs(a->sin6_port));
	} else {
		snprintf(out, len, "unknown");
	}
}

/* ---------------------------------------------------------------- fair sharing */

/* Handshake deadline missed, or idle (no open stream) for too long. */
static void conn_limit_cb(void *arg)
{
	struct conn *cn = arg;
	struct ing_grpc_server *s = cn->srv;
	char why[96];
	if (!cn->preface_done) {
		snprintf(why, sizeof(why), "no %sHTTP/2 preface and SETTINGS within %u ms",
			 cn->ssl && !cn->handshake_done ? "TLS handshake, " : "",
			 s->o.handshake_timeout_ms);
		s->lim.handshake_timeouts++;
		conn_close(cn, why);
		return;
	}
	if (cn->nstreams && !cn->health_only)
		return;
	if (cn->health_only)   /* a reserve connection lives one handshake timeout, busy or not */
		snprintf(why, sizeof(why), "health-reserve connection: %u ms are up",
			 s->o.handshake_timeout_ms);
	else
		snprintf(why, sizeof(why), "idle: no open stream for %u ms", s->o.idle_timeout_ms);
	if (!cn->health_only)
		s->lim.idle_closed++;
	(void)nghttp2_submit_goaway(cn->h2, NGHTTP2_FLAG_NONE,
				    nghttp2_session_get_last_proc_stream_id(cn->h2), NGHTTP2_NO_ERROR,
				    NULL, 0);
	(void)conn_flush(cn);   /* best effort */
	conn_close(cn, why);
}

/* No stream open any more: the idle deadline starts (once the preface is in). */
static void conn_idle_begin(struct conn *cn)
{
	struct ing_grpc_server *s = cn->srv;
	cn->t_idle_ns = ing_now_ns();
	if (!cn->preface_done || cn->health_only)
		return;   /* the handshake deadline still runs (for the reserve: its lifetime) */
	ing_timer_arm(s->loop, &cn->limit, cn->t_idle_ns + (uint64_t)s->o.idle_timeout_ms * 1000000ull);
}

/* The connection idle longest (no open stream), of peer ip only when ip is set. */
static struct conn *oldest_idle(struct ing_grpc_server *s, const char *ip)
{
	struct conn *old = NULL;
	for (struct conn *cn = s->conns; cn; cn = cn->next) {
		if (cn->dying || cn->nstreams || cn->health_only || (ip && strcmp(cn->peer_ip, ip)))
			continue;
		if (!old || cn->t_idle_ns < old->t_idle_ns)
			old = cn;
	}
	return old;
}

static unsigned peer_conns(const struct ing_grpc_server *s, const char *ip)
{
	unsigned n = 0;
	for (const struct conn *cn = s->conns; cn; cn = cn->next)
		if (!cn->dying && !cn->health_only && strcmp(cn->peer_ip, ip) == 0)
			n++;
	return n;
}

static void evict(struct conn *cn, const char *why, const char *newcomer)
{
	char b[160];
	snprintf(b, sizeof(b), "evicted, idle for %" PRIu64 " ms: %s (new connection from %s)",
		 (ing_now_ns() - cn->t_idle_ns) / 1000000u, why, newcomer);
	cn->srv->lim.evicted++;
	(void)nghttp2_submit_goaway(cn->h2, NGHTTP2_FLAG_NONE,
				    nghttp2_session_get_last_proc_stream_id(cn->h2), NGHTTP2_NO_ERROR,
				    NULL, 0);
	(void)conn_flush(cn);
	conn_close(cn, b);
}

/*
 * Room for a new connection from ip: 0 (normal), 1 (health reserve only), -1 (refused).
 * One peer never holds more than max_conns_per_peer; a full table gives up its connection
 * idle longest rather than refusing the newcomer.
 */
static int admit_conn(struct ing_grpc_server *s, const char *ip, const char *peer)
{
	if (peer_conns(s, ip) >= s->o.max_conns_per_peer) {
		struct conn *v = oldest_idle(s, ip);
		if (!v) {
			ING_LOG_RL(ING_LOG_WARN, "grpc", "connection from %s refused: %u connections of %s open, all busy (--max-conns-per-peer)",
				   peer, s->o.max_conns_per_peer, ip);
			s->lim.refused++;
			return -1;
		}
		evict(v, "its peer is at --max-conns-per-peer", peer);
	}
	if (s->nconns - s->nhealth < s->o.max_connections)
		return 0;
	struct conn *v = oldest_idle(s, NULL);
	if (v) {
		evict(v, "connection table full", peer);
		return 0;
	}
	if (s->nhealth < s->o.health_reserve) {
		ING_LOG_RL(ING_LOG_WARN, "grpc", "%s: %u connections open, all busy: accepted for Health/Check only",
			   peer, s->nconns);
		s->lim.health_reserve++;
		return 1;
	}
	ING_LOG_RL(ING_LOG_WARN, "grpc", "connection refused: %u connections open, all busy", s->nconns);
	s->lim.refused++;
	return -1;
}

static int conn_start(struct ing_grpc_server *s, int fd, const struct sockaddr_storage *ss)
{
	char ip[INET6_ADDRSTRLEN], peer[64];
	fmt_peer(ss, peer, sizeof(peer), ip);
	int room = admit_conn(s, ip, peer);
	if (room < 0)
		return -EBUSY;
	struct conn *cn = calloc(1, sizeof(*cn));
	if (!cn)
		return -ENOMEM;
	cn->srv = s;
	cn->fd = fd;
	cn->id = ++s->next_conn_id;
	cn->health_only = room == 1;
	h2_track_init(&cn->tr);
	memcpy(cn->peer, peer, sizeof(cn->peer));
	memcpy(cn->peer_ip, ip, sizeof(cn->peer_ip));
	ing_timer_init(&cn->limit, conn_limit_cb, cn);
	int one = 1;
	if (fd >= 0)
		(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));

	if (nghttp2_session_server_new2(&cn->h2, s->cbs, cn, s->h2opt)) {
		free(cn);
		return -ENOMEM;
	}
	nghttp2_settings_entry iv[] = {
		{ NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, s->o.max_concurrent_streams },
		{ NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, s->o.window_bytes },
		{ NGHTTP2_SETTINGS_MAX_FRAME_SIZE, s->o.max_frame_size },
	};
	if (nghttp2_submit_settings(cn->h2, NGHTTP2_FLAG_NONE, iv, 3) ||
	    nghttp2_session_set_local_window_size(cn->h2, NGHTTP2_FLAG_NONE, 0,
						  (int32_t)s->o.conn_window_bytes)) {
		nghttp2_session_del(cn->h2);
		free(cn);
		return -EINVAL;
	}
	if (s->ssl_ctx) {
		cn->ssl = SSL_new(s->ssl_ctx);
		if (!cn->ssl || !SSL_set_fd(cn->ssl, fd)) {
			SSL_free(cn->ssl);
			nghttp2_session_del(cn->h2);
			free(cn);
			return -ENOMEM;
		}
		SSL_set_accept_state(cn->ssl);
	}
	int rc = fd >= 0 ? ing_loop_add_fd(s->loop, fd, EPOLLIN, conn_event, cn) : 0;
	if (rc < 0) {
		SSL_free(cn->ssl);
		nghttp2_session_del(cn->h2);
		free(cn);
		return rc;
	}
	cn->next = s->conns;
	if (s->conns)
		s->conns->prev = cn;
	s->conns = cn;
	s->nconns++;
	if (cn->health_only)
		s->nhealth++;
	cn->t_idle_ns = ing_now_ns();
	ing_timer_arm(s->loop, &cn->limit,
		      cn->t_idle_ns + (uint64_t)s->o.handshake_timeout_ms * 1000000ull);
	if (s->shutting_down)
		(void)nghttp2_submit_goaway(cn->h2, NGHTTP2_FLAG_NONE, 0, NGHTTP2_NO_ERROR, NULL, 0);
	conn_kick(cn);   /* our SETTINGS go out without waiting for the client */
	ING_DBG("grpc", "%s: connected", cn->peer);
	return 0;
}

static void listen_event(void *arg, uint32_t events)
{
	struct ing_grpc_server *s = arg;
	(void)events;
	for (int i = 0; i < 64; i++) {
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		int fd = accept4(s->lfd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR &&
			    errno != ECONNABORTED)
				ING_LOG_RL(ING_LOG_WARN, "grpc", "accept: %s", strerror(errno));
			return;
		}
		int rc = conn_start(s, fd, &ss);
		if (rc == -EBUSY) {
			close(fd);   /* refused, logged by admit_conn */
		} else if (rc < 0) {
			ING_LOG_RL(ING_LOG_WARN, "grpc", "connection setup failed: %s", strerror(-rc));
			close(fd);
		}
	}
}

/* ================================================================ in-memory connections */

/*
 * The fuzz targets' way in (tests/fuzz/): one connection with no socket. The bytes are fed
 * to nghttp2 in pieces, what the server writes is dropped, and a loop turn runs between
 * pieces (its due timers and deadlines, its before_sleep flushes), as on a real connection.
 */
int grpc_server_feed(struct ing_grpc_server *s, struct grpc_feed *f)
{
	struct sockaddr_storage ss = { .ss_family = AF_UNSPEC };
	f->in_off = f->out_len = f->reads = 0;
	f->placed = 0;
	f->server_closed = false;
	if (s->conns && s->conns->mem) {
		s->conns->mem = f;   /* the connection a keep_open feed left open goes on */
	} else {
		if (s->nconns)
			return -EBUSY;
		int rc = conn_start(s, -1, &ss);
		if (rc < 0)
			return rc;
		s->conns->mem = f;
	}
	for (;;) {
		struct conn *cn = s->conns;   /* the only one; gone when the server closed it */
		if (!cn)
			break;
		bool input = f->in_off < f->n;
		if (!conn_service(cn, input))
			break;
		(void)ing_loop_run_once(s->loop, 0);
		if (!input)
			break;
	}
	if (!s->conns)
		f->server_closed = true;
	else if (!f->keep_open)
		conn_close(s->conns, NULL);   /* end of input: the client went away */
	return 0;
}

/* ================================================================ server */

static int alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen,
		       const unsigned char *in, unsigned int inlen, void *arg)
{
	(void)ssl;
	(void)arg;
	static const unsigned char h2[] = "\x02h2";
	if (SSL_select_next_proto((unsigned char **)out, outlen, h2, sizeof(h2) - 1, in, inlen) !=
	    OPENSSL_NPN_NEGOTIATED)
		return SSL_TLSEXT_ERR_ALERT_FATAL;
	return SSL_TLSEXT_ERR_OK;
}

/* A server TLS context over cert, key (which must be the certificate's) and, for mTLS,
 * client_ca; NULL with one line in why. */
static SSL_CTX *tls_server_ctx(const char *cert, const char *key, const char *client_ca, char *why,
			       size_t whylen)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
	if (!ctx)
		return NULL;
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);
#ifdef SSL_OP_IGNORE_UNEXPECTED_EOF
	/* Clients often close TCP without close_notify: that is an EOF, not an error. */
	SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
#endif
	SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
				      SSL_MODE_RELEASE_BUFFERS);
	if (SSL_CTX_use_certificate_chain_file(ctx, cert) != 1 ||
	    SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1 ||
	    SSL_CTX_check_private_key(ctx) != 1) {
		char ebuf[256];
		snprintf(why, whylen, "TLS certificate/key %s / %s: %s", cert, key,
			 grpc_ssl_errstr(ERR_get_error(), ebuf, sizeof(ebuf), "invalid"));
		ERR_clear_error();
		SSL_CTX_free(ctx);
		return NULL;
	}
	SSL_CTX_set_alpn_select_cb(ctx, alpn_select, NULL);
	if (client_ca) {
		/* mTLS: no certificate, one from another CA, an expired one: handshake fails */
		STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(client_ca);
		if (SSL_CTX_load_verify_locations(ctx, client_ca, NULL) != 1 || !names) {
			char ebuf[256];
			snprintf(why, whylen, "TLS client CA %s: %s", client_ca,
				 grpc_ssl_errstr(ERR_get_error(), ebuf, sizeof(ebuf), "no certificate in it"));
			ERR_clear_error();
			sk_X509_NAME_pop_free(names, X509_NAME_free);
			SSL_CTX_free(ctx);
			return NULL;
		}
		SSL_CTX_set_client_CA_list(ctx, names);
		SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
		SSL_CTX_set_verify_depth(ctx, 4);
	}
	return ctx;
}

static int listen_on(struct ing_grpc_server *s)
{
	char buf[256];
	const char *host, *port;
	if (grpc_split_hostport(s->o.listen, buf, sizeof(buf), &host, &port) < 0) {
		ING_ERR("grpc", "bad listen address '%s' (host:port or [v6]:port)",
			s->o.listen ? s->o.listen : "(null)");
		return -EINVAL;
	}
	const char *gai_why = NULL;
	int rc = grpc_tcp_listen(host, port, 1024, &s->port, &gai_why);
	if (gai_why) {
		ING_ERR("grpc", "listen address '%s': %s", s->o.listen, gai_why);
		return -EINVAL;
	}
	if (rc >= 0) {
		s->lfd = rc;
		rc = 0;
	}
	if (rc < 0)
		ING_ERR("grpc", "cannot listen on %s: %s", s->o.listen, strerror(-rc));
	return rc;
}

int ing_grpc_server_reload(struct ing_grpc_server *s, const struct ing_grpc_server_opts *o, char *why,
			   size_t whylen, bool *cert_changed)
{
	struct ing_grpc_server_opts d;

	*cert_changed = false;
	if (s->ssl_ctx && o->tls_cert && o->tls_key) {
		SSL_CTX *ctx = tls_server_ctx(o->tls_cert, o->tls_key, o->tls_client_ca, why, whylen);
		if (!ctx)
			return -EINVAL;
		X509 *was = SSL_CTX_get0_certificate(s->ssl_ctx), *now = SSL_CTX_get0_certificate(ctx);
		*cert_changed = !was || !now || X509_cmp(was, now) != 0;
		SSL_CTX_free(s->ssl_ctx);   /* open connections hold their own reference (SSL_new) */
		s->ssl_ctx = ctx;
	}
	ing_grpc_server_opts_init(&d);
	s->o.handshake_timeout_ms = o->handshake_timeout_ms ? o->handshake_timeout_ms : d.handshake_timeout_ms;
	s->o.idle_timeout_ms = o->idle_timeout_ms ? o->idle_timeout_ms : d.idle_timeout_ms;
	s->o.max_connections = o->max_connections ? o->max_connections : d.max_connections;
	s->o.max_conns_per_peer = o->max_conns_per_peer ? o->max_conns_per_peer : d.max_conns_per_peer;
	s->o.health_reserve = o->health_reserve ? o->health_reserve : d.health_reserve;
	return 0;
}

struct ing_grpc_server *ing_grpc_server_create(struct ing_loop *loop,
					       const struct ing_grpc_server_opts *o,
					       const struct ing_grpc_method *methods, unsigned n)
{
	struct ing_grpc_server *s = calloc(1, sizeof(*s));
	if (!s) {
		ING_ERR("grpc", "out of memory");
		return NULL;
	}
	s->loop = loop;
	s->lfd = -1;
	s->serving = true;
	ing_loop_hook_init(&s->flush, srv_flush, s);
	ing_loop_before_sleep(loop, &s->flush);
	ing_grpc_server_opts_init(&s->o);
	if (o)
		s->o = *o;
	/* Zero means "default" for every size; keep the caller's listen string alive. */
	struct ing_grpc_server_opts d;
	ing_grpc_server_opts_init(&d);
	if (!s->o.listen)
		s->o.listen = d.listen;
	if (!s->o.max_recv_msg)
		s->o.max_recv_msg = d.max_recv_msg;
	if (!s->o.max_send_buffer)
		s->o.max_send_buffer = d.max_send_buffer;
	if (!s->o.window_bytes)
		s->o.window_bytes = d.window_bytes;
	if (!s->o.conn_window_bytes)
		s->o.conn_window_bytes = d.conn_window_bytes;
	if (!s->o.max_frame_size)
		s->o.max_frame_size = d.max_frame_size;
	if (!s->o.max_concurrent_streams)
		s->o.max_concurrent_streams = d.max_concurrent_streams;
	if (!s->o.max_connections)
		s->o.max_connections = d.max_connections;
	if (!s->o.handshake_timeout_ms)
		s->o.handshake_timeout_ms = d.handshake_timeout_ms;
	if (!s->o.idle_timeout_ms)
		s->o.idle_timeout_ms = d.idle_timeout_ms;
	if (!s->o.max_conns_per_peer)
		s->o.max_conns_per_peer = d.max_conns_per_peer;
	if (!s->o.health_reserve)
		s->o.health_reserve = d.health_reserve;
	if (!s->o.place_min)
		s->o.place_min = d.place_min;
	if (s->o.window_bytes > NGHTTP2_MAX_WINDOW_SIZE)
		s->o.window_bytes = NGHTTP2_MAX_WINDOW_SIZE;
	if (s->o.conn_window_bytes > NGHTTP2_MAX_WINDOW_SIZE)
		s->o.conn_window_bytes = NGHTTP2_MAX_WINDOW_SIZE;
	if (s->o.max_frame_size < 16384)
		s->o.max_frame_size = 16384;
	if (s->o.max_frame_size > 16777215)
		s->o.max_frame_size = 16777215;
	s->listen_str = strdup(s->o.listen);
	if (!s->listen_str)
		goto oom;
	s->o.listen = s->listen_str;
	s->o.tls_cert = s->o.tls_key = s->o.tls_client_ca = NULL;   /* only used during create */

	s->methods = calloc(n + 1, sizeof(*s->methods));
	if (!s->methods)
		goto oom;
	for (unsigned i = 0; i < n; i++) {
		if (!methods || !methods[i].path || methods[i].path[0] != '/') {
			ING_ERR("grpc", "method %u: path \"/package.Service/Method\" is required", i);
			goto fail;
		}
		s->methods[s->nmethods++] = methods[i];
	}
	if (!find_method(s, HEALTH_CHECK_PATH))
		s->methods[s->nmethods++] = (struct ing_grpc_method){
			.path = HEALTH_CHECK_PATH, .on_message = health_on_message,
			.on_close = health_on_close };

	/* SRV_RBUF reads; a whole placed read spilled, then its tail (read_plan) */
	s->rbuf = malloc(SRV_PLACE_MAX + SRV_SMALL_READ);
	if (!s->rbuf)
		goto oom;
	if (nghttp2_session_callbacks_new(&s->cbs) || nghttp2_option_new(&s->h2opt))
		goto oom;
	nghttp2_session_callbacks_set_on_begin_headers_callback(s->cbs, on_begin_headers);
	nghttp2_session_callbacks_set_on_header_callback(s->cbs, on_header);
	nghttp2_session_callbacks_set_on_frame_recv_callback(s->cbs, on_frame_recv);
	nghttp2_session_callbacks_set_on_data_chunk_recv_callback(s->cbs, on_data_chunk);
	nghttp2_session_callbacks_set_on_frame_send_callback(s->cbs, on_frame_send);
	nghttp2_session_callbacks_set_on_stream_close_callback(s->cbs, on_stream_close);
	nghttp2_session_callbacks_set_data_source_read_length_callback(s->cbs, grpc_read_length_cb);
	nghttp2_option_set_no_auto_window_update(s->h2opt, 1);

	if (o && o->tls_cert && o->tls_key) {
		char why[768];
		s->ssl_ctx = tls_server_ctx(o->tls_cert, o->tls_key, o->tls_client_ca, why, sizeof(why));
		if (!s->ssl_ctx) {
			ING_ERR("grpc", "%s", why);
			goto fail;
		}
	}
	if (s->o.no_listen)
		return s;
	if (listen_on(s) < 0)
		goto fail;
	int rc = ing_loop_add_fd(loop, s->lfd, EPOLLIN, listen_event, s);
	if (rc < 0) {
		ING_ERR("grpc", "loop add listener: %s", strerror(-rc));
		goto fail;
	}
	ING_INFO("grpc", "listening on %s (port %d, %s%s)", s->o.listen, s->port,
		 s->ssl_ctx ? "TLS" : "cleartext h2c",
		 o && o->tls_client_ca && s->ssl_ctx ? ", client certificates required" : "");
	return s;
oom:
	ING_ERR("grpc", "out of memory");
fail:
	ing_grpc_server_destroy(s);
	return NULL;
}

int ing_grpc_server_port(const struct ing_grpc_server *s)
{
	return s->port;
}

static void stop_listening(struct ing_grpc_server *s)
{
	if (s->lfd >= 0) {
		(void)ing_loop_del_fd(s->loop, s->lfd);
		close(s->lfd);
		s->lfd = -1;
	}
}

void ing_grpc_server_shutdown(struct ing_grpc_server *s)
{
	if (!s || s->shutting_down)
		return;
	s->shutting_down = true;
	stop_listening(s);
	for (struct conn *cn = s->conns; cn; cn = cn->next) {
		int32_t last = nghttp2_session_get_last_proc_stream_id(cn->h2);
		(void)nghttp2_submit_goaway(cn->h2, NGHTTP2_FLAG_NONE, last, NGHTTP2_NO_ERROR,
					    NULL, 0);
		conn_kick(cn);
	}
}

/*
 * At teardown (after a graceful shutdown): every connection still open is half-closed
 * too, and the loop runs until every linger has ended (the clients closed) or LINGER_MS.
 */
static void linger_all(struct ing_grpc_server *s)
{
	for (struct conn *cn = s->conns, *nx; cn; cn = nx) {
		nx = cn->next;
		cn->linger = true;
		conn_close(cn, NULL);
	}
	uint64_t end = ing_now_ns() + LINGER_MS * 1000000ull;
	while (s->lingers && ing_now_ns() < end)
		(void)ing_loop_run_once(s->loop, 20);
}

void ing_grpc_server_destroy(struct ing_grpc_server *s)
{
	if (!s)
		return;
	stop_listening(s);
	if (s->shutting_down)
		linger_all(s);
	while (s->conns)
		conn_close(s->conns, NULL);
	while (s->lingers)
		linger_end(s->lingers);
	ing_loop_hook_del(s->loop, &s->flush);
	if (s->cbs)
		nghttp2_session_callbacks_del(s->cbs);
	if (s->h2opt)
		nghttp2_option_del(s->h2opt);
	SSL_CTX_free(s->ssl_ctx);
	free(s->rbuf);
	free(s->methods);
	free(s->listen_str);
	free(s);
}
