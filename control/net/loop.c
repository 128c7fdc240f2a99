/* SPDX-License-Identifier: Apache-2.0 */
/*
 * loop.c - the control thread's event loop: one epoll set (level-triggered), a binary
 * min-heap of deadline timers embedded in their owners, and the before_sleep list. It has
 * no doorbell of its own: what other threads tell the control thread arrives in its
 * mailbox, whose eventfd is one of the loop's fds.
 *
 * fd registrations are small heap objects pointed to by epoll_event.data.ptr. A callback
 * may delete any fd (including its own) while a batch of events is being dispatched: the
 * registration is only marked dead and parked on a graveyard list that is freed after the
 * batch, so a stale event never reaches a freed owner nor a new owner of a reused fd number.
 *
 * The timer heap is preallocated (LOOP_HEAP_INIT slots) so arming a timer allocates
 * nothing; if an application ever arms more timers than that, the heap doubles once
 * (logged) rather than losing a deadline.
 */
#include "control/net/loop.h"
#include "common/clock.h"
#include "common/log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LOOP_HEAP_INIT 65536u  /* 256 conns x 256 calls; 512 KiB of pointers, touched lazily */
#define LOOP_BATCH 64

struct fdreg {
	int fd;
	bool dead;
	ing_loop_fd_cb cb;
	void *arg;
	struct fdreg *next_dead;
};

struct ing_loop {
	int epfd;
	bool stop;
	struct fdreg **fds;        /* indexed by fd number */
	unsigned nfds;
	struct fdreg *graveyard;
	struct ing_timer **heap;
	unsigned heap_len, heap_cap;
	struct ing_loop_hook *hooks, *hooks_tail;   /* before_sleep, in the order added */
};

struct ing_loop *ing_loop_create(void)
{
	struct ing_loop *l = calloc(1, sizeof(*l));
	if (!l) {
		ING_ERR("loop", "out of memory");
		return NULL;
	}
	l->epfd = -1;
	l->heap_cap = LOOP_HEAP_INIT;
	l->heap = calloc(l->heap_cap, sizeof(*l->heap));
	if (!l->heap) {
		ING_ERR("loop", "out of memory for the timer heap");
		goto fail;
	}
	l->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (l->epfd < 0) {
		ING_ERR("loop", "epoll_create1: %s", strerror(errno));
		goto fail;
	}
	return l;
fail:
	ing_loop_destroy(l);
	return NULL;
}

static void reap_graveyard(struct ing_loop *l)
{
	while (l->graveyard) {
		struct fdreg *r = l->graveyard;
		l->graveyard = r->next_dead;
		free(r);
	}
}

void ing_loop_destroy(struct ing_loop *l)
{
	if (!l)
		return;
	for (unsigned i = 0; i < l->nfds; i++)
		free(l->fds[i]);   /* owners close their own fds */
	free(l->fds);
	reap_graveyard(l);
	/* Timers still armed belong to owners that may be gone already: not touched. */
	free(l->heap);
	if (l->epfd >= 0)
		close(l->epfd);
	free(l);
}

static struct fdreg *lookup(struct ing_loop *l, int fd)
{
	if (fd < 0 || (unsigned)fd >= l->nfds)
		return NULL;
	return l->fds[fd];
}

int ing_loop_add_fd(struct ing_loop *l, int fd, uint32_t events, ing_loop_fd_cb cb, void *arg)
{
	if (fd < 0 || !cb)
		return -EINVAL;
	if (lookup(l, fd))
		return -EEXIST;
	if ((unsigned)fd >= l->nfds) {
		unsigned n = l->nfds ? l->nfds : 64;
		while (n <= (unsigned)fd)
			n *= 2;
		struct fdreg **nf = realloc(l->fds, n * sizeof(*nf));
		if (!nf)
			return -ENOMEM;
		memset(nf + l->nfds, 0, (n - l->nfds) * sizeof(*nf));
		l->fds = nf;
		l->nfds = n;
	}
	struct fdreg *r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->fd = fd;
	r->cb = cb;
	r->arg = arg;
	struct epoll_event ev = { .events = events, .data.ptr = r };
	if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
		int e = errno;
		free(r);
		return -e;
	}
	l->fds[fd] = r;
	return 0;
}

