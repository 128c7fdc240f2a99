/* SPDX-License-Identifier: Apache-2.0 */
/*
 * metrics.c - the service's Prometheus families (ing_svc_metrics: the node's /metrics
 * page renders them). Counters and histograms live in struct svc_metrics (state.h),
 * counted by service/counters.c as frames finish; the page reads them there, the pool and the
 * RDMA pollers' relaxed counters, then adds the fleet's, the tier's and on-call's families
 * (obs/fleet_metrics.c, obs/tier_metrics.c, obs/ops.c). Names follow Prometheus: ingest_ prefix, _total
 * counters, seconds and bytes, bounded labels (transport, result, stage, size class,
 * lcore; never a frame or session id).
 */
#include "control/service/obs/obs.h"
#include "control/service/counters.h"
#include "control/service/rails.h"
#include "common/clock.h"
#include "dataplane/rdma/rdma.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

static const char *const xport_name[SVC_X_N] = { "grpc", "rdma" };
static const char *const result_name[SVC_R_N] = { "durable", "duplicate", "failed", "refused" };
#define metric_stage svc_metric_stage

/* busy share of each poller since the previous sample (at least 1 s apart) */
static void sample_busy(struct ing_svc *s, uint64_t now)
{
	struct svc_metrics *m = &s->m;
	unsigned n = ing_rdma_nlcores(s->env.rdma);
	if (m->busy_t_prev && now - m->busy_t_prev < 1000000000ull)
		return;
	for (unsigned i = 0; i < n && i < SVC_M_LCORES; i++) {
		struct ing_rdma_lcore_stats st;
		unsigned id;
		if (ing_rdma_lcore_stats(s->env.rdma, i, &id, &st))
			continue;
		if (m->busy_t_prev && st.busy_ns >= m->busy_prev_ns[i]) {
			double r = (double)(st.busy_ns - m->busy_prev_ns[i]) / (double)(now - m->busy_t_prev);
			m->busy_ratio[i] = r > 1.0 ? 1.0 : r;
		}
		m->busy_prev_ns[i] = st.busy_ns;
	}
	m->busy_t_prev = now;
}

/* Frames and bytes finished, and received, by transport and result. */
static void metrics_frames(struct ing_svc *s, struct ing_mtext *t)
{
	struct svc_metrics *m = &s->m;
	char l[128];

	ing_mtext_family(t, "ingest_frames_total", "counter",
			 "Frames finished, by transport and result (durable: stored now; duplicate: "
			 "already stored; failed: NACKed after admission; refused: NACKed at admission).");
	for (unsigned x = 0; x < SVC_X_N; x++)
		for (unsigned r = 0; r < SVC_R_N; r++) {
			snprintf(l, sizeof(l), "transport=\"%s\",result=\"%s\"", xport_name[x], result_name[r]);
			ing_mtext_u64(t, "ingest_frames_total", l, m->frames[x][r]);
		}
	ing_mtext_family(t, "ingest_frame_bytes_total", "counter",
			 "Declared bytes of the frames finished, by transport and result.");
	for (unsigned x = 0; x < SVC_X_N; x++)
		for (unsigned r = 0; r < SVC_R_N - 1; r++) {   /* refused frames carry no bytes */
			snprintf(l, sizeof(l), "transport=\"%s\",result=\"%s\"", xport_name[x], result_name[r]);
			ing_mtext_u64(t, "ingest_frame_bytes_total", l, m->bytes[x][r]);
		}
	ing_mtext_family(t, "ingest_received_frames_total", "counter",
			 "Frames whose bytes all arrived in the node (Ack RECEIVED), by transport.");
	for (unsigned x = 0; x < SVC_X_N; x++) {
		snprintf(l, sizeof(l), "transport=\"%s\"", xport_name[x]);
		ing_mtext_u64(t, "ingest_received_frames_total", l, m->rx_frames[x]);
	}
	ing_mtext_family(t, "ingest_received_bytes_total", "counter",
			 "Bytes of the frames received (Ack RECEIVED), by transport.");
	for (unsigned x = 0; x < SVC_X_N; x++) {
		snprintf(l, sizeof(l), "transport=\"%s\"", xport_name[x]);
		ing_mtext_u64(t, "ingest_received_bytes_total", l, m->rx_bytes[x]);
	}
}

