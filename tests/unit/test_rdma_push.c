/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_rdma_push.c - the RDMA lcore's push (RDMA WRITE) path with fake verbs, in pool-MR
 * mode and in memory-window mode (the fake allocates windows and completes binds and
 * invalidates; tests/rxe/push_in_guest.sh runs them on rxe): receive WRs are posted on
 * attach; a push job is granted (GRANTED notice with a grant id and the
 * pool MR's rkey) without any READ; a WRITE WITH IMM naming the grant with the right
 * length delivers the frame (RECEIVED notice) and a receive WR is posted again; a wrong
 * length fails only that frame (INVALID_ARGUMENT); an unknown grant id is counted and
 * ignored; a grant nobody writes fails (DEADLINE, retryable) after grant_ms; a flushed
 * receive takes the connection down and the frame is granted again on the next QP. With
 * windows: a grant is a bind over exactly the slot and carries the window's key; the frame
 * is delivered only after the invalidate that ends the grant completed; a window comes
 * back for the next grant with a new key; a dead QP's bound windows are replaced.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <cmocka.h>

#include "common/clock.h"
#include "test_rdma_fake.h"

/* receive side of the fake: posted receive WRs and completions the test injects */
static unsigned recvs_posted;
static uint64_t recv_wr_id;
static struct ibv_wc inj[16];
static unsigned ninj;

static int p_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	(void)qp;
	(void)bad;
	for (; wr; wr = wr->next) {
		assert_int_equal(wr->num_sge, 0);   /* a WRITE WITH IMM writes nothing into it */
		recv_wr_id = wr->wr_id;
		recvs_posted++;
	}
	return 0;
}

static int p_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc)
{
	int k = 0;
	while (k < n && ninj) {
		wc[k++] = inj[0];
		memmove(inj, inj + 1, --ninj * sizeof(inj[0]));
	}
	return k + fake_ops.poll_cq(cq, n - k, wc + k);
}

static struct ing_rdma_ops push_ops;

static void inject_write(uint32_t qp_num, uint32_t grant, uint32_t len, enum ibv_wc_status st)
{
	struct ibv_wc *c = &inj[ninj++];
	memset(c, 0, sizeof(*c));
	c->wr_id = recv_wr_id;
	c->status = st;
	c->opcode = IBV_WC_RECV_RDMA_WITH_IMM;
	c->wc_flags = IBV_WC_WITH_IMM;
	c->imm_data = htobe32(grant);
	c->byte_len = len;
	c->qp_num = qp_num;
}

static struct ibv_mr mrs[2];
static struct ibv_mr *mrp[2] = { &mrs[0], &mrs[1] };

static int setup(void **state)
{
	(void)state;
	(void)fake_lcore;   /* the fake's helpers for READ tests, unused here */
	(void)fake_hw;
	fake_init();
	push_ops = fake_ops;
	push_ops.post_recv = p_post_recv;
	push_ops.poll_cq = p_poll_cq;
	recvs_posted = 0;
	ninj = 0;
	mrs[0].rkey = 0xa000;
	mrs[1].rkey = 0xb000;
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	fake_fini();
	return 0;
}

static struct ibv_pd mw_pd;   /* identity only: the fake's windows need no PD */

/* A busy-polling lcore with push on: nmw windows (memory-window mode), 0: pool-MR mode. */
static struct ing_rdma_lcore *push_lcore_mw(struct fake_io *io, unsigned grant_ms, unsigned nmw)
{
	struct ing_rdma_lcore_opts o;
	static const uint32_t lkeys[2] = { 0x1111, 0x2222 };
	ing_rdma_lcore_opts_init(&o);
	o.ops = &push_ops;
	o.mode = ING_RDMA_POLL_BUSY;
	o.grant_ms = grant_ms;
	o.recv_depth = 8;
	/* a reconnect's window for parked frames: long, as no test waits for it to end, and
	 * test_regrant_on_next_qp's reconnect must land inside it however slowly the test's
	 * thread runs (50 ms failed it under two CPU hogs in the ASan tree) */
	o.park_ms = 30000;
	struct ing_rdma_lcore_io lio = { .ctl = io->ctl, .arg = io, .deliver = io_deliver };
	struct ing_rdma_lcore *lc = ing_rdma_lcore_create(&o, &fake->cq, &fake->ch, fake->chan_fd,
							  &lio, lkeys, 2);
	assert_non_null(lc);
	io->lc = lc;
	assert_int_equal(ing_rdma_lcore_set_push(lc, nmw ? &mw_pd : NULL, mrp, 2, nmw), 0);
	return lc;
}

