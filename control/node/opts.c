/* SPDX-License-Identifier: Apache-2.0 */
/*
 * opts.c - ingestd's options: one table (common/cli.h) serves the command line
 * (--name VALUE), the config file (name = VALUE), --help and the man page; ingestd,
 * ingest-doctor --config and the tests read the same file through it. A new option is one
 * entry here and one field in struct ing_ingestd_opts (opts.h).
 */
#include "common/cli.h"
#include "common/hugepages.h"
#include "common/ident.h"
#include "common/log.h"
#include "common/parse.h"
#include "common/stripe.h"
#include "common/token.h"
#include "control/fleet/fleet.h"
#include "control/node/opts.h"
#include "control/service/service.h"   /* the service's defaults */
#include "dataplane/dataplane.h"
#include "dataplane/rdma/rdma.h"
#include "dataplane/tier/tier.h"
#include "numa/numa.h"

#include <errno.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#define O struct ing_ingestd_opts

void ing_ingestd_opts_init(struct ing_ingestd_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->listen = "127.0.0.1:50051";
	o->data_dir = "./ingest-data";
	o->pool = "4M:16,16M:8,64M:4";
	o->hugepages = -1;
	o->workers = ING_DEFAULT_WORKERS;
	o->worker_nice = ING_DEFAULT_WORKER_NICE;
	o->sink = ING_SINK_FILE;
	o->credits = ING_DEFAULT_CREDITS;
	o->frame_timeout_ms = ING_DEFAULT_FRAME_TIMEOUT_MS;
	o->stripe_min = ING_STRIPE_DEFAULT_MIN;
	o->pool_node = -1;
	o->control_cpu = -1;
	o->ready_fd = -1;
	o->rdma = -1;
	o->rdma_port = ING_RDMA_DEFAULT_PORT;
	o->poll_mode = ING_RDMA_POLL_ADAPTIVE;
	o->rdma_write = ING_RDMA_PUSH_AUTO;
	o->grant_ms = ING_RDMA_DEFAULT_GRANT_MS;
	o->max_sessions = ING_DEFAULT_MAX_SESSIONS;
	o->session_idle_ms = ING_DEFAULT_SESSION_IDLE_MS;
	o->fleet_heartbeat_ms = ING_DEFAULT_FLEET_HEARTBEAT_MS;
	o->fleet_batch = ING_DEFAULT_FLEET_BATCH;
	o->tier_path_style = 1;
	o->tier_parallel = ING_TIER_DEFAULT_PARALLEL;
	o->tier_timeout_ms = ING_S3_DEFAULT_TIMEOUT_MS;
	o->local_retention_ms = -1;
	ing_s3_init(&o->tier_s3);
}

/* host:port or [v6]:port (host may be empty: any), port 0..65535 (0: pick one). */
static bool listen_ok(const char *s)
{
	const char *port;

	if (s[0] == '[') {
		const char *rb = strchr(s, ']');
		if (!rb || rb == s + 1 || rb[1] != ':')
			return false;
		port = rb + 2;
	} else {
		const char *colon = strrchr(s, ':');
		if (!colon)
			return false;
		port = colon + 1;
	}
	if (!*port || strlen(port) > 5 || strspn(port, "0123456789") != strlen(port))
		return false;
	return strtoul(port, NULL, 10) <= 65535;
}

/* ---------------------------------------------------------------- setters of their own */

static int set_listen(const struct ing_opt *d, void *cfg, const char *v, char *why, size_t whylen)
{
	if (!listen_ok(v)) {
		snprintf(why, whylen, "'%.128s' is not host:port or [v6]:port (port 0..65535; 0: any free port)", v);
		return -EINVAL;
	}
	*(const char **)(void *)((char *)cfg + d->off) = v;
	return 0;
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
	((O *)cfg)->pool = v;
	return 0;
}

static int set_sink(const struct ing_opt *d, void *cfg, const char *v, char *why, size_t whylen)
{
	(void)d;
	if (!strcmp(v, "file"))
		((O *)cfg)->sink = ING_SINK_FILE;
	else if (!strcmp(v, "null"))
		((O *)cfg)->sink = ING_SINK_NULL;
	else {
		snprintf(why, whylen, "'%.64s' is not file or null", v);
		return -EINVAL;
	}
	return 0;
}

static int set_pool_node(const struct ing_opt *d, void *cfg, const char *v, char *why, size_t whylen)
{
	uint64_t x;
	(void)d;
	if (ing_parse_u64(v, 1023, &x)) {
		snprintf(why, whylen, "'%.64s' is not a NUMA node number (ingest-topo lists them)", v);
		return -EINVAL;
	}
	((O *)cfg)->pool_node = (int)x;
	return 0;
}

/* rdma-dev: the rails, "mlx5_0, mlx5_1" or "rxe1@1"; "" (a file's "rdma-dev =") unsets it */
static int set_rdma_dev(const struct ing_opt *d, void *cfg, const char *v, char *why, size_t whylen)
{
	struct ing_rail_spec rs[ING_PLAN_MAX_RAILS];
	char r[200];
	(void)d;
	if (ing_rail_list_parse(v, rs, ING_PLAN_MAX_RAILS, r, sizeof(r)) < 0) {
		snprintf(why, whylen, "%s", r);
		return -EINVAL;
	}
	((O *)cfg)->rdma_dev = *v ? v : NULL;
	return 0;
}

/* rdma-addr: one listen address per rail */
static int set_rdma_addr(const struct ing_opt *d, void *cfg, const char *v, char *why, size_t whylen)
{
	char a[ING_PLAN_MAX_RAILS][48], r[200];
	(void)d;
	if (ing_addr_list_parse(v, a, ING_PLAN_MAX_RAILS, r, sizeof(r)) < 0) {
		snprintf(why, whylen, "%s", r);
		return -EINVAL;
	}
	((O *)cfg)->rdma_addr = *v ? v : NULL;
	return 0;
}

/* worker-cpus: a cpu list ("2-3,10-11"); whether the cpus exist is the plan's check */
static int set_worker_cpus(const struct ing_opt *d, void *cfg, const char *v, char *why, size_t whylen)
{
	int cpus[ING_PLAN_MAX_WORKERS];
	(void)d;
	if (*v && ing_cpulist_parse(v, cpus, ING_PLAN_MAX_WORKERS) < 0) {
		snprintf(why, whylen, "'%.64s' is not a cpu list of at most %d cpus (\"2-3,10-11\", no "
			 "duplicates)", v, ING_PLAN_MAX_WORKERS);
		return -EINVAL;
	}
	((O *)cfg)->worker_cpus = *v ? v : NULL;
	return 0;
}

static int set_log_level(const struct ing_opt *d, void *cfg, const char *v, char *why, size_t whylen)
{
	enum ing_log_level l;
	(void)d;
	if (ing_log_parse_level(v, &l)) {
		snprintf(why, whylen, "'%.64s' is not err, warn, info or debug", v);
		return -EINVAL;
	}
	((O *)cfg)->log_level = v;
	return 0;
}

