/* SPDX-License-Identifier: Apache-2.0 */
/* test_persist.c - dataplane/persist.c end to end: pool -> workers -> files + catalog -> the
 * control mailbox (ING_EV_DONE). */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/clock.h"
#include "common/crc32c.h"
#include "dataplane/dataplane.h"
#include "dataplane/store/store.h"
#include "test_eal.h"
#include "test_thread.h"

#define SLOTS 64

static char dir[64];
static cpu_set_t start_set;   /* the process's cpus before EAL pinned the main thread */
static struct ing_pool *pool;
static struct ing_mbox *acks;   /* stands for the control thread's mailbox */

static int rmrf(const char *d)
{
	char cmd[200];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", d);
	return system(cmd);
}

static int setup(void **state)
{
	(void)state;
	if (test_eal_start(0) != 0)
		return -1;
	struct ing_pool_opts po;
	ing_pool_opts_init(&po);
	po.name = "persist-test";
	po.hugepages = 0;
	if (ing_pool_parse_classes(&po, "8K:32,64K:32") != 0)
		return -1;
	pool = ing_pool_create(&po);
	acks = ing_mbox_create("acks", 256);
	strcpy(dir, "/tmp/ing_test_persist.XXXXXX");
	return pool && acks && mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	ing_mbox_destroy(acks);
	ing_pool_destroy(pool);
	rmrf(dir);
	ing_eal_stop();
	return 0;
}

static struct ing_persist *start(const char *data_dir, enum ing_sink sink, unsigned workers)
{
	struct ing_persist_opts o;
	ing_persist_opts_init(&o);
	assert_int_equal(o.workers, ING_DEFAULT_WORKERS);
	assert_true(o.verify_crc);
	o.data_dir = data_dir;
	o.sink = sink;
	o.workers = workers;
	o.ring_size = 64;
	return ing_persist_start(&o, acks);
}

/* a frame of len bytes whose content depends on seed; crc declared correctly */
static struct ing_frame *mkframe(uint64_t id, const char *wafer, uint64_t len, unsigned seed)
{
	struct ing_frame *f = ing_pool_get(pool, len);
	assert_non_null(f);
	snprintf(f->frame_id, sizeof(f->frame_id), "%llu", (unsigned long long)id);
	f->length = len;
	snprintf(f->wafer_id, sizeof(f->wafer_id), "%s", wafer);
	f->timestamp = 1700000000000000000ll + (int64_t)id;
	for (uint64_t i = 0; i < len; i++)
		f->buf[i] = (uint8_t)((i * 131 + seed * 7 + id) >> 1);
	f->crc32c = ing_crc32c(0, f->buf, len);
	f->has_crc = true;
	f->transport = ING_XPORT_GRPC;
	f->t_received_ns = ing_now_ns();
	return f;
}

static void submit(struct ing_persist *p, struct ing_frame *f)
{
	uint64_t deadline = ing_now_ns() + 60000000000ull;   /* a cap for a hang */
	while (ing_persist_submit(p, f) == -ENOBUFS) {
		assert_true(ing_now_ns() < deadline);
		struct timespec ts = { 0, 1000000 };
		nanosleep(&ts, NULL);
	}
}

/* collect n acks (bounded) */
static void collect(struct ing_frame **out, unsigned n)
{
	unsigned got = 0;
	uint64_t deadline = ing_now_ns() + 60000000000ull;   /* a cap for a hang */
	while (got < n) {
		struct ing_msg m[32];
		unsigned k = ing_mbox_pop(acks, m, n - got < 32 ? n - got : 32);
		for (unsigned i = 0; i < k; i++) {
			assert_int_equal(m[i].kind, ING_EV_DONE);
			out[got++] = m[i].f;
		}
		if (got < n && !k && ing_mbox_idle(acks)) {
			assert_true(ing_now_ns() < deadline);
			assert_true(ing_mbox_wait(acks, 200) >= 0);
		}
	}
}

static struct ing_frame *one(struct ing_persist *p, struct ing_frame *f)
{
	struct ing_frame *r;
	submit(p, f);
	collect(&r, 1);
	assert_ptr_equal(r, f);
	return r;
}

static void frame_path(char *out, size_t n, const char *root, const char *wafer, const char *id)
{
	char rel[600];
	assert_int_equal(ing_store_rel_path(rel, sizeof(rel), wafer, id), 0);
	snprintf(out, n, "%s/%s", root, rel);
}

/* The catalog row of the frame mkframe(n, wafer, ...) made. */
static int cat_lookup(struct ing_catalog *c, const char *wafer, uint64_t n, struct ing_catalog_row *row)
{
	char id[24];
	snprintf(id, sizeof(id), "%llu", (unsigned long long)n);
	return ing_catalog_lookup(c, wafer, id, row);
}

