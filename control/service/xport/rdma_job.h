/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rdma_job.h - how the two RDMA transports start a frame (rdma_job.c); their ops tables are with
 * their descriptor stream, ControlStream (ctl.c).
 */
#ifndef ING_SERVICE_XPORT_RDMA_JOB_H
#define ING_SERVICE_XPORT_RDMA_JOB_H

#include <stdbool.h>
#include <stddef.h>

#include "control/service/pb.h"

struct ing_frame;
struct svc_frame;

/* xport_rdma_read: the lcore of the session's QP RDMA READs the frame into its slot. */
int xport_rdma_read_start(struct svc_frame *e);
/* xport_rdma_write: the lcore grants the slot for the producer's RDMA WRITE WITH IMM. */
int xport_rdma_write_start(struct svc_frame *e);


/* Striped frames (stripe.c; docs/ARCHITECTURE.md "Striping"). */
/* The parts of m (FrameMeta.stripe) have a shape the node takes, over a node of nrails
 * rails: 0, or -EINVAL with why (the refusal's text, INVALID_ARGUMENT). */
int xport_stripe_check(const H3000__FrameMeta *m, unsigned nrails, char *why, size_t whylen);
/* The start of a frame whose FrameMeta names parts: each part to the lcore of its rail's
 * session, to be read (push false) or granted for the producer's WRITE (push true); a node
 * that does not stripe moves the frame whole. 0 or -errno. */
int xport_stripe_start(struct svc_frame *e, const H3000__FrameMeta *m, bool push);
/* The control mailbox's ING_EV_PART_IN of part p of e; a failed part's ING_EV_DONE. */
void xport_stripe_part_in(struct svc_frame *e, struct ing_frame *p);
void xport_stripe_part_failed(struct svc_frame *e, struct ing_frame *p);
/* The frame's record goes back (frame_release): its parts' state with it. */
void xport_stripe_free(struct svc_frame *e);

#endif
