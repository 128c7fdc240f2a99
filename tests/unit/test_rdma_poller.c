/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_rdma_poller.c - the RDMA lcore's state machine with fake verbs: busy mode never
 * sleeps; adaptive mode arms the CQ after busy_polls idle passes, re-polls, sleeps, and
 * wakes on the job doorbell or a CQ event (threads: the test plays producer and wire);
 * an error completion fails only its frame, the others are parked and re-read on the
 * session's next QP; parked frames fail (retryable) after park_ms, or at once when the
 * rail's link is down (unpark); jobs for unknown QPs
 * are refused; persistence backpressure loses nothing; stop returns promptly.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <cmocka.h>

#include "common/clock.h"
#include "test_rdma_fake.h"

static struct ing_rdma_lcore_stats stats(struct ing_rdma_lcore *lc)
{
	struct ing_rdma_lcore_stats s;
	ing_rdma_lcore_get_stats(lc, &s);
	return s;
}

static void test_busy_never_sleeps(void **state)
{
	struct fake_io *io = fake_io_new();
	struct ing_rdma_lcore_opts o;
	(void)state;

	ing_rdma_lcore_opts_init(&o);
	o.mode = ING_RDMA_POLL_BUSY;
	o.busy_polls = 5;
	struct ing_rdma_lcore *lc = fake_lcore(io, &o);
	for (int i = 0; i < 1000; i++)
		assert_int_equal(ing_rdma_lcore_step(lc), 0);
	struct ing_rdma_lcore_stats s = stats(lc);
	assert_int_equal(s.sleeps, 0);
	assert_int_equal(s.arms, 0);
	assert_int_equal(s.idle_polls, 1000);
	ing_rdma_lcore_destroy(lc);
	fake_io_free(io);
}

static void test_adaptive_arms_then_sleeps(void **state)
{
	struct fake_io *io = fake_io_new();
	struct ing_rdma_lcore_opts o;
	(void)state;

	ing_rdma_lcore_opts_init(&o);
	o.busy_polls = 10;
	o.sleep_ms = 20;
	struct ing_rdma_lcore *lc = fake_lcore(io, &o);
	for (int i = 0; i < 9; i++)
		ing_rdma_lcore_step(lc);
	assert_int_equal(stats(lc).arms, 0);
	assert_false(fake->armed);
	uint64_t t0 = ing_now_ns();
	ing_rdma_lcore_step(lc);                     /* 10th idle pass: arm, re-poll, sleep */
	uint64_t el = ing_now_ns() - t0;
	struct ing_rdma_lcore_stats s = stats(lc);
	assert_int_equal(s.arms, 1);
	assert_int_equal(s.sleeps, 1);
	assert_int_equal(s.wake_timeout, 1);
	assert_true(fake->armed);
	assert_true(el >= 15 * 1000000ull);          /* it really slept (bounded by sleep_ms) */
	ing_rdma_lcore_step(lc);                     /* still idle: sleeps again, no re-arm */
	s = stats(lc);
	assert_int_equal(s.arms, 1);
	assert_int_equal(s.sleeps, 2);
	ing_rdma_lcore_destroy(lc);
	fake_io_free(io);
}

/* Adaptive: an idle spell ends after busy_us even when busy_polls is far away (a spinning
 * lcore must not hold the core while its READs are on the wire); busy_us 0 disables it. */
static void test_adaptive_time_bound(void **state)
{
	struct fake_io *io = fake_io_new();
	struct ing_rdma_lcore_opts o;
	(void)state;

	ing_rdma_lcore_opts_init(&o);
	o.busy_polls = 100000000;
	o.busy_us = 2000;
	o.sleep_ms = 5;
	struct ing_rdma_lcore *lc = fake_lcore(io, &o);
	uint64_t t0 = ing_now_ns(), end = t0 + 10000000000ull;
	while (stats(lc).arms == 0 && ing_now_ns() < end)
		ing_rdma_lcore_step(lc);
	struct ing_rdma_lcore_stats s = stats(lc);
	assert_int_equal(s.arms, 1);
	assert_int_equal(s.sleeps, 1);
	assert_true(ing_now_ns() - t0 >= 2000000ull);      /* spun busy_us first */
	assert_true(s.idle_polls >= ING_RDMA_MIN_IDLE_POLLS);
	assert_true(s.idle_polls < o.busy_polls);
	ing_rdma_lcore_destroy(lc);

	o.busy_us = 0;                                     /* count only */
	o.busy_polls = 100000000;
	lc = fake_lcore(io, &o);
	t0 = ing_now_ns();
	while (ing_now_ns() - t0 < 20000000ull)
		ing_rdma_lcore_step(lc);
	assert_int_equal(stats(lc).arms, 0);
	assert_int_equal(stats(lc).sleeps, 0);
	ing_rdma_lcore_destroy(lc);
	fake_io_free(io);
}

