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
#include "common/token.h"
#include "common/parse.h"
#include "common/clock.h"
#include "common/log.h"
#include "control/grpc.h"
#include "control/loop.h"
#include "control/service.h"
#include "dataplane/dataplane.h"
#include "dataplane/rdma.h"
#include "numa/numa.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
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
	/* RDMA data path (dataplane/rdma.h) */
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
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: ingestd [options]\n"
		"h3000 ingest node: receives frames over gRPC (RDMA later), stores them durably.\n"
		"\n"
		"  --listen ADDR        gRPC listen address (default 127.0.0.1:50051; port 0: pick one)\n"
		"  --data-dir DIR       frames/ and catalog.db go here (default ./ingest-data)\n"
		"  --pool SPEC          MR pool size classes SIZE:COUNT,... (default 4M:16,16M:8,64M:4)\n"
		"  --hugepages MODE     auto|on|off (default off: EAL --no-huge, 4 KiB pages)\n"
		"  --workers N          persistence workers (default %d)\n"
		"  --sink file|null     write frames to files (default) or drop them (benchmarks)\n"
		"  --credits N          most frames in flight per session (default %d)\n"
		"  --max-frame SIZE     largest frame accepted (default: the largest pool slot)\n"
		"  --frame-timeout SEC  a frame must complete within SEC after its first chunk (default %u)\n"
		"  --lcores LIST        EAL lcores: control first, then dataplane (default: the plan)\n"
		"  --pool-node N        NUMA node of the pool (default: the plan)\n"
		"  --rdma-dev NAME      RDMA device to place around (default: the first found)\n"
		"  --rdma MODE          auto|on|off: RDMA READ data path (default auto: on when a device\n"
		"                       and an rdma_cm listener work, else gRPC fallback only, logged)\n"
		"  --rdma-addr ADDR     rdma_cm listen address (default: an address of the RDMA netdev)\n"
		"  --rdma-port N        rdma_cm listen port (default 7472)\n"
		"  --poll-mode MODE     dataplane lcores: adaptive (default) or busy\n"
		"  --max-sessions N     session table size (default %u)\n"
		"  --session-idle SEC   a negotiated session with no stream expires after SEC (default %u)\n"
		"  --persist-ring N     frames queued per persistence worker, a power of 2 (default %u)\n"
		"  --log-level LEVEL    err|warn|info|debug (default info)\n"
		"  --port-file PATH     write the bound TCP port to PATH once listening\n"
		"  --ready-fd N         write \"READY <port>\\n\" to fd N once serving, then close it\n"
		"  --tls-cert PEM       TLS certificate (with --tls-key: TLS + ALPN h2, else h2c)\n"
		"  --tls-key PEM        TLS private key\n"
		"  --auth-token-file PATH  require this shared secret (one line, %u..%u printable\n"
		"                       characters, mode 600): Negotiate authToken, a negotiated\n"
		"                       session for streams, 'authorization: Bearer' for Stats\n"
		"  --tls-client-ca PEM  mTLS: require a client certificate signed by this CA; its\n"
		"                       subject is the client's identity (logs, session binding)\n"
		"limits (fair sharing under abuse):\n"
		"  --handshake-timeout-ms N  close a connection without TLS handshake, HTTP/2\n"
		"                       preface and SETTINGS within N ms (default 5000)\n"
		"  --idle-timeout SEC   close a connection with no open stream after SEC (default 60)\n"
		"  --max-connections N  connections in total (default 256; when full, the one idle\n"
		"                       longest is evicted)\n"
		"  --max-conns-per-peer N  connections per client address (default 32)\n"
		"  --health-reserve N   extra connections for Health/Check only when all are busy\n"
		"                       (default 8)\n"
		"  --max-sessions-per-peer N  sessions per client address (default 64)\n"
		"  --max-slots-per-peer N  pool slots per client address while another address waits\n"
		"                       for one (default: 3/4 of the pool)\n"
		"  --slot-stall-ms N    a frame whose bytes stop for N ms fails (retryable) and frees\n"
		"                       its slot (default 5000)\n"
		"  --auth-fail-burst N  failed authentications per address before back-off (default\n"
		"                       20, one more each second)\n"
		"  --auth-backoff-max SEC  longest back-off after failed authentication (default 60)\n"
		"  -h, --help           this text\n"
		"exit status: 0 stopped cleanly, 1 runtime error, 2 usage error, 3 stopped but\n"
		"  frames in flight at the drain deadline were failed (not durable)\n",
		ING_DEFAULT_WORKERS, ING_DEFAULT_CREDITS, ING_DEFAULT_FRAME_TIMEOUT_MS / 1000,
		ING_DEFAULT_MAX_SESSIONS, ING_DEFAULT_SESSION_IDLE_MS / 1000, ING_DEFAULT_RING_SIZE,
		ING_AUTH_TOKEN_MIN, ING_AUTH_TOKEN_MAX);
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


