/* SPDX-License-Identifier: Apache-2.0 */
/* The placement plan: which cpu runs what, which node holds the MR pool (rules in numa.h). */
#include "numa/numa.h"
#include "numa/numa_internal.h"
#include "common/log.h"

#include <errno.h>
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

static int resolve_devices(const struct ing_topo *t, const struct ing_plan_opts *o,
			   struct ing_plan *p, char *err, size_t errlen)
{
	char names[512];
	const struct ing_topo_dev *nic = NULL, *disk = NULL;

	if (o->rdma_dev) {
		nic = ing_topo_find_rdma(t, o->rdma_dev);
		if (!nic) {
			dev_names(ing_topo_n_rdma(t), ing_topo_rdma, t, names, sizeof(names));
			return set_err(err, errlen, ENODEV, "RDMA device '%s' not found (RDMA devices: %s)",
				       o->rdma_dev, names);
		}
	} else if (ing_topo_n_rdma(t)) {
		nic = ing_topo_rdma(t, 0);
	} else {
		warn(p, "no RDMA device found: fallback (gRPC) transport only; placement follows "
			"the disk");
	}
	if (nic) {
		snprintf(p->rdma_dev, sizeof(p->rdma_dev), "%s", nic->name);
		snprintf(p->netdev, sizeof(p->netdev), "%s", nic->netdev);
		p->nic_node = nic->node;
		if (nic->node < 0)
			warn(p, "NUMA locality of %s is unknown (virtual device?): dataplane placed on "
				"node %d", nic->name, ing_topo_node_id(t, 0));
	}

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

static int plan_lcores(const struct ing_topo *t, const struct ing_plan_opts *o, struct ing_plan *p,
		       struct usage *u, char *err, size_t errlen)
{
	int *cores = u->cores, *list = u->list;
	unsigned want = o->n_dataplane ? o->n_dataplane : ING_DEFAULT_DATAPLANE_LCORES;
	int home = p->home_node;

	if (want > ING_PLAN_MAX_LCORES)
		return set_err(err, errlen, EINVAL, "%u dataplane lcores asked, at most %u", want,
			       ING_PLAN_MAX_LCORES);
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
			int c = p->dataplane_cpus[i], node = ing_topo_cpu_node(t, c);
			if (!core_free(t, u, c))
				warn(p, "dataplane lcore %d shares its physical core with the control "
					"thread or another lcore (SMT sibling)", c);
			take(t, u, c);
			if (p->nic_node >= 0 && node != p->nic_node)
				warn_remote(p, "dataplane lcore %d is on node %d, %s is on node %d (remote: "
					"every completion crosses the interconnect)", c, node,
				     p->rdma_dev, p->nic_node);
		}
		return 0;
	}

	unsigned nc = ing_topo_node_cores(t, home, cores, MAX_LIST);
	if (nc > MAX_LIST)
		nc = MAX_LIST;
	if (p->control_cpu < 0) {
		if (!nc)
			return set_err(err, errlen, ENOSPC, "node %d has no cpu", home);
		p->control_cpu = cores[0];
	}
	take(t, u, p->control_cpu);
	for (unsigned i = 0; i < nc && p->n_dataplane < want; i++)
		if (core_free(t, u, cores[i])) {
			p->dataplane_cpus[p->n_dataplane++] = cores[i];
			take(t, u, cores[i]);
		}
	if (p->n_dataplane < want && o->allow_smt) {
		unsigned np = ing_topo_node_pus(t, home, list, MAX_LIST);
		for (unsigned i = 0; i < np && i < MAX_LIST && p->n_dataplane < want; i++)
			if (list[i] != p->control_cpu && !u->pu[list[i]]) {
				p->dataplane_cpus[p->n_dataplane++] = list[i];
				u->pu[list[i]] = 1;
			}
	}
	if (!p->n_dataplane) {
		/* nothing free on the home node: the first free core elsewhere */
		for (unsigned k = 0; k < ing_topo_n_nodes(t) && !p->n_dataplane; k++) {
			int id = ing_topo_node_id(t, k);
			unsigned m = ing_topo_node_cores(t, id, cores, MAX_LIST);
			for (unsigned i = 0; i < m && i < MAX_LIST; i++)
				if (core_free(t, u, cores[i])) {
					p->dataplane_cpus[p->n_dataplane++] = cores[i];
					take(t, u, cores[i]);
					warn_remote(p, "no free core on node %d: dataplane lcore %d is on node %d "
						"(remote)", home, cores[i], id);
					break;
				}
		}
	}
	if (!p->n_dataplane) {
		/* one core in the whole machine: its SMT sibling, if any */
		unsigned np = ing_topo_node_pus(t, home, list, MAX_LIST);
		for (unsigned i = 0; i < np && i < MAX_LIST; i++)
			if (list[i] != p->control_cpu) {
				p->dataplane_cpus[p->n_dataplane++] = list[i];
				u->pu[list[i]] = 1;
				warn(p, "dataplane lcore %d is the SMT sibling of the control cpu %d",
				     list[i], p->control_cpu);
				break;
			}
	}
	if (!p->n_dataplane)
		return set_err(err, errlen, ENOSPC,
			       "only one cpu usable: ingestd needs a control cpu and a dataplane cpu");
	if (p->n_dataplane < want)
		warn(p, "%u dataplane lcores asked, only %u free physical core(s) on node %d: using "
			"%u (--allow-smt or --lcores to get more)", want, p->n_dataplane, home,
		     p->n_dataplane);
	return 0;
}

