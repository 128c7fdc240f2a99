/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_s3.c - dataplane/store/s3.c without a store: the --tier URL, the credentials file,
 * object keys, and the classification of what a store answers (a local HTTP responder
 * plays the store's replies: 412, 403, 404, 400 BadDigest, 503, a refused connection, a
 * clock-skew 403 with and without a body, a store that stops answering or reading), and
 * the PUT's headers (Content-MD5, create-only or If-Match).
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "dataplane/store/s3.h"

static char dir[64];

static int setup(void **state)
{
	(void)state;
	strcpy(dir, "/tmp/ing_test_s3.XXXXXX");
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd) == 0 ? 0 : -1;
}

static void urls(void **state)
{
	(void)state;
	struct ing_s3 s;
	char why[256];

	ing_s3_init(&s);
	assert_int_equal(ing_s3_parse_url(&s, "s3://127.0.0.1:7480/frames", why, sizeof(why)), 0);
	assert_string_equal(s.endpoint, "http://127.0.0.1:7480");
	assert_string_equal(s.bucket, "frames");
	assert_string_equal(s.prefix, "");
	assert_string_equal(s.display, "s3://127.0.0.1:7480/frames");
	assert_false(s.tls);
	assert_true(s.path_style);
	assert_string_equal(s.region, "us-east-1");

	assert_int_equal(ing_s3_parse_url(&s, "https://store.site/lab.frames/node-7/", why, sizeof(why)), 0);
	assert_string_equal(s.endpoint, "https://store.site");
	assert_string_equal(s.bucket, "lab.frames");
	assert_string_equal(s.prefix, "node-7/");
	assert_true(s.tls);
	assert_int_equal(ing_s3_parse_url(&s, "s3://[::1]:9000/b_1/a/b", why, sizeof(why)), 0);
	assert_string_equal(s.host, "[::1]:9000");
	assert_string_equal(s.prefix, "a/b/");

	static const struct { const char *url, *says; } bad[] = {
		{ "ftp://h/b", "is not s3://" },
		{ "s3://", "no host" },
		{ "s3://host:7480", "no bucket" },
		{ "s3://host:7480/", "no bucket" },
		{ "s3://host:0/bucket", "not 1..65535" },
		{ "s3://host:99999/bucket", "not 1..65535" },
		{ "s3://host:123456/bucket", "bad port" },
		{ "s3://host:80/ab", "3..63" },
		{ "s3://host:80/bu cket", "holds ' '" },
		{ "s3://ho st/bucket", "holds ' '" },
		{ "s3://host/bucket/a//b", "empty, '.' or '..'" },
		{ "s3://host/bucket/../x", "empty, '.' or '..'" },
		{ "s3://host/bucket/a%2f", "holds '%'" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		why[0] = 0;
		assert_int_equal(ing_s3_parse_url(&s, bad[i].url, why, sizeof(why)), -EINVAL);
		if (!strstr(why, bad[i].says))
			fail_msg("%s: '%s' does not say '%s'", bad[i].url, why, bad[i].says);
	}
}

static void write_file(const char *path, const char *text, int mode)
{
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	assert_int_equal(chmod(path, (mode_t)mode), 0);
}

static void credentials(void **state)
{
	(void)state;
	struct ing_s3 s;
	char path[128], why[256];

	ing_s3_init(&s);
	snprintf(path, sizeof(path), "%s/s3cfg", dir);
	/* an s3cmd .s3cfg: a section, other keys, comments */
	write_file(path, "[default]\n# keys\naccess_key = AKIA0001\nhost_base = x:1\n"
			 "secret_key = \"s3cr3t/+=\"\n; done\n", 0600);
	assert_int_equal(ing_s3_read_credentials(&s, path, why, sizeof(why)), 0);
	assert_string_equal(s.access_key, "AKIA0001");
	assert_string_equal(s.secret_key, "s3cr3t/+=");
	/* an AWS credentials file */
	write_file(path, "[default]\naws_access_key_id=AK2\naws_secret_access_key = SK2\n", 0400);
	assert_int_equal(ing_s3_read_credentials(&s, path, why, sizeof(why)), 0);
	assert_string_equal(s.access_key, "AK2");
	assert_string_equal(s.secret_key, "SK2");

	write_file(path, "access_key = A\nsecret_key = B\n", 0644);
	assert_int_equal(ing_s3_read_credentials(&s, path, why, sizeof(why)), -EPERM);
	assert_non_null(strstr(why, "chmod 600"));
	write_file(path, "access_key = A\n", 0600);
	assert_int_equal(ing_s3_read_credentials(&s, path, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "no secret_key"));
	write_file(path, "access_key = A B\nsecret_key = C\n", 0600);
	assert_int_equal(ing_s3_read_credentials(&s, path, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "line 1"));
	snprintf(path, sizeof(path), "%s/none", dir);
	assert_int_equal(ing_s3_read_credentials(&s, path, why, sizeof(why)), -ENOENT);
	/* the failed reads kept the last good keys */
	assert_string_equal(s.access_key, "AK2");
}

static void keys(void **state)
{
	(void)state;
	struct ing_s3 s;
	char why[128], key[ING_S3_KEY_MAX + 1];

	ing_s3_init(&s);
	assert_int_equal(ing_s3_parse_url(&s, "s3://h:1/bkt", why, sizeof(why)), 0);
	assert_int_equal(ing_s3_key(&s, key, sizeof(key), "W-12", "frame-7"), 0);
	assert_string_equal(key, "W-12/frame-7");
	/* the frame file names: percent-encoded where the id is not a plain name */
	assert_int_equal(ing_s3_key(&s, key, sizeof(key), "lot 7/w", "../../etc/passwd"), 0);
	assert_string_equal(key, "lot%207%2Fw/%2E%2E%2F%2E%2E%2Fetc%2Fpasswd");
	assert_int_equal(ing_s3_parse_url(&s, "s3://h:1/bkt/site/n1", why, sizeof(why)), 0);
	assert_int_equal(ing_s3_key(&s, key, sizeof(key), "W", "F"), 0);
	assert_string_equal(key, "site/n1/W/F");
	assert_int_equal(ing_s3_key(&s, key, sizeof(key), "W", ""), -EINVAL);
}

/* ---------------------------------------------------------------- a store's answers */

struct responder {
	int lfd, port;
	const char *reply;   /* one HTTP response for every request (NULL: stall) */
	bool date_skewed;    /* add a Date header two hours ahead of this host's clock */
	char req[8192];      /* the start of the last request (headers) */
	_Atomic bool stop;
	pthread_t th;
};

static void *respond(void *arg)
{
	struct responder *r = arg;
	for (;;) {
		int c = accept(r->lfd, NULL, NULL);
		if (c < 0)
			return NULL;
		char buf[8192];
		ssize_t n = recv(c, buf, sizeof(buf) - 1, 0);   /* headers (Expect: 100-continue: no body yet) */
		if (n > 0) {
			memcpy(r->req, buf, (size_t)n);
			r->req[n] = 0;
		}
		if (!r->reply) {   /* a store that stops reading and answering: hold it open */
			while (!atomic_load(&r->stop))
				usleep(10000);
			close(c);
			continue;
		}
		char reply[2048];
		snprintf(reply, sizeof(reply), "%s", r->reply);
		if (r->date_skewed) {   /* "HTTP/1.1 403 ...\r\n" then Date, then the rest */
			char date[64];
			time_t ahead = time(NULL) + 7200;
			struct tm tm;
			gmtime_r(&ahead, &tm);
			strftime(date, sizeof(date), "Date: %a, %d %b %Y %H:%M:%S GMT\r\n", &tm);
			const char *eol = strstr(r->reply, "\r\n");
			assert_non_null(eol);
			int k = (int)(eol + 2 - r->reply);
			snprintf(reply, sizeof(reply), "%.*s%s%s", k, r->reply, date, r->reply + k);
		}
		ssize_t w = send(c, reply, strlen(reply), MSG_NOSIGNAL);
		(void)w;
		shutdown(c, SHUT_WR);
		while (recv(c, buf, sizeof(buf), 0) > 0)
			;
		close(c);
	}
}

static void responder_start_at(struct responder *r, const char *reply, bool date_skewed)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof(a);
	memset(r, 0, sizeof(*r));
	r->reply = reply;
	r->date_skewed = date_skewed;
	r->lfd = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(r->lfd >= 0);
	assert_int_equal(bind(r->lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(r->lfd, 8), 0);
	assert_int_equal(getsockname(r->lfd, (struct sockaddr *)&a, &al), 0);
	r->port = ntohs(a.sin_port);
	assert_int_equal(pthread_create(&r->th, NULL, respond, r), 0);
}

static void responder_start(struct responder *r, const char *reply)
{
	responder_start_at(r, reply, false);
}

static void responder_stop(struct responder *r)
{
	atomic_store(&r->stop, true);
	shutdown(r->lfd, SHUT_RDWR);
	close(r->lfd);
	pthread_join(r->th, NULL);
}

#define XML_ERR(code) "<?xml version=\"1.0\"?><Error><Code>" code "</Code></Error>"

static void store_at(struct ing_s3 *s, const struct responder *r)
{
	char url[64], why[256];
	ing_s3_init(s);
	s->timeout_ms = 5000;
	snprintf(s->access_key, sizeof(s->access_key), "AK");
	snprintf(s->secret_key, sizeof(s->secret_key), "SK");
	snprintf(url, sizeof(url), "s3://127.0.0.1:%d/frames", r->port);
	assert_int_equal(ing_s3_parse_url(s, url, why, sizeof(why)), 0);
}

/* PUT path's file of n bytes (0..255 repeating) to the responder; its result and why */
static enum ing_s3_result put_file(struct responder *r, size_t n, const char *if_match, char *why,
				   size_t whylen, unsigned timeout_ms)
{
	char path[128];
	struct ing_s3 s;
	store_at(&s, r);
	if (timeout_ms)
		s.timeout_ms = timeout_ms;
	snprintf(path, sizeof(path), "%s/body", dir);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	for (size_t i = 0; i < n; i++)
		fputc((int)(i & 255), f);
	fclose(f);
	struct s3_req q = { .fd = open(path, O_RDONLY) };
	q.len = n;
	assert_true(q.fd >= 0);
	struct s3_put_args a = {
		.sha256_hex = "84d89877f0d4041efb6bf91a16f0248f2fd573e6af05c19f96bedb9f882f7882",
		.md5_b64 = "4vxxTEcn7pOV8yTNLn8zHw==", .crc32c = 1, .wafer_id = "W", .frame_id = "F",
		.if_match = if_match,
	};
	assert_int_equal(s3_req_put(&q, &s, "W/F", &a), 0);
	enum ing_s3_result res = s3_req_done(&q, curl_easy_perform(q.easy));
	s3_req_describe(&q, res, why, whylen);
	s3_req_release(&q);
	close(q.fd);
	return res;
}

static void answers(void **state)
{
	(void)state;
	static const struct { const char *reply; int op; enum ing_s3_result res; const char *says; } cases[] = {
		{ "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nETag: \"0123456789abcdef0123456789abcdef\"\r\n"
		  "x-amz-meta-crc32c: 1234abcd\r\nConnection: close\r\n\r\n", 0, ING_S3_OK, "ok" },
		{ "HTTP/1.1 412 Precondition Failed\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", 0,
		  ING_S3_EXISTS, "already stored" },
		{ "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", 1, ING_S3_DENIED,
		  "refused the credentials" },
		{ "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", 1, ING_S3_NO_BUCKET,
		  "does not exist" },
		{ "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", 0,
		  ING_S3_NOT_FOUND, "no such object" },
		{ "HTTP/1.1 503 Slow Down\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", 0, ING_S3_SERVER,
		  "HTTP 503" },
	};
	struct ing_s3 s;
	char why[1024];
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct responder r;
		struct ing_s3_object o;
		responder_start(&r, cases[i].reply);
		store_at(&s, &r);
		why[0] = 0;
		enum ing_s3_result res = cases[i].op ? ing_s3_check(&s, why, sizeof(why)) :
					 ing_s3_head(&s, "W/F", &o, why, sizeof(why));
		responder_stop(&r);
		if (res != cases[i].res)
			fail_msg("case %zu: %s, expected %s (%s)", i, ing_s3_result_name(res),
				 ing_s3_result_name(cases[i].res), why);
		if (res == ING_S3_OK) {
			assert_string_equal(o.etag, "0123456789abcdef0123456789abcdef");
			assert_true(ing_s3_etag_is_md5(o.etag));
			assert_true(o.has_crc && o.crc32c == 0x1234abcd);
		} else if (res != ING_S3_EXISTS && !strstr(why, cases[i].says)) {
			fail_msg("case %zu: '%s' does not say '%s'", i, why, cases[i].says);
		}
	}
	assert_false(ing_s3_etag_is_md5("0123456789abcdef0123456789abcdef-2"));   /* multipart */
	assert_false(ing_s3_etag_is_md5(""));
	/* the store received other bytes than were sent, in a PUT's reply body: the network or a
	 * proxy is named, not the local file */
	static const char *const digest[] = {
		"HTTP/1.1 400 Bad Request\r\nContent-Length: 58\r\nConnection: close\r\n\r\n"
		XML_ERR("BadDigest"),
		"HTTP/1.1 400 Bad Request\r\nContent-Length: 74\r\nConnection: close\r\n\r\n"
		XML_ERR("XAmzContentSHA256Mismatch"),
	};
	for (int i = 0; i < 2; i++) {
		struct responder r;
		responder_start(&r, digest[i]);
		enum ing_s3_result res = put_file(&r, 10, NULL, why, sizeof(why), 0);
		responder_stop(&r);
		assert_int_equal(res, ING_S3_BAD_DIGEST);
		assert_non_null(strstr(why, "other bytes than this node sent"));
		assert_non_null(strstr(why, "the network, a proxy or the gateway"));
		assert_null(strstr(why, "local file changed"));
	}
	/* nobody listening */
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof(a);
	char url[64];
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &al), 0);
	snprintf(url, sizeof(url), "s3://127.0.0.1:%d/frames", ntohs(a.sin_port));
	close(fd);
	assert_int_equal(ing_s3_parse_url(&s, url, why, sizeof(why)), 0);
	assert_int_equal(ing_s3_check(&s, why, sizeof(why)), ING_S3_UNREACHABLE);
	assert_non_null(strstr(why, "cannot reach"));
}