/* A CQE that lands between the last poll and the arm must not be slept on. */
static void test_repoll_after_arm(void **state)
{
	uint8_t src[4096];
	struct fake_io *io = fake_io_new();
	struct ing_rdma_lcore_opts o;
	(void)state;

	memset(src, 9, sizeof(src));
	ing_rdma_lcore_opts_init(&o);
	o.busy_polls = 3;
	o.sleep_ms = 2000;
	struct ing_rdma_lcore *lc = fake_lcore(io, &o);
	struct ibv_qp *qp = fake_qp_new(64);
	ing_rdma_lcore_attach(lc, qp, 7, 16, 64);
	struct ing_frame *f = frame_new(1, sizeof(src), src, 0x77, qp->qp_num);
	io_push_job(io, f);
	assert_true(ing_rdma_lcore_step(lc) > 0);   /* attach + job + post */
	ing_rdma_lcore_step(lc);
	ing_rdma_lcore_step(lc);
	fake_hw(1);                                  /* CQE while not armed: no event */
	assert_int_equal(fake->events, 0);
	uint64_t t0 = ing_now_ns();
	/* this step finds nothing on its first poll only if the CQE arrived later; here the
	 * first poll of the step already sees it */
	for (int i = 0; i < 5 && !io->ndelivered; i++)
		ing_rdma_lcore_step(lc);
	assert_int_equal(io->ndelivered, 1);
	assert_true(ing_now_ns() - t0 < 1000 * 1000000ull);
	frame_free(f);
	ing_rdma_lcore_destroy(lc);
	fake_io_free(io);
}

struct runner {
	pthread_t th;
	struct ing_rdma_lcore *lc;
};

static void *run_thread(void *arg)
{
	struct runner *r = arg;
	ing_rdma_lcore_run(r->lc);
	return NULL;
}

static bool wait_for(struct ing_rdma_lcore *lc, uint64_t *field_off_dummy, int ms,
		     bool (*cond)(struct ing_rdma_lcore *, void *), void *arg)
{
	(void)field_off_dummy;
	uint64_t end = ing_now_ns() + (uint64_t)ms * 1000000ull;
	while (ing_now_ns() < end) {
		if (cond(lc, arg))
			return true;
		usleep(1000);
	}
	return cond(lc, arg);
}

static bool sleeping(struct ing_rdma_lcore *lc, void *arg)
{
	(void)arg;
	return stats(lc).sleeps >= 1;
}

static bool delivered(struct ing_rdma_lcore *lc, void *arg)
{
	(void)lc;
	struct fake_io *io = arg;
	return io_count(io, &io->ndelivered) >= 1;
}

static bool has_posted(struct ing_rdma_lcore *lc, void *arg)
{
	(void)lc;
	(void)arg;
	return fake_pending() >= 1;
}

/* The lcore sleeps (adaptive, long sleep_ms); a job doorbell wakes it, the READ is posted;
 * it sleeps again with the CQ armed; the completion's CQ event wakes it. */