/* The latency view's histograms (the acks' and the internal stages'). */
static void metrics_latency(struct ing_svc *s, struct ing_mtext *t)
{
	char l[128];

	ing_mtext_family(t, "ingest_ack_latency_seconds", "histogram",
			 "Node-side time from a frame's admission to its RECEIVED or DURABLE ack.");
	ing_mtext_hist(t, "ingest_ack_latency_seconds", "stage=\"received\"", &s->lat[SVC_LAT_RECEIVED_ALL]);
	ing_mtext_hist(t, "ingest_ack_latency_seconds", "stage=\"durable\"", &s->lat[SVC_LAT_DURABLE]);
	ing_mtext_family(t, "ingest_stage_seconds", "histogram",
			 "Time of a frame in each internal stage after RECEIVED: queue (waiting for a "
			 "persistence worker), write (bytes written to its file), sync (fdatasync and "
			 "rename), commit (directory fsync and catalog transaction, shared by a group), "
			 "ack (DURABLE to its ack on the control thread).");
	for (unsigned i = 0; i < sizeof(metric_stage) / sizeof(metric_stage[0]); i++) {
		snprintf(l, sizeof(l), "stage=\"%s\"", metric_stage[i].name);
		ing_mtext_hist(t, "ingest_stage_seconds", l, &s->lat[metric_stage[i].lat]);
	}
}

/* Pool slots per class, frames in flight and in persistence, sessions by transport. */
static void metrics_capacity(struct ing_svc *s, struct ing_mtext *t)
{
	char l[128];

	for (int used = 0; used < 2; used++) {
		const char *name = used ? "ingest_pool_slots_in_use" : "ingest_pool_slots";
		ing_mtext_family(t, name, "gauge", used ?
				 "MR pool slots holding a frame, per size class (slot bytes)." :
				 "MR pool slots, per size class (slot bytes).");
		for (unsigned c = 0; c < ing_pool_nclasses(s->pool); c++) {
			uint64_t size;
			unsigned total, nfree;
			if (ing_pool_class_stats(s->pool, c, &size, &total, &nfree))
				continue;
			snprintf(l, sizeof(l), "size_class=\"%llu\"", (unsigned long long)size);
			ing_mtext_u64(t, name, l, !used ? total : nfree <= total ? total - nfree : 0);
		}
	}
	ing_mtext_family(t, "ingest_frames_in_flight", "gauge",
			 "Frames admitted and not yet DURABLE-acked or failed.");
	ing_mtext_u64(t, "ingest_frames_in_flight", "", s->nfr_used);
	ing_mtext_family(t, "ingest_persist_queue_frames", "gauge",
			 "Frames received and not yet back from persistence (queued or being written).");
	ing_mtext_u64(t, "ingest_persist_queue_frames", "", s->persisting);

	/* by state: idle (negotiated, no stream, nothing in flight: it expires after
	 * session-idle), streaming (a stream open, no frame in flight), active (frames in
	 * flight) */
	static const char *const state_name[3] = { "idle", "streaming", "active" };
	unsigned ns[SVC_X_N] = { 0, 0 }, nst[SVC_X_N][3];
	memset(nst, 0, sizeof(nst));
	for (unsigned i = 0; i < s->o.max_sessions; i++) {
		const struct svc_session *ss = &s->sess[i];
		if (!ss->in_use)
			continue;
		ns[svc_xi(ss->transport)]++;
		nst[svc_xi(ss->transport)][ss->cr.inflight ? 2 : ss->streams ? 1 : 0]++;
	}
	/* the family's meaning since it exists: every session in the table, idle ones too */
	ing_mtext_family(t, "ingest_sessions", "gauge",
			 "Sessions in the table (negotiated and not expired, idle ones included), by "
			 "negotiated transport; ingest_sessions_by_state tells idle from active.");
	for (unsigned x = 0; x < SVC_X_N; x++) {
		snprintf(l, sizeof(l), "transport=\"%s\"", xport_name[x]);
		ing_mtext_u64(t, "ingest_sessions", l, ns[x]);
	}
	ing_mtext_family(t, "ingest_sessions_by_state", "gauge",
			 "Sessions by negotiated transport and state: idle (no stream, no frame in "
			 "flight), streaming (a stream open, no frame in flight), active (frames in flight).");
	for (unsigned x = 0; x < SVC_X_N; x++)
		for (unsigned k = 0; k < 3; k++) {
			snprintf(l, sizeof(l), "transport=\"%s\",state=\"%s\"", xport_name[x], state_name[k]);
			ing_mtext_u64(t, "ingest_sessions_by_state", l, nst[x][k]);
		}
}

