/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_producer_encode.c - the producer's wire encoding (producer/producer.c) and the
 * synthetic frame generator (producer/synth.c):
 *  - FrameChunk heads from chunk_head_encode + the body decode with protobuf-c's
 *    h3000__frame_chunk__unpack to exactly the fields that were encoded;
 *  - ack_decode agrees with h3000__ack__pack, skips unknown fields, rejects garbage;
 *  - wafer id validation;
 *  - synth: vectors from an independent implementation of the definition in synth.h,
 *    prefix property, mismatch offsets, size parsing.
 * No network: only pure functions of libingest (linked from ingest_static).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/crc32c.h"
#include "h3000.pb-c.h"
#include "producer/producer_internal.h"
#include "producer/synth.h"

static uint8_t *build_msg(const uint8_t *head, size_t hl, const uint8_t *body, size_t bl)
{
	uint8_t *m = malloc(hl + bl + 1);
	assert_non_null(m);
	memcpy(m, head, hl);
	memcpy(m + hl, body, bl);
	return m;
}

static void check_chunk(const char *id, uint64_t off, bool last, const struct chunk_meta *meta,
			uint64_t sid, size_t body_len)
{
	uint8_t head[PRODUCER_CHUNK_HEAD_MAX];
	uint8_t *body = malloc(body_len + 1);
	assert_non_null(body);
	synth_fill(body, body_len, synth_key(id), 99);
	size_t hl = chunk_head_encode(head, sizeof(head), id, off, last, meta, sid, body_len);
	assert_true(hl > 0);
	uint8_t *m = build_msg(head, hl, body, body_len);

	H3000__FrameChunk *c = h3000__frame_chunk__unpack(NULL, hl + body_len, m);
	assert_non_null(c);
	assert_string_equal(c->frameid, id);
	assert_int_equal(c->offset, off);
	assert_int_equal(c->last, last);
	assert_int_equal(c->sessionid, sid);
	assert_int_equal(c->data.len, body_len);
	if (body_len)
		assert_memory_equal(c->data.data, body, body_len);
	if (meta) {
		assert_non_null(c->meta);
		assert_string_equal(c->meta->frameid, id);
		assert_int_equal(c->meta->length, meta->length);
		assert_string_equal(c->meta->waferid, meta->wafer_id);
		assert_true(c->meta->timestamp == meta->timestamp);
		assert_int_equal(c->meta->crc32c, meta->crc32c);
		assert_int_equal(c->meta->hascrc32c, meta->has_crc);
		assert_int_equal(c->meta->sessionid, sid);
		assert_int_equal(c->meta->addr, 0);
		assert_int_equal(c->meta->rkey, 0);
	} else {
		assert_null(c->meta);
	}
	/* the head is what a stock serializer writes for the same message minus the data bytes */
	size_t packed = h3000__frame_chunk__get_packed_size(c);
	assert_int_equal(packed, hl + body_len);
	uint8_t *re = malloc(packed);
	assert_non_null(re);
	h3000__frame_chunk__pack(c, re);
	assert_memory_equal(re, m, hl);
	free(re);
	h3000__frame_chunk__free_unpacked(c, NULL);
	free(m);
	free(body);
}

static void test_chunk_first(void **state)
{
	(void)state;
	struct chunk_meta m = { .length = 3u << 20, .wafer_id = "W-42.a_b", .timestamp = 1763770000123456789,
				.crc32c = 0xdeadbeef, .has_crc = true };
	check_chunk("7", 0, false, &m, 123456789, 1u << 20);
	/* a GUID, a path-like id, spaces and non-ASCII: the bytes go out as they are */
	check_chunk("0b5f9c3e-8d1a-4c2e-9f57-3a1d2b4c5e6f", 0, false, &m, 1, 4096);
	check_chunk("wafer-12/frame-7", 0, false, &m, 1, 10);
	check_chunk("frame \xc3\xa9t\xc3\xa9 7", 0, true, &m, 0, 3);
}

static void test_chunk_middle_and_last(void **state)
{
	(void)state;
	check_chunk("7", 1u << 20, false, NULL, 5, 1u << 20);
	check_chunk("7", 2u << 20, true, NULL, 5, 12345);
}

