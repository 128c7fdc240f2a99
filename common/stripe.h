/* SPDX-License-Identifier: Apache-2.0 */
/*
 * stripe.h - one large frame moved over every rail at once (issue #26 item 3): the split
 * of its byte range into per-rail parts and the bookkeeping of their arrival. Pure
 * arithmetic with no I/O, shared by the producer (which names the parts in its one
 * FrameMeta, proto/h3000.proto StripePart) and the node (which checks the parts a
 * producer sent, hands each to the lcore of its rail and hands the frame to persistence
 * once every part is in). docs/ARCHITECTURE.md "Striping".
 *
 * A striped frame is still one frame: one slot, one catalog row, one CRC (persistence
 * computes it over the whole slot, as for any frame), one Ack. Only the movement is split.
 *
 * Lost rail: the parts of a frame that were on it and not yet in are re-assigned to the
 * surviving rails (ing_stripe_rail_lost) and moved again, alone; parts already in stay.
 *
 * Threads: a struct ing_stripe has one owner (the node's control thread, or the producer
 * thread that sends the frame); nothing here locks.
 */
#ifndef ING_COMMON_STRIPE_H
#define ING_COMMON_STRIPE_H

#include <stdbool.h>
#include <stdint.h>

#define ING_STRIPE_MAX_PARTS 8               /* = the most rails a node has (ING_RDMA_MAX_RAILS) */
#define ING_STRIPE_DEFAULT_MIN (8ull << 20)  /* frames of 8 MiB or more are striped */
#define ING_STRIPE_ALIGN 4096u               /* a part starts on a page of the slot */

enum ing_stripe_part_state {
	ING_PART_MOVING = 0,   /* assigned to its rail, not in yet */
	ING_PART_IN = 1,       /* every byte of it landed */
};

struct ing_stripe_part {
	uint64_t off;          /* byte offset in the frame */
	uint64_t len;          /* bytes, > 0 */
	uint8_t rail;          /* rail index (the node's, as Negotiate lists its rails) */
	uint8_t state;         /* enum ing_stripe_part_state */
	uint8_t moves;         /* times it was (re)assigned: 1 for a part never lost */
};

struct ing_stripe {
	uint64_t length;       /* the frame's bytes */
	unsigned nparts;
	unsigned nin;          /* parts in */
	struct ing_stripe_part part[ING_STRIPE_MAX_PARTS];
};

/*
 * Whether a frame of len bytes is striped over nrails usable rails: min != 0 (0: striping
 * off), len >= min, and at least two rails.
 */
static inline bool ing_stripe_wanted(uint64_t len, uint64_t min, unsigned nrails)
{
	return min && len >= min && nrails >= 2;
}

/*
 * The producer's decision for one frame of len bytes over nrails rails it can stripe over:
 * at least its own threshold prod_min (opts.stripe_min: 0 is the default,
 * ING_STRIPE_DEFAULT_MIN; UINT64_MAX, ING_STRIPE_OFF, never) AND the node takes striped
 * frames (node_min, NegotiateReply.stripeMin, > 0) of that size (len >= node_min).
 */
static inline bool ing_stripe_decide(uint64_t len, uint64_t prod_min, uint64_t node_min, unsigned nrails)
{
	if (prod_min == UINT64_MAX)
		return false;
	if (!prod_min)
		prod_min = ING_STRIPE_DEFAULT_MIN;
	return len >= prod_min && ing_stripe_wanted(len, node_min, nrails);
}

/*
 * Split [0, len) into one part per rail of rails[0..nrails), in order: equal shares in
 * whole pages of align (a power of two; 0: ING_STRIPE_ALIGN), the first parts a page
 * longer where the pages do not divide evenly, the last part ending at len. A frame of
 * fewer pages than rails gets one part per page; one rail: one part, the whole frame. Returns the number of parts (>= 1) or -EINVAL (len 0, no rail,
 * nrails > ING_STRIPE_MAX_PARTS, align not a power of two).
 */
int ing_stripe_split(struct ing_stripe *s, uint64_t len, const uint8_t *rails, unsigned nrails,
		     uint64_t align);

/*
 * Take the parts a peer sent (wire input): they must be 1..ING_STRIPE_MAX_PARTS, in order,
 * each non-empty, starting where the one before ended, the first at 0 and the last ending
 * at len, every rail below nrails. Returns 0, or -EINVAL with why (a static string, for
 * the Ack's message) in *why.
 */
int ing_stripe_init(struct ing_stripe *s, uint64_t len, const struct ing_stripe_part *parts,
		    unsigned nparts, unsigned nrails, const char **why);

/*
 * Part i landed. Returns 1 when it was the last part (the frame is complete), 0 when parts
 * are still moving, -EINVAL for an index out of range or a part already in (a duplicate
 * completion is a bug of the caller, never counted twice).
 */
int ing_stripe_part_in(struct ing_stripe *s, unsigned i);

/*
 * Rail `lost` went away: each part on it that is not in yet moves to a rail of up[0..nup)
 * (round robin, skipping `lost`), its `moves` counted, its bit set in *moved (bit i: part
 * i; may be NULL). Returns the number of parts re-assigned (the caller moves exactly
 * those again), 0 when none was on that rail, or
 * -ENODEV when parts must move and no other rail is up (the frame fails, retryable).
 * Parts already in are never moved again.
 */
int ing_stripe_rail_lost(struct ing_stripe *s, uint8_t lost, const uint8_t *up, unsigned nup,
			 uint32_t *moved);

static inline bool ing_stripe_complete(const struct ing_stripe *s)
{
	return s->nparts && s->nin == s->nparts;
}

/* Bytes of the frame assigned to rail r (parts in or moving). */
uint64_t ing_stripe_rail_bytes(const struct ing_stripe *s, uint8_t r);

#endif
