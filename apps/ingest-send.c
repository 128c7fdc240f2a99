/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ingest-send - send frames to ingestd with libingest: files given as arguments, and/or
 * synthetic frames whose content is a function of (frame id, seed) (producer/synth.h), so
 * ingest-verify can check what was stored without a copy of the data. Frame ids are
 * strings: --id-prefix plus a counter from --first-id ("frame-1", "frame-2", ...).
 *
 * main is the steps, in order: parse the options, plan the frames, connect, open the
 * output files, send (submit while buffers and credits allow, poll the acks), report.
 * SIGINT/SIGTERM: no new frame, the frames in flight finish (acked, counted ok or failed),
 * the ones never submitted are "not sent" (exit 1: not every frame was sent); a second
 * signal stops at once (what is still in flight then counts as failed).
 */
#include <errno.h>
#include <fcntl.h>
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

#include "common/json.h"
#include "common/cli.h"
#include "common/clock.h"
#include "common/hist.h"
#include "common/ident.h"
#include "common/io.h"
#include "common/log.h"
#include "common/parse.h"
#include "common/token.h"
#include "ingest/producer.h"
#include "producer/synth.h"

#define DEFAULT_SERVER "127.0.0.1:50051"
#define DEFAULT_WAFER "ingest-send"
#define DEFAULT_ID_PREFIX "frame-"
#define BUFFER_BUDGET (512ull << 20)   /* frame buffers held at once, at most */
#define HOOK_TIMEOUT_MS 30000          /* --durable-hook: a hook still running is killed */
#define MAX_NODES_SEEN 64
#define SHOW_FAILURES 10               /* failed frames named one by one; then a count */

extern char **environ;

/* ---------------------------------------------------------------- options */

struct send_cfg {
	const char *server;
	const char *rdma_dev;         /* "a,b": the local devices to use; NULL: all */
	int transport;                /* T_AUTO ... (the --transport choice) */
	unsigned credits;
	const char *wafer;
	const char *id_prefix;
	uint64_t first_id;
	uint64_t count;
	uint64_t size;                /* --size */
	const char *sizes;            /* --sizes LIST, wins over --size */
	uint64_t seed;
	int recycle_on;               /* enum ing_ack_stage */
	bool json, quiet;
	const char *manifest;
	const char *durable_manifest; /* lines for frames ACKed DURABLE ok, flushed per ack */
	const char *durable_hook;     /* sh -c command run (and waited for) per DURABLE ok ack */
	unsigned frame_timeout_ms;    /* 0: the library's */
	unsigned connect_timeout_ms;  /* 0: the library's */
	unsigned reconnect_ms;        /* --reconnect-timeout; 0: off; RECONNECT_DEFAULT: the library's */
	uint64_t stripe_min;          /* --stripe-min; 0: never; STRIPE_DEFAULT: the library's */
	uint64_t chunk_size;
	unsigned buffers;
	bool reuse;                   /* benchmark mode: fill each buffer once, resend its bytes */
	unsigned rate;                /* open loop: frames per second (0: as fast as credits allow) */
	const char *auth_token_file;  /* NULL: no token */
	const char *tls_ca, *tls_cert, *tls_key, *tls_server_name;  /* TLS when tls_ca is set */
	/* fleet mode */
	const char *servers;          /* several nodes: routing by wafer, failover */
	uint64_t wafers;              /* > 0: frame n goes to wafer "<wafer>-<n mod wafers>" */
	unsigned ack_deadline_ms, keepalive_ms, node_cooldown_ms, membership_refresh_ms;
	const char *placement;        /* "frame_id wafer node resends" per DURABLE ack */
	/* derived by parse_args */
	struct synth_spec synth;
	enum ing_transport xport;
	enum ing_rdma_mode rdma_mode;
	char token[ING_AUTH_TOKEN_MAX + 1];
};

enum { T_AUTO, T_RDMA, T_RDMA_WRITE, T_GRPC };
#define RECONNECT_DEFAULT UINT32_MAX
#define STRIPE_DEFAULT UINT64_MAX

static void cfg_init(void *p)
{
	struct send_cfg *c = p;
	memset(c, 0, sizeof(*c));
	c->server = DEFAULT_SERVER;
	c->wafer = DEFAULT_WAFER;
	c->id_prefix = DEFAULT_ID_PREFIX;
	c->first_id = 1;
	c->size = 4u << 20;
	c->seed = 1;
	c->recycle_on = ING_ACK_DURABLE;   /* a frame lost with a node restart is re-sent from it */
	c->reconnect_ms = RECONNECT_DEFAULT;
	c->stripe_min = STRIPE_DEFAULT;
}

