/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_tier_db.c - dataplane/tier/tier_db.c on a real catalog in /tmp: the outbox trigger
 * queues a frame in the persistence worker's own transaction (a rolled-back batch queues
 * none), backfill once, oldest first, back-off, 'both' and out of the outbox in one
 * transaction, deletion candidates oldest first after the retention, 'tiered', a lost
 * object queued again, the census and the new-rows count; a catalog rebuilt from the files
 * (ingest-catalog rebuild) keeps what the tier knew, and the frames that have no file.
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

#include <cmocka.h>

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

static void outbox(void **state)
{
	(void)state;
	struct ing_catalog *c = ing_catalog_open(db);
	assert_non_null(c);
	struct ing_catalog_row r[3] = { row("a", 10, 100), row("b", 20, 200), row("c", 30, 300) };
	assert_int_equal(ing_catalog_insert(c, r, 2), 0);   /* before the tier: backfilled */

	struct tier_db *t = tier_db_open(db);
	assert_non_null(t);
	assert_int_equal(tier_db_enable(t), 0);
	struct tier_census cs;
	int64_t seq = -1;
	assert_int_equal(tier_db_census(t, &cs, &seq), 0);
	assert_true(cs.frames[ING_LOC_LOCAL] == 2 && cs.bytes[ING_LOC_LOCAL] == 30 && seq == 2);

	/* in the persistence transaction: a batch that rolls back queues nothing */
	struct ing_catalog_row dup[2] = { row("c", 30, 300), row("a", 10, 100) };
	assert_int_equal(ing_catalog_insert(c, dup, 2), -EEXIST);
	uint64_t f, b;
	assert_int_equal(tier_db_new_rows(t, &seq, &f, &b), 0);
	assert_true(f == 0 && seq == 2);
	assert_int_equal(ing_catalog_insert(c, &r[2], 1), 0);
	assert_int_equal(tier_db_new_rows(t, &seq, &f, &b), 0);
	assert_true(f == 1 && b == 30 && seq == 3);

	struct tier_row q[8];
	int64_t now = 1000;
	assert_int_equal(tier_db_due(t, now, seq, q, 8), 3);
	assert_string_equal(q[0].frame_id, "a");   /* oldest first */
	assert_string_equal(q[2].frame_id, "c");
	assert_true(q[1].length == 20 && q[1].crc32c == 140 && !strcmp(q[1].path, "frames/W/b.frame"));
	assert_int_equal(tier_db_due(t, now, 2, q, 8), 2);   /* rows the census has not seen wait */
	/* a failed attempt backs the frame off; the others stay due */
	assert_int_equal(tier_db_due(t, now, seq, q, 8), 3);
	assert_int_equal(tier_db_failed(t, &q[0], now + 500, "store away"), 0);
	assert_int_equal(tier_db_due(t, now, seq, q, 8), 2);
	assert_string_equal(q[0].frame_id, "b");
	assert_int_equal(tier_db_due(t, now + 500, seq, q, 8), 3);
	assert_int_equal(q[0].attempts, 1);

	/* uploaded: 'both' and out of the outbox */
	uint64_t bf, bb;
	int64_t oldest;
	assert_int_equal(tier_db_backlog(t, &bf, &bb, &oldest), 0);
	assert_true(bf == 3 && bb == 60 && oldest > 0);
	for (int i = 0; i < 3; i++)
		assert_int_equal(tier_db_uploaded(t, &q[i], "0123456789abcdef0123456789abcdef", 5000), 0);
	assert_int_equal(tier_db_backlog(t, &bf, &bb, &oldest), 0);
	assert_true(bf == 0 && bb == 0 && oldest == 0);
	struct ing_catalog_row got;
	assert_int_equal(ing_catalog_lookup(c, "W", "b", &got), 0);
	assert_int_equal(got.location, ING_LOC_BOTH);
	assert_string_equal(got.object_md5, "0123456789abcdef0123456789abcdef");
	assert_true(got.tiered_ns == 5000);

	/* deletion candidates: verified, durable before the cutoff, oldest first */
	assert_int_equal(tier_db_candidates(t, 250, q, 8), 2);
	assert_string_equal(q[0].frame_id, "a");
	assert_string_equal(q[1].object_md5, "0123456789abcdef0123456789abcdef");
	assert_int_equal(tier_db_local_deleted(t, &q[0], 6000), 0);
	assert_int_equal(tier_db_candidates(t, INT64_MAX, q, 8), 2);
	assert_string_equal(q[0].frame_id, "b");
	/* the object of b is gone from the store: local again, queued again, not a new frame */
	assert_int_equal(tier_db_requeue(t, &q[0]), 0);
	assert_int_equal(tier_db_new_rows(t, &seq, &f, &b), 0);
	assert_true(f == 0 && b == 0);
	assert_int_equal(tier_db_due(t, INT64_MAX, seq, q, 8), 1);
	assert_string_equal(q[0].frame_id, "b");
	assert_int_equal(tier_db_census(t, &cs, &seq), 0);
	assert_true(cs.frames[ING_LOC_LOCAL] == 1 && cs.frames[ING_LOC_BOTH] == 1 &&
		    cs.frames[ING_LOC_TIERED] == 1 && cs.bytes[ING_LOC_TIERED] == 10);
	assert_int_equal(ing_catalog_lookup(c, "W", "a", &got), 0);
	assert_true(got.location == ING_LOC_TIERED && got.local_deleted_ns == 6000);

	/* a run without --tier drops the trigger: new frames are not queued, the queue stays;
	 * enabled again, the frames still local are queued once (no duplicate rows) */
	assert_int_equal(tier_db_disable(t), 0);
	struct ing_catalog_row d = row("d", 40, 400);
	assert_int_equal(ing_catalog_insert(c, &d, 1), 0);
	assert_int_equal(tier_db_backlog(t, &bf, &bb, &oldest), 0);
	assert_true(bf == 1);
	assert_int_equal(tier_db_enable(t), 0);
	assert_int_equal(tier_db_backlog(t, &bf, &bb, &oldest), 0);
	assert_true(bf == 2 && bb == 60);
	assert_int_equal(tier_db_enable(t), 0);   /* the trigger is there: no second backfill */
	assert_int_equal(tier_db_backlog(t, &bf, &bb, &oldest), 0);
	assert_true(bf == 2);
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
	int64_t seq = 4;
	assert_int_equal(tier_db_due(t, INT64_MAX, seq, q, 4), 4);
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
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(outbox),
		cmocka_unit_test(rebuild_keeps_tier),
	};
	return cmocka_run_group_tests(tests, catalog_dir_setup, catalog_dir_teardown);
}
