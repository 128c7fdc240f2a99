/* SPDX-License-Identifier: Apache-2.0 */
/*
 * grpc_server.h - the gRPC server over HTTP/2 (nghttp2) on the control thread's event loop:
 * it dispatches calls to method handlers (target ing_net_server, with the loop and the
 * /metrics listener: the node's). No library threads.
 * Wire protocol: https://github.com/grpc/grpc/blob/master/doc/PROTOCOL-HTTP2.md
 *
 * Server behaviour owned by this layer (handlers never see it):
 *  - content-type application/grpc[+proto] required, else HTTP 415 + grpc-status INTERNAL;
 *    non-POST / non-gRPC requests get a plain HTTP error; garbage bytes get GOAWAY.
 *  - unknown path -> UNIMPLEMENTED (12); message over max_recv_msg -> RESOURCE_EXHAUSTED (8);
 *    compressed message (flag 1) -> UNIMPLEMENTED (no grpc-encoding supported).
 *  - grpc-timeout -> deadline timer -> DEADLINE_EXCEEDED (4) + RST_STREAM(CANCEL), handler's
 *    on_cancel is called; client RST_STREAM / connection loss -> on_cancel.
 *  - grpc.health.v1.Health/Check answered here (SERVING / NOT_SERVING via set_serving).
 *  - per-call outbound buffer bounded (max_send_buffer); per-stream and connection windows
 *    large (window_bytes); inbound flow control opened only as handlers consume
 *    (ing_grpc_call_pause/resume), which is how credits and a full pool push back.
 *  - ing_grpc_server_shutdown: GOAWAY, no new calls, existing calls may finish.
 */
#ifndef ING_CONTROL_GRPC_SERVER_H
#define ING_CONTROL_GRPC_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "control/net/grpc.h"
#include "control/net/loop.h"

struct ing_grpc_server;
struct ing_grpc_call;

/*
 * A method. Messages are delivered whole (on_message) unless the method sets the
 * streaming hooks (on_msg_begin/on_msg_data/on_msg_end), in which case the payload of
 * each gRPC message is handed over in the pieces it arrives in, without reassembly: the
 * fallback path parses FrameChunk as it streams and copies data straight into a slot.
 * All callbacks run on the loop thread. A callback may call ing_grpc_call_finish(); the
 * call object stays valid until on_close returns.
 */
struct ing_grpc_method {
	const char *path;     /* "/h3000.RDMASvc/PushFrames" */
	void *ctx;            /* handed to on_start */
	/* New call (headers received). Return ING_GRPC_OK to accept, or a status to reject. */
	int (*on_start)(struct ing_grpc_call *c, void *ctx);
	/* Whole message. Return 0, or a gRPC status to fail the call with (finish is implied). */
	int (*on_message)(struct ing_grpc_call *c, const uint8_t *msg, size_t len);
	int (*on_msg_begin)(struct ing_grpc_call *c, size_t len);
	int (*on_msg_data)(struct ing_grpc_call *c, const uint8_t *p, size_t n);
	int (*on_msg_end)(struct ing_grpc_call *c);
	/*
	 * Placement (optional, with the streaming hooks): payload bytes read from the socket
	 * straight into the handler's memory, so the kernel's copy is the only one.
	 * on_msg_sink returns where the next payload byte of the current message goes and
	 * sets *n to how many may go there in a row; or NULL, with *n the bytes ahead that
	 * will come through on_msg_data in any case (0: none known). It must not change the
	 * handler's state: the layer may ask and then not place. Bytes placed are reported,
	 * in order, by on_msg_placed(c, n) (n no more than the sink allowed), never also by
	 * on_msg_data. The layer places only whole runs of a DATA frame's data that nghttp2
	 * then accounts as received and consumed like any other (flow control unchanged).
	 */
	uint8_t *(*on_msg_sink)(struct ing_grpc_call *c, size_t *n);
	int (*on_msg_placed)(struct ing_grpc_call *c, size_t n);
	void (*on_half_close)(struct ing_grpc_call *c); /* client sent END_STREAM */
	/* Outbound buffer drained below the low-water mark after send returned -ENOBUFS. */
	void (*on_writable)(struct ing_grpc_call *c);
	/* The call ends: after finish was sent, or on cancel/deadline/connection loss
	 * (status tells which: OK... as finished, CANCELLED, DEADLINE_EXCEEDED, UNAVAILABLE).
	 * Release everything the handler attached to the call. */
	void (*on_close)(struct ing_grpc_call *c, int status);
};

