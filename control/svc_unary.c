/* SPDX-License-Identifier: Apache-2.0 */
/*
 * svc_unary.c - the unary methods of h3000.RDMASvc: Negotiate (authToken when the node
 * has one, versions, transports, limits, credits; allocates the session) and Stats (the
 * node's counters; with a token, only for "authorization: Bearer <token>").
 */
#include "control/svc_internal.h"
#include "common/clock.h"
#include "common/log.h"
#include "dataplane/rdma/rdma.h"
#include "h3000.pb-c.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ================================================================ Negotiate */

static int unary_start(struct ing_grpc_call *c, void *ctx)
{
	ing_grpc_call_set_user(c, ctx);
	return ING_GRPC_OK;
}

static void unary_close(struct ing_grpc_call *c, int status)
{
	(void)c;
	(void)status;
}

static int reply(struct ing_grpc_call *c, const ProtobufCMessage *m)
{
	size_t n = protobuf_c_message_get_packed_size(m);
	uint8_t stackbuf[1024];
	uint8_t *buf = n <= sizeof(stackbuf) ? stackbuf : malloc(n);
	if (!buf)
		return ING_GRPC_RESOURCE_EXHAUSTED;
	protobuf_c_message_pack(m, buf);
	int rc = ing_grpc_call_send(c, buf, n);
	if (buf != stackbuf)
		free(buf);
	if (rc)
		return ING_GRPC_INTERNAL;
	ing_grpc_call_finish(c, ING_GRPC_OK, NULL);
	return 0;
}

static int fail(struct ing_grpc_call *c, int status, const char *msg)
{
	struct ing_log_ctx lc = { .peer = ing_grpc_call_peer(c) };
	ING_LOGC(ING_LOG_INFO, "svc", &lc, "%s from %s: %s", "rpc refused", ing_grpc_call_peer(c), msg);
	ing_grpc_call_finish(c, status, msg);
	return status;
}

/* UNAUTHENTICATED, logged rate-limited without anything the client sent but its address. */
static int refuse_auth(struct ing_grpc_call *c, struct ing_svc *s, const char *rpc, const char *msg)
{
	s->c_auth_refused++;
	struct ing_log_ctx lc = { .peer = ing_grpc_call_peer(c) };
	ING_LOGC_RL(ING_LOG_WARN, "svc", &lc, "%s from %s refused: %s (%" PRIu64 " refused so far)", rpc,
		    ing_grpc_call_peer(c), msg, s->c_auth_refused);
	ing_grpc_call_finish(c, ING_GRPC_UNAUTHENTICATED, msg);
	return ING_GRPC_UNAUTHENTICATED;
}

int svc_require_bearer(struct ing_svc *s, struct ing_grpc_call *c, const char *rpc)
{
	if (!s->auth)
		return 0;
	/* the one credential of these calls: the node's token as a bearer token (nghttp2
	 * refuses NUL, CR and LF in header values: strlen is the value's length) */
	char why[160];
	struct svc_peer *peer = svc_peer_get(s, ing_grpc_call_peer_addr(c));
	const char *h = ing_grpc_call_header(c, "authorization");
	int rc = 0;
	if (svc_auth_locked(s, peer, why, sizeof(why))) {
		rc = fail(c, ING_GRPC_RESOURCE_EXHAUSTED, why);
	} else if (!h || strncasecmp(h, "Bearer ", 7) != 0 || !svc_auth_token_ok(s, h + 7, strlen(h + 7))) {
		svc_auth_failed(s, peer);
		snprintf(why, sizeof(why), "this node requires the header 'authorization: Bearer <token>' for %s",
			 rpc);
		rc = refuse_auth(c, s, rpc, why);
	} else {
		svc_auth_succeeded(peer);
	}
	svc_peer_put(s, peer);
	return rc;
}

/*
 * Length on the wire of the last top-level length-delimited field `field` of msg (the one
 * protobuf's merge keeps), so a string with a NUL inside is compared whole, not up to the
 * NUL as the C string protobuf-c hands over would be. 0 when absent or malformed.
 */
