/* SPDX-License-Identifier: Apache-2.0 */
/*
 * counters.c - the service's counters and latency view, counted as frames finish
 * (counters.h).
 *
 * Per-peer cardinality: at most SVC_OPS_PEERS addresses have series of their own, plus
 * peer="other". The table is taken by the first addresses that send frames; a newcomer
 * that finds it full counts under "other" until an entry has been idle for
 * SVC_OPS_PEER_IDLE_NS (10 min), whose slot it then takes. So "other" only ever counts
 * live traffic, a peer's counters never jump, and a series that ends had a rate of 0.
 */
#include "control/service/counters.h"
#include "common/clock.h"

#include <stdio.h>
#include <string.h>

/* ingest_stage_seconds and StatsReply.latency: their stages in the one latency view */
const struct svc_metric_stage svc_metric_stage[SVC_METRIC_STAGES] = {
	{ "queue", SVC_LAT_QUEUE }, { "write", SVC_LAT_WRITE }, { "sync", SVC_LAT_SYNC },
	{ "commit", SVC_LAT_COMMIT }, { "ack", SVC_LAT_ACK },
};

const char *const svc_stage_name[SVC_NSTAGES + 1] = {
	"received", "crc", "written", "synced", "catalogued", "ack", "total",
};

static void result(struct ing_svc *s, uint8_t transport, enum svc_result r, uint64_t bytes)
{
	s->m.frames[svc_xi(transport)][r]++;
	s->m.bytes[svc_xi(transport)][r] += bytes;
}

/*
 * Split admitted -> now into the node's stages; a stage the frame skipped (0 stamp) is 0
 * and its time goes to the next one reached, so the stages always add up.
 */
static void stage_split(const struct ing_frame *f, uint64_t now, uint64_t *out)
{
	const uint64_t t[SVC_NSTAGES] = { f->t_received_ns, f->t_crc_ns, f->t_written_ns,
					  f->t_synced_ns, f->t_durable_ns, now };
	uint64_t prev = f->t_admit_ns;
	for (unsigned i = 0; i < SVC_NSTAGES; i++) {
		out[i] = 0;
		if (!t[i] || t[i] < prev)
			continue;
		out[i] = t[i] - prev;
		prev = t[i];
	}
}

/* One sample of the latency view. */
struct sample {
	enum svc_lat lat;
	uint64_t ns;
};

/* A cut from one stamp to a later one, when both were reached. */
static unsigned cut(struct sample *x, enum svc_lat lat, uint64_t from, uint64_t to)
{
	if (!from || to < from)
		return 0;
	*x = (struct sample){ lat, to - from };
	return 1;
}

/* Every cut of a durable frame's time (the latency view, state.h); how many. */
static unsigned durable_cuts(const struct ing_frame *f, uint64_t now, const uint64_t *stage_ns,
			     struct sample *x)
{
	uint64_t t_dur = f->t_durable_ns ? f->t_durable_ns : now;
	unsigned n = 0;

	x[n++] = (struct sample){ SVC_LAT_DURABLE, t_dur > f->t_admit_ns ? t_dur - f->t_admit_ns : 0 };
	for (unsigned i = 0; i < SVC_NSTAGES; i++)   /* SVC_LAT_ACK among them */
		x[n++] = (struct sample){ (enum svc_lat)i, stage_ns[i] };
	x[n++] = (struct sample){ SVC_LAT_TOTAL, now - f->t_admit_ns };
	n += cut(&x[n], SVC_LAT_QUEUE, f->t_received_ns, f->t_persist_ns);
	if (f->t_written_ns && f->t_synced_ns) {   /* written now (not a duplicate, not the null sink) */
		n += cut(&x[n], SVC_LAT_WRITE, f->t_persist_ns, f->t_written_ns);
		n += cut(&x[n], SVC_LAT_SYNC, f->t_written_ns, f->t_synced_ns);
		n += cut(&x[n], SVC_LAT_COMMIT, f->t_synced_ns, f->t_durable_ns);
	}
	return n;
}

void svc_count_refused(struct ing_svc *s, uint8_t xport, const struct svc_peer *peer, int code)
{
	s->c_refused++;
	result(s, xport, SVC_R_REFUSED, 0);
	svc_ops_frame(s, peer, code, 0);
}

void svc_count_failed(struct ing_svc *s, const struct svc_frame *e)
{
	s->c_failed++;
	result(s, e->f->transport, SVC_R_FAILED, e->length);
	svc_ops_frame(s, e->peer, e->f->status, 0);
}

void svc_count_done(struct ing_svc *s, const struct svc_frame *e, uint64_t now,
		    uint64_t stage_ns[SVC_NSTAGES])
{
	const struct ing_frame *f = e->f;
	struct sample x[SVC_LAT_N];
	unsigned n = 0;

	if (f->status != ING_E_NONE) {
		s->c_failed++;
		result(s, f->transport, SVC_R_FAILED, f->length);
	} else {
		s->c_durable++;
		s->c_bytes_durable += f->length;
		s->c_dup += f->duplicate;
		result(s, f->transport, f->duplicate ? SVC_R_DUPLICATE : SVC_R_DURABLE, f->length);
		stage_split(f, now, stage_ns);
		n = durable_cuts(f, now, stage_ns, x);
	}
	svc_ops_frame(s, e->peer, f->status, f->length);
	for (unsigned i = 0; i < n; i++)   /* the stages, in the one latency view */
		ing_hist_add(&s->lat[x[i].lat], x[i].ns);
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
