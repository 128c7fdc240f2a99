/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Loopback tests for the gRPC transport: control/net/grpc_server.c on an ing_loop in its own
 * thread, control/net/grpc_client.c in the test thread, over 127.0.0.1 (port picked by the
 * kernel). Server-side observations cross threads through atomics only.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "control/net/grpc_server.h"
#include "control/net/loop.h"
#include "common/clock.h"
#include "health.pb-c.h"

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <unistd.h>

#define MS 1000000ull
#define MAX_RECV (2u * 1024 * 1024)
#define MIB (1024u * 1024)

/* Deadlines and fill-the-window periods stretch in slow builds: the ThreadSanitizer
 * tree runs these tests with ING_TEST_TIME_SCALE=10. */
static uint64_t time_scaled(uint64_t ms)
{
	const char *e = getenv("ING_TEST_TIME_SCALE");
	long k = e ? strtol(e, NULL, 10) : 1;
	return ms * (uint64_t)(k > 1 ? k : 1);
}

#define LOAD(x) __atomic_load_n(&(x), __ATOMIC_ACQUIRE)
#define STORE(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELEASE)
#define ADD(x, v) __atomic_add_fetch(&(x), (v), __ATOMIC_ACQ_REL)

struct srv {
	struct ing_loop *loop;
	struct ing_grpc_server *s;
	pthread_t th;
	int stop;
	int port;
	/* observations (atomic) */
	int hold_started;
	int hold_status;
	int slow_status;
	int resume_req;
	uint64_t paused_bytes;
	uint64_t sink_bytes;
	uint32_t sink_msgs;
	int sink_bad;
	int enobufs;
	int shutdown_req;
	int many_status;
	int bell;            /* eventfd on the loop: the test thread's requests (ring) */
	/* loop thread only */
	struct ing_grpc_server *tls;
	char cert[64], key[64];
	struct ing_grpc_call *paused_call;
	struct ing_timer resume_timer;
};

static struct srv S;

/* ---------------------------------------------------------------- server methods */

static int echo_on_message(struct ing_grpc_call *c, const uint8_t *msg, size_t len)
{
	const char *md = ing_grpc_call_header(c, "x-echo-md");
	int rc = md ? ing_grpc_call_send(c, (const uint8_t *)md, strlen(md))
		    : ing_grpc_call_send(c, msg, len);
	if (rc < 0)
		return ING_GRPC_INTERNAL;
	ing_grpc_call_finish(c, ING_GRPC_OK, NULL);
	return 0;
}

static int bidi_on_message(struct ing_grpc_call *c, const uint8_t *msg, size_t len)
{
	return ing_grpc_call_send(c, msg, len) < 0 ? ING_GRPC_RESOURCE_EXHAUSTED : 0;
}

static void finish_on_half_close(struct ing_grpc_call *c)
{
	ing_grpc_call_finish(c, ING_GRPC_OK, NULL);
}

static void noop_close(struct ing_grpc_call *c, int status)
{
	(void)c;
	(void)status;
}

/* Streaming sink: counts bytes and messages, answers {msgs, bytes} at half-close. */
struct sink {
	uint64_t bytes;
	uint32_t msgs;
	size_t cur_len, cur_got;
	bool paused_kind;
};

static int sink_start(struct ing_grpc_call *c, void *ctx)
{
	struct sink *k = calloc(1, sizeof(*k));
	if (!k)
		return ING_GRPC_RESOURCE_EXHAUSTED;
	k->paused_kind = ctx != NULL;
	ing_grpc_call_set_user(c, k);
	if (k->paused_kind) {
		S.paused_call = c;
		ing_grpc_call_pause(c);
	}
	return ING_GRPC_OK;
}

static int sink_begin(struct ing_grpc_call *c, size_t len)
{
	struct sink *k = ing_grpc_call_user(c);
	k->cur_len = len;
	k->cur_got = 0;
	return 0;
}

static int sink_data(struct ing_grpc_call *c, const uint8_t *p, size_t n)
{
	struct sink *k = ing_grpc_call_user(c);
	(void)p;
	k->cur_got += n;
	k->bytes += n;
	if (k->paused_kind)
		ADD(S.paused_bytes, n);
	return 0;
}

static void resume_cb(void *arg)
{
	ing_grpc_call_resume(arg);
}

static int sink_end(struct ing_grpc_call *c)
{
	struct sink *k = ing_grpc_call_user(c);
	if (k->cur_got != k->cur_len)
		ADD(S.sink_bad, 1);
	k->msgs++;
	/* Pause from inside a delivery callback; resume from a timer 100 ms later. */
	if (k->paused_kind && k->msgs == 20) {
		ing_grpc_call_pause(c);
		ing_timer_init(&S.resume_timer, resume_cb, c);
		ing_timer_arm(S.loop, &S.resume_timer, ing_now_ns() + 100 * MS);
	}
	return 0;
}

static void sink_half_close(struct ing_grpc_call *c)
{
	struct sink *k = ing_grpc_call_user(c);
	uint8_t b[12];
	memcpy(b, &k->msgs, 4);
	memcpy(b + 4, &k->bytes, 8);
	ing_grpc_call_send(c, b, sizeof(b));
	ing_grpc_call_finish(c, ING_GRPC_OK, NULL);
}

static void sink_close(struct ing_grpc_call *c, int status)
{
	struct sink *k = ing_grpc_call_user(c);
	(void)status;
	if (k->paused_kind) {
		S.paused_call = NULL;
		ing_timer_cancel(S.loop, &S.resume_timer);
	}
	STORE(S.sink_bytes, k->bytes);
	STORE(S.sink_msgs, k->msgs);
	free(k);
}

