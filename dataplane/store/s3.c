/* SPDX-License-Identifier: Apache-2.0 */
/*
 * s3.c - the S3 requests of the object store tier over libcurl (s3.h): URL and credentials
 * parsing, request set-up, result classification, and blocking helpers for the tools.
 */
#include "dataplane/store/s3.h"
#include "common/clock.h"
#include "common/crc32c.h"
#include "common/log.h"
#include "common/token.h"

#include <ctype.h>
#include <stdarg.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#define COMP "s3"
#define UPLOAD_BUFFER (512u << 10)
#define DOWNLOAD_BUFFER (256u << 10)

void ing_s3_init(struct ing_s3 *s)
{
	memset(s, 0, sizeof(*s));
	snprintf(s->region, sizeof(s->region), "%s", ING_S3_DEFAULT_REGION);
	s->path_style = true;
	s->timeout_ms = ING_S3_DEFAULT_TIMEOUT_MS;
}

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static CURLcode global_rc = CURLE_FAILED_INIT;

static void global_init(void)
{
	global_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

int ing_s3_global_init(void)
{
	pthread_once(&global_once, global_init);
	if (global_rc != CURLE_OK) {
		ING_ERR(COMP, "libcurl initialisation failed: %s", curl_easy_strerror(global_rc));
		return -EIO;
	}
	return 0;
}

/* ---------------------------------------------------------------- URL, credentials */

static bool bucket_char(char c)
{
	return isalnum((unsigned char)c) || c == '.' || c == '-' || c == '_';
}

static bool prefix_char(char c)
{
	return isalnum((unsigned char)c) || c == '.' || c == '-' || c == '_' || c == '~' || c == '/';
}

int ing_s3_parse_url(struct ing_s3 *s, const char *url, char *why, size_t whylen)
{
	const char *p;
	bool tls = false;

	if (!strncmp(url, "s3://", 5)) {
		p = url + 5;
	} else if (!strncmp(url, "http://", 7)) {
		p = url + 7;
	} else if (!strncmp(url, "https://", 8)) {
		p = url + 8;
		tls = true;
	} else {
		snprintf(why, whylen, "'%.96s' is not s3://HOST:PORT/BUCKET[/PREFIX]", url);
		return -EINVAL;
	}
	const char *slash = strchr(p, '/');
	size_t hl = slash ? (size_t)(slash - p) : strlen(p);
	if (hl == 0 || hl >= sizeof(s->host)) {
		snprintf(why, whylen, "'%.96s': no host (want s3://HOST:PORT/BUCKET)", url);
		return -EINVAL;
	}
	for (size_t i = 0; i < hl; i++) {
		char c = p[i];
		if (!(isalnum((unsigned char)c) || c == '.' || c == '-' || c == ':' || c == '[' || c == ']')) {
			snprintf(why, whylen, "'%.96s': the host '%.*s' holds '%c'", url, (int)hl, p, c);
			return -EINVAL;
		}
	}
	const char *colon = memrchr(p, ':', hl);
	const char *rb = memrchr(p, ']', hl);
	if (colon && (!rb || colon > rb)) {   /* a port */
		size_t pl = hl - (size_t)(colon + 1 - p);
		char port[8] = "";
		if (pl == 0 || pl > 5) {
			snprintf(why, whylen, "'%.96s': bad port", url);
			return -EINVAL;
		}
		memcpy(port, colon + 1, pl);
		char *end;
		unsigned long v = strtoul(port, &end, 10);
		if (*end || v == 0 || v > 65535) {
			snprintf(why, whylen, "'%.96s': port '%s' is not 1..65535", url, port);
			return -EINVAL;
		}
	}
	if (!slash || !slash[1]) {
		snprintf(why, whylen, "'%.96s': no bucket (want s3://HOST:PORT/BUCKET[/PREFIX])", url);
		return -EINVAL;
	}
	const char *b = slash + 1, *bend = strchr(b, '/');
	size_t bl = bend ? (size_t)(bend - b) : strlen(b);
	if (bl < 3 || bl > 63) {
		snprintf(why, whylen, "'%.96s': a bucket name has 3..63 characters", url);
		return -EINVAL;
	}
	for (size_t i = 0; i < bl; i++)
		if (!bucket_char(b[i])) {
			snprintf(why, whylen, "'%.96s': the bucket name holds '%c' (letters, digits, '.', '-', '_')",
				 url, b[i]);
			return -EINVAL;
		}
	const char *pre = bend ? bend + 1 : "";
	size_t pl = strlen(pre);
	while (pl && pre[pl - 1] == '/')   /* "bucket/prefix/" == "bucket/prefix" */
		pl--;
	if (pl > ING_S3_PREFIX_MAX) {
		snprintf(why, whylen, "'%.96s': the key prefix is longer than %d bytes", url, ING_S3_PREFIX_MAX);
		return -EINVAL;
	}
	for (size_t i = 0; i < pl; i++) {
		if (!prefix_char(pre[i])) {
			snprintf(why, whylen, "'%.96s': the key prefix holds '%c' (letters, digits, '._~-/')",
				 url, pre[i]);
			return -EINVAL;
		}
		/* components: not empty, not . or .. */
		if (i == 0 || pre[i - 1] == '/') {
			size_t cl = strcspn(pre + i, "/");
			if (cl > pl - i)
				cl = pl - i;
			if (cl == 0 || (cl == 1 && pre[i] == '.') || (cl == 2 && pre[i] == '.' && pre[i + 1] == '.')) {
				snprintf(why, whylen, "'%.96s': the key prefix has an empty, '.' or '..' component",
					 url);
				return -EINVAL;
			}
		}
	}
	s->tls = tls;
	snprintf(s->host, sizeof(s->host), "%.*s", (int)hl, p);
	snprintf(s->endpoint, sizeof(s->endpoint), "%s://%s", tls ? "https" : "http", s->host);
	snprintf(s->bucket, sizeof(s->bucket), "%.*s", (int)bl, b);
	if (pl)
		snprintf(s->prefix, sizeof(s->prefix), "%.*s/", (int)pl, pre);
	else
		s->prefix[0] = 0;
	snprintf(s->display, sizeof(s->display), "%s://%s/%s%s%.*s", tls ? "https" : "s3", s->host,
		 s->bucket, pl ? "/" : "", (int)pl, pre);
	return 0;
}

static char *trim(char *t)
{
	while (*t == ' ' || *t == '\t')
		t++;
	size_t n = strlen(t);
	while (n && (t[n - 1] == ' ' || t[n - 1] == '\t' || t[n - 1] == '\r' || t[n - 1] == '\n'))
		t[--n] = 0;
	return t;
}

static bool key_ok(const char *v)
{
	size_t n = strlen(v);
	if (n == 0 || n > ING_S3_CRED_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)v[i] <= 0x20 || (unsigned char)v[i] >= 0x7f)
			return false;
	return true;
}