static int set_log_format(const struct ing_opt *d, void *cfg, const char *v, char *why, size_t whylen)
{
	(void)d;
	if (ing_log_parse_format(v, &((O *)cfg)->log_format)) {
		snprintf(why, whylen, "'%.64s' is not text or json", v);
		return -EINVAL;
	}
	return 0;
}

static int set_ready_fd(const struct ing_opt *d, void *cfg, const char *v, char *why, size_t whylen)
{
	uint64_t x;
	(void)d;
	if (ing_parse_u64(v, 65535, &x) || x < 3) {
		snprintf(why, whylen, "'%.64s' is not a file descriptor >= 3", v);
		return -EINVAL;
	}
	if (fcntl((int)x, F_GETFD) < 0) {
		snprintf(why, whylen, "'%.64s' is not an open file descriptor", v);
		return -EINVAL;
	}
	((O *)cfg)->ready_fd = (int)x;
	return 0;
}

static int set_persist_ring(const struct ing_opt *d, void *cfg, const char *v, char *why,
			    size_t whylen)
{
	uint64_t x;
	(void)d;
	if (ing_parse_u64(v, 1u << 20, &x) || x < 2 || (x & (x - 1))) {
		snprintf(why, whylen, "'%.64s' is not a power of 2 in 2..1048576", v);
		return -EINVAL;
	}
	((O *)cfg)->persist_ring = (unsigned)x;
	return 0;
}

static int set_poll_mode(const struct ing_opt *d, void *cfg, const char *v, char *why, size_t whylen)
{
	(void)d;
	if (!strcasecmp(v, "busy")) {
		((O *)cfg)->poll_mode = ING_RDMA_POLL_BUSY;
	} else if (!strcasecmp(v, "adaptive")) {
		((O *)cfg)->poll_mode = ING_RDMA_POLL_ADAPTIVE;
	} else {
		snprintf(why, whylen, "'%.64s' is not busy or adaptive", v);
		return -EINVAL;
	}
	return 0;
}

static int set_rdma_write(const struct ing_opt *d, void *cfg, const char *v, char *why, size_t whylen)
{
	/* enum ing_rdma_push order (dataplane/rdma/rdma.h) */
	static const char *const names[] = { "auto", "mw", "mr", "off" };
	(void)d;
	for (unsigned i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcasecmp(v, names[i])) {
			((O *)cfg)->rdma_write = (enum ing_rdma_push)i;
			return 0;
		}
	snprintf(why, whylen, "'%.64s' is not auto, mw, mr or off", v);
	return -EINVAL;
}

static int set_node_id(const struct ing_opt *d, void *cfg, const char *v, char *why, size_t whylen)
{
	size_t n = strlen(v);
	(void)d;
	if (n == 0 || n > ING_FLEET_ID_MAX || ing_id_check(v, n)) {
		snprintf(why, whylen, "a node id is 1..%d bytes of UTF-8 without control characters",
			 ING_FLEET_ID_MAX);
		return -EINVAL;
	}
	((O *)cfg)->node_id = v;
	return 0;
}

static int set_advertise(const struct ing_opt *d, void *cfg, const char *v, char *why, size_t whylen)
{
	(void)d;
	if (!*v) {
		((O *)cfg)->advertise = NULL;
		return 0;
	}
	if (!listen_ok(v) || strlen(v) > ING_FLEET_ADDR_MAX) {
		snprintf(why, whylen, "'%.128s' is not host:port or [v6]:port", v);
		return -EINVAL;
	}
	((O *)cfg)->advertise = v;
	return 0;
}

static int set_fleet_peers(const struct ing_opt *d, void *cfg, const char *v, char *why,
			   size_t whylen)
{
	static struct ing_fleet_member m[ING_FLEET_MAX_MEMBERS];
	unsigned n;
	(void)d;
	if (!*v) {
		((O *)cfg)->fleet_peers = NULL;
		return 0;
	}
	if (ing_fleet_parse_peers(v, m, ING_FLEET_MAX_MEMBERS, &n, why, whylen))
		return -EINVAL;
	((O *)cfg)->fleet_peers = v;
	return 0;
}

/* --drain (no value: on), --drain=off; "drain = on|off" in a config file */
static int set_drain(const struct ing_opt *d, void *cfg, const char *v, char *why, size_t whylen)
{
	bool *f = &((O *)cfg)->drain;
	(void)d;
	if (!v || !strcasecmp(v, "on") || !strcasecmp(v, "yes") || !strcasecmp(v, "true") ||
	    !strcmp(v, "1"))
		*f = true;
	else if (!strcasecmp(v, "off") || !strcasecmp(v, "no") || !strcasecmp(v, "false") ||
		 !strcmp(v, "0"))
		*f = false;
	else {
		snprintf(why, whylen, "'%.64s' is not on or off", v);
		return -EINVAL;
	}
	return 0;
}

/* ---------------------------------------------------------------- object store tier */

/* --local-retention: a duration with its unit (7d, 12h, 0s), or off */
static int set_retention(const struct ing_opt *d, void *cfg, const char *v, char *why, size_t whylen)
{
	uint64_t ms;
	(void)d;
	if (!strcmp(v, "off")) {
		((O *)cfg)->local_retention_ms = -1;
		return 0;
	}
	if (ing_parse_duration_ms(v, 0, 3650ull * 86400000, &ms)) {
		snprintf(why, whylen, "'%.64s' is not a duration with its unit (0s, 12h, 7d; at most 3650d) "
			 "or off", v);
		return -EINVAL;
	}
	((O *)cfg)->local_retention_ms = (int64_t)ms;
	return 0;
}

/* --local-high-water: "80%" of the data dir's file system, or a size of local frames ("500G") */
static int set_high_water(const struct ing_opt *d, void *cfg, const char *v, char *why, size_t whylen)
{
	O *o = cfg;
	size_t n = strlen(v);
	uint64_t x;
	(void)d;
	o->local_high_water_pct = 0;
	o->local_high_water_bytes = 0;
	if (!strcmp(v, "off"))
		return 0;
	if (n > 1 && v[n - 1] == '%') {
		char num[8];
		if (n - 1 >= sizeof(num) || (memcpy(num, v, n - 1), num[n - 1] = 0,
					      ing_parse_u64(num, 99, &x)) || x < 1) {
			snprintf(why, whylen, "'%.64s' is not a percentage of 1%%..99%%", v);
			return -EINVAL;
		}
		o->local_high_water_pct = (unsigned)x;
		return 0;
	}
	if (ing_parse_size(v, &x) || x < (1ull << 20)) {
		snprintf(why, whylen, "'%.64s' is not a percentage (80%%) or a size of at least 1M (500G)", v);
		return -EINVAL;
	}
	o->local_high_water_bytes = x;
	return 0;
}

static int set_region(const struct ing_opt *d, void *cfg, const char *v, char *why, size_t whylen)
{
	O *o = cfg;
	size_t n = strlen(v);
	(void)d;
	if (!n || n >= sizeof(o->tier_s3.region) ||
	    strspn(v, "abcdefghijklmnopqrstuvwxyz0123456789-_") != n) {
		snprintf(why, whylen, "'%.64s' is not a region name (e.g. us-east-1)", v);
		return -EINVAL;
	}
	o->tier_region = v;
	return 0;
}