struct ing_grpc_server_opts {
	const char *listen;        /* "127.0.0.1:50051", "[::]:50051", "0.0.0.0:0" (port 0: pick) */
	size_t max_recv_msg;       /* default 4 MiB + 64 KiB */
	size_t max_send_buffer;    /* per call, default 8 MiB */
	uint32_t window_bytes;     /* per stream initial window, default 16 MiB */
	uint32_t conn_window_bytes; /* default 64 MiB */
	uint32_t max_frame_size;   /* HTTP/2 SETTINGS_MAX_FRAME_SIZE we accept, default 1 MiB */
	uint32_t max_concurrent_streams; /* default 256 */
	unsigned max_connections;  /* default 256 */
	const char *tls_cert;      /* PEM; both set: TLS with ALPN h2, else cleartext h2c */
	const char *tls_key;
	bool no_listen;            /* fuzz targets: no socket, bytes come via grpc_server_feed */
	/* Placement (on_msg_sink): the fewest bytes worth a read into place (default 4 KiB;
	 * shorter runs take the copy path). Tests and fuzz targets set 1. */
	uint32_t place_min;
	/*
	 * Fair sharing under abuse (0: the default). A connection must finish its TLS handshake
	 * and send the HTTP/2 preface and SETTINGS within handshake_timeout_ms (5000); one
	 * with no open stream is closed (GOAWAY) after idle_timeout_ms (60000). One peer
	 * address holds at most max_conns_per_peer (32) connections. At max_connections the
	 * connection idle longest (no open stream; its peer's own first, when the peer is at
	 * its limit) is evicted for the newcomer; when none is idle, up to health_reserve (8)
	 * more connections are accepted that may carry only grpc.health.v1 Health/Check and
	 * are closed after handshake_timeout_ms, busy or not.
	 */
	unsigned handshake_timeout_ms;
	unsigned idle_timeout_ms;
	unsigned max_conns_per_peer;
	unsigned health_reserve;
	/* PEM CA bundle: with TLS, require a client certificate that chains to it; the
	 * certificate's subject becomes the call's identity (ing_grpc_call_identity). */
	const char *tls_client_ca;
};
void ing_grpc_server_opts_init(struct ing_grpc_server_opts *o);

/*
 * Bind and listen on addr as the server would, then close: 0 (also for port 0), or -errno
 * (-EADDRINUSE, -EACCES, -EADDRNOTAVAIL, -EINVAL) with one line in why that says the fix.
 * A start-up check before work that takes long (ingestd: before EAL and the pool).
 */
int ing_grpc_listen_check(const char *addr, char *why, size_t whylen);

struct ing_grpc_server *ing_grpc_server_create(struct ing_loop *loop,
					       const struct ing_grpc_server_opts *o,
					       const struct ing_grpc_method *methods, unsigned n);
void ing_grpc_server_destroy(struct ing_grpc_server *s);   /* closes every connection */
/*
 * Reload (ingestd's SIGHUP), for connections accepted from now on: a TLS server takes o's
 * certificate, key and client CA afresh from their files (*cert_changed: the certificate
 * differs from the one served so far; open connections keep theirs), and o's fair-sharing
 * limits (handshake_timeout_ms, idle_timeout_ms, max_connections, max_conns_per_peer,
 * health_reserve; 0: the default). Listening address, TLS on or off, windows and sizes stay
 * as created. 0, or -EINVAL with one line in why (a key that is not the certificate's, a
 * file that does not load) and nothing changed. The loop's thread.
 */
