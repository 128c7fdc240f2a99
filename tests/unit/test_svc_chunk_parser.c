/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_svc_chunk_parser.c - control/service/xport/chunk.c: the incremental FrameChunk parser.
 * Messages packed by protobuf-c (the reference encoder) and hand-made ones (any field
 * order, unknown fields, malformed varints) are fed in every possible split; the decoded
 * fields and the data bytes must match whatever the split.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "control/service/xport/chunk.h"
#include "h3000.pb-c.h"

/* ---------------------------------------------------------------- capture */

struct cap {
	uint8_t data[1 << 16];
	uint64_t begin_len;
	int begins;
	uint64_t got;          /* highest off+n seen */
	int fail_begin;        /* return this from data_begin */
	bool ordered_at_begin;
	char frame_at_begin[CP_ID_MAX + 1];
};

static int cap_begin(void *arg, struct chunk_parser *p, uint64_t len)
{
	struct cap *c = arg;
	c->begins++;
	c->begin_len = len;
	c->ordered_at_begin = p->ordered;
	memcpy(c->frame_at_begin, p->frame_id, sizeof(c->frame_at_begin));
	return c->fail_begin;
}

static int cap_data(void *arg, struct chunk_parser *p, uint64_t off, const uint8_t *d, size_t n)
{
	struct cap *c = arg;
	(void)p;
	assert_true(off + n <= sizeof(c->data));
	assert_true(off + n <= c->begin_len);
	memcpy(c->data + off, d, n);
	if (off + n > c->got)
		c->got = off + n;
	return 0;
}

static const struct chunk_parser_cbs cbs = { .data_begin = cap_begin, .data = cap_data };

static struct chunk_parser P;   /* 4 KiB of meta: keep it off the stack */
static struct cap C;

/* Feed msg in pieces of at most `step` bytes (step 0: split once at `split`). */
static int feed_split(const uint8_t *msg, size_t len, size_t step, size_t split)
{
	int rc;
	memset(&C, 0, sizeof(C));
	chunk_parser_init(&P, &cbs, &C);
	chunk_parser_begin(&P, len);
	if (step == 0) {
		rc = chunk_parser_feed(&P, msg, split);
		if (rc == 0)
			rc = chunk_parser_feed(&P, msg + split, len - split);
	} else {
		rc = 0;
		for (size_t off = 0; off < len && rc == 0; off += step)
			rc = chunk_parser_feed(&P, msg + off, len - off < step ? len - off : step);
	}
	if (rc == 0)
		rc = chunk_parser_end(&P);
	return rc;
}

static size_t pack_chunk(uint8_t *buf, const char *frame, uint64_t off, bool last, uint64_t sid,
			 const uint8_t *data, size_t dlen, bool with_meta, const char *wafer)
{
	H3000__FrameChunk c = H3000__FRAME_CHUNK__INIT;
	H3000__FrameMeta m = H3000__FRAME_META__INIT;
	c.frameid = (char *)frame;
	c.offset = off;
	c.last = last;
	c.sessionid = sid;
	c.data.data = (uint8_t *)data;
	c.data.len = dlen;
	if (with_meta) {
		m.frameid = (char *)frame;
		m.length = 123456789;
		m.waferid = (char *)wafer;
		m.crc32c = 0xdeadbeef;
		m.hascrc32c = 1;
		c.meta = &m;
	}
	return h3000__frame_chunk__pack(&c, buf);
}

static size_t put_varint(uint8_t *p, uint64_t v)
{
	size_t n = 0;
	do {
		uint8_t b = v & 0x7f;
		v >>= 7;
		p[n++] = b | (v ? 0x80 : 0);
	} while (v);
	return n;
}

static size_t put_key(uint8_t *p, uint32_t field, int wt)
{
	return put_varint(p, (uint64_t)field << 3 | (unsigned)wt);
}

static size_t put_str(uint8_t *p, uint32_t field, const char *s)
{
	size_t n = put_key(p, field, 2), l = strlen(s);
	n += put_varint(p + n, l);
	memcpy(p + n, s, l);
	return n + l;
}

