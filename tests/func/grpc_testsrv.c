/* SPDX-License-Identifier: Apache-2.0 */
/*
 * grpc_testsrv - the gRPC transport (control/net/grpc_server.c) with test methods only, for
 * interop tests with stock clients (tests/func/grpc_interop.py drives it with grpcio).
 *
 *   grpc_testsrv [--listen 127.0.0.1:0] [--tls CERT KEY] [--max-seconds N]
 *
 * Prints "PORT <n>" on stdout once listening. SIGTERM/SIGINT or stdin EOF: GOAWAY, let
 * calls finish (bounded), exit 0. Methods (package test.Echo):
 *   Unary   echo the request (or the x-echo-md header value when present)
 *   Bidi    echo every message, finish OK at half-close
 *   Sink    streaming hooks; at half-close answer "msgs=<n> bytes=<n>"
 *   Many    request "<count> <size>": answer count messages of size bytes (server
 *           streaming through the bounded send buffer and on_writable)
 *   Hold    accept and never answer; Slow: never answer (for deadlines)
 *   Stats   "hold_started=<n> hold_close=<status> slow_close=<status> calls=<n>"
 */
#include "control/net/grpc_server.h"
#include "control/net/loop.h"
#include "common/clock.h"
#include "common/log.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct ing_loop *g_loop;
static bool g_term;   /* SIGTERM, SIGINT or stdin EOF */
static int hold_started, hold_close = -1, slow_close = -1;

/* SIGTERM/SIGINT through a signalfd on the loop (as ingestd): the loop sleeps on its fds */
static void on_signal(void *arg, uint32_t ev)
{
	struct signalfd_siginfo si;
	(void)ev;
	while (read(*(int *)arg, &si, sizeof(si)) == (ssize_t)sizeof(si))
		g_term = 1;
}

static void noop_close(struct ing_grpc_call *c, int status)
{
	(void)c;
	(void)status;
}

static int unary_msg(struct ing_grpc_call *c, const uint8_t *msg, size_t len)
{
	const char *md = ing_grpc_call_header(c, "x-echo-md");
	int rc = md ? ing_grpc_call_send(c, (const uint8_t *)md, strlen(md))
		    : ing_grpc_call_send(c, msg, len);
	if (rc < 0)
		return ING_GRPC_INTERNAL;
	ing_grpc_call_finish(c, ING_GRPC_OK, NULL);
	return 0;
}

static int bidi_msg(struct ing_grpc_call *c, const uint8_t *msg, size_t len)
{
	return ing_grpc_call_send(c, msg, len) < 0 ? ING_GRPC_RESOURCE_EXHAUSTED : 0;
}

static void finish_ok(struct ing_grpc_call *c)
{
	ing_grpc_call_finish(c, ING_GRPC_OK, NULL);
}

struct sink {
	uint64_t bytes, msgs;
};

static int sink_start(struct ing_grpc_call *c, void *ctx)
{
	(void)ctx;
	struct sink *k = calloc(1, sizeof(*k));
	if (!k)
		return ING_GRPC_RESOURCE_EXHAUSTED;
	ing_grpc_call_set_user(c, k);
	return ING_GRPC_OK;
}

static int sink_data(struct ing_grpc_call *c, const uint8_t *p, size_t n)
{
	(void)p;
	((struct sink *)ing_grpc_call_user(c))->bytes += n;
	return 0;
}

static int sink_end(struct ing_grpc_call *c)
{
	((struct sink *)ing_grpc_call_user(c))->msgs++;
	return 0;
}

static void sink_half_close(struct ing_grpc_call *c)
{
	struct sink *k = ing_grpc_call_user(c);
	char b[96];
	int n = snprintf(b, sizeof(b), "msgs=%llu bytes=%llu", (unsigned long long)k->msgs,
			 (unsigned long long)k->bytes);
	ing_grpc_call_send(c, (const uint8_t *)b, (size_t)n);
	ing_grpc_call_finish(c, ING_GRPC_OK, NULL);
}

static void free_user_close(struct ing_grpc_call *c, int status)
{
	(void)status;
	free(ing_grpc_call_user(c));
}

struct many {
	unsigned left;
	size_t size;
	uint8_t *buf;
};

static void many_pump(struct ing_grpc_call *c)
{
	struct many *m = ing_grpc_call_user(c);
	while (m->left) {
		m->buf[0] = (uint8_t)m->left;
		int rc = ing_grpc_call_send(c, m->buf, m->size);
		if (rc == -ENOBUFS)
			return;   /* on_writable brings us back */
		if (rc < 0)
			return;
		m->left--;
	}
	ing_grpc_call_finish(c, ING_GRPC_OK, NULL);
}

static int many_msg(struct ing_grpc_call *c, const uint8_t *msg, size_t len)
{
	char req[64];
	unsigned count = 0;
	size_t size = 0;
	if (ing_grpc_call_user(c) || len >= sizeof(req))
		return ING_GRPC_INVALID_ARGUMENT;
	memcpy(req, msg, len);
	req[len] = '\0';
	if (sscanf(req, "%u %zu", &count, &size) != 2 || size == 0 || size > (8u << 20))
		return ING_GRPC_INVALID_ARGUMENT;
	struct many *m = calloc(1, sizeof(*m));
	if (!m || !(m->buf = calloc(1, size))) {
		free(m);
		return ING_GRPC_RESOURCE_EXHAUSTED;
	}
	m->left = count;
	m->size = size;
	ing_grpc_call_set_user(c, m);
	many_pump(c);
	return 0;
}