/* The tier flags as a whole (after the file and every flag): 0, or 2 with one line printed. */
static int tier_finish(O *o)
{
	const struct ing_cli *c = &ing_ingestd_cli;
	char why[PATH_MAX + 160];

	if (!o->tier) {
		const char *lone = o->tier_credentials ? "--tier-credentials" :
				   o->local_retention_ms >= 0 ? "--local-retention" :
				   o->local_high_water_pct || o->local_high_water_bytes ? "--local-high-water" :
				   NULL;
		if (lone)
			return ing_cli_usage_error(c, "%s needs --tier s3://HOST:PORT/BUCKET (a local copy goes "
						   "only once the object store holds the frame)", lone);
		return 0;
	}
	if (o->sink != ING_SINK_FILE)
		return ing_cli_usage_error(c, "--tier needs --sink file (with --sink null nothing is stored)");
	if (!strncmp(o->tier, "http://", 7))
		return ing_cli_usage_error(c, "--tier '%s': the scheme of --tier is s3:// (plain HTTP to the "
					   "store) or https:// (TLS): --tier s3://%s", o->tier, o->tier + 7);
	if (ing_s3_parse_url(&o->tier_s3, o->tier, why, sizeof(why)))
		return ing_cli_usage_error(c, "--tier: %s", why);
	if (!o->tier_credentials)
		return ing_cli_usage_error(c, "--tier needs --tier-credentials FILE ('access_key = ...' and "
					   "'secret_key = ...' lines, mode 600)");
	if (ing_s3_read_credentials(&o->tier_s3, o->tier_credentials, why, sizeof(why)))
		return ing_cli_usage_error(c, "--tier-credentials: '%s': %s", o->tier_credentials, why);
	if (o->tier_region)
		snprintf(o->tier_s3.region, sizeof(o->tier_s3.region), "%s", o->tier_region);
	o->tier_s3.path_style = o->tier_path_style != 0;
	o->tier_s3.timeout_ms = o->tier_timeout_ms;
	return 0;
}

/* ---------------------------------------------------------------- the table */

#define LISTEN(name, f, help) ING_OPT_CUSTOM_(O, name, f, set_listen, "ADDR", help)
/* a string whose empty value ("name =" in the file) means the default */
#define STR(name, f, arg, help) \
	{ name, arg, ING_OPT_STR, ING_OPT_FIELD(O, f, const char *), 0, 0, 0, NULL, NULL, help, NULL, \
	  ING_OPTF_EMPTY_NULL }
#define TRISTATE(name, f, help) ING_OPT_CHOICE_(O, name, f, "auto=-1|on=1|off=0", help)
#define SECS(name, f, lo, hi, help) ING_OPT_DURATION_(O, name, f, lo, hi, help)
#define MS_ALIAS(name, f, lo, hi, to) ING_OPT_MS_ALIAS_(O, name, f, lo, hi, to)
#define S 1000u
#define DAY 86400000u

