/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ingestd - the ingest node daemon: gRPC service h3000.RDMASvc (Negotiate, ControlStream,
 * PushFrames, Stats, grpc.health.v1) on one control thread, frames in MR-pool slots,
 * persistence workers writing them durably with a SQLite catalog.
 *
 * Start order: options -> topology + placement plan -> EAL -> pool -> ack ring ->
 * persistence -> loop -> service -> gRPC server -> run. SIGINT/SIGTERM (signalfd, in the
 * loop): health NOT_SERVING, GOAWAY, up to 10 s for in-flight frames to become durable and
 * their acks to go out, then every open call is finished and everything is torn down in
 * reverse order. A second signal skips the wait.
 * Exit status: 0 clean stop, 1 runtime error, 2 usage error.
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
#include "control/service.h"
#include "fleet/fleet.h"
#include "dataplane/dataplane.h"
#include "dataplane/rdma/rdma.h"
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

#include <systemd/sd-daemon.h>

#define COMP "ingestd"
#define DRAIN_MS 10000u
#define CLOSE_MS 1000u
#define TICK_NS 20000000ull

struct ing_ingestd_opts {
	const char *listen;
	const char *data_dir;
	const char *pool;
	int hugepages;             /* 1 on, 0 off, -1 auto */
	unsigned workers;
	enum ing_sink sink;
	unsigned credits;
	uint64_t max_frame;        /* 0: the pool's largest slot */
	unsigned frame_timeout_ms;
	const char *lcores;
	int pool_node;             /* -1: from the plan */
	const char *log_level;
	const char *port_file;
	const char *tls_cert, *tls_key;
	int ready_fd;
	const char *rdma_dev;
	/* RDMA data path (dataplane/rdma/rdma.h) */
	int rdma;                  /* 1 on (error if impossible), 0 off, -1 auto (default) */
	const char *rdma_addr;     /* rdma_cm listen address; NULL: the RDMA netdev's */
	unsigned rdma_port;
	enum ing_rdma_poll_mode poll_mode;
	unsigned max_sessions;
	unsigned persist_ring;     /* per worker; 0: ING_DEFAULT_RING_SIZE */
	unsigned session_idle_ms;
	const char *auth_token_file; /* NULL: no authentication */
	char auth_token[ING_AUTH_TOKEN_MAX + 1]; /* read from it by parse_args; never logged */
	const char *tls_client_ca;   /* mTLS: client certificates must chain to it */
	/* fair sharing under abuse (0: the library default, see --help) */
	unsigned handshake_timeout_ms, idle_timeout_ms, max_connections, max_conns_per_peer;
	unsigned health_reserve, max_sessions_per_peer, max_slots_per_peer, slot_stall_ms;
	unsigned auth_fail_burst, auth_backoff_max_ms;
	enum ing_log_format log_format;
	const char *metrics_listen;  /* NULL: no /metrics endpoint */
	const char *metrics_port_file;
	const char *config;          /* the --config file, for messages */
	/* fleet (fleet/fleet.h, docs/FLEET_NODE.md) */
	const char *node_id;         /* NULL: the advertised address */
	const char *advertise;       /* NULL: the listen address (with the bound port) */
	const char *fleet_db;        /* libpq conninfo; NULL: no fleet catalog */
	const char *fleet_peers;     /* static membership "id=host:port,..." */
	unsigned fleet_heartbeat_ms;
	unsigned fleet_batch;
	bool drain;                  /* start DRAINING */
	bool check_only;             /* --check-config: validate, then exit 0 */
};

static void ing_ingestd_opts_init(struct ing_ingestd_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->listen = "127.0.0.1:50051";
	o->data_dir = "./ingest-data";
	o->pool = "4M:16,16M:8,64M:4";
	o->hugepages = 0;
	o->workers = ING_DEFAULT_WORKERS;
	o->sink = ING_SINK_FILE;
	o->credits = ING_DEFAULT_CREDITS;
	o->frame_timeout_ms = ING_DEFAULT_FRAME_TIMEOUT_MS;
	o->pool_node = -1;
	o->ready_fd = -1;
	o->rdma = -1;
	o->rdma_port = ING_RDMA_DEFAULT_PORT;
	o->poll_mode = ING_RDMA_POLL_ADAPTIVE;
	o->max_sessions = ING_DEFAULT_MAX_SESSIONS;
	o->session_idle_ms = ING_DEFAULT_SESSION_IDLE_MS;
	o->fleet_heartbeat_ms = ING_DEFAULT_FLEET_HEARTBEAT_MS;
	o->fleet_batch = ING_DEFAULT_FLEET_BATCH;
}

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