int ing_grpc_server_reload(struct ing_grpc_server *s, const struct ing_grpc_server_opts *o, char *why,
			   size_t whylen, bool *cert_changed);
/* Bound port (after listen on port 0). */
int ing_grpc_server_port(const struct ing_grpc_server *s);
/* GOAWAY to every connection, stop accepting; calls in progress may finish. */
void ing_grpc_server_shutdown(struct ing_grpc_server *s);
/* Health/Check answer for service "" and "h3000.RDMASvc". */
void ing_grpc_server_set_serving(struct ing_grpc_server *s, bool serving);
unsigned ing_grpc_server_ncalls(const struct ing_grpc_server *s);
/* Open connections (health-reserve ones included). NULL: 0. */
unsigned ing_grpc_server_nconns(const struct ing_grpc_server *s);
/* What the connection limits did since start (loop thread). */
struct ing_grpc_server_limits {
	uint64_t handshake_timeouts; /* closed: no (TLS handshake,) preface and SETTINGS in time */
	uint64_t idle_closed;        /* GOAWAY + close: no open stream for --idle-timeout */
	uint64_t evicted;            /* closed (idle longest) to make room for a newcomer */
	uint64_t refused;            /* newcomer refused: every connection busy */
	uint64_t health_reserve;     /* newcomer taken on the health reserve (Health/Check only) */
};
void ing_grpc_server_get_limits(const struct ing_grpc_server *s, struct ing_grpc_server_limits *l);
/* The receive path since start (loop thread): bytes read from clients into the server's
 * buffer (copied on to their destination) and straight into a handler's memory (placed,
 * see on_msg_sink), and the reads. */
struct ing_grpc_server_rx {
	uint64_t copied;
	uint64_t placed;
	uint64_t spilled;   /* of copied: read ahead into place on a wrong guess, copied back */
	uint64_t reads;
};
void ing_grpc_server_get_rx(const struct ing_grpc_server *s, struct ing_grpc_server_rx *rx);
/* True when no connection has output waiting for the socket (a stop waits for this, so
 * the last acks and trailers are out before the connections close). */
bool ing_grpc_server_flushed(const struct ing_grpc_server *s);

/* Queue one message (copied into the call's bounded outbound buffer). 0, -ENOBUFS when
 * over max_send_buffer (wait for on_writable), -EPIPE when the call is closed. */
int ing_grpc_call_send(struct ing_grpc_call *c, const uint8_t *msg, size_t len);
/* Trailers with grpc-status/grpc-message (message percent-encoded here). Idempotent. */
int ing_grpc_call_finish(struct ing_grpc_call *c, int status, const char *message);
/* Inbound backpressure: stop/restart giving the client flow-control window. */
void ing_grpc_call_pause(struct ing_grpc_call *c);
void ing_grpc_call_resume(struct ing_grpc_call *c);
/* Request metadata value (lower-case name), NULL if absent. */
const char *ing_grpc_call_header(const struct ing_grpc_call *c, const char *name);
void ing_grpc_call_set_user(struct ing_grpc_call *c, void *user);
void *ing_grpc_call_user(const struct ing_grpc_call *c);
const char *ing_grpc_call_peer(const struct ing_grpc_call *c);   /* "127.0.0.1:41234" */
const char *ing_grpc_call_peer_addr(const struct ing_grpc_call *c); /* "127.0.0.1" (no port) */
/* The verified client certificate's subject ("CN=producer-a,O=..."), NULL without mTLS. */
const char *ing_grpc_call_identity(const struct ing_grpc_call *c);
uint64_t ing_grpc_call_conn_id(const struct ing_grpc_call *c);   /* unique per connection */
uint64_t ing_grpc_call_id(const struct ing_grpc_call *c);        /* unique per process */
size_t ing_grpc_call_send_buffered(const struct ing_grpc_call *c);

#endif
