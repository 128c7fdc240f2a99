/* SPDX-License-Identifier: Apache-2.0 */
/*
 * admit.h - the admission layer: every frame, whatever its transport, takes its session
 * credit and its pool slot here, and gives them back here.
 *
 * Order: first come, first served per size class (and pool region: a rail's frames take
 * slots of its node's region only), across sessions and transports. A
 * frame's class is the smallest that holds it; the pool lends larger classes to smaller
 * frames, so a frame may take a slot only from classes below the class of every frame
 * that waits for a slot ahead of it. A stream of small frames therefore never takes the
 * slot a waiting large frame needs (whatever transport either uses), while small frames
 * still flow through their own classes. A frame waiting for a credit of its own session
 * blocks nobody else; a peer over its slot share (max_slots_per_peer, enforced only while
 * another peer waits) waits behind its own peer's frames only.
 *
 * Waiting: admit_try queues a request it cannot admit (its ticket is kept across retries)
 * and the owner pauses its input. When a slot or credit comes back (admit_put, admit_wake)
 * the layer's timer calls each queued request's xp->progress in ticket order, plus a
 * recheck every ADMIT_BACKSTOP_NS while anything waits (limits can change without a put;
 * ADMIT_RECHECK_NS while a deferred request waits for its transport).
 * A request that waited wait_timeout_ms with nothing given back meanwhile (the node made
 * no progress) is dequeued and handed to progress(expired).
 *
 * Control thread only. No allocation: requests live inside their owner's call state.
 */
#ifndef ING_CONTROL_ADMIT_H
#define ING_CONTROL_ADMIT_H

#include <stdbool.h>
#include <stdint.h>

#include "control/grpc/loop.h"
#include "dataplane/dataplane.h"

struct xport_ops;

/* What admission counts for a session (the core embeds it in its session). */
struct admit_credit {
	unsigned credits;    /* frames admitted and not yet given back, at most */
	unsigned inflight;   /* so many now */
};

/* What admission counts for a peer address (the core embeds it in its peer entry). */
struct admit_share {
	unsigned slots;      /* pool slots its frames hold */
};

#define ADMIT_RECHECK_NS 2000000ull     /* retry of a deferred request (ADMIT_LATER) */
#define ADMIT_BACKSTOP_NS 100000000ull  /* retry of the queue without a put or cancel */

/* What a request waits for (admit_req.why). */
enum admit_wait {
	ADMIT_NONE = 0,      /* not waiting */
	ADMIT_CREDIT,        /* its session has `credits` frames open: blocks nobody else */
	ADMIT_SLOT,          /* no free slot in the classes it may take */
	ADMIT_PEER,          /* its peer is over its slot share while another peer waits */
	ADMIT_LATER,         /* admitted, but its transport could not start it yet (a full
			      * job ring): retried like the others, blocks nobody */
};

/* One frame asking for admission; embedded in its owner's per-call state. */
struct admit_req {
	/* --- set by the owner before admit_try --- */
	const struct xport_ops *xp;   /* its progress() retries the request */
	void *owner;                  /* the owner's handle (its call) */
	struct admit_credit *credit;  /* its session's credits; NULL: none */
	struct admit_share *share;    /* its peer's slot share; NULL: not tracked */
	uint64_t length;              /* declared frame length (<= largest class) */
	int region;                   /* pool region its slot must come from (its rail's node:
				       * the bytes land local to the NIC that moves them), -1 any
				       * (the home region first) */
	/* --- kept by the admission layer --- */
	uint64_t ticket;              /* arrival order while queued (kept across retries) */
	uint64_t since_ns;            /* when it started waiting */
	uint8_t cls;                  /* smallest class that holds length */
	uint8_t why;                  /* enum admit_wait */
	bool queued;
	struct admit_req *next, *prev;
};

struct admit {
	struct ing_loop *loop;
	struct ing_pool *pool;
	unsigned nclasses;
	uint64_t class_size[ING_POOL_MAX_CLASSES];
	unsigned max_slots_per_peer;
	uint64_t wait_timeout_ns;
	struct admit_req *head, *tail;   /* queued, by ticket */
	unsigned nqueued;
	uint64_t tickets;
	uint64_t last_put_ns;            /* when a slot or credit last came back */
	struct ing_timer timer;          /* runs the retries (zero delay) and the recheck */
	bool timer_ready;
	bool in_run, run_again;
	/* counters (StatsReply, /metrics) */
	uint64_t c_waited;               /* requests that had to wait */
	uint64_t c_expired;              /* requests that waited wait_timeout_ms */
};

/*
 * Set up a (zeroed or fresh) struct admit over pool. max_slots_per_peer 0: no share.
 * wait_timeout_ms 0: requests wait until their owner cancels them. 0 or -EINVAL.
 */
int admit_init(struct admit *a, struct ing_loop *loop, struct ing_pool *pool,
	       unsigned max_slots_per_peer, uint32_t wait_timeout_ms);
/* Stop the timer; queued requests are forgotten (their owners are being freed). */
void admit_fini(struct admit *a);

/*
 * Take a credit of r->credit and a slot for r->length, in turn. 0: *f is the slot (cleared
 * below its buffer fields), r is off the queue, the session's inflight and the peer's
 * slot count are raised. -EAGAIN: not now; r is queued (r->why says for what) and its
 * progress() will be called. -EINVAL: length above the largest class (never queued).
 */
int admit_try(struct admit *a, struct admit_req *r, struct ing_frame **f);
/*
 * Queue r without trying (its frame was admitted and handed back because the transport
 * could not start it: admit_put first). Keeps its ticket if still queued. -EAGAIN.
 */
int admit_defer(struct admit *a, struct admit_req *r);
/* Drop a queued request (its frame is refused or its call ended). No-op if not queued. */
void admit_cancel(struct admit *a, struct admit_req *r);
/*
 * Give back what admit_try took for a frame: the slot f (NULL: kept by the dataplane,
 * only the counts), the credit and the slot share. Wakes the queue.
 */
void admit_put(struct admit *a, struct ing_frame *f, struct admit_credit *credit,
	       struct admit_share *share);
/* Capacity may have changed (credits raised, a session ended): retry the queue soon. */
void admit_wake(struct admit *a);
/* A peer with share p may take one more slot: under its share, or no other peer waits. */
bool admit_peer_slot_ok(const struct admit *a, const struct admit_share *p);
/* The size class that holds len (nclasses when none does). */
unsigned admit_class_of(const struct admit *a, uint64_t len);

#endif
