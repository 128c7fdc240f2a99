/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rdma.h - the ingest node's RDMA READ engine: dataplane lcore pollers that pull frames
 * from producers with chunked one-sided READs, and the rdma_cm listener served by the
 * control thread's event loop.
 *
 * Threads and ownership (see docs of each function for who may call it):
 *  - control thread: ing_rdma_create/destroy, the CM event channel (ing_rdma_cm_fd on its
 *    ing_loop) and the engine's timers (ing_rdma_tick from a loop timer), ing_rdma_submit
 *    (jobs), and the connection events the lcores post on its mailbox (ing_rdma_conn_event).
 *  - dataplane lcore N: ing_rdma_lcore_run (launched by EAL on a worker lcore). It owns one
 *    CQ + completion channel shared by all its QPs, its mailbox, its connection table and
 *    every frame from the moment it takes the frame's job from its mailbox until it hands
 *    the frame on: when the last READ completed it posts ING_EV_RECEIVED (the frame) on
 *    control's mailbox and then gives the frame to persistence, whose ING_EV_DONE follows
 *    on the same mailbox; a frame that failed goes back to control as ING_EV_DONE.
 *
 * Failure model (issue: "bad rkey fails that frame only; QP recovered or session
 * reconnected and the other in-flight frames complete"): an RC QP whose READ fails goes to
 * ERROR on both sides, so it cannot be recovered alone. The lcore fails the faulty frame
 * (ING_E_TRANSFER, wc status in msg, not retryable for access errors), keeps the other
 * frames of that connection ("parked", progress reset), asks control to disconnect
 * (ING_EV_CONN_ERROR), and the producer library reconnects with the same session id;
 * the new QP of that session adopts the parked frames and READs them again. A producer that
 * does not come back within park_ms gets its parked frames failed (retryable) and the
 * slots return to the pool. A vanished producer shows up as RETRY_EXC_ERR or a CM
 * DISCONNECTED: both end in the same bounded path.
 */
#ifndef ING_DATAPLANE_RDMA_H
#define ING_DATAPLANE_RDMA_H

#include <endian.h>
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <infiniband/verbs.h>

#include "dataplane/dataplane.h"
#include "proto/rdma_conn.h"   /* the CONNECT_REQUEST private data (shared with producer/) */

#define ING_RDMA_DEFAULT_PORT 7472
#define ING_RDMA_DEFAULT_CHUNK (1u << 20)   /* bytes per READ */
#define ING_RDMA_DEFAULT_RD_ATOM 16         /* READs in flight per QP (capped by the device) */
#define ING_RDMA_DEFAULT_SQ_DEPTH 64
#define ING_RDMA_DEFAULT_CQ_SIZE 4096
#define ING_RDMA_DEFAULT_BUSY_POLLS 20000   /* adaptive: idle polls before arming the CQ */
#define ING_RDMA_DEFAULT_BUSY_US 50         /* adaptive: ... or this long idle, if sooner */
#define ING_RDMA_MIN_IDLE_POLLS 16          /* adaptive: never arm before this many idle polls */
#define ING_RDMA_DEFAULT_SLEEP_MS 50        /* adaptive: longest sleep (stop flag, timers) */
#define ING_RDMA_DEFAULT_PARK_MS 5000       /* wait for a reconnect before failing frames */
#define ING_RDMA_DEFAULT_DRAIN_MS 3000      /* wait for flush completions of a dead QP */
#define ING_RDMA_DEFAULT_MAX_CONNS 64       /* per lcore */
#define ING_RDMA_DEFAULT_CONN_FRAMES 256    /* frames queued per connection (power of 2) */
#define ING_RDMA_CQ_BURST 32
#define ING_RDMA_POST_BURST 16              /* WRs chained per ibv_post_send */
#define ING_RDMA_MAX_LCORES 16              /* pollers of the engine, every rail's together */
#define ING_RDMA_MAX_RAILS 8
#define ING_RDMA_DEFAULT_GRANT_MS 30000     /* push: a grant not written in time fails */
#define ING_RDMA_DEFAULT_RECV_DEPTH 64      /* push: receive WRs per QP (WRITE WITH IMM) */

/* ---------------------------------------------------------------- verbs ops */

/*
 * The verbs calls of the hot path, behind a table so unit tests run the lcore with fake
 * verbs (no device). Production uses ing_rdma_verbs_ops (thin wrappers of ibv_*).
 * ack_cq_events may be NULL in fakes.
 */
struct ing_rdma_ops {
	int (*post_send)(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);
	int (*poll_cq)(struct ibv_cq *cq, int n, struct ibv_wc *wc);
	int (*req_notify_cq)(struct ibv_cq *cq, int solicited_only);
	int (*get_cq_event)(struct ibv_comp_channel *ch, struct ibv_cq **cq, void **cq_ctx);
	void (*ack_cq_events)(struct ibv_cq *cq, unsigned n);
	/* push only (never called on a lcore without ing_rdma_lcore_set_push) */
	int (*post_recv)(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
	/* push with memory windows only: a type-2 window of pd, and its release */
	struct ibv_mw *(*alloc_mw)(struct ibv_pd *pd, enum ibv_mw_type type);
	int (*dealloc_mw)(struct ibv_mw *mw);
};
extern const struct ing_rdma_ops ing_rdma_verbs_ops;

/* ---------------------------------------------------------------- chunking */

/*
 * The READ plan of one connection. Pure arithmetic, shared by the lcore and the tests:
 * a frame of length L is read in ceil(L / chunk) READs; at most `limit` WRs are
 * outstanding on the QP (min of rd_atom and SQ depth: an unsignaled WR keeps its SQ slot
 * until a later signaled WR completes, so the SQ is accounted by WRs posted and not yet
 * retired by a signaled completion); a WR is signaled when it is the last chunk of its
 * frame, when sig_every WRs went unsignaled, or when it fills the window (otherwise a
 * full window could wait for a completion that never comes).
 */
struct ing_rdma_plan {
	uint32_t chunk;       /* bytes per READ (>= 4096 or the frame length) */
	unsigned limit;       /* max WRs outstanding */
	unsigned sig_every;   /* signal at least every N WRs (1 .. limit) */
};
/* chunk 0: default; clamps chunk to max_msg_sz; rd_atom/sq_depth 0: defaults. 0 or -EINVAL. */
int ing_rdma_plan_init(struct ing_rdma_plan *p, uint32_t chunk, uint32_t max_msg_sz,
		       unsigned rd_atom, unsigned sq_depth);
static inline uint64_t ing_rdma_plan_nchunks(const struct ing_rdma_plan *p, uint64_t len)
{
	return len ? (len + p->chunk - 1) / p->chunk : 0;
}
/* Whether the WR that makes `outstanding_after` WRs outstanding, after `unsig_run`
 * unsignaled ones, must be signaled. */
static inline bool ing_rdma_plan_signal(const struct ing_rdma_plan *p, bool last_of_frame,
					unsigned unsig_run, unsigned outstanding_after)
{
	return last_of_frame || unsig_run + 1 >= p->sig_every || outstanding_after >= p->limit;
}

/* ---------------------------------------------------------------- lcore poller */

enum ing_rdma_poll_mode {
	ING_RDMA_POLL_BUSY = 0,      /* never sleeps: only where a core is free */
	ING_RDMA_POLL_ADAPTIVE = 1,  /* busy for busy_polls idle passes (at most busy_us), then
				      * arm + sleep */
};
/* (ingestd's --poll-mode: busy | adaptive, parsed by its option table, control/node/opts.c) */

/* (The events on an lcore's mailbox, ING_EV_JOB, _ATTACH, _DETACH: dataplane/msg.h.) */

/*
 * How an lcore talks to the rest of the node. Production (ing_rdma_create): deliver =
 * ing_persist_submit, ctl = the control thread's mailbox. Unit tests: a fake deliver and a
 * mailbox they read. deliver returns 0 or -ENOBUFS. Both are sized from the pool
 * (control/node/node.c), so neither can refuse: a refused frame goes back to control failed
 * (retryable, counted in backpressure), a refused message is counted in out_dropped.
 */
struct ing_rdma_lcore_io {
	struct ing_mbox *ctl;             /* ING_EV_RECEIVED/_GRANTED/_DONE/_CONN_* go here */
	void *arg;
	int (*deliver)(void *arg, struct ing_frame *f);
	unsigned mbox_size;               /* jobs the lcore's mailbox holds (0: default) */
};

struct ing_rdma_lcore_opts {
	unsigned lcore_id;            /* for logs */
	enum ing_rdma_poll_mode mode; /* default ADAPTIVE */
	unsigned busy_polls;          /* default ING_RDMA_DEFAULT_BUSY_POLLS */
	unsigned busy_us;             /* default ING_RDMA_DEFAULT_BUSY_US: an idle spell ends
				       * (arm + sleep) after busy_polls passes or busy_us
				       * (and >= ING_RDMA_MIN_IDLE_POLLS passes), which comes
				       * first; 0: busy_polls only */
	int sleep_ms;                 /* default ING_RDMA_DEFAULT_SLEEP_MS */
	uint32_t chunk_size;          /* default ING_RDMA_DEFAULT_CHUNK */
	uint32_t max_msg_sz;          /* device limit (0: no limit) */
	unsigned max_conns;           /* default ING_RDMA_DEFAULT_MAX_CONNS */
	unsigned conn_frames;         /* default ING_RDMA_DEFAULT_CONN_FRAMES (rounded to 2^n) */
	unsigned park_ms;             /* default ING_RDMA_DEFAULT_PARK_MS */
	unsigned drain_ms;            /* default ING_RDMA_DEFAULT_DRAIN_MS */
	const struct ing_rdma_ops *ops; /* default &ing_rdma_verbs_ops */
	unsigned grant_ms;            /* push: default ING_RDMA_DEFAULT_GRANT_MS */
	unsigned recv_depth;          /* push: default ING_RDMA_DEFAULT_RECV_DEPTH */
	int region;                   /* the pool region its lkeys are of (its rail's): a job
				       * whose slot is elsewhere fails (ING_E_INTERNAL,
				       * retryable) before anything is posted; -1: not checked */
};
void ing_rdma_lcore_opts_init(struct ing_rdma_lcore_opts *o);

/* Counters, written by the lcore only, read by anyone (relaxed). frames_ok and
 * bytes_received count every frame the lcore brought in (READ pull and WRITE push). */
struct ing_rdma_lcore_stats {
	uint64_t reads_posted, bytes_posted, post_errors;
	uint64_t completions, wc_errors, wc_flushed, wc_stale;
	uint64_t frames_ok, frames_failed, frames_requeued, jobs_rejected, backpressure;
	uint64_t out_dropped;         /* messages control's mailbox refused (a sizing bug) */
	uint64_t polls, idle_polls, busy_ns;
	uint64_t arms, sleeps, wake_cq, wake_mbox, wake_timeout;
	uint64_t conns_attached, conns_released;
	uint64_t push_grants, push_frames_ok, push_grant_errors, push_recvs, push_mw_replaced;
	uint64_t bytes_received;      /* bytes of the frames_ok and parts_ok */
	uint64_t parts_ok;            /* parts of striped frames brought in (ING_EV_PART_IN) */
} __attribute__((aligned(64)));

struct ing_rdma_lcore;
/*
 * Build an lcore poller around an existing CQ and its completion channel (ch_fd: the
 * channel's fd, or any pollable fd with fakes). lkeys[c]: lkey of pool class c's MR in
 * the PD of the QPs this lcore will own. NULL + log on error. Control thread.
 */
struct ing_rdma_lcore *ing_rdma_lcore_create(const struct ing_rdma_lcore_opts *o,
					     struct ibv_cq *cq, struct ibv_comp_channel *ch,
					     int ch_fd, const struct ing_rdma_lcore_io *io,
					     const uint32_t *lkeys, unsigned nlkeys);
/* After the lcore stopped (or never ran). Frames still held, and jobs still in its mailbox,
 * go back to control failed (ING_E_SHUTTING_DOWN) first. Tolerant of NULL. Does not
 * destroy the CQ. */
void ing_rdma_lcore_destroy(struct ing_rdma_lcore *lc);
/* The same, with why as the failed frames' message (ing_rdma_lcore_destroy: "ingest node
 * shutting down"). */
void ing_rdma_lcore_destroy_why(struct ing_rdma_lcore *lc, const char *why);

/*
 * Enable RDMA WRITE push on this lcore (control thread, before the lcore runs). mrs[c]:
 * the pool MR of class c (registered with IBV_ACCESS_MW_BIND in MW mode, with
 * IBV_ACCESS_REMOTE_WRITE in MR mode). nmw > 0: MW mode, nmw type-2 memory windows are
 * allocated in pd (one per grant in flight: the pool's slot count is enough); 0: MR mode
 * (grants carry the pool MR's rkey). Every QP attached afterwards gets recv_depth receive
 * WRs for the producers' WRITE WITH IMM. 0 or -errno (logged).
 */
int ing_rdma_lcore_set_push(struct ing_rdma_lcore *lc, struct ibv_pd *pd,
			    struct ibv_mr *const *mrs, unsigned nmr, unsigned nmw);

/*
 * Control thread -> lcore, on the lcore's mailbox, taken in this order: a job (frame f with
 * qp_num, length, raddr/rkey or push set); a QP to serve (qp->qp_num, in RTS); stop using
 * qp_num (it must already be in ERROR, e.g. after rdma_disconnect, so that outstanding WRs
 * flush; its frames are parked for a reconnect of the same session). 0 or -ENOBUFS.
 */
int ing_rdma_lcore_submit(struct ing_rdma_lcore *lc, struct ing_frame *f);
int ing_rdma_lcore_attach(struct ing_rdma_lcore *lc, struct ibv_qp *qp, uint64_t session_id,
			  unsigned rd_atom, unsigned sq_depth);
int ing_rdma_lcore_detach(struct ing_rdma_lcore *lc, uint32_t qp_num);
/*
 * The rail's link is down (its port not ACTIVE): the frames parked for session_id (0:
 * every session of the lcore) cannot come back on it, the producer moves them over another
 * rail; fail them now (ING_E_TRANSFER, retryable) instead of after park_ms, so that the
 * moved copy is admitted at once (never stored twice: a parked frame was not complete). A
 * connection of the session still draining (after a detach posted before this) fails them
 * as it parks. 0 or -ENOBUFS.
 */
int ing_rdma_lcore_unpark(struct ing_rdma_lcore *lc, uint64_t session_id);
/* Ask the loop to return (any thread). */
void ing_rdma_lcore_stop(struct ing_rdma_lcore *lc);

/* Lcore thread: one pass (mailbox, posts, one CQ burst, timers). Returns the work
 * done (0 = idle). */
int ing_rdma_lcore_poll(struct ing_rdma_lcore *lc);
/* Lcore thread: one poll pass plus the idle policy (busy spin, or arm + re-poll + sleep
 * up to sleep_ms on the CQ channel and the mailbox's doorbell). Returns the work done, 0
 * when idle or it slept. */
int ing_rdma_lcore_step(struct ing_rdma_lcore *lc);
/* The loop: step until ing_rdma_lcore_stop. Signature of lcore_function_t (EAL). */
int ing_rdma_lcore_run(void *lc);
void ing_rdma_lcore_get_stats(const struct ing_rdma_lcore *lc, struct ing_rdma_lcore_stats *s);
/* Frames currently held (queued, in flight, parked). Any thread, approx. */
unsigned ing_rdma_lcore_frames_held(const struct ing_rdma_lcore *lc);

/* ---------------------------------------------------------------- session placement */

/*
 * Which dataplane lcore serves a new session (rdma_place.c; docs/ARCHITECTURE.md
 * "Several dataplane lcores"): only the lcores of the rail the connection came in on (its
 * device's CQs), of those the ones on the rail's NUMA node first (all of the rail's when
 * none is there or the node is unknown), then the least loaded: fewest live connections,
 * then fewest sessions given to it since start, then the lowest index. Returns the index
 * into l, -EINVAL when n is 0, -ENOENT when no lcore serves that rail. Pure (unit tests,
 * the engine).
 */
struct ing_rdma_lcore_load {
	int numa_node;         /* of the lcore's cpu, -1 unknown */
	unsigned conns;        /* live connections (QPs) it serves */
	uint64_t sessions;     /* sessions placed on it since start */
	unsigned rail;         /* the rail whose device its CQ is on */
};
int ing_rdma_lcore_pick_on(const struct ing_rdma_lcore_load *l, unsigned n, int rail, int dev_node);
/* The same over every lcore, whatever its rail (rail -1). */
int ing_rdma_lcore_pick(const struct ing_rdma_lcore_load *l, unsigned n, int dev_node);

/*
 * A session keeps its lcore while that lcore may still hold its frames (parked after a QP
 * error, flushing): a reconnect must find them. Entries expire; a full table gives up the
 * entry that ends first (that session's parked frames then fail after park_ms, retryable).
 * Control thread.
 */
#define ING_RDMA_STICKY_MAX 1024
struct ing_rdma_sticky {
	unsigned n;
	struct {
		uint64_t session_id;
		uint64_t until_ns;
		uint16_t lcore;
	} e[ING_RDMA_STICKY_MAX];
};
void ing_rdma_sticky_init(struct ing_rdma_sticky *t);
/* The lcore session_id keeps at now_ns, or -1. */
int ing_rdma_sticky_find(const struct ing_rdma_sticky *t, uint64_t session_id, uint64_t now_ns);
/* session_id keeps lcore until until_ns (replaces its earlier entry). */
void ing_rdma_sticky_keep(struct ing_rdma_sticky *t, uint64_t session_id, unsigned lcore,
			  uint64_t until_ns, uint64_t now_ns);

/* ---------------------------------------------------------------- engine (real verbs) */

/* Callbacks into the service (all on the control thread). */
struct ing_rdma_cbs {
	void *arg;
	/* CONNECT_REQUEST for session_id: 0 to accept, -errno to reject (logged with reason). */
	int (*session_check)(void *arg, uint64_t session_id);
	/* ESTABLISHED (up=true) / gone (up=false) for the session's RDMA connection. */
	void (*conn_state)(void *arg, uint64_t session_id, bool up);
	/* The RDMA device went away (DEVICE_REMOVAL): stop offering RDMA. */
	void (*device_lost)(void *arg, const char *why);
	/* The engine is set up again after a removal (listening on addr:port): offer RDMA. */
	void (*device_back)(void *arg, const char *addr, uint16_t port);
	/* One rail stopped serving (up=false: its link down or its device removed, why says
	 * so) or serves again; the engine still serves on its other rails. Called before
	 * device_lost (the last rail down) and before device_back (the first rail back: its
	 * note is the one that stays). May be NULL. */
	void (*rail_state)(void *arg, unsigned rail, bool up, const char *why);
	/* The rail session_id negotiated (NegotiateRequest.rail): its index, or -1 when it
	 * named none (any rail's listener takes it). A connect request of a session that named
	 * a rail, arriving on another rail's listener, is rejected with a log line naming both.
	 * May be NULL (every session takes any rail). */
	int (*session_rail)(void *arg, uint64_t session_id);
};

/* RDMA WRITE push (ingestd --rdma-write). */
enum ing_rdma_push {
	ING_RDMA_PUSH_AUTO = 0,  /* memory windows when the device has type 2, else the pool MR */
	ING_RDMA_PUSH_MW = 1,    /* memory windows or no push */
	ING_RDMA_PUSH_MR = 2,    /* the pool MR's rkey for every grant (no per-grant bound) */
	ING_RDMA_PUSH_OFF = 3,
};
/* (ingestd's --rdma-write: auto | mw | mr | off, parsed by its option table) */
/* Whether the device supports type-2 memory windows (IBV_DEVICE_MEM_WINDOW_TYPE_2B, via
 * ibv_query_device_ex). */
bool ing_rdma_device_has_mw2(struct ibv_context *ctx);

/*
 * One rail (docs/ARCHITECTURE.md "Rails"): one RDMA device with its own rdma_cm listener,
 * PD, registrations of its pool region, and pollers on its own lcores. Rails share the
 * rdma_cm event channel (one fd on the control loop) and nothing else.
 */
struct ing_rdma_rail_opts {
	const char *device;           /* NULL: the device addr binds to */
	const char *addr;             /* NULL: the first local IPv4 address that binds to device */
	int numa_node;                /* its node as placed (rdma-dev = dev@N, the plan); -1: the
				       * device's own (sysfs) */
	unsigned region;              /* the pool region it registers and its frames take */
	unsigned nlcores;             /* its pollers, >= 1 */
	unsigned lcore_ids[ING_RDMA_MAX_LCORES]; /* EAL lcores (or thread indexes) to run them on */
};

struct ing_rdma_opts {
	/* nrails 0: one rail from addr, device, nlcores and lcore_ids below */
	unsigned nrails;
	struct ing_rdma_rail_opts rails[ING_RDMA_MAX_RAILS];
	const char *addr;             /* listen IPv4/IPv6 of an RDMA netdev; NULL: first
				       * local address that binds to an RDMA device */
	uint16_t port;                /* every rail's; default ING_RDMA_DEFAULT_PORT; 0: pick */
	const char *device;           /* optional: require this ibv device name */
	unsigned nlcores;             /* pollers, 1 .. ING_RDMA_MAX_LCORES; 0: one per EAL worker
				       * lcore, or one pthread when EAL has no worker lcore */
	unsigned lcore_ids[ING_RDMA_MAX_LCORES]; /* EAL lcores to launch on */
	bool use_eal;                 /* true: rte_eal_remote_launch; false: pthreads (tests) */
	unsigned rd_atom;             /* wanted READs in flight per QP (capped by device) */
	unsigned sq_depth;
	unsigned cq_size;
	unsigned job_ring_size;       /* jobs per lcore mailbox, default ING_DEFAULT_RING_SIZE */
	enum ing_rdma_push push;      /* default ING_RDMA_PUSH_AUTO */
	bool stripe;                  /* striping (docs/ARCHITECTURE.md "Striping"): every rail
				       * also registers the other rails' pool regions (local
				       * write, and the push access of its own region's), so a
				       * part of a frame moves over any rail into the frame's one
				       * slot (READ, or a push grant bound over that
				       * registration); memlock: rails x regions x pool */
	struct ing_rdma_lcore_opts lcore; /* template for every poller */
};
void ing_rdma_opts_init(struct ing_rdma_opts *o);

struct ing_rdma;
/*
 * Per rail: open the device behind its address, register its pool region's class mappings
 * once in its PD (IBV_ACCESS_LOCAL_WRITE), create one CQ + channel + poller (with its
 * mailbox) per lcore of the rail and start listening. The lcores post to ctl, the control
 * thread's mailbox. persist NULL: received frames go straight back to control as DONE
 * (tests, null benches). A rail that cannot be opened is logged and tried again every
 * ING_RDMA_TICK_MS (ing_rdma_tick), as after a device removal. Returns NULL + log (and a
 * reason in why) when no rail could be opened: the caller falls back to the gRPC path.
 * Control thread.
 *
 * The control thread's loop drives the engine (dataplane/ knows no control/ symbol): it
 * watches ing_rdma_cm_fd() (EPOLLIN: ing_rdma_cm_dispatch), runs ing_rdma_tick() every
 * ING_RDMA_TICK_MS from a loop timer, and hands the connection events its mailbox gets
 * from the lcores (ING_EV_CONN_ERROR, ING_EV_CONN_RELEASED) to ing_rdma_conn_event().
 */
#define ING_RDMA_TICK_MS 1000
struct ing_rdma *ing_rdma_create(const struct ing_rdma_opts *o, struct ing_pool *pool,
				 struct ing_persist *persist, struct ing_mbox *ctl,
				 const struct ing_rdma_cbs *cbs, char *why, size_t whylen);
/* The rdma_cm event channel's fd (non-blocking). */
int ing_rdma_cm_fd(const struct ing_rdma *r);
/* Replace the callbacks (e.g. once the service exists; before the loop runs). */
void ing_rdma_set_cbs(struct ing_rdma *r, const struct ing_rdma_cbs *cbs);
/* Handle the pending CM events (control thread). Returns events handled. */
int ing_rdma_cm_dispatch(struct ing_rdma *r);
/* Housekeeping (control thread): connections whose teardown is overdue, re-opening the
 * device after a removal. */
void ing_rdma_tick(struct ing_rdma *r);
/* A connection event from an lcore (control thread). */
void ing_rdma_conn_event(struct ing_rdma *r, const struct ing_msg *m);
/* Launch the pollers (EAL worker lcores or threads). 0 or -errno. */
int ing_rdma_start(struct ing_rdma *r);
/* Stop pollers (bounded), disconnect every QP, destroy all. Tolerant of NULL/half-built. */
void ing_rdma_destroy(struct ing_rdma *r);
/* Where producers connect (for NegotiateReply rdmaAddr/rdmaPort): the first rail that is
 * up (rail 0 when none is). */
const char *ing_rdma_addr(const struct ing_rdma *r);
uint16_t ing_rdma_port(const struct ing_rdma *r);
const char *ing_rdma_device(const struct ing_rdma *r);
/*
 * The rail a producer at address peer (the gRPC connection's client address) should
 * connect to: an up rail whose IPv4 subnet holds peer (a producer that dialled the node on
 * that rail's network), else the first up rail. 0 with its index, address and port;
 * -ENODEV when no rail is up. Control thread. (Until Negotiate lists every rail.)
 */
int ing_rdma_rail_for_peer(const struct ing_rdma *r, const char *peer, unsigned *rail,
			   const char **addr, uint16_t *port);
/*
 * The pool region a frame of session_id must take: that of the rail its RDMA connection
 * (live or parked) is on; -1 when it has none (any region: it has no RDMA connection, and
 * ing_rdma_submit will say so). Control thread, at admission.
 */
int ing_rdma_session_region(const struct ing_rdma *r, uint64_t session_id);
/*
 * Queue the READ (or, f->push, the grant) of frame f (raddr, rkey, length, frame_id,
 * session_id set) on the session's connection: a job on its lcore's mailbox; sets f->qp_num
 * and transport. 0; -ENOTCONN when the session has no RDMA connection (NACK
 * ERROR_NO_TRANSPORT); -ENOBUFS when the lcore's mailbox is full (retry later: the frame is
 * still the caller's); -EXDEV when f's slot is not in the region of the rail the session
 * is on (admission took it before the session moved rails: the frame is still the
 * caller's). Control thread.
 */
int ing_rdma_submit(struct ing_rdma *r, struct ing_frame *f);
/*
 * Queue the READ (p->push: the grant) of part p of a striped frame (p->part_of set; buf,
 * length, raddr, rkey, session_id, region and cls set: common/stripe.h) on p->session_id's
 * connection, with the lkey (part_lkey) and MR (part_mr) its rail registered p's slot
 * with. 0 (and *rail, may be NULL: the rail it moves over); -ENOTCONN (no connection, or
 * its rail is down); -EXDEV (the rail has no registration of that region: the engine does
 * not stripe); -EPROTONOSUPPORT (a push part on a rail without push); -ENOBUFS. Control
 * thread.
 */
int ing_rdma_submit_part(struct ing_rdma *r, struct ing_frame *p, unsigned *rail);
/* The rail of session_id's connection (live or parked) when that rail is up, else -1. */
int ing_rdma_session_rail(const struct ing_rdma *r, uint64_t session_id);
/* Whether the engine was made with o.stripe (it takes striped frames). */
bool ing_rdma_stripes(const struct ing_rdma *r);
/* Push (RDMA WRITE) offered: 0 none, 1 with memory windows, 2 with the pool MR. */
int ing_rdma_push_mode(const struct ing_rdma *r);
/* Whether session_id has an established RDMA connection. */
bool ing_rdma_session_connected(const struct ing_rdma *r, uint64_t session_id);
struct ing_rdma_stats {
	uint64_t cm_events, conns_accepted, conns_rejected, conns_active, conn_errors;
	uint64_t reads_posted, bytes_read, frames_ok, frames_failed, wc_errors;
	uint64_t busy_ns, polls, idle_polls, sleeps;
	uint64_t completions;         /* CQEs polled (success, error, flush) */
	uint64_t push_grants, push_frames_ok, push_grant_errors;
	uint64_t device_removals, device_reopens; /* DEVICE_REMOVAL seen; engine set up again */
};
void ing_rdma_get_stats(const struct ing_rdma *r, struct ing_rdma_stats *s);
/* Pollers of the engine, and poller i's counters and EAL lcore id (/metrics per lcore).
 * 0 or -ENOENT. Any thread (relaxed reads). */
unsigned ing_rdma_nlcores(const struct ing_rdma *r);
int ing_rdma_lcore_stats(const struct ing_rdma *r, unsigned i, unsigned *lcore_id,
			 struct ing_rdma_lcore_stats *s);
/* Where poller i runs and what the placement rule sees of it. 0 or -ENOENT. Control thread. */
struct ing_rdma_lcore_info {
	unsigned lcore_id;     /* EAL lcore (or the pthread's index) */
	unsigned rail;         /* the rail it polls for */
	int numa_node;         /* -1 unknown */
	unsigned conns;        /* live connections now */
	uint64_t sessions;     /* sessions placed on it since start */
	unsigned frames_held;  /* frames it holds now (queued, in flight, parked) */
};
int ing_rdma_lcore_info(const struct ing_rdma *r, unsigned i, struct ing_rdma_lcore_info *info);
/* The first rail's NUMA node as the placement rule uses it (-1 unknown). */
int ing_rdma_device_node(const struct ing_rdma *r);
/* Rails: what each is and whether it is up (Negotiate's and Stats' rail lists).
 * 0 or -ENOENT. Control thread. */
struct ing_rdma_rail_info {
	char device[IBV_SYSFS_NAME_MAX];   /* "" when it never opened */
	char addr[48];
	uint16_t port;
	int numa_node;         /* where it is placed (its lcores, its region) */
	int dev_node;          /* what the device's sysfs says, -1 unknown */
	unsigned region;
	unsigned first_lcore, nlcores;   /* its pollers: ing_rdma_lcore_info(first ..) */
	bool up;               /* serving: its objects open and its port ACTIVE */
	bool link_down;        /* its objects are open but its port is not ACTIVE */
	uint32_t link_mbps;    /* its port's active speed x width (0 unknown) */
	uint64_t removals, reopens;
	uint64_t downs;        /* times it went down since start (removal, link, re-open) */
	uint64_t down_since_ns;          /* ing_now_ns() it went down, 0 up */
	char why[160];         /* why it is down, "" up */
};
unsigned ing_rdma_nrails(const struct ing_rdma *r);
/* Rails serving now (up: open and link ACTIVE). */
unsigned ing_rdma_rails_up(const struct ing_rdma *r);
int ing_rdma_rail_info(const struct ing_rdma *r, unsigned i, struct ing_rdma_rail_info *info);
/* What rail i moved since start (its pollers' counters, those of pollers a removal released
 * included) and its live connections. 0 or -ENOENT. Control thread. */
struct ing_rdma_rail_stats {
	uint64_t frames_received, bytes_received;   /* READ pull and WRITE push; a striped
						     * frame counts once, in its home rail's
						     * frames, and each part's bytes in its rail's */
	uint64_t frames_failed, completion_errors;  /* error completions, not flushes */
	uint64_t parts_received;                    /* parts of striped frames its lcores
						     * brought in (each rail its own) */
	unsigned conns;                             /* live RDMA connections (QPs) */
};
int ing_rdma_rail_stats(const struct ing_rdma *r, unsigned i, struct ing_rdma_rail_stats *s);
/* Add one of a rail's lcores' counters to its rail's: frames, bytes, failures, error
 * completions, parts (a part is no frame of its own). Pure. */
void ing_rdma_rail_stats_add(struct ing_rdma_rail_stats *s, const struct ing_rdma_lcore_stats *ls);
/* A striped frame is complete (its last part in): count it once, in the frames of its home
 * rail (the rail of the session that sent its FrameMeta). Control thread. */
void ing_rdma_striped_frame_in(struct ing_rdma *r, unsigned home_rail);

/* ---------------------------------------------------------------- rails, pure (rdma_rail.c) */

/* A port's link rate in Mbit/s from ibv_port_attr active_speed (IB_SPEED_*: SDR 2.5 Gb/s
 * .. XDR 200 Gb/s per lane, what ibstat's "Rate" multiplies) and active_width (1x, 2x, 4x,
 * 8x, 12x); 0 when either is unknown. */
uint32_t ing_rdma_link_mbps(unsigned active_speed, unsigned active_width);
/*
 * The rail a session that names one (NegotiateRequest.rail) gets, among n rails (their
 * ing_rdma_rail_info): its index when it is up; -ENOENT when no rail has that device name,
 * -ENETDOWN when it is down. On error msg says which rails exist (each up, or down with
 * why and for how long at now_ns), for the producer's error. Pure.
 */
int ing_rdma_rail_choose(const struct ing_rdma_rail_info *rails, unsigned n, const char *want,
			 uint64_t now_ns, char *msg, size_t msglen);
/* "rxe0 (up), rxe1 (down 12 s: link down (port 1 PORT_ERR))" into buf. Pure. */
void ing_rdma_rails_describe(const struct ing_rdma_rail_info *rails, unsigned n, uint64_t now_ns,
			     char *buf, size_t len);

#endif
