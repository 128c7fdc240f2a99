/* SPDX-License-Identifier: Apache-2.0 */
/*
 * chunk.h - the incremental FrameChunk parser of the PushFrames transport (stream.c),
 * unit-tested and fuzzed on its own. Control thread.
 */
#ifndef ING_CONTROL_SVC_CHUNK_H
#define ING_CONTROL_SVC_CHUNK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "control/service/pb.h"   /* SVC_META_MAX */

/* FrameChunk field numbers (proto/h3000.proto). */
enum {
	CP_F_FRAME_ID = 1,
	CP_F_OFFSET = 2,
	CP_F_LAST = 3,
	CP_F_META = 4,
	CP_F_SESSION = 5,
	CP_F_DATA = 15,
};

struct chunk_parser;

/*
 * Events for the bytes field `data`, which is never buffered by the parser.
 * data_begin: the field's length is known (the fields before it are in the parser).
 * data: a piece of it, at offset off within the field. Return 0, or a negative value that
 * chunk_parser_feed() hands back to its caller unchanged (the parse stops there).
 */
struct chunk_parser_cbs {
	int (*data_begin)(void *arg, struct chunk_parser *p, uint64_t len);
	int (*data)(void *arg, struct chunk_parser *p, uint64_t off, const uint8_t *d, size_t n);
};

/* frameId bytes kept: one more than an id may have, so an over-long id stays over-long
 * (it is never answered under its 256-byte prefix, which may be another frame's id) */
#define CP_ID_MAX 257u

struct chunk_parser {
	/* --- decoded fields of the current message (proto3: absent == 0 / "") --- */
	char frame_id[CP_ID_MAX + 1];   /* NUL-terminated copy of the first CP_ID_MAX bytes */
	size_t id_len;          /* bytes of frameId on the wire (repeated: concatenated) */
	bool id_oversize;       /* frameId longer than CP_ID_MAX: frame_id[] is cut */
	uint64_t offset;
	uint64_t session_id;
	bool last;
	uint32_t seen;          /* bit (1u << field) for every known field met */
	bool ordered;           /* known fields so far came in ascending field-number order */
	bool late_fields;       /* a field other than `last` came after data */
	bool meta_oversize;     /* meta exceeded SVC_META_MAX: meta[] is incomplete */
	size_t meta_len;        /* repeated meta fields are concatenated (protobuf merge) */
	uint64_t data_len;      /* length of the data field (0 if absent) */
	bool has_data;
	const char *err;        /* static reason after -EBADMSG */
	/* --- machine --- */
	uint64_t msg_left;      /* bytes of this message not yet fed */
	int state;
	uint64_t acc;           /* varint being read */
	unsigned vbytes;
	uint32_t field;
	int wtype;
	uint64_t left;          /* body bytes left in the current field */
	uint64_t body_off;      /* bytes of the current body consumed */
	uint32_t last_field;
	const struct chunk_parser_cbs *cbs;
	void *arg;
	uint8_t meta[SVC_META_MAX];
};

void chunk_parser_init(struct chunk_parser *p, const struct chunk_parser_cbs *cbs, void *arg);
/* Start a message of msg_len bytes (the gRPC message length). Clears the decoded fields. */
void chunk_parser_begin(struct chunk_parser *p, uint64_t msg_len);
/*
 * Feed the next n bytes of the message (any split). 0; -EBADMSG when malformed (p->err
 * says why: bad varint, wrong wire type, field longer than the message, more bytes than
 * the message); or a callback's negative return.
 */
int chunk_parser_feed(struct chunk_parser *p, const uint8_t *d, size_t n);
/* Message over: 0 when it ended on a field boundary with every byte fed, else -EBADMSG. */
int chunk_parser_end(struct chunk_parser *p);
/*
 * Placement (the gRPC layer reads the data field's bytes straight to their destination):
 * chunk_parser_data_run: inside the data field's body, the bytes of it still to come, and
 * in *off how many came before; else 0. chunk_parser_skip_data: n of them (n <= the run)
 * are in place already: advance over them without the data callback.
 */
uint64_t chunk_parser_data_run(const struct chunk_parser *p, uint64_t *off);
void chunk_parser_skip_data(struct chunk_parser *p, uint64_t n);

#endif