static int hold_start(struct ing_grpc_call *c, void *ctx)
{
	(void)c;
	(void)ctx;
	ADD(S.hold_started, 1);
	return ING_GRPC_OK;
}

static int hold_on_message(struct ing_grpc_call *c, const uint8_t *msg, size_t len)
{
	(void)c;
	(void)msg;
	(void)len;
	return 0;
}

static void hold_close(struct ing_grpc_call *c, int status)
{
	(void)c;
	STORE(S.hold_status, status);
}

static void slow_close(struct ing_grpc_call *c, int status)
{
	(void)c;
	STORE(S.slow_status, status);
}

static int reject_start(struct ing_grpc_call *c, void *ctx)
{
	(void)c;
	(void)ctx;
	return ING_GRPC_PERMISSION_DENIED;
}

/* Server streaming: "count size" -> count messages of size bytes, through on_writable. */
struct many {
	unsigned left, seq;
	size_t size;
	uint8_t *buf;
};

static void many_pump(struct ing_grpc_call *c)
{
	struct many *m = ing_grpc_call_user(c);
	while (m->left) {
		memset(m->buf, (int)(m->seq & 0xff), m->size);
		int rc = ing_grpc_call_send(c, m->buf, m->size);
		if (rc == -ENOBUFS) {
			ADD(S.enobufs, 1);
			return;
		}
		if (rc < 0)
			return;
		m->left--;
		m->seq++;
	}
	ing_grpc_call_finish(c, ING_GRPC_OK, NULL);
}

static int many_msg(struct ing_grpc_call *c, const uint8_t *msg, size_t len)
{
	char req[32];
	unsigned count;
	size_t size;
	if (ing_grpc_call_user(c) || len >= sizeof(req))
		return ING_GRPC_INVALID_ARGUMENT;
	memcpy(req, msg, len);
	req[len] = '\0';
	if (sscanf(req, "%u %zu", &count, &size) != 2 || !size)
		return ING_GRPC_INVALID_ARGUMENT;
	struct many *m = calloc(1, sizeof(*m));
	if (!m || !(m->buf = malloc(size))) {
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
	STORE(S.many_status, status);
	if (m)
		free(m->buf);
	free(m);
}

static const struct ing_grpc_method methods[] = {
	{ .path = "/test.Echo/Many", .on_message = many_msg, .on_writable = many_pump,
	  .on_close = many_close },
	{ .path = "/test.Echo/Unary", .on_message = echo_on_message, .on_close = noop_close },
	{ .path = "/test.Echo/Bidi", .on_message = bidi_on_message,
	  .on_half_close = finish_on_half_close, .on_close = noop_close },
	{ .path = "/test.Echo/Sink", .on_start = sink_start, .on_msg_begin = sink_begin,
	  .on_msg_data = sink_data, .on_msg_end = sink_end, .on_half_close = sink_half_close,
	  .on_close = sink_close },
	{ .path = "/test.Echo/Paused", .ctx = (void *)1, .on_start = sink_start,
	  .on_msg_begin = sink_begin, .on_msg_data = sink_data, .on_msg_end = sink_end,
	  .on_half_close = sink_half_close, .on_close = sink_close },
	{ .path = "/test.Echo/Hold", .on_start = hold_start, .on_message = hold_on_message,
	  .on_close = hold_close },
	{ .path = "/test.Echo/Slow", .on_message = hold_on_message, .on_close = slow_close },
	{ .path = "/test.Echo/Reject", .on_start = reject_start, .on_close = noop_close },
};

/* The loop thread reads the test thread's requests from its bell (an fd on its loop, as
 * the node's control thread reads its mailbox), never from a loop wake-up of its own. */
static void on_bell(void *arg, uint32_t ev)
{
	uint64_t v;
	(void)arg;
	(void)ev;
	if (read(S.bell, &v, sizeof(v)) < 0)
		return;
	if (__atomic_exchange_n(&S.resume_req, 0, __ATOMIC_ACQ_REL) && S.paused_call)
		ing_grpc_call_resume(S.paused_call);
	if (__atomic_exchange_n(&S.shutdown_req, 0, __ATOMIC_ACQ_REL))
		ing_grpc_server_shutdown(S.s);
}

/* Any thread: have the loop thread look at the requests now. */
static void ring(void)
{
	uint64_t one = 1;
	if (write(S.bell, &one, sizeof(one)) < 0)
		fail_msg("eventfd write: %s", strerror(errno));
}

static void *srv_thread(void *arg)
{
	(void)arg;
	while (!LOAD(S.stop))
		ing_loop_run_once(S.loop, 100);
	return NULL;
}

/* A throwaway self-signed P-256 certificate for 127.0.0.1, written to temp files. */
static int make_cert(const char *certp, const char *keyp)
{
	int ok = -1;
	EVP_PKEY *pk = EVP_EC_gen("P-256");
	X509 *x = X509_new();
	FILE *f = NULL;
	if (!pk || !x)
		goto out;
	X509_set_version(x, 2);
	ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
	X509_gmtime_adj(X509_getm_notBefore(x), -60);
	X509_gmtime_adj(X509_getm_notAfter(x), 3600);
	X509_set_pubkey(x, pk);
	X509_NAME *n = X509_get_subject_name(x);
	X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC, (const unsigned char *)"127.0.0.1", -1,
				   -1, 0);
	X509_set_issuer_name(x, n);
	X509V3_CTX v3;
	X509V3_set_ctx_nodb(&v3);
	X509V3_set_ctx(&v3, x, x, NULL, NULL, 0);
	X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, &v3, NID_subject_alt_name, "IP:127.0.0.1");
	if (!ext)
		goto out;
	X509_add_ext(x, ext, -1);
	X509_EXTENSION_free(ext);
	if (!X509_sign(x, pk, EVP_sha256()))
		goto out;
	if (!(f = fopen(certp, "w")) || !PEM_write_X509(f, x))
		goto out;
	fclose(f);
	if (!(f = fopen(keyp, "w")) || !PEM_write_PrivateKey(f, pk, NULL, NULL, 0, NULL, NULL))
		goto out;
	ok = 0;
