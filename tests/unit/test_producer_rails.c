/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_producer_rails.c - libingest's rails (producer/fleet.c, "rails"): the router over
 * fake node sessions. The session layer (producer_session_*, producer_destroy, ...) and
 * the RDMA transport's descriptor (rdma_xport) are defined here, so producer.c and
 * rdma_producer.c are never pulled out of ingest_static: each "session" is a struct
 * ing_producer this file fills as a node's NegotiateReply would (rails, the rail given),
 * takes frames up to its credits and returns the acks the test queues.
 *  - spread: frames to the rail with the fewest bytes in flight (fleet_rail_pick, and
 *    through the router: equal frames alternate, a big one weighs as much as its bytes);
 *  - failover: a rail's session breaks: its frames in flight go to the other rail, none
 *    fails, each is acked DURABLE once; the rail is down (why, since when) and, once it can
 *    be dialled again, back and carrying frames;
 *  - a rail no local device reaches is not used; a node that does not honour
 *    NegotiateRequest.rail, or lists no rails, is used over one rail;
 *  - the last rail lost is the node lost: frames kept, the node redialled, none failed;
 *  - striping: the rails a frame's parts name (pull: each device's rkey; push: sessions
 *    only) and the session a part's grant is written over.
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

#include "control/net/grpc.h"
#include "ingest/producer.h"
#include "producer/producer_internal.h"

/* ================================================================ the fake node */

#define MAXS 64
#define MAXF 256

struct fsess {
	struct ing_producer p;       /* first: the router holds &fsess.p */
	bool live;
	char rail[64];
	unsigned nf;
	struct { char id[ING_ID_MAX + 1]; void *user; uint64_t len; bool acked; } fr[MAXF];
	unsigned inflight;
	unsigned aq_n;
	struct ing_ack aq[MAXF];
};

struct ing_grpc_ccall {
	int unused;
};

static struct {
	const char *rails[4];        /* the node's rails */
	unsigned nrails;
	bool honour;                 /* puts a session on the rail it asks for */
	bool down[4];                /* the node reports the rail down */
	int refuse[4];               /* a dial of that rail fails with this errno */
	int refuse_all;              /* every dial fails with this errno */
	unsigned credits;
	struct fsess s[MAXS];
	unsigned ns;
	struct ing_grpc_ccall call;
} N;

static int rail_ix(const char *dev)
{
	for (unsigned k = 0; k < N.nrails; k++)
		if (!strcmp(N.rails[k], dev))
			return (int)k;
	return -1;
}

static const struct producer_xport fake_grpc = { .name = "grpc", .kind = ING_TRANSPORT_GRPC };
/* striping: a live pull session has its device's rkey of the pool (0x100 + its id), a
 * live push session can take a part's WRITE */
static int fake_read_rkey(const struct ing_producer *p, uint32_t *rkey)
{
	if (p->push || p->broken)
		return -ENOTCONN;
	*rkey = 0x100u + (uint32_t)p->session_id;
	return 0;
}
static int fake_push_ready(const struct ing_producer *p)
{
	return p->push && !p->broken ? 0 : -ENOTCONN;
}
static int fake_part_write(struct ing_producer *p, struct ing_producer *home, struct pframe *f,
			   const struct wire_ack *w)
{
	(void)p, (void)home, (void)f, (void)w;
	return -ENOSYS;   /* never called: the rdma transport's grant path is not linked here */
}
const struct producer_xport rdma_xport = { .name = "rdma", .kind = ING_TRANSPORT_RDMA,
					   .read_rkey = fake_read_rkey, .push_ready = fake_push_ready,
					   .part_write = fake_part_write };

void producer_opts_defaults(struct ing_producer_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->opts_size = sizeof(*o);
	o->connect_timeout_ms = 1000;
	o->frame_timeout_ms = 60000;
	o->recycle_on = ING_ACK_RECEIVED;
	o->pool_frame_size = 1 << 20;
}

bool producer_id_ok(const char *id)
{
	return id && *id && strlen(id) <= ING_ID_MAX;
}

int producer_pool_create(struct ppool *pl, unsigned nslots, uint64_t slot_size)
{
	(void)pl;
	(void)nslots;
	(void)slot_size;
	return -ENOMEM;   /* the tests use no pool */
}

