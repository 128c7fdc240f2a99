/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ingest-bench - latency benchmark of an ingest node, on libingest's public API.
 *
 * Per transport and frame size: finds the node's capacity (closed loop, every credit
 * busy), then offers a list of fractions of it open loop (frame i is due at i/rate s; its
 * latency counts from then, so waiting for a credit or a buffer counts: no coordinated
 * omission), warm-up excluded. Every latency goes into a <1 %-error histogram
 * (common/hist.h): submit->RECEIVED, submit->DURABLE and the node's own stages that come
 * back in each DURABLE Ack (received, crc, written, synced, catalogued, ack). The floors
 * are measured in the same run: a same-size TCP loopback round trip and an O_DIRECT
 * write + fdatasync in the node's data dir. Writes a results directory: results.json,
 * points.csv, timeline.csv, gnuplot PNGs and report.md that embeds them.
 *
 *   ingest-bench --server 127.0.0.1:50051 --data-dir /srv/ingest --out results/
 *
 * main is the steps: options, the node reachable (else nothing is written), the floors,
 * the sweep, the outputs. Exit status in --help.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "common/json.h"
#include "common/cli.h"
#include "common/clock.h"
#include "common/hist.h"
#include "common/io.h"
#include "common/log.h"
#include "common/parse.h"
#include "common/token.h"
#include "control/net/grpc.h"
#include "git_rev.h"            /* ING_GIT_REV: generated at build time (cmake/git_rev.cmake) */
#include "h3000.pb-c.h"
#include "ingest/producer.h"
#include "producer/synth.h"

#define DEFAULT_SERVER "127.0.0.1:50051"
#define DEFAULT_LOADS "10,30,50,70,90"
#define BUFFER_BUDGET (512ull << 20)
#define MAX_LOADS 16
#define MAX_SIZES 8
#define MAX_XPORTS 3
#define MAX_REPEAT 20
#define TL_BIN_NS 500000000ull        /* throughput-over-time bins */
#define DRAIN_NS 30000000000ull       /* frames in flight after a phase: at most 30 s */
#define LATE_NS 2000000000ull         /* submits may trail the schedule by 2 s, then stop */

/* Histograms of one point: producer view, then the node's stages (enum ing_node_stage). */
/* then RECEIVED taken apart: lag + outside + the node's admitted -> received (its RECEIVED ack) */
enum { H_RECEIVED, H_DURABLE, H_NODE0, H_NODE_TOTAL = H_NODE0 + ING_NODE_STAGES, H_RX_LAG,
       H_RX_OUT, H_N };
static const char *const h_name[H_N] = {
	"received", "durable", "node.received", "node.crc", "node.written", "node.synced",
	"node.catalogued", "node.ack", "node.total", "received.lag", "received.outside",
};
static const char *const h_what[H_N] = {
	"submit -> RECEIVED ack (producer)", "submit -> DURABLE ack (producer)",
	"admitted -> bytes in slot", "-> crc checked (incl. persist queue)", "-> written",
	"-> fdatasync'ed", "-> dir fsync + catalog commit", "-> ack handed to the stream",
	"admitted -> ack (node total)",
	"RECEIVED: scheduled -> submitted (producer behind schedule)",
	"RECEIVED: submitted -> ack, minus the node's admitted -> received "
	"(credit/slot waits, wire, frames ahead on the stream, the ack's way back)",
};
static const double pq[] = { 0.50, 0.90, 0.95, 0.99, 0.999 };
static const char *const pq_name[] = { "p50", "p90", "p95", "p99", "p999" };
#define NPQ 5

/* What a sweep runs over: the gRPC stream, RDMA READ pull, RDMA WRITE push (docs/PUSH.md). */
enum bx { BX_GRPC, BX_RDMA, BX_RDMA_WRITE };

struct cfg {
	const char *server, *out, *data_dir, *git_rev, *auth_token_file, *wafer;
	const char *transports, *sizes, *loads;   /* the lists as given */
	enum bx xport[MAX_XPORTS];
	unsigned nxport;
	struct ing_size_range size[MAX_SIZES];    /* a sweep group per item; a range: mixed */
	unsigned nsize;
	double load[MAX_LOADS];
	unsigned nload;
	unsigned duration_ms, warmup_ms, capacity_ms;
	unsigned min_frames;   /* an open-loop point's window holds at least this many frames */
	unsigned repeat;           /* passes over the loads per group (the spread) */
	const char *tls_ca, *tls_cert, *tls_key, *tls_server_name;   /* TLS when tls_ca is set */
	double capacity_fps;       /* 0: measure */
	unsigned credits;
	bool json, no_plots;
	unsigned max_time_ms;
	/* floors measured elsewhere (ib_read_lat in the RDMA guest): --floor NAME=P50:P99 ms */
	struct { char name[64]; double p50_ms, p99_ms; } xfloor[4];
	unsigned nxfloor;
	char token[ING_AUTH_TOKEN_MAX + 2];
};

/* One repetition of a load point: the figures whose spread the report shows. */
struct rep_sum {
	double achieved_fps, mb_s;
	double durable_p50_ms, durable_p99_ms, durable_p999_ms, received_p99_ms;
	uint64_t ok, failed;
	double load1;              /* the machine's 1-minute load average when it ended */
};

struct point {
	enum bx xport;
	uint64_t size, size_lo;    /* the largest frame; the smallest (== size: one size) */
	double load;               /* fraction; 0 for the capacity run */
	double offered_fps, achieved_fps, mb_s;
	uint64_t sent, ok, failed, unsent, late_max_ns, ok_bytes;
	struct ing_hist h[H_N];    /* a load point: every repetition's samples */
	unsigned nrep;
	struct rep_sum rep[MAX_REPEAT];
};

/* What the node said about itself (Negotiate, Stats) before the run, and after it. */
struct node_info {
	bool known;
	char err[256];
	char version[64], node_id[ING_ID_MAX + 1], transport_note[256], negotiate_note[256];
	char available[64];        /* "grpc,rdma" */
	uint64_t max_frame, pool_bytes, disk_bytes;
	unsigned credits, max_chunk, pool_slots, lcores, sessions_before;
	bool hugepages, tier;
	uint64_t durable_before, durable_after;   /* framesDurable (all producers) */
	bool after_known;
};

/* The machine's load: /proc/loadavg (and CPU pressure, where the kernel has it). */
struct load_info {
	double before[3], after[3];   /* 1, 5, 15 minutes */
	double psi_before, psi_after; /* /proc/pressure/cpu "some avg60", -1: none */
	long cpus;
	bool loaded;                  /* before[0] > LOADED_PER_CPU x cpus: a warning */
};
#define LOADED_PER_CPU 0.5

struct floor {
	uint64_t size;             /* the largest frame of its --sizes item */
	struct ing_hist tcp, disk;
	char disk_note[160];
};

/* one frame in flight */
struct rec {
	uint64_t t_sched;
	uint64_t len;
	int buf;                   /* index into bufs, -1 once RECEIVED */
	bool measured, used;
};

struct run {
	const struct cfg *c;
	struct ing_producer *p;
	void **bufs;
	uint32_t *crcs;
	uint64_t *lens;            /* a buffer's frame length (a --sizes range: one per buffer) */
	int *free_buf;
	unsigned nbuf, nfree;
	struct rec *recs;
	unsigned nrec;
	int *free_rec;
	unsigned nfree_rec;
	uint64_t seq;
	char tag[48];
	/* throughput over time (whole run) */
	uint64_t t_run0;
	uint64_t *tl_bytes;
	unsigned tl_n;
	/* progress */
	bool tty;
	unsigned point_no, points_total;
	uint64_t t_plan0;          /* when the sweep started, for the ETA */
	uint64_t all_durable;      /* every frame this run made DURABLE (warm-up included) */
};

static volatile sig_atomic_t stop_flag;
static void on_signal(int sig)
{
	(void)sig;
	stop_flag = 1;
}

static double ms(uint64_t ns)
{
	return (double)ns / 1e6;
}

/* "1.0 MiB", or "1.0-4.0 MiB" for a --sizes range */
static const char *size_label(const struct point *p, char *buf, size_t n)
{
	if (p->size_lo == p->size)
		snprintf(buf, n, "%.1f MiB", (double)p->size / 1048576.0);
	else
		snprintf(buf, n, "%.1f-%.1f MiB", (double)p->size_lo / 1048576.0,
			 (double)p->size / 1048576.0);
	return buf;
}

/* a size in results.json: a number, or {"min":..,"max":..} for a range */
static void json_size(FILE *f, uint64_t lo, uint64_t hi)
{
	if (lo == hi)
		fprintf(f, "%" PRIu64, hi);
	else
		fprintf(f, "{\"min\":%" PRIu64 ",\"max\":%" PRIu64 "}", lo, hi);
}

static const char *xname(enum bx t)
{
	return t == BX_RDMA ? "rdma" : t == BX_RDMA_WRITE ? "rdma-write" : "grpc";
}

/* What the producer got from Negotiate, in the same terms. */
static enum bx bx_of(struct ing_producer *p)
{
	if (ing_producer_transport(p) != ING_TRANSPORT_RDMA)
		return BX_GRPC;
	return strncmp(ing_producer_transport_note(p), "RDMA_WRITE", 10) ? BX_RDMA : BX_RDMA_WRITE;
}

/* min, median and max of n values picked by get (n >= 1) */
struct spread {
	double min, med, max;
};

static struct spread spread_of(const struct point *p, double (*get)(const struct rep_sum *))
{
	double v[MAX_REPEAT];
	unsigned n = p->nrep;
	for (unsigned i = 0; i < n; i++) {
		double x = get(&p->rep[i]);
		unsigned j = i;
		for (; j > 0 && v[j - 1] > x; j--)
			v[j] = v[j - 1];
		v[j] = x;
	}
	if (!n)
		return (struct spread){ 0, 0, 0 };
	return (struct spread){ v[0], n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2, v[n - 1] };
}

static double get_p50(const struct rep_sum *r) { return r->durable_p50_ms; }
static double get_p99(const struct rep_sum *r) { return r->durable_p99_ms; }
static double get_p999(const struct rep_sum *r) { return r->durable_p999_ms; }
static double get_rx_p99(const struct rep_sum *r) { return r->received_p99_ms; }
static double get_fps(const struct rep_sum *r) { return r->achieved_fps; }

/* ------------------------------------------------------------------ options */

static void cfg_init(void *p)
{
	struct cfg *c = p;
	memset(c, 0, sizeof(*c));
	c->server = DEFAULT_SERVER;
	c->out = "bench-results";
	c->wafer = "ingest-bench";
	c->git_rev = ING_GIT_REV;
	c->repeat = 1;
	c->transports = "grpc";
	c->sizes = "4M";
	c->loads = DEFAULT_LOADS;
	c->duration_ms = 5000;
	c->min_frames = 10;
	c->warmup_ms = 1000;
	c->capacity_ms = 4000;
	c->max_time_ms = 1800000;
}

static int set_capacity_fps(const struct ing_opt *d, void *cfg, const char *v, char *why,
			    size_t whylen)
{
	char *e;
	(void)d;
	errno = 0;
	double x = strtod(v, &e);
	if (errno || e == v || *e || x < 0.01 || x > 1e6) {
		snprintf(why, whylen, "'%.64s' is not frames per second in 0.01..1000000", v);
		return -EINVAL;
	}
	((struct cfg *)cfg)->capacity_fps = x;
	return 0;
}

/* --floor NAME=P50:P99, up to 4 */
static int set_floor(const struct ing_opt *d, void *cfg, const char *v, char *why, size_t whylen)
{
	struct cfg *c = cfg;
	const char *eq = strrchr(v, '=');
	(void)d;
	if (c->nxfloor == 4) {
		snprintf(why, whylen, "at most 4 floors");
		return -EINVAL;
	}
	if (!eq || eq == v || (size_t)(eq - v) >= sizeof(c->xfloor[0].name) ||
	    sscanf(eq + 1, "%lf:%lf", &c->xfloor[c->nxfloor].p50_ms, &c->xfloor[c->nxfloor].p99_ms) != 2) {
		snprintf(why, whylen, "'%.64s' is not NAME=P50:P99 (milliseconds)", v);
		return -EINVAL;
	}
	memcpy(c->xfloor[c->nxfloor].name, v, (size_t)(eq - v));
	c->xfloor[c->nxfloor].name[eq - v] = 0;
	c->nxfloor++;
	return 0;
}

