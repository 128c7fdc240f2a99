/* SPDX-License-Identifier: Apache-2.0 */
/*
 * h3000 ingest - producer library (libingest.so.1). C ABI: opaque handles and plain structs,
 * no DPDK or verbs types. Version, error codes and logging: <ingest/ingest.h>.
 *
 * ABI (stable within major version 1): every struct that crosses the API travels with the
 * size the caller was compiled with, so structs can grow at their end in later 1.x
 * versions. The library reads and writes only that many bytes of the caller's struct
 * (an older, smaller struct is never overrun), fills defaults for fields the caller does
 * not know, and refuses (-EOPNOTSUPP / NULL) a non-zero field it does not know itself.
 * The size is passed for you: ing_producer_opts_init(), ing_producer_submit(),
 * ing_producer_poll() and ing_producer_get_stats() are macros over the *_sz functions
 * that add sizeof of your struct (as rdma-core's ibv_query_device_ex does). A field's
 * zero value always means "default". Acks are returned in a caller-declared array whose
 * element size is that sizeof (a burst into a stack array, no call per field).
 *
 * Threading: a struct ing_producer is used by one thread at a time (it is driven by
 * ing_producer_poll; nothing runs in the background). Use one producer per thread.
 *
 * Lifetime of frame memory: the bytes of a submitted frame must stay unchanged until the
 * frame's ACK of stage opts.recycle_on (RECEIVED by default) has been returned by
 * ing_producer_poll, or the frame failed. On RDMA the ingest node reads them in place
 * (zero copies); on the gRPC fallback they are written to the socket from the same memory.
 */
#ifndef INGEST_PRODUCER_H
#define INGEST_PRODUCER_H

#include <stddef.h>
#include <stdint.h>

#include <ingest/ingest.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Frame and wafer ids: 1 to ING_ID_MAX bytes of UTF-8 without control characters. */
#define ING_ID_MAX 256

enum ing_transport {
	ING_TRANSPORT_AUTO = 0,  /* RDMA when both sides can, else the gRPC fallback (logged) */
	ING_TRANSPORT_RDMA = 1,  /* RDMA or fail */
	ING_TRANSPORT_GRPC = 2,  /* always the gRPC fallback */
};

/* How the bytes move on RDMA (opts.rdma_mode; docs/PUSH.md). */
enum ing_rdma_mode {
	ING_RDMA_MODE_DEFAULT = 0, /* pull (RDMA READ by the node): see README for why */
	ING_RDMA_MODE_READ = 1,    /* pull: the node READs from the registered frame pool */
	ING_RDMA_MODE_WRITE = 2,   /* push: the node grants a slot, the library RDMA WRITEs the
	                              frame into it (pull when the node has push off) */
};

enum ing_ack_stage {
	ING_ACK_NONE = 0,        /* failure reported before any stage */
	ING_ACK_RECEIVED = 1,    /* all bytes are in the ingest node */
	ING_ACK_DURABLE = 2,     /* stored, synced, catalogued */
};