out:
	if (f)
		fclose(f);
	X509_free(x);
	EVP_PKEY_free(pk);
	return ok;
}

static int setup(void **state)
{
	(void)state;
	memset(&S, 0, sizeof(S));
	S.hold_status = S.slow_status = -1;
	S.loop = ing_loop_create();
	S.bell = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (!S.loop || S.bell < 0 || ing_loop_add_fd(S.loop, S.bell, EPOLLIN, on_bell, NULL))
		return -1;
	if (!S.loop)
		return -1;
	struct ing_grpc_server_opts o;
	ing_grpc_server_opts_init(&o);
	o.listen = "127.0.0.1:0";
	o.max_recv_msg = MAX_RECV;
	S.s = ing_grpc_server_create(S.loop, &o, methods, sizeof(methods) / sizeof(methods[0]));
	if (!S.s)
		return -1;
	S.port = ing_grpc_server_port(S.s);
	snprintf(S.cert, sizeof(S.cert), "/tmp/ing-grpc-test-%d-cert.pem", (int)getpid());
	snprintf(S.key, sizeof(S.key), "/tmp/ing-grpc-test-%d-key.pem", (int)getpid());
	if (make_cert(S.cert, S.key) < 0)
		return -1;
	o.tls_cert = S.cert;
	o.tls_key = S.key;
	S.tls = ing_grpc_server_create(S.loop, &o, methods, sizeof(methods) / sizeof(methods[0]));
	if (!S.tls)
		return -1;
	return pthread_create(&S.th, NULL, srv_thread, NULL) ? -1 : 0;
}

static int teardown(void **state)
{
	(void)state;
	STORE(S.stop, 1);
	ring();
	pthread_join(S.th, NULL);
	ing_grpc_server_destroy(S.s);
	ing_grpc_server_destroy(S.tls);
	ing_loop_del_fd(S.loop, S.bell);
	close(S.bell);
	ing_loop_destroy(S.loop);
	unlink(S.cert);
	unlink(S.key);
	return 0;
}

/* ---------------------------------------------------------------- client helpers */

static struct ing_grpc_chan *connect_opts(bool tls, const char *ca)
{
	char target[64], err[256];
	snprintf(target, sizeof(target), "127.0.0.1:%d",
		 tls ? ing_grpc_server_port(S.tls) : S.port);
	struct ing_grpc_chan_opts o;
	ing_grpc_chan_opts_init(&o);
	o.target = target;
	o.tls = tls;
	o.tls_ca = ca;
	o.connect_timeout_ms = 3000;
	struct ing_grpc_chan *ch = ing_grpc_chan_connect(&o, err, sizeof(err));
	if (!ch)
		fprintf(stderr, "connect: %s\n", err);
	assert_non_null(ch);
	return ch;
}

static struct ing_grpc_chan *connect_chan(void)
{
	return connect_opts(false, NULL);
}

struct cst {
	bool closed;
	int status;
	char msg[256];
	unsigned nmsgs;
	unsigned bad;
	uint8_t last[64];
	size_t last_len;
};

static uint8_t pat(unsigned m, size_t i)
{
	return (uint8_t)(m * 13 + i * 3);
}

static size_t bidi_len(unsigned i)
{
	return (i * 37u) % 5000u;
}

static void c_on_message(struct ing_grpc_ccall *cc, void *arg, const uint8_t *msg, size_t len)
{
	struct cst *st = arg;
	(void)cc;
	size_t k = len < sizeof(st->last) ? len : sizeof(st->last);
	memcpy(st->last, msg, k);
	st->last_len = len;
	st->nmsgs++;
}

static void c_on_bidi(struct ing_grpc_ccall *cc, void *arg, const uint8_t *msg, size_t len)
{
	struct cst *st = arg;
	(void)cc;
	unsigned m = st->nmsgs++;
	if (len != bidi_len(m)) {
		st->bad++;
		return;
	}
	for (size_t i = 0; i < len; i++)
		if (msg[i] != pat(m, i)) {
			st->bad++;
			return;
		}
}

static void c_on_close(struct ing_grpc_ccall *cc, void *arg, int status, const char *message)
{
	struct cst *st = arg;
	(void)cc;
	st->closed = true;
	st->status = status;
	snprintf(st->msg, sizeof(st->msg), "%s", message);
}

/* Poll until *flag or the deadline; false on timeout. */
static bool poll_until(struct ing_grpc_chan *ch, const bool *flag, int ms)
{
	uint64_t end = ing_now_ns() + time_scaled(ms) * MS;
	while (!*flag && ing_now_ns() < end)
		if (ing_grpc_chan_poll(ch, 20) < 0)
			break;
	return *flag;
}