#define C struct cfg
static const struct ing_opt opts[] = {
	ING_OPT_GROUP_("The node"),
	ING_OPT_CUSTOM_(C, "server", server, ing_opt_set_hostport, "HOST:PORT",
			"ingestd's gRPC address (default " DEFAULT_SERVER ")"),
	ING_OPT_PATH_(C, "auth-token-file", auth_token_file, "PATH", "shared secret of an ingestd run with --auth-token-file"),
	ING_OPT_PATH_(C, "tls-ca", tls_ca, "PEM", "TLS: verify the node's certificate against this CA and its\n"
		      "name (ingestd --tls-cert/--tls-key)"),
	ING_OPT_PATH_(C, "tls-cert", tls_cert, "PEM", "client certificate for a node with --tls-client-ca"),
	ING_OPT_PATH_(C, "tls-key", tls_key, "PEM", "its private key"),
	ING_OPT_STR_(C, "tls-server-name", tls_server_name, "NAME", "name to verify instead of --server's host"),
	ING_OPT_GROUP_("The sweep"),
	ING_OPT_STR_(C, "transport", transports, "LIST", "grpc,rdma,rdma-write (default grpc; rdma: READ pull,\n"
		     "rdma-write: WRITE push)"),
	ING_OPT_STR_(C, "sizes", sizes, "LIST", "frame sizes, a sweep per item: sizes and MIN-MAX ranges\n"
		     "(a range: mixed sizes), e.g. 4M,16M or 1M-4M (default 4M)"),
	ING_OPT_STR_(C, "loads", loads, "LIST", "percent of the measured capacity (default " DEFAULT_LOADS ")"),
	ING_OPT_DURATION_(C, "duration", duration_ms, 100, 3600000, "measured time per load point"),
	ING_OPT_UINT_(C, "min-frames", min_frames, 1, 1000000, "frames an open-loop point measures at least (default 10):\n"
		      "at a rate too low for --duration its window is longer (said on a line)"),
	ING_OPT_DURATION_(C, "warmup", warmup_ms, 0, 600000, "time before each point's measurement"),
	ING_OPT_UINT_(C, "repeat", repeat, 1, MAX_REPEAT, "passes over the loads (each point measured N times: the\n"
		      "report gives the spread of P50/P99 and throughput)"),
	ING_OPT_DURATION_(C, "capacity-time", capacity_ms, 500, 600000, "closed loop to find the capacity"),
	ING_OPT_CUSTOM_(C, "capacity-fps", capacity_fps, set_capacity_fps, "F", "skip that and use F frames/s as 100 %"),
	ING_OPT_UINT_(C, "credits", credits, 1, 65535, "frames in flight wanted (default: the node's)"),
	ING_OPT_DURATION_(C, "max-time", max_time_ms, 1000, 86400000, "refuse a sweep planned longer than this"),
	ING_OPT_GROUP_("Floors"),
	ING_OPT_PATH_(C, "data-dir", data_dir, "DIR", "the node's data dir: the disk floor is measured there\n"
		      "(O_DIRECT write + fdatasync of one frame); default: none"),
	ING_OPT_CUSTOM_(C, "floor", xfloor, set_floor, "NAME=P50:P99", "a floor measured elsewhere, in ms (e.g. ib_read_lat in the\n"
			"RDMA guest), shown in the report; up to 4"),
	ING_OPT_GROUP_("Output"),
	ING_OPT_PATH_(C, "out", out, "DIR", "results directory (created; default bench-results)"),
	ING_OPT_STR_(C, "git-rev", git_rev, "REV", "the revision recorded (default: this build's, " ING_GIT_REV ")"),
	ING_OPT_BOOL_(C, "no-plots", no_plots, "no gnuplot (data and report only)"),
	ING_OPT_BOOL_(C, "json", json, "results.json also on stdout"),
	ING_OPT_LOG_LEVEL_ENTRY(C, "warn"),
	{ "capacity-s", "S", ING_OPT_DURATION, ING_OPT_FIELD(C, capacity_ms, unsigned), 500, 600000,
	  1000, NULL, NULL, NULL, "capacity-time", 0 },
};

static const struct ing_cli cli = {
	.prog = "ingest-bench",
	.synopsis = "[options]",
	.summary = "latency benchmark of an h3000 ingest node: capacity, open-loop sweep, report",
	.about = "Per transport and frame size: the node's capacity (closed loop, every credit\n"
		 "busy), then each --loads fraction of it open loop (latency from each frame's\n"
		 "scheduled time: no coordinated omission). Floors measured in the same run (TCP\n"
		 "loopback round trip, O_DIRECT write + fdatasync). Writes report.md with plots,\n"
		 "results.json, points.csv and timeline.csv into --out.\n"
		 "For comparing runs, each report records the node (version, pool, transports,\n"
		 "credits, from its Negotiate and Stats), this tool's version and git revision, the\n"
		 "machine's load before, during and after (a warning when it was loaded), frames\n"
		 "other producers sent meanwhile, and with --repeat the spread over repetitions.\n",
	.opts = opts,
	.nopts = sizeof(opts) / sizeof(opts[0]),
	.max_args = 0,
	.init = cfg_init,
	.cfg_size = sizeof(struct cfg),
	.notes = "Example:\n  ingest-bench --server 127.0.0.1:50051 --data-dir /srv/ingest --out results/\n",
	.exit_status = "  0  the sweep ran and every output was written\n"
		       "  1  a point had failed frames, the sweep stopped (what was measured is written),\n"
		       "     the node could not be reached (nothing is written), or an output failed\n"
		       "  2  usage error\n",
};

/* "a,b,c" into out[][32]: the count, or -EINVAL (an empty item, too many, too long) */
static int parse_list(const char *s, char out[][32], unsigned max)
{
	unsigned n = 0;
	while (*s) {
		const char *e = strchr(s, ',');
		size_t l = e ? (size_t)(e - s) : strlen(s);
		if (!l || l >= 32 || n == max)
			return -EINVAL;
		memcpy(out[n], s, l);
		out[n][l] = 0;
		n++;
		s += l + (e ? 1 : 0);
	}
	return n ? (int)n : -EINVAL;
}

/* Seconds the sweep takes as planned (the drains after each point not counted). */
static double planned_s(const struct cfg *c)
{
	return (double)(c->nxport * c->nsize) *
	       ((c->capacity_fps ? 0 : c->capacity_ms / 1e3 + 1) +
		c->repeat * c->nload * (c->duration_ms + c->warmup_ms) / 1e3);
}

/* Seconds the points not started yet take as planned (the ETA), after done of them. */
static double remaining_s(const struct cfg *c, unsigned done)
{
	unsigned per_group = c->repeat * c->nload + (c->capacity_fps ? 0 : 1);
	unsigned total = c->nxport * c->nsize * per_group, left = total > done ? total - done : 0;
	double cap = c->capacity_fps ? 0 : c->capacity_ms / 1e3 + 1, pt = (c->duration_ms + c->warmup_ms) / 1e3;
	/* capacity runs left: one per group not started */
	unsigned groups_left = left / per_group, in_group = left % per_group;
	return groups_left * (cap + c->repeat * c->nload * pt) +
	       (in_group > c->repeat * c->nload ? cap + c->repeat * c->nload * pt : in_group * pt);
}

static const char *fmt_secs(double s, char *buf, size_t n)
{
	unsigned v = (unsigned)(s + 0.5);
	if (v >= 3600)
		snprintf(buf, n, "%uh%02um", v / 3600, v % 3600 / 60);
	else if (v >= 60)
		snprintf(buf, n, "%um%02us", v / 60, v % 60);
	else
		snprintf(buf, n, "%us", v);
	return buf;
}

/* The options, then the lists and the token file: 0, 1 (--help/--version) or 2. */
static int parse_args(int argc, char **argv, struct cfg *c)
{
	char items[MAX_LOADS][32], why[512];
	int argi, n;

	cfg_init(c);
	int rc = ing_cli_parse(&cli, argc, argv, c, &argi);
	if (rc)
		return rc;
	if ((n = parse_list(c->transports, items, MAX_XPORTS)) < 0)
		return ing_cli_usage_error(&cli, "--transport: '%s' is not a list of up to %d of grpc, "
					   "rdma, rdma-write", c->transports, MAX_XPORTS);
	c->nxport = (unsigned)n;
	for (int i = 0; i < n; i++) {
		if (!strcmp(items[i], "grpc"))
			c->xport[i] = BX_GRPC;
		else if (!strcmp(items[i], "rdma") || !strcmp(items[i], "rdma-read"))
			c->xport[i] = BX_RDMA;
		else if (!strcmp(items[i], "rdma-write"))
			c->xport[i] = BX_RDMA_WRITE;
		else
			return ing_cli_usage_error(&cli, "--transport: '%s' is not grpc, rdma or rdma-write",
						   items[i]);
	}
	if (ing_parse_sizes(c->sizes, c->size, MAX_SIZES, &c->nsize, why, sizeof(why)))
		return ing_cli_usage_error(&cli, "--sizes: %s", why);
	if ((n = parse_list(c->loads, items, MAX_LOADS)) < 0)
		return ing_cli_usage_error(&cli, "--loads: '%s' is not a list of up to %d percents",
					   c->loads, MAX_LOADS);
	c->nload = (unsigned)n;
	for (int i = 0; i < n; i++) {
		char *e;
		errno = 0;
		double v = strtod(items[i], &e);
		if (errno || e == items[i] || *e || v < 0.1 || v > 200)
			return ing_cli_usage_error(&cli, "--loads: '%s' is not a percent in 0.1..200",
						   items[i]);
		c->load[i] = v / 100.0;
	}
	if (!!c->tls_cert != !!c->tls_key)
		return ing_cli_usage_error(&cli, "--tls-cert and --tls-key go together");
	if ((c->tls_cert || c->tls_server_name) && !c->tls_ca)
		return ing_cli_usage_error(&cli, "--tls-cert, --tls-key and --tls-server-name need "
					   "--tls-ca (the CA that signed the node's certificate)");
	if (c->auth_token_file &&
	    ing_token_file_read(c->auth_token_file, c->token, sizeof(c->token), why, sizeof(why)))
		return ing_cli_usage_error(&cli, "--auth-token-file: '%s': %s", c->auth_token_file, why);
	double planned = planned_s(c);
	if (planned > c->max_time_ms / 1e3)
		return ing_cli_usage_error(&cli, "the sweep would take about %.0f s, more than --max-time "
					   "%.0f s: fewer --sizes, --loads or --transport items, a "
					   "shorter --duration, or a larger --max-time", planned,
					   c->max_time_ms / 1e3);
	return 0;
}

/* ------------------------------------------------------------------ the floors */

struct tcp_srv {
	int lfd;
	uint64_t size;
	unsigned iters;
};

static void *tcp_echo(void *arg)
{
	struct tcp_srv *s = arg;
	int fd = accept(s->lfd, NULL, NULL);
	if (fd < 0)
		return NULL;
	struct timeval tv = { 10, 0 };   /* a stuck client never holds the thread */
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	uint8_t *b = malloc(1 << 20);
	for (unsigned i = 0; b && i < s->iters; i++) {
		uint64_t got = 0;
		while (got < s->size) {
			size_t want = s->size - got > (1 << 20) ? (1 << 20) : (size_t)(s->size - got);
			ssize_t r = read(fd, b, want);
			if (r <= 0)
				goto out;
			got += (uint64_t)r;
		}
		if (write(fd, "k", 1) != 1)
			break;
	}
out:
	free(b);
	close(fd);
	return NULL;
}

