/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for control/net/grpc_wire.c: message framing, grpc-timeout, grpc-message. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "control/net/grpc.h"
#include "control/net/grpc_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* A stream of messages with lengths 0, 1, 4, 5, 300, 70000 (payload byte = f(msg, i)). */
static const size_t lens[] = { 0, 1, 4, 5, 300, 70000, 0, 17 };
#define NMSG (sizeof(lens) / sizeof(lens[0]))

static uint8_t pat(size_t m, size_t i)
{
	return (uint8_t)(m * 31 + i * 7 + 1);
}

static uint8_t *build(size_t *total)
{
	size_t n = 0;
	for (size_t m = 0; m < NMSG; m++)
		n += GRPC_PREFIX_LEN + lens[m];
	uint8_t *b = malloc(n), *p = b;
	for (size_t m = 0; m < NMSG; m++) {
		grpc_put_prefix(p, 0, (uint32_t)lens[m]);
		p += GRPC_PREFIX_LEN;
		for (size_t i = 0; i < lens[m]; i++)
			*p++ = pat(m, i);
	}
	*total = n;
	return b;
}

struct collect {
	size_t msg, got, begins, ends;
	int bad;
};

static void feed(struct grpc_deframer *d, struct collect *c, const uint8_t *p, size_t n)
{
	for (;;) {
		const uint8_t *data;
		size_t dl;
		enum grpc_wire_ev ev = grpc_deframe_next(d, &p, &n, &data, &dl);
		if (ev == GRPC_WIRE_NEED) {
			if (n != 0)
				c->bad++;
			return;
		}
		if (ev == GRPC_WIRE_BEGIN) {
			if (d->len != lens[c->msg] || d->flags != 0)
				c->bad++;
			c->begins++;
			c->got = 0;
		} else if (ev == GRPC_WIRE_DATA) {
			if (dl == 0)
				c->bad++;
			for (size_t i = 0; i < dl; i++)
				if (data[i] != pat(c->msg, c->got + i))
					c->bad++;
			c->got += dl;
		} else if (ev == GRPC_WIRE_END) {
			if (c->got != lens[c->msg])
				c->bad++;
			c->ends++;
			c->msg++;
		}
	}
}

static void test_deframe_whole(void **state)
{
	(void)state;
	size_t n;
	uint8_t *b = build(&n);
	struct grpc_deframer d;
	struct collect c = { 0 };
	grpc_deframer_init(&d);
	feed(&d, &c, b, n);
	assert_int_equal(c.bad, 0);
	assert_int_equal(c.begins, NMSG);
	assert_int_equal(c.ends, NMSG);
	assert_true(grpc_deframer_idle(&d));
	free(b);
}

/* Every split point for two pieces, then random piece sizes including 1-byte pieces. */
static void test_deframe_splits(void **state)
{
	(void)state;
	size_t n;
	uint8_t *b = build(&n);
	for (size_t cut = 0; cut <= n; cut += (cut < 400 ? 1 : 997)) {
		struct grpc_deframer d;
		struct collect c = { 0 };
		grpc_deframer_init(&d);
		feed(&d, &c, b, cut);
		feed(&d, &c, b + cut, n - cut);
		assert_int_equal(c.bad, 0);
		assert_int_equal(c.ends, NMSG);
	}
	srand(7);
	for (int round = 0; round < 50; round++) {
		struct grpc_deframer d;
		struct collect c = { 0 };
		grpc_deframer_init(&d);
		size_t off = 0;
		while (off < n) {
			size_t k = (size_t)(rand() % (round < 10 ? 3 : 9000));
			if (k > n - off)
				k = n - off;
			feed(&d, &c, b + off, k);
			off += k;
		}
		assert_int_equal(c.bad, 0);
		assert_int_equal(c.ends, NMSG);
		assert_true(grpc_deframer_idle(&d));
	}
	free(b);
}

static void test_deframe_flags_and_big_len(void **state)
{
	(void)state;
	uint8_t hdr[5];
	grpc_put_prefix(hdr, GRPC_FLAG_COMPRESSED, 0xfffffff0u);
	struct grpc_deframer d;
	grpc_deframer_init(&d);
	const uint8_t *p = hdr, *data;
	size_t n = 5, dl;
	assert_int_equal(grpc_deframe_next(&d, &p, &n, &data, &dl), GRPC_WIRE_BEGIN);
	assert_int_equal(d.flags, GRPC_FLAG_COMPRESSED);
	assert_int_equal(d.len, 0xfffffff0u);
	assert_int_equal(n, 0);
	assert_false(grpc_deframer_idle(&d));
	assert_int_equal(grpc_deframe_next(&d, &p, &n, &data, &dl), GRPC_WIRE_NEED);
}

