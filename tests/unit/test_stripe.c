/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_stripe.c - the split of a striped frame into per-rail parts and their assembly
 * (common/stripe.c): parts tile the frame exactly (even and uneven lengths, 1 B .. 64 MiB,
 * 1..8 rails), the 1-rail degenerate case, a frame too short for every rail, the checks of
 * parts a producer sent, completion once every part is in (never twice), and a lost rail
 * whose parts (only those not in yet) are re-moved alone on the surviving rails; the
 * producer's decision (its own threshold and the node's).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <ingest/producer.h>

#include "common/stripe.h"

#define MIB (1ull << 20)

/* The parts tile [0, len): in order, contiguous, non-empty, the last ending at len. */
static void assert_tiles(const struct ing_stripe *s, uint64_t len)
{
	uint64_t off = 0;
	assert_true(s->nparts >= 1 && s->nparts <= ING_STRIPE_MAX_PARTS);
	assert_int_equal(s->length, len);
	for (unsigned i = 0; i < s->nparts; i++) {
		assert_int_equal(s->part[i].off, off);
		assert_true(s->part[i].len > 0);
		if (i + 1 < s->nparts)  /* every boundary inside the frame is on a page */
			assert_int_equal((s->part[i].off + s->part[i].len) % ING_STRIPE_ALIGN, 0);
		off += s->part[i].len;
	}
	assert_int_equal(off, len);
}

static void test_wanted(void **state)
{
	(void)state;
	assert_true(ing_stripe_wanted(64 * MIB, ING_STRIPE_DEFAULT_MIN, 2));
	assert_true(ing_stripe_wanted(8 * MIB, 8 * MIB, 2));       /* at the threshold */
	assert_false(ing_stripe_wanted(8 * MIB - 1, 8 * MIB, 2));  /* below it */
	assert_false(ing_stripe_wanted(64 * MIB, 8 * MIB, 1));     /* one rail: whole */
	assert_false(ing_stripe_wanted(64 * MIB, 0, 2));           /* 0: off */
}

/* The producer's own threshold (opts.stripe_min) and the node's (NegotiateReply.stripeMin):
 * a frame goes striped only when it reaches both and the node takes striped frames. */
static void test_decide(void **state)
{
	(void)state;
	/* the producer's default (0: 8 MiB) under a node that stripes from 1 MiB */
	assert_true(ing_stripe_decide(8 * MIB, 0, 1 * MIB, 2));
	assert_false(ing_stripe_decide(8 * MIB - 1, 0, 1 * MIB, 2));
	assert_true(ing_stripe_decide(64 * MIB, 0, 8 * MIB, 2));
	/* the producer's own lower threshold: the node's still binds */
	assert_true(ing_stripe_decide(2 * MIB, 2 * MIB, 1 * MIB, 2));
	assert_false(ing_stripe_decide(2 * MIB, 1 * MIB, 4 * MIB, 2));
	assert_true(ing_stripe_decide(4 * MIB, 1 * MIB, 4 * MIB, 2));
	/* the producer's higher threshold binds over the node's */
	assert_false(ing_stripe_decide(16 * MIB, 32 * MIB, 8 * MIB, 2));
	assert_true(ing_stripe_decide(32 * MIB, 32 * MIB, 8 * MIB, 2));
	/* the node takes no striped frame (stripeMin 0): never, whatever the producer says */
	assert_false(ing_stripe_decide(64 * MIB, 0, 0, 2));
	assert_false(ing_stripe_decide(64 * MIB, 1, 0, 2));
	/* the producer's "never" (ingest-send --stripe-min 0), even for the largest frame */
	assert_int_equal(ING_STRIPE_OFF, UINT64_MAX);
	assert_false(ing_stripe_decide(64 * MIB, ING_STRIPE_OFF, 1, 2));
	assert_false(ing_stripe_decide(UINT64_MAX - 1, ING_STRIPE_OFF, 1, 8));
	/* one rail: whole */
	assert_false(ing_stripe_decide(64 * MIB, 0, 8 * MIB, 1));
}

