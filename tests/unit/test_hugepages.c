/* SPDX-License-Identifier: Apache-2.0 */
/* test_hugepages.c - common/hugepages.c over fake /sys and /proc trees in a temp dir. */
#include "common/hugepages.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

static char root[64];

static void put(const char *rel, const char *text)
{
	char path[512], cmd[600];
	snprintf(path, sizeof(path), "%s/%s", root, rel);
	snprintf(cmd, sizeof(cmd), "mkdir -p \"$(dirname '%s')\"", path);
	assert_int_equal(system(cmd), 0);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static int setup(void **state)
{
	(void)state;
	snprintf(root, sizeof(root), "/tmp/test_hugepages.XXXXXX");
	assert_non_null(mkdtemp(root));
	return 0;
}

static int teardown(void **state)
{
	char cmd[128];
	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	return system(cmd);
}

static void query(int node, struct ing_hugepages *h)
{
	char sys[128], proc[128];
	snprintf(sys, sizeof(sys), "%s/sys", root);
	snprintf(proc, sizeof(proc), "%s/proc", root);
	ing_hugepages_query(sys, proc, node, h);
}

static void test_no_hugetlb(void **state)
{
	struct ing_hugepages h;
	(void)state;
	query(0, &h);
	assert_false(h.supported);
	assert_int_equal(h.page_size, 2u << 20);   /* the default when meminfo says nothing */
	assert_int_equal(h.node, -1);
	assert_int_equal(h.nr, 0);
	assert_int_equal(h.free, 0);
}

static void test_system_and_node(void **state)
{
	struct ing_hugepages h;
	(void)state;
	put("proc/meminfo", "MemTotal: 1000 kB\nHugepagesize:       2048 kB\n");
	put("sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages", "300\n");
	put("sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages", "200\n");
	put("sys/devices/system/node/node1/hugepages/hugepages-2048kB/nr_hugepages", "100\n");
	put("sys/devices/system/node/node1/hugepages/hugepages-2048kB/free_hugepages", "40\n");

	query(-1, &h);
	assert_true(h.supported);
	assert_int_equal(h.node, -1);
	assert_int_equal(h.nr, 300);
	assert_int_equal(h.free, 200);
	query(1, &h);
	assert_int_equal(h.node, 1);
	assert_int_equal(h.nr, 100);
	assert_int_equal(h.free, 40);
	/* a node without per-node counts (no NUMA in the kernel): the system's */
	query(3, &h);
	assert_int_equal(h.node, -1);
	assert_int_equal(h.free, 200);
}

static void test_for_pool(void **state)
{
	(void)state;
	/* the default pool 4M:16,16M:8,64M:4 = 448 MiB: 224 pages of 2 MiB */
	uint64_t s[] = { 4u << 20, 16u << 20, 64u << 20 };
	unsigned n[] = { 16, 8, 4 };
	assert_int_equal(ing_hugepages_for_pool(s, n, 3, 2u << 20), 224);
	/* slots round up to the page one by one: 1 MiB x 8 takes 8 pages, not 4 */
	uint64_t s1[] = { 1u << 20, 3u << 20 };
	unsigned n1[] = { 8, 2 };
	assert_int_equal(ing_hugepages_for_pool(s1, n1, 2, 2u << 20), 8 + 4);
	/* 1 GiB pages: each 64 MiB slot takes a whole one */
	assert_int_equal(ing_hugepages_for_pool(s, n, 3, 1u << 30), 28);
	assert_int_equal(ing_hugepages_for_pool(s, n, 3, 0), 0);
}

static void test_advice(void **state)
{
	struct ing_hugepages h = { .supported = true, .page_size = 2u << 20, .node = 1 };
	char buf[512];
	(void)state;
	ing_hugepages_advice(buf, sizeof(buf), &h, 224);
	assert_non_null(strstr(buf, "reserve 224 x 2 MiB hugepages on node 1"));
	assert_non_null(strstr(buf, "'ingest-hugepages --pages 224 --node 1'"));
	assert_non_null(strstr(buf, "systemctl enable ingest-hugepages"));
	h.node = -1;
	ing_hugepages_advice(buf, sizeof(buf), &h, 8);
	assert_non_null(strstr(buf, "'ingest-hugepages --pages 8'"));
	assert_null(strstr(buf, "--node"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_no_hugetlb),
		cmocka_unit_test(test_system_and_node),
		cmocka_unit_test(test_for_pool),
		cmocka_unit_test(test_advice),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