static void test_wake_on_job_then_cq_event(void **state)
{
	uint8_t src[8192];
	struct fake_io *io = fake_io_new();
	struct ing_rdma_lcore_opts o;
	struct runner r;
	(void)state;

	memset(src, 0x42, sizeof(src));
	ing_rdma_lcore_opts_init(&o);
	o.busy_polls = 50;
	o.sleep_ms = 5000;
	r.lc = fake_lcore(io, &o);
	struct ibv_qp *qp = fake_qp_new(64);
	ing_rdma_lcore_attach(r.lc, qp, 7, 16, 64);
	pthread_create(&r.th, NULL, run_thread, &r);
	assert_true(wait_for(r.lc, NULL, 2000, sleeping, NULL));
	uint64_t t0 = ing_now_ns();
	struct ing_frame *f = frame_new(5, sizeof(src), src, 0x77, qp->qp_num);
	io_push_job(io, f);
	assert_true(wait_for(r.lc, NULL, 2000, has_posted, NULL));
	assert_true(ing_now_ns() - t0 < 1500 * 1000000ull);    /* not the 5 s timeout */
	assert_true(stats(r.lc).wake_mbox >= 1);
	/* let it go back to sleep with the CQ armed (sleep #1 was cut short by the job
	 * doorbell), then complete on the "wire" */
	for (int i = 0; i < 2000 && stats(r.lc).sleeps < 2; i++)
		usleep(1000);
	usleep(20000);
	assert_true(stats(r.lc).sleeps >= 2);
	assert_int_equal(stats(r.lc).wake_cq, 0);
	t0 = ing_now_ns();
	fake_hw(16);
	assert_true(wait_for(r.lc, NULL, 3000, delivered, io));
	assert_true(ing_now_ns() - t0 < 2000 * 1000000ull);
	assert_true(stats(r.lc).wake_cq >= 1);
	assert_true(fake->events >= 1);
	/* stop: returns promptly although sleep_ms is 5 s */
	t0 = ing_now_ns();
	ing_rdma_lcore_stop(r.lc);
	pthread_join(r.th, NULL);
	assert_true(ing_now_ns() - t0 < 1000 * 1000000ull);
	assert_memory_equal(f->buf, src, sizeof(src));
	frame_free(f);
	ing_rdma_lcore_destroy(r.lc);
	fake_io_free(io);
}

static void drain(struct ing_rdma_lcore *lc, int passes)
{
	for (int i = 0; i < passes; i++) {
		ing_rdma_lcore_poll(lc);
		fake_hw(4);
	}
}

static unsigned notices_of(struct ing_rdma_lcore *lc, uint32_t kind, uint32_t *qp_out)
{
	(void)lc;
	struct fake_note n[64];
	unsigned k = fake_notes(fake_io_cur, n, 64), c = 0;
	for (unsigned i = 0; i < k; i++)
		if (n[i].kind == kind) {
			c++;
			if (qp_out)
				*qp_out = n[i].qp_num;
		}
	return c;
}

/* Bad rkey on the middle frame: it alone fails (not retryable, wc status in msg); the QP
 * is reported broken and released after its flushes; the two others are re-read on the
 * session's next QP and complete. */
static void test_error_fails_only_that_frame(void **state)
{
	uint8_t *src = malloc(3 << 20);
	struct fake_io *io = fake_io_new();
	struct ing_rdma_lcore_opts o;
	(void)state;

	for (unsigned i = 0; i < (3u << 20); i++)
		src[i] = (uint8_t)(i ^ (i >> 11));
	ing_rdma_lcore_opts_init(&o);
	o.chunk_size = 256 << 10;
	struct ing_rdma_lcore *lc = fake_lcore(io, &o);
	struct ibv_qp *qp = fake_qp_new(64);
	ing_rdma_lcore_attach(lc, qp, 7, 16, 64);
	fake->bad_rkey = 0xbad;
	struct ing_frame *a = frame_new(1, 1 << 20, src, 0x77, qp->qp_num);
	struct ing_frame *b = frame_new(2, 1 << 20, src + (1 << 20), 0xbad, qp->qp_num);
	struct ing_frame *c = frame_new(3, 1 << 20, src + (2 << 20), 0x77, qp->qp_num);
	io_push_job(io, a);
	io_push_job(io, b);
	io_push_job(io, c);
	drain(lc, 200);
	assert_int_equal(io->ndelivered, 1);
	assert_ptr_equal(io->delivered[0], a);
	assert_int_equal(io_count(io, &io->nfailed), 1);
	assert_ptr_equal(io->failed[0], b);
	assert_int_equal(b->status, ING_E_TRANSFER);
	assert_false(b->retryable);
	assert_non_null(strstr(b->msg, "remote access error"));
	struct ing_rdma_lcore_stats s = stats(lc);
	assert_int_equal(s.wc_errors, 1);
	assert_true(s.wc_flushed >= 1);
	uint32_t relqp = 0;
	struct fake_note n[64];
	unsigned k = fake_notes(fake_io_cur, n, 64);
	unsigned nerr = 0, nrel = 0, nrecv = 0;
	for (unsigned i = 0; i < k; i++) {
		nerr += n[i].kind == ING_EV_CONN_ERROR;
		nrecv += n[i].kind == ING_EV_RECEIVED;
		if (n[i].kind == ING_EV_CONN_RELEASED) {
			nrel++;
			relqp = n[i].qp_num;
		}
		if (n[i].kind == ING_EV_CONN_ERROR)
			assert_int_equal(n[i].status, IBV_WC_REM_ACCESS_ERR);
	}
	assert_int_equal(nerr, 1);
	assert_int_equal(nrel, 1);
	assert_int_equal(nrecv, 1);
	assert_int_equal(relqp, qp->qp_num);
	assert_int_equal(ing_rdma_lcore_frames_held(lc), 1);    /* c, parked */
	/* the producer reconnects with the same session: c is read on the new QP */
	struct ibv_qp *qp2 = fake_qp_new(64);
	ing_rdma_lcore_attach(lc, qp2, 7, 16, 64);
	drain(lc, 200);
	assert_int_equal(io->ndelivered, 2);
	assert_ptr_equal(io->delivered[1], c);
	assert_int_equal(c->status, ING_E_NONE);
	assert_memory_equal(a->buf, src, 1 << 20);
	assert_memory_equal(c->buf, src + (2 << 20), 1 << 20);
	assert_int_equal(io_count(io, &io->nfailed), 1);
	assert_int_equal(ing_rdma_lcore_frames_held(lc), 0);
	frame_free(a);
	frame_free(b);
	frame_free(c);
	ing_rdma_lcore_destroy(lc);
	fake_io_free(io);
	free(src);
}