static struct ing_rdma_lcore *push_lcore(struct fake_io *io, unsigned grant_ms)
{
	return push_lcore_mw(io, grant_ms, 0);
}

static struct ing_frame *push_frame(uint64_t id, uint64_t len, uint32_t qp_num)
{
	struct ing_frame *f = frame_new(id, len, NULL, 0, qp_num);
	f->raddr = 0;
	f->push = true;
	return f;
}

/* Poll until a notice of kind arrives (bounded); returns it. */
static struct fake_note wait_notice(struct ing_rdma_lcore *lc, uint32_t kind)
{
	struct fake_note n;
	for (int i = 0; i < 2000; i++) {
		ing_rdma_lcore_poll(lc);
		while (fake_notes(fake_io_cur, &n, 1) == 1)
			if (n.kind == kind)
				return n;
		usleep(500);
	}
	fail_msg("no notice of kind %u", kind);
	return n;
}

static void test_grant_write_deliver(void **state)
{
	(void)state;
	struct fake_io *io = fake_io_new();
	struct ing_rdma_lcore *lc = push_lcore(io, 10000);
	struct ibv_qp *qp = fake_qp_new(64);

	ing_rdma_lcore_attach(lc, qp, 7, 16, 64);
	ing_rdma_lcore_poll(lc);
	assert_int_equal(recvs_posted, 8);
	assert_int_equal(recv_wr_id & 1, 1);
	struct ing_frame *f = push_frame(1, 100000, qp->qp_num);
	io_push_job(io, f);
	struct fake_note g = wait_notice(lc, ING_EV_GRANTED);
	assert_int_not_equal(g.grant_id, 0);
	assert_int_equal(g.grant_rkey, mrs[1].rkey);     /* class 1's pool MR */
	assert_int_equal(g.length, 100000);
	assert_int_equal(fake->nwr, 0);                  /* no READ, no bind in MR mode */

	inject_write(qp->qp_num, g.grant_id, 100000, IBV_WC_SUCCESS);
	struct fake_note r = wait_notice(lc, ING_EV_RECEIVED);
	assert_int_equal(r.gen, 1);
	assert_int_equal(io_count(io, &io->ndelivered), 1);
	assert_int_equal(f->status, ING_E_NONE);
	assert_int_equal(recvs_posted, 9);               /* the used receive WR is replaced */
	struct ing_rdma_lcore_stats s;
	ing_rdma_lcore_get_stats(lc, &s);
	assert_int_equal(s.push_grants, 1);
	assert_int_equal(s.push_frames_ok, 1);
	assert_int_equal(s.reads_posted, 0);
	ing_rdma_lcore_destroy(lc);
	frame_free(f);
	fake_io_free(io);
}

