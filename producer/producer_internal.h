/* SPDX-License-Identifier: Apache-2.0 */
/*
 * producer_internal.h - inside libingest: the producer object, the in-flight table, the
 * ack queue, the wire encoders and the transport hooks. Not installed; nothing here is
 * exported from libingest.so (the library is built with -fvisibility=hidden and a version
 * script that exports only the ing_* symbols of include/ingest/producer.h).
 *
 * Shape of the producer (one thread drives everything through ing_producer_poll):
 *
 *   submit -> validate -> crc32c -> in-flight slot (table by frame id) -> send FIFO
 *   poll   -> ing_grpc_chan_poll (Ack callbacks: held per frame, then queued)
 *          -> xport->pump (continue sending the FIFO under flow control)
 *          -> xport->poll (transport's own events, e.g. rdma_cm) -> timeouts -> acks out
 *
 * Layers: api.c (the public functions) -> p->ops: the fleet router (fleet.c), which drives
 * one session (producer.c) per node through producer_session_*. One server is a fleet of
 * that one node (no Members, redialled with back-off after a lost connection): the frames
 * are kept above the session until DURABLE and re-sent by the same code in both modes.
 *
 * What is common to both transports lives in producer.c: Negotiate, the one long-lived
 * gRPC call (PushFrames or ControlStream, both return stream Ack), Ack decoding, the
 * in-flight table, credits, timeouts, the ack queue, the frame pool, stats, close.
 * What differs is behind struct producer_xport:
 *
 *   - fallback (producer.c, grpc_xport): call "/h3000.RDMASvc/PushFrames"; a frame is
 *     sent as FrameChunk messages whose data field is written from the caller's memory
 *     (ing_grpc_ccall_send_zc); sending may stop on -ENOBUFS and resumes in pump.
 *   - RDMA (producer/rdma_producer.c, defines `const struct producer_xport rdma_xport`):
 *     start() connects rdma_cm to NegotiateReply.rdmaAddr:rdmaPort with the session id
 *     in the private data and registers p->pool as one MR; call "ControlStream"; pump()
 *     queues one FrameMeta{addr, rkey, ...} (ing_grpc_ccall_send), check() returns
 *     -EFAULT when the frame is not inside p->pool; stop() disconnects and deregisters.
 *     producer/CMakeLists.txt defines ING_PRODUCER_RDMA when rdma_producer.c exists (a
 *     compile-time switch, not a weak symbol: a weak reference would not pull the object
 *     out of libingest_static.a). Without it, AUTO falls back to gRPC with the note
 *     "fallback: rdma is not built into libingest" and RDMA fails at connect.
 *
 * Memory contract towards the application (include/ingest/producer.h): every ack of a
 * frame is held back while the transport still references the frame's bytes
 * (f->busy_refs > 0, e.g. zero-copy bodies not yet written to the socket),
 * so the ack of stage recycle_on is never returned while the bytes are still in use. The
 * library itself is done with the bytes at the first ack either way; opts.recycle_on is the
 * application's choice, validated here and available to the transport (p->o.recycle_on).
 */
#ifndef ING_PRODUCER_INTERNAL_H
#define ING_PRODUCER_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ingest/producer.h"

struct ing_grpc_chan;
struct ing_grpc_ccall;
struct ing_producer;
struct wire_ack;

#define PRODUCER_DEFAULT_CONNECT_MS 5000
#define PRODUCER_DEFAULT_FRAME_TIMEOUT_MS 60000
#define PRODUCER_DEFAULT_POOL_FRAME (16ull << 20)
#define PRODUCER_DEFAULT_CHUNK (1u << 20)
#define PRODUCER_DEFAULT_CREDITS 64u
#define PRODUCER_DEFAULT_MAX_FRAME (64ull << 20)
#define PRODUCER_MAX_CREDITS 4096u
#define PRODUCER_AUTH_TOKEN_MAX 256u   /* ingestd's ING_AUTH_TOKEN_MAX */
/* FrameChunk head: fields 1..5 plus the tag and length of field 15 (see chunk_head_encode). */
#define PRODUCER_CHUNK_HEAD_MAX (3 * ING_ID_MAX + 128)
#define PRODUCER_PATH_PUSH "/h3000.RDMASvc/PushFrames"
#define PRODUCER_PATH_CONTROL "/h3000.RDMASvc/ControlStream"
#define PRODUCER_PATH_NEGOTIATE "/h3000.RDMASvc/Negotiate"
#define PRODUCER_SESSION_HEADER "h3000-session-id"
#define PRODUCER_MAX_RAILS 8            /* rails of one node a producer uses */
#define PRODUCER_DEVLIST_MAX 256        /* opts.rdma_device: "mlx5_0,mlx5_1" */

