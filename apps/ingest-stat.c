/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ingest-stat: one screen of an ingest node for whoever is on call: Health (grpc.health.v1
 * Check, and the node's readiness from Stats), Stats (throughput, ack and stage P99s,
 * failures by code, pool, disk, sessions, connections, the fleet export lag where there
 * is one) and the fleet Members, over the node's own gRPC port. --watch refreshes it,
 * --json prints every Stats field (whatever the node's version adds) as one JSON object.
 * Exit status: 0 the node is SERVING and ready, 1 it is not (or cannot be reached; the
 * reason is printed), 2 usage error.
 */
#include "common/json.h"
#include "common/cli.h"
#include "common/clock.h"
#include "common/hist.h"
#include "common/log.h"
#include "common/token.h"
#include "control/net/grpc.h"
#include "control/node/opts.h"
#include "h3000.pb-c.h"
#include "health.pb-c.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PROG "ingest-stat"

struct stat_cfg {
	const char *server, *config;
	const char *tls_ca, *tls_cert, *tls_key, *tls_server_name;
	bool tls;
	const char *auth_token_file;
	unsigned watch_ms;     /* 0: one screen */
	unsigned count;        /* --watch: screens, 0: until interrupted */
	unsigned timeout_ms;
	unsigned sample_ms;    /* one screen: Stats twice this far apart (the rate now) */
	bool json;
	char token[ING_AUTH_TOKEN_MAX + 2];
	char server_buf[300];
};
#define C struct stat_cfg

static void cfg_init(void *p)
{
	C *c = p;
	memset(c, 0, sizeof(*c));
	c->server = "127.0.0.1:50051";
	c->timeout_ms = 5000;
	c->sample_ms = 1000;
}

/* --watch[=INTERVAL]: a duration, default 2 s */
static int set_watch(const struct ing_opt *d, void *cfg, const char *v, char *why, size_t whylen)
{
	struct ing_opt dur = *d;
	dur.type = ING_OPT_DURATION;
	dur.off = offsetof(C, watch_ms);
	dur.lo = 100;
	dur.hi = 3600000;
	dur.unit_ms = 1000;
	if (!v) {
		((C *)cfg)->watch_ms = 2000;
		return 0;
	}
	return ing_cli_set(&dur, cfg, v, why, whylen);
}

static const struct ing_opt opts[] = {
	ING_OPT_GROUP_("The node"),
	ING_OPT_STR_(C, "server", server, "HOST:PORT", "the node's gRPC address (default 127.0.0.1:50051)"),
	{ "config", "FILE", ING_OPT_PATH, offsetof(C, config), 0, 0, 0, NULL, NULL,
	  "ingestd's config file: its listen port (on this host), TLS and\n"
	  "auth token file; flags given here win", NULL, 0 },
	ING_OPT_PATH_(C, "auth-token-file", auth_token_file, "PATH",
		      "the node's shared secret (Stats needs it when the node has one)"),
	ING_OPT_PATH_(C, "tls-ca", tls_ca, "PEM", "TLS: verify the node's certificate against this CA"),
	ING_OPT_PATH_(C, "tls-cert", tls_cert, "PEM", "TLS client certificate (a node with --tls-client-ca)"),
	ING_OPT_PATH_(C, "tls-key", tls_key, "PEM", "its key"),
	ING_OPT_STR_(C, "tls-server-name", tls_server_name, "NAME", "name to verify (default: the host of --server)"),
	ING_OPT_DURATION_(C, "timeout", timeout_ms, 100, 600000, "for each call to the node (default 5s)"),
	ING_OPT_GROUP_("The screen"),
	{ "watch", "[=INTERVAL]", ING_OPT_CUSTOM, offsetof(C, watch_ms), 0, 0, 0, NULL, set_watch,
	  "refresh the screen every INTERVAL (default 2s) until ^C", NULL,
	  ING_OPTF_OPTIONAL | ING_OPTF_NOCONF },
	ING_OPT_UINT_(C, "count", count, 0, 1000000, "with --watch: stop after N screens (0: at ^C)"),
	ING_OPT_BOOL_(C, "json", json, "one JSON object per screen (every Stats field)"),
	ING_OPT_DURATION_(C, "sample", sample_ms, 0, 60000, "one screen: rates and latencies are measured over\n"
			  "this long (default 1s; 0: since the node started only)"),
	ING_OPT_LOG_LEVEL_ENTRY(C, "warn"),
};

static const struct ing_cli cli = {
	.prog = PROG,
	.synopsis = "[--server HOST:PORT | --config FILE] [--watch[=INTERVAL]] [--json]",
	.summary = "one screen of an h3000 ingest node: health, stats, fleet members",
	.about = "Asks the node over its gRPC port: grpc.health.v1 Check, h3000.RDMASvc Stats and\n"
		 "Members. Health: SERVING and ready (serving, data dir writable, pool\n"
		 "prefaulted, not draining). Stats: stored throughput, ack and per-stage P99s,\n"
		 "failures by code, pool, disk, sessions, connections, each RDMA rail (up or\n"
		 "down, why and since when, what it moved), the fleet export lag, the object\n"
		 "store tier's backlog and lag.\n"
		 "Rates and the '~' latencies are over the window the screen names (--sample, or\n"
		 "the --watch interval): the difference of two snapshots of the node's /metrics\n"
		 "histograms, interpolated within a bucket as Prometheus's histogram_quantile()\n"
		 "does; the 'since start' latencies come from the node's <1 %-error histograms.\n"
		 "Members: the fleet as this node sees it.\n",
	.opts = opts,
	.nopts = sizeof(opts) / sizeof(opts[0]),
	.max_args = 0,
	.init = cfg_init,
	.cfg_size = sizeof(C),
	.notes = "On the node itself: ingest-stat --config /etc/h3000/ingestd.conf. Over a\n"
		 "network: ingest-stat --server node7:50051 --auth-token-file token.\n"
		 "The same facts for Prometheus: /metrics, /healthz and /readyz on ingestd's\n"
		 "--metrics-listen address (docs/OPERATIONS.md, On call).\n",
	.exit_status = "  0  the node is SERVING and ready\n"
		       "  1  it is not, or cannot be reached (the reason is printed)\n"
		       "  2  usage error\n",
};

/* --config FILE: ingestd's own table; the listen address on this host, TLS, the token */
static int read_ingestd_config(C *c)
{
	struct ing_ingestd_opts io;

	ing_ingestd_opts_init(&io);
	if (ing_ingestd_opts_read_config_as(PROG, c->config, &io))
		return ING_EXIT_USAGE;
	if (ing_cli_local_target(io.listen, c->server_buf, sizeof(c->server_buf)))
		return ing_cli_usage_error(&cli, "%s: listen '%s' has no port", c->config, io.listen);
	c->server = c->server_buf;
	c->tls = io.tls_cert != NULL;
	if (io.auth_token_file && !c->auth_token_file)
		c->auth_token_file = io.auth_token_file;
	return 0;
}

/* ---------------------------------------------------------------- one sample */

struct sample {
	bool reached;
	char err[640];
	int health;                    /* HealthCheckResponse.ServingStatus, -1: no answer */
	H3000__StatsReply *stats;      /* NULL: no answer (err says why) */
	char stats_err[300];
	H3000__MembersReply *members;  /* NULL: no answer or no Members rpc */
	uint64_t t_ns;
};

static void sample_free(struct sample *s)
{
	if (s->stats)
		h3000__stats_reply__free_unpacked(s->stats, NULL);
	if (s->members)
		h3000__members_reply__free_unpacked(s->members, NULL);
	memset(s, 0, sizeof(*s));
}

static struct ing_grpc_chan *chan_open(const C *c, char *err, size_t errlen)
{
	struct ing_grpc_chan_opts o;
	ing_grpc_chan_opts_init(&o);
	o.target = c->server;
	o.connect_timeout_ms = (int)c->timeout_ms;
	o.tls = c->tls || c->tls_ca || c->tls_cert;
	o.tls_ca = c->tls_ca;
	o.tls_cert = c->tls_cert;
	o.tls_key = c->tls_key;
	o.tls_server_name = c->tls_server_name;
	return ing_grpc_chan_connect(&o, err, errlen);
}

static int call(const C *c, struct ing_grpc_chan *ch, const char *path, const uint8_t *req,
		size_t reqlen, uint8_t **resp, size_t *rlen, char *err, size_t errlen)
{
	char bearer[ING_AUTH_TOKEN_MAX + 16];
	const char *md[3] = { NULL, NULL, NULL };
	if (c->token[0]) {
		snprintf(bearer, sizeof(bearer), "Bearer %s", c->token);
		md[0] = "authorization";
		md[1] = bearer;
	}
	return ing_grpc_unary(ch, path, md, req, reqlen, resp, rlen, (int)c->timeout_ms, err, errlen);
}

static void take_stats(const C *c, struct ing_grpc_chan *ch, struct sample *s)
{
	uint8_t *resp = NULL;
	size_t rlen = 0;
	char err[256] = "";
	int st = call(c, ch, "/h3000.RDMASvc/Stats", NULL, 0, &resp, &rlen, err, sizeof(err));
	if (s->stats)
		h3000__stats_reply__free_unpacked(s->stats, NULL);
	s->stats = NULL;
	if (st == ING_GRPC_OK)
		s->stats = h3000__stats_reply__unpack(NULL, rlen, resp);
	if (!s->stats)
		snprintf(s->stats_err, sizeof(s->stats_err), "%s",
			 st == ING_GRPC_OK ? "the StatsReply does not parse" :
			 st == ING_GRPC_UNAUTHENTICATED ? "the node requires its token: --auth-token-file PATH" :
			 err[0] ? err : "no answer");
	s->t_ns = ing_now_ns();
	free(resp);
}

/* Health, Stats (first: a Stats sample_ms before s's, for the rates), Members */
static void take(const C *c, struct sample *s, struct sample *first, bool sample_twice)
{
	uint8_t *resp = NULL;
	size_t rlen = 0;
	char err[256] = "";

	memset(s, 0, sizeof(*s));
	s->health = -1;
	struct ing_grpc_chan *ch = chan_open(c, err, sizeof(err));
	if (!ch) {
		snprintf(s->err, sizeof(s->err), "cannot reach %s: %s: is ingestd running there "
			 "(systemctl status ingestd), and is that its gRPC port?", c->server, err);
		return;
	}
	s->reached = true;
	uint8_t req[64];
	Grpc__Health__V1__HealthCheckRequest hreq = GRPC__HEALTH__V1__HEALTH_CHECK_REQUEST__INIT;
	hreq.service = (char *)"";
	size_t hl = grpc__health__v1__health_check_request__pack(&hreq, req);
	if (call(c, ch, "/grpc.health.v1.Health/Check", req, hl, &resp, &rlen, err, sizeof(err)) ==
	    ING_GRPC_OK) {
		Grpc__Health__V1__HealthCheckResponse *h =
			grpc__health__v1__health_check_response__unpack(NULL, rlen, resp);
		if (h) {
			s->health = (int)h->status;
			grpc__health__v1__health_check_response__free_unpacked(h, NULL);
		}
	}
	free(resp);
	resp = NULL;
	if (sample_twice && first) {
		take_stats(c, ch, first);
		struct timespec ts = { c->sample_ms / 1000, (long)(c->sample_ms % 1000) * 1000000L };
		while (nanosleep(&ts, &ts) && errno == EINTR)
			;
	}
	take_stats(c, ch, s);
	if (call(c, ch, "/h3000.RDMASvc/Members", NULL, 0, &resp, &rlen, err, sizeof(err)) == ING_GRPC_OK)
		s->members = h3000__members_reply__unpack(NULL, rlen, resp);
	free(resp);
	ing_grpc_chan_close(ch);
}

static bool healthy(const struct sample *s)
{
	return s->reached && s->health == GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING &&
	       s->stats && s->stats->ready;
}

static const char *health_name(int h)
{
	switch (h) {
	case GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING: return "SERVING";
	case GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__NOT_SERVING: return "NOT_SERVING";
	case GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVICE_UNKNOWN: return "SERVICE_UNKNOWN";
	case -1: return "no answer";
	default: return "UNKNOWN";
	}
}

/* the rates between two samples of one node (prev NULL: averages since its start) */
struct rates {
	double bytes_s, frames_s, seconds;
	bool since_start;
};

static struct rates rates_of(const struct sample *prev, const struct sample *s)
{
	struct rates r = { 0 };
	const H3000__StatsReply *a = prev ? prev->stats : NULL, *b = s->stats;
	if (!b)
		return r;
	if (a && b->uptimens > a->uptimens && b->bytesdurable >= a->bytesdurable &&
	    b->framesdurable >= a->framesdurable) {
		r.seconds = (double)(b->uptimens - a->uptimens) / 1e9;
		r.bytes_s = (double)(b->bytesdurable - a->bytesdurable) / r.seconds;
		r.frames_s = (double)(b->framesdurable - a->framesdurable) / r.seconds;
	} else if (b->uptimens) {
		r.since_start = true;
		r.seconds = (double)b->uptimens / 1e9;
		r.bytes_s = (double)b->bytesdurable / r.seconds;
		r.frames_s = (double)b->framesdurable / r.seconds;
	}
	return r;
}

/*
 * Latency over the window between two samples: the difference of the node's histograms
 * (StatsReply.latency, the /metrics buckets), so that a week-old node shows this minute.
 */
#define WIN_MAX_BUCKETS 64
struct win_q {
	bool valid;             /* both samples have the histogram, the node did not restart */
	uint64_t count;         /* frames in the window */
	uint64_t p50, p95, p99; /* ns, interpolated within the buckets */
	bool over;              /* the P99 is past the last bound */
};

struct window {
	bool valid;
	double seconds;
	struct win_q ack;
	unsigned nstages;
	const char *stage[8];
	struct win_q st[8];
};

static const H3000__LatencyHistogram *hist_named(const H3000__StatsReply *r, const char *name)
{
	for (size_t i = 0; i < r->n_latency; i++)
		if (r->latency[i]->stage && !strcmp(r->latency[i]->stage, name))
			return r->latency[i];
	return NULL;
}

static struct win_q win_quantiles(const H3000__LatencyHistogram *a, const H3000__LatencyHistogram *b)
{
	struct win_q w = { 0 };
	uint64_t diff[WIN_MAX_BUCKETS + 1];
	bool over;
	size_t n = b ? b->n_bucketupperns : 0;
	if (!a || !b || !n || n > WIN_MAX_BUCKETS || a->n_bucketupperns != n ||
	    a->n_bucketcounts != n + 1 || b->n_bucketcounts != n + 1 || b->count < a->count)
		return w;
	for (size_t i = 0; i <= n; i++) {
		if (b->bucketcounts[i] < a->bucketcounts[i] || (i < n && a->bucketupperns[i] != b->bucketupperns[i]))
			return w;   /* a restarted node, or another layout */
		diff[i] = b->bucketcounts[i] - a->bucketcounts[i];
	}
	w.valid = true;
	w.count = b->count - a->count;
	w.p50 = ing_hist_prom_quantile(diff, b->bucketupperns, (unsigned)n, 0.50, &over);
	w.p95 = ing_hist_prom_quantile(diff, b->bucketupperns, (unsigned)n, 0.95, &over);
	w.p99 = ing_hist_prom_quantile(diff, b->bucketupperns, (unsigned)n, 0.99, &w.over);
	return w;
}

/* the window between prev and s (prev NULL, or a restart between them: not valid) */
static struct window window_of(const struct sample *prev, const struct sample *s)
{
	struct window w = { 0 };
	const H3000__StatsReply *a = prev ? prev->stats : NULL, *b = s->stats;
	if (!a || !b || b->uptimens <= a->uptimens)
		return w;
	w.seconds = (double)(b->uptimens - a->uptimens) / 1e9;
	w.ack = win_quantiles(hist_named(a, "ack_durable"), hist_named(b, "ack_durable"));
	w.valid = w.ack.valid;
	for (size_t i = 0; i < b->n_latency && w.nstages < 8; i++) {
		const char *name = b->latency[i]->stage;
		if (!name || !strncmp(name, "ack_", 4))
			continue;   /* ack_received / ack_durable: the ack line's */
		w.stage[w.nstages] = name;
		w.st[w.nstages++] = win_quantiles(hist_named(a, name), b->latency[i]);
	}
	return w;
}

/* ---------------------------------------------------------------- text */

static const char *human_bytes(double v, char *buf, size_t len)
{
	static const char *const u[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
	unsigned i = 0;
	while (v >= 1024 && i < 5) {
		v /= 1024;
		i++;
	}
	snprintf(buf, len, i ? "%.1f %s" : "%.0f %s", v, u[i]);
	return buf;
}

static const char *human_ns(uint64_t ns, char *buf, size_t len)
{
	if (ns >= 10000000000ull)
		snprintf(buf, len, "%.0f s", (double)ns / 1e9);
	else if (ns >= 1000000000ull)
		snprintf(buf, len, "%.2f s", (double)ns / 1e9);
	else if (ns >= 1000000ull)
		snprintf(buf, len, "%.1f ms", (double)ns / 1e6);
	else
		snprintf(buf, len, "%.0f us", (double)ns / 1e3);
	return buf;
}

static const char *human_age(uint64_t s, char *buf, size_t len)
{
	if (s >= 86400)
		snprintf(buf, len, "%llud%02lluh", (unsigned long long)(s / 86400),
			 (unsigned long long)(s % 86400 / 3600));
	else if (s >= 3600)
		snprintf(buf, len, "%lluh%02llum", (unsigned long long)(s / 3600),
			 (unsigned long long)(s % 3600 / 60));
	else
		snprintf(buf, len, "%llum%02llus", (unsigned long long)(s / 60), (unsigned long long)(s % 60));
	return buf;
}

static const char *code_label(int code)
{
	const ProtobufCEnumValue *v = protobuf_c_enum_descriptor_get_value(&h3000__error_code__descriptor, code);
	static char buf[48];
	if (!v)
		return "unknown";
	snprintf(buf, sizeof(buf), "%s", v->name + (strncmp(v->name, "ERROR_", 6) ? 0 : 6));
	for (char *p = buf; *p; p++)
		*p = (char)(*p >= 'A' && *p <= 'Z' ? *p - 'A' + 'a' : *p);
	return buf;
}

static const char *member_state(H3000__MemberState st)
{
	const ProtobufCEnumValue *v = protobuf_c_enum_descriptor_get_value(&h3000__member_state__descriptor, st);
	return v ? v->name + (strncmp(v->name, "MEMBER_", 7) ? 0 : 7) : "?";
}

/* the object store tier (docs/TIER.md): the store's state, the upload backlog and lag */
static void print_tier(const H3000__TierStats *t)
{
	char a[32], b[32];
	const ProtobufCEnumValue *v =
		protobuf_c_enum_descriptor_get_value(&h3000__tier_store_state__descriptor, t->storestate);
	const char *state = v ? v->name + (strncmp(v->name, "TIER_STORE_", 11) ? 0 : 11) : "?";
	printf("         tier     %s %s%s%s; backlog %" PRIu64 " frames (%s), lag %.1f s, uploading %s/s,"
	       " %" PRIu64 " errors\n", t->store, state, t->storeerror && *t->storeerror ? ": " : "",
	       t->storeerror ? t->storeerror : "", t->backlogframes,
	       human_bytes((double)t->backlogbytes, a, sizeof(a)), t->lagseconds,
	       human_bytes(t->uploadbytespersecond, b, sizeof(b)), t->uploaderrors);
	if (t->locationsknown)
		printf("         where    %" PRIu64 " local only, %" PRIu64 " local + store, %" PRIu64
		       " store only%s\n", t->frameslocal, t->framesboth, t->framestiered,
		       t->refusing ? "; REFUSING new frames at --local-high-water" : "");
}

/* each RDMA rail (StatsReply.rails): where, whether it serves (why not, since when), what
 * it moved since start */
static void print_rails(const H3000__StatsReply *r)
{
	char a[32], since[32], mbps[32];

	for (size_t i = 0; i < r->n_rails; i++) {
		const H3000__RailStats *rl = r->rails[i];
		bool up = rl->state == H3000__RAIL_STATE__RAIL_UP;
		since[0] = 0;
		if (!up && rl->downsinceunixms > 0) {
			time_t t = (time_t)(rl->downsinceunixms / 1000);
			struct tm tm;
			localtime_r(&t, &tm);
			strftime(since, sizeof(since), " since %H:%M:%S", &tm);
		}
		snprintf(mbps, sizeof(mbps), rl->linkmbps ? "%u Mb/s" : "speed unknown", rl->linkmbps);
		printf("         rail     %u %s %s:%u node %d, %s: %s%s", rl->index, rl->device, rl->rdmaaddr,
		       rl->rdmaport, rl->numanode, mbps, up ? "UP" : "DOWN", since);
		if (!up)
			printf(" (%.1f s): %s", rl->downseconds, rl->why && *rl->why ? rl->why : "?");
		printf("; %u connections, %" PRIu64 " frames (%s), %" PRIu64 " parts of striped frames, %" PRIu64
		       " failed, %" PRIu64 " completion errors, down %" PRIu64 " times\n", rl->connections,
		       rl->framesreceived, human_bytes((double)rl->bytesreceived, a, sizeof(a)),
		       rl->partsreceived, rl->framesfailed, rl->completionerrors, rl->downs);
	}
}

static void print_text(const C *c, const struct sample *s, const struct rates *rt,
		       const struct window *w)
{
	char a[32], b[32], d[32], e[32], when[32];
	time_t now = time(NULL);
	struct tm tm;
	localtime_r(&now, &tm);
	strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm);
	const H3000__StatsReply *r = s->stats;

	printf("ingest-stat %s: %s%s%s%s  %s\n", ING_VERSION, c->server, r && r->fleetnodeid && *r->fleetnodeid ? " (node " : "",
	       r && r->fleetnodeid ? r->fleetnodeid : "", r && r->fleetnodeid && *r->fleetnodeid ? ")" : "", when);
	if (!s->reached) {
		printf("Health   UNREACHABLE: %s\n", s->err);
		return;
	}
	printf("Health   %s, %s", health_name(s->health),
	       !r ? "readiness unknown" : r->ready ? "ready" : "NOT READY: ");
	if (r && !r->ready)
		printf("%s", r->notready);
	if (r)
		printf("; up %s", human_age(r->uptimens / 1000000000ull, a, sizeof(a)));
	putchar('\n');
	if (!r) {
		printf("Stats    no answer: %s\n", s->stats_err);
	} else {
		printf("         transport: %s\n", r->transportnote && *r->transportnote ? r->transportnote : "gRPC stream");
		printf("Stats    stored %s/s, %.1f frames/s (%s %.1f s)\n", human_bytes(rt->bytes_s, a, sizeof(a)),
		       rt->frames_s, rt->since_start ? "average since start," : "over the last", rt->seconds);
		printf("         frames   durable %" PRIu64 ", duplicate %" PRIu64 ", failed %" PRIu64
		       ", refused %" PRIu64 ", in flight %" PRIu64 "\n", r->framesdurable, r->framesduplicate,
		       r->framesfailed, r->framesrefused, r->framesinflight);
		printf("         failures ");
		if (!r->n_failures)
			printf("none");
		for (size_t i = 0; i < r->n_failures; i++)
			printf("%s%s %" PRIu64, i ? ", " : "", code_label(r->failures[i]->code), r->failures[i]->count);
		putchar('\n');
		/* admitted -> DURABLE: over the window (~: within a /metrics bucket), then since start */
		if (!w->valid)
			printf("         ack      (no window: %s)\n", c->sample_ms || c->watch_ms ?
			       "the node restarted between the two samples" : "--sample 0");
		else if (!w->ack.count)
			printf("         ack      no frame acked in the last %.1f s\n", w->seconds);
		else
			printf("         ack      P50 ~%s, P95 ~%s, P99 %s%s over the last %.1f s (%" PRIu64
			       " frames, admitted -> DURABLE)\n", human_ns(w->ack.p50, a, sizeof(a)),
			       human_ns(w->ack.p95, b, sizeof(b)), w->ack.over ? ">" : "~",
			       human_ns(w->ack.p99, d, sizeof(d)), w->seconds, w->ack.count);
		printf("                  since start P50 %s, P95 %s, P99 %s (%" PRIu64 " frames)\n",
		       human_ns(r->acklatencyp50ns, a, sizeof(a)), human_ns(r->acklatencyp95ns, b, sizeof(b)),
		       human_ns(r->acklatencyp99ns, d, sizeof(d)), r->framesdurable);
		if (w->valid && w->ack.count) {
			printf("         stages   P99 over the last %.1f s:", w->seconds);
			for (unsigned i = 0, k = 0; i < w->nstages; i++)
				if (w->st[i].valid && w->st[i].count)
					printf("%s %s %s%s", k++ ? "," : "", w->stage[i], w->st[i].over ? ">" : "~",
					       human_ns(w->st[i].p99, a, sizeof(a)));
			putchar('\n');
		}
		printf("         stages   P99 since start:");
		for (size_t i = 0, k = 0; i < r->n_stagelatency; i++) {
			const H3000__StageLatency *st = r->stagelatency[i];
			if (st->stage && strcmp(st->stage, "total"))
				printf("%s %s %s", k++ ? "," : "", st->stage, human_ns(st->p99ns, a, sizeof(a)));
		}
		putchar('\n');
		unsigned used = r->poolslotstotal >= r->poolslotsfree ? r->poolslotstotal - r->poolslotsfree : 0;
		printf("         pool     %s on %s, %u of %u slots in use (%.0f %%)\n",
		       human_bytes((double)r->poolbytes, a, sizeof(a)), r->poolhugepages ? "hugepages" : "4 KiB pages",
		       used, r->poolslotstotal, r->poolslotstotal ? 100.0 * used / r->poolslotstotal : 0.0);
		if (r->disksizebytes)
			printf("         disk     %s free of %s (%.0f %% free)\n",
			       human_bytes((double)r->diskfreebytes, a, sizeof(a)),
			       human_bytes((double)r->disksizebytes, b, sizeof(b)),
			       100.0 * (double)r->diskfreebytes / (double)r->disksizebytes);
		else
			printf("         disk     none (null sink)\n");
		printf("         sessions %u (RDMA %u, push %u, gRPC stream %u), connections %u\n",
		       r->sessionsactive, r->sessionsrdma, r->sessionspush, r->sessionsfallback, r->connections);
		print_rails(r);
		if (r->fleetpgup || r->fleetexportedrows || r->fleetexportlagrows || r->fleetexporterrors)
			printf("         export   lag %" PRIu64 " rows (%.1f s), %" PRIu64 " exported, %" PRIu64
			       " errors, PostgreSQL %s\n", r->fleetexportlagrows, r->fleetexportlagseconds,
			       r->fleetexportedrows, r->fleetexporterrors, r->fleetpgup ? "up" : "DOWN");
		if (r->tier && r->tier->enabled)
			print_tier(r->tier);
	}
	if (!s->members) {
		printf("Members  no answer\n");
		return;
	}
	const H3000__MembersReply *m = s->members;
	printf("Members  %zu (%s, epoch %" PRIu64 ")\n", m->n_members, m->source && *m->source ? m->source : "?",
	       m->epoch);
	struct timespec wall;
	clock_gettime(CLOCK_REALTIME, &wall);
	int64_t now_ms = (int64_t)wall.tv_sec * 1000 + wall.tv_nsec / 1000000;
	for (size_t i = 0; i < m->n_members; i++) {
		const H3000__Member *mb = m->members[i];
		e[0] = 0;
		if (mb->heartbeatunixms > 0)
			snprintf(e, sizeof(e), "heartbeat %.1f s ago",
				 (double)(now_ms > mb->heartbeatunixms ? now_ms - mb->heartbeatunixms : 0) / 1e3);
		printf("         %-20s %-24s %-9s %s%s\n", mb->nodeid, mb->address, member_state(mb->state), e,
		       m->selfid && !strcmp(m->selfid, mb->nodeid) ? " (this node)" : "");
	}
}

/* ---------------------------------------------------------------- JSON */

static void json_message(const ProtobufCMessage *m);

static void json_value(const ProtobufCFieldDescriptor *f, const void *p)
{
	switch (f->type) {
	case PROTOBUF_C_TYPE_INT32: case PROTOBUF_C_TYPE_SINT32: case PROTOBUF_C_TYPE_SFIXED32:
		printf("%" PRId32, *(const int32_t *)p);
		break;
	case PROTOBUF_C_TYPE_UINT32: case PROTOBUF_C_TYPE_FIXED32:
		printf("%" PRIu32, *(const uint32_t *)p);
		break;
	case PROTOBUF_C_TYPE_INT64: case PROTOBUF_C_TYPE_SINT64: case PROTOBUF_C_TYPE_SFIXED64:
		printf("%" PRId64, *(const int64_t *)p);
		break;
	case PROTOBUF_C_TYPE_UINT64: case PROTOBUF_C_TYPE_FIXED64:
		printf("%" PRIu64, *(const uint64_t *)p);
		break;
	case PROTOBUF_C_TYPE_FLOAT:
		printf("%.9g", isfinite(*(const float *)p) ? *(const float *)p : 0.0f);
		break;
	case PROTOBUF_C_TYPE_DOUBLE:
		printf("%.17g", isfinite(*(const double *)p) ? *(const double *)p : 0.0);
		break;
	case PROTOBUF_C_TYPE_BOOL:
		printf("%s", *(const protobuf_c_boolean *)p ? "true" : "false");
		break;
	case PROTOBUF_C_TYPE_ENUM: {
		const ProtobufCEnumValue *v = protobuf_c_enum_descriptor_get_value(f->descriptor, *(const int *)p);
		if (v)
			ing_json_str(stdout, v->name);
		else
			printf("%d", *(const int *)p);
		break;
	}
	case PROTOBUF_C_TYPE_STRING:
		ing_json_str(stdout, *(char *const *)p);
		break;
	case PROTOBUF_C_TYPE_BYTES:
		printf("%zu", ((const ProtobufCBinaryData *)p)->len);   /* the length only */
		break;
	case PROTOBUF_C_TYPE_MESSAGE:
		if (*(ProtobufCMessage *const *)p)
			json_message(*(ProtobufCMessage *const *)p);
		else
			printf("null");
		break;
	}
}

static size_t field_size(const ProtobufCFieldDescriptor *f)
{
	switch (f->type) {
	case PROTOBUF_C_TYPE_INT64: case PROTOBUF_C_TYPE_SINT64: case PROTOBUF_C_TYPE_SFIXED64:
	case PROTOBUF_C_TYPE_UINT64: case PROTOBUF_C_TYPE_FIXED64: case PROTOBUF_C_TYPE_DOUBLE:
		return 8;
	case PROTOBUF_C_TYPE_STRING: case PROTOBUF_C_TYPE_MESSAGE:
		return sizeof(void *);
	case PROTOBUF_C_TYPE_BYTES:
		return sizeof(ProtobufCBinaryData);
	case PROTOBUF_C_TYPE_BOOL:
		return sizeof(protobuf_c_boolean);
	default:
		return 4;
	}
}

/* Every field, named as in the .proto (its lowerCamel names), proto3 defaults included. */
static void json_message(const ProtobufCMessage *m)
{
	const ProtobufCMessageDescriptor *d = m->descriptor;
	putchar('{');
	for (unsigned i = 0; i < d->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &d->fields[i];
		const char *base = (const char *)m + f->offset;
		if (i)
			putchar(',');
		ing_json_str(stdout, f->name);
		putchar(':');
		if (f->label == PROTOBUF_C_LABEL_REPEATED) {
			size_t n = *(const size_t *)(const void *)((const char *)m + f->quantifier_offset);
			const char *arr = *(char *const *)(const void *)base;
			putchar('[');
			for (size_t k = 0; k < n; k++) {
				if (k)
					putchar(',');
				json_value(f, arr + k * field_size(f));
			}
			putchar(']');
		} else {
			json_value(f, base);
		}
	}
	putchar('}');
}

static void json_win_q(const char *name, const struct win_q *q)
{
	ing_json_str(stdout, name);
	printf(":{\"count\":%" PRIu64 ",\"p50Ns\":%" PRIu64 ",\"p95Ns\":%" PRIu64 ",\"p99Ns\":%" PRIu64
	       ",\"p99AboveLastBucket\":%s}", q->count, q->p50, q->p95, q->p99, q->over ? "true" : "false");
}

static void print_json(const C *c, const struct sample *s, const struct rates *rt,
		       const struct window *w)
{
	printf("{\"server\":");
	ing_json_str(stdout, c->server);
	printf(",\"reachable\":%s,\"health\":", s->reached ? "true" : "false");
	ing_json_str(stdout, health_name(s->health));
	printf(",\"ready\":%s,\"notReady\":", s->stats && s->stats->ready ? "true" : "false");
	ing_json_str(stdout, !s->reached ? s->err : !s->stats ? s->stats_err : s->stats->ready ? "" : s->stats->notready);
	printf(",\"throughput\":{\"bytesPerSecond\":%.1f,\"framesPerSecond\":%.2f,\"seconds\":%.3f,"
	       "\"sinceStart\":%s}", rt->bytes_s, rt->frames_s, rt->seconds, rt->since_start ? "true" : "false");
	/* latency over the window (the difference of the node's histograms) */
	printf(",\"window\":");
	if (w->valid) {
		printf("{\"seconds\":%.3f,", w->seconds);
		json_win_q("ack", &w->ack);
		printf(",\"stages\":{");
		for (unsigned i = 0, k = 0; i < w->nstages; i++)
			if (w->st[i].valid) {
				printf("%s", k++ ? "," : "");
				json_win_q(w->stage[i], &w->st[i]);
			}
		printf("}}");
	} else {
		printf("null");
	}
	printf(",\"stats\":");
	if (s->stats)
		json_message(&s->stats->base);
	else
		printf("null");
	printf(",\"members\":");
	if (s->members)
		json_message(&s->members->base);
	else
		printf("null");
	printf("}\n");
}

/* ---------------------------------------------------------------- main */

static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
	(void)sig;
	interrupted = 1;
}

