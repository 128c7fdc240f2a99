/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_producer_hrw.c - fleet placement (producer/fleet.c, docs/FLEET.md "Routing"):
 *  - every vector of tests/fleet/hrw_vectors.tsv (made with Python's hashlib, checked by
 *    tests/fleet/hrw.py too) through the public ing_producer_hrw_score / _owner;
 *  - the failover order (owner first, then the next scores) from the same vectors;
 *  - ties go to the bytewise smaller node id; the empty wafer is "default";
 *  - adding a 4th node to 3 moves about a quarter of 4000 wafers, all to the new node;
 *    removing one moves only its own wafers.
 * No network: pure functions of libingest (linked from ingest_static).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "producer/producer_internal.h"

/* Python unicode_escape over UTF-8 bytes: \xNN and \\ only; "-" is "". */
static void unescape(const char *in, char *out, size_t cap)
{
	size_t n = 0;
	if (strcmp(in, "-") == 0) {
		out[0] = '\0';
		return;
	}
	for (const char *s = in; *s && n + 1 < cap; s++) {
		if (s[0] == '\\' && s[1] == 'x' && s[2] && s[3]) {
			char hex[3] = { s[2], s[3], 0 };
			out[n++] = (char)strtoul(hex, NULL, 16);
			s += 3;
		} else if (s[0] == '\\' && s[1] == '\\') {
			out[n++] = '\\';
			s++;
		} else {
			out[n++] = *s;
		}
	}
	out[n] = '\0';
}

static unsigned split_nodes(char *list, char ids[][ING_ID_MAX + 1], const char **ptrs, unsigned max)
{
	unsigned n = 0;
	for (char *tok = strtok(list, ","); tok && n < max; tok = strtok(NULL, ",")) {
		unescape(tok, ids[n], ING_ID_MAX + 1);
		ptrs[n] = ids[n];
		n++;
	}
	return n;
}

static void test_vectors(void **state)
{
	(void)state;
	const char *src = getenv("ING_TEST_SRCDIR");
	char path[1024], line[2048];
	snprintf(path, sizeof(path), "%s/tests/fleet/hrw_vectors.tsv", src ? src : ".");
	FILE *f = fopen(path, "r");
	if (!f)
		fail_msg("cannot open %s (set ING_TEST_SRCDIR to the source tree)", path);
	unsigned nscore = 0, nowner = 0, norder = 0;
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		if (!line[0] || line[0] == '#')
			continue;
		char *kind = strtok(line, "\t"), *a = strtok(NULL, "\t"), *b = strtok(NULL, "\t"),
		     *c = strtok(NULL, "\t");
		assert_non_null(kind);
		assert_non_null(a);
		assert_non_null(b);
		assert_non_null(c);
		char a2[1024], b2[ING_ID_MAX + 1], c2[1024];
		unescape(b, b2, sizeof(b2));
		if (strcmp(kind, "score") == 0) {
			unescape(a, a2, sizeof(a2));
			char got[17];
			snprintf(got, sizeof(got), "%016llx",
				 (unsigned long long)ing_producer_hrw_score(a2, b2));
			if (strcmp(got, c) != 0)
				fail_msg("score(%s, %s): want %s got %s", a, b, c, got);
			nscore++;
		} else if (strcmp(kind, "owner") == 0 || strcmp(kind, "order") == 0) {
			static char ids[16][ING_ID_MAX + 1];
			const char *ptrs[16];
			snprintf(a2, sizeof(a2), "%s", a);
			unsigned n = split_nodes(a2, ids, ptrs, 16);
			assert_true(n > 0);
			if (kind[1] == 'w') {
				unescape(c, c2, sizeof(c2));
				int o = ing_producer_hrw_owner(ptrs, n, b2);
				assert_true(o >= 0);
				if (strcmp(ptrs[o], c2) != 0)
					fail_msg("owner(%s, %s): want %s got %s", a, b, c2, ptrs[o]);
				nowner++;
			} else {
				/* failover order: take the owner out, the next owner is the next node */
				char got[1024] = "";
				for (unsigned left = n; left; left--) {
					int o = ing_producer_hrw_owner(ptrs, left, b2);
					assert_true(o >= 0);
					if (*got)
						strcat(got, ",");
					strcat(got, ptrs[o]);
					ptrs[o] = ptrs[left - 1];
				}
				if (strcmp(got, c) != 0)
					fail_msg("order(%s, %s): want %s got %s", a, b, c, got);
				norder++;
			}
		} else {
			fail_msg("unknown vector kind %s", kind);
		}
	}
	fclose(f);
	assert_true(nscore >= 8);
	assert_true(nowner >= 8);
	assert_true(norder >= 1);
}

static void test_ties_and_defaults(void **state)
{
	(void)state;
	/* equal scores: the bytewise smaller id wins ("\xc3..." is above ASCII) */
	assert_true(fleet_hrw_better(5, "a", 5, "b"));
	assert_false(fleet_hrw_better(5, "b", 5, "a"));
	assert_true(fleet_hrw_better(5, "z", 5, "\xc3\xa9"));
	assert_true(fleet_hrw_better(6, "b", 5, "a"));
	/* the empty and the NULL wafer are "default" */
	assert_int_equal(ing_producer_hrw_score("node-a", ""), ing_producer_hrw_score("node-a", "default"));
	assert_int_equal(ing_producer_hrw_score("node-a", NULL), ing_producer_hrw_score("node-a", "default"));
	/* the separator matters: ("ab", "c") and ("a", "bc") differ */
	assert_true(ing_producer_hrw_score("ab", "c") != ing_producer_hrw_score("a", "bc"));
	const char *none[1] = { NULL };
	assert_int_equal(ing_producer_hrw_owner(none, 0, "w"), -EINVAL);
	assert_int_equal(ing_producer_hrw_owner(none, 1, "w"), -EINVAL);
}

static void test_minimal_movement(void **state)
{
	(void)state;
	const char *nodes[4] = { "node-a", "node-b", "node-c", "node-d" };
	unsigned moved_join = 0, moved_leave = 0, total = 4000;
	for (unsigned w = 0; w < total; w++) {
		char wafer[32];
		snprintf(wafer, sizeof(wafer), "W%05u", w);
		int three = ing_producer_hrw_owner(nodes, 3, wafer);
		int four = ing_producer_hrw_owner(nodes, 4, wafer);
		if (three != four) {
			moved_join++;
			assert_int_equal(four, 3);   /* a join only takes wafers to the new node */
		}
		/* node-b leaves: only its wafers move */
		const char *without_b[3] = { "node-a", "node-c", "node-d" };
		int after = ing_producer_hrw_owner(without_b, 3, wafer);
		if (strcmp(nodes[four], without_b[after]) != 0) {
			moved_leave++;
			assert_string_equal(nodes[four], "node-b");
		}
	}
	/* about 1/4 each; a generous band, the hash is fixed so this is deterministic */
	assert_true(moved_join > total / 5 && moved_join < total * 3 / 10);
	assert_true(moved_leave > total / 5 && moved_leave < total * 3 / 10);
	print_message("join moved %u of %u wafers, leave moved %u\n", moved_join, total, moved_leave);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_vectors),
		cmocka_unit_test(test_ties_and_defaults),
		cmocka_unit_test(test_minimal_movement),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