static void check_stored(const char *root, const struct ing_frame *f, const uint8_t *want)
{
	char path[1024];
	frame_path(path, sizeof(path), root, f->wafer_id, f->frame_id);
	FILE *fp = fopen(path, "rb");
	assert_non_null(fp);
	uint8_t *got = malloc(f->length + 1);
	assert_non_null(got);
	assert_int_equal(fread(got, 1, f->length + 1, fp), f->length);
	fclose(fp);
	assert_memory_equal(got, want, f->length);
	free(got);
}

static void test_store_and_catalog(void **state)
{
	(void)state;
	struct ing_persist *p = start(dir, ING_SINK_FILE, 2);
	assert_non_null(p);
	enum { N = 40 };
	static const uint64_t lens[] = { 1, 4095, 4096, 8192, 9000, 65536, 12345 };
	struct ing_frame *f[N], *r[N];
	for (unsigned i = 0; i < N; i++) {
		f[i] = mkframe(1000 + i, i & 1 ? "WAF-1" : "WAF-2", lens[i % 7], 1);
		submit(p, f[i]);
	}
	collect(r, N);
	unsigned seen = 0;
	for (unsigned i = 0; i < N; i++) {
		struct ing_frame *x = r[i];
		assert_int_equal(x->status, ING_E_NONE);
		assert_false(x->duplicate);
		assert_int_equal(x->crc_computed, x->crc32c);
		assert_true(x->t_durable_ns >= x->t_received_ns);
		check_stored(dir, x, x->buf);
		seen |= 0;
	}
	(void)seen;
	struct ing_persist_stats s;
	ing_persist_get_stats(p, &s);
	assert_int_equal(s.frames, N);
	assert_int_equal(s.failures, 0);
	assert_int_equal(s.duplicates, 0);
	assert_true(s.batches >= 1 && s.batches <= N);
	assert_int_equal(s.fsyncs, N);
	ing_persist_stop(p, 10000);

	char db[128];
	snprintf(db, sizeof(db), "%s/catalog.db", dir);
	struct ing_catalog *c = ing_catalog_open(db);
	assert_non_null(c);
	assert_int_equal(ing_catalog_count(c), N);
	for (unsigned i = 0; i < N; i++) {
		struct ing_catalog_row row;
		assert_int_equal(ing_catalog_lookup(c, f[i]->wafer_id, f[i]->frame_id, &row), 0);
		assert_int_equal(row.crc32c, f[i]->crc32c);
		assert_int_equal(row.length, f[i]->length);
		assert_string_equal(row.wafer_id, f[i]->wafer_id);
		assert_int_equal(row.transport, ING_XPORT_GRPC);
		assert_true(row.timestamp == f[i]->timestamp);
		assert_true(row.durable_ns >= row.received_ns && row.received_ns > 0);
		char rel[128];
		ing_store_rel_path(rel, sizeof(rel), f[i]->wafer_id, f[i]->frame_id);
		assert_string_equal(row.path, rel);
	}
	ing_catalog_close(c);
	for (unsigned i = 0; i < N; i++)
		ing_pool_put(f[i]);
	assert_int_equal(ing_pool_free(pool), SLOTS);
}

static void test_crc_mismatch(void **state)
{
	(void)state;
	struct ing_persist *p = start(dir, ING_SINK_FILE, 2);
	assert_non_null(p);
	struct ing_frame *f = mkframe(2000, "WAF-1", 5000, 2);
	f->crc32c ^= 0x1;
	one(p, f);
	assert_int_equal(f->status, ING_E_CRC_MISMATCH);
	assert_non_null(strstr(f->msg, "expected"));
	assert_non_null(strstr(f->msg, "got"));
	assert_int_equal(f->crc_computed, f->crc32c ^ 0x1);
	char path[1024];
	struct stat st;
	frame_path(path, sizeof(path), dir, "WAF-1", "2000");
	assert_int_equal(stat(path, &st), -1);
	/* no declared crc: accepted, the computed one is recorded */
	ing_pool_put(f);
	f = mkframe(2001, "WAF-1", 5000, 2);
	f->has_crc = false;
	f->crc32c = 0;
	one(p, f);
	assert_int_equal(f->status, ING_E_NONE);
	uint32_t crc = f->crc_computed;
	ing_pool_put(f);
	/* bad wafer id and bad length: invalid argument, nothing stored */
	f = mkframe(2002, "WAF-1", 100, 2);
	strcpy(f->wafer_id, "bad\x01wafer");   /* a control character: outside the id rule */
	one(p, f);
	assert_int_equal(f->status, ING_E_INVALID_ARGUMENT);
	assert_false(f->retryable);
	f->length = f->cap + 1;
	strcpy(f->wafer_id, "W");
	one(p, f);
	assert_int_equal(f->status, ING_E_INVALID_ARGUMENT);
	ing_pool_put(f);
	ing_persist_stop(p, 10000);

	char db[128];
	snprintf(db, sizeof(db), "%s/catalog.db", dir);
	struct ing_catalog *c = ing_catalog_open(db);
	assert_non_null(c);
	assert_int_equal(cat_lookup(c, "WAF-1", 2000, NULL), -ENOENT);
	assert_int_equal(cat_lookup(c, "WAF-1", 2002, NULL), -ENOENT);
	struct ing_catalog_row row;
	assert_int_equal(cat_lookup(c, "WAF-1", 2001, &row), 0);
	assert_int_equal(row.crc32c, crc);
	ing_catalog_close(c);
}