/* Fallback switches, refused authentication, the fair-sharing limits, the gRPC receive
 * path and admission. */
static void metrics_limits(struct ing_svc *s, struct ing_mtext *t)
{
	ing_mtext_family(t, "ingest_fallback_switches_total", "counter",
			 "Sessions that asked for RDMA and got the gRPC stream, plus RDMA device losses.");
	ing_mtext_u64(t, "ingest_fallback_switches_total", "", s->c_fallback);
	ing_mtext_family(t, "ingest_auth_refused_total", "counter",
			 "Calls refused UNAUTHENTICATED.");
	ing_mtext_u64(t, "ingest_auth_refused_total", "", s->c_auth_refused);
	struct ing_grpc_server_limits gl;
	ing_grpc_server_get_limits(s->srv, &gl);
	static const char lim_help[] =
		"What the fair-sharing limits did: connections closed at the handshake timeout or "
		"the idle timeout, evicted (idle longest) for a newcomer, refused, taken on the "
		"health reserve; sessions evicted; frames whose slot was released after "
		"--slot-stall-ms; calls refused while their address was locked out after failed "
		"authentications.";
	const struct { const char *ev; uint64_t v; } lims[] = {
		{ "conn_handshake_timeout", gl.handshake_timeouts },
		{ "conn_idle_closed", gl.idle_closed },
		{ "conn_evicted", gl.evicted },
		{ "conn_refused", gl.refused },
		{ "conn_health_reserve", gl.health_reserve },
		{ "session_evicted", s->c_evicted },
		{ "slot_stalled", s->c_stalled },
		{ "auth_locked_out", s->c_auth_locked },
	};
	ing_mtext_family(t, "ingest_limit_events_total", "counter", lim_help);
	for (size_t i = 0; i < sizeof(lims) / sizeof(lims[0]); i++) {
		char lab[48];
		snprintf(lab, sizeof(lab), "event=\"%s\"", lims[i].ev);
		ing_mtext_u64(t, "ingest_limit_events_total", lab, lims[i].v);
	}
	struct ing_grpc_server_rx rx;
	ing_grpc_server_get_rx(s->srv, &rx);
	ing_mtext_family(t, "ingest_grpc_receive_bytes_total", "counter",
			 "Bytes read from gRPC connections: straight into their frame slot (placed: "
			 "the kernel's copy is the only one) or through the receive buffer (copied).");
	ing_mtext_u64(t, "ingest_grpc_receive_bytes_total", "path=\"placed\"", rx.placed);
	ing_mtext_u64(t, "ingest_grpc_receive_bytes_total", "path=\"copied\"", rx.copied);
	ing_mtext_family(t, "ingest_grpc_receive_spilled_bytes_total", "counter",
			 "Of the copied bytes: read ahead into a slot on a wrong guess of the next "
			 "HTTP/2 frame, then copied back (a PING or another stream between DATA frames).");
	ing_mtext_u64(t, "ingest_grpc_receive_spilled_bytes_total", "", rx.spilled);
	ing_mtext_family(t, "ingest_grpc_receive_reads_total", "counter",
			 "Reads (recv or SSL_read) that returned bytes on gRPC connections.");
	ing_mtext_u64(t, "ingest_grpc_receive_reads_total", "", rx.reads);
	ing_mtext_family(t, "ingest_admission_waits_total", "counter",
			 "Frames (any transport) that had to wait for a session credit or a pool slot.");
	ing_mtext_u64(t, "ingest_admission_waits_total", "", s->adm.c_waited);
	ing_mtext_family(t, "ingest_admission_timeouts_total", "counter",
			 "Frames answered ERROR_BUSY after waiting the frame timeout for admission.");
	ing_mtext_u64(t, "ingest_admission_timeouts_total", "", s->adm.c_expired);
	ing_mtext_family(t, "ingest_admission_waiting", "gauge",
			 "Frames waiting for admission now.");
	ing_mtext_u64(t, "ingest_admission_waiting", "", s->adm.nqueued);
}

/* What each dataplane lcore carried and what the placement rule gave it (StatsReply.lcores
 * has the same numbers): one family per column, one sample per lcore. */