static void check_meta(void)
{
	H3000__FrameMeta *m = h3000__frame_meta__unpack(NULL, P.meta_len, P.meta);
	assert_non_null(m);
	assert_int_equal(m->length, 123456789);
	assert_int_equal(m->crc32c, 0xdeadbeef);
	assert_true(m->hascrc32c);
	h3000__frame_meta__free_unpacked(m, NULL);
}

/* ---------------------------------------------------------------- tests */

static uint8_t msg[1 << 17];
static uint8_t data[40000];

static void fill_data(void)
{
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i * 131 + 7);
}

/*
 * Placement: once inside the data field, chunk_parser_data_run says how much of it is
 * left and where; chunk_parser_skip_data passes over bytes the caller put in place
 * itself, in any mix with fed pieces, and the parse ends as if every byte had been fed.
 */
static void test_placed_runs(void **state)
{
	(void)state;
	fill_data();
	size_t len = pack_chunk(msg, "frame-9", 4096, false, 7, data, 30000, true, "w");
	/* an unknown field after the data: the parse goes on past the skipped bytes */
	msg[len] = 0x68;   /* field 13, varint */
	msg[len + 1] = 0x05;
	len += 2;
	for (size_t step = 1; step < 5000; step = step * 3 + 1) {
		memset(&C, 0, sizeof(C));
		chunk_parser_init(&P, &cbs, &C);
		chunk_parser_begin(&P, len);
		uint64_t off = 99, skipped = 0, fed_data = 0;
		size_t pos = 0;
		assert_int_equal(chunk_parser_data_run(&P, &off), 0);
		while (pos < len) {
			uint64_t run = chunk_parser_data_run(&P, &off);
			if (run) {
				assert_int_equal(off, skipped + fed_data);
				assert_int_equal(run, 30000 - off);
				if ((pos / step) % 2 == 0) {   /* alternately placed and fed */
					size_t k = run < step ? (size_t)run : step;
					chunk_parser_skip_data(&P, k);
					skipped += k;
					pos += k;
					continue;
				}
				size_t k = run < step ? (size_t)run : step;
				assert_int_equal(chunk_parser_feed(&P, msg + pos, k), 0);
				fed_data += k;
				pos += k;
				continue;
			}
			assert_int_equal(chunk_parser_feed(&P, msg + pos, 1), 0);
			pos++;
		}
		assert_int_equal(chunk_parser_end(&P), 0);
		assert_int_equal(skipped + fed_data, 30000);
		assert_true(skipped > 0);
		assert_int_equal(P.data_len, 30000);
		assert_string_equal(P.frame_id, "frame-9");
		assert_int_equal(P.offset, 4096);
		assert_int_equal(P.session_id, 7);
		assert_true(P.late_fields == false);
		check_meta();
	}
}

static void test_every_split(void **state)
{
	(void)state;
	fill_data();
	size_t len = pack_chunk(msg, "0x1234567890", 0, true, 42, data, 3000, true, "wafer-7");
	for (size_t split = 0; split <= len; split++) {
		assert_int_equal(feed_split(msg, len, 0, split), 0);
		assert_string_equal(P.frame_id, "0x1234567890");
		assert_int_equal(P.offset, 0);
		assert_true(P.last);
		assert_int_equal(P.session_id, 42);
		assert_true(P.ordered);
		assert_false(P.late_fields);
		assert_false(P.meta_oversize);
		assert_true(P.has_data);
		assert_int_equal(P.data_len, 3000);
		assert_int_equal(C.begins, 1);
		assert_int_equal(C.got, 3000);
		assert_memory_equal(C.data, data, 3000);
		/* data comes last: everything before it was known at data_begin */
		assert_string_equal(C.frame_at_begin, "0x1234567890");
		check_meta();
	}
}

