/* SPDX-License-Identifier: Apache-2.0 */
/*
 * state.h - the service's state: the service struct, its sessions and peers (state.c),
 * the latency view and counters the faces read, the registry of RPC faces. The core's
 * files and the faces (rpc/, obs/) include it; transports (xport/) never do: they know the
 * core through control/service/transport.h.
 * Everything here runs on the control thread.
 */
#ifndef ING_SERVICE_STATE_H
#define ING_SERVICE_STATE_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/clock.h"
#include "common/hist.h"
#include "common/log.h"
#include "control/net/grpc_server.h"
#include "control/net/loop.h"
#include "control/service/admit.h"
#include "control/service/service.h"
#include "control/service/transport.h"
#include "dataplane/dataplane.h"

#define SVC_ACKQ_MAX 4096u       /* acks a call may hold while its client is not reading */
#define SVC_RPC_MAX 16u          /* gRPC methods the service serves, at most */

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
	int rail;                /* the rail it negotiated (NegotiateRequest.rail), -1 none named:
				  * its RDMA connection must come in on that rail's listener */
};

/* The node's stages of a durable frame (Ack.stage*Ns, StatsReply.stageLatency). */
enum svc_stage { SVC_ST_RECEIVED, SVC_ST_CRC, SVC_ST_WRITTEN, SVC_ST_SYNCED, SVC_ST_CATALOGUED,
		 SVC_ST_ACK, SVC_NSTAGES };
extern const char *const svc_stage_name[SVC_NSTAGES + 1];   /* ... then "total" */

/*
 * The node's one latency view (counters.c): every cut of a frame's time that Acks, Stats and
 * /metrics report, one struct ing_hist each (quantiles and Prometheus buckets from the
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

/* --- counters of finished frames (counters.c counts, obs/ renders), control thread only --- */
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
 * --- what on-call reads (counters.c counts, obs/ops.c renders), control thread only. Failures
 * by error code, and per-peer series with bounded cardinality: a fixed table of
 * SVC_OPS_PEERS client addresses, taken by the first addresses that send frames; an address
 * that finds the table full is counted under peer="other" until an entry has been idle for
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
	struct ing_mbox_sink ctl_sink;   /* its doorbell's callback: on_event, MBOX_BUDGET at a time */
	struct ing_grpc_server *srv;
	struct ing_svc_opts o;
	struct xport_env env;    /* what transports read (env.rdma: the RDMA engine) */
	struct ing_grpc_method methods[SVC_RPC_MAX];
	unsigned nmethods;
	uint64_t max_frame;
	bool ctl_fd_added;
	uint64_t t_start_ns;
	/* admitted frames */
	struct svc_frame *fr;
	uint32_t nfr, nfr_used;  /* one record per pool slot, indexed by ing_frame.index */
	uint32_t *ht;            /* open addressing: frame id -> 1 + index into fr */
	uint32_t ht_mask;
	uint64_t persisting;     /* frames RECEIVED and not yet back from persistence */
	/* sessions */
	struct svc_session *sess;
	unsigned nsess;
	struct ing_timer sweep_timer;
	/* calls */
	struct svc_call *calls;
	unsigned ncalls;
	struct admit adm;        /* credits and slots, for every transport (admit.h) */
	struct ing_loop_hook flush;   /* before_sleep: finish the calls that are done */
	unsigned want_finish;    /* calls with want_finish set */
	/* counters */
	uint64_t c_received, c_durable, c_failed, c_dup, c_refused;
	uint64_t c_bytes_rx, c_bytes_durable, c_orphan_acks, c_fallback;
	struct ing_hist lat[SVC_LAT_N];   /* the one latency view (enum svc_lat) */
	char note[192];
	/* --- RDMA engine on this loop (engine.c; env.rdma is the engine) --- */
	struct ing_timer rdma_tick;   /* the engine's housekeeping (ING_RDMA_TICK_MS) */
	uint64_t c_rdma_errors;  /* dataplane transfers that failed (frames back while filling) */
	uint64_t admissions;     /* frames admitted so far */
	uint64_t c_ctl_parked;   /* ControlStream FrameMetas that had to wait */
	/* --- shared-secret authentication (opts.auth_token; never logged), auth.c --- */
	bool auth;               /* a token is required */
	size_t auth_len;
	char auth_token[ING_AUTH_TOKEN_MAX + 1];
	uint64_t c_auth_refused; /* calls refused UNAUTHENTICATED */
	/* --- per-peer limits and failed-auth back-off --- */
	struct svc_peer *peers;
	unsigned npeers;
	unsigned max_slots_per_peer;
	uint64_t c_evicted, c_stalled, c_auth_locked;
	char sess_why[160];      /* why svc_session_new returned NULL */
	struct svc_metrics m;
	struct ing_fleet *fleet;     /* node identity and fleet export (NULL: none) */
	struct svc_ops ops;          /* failures by code, per-peer series (counters.c) */
	struct ing_tier *tier;       /* object store tier (NULL: none) */
	uint64_t c_tier_refused;     /* frames refused NO_SPACE at the high-water mark */
	bool tier_refusing;          /* the last new frame was refused at the mark */
	uint64_t inflight_bytes;     /* declared bytes of the frames admitted, not finished */
	uint8_t *get_buf;            /* one FrameData being packed (GetFrame) */
	uint64_t c_get_frames, c_get_bytes, c_get_failed;  /* GetFrame calls and bytes sent */
};

