/* SPDX-License-Identifier: Apache-2.0 */
/*
 * numa.h - machine topology (hwloc) and the placement plan of ingestd's threads and memory.
 *
 * Who calls it: ingestd (once, from main, before EAL start), ingest-topo, ingest-doctor.
 * Nothing here is thread-safe or on the hot path: build a plan, copy the numbers you need.
 *
 * Rails. A node runs one rail per RDMA device (docs/ARCHITECTURE.md "Rails"): its own
 * rdma_cm listener, PD and registrations, dataplane lcores on the device's NUMA node, a pool
 * region on that node and persistence workers of that node. The plan decides, per rail,
 * where each of them goes.
 *
 * Placement rules (ing_plan_make), in order; every rule can be overridden explicitly:
 *  1. rails = opts.rdma_dev ("mlx5_0, mlx5_1@1": each device, its NUMA node overridden
 *     after '@'), else the devices of opts.rdma_addr's addresses, else every RDMA device
 *     whose port is ACTIVE and whose netdev has an IPv4 address (a topology from XML says
 *     nothing of addresses: there every ACTIVE device counts). A rail's node: the override,
 *     else the device's (sysfs / hwloc), else the only node of a one-node machine, else
 *     unknown: it is then placed on the home node, with a warning naming the override.
 *     disk_node = NUMA node of the block device holding opts.data_dir (or opts.block_dev).
 *     Neither given and the topology has exactly one block device: that one.
 *     home node = the first rail's node, else disk_node, else the first node with CPUs.
 *  2. The control thread (EAL main lcore) gets the home node's first physical core. Each
 *     rail then gets n_dataplane lcores on its node's free physical cores (one PU per core,
 *     the lowest-numbered, in hwloc logical order), handed out one per rail in turn so that
 *     rails on one node share it evenly. SMT siblings only with allow_smt (after every
 *     physical core). Fewer cores than asked: fewer lcores and a warning; none on the node:
 *     the first free core elsewhere (warned). No rail (fallback only): n_dataplane lcores
 *     on the home node, as one rail would get.
 *  3. The MR pool gets one region per NUMA node that carries a rail (rail order), so a
 *     READ or WRITE lands in memory local to its NIC; no rail: one region on disk_node,
 *     else the home node. pool_node (--pool-node) makes it one region on that node.
 *  4. Persistence workers, n_workers per region, go on free physical cores (not control,
 *     not dataplane, not an lcore's SMT sibling) of the region's node: the CRC-32C and
 *     the write of a frame stay on the node whose memory holds it. A data disk on another
 *     node is reached by its own DMA: each byte crosses the interconnect once, which no
 *     placement avoids (workers on the disk's node would add a second crossing: the CRC's
 *     reads). No free core on the node: the first free cores elsewhere (warned); none at
 *     all: not pinned (-1), they share the CPUs with control; they block in I/O.
 *  5. poll_mode_hint = BUSY only when every dataplane lcore has its own physical core and at
 *     least one more core is left over for workers and the OS; otherwise ADAPTIVE (busy-poll
 *     would starve the others). A 2-core, 1-node machine gets: control 0, dataplane 1,
 *     workers not pinned, ADAPTIVE.
 * Overrides (lcores, control_cpu, worker_cpus, pool_node) are validated against the
 * topology (unknown cpu / node, duplicates, control inside the dataplane set: errors) and win
 * over the rules; an lcore of --lcores serves a rail on its own node (the one with fewest
 * lcores so far), a worker cpu of --worker-cpus the region on its node; remote or
 * SMT-sharing choices are kept, with a warning. ing_plan_format_config prints the config
 * lines that make ingestd build exactly this plan.
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
#define ING_PLAN_MAX_RAILS 8
#define ING_PLAN_MAX_REGIONS ING_PLAN_MAX_RAILS
#define ING_PLAN_MAX_WARN 24
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
	/* RDMA only: port 1's state and the netdev's IPv4 addresses, as far as known */
	int port_state;                  /* 1 ACTIVE, 0 not active, -1 unknown */
	bool addrs_known;                /* live machine: addrs lists what the netdev has */
	unsigned n_addrs;
	char addrs[4][48];               /* the netdev's IPv4 addresses (the first four) */
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

