/* SPDX-License-Identifier: Apache-2.0 */
/*
 * svc_internal.h - private pieces of the ingest service (control/svc*.c): the incremental
 * FrameChunk parser (unit-tested on its own) and the shared service state.
 * Everything here runs on the control thread.
 */
#ifndef ING_CONTROL_SVC_INTERNAL_H
#define ING_CONTROL_SVC_INTERNAL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ================================================================ FrameChunk parser */

#define SVC_META_MAX 4096u          /* largest FrameMeta accepted inside a FrameChunk */

/* FrameChunk field numbers (proto/h3000.proto). */
enum {
	CP_F_FRAME_ID = 1,
	CP_F_OFFSET = 2,
	CP_F_LAST = 3,
	CP_F_META = 4,
	CP_F_SESSION = 5,
	CP_F_DATA = 15,
};

struct chunk_parser;

/*
 * Events for the bytes field `data`, which is never buffered by the parser.
 * data_begin: the field's length is known (the fields before it are in the parser).
 * data: a piece of it, at offset off within the field. Return 0, or a negative value that
 * chunk_parser_feed() hands back to its caller unchanged (the parse stops there).
 */
struct chunk_parser_cbs {
	int (*data_begin)(void *arg, struct chunk_parser *p, uint64_t len);
	int (*data)(void *arg, struct chunk_parser *p, uint64_t off, const uint8_t *d, size_t n);
};

/* frameId bytes kept: one more than an id may have, so an over-long id stays over-long
 * (it is never answered under its 256-byte prefix, which may be another frame's id) */
#define CP_ID_MAX 257u

struct chunk_parser {
	/* --- decoded fields of the current message (proto3: absent == 0 / "") --- */
	char frame_id[CP_ID_MAX + 1];   /* NUL-terminated copy of the first CP_ID_MAX bytes */
	size_t id_len;          /* bytes of frameId on the wire (repeated: concatenated) */
	bool id_oversize;       /* frameId longer than CP_ID_MAX: frame_id[] is cut */
	uint64_t offset;
	uint64_t session_id;
	bool last;
	uint32_t seen;          /* bit (1u << field) for every known field met */
	bool ordered;           /* known fields so far came in ascending field-number order */
	bool late_fields;       /* a field other than `last` came after data */
	bool meta_oversize;     /* meta exceeded SVC_META_MAX: meta[] is incomplete */
	size_t meta_len;        /* repeated meta fields are concatenated (protobuf merge) */
	uint64_t data_len;      /* length of the data field (0 if absent) */
	bool has_data;
	const char *err;        /* static reason after -EBADMSG */
	/* --- machine --- */
	uint64_t msg_left;      /* bytes of this message not yet fed */
	int state;
	uint64_t acc;           /* varint being read */
	unsigned vbytes;
	uint32_t field;
	int wtype;
	uint64_t left;          /* body bytes left in the current field */
	uint64_t body_off;      /* bytes of the current body consumed */
	uint32_t last_field;
	const struct chunk_parser_cbs *cbs;
	void *arg;
	uint8_t meta[SVC_META_MAX];
};

void chunk_parser_init(struct chunk_parser *p, const struct chunk_parser_cbs *cbs, void *arg);
/* Start a message of msg_len bytes (the gRPC message length). Clears the decoded fields. */
void chunk_parser_begin(struct chunk_parser *p, uint64_t msg_len);
/*
 * Feed the next n bytes of the message (any split). 0; -EBADMSG when malformed (p->err
 * says why: bad varint, wrong wire type, field longer than the message, more bytes than
 * the message); or a callback's negative return.
 */
int chunk_parser_feed(struct chunk_parser *p, const uint8_t *d, size_t n);
/* Message over: 0 when it ended on a field boundary with every byte fed, else -EBADMSG. */
int chunk_parser_end(struct chunk_parser *p);
/*
 * Placement (the gRPC layer reads the data field's bytes straight to their destination):
 * chunk_parser_data_run: inside the data field's body, the bytes of it still to come, and
 * in *off how many came before; else 0. chunk_parser_skip_data: n of them (n <= the run)
 * are in place already: advance over them without the data callback.
 */
uint64_t chunk_parser_data_run(const struct chunk_parser *p, uint64_t *off);
void chunk_parser_skip_data(struct chunk_parser *p, uint64_t n);

/* ================================================================ service state */

#include "common/hist.h"
#include "common/log.h"
#include "control/admit.h"
#include "control/grpc/grpc.h"
#include "control/grpc/loop.h"
#include "control/service.h"
#include "dataplane/dataplane.h"
#include "control/xport.h"

