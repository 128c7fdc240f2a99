/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ingest-get - any stored frame back, from wherever it lives: asks an ingest node
 * (rpc GetFrame), which reads its local copy or, once that is gone, its object in the
 * store. The bytes are CRC-32C checked twice: by the node against its catalog, and here
 * against the CRC the node's first message names. The output file appears (renamed from a
 * temp file) only when both checks pass; on stdout a failed check means exit 1 (discard
 * what was written).
 */
#include "common/cli.h"
#include "common/clock.h"
#include "common/crc32c.h"
#include "common/ident.h"
#include "common/log.h"
#include "common/parse.h"
#include "common/token.h"
#include "control/grpc/grpc.h"
#include "control/node.h"
#include "h3000.pb-c.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct get_cfg {
	const char *server, *config;
	const char *wafer;
	const char *frame;
	const char *out;
	int source;                 /* h3000.FrameSource */
	unsigned timeout_ms;        /* no progress for this long: give up */
	const char *auth_token_file;
	const char *tls_ca, *tls_cert, *tls_key, *tls_server_name;
	bool quiet;
	bool tls;                   /* --config: the node serves TLS */
	char server_buf[300];
};
#define C struct get_cfg

static void defaults(void *cfg)
{
	C *c = cfg;
	memset(c, 0, sizeof(*c));
	c->server = "127.0.0.1:50051";
	c->timeout_ms = 60000;
}

static const struct ing_opt opts[] = {
	ING_OPT_GROUP_("The frame"),
	ING_OPT_STR_(C, "wafer", wafer, "ID", "the wafer (default: the wafer \"default\", as for an empty\n"
		     "waferId)"),
	ING_OPT_STR_(C, "frame", frame, "ID", "the frame (required)"),
	ING_OPT_STR_(C, "out", out, "PATH", "write the frame here (default: stdout when it is not a\n"
		     "terminal)"),
	ING_OPT_CHOICE_(C, "source", source, "any=0|local=1|store=2",
			"where to read it: any (the local copy when there is one,\n"
			"else the object store; default), local, store"),
	ING_OPT_GROUP_("The node"),
	ING_OPT_CUSTOM_(C, "server", server, ing_opt_set_hostport, "HOST:PORT",
			"the ingest node (default 127.0.0.1:50051)"),
	{ "config", "FILE", ING_OPT_PATH, offsetof(C, config), 0, 0, 0, NULL, NULL,
	  "ingestd's config file: its listen port (on this host), TLS and\n"
	  "auth token file; flags given here win", NULL, ING_OPTF_NOCONF },
	ING_OPT_DURATION_(C, "timeout", timeout_ms, 1000, 3600000, "give up when no byte arrives for this long"),
	ING_OPT_PATH_(C, "auth-token-file", auth_token_file, "PATH", "the node's shared secret (ingestd --auth-token-file)"),
	ING_OPT_PATH_(C, "tls-ca", tls_ca, "PEM", "TLS: verify the node's certificate against this CA"),
	ING_OPT_PATH_(C, "tls-cert", tls_cert, "PEM", "mTLS: client certificate (with --tls-key)"),
	ING_OPT_PATH_(C, "tls-key", tls_key, "PEM", "mTLS: client key"),
	ING_OPT_STR_(C, "tls-server-name", tls_server_name, "NAME", "the name the node's certificate must carry (default:\n"
		     "the host of --server)"),
	ING_OPT_GROUP_("Output"),
	ING_OPT_BOOL_(C, "quiet", quiet, "no summary line"),
	ING_OPT_LOG_LEVEL_ENTRY(C, "warn"),
};

static const struct ing_cli cli = {
	.prog = "ingest-get",
	.synopsis = "--frame ID [--wafer ID] [--out PATH] [--server HOST:PORT | --config FILE] [options]",
	.summary = "fetch a stored frame from an ingest node, from its disk or its object store",
	.about = "Asks the node (rpc GetFrame) for the frame; it reads its local copy or, when that\n"
		 "was deleted after tiering, the object in the store. The bytes are CRC-32C checked\n"
		 "by the node against its catalog and here against the CRC it names.\n",
	.opts = opts,
	.nopts = sizeof(opts) / sizeof(opts[0]),
	.max_args = 0,
	.init = defaults,
	.cfg_size = sizeof(struct get_cfg),
	.notes = "Example: ingest-get --server node1:50051 --wafer W-17 --frame 42 --out f.raw\n"
		 "On the node itself: ingest-get --config /etc/h3000/ingestd.conf --frame 42 ...\n"
		 "With --source any, a local copy that fails its check is read again from the store\n"
		 "when the node has the frame there.\n",
	.exit_status = "  0  the frame was written, both CRC-32C checks passed\n"
		       "  1  not written: no such frame, no copy where asked, the store or node\n"
		       "     unavailable, or the bytes failed a check (the node's message says which)\n"
		       "  2  usage error\n",
};

