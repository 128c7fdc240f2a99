/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rdma_job.c - the start of the two RDMA transports, glue to dataplane/rdma/rdma.h: the
 * admitted frame goes to the lcore of its session's QP (ing_rdma_submit).
 *   xport_rdma_read   the lcore RDMA READs what the FrameMeta describes
 *   xport_rdma_write  push (docs/PUSH.md): the lcore binds a type-2 memory window over
 *                     exactly the slot (or uses the pool MR when the device has none) and
 *                     says GRANTED; the core answers that with Ack{GRANTED, grantId,
 *                     grantAddr, grantRkey, grantLength, grantQpNum}. The producer's WRITE
 *                     WITH IMM, the length check and the invalidation are the lcore's.
 * (The engine itself is the core's: engine.c runs its CM channel, timer and callbacks.)
 * Ownership (XPORT_F_DATAPLANE): a frame belongs to the lcore from ing_rdma_submit until
 * it comes back on the control mailbox as DONE; the core never frees its slot before
 * that (no frame timer, a closing call only detaches), which the lcore bounds by park_ms,
 * drain_ms and the grant timeout. A failed transfer comes back with its status and the
 * core fails it. RECEIVED and everything after are the core's, as for the fallback.
 */
#include "control/service/transport.h"
#include "control/service/xport/rdma_job.h"
#include "dataplane/rdma/rdma.h"

#include <errno.h>

/* No "connected" test: a session between a failed QP and its reconnect still takes jobs
 * (the lcore parks them); ing_rdma_submit says -ENOTCONN if it never connected and
 * -ENOBUFS when the lcore's mailbox is full (it holds a job per pool slot: cannot be). */
int xport_rdma_read_start(struct svc_frame *e)
{
	struct ing_rdma *r = e->env->rdma;

	if (e->stripe_meta) {   /* its FrameMeta names parts over several rails */
		const H3000__FrameMeta *m = e->stripe_meta;
		e->stripe_meta = NULL;
		return xport_stripe_start(e, m, false);
	}
	return r ? ing_rdma_submit(r, e->f) : -ENOTCONN;
}

int xport_rdma_write_start(struct svc_frame *e)
{
	struct ing_rdma *r = e->env->rdma;
	struct ing_frame *f = e->f;

	if (e->stripe_meta) {   /* its FrameMeta names parts: one grant per part, per rail */
		const H3000__FrameMeta *m = e->stripe_meta;
		e->stripe_meta = NULL;
		return xport_stripe_start(e, m, true);
	}
	f->push = true;   /* the lcore grants the slot instead of reading */
	f->raddr = 0;
	f->rkey = 0;
	return r ? ing_rdma_submit(r, f) : -ENOTCONN;
}
