/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rails.h - the node's RDMA rails as Negotiate, Stats and /metrics show them, and its
 * dataplane lcores as Stats and /metrics show them (engine.c): one read of every rail's
 * (lcore's) state and counters, so the faces say the same.
 */
#ifndef ING_SVC_RAILS_H
#define ING_SVC_RAILS_H

#include <stdint.h>

#include "dataplane/rdma/rdma.h"

struct ing_svc;

struct svc_rail {
	struct ing_rdma_rail_info info;   /* info.up: serving (open, link ACTIVE) */
	struct ing_rdma_rail_stats st;
	double down_s;                    /* how long it has been down, 0 up */
	int64_t down_since_unix_ms;       /* since when (wall clock), 0 up */
};

/* Every rail of the node's engine, up to max, in rail order: the count (0 without RDMA). */
unsigned svc_engine_rails(const struct ing_svc *s, struct svc_rail *out, unsigned max);

struct svc_lcore {
	unsigned id;                       /* EAL lcore (or the pthread's index) */
	struct ing_rdma_lcore_info info;   /* placement: rail, node, connections, sessions */
	struct ing_rdma_lcore_stats st;
};

/* Every dataplane lcore of the node's engine whose info and counters read, up to max, in
 * poller order: the count (0 without RDMA). */
unsigned svc_engine_lcores(const struct ing_svc *s, struct svc_lcore *out, unsigned max);

#endif
