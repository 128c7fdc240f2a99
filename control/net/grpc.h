/* SPDX-License-Identifier: Apache-2.0 */
/*
 * grpc.h - gRPC over HTTP/2 (nghttp2): the status codes, and the single-threaded client
 * the producer library and the tools use (target ing_net_client: this client, the
 * framing and TLS it shares with the server; no loop, no DPDK). The server is
 * grpc_server.h (target ing_net_server). No library threads.
 * Wire protocol: https://github.com/grpc/grpc/blob/master/doc/PROTOCOL-HTTP2.md
 */
#ifndef ING_CONTROL_GRPC_H
#define ING_CONTROL_GRPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* gRPC status codes */
enum ing_grpc_status {
	ING_GRPC_OK = 0,
	ING_GRPC_CANCELLED = 1,
	ING_GRPC_UNKNOWN = 2,
	ING_GRPC_INVALID_ARGUMENT = 3,
	ING_GRPC_DEADLINE_EXCEEDED = 4,
	ING_GRPC_NOT_FOUND = 5,
	ING_GRPC_ALREADY_EXISTS = 6,
	ING_GRPC_PERMISSION_DENIED = 7,
	ING_GRPC_RESOURCE_EXHAUSTED = 8,
	ING_GRPC_FAILED_PRECONDITION = 9,
	ING_GRPC_ABORTED = 10,
	ING_GRPC_OUT_OF_RANGE = 11,
	ING_GRPC_UNIMPLEMENTED = 12,
	ING_GRPC_INTERNAL = 13,
	ING_GRPC_UNAVAILABLE = 14,
	ING_GRPC_DATA_LOSS = 15,
	ING_GRPC_UNAUTHENTICATED = 16,
};

/* ================================================================ client */

/*
 * Single-threaded gRPC client on one HTTP/2 connection: the owner drives it with
 * ing_grpc_chan_poll(). Used by the producer library and tests.
 */
struct ing_grpc_chan;
struct ing_grpc_ccall;

struct ing_grpc_ccall_cbs {
	void (*on_message)(struct ing_grpc_ccall *cc, void *arg, const uint8_t *msg, size_t len);
	/* Call over: grpc-status (or UNAVAILABLE on connection loss) and grpc-message. */
	void (*on_close)(struct ing_grpc_ccall *cc, void *arg, int status, const char *message);
	void *arg;
};

struct ing_grpc_chan_opts {
	const char *target;        /* "host:port" or "[v6]:port" */
	int connect_timeout_ms;    /* default 5000 */
	uint32_t window_bytes;     /* default 16 MiB */
	uint32_t conn_window_bytes;/* default 64 MiB */
	size_t max_send_buffer;    /* bytes queued on the connection before send returns -ENOBUFS, default 32 MiB */
	bool tls;                  /* TLS + ALPN h2 (no verification unless tls_ca is set) */
	const char *tls_ca;        /* verify the server against it, and its name (SAN) */
	const char *tls_cert;      /* client certificate + key (PEM) for a node with mTLS */
	const char *tls_key;
	const char *tls_server_name; /* name to verify and send as SNI; NULL: the target's host */
	/* HTTP/2 PING every keepalive_ms (0: never); a PING not ACKed within twice that
	 * makes ing_grpc_chan_poll fail with -ETIMEDOUT (a hung or unreachable peer whose
	 * TCP connection stays open). */
	int keepalive_ms;
};
void ing_grpc_chan_opts_init(struct ing_grpc_chan_opts *o);
/* Connect (blocking, bounded by connect_timeout_ms) and exchange SETTINGS. NULL + err text,
 * errno set (ECONNREFUSED, ETIMEDOUT, EHOSTUNREACH for a name not resolved, EINVAL, EPROTO...). */
struct ing_grpc_chan *ing_grpc_chan_connect(const struct ing_grpc_chan_opts *o, char *err, size_t errlen);
void ing_grpc_chan_close(struct ing_grpc_chan *ch);  /* cancels open calls (on_close UNAVAILABLE) */
/* Start a call. md: NULL-terminated name,value,name,value... ; timeout_ms 0: none. */
struct ing_grpc_ccall *ing_grpc_chan_call(struct ing_grpc_chan *ch, const char *path,
					  const char *const *md, int timeout_ms,
					  const struct ing_grpc_ccall_cbs *cbs);
/* Queue a message (copied). end: half-close after it. 0, -ENOBUFS (poll, then retry), -EPIPE. */
int ing_grpc_ccall_send(struct ing_grpc_ccall *cc, const uint8_t *msg, size_t len, bool end);
/*
 * Queue a message made of a small head (encoded protobuf fields before the bytes field,
 * including that field's tag and length) and a large body sent from the caller's memory
 * without a copy. The caller keeps body valid until done(body_arg) is called.
 */
int ing_grpc_ccall_send_zc(struct ing_grpc_ccall *cc, const uint8_t *head, size_t head_len,
			   const uint8_t *body, size_t body_len, bool end,
			   void (*done)(void *body_arg), void *body_arg);
int ing_grpc_ccall_half_close(struct ing_grpc_ccall *cc);
void ing_grpc_ccall_cancel(struct ing_grpc_ccall *cc);   /* RST_STREAM(CANCEL); on_close(CANCELLED) */
/* Drive I/O for up to timeout_ms (0: non-blocking). Returns events handled, or -errno when
 * the connection is gone. Callbacks run inside. */
int ing_grpc_chan_poll(struct ing_grpc_chan *ch, int timeout_ms);
/* Bytes accepted by send but not yet written to the socket. */
size_t ing_grpc_chan_pending(const struct ing_grpc_chan *ch);
int ing_grpc_chan_fd(const struct ing_grpc_chan *ch);

/* Convenience: a blocking unary call. Returns the gRPC status; *resp malloc'ed (free it). */
int ing_grpc_unary(struct ing_grpc_chan *ch, const char *path, const char *const *md,
		   const uint8_t *req, size_t req_len, uint8_t **resp, size_t *resp_len,
		   int timeout_ms, char *errmsg, size_t errlen);

#endif
