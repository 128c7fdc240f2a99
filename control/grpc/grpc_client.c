/* SPDX-License-Identifier: Apache-2.0 */
/*
 * grpc_client.c - single-threaded gRPC client on one HTTP/2 connection (nghttp2).
 *
 * The owner drives everything with ing_grpc_chan_poll(); no library threads. Submitting
 * (call, send, cancel) never does I/O; poll writes and reads.
 *
 * Send path, built for GB/s of 1 MiB messages: each call keeps a FIFO of messages; a
 * message is a small inline part (5-byte prefix + protobuf head, or the whole payload for
 * copied sends) plus an optional body in caller memory (send_zc). DATA frames are emitted
 * with NGHTTP2_DATA_FLAG_NO_COPY: nghttp2 hands us the 9-byte frame header in
 * send_data_callback and we writev() header + inline + body straight from where they
 * are, frames as large as the server's SETTINGS_MAX_FRAME_SIZE. nghttp2 wants a DATA frame
 * written whole; if the socket takes only part, the rest (an iovec into the same memory)
 * is finished before anything else is written. A message is released (done() for
 * zero-copy bodies) when its last byte is on the socket; small ones (a chunk's prefix and
 * head) go back to a bounded per-connection free list, so streaming chunks never mallocs.
 *
 * Lifetimes: on_close is delivered exactly once per call (grpc-status, CANCELLED from
 * ing_grpc_ccall_cancel, DEADLINE_EXCEEDED from our own timer, UNAVAILABLE on connection
 * loss / chan_close); the ccall must not be used after it. done(body_arg) is called exactly
 * once for every send_zc that returned 0: when the body is written, or when the call or
 * the connection ends without writing it (possibly after on_close). Callbacks run inside
 * ing_grpc_chan_poll (or chan_close / cancel); they may start calls, send and cancel, but
 * must not call ing_grpc_chan_poll or ing_grpc_chan_close.
 */
#include "control/grpc/grpc.h"
#include "control/grpc/grpc_internal.h"
#include "common/clock.h"
#include "common/log.h"

#include <arpa/inet.h>
#include <inttypes.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <nghttp2/nghttp2.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#define CLI_RBUF (256u * 1024)
#define CLI_READS_PER_POLL 16
#define CLI_FRAME_IOV 64            /* iovecs per DATA frame: 9-byte header + 2 per message */
#define CLI_MAX_RECV (64u * 1024 * 1024 + 64 * 1024)
#define CLI_UNARY_NO_TIMEOUT_MS 60000
#define CLI_SMALL_INL 384           /* inline bytes of a recycled message: prefix + chunk head */
#define CLI_FREE_MAX 256            /* recycled messages kept per connection, at most */

struct cmsg {
	struct cmsg *next;
	size_t total;         /* inl_len + body_len */
	size_t off;           /* bytes already put into DATA frames */
	const uint8_t *body;
	size_t body_len;
	void (*done)(void *);
	void *done_arg;
	size_t inl_len;
	bool small;           /* from the connection's free list (CLI_SMALL_INL inline bytes) */
	uint8_t inl[];        /* prefix + head, or prefix + whole payload */
};

struct ing_grpc_ccall {
	struct ing_grpc_chan *ch;
	struct ing_grpc_ccall *prev, *next;
	int32_t sid;
	struct ing_grpc_ccall_cbs cbs;
	struct cmsg *q_head, *q_tail;
	size_t q_bytes;        /* bytes not yet put into DATA frames */
	bool end_requested;
	bool deferred;
	bool closed;           /* on_close delivered; the object lives until the stream closes */
	uint64_t deadline_ns;  /* 0: none */
	int http_status;
	int grpc_status;
	bool has_status;
	char grpc_message[512];
	struct grpc_deframer df;
	uint8_t *rmsg;
	size_t rcap, rlen;
};

struct ing_grpc_chan {
	int fd;
	SSL_CTX *ssl_ctx;
	SSL *ssl;
	nghttp2_session *h2;
	struct ing_grpc_ccall *calls;
	size_t pending, max_send;
	bool dead;
	int dead_err;
	bool got_settings;
	bool tls;
	int handled;           /* callbacks run during this poll */
	char authority[256];
	uint8_t *rbuf;
	/* the DATA frame being written */
	uint8_t fhd[9];
	struct iovec fiov[CLI_FRAME_IOV];
	int fn, fi;
	struct ing_grpc_ccall *fcall;   /* whose queue head the frame may point into */
	struct cmsg *frel[CLI_FRAME_IOV + 1];
	int nrel;
	/* released small messages, reused so a zero-copy chunk send does not malloc */
	struct cmsg *free_msgs;
	unsigned nfree;
	/* keepalive (opts.keepalive_ms): one PING outstanding at a time */
	uint64_t keepalive_ns;   /* 0: off */
	uint64_t next_ping_ns;
	uint64_t ping_sent_ns;
	bool ping_out;
	const char *probe_host, *probe_port;   /* during connect only */
};

void ing_grpc_chan_opts_init(struct ing_grpc_chan_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->connect_timeout_ms = 5000;
	o->window_bytes = 16u * 1024 * 1024;
	o->conn_window_bytes = 64u * 1024 * 1024;
	o->max_send_buffer = 32u * 1024 * 1024;
}