static const struct ing_opt opt_table[] = {
	ING_OPT_GROUP_("Configuration"),
	{ "config", "FILE", ING_OPT_PATH, offsetof(O, config), 0, 0, 0, NULL, NULL,
	  "read settings from FILE: one 'name = value' a line, the names\n"
	  "are the flags below without '--'; flags given here win", NULL, ING_OPTF_NOCONF },
	{ "check-config", NULL, ING_OPT_BOOL, ING_OPT_FIELD(O, check_only, bool), 0, 0, 0, NULL,
	  NULL, "check the flags, the config file and that this machine can\n"
	  "run them (pool vs memory and max-frame, data dir, TLS key\n"
	  "against its certificate, placement), then exit", NULL, ING_OPTF_NOCONF },
	{ "print-config", NULL, ING_OPT_BOOL, ING_OPT_FIELD(O, print_only, bool), 0, 0, 0, NULL,
	  NULL, "print the effective settings (defaults, the config file and\n"
	  "the flags merged; secrets redacted) as a config file, then\n"
	  "exit", NULL, ING_OPTF_NOCONF },
	ING_OPT_GROUP_("The node"),
	LISTEN("listen", listen, "gRPC listen address (default 127.0.0.1:50051; port 0: any free)"),
	ING_OPT_PATH_(O, "data-dir", data_dir, "DIR", "frames/ and catalog.db go here (default ./ingest-data)"),
	ING_OPT_CUSTOM_(O, "pool", pool, set_pool, "SPEC", "MR pool size classes SIZE:COUNT,... (default\n"
			"4M:16,16M:8,64M:4: 448 MiB); it must fit in memory"),
	TRISTATE("hugepages", hugepages, "the pool on hugepages (default auto: when enough are free on its\n"
		 "NUMA node, else 4 KiB pages and one warning; on: required; off: never)"),
	ING_OPT_UINT_(O, "workers", workers, 1, ING_PLAN_MAX_WORKERS, "persistence workers per pool region (one region per NUMA\n"
		      "node that carries a rail)"),
	ING_OPT_UINT_(O, "worker-nice", worker_nice, 0, 19, "persistence workers run SCHED_BATCH at this nice level,\n"
		      "below control and the RDMA pollers (default 5; 0: normal)"),
	ING_OPT_CUSTOM_(O, "sink", sink, set_sink, "file|null", "write frames to files (default), or drop them (benchmarks)"),
	ING_OPT_UINT_(O, "credits", credits, 1, 65536, "most frames in flight per session"),
	ING_OPT_SIZE_(O, "max-frame", max_frame, 1, 1ull << 40, "largest frame accepted (default: the largest pool slot)"),
	SECS("frame-timeout", frame_timeout_ms, 1 * S, DAY, "a frame must be complete this long after its first byte"),
	ING_OPT_SIZE_(O, "stripe-min", stripe_min, 0, 1ull << 40, "take frames of this size or more striped over every rail\n"
		      "of a producer (each rail also registers the other rails'\n"
		      "pool regions: memlock rails x regions x pool); default 8M;\n"
		      "0: off (each rail registers its own region only)"),
	ING_OPT_GROUP_("Placement and RDMA"),
	STR("lcores", lcores, "LIST", "EAL lcores: control first, then dataplane; each serves the\n"
		     "rail on its node (default: the plan, ingest-topo shows it)"),
	ING_OPT_CUSTOM_(O, "pool-node", pool_node, set_pool_node, "N", "one pool region, on this NUMA node, for every rail (default:\n"
			"the plan: one region per node that carries a rail)"),
	ING_OPT_CUSTOM_(O, "control-cpu", control_cpu, ing_opt_set_index, "N", "the control thread's cpu, EAL's main lcore (default: the\n"
			"plan)"),
	ING_OPT_UINT_(O, "dataplane", dataplane, 1, ING_PLAN_MAX_LCORES, "dataplane lcores per rail (default 1; --lcores wins)"),
	ING_OPT_CUSTOM_(O, "worker-cpus", worker_cpus, set_worker_cpus, "LIST", "pin the persistence workers: each pool region's take the\n"
			"listed cpus on its node, round-robin (default: the plan's\n"
			"free cores)"),
	ING_OPT_CHOICE_(O, "allow-smt", allow_smt, "on=1|off=0", "SMT siblings as dataplane lcores once the physical cores\n"
			"are taken (default off)"),
	STR("block-dev", block_dev, "NAME", "the data disk the plan places around (default: the data\n"
	    "dir's)"),
	ING_OPT_CUSTOM_(O, "rdma-dev", rdma_dev, set_rdma_dev, "LIST", "RDMA devices, one rail each: 'mlx5_0, mlx5_1'; 'rxe1@1'\n"
			"places a device on NUMA node 1 where the kernel does not\n"
			"know its node (default: every ACTIVE device with an IPv4\n"
			"address)"),
	TRISTATE("rdma", rdma, "RDMA data path (auto: on when a device and an rdma_cm\n"
		 "listener work, else the gRPC stream only, logged)"),
	ING_OPT_CUSTOM_(O, "rdma-addr", rdma_addr, set_rdma_addr, "LIST", "rdma_cm listen addresses, one per rail (default: each\n"
			"rail's netdev's first IPv4 address)"),
	ING_OPT_UINT_(O, "rdma-port", rdma_port, 0, 65535, "rdma_cm listen port of every rail"),
	ING_OPT_CUSTOM_(O, "poll-mode", poll_mode, set_poll_mode, "MODE", "dataplane lcores: adaptive (default) or busy"),
	ING_OPT_CUSTOM_(O, "rdma-write", rdma_write, set_rdma_write, "MODE",
			"RDMA WRITE push for producers that ask for it: auto\n"
			"(default: memory windows where the device has type 2, else\n"
			"the pool MR), mw, mr, off"),
	SECS("grant-timeout", grant_ms, 100, 3600 * S, "push: a granted slot not written within this fails its frame"),
	ING_OPT_GROUP_("Sessions"),
	ING_OPT_UINT_(O, "max-sessions", max_sessions, 1, 1u << 20, "session table size (default 4096)"),
	SECS("session-idle", session_idle_ms, 1 * S, 7 * DAY, "a negotiated session with no stream expires after this"),
	ING_OPT_CUSTOM_(O, "persist-ring", persist_ring, set_persist_ring, "N",
			"frames a persistence worker's mailbox holds, a power of 2\n"
			"(default 4096; never fewer than the pool's slots, so a\n"
			"complete frame always has room)"),
	ING_OPT_GROUP_("Logs and start-up"),
	ING_OPT_CUSTOM_(O, "log-level", log_level, set_log_level, "LEVEL", "err|warn|info|debug (default info)"),
	ING_OPT_CUSTOM_(O, "log-format", log_format, set_log_format, "FMT",
			"text (default) or json: one JSON object per line (journald, Loki)"),
	STR("port-file", port_file, "PATH", "write the bound TCP port to PATH once listening"),
	ING_OPT_CUSTOM_(O, "ready-fd", ready_fd, set_ready_fd, "N", "write \"READY <port>\\n\" to fd N once serving, then close it"),
	ING_OPT_GROUP_("Security"),
	STR("tls-cert", tls_cert, "PEM", "TLS certificate (with --tls-key: TLS + ALPN h2, else h2c)"),
	STR("tls-key", tls_key, "PEM", "TLS private key"),
	ING_OPT_PATH_(O, "auth-token-file", auth_token_file, "PATH", "require this shared secret (one line, 16..256 printable\n"
		      "characters, mode 600): Negotiate authToken, a negotiated\n"
		      "session for streams, 'authorization: Bearer' for Stats"),
	ING_OPT_PATH_(O, "tls-client-ca", tls_client_ca, "PEM", "mTLS: require a client certificate signed by this CA; its\n"
		      "subject is the client's identity (logs, session binding)"),
	/* limits: fair sharing under abuse (docs/ARCHITECTURE.md, "Limits") */
	ING_OPT_GROUP_("Limits"),
	SECS("handshake-timeout", handshake_timeout_ms, 10, 600 * S, "close a connection without TLS handshake, HTTP/2 preface\n"
	     "and SETTINGS within this (default 5s)"),
	SECS("idle-timeout", idle_timeout_ms, 1 * S, DAY, "close a connection with no open stream after this (default 60s)"),
	ING_OPT_UINT_(O, "max-connections", max_connections, 1, 65536, "connections in total (default 256; when full, the one idle\n"
		      "longest is evicted)"),
	ING_OPT_UINT_(O, "max-conns-per-peer", max_conns_per_peer, 1, 65536, "connections per client address (default 32)"),
	ING_OPT_UINT_(O, "health-reserve", health_reserve, 1, 1024, "extra connections for Health/Check only when all are busy\n"
		      "(default 8)"),
	ING_OPT_UINT_(O, "max-sessions-per-peer", max_sessions_per_peer, 1, 1u << 20, "sessions per client address (default 512: two\n"
		      "connections full of streams, each stream without a session\n"
		      "takes one)"),
	ING_OPT_UINT_(O, "max-slots-per-peer", max_slots_per_peer, 1, 1u << 20, "pool slots per client address while another address waits\n"
		      "for one (default: 3/4 of the pool)"),
	SECS("slot-stall", slot_stall_ms, 10, DAY, "a frame whose bytes stop this long fails (retryable) and\n"
	     "frees its slot (default 5s)"),
	ING_OPT_UINT_(O, "auth-fail-burst", auth_fail_burst, 1, 1000000, "failed authentications per address before back-off (default\n"
		      "20, one more each second)"),
	SECS("auth-backoff-max", auth_backoff_max_ms, 1 * S, DAY, "longest back-off after failed authentication (default 60s)"),
	ING_OPT_GROUP_("Metrics"),
	LISTEN("metrics-listen", metrics_listen, "serve Prometheus metrics at http://ADDR/metrics (default: off)"),
	STR("metrics-port-file", metrics_port_file, "PATH", "write the bound metrics port to PATH once listening"),
	/* fleet: identity, membership, catalog export (docs/FLEET_NODE.md) */
	ING_OPT_GROUP_("Fleet"),
	ING_OPT_CUSTOM_(O, "node-id", node_id, set_node_id, "ID", "this node's id in the fleet, what producers hash wafers\n"
			"over (default: the advertised address)"),
	ING_OPT_CUSTOM_(O, "advertise", advertise, set_advertise, "HOST:PORT", "address producers dial for this node (default: the listen\n"
			"address with the bound port; listening on 0.0.0.0 or [::],\n"
			"the default route's interface address, with a warning)"),
	STR("fleet-db", fleet_db, "CONNINFO", "fleet catalog in PostgreSQL (libpq conninfo, e.g.\n"
		     "'host=db dbname=fleet'): export catalog rows, heartbeat the\n"
		     "membership (default: off)"),
	ING_OPT_CUSTOM_(O, "fleet-peers", fleet_peers, set_fleet_peers, "LIST", "static membership id=host:port,... answered by Members\n"
			"when there is no fleet catalog (default: none)"),
	SECS("fleet-heartbeat", fleet_heartbeat_ms, 50, 600 * S, "membership heartbeat period; a member silent for 3 periods\n"
	     "is DOWN"),
	ING_OPT_UINT_(O, "fleet-batch", fleet_batch, 1, 5000, "catalog rows per export transaction"),
	{ "drain", "[=on|off]", ING_OPT_CUSTOM, offsetof(O, drain), 0, 0, 0, NULL, set_drain,
	  "start DRAINING: producers send no new wafers here (SIGUSR2\n"
	  "toggles ACTIVE/DRAINING at run time)", NULL, ING_OPTF_OPTIONAL },
	/* object store tier: a verified second copy in S3, a bounded local disk (README) */
	ING_OPT_GROUP_("Object store tier"),
	ING_OPT_STR_(O, "tier", tier, "URL", "after DURABLE, upload every frame to s3://HOST:PORT/BUCKET\n"
		     "[/PREFIX] (an S3 store such as Ceph radosgw; https:// for\n"
		     "TLS) (default: off)"),
	ING_OPT_PATH_(O, "tier-credentials", tier_credentials, "FILE", "the store's keys: 'access_key = ...' and\n"
		      "'secret_key = ...' lines (or aws_access_key_id and\n"
		      "aws_secret_access_key), mode 600"),
	ING_OPT_CUSTOM_(O, "tier-region", tier_region, set_region, "NAME", "SigV4 region of the store (default us-east-1)"),
	ING_OPT_CHOICE_(O, "tier-path-style", tier_path_style, "on=1|off=0",
			"requests to http://host/bucket/key (on, the default) or to\n"
			"http://bucket.host/key (off: virtual-hosted)"),
	ING_OPT_UINT_(O, "tier-parallel", tier_parallel, 1, ING_TIER_MAX_PARALLEL, "uploads at once"),
	SECS("tier-timeout", tier_timeout_ms, 1 * S, 3600 * S, "a request to the store that makes no progress this long\n"
	     "fails and is retried"),
	ING_OPT_CUSTOM_(O, "local-retention", local_retention_ms, set_retention, "DURATION",
			"delete a frame's local copy this long after DURABLE, once\n"
			"its object is verified in the store (7d; 0s: at once;\n"
			"default off: keep every local copy)"),
	ING_OPT_CUSTOM_(O, "local-high-water", local_high_water_pct, set_high_water, "MARK",
			"bound the local disk: N% of the data dir's file system, or a\n"
			"size of local frames (500G); above 90% of the mark verified\n"
			"copies go, oldest first (unless --local-retention keeps\n"
			"them); at the mark new frames are refused NO_SPACE,\n"
			"retryable (default off)"),
	/* old spellings: a bare number is milliseconds, as it always was */
	MS_ALIAS("grant-ms", grant_ms, 100, 3600 * S, "grant-timeout"),
	MS_ALIAS("handshake-timeout-ms", handshake_timeout_ms, 10, 600 * S, "handshake-timeout"),
	MS_ALIAS("slot-stall-ms", slot_stall_ms, 10, DAY, "slot-stall"),
	MS_ALIAS("fleet-heartbeat-ms", fleet_heartbeat_ms, 50, 600 * S, "fleet-heartbeat"),
};

