/* SPDX-License-Identifier: Apache-2.0 */
/*
 * xport.h - transports as plug-ins. A transport moves a frame's bytes into the pool slot
 * the admission layer gave it; the service core (svc.c) owns everything else: sessions,
 * credits and slots (through control/admit.h), the frame table, one completion deadline,
 * persistence, acks and the failure path. The core knows a transport only through this
 * ops table; a transport knows the core only through the functions declared below (and
 * admission through control/admit.h): the service struct, sessions, peers and the frame
 * records are the core's (control/svc_internal.h, which no transport includes).
 *
 * Implementations today:
 *   svc_stream.c     xport_grpc_stream  bytes in FrameChunk messages on PushFrames (fallback)
 *   svc_rdma.c       xport_rdma_read    the node RDMA READs what ControlStream describes
 *   svc_rdma_write.c xport_rdma_write   push: the node grants a slot (memory window), the
 *                                       producer RDMA WRITEs it with immediate (docs/PUSH.md)
 *   svc_ctl.c        ControlStream, the descriptor stream of both RDMA transports
 *
 * Everything here runs on the control thread.
 */
#ifndef ING_CONTROL_XPORT_H
#define ING_CONTROL_XPORT_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/log.h"

struct ing_frame;
struct ing_grpc_call;
struct ing_rdma;
struct ing_svc;
struct ing_svc_opts;
struct svc_ack;
struct svc_frame;
struct svc_peer;
struct svc_session;
struct admit;
struct admit_req;
struct ProtobufCAllocator;

#define SVC_META_MAX 4096u       /* largest FrameMeta accepted (ControlStream, in a FrameChunk) */
#define SVC_ARENA 12288u         /* protobuf-c bump arena per call (FrameMeta <= SVC_META_MAX) */
#define SVC_PAUSE_BLOCKED 1u     /* a frame waits for a slot or a credit */
#define SVC_PAUSE_SEND 2u        /* the client is not reading its acks */

/*
 * One streaming call (PushFrames, ControlStream). The transport that owns the call embeds
 * this at the start of its own per-call state (svc_call_new(..., size)), as SPDK's
 * transports embed their generic request. A transport may read the fields of the first
 * group; it changes them only through the svc_call_* functions below. The second group is
 * the core's alone.
 */
struct svc_call {
	/* --- a transport reads these --- */
	struct ing_svc *svc;
	struct ing_grpc_call *call;
	const struct xport_ops *xp;   /* the transport whose stream this is */
	uint64_t id;
	bool half_closed;        /* the client ended its input (svc_call_half_close) */
	bool finished;           /* trailers queued: nothing more is sent */
	bool want_finish;        /* finish from the loop (kick) */
	bool blocked;            /* the transport holds input back (svc_call_set_blocked) */
	unsigned open_frames;    /* admitted on this call, not yet DURABLE-acked or failed */
	int err_status;          /* call-level failure found inside a callback (svc_call_error) */
	char err_msg[160];
	/* --- the core's --- */
	struct svc_session *sess;
	struct svc_peer *peer;   /* the client's address; NULL if the peer table was full */
	bool evicted;            /* its implicit session was given to another client */
	int fin_status;
	const char *fin_msg;
	unsigned pause_why;
	struct svc_call *next, *prev;
	/* acks waiting for send room (ring, allocated on first -ENOBUFS) */
	struct svc_ack *aq;
	unsigned aq_head, aq_len, aq_cap;
	/* protobuf-c arena, and what did not fit in it (svc.c: arena_alloc) */
	size_t arena_used;
	void *arena_ovf;         /* malloc'ed blocks, chained through their first word */
	size_t arena_ovf_bytes;
	_Alignas(16) uint8_t arena[SVC_ARENA];
};

/*
 * Once started, the slot is written by a dataplane lcore, which bounds the transfer itself
 * (transport retries, park_ms, drain_ms) and tells the core on its mailbox: RECEIVED then
 * (after persistence) DONE, or DONE alone when the transfer failed. The core arms no deadline for such a frame and never frees its slot before
 * it comes back; a call that ends meanwhile only detaches from it.
 */
#define XPORT_F_DATAPLANE 1u

