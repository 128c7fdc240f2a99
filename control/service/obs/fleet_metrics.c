/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fleet_metrics.c - the node's fleet families in /metrics: DRAINING, and the export to the fleet
 * catalog (control/fleet/ keeps the state; read through ing_fleet_get_stats, never waiting
 * for PostgreSQL).
 */
#include "control/service/obs/obs.h"
#include "control/fleet/fleet.h"

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