int ing_s3_read_credentials(struct ing_s3 *s, const char *path, char *why, size_t whylen)
{
	char line[1024];
	unsigned ln = 0;
	int rc = 0;
	char ak[ING_S3_CRED_MAX + 1] = "", sk[ING_S3_CRED_MAX + 1] = "";

	int fd = ing_secret_file_open(path, why, whylen);
	if (fd < 0)
		return fd;
	FILE *f = fdopen(fd, "r");
	if (!f) {
		rc = -errno;
		snprintf(why, whylen, "%s", strerror(-rc));
		close(fd);
		return rc;
	}
	while (fgets(line, sizeof(line), f)) {
		ln++;
		char *t = trim(line);
		if (!*t || *t == '#' || *t == ';' || *t == '[')
			continue;
		char *eq = strchr(t, '=');
		if (!eq)
			continue;   /* not ours to judge: other tools' files have other lines */
		*eq = 0;
		char *k = trim(t), *v = trim(eq + 1);
		size_t vl = strlen(v);
		if (vl >= 2 && (v[0] == '"' || v[0] == '\'') && v[vl - 1] == v[0]) {
			v[vl - 1] = 0;
			v++;
		}
		char *dst = NULL;
		if (!strcmp(k, "access_key") || !strcmp(k, "aws_access_key_id"))
			dst = ak;
		else if (!strcmp(k, "secret_key") || !strcmp(k, "aws_secret_access_key"))
			dst = sk;
		if (!dst)
			continue;
		if (!key_ok(v)) {
			rc = -EINVAL;
			snprintf(why, whylen, "line %u: %s must be 1..%d printable characters without spaces",
				 ln, k, ING_S3_CRED_MAX);
			break;
		}
		snprintf(dst, ING_S3_CRED_MAX + 1, "%s", v);
	}
	explicit_bzero(line, sizeof(line));
	fclose(f);
	if (!rc && (!ak[0] || !sk[0])) {
		rc = -EINVAL;
		snprintf(why, whylen, "no %s (want 'access_key = ...' and 'secret_key = ...' lines)",
			 !ak[0] ? "access_key" : "secret_key");
	}
	if (!rc) {
		memcpy(s->access_key, ak, sizeof(ak));
		memcpy(s->secret_key, sk, sizeof(sk));
	}
	explicit_bzero(sk, sizeof(sk));
	return rc;
}