static void test_timeout_parse(void **state)
{
	(void)state;
	uint64_t ns;
	assert_int_equal(grpc_timeout_parse("100m", 4, &ns), 0);
	assert_int_equal(ns, 100000000ull);
	assert_int_equal(grpc_timeout_parse("1S", 2, &ns), 0);
	assert_int_equal(ns, 1000000000ull);
	assert_int_equal(grpc_timeout_parse("2M", 2, &ns), 0);
	assert_int_equal(ns, 120000000000ull);
	assert_int_equal(grpc_timeout_parse("1H", 2, &ns), 0);
	assert_int_equal(ns, 3600000000000ull);
	assert_int_equal(grpc_timeout_parse("5u", 2, &ns), 0);
	assert_int_equal(ns, 5000ull);
	assert_int_equal(grpc_timeout_parse("12345678n", 9, &ns), 0);
	assert_int_equal(ns, 12345678ull);
	assert_int_equal(grpc_timeout_parse("99999999H", 9, &ns), 0);
	assert_true(ns == UINT64_MAX);   /* saturated */
	assert_int_equal(grpc_timeout_parse("123456789n", 10, &ns), -EINVAL); /* 9 digits */
	assert_int_equal(grpc_timeout_parse("m", 1, &ns), -EINVAL);
	assert_int_equal(grpc_timeout_parse("10x", 3, &ns), -EINVAL);
	assert_int_equal(grpc_timeout_parse("1 m", 3, &ns), -EINVAL);
	assert_int_equal(grpc_timeout_parse("-1m", 3, &ns), -EINVAL);
	/* Length-bounded: trailing bytes beyond len are not read. */
	assert_int_equal(grpc_timeout_parse("7mXYZ", 2, &ns), 0);
	assert_int_equal(ns, 7000000ull);
}

static void test_timeout_format(void **state)
{
	(void)state;
	char b[16];
	uint64_t ns;
	grpc_timeout_format(5000000ull, b, sizeof(b));
	assert_string_equal(b, "5000000n");
	grpc_timeout_format(1500000000ull, b, sizeof(b));
	assert_string_equal(b, "1500000u");
	grpc_timeout_format(200000000000ull, b, sizeof(b));   /* 200 s */
	assert_string_equal(b, "200000m");
	/* Round trip never shortens. */
	static const uint64_t v[] = { 1, 999, 123456789, 100000001, 7ull * 86400 * 1000000000ull };
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		grpc_timeout_format(v[i], b, sizeof(b));
		assert_int_equal(grpc_timeout_parse(b, strlen(b), &ns), 0);
		assert_true(ns >= v[i]);
		assert_true(strlen(b) <= 9);
	}
}

static void test_pct(void **state)
{
	(void)state;
	char out[64], back[64];
	size_t n = grpc_pct_encode("ok 100% \xc3\xa9\n", out, sizeof(out));
	assert_string_equal(out, "ok 100%25 %C3%A9%0A");
	assert_int_equal(n, strlen(out));
	grpc_pct_decode(out, strlen(out), back, sizeof(back));
	assert_string_equal(back, "ok 100% \xc3\xa9\n");
	/* Lenient decoding of bad escapes. */
	grpc_pct_decode("a%zzb%4", 7, back, sizeof(back));
	assert_string_equal(back, "a%zzb%4");
	/* Truncation on a whole escape, always terminated. */
	n = grpc_pct_encode("\n\n\n", out, 8);
	assert_string_equal(out, "%0A%0A");
	assert_int_equal(n, 6);
	grpc_pct_encode(NULL, out, sizeof(out));
	assert_string_equal(out, "");
}

static void test_misc(void **state)
{
	(void)state;
	char buf[64];
	const char *h, *p;
	assert_int_equal(grpc_split_hostport("127.0.0.1:50051", buf, sizeof(buf), &h, &p), 0);
	assert_string_equal(h, "127.0.0.1");
	assert_string_equal(p, "50051");
	assert_int_equal(grpc_split_hostport("[::1]:0", buf, sizeof(buf), &h, &p), 0);
	assert_string_equal(h, "::1");
	assert_string_equal(p, "0");
	assert_int_equal(grpc_split_hostport("nohost", buf, sizeof(buf), &h, &p), -EINVAL);
	assert_int_equal(grpc_split_hostport("[::1]", buf, sizeof(buf), &h, &p), -EINVAL);
	/* the port must be a number in 0..65535 (getaddrinfo would wrap 99999 to 34463) */
	assert_int_equal(grpc_split_hostport("127.0.0.1:65535", buf, sizeof(buf), &h, &p), 0);
	assert_int_equal(grpc_split_hostport("127.0.0.1:65536", buf, sizeof(buf), &h, &p), -EINVAL);
	assert_int_equal(grpc_split_hostport("127.0.0.1:99999", buf, sizeof(buf), &h, &p), -EINVAL);
	assert_int_equal(grpc_split_hostport("[::1]:123456", buf, sizeof(buf), &h, &p), -EINVAL);
	assert_int_equal(grpc_split_hostport("127.0.0.1:", buf, sizeof(buf), &h, &p), -EINVAL);
	assert_int_equal(grpc_split_hostport("127.0.0.1:http", buf, sizeof(buf), &h, &p), -EINVAL);
	assert_int_equal(grpc_status_from_http(404), ING_GRPC_UNIMPLEMENTED);
	assert_int_equal(grpc_status_from_http(503), ING_GRPC_UNAVAILABLE);
	assert_int_equal(grpc_status_from_http(500), ING_GRPC_UNKNOWN);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_deframe_whole),
		cmocka_unit_test(test_deframe_splits),
		cmocka_unit_test(test_deframe_flags_and_big_len),
		cmocka_unit_test(test_timeout_parse),
		cmocka_unit_test(test_timeout_format),
		cmocka_unit_test(test_pct),
		cmocka_unit_test(test_misc),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
