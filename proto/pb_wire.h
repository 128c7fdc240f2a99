/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pb_wire.h - the protobuf wire format, one field at a time: the walker every hand-written
 * reader of the node and the producer shares (header-only, like rdma_conn.h: libingest and
 * the node compile it in). protobuf-c unpacks whole messages; these serve what it cannot:
 * a string's length as sent (a NUL inside is no terminator here), an Ack decoded without
 * allocation, and a FrameChunk parsed as it streams in (pb_varint_step, one byte at a time).
 *
 * Wire types: 0 varint, 1 fixed64, 2 length-delimited, 5 fixed32; groups (3, 4) are
 * refused, as protobuf-c refuses them in these messages.
 */
#ifndef ING_PROTO_PB_WIRE_H
#define ING_PROTO_PB_WIRE_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

enum { PB_VARINT = 0, PB_I64 = 1, PB_LEN = 2, PB_I32 = 5 };

/* One field of a message. */
struct pb_field {
	uint32_t num;          /* field number (>= 1) */
	uint8_t wt;            /* wire type */
	uint64_t v;            /* PB_VARINT: the value; PB_LEN: the length */
	const uint8_t *p;      /* PB_LEN, PB_I64, PB_I32: the bytes */
};

/*
 * A varint fed one byte at a time (a stream parser that cannot look ahead). *acc and *n
 * start at 0. 1: complete (the value in *acc), 0: more bytes follow, -EBADMSG: longer than
 * 10 bytes or above 64 bits.
 */
static inline int pb_varint_step(uint64_t *acc, unsigned *n, uint8_t b)
{
	if (*n == 9 && b > 1)
		return -EBADMSG;
	*acc |= (uint64_t)(b & 0x7f) << (7 * *n);
	(*n)++;
	if (!(b & 0x80))
		return 1;
	return *n >= 10 ? -EBADMSG : 0;
}

/* A varint at *p (before end): 0 and *p past it, or -EBADMSG. */
static inline int pb_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
	uint64_t acc = 0;
	unsigned n = 0;

	while (*p < end) {
		int rc = pb_varint_step(&acc, &n, *(*p)++);
		if (rc) {
			*v = acc;
			return rc < 0 ? rc : 0;
		}
	}
	return -EBADMSG;
}

/*
 * The field at msg[*pos] (msg holds len bytes): 1 and *f, *pos past it; 0 at the end of
 * the message; -EBADMSG when malformed (a truncated field, a group, a key of field 0 or
 * above 32 bits).
 */
static inline int pb_next(const uint8_t *msg, size_t len, size_t *pos, struct pb_field *f)
{
	const uint8_t *p = msg + *pos, *end = msg + len;
	uint64_t key;

	if (p >= end)
		return 0;
	if (pb_varint(&p, end, &key) || key >> 32 || (key >> 3) == 0)
		return -EBADMSG;
	f->num = (uint32_t)(key >> 3);
	f->wt = (uint8_t)(key & 7);
	f->v = 0;
	f->p = NULL;
	switch (f->wt) {
	case PB_VARINT:
		if (pb_varint(&p, end, &f->v))
			return -EBADMSG;
		break;
	case PB_I64:
	case PB_I32: {
		size_t k = f->wt == PB_I64 ? 8 : 4;
		if ((size_t)(end - p) < k)
			return -EBADMSG;
		f->p = p;
		p += k;
		break;
	}
	case PB_LEN:
		if (pb_varint(&p, end, &f->v) || f->v > (uint64_t)(end - p))
			return -EBADMSG;
		f->p = p;
		p += f->v;
		break;
	default:
		return -EBADMSG;
	}
	*pos = (size_t)(p - msg);
	return 1;
}

#endif
