/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_metrics.c - control/net/metrics.c: the exposition helpers (cumulative buckets, +Inf,
 * _sum in seconds; the table-driven families of ing_mtext_rows) and the HTTP responder
 * driven on a real loop over loopback TCP: GET/HEAD /metrics, 404, 405, 400 for garbage and
 * for an over-long head, a client that goes away, and the page rendered per request;
 * process_* on every page; /healthz, and /readyz answering 200 or 503 as the node's check
 * says.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "control/net/metrics.h"
#include "control/net/loop.h"
#include "common/clock.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static unsigned renders;

static void render(void *arg, struct ing_mtext *t)
{
	(void)arg;
	renders++;
	ing_mtext_family(t, "test_things_total", "counter", "Things.");
	ing_mtext_u64(t, "test_things_total", "kind=\"a\"", 42);
}

static void test_hist_text(void **state)
{
	struct ing_hist h;
	struct ing_mtext t = { 0 };
	(void)state;
	ing_hist_reset(&h);
	ing_hist_add(&h, 50000);          /* 50 us: first bucket */
	ing_hist_add(&h, 2000000);        /* 2 ms: le 0.0025 */
	ing_hist_add(&h, 99000000000ull); /* 99 s: +Inf only */
	ing_mtext_hist(&t, "x_seconds", "stage=\"s\"", &h);
	assert_int_equal(t.err, 0);
	assert_non_null(strstr(t.buf, "x_seconds_bucket{stage=\"s\",le=\"0.0001\"} 1\n"));
	assert_non_null(strstr(t.buf, "x_seconds_bucket{stage=\"s\",le=\"0.001\"} 1\n"));
	assert_non_null(strstr(t.buf, "x_seconds_bucket{stage=\"s\",le=\"0.0025\"} 2\n"));
	assert_non_null(strstr(t.buf, "x_seconds_bucket{stage=\"s\",le=\"30\"} 2\n"));
	assert_non_null(strstr(t.buf, "x_seconds_bucket{stage=\"s\",le=\"+Inf\"} 3\n"));
	assert_non_null(strstr(t.buf, "x_seconds_count{stage=\"s\"} 3\n"));
	assert_non_null(strstr(t.buf, "x_seconds_sum{stage=\"s\"} 99.00205\n"));
	free(t.buf);

	/* no labels; a page far larger than the first allocation */
	memset(&t, 0, sizeof(t));
	ing_mtext_hist(&t, "y", "", &h);
	assert_non_null(strstr(t.buf, "y_bucket{le=\"+Inf\"} 3\n"));
	assert_non_null(strstr(t.buf, "y_count 3\n"));
	for (int i = 0; i < 5000; i++)
		ing_mtext_u64(&t, "z", "", (uint64_t)i);
	assert_int_equal(t.err, 0);
	assert_non_null(strstr(t.buf, "z 4999\n"));
	free(t.buf);
}

/* ing_mtext_rows: every column's family, then its sample of each row in row order with the
 * row's labels, uint64 and double columns as ing_mtext_u64 and ing_mtext_sample write them;
 * no rows: the families alone. */
struct trow {
	uint64_t a;
	char l[16];
	double d;
};

static void test_rows_text(void **state)
{
	static const struct ing_mtext_col cols[] = {
		{ "t_a_total", "counter", "A.", ING_MTEXT_U64(struct trow, a) },
		{ "t_d_seconds", "gauge", "D.", ING_MTEXT_DBL(struct trow, d) },
	};
	const struct trow rows[] = {
		{ 7, "k=\"0\"", 0.5 },
		{ 18446744073709551615ull, "k=\"1\"", 0 },
	};
	struct ing_mtext t = { 0 };
	(void)state;
	ing_mtext_rows(&t, cols, 2, rows, sizeof(rows[0]), 2, offsetof(struct trow, l));
	assert_int_equal(t.err, 0);
	assert_string_equal(t.buf,
			    "# HELP t_a_total A.\n# TYPE t_a_total counter\n"
			    "t_a_total{k=\"0\"} 7\n"
			    "t_a_total{k=\"1\"} 18446744073709551615\n"
			    "# HELP t_d_seconds D.\n# TYPE t_d_seconds gauge\n"
			    "t_d_seconds{k=\"0\"} 0.5\n"
			    "t_d_seconds{k=\"1\"} 0\n");
	free(t.buf);

	memset(&t, 0, sizeof(t));
	ing_mtext_rows(&t, cols, 2, rows, sizeof(rows[0]), 0, offsetof(struct trow, l));
	assert_string_equal(t.buf, "# HELP t_a_total A.\n# TYPE t_a_total counter\n"
			    "# HELP t_d_seconds D.\n# TYPE t_d_seconds gauge\n");
	free(t.buf);
}