struct ing_producer_opts {
	size_t opts_size;            /* sizeof(struct ing_producer_opts) of the caller: set by
	                                ing_producer_opts_init (or by hand) */
	const char *server;          /* "host:port" of ingestd's gRPC listener (required) */
	enum ing_transport transport;/* default AUTO */
	unsigned credits;            /* wanted frames in flight; 0: the server's default */
	uint64_t max_frame_size;     /* wanted maximum; 0: the server's default */
	int connect_timeout_ms;      /* default 5000 */
	int frame_timeout_ms;        /* a frame not DURABLE after this fails locally; default 60000 */
	enum ing_ack_stage recycle_on; /* default ING_ACK_RECEIVED */
	const char *client_name;     /* shown in ingestd's logs */
	/* registered frame pool for ing_frame_alloc (RDMA: one MR over all of it) */
	unsigned pool_frames;        /* default 0: no pool; ing_frame_alloc then fails */
	uint64_t pool_frame_size;    /* default 16 MiB */
	const char *rdma_device;     /* the local RDMA devices to use, "mlx5_0" or (1.5) a list
	                                "mlx5_0,mlx5_1"; each of the node's rails is reached
	                                through the local device that routes to it, if listed.
	                                NULL: every local device */
	uint32_t chunk_size;         /* fallback chunk data bytes; 0: the server's maxChunkSize */
	const char *auth_token;      /* shared secret of an ingestd run with --auth-token-file,
	                                sent as NegotiateRequest.authToken (at most 256 chars);
	                                NULL: none. Read during ing_producer_connect only, not
	                                kept, never logged */
	/* TLS (ingestd --tls-cert/--tls-key): on when tls_ca is set. The node's certificate
	   must chain to tls_ca and name the host of `server` (or tls_server_name); ALPN h2.
	   tls_cert/tls_key (PEM): the client certificate for a node run with --tls-client-ca.
	   Paths are read during ing_producer_connect only. */
	const char *tls_ca;
	const char *tls_cert;
	const char *tls_key;
	const char *tls_server_name; /* NULL: the host part of `server` */
	enum ing_rdma_mode rdma_mode;/* default ING_RDMA_MODE_DEFAULT (pull) */
	/* 1.2: fleet mode (docs/FLEET.md) */
	/* "host:port,host:port,...": several ingest nodes. The producer learns the live
	   membership from any of them (rpc Members), sends each wafer to its owner by HRW
	   hashing of the wafer id over the node ids (ing_producer_hrw_score), keeps every
	   frame until DURABLE (recycle_on is DURABLE in fleet mode, whatever was asked) and
	   re-sends the frames of a failed node to the wafer's next node. `server` may then be
	   NULL. Each node gets `transport` and `rdma_mode` as asked: RDMA where the node
	   offers it (frames from ing_frame_alloc: one registered pool for every node), with
	   AUTO the gRPC stream where it does not. NULL: one node, `server`. */
	const char *servers;
	int ack_deadline_ms;         /* fleet: a node that holds a frame this long without its
	                                DURABLE ack is failed over (hung); default 10000 */
	int keepalive_ms;            /* HTTP/2 PING period; a PING not answered within twice
	                                this breaks the connection. Default: 1000 in fleet mode,
	                                off (0) with one server; negative: off */
	int node_cooldown_ms;        /* fleet: a failed node is not used (nor redialled) for
	                                this long; default 5000 */
	int membership_refresh_ms;   /* fleet: ask the nodes for Members this often; default 2000 */
	/* 1.4 */
	/* One server: how long a lost connection (the node restarted, upgraded, its socket
	   reset or closed) is tried again, from the loss, with back-off (100 ms doubling up
	   to 2 s between dials). Meanwhile every frame that is not DURABLE is kept and, once
	   connected again, re-sent in submit order (a frame the node had stored comes back
	   `duplicate`); submit goes on taking frames up to the credits. The frames whose
	   bytes were handed back at a RECEIVED ack (recycle_on RECEIVED) cannot be re-sent:
	   those fail (ING_ERR_TRANSFER, retryable), so set recycle_on DURABLE to have every
	   frame re-sent. Past the limit every frame kept fails the same way and the
	   producer is broken (submit -EPIPE, poll the dial's -errno). The same mechanism
	   as fleet mode (one node, no Members); stats count the losses as failovers and
	   the re-sends as rerouted. A re-sent frame the node still holds from the lost
	   connection is sent again after a back-off until that earlier send has ended (then
	   stored once, DURABLE once). The node's answer about one frame (ERROR_TRANSFER not
	   retryable: the hardware refused its READ or WRITE; DEADLINE, BUSY, NO_SPACE, IO) is
	   no lost connection: that frame fails alone, nothing else is re-sent. Default
	   30000; negative: off (1.3: a lost connection fails the frames in flight at once).
	   Fleet mode: unused (node_cooldown_ms). */
	int reconnect_timeout_ms;
	/* 1.6 */
	/* Striping (RDMA READ, a node with several rails): a frame of at least this many bytes
	   moves in parts over every rail connected at once (one frame, one CRC, one Ack), when
	   the node takes striped frames too (its own threshold, NegotiateReply.stripeMin: a
	   frame must reach both). 0: the default, 8 MiB; ING_STRIPE_OFF: never striped. */
	uint64_t stripe_min;
	/* ABI: new fields go last; zero must mean their default. */
};

/* opts.stripe_min: no frame of this producer is striped (1.6) */
#define ING_STRIPE_OFF UINT64_MAX

/* The ingest node's stages of a frame, each timed from the end of the one before. */
enum ing_node_stage {
	ING_NODE_RECEIVED = 0,   /* admitted -> all bytes in the node's slot */
	ING_NODE_CRC,            /* -> crc32c checked (includes the persistence queue) */
	ING_NODE_WRITTEN,        /* -> written to the file */
	ING_NODE_SYNCED,         /* -> fdatasync'ed */
	ING_NODE_CATALOGUED,     /* -> directory fsync + catalog commit: DURABLE */
	ING_NODE_ACK,            /* -> the DURABLE ack handed to the stream */
	ING_NODE_STAGES
};

