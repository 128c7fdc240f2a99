/* SPDX-License-Identifier: Apache-2.0 */
/*
 * negotiate.c - rpc Negotiate, a producer's first call: its authToken when the node has
 * one, the protocol version, the transports both sides can do, limits and credits; it
 * makes the session the producer's streams then name.
 */
#include "control/service/state.h"
#include "control/service/auth.h"
#include "control/service/pb.h"
#include "control/service/rails.h"
#include "control/service/rpc/unary.h"
#include "common/clock.h"
#include "common/log.h"
#include "control/fleet/fleet.h"
#include "dataplane/rdma/rdma.h"
#include "h3000.pb-c.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

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

/* The node's rails as the engine sees them now (none without an engine). */
struct rails_now {
	unsigned n;
	struct svc_rail sr[ING_RDMA_MAX_RAILS];
	struct ing_rdma_rail_info ri[ING_RDMA_MAX_RAILS];
	H3000__RailInfo pb[ING_RDMA_MAX_RAILS];
	H3000__RailInfo *pbp[ING_RDMA_MAX_RAILS];
};

static void rails_read(const struct ing_svc *s, struct rails_now *rn)
{
	rn->n = svc_engine_rails(s, rn->sr, ING_RDMA_MAX_RAILS);
	for (unsigned i = 0; i < rn->n; i++) {
		const struct svc_rail *sr = &rn->sr[i];
		H3000__RailInfo *p = &rn->pb[i];
		rn->ri[i] = sr->info;
		h3000__rail_info__init(p);
		p->index = i;
		p->device = (char *)sr->info.device;
		p->rdmaaddr = (char *)sr->info.addr;
		p->rdmaport = sr->info.port;
		p->numanode = sr->info.numa_node;
		p->linkmbps = sr->info.link_mbps;
		p->state = sr->info.up ? H3000__RAIL_STATE__RAIL_UP : H3000__RAIL_STATE__RAIL_DOWN;
		p->why = (char *)sr->info.why;
		p->downseconds = sr->down_s;
		rn->pbp[i] = p;
	}
}

/*
 * The rail a request that names one (NegotiateRequest.rail) gets when it asks for RDMA: that
 * rail, up. 0 with *rail; or the gRPC status with note: INVALID_ARGUMENT for a name that is
 * no rail of this node, UNAVAILABLE (retry later, or use another rail) for a rail that is
 * down, each listing the rails there are. A node without RDMA ignores the name (the
 * session falls back to the gRPC stream as for any client, and its message says so).
 */
static int negotiate_rail(const struct ing_svc *s, const H3000__NegotiateRequest *r,
			  const struct rails_now *rn, int *rail, char *note, size_t n)
{
	*rail = -1;
	if (!r->rail || !r->rail[0] || !s->env.rdma ||
	    !(has_transport(r, H3000__TRANSPORT__TRANSPORT_RDMA_READ) ||
	      has_transport(r, H3000__TRANSPORT__TRANSPORT_RDMA_WRITE)))
		return 0;
	int i = ing_rdma_rail_choose(rn->ri, rn->n, r->rail, ing_now_ns(), note, n);
	if (i >= 0) {
		*rail = i;
		return 0;
	}
	return i == -ENETDOWN ? ING_GRPC_UNAVAILABLE : ING_GRPC_INVALID_ARGUMENT;
}