struct xport_ops {
	const char *name;        /* "grpc-stream", "rdma-read", ...: logs and metrics */
	uint8_t xport;           /* enum ing_xport: Negotiate, catalog rows, metrics */
	unsigned flags;          /* XPORT_F_* */
	/*
	 * Frame e was admitted (slot and credit taken, in the frame table): start moving its
	 * bytes (post the READ job, grant the slot). NULL: nothing to start (the bytes come
	 * with the stream). 0, or -errno: the core gives slot and credit back and returns the
	 * error to whoever called svc_frame_admit.
	 */
	int (*start)(struct svc_frame *e);
	/*
	 * The admission request r (queued by admit_try) may go on: a slot or a credit came
	 * back, or a recheck is due. Called from the admission layer's timer, oldest request
	 * first, never inside the caller of admit_try/admit_put. The transport calls
	 * admit_try again (the request keeps its place). expired: r waited the frame timeout
	 * with no slot or credit coming back meanwhile and is off the queue already; the
	 * transport answers it ERROR_BUSY (retryable) and carries on with the call.
	 */
	void (*progress)(struct admit_req *r, bool expired);
	/*
	 * The core fails frame e (deadline, stall, its call ended, a bad chunk) and is about
	 * to free its slot: the transport writes no more bytes into it and drops what still
	 * arrives for it without another answer. NULL: nothing to do. Never called for a
	 * XPORT_F_DATAPLANE frame while the dataplane holds it.
	 */
	void (*cancel)(struct svc_frame *e);
	/*
	 * Call pc of this transport is over (stream closed, connection lost): drop its queued
	 * admission request and free the transport's own per-call state. The core then
	 * discards the call's frames that are still filling (through cancel, no answer: the
	 * call is gone) and detaches the rest. NULL: nothing to do.
	 */
	void (*conn_lost)(struct svc_call *pc);
};

/* The transports of this build (their files above). */
extern const struct xport_ops xport_grpc_stream;
extern const struct xport_ops xport_rdma_read;
extern const struct xport_ops xport_rdma_write;

/* ---------------------------------------------------------------- the core, for transports */

/* ---- calls */

/* A call of transport xp; size: the transport's per-call struct, which starts with a
 * struct svc_call (zeroed). NULL + log when out of memory. */
struct svc_call *svc_call_new(struct ing_svc *s, struct ing_grpc_call *c,
			      const struct xport_ops *xp, size_t size);
void svc_call_free(struct svc_call *pc);
/* Bind the call to the session its h3000-session-id header names, or (sid) to sid, or an
 * implicit one where the node allows it. 0, or -1 with err_status/err_msg set. */
