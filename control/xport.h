/* SPDX-License-Identifier: Apache-2.0 */
/*
 * xport.h - transports as plug-ins. A transport moves a frame's bytes into the pool slot
 * the admission layer gave it; the service core (svc.c) owns everything else: sessions,
 * credits and slots (through control/admit.h), the frame table, one completion deadline,
 * persistence, acks and the failure path. The core knows a transport only through this
 * ops table; a transport knows the core only through the functions declared below.
 *
 * Implementations today:
 *   svc_stream.c   xport_grpc_stream  bytes in FrameChunk messages on PushFrames (fallback)
 *   svc_rdma.c   xport_rdma_read    the node RDMA READs what ControlStream describes
 *   svc_rdma_write.c xport_rdma_write  push: the node grants a slot (memory window), the
 *                                  producer RDMA WRITEs it with immediate (docs/PUSH.md)
 *
 * Everything here runs on the control thread.
 */
#ifndef ING_CONTROL_XPORT_H
#define ING_CONTROL_XPORT_H

#include <stdbool.h>
#include <stdint.h>

struct ing_frame;
struct ing_svc;
struct svc_call;
struct svc_frame;
struct admit_req;

/*
 * Once started, the slot is written by a dataplane lcore, which bounds the transfer itself
 * (transport retries, park_ms, drain_ms) and hands the frame back on the ack ring, failed
 * or persisted. The core arms no deadline for such a frame and never frees its slot before
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
/* All bytes are in the slot, filled by a dataplane lcore that submitted it to persistence
 * itself: ack RECEIVED (t_ns: when the lcore saw the last completion). */
void svc_frame_received(struct svc_frame *e, uint64_t t_ns);
/* The frame's one failure answer, then its slot and credit go back (see cancel). */
void svc_frame_fail(struct svc_frame *e, int code, bool retryable, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* The frame the dataplane names by (cookie, gen) (ing_frame.cookie/gen), still filling
 * with transport xp; NULL when it is gone or another frame holds that record now. */
struct svc_frame *svc_frame_by_cookie(struct ing_svc *s, uint64_t cookie, uint64_t gen,
				      const struct xport_ops *xp);

#endif
