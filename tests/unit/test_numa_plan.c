/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Placement plans on the synthetic topologies of the tests/numa XML files (gen_topologies.py):
 * the exact plan for each, and every override's validation error.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <cmocka.h>

#include "numa/numa.h"

static char xml_two[1024], xml_four[1024], xml_vm[1024], xml_nic2[1024];

static void fixture_path(char *buf, size_t len, const char *name)
{
	const char *src = getenv("ING_TEST_SRCDIR");
	snprintf(buf, len, "%s/tests/numa/%s", src ? src : ".", name);
}

static struct ing_topo *load(const char *path)
{
	char err[256];
	struct ing_topo *t = ing_topo_load(path, err, sizeof(err));
	if (!t)
		fail_msg("cannot load %s: %s", path, err);
	return t;
}

static bool has_warning(const struct ing_plan *p, const char *needle)
{
	for (unsigned i = 0; i < p->n_warnings; i++)
		if (strstr(p->warnings[i], needle))
			return true;
	return false;
}

static void assert_cpus(const int *got, unsigned n_got, const int *want, unsigned n_want)
{
	assert_int_equal(n_got, n_want);
	for (unsigned i = 0; i < n_want; i++)
		assert_int_equal(got[i], want[i]);
}

#define CPUS(...) (const int[]){ __VA_ARGS__ }, sizeof((const int[]){ __VA_ARGS__ }) / sizeof(int)

static void test_topology_queries(void **state)
{
	(void)state;
	struct ing_topo *t = load(xml_two);
	int cpus[64];

	assert_false(ing_topo_is_live(t));
	assert_int_equal(ing_topo_n_nodes(t), 2);
	assert_int_equal(ing_topo_n_cores(t), 8);
	assert_int_equal(ing_topo_n_pus(t), 16);
	assert_int_equal(ing_topo_node_pus(t, 1, cpus, 64), 8);
	assert_cpus(cpus, 8, CPUS(4, 5, 6, 7, 12, 13, 14, 15));
	assert_int_equal(ing_topo_node_cores(t, 0, cpus, 64), 4);
	assert_cpus(cpus, 4, CPUS(0, 1, 2, 3));
	assert_int_equal(ing_topo_cpu_node(t, 13), 1);
	assert_int_equal(ing_topo_cpu_node(t, 99), -1);
	assert_int_equal(ing_topo_cpu_core(t, 4), ing_topo_cpu_core(t, 12)); /* SMT siblings */
	assert_int_not_equal(ing_topo_cpu_core(t, 4), ing_topo_cpu_core(t, 5));
	assert_int_equal(ing_topo_n_rdma(t), 1);
	const struct ing_topo_dev *d = ing_topo_find_rdma(t, "mlx5_0");
	assert_non_null(d);
	assert_int_equal(d->node, 1);
	assert_string_equal(d->netdev, "ens1f0np0");
	assert_string_equal(d->pci, "0000:81:00.0");
	assert_string_equal(d->cpus, "4-7,12-15");
	d = ing_topo_find_block(t, "nvme0n1");
	assert_non_null(d);
	assert_int_equal(d->node, 0);
	assert_null(ing_topo_find_block(t, "sda"));
	ing_topo_destroy(t);

	t = load(xml_four);
	assert_int_equal(ing_topo_n_nodes(t), 4);
	assert_string_equal(ing_topo_rdma(t, 0)->name, "mlx5_0"); /* name order, not PCI order */
	assert_int_equal(ing_topo_rdma(t, 0)->node, 2);
	assert_int_equal(ing_topo_rdma(t, 1)->node, 0);
	assert_int_equal(ing_topo_find_block(t, "nvme0n1")->node, 3);
	assert_int_equal(ing_topo_find_block(t, "nvme1n1")->node, 0);
	ing_topo_destroy(t);
}

static void test_load_errors(void **state)
{
	(void)state;
	char err[256] = "";
	assert_null(ing_topo_load("/nonexistent/topo.xml", err, sizeof(err)));
	assert_non_null(strstr(err, "/nonexistent/topo.xml"));
	ing_topo_destroy(NULL);

	/* $HWLOC_XMLFILE stands in for the live machine */
	setenv("HWLOC_XMLFILE", xml_four, 1);
	struct ing_topo *t = ing_topo_load(NULL, err, sizeof(err));
	unsetenv("HWLOC_XMLFILE");
	assert_non_null(t);
	assert_int_equal(ing_topo_n_nodes(t), 4);
	assert_string_equal(ing_topo_source(t), xml_four);
	ing_topo_destroy(t);
}

static void test_cpulist(void **state)
{
	(void)state;
	int c[16];
	char buf[64];
	assert_int_equal(ing_cpulist_parse("0-3,8,10-11", c, 16), 7);
	assert_cpus(c, 7, CPUS(0, 1, 2, 3, 8, 10, 11));
	assert_int_equal(ing_cpulist_parse("5,1", c, 16), 2);
	assert_cpus(c, 2, CPUS(5, 1));
	assert_int_equal(ing_cpulist_parse("3-1", c, 16), -EINVAL);
	assert_int_equal(ing_cpulist_parse("1,1", c, 16), -EINVAL);
	assert_int_equal(ing_cpulist_parse("1,,2", c, 16), -EINVAL);
	assert_int_equal(ing_cpulist_parse("a", c, 16), -EINVAL);
	assert_int_equal(ing_cpulist_parse("", c, 16), -EINVAL);
	assert_int_equal(ing_cpulist_parse("0-20", c, 16), -E2BIG);
	ing_cpulist_format(CPUS(11, 0, 1, 2, 8, 10), buf, sizeof(buf));
	assert_string_equal(buf, "0-2,8,10-11");
	ing_cpulist_format(c, 0, buf, sizeof(buf));
	assert_string_equal(buf, "");
}

