/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ingest-doctor: pre-flight check of an ingest node. Prints PASS/WARN/FAIL per check with a
 * one-line fix, then "summary: N PASS, N WARN, N FAIL". --config reads ingestd's own
 * config file (the same option table, control/node/opts.c) and checks the node it
 * describes, its object store (--tier) included; --sysfs-root/--procfs-root point it at fixture trees (tests).
 */
#include "common/cli.h"
#include "common/parse.h"
#include "control/node/opts.h"
#include "dataplane/dataplane.h"
#include "dataplane/store/s3.h"
#include "numa/doctor.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct doctor_cfg {
	struct ing_doctor_opts o;
	const char *config;
	bool json;
	/* the object store (ingestd --tier ...): reachable, credentials, bucket */
	const char *tier, *tier_credentials, *tier_region;
	int tier_path_style;
	unsigned tier_timeout_ms;
};
#define C struct doctor_cfg

/* the pool as the doctor checks it: its bytes, and its classes (hugepages per class) */
static void pool_classes(struct ing_doctor_opts *o, const struct ing_pool_opts *po)
{
	o->pool_bytes = ing_pool_spec_bytes(po);
	o->pool_nclasses = po->nclasses;
	for (unsigned i = 0; i < po->nclasses && i < ING_DOCTOR_POOL_CLASSES; i++) {
		o->pool_slot[i] = po->cls[i].slot_size;
		o->pool_count[i] = po->cls[i].count;
	}
}

static int set_pool(const struct ing_opt *d, void *cfg, const char *v, char *why, size_t whylen)
{
	struct ing_pool_opts po;
	char r[200];
	(void)d;
	ing_pool_opts_init(&po);
	if (ing_pool_spec_parse(&po, v, r, sizeof(r))) {
		snprintf(why, whylen, "'%.120s': %s", v, r);
		return -EINVAL;
	}
	pool_classes(&((C *)cfg)->o, &po);
	return 0;
}

/* --pool-bytes: the pool as one size, no classes (hugepages from the bytes alone) */
static int set_pool_bytes(const struct ing_opt *d, void *cfg, const char *v, char *why, size_t whylen)
{
	uint64_t x;
	(void)d;
	if (ing_parse_size(v, &x) || x == 0) {
		snprintf(why, whylen, "'%.64s' is not a size (256M, 1G; more than 0)", v);
		return -EINVAL;
	}
	((C *)cfg)->o.pool_bytes = x;
	((C *)cfg)->o.pool_nclasses = 0;
	return 0;
}

static int set_memlock(const struct ing_opt *d, void *cfg, const char *v, char *why, size_t whylen)
{
	uint64_t x;
	(void)d;
	if (!strcasecmp(v, "unlimited") || !strcasecmp(v, "infinity"))
		((C *)cfg)->o.memlock = ING_DOCTOR_MEMLOCK_UNLIMITED;
	else if (ing_parse_size(v, &x) == 0 && x <= INT64_MAX)
		((C *)cfg)->o.memlock = (int64_t)x;
	else {
		snprintf(why, whylen, "'%.64s' is not bytes (4096, 64K, 1G) or unlimited", v);
		return -EINVAL;
	}
	return 0;
}

