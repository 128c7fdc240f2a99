/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ingest-doctor: pre-flight check of an ingest node. Prints PASS/WARN/FAIL per check with a
 * one-line fix, then "summary: N PASS, N WARN, N FAIL". Exit 0 without FAIL, 1 with any
 * FAIL, 2 on a usage error. --sysfs-root/--procfs-root point it at fixture trees (tests).
 */
#include "common/parse.h"
#include "numa/doctor.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static void usage(FILE *f)
{
	fprintf(f,
		"usage: ingest-doctor [options]\n"
		"Pre-flight check: RDMA devices, port state, RoCE v2 GID index, MTU; memlock and\n"
		"hugepages vs the MR pool; data dir filesystem, free space, O_DIRECT; NUMA\n"
		"locality of NIC/disk/cores; CPU governor, isolation, IOMMU.\n"
		"\n"
		"  --data-dir DIR      ingestd's data dir (storage checks; an O_DIRECT probe file is\n"
		"                      written there and removed)\n"
		"  --pool-bytes N      MR pool size to check memlock/hugepages against, K/M/G suffix\n"
		"                      (default 256M)\n"
		"  --rdma-dev NAME     device to check (default: the first one)\n"
		"  --json              JSON instead of text\n"
		"  --sysfs-root DIR    read sysfs there instead of /sys (test fixtures)\n"
		"  --procfs-root DIR   read procfs there instead of /proc (test fixtures)\n"
		"  --memlock N|unlimited  use this memlock limit instead of getrlimit()\n"
		"  --topology FILE     hwloc XML for the NUMA checks (default: live, $HWLOC_XMLFILE)\n"
		"placement (as given to ingestd; see ingest-topo --help):\n"
		"  --lcores LIST  --control-cpu N  --pool-node N  --worker-cpus LIST\n"
		"  --dataplane N  --workers N  --block-dev NAME  --allow-smt\n"
		"  -h, --help          this text\n"
		"exit status: 0 no FAIL, 1 at least one FAIL, 2 usage error\n");
}

static int parse_size(const char *s, uint64_t *out)
{
	return ing_parse_size(s, out) ? -EINVAL : 0;
}

int main(int argc, char **argv)
{
	enum { O_DATA = 256, O_POOL, O_RDMA, O_JSON, O_SYS, O_PROC, O_MEMLOCK, O_TOPO, O_LCORES,
	       O_CONTROL, O_PNODE, O_WCPUS, O_DP, O_WORKERS, O_BLOCK, O_SMT };
	static const struct option lo[] = {
		{ "data-dir", required_argument, NULL, O_DATA },
		{ "pool-bytes", required_argument, NULL, O_POOL },
		{ "rdma-dev", required_argument, NULL, O_RDMA },
		{ "json", no_argument, NULL, O_JSON },
		{ "sysfs-root", required_argument, NULL, O_SYS },
		{ "procfs-root", required_argument, NULL, O_PROC },
		{ "memlock", required_argument, NULL, O_MEMLOCK },
		{ "topology", required_argument, NULL, O_TOPO },
		{ "lcores", required_argument, NULL, O_LCORES },
		{ "control-cpu", required_argument, NULL, O_CONTROL },
		{ "pool-node", required_argument, NULL, O_PNODE },
		{ "worker-cpus", required_argument, NULL, O_WCPUS },
		{ "dataplane", required_argument, NULL, O_DP },
		{ "workers", required_argument, NULL, O_WORKERS },
		{ "block-dev", required_argument, NULL, O_BLOCK },
		{ "allow-smt", no_argument, NULL, O_SMT },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct ing_doctor_opts o;
	bool json = false;
	uint64_t v;
	int c;

	ing_doctor_opts_init(&o);
	while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (c) {
		case O_DATA: o.data_dir = optarg; break;
		case O_RDMA: o.rdma_dev = optarg; break;
		case O_JSON: json = true; break;
		case O_SYS: o.sysfs_root = optarg; break;
		case O_PROC: o.procfs_root = optarg; break;
		case O_TOPO: o.topology = optarg; break;
		case O_LCORES: o.plan.lcores = optarg; break;
		case O_WCPUS: o.plan.worker_cpus = optarg; break;
		case O_BLOCK: o.plan.block_dev = optarg; break;
		case O_SMT: o.plan.allow_smt = true; break;
		case O_POOL:
			if (parse_size(optarg, &v) || !v) {
				fprintf(stderr, "ingest-doctor: --pool-bytes '%s': expected a size like "
					"268435456, 256M or 1G\n", optarg);
				return 2;
			}
			o.pool_bytes = v;
			break;
		case O_MEMLOCK:
			if (strcasecmp(optarg, "unlimited") == 0 || strcasecmp(optarg, "infinity") == 0) {
				o.memlock = ING_DOCTOR_MEMLOCK_UNLIMITED;
			} else if (parse_size(optarg, &v) == 0 && v <= INT64_MAX) {
				o.memlock = (int64_t)v;
			} else {
				fprintf(stderr, "ingest-doctor: --memlock '%s': expected bytes (K/M/G "
					"suffix) or 'unlimited'\n", optarg);
				return 2;
			}
			break;
		case O_CONTROL:
		case O_PNODE:
		case O_DP:
		case O_WORKERS:
			if (parse_size(optarg, &v) || v > 65535) {
				fprintf(stderr, "ingest-doctor: %s '%s': expected a small number\n",
					argv[optind - 1], optarg);
				return 2;
			}
			if (c == O_CONTROL)
				o.plan.control_cpu = (int)v;
			else if (c == O_PNODE)
				o.plan.pool_node = (int)v;
			else if (c == O_DP)
				o.plan.n_dataplane = (unsigned)v;
			else
				o.plan.n_workers = (unsigned)v;
			break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "ingest-doctor: unexpected argument '%s'\n", argv[optind]);
		usage(stderr);
		return 2;
	}

	struct ing_doctor_report *r = calloc(1, sizeof(*r));
	if (!r) {
		fprintf(stderr, "ingest-doctor: out of memory\n");
		return 1;
	}
	int fails = ing_doctor_run(&o, r);
	if (json) {
		ing_doctor_format_json(r, stdout);
		fputc('\n', stdout);
	} else {
		char pool[32];
		snprintf(pool, sizeof(pool), "%llu MiB", (unsigned long long)(o.pool_bytes >> 20));
		printf("ingest-doctor %s: sysfs %s, procfs %s, data dir %s, pool %s\n", ING_VERSION,
		       o.sysfs_root, o.procfs_root, o.data_dir ? o.data_dir : "(none)", pool);
		ing_doctor_format_text(r, stdout);
	}
	free(r);
	return fails ? 1 : 0;
}