/*
 * A frame whose crc32c control computed while copying it in (crc_done): the worker
 * verifies the declared crc against that value, and records it in the catalog.
 */
static void test_crc_precomputed(void **state)
{
	(void)state;
	struct ing_persist *p = start(dir, ING_SINK_FILE, 1);
	assert_non_null(p);
	/* right bytes, but control's crc disagrees with the declared one: refused */
	struct ing_frame *f = mkframe(2100, "WAF-1", 60000, 4);
	f->crc_run = f->crc32c ^ 0x10;
	f->crc_done = true;
	one(p, f);
	assert_int_equal(f->status, ING_E_CRC_MISMATCH);
	assert_true(f->retryable);
	assert_int_equal(f->crc_computed, f->crc32c ^ 0x10);
	ing_pool_put(f);
	/* agreeing: stored, the catalog row carries it */
	f = mkframe(2101, "WAF-1", 60000, 4);
	f->crc_run = f->crc32c;
	f->crc_done = true;
	one(p, f);
	assert_int_equal(f->status, ING_E_NONE);
	uint32_t crc = f->crc32c;
	ing_pool_put(f);
	/* no declared crc: control's is recorded */
	f = mkframe(2102, "WAF-1", 60000, 5);
	f->has_crc = false;
	f->crc_run = f->crc32c;
	f->crc32c = 0;
	f->crc_done = true;
	one(p, f);
	assert_int_equal(f->status, ING_E_NONE);
	uint32_t crc2 = f->crc_computed;
	ing_pool_put(f);
	ing_persist_stop(p, 10000);

	char db[128];
	snprintf(db, sizeof(db), "%s/catalog.db", dir);
	struct ing_catalog *c = ing_catalog_open(db);
	assert_non_null(c);
	struct ing_catalog_row row;
	assert_int_equal(cat_lookup(c, "WAF-1", 2100, NULL), -ENOENT);
	assert_int_equal(cat_lookup(c, "WAF-1", 2101, &row), 0);
	assert_int_equal(row.crc32c, crc);
	assert_int_equal(cat_lookup(c, "WAF-1", 2102, &row), 0);
	assert_int_equal(row.crc32c, crc2);
	ing_catalog_close(c);
}

static void test_duplicates(void **state)
{
	(void)state;
	struct ing_persist *p = start(dir, ING_SINK_FILE, 2);
	assert_non_null(p);
	struct ing_frame *f = mkframe(3000, "WAF-D", 6000, 3);
	one(p, f);
	assert_int_equal(f->status, ING_E_NONE);
	assert_false(f->duplicate);
	uint8_t orig[6000];
	memcpy(orig, f->buf, sizeof(orig));
	ing_pool_put(f);
	char path[1024];
	struct stat st1, st2;
	frame_path(path, sizeof(path), dir, "WAF-D", "3000");
	assert_int_equal(stat(path, &st1), 0);
	struct timespec ts = { 0, 20000000 };
	nanosleep(&ts, NULL);

	/* same id, same bytes: duplicate, OK, not rewritten */
	f = mkframe(3000, "WAF-D", 6000, 3);
	one(p, f);
	assert_int_equal(f->status, ING_E_NONE);
	assert_true(f->duplicate);
	ing_pool_put(f);
	assert_int_equal(stat(path, &st2), 0);
	assert_int_equal(st1.st_ino, st2.st_ino);
	assert_true(st1.st_mtim.tv_sec == st2.st_mtim.tv_sec && st1.st_mtim.tv_nsec == st2.st_mtim.tv_nsec);

	/* same id, other bytes: conflict, refused, file untouched */
	f = mkframe(3000, "WAF-D", 6000, 4);
	one(p, f);
	assert_int_equal(f->status, ING_E_DUPLICATE_CONFLICT);
	assert_false(f->duplicate);
	assert_non_null(strstr(f->msg, "3000"));
	ing_pool_put(f);
	assert_int_equal(stat(path, &st2), 0);
	assert_int_equal(st1.st_ino, st2.st_ino);
	struct ing_frame tmp = { .frame_id = "3000", .length = 6000 };
	strcpy(tmp.wafer_id, "WAF-D");
	check_stored(dir, &tmp, orig);

	/* same id twice back to back (likely one burst): one stored, one duplicate */
	struct ing_frame *a = mkframe(3001, "WAF-D", 100, 5), *b = mkframe(3001, "WAF-D", 100, 5);
	struct ing_frame *c = mkframe(3002, "WAF-D", 100, 5), *d = mkframe(3002, "WAF-D", 100, 6);
	struct ing_frame *r[4];
	submit(p, a);
	submit(p, b);
	submit(p, c);
	submit(p, d);
	collect(r, 4);
	assert_int_equal(a->status, ING_E_NONE);
	assert_int_equal(b->status, ING_E_NONE);
	assert_true(a->duplicate != b->duplicate);
	assert_int_equal(c->status, ING_E_NONE);
	assert_int_equal(d->status, ING_E_DUPLICATE_CONFLICT);
	ing_pool_put(a);
	ing_pool_put(b);
	ing_pool_put(c);
	ing_pool_put(d);

	struct ing_persist_stats s;
	ing_persist_get_stats(p, &s);
	assert_int_equal(s.duplicates, 2);
	assert_int_equal(s.failures, 2);
	ing_persist_stop(p, 10000);
	assert_int_equal(ing_pool_free(pool), SLOTS);
}