static void defaults(void *cfg)
{
	ing_ingestd_opts_init(cfg);
}

const struct ing_cli ing_ingestd_cli = {
	.prog = "ingestd",
	.synopsis = "[--config FILE] [options]",
	.summary = "the h3000 ingest node: receives frames over gRPC and RDMA, stores them durably",
	.about = "Serves h3000.RDMASvc (Negotiate, ControlStream, PushFrames, Stats, Members) and\n"
		 "grpc.health.v1 on one control thread; frames arrive by RDMA READ (pull), RDMA\n"
		 "WRITE (push) or the gRPC stream, land in a registered pool and are written to\n"
		 "<data-dir>/frames/ with a SQLite catalog before the DURABLE ack.\n",
	.opts = opt_table,
	.nopts = sizeof(opt_table) / sizeof(opt_table[0]),
	.max_args = 0,
	.init = defaults,
	.cfg_size = sizeof(struct ing_ingestd_opts),
	.notes = "Signals: SIGTERM or SIGINT drains (health NOT_SERVING, up to 10 s for the frames in\n"
		 "flight to become durable) and stops; a second one stops at once. SIGHUP reloads\n"
		 "the config file (log level, auth token, TLS certificate, tier credentials,\n"
		 "limits; connections stay; a key that needs a restart is logged and kept; a bad\n"
		 "file keeps the running configuration). SIGUSR2 toggles ACTIVE/DRAINING in the\n"
		 "fleet.\n",
	.exit_status = "  0  stopped cleanly (every frame in flight became durable and was acked)\n"
		       "  1  runtime failure (data dir, port in use, EAL, pool, disk: logged)\n"
		       "  2  usage or configuration error (one line naming the flag or FILE:LINE)\n"
		       "  3  stopped, but frames in flight at the drain deadline were failed (not durable)\n",
};

/* ---------------------------------------------------------------- parsing */

/* Config file text: the values point into it for the life of the process. */
static char conf_text[64 << 10];

int ing_ingestd_opts_read_config(const char *path, struct ing_ingestd_opts *o)
{
	return ing_ingestd_opts_read_config_as(ing_ingestd_cli.prog, path, o);
}

static int read_config_buf(const char *prog, const char *path, struct ing_ingestd_opts *o, char *buf,
			   size_t cap)
{
	struct ing_cli ic = ing_ingestd_cli;
	ic.prog = prog;
	o->config = path;
	return ing_cli_read_config(&ic, path, buf, cap, o);
}

int ing_ingestd_opts_read_config_as(const char *prog, const char *path, struct ing_ingestd_opts *o)
{
	return read_config_buf(prog, path, o, conf_text, sizeof(conf_text));
}

/* A file the daemon will need later (TLS): readable now, or a usage error naming it. */
static int readable_or_usage(const char *flag, const char *path)
{
	if (access(path, R_OK) == 0)
		return 0;
	return ing_cli_usage_error(&ing_ingestd_cli, "%s: '%s': %s", flag, path, strerror(errno));
}

/* The checks between options, after the file and the flags: 0 or 2 (one line printed). */
int ing_ingestd_opts_finish(struct ing_ingestd_opts *o)
{
	const struct ing_cli *c = &ing_ingestd_cli;

	if (!!o->tls_cert != !!o->tls_key)
		return ing_cli_usage_error(c, "--tls-cert and --tls-key go together: give both, or "
					   "neither for cleartext h2c");
	if (o->tls_cert && (readable_or_usage("--tls-cert", o->tls_cert) ||
			    readable_or_usage("--tls-key", o->tls_key)))
		return ING_EXIT_USAGE;
	if (o->tls_client_ca && !o->tls_cert)
		return ing_cli_usage_error(c, "--tls-client-ca needs --tls-cert and --tls-key (mTLS is TLS)");
	if (o->tls_client_ca && readable_or_usage("--tls-client-ca", o->tls_client_ca))
		return ING_EXIT_USAGE;
	if (o->auth_token_file) {
		char awhy[PATH_MAX + 96];
		if (ing_token_file_read(o->auth_token_file, o->auth_token, sizeof(o->auth_token), awhy,
					sizeof(awhy)))
			return ing_cli_usage_error(c, "--auth-token-file: '%s': %s", o->auth_token_file, awhy);
	}
	return tier_finish(o);
}