/* ---------------------------------------------------------------- the RPC faces */

/* A method of an RPC face (Negotiate, Stats, GetFrame, Members): registered by the face
 * itself from a constructor (as SPDK_RPC_REGISTER); served with the service as ctx. */
void svc_rpc_register(const struct ing_grpc_method *m);
#define SVC_RPC_REGISTER(m)                                                        \
	static void __attribute__((constructor)) svc_rpc_register_##m(void)        \
	{                                                                         \
		svc_rpc_register(&(m));                                           \
	}

/* ---------------------------------------------------------------- sessions, peers (state.c) */

struct svc_session *svc_session_find(struct ing_svc *s, uint64_t id);
/* NULL: table full or the peer at its limit, with nothing idle to evict (s->sess_why). */
struct svc_session *svc_session_new(struct ing_svc *s, struct svc_peer *peer);
struct svc_session *svc_session_implicit(struct ing_svc *s, struct svc_peer *peer);
/* The session's slot goes free (expired, evicted, its implicit stream ended). */
void svc_session_drop(struct ing_svc *s, struct svc_session *ss);
/* Nothing in flight: idle from now; an implicit session with no stream is dropped. */
static inline void svc_session_maybe_idle(struct ing_svc *s, struct svc_session *ss)
{
	if (ss->cr.inflight)
		return;
	ss->idle_since_ns = ing_now_ns();   /* implicit with a stream: idle since (eviction) */
	if (!ss->streams && ss->implicit)
		svc_session_drop(s, ss);
}
/* Negotiated sessions idle for session_idle_ms expire (the sweep timer). */
void svc_session_sweep(struct ing_svc *s);
/* Find or take the entry of a peer address (a ref is taken); NULL when the table is full. */
struct svc_peer *svc_peer_get(struct ing_svc *s, const char *ip);
static inline void svc_peer_put(struct ing_svc *s, struct svc_peer *p)
{
	(void)s;
	if (p && p->refs)
		p->refs--;
}
/* The call's gRPC input follows its state: paused while the transport holds a message
 * (blocked) or acks wait for the client (acks_waiting), resumed when neither. */
void svc_call_input(struct svc_call *pc);
/* End call pc with status and msg at the next flush (the core's before_sleep hook), never
 * inside a chain of callbacks; no-op when it is ending already. msg is copied. */
void svc_call_finish_later(struct svc_call *pc, int status, const char *msg);
/* Input over, every frame answered, nothing held, every ack out: finish OK at the next
 * flush. */
static inline void svc_call_check_done(struct svc_call *pc)
{
	if (!pc->closing && pc->input_over && pc->open_frames == 0 && !pc->blocked && pc->aq_len == 0)
		svc_call_finish_later(pc, ING_GRPC_OK, NULL);
}
/* Log contexts (common/log.h: JSON fields peer, session, wafer, frame) of a frame (kept in
 * e->lc while it is admitted; a call keeps its own in pc->lc) and a session. The strings
 * stay owned by the frame, its call or the session. */
struct ing_log_ctx svc_log_frame(const struct svc_frame *e);
struct ing_log_ctx svc_log_session(const struct svc_session *ss);

/* engine.c: the pool region a frame of session id must take: its RDMA connection's rail's,
 * else the rail it negotiated; -1 any. */
int svc_engine_session_region(const struct ing_svc *s, uint64_t session_id);
/* engine.c: where a producer at address peer connects RDMA: the rail on its network, else
 * the first rail up (the engine's; *rail its index); without an engine the service's
 * configured address (*rail -1). rail may be NULL. */
void svc_engine_rdma_target(const struct ing_svc *s, const char *peer, const char **addr,
			    uint16_t *port, int *rail);

#endif