static int64_t catalog_rows(const char *root)
{
	char db[160];
	snprintf(db, sizeof(db), "%s/catalog.db", root);
	struct ing_catalog *c = ing_catalog_open(db);
	assert_non_null(c);
	int64_t n = ing_catalog_count(c);
	ing_catalog_close(c);
	return n;
}

/* submit a fresh copy of (id, wafer, len, seed); returns it acked, still the caller's */
static struct ing_frame *resend(struct ing_persist *p, uint64_t id, const char *wafer,
				uint64_t len, unsigned seed)
{
	return one(p, mkframe(id, wafer, len, seed));
}

/*
 * A catalogued frame whose file is gone or has the wrong length is not a duplicate: the
 * re-send writes the file again (same bytes), is ACKed ok and not duplicate, and the
 * catalog keeps its one row. Once the file is back, the next re-send is a duplicate.
 */
static void test_rewrite_lost_file(void **state)
{
	(void)state;
	char rd[128], path[1024];
	snprintf(rd, sizeof(rd), "%s/rewrite", dir);
	struct ing_persist *p = start(rd, ING_SINK_FILE, 2);
	assert_non_null(p);
	enum { LEN = 9000 };
	uint8_t orig[LEN];
	struct ing_frame *f = resend(p, 9100, "WAF-R", LEN, 7);
	assert_int_equal(f->status, ING_E_NONE);
	assert_false(f->duplicate);
	memcpy(orig, f->buf, LEN);
	ing_pool_put(f);
	struct ing_frame ref = { .frame_id = "9100", .length = LEN };
	strcpy(ref.wafer_id, "WAF-R");
	frame_path(path, sizeof(path), rd, "WAF-R", "9100");
	assert_int_equal(catalog_rows(rd), 1);

	/* 1. file deleted */
	assert_int_equal(unlink(path), 0);
	f = resend(p, 9100, "WAF-R", LEN, 7);
	assert_int_equal(f->status, ING_E_NONE);
	assert_false(f->duplicate);
	ing_pool_put(f);
	check_stored(rd, &ref, orig);

	/* 2. file truncated */
	assert_int_equal(truncate(path, LEN / 2), 0);
	f = resend(p, 9100, "WAF-R", LEN, 7);
	assert_int_equal(f->status, ING_E_NONE);
	assert_false(f->duplicate);
	ing_pool_put(f);
	check_stored(rd, &ref, orig);

	/* 3. file longer than the row says */
	FILE *fp = fopen(path, "ab");
	assert_non_null(fp);
	assert_int_equal(fputs("junk", fp) >= 0, 1);
	fclose(fp);
	f = resend(p, 9100, "WAF-R", LEN, 7);
	assert_int_equal(f->status, ING_E_NONE);
	assert_false(f->duplicate);
	ing_pool_put(f);
	check_stored(rd, &ref, orig);

	/* 4. the whole wafer directory lost: recreated */
	char wd[160], cmd[200];
	snprintf(wd, sizeof(wd), "%s/frames/WAF-R", rd);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", wd);
	assert_int_equal(system(cmd), 0);
	f = resend(p, 9100, "WAF-R", LEN, 7);
	assert_int_equal(f->status, ING_E_NONE);
	assert_false(f->duplicate);
	ing_pool_put(f);
	check_stored(rd, &ref, orig);

	/* file back: a duplicate again, not rewritten */
	struct stat st1, st2;
	assert_int_equal(stat(path, &st1), 0);
	f = resend(p, 9100, "WAF-R", LEN, 7);
	assert_int_equal(f->status, ING_E_NONE);
	assert_true(f->duplicate);
	ing_pool_put(f);
	assert_int_equal(stat(path, &st2), 0);
	assert_int_equal(st1.st_ino, st2.st_ino);

	/* file gone and other bytes: still a conflict, nothing written */
	assert_int_equal(unlink(path), 0);
	f = resend(p, 9100, "WAF-R", LEN, 8);
	assert_int_equal(f->status, ING_E_DUPLICATE_CONFLICT);
	assert_false(f->duplicate);
	ing_pool_put(f);
	assert_int_equal(stat(path, &st2), -1);

	/* two copies in one burst with the file gone: one rewrite, one duplicate */
	struct ing_frame *a = mkframe(9100, "WAF-R", LEN, 7), *b = mkframe(9100, "WAF-R", LEN, 7);
	struct ing_frame *r[2];
	submit(p, a);
	submit(p, b);
	collect(r, 2);
	assert_int_equal(a->status, ING_E_NONE);
	assert_int_equal(b->status, ING_E_NONE);
	assert_false(a->duplicate);
	assert_true(b->duplicate);
	ing_pool_put(a);
	ing_pool_put(b);
	check_stored(rd, &ref, orig);

	struct ing_persist_stats s;
	ing_persist_get_stats(p, &s);
	assert_int_equal(s.rewrites, 5);
	assert_int_equal(s.duplicates, 2);
	assert_int_equal(s.failures, 1);
	assert_int_equal(s.bytes, 6 * LEN);
	ing_persist_stop(p, 10000);
	assert_int_equal(catalog_rows(rd), 1);   /* the row kept, nothing inserted again */
	assert_int_equal(ing_pool_free(pool), SLOTS);
}