/* Ack codes are the public enum ing_error (ingest/ingest.h), numbered as h3000.ErrorCode. */

/* A queued ack; terminal = the last one of its frame (its credit returns on delivery). */
struct pack_entry {
	struct ing_ack a;
	bool terminal;
};

/* One frame in flight: a slot of p->frames, found by id through p->ix_*. */
struct pframe {
	char id[ING_ID_MAX + 1];
	char wafer[ING_ID_MAX + 1];   /* "default" for an empty wafer id, as the node files it */
	uint64_t key;           /* ing_id_pair_hash(wafer, id) */
	const uint8_t *data;
	uint64_t len;
	uint64_t sent;          /* bytes handed to the transport (fallback: chunk offset) */
	int64_t timestamp;
	uint32_t crc;
	void *user;
	uint64_t t_submit_ns;
	uint64_t deadline_ns;
	uint32_t busy_refs;     /* transport references to data (zero-copy bodies in the socket queue) */
	bool used;
	bool queued;            /* in the send FIFO */
	bool received;          /* RECEIVED ack seen */
	bool done;              /* the terminal ack is decided (maybe still held) */
	bool node_failed;       /* the node refused it: what is left of it is not sent */
	unsigned nheld;         /* acks waiting until busy_refs == 0 and !queued */
	struct pack_entry held[2];
	struct ing_producer *owner;
	void *xport_priv;       /* transport's per-frame data (e.g. RDMA: the pool slot) */
};

/* The registered frame pool behind ing_frame_alloc: one mapping, fixed-size slots. */
struct ppool {
	uint8_t *base;
	size_t len;             /* mapping length (nslots * slot_size) */
	uint64_t slot_size;
	unsigned nslots;
	unsigned nfree;
	uint32_t *free_stack;   /* slot indices */
	uint8_t *in_use;        /* per slot, to reject double or foreign frees */
};

/*
 * What the fleet router lends the node sessions it drives (producer_session_connect_shared):
 * one frame pool for all of them (the application's frames live in it, whichever node a
 * frame goes to), the transports' state that goes with that pool (RDMA: the pool registered
 * once per device, shared by every session on it), and how a session reacts to a lost
 * transport. Owned by the router; xport->shared_release frees the transport's part.
 */
struct rdma_reg;
struct rdma_held;
struct producer_shared {
	struct ppool *pool;
	struct rdma_reg *rdma;  /* rdma_producer.c: the pool's registrations, one per device */
	struct rdma_held *rdma_held; /* rdma_producer.c: connections whose end waits for a link */
	struct rdma_part_wr *rdma_parts; /* rdma_producer.c: striped push parts' WRITEs in flight
					  * (RDMA_PARTS_MAX, allocated on first use) */
	bool fail_fast;         /* RDMA connection lost: the session breaks (no reconnect); the
				 * router re-sends its frames to the next node */
};

/*
 * Transport hooks. All run on the producer's thread. Return 0 or -errno; on -errno with a
 * text, write it into err (start only).
 */
struct producer_xport {
	const char *name;       /* "rdma" / "grpc" */
	enum ing_transport kind;
	const char *call_path;  /* the long-lived stream call that returns Acks */
	/* Local precondition before offering the transport in Negotiate (device present, ...).
	 * 0: can offer; -errno and a reason in why (goes into the transport note). NULL: always. */
	int (*probe)(struct ing_producer *p, char *why, size_t whylen);
	/* After Negotiate chose this transport, before the stream call is opened. */
	int (*start)(struct ing_producer *p, char *err, size_t errlen);
	/* Submit-time check of a validated descriptor (e.g. RDMA: memory inside the pool). */
	int (*check)(struct ing_producer *p, const struct ing_frame_desc *d);
	/* Push as much of the send FIFO as flow control allows. 0 (idle or blocked) or -EPIPE. */
	int (*pump)(struct ing_producer *p);
	/* Transport events besides the gRPC channel (rdma_cm); 0 or -errno (connection lost). */
	int (*poll)(struct ing_producer *p);
	/* Tear down (tolerant of a half-built start). */
	void (*stop)(struct ing_producer *p);
	/* Push: the node granted frame f a slot (Ack stage GRANTED). NULL: not a push transport. */
	void (*grant)(struct ing_producer *p, struct pframe *f, const struct wire_ack *w);
	/* The router is done with its shared state (after its last session): free this
	 * transport's part of it. NULL: nothing to free. */
	void (*shared_release)(struct producer_shared *sh);
	/* Striping: the rkey of its registration of the frame pool while its connection can
	 * READ (pull): 0, else -ENOTCONN. NULL: the transport moves no part. */
	int (*read_rkey)(const struct ing_producer *p, uint32_t *rkey);
	/* Striped push (docs/PUSH.md "Striped push"): 0 while its connection can take a
	 * part's RDMA WRITE, else -ENOTCONN; part_write posts one: bytes [off, off + w's
	 * grant_length) of home's frame f, into the grant w names (on this session's QP).
	 * NULL: the transport moves no part. */
	int (*push_ready)(const struct ing_producer *p);
	int (*part_write)(struct ing_producer *p, struct ing_producer *home, struct pframe *f,
			  const struct wire_ack *w);
};

