/* SPDX-License-Identifier: Apache-2.0 */
/*
 * transport.h - the contract between the service core and its transports (xport/). A
 * transport moves a frame's bytes into the pool slot the core gave it; the core (core.c)
 * owns everything else: sessions, credits and slots (admission), the frame table, the
 * deadline, the answer of every frame, persistence, the call's end. As SPDK's nvmf transports, a
 * transport is an ops table plus a per-call struct that starts with the core's, and it
 * tells the core about a frame's life in a handful of calls:
 *
 *   xport_open      a call starts (the gRPC method's on_start)
 *   xport_admit     a frame asks in: checks, credit + slot (or a wait), started
 *   xport_frame     a message for a frame under way: its session checked, its frame found
 *   xport_filled    bytes landed in the slot; the last of them completes it
 *   xport_fail      the frame fails (its one answer; the slot goes back)
 *   xport_refuse    a frame refused before admission (its one answer)
 *   xport_pause / xport_resume   the transport holds a message back: input stops / goes on
 *   xport_done      the client's input is over: the call ends once its frames are answered
 *   xport_close     the call fails
 *
 * and the core drives a frame through one state switch (core.c: frame_process), which
 * calls the transport back through its ops (start, progress, cancel, conn_lost). A
 * transport registers its gRPC method itself (SVC_XPORT_REGISTER); the core names none.
 *
 * Transports today (xport/):
 *   stream.c  xport_grpc_stream  the bytes in FrameChunk messages on PushFrames (fallback)
 *   ctl.c     ControlStream, the FrameMeta descriptors of the two RDMA transports, whose
 *             ops tables it holds:
 *             xport_rdma_read    the node RDMA READs what a FrameMeta describes
 *             xport_rdma_write   push: the node grants a slot, the producer RDMA WRITEs it
 *                                with immediate (docs/PUSH.md)
 *   rdma_job.c their start: the job to the lcore of the session's QP
 *
 * Everything here runs on the control thread.
 */
#ifndef ING_SERVICE_TRANSPORT_H
#define ING_SERVICE_TRANSPORT_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/log.h"
#include "control/net/grpc_server.h"
#include "control/service/admit.h"
#include "control/service/pb.h"
#include "dataplane/dataplane.h"

struct ing_rdma;
struct ing_svc;
struct svc_ack;
struct svc_peer;
struct svc_session;
struct xport_ops;

/* What every transport may read of the service (the core keeps it current). */
struct xport_env {
	struct ing_rdma *rdma;       /* the RDMA engine; NULL: none, or the device is gone */
	size_t max_msg;              /* largest gRPC message (a chunk's data is at most this) */
	size_t backlog_max;          /* bytes a paused call may keep of what still arrives */
	unsigned frame_timeout_ms;
	bool stopping;               /* shutting down: new frames are refused */
};

/*
 * One streaming call (PushFrames, ControlStream). The transport that owns the call embeds
 * this first in its own per-call state (xport_open(..., size)), as SPDK's transports embed
 * their generic request. A transport reads the first group; the rest is the core's.
 */
struct svc_call {
	/* --- a transport reads these --- */
	const struct xport_env *env;
	struct ing_grpc_call *call;
	const struct xport_ops *xp;  /* the transport whose stream this is */
	uint64_t id;
	bool closing;                /* finishing: nothing more is sent, admitted or kept */
	int status;                  /* closing: the gRPC status it finishes with */
	struct svc_arena arena;      /* protobuf-c unpacks this call's messages here */
	/* --- the core's --- */
	struct ing_svc *svc;
	struct svc_session *sess;
	struct svc_peer *peer;       /* the client's address; NULL if the peer table was full */
	const char *peer_str;        /* "ip:port", for logs */
	struct ing_log_ctx lc;       /* its log fields: peer, session */
	bool evicted;                /* its implicit session was given to another client */
	bool finished;               /* trailers queued */
	bool want_finish;            /* finish at the next flush (status, fin_msg) */
	bool input_over;             /* xport_done: the client ended its input */
	bool blocked;                /* xport_pause: the transport holds a message back */
	bool paused;                 /* the gRPC layer delivers nothing (held or acks waiting) */
	bool acks_waiting;           /* the client is not reading: acks queued in aq */
	unsigned open_frames;        /* admitted on this call, not yet answered */
	struct xport_req *wait;      /* its frame waiting for admission (XPORT_WAIT), or NULL */
	char fin_msg[160];
	struct svc_call *next, *prev;
	/* acks waiting for send room (ring, allocated on first -ENOBUFS) */
	struct svc_ack *aq;
	unsigned aq_head, aq_len, aq_cap;
};

/* Where a frame is in its life (core.c: frame_process drives it). */
enum svc_fstate {
	FE_FREE = 0,
	FE_FILLING,        /* admitted; its bytes are moving (control copies them, or a dataplane
			    * thread holds the frame: XPORT_F_DATAPLANE) */
	FE_FILLED,         /* control put its last byte in the slot */
	FE_RECEIVED,       /* a dataplane lcore says every byte landed (and hands it on) */
	FE_PERSISTING,     /* a persistence worker has it */
	FE_DONE,           /* back from persistence, durable or failed */
	FE_FAILED,         /* failed before persistence: deadline, stall, transport, call gone */
	FE_RELEASE,        /* answered: its slot, credit and entry go back, then FREE */
};