int ing_s3_key(const struct ing_s3 *s, char *out, size_t n, const char *wafer_id, const char *frame_id)
{
	char w[ING_ID_FILE_NAME_MAX + 1], f[ING_ID_FILE_NAME_MAX + 1];
	if (ing_id_file_name(w, sizeof(w), wafer_id) || ing_id_file_name(f, sizeof(f), frame_id))
		return -EINVAL;
	if ((size_t)snprintf(out, n, "%s%s/%s", s->prefix, w, f) >= n)
		return -ENAMETOOLONG;
	return 0;
}

/* ---------------------------------------------------------------- requests */

const char *ing_s3_result_name(enum ing_s3_result r)
{
	static const char *const n[] = { "ok", "exists", "not found", "no bucket", "denied",
					 "unreachable", "server error", "bad digest", "local error",
					 "error", "clock skew" };
	return (unsigned)r < sizeof(n) / sizeof(n[0]) ? n[r] : "?";
}

/* key -> the URL path: RFC 3986 unreserved characters and '/' as they are, else %XX */
static int object_url(const struct ing_s3 *s, const char *key, char *out, size_t n)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t o;
	if (s->path_style)
		o = (size_t)snprintf(out, n, "%s/%s/", s->endpoint, s->bucket);
	else
		o = (size_t)snprintf(out, n, "%s://%s.%s/", s->tls ? "https" : "http", s->bucket, s->host);
	if (o >= n)
		return -ENAMETOOLONG;
	for (const char *k = key ? key : ""; *k; k++) {
		unsigned char c = (unsigned char)*k;
		if (isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~' || c == '/') {
			if (o + 1 >= n)
				return -ENAMETOOLONG;
			out[o++] = (char)c;
		} else {
			if (o + 3 >= n)
				return -ENAMETOOLONG;
			out[o++] = '%';
			out[o++] = hex[c >> 4];
			out[o++] = hex[c & 15];
		}
	}
	out[o] = 0;
	if (!key && s->path_style && o > 0)
		out[o - 1] = 0;   /* the bucket itself: http://host/bucket */
	return 0;
}

static size_t on_read(char *buf, size_t size, size_t nitems, void *arg)
{
	struct s3_req *r = arg;
	size_t want = size * nitems;
	if (r->sent >= r->len)
		return 0;
	if (want > r->len - r->sent)
		want = (size_t)(r->len - r->sent);
	ssize_t got;
	do
		got = pread(r->fd, buf, want, (off_t)r->sent);
	while (got < 0 && errno == EINTR);
	if (got <= 0) {   /* an error, or the file is shorter than it was: never send less */
		r->read_failed = true;
		return CURL_READFUNC_ABORT;
	}
	r->crc_sent = ing_crc32c(r->crc_sent, buf, (size_t)got);
	r->sent += (uint64_t)got;
	return (size_t)got;
}

