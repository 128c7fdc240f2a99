/* SPDX-License-Identifier: Apache-2.0 */
/*
 * grpc_testcli - our gRPC client (control/net/grpc_client.c) against a stock server:
 * tests/func/grpc_client_interop.py starts a grpcio server with the test.Echo methods and
 * runs this program against it. One line per check; exit status = number of failures.
 *
 *   grpc_testcli HOST:PORT
 */
#include "control/net/grpc.h"
#include "common/clock.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIB (1024u * 1024)

static int failures;

static void check(const char *name, int ok, const char *detail)
{
	printf("%s %s%s%s\n", ok ? "ok  " : "FAIL", name, detail && *detail ? ": " : "",
	       detail ? detail : "");
	fflush(stdout);
	if (!ok)
		failures++;
}

struct st {
	int closed, status;
	char msg[256];
	unsigned nmsgs, bad;
	uint64_t bytes;
	uint8_t last[64];
	size_t last_len;
};

static void on_msg(struct ing_grpc_ccall *cc, void *arg, const uint8_t *m, size_t len)
{
	struct st *s = arg;
	(void)cc;
	size_t k = len < sizeof(s->last) - 1 ? len : sizeof(s->last) - 1;
	memcpy(s->last, m, k);
	s->last[k] = 0;
	s->last_len = len;
	s->bytes += len;
	s->nmsgs++;
}

static void on_bidi(struct ing_grpc_ccall *cc, void *arg, const uint8_t *m, size_t len)
{
	struct st *s = arg;
	(void)cc;
	unsigned i = s->nmsgs++;
	if (len != (i * 37u) % 3000u)
		s->bad++;
	else
		for (size_t k = 0; k < len; k++)
			if (m[k] != (uint8_t)(i + k)) {
				s->bad++;
				break;
			}
}

static void on_close(struct ing_grpc_ccall *cc, void *arg, int status, const char *message)
{
	struct st *s = arg;
	(void)cc;
	s->closed = 1;
	s->status = status;
	snprintf(s->msg, sizeof(s->msg), "%s", message);
}

static int wait_closed(struct ing_grpc_chan *ch, struct st *s, int ms)
{
	uint64_t end = ing_now_ns() + (uint64_t)ms * 1000000ull;
	while (!s->closed && ing_now_ns() < end)
		if (ing_grpc_chan_poll(ch, 20) < 0)
			break;
	return s->closed;
}