static void many_close(struct ing_grpc_call *c, int status)
{
	struct many *m = ing_grpc_call_user(c);
	(void)status;
	if (m)
		free(m->buf);
	free(m);
}

static int hold_start(struct ing_grpc_call *c, void *ctx)
{
	(void)c;
	(void)ctx;
	hold_started++;
	return ING_GRPC_OK;
}

static int ignore_msg(struct ing_grpc_call *c, const uint8_t *msg, size_t len)
{
	(void)c;
	(void)msg;
	(void)len;
	return 0;
}

static void hold_closed(struct ing_grpc_call *c, int status)
{
	(void)c;
	hold_close = status;
}

static void slow_closed(struct ing_grpc_call *c, int status)
{
	(void)c;
	slow_close = status;
}

static struct ing_grpc_server *g_srv;

static int stats_msg(struct ing_grpc_call *c, const uint8_t *msg, size_t len)
{
	(void)msg;
	(void)len;
	char b[160];
	int n = snprintf(b, sizeof(b), "hold_started=%d hold_close=%d slow_close=%d calls=%u",
			 hold_started, hold_close, slow_close, ing_grpc_server_ncalls(g_srv));
	ing_grpc_call_send(c, (const uint8_t *)b, (size_t)n);
	ing_grpc_call_finish(c, ING_GRPC_OK, NULL);
	return 0;
}

static const struct ing_grpc_method methods[] = {
	{ .path = "/test.Echo/Unary", .on_message = unary_msg, .on_close = noop_close },
	{ .path = "/test.Echo/Bidi", .on_message = bidi_msg, .on_half_close = finish_ok,
	  .on_close = noop_close },
	{ .path = "/test.Echo/Sink", .on_start = sink_start, .on_msg_data = sink_data,
	  .on_msg_end = sink_end, .on_half_close = sink_half_close, .on_close = free_user_close },
	{ .path = "/test.Echo/Many", .on_message = many_msg, .on_writable = many_pump,
	  .on_close = many_close },
	{ .path = "/test.Echo/Hold", .on_start = hold_start, .on_message = ignore_msg,
	  .on_close = hold_closed },
	{ .path = "/test.Echo/Slow", .on_message = ignore_msg, .on_close = slow_closed },
	{ .path = "/test.Echo/Stats", .on_message = stats_msg, .on_close = noop_close },
};

static void on_stdin(void *arg, uint32_t ev)
{
	char b[256];
	(void)arg;
	(void)ev;
	ssize_t n = read(0, b, sizeof(b));
	if (n <= 0) {
		g_term = 1;
		ing_loop_del_fd(g_loop, 0);
	}
}

int main(int argc, char **argv)
{
	struct ing_grpc_server_opts o;
	ing_grpc_server_opts_init(&o);
	o.listen = "127.0.0.1:0";
	int max_s = 300;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--listen") && i + 1 < argc) {
			o.listen = argv[++i];
		} else if (!strcmp(argv[i], "--tls") && i + 2 < argc) {
			o.tls_cert = argv[++i];
			o.tls_key = argv[++i];
		} else if (!strcmp(argv[i], "--max-seconds") && i + 1 < argc) {
			max_s = atoi(argv[++i]);
		} else {
			fprintf(stderr, "usage: %s [--listen H:P] [--tls CERT KEY] [--max-seconds N]\n",
				argv[0]);
			return 2;
		}
	}
	g_loop = ing_loop_create();
	if (!g_loop)
		return 1;
	sigset_t sigs;
	static int sfd;
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	sigprocmask(SIG_BLOCK, &sigs, NULL);
	sfd = signalfd(-1, &sigs, SFD_NONBLOCK | SFD_CLOEXEC);
	if (sfd < 0 || ing_loop_add_fd(g_loop, sfd, EPOLLIN, on_signal, &sfd)) {
		perror("grpc_testsrv: signalfd");
		return 1;
	}
	signal(SIGPIPE, SIG_IGN);
	g_srv = ing_grpc_server_create(g_loop, &o, methods, sizeof(methods) / sizeof(methods[0]));
	if (!g_srv) {
		ing_loop_destroy(g_loop);
		return 1;
	}
	(void)ing_loop_add_fd(g_loop, 0, EPOLLIN, on_stdin, NULL);
	printf("PORT %d\n", ing_grpc_server_port(g_srv));
	fflush(stdout);

	uint64_t end = ing_now_ns() + (uint64_t)max_s * 1000000000ull;
	while (!g_term && ing_now_ns() < end)
		ing_loop_run_once(g_loop, 200);
	/* Graceful: GOAWAY, calls in progress may finish, bounded. */
	ing_grpc_server_shutdown(g_srv);
	uint64_t grace = ing_now_ns() + 3000000000ull;
	while ((ing_grpc_server_ncalls(g_srv) || !ing_grpc_server_flushed(g_srv)) &&
	       ing_now_ns() < grace)
		ing_loop_run_once(g_loop, 50);
	for (int i = 0; i < 5; i++)
		ing_loop_run_once(g_loop, 20);   /* let the GOAWAY out */
	ing_grpc_server_destroy(g_srv);
	ing_loop_destroy(g_loop);
	return 0;
}