/* Send req on a fresh connection, run the loop until the server closes, return the reply. */
static size_t exchange(struct ing_loop *l, int port, const char *req, size_t reqlen, char *out,
		       size_t cap)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	assert_true(fd >= 0);
	int rc = connect(fd, (struct sockaddr *)&a, sizeof(a));
	assert_true(rc == 0 || errno == EINPROGRESS);
	size_t sent = 0, got = 0;
	uint64_t deadline = ing_now_ns() + 60000000000ull;   /* a cap for a hang */
	for (;;) {
		assert_true(ing_now_ns() < deadline);
		(void)ing_loop_run_once(l, 10);
		if (sent < reqlen) {
			ssize_t n = send(fd, req + sent, reqlen - sent, MSG_NOSIGNAL);
			if (n > 0)
				sent += (size_t)n;
		}
		ssize_t n = recv(fd, out + got, cap - 1 - got, 0);
		if (n == 0)
			break;
		if (n > 0)
			got += (size_t)n;
		else if (errno != EAGAIN && errno != ENOTCONN)
			break;   /* reset: the server closed on us */
	}
	close(fd);
	out[got] = 0;
	return got;
}

static void test_http(void **state)
{
	static char buf[65536];
	(void)state;
	struct ing_loop *l = ing_loop_create();
	assert_non_null(l);
	struct ing_metrics_srv *s = ing_metrics_srv_create(l, "127.0.0.1:0", render, NULL);
	assert_non_null(s);
	int port = ing_metrics_srv_port(s);
	assert_true(port > 0);

	const char *get = "GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: text/plain\r\n\r\n";
	exchange(l, port, get, strlen(get), buf, sizeof(buf));
	assert_non_null(strstr(buf, "HTTP/1.1 200 OK\r\n"));
	assert_non_null(strstr(buf, "Content-Type: text/plain; version=0.0.4"));
	assert_non_null(strstr(buf, "\r\n\r\n# HELP test_things_total Things.\n"));
	assert_non_null(strstr(buf, "test_things_total{kind=\"a\"} 42\n"));
	assert_non_null(strstr(buf, "ingest_metrics_scrapes_total 1\n"));
	char *body = strstr(buf, "\r\n\r\n") + 4;
	char *cl = strstr(buf, "Content-Length: ");
	assert_int_equal(strtoul(cl + 16, NULL, 10), strlen(body));
	assert_int_equal(renders, 1);

	/* a request split across sends, with a query string */
	exchange(l, port, "GET /metrics?a=1 HTTP/1.0\r\n\r\n", 29, buf, sizeof(buf));
	assert_non_null(strstr(buf, "200 OK"));
	assert_non_null(strstr(buf, "ingest_metrics_scrapes_total 2\n"));

	exchange(l, port, "HEAD /metrics HTTP/1.1\r\n\r\n", 26, buf, sizeof(buf));
	assert_non_null(strstr(buf, "200 OK"));
	assert_null(strstr(buf, "test_things_total"));

	exchange(l, port, "GET / HTTP/1.1\r\n\r\n", 18, buf, sizeof(buf));
	assert_non_null(strstr(buf, "HTTP/1.1 404 "));
	exchange(l, port, "POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n", 46, buf, sizeof(buf));
	assert_non_null(strstr(buf, "HTTP/1.1 405 "));
	exchange(l, port, "hello\r\n\r\n", 9, buf, sizeof(buf));
	assert_non_null(strstr(buf, "HTTP/1.1 400 "));
	/* a head that never ends: 400 once 4 KiB are in, not unbounded buffering (exactly
	 * 4 KiB sent, so the server has read everything and closes with a FIN, not a RST) */
	static char big[4096];
	memcpy(big, "GET /metrics HTTP/1.1\r\nX: ", 26);
	memset(big + 26, 'a', sizeof(big) - 26);
	exchange(l, port, big, sizeof(big), buf, sizeof(buf));
	assert_non_null(strstr(buf, "HTTP/1.1 400 "));
	assert_int_equal(renders, 3);   /* only the three good GET/HEAD rendered */

	/* a client that connects and leaves at once: the server forgets it */
	for (int i = 0; i < 40; i++) {
		struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
		a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		int fd = socket(AF_INET, SOCK_STREAM, 0);
		assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
		close(fd);
		(void)ing_loop_run_once(l, 5);
		(void)ing_loop_run_once(l, 5);
	}
	exchange(l, port, get, strlen(get), buf, sizeof(buf));   /* still serves: no leak of slots */
	assert_non_null(strstr(buf, "200 OK"));

	ing_metrics_srv_destroy(s);
	ing_loop_destroy(l);
}