static void test_byte_steps(void **state)
{
	(void)state;
	fill_data();
	size_t len = pack_chunk(msg, "7", 1 << 20, false, 0, data, sizeof(data), false, NULL);
	static const size_t steps[] = { 1, 2, 3, 7, 64, 1000, 4096, 1 << 20 };
	for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		assert_int_equal(feed_split(msg, len, steps[i], 0), 0);
		assert_string_equal(P.frame_id, "7");
		assert_int_equal(P.offset, 1 << 20);
		assert_false(P.last);
		assert_int_equal(P.seen & (1u << CP_F_META), 0);
		assert_int_equal(C.got, sizeof(data));
		assert_memory_equal(C.data, data, sizeof(data));
	}
}

static void test_no_data(void **state)
{
	(void)state;
	size_t len = pack_chunk(msg, "9", 0, true, 0, NULL, 0, true, "w");
	assert_int_equal(feed_split(msg, len, 1, 0), 0);
	assert_false(P.has_data);
	assert_int_equal(C.begins, 0);
	assert_true(P.seen & (1u << CP_F_META));
	/* empty message: all defaults */
	assert_int_equal(feed_split(msg, 0, 1, 0), 0);
	assert_string_equal(P.frame_id, "");
	assert_int_equal(P.seen, 0);
}

/* data first, then last, meta, frameId: any order parses; the flags tell the caller. */
static void test_any_order(void **state)
{
	(void)state;
	fill_data();
	uint8_t meta[256];
	H3000__FrameMeta m = H3000__FRAME_META__INIT;
	m.frameid = (char *)"77";
	m.length = 123456789;
	m.waferid = (char *)"w";
	m.crc32c = 0xdeadbeef;
	m.hascrc32c = 1;
	size_t mlen = h3000__frame_meta__pack(&m, meta);

	size_t n = 0;
	n += put_key(msg + n, CP_F_DATA, 2);
	n += put_varint(msg + n, 500);
	memcpy(msg + n, data, 500);
	n += 500;
	n += put_key(msg + n, CP_F_LAST, 0);
	msg[n++] = 1;
	n += put_key(msg + n, CP_F_META, 2);
	n += put_varint(msg + n, mlen);
	memcpy(msg + n, meta, mlen);
	n += mlen;
	n += put_str(msg + n, CP_F_FRAME_ID, "77");
	for (size_t split = 0; split <= n; split++) {
		assert_int_equal(feed_split(msg, n, 0, split), 0);
		assert_string_equal(P.frame_id, "77");
		assert_true(P.last);
		assert_false(P.ordered);
		assert_true(P.late_fields);
		assert_string_equal(C.frame_at_begin, "");  /* not known yet when data began */
		assert_memory_equal(C.data, data, 500);
		check_meta();
	}

	/* offset before frameId (out of order), data last: ordered is false at data_begin */
	n = 0;
	n += put_key(msg + n, CP_F_OFFSET, 0);
	n += put_varint(msg + n, 4096);
	n += put_str(msg + n, CP_F_FRAME_ID, "5");
	n += put_key(msg + n, CP_F_DATA, 2);
	n += put_varint(msg + n, 10);
	memcpy(msg + n, data, 10);
	n += 10;
	assert_int_equal(feed_split(msg, n, 3, 0), 0);
	assert_false(C.ordered_at_begin);
	assert_int_equal(P.offset, 4096);
	assert_string_equal(P.frame_id, "5");
	assert_false(P.late_fields);
}

/* Unknown fields of every wire type are skipped, in any split. */
static void test_unknown_fields(void **state)
{
	(void)state;
	fill_data();
	size_t n = 0;
	n += put_str(msg + n, CP_F_FRAME_ID, "3");
	n += put_key(msg + n, 6, 0);             /* varint */
	n += put_varint(msg + n, UINT64_MAX);
	n += put_key(msg + n, 7, 1);             /* fixed64 */
	memset(msg + n, 0xff, 8);
	n += 8;
	n += put_key(msg + n, 8, 5);             /* fixed32 */
	memset(msg + n, 0xee, 4);
	n += 4;
	n += put_key(msg + n, 1000000, 2);       /* length-delimited, big field number */
	n += put_varint(msg + n, 5);
	memcpy(msg + n, "hello", 5);
	n += 5;
	n += put_key(msg + n, CP_F_DATA, 2);
	n += put_varint(msg + n, 20);
	memcpy(msg + n, data, 20);
	n += 20;
	for (size_t split = 0; split <= n; split++) {
		assert_int_equal(feed_split(msg, n, 0, split), 0);
		assert_string_equal(P.frame_id, "3");
		assert_true(P.ordered);
		assert_memory_equal(C.data, data, 20);
	}
}