/* ---------------------------------------------------------------- rail lists */

/*
 * One entry of an rdma-dev list: "mlx5_0" or "rxe1@1" (device, NUMA node override).
 * The list: entries separated by commas and/or blanks, no device twice, at most
 * ING_PLAN_MAX_RAILS. Returns the count (0: the list is empty), or -EINVAL with one line
 * in err (which entry, why).
 */
struct ing_rail_spec {
	char dev[ING_TOPO_NAME_MAX];
	int node;                        /* -1: as the device says */
};
int ing_rail_list_parse(const char *s, struct ing_rail_spec *out, unsigned max, char *err,
			size_t errlen);
/* Addresses of an rdma-addr list ("10.0.1.1, 10.0.2.1"): the same rules, no '@'. */
int ing_addr_list_parse(const char *s, char (*out)[48], unsigned max, char *err, size_t errlen);

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
	const char *rdma_dev;    /* rail list "mlx5_0, mlx5_1@1" (ing_rail_list_parse); NULL:
				    the devices of rdma_addr, else every ACTIVE device with an
				    IPv4 address (none: fallback only) */
	const char *rdma_addr;   /* listen address list (ingestd --rdma-addr); NULL: each rail's
				    netdev's first IPv4 address */
	bool no_rails;           /* no RDMA data path (ingestd --rdma off): no rail, whatever
				    devices the machine has (the gRPC fallback only) */
	const char *data_dir;    /* used to find the block device (live only); NULL: none */
	const char *block_dev;   /* explicit block device ("nvme0n1"); wins over data_dir */
	unsigned n_dataplane;    /* per rail; default ING_DEFAULT_DATAPLANE_LCORES */
	unsigned n_workers;      /* per pool region; default ING_DEFAULT_PLAN_WORKERS */
	bool allow_smt;          /* default false: one lcore per physical core */
	/* Overrides (NULL / -1: unset). */
	const char *lcores;      /* EAL -l list: control (main lcore, the first unless
				    control_cpu is set) + dataplane lcores, e.g. "8-10" */
	int control_cpu;
	int pool_node;
	const char *worker_cpus; /* cpu list the workers are pinned to, round-robin */
	const char *sysfs_root;  /* for data_dir -> block device; NULL: "/sys" */
	uint64_t stripe_min;     /* ingestd --stripe-min (default ING_STRIPE_DEFAULT_MIN, 8 MiB;
				    0: off): with it on, every rail registers every pool region */
};
void ing_plan_opts_init(struct ing_plan_opts *o);

/* Where a rail's NUMA node came from. */
enum ing_rail_node_from {
	ING_RAIL_NODE_DEVICE = 0,    /* the device (sysfs numa_node, hwloc's PCI locality) */
	ING_RAIL_NODE_OVERRIDE = 1,  /* rdma-dev = dev@N */
	ING_RAIL_NODE_SINGLE = 2,    /* unknown, but the machine has one node */
	ING_RAIL_NODE_UNKNOWN = 3,   /* unknown: placed on the home node */
};

struct ing_plan_rail {
	char dev[ING_TOPO_NAME_MAX];     /* "" when only its address names it (resolved at bind) */
	char netdev[ING_TOPO_NAME_MAX];
	char addr[48];                   /* listen address: rdma_addr's, else the netdev's first
					    IPv4 (live machine), "" unknown (the engine picks) */
	int node;                        /* the node it is placed on (-1: no NUMA information) */
	int dev_node;                    /* what the device says, -1 unknown */
	enum ing_rail_node_from node_from;
	unsigned region;                 /* index into ing_plan.regions */
	unsigned n_lcores;
	int lcores[ING_PLAN_MAX_LCORES]; /* its dataplane lcores (cpus) */
};

