/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ops.c - what an on-call engineer reads from the service in /metrics: frames failed or
 * refused by error code, open connections, and per-peer series (stored frames and bytes,
 * failures, sessions) with bounded cardinality (service/counters.c counts them as frames
 * finish, and says how the per-peer table is kept). Stats carries the same (rpc/stats.c,
 * fields 70-79). Control thread only, like the rest of the service.
 */
#include "control/service/obs/obs.h"

#include <stdio.h>
#include <string.h>

/* h3000.ErrorCode names, as labels (code="crc_mismatch") */
static const char *const code_name[SVC_OPS_CODES] = {
	"none", "invalid_argument", "too_large", "crc_mismatch", "duplicate_conflict",
	"deadline", "transfer", "io", "no_space", "no_transport", "busy", "cancelled",
	"internal", "shutting_down",
};

/* sessions a peer address owns now (the limits' peer table) */
static unsigned peer_sessions(const struct ing_svc *s, const char *ip)
{
	for (unsigned i = 0; i < s->npeers; i++)
		if (s->peers[i].ip[0] && strcmp(s->peers[i].ip, ip) == 0)
			return s->peers[i].sessions;
	return 0;
}

/* a peer address as a label value: IPv4/IPv6 text has no '"' or '\\' to escape */
static void peer_series(struct ing_mtext *t, const char *name, const char *ip, const char *extra,
			uint64_t v)
{
	ing_mtext_printf(t, "%s{peer=\"%s\"%s} %llu\n", name, ip, extra, (unsigned long long)v);
}

void svc_ops_metrics(struct ing_svc *s, struct ing_mtext *t)
{
	struct svc_ops *o = &s->ops;
	char l[64];

	ing_mtext_family(t, "ingest_frame_failures_total", "counter",
			 "Frames failed after admission or refused at it, by h3000.ErrorCode (what "
			 "the producer's Ack.code said).");
	for (unsigned c = 1; c < SVC_OPS_CODES; c++) {
		snprintf(l, sizeof(l), "code=\"%s\"", code_name[c]);
		ing_mtext_u64(t, "ingest_frame_failures_total", l, o->failures[c]);
	}
	ing_mtext_family(t, "ingest_connections", "gauge", "Open gRPC connections.");
	ing_mtext_u64(t, "ingest_connections", "", ing_grpc_server_nconns(s->srv));

	/* the per-peer table: the same entries for every family, "other" last */
	const struct svc_peer_stats *pe[SVC_OPS_PEERS + 1];
	unsigned n = 0;
	for (unsigned i = 0; i < SVC_OPS_PEERS; i++)
		if (o->peer[i].ip[0])
			pe[n++] = &o->peer[i];
	struct svc_peer_stats other = o->other;
	snprintf(other.ip, sizeof(other.ip), "other");
	pe[n++] = &other;

	ing_mtext_family(t, "ingest_peer_frames_total", "counter",
			 "Frames by client address (at most 16 addresses, the rest under "
			 "peer=\"other\"): result durable (duplicates included) or failed (refused included).");
	for (unsigned i = 0; i < n; i++) {
		peer_series(t, "ingest_peer_frames_total", pe[i]->ip, ",result=\"durable\"", pe[i]->durable);
		peer_series(t, "ingest_peer_frames_total", pe[i]->ip, ",result=\"failed\"", pe[i]->failed);
	}
	ing_mtext_family(t, "ingest_peer_bytes_total", "counter",
			 "Bytes of the frames stored, by client address (as ingest_peer_frames_total).");
	for (unsigned i = 0; i < n; i++)
		peer_series(t, "ingest_peer_bytes_total", pe[i]->ip, "", pe[i]->bytes);
	ing_mtext_family(t, "ingest_peer_sessions", "gauge",
			 "Open sessions, by client address (as ingest_peer_frames_total; \"other\": "
			 "addresses without a series of their own).");
	unsigned listed = 0;
	for (unsigned i = 0; i + 1 < n; i++) {
		unsigned k = peer_sessions(s, pe[i]->ip);
		listed += k;
		peer_series(t, "ingest_peer_sessions", pe[i]->ip, "", k);
	}
	peer_series(t, "ingest_peer_sessions", "other", "", s->nsess > listed ? s->nsess - listed : 0);
	ing_mtext_family(t, "ingest_peer_series_takeovers_total", "counter",
			 "Per-peer series ended because a new address took the entry of one idle "
			 "for 10 minutes (the table holds 16 addresses).");
	ing_mtext_u64(t, "ingest_peer_series_takeovers_total", "", o->peer_takeovers);
}
