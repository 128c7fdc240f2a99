/* SPDX-License-Identifier: Apache-2.0 */
/*
 * engine.c - the RDMA engine (dataplane/rdma/rdma.h) on the control thread: its rdma_cm
 * channel on the loop, its housekeeping timer, and the callbacks it makes into the service
 * (a connect request's session check, a connection up or down, the device gone or back).
 * The transports that use the engine (ControlStream's RDMA READ and WRITE push, xport/ctl.c)
 * hand it their frames through xport/rdma_job.c, which finds it in the service's env; the
 * lcores' connection events arrive on the control mailbox (core.c).
 */
#include "control/service/state.h"
#include "control/service/rails.h"
#include "common/clock.h"
#include "common/log.h"
#include "dataplane/rdma/rdma.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define COMP "svc-rdma"

static int cb_session_check(void *arg, uint64_t session_id)
{
	struct ing_svc *s = arg;
	struct svc_session *ss = svc_session_find(s, session_id);

	if (s->env.stopping)
		return -ESHUTDOWN;
	if (!ss)
		return -ENOENT;
	if (ss->transport != ING_XPORT_RDMA)
		return -EPERM;
	return 0;
}

/* The rail session_id negotiated, -1 none (or no such session: session_check refuses it). */
static int cb_session_rail(void *arg, uint64_t session_id)
{
	struct svc_session *ss = svc_session_find(arg, session_id);

	return ss ? ss->rail : -1;
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
	unsigned n = ing_rdma_nrails(s->env.rdma), nup = ing_rdma_rails_up(s->env.rdma);

	if (!nup)
		return;   /* device_lost says it */
	s->o.rdma.rdma_addr = ing_rdma_addr(s->env.rdma);
	s->o.rdma.rdma_port = ing_rdma_port(s->env.rdma);
	snprintf(s->note, sizeof(s->note), "rdma: %u of %u rails up (rail %u %s%s%s); producers are "
		 "sent to %s:%u", nup, n, rail, up ? "back" : "down", up ? "" : ": ", up ? "" : why,
		 s->o.rdma.rdma_addr, s->o.rdma.rdma_port);
	struct ing_rdma_rail_info ri;
	const char *dev = ing_rdma_rail_info(s->env.rdma, rail, &ri) == 0 ? ri.device : "?";
	if (up)
		ING_WARN(COMP, "rail %u (%s) is back: %u of %u rails serve", rail, dev, nup, n);
	else
		ING_ERR(COMP, "rail %u (%s) down (%s): %u of %u rails serve; sessions that name no rail "
			"go to %s:%u", rail, dev, why, nup, n, s->o.rdma.rdma_addr, s->o.rdma.rdma_port);
}

unsigned svc_engine_rails(const struct ing_svc *s, struct svc_rail *out, unsigned max)
{
	unsigned n = 0;
	uint64_t now = ing_now_ns();
	struct timespec rt;

	clock_gettime(CLOCK_REALTIME, &rt);
	int64_t now_ms = (int64_t)rt.tv_sec * 1000 + rt.tv_nsec / 1000000;
	for (unsigned i = 0; s->env.rdma && i < ing_rdma_nrails(s->env.rdma) && n < max; i++) {
		struct svc_rail *o = &out[n];
		if (ing_rdma_rail_info(s->env.rdma, i, &o->info) || ing_rdma_rail_stats(s->env.rdma, i, &o->st))
			break;
		uint64_t ago = !o->info.up && o->info.down_since_ns && now > o->info.down_since_ns
			       ? now - o->info.down_since_ns : 0;
		o->down_s = (double)ago / 1e9;
		o->down_since_unix_ms = !o->info.up && o->info.down_since_ns
					? now_ms - (int64_t)(ago / 1000000) : 0;
		n++;
	}
	return n;
}

unsigned svc_engine_lcores(const struct ing_svc *s, struct svc_lcore *out, unsigned max)
{
	unsigned nl = ing_rdma_nlcores(s->env.rdma), n = 0;

	for (unsigned i = 0; i < nl && n < max; i++) {
		struct svc_lcore *o = &out[n];
		if (ing_rdma_lcore_info(s->env.rdma, i, &o->info) ||
		    ing_rdma_lcore_stats(s->env.rdma, i, &o->id, &o->st))
			continue;
		n++;
	}
	return n;
}

int svc_engine_session_region(const struct ing_svc *s, uint64_t session_id)
{
	if (!s->env.rdma || !session_id)
		return -1;
	int region = ing_rdma_session_region(s->env.rdma, session_id);
	const struct svc_session *ss = region < 0 ? svc_session_find((struct ing_svc *)s, session_id) : NULL;
	struct ing_rdma_rail_info ri;
	if (ss && ss->rail >= 0 && ing_rdma_rail_info(s->env.rdma, (unsigned)ss->rail, &ri) == 0)
		region = (int)ri.region;
	return region;
}

void svc_engine_rdma_target(const struct ing_svc *s, const char *peer, const char **addr,
			    uint16_t *port, int *rail)
{
	unsigned i;

	*addr = s->o.rdma.rdma_addr ? s->o.rdma.rdma_addr : "";
	*port = s->o.rdma.rdma_port;
	if (rail)
		*rail = -1;
	if (s->env.rdma && ing_rdma_rail_for_peer(s->env.rdma, peer, &i, addr, port) == 0 && rail)
		*rail = (int)i;
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

	ing_rdma_cm_dispatch(s->env.rdma);
}

static void tick_cb(void *arg)
{
	struct ing_svc *s = arg;

	ing_rdma_tick(s->env.rdma);
	ing_timer_arm(s->loop, &s->rdma_tick, ing_now_ns() + ING_RDMA_TICK_MS * 1000000ull);
}

static void engine_detach(struct ing_svc *s)
{
	if (!s->env.rdma)
		return;
	ing_timer_cancel(s->loop, &s->rdma_tick);
	ing_loop_del_fd(s->loop, ing_rdma_cm_fd(s->env.rdma));
	s->env.rdma = NULL;
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
		.session_rail = cb_session_rail,
	};

	engine_detach(s);
	if (!r)
		return 0;
	int rc = ing_loop_add_fd(s->loop, ing_rdma_cm_fd(r), EPOLLIN, cm_cb, s);
	if (rc) {
		ING_ERR(COMP, "cannot watch the rdma_cm channel: %s", strerror(-rc));
		return rc;
	}
	s->env.rdma = r;
	ing_rdma_set_cbs(r, &cbs);
	/* every rail open but none serving (their links down at start): the fallback until the
	 * first link is ACTIVE (the engine calls device_back then) */
	if (ing_rdma_nrails(r) && !ing_rdma_rails_up(r))
		cb_device_lost(s, ing_rdma_nrails(r) > 1 ? "every RDMA rail's link down" : "RDMA link down");
	ing_timer_init(&s->rdma_tick, tick_cb, s);
	ing_timer_arm(s->loop, &s->rdma_tick, ing_now_ns() + ING_RDMA_TICK_MS * 1000000ull);
	return 0;
}