static size_t wire_len(const uint8_t *msg, size_t len, uint32_t field)
{
	size_t i = 0, found = 0;
	while (i < len) {
		uint64_t key = 0, v = 0;
		for (unsigned sh = 0; i < len; sh += 7) {
			key |= (uint64_t)(msg[i] & 0x7f) << (sh & 63);
			if (!(msg[i++] & 0x80))
				break;
		}
		switch (key & 7) {
		case 0:
			while (i < len && (msg[i++] & 0x80))
				;
			break;
		case 1:
			i += 8;
			break;
		case 5:
			i += 4;
			break;
		case 2:
			for (unsigned sh = 0; i < len; sh += 7) {
				v |= (uint64_t)(msg[i] & 0x7f) << (sh & 63);
				if (!(msg[i++] & 0x80))
					break;
			}
			if (v > len - i)
				return 0;
			if ((key >> 3) == field)
				found = (size_t)v;
			i += (size_t)v;
			break;
		default:
			return 0;
		}
	}
	return found;
}

static bool has_transport(const H3000__NegotiateRequest *r, H3000__Transport t)
{
	for (size_t i = 0; i < r->n_transports; i++)
		if (r->transports[i] == t)
			return true;
	return false;
}

/* the version range a client names, against this node's: 0, or the gRPC status with the
 * reason in note */
static int negotiate_version(const H3000__NegotiateRequest *r, char *note, size_t n)
{
	uint32_t vmin = r->versionmin, vmax = r->versionmax;
	if (vmin == 0 && vmax == 0)
		vmin = vmax = ING_PROTO_VERSION;   /* a client that says nothing speaks version 1 */
	else if (vmax == 0)
		vmax = vmin;
	if (vmin == 0)
		vmin = 1;
	if (vmin > vmax) {
		snprintf(note, n, "versionMin %u above versionMax %u", vmin, vmax);
		return ING_GRPC_INVALID_ARGUMENT;
	}
	if (vmin > ING_PROTO_VERSION || vmax < ING_PROTO_VERSION) {
		snprintf(note, n,
			 "no common protocol version: client speaks %u..%u, this node speaks %u..%u",
			 vmin, vmax, ING_PROTO_VERSION, ING_PROTO_VERSION);
		return ING_GRPC_FAILED_PRECONDITION;
	}
	return 0;
}

static const char *rdma_why_not(const struct ing_svc *s)
{
	return s->o.rdma.note && s->o.rdma.note[0] ? s->o.rdma.note : "this node has no RDMA listener";
}

/* the transports this node offers (avail, for the reply) and the first of the client's list
 * among them; UNSPECIFIED when there is none */
static H3000__Transport negotiate_transport(const struct ing_svc *s,
					    const H3000__NegotiateRequest *r, int push,
					    H3000__Transport avail[3], size_t *navail)
{
	bool rdma = s->o.rdma.rdma_available;
	*navail = 0;
	if (rdma)
		avail[(*navail)++] = H3000__TRANSPORT__TRANSPORT_RDMA_READ;
	if (push)
		avail[(*navail)++] = H3000__TRANSPORT__TRANSPORT_RDMA_WRITE;
	avail[(*navail)++] = H3000__TRANSPORT__TRANSPORT_GRPC_STREAM;

	if (r->n_transports == 0)
		return H3000__TRANSPORT__TRANSPORT_GRPC_STREAM;
	for (size_t i = 0; i < r->n_transports; i++)
		if (r->transports[i] == H3000__TRANSPORT__TRANSPORT_GRPC_STREAM ||
		    (rdma && r->transports[i] == H3000__TRANSPORT__TRANSPORT_RDMA_READ) ||
		    (push && r->transports[i] == H3000__TRANSPORT__TRANSPORT_RDMA_WRITE))
			return r->transports[i];
	return H3000__TRANSPORT__TRANSPORT_UNSPECIFIED;
}

/* the reply's message and the log line: which transport and why */
static void session_note(const struct ing_svc *s, const H3000__NegotiateRequest *r,
			 H3000__Transport pick, int push, const char *addr, uint16_t port, char *note,
			 size_t n)
{
	bool rdma = s->o.rdma.rdma_available;
	if (pick == H3000__TRANSPORT__TRANSPORT_RDMA_READ)
		snprintf(note, n, "rdma read from %s:%u", addr, port);
	else if (pick == H3000__TRANSPORT__TRANSPORT_RDMA_WRITE)
		snprintf(note, n, "rdma write push to %s:%u (grants: %s)", addr, port,
			 push == 1 ? "memory windows" : "pool MR, not bounded per grant");
	else if (!rdma && has_transport(r, H3000__TRANSPORT__TRANSPORT_RDMA_READ))
		snprintf(note, n, "fallback to gRPC stream: %s", rdma_why_not(s));
	else if (!rdma)
		snprintf(note, n, "gRPC stream; RDMA not offered: %s", rdma_why_not(s));
	else
		snprintf(note, n, "gRPC stream (client's choice)");
}

