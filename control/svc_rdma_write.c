/* SPDX-License-Identifier: Apache-2.0 */
/*
 * svc_rdma_write.c - transport xport_rdma_write: RDMA WRITE push (docs/PUSH.md). The
 * descriptors come on ControlStream like for RDMA READ (svc_ctl.c admits and parks them);
 * for a session that negotiated TRANSPORT_RDMA_WRITE the admitted frame goes to its QP's
 * lcore as a push job: the lcore binds a type-2 memory window over exactly the slot (or
 * uses the pool MR when the device has none) and says GRANTED; this file answers that with
 * Ack{GRANTED, grantId, grantAddr, grantRkey, grantLength, grantQpNum} on the frame's call.
 * The producer's WRITE WITH IMM, the length check and the invalidation are the lcore's
 * (dataplane/rdma/rdma_poller.c); RECEIVED and everything after are the core's, as for a
 * READ (the control mailbox serves both transports).
 * Ownership: XPORT_F_DATAPLANE: the lcore holds the frame from ing_rdma_submit until it
 * comes back as DONE; it bounds an unwritten grant by the grant timeout.
 */
#include "control/svc_internal.h"
#include "common/log.h"
#include "dataplane/rdma/rdma.h"
#include "h3000.pb-c.h"

#include <errno.h>

static int write_start(struct svc_frame *e)
{
	e->f->push = true;   /* the lcore grants the slot instead of reading */
	e->f->raddr = 0;
	e->f->rkey = 0;
	return e->svc->rdma ? ing_rdma_submit(e->svc->rdma, e->f) : -ENOTCONN;
}

const struct xport_ops xport_rdma_write = {
	.name = "rdma-write",
	.xport = ING_XPORT_RDMA,
	.flags = XPORT_F_DATAPLANE,
	.start = write_start,
	.progress = svc_ctl_progress,
	.conn_lost = svc_ctl_conn_lost,
};

/* The slot is open for the producer's WRITE: Ack{GRANTED} to the frame's call. A frame
 * whose call is gone is never written: its grant expires in the lcore. The lcore still
 * owns the frame: only what admission set is read here (buf, length, ids). */
void svc_rdma_write_granted(struct svc_frame *e, uint32_t grant_id, uint32_t grant_rkey,
			    uint32_t qp_num)
{
	if (e->xp != &xport_rdma_write || !e->call)
		return;
	struct svc_ack a = {
		.ok = true,
		.stage = H3000__ACK_STAGE__ACK_STAGE_GRANTED,
		.grant_id = grant_id,
		.grant_rkey = grant_rkey,
		.grant_qp = qp_num,
		.grant_addr = (uint64_t)(uintptr_t)e->f->buf,
		.grant_length = e->f->length,
	};
	svc_ack_set_id(&a, e->f->wafer_id, e->f->frame_id);
	svc_send_ack(e->call, &a);
}