/* one fetch in progress */
struct fetch {
	const C *c;
	int fd;
	bool started;
	uint64_t length, got;
	uint32_t crc_want, crc;
	char location[16];
	int source;
	int status;          /* -1 while the call runs */
	char msg[512];
	bool write_failed;
	uint64_t last_ns;
};

static void on_message(struct ing_grpc_ccall *cc, void *arg, const uint8_t *msg, size_t len)
{
	struct fetch *f = arg;
	(void)cc;
	f->last_ns = ing_now_ns();
	H3000__FrameData *m = h3000__frame_data__unpack(NULL, len, msg);
	if (!m) {
		snprintf(f->msg, sizeof(f->msg), "malformed FrameData from the node");
		f->write_failed = true;
		return;
	}
	if (!f->started) {
		f->started = true;
		f->length = m->length;
		f->crc_want = m->crc32c;
		f->source = m->source;
		snprintf(f->location, sizeof(f->location), "%s", m->location ? m->location : "");
	}
	if (m->offset != f->got || f->got + m->data.len > f->length) {
		snprintf(f->msg, sizeof(f->msg), "the node sent bytes at offset %" PRIu64 " (%zu), %" PRIu64
			 " expected", m->offset, m->data.len, f->got);
		f->write_failed = true;
	} else if (!f->write_failed) {
		size_t done = 0;
		while (done < m->data.len) {
			ssize_t w = write(f->fd, m->data.data + done, m->data.len - done);
			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0) {
				snprintf(f->msg, sizeof(f->msg), "writing the output: %s", strerror(errno));
				f->write_failed = true;
				break;
			}
			done += (size_t)w;
		}
		f->crc = ing_crc32c(f->crc, m->data.data, m->data.len);
		f->got += m->data.len;
	}
	h3000__frame_data__free_unpacked(m, NULL);
}

static void on_close(struct ing_grpc_ccall *cc, void *arg, int status, const char *message)
{
	struct fetch *f = arg;
	(void)cc;
	f->status = status;
	if (status && !f->msg[0])
		snprintf(f->msg, sizeof(f->msg), "%s", message && *message ? message : "call failed");
}

static const char *status_name(int s)
{
	switch (s) {
	case ING_GRPC_NOT_FOUND: return "not found";
	case ING_GRPC_FAILED_PRECONDITION: return "no copy there";
	case ING_GRPC_UNAVAILABLE: return "unavailable";
	case ING_GRPC_DATA_LOSS: return "data loss";
	case ING_GRPC_UNAUTHENTICATED: return "unauthenticated";
	case ING_GRPC_UNIMPLEMENTED: return "not supported by this node";
	case ING_GRPC_RESOURCE_EXHAUSTED: return "busy";
	case ING_GRPC_DEADLINE_EXCEEDED: return "timed out";
	default: return "failed";
	}
}