static int plan_workers(const struct ing_topo *t, const struct ing_plan_opts *o, struct ing_plan *p,
			struct usage *u, bool *own_core, char *err, size_t errlen)
{
	int *cores = (int *)u->cores, *cand = (int *)u->cand;
	unsigned nw = o->n_workers, n = 0;

	*own_core = false;
	if (nw > ING_PLAN_MAX_WORKERS)
		return set_err(err, errlen, EINVAL, "%u workers asked, at most %u", nw,
			       ING_PLAN_MAX_WORKERS);
	p->n_workers = nw;
	if (o->worker_cpus) {
		int m = parse_cpus(t, "--worker-cpus", o->worker_cpus, cand, MAX_LIST, err, errlen);
		if (m < 0)
			return m;
		p->workers_overridden = true;
		for (int i = 0; i < m; i++) {
			int c = cand[i];
			if (c < MAX_CPUS && u->pu[c])
				warn(p, "worker cpu %d is also the control or a dataplane lcore: it "
					"will take time from polling", c);
			else if (!core_free(t, u, c))
				warn(p, "worker cpu %d is the SMT sibling of a dataplane/control cpu", c);
		}
		for (unsigned i = 0; i < nw; i++)
			p->worker_cpus[i] = cand[i % (unsigned)m];
		return 0;
	}
	int wnode = p->disk_node >= 0 ? p->disk_node : p->home_node;
	unsigned m = ing_topo_node_cores(t, wnode, cores, MAX_LIST);
	for (unsigned i = 0; i < m && i < MAX_LIST && n < nw; i++)
		if (core_free(t, u, cores[i]))
			cand[n++] = cores[i];
	for (unsigned k = 0; k < ing_topo_n_nodes(t) && !n; k++) {
		int id = ing_topo_node_id(t, k);
		m = ing_topo_node_cores(t, id, cores, MAX_LIST);
		for (unsigned i = 0; i < m && i < MAX_LIST && n < nw; i++)
			if (core_free(t, u, cores[i]))
				cand[n++] = cores[i];
	}
	for (unsigned i = 0; i < nw; i++)
		p->worker_cpus[i] = n ? cand[i % n] : -1;
	*own_core = n > 0;
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
	if (!ing_topo_n_pus(t))
		return set_err(err, errlen, ENOSPC, "the topology has no cpu");

