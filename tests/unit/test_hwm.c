/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_hwm.c - dataplane/hwm.h, the local high-water mark's count: every order in which
 * persistence inserts a frame's row, the tier measures the catalog and control finishes
 * the frame, each order made explicit (no threads, no timing). At every step what control
 * sees (used + its pending bytes) must be what the catalog holds plus the frames admitted
 * and not yet in it: exact, never a frame twice (a refusal too early, func.ops.prune under
 * load) nor one missing (the mark exceeded).
 */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "dataplane/hwm.h"

enum ev { ADMIT, COMMIT, FINISH, MEASURE };

struct frame {
	uint64_t len;
	bool fails;             /* persistence inserts no row: control finishes it failed */
	unsigned next;          /* its next event: ADMIT, COMMIT (not if it fails), FINISH */
	bool admitted, in_catalog, finished;
};

struct world {
	struct ing_hwm h;
	uint64_t catalog;       /* the catalog's count of local bytes (what the tier measures) */
	uint64_t pending;       /* control: admitted, not finished */
	struct frame fr[3];
	unsigned measures_left;
	unsigned orders, steps;
};

/* what is truly used or on its way: the catalog, and the frames admitted and not in it */
static uint64_t truth(const struct world *w)
{
	uint64_t t = w->catalog;
	for (unsigned i = 0; i < 3; i++)
		if (w->fr[i].admitted && !w->fr[i].in_catalog && !w->fr[i].finished)
			t += w->fr[i].len;
	return t;
}

static void check(struct world *w, const char *trail)
{
	uint64_t seen = ing_hwm_used(&w->h) + w->pending;
	if (seen != truth(w))
		fail_msg("after %s: counted %" PRIu64 ", truly %" PRIu64, trail, seen, truth(w));
	w->steps++;
}

static void apply(struct world *w, int i, char *trail, size_t n)
{
	size_t l = strlen(trail);
	if (i < 0) {                   /* the tier: a measure and what was inserted by then */
		ing_hwm_measure_begin(&w->h);
		uint64_t m = w->catalog;
		ing_hwm_measure_end(&w->h, m);
		w->measures_left--;
		snprintf(trail + l, n - l, " M");
		return;
	}
	struct frame *f = &w->fr[i];
	switch (f->next) {
	case ADMIT:                    /* control */
		f->admitted = true;
		w->pending += f->len;
		f->next = f->fails ? FINISH : COMMIT;
		snprintf(trail + l, n - l, " A%d", i);
		break;
	case COMMIT:                   /* persistence: the row and its count, one step */
		ing_hwm_commit_begin(&w->h);
		w->catalog += f->len;
		f->in_catalog = true;
		ing_hwm_commit_end(&w->h, f->len);
		f->next = FINISH;
		snprintf(trail + l, n - l, " C%d", i);
		break;
	default:                       /* control, after persistence's answer */
		w->pending -= f->len;
		f->finished = true;
		ing_hwm_finished(&w->h, f->len, f->in_catalog);
		f->next = MEASURE;     /* done */
		snprintf(trail + l, n - l, " F%d", i);
		break;
	}
}

/* every interleaving of the frames' events and the measures, depth first */
static void walk(const struct world *w0, const char *trail0)
{
	bool any = false;
	for (int i = -1; i < 3; i++) {
		if (i < 0 ? !w0->measures_left : w0->fr[i].next == MEASURE)
			continue;
		any = true;
		struct world w = *w0;    /* the mutex is unlocked here: a plain copy is a fresh one */
		char trail[128];
		snprintf(trail, sizeof(trail), "%s", trail0);
		apply(&w, i, trail, sizeof(trail));
		check(&w, trail);
		walk(&w, trail);
		((struct world *)w0)->steps += w.steps - w0->steps;
		((struct world *)w0)->orders += w.orders - w0->orders;
	}
	if (!any)
		((struct world *)w0)->orders++;
}

static void every_order_counts_each_frame_once(void **state)
{
	(void)state;
	struct world w;
	memset(&w, 0, sizeof(w));
	ing_hwm_init(&w.h);
	/* the catalog holds frames from before: the first measure finds them */
	w.catalog = 5000;
	w.fr[0] = (struct frame){ .len = 100, .next = ADMIT };
	w.fr[1] = (struct frame){ .len = 30, .next = ADMIT };
	w.fr[2] = (struct frame){ .len = 7, .fails = true, .next = ADMIT };
	w.measures_left = 3;
	ing_hwm_measure_begin(&w.h);
	ing_hwm_measure_end(&w.h, w.catalog);
	check(&w, "the start's measure");
	walk(&w, "");
	print_message("%u orders, %u steps checked\n", w.orders, w.steps);
	/* 3 frames (3 + 3 + 2 events) and 3 measures: 11! / (3! 3! 2! 3!) orders */
	assert_int_equal(w.orders, 92400);
	ing_hwm_destroy(&w.h);
}

/* the order of the defect (func.ops.prune under load): the row is in the catalog and the
 * tier measures before control has finished the frame; then control finishes it */
static void stored_before_measure_then_finished(void **state)
{
	(void)state;
	struct world w;
	memset(&w, 0, sizeof(w));
	ing_hwm_init(&w.h);
	w.fr[0] = (struct frame){ .len = 1u << 20, .next = ADMIT };
	w.measures_left = 2;
	char trail[64] = "";
	apply(&w, 0, trail, sizeof(trail));   /* A0 */
	apply(&w, 0, trail, sizeof(trail));   /* C0 */
	apply(&w, -1, trail, sizeof(trail));  /* M */
	check(&w, trail);
	assert_int_equal(ing_hwm_used(&w.h) + w.pending, 1u << 20);
	apply(&w, 0, trail, sizeof(trail));   /* F0 */
	check(&w, trail);
	assert_int_equal(ing_hwm_used(&w.h), 1u << 20);
	apply(&w, -1, trail, sizeof(trail));  /* M */
	assert_int_equal(ing_hwm_used(&w.h), 1u << 20);
	ing_hwm_destroy(&w.h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(stored_before_measure_then_finished),
		cmocka_unit_test(every_order_counts_each_frame_once),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
