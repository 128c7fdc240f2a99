/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rxe_stats.c - print ingestd's h3000.RDMASvc/Stats as "name value" lines (the guest has
 * no python3-grpcio): used by tests/rxe/rdma_in_guest.sh and bench/rdma.sh.
 * Usage: rxe_stats HOST:PORT    Exit: 0, or 1 when the call failed.
 *        rxe_stats HOST:PORT negotiate [RAIL]: a Negotiate asking for RDMA READ (on the
 *        node's rail RAIL), its reply as "name value" lines (status, message, rail,
 *        rdmaAddr, rdmaPort, rails, rail.<i>.<field>); exit 0 whatever the status.
 *        rxe_stats HOST:PORT connect RAIL ADDR:PORT: a Negotiate naming RAIL, then an
 *        rdma_cm connection of that session to ADDR:PORT (a rail's listener, the one
 *        Negotiate named or another): "session ID", "connect ESTABLISHED" or "connect
 *        REJECTED" (or the event that came); the connection is closed again. Exit 0 when
 *        the connect got an answer, 1 when Negotiate or the set-up failed.
 */
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/rdma_cma.h>

#include "common/clock.h"
#include "proto/rdma_conn.h"

#include "control/net/grpc.h"
#include "h3000.pb-c.h"

static const char *rail_state(int st)
{
	return st == H3000__RAIL_STATE__RAIL_UP ? "UP" : st == H3000__RAIL_STATE__RAIL_DOWN ? "DOWN" : "UNKNOWN";
}

/* the next CM event on ch within ms, its type (-1 none) */
static int cm_next(struct rdma_event_channel *ch, int ms)
{
	uint64_t end = ing_now_ns() + (uint64_t)ms * 1000000ull;
	for (;;) {
		struct rdma_cm_event *ev;
		if (rdma_get_cm_event(ch, &ev) == 0) {
			int t = (int)ev->event;
			rdma_ack_cm_event(ev);
			return t;
		}
		if (ing_now_ns() > end)
			return -1;
		struct pollfd pf = { .fd = ch->fd, .events = POLLIN };
		poll(&pf, 1, 50);
	}
}

/* an rdma_cm connection of session sid to target (ADDR:PORT): what the listener answered */
static int connect_session(uint64_t sid, const char *target)
{
	char host[64];
	const char *colon = strrchr(target, ':');
	if (!colon || (size_t)(colon - target) >= sizeof(host))
		return 1;
	snprintf(host, sizeof(host), "%.*s", (int)(colon - target), target);
	struct addrinfo *ai;
	if (getaddrinfo(host, colon + 1, NULL, &ai))
		return 1;
	struct rdma_event_channel *ech = rdma_create_event_channel();
	struct rdma_cm_id *id = NULL;
	struct ibv_pd *pd = NULL;
	struct ibv_cq *cq = NULL;
	int rc = 1, t = -1;
	if (!ech || fcntl(ech->fd, F_SETFL, O_NONBLOCK) || rdma_create_id(ech, &id, NULL, RDMA_PS_TCP))
		goto out;
	if (rdma_resolve_addr(id, NULL, ai->ai_addr, 2000) || cm_next(ech, 10000) != RDMA_CM_EVENT_ADDR_RESOLVED ||
	    rdma_resolve_route(id, 2000) || cm_next(ech, 10000) != RDMA_CM_EVENT_ROUTE_RESOLVED) {
		fprintf(stderr, "rxe_stats: cannot resolve %s\n", target);
		goto out;
	}
	pd = ibv_alloc_pd(id->verbs);
	cq = pd ? ibv_create_cq(id->verbs, 2, NULL, NULL, 0) : NULL;
	struct ibv_qp_init_attr qa = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
				       .cap = { .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 } };
	if (!cq || rdma_create_qp(id, pd, &qa))
		goto out;
	struct ing_rdma_cm_priv priv;
	ing_rdma_cm_priv_pack(&priv, sid);
	struct rdma_conn_param cp = { .private_data = &priv, .private_data_len = sizeof(priv),
				      .responder_resources = 16, .retry_count = 7, .rnr_retry_count = 7 };
	if (rdma_connect(id, &cp))
		goto out;
	t = cm_next(ech, 30000);
	printf("connect %s\n", t == RDMA_CM_EVENT_ESTABLISHED ? "ESTABLISHED" : t == RDMA_CM_EVENT_REJECTED
	       ? "REJECTED" : t < 0 ? "no answer" : rdma_event_str((enum rdma_cm_event_type)t));
	rc = t < 0;
	if (t == RDMA_CM_EVENT_ESTABLISHED) {
		rdma_disconnect(id);
		(void)cm_next(ech, 5000);   /* DISCONNECTED */
	}
out:
	if (id && id->qp)
		rdma_destroy_qp(id);
	if (cq)
		ibv_destroy_cq(cq);
	if (pd)
		ibv_dealloc_pd(pd);
	if (id)
		rdma_destroy_id(id);
	if (ech)
		rdma_destroy_event_channel(ech);
	freeaddrinfo(ai);
	return rc;
}