static void test_chunk_single(void **state)
{
	(void)state;
	/* a frame that fits one chunk: meta and last together, odd sizes */
	struct chunk_meta m = { .length = 4097, .wafer_id = "w", .timestamp = 1, .crc32c = 1,
				.has_crc = true };
	check_chunk("1", 0, true, &m, 1, 4097);
	m.length = 1;
	check_chunk("2", 0, true, &m, 0, 1);
}

static void test_chunk_extremes(void **state)
{
	(void)state;
	char wafer[ING_ID_MAX + 1], id[ING_ID_MAX + 1];
	memset(wafer, 'x', ING_ID_MAX);
	wafer[ING_ID_MAX] = '\0';
	memset(id, 'i', ING_ID_MAX);
	id[ING_ID_MAX] = '\0';
	/* biggest varints, a negative timestamp (10-byte varint), 256-byte ids */
	struct chunk_meta m = { .length = UINT64_MAX, .wafer_id = wafer, .timestamp = -5,
				.crc32c = UINT32_MAX, .has_crc = true };
	check_chunk(id, 0, false, &m, UINT64_MAX, 300);
	check_chunk(id, UINT64_MAX - 1, true, NULL, UINT64_MAX, 1);
	uint8_t head[PRODUCER_CHUNK_HEAD_MAX];
	assert_true(chunk_head_encode(head, sizeof(head), id, 0, true, &m, UINT64_MAX,
				      64u << 20) <= PRODUCER_CHUNK_HEAD_MAX);
	/* too small a buffer: 0, nothing written past cap */
	assert_int_equal(chunk_head_encode(head, 10, "1", 0, false, &m, 1, 100), 0);
	/* an over-long wafer or frame id is refused */
	char longw[ING_ID_MAX + 2];
	memset(longw, 'y', sizeof(longw) - 1);
	longw[sizeof(longw) - 1] = '\0';
	assert_int_equal(chunk_head_encode(head, sizeof(head), longw, 0, false, NULL, 1, 100), 0);
	m.wafer_id = longw;
	assert_int_equal(chunk_head_encode(head, sizeof(head), "1", 0, false, &m, 1, 100), 0);
}

static void test_ack_decode(void **state)
{
	(void)state;
	H3000__Ack a = H3000__ACK__INIT;
	a.frameid = "1f0e6c2a-guid-like \xc3\xa9";
	a.waferid = "W/7";
	a.ok = 1;
	a.msg = "stored";
	a.stage = H3000__ACK_STAGE__ACK_STAGE_DURABLE;
	a.code = H3000__ERROR_CODE__ERROR_NONE;
	a.retryable = 0;
	a.duplicate = 1;
	a.crc32c = 0x89abcdef;
	a.latencyns = 123456789012ull;
	uint8_t buf[256];
	size_t n = h3000__ack__pack(&a, buf);
	struct wire_ack w;
	assert_int_equal(ack_decode(buf, n, &w), 0);
	assert_string_equal(w.frame_id, "1f0e6c2a-guid-like \xc3\xa9");
	assert_string_equal(w.wafer_id, "W/7");
	assert_true(w.ok);
	assert_string_equal(w.msg, "stored");
	assert_int_equal(w.stage, 2);
	assert_int_equal(w.code, 0);
	assert_false(w.retryable);
	assert_true(w.duplicate);
	assert_int_equal(w.crc32c, 0x89abcdef);
	assert_int_equal(w.latency_ns, 123456789012ull);

	/* failure with a long message: truncated, NUL-terminated */
	char longmsg[700];
	memset(longmsg, 'm', sizeof(longmsg) - 1);
	longmsg[sizeof(longmsg) - 1] = '\0';
	H3000__Ack f = H3000__ACK__INIT;
	f.frameid = "9";
	f.msg = longmsg;
	f.code = H3000__ERROR_CODE__ERROR_NO_SPACE;
	f.retryable = 1;
	uint8_t big[800];
	n = h3000__ack__pack(&f, big);
	assert_int_equal(ack_decode(big, n, &w), 0);
	assert_string_equal(w.frame_id, "9");
	assert_string_equal(w.wafer_id, "");
	assert_false(w.ok);
	assert_int_equal(w.code, 8);
	assert_true(w.retryable);
	assert_int_equal(strlen(w.msg), sizeof(w.msg) - 1);

	/* unknown fields of every wire type are skipped */
	uint8_t u[64];
	size_t k = 0;
	u[k++] = 0x0a; u[k++] = 1; u[k++] = '5';               /* frameId = "5" */
	u[k++] = 0xa0; u[k++] = 0x01;                          /* key: field 20, varint (2 bytes) */
	u[k++] = 0x80; u[k++] = 0x01;                          /* its value, 128 */
	u[k++] = (11 << 3) | 1; memset(u + k, 0xaa, 8); k += 8; /* fixed64 */
	u[k++] = (12 << 3) | 2; u[k++] = 3; memcpy(u + k, "abc", 3); k += 3;
	u[k++] = (13 << 3) | 5; memset(u + k, 0xbb, 4); k += 4; /* fixed32 */
	u[k++] = 0x10; u[k++] = 0x01;                          /* ok = true */
	assert_int_equal(ack_decode(u, k, &w), 0);
	assert_string_equal(w.frame_id, "5");
	assert_true(w.ok);

	/* malformed: truncated varint, length past the end, group wire type */
	uint8_t t1[] = { 0x08, 0x80 };
	assert_int_equal(ack_decode(t1, sizeof(t1), &w), -EINVAL);
	uint8_t t2[] = { 0x1a, 0x05, 'a' };
	assert_int_equal(ack_decode(t2, sizeof(t2), &w), -EINVAL);
	uint8_t t3[] = { 0x0b };
	assert_int_equal(ack_decode(t3, sizeof(t3), &w), -EINVAL);
	assert_int_equal(ack_decode(NULL, 0, &w), 0);
}

