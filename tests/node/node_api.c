// SPDX-License-Identifier: Apache-2.0
/*
 * node_api - the ingest node driven through its library API (control/node/node.h), no ingestd
 * process: a start that must fail as a usage error (a cpu this machine lacks) releases
 * everything; then a real node on 127.0.0.1 (port picked by the kernel, RDMA off) takes a
 * frame from libingest in another thread, which asks the node to stop once the frame is
 * DURABLE; ing_node_wait returns 0 (clean stop), the frame's file holds the bytes sent and
 * its catalog row (read back with dataplane/store/) names them. Bounded: the producer gives
 * up after 60 s and stops the node anyway. Exit 0 pass, 1 fail.
 */
#include "control/node/node.h"
#include "dataplane/store/store.h"
#include "ingest/producer.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define FRAME_LEN (300u * 1024u + 7u)   /* not a multiple of 4 KiB */
#define WAFER "node-api-w"
#define FRAME "node-api-1"

static int failures;
#define CHECK(cond, ...)                                                             \
	do {                                                                         \
		if (!(cond)) {                                                       \
			fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
			fprintf(stderr, __VA_ARGS__);                                \
			fputc('\n', stderr);                                         \
			failures++;                                                  \
		}                                                                    \
	} while (0)

struct producer_run {
	struct ing_node *node;
	int port;
	uint8_t *data;
	uint32_t crc;
	/* results */
	int connected;
	int durable;
	struct ing_ack ack;
	char err[256];
};

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void *producer_thread(void *arg)
{
	struct producer_run *r = arg;
	struct ing_producer_opts po;
	char server[64];

	snprintf(server, sizeof(server), "127.0.0.1:%d", r->port);
	ing_producer_opts_init(&po);
	po.server = server;
	po.transport = ING_TRANSPORT_GRPC;
	po.client_name = "node_api test";
	struct ing_producer *p = ing_producer_connect(&po, r->err, sizeof(r->err));
	if (p) {
		r->connected = 1;
		struct ing_frame_desc d = { .frame_id = FRAME, .wafer_id = WAFER, .data = r->data,
					    .length = FRAME_LEN, .crc32c = r->crc, .has_crc = 1 };
		int rc = ing_producer_submit(p, &d);
		if (rc)
			snprintf(r->err, sizeof(r->err), "submit: %s", strerror(-rc));
		uint64_t end = now_ms() + 60000;
		while (!rc && !r->durable && now_ms() < end) {
			struct ing_ack acks[4];
			int n = ing_producer_poll(p, acks, 4, 100);
			if (n < 0) {
				snprintf(r->err, sizeof(r->err), "poll: %s", strerror(-n));
				break;
			}
			for (int i = 0; i < n; i++) {
				if (acks[i].stage == ING_ACK_DURABLE || !acks[i].ok) {
					r->ack = acks[i];
					r->durable = acks[i].ok && acks[i].stage == ING_ACK_DURABLE;
					end = 0;   /* a final answer either way */
				}
			}
		}
		ing_producer_close(p, 2000);
	}
	ing_node_stop(r->node);   /* from this thread: the control loop runs in main's */
	return NULL;
}

static int read_file(const char *path, uint8_t *buf, size_t cap, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = read(fd, buf, cap);
	int e = n < 0 ? -errno : 0;
	close(fd);
	*len = n > 0 ? (size_t)n : 0;
	return e;
}