static int negotiate_msg(struct ing_grpc_call *c, const uint8_t *msg, size_t len)
{
	struct ing_svc *s = ing_grpc_call_user(c);
	char note[768];
	int rc;

	struct svc_peer *peer = svc_peer_get(s, ing_grpc_call_peer_addr(c));
	H3000__NegotiateRequest *r = NULL;
	if (s->auth && svc_auth_locked(s, peer, note, sizeof(note))) {
		rc = svc_unary_fail(c, ING_GRPC_RESOURCE_EXHAUSTED, note);   /* the token is not even looked at */
		svc_peer_put(s, peer);
		return rc;
	}
	r = h3000__negotiate_request__unpack(NULL, len, msg);
	if (!r) {
		svc_peer_put(s, peer);
		return svc_unary_fail(c, ING_GRPC_INVALID_ARGUMENT, "malformed NegotiateRequest");
	}
	if (s->auth) {
		size_t tl = r->authtoken ? svc_pb_wire_len(msg, len, 5 /* authToken */) : 0;
		if (!svc_auth_token_ok(s, r->authtoken, tl)) {
			svc_auth_failed(s, peer);
			rc = svc_auth_refuse(s, c, "Negotiate", "bad or missing authToken");
			goto out;
		}
		svc_auth_succeeded(peer);
	}
	int code = negotiate_version(r, note, sizeof(note));
	if (code) {
		rc = svc_unary_fail(c, code, note);
		goto out;
	}
	bool rdma = s->o.rdma.rdma_available;
	/* push (RDMA WRITE): 1 with memory windows, 2 with the pool MR (docs/PUSH.md) */
	int push = rdma && s->env.rdma ? ing_rdma_push_mode(s->env.rdma) : 0;
	H3000__Transport avail[3];
	size_t navail = 0;
	struct rails_now rn;
	int rail = -1;
	rails_read(s, &rn);
	code = negotiate_rail(s, r, &rn, &rail, note, sizeof(note));
	if (code) {
		rc = svc_unary_fail(c, code, note);
		goto out;
	}
	H3000__Transport pick = negotiate_transport(s, r, push, avail, &navail);
	if (!pick) {
		snprintf(note, sizeof(note), "no common transport: the client offers only RDMA (%s)",
			 rdma ? "this node has RDMA WRITE push off" : rdma_why_not(s));
		rc = svc_unary_fail(c, ING_GRPC_FAILED_PRECONDITION, note);
		goto out;
	}

	struct svc_session *ss = svc_session_new(s, peer);
	if (!ss) {
		rc = svc_unary_fail(c, ING_GRPC_RESOURCE_EXHAUSTED, s->sess_why);
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

	/* the rail it named; else the rail on the producer's network (it dialled the node
	 * there), else the first up */
	const char *raddr;
	uint16_t rport;
	if (rail >= 0) {
		raddr = rn.ri[rail].addr;
		rport = rn.ri[rail].port;
	} else {
		svc_engine_rdma_target(s, ing_grpc_call_peer_addr(c), &raddr, &rport, &rail);
	}
	bool on_rdma = ss->transport == ING_XPORT_RDMA;
	ss->rail = on_rdma && r->rail && r->rail[0] ? rail : -1;
	session_note(s, r, pick, push, raddr, rport, note, sizeof(note));
	if (on_rdma && rail >= 0 && (unsigned)rail < rn.n) {
		size_t nl = strlen(note);
		snprintf(note + nl, sizeof(note) - nl, " (rail %d %s%s)", rail, rn.ri[rail].device,
			 ss->rail >= 0 ? ", as asked" : "");
	} else if (r->rail && r->rail[0] && !s->env.rdma) {
		size_t nl = strlen(note);
		snprintf(note + nl, sizeof(note) - nl, "; rail \"%s\" ignored: this node has no RDMA rails",
			 r->rail);
	}
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
	rep.n_rails = rn.n;
	rep.rails = rn.pbp;
	/* striped frames: over RDMA READ, or push with a grant per part (docs/PUSH.md "Striped
	 * push"), from a node whose rails registered every region */
	rep.stripemin = on_rdma && s->env.rdma && ing_rdma_stripes(s->env.rdma) ? s->o.stripe_min : 0;
	rep.rail = (char *)(on_rdma && rail >= 0 && (unsigned)rail < rn.n ? rn.ri[rail].device : "");
	rep.message = note;
	rep.serverversion = (char *)"h3000-ingestd " ING_VERSION;
	if (s->fleet) {   /* which node this is, and whether it takes new wafers */
		rep.nodeid = (char *)ing_fleet_node_id(s->fleet);
		rep.nodestate = svc_pb_member_state(ing_fleet_state(s->fleet));
	}
	struct ing_log_ctx lc = { .peer = ing_grpc_call_peer(c), .session = ss->id };
	ING_LOGC(ING_LOG_INFO, "svc", &lc, "session %" PRIu64 " for %s (%s%s%s%s): credits %u, max frame %" PRIu64 ", %s",
		 ss->id, ss->client[0] ? ss->client : "?", ing_grpc_call_peer(c),
		 ident ? ", identity \"" : "", ident ? ident : "", ident ? "\"" : "", ss->cr.credits,
		 ss->max_frame, note);
	rc = svc_unary_reply(c, &rep.base);
out:
	if (r->authtoken && r->authtoken[0])   /* the node's secret, or a guess at it */
		explicit_bzero(r->authtoken, strlen(r->authtoken));
	h3000__negotiate_request__free_unpacked(r, NULL);
	svc_peer_put(s, peer);
	return rc;
}

static const struct ing_grpc_method negotiate_method = {
	.path = "/h3000.RDMASvc/Negotiate",
	.on_start = svc_unary_start,
	.on_message = negotiate_msg,
	.on_close = svc_unary_close,
};
SVC_RPC_REGISTER(negotiate_method)
