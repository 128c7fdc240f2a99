/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_rdma_chunk.c - READ chunking of the RDMA lcore with fake verbs: the plan arithmetic,
 * frames of 1 B .. 64 MiB split into chunks that tile the frame exactly and land byte for
 * byte, the READs-in-flight bound (rd_atom), SQ accounting with unsignaled WRs, and the
 * signaling cadence.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <cmocka.h>

#include "test_rdma_fake.h"

#define MIB (1ull << 20)

static int setup(void **state)
{
	(void)state;
	fake_init();
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	fake_fini();
	return 0;
}

static void test_plan(void **state)
{
	struct ing_rdma_plan p;
	(void)state;

	assert_int_equal(ing_rdma_plan_init(&p, 0, 0, 0, 0), 0);
	assert_int_equal(p.chunk, ING_RDMA_DEFAULT_CHUNK);
	assert_int_equal(p.limit, ING_RDMA_DEFAULT_RD_ATOM);
	assert_int_equal(p.sig_every, ING_RDMA_DEFAULT_RD_ATOM / 2);
	/* clamped to the device's max_msg_sz */
	assert_int_equal(ing_rdma_plan_init(&p, 4 * MIB, 2 * MIB, 16, 64), 0);
	assert_int_equal(p.chunk, 2 * MIB);
	/* window = min(rd_atom, SQ depth) */
	assert_int_equal(ing_rdma_plan_init(&p, MIB, 0, 16, 6), 0);
	assert_int_equal(p.limit, 6);
	assert_int_equal(p.sig_every, 3);
	assert_int_equal(ing_rdma_plan_init(&p, MIB, 0, 1, 64), 0);
	assert_int_equal(p.limit, 1);
	assert_int_equal(p.sig_every, 1);
	assert_int_equal(ing_rdma_plan_init(&p, 100, 0, 4, 4), -EINVAL);
	assert_int_equal(ing_rdma_plan_init(NULL, 0, 0, 0, 0), -EINVAL);

	assert_int_equal(ing_rdma_plan_init(&p, MIB, 0, 16, 64), 0);
	assert_int_equal(ing_rdma_plan_nchunks(&p, 0), 0);
	assert_int_equal(ing_rdma_plan_nchunks(&p, 1), 1);
	assert_int_equal(ing_rdma_plan_nchunks(&p, MIB), 1);
	assert_int_equal(ing_rdma_plan_nchunks(&p, MIB + 1), 2);
	assert_int_equal(ing_rdma_plan_nchunks(&p, 64 * MIB), 64);
	/* signaling rule */
	assert_true(ing_rdma_plan_signal(&p, true, 0, 1));      /* last chunk */
	assert_false(ing_rdma_plan_signal(&p, false, 0, 1));
	assert_true(ing_rdma_plan_signal(&p, false, 7, 8));     /* sig_every 8 */
	assert_true(ing_rdma_plan_signal(&p, false, 0, 16));    /* fills the window */
}

/* Run the lcore until every frame is delivered or failed (bounded). */
static void drive(struct ing_rdma_lcore *lc, struct fake_io *io, unsigned want)
{
	for (int i = 0; i < 1000000 && io->ndelivered + io_count(io, &io->nfailed) < want; i++) {
		ing_rdma_lcore_poll(lc);
		fake_hw(3); /* the wire is slower than the poller: WRs pile up to the window */
	}
}

static void check_tiling(const struct ing_frame *f, const struct ing_rdma_plan *p, unsigned first,
			 unsigned last)
{
	uint64_t off = 0;
	unsigned n = 0;
	for (unsigned i = first; i < last; i++) {
		struct fake_wr *w = &fake->wr[i];
		if (w->laddr < (uintptr_t)f->buf || w->laddr >= (uintptr_t)f->buf + f->cap)
			continue;
		assert_int_equal(w->opcode, IBV_WR_RDMA_READ);
		assert_int_equal(w->laddr, (uintptr_t)f->buf + off);
		assert_int_equal(w->raddr, f->raddr + off);
		assert_int_equal(w->rkey, f->rkey);
		assert_int_equal(w->lkey, 0x2222);         /* lkey of the frame's pool class */
		assert_true(w->len > 0 && w->len <= p->chunk);
		assert_true(w->wr_id != 0);
		off += w->len;
		n++;
		if (off == f->length)
			assert_true(w->signaled);          /* last chunk of a frame: signaled */
	}
	assert_int_equal(off, f->length);
	assert_int_equal(n, ing_rdma_plan_nchunks(p, f->length));
}