static void test_plan_two_socket(void **state)
{
	(void)state;
	struct ing_topo *t = load(xml_two);
	struct ing_plan_opts o;
	struct ing_plan p;
	char err[256], eal[64];
	int main_lcore;

	ing_plan_opts_init(&o);
	assert_int_equal(ing_plan_make(t, &o, &p, err, sizeof(err)), 0);
	assert_string_equal(p.rdma_dev, "mlx5_0");
	assert_string_equal(p.netdev, "ens1f0np0");
	assert_string_equal(p.block_dev, "nvme0n1"); /* the only block device */
	assert_int_equal(p.nic_node, 1);
	assert_int_equal(p.disk_node, 0);
	assert_int_equal(p.home_node, 1);
	assert_int_equal(p.control_cpu, 4);
	assert_cpus(p.dataplane_cpus, p.n_dataplane, CPUS(5));
	/* the pool region's node: the CRC stays local, the disk's DMA crosses once */
	assert_cpus(p.worker_cpus, p.n_workers, CPUS(6, 7));
	assert_int_equal(p.pool_node, 1);
	assert_int_equal(p.n_rails, 1);
	assert_int_equal(p.n_regions, 1);
	assert_int_equal(p.poll_mode_hint, ING_POLL_BUSY);
	assert_int_equal(p.n_remote, 1);
	assert_true(has_warning(&p, "mlx5_0 is on node 1, nvme0n1 on node 0"));
	assert_int_equal(ing_plan_eal_lcores(&p, eal, sizeof(eal), &main_lcore), 0);
	assert_string_equal(eal, "4-5");
	assert_int_equal(main_lcore, 4);

	/* more lcores than physical cores on the NIC node: capped, never an SMT sibling */
	o.n_dataplane = 4;
	assert_int_equal(ing_plan_make(t, &o, &p, err, sizeof(err)), 0);
	assert_int_equal(p.control_cpu, 4);
	assert_cpus(p.dataplane_cpus, p.n_dataplane, CPUS(5, 6, 7));
	assert_true(has_warning(&p, "4 dataplane lcores asked, only 3"));
	/* no core left on node 1: the workers go to node 0's free cores, said to be remote */
	assert_cpus(p.worker_cpus, p.n_workers, CPUS(0, 1));
	assert_true(has_warning(&p, "no free core on node 1 for the workers"));

	/* allow_smt: siblings only after the physical cores */
	o.allow_smt = true;
	assert_int_equal(ing_plan_make(t, &o, &p, err, sizeof(err)), 0);
	assert_cpus(p.dataplane_cpus, p.n_dataplane, CPUS(5, 6, 7, 12));
	ing_topo_destroy(t);
}

static void test_plan_four_node(void **state)
{
	(void)state;
	struct ing_topo *t = load(xml_four);
	struct ing_plan_opts o;
	struct ing_plan p;
	char err[256];

	/* by default every ACTIVE device is a rail: mlx5_0 (node 2) and mlx5_1 (node 0), in
	 * name order; two disks, none chosen: no disk node */
	ing_plan_opts_init(&o);
	assert_int_equal(ing_plan_make(t, &o, &p, err, sizeof(err)), 0);
	assert_int_equal(p.n_rails, 2);
	assert_string_equal(p.rails[0].dev, "mlx5_0");
	assert_string_equal(p.rails[1].dev, "mlx5_1");
	assert_int_equal(p.nic_node, 2);
	assert_int_equal(p.disk_node, -1);
	assert_string_equal(p.block_dev, "");
	assert_int_equal(p.control_cpu, 8);
	assert_cpus(p.rails[0].lcores, p.rails[0].n_lcores, CPUS(9));
	assert_cpus(p.rails[1].lcores, p.rails[1].n_lcores, CPUS(0));
	assert_cpus(p.dataplane_cpus, p.n_dataplane, CPUS(9, 0));
	assert_int_equal(p.n_regions, 2);
	assert_int_equal(p.regions[0].node, 2);
	assert_int_equal(p.regions[1].node, 0);
	assert_int_equal(p.rails[1].region, 1);
	assert_cpus(p.worker_cpus, p.n_workers, CPUS(10, 11, 1, 2));
	assert_int_equal(p.pool_node, 2);
	assert_int_equal(p.poll_mode_hint, ING_POLL_BUSY);
	assert_int_equal(p.n_warnings, 0);

	/* one rail, NVMe on node 3: pool and workers stay with the NIC, the disk is warned */
	o.rdma_dev = "mlx5_0";
	o.block_dev = "nvme0n1";
	o.n_dataplane = 2;
	assert_int_equal(ing_plan_make(t, &o, &p, err, sizeof(err)), 0);
	assert_int_equal(p.disk_node, 3);
	assert_int_equal(p.control_cpu, 8);
	assert_cpus(p.dataplane_cpus, p.n_dataplane, CPUS(9, 10));
	assert_cpus(p.worker_cpus, p.n_workers, CPUS(11, 11));
	assert_int_equal(p.pool_node, 2);
	assert_int_equal(p.n_remote, 1);
	assert_true(has_warning(&p, "mlx5_0 is on node 2, nvme0n1 on node 3"));

	/* NIC and disk together on node 0 */
	o.rdma_dev = "mlx5_1";
	o.block_dev = "nvme1n1";
	o.n_dataplane = 1;
	o.n_workers = 3;
	assert_int_equal(ing_plan_make(t, &o, &p, err, sizeof(err)), 0);
	assert_int_equal(p.nic_node, 0);
	assert_int_equal(p.disk_node, 0);
	assert_int_equal(p.control_cpu, 0);
	assert_cpus(p.dataplane_cpus, p.n_dataplane, CPUS(1));
	assert_cpus(p.worker_cpus, p.n_workers, CPUS(2, 3, 2)); /* round-robin over 2 free cores */
	assert_int_equal(p.pool_node, 0);
	assert_int_equal(p.n_warnings, 0);

	/* the NIC node is full: workers go to the first node with free cores, warned */
	o.rdma_dev = "mlx5_0";
	o.block_dev = NULL;
	o.n_dataplane = 3;
	o.n_workers = 2;
	assert_int_equal(ing_plan_make(t, &o, &p, err, sizeof(err)), 0);
	assert_cpus(p.dataplane_cpus, p.n_dataplane, CPUS(9, 10, 11));
	assert_cpus(p.worker_cpus, p.n_workers, CPUS(0, 1));
	assert_true(has_warning(&p, "no free core on node 2 for the workers"));
	assert_int_equal(p.poll_mode_hint, ING_POLL_BUSY);
	ing_topo_destroy(t);
}