static bool ready_now;

static bool ready(void *arg, struct ing_mtext *t)
{
	(void)arg;
	ing_mtext_printf(t, "%s thing\n%s\n", ready_now ? "ok" : "fail",
			 ready_now ? "ready" : "not ready: thing is off");
	return ready_now;
}

static void test_health(void **state)
{
	static char buf[65536];
	(void)state;
	struct ing_loop *l = ing_loop_create();
	struct ing_metrics_srv *s = ing_metrics_srv_create(l, "127.0.0.1:0", render, NULL);
	assert_non_null(s);
	int port = ing_metrics_srv_port(s);
	const char *get = "GET /metrics HTTP/1.1\r\n\r\n";
	const char *healthz = "GET /healthz HTTP/1.1\r\n\r\n", *readyz = "GET /readyz HTTP/1.1\r\n\r\n";

	/* process_* with plausible values: this process's fds, memory, start time */
	exchange(l, port, get, strlen(get), buf, sizeof(buf));
	for (const char *f = "process_cpu_seconds_total\0process_resident_memory_bytes\0"
			     "process_virtual_memory_bytes\0process_open_fds\0process_max_fds\0"
			     "process_start_time_seconds\0"; *f; f += strlen(f) + 1) {
		char want[96];
		snprintf(want, sizeof(want), "# TYPE %s ", f);
		assert_non_null(strstr(buf, want));
	}
	double rss = strtod(strstr(buf, "\nprocess_resident_memory_bytes ") + 31, NULL);
	assert_true(rss > 1e6);
	double fds = strtod(strstr(buf, "\nprocess_open_fds ") + 18, NULL);
	assert_true(fds >= 4);   /* stdio, the loop, the listener */
	double start = strtod(strstr(buf, "\nprocess_start_time_seconds ") + 28, NULL);
	double now = (double)time(NULL);
	assert_true(start > now - 3600 && start <= now + 1);

	/* /healthz: the loop answered */
	exchange(l, port, healthz, strlen(healthz), buf, sizeof(buf));
	assert_non_null(strstr(buf, "HTTP/1.1 200 OK\r\n"));
	assert_non_null(strstr(buf, "ok: control loop turning"));
	/* /readyz without a check: as /healthz */
	exchange(l, port, readyz, strlen(readyz), buf, sizeof(buf));
	assert_non_null(strstr(buf, "HTTP/1.1 200 OK\r\n"));
	/* with the node's check: 200 when it passes, 503 with the reason when not */
	ing_metrics_srv_set_ready(s, ready);
	ready_now = true;
	exchange(l, port, readyz, strlen(readyz), buf, sizeof(buf));
	assert_non_null(strstr(buf, "HTTP/1.1 200 OK\r\n"));
	assert_non_null(strstr(buf, "\r\n\r\nok thing\nready\n"));
	ready_now = false;
	exchange(l, port, readyz, strlen(readyz), buf, sizeof(buf));
	assert_non_null(strstr(buf, "HTTP/1.1 503 Service Unavailable\r\n"));
	assert_non_null(strstr(buf, "not ready: thing is off\n"));
	exchange(l, port, "HEAD /readyz HTTP/1.1\r\n\r\n", 25, buf, sizeof(buf));
	assert_non_null(strstr(buf, "HTTP/1.1 503 "));
	assert_null(strstr(buf, "thing"));
	exchange(l, port, healthz, strlen(healthz), buf, sizeof(buf));
	assert_non_null(strstr(buf, "HTTP/1.1 200 OK\r\n"));   /* alive, though not ready */

	ing_metrics_srv_destroy(s);
	ing_loop_destroy(l);
}

static void test_bad_addr(void **state)
{
	(void)state;
	struct ing_loop *l = ing_loop_create();
	assert_null(ing_metrics_srv_create(l, "nonsense", render, NULL));
	assert_null(ing_metrics_srv_create(l, "127.0.0.1:99999", render, NULL));
	ing_loop_destroy(l);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hist_text),
		cmocka_unit_test(test_rows_text),
		cmocka_unit_test(test_http),
		cmocka_unit_test(test_health),
		cmocka_unit_test(test_bad_addr),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
