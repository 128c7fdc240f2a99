/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ingest-doctor's checks against the fake sysfs/procfs roots in tests/numa/roots
 * (gen_roots.py): a PASS machine, a WARN machine (Soft-RoCE VM) and a FAIL machine, plus
 * an empty root (no RDMA, no hugetlb, no cpufreq) that must not crash.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "numa/doctor.h"

/* The check called name, NULL if it was not run. */
static const struct ing_check *find_check(const struct ing_doctor_report *r, const char *name)
{
	for (unsigned i = 0; i < r->n; i++)
		if (strcmp(r->checks[i].name, name) == 0)
			return &r->checks[i];
	return NULL;
}

static char src[1024];
static char data_dir[] = "/tmp/ing-doctor-test-XXXXXX";

struct roots {
	char sys[1100], proc[1100], topo[1100];
};

static void setup_opts(struct ing_doctor_opts *o, struct roots *r, const char *root,
		       const char *topo)
{
	snprintf(r->sys, sizeof(r->sys), "%s/tests/numa/roots/%s/sys", src, root);
	snprintf(r->proc, sizeof(r->proc), "%s/tests/numa/roots/%s/proc", src, root);
	snprintf(r->topo, sizeof(r->topo), "%s/tests/numa/%s", src, topo);
	ing_doctor_opts_init(o);
	o->sysfs_root = r->sys;
	o->procfs_root = r->proc;
	o->topology = r->topo;
	o->data_dir = data_dir;
}

static void expect(const struct ing_doctor_report *r, const char *name, enum ing_check_status st,
		   const char *needle)
{
	const struct ing_check *k = find_check(r, name);
	if (!k)
		fail_msg("check %s was not run", name);
	if (k->status != st || (needle && !strstr(k->detail, needle)))
		fail_msg("%s: %s \"%s\" (want %s%s%s)", name, ing_check_status_str(k->status),
			 k->detail, ing_check_status_str(st), needle ? " with " : "",
			 needle ? needle : "");
	if (st != ING_CHECK_PASS && !k->fix[0])
		fail_msg("%s: %s without a fix line", name, ing_check_status_str(st));
}