static bool wait_atomic_int(struct ing_grpc_chan *ch, int *v, int want, int ms)
{
	uint64_t end = ing_now_ns() + time_scaled(ms) * MS;
	while (LOAD(*v) != want && ing_now_ns() < end) {
		if (ch)
			ing_grpc_chan_poll(ch, 10);
		else
			usleep(10000);
	}
	return LOAD(*v) == want;
}

/* ---------------------------------------------------------------- tests */

static void test_unary_echo(void **state)
{
	(void)state;
	struct ing_grpc_chan *ch = connect_chan();
	uint8_t *resp;
	size_t rl;
	char err[128];
	int st = ing_grpc_unary(ch, "/test.Echo/Unary", NULL, (const uint8_t *)"hello", 5, &resp,
				&rl, 2000, err, sizeof(err));
	assert_int_equal(st, ING_GRPC_OK);
	assert_int_equal(rl, 5);
	assert_memory_equal(resp, "hello", 5);
	free(resp);
	/* Empty message, no deadline. */
	st = ing_grpc_unary(ch, "/test.Echo/Unary", NULL, NULL, 0, &resp, &rl, 0, err, sizeof(err));
	assert_int_equal(st, ING_GRPC_OK);
	assert_int_equal(rl, 0);
	free(resp);
	/* Metadata reaches the handler. */
	const char *md[] = { "x-echo-md", "metadata-value", NULL };
	st = ing_grpc_unary(ch, "/test.Echo/Unary", md, (const uint8_t *)"x", 1, &resp, &rl, 2000,
			    err, sizeof(err));
	assert_int_equal(st, ING_GRPC_OK);
	assert_int_equal(rl, 14);
	assert_memory_equal(resp, "metadata-value", 14);
	free(resp);
	ing_grpc_chan_close(ch);
}

static void test_bidi_1000(void **state)
{
	(void)state;
	struct ing_grpc_chan *ch = connect_chan();
	struct cst st = { 0 };
	struct ing_grpc_ccall_cbs cbs = { c_on_bidi, c_on_close, &st };
	struct ing_grpc_ccall *cc = ing_grpc_chan_call(ch, "/test.Echo/Bidi", NULL, 10000, &cbs);
	assert_non_null(cc);
	uint8_t *buf = malloc(5000);
	uint64_t end = ing_now_ns() + time_scaled(10000) * MS;
	for (unsigned i = 0; i < 1000 && ing_now_ns() < end;) {
		size_t len = bidi_len(i);
		for (size_t k = 0; k < len; k++)
			buf[k] = pat(i, k);
		int rc = ing_grpc_ccall_send(cc, buf, len, i == 999);
		if (rc == -ENOBUFS) {
			ing_grpc_chan_poll(ch, 10);
			continue;
		}
		assert_int_equal(rc, 0);
		i++;
		if (i % 50 == 0)
			ing_grpc_chan_poll(ch, 0);   /* interleave reads and writes */
	}
	free(buf);
	assert_true(poll_until(ch, &st.closed, 10000));
	assert_int_equal(st.status, ING_GRPC_OK);
	assert_int_equal(st.nmsgs, 1000);
	assert_int_equal(st.bad, 0);
	ing_grpc_chan_close(ch);
}

static void test_one_mib(void **state)
{
	(void)state;
	struct ing_grpc_chan *ch = connect_chan();
	size_t n = MIB;
	uint8_t *req = malloc(n), *resp = NULL;
	for (size_t i = 0; i < n; i++)
		req[i] = (uint8_t)(i * 7 + (i >> 12));
	size_t rl = 0;
	char err[128];
	int st = ing_grpc_unary(ch, "/test.Echo/Unary", NULL, req, n, &resp, &rl, 5000, err,
				sizeof(err));
	assert_int_equal(st, ING_GRPC_OK);
	assert_int_equal(rl, n);
	assert_memory_equal(resp, req, n);
	free(resp);
	free(req);
	ing_grpc_chan_close(ch);
}

static void test_unimplemented_and_reject(void **state)
{
	(void)state;
	struct ing_grpc_chan *ch = connect_chan();
	uint8_t *resp;
	size_t rl;
	char err[128];
	int st = ing_grpc_unary(ch, "/x/y", NULL, (const uint8_t *)"a", 1, &resp, &rl, 2000, err,
				sizeof(err));
	assert_int_equal(st, ING_GRPC_UNIMPLEMENTED);
	assert_non_null(strstr(err, "/x/y"));
	st = ing_grpc_unary(ch, "/grpc.health.v1.Health/Watch", NULL, NULL, 0, &resp, &rl, 2000,
			    err, sizeof(err));
	assert_int_equal(st, ING_GRPC_UNIMPLEMENTED);
	st = ing_grpc_unary(ch, "/test.Echo/Reject", NULL, NULL, 0, &resp, &rl, 2000, err,
			    sizeof(err));
	assert_int_equal(st, ING_GRPC_PERMISSION_DENIED);
	/* The connection is still good. */
	st = ing_grpc_unary(ch, "/test.Echo/Unary", NULL, (const uint8_t *)"ok", 2, &resp, &rl,
			    2000, err, sizeof(err));
	assert_int_equal(st, ING_GRPC_OK);
	free(resp);
	ing_grpc_chan_close(ch);
}