static int write_full(int fd, const void *buf, uint64_t len)
{
	const uint8_t *p = buf;
	while (len) {
		ssize_t w = write(fd, p, len > (1u << 30) ? (1u << 30) : (size_t)len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? -errno : -EIO;
		p += w;
		len -= (uint64_t)w;
	}
	return 0;
}

/* Same-size message + 1-byte reply over TCP loopback: the transport's floor. */
static int floor_tcp(uint64_t size, const void *data, struct ing_hist *h)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof(a);
	struct tcp_srv s = { .size = size, .iters = 100 };
	pthread_t th;
	int one = 1, fd = -1, rc = -EIO;

	s.lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s.lfd < 0 || bind(s.lfd, (struct sockaddr *)&a, sizeof(a)) || listen(s.lfd, 1) ||
	    getsockname(s.lfd, (struct sockaddr *)&a, &al)) {
		rc = -errno;
		goto out;
	}
	if (pthread_create(&th, NULL, tcp_echo, &s)) {
		rc = -EAGAIN;
		goto out;
	}
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0) {
		struct timeval tv = { 10, 0 };
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		uint64_t deadline = ing_now_ns() + 3000000000ull;
		rc = 0;
		for (unsigned i = 0; i < s.iters; i++) {
			char k;
			uint64_t t = ing_now_ns();
			if (write_full(fd, data, size) || read(fd, &k, 1) != 1) {
				rc = -EIO;
				break;
			}
			ing_hist_add(h, ing_now_ns() - t);
			if (ing_now_ns() > deadline && h->count >= 10)
				break;   /* enough samples; the server sees EOF */
		}
	}
	if (fd >= 0)
		close(fd);
	shutdown(s.lfd, SHUT_RDWR);
	pthread_join(th, NULL);
out:
	if (s.lfd >= 0)
		close(s.lfd);
	return rc;
}

/* O_DIRECT write of one frame into a new file + fdatasync, in the data dir: the disk floor. */
static int floor_disk(const char *dir, uint64_t size, const void *data, struct ing_hist *h,
		      char *note, size_t notelen)
{
	char path[4096];
	uint64_t deadline = ing_now_ns() + 5000000000ull, dlen = (size + 4095) & ~4095ull;
	void *b = NULL;
	bool direct = true;

	snprintf(path, sizeof(path), "%s/.ingest-bench-floor.%d", dir, (int)getpid());
	if (posix_memalign(&b, 4096, dlen))
		return -ENOMEM;
	memset(b, 0, dlen);
	memcpy(b, data, size);
	for (unsigned i = 0; i < 50; i++) {
		uint64_t t = ing_now_ns();
		int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | (direct ? O_DIRECT : 0),
			      0600);
		if (fd < 0 && direct && errno == EINVAL) {
			direct = false;   /* tmpfs: no O_DIRECT, like the node's store */
			i--;
			continue;
		}
		if (fd < 0) {
			free(b);
			return -errno;
		}
		int rc = write_full(fd, b, direct ? dlen : size);
		if (!rc && fdatasync(fd))
			rc = -errno;
		close(fd);
		unlink(path);
		if (rc) {
			free(b);
			return rc;
		}
		ing_hist_add(h, ing_now_ns() - t);
		if (ing_now_ns() > deadline && h->count >= 10)
			break;
	}
	snprintf(note, notelen, "%s write + fdatasync of a new %" PRIu64 "-byte file in %s",
		 direct ? "O_DIRECT" : "buffered (no O_DIRECT here)", size, dir);
	free(b);
	return 0;
}

/* ------------------------------------------------------------------ the node and the machine */

/* Negotiate and Stats over a gRPC channel of our own (the producer API does not say them). */
static int node_call(const struct cfg *c, struct ing_grpc_chan *ch, const char *path,
		     const uint8_t *req, size_t len, uint8_t **resp, size_t *rlen, char *err, size_t errlen)
{
	char bearer[ING_AUTH_TOKEN_MAX + 16];
	const char *md[3] = { NULL, NULL, NULL };
	if (c->auth_token_file) {
		snprintf(bearer, sizeof(bearer), "Bearer %s", c->token);
		md[0] = "authorization";
		md[1] = bearer;
	}
	int st = ing_grpc_unary(ch, path, md, req, len, resp, rlen, 10000, err, errlen);
	explicit_bzero(bearer, sizeof(bearer));
	return st;
}

/*
 * What the node says about itself: before the run (after false) its version, limits,
 * transports, pool and framesDurable; after it, framesDurable again (frames of other
 * producers during the run). Failing to ask is recorded, never fatal.
 */
static void node_info(const struct cfg *c, struct node_info *ni, bool after)
{
	struct ing_grpc_chan_opts co;
	char err[256] = "";
	uint8_t *resp = NULL;
	size_t rlen = 0;

	ing_grpc_chan_opts_init(&co);
	co.target = c->server;
	co.tls = c->tls_ca != NULL;
	co.tls_ca = c->tls_ca;
	co.tls_cert = c->tls_cert;
	co.tls_key = c->tls_key;
	co.tls_server_name = c->tls_server_name;
	struct ing_grpc_chan *ch = ing_grpc_chan_connect(&co, err, sizeof(err));
	if (!ch) {
		snprintf(ni->err, sizeof(ni->err), "cannot connect: %.200s", err);
		return;
	}
	if (node_call(c, ch, "/h3000.RDMASvc/Stats", NULL, 0, &resp, &rlen, err, sizeof(err)) == ING_GRPC_OK) {
		H3000__StatsReply *r = h3000__stats_reply__unpack(NULL, rlen, resp);
		if (r && after) {
			ni->durable_after = r->framesdurable;
			ni->after_known = true;
		} else if (r) {
			ni->durable_before = r->framesdurable;
			ni->pool_bytes = r->poolbytes;
			ni->pool_slots = r->poolslotstotal;
			ni->hugepages = r->poolhugepages;
			ni->disk_bytes = r->disksizebytes;
			ni->lcores = (unsigned)r->n_lcores;
			ni->sessions_before = r->sessionsactive;
			ni->tier = r->tier && r->tier->enabled;
			snprintf(ni->transport_note, sizeof(ni->transport_note), "%s",
				 r->transportnote ? r->transportnote : "");
		}
		if (r)
			h3000__stats_reply__free_unpacked(r, NULL);
	} else if (!ni->err[0]) {
		snprintf(ni->err, sizeof(ni->err), "Stats: %.200s", err);
	}
	free(resp);
	resp = NULL;
	/* Negotiate after Stats: its session is not among the sessions counted before the run */
	if (!after) {
		H3000__NegotiateRequest q = H3000__NEGOTIATE_REQUEST__INIT;
		H3000__Transport want[] = { H3000__TRANSPORT__TRANSPORT_GRPC_STREAM };
		uint8_t req[ING_AUTH_TOKEN_MAX + 128];
		q.versionmin = 1;
		q.versionmax = 1;
		q.clientname = (char *)"ingest-bench (node info)";
		q.authtoken = (char *)(c->auth_token_file ? c->token : "");
		q.n_transports = 1;
		q.transports = want;
		size_t len = h3000__negotiate_request__pack(&q, req);
		if (node_call(c, ch, "/h3000.RDMASvc/Negotiate", req, len, &resp, &rlen, err, sizeof(err)) ==
		    ING_GRPC_OK) {
			H3000__NegotiateReply *n = h3000__negotiate_reply__unpack(NULL, rlen, resp);
			if (n) {
				snprintf(ni->version, sizeof(ni->version), "%s", n->serverversion ? n->serverversion : "");
				snprintf(ni->node_id, sizeof(ni->node_id), "%s", n->nodeid ? n->nodeid : "");
				snprintf(ni->negotiate_note, sizeof(ni->negotiate_note), "%s", n->message ? n->message : "");
				ni->max_frame = n->maxframesize;
				ni->credits = n->credits;
				ni->max_chunk = n->maxchunksize;
				size_t o = 0;
				ni->available[0] = '\0';
				for (size_t i = 0; i < n->n_available && o < sizeof(ni->available); i++) {
					const ProtobufCEnumValue *v = protobuf_c_enum_descriptor_get_value(
						&h3000__transport__descriptor, n->available[i]);
					o += (size_t)snprintf(ni->available + o, sizeof(ni->available) - o, "%s%s",
							      i ? "," : "", v ? v->name + (strncmp(v->name, "TRANSPORT_", 10) ? 0 : 10) : "?");
				}
				h3000__negotiate_reply__free_unpacked(n, NULL);
			}
		} else {
			snprintf(ni->err, sizeof(ni->err), "Negotiate: %.200s", err);
		}
		ni->known = ni->version[0] != '\0';
	}
	free(resp);
	ing_grpc_chan_close(ch);
}

/* the three load averages; false when /proc/loadavg cannot be read */
static bool read_loadavg(double v[3])
{
	FILE *f = fopen("/proc/loadavg", "re");
	bool ok = f && fscanf(f, "%lf %lf %lf", &v[0], &v[1], &v[2]) == 3;
	if (f)
		fclose(f);
	if (!ok)
		v[0] = v[1] = v[2] = -1;
	return ok;
}

/* CPU pressure over the last minute (% of time some task waited for a CPU), or -1 */
static double read_cpu_pressure(void)
{
	FILE *f = fopen("/proc/pressure/cpu", "re");
	double v = -1;
	if (f) {
		if (fscanf(f, "some avg10=%*f avg60=%lf", &v) != 1)
			v = -1;
		fclose(f);
	}
	return v;
}

static void load_before(struct load_info *l)
{
	l->cpus = sysconf(_SC_NPROCESSORS_ONLN);
	read_loadavg(l->before);
	l->psi_before = read_cpu_pressure();
	l->loaded = l->before[0] > LOADED_PER_CPU * (double)(l->cpus > 0 ? l->cpus : 1);
	if (l->loaded)
		fprintf(stderr, "ingest-bench: WARNING: the machine is loaded before the run: load average "
			"%.2f on %ld CPUs (above %.1f per CPU): other work competes with the node and this "
			"tool, so latencies are not comparable with an idle machine's; the report says so\n",
			l->before[0], l->cpus, LOADED_PER_CPU);
}

/* ------------------------------------------------------------------ one phase */

static void progress(struct run *r, const struct point *pt, const char *what, uint64_t t0,
		     uint64_t total_ns, uint64_t *last)
{
	uint64_t now = ing_now_ns();
	if (!r->tty || now - *last < 250000000ull)
		return;
	*last = now;
	double done = (double)(now - t0) / 1e9, tot = (double)total_ns / 1e9;
	char sz[48], eta[16];
	double left = remaining_s(r->c, r->point_no) + (tot > done ? tot - done : 0);
	fprintf(stderr, "\r[%u/%u] %s %s %s: %4.1f/%.1f s  %" PRIu64 " durable  "
		"p99 %.2f ms  ETA %s   ", r->point_no, r->points_total, xname(pt->xport),
		size_label(pt, sz, sizeof(sz)), what, done > tot ? tot : done, tot, pt->ok,
		ms(ing_hist_quantile(&pt->h[H_DURABLE], 0.99)), fmt_secs(left, eta, sizeof(eta)));
}

static void on_ack(struct run *r, struct point *pt, const struct ing_ack *a, uint64_t now)
{
	struct rec *x = a->user;
	if (!x || !x->used)
		return;
	bool terminal = !a->ok || a->stage == ING_ACK_DURABLE;
	if (a->ok && a->stage == ING_ACK_RECEIVED) {
		if (x->measured) {
			uint64_t rx = now - x->t_sched;
			ing_hist_add(&pt->h[H_RECEIVED], rx);
			if (a->latency_ns <= rx)
				ing_hist_add(&pt->h[H_RX_LAG], rx - a->latency_ns);
			if (a->node_latency_ns && a->node_latency_ns <= a->latency_ns)
				ing_hist_add(&pt->h[H_RX_OUT], a->latency_ns - a->node_latency_ns);
		}
		if (x->buf >= 0) {
			r->free_buf[r->nfree++] = x->buf;
			x->buf = -1;
		}
	}
	if (!terminal)
		return;
	if (x->buf >= 0) {
		r->free_buf[r->nfree++] = x->buf;
		x->buf = -1;
	}
	if (a->ok) {
		r->all_durable++;
		uint64_t bin = (now - r->t_run0) / TL_BIN_NS;
		if (bin < r->tl_n)
			r->tl_bytes[bin] += x->len;
		if (x->measured) {
			uint64_t sum = 0;
			pt->ok++;
			pt->ok_bytes += x->len;
			ing_hist_add(&pt->h[H_DURABLE], now - x->t_sched);
			for (unsigned s = 0; s < ING_NODE_STAGES; s++)
				sum += a->node_stage_ns[s];
			if (sum) {   /* a node that reports its stages */
				for (unsigned s = 0; s < ING_NODE_STAGES; s++)
					ing_hist_add(&pt->h[H_NODE0 + s], a->node_stage_ns[s]);
				ing_hist_add(&pt->h[H_NODE_TOTAL], sum);
			}
		}
	} else if (x->measured) {
		pt->failed++;
		if (pt->failed <= 3)
			fprintf(stderr, "%singest-bench: frame %s failed (code %d): %s\n",
				r->tty ? "\n" : "", a->frame_id, a->code, a->msg);
	}
	x->used = false;
	r->free_rec[r->nfree_rec++] = (int)(x - r->recs);
}