struct ing_producer *producer_session_connect_shared(const struct ing_producer_opts *o,
						     struct producer_shared *sh, const char *rail,
						     char *err, size_t errlen)
{
	(void)sh;
	int want = rail && *rail ? rail_ix(rail) : 0;
	if (N.refuse_all || (want >= 0 && N.refuse[want])) {
		int e = N.refuse_all ? N.refuse_all : N.refuse[want];
		snprintf(err, errlen, "fake: rail %s: %s", rail && *rail ? rail : "-", strerror(e));
		errno = e;
		return NULL;
	}
	assert_true(N.ns < MAXS);
	struct fsess *s = &N.s[N.ns++];
	memset(s, 0, sizeof(*s));
	s->live = true;
	struct ing_producer *p = &s->p;
	p->o = *o;
	p->ops = &producer_session_ops;
	p->xport = N.nrails || o->transport == ING_TRANSPORT_RDMA ? &rdma_xport : &fake_grpc;
	p->call = &N.call;
	p->session_id = N.ns;
	p->credits = N.credits;
	p->max_frame = 64ull << 20;
	snprintf(p->node_id, sizeof(p->node_id), "node-a");
	snprintf(p->note, sizeof(p->note), "fake");
	/* the rail given: the one asked when the node honours it and it is up, else rail 0 */
	int got = N.nrails ? 0 : -1;
	if (N.nrails && N.honour && want > 0 && !N.down[want])
		got = want;
	if (got >= 0) {
		snprintf(p->rail, sizeof(p->rail), "%s", N.rails[got]);
		snprintf(p->local_dev, sizeof(p->local_dev), "l%s", N.rails[got]);
		snprintf(p->rdma_addr, sizeof(p->rdma_addr), "10.0.%d.1", got);
		p->rdma_port = 7471;
	}
	p->nrails = N.nrails;
	for (unsigned k = 0; k < N.nrails; k++) {
		snprintf(p->rails[k].dev, sizeof(p->rails[k].dev), "%s", N.rails[k]);
		p->rails[k].index = k;
		p->rails[k].up = !N.down[k];
		if (N.down[k])
			snprintf(p->rails[k].why, sizeof(p->rails[k].why), "link down");
	}
	memcpy(s->rail, p->rail, sizeof(s->rail));
	return p;
}

int producer_session_submit(struct ing_producer *p, const struct ing_frame_desc *d)
{
	struct fsess *s = (struct fsess *)p;
	assert_true(s->live);
	if (p->broken)
		return -EPIPE;
	if (s->inflight >= p->credits)
		return -EAGAIN;
	assert_true(s->nf < MAXF);
	snprintf(s->fr[s->nf].id, sizeof(s->fr[0].id), "%s", d->frame_id);
	s->fr[s->nf].user = d->user;
	s->fr[s->nf].len = d->length;
	s->nf++;
	s->inflight++;
	return 0;
}

int producer_session_poll(struct ing_producer *p, struct ing_ack *acks, unsigned max,
			  size_t ack_size, int timeout_ms)
{
	struct fsess *s = (struct fsess *)p;
	(void)timeout_ms;
	assert_int_equal(ack_size, sizeof(struct ing_ack));
	unsigned n = s->aq_n < max ? s->aq_n : max;
	memcpy(acks, s->aq, n * sizeof(*acks));
	memmove(s->aq, s->aq + n, (s->aq_n - n) * sizeof(*acks));
	s->aq_n -= n;
	return (int)n;
}

void producer_session_close(struct ing_producer *p, int timeout_ms)
{
	(void)timeout_ms;
	producer_destroy(p);
}

void producer_destroy(struct ing_producer *p)
{
	if (!p)
		return;
	struct fsess *s = (struct fsess *)p;
	if (s >= N.s && s < N.s + MAXS) {
		s->live = false;
		return;
	}
	/* the router's own top object (calloc'ed by fleet_connect) */
	free(p);
}

const struct producer_ops producer_session_ops = { .name = "fake" };

