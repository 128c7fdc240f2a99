/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_rdma_place.c - which dataplane lcore serves a session (dataplane/rdma/rdma_place.c):
 * the rule (NUMA-local first, then fewest live connections, then fewest sessions since
 * start, then the lowest index), the table that keeps a session on its lcore while that
 * lcore may hold its frames, and three lcores with fake verbs (each its own CQ): six
 * sessions placed by the rule, two on each; every frame read byte for byte by the lcore
 * of its session; a bad rkey on one lcore fails that frame only, the other lcores see no
 * error at all, and the session's reconnect on its own lcore re-reads its parked frames.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <cmocka.h>

#include "test_rdma_fake.h"

static void test_pick_rule(void **state)
{
	(void)state;
	struct ing_rdma_lcore_load l[4] = { { 0 } };

	assert_int_equal(ing_rdma_lcore_pick(l, 0, -1), -EINVAL);
	assert_int_equal(ing_rdma_lcore_pick(NULL, 3, -1), -EINVAL);
	/* all alike: the lowest index */
	for (int i = 0; i < 4; i++)
		l[i] = (struct ing_rdma_lcore_load){ .numa_node = 0 };
	assert_int_equal(ing_rdma_lcore_pick(l, 4, 0), 0);
	/* fewest live connections first, whatever the sessions since start */
	l[0].conns = 2, l[1].conns = 1, l[2].conns = 1, l[3].conns = 3;
	l[0].sessions = 0, l[1].sessions = 5, l[2].sessions = 3, l[3].sessions = 0;
	assert_int_equal(ing_rdma_lcore_pick(l, 4, 0), 2);   /* 1 and 2 tie on 1: fewer sessions */
	l[1].sessions = 3;
	assert_int_equal(ing_rdma_lcore_pick(l, 4, 0), 1);   /* tie again: lowest index */
	/* NUMA-local first: only the lcores on the device's node, even when busier */
	l[0].numa_node = 0, l[1].numa_node = 1, l[2].numa_node = 1, l[3].numa_node = 0;
	l[0].conns = 0, l[1].conns = 4, l[2].conns = 3, l[3].conns = 0;
	assert_int_equal(ing_rdma_lcore_pick(l, 4, 1), 2);
	assert_int_equal(ing_rdma_lcore_pick(l, 4, 0), 0);
	/* the device's node has no lcore, or is unknown: every lcore */
	assert_int_equal(ing_rdma_lcore_pick(l, 4, 7), 0);
	l[0].conns = 5;
	assert_int_equal(ing_rdma_lcore_pick(l, 4, -1), 3);
	/* lcores of unknown node count as remote when some lcore is local */
	l[3].numa_node = -1;
	assert_int_equal(ing_rdma_lcore_pick(l, 4, 0), 0);
}

/* Sessions one after the other (never two at once): they still go round every lcore. */
static void test_short_sessions_go_round(void **state)
{
	(void)state;
	struct ing_rdma_lcore_load l[3] = { { .numa_node = -1 }, { .numa_node = -1 }, { .numa_node = -1 } };
	int want[] = { 0, 1, 2, 0, 1, 2, 0 };

	for (unsigned k = 0; k < sizeof(want) / sizeof(want[0]); k++) {
		int i = ing_rdma_lcore_pick(l, 3, -1);
		assert_int_equal(i, want[k]);
		l[i].sessions++;   /* placed, served, gone: no live connection left */
	}
	/* two long sessions on 0 and 1: the next one goes to 2 though 2 had more before */
	l[2].sessions = 10;
	l[0].conns = l[1].conns = 1;
	assert_int_equal(ing_rdma_lcore_pick(l, 3, -1), 2);
}