static const struct ing_opt opts[] = {
	{ "config", "FILE", ING_OPT_PATH, offsetof(C, config), 0, 0, 0, NULL, NULL,
	  "ingestd's config file (ingestd --config): check the node it\n"
	  "describes (data-dir, pool, hugepages, rdma-dev, lcores,\n"
	  "control-cpu, dataplane, worker-cpus, pool-node, workers,\n"
	  "stripe-min);\n"
	  "flags given here win", NULL, 0 },
	ING_OPT_PATH_(C, "data-dir", o.data_dir, "DIR", "ingestd's data dir (storage checks; an O_DIRECT probe file\n"
		      "is written there and removed)"),
	ING_OPT_CUSTOM_(C, "pool", o.pool_bytes, set_pool, "SPEC", "ingestd's --pool SIZE:COUNT,...: the pool to check memlock,\n"
			"memory and hugepages against (default: ingestd's, 4M:16,16M:8,64M:4)"),
	ING_OPT_CUSTOM_(C, "pool-bytes", o.pool_bytes, set_pool_bytes, "SIZE", "the same as a size (256M, 1G)"),
	ING_OPT_CHOICE_(C, "hugepages", o.hugepages, "auto=-1|on=1|off=0", "as ingestd --hugepages: on needs enough free hugepages,\n"
			"auto falls back to 4 KiB pages, off does not use them"),
	ING_OPT_STR_(C, "rdma-dev", o.rdma_dev, "LIST", "ingestd's rails to check: 'mlx5_0, mlx5_1', 'rxe1@1' (default:\n"
		     "every device with an ACTIVE port and an IPv4 RoCE v2 GID)"),
	ING_OPT_STR_(C, "lcores", o.plan.lcores, "LIST", "ingestd's --lcores: control + dataplane lcores, e.g. 8-10"),
	ING_OPT_CUSTOM_(C, "pool-node", o.plan.pool_node, ing_opt_set_index, "N", "ingestd's --pool-node: NUMA node of the pool"),
	ING_OPT_UINT_(C, "workers", o.plan.n_workers, 1, ING_PLAN_MAX_WORKERS, "ingestd's --workers: persistence workers per pool region\n"
		      "(default 2)"),
	ING_OPT_BOOL_(C, "json", json, "JSON instead of text"),
	ING_OPT_PATH_(C, "sysfs-root", o.sysfs_root, "DIR", "read sysfs there instead of /sys (test fixtures)"),
	ING_OPT_PATH_(C, "procfs-root", o.procfs_root, "DIR", "read procfs there instead of /proc (test fixtures)"),
	ING_OPT_CUSTOM_(C, "memlock", o.memlock, set_memlock, "N|unlimited", "use this memlock limit instead of getrlimit()"),
	ING_OPT_PATH_(C, "topology", o.topology, "FILE", "hwloc XML for the NUMA checks (default: live, $HWLOC_XMLFILE)"),
	/* ingestd's (and ingest-topo's) placement overrides */
	ING_OPT_CUSTOM_(C, "control-cpu", o.plan.control_cpu, ing_opt_set_index, "N", "ingestd's --control-cpu: the control thread's cpu"),
	ING_OPT_STR_(C, "worker-cpus", o.plan.worker_cpus, "LIST", "ingestd's --worker-cpus: pin the persistence workers to LIST"),
	ING_OPT_UINT_(C, "dataplane", o.plan.n_dataplane, 1, ING_PLAN_MAX_LCORES, "ingestd's --dataplane: dataplane lcores per rail (default 1)"),
	ING_OPT_STR_(C, "block-dev", o.plan.block_dev, "NAME", "ingestd's --block-dev: the storage device"),
	ING_OPT_BOOL_(C, "allow-smt", o.plan.allow_smt, "ingestd's --allow-smt: SMT siblings as dataplane lcores"),
	ING_OPT_SIZE_(C, "stripe-min", o.plan.stripe_min, 0, 1ull << 40, "ingestd's --stripe-min (default 8M; 0: off): with it on,\n"
		      "every rail registers every pool region (memlock x regions)"),
	ING_OPT_STR_(C, "tier", tier, "URL", "ingestd's --tier: check the object store (reachable, the\n"
		     "credentials accepted, the bucket there)"),
	ING_OPT_PATH_(C, "tier-credentials", tier_credentials, "FILE", "ingestd's --tier-credentials"),
	ING_OPT_STR_(C, "tier-region", tier_region, "NAME", "ingestd's --tier-region"),
};

static const struct ing_cli cli = {
	.prog = "ingest-doctor",
	.synopsis = "[--config FILE] [options]",
	.summary = "pre-flight checks of an h3000 ingest node, each with its fix",
	.about = "Checks RDMA devices, port state, RoCE v2 GID index and MTU; memlock, memory and\n"
		 "hugepages against the MR pool; the data dir's filesystem, free space and\n"
		 "O_DIRECT; NUMA locality of NIC, disk and cores; CPU governor, isolation, IOMMU.\n"
		 "Prints PASS, WARN or FAIL per check with a one-line fix, then a summary.\n",
	.opts = opts,
	.nopts = sizeof(opts) / sizeof(opts[0]),
	.max_args = 0,
	.notes = "The systemd unit runs 'ingest-doctor --config /etc/h3000/ingestd.conf' before\n"
		 "ingestd: a FAIL keeps a node that cannot work from starting.\n",
	.exit_status = "  0  no check FAILed (WARNs allowed)\n"
		       "  1  at least one check FAILed (each with its fix)\n"
		       "  2  usage error, or a config file ingestd would refuse (FILE:LINE)\n",
};

/* Without --config or --pool the doctor checks the pool ingestd starts with by default, so
 * that its hugepage advice names the pages ingestd's start warning names. */
static void ingestd_default_pool(struct ing_doctor_opts *o)
{
	struct ing_ingestd_opts io;
	struct ing_pool_opts po;
	char why[200];

	ing_ingestd_opts_init(&io);
	ing_pool_opts_init(&po);
	if (!ing_pool_spec_parse(&po, io.pool, why, sizeof(why)))   /* the default: always parses */
		pool_classes(o, &po);
}

