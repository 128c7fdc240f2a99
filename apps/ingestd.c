/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ingestd - the ingest node daemon: gRPC service h3000.RDMASvc (Negotiate, ControlStream,
 * PushFrames, Stats, grpc.health.v1) on one control thread, frames in MR-pool slots,
 * persistence workers writing them durably with a SQLite catalog.
 *
 * This file is the options (one table: flags and --config keys) and a thin main: parse
 * into struct ing_ingestd_opts, ing_node_start, ing_node_wait (control/node.h: start
 * order, SIGINT/SIGTERM drain, teardown).
 * Exit status: 0 clean stop, 1 runtime error, 2 usage error, 3 stopped with frames not
 * drained.
 */
#include "common/conf.h"
#include "common/token.h"
#include "common/parse.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/ident.h"
#include "control/grpc/grpc.h"
#include "control/grpc/loop.h"
#include "control/metrics.h"
#include "control/node.h"
#include "control/service.h"
#include "control/fleet/fleet.h"
#include "dataplane/dataplane.h"
#include "dataplane/rdma/rdma.h"
#include "dataplane/tier/tier.h"
#include "numa/numa.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#define COMP "ingestd"

static int parse_u64(const char *s, uint64_t max, uint64_t *out)
{
	return ing_parse_u64(s, max, out) ? -EINVAL : 0;
}

/* "64M", "1G", "4096", "512K" -> bytes */
static int parse_size(const char *s, uint64_t *out)
{
	uint64_t v;
	if (ing_parse_size(s, &v) || v == 0)   /* no flag of ingestd takes a size of 0 */
		return -EINVAL;
	*out = v;
	return 0;
}

/*
 * SIZE[K|M|G][i][B]:COUNT,... checked here with the reason, so that a usage error stays one
 * line (ing_pool_parse_classes would log its own ERR line first). The limits are the pool's:
 * 1 .. ING_POOL_MAX_CLASSES classes, sizes 1 B .. 1 TiB ascending, counts 1..1000000.
 */