#define C struct send_cfg
#define MS(name, f, lo, hi, help) ING_OPT_DURATION_(C, name, f, lo, hi, help)
#define MS_ALIAS(name, f, lo, hi, to) ING_OPT_MS_ALIAS_(C, name, f, lo, hi, to)
static const struct ing_opt opts[] = {
	ING_OPT_CUSTOM_(C, "server", server, ing_opt_set_hostport, "HOST:PORT",
			"ingestd's gRPC address (default " DEFAULT_SERVER ")"),
	ING_OPT_CHOICE_(C, "transport", transport, "auto=0|rdma=1|rdma-read=1|rdma-write=2|grpc=3",
			"rdma: RDMA READ pull, rdma-write: RDMA WRITE push\n"
			"(docs/PUSH.md), grpc: the gRPC stream; auto: what the node offers"),
	ING_OPT_STR_(C, "rdma-dev", rdma_dev, "NAME[,NAME]", "the local RDMA devices to use (default: all); each of the\n"
		     "node's rails is reached through the listed device that routes to it"),
	ING_OPT_SIZE_(C, "stripe-min", stripe_min, 0, 1ull << 40, "RDMA READ over a node's rails: a frame of at least SIZE\n"
		      "moves in parts over every rail at once, when the node\n"
		      "takes striped frames of that size too (default 8M; 0: never)"),
	ING_OPT_UINT_(C, "credits", credits, 1, 4096, "frames in flight wanted (default: the node's)"),
	ING_OPT_STR_(C, "wafer", wafer, "ID", "wafer id of every frame (default " DEFAULT_WAFER "; \"\": the\n"
		     "node's default wafer); 1..256 bytes of UTF-8, no control chars"),
	ING_OPT_STR_(C, "id-prefix", id_prefix, "P", "frame ids are P and a counter (default " DEFAULT_ID_PREFIX ")"),
	ING_OPT_U64_(C, "first-id", first_id, 0, UINT64_MAX / 2, "counter of the first frame; files follow the synthetic frames"),
	ING_OPT_U64_(C, "count", count, 0, 100000000, "synthetic frames to send"),
	ING_OPT_SIZE_(C, "size", size, 1, 1ull << 40, "synthetic frame size, e.g. 4M"),
	ING_OPT_STR_(C, "sizes", sizes, "LIST", "synthetic frame sizes: sizes and MIN-MAX ranges, e.g.\n"
		     "1M-16M or 64K,4M,16M-64M; each frame takes one item (a\n"
		     "range: uniformly within it), chosen by its id and --seed"),
	ING_OPT_U64_(C, "seed", seed, 0, UINT64_MAX, "content and size seed"),
	ING_OPT_CHOICE_(C, "recycle-on", recycle_on, "received=1|durable=2",
			"when a frame buffer is reused: durable (the default; kept\n"
			"until stored, so a frame lost with a node restart is re-sent\n"
			"from it), received (sooner; a frame whose connection is lost\n"
			"after RECEIVED then fails, retryable; not in fleet mode)"),
	ING_OPT_PATH_(C, "manifest", manifest, "PATH", "write 'frame_id wafer length crc32c source' per frame"),
	ING_OPT_PATH_(C, "durable-manifest", durable_manifest, "PATH", "the same, only for frames ACKed DURABLE ok, each line\n"
		      "flushed as its ack arrives (what the node promised to keep)"),
	ING_OPT_PATH_(C, "durable-hook", durable_hook, "CMD", "run 'sh -c CMD' after each DURABLE ok ack (after its\n"
		      "--durable-manifest line) and wait for it, with\n"
		      "ING_DURABLE_SEQ (1, 2, ...), ING_FRAME_ID, ING_WAFER_ID in\n"
		      "its environment; a hook that fails or runs 30 s stops the\n"
		      "run (exit 1). E.g. a block-device log mark per ack"),
	MS("frame-timeout", frame_timeout_ms, 1, 3600000, "a frame not DURABLE by then fails (default 60s)"),
	MS("connect-timeout", connect_timeout_ms, 1, 600000, "connecting and Negotiate (default 5s)"),
	MS("reconnect-timeout", reconnect_ms, 0, 86400000, "--server: a lost connection (node restart, upgrade) is\n"
	   "dialled again with back-off for this long, and the frames\n"
	   "not DURABLE are re-sent (default 30s; 0: off, they fail)"),
	ING_OPT_PATH_(C, "auth-token-file", auth_token_file, "PATH", "shared secret of an ingestd run with --auth-token-file (one\n"
		      "line, 16..256 printable characters, mode 600; never printed)"),
	ING_OPT_PATH_(C, "tls-ca", tls_ca, "PEM", "TLS: verify the node's certificate against this CA and its\n"
		      "name against --server's host (ALPN h2)"),
	ING_OPT_PATH_(C, "tls-cert", tls_cert, "PEM", "client certificate for a node with --tls-client-ca"),
	ING_OPT_PATH_(C, "tls-key", tls_key, "PEM", "its private key"),
	ING_OPT_STR_(C, "tls-server-name", tls_server_name, "NAME", "name to verify instead of --server's host"),
	{ "servers", "LIST", ING_OPT_CUSTOM, offsetof(C, servers), 0, 0, 0, NULL, ing_opt_set_hostport,
	  "fleet mode: several ingestd, \"host:port,host:port,...\";\n"
	  "membership from the nodes, each wafer to its HRW owner,\n"
	  "frames kept until DURABLE and re-sent to the next node\n"
	  "when one fails (docs/FLEET.md); the summary says where\n"
	  "frames went and how many were re-sent", NULL, ING_OPTF_LIST },
	ING_OPT_U64_(C, "wafers", wafers, 1, 10000000, "spread frames over N wafers: frame n goes to wafer\n"
		     "<wafer>-<n mod N> (default: all in --wafer)"),
	MS("ack-deadline", ack_deadline_ms, 1, 3600000, "fleet: a node holding a frame this long without its\n"
	   "DURABLE ack is failed over (default 10s)"),
	MS("keepalive", keepalive_ms, 1, 3600000, "HTTP/2 PING period; unanswered for twice that: connection\n"
	   "dead (default 1s with --servers, off with --server)"),
	MS("node-cooldown", node_cooldown_ms, 1, 3600000, "fleet: a failed node is left alone this long (default 5s)"),
	MS("membership-refresh", membership_refresh_ms, 1, 3600000, "fleet: ask the nodes for Members this often (default 2s)"),
	ING_OPT_PATH_(C, "placement", placement, "PATH", "fleet: 'frame_id wafer node resends' per DURABLE frame,\n"
		      "flushed per ack (where each frame ended up)"),
	ING_OPT_SIZE_(C, "chunk-size", chunk_size, 1, 64u << 20, "gRPC stream chunk size (default: the node's)"),
	ING_OPT_UINT_(C, "buffers", buffers, 1, 4096, "frame buffers (default: credits, within 512 MiB)"),
	ING_OPT_UINT_(C, "rate", rate, 1, 1000000, "open loop, frames per second: start frame i at i/FPS s,\n"
		      "whatever the acks do, and measure latency from that time\n"
		      "(no coordinated omission); default: closed loop, as fast\n"
		      "as credits allow"),
	ING_OPT_BOOL_(C, "reuse-buffers", reuse, "benchmark mode: generate each buffer's bytes once and\n"
		      "resend them (crc32c exact) under new frame ids; stored\n"
		      "frames are then not the synthetic frames of their ids"),
	ING_OPT_BOOL_(C, "json", json, "final summary also as one JSON object on stdout"),
	ING_OPT_BOOL_(C, "quiet", quiet, "no progress line, no text summary"),
	ING_OPT_LOG_LEVEL_ENTRY(C, "warn"),
	MS_ALIAS("frame-timeout-ms", frame_timeout_ms, 1, 3600000, "frame-timeout"),
	MS_ALIAS("connect-timeout-ms", connect_timeout_ms, 1, 600000, "connect-timeout"),
	MS_ALIAS("ack-deadline-ms", ack_deadline_ms, 1, 3600000, "ack-deadline"),
	MS_ALIAS("keepalive-ms", keepalive_ms, 1, 3600000, "keepalive"),
	MS_ALIAS("node-cooldown-ms", node_cooldown_ms, 1, 3600000, "node-cooldown"),
	MS_ALIAS("membership-refresh-ms", membership_refresh_ms, 1, 3600000, "membership-refresh"),
};

