/* SPDX-License-Identifier: Apache-2.0 */
/*
 * grpc_internal.h - pieces shared by the gRPC server and client (control/net/grpc_*.c).
 * grpc_wire.c: the 5-byte message framing, grpc-timeout and grpc-message encodings,
 * address parsing: pure functions, any thread, unit-tested in tests/unit/test_grpc_wire.c.
 * grpc_tls.c: OpenSSL I/O wrappers that keep SIGPIPE away from the host process.
 */
#ifndef ING_CONTROL_GRPC_INTERNAL_H
#define ING_CONTROL_GRPC_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <nghttp2/nghttp2.h>
#include <openssl/ssl.h>
#include <signal.h>
#include <errno.h>
#include <sys/socket.h>
#include <sys/types.h>

#define GRPC_PREFIX_LEN 5
#define GRPC_FLAG_COMPRESSED 0x01

/*
 * Incremental deframer over a byte stream that arrives in arbitrary pieces. The caller
 * pulls events one at a time so it can stop between any two (pause, error) with the
 * exact number of bytes consumed known.
 */
enum grpc_wire_ev {
	GRPC_WIRE_NEED = 0, /* all input consumed, message incomplete */
	GRPC_WIRE_BEGIN,    /* prefix parsed: d->flags, d->len valid */
	GRPC_WIRE_DATA,     /* data, dlen: the next piece of the payload (dlen > 0) */
	GRPC_WIRE_END,      /* payload complete (follows BEGIN directly for len 0) */
};

struct grpc_deframer {
	uint8_t hdr[GRPC_PREFIX_LEN];
	uint8_t hdr_got;
	uint8_t flags;
	uint8_t in_msg;    /* BEGIN emitted, END not yet */
	uint32_t len;      /* payload length of the current message */
	uint32_t got;      /* payload bytes handed out so far */
};

void grpc_deframer_init(struct grpc_deframer *d);
/* Advance over p, n (both updated to the unconsumed rest) until the next event. */
enum grpc_wire_ev grpc_deframe_next(struct grpc_deframer *d, const uint8_t **p, size_t *n,
				    const uint8_t **data, size_t *dlen);
/* True between messages (no partial prefix or payload pending). */
static inline int grpc_deframer_idle(const struct grpc_deframer *d)
{
	return !d->in_msg && d->hdr_got == 0;
}

/* The deframer is inside a message's payload: n of its bytes were handled by the caller
 * without passing through grpc_deframe_next (placed straight into their destination).
 * n <= grpc_deframer_payload_left(d). The next grpc_deframe_next reports END when the
 * payload is complete. */
static inline uint32_t grpc_deframer_payload_left(const struct grpc_deframer *d)
{
	return d->in_msg ? d->len - d->got : 0;
}
static inline void grpc_deframer_skip(struct grpc_deframer *d, uint32_t n)
{
	d->got += n;
}

/*
 * Where a server stands in its client's HTTP/2 byte stream (RFC 9113: the 24-byte
 * preface, then frames of a 9-byte header and a payload; a PADDED DATA frame's payload is
 * a pad-length byte, the data, the padding). The server advances it over exactly the bytes
 * it hands nghttp2, so at any moment it knows whether the next bytes are a DATA frame's
 * data, of which stream, and how many there are: that is where they may be read straight
 * into their destination (grpc_server.c). nghttp2 still parses every byte itself; the
 * tracker only follows. A stream nghttp2 would refuse (bad padding) leaves it LOST.
 */
enum h2_pos {
	H2P_PREFACE = 0,   /* client connection preface */
	H2P_HEAD,          /* frame header */
	H2P_PAD_LEN,       /* DATA with PADDED: the pad-length byte */
	H2P_DATA,          /* DATA: data bytes (left of them in this frame) */
	H2P_PADDING,       /* DATA: padding */
	H2P_PAYLOAD,       /* any other frame's payload */
	H2P_LOST,          /* a frame nghttp2 rejects: no position any more */
};

struct h2_track {
	uint8_t pos;       /* enum h2_pos */
	uint8_t hd_got;
	uint8_t type, flags;
	uint8_t hd[9];
	uint32_t sid;      /* stream of the current frame */
	uint32_t len;      /* its payload length */
	uint32_t left;     /* bytes left in the current part */
	uint32_t pad;      /* padding after the data (PADDED DATA) */
	/* DATA frames in a row before this one, of this stream and this length, unpadded:
	 * how far the frames to come may be guessed alike (grpc_server.c reads ahead) */
	uint32_t same;
};

void h2_track_init(struct h2_track *t);
/* Follow n more bytes of the client's stream. */
void h2_track_advance(struct h2_track *t, const uint8_t *p, size_t n);

static inline void grpc_put_prefix(uint8_t out[GRPC_PREFIX_LEN], uint8_t flags, uint32_t len)
{
	out[0] = flags;
	out[1] = (uint8_t)(len >> 24);
	out[2] = (uint8_t)(len >> 16);
	out[3] = (uint8_t)(len >> 8);
	out[4] = (uint8_t)len;
}

/* "<1..8 digits><H|M|S|m|u|n>" -> ns (saturating). 0 or -EINVAL. */
int grpc_timeout_parse(const char *s, size_t len, uint64_t *ns);
/* ns -> grpc-timeout in the finest unit that fits 8 digits, rounded up (a deadline is
 * never shortened); out >= 10 bytes. */