/* Meta above SVC_META_MAX: flagged, skipped, the rest still parses. */
static void test_oversize_meta(void **state)
{
	(void)state;
	fill_data();
	static char wafer[SVC_META_MAX + 100];
	memset(wafer, 'a', sizeof(wafer) - 1);
	size_t len = pack_chunk(msg, "11", 0, true, 0, data, 100, true, wafer);
	assert_int_equal(feed_split(msg, len, 777, 0), 0);
	assert_true(P.meta_oversize);
	assert_int_equal(P.meta_len, SVC_META_MAX);
	assert_string_equal(P.frame_id, "11");
	assert_memory_equal(C.data, data, 100);

	/* two meta fields are concatenated (protobuf merge) */
	uint8_t a[64], b[64];
	H3000__FrameMeta m1 = H3000__FRAME_META__INIT, m2 = H3000__FRAME_META__INIT;
	m1.frameid = (char *)"1";
	m1.waferid = (char *)"x";
	m2.length = 99;
	size_t la = h3000__frame_meta__pack(&m1, a), lb = h3000__frame_meta__pack(&m2, b);
	size_t n = 0;
	n += put_key(msg + n, CP_F_META, 2);
	n += put_varint(msg + n, la);
	memcpy(msg + n, a, la);
	n += la;
	n += put_key(msg + n, CP_F_META, 2);
	n += put_varint(msg + n, lb);
	memcpy(msg + n, b, lb);
	n += lb;
	assert_int_equal(feed_split(msg, n, 1, 0), 0);
	H3000__FrameMeta *m = h3000__frame_meta__unpack(NULL, P.meta_len, P.meta);
	assert_non_null(m);
	assert_string_equal(m->frameid, "1");
	assert_int_equal(m->length, 99);
	assert_string_equal(m->waferid, "x");
	h3000__frame_meta__free_unpacked(m, NULL);
}

static void expect_bad(const uint8_t *m, size_t n)
{
	for (size_t split = 0; split <= n; split++) {
		int rc = feed_split(m, n, 0, split);
		assert_int_equal(rc, -EBADMSG);
		assert_non_null(P.err);
	}
	assert_int_equal(feed_split(m, n, 1, 0), -EBADMSG);
}

static void test_malformed(void **state)
{
	(void)state;
	uint8_t m[64];
	size_t n;

	/* 11-byte varint */
	n = 0;
	n += put_key(m + n, CP_F_OFFSET, 0);
	memset(m + n, 0xff, 10);
	n += 10;
	m[n++] = 0x01;
	expect_bad(m, n);

	/* 10th byte above 1: overflows 64 bits */
	n = 0;
	n += put_key(m + n, CP_F_OFFSET, 0);
	memset(m + n, 0xff, 9);
	n += 9;
	m[n++] = 0x02;
	expect_bad(m, n);

	/* message ends inside a varint */
	n = 0;
	n += put_key(m + n, CP_F_OFFSET, 0);
	m[n++] = 0x80;
	expect_bad(m, n);

	/* message ends inside a length-delimited body */
	n = 0;
	n += put_key(m + n, CP_F_DATA, 2);
	n += put_varint(m + n, 5);
	memcpy(m + n, "abc", 3);
	n += 3;
	expect_bad(m, n);   /* length 5 runs past the 5-byte message */

	/* wrong wire type for a known field */
	n = 0;
	n += put_key(m + n, CP_F_OFFSET, 2);
	n += put_varint(m + n, 1);
	m[n++] = 0;
	expect_bad(m, n);
	n = 0;
	n += put_key(m + n, CP_F_DATA, 0);
	n += put_varint(m + n, 1);
	expect_bad(m, n);

	/* groups and invalid wire types */
	n = 0;
	n += put_key(m + n, 9, 3);
	expect_bad(m, n);
	n = 0;
	n += put_key(m + n, 9, 7);
	expect_bad(m, n);

	/* field number 0 */
	n = 0;
	m[n++] = 0x00;
	m[n++] = 0x00;
	expect_bad(m, n);

	/* key above 32 bits */
	n = 0;
	n += put_varint(m + n, 1ull << 40);
	expect_bad(m, n);

	/* two data fields */
	n = 0;
	n += put_key(m + n, CP_F_DATA, 2);
	n += put_varint(m + n, 1);
	m[n++] = 'a';
	n += put_key(m + n, CP_F_DATA, 2);
	n += put_varint(m + n, 1);
	m[n++] = 'b';
	expect_bad(m, n);

	/* more bytes fed than the message length */
	memset(&C, 0, sizeof(C));
	chunk_parser_init(&P, &cbs, &C);
	chunk_parser_begin(&P, 2);
	assert_int_equal(chunk_parser_feed(&P, (const uint8_t *)"\x10\x01\x10", 3), -EBADMSG);

	/* message longer than what was fed */
	chunk_parser_begin(&P, 4);
	assert_int_equal(chunk_parser_feed(&P, (const uint8_t *)"\x10\x01", 2), 0);
	assert_int_equal(chunk_parser_end(&P), -EBADMSG);
}

