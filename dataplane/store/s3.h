/* SPDX-License-Identifier: Apache-2.0 */
/*
 * s3.h - a small S3 client over libcurl for the object store tier: PUT (create-only, or
 * replacing one exact object), HEAD, ranged GET and a bucket check, signed with libcurl's
 * built-in AWS SigV4 (CURLOPT_AWS_SIGV4). No DPDK: ingestd's tier thread (dataplane/tier/),
 * ingest-verify, ingest-get and ingest-doctor link it (library ing_store: the object store
 * is where tiered frames rest).
 *
 * Pitfalls of libcurl 7.88 (Debian 12) handled here: it signs every header we set (names
 * given lower-case, so its case-sensitive sort is the canonical order) and takes the
 * payload hash from our own x-amz-content-sha256 header (it would hash only a POSTFIELDS
 * body): a PUT carries its body's SHA-256 there and its MD5 in Content-MD5, both of which
 * the store checks against the bytes it receives (XAmzContentSHA256Mismatch, BadDigest),
 * other requests UNSIGNED-PAYLOAD; it signs the URL's path and query as they are, so keys
 * are percent-encoded here and no request carries a query string. Its low-speed limit
 * averages over seconds (a PUT that stalls after a burst ran ~8.6 s on a 3 s limit), so
 * "no progress for timeout_ms" is our own: a progress callback for blocking requests, and
 * s3_req_stalled for a caller that drives a multi handle.
 *
 * An object's key is <prefix><wafer name>/<frame name>, the names exactly the frame file
 * names (ing_id_file_name: plain ids as they are, others percent-encoded), so a bucket
 * listing reads like the frames/ directory. Metadata: x-amz-meta-crc32c (8 hex digits),
 * x-amz-meta-sha256 (the checked SHA-256, 64 hex digits), x-amz-meta-wafer-id and
 * x-amz-meta-frame-id (the ids as sent, ing_id_escape'd).
 *
 * A struct ing_s3 is set up once and then only read: any thread may use it. A struct
 * s3_req belongs to one thread.
 */
#ifndef ING_STORE_S3_H
#define ING_STORE_S3_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <curl/curl.h>

#include "common/ident.h"

#define ING_S3_DEFAULT_REGION "us-east-1"
#define ING_S3_DEFAULT_TIMEOUT_MS 30000u
#define ING_S3_PREFIX_MAX 200
#define ING_S3_KEY_MAX (ING_S3_PREFIX_MAX + 2 * ING_ID_FILE_NAME_MAX + 2)
#define ING_S3_CRED_MAX 128

/* The store: where, who, how. Credentials are never logged (display has none). */
struct ing_s3 {
	char endpoint[320];     /* "http://host:port" */
	char host[256];         /* host[:port] as in the URL */
	bool tls;
	char bucket[64];
	char prefix[ING_S3_PREFIX_MAX + 2]; /* "" or "a/b/" */
	char region[64];
	bool path_style;        /* http://host/bucket/key (default), else http://bucket.host/key */
	char access_key[ING_S3_CRED_MAX + 1];
	char secret_key[ING_S3_CRED_MAX + 1];
	unsigned timeout_ms;    /* connect, and no progress for this long: the request fails */
	char display[400];      /* "s3://host:port/bucket/prefix" for messages */
};

/*
 * Parse s3://HOST[:PORT]/BUCKET[/PREFIX] (plain HTTP; http:// and https:// are taken too)
 * into s (other fields untouched). Bucket: 3..63 of [a-z0-9.-] (upper case and '_' too, as
 * Ceph allows them with path-style requests); prefix: [A-Za-z0-9._~/-], no empty, '.' or
 * '..' component. 0, or -EINVAL with the reason in why.
 */
