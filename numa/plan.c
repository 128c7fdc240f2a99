/* SPDX-License-Identifier: Apache-2.0 */
/* The placement plan: which cpu runs what, which node holds the MR pool (rules in numa.h). */
#include "numa/numa.h"
#include "numa/numa_internal.h"
#include "common/log.h"
#include "common/stripe.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define MAX_CPUS 4096
#define MAX_LIST 1024

void ing_plan_opts_init(struct ing_plan_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->n_dataplane = ING_DEFAULT_DATAPLANE_LCORES;
	o->n_workers = ING_DEFAULT_PLAN_WORKERS;
	o->control_cpu = -1;
	o->pool_node = -1;
	o->stripe_min = ING_STRIPE_DEFAULT_MIN;
}

unsigned ing_plan_pinned_regions(const struct ing_plan *p)
{
	unsigned rails = p->n_rails ? p->n_rails : 1;
	return rails * (p->stripe_min && p->n_regions > 1 ? p->n_regions : 1);
}

static void vwarn(struct ing_plan *p, const char *fmt, va_list ap)
{
	if (p->n_warnings < ING_PLAN_MAX_WARN)
		vsnprintf(p->warnings[p->n_warnings++], ING_PLAN_WARN_LEN, fmt, ap);
}

static void warn(struct ing_plan *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void warn(struct ing_plan *p, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vwarn(p, fmt, ap);
	va_end(ap);
}

/* A warning about a cross-node placement (counted in n_remote: the doctor reports them). */
static void warn_remote(struct ing_plan *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void warn_remote(struct ing_plan *p, const char *fmt, ...)
{
	va_list ap;
	p->n_remote++;
	va_start(ap, fmt);
	vwarn(p, fmt, ap);
	va_end(ap);
}

/* Scratch for one ing_plan_make call (heap: too big for a thread's stack). */
struct usage {
	unsigned char pu[MAX_CPUS];     /* 1: taken by control or a dataplane lcore */
	unsigned char core[MAX_CPUS];   /* same, per physical core id */
	int cores[MAX_LIST], list[MAX_LIST], cand[MAX_LIST];
};

static void take(const struct ing_topo *t, struct usage *u, int cpu)
{
	int core = ing_topo_cpu_core(t, cpu);
	if (cpu >= 0 && cpu < MAX_CPUS)
		u->pu[cpu] = 1;
	if (core >= 0 && core < MAX_CPUS)
		u->core[core] = 1;
}

static bool core_free(const struct ing_topo *t, const struct usage *u, int cpu)
{
	int core = ing_topo_cpu_core(t, cpu);
	return cpu >= 0 && cpu < MAX_CPUS && !u->pu[cpu] && core >= 0 && core < MAX_CPUS &&
	       !u->core[core];
}

static void nodes_str(const struct ing_topo *t, char *buf, size_t len)
{
	int ids[256];
	unsigned n = ing_topo_n_nodes(t);
	if (n > 256)
		n = 256;
	for (unsigned i = 0; i < n; i++)
		ids[i] = ing_topo_node_id(t, i);
	ing_cpulist_format(ids, n, buf, len);
}

static void dev_names(unsigned n, const struct ing_topo_dev *(*get)(const struct ing_topo *, unsigned),
		      const struct ing_topo *t, char *buf, size_t len)
{
	size_t off = 0;
	buf[0] = '\0';
	for (unsigned i = 0; i < n && off < len; i++) {
		int w = snprintf(buf + off, len - off, "%s%s", i ? ", " : "", get(t, i)->name);
		if (w < 0)
			break;
		off += (size_t)w;
	}
	if (!n)
		snprintf(buf, len, "none found");
}

/* Parse and validate an override cpu list. Returns the count or -EINVAL with err set. */
static int parse_cpus(const struct ing_topo *t, const char *what, const char *s, int *cpus,
		      unsigned max, char *err, size_t errlen)
{
	char all[256];
	int n = ing_cpulist_parse(s, cpus, max);
	if (n == -E2BIG)
		return set_err(err, errlen, EINVAL, "%s '%s': more than %u cpus", what, s, max);
	if (n < 0)
		return set_err(err, errlen, EINVAL,
			       "%s '%s': not a cpu list (e.g. \"2-5\" or \"1,3,5\", no duplicates)",
			       what, s);
	ing_topo_cpus_str(t, all, sizeof(all));
	for (int i = 0; i < n; i++)
		if (ing_topo_cpu_node(t, cpus[i]) < 0)
			return set_err(err, errlen, EINVAL,
				       "%s '%s': cpu %d does not exist on this machine (cpus %s)", what,
				       s, cpus[i], all);
	return n;
}

/* ---------------------------------------------------------------- rails and the disk */

/* A rail of device d (NULL: known only by its address). */
static struct ing_plan_rail *rail_add(struct ing_plan *p, const struct ing_topo_dev *d)
{
	struct ing_plan_rail *r = &p->rails[p->n_rails++];
	memset(r, 0, sizeof(*r));
	r->node = r->dev_node = -1;
	r->node_from = ING_RAIL_NODE_UNKNOWN;
	if (d) {
		snprintf(r->dev, sizeof(r->dev), "%s", d->name);
		snprintf(r->netdev, sizeof(r->netdev), "%s", d->netdev);
		r->dev_node = d->node;
		if (d->n_addrs)
			snprintf(r->addr, sizeof(r->addr), "%s", d->addrs[0]);
	}
	return r;
}

/* The device whose netdev has address a (live machine), or NULL. */
static const struct ing_topo_dev *dev_of_addr(const struct ing_topo *t, const char *a)
{
	for (unsigned i = 0; i < ing_topo_n_rdma(t); i++) {
		const struct ing_topo_dev *d = ing_topo_rdma(t, i);
		for (unsigned k = 0; k < d->n_addrs; k++)
			if (!strcmp(d->addrs[k], a))
				return d;
	}
	return NULL;
}

/* --rdma-addr with --rdma-dev: each address to the rail whose netdev has it, the rest in
 * order to the rails without one. */
static int rails_take_addrs(const struct ing_topo *t, struct ing_plan *p, char (*addrs)[48],
			    unsigned na, char *err, size_t errlen)
{
	bool used[ING_PLAN_MAX_RAILS] = { false }, given[ING_PLAN_MAX_RAILS] = { false };

	for (unsigned a = 0; a < na; a++) {
		const struct ing_topo_dev *d = dev_of_addr(t, addrs[a]);
		for (unsigned i = 0; d && i < p->n_rails; i++)
			if (!given[i] && !strcmp(p->rails[i].dev, d->name)) {
				snprintf(p->rails[i].addr, sizeof(p->rails[i].addr), "%s", addrs[a]);
				given[i] = used[a] = true;
				break;
			}
	}
	for (unsigned a = 0; a < na; a++) {
		unsigned i = 0;
		if (used[a])
			continue;
		while (i < p->n_rails && given[i])
			i++;
		if (i == p->n_rails)
			return set_err(err, errlen, EINVAL,
				       "--rdma-addr '%s': more addresses than rails (--rdma-dev lists %u)",
				       addrs[a], p->n_rails);
		snprintf(p->rails[i].addr, sizeof(p->rails[i].addr), "%s", addrs[a]);
		given[i] = true;
	}
	return 0;
}

/* Every RDMA device whose port is ACTIVE and whose netdev has an IPv4 address. */
static void rails_default(const struct ing_topo *t, struct ing_plan *p)
{
	unsigned n = ing_topo_n_rdma(t);

	if (!n) {
		warn(p, "no RDMA device found: fallback (gRPC) transport only; placement follows "
			"the disk");
		p->no_rdma_warning = p->n_warnings;
		return;
	}
	for (unsigned i = 0; i < n; i++) {
		const struct ing_topo_dev *d = ing_topo_rdma(t, i);
		if (d->port_state == 0)
			warn(p, "%s: port 1 is not ACTIVE: no rail on it (rdma link show %s)", d->name,
			     d->name);
		else if (d->addrs_known && !d->n_addrs)
			warn(p, "%s: its netdev %s has no IPv4 address: no rail on it (ip addr add "
				"... dev %s)", d->name, d->netdev[0] ? d->netdev : "?",
			     d->netdev[0] ? d->netdev : "<netdev>");
		else if (p->n_rails == ING_PLAN_MAX_RAILS)
			warn(p, "%s: more than %u RDMA devices: no rail on it (rdma-dev lists the "
				"ones to use)", d->name, ING_PLAN_MAX_RAILS);
		else
			rail_add(p, d);
	}
	if (!p->n_rails)
		warn(p, "no RDMA device is ACTIVE with an IPv4 address: fallback (gRPC) transport "
			"only; placement follows the disk");
}

static int resolve_rails(const struct ing_topo *t, const struct ing_plan_opts *o,
			 struct ing_plan *p, char *err, size_t errlen)
{
	struct ing_rail_spec spec[ING_PLAN_MAX_RAILS];
	char addrs[ING_PLAN_MAX_RAILS][48], names[512], why[256];
	if (o->no_rails)
		return 0;   /* RDMA off: the devices carry nothing, --lcores needs none per rail */
	int ns = ing_rail_list_parse(o->rdma_dev, spec, ING_PLAN_MAX_RAILS, why, sizeof(why));
	if (ns < 0)
		return set_err(err, errlen, EINVAL, "--rdma-dev %s", why);
	int na = ing_addr_list_parse(o->rdma_addr, addrs, ING_PLAN_MAX_RAILS, why, sizeof(why));
	if (na < 0)
		return set_err(err, errlen, EINVAL, "--rdma-addr %s", why);

	for (int i = 0; i < ns; i++) {
		const struct ing_topo_dev *d = ing_topo_find_rdma(t, spec[i].dev);
		if (!d) {
			dev_names(ing_topo_n_rdma(t), ing_topo_rdma, t, names, sizeof(names));
			return set_err(err, errlen, ENODEV, "RDMA device '%s' not found (RDMA devices: %s)",
				       spec[i].dev, names);
		}
		struct ing_plan_rail *r = rail_add(p, d);
		if (spec[i].node >= 0) {
			if (!ing_topo_node_exists(t, spec[i].node)) {
				nodes_str(t, names, sizeof(names));
				return set_err(err, errlen, EINVAL,
					       "--rdma-dev '%s@%d': no such NUMA node (nodes: %s)",
					       spec[i].dev, spec[i].node, names);
			}
			r->node = spec[i].node;
			r->node_from = ING_RAIL_NODE_OVERRIDE;
			if (d->node >= 0 && d->node != spec[i].node && ing_topo_n_nodes(t) > 1)
				warn_remote(p, "%s is on node %d, placed on node %d as rdma-dev says: every "
					    "READ and WRITE crosses the interconnect", d->name, d->node,
					    spec[i].node);
		}
	}
	if (ns && na) {
		int rc = rails_take_addrs(t, p, addrs, (unsigned)na, err, errlen);
		if (rc)
			return rc;
	} else if (na) {
		for (int a = 0; a < na; a++) {
			const struct ing_topo_dev *d = dev_of_addr(t, addrs[a]);
			struct ing_plan_rail *r = rail_add(p, d);
			snprintf(r->addr, sizeof(r->addr), "%s", addrs[a]);
			if (!d && ing_topo_is_live(t))
				warn(p, "--rdma-addr %s is on no RDMA device's netdev here: its rail is "
					"placed without knowing its device (the listener says)", addrs[a]);
		}
	} else if (!ns) {
		rails_default(t, p);
	}

	for (unsigned i = 0; i < p->n_rails; i++) {
		struct ing_plan_rail *r = &p->rails[i];
		if (r->node_from == ING_RAIL_NODE_OVERRIDE)
			continue;
		if (r->dev_node >= 0) {
			r->node = r->dev_node;
			r->node_from = ING_RAIL_NODE_DEVICE;
		} else if (ing_topo_n_nodes(t) == 1) {
			r->node = ing_topo_node_id(t, 0);
			r->node_from = ING_RAIL_NODE_SINGLE;
		}
	}
	if (p->n_rails) {
		snprintf(p->rdma_dev, sizeof(p->rdma_dev), "%s", p->rails[0].dev);
		snprintf(p->netdev, sizeof(p->netdev), "%s", p->rails[0].netdev);
		p->nic_node = p->rails[0].node;
	}
	return 0;
}

static int resolve_disk(const struct ing_topo *t, const struct ing_plan_opts *o,
			struct ing_plan *p, char *err, size_t errlen)
{
	char names[512];
	const struct ing_topo_dev *disk = NULL;

	if (o->block_dev) {
		disk = ing_topo_find_block(t, o->block_dev);
		if (!disk) {
			dev_names(ing_topo_n_block(t), ing_topo_block, t, names, sizeof(names));
			return set_err(err, errlen, ENODEV, "block device '%s' not found (block devices: %s)",
				       o->block_dev, names);
		}
	} else if (o->data_dir) {
		char bd[ING_TOPO_NAME_MAX];
		int rc = ing_blockdev_for_path(o->sysfs_root, o->data_dir, bd, sizeof(bd));
		if (rc == -ENOENT)
			warn(p, "data dir %s does not exist yet: its disk (and NUMA node) is unknown",
			     o->data_dir);
		else if (rc)
			warn(p, "data dir %s is not on a local block device (tmpfs, overlay, network "
				"fs?): disk locality unknown", o->data_dir);
		else if (!(disk = ing_topo_find_block(t, bd))) {
			snprintf(p->block_dev, sizeof(p->block_dev), "%s", bd);
			if (ing_topo_n_nodes(t) == 1)
				p->disk_node = ing_topo_node_id(t, 0);
			else
				warn(p, "block device %s (data dir %s) is not in the topology: its NUMA "
					"node is unknown", bd, o->data_dir);
		}
	}
	if (!disk && !o->block_dev && !o->data_dir && ing_topo_n_block(t) == 1)
		disk = ing_topo_block(t, 0); /* nothing asked, one candidate: that one */
	if (disk) {
		snprintf(p->block_dev, sizeof(p->block_dev), "%s", disk->name);
		p->disk_node = disk->node;
	}
	return 0;
}

/* First node (ascending id) that has at least one cpu. */
static int first_cpu_node(const struct ing_topo *t)
{
	for (unsigned i = 0; i < ing_topo_n_nodes(t); i++) {
		int id = ing_topo_node_id(t, i);
		if (ing_topo_node_pus(t, id, NULL, 0) > 0)
			return id;
	}
	return ing_topo_node_id(t, 0);
}

int ing_plan_region_of_node(const struct ing_plan *p, int node)
{
	for (unsigned g = 0; g < p->n_regions; g++)
		if (p->regions[g].node == node)
			return (int)g;
	return -1;
}

/* One pool region per node that carries a rail (or the one --pool-node names). */
static int plan_regions(const struct ing_topo *t, const struct ing_plan_opts *o, struct ing_plan *p,
			char *err, size_t errlen)
{
	if (o->pool_node >= 0) {
		if (!ing_topo_node_exists(t, o->pool_node)) {
			char nodes[128];
			nodes_str(t, nodes, sizeof(nodes));
			return set_err(err, errlen, EINVAL, "--pool-node %d: no such NUMA node (nodes: %s)",
				       o->pool_node, nodes);
		}
		p->pool_overridden = true;
		p->regions[p->n_regions++].node = o->pool_node;
		for (unsigned i = 0; i < p->n_rails; i++)
			if (p->rails[i].node >= 0 && p->rails[i].node != o->pool_node)
				warn_remote(p, "MR pool on node %d, %s on node %d: every RDMA READ crosses "
					    "the interconnect (remote placement)", o->pool_node,
					    p->rails[i].dev[0] ? p->rails[i].dev : p->rails[i].addr,
					    p->rails[i].node);
	} else if (!p->n_rails) {
		p->regions[p->n_regions++].node = p->disk_node >= 0 ? p->disk_node : p->home_node;
	} else {
		for (unsigned i = 0; i < p->n_rails; i++)
			if (ing_plan_region_of_node(p, p->rails[i].node) < 0)
				p->regions[p->n_regions++].node = p->rails[i].node;
	}
	for (unsigned i = 0; i < p->n_rails; i++) {
		int g = ing_plan_region_of_node(p, p->rails[i].node);
		p->rails[i].region = g < 0 ? 0 : (unsigned)g;
	}
	p->pool_node = p->regions[0].node;
	return 0;
}

/* ---------------------------------------------------------------- lcores */

static const char *rail_name(const struct ing_plan_rail *r)
{
	return r->dev[0] ? r->dev : r->addr[0] ? r->addr : "the rail";
}

/* Give lcore cpu c to rail r. */
static void rail_give(struct ing_plan_rail *r, int c)
{
	r->lcores[r->n_lcores++] = c;
}

/* Flatten the rails' lcores into dataplane_cpus, rail after rail. */
static void flatten_lcores(struct ing_plan *p)
{
	if (!p->n_rails)
		return;   /* dataplane_cpus is the fallback's list already */
	p->n_dataplane = 0;
	for (unsigned i = 0; i < p->n_rails; i++)
		for (unsigned k = 0; k < p->rails[i].n_lcores && p->n_dataplane < ING_PLAN_MAX_LCORES; k++)
			p->dataplane_cpus[p->n_dataplane++] = p->rails[i].lcores[k];
}

/* --lcores: each dataplane lcore serves the rail on its node with the fewest so far. */
static int lcores_to_rails(const struct ing_topo *t, struct ing_plan *p, const char *spec,
			   char *err, size_t errlen)
{
	for (unsigned k = 0; k < p->n_dataplane; k++) {
		int c = p->dataplane_cpus[k], node = ing_topo_cpu_node(t, c);
		struct ing_plan_rail *best = NULL, *any = NULL;
		for (unsigned i = 0; i < p->n_rails; i++) {
			struct ing_plan_rail *r = &p->rails[i];
			if (r->node == node && (!best || r->n_lcores < best->n_lcores))
				best = r;
			if (!any || r->n_lcores < any->n_lcores)
				any = r;
		}
		if (!best) {
			best = any;
			if (best->node >= 0)
				warn_remote(p, "dataplane lcore %d is on node %d, %s is on node %d (remote: "
					    "every completion crosses the interconnect)", c, node,
					    rail_name(best), best->node);
		}
		rail_give(best, c);
	}
	for (unsigned i = 0; i < p->n_rails; i++) {
		struct ing_plan_rail *r = &p->rails[i], *rich = NULL;
		if (r->n_lcores)
			continue;
		for (unsigned j = 0; j < p->n_rails; j++)
			if (p->rails[j].n_lcores > 1 && (!rich || p->rails[j].n_lcores > rich->n_lcores))
				rich = &p->rails[j];
		if (!rich)
			return set_err(err, errlen, EINVAL,
				       "--lcores '%s': %u dataplane lcore%s for %u rails: each rail needs "
				       "one (control first, then at least %u)", spec, p->n_dataplane,
				       p->n_dataplane == 1 ? "" : "s", p->n_rails, p->n_rails);
		int c = rich->lcores[--rich->n_lcores];
		rail_give(r, c);
		if (r->node >= 0 && ing_topo_cpu_node(t, c) != r->node)
			warn_remote(p, "dataplane lcore %d is on node %d, %s is on node %d (remote: every "
				    "completion crosses the interconnect)", c, ing_topo_cpu_node(t, c),
				    rail_name(r), r->node);
	}
	flatten_lcores(p);
	return 0;
}

/* The first free physical core of node (allow_smt: a free PU once cores are gone); -1. */
static int free_cpu_on(const struct ing_topo *t, struct usage *u, int node, bool smt)
{
	int *cores = u->cores;
	unsigned nc = ing_topo_node_cores(t, node, cores, MAX_LIST);
	for (unsigned i = 0; i < nc && i < MAX_LIST; i++)
		if (core_free(t, u, cores[i]))
			return cores[i];
	if (!smt)
		return -1;
	unsigned np = ing_topo_node_pus(t, node, cores, MAX_LIST);
	for (unsigned i = 0; i < np && i < MAX_LIST; i++)
		if (cores[i] >= 0 && cores[i] < MAX_CPUS && !u->pu[cores[i]])
			return cores[i];
	return -1;
}

static int plan_lcores(const struct ing_topo *t, const struct ing_plan_opts *o, struct ing_plan *p,
		       struct usage *u, char *err, size_t errlen)
{
	int *cores = u->cores, *list = u->list;
	unsigned want = o->n_dataplane ? o->n_dataplane : ING_DEFAULT_DATAPLANE_LCORES;
	unsigned nr = p->n_rails ? p->n_rails : 1;
	int home = p->home_node;

	if (want > ING_PLAN_MAX_LCORES / nr)
		return set_err(err, errlen, EINVAL, "%u dataplane lcores asked%s, at most %u", want,
			       p->n_rails > 1 ? " per rail" : "", ING_PLAN_MAX_LCORES / nr);
	if (o->control_cpu >= 0) {
		if (ing_topo_cpu_node(t, o->control_cpu) < 0) {
			char all[256];
			ing_topo_cpus_str(t, all, sizeof(all));
			return set_err(err, errlen, EINVAL,
				       "--control-cpu %d: no such cpu on this machine (cpus %s)",
				       o->control_cpu, all);
		}
		p->control_cpu = o->control_cpu;
		p->control_overridden = true;
	}

	if (o->lcores) {
		int n = parse_cpus(t, "--lcores", o->lcores, list, ING_PLAN_MAX_LCORES + 1, err, errlen);
		if (n < 0)
			return n;
		p->lcores_overridden = true;
		if (p->control_cpu < 0)
			p->control_cpu = list[0];
		for (int i = 0; i < n; i++)
			if (list[i] != p->control_cpu)
				p->dataplane_cpus[p->n_dataplane++] = list[i];
		if (!p->n_dataplane)
			return set_err(err, errlen, EINVAL,
				       "--lcores '%s': needs the control lcore and at least one "
				       "dataplane lcore (e.g. \"0-1\")", o->lcores);
		take(t, u, p->control_cpu);
		for (unsigned i = 0; i < p->n_dataplane; i++) {
			int c = p->dataplane_cpus[i];
			if (!core_free(t, u, c))
				warn(p, "dataplane lcore %d shares its physical core with the control "
					"thread or another lcore (SMT sibling)", c);
			take(t, u, c);
		}
		return p->n_rails ? lcores_to_rails(t, p, o->lcores, err, errlen) : 0;
	}

	unsigned nc = ing_topo_node_cores(t, home, cores, MAX_LIST);
	if (p->control_cpu < 0) {
		if (!nc)
			return set_err(err, errlen, ENOSPC, "node %d has no cpu", home);
		p->control_cpu = cores[0];
	}
	take(t, u, p->control_cpu);
	/* one lcore per rail in turn: physical cores first, SMT siblings after (allow_smt) */
	for (int smt = 0; smt <= (o->allow_smt ? 1 : 0); smt++)
		for (unsigned k = 0; k < want; k++)
			for (unsigned i = 0; i < nr; i++) {
				struct ing_plan_rail *r = p->n_rails ? &p->rails[i] : NULL;
				unsigned have = r ? r->n_lcores : p->n_dataplane;
				if (have != k)
					continue;
				int c = free_cpu_on(t, u, r ? r->node : home, smt);
				if (c < 0)
					continue;
				take(t, u, c);
				if (r)
					rail_give(r, c);
				else
					p->dataplane_cpus[p->n_dataplane++] = c;
			}
	for (unsigned i = 0; i < nr; i++) {
		struct ing_plan_rail *r = p->n_rails ? &p->rails[i] : NULL;
		int node = r ? r->node : home;
		unsigned have = r ? r->n_lcores : p->n_dataplane;
		/* nothing free on its node: the first free core elsewhere */
		for (unsigned k = 0; k < ing_topo_n_nodes(t) && !have; k++) {
			int id = ing_topo_node_id(t, k), c = free_cpu_on(t, u, id, false);
			if (c < 0)
				continue;
			take(t, u, c);
			warn_remote(p, "no free core on node %d: dataplane lcore %d%s%s is on node %d "
				    "(remote)", node, c, r ? " of " : "", r ? rail_name(r) : "", id);
			if (r)
				rail_give(r, c);
			else
				p->dataplane_cpus[p->n_dataplane++] = c;
			have = 1;
		}
		if (!have) {
			/* one core in the whole machine: its SMT sibling, if any */
			unsigned np = ing_topo_node_pus(t, node, list, MAX_LIST);
			for (unsigned k = 0; k < np && k < MAX_LIST && !have; k++)
				if (list[k] != p->control_cpu && !u->pu[list[k]]) {
					u->pu[list[k]] = 1;
					warn(p, "dataplane lcore %d is the SMT sibling of the control cpu %d",
					     list[k], p->control_cpu);
					if (r)
						rail_give(r, list[k]);
					else
						p->dataplane_cpus[p->n_dataplane++] = list[k];
					have = 1;
				}
		}
		if (!have)
			return set_err(err, errlen, ENOSPC,
				       p->n_rails > 1 ? "no cpu left for a dataplane lcore of %s: each "
							"rail needs one besides the control cpu"
						      : "only one cpu usable: ingestd needs a control cpu and "
							"a dataplane cpu%s", r ? rail_name(r) : "");
		if (have < want)
			warn(p, "%u dataplane lcores asked%s%s, only %u free physical core(s) on node %d: "
				"using %u (--allow-smt or --lcores to get more)", want,
			     r && p->n_rails > 1 ? " for " : "", r && p->n_rails > 1 ? rail_name(r) : "",
			     have, node, have);
	}
	flatten_lcores(p);
	return 0;
}

/* ---------------------------------------------------------------- workers */

/*
 * Free physical cores (not control, dataplane, an lcore's sibling) of node for a region's
 * workers, at most max: those no other region's workers have first, then (share) those
 * they have. Returns the count in cand.
 */
static unsigned node_worker_cores(const struct ing_topo *t, struct usage *u,
				  const unsigned char *wtaken, int node, bool share, int *cand,
				  unsigned max)
{
	int *cores = u->cores;
	unsigned n = 0, m = ing_topo_node_cores(t, node, cores, MAX_LIST);

	for (unsigned i = 0; i < m && i < MAX_LIST && n < max; i++)
		if (core_free(t, u, cores[i]) && (share || !wtaken[cores[i]]))
			cand[n++] = cores[i];
	return n;
}

static int plan_workers(const struct ing_topo *t, const struct ing_plan_opts *o, struct ing_plan *p,
			struct usage *u, bool *own_core, char *err, size_t errlen)
{
	int given[MAX_LIST], cand[ING_PLAN_MAX_REGIONS][ING_PLAN_MAX_WORKERS];
	unsigned nw = o->n_workers, ng = 0, n[ING_PLAN_MAX_REGIONS] = { 0 };
	unsigned char *wtaken = calloc(MAX_CPUS, 1);

	*own_core = true;
	if (!wtaken)
		return set_err(err, errlen, ENOMEM, "out of memory");
	if (!nw || nw * p->n_regions > ING_PLAN_MAX_WORKERS) {
		free(wtaken);
		return set_err(err, errlen, EINVAL, "%u workers asked%s, at most %u", nw,
			       p->n_regions > 1 ? " per pool region" : "",
			       ING_PLAN_MAX_WORKERS / p->n_regions);
	}
	if (o->worker_cpus) {
		int m = parse_cpus(t, "--worker-cpus", o->worker_cpus, given, MAX_LIST, err, errlen);
		if (m < 0) {
			free(wtaken);
			return m;
		}
		ng = (unsigned)m;
		p->workers_overridden = true;
		for (unsigned i = 0; i < ng; i++) {
			int c = given[i];
			if (c < MAX_CPUS && u->pu[c])
				warn(p, "worker cpu %d is also the control or a dataplane lcore: it "
					"will take time from polling", c);
			else if (!core_free(t, u, c))
				warn(p, "worker cpu %d is the SMT sibling of a dataplane/control cpu", c);
		}
	}
	for (unsigned g = 0; g < p->n_regions; g++) {
		struct ing_plan_region *rg = &p->regions[g];
		if (ng) {
			/* --worker-cpus: this region takes the listed cpus on its node */
			for (unsigned i = 0; i < ng && n[g] < ING_PLAN_MAX_WORKERS; i++)
				if (p->n_regions == 1 || ing_topo_cpu_node(t, given[i]) == rg->node)
					cand[g][n[g]++] = given[i];
			if (!n[g]) {
				for (unsigned i = 0; i < ng && n[g] < ING_PLAN_MAX_WORKERS; i++)
					cand[g][n[g]++] = given[i];
				warn_remote(p, "no cpu of --worker-cpus is on node %d: its pool region's "
					    "workers run on %s (remote: the CRC-32C reads cross the "
					    "interconnect)", rg->node, o->worker_cpus);
			}
			continue;
		}
		/* first every region on its own node's free cores */
		n[g] = node_worker_cores(t, u, wtaken, rg->node, false, cand[g], nw);
		for (unsigned i = 0; i < n[g]; i++)
			wtaken[cand[g][i]] = 1;
	}
	for (unsigned g = 0; g < p->n_regions && !ng; g++) {
		struct ing_plan_region *rg = &p->regions[g];
		if (n[g])
			continue;
		/* then a region whose node is full: other nodes' free cores, unshared first */
		for (int share = 0; share <= 1 && !n[g]; share++)
			for (unsigned k = 0; k < ing_topo_n_nodes(t) && !n[g]; k++) {
				int id = ing_topo_node_id(t, k);
				if (id == rg->node)
					continue;
				n[g] = node_worker_cores(t, u, wtaken, id, share, cand[g], nw);
				if (n[g])
					warn_remote(p, "no free core on node %d for the workers of its pool "
						    "region: they run on node %d%s (remote: the CRC-32C reads "
						    "cross the interconnect)", rg->node, id,
						    share ? ", beside another region's" : "");
			}
		for (unsigned i = 0; i < n[g]; i++)
			wtaken[cand[g][i]] = 1;
		if (!n[g]) {
			char of[32] = "";
			*own_core = false;
			if (p->n_regions > 1)
				snprintf(of, sizeof(of), " of node %d", rg->node);
			warn(p, "no free core for the %u persistence workers%s: not pinned (they share "
				"cpus with control)", nw, of);
		}
	}
	p->n_workers = 0;
	for (unsigned g = 0; g < p->n_regions; g++) {
		p->regions[g].first_worker = p->n_workers;
		p->regions[g].n_workers = nw;
		for (unsigned i = 0; i < nw; i++)
			p->worker_cpus[p->n_workers++] = n[g] ? cand[g][i % n[g]] : -1;
	}
	free(wtaken);
	return 0;
}

int ing_plan_make(const struct ing_topo *t, const struct ing_plan_opts *o, struct ing_plan *p,
		  char *err, size_t errlen)
{
	struct usage *u;
	bool workers_own = false;
	int rc;

	if (err && errlen)
		err[0] = '\0';
	memset(p, 0, sizeof(*p));
	p->control_cpu = -1;
	p->pool_node = p->nic_node = p->disk_node = p->home_node = -1;
	p->n_nodes = ing_topo_n_nodes(t);
	p->n_dataplane_asked = o->n_dataplane ? o->n_dataplane : ING_DEFAULT_DATAPLANE_LCORES;
	p->n_workers_asked = o->n_workers;
	p->allow_smt = o->allow_smt;
	p->stripe_min = o->stripe_min;
	if (!ing_topo_n_pus(t))
		return set_err(err, errlen, ENOSPC, "the topology has no cpu");

	rc = resolve_rails(t, o, p, err, errlen);
	if (!rc)
		rc = resolve_disk(t, o, p, err, errlen);
	if (rc)
		return rc;
	p->home_node = -1;
	for (unsigned i = 0; i < p->n_rails && p->home_node < 0; i++)
		p->home_node = p->rails[i].node;
	if (p->home_node < 0)
		p->home_node = p->disk_node >= 0 ? p->disk_node : first_cpu_node(t);
	if (!ing_topo_node_pus(t, p->home_node, NULL, 0)) {
		int alt = first_cpu_node(t);
		warn(p, "node %d has no cpus: dataplane placed on node %d", p->home_node, alt);
		p->home_node = alt;
	}
	for (unsigned i = 0; i < p->n_rails; i++) {
		struct ing_plan_rail *r = &p->rails[i];
		if (r->node >= 0 && ing_topo_node_pus(t, r->node, NULL, 0))
			continue;
		if (r->node < 0)
			warn(p, "NUMA locality of %s is unknown (virtual device?): dataplane placed on "
				"node %d (rdma-dev = %s@N places it on node N)", rail_name(r),
			     p->home_node, r->dev[0] ? r->dev : "<dev>");
		else
			warn(p, "node %d of %s has no cpus: its lcores are placed on node %d", r->node,
			     rail_name(r), p->home_node);
		r->node = p->home_node;
	}
	rc = plan_regions(t, o, p, err, errlen);
	if (rc)
		return rc;

	u = calloc(1, sizeof(*u));
	if (!u)
		return set_err(err, errlen, ENOMEM, "out of memory");
	rc = plan_lcores(t, o, p, u, err, errlen);
	if (!rc)
		rc = plan_workers(t, o, p, u, &workers_own, err, errlen);
	if (rc) {
		free(u);
		return rc;
	}

	int cg = ing_plan_region_of_node(p, ing_topo_cpu_node(t, p->control_cpu));
	p->control_region = cg < 0 ? 0 : (unsigned)cg;
	/* the disk on another node than a rail: what the rail's frames cost on their way down */
	for (unsigned i = 0; i < p->n_rails && p->disk_node >= 0; i++) {
		const struct ing_plan_rail *r = &p->rails[i];
		if (r->node >= 0 && r->node != p->disk_node)
			warn_remote(p, "%s is on node %d, %s on node %d: each frame of this rail crosses "
				    "the interconnect once, in the disk's DMA (its pool region and "
				    "workers stay on node %d, so the CRC-32C reads are local); put NIC "
				    "and disk on one socket to avoid it", rail_name(r), r->node,
				    p->block_dev, p->disk_node, r->node);
	}
	if (p->control_overridden && p->nic_node >= 0 &&
	    ing_topo_cpu_node(t, p->control_cpu) != p->nic_node)
		warn_remote(p, "control cpu %d is on node %d, %s on node %d", p->control_cpu,
		     ing_topo_cpu_node(t, p->control_cpu), p->rdma_dev, p->nic_node);

	/* busy-poll only where each lcore owns a core and something is left for the rest */
	bool exclusive = true;
	int ctl_core = ing_topo_cpu_core(t, p->control_cpu);
	for (unsigned i = 0; i < p->n_dataplane; i++) {
		int core = ing_topo_cpu_core(t, p->dataplane_cpus[i]);
		if (core == ctl_core)
			exclusive = false;
		for (unsigned j = 0; j < i; j++)
			if (ing_topo_cpu_core(t, p->dataplane_cpus[j]) == core)
				exclusive = false;
		for (unsigned j = 0; j < p->n_workers; j++)
			if (p->worker_cpus[j] >= 0 && ing_topo_cpu_core(t, p->worker_cpus[j]) == core)
				exclusive = false;
	}
	bool spare = ing_topo_n_cores(t) > 1 + p->n_dataplane || workers_own;
	if (exclusive && spare) {
		p->poll_mode_hint = ING_POLL_BUSY;
		snprintf(p->poll_reason, sizeof(p->poll_reason),
			 "each dataplane lcore owns a physical core");
	} else {
		p->poll_mode_hint = ING_POLL_ADAPTIVE;
		snprintf(p->poll_reason, sizeof(p->poll_reason), "%s",
			 !exclusive ? "a dataplane lcore shares its core: busy-polling not advised"
				    : "no core left for the OS, control and persistence workers: "
				      "busy-polling not advised");
	}
	free(u);
	return 0;
}

int ing_plan_eal_lcores(const struct ing_plan *p, char *lcores, size_t len, int *main_lcore)
{
	int all[ING_PLAN_MAX_LCORES + 1];
	unsigned n = 0;

	if (p->control_cpu < 0 || !p->n_dataplane)
		return -EINVAL;
	all[n++] = p->control_cpu;
	for (unsigned i = 0; i < p->n_dataplane; i++)
		all[n++] = p->dataplane_cpus[i];
	ing_cpulist_format(all, n, lcores, len);
	if (main_lcore)
		*main_lcore = p->control_cpu;
	return strlen(lcores) + 1 >= len ? -ENOSPC : 0;
}

/* "2 on cpus 6-7", "2, not pinned (...)", for workers [first, first + n) */
static void workers_str(const struct ing_plan *p, unsigned first, unsigned n, char *buf, size_t len)
{
	int w[ING_PLAN_MAX_WORKERS];
	unsigned k = 0;
	for (unsigned i = first; i < first + n && i < p->n_workers; i++)
		if (p->worker_cpus[i] >= 0)
			w[k++] = p->worker_cpus[i];
	if (!n)
		snprintf(buf, len, "none");
	else if (!k)
		snprintf(buf, len, "%u, not pinned (share cpus with control)", n);
	else {
		char l[256];
		ing_cpulist_format(w, k, l, sizeof(l));
		snprintf(buf, len, "%u on cpus %s", n, l);
	}
}

static const char *node_s(int node, char *buf, size_t len)
{
	if (node < 0)
		snprintf(buf, len, "unknown");
	else
		snprintf(buf, len, "node %d", node);
	return buf;
}

static const char *node_from_s(enum ing_rail_node_from f)
{
	return f == ING_RAIL_NODE_OVERRIDE ? "rdma-dev override"
	     : f == ING_RAIL_NODE_SINGLE ? "the only node"
	     : f == ING_RAIL_NODE_UNKNOWN ? "unknown: the home node" : "the device's";
}

void ing_plan_format_text(const struct ing_plan *p, FILE *f)
{
	char l[512], a[32], eal[512];
	int main_lcore = -1;

	fprintf(f, "placement plan (%u NUMA node%s, %u rail%s)\n", p->n_nodes,
		p->n_nodes == 1 ? "" : "s", p->n_rails, p->n_rails == 1 ? "" : "s");
	for (unsigned i = 0; i < p->n_rails; i++) {
		const struct ing_plan_rail *r = &p->rails[i];
		ing_cpulist_format(r->lcores, r->n_lcores, l, sizeof(l));
		fprintf(f, "  rail %-8u : %s%s%s%s%s%s, %s (%s): lcore%s %s, pool region %u\n", i,
			r->dev[0] ? r->dev : "(device of its address)", r->netdev[0] ? " netdev " : "",
			r->netdev, r->addr[0] ? " " : "", r->addr, "", node_s(r->node, a, sizeof(a)),
			node_from_s(r->node_from), r->n_lcores == 1 ? "" : "s", l, r->region);
	}
	if (!p->n_rails)
		fprintf(f, "  rdma device   : none (gRPC fallback only)\n");
	if (p->block_dev[0])
		fprintf(f, "  block device  : %s, %s\n", p->block_dev, node_s(p->disk_node, a, sizeof(a)));
	else
		fprintf(f, "  block device  : unknown\n");
	for (unsigned i = 0; i < p->n_rails && p->disk_node >= 0; i++)
		if (p->rails[i].node >= 0 && p->rails[i].node != p->disk_node)
			fprintf(f, "  disk rule     : rail %u's frames are written by node %d's workers from "
				"node %d's region: the disk's DMA crosses to node %d once, the CRC stays "
				"local\n", i, p->rails[i].node, p->rails[i].node, p->disk_node);
	fprintf(f, "  control lcore : cpu %d%s\n", p->control_cpu,
		p->control_overridden ? " (override)" : "");
	ing_cpulist_format(p->dataplane_cpus, p->n_dataplane, l, sizeof(l));
	fprintf(f, "  dataplane     : %u lcore%s on cpus %s%s\n", p->n_dataplane,
		p->n_dataplane == 1 ? "" : "s", l, p->lcores_overridden ? " (override)" : "");
	workers_str(p, 0, p->n_workers, l, sizeof(l));
	fprintf(f, "  workers       : %s%s%s\n", l, p->n_regions > 1 ? " (per pool region below)" : "",
		p->workers_overridden ? " (override)" : "");
	if (p->n_regions == 1) {
		fprintf(f, "  MR pool       : %s%s\n", node_s(p->pool_node, a, sizeof(a)),
			p->pool_overridden ? " (override)" : "");
	} else {
		fprintf(f, "  MR pool       : %s, one region per rail node\n", node_s(p->pool_node, a, sizeof(a)));
		for (unsigned g = 0; g < p->n_regions; g++) {
			const struct ing_plan_region *rg = &p->regions[g];
			workers_str(p, rg->first_worker, rg->n_workers, l, sizeof(l));
			fprintf(f, "  region %-6u : %s, workers %s\n", g, node_s(rg->node, a, sizeof(a)), l);
		}
	}
	if (p->n_rails > 1 && p->stripe_min)
		fprintf(f, "  striping      : frames of %s or more over every rail (stripe-min): every rail "
			"registers every pool region, %u x the pool pinned (%u rail%s x %u region%s)\n",
			human_bytes(p->stripe_min, a, sizeof(a)), ing_plan_pinned_regions(p), p->n_rails,
			p->n_rails == 1 ? "" : "s", p->n_regions, p->n_regions == 1 ? "" : "s");
	else if (p->n_rails > 1)
		fprintf(f, "  striping      : off (stripe-min 0): each rail registers its own pool region, "
			"%u x the pool pinned\n", ing_plan_pinned_regions(p));
	fprintf(f, "  poll mode     : %s (%s)\n", p->poll_mode_hint == ING_POLL_BUSY ? "busy" : "adaptive",
		p->poll_reason);
	if (ing_plan_eal_lcores(p, eal, sizeof(eal), &main_lcore) == 0)
		fprintf(f, "  EAL           : -l %s --main-lcore %d\n", eal, main_lcore);
	for (unsigned i = 0; i < p->n_warnings; i++)
		fprintf(f, "  WARNING: %s\n", p->warnings[i]);
}

void ing_plan_format_config(const struct ing_plan *p, FILE *f)
{
	char l[512];

	fputs("# ingestd config lines for this plan (ingestd --config FILE, or the flags of the "
	      "same names)\n", f);
	if (p->n_rails) {
		fputs("rdma-dev = ", f);
		for (unsigned i = 0; i < p->n_rails; i++)
			fprintf(f, "%s%s@%d", i ? ", " : "", p->rails[i].dev, p->rails[i].node);
		fputc('\n', f);
		bool addrs = true;
		for (unsigned i = 0; i < p->n_rails; i++)
			addrs &= p->rails[i].addr[0] != '\0';
		if (addrs) {
			fputs("rdma-addr = ", f);
			for (unsigned i = 0; i < p->n_rails; i++)
				fprintf(f, "%s%s", i ? ", " : "", p->rails[i].addr);
			fputc('\n', f);
		}
	}
	if (ing_plan_eal_lcores(p, l, sizeof(l), NULL) == 0)
		fprintf(f, "lcores = %s\n", l);
	fprintf(f, "control-cpu = %d\n", p->control_cpu);
	fprintf(f, "dataplane = %u\n", p->n_dataplane_asked);
	fprintf(f, "workers = %u\n", p->n_workers_asked);
	bool pinned = p->n_workers > 0;
	for (unsigned i = 0; i < p->n_workers; i++)
		pinned &= p->worker_cpus[i] >= 0;
	if (pinned) {
		/* the cpus in the order the regions take them (each takes those on its node) */
		int w[ING_PLAN_MAX_WORKERS];
		unsigned n = 0;
		for (unsigned i = 0; i < p->n_workers; i++) {
			bool dup = false;
			for (unsigned k = 0; k < n; k++)
				dup |= w[k] == p->worker_cpus[i];
			if (!dup)
				w[n++] = p->worker_cpus[i];
		}
		fputs("worker-cpus = ", f);
		for (unsigned i = 0; i < n; i++)
			fprintf(f, "%s%d", i ? "," : "", w[i]);
		fputc('\n', f);
	}
	if (p->pool_overridden)
		fprintf(f, "pool-node = %d\n", p->pool_node);
	if (p->allow_smt)
		fputs("allow-smt = on\n", f);
	fprintf(f, "poll-mode = %s\n", p->poll_mode_hint == ING_POLL_BUSY ? "busy" : "adaptive");
}

static void json_int_or_null(FILE *f, int v)
{
	if (v < 0)
		fputs("null", f);
	else
		fprintf(f, "%d", v);
}

static void json_str_or_null(FILE *f, const char *s)
{
	if (s[0])
		json_str(f, s);
	else
		fputs("null", f);
}

/* ,"key":"value" (null when empty) and ,"key":N (null when negative) */
static void jstr(FILE *f, const char *key, const char *v)
{
	fprintf(f, ",\"%s\":", key);
	json_str_or_null(f, v);
}

static void jint(FILE *f, const char *key, int v)
{
	fprintf(f, ",\"%s\":", key);
	json_int_or_null(f, v);
}

void ing_plan_format_json(const struct ing_plan *p, FILE *f)
{
	char eal[512] = "";
	int main_lcore = -1;

	fputs("{\"rdma_dev\":", f);
	json_str_or_null(f, p->rdma_dev);
	jstr(f, "netdev", p->netdev);
	jint(f, "nic_node", p->nic_node);
	jstr(f, "block_dev", p->block_dev);
	jint(f, "disk_node", p->disk_node);
	fprintf(f, ",\"home_node\":%d,\"n_nodes\":%u,\"control_cpu\":%d,\"dataplane_cpus\":[",
		p->home_node, p->n_nodes, p->control_cpu);
	for (unsigned i = 0; i < p->n_dataplane; i++)
		fprintf(f, "%s%d", i ? "," : "", p->dataplane_cpus[i]);
	fputs("],\"worker_cpus\":[", f);
	for (unsigned i = 0; i < p->n_workers; i++) {
		fputs(i ? "," : "", f);
		json_int_or_null(f, p->worker_cpus[i]);
	}
	fputs("],\"pool_node\":", f);
	json_int_or_null(f, p->pool_node);
	fputs(",\"rails\":[", f);
	for (unsigned i = 0; i < p->n_rails; i++) {
		const struct ing_plan_rail *r = &p->rails[i];
		fputs(i ? ",{\"dev\":" : "{\"dev\":", f);
		json_str_or_null(f, r->dev);
		jstr(f, "netdev", r->netdev);
		jstr(f, "addr", r->addr);
		jint(f, "node", r->node);
		jint(f, "dev_node", r->dev_node);
		fprintf(f, ",\"node_from\":\"%s\",\"region\":%u,\"lcores\":[",
			r->node_from == ING_RAIL_NODE_OVERRIDE ? "override" :
			r->node_from == ING_RAIL_NODE_SINGLE ? "single" :
			r->node_from == ING_RAIL_NODE_UNKNOWN ? "unknown" : "device", r->region);
		for (unsigned k = 0; k < r->n_lcores; k++)
			fprintf(f, "%s%d", k ? "," : "", r->lcores[k]);
		fputs("]}", f);
	}
	fputs("],\"regions\":[", f);
	for (unsigned g = 0; g < p->n_regions; g++) {
		const struct ing_plan_region *rg = &p->regions[g];
		fputs(g ? ",{\"node\":" : "{\"node\":", f);
		json_int_or_null(f, rg->node);
		fputs(",\"worker_cpus\":[", f);
		for (unsigned i = rg->first_worker; i < rg->first_worker + rg->n_workers; i++) {
			fputs(i > rg->first_worker ? "," : "", f);
			json_int_or_null(f, p->worker_cpus[i]);
		}
		fputs("]}", f);
	}
	fprintf(f, "],\"stripe_min\":%" PRIu64 ",\"pinned_regions\":%u", p->stripe_min, ing_plan_pinned_regions(p));
	fprintf(f, ",\"poll_mode_hint\":\"%s\",\"poll_reason\":",
		p->poll_mode_hint == ING_POLL_BUSY ? "busy" : "adaptive");
	json_str(f, p->poll_reason);
	if (ing_plan_eal_lcores(p, eal, sizeof(eal), &main_lcore) == 0) {
		fputs(",\"eal\":{\"lcores\":", f);
		json_str(f, eal);
		fprintf(f, ",\"main_lcore\":%d}", main_lcore);
	}
	char *lines = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&lines, &len);
	if (m) {
		ing_plan_format_config(p, m);
		fclose(m);
		fputs(",\"config\":", f);
		json_str(f, lines);
	}
	free(lines);
	fprintf(f, ",\"overrides\":{\"lcores\":%s,\"control_cpu\":%s,\"pool_node\":%s,"
		   "\"worker_cpus\":%s},\"warnings\":[",
		p->lcores_overridden ? "true" : "false", p->control_overridden ? "true" : "false",
		p->pool_overridden ? "true" : "false", p->workers_overridden ? "true" : "false");
	for (unsigned i = 0; i < p->n_warnings; i++) {
		fputs(i ? "," : "", f);
		json_str(f, p->warnings[i]);
	}
	fputs("]}", f);
}

void ing_plan_log(const struct ing_plan *p)
{
	char dp[512], w[512], eal[512] = "?";
	int main_lcore = -1;

	ing_cpulist_format(p->dataplane_cpus, p->n_dataplane, dp, sizeof(dp));
	workers_str(p, 0, p->n_workers, w, sizeof(w));
	(void)ing_plan_eal_lcores(p, eal, sizeof(eal), &main_lcore);
	ING_INFO("numa", "plan: %u rail(s), rdma %s (node %d), disk %s (node %d), %u NUMA node(s)",
		 p->n_rails, p->rdma_dev[0] ? p->rdma_dev : "none", p->nic_node,
		 p->block_dev[0] ? p->block_dev : "unknown", p->disk_node, p->n_nodes);
	for (unsigned i = 0; i < p->n_rails; i++) {
		const struct ing_plan_rail *r = &p->rails[i];
		char l[256];
		ing_cpulist_format(r->lcores, r->n_lcores, l, sizeof(l));
		ING_INFO("numa", "plan: rail %u %s%s%s on node %d (%s): lcores %s, pool region %u", i,
			 rail_name(r), r->addr[0] && r->dev[0] ? " " : "", r->dev[0] ? r->addr : "",
			 r->node, node_from_s(r->node_from), l, r->region);
	}
	for (unsigned g = 0; g < p->n_regions; g++) {
		char l[256];
		workers_str(p, p->regions[g].first_worker, p->regions[g].n_workers, l, sizeof(l));
		ING_INFO("numa", "plan: pool region %u on node %d, workers %s", g, p->regions[g].node, l);
	}
	ING_INFO("numa", "plan: control cpu %d, dataplane cpus %s, workers %s, MR pool node %d",
		 p->control_cpu, dp, w, p->pool_node);
	ING_INFO("numa", "plan: poll mode %s (%s); EAL -l %s --main-lcore %d",
		 p->poll_mode_hint == ING_POLL_BUSY ? "busy" : "adaptive", p->poll_reason, eal,
		 main_lcore);
	for (unsigned i = 0; i < p->n_warnings; i++)
		if (i + 1 != p->no_rdma_warning)
			ING_WARN("numa", "plan: %s", p->warnings[i]);
}

void ing_topo_format_text(const struct ing_topo *t, FILE *f)
{
	int cpus[MAX_LIST];
	char l[512];

	ing_topo_cpus_str(t, l, sizeof(l));
	fprintf(f, "topology (%s): %u NUMA node%s, %u cores, %u cpus (%s)\n", ing_topo_source(t),
		ing_topo_n_nodes(t), ing_topo_n_nodes(t) == 1 ? "" : "s", ing_topo_n_cores(t),
		ing_topo_n_pus(t), l);
	for (unsigned i = 0; i < ing_topo_n_nodes(t); i++) {
		int id = ing_topo_node_id(t, i);
		unsigned n = ing_topo_node_pus(t, id, cpus, MAX_LIST);
		ing_cpulist_format(cpus, n < MAX_LIST ? n : MAX_LIST, l, sizeof(l));
		fprintf(f, "  node %d: %llu MiB, cpus %s", id,
			(unsigned long long)(ing_topo_node_memory(t, id) >> 20), n ? l : "none");
		n = ing_topo_node_cores(t, id, cpus, MAX_LIST);
		ing_cpulist_format(cpus, n < MAX_LIST ? n : MAX_LIST, l, sizeof(l));
		fprintf(f, ", %u cores (first cpu of each: %s)\n", n, n ? l : "none");
	}
	for (unsigned i = 0; i < ing_topo_n_rdma(t); i++) {
		const struct ing_topo_dev *d = ing_topo_rdma(t, i);
		char addrs[256] = "";
		for (unsigned k = 0, off = 0; k < d->n_addrs && off < sizeof(addrs); k++)
			off += (unsigned)snprintf(addrs + off, sizeof(addrs) - off, "%s%s", k ? "," : " ",
						  d->addrs[k]);
		fprintf(f, "  rdma  %-10s node %-3d %s%s%s%s%s%s\n", d->name, d->node,
			d->pci[0] ? "pci " : "virtual", d->pci, d->netdev[0] ? " netdev " : "", d->netdev,
			d->port_state < 0 ? "" : d->port_state ? " ACTIVE" : " not ACTIVE",
			d->addrs_known && !d->n_addrs ? " no IPv4 address" : addrs);
	}
	if (!ing_topo_n_rdma(t))
		fprintf(f, "  rdma  none\n");
	for (unsigned i = 0; i < ing_topo_n_block(t); i++) {
		const struct ing_topo_dev *d = ing_topo_block(t, i);
		fprintf(f, "  block %-10s node %-3d %s%s\n", d->name, d->node, d->pci[0] ? "pci " : "",
			d->pci);
	}
}

static void json_dev(FILE *f, const struct ing_topo_dev *d)
{
	fputs("{\"name\":", f);
	json_str(f, d->name);
	fputs(",\"node\":", f);
	json_int_or_null(f, d->node);
	fputs(",\"pci\":", f);
	json_str(f, d->pci);
	fputs(",\"netdev\":", f);
	json_str(f, d->netdev);
	fputs(",\"cpus\":", f);
	json_str(f, d->cpus);
	fprintf(f, ",\"virtual\":%s", d->from_sysfs ? "true" : "false");
	if (d->port_state >= 0)
		fprintf(f, ",\"active\":%s", d->port_state ? "true" : "false");
	if (d->addrs_known) {
		fputs(",\"addrs\":[", f);
		for (unsigned k = 0; k < d->n_addrs; k++) {
			fputs(k ? "," : "", f);
			json_str(f, d->addrs[k]);
		}
		fputc(']', f);
	}
	fputc('}', f);
}

void ing_topo_format_json(const struct ing_topo *t, FILE *f)
{
	int cpus[MAX_LIST];
	char l[512];

	fputs("{\"source\":", f);
	json_str(f, ing_topo_source(t));
	fprintf(f, ",\"cores\":%u,\"pus\":%u,\"nodes\":[", ing_topo_n_cores(t), ing_topo_n_pus(t));
	for (unsigned i = 0; i < ing_topo_n_nodes(t); i++) {
		int id = ing_topo_node_id(t, i);
		unsigned n = ing_topo_node_pus(t, id, cpus, MAX_LIST);
		ing_cpulist_format(cpus, n < MAX_LIST ? n : MAX_LIST, l, sizeof(l));
		fprintf(f, "%s{\"id\":%d,\"memory\":%llu,\"cpus\":", i ? "," : "", id,
			(unsigned long long)ing_topo_node_memory(t, id));
		json_str(f, l);
		n = ing_topo_node_cores(t, id, cpus, MAX_LIST);
		fputs(",\"cores\":[", f);
		for (unsigned k = 0; k < n && k < MAX_LIST; k++)
			fprintf(f, "%s%d", k ? "," : "", cpus[k]);
		fputs("]}", f);
	}
	fputs("],\"rdma\":[", f);
	for (unsigned i = 0; i < ing_topo_n_rdma(t); i++) {
		fputs(i ? "," : "", f);
		json_dev(f, ing_topo_rdma(t, i));
	}
	fputs("],\"block\":[", f);
	for (unsigned i = 0; i < ing_topo_n_block(t); i++) {
		fputs(i ? "," : "", f);
		json_dev(f, ing_topo_block(t, i));
	}
	fputs("]}", f);
}
