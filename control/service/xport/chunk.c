/* SPDX-License-Identifier: Apache-2.0 */
/*
 * chunk.c - incremental protobuf wire parser for h3000.FrameChunk.
 *
 * The PushFrames fallback path receives each FrameChunk in the pieces HTTP/2 DATA frames
 * deliver. The small fields are decoded here as they stream past; the frameId string is
 * kept (its first CP_ID_MAX bytes, and its true length); the meta field is collected
 * (bounded by SVC_META_MAX) for protobuf-c; the data field is never buffered:
 * its bytes go to the cbs->data callback, which copies them straight into the frame's
 * slot. Any field order is accepted; the callbacks learn what came before the data from
 * the parser (p->ordered, p->seen), and what came after it from p->late_fields.
 */
#include "control/service/xport/chunk.h"
#include "proto/pb_wire.h"

#include <assert.h>
#include <errno.h>
#include <string.h>

enum {
	ST_KEY = 0,     /* reading a key varint */
	ST_VARINT,      /* reading a varint value */
	ST_LEN,         /* reading a length varint */
	ST_BODY,        /* consuming a length-delimited body */
	ST_FIXED,       /* skipping a fixed32/fixed64 value */
};


void chunk_parser_init(struct chunk_parser *p, const struct chunk_parser_cbs *cbs, void *arg)
{
	memset(p, 0, offsetof(struct chunk_parser, meta));
	p->cbs = cbs;
	p->arg = arg;
}

void chunk_parser_begin(struct chunk_parser *p, uint64_t msg_len)
{
	const struct chunk_parser_cbs *cbs = p->cbs;
	void *arg = p->arg;

	memset(p, 0, offsetof(struct chunk_parser, meta));
	p->cbs = cbs;
	p->arg = arg;
	p->msg_left = msg_len;
	p->ordered = true;
	p->state = ST_KEY;
}

static int bad(struct chunk_parser *p, const char *why)
{
	p->err = why;
	return -EBADMSG;
}

/* One varint byte (proto/pb_wire.h's step, shared with every walker of the wire format).
 * 1 when the varint is complete, 0 when more bytes follow, <0 malformed. */
static int varint_byte(struct chunk_parser *p, uint8_t b)
{
	int rc = pb_varint_step(&p->acc, &p->vbytes, b);
	if (rc < 0)
		return bad(p, "varint longer than 10 bytes or above 64 bits");
	if (rc == 0 && p->state == ST_KEY && p->vbytes >= 5)   /* as protobuf-c: a key is a varint32 */
		return bad(p, "field key longer than 5 bytes");
	return rc;
}

static bool known_field(uint32_t f)
{
	return f == CP_F_FRAME_ID || f == CP_F_OFFSET || f == CP_F_LAST || f == CP_F_META ||
	       f == CP_F_SESSION || f == CP_F_DATA;
}

/* A key is complete: check the wire type, note order, pick the next state. */
static int on_key(struct chunk_parser *p, uint64_t key)
{
	if (key > UINT32_MAX)
		return bad(p, "field key out of range");
	uint32_t field = (uint32_t)(key >> 3);
	int wt = (int)(key & 7);

	if (field == 0)
		return bad(p, "field number 0");
	p->field = field;
	p->wtype = wt;
	if (known_field(field)) {
		bool want_len = field == CP_F_META || field == CP_F_DATA || field == CP_F_FRAME_ID;
		if (want_len ? wt != PB_LEN : wt != PB_VARINT)
			return bad(p, "wrong wire type for a FrameChunk field");
		if (field < p->last_field)
			p->ordered = false;
		p->last_field = field;
		if (p->has_data && field != CP_F_LAST && field != CP_F_DATA)
			p->late_fields = true;
		p->seen |= 1u << field;
	}
	switch (wt) {
	case PB_VARINT:
		p->state = ST_VARINT;
		break;
	case PB_LEN:
		p->state = ST_LEN;
		break;
	case PB_I64:
		p->state = ST_FIXED;
		p->left = 8;
		break;
	case PB_I32:
		p->state = ST_FIXED;
		p->left = 4;
		break;
	default:
		return bad(p, "unsupported wire type (group or invalid)");
	}
	return 0;
}

static void on_varint(struct chunk_parser *p, uint64_t v)
{
	switch (p->field) {
	case CP_F_OFFSET:
		p->offset = v;
		break;
	case CP_F_LAST:
		p->last = v != 0;
		break;
	case CP_F_SESSION:
		p->session_id = v;
		break;
	default:
		break; /* unknown varint field: skipped */
	}
}

