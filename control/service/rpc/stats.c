/* SPDX-License-Identifier: Apache-2.0 */
/*
 * stats.c - rpc Stats: the node's counters, latencies, lcores, fleet export, object store
 * tier and what on-call reads, in one StatsReply (with a token, only for "authorization:
 * Bearer <token>"). The numbers are the ones /metrics shows (obs/): counted once
 * (service/counters.c), read by both.
 */
#include "control/service/state.h"
#include "control/service/auth.h"
#include "control/service/pb.h"
#include "control/service/rails.h"
#include "control/service/rpc/unary.h"
#include "common/clock.h"
#include "control/fleet/fleet.h"
#include "dataplane/rdma/rdma.h"
#include "dataplane/tier/tier.h"
#include "h3000.pb-c.h"

#include <string.h>

/* StatsReply.lcores (85): each dataplane lcore's placement and counters. Returns the count. */
static size_t lcore_stats(struct ing_svc *s, H3000__LcoreStats *lcs, H3000__LcoreStats **lcp)
{
	struct svc_lcore sl[ING_RDMA_MAX_LCORES];
	unsigned n = svc_engine_lcores(s, sl, ING_RDMA_MAX_LCORES), k = 0;

	for (unsigned i = 0; i < n; i++) {
		const struct ing_rdma_lcore_info *in = &sl[i].info;
		const struct ing_rdma_lcore_stats *st = &sl[i].st;
		H3000__LcoreStats *l = &lcs[k];
		h3000__lcore_stats__init(l);
		l->lcore = in->lcore_id;
		l->numanode = in->numa_node;
		l->connections = in->conns;
		l->sessions = in->sessions;
		l->framesheld = in->frames_held;
		l->framesreceived = st->frames_ok;
		l->bytesreceived = st->bytes_received;
		l->framesfailed = st->frames_failed;
		l->readsposted = st->reads_posted;
		l->pushframesreceived = st->push_frames_ok;
		l->completionerrors = st->wc_errors;
		l->busyns = st->busy_ns;
		l->polls = st->polls;
		l->idlepolls = st->idle_polls;
		l->sleeps = st->sleeps;
		lcp[k++] = l;
	}
	return k;
}

/* StatsReply.rails (86): every rail, up or down, and what it moved. Returns the count. */
static size_t rail_stats(struct ing_svc *s, struct svc_rail *sr, H3000__RailStats *rs,
			 H3000__RailStats **rsp)
{
	unsigned n = svc_engine_rails(s, sr, ING_RDMA_MAX_RAILS);

	for (unsigned i = 0; i < n; i++) {
		H3000__RailStats *p = &rs[i];
		h3000__rail_stats__init(p);
		p->index = i;
		p->device = sr[i].info.device;
		p->rdmaaddr = sr[i].info.addr;
		p->rdmaport = sr[i].info.port;
		p->numanode = sr[i].info.numa_node;
		p->linkmbps = sr[i].info.link_mbps;
		p->state = sr[i].info.up ? H3000__RAIL_STATE__RAIL_UP : H3000__RAIL_STATE__RAIL_DOWN;
		p->why = sr[i].info.why;
		p->downseconds = sr[i].down_s;
		p->downsinceunixms = sr[i].down_since_unix_ms;
		p->downs = sr[i].info.downs;
		p->connections = sr[i].st.conns;
		p->framesreceived = sr[i].st.frames_received;
		p->bytesreceived = sr[i].st.bytes_received;
		p->framesfailed = sr[i].st.frames_failed;
		p->completionerrors = sr[i].st.completion_errors;
		p->partsreceived = sr[i].st.parts_received;
		rsp[i] = p;
	}
	return n;
}

/* StatsReply's fleet fields (50-56) */
static void fleet_stats(struct ing_svc *s, H3000__StatsReply *r)
{
	if (!s->fleet)
		return;
	struct ing_fleet_stats st;
	ing_fleet_get_stats(s->fleet, &st);
	r->fleetexportlagrows = st.lag_rows;
	r->fleetexportlagseconds = st.lag_seconds;
	r->fleetexportedrows = st.exported;
	r->fleetexporterrors = st.errors;
	r->fleetpgup = st.pg_up;
	r->fleetnodeid = (char *)ing_fleet_node_id(s->fleet);
	r->fleetnodestate = svc_pb_member_state(ing_fleet_state(s->fleet));
}

