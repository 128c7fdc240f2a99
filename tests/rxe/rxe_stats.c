/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rxe_stats.c - print ingestd's h3000.RDMASvc/Stats as "name value" lines (the guest has
 * no python3-grpcio): used by tests/rxe/rdma_in_guest.sh and bench/rdma.sh.
 * Usage: rxe_stats HOST:PORT    Exit: 0, or 1 when the call failed.
 */
#include <stdio.h>
#include <stdlib.h>

#include "control/net/grpc.h"
#include "h3000.pb-c.h"

int main(int argc, char **argv)
{
	struct ing_grpc_chan_opts o;
	char err[256] = "";
	uint8_t req[1], *resp = NULL;
	size_t rlen = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: %s HOST:PORT\n", argv[0]);
		return 2;
	}
	ing_grpc_chan_opts_init(&o);
	o.target = argv[1];
	struct ing_grpc_chan *ch = ing_grpc_chan_connect(&o, err, sizeof(err));
	if (!ch) {
		fprintf(stderr, "rxe_stats: connect %s: %s\n", argv[1], err);
		return 1;
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
