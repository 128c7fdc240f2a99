/* SPDX-License-Identifier: Apache-2.0 */
/* test_catalog.c - dataplane/store/catalog.c on a real SQLite file in /tmp. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "dataplane/dataplane.h"   /* ING_XPORT_* */
#include "dataplane/store/store.h"

#define CATALOG_DIR_TEMPLATE "/tmp/ing_test_catalog.XXXXXX"
#include "test_catalog_dir.h"

static struct ing_catalog_row mkrow(uint64_t id, uint32_t crc)
{
	struct ing_catalog_row r;
	memset(&r, 0, sizeof(r));
	snprintf(r.frame_id, sizeof(r.frame_id), "%llu", (unsigned long long)id);
	snprintf(r.wafer_id, sizeof(r.wafer_id), "W-%llu", (unsigned long long)(id % 7));
	r.timestamp = 1700000000000000000ll + (int64_t)id;
	r.length = 4096 + id;
	r.crc32c = crc;
	snprintf(r.path, sizeof(r.path), "frames/%s/%llu.frame", r.wafer_id, (unsigned long long)id);
	r.transport = ING_XPORT_RDMA;
	r.received_ns = 111;
	r.durable_ns = 222;
	return r;
}

/* Look up the row mkrow(id, ...) made: its wafer is W-(id % 7), its frame id the number. */
static int lookup(struct ing_catalog *c, uint64_t id, struct ing_catalog_row *row)
{
	char w[32], f[32];
	snprintf(w, sizeof(w), "W-%llu", (unsigned long long)(id % 7));
	snprintf(f, sizeof(f), "%llu", (unsigned long long)id);
	return ing_catalog_lookup(c, w, f, row);
}

static void assert_row_eq(const struct ing_catalog_row *a, const struct ing_catalog_row *b)
{
	assert_string_equal(a->frame_id, b->frame_id);
	assert_string_equal(a->wafer_id, b->wafer_id);
	assert_true(a->timestamp == b->timestamp);
	assert_true(a->length == b->length);
	assert_int_equal(a->crc32c, b->crc32c);
	assert_string_equal(a->path, b->path);
	assert_int_equal(a->transport, b->transport);
	assert_true(a->received_ns == b->received_ns);
	assert_true(a->durable_ns == b->durable_ns);
}

static void test_insert_lookup(void **state)
{
	(void)state;
	struct ing_catalog *c = ing_catalog_open(db);
	assert_non_null(c);
	assert_int_equal(ing_catalog_count(c), 0);
	struct ing_catalog_row rows[3] = { mkrow(1, 0xdeadbeef), mkrow(2, 0),
					   mkrow(UINT64_MAX - 5, 0xffffffffu) };
	assert_int_equal(ing_catalog_insert(c, rows, 3), 0);
	assert_int_equal(ing_catalog_count(c), 3);
	for (int i = 0; i < 3; i++) {
		struct ing_catalog_row got;
		assert_int_equal(ing_catalog_lookup(c, rows[i].wafer_id, rows[i].frame_id, &got), 0);
		assert_row_eq(&got, &rows[i]);
	}
	assert_int_equal(lookup(c, 3, NULL), -ENOENT);
	assert_int_equal(lookup(c, (uint64_t)INT64_MAX + 1, NULL), -ENOENT);
	assert_int_equal(ing_catalog_insert(c, rows, 0), 0);
	ing_catalog_close(c);
	ing_catalog_close(NULL);
}

