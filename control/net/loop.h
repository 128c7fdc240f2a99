/* SPDX-License-Identifier: Apache-2.0 */
/*
 * loop.h - the control thread's single epoll event loop: fd callbacks, deadline timers and
 * a before_sleep list (Redis' beforesleep): work that is batched during a turn (sends,
 * unpauses, calls to finish) is flushed once, right before the loop sleeps.
 * Not thread-safe: everything here is called from the loop's own thread. Another thread
 * reaches the loop's owner through an fd the loop watches (the node: the control
 * thread's mailbox, dataplane/mbox.c), never through the loop itself.
 */
#ifndef ING_CONTROL_LOOP_H
#define ING_CONTROL_LOOP_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/epoll.h>

struct ing_loop;
typedef void (*ing_loop_fd_cb)(void *arg, uint32_t events);
typedef void (*ing_timer_cb)(void *arg);

/* Embed in the owner's object: arming allocates nothing. */
struct ing_timer {
	uint64_t deadline_ns; /* CLOCK_MONOTONIC (ing_now_ns) */
	ing_timer_cb cb;
	void *arg;
	int heap_idx;         /* -1 when not armed */
};

struct ing_loop *ing_loop_create(void);           /* NULL + log on error */
void ing_loop_destroy(struct ing_loop *l);        /* NULL ok */
/* events: EPOLLIN/EPOLLOUT/... (level-triggered). 0 or -errno. */
int ing_loop_add_fd(struct ing_loop *l, int fd, uint32_t events, ing_loop_fd_cb cb, void *arg);
int ing_loop_mod_fd(struct ing_loop *l, int fd, uint32_t events);
int ing_loop_del_fd(struct ing_loop *l, int fd);

/*
 * Work to do once per loop turn, right before the loop sleeps (after every fd callback
 * and timer due): a hook runs in a turn only if it was armed (ing_loop_hook_arm) since it
 * last ran, in the order the hooks were added, so an idle turn calls none. The owner arms
 * its hook where it batches work (a connection to flush, a call to finish, a waiter to
 * wake); a hook run may arm others (or itself again), so armed hooks run again, at most
 * ING_LOOP_HOOK_PASSES passes, and the loop polls without sleeping while one is still
 * armed. fn returns the work it did (0: none), counted in ing_loop_run_once's result.
 * Embedded in its owner: adding and arming allocate nothing.
 */
#define ING_LOOP_HOOK_PASSES 8
struct ing_loop_hook {
	int (*fn)(void *arg);
	void *arg;
	struct ing_loop_hook *next;
	bool added;
	bool armed;               /* runs before this turn's sleep */
};
void ing_loop_hook_init(struct ing_loop_hook *h, int (*fn)(void *arg), void *arg);
void ing_loop_before_sleep(struct ing_loop *l, struct ing_loop_hook *h);   /* no-op if added */
void ing_loop_hook_del(struct ing_loop *l, struct ing_loop_hook *h);       /* no-op if not */
/* Run h before this turn's sleep (no-op if armed; a hook not added never runs). */
static inline void ing_loop_hook_arm(struct ing_loop_hook *h) { h->armed = true; }

void ing_timer_init(struct ing_timer *t, ing_timer_cb cb, void *arg);
/* (Re)arm at an absolute CLOCK_MONOTONIC deadline. */
void ing_timer_arm(struct ing_loop *l, struct ing_timer *t, uint64_t deadline_ns);
static inline bool ing_timer_armed(const struct ing_timer *t) { return t->heap_idx >= 0; }
void ing_timer_remove(struct ing_loop *l, struct ing_timer *t);   /* armed t only */
static inline void ing_timer_cancel(struct ing_loop *l, struct ing_timer *t)   /* no-op if not armed */
{
	if (ing_timer_armed(t))
		ing_timer_remove(l, t);
}

/* Run the before_sleep list, wait up to timeout_ms (-1: until the next timer), dispatch.
 * Returns callbacks run (hooks that did work included) or -errno. */
int ing_loop_run_once(struct ing_loop *l, int timeout_ms);
/* Run until ing_loop_stop(). 0 or -errno. */
int ing_loop_run(struct ing_loop *l);
/* Loop thread: ing_loop_run returns after the current turn. */
void ing_loop_stop(struct ing_loop *l);
bool ing_loop_stopping(const struct ing_loop *l);

#endif