extern const struct producer_xport grpc_xport;
#ifdef ING_PRODUCER_RDMA
/* Defined by producer/rdma_producer.c. */
extern const struct producer_xport rdma_xport;
#define PRODUCER_RDMA_XPORT (&rdma_xport)
#else
#define PRODUCER_RDMA_XPORT ((const struct producer_xport *)NULL)
#endif

/*
 * The layer behind a handle (api.c dispatches every public call through it): one node's
 * session (producer.c: producer_session_ops) or the fleet router (fleet.c), which drives
 * one session per node with the producer_session_* functions. Arguments come normalised
 * (the library's own struct sizes; acks at the caller's stride ack_size).
 */
struct producer_ops {
	const char *name;
	int (*submit)(struct ing_producer *p, const struct ing_frame_desc *d);
	int (*poll)(struct ing_producer *p, struct ing_ack *acks, unsigned max, size_t ack_size,
		    int timeout_ms);
	void (*close)(struct ing_producer *p, int timeout_ms);   /* frees p */
	unsigned (*in_flight)(const struct ing_producer *p);
	/* add the layer's own counters to st (st holds p->st and in_flight); NULL: none */
	void (*stats)(const struct ing_producer *p, struct ing_producer_stats *st);
	/* the transport the application sees (ing_producer_transport); NULL: p->xport's */
	enum ing_transport (*transport)(const struct ing_producer *p);
};

/* One RDMA rail of the node as its NegotiateReply lists it (RailInfo). */
struct prail {
	char dev[64];           /* the node's device: what NegotiateRequest.rail names */
	char addr[64];
	uint32_t port;
	int numa;
	bool up;
	char why[96];           /* why it is down */
	unsigned index;         /* RailInfo.index: the node's number of the rail */
};

/* Striping (common/stripe.h): a rail of the node a frame's part can move over now. */
struct stripe_via_p {
	uint8_t rail;           /* the node's rail index */
	uint64_t session;       /* the producer's session on that rail */
	uint32_t rkey;          /* its device's registration of the frame pool */
};

struct ing_producer {
	const struct producer_ops *ops;   /* the layer: session or fleet router */
	struct ing_producer_opts o;
	char server[256];
	char client_name[128];
	char rdma_device[PRODUCER_DEVLIST_MAX];   /* the local devices RDMA may use ("a,b"; "" any) */
	char rail_ask[64];              /* NegotiateRequest.rail: the node's rail asked ("" any) */

	struct ing_grpc_chan *ch;
	struct ing_grpc_ccall *call;
	const struct producer_xport *xport;
	void *xport_priv;               /* transport's per-producer state */
	bool call_closed;               /* on_close of the stream call ran */
	bool closing;                   /* ing_producer_close runs: the call's end is expected */
	bool broken;                    /* connection or call gone: submit -EPIPE */
	int broken_err;
	char broken_msg[160];

	/* negotiated */
	uint64_t session_id;
	uint64_t max_frame;
	unsigned credits;
	uint32_t chunk_size;
	uint32_t version;
	char rdma_addr[64];
	uint32_t rdma_port;
	char rail[64];                  /* NegotiateReply.rail: the node's rail of this session ("":
					 * the node did not say: it has no rails or ignores them) */
	char local_dev[64];             /* RDMA: the local device the connection goes through */
	struct prail rails[PRODUCER_MAX_RAILS];   /* NegotiateReply.rails (the first 8) */
	unsigned nrails;
	uint64_t stripe_min;            /* NegotiateReply.stripeMin: frames of this size or more
					 * may go striped over the node's rails (0: never) */
	struct fleet *router;           /* the router whose endpoint this session is (NULL: a
					 * session on its own): the other rails' sessions */
	bool push;                      /* TRANSPORT_RDMA_WRITE negotiated */
	bool push_mw;                   /* the node's grants are memory windows */
	char note[256];                 /* why this transport */