static void test_split_even(void **state)
{
	struct ing_stripe s;
	const uint8_t rails[] = { 0, 1 };
	(void)state;

	assert_int_equal(ing_stripe_split(&s, 64 * MIB, rails, 2, 0), 2);
	assert_tiles(&s, 64 * MIB);
	assert_int_equal(s.part[0].len, 32 * MIB);
	assert_int_equal(s.part[1].len, 32 * MIB);
	assert_int_equal(s.part[0].rail, 0);
	assert_int_equal(s.part[1].rail, 1);
	assert_int_equal(ing_stripe_rail_bytes(&s, 0), 32 * MIB);
	assert_int_equal(ing_stripe_rail_bytes(&s, 1), 32 * MIB);
	assert_false(ing_stripe_complete(&s));
}

static void test_split_uneven(void **state)
{
	struct ing_stripe s;
	const uint8_t rails[] = { 3, 1, 0, 2, 4, 5, 6, 7 };
	const uint64_t lens[] = { 1, 4095, 4096, 4097, 3 * 4096 + 1, 8 * MIB - 1, 8 * MIB + 5,
				  33 * MIB + 12345, 64 * MIB - 4096, 64 * MIB, 64 * MIB + 1 };
	(void)state;

	for (unsigned n = 1; n <= ING_STRIPE_MAX_PARTS; n++) {
		for (size_t k = 0; k < sizeof(lens) / sizeof(lens[0]); k++) {
			int r = ing_stripe_split(&s, lens[k], rails, n, 0);
			assert_true(r >= 1 && (unsigned)r <= n);
			assert_int_equal((unsigned)r, s.nparts);
			assert_tiles(&s, lens[k]);
			/* rails in the order given; no part larger than the first (the shares
			 * differ by the last one's remainder only) */
			for (unsigned i = 0; i < s.nparts; i++) {
				assert_int_equal(s.part[i].rail, rails[i]);
				assert_true(s.part[i].len <= s.part[0].len);
				assert_int_equal(s.part[i].state, ING_PART_MOVING);
				assert_int_equal(s.part[i].moves, 1);
			}
			/* a frame long enough for every rail to get a page gets every rail */
			if (lens[k] >= (uint64_t)n * ING_STRIPE_ALIGN)
				assert_int_equal(s.nparts, n);
		}
	}
	/* 3 rails, 8 MiB + 5: shares rounded up to a page, the remainder on the last */
	assert_int_equal(ing_stripe_split(&s, 8 * MIB + 5, rails, 3, 0), 3);
	assert_int_equal(s.part[0].len, 683 * 4096ull);
	assert_int_equal(s.part[1].len, 683 * 4096ull);
	assert_int_equal(s.part[2].len, 8 * MIB + 5 - 2 * 683 * 4096ull);
	/* a frame shorter than the rails' pages: fewer parts */
	assert_int_equal(ing_stripe_split(&s, 4097, rails, 4, 0), 2);
	assert_int_equal(s.part[0].len, 4096);
	assert_int_equal(s.part[1].len, 1);
	/* another alignment (1 MiB: every part whole READ chunks) */
	assert_int_equal(ing_stripe_split(&s, 10 * MIB + 7, rails, 3, MIB), 3);
	assert_int_equal(s.part[0].len, 4 * MIB);
	assert_int_equal(s.part[1].len, 4 * MIB);
	assert_int_equal(s.part[2].len, 2 * MIB + 7);
}

static void test_split_one_rail(void **state)
{
	struct ing_stripe s;
	const uint8_t rail = 1;
	(void)state;

	assert_int_equal(ing_stripe_split(&s, 64 * MIB, &rail, 1, 0), 1);
	assert_tiles(&s, 64 * MIB);
	assert_int_equal(s.part[0].rail, 1);
	assert_int_equal(ing_stripe_part_in(&s, 0), 1);
	assert_true(ing_stripe_complete(&s));
}