static bool pool_spec_ok(const char *s, char *why, size_t whylen)
{
	uint64_t prev = 0;
	unsigned n = 0;

	if (!*s) {
		snprintf(why, whylen, "empty");
		return false;
	}
	while (*s) {
		const char *p = s;
		uint64_t size = 0, count = 0, mul = 1;
		for (; *p >= '0' && *p <= '9'; p++)   /* saturates above the limit */
			if (size <= (1ull << 40))
				size = size * 10 + (uint64_t)(*p - '0');
		if (p == s) {
			snprintf(why, whylen, "class %u: no size", n + 1);
			return false;
		}
		switch (*p) {
		case 'k': case 'K': mul = 1ull << 10; p++; break;
		case 'm': case 'M': mul = 1ull << 20; p++; break;
		case 'g': case 'G': mul = 1ull << 30; p++; break;
		default: break;
		}
		if (mul > 1 && (*p == 'i' || *p == 'I'))
			p++;
		if (mul > 1 && (*p == 'b' || *p == 'B'))
			p++;
		if (*p++ != ':') {
			snprintf(why, whylen, "class %u: want SIZE:COUNT", n + 1);
			return false;
		}
		if (size == 0 || size > (1ull << 40) / mul) {
			snprintf(why, whylen, "class %u: size must be 1 byte .. 1T", n + 1);
			return false;
		}
		size *= mul;
		s = p;
		for (; *p >= '0' && *p <= '9'; p++)
			if (count <= 1000000)
				count = count * 10 + (uint64_t)(*p - '0');
		if (p == s || (*p && *p != ',')) {
			snprintf(why, whylen, "class %u: count is not a number", n + 1);
			return false;
		}
		if (count == 0 || count > 1000000) {
			snprintf(why, whylen, "class %u: count must be 1..1000000", n + 1);
			return false;
		}
		if (n && size <= prev) {
			snprintf(why, whylen, "class %u: sizes must ascend", n + 1);
			return false;
		}
		if (++n > ING_POOL_MAX_CLASSES) {
			snprintf(why, whylen, "more than %d classes", ING_POOL_MAX_CLASSES);
			return false;
		}
		prev = size;
		s = *p ? p + 1 : p;
		if (*p && !*s) {
			snprintf(why, whylen, "trailing ','");
			return false;
		}
	}
	return true;
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

/* A file the daemon will need later (TLS): readable now, or a usage error naming it. */
static int readable_or_usage(const char *flag, const char *path)
{
	char msg[512];

	if (access(path, R_OK) == 0)
		return 0;
	snprintf(msg, sizeof(msg), "%s: '%s': %s", flag, path, strerror(errno));
	fprintf(stderr, "ingestd: %s (see --help)\n", msg);
	return 2;
}


/*
 * ---------------------------------------------------------------- options
 * One table serves the command line (--name VALUE) and the config file (name = VALUE):
 * a new option is one entry. Setters return 0, or -EINVAL with the reason in why
 * ("'x' is not ..."); the caller prefixes "--name: " or "FILE:LINE: name: ".
 */
struct opt_def;
typedef int (*opt_set_fn)(const struct opt_def *d, struct ing_ingestd_opts *o, const char *v,
			  char *why, size_t whylen);
struct opt_def {
	const char *name;     /* flag without "--"; the config file key */
	const char *arg;      /* metavar in --help */
	opt_set_fn set;
	size_t off;           /* the field of struct ing_ingestd_opts it sets */
	uint64_t lo, hi;      /* range (set_uint, set_secs) */
	const char *help;     /* --help text; '\n' continues on the next line */
};

#define FIELD(o, d, type) ((type *)(void *)((char *)(o) + (d)->off))

static int set_str(const struct opt_def *d, struct ing_ingestd_opts *o, const char *v, char *why,
		   size_t whylen)
{
	if (d->lo && !*v) {   /* lo = 1: must not be empty */
		snprintf(why, whylen, "empty value");
		return -EINVAL;
	}
	*FIELD(o, d, const char *) = *v ? v : NULL;   /* "name =" in a file: the default */
	return 0;
}

static int set_uint(const struct opt_def *d, struct ing_ingestd_opts *o, const char *v, char *why,
		    size_t whylen)
{
	uint64_t x;
	if (parse_u64(v, d->hi, &x) || x < d->lo) {
		snprintf(why, whylen, "'%.64s' is not a number in %" PRIu64 "..%" PRIu64, v, d->lo, d->hi);
		return -EINVAL;
	}
	*FIELD(o, d, unsigned) = (unsigned)x;
	return 0;
}

/* seconds on the command line, milliseconds in the field */
static int set_secs(const struct opt_def *d, struct ing_ingestd_opts *o, const char *v, char *why,
		    size_t whylen)
{
	uint64_t x;
	if (parse_u64(v, d->hi, &x) || x < d->lo) {
		snprintf(why, whylen, "'%.64s' is not seconds in %" PRIu64 "..%" PRIu64, v, d->lo, d->hi);
		return -EINVAL;
	}
	*FIELD(o, d, unsigned) = (unsigned)x * 1000u;
	return 0;
}

static int set_size(const struct opt_def *d, struct ing_ingestd_opts *o, const char *v, char *why,
		    size_t whylen)
{
	if (parse_size(v, FIELD(o, d, uint64_t))) {
		snprintf(why, whylen, "'%.64s' is not a size (e.g. 64M)", v);
		return -EINVAL;
	}
	return 0;
}

/* auto|on|off -> -1|1|0 */
static int set_tristate(const struct opt_def *d, struct ing_ingestd_opts *o, const char *v,
			char *why, size_t whylen)
{
	int *f = FIELD(o, d, int);
	if (!strcasecmp(v, "on"))
		*f = 1;
	else if (!strcasecmp(v, "off"))
		*f = 0;
	else if (!strcasecmp(v, "auto"))
		*f = -1;
	else {
		snprintf(why, whylen, "'%.64s' is not auto, on or off", v);
		return -EINVAL;
	}
	return 0;
}

static int set_listen(const struct opt_def *d, struct ing_ingestd_opts *o, const char *v,
		      char *why, size_t whylen)
{
	if (!listen_ok(v)) {
		snprintf(why, whylen, "'%.128s' is not host:port or [v6]:port (port 0..65535)", v);
		return -EINVAL;
	}
	*FIELD(o, d, const char *) = v;
	return 0;
}

static int set_pool(const struct opt_def *d, struct ing_ingestd_opts *o, const char *v, char *why,
		    size_t whylen)
{
	struct ing_pool_opts po;
	char r[96] = "";
	(void)d;
	ing_pool_opts_init(&po);
	if (!pool_spec_ok(v, r, sizeof(r)) || ing_pool_parse_classes(&po, v)) {
		snprintf(why, whylen, "'%.120s' is not SIZE:COUNT,... (e.g. 4M:16,16M:8): %s", v, r);
		return -EINVAL;
	}
	o->pool = v;
	return 0;
}

static int set_sink(const struct opt_def *d, struct ing_ingestd_opts *o, const char *v, char *why,
		    size_t whylen)
{
	(void)d;
	if (!strcmp(v, "file"))
		o->sink = ING_SINK_FILE;
	else if (!strcmp(v, "null"))
		o->sink = ING_SINK_NULL;
	else {
		snprintf(why, whylen, "'%.64s' is not file or null", v);
		return -EINVAL;
	}
	return 0;
}

static int set_pool_node(const struct opt_def *d, struct ing_ingestd_opts *o, const char *v,
			 char *why, size_t whylen)
{
	uint64_t x;
	(void)d;
	if (parse_u64(v, 1023, &x)) {
		snprintf(why, whylen, "'%.64s' is not a NUMA node number", v);
		return -EINVAL;
	}
	o->pool_node = (int)x;
	return 0;
}

static int set_log_level(const struct opt_def *d, struct ing_ingestd_opts *o, const char *v,
			 char *why, size_t whylen)
{
	enum ing_log_level l;
	(void)d;
	if (ing_log_parse_level(v, &l)) {
		snprintf(why, whylen, "'%.64s' is not err, warn, info or debug", v);
		return -EINVAL;
	}
	o->log_level = v;
	return 0;
}

static int set_log_format(const struct opt_def *d, struct ing_ingestd_opts *o, const char *v,
			  char *why, size_t whylen)
{
	(void)d;
	if (ing_log_parse_format(v, &o->log_format)) {
		snprintf(why, whylen, "'%.64s' is not text or json", v);
		return -EINVAL;
	}
	return 0;
}

static int set_ready_fd(const struct opt_def *d, struct ing_ingestd_opts *o, const char *v,
			char *why, size_t whylen)
{
	uint64_t x;
	(void)d;
	if (parse_u64(v, 65535, &x) || x < 3) {
		snprintf(why, whylen, "'%.64s' is not a file descriptor >= 3", v);
		return -EINVAL;
	}
	if (fcntl((int)x, F_GETFD) < 0) {
		snprintf(why, whylen, "'%.64s' is not an open file descriptor", v);
		return -EINVAL;
	}
	o->ready_fd = (int)x;
	return 0;
}

static int set_persist_ring(const struct opt_def *d, struct ing_ingestd_opts *o, const char *v,
			    char *why, size_t whylen)
{
	uint64_t x;
	(void)d;
	if (parse_u64(v, 1u << 20, &x) || x < 2 || (x & (x - 1))) {
		snprintf(why, whylen, "'%.64s' is not a power of 2 >= 2", v);
		return -EINVAL;
	}
	o->persist_ring = (unsigned)x;
	return 0;
}

static int set_poll_mode(const struct opt_def *d, struct ing_ingestd_opts *o, const char *v,
			 char *why, size_t whylen)
{
	(void)d;
	if (ing_rdma_parse_poll_mode(v, &o->poll_mode)) {
		snprintf(why, whylen, "'%.64s' is not busy or adaptive", v);
		return -EINVAL;
	}
	return 0;
}

static int set_rdma_write(const struct opt_def *d, struct ing_ingestd_opts *o, const char *v,
			  char *why, size_t whylen)
{
	(void)d;
	if (ing_rdma_parse_push(v, &o->rdma_write)) {
		snprintf(why, whylen, "'%.64s' is not auto, mw, mr or off", v);
		return -EINVAL;
	}
	return 0;
}

static int set_node_id(const struct opt_def *d, struct ing_ingestd_opts *o, const char *v,
		       char *why, size_t whylen)
{
	(void)d;
	size_t n = strlen(v);
	if (n == 0 || n > ING_FLEET_ID_MAX || ing_id_check(v, n)) {
		snprintf(why, whylen, "a node id is 1..%d bytes of UTF-8 without control characters",
			 ING_FLEET_ID_MAX);
		return -EINVAL;
	}
	o->node_id = v;
	return 0;
}

static int set_advertise(const struct opt_def *d, struct ing_ingestd_opts *o, const char *v,
			 char *why, size_t whylen)
{
	(void)d;
	if (!*v) {
		o->advertise = NULL;
		return 0;
	}
	if (!listen_ok(v) || strlen(v) > ING_FLEET_ADDR_MAX) {
		snprintf(why, whylen, "'%.128s' is not host:port or [v6]:port", v);
		return -EINVAL;
	}
	o->advertise = v;
	return 0;
}

static int set_fleet_peers(const struct opt_def *d, struct ing_ingestd_opts *o, const char *v,
			   char *why, size_t whylen)
{
	(void)d;
	if (!*v) {
		o->fleet_peers = NULL;
		return 0;
	}
	static struct ing_fleet_member m[ING_FLEET_MAX_MEMBERS];
	unsigned n;
	if (ing_fleet_parse_peers(v, m, ING_FLEET_MAX_MEMBERS, &n, why, whylen))
		return -EINVAL;
	o->fleet_peers = v;
	return 0;
}

/* --drain (no value: on), --drain=off; "drain = on|off" in a config file */
static int set_drain(const struct opt_def *d, struct ing_ingestd_opts *o, const char *v,
		     char *why, size_t whylen)
{
	(void)d;
	if (!v || !strcasecmp(v, "on") || !strcasecmp(v, "yes") || !strcasecmp(v, "true") ||
	    !strcmp(v, "1"))
		o->drain = true;
	else if (!strcasecmp(v, "off") || !strcasecmp(v, "no") || !strcasecmp(v, "false") ||
		 !strcmp(v, "0"))
		o->drain = false;
	else {
		snprintf(why, whylen, "'%.64s' is not on or off", v);
		return -EINVAL;
	}
	return 0;
}

/* ---------------------------------------------------------------- object store tier */

/* "30s", "500ms", "15m", "12h", "7d" -> ms (a unit is required: a bare number is ambiguous) */
static int parse_duration_ms(const char *v, uint64_t max_ms, uint64_t *out)
{
	static const struct { const char *u; uint64_t ms; } units[] = {
		{ "ms", 1 }, { "s", 1000 }, { "m", 60000 }, { "h", 3600000 }, { "d", 86400000 } };
	size_t n = strspn(v, "0123456789");
	uint64_t x;
	if (!n || n > 12 || ing_parse_u64(strndupa(v, n), UINT64_MAX, &x))
		return -EINVAL;
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
		if (!strcmp(v + n, units[i].u)) {
			if (x > max_ms / units[i].ms)
				return -ERANGE;
			*out = x * units[i].ms;
			return 0;
		}
	return -EINVAL;
}

static int set_tier_timeout(const struct opt_def *d, struct ing_ingestd_opts *o, const char *v,
			    char *why, size_t whylen)
{
	uint64_t ms;
	(void)d;
	if (parse_duration_ms(v, 3600000, &ms) || ms < 1000) {
		snprintf(why, whylen, "'%.64s' is not a duration of 1s..1h (e.g. 30s)", v);
		return -EINVAL;
	}
	o->tier_timeout_ms = (unsigned)ms;
	return 0;
}

static int set_retention(const struct opt_def *d, struct ing_ingestd_opts *o, const char *v,
			 char *why, size_t whylen)
{
	uint64_t ms;
	(void)d;
	if (!strcmp(v, "off")) {
		o->local_retention_ms = -1;
		return 0;
	}
	if (parse_duration_ms(v, 3650ull * 86400000, &ms)) {
		snprintf(why, whylen, "'%.64s' is not a duration (e.g. 0s, 12h, 7d; at most 3650d) or off", v);
		return -EINVAL;
	}
	o->local_retention_ms = (int64_t)ms;
	return 0;
}

/* "80%" of the data dir's file system, or a size of frames held locally ("500G") */
static int set_high_water(const struct opt_def *d, struct ing_ingestd_opts *o, const char *v,
			  char *why, size_t whylen)
{
	size_t n = strlen(v);
	uint64_t x;
	(void)d;
	o->local_high_water_pct = 0;
	o->local_high_water_bytes = 0;
	if (!strcmp(v, "off"))
		return 0;
	if (n > 1 && v[n - 1] == '%') {
		if (ing_parse_u64(strndupa(v, n - 1), 99, &x) || x < 1) {
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

static int set_on_off(const struct opt_def *d, struct ing_ingestd_opts *o, const char *v,
		      char *why, size_t whylen)
{
	int *f = FIELD(o, d, int);
	if (!strcasecmp(v, "on"))
		*f = 1;
	else if (!strcasecmp(v, "off"))
		*f = 0;
	else {
		snprintf(why, whylen, "'%.64s' is not on or off", v);
		return -EINVAL;
	}
	return 0;
}

static int bad_usage(const char *fmt, const char *arg);

/* The tier flags as a whole, after every flag and the config file: 0 or 2 (printed). */
static int tier_args(struct ing_ingestd_opts *o)
{
	char why[PATH_MAX + 160];
	if (!o->tier) {
		const char *lone = o->tier_credentials ? "--tier-credentials" :
				   o->local_retention_ms >= 0 ? "--local-retention" :
				   o->local_high_water_pct || o->local_high_water_bytes ? "--local-high-water" :
				   NULL;
		if (lone)
			return bad_usage("%s needs --tier s3://HOST:PORT/BUCKET (local copies go only once "
					 "the store holds them)", lone);
		return 0;
	}
	if (o->sink != ING_SINK_FILE)
		return bad_usage("--tier needs --sink file (nothing is stored to tier)%s", "");
	if (ing_s3_parse_url(&o->tier_s3, o->tier, why, sizeof(why))) {
		fprintf(stderr, "ingestd: --tier: %s (see --help)\n", why);
		return 2;
	}
	if (!o->tier_credentials)
		return bad_usage("--tier needs --tier-credentials FILE (access_key = ..., secret_key = ..., "
				 "mode 600)%s", "");
	if (ing_s3_read_credentials(&o->tier_s3, o->tier_credentials, why, sizeof(why))) {
		fprintf(stderr, "ingestd: --tier-credentials: '%s': %s (see --help)\n", o->tier_credentials,
			why);
		return 2;
	}
	if (o->tier_region)
		snprintf(o->tier_s3.region, sizeof(o->tier_s3.region), "%s", o->tier_region);
	o->tier_s3.path_style = o->tier_path_style != 0;
	o->tier_s3.timeout_ms = o->tier_timeout_ms;
	return 0;
}

static int set_region(const struct opt_def *d, struct ing_ingestd_opts *o, const char *v, char *why,
		      size_t whylen)
{
	(void)d;
	size_t n = strlen(v);
	if (!n || n >= sizeof(o->tier_s3.region) || strspn(v, "abcdefghijklmnopqrstuvwxyz0123456789-_") != n) {
		snprintf(why, whylen, "'%.64s' is not a region name (e.g. us-east-1)", v);
		return -EINVAL;
	}
	o->tier_region = v;
	return 0;
}

#define OFF(f) offsetof(struct ing_ingestd_opts, f)
/* offsetof, and a compile error unless the field has type T (the setters cast to it) */
#define TOFF(f, T) (OFF(f) + 0 * sizeof(char[_Generic(((struct ing_ingestd_opts *)0)->f, T: 1)]))
#define STR(name, f, arg, help) { name, arg, set_str, TOFF(f, const char *), 0, 0, help }
#define PATH(name, f, arg, help) { name, arg, set_str, TOFF(f, const char *), 1, 0, help }
#define UINT(name, f, lo, hi, help) { name, "N", set_uint, TOFF(f, unsigned), lo, hi, help }
#define SECS(name, f, lo, hi, help) { name, "SEC", set_secs, TOFF(f, unsigned), lo, hi, help }
#define SIZE(name, f, help) { name, "SIZE", set_size, TOFF(f, uint64_t), 0, 0, help }
#define TRISTATE(name, f, help) { name, "MODE", set_tristate, TOFF(f, int), 0, 0, help }
#define LISTEN(name, f, help) { name, "ADDR", set_listen, TOFF(f, const char *), 0, 0, help }
/* a setter of its own, which names the field itself */
#define CUSTOM(name, f, set, arg, help) { name, arg, set, OFF(f), 0, 0, help }

static const struct opt_def opt_table[] = {
	LISTEN("listen", listen, "gRPC listen address (default 127.0.0.1:50051; port 0: pick one)"),
	PATH("data-dir", data_dir, "DIR", "frames/ and catalog.db go here (default ./ingest-data)"),
	CUSTOM("pool", pool, set_pool, "SPEC", "MR pool size classes SIZE:COUNT,... (default 4M:16,16M:8,64M:4)"),
	TRISTATE("hugepages", hugepages, "auto|on|off (default off: EAL --no-huge, 4 KiB pages)"),
	UINT("workers", workers, 1, ING_PLAN_MAX_WORKERS, "persistence workers"),
	UINT("worker-nice", worker_nice, 0, 19, "persistence workers run SCHED_BATCH at this nice level, below\n"
	     "control and the RDMA pollers (default 5; 0: normal priority)"),
	CUSTOM("sink", sink, set_sink, "file|null", "write frames to files (default) or drop them (benchmarks)"),
	UINT("credits", credits, 1, 65536, "most frames in flight per session"),
	SIZE("max-frame", max_frame, "largest frame accepted (default: the largest pool slot)"),
	SECS("frame-timeout", frame_timeout_ms, 1, 86400, "a frame must complete within SEC after its first chunk"),
	STR("lcores", lcores, "LIST", "EAL lcores: control first, then dataplane (default: the plan)"),
	CUSTOM("pool-node", pool_node, set_pool_node, "N", "NUMA node of the pool (default: the plan)"),
	STR("rdma-dev", rdma_dev, "NAME", "RDMA device to place around (default: the first found)"),
	TRISTATE("rdma", rdma, "auto|on|off: RDMA READ data path (default auto: on when a device\n"
	       "and an rdma_cm listener work, else gRPC fallback only, logged)"),
	STR("rdma-addr", rdma_addr, "ADDR", "rdma_cm listen address (default: an address of the RDMA netdev)"),
	UINT("rdma-port", rdma_port, 0, 65535, "rdma_cm listen port"),
	CUSTOM("poll-mode", poll_mode, set_poll_mode, "MODE", "dataplane lcores: adaptive (default) or busy"),
	CUSTOM("rdma-write", rdma_write, set_rdma_write, "MODE",
	       "RDMA WRITE push for producers that ask for it (docs/PUSH.md): auto (default:\n"
	       "memory windows where the device has type 2, else the pool MR), mw, mr, off"),
	UINT("grant-ms", grant_ms, 100, 3600000, "push: a granted slot not written within N ms fails its frame"),
	UINT("max-sessions", max_sessions, 1, 1u << 20, "session table size"),
	SECS("session-idle", session_idle_ms, 1, 7 * 86400, "a negotiated session with no stream expires after SEC"),
	CUSTOM("persist-ring", persist_ring, set_persist_ring, "N", "frames queued per persistence worker, a power of 2 (default 4096)"),
	CUSTOM("log-level", log_level, set_log_level, "LEVEL", "err|warn|info|debug (default info)"),
	CUSTOM("log-format", log_format, set_log_format, "FMT", "text (default) or json: one JSON object per line (journald, Loki)"),
	STR("port-file", port_file, "PATH", "write the bound TCP port to PATH once listening"),
	CUSTOM("ready-fd", ready_fd, set_ready_fd, "N", "write \"READY <port>\\n\" to fd N once serving, then close it"),
	STR("tls-cert", tls_cert, "PEM", "TLS certificate (with --tls-key: TLS + ALPN h2, else h2c)"),
	STR("tls-key", tls_key, "PEM", "TLS private key"),
	PATH("auth-token-file", auth_token_file, "PATH", "require this shared secret (one line, 16..256 printable\n"
	     "characters, mode 600): Negotiate authToken, a negotiated\n"
	     "session for streams, 'authorization: Bearer' for Stats"),
	PATH("tls-client-ca", tls_client_ca, "PEM", "mTLS: require a client certificate signed by this CA; its\n"
	     "subject is the client's identity (logs, session binding)"),
	/* limits: fair sharing under abuse (docs/ARCHITECTURE.md, "Limits") */
	UINT("handshake-timeout-ms", handshake_timeout_ms, 10, 600000, "close a connection without TLS handshake, HTTP/2\n"
	     "preface and SETTINGS within N ms (default 5000)"),
	SECS("idle-timeout", idle_timeout_ms, 1, 86400, "close a connection with no open stream after SEC (default 60)"),
	UINT("max-connections", max_connections, 1, 65536, "connections in total (default 256; when full, the one idle\n"
	     "longest is evicted)"),
	UINT("max-conns-per-peer", max_conns_per_peer, 1, 65536, "connections per client address (default 32)"),
	UINT("health-reserve", health_reserve, 1, 1024, "extra connections for Health/Check only when all are busy\n"
	     "(default 8)"),
	UINT("max-sessions-per-peer", max_sessions_per_peer, 1, 1u << 20, "sessions per client address (default 64)"),
	UINT("max-slots-per-peer", max_slots_per_peer, 1, 1u << 20, "pool slots per client address while another address waits\n"
	     "for one (default: 3/4 of the pool)"),
	UINT("slot-stall-ms", slot_stall_ms, 10, 86400000, "a frame whose bytes stop for N ms fails (retryable) and frees\n"
	     "its slot (default 5000)"),
	UINT("auth-fail-burst", auth_fail_burst, 1, 1000000, "failed authentications per address before back-off (default\n"
	     "20, one more each second)"),
	SECS("auth-backoff-max", auth_backoff_max_ms, 1, 86400, "longest back-off after failed authentication (default 60)"),
	LISTEN("metrics-listen", metrics_listen, "serve Prometheus metrics at http://ADDR/metrics (default: off)"),
	STR("metrics-port-file", metrics_port_file, "PATH", "write the bound metrics port to PATH once listening"),
	/* fleet: identity, membership, catalog export (docs/FLEET_NODE.md) */
	CUSTOM("node-id", node_id, set_node_id, "ID", "this node's id in the fleet, what producers hash wafers\n"
	       "over (default: the advertised address)"),
	CUSTOM("advertise", advertise, set_advertise, "HOST:PORT", "address producers dial for this node (default: the listen\n"
	       "address with the bound port)"),
	STR("fleet-db", fleet_db, "CONNINFO", "fleet catalog in PostgreSQL (libpq conninfo, e.g.\n"
	    "'host=db dbname=fleet'): export catalog rows, heartbeat the\n"
	    "membership (default: off)"),
	CUSTOM("fleet-peers", fleet_peers, set_fleet_peers, "LIST", "static membership id=host:port,... answered by Members\n"
	       "when there is no fleet catalog (default: none)"),
	UINT("fleet-heartbeat-ms", fleet_heartbeat_ms, 50, 600000, "membership heartbeat period; a member silent for 3 periods\n"
	     "is DOWN (default 1000)"),
	UINT("fleet-batch", fleet_batch, 1, 5000, "catalog rows per export transaction (default 500)"),
	CUSTOM("drain", drain, set_drain, "[=on|off]", "start DRAINING: producers send no new wafers here (SIGUSR2\n"
	       "toggles ACTIVE/DRAINING at run time)"),
	/* object store tier: a verified second copy in S3, bounded local disk (README) */
	STR("tier", tier, "URL", "after DURABLE, upload every frame to s3://HOST:PORT/BUCKET[/PREFIX]\n"
	    "(an S3 store, e.g. Ceph radosgw; https:// for TLS) (default: off)"),
	PATH("tier-credentials", tier_credentials, "FILE", "the store's keys: 'access_key = ...' and 'secret_key = ...'\n"
	     "lines (or aws_access_key_id/aws_secret_access_key), mode 600"),
	CUSTOM("tier-region", tier_region, set_region, "NAME", "SigV4 region of the store (default us-east-1)"),
	CUSTOM("tier-path-style", tier_path_style, set_on_off, "on|off", "path-style requests http://host/bucket/key (default on),\n"
	       "off: virtual-hosted http://bucket.host/key"),
	UINT("tier-parallel", tier_parallel, 1, ING_TIER_MAX_PARALLEL, "uploads at once"),
	CUSTOM("tier-timeout", tier_timeout_ms, set_tier_timeout, "DUR", "a request to the store that makes no progress for DUR fails\n"
	       "and is retried (default 30s)"),
	CUSTOM("local-retention", local_retention_ms, set_retention, "DUR", "delete a frame's local copy DUR after DURABLE once its object\n"
	       "is verified in the store (e.g. 7d; 0s: at once; default off: keep)"),
	CUSTOM("local-high-water", local_high_water_pct, set_high_water, "MARK", "bound the local disk: N% of the data dir's file system or a\n"
	       "size of local frames (500G); above 90% of it verified copies\n"
	       "go oldest first (--local-retention still holds), at it new\n"
	       "frames are refused NO_SPACE, retryable (default off)"),
};
#define N_OPTS (sizeof(opt_table) / sizeof(opt_table[0]))

static const struct opt_def *opt_find(const char *name)
{
	for (size_t i = 0; i < N_OPTS; i++)
		if (!strcmp(opt_table[i].name, name))
			return &opt_table[i];
	return NULL;
}

static void usage(FILE *f)
{
	struct ing_ingestd_opts def;
	ing_ingestd_opts_init(&def);
	fprintf(f,
		"usage: ingestd [--config FILE] [options]\n"
		"h3000 ingest node: receives frames over gRPC (RDMA later), stores them durably.\n"
		"\n"
		"  --config FILE        read settings from FILE (one 'name = value' a line, names as\n"
		"                       the flags below without '--'); flags given here win\n"
		"  --check-config       check the flags and the config file, then exit (0: good)\n");
	for (size_t i = 0; i < N_OPTS; i++) {
		const struct opt_def *d = &opt_table[i];
		char head[64];
		int n = snprintf(head, sizeof(head), d->set == set_drain ? "  --%s%s" : "  --%s %s",
				 d->name, d->arg);
		fprintf(f, "%s%*s", head, n < 23 ? 23 - n : 1, "");
		for (const char *h = d->help; *h; h++) {
			fputc(*h, f);
			if (*h == '\n')
				fprintf(f, "%23s", "");
		}
		if ((d->set == set_uint || d->set == set_secs) && !strstr(d->help, "default"))
			fprintf(f, " (default %u)", *FIELD(&def, d, unsigned) / (d->set == set_secs ? 1000u : 1u));
		fputc('\n', f);
	}
	fprintf(f, "  -h, --help           this text\n"
		   "exit status: 0 stopped cleanly, 1 runtime error, 2 usage error, 3 stopped but\n"
		   "  frames in flight at the drain deadline were failed (not durable)\n");
}

/* Usage error: one line, exit status 2. */
static int bad_usage(const char *fmt, const char *arg)
{
	fprintf(stderr, "ingestd: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, " (see --help)\n");
	return 2;
}

/* Config file text: the values point into it for the life of the process. */
static char conf_text[64 << 10];

struct conf_ctx {
	struct ing_ingestd_opts *o;
	char why[256];
};

static int conf_setting(void *arg, const char *key, const char *value, unsigned line)
{
	struct conf_ctx *c = arg;
	const struct opt_def *d = opt_find(key);
	char why[200] = "";
	(void)line;
	if (!d) {
		snprintf(c->why, sizeof(c->why), "unknown key '%.64s'", key);
		return -ENOENT;
	}
	if (d->set(d, c->o, value, why, sizeof(why))) {
		snprintf(c->why, sizeof(c->why), "%s: %s", key, why);
		return -EINVAL;
	}
	return 0;
}

/* Read --config FILE into o: 0, or 2 after one line "ingestd: FILE:LINE: reason". */
static int load_config(const char *path, struct ing_ingestd_opts *o)
{
	struct conf_ctx c = { .o = o };
	char why[128] = "";
	unsigned line = 0;
	int rc = ing_conf_read(path, conf_text, sizeof(conf_text), conf_setting, &c, &line, why,
			       sizeof(why));
	if (rc == 0)
		return 0;
	if (line)
		fprintf(stderr, "ingestd: %s:%u: %s\n", path, line, c.why[0] ? c.why : why);
	else
		fprintf(stderr, "ingestd: --config: '%s': %s\n", path, why);
	return 2;
}

/* 1: --help (printed), 0: go on, 2: usage error (one line printed). */
static int parse_args(int argc, char **argv, struct ing_ingestd_opts *o)
{
	enum { O_CONFIG = 1000, O_CHECK };
	static struct option lo[N_OPTS + 4];
	const char *config = NULL;
	int c, idx;

	for (size_t i = 0; i < N_OPTS; i++)
		lo[i] = (struct option){ opt_table[i].name,
					 opt_table[i].set == set_drain ? optional_argument : required_argument,
					 NULL, 256 + (int)i };
	lo[N_OPTS] = (struct option){ "config", required_argument, NULL, O_CONFIG };
	lo[N_OPTS + 1] = (struct option){ "check-config", no_argument, NULL, O_CHECK };
	lo[N_OPTS + 2] = (struct option){ "help", no_argument, NULL, 'h' };
	lo[N_OPTS + 3] = (struct option){ NULL, 0, NULL, 0 };

	/* pass 1: --config and --help only, so that every other flag overrides the file */
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":h", lo, &idx)) != -1) {
		if (c == 'h') {
			usage(stdout);
			return 1;
		}
		if (c == O_CONFIG)
			config = optarg;
	}
	if (config) {
		o->config = config;
		if (load_config(config, o))
			return 2;
	}
	/* pass 2: the flags */
	optind = 0;   /* glibc: full re-initialisation */
	while ((c = getopt_long(argc, argv, ":h", lo, &idx)) != -1) {
		char why[256] = "";
		if (c >= 256 && c < 256 + (int)N_OPTS) {
			const struct opt_def *d = &opt_table[c - 256];
			if (d->set(d, o, optarg, why, sizeof(why))) {
				char msg[320];
				snprintf(msg, sizeof(msg), "--%s: %s", d->name, why);
				return bad_usage("%s", msg);
			}
			continue;
		}
		switch (c) {
		case O_CONFIG:
			break;
		case O_CHECK:
			o->check_only = true;
			break;
		case ':':
			return bad_usage("option %s needs a value", argv[optind - 1]);
		default:
			return bad_usage("unknown option %s", argv[optind - 1]);
		}
	}
	if (optind < argc)
		return bad_usage("unexpected argument '%s'", argv[optind]);
	if (!!o->tls_cert != !!o->tls_key)
		return bad_usage("--tls-cert and --tls-key go together%s", "");
	if (o->tls_cert && (readable_or_usage("--tls-cert", o->tls_cert) ||
			    readable_or_usage("--tls-key", o->tls_key)))
		return 2;
	if (o->tls_client_ca && !o->tls_cert)
		return bad_usage("--tls-client-ca needs --tls-cert and --tls-key (mTLS is TLS)%s", "");
	if (o->tls_client_ca && readable_or_usage("--tls-client-ca", o->tls_client_ca))
		return 2;
	if (tier_args(o))
		return 2;
	if (o->auth_token_file) {
		char awhy[PATH_MAX + 96];
		if (ing_token_file_read(o->auth_token_file, o->auth_token, sizeof(o->auth_token), awhy,
				    sizeof(awhy))) {
			fprintf(stderr, "ingestd: --auth-token-file: '%s': %s (see --help)\n",
				o->auth_token_file, awhy);
			return 2;
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct ing_ingestd_opts o;
	struct ing_node *node;
	int rc;

	/*
	 * Signals go to the node's signalfd: block them first thing, before any thread (EAL,
	 * workers) exists and before start-up has touched the data dir. A SIGTERM during
	 * start-up is then handled once the loop runs (drain, exit 0) instead of killing a
	 * half-started daemon.
	 */
	sigset_t ss;
	sigemptyset(&ss);
	sigaddset(&ss, SIGINT);
	sigaddset(&ss, SIGTERM);
	sigaddset(&ss, SIGUSR2);   /* fleet: toggle DRAINING */
	pthread_sigmask(SIG_BLOCK, &ss, NULL);
	signal(SIGPIPE, SIG_IGN);

	ing_ingestd_opts_init(&o);
	rc = parse_args(argc, argv, &o);
	if (rc == 1)
		return 0; /* --help */
	if (rc)
		return rc;
	if (o.check_only) {
		printf("ingestd: configuration OK%s%s\n", o.config ? ": " : "", o.config ? o.config : "");
		return 0;
	}
	ing_log_set_format(o.log_format);
	if (o.log_level) {
		enum ing_log_level l;
		(void)ing_log_parse_level(o.log_level, &l);
		ing_log_set_level(l);
	}
	rc = ing_node_start(&o, &ss, &node);
	explicit_bzero(o.auth_token, sizeof(o.auth_token));   /* the node has its copy */
	explicit_bzero(&o.tier_s3, sizeof(o.tier_s3));
	if (rc)
		return rc == -EINVAL ? 2 : 1;
	rc = ing_node_wait(node);
	ing_node_destroy(node);
	return rc;
}