static void test_pass_machine(void **state)
{
	(void)state;
	struct ing_doctor_opts o;
	struct roots rt;
	struct ing_doctor_report *r = calloc(1, sizeof(*r));

	setup_opts(&o, &rt, "pass", "four_node_smt.xml");
	o.pool_bytes = 1ull << 30;
	o.memlock = 64 << 10; /* small, but the fixture has CAP_IPC_LOCK */
	o.plan.block_dev = "nvme1n1";
	setenv("RDMAV_HUGEPAGES_SAFE", "1", 1);
	int fails = ing_doctor_run(&o, r);
	unsetenv("RDMAV_HUGEPAGES_SAFE");
	assert_int_equal(fails, 0);
	expect(r, "rdma.devices", ING_CHECK_PASS, "mlx5_1");
	expect(r, "rdma.port", ING_CHECK_PASS, "ACTIVE");
	expect(r, "rdma.gid", ING_CHECK_PASS, "RoCE v2 GID index 3 (192.168.10.2 on ens2f0np0)");
	expect(r, "rdma.mtu", ING_CHECK_PASS, "active MTU 4096, ens2f0np0 MTU 9000");
	expect(r, "memory.memlock", ING_CHECK_PASS, "CAP_IPC_LOCK");
	expect(r, "memory.hugepages", ING_CHECK_PASS, "1024 x 2 MiB");
	expect(r, "memory.hugetlbfs", ING_CHECK_PASS, "/dev/hugepages");
	/* counted on the pool's node, as ingestd decides: 768 free on node 0, 256 on node 1 */
	struct ing_doctor_report *rn = calloc(1, sizeof(*rn));
	o.plan.pool_node = 0;
	(void)ing_doctor_run(&o, rn);
	expect(rn, "memory.hugepages", ING_CHECK_PASS, "free on node 0 1.5 GiB >= pool 1 GiB");
	o.plan.pool_node = 1;
	(void)ing_doctor_run(&o, rn);
	expect(rn, "memory.hugepages", ING_CHECK_WARN, "256 x 2 MiB free on node 1");
	assert_non_null(strstr(find_check(rn, "memory.hugepages")->fix,
			       "'ingest-hugepages --pages 512 --node 1'"));
	o.plan.pool_node = -1;
	free(rn);
	expect(r, "memory.alignment", ING_CHECK_PASS, "512 x 2 MiB");
	expect(r, "memory.hugepages_safe", ING_CHECK_PASS, NULL);
	expect(r, "storage.dir", ING_CHECK_PASS, NULL);
	expect(r, "numa.topology", ING_CHECK_PASS, "4 NUMA nodes");
	expect(r, "numa.nic", ING_CHECK_PASS, "node 0");
	expect(r, "numa.placement", ING_CHECK_PASS, "control cpu 0, dataplane cpus 1, workers 2-3");
	expect(r, "cpu.governor", ING_CHECK_PASS, "performance");
	expect(r, "cpu.isolation", ING_CHECK_PASS, "isolated");
	expect(r, "cpu.iommu", ING_CHECK_PASS, "passthrough");
	assert_string_equal(r->rdma_dev, "mlx5_1");
	assert_int_equal(r->gid_index, 3);
	assert_int_equal(r->active_mtu, 4096);
	assert_int_equal(r->netdev_mtu, 9000);
	assert_false(r->active_mtu_estimated);

	/* text and JSON carry the verdict */
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);
	ing_doctor_format_text(r, f);
	fclose(f);
	assert_non_null(strstr(out, "[rdma]\n"));
	assert_non_null(strstr(out, "[numa]\n"));
	assert_non_null(strstr(out, "rdma: device mlx5_1 port 1, GID index 3 (192.168.10.2)"));
	assert_non_null(strstr(out, " 0 FAIL"));
	free(out);
	f = open_memstream(&out, &len);
	ing_doctor_format_json(r, f);
	fclose(f);
	assert_non_null(strstr(out, "\"gid_index\":3"));
	assert_non_null(strstr(out, "\"fail\":0"));
	free(out);
	free(r);
}

static void test_warn_machine(void **state)
{
	(void)state;
	struct ing_doctor_opts o;
	struct roots rt;
	struct ing_doctor_report *r = calloc(1, sizeof(*r));

	setup_opts(&o, &rt, "warn", "vm_single.xml");
	o.memlock = ING_DOCTOR_MEMLOCK_UNLIMITED;
	unsetenv("RDMAV_HUGEPAGES_SAFE");
	assert_int_equal(ing_doctor_run(&o, r), 0);
	assert_int_equal(r->n_fail, 0);
	expect(r, "rdma.devices", ING_CHECK_PASS, "rxe0");
	expect(r, "rdma.gid", ING_CHECK_WARN, "only IPv6 RoCE v2 at index 1");
	expect(r, "rdma.mtu", ING_CHECK_WARN, "active MTU 1024 (estimated), limited by eth0 MTU 1500");
	expect(r, "memory.memlock", ING_CHECK_PASS, "unlimited");
	expect(r, "memory.hugepages", ING_CHECK_WARN, "no hugepages reserved");
	expect(r, "memory.hugetlbfs", ING_CHECK_PASS, NULL);
	expect(r, "memory.alignment", ING_CHECK_PASS, "4 KiB pages");
	expect(r, "numa.nic", ING_CHECK_PASS, "single node");
	expect(r, "numa.placement", ING_CHECK_PASS, "adaptive");
	expect(r, "cpu.governor", ING_CHECK_WARN, "2 of 2 cpus");
	expect(r, "cpu.isolation", ING_CHECK_PASS, "adaptive");
	expect(r, "cpu.iommu", ING_CHECK_WARN, "no iommu=pt");
	assert_int_equal(r->gid_index, -1);
	assert_true(r->active_mtu_estimated);
	free(r);
}