/* Control's record of one admitted frame (one per pool slot, never moves). */
struct svc_frame {
	/* --- a transport reads these (and the bytes' side of f: buf, filled, crc_run) --- */
	struct ing_frame *f;         /* the slot and its descriptor; NULL when free */
	struct svc_call *call;       /* the call that sent it; NULL once that call is gone */
	uint8_t state;               /* enum svc_fstate */
	/* --- the core's --- */
	const struct xport_ops *xp;  /* the transport moving its bytes */
	struct svc_session *sess;
	struct svc_peer *peer;       /* the peer whose slot count it is in */
	struct ing_svc *svc;
	const struct xport_env *env;
	bool silent;                 /* FE_FAILED with no answer: its call is gone */
	struct ing_log_ctx lc;       /* its log fields: peer, session, wafer, frame */
	uint64_t id_hash;            /* ing_id_hash of f->frame_id: the table's key */
	uint64_t length;             /* declared (immutable after admission) */
	uint32_t idx;                /* == the frame's f->index while it holds one */
	struct ing_timer timer;      /* completion / stall deadline while FE_FILLING */
	uint64_t deadline_ns;        /* admission + frame timeout */
	uint64_t progress_ns;        /* last time bytes arrived (or admission) */
	/* a striped frame (xport/stripe.c): its parts' state; the FrameMeta that named them,
	 * during its start only */
	struct svc_stripe *stripe;
	const H3000__FrameMeta *stripe_meta;
};

/*
 * Once started, the slot is written by a dataplane thread, which bounds the transfer
 * itself (transport retries, park_ms, drain_ms) and tells the core on its mailbox:
 * RECEIVED then (after persistence) DONE, or DONE alone when the transfer failed. The core
 * arms no deadline for such a frame and never frees its slot before it comes back; a call
 * that ends meanwhile only detaches from it.
 */
#define XPORT_F_DATAPLANE 1u
/* The transport computes the crc32c of the bytes as it moves them (f->crc_run): a frame it
 * completes carries f->crc_done, and persistence checks the declared crc against it
 * instead of reading the frame again. */
#define XPORT_F_CRC 2u

struct xport_ops {
	const char *name;        /* "grpc-stream", "rdma-read", ... */
	const char *rpc;         /* the RPC that carries its frames ("PushFrames"): logs */
	uint8_t xport;           /* enum ing_xport: Negotiate, catalog rows, metrics */
	unsigned flags;          /* XPORT_F_* */
	/* the transport that takes this one's descriptors for a session that negotiated RDMA
	 * WRITE push (rdma-read: rdma-write, the node grants the slot instead of reading it);
	 * NULL: none */
	const struct xport_ops *push;
	/*
	 * Frame e is admitted (slot and credit taken, in the frame table): start moving its
	 * bytes (post the READ job, grant the slot). NULL: nothing to start (the bytes come with
	 * the stream). 0, or -errno: the core refuses the frame (ERROR_BUSY, retryable).
	 */
	int (*start)(struct svc_frame *e);
	/*
	 * The frame call pc keeps waiting (xport_admit said XPORT_WAIT) may try again: a slot
	 * or a credit came back, or a recheck is due; the transport calls xport_admit with the
	 * same request (it keeps its place). expired: it waited the frame timeout with nothing
	 * given back meanwhile; the core has answered it ERROR_BUSY (retryable) and it is off
	 * the queue: the transport lets the call go on. From the admission run, never inside
	 * xport_admit.
	 */
	void (*progress)(struct svc_call *pc, bool expired);
	/*
	 * The core fails frame e (deadline, stall, its call ended, xport_fail) and is about to
	 * free its slot: the transport writes no more bytes into it and drops what still
	 * arrives for it without another answer. NULL: nothing to do. Never called for an
	 * XPORT_F_DATAPLANE frame while the dataplane holds it.
	 */
	void (*cancel)(struct svc_frame *e);
	/*
	 * Call pc of this transport is over (stream closed, connection lost): free the
	 * transport's own per-call state (a frame waiting for admission the core drops). The
	 * core then discards the call's frames that are still filling (through cancel, no
	 * answer: the call is gone) and detaches the rest. NULL: nothing to do.
	 */
	void (*conn_lost)(struct svc_call *pc);
};

/* A transport's gRPC method: registered by the transport itself, from a constructor (as
 * SPDK_RPC_REGISTER); the core adds its own on_writable (held acks) and on_close (the
 * call's end) and serves the method with the service as ctx. */
void svc_xport_register(const struct ing_grpc_method *m);
#define SVC_XPORT_REGISTER(m)                                                      \
	static void __attribute__((constructor)) svc_xport_register_##m(void)      \
	{                                                                         \
		svc_xport_register(&(m));                                         \
	}