/*
 * Run one phase: rate 0 = closed loop (submit whenever a credit and a buffer are free),
 * else open loop at rate frames/s. Frames due during the first warm_ns are not measured.
 * Returns 0, or -EPIPE when the connection broke, -EINTR on a signal.
 */
/* An open-loop point's measured window (ns): --duration, or longer when fewer than min
 * frames of the schedule (frame i due at i / rate from the warm-up's start) would fall in
 * [warmup, warmup + window): at 0.7 frames/s a 1 s window may hold none (a sweep on a busy
 * host measured an empty point). */
static uint64_t point_window_ns(double rate, unsigned warmup_ms, unsigned duration_ms, unsigned min)
{
	uint64_t dur = (uint64_t)duration_ms * 1000000ull, warm = (uint64_t)warmup_ms * 1000000ull;
	if (rate <= 0 || min == 0)
		return dur;
	/* the first frame due in the window, then the min-th from it (as phase() schedules) */
	uint64_t first = (uint64_t)((double)warm * rate / 1e9);
	while ((uint64_t)((double)first * 1e9 / rate) < warm)
		first++;
	uint64_t last = (uint64_t)((double)(first + min - 1) * 1e9 / rate);
	uint64_t need = last - warm + 1;   /* the window [warm, warm + need) holds it */
	return need > dur ? need : dur;
}

static int phase(struct run *r, struct point *pt, double rate, uint64_t warm_ns, uint64_t dur_ns,
		 const char *what)
{
	struct ing_ack acks[64];
	uint64_t t0 = ing_now_ns(), t_meas = t0 + warm_ns, t_end = t_meas + dur_ns, last = 0;
	uint64_t i = 0;
	int rc = 0;

	for (unsigned k = 0; k < H_N; k++)
		ing_hist_reset(&pt->h[k]);
	for (;;) {
		uint64_t now = ing_now_ns();
		if (stop_flag) {
			rc = -EINTR;
			break;
		}
		bool sched_open = rate > 0 ? true : now < t_end;
		while (sched_open && r->nfree && r->nfree_rec) {
			uint64_t due = rate > 0 ? t0 + (uint64_t)((double)i * 1e9 / rate) : now;
			if (due >= t_end || due > now)
				break;
			if (now - due > LATE_NS)
				break;   /* hopelessly behind: counted as unsent below */
			char id[ING_ID_MAX];
			int b = r->free_buf[r->nfree - 1], xi = r->free_rec[r->nfree_rec - 1];
			struct rec *x = &r->recs[xi];
			snprintf(id, sizeof(id), "%s-%" PRIu64, r->tag, r->seq);
			struct ing_frame_desc d = {
				.frame_id = id, .wafer_id = r->c->wafer, .data = r->bufs[b],
				.length = r->lens[b], .crc32c = r->crcs[b], .has_crc = 1, .user = x,
			};
			int s = ing_producer_submit(r->p, &d);
			if (s == -EAGAIN)
				break;
			if (s) {
				fprintf(stderr, "\ningest-bench: submit: %s\n", strerror(-s));
				return s == -EPIPE ? -EPIPE : s;
			}
			r->nfree--;
			r->nfree_rec--;
			r->seq++;
			*x = (struct rec){ .t_sched = due, .len = r->lens[b], .buf = b,
					   .measured = due >= t_meas, .used = true };
			if (x->measured) {
				pt->sent++;
				if (now - due > pt->late_max_ns)
					pt->late_max_ns = now - due;
			}
			i++;
			now = ing_now_ns();
		}
		/* open loop: frames whose time came and went by more than LATE_NS are not sent */
		if (rate > 0) {
			for (;;) {
				uint64_t due = t0 + (uint64_t)((double)i * 1e9 / rate);
				if (due >= t_end || now <= due || now - due <= LATE_NS)
					break;
				if (due >= t_meas)
					pt->unsent++;
				i++;
			}
		}
		bool sched_done = rate > 0 ? t0 + (uint64_t)((double)i * 1e9 / rate) >= t_end
					   : now >= t_end;
		unsigned infl = ing_producer_in_flight(r->p);
		if (sched_done && infl == 0)
			break;
		if (sched_done && now > t_end + DRAIN_NS) {
			fprintf(stderr, "\ningest-bench: %u frames still in flight %.0f s after the "
				"point ended; giving up on them\n", infl, (double)DRAIN_NS / 1e9);
			pt->failed += infl;
			break;
		}
		int wait_ms = 50;
		if (rate > 0 && !sched_done) {
			uint64_t due = t0 + (uint64_t)((double)i * 1e9 / rate);
			/* due and not sent: blocked on a credit or buffer, which only an ack frees
			 * (poll returns on it); never spin the CPU the node needs */
			if (due > now)
				wait_ms = (int)((due - now) / 1000000);
			if (wait_ms > 50)
				wait_ms = 50;
		}
		int n = ing_producer_poll(r->p, acks, 64, wait_ms);
		if (n < 0) {
			fprintf(stderr, "\ningest-bench: connection broken: %s\n", strerror(-n));
			return -EPIPE;
		}
		now = ing_now_ns();
		for (int k = 0; k < n; k++)
			on_ack(r, pt, &acks[k], now);
		progress(r, pt, what, t0, warm_ns + dur_ns, &last);
	}
	pt->offered_fps = rate;
	double sec = (double)dur_ns / 1e9;
	pt->achieved_fps = (double)pt->ok / sec;
	pt->mb_s = (double)pt->ok_bytes / 1e6 / sec;
	return rc;
}

/* ------------------------------------------------------------------ output */

static void json_hist(FILE *f, const struct ing_hist *h)
{
	fprintf(f, "{\"count\":%" PRIu64, h->count);
	for (unsigned q = 0; q < NPQ; q++)
		fprintf(f, ",\"%s_ms\":%.4f", pq_name[q], ms(ing_hist_quantile(h, pq[q])));
	fprintf(f, ",\"max_ms\":%.4f,\"mean_ms\":%.4f}", ms(h->max),
		h->count ? ms(h->sum / h->count) : 0.0);
}

static void host_info(char *host, size_t hl, char *cpu, size_t cl)
{
	struct utsname u;
	snprintf(host, hl, "unknown");
	snprintf(cpu, cl, "unknown");
	if (uname(&u) == 0)
		snprintf(host, hl, "%s %s %s", u.nodename, u.sysname, u.release);
	FILE *f = fopen("/proc/cpuinfo", "re");
	char line[512];
	while (f && fgets(line, sizeof(line), f)) {
		char *c = strchr(line, ':');
		if (!strncmp(line, "model name", 10) && c) {
			c += 2;
			c[strcspn(c, "\n")] = 0;
			snprintf(cpu, cl, "%s", c);
			break;
		}
	}
	if (f)
		fclose(f);
}

/* frames the node made DURABLE during the run that this run did not send (-1: unknown) */
static int64_t other_frames(const struct node_info *ni, uint64_t ours)
{
	if (!ni->known || !ni->after_known || ni->durable_after < ni->durable_before)
		return -1;
	uint64_t all = ni->durable_after - ni->durable_before;
	return all > ours ? (int64_t)(all - ours) : 0;
}

static void json_node(FILE *f, const struct node_info *ni, uint64_t ours)
{
	fprintf(f, ",\"node\":{\"known\":%s,\"error\":", ni->known ? "true" : "false");
	ing_json_str(f, ni->err);
	fprintf(f, ",\"version\":");
	ing_json_str(f, ni->version);
	fprintf(f, ",\"node_id\":");
	ing_json_str(f, ni->node_id);
	fprintf(f, ",\"transports_available\":");
	ing_json_str(f, ni->available);
	fprintf(f, ",\"transport_note\":");
	ing_json_str(f, ni->transport_note);
	fprintf(f, ",\"max_frame\":%" PRIu64 ",\"credits\":%u,\"max_chunk\":%u,\"pool_bytes\":%" PRIu64
		",\"pool_slots\":%u,\"pool_hugepages\":%s,\"rdma_lcores\":%u,\"disk_bytes\":%" PRIu64
		",\"tier\":%s,\"sessions_before\":%u,\"frames_durable_before\":%" PRIu64
		",\"frames_durable_after\":%" PRIu64 ",\"frames_of_others_during_run\":%" PRId64 "}",
		ni->max_frame, ni->credits, ni->max_chunk, ni->pool_bytes, ni->pool_slots,
		ni->hugepages ? "true" : "false", ni->lcores, ni->disk_bytes, ni->tier ? "true" : "false",
		ni->sessions_before, ni->durable_before, ni->durable_after, other_frames(ni, ours));
}

static void json_load(FILE *f, const struct load_info *l)
{
	fprintf(f, ",\"load\":{\"cpus\":%ld,\"before\":[%.2f,%.2f,%.2f],\"after\":[%.2f,%.2f,%.2f],"
		"\"cpu_pressure_avg60_before\":%.2f,\"cpu_pressure_avg60_after\":%.2f,"
		"\"loaded_per_cpu_threshold\":%.2f,\"loaded\":%s}", l->cpus, l->before[0], l->before[1],
		l->before[2], l->after[0], l->after[1], l->after[2], l->psi_before, l->psi_after,
		LOADED_PER_CPU, l->loaded ? "true" : "false");
}

static void json_spread(FILE *f, const char *name, struct spread sp)
{
	fprintf(f, ",\"%s\":{\"min\":%.4f,\"median\":%.4f,\"max\":%.4f}", name, sp.min, sp.med, sp.max);
}