static void test_bad_writes_fail_one_frame(void **state)
{
	(void)state;
	struct fake_io *io = fake_io_new();
	struct ing_rdma_lcore *lc = push_lcore(io, 10000);
	struct ibv_qp *qp = fake_qp_new(64);

	ing_rdma_lcore_attach(lc, qp, 7, 16, 64);
	struct ing_frame *a = push_frame(1, 8192, qp->qp_num), *b = push_frame(2, 8192, qp->qp_num);
	io_push_job(io, a);
	struct fake_note ga = wait_notice(lc, ING_EV_GRANTED);
	io_push_job(io, b);
	struct fake_note gb = wait_notice(lc, ING_EV_GRANTED);
	assert_int_not_equal(ga.grant_id, gb.grant_id);

	/* an immediate that names no open grant: counted, ignored */
	inject_write(qp->qp_num, ga.grant_id ^ 0x40000000u, 8192, IBV_WC_SUCCESS);
	for (int i = 0; i < 10; i++)
		ing_rdma_lcore_poll(lc);
	struct ing_rdma_lcore_stats s;
	ing_rdma_lcore_get_stats(lc, &s);
	assert_int_equal(s.push_grant_errors, 1);
	assert_int_equal(io_count(io, &io->ndelivered) + io_count(io, &io->nfailed), 0);

	/* one byte short: that frame fails, the other one still goes through */
	inject_write(qp->qp_num, ga.grant_id, 8191, IBV_WC_SUCCESS);
	for (int i = 0; i < 10 && !io_count(io, &io->nfailed); i++)
		ing_rdma_lcore_poll(lc);
	assert_int_equal(io_count(io, &io->nfailed), 1);
	assert_ptr_equal(io->failed[0], a);
	assert_int_equal(a->status, ING_E_INVALID_ARGUMENT);
	assert_false(a->retryable);
	inject_write(qp->qp_num, gb.grant_id, 8192, IBV_WC_SUCCESS);
	wait_notice(lc, ING_EV_RECEIVED);
	assert_int_equal(io->ndelivered, 1);
	assert_ptr_equal(io->delivered[0], b);
	ing_rdma_lcore_destroy(lc);
	frame_free(a);
	frame_free(b);
	fake_io_free(io);
}

static void test_grant_expires(void **state)
{
	(void)state;
	struct fake_io *io = fake_io_new();
	struct ing_rdma_lcore *lc = push_lcore(io, 30);
	struct ibv_qp *qp = fake_qp_new(64);

	ing_rdma_lcore_attach(lc, qp, 7, 16, 64);
	struct ing_frame *f = push_frame(1, 4096, qp->qp_num);
	io_push_job(io, f);
	wait_notice(lc, ING_EV_GRANTED);
	uint64_t end = ing_now_ns() + 2000000000ull;
	while (!io_count(io, &io->nfailed) && ing_now_ns() < end) {
		ing_rdma_lcore_poll(lc);
		usleep(1000);
	}
	assert_int_equal(io_count(io, &io->nfailed), 1);
	assert_int_equal(f->status, ING_E_DEADLINE);
	assert_true(f->retryable);
	ing_rdma_lcore_destroy(lc);
	frame_free(f);
	fake_io_free(io);
}

static void test_regrant_on_next_qp(void **state)
{
	(void)state;
	struct fake_io *io = fake_io_new();
	struct ing_rdma_lcore *lc = push_lcore(io, 10000);
	struct ibv_qp *qp = fake_qp_new(64), *qp2 = fake_qp_new(64);

	ing_rdma_lcore_attach(lc, qp, 7, 16, 64);
	struct ing_frame *f = push_frame(1, 4096, qp->qp_num);
	io_push_job(io, f);
	struct fake_note g1 = wait_notice(lc, ING_EV_GRANTED);
	/* the QP died (e.g. a write outside its grant): its receives flush */
	inject_write(qp->qp_num, 0, 0, IBV_WC_WR_FLUSH_ERR);
	struct fake_note e = wait_notice(lc, ING_EV_CONN_ERROR);
	assert_int_equal(e.qp_num, qp->qp_num);
	wait_notice(lc, ING_EV_CONN_RELEASED);
	ing_rdma_lcore_attach(lc, qp2, 7, 16, 64);
	struct fake_note g2 = wait_notice(lc, ING_EV_GRANTED);
	assert_int_equal(g2.qp_num, qp2->qp_num);
	assert_int_not_equal(g2.grant_id, g1.grant_id);
	/* a write under the old grant id finds nothing; the new one delivers */
	inject_write(qp2->qp_num, g1.grant_id, 4096, IBV_WC_SUCCESS);
	inject_write(qp2->qp_num, g2.grant_id, 4096, IBV_WC_SUCCESS);
	wait_notice(lc, ING_EV_RECEIVED);
	assert_int_equal(io->ndelivered, 1);
	assert_int_equal(io_count(io, &io->nfailed), 0);
	ing_rdma_lcore_destroy(lc);
	frame_free(f);
	fake_io_free(io);
}

/* No note of this kind has come (the lcore polled a few times). */
static void no_notice(struct ing_rdma_lcore *lc, uint32_t kind)
{
	struct fake_note n;
	for (int i = 0; i < 20; i++) {
		ing_rdma_lcore_poll(lc);
		while (fake_notes(fake_io_cur, &n, 1) == 1)
			assert_int_not_equal(n.kind, kind);
	}
}

