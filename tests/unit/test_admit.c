/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_admit.c - control/service/admit.c: one admission queue for every transport. A real
 * pool (EAL --no-huge, 64 KiB and 1 MiB classes) and a real event loop (the queue runs at
 * its before_sleep); the requests are the ones the gRPC stream and RDMA READ transports
 * make, told apart by the session and peer they count against.
 *
 * The order tests fail against the old admission, where the RDMA READ path took a pool
 * slot directly (ing_pool_get, which lends larger classes) while a fallback frame waited:
 * a small frame then took the large slot the waiting large frame needed.
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

#include "common/clock.h"
#include "control/service/admit.h"
#include "test_eal.h"

#define SMALL (60u << 10)      /* class 0 (64 KiB) */
#define LARGE (900u << 10)     /* class 1 (1 MiB) only */

/* ---------------------------------------------------------------- fake transports */

/* One frame of a fake producer: its request, and the slot once admitted. */
struct tframe {
	struct admit_req r;
	struct ing_frame *f;
	const char *name;
	bool expired;
};

struct env {
	struct ing_loop *loop;
	struct ing_pool *pool;
	struct admit a;
	struct admit_credit grpc_sess, rdma_sess;   /* what admission counts per session */
	struct admit_share grpc_peer, rdma_peer;    /* and per peer address */
	char order[512];           /* names of frames as they are admitted */
};

static struct env *E;

static void note(struct tframe *t)
{
	strncat(E->order, t->name, sizeof(E->order) - strlen(E->order) - 2);
	strcat(E->order, " ");
}

/* What both transports do when their turn comes: try again; when admitted, note it. */
static void t_progress(struct admit_req *r, bool expired)
{
	struct tframe *t = r->owner;
	if (expired) {
		t->expired = true;
		return;
	}
	if (admit_try(&E->a, r, &t->f) == 0)
		note(t);
}

/* the two transports' frames: a fallback session and an RDMA session, each its own peer */
enum fake_xport { fake_grpc, fake_rdma };

static void frame_init(struct tframe *t, const char *name, enum fake_xport xp, uint64_t len)
{
	memset(t, 0, sizeof(*t));
	t->name = name;
	t->r.wake = t_progress;
	t->r.owner = t;
	t->r.length = len;
	t->r.credit = xp == fake_grpc ? &E->grpc_sess : &E->rdma_sess;
	t->r.share = xp == fake_grpc ? &E->grpc_peer : &E->rdma_peer;
}

/* A new frame asks once: 0 admitted, -EAGAIN queued. */
static int arrive(struct tframe *t, const char *name, enum fake_xport xp, uint64_t len)
{
	frame_init(t, name, xp, len);
	int rc = admit_try(&E->a, &t->r, &t->f);
	if (rc == 0)
		note(t);
	return rc;
}

static void done(struct tframe *t)
{
	assert_non_null(t->f);
	admit_put(&E->a, t->f, t->r.credit, t->r.share);
	t->f = NULL;
}

/* Run the loop a few turns: the queue runs at its before_sleep (bounded). */
static void settle(void)
{
	for (int i = 0; i < 20; i++)
		ing_loop_run_once(E->loop, 1);
}

/* ---------------------------------------------------------------- fixtures */

/* The pool: "64K:2,1M:1" in one region, or in each of two (NUMA nodes 0 and 1 as labels). */
static int env_make(void **state, unsigned nregions)
{
	static unsigned n;
	struct ing_pool_opts po;
	char name[32];

	E = calloc(1, sizeof(*E));
	if (!E)
		return -1;
	ing_pool_opts_init(&po);
	snprintf(name, sizeof(name), "tadmit%u", n++);
	po.name = name;
	po.hugepages = 0;
	if (ing_pool_parse_classes(&po, "64K:2,1M:1"))
		return -1;
	if (nregions > 1) {
		po.nregions = nregions;
		po.mbind = false;
		for (unsigned r = 0; r < nregions; r++)
			po.region_node[r] = (int)r;
	}
	E->pool = ing_pool_create(&po);
	E->loop = ing_loop_create();
	if (!E->pool || !E->loop)
		return -1;
	if (admit_init(&E->a, E->loop, E->pool, 0, 0))
		return -1;
	E->grpc_sess.credits = E->rdma_sess.credits = 16;
	*state = E;
	return 0;
}