static void test_null_sink(void **state)
{
	(void)state;
	char nd[128];
	snprintf(nd, sizeof(nd), "%s/nullsink", dir);
	struct ing_persist *p = start(nd, ING_SINK_NULL, 1);
	assert_non_null(p);
	struct ing_frame *f = mkframe(4000, "WAF-N", 3000, 1), *g = mkframe(4001, "WAF-N", 3000, 1);
	g->crc32c++;
	one(p, f);
	one(p, g);
	assert_int_equal(f->status, ING_E_NONE);
	assert_int_equal(g->status, ING_E_CRC_MISMATCH);
	ing_pool_put(f);
	ing_pool_put(g);
	ing_persist_stop(p, 10000);
	struct stat st;
	assert_int_equal(stat(nd, &st), -1);   /* nothing created at all */
}

static void test_stop_drains(void **state)
{
	(void)state;
	char sd[128];
	snprintf(sd, sizeof(sd), "%s/drain", dir);
	struct ing_persist *p = start(sd, ING_SINK_FILE, 2);
	assert_non_null(p);
	enum { N = 48 };
	struct ing_frame *f[N], *r[N];
	for (unsigned i = 0; i < N; i++) {
		f[i] = mkframe(5000 + i, "WAF-S", 8192, 9);
		submit(p, f[i]);
	}
	ing_persist_stop(p, 20000);   /* returns only after every submitted frame is done */
	assert_int_equal(ing_mbox_count(acks), N);
	collect(r, N);
	for (unsigned i = 0; i < N; i++) {
		assert_int_equal(r[i]->status, ING_E_NONE);
		check_stored(sd, r[i], r[i]->buf);
		ing_pool_put(r[i]);
	}
	ing_persist_stop(NULL, 0);
}

static void test_no_space(void **state)
{
	(void)state;
	char mnt[128];
	snprintf(mnt, sizeof(mnt), "%s/small", dir);
	assert_int_equal(mkdir(mnt, 0755), 0);
	if (mount("tmpfs", mnt, "tmpfs", 0, "size=200k") != 0) {
		fail_msg("cannot mount a small tmpfs (%s): the no-space case needs root to make its "
			 "own full filesystem (run the unit tests as root; CI does)", strerror(errno));
	}
	struct ing_persist *p = start(mnt, ING_SINK_FILE, 1);
	assert_non_null(p);
	struct ing_frame *f[8], *r[8];
	for (unsigned i = 0; i < 8; i++) {
		f[i] = mkframe(6000 + i, "WAF-F", 65536, 1);
		submit(p, f[i]);
	}
	collect(r, 8);
	unsigned ok = 0, nospace = 0;
	for (unsigned i = 0; i < 8; i++) {
		if (f[i]->status == ING_E_NONE)
			ok++;
		if (f[i]->status == ING_E_NO_SPACE) {
			nospace++;
			assert_true(f[i]->retryable);
		}
		ing_pool_put(f[i]);
	}
	ing_persist_stop(p, 10000);
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "test -z \"$(find '%s' -name '*.tmp.*')\"", mnt);
	int left = system(cmd);
	umount2(mnt, MNT_DETACH);
	assert_true(ok >= 1);
	assert_true(nospace >= 1);
	assert_int_equal(ok + nospace, 8);
	assert_int_equal(left, 0);
}