static void test_split_bad(void **state)
{
	struct ing_stripe s;
	uint8_t rails[ING_STRIPE_MAX_PARTS + 1] = { 0 };
	(void)state;

	assert_int_equal(ing_stripe_split(&s, 0, rails, 2, 0), -EINVAL);
	assert_int_equal(ing_stripe_split(&s, MIB, rails, 0, 0), -EINVAL);
	assert_int_equal(ing_stripe_split(&s, MIB, NULL, 2, 0), -EINVAL);
	assert_int_equal(ing_stripe_split(&s, MIB, rails, ING_STRIPE_MAX_PARTS + 1, 0), -EINVAL);
	assert_int_equal(ing_stripe_split(&s, MIB, rails, 2, 3000), -EINVAL);
	assert_int_equal(ing_stripe_split(NULL, MIB, rails, 2, 0), -EINVAL);
}

static void test_assembly(void **state)
{
	struct ing_stripe s;
	const uint8_t rails[] = { 0, 1, 2 };
	(void)state;

	assert_int_equal(ing_stripe_split(&s, 24 * MIB, rails, 3, 0), 3);
	/* parts come in any order; the frame is complete on the last, once */
	assert_int_equal(ing_stripe_part_in(&s, 2), 0);
	assert_int_equal(ing_stripe_part_in(&s, 0), 0);
	assert_false(ing_stripe_complete(&s));
	assert_int_equal(ing_stripe_part_in(&s, 0), -EINVAL);   /* twice: refused, not counted */
	assert_int_equal(s.nin, 2);
	assert_int_equal(ing_stripe_part_in(&s, 3), -EINVAL);   /* no such part */
	assert_int_equal(ing_stripe_part_in(&s, 1), 1);
	assert_true(ing_stripe_complete(&s));
	assert_int_equal(ing_stripe_part_in(&s, 1), -EINVAL);
}

/* A rail lost mid-frame: its parts not in yet move to the surviving rails, alone. */
static void test_rail_lost(void **state)
{
	struct ing_stripe s;
	const uint8_t rails[] = { 0, 1 };
	uint32_t moved = 0xffffffffu;
	(void)state;

	/* 2 rails, rail 1 lost before its part came in: only part 1 moves, to rail 0 */
	assert_int_equal(ing_stripe_split(&s, 64 * MIB, rails, 2, 0), 2);
	assert_int_equal(ing_stripe_part_in(&s, 0), 0);
	const uint8_t up0[] = { 0 };
	assert_int_equal(ing_stripe_rail_lost(&s, 1, up0, 1, &moved), 1);
	assert_int_equal(moved, 1u << 1);
	assert_int_equal(s.part[1].rail, 0);
	assert_int_equal(s.part[1].moves, 2);
	assert_int_equal(s.part[0].moves, 1);          /* part 0 was in: not moved again */
	assert_int_equal(s.part[0].state, ING_PART_IN);
	assert_int_equal(ing_stripe_rail_bytes(&s, 0), 64 * MIB);
	assert_int_equal(ing_stripe_rail_bytes(&s, 1), 0);
	assert_int_equal(ing_stripe_part_in(&s, 1), 1);
	assert_true(ing_stripe_complete(&s));

	/* a rail lost after its part came in: nothing moves */
	assert_int_equal(ing_stripe_split(&s, 64 * MIB, rails, 2, 0), 2);
	assert_int_equal(ing_stripe_part_in(&s, 1), 0);
	assert_int_equal(ing_stripe_rail_lost(&s, 1, up0, 1, &moved), 0);
	assert_int_equal(moved, 0);
	assert_int_equal(s.part[1].rail, 1);

	/* 4 rails, rail 2 carries two parts (a part moved there before): both move, spread
	 * over the surviving rails; the list of rails up may still name the lost one */
	const uint8_t r4[] = { 0, 1, 2, 3 };
	assert_int_equal(ing_stripe_split(&s, 16 * MIB, r4, 4, 0), 4);
	const uint8_t up3[] = { 0, 2, 1 };
	assert_int_equal(ing_stripe_rail_lost(&s, 3, up3, 3, &moved), 1);   /* part 3 -> rail 0 */
	assert_int_equal(s.part[3].rail, 0);
	const uint8_t up01[] = { 0, 1, 2 };
	s.part[3].rail = 2;  /* as if part 3 had gone to rail 2 */
	assert_int_equal(ing_stripe_rail_lost(&s, 2, up01, 3, &moved), 2);
	assert_int_equal(moved, (1u << 2) | (1u << 3));
	assert_int_equal(s.part[2].rail, 0);
	assert_int_equal(s.part[3].rail, 1);
	assert_int_equal(s.part[0].moves + s.part[1].moves, 2);
	assert_int_equal(ing_stripe_rail_bytes(&s, 2), 0);
	for (unsigned i = 0; i < 4; i++)
		assert_int_equal(ing_stripe_part_in(&s, i), i == 3);

	/* no other rail up: the parts cannot move (the frame fails, retryable), nothing changed */
	assert_int_equal(ing_stripe_split(&s, 64 * MIB, rails, 2, 0), 2);
	const uint8_t only1[] = { 1 };
	assert_int_equal(ing_stripe_rail_lost(&s, 1, only1, 1, &moved), -ENODEV);
	assert_int_equal(ing_stripe_rail_lost(&s, 1, NULL, 0, NULL), -ENODEV);
	assert_int_equal(s.part[1].rail, 1);
	assert_int_equal(s.part[1].moves, 1);
}