int ing_s3_parse_url(struct ing_s3 *s, const char *url, char *why, size_t whylen);
/*
 * Read the access and secret key from a file of "name = value" lines: access_key /
 * secret_key (s3cmd's .s3cfg) or aws_access_key_id / aws_secret_access_key (an AWS
 * credentials file); '#' and ';' comments, [section] lines and other keys are skipped.
 * The file must not be readable by group or others. 0, or -errno with the reason in why.
 */
int ing_s3_read_credentials(struct ing_s3 *s, const char *path, char *why, size_t whylen);
/* Defaults: region us-east-1, path-style, timeout ING_S3_DEFAULT_TIMEOUT_MS. */
void ing_s3_init(struct ing_s3 *s);

/* The object key of (wafer, frame) into out (ING_S3_KEY_MAX + 1). 0 or -EINVAL. */
int ing_s3_key(const struct ing_s3 *s, char *out, size_t n, const char *wafer_id,
	       const char *frame_id);

/* How a request ended, for retries and for operators. */
enum ing_s3_result {
	ING_S3_OK = 0,
	ING_S3_EXISTS,        /* 412: create-only PUT found an object under the key */
	ING_S3_NOT_FOUND,     /* 404 NoSuchKey (HEAD/GET of an object) */
	ING_S3_NO_BUCKET,     /* 404 NoSuchBucket */
	ING_S3_DENIED,        /* 403: credentials refused or no permission */
	ING_S3_UNREACHABLE,   /* connect failed, reset, timed out, no progress */
	ING_S3_SERVER,        /* 5xx, 503 SlowDown: the store is in trouble, retry */
	ING_S3_BAD_DIGEST,    /* 400 BadDigest / XAmzContentSHA256Mismatch: the bytes sent are
			       * not the bytes hashed */
	ING_S3_LOCAL,         /* reading the local file failed */
	ING_S3_ERROR,         /* anything else (4xx) */
	ING_S3_CLOCK_SKEW,    /* 403 RequestTimeTooSkewed, or a 403 whose Date is more than
			       * ING_S3_SKEW_MAX_S off this host's clock */
};
/* S3 refuses a request dated more than 15 minutes off its clock; a body-less 403 (a HEAD)
 * whose Date header is this far off ours is taken for that */
#define ING_S3_SKEW_MAX_S (14 * 60)
const char *ing_s3_result_name(enum ing_s3_result r);

/* The metadata a HEAD (or GET) returned. */
struct ing_s3_object {
	int64_t length;         /* Content-Length; -1 unknown */
	char etag[48];          /* without quotes; for a single-part PUT the store's MD5 of the
				 * bytes it received and keeps (radosgw: always, encrypted or
				 * compressed or not; AWS: not with SSE-C/SSE-KMS) */
	bool has_crc;
	uint32_t crc32c;        /* x-amz-meta-crc32c */
	char sha256[65];        /* x-amz-meta-sha256, "" when absent */
};

/* ---------------------------------------------------------------- one request (s3.c) */

enum s3_op { S3_PUT, S3_HEAD, S3_GET, S3_HEAD_BUCKET };

struct s3_req {
	CURL *easy;
	struct curl_slist *hdrs;
	enum s3_op op;
	const struct ing_s3 *s3;
	char key[ING_S3_KEY_MAX + 1];
	/* PUT: the body is len bytes of fd from offset 0, crc32c computed as it goes out */
	int fd;
	uint64_t len, sent;
	uint32_t crc_sent;
	bool read_failed;
	/* GET: the body goes to sink (NULL: dropped, counted) */
	int (*sink)(void *arg, const uint8_t *p, size_t n);
	void *sink_arg;
	uint64_t got;
	bool sink_failed;
	/* progress: the bytes moved either way and when they last moved (s3_req_stalled) */
	uint64_t progress_bytes, progress_ns;
	bool stalled;           /* failed for no progress in s3->timeout_ms */
	/* result (s3_req_done) */
	CURLcode cc;
	long status;
	struct ing_s3_object obj;
	char code[64];          /* the S3 error code (<Code>) of an error reply */
	char body[512];         /* the start of an error reply */
	size_t body_len;
	bool has_date;
	int64_t skew_s;         /* the reply's Date minus this host's clock (has_date) */
	char errbuf[CURL_ERROR_SIZE];
};

