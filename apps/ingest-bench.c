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
#include "ingest/producer.h"
#include "producer/synth.h"

#define DEFAULT_SERVER "127.0.0.1:50051"
#define DEFAULT_LOADS "10,30,50,70,90"
#define BUFFER_BUDGET (512ull << 20)
#define MAX_LOADS 16
#define MAX_SIZES 8
#define MAX_XPORTS 3
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
	double capacity_fps;       /* 0: measure */
	unsigned credits;
	bool json, no_plots;
	unsigned max_time_ms;
	/* floors measured elsewhere (ib_read_lat in the RDMA guest): --floor NAME=P50:P99 ms */
	struct { char name[64]; double p50_ms, p99_ms; } xfloor[4];
	unsigned nxfloor;
	char token[ING_AUTH_TOKEN_MAX + 2];
};

struct point {
	enum bx xport;
	uint64_t size, size_lo;    /* the largest frame; the smallest (== size: one size) */
	double load;               /* fraction; 0 for the capacity run */
	double offered_fps, achieved_fps, mb_s;
	uint64_t sent, ok, failed, unsent, late_max_ns, ok_bytes;
	struct ing_hist h[H_N];
};

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

/* ------------------------------------------------------------------ options */

static void cfg_init(void *p)
{
	struct cfg *c = p;
	memset(c, 0, sizeof(*c));
	c->server = DEFAULT_SERVER;
	c->out = "bench-results";
	c->wafer = "ingest-bench";
	c->git_rev = "unknown";
	c->transports = "grpc";
	c->sizes = "4M";
	c->loads = DEFAULT_LOADS;
	c->duration_ms = 5000;
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
	ING_OPT_CUSTOM_(C, "server", server, ing_opt_set_hostport, "HOST:PORT",
			"ingestd's gRPC address (default " DEFAULT_SERVER ")"),
	ING_OPT_PATH_(C, "out", out, "DIR", "results directory (created; default bench-results)"),
	ING_OPT_STR_(C, "transport", transports, "LIST", "grpc,rdma,rdma-write (default grpc; rdma: READ pull,\n"
		     "rdma-write: WRITE push)"),
	ING_OPT_STR_(C, "sizes", sizes, "LIST", "frame sizes, a sweep per item: sizes and MIN-MAX ranges\n"
		     "(a range: mixed sizes), e.g. 4M,16M or 1M-4M (default 4M)"),
	ING_OPT_STR_(C, "loads", loads, "LIST", "percent of the measured capacity (default " DEFAULT_LOADS ")"),
	ING_OPT_DURATION_(C, "duration", duration_ms, 100, 3600000, "measured time per load point"),
	ING_OPT_DURATION_(C, "warmup", warmup_ms, 0, 600000, "time before each point's measurement"),
	ING_OPT_DURATION_(C, "capacity-time", capacity_ms, 500, 600000, "closed loop to find the capacity"),
	ING_OPT_CUSTOM_(C, "capacity-fps", capacity_fps, set_capacity_fps, "F", "skip that and use F frames/s as 100 %"),
	ING_OPT_UINT_(C, "credits", credits, 1, 65535, "frames in flight wanted (default: the node's)"),
	ING_OPT_PATH_(C, "data-dir", data_dir, "DIR", "the node's data dir: the disk floor is measured there\n"
		      "(O_DIRECT write + fdatasync of one frame); default: none"),
	ING_OPT_STR_(C, "git-rev", git_rev, "REV", "recorded in results.json (default: unknown)"),
	ING_OPT_CUSTOM_(C, "floor", xfloor, set_floor, "NAME=P50:P99", "a floor measured elsewhere, in ms (e.g. ib_read_lat in the\n"
			"RDMA guest), shown in the report; up to 4"),
	ING_OPT_PATH_(C, "auth-token-file", auth_token_file, "PATH", "shared secret of an ingestd run with --auth-token-file"),
	ING_OPT_DURATION_(C, "max-time", max_time_ms, 1000, 86400000, "refuse a sweep planned longer than this"),
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
		 "results.json, points.csv and timeline.csv into --out.\n",
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
		c->nload * (c->duration_ms + c->warmup_ms) / 1e3);
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

/* ------------------------------------------------------------------ one phase */