static void write_json(FILE *f, const struct cfg *c, const struct point *caps,
		       const struct point *pts, unsigned npts, const struct floor *fl, unsigned nfl,
		       const char *started, const struct node_info *ni, const struct load_info *li,
		       uint64_t ours)
{
	char host[512], cpu[256];
	host_info(host, sizeof(host), cpu, sizeof(cpu));
	fprintf(f, "{\"tool\":\"ingest-bench\",\"tool_version\":\"%s\",\"started\":\"%s\",\"git_rev\":",
		ING_VERSION, started);
	ing_json_str(f, c->git_rev);
	fprintf(f, ",\"git_rev_built\":");
	ing_json_str(f, ING_GIT_REV);
	json_node(f, ni, ours);
	json_load(f, li);
	fprintf(f, ",\"host\":{\"uname\":");
	ing_json_str(f, host);
	fprintf(f, ",\"cpu\":");
	ing_json_str(f, cpu);
	fprintf(f, ",\"cpus_online\":%ld},\"params\":{\"server\":", sysconf(_SC_NPROCESSORS_ONLN));
	ing_json_str(f, c->server);
	fprintf(f, ",\"duration_s\":%.3f,\"warmup_s\":%.3f,\"capacity_s\":%.3f,"
		"\"capacity_fps_given\":%.3f,\"credits\":%u,\"repeat\":%u,\"tls\":%s,\"loads_pct\":[",
		c->duration_ms / 1e3, c->warmup_ms / 1e3, c->capacity_ms / 1e3, c->capacity_fps, c->credits,
		c->repeat, c->tls_ca ? "true" : "false");
	for (unsigned i = 0; i < c->nload; i++)
		fprintf(f, "%s%.1f", i ? "," : "", c->load[i] * 100);
	fprintf(f, "],\"sizes\":[");
	for (unsigned i = 0; i < c->nsize; i++) {
		fprintf(f, "%s", i ? "," : "");
		json_size(f, c->size[i].lo, c->size[i].hi);
	}
	fprintf(f, "],\"transports\":[");
	for (unsigned i = 0; i < c->nxport; i++)
		fprintf(f, "%s\"%s\"", i ? "," : "", xname(c->xport[i]));
	fprintf(f, "],\"latency\":\"from each frame's scheduled send time (open loop), "
		"warm-up excluded; histogram error < 1 %%\"},\"capacity\":[");
	for (unsigned i = 0; i < c->nxport * c->nsize; i++) {
		fprintf(f, "%s{\"transport\":\"%s\",\"size\":", i ? "," : "", xname(caps[i].xport));
		json_size(f, caps[i].size_lo, caps[i].size);
		fprintf(f, ",\"fps\":%.2f,\"mb_s\":%.1f}", caps[i].achieved_fps,
			caps[i].mb_s);
	}
	fprintf(f, "],\"floors\":[");
	for (unsigned i = 0; i < nfl; i++) {
		fprintf(f, "%s{\"size\":%" PRIu64 ",\"tcp_loopback_rtt\":", i ? "," : "", fl[i].size);
		json_hist(f, &fl[i].tcp);
		fprintf(f, ",\"disk_write_fdatasync\":");
		json_hist(f, &fl[i].disk);
		fprintf(f, ",\"disk_note\":");
		ing_json_str(f, fl[i].disk_note);
		fprintf(f, "}");
	}
	for (unsigned i = 0; i < c->nxfloor; i++) {
		fprintf(f, "%s{\"name\":", nfl || i ? "," : "");
		ing_json_str(f, c->xfloor[i].name);
		fprintf(f, ",\"p50_ms\":%.4f,\"p99_ms\":%.4f,\"given\":true}", c->xfloor[i].p50_ms,
			c->xfloor[i].p99_ms);
	}
	fprintf(f, "],\"points\":[");
	for (unsigned i = 0; i < npts; i++) {
		const struct point *p = &pts[i];
		fprintf(f, "%s{\"transport\":\"%s\",\"size\":", i ? "," : "", xname(p->xport));
		json_size(f, p->size_lo, p->size);
		fprintf(f, ",\"load_pct\":%.1f,"
			"\"offered_fps\":%.3f,\"achieved_fps\":%.3f,\"mb_s\":%.2f,\"sent\":%" PRIu64
			",\"ok\":%" PRIu64 ",\"failed\":%" PRIu64 ",\"unsent\":%" PRIu64
			",\"max_submit_lag_ms\":%.3f,\"stages\":{",
			p->load * 100, p->offered_fps,
			p->achieved_fps, p->mb_s, p->sent, p->ok, p->failed, p->unsent,
			ms(p->late_max_ns));
		for (unsigned k = 0; k < H_N; k++) {
			fprintf(f, "%s\"%s\":", k ? "," : "", h_name[k]);
			json_hist(f, &p->h[k]);
		}
		fprintf(f, "},\"repetitions\":[");
		for (unsigned k = 0; k < p->nrep; k++) {
			const struct rep_sum *x = &p->rep[k];
			fprintf(f, "%s{\"achieved_fps\":%.3f,\"mb_s\":%.2f,\"ok\":%" PRIu64 ",\"failed\":%" PRIu64
				",\"durable_p50_ms\":%.4f,\"durable_p99_ms\":%.4f,\"durable_p999_ms\":%.4f,"
				"\"received_p99_ms\":%.4f,\"load1\":%.2f}", k ? "," : "", x->achieved_fps, x->mb_s,
				x->ok, x->failed, x->durable_p50_ms, x->durable_p99_ms, x->durable_p999_ms,
				x->received_p99_ms, x->load1);
		}
		fprintf(f, "],\"spread\":{\"repetitions\":%u", p->nrep);
		json_spread(f, "achieved_fps", spread_of(p, get_fps));
		json_spread(f, "durable_p50_ms", spread_of(p, get_p50));
		json_spread(f, "durable_p99_ms", spread_of(p, get_p99));
		json_spread(f, "durable_p999_ms", spread_of(p, get_p999));
		json_spread(f, "received_p99_ms", spread_of(p, get_rx_p99));
		fprintf(f, "}}");
	}
	fprintf(f, "]}\n");
}

static FILE *out_open(const struct cfg *c, const char *name)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", c->out, name);
	FILE *f = fopen(path, "w");
	if (!f)
		fprintf(stderr, "ingest-bench: %s: %s\n", path, strerror(errno));
	return f;
}

static void tag_of(const struct point *p, char *buf, size_t n)
{
	if (p->size_lo == p->size)
		snprintf(buf, n, "%s_%" PRIu64 "K", xname(p->xport), p->size / 1024);
	else
		snprintf(buf, n, "%s_%" PRIu64 "K-%" PRIu64 "K", xname(p->xport), p->size_lo / 1024,
			 p->size / 1024);
}

/* CDF of the durable latency per load: blocks (one per load) of "ms fraction" lines. */
static void write_cdf(FILE *f, const struct point *pts, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		const struct ing_hist *h = &pts[i].h[H_DURABLE];
		uint64_t seen = 0;
		fprintf(f, "# load %.0f%%\n", pts[i].load * 100);
		for (unsigned b = 0; b < ING_HIST_BUCKETS && seen < h->count; b++) {
			if (!h->b[b])
				continue;
			seen += h->b[b];
			uint64_t v = ing_hist_bucket_upper(b);
			fprintf(f, "%.4f %.6f\n", ms(v > h->max ? h->max : v),
				(double)seen / (double)h->count);
		}
		if (!h->count)
			fprintf(f, "0.001 0\n");
		fprintf(f, "\n\n");
	}
}

/* points.csv: 10 fixed columns, then per histogram k its NPQ percentiles and max */
static unsigned csv_col(unsigned k, unsigned q)
{
	return 11 + k * (NPQ + 1) + q;
}

static int run_gnuplot(const struct cfg *c, const struct point *pts, unsigned npts,
		       unsigned per_group)
{
	FILE *g = out_open(c, "plots.gp");
	if (!g)
		return -EIO;
	fprintf(g, "set terminal pngcairo size 900,560 noenhanced\nset grid\n"
		"set datafile separator ','\n");
	for (unsigned s = 0; s < npts; s += per_group) {
		char tag[64], src[96];
		tag_of(&pts[s], tag, sizeof(tag));
		snprintf(src, sizeof(src), "'< grep ^%s, points.csv'", tag);
		fprintf(g, "set output 'latency_vs_load_%s.png'\n"
			"set title 'ack latency vs offered load, %s'\nset key left top\n"
			"set xlabel 'offered load (%% of measured capacity)'\nset ylabel 'ms (log)'\n"
			"set logscale y\nplot ", tag, tag);
		static const struct { unsigned k, q; const char *t; } lines[] = {
			{ H_DURABLE, 0, "DURABLE P50" }, { H_DURABLE, 2, "DURABLE P95" },
			{ H_DURABLE, 3, "DURABLE P99" }, { H_DURABLE, 4, "DURABLE P99.9" },
			{ H_RECEIVED, 3, "RECEIVED P99" }, { H_NODE_TOTAL, 3, "node total P99" },
		};
		for (unsigned i = 0; i < sizeof(lines) / sizeof(lines[0]); i++)
			fprintf(g, "%s%s using 3:%u with linespoints title '%s'", i ? ", " : "", src,
				csv_col(lines[i].k, lines[i].q), lines[i].t);
		fprintf(g, "\nunset logscale y\n");
		fprintf(g, "set output 'cdf_%s.png'\nset title 'DURABLE ack latency CDF per load, %s'\n"
			"set xlabel 'ms (log)'\nset ylabel 'fraction of frames'\nset logscale x\n"
			"set key right bottom\nset datafile separator whitespace\nplot ", tag, tag);
		for (unsigned i = 0; i < per_group; i++)
			fprintf(g, "%s'cdf_%s.dat' index %u using 1:2 with lines title '%.0f%% load'",
				i ? ", " : "", tag, i, pts[s + i].load * 100);
		fprintf(g, "\nunset logscale x\nset datafile separator ','\n");
		fprintf(g, "set output 'stages_p99_%s.png'\nset title 'node stages, P99 of each, by load, %s'\n"
			"set xlabel 'offered load (%%)'\nset ylabel 'ms'\nset key left top\n"
			"set style data histograms\nset style histogram rowstacked\nset style fill solid 0.8\n"
			"set boxwidth 0.7\nplot ", tag, tag);
		for (unsigned k = 0; k < ING_NODE_STAGES; k++)
			fprintf(g, "%s%s using %u%s title '%s'", k ? ", " : "", src,
				csv_col(H_NODE0 + k, 3), k ? "" : ":xtic(3)", h_name[H_NODE0 + k]);
		fprintf(g, "\nset style data lines\n");
	}
	fprintf(g, "set output 'throughput.png'\nset title 'DURABLE throughput over the run'\n"
		"set xlabel 's since the first capacity run (then the loads in order)'\nset ylabel 'MB/s'\nset key left top\n"
		"plot 'timeline.csv' every ::1 using 1:2 with steps title 'MB/s (0.5 s bins)'\n");
	fclose(g);
	char cmd[4300];
	snprintf(cmd, sizeof(cmd), "cd '%s' && gnuplot plots.gp 2>gnuplot.log", c->out);
	int st = system(cmd);
	if (st != 0) {
		fprintf(stderr, "ingest-bench: gnuplot failed (status %d; is gnuplot-nox installed? "
			"see %s/gnuplot.log); the data files are written\n", st, c->out);
		return -EIO;
	}
	return 0;
}

static void md_hist_row(FILE *f, const char *name, const char *what, const struct ing_hist *h,
			const char *floor)
{
	fprintf(f, "| %s | %s | %" PRIu64, name, what, h->count);
	for (unsigned q = 0; q < NPQ; q++)
		fprintf(f, " | %.2f", ms(ing_hist_quantile(h, pq[q])));
	fprintf(f, " | %.2f | %s |\n", ms(h->max), floor);
}

/* The floors a group's stages are shown next to ("-" when not measured). */
struct floor_text {
	char tcp[64], disk[96], rdma_read[128], rdma_write[128];
};

static void floor_texts(const struct cfg *c, const struct floor *fl, const struct point *p0,
			struct floor_text *t)
{
	const struct floor *fr = NULL;
	snprintf(t->tcp, sizeof(t->tcp), "-");
	snprintf(t->disk, sizeof(t->disk), "-");
	t->rdma_read[0] = t->rdma_write[0] = '\0';
	for (unsigned k = 0; k < c->nsize; k++)
		if (fl[k].size == p0->size)
			fr = &fl[k];
	if (fr && fr->tcp.count)
		snprintf(t->tcp, sizeof(t->tcp), "TCP RTT %.2f / %.2f", ms(ing_hist_quantile(&fr->tcp, 0.5)),
			 ms(ing_hist_quantile(&fr->tcp, 0.99)));
	if (fr && fr->disk.count)
		snprintf(t->disk, sizeof(t->disk), "write+fdatasync %.2f / %.2f (written+synced)",
			 ms(ing_hist_quantile(&fr->disk, 0.5)), ms(ing_hist_quantile(&fr->disk, 0.99)));
	for (unsigned k = 0; k < c->nxfloor; k++) {
		char *dst = !strncmp(c->xfloor[k].name, "ib_read_lat", 11) ? t->rdma_read
			    : !strncmp(c->xfloor[k].name, "ib_write_lat", 12) ? t->rdma_write : NULL;
		if (dst)
			snprintf(dst, sizeof(t->rdma_read), "%s %.2f / %.2f", c->xfloor[k].name,
				 c->xfloor[k].p50_ms, c->xfloor[k].p99_ms);
	}
}