static void test_plan_vm(void **state)
{
	(void)state;
	struct ing_topo *t = load(xml_vm);
	struct ing_plan_opts o;
	struct ing_plan p;
	char err[256], eal[64];
	int main_lcore;
	char *json = NULL;
	size_t jlen = 0;

	ing_plan_opts_init(&o);
	assert_int_equal(ing_plan_make(t, &o, &p, err, sizeof(err)), 0);
	assert_string_equal(p.rdma_dev, "");
	assert_int_equal(p.nic_node, -1);
	assert_string_equal(p.block_dev, "vda");
	assert_int_equal(p.disk_node, 0);
	assert_int_equal(p.control_cpu, 0);
	assert_cpus(p.dataplane_cpus, p.n_dataplane, CPUS(1));
	assert_cpus(p.worker_cpus, p.n_workers, CPUS(-1, -1)); /* not pinned: share with control */
	assert_int_equal(p.pool_node, 0);
	assert_int_equal(p.poll_mode_hint, ING_POLL_ADAPTIVE);
	assert_non_null(strstr(p.poll_reason, "busy-polling not advised"));
	assert_true(has_warning(&p, "no RDMA device"));
	assert_int_equal(p.n_remote, 0);
	assert_int_equal(ing_plan_eal_lcores(&p, eal, sizeof(eal), &main_lcore), 0);
	assert_string_equal(eal, "0-1");
	assert_int_equal(main_lcore, 0);

	FILE *f = open_memstream(&json, &jlen);
	ing_plan_format_json(&p, f);
	fclose(f);
	assert_non_null(strstr(json, "\"rdma_dev\":null"));
	assert_non_null(strstr(json, "\"control_cpu\":0,\"dataplane_cpus\":[1],\"worker_cpus\":[null,null]"));
	assert_non_null(strstr(json, "\"poll_mode_hint\":\"adaptive\""));
	assert_non_null(strstr(json, "\"eal\":{\"lcores\":\"0-1\",\"main_lcore\":0}"));
	free(json);

	/* asking for more lcores than the VM has cannot take control's core */
	o.n_dataplane = 2;
	assert_int_equal(ing_plan_make(t, &o, &p, err, sizeof(err)), 0);
	assert_cpus(p.dataplane_cpus, p.n_dataplane, CPUS(1));
	assert_true(has_warning(&p, "2 dataplane lcores asked, only 1"));
	ing_topo_destroy(t);
}

static void test_overrides(void **state)
{
	(void)state;
	struct ing_topo *t = load(xml_two);
	struct ing_plan_opts o;
	struct ing_plan p;
	char err[256], eal[64];
	int main_lcore;

	/* remote lcores are kept, and said to be remote */
	ing_plan_opts_init(&o);
	o.lcores = "0-1";
	assert_int_equal(ing_plan_make(t, &o, &p, err, sizeof(err)), 0);
	assert_true(p.lcores_overridden);
	assert_int_equal(p.control_cpu, 0);
	assert_cpus(p.dataplane_cpus, p.n_dataplane, CPUS(1));
	assert_cpus(p.rails[0].lcores, p.rails[0].n_lcores, CPUS(1));
	assert_cpus(p.worker_cpus, p.n_workers, CPUS(4, 5)); /* the pool's node, node 1 */
	assert_true(has_warning(&p, "dataplane lcore 1 is on node 0, mlx5_0 is on node 1"));

	/* control cpu outside the lcore list: EAL gets both */
	o.lcores = "5-6";
	o.control_cpu = 4;
	assert_int_equal(ing_plan_make(t, &o, &p, err, sizeof(err)), 0);
	assert_int_equal(p.control_cpu, 4);
	assert_cpus(p.dataplane_cpus, p.n_dataplane, CPUS(5, 6));
	assert_int_equal(ing_plan_eal_lcores(&p, eal, sizeof(eal), &main_lcore), 0);
	assert_string_equal(eal, "4-6");
	assert_int_equal(main_lcore, 4);

	/* SMT sibling of the control cpu as a dataplane lcore: allowed, warned */
	o.lcores = "4,12";
	o.control_cpu = -1;
	assert_int_equal(ing_plan_make(t, &o, &p, err, sizeof(err)), 0);
	assert_true(has_warning(&p, "SMT sibling"));
	assert_int_equal(p.poll_mode_hint, ING_POLL_ADAPTIVE);

	/* pool on the remote node */
	ing_plan_opts_init(&o);
	o.pool_node = 0;
	assert_int_equal(ing_plan_make(t, &o, &p, err, sizeof(err)), 0);
	assert_int_equal(p.pool_node, 0);
	assert_true(p.pool_overridden);
	assert_true(has_warning(&p, "MR pool on node 0, mlx5_0 on node 1"));
	assert_int_equal(p.n_remote, 2);

	/* worker cpus */
	ing_plan_opts_init(&o);
	o.worker_cpus = "5,8";
	o.n_workers = 3;
	assert_int_equal(ing_plan_make(t, &o, &p, err, sizeof(err)), 0);
	assert_cpus(p.worker_cpus, p.n_workers, CPUS(5, 8, 5));
	assert_true(has_warning(&p, "worker cpu 5 is also the control or a dataplane lcore"));

	/* explicit control cpu, auto dataplane avoids it */
	ing_plan_opts_init(&o);
	o.control_cpu = 5;
	assert_int_equal(ing_plan_make(t, &o, &p, err, sizeof(err)), 0);
	assert_int_equal(p.control_cpu, 5);
	assert_cpus(p.dataplane_cpus, p.n_dataplane, CPUS(4));
	ing_topo_destroy(t);
}

