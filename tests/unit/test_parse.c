/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "common/parse.h"

static void sizes_ok(void **state)
{
	(void)state;
	static const struct { const char *s; uint64_t v; } ok[] = {
		{ "0", 0 }, { "4096", 4096 }, { "4K", 4096 }, { "4k", 4096 }, { "4KiB", 4096 },
		{ "4kb", 4096 }, { "16M", 16ull << 20 }, { "16MiB", 16ull << 20 }, { "1G", 1ull << 30 },
		{ "2T", 2ull << 40 }, { "512B", 512 }, { "16777215T", 16777215ull << 40 },
		{ "18446744073709551615", UINT64_MAX },
	};
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		uint64_t v = 1;
		assert_int_equal(ing_parse_size(ok[i].s, &v), 0);
		assert_true(v == ok[i].v);
	}
}

static void sizes_bad(void **state)
{
	(void)state;
	static const char *const inval[] = { "", "-1", "+1", "K", "4 M", "4MM", "4X", "4Mx", "0x10", "1.5M", " 4" };
	for (size_t i = 0; i < sizeof(inval) / sizeof(inval[0]); i++) {
		uint64_t v = 7;
		assert_int_equal(ing_parse_size(inval[i], &v), -EINVAL);
		assert_true(v == 7); /* untouched on error */
	}
	uint64_t v;
	assert_int_equal(ing_parse_size("18446744073709551616", &v), -ERANGE);
	assert_int_equal(ing_parse_size("16777216T", &v), -ERANGE);
	assert_int_equal(ing_parse_size("17179869184G", &v), -ERANGE);
	assert_int_equal(ing_parse_size(NULL, &v), -EINVAL);
}

static void sizes_n(void **state)
{
	(void)state;
	const char *list = "4M:16,16M:8";
	uint64_t v;
	assert_int_equal(ing_parse_size_n(list, 2, &v), 0);
	assert_true(v == 4ull << 20);
	assert_int_equal(ing_parse_size_n(list + 6, 3, &v), 0);
	assert_true(v == 16ull << 20);
	assert_int_equal(ing_parse_size_n(list, 3, &v), -EINVAL); /* "4M:" */
	assert_int_equal(ing_parse_size_n(list, 0, &v), -EINVAL);
}

static void u64s(void **state)
{
	(void)state;
	uint64_t v;
	assert_int_equal(ing_parse_u64("42", 100, &v), 0);
	assert_true(v == 42);
	assert_int_equal(ing_parse_u64("0x2a", 100, &v), 0);
	assert_true(v == 42);
	assert_int_equal(ing_parse_u64("101", 100, &v), -ERANGE);
	assert_int_equal(ing_parse_u64("18446744073709551615", UINT64_MAX, &v), 0);
	assert_true(v == UINT64_MAX);
	assert_int_equal(ing_parse_u64("18446744073709551616", UINT64_MAX, &v), -ERANGE);
	assert_int_equal(ing_parse_u64("0x", 100, &v), -EINVAL);
	assert_int_equal(ing_parse_u64("-1", UINT64_MAX, &v), -EINVAL);
	assert_int_equal(ing_parse_u64("", 100, &v), -EINVAL);
	assert_int_equal(ing_parse_u64("12a", 1000, &v), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(sizes_ok),
		cmocka_unit_test(sizes_bad),
		cmocka_unit_test(sizes_n),
		cmocka_unit_test(u64s),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