static void seterr(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void seterr(char *err, size_t errlen, const char *fmt, ...)
{
	if (!err || !errlen)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* ================================================================ messages */

/* A message with room for inl inline bytes: recycled when small, else malloc'd. */
static struct cmsg *msg_alloc(struct ing_grpc_chan *ch, size_t inl)
{
	struct cmsg *m;
	if (inl <= CLI_SMALL_INL && ch->free_msgs) {
		m = ch->free_msgs;
		ch->free_msgs = m->next;
		ch->nfree--;
	} else {
		m = malloc(sizeof(*m) + (inl <= CLI_SMALL_INL ? CLI_SMALL_INL : inl));
		if (!m)
			return NULL;
	}
	memset(m, 0, sizeof(*m));
	m->small = inl <= CLI_SMALL_INL;
	return m;
}

static void msg_release(struct ing_grpc_chan *ch, struct cmsg *m)
{
	ch->pending -= m->total;
	if (m->done)
		m->done(m->done_arg);
	if (m->small && ch->nfree < CLI_FREE_MAX) {
		m->next = ch->free_msgs;
		ch->free_msgs = m;
		ch->nfree++;
		return;
	}
	free(m);
}

static void frame_release(struct ing_grpc_chan *ch)
{
	for (int i = 0; i < ch->nrel; i++)
		msg_release(ch, ch->frel[i]);
	ch->nrel = 0;
	ch->fn = ch->fi = 0;
	ch->fcall = NULL;
}

/* Free what a call still queues; a message the current frame points into waits for it. */
static void call_drop_queue(struct ing_grpc_chan *ch, struct ing_grpc_ccall *cc)
{
	struct cmsg *m = cc->q_head;
	if (m && m->off > 0 && ch->fcall == cc && ch->fi < ch->fn) {
		cc->q_head = m->next;
		ch->frel[ch->nrel++] = m;
	}
	while ((m = cc->q_head)) {
		cc->q_head = m->next;
		msg_release(ch, m);
	}
	cc->q_tail = NULL;
	cc->q_bytes = 0;
}

/* ================================================================ socket I/O */

static ssize_t sock_writev(struct ing_grpc_chan *ch, const struct iovec *iov, int n)
{
	if (!ch->ssl) {
		struct msghdr mh = { .msg_iov = (struct iovec *)iov,
				     .msg_iovlen = (size_t)(n > IOV_MAX ? IOV_MAX : n) };
		ssize_t w = sendmsg(ch->fd, &mh, MSG_NOSIGNAL);   /* writev without SIGPIPE */
		if (w < 0)
			return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? -EAGAIN
											 : -errno;
		return w;
	}
	ssize_t tot = 0;
	for (int i = 0; i < n; i++) {
		if (!iov[i].iov_len)
			continue;
		size_t len = iov[i].iov_len > INT32_MAX ? INT32_MAX : iov[i].iov_len;
		int w = grpc_ssl_write(ch->ssl, iov[i].iov_base, (int)len);
		if (w <= 0) {
			int e = SSL_get_error(ch->ssl, w);
			ERR_clear_error();
			if (e == SSL_ERROR_WANT_WRITE || e == SSL_ERROR_WANT_READ)
				return tot ? tot : -EAGAIN;
			return tot ? tot : -EPIPE;
		}
		tot += w;
		if ((size_t)w < iov[i].iov_len)
			break;
	}
	return tot;
}

static ssize_t sock_read(struct ing_grpc_chan *ch, uint8_t *buf, size_t len)
{
	return grpc_sock_read(ch->fd, ch->ssl, buf, len);
}

/* Finish the DATA frame in flight. 0 done (or none), -EAGAIN, -errno. */
static int frame_flush(struct ing_grpc_chan *ch)
{
	while (ch->fi < ch->fn) {
		ssize_t w = sock_writev(ch, ch->fiov + ch->fi, ch->fn - ch->fi);
		if (w < 0)
			return (int)w;
		size_t left = (size_t)w;
		while (ch->fi < ch->fn && left >= ch->fiov[ch->fi].iov_len) {
			left -= ch->fiov[ch->fi].iov_len;
			ch->fi++;
		}
		if (left) {
			ch->fiov[ch->fi].iov_base = (uint8_t *)ch->fiov[ch->fi].iov_base + left;
			ch->fiov[ch->fi].iov_len -= left;
		}
	}
	frame_release(ch);
	return 0;
}

/* ================================================================ nghttp2 callbacks */

static ssize_t send_cb(nghttp2_session *h2, const uint8_t *data, size_t length, int flags,
		       void *user)
{
	struct ing_grpc_chan *ch = user;
	(void)h2;
	(void)flags;
	int rc = frame_flush(ch);
	if (rc == -EAGAIN)
		return NGHTTP2_ERR_WOULDBLOCK;
	if (rc < 0) {
		ch->dead_err = rc;
		return NGHTTP2_ERR_CALLBACK_FAILURE;
	}
	struct iovec iov = { (void *)data, length };
	ssize_t w = sock_writev(ch, &iov, 1);
	if (w == -EAGAIN)
		return NGHTTP2_ERR_WOULDBLOCK;
	if (w < 0) {
		ch->dead_err = (int)w;
		return NGHTTP2_ERR_CALLBACK_FAILURE;
	}
	return w;
}

/* Bytes the next DATA frame of cc can carry (no side effects: send_data_cb takes them). */
static ssize_t data_read_cb(nghttp2_session *h2, int32_t sid, uint8_t *buf, size_t length,
			    uint32_t *flags, nghttp2_data_source *src, void *user)
{
	struct ing_grpc_ccall *cc = src->ptr;
	(void)h2;
	(void)sid;
	(void)buf;
	(void)user;
	if (!cc->q_bytes) {
		if (cc->end_requested) {
			*flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_COPY;
			return 0;
		}
		cc->deferred = true;
		return NGHTTP2_ERR_DEFERRED;
	}
	size_t n = 0;
	int segs = 1;
	for (struct cmsg *m = cc->q_head; m && n < length; m = m->next) {
		size_t inl_left = m->off < m->inl_len ? m->inl_len - m->off : 0;
		size_t body_left = m->total - m->off - inl_left;
		int need = (inl_left ? 1 : 0) + (body_left ? 1 : 0);
		if (segs + need > CLI_FRAME_IOV)
			break;
		segs += need;
		size_t avail = m->total - m->off;
		n += avail < length - n ? avail : length - n;
	}
	*flags |= NGHTTP2_DATA_FLAG_NO_COPY;
	if (n == cc->q_bytes && cc->end_requested)
		*flags |= NGHTTP2_DATA_FLAG_EOF;
	return (ssize_t)n;
}

static int send_data_cb(nghttp2_session *h2, nghttp2_frame *frame, const uint8_t *framehd,
			size_t length, nghttp2_data_source *src, void *user)
{
	struct ing_grpc_chan *ch = user;
	struct ing_grpc_ccall *cc = src->ptr;
	(void)h2;
	int rc = frame_flush(ch);
	if (rc == -EAGAIN)
		return NGHTTP2_ERR_WOULDBLOCK;
	if (rc < 0) {
		ch->dead_err = rc;
		return NGHTTP2_ERR_CALLBACK_FAILURE;
	}
	(void)frame;   /* no padding: we never set a select_padding callback */
	memcpy(ch->fhd, framehd, 9);
	ch->fiov[0] = (struct iovec){ ch->fhd, 9 };
	ch->fn = 1;
	ch->fi = 0;
	ch->fcall = cc;
	size_t left = length;
	while (left) {
		struct cmsg *m = cc->q_head;
		size_t take;
		if (m->off < m->inl_len) {
			take = m->inl_len - m->off;
			if (take > left)
				take = left;
			ch->fiov[ch->fn++] = (struct iovec){ m->inl + m->off, take };
		} else {
			size_t boff = m->off - m->inl_len;
			take = m->body_len - boff;
			if (take > left)
				take = left;
			ch->fiov[ch->fn++] = (struct iovec){ (void *)(m->body + boff), take };
		}
		m->off += take;
		left -= take;
		cc->q_bytes -= take;
		if (m->off == m->total) {
			cc->q_head = m->next;
			if (!cc->q_head)
				cc->q_tail = NULL;
			ch->frel[ch->nrel++] = m;
		}
	}
	/* Empty messages (total 5) complete with their prefix; nothing else to do here. */
	rc = frame_flush(ch);
	if (rc < 0 && rc != -EAGAIN) {
		ch->dead_err = rc;
		return NGHTTP2_ERR_CALLBACK_FAILURE;
	}
	return 0;   /* the rest, if any, is ours to finish first */
}

static void deliver_close(struct ing_grpc_ccall *cc, int status, const char *msg)
{
	if (cc->closed)
		return;
	cc->closed = true;
	cc->ch->handled++;
	if (cc->cbs.on_close)
		cc->cbs.on_close(cc, cc->cbs.arg, status, msg ? msg : "");
}

static int on_frame_recv(nghttp2_session *h2, const nghttp2_frame *f, void *user)
{
	struct ing_grpc_chan *ch = user;
	(void)h2;
	if (f->hd.type == NGHTTP2_SETTINGS && !(f->hd.flags & NGHTTP2_FLAG_ACK))
		ch->got_settings = true;
	if (f->hd.type == NGHTTP2_PING && (f->hd.flags & NGHTTP2_FLAG_ACK) && ch->ping_out) {
		ch->ping_out = false;
		ch->next_ping_ns = ing_now_ns() + ch->keepalive_ns;
	}
	return 0;
}

static int on_header(nghttp2_session *h2, const nghttp2_frame *f, const uint8_t *name,
		     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
		     void *user)
{
	(void)flags;
	(void)user;
	if (f->hd.type != NGHTTP2_HEADERS)
		return 0;
	struct ing_grpc_ccall *cc = nghttp2_session_get_stream_user_data(h2, f->hd.stream_id);
	if (!cc)
		return 0;
	char v[16];
	if (namelen == 7 && memcmp(name, ":status", 7) == 0) {
		size_t k = valuelen < sizeof(v) - 1 ? valuelen : sizeof(v) - 1;
		memcpy(v, value, k);
		v[k] = '\0';
		cc->http_status = atoi(v);
	} else if (namelen == 11 && memcmp(name, "grpc-status", 11) == 0) {
		size_t k = valuelen < sizeof(v) - 1 ? valuelen : sizeof(v) - 1;
		memcpy(v, value, k);
		v[k] = '\0';
		cc->grpc_status = atoi(v);
		cc->has_status = true;
	} else if (namelen == 12 && memcmp(name, "grpc-message", 12) == 0) {
		grpc_pct_decode((const char *)value, valuelen, cc->grpc_message,
				sizeof(cc->grpc_message));
	}
	return 0;
}

static int on_data_chunk(nghttp2_session *h2, uint8_t flags, int32_t sid, const uint8_t *data,
			 size_t len, void *user)
{
	(void)flags;
	(void)user;
	struct ing_grpc_ccall *cc = nghttp2_session_get_stream_user_data(h2, sid);
	if (!cc || cc->closed)
		return 0;
	const uint8_t *p = data;
	size_t n = len;
	for (;;) {
		const uint8_t *d;
		size_t dl;
		enum grpc_wire_ev ev = grpc_deframe_next(&cc->df, &p, &n, &d, &dl);
		if (ev == GRPC_WIRE_NEED)
			break;
		if (ev == GRPC_WIRE_BEGIN) {
			const char *bad = NULL;
			if (cc->df.flags & GRPC_FLAG_COMPRESSED)
				bad = "compressed response not supported";
			else if (cc->df.len > CLI_MAX_RECV)
				bad = "response message too large";
			else if (cc->df.len > cc->rcap) {
				uint8_t *nb = realloc(cc->rmsg, cc->df.len);
				if (!nb)
					bad = "out of memory";
				else {
					cc->rmsg = nb;
					cc->rcap = cc->df.len;
				}
			}
			if (bad) {
				(void)nghttp2_submit_rst_stream(h2, NGHTTP2_FLAG_NONE, sid,
								NGHTTP2_CANCEL);
				deliver_close(cc, ING_GRPC_RESOURCE_EXHAUSTED, bad);
				return 0;
			}
			cc->rlen = 0;
		} else if (ev == GRPC_WIRE_DATA) {
			memcpy(cc->rmsg + cc->rlen, d, dl);
			cc->rlen += dl;
		} else if (ev == GRPC_WIRE_END) {
			cc->ch->handled++;
			if (cc->cbs.on_message)
				cc->cbs.on_message(cc, cc->cbs.arg, cc->rmsg, cc->rlen);
			if (cc->closed)
				return 0;
		}
	}
	return 0;
}

static void call_free(struct ing_grpc_chan *ch, struct ing_grpc_ccall *cc)
{
	call_drop_queue(ch, cc);
	if (cc->prev)
		cc->prev->next = cc->next;
	else
		ch->calls = cc->next;
	if (cc->next)
		cc->next->prev = cc->prev;
	free(cc->rmsg);
	free(cc);
}

static int on_stream_close(nghttp2_session *h2, int32_t sid, uint32_t error_code, void *user)
{
	struct ing_grpc_chan *ch = user;
	struct ing_grpc_ccall *cc = nghttp2_session_get_stream_user_data(h2, sid);
	if (!cc)
		return 0;
	if (!cc->closed) {
		if (cc->has_status)
			deliver_close(cc, cc->grpc_status, cc->grpc_message);
		else if (error_code == NGHTTP2_REFUSED_STREAM)
			deliver_close(cc, ING_GRPC_UNAVAILABLE, "stream refused");
		else if (error_code == NGHTTP2_CANCEL)
			deliver_close(cc, ING_GRPC_CANCELLED, "stream cancelled by the server");
		else if (error_code != NGHTTP2_NO_ERROR)
			deliver_close(cc, ING_GRPC_INTERNAL, nghttp2_http2_strerror(error_code));
		else if (cc->http_status && cc->http_status != 200)
			deliver_close(cc, grpc_status_from_http(cc->http_status),
				      "HTTP error without grpc-status");
		else
			deliver_close(cc, ING_GRPC_INTERNAL, "stream ended without grpc-status");
	}
	call_free(ch, cc);
	return 0;
}

/* ================================================================ connection */

static void chan_fail(struct ing_grpc_chan *ch, int err)
{
	if (ch->dead)
		return;
	ch->dead = true;
	ch->dead_err = err ? err : -ECONNRESET;
	frame_release(ch);   /* unwritten frame: its bytes are lost with the connection */
	while (ch->calls) {
		struct ing_grpc_ccall *cc = ch->calls;
		nghttp2_session_set_stream_user_data(ch->h2, cc->sid, NULL);
		deliver_close(cc, ING_GRPC_UNAVAILABLE, "connection lost");
		call_free(ch, cc);
	}
}

/* Write what we and nghttp2 have. 0 or -errno (connection broken). */
static int chan_flush(struct ing_grpc_chan *ch)
{
	int rc = frame_flush(ch);
	if (rc == -EAGAIN)
		return 0;
	if (rc < 0)
		return rc;
	rc = nghttp2_session_send(ch->h2);
	if (rc < 0)
		return ch->dead_err < 0 ? ch->dead_err : -EIO;
	return 0;
}

static bool chan_want_write(struct ing_grpc_chan *ch)
{
	return ch->fi < ch->fn || nghttp2_session_want_write(ch->h2);
}

/* Read what is there. >0 bytes read, 0 nothing, -errno connection gone. */
static ssize_t chan_read(struct ing_grpc_chan *ch)
{
	ssize_t total = 0;
	for (int i = 0; i < CLI_READS_PER_POLL; i++) {
		ssize_t n = sock_read(ch, ch->rbuf, CLI_RBUF);
		if (n == -EAGAIN)
			break;
		if (n == 0)
			return -ECONNRESET;
		if (n < 0)
			return n;
		ssize_t rv = nghttp2_session_mem_recv(ch->h2, ch->rbuf, (size_t)n);
		if (rv < 0) {
			ING_WARN("grpc", "client: protocol error from %s: %s", ch->authority,
				 nghttp2_strerror((int)rv));
			return -EPROTO;
		}
		total += n;
		if ((size_t)n < CLI_RBUF && !(ch->ssl && SSL_pending(ch->ssl)))
			break;
	}
	return total;
}

static int expire_deadlines(struct ing_grpc_chan *ch, uint64_t now)
{
	int n = 0;
	for (struct ing_grpc_ccall *cc = ch->calls; cc; cc = cc->next) {
		if (cc->closed || !cc->deadline_ns || cc->deadline_ns > now)
			continue;
		(void)nghttp2_submit_rst_stream(ch->h2, NGHTTP2_FLAG_NONE, cc->sid, NGHTTP2_CANCEL);
		deliver_close(cc, ING_GRPC_DEADLINE_EXCEEDED, "Deadline Exceeded");
		n++;
	}
	return n;
}

/* Keepalive: queue a PING when one is due; -ETIMEDOUT when the last one went unanswered
 * for twice the period. Sets *wait_ms to at most the time until the next check. */
static int keepalive_tick(struct ing_grpc_chan *ch, uint64_t now, int *wait_ms)
{
	if (!ch->keepalive_ns)
		return 0;
	uint64_t due;
	if (ch->ping_out) {
		due = ch->ping_sent_ns + 2 * ch->keepalive_ns;
		if (now >= due) {
			ING_WARN("grpc", "client: %s did not answer a PING within %" PRIu64 " ms",
				 ch->authority, 2 * ch->keepalive_ns / 1000000);
			return -ETIMEDOUT;
		}
	} else if (now >= ch->next_ping_ns) {
		if (nghttp2_submit_ping(ch->h2, NGHTTP2_FLAG_NONE, NULL) == 0) {
			ch->ping_out = true;
			ch->ping_sent_ns = now;
		}
		due = now + 2 * ch->keepalive_ns;
	} else {
		due = ch->next_ping_ns;
	}
	uint64_t ms = due > now ? (due - now + 999999) / 1000000 : 0;
	if (*wait_ms < 0 || (uint64_t)*wait_ms > ms)
		*wait_ms = (int)ms;
	return 0;
}

int ing_grpc_chan_poll(struct ing_grpc_chan *ch, int timeout_ms)
{
	if (ch->dead)
		return ch->dead_err;
	ch->handled = 0;
	int wait = timeout_ms < 0 ? -1 : timeout_ms;
	uint64_t now = ing_now_ns();
	int rc = keepalive_tick(ch, now, &wait);
	if (rc < 0)
		goto fail;
	rc = chan_flush(ch);
	if (rc < 0)
		goto fail;

	for (struct ing_grpc_ccall *cc = ch->calls; cc; cc = cc->next) {
		if (cc->closed || !cc->deadline_ns)
			continue;
		uint64_t ms = cc->deadline_ns > now ? (cc->deadline_ns - now + 999999) / 1000000 : 0;
		if (wait < 0 || (uint64_t)wait > ms)
			wait = (int)ms;
	}
	if (ch->ssl && SSL_pending(ch->ssl))
		wait = 0;
	struct pollfd pfd = { .fd = ch->fd, .events = POLLIN | (chan_want_write(ch) ? POLLOUT : 0) };
	int pr = poll(&pfd, 1, wait);
	if (pr < 0 && errno != EINTR) {
		rc = -errno;
		goto fail;
	}
	int progress = 0;
	if ((pr > 0 && (pfd.revents & (POLLIN | POLLERR | POLLHUP))) ||
	    (ch->ssl && SSL_pending(ch->ssl))) {
		ssize_t n = chan_read(ch);
		if (n < 0) {
			rc = (int)n;
			goto fail;
		}
		progress += n > 0;
	}
	size_t before = ch->pending;
	rc = chan_flush(ch);
	if (rc < 0)
		goto fail;
	progress += ch->pending != before;
	ch->handled += expire_deadlines(ch, ing_now_ns());
	return ch->handled + progress;
fail:
	chan_fail(ch, rc);
	return rc;
}

size_t ing_grpc_chan_pending(const struct ing_grpc_chan *ch)
{
	return ch->pending;
}

int ing_grpc_chan_fd(const struct ing_grpc_chan *ch)
{
	return ch->fd;
}

/* ================================================================ calls */

struct ing_grpc_ccall *ing_grpc_chan_call(struct ing_grpc_chan *ch, const char *path,
					  const char *const *md, int timeout_ms,
					  const struct ing_grpc_ccall_cbs *cbs)
{
	if (ch->dead || !path) {
		ING_ERR("grpc", "client call %s: connection is gone", path ? path : "(null)");
		return NULL;
	}
	struct ing_grpc_ccall *cc = calloc(1, sizeof(*cc));
	if (!cc) {
		ING_ERR("grpc", "client call %s: out of memory", path);
		return NULL;
	}
	cc->ch = ch;
	if (cbs)
		cc->cbs = *cbs;
	grpc_deframer_init(&cc->df);

	char tmo[16];
	nghttp2_nv nv[64];
	size_t nn = 0;
#define CNV(n, v) \
	(nghttp2_nv){ (uint8_t *)(n), (uint8_t *)(v), strlen(n), strlen(v), NGHTTP2_NV_FLAG_NONE }
	nv[nn++] = CNV(":method", "POST");
	nv[nn++] = CNV(":scheme", ch->tls ? "https" : "http");
	nv[nn++] = CNV(":path", path);
	nv[nn++] = CNV(":authority", ch->authority);
	nv[nn++] = CNV("te", "trailers");
	nv[nn++] = CNV("content-type", "application/grpc");
	nv[nn++] = CNV("user-agent", "h3000-ingest-grpc/" ING_VERSION);
	if (timeout_ms > 0) {
		cc->deadline_ns = ing_now_ns() + (uint64_t)timeout_ms * 1000000ull;
		grpc_timeout_format((uint64_t)timeout_ms * 1000000ull, tmo, sizeof(tmo));
		nv[nn++] = CNV("grpc-timeout", tmo);
	}
	for (size_t i = 0; md && md[i] && md[i + 1] && nn < 64; i += 2)
		nv[nn++] = CNV(md[i], md[i + 1]);
#undef CNV
	nghttp2_data_provider prd = { .source.ptr = cc, .read_callback = data_read_cb };
	int32_t sid = nghttp2_submit_request(ch->h2, NULL, nv, nn, &prd, cc);
	if (sid < 0) {
		ING_ERR("grpc", "client call %s: %s", path, nghttp2_strerror(sid));
		free(cc);
		return NULL;
	}
	cc->sid = sid;
	cc->next = ch->calls;
	if (ch->calls)
		ch->calls->prev = cc;
	ch->calls = cc;
	return cc;
}

static int enqueue(struct ing_grpc_ccall *cc, struct cmsg *m, bool end)
{
	struct ing_grpc_chan *ch = cc->ch;
	m->next = NULL;
	if (cc->q_tail)
		cc->q_tail->next = m;
	else
		cc->q_head = m;
	cc->q_tail = m;
	cc->q_bytes += m->total;
	ch->pending += m->total;
	if (end)
		cc->end_requested = true;
	if (cc->deferred) {
		cc->deferred = false;
		(void)nghttp2_session_resume_data(ch->h2, cc->sid);
	}
	return 0;
}

static int send_check(struct ing_grpc_ccall *cc, size_t total)
{
	struct ing_grpc_chan *ch = cc->ch;
	if (ch->dead || cc->closed || cc->end_requested)
		return -EPIPE;
	if (total - GRPC_PREFIX_LEN > UINT32_MAX)
		return -EMSGSIZE;
	if (ch->pending && ch->pending + total > ch->max_send)
		return -ENOBUFS;
	return 0;
}

int ing_grpc_ccall_send(struct ing_grpc_ccall *cc, const uint8_t *msg, size_t len, bool end)
{
	size_t total = GRPC_PREFIX_LEN + len;
	int rc = send_check(cc, total);
	if (rc)
		return rc;
	struct cmsg *m = msg_alloc(cc->ch, total);
	if (!m)
		return -ENOMEM;
	m->total = m->inl_len = total;
	grpc_put_prefix(m->inl, 0, (uint32_t)len);
	if (len)
		memcpy(m->inl + GRPC_PREFIX_LEN, msg, len);
	return enqueue(cc, m, end);
}

int ing_grpc_ccall_send_zc(struct ing_grpc_ccall *cc, const uint8_t *head, size_t head_len,
			   const uint8_t *body, size_t body_len, bool end,
			   void (*done)(void *body_arg), void *body_arg)
{
	size_t total = GRPC_PREFIX_LEN + head_len + body_len;
	int rc = send_check(cc, total);
	if (rc)
		return rc;
	struct cmsg *m = msg_alloc(cc->ch, GRPC_PREFIX_LEN + head_len);
	if (!m)
		return -ENOMEM;
	m->inl_len = GRPC_PREFIX_LEN + head_len;
	m->total = total;
	m->body = body;
	m->body_len = body_len;
	m->done = done;
	m->done_arg = body_arg;
	grpc_put_prefix(m->inl, 0, (uint32_t)(head_len + body_len));
	if (head_len)
		memcpy(m->inl + GRPC_PREFIX_LEN, head, head_len);
	return enqueue(cc, m, end);
}

int ing_grpc_ccall_half_close(struct ing_grpc_ccall *cc)
{
	if (cc->ch->dead || cc->closed)
		return -EPIPE;
	if (cc->end_requested)
		return 0;
	cc->end_requested = true;
	if (cc->deferred) {
		cc->deferred = false;
		(void)nghttp2_session_resume_data(cc->ch->h2, cc->sid);
	}
	return 0;
}

void ing_grpc_ccall_cancel(struct ing_grpc_ccall *cc)
{
	if (!cc || cc->closed)
		return;
	if (!cc->ch->dead)
		(void)nghttp2_submit_rst_stream(cc->ch->h2, NGHTTP2_FLAG_NONE, cc->sid,
						NGHTTP2_CANCEL);
	deliver_close(cc, ING_GRPC_CANCELLED, "Cancelled");
}

/* ================================================================ connect / close */

static int wait_fd(int fd, short ev, uint64_t deadline)
{
	for (;;) {
		uint64_t now = ing_now_ns();
		if (now >= deadline)
			return -ETIMEDOUT;
		struct pollfd p = { .fd = fd, .events = ev };
		int r = poll(&p, 1, (int)((deadline - now + 999999) / 1000000));
		if (r > 0)
			return 0;
		if (r < 0 && errno != EINTR)
			return -errno;
	}
}

static int tcp_connect(const char *host, const char *port, uint64_t deadline, char *err,
		       size_t errlen)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_NUMERICSERV }, *res = NULL;
	int gr = getaddrinfo(host, port, &hints, &res);
	if (gr) {
		seterr(err, errlen, "resolve %s: %s", host, gai_strerror(gr));
		return -EHOSTUNREACH;
	}
	int rc = -ECONNREFUSED;
	for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
		int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd < 0) {
			rc = -errno;
			continue;
		}
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
			if (errno != EINPROGRESS) {
				rc = -errno;
				close(fd);
				continue;
			}
			rc = wait_fd(fd, POLLOUT, deadline);
			int soerr = 0;
			socklen_t sl = sizeof(soerr);
			if (rc == 0 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) == 0 && soerr)
				rc = -soerr;
			if (rc < 0) {
				close(fd);
				continue;
			}
		}
		int one = 1;
		(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		freeaddrinfo(res);
		return fd;
	}
	freeaddrinfo(res);
	seterr(err, errlen, "connect %s:%s: %s%s", host, port, strerror(-rc),
	       rc == -ECONNREFUSED ? ": nothing listens there (is ingestd running, and on this "
				     "address and port?)"
	       : rc == -ETIMEDOUT ? ": no answer (a wrong host, a firewall, or the node is down)"
	       : rc == -EHOSTUNREACH || rc == -ENETUNREACH ? ": no route to that host" : "");
	return rc;
}

