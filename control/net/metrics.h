/* SPDX-License-Identifier: Apache-2.0 */
/*
 * metrics.h - Prometheus text exposition (format 0.0.4) over a tiny HTTP/1.1 responder on
 * the control thread's loop (ingestd --metrics-listen). It never runs on a dataplane lcore:
 * a scrape reads counters the way Stats does, and the page is built on the control thread
 * (which may allocate; it is not the hot path).
 *
 * HTTP: GET or HEAD /metrics -> 200 text/plain; version=0.0.4 (the render callback's
 * families, then process_* and the scrape counter); /healthz -> 200 "ok" whenever the
 * control loop answers (process alive, loop turning); /readyz -> 200 or 503 with one line
 * per check (ing_metrics_srv_set_ready). Other paths 404, other methods 405, a malformed
 * or over-long (> 4 KiB) request 400. One request per connection (Connection: close), at
 * most ING_METRICS_MAX_CONNS at once, each closed after 10 s.
 * Everything here runs on the loop's thread.
 */
#ifndef ING_CONTROL_METRICS_H
#define ING_CONTROL_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/hist.h"
#include "control/net/loop.h"

#define ING_METRICS_MAX_CONNS 16

/* A growing text buffer for one page. */
struct ing_mtext {
	char *buf;
	size_t len, cap;
	int err;             /* -ENOMEM once an append failed (the page is then a 500) */
};
void ing_mtext_printf(struct ing_mtext *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* "# HELP name help\n# TYPE name type\n" */
void ing_mtext_family(struct ing_mtext *t, const char *name, const char *type, const char *help);
/* One sample: name{labels} value (labels "" for none; a value in base units). */
void ing_mtext_sample(struct ing_mtext *t, const char *name, const char *labels, double v);
void ing_mtext_u64(struct ing_mtext *t, const char *name, const char *labels, uint64_t v);
/* A histogram's series (cumulative _bucket{le=...}, _sum in seconds, _count); labels is
 * a prefix like `stage="durable"` or "" (the family line is the caller's). */
void ing_mtext_hist(struct ing_mtext *t, const char *name, const char *labels,
		    const struct ing_hist *h);

/*
 * Families with one sample per row of a table (a dataplane lcore, an RDMA rail): the
 * table's columns say each family's name, type and help and where its value is in a row
 * (ING_MTEXT_U64 / ING_MTEXT_DBL: the field of the row's struct, checked for its type).
 * ing_mtext_rows writes each column's family, then its sample of every row in row order,
 * labelled by the row's label string (the char array at label_off, e.g. `lcore="3"`).
 */
struct ing_mtext_col {
	const char *name, *type, *help;
	size_t off;          /* the value's offset in a row */
	bool dbl;            /* a double (ing_mtext_sample), else a uint64_t (ing_mtext_u64) */
};
#define ING_MTEXT_U64(row_type, field) \
	.off = offsetof(row_type, field) + 0 * sizeof(_Generic(((row_type *)0)->field, uint64_t: 1)), \
	.dbl = false
#define ING_MTEXT_DBL(row_type, field) \
	.off = offsetof(row_type, field) + 0 * sizeof(_Generic(((row_type *)0)->field, double: 1)), \
	.dbl = true
void ing_mtext_rows(struct ing_mtext *t, const struct ing_mtext_col *cols, size_t ncols,
		    const void *rows, size_t row_size, size_t nrows, size_t label_off);

/* Fills t with the whole page (all families). */
typedef void (*ing_metrics_render_fn)(void *arg, struct ing_mtext *t);

struct ing_metrics_srv;
/*
 * Listen on addr (host:port or [v6]:port; port 0: pick one) and serve render's page.
 * NULL + log on error. Loop thread.
 */
struct ing_metrics_srv *ing_metrics_srv_create(struct ing_loop *loop, const char *addr,
					       ing_metrics_render_fn render, void *arg);
int ing_metrics_srv_port(const struct ing_metrics_srv *s);
/*
 * /readyz: fn appends one line per check ("ok ..." or "not ready: ...") to body and
 * returns true when every check passed (200), false otherwise (503). Without fn, /readyz
 * answers like /healthz. arg: the render callback's. Loop thread.
 */
typedef bool (*ing_metrics_ready_fn)(void *arg, struct ing_mtext *body);
void ing_metrics_srv_set_ready(struct ing_metrics_srv *s, ing_metrics_ready_fn fn);
/* The standard process_* families (cpu seconds, resident and virtual memory, open and
 * maximum fds, start time) of the calling process, from /proc/self. */
void ing_mtext_process(struct ing_mtext *t);
/* Close the listener and every connection. NULL ok. */
void ing_metrics_srv_destroy(struct ing_metrics_srv *s);

#endif