/* ---------------------------------------------------------------- one frame asking in */

/* What xport_admit says. */
enum xport_verdict {
	XPORT_GO = 0,            /* go on: *e is the frame, its bytes may land */
	XPORT_WAIT,              /* queued for a credit or a slot: pause the input (xport_pause);
				  * ops->progress comes back */
	XPORT_ANSWERED,          /* refused: its one answer is out; the call goes on */
	XPORT_CLOSED,            /* the call cannot go on (no session to bind): it is failed
				  * (pc->status) */
};

/* A frame asking for admission. The transport fills the first group; the request must stay
 * put (its place in the queue) while it waits. */
struct xport_req {
	const struct xport_ops *xp;      /* the transport that moves its bytes */
	uint64_t session_id;             /* the message's sessionId (0: none named) */
	const char *frame_id;            /* the id the frame goes by */
	size_t id_len;                   /* its wire length (may exceed what frame_id kept) */
	bool chunk_id;                   /* frame_id is the chunk's (PushFrames): the meta's own
					  * frameId must be the same, and a first chunk again while
					  * the frame is filling fails it */
	const H3000__FrameMeta *meta;    /* its descriptor; NULL: refused as `bad` below */
	uint64_t first_bytes;            /* data that came with the first message (<= length) */
	/* a refusal the transport found in its own message, answered after the session checks:
	 * its h3000.ErrorCode (0: none) and why */
	int bad;
	char bad_why[ING_FRAME_MSG_MAX];
	/* the transport cannot take frames now (the RDMA engine is gone): why (NULL: it can),
	 * answered ERROR_NO_TRANSPORT after the frame's own checks */
	const char *unready;
	/* --- the core's --- */
	struct admit_req ar;
	const char *wafer;               /* the wafer it is filed under */
	uint64_t id_hash;                /* of frame_id: its key in the frame table */
};

/*
 * Admit the frame r describes on call pc: bind the call's session (the header's, or
 * r->session_id, or an implicit one), then in this order answer it refused for a session
 * id that differs from the call's, r->bad, a node that is stopping, the id / length /
 * wafer rules, the high-water mark of the object store tier, a first chunk of a frame this
 * call is still filling (which fails that frame), a frame in flight in the node, data past
 * the length, r->unready; then credit + slot (first come first served, shared with every
 * transport), the frame table, xp->start. XPORT_GO: *e is the frame.
 */
enum xport_verdict xport_admit(struct svc_call *pc, struct xport_req *r, struct svc_frame **e);
/*
 * A message of call pc about a frame under way (a continuation chunk), naming session_id
 * (0: none): the session checks of xport_admit (bind, or refuse a session that differs:
 * XPORT_ANSWERED), then XPORT_GO with *e the frame of this call named frame_id that is
 * filling or was filled (NULL: none).
 */
enum xport_verdict xport_frame(struct svc_call *pc, uint64_t session_id, const char *frame_id,
			       struct svc_frame **e);

/* ---------------------------------------------------------------- its bytes, its end */

/*
 * n more bytes of e are in its slot (the transport set f->crc_run over them under
 * XPORT_F_CRC). The frame's last byte completes it: RECEIVED, then persistence. last: the
 * sender says this was its last message for the frame; with bytes missing, the frame
 * fails. No-op once e is no longer filling.
 */
void xport_filled(struct svc_frame *e, uint64_t n, bool last);
/* The frame's one failure answer; its slot and credit go back (ops->cancel first). */
void xport_fail(struct svc_frame *e, int code, bool retryable, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* A frame refused before admission: its one answer. wafer: the wafer it names when
 * validated (NULL: not known), echoed in Ack.waferId as in every other Ack. */
void xport_refuse(struct svc_call *pc, const char *wafer, const char *frame_id, int code,
		  bool retryable, const char *fmt, ...) __attribute__((format(printf, 6, 7)));

/* ---------------------------------------------------------------- the call */

/*
 * A call of transport xp begins (on_start; ctx: the method's, the service): its state of
 * size bytes (starting with a struct svc_call, zeroed), bound to the session its
 * h3000-session-id header names. NULL: refused, and the call finished with *status
 * (shutting down, a bad header, out of memory): return it from on_start.
 */
struct svc_call *xport_open(struct ing_grpc_call *c, void *ctx, const struct xport_ops *xp,
			    size_t size, int *status);
/* The transport holds a message back (a frame waits for admission): the input stops, and
 * the call is not done meanwhile. xport_resume: it goes on. */
void xport_pause(struct svc_call *pc);
void xport_resume(struct svc_call *pc);
/* The client's input is over and the transport holds none of it: frames still filling
 * can never complete (they fail, "stream ended"); the call ends OK once every frame has
 * its answer and every ack is out. */
void xport_done(struct svc_call *pc);
/* The call fails with a gRPC status (a malformed message, a buffer over its bound): its
 * trailers are queued now. Returns status, for the gRPC callback to return. */
int xport_close(struct svc_call *pc, int status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#endif