static void test_stop_deadline(void **state)
{
	(void)state;
	char sd[128];
	snprintf(sd, sizeof(sd), "%s/deadline", dir);
	struct ing_persist *p = start(sd, ING_SINK_FILE, 1);
	assert_non_null(p);
	enum { N = 30 };   /* the 64K class has 32 slots */
	struct ing_frame *f[N], *r[N];
	for (unsigned i = 0; i < N; i++) {
		f[i] = mkframe(7000 + i, "WAF-T", 60000, 3);
		submit(p, f[i]);
	}
	ing_persist_stop(p, 0);   /* no time to drain: the rest is failed, still acked */
	assert_int_equal(ing_mbox_count(acks), N);
	collect(r, N);
	unsigned ok = 0, down = 0;
	for (unsigned i = 0; i < N; i++) {
		if (r[i]->status == ING_E_NONE)
			ok++;
		else if (r[i]->status == ING_E_SHUTTING_DOWN && r[i]->retryable)
			down++;
		ing_pool_put(r[i]);
	}
	assert_int_equal(ok + down, N);
}

/* a burst of big frames is committed in several groups; all of them land */
static void test_big_frames(void **state)
{
	(void)state;
	struct ing_pool_opts po;
	ing_pool_opts_init(&po);
	po.name = "big";
	po.hugepages = 0;
	po.prefault = false;
	assert_int_equal(ing_pool_parse_classes(&po, "24M:4"), 0);
	struct ing_pool *big = ing_pool_create(&po);
	assert_non_null(big);
	char bd[128];
	snprintf(bd, sizeof(bd), "%s/big", dir);
	struct ing_persist *p = start(bd, ING_SINK_FILE, 1);
	assert_non_null(p);
	struct ing_frame *f[4], *r[4];
	for (unsigned i = 0; i < 4; i++) {
		f[i] = ing_pool_get(big, 20u << 20);
		assert_non_null(f[i]);
		snprintf(f[i]->frame_id, sizeof(f[i]->frame_id), "%u", 8000 + i);
		f[i]->length = (20u << 20) + 4096 * i + 7;
		strcpy(f[i]->wafer_id, "WAF-B");
		memset(f[i]->buf, 0x30 + (int)i, f[i]->length);
		f[i]->crc32c = ing_crc32c(0, f[i]->buf, f[i]->length);
		f[i]->has_crc = true;
		submit(p, f[i]);
	}
	collect(r, 4);
	for (unsigned i = 0; i < 4; i++) {
		assert_int_equal(f[i]->status, ING_E_NONE);
		check_stored(bd, f[i], f[i]->buf);
	}
	struct ing_persist_stats s;
	ing_persist_get_stats(p, &s);
	assert_int_equal(s.frames, 4);
	assert_true(s.batches >= 2);   /* 80 MiB > one 64 MiB group */
	ing_persist_stop(p, 10000);
	for (unsigned i = 0; i < 4; i++)
		ing_pool_put(f[i]);
	ing_pool_destroy(big);
}

/* temp files of a dead writer are removed at start, a live writer's are left alone */
static void test_sweep_stale_temp(void **state)
{
	(void)state;
	char wd[160], stale[224], live[224], keep[224];
	snprintf(wd, sizeof(wd), "%s/sweep/frames/W", dir);
	char cmd[200];
	snprintf(cmd, sizeof(cmd), "mkdir -p '%s'", wd);
	assert_int_equal(system(cmd), 0);
	pid_t dead = fork();
	assert_true(dead >= 0);
	if (dead == 0)
		_exit(0);
	waitpid(dead, NULL, 0);
	snprintf(stale, sizeof(stale), "%s/5.frame.tmp.%d", wd, (int)dead);
	snprintf(live, sizeof(live), "%s/6.frame.tmp.%d", wd, (int)getpid());
	snprintf(keep, sizeof(keep), "%s/7.frame", wd);
	const char *files[] = { stale, live, keep };
	for (int i = 0; i < 3; i++) {
		FILE *fp = fopen(files[i], "w");
		assert_non_null(fp);
		fclose(fp);
	}
	char sd[128];
	snprintf(sd, sizeof(sd), "%s/sweep", dir);
	struct ing_persist *p = start(sd, ING_SINK_FILE, 1);
	assert_non_null(p);
	ing_persist_stop(p, 1000);
	struct stat st;
	assert_int_equal(stat(stale, &st), -1);
	assert_int_equal(stat(live, &st), 0);
	assert_int_equal(stat(keep, &st), 0);
}

/* "0-3,8" (the kernel's Cpus_allowed_list) into a set; false when unparsable */
static bool parse_cpulist(const char *s, cpu_set_t *set)
{
	CPU_ZERO(set);
	while (*s && *s != '\n') {
		char *end;
		long a = strtol(s, &end, 10), b = a;
		if (end == s)
			return false;
		if (*end == '-') {
			s = end + 1;
			b = strtol(s, &end, 10);
			if (end == s)
				return false;
		}
		for (long c = a; c <= b && c < CPU_SETSIZE; c++)
			CPU_SET((int)c, set);
		s = *end == ',' ? end + 1 : end;
	}
	return true;
}