static int env_setup(void **state)
{
	return env_make(state, 1);
}

static int env_setup_regions(void **state)
{
	return env_make(state, 2);
}

static int env_teardown(void **state)
{
	(void)state;
	admit_fini(&E->a);
	ing_loop_destroy(E->loop);
	ing_pool_destroy(E->pool);
	free(E);
	E = NULL;
	return 0;
}

/* ---------------------------------------------------------------- tests */

/* a frame of a rail: its slot must come from that rail's region */
static int arrive_in(struct tframe *t, const char *name, int region, uint64_t len)
{
	frame_init(t, name, region < 0 ? fake_grpc : fake_rdma, len);
	t->r.region = region;
	int rc = admit_try(&E->a, &t->r, &t->f);
	if (rc == 0)
		note(t);
	return rc;
}

/*
 * Pool regions (one per NUMA node that carries a rail): a rail's frame takes a slot of its
 * node's region only, and waits when that region is full even while another has room; a
 * frame waiting for one region's slot holds back nothing of another region; a fallback
 * frame (no region) takes any region, and waits behind every earlier waiter's classes.
 */
static void test_regions(void **state)
{
	(void)state;
	struct tframe big1, big1b, s0, s1, s1b, g;

	assert_int_equal(ing_pool_nregions(E->pool), 2);
	/* rail 1's large frame takes region 1's 1 MiB slot; its next one waits for it */
	assert_int_equal(arrive_in(&big1, "big1", 1, LARGE), 0);
	assert_int_equal(big1.f->region, 1);
	assert_int_equal(arrive_in(&big1b, "big1b", 1, LARGE), -EAGAIN);
	assert_int_equal(big1b.r.why, ADMIT_SLOT);
	/* region 0's 1 MiB slot is free: rail 1 must not take it, and rail 0 still may */
	assert_null(big1b.f);
	/* a small frame of rail 0 is not held back by rail 1's waiter (another region) */
	assert_int_equal(arrive_in(&s0, "s0", 0, SMALL), 0);
	assert_int_equal(s0.f->region, 0);
	/* a small frame of rail 1 is: the waiter keeps class 1 of region 1; class 0 is free */
	assert_int_equal(arrive_in(&s1, "s1", 1, SMALL), 0);
	assert_int_equal(s1.f->region, 1);
	assert_int_equal(s1.f->cls, 0);
	assert_int_equal(arrive_in(&s1b, "s1b", 1, SMALL), 0);
	/* region 1 holds no small slot any more, nor may it lend its large one: wait */
	struct tframe s1c;
	assert_int_equal(arrive_in(&s1c, "s1c", 1, SMALL), -EAGAIN);
	/* a fallback frame takes what any region has below the waiters' classes: region 0 */
	assert_int_equal(arrive_in(&g, "g", -1, SMALL), 0);
	assert_int_equal(g.f->region, 0);
	assert_int_equal(g.f->cls, 0);
	/* region 1's large slot comes back: its waiter (first in line) takes it */
	done(&big1);
	settle();
	assert_non_null(big1b.f);
	assert_int_equal(big1b.f->region, 1);
	assert_int_equal(big1b.f->cls, 1);
	assert_null(s1c.f);
	done(&s1);
	settle();
	assert_non_null(s1c.f);
	assert_int_equal(s1c.f->region, 1);
	assert_string_equal(E->order, "big1 s0 s1 s1b g big1b s1c ");
	done(&big1b);
	done(&s1b);
	done(&s1c);
	done(&s0);
	done(&g);
	settle();
	assert_null(E->a.head);
	assert_int_equal(ing_pool_free(E->pool), 6);
}

