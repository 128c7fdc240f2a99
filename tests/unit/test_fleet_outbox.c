/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_fleet_outbox.c - control/fleet/outbox.c on a real catalog (dataplane/store/catalog.c) in /tmp:
 * a catalog commit and its outbox rows are one transaction; a rolled-back catalog batch
 * leaves no outbox row; rows come out oldest first and go once deleted; enabling queues
 * the rows committed before (and only once); a disabled outbox stops growing.
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

#include <cmocka.h>

#include "dataplane/store/store.h"
#include "control/fleet/fleet.h"
#include "control/fleet/fleet_internal.h"

#define CATALOG_DIR_TEMPLATE "/tmp/ing_test_outbox.XXXXXX"
#include "test_catalog_dir.h"

static struct ing_catalog_row mkrow(unsigned id, uint32_t crc)
{
	struct ing_catalog_row r;
	memset(&r, 0, sizeof(r));
	snprintf(r.frame_id, sizeof(r.frame_id), "f-%u", id);
	snprintf(r.wafer_id, sizeof(r.wafer_id), "wafer \xc3\xa9 %u", id % 3);
	r.timestamp = 1700000000000ll + id;
	r.length = 4096 + id;
	r.crc32c = crc;
	snprintf(r.path, sizeof(r.path), "frames/w%u/f-%u.frame", id % 3, id);
	return r;
}

static uint64_t lag_rows(struct outbox *o)
{
	uint64_t rows = 99999;
	int64_t oldest = -1;
	assert_int_equal(outbox_lag(o, &rows, &oldest), 0);
	if (rows)
		assert_true(oldest > 1600000000000ll);   /* Unix ms of the commit */
	else
		assert_int_equal(oldest, 0);
	return rows;
}

static void test_same_transaction(void **state)
{
	(void)state;
	struct ing_catalog *c = ing_catalog_open(db);
	assert_non_null(c);
	struct outbox *o = outbox_open(db);
	assert_non_null(o);
	assert_int_equal(outbox_enable(o), 0);
	assert_int_equal(lag_rows(o), 0);

	struct ing_catalog_row rows[3] = { mkrow(1, 0xdeadbeef), mkrow(2, 0x12345678), mkrow(3, 7) };
	assert_int_equal(ing_catalog_insert(c, rows, 3), 0);
	assert_int_equal(lag_rows(o), 3);

	/* a batch that fails (frame 2 is there already) is rolled back: catalog and outbox */
	struct ing_catalog_row again[2] = { mkrow(4, 1), mkrow(2, 0x12345678) };
	assert_int_equal(ing_catalog_insert(c, again, 2), -EEXIST);
	assert_int_equal(ing_catalog_lookup(c, again[0].wafer_id, again[0].frame_id, NULL), -ENOENT);
	assert_int_equal(lag_rows(o), 3);

	struct outbox_row out[8];
	assert_int_equal(outbox_read(o, out, 8), 3);
	for (unsigned i = 0; i < 3; i++) {
		assert_string_equal(out[i].frame_id, rows[i].frame_id);
		assert_string_equal(out[i].wafer_id, rows[i].wafer_id);
		assert_int_equal(out[i].crc32c, rows[i].crc32c);
		assert_int_equal(out[i].length, rows[i].length);
		assert_int_equal(out[i].timestamp, rows[i].timestamp);
		assert_string_equal(out[i].path, rows[i].path);
		if (i)
			assert_true(out[i].seq > out[i - 1].seq);
	}
	/* a short read takes the oldest */
	struct outbox_row one;
	assert_int_equal(outbox_read(o, &one, 1), 1);
	assert_string_equal(one.frame_id, "f-1");

	assert_int_equal(outbox_delete_upto(o, out[1].seq), 0);
	assert_int_equal(outbox_read(o, out, 8), 1);
	assert_string_equal(out[0].frame_id, "f-3");
	assert_int_equal(outbox_delete_upto(o, out[0].seq), 0);
	assert_int_equal(outbox_read(o, out, 8), 0);
	assert_int_equal(lag_rows(o), 0);

	/* rows committed after the outbox emptied are queued too */
	struct ing_catalog_row r5 = mkrow(5, 5);
	assert_int_equal(ing_catalog_insert(c, &r5, 1), 0);
	assert_int_equal(outbox_read(o, out, 8), 1);
	assert_string_equal(out[0].frame_id, "f-5");

	outbox_close(o);
	ing_catalog_close(c);
}