/* ---------------------------------------------------------------- running daemon */

enum phase { PH_RUN = 0, PH_DRAIN, PH_CLOSE, PH_DONE };

struct ingestd {
	struct ing_ingestd_opts o;
	struct ing_loop *loop;
	struct ing_pool *pool;
	struct ing_fring *acks;
	struct ing_persist *persist;
	struct ing_svc *svc;
	struct ing_grpc_server *srv;
	int sfd;
	int phase;
	uint64_t deadline_ns;
	uint64_t not_drained;      /* frames still in flight at the drain deadline: exit 3 */
	struct ing_timer tick;
	char rdma_note[192];
	struct ing_rdma *rdma;     /* NULL: gRPC fallback only */
	struct ing_metrics_srv *metrics;  /* NULL: no --metrics-listen */
	struct ing_timer watchdog; /* systemd WATCHDOG=1 pings, when WATCHDOG_USEC is set */
	struct ing_fleet *fleet;   /* node identity, membership, catalog export */
	uint64_t watchdog_ns;      /* ping period (half the watchdog timeout), 0: off */
};

/* /metrics: the service's families plus the data dir's file system */
static void metrics_render(void *arg, struct ing_mtext *t)
{
	struct ingestd *d = arg;
	struct statvfs v;

	ing_svc_metrics(d->svc, t);
	if (d->o.sink == ING_SINK_FILE && statvfs(d->o.data_dir, &v) == 0) {
		ing_mtext_family(t, "ingest_disk_free_bytes", "gauge",
				 "Bytes available to ingestd on the data dir's file system.");
		ing_mtext_u64(t, "ingest_disk_free_bytes", "", (uint64_t)v.f_bavail * v.f_frsize);
		ing_mtext_family(t, "ingest_disk_size_bytes", "gauge",
				 "Size of the data dir's file system.");
		ing_mtext_u64(t, "ingest_disk_size_bytes", "", (uint64_t)v.f_blocks * v.f_frsize);
	}
	ing_mtext_family(t, "ingest_build_info", "gauge", "Version of this ingestd (always 1).");
	ing_mtext_printf(t, "ingest_build_info{version=\"%s\"} 1\n", ING_VERSION);
}

/* systemd watchdog: ping from the control loop, so a stuck loop stops the pings */
static void watchdog_cb(void *arg)
{
	struct ingestd *d = arg;
	(void)sd_notify(0, "WATCHDOG=1");
	ing_timer_arm(d->loop, &d->watchdog, ing_now_ns() + d->watchdog_ns);
}

static void rdma_cb(void *arg, uint32_t events)
{
	(void)events;
	ing_rdma_dispatch(arg);
}

static void shutdown_tick(void *arg)
{
	struct ingestd *d = arg;
	uint64_t now = ing_now_ns();

	if (d->phase == PH_DRAIN) {
		bool idle = ing_svc_in_flight(d->svc) == 0 && ing_svc_quiescent(d->svc);
		if (!idle && now < d->deadline_ns) {
			ing_timer_arm(d->loop, &d->tick, now + TICK_NS);
			return;
		}
		if (!idle) {
			d->not_drained = ing_svc_in_flight(d->svc);
			ING_WARN(COMP, "drain deadline: %" PRIu64 " frames still in flight; closing calls",
				 d->not_drained);
		} else
			ING_INFO(COMP, "all frames durable and acked; closing calls");
		ing_svc_close_calls(d->svc, ING_GRPC_UNAVAILABLE, "ingest node shutting down");
		d->phase = PH_CLOSE;
		d->deadline_ns = now + CLOSE_MS * 1000000ull;
	}
	if (d->phase == PH_CLOSE) {
		if ((ing_grpc_server_ncalls(d->srv) > 0 || !ing_grpc_server_flushed(d->srv)) &&
		    now < d->deadline_ns) {
			ing_timer_arm(d->loop, &d->tick, now + TICK_NS);
			return;
		}
		d->phase = PH_DONE;
		ing_loop_stop(d->loop);
	}
}