static void progress(struct run *r, const struct point *pt, const char *what, uint64_t t0,
		     uint64_t total_ns, uint64_t *last)
{
	uint64_t now = ing_now_ns();
	if (!r->tty || now - *last < 250000000ull)
		return;
	*last = now;
	double done = (double)(now - t0) / 1e9, tot = (double)total_ns / 1e9;
	char sz[48];
	fprintf(stderr, "\r[%u/%u] %s %s %s: %4.1f/%.1f s  %" PRIu64 " durable  "
		"p99 %.2f ms   ", r->point_no, r->points_total, xname(pt->xport),
		size_label(pt, sz, sizeof(sz)), what, done > tot ? tot : done, tot, pt->ok,
		ms(ing_hist_quantile(&pt->h[H_DURABLE], 0.99)));
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

static void write_json(FILE *f, const struct cfg *c, const struct point *caps,
		       const struct point *pts, unsigned npts, const struct floor *fl, unsigned nfl,
		       const char *started)
{
	char host[512], cpu[256];
	host_info(host, sizeof(host), cpu, sizeof(cpu));
	fprintf(f, "{\"tool\":\"ingest-bench\",\"started\":\"%s\",\"git_rev\":", started);
	ing_json_str(f, c->git_rev);
	fprintf(f, ",\"host\":{\"uname\":");
	ing_json_str(f, host);
	fprintf(f, ",\"cpu\":");
	ing_json_str(f, cpu);
	fprintf(f, ",\"cpus_online\":%ld},\"params\":{\"server\":", sysconf(_SC_NPROCESSORS_ONLN));
	ing_json_str(f, c->server);
	fprintf(f, ",\"duration_s\":%.3f,\"warmup_s\":%.3f,\"capacity_s\":%.3f,"
		"\"capacity_fps_given\":%.3f,\"credits\":%u,\"loads_pct\":[",
		c->duration_ms / 1e3, c->warmup_ms / 1e3, c->capacity_ms / 1e3, c->capacity_fps, c->credits);
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

static void write_report(FILE *f, const struct cfg *c, const struct point *caps,
			 const struct point *pts, unsigned npts, const struct floor *fl,
			 const char *started, bool plots)
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
	char sz[48];
	fprintf(stderr, "%s%s %s load %5.1f%%: %7.1f fps offered, %7.1f achieved, "
		"DURABLE p50 %.2f p99 %.2f p99.9 %.2f ms; node p99 %.2f ms%s\n",
		r->tty ? "\r" : "", xname(p->xport), size_label(p, sz, sizeof(sz)), p->load * 100,
		p->offered_fps, p->achieved_fps, ms(ing_hist_quantile(d, 0.5)),
		ms(ing_hist_quantile(d, 0.99)), ms(ing_hist_quantile(d, 0.999)),
		ms(ing_hist_quantile(n, 0.99)), p->failed ? "  (FAILED FRAMES)" : "");
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
	r->points_total = w->npts + (c->capacity_fps ? 0 : w->ngroups);
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
	for (unsigned l = 0; l < c->nload && !rc; l++) {
		struct point *p = &w->pts[g * c->nload + l];
		char what[32];
		p->xport = c->xport[x];
		p->size = c->size[s].hi;
		p->size_lo = c->size[s].lo;
		p->load = c->load[l];
		r->point_no++;
		snprintf(what, sizeof(what), "%.0f%% load", c->load[l] * 100);
		rc = phase(r, p, c->load[l] * cap->achieved_fps, (uint64_t)c->warmup_ms * 1000000ull,
			   (uint64_t)c->duration_ms * 1000000ull, what);
		print_point(r, p);
		w->any_failed |= p->failed > 0;
	}
	disconnect(r);
	return rc;
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
	write_json(f, c, w->caps, w->pts, w->npts, w->fl, c->nsize, w->started);
	if (fclose(f))
		return -EIO;
	if (c->json) {
		write_json(stdout, c, w->caps, w->pts, w->npts, w->fl, c->nsize, w->started);
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
	write_report(f, c, w->caps, w->pts, w->npts, w->fl, w->started, *plotted);
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
	if (sweep_alloc(&c, &w) || probe_node(&c, &w)) {
		sweep_free(&w);
		explicit_bzero(c.token, sizeof(c.token));
		return ING_EXIT_FAILURE;
	}
	rc = measure_floors(&c, &w);
	if (!rc)
		rc = run_sweep(&c, &w);
	explicit_bzero(c.token, sizeof(c.token));
	int out = write_outputs(&c, &w, &plotted);
	sweep_free(&w);
	return rc || out || w.any_failed || (!c.no_plots && !plotted) ? ING_EXIT_FAILURE : ING_EXIT_OK;
}