static void test_over_limit(void **state)
{
	(void)state;
	struct ing_grpc_chan *ch = connect_chan();
	size_t n = MAX_RECV + 1;
	uint8_t *req = calloc(1, n), *resp;
	size_t rl;
	char err[128];
	int st = ing_grpc_unary(ch, "/test.Echo/Unary", NULL, req, n, &resp, &rl, 5000, err,
				sizeof(err));
	assert_int_equal(st, ING_GRPC_RESOURCE_EXHAUSTED);
	/* Streaming method too, with more data following the oversize message. */
	struct cst cs = { 0 };
	struct ing_grpc_ccall_cbs cbs = { c_on_message, c_on_close, &cs };
	struct ing_grpc_ccall *cc = ing_grpc_chan_call(ch, "/test.Echo/Sink", NULL, 5000, &cbs);
	assert_int_equal(ing_grpc_ccall_send(cc, req, n, false), 0);
	int rc = ing_grpc_ccall_send(cc, req, 1000, true);
	assert_true(rc == 0 || rc == -ENOBUFS || rc == -EPIPE);
	assert_true(poll_until(ch, &cs.closed, 5000));
	assert_int_equal(cs.status, ING_GRPC_RESOURCE_EXHAUSTED);
	free(req);
	/* The connection (and its flow-control windows) survive. */
	st = ing_grpc_unary(ch, "/test.Echo/Unary", NULL, (const uint8_t *)"ok", 2, &resp, &rl,
			    2000, err, sizeof(err));
	assert_int_equal(st, ING_GRPC_OK);
	free(resp);
	ing_grpc_chan_close(ch);
}

static void test_deadline(void **state)
{
	(void)state;
	struct ing_grpc_chan *ch = connect_chan();
	/* Server-side deadline only (raw grpc-timeout header, no client timer). */
	STORE(S.slow_status, -1);
	struct cst cs = { 0 };
	struct ing_grpc_ccall_cbs cbs = { c_on_message, c_on_close, &cs };
	const char *md[] = { "grpc-timeout", "200m", NULL };
	uint64_t t0 = ing_now_ns();
	struct ing_grpc_ccall *cc = ing_grpc_chan_call(ch, "/test.Echo/Slow", md, 0, &cbs);
	assert_int_equal(ing_grpc_ccall_send(cc, (const uint8_t *)"zz", 2, false), 0);
	assert_true(poll_until(ch, &cs.closed, 3000));
	assert_int_equal(cs.status, ING_GRPC_DEADLINE_EXCEEDED);
	assert_true(ing_now_ns() - t0 >= 190 * MS);
	assert_true(wait_atomic_int(ch, &S.slow_status, ING_GRPC_DEADLINE_EXCEEDED, 2000));
	/* Client-side deadline via ing_grpc_unary. */
	uint8_t *resp;
	size_t rl;
	char err[128];
	int st = ing_grpc_unary(ch, "/test.Echo/Slow", NULL, (const uint8_t *)"a", 1, &resp, &rl,
				100, err, sizeof(err));
	assert_int_equal(st, ING_GRPC_DEADLINE_EXCEEDED);
	ing_grpc_chan_close(ch);
}

static void test_cancel_and_loss(void **state)
{
	(void)state;
	struct ing_grpc_chan *ch = connect_chan();
	STORE(S.hold_started, 0);
	STORE(S.hold_status, -1);
	struct cst cs = { 0 };
	struct ing_grpc_ccall_cbs cbs = { c_on_message, c_on_close, &cs };
	struct ing_grpc_ccall *cc = ing_grpc_chan_call(ch, "/test.Echo/Hold", NULL, 0, &cbs);
	assert_int_equal(ing_grpc_ccall_send(cc, (const uint8_t *)"a", 1, false), 0);
	assert_true(wait_atomic_int(ch, &S.hold_started, 1, 2000));
	ing_grpc_ccall_cancel(cc);
	assert_true(cs.closed);
	assert_int_equal(cs.status, ING_GRPC_CANCELLED);
	assert_true(wait_atomic_int(ch, &S.hold_status, ING_GRPC_CANCELLED, 2000));

	/* Connection loss: the handler hears UNAVAILABLE, the client too. */
	STORE(S.hold_started, 0);
	STORE(S.hold_status, -1);
	memset(&cs, 0, sizeof(cs));
	cc = ing_grpc_chan_call(ch, "/test.Echo/Hold", NULL, 0, &cbs);
	assert_int_equal(ing_grpc_ccall_send(cc, (const uint8_t *)"a", 1, false), 0);
	assert_true(wait_atomic_int(ch, &S.hold_started, 1, 2000));
	ing_grpc_chan_close(ch);
	assert_true(cs.closed);
	assert_int_equal(cs.status, ING_GRPC_UNAVAILABLE);
	assert_true(wait_atomic_int(NULL, &S.hold_status, ING_GRPC_UNAVAILABLE, 2000));
}

static void test_health(void **state)
{
	(void)state;
	struct ing_grpc_chan *ch = connect_chan();
	Grpc__Health__V1__HealthCheckRequest req = GRPC__HEALTH__V1__HEALTH_CHECK_REQUEST__INIT;
	uint8_t buf[64], *resp;
	size_t rl;
	char err[128];
	req.service = "";
	size_t n = grpc__health__v1__health_check_request__pack(&req, buf);
	int st = ing_grpc_unary(ch, "/grpc.health.v1.Health/Check", NULL, buf, n, &resp, &rl, 2000,
				err, sizeof(err));
	assert_int_equal(st, ING_GRPC_OK);
	Grpc__Health__V1__HealthCheckResponse *r =
		grpc__health__v1__health_check_response__unpack(NULL, rl, resp);
	assert_non_null(r);
	assert_int_equal(r->status, GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING);
	grpc__health__v1__health_check_response__free_unpacked(r, NULL);
	free(resp);
	req.service = "no.such.Service";
	n = grpc__health__v1__health_check_request__pack(&req, buf);
	st = ing_grpc_unary(ch, "/grpc.health.v1.Health/Check", NULL, buf, n, &resp, &rl, 2000,
			    err, sizeof(err));
	assert_int_equal(st, ING_GRPC_NOT_FOUND);
	ing_grpc_chan_close(ch);
}