/* The bars: P99 at 50 % load <= 3x the unloaded P50 (the lowest load measured). */
static void report_bars(FILE *f, const struct point *p0, unsigned per)
{
	const struct point *lo = p0, *half = NULL;
	for (unsigned i = 0; i < per; i++) {
		if (p0[i].load < lo->load)
			lo = &p0[i];
		if (p0[i].load > 0.49 && p0[i].load < 0.51)
			half = &p0[i];
	}
	if (half && lo->h[H_RECEIVED].count && half->h[H_RECEIVED].count) {
		double p50 = ms(ing_hist_quantile(&lo->h[H_RECEIVED], 0.5));
		double p99 = ms(ing_hist_quantile(&half->h[H_RECEIVED], 0.99));
		double p999 = ms(ing_hist_quantile(&half->h[H_RECEIVED], 0.999));
		fprintf(f, "\nBar (RECEIVED P99 at 50%% load <= 3x the RECEIVED P50 at the lowest "
			"load, %.0f%%): %.2f ms vs 3 x %.2f = %.2f ms: **%s** (%.1fx); RECEIVED "
			"P99.9 at 50%%: %.2f ms (%.1fx).\n", lo->load * 100, p99, p50, 3 * p50,
			p99 <= 3 * p50 ? "met" : "NOT met", p50 > 0 ? p99 / p50 : 0.0, p999,
			p50 > 0 ? p999 / p50 : 0.0);
	}
	if (half && lo->h[H_DURABLE].count && half->h[H_DURABLE].count) {
		double p50 = ms(ing_hist_quantile(&lo->h[H_DURABLE], 0.5));
		double p99 = ms(ing_hist_quantile(&half->h[H_DURABLE], 0.99));
		fprintf(f, "\nBar (DURABLE P99 at 50%% load <= 3x the P50 at the lowest load, "
			"%.0f%%): %.2f ms vs 3 x %.2f = %.2f ms: **%s** (%.1fx).\n",
			lo->load * 100, p99, p50, 3 * p50, p99 <= 3 * p50 ? "met" : "NOT met",
			p50 > 0 ? p99 / p50 : 0.0);
	}
}

/* One transport x size group: capacity, the loads, the bars, every stage by load. */
static void report_group(FILE *f, const struct cfg *c, const struct point *cap,
			 const struct point *p0, const struct floor *fl, bool plots)
{
	unsigned per = c->nload;
	struct floor_text ft;
	char tag[64], sz[48];

	floor_texts(c, fl, p0, &ft);
	tag_of(p0, tag, sizeof(tag));
	fprintf(f, "## %s, %s frames\n\nCapacity (closed loop): **%.1f frames/s, "
		"%.1f MB/s**.\n\n| load | offered fps | achieved fps | MB/s | frames | failed | "
		"unsent | DURABLE P50 | P95 | P99 | P99.9 |\n|---|---|---|---|---|---|---|---|---|---|---|\n",
		xname(p0->xport), size_label(p0, sz, sizeof(sz)), cap->achieved_fps, cap->mb_s);
	for (unsigned i = 0; i < per; i++) {
		const struct point *p = &p0[i];
		const struct ing_hist *h = &p->h[H_DURABLE];
		fprintf(f, "| %.0f%% | %.1f | %.1f | %.1f | %" PRIu64 " | %" PRIu64 " | %" PRIu64
			" | %.2f | %.2f | %.2f | %.2f |\n", p->load * 100, p->offered_fps,
			p->achieved_fps, p->mb_s, p->ok, p->failed, p->unsent,
			ms(ing_hist_quantile(h, 0.5)), ms(ing_hist_quantile(h, 0.95)),
			ms(ing_hist_quantile(h, 0.99)), ms(ing_hist_quantile(h, 0.999)));
	}
	if (c->repeat > 1) {
		fprintf(f, "\nSpread over the %u repetitions (each a whole pass over the loads; "
			"min / median / max of the repetitions' own figures; the table above merges "
			"their samples):\n\n| load | achieved fps | DURABLE P50 | DURABLE P99 | P99 max/min | "
			"RECEIVED P99 | load avg at end |\n|---|---|---|---|---|---|---|\n", c->repeat);
		for (unsigned i = 0; i < per; i++) {
			const struct point *p = &p0[i];
			struct spread fps = spread_of(p, get_fps), p50 = spread_of(p, get_p50),
				      p99 = spread_of(p, get_p99), rx = spread_of(p, get_rx_p99);
			double lmin = 1e9, lmax = 0;
			for (unsigned k = 0; k < p->nrep; k++) {
				lmin = p->rep[k].load1 < lmin ? p->rep[k].load1 : lmin;
				lmax = p->rep[k].load1 > lmax ? p->rep[k].load1 : lmax;
			}
			fprintf(f, "| %.0f%% | %.1f / %.1f / %.1f | %.2f / %.2f / %.2f | %.2f / %.2f / %.2f | "
				"%.2fx | %.2f / %.2f / %.2f | %.2f..%.2f |\n", p->load * 100, fps.min, fps.med,
				fps.max, p50.min, p50.med, p50.max, p99.min, p99.med, p99.max,
				p99.min > 0 ? p99.max / p99.min : 0.0, rx.min, rx.med, rx.max, lmin, lmax);
		}
	}
	report_bars(f, p0, per);
	fprintf(f, "\nWhere the time goes (the node's stages come back in every DURABLE "
		"Ack; each is timed from the end of the one before), next to its floor "
		"measured in this run (P50 / P99):\n\n");
	for (unsigned i = 0; i < per; i++) {
		const struct point *p = &p0[i];
		fprintf(f, "\n**%.0f%% load** (%.1f frames/s offered)\n\n| stage | what | n | P50 | P90 | "
			"P95 | P99 | P99.9 | max | floor |\n|---|---|---|---|---|---|---|---|---|---|\n",
			p->load * 100, p->offered_fps);
		for (unsigned k = 0; k < H_N; k++) {
			const char *floor = "";
			if (k == H_RECEIVED || k == H_NODE0 + ING_NODE_RECEIVED)
				floor = p->xport == BX_RDMA && ft.rdma_read[0] ? ft.rdma_read
				      : p->xport == BX_RDMA_WRITE && ft.rdma_write[0] ? ft.rdma_write : ft.tcp;
			else if (k == H_NODE0 + ING_NODE_SYNCED)
				floor = ft.disk;
			md_hist_row(f, h_name[k], h_what[k], &p->h[k], floor);
		}
	}
	if (plots)
		fprintf(f, "\n![latency vs load](latency_vs_load_%s.png)\n\n"
			"![CDF per load](cdf_%s.png)\n\n![node stages P99](stages_p99_%s.png)\n",
			tag, tag, tag);
	fprintf(f, "\n");
}

static void report_floors(FILE *f, const struct cfg *c, const struct floor *fl)
{
	fprintf(f, "## Floors (same run)\n\n| frame size | floor | n | P50 | P90 | P95 | P99 | P99.9 | max | how |\n"
		"|---|---|---|---|---|---|---|---|---|---|\n");
	for (unsigned k = 0; k < c->nsize; k++) {
		char sz[32];
		snprintf(sz, sizeof(sz), "%.1f MiB", (double)fl[k].size / 1048576.0);
		md_hist_row(f, sz, "TCP loopback round trip", &fl[k].tcp,
			    "one message of the frame's size, 1-byte reply, TCP_NODELAY");
		md_hist_row(f, sz, "disk write + fdatasync", &fl[k].disk,
			    fl[k].disk_note[0] ? fl[k].disk_note : "not measured: no --data-dir");
	}
	for (unsigned k = 0; k < c->nxfloor; k++)
		fprintf(f, "| | %s | | %.2f | | | %.2f | | | measured outside ingest-bench (--floor) |\n",
			c->xfloor[k].name, c->xfloor[k].p50_ms, c->xfloor[k].p99_ms);
	if (!c->nxfloor)
		fprintf(f, "\nRDMA floors (ib_read_lat / ib_write_lat) are measured in the Soft-RoCE "
			"guest (`bench/latency.sh BUILD --guest`); not part of this run.\n");
}

/* What makes two reports comparable: the tool, the node, the machine and its load. */
static void report_context(FILE *f, const struct cfg *c, const struct node_info *ni,
			   const struct load_info *li, uint64_t ours)
{
	char a[32];
	int64_t others = other_frames(ni, ours);
	if (li->loaded)
		fprintf(f, "> **Warning: the machine was loaded** before the run (load average %.2f on %ld "
			"CPUs, above %.1f per CPU): other work competed with the node and this tool, so "
			"these latencies are not comparable with an idle machine's.\n\n", li->before[0],
			li->cpus, LOADED_PER_CPU);
	if (others > 0)
		fprintf(f, "> **Warning: other producers** made %" PRId64 " frames DURABLE on the node "
			"during the run (its framesDurable grew by %" PRIu64 ", this run sent %" PRIu64 ").\n\n",
			others, ni->durable_after - ni->durable_before, ours);
	fprintf(f, "| | |\n|---|---|\n");
	fprintf(f, "| tool | ingest-bench %s, git `%s`%s |\n", ING_VERSION, c->git_rev,
		strcmp(c->git_rev, ING_GIT_REV) ? " (given with --git-rev; built from `" ING_GIT_REV "`)" : "");
	if (ni->known) {
		fprintf(f, "| node | `%s` ingestd %s%s%s%s |\n", c->server, ni->version,
			ni->node_id[0] ? ", node id `" : "", ni->node_id, ni->node_id[0] ? "`" : "");
		fprintf(f, "| node limits | max frame %" PRIu64 " bytes, %u credits per session, chunks of %u "
			"bytes |\n", ni->max_frame, ni->credits, ni->max_chunk);
		snprintf(a, sizeof(a), "%.1f MiB", (double)ni->pool_bytes / 1048576.0);
		fprintf(f, "| node pool | %s in %u slots on %s |\n", a, ni->pool_slots,
			ni->hugepages ? "hugepages" : "4 KiB pages");
		fprintf(f, "| node transports | %s; %s%s%s |\n", ni->available[0] ? ni->available : "-",
			ni->transport_note[0] ? ni->transport_note : "-", ni->lcores ? "; RDMA lcores " : "",
			ni->lcores ? (snprintf(a, sizeof(a), "%u", ni->lcores), a) : "");
		fprintf(f, "| node storage | data dir file system %.1f GiB%s |\n",
			(double)ni->disk_bytes / 1073741824.0, ni->tier ? ", object store tier on" : "");
		fprintf(f, "| node traffic | %u sessions open before the run; frames of other producers "
			"during it: %s |\n", ni->sessions_before,
			others < 0 ? "unknown" : (snprintf(a, sizeof(a), "%" PRId64, others), a));
	} else {
		fprintf(f, "| node | `%s`: not known (%s) |\n", c->server, ni->err);
	}
	fprintf(f, "| machine load | load average %.2f / %.2f / %.2f before, %.2f / %.2f / %.2f after "
		"(1 / 5 / 15 min, %ld CPUs)", li->before[0], li->before[1], li->before[2], li->after[0],
		li->after[1], li->after[2], li->cpus);
	if (li->psi_before >= 0)
		fprintf(f, "; CPU pressure %.1f %% before, %.1f %% after (some, 60 s)", li->psi_before,
			li->psi_after);
	fprintf(f, " |\n| repetitions | %u%s |\n", c->repeat,
		c->repeat > 1 ? " (spread below each group's table)" : " (no spread: --repeat 3 gives one)");
	fprintf(f, "| security | %s%s |\n\n", c->tls_ca ? "TLS" : "cleartext h2c",
		c->auth_token_file ? ", auth token" : "");
}