	rc = resolve_devices(t, o, p, err, errlen);
	if (rc)
		return rc;
	p->home_node = p->nic_node >= 0 ? p->nic_node
		     : p->disk_node >= 0 ? p->disk_node : first_cpu_node(t);
	if (!ing_topo_node_pus(t, p->home_node, NULL, 0)) {
		int alt = first_cpu_node(t);
		warn(p, "node %d has no cpus: dataplane placed on node %d", p->home_node, alt);
		p->home_node = alt;
	}

	if (o->pool_node >= 0) {
		if (!ing_topo_node_exists(t, o->pool_node)) {
			char nodes[128];
			nodes_str(t, nodes, sizeof(nodes));
			return set_err(err, errlen, EINVAL, "--pool-node %d: no such NUMA node (nodes: %s)",
				       o->pool_node, nodes);
		}
		p->pool_node = o->pool_node;
		p->pool_overridden = true;
		if (p->nic_node >= 0 && p->pool_node != p->nic_node)
			warn_remote(p, "MR pool on node %d, %s on node %d: every RDMA READ crosses the "
				"interconnect (remote placement)", p->pool_node, p->rdma_dev, p->nic_node);
	} else {
		p->pool_node = p->nic_node >= 0 ? p->nic_node
			     : p->disk_node >= 0 ? p->disk_node : p->home_node;
	}

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