/* the gRPC client: only the Members calls of fleet mode use it; one server never does */
void ing_grpc_chan_opts_init(struct ing_grpc_chan_opts *o) { memset(o, 0, sizeof(*o)); }
struct ing_grpc_chan *ing_grpc_chan_connect(const struct ing_grpc_chan_opts *o, char *err,
					    size_t errlen)
{
	(void)o;
	snprintf(err, errlen, "fake");
	errno = ECONNREFUSED;
	return NULL;
}
void ing_grpc_chan_close(struct ing_grpc_chan *ch) { (void)ch; }
struct ing_grpc_ccall *ing_grpc_chan_call(struct ing_grpc_chan *ch, const char *path,
					  const char *const *md, int timeout_ms,
					  const struct ing_grpc_ccall_cbs *cbs)
{
	(void)ch; (void)path; (void)md; (void)timeout_ms; (void)cbs;
	return NULL;
}
int ing_grpc_ccall_send(struct ing_grpc_ccall *cc, const uint8_t *msg, size_t len, bool end)
{
	(void)cc; (void)msg; (void)len; (void)end;
	return -EPIPE;
}
void ing_grpc_ccall_cancel(struct ing_grpc_ccall *cc) { (void)cc; }
size_t ing_grpc_chan_pending(const struct ing_grpc_chan *ch) { (void)ch; return 0; }
int ing_grpc_chan_fd(const struct ing_grpc_chan *ch) { (void)ch; return -1; }
int ing_grpc_unary(struct ing_grpc_chan *ch, const char *path, const char *const *md,
		   const uint8_t *req, size_t req_len, uint8_t **resp, size_t *resp_len,
		   int timeout_ms, char *msg, size_t msglen)
{
	(void)ch; (void)path; (void)md; (void)req; (void)req_len; (void)resp; (void)resp_len;
	(void)timeout_ms; (void)msg; (void)msglen;
	return ING_GRPC_UNAVAILABLE;
}

/* ================================================================ helpers */

static uint8_t DATA[8 << 20];

static void node_reset(unsigned nrails, bool honour)
{
	memset(&N, 0, sizeof(N));
	static const char *const names[4] = { "rxe0", "rxe1", "rxe2", "rxe3" };
	for (unsigned k = 0; k < nrails; k++)
		N.rails[k] = names[k];
	N.nrails = nrails;
	N.honour = honour;
	N.credits = 4;
}

static struct ing_producer *open_one(void)
{
	struct ing_producer_opts o;
	struct ing_producer *p = NULL;
	char err[256] = "";
	producer_opts_defaults(&o);
	o.server = "node-a:1";
	o.recycle_on = ING_ACK_DURABLE;
	o.connect_timeout_ms = 200;
	int rc = ing_producer_open(&p, &o, err, sizeof(err));
	if (rc)
		fail_msg("open: %d %s", rc, err);
	return p;
}

/* the live session of rail dev, or NULL */
static struct fsess *sess_of(const char *dev)
{
	for (int i = (int)N.ns - 1; i >= 0; i--)
		if (N.s[i].live && !strcmp(N.s[i].rail, dev))
			return &N.s[i];
	return NULL;
}

static void submit(struct ing_producer *p, unsigned id, uint64_t len)
{
	char name[32];
	snprintf(name, sizeof(name), "f%u", id);
	struct ing_frame_desc d = { .frame_id = name, .wafer_id = "w", .data = DATA, .length = len,
				    .crc32c = 1, .has_crc = 1, .user = (void *)(uintptr_t)id };
	assert_int_equal(ing_producer_submit(p, &d), 0);
}

/* the node acks DURABLE every frame the session s holds and has not acked */
static void ack_all(struct fsess *s)
{
	for (unsigned k = 0; k < s->nf; k++) {
		if (s->fr[k].acked)
			continue;
		s->fr[k].acked = true;
		struct ing_ack *a = &s->aq[s->aq_n++];
		memset(a, 0, sizeof(*a));
		snprintf(a->frame_id, sizeof(a->frame_id), "%s", s->fr[k].id);
		snprintf(a->wafer_id, sizeof(a->wafer_id), "w");
		a->stage = ING_ACK_DURABLE;
		a->ok = 1;
		a->stored = 1;
		a->user = s->fr[k].user;
		s->inflight--;
	}
}

/* poll until n terminal acks are out (a watchdog, not a time budget); every one ok */
static void poll_acks(struct ing_producer *p, unsigned n, unsigned *seen)
{
	struct ing_ack a[32];
	unsigned got = 0;
	for (int spin = 0; got < n && spin < 2000; spin++) {
		int r = ing_producer_poll(p, a, 32, 5);
		assert_true(r >= 0);
		for (int k = 0; k < r; k++) {
			if (!a[k].ok)
				fail_msg("frame %s failed: %s", a[k].frame_id, a[k].msg);
			if (a[k].stage != ING_ACK_DURABLE)
				continue;
			unsigned id = (unsigned)(uintptr_t)a[k].user;
			assert_true(id < 256);
			seen[id]++;
			got++;
		}
	}
	assert_int_equal(got, n);
}

