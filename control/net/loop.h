/* SPDX-License-Identifier: Apache-2.0 */
/*
 * loop.h - the control thread's single epoll event loop: fd callbacks and deadline timers.
 * Not thread-safe: everything here is called from the loop's own thread, except
 * ing_loop_wake() which any thread may call.
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

void ing_timer_init(struct ing_timer *t, ing_timer_cb cb, void *arg);
/* (Re)arm at an absolute CLOCK_MONOTONIC deadline. */
void ing_timer_arm(struct ing_loop *l, struct ing_timer *t, uint64_t deadline_ns);
void ing_timer_cancel(struct ing_loop *l, struct ing_timer *t);   /* no-op if not armed */
static inline bool ing_timer_armed(const struct ing_timer *t) { return t->heap_idx >= 0; }

/* Wait up to timeout_ms (-1: until the next timer), dispatch. Returns callbacks run or -errno. */
int ing_loop_run_once(struct ing_loop *l, int timeout_ms);
/* Run until ing_loop_stop(). 0 or -errno. */
int ing_loop_run(struct ing_loop *l);
void ing_loop_stop(struct ing_loop *l);   /* loop thread or signal-safe via wake */
void ing_loop_wake(struct ing_loop *l);   /* any thread: interrupt a sleeping run_once */
bool ing_loop_stopping(const struct ing_loop *l);

#endif