/* One GetFrame call into fd: 0 when both checks passed; 1 otherwise (f->msg says why). */
static int fetch_once(const C *c, const char *token, int fd, int source, struct fetch *f)
{
	memset(f, 0, sizeof(*f));
	f->c = c;
	f->fd = fd;
	f->status = -1;
	if (lseek(fd, 0, SEEK_CUR) > 0 && (ftruncate(fd, 0) != 0 || lseek(fd, 0, SEEK_SET) != 0)) {
		snprintf(f->msg, sizeof(f->msg), "cannot rewind the output: %s", strerror(errno));
		return 1;
	}
	struct ing_grpc_chan_opts co;
	ing_grpc_chan_opts_init(&co);
	co.target = c->server;
	co.connect_timeout_ms = (int)(c->timeout_ms < 10000 ? c->timeout_ms : 10000);
	co.tls = c->tls || c->tls_ca != NULL;
	co.tls_ca = c->tls_ca;
	co.tls_cert = c->tls_cert;
	co.tls_key = c->tls_key;
	co.tls_server_name = c->tls_server_name;
	char err[200] = "";
	struct ing_grpc_chan *ch = ing_grpc_chan_connect(&co, err, sizeof(err));
	if (!ch) {
		snprintf(f->msg, sizeof(f->msg), "%s", err[0] ? err : "cannot connect");
		return 1;
	}
	H3000__GetFrameRequest q = H3000__GET_FRAME_REQUEST__INIT;
	q.waferid = (char *)(c->wafer ? c->wafer : "");
	q.frameid = (char *)c->frame;
	q.source = (H3000__FrameSource)source;
	uint8_t req[2 * ING_ID_MAX + 32];
	size_t qlen = h3000__get_frame_request__pack(&q, req);
	char bearer[ING_AUTH_TOKEN_MAX + 8];
	const char *md[3] = { NULL, NULL, NULL };
	if (token) {
		snprintf(bearer, sizeof(bearer), "Bearer %s", token);
		md[0] = "authorization";
		md[1] = bearer;
	}
	struct ing_grpc_ccall_cbs cbs = { .on_message = on_message, .on_close = on_close, .arg = f };
	struct ing_grpc_ccall *cc = ing_grpc_chan_call(ch, "/h3000.RDMASvc/GetFrame", md, 0, &cbs);
	if (!cc || ing_grpc_ccall_send(cc, req, qlen, true)) {
		snprintf(f->msg, sizeof(f->msg), "cannot start the call");
		ing_grpc_chan_close(ch);
		return 1;
	}
	f->last_ns = ing_now_ns();
	while (f->status < 0) {
		int rc = ing_grpc_chan_poll(ch, 200);
		if (rc < 0) {
			if (f->status < 0) {
				f->status = ING_GRPC_UNAVAILABLE;
				snprintf(f->msg, sizeof(f->msg), "connection to %s lost: %s", c->server, strerror(-rc));
			}
			break;
		}
		if (f->status < 0 && ing_now_ns() - f->last_ns > (uint64_t)c->timeout_ms * 1000000ull) {
			ing_grpc_ccall_cancel(cc);
			f->status = ING_GRPC_DEADLINE_EXCEEDED;
			snprintf(f->msg, sizeof(f->msg), "nothing from the node for %u s (--timeout)",
				 c->timeout_ms / 1000);
		}
	}
	ing_grpc_chan_close(ch);
	explicit_bzero(bearer, sizeof(bearer));
	if (f->status != 0 || f->write_failed)
		return 1;
	if (f->got != f->length) {
		snprintf(f->msg, sizeof(f->msg), "the call ended after %" PRIu64 " of %" PRIu64 " bytes", f->got,
			 f->length);
		return 1;
	}
	if (f->crc != f->crc_want) {
		f->status = ING_GRPC_DATA_LOSS;
		snprintf(f->msg, sizeof(f->msg), "the bytes received have crc32c 0x%08x, the node's catalog "
			 "0x%08x", f->crc, f->crc_want);
		return 1;
	}
	if (fsync(fd) != 0 && errno != EINVAL && errno != EROFS) {
		snprintf(f->msg, sizeof(f->msg), "fsync of the output: %s", strerror(errno));
		return 1;
	}
	return 0;
}

/* --config FILE: ingestd's own table; the listen address on this host, TLS, the token */
static int read_ingestd_config(C *c)
{
	struct ing_ingestd_opts io;

	ing_ingestd_opts_init(&io);
	if (ing_ingestd_opts_read_config_as(cli.prog, c->config, &io))
		return ING_EXIT_USAGE;
	if (ing_cli_local_target(io.listen, c->server_buf, sizeof(c->server_buf)))
		return ing_cli_usage_error(&cli, "%s: listen '%s' has no port", c->config, io.listen);
	c->server = c->server_buf;
	c->tls = io.tls_cert != NULL;
	c->auth_token_file = io.auth_token_file;
	return 0;
}