static void rail_info(struct ing_producer *p, unsigned i, struct ing_rail *r)
{
	assert_int_equal(ing_producer_rail(p, i, r), 0);
}

/* rail 1 can be dialled again: the running producer's new session on it is UP and takes its
 * share of 4 more frames (ids first..first+3, acked DURABLE with rail 0's) */
static void rail1_back_carries(struct ing_producer *p, struct fsess *a, unsigned first,
			       unsigned *seen)
{
	struct ing_ack x[8];
	struct ing_rail r1;
	N.refuse[1] = 0;
	for (int spin = 0; spin < 2000 && !sess_of("rxe1"); spin++)
		assert_true(ing_producer_poll(p, x, 8, 5) >= 0);
	struct fsess *b2 = sess_of("rxe1");
	assert_non_null(b2);
	rail_info(p, 1, &r1);
	assert_int_equal(r1.state, ING_RAIL_UP);
	for (unsigned i = first; i < first + 4; i++)
		submit(p, i, 1 << 20);
	assert_int_equal(b2->nf, 2);
	ack_all(a);
	ack_all(b2);
	poll_acks(p, 4, seen);
}

/* ================================================================ tests */

static void test_pick(void **state)
{
	(void)state;
	uint64_t load[4] = { 5, 3, 3, 1 };
	bool ok[4] = { true, true, true, false };
	assert_int_equal(fleet_rail_pick(load, ok, 4, 0), 1);   /* fewest bytes; the first of equals */
	assert_int_equal(fleet_rail_pick(load, ok, 4, 2), 2);   /* of equals, the first from 2 */
	assert_int_equal(fleet_rail_pick(load, ok, 4, 3), 1);   /* cyclically: 3 is not ok, 0 has more */
	assert_int_equal(fleet_rail_pick(load, ok, 4, 6), 2);   /* from wraps (6 % 4) */
	ok[1] = false;
	assert_int_equal(fleet_rail_pick(load, ok, 4, 0), 2);
	ok[0] = ok[2] = false;
	assert_int_equal(fleet_rail_pick(load, ok, 4, 0), 4);   /* none */
	/* at light load (nothing in flight anywhere) the rails take turns */
	uint64_t idle[2] = { 0, 0 };
	bool up[2] = { true, true };
	unsigned next = 0, count[2] = { 0, 0 };
	for (int i = 0; i < 10; i++) {
		unsigned j = fleet_rail_pick(idle, up, 2, next);
		count[j]++;
		next = j + 1;
	}
	assert_int_equal(count[0], 5);
	assert_int_equal(count[1], 5);
}

static void test_spread_by_bytes(void **state)
{
	(void)state;
	node_reset(2, true);
	N.credits = 8;
	struct ing_producer *p = open_one();
	struct fsess *a = sess_of("rxe0"), *b = sess_of("rxe1");
	assert_non_null(a);
	assert_non_null(b);
	assert_string_equal(b->p.local_dev, "lrxe1");
	/* equal frames alternate */
	for (unsigned i = 0; i < 6; i++)
		submit(p, i, 1 << 20);
	assert_int_equal(a->nf, 3);
	assert_int_equal(b->nf, 3);
	/* a 4 MiB frame on one rail weighs as four 1 MiB frames on the other */
	submit(p, 10, 4 << 20);
	struct fsess *big = a->nf == 4 ? a : b, *other = big == a ? b : a;
	assert_int_equal(big->nf + other->nf, 7);
	for (unsigned i = 11; i < 15; i++)
		submit(p, i, 1 << 20);
	assert_int_equal(other->nf, 7);   /* the 4 next all on the rail without the big one */
	assert_int_equal(big->nf, 4);
	unsigned seen[256] = { 0 };
	ack_all(a);
	ack_all(b);
	poll_acks(p, 11, seen);
	struct ing_rail r0, r1;
	rail_info(p, 0, &r0);
	rail_info(p, 1, &r1);
	assert_string_equal(r0.device, "rxe0");
	assert_string_equal(r1.device, "rxe1");
	assert_int_equal(r0.state, ING_RAIL_UP);
	assert_int_equal(r1.state, ING_RAIL_UP);
	assert_int_equal(r0.bytes + r1.bytes, 14ull << 20);
	assert_int_equal(r0.bytes, 7ull << 20);
	struct ing_rail r2;
	assert_int_equal(ing_producer_rail(p, 2, &r2), -ENOENT);
	ing_producer_close(p, 0);
}

