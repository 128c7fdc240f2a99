/* SPDX-License-Identifier: Apache-2.0 */
/*
 * svc_fleet.c - the service's fleet face: rpc Members (the membership producers route
 * by), the node id and state in NegotiateReply, the export counters in StatsReply
 * (fields 50-56) and /metrics. The fleet state itself lives in fleet/ (its exporter
 * thread talks to PostgreSQL); everything here reads its snapshot on the control thread
 * and never waits for PostgreSQL.
 *
 * Members needs no token even when the node has one: like grpc.health.v1 it says only
 * which nodes exist, and a producer asks it before it negotiates.
 */
#include "control/service/state.h"
#include "control/net/metrics.h"
#include "common/log.h"
#include "control/fleet/fleet.h"
#include "h3000.pb-c.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ing_svc_attach_fleet(struct ing_svc *s, struct ing_fleet *f)
{
	s->fleet = f;
}

static H3000__MemberState pb_state(enum ing_member_state st)
{
	switch (st) {
	case ING_MEMBER_ACTIVE: return H3000__MEMBER_STATE__MEMBER_ACTIVE;
	case ING_MEMBER_DRAINING: return H3000__MEMBER_STATE__MEMBER_DRAINING;
	case ING_MEMBER_DOWN: return H3000__MEMBER_STATE__MEMBER_DOWN;
	default: return H3000__MEMBER_STATE__MEMBER_STATE_UNSPECIFIED;
	}
}

void svc_fleet_negotiate(struct ing_svc *s, H3000__NegotiateReply *rep)
{
	if (!s->fleet)
		return;
	rep->nodeid = (char *)ing_fleet_node_id(s->fleet);
	rep->nodestate = pb_state(ing_fleet_state(s->fleet));
}

void svc_fleet_stats(struct ing_svc *s, H3000__StatsReply *r)
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
	r->fleetnodestate = pb_state(ing_fleet_state(s->fleet));
}

void svc_fleet_metrics(struct ing_svc *s, struct ing_mtext *t)
{
	if (!s->fleet)
		return;
	struct ing_fleet_stats st;
	ing_fleet_get_stats(s->fleet, &st);
	ing_mtext_family(t, "ingest_fleet_draining", "gauge",
			 "1 while this node is DRAINING (producers send it no new wafers).");
	ing_mtext_u64(t, "ingest_fleet_draining", "", ing_fleet_state(s->fleet) == ING_MEMBER_DRAINING);
	if (!st.enabled)
		return;
	ing_mtext_family(t, "ingest_fleet_export_lag_rows", "gauge",
			 "Catalog rows committed on this node and not yet in the fleet catalog (PostgreSQL).");
	ing_mtext_u64(t, "ingest_fleet_export_lag_rows", "", st.lag_rows);
	ing_mtext_family(t, "ingest_fleet_export_lag_seconds", "gauge",
			 "Age of the oldest catalog row not yet in the fleet catalog (0: none).");
	ing_mtext_sample(t, "ingest_fleet_export_lag_seconds", "", st.lag_seconds);
	ing_mtext_family(t, "ingest_fleet_exported_rows_total", "counter",
			 "Catalog rows exported to the fleet catalog since start.");
	ing_mtext_u64(t, "ingest_fleet_exported_rows_total", "", st.exported);
	ing_mtext_family(t, "ingest_fleet_export_errors_total", "counter",
			 "Failed connects and transactions with the fleet catalog since start.");
	ing_mtext_u64(t, "ingest_fleet_export_errors_total", "", st.errors);
	ing_mtext_family(t, "ingest_fleet_heartbeats_total", "counter",
			 "Membership heartbeats written to the fleet catalog since start.");
	ing_mtext_u64(t, "ingest_fleet_heartbeats_total", "", st.heartbeats);
	ing_mtext_family(t, "ingest_fleet_pg_up", "gauge",
			 "1 when the last round trip to the fleet catalog succeeded.");
	ing_mtext_u64(t, "ingest_fleet_pg_up", "", st.pg_up);
}

/* ================================================================ rpc Members */

static int members_start(struct ing_grpc_call *c, void *ctx)
{
	ing_grpc_call_set_user(c, ctx);
	return ING_GRPC_OK;
}

static void members_close(struct ing_grpc_call *c, int status)
{
	(void)c;
	(void)status;
}

static int members_msg(struct ing_grpc_call *c, const uint8_t *msg, size_t len)
{
	struct ing_svc *s = ing_grpc_call_user(c);
	(void)msg;
	(void)len;
	if (!s->fleet) {
		ing_grpc_call_finish(c, ING_GRPC_UNIMPLEMENTED, "this node has no fleet identity");
		return ING_GRPC_UNIMPLEMENTED;
	}
	struct ing_fleet_member *m = calloc(ING_FLEET_MAX_MEMBERS, sizeof(*m));
	H3000__Member *pm = calloc(ING_FLEET_MAX_MEMBERS, sizeof(*pm));
	H3000__Member **pp = calloc(ING_FLEET_MAX_MEMBERS, sizeof(*pp));
	int rc = ING_GRPC_RESOURCE_EXHAUSTED;
	if (!m || !pm || !pp) {
		ing_grpc_call_finish(c, rc, "out of memory");
		goto out;
	}
	uint64_t epoch = 0;
	const char *source = "static";
	unsigned n = ing_fleet_members(s->fleet, m, ING_FLEET_MAX_MEMBERS, &epoch, &source);
	if (n > ING_FLEET_MAX_MEMBERS)
		n = ING_FLEET_MAX_MEMBERS;
	H3000__MembersReply rep = H3000__MEMBERS_REPLY__INIT;
	for (unsigned i = 0; i < n; i++) {
		h3000__member__init(&pm[i]);
		pm[i].nodeid = m[i].node_id;
		pm[i].address = m[i].address;
		pm[i].state = pb_state(m[i].state);
		pm[i].heartbeatunixms = m[i].heartbeat_ms;
		pp[i] = &pm[i];
	}
	rep.n_members = n;
	rep.members = pp;
	rep.selfid = (char *)ing_fleet_node_id(s->fleet);
	rep.epoch = epoch;
	rep.source = (char *)source;
	size_t sz = protobuf_c_message_get_packed_size(&rep.base);
	uint8_t *buf = malloc(sz ? sz : 1);
	if (!buf) {
		ing_grpc_call_finish(c, rc, "out of memory");
		goto out;
	}
	protobuf_c_message_pack(&rep.base, buf);
	rc = ing_grpc_call_send(c, buf, sz) ? ING_GRPC_INTERNAL : 0;
	free(buf);
	if (!rc)
		ing_grpc_call_finish(c, ING_GRPC_OK, NULL);
out:
	free(m);
	free(pm);
	free(pp);
	return rc;
}

const struct ing_grpc_method svc_members_method = {
	.path = "/h3000.RDMASvc/Members",
	.on_start = members_start,
	.on_message = members_msg,
	.on_close = members_close,
};