static const struct ing_cli cli = {
	.prog = "ingest-send",
	.synopsis = "[options] [FILE...]",
	.summary = "send frames to an h3000 ingest node, files or synthetic ones",
	.about = "Sends each FILE, and --count synthetic frames (content from the frame id and\n"
		 "--seed, so ingest-verify checks them without a copy), over RDMA or the gRPC\n"
		 "stream; a progress line, then a summary with throughput and ack latency.\n",
	.opts = opts,
	.nopts = sizeof(opts) / sizeof(opts[0]),
	.max_args = UINT32_MAX,
	.init = cfg_init,
	.cfg_size = sizeof(struct send_cfg),
	.notes = "Examples:\n"
		 "  ingest-send --count 300 --sizes 1M-16M --seed 7 --server 127.0.0.1:50051\n"
		 "  ingest-send --wafer W42 a.tif b.tif\n"
		 "  ingest-send --servers 10.0.0.1:50051,10.0.0.2:50051 --wafer LOT7 --wafers 40 --count 400\n"
		 "\n"
		 "A node restart or upgrade during a run (--server) costs time, not frames: the\n"
		 "connection is dialled again for --reconnect-timeout and every frame not DURABLE\n"
		 "is sent again (one the node had stored comes back as duplicate); the summary\n"
		 "counts the reconnects and re-sends.\n",
	.exit_status = "  0  every frame reached DURABLE ok (a duplicate with the same bytes is ok)\n"
		       "  1  a frame failed, the node could not be reached, or a file could not be\n"
		       "     read or written\n"
		       "  2  usage error (a bad flag or value, nothing to send)\n",
};

/* The options into cfg, and the checks between them: 0, 1 (--help/--version), 2. */
static int parse_args(int argc, char **argv, struct send_cfg *c, int *argi)
{
	const char *why;
	char twhy[4096 + 96];
	int rc = ing_cli_parse(&cli, argc, argv, c, argi);
	if (rc)
		return rc;
	if (c->sizes) {
		if (synth_spec_sizes(&c->synth, c->sizes, twhy, sizeof(twhy)))
			return ing_cli_usage_error(&cli, "--sizes: %s", twhy);
	} else {
		synth_spec_fixed(&c->synth, c->seed, c->size);
	}
	c->synth.seed = c->seed;
	c->xport = c->transport == T_AUTO ? ING_TRANSPORT_AUTO
		 : c->transport == T_GRPC ? ING_TRANSPORT_GRPC : ING_TRANSPORT_RDMA;
	c->rdma_mode = c->transport == T_RDMA_WRITE ? ING_RDMA_MODE_WRITE : ING_RDMA_MODE_DEFAULT;
	if (c->wafer[0] && (why = ing_id_check(c->wafer, strlen(c->wafer))))
		return ing_cli_usage_error(&cli, "--wafer: it %s; a wafer id is empty (the node's "
					   "default wafer) or " ING_ID_RULE, why);
	/* the longest id this run makes must follow the rule too */
	char id[ING_ID_MAX + 32];
	uint64_t last = c->first_id + c->count + (uint64_t)(argc - *argi);
	snprintf(id, sizeof(id), "%s%" PRIu64, c->id_prefix, last > c->first_id ? last - 1 : last);
	if ((why = ing_id_check(id, strlen(id))))
		return ing_cli_usage_error(&cli, "--id-prefix: the frame ids it makes (e.g. '%s') must be "
					   ING_ID_RULE "; this one %s", id, why);
	if (c->wafers && !c->wafer[0])
		return ing_cli_usage_error(&cli, "--wafers needs a non-empty --wafer (the wafer ids' prefix)");
	if (c->reuse && c->manifest)
		return ing_cli_usage_error(&cli, "--reuse-buffers sends bytes that are not the synthetic "
					   "frames: no --manifest with it");
	if (!!c->tls_cert != !!c->tls_key)
		return ing_cli_usage_error(&cli, "--tls-cert and --tls-key go together");
	if ((c->tls_cert || c->tls_server_name) && !c->tls_ca)
		return ing_cli_usage_error(&cli, "--tls-cert, --tls-key and --tls-server-name need "
					   "--tls-ca (the CA that signed the node's certificate)");
	if (c->auth_token_file &&
	    ing_token_file_read(c->auth_token_file, c->token, sizeof(c->token), twhy, sizeof(twhy)))
		return ing_cli_usage_error(&cli, "--auth-token-file: '%s': %s", c->auth_token_file, twhy);
	if (!c->count && *argi == argc)
		return ing_cli_usage_error(&cli, "nothing to send: give --count N (synthetic frames) or "
					   "files");
	if (c->servers)
		c->recycle_on = ING_ACK_DURABLE;   /* fleet: a re-send reads the bytes again */
	return 0;
}

/* ---------------------------------------------------------------- the run */

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

/* --reuse-buffers: what a pool buffer already holds */
struct filled {
	void *buf;
	uint64_t len;
	uint32_t crc;
};

struct node_count {
	char id[ING_ID_MAX + 1];
	uint64_t durable, resent;
};

struct progress {
	bool tty;
	uint64_t last_ns;
	uint64_t t0;
};

struct send_run {
	struct job *jobs;
	uint64_t njobs, max_len, total_bytes;
	const struct job *largest;    /* the job of max_len (its file is named if too large) */
	struct ing_producer *p;
	unsigned nbuf;
	struct filled *fill;          /* --reuse-buffers */
	unsigned nfill;
	FILE *man, *dman, *pman;
	/* progress of the send */
	uint64_t next, done, n_ok, n_fail, n_dup, ok_bytes, shown, max_lag, t0, t1;
	uint64_t n_unsent;            /* interrupted: frames never submitted */
	void *ready;                  /* a filled buffer whose submit got -EAGAIN */
	bool broken, hook_failed, draining;
	struct progress pg;
	struct ing_hist h_recv, h_dur, h_node_recv, h_node_dur;
	struct node_count nodes_seen[MAX_NODES_SEEN];
	unsigned n_nodes_seen;
	uint64_t first_rerouted_durable_ms;   /* wall clock of the first re-sent frame's DURABLE */
};

static volatile sig_atomic_t stop_flag;

static void on_signal(int sig)
{
	(void)sig;
	stop_flag = stop_flag < 2 ? stop_flag + 1 : 2;   /* 1: drain, 2: stop now */
}

static double ms(uint64_t ns)
{
	return (double)ns / 1e6;
}

/* "rdma" (READ pull), "rdma-write" (push) or "grpc" */
static const char *transport_name(const struct ing_producer *p)
{
	if (ing_producer_transport(p) != ING_TRANSPORT_RDMA)
		return "grpc";
	/* one node: the note starts with the negotiated transport; a fleet: RDMA_WRITE to N > 0 */
	const char *note = ing_producer_transport_note(p);
	bool fleet_push = strstr(note, "RDMA_WRITE to ") && !strstr(note, "RDMA_WRITE to 0,");
	return !strncmp(note, "RDMA_WRITE", 10) || fleet_push ? "rdma-write" : "rdma";
}