struct zc_state {
	unsigned done;
};

static void zc_done(void *arg)
{
	((struct zc_state *)arg)->done++;
}

/*
 * Pause/resume: the handler pauses in on_start; the client can then only push about one
 * stream window (16 MiB) before its sends stop draining, and nothing is delivered.
 */
static void test_pause_resume(void **state)
{
	(void)state;
	struct ing_grpc_chan *ch = connect_chan();
	enum { NMSG = 40 };
	static uint8_t body[MIB];
	const uint8_t head[3] = { 0x0a, 0x01, 0x7f };
	struct zc_state zs = { 0 };
	struct cst cs = { 0 };
	struct ing_grpc_ccall_cbs cbs = { c_on_message, c_on_close, &cs };
	STORE(S.paused_bytes, 0);
	struct ing_grpc_ccall *cc = ing_grpc_chan_call(ch, "/test.Echo/Paused", NULL, 0, &cbs);
	unsigned sent = 0;
	uint64_t end = ing_now_ns() + time_scaled(800) * MS;
	while (ing_now_ns() < end) {
		while (sent < NMSG && ing_grpc_ccall_send_zc(cc, head, sizeof(head), body, MIB,
							      sent == NMSG - 1, zc_done, &zs) == 0)
			sent++;
		ing_grpc_chan_poll(ch, 20);
	}
	uint64_t delivered = LOAD(S.paused_bytes);
	size_t pending = ing_grpc_chan_pending(ch);
	print_message("paused: sent %u msgs, %zu bytes pending, %u bodies written, delivered %llu\n",
		      sent, pending, zs.done, (unsigned long long)delivered);
	assert_int_equal(delivered, 0);
	assert_true(pending >= (size_t)(NMSG - 17) * MIB);   /* window is 16 MiB */
	assert_true(zs.done <= 17);
	assert_false(cs.closed);
	/* Only the paused stream is held back: other calls on the connection go on. */
	uint8_t *uresp;
	size_t url;
	char uerr[128];
	assert_int_equal(ing_grpc_unary(ch, "/test.Echo/Unary", NULL, (const uint8_t *)"side", 4,
					&uresp, &url, 3000, uerr, sizeof(uerr)),
			 ING_GRPC_OK);
	free(uresp);
	assert_int_equal(LOAD(S.paused_bytes), 0);

	STORE(S.resume_req, 1);
	ring();
	end = ing_now_ns() + time_scaled(20000) * MS;
	while (!cs.closed && ing_now_ns() < end) {
		while (sent < NMSG && ing_grpc_ccall_send_zc(cc, head, sizeof(head), body, MIB,
							      sent == NMSG - 1, zc_done, &zs) == 0)
			sent++;
		ing_grpc_chan_poll(ch, 20);
	}
	assert_true(cs.closed);
	assert_int_equal(cs.status, ING_GRPC_OK);
	assert_int_equal(zs.done, NMSG);
	assert_int_equal(cs.nmsgs, 1);
	uint32_t msgs;
	uint64_t bytes;
	memcpy(&msgs, cs.last, 4);
	memcpy(&bytes, cs.last + 4, 8);
	assert_int_equal(msgs, NMSG);
	assert_int_equal(bytes, (uint64_t)NMSG * (MIB + sizeof(head)));
	assert_int_equal(LOAD(S.sink_bad), 0);
	assert_int_equal(ing_grpc_chan_pending(ch), 0);
	ing_grpc_chan_close(ch);
}

/*
 * Held (paused, unconsumed) bytes of a call that dies must be given back to the connection
 * window: cancel five paused calls holding ~16 MiB each (more than the 64 MiB connection
 * window), then stream again on the same connection. Also cancel a call before its
 * HEADERS ever left.
 */
static void test_cancel_paused_returns_window(void **state)
{
	(void)state;
	struct ing_grpc_chan *ch = connect_chan();
	static uint8_t body[MIB];
	const uint8_t head[1] = { 0 };
	struct zc_state zs = { 0 };
	unsigned handed = 0;   /* zero-copy buffers handed over: each gets its completion */
	for (int round = 0; round < 5; round++) {
		struct cst cs = { 0 };
		struct ing_grpc_ccall_cbs cbs = { c_on_message, c_on_close, &cs };
		struct ing_grpc_ccall *cc = ing_grpc_chan_call(ch, "/test.Echo/Paused", NULL, 0, &cbs);
		assert_non_null(cc);
		unsigned sent = 0;
		uint64_t end = ing_now_ns() + time_scaled(300) * MS;
		while (ing_now_ns() < end) {
			while (sent < 20 && ing_grpc_ccall_send_zc(cc, head, 1, body, MIB, false, zc_done,
								    &zs) == 0)
				sent++;
			ing_grpc_chan_poll(ch, 20);
		}
		assert_true(ing_grpc_chan_pending(ch) > 0);   /* window closed on us */
		handed += sent;   /* all 20 on an idle machine; fewer when the 300 ms ran out first */
		ing_grpc_ccall_cancel(cc);
		assert_int_equal(cs.status, ING_GRPC_CANCELLED);
	}
	/* Cancelled before any I/O: the stream never starts, the connection stays fine. */
	struct cst c0 = { 0 };
	struct ing_grpc_ccall_cbs cbs0 = { c_on_message, c_on_close, &c0 };
	struct ing_grpc_ccall *cc0 = ing_grpc_chan_call(ch, "/test.Echo/Hold", NULL, 0, &cbs0);
	ing_grpc_ccall_cancel(cc0);
	assert_true(c0.closed);

	struct cst cs = { 0 };
	struct ing_grpc_ccall_cbs cbs = { c_on_message, c_on_close, &cs };
	struct ing_grpc_ccall *cc = ing_grpc_chan_call(ch, "/test.Echo/Sink", NULL, 10000, &cbs);
	unsigned sent = 0;
	uint64_t end = ing_now_ns() + time_scaled(10000) * MS;
	while (!cs.closed && ing_now_ns() < end) {
		while (sent < 32 && ing_grpc_ccall_send_zc(cc, head, 1, body, MIB, sent == 31, zc_done,
							    &zs) == 0)
			sent++;
		if (ing_grpc_chan_poll(ch, 20) < 0)
			break;
	}
	assert_true(cs.closed);
	assert_int_equal(cs.status, ING_GRPC_OK);
	assert_int_equal(ing_grpc_chan_pending(ch), 0);
	ing_grpc_chan_close(ch);
	assert_int_equal(zs.done, handed + 32);
}