	if (p->nic_node >= 0 && p->disk_node >= 0 && p->nic_node != p->disk_node)
		warn_remote(p, "%s is on node %d, %s on node %d: each frame crosses the interconnect once "
			"on its way to disk (pool on node %d, workers on node %d); put NIC and disk "
			"on one socket to avoid it", p->rdma_dev, p->nic_node, p->block_dev,
		     p->disk_node, p->pool_node, p->disk_node);
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
	if (!workers_own && p->n_workers && !p->workers_overridden)
		warn(p, "no free core for the %u persistence workers: not pinned (they share cpus "
			"with control)", p->n_workers);
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

static void workers_str(const struct ing_plan *p, char *buf, size_t len)
{
	int w[ING_PLAN_MAX_WORKERS];
	unsigned n = 0;
	for (unsigned i = 0; i < p->n_workers; i++)
		if (p->worker_cpus[i] >= 0)
			w[n++] = p->worker_cpus[i];
	if (!p->n_workers)
		snprintf(buf, len, "none");
	else if (!n)
		snprintf(buf, len, "%u, not pinned (share cpus with control)", p->n_workers);
	else {
		char l[256];
		ing_cpulist_format(w, n, l, sizeof(l));
		snprintf(buf, len, "%u on cpus %s", p->n_workers, l);
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

void ing_plan_format_text(const struct ing_plan *p, FILE *f)
{
	char l[512], a[32], eal[512];
	int main_lcore = -1;

	fprintf(f, "placement plan (%u NUMA node%s)\n", p->n_nodes, p->n_nodes == 1 ? "" : "s");
	if (p->rdma_dev[0])
		fprintf(f, "  rdma device   : %s%s%s%s, %s\n", p->rdma_dev, p->netdev[0] ? " (netdev " : "",
			p->netdev, p->netdev[0] ? ")" : "", node_s(p->nic_node, a, sizeof(a)));
	else
		fprintf(f, "  rdma device   : none (gRPC fallback only)\n");
	if (p->block_dev[0])
		fprintf(f, "  block device  : %s, %s\n", p->block_dev, node_s(p->disk_node, a, sizeof(a)));
	else
		fprintf(f, "  block device  : unknown\n");
	fprintf(f, "  control lcore : cpu %d%s\n", p->control_cpu,
		p->control_overridden ? " (override)" : "");
	ing_cpulist_format(p->dataplane_cpus, p->n_dataplane, l, sizeof(l));
	fprintf(f, "  dataplane     : %u lcore%s on cpus %s%s\n", p->n_dataplane,
		p->n_dataplane == 1 ? "" : "s", l, p->lcores_overridden ? " (override)" : "");
	workers_str(p, l, sizeof(l));
	fprintf(f, "  workers       : %s%s\n", l, p->workers_overridden ? " (override)" : "");
	fprintf(f, "  MR pool       : %s%s\n", node_s(p->pool_node, a, sizeof(a)),
		p->pool_overridden ? " (override)" : "");
	fprintf(f, "  poll mode     : %s (%s)\n", p->poll_mode_hint == ING_POLL_BUSY ? "busy" : "adaptive",
		p->poll_reason);
	if (ing_plan_eal_lcores(p, eal, sizeof(eal), &main_lcore) == 0)
		fprintf(f, "  EAL           : -l %s --main-lcore %d\n", eal, main_lcore);
	for (unsigned i = 0; i < p->n_warnings; i++)
		fprintf(f, "  WARNING: %s\n", p->warnings[i]);
}

static void json_int_or_null(FILE *f, int v)
{
	if (v < 0)
		fputs("null", f);
	else
		fprintf(f, "%d", v);
}

void ing_plan_format_json(const struct ing_plan *p, FILE *f)
{
	char eal[512] = "";
	int main_lcore = -1;

	fputs("{\"rdma_dev\":", f);
	if (p->rdma_dev[0])
		json_str(f, p->rdma_dev);
	else
		fputs("null", f);
	fputs(",\"netdev\":", f);
	if (p->netdev[0])
		json_str(f, p->netdev);
	else
		fputs("null", f);
	fputs(",\"nic_node\":", f);
	json_int_or_null(f, p->nic_node);
	fputs(",\"block_dev\":", f);
	if (p->block_dev[0])
		json_str(f, p->block_dev);
	else
		fputs("null", f);
	fputs(",\"disk_node\":", f);
	json_int_or_null(f, p->disk_node);
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
	fprintf(f, ",\"poll_mode_hint\":\"%s\",\"poll_reason\":",
		p->poll_mode_hint == ING_POLL_BUSY ? "busy" : "adaptive");
	json_str(f, p->poll_reason);
	if (ing_plan_eal_lcores(p, eal, sizeof(eal), &main_lcore) == 0) {
		fputs(",\"eal\":{\"lcores\":", f);
		json_str(f, eal);
		fprintf(f, ",\"main_lcore\":%d}", main_lcore);
	}
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
	workers_str(p, w, sizeof(w));
	(void)ing_plan_eal_lcores(p, eal, sizeof(eal), &main_lcore);
	ING_INFO("numa", "plan: rdma %s (node %d), disk %s (node %d), %u NUMA node(s)",
		 p->rdma_dev[0] ? p->rdma_dev : "none", p->nic_node,
		 p->block_dev[0] ? p->block_dev : "unknown", p->disk_node, p->n_nodes);
	ING_INFO("numa", "plan: control cpu %d, dataplane cpus %s, workers %s, MR pool node %d",
		 p->control_cpu, dp, w, p->pool_node);
	ING_INFO("numa", "plan: poll mode %s (%s); EAL -l %s --main-lcore %d",
		 p->poll_mode_hint == ING_POLL_BUSY ? "busy" : "adaptive", p->poll_reason, eal,
		 main_lcore);
	for (unsigned i = 0; i < p->n_warnings; i++)
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
		fprintf(f, "  rdma  %-10s node %-3d %s%s%s%s%s\n", d->name, d->node,
			d->pci[0] ? "pci " : "virtual", d->pci, d->netdev[0] ? " netdev " : "", d->netdev,
			d->cpus[0] ? "" : "");
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
	fprintf(f, ",\"virtual\":%s}", d->from_sysfs ? "true" : "false");
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