int ing_loop_mod_fd(struct ing_loop *l, int fd, uint32_t events)
{
	struct fdreg *r = lookup(l, fd);
	if (!r)
		return -ENOENT;
	struct epoll_event ev = { .events = events, .data.ptr = r };
	if (epoll_ctl(l->epfd, EPOLL_CTL_MOD, fd, &ev) < 0)
		return -errno;
	return 0;
}

int ing_loop_del_fd(struct ing_loop *l, int fd)
{
	struct fdreg *r = lookup(l, fd);
	if (!r)
		return -ENOENT;
	/* Closed fds leave the epoll set by themselves; ignore EBADF/ENOENT then. */
	(void)epoll_ctl(l->epfd, EPOLL_CTL_DEL, fd, NULL);
	l->fds[fd] = NULL;
	r->dead = true;
	r->next_dead = l->graveyard;
	l->graveyard = r;
	return 0;
}

/* ---------------------------------------------------------------- before_sleep */

void ing_loop_hook_init(struct ing_loop_hook *h, int (*fn)(void *arg), void *arg)
{
	h->fn = fn;
	h->arg = arg;
	h->next = NULL;
	h->added = false;
	h->armed = false;
}

void ing_loop_before_sleep(struct ing_loop *l, struct ing_loop_hook *h)
{
	if (h->added)
		return;
	h->added = true;
	h->next = NULL;
	if (l->hooks_tail)
		l->hooks_tail->next = h;
	else
		l->hooks = h;
	l->hooks_tail = h;
}

void ing_loop_hook_del(struct ing_loop *l, struct ing_loop_hook *h)
{
	struct ing_loop_hook *prev = NULL;

	if (!h->added)
		return;
	for (struct ing_loop_hook *x = l->hooks; x; prev = x, x = x->next) {
		if (x != h)
			continue;
		if (prev)
			prev->next = h->next;
		else
			l->hooks = h->next;
		if (l->hooks_tail == h)
			l->hooks_tail = prev;
		break;
	}
	h->added = false;
	h->armed = false;
	h->next = NULL;
}

/*
 * The armed hooks, again while a pass armed some (a flush may unpause a call whose input
 * then finishes another): *busy when one is still armed after the last allowed pass. A
 * hook may delete itself (its owner is going); the walk then goes on from the hook it was
 * linked to. A hook is disarmed before it runs, so it may arm itself again.
 */
static int run_hooks(struct ing_loop *l, bool *busy)
{
	int total = 0;

	*busy = false;
	for (unsigned pass = 0; pass < ING_LOOP_HOOK_PASSES; pass++) {
		bool ran = false;
		for (struct ing_loop_hook *h = l->hooks, *nx; h; h = nx) {
			nx = h->next;
			if (!h->armed)
				continue;
			h->armed = false;
			ran = true;
			total += h->fn(h->arg);
		}
		if (!ran)
			return total;
	}
	for (struct ing_loop_hook *h = l->hooks; h; h = h->next)
		*busy |= h->armed;
	return total;
}

/* ---------------------------------------------------------------- timers */

void ing_timer_init(struct ing_timer *t, ing_timer_cb cb, void *arg)
{
	t->deadline_ns = 0;
	t->cb = cb;
	t->arg = arg;
	t->heap_idx = -1;
}

static void heap_set(struct ing_loop *l, unsigned i, struct ing_timer *t)
{
	l->heap[i] = t;
	t->heap_idx = (int)i;
}

static void sift_up(struct ing_loop *l, unsigned i)
{
	struct ing_timer *t = l->heap[i];
	while (i > 0) {
		unsigned p = (i - 1) / 2;
		if (l->heap[p]->deadline_ns <= t->deadline_ns)
			break;
		heap_set(l, i, l->heap[p]);
		i = p;
	}
	heap_set(l, i, t);
}

static void sift_down(struct ing_loop *l, unsigned i)
{
	struct ing_timer *t = l->heap[i];
	for (;;) {
		unsigned c = 2 * i + 1;
		if (c >= l->heap_len)
			break;
		if (c + 1 < l->heap_len && l->heap[c + 1]->deadline_ns < l->heap[c]->deadline_ns)
			c++;
		if (t->deadline_ns <= l->heap[c]->deadline_ns)
			break;
		heap_set(l, i, l->heap[c]);
		i = c;
	}
	heap_set(l, i, t);
}

