/* SPDX-License-Identifier: Apache-2.0 */
/*
 * identity.c - the node as a fleet member (fleet.h): its id, advertised address and state
 * (ACTIVE or DRAINING), and the membership it answers rpc Members with: the exporter's
 * last read of fleet_members, or the static peers (--fleet-peers), always with this node
 * in it as it is now. Any thread; the membership snapshot is read under f->mu (a few
 * hundred bytes for a unary RPC), the state and counters are atomics.
 */
#include "control/fleet/fleet.h"
#include "control/fleet/fleet_internal.h"
#include "common/clock.h"
#include "common/log.h"
#include "dataplane/dataplane.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define COMP "fleet"

void ing_fleet_opts_init(struct ing_fleet_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->heartbeat_ms = ING_DEFAULT_FLEET_HEARTBEAT_MS;
	o->batch = ING_DEFAULT_FLEET_BATCH;
}

/* ---------------------------------------------------------------- getters */

const char *ing_fleet_node_id(const struct ing_fleet *f)
{
	return f->node_id;
}

enum ing_member_state ing_fleet_state(const struct ing_fleet *f)
{
	return (enum ing_member_state)atomic_load_explicit(&f->state, memory_order_relaxed);
}

void ing_fleet_set_draining(struct ing_fleet *f, bool draining)
{
	int want = draining ? ING_MEMBER_DRAINING : ING_MEMBER_ACTIVE;
	int was = atomic_exchange(&f->state, want);
	if (was != want)
		ING_INFO(COMP, "node %s is now %s%s", f->node_id, draining ? "DRAINING" : "ACTIVE",
			 draining ? " (producers send it no new wafers)" : "");
	ing_mbox_kick(f->mb);   /* the exporter heartbeats the change now (NULL: no exporter) */
}

void ing_fleet_get_stats(struct ing_fleet *f, struct ing_fleet_stats *st)
{
	memset(st, 0, sizeof(*st));
	st->enabled = f->conninfo != NULL;
	st->pg_up = atomic_load_explicit(&f->pg_up, memory_order_relaxed);
	st->lag_rows = atomic_load_explicit(&f->lag_rows, memory_order_relaxed);
	int64_t oldest = atomic_load_explicit(&f->oldest_ms, memory_order_relaxed);
	if (st->lag_rows && oldest > 0) {
		int64_t now_ms = ing_wall_ns() / 1000000;
		st->lag_seconds = now_ms > oldest ? (double)(now_ms - oldest) / 1000.0 : 0.0;
	}
	st->exported = atomic_load_explicit(&f->exported, memory_order_relaxed);
	st->errors = atomic_load_explicit(&f->errors, memory_order_relaxed);
	st->heartbeats = atomic_load_explicit(&f->heartbeats, memory_order_relaxed);
	st->batches = atomic_load_explicit(&f->batches, memory_order_relaxed);
}

static int member_cmp(const void *a, const void *b)
{
	return strcmp(((const struct ing_fleet_member *)a)->node_id,
		      ((const struct ing_fleet_member *)b)->node_id);
}

/* FNV-1a over what a producer routes by: ids, addresses, states */
static uint64_t members_epoch(const struct ing_fleet_member *m, unsigned n)
{
	uint64_t h = 1469598103934665603ull;
	for (unsigned i = 0; i < n; i++) {
		const char *parts[] = { m[i].node_id, m[i].address };
		for (unsigned k = 0; k < 2; k++) {
			for (const char *c = parts[k]; *c; c++)
				h = (h ^ (uint8_t)*c) * 1099511628211ull;
			h = (h ^ 0xff) * 1099511628211ull;
		}
		h = (h ^ (uint8_t)m[i].state) * 1099511628211ull;
	}
	return h ? h : 1;
}

unsigned ing_fleet_members(struct ing_fleet *f, struct ing_fleet_member *out, unsigned max,
			   uint64_t *epoch, const char **source)
{
	struct ing_fleet_member *all = calloc(ING_FLEET_MAX_MEMBERS + 1, sizeof(*all));
	unsigned n = 0;
	bool self_seen = false;

	pthread_mutex_lock(&f->mu);
	const struct ing_fleet_member *src = f->pg_seen ? f->pgm : f->peers;
	unsigned ns = f->pg_seen ? f->npgm : f->npeers;
	*source = f->pg_seen ? "postgresql" : "static";
	if (all) {
		for (unsigned i = 0; i < ns && n < ING_FLEET_MAX_MEMBERS; i++)
			all[n++] = src[i];
	}
	pthread_mutex_unlock(&f->mu);
	if (!all) {
		*epoch = 0;
		return 0;
	}
	for (unsigned i = 0; i < n; i++) {
		if (strcmp(all[i].node_id, f->node_id))
			continue;
		self_seen = true;   /* this node answers: not DOWN, whatever its heartbeat says */
		all[i].state = ing_fleet_state(f);
		snprintf(all[i].address, sizeof(all[i].address), "%s", f->advertise);
	}
	if (!self_seen) {
		struct ing_fleet_member *m = &all[n++];
		memset(m, 0, sizeof(*m));
		snprintf(m->node_id, sizeof(m->node_id), "%s", f->node_id);
		snprintf(m->address, sizeof(m->address), "%s", f->advertise);
		m->state = ing_fleet_state(f);
		m->heartbeat_ms = ing_wall_ns() / 1000000;
	}
	qsort(all, n, sizeof(*all), member_cmp);
	*epoch = members_epoch(all, n);
	memcpy(out, all, sizeof(*all) * (n < max ? n : max));
	free(all);
	return n;
}
