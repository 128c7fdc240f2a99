/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_tier_db.c - dataplane/tier/tier_db.c on a real catalog in /tmp: the outbox trigger
 * queues a frame in the persistence worker's own transaction (a rolled-back batch queues
 * none), backfill once, oldest first, back-off, 'both' and out of the outbox in one
 * transaction (a row no longer queued once uploaded), deletion candidates oldest first after the retention, 'tiered', a lost
 * object queued again; the location counts kept by the catalog's own transactions equal
 * the frame files on disk across many drained backlogs (the outbox's key is never reused),
 * and are counted again at start; an outbox of the first form is migrated; since when
 * objects are checked against the store's digest; a catalog rebuilt from the files
 * (ingest-catalog rebuild) keeps what the tier knew, and the frames that have no file, and
 * its location counts are the files on disk again at the next start; frames deleted from
 * the catalog under the tier (ingest-catalog prune) leave no upload behind that would fail.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <fcntl.h>
#include <inttypes.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "common/crc32c.h"

#include "dataplane/store/store.h"
#include "dataplane/tier/tier_internal.h"

#define CATALOG_DIR_TEMPLATE "/tmp/ing_test_tier_db.XXXXXX"
#include "test_catalog_dir.h"

static struct ing_catalog_row row(const char *frame, uint64_t len, int64_t durable_ns)
{
	struct ing_catalog_row r;
	memset(&r, 0, sizeof(r));
	snprintf(r.wafer_id, sizeof(r.wafer_id), "W");
	snprintf(r.frame_id, sizeof(r.frame_id), "%s", frame);
	snprintf(r.path, sizeof(r.path), "frames/W/%s.frame", frame);
	r.length = len;
	r.crc32c = (uint32_t)len * 7u;
	r.durable_ns = durable_ns;
	return r;
}

static uint64_t local_bytes(struct tier_db *t, uint64_t *frames)
{
	struct tier_census cs;
	assert_int_equal(tier_db_usage(t, &cs), 0);
	if (frames)
		*frames = cs.frames[ING_LOC_LOCAL] + cs.frames[ING_LOC_BOTH];
	return cs.bytes[ING_LOC_LOCAL] + cs.bytes[ING_LOC_BOTH];
}

static void outbox(void **state)
{
	(void)state;
	struct ing_catalog *c = ing_catalog_open(db);
	assert_non_null(c);
	struct ing_catalog_row r[3] = { row("a", 10, 100), row("b", 20, 200), row("c", 30, 300) };
	assert_int_equal(ing_catalog_insert(c, r, 2), 0);   /* before the tier: backfilled */

	struct tier_db *t = tier_db_open(db);
	assert_non_null(t);
	assert_true(tier_db_digest_since(t) == INT64_MAX);   /* not enabled yet */
	assert_int_equal(tier_db_enable(t), 0);
	int64_t since = tier_db_digest_since(t);
	assert_true(since > 0 && since < INT64_MAX);
	struct tier_census cs;
	assert_int_equal(tier_db_usage(t, &cs), 0);
	assert_true(cs.frames[ING_LOC_LOCAL] == 2 && cs.bytes[ING_LOC_LOCAL] == 30);

	/* in the persistence transaction: a batch that rolls back queues and counts nothing */
	struct ing_catalog_row dup[2] = { row("c", 30, 300), row("a", 10, 100) };
	assert_int_equal(ing_catalog_insert(c, dup, 2), -EEXIST);
	assert_int_equal(local_bytes(t, NULL), 30);
	assert_int_equal(ing_catalog_insert(c, &r[2], 1), 0);
	assert_int_equal(local_bytes(t, NULL), 60);

	struct tier_row q[8];
	int64_t now = 1000;
	assert_int_equal(tier_db_due(t, now, q, 8), 3);
	assert_string_equal(q[0].frame_id, "a");   /* oldest first */
	assert_string_equal(q[2].frame_id, "c");
	assert_true(q[0].seq < q[1].seq && q[1].seq < q[2].seq);
	assert_true(q[1].length == 20 && q[1].crc32c == 140 && !strcmp(q[1].path, "frames/W/b.frame"));
	/* a failed attempt backs the frame off; the others stay due */
	assert_int_equal(tier_db_failed(t, &q[0], now + 500, "store away"), 0);
	struct tier_backlog bl;
	assert_int_equal(tier_db_backlog(t, &bl), 0);
	assert_true(bl.frames == 3 && bl.bytes == 60 && bl.oldest_ms > 0 && bl.next_due_ms == 0);
	assert_int_equal(tier_db_due(t, now, q, 8), 2);
	assert_string_equal(q[0].frame_id, "b");
	assert_true(tier_db_next_due(t, now) == now + 500);   /* when the tier wakes for it */
	assert_true(tier_db_next_due(t, now + 500) == 0);
	assert_int_equal(tier_db_due(t, now + 500, q, 8), 3);
	assert_int_equal(q[0].attempts, 1);
	assert_true(tier_db_oldest_both(t) == INT64_MAX);   /* nothing verified yet */

	/* uploaded: 'both' and out of the outbox (its row no longer queued, again and again: the
	 * prepared statement is reset); the local bytes are the same */
	for (int i = 0; i < 3; i++) {
		assert_int_equal(tier_db_queued(t, &q[i]), 1);
		assert_int_equal(tier_db_uploaded(t, &q[i], "0123456789abcdef0123456789abcdef", 5000), 0);
		assert_int_equal(tier_db_queued(t, &q[i]), 0);
		assert_int_equal(tier_db_queued(t, &q[i]), 0);
	}
	assert_int_equal(tier_db_backlog(t, &bl), 0);
	assert_true(bl.frames == 0 && bl.bytes == 0 && bl.oldest_ms == 0);
	assert_int_equal(tier_db_usage(t, &cs), 0);
	assert_true(cs.frames[ING_LOC_BOTH] == 3 && cs.bytes[ING_LOC_BOTH] == 60 && cs.frames[ING_LOC_LOCAL] == 0);
	assert_true(tier_db_oldest_both(t) == 100);   /* the retention's next copy: a's */
	struct ing_catalog_row got;
	assert_int_equal(ing_catalog_lookup(c, "W", "b", &got), 0);
	assert_int_equal(got.location, ING_LOC_BOTH);
	assert_string_equal(got.object_md5, "0123456789abcdef0123456789abcdef");
	assert_true(got.tiered_ns == 5000);

	/* deletion candidates: verified, durable before the cutoff, oldest first */
	assert_int_equal(tier_db_candidates(t, 250, q, 8), 2);
	assert_string_equal(q[0].frame_id, "a");
	assert_string_equal(q[1].object_md5, "0123456789abcdef0123456789abcdef");
	assert_true(q[1].tiered_ns == 5000);
	assert_int_equal(tier_db_local_deleted(t, &q[0], 6000), 0);
	assert_int_equal(local_bytes(t, NULL), 50);
	assert_int_equal(tier_db_candidates(t, INT64_MAX, q, 8), 2);
	assert_string_equal(q[0].frame_id, "b");
	/* the object of b is gone from the store: local again, queued again */
	assert_int_equal(tier_db_requeue(t, &q[0]), 0);
	assert_int_equal(tier_db_due(t, INT64_MAX, q, 8), 1);
	assert_string_equal(q[0].frame_id, "b");
	assert_int_equal(tier_db_usage(t, &cs), 0);
	assert_true(cs.frames[ING_LOC_LOCAL] == 1 && cs.frames[ING_LOC_BOTH] == 1 &&
		    cs.frames[ING_LOC_TIERED] == 1 && cs.bytes[ING_LOC_TIERED] == 10 &&
		    cs.bytes[ING_LOC_LOCAL] + cs.bytes[ING_LOC_BOTH] == 50);
	assert_int_equal(ing_catalog_lookup(c, "W", "a", &got), 0);
	assert_true(got.location == ING_LOC_TIERED && got.local_deleted_ns == 6000);

	/* a run without --tier drops the triggers: new frames are not queued, the queue stays;
	 * enabled again, the frames still local are queued once (no duplicate rows), and the
	 * counts are counted again from the catalog */
	assert_int_equal(tier_db_disable(t), 0);
	struct ing_catalog_row d = row("d", 40, 400);
	assert_int_equal(ing_catalog_insert(c, &d, 1), 0);
	assert_int_equal(tier_db_backlog(t, &bl), 0);
	assert_true(bl.frames == 1);
	assert_int_equal(tier_db_enable(t), 0);
	assert_int_equal(tier_db_backlog(t, &bl), 0);
	assert_true(bl.frames == 2 && bl.bytes == 60);
	assert_int_equal(local_bytes(t, NULL), 90);
	assert_int_equal(tier_db_enable(t), 0);   /* the trigger is there: no second backfill */
	assert_int_equal(tier_db_backlog(t, &bl), 0);
	assert_true(bl.frames == 2);
	assert_true(tier_db_digest_since(t) == since);   /* set once */
	tier_db_close(t);
	ing_catalog_close(c);
}

/* the frame files under data/frames and their bytes, as ls would count them */
static uint64_t files_on_disk(const char *data, uint64_t *n)
{
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "find '%s/frames' -name '*.frame' -printf '%%s\\n' 2>/dev/null", data);
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	uint64_t sum = 0, k = 0, v;
	while (fscanf(p, "%" SCNu64, &v) == 1) {
		sum += v;
		k++;
	}
	pclose(p);
	*n = k;
	return sum;
}