/*
 * Set r up for one request (fresh easy handle, headers, callbacks); run it with
 * curl_easy_perform(r->easy) or a multi handle, then s3_req_done. PUT: fd/len set by the
 * caller first; sha256_hex the body's SHA-256 (signed: the store checks it), md5_b64 its
 * MD5 for Content-MD5 (NULL: none; the store checks it too and keeps it as the ETag), crc
 * its CRC-32C, wafer/frame the ids for the metadata; if_match NULL: create-only
 * (If-None-Match: *, an object there answers 412), else replace only the object with this
 * ETag (If-Match; 412 if the object is another). GET: [off, off + len) (len 0: all); sink
 * set by the caller first. 0 or -ENOMEM/-EINVAL (r released).
 */
struct s3_put_args {
	const char *sha256_hex;
	const char *md5_b64;
	uint32_t crc32c;
	const char *wafer_id, *frame_id;
	const char *if_match;
};
int s3_req_put(struct s3_req *r, const struct ing_s3 *s, const char *key, const struct s3_put_args *a);
int s3_req_head(struct s3_req *r, const struct ing_s3 *s, const char *key);
int s3_req_get(struct s3_req *r, const struct ing_s3 *s, const char *key, uint64_t off,
	       uint64_t len);
int s3_req_head_bucket(struct s3_req *r, const struct ing_s3 *s);
/*
 * A caller driving r through a multi handle, from time to time: true when nothing moved
 * either way for s3->timeout_ms (since the request was set up, or its last byte): then
 * remove r from the multi handle and end it with s3_req_done(r, CURLE_OPERATION_TIMEDOUT)
 * (r->stalled is set: ING_S3_UNREACHABLE, "no progress for N s"). The nanoseconds until
 * that point otherwise, in *left_ns (may be NULL): when to look again.
 */
bool s3_req_stalled(struct s3_req *r, uint64_t now_ns, uint64_t *left_ns);
/* After the transfer ended with cc: status, metadata, error code; returns the result. */
enum ing_s3_result s3_req_done(struct s3_req *r, CURLcode cc);
/* One line for logs and Stats: what failed and, where it is the operator's to fix, how. */
void s3_req_describe(const struct s3_req *r, enum ing_s3_result res, char *out, size_t n);
/* Free the easy handle and headers (after curl_multi_remove_handle). Idempotent. */
void s3_req_release(struct s3_req *r);

/* ---------------------------------------------------------------- blocking helpers */

/*
 * The store answers for the bucket with these credentials (HEAD bucket). ING_S3_OK, or
 * the result with why: "cannot reach ...", "credentials refused ... (check ...)", "bucket
 * ... does not exist (create it ...)". Blocking, bounded by s->timeout_ms.
 */
enum ing_s3_result ing_s3_check(const struct ing_s3 *s, char *why, size_t whylen);
/* HEAD of an object. ING_S3_OK and *o, or the result with why. Blocking. */
enum ing_s3_result ing_s3_head(const struct ing_s3 *s, const char *key, struct ing_s3_object *o,
			       char *why, size_t whylen);
/* GET of [off, off + len) (len 0: all) into sink. Blocking. */
enum ing_s3_result ing_s3_get(const struct ing_s3 *s, const char *key, uint64_t off, uint64_t len,
			      int (*sink)(void *arg, const uint8_t *p, size_t n), void *arg,
			      struct ing_s3_object *o, char *why, size_t whylen);

/* curl_global_init once per process (thread-safe); 0 or -EIO. */
int ing_s3_global_init(void);

/* An ETag that can be an MD5: 32 hex digits (a multipart upload's has "-N" appended). */
bool ing_s3_etag_is_md5(const char *etag);

#endif