static void test_classes(void **state)
{
	(void)state;
	assert_int_equal(E->a.nclasses, 2);
	assert_int_equal(admit_class_of(&E->a, 1), 0);
	assert_int_equal(admit_class_of(&E->a, SMALL), 0);
	assert_int_equal(admit_class_of(&E->a, LARGE), 1);
	assert_int_equal(admit_class_of(&E->a, 2u << 20), 2);
	struct tframe t;
	assert_int_equal(arrive(&t, "huge", fake_grpc, 2u << 20), -EINVAL);
	assert_false(t.r.queued);
}

/*
 * A large fallback frame waits for the one 1 MiB slot while RDMA frames stream small
 * frames through the 64 KiB slots. When the large slot comes back, a small RDMA frame
 * that finds both small slots busy must not take it: the pool would lend it the 1 MiB
 * slot, and the old RDMA path did just that. The large frame gets it; the small frames
 * keep flowing through their own class, in their order.
 */
static void test_fcfs_large_fallback_vs_small_rdma(void **state)
{
	(void)state;
	struct tframe big0, big, s[8];

	assert_int_equal(arrive(&big0, "big0", fake_grpc, LARGE), 0);
	assert_int_equal(arrive(&s[0], "s0", fake_rdma, SMALL), 0);
	assert_int_equal(arrive(&s[1], "s1", fake_rdma, SMALL), 0);
	/* the pool is full: the large fallback frame waits for a slot */
	assert_int_equal(arrive(&big, "big", fake_grpc, LARGE), -EAGAIN);
	assert_int_equal(big.r.why, ADMIT_SLOT);
	/* its slot comes back; before the queue runs, a small RDMA frame arrives */
	done(&big0);
	assert_int_equal(ing_pool_free(E->pool), 1);
	assert_int_equal(arrive(&s[2], "s2", fake_rdma, SMALL), -EAGAIN);
	assert_null(s[2].f);
	settle();
	assert_non_null(big.f);
	assert_int_equal(big.f->cls, 1);
	assert_false(big.r.queued);
	assert_null(s[2].f);   /* still waiting for a small slot */
	/* the small stream goes on through class 0, oldest first */
	done(&s[0]);
	assert_int_equal(arrive(&s[3], "s3", fake_rdma, SMALL), -EAGAIN);
	settle();
	assert_non_null(s[2].f);
	assert_int_equal(s[2].f->cls, 0);
	assert_null(s[3].f);
	done(&s[1]);
	settle();
	assert_non_null(s[3].f);
	assert_string_equal(E->order, "big0 s0 s1 big s2 s3 ");
	done(&big);
	done(&s[2]);
	done(&s[3]);
	settle();
	assert_null(E->a.head);
	assert_int_equal(ing_pool_free(E->pool), 3);
	assert_int_equal(E->grpc_sess.inflight, 0);
	assert_int_equal(E->rdma_sess.inflight, 0);
}

/* The reverse: a large RDMA frame waits, small fallback frames must not overtake it. */
static void test_fcfs_large_rdma_vs_small_fallback(void **state)
{
	(void)state;
	struct tframe big0, big, s[4];

	assert_int_equal(arrive(&big0, "big0", fake_rdma, LARGE), 0);
	assert_int_equal(arrive(&s[0], "s0", fake_grpc, SMALL), 0);
	assert_int_equal(arrive(&s[1], "s1", fake_grpc, SMALL), 0);
	assert_int_equal(arrive(&big, "big", fake_rdma, LARGE), -EAGAIN);
	/* small frames queued before the large slot comes back stay behind the large one */
	assert_int_equal(arrive(&s[2], "s2", fake_grpc, SMALL), -EAGAIN);
	done(&big0);
	assert_int_equal(arrive(&s[3], "s3", fake_grpc, SMALL), -EAGAIN);
	settle();
	assert_non_null(big.f);
	assert_int_equal(big.f->cls, 1);
	assert_null(s[2].f);
	assert_null(s[3].f);
	done(&s[0]);
	settle();
	assert_non_null(s[2].f);
	assert_null(s[3].f);
	assert_string_equal(E->order, "big0 s0 s1 big s2 ");
	done(&s[1]);
	settle();
	assert_non_null(s[3].f);
	done(&big);
	done(&s[2]);
	done(&s[3]);
	settle();
	assert_int_equal(ing_pool_free(E->pool), 3);
}