/* The frame id of job j: id_prefix + counter. */
static const char *job_id(const struct send_cfg *c, const struct job *j, char *buf, size_t cap)
{
	snprintf(buf, cap, "%s%" PRIu64, c->id_prefix, j->n);
	return buf;
}

/* The wafer of job j: --wafer, or with --wafers N "<wafer>-<n mod N>". */
static const char *job_wafer(const struct send_cfg *c, const struct job *j, char *buf, size_t cap)
{
	if (!c->wafers)
		return c->wafer;
	snprintf(buf, cap, "%s-%" PRIu64, c->wafer, j->n % c->wafers);
	return buf;
}

/* Step 1: the frames to send: --count synthetic ones, then the files. 0 or the exit status. */
static int plan_jobs(const struct send_cfg *c, char **files, uint64_t nfiles, struct send_run *r)
{
	r->njobs = c->count + nfiles;
	r->jobs = calloc(r->njobs, sizeof(*r->jobs));
	if (!r->jobs) {
		fprintf(stderr, "ingest-send: out of memory for %" PRIu64 " frames\n", r->njobs);
		return ING_EXIT_FAILURE;
	}
	for (uint64_t i = 0; i < r->njobs; i++) {
		struct job *j = &r->jobs[i];
		char id[ING_ID_MAX + 32];
		j->n = c->first_id + i;
		if (i < c->count) {
			j->len = synth_frame_len(&c->synth, synth_key(job_id(c, j, id, sizeof(id))));
		} else {
			struct stat st;
			j->path = files[i - c->count];
			if (stat(j->path, &st)) {
				fprintf(stderr, "ingest-send: %s: %s\n", j->path, strerror(errno));
				return ING_EXIT_FAILURE;
			}
			if (!S_ISREG(st.st_mode) || st.st_size == 0) {
				fprintf(stderr, "ingest-send: %s: %s: a frame is a non-empty regular file\n",
					j->path, S_ISREG(st.st_mode) ? "empty" : "not a regular file");
				return ING_EXIT_FAILURE;
			}
			j->len = (uint64_t)st.st_size;
		}
		if (j->len > r->max_len) {
			r->max_len = j->len;
			r->largest = j;
		}
		r->total_bytes += j->len;
	}
	return 0;
}

/* Step 2: connect (and Negotiate), with a frame pool that holds the largest frame. */
static int connect_node(struct send_cfg *c, struct send_run *r)
{
	struct ing_producer_opts o;
	char err[512];

	ing_producer_opts_init(&o);
	o.server = c->server;
	o.servers = c->servers;
	o.ack_deadline_ms = (int)c->ack_deadline_ms;
	o.keepalive_ms = (int)c->keepalive_ms;
	o.node_cooldown_ms = (int)c->node_cooldown_ms;
	o.membership_refresh_ms = (int)c->membership_refresh_ms;
	o.transport = c->xport;
	o.rdma_mode = c->rdma_mode;
	o.rdma_device = c->rdma_dev;
	o.credits = c->credits;
	o.recycle_on = (enum ing_ack_stage)c->recycle_on;
	o.client_name = "ingest-send";
	o.chunk_size = (uint32_t)c->chunk_size;
	o.auth_token = c->auth_token_file ? c->token : NULL;
	o.tls_ca = c->tls_ca;
	o.tls_cert = c->tls_cert;
	o.tls_key = c->tls_key;
	o.tls_server_name = c->tls_server_name;
	if (c->frame_timeout_ms)
		o.frame_timeout_ms = (int)c->frame_timeout_ms;
	if (c->connect_timeout_ms)
		o.connect_timeout_ms = (int)c->connect_timeout_ms;
	if (c->stripe_min != STRIPE_DEFAULT)
		o.stripe_min = c->stripe_min ? c->stripe_min : ING_STRIPE_OFF;
	if (c->reconnect_ms != RECONNECT_DEFAULT)
		o.reconnect_timeout_ms = c->reconnect_ms ? (int)c->reconnect_ms : -1;
	/* frame buffers come from the library's pool (registered memory on RDMA) */
	o.pool_frame_size = (r->max_len + 4095) & ~4095ull;
	unsigned nbuf = c->buffers ? c->buffers : (c->credits ? c->credits : 64);
	if (c->servers && !c->buffers) {
		/* fleet: a window per node (the frames stay until DURABLE) */
		unsigned nsrv = 1;
		for (const char *q = c->servers; *q; q++)
			nsrv += *q == ',';
		nbuf *= nsrv;
	}
	if (!c->buffers && (uint64_t)nbuf * o.pool_frame_size > BUFFER_BUDGET)
		nbuf = (unsigned)(BUFFER_BUDGET / o.pool_frame_size);
	if (nbuf < 2)
		nbuf = 2;
	if (nbuf > r->njobs)
		nbuf = (unsigned)r->njobs;
	o.pool_frames = nbuf;
	r->nbuf = nbuf;
	if (c->reuse && !(r->fill = calloc(nbuf, sizeof(*r->fill)))) {
		fprintf(stderr, "ingest-send: out of memory\n");
		return ING_EXIT_FAILURE;
	}

	r->p = ing_producer_connect(&o, err, sizeof(err));
	explicit_bzero(c->token, sizeof(c->token));   /* only Negotiate needs it */
	o.auth_token = NULL;
	if (!r->p) {
		bool dflt = !c->servers && !strcmp(c->server, DEFAULT_SERVER);
		fprintf(stderr, "ingest-send: %s%s\n", err,
			dflt && strstr(err, "is ingestd running") ? "; that is the default --server: "
			"give the node's address with --server HOST:PORT"
			: strstr(err, "transport rdma requested") ? "; --transport auto falls back to the "
			"gRPC stream" : "");
		return ING_EXIT_FAILURE;
	}
	uint64_t max = ing_producer_max_frame(r->p);
	if (r->max_len > max) {
		char id[ING_ID_MAX + 32];
		fprintf(stderr, "ingest-send: %s%s has %" PRIu64 " bytes, more than the node's largest "
			"frame, %" PRIu64 " bytes (ingestd --max-frame, or its largest --pool slot): "
			"nothing sent\n", r->largest->path ? r->largest->path : "synthetic frame ",
			r->largest->path ? "" : job_id(c, r->largest, id, sizeof(id)), r->max_len, max);
		return ING_EXIT_FAILURE;
	}
	if (!c->quiet)
		fprintf(stderr, "ingest-send: %" PRIu64 " frames (%.1f MiB) to %s, session %" PRIu64
			", transport %s (%s), credits %u, %u buffers\n",
			r->njobs, (double)r->total_bytes / 1048576.0, c->servers ? c->servers : c->server,
			ing_producer_session_id(r->p), transport_name(r->p),
			ing_producer_transport_note(r->p), ing_producer_credits(r->p), nbuf);
	return 0;
}

