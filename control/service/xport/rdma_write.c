/* SPDX-License-Identifier: Apache-2.0 */
/*
 * svc_rdma_write.c - transport xport_rdma_write: RDMA WRITE push (docs/PUSH.md). The
 * descriptors come on ControlStream like for RDMA READ (svc_ctl.c admits and parks them);
 * for a session that negotiated TRANSPORT_RDMA_WRITE the admitted frame goes to its QP's
 * lcore as a push job: the lcore binds a type-2 memory window over exactly the slot (or
 * uses the pool MR when the device has none) and says GRANTED; the core answers that with
 * Ack{GRANTED, grantId, grantAddr, grantRkey, grantLength, grantQpNum} on the frame's call.
 * The producer's WRITE WITH IMM, the length check and the invalidation are the lcore's
 * (dataplane/rdma/rdma_poller.c); RECEIVED and everything after are the core's, as for a
 * READ (the control mailbox serves both transports).
 * Ownership: XPORT_F_DATAPLANE: the lcore holds the frame from ing_rdma_submit until it
 * comes back as DONE; it bounds an unwritten grant by the grant timeout.
 */
#include "control/service/xport.h"
#include "dataplane/dataplane.h"
#include "dataplane/rdma/rdma.h"

#include <errno.h>

static int write_start(struct svc_frame *e)
{
	struct ing_rdma *r = svc_rdma_engine(svc_frame_service(e));
	struct ing_frame *f = svc_frame_ing(e);

	f->push = true;   /* the lcore grants the slot instead of reading */
	f->raddr = 0;
	f->rkey = 0;
	return r ? ing_rdma_submit(r, f) : -ENOTCONN;
}

const struct xport_ops xport_rdma_write = {
	.name = "rdma-write",
	.xport = ING_XPORT_RDMA,
	.flags = XPORT_F_DATAPLANE,
	.start = write_start,
	.progress = svc_ctl_progress,
	.conn_lost = svc_ctl_conn_lost,
};
