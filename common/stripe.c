/* SPDX-License-Identifier: Apache-2.0 */
/*
 * stripe.c - the split of a striped frame into per-rail parts and the bookkeeping of their
 * arrival (common/stripe.h).
 */
#include <errno.h>
#include <string.h>

#include "common/stripe.h"

int ing_stripe_split(struct ing_stripe *s, uint64_t len, const uint8_t *rails, unsigned nrails,
		     uint64_t align)
{
	if (!align)
		align = ING_STRIPE_ALIGN;
	if (!s || !len || !rails || !nrails || nrails > ING_STRIPE_MAX_PARTS || (align & (align - 1)))
		return -EINVAL;
	memset(s, 0, sizeof(*s));
	s->length = len;
	/* equal shares in whole pages of align, the first ones a page longer where they do
	 * not divide evenly, so every part but the last starts and ends on a page of the slot
	 * (and its READs are whole chunks); the last part ends at len */
	uint64_t pages = (len + align - 1) / align;
	unsigned n = pages < nrails ? (unsigned)pages : nrails;
	uint64_t base = pages / n, extra = pages % n, off = 0;
	for (unsigned i = 0; i < n; i++) {
		uint64_t k = i == n - 1 ? len - off : (base + (i < extra)) * align;
		s->part[i] = (struct ing_stripe_part){ .off = off, .len = k, .rail = rails[i],
						       .state = ING_PART_MOVING, .moves = 1 };
		off += k;
	}
	s->nparts = n;
	return (int)s->nparts;
}

int ing_stripe_init(struct ing_stripe *s, uint64_t len, const struct ing_stripe_part *parts,
		    unsigned nparts, unsigned nrails, const char **why)
{
	const char *w = NULL;
	uint64_t off = 0;

	if (!len)
		w = "striped frame of length 0";
	else if (!nparts || nparts > ING_STRIPE_MAX_PARTS)
		w = "striped frame: 1 to 8 parts";
	for (unsigned i = 0; !w && i < nparts; i++) {
		if (!parts[i].len)
			w = "striped frame: a part of length 0";
		else if (parts[i].off != off)
			w = "striped frame: parts must follow each other from offset 0 (a gap or an overlap)";
		else if (parts[i].len > len - off)
			w = "striped frame: parts run past the frame's length";
		else if (parts[i].rail >= nrails)
			w = "striped frame: a part names a rail the node does not have";
		else
			off += parts[i].len;
	}
	if (!w && off != len)
		w = "striped frame: parts end before the frame's length";
	if (why)
		*why = w;
	if (w)
		return -EINVAL;
	memset(s, 0, sizeof(*s));
	s->length = len;
	s->nparts = nparts;
	for (unsigned i = 0; i < nparts; i++)
		s->part[i] = (struct ing_stripe_part){ .off = parts[i].off, .len = parts[i].len,
						       .rail = parts[i].rail,
						       .state = ING_PART_MOVING, .moves = 1 };
	return 0;
}

int ing_stripe_part_in(struct ing_stripe *s, unsigned i)
{
	if (!s || i >= s->nparts || s->part[i].state == ING_PART_IN)
		return -EINVAL;
	s->part[i].state = ING_PART_IN;
	s->nin++;
	return s->nin == s->nparts;
}

int ing_stripe_rail_lost(struct ing_stripe *s, uint8_t lost, const uint8_t *up, unsigned nup,
			 uint32_t *moved)
{
	uint8_t to[ING_STRIPE_MAX_PARTS];
	unsigned nto = 0, k = 0;
	int n = 0;

	if (moved)
		*moved = 0;
	if (!s)
		return -EINVAL;
	for (unsigned i = 0; up && i < nup && nto < ING_STRIPE_MAX_PARTS; i++)
		if (up[i] != lost)
			to[nto++] = up[i];
	for (unsigned i = 0; i < s->nparts; i++) {
		struct ing_stripe_part *p = &s->part[i];
		if (p->rail != lost || p->state == ING_PART_IN)
			continue;
		if (!nto)
			return -ENODEV;
		p->rail = to[k++ % nto];
		if (p->moves < UINT8_MAX)
			p->moves++;
		if (moved)
			*moved |= 1u << i;
		n++;
	}
	return n;
}

uint64_t ing_stripe_rail_bytes(const struct ing_stripe *s, uint8_t r)
{
	uint64_t b = 0;
	for (unsigned i = 0; s && i < s->nparts; i++)
		if (s->part[i].rail == r)
			b += s->part[i].len;
	return b;
}
