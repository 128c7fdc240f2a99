/* SPDX-License-Identifier: Apache-2.0 */
/*
 * numa.h - machine topology (hwloc) and the placement plan of ingestd's threads and memory.
 *
 * Who calls it: ingestd (once, from main, before EAL start), ingest-topo, ingest-doctor.
 * Nothing here is thread-safe or on the hot path: build a plan, copy the numbers you need.
 *
 * Placement rules (ing_plan_make), in order; every rule can be overridden explicitly:
 *  1. nic_node  = NUMA node of the RDMA device (opts.rdma_dev, or the first one found).
 *     disk_node = NUMA node of the block device holding opts.data_dir (or opts.block_dev).
 *     Neither given and the topology has exactly one block device: that one.
 *     home node = nic_node, else disk_node, else the first node that has CPUs.
 *  2. The home node's physical cores (one PU per core, the lowest-numbered, in hwloc logical
 *     order) are handed out: the first to the control thread (EAL main lcore), the next
 *     n_dataplane to the dataplane lcores. SMT siblings are never used unless allow_smt (then
 *     only after every physical core is taken). Fewer cores than asked: fewer lcores and a
 *     warning. No free core at all on the home node: the first free core elsewhere (warned).
 *  3. Persistence workers go on free physical cores (not control, not dataplane, not the SMT
 *     sibling of a dataplane lcore) of disk_node (else the home node, else any node), one per
 *     worker, round-robin when fewer cores than workers. No free core: not pinned (-1), they
 *     share the CPUs with control; they block in I/O, so that costs little.
 *  4. pool_node = nic_node (RDMA READs land in the pool), else disk_node, else the home node.
 *  5. poll_mode_hint = BUSY only when every dataplane lcore has its own physical core and at
 *     least one more core is left over for workers and the OS; otherwise ADAPTIVE (busy-poll
 *     would starve the others). A 2-core, 1-node machine gets: control 0, dataplane 1,
 *     workers not pinned, ADAPTIVE.
 * Overrides (lcores, control_cpu, worker_cpus, pool_node) are validated against the
 * topology (unknown cpu / node, duplicates, control inside the dataplane set: errors) and win
 * over the rules; remote or SMT-sharing choices are kept, with a warning.
 */
#ifndef ING_NUMA_H
#define ING_NUMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define ING_TOPO_NAME_MAX 64
#define ING_PLAN_MAX_LCORES 128
#define ING_PLAN_MAX_WORKERS 64
#define ING_PLAN_MAX_WARN 16
#define ING_PLAN_WARN_LEN 256
#define ING_DEFAULT_DATAPLANE_LCORES 1
#define ING_DEFAULT_PLAN_WORKERS 2

/* ---------------------------------------------------------------- topology */

struct ing_topo;

/* An RDMA (openfabrics) or block device and where it sits. */
struct ing_topo_dev {
	char name[ING_TOPO_NAME_MAX];    /* "mlx5_0", "rxe0", "nvme0n1" */
	char netdev[ING_TOPO_NAME_MAX];  /* RDMA: the Ethernet/IPoIB netdev on the same PCI fn, "" */
	char pci[32];                    /* "0000:81:00.0" or "" (virtual device) */
	char cpus[128];                  /* locality as a cpu list ("8-15"), "" when unknown */
	int node;                        /* NUMA node os index, -1: unknown / whole machine */
	bool from_sysfs;                 /* not in hwloc's tree (e.g. Soft-RoCE): found in sysfs */
};

/*
 * Load the topology with I/O devices kept. xml: an hwloc XML file, or NULL for
 * $HWLOC_XMLFILE if set, else the live machine (then /sys/class/infiniband is also scanned
 * for virtual RDMA devices hwloc does not report, e.g. rxe0). NULL + message in err on error.
 */
struct ing_topo *ing_topo_load(const char *xml, char *err, size_t errlen);
void ing_topo_destroy(struct ing_topo *t);          /* tolerant of NULL */
bool ing_topo_is_live(const struct ing_topo *t);
const char *ing_topo_source(const struct ing_topo *t); /* "live" or the XML path */

/* NUMA nodes (os indexes, ascending). A machine without NUMA reports one node, 0. */
unsigned ing_topo_n_nodes(const struct ing_topo *t);
int ing_topo_node_id(const struct ing_topo *t, unsigned i);
bool ing_topo_node_exists(const struct ing_topo *t, int node);
uint64_t ing_topo_node_memory(const struct ing_topo *t, int node); /* bytes, 0 unknown */
/* PUs (cpu numbers) of a node, ascending; returns the total count (may exceed max). */
unsigned ing_topo_node_pus(const struct ing_topo *t, int node, int *cpus, unsigned max);
/* One PU per physical core of a node (the core's first PU), in logical order. */
unsigned ing_topo_node_cores(const struct ing_topo *t, int node, int *cpus, unsigned max);
unsigned ing_topo_n_pus(const struct ing_topo *t);
unsigned ing_topo_n_cores(const struct ing_topo *t);
/* NUMA node of a cpu, -1 if the cpu does not exist (or is not allowed). */
int ing_topo_cpu_node(const struct ing_topo *t, int cpu);
/* Physical core id (logical index of its Core object) of a cpu, -1 if none. */
int ing_topo_cpu_core(const struct ing_topo *t, int cpu);
/* All cpus as a list string ("0-15"). */
void ing_topo_cpus_str(const struct ing_topo *t, char *buf, size_t len);

