/* SPDX-License-Identifier: Apache-2.0 */
/*
 * svc_rdma.c - transport xport_rdma_read: the node RDMA READs each frame ControlStream
 * describes (svc_ctl.c parks and retries the descriptors), glue to
 * dataplane/rdma/rdma.h.
 *   start       hand the admitted frame to its QP's lcore (ing_rdma_submit)
 * (The engine itself is the core's: svc_engine.c runs its CM channel, timer and callbacks.)
 * Ownership: a frame admitted for RDMA belongs to the lcore from ing_rdma_submit until it
 * comes back on the control mailbox as DONE (XPORT_F_DATAPLANE); the core never frees its
 * slot before that (no frame timer, a closing call only detaches), which the lcore bounds
 * by park_ms / drain_ms. A failed READ comes back with its status and the core fails it.
 */
#include "control/service/xport.h"
#include "dataplane/rdma/rdma.h"

#include <errno.h>

/* No "connected" test: a session between a failed QP and its reconnect still takes jobs
 * (the lcore parks them); ing_rdma_submit says -ENOTCONN if it never connected and
 * -ENOBUFS when the lcore's mailbox is full. */
static int rdma_start(struct svc_frame *e)
{
	struct ing_rdma *r = svc_rdma_engine(svc_frame_service(e));

	return r ? ing_rdma_submit(r, svc_frame_ing(e)) : -ENOTCONN;
}

const struct xport_ops xport_rdma_read = {
	.name = "rdma-read",
	.xport = ING_XPORT_RDMA,
	.flags = XPORT_F_DATAPLANE,
	.start = rdma_start,
	.progress = svc_ctl_progress,
	.conn_lost = svc_ctl_conn_lost,
};

