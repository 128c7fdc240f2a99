/* SPDX-License-Identifier: Apache-2.0 */
/*
 * svc_internal.h - what the service core's files share (svc.c, svc_unary.c, svc_metrics.c,
 * svc_fleet.c, svc_ops.c, svc_engine.c, svc_tier.c): the service struct, sessions, peers, frame records,
 * held acks. Transports (svc_stream.c, svc_ctl.c, svc_rdma*.c) and admission (admit.c)
 * never include it: they know the core through control/xport.h and control/admit.h.
 * Everything here runs on the control thread.
 */
#ifndef ING_CONTROL_SVC_INTERNAL_H
#define ING_CONTROL_SVC_INTERNAL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ================================================================ service state */

#include "common/hist.h"
#include "common/log.h"
#include "control/admit.h"
#include "control/grpc/grpc.h"
#include "control/grpc/loop.h"
#include "control/service.h"
#include "dataplane/dataplane.h"
#include "control/xport.h"

#define SVC_ARENA_OVF_MAX (256u << 10) /* beyond it: a FrameMeta of <= SVC_META_MAX bytes with
				* many unknown fields (protobuf-c keeps each one) needs up to ~100 KiB */
#define SVC_ACKQ_MAX 4096u       /* acks a call may hold while its client is not reading */
#define SVC_ACK_MAX_ENC 1200u    /* encoded Ack upper bound (ids <= 256, msg < ING_FRAME_MSG_MAX) */

/*
 * One peer address (the client's IP, no port): what it holds, for the per-peer limits, and
 * its failed authentication attempts. Entries live in a fixed table (no allocation after
 * create); one with nothing pointing at it and no failures to remember is reused.
 */
struct svc_peer {
	char ip[48];              /* "" free */
	unsigned refs;            /* calls + sessions + slots pointing here */
	unsigned sessions;        /* sessions it owns */
	struct admit_share share; /* pool slots its frames hold (admission counts them) */
	uint64_t fail_tat_ns;     /* failed-auth bucket: its next free moment (GCRA) */
	uint64_t locked_until_ns; /* refused until then after too many failures */
	unsigned strikes;         /* failures while over the burst: back-off 1 s << strikes */
};

struct svc_session {
	uint64_t id;
	bool in_use;
	bool implicit;           /* made for a stream that named no session */
	uint8_t transport;       /* enum ing_xport chosen at Negotiate */
	struct admit_credit cr;  /* credits: frames admitted and not yet DURABLE-acked, at most;
				  * inflight: so many now (admission counts them) */
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
	uint64_t length;         /* declared (immutable after admission) */
	uint8_t state;           /* enum svc_fstate */
	uint32_t idx;            /* == the frame's f->index while it holds one */
	struct ing_timer timer;  /* completion / stall deadline while FILLING */
	uint64_t deadline_ns;    /* admission + frame timeout */
	uint64_t progress_ns;    /* last time bytes arrived (or admission) */
};

/* The node's stages of a durable frame (Ack.stage*Ns, StatsReply.stageLatency). */
enum svc_stage { SVC_ST_RECEIVED, SVC_ST_CRC, SVC_ST_WRITTEN, SVC_ST_SYNCED, SVC_ST_CATALOGUED,
		 SVC_ST_ACK, SVC_NSTAGES };
extern const char *const svc_stage_name[SVC_NSTAGES + 1];   /* ... then "total" */

/*
 * The node's one latency view (svc_metrics.c): every cut of a frame's time that Acks, Stats
 * and /metrics report, one struct ing_hist each (quantiles and Prometheus buckets from the
 * same samples), recorded once per frame on the control thread. The first SVC_NSTAGES + 1
 * are the Ack's stages in enum svc_stage order and the total (durable frames; a stage the
 * frame skipped is 0); /metrics' ingest_stage_seconds{stage="ack"} is SVC_LAT_ACK. Where
 * /metrics and Stats.latency cut differently from the Acks (queue: RECEIVED to a worker
 * taking it; write: taken to written; sync, commit: written frames only) they have their
 * own entries: merging them would change what dashboards or clients already read.
 */
enum svc_lat {
	SVC_LAT_ACK = SVC_ST_ACK,       /* durable -> ack sent */
	SVC_LAT_TOTAL = SVC_NSTAGES,    /* admission -> ack sent */
	SVC_LAT_RECEIVED_ALL,           /* admission -> RECEIVED, every frame received (not only
					 * durable ones): ingest_ack_latency_seconds{received} */
	SVC_LAT_DURABLE,                /* admission -> durable: ingest_ack_latency_seconds{durable},
					 * Stats ackLatencyP50/95/99Ns */
	SVC_LAT_QUEUE, SVC_LAT_WRITE, SVC_LAT_SYNC, SVC_LAT_COMMIT,   /* ingest_stage_seconds */
	SVC_LAT_N
};
/* /metrics ingest_stage_seconds{stage} and StatsReply.latency's stages, in that order */
#define SVC_METRIC_STAGES 5
struct svc_metric_stage {
	const char *name;
	enum svc_lat lat;
};
extern const struct svc_metric_stage svc_metric_stage[SVC_METRIC_STAGES];

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