static void signal_cb(void *arg, uint32_t events)
{
	struct ingestd *d = arg;
	struct signalfd_siginfo si;
	(void)events;

	while (read(d->sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
		if (si.ssi_signo == SIGUSR2) {   /* toggle ACTIVE <-> DRAINING */
			if (d->fleet)
				ing_fleet_set_draining(d->fleet,
						       ing_fleet_state(d->fleet) != ING_MEMBER_DRAINING);
			continue;
		}
		if (d->phase == PH_RUN) {
			ING_INFO(COMP, "%s: stopping (health NOT_SERVING, GOAWAY, up to %u s to drain)",
				 strsignal((int)si.ssi_signo), DRAIN_MS / 1000);
			(void)sd_notify(0, "STOPPING=1");
			ing_grpc_server_set_serving(d->srv, false);
			ing_svc_shutdown_begin(d->svc);
			ing_grpc_server_shutdown(d->srv);
			d->phase = PH_DRAIN;
			d->deadline_ns = ing_now_ns() + DRAIN_MS * 1000000ull;
			ing_timer_arm(d->loop, &d->tick, ing_now_ns());
		} else if (d->phase == PH_DRAIN) {
			ING_WARN(COMP, "%s again: not waiting for in-flight frames", strsignal((int)si.ssi_signo));
			d->deadline_ns = 0;
			ing_timer_arm(d->loop, &d->tick, ing_now_ns());
		}
	}
}

static int write_port_file(const char *path, int port)
{
	char tmp[4096];
	snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid());
	FILE *f = fopen(tmp, "w");
	if (!f)
		return -errno;
	fprintf(f, "%d\n", port);
	if (fclose(f) != 0) {
		int e = -errno;
		unlink(tmp);
		return e;
	}
	if (rename(tmp, path) != 0) {
		int e = -errno;
		unlink(tmp);
		return e;
	}
	return 0;
}

/*
 * One ingestd per data dir: two would each serialise their own copies of a frame id, not
 * each other's, and a second copy with other bytes could be renamed over a frame the first
 * one has already ACKed DURABLE. An flock on <data_dir>/.ingestd.lock, held for the life of
 * the process (released by the kernel on any exit, kill -9 included). The fd is leaked on
 * purpose. 0, or -errno after logging.
 */
static int data_dir_lock(const char *dir)
{
	char path[PATH_MAX], pid[32] = "";
	int fd;

	snprintf(path, sizeof(path), "%s/.ingestd.lock", dir);
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0) {
		int rc = -errno;
		ING_ERR(COMP, "data dir %s: cannot open %s: %s", dir, path, strerror(-rc));
		return rc;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
		int rc = -errno;
		ssize_t n = pread(fd, pid, sizeof(pid) - 1, 0);
		pid[n > 0 ? n : 0] = 0;
		pid[strcspn(pid, "\n")] = 0;
		if (rc == -EWOULDBLOCK)
			ING_ERR(COMP, "data dir %s is in use by another ingestd (pid %s); stop it first",
				dir, pid[0] ? pid : "?");
		else
			ING_ERR(COMP, "data dir %s: locking %s: %s", dir, path, strerror(-rc));
		close(fd);
		return rc == -EWOULDBLOCK ? -EBUSY : rc;
	}
	int n = snprintf(pid, sizeof(pid), "%d\n", (int)getpid());
	if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)n, 0) != n)
		ING_WARN(COMP, "%s: cannot record the pid: %s", path, strerror(errno));
	return 0;
}

/* fsync the directory holding path (best effort: a failure shows at the probe write) */
static void sync_parent(const char *path)
{
	char parent[PATH_MAX];
	char *slash;
	int fd;

	snprintf(parent, sizeof(parent), "%s", path);
	slash = strrchr(parent, '/');
	if (!slash)
		snprintf(parent, sizeof(parent), ".");
	else if (slash == parent)
		parent[1] = 0;
	else
		*slash = 0;
	fd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0) {
		(void)fsync(fd);
		close(fd);
	}
}

/*
 * Create the data dir (and its parents) and prove it takes a durable write before anything
 * else starts, so that a read-only, full or foreign data dir is one clear line naming the
 * path and the reason rather than a SQLite error later. 0, or -errno after logging.
 */