void grpc_timeout_format(uint64_t ns, char *out, size_t outlen);

/* grpc-message percent-encoding: bytes outside 0x20..0x7e and '%' become %XX. The
 * output is always NUL-terminated and truncated on a whole escape. Returns the length. */
size_t grpc_pct_encode(const char *in, char *out, size_t outlen);
/* Decoding is lenient (invalid escapes are copied through), as the spec asks. */
size_t grpc_pct_decode(const char *in, size_t inlen, char *out, size_t outlen);

/* HTTP :status -> gRPC status for responses without grpc-status (PROTOCOL-HTTP2 table). */
int grpc_status_from_http(int http_status);

/* OpenSSL calls that never let SIGPIPE reach the process (grpc_tls.c); same returns. */
struct grpc_sigpipe_guard {
	sigset_t old;
	bool was_pending;
};
void grpc_sigpipe_block(struct grpc_sigpipe_guard *g);
void grpc_sigpipe_unblock(struct grpc_sigpipe_guard *g);
int grpc_ssl_write(SSL *ssl, const void *buf, int len);
int grpc_ssl_read(SSL *ssl, void *buf, int len);
int grpc_ssl_handshake(SSL *ssl);
/*
 * Non-blocking socket I/O, through TLS when ssl is set (server and client share these).
 * read: > 0 bytes, 0 orderly close, -EAGAIN nothing now (also TLS wanting the other
 * direction), -ECONNRESET / -errno. write: > 0 bytes, -EAGAIN, -EPIPE / -errno.
 */
static inline ssize_t grpc_sock_err(void)
{
	return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? -EAGAIN : -errno;
}
/* the TLS halves (grpc_tls.c); the plain socket's are inline: they are the data path */
ssize_t grpc_tls_read(SSL *ssl, void *buf, size_t len);
ssize_t grpc_tls_write(SSL *ssl, const void *buf, size_t len);
static inline ssize_t grpc_sock_read(int fd, SSL *ssl, void *buf, size_t len)
{
	if (ssl)
		return grpc_tls_read(ssl, buf, len);
	ssize_t n = recv(fd, buf, len, 0);
	return n < 0 ? grpc_sock_err() : n;
}
static inline ssize_t grpc_sock_write(int fd, SSL *ssl, const void *buf, size_t len)
{
	if (ssl)
		return grpc_tls_write(ssl, buf, len);
	ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);
	return n < 0 ? grpc_sock_err() : n;
}
/* Text of an OpenSSL error code (never NULL: system-library errors have no reason string),
 * or dflt when e is 0. Writes into buf. */
const char *grpc_ssl_errstr(unsigned long e, char *buf, size_t len, const char *dflt);
void grpc_ssl_shutdown(SSL *ssl);

/* nghttp2 data_source_read_length_callback for both ends: DATA frames as large as the
 * peer's SETTINGS_MAX_FRAME_SIZE and both flow-control windows allow (nghttp2's default
 * is 16 KiB, which costs a syscall per 16 KiB of frame data). */
static inline ssize_t grpc_read_length_cb(nghttp2_session *h2, uint8_t frame_type, int32_t sid,
					  int32_t conn_win, int32_t stream_win, uint32_t remote_max,
					  void *user)
{
	(void)h2;
	(void)frame_type;
	(void)sid;
	(void)user;
	ssize_t n = remote_max;
	if (conn_win < n)
		n = conn_win;
	if (stream_win < n)
		n = stream_win;
	return n > 0 ? n : 1;
}

/*
 * Fuzz targets and unit tests: one in-memory connection of server s (created with
 * opts.no_listen) that reads the client's bytes from in (n bytes) through the same receive
 * path as a socket (placement included). Read i takes at most pieces[i % npieces] bytes
 * (npieces 0: no limit; a 0 entry: no limit for that read), so a test decides where reads
 * split. What the server writes is appended to out (up to out_cap; out NULL: dropped).
 * Due timers run between reads. When the input is used up the connection is closed, as
 * when a client goes away, unless keep_open: then the next grpc_server_feed goes on with
 * the same connection (a client that waits for the server's answer before it sends more).
 * 0 or -errno. Loop thread.
 */
struct grpc_feed {
	const uint8_t *in;
	size_t n;
	const size_t *pieces;
	size_t npieces;
	uint8_t *out;
	size_t out_cap;
	bool keep_open;
	/* results */
	size_t in_off;        /* bytes read */
	size_t out_len;       /* bytes the server wrote (those beyond out_cap are not kept) */
	size_t reads;         /* reads that returned bytes */
	uint64_t placed;      /* of in_off: read straight into a handler's memory */
	bool server_closed;   /* the server ended the connection */
};
struct ing_grpc_server;
int grpc_server_feed(struct ing_grpc_server *s, struct grpc_feed *f);

/* "host:port" or "[v6]:port" split in place into buf (host may be empty). 0 or -EINVAL. */
/*
 * Listen on host:port (numeric port; host "" = any address): the first address that
 * binds, non-blocking, close-on-exec, SO_REUSEADDR. The fd (the bound port in *port_out),
 * or -errno; a host that does not resolve is -EINVAL with the resolver's reason in
 * *gai_why. Shared by the gRPC server and the /metrics responder.
 */
int grpc_tcp_listen(const char *host, const char *port, int backlog, int *port_out,
		    const char **gai_why);
int grpc_split_hostport(const char *in, char *buf, size_t buflen, const char **host,
			const char **port);

#endif