static void test_sizes(void **state)
{
	static const uint64_t sizes[] = { 1, 2, 4095, 4096, 4097, MIB - 1, MIB, MIB + 1,
					  3 * MIB + 5, 16 * MIB, 64 * MIB };
	uint8_t *src = malloc(64 * MIB + 4096); /* frames start at src + 0..2 */
	struct fake_io *io = fake_io_new();
	struct ing_rdma_lcore *lc = fake_lcore(io, NULL);
	struct ing_rdma_plan p;
	(void)state;

	for (size_t i = 0; i < 64 * MIB + 4096; i += 4096)
		memset(src + i, (int)(i >> 12) * 7 + 1, 4096);
	src[12345] = 0xab;
	assert_non_null(lc);
	struct ibv_qp *qp = fake_qp_new(64);
	assert_int_equal(ing_rdma_lcore_attach(lc, qp, 7, 16, 64), 0);
	ing_rdma_plan_init(&p, ING_RDMA_DEFAULT_CHUNK, 0, 16, 64);
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		struct ing_frame *f = frame_new(k, sizes[k], src + (k % 3), 0x77, qp->qp_num);
		unsigned first = fake->nwr;
		io_push_job(io, f);
		drive(lc, io, (unsigned)k + 1);
		assert_int_equal(io->ndelivered, k + 1);
		assert_ptr_equal(io->delivered[k], f);
		assert_int_equal(f->status, ING_E_NONE);
		assert_int_equal(f->filled, f->length);
		assert_true(f->t_received_ns > 0);
		assert_memory_equal(f->buf, src + (k % 3), f->length);
		check_tiling(f, &p, first, fake->nwr);
		struct fake_note n[4];
		assert_int_equal(fake_notes(fake_io_cur, n, 4), 1);
		assert_int_equal(n[0].kind, ING_EV_RECEIVED);
		assert_int_equal(n[0].gen, k);
		assert_int_equal(n[0].length, sizes[k]);
		frame_free(f);
	}
	assert_int_equal(io_count(io, &io->nfailed), 0);
	assert_int_equal(fake->sq_violations, 0);
	assert_int_equal(ing_rdma_lcore_frames_held(lc), 0);
	ing_rdma_lcore_destroy(lc);
	fake_io_free(io);
	free(src);
}

/* At most rd_atom READs on the wire, refilled as signaled completions retire them. */
static void test_rd_atom_limit(void **state)
{
	uint8_t *src = malloc(32 * MIB);
	struct fake_io *io = fake_io_new();
	struct ing_rdma_lcore *lc = fake_lcore(io, NULL);
	(void)state;

	memset(src, 0x5c, 32 * MIB);
	struct ibv_qp *qp = fake_qp_new(64);
	ing_rdma_lcore_attach(lc, qp, 7, 4, 64);   /* negotiated depth 4 */
	struct ing_frame *f = frame_new(1, 32 * MIB, src, 0x77, qp->qp_num);
	io_push_job(io, f);
	ing_rdma_lcore_poll(lc);
	assert_int_equal(fake->nwr, 4);                   /* the window, no more */
	assert_int_equal(fake->wr[1].signaled, true);     /* sig_every = 2 */
	assert_int_equal(fake->wr[3].signaled, true);
	assert_int_equal(fake->wr[0].signaled, false);
	ing_rdma_lcore_poll(lc);
	assert_int_equal(fake->nwr, 4);                   /* nothing completed: nothing new */
	fake_hw(1);                                       /* an unsignaled one: no CQE */
	ing_rdma_lcore_poll(lc);
	assert_int_equal(fake->nwr, 4);
	fake_hw(1);                                       /* signaled: retires 2 */
	ing_rdma_lcore_poll(lc);
	assert_int_equal(fake->nwr, 6);
	drive(lc, io, 1);
	assert_int_equal(io->ndelivered, 1);
	assert_int_equal(fake->nwr, 32);
	assert_true(fake->qps[fake_qp_idx(qp)].max_inflight <= 4);
	assert_int_equal(fake->qps[fake_qp_idx(qp)].max_inflight, 4);
	assert_memory_equal(f->buf, src, 32 * MIB);
	frame_free(f);
	ing_rdma_lcore_destroy(lc);
	fake_io_free(io);
	free(src);
}

/* Unsignaled WRs keep their SQ slots: a small SQ bounds the window even with a large
 * rd_atom, and the run of unsignaled WRs stays below sig_every. */
