/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_proto - every protobuf message the node (and the producer library) unpacks:
 * FrameMeta (ControlStream, and the meta inside a FrameChunk, into the per-call arena),
 * FrameChunk, NegotiateRequest/Reply, Ack, StatsRequest/Reply, HealthCheckRequest.
 * Input: one selector byte, then the message. Oracles: a message that unpacks (without
 * unknown fields, at any depth) packs back to bytes that unpack and pack to the same bytes again; a FrameMeta of at most
 * SVC_META_MAX bytes that protobuf-c accepts also fits in the call's arena (else the
 * node would NACK a valid FrameMeta as malformed); strings come out NUL-terminated.
 */
#include "control/service/pb.h"
#include "h3000.pb-c.h"
#include "health.pb-c.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const ProtobufCMessageDescriptor *const descs[] = {
	&h3000__frame_meta__descriptor,
	&h3000__frame_chunk__descriptor,
	&h3000__negotiate_request__descriptor,
	&h3000__negotiate_reply__descriptor,
	&h3000__ack__descriptor,
	&h3000__stats_request__descriptor,
	&h3000__stats_reply__descriptor,
	&grpc__health__v1__health_check_request__descriptor,
	&h3000__members_request__descriptor,   /* fleet: rpc Members (node and producer) */
	&h3000__members_reply__descriptor,
	&h3000__get_frame_request__descriptor, /* tier: rpc GetFrame (node) */
	&h3000__frame_data__descriptor,        /* and its replies (ingest-get) */
};
#define NDESCS (sizeof(descs) / sizeof(descs[0]))

static struct svc_arena *arena;   /* a call's protobuf-c arena (control/service/pb.h) */

/* unknown fields anywhere in the message, nested messages included */
static int has_unknown(const ProtobufCMessage *m)
{
	if (m->n_unknown_fields)
		return 1;
	const ProtobufCMessageDescriptor *d = m->descriptor;
	for (unsigned i = 0; i < d->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &d->fields[i];
		if (f->type != PROTOBUF_C_TYPE_MESSAGE)
			continue;
		const char *at = (const char *)m + f->offset;
		if (f->label == PROTOBUF_C_LABEL_REPEATED) {
			size_t n = *(const size_t *)((const char *)m + f->quantifier_offset);
			ProtobufCMessage *const *v = *(ProtobufCMessage *const *const *)at;
			for (size_t j = 0; j < n; j++)
				if (has_unknown(v[j]))
					return 1;
		} else {
			const ProtobufCMessage *sub = *(ProtobufCMessage *const *)at;
			if (sub && has_unknown(sub))
				return 1;
		}
	}
	return 0;
}

/* pack(unpack(b)) is stable after one round */
static void round_trip(const ProtobufCMessageDescriptor *d, ProtobufCMessage *m)
{
	size_t n1 = protobuf_c_message_get_packed_size(m);
	uint8_t *b1 = malloc(n1 ? n1 : 1);
	if (!b1)
		abort();
	if (protobuf_c_message_pack(m, b1) != n1)
		abort();
	ProtobufCMessage *m2 = protobuf_c_message_unpack(d, NULL, n1, b1);
	if (!m2)
		abort();   /* our own packing of a decoded message does not decode */
	size_t n2 = protobuf_c_message_get_packed_size(m2);
	if (n2 != n1)
		abort();
	uint8_t *b2 = malloc(n2 ? n2 : 1);
	if (!b2)
		abort();
	if (protobuf_c_message_pack(m2, b2) != n2 || memcmp(b1, b2, n1) != 0)
		abort();
	protobuf_c_message_free_unpacked(m2, NULL);
	free(b1);
	free(b2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	const ProtobufCMessageDescriptor *d = descs[data[0] % NDESCS];
	const uint8_t *msg = data + 1;
	size_t n = size - 1;

	ProtobufCMessage *m = protobuf_c_message_unpack(d, NULL, n, msg);
	if (d == &h3000__frame_meta__descriptor) {
		if (!arena) {
			arena = calloc(1, sizeof(*arena));
			if (!arena)
				abort();
		}
		ProtobufCAllocator a;
		svc_arena_allocator(arena, &a);
		H3000__FrameMeta *fm = h3000__frame_meta__unpack(&a, n, msg);
		if (m && !fm && n <= SVC_META_MAX)
			abort();   /* valid FrameMeta the arena cannot hold */
		if (!m && fm)
			abort();   /* the arena changed what parses */
		if (fm && (strnlen(fm->waferid, n + 1) > n ||
			   strcmp(fm->waferid, ((H3000__FrameMeta *)m)->waferid) != 0 ||
			   strcmp(fm->frameid, ((H3000__FrameMeta *)m)->frameid) != 0 ||
			   fm->length != ((H3000__FrameMeta *)m)->length))
			abort();
		/* arena memory is dropped whole, as the service does */
		svc_arena_fini(arena);
	}
	if (!m)
		return 0;
	/* unknown fields are skipped by the node, never re-encoded (protobuf-c re-encodes an
	 * over-long key of field 0 that it then refuses), in nested messages too (a Member
	 * inside MembersReply) */
	if (!has_unknown(m))
		round_trip(d, m);
	protobuf_c_message_free_unpacked(m, NULL);
	return 0;
}