static int data_dir_ready(const char *dir, enum ing_sink sink)
{
	char path[PATH_MAX];
	struct stat st;
	struct statvfs vfs;
	int fd, rc = 0;

	if (snprintf(path, sizeof(path), "%s", dir) >= (int)sizeof(path)) {
		ING_ERR(COMP, "data dir %.64s...: path too long", dir);
		return -ENAMETOOLONG;
	}
	for (char *p = path + 1; ; p++) {   /* mkdir -p */
		if (*p != '/' && *p)
			continue;
		char c = *p;
		*p = 0;
		if (mkdir(path, 0755) == 0) {
			sync_parent(path);   /* the new entry must survive a power loss too */
		} else if (errno != EEXIST) {
			rc = -errno;
			ING_ERR(COMP, "cannot create data dir %s: %s creating %s", dir, strerror(-rc), path);
			return rc;
		}
		*p = c;
		if (!c)
			break;
	}
	if (stat(dir, &st) != 0) {
		rc = -errno;
		ING_ERR(COMP, "data dir %s: %s", dir, strerror(-rc));
		return rc;
	}
	if (!S_ISDIR(st.st_mode)) {
		ING_ERR(COMP, "data dir %s is not a directory", dir);
		return -ENOTDIR;
	}
	if (sink != ING_SINK_FILE)
		return 0;
	rc = data_dir_lock(dir);
	if (rc)
		return rc;
	/* a probe of one 4 KiB block: creat + write + fdatasync + unlink (a fixed name, so
	 * one left by a kill -9 right here is reused, not accumulated) */
	snprintf(path, sizeof(path), "%s/.ingestd-probe", dir);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0) {
		rc = -errno;
	} else {
		static const char block[4096];
		ssize_t w = write(fd, block, sizeof(block));
		if (w != (ssize_t)sizeof(block))
			rc = w < 0 ? -errno : -ENOSPC;
		else if (fdatasync(fd) != 0)
			rc = -errno;
		close(fd);
		(void)unlink(path);
	}
	if (rc) {
		ING_ERR(COMP, "data dir %s is not writable: %s%s", dir, strerror(-rc),
			rc == -ENOSPC || rc == -EDQUOT ? " (free some space first)" :
			rc == -EROFS ? " (mounted read-only)" : "");
		return rc;
	}
	if (statvfs(dir, &vfs) == 0 && (uint64_t)vfs.f_bavail * vfs.f_frsize < (256ull << 20))
		ING_WARN(COMP, "data dir %s: only %llu MiB free; frames will be refused (NO_SPACE) "
			 "when it fills", dir,
			 (unsigned long long)((uint64_t)vfs.f_bavail * vfs.f_frsize >> 20));
	return 0;
}

static bool hugepages_free(void)
{
	FILE *f = fopen("/proc/meminfo", "r");
	char line[256];
	long n = 0;
	if (!f)
		return false;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "HugePages_Free: %ld", &n) == 1)
			break;
	fclose(f);
	return n > 0;
}

static void teardown(struct ingestd *d)
{
	if (d->loop) {
		ing_timer_cancel(d->loop, &d->tick);
		ing_timer_cancel(d->loop, &d->watchdog);
	}
	ing_metrics_srv_destroy(d->metrics);
	d->metrics = NULL;
	ing_grpc_server_destroy(d->srv);     /* every call closed: the service lets go of them */
	d->srv = NULL;
	if (d->rdma) {                       /* pollers stop; frames they held go to the ack ring */
		if (d->loop)
			ing_loop_del_fd(d->loop, ing_rdma_fd(d->rdma));
		ing_rdma_destroy(d->rdma);
		d->rdma = NULL;
	}
	ing_persist_stop(d->persist, 10000); /* drains into the ack ring */
	d->persist = NULL;
	ing_svc_destroy(d->svc);             /* returns every slot it held */
	d->svc = NULL;
	ing_fleet_stop(d->fleet);            /* after the calls that read it */
	d->fleet = NULL;
	if (d->sfd >= 0) {
		if (d->loop)
			ing_loop_del_fd(d->loop, d->sfd);
		close(d->sfd);
		d->sfd = -1;
	}
	ing_loop_destroy(d->loop);
	d->loop = NULL;
	ing_fring_destroy(d->acks);
	d->acks = NULL;
	ing_pool_destroy(d->pool);
	d->pool = NULL;
	ing_eal_stop();
	explicit_bzero(d->o.auth_token, sizeof(d->o.auth_token));
}

/* host:port of the listen address with the bound port (--listen 127.0.0.1:0) */
static void bound_address(const char *listen, int port, char *out, size_t n)
{
	const char *colon = strrchr(listen, ':');
	size_t hl = colon ? (size_t)(colon - listen) : strlen(listen);
	snprintf(out, n, "%.*s:%d", (int)hl, listen, port);
}