/* Connection lost (detach) with frames in flight and no reconnect: after park_ms they fail
 * retryable; a job for an unknown QP is refused at once. */
static void test_park_timeout_and_unknown_qp(void **state)
{
	uint8_t *src = malloc(2 << 20);
	struct fake_io *io = fake_io_new();
	struct ing_rdma_lcore_opts o;
	(void)state;

	memset(src, 1, 2 << 20);
	ing_rdma_lcore_opts_init(&o);
	o.park_ms = 50;
	struct ing_rdma_lcore *lc = fake_lcore(io, &o);
	struct ibv_qp *qp = fake_qp_new(64);
	ing_rdma_lcore_attach(lc, qp, 7, 16, 64);
	struct ing_frame *a = frame_new(1, 2 << 20, src, 0x77, qp->qp_num);
	io_push_job(io, a);
	ing_rdma_lcore_poll(lc);                     /* posted, nothing completes */
	assert_int_equal(fake->nwr, 2);
	fake->qps[fake_qp_idx(qp)].error = true;     /* control moved it to ERROR */
	ing_rdma_lcore_detach(lc, qp->qp_num);
	drain(lc, 20);                               /* flushes retire the SQ */
	assert_int_equal(notices_of(lc, ING_EV_CONN_RELEASED, NULL), 1);
	assert_int_equal(io_count(io, &io->nfailed), 0);            /* parked, not failed yet */
	uint64_t t0 = ing_now_ns();
	while (!io_count(io, &io->nfailed) && ing_now_ns() - t0 < 2000 * 1000000ull)
		ing_rdma_lcore_step(lc);
	assert_int_equal(io_count(io, &io->nfailed), 1);
	assert_int_equal(a->status, ING_E_TRANSFER);
	assert_true(a->retryable);
	assert_true(ing_now_ns() - t0 >= 40 * 1000000ull);
	/* unknown QP */
	struct ing_frame *x = frame_new(9, 4096, src, 0x77, 0xdead);
	io_push_job(io, x);
	ing_rdma_lcore_poll(lc);
	assert_int_equal(io_count(io, &io->nfailed), 2);
	assert_int_equal(x->status, ING_E_NO_TRANSPORT);
	assert_true(x->retryable);
	assert_int_equal(ing_rdma_lcore_frames_held(lc), 0);
	frame_free(a);
	frame_free(x);
	ing_rdma_lcore_destroy(lc);
	fake_io_free(io);
	free(src);
}

/*
 * The rail's link is down (ING_EV_UNPARK): the parked frames fail at once, retryable, not
 * after park_ms (60 s here: a frame that fails before the watchdog failed by the unpark),
 * so the producer's copy moved over another rail is admitted at once. Session-scoped: only
 * the named session's frames; posted right after the detach (the connection still
 * draining), they fail as it parks. Another session's parked frame stays parked and is read
 * on its reconnect; an unpark of every session takes the rest.
 */