#define SVC_ARENA 12288u         /* protobuf-c bump arena per call (FrameMeta <= SVC_META_MAX) */
#define SVC_ARENA_OVF_MAX (256u << 10) /* beyond it: a FrameMeta of <= SVC_META_MAX bytes with
				* many unknown fields (protobuf-c keeps each one) needs up to ~100 KiB */
#define SVC_ACKQ_MAX 4096u       /* acks a call may hold while its client is not reading */
#define SVC_ACK_MAX_ENC 1200u    /* encoded Ack upper bound (ids <= 256, msg < ING_FRAME_MSG_MAX) */
#define SVC_REFUSED_MAX 16u      /* refused PushFrames frames whose later chunks are dropped */

/*
 * One peer address (the client's IP, no port): what it holds, for the per-peer limits, and
 * its failed authentication attempts. Entries live in a fixed table (no allocation after
 * create); one with nothing pointing at it and no failures to remember is reused.
 */
struct svc_peer {
	char ip[48];              /* "" free */
	unsigned refs;            /* calls + sessions + slots pointing here */
	unsigned sessions;        /* sessions it owns */
	unsigned slots;           /* pool slots its frames hold */
	uint64_t fail_tat_ns;     /* failed-auth bucket: its next free moment (GCRA) */
	uint64_t locked_until_ns; /* refused until then after too many failures */
	unsigned strikes;         /* failures while over the burst: back-off 1 s << strikes */
};

struct svc_session {
	uint64_t id;
	bool in_use;
	bool implicit;           /* made for a stream that named no session */
	uint8_t transport;       /* enum ing_xport chosen at Negotiate */
	unsigned credits;        /* frames admitted and not yet DURABLE-acked, at most */
	unsigned inflight;
	unsigned streams;        /* open calls bound to it */
	uint64_t max_frame;
	uint64_t idle_since_ns;  /* when streams and inflight both reached 0 */
	char client[64];
	bool authed;             /* created by a Negotiate that carried the node's authToken */
	/* who may use it: the connection that negotiated it, or with mTLS its identity */
	struct svc_peer *peer;
	struct svc_call *icall;  /* implicit: the one stream it was made for */
	uint64_t owner_conn;
	char owner_ident[256];   /* "" without a client certificate */
	bool ack_received;       /* Negotiate asked for RECEIVED acks too (two-stage) */
	bool rdma_seen;          /* its RDMA connection was up once (a second one: reconnect) */
	bool push;               /* Negotiate picked RDMA_WRITE: every FrameMeta asks for a grant */
};

enum svc_fstate { FE_FREE = 0, FE_FILLING, FE_RETRY, FE_PERSISTING };

/* Control's record of one admitted frame (one per pool slot, never moves). */
struct svc_frame {
	struct ing_frame *f;     /* NULL when free */
	const struct xport_ops *xp;   /* the transport moving its bytes */
	struct svc_call *call;   /* NULL once the call that sent it is gone */
	struct svc_session *sess;
	struct svc_peer *peer;   /* the peer whose slot count it is in */
	struct ing_svc *svc;
	uint64_t id_hash;        /* ing_id_hash of f->frame_id: the table's key */
	uint64_t gen;            /* admission number (f->gen) */
	uint64_t length;         /* declared (immutable after admission) */
	uint8_t state;           /* enum svc_fstate */
	uint32_t idx;
	uint32_t next_free;
	struct ing_timer timer;  /* completion / stall deadline while FILLING */
	uint64_t deadline_ns;    /* admission + frame timeout */
	uint64_t progress_ns;    /* last time bytes arrived (or admission) */
};

/* The node's stages of a durable frame (Ack.stage*Ns, StatsReply.stageLatency). */
enum svc_stage { SVC_ST_RECEIVED, SVC_ST_CRC, SVC_ST_WRITTEN, SVC_ST_SYNCED, SVC_ST_CATALOGUED,
		 SVC_ST_ACK, SVC_NSTAGES };
#define SVC_ST_TOTAL SVC_NSTAGES   /* index of the admitted -> ack histogram */
extern const char *const svc_stage_name[SVC_NSTAGES + 1];

