/* SPDX-License-Identifier: Apache-2.0 */
/*
 * svc_ops.c - what an on-call engineer reads from the service: frames failed or refused by
 * error code, open connections, and per-peer series (stored frames and bytes, failures,
 * sessions) with bounded cardinality, in /metrics and in Stats (fields 70-79). Counted as
 * frames finish (svc_ops_frame); control thread only, like the rest of the service.
 *
 * Cardinality: at most SVC_OPS_PEERS addresses have series of their own, plus
 * peer="other". The table is taken by the first addresses that send frames; a newcomer
 * that finds it full counts under "other" until an entry has been idle for
 * SVC_OPS_PEER_IDLE_NS (10 min), whose slot it then takes. So "other" only ever counts
 * live traffic, a peer's counters never jump, and a series that ends had a rate of 0.
 */
#include "control/service/state.h"
#include "control/net/metrics.h"
#include "common/clock.h"
#include "h3000.pb-c.h"

#include <stdio.h>
#include <string.h>

/* h3000.ErrorCode names, as labels (code="crc_mismatch") */
static const char *const code_name[SVC_OPS_CODES] = {
	"none", "invalid_argument", "too_large", "crc_mismatch", "duplicate_conflict",
	"deadline", "transfer", "io", "no_space", "no_transport", "busy", "cancelled",
	"internal", "shutting_down",
};

void ing_svc_set_node_info(struct ing_svc *s, ing_svc_node_info_fn fn, void *arg)
{
	s->ops.info_fn = fn;
	s->ops.info_arg = arg;
}

static struct svc_peer_stats *peer_stats(struct svc_ops *o, const struct svc_peer *peer,
					 uint64_t now)
{
	struct svc_peer_stats *idle = NULL, *free_e = NULL;
	if (!peer || !peer->ip[0])
		return &o->other;
	for (unsigned i = 0; i < SVC_OPS_PEERS; i++) {
		struct svc_peer_stats *p = &o->peer[i];
		if (!p->ip[0]) {
			if (!free_e)
				free_e = p;
			continue;
		}
		if (strcmp(p->ip, peer->ip) == 0)
			return p;
		if (now - p->last_ns >= SVC_OPS_PEER_IDLE_NS && (!idle || p->last_ns < idle->last_ns))
			idle = p;
	}
	if (!free_e && idle) {
		o->peer_takeovers++;
		free_e = idle;
	}
	if (!free_e)
		return &o->other;
	memset(free_e, 0, sizeof(*free_e));
	snprintf(free_e->ip, sizeof(free_e->ip), "%s", peer->ip);
	return free_e;
}

void svc_ops_frame(struct ing_svc *s, const struct svc_peer *peer, int code, uint64_t bytes)
{
	struct svc_ops *o = &s->ops;
	uint64_t now = ing_now_ns();
	struct svc_peer_stats *p = peer_stats(o, peer, now);

	p->last_ns = now;
	if (code == 0) {
		p->durable++;
		p->bytes += bytes;
		return;
	}
	p->failed++;
	o->failures[code > 0 && code < SVC_OPS_CODES ? code : ING_E_INTERNAL]++;
}

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

void svc_ops_stats(struct ing_svc *s, struct H3000__StatsReply *r)
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

/* ---------------------------------------------------------------- log contexts */

static const char *nonempty(const char *s)
{
	return s && *s ? s : NULL;
}

struct ing_log_ctx svc_log_frame(const struct svc_frame *e)
{
	struct ing_log_ctx c = { 0 };
	if (e->call && e->call->call)
		c.peer = ing_grpc_call_peer(e->call->call);
	else if (e->peer)
		c.peer = nonempty(e->peer->ip);
	c.session = e->sess ? e->sess->id : 0;
	if (e->f) {
		c.wafer = nonempty(e->f->wafer_id);
		c.frame = nonempty(e->f->frame_id);
	}
	return c;
}

struct ing_log_ctx svc_log_call(const struct svc_call *pc)
{
	struct ing_log_ctx c = { 0 };
	c.peer = pc->call ? ing_grpc_call_peer(pc->call) : pc->peer ? nonempty(pc->peer->ip) : NULL;
	c.session = pc->sess ? pc->sess->id : 0;
	return c;
}

struct ing_log_ctx svc_log_session(const struct svc_session *ss)
{
	struct ing_log_ctx c = { .session = ss->id };
	c.peer = ss->peer ? nonempty(ss->peer->ip) : NULL;
	return c;
}