/*
 * ingest-verify's manifest format (v2): "frame_id wafer length crc32c source", ids
 * escaped by ing_id_escape (bytes <= 0x20, '%' and >= 0x7f as %XX), the wafer as the node
 * files it ("default" for an empty --wafer), source "synth:SEED" or "file:PATH".
 */
static FILE *manifest_open(const char *path, const char *header)
{
	FILE *f = fopen(path, "w");
	if (!f) {
		fprintf(stderr, "ingest-send: %s: %s\n", path, strerror(errno));
		return NULL;
	}
	fprintf(f, "%s\n", header);
	return f;
}

/* Step 3: --manifest, --durable-manifest, --placement. 0 or the exit status. */
static int open_outputs(const struct send_cfg *c, struct send_run *r)
{
	static const char mh[] = "# ingest-send manifest v2: frame_id wafer length crc32c source";
	if ((c->manifest && !(r->man = manifest_open(c->manifest, mh))) ||
	    (c->durable_manifest && !(r->dman = manifest_open(c->durable_manifest, mh))) ||
	    (c->placement && !(r->pman = manifest_open(c->placement,
						      "# ingest-send placement: frame_id wafer node resends"))))
		return ING_EXIT_FAILURE;
	return 0;
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

static void progress_line(struct send_run *r, bool final)
{
	struct progress *pg = &r->pg;
	uint64_t now = ing_now_ns();
	uint64_t period = pg->tty ? 250000000ull : 2000000000ull;
	if (!final && now - pg->last_ns < period)
		return;
	if (final && !pg->tty)
		return;
	pg->last_ns = now;
	double s = (double)(now - pg->t0) / 1e9;
	double mbs = s > 0 ? (double)r->ok_bytes / 1e6 / s : 0;
	fprintf(stderr, "%sframes %" PRIu64 "/%" PRIu64 "  %.1f MB/s  in flight %u%s",
		pg->tty ? "\r" : "", r->done, r->njobs, mbs, ing_producer_in_flight(r->p),
		pg->tty ? (final ? "    \n" : "    ") : "\n");
}

/* --reuse-buffers: generate a buffer's bytes only the first time (or for another length). */
static uint32_t reuse_fill(struct send_run *r, void *b, const struct job *j, const char *id,
			   uint64_t seed)
{
	unsigned k;
	for (k = 0; k < r->nfill && r->fill[k].buf != b; k++)
		;
	if (k < r->nfill && r->fill[k].len == j->len)
		return r->fill[k].crc;
	if (k == r->nfill && r->nfill < r->nbuf)
		r->nfill++;
	uint32_t crc = synth_fill_crc(b, j->len, synth_key(id), seed);
	if (k < r->nfill)
		r->fill[k] = (struct filled){ .buf = b, .len = j->len, .crc = crc };
	return crc;
}

/* A frame failed before the node saw it (unreadable file, refused submit). */
static void job_failed_early(struct send_run *r, struct job *j, void *b)
{
	ing_frame_free(r->p, b);
	j->state = JOB_FAILED;
	r->n_fail++;
	r->done++;
	r->next++;
}

/*
 * *out: a buffer with job j's bytes (the file, the synthetic content, or with --reuse the
 * old bytes). 0; -ENOBUFS when no buffer is free (an ack frees one); -EIO when the file
 * could not be read (said, and the job failed).
 */
static int fill_buffer(const struct send_cfg *c, struct send_run *r, struct job *j,
		       const char *id, void **out)
{
	void *b = ing_frame_alloc(r->p, j->len);
	if (!b)
		return -ENOBUFS;
	if (j->path) {
		int fd = open(j->path, O_RDONLY | O_CLOEXEC);
		int rc = fd < 0 ? -errno : ing_read_full(fd, b, j->len);
		if (fd >= 0)
			close(fd);
		if (rc) {
			fprintf(stderr, "ingest-send: %s: %s\n", j->path, strerror(-rc));
			job_failed_early(r, j, b);
			return -EIO;
		}
		j->crc = ing_crc32c(0, b, j->len);
	} else if (c->reuse) {
		j->crc = reuse_fill(r, b, j, id, c->synth.seed);
	} else {
		j->crc = synth_fill_crc(b, j->len, synth_key(id), c->synth.seed);
	}
	*out = b;
	return 0;
}

/* Submit as many frames as buffers, credits and (--rate) the schedule allow. */
static void submit_ready(const struct send_cfg *c, struct send_run *r)
{
	while (r->next < r->njobs && !stop_flag) {
		struct job *j = &r->jobs[r->next];
		char id[ING_ID_MAX + 32], wb[ING_ID_MAX + 32];
		job_id(c, j, id, sizeof(id));
		if (c->rate) {
			uint64_t due = r->t0 + r->next * 1000000000ull / c->rate;
			if (ing_now_ns() < due)
				break;  /* not yet: poll until it is */
			j->t_start = due;
		}
		void *b = r->ready;
		if (!b) {
			int f = fill_buffer(c, r, j, id, &b);
			if (f == -ENOBUFS)
				break;   /* an ack frees one */
			if (f)
				continue;
		}
		struct ing_frame_desc d = {
			.frame_id = id, .wafer_id = job_wafer(c, j, wb, sizeof(wb)), .data = b,
			.length = j->len, .crc32c = j->crc, .has_crc = 1, .user = j,
		};
		int rc = ing_producer_submit(r->p, &d);
		if (rc == -EAGAIN) {
			r->ready = b;
			break;
		}
		r->ready = NULL;
		if (rc) {
			fprintf(stderr, "ingest-send: frame %s: submit: %s\n", id, strerror(-rc));
			job_failed_early(r, j, b);
			if (rc == -EPIPE) {
				r->broken = true;
				break;
			}
			continue;
		}
		j->buf = b;
		j->state = JOB_SUBMITTED;
		if (!c->rate)
			j->t_start = ing_now_ns();
		else if (ing_now_ns() - j->t_start > r->max_lag)
			r->max_lag = ing_now_ns() - j->t_start;
		if (r->man)
			manifest_line(r->man, j, c);
		r->next++;
	}
}

/* What to do about a failed frame, after the node's own message. */
static const char *failure_fix(const struct ing_ack *a)
{
	switch (a->code) {
	case ING_ERR_DUPLICATE_CONFLICT:
		return "a (wafer, frame id) is stored once: send other bytes under another id "
		       "(--id-prefix, --first-id) or --wafer";
	case ING_ERR_TOO_LARGE:
		return "the node's --max-frame or its largest --pool slot is smaller";
	case ING_ERR_NO_SPACE:   /* retryable: a full disk, or the tier's --local-high-water mark */
		return "retryable: send it again once the node has room (free space in its data dir, "
		       "or its object store tier takes the backlog)";
	default:
		return a->retryable ? "retryable: send it again" : NULL;
	}
}

/* fleet: DURABLE acks per node, and the --placement line */
static void count_placement(struct send_run *r, const struct ing_ack *a)
{
	if (a->resends && !r->first_rerouted_durable_ms)
		r->first_rerouted_durable_ms = ing_wall_ns() / 1000000;
	if (a->node_id[0]) {
		unsigned k;
		for (k = 0; k < r->n_nodes_seen && strcmp(r->nodes_seen[k].id, a->node_id); k++)
			;
		if (k == r->n_nodes_seen && r->n_nodes_seen < MAX_NODES_SEEN)
			snprintf(r->nodes_seen[r->n_nodes_seen++].id, sizeof(r->nodes_seen[0].id), "%s",
				 a->node_id);
		if (k < r->n_nodes_seen) {
			r->nodes_seen[k].durable++;
			r->nodes_seen[k].resent += a->resends ? 1 : 0;
		}
	}
	if (r->pman) {
		char e1[3 * ING_ID_MAX + 1], e2[3 * ING_ID_MAX + 1], e3[3 * ING_ID_MAX + 1];
		ing_id_escape(e1, sizeof(e1), a->frame_id);
		ing_id_escape(e2, sizeof(e2), a->wafer_id);
		ing_id_escape(e3, sizeof(e3), a->node_id[0] ? a->node_id : "-");
		fprintf(r->pman, "%s %s %s %u\n", e1, e2, e3, a->resends);
		fflush(r->pman);
	}
}

/* One ack: latencies, buffer recycling, and for a final one the frame's outcome. */
static void on_ack(const struct send_cfg *c, struct send_run *r, const struct ing_ack *a)
{
	struct job *j = a->user;
	if (!j || j->state != JOB_SUBMITTED)
		return;
	bool terminal = !a->ok || a->stage == ING_ACK_DURABLE;
	/* open loop: from the scheduled start, so time spent waiting for a buffer or a
	 * credit counts; closed loop: the library's submit -> ack */
	uint64_t lat = c->rate ? ing_now_ns() - j->t_start : a->latency_ns;
	if (a->ok && a->stage == ING_ACK_RECEIVED) {
		ing_hist_add(&r->h_recv, lat);
		if (a->node_latency_ns)
			ing_hist_add(&r->h_node_recv, a->node_latency_ns);
		if (c->recycle_on == ING_ACK_RECEIVED && j->buf) {
			ing_frame_free(r->p, j->buf);
			j->buf = NULL;
		}
	}
	if (!terminal)
		return;
	if (j->buf) {
		ing_frame_free(r->p, j->buf);
		j->buf = NULL;
	}
	r->done++;
	if (!a->ok) {
		j->state = JOB_FAILED;
		r->n_fail++;
		if (r->shown++ < SHOW_FAILURES) {
			const char *fix = failure_fix(a);
			char what[128];
			if (a->code == ING_ERR_DUPLICATE_CONFLICT)
				snprintf(what, sizeof(what), "is already stored with another CRC-32C");
			else
				snprintf(what, sizeof(what), "failed: %s", ing_strerror(a->code));
			fprintf(stderr, "%singest-send: frame %s of wafer %s%s%s %s (the node: %s)%s%s\n",
				r->pg.tty ? "\n" : "", a->frame_id, a->wafer_id[0] ? a->wafer_id : "?",
				j->path ? ", file " : "", j->path ? j->path : "", what, a->msg,
				fix ? ": " : "", fix ? fix : "");
		}
		return;
	}
	ing_hist_add(&r->h_dur, lat);
	if (a->node_latency_ns)
		ing_hist_add(&r->h_node_dur, a->node_latency_ns);
	j->state = JOB_DONE_OK;
	j->duplicate = a->duplicate;
	if (r->dman) {
		manifest_line(r->dman, j, c);
		fflush(r->dman);  /* a reader (or a crash) sees every ACKed frame */
	}
	r->n_ok++;
	/* the ack counts as recorded once its hook has run (power-loss harness: a log mark
	 * after every recorded DURABLE ack) */
	if (c->durable_hook && !r->hook_failed && run_durable_hook(c, j, r->n_ok)) {
		r->hook_failed = true;
		r->broken = true;
	}
	r->n_dup += a->duplicate ? 1 : 0;
	r->ok_bytes += j->len;
	count_placement(r, a);
}

/* Step 4: submit and poll until every frame has its final ack (or the run breaks). */
static void send_frames(const struct send_cfg *c, struct send_run *r)
{
	struct ing_ack acks[64];
	struct sigaction sa = { .sa_handler = on_signal };

	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	ing_hist_reset(&r->h_recv);
	ing_hist_reset(&r->h_dur);
	ing_hist_reset(&r->h_node_recv);
	ing_hist_reset(&r->h_node_dur);
	r->pg = (struct progress){ .tty = isatty(STDERR_FILENO) && !c->quiet, .t0 = ing_now_ns() };
	r->pg.last_ns = r->pg.t0;
	r->t0 = r->pg.t0;

	while (r->done < (r->draining ? r->next : r->njobs) && !r->broken) {
		submit_ready(c, r);
		if (r->broken)
			break;
		if (stop_flag > 1) {
			fprintf(stderr, "\ningest-send: interrupted again: stopping now\n");
			break;
		}
		if (stop_flag && !r->draining) {
			r->draining = true;
			fprintf(stderr, "\ningest-send: interrupted: no new frame; waiting for the %" PRIu64
				" in flight (a second signal stops at once)\n", r->next - r->done);
			continue;
		}
		int wait_ms = 100;
		if (c->rate && r->next < r->njobs) {
			uint64_t due = r->t0 + r->next * 1000000000ull / c->rate, now = ing_now_ns();
			wait_ms = due > now ? (int)((due - now) / 1000000) : 0;
			if (wait_ms > 100)
				wait_ms = 100;
		}
		int n = ing_producer_poll(r->p, acks, 64, wait_ms);
		if (n < 0) {
			fprintf(stderr, "\ningest-send: connection to the node broken: %s (%" PRIu64
				" of %" PRIu64 " frames acked; the others count as failed)\n",
				strerror(-n), r->done, r->njobs);
			r->broken = true;
			break;
		}
		for (int k = 0; k < n; k++)
			on_ack(c, r, &acks[k]);
		if (!c->quiet)
			progress_line(r, false);
	}
	r->t1 = ing_now_ns();
	if (!c->quiet)
		progress_line(r, true);
	if (r->ready)
		ing_frame_free(r->p, r->ready);
	r->ready = NULL;
	if (r->shown > SHOW_FAILURES)
		fprintf(stderr, "ingest-send: (%" PRIu64 " more failed frames not shown)\n",
			r->shown - SHOW_FAILURES);
	/* anything submitted and not acked (stopped at once, connection gone) counts as failed;
	 * interrupted, the frames never submitted are not sent (a broken connection: failed) */
	if (stop_flag && !r->broken) {
		r->n_unsent = r->njobs - r->next;
		r->n_fail += r->next - r->done;
	} else {
		r->n_fail += r->njobs - r->done;
	}
}

/* ---------------------------------------------------------------- the summary */

static const char *member_state(enum ing_member_state s)
{
	static const char *const sn[] = { "unknown", "active", "draining", "down" };
	return sn[s <= ING_MEMBER_DOWN ? s : 0];
}

static const char *rail_state(enum ing_rail_state s)
{
	return s == ING_RAIL_UP ? "up" : s == ING_RAIL_DOWN ? "down" : "unused";
}

/* "rails":[{...},...]: every RDMA rail the producer used (ing_producer_rail) */
static void rails_json(const struct send_run *r)
{
	struct ing_rail rl;
	printf(",\"rails\":[");
	for (unsigned k = 0; ing_producer_rail(r->p, k, &rl) == 0; k++) {
		printf("%s{\"node\":", k ? "," : "");
		ing_json_str(stdout, rl.node_id);
		printf(",\"device\":");
		ing_json_str(stdout, rl.device);
		printf(",\"local_device\":");
		ing_json_str(stdout, rl.local_device);
		printf(",\"state\":\"%s\",\"frames\":%" PRIu64 ",\"bytes\":%" PRIu64
		       ",\"moved_away\":%" PRIu64 ",\"downs\":%" PRIu64 ",\"why\":", rail_state(rl.state),
		       rl.frames, rl.bytes, rl.moved_away, rl.downs);
		ing_json_str(stdout, rl.why);
		printf("}");
	}
	printf("]");
}

static void rails_text(const struct send_run *r)
{
	struct ing_rail rl;
	for (unsigned k = 0; ing_producer_rail(r->p, k, &rl) == 0; k++)
		fprintf(stderr, "  rail %-10s of %-16s via %-10s %-6s %8" PRIu64 " DURABLE %10.1f MiB"
			"  %" PRIu64 " moved away, down %" PRIu64 " time(s)%s%s\n",
			rl.device[0] ? rl.device : "-", rl.node_id, rl.local_device[0] ? rl.local_device : "-",
			rail_state(rl.state), rl.frames, (double)rl.bytes / 1048576.0, rl.moved_away,
			rl.downs, rl.why[0] ? ": " : "", rl.why);
}

static void summary_json(const struct send_cfg *c, const struct send_run *r,
			 const struct ing_producer_stats *st, double wall)
{
	static const double q[3] = { 0.50, 0.95, 0.99 };
	double mbs = wall > 0 ? (double)r->ok_bytes / 1e6 / wall : 0;
	double mibs = wall > 0 ? (double)r->ok_bytes / 1048576.0 / wall : 0;

	printf("{\"frames\":%" PRIu64 ",\"ok\":%" PRIu64 ",\"failed\":%" PRIu64
	       ",\"not_sent\":%" PRIu64 ",\"duplicate\":%" PRIu64 ",\"bytes\":%" PRIu64
	       ",\"wall_s\":%.3f,\"mb_s\":%.1f,"
	       "\"mib_s\":%.1f,\"session_id\":%" PRIu64 ",\"transport\":\"%s\",\"transport_note\":",
	       r->njobs, r->n_ok, r->n_fail, r->n_unsent, r->n_dup, r->ok_bytes, wall, mbs, mibs,
	       ing_producer_session_id(r->p), transport_name(r->p));
	ing_json_str(stdout, ing_producer_transport_note(r->p));
	printf(",\"rate_fps\":%u,\"max_schedule_lag_ms\":%.3f", c->rate, ms(r->max_lag));
	rails_json(r);
	if (c->servers) {
		printf(",\"fleet\":{\"nodes_known\":%u,\"nodes_up\":%u,\"rerouted\":%" PRIu64
		       ",\"failovers\":%" PRIu64 ",\"resent_after_received\":%" PRIu64
		       ",\"late_acks\":%" PRIu64 ",\"first_failover_to_durable_ms\":%.3f"
		       ",\"first_rerouted_durable_unix_ms\":%" PRIu64 ",\"durable_by_node\":{",
		       st->nodes, st->nodes_up, st->rerouted, st->failovers, st->resent_after_received,
		       st->late_acks, ms(st->first_failover_to_durable_ns), r->first_rerouted_durable_ms);
		for (unsigned k = 0; k < r->n_nodes_seen; k++) {
			printf("%s", k ? "," : "");
			ing_json_str(stdout, r->nodes_seen[k].id);
			printf(":%" PRIu64, r->nodes_seen[k].durable);
		}
		printf("},\"nodes\":[");
		struct ing_fleet_node fn;
		for (unsigned k = 0; ing_producer_fleet_node(r->p, k, &fn) == 0; k++) {
			printf("%s{\"id\":", k ? "," : "");
			ing_json_str(stdout, fn.node_id);
			printf(",\"address\":");
			ing_json_str(stdout, fn.address);
			printf(",\"state\":\"%s\",\"connected\":%s,\"durable\":%" PRIu64
			       ",\"rerouted_away\":%" PRIu64 ",\"failovers\":%" PRIu64 "}",
			       member_state(fn.state), fn.connected ? "true" : "false", fn.durable,
			       fn.rerouted_away, fn.failovers);
		}
		printf("]}");
	} else {
		printf(",\"reconnects\":%" PRIu64 ",\"resent\":%" PRIu64 ",\"resent_after_received\":%"
		       PRIu64, st->failovers, st->rerouted, st->resent_after_received);
	}
	printf(",\"latency_ms\":{");
	/* received/durable: submit -> ack at the producer; node_*: the node's own time from
	 * admission to that stage (Ack.latencyNs), without producer-side queueing */
	const struct ing_hist *hs[4] = { &r->h_recv, &r->h_dur, &r->h_node_recv, &r->h_node_dur };
	const char *hn[4] = { "received", "durable", "node_received", "node_durable" };
	for (int k = 0; k < 4; k++)
		printf("%s\"%s\":{\"count\":%" PRIu64 ",\"p50\":%.3f,\"p95\":%.3f,\"p99\":%.3f}",
		       k ? "," : "", hn[k], hs[k]->count, ms(ing_hist_quantile(hs[k], q[0])),
		       ms(ing_hist_quantile(hs[k], q[1])), ms(ing_hist_quantile(hs[k], q[2])));
	printf("}}\n");
	fflush(stdout);
}

static void summary_text(const struct send_cfg *c, const struct send_run *r,
			 const struct ing_producer_stats *st, double wall)
{
	static const double q[3] = { 0.50, 0.95, 0.99 };
	double mbs = wall > 0 ? (double)r->ok_bytes / 1e6 / wall : 0;
	double mibs = wall > 0 ? (double)r->ok_bytes / 1048576.0 / wall : 0;

	fprintf(stderr,
		"ingest-send: %" PRIu64 " frames: %" PRIu64 " ok (%" PRIu64 " duplicate), %" PRIu64
		" failed; %.1f MiB in %.2f s = %.1f MB/s (%.1f MiB/s)\n  transport %s: %s\n",
		r->njobs, r->n_ok, r->n_dup, r->n_fail, (double)r->ok_bytes / 1048576.0, wall, mbs,
		mibs, transport_name(r->p), ing_producer_transport_note(r->p));
	if (r->n_unsent)
		fprintf(stderr, "  interrupted: %" PRIu64 " frame(s) not sent (the frames sent all "
			"counted above)\n", r->n_unsent);
	if (c->servers) {
		fprintf(stderr, "  fleet: %u node(s) known, %u up; %" PRIu64 " frame re-send(s) after "
			"%" PRIu64 " failover(s), %" PRIu64 " of them RECEIVED by the failed node "
			"(possibly stored twice, same crc32c); %" PRIu64 " late ack(s) ignored\n",
			st->nodes, st->nodes_up, st->rerouted, st->failovers, st->resent_after_received,
			st->late_acks);
		if (st->first_failover_to_durable_ns)
			fprintf(stderr, "  first failover -> first re-sent frame DURABLE: %.1f ms\n",
				ms(st->first_failover_to_durable_ns));
		struct ing_fleet_node fn;
		for (unsigned k = 0; ing_producer_fleet_node(r->p, k, &fn) == 0; k++)
			fprintf(stderr, "  node %-24s %-22s %-8s %8" PRIu64 " DURABLE  %6" PRIu64
				" taken away  %" PRIu64 " failover(s)\n", fn.node_id, fn.address,
				member_state(fn.state), fn.durable, fn.rerouted_away, fn.failovers);
	}
	rails_text(r);
	if (c->servers) {
	} else if (st->failovers) {
		fprintf(stderr, "  reconnects: the connection was lost %" PRIu64 " time(s); %" PRIu64
			" frame re-send(s), %" PRIu64 " of them RECEIVED before (stored at most once: "
			"a duplicate then)\n", st->failovers, st->rerouted, st->resent_after_received);
	}
	if (c->rate)
		fprintf(stderr,
			"  open loop at %u frames/s (achieved %.1f); latency from each frame's scheduled "
			"start; submits fell behind schedule by up to %.2f ms\n", c->rate,
			wall > 0 ? (double)(r->n_ok + r->n_fail) / wall : 0.0, ms(r->max_lag));
	const char *const what[4] = {
		c->rate ? "ack latency RECEIVED (sched -> ack) " : "ack latency RECEIVED (submit -> ack)",
		c->rate ? "ack latency DURABLE  (sched -> ack) " : "ack latency DURABLE  (submit -> ack)",
		"node time   RECEIVED (admit -> ack) ", "node time   DURABLE  (admit -> ack) ",
	};
	const struct ing_hist *hs[4] = { &r->h_recv, &r->h_dur, &r->h_node_recv, &r->h_node_dur };
	for (int k = 0; k < 4; k++)
		if (hs[k]->count)
			fprintf(stderr, "  %s p50 %.2f ms  p95 %.2f ms  p99 %.2f ms\n", what[k],
				ms(ing_hist_quantile(hs[k], q[0])), ms(ing_hist_quantile(hs[k], q[1])),
				ms(ing_hist_quantile(hs[k], q[2])));
}

/* Step 5: the summary (text on stderr, --json on stdout). */
static void report(const struct send_cfg *c, const struct send_run *r)
{
	struct ing_producer_stats st;
	ing_producer_get_stats(r->p, &st);
	double wall = (double)(r->t1 - r->t0) / 1e9;
	if (c->json)
		summary_json(c, r, &st, wall);
	if (!c->quiet)
		summary_text(c, r, &st, wall);
}

/* Close the output files (a failed close is a failed run) and the producer. */
static int finish(const struct send_cfg *c, struct send_run *r, int rc)
{
	FILE *const files[3] = { r->man, r->pman, r->dman };
	const char *const names[3] = { c->manifest, c->placement, c->durable_manifest };
	for (int i = 0; i < 3; i++) {
		if (files[i] && fclose(files[i])) {
			fprintf(stderr, "ingest-send: %s: %s\n", names[i], strerror(errno));
			rc = rc ? rc : ING_EXIT_FAILURE;
		}
	}
	/* close before freeing the buffers' bookkeeping: the pool goes with the producer */
	ing_producer_close(r->p, 5000);
	free(r->fill);
	free(r->jobs);
	return rc;
}

int main(int argc, char **argv)
{
	static struct send_cfg c;
	static struct send_run r;
	int argi, rc;

	if (!getenv("ING_LOG_LEVEL"))
		ing_log_set_level(ING_LOG_WARN);   /* the summary repeats the library's info lines */
	cfg_init(&c);
	rc = parse_args(argc, argv, &c, &argi);
	if (rc)
		return rc == 1 ? ING_EXIT_OK : rc;
	rc = plan_jobs(&c, argv + argi, (uint64_t)(argc - argi), &r);
	if (!rc)
		rc = connect_node(&c, &r);
	if (!rc)
		rc = open_outputs(&c, &r);
	if (!rc) {
		send_frames(&c, &r);
		report(&c, &r);
		rc = r.n_fail || r.n_ok != r.njobs || r.hook_failed ? ING_EXIT_FAILURE : ING_EXIT_OK;
	}
	return finish(&c, &r, rc);
}