/* An Ack that did not fit into the call's send buffer yet. */
struct svc_ack {
	char frame_id[ING_ID_MAX + 1];   /* empty when the id sent was not UTF-8 or too long */
	char wafer_id[ING_ID_MAX + 1];   /* empty when not known yet (refused early) */
	uint64_t latency_ns;
	uint64_t stage_ns[SVC_NSTAGES];  /* DURABLE acks: Ack.stage*Ns, enum svc_stage order */
	uint32_t crc32c;
	uint8_t stage;
	uint8_t code;
	bool ok, retryable, duplicate;
	/* stage GRANTED (push) only */
	uint32_t grant_id, grant_rkey, grant_qp;
	uint64_t grant_addr, grant_length;
	char msg[ING_FRAME_MSG_MAX];
};

#define SVC_PAUSE_BLOCKED 1u     /* a frame waits for a slot or a credit */
#define SVC_PAUSE_SEND 2u        /* the client is not reading its acks */

/*
 * One streaming call (PushFrames, ControlStream). The transport that owns the call embeds
 * this at the start of its own per-call state (svc_call_new(..., size)): the core sees
 * only what is here.
 */
struct svc_call {
	struct ing_svc *svc;
	struct ing_grpc_call *call;
	const struct xport_ops *xp;   /* the transport whose stream this is */
	struct svc_session *sess;
	struct svc_peer *peer;   /* the client's address; NULL if the peer table was full */
	bool evicted;            /* its implicit session was given to another client */
	uint64_t id;
	bool half_closed;
	bool finished;           /* trailers queued: nothing more is sent */
	bool want_finish;        /* finish from the loop (kick) */
	bool blocked;            /* the transport holds input back (a frame waits for admission) */
	int fin_status;
	const char *fin_msg;
	unsigned pause_why;
	unsigned open_frames;    /* admitted on this call, not yet DURABLE-acked or failed */
	struct svc_call *next, *prev;
	/* acks waiting for send room (ring, allocated on first -ENOBUFS) */
	struct svc_ack *aq;
	unsigned aq_head, aq_len, aq_cap;
	int err_status;          /* call-level failure found inside a callback */
	char err_msg[160];
	/* protobuf-c arena, and what did not fit in it (svc.c: arena_alloc) */
	size_t arena_used;
	void *arena_ovf;         /* malloc'ed blocks, chained through their first word */
	size_t arena_ovf_bytes;
	_Alignas(16) uint8_t arena[SVC_ARENA];
};

/* --- Prometheus counters and histograms (control/svc_metrics.c), control thread only --- */
enum svc_result { SVC_R_DURABLE = 0, SVC_R_DUPLICATE, SVC_R_FAILED, SVC_R_REFUSED, SVC_R_N };
enum svc_mstage { SVC_MS_QUEUE = 0, SVC_MS_WRITE, SVC_MS_SYNC, SVC_MS_COMMIT, SVC_MS_ACK, SVC_MS_N };
#define SVC_X_N 2                /* transports: [0] gRPC stream, [1] RDMA READ */
#define SVC_M_LCORES 16          /* == ING_RDMA_MAX_LCORES */
struct svc_metrics {
	uint64_t frames[SVC_X_N][SVC_R_N], bytes[SVC_X_N][SVC_R_N];
	uint64_t rx_frames[SVC_X_N], rx_bytes[SVC_X_N];
	struct ing_phist ack_received, ack_durable;   /* from admission */
	struct ing_phist stage[SVC_MS_N];             /* inside the node, after RECEIVED */
	uint64_t rdma_reconnects;
	uint64_t busy_prev_ns[SVC_M_LCORES], busy_t_prev;  /* lcore busy ratio sampling */
	double busy_ratio[SVC_M_LCORES];
};

/*
 * --- what on-call reads (control/svc_ops.c), control thread only. Failures by error code,
 * and per-peer series with bounded cardinality: a fixed table of SVC_OPS_PEERS client
 * addresses, taken by the first addresses that send frames; an address that finds the
 * table full is counted under peer="other" until an entry has been idle for
 * SVC_OPS_PEER_IDLE_NS, which it then takes (the idle one's series end: their rate was 0).
 */
#define SVC_OPS_PEERS 16
#define SVC_OPS_PEER_IDLE_NS (600ull * 1000000000ull)
#define SVC_OPS_CODES 14                /* h3000.ErrorCode 0..13 */
struct svc_peer_stats {
	char ip[48];              /* "" free; "other" for the overflow entry */
	uint64_t durable;         /* frames stored (duplicates included) */
	uint64_t failed;          /* frames failed or refused */
	uint64_t bytes;           /* bytes of the frames stored */
	uint64_t last_ns;         /* last frame (idle eviction) */
};
struct svc_ops {
	uint64_t failures[SVC_OPS_CODES];   /* by code; [0] unused */
	struct svc_peer_stats peer[SVC_OPS_PEERS];
	struct svc_peer_stats other;
	uint64_t peer_takeovers;  /* idle entries given to a new address */
	ing_svc_node_info_fn info_fn;       /* node-level facts (ing_svc_set_node_info) */
	void *info_arg;
};