/*
 * After a failed connect, a second short connection that says why: a node that speaks TLS
 * to a cleartext client (it just closes) or cleartext HTTP/2 to a TLS client (its SETTINGS
 * are no TLS record). Bounded by deadline; true when the probe saw the other protocol.
 */
#define PROBE_NS 2000000000ull   /* a probe's own deadline: the connect's may be spent */

static bool probe_speaks_tls(const char *host, const char *port, uint64_t deadline)
{
	bool tls = false;
	int fd = tcp_connect(host, port, deadline, NULL, 0);
	if (fd < 0)
		return false;
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	static const unsigned char alpn[] = "\x02h2";   /* as a client would: no h2-less warning */
	if (ctx)
		SSL_CTX_set_alpn_protos(ctx, alpn, sizeof(alpn) - 1);
	SSL *ssl = ctx ? SSL_new(ctx) : NULL;
	if (ssl && SSL_set_fd(ssl, fd)) {
		SSL_set_connect_state(ssl);
		for (;;) {   /* verify nothing: only whether a TLS server answers */
			int r = grpc_ssl_handshake(ssl);
			if (r == 1) {
				tls = true;
				break;
			}
			int e = SSL_get_error(ssl, r);
			if ((e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) ||
			    wait_fd(fd, e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, deadline) < 0)
				break;
		}
	}
	SSL_free(ssl);
	SSL_CTX_free(ctx);
	ERR_clear_error();
	close(fd);
	return tls;
}