/* Client -> server streaming of 1 MiB zero-copy messages; prints the rate (no assertion). */
static void test_stream_throughput(void **state)
{
	(void)state;
	struct ing_grpc_chan *ch = connect_chan();
	const char *env = getenv("ING_GRPC_BENCH_MB");
	unsigned total = env ? (unsigned)atoi(env) : 256;
	static uint8_t body[MIB];
	for (size_t i = 0; i < MIB; i++)
		body[i] = (uint8_t)i;
	const uint8_t head[4] = { 0x22, 0x80, 0x80, 0x40 };
	struct zc_state zs = { 0 };
	struct cst cs = { 0 };
	struct ing_grpc_ccall_cbs cbs = { c_on_message, c_on_close, &cs };
	struct ing_grpc_ccall *cc = ing_grpc_chan_call(ch, "/test.Echo/Sink", NULL, 0, &cbs);
	unsigned sent = 0;
	uint64_t t0 = ing_now_ns(), end = t0 + time_scaled(60000) * MS;
	while (!cs.closed && ing_now_ns() < end) {
		while (sent < total && ing_grpc_ccall_send_zc(cc, head, sizeof(head), body, MIB,
							       sent == total - 1, zc_done, &zs) == 0)
			sent++;
		if (ing_grpc_chan_poll(ch, 50) < 0)
			break;
	}
	double secs = (double)(ing_now_ns() - t0) / 1e9;
	assert_true(cs.closed);
	assert_int_equal(cs.status, ING_GRPC_OK);
	uint32_t msgs;
	memcpy(&msgs, cs.last, 4);
	assert_int_equal(msgs, total);
	assert_int_equal(zs.done, total);
	print_message("stream: %u x 1 MiB in %.3f s = %.0f MiB/s\n", total, secs, total / secs);
	ing_grpc_chan_close(ch);
}

/* Garbage instead of the HTTP/2 preface: the server drops the connection, nothing else. */
static void test_garbage(void **state)
{
	(void)state;
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)S.port) };
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	const char junk[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
	assert_int_equal(write(fd, junk, sizeof(junk) - 1), (ssize_t)sizeof(junk) - 1);
	bool eof = false;
	uint64_t end = ing_now_ns() + 3000 * MS;
	while (!eof && ing_now_ns() < end) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		if (poll(&p, 1, 100) > 0) {
			char b[4096];
			ssize_t n = read(fd, b, sizeof(b));
			eof = n <= 0;
		}
	}
	assert_true(eof);
	close(fd);
	/* Still serving. */
	struct ing_grpc_chan *ch = connect_chan();
	uint8_t *resp;
	size_t rl;
	char err[128];
	assert_int_equal(ing_grpc_unary(ch, "/test.Echo/Unary", NULL, (const uint8_t *)"k", 1,
					&resp, &rl, 2000, err, sizeof(err)),
			 ING_GRPC_OK);
	free(resp);
	ing_grpc_chan_close(ch);
}

struct many_cst {
	struct cst c;
	unsigned seq_bad;
	uint64_t bytes;
};

static void c_on_many(struct ing_grpc_ccall *cc, void *arg, const uint8_t *msg, size_t len)
{
	struct many_cst *m = arg;
	(void)cc;
	if (len && (msg[0] != (uint8_t)(m->c.nmsgs & 0xff) || msg[len - 1] != msg[0]))
		m->seq_bad++;
	m->bytes += len;
	m->c.nmsgs++;
}

static void c_on_many_close(struct ing_grpc_ccall *cc, void *arg, int status, const char *msg)
{
	c_on_close(cc, &((struct many_cst *)arg)->c, status, msg);
}