static struct ing_catalog_row stored(const char *data, const char *frame, uint64_t len, char c);

/*
 * The count the high-water mark holds to, across drained backlogs: the outbox empties
 * again and again (a plain INTEGER PRIMARY KEY would hand out 1, 2, ... again, and a count
 * kept by "rows after the last seq seen" missed those frames, 2.4 MB counted against
 * 69.3 MB on disk); here the counts stay the files on disk, and seq only grows.
 */
static void usage_never_drifts(void **state)
{
	(void)state;
	char data[128], cat[160], name[32];
	snprintf(data, sizeof(data), "%s/drift", dir);
	snprintf(cat, sizeof(cat), "%s/catalog.db", data);
	assert_int_equal(ing_store_mkdirs(data, 0755), 0);
	struct ing_catalog *c = ing_catalog_open(cat);
	assert_non_null(c);
	struct tier_db *t = tier_db_open(cat);
	assert_non_null(t);
	assert_int_equal(tier_db_enable(t), 0);
	int64_t last_seq = 0;
	unsigned id = 0;
	for (int round = 0; round < 6; round++) {
		/* a burst of frames, committed in the persistence worker's way */
		for (int i = 0; i < 5; i++) {
			snprintf(name, sizeof(name), "f%u", ++id);
			struct ing_catalog_row r = stored(data, name, 10 + id % 40, (char)('a' + id % 26));
			assert_int_equal(ing_catalog_insert(c, &r, 1), 0);
		}
		struct tier_row q[16];
		int n = tier_db_due(t, INT64_MAX, q, 16);
		assert_int_equal(n, 5);
		for (int i = 0; i < n; i++) {
			assert_true(q[i].seq > last_seq);   /* never handed out before */
			last_seq = q[i].seq;
		}
		uint64_t files, bytes = files_on_disk(data, &files), counted_frames;
		assert_true(local_bytes(t, &counted_frames) == bytes && counted_frames == files);
		/* drained: every one verified, and the oldest copies deleted (as the tier does:
		 * unlink, then 'tiered') */
		for (int i = 0; i < n; i++)
			assert_int_equal(tier_db_uploaded(t, &q[i], "00112233445566778899aabbccddeeff", 1), 0);
		struct tier_backlog bl;
		assert_int_equal(tier_db_backlog(t, &bl), 0);
		assert_true(bl.frames == 0);
		int k = tier_db_candidates(t, INT64_MAX, q, 3);
		assert_int_equal(k, 3);
		for (int i = 0; i < k; i++) {
			char path[1200];
			snprintf(path, sizeof(path), "%s/%s", data, q[i].path);
			assert_int_equal(unlink(path), 0);
			assert_int_equal(tier_db_local_deleted(t, &q[i], 2), 0);
		}
		/* and one requeued (its object was not found as verified): still local bytes */
		assert_int_equal(tier_db_candidates(t, INT64_MAX, q, 1), 1);
		assert_int_equal(tier_db_requeue(t, &q[0]), 0);
		assert_int_equal(tier_db_due(t, INT64_MAX, q, 16), 1);
		assert_true(q[0].seq > last_seq);
		last_seq = q[0].seq;
		assert_int_equal(tier_db_uploaded(t, &q[0], "00112233445566778899aabbccddeeff", 3), 0);
		bytes = files_on_disk(data, &files);
		assert_true(local_bytes(t, &counted_frames) == bytes && counted_frames == files);
	}
	/* a restart counts again from the catalog, whatever the counts said */
	uint64_t files, bytes = files_on_disk(data, &files), counted_frames;
	tier_db_close(t);
	sqlite3 *h;
	assert_int_equal(sqlite3_open(cat, &h), SQLITE_OK);
	assert_int_equal(sqlite3_exec(h, "UPDATE tier_usage SET frames = 0, bytes = 7", NULL, NULL, NULL),
			 SQLITE_OK);
	sqlite3_close(h);
	t = tier_db_open(cat);
	assert_non_null(t);
	assert_int_equal(local_bytes(t, NULL), 14);   /* what the table said */
	assert_int_equal(tier_db_enable(t), 0);
	assert_true(local_bytes(t, &counted_frames) == bytes && counted_frames == files);
	tier_db_close(t);
	ing_catalog_close(c);
}

