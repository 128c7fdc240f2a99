/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rdma_job.h - how the two RDMA transports start a frame (rdma_job.c); their ops tables are with
 * their descriptor stream, ControlStream (ctl.c).
 */
#ifndef ING_SERVICE_XPORT_RDMA_JOB_H
#define ING_SERVICE_XPORT_RDMA_JOB_H

struct svc_frame;

/* xport_rdma_read: the lcore of the session's QP RDMA READs the frame into its slot. */
int xport_rdma_read_start(struct svc_frame *e);
/* xport_rdma_write: the lcore grants the slot for the producer's RDMA WRITE WITH IMM. */
int xport_rdma_write_start(struct svc_frame *e);

#endif