	/* in flight: credits slots, id -> slot by open addressing (linear probe, backward shift) */
	struct pframe *frames;
	uint32_t *free_slots;
	unsigned nfree;
	unsigned nused;
	uint64_t *ix_key;
	int32_t *ix_val;                /* slot index, -1 empty */
	unsigned ix_mask;

	/* send FIFO of slot indices (a frame enters once, leaves when fully handed over) */
	uint32_t *sendq;
	unsigned sq_cap, sq_head, sq_len;

	/* acks ready for the application (<= 2 per credit) */
	struct pack_entry *ackq;
	unsigned aq_cap, aq_head, aq_len;
	unsigned undelivered_terminal;  /* frames done but their last ack not yet returned */

	uint64_t next_timeout_check_ns;
	uint64_t unknown_acks;

	struct ppool pool;              /* its own frame pool (ing_frame_alloc) */
	struct ppool *pl;               /* the pool its frames are in: &pool, or the router's */
	struct producer_shared *shared;   /* a router's node session: what it lends; NULL */
	struct ing_producer_stats st;

	/* fleet (NegotiateReply 20/21): this node's id and state, "" / 0 when not said */
	char node_id[ING_ID_MAX + 1];
	int node_state;                 /* enum ing_member_state */
	/* fleet mode (opts.servers): the router's state (producer/fleet.c); NULL for a session */
	struct fleet *fleet;
};

/* ---- striping (fleet.c; rdma_producer.c encodes the parts) ---- */

/* The rails of p's node (p's own first) whose session has its RDMA READ connection up
 * now: at most max into v; 0 when p is not a router's endpoint or its own rail is not
 * usable. Router thread. */
unsigned fleet_stripe_vias(struct ing_producer *p, struct stripe_via_p *v, unsigned max);
/* Striped push: the session of p's router on the node's rail `rail` (p's node), up; NULL. */
struct ing_producer *fleet_rail_session(struct ing_producer *p, unsigned rail);

/* ---- shared by the transports (producer.c) ---- */

/* The frame (wafer, id) in flight, or NULL. wafer NULL: the first frame named id (acks of
 * a node that does not send Ack.waferId). */
struct pframe *producer_frame_find(struct ing_producer *p, const char *wafer, const char *id);
static inline uint32_t producer_frame_slot(const struct ing_producer *p, const struct pframe *f)
{
	return (uint32_t)(f - p->frames);
}
/* The frame at the head of the send FIFO, NULL when empty; pop when fully handed over. */
struct pframe *producer_sendq_head(struct ing_producer *p);
void producer_sendq_pop(struct ing_producer *p);
/* A transport reference on a frame's bytes dropped (e.g. a zero-copy body was written). */
void producer_frame_unref(struct ing_producer *p, struct pframe *f);
/* Fail one frame locally (its final ack: code, msg); the others go on. */
void producer_frame_fail(struct ing_producer *p, struct pframe *f, int code, int retryable,
			 const char *msg);
/* Mark the connection broken: pending frames fail with code/msg, submit returns -EPIPE. */
void producer_set_broken(struct ing_producer *p, int err, const char *msg);

/* The producer's defaults into o (the library's own struct size). */
void producer_opts_defaults(struct ing_producer_opts *o);
/* Frame pool behind ing_frame_alloc: 0 or -errno. */
int producer_pool_create(struct ppool *pl, unsigned nslots, uint64_t slot_size);
/* Free without waiting: channel closed at once (fleet: a failed node's session). NULL ok. */
void producer_destroy(struct ing_producer *p);

/* ---- the session layer (producer.c): one node; its ops table, and its functions for the
 * router above it (fleet.c), which calls them directly, never the public API ---- */

extern const struct producer_ops producer_session_ops;
/* opts (validated by api.c, defaults applied, servers unset). NULL with err set and errno
 * the reason's code (ing_producer_open's). */
struct ing_producer *producer_session_connect(const struct ing_producer_opts *o, char *err,
					      size_t errlen);
/* The same for a router's node session: frames in sh->pool (o->pool_frames is ignored),
 * RDMA registered through sh; sh outlives the session. rail: the node's rail to ask for
 * (NegotiateRequest.rail, RailInfo.device), NULL or "": the node picks. */
