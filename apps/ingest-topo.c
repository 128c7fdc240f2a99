/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ingest-topo: print the machine topology (NUMA nodes, cores, RDMA and block devices with
 * their nodes) and the placement plan ingestd would use, per rail (one per RDMA device:
 * its lcores, its pool region, the region's workers, the disk), as text or --json, then
 * the config lines that make ingestd build exactly that plan. Takes ingestd's placement
 * options, and --config reads them from ingestd's own file, so a plan can be tried and
 * tuned before it is run, and applied as printed.
 */
#include "common/cli.h"
#include "common/parse.h"
#include "control/node/opts.h"
#include "numa/numa.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct topo_cfg {
	struct ing_plan_opts po;
	const char *xml;
	const char *config;
	bool json;
	bool config_only;
};

#define C struct topo_cfg
static const struct ing_opt opts[] = {
	{ "config", "FILE", ING_OPT_PATH, offsetof(C, config), 0, 0, 0, NULL, NULL,
	  "ingestd's config file: plan what it describes (rdma-dev,\n"
	  "rdma-addr, lcores, control-cpu, dataplane, workers,\n"
	  "worker-cpus, pool-node, allow-smt, block-dev, data-dir,\n"
	  "stripe-min);\n"
	  "flags given here win", NULL, 0 },
	ING_OPT_BOOL_(C, "json", json, "one JSON object {\"topology\":..., \"plan\":...} (the plan's\n"
		      "\"config\": the config lines)"),
	ING_OPT_BOOL_(C, "config-lines", config_only, "print only the ingestd config lines of the plan (to\n"
		      "append to ingestd.conf)"),
	ING_OPT_PATH_(C, "topology", xml, "FILE", "hwloc XML instead of the live machine (also $HWLOC_XMLFILE)"),
	ING_OPT_STR_(C, "rdma-dev", po.rdma_dev, "LIST", "RDMA devices, one rail each ('mlx5_0, mlx5_1'; 'rxe1@1'\n"
		     "places a device on node 1) (default: every ACTIVE device\n"
		     "with an IPv4 address)"),
	ING_OPT_STR_(C, "rdma-addr", po.rdma_addr, "LIST", "listen addresses, one per rail (ingestd --rdma-addr)"),
	ING_OPT_STR_(C, "data-dir", po.data_dir, "DIR", "find the storage device of DIR (live machine)"),
	ING_OPT_STR_(C, "block-dev", po.block_dev, "NAME", "storage device by name (nvme0n1), wins over --data-dir"),
	ING_OPT_UINT_(C, "dataplane", po.n_dataplane, 1, ING_PLAN_MAX_LCORES, "dataplane lcores per rail"),
	ING_OPT_UINT_(C, "workers", po.n_workers, 1, ING_PLAN_MAX_WORKERS, "persistence workers per pool region (ingestd --workers)"),
	ING_OPT_BOOL_(C, "allow-smt", po.allow_smt, "allow SMT siblings as dataplane lcores"),
	ING_OPT_STR_(C, "lcores", po.lcores, "LIST", "override (ingestd --lcores): EAL -l list, control (first) +\n"
		     "dataplane lcores, e.g. 8-10; each serves the rail on its node"),
	ING_OPT_CUSTOM_(C, "control-cpu", po.control_cpu, ing_opt_set_index, "N", "override: control thread / EAL main lcore"),
	ING_OPT_CUSTOM_(C, "pool-node", po.pool_node, ing_opt_set_index, "N", "override (ingestd --pool-node): one pool region, on node N"),
	ING_OPT_STR_(C, "worker-cpus", po.worker_cpus, "LIST", "override: pin the persistence workers to LIST (each\n"
		     "region's the cpus on its node, round-robin)"),
	ING_OPT_SIZE_(C, "stripe-min", po.stripe_min, 0, 1ull << 40, "ingestd's --stripe-min (default 8M; 0: off): the plan says\n"
		      "what striping pins (every rail registers every region)"),
};