static bool probe_speaks_h2c(const char *host, const char *port, uint64_t deadline)
{
	static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
				      "\0\0\0\x04\0\0\0\0\0";   /* + an empty SETTINGS */
	uint8_t b[9];
	size_t got = 0;
	int fd = tcp_connect(host, port, deadline, NULL, 0);
	if (fd < 0)
		return false;
	if (send(fd, preface, sizeof(preface) - 1, MSG_NOSIGNAL) == (ssize_t)sizeof(preface) - 1) {
		while (got < sizeof(b) && wait_fd(fd, POLLIN, deadline) == 0) {
			ssize_t n = recv(fd, b + got, sizeof(b) - got, 0);
			if (n <= 0)
				break;
			got += (size_t)n;
		}
	}
	close(fd);
	return got == sizeof(b) && b[3] == 0x04;   /* the server's SETTINGS frame */
}

static int tls_connect(struct ing_grpc_chan *ch, const struct ing_grpc_chan_opts *o,
		       const char *host, uint64_t deadline, char *err, size_t errlen)
{
	ch->ssl_ctx = SSL_CTX_new(TLS_client_method());
	if (!ch->ssl_ctx) {
		seterr(err, errlen, "TLS: cannot create context");
		return -ENOMEM;
	}
	SSL_CTX_set_min_proto_version(ch->ssl_ctx, TLS1_2_VERSION);
	SSL_CTX_set_mode(ch->ssl_ctx, SSL_MODE_ENABLE_PARTIAL_WRITE |
					      SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	static const unsigned char alpn[] = "\x02h2";
	SSL_CTX_set_alpn_protos(ch->ssl_ctx, alpn, sizeof(alpn) - 1);
	if (o->tls_ca) {
		if (SSL_CTX_load_verify_locations(ch->ssl_ctx, o->tls_ca, NULL) != 1) {
			seterr(err, errlen, "TLS: cannot load CA %s", o->tls_ca);
			ERR_clear_error();
			return -EINVAL;
		}
		SSL_CTX_set_verify(ch->ssl_ctx, SSL_VERIFY_PEER, NULL);
	}
	if (!!o->tls_cert != !!o->tls_key) {
		seterr(err, errlen, "TLS: a client certificate needs its key (and the key its certificate)");
		return -EINVAL;
	}
	if (o->tls_cert && (SSL_CTX_use_certificate_chain_file(ch->ssl_ctx, o->tls_cert) != 1 ||
			    SSL_CTX_use_PrivateKey_file(ch->ssl_ctx, o->tls_key, SSL_FILETYPE_PEM) != 1 ||
			    SSL_CTX_check_private_key(ch->ssl_ctx) != 1)) {
		char ebuf[256];
		seterr(err, errlen, "TLS: client certificate %s / key %s: %s", o->tls_cert, o->tls_key,
		       grpc_ssl_errstr(ERR_get_error(), ebuf, sizeof(ebuf), "invalid"));
		ERR_clear_error();
		return -EINVAL;
	}
	if (o->tls_server_name && *o->tls_server_name)
		host = o->tls_server_name;   /* verify this name (and send it as SNI) instead */
	ch->ssl = SSL_new(ch->ssl_ctx);
	if (!ch->ssl || !SSL_set_fd(ch->ssl, ch->fd)) {
		seterr(err, errlen, "TLS: cannot create session");
		return -ENOMEM;
	}
	struct in6_addr a6;
	bool is_ip = inet_pton(AF_INET, host, &a6) == 1 || inet_pton(AF_INET6, host, &a6) == 1;
	if (!is_ip)
		SSL_set_tlsext_host_name(ch->ssl, host);
	if (o->tls_ca) {
		X509_VERIFY_PARAM *vp = SSL_get0_param(ch->ssl);
		if (is_ip)
			X509_VERIFY_PARAM_set1_ip_asc(vp, host);
		else
			X509_VERIFY_PARAM_set1_host(vp, host, 0);
	}
	SSL_set_connect_state(ch->ssl);
	for (;;) {
		int r = grpc_ssl_handshake(ch->ssl);
		if (r == 1)
			break;
		int e = SSL_get_error(ch->ssl, r);
		int wr;
		if (e == SSL_ERROR_WANT_READ)
			wr = wait_fd(ch->fd, POLLIN, deadline);
		else if (e == SSL_ERROR_WANT_WRITE)
			wr = wait_fd(ch->fd, POLLOUT, deadline);
		else {
			char ebuf[256];
			long vr = SSL_get_verify_result(ch->ssl);
			unsigned long ssl_err = ERR_peek_error();
			if (ERR_GET_REASON(ssl_err) == SSL_R_WRONG_VERSION_NUMBER &&
			    probe_speaks_h2c(ch->probe_host, ch->probe_port, ing_now_ns() + PROBE_NS))
				seterr(err, errlen, "TLS handshake with %s: the node speaks cleartext "
				       "HTTP/2, not TLS: connect without TLS (no tls_ca; ingest-send: "
				       "no --tls-ca), or start ingestd with --tls-cert and --tls-key",
				       ch->authority);
			else if (vr == X509_V_ERR_HOSTNAME_MISMATCH || vr == X509_V_ERR_IP_ADDRESS_MISMATCH)
				seterr(err, errlen, "TLS handshake with %s: the node's certificate does not "
				       "name %s (%s): connect by a name it has, or name it with "
				       "tls_server_name (ingest-send --tls-server-name)", ch->authority,
				       host, X509_verify_cert_error_string(vr));
			else if (vr != X509_V_OK)
				seterr(err, errlen, "TLS handshake with %s: the node's certificate: %s: is "
				       "tls_ca (ingest-send --tls-ca) the CA that signed it?", ch->authority,
				       X509_verify_cert_error_string(vr));
			else
				seterr(err, errlen, "TLS handshake: %s",
				       grpc_ssl_errstr(ERR_get_error(), ebuf, sizeof(ebuf),
						       "connection closed (does the node require a client certificate?)"));
			ERR_clear_error();
			return -EPROTO;
		}
		if (wr < 0) {
			seterr(err, errlen, "TLS handshake: %s", strerror(-wr));
			return wr;
		}
	}
	const unsigned char *sel = NULL;
	unsigned sl = 0;
	SSL_get0_alpn_selected(ch->ssl, &sel, &sl);
	if (sl != 2 || memcmp(sel, "h2", 2) != 0) {
		seterr(err, errlen, "TLS: server did not negotiate h2 (ALPN)");
		return -EPROTO;
	}
	return 0;
}

struct ing_grpc_chan *ing_grpc_chan_connect(const struct ing_grpc_chan_opts *o, char *err,
					    size_t errlen)
{
	struct ing_grpc_chan_opts d;
	ing_grpc_chan_opts_init(&d);
	if (!o)
		o = &d;
	char buf[256];
	const char *host, *port;
	if (!o->target || grpc_split_hostport(o->target, buf, sizeof(buf), &host, &port) < 0 ||
	    !*host) {
		seterr(err, errlen, "bad target '%s' (host:port or [v6]:port)",
		       o->target ? o->target : "(null)");
		errno = EINVAL;
		return NULL;
	}
	struct ing_grpc_chan *ch = calloc(1, sizeof(*ch));
	if (!ch) {
		seterr(err, errlen, "out of memory");
		errno = ENOMEM;
		return NULL;
	}
	int e = ENOMEM;   /* errno of a NULL return */
	ch->fd = -1;
	ch->tls = o->tls;
	ch->max_send = o->max_send_buffer ? o->max_send_buffer : d.max_send_buffer;
	snprintf(ch->authority, sizeof(ch->authority), "%s", o->target);
	int tmo = o->connect_timeout_ms > 0 ? o->connect_timeout_ms : d.connect_timeout_ms;
	uint64_t deadline = ing_now_ns() + (uint64_t)tmo * 1000000ull;
	uint32_t win = o->window_bytes ? o->window_bytes : d.window_bytes;
	uint32_t cwin = o->conn_window_bytes ? o->conn_window_bytes : d.conn_window_bytes;
	if (win > NGHTTP2_MAX_WINDOW_SIZE)
		win = NGHTTP2_MAX_WINDOW_SIZE;
	if (cwin > NGHTTP2_MAX_WINDOW_SIZE)
		cwin = NGHTTP2_MAX_WINDOW_SIZE;

	ch->rbuf = malloc(CLI_RBUF);
	if (!ch->rbuf) {
		seterr(err, errlen, "out of memory");
		goto fail;
	}
	ch->fd = tcp_connect(host, port, deadline, err, errlen);
	if (ch->fd < 0) {
		e = -ch->fd;
		goto fail;
	}
	ch->probe_host = host;   /* for the probes that explain a failed handshake */
	ch->probe_port = port;
	int trc = o->tls ? tls_connect(ch, o, host, deadline, err, errlen) : 0;
	if (trc < 0) {
		e = -trc;
		goto fail;
	}

	nghttp2_session_callbacks *cbs;
	if (nghttp2_session_callbacks_new(&cbs)) {
		seterr(err, errlen, "out of memory");
		goto fail;
	}
	nghttp2_session_callbacks_set_send_callback(cbs, send_cb);
	nghttp2_session_callbacks_set_send_data_callback(cbs, send_data_cb);
	nghttp2_session_callbacks_set_data_source_read_length_callback(cbs, grpc_read_length_cb);
	nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, on_frame_recv);
	nghttp2_session_callbacks_set_on_header_callback(cbs, on_header);
	nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_data_chunk);
	nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_stream_close);
	int rv = nghttp2_session_client_new(&ch->h2, cbs, ch);
	nghttp2_session_callbacks_del(cbs);
	if (rv) {
		seterr(err, errlen, "nghttp2: %s", nghttp2_strerror(rv));
		goto fail;
	}
	nghttp2_settings_entry iv[] = {
		{ NGHTTP2_SETTINGS_ENABLE_PUSH, 0 },
		{ NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, win },
		{ NGHTTP2_SETTINGS_MAX_FRAME_SIZE, 1u << 20 },
	};
	if (nghttp2_submit_settings(ch->h2, NGHTTP2_FLAG_NONE, iv, 3) ||
	    nghttp2_session_set_local_window_size(ch->h2, NGHTTP2_FLAG_NONE, 0, (int32_t)cwin)) {
		seterr(err, errlen, "nghttp2: cannot submit SETTINGS");
		goto fail;
	}
	/* Wait for the server's SETTINGS: its max frame size and windows shape our sends. */
	while (!ch->got_settings) {
		uint64_t now = ing_now_ns();
		if (now >= deadline) {
			seterr(err, errlen, "%s: no HTTP/2 SETTINGS from the server within %d ms",
			       o->target, tmo);
			e = ETIMEDOUT;
			goto fail;
		}
		int r = ing_grpc_chan_poll(ch, (int)((deadline - now + 999999) / 1000000));
		if (r < 0) {
			e = -r;
			/* TLS 1.3: the server checks our certificate after our handshake ended; its
			 * alert (if it is still readable) says why the connection went */
			char ebuf[256] = "";
			if (ch->ssl) {
				uint8_t b1;
				ERR_clear_error();
				(void)grpc_ssl_read(ch->ssl, &b1, 1);
				grpc_ssl_errstr(ERR_peek_last_error(), ebuf, sizeof(ebuf), "");
				ERR_clear_error();
			}
			seterr(err, errlen, "%s: connection failed during HTTP/2 setup: %s%s%s%s",
			       o->target, strerror(-r), *ebuf ? " (TLS: " : "", ebuf, *ebuf ? ")" : "");
			if (!ch->ssl && probe_speaks_tls(host, port, ing_now_ns() + PROBE_NS))
				seterr(err, errlen, "%s: the node speaks TLS and closed this cleartext "
				       "connection: connect with TLS, giving the CA of its certificate "
				       "(tls_ca; ingest-send --tls-ca PEM)", o->target);
			else if (ch->ssl && !o->tls_cert && !*ebuf)
				seterr(err, errlen, "%s: closed by the node after the TLS handshake (%s): "
				       "does it require a client certificate?", o->target, strerror(-r));
			goto fail;
		}
	}
	/* keepalive starts once the connection is up */
	if (o->keepalive_ms > 0) {
		ch->keepalive_ns = (uint64_t)o->keepalive_ms * 1000000ull;
		ch->next_ping_ns = ing_now_ns() + ch->keepalive_ns;
	}
	return ch;