/* --- Prometheus counters and histograms (control/svc_metrics.c), control thread only --- */
enum svc_result { SVC_R_DURABLE = 0, SVC_R_DUPLICATE, SVC_R_FAILED, SVC_R_REFUSED, SVC_R_N };
#define SVC_X_N 2                /* transports: [0] gRPC stream, [1] RDMA READ */
#define SVC_M_LCORES 16          /* == ING_RDMA_MAX_LCORES */
struct svc_metrics {
	uint64_t frames[SVC_X_N][SVC_R_N], bytes[SVC_X_N][SVC_R_N];
	uint64_t rx_frames[SVC_X_N], rx_bytes[SVC_X_N];
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
	struct ing_mbox *ctl;    /* the control thread's mailbox (on the loop) */
	struct ing_grpc_server *srv;
	struct ing_svc_opts o;
	struct ing_grpc_method methods[6];
	uint64_t max_frame;
	bool stopping;
	bool ctl_fd_added;
	uint64_t t_start_ns;
	/* admitted frames */
	struct svc_frame *fr;
	uint32_t nfr, nfr_used;  /* one record per pool slot, indexed by ing_frame.index */
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
	struct ing_hist lat[SVC_LAT_N];   /* the one latency view (enum svc_lat) */
	char note[192];
	/* --- RDMA data path (control/svc_rdma.c) --- */
	struct ing_rdma *rdma;   /* NULL: no RDMA engine */
	struct ing_timer rdma_tick;   /* the engine's housekeeping (ING_RDMA_TICK_MS) */
	uint64_t c_rdma_errors;  /* dataplane transfers that failed (frames back while filling) */
	uint64_t admissions;     /* frames admitted so far */
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
	uint8_t *get_buf;            /* one FrameData being packed (GetFrame) */
	uint64_t c_get_frames, c_get_bytes, c_get_failed;  /* GetFrame calls and bytes sent */
};

/* svc.c: shared helpers (the transports' part of the core: control/xport.h) */
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
/* True when t[0..n) is exactly the node's token (no shorter, no longer: a NUL inside is a
 * mismatch); the time depends on the lengths only. False when authentication is off. */
bool svc_auth_token_ok(const struct ing_svc *s, const char *t, size_t n);
void svc_call_flush(struct svc_call *pc);
int svc_send_ack(struct svc_call *pc, const struct svc_ack *a);
/* Set a->frame_id to id and a->wafer_id to wafer (NULL: ""); each left empty when it
 * is not UTF-8 (an Ack's strings must be) or longer than ING_ID_MAX (its prefix could be
 * another frame's id). */
void svc_ack_set_id(struct svc_ack *a, const char *wafer, const char *id);
/* The final answer for every frame is the DURABLE ack or a failure; sessions that asked
 * for it (ack_received) get an Ack{RECEIVED} first, sent here. */
void svc_ack_received(struct svc_frame *e, uint64_t latency_ns);
/* ING_EV_GRANTED for frame e (RDMA WRITE push): Ack{GRANTED} on its call. */
void svc_frame_granted(struct svc_frame *e, uint32_t grant_id, uint32_t grant_rkey,
		       uint32_t qp_num);
void svc_frame_release(struct svc_frame *e);
void *svc_arena_reset(struct svc_call *pc);

/* svc_metrics.c: count a frame's outcome (transport: enum ing_xport) and its latencies */
void svc_metrics_result(struct ing_svc *s, uint8_t transport, enum svc_result r, uint64_t bytes);
void svc_metrics_received(struct ing_svc *s, uint8_t transport, uint64_t bytes, uint64_t latency_ns);
/* a frame back from persistence, ok or not; now: when control handles its ack. For a durable
 * frame, fills stage_ns (the Ack's stages) and records every cut in s->lat. */
void svc_metrics_durable(struct ing_svc *s, const struct ing_frame *f, uint64_t now,
			 uint64_t stage_ns[SVC_NSTAGES]);

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

/* svc_engine.c: the RDMA engine on the control loop (ing_svc_attach_rdma); its teardown */
void svc_engine_detach(struct ing_svc *s);
/* The pool region a frame of session id must take (its RDMA rail's), -1 any. */
int svc_engine_session_region(const struct ing_svc *s, uint64_t session_id);
/* Where a producer at address peer connects RDMA: the rail on its network, else the first
 * rail up (the engine's); without an engine the service's configured address. */
void svc_engine_rdma_target(const struct ing_svc *s, const char *peer, const char **addr,
			    uint16_t *port);

/* svc_tier.c: the high-water refusal, the tier's StatsReply field (60) and /metrics, and
 * rpc GetFrame (its reads are done by the tier thread) */
extern const struct ing_grpc_method svc_getframe_method;
/* ING_EV_TIER_READ_DONE: the tier thread answered read r of a GetFrame call. */
struct ing_tier_read;
void svc_tier_read_done(struct ing_svc *s, struct ing_tier_read *r);
/* A frame admitted with length bytes is finished (svc_frame_release): for the mark. */
void svc_tier_frame_finished(struct ing_svc *s, uint64_t length);
/* Free what GetFrame keeps (ing_svc_destroy, after the control mailbox is drained). */
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


#endif