static void test_rail_lost_moves_frames(void **state)
{
	(void)state;
	node_reset(2, true);
	struct ing_producer *p = open_one();
	struct fsess *a = sess_of("rxe0"), *b = sess_of("rxe1");
	for (unsigned i = 0; i < 8; i++)
		submit(p, i, 1 << 20);
	assert_int_equal(a->nf, 4);
	assert_int_equal(b->nf, 4);
	/* rail 1 lost (its QP in error): its 4 frames go to rail 0 once it has credit */
	N.refuse[1] = ENODEV;   /* and it cannot be dialled yet (its device gone: for now) */
	b->p.broken = true;
	snprintf(b->p.broken_msg, sizeof(b->p.broken_msg), "RDMA device removed");
	unsigned seen[256] = { 0 };
	ack_all(a);
	poll_acks(p, 4, seen);
	assert_false(b->live);   /* its session destroyed before any of its frames moved */
	assert_int_equal(a->nf, 8);
	for (unsigned k = 4; k < 8; k++)
		assert_string_equal(a->fr[k].id, b->fr[k - 4].id);
	struct ing_rail r1;
	rail_info(p, 1, &r1);
	assert_int_equal(r1.state, ING_RAIL_DOWN);
	assert_int_equal(r1.moved_away, 4);
	assert_int_equal(r1.downs, 1);
	assert_non_null(strstr(r1.why, "RDMA device removed"));
	ack_all(a);
	poll_acks(p, 4, seen);
	for (unsigned i = 0; i < 8; i++)
		assert_int_equal(seen[i], 1);   /* each DURABLE once, none failed */
	struct ing_producer_stats st;
	ing_producer_get_stats(p, &st);
	assert_int_equal(st.failed, 0);
	assert_int_equal(st.durable, 8);
	assert_int_equal(st.rerouted, 4);
	/* the rail can be dialled again: back (with back-off) and carrying frames */
	rail1_back_carries(p, a, 20, seen);
	assert_int_equal(a->nf, 10);
	ing_producer_close(p, 0);
}

/* A rail's local link goes down (the session's port watch breaks it at once: "link down",
 * rdma_producer.c port_down) and, while it is down, a dial is refused ENETDOWN before any
 * connect request (conn_make): its frames in flight move to rail 0 at once, none fails, the
 * rail stays DOWN (not "unused": it is redialled with back-off), and when the link is back
 * the same running producer's new session on it carries frames again. */
static void test_link_down_rail_back(void **state)
{
	(void)state;
	node_reset(2, true);
	struct ing_producer *p = open_one();
	struct fsess *a = sess_of("rxe0"), *b = sess_of("rxe1");
	for (unsigned i = 0; i < 4; i++)
		submit(p, i, 1 << 20);
	assert_int_equal(b->nf, 2);
	N.refuse[1] = ENETDOWN;
	b->p.broken = true;
	snprintf(b->p.broken_msg, sizeof(b->p.broken_msg), "link down (rxe1 port 1: DOWN)");
	unsigned seen[256] = { 0 };
	struct ing_ack x[8];
	/* one poll: the broken session is gone, its 2 frames already on rail 0 (no ack needed) */
	assert_true(ing_producer_poll(p, x, 8, 0) >= 0);
	assert_false(b->live);
	assert_int_equal(a->nf, 4);
	struct ing_rail r1;
	for (int spin = 0; spin < 40; spin++)   /* several redials, each refused ENETDOWN */
		assert_true(ing_producer_poll(p, x, 8, 5) >= 0);
	rail_info(p, 1, &r1);
	assert_int_equal(r1.state, ING_RAIL_DOWN);
	assert_int_equal(r1.moved_away, 2);
	assert_int_equal(r1.downs, 1);
	assert_null(sess_of("rxe1"));
	ack_all(a);
	poll_acks(p, 4, seen);
	for (unsigned i = 0; i < 4; i++)
		assert_int_equal(seen[i], 1);
	/* the link is back: redialled by the running producer, and carrying frames */
	rail1_back_carries(p, a, 10, seen);
	struct ing_producer_stats st;
	ing_producer_get_stats(p, &st);
	assert_int_equal(st.failed, 0);
	assert_int_equal(st.durable, 8);
	ing_producer_close(p, 0);
}

