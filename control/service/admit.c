/* SPDX-License-Identifier: Apache-2.0 */
/*
 * admit.c - the admission layer (see admit.h): one queue of frames waiting for a credit
 * or a pool slot, whatever their transport, served first come first served per size class.
 */
#include "control/service/admit.h"
#include "common/clock.h"
#include "common/log.h"

#include <errno.h>
#include <string.h>

static void timer_cb(void *arg);
static int hook_cb(void *arg);

int admit_init(struct admit *a, struct ing_loop *loop, struct ing_pool *pool,
	       unsigned max_slots_per_peer, uint32_t wait_timeout_ms)
{
	memset(a, 0, sizeof(*a));
	a->loop = loop;
	a->pool = pool;
	a->max_slots_per_peer = max_slots_per_peer;
	a->wait_timeout_ns = (uint64_t)wait_timeout_ms * 1000000ull;
	ing_timer_init(&a->timer, timer_cb, a);
	ing_loop_hook_init(&a->hook, hook_cb, a);
	if (loop)
		ing_loop_before_sleep(loop, &a->hook);
	a->ready = true;
	if (!pool)
		return -EINVAL;
	a->nclasses = ing_pool_nclasses(pool);
	if (a->nclasses == 0 || a->nclasses > ING_POOL_MAX_CLASSES)
		return -EINVAL;
	for (unsigned c = 0; c < a->nclasses; c++) {
		unsigned total, nfree;
		if (ing_pool_class_stats(pool, c, &a->class_size[c], &total, &nfree))
			return -EINVAL;
	}
	return 0;
}

void admit_fini(struct admit *a)
{
	if (a->ready && a->loop) {
		ing_timer_cancel(a->loop, &a->timer);
		ing_loop_hook_del(a->loop, &a->hook);
	}
	a->head = a->tail = NULL;
	a->nqueued = 0;
}

unsigned admit_class_of(const struct admit *a, uint64_t len)
{
	unsigned c = 0;
	while (c < a->nclasses && a->class_size[c] < len)
		c++;
	return c;
}

static void queue_remove(struct admit *a, struct admit_req *r)
{
	if (!r->queued)
		return;
	if (r->prev)
		r->prev->next = r->next;
	else
		a->head = r->next;
	if (r->next)
		r->next->prev = r->prev;
	else
		a->tail = r->prev;
	r->next = r->prev = NULL;
	r->queued = false;
	r->why = ADMIT_NONE;
	a->nqueued--;
}

static void timer_arm(struct admit *a, uint64_t at)
{
	if (!a->loop)
		return;
	if (!ing_timer_armed(&a->timer) || a->timer.deadline_ns > at)
		ing_timer_arm(a->loop, &a->timer, at);
}

/*
 * A request expires after wait_timeout_ns with nothing given back meanwhile: a queue
 * that moves is waited out (the caller's own deadline still applies), a node that makes
 * no progress answers ERROR_BUSY instead of holding the caller for ever.
 */
static uint64_t wait_start(const struct admit *a, const struct admit_req *r)
{
	return r->since_ns > a->last_put_ns ? r->since_ns : a->last_put_ns;
}

/*
 * When the queue must be looked at again without a put or a cancel: the oldest request's
 * expiry, and a slow backstop for limits that change silently.
 */
static uint64_t next_check(const struct admit *a, uint64_t now)
{
	uint64_t at = now + ADMIT_BACKSTOP_NS;
	if (a->head && a->wait_timeout_ns && wait_start(a, a->head) + a->wait_timeout_ns < at)
		at = wait_start(a, a->head) + a->wait_timeout_ns;
	return at;
}

/* Queue r at the tail (a new ticket) or leave it where it is; it waits for `why`. */
static int wait_for(struct admit *a, struct admit_req *r, uint8_t why)
{
	r->why = why;
	if (r->queued)
		return -EAGAIN;
	r->ticket = ++a->tickets;
	r->since_ns = ing_now_ns();
	r->queued = true;
	r->next = NULL;
	r->prev = a->tail;
	if (a->tail)
		a->tail->next = r;
	else
		a->head = r;
	a->tail = r;
	a->nqueued++;
	a->c_waited++;
	timer_arm(a, next_check(a, r->since_ns));
	return -EAGAIN;
}

bool admit_peer_slot_ok(const struct admit *a, const struct admit_share *p)
{
	if (!p || !a->max_slots_per_peer || p->slots < a->max_slots_per_peer)
		return true;
	/* work-conserving: over its share only matters while another peer waits for a slot */
	for (const struct admit_req *w = a->head; w; w = w->next)
		if (w->share != p && w->why == ADMIT_SLOT)
			return false;
	return true;
}