/* Parts a producer sent (wire input) are checked before anything moves. */
static void test_init_checks(void **state)
{
	struct ing_stripe s;
	const char *why = NULL;
	(void)state;

	struct ing_stripe_part ok[] = { { .off = 0, .len = 32 * MIB, .rail = 0 },
					{ .off = 32 * MIB, .len = 32 * MIB, .rail = 1 } };
	assert_int_equal(ing_stripe_init(&s, 64 * MIB, ok, 2, 2, &why), 0);
	assert_null(why);
	assert_tiles(&s, 64 * MIB);
	assert_int_equal(s.nin, 0);

	struct ing_stripe_part p[2];
#define BAD(len_, n_, nrails_)                                                         \
	do {                                                                           \
		why = NULL;                                                            \
		assert_int_equal(ing_stripe_init(&s, (len_), p, (n_), (nrails_), &why), -EINVAL); \
		assert_non_null(why);                                                  \
	} while (0)
	memcpy(p, ok, sizeof(p));
	p[1].off += 4096;                          /* a gap */
	BAD(64 * MIB, 2, 2);
	memcpy(p, ok, sizeof(p));
	p[1].off -= 4096;                          /* an overlap */
	BAD(64 * MIB, 2, 2);
	memcpy(p, ok, sizeof(p));
	p[1].len -= 1;                             /* ends short */
	BAD(64 * MIB, 2, 2);
	memcpy(p, ok, sizeof(p));
	p[1].len += 1;                             /* runs past */
	BAD(64 * MIB, 2, 2);
	memcpy(p, ok, sizeof(p));
	p[1].rail = 2;                             /* a rail the node does not have */
	BAD(64 * MIB, 2, 2);
	memcpy(p, ok, sizeof(p));
	p[0].len = 0;                              /* an empty part */
	BAD(64 * MIB, 2, 2);
	memcpy(p, ok, sizeof(p));
	p[0].off = 1;                              /* not from 0 */
	BAD(64 * MIB, 2, 2);
	memcpy(p, ok, sizeof(p));
	BAD(0, 2, 2);                              /* length 0 */
	BAD(64 * MIB, 0, 2);                       /* no part */
	BAD(64 * MIB, ING_STRIPE_MAX_PARTS + 1, 2);
#undef BAD
	/* one part, one rail: the whole frame */
	struct ing_stripe_part one = { .off = 0, .len = 9 * MIB, .rail = 0 };
	assert_int_equal(ing_stripe_init(&s, 9 * MIB, &one, 1, 1, NULL), 0);
	assert_int_equal(ing_stripe_part_in(&s, 0), 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_wanted),
		cmocka_unit_test(test_decide),
		cmocka_unit_test(test_split_even),
		cmocka_unit_test(test_split_uneven),
		cmocka_unit_test(test_split_one_rail),
		cmocka_unit_test(test_split_bad),
		cmocka_unit_test(test_assembly),
		cmocka_unit_test(test_rail_lost),
		cmocka_unit_test(test_init_checks),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
