/* SPDX-License-Identifier: Apache-2.0 */
/*
 * msg.h - what threads tell each other: the message of every mailbox (dataplane/mbox.c)
 * and every kind of event, each thread's in its own range, so that a message posted to
 * the wrong mailbox is caught as unknown by its dispatcher. A range that outgrows its
 * room fails the build (the static checks below).
 *
 *   kind      mailbox of                  handled by
 *   0         any thread: a call {fn, arg} ing_mbox_run runs fn(arg, val)
 *   1..15     the control thread          control/service/core.c (on_event)
 *   16..31    a persistence worker        dataplane/persist.c (worker_main)
 *   32..47    a dataplane lcore           dataplane/rdma/rdma_poller.c (on_mail)
 *   48..63    the tier thread             dataplane/tier/tier.c (take_messages)
 *
 * A message is an event about a frame ({kind, frame}: the frame moves with it, one owner
 * at a time) or about an object the receiver owns, or a call ({fn, arg}: fn runs on the
 * owner's thread; what only needs a function run there, with no ordering against frames,
 * is a call, and the receiver knows no kind for it). docs/ARCHITECTURE.md, "How to add a
 * message kind".
 */
#ifndef ING_DATAPLANE_MSG_H
#define ING_DATAPLANE_MSG_H

#include <stdint.h>

struct ing_frame;

typedef void (*ing_msg_fn)(void *arg, uint32_t val);

#define ING_MSG_CALL 0u   /* {fn, arg, val}: run fn(arg, val) on the owner's thread */

/* Each receiver's range of kinds: [FIRST, LAST]. */
#define ING_MSG_CTL_FIRST 1u
#define ING_MSG_CTL_LAST 15u
#define ING_MSG_PERSIST_FIRST 16u
#define ING_MSG_PERSIST_LAST 31u
#define ING_MSG_LCORE_FIRST 32u
#define ING_MSG_LCORE_LAST 47u
#define ING_MSG_TIER_FIRST 48u
#define ING_MSG_TIER_LAST 63u

/* Events on the control thread's mailbox (control/service/core.c handles them). */
enum ing_ctl_event {
	ING_EV_RECEIVED = ING_MSG_CTL_FIRST,
				  /* lcore: every byte of f landed (t_received_ns set); f goes on
				   * to persistence right after, the lcore no longer touches it */
	ING_EV_GRANTED,           /* lcore (RDMA WRITE push): f's slot is open for the producer's
				   * WRITE; val: grant id, u64: grant rkey << 32 | qp number.
				   * The lcore still owns f: read only its admission fields */
	ING_EV_DONE,              /* persistence (or a failing lcore): f is control's again,
				   * durable (status ING_E_NONE) or failed (status, msg) */
	ING_EV_CONN_ERROR,        /* lcore: a WR of QP val failed (u64: ibv_wc_status): disconnect */
	ING_EV_CONN_RELEASED,     /* lcore: done with QP val: control may destroy it */
	ING_EV_PART_IN,           /* lcore: every byte of part f (f->part_of: its striped frame)
				   * landed; f is control's again (a failed part: ING_EV_DONE) */
	ING_EV_CTL_END
};

/* Events on a persistence worker's mailbox (dataplane/persist.c). */
enum ing_persist_event {
	ING_EV_PERSIST = ING_MSG_PERSIST_FIRST,
				  /* f: complete in its slot: check, store, post DONE to control */
	ING_EV_PERSIST_END
};

/* Events on a dataplane lcore's mailbox (control posts them; dataplane/rdma/). */
enum ing_lcore_event {
	ING_EV_JOB = ING_MSG_LCORE_FIRST,
			      /* f: READ it (or, f->push, grant its slot) on connection f->qp_num */
	ING_EV_ATTACH,        /* arg: the QP (ESTABLISHED soon; RTS already); u64: session id;
			       * val: rd_atom << 16 | sq_depth */
	ING_EV_DETACH,        /* val: qp number, already moved to ERROR: drain, park its frames */
	ING_EV_UNPARK,        /* u64: a session (0: every one): its rail's link is down, so its
			       * parked frames fail now (retryable), not after park_ms; a
			       * connection still draining fails them once it parks */
	ING_EV_LCORE_END
};

/* Events on the tier thread's mailbox (control posts them; dataplane/tier/). */
enum ing_tier_event {
	ING_EV_TIER_READ = ING_MSG_TIER_FIRST,
				  /* arg: a struct ing_tier_read to answer (its next chunk) */
	ING_EV_TIER_WAKE,         /* frames were finished: look at the outbox, measure again
				   * (one in the mailbox at a time: ing_tier_frame_finished) */
	ING_EV_TIER_STOP,         /* ing_tier_stop: the stop flag is set */
	ING_EV_TIER_END
};

_Static_assert(ING_EV_CTL_END - 1 <= ING_MSG_CTL_LAST, "control's kinds outgrew 1..15");
_Static_assert(ING_EV_PERSIST_END - 1 <= ING_MSG_PERSIST_LAST, "persistence's kinds outgrew 16..31");
_Static_assert(ING_EV_LCORE_END - 1 <= ING_MSG_LCORE_LAST, "an lcore's kinds outgrew 32..47");
_Static_assert(ING_EV_TIER_END - 1 <= ING_MSG_TIER_LAST, "the tier's kinds outgrew 48..63");
_Static_assert(ING_MSG_CTL_LAST < ING_MSG_PERSIST_FIRST && ING_MSG_PERSIST_LAST < ING_MSG_LCORE_FIRST &&
	       ING_MSG_LCORE_LAST < ING_MSG_TIER_FIRST, "the ranges of kinds overlap");

/* One message: 24 bytes, copied into the receiver's ring. */
struct ing_msg {
	uint32_t kind;            /* ING_MSG_CALL or an event of the receiving thread */
	uint32_t val;             /* a small value (grant id, qp number, call argument) */
	union {
		struct ing_frame *f;  /* events: the frame it is about */
		void *arg;            /* calls: fn's argument; other events: an object */
	};
	union {
		uint64_t u64;         /* events: a second value */
		ing_msg_fn fn;        /* calls */
	};
};
_Static_assert(sizeof(struct ing_msg) == 24, "struct ing_msg: 24 bytes, a multiple of 4 (rte_ring elements)");

#endif
