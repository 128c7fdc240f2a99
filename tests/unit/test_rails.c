/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_rails.c - two RDMA devices, one rail each (docs/ARCHITECTURE.md "Rails"), with fake
 * verbs: rail 0 on NUMA node 0, rail 1 on node 1, a pool region and a group of
 * persistence workers per node (the nodes label the regions: this host may have one).
 *  - placement: a session that connects on rail 1 is served by rail 1's lcore on node 1,
 *    never by rail 0's (even idle) nor by rail 1's remote lcore;
 *  - a frame of rail 1 takes a slot of node 1's region, is read with rail 1's registration
 *    (its lkeys, by rail 1's lcore on its own CQ), and is written by a worker of node 1's
 *    group; the file on disk is byte for byte the producer's; rail 0 the same on node 0;
 *  - a slot of another region reaching a rail's lcore is failed before anything is posted
 *    (its lkeys are its own region's only).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <cmocka.h>

#include "common/clock.h"
#include "common/crc32c.h"
#include "dataplane/store/store.h"
#include "test_rdma_fake.h"
#include "test_eal.h"

#define FLEN (300u << 10)
#define NFR 3   /* frames per rail */

static const uint32_t lkeys_rail[2][2] = { { 0x1000, 0x1001 }, { 0x2000, 0x2001 } };

struct rails_env {
	char dir[64];
	struct ing_pool *pool;
	struct ing_persist *persist;
	struct ing_mbox *ctl;          /* control's mailbox: RECEIVED (lcores), DONE (workers) */
	struct ing_rdma_lcore *lc[3];  /* rail 0: lc[0] (node 0); rail 1: lc[1] (node 1), lc[2] (node 0) */
};

static struct rails_env *E;

static int deliver(void *arg, struct ing_frame *f)
{
	return ing_persist_submit(arg, f);
}

static int setup(void **state)
{
	(void)state;
	if (test_eal_start(0) != 0)
		return -1;
	fake_init();
	E = calloc(1, sizeof(*E));
	strcpy(E->dir, "/tmp/ing_test_rails.XXXXXX");
	if (!mkdtemp(E->dir))
		return -1;
	struct ing_pool_opts po;
	ing_pool_opts_init(&po);
	po.name = "rails";
	po.hugepages = 0;
	po.nregions = 2;
	po.region_node[0] = 0;
	po.region_node[1] = 1;
	po.mbind = false;
	if (ing_pool_parse_classes(&po, "512K:8"))
		return -1;
	E->pool = ing_pool_create(&po);
	E->ctl = ing_mbox_create("t_ctl", 1024);
	struct ing_persist_opts pe;
	ing_persist_opts_init(&pe);
	pe.data_dir = E->dir;
	pe.workers = 2;
	pe.groups = 2;
	pe.group_node[0] = 0;
	pe.group_node[1] = 1;
	pe.nice = 0;
	E->persist = E->pool && E->ctl ? ing_persist_start(&pe, E->ctl) : NULL;
	if (!E->persist)
		return -1;
	/* the rails' pollers: each on its own CQ, with its own region's lkeys */
	static const struct { unsigned rail; int xcq; } lcs[3] = { { 0, 0 }, { 1, 1 }, { 1, 2 } };
	for (unsigned i = 0; i < 3; i++) {
		struct ing_rdma_lcore_opts o;
		ing_rdma_lcore_opts_init(&o);
		o.ops = &fake_ops;
		o.lcore_id = 10 + i;
		o.chunk_size = 64 << 10;
		o.region = (int)lcs[i].rail;
		struct ing_rdma_lcore_io io = { .ctl = E->ctl, .arg = E->persist, .deliver = deliver };
		E->lc[i] = ing_rdma_lcore_create(&o, fake_xcq_of(lcs[i].xcq), &fake->ch, fake->chan_fd, &io,
						 lkeys_rail[lcs[i].rail], 2);
		if (!E->lc[i])
			return -1;
	}
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	for (unsigned i = 0; i < 3; i++)
		ing_rdma_lcore_destroy(E->lc[i]);
	ing_persist_stop(E->persist, 5000);
	/* what the lcores and workers posted: slots back to the pool */
	struct ing_msg m[64];
	unsigned k;
	while ((k = ing_mbox_pop(E->ctl, m, 64)))
		for (unsigned i = 0; i < k; i++)
			if (m[i].kind == ING_EV_DONE)
				ing_pool_put(m[i].f);
	ing_mbox_destroy(E->ctl);
	ing_pool_destroy(E->pool);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", E->dir);
	(void)!system(cmd);
	free(E);
	fake_fini();
	ing_eal_stop();
	return 0;
}

/* The placement rule restricted to a rail: only its lcores, its node's first. */
static void test_place_on_rail(void **state)
{
	(void)state;
	struct ing_rdma_lcore_load l[3] = {
		{ .numa_node = 0, .rail = 0 },
		{ .numa_node = 1, .rail = 1, .conns = 3 },
		{ .numa_node = 0, .rail = 1 },
	};
	/* rail 1 on node 1: its local lcore, though busier than its remote one and than rail 0's */
	assert_int_equal(ing_rdma_lcore_pick_on(l, 3, 1, 1), 1);
	/* rail 0: its own lcore only */
	l[0].conns = 9;
	assert_int_equal(ing_rdma_lcore_pick_on(l, 3, 0, 0), 0);
	/* rail 1's node unknown: any of its lcores, the least loaded */
	assert_int_equal(ing_rdma_lcore_pick_on(l, 3, 1, -1), 2);
	/* a rail without lcores has none to give */
	assert_int_equal(ing_rdma_lcore_pick_on(l, 3, 2, 0), -ENOENT);
	/* any rail (the engine before rails): the old rule */
	assert_int_equal(ing_rdma_lcore_pick(l, 3, 1), 1);
}

/* Poll both rails' lcores and let the "hardware" run, until n DONE came back. */
static unsigned run_until_done(struct ing_frame **done, unsigned n)
{
	unsigned got = 0;
	uint64_t deadline = ing_now_ns() + 30000000000ull;
	while (got < n) {
		for (unsigned i = 0; i < 3; i++)
			ing_rdma_lcore_poll(E->lc[i]);
		fake_hw(64);
		struct ing_msg m[32];
		unsigned k = ing_mbox_pop(E->ctl, m, 32);
		for (unsigned i = 0; i < k; i++)
			if (m[i].kind == ING_EV_DONE)
				done[got++] = m[i].f;
		if (!k) {
			assert_true(ing_now_ns() < deadline);
			struct timespec ts = { 0, 200000 };
			nanosleep(&ts, NULL);
		}
	}
	return got;
}

static void check_file(const struct ing_frame *f, const uint8_t *want)
{
	char rel[600], path[1024];
	assert_int_equal(ing_store_rel_path(rel, sizeof(rel), f->wafer_id, f->frame_id), 0);
	snprintf(path, sizeof(path), "%s/%s", E->dir, rel);
	FILE *fp = fopen(path, "rb");
	assert_non_null(fp);
	uint8_t *got = malloc(FLEN + 1);
	size_t n = fread(got, 1, FLEN + 1, fp);
	fclose(fp);
	assert_int_equal(n, FLEN);
	assert_memory_equal(got, want, FLEN);
	free(got);
}

/*
 * A frame on rail 1: a slot of node 1's region, rail 1's lkeys, rail 1's lcore, a node-1
 * worker, the bytes on disk. The same on rail 0 with node 0.
 */
static void test_frame_on_rail(void **state)
{
	(void)state;
	uint8_t *src = malloc((size_t)2 * NFR * FLEN);
	struct ing_frame *f[2][NFR], *done[2 * NFR];
	struct ibv_qp *qp[2];
	unsigned lc_of_rail[2] = { 0, 1 };

	for (size_t i = 0; i < (size_t)2 * NFR * FLEN; i++)
		src[i] = (uint8_t)(i * 13 + (i >> 11));
	/* each rail's session: its QP on the CQ of the lcore the rule picks for that rail */
	for (unsigned r = 0; r < 2; r++) {
		qp[r] = fake_qp_new_on(64, (int)lc_of_rail[r]);
		assert_int_equal(ing_rdma_lcore_attach(E->lc[lc_of_rail[r]], qp[r], 500 + r, 16, 64), 0);
	}
	unsigned posts0 = fake->posts;
	for (unsigned r = 0; r < 2; r++)
		for (unsigned j = 0; j < NFR; j++) {
			/* admission: the rail's region (what ing_rdma_session_region says) */
			struct ing_frame *x = ing_pool_get_in(E->pool, (int)r, FLEN, ING_POOL_MAX_CLASSES);
			assert_non_null(x);
			assert_int_equal(x->region, r);
			assert_int_equal(ing_pool_region_node(E->pool, x->region), (int)r);
			snprintf(x->frame_id, sizeof(x->frame_id), "rail%u-%u", r, j);
			snprintf(x->wafer_id, sizeof(x->wafer_id), "W-rails");
			x->session_id = 500 + r;
			x->length = FLEN;
			x->raddr = (uintptr_t)(src + ((size_t)r * NFR + j) * FLEN);
			x->rkey = 0x77;
			x->qp_num = qp[r]->qp_num;
			x->crc32c = ing_crc32c(0, src + ((size_t)r * NFR + j) * FLEN, FLEN);
			x->has_crc = true;
			x->t_admit_ns = ing_now_ns();
			f[r][j] = x;
			assert_int_equal(ing_rdma_lcore_submit(E->lc[lc_of_rail[r]], x), 0);
		}
	assert_int_equal(run_until_done(done, 2 * NFR), 2 * NFR);
	assert_true(fake->posts > posts0);
	for (unsigned i = 0; i < 2 * NFR; i++) {
		struct ing_frame *x = done[i];
		unsigned r = x->region, group;
		int node;
		assert_int_equal(x->status, ING_E_NONE);
		/* written by a worker of its region's node */
		assert_int_equal(ing_persist_worker_group(E->persist, x->persist_worker, &group, &node), 0);
		assert_int_equal(group, r);
		assert_int_equal(node, (int)r);
		unsigned j = (unsigned)(x->frame_id[6] - '0');
		assert_ptr_equal(x, f[r][j]);
		check_file(x, src + ((size_t)r * NFR + j) * FLEN);
	}
	/* every READ of rail 1 used rail 1's registration, every READ of rail 0 rail 0's */
	for (unsigned w = 0; w < fake->nwr; w++) {
		const struct fake_wr *wr = &fake->wr[w];
		if (wr->opcode != IBV_WR_RDMA_READ)
			continue;
		unsigned r = fake->qps[wr->qp].qp.qp_num == qp[1]->qp_num;
		assert_true(wr->lkey == lkeys_rail[r][0] || wr->lkey == lkeys_rail[r][1]);
	}
	/* the persistence groups: each wrote its own node's frames */
	for (unsigned g = 0; g < 2; g++) {
		struct ing_persist_stats st;
		assert_int_equal(ing_persist_get_group_stats(E->persist, g, &st), 0);
		assert_int_equal(st.frames, NFR);
		assert_int_equal(st.bytes, (uint64_t)NFR * FLEN);
	}
	/* each rail's lcore carried its rail's frames, the idle remote one none */
	struct ing_rdma_lcore_stats ls;
	ing_rdma_lcore_get_stats(E->lc[0], &ls);
	assert_int_equal(ls.frames_ok, NFR);
	ing_rdma_lcore_get_stats(E->lc[1], &ls);
	assert_int_equal(ls.frames_ok, NFR);
	ing_rdma_lcore_get_stats(E->lc[2], &ls);
	assert_int_equal(ls.frames_ok, 0);
	for (unsigned i = 0; i < 2 * NFR; i++)
		ing_pool_put(done[i]);

	/* a slot of region 0 sent to rail 1's lcore: failed, nothing posted */
	struct ing_frame *x = ing_pool_get_in(E->pool, 0, FLEN, ING_POOL_MAX_CLASSES);
	assert_non_null(x);
	snprintf(x->frame_id, sizeof(x->frame_id), "stray");
	x->session_id = 501;
	x->length = FLEN;
	x->raddr = (uintptr_t)src;
	x->rkey = 0x77;
	x->qp_num = qp[1]->qp_num;
	unsigned posts = fake->posts;
	assert_int_equal(ing_rdma_lcore_submit(E->lc[1], x), 0);
	struct ing_frame *back;
	assert_int_equal(run_until_done(&back, 1), 1);
	assert_ptr_equal(back, x);
	assert_int_equal(x->status, ING_E_INTERNAL);
	assert_true(x->retryable);
	assert_non_null(strstr(x->msg, "slot in pool region 0"));
	assert_int_equal(fake->posts, posts);
	ing_rdma_lcore_get_stats(E->lc[1], &ls);
	assert_int_equal(ls.jobs_rejected, 1);
	ing_pool_put(x);
	free(src);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_place_on_rail),
		cmocka_unit_test(test_frame_on_rail),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
