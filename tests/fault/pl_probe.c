/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pl_probe.c - is an ingestd up and answering? grpc.health.v1.Health/Check must answer
 * SERVING and h3000.RDMASvc/Stats must answer a StatsReply; prints "serving" and the
 * node's framesDurable. Used by the power-loss harness on every replayed disk (the guest
 * runs it many times: a C client starts far faster than python there).
 * Usage: pl_probe HOST:PORT    Exit: 0 when both answered, 1 otherwise (with the reason).
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
		fprintf(stderr, "pl_probe: connect %s: %s\n", argv[1], err);
		return 1;
	}
	/* HealthCheckRequest{} -> HealthCheckResponse{status = SERVING (1)}: 08 01 */
	int st = ing_grpc_unary(ch, "/grpc.health.v1.Health/Check", NULL, req, 0, &resp, &rlen,
				5000, err, sizeof(err));
	if (st != ING_GRPC_OK || rlen != 2 || resp[0] != 0x08 || resp[1] != 0x01) {
		fprintf(stderr, "pl_probe: Health/Check: status %d, %zu bytes %s\n", st, rlen, err);
		free(resp);
		ing_grpc_chan_close(ch);
		return 1;
	}
	free(resp);
	resp = NULL;
	st = ing_grpc_unary(ch, "/h3000.RDMASvc/Stats", NULL, req, 0, &resp, &rlen, 5000, err,
			    sizeof(err));
	ing_grpc_chan_close(ch);
	if (st != ING_GRPC_OK) {
		fprintf(stderr, "pl_probe: Stats: status %d %s\n", st, err);
		free(resp);
		return 1;
	}
	H3000__StatsReply *r = h3000__stats_reply__unpack(NULL, rlen, resp);
	free(resp);
	if (!r) {
		fprintf(stderr, "pl_probe: malformed StatsReply\n");
		return 1;
	}
	printf("serving framesDurable %llu\n", (unsigned long long)r->framesdurable);
	h3000__stats_reply__free_unpacked(r, NULL);
	return 0;
}