struct bad {
	const char *lcores, *workers, *rdma, *block;
	int control, pool, err;
	const char *msg;
};

static void test_override_errors(void **state)
{
	(void)state;
	static const struct bad cases[] = {
		{ "3-1", NULL, NULL, NULL, -1, -1, -EINVAL, "--lcores '3-1': not a cpu list" },
		{ "1,1", NULL, NULL, NULL, -1, -1, -EINVAL, "not a cpu list" },
		{ "x", NULL, NULL, NULL, -1, -1, -EINVAL, "not a cpu list" },
		{ "0,99", NULL, NULL, NULL, -1, -1, -EINVAL,
		  "--lcores '0,99': cpu 99 does not exist on this machine (cpus 0-15)" },
		{ "4", NULL, NULL, NULL, -1, -1, -EINVAL,
		  "needs the control lcore and at least one dataplane lcore" },
		{ "4", NULL, NULL, NULL, 4, -1, -EINVAL, "at least one dataplane lcore" },
		{ NULL, "2-40", NULL, NULL, -1, -1, -EINVAL, "--worker-cpus '2-40': cpu 16 does not" },
		{ NULL, NULL, "mlx5_9", NULL, -1, -1, -ENODEV,
		  "RDMA device 'mlx5_9' not found (RDMA devices: mlx5_0)" },
		{ NULL, NULL, NULL, "sdz", -1, -1, -ENODEV,
		  "block device 'sdz' not found (block devices: nvme0n1)" },
		{ NULL, NULL, NULL, NULL, 16, -1, -EINVAL, "--control-cpu 16: no such cpu" },
		{ NULL, NULL, NULL, NULL, -1, 2, -EINVAL, "--pool-node 2: no such NUMA node (nodes: 0-1)" },
	};
	struct ing_topo *t = load(xml_two);
	struct ing_plan_opts o;
	struct ing_plan p;
	char err[256];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct bad *b = &cases[i];
		ing_plan_opts_init(&o);
		o.lcores = b->lcores;
		o.worker_cpus = b->workers;
		o.rdma_dev = b->rdma;
		o.block_dev = b->block;
		o.control_cpu = b->control;
		o.pool_node = b->pool;
		err[0] = '\0';
		int rc = ing_plan_make(t, &o, &p, err, sizeof(err));
		if (rc != b->err || !strstr(err, b->msg))
			fail_msg("case %zu: rc %d (want %d), err \"%s\" (want \"%s\")", i, rc, b->err,
				 err, b->msg);
	}
	ing_topo_destroy(t);
}

static void test_format_text(void **state)
{
	(void)state;
	struct ing_topo *t = load(xml_two);
	struct ing_plan_opts o;
	struct ing_plan p;
	char err[256], *txt = NULL;
	size_t len = 0;

	ing_plan_opts_init(&o);
	assert_int_equal(ing_plan_make(t, &o, &p, err, sizeof(err)), 0);
	FILE *f = open_memstream(&txt, &len);
	ing_topo_format_text(t, f);
	ing_plan_format_text(&p, f);
	fclose(f);
	assert_non_null(strstr(txt, "2 NUMA nodes, 8 cores, 16 cpus (0-15)"));
	assert_non_null(strstr(txt, "rdma  mlx5_0     node 1"));
	assert_non_null(strstr(txt, "control lcore : cpu 4"));
	assert_non_null(strstr(txt, "workers       : 2 on cpus 6-7"));
	assert_non_null(strstr(txt, "rail 0        : mlx5_0 netdev ens1f0np0, node 1 (the device's): lcore 5, pool region 0"));
	assert_non_null(strstr(txt, "EAL           : -l 4-5 --main-lcore 4"));
	assert_non_null(strstr(txt, "WARNING: mlx5_0 is on node 1, nvme0n1 on node 0"));
	free(txt);
	ing_plan_log(&p); /* must not crash; goes to stderr */
	ing_topo_destroy(t);
}

static void mkpath(const char *root, const char *rel)
{
	char cmd[1024];
	snprintf(cmd, sizeof(cmd), "mkdir -p '%s/%s'", root, rel);
	assert_int_equal(system(cmd), 0);
}