/* Server streaming beyond max_send_buffer: -ENOBUFS, then on_writable, in order. */
static void test_server_streaming(void **state)
{
	(void)state;
	struct ing_grpc_chan *ch = connect_chan();
	struct many_cst m = { 0 };
	struct ing_grpc_ccall_cbs cbs = { c_on_many, c_on_many_close, &m };
	STORE(S.enobufs, 0);
	struct ing_grpc_ccall *cc = ing_grpc_chan_call(ch, "/test.Echo/Many", NULL, 20000, &cbs);
	const char *req = "96 262144";   /* 24 MiB through an 8 MiB send buffer */
	assert_int_equal(ing_grpc_ccall_send(cc, (const uint8_t *)req, strlen(req), true), 0);
	assert_true(poll_until(ch, &m.c.closed, 20000));
	assert_int_equal(m.c.status, ING_GRPC_OK);
	assert_int_equal(m.c.nmsgs, 96);
	assert_int_equal(m.seq_bad, 0);
	assert_int_equal(m.bytes, 96ull * 262144);
	assert_true(LOAD(S.enobufs) > 0);
	ing_grpc_chan_close(ch);
}

/* TLS with ALPN h2, the certificate verified against its own CA file (IP SAN). */
static void test_tls(void **state)
{
	(void)state;
	struct ing_grpc_chan *ch = connect_opts(true, S.cert);
	uint8_t *resp;
	size_t rl;
	char err[128];
	static uint8_t big[MIB];
	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (uint8_t)(i * 5);
	assert_int_equal(ing_grpc_unary(ch, "/test.Echo/Unary", NULL, big, sizeof(big), &resp, &rl,
					5000, err, sizeof(err)),
			 ING_GRPC_OK);
	assert_int_equal(rl, sizeof(big));
	assert_memory_equal(resp, big, sizeof(big));
	free(resp);
	/* Streaming over TLS, zero-copy bodies. */
	struct zc_state zs = { 0 };
	struct cst cs = { 0 };
	struct ing_grpc_ccall_cbs cbs = { c_on_message, c_on_close, &cs };
	struct ing_grpc_ccall *cc = ing_grpc_chan_call(ch, "/test.Echo/Sink", NULL, 20000, &cbs);
	const uint8_t head[2] = { 1, 2 };
	unsigned sent = 0;
	uint64_t end = ing_now_ns() + time_scaled(20000) * MS;
	while (!cs.closed && ing_now_ns() < end) {
		while (sent < 32 && ing_grpc_ccall_send_zc(cc, head, 2, big, MIB, sent == 31, zc_done,
							    &zs) == 0)
			sent++;
		if (ing_grpc_chan_poll(ch, 50) < 0)
			break;
	}
	assert_true(cs.closed);
	assert_int_equal(cs.status, ING_GRPC_OK);
	assert_int_equal(zs.done, 32);
	uint32_t msgs;
	memcpy(&msgs, cs.last, 4);
	assert_int_equal(msgs, 32);
	ing_grpc_chan_close(ch);

	/* Verification on: a cleartext client against the TLS port fails cleanly. */
	char target[64];
	snprintf(target, sizeof(target), "127.0.0.1:%d", ing_grpc_server_port(S.tls));
	struct ing_grpc_chan_opts o;
	ing_grpc_chan_opts_init(&o);
	o.target = target;
	o.connect_timeout_ms = 2000;
	assert_null(ing_grpc_chan_connect(&o, err, sizeof(err)));
}

/* Last: GOAWAY, the call in progress finishes, the listener is gone. */
static void test_shutdown(void **state)
{
	(void)state;
	struct ing_grpc_chan *ch = connect_chan();
	struct many_cst m = { 0 };
	struct ing_grpc_ccall_cbs cbs = { c_on_many, c_on_many_close, &m };
	struct ing_grpc_ccall *cc = ing_grpc_chan_call(ch, "/test.Echo/Many", NULL, 20000, &cbs);
	const char *req = "64 262144";
	assert_int_equal(ing_grpc_ccall_send(cc, (const uint8_t *)req, strlen(req), true), 0);
	uint64_t end = ing_now_ns() + time_scaled(5000) * MS;
	while (m.c.nmsgs == 0 && ing_now_ns() < end)
		ing_grpc_chan_poll(ch, 20);
	assert_true(m.c.nmsgs > 0);
	STORE(S.shutdown_req, 1);
	ring();
	assert_true(poll_until(ch, &m.c.closed, 20000));
	assert_int_equal(m.c.status, ING_GRPC_OK);
	assert_int_equal(m.c.nmsgs, 64);
	/* New calls on the old connection are refused, new connections too. */
	uint8_t *resp;
	size_t rl;
	char err[128];
	int st = ing_grpc_unary(ch, "/test.Echo/Unary", NULL, (const uint8_t *)"x", 1, &resp, &rl,
				2000, err, sizeof(err));
	assert_int_not_equal(st, ING_GRPC_OK);
	ing_grpc_chan_close(ch);
	char target[64];
	snprintf(target, sizeof(target), "127.0.0.1:%d", S.port);
	struct ing_grpc_chan_opts o;
	ing_grpc_chan_opts_init(&o);
	o.target = target;
	o.connect_timeout_ms = 1000;
	assert_null(ing_grpc_chan_connect(&o, err, sizeof(err)));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_unary_echo),
		cmocka_unit_test(test_bidi_1000),
		cmocka_unit_test(test_one_mib),
		cmocka_unit_test(test_unimplemented_and_reject),
		cmocka_unit_test(test_over_limit),
		cmocka_unit_test(test_deadline),
		cmocka_unit_test(test_cancel_and_loss),
		cmocka_unit_test(test_health),
		cmocka_unit_test(test_pause_resume),
		cmocka_unit_test(test_cancel_paused_returns_window),
		cmocka_unit_test(test_stream_throughput),
		cmocka_unit_test(test_garbage),
		cmocka_unit_test(test_server_streaming),
		cmocka_unit_test(test_tls),
		cmocka_unit_test(test_shutdown),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