/* libcurl rewinds the body to resend it (a redirect, an auth round): only to the start */
static int on_seek(void *arg, curl_off_t offset, int origin)
{
	struct s3_req *r = arg;
	if (origin != SEEK_SET || offset != 0)
		return CURL_SEEKFUNC_CANTSEEK;
	r->sent = 0;
	r->crc_sent = 0;
	return CURL_SEEKFUNC_OK;
}

/* "No progress for timeout_ms" (libcurl's low-speed limit averages over seconds): the
 * bytes moved either way and when they last moved; a blocking request ends here, one on
 * a multi handle where its driver calls s3_req_stalled (this runs only when libcurl does). */
static int on_progress(void *arg, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
		       curl_off_t ulnow)
{
	struct s3_req *r = arg;
	(void)dltotal;
	(void)ultotal;
	uint64_t b = (uint64_t)dlnow + (uint64_t)ulnow, now = ing_now_ns();
	if (b != r->progress_bytes) {
		r->progress_bytes = b;
		r->progress_ns = now;
		return 0;
	}
	return s3_req_stalled(r, now, NULL) ? 1 : 0;
}

bool s3_req_stalled(struct s3_req *r, uint64_t now_ns, uint64_t *left_ns)
{
	uint64_t limit = (uint64_t)r->s3->timeout_ms * 1000000ull;
	uint64_t idle = now_ns > r->progress_ns ? now_ns - r->progress_ns : 0;
	if (idle >= limit) {
		r->stalled = true;
		if (left_ns)
			*left_ns = 0;
		return true;
	}
	if (left_ns)
		*left_ns = limit - idle;
	return false;
}

static size_t on_write(char *p, size_t size, size_t nmemb, void *arg)
{
	struct s3_req *r = arg;
	size_t n = size * nmemb;
	long status = 0;
	curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &status);
	if (r->op == S3_GET && (status == 200 || status == 206)) {
		if (r->sink && r->sink(r->sink_arg, (const uint8_t *)p, n) != 0) {
			r->sink_failed = true;
			return 0;   /* aborts the transfer */
		}
		r->got += n;
		return n;
	}
	size_t room = sizeof(r->body) - 1 - r->body_len;
	size_t k = n < room ? n : room;
	memcpy(r->body + r->body_len, p, k);
	r->body_len += k;
	r->body[r->body_len] = 0;
	return n;
}

static int req_begin(struct s3_req *r, const struct ing_s3 *s, enum s3_op op, const char *key,
		     const char *payload_sha256)
{
	int keep_fd = r->fd;
	uint64_t keep_len = r->len;
	int (*sink)(void *, const uint8_t *, size_t) = r->sink;
	void *sink_arg = r->sink_arg;
	char url[sizeof(s->endpoint) + sizeof(s->bucket) + 3 * ING_S3_KEY_MAX + 8];

	memset(r, 0, sizeof(*r));
	r->fd = keep_fd;
	r->len = keep_len;
	r->sink = sink;
	r->sink_arg = sink_arg;
	r->op = op;
	r->s3 = s;
	r->obj.length = -1;
	if (key)
		snprintf(r->key, sizeof(r->key), "%s", key);
	if (object_url(s, key, url, sizeof(url)))
		return -ENAMETOOLONG;
	r->easy = curl_easy_init();
	if (!r->easy)
		return -ENOMEM;
	char sigv4[160];
	snprintf(sigv4, sizeof(sigv4), "aws:amz:%s:s3", s->region);
	CURL *e = r->easy;
	curl_easy_setopt(e, CURLOPT_URL, url);
	curl_easy_setopt(e, CURLOPT_AWS_SIGV4, sigv4);
	curl_easy_setopt(e, CURLOPT_USERNAME, s->access_key);
	curl_easy_setopt(e, CURLOPT_PASSWORD, s->secret_key);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_ERRORBUFFER, r->errbuf);
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)s->timeout_ms);
	/* "no progress for timeout_ms", either way (a store that stops reading the body, or one
	 * that holds the reply back while its disk is gone): on_progress / s3_req_stalled */
	r->progress_ns = ing_now_ns();
	curl_easy_setopt(e, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(e, CURLOPT_XFERINFOFUNCTION, on_progress);
	curl_easy_setopt(e, CURLOPT_XFERINFODATA, r);
	curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_write);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, r);
	curl_easy_setopt(e, CURLOPT_PRIVATE, r);
	curl_easy_setopt(e, CURLOPT_BUFFERSIZE, (long)DOWNLOAD_BUFFER);
	char h[100];
	snprintf(h, sizeof(h), "x-amz-content-sha256: %s", payload_sha256 ? payload_sha256 : "UNSIGNED-PAYLOAD");
	r->hdrs = curl_slist_append(NULL, h);
	return r->hdrs ? 0 : -ENOMEM;
}