/* Negotiate for RDMA READ, on rail (NULL: none named): the reply as name value lines; the
 * session's id in *sid (0 when refused) */
static int negotiate(struct ing_grpc_chan *ch, const char *rail, uint64_t *sid)
{
	H3000__NegotiateRequest q = H3000__NEGOTIATE_REQUEST__INIT;
	H3000__Transport t[] = { H3000__TRANSPORT__TRANSPORT_RDMA_READ, H3000__TRANSPORT__TRANSPORT_GRPC_STREAM };
	uint8_t req[256], *resp = NULL;
	size_t rlen = 0;
	char err[1024] = "";

	q.clientname = (char *)"rxe_stats";
	q.n_transports = 2;
	q.transports = t;
	q.rail = (char *)(rail ? rail : "");
	size_t qlen = h3000__negotiate_request__pack(&q, req);
	int st = ing_grpc_unary(ch, "/h3000.RDMASvc/Negotiate", NULL, req, qlen, &resp, &rlen, 5000,
				err, sizeof(err));
	printf("status %d\n", st);
	if (st != ING_GRPC_OK) {
		printf("message %s\n", err);
		free(resp);
		return 0;
	}
	H3000__NegotiateReply *r = h3000__negotiate_reply__unpack(NULL, rlen, resp);
	free(resp);
	if (!r) {
		fprintf(stderr, "rxe_stats: malformed NegotiateReply\n");
		return 1;
	}
	*sid = r->sessionid;
	printf("session %llu\n", (unsigned long long)r->sessionid);
	printf("message %s\nrail %s\nrdmaAddr %s\nrdmaPort %u\ntransport %d\nrails %zu\n",
	       r->message ? r->message : "", r->rail ? r->rail : "", r->rdmaaddr ? r->rdmaaddr : "",
	       r->rdmaport, r->transport, r->n_rails);
	for (size_t i = 0; i < r->n_rails; i++) {   /* rail.<index>.<field> value */
		const H3000__RailInfo *l = r->rails[i];
		printf("rail.%zu.index %u\nrail.%zu.device %s\nrail.%zu.rdmaAddr %s\nrail.%zu.rdmaPort %u\n"
		       "rail.%zu.numaNode %d\nrail.%zu.linkMbps %u\nrail.%zu.state %s\nrail.%zu.why %s\n"
		       "rail.%zu.downSeconds %.3f\n", i, l->index, i, l->device, i, l->rdmaaddr, i,
		       l->rdmaport, i, l->numanode, i, l->linkmbps, i, rail_state(l->state), i,
		       l->why ? l->why : "", i, l->downseconds);
	}
	h3000__negotiate_reply__free_unpacked(r, NULL);
	return 0;
}