struct lcore_row {
	char l[32];                      /* lcore="<id>" */
	uint64_t frames, bytes, failed, conns, sessions;
};
static const struct ing_mtext_col lcore_cols[] = {
	{ "ingest_lcore_frames_total", "counter", "Frames each dataplane lcore brought in (READ pull and WRITE push).", ING_MTEXT_U64(struct lcore_row, frames) },
	{ "ingest_lcore_bytes_total", "counter", "Bytes of those frames.", ING_MTEXT_U64(struct lcore_row, bytes) },
	{ "ingest_lcore_frames_failed_total", "counter", "Frames each dataplane lcore failed (transfer errors, producer gone).", ING_MTEXT_U64(struct lcore_row, failed) },
	{ "ingest_lcore_connections", "gauge", "RDMA connections (QPs) each dataplane lcore serves.", ING_MTEXT_U64(struct lcore_row, conns) },
	{ "ingest_lcore_sessions_total", "counter", "RDMA sessions the placement rule gave each dataplane lcore.", ING_MTEXT_U64(struct lcore_row, sessions) },
};

static void metrics_lcores(struct ing_svc *s, struct ing_mtext *t)
{
	struct svc_lcore sl[ING_RDMA_MAX_LCORES];
	struct lcore_row rows[ING_RDMA_MAX_LCORES];
	unsigned n = svc_engine_lcores(s, sl, ING_RDMA_MAX_LCORES);

	for (unsigned i = 0; i < n; i++) {
		struct lcore_row *r = &rows[i];
		snprintf(r->l, sizeof(r->l), "lcore=\"%u\"", sl[i].id);
		r->frames = sl[i].st.frames_ok;
		r->bytes = sl[i].st.bytes_received;
		r->failed = sl[i].st.frames_failed;
		r->conns = sl[i].info.conns;
		r->sessions = sl[i].info.sessions;
	}
	ing_mtext_rows(t, lcore_cols, sizeof(lcore_cols) / sizeof(lcore_cols[0]), rows, sizeof(rows[0]),
		       n, offsetof(struct lcore_row, l));
}

/* Each RDMA rail, up or down, and what it moved (StatsReply.rails has the same numbers);
 * label rail="<device>",index="<i>" (IngestRailDown in deploy/monitoring/ingest-alerts.yml
 * reads ingest_rail_up). */
struct rail_row {
	char l[128];
	uint64_t up, downs, conns, frames, bytes, failed, cq_errors, link_mbps, parts;
	double down_s;
};
static const struct ing_mtext_col rail_cols[] = {
	{ "ingest_rail_up", "gauge", "1 when the RDMA rail serves (device open, link ACTIVE), 0 when it is down (ingest-stat and Stats say why).", ING_MTEXT_U64(struct rail_row, up) },
	{ "ingest_rail_down_seconds", "gauge", "How long the rail has been down (0 when up).", ING_MTEXT_DBL(struct rail_row, down_s) },
	{ "ingest_rail_downs_total", "counter", "Times the rail went down (link down, device removed, re-open failed) since start.", ING_MTEXT_U64(struct rail_row, downs) },
	{ "ingest_rail_connections", "gauge", "RDMA connections (QPs) on the rail now.", ING_MTEXT_U64(struct rail_row, conns) },
	{ "ingest_rail_frames_total", "counter", "Frames the rail's lcores brought in (READ pull and WRITE push); a striped frame counts once, on its home rail.", ING_MTEXT_U64(struct rail_row, frames) },
	{ "ingest_rail_bytes_total", "counter", "Bytes of those frames (a striped frame's: each part's on its own rail).", ING_MTEXT_U64(struct rail_row, bytes) },
	{ "ingest_rail_parts_total", "counter", "Parts of striped frames the rail's lcores brought in.", ING_MTEXT_U64(struct rail_row, parts) },
	{ "ingest_rail_frames_failed_total", "counter", "Frames the rail's lcores failed.", ING_MTEXT_U64(struct rail_row, failed) },
	{ "ingest_rail_completion_errors_total", "counter", "Error completions on the rail's CQs (not flushes).", ING_MTEXT_U64(struct rail_row, cq_errors) },
	{ "ingest_rail_link_mbps", "gauge", "The rail's port speed x width in Mbit/s (0 unknown).", ING_MTEXT_U64(struct rail_row, link_mbps) },
};

