/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_ident.c - common/ident.c's way back from a file name to its id (catalog recovery):
 * every id that ing_id_file_name names losslessly comes back; shortened names say so;
 * names no id has (other spellings of an escape, stray files) are refused.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "common/ident.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static void round_trip(const char *id)
{
	char name[ING_ID_FILE_NAME_MAX + 1], back[ING_ID_MAX + 1];
	assert_int_equal(ing_id_file_name(name, sizeof(name), id), 0);
	assert_int_equal(ing_id_from_file_name(back, sizeof(back), name), 0);
	assert_string_equal(back, id);
}

static void test_round_trip(void **state)
{
	(void)state;
	round_trip("frame-7");
	round_trip("w.12_x-3");
	round_trip("wafer-12/frame-7");
	round_trip("../../etc/passwd");
	round_trip(".");
	round_trip("..");
	round_trip("fr \xc3\xa9/1");
	round_trip("%41~");
	round_trip("{3F2504E0-4F89-11D3-9A0C-0305E82C3301}");
	char max_plain[201];
	memset(max_plain, 'a', 200);
	max_plain[200] = 0;
	round_trip(max_plain);
}

static void test_shortened(void **state)
{
	(void)state;
	char id[ING_ID_MAX + 1], name[ING_ID_FILE_NAME_MAX + 1], back[ING_ID_MAX + 1];
	memset(id, 'a', 201);   /* plain but above 200 bytes: escaped... and still plain chars */
	id[201] = 0;
	assert_int_equal(ing_id_file_name(name, sizeof(name), id), 0);
	assert_non_null(strchr(name, '~'));
	assert_int_equal(ing_id_from_file_name(back, sizeof(back), name), -ENOENT);
	for (int i = 0; i < 60; i++)
		memcpy(id + 2 * i, "\xc3\xbc", 2);   /* 60 x u-umlaut: 360 bytes escaped */
	id[120] = 0;
	assert_int_equal(ing_id_file_name(name, sizeof(name), id), 0);
	assert_int_equal(ing_id_from_file_name(back, sizeof(back), name), -ENOENT);
}

static void test_not_a_name(void **state)
{
	(void)state;
	char back[ING_ID_MAX + 1];
	assert_int_equal(ing_id_from_file_name(back, sizeof(back), "%41"), -EINVAL);   /* "A" is plain */
	assert_int_equal(ing_id_from_file_name(back, sizeof(back), "a%2fb"), -EINVAL);  /* lower-case hex */
	assert_int_equal(ing_id_from_file_name(back, sizeof(back), "a%2"), -EINVAL);
	assert_int_equal(ing_id_from_file_name(back, sizeof(back), "a%zz"), -EINVAL);
	assert_int_equal(ing_id_from_file_name(back, sizeof(back), ""), -EINVAL);
	assert_int_equal(ing_id_from_file_name(back, sizeof(back), "%0A"), -EINVAL);   /* a control char */
	assert_int_equal(ing_id_from_file_name(back, 4, "frame-7"), -ENAMETOOLONG);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_shortened),
		cmocka_unit_test(test_not_a_name),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
