/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rdma_place.c - which dataplane lcore serves a new RDMA session (its QP on that lcore's
 * CQ), and how long a session keeps it. Pure bookkeeping on the control thread: the
 * engine (rdma_cm.c) fills the loads from its connection list when a CONNECT_REQUEST
 * arrives; unit tests call it with made-up loads.
 *
 * The rule (docs/ARCHITECTURE.md "Several dataplane lcores"), in order:
 *  0. only the lcores of the connection's rail (their CQs are on its device);
 *  1. NUMA-local first: only the lcores on the rail's node, when that node is known and
 *     at least one of them is on it (else every lcore of the rail);
 *  2. least loaded: fewest live connections;
 *  3. then fewest sessions given to it since start: a run of short sessions (one after
 *     the other, never two at once) still goes round every lcore;
 *  4. then the lowest index (deterministic).
 * A session keeps its lcore for as long as that lcore may hold its frames (the sticky
 * table below): a reconnect after a QP error must land where its parked frames are.
 */
#include "dataplane/rdma/rdma.h"

int ing_rdma_lcore_pick_on(const struct ing_rdma_lcore_load *l, unsigned n, int rail, int dev_node)
{
	bool local = false;
	int best = -1;

	if (!l || !n)
		return -EINVAL;
	for (unsigned i = 0; i < n && dev_node >= 0; i++)
		local |= l[i].numa_node == dev_node && (rail < 0 || l[i].rail == (unsigned)rail);
	for (unsigned i = 0; i < n; i++) {
		if (rail >= 0 && l[i].rail != (unsigned)rail)
			continue;
		if (local && l[i].numa_node != dev_node)
			continue;
		if (best < 0 || l[i].conns < l[best].conns ||
		    (l[i].conns == l[best].conns && l[i].sessions < l[best].sessions))
			best = (int)i;
	}
	return best < 0 ? -ENOENT : best;
}

int ing_rdma_lcore_pick(const struct ing_rdma_lcore_load *l, unsigned n, int dev_node)
{
	return ing_rdma_lcore_pick_on(l, n, -1, dev_node);
}

void ing_rdma_sticky_init(struct ing_rdma_sticky *t)
{
	memset(t, 0, sizeof(*t));
}

int ing_rdma_sticky_find(const struct ing_rdma_sticky *t, uint64_t session_id, uint64_t now_ns)
{
	for (unsigned i = 0; i < t->n; i++)
		if (t->e[i].session_id == session_id && t->e[i].until_ns > now_ns)
			return t->e[i].lcore;
	return -1;
}

void ing_rdma_sticky_keep(struct ing_rdma_sticky *t, uint64_t session_id, unsigned lcore,
			  uint64_t until_ns, uint64_t now_ns)
{
	unsigned at = t->n, oldest = 0;

	for (unsigned i = 0; i < t->n; i++) {
		if (t->e[i].session_id == session_id || t->e[i].until_ns <= now_ns) {
			at = i;   /* its own entry, or an expired one: reuse it */
			break;
		}
		if (t->e[i].until_ns < t->e[oldest].until_ns)
			oldest = i;
	}
	if (at == ING_RDMA_STICKY_MAX)
		at = oldest;   /* full of live entries: the one that ends first goes */
	else if (at == t->n)
		t->n++;
	t->e[at].session_id = session_id;
	t->e[at].lcore = (uint16_t)lcore;
	t->e[at].until_ns = until_ns;
}