static int negotiate_msg(struct ing_grpc_call *c, const uint8_t *msg, size_t len)
{
	struct ing_svc *s = ing_grpc_call_user(c);
	char note[256];
	int rc;

	struct svc_peer *peer = svc_peer_get(s, ing_grpc_call_peer_addr(c));
	H3000__NegotiateRequest *r = NULL;
	if (s->auth && svc_auth_locked(s, peer, note, sizeof(note))) {
		rc = fail(c, ING_GRPC_RESOURCE_EXHAUSTED, note);   /* the token is not even looked at */
		svc_peer_put(s, peer);
		return rc;
	}
	r = h3000__negotiate_request__unpack(NULL, len, msg);
	if (!r) {
		svc_peer_put(s, peer);
		return fail(c, ING_GRPC_INVALID_ARGUMENT, "malformed NegotiateRequest");
	}
	if (s->auth) {
		size_t tl = r->authtoken ? wire_len(msg, len, 5 /* authToken */) : 0;
		if (!svc_auth_token_ok(s, r->authtoken, tl)) {
			svc_auth_failed(s, peer);
			rc = refuse_auth(c, s, "Negotiate", "bad or missing authToken");
			goto out;
		}
		svc_auth_succeeded(peer);
	}
	int code = negotiate_version(r, note, sizeof(note));
	if (code) {
		rc = fail(c, code, note);
		goto out;
	}
	bool rdma = s->o.rdma.rdma_available;
	/* push (RDMA WRITE): 1 with memory windows, 2 with the pool MR (docs/PUSH.md) */
	int push = rdma && s->rdma ? ing_rdma_push_mode(s->rdma) : 0;
	H3000__Transport avail[3];
	size_t navail = 0;
	H3000__Transport pick = negotiate_transport(s, r, push, avail, &navail);
	if (!pick) {
		snprintf(note, sizeof(note), "no common transport: the client offers only RDMA (%s)",
			 rdma ? "this node has RDMA WRITE push off" : rdma_why_not(s));
		rc = fail(c, ING_GRPC_FAILED_PRECONDITION, note);
		goto out;
	}

	struct svc_session *ss = svc_session_new(s, peer);
	if (!ss) {
		rc = fail(c, ING_GRPC_RESOURCE_EXHAUSTED, s->sess_why);
		goto out;
	}
	/* the id is bound to who negotiated it: with mTLS the certificate's identity, else
	 * this connection; anyone else naming it is refused */
	const char *ident = ing_grpc_call_identity(c);
	ss->owner_conn = ing_grpc_call_conn_id(c);
	snprintf(ss->owner_ident, sizeof(ss->owner_ident), "%s", ident ? ident : "");
	unsigned credits = r->credits ? r->credits : s->o.credits_default;
	if (credits > s->o.credits_max)
		credits = s->o.credits_max;
	ss->cr.credits = credits;
	ss->max_frame = r->maxframesize && r->maxframesize < s->max_frame ? r->maxframesize : s->max_frame;
	ss->transport = pick == H3000__TRANSPORT__TRANSPORT_RDMA_READ ||
			pick == H3000__TRANSPORT__TRANSPORT_RDMA_WRITE ? ING_XPORT_RDMA : ING_XPORT_GRPC;
	ss->push = pick == H3000__TRANSPORT__TRANSPORT_RDMA_WRITE;
	ss->authed = s->auth;
	ss->ack_received = r->ackreceived;
	snprintf(ss->client, sizeof(ss->client), "%s", r->clientname ? r->clientname : "");

	/* the rail on the producer's network (it dialled the node there), else the first up */
	const char *raddr;
	uint16_t rport;
	svc_engine_rdma_target(s, ing_grpc_call_peer_addr(c), &raddr, &rport);
	session_note(s, r, pick, push, raddr, rport, note, sizeof(note));
	if (ss->transport == ING_XPORT_GRPC && has_transport(r, H3000__TRANSPORT__TRANSPORT_RDMA_READ))
		s->c_fallback++;

	H3000__NegotiateReply rep = H3000__NEGOTIATE_REPLY__INIT;
	rep.version = ING_PROTO_VERSION;
	rep.sessionid = ss->id;
	rep.transport = pick;
	rep.n_available = navail;
	rep.available = avail;
	rep.rdmaaddr = (char *)(rdma ? raddr : "");
	rep.rdmaport = rdma ? rport : 0;
	rep.maxframesize = ss->max_frame;
	rep.credits = ss->cr.credits;
	rep.ackreceived = ss->ack_received;
	rep.ackstored = true;   /* Ack.stored is set */
	if (ss->push) {
		rep.pushmemorywindow = push == 1;
		rep.granttimeoutms = s->o.rdma.grant_ms;
	}
	rep.maxchunksize = s->o.max_chunk;
	rep.message = note;
	rep.serverversion = (char *)"h3000-ingestd " ING_VERSION;
	svc_fleet_negotiate(s, &rep);
	struct ing_log_ctx lc = { .peer = ing_grpc_call_peer(c), .session = ss->id };
	ING_LOGC(ING_LOG_INFO, "svc", &lc, "session %" PRIu64 " for %s (%s%s%s%s): credits %u, max frame %" PRIu64 ", %s",
		 ss->id, ss->client[0] ? ss->client : "?", ing_grpc_call_peer(c),
		 ident ? ", identity \"" : "", ident ? ident : "", ident ? "\"" : "", ss->cr.credits,
		 ss->max_frame, note);
	rc = reply(c, &rep.base);
out:
	if (r->authtoken && r->authtoken[0])   /* the node's secret, or a guess at it */
		explicit_bzero(r->authtoken, strlen(r->authtoken));
	h3000__negotiate_request__free_unpacked(r, NULL);
	svc_peer_put(s, peer);
	return rc;
}