static void test_duplicate_rolls_back(void **state)
{
	(void)state;
	struct ing_catalog *c = ing_catalog_open(db);
	assert_non_null(c);
	int64_t before = ing_catalog_count(c);
	assert_true(before >= 3);
	/* 10 and 11 are new, 2 exists: nothing of the batch may land */
	struct ing_catalog_row rows[3] = { mkrow(10, 1), mkrow(11, 2), mkrow(2, 3) };
	assert_int_equal(ing_catalog_insert(c, rows, 3), -EEXIST);
	assert_int_equal(ing_catalog_count(c), before);
	assert_int_equal(lookup(c, 10, NULL), -ENOENT);
	assert_int_equal(lookup(c, 11, NULL), -ENOENT);
	struct ing_catalog_row got;
	assert_int_equal(lookup(c, 2, &got), 0);
	assert_int_equal(got.crc32c, 0);   /* the original row is untouched */
	/* duplicate inside one batch */
	struct ing_catalog_row twice[2] = { mkrow(20, 1), mkrow(20, 1) };
	assert_int_equal(ing_catalog_insert(c, twice, 2), -EEXIST);
	assert_int_equal(lookup(c, 20, NULL), -ENOENT);
	/* the handle still works after a rollback */
	assert_int_equal(ing_catalog_insert(c, rows, 2), 0);
	assert_int_equal(ing_catalog_count(c), before + 2);
	ing_catalog_close(c);
}

static void test_reopen_persists(void **state)
{
	(void)state;
	struct ing_catalog *c = ing_catalog_open(db);
	assert_non_null(c);
	assert_int_equal(ing_catalog_count(c), 5);
	struct ing_catalog_row got, want = mkrow(UINT64_MAX - 5, 0xffffffffu);
	assert_int_equal(lookup(c, UINT64_MAX - 5, &got), 0);
	assert_row_eq(&got, &want);
	ing_catalog_close(c);
}

static void test_two_handles(void **state)
{
	(void)state;
	struct ing_catalog *a = ing_catalog_open(db), *b = ing_catalog_open(db);
	assert_non_null(a);
	assert_non_null(b);
	struct ing_catalog_row big[200];
	for (int i = 0; i < 200; i++)
		big[i] = mkrow(1000 + (uint64_t)i, (uint32_t)i);
	assert_int_equal(ing_catalog_insert(a, big, 100), 0);
	assert_int_equal(ing_catalog_insert(b, big + 100, 100), 0);
	assert_int_equal(lookup(b, 1000, NULL), 0);   /* b sees a's commit */
	assert_int_equal(lookup(a, 1199, NULL), 0);
	assert_int_equal(ing_catalog_count(a), 205);
	assert_int_equal(ing_catalog_insert(b, big + 50, 1), -EEXIST);
	ing_catalog_close(a);
	ing_catalog_close(b);
}

static void test_open_errors(void **state)
{
	(void)state;
	assert_null(ing_catalog_open(NULL));
	assert_null(ing_catalog_open("/nonexistent-dir-ing/x/catalog.db"));
	char notdb[160];
	snprintf(notdb, sizeof(notdb), "%s/garbage.db", dir);
	FILE *f = fopen(notdb, "w");
	assert_non_null(f);
	fputs("this is not a database file, definitely not one at all......................", f);
	fclose(f);
	assert_null(ing_catalog_open(notdb));
}

static void test_disk_full(void **state)
{
	(void)state;
	char mnt[128], path[160];
	snprintf(mnt, sizeof(mnt), "%s/small", dir);
	assert_int_equal(mkdir(mnt, 0755), 0);
	if (mount("tmpfs", mnt, "tmpfs", 0, "size=128k") != 0) {
		fail_msg("cannot mount a small tmpfs (%s): the disk-full case needs root to make its "
			 "own full filesystem (run the unit tests as root; CI does)", strerror(errno));
	}
	snprintf(path, sizeof(path), "%s/catalog.db", mnt);
	struct ing_catalog *c = ing_catalog_open(path);
	int rc = 0;
	int64_t before = -1, after = -2;
	uint64_t id = 1;
	if (c) {
		struct ing_catalog_row rows[16];
		for (int round = 0; round < 200 && rc == 0; round++) {
			before = ing_catalog_count(c);
			for (int i = 0; i < 16; i++) {
				rows[i] = mkrow(id++, 7);
				memset(rows[i].path, 'p', sizeof(rows[i].path) - 1);
			}
			rc = ing_catalog_insert(c, rows, 16);
		}
		after = ing_catalog_count(c);
		ing_catalog_close(c);
	}
	umount2(mnt, MNT_DETACH);
	assert_non_null(c);
	assert_int_equal(rc, -ENOSPC);
	assert_true(before == after);   /* the failed batch left nothing behind */
}