/*
 * FCFS is per size class: a large frame waiting holds back only the classes it can use;
 * small frames keep using the free small slots meanwhile (no head-of-line blocking).
 */
static void test_small_class_not_blocked(void **state)
{
	(void)state;
	struct tframe big0, big, s0, s1;

	assert_int_equal(arrive(&big0, "big0", fake_grpc, LARGE), 0);
	assert_int_equal(arrive(&big, "big", fake_rdma, LARGE), -EAGAIN);
	assert_int_equal(arrive(&s0, "s0", fake_grpc, SMALL), 0);
	assert_int_equal(arrive(&s1, "s1", fake_rdma, SMALL), 0);
	assert_int_equal(s0.f->cls, 0);
	assert_int_equal(s1.f->cls, 0);
	/* a small frame queued for a slot does hold back a large one that comes after it
	 * (it could use the 1 MiB slot): first come, first served */
	struct tframe s2, big2;
	assert_int_equal(arrive(&s2, "s2", fake_grpc, SMALL), -EAGAIN);
	done(&big0);
	assert_int_equal(arrive(&big2, "big2", fake_grpc, LARGE), -EAGAIN);
	settle();
	assert_non_null(big.f);      /* oldest first: the large RDMA frame */
	assert_null(s2.f);
	assert_null(big2.f);
	done(&s0);
	settle();
	assert_non_null(s2.f);
	assert_null(big2.f);
	done(&big);
	settle();
	assert_non_null(big2.f);
	assert_string_equal(E->order, "big0 s0 s1 big s2 big2 ");
	done(&s1);
	done(&s2);
	done(&big2);
	settle();
	assert_int_equal(ing_pool_free(E->pool), 3);
}

/* A frame waiting for a credit of its own session blocks no other session's frames. */
static void test_credit_wait_blocks_nobody(void **state)
{
	(void)state;
	struct tframe a0, a1, b0;

	E->grpc_sess.credits = 1;
	assert_int_equal(arrive(&a0, "a0", fake_grpc, SMALL), 0);
	assert_int_equal(arrive(&a1, "a1", fake_grpc, LARGE), -EAGAIN);
	assert_int_equal(a1.r.why, ADMIT_CREDIT);
	assert_int_equal(arrive(&b0, "b0", fake_rdma, LARGE), 0);   /* takes the large slot */
	done(&a0);
	settle();
	assert_null(a1.f);               /* credit back, but no 1 MiB slot free */
	assert_int_equal(a1.r.why, ADMIT_SLOT);
	done(&b0);
	settle();
	assert_non_null(a1.f);
	done(&a1);
	E->grpc_sess.credits = 16;
	assert_int_equal(E->grpc_sess.inflight, 0);
}

/* Peer share: over it while another peer waits for a slot, a peer's frame waits. */
static void test_peer_share(void **state)
{
	(void)state;
	struct tframe g0, r0, r1, g1;

	E->a.max_slots_per_peer = 1;
	assert_int_equal(arrive(&g0, "g0", fake_grpc, SMALL), 0);
	assert_int_equal(arrive(&r0, "r0", fake_rdma, SMALL), 0);
	assert_int_equal(arrive(&r1, "r1", fake_rdma, LARGE), 0);   /* nobody waits: allowed */
	assert_int_equal(E->rdma_peer.slots, 2);
	assert_int_equal(arrive(&g1, "g1", fake_grpc, SMALL), -EAGAIN);
	assert_int_equal(g1.r.why, ADMIT_SLOT);
	assert_false(admit_peer_slot_ok(&E->a, &E->rdma_peer));
	done(&r0);
	settle();
	assert_non_null(g1.f);
	done(&g0);
	done(&g1);
	done(&r1);
	E->a.max_slots_per_peer = 0;
	assert_int_equal(E->rdma_peer.slots, 0);
	assert_int_equal(E->grpc_peer.slots, 0);
}