static void test_callback_error(void **state)
{
	(void)state;
	fill_data();
	size_t len = pack_chunk(msg, "1", 0, false, 0, data, 50, false, NULL);
	memset(&C, 0, sizeof(C));
	C.fail_begin = -EPROTO;
	chunk_parser_init(&P, &cbs, &C);
	chunk_parser_begin(&P, len);
	assert_int_equal(chunk_parser_feed(&P, msg, len), -EPROTO);
	assert_int_equal(C.got, 0);
}

/* The parser is reusable: a message after a malformed one parses cleanly. */
static void test_reuse(void **state)
{
	(void)state;
	fill_data();
	assert_int_equal(feed_split((const uint8_t *)"\x08\xff", 2, 1, 0), -EBADMSG);
	size_t len = pack_chunk(msg, "2", 8, true, 0, data, 8, false, NULL);
	chunk_parser_begin(&P, len);
	C.begins = 0;
	assert_int_equal(chunk_parser_feed(&P, msg, len), 0);
	assert_int_equal(chunk_parser_end(&P), 0);
	assert_string_equal(P.frame_id, "2");
	assert_int_equal(P.offset, 8);
	assert_null(P.err);
}

/* Deterministic pseudo-random splits of a large message. */
static void test_random_splits(void **state)
{
	(void)state;
	fill_data();
	size_t len = pack_chunk(msg, "99", 65536, true, 5, data, sizeof(data), true, "W");
	uint64_t x = 88172645463325252ull;
	for (int round = 0; round < 200; round++) {
		memset(&C, 0, sizeof(C));
		chunk_parser_init(&P, &cbs, &C);
		chunk_parser_begin(&P, len);
		size_t off = 0;
		while (off < len) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			size_t k = 1 + (size_t)(x % (round % 2 ? 17 : 9000));
			if (k > len - off)
				k = len - off;
			assert_int_equal(chunk_parser_feed(&P, msg + off, k), 0);
			off += k;
		}
		assert_int_equal(chunk_parser_end(&P), 0);
		assert_string_equal(P.frame_id, "99");
		assert_int_equal(P.session_id, 5);
		assert_memory_equal(C.data, data, sizeof(data));
		check_meta();
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_split),
		cmocka_unit_test(test_placed_runs),
		cmocka_unit_test(test_byte_steps),
		cmocka_unit_test(test_no_data),
		cmocka_unit_test(test_any_order),
		cmocka_unit_test(test_unknown_fields),
		cmocka_unit_test(test_oversize_meta),
		cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_callback_error),
		cmocka_unit_test(test_reuse),
		cmocka_unit_test(test_random_splits),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
