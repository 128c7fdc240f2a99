/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ingest-topo: print the machine topology (NUMA nodes, cores, RDMA and block devices with
 * their nodes) and the placement plan ingestd would use, as text or --json. Takes the same
 * placement overrides as ingestd, so a plan can be tried before it is run.
 */
#include "common/cli.h"
#include "common/parse.h"
#include "numa/numa.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct topo_cfg {
	struct ing_plan_opts po;
	const char *xml;
	bool json;
};

#define C struct topo_cfg
static const struct ing_opt opts[] = {
	ING_OPT_BOOL_(C, "json", json, "one JSON object {\"topology\":..., \"plan\":...}"),
	ING_OPT_PATH_(C, "topology", xml, "FILE", "hwloc XML instead of the live machine (also $HWLOC_XMLFILE)"),
	ING_OPT_STR_(C, "rdma-dev", po.rdma_dev, "NAME", "RDMA device to place around (default: the first found)"),
	ING_OPT_STR_(C, "data-dir", po.data_dir, "DIR", "find the storage device of DIR (live machine)"),
	ING_OPT_STR_(C, "block-dev", po.block_dev, "NAME", "storage device by name (nvme0n1), wins over --data-dir"),
	ING_OPT_UINT_(C, "dataplane", po.n_dataplane, 0, ING_PLAN_MAX_LCORES, "dataplane lcores"),
	ING_OPT_UINT_(C, "workers", po.n_workers, 0, ING_PLAN_MAX_WORKERS, "persistence workers (ingestd --workers)"),
	ING_OPT_BOOL_(C, "allow-smt", po.allow_smt, "allow SMT siblings as dataplane lcores"),
	ING_OPT_STR_(C, "lcores", po.lcores, "LIST", "override (ingestd --lcores): EAL -l list, control (first) +\n"
		     "dataplane lcores, e.g. 8-10"),
	ING_OPT_CUSTOM_(C, "control-cpu", po.control_cpu, ing_opt_set_index, "N", "override: control thread / EAL main lcore"),
	ING_OPT_CUSTOM_(C, "pool-node", po.pool_node, ing_opt_set_index, "N", "override (ingestd --pool-node): NUMA node of the MR pool"),
	ING_OPT_STR_(C, "worker-cpus", po.worker_cpus, "LIST", "override: pin the persistence workers to LIST (round-robin)"),
};

static void cfg_init(void *p)
{
	struct topo_cfg *c = p;
	memset(c, 0, sizeof(*c));
	ing_plan_opts_init(&c->po);
}

static const struct ing_cli cli = {
	.prog = "ingest-topo",
	.synopsis = "[options]",
	.summary = "show the topology of this machine and the placement plan ingestd would use",
	.about = "Prints NUMA nodes, cores, RDMA and block devices with their nodes, then the plan\n"
		 "(control lcore, dataplane lcores, persistence workers, MR pool node) and a\n"
		 "warning for every cross-node placement. Overrides are validated as ingestd\n"
		 "validates them, so a plan can be tried before it is run.\n",
	.opts = opts,
	.nopts = sizeof(opts) / sizeof(opts[0]),
	.max_args = 0,
	.init = cfg_init,
	.cfg_size = sizeof(struct topo_cfg),
	.exit_status = "  0  a plan was made\n"
		       "  1  no plan (the reason is printed: an override this machine lacks, no\n"
		       "     topology)\n"
		       "  2  usage error\n",
};

int main(int argc, char **argv)
{
	struct topo_cfg c;
	struct ing_plan plan;
	char err[512];
	int argi;

	cfg_init(&c);
	int rc = ing_cli_parse(&cli, argc, argv, &c, &argi);
	if (rc)
		return rc == 1 ? ING_EXIT_OK : rc;

	struct ing_topo *t = ing_topo_load(c.xml, err, sizeof(err));
	if (!t) {
		fprintf(stderr, "ingest-topo: %s\n", err);
		return ING_EXIT_FAILURE;
	}
	rc = ing_plan_make(t, &c.po, &plan, err, sizeof(err));
	if (c.json) {
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
		return ING_EXIT_FAILURE;
	}
	return ING_EXIT_OK;
}
