/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pb.c - the service's protobuf helpers (pb.h): the per-call arena, the wire checks
 * protobuf-c cannot make (proto/pb_wire.h walks the fields), FrameMeta unpacked and
 * checked, enum conversions.
 */
#include "control/service/pb.h"
#include "common/ident.h"
#include "control/fleet/fleet.h"
#include "proto/pb_wire.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ================================================================ arena */

/*
 * The arena holds any FrameMeta of known fields. One full of unknown fields (a newer
 * client's) is still valid protobuf, and protobuf-c keeps every unknown field: what does
 * not fit goes to malloc'ed overflow blocks (bounded per call), freed with the arena. Found
 * by tests/fuzz/fuzz_proto: such a FrameMeta was NACKed as malformed.
 */
static void *arena_alloc(void *data, size_t size)
{
	struct svc_arena *a = data;
	size_t off = (a->used + 15) & ~(size_t)15;
	if (size <= SVC_ARENA && off <= SVC_ARENA - size) {
		a->used = off + size;
		return a->mem + off;
	}
	if (size > SVC_ARENA_OVF_MAX || a->ovf_bytes > SVC_ARENA_OVF_MAX - size)
		return NULL;
	uint8_t *b = malloc(16 + size);   /* first word: the chain; data 16-aligned */
	if (!b)
		return NULL;
	memcpy(b, &a->ovf, sizeof(void *));
	a->ovf = b;
	a->ovf_bytes += size;
	return b + 16;
}

static void arena_free(void *data, void *p)
{
	(void)data;
	(void)p; /* released all at once by the next svc_arena_allocator */
}

void svc_arena_fini(struct svc_arena *a)
{
	while (a->ovf) {
		void *nx;
		memcpy(&nx, a->ovf, sizeof(void *));
		free(a->ovf);
		a->ovf = nx;
	}
	a->ovf_bytes = 0;
}

void svc_arena_allocator(struct svc_arena *a, ProtobufCAllocator *alloc)
{
	alloc->alloc = arena_alloc;
	alloc->free = arena_free;
	alloc->allocator_data = a;
	svc_arena_fini(a);
	a->used = 0;
}

/* ================================================================ wire checks */

bool svc_pb_string_has_nul(const uint8_t *msg, size_t len, uint32_t f1, uint32_t f2)
{
	struct pb_field f;
	size_t pos = 0;

	while (pb_next(msg, len, &pos, &f) > 0)
		if (f.wt == PB_LEN && (f.num == f1 || f.num == f2) && memchr(f.p, 0, (size_t)f.v))
			return true;
	return false;
}

size_t svc_pb_wire_len(const uint8_t *msg, size_t len, uint32_t field)
{
	struct pb_field f;
	size_t pos = 0, found = 0;
	int rc;

	while ((rc = pb_next(msg, len, &pos, &f)) > 0)
		if (f.wt == PB_LEN && f.num == field)
			found = (size_t)f.v;
	return rc < 0 ? 0 : found;
}

int svc_pb_meta(struct svc_arena *a, const uint8_t *msg, size_t len, const char *frame_id,
		H3000__FrameMeta **out, char *why, size_t whylen)
{
	ProtobufCAllocator alloc;
	H3000__FrameMeta *m = NULL;
	char pre[ING_ID_MAX + 16] = "";

	*out = NULL;
	if (frame_id && *frame_id)
		snprintf(pre, sizeof(pre), "frame %s: ", frame_id);
	if (len > SVC_META_MAX) {
		snprintf(why, whylen, "%sFrameMeta larger than %u bytes", pre, SVC_META_MAX);
		return H3000__ERROR_CODE__ERROR_INVALID_ARGUMENT;
	}
	svc_arena_allocator(a, &alloc);
	m = h3000__frame_meta__unpack(&alloc, len, msg);
	if (!m) {
		snprintf(why, whylen, "%smalformed FrameMeta (%zu bytes)", pre, len);
		return H3000__ERROR_CODE__ERROR_INVALID_ARGUMENT;
	}
	*out = m;   /* even when refused below: its sessionId still binds the call */
	if (svc_pb_string_has_nul(msg, len, 1, 5)) {
		snprintf(why, whylen, "%sframeId or waferId of its FrameMeta contains a NUL byte: both "
			 "must be " ING_ID_RULE, pre[0] ? pre : "");
		return H3000__ERROR_CODE__ERROR_INVALID_ARGUMENT;
	}
	return 0;
}

/* ================================================================ enums */

H3000__MemberState svc_pb_member_state(int state)
{
	switch (state) {
	case ING_MEMBER_ACTIVE: return H3000__MEMBER_STATE__MEMBER_ACTIVE;
	case ING_MEMBER_DRAINING: return H3000__MEMBER_STATE__MEMBER_DRAINING;
	case ING_MEMBER_DOWN: return H3000__MEMBER_STATE__MEMBER_DOWN;
	default: return H3000__MEMBER_STATE__MEMBER_STATE_UNSPECIFIED;
	}
}