/*
 * The cpus persistence worker idx runs on, from /proc/self/task/<tid>/status (the
 * thread found by its name, ing-persist<idx>: only one ing_persist is alive here).
 */
static void worker_affinity(unsigned idx, cpu_set_t *set)
{
	char name[32], buf[4096];
	snprintf(name, sizeof(name), "ing-persist%u", idx);
	test_thread_file(name, "status", buf, sizeof(buf));
	const char *l = strstr(buf, "\nCpus_allowed_list:");
	assert_non_null(l);
	l += strlen("\nCpus_allowed_list:");
	assert_true(parse_cpulist(l + strspn(l, " \t"), set));
}

static struct ing_persist *start_placed(const int *cpus, unsigned ncpus, const int *unpinned,
					unsigned nunpinned, unsigned workers)
{
	struct ing_persist_opts o;
	ing_persist_opts_init(&o);
	assert_null(o.worker_cpus);
	assert_null(o.unpinned_cpus);
	o.sink = ING_SINK_NULL;
	o.workers = workers;
	o.ring_size = 64;
	o.worker_cpus = cpus;
	o.n_worker_cpus = ncpus;
	o.unpinned_cpus = unpinned;
	o.n_unpinned_cpus = nunpinned;
	return ing_persist_start(&o, acks);
}

static void print_set(const char *what, const cpu_set_t *set)
{
	print_message("%s:", what);
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, set))
			print_message(" %d", c);
	print_message("\n");
}

/*
 * Workers started from a thread pinned to one cpu (as EAL pins ingestd's main thread)
 * do not inherit that cpu: not pinned means the process's whole set, pinned means
 * exactly the planned cpu, per worker.
 */
static void test_worker_placement(void **state)
{
	(void)state;
	cpu_set_t saved, one_cpu, all, got;
	int start_cpus[CPU_SETSIZE];
	unsigned nstart = 0;
	int first = -1, second = -1;

	for (int c = 0; c < CPU_SETSIZE; c++) {
		if (!CPU_ISSET(c, &start_set))
			continue;
		start_cpus[nstart++] = c;
		if (first < 0)
			first = c;
		else if (second < 0)
			second = c;
	}
	assert_true(nstart >= 1);
	if (second < 0)
		print_message("only one cpu allowed: the placement checks are weak here\n");
	assert_int_equal(pthread_getaffinity_np(pthread_self(), sizeof(saved), &saved), 0);
	CPU_ZERO(&one_cpu);
	CPU_SET(first, &one_cpu);
	assert_int_equal(pthread_setaffinity_np(pthread_self(), sizeof(one_cpu), &one_cpu), 0);

	/* 1. not pinned, the start-up set given (what ingestd does): exactly that set */
	struct ing_persist *p = start_placed(NULL, 0, start_cpus, nstart, 2);
	assert_non_null(p);
	for (unsigned i = 0; i < 2; i++) {
		worker_affinity(i, &got);
		if (!CPU_EQUAL(&got, &start_set)) {
			print_set("worker", &got);
			print_set("expected", &start_set);
		}
		assert_true(CPU_EQUAL(&got, &start_set));
	}
	ing_persist_stop(p, 1000);

	/* 2. not pinned, no set given: every cpu the kernel allows (>= the start-up set) */
	long nconf = sysconf(_SC_NPROCESSORS_CONF);
	CPU_ZERO(&all);
	for (long c = 0; c < nconf && c < CPU_SETSIZE; c++)
		CPU_SET((int)c, &all);
	p = start_placed(NULL, 0, NULL, 0, 2);
	assert_non_null(p);
	for (unsigned i = 0; i < 2; i++) {
		cpu_set_t both;
		worker_affinity(i, &got);
		CPU_AND(&both, &got, &start_set);
		assert_true(CPU_EQUAL(&both, &start_set));
		if (CPU_EQUAL(&start_set, &all))
			assert_true(CPU_EQUAL(&got, &all));
	}
	ing_persist_stop(p, 1000);

	/* 3. a per-worker plan with an unpinned entry, round-robin past its end: 2,-1,2 ... */
	int a = second >= 0 ? second : first;
	int plan[] = { a, -1, first };
	p = start_placed(plan, 3, start_cpus, nstart, 4);
	assert_non_null(p);
	worker_affinity(0, &got);
	assert_int_equal(CPU_COUNT(&got), 1);
	assert_true(CPU_ISSET(a, &got));
	worker_affinity(1, &got);
	assert_true(CPU_EQUAL(&got, &start_set));
	worker_affinity(2, &got);
	assert_int_equal(CPU_COUNT(&got), 1);
	assert_true(CPU_ISSET(first, &got));
	worker_affinity(3, &got);   /* 3 % 3 = 0 */
	assert_int_equal(CPU_COUNT(&got), 1);
	assert_true(CPU_ISSET(a, &got));
	/* they still work */
	struct ing_frame *f = mkframe(9200, "WAF-P", 100, 1);
	one(p, f);
	assert_int_equal(f->status, ING_E_NONE);
	ing_pool_put(f);
	ing_persist_stop(p, 1000);

	/* the caller's own mask is not touched */
	assert_int_equal(pthread_getaffinity_np(pthread_self(), sizeof(got), &got), 0);
	assert_true(CPU_EQUAL(&got, &one_cpu));
	assert_int_equal(pthread_setaffinity_np(pthread_self(), sizeof(saved), &saved), 0);
}