int main(int argc, char **argv)
{
	static const char *const first[] = { "config", NULL };
	C c;
	int argi, rc;

	cfg_init(&c);
	ing_log_set_default_level(ING_LOG_WARN);
	if (!ing_cli_parse_only(&cli, argc, argv, &c, first) && c.config && read_ingestd_config(&c))
		return ING_EXIT_USAGE;
	rc = ing_cli_parse(&cli, argc, argv, &c, &argi);
	if (rc)
		return rc == 1 ? ING_EXIT_OK : rc;
	if (!!c.tls_cert != !!c.tls_key)
		return ing_cli_usage_error(&cli, "--tls-cert and --tls-key go together");
	if (c.count && !c.watch_ms)
		return ing_cli_usage_error(&cli, "--count counts --watch screens: give --watch too");
	if (c.auth_token_file) {
		char why[512];
		if (ing_token_file_read(c.auth_token_file, c.token, sizeof(c.token), why, sizeof(why)))
			return ing_cli_usage_error(&cli, "--auth-token-file '%s': %s", c.auth_token_file, why);
	}
	signal(SIGPIPE, SIG_IGN);
	struct sigaction sa = { .sa_handler = on_signal };
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);

	struct sample prev = { 0 }, cur = { 0 };
	bool tty = isatty(STDOUT_FILENO) && !c.json;
	unsigned screens = 0;
	bool ok = false;
	for (;;) {
		/* the first screen measures its rates over --sample; the next ones over --watch */
		bool twice = screens == 0 && c.sample_ms > 0;
		take(&c, &cur, twice ? &prev : NULL, twice);
		struct rates rt = rates_of(prev.stats && cur.stats ? &prev : NULL, &cur);
		struct window win = window_of(prev.stats && cur.stats ? &prev : NULL, &cur);
		ok = healthy(&cur);
		if (c.json) {
			print_json(&c, &cur, &rt, &win);
		} else {
			if (tty && c.watch_ms)
				printf("\033[H\033[2J");
			else if (screens)
				putchar('\n');
			print_text(&c, &cur, &rt, &win);
		}
		fflush(stdout);
		screens++;
		if (!c.watch_ms || interrupted || (c.count && screens >= c.count))
			break;
		sample_free(&prev);
		prev = cur;
		memset(&cur, 0, sizeof(cur));
		struct timespec ts = { c.watch_ms / 1000, (long)(c.watch_ms % 1000) * 1000000L };
		while (!interrupted && nanosleep(&ts, &ts) && errno == EINTR)
			;
		if (interrupted)
			break;
	}
	sample_free(&cur);
	sample_free(&prev);
	return interrupted ? ING_EXIT_OK : ok ? ING_EXIT_OK : ING_EXIT_FAILURE;
}
