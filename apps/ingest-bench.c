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
 * Exit: 0 done, 1 a point failed frames or the outputs could not be written, 2 usage or
 * connection errors.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
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
	enum bx xport[MAX_XPORTS];
	unsigned nxport;
	uint64_t size[MAX_SIZES];
	unsigned nsize;
	double load[MAX_LOADS];
	unsigned nload;
	double duration_s, warmup_s, capacity_s;
	double capacity_fps;       /* 0: measure */
	unsigned credits;
	bool json, plots;
	double max_time_s;
	/* floors measured elsewhere (ib_read_lat in the RDMA guest): --floor NAME=P50:P99 ms */
	struct { char name[64]; double p50_ms, p99_ms; } xfloor[4];
	unsigned nxfloor;
};

struct point {
	enum bx xport;
	uint64_t size;
	double load;               /* fraction; 0 for the capacity run */
	double offered_fps, achieved_fps, mb_s;
	uint64_t sent, ok, failed, unsent, late_max_ns;
	struct ing_hist h[H_N];
};

struct floor {
	uint64_t size;
	struct ing_hist tcp, disk;
	char disk_note[160];
};

/* one frame in flight */
struct rec {
	uint64_t t_sched;
	int buf;                   /* index into bufs, -1 once RECEIVED */
	bool measured, used;
};

struct run {
	const struct cfg *c;
	struct ing_producer *p;
	void **bufs;
	uint32_t *crcs;
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

static void usage(FILE *f)
{
	fprintf(f,
		"usage: ingest-bench [options]\n"
		"  --server ADDR        ingestd gRPC address (default " DEFAULT_SERVER ")\n"
		"  --out DIR            results directory (created; default bench-results)\n"
		"  --transport LIST     grpc,rdma,rdma-write (default grpc; rdma: READ pull,\n"
		"                       rdma-write: WRITE push)\n"
		"  --sizes LIST         frame sizes, e.g. 4M,16M (default 4M)\n"
		"  --loads LIST         percent of the measured capacity (default " DEFAULT_LOADS ")\n"
		"  --duration S         measured seconds per load point (default 5)\n"
		"  --warmup S           seconds before each point's measurement (default 1)\n"
		"  --capacity-s S       closed-loop seconds to find the capacity (default 4)\n"
		"  --capacity-fps F     skip that and use F frames/s as 100 %%\n"
		"  --credits N          frames in flight wanted (default: the server's)\n"
		"  --data-dir DIR       the node's data dir: the disk floor is measured there\n"
		"                       (O_DIRECT write + fdatasync of one frame); default: none\n"
		"  --git-rev REV        recorded in results.json (default: unknown)\n"
		"  --floor NAME=P50:P99 a floor measured elsewhere, in ms (e.g. ib_read_lat in the\n"
		"                       RDMA guest), shown in the report; up to 4\n"
		"  --auth-token-file P  shared secret of an ingestd run with --auth-token-file\n"
		"  --max-time S         refuse a sweep planned longer than S (default 1800)\n"
		"  --no-plots           no gnuplot (data and report only)\n"
		"  --json               results.json also on stdout\n"
		"  --log-level L        err|warn|info|debug (default warn)\n");
}

/* ------------------------------------------------------------------ options */

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

static int parse_double(const char *s, double lo, double hi, double *v)
{
	char *e;
	errno = 0;
	*v = strtod(s, &e);
	return errno || e == s || *e || *v < lo || *v > hi ? -EINVAL : 0;
}

/* 0: run; 1: --help printed; -EINVAL: bad usage (said why) */
static int parse_args(int argc, char **argv, struct cfg *c)
{
	static const struct option lo[] = {
		{ "server", 1, 0, 's' }, { "out", 1, 0, 'o' }, { "transport", 1, 0, 't' },
		{ "sizes", 1, 0, 'z' }, { "loads", 1, 0, 'l' }, { "duration", 1, 0, 'd' },
		{ "warmup", 1, 0, 'w' }, { "capacity-s", 1, 0, 'C' }, { "capacity-fps", 1, 0, 'F' },
		{ "credits", 1, 0, 'c' }, { "data-dir", 1, 0, 'D' }, { "git-rev", 1, 0, 'g' },
		{ "auth-token-file", 1, 0, 'a' }, { "max-time", 1, 0, 'M' },
		{ "no-plots", 0, 0, 'P' }, { "json", 0, 0, 'j' }, { "help", 0, 0, 'h' },
		{ "log-level", 1, 0, 'L' }, { "floor", 1, 0, 'f' }, { 0, 0, 0, 0 },
	};
	char items[MAX_LOADS][32];
	int o, n;
	const char *loads = DEFAULT_LOADS;

	memset(c, 0, sizeof(*c));
	c->server = DEFAULT_SERVER;
	c->out = "bench-results";
	c->wafer = "ingest-bench";
	c->git_rev = "unknown";
	c->xport[0] = BX_GRPC;
	c->nxport = 1;
	c->size[0] = 4ull << 20;
	c->nsize = 1;
	c->duration_s = 5;
	c->warmup_s = 1;
	c->capacity_s = 4;
	c->plots = true;
	c->max_time_s = 1800;
	while ((o = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		uint64_t u;
		switch (o) {
		case 's': c->server = optarg; break;
		case 'o': c->out = optarg; break;
		case 'D': c->data_dir = optarg; break;
		case 'g': c->git_rev = optarg; break;
		case 'a': c->auth_token_file = optarg; break;
		case 'P': c->plots = false; break;
		case 'j': c->json = true; break;
		case 'L': {
			enum ing_log_level lv;
			if (ing_log_parse_level(optarg, &lv))
				goto bad;
			ing_log_set_level(lv);
			break;
		}
		case 'l': loads = optarg; break;
		case 't':
			if ((n = parse_list(optarg, items, MAX_XPORTS)) < 0)
				goto bad;
			c->nxport = (unsigned)n;
			for (int i = 0; i < n; i++) {
				if (!strcmp(items[i], "grpc"))
					c->xport[i] = BX_GRPC;
				else if (!strcmp(items[i], "rdma") || !strcmp(items[i], "rdma-read"))
					c->xport[i] = BX_RDMA;
				else if (!strcmp(items[i], "rdma-write"))
					c->xport[i] = BX_RDMA_WRITE;
				else {
					fprintf(stderr, "ingest-bench: --transport: '%s' is not grpc, rdma or rdma-write\n",
						items[i]);
					return -EINVAL;
				}
			}
			break;
		case 'z':
			if ((n = parse_list(optarg, items, MAX_SIZES)) < 0)
				goto bad;
			c->nsize = (unsigned)n;
			for (int i = 0; i < n; i++)
				if (synth_parse_size(items[i], &c->size[i]) || !c->size[i])
					goto bad;
			break;
		case 'd': if (parse_double(optarg, 0.1, 3600, &c->duration_s)) goto bad; break;
		case 'w': if (parse_double(optarg, 0, 600, &c->warmup_s)) goto bad; break;
		case 'C': if (parse_double(optarg, 0.5, 600, &c->capacity_s)) goto bad; break;
		case 'F': if (parse_double(optarg, 0.01, 1e6, &c->capacity_fps)) goto bad; break;
		case 'M': if (parse_double(optarg, 1, 86400, &c->max_time_s)) goto bad; break;
		case 'c':
			if (ing_parse_u64(optarg, 65535, &u) || !u)
				goto bad;
			c->credits = (unsigned)u;
			break;
		case 'f': {
			const char *eq = strrchr(optarg, '=');
			if (!eq || eq == optarg || (size_t)(eq - optarg) >= sizeof(c->xfloor[0].name) ||
			    c->nxfloor == 4 ||
			    sscanf(eq + 1, "%lf:%lf", &c->xfloor[c->nxfloor].p50_ms,
				   &c->xfloor[c->nxfloor].p99_ms) != 2)
				goto bad;
			memcpy(c->xfloor[c->nxfloor].name, optarg, (size_t)(eq - optarg));
			c->xfloor[c->nxfloor].name[eq - optarg] = 0;
			c->nxfloor++;
			break;
		}
		case 'h': usage(stdout); return 1;
		default: usage(stderr); return -EINVAL;
		}
		continue;
bad:
		fprintf(stderr, "ingest-bench: bad value '%s' for %s (see --help)\n", optarg,
			argv[optind - 1]);
		return -EINVAL;
	}
	if (optind < argc) {
		fprintf(stderr, "ingest-bench: unexpected argument '%s'\n", argv[optind]);
		return -EINVAL;
	}
	if ((n = parse_list(loads, items, MAX_LOADS)) < 0) {
		fprintf(stderr, "ingest-bench: --loads: a comma-separated list of percents\n");
		return -EINVAL;
	}
	c->nload = (unsigned)n;
	for (int i = 0; i < n; i++) {
		double v;
		if (parse_double(items[i], 0.1, 200, &v)) {
			fprintf(stderr, "ingest-bench: --loads: '%s' is not a percent in 0.1..200\n",
				items[i]);
			return -EINVAL;
		}
		c->load[i] = v / 100.0;
	}
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
	fprintf(stderr, "\r[%u/%u] %s %.0fK %s: %4.1f/%.1f s  %" PRIu64 " durable  "
		"p99 %.2f ms   ", r->point_no, r->points_total, xname(pt->xport),
		(double)pt->size / 1024.0, what, done > tot ? tot : done, tot, pt->ok,
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
			r->tl_bytes[bin] += pt->size;
		if (x->measured) {
			uint64_t sum = 0;
			pt->ok++;
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
				.length = pt->size, .crc32c = r->crcs[b], .has_crc = 1, .user = x,
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
			*x = (struct rec){ .t_sched = due, .buf = b, .measured = due >= t_meas, .used = true };
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
	pt->mb_s = (double)pt->ok * (double)pt->size / 1e6 / sec;
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

static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fprintf(f, "\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			fprintf(f, "\\u%04x", *s);
		else
			fputc(*s, f);
	}
	fputc('"', f);
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
	json_str(f, c->git_rev);
	fprintf(f, ",\"host\":{\"uname\":");
	json_str(f, host);
	fprintf(f, ",\"cpu\":");
	json_str(f, cpu);
	fprintf(f, ",\"cpus_online\":%ld},\"params\":{\"server\":", sysconf(_SC_NPROCESSORS_ONLN));
	json_str(f, c->server);
	fprintf(f, ",\"duration_s\":%.3f,\"warmup_s\":%.3f,\"capacity_s\":%.3f,"
		"\"capacity_fps_given\":%.3f,\"credits\":%u,\"loads_pct\":[",
		c->duration_s, c->warmup_s, c->capacity_s, c->capacity_fps, c->credits);
	for (unsigned i = 0; i < c->nload; i++)
		fprintf(f, "%s%.1f", i ? "," : "", c->load[i] * 100);
	fprintf(f, "],\"sizes\":[");
	for (unsigned i = 0; i < c->nsize; i++)
		fprintf(f, "%s%" PRIu64, i ? "," : "", c->size[i]);
	fprintf(f, "],\"transports\":[");
	for (unsigned i = 0; i < c->nxport; i++)
		fprintf(f, "%s\"%s\"", i ? "," : "", xname(c->xport[i]));
	fprintf(f, "],\"latency\":\"from each frame's scheduled send time (open loop), "
		"warm-up excluded; histogram error < 1 %%\"},\"capacity\":[");
	for (unsigned i = 0; i < c->nxport * c->nsize; i++)
		fprintf(f, "%s{\"transport\":\"%s\",\"size\":%" PRIu64 ",\"fps\":%.2f,\"mb_s\":%.1f}",
			i ? "," : "", xname(caps[i].xport), caps[i].size, caps[i].achieved_fps,
			caps[i].mb_s);
	fprintf(f, "],\"floors\":[");
	for (unsigned i = 0; i < nfl; i++) {
		fprintf(f, "%s{\"size\":%" PRIu64 ",\"tcp_loopback_rtt\":", i ? "," : "", fl[i].size);
		json_hist(f, &fl[i].tcp);
		fprintf(f, ",\"disk_write_fdatasync\":");
		json_hist(f, &fl[i].disk);
		fprintf(f, ",\"disk_note\":");
		json_str(f, fl[i].disk_note);
		fprintf(f, "}");
	}
	for (unsigned i = 0; i < c->nxfloor; i++) {
		fprintf(f, "%s{\"name\":", nfl || i ? "," : "");
		json_str(f, c->xfloor[i].name);
		fprintf(f, ",\"p50_ms\":%.4f,\"p99_ms\":%.4f,\"given\":true}", c->xfloor[i].p50_ms,
			c->xfloor[i].p99_ms);
	}
	fprintf(f, "],\"points\":[");
	for (unsigned i = 0; i < npts; i++) {
		const struct point *p = &pts[i];
		fprintf(f, "%s{\"transport\":\"%s\",\"size\":%" PRIu64 ",\"load_pct\":%.1f,"
			"\"offered_fps\":%.3f,\"achieved_fps\":%.3f,\"mb_s\":%.2f,\"sent\":%" PRIu64
			",\"ok\":%" PRIu64 ",\"failed\":%" PRIu64 ",\"unsent\":%" PRIu64
			",\"max_submit_lag_ms\":%.3f,\"stages\":{",
			i ? "," : "", xname(p->xport), p->size, p->load * 100, p->offered_fps,
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
	snprintf(buf, n, "%s_%" PRIu64 "K", xname(p->xport), p->size / 1024);
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
		c->duration_s, c->warmup_s);
	unsigned per = c->nload;
	for (unsigned g = 0; g < npts / per; g++) {
		const struct point *p0 = &pts[g * per], *cap = &caps[g];
		const struct floor *fr = NULL;
		char tag[64], tcpf[64] = "-", diskf[96] = "-";
		for (unsigned k = 0; k < c->nsize; k++)
			if (fl[k].size == p0->size)
				fr = &fl[k];
		if (fr && fr->tcp.count)
			snprintf(tcpf, sizeof(tcpf), "TCP RTT %.2f / %.2f", ms(ing_hist_quantile(&fr->tcp, 0.5)),
				 ms(ing_hist_quantile(&fr->tcp, 0.99)));
		if (fr && fr->disk.count)
			snprintf(diskf, sizeof(diskf), "write+fdatasync %.2f / %.2f (written+synced)",
				 ms(ing_hist_quantile(&fr->disk, 0.5)), ms(ing_hist_quantile(&fr->disk, 0.99)));
		char rdmaf[128] = "", rdmawf[128] = "";
		for (unsigned k = 0; k < c->nxfloor; k++) {
			char *dst = !strncmp(c->xfloor[k].name, "ib_read_lat", 11) ? rdmaf
				    : !strncmp(c->xfloor[k].name, "ib_write_lat", 12) ? rdmawf : NULL;
			if (dst)
				snprintf(dst, sizeof(rdmaf), "%s %.2f / %.2f", c->xfloor[k].name,
					 c->xfloor[k].p50_ms, c->xfloor[k].p99_ms);
		}
		tag_of(p0, tag, sizeof(tag));
		fprintf(f, "## %s, %.1f MiB frames\n\nCapacity (closed loop): **%.1f frames/s, "
			"%.1f MB/s**.\n\n| load | offered fps | achieved fps | MB/s | frames | failed | "
			"unsent | DURABLE P50 | P95 | P99 | P99.9 |\n|---|---|---|---|---|---|---|---|---|---|---|\n",
			xname(p0->xport), (double)p0->size / 1048576.0, cap->achieved_fps, cap->mb_s);
		for (unsigned i = 0; i < per; i++) {
			const struct point *p = &p0[i];
			const struct ing_hist *h = &p->h[H_DURABLE];
			fprintf(f, "| %.0f%% | %.1f | %.1f | %.1f | %" PRIu64 " | %" PRIu64 " | %" PRIu64
				" | %.2f | %.2f | %.2f | %.2f |\n", p->load * 100, p->offered_fps,
				p->achieved_fps, p->mb_s, p->ok, p->failed, p->unsent,
				ms(ing_hist_quantile(h, 0.5)), ms(ing_hist_quantile(h, 0.95)),
				ms(ing_hist_quantile(h, 0.99)), ms(ing_hist_quantile(h, 0.999)));
		}
		/* the bar: P99 at 50 % load <= 3x the unloaded P50 (the lowest load measured) */
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
					floor = p->xport == BX_RDMA && rdmaf[0] ? rdmaf
					      : p->xport == BX_RDMA_WRITE && rdmawf[0] ? rdmawf : tcpf;
				else if (k == H_NODE0 + ING_NODE_SYNCED)
					floor = diskf;
				md_hist_row(f, h_name[k], h_what[k], &p->h[k], floor);
			}
		}
		if (plots)
			fprintf(f, "\n![latency vs load](latency_vs_load_%s.png)\n\n"
				"![CDF per load](cdf_%s.png)\n\n![node stages P99](stages_p99_%s.png)\n",
				tag, tag, tag);
		fprintf(f, "\n");
	}
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
		fprintf(f, "%s,%s,%.1f,%" PRIu64 ",%.3f,%.3f,%.2f,%" PRIu64 ",%" PRIu64 ",%" PRIu64,
			tag, xname(p->xport), p->load * 100, p->size, p->offered_fps, p->achieved_fps,
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

static struct ing_producer *connect_for(const struct cfg *c, enum bx t, uint64_t size,
					struct run *r, const char *token)
{
	struct ing_producer_opts o;
	char err[256];
	ing_producer_opts_init(&o);
	o.server = c->server;
	o.transport = t == BX_GRPC ? ING_TRANSPORT_GRPC : ING_TRANSPORT_RDMA;
	o.rdma_mode = t == BX_RDMA_WRITE ? ING_RDMA_MODE_WRITE : ING_RDMA_MODE_DEFAULT;
	o.credits = c->credits;
	o.client_name = "ingest-bench";
	o.auth_token = token;
	o.frame_timeout_ms = 30000;
	o.pool_frame_size = (size + 4095) & ~4095ull;
	unsigned nbuf = c->credits ? c->credits : 64;
	if ((uint64_t)nbuf * o.pool_frame_size > BUFFER_BUDGET)
		nbuf = (unsigned)(BUFFER_BUDGET / o.pool_frame_size);
	if (nbuf < 2)
		nbuf = 2;
	o.pool_frames = nbuf;
	struct ing_producer *p = ing_producer_connect(&o, err, sizeof(err));
	if (!p) {
		fprintf(stderr, "ingest-bench: %s: %s\n", xname(t), err);
		return NULL;
	}
	if (size > ing_producer_max_frame(p)) {
		fprintf(stderr, "ingest-bench: %" PRIu64 "-byte frames exceed the node's maximum %" PRIu64 "\n",
			size, ing_producer_max_frame(p));
		ing_producer_close(p, 1000);
		return NULL;
	}
	r->p = p;
	r->nbuf = r->nfree = 0;
	for (unsigned i = 0; i < nbuf; i++) {
		void *b = ing_frame_alloc(p, size);
		if (!b)
			break;
		char id[64];
		snprintf(id, sizeof(id), "%s-buf-%u", r->tag, i);
		r->bufs[i] = b;
		r->crcs[i] = synth_fill_crc(b, size, synth_key(id), 1);
		r->free_buf[r->nfree++] = (int)i;
		r->nbuf++;
	}
	r->nrec = ing_producer_credits(p) + r->nbuf + 16;
	r->recs = calloc(r->nrec, sizeof(*r->recs));
	r->free_rec = calloc(r->nrec, sizeof(*r->free_rec));
	if (!r->recs || !r->free_rec || r->nbuf < 2) {
		fprintf(stderr, "ingest-bench: no memory for %u frame buffers\n", nbuf);
		ing_producer_close(p, 1000);
		return NULL;
	}
	r->nfree_rec = 0;
	for (unsigned i = 0; i < r->nrec; i++)
		r->free_rec[r->nfree_rec++] = (int)(r->nrec - 1 - i);
	return p;
}

static void disconnect(struct run *r)
{
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
	fprintf(stderr, "%s%s %6.1f KiB load %5.1f%%: %7.1f fps offered, %7.1f achieved, "
		"DURABLE p50 %.2f p99 %.2f p99.9 %.2f ms; node p99 %.2f ms%s\n",
		r->tty ? "\r" : "", xname(p->xport), (double)p->size / 1024.0, p->load * 100,
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

int main(int argc, char **argv)
{
	struct cfg c;
	struct run r;
	char token[ING_AUTH_TOKEN_MAX + 2] = "", why[256], started[64];
	int ret = 2;

	if (!getenv("ING_LOG_LEVEL"))
		ing_log_set_level(ING_LOG_WARN);   /* the library's info lines add nothing here */
	int pa = parse_args(argc, argv, &c);
	if (pa)
		return pa > 0 ? 0 : 2;
	if (c.auth_token_file &&
	    ing_token_file_read(c.auth_token_file, token, sizeof(token), why, sizeof(why))) {
		fprintf(stderr, "ingest-bench: %s\n", why);
		return 2;
	}
	double planned = (double)(c.nxport * c.nsize) *
			 ((c.capacity_fps ? 0 : c.capacity_s + 1) + c.nload * (c.duration_s + c.warmup_s));
	if (planned > c.max_time_s) {
		fprintf(stderr, "ingest-bench: the sweep would take about %.0f s, more than --max-time %.0f\n",
			planned, c.max_time_s);
		return 2;
	}
	if (mkdir(c.out, 0755) && errno != EEXIST) {
		fprintf(stderr, "ingest-bench: %s: %s\n", c.out, strerror(errno));
		return 2;
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGPIPE, SIG_IGN);
	time_t now_s = time(NULL);
	strftime(started, sizeof(started), "%Y-%m-%dT%H:%M:%SZ", gmtime(&now_s));

	memset(&r, 0, sizeof(r));
	r.c = &c;
	r.tty = isatty(STDERR_FILENO);
	snprintf(r.tag, sizeof(r.tag), "bench-%lld-%d", (long long)now_s, (int)getpid());
	r.bufs = calloc(BUFFER_BUDGET / 4096 + 64, sizeof(*r.bufs));
	r.crcs = calloc(BUFFER_BUDGET / 4096 + 64, sizeof(*r.crcs));
	r.free_buf = calloc(BUFFER_BUDGET / 4096 + 64, sizeof(*r.free_buf));
	unsigned ngroups = c.nxport * c.nsize, npts = ngroups * c.nload;
	struct point *pts = calloc(npts, sizeof(*pts)), *caps = calloc(ngroups, sizeof(*caps));
	struct floor *fl = calloc(c.nsize, sizeof(*fl));
	r.tl_n = (unsigned)((planned + 120 + ngroups * 2 * DRAIN_NS / 1e9) * 1e9 / TL_BIN_NS);
	r.tl_bytes = calloc(r.tl_n, sizeof(*r.tl_bytes));
	if (!r.bufs || !r.crcs || !r.free_buf || !pts || !caps || !fl || !r.tl_bytes) {
		fprintf(stderr, "ingest-bench: out of memory\n");
		goto out;
	}
	r.points_total = npts + (c.capacity_fps ? 0 : ngroups);

	/* the floors, per size, before the node is loaded */
	for (unsigned k = 0; k < c.nsize; k++) {
		void *d = malloc(c.size[k]);
		fl[k].size = c.size[k];
		if (!d)
			goto out;
		synth_fill(d, c.size[k], 1, 1);
		int rc = floor_tcp(c.size[k], d, &fl[k].tcp);
		if (rc)
			fprintf(stderr, "ingest-bench: TCP floor: %s\n", strerror(-rc));
		if (c.data_dir) {
			rc = floor_disk(c.data_dir, c.size[k], d, &fl[k].disk, fl[k].disk_note,
					sizeof(fl[k].disk_note));
			if (rc) {
				fprintf(stderr, "ingest-bench: disk floor in %s: %s\n", c.data_dir,
					strerror(-rc));
				snprintf(fl[k].disk_note, sizeof(fl[k].disk_note), "failed: %s",
					 strerror(-rc));
			}
		}
		fprintf(stderr, "floor %.1f MiB: TCP loopback RTT p50 %.2f p99 %.2f ms; disk write+fdatasync "
			"p50 %.2f p99 %.2f ms%s\n", (double)c.size[k] / 1048576.0,
			ms(ing_hist_quantile(&fl[k].tcp, 0.5)), ms(ing_hist_quantile(&fl[k].tcp, 0.99)),
			ms(ing_hist_quantile(&fl[k].disk, 0.5)), ms(ing_hist_quantile(&fl[k].disk, 0.99)),
			c.data_dir ? "" : " (no --data-dir: not measured)");
		free(d);
	}

	r.t_run0 = ing_now_ns();
	bool any_failed = false;
	int rc = 0;
	for (unsigned x = 0; x < c.nxport && !rc; x++) {
		for (unsigned s = 0; s < c.nsize && !rc; s++) {
			unsigned g = x * c.nsize + s;
			struct point *cap = &caps[g];
			cap->xport = c.xport[x];
			cap->size = c.size[s];
			if (!connect_for(&c, c.xport[x], c.size[s], &r, c.auth_token_file ? token : NULL)) {
				rc = -ECONNREFUSED;
				break;
			}
			if (bx_of(r.p) != c.xport[x]) {
				fprintf(stderr, "ingest-bench: asked for %s, got %s (%s)\n", xname(c.xport[x]),
					xname(bx_of(r.p)), ing_producer_transport_note(r.p));
				disconnect(&r);
				rc = -ENOTSUP;
				break;
			}
			if (c.capacity_fps) {
				cap->achieved_fps = c.capacity_fps;
				cap->mb_s = c.capacity_fps * (double)c.size[s] / 1e6;
			} else {
				r.point_no++;
				/* closed loop; the first quarter warms up */
				uint64_t dur = (uint64_t)(c.capacity_s * 1e9);
				rc = phase(&r, cap, 0, dur / 4, dur - dur / 4, "capacity");
				fprintf(stderr, "%s%s %.1f KiB capacity (closed loop, %u credits): %.1f frames/s, "
					"%.1f MB/s\n", r.tty ? "\r" : "", xname(c.xport[x]),
					(double)c.size[s] / 1024.0, ing_producer_credits(r.p),
					cap->achieved_fps, cap->mb_s);
				if (!rc && cap->achieved_fps <= 0) {
					fprintf(stderr, "ingest-bench: no frame became durable while measuring "
						"the capacity\n");
					rc = -EIO;
				}
			}
			for (unsigned l = 0; l < c.nload && !rc; l++) {
				struct point *p = &pts[g * c.nload + l];
				p->xport = c.xport[x];
				p->size = c.size[s];
				p->load = c.load[l];
				r.point_no++;
				char what[32];
				snprintf(what, sizeof(what), "%.0f%% load", c.load[l] * 100);
				rc = phase(&r, p, c.load[l] * cap->achieved_fps,
					   (uint64_t)(c.warmup_s * 1e9), (uint64_t)(c.duration_s * 1e9), what);
				print_point(&r, p);
				any_failed |= p->failed > 0;
			}
			disconnect(&r);
		}
	}
	print_stages(pts, npts);
	if (rc) {
		fprintf(stderr, "ingest-bench: sweep stopped: %s; writing what was measured\n",
			strerror(-rc));
	}

	/* results */
	FILE *f = out_open(&c, "results.json");
	if (!f)
		goto out;
	write_json(f, &c, caps, pts, npts, fl, c.nsize, started);
	if (fclose(f))
		goto out;
	if (c.json) {
		write_json(stdout, &c, caps, pts, npts, fl, c.nsize, started);
		fflush(stdout);
	}
	if (write_csv(&c, pts, npts))
		goto out;
	if (!(f = out_open(&c, "timeline.csv")))
		goto out;
	fprintf(f, "t_s,mb_s\n");
	uint64_t last_bin = (ing_now_ns() - r.t_run0) / TL_BIN_NS;
	for (unsigned b = 0; b < r.tl_n && b <= last_bin; b++)
		fprintf(f, "%.1f,%.2f\n", (double)b * TL_BIN_NS / 1e9,
			(double)r.tl_bytes[b] / 1e6 / ((double)TL_BIN_NS / 1e9));
	fclose(f);
	for (unsigned g = 0; g < ngroups; g++) {
		char tag[64], name[96];
		tag_of(&pts[g * c.nload], tag, sizeof(tag));
		snprintf(name, sizeof(name), "cdf_%s.dat", tag);
		if (!(f = out_open(&c, name)))
			goto out;
		write_cdf(f, &pts[g * c.nload], c.nload);
		fclose(f);
	}
	bool plotted = c.plots && run_gnuplot(&c, pts, npts, c.nload) == 0;
	if (!(f = out_open(&c, "report.md")))
		goto out;
	write_report(f, &c, caps, pts, npts, fl, started, plotted);
	fclose(f);
	fprintf(stderr, "ingest-bench: results in %s/ (report.md, results.json, points.csv%s)\n",
		c.out, plotted ? ", *.png" : "");
	ret = rc ? 2 : (any_failed || (c.plots && !plotted)) ? 1 : 0;
out:
	explicit_bzero(token, sizeof(token));
	free(r.bufs);
	free(r.crcs);
	free(r.free_buf);
	free(r.tl_bytes);
	free(pts);
	free(caps);
	free(fl);
	return ret;
}