fail:
	ing_grpc_chan_close(ch);
	errno = e;
	return NULL;
}

void ing_grpc_chan_close(struct ing_grpc_chan *ch)
{
	if (!ch)
		return;
	if (ch->h2 && !ch->dead) {
		/* Polite GOAWAY, best effort and non-blocking. */
		(void)nghttp2_session_terminate_session(ch->h2, NGHTTP2_NO_ERROR);
		(void)chan_flush(ch);
	}
	if (ch->h2)
		chan_fail(ch, -ECONNABORTED);
	nghttp2_session_del(ch->h2);
	if (ch->ssl) {
		if (!ch->dead_err || ch->dead_err == -ECONNABORTED)
			grpc_ssl_shutdown(ch->ssl);
		SSL_free(ch->ssl);
	}
	SSL_CTX_free(ch->ssl_ctx);
	if (ch->fd >= 0)
		close(ch->fd);
	while (ch->free_msgs) {
		struct cmsg *m = ch->free_msgs;
		ch->free_msgs = m->next;
		free(m);
	}
	free(ch->rbuf);
	free(ch);
}

/* ================================================================ unary */

struct unary_state {
	bool done;
	int status;
	char *errmsg;
	size_t errlen;
	uint8_t *resp;
	size_t resp_len;
	bool have_resp;
};