int main(int argc, char **argv)
{
	static const char *const first[] = { "config", NULL };
	C c;
	int argi;
	char token[ING_AUTH_TOKEN_MAX + 1] = "", why[PATH_MAX + 96];

	ing_log_set_default_level(ING_LOG_WARN);
	defaults(&c);
	if (!ing_cli_parse_only(&cli, argc, argv, &c, first) && c.config && read_ingestd_config(&c))
		return ING_EXIT_USAGE;
	int rc = ing_cli_parse(&cli, argc, argv, &c, &argi);
	if (rc)
		return rc == 1 ? ING_EXIT_OK : rc;
	if (!c.frame)
		return ing_cli_usage_error(&cli, "--frame ID is required");
	if (ing_id_check(c.frame, strlen(c.frame)))
		return ing_cli_usage_error(&cli, "--frame: a frame id is " ING_ID_RULE);
	if (c.wafer && *c.wafer && ing_id_check(c.wafer, strlen(c.wafer)))
		return ing_cli_usage_error(&cli, "--wafer: a wafer id is " ING_ID_RULE);
	if (!!c.tls_cert != !!c.tls_key)
		return ing_cli_usage_error(&cli, "--tls-cert and --tls-key go together");
	if (c.tls_cert && !c.tls_ca)
		return ing_cli_usage_error(&cli, "--tls-cert needs --tls-ca (mTLS is TLS)");
	if (c.auth_token_file && ing_token_file_read(c.auth_token_file, token, sizeof(token), why, sizeof(why)))
		return ing_cli_usage_error(&cli, "--auth-token-file: '%s': %s", c.auth_token_file, why);
	if (!c.out && isatty(STDOUT_FILENO))
		return ing_cli_usage_error(&cli, "the frame is binary: give --out PATH or redirect stdout");

	/* a file: write a temp file beside it, rename once checked; stdout: as it comes */
	char tmp[PATH_MAX];
	int fd = STDOUT_FILENO;
	if (c.out) {
		if ((size_t)snprintf(tmp, sizeof(tmp), "%s.part.%d", c.out, (int)getpid()) >= sizeof(tmp))
			return ing_cli_usage_error(&cli, "--out: path too long");
		fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (fd < 0) {
			fprintf(stderr, "ingest-get: --out: cannot create %s: %s\n", tmp, strerror(errno));
			return ING_EXIT_FAILURE;
		}
	}
	uint64_t t0 = ing_now_ns();
	struct fetch f;
	rc = fetch_once(&c, token[0] ? token : NULL, fd, c.source, &f);
	/* a local copy that fails its check, and the store has the frame: read it from there */
	if (rc && c.source == H3000__FRAME_SOURCE__SOURCE_ANY && f.status == ING_GRPC_DATA_LOSS &&
	    f.source == H3000__FRAME_SOURCE__SOURCE_LOCAL && !strcmp(f.location, "both") && c.out) {
		fprintf(stderr, "ingest-get: the local copy failed its check (%s); reading the object store's\n",
			f.msg);
		rc = fetch_once(&c, token[0] ? token : NULL, fd, H3000__FRAME_SOURCE__SOURCE_STORE, &f);
	}
	explicit_bzero(token, sizeof(token));
	double secs = (double)(ing_now_ns() - t0) / 1e9;
	if (rc) {
		if (c.out) {
			close(fd);
			unlink(tmp);
		}
		fprintf(stderr, "ingest-get: frame %s of wafer %s: %s: %s%s\n", c.frame,
			c.wafer && *c.wafer ? c.wafer : ING_DEFAULT_WAFER,
			f.status > 0 ? status_name(f.status) : "failed", f.msg,
			c.out ? "" : " (discard what was written to stdout)");
		return ING_EXIT_FAILURE;
	}
	if (c.out) {
		if (close(fd) != 0 || rename(tmp, c.out) != 0) {
			fprintf(stderr, "ingest-get: --out %s: %s\n", c.out, strerror(errno));
			unlink(tmp);
			return ING_EXIT_FAILURE;
		}
	}
	if (!c.quiet)
		fprintf(stderr, "ingest-get: frame %s of wafer %s: %" PRIu64 " bytes from the %s (location %s), "
			"crc32c 0x%08x checked, %.1f MB/s%s%s\n", c.frame,
			c.wafer && *c.wafer ? c.wafer : ING_DEFAULT_WAFER, f.got,
			f.source == H3000__FRAME_SOURCE__SOURCE_STORE ? "object store" : "local copy", f.location,
			f.crc, secs > 0 ? (double)f.got / 1e6 / secs : 0.0, c.out ? " -> " : "",
			c.out ? c.out : "");
	return ING_EXIT_OK;
}