static void test_sticky(void **state)
{
	(void)state;
	struct ing_rdma_sticky *t = malloc(sizeof(*t));

	ing_rdma_sticky_init(t);
	assert_int_equal(ing_rdma_sticky_find(t, 5, 0), -1);
	ing_rdma_sticky_keep(t, 5, 2, 100, 0);
	assert_int_equal(ing_rdma_sticky_find(t, 5, 50), 2);
	assert_int_equal(ing_rdma_sticky_find(t, 6, 50), -1);
	assert_int_equal(ing_rdma_sticky_find(t, 5, 100), -1);   /* expired */
	ing_rdma_sticky_keep(t, 5, 1, 300, 50);                  /* its own entry, replaced */
	assert_int_equal(t->n, 1);
	assert_int_equal(ing_rdma_sticky_find(t, 5, 200), 1);
	ing_rdma_sticky_keep(t, 6, 0, 150, 60);
	assert_int_equal(t->n, 2);
	ing_rdma_sticky_keep(t, 7, 2, 400, 160);                 /* 6 expired: its place reused */
	assert_int_equal(t->n, 2);
	assert_int_equal(ing_rdma_sticky_find(t, 7, 170), 2);
	/* full of live entries: the one that ends first gives way */
	ing_rdma_sticky_init(t);
	for (unsigned i = 0; i < ING_RDMA_STICKY_MAX; i++)
		ing_rdma_sticky_keep(t, 1000 + i, i % 3, 5000 - i, 0);
	assert_int_equal(t->n, ING_RDMA_STICKY_MAX);
	ing_rdma_sticky_keep(t, 1, 1, 9000, 0);
	assert_int_equal(t->n, ING_RDMA_STICKY_MAX);
	assert_int_equal(ing_rdma_sticky_find(t, 1, 10), 1);
	assert_int_equal(ing_rdma_sticky_find(t, 1000 + ING_RDMA_STICKY_MAX - 1, 10), -1);
	assert_int_equal(ing_rdma_sticky_find(t, 1000, 10), 0);
	free(t);
}

/* ---------------------------------------------------------------- three lcores, fake verbs */

#define NL 3
#define NS 6
#define NF 4            /* frames per session */
#define FLEN (192u << 10)

static struct ing_rdma_lcore *lcore_on(struct fake_io *io, unsigned id)
{
	struct ing_rdma_lcore_opts o;
	static const uint32_t lkeys[2] = { 0x1111, 0x2222 };

	ing_rdma_lcore_opts_init(&o);
	o.ops = &fake_ops;
	o.lcore_id = id + 1;
	o.chunk_size = 64 << 10;
	struct ing_rdma_lcore_io lio = { .ctl = io->ctl, .arg = io, .deliver = io_deliver };
	io->lc = ing_rdma_lcore_create(&o, fake_xcq_of((int)id), &fake->ch, fake->chan_fd, &lio,
				       lkeys, 2);
	return io->lc;
}

static void drain_all(struct ing_rdma_lcore **lc, int passes)
{
	for (int i = 0; i < passes; i++) {
		for (unsigned k = 0; k < NL; k++)
			ing_rdma_lcore_poll(lc[k]);
		fake_hw(16);
	}
}