int ing_ingestd_opts_parse_buf(int argc, char **argv, struct ing_ingestd_opts *o, char *buf,
			       size_t cap)
{
	static const char *const first[] = { "config", NULL };
	int argi, rc;

	o->argc = argc;
	o->argv = argv;
	/* pass 1: --config only, so that every flag overrides the file (--help wins over both) */
	if (!ing_cli_parse_only(&ing_ingestd_cli, argc, argv, o, first) && o->config &&
	    read_config_buf(ing_ingestd_cli.prog, o->config, o, buf, cap))
		return ING_EXIT_USAGE;
	rc = ing_cli_parse(&ing_ingestd_cli, argc, argv, o, &argi);
	if (rc)
		return rc;
	return ing_ingestd_opts_finish(o);
}

int ing_ingestd_opts_parse(int argc, char **argv, struct ing_ingestd_opts *o)
{
	return ing_ingestd_opts_parse_buf(argc, argv, o, conf_text, sizeof(conf_text));
}

/* ---------------------------------------------------------------- --print-config */

/* fleet-db's conninfo without its password= value */
static void redact_conninfo(const char *v, char *buf, size_t len)
{
	const char *p = strstr(v, "password");
	size_t n = 0;

	if (!p) {
		snprintf(buf, len, "%s", v);
		return;
	}
	while (p) {
		const char *eq = p + 8;
		while (*eq == ' ')
			eq++;
		if (*eq != '=') {
			p = strstr(p + 8, "password");
			continue;
		}
		eq++;
		while (*eq == ' ')
			eq++;
		const char *end = eq;
		if (*end == '\'') {
			for (end++; *end && *end != '\''; end++)
				if (*end == '\\' && end[1])
					end++;
			if (*end)
				end++;
		} else {
			while (*end && *end != ' ')
				end++;
		}
		n += (size_t)snprintf(buf + n, n < len ? len - n : 0, "%.*s<redacted>", (int)(eq - v), v);
		v = end;
		p = strstr(v, "password");
	}
	snprintf(buf + (n < len ? n : len - 1), n < len ? len - n : 1, "%s", v);
}

int ing_ingestd_opt_value(const struct ing_opt *d, const struct ing_ingestd_opts *o, bool redact,
			  char *buf, size_t len)
{
	int rc = ing_cli_value(d, o, buf, len);
	if (rc != -ENOTSUP) {
		if (rc == 0 && redact && !strcmp(d->name, "fleet-db")) {
			char tmp[1024];
			redact_conninfo(buf, tmp, sizeof(tmp));
			snprintf(buf, len, "%s", tmp);
		}
		return rc;
	}
	/* the CUSTOM ones, by the field each setter fills */
	const char *name = d->name;
	const char *str = NULL;
	if (!strcmp(name, "listen"))
		str = o->listen;
	else if (!strcmp(name, "metrics-listen"))
		str = o->metrics_listen;
	else if (!strcmp(name, "pool"))
		str = o->pool;
	else if (!strcmp(name, "worker-cpus"))
		str = o->worker_cpus;
	else if (!strcmp(name, "rdma-dev"))
		str = o->rdma_dev;
	else if (!strcmp(name, "rdma-addr"))
		str = o->rdma_addr;
	else if (!strcmp(name, "log-level"))
		str = o->log_level;
	else if (!strcmp(name, "node-id"))
		str = o->node_id;
	else if (!strcmp(name, "advertise"))
		str = o->advertise;
	else if (!strcmp(name, "fleet-peers"))
		str = o->fleet_peers;
	else if (!strcmp(name, "tier-region"))
		str = o->tier_region;
	else if (!strcmp(name, "sink"))
		str = o->sink == ING_SINK_NULL ? "null" : "file";
	else if (!strcmp(name, "poll-mode"))
		str = o->poll_mode == ING_RDMA_POLL_BUSY ? "busy" : "adaptive";
	else if (!strcmp(name, "rdma-write")) {
		static const char *const names[] = { "auto", "mw", "mr", "off" };
		str = (unsigned)o->rdma_write < 4 ? names[o->rdma_write] : "auto";
	} else if (!strcmp(name, "log-format"))
		str = o->log_format == ING_LOG_JSON ? "json" : "text";
	else if (!strcmp(name, "drain"))
		str = o->drain ? "on" : "off";
	else if (!strcmp(name, "pool-node") || !strcmp(name, "control-cpu") || !strcmp(name, "ready-fd")) {
		int v = !strcmp(name, "pool-node") ? o->pool_node :
			!strcmp(name, "control-cpu") ? o->control_cpu : o->ready_fd;
		if (v < 0)
			return -ENOENT;
		snprintf(buf, len, "%d", v);
		return 0;
	} else if (!strcmp(name, "persist-ring")) {
		if (!o->persist_ring)
			return -ENOENT;
		snprintf(buf, len, "%u", o->persist_ring);
		return 0;
	} else if (!strcmp(name, "local-retention")) {
		if (o->local_retention_ms < 0)
			str = "off";
		else
			return ing_fmt_duration((uint64_t)o->local_retention_ms, buf, len), 0;
	} else if (!strcmp(name, "local-high-water")) {
		if (o->local_high_water_pct)
			snprintf(buf, len, "%u%%", o->local_high_water_pct);
		else if (o->local_high_water_bytes)
			ing_fmt_size(o->local_high_water_bytes, buf, len);
		else
			snprintf(buf, len, "off");
		return 0;
	} else
		return -ENOTSUP;   /* a new CUSTOM option: add it here */
	if (!str)
		return -ENOENT;
	snprintf(buf, len, "%s", str);
	return 0;
}

/* a value as a config file reads it back: quoted when it has a '#' or spaces at its ends */
static void print_value(FILE *f, const char *v)
{
	size_t n = strlen(v);
	if (!strchr(v, '#') && !strchr(v, '"') && n && v[0] != ' ' && v[n - 1] != ' ')
		fprintf(f, "%s", v);
	else
		fprintf(f, "\"%s\"", v);
}

/* a number left at 0, which means "the built-in default" (limits, max-frame), not 0 */
static bool zero_means_default(const struct ing_opt *d, const struct ing_ingestd_opts *o)
{
	const void *field = (const char *)o + d->off;
	switch (d->type) {
	case ING_OPT_UINT:
	case ING_OPT_DURATION:
		return *(const unsigned *)field == 0;
	case ING_OPT_SIZE:
		return *(const uint64_t *)field == 0;
	default:
		return false;
	}
}