struct ing_ack {
	char frame_id[ING_ID_MAX + 1];  /* the frame's id (NUL-terminated copy) */
	char wafer_id[ING_ID_MAX + 1];  /* its wafer as the node filed it ("default" for empty) */
	enum ing_ack_stage stage;    /* stage reached (NONE with ok=0 for early failures) */
	int ok;
	int code;                    /* enum ing_error (ing_strerror); 0 when ok */
	int retryable;
	int duplicate;               /* already stored with the same crc: not rewritten */
	uint32_t crc32c;             /* what the node computed (0 if unknown) */
	uint64_t latency_ns;         /* submit -> this ack, producer clock (includes queueing
	                                behind the frames in flight before it) */
	uint64_t node_latency_ns;    /* the node's own time from admitting the frame to this
	                                stage (Ack.latencyNs); 0 when the node did not say */
	void *user;                  /* from struct ing_frame_desc */
	char msg[512];
	/* DURABLE acks: the node's time per stage (Ack.stage*Ns), in enum ing_node_stage
	   order; all 0 when the node did not say */
	uint64_t node_stage_ns[ING_NODE_STAGES];
	/* 1.2 */
	char node_id[ING_ID_MAX + 1];   /* the node that sent this ack (fleet mode; with one
	                                   server: its NegotiateReply.nodeId, or "") */
	unsigned resends;            /* fleet: times the frame was re-sent to another node;
	                                one server: re-sent after a reconnect */
	/* 1.3 */
	int stored;                  /* 1 only when the node holds the frame: its final ack,
	                                DURABLE and ok (a duplicate of a stored frame too).
	                                0 on every failure and on RECEIVED: what to check
	                                before dropping the frame's bytes for good */
	/* ABI: new fields go last. */
};

struct ing_frame_desc {
	const char *frame_id;        /* 1..ING_ID_MAX bytes of UTF-8, no control characters;
	                                (wafer_id, frame_id) identifies the frame: the node
	                                refuses its reuse with other bytes */
	const char *wafer_id;        /* same rule; NULL or "": the node's wafer "default" */
	int64_t timestamp;           /* producer clock, any unit, stored as sent; 0: now (ns) */
	const void *data;
	uint64_t length;             /* 1 .. ing_producer_max_frame() */
	uint32_t crc32c;             /* of data; computed by the library when has_crc == 0 */
	int has_crc;
	void *user;                  /* returned in every ing_ack of this frame */
	/* ABI: new fields go last; zero must mean their default. */
};

struct ing_producer_stats {
	uint64_t submitted, received, durable, failed, duplicates, bytes;
	unsigned in_flight;
	/* 1.2: fleet mode; with one server (1.4) the reconnects: rerouted counts the frames
	   re-sent after a lost connection, failovers the connections lost */
	uint64_t rerouted;           /* frame re-sends to another node after a node failed */
	uint64_t failovers;          /* times a node was declared failed (connection reset,
	                                GOAWAY, missed PING, ack deadline) */
	uint64_t resent_after_received; /* re-sent frames the failed node had RECEIVED: it may
	                                   have stored them too (same bytes, same crc32c) */
	uint64_t late_acks;          /* acks for a frame no longer placed on that node: ignored */
	uint64_t first_failover_to_durable_ns; /* first failover -> first DURABLE ack of a
	                                          re-sent frame (0: none yet) */
	unsigned nodes;              /* nodes known */
	unsigned nodes_up;           /* of those, connected and taking new wafers */
	/* ABI: new fields go last. */
};

/* A fleet member as the producer sees it (ing_producer_fleet_node). */
enum ing_member_state {
	ING_MEMBER_UNKNOWN = 0,
	ING_MEMBER_ACTIVE = 1,       /* takes new wafers */
	ING_MEMBER_DRAINING = 2,     /* finishes what it has, gets no new wafers */
	ING_MEMBER_DOWN = 3,         /* failed (cooling down) or reported down */
};

struct ing_fleet_node {
	char node_id[ING_ID_MAX + 1];
	char address[256];
	enum ing_member_state state;
	int connected;
	uint64_t durable;            /* DURABLE acks this node sent to this producer */
	uint64_t rerouted_away;      /* frames taken from it when it failed */
	uint64_t failovers;          /* times it was declared failed */
	/* ABI: new fields go last. */
};