/* A length is complete. Body bytes must fit in what is left of the message. */
static int on_len(struct chunk_parser *p, uint64_t len)
{
	if (len > p->msg_left)
		return bad(p, "field length runs past the end of the message");
	p->left = len;
	p->body_off = 0;
	p->state = ST_BODY;
	if (p->field == CP_F_FRAME_ID) {
		/* a string field seen again replaces the earlier value (protobuf merge) */
		p->id_len = 0;
		p->id_oversize = false;
		p->frame_id[0] = '\0';
	}
	if (p->field == CP_F_DATA) {
		if (p->has_data)
			return bad(p, "more than one data field");
		p->has_data = true;
		p->data_len = len;
		if (p->cbs && p->cbs->data_begin) {
			int rc = p->cbs->data_begin(p->arg, p, len);
			if (rc < 0)
				return rc;
		}
	}
	if (len == 0)
		p->state = ST_KEY;
	return 0;
}

int chunk_parser_feed(struct chunk_parser *p, const uint8_t *d, size_t n)
{
	int rc;

	if (n > p->msg_left)
		return bad(p, "more bytes than the message length");
	while (n > 0) {
		switch (p->state) {
		case ST_KEY:
		case ST_VARINT:
		case ST_LEN: {
			uint8_t b = *d++;
			n--;
			p->msg_left--;
			rc = varint_byte(p, b);
			if (rc < 0)
				return rc;
			if (rc == 0)
				break;
			uint64_t v = p->acc;
			int st = p->state;
			p->acc = 0;
			p->vbytes = 0;
			if (st == ST_KEY) {
				rc = on_key(p, v);
			} else if (st == ST_VARINT) {
				on_varint(p, v);
				p->state = ST_KEY;
				rc = 0;
			} else {
				rc = on_len(p, v);
			}
			if (rc < 0)
				return rc;
			break;
		}
		case ST_FIXED: {
			size_t k = n < p->left ? n : (size_t)p->left;
			d += k;
			n -= k;
			p->msg_left -= k;
			p->left -= k;
			if (p->left == 0)
				p->state = ST_KEY;
			break;
		}
		case ST_BODY: {
			size_t k = n < p->left ? n : (size_t)p->left;
			if (p->field == CP_F_DATA) {
				if (p->cbs && p->cbs->data) {
					rc = p->cbs->data(p->arg, p, p->body_off, d, k);
					if (rc < 0)
						return rc;
				}
			} else if (p->field == CP_F_FRAME_ID) {
				size_t room = p->id_len < CP_ID_MAX ? CP_ID_MAX - p->id_len : 0;
				size_t c = k < room ? k : room;
				if (c) {
					memcpy(p->frame_id + p->id_len, d, c);
					p->frame_id[p->id_len + c] = '\0';
				}
				p->id_len += k;
				if (c < k)
					p->id_oversize = true;
			} else if (p->field == CP_F_META) {
				size_t room = SVC_META_MAX - p->meta_len;
				size_t c = k < room ? k : room;
				memcpy(p->meta + p->meta_len, d, c);
				p->meta_len += c;
				if (c < k)
					p->meta_oversize = true;
			}
			d += k;
			n -= k;
			p->msg_left -= k;
			p->left -= k;
			p->body_off += k;
			if (p->left == 0)
				p->state = ST_KEY;
			break;
		}
		default:
			return bad(p, "parser state corrupt");
		}
	}
	return 0;
}

uint64_t chunk_parser_data_run(const struct chunk_parser *p, uint64_t *off)
{
	if (p->state != ST_BODY || p->field != CP_F_DATA)
		return 0;
	*off = p->body_off;
	return p->left;
}

void chunk_parser_skip_data(struct chunk_parser *p, uint64_t n)
{
	assert(p->state == ST_BODY && p->field == CP_F_DATA && n <= p->left);
	p->msg_left -= n;
	p->left -= n;
	p->body_off += n;
	if (p->left == 0)
		p->state = ST_KEY;
}

int chunk_parser_end(struct chunk_parser *p)
{
	if (p->msg_left != 0)
		return bad(p, "message ended early");
	if (p->state != ST_KEY || p->vbytes != 0)
		return bad(p, "message ends inside a field");
	return 0;
}