/* StatsReply.tier (60), filled from st (both the caller's, alive until the reply is packed) */
static void tier_stats(struct ing_svc *s, H3000__StatsReply *r, H3000__TierStats *p,
		       struct ing_tier_stats *st)
{
	if (!s->tier)
		return;
	ing_tier_get_stats(s->tier, st);
	h3000__tier_stats__init(p);
	p->enabled = st->enabled;
	p->store = st->store;
	p->storestate = (H3000__TierStoreState)st->store_state;   /* same numbers (tier.h) */
	p->storeerror = st->store_error;
	p->backlogframes = st->backlog_frames;
	p->backlogbytes = st->backlog_bytes;
	p->lagseconds = st->lag_seconds;
	p->uploadedframes = st->uploaded_frames;
	p->uploadedbytes = st->uploaded_bytes;
	p->uploadbytespersecond = st->upload_bytes_per_second;
	p->uploaderrors = st->upload_errors;
	p->uploadsinprogress = st->uploads_in_progress;
	p->alreadystored = st->already_stored;
	p->conflicts = st->conflicts;
	p->digestmismatches = st->digest_mismatches;
	p->readbacks = st->read_backs;
	p->storecause = (char *)st->store_cause;
	p->verification = (char *)st->verification;
	p->locationsknown = st->census_done;
	p->frameslocal = st->frames_local;
	p->framesboth = st->frames_both;
	p->framestiered = st->frames_tiered;
	p->localbytes = st->local_bytes;
	p->localdeleted = st->local_deleted;
	p->refusing = s->tier_refusing;
	p->refusedframes = s->c_tier_refused;
	p->highwaterpercent = st->high_water_pct;
	p->highwaterbytes = st->high_water_bytes;
	p->diskusedpercent = st->usage_pct;
	p->localretentionms = st->retention_ms;
	r->tier = p;
}

/* StatsReply fields 70-79: failures by code, connections, the node's facts (storage
 * static: control thread, used before the reply is packed) */
static void ops_stats(struct ing_svc *s, H3000__StatsReply *r)
{
	/* static: the reply is packed by the caller before the next Stats on this thread */
	static H3000__FailureCount fc[SVC_OPS_CODES], *fcp[SVC_OPS_CODES];
	static struct ing_svc_node_info info;
	struct svc_ops *o = &s->ops;
	unsigned n = 0;

	for (unsigned c = 1; c < SVC_OPS_CODES; c++) {
		if (!o->failures[c])
			continue;
		h3000__failure_count__init(&fc[n]);
		fc[n].code = (H3000__ErrorCode)c;
		fc[n].count = o->failures[c];
		fcp[n] = &fc[n];
		n++;
	}
	r->n_failures = n;
	r->failures = fcp;
	r->connections = ing_grpc_server_nconns(s->srv);
	memset(&info, 0, sizeof(info));
	info.ready = true;
	if (o->info_fn)
		o->info_fn(o->info_arg, &info);
	r->diskfreebytes = info.disk_free;
	r->disksizebytes = info.disk_size;
	r->poolhugepages = info.pool_hugepages;
	r->poolbytes = info.pool_bytes;
	r->ready = info.ready;
	r->notready = info.not_ready;
}