/* A cancelled request leaves the queue and stops holding back its classes. */
static void test_cancel(void **state)
{
	(void)state;
	struct tframe big0, big, s0, s1, s2;

	assert_int_equal(arrive(&big0, "big0", fake_grpc, LARGE), 0);
	assert_int_equal(arrive(&s0, "s0", fake_grpc, SMALL), 0);
	assert_int_equal(arrive(&s1, "s1", fake_grpc, SMALL), 0);
	assert_int_equal(arrive(&big, "big", fake_rdma, LARGE), -EAGAIN);
	done(&big0);
	admit_cancel(&E->a, &big.r);
	assert_false(big.r.queued);
	assert_int_equal(arrive(&s2, "s2", fake_rdma, SMALL), 0);   /* may borrow the 1 MiB slot */
	assert_int_equal(s2.f->cls, 1);
	settle();
	assert_null(big.f);
	done(&s0);
	done(&s1);
	done(&s2);
}

/* A request that waits longer than the wait timeout is handed back expired. */
static void test_expiry(void **state)
{
	(void)state;
	struct tframe big0, big;

	admit_fini(&E->a);
	assert_int_equal(admit_init(&E->a, E->loop, E->pool, 0, 20), 0);
	assert_int_equal(arrive(&big0, "big0", fake_grpc, LARGE), 0);
	assert_int_equal(arrive(&big, "big", fake_rdma, LARGE), -EAGAIN);
	uint64_t end = ing_now_ns() + 5000000000ull;   /* bound, not a timing assertion */
	while (!big.expired && ing_now_ns() < end)
		ing_loop_run_once(E->loop, 5);
	assert_true(big.expired);
	assert_false(big.r.queued);
	assert_null(E->a.head);
	assert_int_equal(E->a.c_expired, 1);
	done(&big0);
}

/* A queue that moves is waited out: the timeout counts from the last slot given back. */
static void test_expiry_counts_from_progress(void **state)
{
	(void)state;
	struct tframe big0, big, s0;

	admit_fini(&E->a);
	assert_int_equal(admit_init(&E->a, E->loop, E->pool, 0, 10000), 0);
	assert_int_equal(arrive(&big0, "big0", fake_grpc, LARGE), 0);
	assert_int_equal(arrive(&big, "big", fake_rdma, LARGE), -EAGAIN);
	big.r.since_ns -= 20000000000ull;              /* it has waited 20 s */
	assert_int_equal(arrive(&s0, "s0", fake_grpc, SMALL), 0);
	done(&s0);                                      /* ... but a slot came back just now */
	settle();
	assert_false(big.expired);
	assert_true(big.r.queued);
	E->a.last_put_ns -= 20000000000ull;            /* nothing came back for 20 s */
	admit_wake(&E->a);
	settle();
	assert_true(big.expired);
	assert_false(big.r.queued);
	done(&big0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_classes, env_setup, env_teardown),
		cmocka_unit_test_setup_teardown(test_fcfs_large_fallback_vs_small_rdma, env_setup, env_teardown),
		cmocka_unit_test_setup_teardown(test_fcfs_large_rdma_vs_small_fallback, env_setup, env_teardown),
		cmocka_unit_test_setup_teardown(test_small_class_not_blocked, env_setup, env_teardown),
		cmocka_unit_test_setup_teardown(test_credit_wait_blocks_nobody, env_setup, env_teardown),
		cmocka_unit_test_setup_teardown(test_peer_share, env_setup, env_teardown),
		cmocka_unit_test_setup_teardown(test_cancel, env_setup, env_teardown),
		cmocka_unit_test_setup_teardown(test_expiry, env_setup, env_teardown),
		cmocka_unit_test_setup_teardown(test_expiry_counts_from_progress, env_setup, env_teardown),
		cmocka_unit_test_setup_teardown(test_regions, env_setup_regions, env_teardown),
	};
	return cmocka_run_group_tests(tests, eal_setup, eal_teardown);
}
