/* SPDX-License-Identifier: Apache-2.0 */
/*
 * svc_engine.c - the RDMA engine (dataplane/rdma/rdma.h) on the control thread: its
 * rdma_cm channel on the loop, its housekeeping timer, and the callbacks it makes into the
 * service (a connect request's session check, a connection up or down, the device gone or
 * back). The transports that use the engine are svc_rdma.c (READ) and svc_rdma_write.c
 * (WRITE push); the lcores' connection events arrive on the control mailbox (svc.c).
 */
#include "control/svc_internal.h"
#include "common/clock.h"
#include "common/log.h"
#include "dataplane/rdma/rdma.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#define COMP "svc-rdma"

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

static void cb_device_lost(void *arg, const char *why)
{
	struct ing_svc *s = arg;

	s->o.rdma.rdma_available = false;
	snprintf(s->note, sizeof(s->note), "rdma: %s; fallback active", why);
	s->c_fallback++;
	ING_ERR(COMP, "%s: Negotiate offers only the gRPC stream from now on", why);
}

/* One rail down or back while others serve: Negotiate points producers at a rail that is
 * up (svc_engine_rdma_target asks the engine each time); the note says how many are up. */
static void cb_rail_state(void *arg, unsigned rail, bool up, const char *why)
{
	struct ing_svc *s = arg;
	unsigned n = ing_rdma_nrails(s->rdma), nup = ing_rdma_rails_up(s->rdma);

	if (!nup)
		return;   /* device_lost says it */
	s->o.rdma.rdma_addr = ing_rdma_addr(s->rdma);
	s->o.rdma.rdma_port = ing_rdma_port(s->rdma);
	snprintf(s->note, sizeof(s->note), "rdma: %u of %u rails up (rail %u %s%s%s); producers are "
		 "sent to %s:%u", nup, n, rail, up ? "back" : "down", up ? "" : ": ", up ? "" : why,
		 s->o.rdma.rdma_addr, s->o.rdma.rdma_port);
	if (up)
		ING_WARN(COMP, "rail %u is back: %u of %u rails serve", rail, nup, n);
	else
		ING_ERR(COMP, "rail %u down (%s): %u of %u rails serve; new sessions go to %s:%u", rail,
			why, nup, n, s->o.rdma.rdma_addr, s->o.rdma.rdma_port);
}

int svc_engine_session_region(const struct ing_svc *s, uint64_t session_id)
{
	return s->rdma && session_id ? ing_rdma_session_region(s->rdma, session_id) : -1;
}

void svc_engine_rdma_target(const struct ing_svc *s, const char *peer, const char **addr,
			    uint16_t *port)
{
	*addr = s->o.rdma.rdma_addr ? s->o.rdma.rdma_addr : "";
	*port = s->o.rdma.rdma_port;
	if (s->rdma)
		(void)ing_rdma_rail_for_peer(s->rdma, peer, NULL, addr, port);
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

static void cm_cb(void *arg, uint32_t events)
{
	struct ing_svc *s = arg;
	(void)events;

	ing_rdma_cm_dispatch(s->rdma);
}

static void tick_cb(void *arg)
{
	struct ing_svc *s = arg;

	ing_rdma_tick(s->rdma);
	ing_timer_arm(s->loop, &s->rdma_tick, ing_now_ns() + ING_RDMA_TICK_MS * 1000000ull);
}

void svc_engine_detach(struct ing_svc *s)
{
	if (!s->rdma)
		return;
	ing_timer_cancel(s->loop, &s->rdma_tick);
	ing_loop_del_fd(s->loop, ing_rdma_cm_fd(s->rdma));
	s->rdma = NULL;
}

int ing_svc_attach_rdma(struct ing_svc *s, struct ing_rdma *r)
{
	struct ing_rdma_cbs cbs = {
		.arg = s,
		.session_check = cb_session_check,
		.conn_state = cb_conn_state,
		.device_lost = cb_device_lost,
		.device_back = cb_device_back,
		.rail_state = cb_rail_state,
	};

	svc_engine_detach(s);
	if (!r)
		return 0;
	int rc = ing_loop_add_fd(s->loop, ing_rdma_cm_fd(r), EPOLLIN, cm_cb, s);
	if (rc) {
		ING_ERR(COMP, "cannot watch the rdma_cm channel: %s", strerror(-rc));
		return rc;
	}
	s->rdma = r;
	ing_rdma_set_cbs(r, &cbs);
	ing_timer_init(&s->rdma_tick, tick_cb, s);
	ing_timer_arm(s->loop, &s->rdma_tick, ing_now_ns() + ING_RDMA_TICK_MS * 1000000ull);
	return 0;
}