static void metrics_rails(struct ing_svc *s, struct ing_mtext *t)
{
	struct svc_rail sr[ING_RDMA_MAX_RAILS];
	struct rail_row rows[ING_RDMA_MAX_RAILS];
	unsigned n = svc_engine_rails(s, sr, ING_RDMA_MAX_RAILS);

	for (unsigned i = 0; i < n; i++) {
		const struct svc_rail *x = &sr[i];
		struct rail_row *r = &rows[i];
		snprintf(r->l, sizeof(r->l), "rail=\"%.*s\",index=\"%u\"", (int)sizeof(x->info.device) - 1,
			 x->info.device, i);
		r->up = x->info.up;
		r->down_s = x->down_s;
		r->downs = x->info.downs;
		r->conns = x->st.conns;
		r->frames = x->st.frames_received;
		r->bytes = x->st.bytes_received;
		r->failed = x->st.frames_failed;
		r->cq_errors = x->st.completion_errors;
		r->parts = x->st.parts_received;
		r->link_mbps = x->info.link_mbps;
	}
	ing_mtext_rows(t, rail_cols, sizeof(rail_cols) / sizeof(rail_cols[0]), rows, sizeof(rows[0]), n,
		       offsetof(struct rail_row, l));
}

/* The RDMA engine and each dataplane lcore's busy time and ratio. */
static void metrics_rdma(struct ing_svc *s, struct ing_mtext *t, uint64_t now)
{
	struct svc_metrics *m = &s->m;
	char l[128];

	struct ing_rdma_stats rs;
	ing_rdma_get_stats(s->env.rdma, &rs);   /* zeros without an RDMA engine */
	ing_mtext_family(t, "ingest_rdma_read_errors_total", "counter",
			 "Frames whose RDMA READ failed (error completion or lost connection).");
	ing_mtext_u64(t, "ingest_rdma_read_errors_total", "", s->c_rdma_errors);
	ing_mtext_family(t, "ingest_rdma_reconnects_total", "counter",
			 "RDMA connections established again by a session that had one before.");
	ing_mtext_u64(t, "ingest_rdma_reconnects_total", "", m->rdma_reconnects);
	ing_mtext_family(t, "ingest_rdma_connections", "gauge", "Established RDMA connections.");
	ing_mtext_u64(t, "ingest_rdma_connections", "", rs.conns_active);
	ing_mtext_family(t, "ingest_rdma_read_bytes_total", "counter", "Bytes of RDMA READs posted.");
	ing_mtext_u64(t, "ingest_rdma_read_bytes_total", "", rs.bytes_read);
	ing_mtext_family(t, "ingest_rdma_device_events_total", "counter",
			 "RDMA device removals seen, and re-opens of the engine after one.");
	ing_mtext_u64(t, "ingest_rdma_device_events_total", "event=\"removed\"", rs.device_removals);
	ing_mtext_u64(t, "ingest_rdma_device_events_total", "event=\"reopened\"", rs.device_reopens);

	sample_busy(s, now);
	ing_mtext_family(t, "ingest_lcore_busy_seconds_total", "counter",
			 "Time each dataplane lcore spent in poll passes that did work.");
	unsigned nl = ing_rdma_nlcores(s->env.rdma);
	for (unsigned i = 0; i < nl; i++) {
		struct ing_rdma_lcore_stats st;
		unsigned id;
		if (ing_rdma_lcore_stats(s->env.rdma, i, &id, &st))
			continue;
		snprintf(l, sizeof(l), "lcore=\"%u\"", id);
		ing_mtext_sample(t, "ingest_lcore_busy_seconds_total", l, (double)st.busy_ns / 1e9);
	}
	ing_mtext_family(t, "ingest_lcore_busy_ratio", "gauge",
			 "Share of time each dataplane lcore was busy, since the previous scrape (>= 1 s).");
	for (unsigned i = 0; i < nl && i < SVC_M_LCORES; i++) {
		struct ing_rdma_lcore_stats st;
		unsigned id;
		if (ing_rdma_lcore_stats(s->env.rdma, i, &id, &st))
			continue;
		snprintf(l, sizeof(l), "lcore=\"%u\"", id);
		ing_mtext_sample(t, "ingest_lcore_busy_ratio", l, m->busy_ratio[i]);
	}
	metrics_lcores(s, t);
	metrics_rails(s, t);
}

void ing_svc_metrics(struct ing_svc *s, struct ing_mtext *t)
{
	uint64_t now = ing_now_ns();

	metrics_frames(s, t);
	metrics_latency(s, t);
	metrics_capacity(s, t);
	metrics_limits(s, t);
	metrics_rdma(s, t, now);
	ing_mtext_family(t, "ingest_uptime_seconds", "gauge", "Seconds since the service started.");
	ing_mtext_sample(t, "ingest_uptime_seconds", "", (double)(now - s->t_start_ns) / 1e9);
	svc_fleet_metrics(s, t);
	svc_tier_metrics(s, t);
	svc_ops_metrics(s, t);
}