static void test_memory_windows(void **state)
{
	(void)state;
	struct fake_io *io = fake_io_new();
	struct ing_rdma_lcore *lc = push_lcore_mw(io, 10000, 2);
	struct ibv_qp *qp = fake_qp_new(64);
	assert_int_equal(fake->mws_alive, 2);

	ing_rdma_lcore_attach(lc, qp, 7, 16, 64);
	struct ing_frame *f = push_frame(1, 100000, qp->qp_num);
	io_push_job(io, f);
	ing_rdma_lcore_poll(lc);
	ing_rdma_lcore_poll(lc);
	/* a bind of one window over exactly the slot; no grant before it completed */
	assert_int_equal(fake->nwr, 1);
	assert_int_equal(fake->wr[0].opcode, IBV_WR_BIND_MW);
	assert_int_equal(fake->wr[0].laddr, (uintptr_t)f->buf);
	assert_int_equal(fake->wr[0].len, 100000);
	no_notice(lc, ING_EV_GRANTED);
	fake_hw(1);
	struct fake_note g = wait_notice(lc, ING_EV_GRANTED);
	assert_int_equal(g.grant_rkey, fake->wr[0].rkey);   /* the window's key ... */
	assert_int_not_equal(g.grant_rkey, mrs[1].rkey);    /* ... never the pool MR's */
	assert_int_equal(g.qp_num, qp->qp_num);

	/* the write: the grant ends with an invalidate; delivered only once it completed */
	inject_write(qp->qp_num, g.grant_id, 100000, IBV_WC_SUCCESS);
	for (int i = 0; i < 20 && fake->nwr < 2; i++)
		ing_rdma_lcore_poll(lc);
	assert_int_equal(fake->nwr, 2);
	assert_int_equal(fake->wr[1].opcode, IBV_WR_LOCAL_INV);
	assert_int_equal(fake->wr[1].rkey, g.grant_rkey);
	no_notice(lc, ING_EV_RECEIVED);
	assert_int_equal(io_count(io, &io->ndelivered), 0);
	fake_hw(1);
	wait_notice(lc, ING_EV_RECEIVED);
	assert_int_equal(io_count(io, &io->ndelivered), 1);
	assert_int_equal(f->status, ING_E_NONE);

	/* the next grant binds a window again, under a new key */
	struct ing_frame *f2 = push_frame(2, 4096, qp->qp_num);
	io_push_job(io, f2);
	for (int i = 0; i < 20 && fake->nwr < 3; i++)
		ing_rdma_lcore_poll(lc);
	assert_int_equal(fake->wr[2].opcode, IBV_WR_BIND_MW);
	fake_hw(1);
	struct fake_note g2 = wait_notice(lc, ING_EV_GRANTED);
	assert_int_not_equal(g2.grant_rkey, g.grant_rkey);

	/* the QP dies with that grant open: its window is deallocated and replaced */
	inject_write(qp->qp_num, 0, 0, IBV_WC_WR_FLUSH_ERR);
	wait_notice(lc, ING_EV_CONN_RELEASED);
	struct ing_rdma_lcore_stats s;
	ing_rdma_lcore_get_stats(lc, &s);
	assert_int_equal(s.push_mw_replaced, 1);
	assert_int_equal(fake->mws_alive, 2);
	assert_int_equal(fake->mws_made, 3);
	assert_int_equal(s.push_grants, 2);
	assert_int_equal(s.push_frames_ok, 1);
	ing_rdma_lcore_destroy(lc);   /* f2 fails (shutting down); every window freed */
	assert_int_equal(fake->mws_alive, 0);
	frame_free(f);
	frame_free(f2);
	fake_io_free(io);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_grant_write_deliver, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_writes_fail_one_frame, setup, teardown),
		cmocka_unit_test_setup_teardown(test_grant_expires, setup, teardown),
		cmocka_unit_test_setup_teardown(test_regrant_on_next_qp, setup, teardown),
		cmocka_unit_test_setup_teardown(test_memory_windows, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