static int req_add(struct s3_req *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int req_add(struct s3_req *r, const char *fmt, ...)
{
	char h[600];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(h, sizeof(h), fmt, ap);
	va_end(ap);
	struct curl_slist *l = curl_slist_append(r->hdrs, h);
	if (!l)
		return -ENOMEM;
	r->hdrs = l;
	return 0;
}

static int req_finish_setup(struct s3_req *r, int rc)
{
	if (rc == 0 && curl_easy_setopt(r->easy, CURLOPT_HTTPHEADER, r->hdrs) != CURLE_OK)
		rc = -EINVAL;
	if (rc)
		s3_req_release(r);
	return rc;
}

int s3_req_put(struct s3_req *r, const struct ing_s3 *s, const char *key, const struct s3_put_args *a)
{
	char ew[3 * ING_ID_MAX + 1], ef[3 * ING_ID_MAX + 1];
	int rc = req_begin(r, s, S3_PUT, key, a->sha256_hex);
	if (rc == 0 && a->md5_b64)
		rc = req_add(r, "content-md5: %s", a->md5_b64);
	if (rc == 0)
		rc = req_add(r, "x-amz-meta-sha256: %s", a->sha256_hex);
	if (rc == 0)
		rc = req_add(r, "content-type: application/octet-stream");
	/* create-only: an object already there answers 412; a replacement: only of the object
	 * with that ETag (radosgw Pacific compares If-Match with the ETag as stored, without
	 * quotes; the caller chooses the form) */
	if (rc == 0)
		rc = a->if_match ? req_add(r, "if-match: %s", a->if_match) : req_add(r, "if-none-match: *");
	if (rc == 0)
		rc = req_add(r, "x-amz-meta-crc32c: %08x", a->crc32c);
	if (rc == 0)
		rc = req_add(r, "x-amz-meta-wafer-id: %s", ing_id_escape(ew, sizeof(ew), a->wafer_id));
	if (rc == 0)
		rc = req_add(r, "x-amz-meta-frame-id: %s", ing_id_escape(ef, sizeof(ef), a->frame_id));
	if (rc == 0) {
		CURL *e = r->easy;
		curl_easy_setopt(e, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(e, CURLOPT_INFILESIZE_LARGE, (curl_off_t)r->len);
		curl_easy_setopt(e, CURLOPT_READFUNCTION, on_read);
		curl_easy_setopt(e, CURLOPT_READDATA, r);
		curl_easy_setopt(e, CURLOPT_SEEKFUNCTION, on_seek);
		curl_easy_setopt(e, CURLOPT_SEEKDATA, r);
		curl_easy_setopt(e, CURLOPT_UPLOAD_BUFFERSIZE, (long)UPLOAD_BUFFER);
	}
	return req_finish_setup(r, rc);
}

int s3_req_head(struct s3_req *r, const struct ing_s3 *s, const char *key)
{
	int rc = req_begin(r, s, S3_HEAD, key, NULL);
	if (rc == 0)
		curl_easy_setopt(r->easy, CURLOPT_NOBODY, 1L);
	return req_finish_setup(r, rc);
}

int s3_req_head_bucket(struct s3_req *r, const struct ing_s3 *s)
{
	int rc = req_begin(r, s, S3_HEAD_BUCKET, NULL, NULL);
	if (rc == 0)
		curl_easy_setopt(r->easy, CURLOPT_NOBODY, 1L);
	return req_finish_setup(r, rc);
}

int s3_req_get(struct s3_req *r, const struct ing_s3 *s, const char *key, uint64_t off, uint64_t len)
{
	int rc = req_begin(r, s, S3_GET, key, NULL);
	if (rc == 0 && (off || len)) {
		if (len)
			rc = req_add(r, "range: bytes=%" PRIu64 "-%" PRIu64, off, off + len - 1);
		else
			rc = req_add(r, "range: bytes=%" PRIu64 "-", off);
	}
	return req_finish_setup(r, rc);
}

void s3_req_release(struct s3_req *r)
{
	if (r->easy)
		curl_easy_cleanup(r->easy);
	r->easy = NULL;
	curl_slist_free_all(r->hdrs);
	r->hdrs = NULL;
}

static void header_value(struct s3_req *r, const char *name, char *out, size_t n)
{
	struct curl_header *h = NULL;
	out[0] = 0;
	if (curl_easy_header(r->easy, name, 0, CURLH_HEADER, -1, &h) == CURLHE_OK && h && h->value)
		snprintf(out, n, "%s", h->value);
}

enum ing_s3_result s3_req_done(struct s3_req *r, CURLcode cc)
{
	char v[128];
	r->cc = cc;
	curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &r->status);
	if (r->status >= 200 && r->status < 300) {
		header_value(r, "etag", v, sizeof(v));
		char *e = v;
		size_t el = strlen(e);
		if (el >= 2 && e[0] == '"' && e[el - 1] == '"') {
			e[el - 1] = 0;
			e++;
		}
		snprintf(r->obj.etag, sizeof(r->obj.etag), "%.47s", e);
		header_value(r, "content-length", v, sizeof(v));
		if (v[0])
			r->obj.length = strtoll(v, NULL, 10);
		header_value(r, "x-amz-meta-crc32c", v, sizeof(v));
		char *end;
		unsigned long c = strtoul(v, &end, 16);
		r->obj.has_crc = v[0] && !*end && strlen(v) == 8;
		r->obj.crc32c = (uint32_t)c;
		header_value(r, "x-amz-meta-sha256", v, sizeof(v));
		snprintf(r->obj.sha256, sizeof(r->obj.sha256), "%.64s", strlen(v) == 64 ? v : "");
	}
	if (r->status > 0) {
		/* the store's clock against ours: a 403 for a request dated too far off names the
		 * clock, not the keys (a HEAD's 403 has no body to say RequestTimeTooSkewed) */
		header_value(r, "date", v, sizeof(v));
		time_t d = v[0] ? curl_getdate(v, NULL) : -1;
		r->has_date = d > 0;
		r->skew_s = d > 0 ? (int64_t)d - ing_wall_ns() / 1000000000 : 0;
	}
	const char *a = strstr(r->body, "<Code>"), *b = a ? strstr(a, "</Code>") : NULL;
	if (a && b && b - a - 6 < (ptrdiff_t)sizeof(r->code))
		snprintf(r->code, sizeof(r->code), "%.*s", (int)(b - a - 6), a + 6);
	if (r->read_failed)
		return ING_S3_LOCAL;
	if (cc != CURLE_OK) {
		if (r->sink_failed)
			return ING_S3_LOCAL;
		if (r->status >= 400)
			goto by_status;
		return ING_S3_UNREACHABLE;
	}
by_status:
	if (r->status >= 200 && r->status < 300)
		return ING_S3_OK;
	if (r->status == 412)
		return ING_S3_EXISTS;
	if (r->status == 404)
		return r->op == S3_HEAD_BUCKET || !strcmp(r->code, "NoSuchBucket") ? ING_S3_NO_BUCKET :
										      ING_S3_NOT_FOUND;
	if (r->status == 403 && (!strcmp(r->code, "RequestTimeTooSkewed") ||
				 (!r->code[0] && r->has_date && llabs(r->skew_s) > ING_S3_SKEW_MAX_S)))
		return ING_S3_CLOCK_SKEW;
	if (r->status == 403 || r->status == 401)
		return ING_S3_DENIED;
	if (r->status == 400 && (!strcmp(r->code, "BadDigest") || !strcmp(r->code, "XAmzContentSHA256Mismatch")))
		return ING_S3_BAD_DIGEST;
	if (r->status >= 500 || r->status == 429 || r->status == 408)
		return ING_S3_SERVER;
	if (r->status == 0)
		return ING_S3_UNREACHABLE;
	return ING_S3_ERROR;
}

/* "12 min 5 s ahead of" for a skew in seconds (the store's clock minus ours) */
static void fmt_skew(int64_t skew_s, char *out, size_t n)
{
	int64_t a = llabs(skew_s);
	if (a >= 3600)
		snprintf(out, n, "%lld h %lld min", (long long)(a / 3600), (long long)(a % 3600 / 60));
	else if (a >= 60)
		snprintf(out, n, "%lld min %lld s", (long long)(a / 60), (long long)(a % 60));
	else
		snprintf(out, n, "%lld s", (long long)a);
	snprintf(out + strlen(out), n - strlen(out), " %s", skew_s >= 0 ? "ahead of" : "behind");
}

void s3_req_describe(const struct s3_req *r, enum ing_s3_result res, char *out, size_t n)
{
	const struct ing_s3 *s = r->s3;
	const char *what = r->op == S3_PUT ? "upload of" : r->op == S3_GET ? "read of" :
			   r->op == S3_HEAD ? "check of" : "check of bucket";
	const char *key = r->op == S3_HEAD_BUCKET ? s->bucket : r->key;
	const char *code = r->code[0] ? r->code : "";
	char skew[48];

	switch (res) {
	case ING_S3_OK:
		snprintf(out, n, "ok");
		break;
	case ING_S3_EXISTS:
		snprintf(out, n, "%s %s: an object is already stored under the key", what, key);
		break;
	case ING_S3_NOT_FOUND:
		snprintf(out, n, "%s %s: no such object in %s", what, key, s->display);
		break;
	case ING_S3_NO_BUCKET:
		snprintf(out, n, "bucket '%s' does not exist on %s: create it (e.g. s3cmd mb s3://%s) or "
			 "fix --tier", s->bucket, s->endpoint, s->bucket);
		break;
	case ING_S3_CLOCK_SKEW:
		if (r->has_date) {
			fmt_skew(r->skew_s, skew, sizeof(skew));
			snprintf(out, n, "clock skew: %s refused the %s %s as dated too far from its own clock "
				 "(HTTP %ld%s%s): the store's clock is %s this node's; set this node's clock "
				 "(chrony or systemd-timesyncd; S3 takes requests within 15 minutes)", s->endpoint,
				 what, key, r->status, code[0] ? " " : "", code, skew);
		} else {
			snprintf(out, n, "clock skew: %s refused the %s %s as dated too far from its own clock "
				 "(HTTP %ld %s): set this node's clock (chrony or systemd-timesyncd)", s->endpoint,
				 what, key, r->status, code);
		}
		break;
	case ING_S3_DENIED:
		if (!strcmp(code, "SignatureDoesNotMatch"))
			snprintf(out, n, "%s refused the request's signature (HTTP %ld SignatureDoesNotMatch) for "
				 "bucket '%s': check the secret key in the --tier-credentials file", s->endpoint,
				 r->status, s->bucket);
		else if (!strcmp(code, "InvalidAccessKeyId"))
			snprintf(out, n, "%s does not know the access key (HTTP %ld InvalidAccessKeyId): check "
				 "the access key in the --tier-credentials file", s->endpoint, r->status);
		else
			snprintf(out, n, "%s refused the credentials or the access (HTTP %ld%s%s) to bucket '%s': "
				 "check the access and secret key in the --tier-credentials file and the user's "
				 "permissions", s->endpoint, r->status, code[0] ? " " : "", code, s->bucket);
		break;
	case ING_S3_UNREACHABLE:
		if (r->stalled)
			snprintf(out, n, "the object store %s made no progress for %u s on the %s %s (it stopped "
				 "reading or answering): given up, retrying (--tier-timeout)", s->endpoint,
				 (s->timeout_ms + 999) / 1000, what, key);
		else
			snprintf(out, n, "cannot reach the object store %s: %s", s->endpoint,
				 r->errbuf[0] ? r->errbuf : curl_easy_strerror(r->cc));
		break;
	case ING_S3_SERVER:
		snprintf(out, n, "the object store %s answered HTTP %ld%s%s to the %s %s", s->endpoint,
			 r->status, code[0] ? " " : "", code, what, key);
		break;
	case ING_S3_BAD_DIGEST:
		snprintf(out, n, "%s %s: the store received other bytes than this node sent (%s: the "
			 "checksum of the body, computed from the frame's catalogued bytes, does not match what "
			 "arrived): something between the node and the store altered them (the network, a "
			 "proxy or the gateway); the local copy is intact", what, key,
			 code[0] ? code : "bad digest");
		break;
	case ING_S3_LOCAL:
		snprintf(out, n, "%s %s: %s", what, key, r->read_failed ?
			 "reading the local file failed or it is shorter than catalogued" :
			 "the receiver refused the bytes");
		break;
	default:
		snprintf(out, n, "%s %s: HTTP %ld%s%s%s%s", what, key, r->status, code[0] ? " " : "",
			 code, r->cc != CURLE_OK ? ": " : "",
			 r->cc != CURLE_OK ? (r->errbuf[0] ? r->errbuf : curl_easy_strerror(r->cc)) : "");
		break;
	}
}

/* ---------------------------------------------------------------- blocking helpers */

static enum ing_s3_result run(struct s3_req *r, int setup_rc, char *why, size_t whylen)
{
	if (setup_rc) {
		snprintf(why, whylen, "cannot set up the request: %s", strerror(-setup_rc));
		return ING_S3_ERROR;
	}
	CURLcode cc = curl_easy_perform(r->easy);
	enum ing_s3_result res = s3_req_done(r, cc);
	if (res != ING_S3_OK && why)
		s3_req_describe(r, res, why, whylen);
	s3_req_release(r);
	return res;
}

enum ing_s3_result ing_s3_check(const struct ing_s3 *s, char *why, size_t whylen)
{
	struct s3_req r = { .fd = -1 };
	if (ing_s3_global_init())
		return ING_S3_ERROR;
	return run(&r, s3_req_head_bucket(&r, s), why, whylen);
}

enum ing_s3_result ing_s3_head(const struct ing_s3 *s, const char *key, struct ing_s3_object *o,
			       char *why, size_t whylen)
{
	struct s3_req r = { .fd = -1 };
	if (ing_s3_global_init())
		return ING_S3_ERROR;
	int rc = s3_req_head(&r, s, key);
	enum ing_s3_result res = run(&r, rc, why, whylen);
	if (o)
		*o = r.obj;
	return res;
}

enum ing_s3_result ing_s3_get(const struct ing_s3 *s, const char *key, uint64_t off, uint64_t len,
			      int (*sink)(void *arg, const uint8_t *p, size_t n), void *arg,
			      struct ing_s3_object *o, char *why, size_t whylen)
{
	struct s3_req r = { .fd = -1, .sink = sink, .sink_arg = arg };
	if (ing_s3_global_init())
		return ING_S3_ERROR;
	int rc = s3_req_get(&r, s, key, off, len);
	enum ing_s3_result res = run(&r, rc, why, whylen);
	if (o)
		*o = r.obj;
	return res;
}

bool ing_s3_etag_is_md5(const char *etag)
{
	size_t i;
	for (i = 0; etag[i]; i++)
		if (!isxdigit((unsigned char)etag[i]))
			return false;
	return i == 32;
}