static void touch(const char *root, const char *rel)
{
	char path[1024];
	snprintf(path, sizeof(path), "%s/%s", root, rel);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fclose(f);
}

/* data dir -> st_dev -> <sysfs>/dev/block/M:m -> whole disk, through a partition and dm */
static void test_blockdev_for_path(void **state)
{
	(void)state;
	char root[] = "/tmp/ing-fake-sys-XXXXXX", link[512], target[512], name[64], cmd[600];
	struct stat st;

	assert_non_null(mkdtemp(root));
	assert_int_equal(stat("/tmp", &st), 0);
	if (major(st.st_dev) == 0) {
		/* /tmp on tmpfs: no block device, and that is what must be said */
		assert_int_equal(ing_blockdev_for_path(root, "/tmp", name, sizeof(name)), -ENODEV);
		goto out;
	}
	mkpath(root, "dev/block");
	snprintf(link, sizeof(link), "%s/dev/block/%u:%u", root, major(st.st_dev), minor(st.st_dev));

	/* a partition of nvme0n1 */
	mkpath(root, "devices/pci0000:00/block/nvme0n1/nvme0n1p2");
	touch(root, "devices/pci0000:00/block/nvme0n1/nvme0n1p2/partition");
	snprintf(target, sizeof(target), "%s/devices/pci0000:00/block/nvme0n1/nvme0n1p2", root);
	assert_int_equal(symlink(target, link), 0);
	assert_int_equal(ing_blockdev_for_path(root, "/tmp", name, sizeof(name)), 0);
	assert_string_equal(name, "nvme0n1");

	/* dm-0 on top of nvme1n1p1 */
	unlink(link);
	mkpath(root, "devices/virtual/block/dm-0/slaves/nvme1n1p1");
	mkpath(root, "devices/pci0000:80/block/nvme1n1/nvme1n1p1");
	touch(root, "devices/pci0000:80/block/nvme1n1/nvme1n1p1/partition");
	mkpath(root, "class/block");
	snprintf(target, sizeof(target), "%s/devices/pci0000:80/block/nvme1n1/nvme1n1p1", root);
	snprintf(cmd, sizeof(cmd), "%s/class/block/nvme1n1p1", root);
	assert_int_equal(symlink(target, cmd), 0);
	snprintf(target, sizeof(target), "%s/devices/virtual/block/dm-0", root);
	assert_int_equal(symlink(target, link), 0);
	assert_int_equal(ing_blockdev_for_path(root, "/tmp", name, sizeof(name)), 0);
	assert_string_equal(name, "nvme1n1");
out:
	assert_int_equal(ing_blockdev_for_path(root, "/nonexistent/dir", name, sizeof(name)), -ENOENT);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	assert_int_equal(system(cmd), 0);
}