struct ing_producer *producer_session_connect_shared(const struct ing_producer_opts *o,
						     struct producer_shared *sh, const char *rail,
						     char *err, size_t errlen);
/* dev is one of the comma-separated names of list ("" or NULL list: any device). */
bool producer_devlist_has(const char *list, const char *dev);
int producer_session_submit(struct ing_producer *p, const struct ing_frame_desc *d);
int producer_session_poll(struct ing_producer *p, struct ing_ack *acks, unsigned max,
			  size_t ack_size, int timeout_ms);
void producer_session_close(struct ing_producer *p, int timeout_ms);
unsigned producer_session_in_flight(const struct ing_producer *p);

/* ---- the fleet router (producer/fleet.c) ---- */

#define PRODUCER_PATH_MEMBERS "/h3000.RDMASvc/Members"
/* opts (validated by api.c, defaults applied): with servers set the fleet, else one server
 * (o->server) as a fleet of that one node, redialled after a lost connection within
 * o->reconnect_timeout_ms (fleet.c: "pinned"). NULL with err set and errno the code. */
struct ing_producer *fleet_connect(const struct ing_producer_opts *o, char *err, size_t errlen);
/* ing_producer_wake behind the handle */
void fleet_wake(struct ing_producer *p);
/* HRW over node ids (lengths given): the score, and the winner of a comparison. */
uint64_t fleet_hrw_score(const char *node, size_t nlen, const char *wafer, size_t wlen);
bool fleet_hrw_better(uint64_t score_a, const char *id_a, uint64_t score_b, const char *id_b);
/* Rails: of the n endpoints, the one with ok[j] and the fewest bytes in flight load[j]; of
 * equals, the first at or after `from` (cyclically: the caller passes the one after its last
 * pick, so at light load, when every rail has nothing in flight, the rails take turns);
 * n when none is ok. */
unsigned fleet_rail_pick(const uint64_t *load, const bool *ok, unsigned n, unsigned from);

/* ---- wire encoding (producer.c; unit-tested in tests/unit/test_producer_encode.c) ---- */

struct chunk_meta {
	uint64_t length;
	const char *wafer_id;
	int64_t timestamp;
	uint32_t crc32c;
	bool has_crc;
};
/* protobuf wire encoding used by both transports: a varint; a varint field (tag + value,
 * nothing for 0 as proto3 does). Return the bytes written. */
size_t pb_put_varint(uint8_t *b, uint64_t v);
size_t pb_put_uint_field(uint8_t *b, unsigned field, uint64_t v);
/* tag + length + bytes of a string field; nothing for "" (proto3). */
size_t pb_put_string_field(uint8_t *b, unsigned field, const char *s, size_t len);
/*
 * Encode the head of one FrameChunk message: frameId(1), offset(2), last(3), meta(4, only
 * when meta != NULL: FrameMeta{frameId, length, waferId, timestamp, crc32c, hasCrc32c,
 * sessionId}), sessionId(5), then the tag and length varint of data(15) for data_len
 * bytes that follow. Zero-valued scalars are omitted as proto3 serializers do.
 * Returns the head length, or 0 if cap is too small.
 */
size_t chunk_head_encode(uint8_t *buf, size_t cap, const char *frame_id, uint64_t offset, bool last,
			 const struct chunk_meta *meta, uint64_t session_id, uint64_t data_len);
/*
 * Decode an h3000.Ack without allocating (unknown fields skipped; msg truncated to fit).
 * stage/code are the raw enum values. 0 or -EINVAL (malformed).
 */
struct wire_ack {
	char frame_id[ING_ID_MAX + 1];
	char wafer_id[ING_ID_MAX + 1];  /* Ack.waferId (10); "" when the node did not send it */
	uint64_t latency_ns;
	uint64_t stage_ns[ING_NODE_STAGES];  /* Ack.stage*Ns (11..16) */
	bool ok, retryable, duplicate;
	uint32_t stage, code, crc32c;
	/* stage GRANTED (push): Ack.grant* (20..24) */
	uint32_t grant_id, grant_rkey, grant_qp;
	uint64_t grant_addr, grant_length;
	/* a part of a striped push frame: Ack.grantStriped, grantPart, grantOffset, grantRail
	 * (30..33): write [grant_offset, + grant_length) of the frame over that rail */
	bool grant_striped;
	uint32_t grant_part, grant_rail;
	uint64_t grant_offset;
	char msg[512];
};
int ack_decode(const uint8_t *buf, size_t len, struct wire_ack *a);
/* The id rule of common/ident.h (NULL: false). */
bool producer_id_ok(const char *id);

#endif