/* disk full, then space comes back: the same handle commits again (no stuck transaction) */
static void test_disk_full_recovers(void **state)
{
	(void)state;
	char mnt[128], path[160], filler[160];
	snprintf(mnt, sizeof(mnt), "%s/small2", dir);
	assert_int_equal(mkdir(mnt, 0755), 0);
	if (mount("tmpfs", mnt, "tmpfs", 0, "size=256k") != 0) {
		fail_msg("cannot mount a small tmpfs (%s): the disk-full case needs root to make its "
			 "own full filesystem (run the unit tests as root; CI does)", strerror(errno));
	}
	snprintf(path, sizeof(path), "%s/catalog.db", mnt);
	snprintf(filler, sizeof(filler), "%s/filler", mnt);
	struct ing_catalog *c = ing_catalog_open(path);
	int rc = 0, rc_after = -1;
	int64_t n_full = -1, n_after = -1;
	uint64_t id = 1;
	struct ing_catalog_row rows[8];
	if (c) {
		/* fill the rest of the file system */
		FILE *f = fopen(filler, "w");
		static char blk[4096];
		while (f && fwrite(blk, 1, sizeof(blk), f) == sizeof(blk) && fflush(f) == 0)
			;
		if (f)
			fclose(f);
		for (int round = 0; round < 400 && rc == 0; round++) {
			for (int i = 0; i < 8; i++) {
				rows[i] = mkrow(id++, 9);
				memset(rows[i].path, 'q', sizeof(rows[i].path) - 1);
			}
			rc = ing_catalog_insert(c, rows, 8);
		}
		n_full = ing_catalog_count(c);
		unlink(filler);
		for (int i = 0; i < 8; i++)
			rows[i] = mkrow(id++, 9);
		rc_after = ing_catalog_insert(c, rows, 8);
		n_after = ing_catalog_count(c);
		ing_catalog_close(c);
	}
	umount2(mnt, MNT_DETACH);
	assert_non_null(c);
	assert_int_equal(rc, -ENOSPC);
	assert_int_equal(rc_after, 0);
	assert_int_equal(n_after, n_full + 8);
}

struct writer {
	const char *db;
	uint64_t base;
	int rc;
};

static void *writer_main(void *arg)
{
	struct writer *w = arg;
	struct ing_catalog *c = ing_catalog_open(w->db);
	struct ing_catalog_row rows[4];
	if (!c) {
		w->rc = -100;
		return NULL;
	}
	for (uint64_t k = 0; k < 150 && !w->rc; k++) {
		for (int i = 0; i < 4; i++)
			rows[i] = mkrow(w->base + k * 4 + (uint64_t)i, 3);
		w->rc = ing_catalog_insert(c, rows, 4);
		if (!w->rc)
			w->rc = lookup(c, w->base + k * 4, NULL);
	}
	ing_catalog_close(c);
	return NULL;
}