int main(void)
{
	char base[] = "/tmp/node-api.XXXXXX", dir_bad[64], dir[64], path[PATH_MAX];
	struct ing_ingestd_opts o;
	struct ing_node *node = NULL;
	int rc;

	if (!mkdtemp(base)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(dir_bad, sizeof(dir_bad), "%s/bad", base);
	snprintf(dir, sizeof(dir), "%s/data", base);

	/* 1. a usage error: nothing is left started (the good start below needs EAL) */
	ing_ingestd_opts_init(&o);
	o.listen = "127.0.0.1:0";
	o.data_dir = dir_bad;
	o.pool = "1M:4";
	o.workers = 1;
	o.rdma = 0;
	o.lcores = "4000";
	node = (struct ing_node *)&o;   /* must be reset to NULL */
	rc = ing_node_start(&o, NULL, &node);
	CHECK(rc == -EINVAL, "start with --lcores 4000 returned %d, expected -EINVAL", rc);
	CHECK(node == NULL, "*out not NULL after a failed start");

	/* 2. a real node on loopback, stopped by another thread through the API */
	o.data_dir = dir;
	o.lcores = NULL;
	rc = ing_node_start(&o, NULL, &node);
	CHECK(rc == 0 && node, "start failed: %d", rc);
	if (rc || !node)
		return 1;
	struct producer_run r = { .node = node, .port = ing_node_port(node) };
	CHECK(r.port > 0 && r.port < 65536, "port %d", r.port);
	r.data = malloc(FRAME_LEN);
	if (!r.data)
		return 1;
	for (unsigned i = 0; i < FRAME_LEN; i++)
		r.data[i] = (uint8_t)(i * 131u + (i >> 9));
	r.crc = ing_crc32c(0, r.data, FRAME_LEN);
	pthread_t t;
	if (pthread_create(&t, NULL, producer_thread, &r)) {
		fprintf(stderr, "FAIL: pthread_create\n");
		return 1;
	}
	int status = ing_node_wait(node);   /* the control loop, on this thread */
	pthread_join(t, NULL);
	ing_node_destroy(node);
	CHECK(status == 0, "ing_node_wait returned %d, expected 0 (clean stop)", status);
	CHECK(r.connected, "producer could not connect: %s", r.err);
	CHECK(r.durable, "frame not DURABLE: stage %d ok %d code %d '%s' (%s)", (int)r.ack.stage,
	      r.ack.ok, r.ack.code, r.ack.msg, r.err);
	CHECK(!r.durable || r.ack.crc32c == r.crc, "node crc32c %08x, sent %08x", r.ack.crc32c, r.crc);

	/* 3. what the node stored: the file and its catalog row */
	char rel[512];
	rc = ing_store_rel_path(rel, sizeof(rel), WAFER, FRAME);
	CHECK(rc == 0, "ing_store_rel_path: %d", rc);
	snprintf(path, sizeof(path), "%s/%s", dir, rel);
	uint8_t *back = malloc(FRAME_LEN + 1);
	size_t len = 0;
	rc = back ? read_file(path, back, FRAME_LEN + 1, &len) : -ENOMEM;
	CHECK(rc == 0 && len == FRAME_LEN, "%s: rc %d, %zu bytes (want %u)", path, rc, len, FRAME_LEN);
	CHECK(rc == 0 && len == FRAME_LEN && !memcmp(back, r.data, FRAME_LEN),
	      "%s: bytes differ from what was sent", path);
	snprintf(path, sizeof(path), "%s/catalog.db", dir);
	struct ing_catalog *cat = ing_catalog_open_ro(path);
	CHECK(cat != NULL, "cannot open %s", path);
	if (cat) {
		struct ing_catalog_row row;
		rc = ing_catalog_lookup(cat, WAFER, FRAME, &row);
		CHECK(rc == 0, "catalog lookup: %d", rc);
		CHECK(rc || (row.length == FRAME_LEN && row.crc32c == r.crc && !strcmp(row.path, rel)),
		      "catalog row: length %" PRIu64 " crc %08x path '%s'", row.length, row.crc32c,
		      row.path);
		CHECK(ing_catalog_count(cat) == 1, "catalog has %" PRId64 " rows, expected 1",
		      ing_catalog_count(cat));
		ing_catalog_close(cat);
	}
	free(back);
	free(r.data);
	if (!failures) {
		char cmd[PATH_MAX + 16];
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base);
		if (system(cmd) != 0)
			fprintf(stderr, "could not remove %s\n", base);
		printf("node_api: PASS (port %d, frame %u bytes DURABLE, clean stop)\n", r.port, FRAME_LEN);
		return 0;
	}
	fprintf(stderr, "node_api: %d check(s) failed; data kept in %s\n", failures, base);
	return 1;
}