/* Usage error: one line, exit status 2. */
static int bad_usage(const char *fmt, const char *arg)
{
	fprintf(stderr, "ingestd: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, " (see --help)\n");
	return 2;
}

static int parse_args(int argc, char **argv, struct ing_ingestd_opts *o)
{
	enum { O_LISTEN = 256, O_DATA, O_POOL, O_HUGE, O_WORKERS, O_SINK, O_CREDITS, O_MAXF,
	       O_FTO, O_LCORES, O_PNODE, O_LOG, O_PORTF, O_CERT, O_KEY, O_READY, O_RDMA, O_MAXS, O_PRING, O_SIDLE,
	       O_RDMA_MODE, O_RDMA_ADDR, O_RDMA_PORT, O_POLL, O_AUTH, O_CLIENT_CA, O_HS_TO,
	       O_IDLE_TO, O_MAXC, O_MAXC_PEER, O_HEALTH_RES, O_MAXS_PEER, O_SLOTS_PEER, O_STALL,
	       O_AUTH_BURST, O_AUTH_BACKOFF };
	static const struct option lo[] = {
		{ "listen", required_argument, NULL, O_LISTEN },
		{ "data-dir", required_argument, NULL, O_DATA },
		{ "pool", required_argument, NULL, O_POOL },
		{ "hugepages", required_argument, NULL, O_HUGE },
		{ "workers", required_argument, NULL, O_WORKERS },
		{ "sink", required_argument, NULL, O_SINK },
		{ "credits", required_argument, NULL, O_CREDITS },
		{ "max-frame", required_argument, NULL, O_MAXF },
		{ "frame-timeout", required_argument, NULL, O_FTO },
		{ "lcores", required_argument, NULL, O_LCORES },
		{ "pool-node", required_argument, NULL, O_PNODE },
		{ "log-level", required_argument, NULL, O_LOG },
		{ "port-file", required_argument, NULL, O_PORTF },
		{ "tls-cert", required_argument, NULL, O_CERT },
		{ "tls-key", required_argument, NULL, O_KEY },
		{ "ready-fd", required_argument, NULL, O_READY },
		{ "rdma-dev", required_argument, NULL, O_RDMA },
		{ "max-sessions", required_argument, NULL, O_MAXS },
		{ "persist-ring", required_argument, NULL, O_PRING },
		{ "session-idle", required_argument, NULL, O_SIDLE },
		{ "rdma", required_argument, NULL, O_RDMA_MODE },
		{ "rdma-addr", required_argument, NULL, O_RDMA_ADDR },
		{ "rdma-port", required_argument, NULL, O_RDMA_PORT },
		{ "poll-mode", required_argument, NULL, O_POLL },
		{ "auth-token-file", required_argument, NULL, O_AUTH },
		{ "tls-client-ca", required_argument, NULL, O_CLIENT_CA },
		{ "handshake-timeout-ms", required_argument, NULL, O_HS_TO },
		{ "idle-timeout", required_argument, NULL, O_IDLE_TO },
		{ "max-connections", required_argument, NULL, O_MAXC },
		{ "max-conns-per-peer", required_argument, NULL, O_MAXC_PEER },
		{ "health-reserve", required_argument, NULL, O_HEALTH_RES },
		{ "max-sessions-per-peer", required_argument, NULL, O_MAXS_PEER },
		{ "max-slots-per-peer", required_argument, NULL, O_SLOTS_PEER },
		{ "slot-stall-ms", required_argument, NULL, O_STALL },
		{ "auth-fail-burst", required_argument, NULL, O_AUTH_BURST },
		{ "auth-backoff-max", required_argument, NULL, O_AUTH_BACKOFF },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	uint64_t v;
	int c;

	opterr = 0;
	while ((c = getopt_long(argc, argv, ":h", lo, NULL)) != -1) {
		switch (c) {
		case 'h':
			usage(stdout);
			return 1;
		case O_LISTEN:
			if (!listen_ok(optarg))
				return bad_usage("--listen: '%s' is not host:port or [v6]:port (port 0..65535)",
						 optarg);
			o->listen = optarg;
			break;
		case O_DATA:
			if (!*optarg)
				return bad_usage("--data-dir: empty path%s", "");
			o->data_dir = optarg;
			break;
		case O_POOL:
			o->pool = optarg;
			break;
		case O_HUGE:
			if (!strcasecmp(optarg, "on"))
				o->hugepages = 1;
			else if (!strcasecmp(optarg, "off"))
				o->hugepages = 0;
			else if (!strcasecmp(optarg, "auto"))
				o->hugepages = -1;
			else
				return bad_usage("--hugepages: '%s' is not auto, on or off", optarg);
			break;
		case O_WORKERS:
			if (parse_u64(optarg, ING_PLAN_MAX_WORKERS, &v) || v == 0)
				return bad_usage("--workers: '%s' is not a count in 1..64", optarg);
			o->workers = (unsigned)v;
			break;
		case O_SINK:
			if (!strcmp(optarg, "file"))
				o->sink = ING_SINK_FILE;
			else if (!strcmp(optarg, "null"))
				o->sink = ING_SINK_NULL;
			else
				return bad_usage("--sink: '%s' is not file or null", optarg);
			break;
		case O_CREDITS:
			if (parse_u64(optarg, 65536, &v) || v == 0)
				return bad_usage("--credits: '%s' is not a count in 1..65536", optarg);
			o->credits = (unsigned)v;
			break;
		case O_MAXF:
			if (parse_size(optarg, &o->max_frame))
				return bad_usage("--max-frame: '%s' is not a size (e.g. 64M)", optarg);
			break;
		case O_FTO:
			if (parse_u64(optarg, 86400, &v) || v == 0)
				return bad_usage("--frame-timeout: '%s' is not seconds in 1..86400", optarg);
			o->frame_timeout_ms = (unsigned)v * 1000u;
			break;
		case O_LCORES:
			o->lcores = optarg;
			break;
		case O_PNODE:
			if (parse_u64(optarg, 1023, &v))
				return bad_usage("--pool-node: '%s' is not a NUMA node number", optarg);
			o->pool_node = (int)v;
			break;
		case O_LOG: {
			enum ing_log_level l;
			if (ing_log_parse_level(optarg, &l))
				return bad_usage("--log-level: '%s' is not err, warn, info or debug", optarg);
			o->log_level = optarg;
			break;
		}
		case O_PORTF:
			o->port_file = optarg;
			break;
		case O_CERT:
			o->tls_cert = optarg;
			break;
		case O_KEY:
			o->tls_key = optarg;
			break;
		case O_READY:
			if (parse_u64(optarg, 65535, &v) || v < 3)
				return bad_usage("--ready-fd: '%s' is not a file descriptor >= 3", optarg);
			if (fcntl((int)v, F_GETFD) < 0)
				return bad_usage("--ready-fd: '%s' is not an open file descriptor", optarg);
			o->ready_fd = (int)v;
			break;
		case O_RDMA:
			o->rdma_dev = optarg;
			break;
		case O_MAXS:
			if (parse_u64(optarg, 1u << 20, &v) || v == 0)
				return bad_usage("--max-sessions: '%s' is not a count", optarg);
			o->max_sessions = (unsigned)v;
			break;
		case O_SIDLE:
			if (parse_u64(optarg, 7 * 86400, &v) || v == 0)
				return bad_usage("--session-idle: '%s' is not seconds in 1..604800", optarg);
			o->session_idle_ms = (unsigned)v * 1000u;
			break;
		case O_PRING:
			if (parse_u64(optarg, 1u << 20, &v) || v < 2 || (v & (v - 1)))
				return bad_usage("--persist-ring: '%s' is not a power of 2 >= 2", optarg);
			o->persist_ring = (unsigned)v;
			break;
		case O_RDMA_MODE:
			if (!strcasecmp(optarg, "on"))
				o->rdma = 1;
			else if (!strcasecmp(optarg, "off"))
				o->rdma = 0;
			else if (!strcasecmp(optarg, "auto"))
				o->rdma = -1;
			else
				return bad_usage("--rdma: '%s' is not auto, on or off", optarg);
			break;
		case O_RDMA_ADDR:
			o->rdma_addr = optarg;
			break;
		case O_RDMA_PORT:
			if (parse_u64(optarg, 65535, &v))
				return bad_usage("--rdma-port: '%s' is not a port", optarg);
			o->rdma_port = (unsigned)v;
			break;
		case O_POLL:
			if (ing_rdma_parse_poll_mode(optarg, &o->poll_mode))
				return bad_usage("--poll-mode: '%s' is not busy or adaptive", optarg);
			break;
		case O_AUTH:
			if (!*optarg)
				return bad_usage("--auth-token-file: empty path%s", "");
			o->auth_token_file = optarg;
			break;
		case O_CLIENT_CA:
			o->tls_client_ca = optarg;
			break;
		case O_HS_TO:
			if (parse_u64(optarg, 600000, &v) || v < 10)
				return bad_usage("--handshake-timeout-ms: '%s' is not milliseconds in 10..600000", optarg);
			o->handshake_timeout_ms = (unsigned)v;
			break;
		case O_IDLE_TO:
			if (parse_u64(optarg, 86400, &v) || v == 0)
				return bad_usage("--idle-timeout: '%s' is not seconds in 1..86400", optarg);
			o->idle_timeout_ms = (unsigned)v * 1000u;
			break;
		case O_MAXC:
			if (parse_u64(optarg, 65536, &v) || v == 0)
				return bad_usage("--max-connections: '%s' is not a count in 1..65536", optarg);
			o->max_connections = (unsigned)v;
			break;
		case O_MAXC_PEER:
			if (parse_u64(optarg, 65536, &v) || v == 0)
				return bad_usage("--max-conns-per-peer: '%s' is not a count in 1..65536", optarg);
			o->max_conns_per_peer = (unsigned)v;
			break;
		case O_HEALTH_RES:
			if (parse_u64(optarg, 1024, &v) || v == 0)
				return bad_usage("--health-reserve: '%s' is not a count in 1..1024", optarg);
			o->health_reserve = (unsigned)v;
			break;
		case O_MAXS_PEER:
			if (parse_u64(optarg, 1u << 20, &v) || v == 0)
				return bad_usage("--max-sessions-per-peer: '%s' is not a count", optarg);
			o->max_sessions_per_peer = (unsigned)v;
			break;
		case O_SLOTS_PEER:
			if (parse_u64(optarg, 1u << 20, &v) || v == 0)
				return bad_usage("--max-slots-per-peer: '%s' is not a count", optarg);
			o->max_slots_per_peer = (unsigned)v;
			break;
		case O_STALL:
			if (parse_u64(optarg, 86400000, &v) || v < 10)
				return bad_usage("--slot-stall-ms: '%s' is not milliseconds >= 10", optarg);
			o->slot_stall_ms = (unsigned)v;
			break;
		case O_AUTH_BURST:
			if (parse_u64(optarg, 1000000, &v) || v == 0)
				return bad_usage("--auth-fail-burst: '%s' is not a count", optarg);
			o->auth_fail_burst = (unsigned)v;
			break;
		case O_AUTH_BACKOFF:
			if (parse_u64(optarg, 86400, &v) || v == 0)
				return bad_usage("--auth-backoff-max: '%s' is not seconds in 1..86400", optarg);
			o->auth_backoff_max_ms = (unsigned)v * 1000u;
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
	struct ing_pool_opts po;
	char why[96] = "", msg[320];
	if (o->auth_token_file) {
		char awhy[PATH_MAX + 96];
		if (ing_token_file_read(o->auth_token_file, o->auth_token, sizeof(o->auth_token), awhy,
				    sizeof(awhy))) {
			fprintf(stderr, "ingestd: --auth-token-file: '%s': %s (see --help)\n",
				o->auth_token_file, awhy);
			return 2;
		}
	}
	ing_pool_opts_init(&po);
	if (!pool_spec_ok(o->pool, why, sizeof(why)) || ing_pool_parse_classes(&po, o->pool)) {
		snprintf(msg, sizeof(msg), "--pool: '%.120s' is not SIZE:COUNT,... (e.g. 4M:16,16M:8): %s",
			 o->pool, why);
		return bad_usage("%s", msg);
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
};

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
		if (d->phase == PH_RUN) {
			ING_INFO(COMP, "%s: stopping (health NOT_SERVING, GOAWAY, up to %u s to drain)",
				 strsignal((int)si.ssi_signo), DRAIN_MS / 1000);
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
	if (d->loop)
		ing_timer_cancel(d->loop, &d->tick);
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
	if (d.o.ready_fd >= 0) {
		char line[32];
		int n = snprintf(line, sizeof(line), "READY %d\n", port);
		if (write(d.o.ready_fd, line, (size_t)n) != n)
			ING_WARN(COMP, "--ready-fd %d: %s", d.o.ready_fd, strerror(errno));
		close(d.o.ready_fd);
	}

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