/* several persistence workers, one handle each, committing at once: no -EIO from SQLITE_BUSY */
static void test_concurrent_writers(void **state)
{
	(void)state;
	char path[160];
	snprintf(path, sizeof(path), "%s/concurrent.db", dir);
	struct ing_catalog *c = ing_catalog_open(path);   /* schema first, like persist does */
	assert_non_null(c);
	struct writer w[4];
	pthread_t th[4];
	for (int i = 0; i < 4; i++) {
		w[i] = (struct writer){ .db = path, .base = (uint64_t)(i + 1) << 32 };
		assert_int_equal(pthread_create(&th[i], NULL, writer_main, &w[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(w[i].rc, 0);
	}
	assert_int_equal(ing_catalog_count(c), 4 * 150 * 4);
	ing_catalog_close(c);
}

/* (wafer, frame) is the key: the same frame id under two wafers is two frames; string ids
 * of any shape (a GUID, a path, spaces, non-ASCII) come back as they went in. */
static void test_string_ids(void **state)
{
	(void)state;
	static const char *ids[] = { "0b5f9c3e-8d1a-4c2e-9f57-3a1d2b4c5e6f", "wafer-12/frame-7",
				     "../../etc/passwd", "frame with spaces", "fr\xc3\xa4me-\xe6\x97\xa5" };
	struct ing_catalog *c = ing_catalog_open(db);
	assert_non_null(c);
	int64_t before = ing_catalog_count(c);
	for (unsigned i = 0; i < 5; i++) {
		struct ing_catalog_row r[2];
		for (int k = 0; k < 2; k++) {
			memset(&r[k], 0, sizeof(r[k]));
			snprintf(r[k].frame_id, sizeof(r[k].frame_id), "%s", ids[i]);
			snprintf(r[k].wafer_id, sizeof(r[k].wafer_id), k ? "lot 7/w\xc3\xa9" : "A");
			r[k].length = 10 + (uint64_t)k;
			r[k].crc32c = 100 * i + (uint32_t)k;
			snprintf(r[k].path, sizeof(r[k].path), "frames/x/%u-%d.frame", i, k);
		}
		assert_int_equal(ing_catalog_insert(c, r, 2), 0);
		for (int k = 0; k < 2; k++) {
			struct ing_catalog_row got;
			assert_int_equal(ing_catalog_lookup(c, r[k].wafer_id, ids[i], &got), 0);
			assert_string_equal(got.frame_id, ids[i]);
			assert_int_equal(got.crc32c, r[k].crc32c);
			assert_true(got.length == r[k].length);
		}
		assert_int_equal(ing_catalog_lookup(c, "B", ids[i], NULL), -ENOENT);
		assert_int_equal(ing_catalog_insert(c, r, 1), -EEXIST);
	}
	assert_int_equal(ing_catalog_count(c), before + 10);
	ing_catalog_close(c);
}

/* A catalog of schema 1 (INTEGER frame ids, before string ids) is migrated on open. */
static void test_migrate_v1(void **state)
{
	(void)state;
	char path[160], cmd[1024];
	snprintf(path, sizeof(path), "%s/v1.db", dir);
	snprintf(cmd, sizeof(cmd),
		 "sqlite3 '%s' \"CREATE TABLE frames (frame_id INTEGER PRIMARY KEY, wafer_id TEXT NOT NULL,"
		 " timestamp INTEGER, length INTEGER NOT NULL, crc32c INTEGER NOT NULL, path TEXT NOT NULL,"
		 " transport INTEGER, received_ns INTEGER, durable_ns INTEGER);"
		 " CREATE INDEX frames_wafer ON frames(wafer_id);"
		 " INSERT INTO frames VALUES (7, 'W1', 5, 4096, 3735928559, 'frames/W1/7.frame', 2, 1, 2);"
		 " INSERT INTO frames VALUES (-1, 'W2', 6, 10, 1, 'frames/W2/18446744073709551615.frame', 1, 1, 2);\"",
		 path);
	assert_int_equal(system(cmd), 0);
	struct ing_catalog *c = ing_catalog_open(path);
	assert_non_null(c);
	assert_int_equal(ing_catalog_count(c), 2);
	struct ing_catalog_row got;
	assert_int_equal(ing_catalog_lookup(c, "W1", "7", &got), 0);
	assert_int_equal(got.crc32c, 3735928559u);
	assert_string_equal(got.path, "frames/W1/7.frame");
	assert_true(got.length == 4096 && got.timestamp == 5 && got.transport == 2);
	/* a u64 id above INT64_MAX was stored as the same bit pattern */
	assert_int_equal(ing_catalog_lookup(c, "W2", "18446744073709551615", &got), 0);
	assert_string_equal(got.path, "frames/W2/18446744073709551615.frame");
	/* same frame id under another wafer: allowed now */
	struct ing_catalog_row r = got;
	snprintf(r.wafer_id, sizeof(r.wafer_id), "W3");
	assert_int_equal(ing_catalog_insert(c, &r, 1), 0);
	ing_catalog_close(c);
	/* reopening finds schema 3: nothing to migrate, rows intact, every frame local */
	c = ing_catalog_open(path);
	assert_non_null(c);
	assert_int_equal(ing_catalog_count(c), 3);
	assert_int_equal(ing_catalog_lookup(c, "W3", "18446744073709551615", &got), 0);
	assert_int_equal(got.location, ING_LOC_LOCAL);
	ing_catalog_close(c);
	snprintf(cmd, sizeof(cmd), "test \"$(sqlite3 '%s' 'PRAGMA user_version')\" = 3", path);
	assert_int_equal(system(cmd), 0);
}

/* The schema-2 table of an ingestd before the object store tier (no location columns). */
static void make_v2(const char *path)
{
	char cmd[1024];
	snprintf(cmd, sizeof(cmd),
		 "sqlite3 '%s' \"CREATE TABLE frames (wafer_id TEXT NOT NULL, frame_id TEXT NOT NULL,"
		 " timestamp INTEGER, length INTEGER NOT NULL, crc32c INTEGER NOT NULL, path TEXT NOT NULL,"
		 " transport INTEGER, received_ns INTEGER, durable_ns INTEGER,"
		 " PRIMARY KEY (wafer_id, frame_id)) WITHOUT ROWID; PRAGMA user_version = 2;"
		 " INSERT INTO frames VALUES ('W1', 'f1', 5, 4096, 3735928559, 'frames/W1/f1.frame', 2, 1, 2);"
		 " INSERT INTO frames VALUES ('W1', 'f2', 6, 10, 1, 'frames/W1/f2.frame', 1, 1, 3);\"",
		 path);
	assert_int_equal(system(cmd), 0);
}

/*
 * A catalog of schema 2 gets the tier columns on open, in one transaction: its rows read
 * back unchanged and local; the new columns take the tier's values. A read-only open of a
 * schema-2 file (ingest-verify on an old data dir) reads every frame as local, migrating
 * nothing.
 */
static void test_migrate_v2(void **state)
{
	(void)state;
	char path[160], cmd[512];
	snprintf(path, sizeof(path), "%s/v2.db", dir);
	make_v2(path);

	struct ing_catalog *ro = ing_catalog_open_ro(path);
	assert_non_null(ro);
	struct ing_catalog_row got;
	assert_int_equal(ing_catalog_lookup(ro, "W1", "f1", &got), 0);
	assert_int_equal(got.location, ING_LOC_LOCAL);
	assert_string_equal(got.object_md5, "");
	ing_catalog_close(ro);
	snprintf(cmd, sizeof(cmd), "test \"$(sqlite3 '%s' 'PRAGMA user_version')\" = 2", path);
	assert_int_equal(system(cmd), 0);   /* the reader changed nothing */

	struct ing_catalog *c = ing_catalog_open(path);
	assert_non_null(c);
	assert_int_equal(ing_catalog_count(c), 2);
	assert_int_equal(ing_catalog_lookup(c, "W1", "f1", &got), 0);
	assert_int_equal(got.crc32c, 3735928559u);
	assert_true(got.length == 4096 && got.timestamp == 5 && got.transport == 2 && got.durable_ns == 2);
	assert_string_equal(got.path, "frames/W1/f1.frame");
	assert_int_equal(got.location, ING_LOC_LOCAL);
	assert_true(got.tiered_ns == 0 && got.local_deleted_ns == 0);
	ing_catalog_close(c);
	snprintf(cmd, sizeof(cmd), "test \"$(sqlite3 '%s' 'PRAGMA user_version')\" = 3", path);
	assert_int_equal(system(cmd), 0);
	/* the columns work: a tiered frame reads back so, a bad location is refused */
	snprintf(cmd, sizeof(cmd), "sqlite3 '%s' \"UPDATE frames SET location = 'tiered',"
		 " object_md5 = '0123456789abcdef0123456789abcdef', tiered_ns = 7, local_deleted_ns = 8"
		 " WHERE frame_id = 'f2'\"", path);
	assert_int_equal(system(cmd), 0);
	snprintf(cmd, sizeof(cmd), "sqlite3 '%s' \"UPDATE frames SET location = 'elsewhere'\" 2>/dev/null",
		 path);
	assert_int_not_equal(system(cmd), 0);
	c = ing_catalog_open(path);
	assert_non_null(c);
	assert_int_equal(ing_catalog_lookup(c, "W1", "f2", &got), 0);
	assert_int_equal(got.location, ING_LOC_TIERED);
	assert_string_equal(got.object_md5, "0123456789abcdef0123456789abcdef");
	assert_true(got.tiered_ns == 7 && got.local_deleted_ns == 8);
	assert_int_equal(ing_catalog_lookup(c, "W1", "f1", &got), 0);
	assert_int_equal(got.location, ING_LOC_LOCAL);
	ing_catalog_close(c);
}

/* A failed migration leaves the schema-2 file as it was (one transaction). */
static void test_migrate_v2_atomic(void **state)
{
	(void)state;
	char path[160], cmd[512];
	snprintf(path, sizeof(path), "%s/v2ro.db", dir);
	make_v2(path);
	/* an index named like the one schema 3 adds, on another column: the migration's
	 * CREATE INDEX IF NOT EXISTS keeps it, so take a name clash that fails instead */
	snprintf(cmd, sizeof(cmd), "sqlite3 '%s' \"CREATE TABLE frames_both (x);\"", path);
	assert_int_equal(system(cmd), 0);
	assert_null(ing_catalog_open(path));
	snprintf(cmd, sizeof(cmd), "test \"$(sqlite3 '%s' 'PRAGMA user_version')\" = 2 &&"
		 " test \"$(sqlite3 '%s' \"SELECT count(*) FROM pragma_table_info('frames')\")\" = 9",
		 path, path);
	assert_int_equal(system(cmd), 0);
	snprintf(cmd, sizeof(cmd), "sqlite3 '%s' 'DROP TABLE frames_both'", path);
	assert_int_equal(system(cmd), 0);
	struct ing_catalog *c = ing_catalog_open(path);
	assert_non_null(c);
	assert_int_equal(ing_catalog_count(c), 2);
	ing_catalog_close(c);
}

static void test_location_names(void **state)
{
	(void)state;
	for (int l = ING_LOC_LOCAL; l <= ING_LOC_TIERED; l++)
		assert_int_equal(ing_location_parse(ing_location_name((enum ing_location)l)), l);
	assert_int_equal(ing_location_parse("Local"), -1);
	assert_int_equal(ing_location_parse(NULL), -1);
	assert_null(ing_location_name((enum ing_location)3));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_insert_lookup),
		cmocka_unit_test(test_duplicate_rolls_back),
		cmocka_unit_test(test_reopen_persists),
		cmocka_unit_test(test_two_handles),
		cmocka_unit_test(test_open_errors),
		cmocka_unit_test(test_disk_full),
		cmocka_unit_test(test_disk_full_recovers),
		cmocka_unit_test(test_concurrent_writers),
		cmocka_unit_test(test_string_ids),
		cmocka_unit_test(test_migrate_v1),
		cmocka_unit_test(test_migrate_v2),
		cmocka_unit_test(test_migrate_v2_atomic),
		cmocka_unit_test(test_location_names),
	};
	return cmocka_run_group_tests(tests, catalog_dir_setup, catalog_dir_teardown);
}
