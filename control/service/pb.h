/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pb.h - the service's protobuf helpers: the per-call arena protobuf-c unpacks FrameMeta
 * into (no malloc per message), the checks protobuf-c cannot make (a NUL inside a string,
 * a string's length as sent), FrameMeta unpacked and checked in one call, and the enum
 * conversions the replies need. The field walker is proto/pb_wire.h. Control thread.
 */
#ifndef ING_SERVICE_PB_H
#define ING_SERVICE_PB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "h3000.pb-c.h"

#define SVC_META_MAX 4096u       /* largest FrameMeta accepted (ControlStream, in a FrameChunk) */
#define SVC_ARENA 12288u         /* protobuf-c bump arena per call (FrameMeta <= SVC_META_MAX) */
#define SVC_ARENA_OVF_MAX (256u << 10) /* beyond it: a FrameMeta of <= SVC_META_MAX bytes with
				* many unknown fields (protobuf-c keeps each one) needs up to ~100 KiB */

/*
 * A bump arena: what protobuf-c allocates for one message, released all at once when the
 * next message is unpacked. Blocks that do not fit (a message full of unknown fields) come
 * from malloc, bounded by SVC_ARENA_OVF_MAX, and go with the arena.
 */
struct svc_arena {
	size_t used;
	void *ovf;                /* malloc'ed blocks, chained through their first word */
	size_t ovf_bytes;
	_Alignas(16) uint8_t mem[SVC_ARENA];
};

/* The arena, emptied, as an allocator for one unpack. */
void svc_arena_allocator(struct svc_arena *a, ProtobufCAllocator *alloc);
/* Free what the arena took from malloc (the arena itself is the caller's). */
void svc_arena_fini(struct svc_arena *a);

/* True when a top-level string field f1 or f2 of msg holds a NUL byte (malformed: false,
 * the unpack reports it). protobuf-c hands strings over NUL-terminated, so an id with a NUL
 * inside would silently become a shorter, different id. */
bool svc_pb_string_has_nul(const uint8_t *msg, size_t len, uint32_t f1, uint32_t f2);
/* Length on the wire of the last top-level length-delimited field `field` (the one
 * protobuf's merge keeps): a string with a NUL inside compares whole. 0: absent or
 * malformed. */
size_t svc_pb_wire_len(const uint8_t *msg, size_t len, uint32_t field);

/*
 * A FrameMeta of len bytes, unpacked into the arena and checked: 0 and *out; or an
 * h3000.ErrorCode (INVALID_ARGUMENT) with the reason in why: larger than SVC_META_MAX,
 * malformed, a NUL in frameId or waferId. frame_id names the frame in the reason ("": the
 * message's own, when it could be read).
 */
int svc_pb_meta(struct svc_arena *a, const uint8_t *msg, size_t len, const char *frame_id,
		H3000__FrameMeta **out, char *why, size_t whylen);

/* enum ing_member_state (control/fleet/fleet.h) as h3000.MemberState. */
H3000__MemberState svc_pb_member_state(int state);

#endif