/* One pool region and the persistence workers of its node. */
struct ing_plan_region {
	int node;                        /* -1: not bound (no NUMA information) */
	unsigned first_worker;           /* its workers: worker_cpus[first_worker ..] */
	unsigned n_workers;
};

struct ing_plan {
	int control_cpu;
	unsigned n_dataplane;    /* every rail's lcores, rail after rail (the EAL list's tail) */
	int dataplane_cpus[ING_PLAN_MAX_LCORES];
	unsigned n_workers;      /* every region's workers, region after region */
	int worker_cpus[ING_PLAN_MAX_WORKERS];  /* -1: not pinned */
	unsigned n_rails;        /* 0: no RDMA device (the gRPC fallback only) */
	struct ing_plan_rail rails[ING_PLAN_MAX_RAILS];
	unsigned n_regions;      /* >= 1 */
	struct ing_plan_region regions[ING_PLAN_MAX_REGIONS];
	unsigned control_region; /* the region on the control cpu's node (else 0): where the
				    gRPC fallback's frames go first (control copies them in) */
	int pool_node;           /* the first region's node; -1: no binding (unknown) */
	int nic_node;            /* the first rail's node; -1: no RDMA device or unknown */
	int disk_node;           /* -1: no block device or unknown locality */
	int home_node;           /* the node the dataplane was placed on */
	char rdma_dev[ING_TOPO_NAME_MAX];  /* the first rail's device, "" none */
	char netdev[ING_TOPO_NAME_MAX];
	char block_dev[ING_TOPO_NAME_MAX]; /* "" none */
	enum ing_poll_hint poll_mode_hint;
	char poll_reason[160];
	bool lcores_overridden, control_overridden, pool_overridden, workers_overridden;
	unsigned n_dataplane_asked;        /* per rail, as asked (config lines) */
	unsigned n_workers_asked;          /* per region, as asked */
	bool allow_smt;
	uint64_t stripe_min;     /* as asked (ing_plan_opts.stripe_min); 0: striping off */
	unsigned n_nodes;
	unsigned n_remote;       /* how many warnings are about cross-node placement */
	unsigned n_warnings;
	char warnings[ING_PLAN_MAX_WARN][ING_PLAN_WARN_LEN];
	/* 1 + the index of the warning "no RDMA device found" (0: there is a device). A host
	 * without RDMA is no fault of the plan: ing_plan_log leaves it to the node's one INFO
	 * line; ingest-topo and ingest-doctor print it with the others. */
	unsigned no_rdma_warning;
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
/*
 * How many registrations of a whole pool region (the --pool spec) the node pins: each rail
 * registers its own region, and with striping on (stripe_min > 0) every other region too,
 * so that another rail's part of a striped frame can land in it: rails x regions. At
 * least 1 (the fallback-only node pins nothing, but its pool is the same size).
 */
unsigned ing_plan_pinned_regions(const struct ing_plan *p);
/* The region (index) of NUMA node node, -1 when the plan has none there. */
int ing_plan_region_of_node(const struct ing_plan *p, int node);
/* Human-readable and JSON renderings (JSON: one object, no trailing newline). */
void ing_plan_format_text(const struct ing_plan *p, FILE *f);
/*
 * The ingestd config lines (name = value, one a line, with a comment line first) that
 * make ingestd build exactly this plan: rdma-dev with each rail's node, lcores,
 * control-cpu, dataplane, workers, worker-cpus (when every worker is pinned), pool-node
 * (when overridden), allow-smt and the poll mode.
 */
void ing_plan_format_config(const struct ing_plan *p, FILE *f);
void ing_plan_format_json(const struct ing_plan *p, FILE *f);
/* The plan at INFO (one line per role), its warnings at WARN, component "numa". */
void ing_plan_log(const struct ing_plan *p);
/* The topology as text / JSON (nodes, cpus, cores, devices with their nodes). */
void ing_topo_format_text(const struct ing_topo *t, FILE *f);
void ing_topo_format_json(const struct ing_topo *t, FILE *f);

#endif