struct ing_svc {
	struct ing_loop *loop;
	struct ing_pool *pool;
	struct ing_persist *persist;
	struct ing_fring *acks;
	struct ing_grpc_server *srv;
	struct ing_svc_opts o;
	struct ing_grpc_method methods[6];
	uint64_t max_frame;
	bool stopping;
	bool acks_fd_added;
	uint64_t t_start_ns;
	/* admitted frames */
	struct svc_frame *fr;
	uint32_t nfr, nfr_used, free_head;
	uint32_t *ht;            /* open addressing: frame id -> 1 + index into fr */
	uint32_t ht_mask;
	/* complete frames the persistence ring had no room for (FIFO of fr indices) */
	uint32_t *retry;
	uint32_t retry_head, retry_len;
	struct ing_timer retry_timer;
	uint64_t persisting;     /* frames in FE_RETRY or FE_PERSISTING */
	/* sessions */
	struct svc_session *sess;
	unsigned nsess;
	struct ing_timer sweep_timer;
	/* calls */
	struct svc_call *calls;
	unsigned ncalls;
	struct admit adm;        /* credits and slots, for every transport (admit.h) */
	struct ing_timer kick_timer;
	bool in_kick, kick_again;
	unsigned want_finish;    /* calls with want_finish set */
	/* counters */
	uint64_t c_received, c_durable, c_failed, c_dup, c_refused;
	uint64_t c_bytes_rx, c_bytes_durable, c_orphan_acks, c_fallback;
	struct ing_hist lat;
	struct ing_hist stage_lat[SVC_NSTAGES + 1];   /* per stage, then the total */
	char note[192];
	/* --- RDMA data path (control/svc_rdma.c) --- */
	struct ing_rdma *rdma;   /* NULL: no RDMA engine */
	uint64_t c_rdma_errors;  /* dataplane transfers that failed (frames back while filling) */
	uint64_t admissions;     /* frames admitted so far (ing_frame.gen) */
	uint64_t c_ctl_parked;   /* ControlStream FrameMetas that had to wait */
	/* --- shared-secret authentication (opts.auth_token; never logged) --- */
	bool auth;               /* a token is required */
	size_t auth_len;
	char auth_token[ING_AUTH_TOKEN_MAX + 1];
	uint64_t c_auth_refused; /* calls refused UNAUTHENTICATED */
	/* --- per-peer limits and failed-auth back-off (svc.c) --- */
	struct svc_peer *peers;
	unsigned npeers;
	unsigned max_slots_per_peer;
	uint64_t c_evicted, c_stalled, c_auth_locked;
	char sess_why[160];      /* why svc_session_new returned NULL */
	struct svc_metrics m;
	struct ing_fleet *fleet;     /* node identity and fleet export (NULL: none) */
	struct svc_ops ops;          /* failures by code, per-peer series (svc_ops.c) */
	struct ing_tier *tier;       /* object store tier (NULL: none) */
	uint64_t c_tier_refused;     /* frames refused NO_SPACE at the high-water mark */
	bool tier_refusing;          /* the last new frame was refused at the mark */
	uint64_t inflight_bytes;     /* declared bytes of the frames admitted, not finished */
	bool tier_fd_added;          /* the tier's read doorbell is on the loop */
	uint8_t *get_buf;            /* one FrameData being packed (GetFrame) */
	uint64_t c_get_frames, c_get_bytes, c_get_failed;  /* GetFrame calls and bytes sent */
};

/* svc.c: shared helpers */
void svc_kick(struct ing_svc *s);
struct svc_session *svc_session_find(struct ing_svc *s, uint64_t id);
/* NULL: table full or the peer at its limit, with nothing idle to evict (s->sess_why). */
struct svc_session *svc_session_new(struct ing_svc *s, struct svc_peer *peer);
struct svc_session *svc_session_implicit(struct ing_svc *s, struct svc_peer *peer);
/* Find or take the entry of a peer address (a ref is taken); NULL when the table is full. */
struct svc_peer *svc_peer_get(struct ing_svc *s, const char *ip);
void svc_peer_put(struct ing_svc *s, struct svc_peer *p);
/*
 * Failed-authentication back-off. svc_auth_locked: true (and why) while the peer is refused
 * after too many failures; nothing it sends is checked then. svc_auth_failed counts one
 * failure; svc_auth_succeeded clears the back-off.
 */