/* The PUT says what it is: Content-MD5, the payload's SHA-256, create-only or If-Match. */
static void put_headers(void **state)
{
	(void)state;
	struct responder r;
	char why[1024];
	responder_start(&r, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nETag: \"e2fc714c4727ee9395f324cd2e7f331f\"\r\n"
			    "Connection: close\r\n\r\n");
	assert_int_equal(put_file(&r, 10, NULL, why, sizeof(why), 0), ING_S3_OK);
	assert_non_null(strstr(r.req, "content-md5: 4vxxTEcn7pOV8yTNLn8zHw==\r\n"));
	assert_non_null(strstr(r.req, "x-amz-content-sha256: 84d89877f0d4041efb6bf91a16f0248f2fd573e6af05c19f96bedb9f882f7882\r\n"));
	assert_non_null(strstr(r.req, "if-none-match: *\r\n"));
	assert_null(strstr(r.req, "if-match:"));
	assert_non_null(strstr(r.req, "x-amz-meta-crc32c: 00000001\r\n"));
	/* the header set is signed: content-md5 among the signed headers */
	assert_non_null(strstr(r.req, "content-md5;"));
	assert_int_equal(put_file(&r, 10, "0123456789abcdef0123456789abcdef", why, sizeof(why), 0), ING_S3_OK);
	assert_non_null(strstr(r.req, "if-match: 0123456789abcdef0123456789abcdef\r\n"));
	assert_null(strstr(r.req, "if-none-match"));
	responder_stop(&r);
}