static void test_fail_machine(void **state)
{
	(void)state;
	struct ing_doctor_opts o;
	struct roots rt;
	struct ing_doctor_report *r = calloc(1, sizeof(*r));

	setup_opts(&o, &rt, "fail", "two_socket.xml");
	o.memlock = 64 << 10;
	o.pool_bytes = (1ull << 30) + (1ull << 20); /* not a multiple of 2 MiB */
	o.hugepages = 1;                            /* ingestd --hugepages on */
	unsetenv("RDMAV_HUGEPAGES_SAFE");
	int fails = ing_doctor_run(&o, r);
	assert_int_equal(fails, 6);
	assert_int_equal(r->n_fail, 6);
	expect(r, "rdma.port", ING_CHECK_FAIL, "DOWN");
	expect(r, "rdma.gid", ING_CHECK_FAIL, "RoCE v1 only");
	expect(r, "rdma.mtu", ING_CHECK_FAIL, "exceeds what ens1f0np0 (MTU 1500) carries");
	expect(r, "memory.memlock", ING_CHECK_FAIL, "no CAP_IPC_LOCK");
	expect(r, "memory.hugepages", ING_CHECK_FAIL, "10 x 2 MiB free = 20 MiB");
	expect(r, "memory.alignment", ING_CHECK_FAIL, "not a multiple of the 2 MiB hugepage size");
	expect(r, "memory.hugepages_safe", ING_CHECK_WARN, "RDMAV_HUGEPAGES_SAFE not set");
	expect(r, "numa.nic", ING_CHECK_PASS, "node 1");
	expect(r, "numa.placement", ING_CHECK_WARN, "mlx5_0 is on node 1, nvme0n1 on node 0");
	expect(r, "cpu.isolation", ING_CHECK_WARN, "dataplane cpus 5 are not isolated");
	assert_non_null(strstr(find_check(r, "cpu.isolation")->fix, "isolcpus=5"));
	/* the fix is the persistent set-up of deploy/, with the pages the pool needs */
	assert_non_null(strstr(find_check(r, "memory.hugepages")->fix,
			       "'ingest-hugepages --pages 513'"));
	assert_non_null(strstr(find_check(r, "memory.hugepages")->detail, "will not start"));

	/* the default (auto): ingestd falls back to 4 KiB pages, so a warning, same fix */
	o.hugepages = -1;
	fails = ing_doctor_run(&o, r);
	assert_int_equal(fails, 5);
	expect(r, "memory.hugepages", ING_CHECK_WARN, "the MR pool uses 4 KiB pages");
	assert_non_null(strstr(find_check(r, "memory.hugepages")->fix,
			       "systemctl enable ingest-hugepages"));
	/* off: not used, nothing to fix */
	o.hugepages = 0;
	(void)ing_doctor_run(&o, r);
	expect(r, "memory.hugepages", ING_CHECK_PASS, "--hugepages off");
	free(r);
}

/* --hugepages auto falls back to 4 KiB pages (WARN), off does not use them; the pool must
 * fit in memory either way (memory.pool) */
static void test_pool_memory(void **state)
{
	(void)state;
	struct ing_doctor_opts o;
	struct roots rt;
	struct ing_doctor_report *r = calloc(1, sizeof(*r));

	setup_opts(&o, &rt, "fail", "two_socket.xml");   /* 10 of 64 hugepages free, 62.5 GiB */
	o.memlock = ING_DOCTOR_MEMLOCK_UNLIMITED;
	o.pool_bytes = 1ull << 30;
	o.hugepages = -1;
	ing_doctor_run(&o, r);
	expect(r, "memory.hugepages", ING_CHECK_WARN, "the MR pool uses 4 KiB pages");
	expect(r, "memory.pool", ING_CHECK_PASS, "1 GiB <= 62.5 GiB memory");
	o.hugepages = 0;
	ing_doctor_run(&o, r);
	expect(r, "memory.hugepages", ING_CHECK_PASS, "not used (--hugepages off)");
	o.pool_bytes = 100ull << 30;   /* ingestd --pool 64M:1600 */
	ing_doctor_run(&o, r);
	expect(r, "memory.pool", ING_CHECK_FAIL, "pool 100 GiB > 62.5 GiB memory (MemTotal)");
	free(r);
}