static void unary_on_message(struct ing_grpc_ccall *cc, void *arg, const uint8_t *msg, size_t len)
{
	struct unary_state *u = arg;
	(void)cc;
	if (u->have_resp)
		return;   /* a unary method answers once; extra messages are ignored */
	u->resp = malloc(len ? len : 1);
	if (!u->resp)
		return;
	if (len)
		memcpy(u->resp, msg, len);
	u->resp_len = len;
	u->have_resp = true;
}

static void unary_on_close(struct ing_grpc_ccall *cc, void *arg, int status, const char *message)
{
	struct unary_state *u = arg;
	(void)cc;
	u->done = true;
	u->status = status;
	seterr(u->errmsg, u->errlen, "%s", message ? message : "");
}

int ing_grpc_unary(struct ing_grpc_chan *ch, const char *path, const char *const *md,
		   const uint8_t *req, size_t req_len, uint8_t **resp, size_t *resp_len,
		   int timeout_ms, char *errmsg, size_t errlen)
{
	struct unary_state u = { .errmsg = errmsg, .errlen = errlen };
	struct ing_grpc_ccall_cbs cbs = { unary_on_message, unary_on_close, &u };
	if (resp)
		*resp = NULL;
	if (resp_len)
		*resp_len = 0;
	seterr(errmsg, errlen, "%s", "");
	struct ing_grpc_ccall *cc = ing_grpc_chan_call(ch, path, md, timeout_ms, &cbs);
	if (!cc) {
		seterr(errmsg, errlen, "cannot start call");
		return ING_GRPC_UNAVAILABLE;
	}
	int rc = ing_grpc_ccall_send(cc, req, req_len, true);
	if (rc < 0) {
		ing_grpc_ccall_cancel(cc);
		seterr(errmsg, errlen, "send: %s", strerror(-rc));
		free(u.resp);
		return rc == -ENOBUFS ? ING_GRPC_RESOURCE_EXHAUSTED : ING_GRPC_UNAVAILABLE;
	}
	/* Our own bound when the caller set none: no wait without a deadline. */
	uint64_t limit = ing_now_ns() +
			 (uint64_t)(timeout_ms > 0 ? timeout_ms + 1000 : CLI_UNARY_NO_TIMEOUT_MS) *
				 1000000ull;
	while (!u.done) {
		uint64_t now = ing_now_ns();
		if (now >= limit) {
			ing_grpc_ccall_cancel(cc);   /* sets u.done */
			u.status = ING_GRPC_DEADLINE_EXCEEDED;
			seterr(errmsg, errlen, "no answer in time");
			break;
		}
		int r = ing_grpc_chan_poll(ch, (int)((limit - now + 999999) / 1000000));
		if (r < 0 && !u.done) {
			u.status = ING_GRPC_UNAVAILABLE;
			seterr(errmsg, errlen, "connection lost: %s", strerror(-r));
			break;
		}
	}
	/* Let the RST_STREAM / WINDOW_UPDATEs out without blocking. */
	(void)ing_grpc_chan_poll(ch, 0);
	if (u.status == ING_GRPC_OK && resp) {
		*resp = u.resp;
		if (resp_len)
			*resp_len = u.resp_len;
	} else {
		free(u.resp);
	}
	return u.status;
}