static void test_unpark_link_down(void **state)
{
	uint8_t *src = malloc(3 << 20);
	struct fake_io *io = fake_io_new();
	struct ing_rdma_lcore_opts o;
	(void)state;

	for (unsigned i = 0; i < (3u << 20); i++)
		src[i] = (uint8_t)(i * 7 + 1);
	ing_rdma_lcore_opts_init(&o);
	o.park_ms = 60000;
	struct ing_rdma_lcore *lc = fake_lcore(io, &o);
	struct ibv_qp *qa = fake_qp_new(64), *qb = fake_qp_new(64);
	ing_rdma_lcore_attach(lc, qa, 7, 16, 64);
	ing_rdma_lcore_attach(lc, qb, 8, 16, 64);
	struct ing_frame *a = frame_new(1, 1 << 20, src, 0x77, qa->qp_num);
	struct ing_frame *b = frame_new(2, 1 << 20, src + (1 << 20), 0x77, qb->qp_num);
	io_push_job(io, a);
	io_push_job(io, b);
	ing_rdma_lcore_poll(lc);                     /* posted, nothing completes */
	ing_rdma_lcore_poll(lc);
	/* both connections lost; session 7's with its link down: detach, then unpark (the
	 * order control posts them), before the lcore drained it */
	fake->qps[fake_qp_idx(qa)].error = true;
	fake->qps[fake_qp_idx(qb)].error = true;
	ing_rdma_lcore_detach(lc, qa->qp_num);
	ing_rdma_lcore_unpark(lc, 7);
	ing_rdma_lcore_detach(lc, qb->qp_num);
	uint64_t t0 = ing_now_ns();
	while (!io_count(io, &io->nfailed) && ing_now_ns() - t0 < 30000 * 1000000ull)
		ing_rdma_lcore_step(lc);
	drain(lc, 20);
	assert_int_equal(notices_of(lc, ING_EV_CONN_RELEASED, NULL), 2);
	assert_int_equal(io_count(io, &io->nfailed), 1);  /* a, at once; b still parked */
	assert_ptr_equal(io->failed[0], a);
	assert_int_equal(a->status, ING_E_TRANSFER);
	assert_true(a->retryable);
	assert_non_null(strstr(a->msg, "link down"));
	assert_int_equal(io->ndelivered, 0);           /* nothing of a stored */
	assert_int_equal(ing_rdma_lcore_frames_held(lc), 1);
	/* session 8 reconnects: b is read on its new QP, byte for byte */
	struct ibv_qp *qb2 = fake_qp_new(64);
	ing_rdma_lcore_attach(lc, qb2, 8, 16, 64);
	drain(lc, 200);
	assert_int_equal(io->ndelivered, 1);
	assert_ptr_equal(io->delivered[0], b);
	assert_memory_equal(b->buf, src + (1 << 20), 1 << 20);
	/* a frame parked already, then the rail's link found down: every session's, at once */
	struct ing_frame *c = frame_new(3, 1 << 20, src + (2 << 20), 0x77, qb2->qp_num);
	io_push_job(io, c);
	ing_rdma_lcore_poll(lc);
	fake->qps[fake_qp_idx(qb2)].error = true;
	ing_rdma_lcore_detach(lc, qb2->qp_num);
	drain(lc, 20);
	assert_int_equal(io_count(io, &io->nfailed), 1);  /* parked, not failed */
	assert_int_equal(ing_rdma_lcore_frames_held(lc), 1);
	ing_rdma_lcore_unpark(lc, 0);
	t0 = ing_now_ns();
	while (io_count(io, &io->nfailed) < 2 && ing_now_ns() - t0 < 30000 * 1000000ull)
		ing_rdma_lcore_step(lc);
	assert_int_equal(io_count(io, &io->nfailed), 2);
	assert_ptr_equal(io->failed[1], c);
	assert_true(c->retryable);
	assert_non_null(strstr(c->msg, "link down"));
	assert_int_equal(ing_rdma_lcore_frames_held(lc), 0);
	frame_free(a);
	frame_free(b);
	frame_free(c);
	ing_rdma_lcore_destroy(lc);
	fake_io_free(io);
	free(src);
}

/*
 * Persistence refuses a frame (cannot happen in the node: a worker's mailbox holds every
 * pool slot): that frame goes back to control failed (retryable) after its RECEIVED, so
 * control answers it; nothing is kept or retried, the others go on in order.
 */
