/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ingest-topo: print the machine topology (NUMA nodes, cores, RDMA and block devices with
 * their nodes) and the placement plan ingestd would use, as text or --json. Takes the same
 * placement overrides as ingestd, so a plan can be tried before it is run.
 */
#include "numa/numa.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
	fprintf(f,
		"usage: ingest-topo [options]\n"
		"Print the topology and ingestd's placement plan (control lcore, dataplane lcores,\n"
		"persistence workers, MR pool node) and warn about cross-node placements.\n"
		"\n"
		"  --json              one JSON object {\"topology\":..., \"plan\":...}\n"
		"  --topology FILE     hwloc XML instead of the live machine (also $HWLOC_XMLFILE)\n"
		"  --rdma-dev NAME     RDMA device to place around (default: the first found)\n"
		"  --data-dir DIR      find the storage device of DIR (live machine)\n"
		"  --block-dev NAME    storage device by name (nvme0n1), wins over --data-dir\n"
		"  --dataplane N       dataplane lcores (default %d)\n"
		"  --workers N         persistence workers (default %d)\n"
		"  --allow-smt         allow SMT siblings as dataplane lcores\n"
		"overrides (validated, they win over the plan):\n"
		"  --lcores LIST       EAL -l list: control (first) + dataplane lcores, e.g. 8-10\n"
		"  --control-cpu N     control thread / EAL main lcore\n"
		"  --pool-node N       NUMA node of the MR pool\n"
		"  --worker-cpus LIST  pin the persistence workers to LIST (round-robin)\n"
		"  -h, --help          this text\n"
		"exit status: 0 plan made, 1 no plan (error printed), 2 usage error\n",
		ING_DEFAULT_DATAPLANE_LCORES, ING_DEFAULT_PLAN_WORKERS);
}

static int parse_uint(const char *s, long max, long *out)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < 0 || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

int main(int argc, char **argv)
{
	enum { O_JSON = 256, O_TOPO, O_RDMA, O_DATA, O_BLOCK, O_DP, O_WORKERS, O_SMT, O_LCORES,
	       O_CONTROL, O_POOL, O_WCPUS };
	static const struct option lo[] = {
		{ "json", no_argument, NULL, O_JSON },
		{ "topology", required_argument, NULL, O_TOPO },
		{ "rdma-dev", required_argument, NULL, O_RDMA },
		{ "data-dir", required_argument, NULL, O_DATA },
		{ "block-dev", required_argument, NULL, O_BLOCK },
		{ "dataplane", required_argument, NULL, O_DP },
		{ "workers", required_argument, NULL, O_WORKERS },
		{ "allow-smt", no_argument, NULL, O_SMT },
		{ "lcores", required_argument, NULL, O_LCORES },
		{ "control-cpu", required_argument, NULL, O_CONTROL },
		{ "pool-node", required_argument, NULL, O_POOL },
		{ "worker-cpus", required_argument, NULL, O_WCPUS },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct ing_plan_opts po;
	struct ing_plan plan;
	const char *xml = NULL;
	bool json = false;
	char err[512];
	long v;
	int c;

	ing_plan_opts_init(&po);
	while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (c) {
		case O_JSON: json = true; break;
		case O_TOPO: xml = optarg; break;
		case O_RDMA: po.rdma_dev = optarg; break;
		case O_DATA: po.data_dir = optarg; break;
		case O_BLOCK: po.block_dev = optarg; break;
		case O_SMT: po.allow_smt = true; break;
		case O_LCORES: po.lcores = optarg; break;
		case O_WCPUS: po.worker_cpus = optarg; break;
		case O_DP:
		case O_WORKERS:
		case O_CONTROL:
		case O_POOL:
			if (parse_uint(optarg, c == O_DP ? ING_PLAN_MAX_LCORES
					     : c == O_WORKERS ? ING_PLAN_MAX_WORKERS : INT_MAX, &v)) {
				fprintf(stderr, "ingest-topo: %s: '%s' is not a valid number\n",
					argv[optind - 1], optarg);
				return 2;
			}
			if (c == O_DP)
				po.n_dataplane = (unsigned)v;
			else if (c == O_WORKERS)
				po.n_workers = (unsigned)v;
			else if (c == O_CONTROL)
				po.control_cpu = (int)v;
			else
				po.pool_node = (int)v;
			break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "ingest-topo: unexpected argument '%s'\n", argv[optind]);
		usage(stderr);
		return 2;
	}

	struct ing_topo *t = ing_topo_load(xml, err, sizeof(err));
	if (!t) {
		fprintf(stderr, "ingest-topo: %s\n", err);
		return 1;
	}
	int rc = ing_plan_make(t, &po, &plan, err, sizeof(err));
	if (json) {
		fputs("{\"topology\":", stdout);
		ing_topo_format_json(t, stdout);
		fputs(",\"plan\":", stdout);
		if (rc)
			fputs("null", stdout);
		else
			ing_plan_format_json(&plan, stdout);
		fputs("}\n", stdout);
	} else {
		ing_topo_format_text(t, stdout);
		if (!rc)
			ing_plan_format_text(&plan, stdout);
	}
	ing_topo_destroy(t);
	if (rc) {
		fprintf(stderr, "ingest-topo: no plan: %s\n", err);
		return 1;
	}
	return 0;
}