/* ================================================================ Stats */

/* StatsReply.lcores (85): each dataplane lcore's placement and counters. Returns the count. */
static size_t svc_lcore_stats(struct ing_svc *s, H3000__LcoreStats *lcs, H3000__LcoreStats **lcp)
{
	unsigned n = ing_rdma_nlcores(s->rdma), k = 0;

	for (unsigned i = 0; i < n && k < ING_RDMA_MAX_LCORES; i++) {
		struct ing_rdma_lcore_info in;
		struct ing_rdma_lcore_stats st;
		unsigned id;
		if (ing_rdma_lcore_info(s->rdma, i, &in) || ing_rdma_lcore_stats(s->rdma, i, &id, &st))
			continue;
		H3000__LcoreStats *l = &lcs[k];
		h3000__lcore_stats__init(l);
		l->lcore = in.lcore_id;
		l->numanode = in.numa_node;
		l->connections = in.conns;
		l->sessions = in.sessions;
		l->framesheld = in.frames_held;
		l->framesreceived = st.frames_ok;
		l->bytesreceived = st.bytes_received;
		l->framesfailed = st.frames_failed;
		l->readsposted = st.reads_posted;
		l->pushframesreceived = st.push_frames_ok;
		l->completionerrors = st.wc_errors;
		l->busyns = st.busy_ns;
		l->polls = st.polls;
		l->idlepolls = st.idle_polls;
		l->sleeps = st.sleeps;
		lcp[k++] = l;
	}
	return k;
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
	if (s->rdma) {   /* per-lcore counters of the RDMA data plane, summed */
		struct ing_rdma_stats rs;
		ing_rdma_get_stats(s->rdma, &rs);
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
		r.pushmemorywindow = ing_rdma_push_mode(s->rdma) == 1;
	}
	r.sessionspush = npush;
	r.ctlframesparked = s->c_ctl_parked;
	H3000__LcoreStats lcs[ING_RDMA_MAX_LCORES], *lcp[ING_RDMA_MAX_LCORES];
	r.lcores = lcp;
	r.n_lcores = svc_lcore_stats(s, lcs, lcp);
	/* the /metrics histograms (svc_metrics.c), from the same latency view */
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
	svc_fleet_stats(s, &r);
	H3000__TierStats tier_pb;
	struct ing_tier_stats tier_st;
	svc_tier_stats(s, &r, &tier_pb, &tier_st);
	svc_ops_stats(s, &r);
	return reply(c, &r.base);
}

const struct ing_grpc_method svc_negotiate_method = {
	.path = "/h3000.RDMASvc/Negotiate",
	.on_start = unary_start,
	.on_message = negotiate_msg,
	.on_close = unary_close,
};

const struct ing_grpc_method svc_stats_method = {
	.path = "/h3000.RDMASvc/Stats",
	.on_start = unary_start,
	.on_message = stats_msg,
	.on_close = unary_close,
};