static void write_report(FILE *f, const struct cfg *c, const struct point *caps,
			 const struct point *pts, unsigned npts, const struct floor *fl,
			 const char *started, bool plots, const struct node_info *ni,
			 const struct load_info *li, uint64_t ours)
{
	char host[512], cpu[256];
	host_info(host, sizeof(host), cpu, sizeof(cpu));
	fprintf(f, "# Ingest latency benchmark\n\n"
		"Started %s on `%s` (%s, %ld CPUs), node `%s`, git `%s`. Each load point offers a "
		"fraction of the capacity measured just before (closed loop, every credit busy) "
		"for %.1f s after %.1f s of warm-up, open loop: latency counts from each frame's "
		"scheduled send time (no coordinated omission). Percentiles from histograms with "
		"< 1 %% error; all times in ms. Data: `results.json`, `points.csv`, `timeline.csv`.\n\n",
		started, host, cpu, sysconf(_SC_NPROCESSORS_ONLN), c->server, c->git_rev,
		c->duration_ms / 1e3, c->warmup_ms / 1e3);
	report_context(f, c, ni, li, ours);
	for (unsigned g = 0; g < npts / c->nload; g++)
		report_group(f, c, &caps[g], &pts[g * c->nload], fl, plots);
	report_floors(f, c, fl);
	fprintf(f, "\nFew samples: with fewer than 100 frames in a point its P99 is its maximum, "
		"with fewer than 1000 its P99.9 is; raise --duration for tails that mean something.\n");
	if (plots)
		fprintf(f, "\n## Throughput over the run\n\n![throughput](throughput.png)\n");
}

static int write_csv(const struct cfg *c, const struct point *pts, unsigned npts)
{
	FILE *f = out_open(c, "points.csv");
	if (!f)
		return -EIO;
	fprintf(f, "tag,transport,load_pct,size,offered_fps,achieved_fps,mb_s,ok,failed,unsent");
	for (unsigned k = 0; k < H_N; k++) {
		for (unsigned q = 0; q < NPQ; q++)
			fprintf(f, ",%s_%s_ms", h_name[k], pq_name[q]);
		fprintf(f, ",%s_max_ms", h_name[k]);
	}
	fprintf(f, "\n");
	for (unsigned i = 0; i < npts; i++) {
		const struct point *p = &pts[i];
		char tag[64];
		tag_of(p, tag, sizeof(tag));
		char sz[48];
		if (p->size_lo == p->size)
			snprintf(sz, sizeof(sz), "%" PRIu64, p->size);
		else
			snprintf(sz, sizeof(sz), "%" PRIu64 "-%" PRIu64, p->size_lo, p->size);
		fprintf(f, "%s,%s,%.1f,%s,%.3f,%.3f,%.2f,%" PRIu64 ",%" PRIu64 ",%" PRIu64,
			tag, xname(p->xport), p->load * 100, sz, p->offered_fps, p->achieved_fps,
			p->mb_s, p->ok, p->failed, p->unsent);
		for (unsigned k = 0; k < H_N; k++) {
			for (unsigned q = 0; q < NPQ; q++)
				fprintf(f, ",%.4f", ms(ing_hist_quantile(&p->h[k], pq[q])));
			fprintf(f, ",%.4f", ms(p->h[k].max));
		}
		fprintf(f, "\n");
	}
	return fclose(f) ? -EIO : 0;
}

/* ------------------------------------------------------------------ main */

/*
 * Connect for one sweep group over transport t, frames of sizes sz (a range: each buffer
 * gets its own length within it), and fill the buffers. 0, or -errno after saying why.
 */
static int connect_for(const struct cfg *c, enum bx t, const struct ing_size_range *sz,
		       struct run *r)
{
	struct ing_producer_opts o;
	char err[512];
	ing_producer_opts_init(&o);
	o.server = c->server;
	o.transport = t == BX_GRPC ? ING_TRANSPORT_GRPC : ING_TRANSPORT_RDMA;
	o.rdma_mode = t == BX_RDMA_WRITE ? ING_RDMA_MODE_WRITE : ING_RDMA_MODE_DEFAULT;
	o.credits = c->credits;
	o.client_name = "ingest-bench";
	o.auth_token = c->auth_token_file ? c->token : NULL;
	o.tls_ca = c->tls_ca;
	o.tls_cert = c->tls_cert;
	o.tls_key = c->tls_key;
	o.tls_server_name = c->tls_server_name;
	o.frame_timeout_ms = 30000;
	o.pool_frame_size = (sz->hi + 4095) & ~4095ull;
	unsigned nbuf = c->credits ? c->credits : 64;
	if ((uint64_t)nbuf * o.pool_frame_size > BUFFER_BUDGET)
		nbuf = (unsigned)(BUFFER_BUDGET / o.pool_frame_size);
	if (nbuf < 2)
		nbuf = 2;
	o.pool_frames = nbuf;
	struct ing_producer *p = ing_producer_connect(&o, err, sizeof(err));
	if (!p) {
		bool dflt = !strcmp(c->server, DEFAULT_SERVER);
		fprintf(stderr, "ingest-bench: %s: %s%s\n", xname(t), err,
			dflt && strstr(err, "is ingestd running") ? "; that is the default --server: "
			"give the node's address with --server HOST:PORT" : "");
		return -ECONNREFUSED;
	}
	if (sz->hi > ing_producer_max_frame(p)) {
		fprintf(stderr, "ingest-bench: --sizes: %" PRIu64 "-byte frames exceed the node's largest "
			"frame, %" PRIu64 " bytes (its --max-frame or largest --pool slot)\n", sz->hi,
			ing_producer_max_frame(p));
		ing_producer_close(p, 1000);
		return -EFBIG;
	}
	r->p = p;
	r->nbuf = r->nfree = 0;
	for (unsigned i = 0; i < nbuf; i++) {
		void *b = ing_frame_alloc(p, sz->hi);
		if (!b)
			break;
		char id[64];
		snprintf(id, sizeof(id), "%s-buf-%u", r->tag, i);
		uint64_t key = synth_key(id);
		r->bufs[i] = b;
		r->lens[i] = sz->lo + (sz->hi > sz->lo ? synth_mix64(key) % (sz->hi - sz->lo + 1) : 0);
		r->crcs[i] = synth_fill_crc(b, r->lens[i], key, 1);
		r->free_buf[r->nfree++] = (int)i;
		r->nbuf++;
	}
	r->nrec = ing_producer_credits(p) + r->nbuf + 16;
	r->recs = calloc(r->nrec, sizeof(*r->recs));
	r->free_rec = calloc(r->nrec, sizeof(*r->free_rec));
	if (!r->recs || !r->free_rec || r->nbuf < 2) {
		fprintf(stderr, "ingest-bench: no memory for %u frame buffers\n", nbuf);
		ing_producer_close(p, 1000);
		r->p = NULL;
		return -ENOMEM;
	}
	r->nfree_rec = 0;
	for (unsigned i = 0; i < r->nrec; i++)
		r->free_rec[r->nfree_rec++] = (int)(r->nrec - 1 - i);
	if (bx_of(p) != t) {
		fprintf(stderr, "ingest-bench: asked for %s, the node gave %s (%s)\n", xname(t),
			xname(bx_of(p)), ing_producer_transport_note(p));
		return -ENOTSUP;   /* the caller disconnects */
	}
	return 0;
}

static void disconnect(struct run *r)
{
	if (!r->p)
		return;
	for (unsigned i = 0; i < r->nbuf; i++)
		ing_frame_free(r->p, r->bufs[i]);
	ing_producer_close(r->p, 5000);
	r->p = NULL;
	free(r->recs);
	free(r->free_rec);
	r->recs = NULL;
	r->free_rec = NULL;
}

static void print_point(const struct run *r, const struct point *p)
{
	const struct ing_hist *d = &p->h[H_DURABLE], *n = &p->h[H_NODE_TOTAL];
	char sz[48], eta[16];
	fprintf(stderr, "%s[%u/%u] %s %s load %5.1f%%: %7.1f fps offered, %7.1f achieved, "
		"DURABLE p50 %.2f p99 %.2f p99.9 %.2f ms; node p99 %.2f ms%s; ETA %s\n",
		r->tty ? "\r" : "", r->point_no, r->points_total, xname(p->xport),
		size_label(p, sz, sizeof(sz)), p->load * 100,
		p->offered_fps, p->achieved_fps, ms(ing_hist_quantile(d, 0.5)),
		ms(ing_hist_quantile(d, 0.99)), ms(ing_hist_quantile(d, 0.999)),
		ms(ing_hist_quantile(n, 0.99)), p->failed ? "  (FAILED FRAMES)" : "",
		fmt_secs(remaining_s(r->c, r->point_no), eta, sizeof(eta)));
}

/* The whole sweep per stage, for the terminal (report.md has it with the floors). */
static void print_stages(const struct point *pts, unsigned npts)
{
	fprintf(stderr, "\n%-10s %-6s %5s  %-16s %6s %9s %9s %9s %9s %9s %9s\n", "xport", "size",
		"load", "stage (ms)", "n", "P50", "P90", "P95", "P99", "P99.9", "max");
	for (unsigned i = 0; i < npts; i++) {
		const struct point *p = &pts[i];
		for (unsigned k = 0; k < H_N; k++) {
			const struct ing_hist *h = &p->h[k];
			fprintf(stderr, "%-10s %5.1fM %4.0f%%  %-16s %6" PRIu64, xname(p->xport),
				(double)p->size / 1048576.0, p->load * 100, h_name[k], h->count);
			for (unsigned q = 0; q < NPQ; q++)
				fprintf(stderr, " %9.2f", ms(ing_hist_quantile(h, pq[q])));
			fprintf(stderr, " %9.2f\n", ms(h->max));
		}
	}
}

/* Everything a sweep holds: the run's buffers, the points, the floors. */
struct sweep {
	struct run r;
	struct point *pts, *caps;
	struct floor *fl;
	unsigned ngroups, npts;
	char started[64];
	bool any_failed;
	struct node_info node;
	struct load_info load;
	struct point tmp;          /* one repetition of a point, merged into its point */
};

static int sweep_alloc(const struct cfg *c, struct sweep *w)
{
	struct run *r = &w->r;
	time_t now_s = time(NULL);
	strftime(w->started, sizeof(w->started), "%Y-%m-%dT%H:%M:%SZ", gmtime(&now_s));
	r->c = c;
	r->tty = isatty(STDERR_FILENO);
	snprintf(r->tag, sizeof(r->tag), "bench-%lld-%d", (long long)now_s, (int)getpid());
	size_t nb = BUFFER_BUDGET / 4096 + 64;
	r->bufs = calloc(nb, sizeof(*r->bufs));
	r->crcs = calloc(nb, sizeof(*r->crcs));
	r->lens = calloc(nb, sizeof(*r->lens));
	r->free_buf = calloc(nb, sizeof(*r->free_buf));
	w->ngroups = c->nxport * c->nsize;
	w->npts = w->ngroups * c->nload;
	w->pts = calloc(w->npts, sizeof(*w->pts));
	w->caps = calloc(w->ngroups, sizeof(*w->caps));
	w->fl = calloc(c->nsize, sizeof(*w->fl));
	r->tl_n = (unsigned)((planned_s(c) + 120 + w->ngroups * 2 * DRAIN_NS / 1e9) * 1e9 / TL_BIN_NS);
	r->tl_bytes = calloc(r->tl_n, sizeof(*r->tl_bytes));
	if (!r->bufs || !r->crcs || !r->lens || !r->free_buf || !w->pts || !w->caps || !w->fl ||
	    !r->tl_bytes) {
		fprintf(stderr, "ingest-bench: out of memory\n");
		return -ENOMEM;
	}
	r->points_total = w->npts * c->repeat + (c->capacity_fps ? 0 : w->ngroups);
	return 0;
}

static void sweep_free(struct sweep *w)
{
	free(w->r.bufs);
	free(w->r.crcs);
	free(w->r.lens);
	free(w->r.free_buf);
	free(w->r.tl_bytes);
	free(w->pts);
	free(w->caps);
	free(w->fl);
}

/* Step 1: the node answers the first group's Negotiate; else nothing is measured or written. */
static int probe_node(const struct cfg *c, struct sweep *w)
{
	int rc = connect_for(c, c->xport[0], &c->size[0], &w->r);
	disconnect(&w->r);
	if (rc)
		fprintf(stderr, "ingest-bench: nothing measured, no report written\n");
	return rc;
}