/* A 403 for the request's time names the clock: with the code in the body (a PUT), or,
 * without a body (a HEAD), from the reply's Date; a plain 403 still names the keys. */
static void clock_skew(void **state)
{
	(void)state;
	struct responder r;
	struct ing_s3 s;
	char why[1024];
	responder_start(&r, "HTTP/1.1 403 Forbidden\r\nContent-Length: 68\r\nConnection: close\r\n\r\n"
			    XML_ERR("RequestTimeTooSkewed"));
	assert_int_equal(put_file(&r, 10, NULL, why, sizeof(why), 0), ING_S3_CLOCK_SKEW);
	assert_non_null(strstr(why, "clock skew"));
	assert_non_null(strstr(why, "set this node's clock"));
	assert_null(strstr(why, "secret key"));
	responder_stop(&r);

	responder_start_at(&r, "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", true);
	store_at(&s, &r);
	assert_int_equal(ing_s3_check(&s, why, sizeof(why)), ING_S3_CLOCK_SKEW);
	assert_non_null(strstr(why, "clock skew"));
	assert_non_null(strstr(why, "the store's clock is 2 h 0 min ahead of this node's") ||
			strstr(why, "the store's clock is 1 h 59 min ahead of this node's"));
	responder_stop(&r);

	responder_start(&r, "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
	store_at(&s, &r);
	assert_int_equal(ing_s3_check(&s, why, sizeof(why)), ING_S3_DENIED);
	assert_non_null(strstr(why, "check the access and secret key"));
	responder_stop(&r);
}

/*
 * A store that stops answering (a HEAD) or stops reading the body (a PUT of 32 MiB, more
 * than the sockets hold) fails as "no progress for N s", whatever came before: the request
 * would otherwise hang here until the test's watchdog (libcurl's low-speed limit is not
 * set any more; this is the progress check's doing).
 */
static void stall(void **state)
{
	(void)state;
	struct responder r;
	struct ing_s3 s;
	struct ing_s3_object o;
	char why[1024];
	responder_start(&r, NULL);
	store_at(&s, &r);
	s.timeout_ms = 1000;
	assert_int_equal(ing_s3_head(&s, "W/F", &o, why, sizeof(why)), ING_S3_UNREACHABLE);
	assert_non_null(strstr(why, "made no progress for 1 s"));
	assert_int_equal(put_file(&r, 32u << 20, NULL, why, sizeof(why), 1000), ING_S3_UNREACHABLE);
	assert_non_null(strstr(why, "made no progress for 1 s on the upload of W/F"));
	responder_stop(&r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(urls),
		cmocka_unit_test(credentials),
		cmocka_unit_test(keys),
		cmocka_unit_test(answers),
		cmocka_unit_test(put_headers),
		cmocka_unit_test(clock_skew),
		cmocka_unit_test(stall),
	};
	assert_int_equal(ing_s3_global_init(), 0);
	return cmocka_run_group_tests(tests, setup, teardown);
}