/* 1.5: an RDMA rail the producer uses (ing_producer_rail): one (node, rail) pair. */
enum ing_rail_state {
	ING_RAIL_UP = 1,             /* connected, carrying frames */
	ING_RAIL_DOWN = 2,           /* lost or not connected yet: redialled with back-off */
	ING_RAIL_UNUSED = 3,         /* not reachable from the devices of opts.rdma_device, or
	                                the node does not honour a rail asked for (why) */
};

struct ing_rail {
	char node_id[ING_ID_MAX + 1];   /* the node (one server: its NegotiateReply.nodeId) */
	char device[64];             /* the node's rail (its RDMA device); "" when the node lists
	                                no rails (one RDMA connection) */
	char local_device[64];       /* the local device that reaches it ("" before it did) */
	char address[80];            /* the rail's rdma_cm "address:port" ("" while down) */
	enum ing_rail_state state;
	uint64_t frames;             /* DURABLE acks of frames sent over this rail */
	uint64_t bytes;              /* ... their bytes */
	uint64_t in_flight_bytes;    /* bytes of the frames on it now (what the spread weighs) */
	uint64_t moved_away;         /* frames in flight on it moved to another rail (or node)
	                                when it went down */
	uint64_t downs;              /* times it went down */
	uint64_t down_ms;            /* DOWN: since when, in ms (0 otherwise) */
	char why[160];               /* DOWN or UNUSED: why */
	/* ABI: new fields go last. */
};

struct ing_producer;

/*
 * Defaults into the first opts_size bytes of o (the rest of a larger, newer struct is
 * zeroed) and o->opts_size = opts_size. Use the macro: ing_producer_opts_init(&o).
 */
ING_API void ing_producer_opts_init_sz(struct ing_producer_opts *o, size_t opts_size);
#define ing_producer_opts_init(o) ing_producer_opts_init_sz((o), sizeof(*(o)))
/*
 * Connect, Negotiate, set up RDMA when chosen. Reads o->opts_size bytes of o. NULL with a
 * reason in err on failure (opts not initialised, an option this library does not know,
 * ...); a node that refuses the auth token (UNAUTHENTICATED) puts its own message there.
 */
ING_API struct ing_producer *ing_producer_connect(const struct ing_producer_opts *o, char *err,
						 size_t errlen);
/*
 * ing_producer_connect with the reason as a code as well as text: 0 with *out set, or a
 * negative errno with *out NULL and the reason in err. The codes (ing_error_retryable()
 * says which may pass on a later attempt):
 *   -EINVAL      a bad or missing option, an address that is not host:port, TLS files
 *   -EOPNOTSUPP  an option this library does not know, or a transport it cannot do
 *   -ECONNREFUSED, -ETIMEDOUT, -EHOSTUNREACH, -ENETUNREACH, -ECONNRESET, -EPIPE
 *                the node not reached or the connection lost while connecting
 *   -EACCES      the node refused the auth token (UNAUTHENTICATED)
 *   -EPROTO      the peer is not an ingest node of this protocol, a TLS handshake failed
 *   -ENOMEM      out of memory (the frame pool)
 * Reads o->opts_size bytes of o. Any thread (the producer then belongs to it).
 */
ING_API int ing_producer_open(struct ing_producer **out, const struct ing_producer_opts *o,
			      char *err, size_t errlen);
/*
 * Make an ing_producer_poll that waits (now, or the next one to start) return at once:
 * with the acks it has, else 0. The one call that may run on another thread while the
 * producer's thread uses p (a binding's submitter wakes its pump); async-signal-safe
 * (one write(2) to an eventfd). p must stay open during the call.
 */
ING_API void ing_producer_wake(struct ing_producer *p);
/* Wait up to timeout_ms for frames in flight, then close. NULL ok. */
ING_API void ing_producer_close(struct ing_producer *p, int timeout_ms);

ING_API enum ing_transport ing_producer_transport(const struct ing_producer *p); /* RDMA or GRPC */
ING_API const char *ing_producer_transport_note(const struct ing_producer *p);  /* why */
ING_API uint64_t ing_producer_session_id(const struct ing_producer *p);
ING_API uint64_t ing_producer_max_frame(const struct ing_producer *p);
ING_API unsigned ing_producer_credits(const struct ing_producer *p);
ING_API unsigned ing_producer_in_flight(const struct ing_producer *p);
/* Counters into the first stats_size bytes of s. Use the macro: ing_producer_get_stats(p, &s). */
ING_API void ing_producer_get_stats_sz(const struct ing_producer *p, struct ing_producer_stats *s,
				       size_t stats_size);