/* Node identity, membership and (with --fleet-db) the catalog export. 0 or -1 (logged). */
static int fleet_start(struct ingestd *d, int port)
{
	static char advertise[ING_FLEET_ADDR_MAX + 1], catalog[PATH_MAX];
	struct ing_fleet_opts fo;
	ing_fleet_opts_init(&fo);
	if (d->o.advertise)
		snprintf(advertise, sizeof(advertise), "%s", d->o.advertise);
	else
		bound_address(d->o.listen, port, advertise, sizeof(advertise));
	fo.advertise = advertise;
	fo.node_id = d->o.node_id ? d->o.node_id : advertise;
	fo.conninfo = d->o.fleet_db;
	fo.peers = d->o.fleet_peers;
	fo.heartbeat_ms = d->o.fleet_heartbeat_ms;
	fo.batch = d->o.fleet_batch;
	fo.draining = d->o.drain;
	if (d->o.sink == ING_SINK_FILE) {
		snprintf(catalog, sizeof(catalog), "%s/catalog.db", d->o.data_dir);
		fo.catalog = catalog;
	}
	d->fleet = ing_fleet_start(&fo);
	if (!d->fleet)
		return -1;
	ing_svc_attach_fleet(d->svc, d->fleet);
	return 0;
}

int main(int argc, char **argv)
{
	struct ingestd d;
	char err[256];
	int rc;

	/*
	 * Signals go to the signalfd: block them first thing, before any thread (EAL, workers)
	 * exists and before start-up has touched the data dir. A SIGTERM during start-up is
	 * then handled once the loop runs (drain, exit 0) instead of killing a half-started
	 * daemon.
	 */
	sigset_t ss;
	sigemptyset(&ss);
	sigaddset(&ss, SIGINT);
	sigaddset(&ss, SIGTERM);
	sigaddset(&ss, SIGUSR2);   /* fleet: toggle DRAINING */
	pthread_sigmask(SIG_BLOCK, &ss, NULL);
	signal(SIGPIPE, SIG_IGN);

	/*
	 * The cpus this process may run on, captured before EAL pins this (main) thread to
	 * the control lcore: persistence workers the plan leaves unpinned run on these, not
	 * on control's one cpu (threads inherit their creator's mask). This honours taskset
	 * and the cgroup's cpuset; the dataplane lcores' cpus stay in the set (on a small
	 * machine that is all there is, and the scheduler balances).
	 */
	static int start_cpus[CPU_SETSIZE];
	unsigned n_start_cpus = 0;
	cpu_set_t start_set;
	if (sched_getaffinity(0, sizeof(start_set), &start_set) == 0) {
		for (int c = 0; c < CPU_SETSIZE; c++)
			if (CPU_ISSET(c, &start_set))
				start_cpus[n_start_cpus++] = c;
	}

	memset(&d, 0, sizeof(d));
	d.sfd = -1;
	ing_ingestd_opts_init(&d.o);
	rc = parse_args(argc, argv, &d.o);
	if (rc == 1)
		return 0; /* --help */
	if (rc)
		return rc;
	if (d.o.check_only) {
		printf("ingestd: configuration OK%s%s\n", d.o.config ? ": " : "",
		       d.o.config ? d.o.config : "");
		return 0;
	}
	ing_log_set_format(d.o.log_format);
	if (d.o.log_level) {
		enum ing_log_level l;
		(void)ing_log_parse_level(d.o.log_level, &l);
		ing_log_set_level(l);
	}

	if (data_dir_ready(d.o.data_dir, d.o.sink) != 0)
		return 1;

	/* ---- placement plan */
	struct ing_plan plan;
	bool have_plan = false;
	char lcores[128] = "";
	int main_lcore = -1;
	struct ing_topo *topo = ing_topo_load(NULL, err, sizeof(err));
	if (!topo) {
		ING_WARN(COMP, "no topology (%s): no placement plan; EAL lcores %s", err,
			 d.o.lcores ? d.o.lcores : "0");
	} else {
		struct ing_plan_opts po;
		ing_plan_opts_init(&po);
		po.rdma_dev = d.o.rdma_dev;
		po.data_dir = d.o.data_dir;
		po.n_workers = d.o.workers;
		po.lcores = d.o.lcores;
		po.pool_node = d.o.pool_node;
		rc = ing_plan_make(topo, &po, &plan, err, sizeof(err));
		ing_topo_destroy(topo);
		if (rc) {
			/* a flag naming cpus, a node or a device this machine lacks: usage error */
			if ((rc == -EINVAL && (d.o.lcores || d.o.pool_node >= 0 || d.o.rdma_dev)) ||
			    (rc == -ENODEV && d.o.rdma_dev)) {
				fprintf(stderr, "ingestd: %s%s (see --help)\n",
					rc == -ENODEV ? "--rdma-dev: " : "", err);
				return 2;
			}
			ING_ERR(COMP, "placement plan: %s", err);
			return 1;
		}
		have_plan = true;
		ing_plan_log(&plan);
		if (ing_plan_eal_lcores(&plan, lcores, sizeof(lcores), &main_lcore) != 0) {
			ING_ERR(COMP, "placement plan: EAL lcore list too long");
			return 1;
		}
	}

	/* ---- EAL */
	struct ing_eal_opts eo;
	ing_eal_opts_init(&eo);
	if (have_plan) {
		eo.lcores = lcores;
		eo.main_lcore = main_lcore;
	} else {
		eo.lcores = d.o.lcores;
	}
	eo.no_huge = d.o.hugepages == 0 || (d.o.hugepages < 0 && !hugepages_free());
	if (d.o.hugepages > 0 && !hugepages_free()) {
		ING_ERR(COMP, "--hugepages on, but no free hugepages (see /proc/meminfo; deploy/ sets them up)");
		return 1;
	}
	rc = ing_eal_start(&eo);
	if (rc) {
		ING_ERR(COMP, "EAL start failed: %s", strerror(-rc));
		return 1;
	}

	/* ---- pool, ack ring, persistence */
	struct ing_pool_opts pool_o;
	ing_pool_opts_init(&pool_o);
	pool_o.name = "frames";
	(void)ing_pool_parse_classes(&pool_o, d.o.pool); /* validated in parse_args */
	pool_o.hugepages = eo.no_huge ? 0 : (d.o.hugepages > 0 ? 1 : -1);
	pool_o.numa_node = d.o.pool_node >= 0 ? d.o.pool_node : (have_plan ? plan.pool_node : -1);
	d.pool = ing_pool_create(&pool_o);
	if (!d.pool)
		goto fail;
	unsigned total = ing_pool_total(d.pool);
	unsigned ring = 256;
	while (ring < 2 * total)
		ring <<= 1;
	d.acks = ing_fring_create("acks", ring, ING_FRING_SC, true);
	if (!d.acks)
		goto fail;
	struct ing_persist_opts pe;
	ing_persist_opts_init(&pe);
	pe.data_dir = d.o.data_dir;
	pe.workers = d.o.workers;
	pe.sink = d.o.sink;
	if (d.o.persist_ring)
		pe.ring_size = d.o.persist_ring;
	if (have_plan && plan.n_workers > 0) {
		pe.worker_cpus = plan.worker_cpus;   /* per worker, -1: not pinned */
		pe.n_worker_cpus = plan.n_workers;
	}
	pe.unpinned_cpus = n_start_cpus ? start_cpus : NULL;
	pe.n_unpinned_cpus = n_start_cpus;
	d.persist = ing_persist_start(&pe, d.acks);
	if (!d.persist)
		goto fail;

	/* ---- loop, service, server */
	d.loop = ing_loop_create();
	if (!d.loop)
		goto fail;
	ing_timer_init(&d.tick, shutdown_tick, &d);
	ing_timer_init(&d.watchdog, watchdog_cb, &d);

	struct ing_svc_opts so;
	ing_svc_opts_init(&so);
	so.credits_default = d.o.credits;
	so.credits_max = d.o.credits;
	so.max_frame = d.o.max_frame;
	so.frame_timeout_ms = d.o.frame_timeout_ms;
	so.max_sessions = d.o.max_sessions;
	so.session_idle_ms = d.o.session_idle_ms;
	so.auth_token = d.o.auth_token_file ? d.o.auth_token : NULL;
	so.max_sessions_per_peer = d.o.max_sessions_per_peer;
	so.max_slots_per_peer = d.o.max_slots_per_peer;
	so.slot_stall_ms = d.o.slot_stall_ms;
	so.auth_fail_burst = d.o.auth_fail_burst;
	so.auth_backoff_max_ms = d.o.auth_backoff_max_ms;
	struct ing_grpc_server_opts gso;
	ing_grpc_server_opts_init(&gso);
	if (gso.max_recv_msg < so.max_chunk + (64u << 10))
		gso.max_recv_msg = so.max_chunk + (64u << 10);
	so.max_msg = gso.max_recv_msg;
	if (so.backlog_max < (size_t)gso.window_bytes + gso.max_recv_msg)
		so.backlog_max = (size_t)gso.window_bytes + gso.max_recv_msg;
	/* ---- RDMA: rdma_cm listener + dataplane pollers, or a loud gRPC-only fallback */
	char rdma_why[192] = "";
	so.rdma.rdma_available = false;
	if (d.o.rdma != 0) {
		struct ing_rdma_opts ro;
		ing_rdma_opts_init(&ro);
		ro.addr = d.o.rdma_addr;
		ro.port = (uint16_t)d.o.rdma_port;
		ro.device = d.o.rdma_dev ? d.o.rdma_dev : (have_plan && plan.rdma_dev[0] ? plan.rdma_dev : NULL);
		ro.nlcores = 0;             /* one poller per EAL worker lcore */
		ro.lcore.mode = d.o.poll_mode;
		d.rdma = ing_rdma_create(&ro, d.pool, d.persist, d.acks, NULL, rdma_why, sizeof(rdma_why));
		if (!d.rdma && d.o.rdma > 0) {
			ING_ERR(COMP, "--rdma on: %s", rdma_why);
			goto fail;
		}
	} else {
		snprintf(rdma_why, sizeof(rdma_why), "disabled by --rdma off");
	}
	if (d.rdma) {
		snprintf(d.rdma_note, sizeof(d.rdma_note), "rdma_cm %s:%u on %s", ing_rdma_addr(d.rdma),
			 ing_rdma_port(d.rdma), ing_rdma_device(d.rdma));
		so.rdma.rdma_available = true;
		so.rdma.rdma_addr = ing_rdma_addr(d.rdma);
		so.rdma.rdma_port = ing_rdma_port(d.rdma);
	} else {
		snprintf(d.rdma_note, sizeof(d.rdma_note), "%s", rdma_why[0] ? rdma_why : "no RDMA device on this node");
		ING_WARN(COMP, "RDMA READ not available (%s): producers get the gRPC fallback", d.rdma_note);
	}
	so.rdma.note = d.rdma_note;
	if (d.o.max_frame && d.o.max_frame > ing_pool_max_len(d.pool))
		ING_WARN(COMP, "--max-frame %" PRIu64 " above the largest pool slot %" PRIu64 "; capped",
			 d.o.max_frame, ing_pool_max_len(d.pool));
	d.svc = ing_svc_create(d.loop, d.pool, d.persist, d.acks, &so);
	explicit_bzero(d.o.auth_token, sizeof(d.o.auth_token));   /* the service has its copy */
	so.auth_token = NULL;
	if (!d.svc)
		goto fail;
	if (d.rdma) {
		ing_svc_attach_rdma(d.svc, d.rdma);
		rc = ing_loop_add_fd(d.loop, ing_rdma_fd(d.rdma), EPOLLIN, rdma_cb, d.rdma);
		if (rc == 0)
			rc = ing_rdma_start(d.rdma);
		if (rc) {
			ING_ERR(COMP, "RDMA engine start failed: %s", strerror(-rc));
			goto fail;
		}
	}

	gso.listen = d.o.listen;
	gso.tls_cert = d.o.tls_cert;
	gso.tls_key = d.o.tls_key;
	gso.tls_client_ca = d.o.tls_client_ca;
	if (d.o.handshake_timeout_ms)
		gso.handshake_timeout_ms = d.o.handshake_timeout_ms;
	if (d.o.idle_timeout_ms)
		gso.idle_timeout_ms = d.o.idle_timeout_ms;
	if (d.o.max_connections)
		gso.max_connections = d.o.max_connections;
	if (d.o.max_conns_per_peer)
		gso.max_conns_per_peer = d.o.max_conns_per_peer;
	if (d.o.health_reserve)
		gso.health_reserve = d.o.health_reserve;
	unsigned nm;
	const struct ing_grpc_method *methods = ing_svc_methods(d.svc, &nm);
	d.srv = ing_grpc_server_create(d.loop, &gso, methods, nm);
	if (!d.srv)
		goto fail;
	ing_svc_attach_server(d.svc, d.srv);
	int port = ing_grpc_server_port(d.srv);
	if (fleet_start(&d, port))
		goto fail;
	if (d.o.metrics_listen) {
		d.metrics = ing_metrics_srv_create(d.loop, d.o.metrics_listen, metrics_render, &d);
		if (!d.metrics)
			goto fail;
	}

	d.sfd = signalfd(-1, &ss, SFD_NONBLOCK | SFD_CLOEXEC);
	if (d.sfd < 0) {
		ING_ERR(COMP, "signalfd: %s", strerror(errno));
		goto fail;
	}
	rc = ing_loop_add_fd(d.loop, d.sfd, EPOLLIN, signal_cb, &d);
	if (rc) {
		ING_ERR(COMP, "cannot watch signals: %s", strerror(-rc));
		goto fail;
	}
	ing_grpc_server_set_serving(d.srv, true);

	ING_INFO(COMP, "h3000 ingestd %s serving gRPC on %s (port %d, %s)", ING_VERSION, d.o.listen,
		 port, d.o.tls_cert ? "TLS" : "cleartext h2c");
	ING_INFO(COMP, "pool %s: %u slots, largest %" PRIu64 " bytes, %s, node %d", d.o.pool, total,
		 ing_pool_max_len(d.pool), ing_pool_on_hugepages(d.pool) ? "hugepages" : "4 KiB pages",
		 pool_o.numa_node);
	ING_INFO(COMP, "persistence: %u workers, sink %s, data dir %s", d.o.workers,
		 d.o.sink == ING_SINK_FILE ? "file" : "null", d.o.data_dir);
	ING_INFO(COMP, "sessions: credits %u, max frame %" PRIu64 ", frame timeout %u s", d.o.credits,
		 d.o.max_frame && d.o.max_frame < ing_pool_max_len(d.pool) ? d.o.max_frame :
									     ing_pool_max_len(d.pool),
		 d.o.frame_timeout_ms / 1000);
	ING_INFO(COMP, "limits: connections %u (%u per address, +%u for health), handshake %u ms, idle %u s; "
		 "sessions %u (%u per address); slot stall %u ms%s",
		 gso.max_connections, gso.max_conns_per_peer, gso.health_reserve,
		 gso.handshake_timeout_ms, gso.idle_timeout_ms / 1000, so.max_sessions,
		 so.max_sessions_per_peer ? so.max_sessions_per_peer : ING_DEFAULT_MAX_SESSIONS_PER_PEER,
		 so.slot_stall_ms ? so.slot_stall_ms : ING_DEFAULT_SLOT_STALL_MS,
		 d.o.tls_client_ca ? "; client certificates required" : "");
	ING_INFO(COMP, "transports: gRPC stream (PushFrames) yes; RDMA READ %s (%s)",
		 d.rdma ? "yes" : "no", d.rdma_note);
	if (d.o.auth_token_file)
		ING_INFO(COMP, "authentication: shared token from %s required (Negotiate authToken; "
			 "Stats: authorization: Bearer; health open)", d.o.auth_token_file);
	else
		ING_INFO(COMP, "authentication: off (any client may stream; see --auth-token-file)");

	if (d.o.port_file) {
		rc = write_port_file(d.o.port_file, port);
		if (rc) {
			ING_ERR(COMP, "cannot write port file %s: %s", d.o.port_file, strerror(-rc));
			goto fail;
		}
	}
	if (d.metrics && d.o.metrics_port_file) {
		rc = write_port_file(d.o.metrics_port_file, ing_metrics_srv_port(d.metrics));
		if (rc) {
			ING_ERR(COMP, "cannot write metrics port file %s: %s", d.o.metrics_port_file,
				strerror(-rc));
			goto fail;
		}
	}
	if (d.o.ready_fd >= 0) {
		char line[32];
		int n = snprintf(line, sizeof(line), "READY %d\n", port);
		if (write(d.o.ready_fd, line, (size_t)n) != n)
			ING_WARN(COMP, "--ready-fd %d: %s", d.o.ready_fd, strerror(errno));
		close(d.o.ready_fd);
	}

	/* systemd (Type=notify): ready now; watchdog pings at half its timeout */
	uint64_t wd_usec = 0;
	if (sd_watchdog_enabled(0, &wd_usec) > 0 && wd_usec > 0) {
		d.watchdog_ns = wd_usec * 1000ull / 2;
		ing_timer_arm(d.loop, &d.watchdog, ing_now_ns());
		ING_INFO(COMP, "systemd watchdog: %llu ms, pinging every %llu ms",
			 (unsigned long long)(wd_usec / 1000), (unsigned long long)(d.watchdog_ns / 1000000));
	}
	(void)sd_notifyf(0, "READY=1\nSTATUS=serving gRPC on port %d\nMAINPID=%d", port, (int)getpid());

	rc = ing_loop_run(d.loop);
	if (rc) {
		ING_ERR(COMP, "event loop failed: %s", strerror(-rc));
		goto fail;
	}
	teardown(&d);
	if (d.not_drained) {
		/* the producer got no DURABLE ack for these: not a clean stop (exit status 3) */
		ING_ERR(COMP, "stopped with %" PRIu64 " frames not drained (failed, not durable)",
			d.not_drained);
		return 3;
	}
	ING_INFO(COMP, "stopped");
	return 0;
fail:
	teardown(&d);
	return 1;
}
