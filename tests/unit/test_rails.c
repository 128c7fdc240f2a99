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
 *    (its lkeys are its own region's only);
 *  - striping (common/stripe.h): one frame's slot filled by both rails at once, each lcore
 *    READing its part (rail 1 with its registration of the frame's region), the parts
 *    coming back to control as PART_IN, the frame persisted once from the whole slot
 *    (one CRC, one file, byte for byte); a part lost with its rail re-moved alone on the
 *    other rail while the part already in is not read again;
 *  - striped push (docs/PUSH.md "Striped push"): the same frame granted part by part, each
 *    rail's lcore binding a window over its part's range of the one slot (rail 1 over its
 *    registration of the frame's region), the "producer" writing each part over its rail
 *    with the part's grant id, PART_IN from both lcores, the frame persisted once, byte for
 *    byte; rail 1 lost before its part is written: that part alone is granted again on
 *    rail 0 and written there, the part already in is never written again.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <cmocka.h>

#include "common/clock.h"
#include "common/crc32c.h"
#include "common/stripe.h"
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
		/* a lost rail's parked part fails after this (no reconnect comes in these tests) */
		o.park_ms = 300;
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

/* Rail 1's registration of region 0 (a node that stripes registers every region on every
 * rail): the lkeys a part of a region-0 slot carries to rail 1's lcore. */
static const uint32_t lkeys_x10[2] = { 0x2100, 0x2101 };

struct part_run {
	struct ing_frame *in[8], *failed[8];
	unsigned nin, nfailed;
	/* push: what plays the producer on each GRANTED (NULL: none expected), the grants it
	 * saw per rail, and how many on rail 1 to wait for besides the parts */
	void (*granted)(struct part_run *pr, const struct ing_msg *m);
	unsigned grants[2], want_grants1;
};

/* Poll the lcores until n parts came back (PART_IN or a failed part's DONE), and at least
 * want_grants1 grants were seen on rail 1. */
static void run_parts(struct part_run *pr, unsigned n)
{
	uint64_t deadline = ing_now_ns() + 30000000000ull;
	while (pr->nin + pr->nfailed < n || pr->grants[1] < pr->want_grants1) {
		for (unsigned i = 0; i < 3; i++)
			ing_rdma_lcore_poll(E->lc[i]);
		fake_hw(64);
		struct ing_msg m[32];
		unsigned k = ing_mbox_pop(E->ctl, m, 32);
		for (unsigned i = 0; i < k; i++) {
			if (m[i].kind == ING_EV_PART_IN) {
				assert_non_null(m[i].f->part_of);
				pr->in[pr->nin++] = m[i].f;
			} else if (m[i].kind == ING_EV_DONE) {
				assert_non_null(m[i].f->part_of);   /* no whole frame is moving */
				pr->failed[pr->nfailed++] = m[i].f;
			} else if (m[i].kind == ING_EV_GRANTED) {
				assert_non_null(pr->granted);
				pr->granted(pr, &m[i]);
			}
			/* CONN_ERROR / CONN_RELEASED of a lost part's QP: control's */
		}
		if (!k) {
			assert_true(ing_now_ns() < deadline);
			struct timespec ts = { 0, 200000 };
			nanosleep(&ts, NULL);
		}
	}
}

/* The part descriptor control makes for part i of s (the frame x), to move over qp. */
static void part_make(struct ing_frame *p, struct ing_frame *x, const struct ing_stripe *s, unsigned i,
		      const uint8_t *src, uint32_t rkey, uint64_t session, uint32_t qp_num, uint32_t lkey)
{
	memset(p, 0, sizeof(*p));
	snprintf(p->frame_id, sizeof(p->frame_id), "%s", x->frame_id);
	snprintf(p->wafer_id, sizeof(p->wafer_id), "%s", x->wafer_id);
	p->part_of = x;
	p->part = (uint8_t)i;
	p->buf = x->buf + s->part[i].off;
	p->cap = s->part[i].len;
	p->length = s->part[i].len;
	p->raddr = (uintptr_t)src + s->part[i].off;
	p->rkey = rkey;
	p->session_id = session;
	p->qp_num = qp_num;
	p->cls = x->cls;
	p->region = x->region;
	p->part_lkey = lkey;
}

/* Bytes READ into [lo, hi) of the slot, by every READ WR posted so far. */
static uint64_t read_into(uintptr_t lo, uintptr_t hi, unsigned from_wr)
{
	uint64_t b = 0;
	for (unsigned w = from_wr; w < fake->nwr; w++)
		if (fake->wr[w].opcode == IBV_WR_RDMA_READ && fake->wr[w].laddr >= lo && fake->wr[w].laddr < hi)
			b += fake->wr[w].len;
	return b;
}

/* Control's books: part 0 is in, rail 1 is lost: part 1 alone moves, to rail 0. */
static void part1_moves_to_rail0(struct ing_stripe *s)
{
	const uint8_t up[1] = { 0 };
	uint32_t moved;
	assert_int_equal(ing_stripe_part_in(s, 0), 0);
	assert_int_equal(ing_stripe_rail_lost(s, 1, up, 1, &moved), 1);
	assert_int_equal(moved, 1u << 1);
	assert_int_equal(s->part[1].rail, 0);
}

/* Each rail's lcore (counters before: b0, b1) brought in its part of s and nothing else:
 * its bytes, one part, no frame delivered, nothing held; the counters now in a0, a1. */
static void parts_counted(const struct ing_rdma_lcore_stats *b0, const struct ing_rdma_lcore_stats *b1,
			  const struct ing_stripe *s, struct ing_rdma_lcore_stats *a0,
			  struct ing_rdma_lcore_stats *a1)
{
	ing_rdma_lcore_get_stats(E->lc[0], a0);
	ing_rdma_lcore_get_stats(E->lc[1], a1);
	assert_int_equal(a0->bytes_received - b0->bytes_received, s->part[0].len);
	assert_int_equal(a1->bytes_received - b1->bytes_received, s->part[1].len);
	assert_int_equal(a0->parts_ok - b0->parts_ok, 1);
	assert_int_equal(a1->parts_ok - b1->parts_ok, 1);
	assert_int_equal(a0->frames_ok, b0->frames_ok);   /* no lcore delivered a frame */
	assert_int_equal(a1->frames_ok, b1->frames_ok);
	/* the rails' counters (Stats RailStats, /metrics ingest_rail_*) from their lcores': each
	 * rail one part and that part's bytes, no frame of its own (the frame counts once, on
	 * its home rail, when control completes it: ing_rdma_striped_frame_in) */
	struct ing_rdma_rail_stats rs0 = { 0 }, rs1 = { 0 }, rs0b = { 0 }, rs1b = { 0 };
	ing_rdma_rail_stats_add(&rs0, b0);
	ing_rdma_rail_stats_add(&rs1, b1);
	ing_rdma_rail_stats_add(&rs0b, a0);
	ing_rdma_rail_stats_add(&rs1b, a1);
	assert_int_equal(rs0b.parts_received - rs0.parts_received, 1);
	assert_int_equal(rs1b.parts_received - rs1.parts_received, 1);
	assert_int_equal(rs0b.frames_received, rs0.frames_received);
	assert_int_equal(rs1b.frames_received, rs1.frames_received);
	assert_int_equal((rs0b.bytes_received - rs0.bytes_received) + (rs1b.bytes_received - rs1.bytes_received),
			 s->part[0].len + s->part[1].len);
	assert_int_equal(ing_rdma_lcore_frames_held(E->lc[0]) + ing_rdma_lcore_frames_held(E->lc[1]), 0);
}

/* The frame complete: control hands it to persistence once; one CRC, one file. */
static void stripe_frame_persist(struct ing_frame *x, const uint8_t *src)
{
	x->filled = x->length;
	x->t_received_ns = ing_now_ns();
	assert_int_equal(ing_persist_submit(E->persist, x), 0);
	struct ing_frame *back;
	assert_int_equal(run_until_done(&back, 1), 1);
	assert_ptr_equal(back, x);
	assert_int_equal(x->status, ING_E_NONE);
	assert_int_equal(x->crc_computed, x->crc32c);
	check_file(x, src);
	ing_pool_put(x);
}

/* One frame over both rails: each lcore READs its part into the one slot; control gathers
 * the parts and persists the frame once; a lost part is moved again alone. */
static void test_striped_frame(void **state)
{
	(void)state;
	uint8_t *src = malloc(FLEN);
	struct ibv_qp *qp[2];
	const uint8_t rails[2] = { 0, 1 };
	struct ing_stripe s;
	struct ing_frame part[2];
	struct ing_rdma_lcore_stats ls0, ls1, ls0b, ls1b;

	for (size_t i = 0; i < FLEN; i++)
		src[i] = (uint8_t)(i * 7 + (i >> 9));
	/* the producer's two sessions, one per rail (rail 0: lc[0], rail 1: lc[1]) */
	for (unsigned r = 0; r < 2; r++) {
		qp[r] = fake_qp_new_on(64, (int)r);
		assert_int_equal(ing_rdma_lcore_attach(E->lc[r], qp[r], 600 + r, 16, 64), 0);
	}
	ing_rdma_lcore_get_stats(E->lc[0], &ls0);
	ing_rdma_lcore_get_stats(E->lc[1], &ls1);

	/* admitted once on its home session (rail 0): one slot, in region 0 */
	struct ing_frame *x = ing_pool_get_in(E->pool, 0, FLEN, ING_POOL_MAX_CLASSES);
	assert_non_null(x);
	snprintf(x->frame_id, sizeof(x->frame_id), "striped-1");
	snprintf(x->wafer_id, sizeof(x->wafer_id), "W-stripe");
	x->session_id = 600;
	x->length = FLEN;
	x->crc32c = ing_crc32c(0, src, FLEN);
	x->has_crc = true;
	x->t_admit_ns = ing_now_ns();
	assert_int_equal(ing_stripe_split(&s, FLEN, rails, 2, 0), 2);
	part_make(&part[0], x, &s, 0, src, 0x77, 600, qp[0]->qp_num, lkeys_rail[0][x->cls]);
	part_make(&part[1], x, &s, 1, src, 0x78, 601, qp[1]->qp_num, lkeys_x10[x->cls]);
	unsigned wr0 = fake->nwr;
	for (unsigned i = 0; i < 2; i++)
		assert_int_equal(ing_rdma_lcore_submit(E->lc[rails[i]], &part[i]), 0);
	struct part_run pr = { 0 };
	run_parts(&pr, 2);
	assert_int_equal(pr.nfailed, 0);
	for (unsigned i = 0; i < 2; i++) {
		struct ing_frame *p = pr.in[i];
		assert_int_equal(p->status, ING_E_NONE);
		assert_int_equal(ing_stripe_part_in(&s, p->part), i == 1);
	}
	assert_true(ing_stripe_complete(&s));
	/* each rail moved its part, into the one slot, byte for byte */
	assert_memory_equal(x->buf, src, FLEN);
	assert_int_equal(read_into((uintptr_t)x->buf, (uintptr_t)x->buf + s.part[1].off, wr0), s.part[0].len);
	assert_int_equal(read_into((uintptr_t)x->buf + s.part[1].off, (uintptr_t)x->buf + FLEN, wr0), s.part[1].len);
	for (unsigned w = wr0; w < fake->nwr; w++) {
		const struct fake_wr *wr = &fake->wr[w];
		bool on1 = fake->qps[wr->qp].qp.qp_num == qp[1]->qp_num;
		assert_int_equal(wr->lkey, on1 ? lkeys_x10[x->cls] : lkeys_rail[0][x->cls]);
	}
	parts_counted(&ls0, &ls1, &s, &ls0b, &ls1b);
	/* control hands the whole frame to persistence once: one CRC check, one file */
	stripe_frame_persist(x, src);

	/* rail 1 fails its part (its READ refused: the QP goes to ERROR); rail 0's part is in:
	 * only the lost part moves again, over rail 0 */
	x = ing_pool_get_in(E->pool, 0, FLEN, ING_POOL_MAX_CLASSES);
	assert_non_null(x);
	snprintf(x->frame_id, sizeof(x->frame_id), "striped-2");
	snprintf(x->wafer_id, sizeof(x->wafer_id), "W-stripe");
	x->session_id = 600;
	x->length = FLEN;
	assert_int_equal(ing_stripe_split(&s, FLEN, rails, 2, 0), 2);
	part_make(&part[0], x, &s, 0, src, 0x77, 600, qp[0]->qp_num, lkeys_rail[0][x->cls]);
	part_make(&part[1], x, &s, 1, src, 0xbad, 601, qp[1]->qp_num, lkeys_x10[x->cls]);
	fake->bad_rkey = 0xbad;
	wr0 = fake->nwr;
	for (unsigned i = 0; i < 2; i++)
		assert_int_equal(ing_rdma_lcore_submit(E->lc[rails[i]], &part[i]), 0);
	memset(&pr, 0, sizeof(pr));
	run_parts(&pr, 2);
	fake->bad_rkey = 0;
	assert_int_equal(pr.nin, 1);
	assert_int_equal(pr.nfailed, 1);
	assert_ptr_equal(pr.in[0], &part[0]);
	assert_ptr_equal(pr.failed[0], &part[1]);
	assert_int_equal(part[1].status, ING_E_TRANSFER);
	part1_moves_to_rail0(&s);
	/* moved again over rail 0's session, with rail 0's own registration of the slot */
	uint64_t part0_reads = read_into((uintptr_t)x->buf, (uintptr_t)x->buf + s.part[1].off, wr0);
	assert_int_equal(part0_reads, s.part[0].len);
	part_make(&part[1], x, &s, 1, src, 0x77, 600, qp[0]->qp_num, lkeys_rail[0][x->cls]);
	unsigned wr1 = fake->nwr;
	assert_int_equal(ing_rdma_lcore_submit(E->lc[0], &part[1]), 0);
	memset(&pr, 0, sizeof(pr));
	run_parts(&pr, 1);
	assert_int_equal(pr.nin, 1);
	assert_int_equal(ing_stripe_part_in(&s, 1), 1);
	assert_memory_equal(x->buf, src, FLEN);
	/* the re-move READ the lost part only: the part already in was not read again */
	assert_int_equal(read_into((uintptr_t)x->buf, (uintptr_t)x->buf + s.part[1].off, wr1), 0);
	assert_int_equal(read_into((uintptr_t)x->buf + s.part[1].off, (uintptr_t)x->buf + FLEN, wr1),
			 s.part[1].len);
	ing_pool_put(x);
	free(src);
}

/* ---------------------------------------------------------------- striped push */

static struct ibv_pd push_pd;          /* identity only: the fake's windows need no PD */
static struct ibv_mr mr_own[2][2];     /* rail r's MRs of its own region, per class */
static struct ibv_mr mr_x10[2];        /* rail 1's MRs of region 0 (striping: every region) */

struct push_run {
	struct part_run pr;                /* first: push_grant_seen gets it */
	const uint8_t *src;
	struct ing_frame *x;               /* the striped frame */
	struct ibv_qp *qp[2];              /* the producer's session on rail 0, rail 1 */
	bool write_on[2];                  /* the producer writes what is granted on that rail */
	uint64_t wrote[2];                 /* bytes written into [0, part 1) and [part 1, end) */
	uint64_t split;                    /* where part 1 starts */
};

/* The producer's side of a grant: the window the lcore bound for it covers exactly the
 * part's range of the slot, on the QP the grant names; then (when its rail still carries)
 * the part's bytes land there and the WRITE's immediate names the grant. */
static void push_grant_seen(struct part_run *base, const struct ing_msg *m)
{
	struct push_run *pr = (struct push_run *)base;
	struct ing_frame *p = m->f;
	uint32_t rkey = (uint32_t)(m->u64 >> 32), qp_num = (uint32_t)m->u64;
	assert_non_null(p->part_of);
	assert_ptr_equal(p->part_of, pr->x);
	unsigned r = qp_num == pr->qp[1]->qp_num;
	assert_int_equal(qp_num, pr->qp[r]->qp_num);
	pr->pr.grants[r]++;
	const struct fake_wr *bind = NULL;
	for (unsigned w = fake->nwr; w-- > 0;)
		if (fake->wr[w].opcode == IBV_WR_BIND_MW && fake->wr[w].rkey == rkey) {
			bind = &fake->wr[w];
			break;
		}
	assert_non_null(bind);
	assert_int_equal(fake->qps[bind->qp].qp.qp_num, qp_num);   /* bound on that rail's QP */
	assert_int_equal(bind->laddr, (uintptr_t)p->buf);           /* over exactly the part */
	assert_int_equal(bind->len, p->length);
	assert_int_equal(bind->lkey, ((struct ibv_mr *)p->part_mr)->lkey);   /* its rail's MR of the slot */
	assert_int_equal(bind->lkey, r ? lkeys_x10[pr->x->cls] : lkeys_rail[0][pr->x->cls]);
	if (!pr->write_on[r])
		return;
	uint64_t off = (uint64_t)(p->buf - pr->x->buf);
	memcpy(p->buf, pr->src + off, p->length);
	pr->wrote[off >= pr->split] += p->length;
	assert_true(fake_inject_write(pr->qp[r], (uint32_t)m->val, (uint32_t)p->length));
}

/* Part i of s as control makes it for a push session: granted, not read. */
static void push_part_make(struct ing_frame *p, struct ing_frame *x, const struct ing_stripe *s,
			   unsigned i, uint64_t session, uint32_t qp_num, struct ibv_mr *mr)
{
	part_make(p, x, s, i, NULL, 0, session, qp_num, mr->lkey);
	p->raddr = 0;
	p->push = true;
	p->part_mr = mr;
}

static struct ing_frame *push_frame_admit(const char *id, const uint8_t *src)
{
	struct ing_frame *x = ing_pool_get_in(E->pool, 0, FLEN, ING_POOL_MAX_CLASSES);
	assert_non_null(x);
	snprintf(x->frame_id, sizeof(x->frame_id), "%s", id);
	snprintf(x->wafer_id, sizeof(x->wafer_id), "W-pushstripe");
	x->session_id = 700;
	x->length = FLEN;
	x->crc32c = ing_crc32c(0, src, FLEN);
	x->has_crc = true;
	x->push = true;
	x->t_admit_ns = ing_now_ns();
	memset(x->buf, 0xee, FLEN);   /* nothing of the source is in the slot before the writes */
	return x;
}

static void test_striped_push_frame(void **state)
{
	(void)state;
	uint8_t *src = malloc(FLEN);
	const uint8_t rails[2] = { 0, 1 };
	struct ing_stripe s;
	struct ing_frame part[2];
	struct ing_rdma_lcore_stats ls0, ls1, ls0b, ls1b;
	struct push_run pr = { .pr = { .granted = push_grant_seen }, .src = src, .write_on = { true, true } };

	for (size_t i = 0; i < FLEN; i++)
		src[i] = (uint8_t)(i * 11 + (i >> 10) + 5);
	/* push on both rails' lcores, memory-window mode: windows bound by each lcore on its
	 * own QPs; rail 1 also has its registration of region 0 (a node that stripes) */
	for (unsigned r = 0; r < 2; r++)
		for (unsigned c = 0; c < 2; c++) {
			mr_own[r][c].lkey = lkeys_rail[r][c];
			mr_own[r][c].rkey = 0xa000 + r * 0x100 + c;
		}
	for (unsigned c = 0; c < 2; c++) {
		mr_x10[c].lkey = lkeys_x10[c];
		mr_x10[c].rkey = 0xb100 + c;
	}
	for (unsigned r = 0; r < 2; r++) {
		struct ibv_mr *mrs[2] = { &mr_own[r][0], &mr_own[r][1] };
		assert_int_equal(ing_rdma_lcore_set_push(E->lc[r], &push_pd, mrs, 2, 4), 0);
	}
	/* the producer's two push sessions, one per rail (rail 0: lc[0], rail 1: lc[1]) */
	for (unsigned r = 0; r < 2; r++) {
		pr.qp[r] = fake_qp_new_on(64, (int)r);
		assert_int_equal(ing_rdma_lcore_attach(E->lc[r], pr.qp[r], 700 + r, 16, 64), 0);
	}
	ing_rdma_lcore_get_stats(E->lc[0], &ls0);
	ing_rdma_lcore_get_stats(E->lc[1], &ls1);

	/* admitted once on its home session (rail 0): one slot in region 0, one grant per part */
	struct ing_frame *x = pr.x = push_frame_admit("pstriped-1", src);
	assert_int_equal(ing_stripe_split(&s, FLEN, rails, 2, 0), 2);
	pr.split = s.part[1].off;
	push_part_make(&part[0], x, &s, 0, 700, pr.qp[0]->qp_num, &mr_own[0][x->cls]);
	push_part_make(&part[1], x, &s, 1, 701, pr.qp[1]->qp_num, &mr_x10[x->cls]);
	unsigned wr0 = fake->nwr;
	for (unsigned i = 0; i < 2; i++)
		assert_int_equal(ing_rdma_lcore_submit(E->lc[rails[i]], &part[i]), 0);
	run_parts(&pr.pr, 2);
	assert_int_equal(pr.pr.nfailed, 0);
	assert_int_equal(pr.pr.grants[0], 1);
	assert_int_equal(pr.pr.grants[1], 1);
	for (unsigned i = 0; i < 2; i++) {
		assert_int_equal(pr.pr.in[i]->status, ING_E_NONE);
		assert_int_equal(ing_stripe_part_in(&s, pr.pr.in[i]->part), i == 1);
	}
	assert_true(ing_stripe_complete(&s));
	assert_memory_equal(x->buf, src, FLEN);
	/* nothing was READ: each part came by its producer's WRITE; each window was bound with
	 * the registration of its rail (rail 1: its MR of region 0) and invalidated after */
	unsigned binds = 0, invs = 0;
	for (unsigned w = wr0; w < fake->nwr; w++) {
		assert_int_not_equal(fake->wr[w].opcode, IBV_WR_RDMA_READ);
		binds += fake->wr[w].opcode == IBV_WR_BIND_MW;
		invs += fake->wr[w].opcode == IBV_WR_LOCAL_INV;
	}
	assert_int_equal(binds, 2);
	assert_int_equal(invs, 2);
	parts_counted(&ls0, &ls1, &s, &ls0b, &ls1b);
	assert_int_equal(ls0b.push_grants - ls0.push_grants, 1);
	assert_int_equal(ls1b.push_grants - ls1.push_grants, 1);
	stripe_frame_persist(x, src);

	/* rail 1 is lost before its part is written (the producer never writes it there, the
	 * node's connection on rail 1 goes): that part alone fails back, retryable, and is
	 * granted again on rail 0; the part already in is never written again */
	memset(&pr.pr.in, 0, sizeof(pr.pr.in));
	pr.pr.nin = pr.pr.nfailed = 0;
	pr.pr.grants[0] = pr.pr.grants[1] = 0;
	pr.wrote[0] = pr.wrote[1] = 0;
	pr.write_on[1] = false;
	x = pr.x = push_frame_admit("pstriped-2", src);
	assert_int_equal(ing_stripe_split(&s, FLEN, rails, 2, 0), 2);
	push_part_make(&part[0], x, &s, 0, 700, pr.qp[0]->qp_num, &mr_own[0][x->cls]);
	push_part_make(&part[1], x, &s, 1, 701, pr.qp[1]->qp_num, &mr_x10[x->cls]);
	for (unsigned i = 0; i < 2; i++)
		assert_int_equal(ing_rdma_lcore_submit(E->lc[rails[i]], &part[i]), 0);
	pr.pr.want_grants1 = 1;
	run_parts(&pr.pr, 1);                   /* part 0 in; part 1 granted, never written */
	assert_int_equal(pr.pr.nin, 1);
	assert_int_equal(pr.pr.nfailed, 0);
	assert_ptr_equal(pr.pr.in[0], &part[0]);
	assert_int_equal(ing_rdma_lcore_detach(E->lc[1], pr.qp[1]->qp_num), 0);
	run_parts(&pr.pr, 2);                 /* part 1 comes back failed after the park */
	assert_int_equal(pr.pr.nfailed, 1);
	assert_ptr_equal(pr.pr.failed[0], &part[1]);
	assert_int_not_equal(part[1].status, ING_E_NONE);
	assert_true(part[1].retryable);
	part1_moves_to_rail0(&s);
	/* granted again over rail 0's session, with rail 0's own registration of the slot */
	push_part_make(&part[1], x, &s, 1, 700, pr.qp[0]->qp_num, &mr_own[0][x->cls]);
	assert_int_equal(ing_rdma_lcore_submit(E->lc[0], &part[1]), 0);
	pr.pr.nin = pr.pr.nfailed = 0;
	run_parts(&pr.pr, 1);
	assert_int_equal(pr.pr.nin, 1);
	assert_ptr_equal(pr.pr.in[0], &part[1]);
	assert_int_equal(ing_stripe_part_in(&s, 1), 1);
	assert_int_equal(pr.pr.grants[0], 2);      /* part 0 once, part 1 again: both on rail 0 */
	assert_int_equal(pr.wrote[0], s.part[0].len);   /* part 0 written exactly once */
	assert_int_equal(pr.wrote[1], s.part[1].len);   /* part 1 once, over rail 0 */
	assert_memory_equal(x->buf, src, FLEN);
	stripe_frame_persist(x, src);
	free(src);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_place_on_rail),
		cmocka_unit_test(test_frame_on_rail),
		cmocka_unit_test(test_striped_frame),
		cmocka_unit_test(test_striped_push_frame),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