/* rdma-dev and rdma-addr lists: separators, node overrides, every error named */
static void test_rail_lists(void **state)
{
	(void)state;
	struct ing_rail_spec r[ING_PLAN_MAX_RAILS];
	char a[ING_PLAN_MAX_RAILS][48], err[256];

	assert_int_equal(ing_rail_list_parse(NULL, r, 8, err, sizeof(err)), 0);
	assert_int_equal(ing_rail_list_parse("  ", r, 8, err, sizeof(err)), 0);
	assert_int_equal(ing_rail_list_parse("mlx5_0, mlx5_1@1 rxe2@0,", r, 8, err, sizeof(err)), 3);
	assert_string_equal(r[0].dev, "mlx5_0");
	assert_int_equal(r[0].node, -1);
	assert_string_equal(r[1].dev, "mlx5_1");
	assert_int_equal(r[1].node, 1);
	assert_string_equal(r[2].dev, "rxe2");
	assert_int_equal(r[2].node, 0);
	static const struct { const char *s, *msg; } bad[] = {
		{ "rxe1@", "must be a number" }, { "rxe1@x", "must be a number" },
		{ "rxe1@-1", "must be a number" }, { "rxe1@2000", "0..1023" },
		{ "rxe1,rxe1@1", "'rxe1' is listed twice" }, { "rx/e1", "not an RDMA device name" },
		{ "@1", "not an RDMA device name" },
		{ "a,b,c,d,e,f,g,h,i", "more than 8 devices" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		if (ing_rail_list_parse(bad[i].s, r, 8, err, sizeof(err)) != -EINVAL ||
		    !strstr(err, bad[i].msg))
			fail_msg("'%s': \"%s\" (want \"%s\")", bad[i].s, err, bad[i].msg);
	}
	assert_int_equal(ing_addr_list_parse("10.0.1.1, 10.0.2.1 fe80::1", a, 8, err, sizeof(err)), 3);
	assert_string_equal(a[1], "10.0.2.1");
	assert_int_equal(ing_addr_list_parse("10.0.1.1,10.0.1.1", a, 8, err, sizeof(err)), -EINVAL);
	assert_int_equal(ing_addr_list_parse("10.0.1", a, 8, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "not an IPv4 or IPv6 address"));
}

/* Two sockets, one NIC each, the NVMe on socket 0 (the machine issue #26 is about). */
static void test_plan_two_nic(void **state)
{
	(void)state;
	struct ing_topo *t = load(xml_nic2);
	struct ing_plan_opts o;
	struct ing_plan p;
	char err[256], eal[64], *txt = NULL;
	size_t len = 0;

	ing_plan_opts_init(&o);
	assert_int_equal(ing_plan_make(t, &o, &p, err, sizeof(err)), 0);
	assert_int_equal(p.n_rails, 2);
	assert_string_equal(p.rails[0].dev, "mlx5_0");
	assert_string_equal(p.rails[0].netdev, "ens1f0np0");
	assert_int_equal(p.rails[0].node, 0);
	assert_int_equal(p.rails[0].node_from, ING_RAIL_NODE_DEVICE);
	assert_string_equal(p.rails[1].dev, "mlx5_1");
	assert_int_equal(p.rails[1].node, 1);
	assert_int_equal(p.control_cpu, 0);
	/* each rail's lcore on its own socket */
	assert_cpus(p.rails[0].lcores, p.rails[0].n_lcores, CPUS(1));
	assert_cpus(p.rails[1].lcores, p.rails[1].n_lcores, CPUS(4));
	/* one pool region per socket, each rail on its own */
	assert_int_equal(p.n_regions, 2);
	assert_int_equal(p.regions[0].node, 0);
	assert_int_equal(p.regions[1].node, 1);
	assert_int_equal(p.rails[0].region, 0);
	assert_int_equal(p.rails[1].region, 1);
	assert_int_equal(ing_plan_region_of_node(&p, 1), 1);
	assert_int_equal(ing_plan_region_of_node(&p, 5), -1);
	/* two workers per region, on their region's socket */
	assert_int_equal(p.regions[1].first_worker, 2);
	assert_int_equal(p.regions[1].n_workers, 2);
	assert_cpus(p.worker_cpus, p.n_workers, CPUS(2, 3, 5, 6));
	/* the disk hangs off socket 0: rail 1's frames cross once, in the disk's DMA */
	assert_int_equal(p.disk_node, 0);
	assert_int_equal(p.n_remote, 1);
	assert_true(has_warning(&p, "mlx5_1 is on node 1, nvme0n1 on node 0: each frame of this "
				"rail crosses the interconnect once, in the disk's DMA"));
	assert_int_equal(p.poll_mode_hint, ING_POLL_BUSY);
	assert_int_equal(ing_plan_eal_lcores(&p, eal, sizeof(eal), NULL), 0);
	assert_string_equal(eal, "0-1,4");

	FILE *f = open_memstream(&txt, &len);
	ing_plan_format_text(&p, f);
	ing_plan_format_json(&p, f);
	fclose(f);
	assert_non_null(strstr(txt, "placement plan (2 NUMA nodes, 2 rails)"));
	assert_non_null(strstr(txt, "rail 1        : mlx5_1 netdev ens2f0np0, node 1 (the device's): "
				    "lcore 4, pool region 1"));
	assert_non_null(strstr(txt, "region 1      : node 1, workers 2 on cpus 5-6"));
	assert_non_null(strstr(txt, "\"rails\":[{\"dev\":\"mlx5_0\""));
	assert_non_null(strstr(txt, "\"regions\":[{\"node\":0,\"worker_cpus\":[2,3]},{\"node\":1,"
				    "\"worker_cpus\":[5,6]}]"));
	/* striping on by default (ingestd's stripe-min 8M): every rail registers every region */
	assert_int_equal(ing_plan_pinned_regions(&p), 4);
	assert_non_null(strstr(txt, "striping      : frames of 8 MiB or more over every rail (stripe-min): "
				    "every rail registers every pool region, 4 x the pool pinned (2 rails x 2 regions)"));
	assert_non_null(strstr(txt, "\"stripe_min\":8388608,\"pinned_regions\":4"));
	free(txt);
	/* striping off: each rail its own region */
	o.stripe_min = 0;
	assert_int_equal(ing_plan_make(t, &o, &p, err, sizeof(err)), 0);
	assert_int_equal(ing_plan_pinned_regions(&p), 2);
	f = open_memstream(&txt, &len);
	ing_plan_format_text(&p, f);
	fclose(f);
	assert_non_null(strstr(txt, "striping      : off (stripe-min 0): each rail registers its own pool "
				    "region, 2 x the pool pinned"));
	free(txt);
	o.stripe_min = 8u << 20;

	/* two lcores per rail: handed out one per rail in turn */
	o.n_dataplane = 2;
	assert_int_equal(ing_plan_make(t, &o, &p, err, sizeof(err)), 0);
	assert_cpus(p.rails[0].lcores, p.rails[0].n_lcores, CPUS(1, 2));
	assert_cpus(p.rails[1].lcores, p.rails[1].n_lcores, CPUS(4, 5));
	assert_cpus(p.worker_cpus, p.n_workers, CPUS(3, 3, 6, 7));
	ing_topo_destroy(t);
}

static void test_plan_two_nic_overrides(void **state)
{
	(void)state;
	struct ing_topo *t = load(xml_nic2);
	struct ing_plan_opts o;
	struct ing_plan p;
	char err[256];

	/* rdma-dev = dev@node: the operator says where a rail goes (first in the list first) */
	ing_plan_opts_init(&o);
	o.rdma_dev = "mlx5_1@0, mlx5_0";
	assert_int_equal(ing_plan_make(t, &o, &p, err, sizeof(err)), 0);
	assert_string_equal(p.rails[0].dev, "mlx5_1");
	assert_int_equal(p.rails[0].node, 0);
	assert_int_equal(p.rails[0].dev_node, 1);
	assert_int_equal(p.rails[0].node_from, ING_RAIL_NODE_OVERRIDE);
	assert_true(has_warning(&p, "mlx5_1 is on node 1, placed on node 0 as rdma-dev says"));
	assert_int_equal(p.n_regions, 1);
	assert_cpus(p.rails[0].lcores, p.rails[0].n_lcores, CPUS(1));
	assert_cpus(p.rails[1].lcores, p.rails[1].n_lcores, CPUS(2));
	assert_cpus(p.worker_cpus, p.n_workers, CPUS(3, 3));

	/* one rail only: the other socket's NIC stays idle */
	o.rdma_dev = "mlx5_1";
	assert_int_equal(ing_plan_make(t, &o, &p, err, sizeof(err)), 0);
	assert_int_equal(p.n_rails, 1);
	assert_int_equal(p.control_cpu, 4);
	assert_int_equal(p.pool_node, 1);

	/* --lcores: each lcore serves the rail on its node */
	ing_plan_opts_init(&o);
	o.lcores = "0-1,4-5";
	assert_int_equal(ing_plan_make(t, &o, &p, err, sizeof(err)), 0);
	assert_cpus(p.rails[0].lcores, p.rails[0].n_lcores, CPUS(1));
	assert_cpus(p.rails[1].lcores, p.rails[1].n_lcores, CPUS(4, 5));
	assert_int_equal(p.n_remote, 1);   /* the disk only */
	/* every lcore on socket 0: rail 1 takes one of them, remote and said so */
	o.lcores = "0-2";
	assert_int_equal(ing_plan_make(t, &o, &p, err, sizeof(err)), 0);
	assert_cpus(p.rails[0].lcores, p.rails[0].n_lcores, CPUS(1));
	assert_cpus(p.rails[1].lcores, p.rails[1].n_lcores, CPUS(2));
	assert_true(has_warning(&p, "dataplane lcore 2 is on node 0, mlx5_1 is on node 1 (remote"));
	/* fewer dataplane lcores than rails */
	o.lcores = "0-1";
	assert_int_equal(ing_plan_make(t, &o, &p, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "--lcores '0-1': 1 dataplane lcore for 2 rails: each rail needs one"));
	/* ... unless RDMA is off (ingestd --rdma off): no rail at all, whatever the devices */
	o.no_rails = true;
	assert_int_equal(ing_plan_make(t, &o, &p, err, sizeof(err)), 0);
	assert_int_equal(p.n_rails, 0);
	o.no_rails = false;

	/* --worker-cpus: each region takes the listed cpus on its node */
	ing_plan_opts_init(&o);
	o.worker_cpus = "2,6";
	assert_int_equal(ing_plan_make(t, &o, &p, err, sizeof(err)), 0);
	assert_cpus(p.worker_cpus, p.n_workers, CPUS(2, 2, 6, 6));
	assert_true(p.workers_overridden);
	o.worker_cpus = "2,3";
	assert_int_equal(ing_plan_make(t, &o, &p, err, sizeof(err)), 0);
	assert_cpus(p.worker_cpus, p.n_workers, CPUS(2, 3, 2, 3));
	assert_true(has_warning(&p, "no cpu of --worker-cpus is on node 1"));

	/* --pool-node: one region for both rails, the remote one warned */
	ing_plan_opts_init(&o);
	o.pool_node = 0;
	assert_int_equal(ing_plan_make(t, &o, &p, err, sizeof(err)), 0);
	assert_int_equal(p.n_regions, 1);
	assert_int_equal(p.rails[1].region, 0);
	assert_true(has_warning(&p, "MR pool on node 0, mlx5_1 on node 1"));

	/* per-rail limits and bad lists */
	ing_plan_opts_init(&o);
	o.n_workers = 33;
	assert_int_equal(ing_plan_make(t, &o, &p, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "33 workers asked per pool region, at most 32"));
	ing_plan_opts_init(&o);
	o.rdma_dev = "mlx5_0@7";
	assert_int_equal(ing_plan_make(t, &o, &p, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "--rdma-dev 'mlx5_0@7': no such NUMA node (nodes: 0-1)"));
	o.rdma_dev = "mlx5_0,mlx5_0";
	assert_int_equal(ing_plan_make(t, &o, &p, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "listed twice"));
	o.rdma_dev = "mlx5_0, mlx5_4";
	assert_int_equal(ing_plan_make(t, &o, &p, err, sizeof(err)), -ENODEV);
	assert_non_null(strstr(err, "RDMA device 'mlx5_4' not found (RDMA devices: mlx5_0, mlx5_1)"));
	ing_topo_destroy(t);
}

/*
 * Two cores a node (the 4-vCPU two-node guest's shape): every region's workers take their
 * own node's free core first, so node 1's region gets node 1's last core; node 0's region,
 * whose node is full, shares it (remote, warned) rather than leaving node 1's unpinned.
 */
static void test_plan_small_two_nic(void **state)
{
	(void)state;
	char path[1024], err[256];
	struct ing_plan_opts o;
	struct ing_plan p;

	fixture_path(path, sizeof(path), "small_two_nic.xml");
	struct ing_topo *t = load(path);
	ing_plan_opts_init(&o);
	assert_int_equal(ing_plan_make(t, &o, &p, err, sizeof(err)), 0);
	assert_int_equal(p.control_cpu, 0);
	assert_cpus(p.rails[0].lcores, p.rails[0].n_lcores, CPUS(1));
	assert_cpus(p.rails[1].lcores, p.rails[1].n_lcores, CPUS(2));
	assert_cpus(p.worker_cpus, p.n_workers, CPUS(3, 3, 3, 3));
	assert_true(has_warning(&p, "no free core on node 0 for the workers of its pool region: "
				"they run on node 1, beside another region's"));
	ing_topo_destroy(t);
}

/* "key = value" lines of ing_plan_format_config back into plan options (what ingestd's
 * option table does with them) */
static void opts_from_config(char *text, struct ing_plan_opts *o)
{
	for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
		char *eq = strstr(line, " = ");
		if (line[0] == '#' || !eq)
			continue;
		*eq = '\0';
		char *v = eq + 3;
		if (!strcmp(line, "rdma-dev"))
			o->rdma_dev = v;
		else if (!strcmp(line, "lcores"))
			o->lcores = v;
		else if (!strcmp(line, "control-cpu"))
			o->control_cpu = atoi(v);
		else if (!strcmp(line, "dataplane"))
			o->n_dataplane = (unsigned)atoi(v);
		else if (!strcmp(line, "workers"))
			o->n_workers = (unsigned)atoi(v);
		else if (!strcmp(line, "worker-cpus"))
			o->worker_cpus = v;
		else if (!strcmp(line, "pool-node"))
			o->pool_node = atoi(v);
		else if (!strcmp(line, "allow-smt"))
			o->allow_smt = true;
		else if (strcmp(line, "poll-mode") && strcmp(line, "rdma-addr"))
			fail_msg("unknown config line '%s'", line);
	}
}