/* --config FILE: ingestd's file, read by ingestd's own table, into the doctor's options */
static int read_ingestd_config(struct doctor_cfg *c)
{
	struct ing_ingestd_opts io;
	struct ing_pool_opts po;
	char why[200];

	ing_ingestd_opts_init(&io);
	if (ing_ingestd_opts_read_config_as(cli.prog, c->config, &io))
		return ING_EXIT_USAGE;
	ing_pool_opts_init(&po);
	if (ing_pool_spec_parse(&po, io.pool, why, sizeof(why)))   /* the default: always parses */
		return ing_cli_usage_error(&cli, "%s: pool: %s", c->config, why);
	pool_classes(&c->o, &po);
	c->o.data_dir = io.sink == ING_SINK_FILE ? io.data_dir : NULL;
	c->o.hugepages = io.hugepages;
	c->o.rdma_dev = io.rdma_dev;
	/* every placement option ingestd takes (the rails come from rdma_dev, as checked) */
	ing_ingestd_plan_opts(&io, &c->o.plan);
	c->o.plan.rdma_dev = NULL;
	c->o.plan.data_dir = NULL;
	c->tier = io.tier;
	c->tier_credentials = io.tier_credentials;
	c->tier_region = io.tier_region;
	c->tier_path_style = io.tier_path_style;
	c->tier_timeout_ms = io.tier_timeout_ms;
	return 0;
}

/*
 * tier.store: the store ingestd --tier would upload to answers for the bucket with these
 * credentials. A WARN, never a FAIL: the node ingests without its store (the frames stay
 * local and queued), so a store that is away must not keep it from starting; the fix line
 * says what to do.
 */
static void check_tier(const struct doctor_cfg *c, struct ing_doctor_report *r)
{
	struct ing_s3 s3;
	char why[1024];
	ing_s3_init(&s3);
	if (!c->tier_credentials) {
		ing_doctor_add(r, "tier", "tier.store", ING_CHECK_FAIL,
			       "add tier-credentials = FILE (access_key = ..., secret_key = ..., mode 600)",
			       "%s: no credentials file given (ingestd would refuse to start)", c->tier);
		return;
	}
	if (ing_s3_parse_url(&s3, c->tier, why, sizeof(why)) ||
	    ing_s3_read_credentials(&s3, c->tier_credentials, why, sizeof(why))) {
		ing_doctor_add(r, "tier", "tier.store", ING_CHECK_FAIL, "fix tier / tier-credentials",
			       "%s (ingestd would refuse to start)", why);
		return;
	}
	if (c->tier_region)
		snprintf(s3.region, sizeof(s3.region), "%s", c->tier_region);
	s3.path_style = c->tier_path_style != 0;
	if (c->tier_timeout_ms)
		s3.timeout_ms = c->tier_timeout_ms;
	enum ing_s3_result res = ing_s3_check(&s3, why, sizeof(why));
	if (res == ING_S3_OK)
		ing_doctor_add(r, "tier", "tier.store", ING_CHECK_PASS, NULL,
			       "%s: bucket reachable, credentials accepted", s3.display);
	else
		ing_doctor_add(r, "tier", "tier.store", ING_CHECK_WARN,
			       res == ING_S3_NO_BUCKET ? "create the bucket, or fix tier" :
			       res == ING_S3_DENIED ? "fix the keys in the tier-credentials file, or the user's permissions" :
			       "start the store or fix tier; until then frames stay local and queued",
			       "%s", why);
	explicit_bzero(&s3, sizeof(s3));
}

int main(int argc, char **argv)
{
	static const char *const first[] = { "config", NULL };
	struct doctor_cfg c = { .tier_path_style = 1 };
	int argi, rc;

	ing_doctor_opts_init(&c.o);
	ingestd_default_pool(&c.o);
	/* the file first, so that the flags given here override it */
	if (!ing_cli_parse_only(&cli, argc, argv, &c, first) && c.config &&
	    read_ingestd_config(&c))
		return ING_EXIT_USAGE;
	rc = ing_cli_parse(&cli, argc, argv, &c, &argi);
	if (rc)
		return rc == 1 ? ING_EXIT_OK : rc;

	struct ing_doctor_report *r = calloc(1, sizeof(*r));
	if (!r) {
		fprintf(stderr, "ingest-doctor: out of memory\n");
		return ING_EXIT_FAILURE;
	}
	int fails = ing_doctor_run(&c.o, r);
	if (c.tier) {
		check_tier(&c, r);
		fails = (int)r->n_fail;
	}
	if (c.json) {
		ing_doctor_format_json(r, stdout);
		fputc('\n', stdout);
	} else {
		printf("ingest-doctor %s: %s%ssysfs %s, procfs %s, data dir %s, pool %llu MiB%s\n",
		       ING_VERSION, c.config ? c.config : "", c.config ? ": " : "", c.o.sysfs_root,
		       c.o.procfs_root, c.o.data_dir ? c.o.data_dir : "(none)",
		       (unsigned long long)(c.o.pool_bytes >> 20),
		       c.o.hugepages > 0 ? " on hugepages" : c.o.hugepages == 0 ? " on 4 KiB pages" : "");
		ing_doctor_format_text(r, stdout);
	}
	free(r);
	return fails ? ING_EXIT_FAILURE : ING_EXIT_OK;
}