static void test_backpressure(void **state)
{
	uint8_t src[4096];
	struct fake_io *io = fake_io_new();
	struct ing_rdma_lcore *lc = fake_lcore(io, NULL);
	struct ing_frame *f[5];
	(void)state;

	memset(src, 4, sizeof(src));
	struct ibv_qp *qp = fake_qp_new(64);
	ing_rdma_lcore_attach(lc, qp, 7, 16, 64);
	io->refuse_deliver = 2;
	for (unsigned i = 0; i < 5; i++) {
		f[i] = frame_new(i, 4096, src, 0x77, qp->qp_num);
		io_push_job(io, f[i]);
	}
	drain(lc, 50);
	assert_int_equal(io->ndelivered, 3);
	for (unsigned i = 0; i < 3; i++)
		assert_ptr_equal(io->delivered[i], f[2 + i]);
	assert_int_equal(io_count(io, &io->nfailed), 2);
	for (unsigned i = 0; i < 2; i++) {   /* the refused ones: DONE failed, retryable */
		assert_int_equal(f[i]->status, ING_E_INTERNAL);
		assert_true(f[i]->retryable);
	}
	for (unsigned i = 0; i < 5; i++)
		frame_free(f[i]);
	assert_int_equal(stats(lc).backpressure, 2);
	assert_int_equal(ing_rdma_lcore_frames_held(lc), 0);
	ing_rdma_lcore_destroy(lc);
	fake_io_free(io);
}

/* A post_send failure breaks the connection, not the process; frames are kept. */
static void test_post_failure(void **state)
{
	uint8_t src[4096];
	struct fake_io *io = fake_io_new();
	struct ing_rdma_lcore *lc = fake_lcore(io, NULL);
	(void)state;

	memset(src, 4, sizeof(src));
	struct ibv_qp *qp = fake_qp_new(64);
	ing_rdma_lcore_attach(lc, qp, 7, 16, 64);
	fake->post_ret = ENOMEM;
	struct ing_frame *f = frame_new(1, 4096, src, 0x77, qp->qp_num);
	io_push_job(io, f);
	ing_rdma_lcore_poll(lc);
	assert_int_equal(stats(lc).post_errors, 1);
	assert_int_equal(notices_of(lc, ING_EV_CONN_ERROR, NULL) +
			 0, 1);
	fake->post_ret = 0;
	struct ibv_qp *qp2 = fake_qp_new(64);
	ing_rdma_lcore_attach(lc, qp2, 7, 16, 64);
	drain(lc, 20);
	assert_int_equal(io->ndelivered, 1);
	frame_free(f);
	ing_rdma_lcore_destroy(lc);
	fake_io_free(io);
}

/* Destroy with frames still held fails them (SHUTTING_DOWN) instead of losing them. */
static void test_destroy_returns_frames(void **state)
{
	uint8_t src[4096];
	struct fake_io *io = fake_io_new();
	struct ing_rdma_lcore *lc = fake_lcore(io, NULL);
	(void)state;

	struct ibv_qp *qp = fake_qp_new(64);
	ing_rdma_lcore_attach(lc, qp, 7, 16, 64);
	struct ing_frame *f = frame_new(1, 4096, src, 0x77, qp->qp_num);
	io_push_job(io, f);
	ing_rdma_lcore_poll(lc);
	ing_rdma_lcore_destroy(lc);
	assert_int_equal(io_count(io, &io->nfailed), 1);
	assert_int_equal(f->status, ING_E_SHUTTING_DOWN);
	frame_free(f);
	fake_io_free(io);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_busy_never_sleeps, fake_setup, fake_teardown),
		cmocka_unit_test_setup_teardown(test_adaptive_arms_then_sleeps, fake_setup, fake_teardown),
		cmocka_unit_test_setup_teardown(test_adaptive_time_bound, fake_setup, fake_teardown),
		cmocka_unit_test_setup_teardown(test_repoll_after_arm, fake_setup, fake_teardown),
		cmocka_unit_test_setup_teardown(test_wake_on_job_then_cq_event, fake_setup, fake_teardown),
		cmocka_unit_test_setup_teardown(test_error_fails_only_that_frame, fake_setup, fake_teardown),
		cmocka_unit_test_setup_teardown(test_park_timeout_and_unknown_qp, fake_setup, fake_teardown),
		cmocka_unit_test_setup_teardown(test_unpark_link_down, fake_setup, fake_teardown),
		cmocka_unit_test_setup_teardown(test_backpressure, fake_setup, fake_teardown),
		cmocka_unit_test_setup_teardown(test_post_failure, fake_setup, fake_teardown),
		cmocka_unit_test_setup_teardown(test_destroy_returns_frames, fake_setup, fake_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