/* The config lines ingest-topo prints make the same plan again, overrides included. */
static void test_config_lines_round_trip(void **state)
{
	(void)state;
	static const struct { const char *xml_name, *rdma, *workers; unsigned dp, nw; int pool; } cases[] = {
		{ "two_socket_two_nic.xml", NULL, NULL, 1, 2, -1 },
		{ "two_socket_two_nic.xml", NULL, NULL, 2, 1, -1 },
		{ "two_socket_two_nic.xml", "mlx5_1@0, mlx5_0", NULL, 1, 2, -1 },
		{ "two_socket_two_nic.xml", NULL, "2,6,7", 1, 3, -1 },
		{ "two_socket_two_nic.xml", NULL, NULL, 1, 2, 1 },
		{ "four_node_smt.xml", NULL, NULL, 1, 2, -1 },
		{ "two_socket.xml", NULL, NULL, 3, 2, -1 },
		{ "vm_single.xml", NULL, NULL, 1, 2, -1 },
		{ "small_two_nic.xml", NULL, NULL, 1, 2, -1 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char path[1024], err[256], *txt = NULL;
		size_t len = 0;
		struct ing_plan_opts o, o2;
		struct ing_plan *a = malloc(sizeof(*a)), *b = malloc(sizeof(*b));
		fixture_path(path, sizeof(path), cases[i].xml_name);
		struct ing_topo *t = load(path);
		ing_plan_opts_init(&o);
		o.rdma_dev = cases[i].rdma;
		o.worker_cpus = cases[i].workers;
		o.n_dataplane = cases[i].dp;
		o.n_workers = cases[i].nw;
		o.pool_node = cases[i].pool;
		assert_int_equal(ing_plan_make(t, &o, a, err, sizeof(err)), 0);
		FILE *f = open_memstream(&txt, &len);
		ing_plan_format_config(a, f);
		fclose(f);
		ing_plan_opts_init(&o2);
		opts_from_config(txt, &o2);
		if (ing_plan_make(t, &o2, b, err, sizeof(err)))
			fail_msg("case %zu: the config lines make no plan: %s", i, err);
		assert_int_equal(b->control_cpu, a->control_cpu);
		assert_int_equal(b->n_rails, a->n_rails);
		for (unsigned r = 0; r < a->n_rails; r++) {
			assert_string_equal(b->rails[r].dev, a->rails[r].dev);
			assert_int_equal(b->rails[r].node, a->rails[r].node);
			assert_cpus(b->rails[r].lcores, b->rails[r].n_lcores, a->rails[r].lcores,
				    a->rails[r].n_lcores);
		}
		assert_cpus(b->dataplane_cpus, b->n_dataplane, a->dataplane_cpus, a->n_dataplane);
		assert_int_equal(b->n_regions, a->n_regions);
		for (unsigned g = 0; g < a->n_regions; g++)
			assert_int_equal(b->regions[g].node, a->regions[g].node);
		assert_cpus(b->worker_cpus, b->n_workers, a->worker_cpus, a->n_workers);
		assert_int_equal(b->poll_mode_hint, a->poll_mode_hint);
		free(txt);
		free(a);
		free(b);
		ing_topo_destroy(t);
	}
}

int main(void)
{
	fixture_path(xml_two, sizeof(xml_two), "two_socket.xml");
	fixture_path(xml_four, sizeof(xml_four), "four_node_smt.xml");
	fixture_path(xml_vm, sizeof(xml_vm), "vm_single.xml");
	fixture_path(xml_nic2, sizeof(xml_nic2), "two_socket_two_nic.xml");
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_topology_queries), cmocka_unit_test(test_load_errors),
		cmocka_unit_test(test_cpulist),          cmocka_unit_test(test_plan_two_socket),
		cmocka_unit_test(test_plan_four_node),   cmocka_unit_test(test_plan_vm),
		cmocka_unit_test(test_overrides),        cmocka_unit_test(test_override_errors),
		cmocka_unit_test(test_format_text),      cmocka_unit_test(test_rail_lists),
		cmocka_unit_test(test_plan_two_nic),     cmocka_unit_test(test_plan_two_nic_overrides),
		cmocka_unit_test(test_config_lines_round_trip), cmocka_unit_test(test_plan_small_two_nic),
		cmocka_unit_test(test_blockdev_for_path),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