unsigned ing_topo_n_rdma(const struct ing_topo *t);
const struct ing_topo_dev *ing_topo_rdma(const struct ing_topo *t, unsigned i);
unsigned ing_topo_n_block(const struct ing_topo *t);
const struct ing_topo_dev *ing_topo_block(const struct ing_topo *t, unsigned i);
/* Look a device up by name; NULL if absent. */
const struct ing_topo_dev *ing_topo_find_rdma(const struct ing_topo *t, const char *name);
const struct ing_topo_dev *ing_topo_find_block(const struct ing_topo *t, const char *name);

/*
 * The whole disk holding path (partitions, dm/md resolved to their first slave), found via
 * stat(path).st_dev -> <sysfs_root>/dev/block/MAJ:MIN. sysfs_root NULL: "/sys".
 * 0, -ENOENT (path missing), -ENODEV (no block device: tmpfs, overlay, nfs ...).
 */
int ing_blockdev_for_path(const char *sysfs_root, const char *path, char *name, size_t len);

/* ---------------------------------------------------------------- cpu lists */

/*
 * Parse an EAL-style cpu list "0-3,8,10-11" into cpus[] (in the order written).
 * Returns the count, -EINVAL (syntax, reversed range, duplicate) or -E2BIG (> max).
 */
int ing_cpulist_parse(const char *s, int *cpus, unsigned max);
/* Format cpus[] (any order) as a compact ascending list ("0-3,8"); "" when n == 0. */
void ing_cpulist_format(const int *cpus, unsigned n, char *buf, size_t len);

/* ---------------------------------------------------------------- plan */

enum ing_poll_hint {
	ING_POLL_BUSY = 0,     /* each dataplane lcore owns a core: spin on the CQ */
	ING_POLL_ADAPTIVE = 1, /* cores are shared: spin a little, then arm the CQ channel */
};

struct ing_plan_opts {
	const char *rdma_dev;    /* NULL: the first RDMA device found (none: fallback only) */
	const char *data_dir;    /* used to find the block device (live only); NULL: none */
	const char *block_dev;   /* explicit block device ("nvme0n1"); wins over data_dir */
	unsigned n_dataplane;    /* default ING_DEFAULT_DATAPLANE_LCORES */
	unsigned n_workers;      /* default ING_DEFAULT_PLAN_WORKERS */
	bool allow_smt;          /* default false: one lcore per physical core */
	/* Overrides (NULL / -1: unset). */
	const char *lcores;      /* EAL -l list: control (main lcore, the first unless
				    control_cpu is set) + dataplane lcores, e.g. "8-10" */
	int control_cpu;
	int pool_node;
	const char *worker_cpus; /* cpu list the workers are pinned to, round-robin */
	const char *sysfs_root;  /* for data_dir -> block device; NULL: "/sys" */
};
void ing_plan_opts_init(struct ing_plan_opts *o);

struct ing_plan {
	int control_cpu;
	unsigned n_dataplane;
	int dataplane_cpus[ING_PLAN_MAX_LCORES];
	unsigned n_workers;
	int worker_cpus[ING_PLAN_MAX_WORKERS];  /* -1: not pinned */
	int pool_node;           /* -1: no binding (unknown) */
	int nic_node;            /* -1: no RDMA device or unknown locality */
	int disk_node;           /* -1: no block device or unknown locality */
	int home_node;           /* the node the dataplane was placed on */
	char rdma_dev[ING_TOPO_NAME_MAX];  /* "" none */
	char netdev[ING_TOPO_NAME_MAX];
	char block_dev[ING_TOPO_NAME_MAX]; /* "" none */
	enum ing_poll_hint poll_mode_hint;
	char poll_reason[160];
	bool lcores_overridden, control_overridden, pool_overridden, workers_overridden;
	unsigned n_nodes;
	unsigned n_remote;       /* how many warnings are about cross-node placement */
	unsigned n_warnings;
	char warnings[ING_PLAN_MAX_WARN][ING_PLAN_WARN_LEN];
};

/*
 * Build the plan (rules above). 0, or -EINVAL / -ENODEV / -ENOSPC with a one-line reason in
 * err (bad override, unknown device, no cpu at all). out is fully written on success.
 */
int ing_plan_make(const struct ing_topo *t, const struct ing_plan_opts *o, struct ing_plan *out,
		  char *err, size_t errlen);
/*
 * EAL lcore arguments: lcores gets the "-l" value ("0-1"), *main_lcore the "--main-lcore"
 * value (control_cpu). 0 or -ENOSPC.
 */
int ing_plan_eal_lcores(const struct ing_plan *p, char *lcores, size_t len, int *main_lcore);
/* Human-readable and JSON renderings (JSON: one object, no trailing newline). */
void ing_plan_format_text(const struct ing_plan *p, FILE *f);
void ing_plan_format_json(const struct ing_plan *p, FILE *f);
/* The plan at INFO (one line per role), its warnings at WARN, component "numa". */
void ing_plan_log(const struct ing_plan *p);
/* The topology as text / JSON (nodes, cpus, cores, devices with their nodes). */
void ing_topo_format_text(const struct ing_topo *t, FILE *f);
void ing_topo_format_json(const struct ing_topo *t, FILE *f);

#endif