static void test_enable_backfills_once(void **state)
{
	(void)state;
	struct ing_catalog *c = ing_catalog_open(db);
	assert_non_null(c);
	struct ing_catalog_row rows[4] = { mkrow(1, 1), mkrow(2, 2), mkrow(3, 3), mkrow(4, 4) };
	assert_int_equal(ing_catalog_insert(c, rows, 4), 0);

	struct outbox *o = outbox_open(db);
	assert_non_null(o);
	assert_int_equal(outbox_enable(o), 0);     /* first time: the 4 rows already there */
	assert_int_equal(lag_rows(o), 4);
	assert_int_equal(outbox_enable(o), 0);     /* again (a restart): not queued twice */
	assert_int_equal(lag_rows(o), 4);

	/* a run without a fleet catalog: no growth */
	assert_int_equal(outbox_disable(o), 0);
	struct ing_catalog_row r5 = mkrow(5, 5);
	assert_int_equal(ing_catalog_insert(c, &r5, 1), 0);
	assert_int_equal(lag_rows(o), 4);
	/* back with one: everything is queued again, so frame 5 is not lost (the others are
	 * sent twice, which the fleet catalog ignores) */
	assert_int_equal(outbox_enable(o), 0);
	assert_int_equal(lag_rows(o), 4 + 5);
	struct ing_catalog_row r6 = mkrow(6, 6);
	assert_int_equal(ing_catalog_insert(c, &r6, 1), 0);
	assert_int_equal(lag_rows(o), 4 + 5 + 1);
	outbox_close(o);
	ing_catalog_close(c);
}

static void test_no_catalog_yet(void **state)
{
	(void)state;
	struct outbox *o = outbox_open(db);   /* the file is created, without a frames table */
	assert_non_null(o);
	assert_int_equal(outbox_enable(o), -ENOENT);
	struct ing_catalog *c = ing_catalog_open(db);
	assert_non_null(c);
	assert_int_equal(outbox_enable(o), 0);
	struct ing_catalog_row r = mkrow(1, 1);
	assert_int_equal(ing_catalog_insert(c, &r, 1), 0);
	assert_int_equal(lag_rows(o), 1);
	outbox_close(o);
	ing_catalog_close(c);
}

static void test_parse_peers(void **state)
{
	(void)state;
	struct ing_fleet_member m[4];
	unsigned n = 0;
	char why[160];
	assert_int_equal(ing_fleet_parse_peers("a=h1:1,b=[::1]:2", m, 4, &n, why, sizeof(why)), 0);
	assert_int_equal(n, 2);
	assert_string_equal(m[0].node_id, "a");
	assert_string_equal(m[0].address, "h1:1");
	assert_string_equal(m[1].address, "[::1]:2");
	assert_int_equal(m[1].state, ING_MEMBER_ACTIVE);
	const char *bad[] = { "", "a", "=h:1", "a=", "a=h", "a=h:1,", "a=h:1,a=h:2", "a=h:1,,b=h:2" };
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(ing_fleet_parse_peers(bad[i], m, 4, &n, why, sizeof(why)), -EINVAL);
	assert_int_equal(ing_fleet_parse_peers("a=h:1,b=h:2,c=h:3", m, 2, &n, why, sizeof(why)), -EINVAL);
}

/* static membership: this node is always in it, with its current state */
static void test_static_members(void **state)
{
	(void)state;
	struct ing_fleet_opts fo;
	ing_fleet_opts_init(&fo);
	fo.node_id = "n2";
	fo.advertise = "127.0.0.1:7002";
	fo.peers = "n3=127.0.0.1:7003,n1=127.0.0.1:7001";
	struct ing_fleet *f = ing_fleet_start(&fo);
	assert_non_null(f);
	struct ing_fleet_member m[8];
	uint64_t e1 = 0, e2 = 0;
	const char *src = NULL;
	assert_int_equal(ing_fleet_members(f, m, 8, &e1, &src), 3);
	assert_string_equal(src, "static");
	assert_string_equal(m[0].node_id, "n1");   /* sorted by id */
	assert_string_equal(m[1].node_id, "n2");
	assert_string_equal(m[1].address, "127.0.0.1:7002");
	assert_string_equal(m[2].node_id, "n3");
	assert_int_equal(m[1].state, ING_MEMBER_ACTIVE);
	ing_fleet_set_draining(f, true);
	assert_int_equal(ing_fleet_members(f, m, 8, &e2, &src), 3);
	assert_int_equal(m[1].state, ING_MEMBER_DRAINING);
	assert_true(e1 != e2);
	ing_fleet_set_draining(f, false);
	assert_int_equal(ing_fleet_members(f, m, 8, &e2, &src), 3);
	assert_true(e1 == e2);
	struct ing_fleet_stats st;
	ing_fleet_get_stats(f, &st);
	assert_false(st.enabled);
	ing_fleet_stop(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_same_transaction, catalog_dir_setup, catalog_dir_teardown),
		cmocka_unit_test_setup_teardown(test_enable_backfills_once, catalog_dir_setup, catalog_dir_teardown),
		cmocka_unit_test_setup_teardown(test_no_catalog_yet, catalog_dir_setup, catalog_dir_teardown),
		cmocka_unit_test(test_parse_peers),
		cmocka_unit_test(test_static_members),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