static void test_sq_accounting(void **state)
{
	uint8_t *src = malloc(8 * MIB);
	struct fake_io *io = fake_io_new();
	struct ing_rdma_lcore_opts o;
	(void)state;

	ing_rdma_lcore_opts_init(&o);
	o.chunk_size = 64 << 10;                          /* 128 chunks per 8 MiB frame */
	struct ing_rdma_lcore *lc = fake_lcore(io, &o);
	memset(src, 0x11, 8 * MIB);
	struct ibv_qp *qp = fake_qp_new(6);
	ing_rdma_lcore_attach(lc, qp, 7, 16, 6);
	struct ing_frame *f[3];
	for (unsigned i = 0; i < 3; i++) {
		f[i] = frame_new(i, i == 1 ? 4096 : 8 * MIB, src, 0x77, qp->qp_num);
		io_push_job(io, f[i]);
	}
	drive(lc, io, 3);
	assert_int_equal(io->ndelivered, 3);
	struct fake_qp *q = &fake->qps[fake_qp_idx(qp)];
	assert_int_equal(fake->sq_violations, 0);
	assert_int_equal(q->max_inflight, 6);
	assert_true(q->max_unsig_run < 3);                /* sig_every = 6 / 2 */
	assert_int_equal(fake->nwr, 128 + 1 + 128);
	for (unsigned i = 0; i < 3; i++) {
		assert_memory_equal(f[i]->buf, src, f[i]->length);
		frame_free(f[i]);
	}
	ing_rdma_lcore_destroy(lc);
	fake_io_free(io);
	free(src);
}

/* Small frames: one signaled READ each; frames keep their FIFO order on delivery. */
static void test_signal_cadence(void **state)
{
	uint8_t src[64 << 10];
	struct fake_io *io = fake_io_new();
	struct ing_rdma_lcore *lc = fake_lcore(io, NULL);
	struct ing_frame *f[20];
	(void)state;

	for (unsigned i = 0; i < sizeof(src); i++)
		src[i] = (uint8_t)(i * 31);
	struct ibv_qp *qp = fake_qp_new(64);
	ing_rdma_lcore_attach(lc, qp, 7, 16, 64);
	for (unsigned i = 0; i < 20; i++) {
		f[i] = frame_new(i, 1000 + i * 100, src + i, 0x77, qp->qp_num);
		io_push_job(io, f[i]);
	}
	drive(lc, io, 20);
	assert_int_equal(io->ndelivered, 20);
	assert_int_equal(fake->nwr, 20);
	for (unsigned i = 0; i < 20; i++) {
		assert_true(fake->wr[i].signaled);
		assert_ptr_equal(io->delivered[i], f[i]);
		assert_memory_equal(f[i]->buf, src + i, f[i]->length);
		frame_free(f[i]);
	}
	ing_rdma_lcore_destroy(lc);
	fake_io_free(io);
}

/* A chunk size above the device's max_msg_sz is clamped. */
static void test_max_msg_clamp(void **state)
{
	uint8_t *src = malloc(4 * MIB);
	struct fake_io *io = fake_io_new();
	struct ing_rdma_lcore_opts o;
	(void)state;

	ing_rdma_lcore_opts_init(&o);
	o.chunk_size = 4 * MIB;
	o.max_msg_sz = 256 << 10;
	struct ing_rdma_lcore *lc = fake_lcore(io, &o);
	memset(src, 3, 4 * MIB);
	struct ibv_qp *qp = fake_qp_new(64);
	ing_rdma_lcore_attach(lc, qp, 7, 16, 64);
	struct ing_frame *f = frame_new(1, 4 * MIB, src, 0x77, qp->qp_num);
	io_push_job(io, f);
	drive(lc, io, 1);
	assert_int_equal(io->ndelivered, 1);
	assert_int_equal(fake->nwr, 16);
	for (unsigned i = 0; i < fake->nwr; i++)
		assert_true(fake->wr[i].len <= (256u << 10));
	frame_free(f);
	ing_rdma_lcore_destroy(lc);
	fake_io_free(io);
	free(src);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_plan),
		cmocka_unit_test_setup_teardown(test_sizes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rd_atom_limit, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sq_accounting, setup, teardown),
		cmocka_unit_test_setup_teardown(test_signal_cadence, setup, teardown),
		cmocka_unit_test_setup_teardown(test_max_msg_clamp, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