bool svc_auth_locked(struct ing_svc *s, struct svc_peer *p, char *why, size_t whylen);
void svc_auth_failed(struct ing_svc *s, struct svc_peer *p);
void svc_auth_succeeded(struct svc_peer *p);
int svc_call_bind_header(struct svc_call *pc);
int svc_call_bind_session(struct svc_call *pc, uint64_t sid);
/* True when t[0..n) is exactly the node's token (no shorter, no longer: a NUL inside is a
 * mismatch); the time depends on the lengths only. False when authentication is off. */
bool svc_auth_token_ok(const struct ing_svc *s, const char *t, size_t n);
/* A call of transport xp; size: the transport's per-call struct, which starts with a
 * struct svc_call (zeroed). NULL + log when out of memory. */
struct svc_call *svc_call_new(struct ing_svc *s, struct ing_grpc_call *c,
			      const struct xport_ops *xp, size_t size);
void svc_call_free(struct svc_call *pc);
void svc_call_pause(struct svc_call *pc, unsigned why);
void svc_call_unpause(struct svc_call *pc, unsigned why);
void svc_call_check_done(struct svc_call *pc);
void svc_call_finish_later(struct svc_call *pc, int status, const char *msg);
void svc_call_flush(struct svc_call *pc);
/* ing_grpc_method callbacks shared by the streaming methods (ControlStream, PushFrames):
 * flush held acks when the client reads again; free the call state when the call ends. */
void svc_on_writable(struct ing_grpc_call *c);
void svc_on_close(struct ing_grpc_call *c, int status);
int svc_send_ack(struct svc_call *pc, const struct svc_ack *a);
/* Set a->frame_id to id and a->wafer_id to wafer (NULL: ""); each left empty when it
 * is not UTF-8 (an Ack's strings must be) or longer than ING_ID_MAX (its prefix could be
 * another frame's id). */
void svc_ack_set_id(struct svc_ack *a, const char *wafer, const char *id);
/* A frame refused before admission: its one answer. wafer: the validated wafer it names
 * (NULL: not known, or not valid), echoed in Ack.waferId as in every other Ack. */
void svc_nack(struct svc_call *pc, const char *wafer, const char *frame_id, int code,
	      bool retryable, const char *fmt, ...) __attribute__((format(printf, 6, 7)));
void svc_vnack(struct svc_call *pc, const char *wafer, const char *frame_id, int code,
	       bool retryable, const char *fmt, va_list ap) __attribute__((format(printf, 6, 0)));
/* The final answer for every frame is the DURABLE ack or a failure; sessions that asked
 * for it (ack_received) get an Ack{RECEIVED} first, sent here. */
void svc_ack_received(struct svc_frame *e, uint64_t latency_ns);
/* True when a top-level string field f1 or f2 of the protobuf msg holds a NUL byte. */
bool svc_pb_string_has_nul(const uint8_t *msg, size_t len, uint32_t f1, uint32_t f2);
/* The admitted frame (wafer, frame), or NULL. */
struct svc_frame *svc_frame_find(struct ing_svc *s, const char *wafer_id, const char *frame_id);
/* The frame frame_id admitted on call pc (PushFrames continuation chunks), or NULL. */
struct svc_frame *svc_frame_find_call(struct ing_svc *s, const struct svc_call *pc,
				      const char *frame_id);
/* (svc_frame_admit, _complete, _received, _fail, _by_cookie: control/xport.h) */
void svc_frame_release(struct svc_frame *e);
void *svc_arena_reset(struct svc_call *pc);
struct ProtobufCAllocator;
void svc_arena_allocator(struct svc_call *pc, struct ProtobufCAllocator *a);
/*
 * Validate a FrameMeta: returns an ing_err and writes a reason naming the frame and the
 * rule. frame_id is the id the frame goes by (the chunk's; id_len its wire length, which
 * may exceed what was kept), meta_frame_id the meta's own (NULL: the same). An empty
 * wafer is ING_DEFAULT_WAFER (*wafer_out is set to the wafer to file under).
 */
int svc_meta_check(struct ing_svc *s, struct svc_session *ss, const char *frame_id,
		   size_t id_len, const char *meta_frame_id, uint64_t length, const char *wafer,
		   const char **wafer_out, char *why, size_t whylen);

