/* SPDX-License-Identifier: Apache-2.0 */
/*
 * svc_rdma.c - transport xport_rdma_read: the node RDMA READs each frame ControlStream
 * describes (svc_ctl.c parks and retries the descriptors), glue to
 * dataplane/rdma/rdma.h.
 *   start       hand the admitted frame to its QP's lcore (ing_rdma_submit)
 *   engine cbs  session check, RECEIVED notices, connection state, device removal
 * Ownership: a frame admitted for RDMA belongs to the lcore from ing_rdma_submit until it
 * comes back on the ack ring (XPORT_F_DATAPLANE); the core never frees its slot before
 * that (no frame timer, a closing call only detaches), which the lcore bounds by
 * park_ms / drain_ms. A failed READ comes back with its status and the core fails it.
 */
#include "control/svc_internal.h"
#include "common/clock.h"
#include "common/log.h"
#include "dataplane/rdma/rdma.h"
#include "h3000.pb-c.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>

#define COMP "svc-rdma"

/* No "connected" test: a session between a failed QP and its reconnect still takes jobs
 * (the lcore parks them); ing_rdma_submit says -ENOTCONN if it never connected and
 * -ENOBUFS when the lcore's job ring is full. */
static int rdma_start(struct svc_frame *e)
{
	return e->svc->rdma ? ing_rdma_submit(e->svc->rdma, e->f) : -ENOTCONN;
}

const struct xport_ops xport_rdma_read = {
	.name = "rdma-read",
	.xport = ING_XPORT_RDMA,
	.flags = XPORT_F_DATAPLANE,
	.start = rdma_start,
	.progress = svc_ctl_progress,
	.conn_lost = svc_ctl_conn_lost,
};

/* ---------------------------------------------------------------- engine callbacks */

static int cb_session_check(void *arg, uint64_t session_id)
{
	struct ing_svc *s = arg;
	struct svc_session *ss = svc_session_find(s, session_id);

	if (s->stopping)
		return -ESHUTDOWN;
	if (!ss)
		return -ENOENT;
	if (ss->transport != ING_XPORT_RDMA)
		return -EPERM;
	return 0;
}

static void cb_conn_state(void *arg, uint64_t session_id, bool up)
{
	struct ing_svc *s = arg;
	struct svc_session *ss = up ? svc_session_find(s, session_id) : NULL;
	if (ss && ss->rdma_seen)
		s->m.rdma_reconnects++;
	if (ss)
		ss->rdma_seen = true;
	struct ing_log_ctx lc = ss ? svc_log_session(ss) : (struct ing_log_ctx){ .session = session_id };
	ING_LOGC(ING_LOG_INFO, COMP, &lc, "session %" PRIu64 ": RDMA connection %s", session_id,
		 up ? "up" : "down");
}

static void cb_received(void *arg, const struct ing_rdma_notice *n)
{
	struct ing_svc *s = arg;
	struct svc_frame *e = svc_frame_by_cookie(s, n->cookie, n->gen, &xport_rdma_read);

	if (!e)   /* or pushed by the producer (svc_rdma_write.c): same RECEIVED step */
		e = svc_frame_by_cookie(s, n->cookie, n->gen, &xport_rdma_write);
	if (e) /* else: DURABLE (or a failure) got there first */
		svc_frame_received(e, n->t_ns);
}

static void cb_device_lost(void *arg, const char *why)
{
	struct ing_svc *s = arg;

	s->o.rdma.rdma_available = false;
	snprintf(s->note, sizeof(s->note), "rdma: %s; fallback active", why);
	s->c_fallback++;
	ING_ERR(COMP, "%s: Negotiate offers only the gRPC stream from now on", why);
}

static void cb_device_back(void *arg, const char *addr, uint16_t port)
{
	struct ing_svc *s = arg;

	s->o.rdma.rdma_available = true;
	s->o.rdma.rdma_addr = addr;
	s->o.rdma.rdma_port = port;
	snprintf(s->note, sizeof(s->note), "rdma: %s:%u; fallback available", addr, port);
	ING_WARN(COMP, "RDMA is back on %s:%u: Negotiate offers RDMA again", addr, port);
}

void ing_svc_attach_rdma(struct ing_svc *s, struct ing_rdma *r)
{
	struct ing_rdma_cbs cbs = {
		.arg = s,
		.session_check = cb_session_check,
		.conn_state = cb_conn_state,
		.received = cb_received,
		.device_lost = cb_device_lost,
		.device_back = cb_device_back,
		.granted = svc_rdma_write_granted,
	};

	s->rdma = r;
	if (r)
		ing_rdma_set_cbs(r, &cbs);
}