int admit_try(struct admit *a, struct admit_req *r, struct ing_frame **out)
{
	struct admit_credit *cr = r->credit;

	*out = NULL;
	r->cls = (uint8_t)admit_class_of(a, r->length);
	if (r->cls >= a->nclasses) {
		admit_cancel(a, r);
		return -EINVAL;
	}
	if (cr && cr->inflight >= cr->credits)
		return wait_for(a, r, ADMIT_CREDIT);
	if (!admit_peer_slot_ok(a, r->share))
		return wait_for(a, r, ADMIT_PEER);
	/*
	 * First come, first served per size class: every request that waits for a slot ahead
	 * of r keeps the classes it could use (its own and the larger ones the pool would lend
	 * it) for itself; r may take only from the classes below all of them. A request held
	 * back by its peer's share is ahead of that peer's frames only.
	 */
	unsigned end[ING_POOL_MAX_REGIONS], nr = ing_pool_nregions(a->pool);
	uint64_t t = r->queued ? r->ticket : UINT64_MAX;
	for (unsigned g = 0; g < nr; g++)
		end[g] = a->nclasses;
	for (const struct admit_req *w = a->head; w && w->ticket < t; w = w->next) {
		if (w == r || !(w->why == ADMIT_SLOT || (w->why == ADMIT_PEER && w->share == r->share)))
			continue;
		/* per region: a waiter keeps the classes it could use of the regions it may take */
		for (unsigned g = 0; g < nr; g++)
			if ((w->region < 0 || w->region == (int)g) && w->cls < end[g])
				end[g] = w->cls;
	}
	struct ing_frame *f = NULL;
	if (r->region >= 0) {
		if ((unsigned)r->region < nr && end[r->region] > r->cls)
			f = ing_pool_get_in(a->pool, r->region, r->length, end[r->region]);
	} else {
		/* any region: the home region first (the control thread's node), then in order */
		unsigned home = ing_pool_home_region(a->pool);
		for (unsigned k = 0; k < nr && !f; k++) {
			unsigned g = k == 0 ? home : k <= home ? k - 1 : k;
			if (end[g] > r->cls)
				f = ing_pool_get_in(a->pool, (int)g, r->length, end[g]);
		}
	}
	if (!f)
		return wait_for(a, r, ADMIT_SLOT);
	queue_remove(a, r);
	if (cr)
		cr->inflight++;
	if (r->share)
		r->share->slots++;
	*out = f;
	return 0;
}

void admit_cancel(struct admit *a, struct admit_req *r)
{
	bool was = r->queued;
	queue_remove(a, r);
	if (was)
		admit_wake(a);   /* it may have held back classes others can use now */
}

void admit_put(struct admit *a, struct ing_frame *f, struct admit_credit *credit,
	       struct admit_share *share)
{
	a->last_put_ns = ing_now_ns();
	if (credit && credit->inflight)
		credit->inflight--;
	if (share && share->slots)
		share->slots--;
	admit_wake(a);
	if (f)
		ing_pool_put(f);
}

void admit_wake(struct admit *a)
{
	if (a->in_run) {
		a->run_again = true;
		return;
	}
	if (a->head) {
		a->due = true;   /* at this turn's before_sleep */
		ing_loop_hook_arm(&a->hook);
	}
}

/*
 * Retry the queue oldest first. Each request is visited once per run: progress() may
 * admit it, leave it queued (same ticket), or queue its owner's next frame with a new
 * ticket (visited on the next run), and may cancel others; so the walk restarts from the
 * head each time, at the first request it has not visited.
 */
static void run(struct admit *a)
{
	uint64_t now = ing_now_ns(), done = 0, last = a->tickets;

	a->in_run = true;
	a->run_again = false;
	for (;;) {
		struct admit_req *r = a->head;
		while (r && r->ticket <= done)
			r = r->next;
		if (!r || r->ticket > last)
			break;
		done = r->ticket;
		bool expired = a->wait_timeout_ns && now >= wait_start(a, r) + a->wait_timeout_ns;
		if (expired) {
			queue_remove(a, r);
			a->c_expired++;
		}
		r->wake(r, expired);
	}
	a->in_run = false;
	if (a->run_again) {
		a->due = true;
		ing_loop_hook_arm(&a->hook);
	}
	else if (a->head)
		timer_arm(a, next_check(a, ing_now_ns()));
}

/* The recheck or an expiry: run now. */
static void timer_cb(void *arg)
{
	run(arg);
}

/* before_sleep: one run per turn when something came back (admit_wake). */
static int hook_cb(void *arg)
{
	struct admit *a = arg;
	if (!a->due)
		return 0;
	a->due = false;
	run(a);
	return 1;
}
