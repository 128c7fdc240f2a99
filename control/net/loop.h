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
 * and timer due), in the order the hooks were added. fn returns the work it did (0:
 * none); a hook that did some may have made work for another, so the list runs again,
 * at most ING_LOOP_HOOK_PASSES times, and the loop polls without sleeping while work
 * remains. Embedded in its owner: adding allocates nothing.
 */
#define ING_LOOP_HOOK_PASSES 8
struct ing_loop_hook {
	int (*fn)(void *arg);
	void *arg;
	struct ing_loop_hook *next;
	bool added;
};
void ing_loop_hook_init(struct ing_loop_hook *h, int (*fn)(void *arg), void *arg);
void ing_loop_before_sleep(struct ing_loop *l, struct ing_loop_hook *h);   /* no-op if added */
void ing_loop_hook_del(struct ing_loop *l, struct ing_loop_hook *h);       /* no-op if not */

void ing_timer_init(struct ing_timer *t, ing_timer_cb cb, void *arg);
/* (Re)arm at an absolute CLOCK_MONOTONIC deadline. */
void ing_timer_arm(struct ing_loop *l, struct ing_timer *t, uint64_t deadline_ns);
void ing_timer_cancel(struct ing_loop *l, struct ing_timer *t);   /* no-op if not armed */
static inline bool ing_timer_armed(const struct ing_timer *t) { return t->heap_idx >= 0; }

/* Run the before_sleep list, wait up to timeout_ms (-1: until the next timer), dispatch.
 * Returns callbacks run (hooks that did work included) or -errno. */
int ing_loop_run_once(struct ing_loop *l, int timeout_ms);
/* Run until ing_loop_stop(). 0 or -errno. */
int ing_loop_run(struct ing_loop *l);
/* Loop thread: ing_loop_run returns after the current turn. */
void ing_loop_stop(struct ing_loop *l);
bool ing_loop_stopping(const struct ing_loop *l);

#endif