static void done_cb(void *arg)
{
	(*(unsigned *)arg)++;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s HOST:PORT\n", argv[0]);
		return 2;
	}
	struct ing_grpc_chan_opts o;
	ing_grpc_chan_opts_init(&o);
	o.target = argv[1];
	char err[256], d[320];
	struct ing_grpc_chan *ch = ing_grpc_chan_connect(&o, err, sizeof(err));
	check("connect", ch != NULL, err);
	if (!ch)
		return 1;

	uint8_t *resp = NULL;
	size_t rl = 0;
	int st = ing_grpc_unary(ch, "/test.Echo/Unary", NULL, (const uint8_t *)"hello", 5, &resp, &rl,
				5000, err, sizeof(err));
	check("unary echo", st == 0 && rl == 5 && !memcmp(resp, "hello", 5), err);
	free(resp);

	uint8_t *big = malloc(MIB);
	for (size_t i = 0; i < MIB; i++)
		big[i] = (uint8_t)(i * 11);
	st = ing_grpc_unary(ch, "/test.Echo/Unary", NULL, big, MIB, &resp, &rl, 10000, err,
			    sizeof(err));
	check("1 MiB echo", st == 0 && rl == MIB && !memcmp(resp, big, MIB), err);
	free(resp);

	st = ing_grpc_unary(ch, "/x/y", NULL, NULL, 0, &resp, &rl, 5000, err, sizeof(err));
	snprintf(d, sizeof(d), "status %d (%s)", st, err);
	check("unknown method -> UNIMPLEMENTED", st == ING_GRPC_UNIMPLEMENTED, d);

	st = ing_grpc_unary(ch, "/test.Echo/Fail", NULL, NULL, 0, &resp, &rl, 5000, err, sizeof(err));
	snprintf(d, sizeof(d), "status %d message '%s'", st, err);
	check("status + percent-encoded message", st == ING_GRPC_INVALID_ARGUMENT &&
	      !strcmp(err, "bad 100% \xc3\xa9\xe2\x9c\x93 input"), d);

	uint64_t t0 = ing_now_ns();
	st = ing_grpc_unary(ch, "/test.Echo/Slow", NULL, (const uint8_t *)"z", 1, &resp, &rl, 300,
			    err, sizeof(err));
	double dt = (double)(ing_now_ns() - t0) / 1e9;
	snprintf(d, sizeof(d), "status %d after %.2f s", st, dt);
	check("deadline -> DEADLINE_EXCEEDED", st == ING_GRPC_DEADLINE_EXCEEDED && dt < 2.5, d);

	/* Bidi: 1000 messages echoed in order. */
	struct st b = { 0 };
	struct ing_grpc_ccall_cbs cbs = { on_bidi, on_close, &b };
	struct ing_grpc_ccall *cc = ing_grpc_chan_call(ch, "/test.Echo/Bidi", NULL, 30000, &cbs);
	uint8_t buf[3000];
	for (unsigned i = 0; cc && i < 1000;) {
		size_t len = (i * 37u) % 3000u;
		for (size_t k = 0; k < len; k++)
			buf[k] = (uint8_t)(i + k);
		int rc = ing_grpc_ccall_send(cc, buf, len, i == 999);
		if (rc == -ENOBUFS) {
			ing_grpc_chan_poll(ch, 10);
			continue;
		}
		if (rc)
			break;
		i++;
	}
	wait_closed(ch, &b, 30000);
	snprintf(d, sizeof(d), "status %d, %u back, %u bad", b.status, b.nmsgs, b.bad);
	check("bidi 1000 messages", b.closed && b.status == 0 && b.nmsgs == 1000 && !b.bad, d);

	/* Client streaming, zero-copy bodies, through the server's 16 KiB frames. */
	struct st k = { 0 };
	struct ing_grpc_ccall_cbs kcbs = { on_msg, on_close, &k };
	cc = ing_grpc_chan_call(ch, "/test.Echo/Sink", NULL, 60000, &kcbs);
	unsigned sent = 0, done = 0, total = 128;
	const uint8_t head[3] = { 0x0a, 0x01, 0x41 };
	t0 = ing_now_ns();
	uint64_t end = t0 + 60000000000ull;
	while (cc && !k.closed && ing_now_ns() < end) {
		while (sent < total && ing_grpc_ccall_send_zc(cc, head, 3, big, MIB, sent == total - 1,
							       done_cb, &done) == 0)
			sent++;
		if (ing_grpc_chan_poll(ch, 50) < 0)
			break;
	}
	dt = (double)(ing_now_ns() - t0) / 1e9;
	char want[64];
	snprintf(want, sizeof(want), "msgs=%u bytes=%llu", total,
		 (unsigned long long)total * (MIB + 3));
	snprintf(d, sizeof(d), "status %d '%s', %u done, %.0f MiB/s", k.status, k.last, done,
		 total / dt);
	check("client streaming 128 x 1 MiB (zero-copy)",
	      k.closed && k.status == 0 && !strcmp((char *)k.last, want) && done == total, d);

	/* Server streaming. */
	struct st m = { 0 };
	struct ing_grpc_ccall_cbs mcbs = { on_msg, on_close, &m };
	cc = ing_grpc_chan_call(ch, "/test.Echo/Many", NULL, 30000, &mcbs);
	if (cc)
		ing_grpc_ccall_send(cc, (const uint8_t *)"300 65536", 9, true);
	wait_closed(ch, &m, 30000);
	snprintf(d, sizeof(d), "status %d, %u msgs, %llu bytes", m.status, m.nmsgs,
		 (unsigned long long)m.bytes);
	check("server streaming 300 x 64 KiB", m.closed && m.status == 0 && m.nmsgs == 300 &&
	      m.bytes == 300ull * 65536, d);

	/* Cancel: on_close(CANCELLED) at once, the connection stays usable. */
	struct st c = { 0 };
	struct ing_grpc_ccall_cbs ccbs = { on_msg, on_close, &c };
	cc = ing_grpc_chan_call(ch, "/test.Echo/Slow", NULL, 0, &ccbs);
	if (cc) {
		ing_grpc_ccall_send(cc, (const uint8_t *)"a", 1, false);
		ing_grpc_chan_poll(ch, 50);
		ing_grpc_ccall_cancel(cc);
	}
	st = ing_grpc_unary(ch, "/test.Echo/Unary", NULL, (const uint8_t *)"k", 1, &resp, &rl, 5000,
			    err, sizeof(err));
	free(resp);
	check("cancel", c.closed && c.status == ING_GRPC_CANCELLED && st == 0, err);

	free(big);
	ing_grpc_chan_close(ch);
	printf("%d failure(s)\n", failures);
	return failures;
}