static void test_id_ok(void **state)
{
	(void)state;
	char w[ING_ID_MAX + 2];
	assert_true(producer_id_ok("W42"));
	assert_true(producer_id_ok("a.b_c-D9"));
	assert_true(producer_id_ok("a/b"));
	assert_true(producer_id_ok("a b"));
	assert_true(producer_id_ok("\xc3\xa9"));            /* é */
	assert_true(producer_id_ok(".."));
	assert_true(producer_id_ok("../../etc/passwd"));
	assert_false(producer_id_ok(""));
	assert_false(producer_id_ok(NULL));
	assert_false(producer_id_ok("a\tb"));               /* control character */
	assert_false(producer_id_ok("\xc3"));               /* truncated UTF-8 */
	assert_false(producer_id_ok("\xc0\xaf"));           /* overlong '/' */
	memset(w, 'a', ING_ID_MAX);
	w[ING_ID_MAX] = '\0';
	assert_true(producer_id_ok(w));
	w[ING_ID_MAX] = 'a';
	w[ING_ID_MAX + 1] = '\0';
	assert_false(producer_id_ok(w));
}

static void test_synth_vectors(void **state)
{
	(void)state;
	/* computed with an independent Python implementation of the synth.h definition */
	static const uint8_t v1[13] = { 0xc7, 0x4c, 0xdc, 0x31, 0x54, 0x71, 0xa5, 0x21,
					0x52, 0x87, 0xc3, 0x1c, 0x10 };
	static const uint8_t v2[11] = { 0x50, 0xf5, 0x68, 0x95, 0x4f, 0x9c, 0x2d, 0xb2,
					0x19, 0x25, 0xad };
	uint8_t b[16];
	synth_fill(b, 13, 1, 1);
	assert_memory_equal(b, v1, 13);
	synth_fill(b, 11, 42, 7);
	assert_memory_equal(b, v2, 11);
	struct synth_spec s = { .seed = 1, .nsizes = 1, .sizes = { { 1u << 20, 16u << 20 } } };
	assert_int_equal(synth_frame_len(&s, 1), 14515795);
	assert_int_equal(synth_frame_len(&s, 2), 11246269);
	struct synth_spec s2 = { .seed = 7, .nsizes = 1, .sizes = { { 65536, 4u << 20 } } };
	assert_int_equal(synth_frame_len(&s2, 300), 2972915);
	/* the key of a string id: 64-bit FNV-1a of its bytes */
	assert_true(synth_key("frame-1") == 0xb2ff214a2a8d9180ull);
	assert_true(synth_key("") == 0xcbf29ce484222325ull);
	struct synth_spec fixed;
	synth_spec_fixed(&fixed, 3, 4096);
	assert_int_equal(synth_frame_len(&fixed, 77), 4096);
}