static void heap_remove(struct ing_loop *l, struct ing_timer *t)
{
	unsigned i = (unsigned)t->heap_idx;
	struct ing_timer *last = l->heap[--l->heap_len];
	t->heap_idx = -1;
	if (last == t)
		return;
	heap_set(l, i, last);
	if (i > 0 && l->heap[(i - 1) / 2]->deadline_ns > last->deadline_ns)
		sift_up(l, i);
	else
		sift_down(l, i);
}

void ing_timer_arm(struct ing_loop *l, struct ing_timer *t, uint64_t deadline_ns)
{
	if (t->heap_idx >= 0) {
		uint64_t old = t->deadline_ns;
		t->deadline_ns = deadline_ns;
		if (deadline_ns < old)
			sift_up(l, (unsigned)t->heap_idx);
		else
			sift_down(l, (unsigned)t->heap_idx);
		return;
	}
	if (l->heap_len == l->heap_cap) {
		/* Not expected in practice (see LOOP_HEAP_INIT); losing a deadline is worse. */
		struct ing_timer **nh = realloc(l->heap, 2 * l->heap_cap * sizeof(*nh));
		if (!nh) {
			ING_ERR("loop", "timer heap full (%u) and out of memory: timer not armed",
				l->heap_cap);
			return;
		}
		ING_WARN("loop", "timer heap grown to %u", 2 * l->heap_cap);
		l->heap = nh;
		l->heap_cap *= 2;
	}
	t->deadline_ns = deadline_ns;
	heap_set(l, l->heap_len++, t);
	sift_up(l, (unsigned)t->heap_idx);
}

void ing_timer_remove(struct ing_loop *l, struct ing_timer *t)
{
	heap_remove(l, t);
}

/* ---------------------------------------------------------------- running */

static int run_timers(struct ing_loop *l)
{
	uint64_t now = ing_now_ns();
	/* Bounded: a callback re-arming its timer at "now" runs again next round, not here. */
	unsigned budget = l->heap_len;
	int n = 0;
	while (budget-- && l->heap_len && l->heap[0]->deadline_ns <= now) {
		struct ing_timer *t = l->heap[0];
		heap_remove(l, t);
		t->cb(t->arg);
		n++;
	}
	return n;
}

int ing_loop_run_once(struct ing_loop *l, int timeout_ms)
{
	struct epoll_event evs[LOOP_BATCH];
	int wait_ms = timeout_ms;
	bool busy;
	int n = run_hooks(l, &busy);

	if (busy)
		wait_ms = 0;   /* work left over: look at the fds and timers, then come back */
	if (l->heap_len) {
		uint64_t now = ing_now_ns(), dl = l->heap[0]->deadline_ns;
		/* Round up so a timer never fires early; cap to avoid int overflow. */
		uint64_t ms = dl > now ? (dl - now + 999999) / 1000000 : 0;
		if (ms > 3600000)
			ms = 3600000;
		if (wait_ms < 0 || (uint64_t)wait_ms > ms)
			wait_ms = (int)ms;
	}
	if (l->stop)
		wait_ms = 0;

	int ne = epoll_wait(l->epfd, evs, LOOP_BATCH, wait_ms);
	if (ne < 0) {
		if (errno != EINTR)
			return -errno;
		ne = 0;
	}
	for (int i = 0; i < ne; i++) {
		struct fdreg *r = evs[i].data.ptr;
		if (r->dead)
			continue;
		r->cb(r->arg, evs[i].events);
		n++;
	}
	reap_graveyard(l);
	n += run_timers(l);
	return n;
}

int ing_loop_run(struct ing_loop *l)
{
	while (!l->stop) {
		int rc = ing_loop_run_once(l, -1);
		if (rc < 0)
			return rc;
	}
	bool busy;
	(void)run_hooks(l, &busy);   /* what the last turn batched still goes out */
	return 0;
}

void ing_loop_stop(struct ing_loop *l)
{
	l->stop = true;
}

bool ing_loop_stopping(const struct ing_loop *l)
{
	return l->stop;
}