#define ing_producer_get_stats(p, s) ing_producer_get_stats_sz((p), (s), sizeof(*(s)))

/*
 * Submit one frame. 0 on success; -EAGAIN when no credit is free (poll, then retry);
 * -EINVAL for a bad descriptor (length 0 or too big, a frame or wafer id outside the
 * rule, the same (wafer, frame) already in flight); -EPIPE when the
 * connection is gone; -EFAULT when on RDMA the memory is not from ing_frame_alloc;
 * -EOPNOTSUPP when d sets a field this library does not know. Reads desc_size bytes of d.
 * Use the macro: ing_producer_submit(p, &d).
 */
ING_API int ing_producer_submit_sz(struct ing_producer *p, const struct ing_frame_desc *d,
				   size_t desc_size);
#define ing_producer_submit(p, d) ing_producer_submit_sz((p), (d), sizeof(*(d)))
/*
 * Drive I/O for up to timeout_ms; up to max ACKs into acks, an array of elements of
 * ack_size bytes (the caller's sizeof(struct ing_ack)): only those bytes of each element
 * are written, fields this library does not know are zeroed. Returns the count, or -errno
 * if the connection broke (-EINVAL for an ack_size below the 1.0 struct's).
 * Use the macro: ing_producer_poll(p, acks, max, timeout_ms).
 */
ING_API int ing_producer_poll_sz(struct ing_producer *p, struct ing_ack *acks, unsigned max,
				 size_t ack_size, int timeout_ms);
#define ing_producer_poll(p, acks, max, timeout_ms) \
	ing_producer_poll_sz((p), (acks), (max), sizeof(*(acks)), (timeout_ms))

/* A frame buffer from the registered pool (len <= pool_frame_size), NULL when none free. */
ING_API void *ing_frame_alloc(struct ing_producer *p, size_t len);
ING_API void ing_frame_free(struct ing_producer *p, void *buf);

/*
 * Fleet mode: node i (0 .. nodes-1, see ing_producer_stats.nodes) into the first
 * node_size bytes of n. 0, or -ENOENT past the last node (or not in fleet mode).
 * Use the macro: ing_producer_fleet_node(p, i, &n).
 */
ING_API int ing_producer_fleet_node_sz(const struct ing_producer *p, unsigned i,
				       struct ing_fleet_node *n, size_t node_size);
#define ing_producer_fleet_node(p, i, n) ing_producer_fleet_node_sz((p), (i), (n), sizeof(*(n)))

/*
 * 1.5: rail i (0 ..) into the first rail_size bytes of r: every RDMA rail of every node the
 * producer uses, node by node. A node that lists several rails (NegotiateReply.rails) is
 * reached over each rail a local device of opts.rdma_device reaches, one connection each;
 * frames go to the rail with the fewest bytes in flight; a rail lost moves its frames in
 * flight to the node's other rails and is redialled with back-off. 0, or -ENOENT past the
 * last rail (a producer on the gRPC stream has none). Use the macro:
 * ing_producer_rail(p, i, &r).
 */
ING_API int ing_producer_rail_sz(const struct ing_producer *p, unsigned i, struct ing_rail *r,
				 size_t rail_size);
#define ing_producer_rail(p, i, r) ing_producer_rail_sz((p), (i), (r), sizeof(*(r)))

/*
 * Rendezvous (HRW) placement, the same in every language (docs/FLEET.md): the score of
 * node_id for wafer_id is the first 8 bytes, big-endian, of SHA-256(node_id || 0x00 ||
 * wafer_id) over the UTF-8 bytes; NULL or "" wafer_id is "default". The owner of a wafer
 * is the node with the highest score, equal scores going to the bytewise smaller id.
 * Any thread.
 */
ING_API uint64_t ing_producer_hrw_score(const char *node_id, const char *wafer_id);
/* Index of the owner of wafer_id among node_ids[0..n), or -EINVAL (n == 0, a NULL id). */
ING_API int ing_producer_hrw_owner(const char *const *node_ids, unsigned n, const char *wafer_id);

/* CRC-32C (Castagnoli) as the ingest node checks it; chainable (pass 0 to start). */
ING_API uint32_t ing_crc32c(uint32_t crc, const void *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif
