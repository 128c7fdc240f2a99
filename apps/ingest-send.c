/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ingest-send - send frames to ingestd with libingest: files given as arguments, and/or
 * synthetic frames whose content is a function of (frame id, seed) (producer/synth.h), so
 * ingest-verify can check what was stored without a copy of the data. Frame ids are
 * strings: --id-prefix plus a counter from --first-id ("frame-1", "frame-2", ...).
 *
 *   ingest-send --count 300 --sizes 1M-16M --seed 7 --server 127.0.0.1:50051
 *   ingest-send --wafer W42 a.tif b.tif
 *   ingest-send --servers 127.0.0.1:50061,127.0.0.1:50062 --wafer LOT7 --wafers 40 --count 400
 *
 * Exit status: 0 when every frame reached DURABLE ok (a duplicate with the same bytes is
 * ok), 1 when some frame failed, 2 on usage or connection errors.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/token.h"
#include "common/io.h"
#include "common/parse.h"
#include "common/clock.h"
#include "common/hist.h"
#include "common/ident.h"
#include "common/log.h"
#include "ingest/producer.h"
#include "producer/synth.h"

#define DEFAULT_SERVER "127.0.0.1:50051"
#define DEFAULT_WAFER "ingest-send"
#define DEFAULT_ID_PREFIX "frame-"
#define BUFFER_BUDGET (512ull << 20)   /* frame buffers held at once, at most */
#define HOOK_TIMEOUT_MS 30000          /* --durable-hook: a hook still running is killed */

extern char **environ;

enum job_state { JOB_PENDING = 0, JOB_SUBMITTED, JOB_DONE_OK, JOB_FAILED };

struct job {
	uint64_t n;           /* counter: the frame id is id_prefix + n (job_id) */
	uint64_t len;
	uint32_t crc;
	const char *path;     /* file, or NULL for a synthetic frame */
	void *buf;            /* pool buffer while the library may still read it */
	enum job_state state;
	bool duplicate;
	uint64_t t_start;     /* --rate: scheduled send time; else submit time (ns) */
};

struct send_cfg {
	const char *server;
	enum ing_transport transport;
	enum ing_rdma_mode rdma_mode;
	unsigned credits;
	const char *wafer;
	const char *id_prefix;
	uint64_t first_id;
	uint64_t count;
	struct synth_spec synth;
	enum ing_ack_stage recycle_on;
	bool json, quiet;
	const char *manifest;
	const char *durable_manifest; /* lines for frames ACKed DURABLE ok, flushed per ack */
	const char *durable_hook;     /* sh -c command run (and waited for) per DURABLE ok ack */
	int frame_timeout_ms;
	int connect_timeout_ms;
	uint32_t chunk_size;
	unsigned buffers;
	bool reuse;           /* benchmark mode: fill each buffer once, resend its bytes */
	uint64_t rate;        /* open loop: frames per second (0: as fast as credits allow) */
	const char *auth_token_file;  /* NULL: no token */
	const char *tls_ca, *tls_cert, *tls_key, *tls_server_name;  /* TLS when tls_ca is set */
	/* fleet mode */
	const char *servers;  /* several nodes: routing by wafer, failover */
	uint64_t wafers;      /* > 0: frame n goes to wafer "<wafer>-<n mod wafers>" */
	int ack_deadline_ms, keepalive_ms, node_cooldown_ms, membership_refresh_ms;
	const char *placement; /* "frame_id wafer node resends" per DURABLE ack */
};

/* --reuse-buffers: what a pool buffer already holds */
struct filled {
	void *buf;
	uint64_t len;
	uint32_t crc;
};

static volatile sig_atomic_t stop_flag;

static void on_signal(int sig)
{
	(void)sig;
	stop_flag = 1;
}

/* "rdma" (READ pull), "rdma-write" (push) or "grpc" */
static const char *transport_name(const struct ing_producer *p)
{
	if (ing_producer_transport(p) != ING_TRANSPORT_RDMA)
		return "grpc";
	return strncmp(ing_producer_transport_note(p), "RDMA_WRITE", 10) ? "rdma" : "rdma-write";
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: ingest-send [options] [FILE...]\n"
		"  --server ADDR          ingestd gRPC address (default " DEFAULT_SERVER ")\n"
		"  --transport T          auto|rdma|rdma-read|rdma-write|grpc (default auto; rdma:\n"
		"                         RDMA READ pull, rdma-write: RDMA WRITE push, docs/PUSH.md)\n"
		"  --credits N            frames in flight wanted (default: the server's)\n"
		"  --wafer ID             wafer id of every frame (default " DEFAULT_WAFER "; \"\": the\n"
		"                         node's default wafer); 1..256 bytes of UTF-8, no control chars\n"
		"  --id-prefix P          frame ids are P followed by a counter (default " DEFAULT_ID_PREFIX ")\n"
		"  --first-id N           counter of the first frame (default 1); files follow\n"
		"                         the synthetic frames\n"
		"  --count N              synthetic frames to send (default 0)\n"
		"  --size SIZE            synthetic frame size, e.g. 4M (default 4M)\n"
		"  --sizes MIN-MAX        uniformly mixed sizes, e.g. 1M-16M (with --seed)\n"
		"  --seed S               content/size seed (default 1)\n"
		"  --recycle-on STAGE     received|durable: when a frame buffer is reused\n"
		"  --manifest PATH        write 'frame_id wafer length crc32c source' per frame\n"
		"  --durable-manifest PATH  the same, only for frames ACKed DURABLE ok, each line\n"
		"                         flushed as its ack arrives (what the node promised to keep)\n"
		"  --durable-hook CMD     run 'sh -c CMD' after each DURABLE ok ack (after its\n"
		"                         --durable-manifest line) and wait for it, with\n"
		"                         ING_DURABLE_SEQ (1, 2, ...), ING_FRAME_ID, ING_WAFER_ID in\n"
		"                         its environment; a hook that fails or runs 30 s stops the\n"
		"                         run (exit 1). E.g. a block-device log mark per ack\n"
		"  --frame-timeout-ms N   a frame not DURABLE after N ms fails (default 60000)\n"
		"  --connect-timeout-ms N (default 5000)\n"
		"  --auth-token-file PATH shared secret of an ingestd run with --auth-token-file (one\n"
		"                         line, 16..256 printable characters, mode 600; never printed)\n"
		"  --tls-ca PEM           TLS: verify the node's certificate against this CA and its\n"
		"                         name against --server's host (ALPN h2)\n"
		"  --tls-cert PEM, --tls-key PEM  client certificate for a node with --tls-client-ca\n"
		"  --tls-server-name NAME name to verify instead of --server's host\n"
		"  --servers LIST         fleet mode: several ingestd, \"host:port,host:port,...\";\n"
		"                         membership from the nodes, each wafer to its HRW owner,\n"
		"                         frames kept until DURABLE and re-sent to the next node\n"
		"                         when one fails (docs/FLEET.md); the summary says where\n"
		"                         frames went and how many were re-sent\n"
		"  --wafers N             spread frames over N wafers: frame n goes to wafer\n"
		"                         <wafer>-<n mod N> (default: all in --wafer)\n"
		"  --ack-deadline-ms N    fleet: a node holding a frame this long without its\n"
		"                         DURABLE ack is failed over (default 10000)\n"
		"  --keepalive-ms N       HTTP/2 PING period; unanswered for 2N ms: connection dead\n"
		"                         (default 1000 with --servers, off with --server)\n"
		"  --node-cooldown-ms N   fleet: a failed node is left alone this long (default 5000)\n"
		"  --membership-refresh-ms N  fleet: ask the nodes for Members this often (default 2000)\n"
		"  --placement PATH       fleet: 'frame_id wafer node resends' per DURABLE frame,\n"
		"                         flushed per ack (where each frame ended up)\n"
		"  --chunk-size SIZE      fallback chunk size (default: the server's)\n"
		"  --buffers N            frame buffers (default: credits, within 512 MiB)\n"
		"  --rate FPS             open loop: start frame i at i/FPS s, whatever the acks do,\n"
		"                         and measure latency from that scheduled time (so queueing\n"
		"                         behind a slow node counts: no coordinated omission);\n"
		"                         default: closed loop, as fast as credits allow\n"
		"  --reuse-buffers        benchmark mode: generate each buffer's bytes once and\n"
		"                         resend them (crc32c exact) under new frame ids, so the\n"
		"                         client's generator is out of the measurement; stored\n"
		"                         frames are then not the synthetic frames of their ids\n"
		"  --json                 final summary also as one JSON object on stdout\n"
		"  --quiet                no progress line, no text summary\n"
		"  --log-level L          err|warn|info|debug (default warn, or $ING_LOG_LEVEL)\n");
}

static int parse_u64(const char *s, uint64_t *v)
{
	return ing_parse_u64(s, UINT64_MAX, v);
}

static int read_file(const char *path, void *buf, uint64_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	int rc = ing_read_full(fd, buf, len);
	close(fd);
	return rc;
}

/* The frame id of job j: id_prefix + counter. */
static const char *job_id(const struct send_cfg *c, const struct job *j, char *buf, size_t cap)
{
	snprintf(buf, cap, "%s%" PRIu64, c->id_prefix, j->n);
	return buf;
}

/* --reuse-buffers: generate a buffer's bytes only the first time (or for another length). */
static uint32_t reuse_fill(struct filled *fill, unsigned *nfill, unsigned cap, void *b,
			   const struct job *j, const char *id, uint64_t seed)
{
	unsigned k;
	for (k = 0; k < *nfill && fill[k].buf != b; k++)
		;
	if (k < *nfill && fill[k].len == j->len)
		return fill[k].crc;
	if (k == *nfill && *nfill < cap)
		(*nfill)++;
	uint32_t crc = synth_fill_crc(b, j->len, synth_key(id), seed);
	if (k < *nfill)
		fill[k] = (struct filled){ .buf = b, .len = j->len, .crc = crc };
	return crc;
}

static double ms(uint64_t ns)
{
	return (double)ns / 1e6;
}

struct progress {
	bool tty;
	uint64_t last_ns;
	uint64_t t0;
};

static void progress_line(struct progress *pg, const struct ing_producer *p, uint64_t done,
			  uint64_t total, uint64_t bytes, bool final)
{
	uint64_t now = ing_now_ns();
	uint64_t period = pg->tty ? 250000000ull : 2000000000ull;
	if (!final && now - pg->last_ns < period)
		return;
	if (final && !pg->tty)
		return;
	pg->last_ns = now;
	double s = (double)(now - pg->t0) / 1e9;
	double mbs = s > 0 ? (double)bytes / 1e6 / s : 0;
	fprintf(stderr, "%sframes %" PRIu64 "/%" PRIu64 "  %.1f MB/s  in flight %u%s",
		pg->tty ? "\r" : "", done, total, mbs, ing_producer_in_flight(p),
		pg->tty ? (final ? "    \n" : "    ") : "\n");
}

static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

/*
 * ingest-verify's manifest format (v2): "frame_id wafer length crc32c source", ids
 * escaped by ing_id_escape (bytes <= 0x20, '%' and >= 0x7f as %XX), the wafer as the node
 * files it ("default" for an empty --wafer), source "synth:SEED" or "file:PATH".
 */
static FILE *manifest_open(const char *path)
{
	FILE *f = fopen(path, "w");
	if (!f) {
		fprintf(stderr, "ingest-send: %s: %s\n", path, strerror(errno));
		return NULL;
	}
	fprintf(f, "# ingest-send manifest v2: frame_id wafer length crc32c source\n");
	return f;
}

/* The wafer of job j: --wafer, or with --wafers N "<wafer>-<n mod N>". */
static const char *job_wafer(const struct send_cfg *c, const struct job *j, char *buf, size_t cap)
{
	if (!c->wafers)
		return c->wafer;
	snprintf(buf, cap, "%s-%" PRIu64, c->wafer, j->n % c->wafers);
	return buf;
}

static void manifest_line(FILE *f, const struct job *j, const struct send_cfg *c)
{
	char id[ING_ID_MAX + 32], eid[3 * sizeof(id)], ew[3 * ING_ID_MAX + 1], wb[ING_ID_MAX + 32];
	const char *w = job_wafer(c, j, wb, sizeof(wb));
	if (!w[0])
		w = ING_DEFAULT_WAFER;

	ing_id_escape(eid, sizeof(eid), job_id(c, j, id, sizeof(id)));
	ing_id_escape(ew, sizeof(ew), w);
	if (j->path)
		fprintf(f, "%s %s %" PRIu64 " %08x file:%s\n", eid, ew, j->len, j->crc, j->path);
	else
		fprintf(f, "%s %s %" PRIu64 " %08x synth:%" PRIu64 "\n", eid, ew, j->len, j->crc,
			c->synth.seed);
}



/*
 * --durable-hook: run the command for DURABLE ack number `seq` and wait for it (bounded).
 * posix_spawn, not fork: the process holds the (registered) frame pool. Returns 0 when the
 * hook exited 0, else -1 after saying why.
 */
static int run_durable_hook(const struct send_cfg *c, const struct job *j, uint64_t seq)
{
	char id[ING_ID_MAX + 32], v_seq[48], v_id[sizeof(id) + 16], v_wafer[ING_ID_MAX + 16];
	size_t n = 0;
	int rc = -1, status;
	pid_t pid;

	while (environ[n])
		n++;
	char **env = calloc(n + 4, sizeof(*env));
	if (!env) {
		fprintf(stderr, "ingest-send: --durable-hook: out of memory\n");
		return -1;
	}
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (strncmp(environ[i], "ING_DURABLE_SEQ=", 16) && strncmp(environ[i], "ING_FRAME_ID=", 13) &&
		    strncmp(environ[i], "ING_WAFER_ID=", 13))
			env[k++] = environ[i];
	snprintf(v_seq, sizeof(v_seq), "ING_DURABLE_SEQ=%" PRIu64, seq);
	snprintf(v_id, sizeof(v_id), "ING_FRAME_ID=%s", job_id(c, j, id, sizeof(id)));
	snprintf(v_wafer, sizeof(v_wafer), "ING_WAFER_ID=%s", c->wafer[0] ? c->wafer : ING_DEFAULT_WAFER);
	env[k++] = v_seq;
	env[k++] = v_id;
	env[k++] = v_wafer;
	env[k] = NULL;
	char *argv[] = { "sh", "-c", (char *)c->durable_hook, NULL };
	int e = posix_spawn(&pid, "/bin/sh", NULL, NULL, argv, env);
	free(env);
	if (e) {
		fprintf(stderr, "ingest-send: --durable-hook: cannot start /bin/sh: %s\n", strerror(e));
		return -1;
	}
	uint64_t deadline = ing_now_ns() + HOOK_TIMEOUT_MS * 1000000ull;
	for (;;) {
		pid_t w = waitpid(pid, &status, WNOHANG);
		if (w == pid)
			break;
		if (w < 0 && errno != EINTR) {
			fprintf(stderr, "ingest-send: --durable-hook: waitpid: %s\n", strerror(errno));
			return -1;
		}
		if (ing_now_ns() > deadline) {
			kill(pid, SIGKILL);
			while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
				;
			fprintf(stderr, "ingest-send: --durable-hook: still running after %d ms for "
				"ack %" PRIu64 ": killed\n", HOOK_TIMEOUT_MS, seq);
			return -1;
		}
		nanosleep(&(struct timespec){ .tv_nsec = 1000000 }, NULL);
	}
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		rc = 0;
	else if (WIFEXITED(status))
		fprintf(stderr, "ingest-send: --durable-hook exited %d for ack %" PRIu64 " (frame %s)\n",
			WEXITSTATUS(status), seq, id);
	else
		fprintf(stderr, "ingest-send: --durable-hook killed by signal %d for ack %" PRIu64 "\n",
			WTERMSIG(status), seq);
	return rc;
}

static int parse_args(int argc, char **argv, struct send_cfg *c)
{
	enum {
		O_SERVER = 256, O_TRANSPORT, O_CREDITS, O_WAFER, O_FIRST, O_COUNT, O_SIZE, O_SIZES,
		O_SEED, O_RECYCLE, O_JSON, O_QUIET, O_MANIFEST, O_FTO, O_CTO, O_CHUNK, O_BUFS,
		O_REUSE, O_RATE, O_DMAN, O_PREFIX, O_DHOOK,
		O_LOG, O_HELP, O_AUTH, O_TLS_CA, O_TLS_CERT, O_TLS_KEY, O_TLS_NAME,
		O_SERVERS, O_WAFERS, O_ACKDL, O_KEEPALIVE, O_COOLDOWN, O_REFRESH, O_PLACEMENT,
	};
	static const struct option lo[] = {
		{ "server", required_argument, 0, O_SERVER },
		{ "transport", required_argument, 0, O_TRANSPORT },
		{ "credits", required_argument, 0, O_CREDITS },
		{ "wafer", required_argument, 0, O_WAFER },
		{ "first-id", required_argument, 0, O_FIRST },
		{ "id-prefix", required_argument, 0, O_PREFIX },
		{ "count", required_argument, 0, O_COUNT },
		{ "size", required_argument, 0, O_SIZE },
		{ "sizes", required_argument, 0, O_SIZES },
		{ "seed", required_argument, 0, O_SEED },
		{ "recycle-on", required_argument, 0, O_RECYCLE },
		{ "json", no_argument, 0, O_JSON },
		{ "quiet", no_argument, 0, O_QUIET },
		{ "manifest", required_argument, 0, O_MANIFEST },
		{ "frame-timeout-ms", required_argument, 0, O_FTO },
		{ "connect-timeout-ms", required_argument, 0, O_CTO },
		{ "chunk-size", required_argument, 0, O_CHUNK },
		{ "buffers", required_argument, 0, O_BUFS },
		{ "reuse-buffers", no_argument, 0, O_REUSE },
		{ "rate", required_argument, 0, O_RATE },
		{ "durable-manifest", required_argument, 0, O_DMAN },
		{ "durable-hook", required_argument, 0, O_DHOOK },
		{ "log-level", required_argument, 0, O_LOG },
		{ "help", no_argument, 0, O_HELP },
		{ "auth-token-file", required_argument, 0, O_AUTH },
		{ "tls-ca", required_argument, 0, O_TLS_CA },
		{ "tls-cert", required_argument, 0, O_TLS_CERT },
		{ "tls-key", required_argument, 0, O_TLS_KEY },
		{ "tls-server-name", required_argument, 0, O_TLS_NAME },
		{ "servers", required_argument, 0, O_SERVERS },
		{ "wafers", required_argument, 0, O_WAFERS },
		{ "ack-deadline-ms", required_argument, 0, O_ACKDL },
		{ "keepalive-ms", required_argument, 0, O_KEEPALIVE },
		{ "node-cooldown-ms", required_argument, 0, O_COOLDOWN },
		{ "membership-refresh-ms", required_argument, 0, O_REFRESH },
		{ "placement", required_argument, 0, O_PLACEMENT },
		{ 0, 0, 0, 0 },
	};
	uint64_t v;
	int opt;

	while ((opt = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (opt) {
		case O_SERVER: c->server = optarg; break;
		case O_TRANSPORT:
			if (!strcmp(optarg, "auto"))
				c->transport = ING_TRANSPORT_AUTO;
			else if (!strcmp(optarg, "rdma") || !strcmp(optarg, "rdma-read"))
				c->transport = ING_TRANSPORT_RDMA;
			else if (!strcmp(optarg, "rdma-write")) {
				c->transport = ING_TRANSPORT_RDMA;
				c->rdma_mode = ING_RDMA_MODE_WRITE;
			}
			else if (!strcmp(optarg, "grpc"))
				c->transport = ING_TRANSPORT_GRPC;
			else
				goto bad;
			break;
		case O_CREDITS:
			if (parse_u64(optarg, &v) || v == 0 || v > 4096)
				goto bad;
			c->credits = (unsigned)v;
			break;
		case O_WAFER: c->wafer = optarg; break;
		case O_PREFIX: c->id_prefix = optarg; break;
		case O_FIRST:
			if (parse_u64(optarg, &c->first_id))
				goto bad;
			break;
		case O_COUNT:
			if (parse_u64(optarg, &c->count) || c->count > 100000000)
				goto bad;
			break;
		case O_SIZE:
			if (synth_parse_size(optarg, &v) || v == 0)
				goto bad;
			c->synth.size_min = c->synth.size_max = v;
			break;
		case O_SIZES:
			if (synth_parse_range(optarg, &c->synth.size_min, &c->synth.size_max))
				goto bad;
			break;
		case O_SEED:
			if (parse_u64(optarg, &c->synth.seed))
				goto bad;
			break;
		case O_RECYCLE:
			if (!strcmp(optarg, "received"))
				c->recycle_on = ING_ACK_RECEIVED;
			else if (!strcmp(optarg, "durable"))
				c->recycle_on = ING_ACK_DURABLE;
			else
				goto bad;
			break;
		case O_JSON: c->json = true; break;
		case O_QUIET: c->quiet = true; break;
		case O_MANIFEST: c->manifest = optarg; break;
		case O_DMAN: c->durable_manifest = optarg; break;
		case O_DHOOK:
			if (!*optarg) {
				fprintf(stderr, "ingest-send: --durable-hook needs a command\n");
				return -EINVAL;
			}
			c->durable_hook = optarg;
			break;
		case O_FTO:
			if (parse_u64(optarg, &v) || v == 0 || v > 3600000)
				goto bad;
			c->frame_timeout_ms = (int)v;
			break;
		case O_CTO:
			if (parse_u64(optarg, &v) || v == 0 || v > 600000)
				goto bad;
			c->connect_timeout_ms = (int)v;
			break;
		case O_CHUNK:
			if (synth_parse_size(optarg, &v) || v == 0 || v > (64u << 20))
				goto bad;
			c->chunk_size = (uint32_t)v;
			break;
		case O_BUFS:
			if (parse_u64(optarg, &v) || v == 0 || v > 4096)
				goto bad;
			c->buffers = (unsigned)v;
			break;
		case O_REUSE: c->reuse = true; break;
		case O_AUTH:
			if (!*optarg)
				goto bad;
			c->auth_token_file = optarg;
			break;
		case O_TLS_CA: c->tls_ca = optarg; break;
		case O_TLS_CERT: c->tls_cert = optarg; break;
		case O_TLS_KEY: c->tls_key = optarg; break;
		case O_TLS_NAME: c->tls_server_name = optarg; break;
		case O_SERVERS:
			if (!*optarg)
				goto bad;
			c->servers = optarg;
			break;
		case O_WAFERS:
			if (parse_u64(optarg, &c->wafers) || c->wafers == 0 || c->wafers > 10000000)
				goto bad;
			break;
		case O_ACKDL:
		case O_KEEPALIVE:
		case O_COOLDOWN:
		case O_REFRESH:
			if (parse_u64(optarg, &v) || v == 0 || v > 3600000)
				goto bad;
			*(opt == O_ACKDL ? &c->ack_deadline_ms : opt == O_KEEPALIVE ? &c->keepalive_ms :
			  opt == O_COOLDOWN ? &c->node_cooldown_ms : &c->membership_refresh_ms) = (int)v;
			break;
		case O_PLACEMENT: c->placement = optarg; break;
		case O_RATE:
			if (parse_u64(optarg, &v) || v == 0 || v > 1000000)
				goto bad;
			c->rate = v;
			break;
		case O_LOG: {
			enum ing_log_level l;
			if (ing_log_parse_level(optarg, &l))
				goto bad;
			ing_log_set_level(l);
			break;
		}
		case O_HELP:
		case 'h':
			usage(stdout);
			return 1;
		default:
			usage(stderr);
			return -EINVAL;
		}
	}
	return 0;
bad:
	for (const struct option *l = lo; l->name; l++)
		if (l->val == opt)
			fprintf(stderr, "ingest-send: bad value for --%s: '%s'\n", l->name, optarg);
	return -EINVAL;
}

int main(int argc, char **argv)
{
	struct send_cfg c = {
		.server = DEFAULT_SERVER, .transport = ING_TRANSPORT_AUTO, .wafer = DEFAULT_WAFER,
		.id_prefix = DEFAULT_ID_PREFIX, .first_id = 1, .synth = { .seed = 1, .size_min = 4u << 20, .size_max = 4u << 20 },
		.recycle_on = ING_ACK_RECEIVED,
	};
	struct ing_producer *p = NULL;
	struct job *jobs = NULL;
	struct filled *fill = NULL;   /* --reuse-buffers */
	unsigned nfill = 0;
	FILE *man = NULL, *dman = NULL, *pman = NULL;
	int ret = 2;
	static char token[ING_AUTH_TOKEN_MAX + 1];

	if (!getenv("ING_LOG_LEVEL"))
		ing_log_set_level(ING_LOG_WARN);   /* the summary repeats the library's info lines */
	int rc = parse_args(argc, argv, &c);
	if (rc)
		return rc > 0 ? 0 : 2;
	const char *why;
	if (c.wafer[0] && (why = ing_id_check(c.wafer, strlen(c.wafer)))) {
		fprintf(stderr, "ingest-send: bad --wafer: it %s; a wafer id is empty (the node's default wafer) or "
			ING_ID_RULE "\n", why);
		return 2;
	}
	{
		/* the longest id this run makes must follow the rule too */
		char id[ING_ID_MAX + 32];
		uint64_t last = c.first_id + c.count + (uint64_t)(argc - optind);
		snprintf(id, sizeof(id), "%s%" PRIu64, c.id_prefix, last > c.first_id ? last - 1 : last);
		if ((why = ing_id_check(id, strlen(id)))) {
			fprintf(stderr, "ingest-send: bad --id-prefix: the frame ids it makes (e.g. '%s') must be "
				ING_ID_RULE "%s%s\n", id, why ? "; this one " : "", why ? why : "");
			return 2;
		}
	}
	if (c.wafers && !c.wafer[0]) {
		fprintf(stderr, "ingest-send: --wafers needs a non-empty --wafer (the wafer ids' prefix)\n");
		return 2;
	}
	if (c.servers)
		c.recycle_on = ING_ACK_DURABLE;   /* fleet: a re-send reads the bytes again */
	if (c.reuse && c.manifest) {
		fprintf(stderr, "ingest-send: --reuse-buffers sends bytes that are not the synthetic frames: no --manifest\n");
		return 2;
	}
	if (c.auth_token_file) {
		char twhy[4096 + 96];
		if (ing_token_file_read(c.auth_token_file, token, sizeof(token), twhy, sizeof(twhy))) {
			fprintf(stderr, "ingest-send: --auth-token-file: '%s': %s\n", c.auth_token_file, twhy);
			return 2;
		}
	}
	uint64_t nfiles = (uint64_t)(argc - optind);
	uint64_t njobs = c.count + nfiles;
	if (!njobs) {
		fprintf(stderr, "ingest-send: nothing to send (give --count N or files)\n");
		usage(stderr);
		return 2;
	}
	jobs = calloc(njobs, sizeof(*jobs));
	if (!jobs) {
		fprintf(stderr, "ingest-send: out of memory for %" PRIu64 " frames\n", njobs);
		return 2;
	}
	uint64_t max_len = 0, total_bytes = 0;
	for (uint64_t i = 0; i < njobs; i++) {
		struct job *j = &jobs[i];
		char id[ING_ID_MAX + 32];
		j->n = c.first_id + i;
		if (i < c.count) {
			j->len = synth_frame_len(&c.synth, synth_key(job_id(&c, j, id, sizeof(id))));
		} else {
			struct stat st;
			j->path = argv[optind + (i - c.count)];
			errno = 0;
			if (stat(j->path, &st) || !S_ISREG(st.st_mode) || st.st_size == 0) {
				fprintf(stderr, "ingest-send: %s: %s\n", j->path,
					errno ? strerror(errno) : "not a non-empty regular file");
				goto out;
			}
			j->len = (uint64_t)st.st_size;
		}
		if (j->len > max_len)
			max_len = j->len;
		total_bytes += j->len;
	}

	struct sigaction sa = { .sa_handler = on_signal };
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);

	struct ing_producer_opts o;
	ing_producer_opts_init(&o);
	o.server = c.server;
	o.servers = c.servers;
	o.ack_deadline_ms = c.ack_deadline_ms;
	o.keepalive_ms = c.keepalive_ms;
	o.node_cooldown_ms = c.node_cooldown_ms;
	o.membership_refresh_ms = c.membership_refresh_ms;
	o.transport = c.transport;
	o.rdma_mode = c.rdma_mode;
	o.credits = c.credits;
	o.recycle_on = c.recycle_on;
	o.client_name = "ingest-send";
	o.chunk_size = c.chunk_size;
	o.auth_token = c.auth_token_file ? token : NULL;
	o.tls_ca = c.tls_ca;
	o.tls_cert = c.tls_cert;
	o.tls_key = c.tls_key;
	o.tls_server_name = c.tls_server_name;
	if (c.frame_timeout_ms)
		o.frame_timeout_ms = c.frame_timeout_ms;
	if (c.connect_timeout_ms)
		o.connect_timeout_ms = c.connect_timeout_ms;
	/* frame buffers come from the library's pool (registered memory on RDMA) */
	o.pool_frame_size = (max_len + 4095) & ~4095ull;
	unsigned nbuf = c.buffers ? c.buffers : (c.credits ? c.credits : 64);
	if (c.servers && !c.buffers) {
		/* fleet: a window per node (the frames stay until DURABLE) */
		unsigned nsrv = 1;
		for (const char *q = c.servers; *q; q++)
			nsrv += *q == ',';
		nbuf *= nsrv;
	}
	if (!c.buffers && (uint64_t)nbuf * o.pool_frame_size > BUFFER_BUDGET)
		nbuf = (unsigned)(BUFFER_BUDGET / o.pool_frame_size);
	if (nbuf < 2)
		nbuf = 2;
	if (nbuf > njobs)
		nbuf = (unsigned)njobs;
	o.pool_frames = nbuf;
	if (c.reuse && !(fill = calloc(nbuf, sizeof(*fill)))) {
		fprintf(stderr, "ingest-send: out of memory\n");
		goto out;
	}

	char err[256];
	p = ing_producer_connect(&o, err, sizeof(err));
	explicit_bzero(token, sizeof(token));   /* only Negotiate needs it */
	o.auth_token = NULL;
	if (!p) {
		fprintf(stderr, "ingest-send: %s\n", err);
		goto out;
	}
	if (max_len > ing_producer_max_frame(p)) {
		fprintf(stderr, "ingest-send: a frame of %" PRIu64 " bytes exceeds the negotiated maximum %" PRIu64 "\n",
			max_len, ing_producer_max_frame(p));
		goto out;
	}
	if (!c.quiet)
		fprintf(stderr, "ingest-send: %" PRIu64 " frames (%.1f MiB) to %s, session %" PRIu64
			", transport %s (%s), credits %u, %u buffers\n",
			njobs, (double)total_bytes / 1048576.0, c.servers ? c.servers : c.server,
			ing_producer_session_id(p),
			transport_name(p), ing_producer_transport_note(p), ing_producer_credits(p), nbuf);
	if (c.manifest && !(man = manifest_open(c.manifest)))
		goto out;
	if (c.durable_manifest && !(dman = manifest_open(c.durable_manifest)))
		goto out;
	if (c.placement) {
		if (!(pman = fopen(c.placement, "w"))) {
			fprintf(stderr, "ingest-send: %s: %s\n", c.placement, strerror(errno));
			goto out;
		}
		fprintf(pman, "# ingest-send placement: frame_id wafer node resends\n");
	}
	/* where frames ended up: DURABLE acks per node id (fleet) */
	struct node_count {
		char id[ING_ID_MAX + 1];
		uint64_t durable, resent;
	} nodes_seen[64];
	unsigned n_nodes_seen = 0;
	uint64_t first_rerouted_durable_ms = 0;   /* wall clock of the first re-sent frame's DURABLE */

	static struct ing_hist h_recv, h_dur, h_node_recv, h_node_dur;
	ing_hist_reset(&h_recv);
	ing_hist_reset(&h_dur);
	ing_hist_reset(&h_node_recv);
	ing_hist_reset(&h_node_dur);
	struct ing_ack acks[64];
	uint64_t next = 0, done = 0, n_ok = 0, n_fail = 0, n_dup = 0, ok_bytes = 0, shown = 0;
	void *ready = NULL;   /* a filled buffer whose submit got -EAGAIN */
	bool broken = false, hook_failed = false;
	uint64_t max_lag = 0; /* --rate: how far submits fell behind the schedule */
	struct progress pg = { .tty = isatty(STDERR_FILENO) && !c.quiet, .t0 = ing_now_ns() };
	pg.last_ns = pg.t0;
	uint64_t t0 = pg.t0;

	while (done < njobs && !broken) {
		/* submit as many as buffers and credits allow */
		while (next < njobs && !stop_flag) {
			struct job *j = &jobs[next];
			char id[ING_ID_MAX + 32];
			job_id(&c, j, id, sizeof(id));
			if (c.rate) {
				uint64_t due = t0 + next * 1000000000ull / c.rate;
				if (ing_now_ns() < due)
					break;  /* not yet: poll until it is */
				j->t_start = due;
			}
			void *b = ready;
			if (!b) {
				b = ing_frame_alloc(p, j->len);
				if (!b)
					break;
				if (j->path) {
					rc = read_file(j->path, b, j->len);
					if (rc) {
						fprintf(stderr, "ingest-send: %s: %s\n", j->path, strerror(-rc));
						ing_frame_free(p, b);
						j->state = JOB_FAILED;
						n_fail++;
						done++;
						next++;
						continue;
					}
					j->crc = ing_crc32c(0, b, j->len);
				} else if (c.reuse) {
					j->crc = reuse_fill(fill, &nfill, nbuf, b, j, id, c.synth.seed);
				} else {
					j->crc = synth_fill_crc(b, j->len, synth_key(id), c.synth.seed);
				}
			}
			char wb[ING_ID_MAX + 32];
			struct ing_frame_desc d = {
				.frame_id = id, .wafer_id = job_wafer(&c, j, wb, sizeof(wb)), .data = b,
				.length = j->len,
				.crc32c = j->crc, .has_crc = 1, .user = j,
			};
			rc = ing_producer_submit(p, &d);
			if (rc == -EAGAIN) {
				ready = b;
				break;
			}
			ready = NULL;
			if (rc) {
				fprintf(stderr, "ingest-send: frame %s: submit: %s\n", id,
					strerror(-rc));
				ing_frame_free(p, b);
				j->state = JOB_FAILED;
				n_fail++;
				done++;
				next++;
				if (rc == -EPIPE)
					broken = true;
				if (broken)
					break;
				continue;
			}
			j->buf = b;
			j->state = JOB_SUBMITTED;
			if (!c.rate)
				j->t_start = ing_now_ns();
			else if (ing_now_ns() - j->t_start > max_lag)
				max_lag = ing_now_ns() - j->t_start;
			if (man)
				manifest_line(man, j, &c);
			next++;
		}
		if (stop_flag) {
			fprintf(stderr, "\ningest-send: interrupted\n");
			break;
		}
		int wait_ms = 100;
		if (c.rate && next < njobs) {
			uint64_t due = t0 + next * 1000000000ull / c.rate, now = ing_now_ns();
			wait_ms = due > now ? (int)((due - now) / 1000000) : 0;
			if (wait_ms > 100)
				wait_ms = 100;
		}
		int n = ing_producer_poll(p, acks, 64, wait_ms);
		if (n < 0) {
			fprintf(stderr, "\ningest-send: connection broken: %s\n", strerror(-n));
			broken = true;
			break;
		}
		for (int k = 0; k < n; k++) {
			struct ing_ack *a = &acks[k];
			struct job *j = a->user;
			if (!j || j->state != JOB_SUBMITTED)
				continue;
			bool terminal = !a->ok || a->stage == ING_ACK_DURABLE;
			/* open loop: from the scheduled start, so time spent waiting for a buffer or a
			 * credit counts; closed loop: the library's submit -> ack */
			uint64_t lat = c.rate ? ing_now_ns() - j->t_start : a->latency_ns;
			if (a->ok && a->stage == ING_ACK_RECEIVED) {
				ing_hist_add(&h_recv, lat);
				if (a->node_latency_ns)
					ing_hist_add(&h_node_recv, a->node_latency_ns);
				if (c.recycle_on == ING_ACK_RECEIVED && j->buf) {
					ing_frame_free(p, j->buf);
					j->buf = NULL;
				}
			}
			if (!terminal)
				continue;
			if (j->buf) {
				ing_frame_free(p, j->buf);
				j->buf = NULL;
			}
			done++;
			if (a->ok) {
				ing_hist_add(&h_dur, lat);
				if (a->node_latency_ns)
					ing_hist_add(&h_node_dur, a->node_latency_ns);
				j->state = JOB_DONE_OK;
				j->duplicate = a->duplicate;
				if (dman) {
					manifest_line(dman, j, &c);
					fflush(dman);  /* a reader (or a crash) sees every ACKed frame */
				}
				n_ok++;
				/* the ack counts as recorded once its hook has run (power-loss
				 * harness: a log mark after every recorded DURABLE ack) */
				if (c.durable_hook && !hook_failed && run_durable_hook(&c, j, n_ok)) {
					hook_failed = true;
					broken = true;
				}
				n_dup += a->duplicate ? 1 : 0;
				ok_bytes += j->len;
				if (a->resends && !first_rerouted_durable_ms)
					first_rerouted_durable_ms = ing_wall_ns() / 1000000;
				if (a->node_id[0]) {
					unsigned k2;
					for (k2 = 0; k2 < n_nodes_seen && strcmp(nodes_seen[k2].id, a->node_id); k2++)
						;
					if (k2 == n_nodes_seen && n_nodes_seen < 64)
						snprintf(nodes_seen[n_nodes_seen++].id, sizeof(nodes_seen[0].id), "%s",
							 a->node_id);
					if (k2 < n_nodes_seen) {
						nodes_seen[k2].durable++;
						nodes_seen[k2].resent += a->resends ? 1 : 0;
					}
				}
				if (pman) {
					char e1[3 * ING_ID_MAX + 1], e2[3 * ING_ID_MAX + 1], e3[3 * ING_ID_MAX + 1];
					ing_id_escape(e1, sizeof(e1), a->frame_id);
					ing_id_escape(e2, sizeof(e2), a->wafer_id);
					ing_id_escape(e3, sizeof(e3), a->node_id[0] ? a->node_id : "-");
					fprintf(pman, "%s %s %s %u\n", e1, e2, e3, a->resends);
					fflush(pman);
				}
			} else {
				j->state = JOB_FAILED;
				n_fail++;
				if (shown++ < 10)
					fprintf(stderr, "%singest-send: frame %s failed (code %d%s): %s\n",
						pg.tty ? "\n" : "", a->frame_id, a->code,
						a->retryable ? ", retryable" : "", a->msg);
			}
		}
		if (!c.quiet)
			progress_line(&pg, p, done, njobs, ok_bytes, false);
	}
	uint64_t t1 = ing_now_ns();
	if (!c.quiet)
		progress_line(&pg, p, done, njobs, ok_bytes, true);
	if (ready)
		ing_frame_free(p, ready);
	/* anything not acked (interrupted, connection gone) counts as failed */
	uint64_t lost = njobs - done;
	n_fail += lost;

	struct ing_producer_stats st;
	ing_producer_get_stats(p, &st);
	double wall = (double)(t1 - t0) / 1e9;
	double mbs = wall > 0 ? (double)ok_bytes / 1e6 / wall : 0;
	double mibs = wall > 0 ? (double)ok_bytes / 1048576.0 / wall : 0;
	const char *tname = transport_name(p);
	const char *note = ing_producer_transport_note(p);
	double q[3] = { 0.50, 0.95, 0.99 };

	if (c.json) {
		printf("{\"frames\":%" PRIu64 ",\"ok\":%" PRIu64 ",\"failed\":%" PRIu64
		       ",\"duplicate\":%" PRIu64 ",\"bytes\":%" PRIu64 ",\"wall_s\":%.3f,\"mb_s\":%.1f,"
		       "\"mib_s\":%.1f,\"session_id\":%" PRIu64 ",\"transport\":\"%s\",\"transport_note\":",
		       njobs, n_ok, n_fail, n_dup, ok_bytes, wall, mbs, mibs, ing_producer_session_id(p),
		       tname);
		json_str(stdout, note);
		printf(",\"rate_fps\":%" PRIu64 ",\"max_schedule_lag_ms\":%.3f", c.rate,
		       ms(max_lag));
		if (c.servers) {
			printf(",\"fleet\":{\"nodes_known\":%u,\"nodes_up\":%u,\"rerouted\":%" PRIu64
			       ",\"failovers\":%" PRIu64 ",\"resent_after_received\":%" PRIu64
			       ",\"late_acks\":%" PRIu64 ",\"first_failover_to_durable_ms\":%.3f"
			       ",\"first_rerouted_durable_unix_ms\":%" PRIu64 ",\"durable_by_node\":{",
			       st.nodes, st.nodes_up, st.rerouted, st.failovers, st.resent_after_received,
			       st.late_acks, ms(st.first_failover_to_durable_ns), first_rerouted_durable_ms);
			for (unsigned k = 0; k < n_nodes_seen; k++) {
				printf("%s", k ? "," : "");
				json_str(stdout, nodes_seen[k].id);
				printf(":%" PRIu64, nodes_seen[k].durable);
			}
			printf("},\"nodes\":[");
			struct ing_fleet_node fn;
			for (unsigned k = 0; ing_producer_fleet_node(p, k, &fn) == 0; k++) {
				static const char *const sn[] = { "unknown", "active", "draining", "down" };
				printf("%s{\"id\":", k ? "," : "");
				json_str(stdout, fn.node_id);
				printf(",\"address\":");
				json_str(stdout, fn.address);
				printf(",\"state\":\"%s\",\"connected\":%s,\"durable\":%" PRIu64
				       ",\"rerouted_away\":%" PRIu64 ",\"failovers\":%" PRIu64 "}",
				       sn[fn.state <= ING_MEMBER_DOWN ? fn.state : 0],
				       fn.connected ? "true" : "false", fn.durable, fn.rerouted_away,
				       fn.failovers);
			}
			printf("]}");
		}
		printf(",\"latency_ms\":{");
		/* received/durable: submit -> ack at the producer; node_*: the node's own time
		 * from admission to that stage (Ack.latencyNs), without producer-side queueing */
		const struct ing_hist *hs[4] = { &h_recv, &h_dur, &h_node_recv, &h_node_dur };
		const char *hn[4] = { "received", "durable", "node_received", "node_durable" };
		for (int k = 0; k < 4; k++)
			printf("%s\"%s\":{\"count\":%" PRIu64 ",\"p50\":%.3f,\"p95\":%.3f,\"p99\":%.3f}",
			       k ? "," : "", hn[k], hs[k]->count, ms(ing_hist_quantile(hs[k], q[0])),
			       ms(ing_hist_quantile(hs[k], q[1])), ms(ing_hist_quantile(hs[k], q[2])));
		printf("}}\n");
		fflush(stdout);
	}
	if (!c.quiet) {
		fprintf(stderr,
			"ingest-send: %" PRIu64 " frames: %" PRIu64 " ok (%" PRIu64 " duplicate), %" PRIu64
			" failed; %.1f MiB in %.2f s = %.1f MB/s (%.1f MiB/s)\n"
			"  transport %s: %s\n",
			njobs, n_ok, n_dup, n_fail, (double)ok_bytes / 1048576.0, wall, mbs, mibs, tname,
			note);
		if (c.servers) {
			fprintf(stderr, "  fleet: %u node(s) known, %u up; %" PRIu64 " frame re-send(s) after "
				"%" PRIu64 " failover(s), %" PRIu64 " of them RECEIVED by the failed node "
				"(possibly stored twice, same crc32c); %" PRIu64 " late ack(s) ignored\n",
				st.nodes, st.nodes_up, st.rerouted, st.failovers, st.resent_after_received,
				st.late_acks);
			if (st.first_failover_to_durable_ns)
				fprintf(stderr, "  first failover -> first re-sent frame DURABLE: %.1f ms\n",
					ms(st.first_failover_to_durable_ns));
			struct ing_fleet_node fn;
			for (unsigned k = 0; ing_producer_fleet_node(p, k, &fn) == 0; k++) {
				static const char *const sn[] = { "unknown", "active", "draining", "down" };
				fprintf(stderr, "  node %-24s %-22s %-8s %8" PRIu64 " DURABLE  %6" PRIu64
					" taken away  %" PRIu64 " failover(s)\n", fn.node_id, fn.address,
					sn[fn.state <= ING_MEMBER_DOWN ? fn.state : 0], fn.durable,
					fn.rerouted_away, fn.failovers);
			}
		}
		if (c.rate)
			fprintf(stderr,
				"  open loop at %" PRIu64 " frames/s (achieved %.1f); latency from each "
				"frame's scheduled start; submits fell behind schedule by up to %.2f ms\n",
				c.rate, wall > 0 ? (double)(n_ok + n_fail) / wall : 0.0, ms(max_lag));
		const char *const what[4] = {
			c.rate ? "ack latency RECEIVED (sched -> ack) " : "ack latency RECEIVED (submit -> ack)",
			c.rate ? "ack latency DURABLE  (sched -> ack) " : "ack latency DURABLE  (submit -> ack)",
			"node time   RECEIVED (admit -> ack) ", "node time   DURABLE  (admit -> ack) ",
		};
		const struct ing_hist *hs[4] = { &h_recv, &h_dur, &h_node_recv, &h_node_dur };
		for (int k = 0; k < 4; k++)
			if (hs[k]->count)
				fprintf(stderr, "  %s p50 %.2f ms  p95 %.2f ms  p99 %.2f ms\n", what[k],
					ms(ing_hist_quantile(hs[k], q[0])),
					ms(ing_hist_quantile(hs[k], q[1])),
					ms(ing_hist_quantile(hs[k], q[2])));
	}
	ret = n_fail || n_ok != njobs || hook_failed ? 1 : 0;
out:
	if (man && fclose(man)) {
		fprintf(stderr, "ingest-send: %s: %s\n", c.manifest, strerror(errno));
		ret = ret ? ret : 1;
	}
	if (pman && fclose(pman)) {
		fprintf(stderr, "ingest-send: %s: %s\n", c.placement, strerror(errno));
		ret = ret ? ret : 1;
	}
	if (dman && fclose(dman)) {
		fprintf(stderr, "ingest-send: %s: %s\n", c.durable_manifest, strerror(errno));
		ret = ret ? ret : 1;
	}
	/* close before freeing the buffers' bookkeeping: the pool goes with the producer */
	ing_producer_close(p, 5000);
	free(fill);
	free(jobs);
	return ret;
}
