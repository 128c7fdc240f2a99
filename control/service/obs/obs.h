/* SPDX-License-Identifier: Apache-2.0 */
/*
 * obs.h - what the service shows in /metrics (Prometheus text, control/net/metrics.h):
 * ing_svc_metrics (service.h) renders the service's families (metrics.c) and adds these.
 * Control thread; read-only over the service's state.
 */
#ifndef ING_SERVICE_OBS_H
#define ING_SERVICE_OBS_H

#include "control/net/metrics.h"
#include "control/service/state.h"

/* failures by code, connections, per-peer series (ops.c) */
void svc_ops_metrics(struct ing_svc *s, struct ing_mtext *t);
/* the object store tier (tier_metrics.c) */
void svc_tier_metrics(struct ing_svc *s, struct ing_mtext *t);
/* DRAINING and the fleet export (fleet_metrics.c) */
void svc_fleet_metrics(struct ing_svc *s, struct ing_mtext *t);

#endif