static void test_bad_options(void **state)
{
	(void)state;
	struct ing_doctor_opts o;
	struct roots rt;
	struct ing_doctor_report *r = calloc(1, sizeof(*r));

	/* asked for a device that is not there */
	setup_opts(&o, &rt, "pass", "four_node_smt.xml");
	o.rdma_dev = "mlx5_7";
	assert_true(ing_doctor_run(&o, r) >= 1);
	expect(r, "rdma.devices", ING_CHECK_FAIL, "'mlx5_7' not found (devices: mlx5_1)");

	/* a placement override that cannot be honoured */
	setup_opts(&o, &rt, "pass", "four_node_smt.xml");
	o.plan.pool_node = 9;
	ing_doctor_run(&o, r);
	expect(r, "numa.placement", ING_CHECK_FAIL, "--pool-node 9: no such NUMA node");
	expect(r, "cpu.isolation", ING_CHECK_WARN, "no placement plan");

	/* no data dir: storage says it was skipped */
	setup_opts(&o, &rt, "pass", "four_node_smt.xml");
	o.data_dir = NULL;
	ing_doctor_run(&o, r);
	expect(r, "storage.dir", ING_CHECK_WARN, "no --data-dir");

	/* a data dir that does not exist yet: its parent is checked */
	char missing[128];
	snprintf(missing, sizeof(missing), "%s/sub/dir", data_dir);
	o.data_dir = missing;
	ing_doctor_run(&o, r);
	expect(r, "storage.dir", ING_CHECK_WARN, "does not exist yet");
	assert_non_null(find_check(r, "storage.odirect"));
	free(r);
}

/* A check called name whose detail has needle (there may be one per rail or region). */
static void expect_some(const struct ing_doctor_report *r, const char *name, enum ing_check_status st,
		       const char *needle)
{
	for (unsigned i = 0; i < r->n; i++) {
		const struct ing_check *k = &r->checks[i];
		if (!strcmp(k->name, name) && k->status == st && strstr(k->detail, needle)) {
			if (st != ING_CHECK_PASS && !k->fix[0])
				fail_msg("%s: %s without a fix line", name, ing_check_status_str(st));
			return;
		}
	}
	fail_msg("no %s %s with \"%s\"", ing_check_status_str(st), name, needle);
}

static unsigned count_checks(const struct ing_doctor_report *r, const char *name)
{
	unsigned n = 0;
	for (unsigned i = 0; i < r->n; i++)
		n += !strcmp(r->checks[i].name, name);
	return n;
}

/*
 * The two-socket two-NIC machine: each ACTIVE device with an IPv4 GID is a rail and gets
 * its own port, GID and MTU checks; the DOWN one is said not to be a rail (a WARN: ingestd
 * starts without it); memlock must hold each rail's registration of its region; hugepages
 * are counted per region on its own node.
 */