void ing_ingestd_print_config(const struct ing_ingestd_opts *o, FILE *f)
{
	const struct ing_cli *c = &ing_ingestd_cli;
	char v[2048];

	fprintf(f, "# ingestd %s: effective settings (defaults, %s%s%sflags merged)\n", ING_VERSION,
		o->config ? "the config file " : "", o->config ? o->config : "", o->config ? ", " : "");
	const char *group = NULL;   /* a section's title, printed before its first setting */
	for (unsigned i = 0; i < c->nopts; i++) {
		const struct ing_opt *d = &c->opts[i];
		if (d->type == ING_OPT_GROUP) {
			group = d->help;
			continue;
		}
		if (!d->help || (d->flags & ING_OPTF_NOCONF))
			continue;   /* old spellings; command-line only */
		if (group) {
			fprintf(f, "\n# %s\n", group);
			group = NULL;
		}
		int rc = ing_ingestd_opt_value(d, o, true, v, sizeof(v));
		if (rc == 0 && !strcmp(d->name, "ready-fd"))
			rc = -ENOENT;   /* an fd of this process: meaningless in a file */
		if (rc == 0 && !strcmp(d->name, "fleet-db") && strstr(v, "<redacted>")) {
			fprintf(f, "# fleet-db = %s   (password redacted: write it back)\n", v);
			continue;
		}
		if (rc == 0 && zero_means_default(d, o))
			rc = -ENOENT;
		if (rc == 0) {
			fprintf(f, "%s = ", d->name);
			print_value(f, v);
			fputc('\n', f);
		} else {
			fprintf(f, "# %s =   (not set: the default)\n", d->name);
		}
	}
}

/* ---------------------------------------------------------------- this machine */

/* MemTotal and MemAvailable from /proc/meminfo: 0 or -errno */
struct meminfo {
	uint64_t total, avail;
};

static int read_meminfo(struct meminfo *m)
{
	FILE *f = fopen("/proc/meminfo", "re");
	char line[256];
	memset(m, 0, sizeof(*m));
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long v;
		if (sscanf(line, "MemTotal: %llu kB", &v) == 1)
			m->total = v << 10;
		else if (sscanf(line, "MemAvailable: %llu kB", &v) == 1)
			m->avail = v << 10;
	}
	fclose(f);
	return m->total ? 0 : -ENODATA;
}

static const char *mib(uint64_t b, char *buf, size_t len)
{
	if (b >= (10ull << 30))
		snprintf(buf, len, "%.1f GiB", (double)b / (double)(1ull << 30));
	else
		snprintf(buf, len, "%" PRIu64 " MiB", (b + (1 << 20) - 1) >> 20);
	return buf;
}

/* The pool against this machine's memory (see node.h). */
static int check_pool(const struct ing_ingestd_opts *o, bool starting, char *why, size_t whylen,
		      char *note, size_t notelen)
{
	struct ing_pool_opts po;
	struct meminfo m;
	char r[200], a[32], b[32];

	ing_pool_opts_init(&po);
	if (ing_pool_spec_parse(&po, o->pool, r, sizeof(r))) {
		snprintf(why, whylen, "--pool '%s': %s", o->pool, r);
		return -EINVAL;
	}
	uint64_t bytes = ing_pool_spec_bytes(&po);
	if (read_meminfo(&m))
		return 0;   /* no /proc/meminfo: nothing to compare with */
	if (o->hugepages > 0) {
		/* counted as the node decides (control/node/node.c): each slot rounded up to the
		 * hugepage, free on --pool-node when given, else system-wide */
		struct ing_hugepages h;
		uint64_t slot[ING_POOL_MAX_CLASSES];
		unsigned count[ING_POOL_MAX_CLASSES];
		char fix[384];
		for (unsigned c = 0; c < po.nclasses; c++) {
			slot[c] = po.cls[c].slot_size;
			count[c] = po.cls[c].count;
		}
		ing_hugepages_query(NULL, NULL, o->pool_node, &h);
		uint64_t pages = ing_hugepages_for_pool(slot, count, po.nclasses, h.page_size);
		if (!h.supported || h.free < pages) {
			ing_hugepages_advice(fix, sizeof(fix), &h, pages);
			snprintf(why, whylen, "--pool '%s' needs %" PRIu64 " x %s hugepages, %" PRIu64
				 " free%s (--hugepages on): %s; or --hugepages auto", o->pool, pages,
				 mib(h.page_size, b, sizeof(b)), h.free,
				 h.supported ? "" : " (no hugetlb in this kernel)", fix);
			return -EINVAL;
		}
		return 0;
	}
	/* the pool is prefaulted at start: it needs that much memory, not just address space */
	uint64_t have = starting ? m.avail : m.total;
	if (bytes > have) {
		snprintf(why, whylen, "--pool '%s' needs %s, more than this machine's %s %s: give fewer "
			 "or smaller size classes (e.g. 4M:16,16M:8,64M:4 is 448 MiB)", o->pool,
			 mib(bytes, a, sizeof(a)), mib(have, b, sizeof(b)),
			 starting ? "available memory" : "memory (MemTotal)");
		return -EINVAL;
	}
	if (!starting && bytes > m.avail && note)
		snprintf(note, notelen, "--pool '%s' needs %s, more than the %s available now "
			 "(MemAvailable): ingestd may not start until memory is freed", o->pool,
			 mib(bytes, a, sizeof(a)), mib(m.avail, b, sizeof(b)));
	return 0;
}

/* --data-dir: a directory, or creatable (its first existing ancestor is a writable dir) */
int ing_ingestd_check_data_dir(const char *dir, char *why, size_t whylen)
{
	char path[PATH_MAX];
	struct stat st;

	if (stat(dir, &st) == 0) {
		if (!S_ISDIR(st.st_mode)) {
			snprintf(why, whylen, "--data-dir '%s' is %s, not a directory: point --data-dir at "
				 "a directory (one that does not exist yet is created)", dir,
				 S_ISREG(st.st_mode) ? "a file" : "not a directory");
			return -EINVAL;
		}
		if (access(dir, W_OK | X_OK)) {
			snprintf(why, whylen, "--data-dir '%s': %s for uid %d: chown it to the user "
				 "ingestd runs as", dir, strerror(errno), (int)geteuid());
			return -EINVAL;
		}
		return 0;
	}
	if (errno != ENOENT && errno != ENOTDIR) {
		snprintf(why, whylen, "--data-dir '%s': %s", dir, strerror(errno));
		return -EINVAL;
	}
	/* missing: ingestd creates it, so the nearest existing parent must be a writable dir */
	snprintf(path, sizeof(path), "%s", dir);
	for (;;) {
		char *slash = strrchr(path, '/');
		if (!slash)
			snprintf(path, sizeof(path), ".");
		else if (slash == path)
			path[1] = '\0';
		else
			*slash = '\0';
		if (stat(path, &st) == 0)
			break;
		if ((errno != ENOENT && errno != ENOTDIR) || !strcmp(path, ".") || !strcmp(path, "/")) {
			snprintf(why, whylen, "--data-dir '%s': %s: %s", dir, path, strerror(errno));
			return -EINVAL;
		}
	}
	if (!S_ISDIR(st.st_mode)) {
		snprintf(why, whylen, "--data-dir '%s' cannot be created: '%s' is a file, not a directory",
			 dir, path);
		return -EINVAL;
	}
	if (access(path, W_OK | X_OK)) {
		snprintf(why, whylen, "--data-dir '%s' cannot be created in '%s': %s for uid %d", dir, path,
			 strerror(errno), (int)geteuid());
		return -EINVAL;
	}
	return 0;
}

