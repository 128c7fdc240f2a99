/* SPDX-License-Identifier: Apache-2.0 */
/*
 * doctor.h - ingest-doctor's pre-flight checks: RDMA devices, ports, GID index and MTU;
 * memlock and hugepages against the MR pool size; the data dir's filesystem, free space and
 * O_DIRECT; NUMA locality of NIC, disk and cores; CPU governor, isolation and IOMMU.
 *
 * Every input is read below opts.sysfs_root / opts.procfs_root (fixtures in tests/numa/roots
 * stand in for /sys and /proc); only the memlock rlimit (opts.memlock), the environment
 * (RDMAV_HUGEPAGES_SAFE), the data dir probe and, on the live /sys only, ibv_query_port for
 * the active MTU touch the real process. Single-threaded; call from main.
 */
#ifndef ING_NUMA_DOCTOR_H
#define ING_NUMA_DOCTOR_H

#include "numa/numa.h"

#include <stdint.h>
#include <stdio.h>

#define ING_DOCTOR_MAX_CHECKS 96
#define ING_DOCTOR_MAX_RAILS 8
#define ING_DOCTOR_DEFAULT_POOL_BYTES (256ull << 20)
#define ING_DOCTOR_POOL_CLASSES 16
#define ING_DOCTOR_MEMLOCK_RLIMIT (-2) /* opts.memlock: ask getrlimit(RLIMIT_MEMLOCK) */
#define ING_DOCTOR_MEMLOCK_UNLIMITED (-1)

enum ing_check_status { ING_CHECK_PASS = 0, ING_CHECK_WARN = 1, ING_CHECK_FAIL = 2 };

struct ing_check {
	char section[16];   /* rdma, memory, storage, numa, cpu */
	char name[32];      /* stable id: "rdma.gid", "memory.memlock", ... */
	enum ing_check_status status;
	char detail[320];   /* what was found */
	char fix[320];      /* one line; "" when PASS */
};

struct ing_doctor_opts {
	const char *sysfs_root;   /* default "/sys" */
	const char *procfs_root;  /* default "/proc" */
	const char *topology;     /* hwloc XML for the NUMA checks; NULL: live/$HWLOC_XMLFILE */
	const char *data_dir;     /* NULL: storage checks say they were skipped (WARN) */
	const char *rdma_dev;     /* the rails, as ingestd's rdma-dev ("mlx5_0, rxe1@1"): each is
				     checked, a missing one is a FAIL; NULL: every device with an
				     ACTIVE port and an IPv4 RoCE v2 GID (ingestd's default
				     rails; none: the first device, to say why) */
	uint64_t pool_bytes;      /* MR pool size to check against; default 256 MiB */
	/* the pool's size classes (slot bytes, count), when known (--pool, --config): its
	 * hugepages are counted per class, as ingestd maps them; none: pool_bytes rounded up */
	unsigned pool_nclasses;
	uint64_t pool_slot[ING_DOCTOR_POOL_CLASSES];
	unsigned pool_count[ING_DOCTOR_POOL_CLASSES];
	int hugepages;            /* as ingestd --hugepages: 1 on (too few free: FAIL), 0 off
				     (not checked), -1 auto (default; too few: WARN, 4 KiB pages) */
	int64_t memlock;          /* bytes, or ING_DOCTOR_MEMLOCK_RLIMIT (default) / _UNLIMITED */
	struct ing_plan_opts plan; /* placement options/overrides (as ingestd would get them) */
};
void ing_doctor_opts_init(struct ing_doctor_opts *o);

/* What the doctor found of one rail (-1 / "" when unknown). */
struct ing_doctor_rail {
	char dev[ING_TOPO_NAME_MAX];
	int port;
	int gid_index;            /* the RoCE v2 IPv4 GID index to use */
	char gid_ip[48];
	int active_mtu;
	bool active_mtu_estimated;
	char netdev[ING_TOPO_NAME_MAX];
	int netdev_mtu;
	int node;                 /* rdma-dev's @node, else the device's (sysfs), -1 unknown */
};

struct ing_doctor_report {
	unsigned n, n_pass, n_warn, n_fail;
	struct ing_check checks[ING_DOCTOR_MAX_CHECKS];
	unsigned n_rails;
	struct ing_doctor_rail rails[ING_DOCTOR_MAX_RAILS];
	/* the first rail's facts, as before rails (-1 / "" when unknown) */
	char rdma_dev[ING_TOPO_NAME_MAX];
	int port;
	int gid_index;            /* the RoCE v2 IPv4 GID index to use */
	char gid_ip[48];
	int active_mtu;
	bool active_mtu_estimated; /* not from the device: derived from the netdev MTU */
	char netdev[ING_TOPO_NAME_MAX];
	int netdev_mtu;
};

/* Run every check. Always fills r; returns the number of FAILs (>= 0). */
int ing_doctor_run(const struct ing_doctor_opts *o, struct ing_doctor_report *r);
/* Add one more check's result to r (a program's own check, e.g. the object store). */
void ing_doctor_add(struct ing_doctor_report *r, const char *section, const char *name,
		    enum ing_check_status st, const char *fix, const char *fmt, ...)
	__attribute__((format(printf, 6, 7)));
const char *ing_check_status_str(enum ing_check_status s);
/* Text: sections, one line per check (+ "fix:" line), then "summary: N PASS, N WARN, N FAIL". */
void ing_doctor_format_text(const struct ing_doctor_report *r, FILE *f);
void ing_doctor_format_json(const struct ing_doctor_report *r, FILE *f);

#endif