static void test_three_lcores(void **state)
{
	(void)state;
	struct fake_io *io[NL];
	struct ing_rdma_lcore *lc[NL];
	struct ing_rdma_lcore_load load[NL];
	struct ibv_qp *qp[NS];
	unsigned on[NS];
	struct ing_frame *f[NS][NF];
	uint8_t *src = malloc((size_t)NS * NF * FLEN);

	for (size_t i = 0; i < (size_t)NS * NF * FLEN; i++)
		src[i] = (uint8_t)(i * 7 + (i >> 13));
	for (unsigned k = 0; k < NL; k++) {
		io[k] = fake_io_new();
		lc[k] = lcore_on(io[k], k);
		assert_non_null(lc[k]);
		load[k] = (struct ing_rdma_lcore_load){ .numa_node = -1 };
	}
	/* six sessions connect while the earlier ones are live: the rule spreads them */
	for (unsigned s = 0; s < NS; s++) {
		int i = ing_rdma_lcore_pick(load, NL, -1);
		assert_true(i >= 0);
		on[s] = (unsigned)i;
		load[i].conns++;
		load[i].sessions++;
		qp[s] = fake_qp_new_on(64, i);
		assert_int_equal(ing_rdma_lcore_attach(lc[i], qp[s], 100 + s, 16, 64), 0);
	}
	for (unsigned k = 0; k < NL; k++)
		assert_int_equal(load[k].sessions, 2);
	fake->bad_rkey = 0xbad;
	for (unsigned s = 0; s < NS; s++)
		for (unsigned j = 0; j < NF; j++) {
			/* session 1's third frame carries a bad rkey */
			uint32_t rkey = s == 1 && j == 2 ? 0xbad : 0x77;
			f[s][j] = frame_new(s * 100 + j, FLEN, src + ((size_t)s * NF + j) * FLEN, rkey,
					    qp[s]->qp_num);
			f[s][j]->session_id = 100 + s;
			assert_int_equal(ing_rdma_lcore_submit(lc[on[s]], f[s][j]), 0);
		}
	drain_all(lc, 400);
	unsigned bad = on[1];
	for (unsigned k = 0; k < NL; k++) {
		struct ing_rdma_lcore_stats st;
		ing_rdma_lcore_get_stats(lc[k], &st);
		/* every lcore carried its two sessions' frames */
		assert_true(st.frames_ok >= (k == bad ? 2 * NF - 2 : 2 * NF));
		if (k != bad) {
			/* nothing of the error reached the other lcores */
			assert_int_equal(st.frames_ok, 2 * NF);
			assert_int_equal(st.bytes_received, 2ull * NF * FLEN);
			assert_int_equal(st.wc_errors, 0);
			assert_int_equal(st.wc_flushed, 0);
			assert_int_equal(st.frames_failed, 0);
			assert_int_equal(io_count(io[k], &io[k]->nfailed), 0);
			assert_int_equal(ing_rdma_lcore_frames_held(lc[k]), 0);
		} else {
			assert_int_equal(st.wc_errors, 1);
			assert_int_equal(io_count(io[k], &io[k]->nfailed), 1);
			assert_ptr_equal(io[k]->failed[0], f[1][2]);
		}
	}
	/* every frame that arrived is byte for byte its producer's, on its session's lcore */
	for (unsigned k = 0; k < NL; k++)
		for (unsigned d = 0; d < io[k]->ndelivered; d++) {
			struct ing_frame *x = io[k]->delivered[d];
			unsigned s = (unsigned)(x->session_id - 100), j = (unsigned)(strtoul(x->frame_id, NULL, 10) % 100);
			assert_int_equal(on[s], k);
			assert_memory_equal(x->buf, src + ((size_t)s * NF + j) * FLEN, FLEN);
		}
	/* session 1 reconnects on its own lcore: its parked frame is read there */
	unsigned parked = ing_rdma_lcore_frames_held(lc[bad]);
	assert_int_equal(parked, 1);
	struct ibv_qp *qp2 = fake_qp_new_on(64, (int)bad);
	assert_int_equal(ing_rdma_lcore_attach(lc[bad], qp2, 101, 16, 64), 0);
	drain_all(lc, 200);
	assert_int_equal(ing_rdma_lcore_frames_held(lc[bad]), 0);
	assert_memory_equal(f[1][3]->buf, src + ((size_t)1 * NF + 3) * FLEN, FLEN);
	unsigned delivered = 0;
	for (unsigned k = 0; k < NL; k++)
		delivered += io_count(io[k], &io[k]->ndelivered);
	assert_int_equal(delivered, NS * NF - 1);

	for (unsigned k = 0; k < NL; k++) {
		ing_rdma_lcore_destroy(lc[k]);
		fake_io_free(io[k]);
	}
	for (unsigned s = 0; s < NS; s++)
		for (unsigned j = 0; j < NF; j++)
			frame_free(f[s][j]);
	free(src);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pick_rule),
		cmocka_unit_test(test_short_sessions_go_round),
		cmocka_unit_test(test_sticky),
		cmocka_unit_test_setup_teardown(test_three_lcores, fake_setup, fake_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