/* An outbox of the first form (seq INTEGER PRIMARY KEY, reused once empty) is migrated on
 * open: the rows and their seq kept, the trigger kept, and seq never reused after. */
static void outbox_migration(void **state)
{
	(void)state;
	char data[128], cat[160];
	snprintf(data, sizeof(data), "%s/migrate", dir);
	snprintf(cat, sizeof(cat), "%s/catalog.db", data);
	assert_int_equal(ing_store_mkdirs(data, 0755), 0);
	struct ing_catalog *c = ing_catalog_open(cat);
	assert_non_null(c);
	struct ing_catalog_row r[2] = { row("a", 10, 100), row("b", 20, 200) };
	assert_int_equal(ing_catalog_insert(c, r, 2), 0);
	sqlite3 *h;
	assert_int_equal(sqlite3_open(cat, &h), SQLITE_OK);
	assert_int_equal(sqlite3_exec(h,
		"CREATE TABLE tier_outbox (seq INTEGER PRIMARY KEY, wafer_id TEXT NOT NULL, frame_id TEXT NOT NULL,"
		" length INTEGER NOT NULL, crc32c INTEGER NOT NULL, path TEXT NOT NULL, queued_ms INTEGER NOT NULL,"
		" attempts INTEGER NOT NULL DEFAULT 0, next_ms INTEGER NOT NULL DEFAULT 0, last_error TEXT,"
		" requeued INTEGER NOT NULL DEFAULT 0, UNIQUE (wafer_id, frame_id));"
		"INSERT INTO tier_outbox VALUES (7, 'W', 'a', 10, 70, 'frames/W/a.frame', 1, 2, 0, 'store away', 0);"
		"INSERT INTO tier_outbox VALUES (9, 'W', 'b', 20, 140, 'frames/W/b.frame', 1, 0, 0, NULL, 0);"
		"CREATE TRIGGER tier_outbox_frames AFTER INSERT ON frames BEGIN INSERT OR IGNORE INTO tier_outbox"
		" (wafer_id, frame_id, length, crc32c, path, queued_ms) VALUES (NEW.wafer_id, NEW.frame_id,"
		" NEW.length, NEW.crc32c, NEW.path, 1); END;", NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(h);

	struct tier_db *t = tier_db_open(cat);
	assert_non_null(t);
	assert_int_equal(sqlite3_open(cat, &h), SQLITE_OK);
	sqlite3_stmt *st;
	assert_int_equal(sqlite3_prepare_v2(h, "SELECT sql FROM sqlite_master WHERE name = 'tier_outbox'", -1,
					    &st, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	assert_non_null(strstr((const char *)sqlite3_column_text(st, 0), "AUTOINCREMENT"));
	sqlite3_finalize(st);
	sqlite3_close(h);
	struct tier_row q[4];
	assert_int_equal(tier_db_due(t, INT64_MAX, q, 4), 2);
	assert_true(q[0].seq == 7 && q[0].attempts == 2 && q[1].seq == 9);
	/* the trigger is still there: a new frame is queued, above every seq seen */
	assert_int_equal(tier_db_enable(t), 0);
	struct ing_catalog_row cr = row("c", 30, 300);
	assert_int_equal(ing_catalog_insert(c, &cr, 1), 0);
	assert_int_equal(tier_db_due(t, INT64_MAX, q, 4), 3);
	assert_true(q[2].seq == 10);
	/* emptied, and a new frame: not seq 1 again */
	for (int i = 0; i < 3; i++)
		assert_int_equal(tier_db_uploaded(t, &q[i], "00112233445566778899aabbccddeeff", 1), 0);
	struct ing_catalog_row dr = row("d", 40, 400);
	assert_int_equal(ing_catalog_insert(c, &dr, 1), 0);
	assert_int_equal(tier_db_due(t, INT64_MAX, q, 4), 1);
	assert_true(q[0].seq == 11);
	tier_db_close(t);
	ing_catalog_close(c);
}

/* a frame file of len bytes of c under dir, its row (path, crc) as persistence writes it */
static struct ing_catalog_row stored(const char *data, const char *frame, uint64_t len, char c)
{
	struct ing_catalog_row r = row(frame, len, 1000);
	char path[1200], wdir[1200];
	uint8_t buf[64];
	assert_true(len <= sizeof(buf));
	memset(buf, c, len);
	assert_int_equal(ing_store_rel_path(r.path, sizeof(r.path), "W", frame), 0);
	snprintf(wdir, sizeof(wdir), "%s/frames/W", data);
	assert_int_equal(ing_store_mkdirs(wdir, 0755), 0);
	snprintf(path, sizeof(path), "%s/%s", data, r.path);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, buf, len), (ssize_t)len);
	close(fd);
	r.crc32c = ing_crc32c(0, buf, len);
	return r;
}

static void rebuild_keeps_tier(void **state)
{
	(void)state;
	char data[128], cat[160], path[1200];
	snprintf(data, sizeof(data), "%s/rebuild", dir);
	snprintf(cat, sizeof(cat), "%s/catalog.db", data);
	struct ing_catalog_row r[4] = { stored(data, "a", 10, 'a'), stored(data, "b", 20, 'b'),
					stored(data, "c", 30, 'c'), stored(data, "d", 40, 'd') };
	struct ing_catalog *c = ing_catalog_open(cat);
	assert_non_null(c);
	assert_int_equal(ing_catalog_insert(c, r, 4), 0);
	struct tier_db *t = tier_db_open(cat);
	assert_non_null(t);
	assert_int_equal(tier_db_enable(t), 0);
	struct tier_row q[4];
	assert_int_equal(tier_db_due(t, INT64_MAX, q, 4), 4);
	for (int i = 1; i < 4; i++)   /* b, c, d in the store */
		assert_int_equal(tier_db_uploaded(t, &q[i], "00112233445566778899aabbccddeeff", 77), 0);
	assert_int_equal(tier_db_candidates(t, INT64_MAX, q, 4), 3);
	assert_string_equal(q[1].frame_id, "c");
	assert_int_equal(tier_db_local_deleted(t, &q[1], 88), 0);   /* c's copy deleted by the tier */
	tier_db_close(t);
	ing_catalog_close(c);
	snprintf(path, sizeof(path), "%s/%s", data, r[2].path);
	assert_int_equal(unlink(path), 0);
	snprintf(path, sizeof(path), "%s/%s", data, r[3].path);
	assert_int_equal(unlink(path), 0);   /* d's copy lost, though its row says both */

	struct ing_catalog_rebuild_report rep;
	assert_int_equal(ing_catalog_rebuild(data, &rep, NULL, NULL), 0);
	assert_true(rep.files == 2 && rep.catalogued == 4 && rep.tiered == 2);
	c = ing_catalog_open_ro(cat);
	assert_non_null(c);
	struct ing_catalog_row got;
	assert_int_equal(ing_catalog_lookup(c, "W", "a", &got), 0);
	assert_int_equal(got.location, ING_LOC_LOCAL);
	assert_int_equal(ing_catalog_lookup(c, "W", "b", &got), 0);
	assert_int_equal(got.location, ING_LOC_BOTH);
	assert_string_equal(got.object_md5, "00112233445566778899aabbccddeeff");
	assert_true(got.tiered_ns == 77 && got.crc32c == r[1].crc32c && got.length == 20);
	assert_int_equal(ing_catalog_lookup(c, "W", "c", &got), 0);
	assert_int_equal(got.location, ING_LOC_TIERED);
	assert_true(got.local_deleted_ns == 88 && got.length == 30 && got.crc32c == r[2].crc32c);
	assert_int_equal(ing_catalog_lookup(c, "W", "d", &got), 0);
	assert_int_equal(got.location, ING_LOC_TIERED);
	assert_string_equal(got.object_md5, "00112233445566778899aabbccddeeff");
	ing_catalog_close(c);

	/* the tier's tables are not carried over (the new catalog has none): the next start
	 * with --tier counts the locations from the rebuilt rows, so the high-water mark holds
	 * to the files on disk, queues exactly the local frames, and verifies the 'both' ones
	 * again before their copies may go (verified before this catalog's first start) */
	t = tier_db_open(cat);
	assert_non_null(t);
	assert_int_equal(tier_db_enable(t), 0);
	struct tier_census cs;
	assert_int_equal(tier_db_usage(t, &cs), 0);
	uint64_t files, bytes = files_on_disk(data, &files);
	assert_true(cs.frames[ING_LOC_LOCAL] == 1 && cs.bytes[ING_LOC_LOCAL] == 10);
	assert_true(cs.frames[ING_LOC_BOTH] == 1 && cs.bytes[ING_LOC_BOTH] == 20);
	assert_true(cs.frames[ING_LOC_TIERED] == 2 && cs.bytes[ING_LOC_TIERED] == 70);
	assert_true(local_bytes(t, NULL) == bytes && files == 2);
	assert_int_equal(tier_db_due(t, INT64_MAX, q, 4), 1);
	assert_string_equal(q[0].frame_id, "a");
	assert_true(tier_db_digest_since(t) > 77);   /* b's tiered_ns: verified again first */
	tier_db_close(t);
}

/*
 * Frames deleted from the catalog under the tier (ingest-catalog prune): their queued
 * uploads are dropped at start, a frame the tier finds gone is out of the queue, and an
 * upload that was in flight while its frame was deleted and stored again (another row,
 * another seq) does not mark the new row: its own upload does.
 */
static void deleted_under_the_tier(void **state)
{
	(void)state;
	char data[128], cat[160];
	snprintf(data, sizeof(data), "%s/deleted", dir);
	snprintf(cat, sizeof(cat), "%s/catalog.db", data);
	assert_int_equal(ing_store_mkdirs(data, 0755), 0);
	struct ing_catalog *c = ing_catalog_open(cat);
	assert_non_null(c);
	struct tier_db *t = tier_db_open(cat);
	assert_non_null(t);
	assert_int_equal(tier_db_enable(t), 0);
	struct ing_catalog_row r[3] = { row("a", 10, 100), row("b", 20, 200), row("c", 30, 300) };
	assert_int_equal(ing_catalog_insert(c, r, 3), 0);
	struct tier_row q[4];
	assert_int_equal(tier_db_due(t, INT64_MAX, q, 4), 3);
	assert_int_equal(tier_db_location(t, &q[0]), ING_LOC_LOCAL);

	sqlite3 *h;
	assert_int_equal(sqlite3_open(cat, &h), SQLITE_OK);
	/* a: deleted with its queued upload (as prune does now); b: deleted, its upload left
	 * queued (as prune did before it knew the tier); c: deleted and stored again while its
	 * upload was in flight */
	assert_int_equal(sqlite3_exec(h, "DELETE FROM frames WHERE frame_id IN ('a', 'b', 'c');"
				      "DELETE FROM tier_outbox WHERE frame_id IN ('a', 'c');", NULL, NULL, NULL),
			 SQLITE_OK);
	sqlite3_close(h);
	assert_int_equal(tier_db_location(t, &q[1]), -ENOENT);
	struct ing_catalog_row c2 = row("c", 31, 400);   /* other bytes under the same id */
	assert_int_equal(ing_catalog_insert(c, &c2, 1), 0);
	assert_int_equal(tier_db_uploaded(t, &q[2], "0123456789abcdef0123456789abcdef", 5), 0);
	struct ing_catalog_row got;
	assert_int_equal(ing_catalog_lookup(c, "W", "c", &got), 0);
	assert_true(got.location == ING_LOC_LOCAL && got.length == 31 && !got.object_md5[0]);
	struct tier_row q2[4];
	assert_int_equal(tier_db_due(t, INT64_MAX, q2, 4), 2);   /* b's orphan and the new c */
	assert_string_equal(q2[1].frame_id, "c");
	assert_true(q2[1].seq > q[2].seq && q2[1].length == 31);
	/* the tier finds b gone (tier.c: its file missing, no row): out of the queue */
	assert_int_equal(tier_db_dequeue(t, &q2[0]), 0);
	assert_int_equal(tier_db_due(t, INT64_MAX, q2, 4), 1);

	/* at start: a queued row whose frame is gone is dropped, a local frame not queued is
	 * queued (without spending a seq on the ones that are) */
	assert_int_equal(sqlite3_open(cat, &h), SQLITE_OK);
	assert_int_equal(sqlite3_exec(h, "INSERT INTO tier_outbox (wafer_id, frame_id, length, crc32c, path,"
				      " queued_ms) VALUES ('W', 'gone', 1, 1, 'frames/W/gone.frame', 1);"
				      "DELETE FROM tier_outbox WHERE frame_id = 'c';", NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(h);
	assert_int_equal(tier_db_enable(t), 0);
	assert_int_equal(tier_db_due(t, INT64_MAX, q2, 4), 1);
	assert_string_equal(q2[0].frame_id, "c");
	struct tier_backlog bl;
	assert_int_equal(tier_db_backlog(t, &bl), 0);
	assert_true(bl.frames == 1 && bl.bytes == 31);
	int64_t seq = q2[0].seq;
	assert_int_equal(tier_db_enable(t), 0);
	assert_int_equal(tier_db_uploaded(t, &q2[0], "0123456789abcdef0123456789abcdef", 5), 0);
	struct ing_catalog_row d = row("d", 40, 500);
	assert_int_equal(ing_catalog_insert(c, &d, 1), 0);
	assert_int_equal(tier_db_due(t, INT64_MAX, q2, 4), 1);
	assert_true(q2[0].seq == seq + 1);
	tier_db_close(t);
	ing_catalog_close(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(outbox),
		cmocka_unit_test(usage_never_drifts),
		cmocka_unit_test(outbox_migration),
		cmocka_unit_test(rebuild_keeps_tier),
		cmocka_unit_test(deleted_under_the_tier),
	};
	return cmocka_run_group_tests(tests, catalog_dir_setup, catalog_dir_teardown);
}