/* the node answers BUSY for a frame on one rail (its RDMA connection down there): the frame
 * goes over the other rail, it does not fail */
static void test_busy_rail_moves_frame(void **state)
{
	(void)state;
	node_reset(2, true);
	struct ing_producer *p = open_one();
	struct fsess *a = sess_of("rxe0"), *b = sess_of("rxe1");
	submit(p, 1, 1 << 20);
	submit(p, 2, 1 << 20);
	assert_int_equal(b->nf, 1);
	struct ing_ack *x = &b->aq[b->aq_n++];
	memset(x, 0, sizeof(*x));
	memcpy(x->frame_id, b->fr[0].id, sizeof(x->frame_id));
	snprintf(x->wafer_id, sizeof(x->wafer_id), "w");
	x->code = ING_ERR_BUSY;
	x->retryable = 1;
	x->user = b->fr[0].user;
	b->fr[0].acked = true;
	b->inflight--;
	struct ing_ack out[4];
	assert_int_equal(ing_producer_poll(p, out, 4, 0), 0);   /* no failure */
	assert_int_equal(a->nf, 2);
	assert_string_equal(a->fr[1].id, b->fr[0].id);
	unsigned seen[256] = { 0 };
	ack_all(a);
	poll_acks(p, 2, seen);
	assert_int_equal(seen[1] + seen[2], 2);
	ing_producer_close(p, 0);
}

static void test_last_rail_lost_keeps_frames(void **state)
{
	(void)state;
	node_reset(2, true);
	struct ing_producer *p = open_one();
	struct fsess *a = sess_of("rxe0"), *b = sess_of("rxe1");
	for (unsigned i = 0; i < 4; i++)
		submit(p, i, 1 << 20);
	N.refuse_all = ECONNREFUSED;
	b->p.broken = true;
	snprintf(b->p.broken_msg, sizeof(b->p.broken_msg), "link down");
	struct ing_ack x[4];
	assert_true(ing_producer_poll(p, x, 4, 0) >= 0);
	a->p.broken = true;   /* the last rail: the node is lost, its frames wait */
	snprintf(a->p.broken_msg, sizeof(a->p.broken_msg), "link down");
	assert_int_equal(ing_producer_poll(p, x, 4, 0), 0);
	assert_false(a->live);
	N.refuse_all = 0;
	unsigned seen[256] = { 0 };
	struct fsess *n0 = NULL;
	for (int spin = 0; spin < 2000; spin++) {
		assert_int_equal(ing_producer_poll(p, x, 4, 5), 0);
		n0 = sess_of("rxe0");
		struct fsess *n1 = sess_of("rxe1");
		if (n0 && n1 && n0->nf + n1->nf == 4)
			break;
	}
	struct fsess *n1 = sess_of("rxe1");
	assert_non_null(n0);
	assert_non_null(n1);
	assert_int_equal(n0->nf + n1->nf, 4);   /* every frame re-sent, over the rails back */
	ack_all(n0);
	ack_all(n1);
	poll_acks(p, 4, seen);
	for (unsigned i = 0; i < 4; i++)
		assert_int_equal(seen[i], 1);
	ing_producer_close(p, 0);
}