void ing_ingestd_plan_opts(const struct ing_ingestd_opts *o, struct ing_plan_opts *po)
{
	ing_plan_opts_init(po);
	po->rdma_dev = o->rdma_dev;
	po->rdma_addr = o->rdma_addr;
	po->no_rails = o->rdma == 0;
	po->data_dir = o->data_dir;
	po->block_dev = o->block_dev;
	po->n_workers = o->workers;
	if (o->dataplane)
		po->n_dataplane = o->dataplane;
	po->allow_smt = o->allow_smt > 0;
	po->lcores = o->lcores;
	po->control_cpu = o->control_cpu;
	po->worker_cpus = o->worker_cpus;
	po->pool_node = o->pool_node;
	po->stripe_min = o->stripe_min;
}

int ing_ingestd_plan(const struct ing_ingestd_opts *o, struct ing_plan *plan, char *why,
		     size_t whylen)
{
	char err[512];
	struct ing_plan_opts po;
	struct ing_topo *t = ing_topo_load(NULL, err, sizeof(err));
	if (!t) {
		snprintf(why, whylen, "%s", err);
		return 1;
	}
	ing_ingestd_plan_opts(o, &po);
	int rc = ing_plan_make(t, &po, plan, err, sizeof(err));
	ing_topo_destroy(t);
	if (!rc)
		return 0;
	/* a flag naming cpus, a node or a device this machine lacks: a usage error */
	bool placed = o->lcores || o->pool_node >= 0 || o->rdma_dev || o->rdma_addr ||
		      o->control_cpu >= 0 || o->worker_cpus || o->dataplane || o->block_dev;
	snprintf(why, whylen, "%s%s", rc == -ENODEV && o->rdma_dev && strstr(err, "RDMA") ? "--rdma-dev: " : "",
		 err);
	return (rc == -EINVAL || rc == -ENODEV) && placed ? -EINVAL : -EIO;
}

/* The placement plan ingestd would make on this machine (placement flags) */
static int check_plan(const struct ing_ingestd_opts *o, char *why, size_t whylen)
{
	struct ing_plan *plan = malloc(sizeof(*plan));
	if (!plan)
		return 0;
	int rc = ing_ingestd_plan(o, plan, why, whylen);
	free(plan);
	return rc == -EINVAL ? -EINVAL : 0;   /* no topology: ingestd starts without a plan too */
}

/* --max-frame against the pool's largest slot: a frame above it could never be admitted */
static int check_max_frame(const struct ing_ingestd_opts *o, char *why, size_t whylen)
{
	struct ing_pool_opts po;
	char r[200], a[32], b[32];

	ing_pool_opts_init(&po);
	if (!o->max_frame || ing_pool_spec_parse(&po, o->pool, r, sizeof(r)))
		return 0;
	uint64_t largest = 0;
	for (unsigned c = 0; c < po.nclasses; c++)
		if (po.cls[c].slot_size > largest)
			largest = po.cls[c].slot_size;
	if (o->max_frame <= largest)
		return 0;
	snprintf(why, whylen, "--max-frame %s is above the largest pool slot (%s, --pool '%s'): no frame "
		 "above %s can be received; lower --max-frame or add a size class of at least %s to --pool",
		 ing_fmt_size(o->max_frame, a, sizeof(a)), ing_fmt_size(largest, b, sizeof(b)), o->pool, b, a);
	return -EINVAL;
}

/* the first OpenSSL error of this thread as text ("" if none); clears the queue */
static void ssl_error(char *buf, size_t len)
{
	unsigned long e = ERR_get_error();
	buf[0] = 0;
	if (e)
		ERR_error_string_n(e, buf, len);
	ERR_clear_error();
}

/* --tls-cert and --tls-key: each loads, and the key is the certificate's (what the server's
 * TLS context will check as it starts, said here with the files' names and the fix) */
static int check_tls(const struct ing_ingestd_opts *o, char *why, size_t whylen)
{
	char err[256];
	int rc = -EINVAL;

	if (!o->tls_cert || !o->tls_key)
		return 0;
	SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
	if (!ctx)
		return 0;   /* no memory to check with: the start says it */
	if (SSL_CTX_use_certificate_chain_file(ctx, o->tls_cert) != 1) {
		ssl_error(err, sizeof(err));
		snprintf(why, whylen, "--tls-cert '%s' is not a PEM certificate (chain) OpenSSL can load: %s",
			 o->tls_cert, err);
	} else if (SSL_CTX_use_PrivateKey_file(ctx, o->tls_key, SSL_FILETYPE_PEM) != 1) {
		ssl_error(err, sizeof(err));
		if (strstr(err, "values mismatch") || strstr(err, "key values mismatch"))
			goto mismatch;
		snprintf(why, whylen, "--tls-key '%s' is not a PEM private key OpenSSL can load: %s", o->tls_key,
			 err);
	} else if (X509_check_private_key(SSL_CTX_get0_certificate(ctx), SSL_CTX_get0_privatekey(ctx)) != 1) {
		ssl_error(err, sizeof(err));
		goto mismatch;
	} else {
		rc = 0;
	}
	SSL_CTX_free(ctx);
	return rc;
mismatch:
	snprintf(why, whylen, "--tls-key '%s' does not match --tls-cert '%s' (the key is not the "
		 "certificate's): give the key the certificate was issued for", o->tls_key, o->tls_cert);
	SSL_CTX_free(ctx);
	return -EINVAL;
}

int ing_ingestd_opts_check_reload(const struct ing_ingestd_opts *o, char *why, size_t whylen)
{
	return check_max_frame(o, why, whylen) || check_tls(o, why, whylen) ? -EINVAL : 0;
}

int ing_ingestd_opts_check_host(const struct ing_ingestd_opts *o, bool starting, char *why,
				size_t whylen, char *note, size_t notelen)
{
	if (note && notelen)
		note[0] = '\0';
	if (check_pool(o, starting, why, whylen, note, notelen) || check_max_frame(o, why, whylen) ||
	    check_tls(o, why, whylen))
		return -EINVAL;
	if (starting)
		return 0;   /* the node checks the rest itself as it starts (the data dir with
			       ing_ingestd_check_data_dir: the same sentence) */
	if (o->sink == ING_SINK_FILE && ing_ingestd_check_data_dir(o->data_dir, why, whylen))
		return -EINVAL;
	return check_plan(o, why, whylen);
}