static void test_rails_machine(void **state)
{
	(void)state;
	struct ing_doctor_opts o;
	struct roots rt;
	struct ing_doctor_report *r = calloc(1, sizeof(*r));

	setup_opts(&o, &rt, "rails", "two_socket_two_nic.xml");
	o.pool_bytes = 1ull << 30;           /* 512 x 2 MiB per region */
	o.memlock = 3ull << 29;              /* 1.5 GiB: one rail's worth, not two */
	setenv("RDMAV_HUGEPAGES_SAFE", "1", 1);
	int fails = ing_doctor_run(&o, r);
	unsetenv("RDMAV_HUGEPAGES_SAFE");
	expect(r, "rdma.devices", ING_CHECK_PASS,
	       "3 RDMA devices: mlx5_0, mlx5_1, mlx5_2; checking mlx5_0, mlx5_1 (one rail each)");
	expect(r, "rdma.unused", ING_CHECK_WARN, "mlx5_2 is not a rail: port 1 not ACTIVE");
	assert_int_equal(r->n_rails, 2);
	assert_string_equal(r->rails[1].dev, "mlx5_1");
	assert_int_equal(r->rails[1].node, 1);
	assert_int_equal(r->rails[1].gid_index, 3);
	assert_string_equal(r->rails[1].gid_ip, "10.2.0.5");
	assert_int_equal(r->rails[1].active_mtu, 4096);
	assert_string_equal(r->rdma_dev, "mlx5_0");   /* the first rail, as before rails */
	assert_int_equal(count_checks(r, "rdma.port"), 2);
	expect_some(r, "rdma.gid", ING_CHECK_PASS, "RoCE v2 GID index 3 (10.1.0.5 on ens1f0np0) on mlx5_0");
	expect_some(r, "rdma.gid", ING_CHECK_PASS, "RoCE v2 GID index 3 (10.2.0.5 on ens2f0np0) on mlx5_1");
	expect_some(r, "rdma.mtu", ING_CHECK_PASS, "ens2f0np0 MTU 9000");
	/* striping on (ingestd's default stripe-min 8M): every rail pins every region,
	 * 2 x 2 x 1 GiB + 16 MiB > 1.5 GiB; the line says why, the fix names stripe-min */
	assert_int_equal(o.plan.stripe_min, 8u << 20);
	expect(r, "memory.memlock", ING_CHECK_FAIL, "memlock 1.5 GiB < 2 rails x 2 regions x pool 1 GiB + 16 MiB "
	       "(stripe-min 8 MiB: every rail registers every region)");
	assert_non_null(strstr(find_check(r, "memory.memlock")->fix, "stripe-min = 0"));
	/* a region per rail node, its hugepages on that node: 600 free on node 0, 200 on 1 */
	expect_some(r, "memory.hugepages", ING_CHECK_PASS, "pool region 0: 800 x 2 MiB (800 free) "
		   "reserved; free on node 0 1.2 GiB >= pool 1 GiB");
	expect_some(r, "memory.hugepages", ING_CHECK_WARN, "pool region 1: 800 x 2 MiB (800 free) "
		   "reserved; 200 x 2 MiB free on node 1");
	expect(r, "memory.pool", ING_CHECK_PASS, "pool 2 GiB (2 regions x 1 GiB) <= 62.5 GiB memory");
	expect_some(r, "numa.nic", ING_CHECK_PASS, "mlx5_0 on node 0");
	expect_some(r, "numa.nic", ING_CHECK_PASS, "mlx5_1 on node 1");
	expect(r, "numa.placement", ING_CHECK_WARN, "1 cross-node placement: mlx5_1 is on node 1, "
	       "nvme0n1 on node 0");
	expect(r, "cpu.isolation", ING_CHECK_PASS, "dataplane cpus isolated (1,4)");
	assert_int_equal(fails, 1);   /* the memlock */

	/* enough memlock for both rails, not for striping over them */
	o.memlock = 4ull << 30;
	assert_int_equal(ing_doctor_run(&o, r), 1);
	expect(r, "memory.memlock", ING_CHECK_FAIL, "memlock 4 GiB < 2 rails x 2 regions x pool 1 GiB + 16 MiB");
	o.memlock = 5ull << 30;
	assert_int_equal(ing_doctor_run(&o, r), 0);
	expect(r, "memory.memlock", ING_CHECK_PASS, "memlock 5 GiB >= 2 rails x 2 regions x pool 1 GiB + 16 MiB "
	       "(stripe-min 8 MiB: every rail registers every region)");
	/* striping off: each rail pins its own region only */
	o.plan.stripe_min = 0;
	o.memlock = 4ull << 30;
	assert_int_equal(ing_doctor_run(&o, r), 0);
	expect(r, "memory.memlock", ING_CHECK_PASS, "memlock 4 GiB >= 2 rails x pool 1 GiB + 16 MiB "
	       "(stripe-min 0: each rail registers its own region)");
	o.memlock = 3ull << 29;
	assert_int_equal(ing_doctor_run(&o, r), 1);
	expect(r, "memory.memlock", ING_CHECK_FAIL, "memlock 1.5 GiB < 2 rails x pool 1 GiB + 16 MiB (stripe-min 0");
	assert_null(strstr(find_check(r, "memory.memlock")->fix, "stripe-min"));
	o.plan.stripe_min = 8u << 20;

	/* one rail named: only it is checked, nothing said of the others */
	o.rdma_dev = "mlx5_1";
	o.memlock = 3ull << 29;
	assert_int_equal(ing_doctor_run(&o, r), 0);
	assert_int_equal(r->n_rails, 1);
	assert_null(find_check(r, "rdma.unused"));
	expect(r, "memory.memlock", ING_CHECK_PASS, "memlock 1.5 GiB >= pool 1 GiB + 16 MiB");
	expect(r, "memory.hugepages", ING_CHECK_WARN, "200 x 2 MiB free on node 1");

	/* text and JSON list each rail */
	o.rdma_dev = NULL;
	(void)ing_doctor_run(&o, r);
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);
	ing_doctor_format_text(r, f);
	ing_doctor_format_json(r, f);
	fclose(f);
	assert_non_null(strstr(out, "rdma: rail 1: device mlx5_1 port 1, GID index 3 (10.2.0.5)"));
	assert_non_null(strstr(out, "\"rails\":[{\"device\":\"mlx5_0\",\"node\":0,\"port\":1,\"gid_index\":3"));
	free(out);
	free(r);
}