/* Step 2: the floors, per size (the largest frame of each item), before the node is loaded. */
static int measure_floors(const struct cfg *c, struct sweep *w)
{
	for (unsigned k = 0; k < c->nsize; k++) {
		struct floor *fl = &w->fl[k];
		uint64_t size = c->size[k].hi;
		void *d = malloc(size);
		fl->size = size;
		if (!d) {
			fprintf(stderr, "ingest-bench: out of memory for a %" PRIu64 "-byte frame\n", size);
			return -ENOMEM;
		}
		synth_fill(d, size, 1, 1);
		int rc = floor_tcp(size, d, &fl->tcp);
		if (rc)
			fprintf(stderr, "ingest-bench: TCP floor: %s\n", strerror(-rc));
		if (c->data_dir) {
			rc = floor_disk(c->data_dir, size, d, &fl->disk, fl->disk_note, sizeof(fl->disk_note));
			if (rc) {
				fprintf(stderr, "ingest-bench: disk floor in %s: %s\n", c->data_dir,
					strerror(-rc));
				snprintf(fl->disk_note, sizeof(fl->disk_note), "failed: %s", strerror(-rc));
			}
		}
		fprintf(stderr, "floor %.1f MiB: TCP loopback RTT p50 %.2f p99 %.2f ms; disk write+fdatasync "
			"p50 %.2f p99 %.2f ms%s\n", (double)size / 1048576.0,
			ms(ing_hist_quantile(&fl->tcp, 0.5)), ms(ing_hist_quantile(&fl->tcp, 0.99)),
			ms(ing_hist_quantile(&fl->disk, 0.5)), ms(ing_hist_quantile(&fl->disk, 0.99)),
			c->data_dir ? "" : " (no --data-dir: not measured)");
		free(d);
	}
	return 0;
}

/* One repetition t of a load point into p: counters and histograms added, its figures kept. */
static void point_merge(struct point *p, const struct point *t, const struct cfg *c)
{
	double load[3];
	if (p->nrep < MAX_REPEAT) {
		struct rep_sum *x = &p->rep[p->nrep++];
		read_loadavg(load);
		*x = (struct rep_sum){
			.achieved_fps = t->achieved_fps, .mb_s = t->mb_s, .ok = t->ok, .failed = t->failed,
			.durable_p50_ms = ms(ing_hist_quantile(&t->h[H_DURABLE], 0.5)),
			.durable_p99_ms = ms(ing_hist_quantile(&t->h[H_DURABLE], 0.99)),
			.durable_p999_ms = ms(ing_hist_quantile(&t->h[H_DURABLE], 0.999)),
			.received_p99_ms = ms(ing_hist_quantile(&t->h[H_RECEIVED], 0.99)),
			.load1 = load[0],
		};
	}
	p->offered_fps = t->offered_fps;
	p->sent += t->sent;
	p->ok += t->ok;
	p->failed += t->failed;
	p->unsent += t->unsent;
	p->ok_bytes += t->ok_bytes;
	if (t->late_max_ns > p->late_max_ns)
		p->late_max_ns = t->late_max_ns;
	for (unsigned k = 0; k < H_N; k++)
		ing_hist_merge(&p->h[k], &t->h[k]);
	double sec = (double)c->duration_ms / 1e3 * p->nrep;
	p->achieved_fps = (double)p->ok / sec;
	p->mb_s = (double)p->ok_bytes / 1e6 / sec;
}

/* One group: its capacity (closed loop, or --capacity-fps), then each load open loop. */
static int sweep_group(const struct cfg *c, struct sweep *w, unsigned x, unsigned s)
{
	struct run *r = &w->r;
	unsigned g = x * c->nsize + s;
	struct point *cap = &w->caps[g];
	int rc;

	cap->xport = c->xport[x];
	cap->size = c->size[s].hi;
	cap->size_lo = c->size[s].lo;
	rc = connect_for(c, c->xport[x], &c->size[s], r);
	if (rc) {
		disconnect(r);
		return rc;
	}
	if (c->capacity_fps) {
		cap->achieved_fps = c->capacity_fps;
		cap->mb_s = c->capacity_fps * (double)(cap->size_lo + cap->size) / 2 / 1e6;
	} else {
		char sz[48];
		r->point_no++;
		/* closed loop; the first quarter warms up */
		uint64_t dur = (uint64_t)c->capacity_ms * 1000000ull;
		rc = phase(r, cap, 0, dur / 4, dur - dur / 4, "capacity");
		fprintf(stderr, "%s%s %s capacity (closed loop, %u credits): %.1f frames/s, %.1f MB/s\n",
			r->tty ? "\r" : "", xname(c->xport[x]), size_label(cap, sz, sizeof(sz)),
			ing_producer_credits(r->p), cap->achieved_fps, cap->mb_s);
		if (!rc && cap->achieved_fps <= 0) {
			fprintf(stderr, "ingest-bench: no frame became durable while measuring the capacity\n");
			rc = -EIO;
		}
	}
	/* each repetition is a whole pass over the loads, so that a drift shows as spread */
	for (unsigned k = 0; k < c->repeat && !rc; k++) {
		for (unsigned l = 0; l < c->nload && !rc; l++) {
			struct point *p = &w->pts[g * c->nload + l], *t = &w->tmp;
			char what[48];
			p->xport = t->xport = c->xport[x];
			p->size = t->size = c->size[s].hi;
			p->size_lo = t->size_lo = c->size[s].lo;
			p->load = t->load = c->load[l];
			r->point_no++;
			if (c->repeat > 1)
				snprintf(what, sizeof(what), "%.0f%% load, pass %u/%u", c->load[l] * 100, k + 1,
					 c->repeat);
			else
				snprintf(what, sizeof(what), "%.0f%% load", c->load[l] * 100);
			t->sent = t->ok = t->failed = t->unsent = t->late_max_ns = t->ok_bytes = 0;
			double rate = c->load[l] * cap->achieved_fps;
			uint64_t dur = point_window_ns(rate, c->warmup_ms, c->duration_ms, c->min_frames);
			if (dur > (uint64_t)c->duration_ms * 1000000ull)
				fprintf(stderr, "%singest-bench: %s: %.2f frames/s offered: the window is %.1f s, "
					"not --duration %.1f s, to hold --min-frames %u\n", r->tty ? "\r" : "",
					what, rate, dur / 1e9, c->duration_ms / 1e3, c->min_frames);
			rc = phase(r, t, rate, (uint64_t)c->warmup_ms * 1000000ull, dur, what);
			print_point(r, t);
			point_merge(p, t, c);
			w->any_failed |= t->failed > 0;
		}
	}
	disconnect(r);
	return rc;
}

/* The plan and its ETA, before anything is measured. */
static void print_plan(const struct cfg *c, const struct sweep *w)
{
	char eta[16], until[16];
	double total = planned_s(c);
	time_t end = time(NULL) + (time_t)total;
	struct tm tm;
	localtime_r(&end, &tm);
	strftime(until, sizeof(until), "%H:%M:%S", &tm);
	fprintf(stderr, "ingest-bench: plan: %u transport%s x %u size%s: %s%u load%s x %u repetition%s "
		"of %.1f s (+ %.1f s warm-up) = %u points; about %s, done about %s\n", c->nxport,
		c->nxport == 1 ? "" : "s", c->nsize, c->nsize == 1 ? "" : "s",
		c->capacity_fps ? "" : "capacity (closed loop), then ", c->nload, c->nload == 1 ? "" : "s",
		c->repeat, c->repeat == 1 ? "" : "s", c->duration_ms / 1e3, c->warmup_ms / 1e3,
		w->r.points_total, fmt_secs(total, eta, sizeof(eta)), until);
}

/* Step 3: every transport x size group. 0, or the -errno that stopped it. */
static int run_sweep(const struct cfg *c, struct sweep *w)
{
	int rc = 0;
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	w->r.t_run0 = ing_now_ns();
	for (unsigned x = 0; x < c->nxport && !rc; x++)
		for (unsigned s = 0; s < c->nsize && !rc; s++)
			rc = sweep_group(c, w, x, s);
	print_stages(w->pts, w->npts);
	if (rc)
		fprintf(stderr, "ingest-bench: sweep stopped: %s; writing what was measured\n",
			strerror(-rc));
	return rc;
}

/* Step 4: results.json (and --json), points.csv, timeline.csv, the CDFs, plots, report.md. */
static int write_outputs(const struct cfg *c, struct sweep *w, bool *plotted)
{
	struct run *r = &w->r;
	FILE *f;

	*plotted = false;
	if (mkdir(c->out, 0755) && errno != EEXIST) {
		fprintf(stderr, "ingest-bench: --out %s: %s\n", c->out, strerror(errno));
		return -errno;
	}
	if (!(f = out_open(c, "results.json")))
		return -EIO;
	write_json(f, c, w->caps, w->pts, w->npts, w->fl, c->nsize, w->started, &w->node, &w->load,
		   r->all_durable);
	if (fclose(f))
		return -EIO;
	if (c->json) {
		write_json(stdout, c, w->caps, w->pts, w->npts, w->fl, c->nsize, w->started, &w->node,
			   &w->load, r->all_durable);
		fflush(stdout);
	}
	if (write_csv(c, w->pts, w->npts))
		return -EIO;
	if (!(f = out_open(c, "timeline.csv")))
		return -EIO;
	fprintf(f, "t_s,mb_s\n");
	uint64_t last_bin = (ing_now_ns() - r->t_run0) / TL_BIN_NS;
	for (unsigned b = 0; b < r->tl_n && b <= last_bin; b++)
		fprintf(f, "%.1f,%.2f\n", (double)b * TL_BIN_NS / 1e9,
			(double)r->tl_bytes[b] / 1e6 / ((double)TL_BIN_NS / 1e9));
	if (fclose(f))
		return -EIO;
	for (unsigned g = 0; g < w->ngroups; g++) {
		char tag[64], name[96];
		tag_of(&w->pts[g * c->nload], tag, sizeof(tag));
		snprintf(name, sizeof(name), "cdf_%s.dat", tag);
		if (!(f = out_open(c, name)))
			return -EIO;
		write_cdf(f, &w->pts[g * c->nload], c->nload);
		if (fclose(f))
			return -EIO;
	}
	*plotted = !c->no_plots && run_gnuplot(c, w->pts, w->npts, c->nload) == 0;
	if (!(f = out_open(c, "report.md")))
		return -EIO;
	write_report(f, c, w->caps, w->pts, w->npts, w->fl, w->started, *plotted, &w->node, &w->load,
		     r->all_durable);
	if (fclose(f))
		return -EIO;
	fprintf(stderr, "ingest-bench: results in %s/ (report.md, results.json, points.csv%s)\n",
		c->out, *plotted ? ", *.png" : "");
	return 0;
}

int main(int argc, char **argv)
{
	static struct cfg c;
	static struct sweep w;
	bool plotted = false;
	int rc;

	if (!getenv("ING_LOG_LEVEL"))
		ing_log_set_level(ING_LOG_WARN);   /* the library's info lines add nothing here */
	rc = parse_args(argc, argv, &c);
	if (rc)
		return rc == 1 ? ING_EXIT_OK : rc;
	signal(SIGPIPE, SIG_IGN);
	/* the machine and the node as they were before this tool added its own load */
	load_before(&w.load);
	node_info(&c, &w.node, false);
	if (sweep_alloc(&c, &w) || probe_node(&c, &w)) {
		sweep_free(&w);
		explicit_bzero(c.token, sizeof(c.token));
		return ING_EXIT_FAILURE;
	}
	print_plan(&c, &w);
	if (w.node.err[0])
		fprintf(stderr, "ingest-bench: the node's version and configuration are not known (%s): the "
			"report says so\n", w.node.err);
	rc = measure_floors(&c, &w);
	if (!rc)
		rc = run_sweep(&c, &w);
	read_loadavg(w.load.after);
	w.load.psi_after = read_cpu_pressure();
	node_info(&c, &w.node, true);
	int64_t others = other_frames(&w.node, w.r.all_durable);
	if (others > 0)
		fprintf(stderr, "ingest-bench: WARNING: other producers made %" PRId64 " frames DURABLE on the "
			"node during the run: the latencies include their load\n", others);
	explicit_bzero(c.token, sizeof(c.token));
	int out = write_outputs(&c, &w, &plotted);
	sweep_free(&w);
	return rc || out || w.any_failed || (!c.no_plots && !plotted) ? ING_EXIT_FAILURE : ING_EXIT_OK;
}