static void test_bad_opts(void **state)
{
	(void)state;
	struct ing_persist_opts o;
	ing_persist_opts_init(&o);
	assert_null(ing_persist_start(&o, acks));   /* file sink without data_dir */
	o.data_dir = dir;
	assert_null(ing_persist_start(&o, NULL));
	o.workers = 0;
	assert_null(ing_persist_start(&o, acks));
}

/*
 * String ids end to end through persistence: a GUID, a path, a path escape, spaces and
 * non-ASCII, each under two wafers (the same frame id under two wafers is two frames),
 * land byte-exact in files inside the data dir and are found in the catalog by their
 * original ids.
 */
static void test_string_ids(void **state)
{
	(void)state;
	static const char *ids[] = { "0b5f9c3e-8d1a-4c2e-9f57-3a1d2b4c5e6f", "wafer-12/frame-7",
				     "../../etc/passwd", "frame with spaces", "fr\xc3\xa4me-\xe6\x97\xa5", ".." };
	static const char *wafers[] = { "lot 7/w\xc3\xa9", "A" };
	enum { NI = sizeof(ids) / sizeof(ids[0]), N = 2 * NI };
	char sd[128], real_sd[PATH_MAX];
	snprintf(sd, sizeof(sd), "%s/strings", dir);
	struct ing_persist *p = start(sd, ING_SINK_FILE, 2);
	assert_non_null(p);
	assert_non_null(realpath(sd, real_sd));
	struct ing_frame *f[N], *r[N];
	for (unsigned i = 0; i < N; i++) {
		f[i] = mkframe(7700 + i, wafers[i / NI], 3000 + i, 11);
		snprintf(f[i]->frame_id, sizeof(f[i]->frame_id), "%s", ids[i % NI]);
		submit(p, f[i]);
	}
	collect(r, N);
	for (unsigned i = 0; i < N; i++) {
		assert_int_equal(f[i]->status, ING_E_NONE);
		assert_false(f[i]->duplicate);
		check_stored(sd, f[i], f[i]->buf);
		/* the file is inside the data dir, whatever the id says */
		char path[1024], real[PATH_MAX];
		frame_path(path, sizeof(path), sd, f[i]->wafer_id, f[i]->frame_id);
		assert_non_null(realpath(path, real));
		assert_memory_equal(real, real_sd, strlen(real_sd));
		assert_int_equal(real[strlen(real_sd)], '/');
	}
	ing_persist_stop(p, 10000);
	char db[256];
	snprintf(db, sizeof(db), "%s/catalog.db", sd);
	struct ing_catalog *c = ing_catalog_open(db);
	assert_non_null(c);
	assert_int_equal(ing_catalog_count(c), N);
	for (unsigned i = 0; i < N; i++) {
		struct ing_catalog_row row;
		assert_int_equal(ing_catalog_lookup(c, wafers[i / NI], ids[i % NI], &row), 0);
		assert_string_equal(row.frame_id, ids[i % NI]);
		assert_int_equal(row.length, f[i]->length);
		assert_int_equal(row.crc32c, f[i]->crc32c);
		ing_pool_put(f[i]);
	}
	ing_catalog_close(c);
	/* nothing was written outside: the data dir's parent holds no stray entries */
	char cmd[512];
	snprintf(cmd, sizeof(cmd), "test ! -e '%s/etc' && test ! -e '%s/../etc'", sd, sd);
	assert_int_equal(system(cmd), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_store_and_catalog),
		cmocka_unit_test(test_string_ids),
		cmocka_unit_test(test_crc_mismatch),
		cmocka_unit_test(test_crc_precomputed),
		cmocka_unit_test(test_duplicates),
		cmocka_unit_test(test_rewrite_lost_file),
		cmocka_unit_test(test_null_sink),
		cmocka_unit_test(test_stop_drains),
		cmocka_unit_test(test_no_space),
		cmocka_unit_test(test_stop_deadline),
		cmocka_unit_test(test_big_frames),
		cmocka_unit_test(test_sweep_stale_temp),
		cmocka_unit_test(test_worker_placement),
		cmocka_unit_test(test_bad_opts),
	};
	/* before setup starts EAL, which pins this thread to lcore 0 */
	if (sched_getaffinity(0, sizeof(start_set), &start_set) != 0)
		return 1;
	return cmocka_run_group_tests(tests, setup, teardown);
}