static void test_one_rail_when(void **state)
{
	(void)state;
	struct ing_rail r;
	/* a node that does not honour NegotiateRequest.rail */
	node_reset(2, false);
	struct ing_producer *p = open_one();
	for (unsigned i = 0; i < 4; i++)
		submit(p, i, 1 << 20);
	assert_int_equal(sess_of("rxe0")->nf, 4);
	rail_info(p, 1, &r);
	assert_int_equal(r.state, ING_RAIL_UNUSED);
	assert_non_null(strstr(r.why, "does not honour NegotiateRequest.rail"));
	ing_producer_close(p, 0);

	/* a rail that no device of the list reaches (conn_make: EXDEV) */
	node_reset(2, true);
	N.refuse[1] = EXDEV;
	p = open_one();
	rail_info(p, 1, &r);
	assert_int_equal(r.state, ING_RAIL_UNUSED);
	for (unsigned i = 0; i < 4; i++)
		submit(p, i, 1 << 20);
	assert_int_equal(sess_of("rxe0")->nf, 4);
	ing_producer_close(p, 0);

	/* a node that lists no rails (before rails): one RDMA connection, no rail name */
	node_reset(0, true);
	struct ing_producer_opts o;
	producer_opts_defaults(&o);
	o.server = "node-a:1";
	o.transport = ING_TRANSPORT_RDMA;
	char err[128];
	assert_int_equal(ing_producer_open(&p, &o, err, sizeof(err)), 0);
	assert_int_equal(N.ns, 1);
	ing_producer_close(p, 0);

	/* a rail the node reports down: not dialled until its back-off, then asked again */
	node_reset(2, true);
	N.down[1] = true;
	p = open_one();
	rail_info(p, 1, &r);
	assert_int_equal(r.state, ING_RAIL_DOWN);
	assert_non_null(strstr(r.why, "link down"));
	N.down[1] = false;
	struct ing_ack x[4];
	for (int spin = 0; spin < 2000 && !sess_of("rxe1"); spin++)
		assert_true(ing_producer_poll(p, x, 4, 5) >= 0);
	rail_info(p, 1, &r);
	assert_int_equal(r.state, ING_RAIL_UP);
	ing_producer_close(p, 0);
}

/*
 * Striping's view of the rails (fleet_stripe_vias, fleet_rail_session): a frame of the rail 0
 * session names its own rail first, then rail 1's session; pull with each device's rkey,
 * push (every session negotiated RDMA WRITE) with none; a rail whose session cannot move
 * a part of that kind is left out; the session of a rail is found for a part's grant, and
 * none once that rail's session broke.
 */
static void test_stripe_vias(void **state)
{
	(void)state;
	node_reset(2, true);
	struct ing_producer *p = open_one();
	struct fsess *a = sess_of("rxe0"), *b = sess_of("rxe1");
	struct stripe_via_p v[8];
	assert_non_null(a);
	assert_non_null(b);
	/* pull */
	assert_int_equal(fleet_stripe_vias(&a->p, v, 8), 2);
	assert_int_equal(v[0].rail, 0);
	assert_int_equal(v[0].session, a->p.session_id);
	assert_int_equal(v[0].rkey, 0x100u + a->p.session_id);
	assert_int_equal(v[1].rail, 1);
	assert_int_equal(v[1].session, b->p.session_id);
	assert_int_equal(v[1].rkey, 0x100u + b->p.session_id);
	/* push: both sessions negotiated RDMA WRITE: the parts name the sessions, no rkey */
	a->p.push = b->p.push = true;
	assert_int_equal(fleet_stripe_vias(&a->p, v, 8), 2);
	assert_int_equal(v[0].session, a->p.session_id);
	assert_int_equal(v[1].rail, 1);
	assert_int_equal(v[1].session, b->p.session_id);
	assert_int_equal(v[1].rkey, 0);
	assert_int_equal(fleet_stripe_vias(&b->p, v, 8), 2);   /* rail 1's frame: rail 1 first */
	assert_int_equal(v[0].rail, 1);
	assert_int_equal(v[1].rail, 0);
	/* a part's grant on rail r goes to the session of rail r */
	assert_ptr_equal(fleet_rail_session(&a->p, 1), &b->p);
	assert_ptr_equal(fleet_rail_session(&a->p, 0), &a->p);
	assert_null(fleet_rail_session(&a->p, 2));
	/* a push frame is not striped over a pull session, nor over a broken one */
	b->p.push = false;
	assert_int_equal(fleet_stripe_vias(&a->p, v, 8), 1);
	b->p.push = true;
	b->p.broken = true;
	assert_int_equal(fleet_stripe_vias(&a->p, v, 8), 1);
	assert_null(fleet_rail_session(&a->p, 1));
	b->p.broken = false;
	ing_producer_close(p, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pick),
		cmocka_unit_test(test_spread_by_bytes),
		cmocka_unit_test(test_rail_lost_moves_frames),
		cmocka_unit_test(test_link_down_rail_back),
		cmocka_unit_test(test_busy_rail_moves_frame),
		cmocka_unit_test(test_last_rail_lost_keeps_frames),
		cmocka_unit_test(test_one_rail_when),
		cmocka_unit_test(test_stripe_vias),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