static int stats_msg(struct ing_grpc_call *c, const uint8_t *msg, size_t len)
{
	struct ing_svc *s = ing_grpc_call_user(c);
	H3000__StatsReply r = H3000__STATS_REPLY__INIT;
	(void)msg;
	(void)len;
	int rc = svc_require_bearer(s, c, "Stats");
	if (rc)
		return rc;
	unsigned rdma = 0, fb = 0, npush = 0;
	for (unsigned i = 0; i < s->o.max_sessions; i++) {
		if (!s->sess[i].in_use)
			continue;
		npush += s->sess[i].push;
		if (s->sess[i].transport == ING_XPORT_RDMA)
			rdma++;
		else
			fb++;
	}
	r.uptimens = ing_now_ns() - s->t_start_ns;
	r.framesreceived = s->c_received;
	r.framesdurable = s->c_durable;
	r.framesfailed = s->c_failed;
	r.framesduplicate = s->c_dup;
	r.bytesreceived = s->c_bytes_rx;
	r.bytesdurable = s->c_bytes_durable;
	r.sessionsactive = s->nsess;
	r.sessionsrdma = rdma;
	r.sessionsfallback = fb;
	r.poolslotstotal = ing_pool_total(s->pool);
	r.poolslotsfree = ing_pool_free(s->pool);
	r.framesinflight = s->nfr_used;
	const struct ing_hist *dur = &s->lat[SVC_LAT_DURABLE];
	r.acklatencyp50ns = ing_hist_quantile(dur, 0.50);
	r.acklatencyp95ns = ing_hist_quantile(dur, 0.95);
	r.acklatencyp99ns = ing_hist_quantile(dur, 0.99);
	r.rdmareaderrors = s->c_rdma_errors;
	r.fallbackswitches = s->c_fallback;
	r.transportnote = s->note;
	r.framesrefused = s->c_refused;
	if (s->env.rdma) {   /* per-lcore counters of the RDMA data plane, summed */
		struct ing_rdma_stats rs;
		ing_rdma_get_stats(s->env.rdma, &rs);
		r.rdmabytesread = rs.bytes_read;
		r.rdmareadsposted = rs.reads_posted;
		r.rdmacompletions = rs.completions;
		r.rdmapolleridlesleeps = rs.sleeps;
		r.rdmapollerbusyns = rs.busy_ns;
		r.rdmapollerpolls = rs.polls;
		r.rdmapolleridlepolls = rs.idle_polls;
		r.rdmaconnsactive = rs.conns_active;
		r.pushgrants = rs.push_grants;
		r.pushframesreceived = rs.push_frames_ok;
		r.pushgranterrors = rs.push_grant_errors;
		r.pushmemorywindow = ing_rdma_push_mode(s->env.rdma) == 1;
	}
	r.sessionspush = npush;
	r.ctlframesparked = s->c_ctl_parked;
	H3000__LcoreStats lcs[ING_RDMA_MAX_LCORES], *lcp[ING_RDMA_MAX_LCORES];
	r.lcores = lcp;
	r.n_lcores = lcore_stats(s, lcs, lcp);
	struct svc_rail sr[ING_RDMA_MAX_RAILS];
	H3000__RailStats rs[ING_RDMA_MAX_RAILS], *rsp[ING_RDMA_MAX_RAILS];
	r.rails = rsp;
	r.n_rails = rail_stats(s, sr, rs, rsp);
	/* the /metrics histograms (obs/metrics.c), from the same latency view */
	enum { NH = 2 + SVC_METRIC_STAGES };
	const char *names[NH] = { "ack_received", "ack_durable" };
	const struct ing_hist *hs[NH] = { &s->lat[SVC_LAT_RECEIVED_ALL], &s->lat[SVC_LAT_DURABLE] };
	for (unsigned i = 0; i < SVC_METRIC_STAGES; i++) {
		names[2 + i] = svc_metric_stage[i].name;
		hs[2 + i] = &s->lat[svc_metric_stage[i].lat];
	}
	H3000__LatencyHistogram lh[NH], *lhp[NH];
	uint64_t counts[NH][ING_HIST_PROM_NB + 1];
	for (unsigned i = 0; i < NH; i++) {
		h3000__latency_histogram__init(&lh[i]);
		lh[i].stage = (char *)names[i];
		lh[i].n_bucketupperns = ING_HIST_PROM_NB;
		lh[i].bucketupperns = (uint64_t *)ing_hist_prom_le_ns;
		memcpy(counts[i], hs[i]->prom, sizeof(counts[i]));
		lh[i].n_bucketcounts = ING_HIST_PROM_NB + 1;
		lh[i].bucketcounts = counts[i];
		lh[i].count = hs[i]->count;
		lh[i].sumns = hs[i]->sum;
		lhp[i] = &lh[i];
	}
	r.n_latency = NH;
	r.latency = lhp;
	H3000__StageLatency sl[SVC_NSTAGES + 1], *slp[SVC_NSTAGES + 1];
	for (unsigned i = 0; i <= SVC_NSTAGES; i++) {
		const struct ing_hist *h = &s->lat[i];   /* the Ack's stages, then the total */
		h3000__stage_latency__init(&sl[i]);
		sl[i].stage = (char *)svc_stage_name[i];
		sl[i].count = h->count;
		sl[i].p50ns = ing_hist_quantile(h, 0.50);
		sl[i].p90ns = ing_hist_quantile(h, 0.90);
		sl[i].p95ns = ing_hist_quantile(h, 0.95);
		sl[i].p99ns = ing_hist_quantile(h, 0.99);
		sl[i].p999ns = ing_hist_quantile(h, 0.999);
		sl[i].maxns = h->max;
		slp[i] = &sl[i];
	}
	r.n_stagelatency = SVC_NSTAGES + 1;
	r.stagelatency = slp;
	fleet_stats(s, &r);
	H3000__TierStats tier_pb;
	struct ing_tier_stats tier_st;
	tier_stats(s, &r, &tier_pb, &tier_st);
	ops_stats(s, &r);
	return svc_unary_reply(c, &r.base);
}

static const struct ing_grpc_method stats_method = {
	.path = "/h3000.RDMASvc/Stats",
	.on_start = svc_unary_start,
	.on_message = stats_msg,
	.on_close = svc_unary_close,
};
SVC_RPC_REGISTER(stats_method)