/* svc_metrics.c: count a frame's outcome (transport: enum ing_xport) and its latencies */
void svc_metrics_result(struct ing_svc *s, uint8_t transport, enum svc_result r, uint64_t bytes);
void svc_metrics_received(struct ing_svc *s, uint8_t transport, uint64_t bytes, uint64_t latency_ns);
/* a frame back from persistence, ok or not; now: when control handles its ack */
void svc_metrics_durable(struct ing_svc *s, const struct ing_frame *f, uint64_t now);

/*
 * svc_ops.c: one frame's outcome for the on-call counters: code 0 stored (bytes), else
 * failed or refused with that h3000.ErrorCode; peer NULL when the peer table was full.
 */
void svc_ops_frame(struct ing_svc *s, const struct svc_peer *peer, int code, uint64_t bytes);
/* Log contexts (common/log.h: JSON fields peer, session, wafer, frame). The strings stay
 * owned by the frame or call; use the result at once. */
struct ing_log_ctx svc_log_frame(const struct svc_frame *e);
struct ing_log_ctx svc_log_call(const struct svc_call *pc);
struct ing_log_ctx svc_log_session(const struct svc_session *ss);
/* /metrics families: failures by code, connections, per-peer series */
struct ing_mtext;
void svc_ops_metrics(struct ing_svc *s, struct ing_mtext *t);
/* StatsReply fields 70-79 (storage static: control thread, used before the reply returns) */
struct H3000__StatsReply;
void svc_ops_stats(struct ing_svc *s, struct H3000__StatsReply *r);

/* svc_stream.c (transport xport_grpc_stream) */
extern const struct ing_grpc_method svc_stream_method;

/* svc_unary.c */
extern const struct ing_grpc_method svc_negotiate_method;
extern const struct ing_grpc_method svc_stats_method;

/* svc_fleet.c: rpc Members, the fleet fields of NegotiateReply/StatsReply, /metrics */
extern const struct ing_grpc_method svc_members_method;
struct H3000__NegotiateReply;
struct H3000__StatsReply;
struct ing_mtext;
void svc_fleet_negotiate(struct ing_svc *s, struct H3000__NegotiateReply *rep);
void svc_fleet_stats(struct ing_svc *s, struct H3000__StatsReply *r);
void svc_fleet_metrics(struct ing_svc *s, struct ing_mtext *t);

/* svc_tier.c: the high-water refusal, the tier's StatsReply field (60) and /metrics, and
 * rpc GetFrame (its reads are done by the tier thread) */
extern const struct ing_grpc_method svc_getframe_method;
/* Finish the GetFrame calls' reads the tier thread gave back; free them (ing_svc_destroy). */
void svc_tier_destroy(struct ing_svc *s);
/*
 * With authentication on, rpc needs "authorization: Bearer <token>" (Stats, GetFrame): 0 to go
 * on, or the status the call was finished with (UNAUTHENTICATED, or RESOURCE_EXHAUSTED while
 * the address is locked out after failures).
 */
int svc_require_bearer(struct ing_svc *s, struct ing_grpc_call *c, const char *rpc);
#include "dataplane/tier/tier.h"
struct H3000__TierStats;
/* True (counted, why set) when a new frame of length bytes must be refused NO_SPACE at the
 * high-water mark (the frames admitted and not yet durable count as used). */
bool svc_tier_refusing(struct ing_svc *s, uint64_t length, char *why, size_t whylen);
/* StatsReply.tier = pb, filled from st (both the caller's, alive until the reply is packed) */
void svc_tier_stats(struct ing_svc *s, struct H3000__StatsReply *r, struct H3000__TierStats *pb,
		    struct ing_tier_stats *st);
void svc_tier_metrics(struct ing_svc *s, struct ing_mtext *t);

/*
 * svc_ctl.c: ControlStream, the descriptor stream of the RDMA transports (a FrameMeta per
 * frame). Its halves of their ops tables: a parked FrameMeta's admission request may go
 * on; the call is over.
 */
extern const struct ing_grpc_method svc_ctl_method;
void svc_ctl_progress(struct admit_req *r, bool expired);
void svc_ctl_conn_lost(struct svc_call *pc);

/* svc_rdma.c: transport xport_rdma_read (ops table, engine callbacks) */

struct ing_rdma_notice;
/* svc_rdma_write.c: transport xport_rdma_write; the engine's GRANTED notice (Ack GRANTED). */
void svc_rdma_write_granted(void *svc, const struct ing_rdma_notice *n);

#endif