static void cfg_init(void *p)
{
	struct topo_cfg *c = p;
	memset(c, 0, sizeof(*c));
	ing_plan_opts_init(&c->po);
}

static const struct ing_cli cli = {
	.prog = "ingest-topo",
	.synopsis = "[--config FILE] [options]",
	.summary = "show the topology of this machine and the placement plan ingestd would use",
	.about = "Prints NUMA nodes, cores, RDMA and block devices with their nodes, then the plan:\n"
		 "per rail (one per RDMA device) its node, lcores and pool region; per region its\n"
		 "node and persistence workers; the control lcore, the disk, the poll mode, and a\n"
		 "warning for every cross-node placement. Then the ingestd config lines that build\n"
		 "exactly this plan. Overrides are validated as ingestd validates them, so a plan\n"
		 "can be tried, tuned and applied as printed.\n",
	.opts = opts,
	.nopts = sizeof(opts) / sizeof(opts[0]),
	.max_args = 0,
	.init = cfg_init,
	.cfg_size = sizeof(struct topo_cfg),
	.notes = "Example: ingest-topo --config /etc/h3000/ingestd.conf --dataplane 2 --config-lines\n"
		 "prints the lines that give each rail two lcores on its node.\n",
	.exit_status = "  0  a plan was made\n"
		       "  1  no plan (the reason is printed: an override this machine lacks, no\n"
		       "     topology)\n"
		       "  2  usage error, or a config file ingestd would refuse (FILE:LINE)\n",
};

/* --config FILE: ingestd's file, read by ingestd's own table, into the plan's options */
static int read_ingestd_config(struct topo_cfg *c)
{
	static struct ing_ingestd_opts io;   /* its strings stay in the file's buffer */

	ing_ingestd_opts_init(&io);
	if (ing_ingestd_opts_read_config_as(cli.prog, c->config, &io))
		return ING_EXIT_USAGE;
	ing_ingestd_plan_opts(&io, &c->po);
	if (io.sink != ING_SINK_FILE)
		c->po.data_dir = NULL;
	return 0;
}

int main(int argc, char **argv)
{
	static const char *const first[] = { "config", NULL };
	struct topo_cfg c;
	struct ing_plan *plan;
	char err[512];
	int argi;

	cfg_init(&c);
	/* the file first, so that the flags given here override it */
	if (!ing_cli_parse_only(&cli, argc, argv, &c, first) && c.config && read_ingestd_config(&c))
		return ING_EXIT_USAGE;
	int rc = ing_cli_parse(&cli, argc, argv, &c, &argi);
	if (rc)
		return rc == 1 ? ING_EXIT_OK : rc;

	struct ing_topo *t = ing_topo_load(c.xml, err, sizeof(err));
	if (!t) {
		fprintf(stderr, "ingest-topo: %s\n", err);
		return ING_EXIT_FAILURE;
	}
	plan = malloc(sizeof(*plan));   /* too big for the stack of a small thread */
	if (!plan) {
		ing_topo_destroy(t);
		fprintf(stderr, "ingest-topo: out of memory\n");
		return ING_EXIT_FAILURE;
	}
	rc = ing_plan_make(t, &c.po, plan, err, sizeof(err));
	if (c.json) {
		fputs("{\"topology\":", stdout);
		ing_topo_format_json(t, stdout);
		fputs(",\"plan\":", stdout);
		if (rc)
			fputs("null", stdout);
		else
			ing_plan_format_json(plan, stdout);   /* its "config": the lines below */
		fputs("}\n", stdout);
	} else if (c.config_only) {
		if (!rc)
			ing_plan_format_config(plan, stdout);
	} else {
		ing_topo_format_text(t, stdout);
		if (!rc) {
			ing_plan_format_text(plan, stdout);
			fputs("\n", stdout);
			ing_plan_format_config(plan, stdout);
		}
	}
	ing_topo_destroy(t);
	free(plan);
	if (rc) {
		fprintf(stderr, "ingest-topo: no plan: %s\n", err);
		return ING_EXIT_FAILURE;
	}
	return ING_EXIT_OK;
}