static void test_synth_compare(void **state)
{
	(void)state;
	size_t n = 100003;
	uint8_t *a = malloc(n), *b = malloc(n + 8);
	assert_non_null(a);
	assert_non_null(b);
	synth_fill(a, n, 5, 9);
	synth_fill(b, n + 8, 5, 9);
	assert_memory_equal(a, b, n);                    /* prefix property */
	assert_true(synth_compare(a, n, 5, 9) == UINT64_MAX);
	assert_true(synth_compare(a, n, 6, 9) != UINT64_MAX);   /* other id */
	assert_true(synth_compare(a, n, 5, 10) != UINT64_MAX);  /* other seed */
	a[77777] ^= 1;
	assert_int_equal(synth_compare(a, n, 5, 9), 77777);
	a[77777] ^= 1;
	a[n - 1] ^= 0x80;                                /* in the partial last word */
	assert_int_equal(synth_compare(a, n, 5, 9), n - 1);
	free(a);
	free(b);
}

static void test_synth_fill_crc(void **state)
{
	(void)state;
	static const uint64_t lens[] = { 1, 7, 8, 9, 4095, 4096, 65537, 1000003 };
	uint8_t *a = malloc(1000003), *b = malloc(1000003);
	assert_non_null(a);
	assert_non_null(b);
	for (size_t k = 0; k < sizeof(lens) / sizeof(lens[0]); k++) {
		uint32_t crc = synth_fill_crc(a, lens[k], 31 + k, 77);
		synth_fill(b, lens[k], 31 + k, 77);
		assert_memory_equal(a, b, lens[k]);
		assert_int_equal(crc, ing_crc32c(0, b, lens[k]));
	}
	free(a);
	free(b);
}

/* --sizes lists: one item keeps the single-range lengths; several items pick one per frame */
static void test_synth_sizes(void **state)
{
	(void)state;
	struct synth_spec s;
	char why[160];

	memset(&s, 0, sizeof(s));
	s.seed = 1;
	assert_int_equal(synth_spec_sizes(&s, "1M-16M", why, sizeof(why)), 0);
	assert_int_equal(synth_frame_len(&s, 1), 14515795);    /* as before lists existed */
	assert_int_equal(synth_spec_sizes(&s, "64K,4M,16M-64M", why, sizeof(why)), 0);
	assert_int_equal(s.nsizes, 3);
	assert_true(synth_spec_max(&s) == 64u << 20);
	unsigned seen[3] = { 0 };
	for (uint64_t n = 0; n < 3000; n++) {
		uint64_t len = synth_frame_len(&s, n);
		if (len == 65536)
			seen[0]++;
		else if (len == 4u << 20)
			seen[1]++;
		else if (len >= 16u << 20 && len <= 64u << 20)
			seen[2]++;
		else
			fail_msg("frame %llu: length %llu is in no item", (unsigned long long)n,
				 (unsigned long long)len);
	}
	for (int i = 0; i < 3; i++)   /* uniform over the items: ~1000 each */
		assert_true(seen[i] > 800 && seen[i] < 1200);
	assert_int_equal(synth_spec_sizes(&s, "16M-1M", why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "MIN-MAX"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_chunk_first),
		cmocka_unit_test(test_chunk_middle_and_last),
		cmocka_unit_test(test_chunk_single),
		cmocka_unit_test(test_chunk_extremes),
		cmocka_unit_test(test_ack_decode),
		cmocka_unit_test(test_id_ok),
		cmocka_unit_test(test_synth_vectors),
		cmocka_unit_test(test_synth_compare),
		cmocka_unit_test(test_synth_fill_crc),
		cmocka_unit_test(test_synth_sizes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