/* Soft-RoCE on two nodes: the kernel knows no node for rxe; rdma-dev = rxe1@1 says it. */
static void test_rails_node_override(void **state)
{
	(void)state;
	struct ing_doctor_opts o;
	struct roots rt;
	struct ing_doctor_report *r = calloc(1, sizeof(*r));

	setup_opts(&o, &rt, "rails_rxe", "two_socket_two_nic.xml");
	o.memlock = ING_DOCTOR_MEMLOCK_UNLIMITED;
	o.pool_bytes = 256ull << 20;
	(void)ing_doctor_run(&o, r);
	assert_int_equal(r->n_rails, 2);
	assert_int_equal(r->rails[1].node, -1);
	expect_some(r, "numa.nic", ING_CHECK_WARN, "NUMA node of rxe1 unknown");
	assert_non_null(strstr(find_check(r, "numa.nic")->fix, "rdma-dev = rxe0@N"));

	o.rdma_dev = "rxe0@0, rxe1@1";
	(void)ing_doctor_run(&o, r);
	assert_int_equal(r->rails[1].node, 1);
	expect_some(r, "numa.nic", ING_CHECK_PASS,
		   "rxe1 on node 1 (rdma-dev override; the kernel does not know its node)");
	assert_int_equal(count_checks(r, "numa.nic"), 2);
	for (unsigned i = 0; i < r->n; i++)
		if (!strcmp(r->checks[i].name, "numa.nic"))
			assert_int_equal(r->checks[i].status, ING_CHECK_PASS);
	o.rdma_dev = "rxe0@x";
	(void)ing_doctor_run(&o, r);
	expect(r, "rdma.devices", ING_CHECK_FAIL, "'rxe0@x': the NUMA node after '@' must be a number");
	free(r);
}

static void test_empty_machine(void **state)
{
	(void)state;
	struct ing_doctor_opts o;
	struct roots rt;
	struct ing_doctor_report *r = calloc(1, sizeof(*r));

	/* nothing at all under the roots: no NUMA info, no RDMA, no hugetlb, no cpufreq */
	setup_opts(&o, &rt, "does-not-exist", "vm_single.xml");
	o.memlock = 8 << 20;
	assert_int_equal(ing_doctor_run(&o, r), 0);
	expect(r, "rdma.devices", ING_CHECK_WARN, "fallback (gRPC) transport only");
	expect(r, "memory.memlock", ING_CHECK_WARN, "once RDMA is used");
	expect(r, "memory.hugepages", ING_CHECK_WARN, "no hugetlb support");
	expect(r, "cpu.governor", ING_CHECK_PASS, "no cpufreq");
	assert_null(find_check(r, "rdma.gid"));
	assert_int_equal(r->gid_index, -1);
	free(r);
}

static int setup(void **state)
{
	(void)state;
	return mkdtemp(data_dir) ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	return rmdir(data_dir);
}

int main(void)
{
	const char *s = getenv("ING_TEST_SRCDIR");
	snprintf(src, sizeof(src), "%s", s ? s : ".");
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pass_machine), cmocka_unit_test(test_warn_machine),
		cmocka_unit_test(test_fail_machine),
		cmocka_unit_test(test_pool_memory), cmocka_unit_test(test_bad_options),
		cmocka_unit_test(test_empty_machine),
		cmocka_unit_test(test_rails_machine),    cmocka_unit_test(test_rails_node_override),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