int svc_call_bind_header(struct svc_call *pc);
int svc_call_bind_session(struct svc_call *pc, uint64_t sid);
/* The bound session: its id (0: none yet), and whether it negotiated RDMA WRITE push. */
uint64_t svc_call_session(const struct svc_call *pc);
bool svc_call_push(const struct svc_call *pc);
/* Record a call-level failure (err_status, err_msg); the transport then finishes the call. */
void svc_call_error(struct svc_call *pc, int status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* True once the call is finishing: nothing more is sent or admitted on it. */
bool svc_call_closing(const struct svc_call *pc);
/* Stop / resume the call's input (why: SVC_PAUSE_*). */
void svc_call_pause(struct svc_call *pc, unsigned why);
void svc_call_unpause(struct svc_call *pc, unsigned why);
/* The transport holds (or no longer holds) a message back: the call is not done meanwhile. */
void svc_call_set_blocked(struct svc_call *pc, bool blocked);
/* The client ended its input. */
void svc_call_half_close(struct svc_call *pc);
/* Finish the call once its input is over, its frames answered and its acks out. */
void svc_call_check_done(struct svc_call *pc);
/* Finish the call with status/msg from the loop (never inside a gRPC callback). */
void svc_call_finish_later(struct svc_call *pc, int status, const char *msg);
/* Fail every frame of the call still filling (ING_E_CANCELLED, retryable): its input ended
 * before their last bytes ("frame F: <why> after N of M bytes"). */
void svc_call_end_frames(struct svc_call *pc, const char *why);
/* Log fields of the call (peer, session). */
struct ing_log_ctx svc_log_call(const struct svc_call *pc);
/* ing_grpc_method callbacks shared by the streaming methods (ControlStream, PushFrames):
 * flush held acks when the client reads again; free the call state when the call ends. */
void svc_on_writable(struct ing_grpc_call *c);
void svc_on_close(struct ing_grpc_call *c, int status);

/* ---- answers before admission */

/* A frame refused before admission: its one answer. wafer: the validated wafer it names
 * (NULL: not known, or not valid), echoed in Ack.waferId as in every other Ack. */
void svc_nack(struct svc_call *pc, const char *wafer, const char *frame_id, int code,
	      bool retryable, const char *fmt, ...) __attribute__((format(printf, 6, 7)));
void svc_vnack(struct svc_call *pc, const char *wafer, const char *frame_id, int code,
	       bool retryable, const char *fmt, va_list ap) __attribute__((format(printf, 6, 0)));
/*
 * Validate a FrameMeta for the call's session: returns an ing_err and writes a reason
 * naming the frame and the rule. frame_id is the id the frame goes by (the chunk's; id_len
 * its wire length, which may exceed what was kept), meta_frame_id the meta's own (NULL:
 * the same). An empty wafer is ING_DEFAULT_WAFER (*wafer_out is set to the wafer to file
 * under).
 */
int svc_meta_check(struct svc_call *pc, const char *frame_id, size_t id_len,
		   const char *meta_frame_id, uint64_t length, const char *wafer,
		   const char **wafer_out, char *why, size_t whylen);
/* True when a top-level string field f1 or f2 of the protobuf msg holds a NUL byte. */
bool svc_pb_string_has_nul(const uint8_t *msg, size_t len, uint32_t f1, uint32_t f2);
/* The call's protobuf-c arena, emptied, as an allocator for one unpack. */
void svc_arena_allocator(struct svc_call *pc, struct ProtobufCAllocator *a);

/* ---- admission */

/* The service's admission layer (control/admit.h), and a request of call pc for a frame of
 * length bytes that transport xp admits; owner: the transport's handle for progress(). */
struct admit *svc_admission(struct ing_svc *s);
void svc_call_admit_req(struct svc_call *pc, struct admit_req *r, const struct xport_ops *xp,
			void *owner, uint64_t length);
/* A ControlStream FrameMeta had to wait for admission (Stats ctlFramesParked). */
void svc_note_parked(struct ing_svc *s);

/* ---- the service */

const struct ing_svc_opts *svc_opts(const struct ing_svc *s);
/* The RDMA engine (NULL: none, or the device is gone). */
struct ing_rdma *svc_rdma_engine(const struct ing_svc *s);

/* ---- frames */

/* The admitted frame (wafer, frame), or NULL. */
struct svc_frame *svc_frame_find(struct ing_svc *s, const char *wafer_id, const char *frame_id);
/* The frame frame_id admitted on call pc (PushFrames continuation chunks), or NULL. */
struct svc_frame *svc_frame_find_call(struct ing_svc *s, const struct svc_call *pc,
				      const char *frame_id);
/* The frame's descriptor (its slot); the call it came on (NULL once that call is gone);
 * whether its bytes are still being moved (not yet RECEIVED, not failed). */
struct ing_frame *svc_frame_ing(const struct svc_frame *e);
struct ing_svc *svc_frame_service(const struct svc_frame *e);
struct svc_call *svc_frame_call(const struct svc_frame *e);
bool svc_frame_filling(const struct svc_frame *e);

/*
 * Enter an admitted frame (f from admit_try, its fields set by the transport: ids,
 * length, crc, transport, raddr/rkey...) into the frame table on call pc, arm its deadline
 * (not for XPORT_F_DATAPLANE) and call xp->start. Returns the entry; NULL with *rc set
 * (-ENOSPC: table full; or start's error) after giving slot and credit back.
 */
struct svc_frame *svc_frame_admit(struct ing_svc *s, struct svc_call *pc,
				  const struct xport_ops *xp, struct ing_frame *f, int *rc);
/* Bytes arrived for e (moves the stall deadline; no timer work on the data path). */
void svc_frame_progress(struct svc_frame *e);
/* All bytes are in the slot, filled by control: ack RECEIVED, hand it to persistence. */
void svc_frame_complete(struct svc_frame *e);
/* The frame's one failure answer, then its slot and credit go back (see cancel). */
void svc_frame_fail(struct svc_frame *e, int code, bool retryable, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* ---------------------------------------------------------------- the transports' methods */

/* svc_stream.c: PushFrames (xport_grpc_stream). */
extern const struct ing_grpc_method svc_stream_method;
/*
 * svc_ctl.c: ControlStream, the descriptor stream of the RDMA transports (a FrameMeta per
 * frame). Its halves of their ops tables: a parked FrameMeta's admission request may go
 * on; the call is over.
 */
extern const struct ing_grpc_method svc_ctl_method;
void svc_ctl_progress(struct admit_req *r, bool expired);
void svc_ctl_conn_lost(struct svc_call *pc);

#endif