int main(int argc, char **argv)
{
	struct ing_grpc_chan_opts o;
	char err[256] = "";
	uint8_t req[1], *resp = NULL;
	size_t rlen = 0;

	bool conn = argc == 5 && !strcmp(argv[2], "connect");
	if (argc < 2 || argc > 5 || (argc > 2 && strcmp(argv[2], "negotiate") && !conn) ||
	    (argc == 5 && !conn)) {
		fprintf(stderr, "usage: %s HOST:PORT [negotiate [RAIL] | connect RAIL ADDR:PORT]\n", argv[0]);
		return 2;
	}
	ing_grpc_chan_opts_init(&o);
	o.target = argv[1];
	struct ing_grpc_chan *ch = ing_grpc_chan_connect(&o, err, sizeof(err));
	if (!ch) {
		fprintf(stderr, "rxe_stats: connect %s: %s\n", argv[1], err);
		return 1;
	}
	if (argc > 2) {
		uint64_t sid = 0;
		int rc = negotiate(ch, argc > 3 ? argv[3] : NULL, &sid);
		if (conn)   /* the gRPC connection stays open: the session is bound to it */
			rc = rc || !sid ? 1 : connect_session(sid, argv[4]);
		ing_grpc_chan_close(ch);
		return rc;
	}
	int st = ing_grpc_unary(ch, "/h3000.RDMASvc/Stats", NULL, req, 0, &resp, &rlen, 5000, err,
				sizeof(err));
	ing_grpc_chan_close(ch);
	if (st != ING_GRPC_OK) {
		fprintf(stderr, "rxe_stats: Stats: status %d %s\n", st, err);
		free(resp);
		return 1;
	}
	H3000__StatsReply *r = h3000__stats_reply__unpack(NULL, rlen, resp);
	free(resp);
	if (!r) {
		fprintf(stderr, "rxe_stats: malformed StatsReply\n");
		return 1;
	}
	printf("framesReceived %llu\nframesDurable %llu\nframesFailed %llu\nbytesReceived %llu\n"
	       "sessionsActive %u\nsessionsRdma %u\nsessionsFallback %u\npoolSlotsTotal %u\n"
	       "poolSlotsFree %u\nframesInFlight %llu\nrdmaReadErrors %llu\nfallbackSwitches %llu\n"
	       "transportNote %s\n",
	       (unsigned long long)r->framesreceived, (unsigned long long)r->framesdurable,
	       (unsigned long long)r->framesfailed, (unsigned long long)r->bytesreceived,
	       r->sessionsactive, r->sessionsrdma, r->sessionsfallback, r->poolslotstotal,
	       r->poolslotsfree, (unsigned long long)r->framesinflight,
	       (unsigned long long)r->rdmareaderrors, (unsigned long long)r->fallbackswitches,
	       r->transportnote ? r->transportnote : "");
	printf("framesRefused %llu\nrdmaBytesRead %llu\nrdmaReadsPosted %llu\nrdmaCompletions %llu\n"
	       "rdmaPollerIdleSleeps %llu\nrdmaPollerBusyNs %llu\nrdmaPollerPolls %llu\n"
	       "rdmaPollerIdlePolls %llu\nrdmaConnsActive %llu\nctlFramesParked %llu\n",
	       (unsigned long long)r->framesrefused, (unsigned long long)r->rdmabytesread,
	       (unsigned long long)r->rdmareadsposted, (unsigned long long)r->rdmacompletions,
	       (unsigned long long)r->rdmapolleridlesleeps, (unsigned long long)r->rdmapollerbusyns,
	       (unsigned long long)r->rdmapollerpolls, (unsigned long long)r->rdmapolleridlepolls,
	       (unsigned long long)r->rdmaconnsactive, (unsigned long long)r->ctlframesparked);
	printf("pushGrants %llu\npushFramesReceived %llu\npushGrantErrors %llu\n"
	       "pushMemoryWindow %d\nsessionsPush %u\n",
	       (unsigned long long)r->pushgrants, (unsigned long long)r->pushframesreceived,
	       (unsigned long long)r->pushgranterrors, r->pushmemorywindow ? 1 : 0, r->sessionspush);
	printf("poolHugepages %d\nlcores %zu\n", r->poolhugepages ? 1 : 0, r->n_lcores);
	for (size_t i = 0; i < r->n_lcores; i++) {   /* lcore.<index>.<field> value */
		const H3000__LcoreStats *l = r->lcores[i];
		printf("lcore.%zu.lcore %u\nlcore.%zu.numaNode %d\nlcore.%zu.connections %u\n"
		       "lcore.%zu.sessions %llu\nlcore.%zu.framesHeld %u\nlcore.%zu.framesReceived %llu\n"
		       "lcore.%zu.bytesReceived %llu\nlcore.%zu.framesFailed %llu\n"
		       "lcore.%zu.readsPosted %llu\nlcore.%zu.pushFramesReceived %llu\n"
		       "lcore.%zu.completionErrors %llu\n",
		       i, l->lcore, i, l->numanode, i, l->connections, i, (unsigned long long)l->sessions,
		       i, l->framesheld, i, (unsigned long long)l->framesreceived, i,
		       (unsigned long long)l->bytesreceived, i, (unsigned long long)l->framesfailed, i,
		       (unsigned long long)l->readsposted, i, (unsigned long long)l->pushframesreceived,
		       i, (unsigned long long)l->completionerrors);
	}
	printf("rails %zu\n", r->n_rails);
	for (size_t i = 0; i < r->n_rails; i++) {   /* rail.<index>.<field> value */
		const H3000__RailStats *l = r->rails[i];
		printf("rail.%zu.device %s\nrail.%zu.state %s\nrail.%zu.why %s\nrail.%zu.downSeconds %.3f\n"
		       "rail.%zu.downSinceUnixMs %lld\nrail.%zu.downs %llu\nrail.%zu.connections %u\n"
		       "rail.%zu.framesReceived %llu\nrail.%zu.bytesReceived %llu\n"
		       "rail.%zu.framesFailed %llu\nrail.%zu.completionErrors %llu\nrail.%zu.numaNode %d\n"
		       "rail.%zu.partsReceived %llu\n",
		       i, l->device, i, rail_state(l->state), i, l->why ? l->why : "", i, l->downseconds,
		       i, (long long)l->downsinceunixms, i, (unsigned long long)l->downs, i, l->connections,
		       i, (unsigned long long)l->framesreceived, i, (unsigned long long)l->bytesreceived,
		       i, (unsigned long long)l->framesfailed, i, (unsigned long long)l->completionerrors,
		       i, l->numanode, i, (unsigned long long)l->partsreceived);
	}
	for (size_t i = 0; i < r->n_stagelatency; i++) {   /* stage.<name>.<field> value */
		const H3000__StageLatency *l = r->stagelatency[i];
		printf("stage.%s.count %llu\nstage.%s.p50Ns %llu\nstage.%s.p99Ns %llu\n"
		       "stage.%s.maxNs %llu\n", l->stage, (unsigned long long)l->count, l->stage,
		       (unsigned long long)l->p50ns, l->stage, (unsigned long long)l->p99ns,
		       l->stage, (unsigned long long)l->maxns);
	}
	h3000__stats_reply__free_unpacked(r, NULL);
	return 0;
}
