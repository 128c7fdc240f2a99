/* SPDX-License-Identifier: Apache-2.0 */
/*
 * producer.c - libingest: the producer side of h3000 ingest (include/ingest/producer.h).
 * Connect + Negotiate, one long-lived stream call, in-flight table with credits, Ack
 * decoding, local frame timeouts, and the gRPC fallback transport (PushFrames chunks sent
 * from the caller's memory). The RDMA transport plugs in through struct producer_xport
 * (producer_internal.h).
 */
#include "producer/producer_internal.h"
#include "proto/pb_wire.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "common/clock.h"
#include "common/crc32c.h"
#include "common/ident.h"
#include "common/log.h"
#include "control/net/grpc.h"
#include "h3000.pb-c.h"

#define COMP "producer"

/* ================================================================ wire helpers */

size_t pb_put_varint(uint8_t *b, uint64_t v)
{
	size_t n = 0;
	while (v >= 0x80) {
		b[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	b[n++] = (uint8_t)v;
	return n;
}

static size_t varint_len(uint64_t v)
{
	size_t n = 1;
	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

/* tag + varint value; proto3: zero is not written */
size_t pb_put_uint_field(uint8_t *b, unsigned field, uint64_t v)
{
	if (!v)
		return 0;
	size_t n = pb_put_varint(b, (uint64_t)field << 3);
	return n + pb_put_varint(b + n, v);
}

static size_t uint_field_len(unsigned field, uint64_t v)
{
	return v ? varint_len((uint64_t)field << 3) + varint_len(v) : 0;
}

size_t pb_put_string_field(uint8_t *b, unsigned field, const char *s, size_t len)
{
	if (!len)
		return 0;
	size_t n = pb_put_varint(b, ((uint64_t)field << 3) | 2);
	n += pb_put_varint(b + n, len);
	memcpy(b + n, s, len);
	return n + len;
}

static size_t string_field_len(size_t len)
{
	return len ? 1 + varint_len(len) + len : 0;   /* fields 1..15: one-byte tag */
}

static size_t meta_len(size_t idlen, const struct chunk_meta *m, size_t wlen,
		       uint64_t session_id)
{
	return string_field_len(idlen) + uint_field_len(4, m->length) + string_field_len(wlen) +
	       uint_field_len(6, (uint64_t)m->timestamp) + uint_field_len(7, m->crc32c) +
	       uint_field_len(8, m->has_crc) + uint_field_len(9, session_id);
}

size_t chunk_head_encode(uint8_t *buf, size_t cap, const char *frame_id, uint64_t offset, bool last,
			 const struct chunk_meta *meta, uint64_t session_id, uint64_t data_len)
{
	size_t idlen = frame_id ? strnlen(frame_id, ING_ID_MAX + 1) : 0;
	size_t wlen = meta && meta->wafer_id ? strnlen(meta->wafer_id, ING_ID_MAX + 1) : 0;
	size_t mlen = meta ? meta_len(idlen, meta, wlen, session_id) : 0;
	size_t need = string_field_len(idlen) + uint_field_len(2, offset) +
		      uint_field_len(3, last) + (meta ? 1 + varint_len(mlen) + mlen : 0) +
		      uint_field_len(5, session_id) + 1 + varint_len(data_len);
	if (idlen > ING_ID_MAX || wlen > ING_ID_MAX || need > cap)
		return 0;

	size_t n = 0;
	n += pb_put_string_field(buf + n, 1, frame_id, idlen);
	n += pb_put_uint_field(buf + n, 2, offset);
	n += pb_put_uint_field(buf + n, 3, last);
	if (meta) {
		buf[n++] = (4 << 3) | 2;
		n += pb_put_varint(buf + n, mlen);
		n += pb_put_string_field(buf + n, 1, frame_id, idlen);
		n += pb_put_uint_field(buf + n, 4, meta->length);
		n += pb_put_string_field(buf + n, 5, meta->wafer_id, wlen);
		/* int64 is encoded as the two's complement varint */
		n += pb_put_uint_field(buf + n, 6, (uint64_t)meta->timestamp);
		n += pb_put_uint_field(buf + n, 7, meta->crc32c);
		n += pb_put_uint_field(buf + n, 8, meta->has_crc);
		n += pb_put_uint_field(buf + n, 9, session_id);
	}
	n += pb_put_uint_field(buf + n, 5, session_id);
	buf[n++] = (15 << 3) | 2;
	n += pb_put_varint(buf + n, data_len);
	return n;
}

int ack_decode(const uint8_t *buf, size_t len, struct wire_ack *a)
{
	struct pb_field f;
	size_t pos = 0;
	int rc;

	memset(a, 0, sizeof(*a));
	while ((rc = pb_next(buf, len, &pos, &f)) > 0) {
		if (f.wt == PB_VARINT) {
			uint64_t v = f.v;
			switch (f.num) {
			case 2: a->ok = v != 0; break;
			case 4: a->stage = (uint32_t)v; break;
			case 5: a->code = (uint32_t)v; break;
			case 6: a->retryable = v != 0; break;
			case 7: a->duplicate = v != 0; break;
			case 8: a->crc32c = (uint32_t)v; break;
			case 9: a->latency_ns = v; break;
			case 11: case 12: case 13: case 14: case 15: case 16:
				a->stage_ns[f.num - 11] = v;
				break;
			case 20: a->grant_id = (uint32_t)v; break;
			case 21: a->grant_addr = v; break;
			case 22: a->grant_rkey = (uint32_t)v; break;
			case 23: a->grant_length = v; break;
			case 24: a->grant_qp = (uint32_t)v; break;
			case 30: a->grant_striped = v != 0; break;
			case 31: a->grant_part = (uint32_t)v; break;
			case 32: a->grant_offset = v; break;
			case 33: a->grant_rail = (uint32_t)v; break;
			default: break;
			}
		} else if (f.wt == PB_LEN && (f.num == 1 || f.num == 3 || f.num == 10)) {
			char *dst = f.num == 1 ? a->frame_id : f.num == 3 ? a->msg : a->wafer_id;
			size_t cap = f.num == 3 ? sizeof(a->msg) : sizeof(a->frame_id);
			size_t n = f.v < cap - 1 ? (size_t)f.v : cap - 1;
			memcpy(dst, f.p, n);
			dst[n] = '\0';
		}
	}
	return rc < 0 ? -EINVAL : 0;
}

bool producer_id_ok(const char *id)
{
	return id && ing_id_check(id, strnlen(id, ING_ID_MAX + 1)) == NULL;
}

/* ================================================================ in-flight table */

static unsigned pow2_at_least(unsigned v)
{
	unsigned r = 1;
	while (r < v)
		r <<= 1;
	return r;
}

static unsigned ix_home(const struct ing_producer *p, uint64_t key)
{
	return (unsigned)(key ^ (key >> 32)) & p->ix_mask;
}

static void ix_insert(struct ing_producer *p, uint64_t key, int32_t slot)
{
	unsigned i = ix_home(p, key);
	while (p->ix_val[i] >= 0)
		i = (i + 1) & p->ix_mask;
	p->ix_key[i] = key;
	p->ix_val[i] = slot;
}

/* Index position of the frame in slot, or -1. */
static int ix_position(const struct ing_producer *p, uint64_t key, int32_t slot)
{
	for (unsigned i = ix_home(p, key); p->ix_val[i] >= 0; i = (i + 1) & p->ix_mask)
		if (p->ix_val[i] == slot)
			return (int)i;
	return -1;
}

/* linear probing with backward-shift deletion: no tombstones, probe chains stay short */
static void ix_delete(struct ing_producer *p, unsigned i)
{
	unsigned j = i;
	for (;;) {
		j = (j + 1) & p->ix_mask;
		if (p->ix_val[j] < 0)
			break;
		unsigned k = ix_home(p, p->ix_key[j]);
		/* move j into the hole at i unless its home lies cyclically in (i, j] */
		bool stay = i <= j ? (i < k && k <= j) : (i < k || k <= j);
		if (!stay) {
			p->ix_key[i] = p->ix_key[j];
			p->ix_val[i] = p->ix_val[j];
			i = j;
		}
	}
	p->ix_val[i] = -1;
}

struct pframe *producer_frame_find(struct ing_producer *p, const char *wafer, const char *id)
{
	if (!wafer) {
		/* acks without waferId: frames are few (credits), a scan is cheap */
		for (unsigned i = 0; i < p->credits; i++)
			if (p->frames[i].used && strcmp(p->frames[i].id, id) == 0)
				return &p->frames[i];
		return NULL;
	}
	uint64_t key = ing_id_pair_hash(wafer, id);
	for (unsigned i = ix_home(p, key); p->ix_val[i] >= 0; i = (i + 1) & p->ix_mask) {
		struct pframe *f = &p->frames[p->ix_val[i]];
		if (p->ix_key[i] == key && strcmp(f->id, id) == 0 && strcmp(f->wafer, wafer) == 0)
			return f;
	}
	return NULL;
}

struct pframe *producer_sendq_head(struct ing_producer *p)
{
	return p->sq_len ? &p->frames[p->sendq[p->sq_head]] : NULL;
}

static void frame_flush(struct ing_producer *p, struct pframe *f);

void producer_sendq_pop(struct ing_producer *p)
{
	if (!p->sq_len)
		return;
	struct pframe *f = &p->frames[p->sendq[p->sq_head]];
	p->sq_head = (p->sq_head + 1) % p->sq_cap;
	p->sq_len--;
	f->queued = false;
	frame_flush(p, f);
}

/* ================================================================ acks */

static void ackq_push(struct ing_producer *p, const struct pack_entry *e)
{
	/* cannot overflow: <= 2 entries per credit, and a credit returns only on delivery */
	if (p->aq_len == p->aq_cap) {
		ING_LOG_RL(ING_LOG_ERR, COMP, "ack queue full (%u): ack of frame %s lost",
			   p->aq_cap, e->a.frame_id);
		return;
	}
	p->ackq[(p->aq_head + p->aq_len) % p->aq_cap] = *e;
	p->aq_len++;
}

static void frame_release(struct ing_producer *p, struct pframe *f)
{
	int i = ix_position(p, f->key, (int32_t)producer_frame_slot(p, f));
	if (i >= 0)
		ix_delete(p, (unsigned)i);
	f->used = false;
	p->free_slots[p->nfree++] = producer_frame_slot(p, f);
	p->nused--;
}

/* Move held acks to the queue once the transport no longer uses the frame's bytes. */
static void frame_flush(struct ing_producer *p, struct pframe *f)
{
	if (!f->used || f->busy_refs || f->queued || !f->nheld)
		return;
	bool terminal = false;
	for (unsigned k = 0; k < f->nheld; k++) {
		ackq_push(p, &f->held[k]);
		terminal |= f->held[k].terminal;
	}
	f->nheld = 0;
	if (terminal) {
		p->undelivered_terminal++;
		frame_release(p, f);
	}
}

void producer_frame_unref(struct ing_producer *p, struct pframe *f)
{
	if (!f->busy_refs)
		return;    /* already forced to 0 by a torn-down connection */
	if (--f->busy_refs == 0)
		frame_flush(p, f);
}

static void frame_ack_st(struct ing_producer *p, struct pframe *f, enum ing_ack_stage stage,
			 int ok, int code, int retryable, int duplicate, uint32_t crc,
			 uint64_t node_ns, const char *msg, const uint64_t *stage_ns)
{
	if (f->done || f->nheld >= 2)
		return;
	bool terminal = !ok || stage == ING_ACK_DURABLE;
	struct pack_entry *e = &f->held[f->nheld++];
	memset(e, 0, sizeof(*e));
	e->terminal = terminal;
	memcpy(e->a.frame_id, f->id, sizeof(e->a.frame_id));
	memcpy(e->a.wafer_id, f->wafer, sizeof(e->a.wafer_id));
	e->a.stage = stage;
	e->a.ok = ok;
	e->a.code = code;
	e->a.retryable = retryable;
	e->a.duplicate = duplicate;
	e->a.crc32c = crc;
	e->a.latency_ns = ing_now_ns() - f->t_submit_ns;
	e->a.node_latency_ns = node_ns;
	if (stage_ns)
		memcpy(e->a.node_stage_ns, stage_ns, sizeof(e->a.node_stage_ns));
	e->a.user = f->user;
	e->a.stored = ok && stage == ING_ACK_DURABLE;
	memcpy(e->a.node_id, p->node_id, sizeof(e->a.node_id));
	if (msg)
		snprintf(e->a.msg, sizeof(e->a.msg), "%s", msg);
	if (terminal) {
		f->done = true;
		if (ok) {
			p->st.durable++;
			p->st.bytes += f->len;
			p->st.duplicates += duplicate ? 1 : 0;
		} else {
			p->st.failed++;
		}
	}
	frame_flush(p, f);
}

static void frame_ack(struct ing_producer *p, struct pframe *f, enum ing_ack_stage stage, int ok,
		      int code, int retryable, int duplicate, uint32_t crc, uint64_t node_ns,
		      const char *msg)
{
	frame_ack_st(p, f, stage, ok, code, retryable, duplicate, crc, node_ns, msg, NULL);
}

static void on_stream_message(struct ing_grpc_ccall *cc, void *arg, const uint8_t *msg, size_t len)
{
	struct ing_producer *p = arg;
	struct wire_ack w;
	(void)cc;

	if (ack_decode(msg, len, &w)) {
		ING_LOG_RL(ING_LOG_WARN, COMP, "session %" PRIu64 ": malformed Ack (%zu bytes)",
			   p->session_id, len);
		return;
	}
	struct pframe *f = producer_frame_find(p, w.wafer_id[0] ? w.wafer_id : NULL, w.frame_id);
	if (!f || f->done) {
		p->unknown_acks++;
		ING_LOG_RL(ING_LOG_DEBUG, COMP, "Ack for frame %s not in flight (ok=%d stage=%u)",
			   w.frame_id, w.ok, w.stage);
		return;
	}
	if (!w.ok) {
		ING_LOG_RL(ING_LOG_DEBUG, COMP, "frame %s failed: code %u%s: %s", f->id, w.code,
			   w.retryable ? " (retryable)" : "", w.msg);
		f->node_failed = true;
		frame_ack(p, f, f->received ? ING_ACK_RECEIVED : ING_ACK_NONE, 0, (int)w.code,
			  w.retryable, 0, w.crc32c, w.latency_ns, w.msg);
		return;
	}
	if (w.stage == H3000__ACK_STAGE__ACK_STAGE_GRANTED) {
		if (p->push && p->xport->grant)
			p->xport->grant(p, f, &w);
		else
			ING_LOG_RL(ING_LOG_WARN, COMP, "session %" PRIu64 ": a grant for frame %s on a session that did not negotiate push: ignored",
				   p->session_id, f->id);
		return;
	}
	/* ok without a stage: a seed-protocol server acks once, when stored */
	if (w.stage == H3000__ACK_STAGE__ACK_STAGE_RECEIVED) {
		if (f->received)
			return;
		f->received = true;
		p->st.received++;
		frame_ack(p, f, ING_ACK_RECEIVED, 1, 0, 0, w.duplicate, w.crc32c, w.latency_ns, w.msg);
		return;
	}
	if (!f->received) {
		f->received = true;
		p->st.received++;
	}
	frame_ack_st(p, f, ING_ACK_DURABLE, 1, 0, 0, w.duplicate, w.crc32c, w.latency_ns, w.msg,
		     w.stage_ns);
}

void producer_frame_fail(struct ing_producer *p, struct pframe *f, int code, int retryable,
			 const char *msg)
{
	if (f->done)
		return;
	f->node_failed = true;    /* nothing more of it is sent */
	frame_ack(p, f, f->received ? ING_ACK_RECEIVED : ING_ACK_NONE, 0, code, retryable, 0, 0, 0,
		  msg);
}

void producer_set_broken(struct ing_producer *p, int err, const char *msg)
{
	if (p->broken)
		return;
	p->broken = true;
	p->broken_err = err ? err : -EPIPE;
	snprintf(p->broken_msg, sizeof(p->broken_msg), "%s", msg ? msg : "connection lost");
	/* the router above says what becomes of the frames (re-sent, failed over, failed) */
	ING_INFO(COMP, "session %" PRIu64 ": %s; %u frame(s) in flight", p->session_id,
		 p->broken_msg, p->nused);
}

static void on_stream_close(struct ing_grpc_ccall *cc, void *arg, int status, const char *message)
{
	struct ing_producer *p = arg;
	(void)cc;
	p->call = NULL;
	p->call_closed = true;
	if (!p->closing && (status != ING_GRPC_OK || p->nused)) {
		char m[160];
		snprintf(m, sizeof(m), "%s closed: grpc-status %d%s%s", p->xport->call_path, status,
			 message && *message ? ": " : "", message ? message : "");
		producer_set_broken(p, -EPIPE, m);
	}
}

/* Connection gone: close the channel (the transport drops every queued body), then fail
 * every frame still in flight. Outside any gRPC callback. */
static void producer_teardown_conn(struct ing_producer *p)
{
	if (p->ch) {
		ing_grpc_chan_close(p->ch);
		p->ch = NULL;
		p->call = NULL;
	}
	p->sq_len = 0;
	for (unsigned i = 0; i < p->credits; i++) {
		struct pframe *f = &p->frames[i];
		if (!f->used)
			continue;
		f->busy_refs = 0;
		f->queued = false;
		if (!f->done)
			frame_ack(p, f, f->received ? ING_ACK_RECEIVED : ING_ACK_NONE, 0, ING_ERR_TRANSFER,
				  1, 0, 0, 0, p->broken_msg);
		frame_flush(p, f);
	}
}

static void check_timeouts(struct ing_producer *p, uint64_t now)
{
	if (now < p->next_timeout_check_ns)
		return;
	p->next_timeout_check_ns = now + 10 * 1000000ull;
	for (unsigned i = 0; i < p->credits; i++) {
		struct pframe *f = &p->frames[i];
		if (!f->used || f->done || now < f->deadline_ns)
			continue;
		char m[96];
		snprintf(m, sizeof(m), "no DURABLE ack within %d ms", p->o.frame_timeout_ms);
		ING_LOG_RL(ING_LOG_WARN, COMP, "frame %s: %s", f->id, m);
		frame_ack(p, f, f->received ? ING_ACK_RECEIVED : ING_ACK_NONE, 0, ING_ERR_DEADLINE, 1, 0,
			  0, 0, m);
	}
}

/* ================================================================ gRPC fallback transport */

static void zc_done(void *arg)
{
	struct pframe *f = arg;
	producer_frame_unref(f->owner, f);
}

static int grpc_pump(struct ing_producer *p)
{
	uint8_t head[PRODUCER_CHUNK_HEAD_MAX];
	struct pframe *f;

	while (p->call && !p->broken && (f = producer_sendq_head(p))) {
		/* a frame failed before its first chunk is not sent at all, nor the rest of one the
		 * node refused (it dropped the frame and would NACK every further chunk); one that
		 * timed out locally while being sent is finished: the node may still complete it */
		if (f->done && (f->sent == 0 || f->node_failed)) {
			producer_sendq_pop(p);
			continue;
		}
		uint64_t n = f->len - f->sent;
		if (n > p->chunk_size)
			n = p->chunk_size;
		bool last = f->sent + n == f->len;
		struct chunk_meta m = {
			.length = f->len, .wafer_id = f->wafer, .timestamp = f->timestamp,
			.crc32c = f->crc, .has_crc = true,
		};
		size_t hl = chunk_head_encode(head, sizeof(head), f->id, f->sent, last,
					      f->sent == 0 ? &m : NULL, p->session_id, n);
		if (!hl) {
			producer_set_broken(p, -EINVAL, "chunk head does not fit");
			return -EPIPE;
		}
		f->busy_refs++;
		int rc = ing_grpc_ccall_send_zc(p->call, head, hl, f->data + f->sent, n, false,
						zc_done, f);
		if (rc == -ENOBUFS) {
			f->busy_refs--;
			return 0;
		}
		if (rc < 0) {
			f->busy_refs--;
			producer_set_broken(p, rc, "PushFrames send failed");
			return -EPIPE;
		}
		f->sent += n;
		if (last)
			producer_sendq_pop(p);
	}
	return 0;
}

const struct producer_xport grpc_xport = {
	.name = "grpc",
	.kind = ING_TRANSPORT_GRPC,
	.call_path = PRODUCER_PATH_PUSH,
	.pump = grpc_pump,
};

/* ================================================================ frame pool */

static void pool_destroy(struct ppool *pl)
{
	if (pl->base)
		munmap(pl->base, pl->len);
	free(pl->free_stack);
	free(pl->in_use);
	memset(pl, 0, sizeof(*pl));
}

int producer_pool_create(struct ppool *pl, unsigned nslots, uint64_t slot_size)
{
	slot_size = (slot_size + 4095) & ~4095ull;
	if (!nslots || !slot_size || slot_size > (SIZE_MAX / 2) / nslots)
		return -EINVAL;
	pl->slot_size = slot_size;
	pl->nslots = nslots;
	pl->len = (size_t)slot_size * nslots;
	/* prefaulted like the node's pool: no page faults on the first use of a frame */
	void *b = mmap(NULL, pl->len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (b == MAP_FAILED) {
		int e = -errno;
		pl->len = 0;
		return e;
	}
	pl->base = b;
	pl->free_stack = calloc(nslots, sizeof(*pl->free_stack));
	pl->in_use = calloc(nslots, 1);
	if (!pl->free_stack || !pl->in_use)
		return -ENOMEM;
	for (unsigned i = 0; i < nslots; i++)
		pl->free_stack[i] = nslots - 1 - i;
	pl->nfree = nslots;
	return 0;
}

void *ing_frame_alloc(struct ing_producer *p, size_t len)
{
	if (!p || !p->pool.base || !len || len > p->pool.slot_size || !p->pool.nfree)
		return NULL;
	uint32_t i = p->pool.free_stack[--p->pool.nfree];
	p->pool.in_use[i] = 1;
	return p->pool.base + (size_t)i * p->pool.slot_size;
}

void ing_frame_free(struct ing_producer *p, void *buf)
{
	if (!p || !buf || !p->pool.base)
		return;
	uint8_t *b = buf;
	if (b < p->pool.base || b >= p->pool.base + p->pool.len ||
	    (size_t)(b - p->pool.base) % p->pool.slot_size) {
		ING_WARN(COMP, "ing_frame_free: %p is not a pool frame", buf);
		return;
	}
	size_t i = (size_t)(b - p->pool.base) / p->pool.slot_size;
	if (!p->pool.in_use[i]) {
		ING_WARN(COMP, "ing_frame_free: double free of pool frame %zu", i);
		return;
	}
	p->pool.in_use[i] = 0;
	p->pool.free_stack[p->pool.nfree++] = (uint32_t)i;
}

/* ================================================================ connect / negotiate */

/*
 * ABI of the sized structs (include/ingest/producer.h): the caller's struct may be smaller
 * (built against an older 1.x header) or larger (a newer one) than ours. Only
 * min(theirs, ours) bytes are copied either way; a larger caller's tail must be zero on
 * input (a field we do not know: refused) and is zeroed on output.
 */
#define SIZE_MIN(a, b) ((a) < (b) ? (a) : (b))

/* struct ing_ack.code carries the wire's h3000.ErrorCode as the public enum ing_error */
#define SAME_CODE(n) _Static_assert((int)ING_ERR_##n == (int)H3000__ERROR_CODE__ERROR_##n, #n)
SAME_CODE(INVALID_ARGUMENT);
SAME_CODE(TOO_LARGE);
SAME_CODE(CRC_MISMATCH);
SAME_CODE(DUPLICATE_CONFLICT);
SAME_CODE(DEADLINE);
SAME_CODE(TRANSFER);
SAME_CODE(IO);
SAME_CODE(NO_SPACE);
SAME_CODE(NO_TRANSPORT);
SAME_CODE(BUSY);
SAME_CODE(CANCELLED);
SAME_CODE(INTERNAL);
SAME_CODE(SHUTTING_DOWN);

void producer_opts_defaults(struct ing_producer_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->opts_size = sizeof(*o);
	o->transport = ING_TRANSPORT_AUTO;
	o->connect_timeout_ms = PRODUCER_DEFAULT_CONNECT_MS;
	o->frame_timeout_ms = PRODUCER_DEFAULT_FRAME_TIMEOUT_MS;
	o->recycle_on = ING_ACK_RECEIVED;
	o->pool_frame_size = PRODUCER_DEFAULT_POOL_FRAME;
}

void ing_producer_opts_init_sz(struct ing_producer_opts *o, size_t opts_size)
{
	struct ing_producer_opts d;

	if (!o || opts_size < sizeof(o->opts_size))
		return;
	producer_opts_defaults(&d);
	memcpy(o, &d, SIZE_MIN(opts_size, sizeof(d)));
	if (opts_size > sizeof(d))
		memset((char *)o + sizeof(d), 0, opts_size - sizeof(d));
	o->opts_size = opts_size;
}

static const char *transport_name(int t)
{
	switch (t) {
	case H3000__TRANSPORT__TRANSPORT_RDMA_READ: return "RDMA_READ";
	case H3000__TRANSPORT__TRANSPORT_GRPC_STREAM: return "GRPC_STREAM";
	case H3000__TRANSPORT__TRANSPORT_RDMA_WRITE: return "RDMA_WRITE";
	default: return "UNSPECIFIED";
	}
}

/* One Negotiate round trip offering ts[0..nt). 0 or -errno with err set. */
static int negotiate(struct ing_producer *p, const H3000__Transport *ts, size_t nt,
		     H3000__NegotiateReply **out, char *err, size_t errlen)
{
	H3000__NegotiateRequest rq = H3000__NEGOTIATE_REQUEST__INIT;
	uint8_t buf[1024];
	uint8_t *resp = NULL;
	size_t resp_len = 0;
	char gmsg[160] = "";

	rq.versionmin = 1;
	rq.versionmax = 1;
	rq.n_transports = nt;
	rq.transports = (H3000__Transport *)ts;
	rq.clientname = p->client_name;
	rq.maxframesize = p->o.max_frame_size;
	rq.credits = p->o.credits;
	rq.ackreceived = true;   /* RECEIVED acks: recycle_on RECEIVED and the latency split */
	rq.authtoken = (char *)(p->o.auth_token ? p->o.auth_token : "");
	rq.rail = p->rail_ask;
	size_t n = h3000__negotiate_request__get_packed_size(&rq);
	if (n > sizeof(buf)) {
		snprintf(err, errlen, "Negotiate request too large (%zu bytes)", n);
		return -EINVAL;
	}
	h3000__negotiate_request__pack(&rq, buf);
	int st = ing_grpc_unary(p->ch, PRODUCER_PATH_NEGOTIATE, NULL, buf, n, &resp, &resp_len,
				p->o.connect_timeout_ms, gmsg, sizeof(gmsg));
	explicit_bzero(buf, n);
	if (st == ING_GRPC_UNAUTHENTICATED) {
		snprintf(err, errlen, "ingest node at %s refused the connection (UNAUTHENTICATED): %s%s",
			 p->server, *gmsg ? gmsg : "authentication required",
			 p->o.auth_token ? " (the token given is not the node's --auth-token-file)"
					 : " (no auth token given: the node runs with --auth-token-file; give "
					   "the same secret: auth_token, ingest-send --auth-token-file)");
		free(resp);
		return -EACCES;
	}
	if (st != ING_GRPC_OK) {
		snprintf(err, errlen, "Negotiate with %s failed: grpc-status %d%s%s", p->server, st,
			 *gmsg ? ": " : "", gmsg);
		free(resp);
		return st == ING_GRPC_UNAVAILABLE || st == ING_GRPC_DEADLINE_EXCEEDED ? -ETIMEDOUT
										       : -EPROTO;
	}
	*out = h3000__negotiate_reply__unpack(NULL, resp_len, resp);
	free(resp);
	if (!*out) {
		snprintf(err, errlen, "Negotiate reply from %s does not parse", p->server);
		return -EPROTO;
	}
	if ((*out)->version != 1) {
		snprintf(err, errlen, "ingest node at %s speaks protocol version %u, not 1", p->server,
			 (*out)->version);
		h3000__negotiate_reply__free_unpacked(*out, NULL);
		*out = NULL;
		return -EPROTO;
	}
	return 0;
}

static void apply_reply(struct ing_producer *p, const H3000__NegotiateReply *r)
{
	p->session_id = r->sessionid;
	p->version = r->version;
	p->max_frame = r->maxframesize ? r->maxframesize
				       : (p->o.max_frame_size ? p->o.max_frame_size
							      : PRODUCER_DEFAULT_MAX_FRAME);
	p->credits = r->credits ? r->credits : (p->o.credits ? p->o.credits : PRODUCER_DEFAULT_CREDITS);
	if (p->o.credits && p->o.credits < p->credits)
		p->credits = p->o.credits;      /* never more than asked for */
	if (p->credits > PRODUCER_MAX_CREDITS)
		p->credits = PRODUCER_MAX_CREDITS;
	uint32_t mc = r->maxchunksize ? r->maxchunksize : PRODUCER_DEFAULT_CHUNK;
	p->chunk_size = p->o.chunk_size && p->o.chunk_size < mc ? p->o.chunk_size : mc;
	snprintf(p->rdma_addr, sizeof(p->rdma_addr), "%s", r->rdmaaddr ? r->rdmaaddr : "");
	p->rdma_port = r->rdmaport;
	snprintf(p->node_id, sizeof(p->node_id), "%s", r->nodeid ? r->nodeid : "");
	p->node_state = (int)r->nodestate;
	snprintf(p->rail, sizeof(p->rail), "%s", r->rail ? r->rail : "");
	p->stripe_min = r->stripemin;
	p->nrails = 0;
	for (size_t k = 0; k < r->n_rails && p->nrails < PRODUCER_MAX_RAILS; k++) {
		const H3000__RailInfo *ri = r->rails[k];
		if (!ri || !ri->device || !*ri->device)
			continue;
		struct prail *pr = &p->rails[p->nrails++];
		snprintf(pr->dev, sizeof(pr->dev), "%s", ri->device);
		snprintf(pr->addr, sizeof(pr->addr), "%s", ri->rdmaaddr ? ri->rdmaaddr : "");
		pr->port = ri->rdmaport;
		pr->numa = ri->numanode;
		pr->up = ri->state == H3000__RAIL_STATE__RAIL_UP;
		pr->index = ri->index;
		snprintf(pr->why, sizeof(pr->why), "%s", ri->why ? ri->why : "");
	}
}

bool producer_devlist_has(const char *list, const char *dev)
{
	if (!list || !*list)
		return true;
	size_t dl = strlen(dev);
	while (*list) {
		while (*list == ',' || *list == ' ')
			list++;
		size_t l = strcspn(list, ", ");
		if (l && l == dl && memcmp(list, dev, l) == 0)
			return true;
		list += l;
	}
	return false;
}

static int alloc_tables(struct ing_producer *p)
{
	unsigned c = p->credits;
	p->frames = calloc(c, sizeof(*p->frames));
	p->free_slots = calloc(c, sizeof(*p->free_slots));
	unsigned ixcap = pow2_at_least(2 * c);
	p->ix_key = calloc(ixcap, sizeof(*p->ix_key));
	p->ix_val = malloc(ixcap * sizeof(*p->ix_val));
	p->sendq = calloc(c, sizeof(*p->sendq));
	p->aq_cap = 2 * c + 2;
	p->ackq = calloc(p->aq_cap, sizeof(*p->ackq));
	if (!p->frames || !p->free_slots || !p->ix_key || !p->ix_val || !p->sendq || !p->ackq)
		return -ENOMEM;
	p->ix_mask = ixcap - 1;
	for (unsigned i = 0; i < ixcap; i++)
		p->ix_val[i] = -1;
	for (unsigned i = 0; i < c; i++) {
		p->free_slots[i] = c - 1 - i;
		p->frames[i].owner = p;
	}
	p->nfree = c;
	p->sq_cap = c;
	return 0;
}

static void producer_free(struct ing_producer *p)
{
	if (p->xport && p->xport->stop)
		p->xport->stop(p);
	if (p->ch)
		ing_grpc_chan_close(p->ch);
	pool_destroy(&p->pool);
	free(p->frames);
	free(p->free_slots);
	free(p->ix_key);
	free(p->ix_val);
	free(p->sendq);
	free(p->ackq);
	free(p);
}

void producer_destroy(struct ing_producer *p)
{
	if (!p)
		return;
	p->closing = true;
	producer_free(p);
}

/* A session's producer with its options (defaults filled, strings copied) and frame pool
 * (its own, or the router's when sh is given). */
static struct ing_producer *session_new(const struct ing_producer_opts *o,
					struct producer_shared *sh, const char *rail, char *err,
					size_t errlen)
{
	struct ing_producer *p = calloc(1, sizeof(*p));
	if (!p) {
		snprintf(err, errlen, "out of memory");
		errno = ENOMEM;
		return NULL;
	}
	p->o = *o;
	p->ops = &producer_session_ops;
	snprintf(p->server, sizeof(p->server), "%s", o->server);
	snprintf(p->client_name, sizeof(p->client_name), "%s",
		 o->client_name ? o->client_name : "libingest");
	snprintf(p->rdma_device, sizeof(p->rdma_device), "%s", o->rdma_device ? o->rdma_device : "");
	p->o.server = p->server;
	p->o.client_name = p->client_name;
	p->o.rdma_device = *p->rdma_device ? p->rdma_device : NULL;
	snprintf(p->rail_ask, sizeof(p->rail_ask), "%s", rail ? rail : "");
	if (p->o.connect_timeout_ms <= 0)
		p->o.connect_timeout_ms = PRODUCER_DEFAULT_CONNECT_MS;
	if (p->o.frame_timeout_ms <= 0)
		p->o.frame_timeout_ms = PRODUCER_DEFAULT_FRAME_TIMEOUT_MS;
	if (p->o.recycle_on == ING_ACK_NONE)
		p->o.recycle_on = ING_ACK_RECEIVED;
	if (!p->o.pool_frame_size)
		p->o.pool_frame_size = PRODUCER_DEFAULT_POOL_FRAME;
	p->xport = &grpc_xport;
	p->pl = &p->pool;
	if (sh) {
		p->shared = sh;
		p->pl = sh->pool;
		p->o.pool_frames = 0;
	} else if (p->o.pool_frames) {
		int rc = producer_pool_create(&p->pool, p->o.pool_frames, p->o.pool_frame_size);
		if (rc) {
			snprintf(err, errlen, "frame pool %u x %" PRIu64 " bytes: %s", p->o.pool_frames,
				 p->o.pool_frame_size, strerror(-rc));
			producer_free(p);
			errno = -rc;
			return NULL;
		}
	}
	return p;
}

/* The transports to offer in Negotiate, best first; *rdma_ok (why not in why). 0, or -1
 * with err set when the application asked for RDMA and this side cannot do it. */
static int session_offer(struct ing_producer *p, H3000__Transport *offer, size_t *noffer,
			 bool *rdma_ok, char *why, size_t whylen, char *err, size_t errlen)
{
	const struct producer_xport *rdma = PRODUCER_RDMA_XPORT; /* NULL: not built in */

	*noffer = 0;
	*rdma_ok = false;
	if (p->o.transport != ING_TRANSPORT_GRPC) {
		if (!rdma)
			snprintf(why, whylen, "rdma is not built into libingest");
		else if (rdma->probe && rdma->probe(p, why, whylen) < 0)
			;
		else
			*rdma_ok = true;
		if (!*rdma_ok && p->o.transport == ING_TRANSPORT_RDMA) {
			snprintf(err, errlen, "transport rdma requested but unavailable: %s", why);
			return -EOPNOTSUPP;
		}
	}
	if (*rdma_ok && p->o.rdma_mode == ING_RDMA_MODE_WRITE)
		offer[(*noffer)++] = H3000__TRANSPORT__TRANSPORT_RDMA_WRITE;
	if (*rdma_ok)
		offer[(*noffer)++] = H3000__TRANSPORT__TRANSPORT_RDMA_READ;
	if (p->o.transport != ING_TRANSPORT_RDMA)
		offer[(*noffer)++] = H3000__TRANSPORT__TRANSPORT_GRPC_STREAM;
	return 0;
}

/* The gRPC channel to the node (TLS, keepalive). 0 or -1 with err set. */
static int session_dial(struct ing_producer *p, char *err, size_t errlen)
{
	struct ing_grpc_chan_opts co;
	char cerr[512] = "";

	ing_grpc_chan_opts_init(&co);
	co.target = p->server;
	co.connect_timeout_ms = p->o.connect_timeout_ms;
	co.tls = p->o.tls_ca != NULL;
	co.tls_ca = p->o.tls_ca;
	co.tls_cert = p->o.tls_cert;
	co.tls_key = p->o.tls_key;
	co.tls_server_name = p->o.tls_server_name;
	co.keepalive_ms = p->o.keepalive_ms > 0 ? p->o.keepalive_ms : 0;
	p->ch = ing_grpc_chan_connect(&co, cerr, sizeof(cerr));
	if (p->ch)
		return 0;
	int e = errno > 0 ? -errno : -ECONNREFUSED;
	if (*cerr)
		snprintf(err, errlen, "%s", cerr);
	else
		snprintf(err, errlen, "cannot connect to %s", p->server);
	return e;
}

/* The node chose RDMA: set it up, or fall back loudly to the gRPC stream (a new Negotiate
 * in *r) unless the application insisted on RDMA. 0 or -1 with err set. */
static int session_start_rdma(struct ing_producer *p, H3000__NegotiateReply **r, char *err,
			      size_t errlen)
{
	const struct producer_xport *rdma = PRODUCER_RDMA_XPORT;
	H3000__Transport grpc_only = H3000__TRANSPORT__TRANSPORT_GRPC_STREAM;
	char rerr[160] = "", why[160];

	apply_reply(p, *r);
	p->xport = rdma;
	p->push = (*r)->transport == H3000__TRANSPORT__TRANSPORT_RDMA_WRITE;
	p->push_mw = (*r)->pushmemorywindow;
	int rc = rdma->start ? rdma->start(p, rerr, sizeof(rerr)) : 0;
	if (rc == 0) {
		snprintf(p->note, sizeof(p->note), "%s negotiated, ingest node at %s:%u%s%s",
			 transport_name((*r)->transport), p->rdma_addr, p->rdma_port,
			 (*r)->message && *(*r)->message ? " - " : "", (*r)->message ? (*r)->message : "");
		return 0;
	}
	p->push = false;
	if (rdma->stop)
		rdma->stop(p);
	p->xport = &grpc_xport;
	if (p->o.transport == ING_TRANSPORT_RDMA) {
		snprintf(err, errlen, "rdma setup to %s:%u failed: %s", p->rdma_addr, p->rdma_port, rerr);
		return rc < 0 ? rc : -EIO;
	}
	/* loud and reversible: a new session on the fallback, next connect re-probes */
	ING_WARN(COMP, "rdma setup to %s:%u failed (%s): falling back to gRPC streaming",
		 p->rdma_addr, p->rdma_port, rerr);
	snprintf(why, sizeof(why), "rdma setup failed: %.120s", rerr);
	h3000__negotiate_reply__free_unpacked(*r, NULL);
	*r = NULL;
	int nrc = negotiate(p, &grpc_only, 1, r, err, errlen);
	if (nrc)
		return nrc;
	if ((*r)->transport != H3000__TRANSPORT__TRANSPORT_GRPC_STREAM &&
	    (*r)->transport != H3000__TRANSPORT__TRANSPORT_UNSPECIFIED) {
		snprintf(err, errlen, "ingest node chose %s after a GRPC_STREAM-only offer",
			 transport_name((*r)->transport));
		return -EPROTO;
	}
	snprintf(p->note, sizeof(p->note), "fallback: %s", why);
	return 0;
}

/* The transport the node's reply names (rdma_ok: we offered RDMA; why: why we did not). */
static int session_pick(struct ing_producer *p, H3000__NegotiateReply **r, bool rdma_ok,
			const char *why, char *err, size_t errlen)
{
	H3000__NegotiateReply *rr = *r;

	if ((rr->transport == H3000__TRANSPORT__TRANSPORT_RDMA_READ ||
	     (rr->transport == H3000__TRANSPORT__TRANSPORT_RDMA_WRITE &&
	      p->o.rdma_mode == ING_RDMA_MODE_WRITE)) && rdma_ok)
		return session_start_rdma(p, r, err, errlen);
	if (rr->transport != H3000__TRANSPORT__TRANSPORT_GRPC_STREAM &&
	    rr->transport != H3000__TRANSPORT__TRANSPORT_UNSPECIFIED) {
		snprintf(err, errlen, "ingest node chose transport %s which was not offered",
			 transport_name(rr->transport));
		return -EPROTO;
	}
	if (p->o.transport == ING_TRANSPORT_RDMA) {
		snprintf(err, errlen, "transport rdma requested but the ingest node offers %s%s%s",
			 transport_name(rr->transport), rr->message && *rr->message ? ": " : "",
			 rr->message ? rr->message : "");
		return -EOPNOTSUPP;
	}
	if (p->o.transport == ING_TRANSPORT_GRPC)
		snprintf(p->note, sizeof(p->note), "requested by the application");
	else if (!rdma_ok)
		snprintf(p->note, sizeof(p->note), "fallback: %s", why);
	else
		snprintf(p->note, sizeof(p->note), "fallback: the ingest node offers no RDMA%s%s",
			 rr->message && *rr->message ? ": " : "", rr->message ? rr->message : "");
	return 0;
}

/* The in-flight tables for the negotiated credits, and the session's one stream call. */
static int session_open_stream(struct ing_producer *p, char *err, size_t errlen)
{
	if (alloc_tables(p)) {
		snprintf(err, errlen, "out of memory (credits %u)", p->credits);
		return -ENOMEM;
	}
	char sid[24];
	snprintf(sid, sizeof(sid), "%" PRIu64, p->session_id);
	const char *md[] = { PRODUCER_SESSION_HEADER, sid, NULL };
	struct ing_grpc_ccall_cbs cbs = {
		.on_message = on_stream_message, .on_close = on_stream_close, .arg = p,
	};
	p->call = ing_grpc_chan_call(p->ch, p->xport->call_path, md, 0, &cbs);
	if (!p->call) {
		snprintf(err, errlen, "cannot open %s on %s", p->xport->call_path, p->server);
		return -EPIPE;
	}
	return 0;
}

struct ing_producer *producer_session_connect(const struct ing_producer_opts *o, char *err,
					      size_t errlen)
{
	return producer_session_connect_shared(o, NULL, NULL, err, errlen);
}

struct ing_producer *producer_session_connect_shared(const struct ing_producer_opts *o,
						     struct producer_shared *sh, const char *rail,
						     char *err, size_t errlen)
{
	H3000__NegotiateReply *r = NULL;
	H3000__Transport offer[3];
	size_t noffer = 0;
	bool rdma_ok = false;
	char why[160] = "";
	struct ing_producer *p = session_new(o, sh, rail, err, errlen);

	if (!p) {
		int e = errno;
		ING_INFO(COMP, "connect: %s", err);   /* the caller has err: said once */
		errno = e;
		return NULL;
	}
	int rc;
	if ((rc = session_offer(p, offer, &noffer, &rdma_ok, why, sizeof(why), err, errlen)) ||
	    (rc = session_dial(p, err, errlen)) ||
	    (rc = negotiate(p, offer, noffer, &r, err, errlen)) ||
	    (rc = session_pick(p, &r, rdma_ok, why, err, errlen)))
		goto fail;
	apply_reply(p, r);
	h3000__negotiate_reply__free_unpacked(r, NULL);
	r = NULL;
	/* auto taking the gRPC stream is what the caller allowed: the INFO line below says it
	 * (with the node's reason); no WARN per session (ing_producer_transport tells too) */
	if ((rc = session_open_stream(p, err, errlen)))
		goto fail;
	ING_INFO(COMP, "session %" PRIu64 " on %s: transport %s (%s), credits %u, max frame %" PRIu64
		 ", chunk %u", p->session_id, p->server, p->xport->name, p->note, p->credits,
		 p->max_frame, p->chunk_size);
	p->o.auth_token = NULL;   /* the caller's string: not kept past connect */
	p->o.tls_ca = p->o.tls_cert = p->o.tls_key = p->o.tls_server_name = NULL;
	return p;
fail:
	if (r)
		h3000__negotiate_reply__free_unpacked(r, NULL);
	/* the caller has err (ingest-send prints it): a log line would say it twice */
	ING_INFO(COMP, "connect: %s", err);
	producer_free(p);
	errno = rc < 0 ? -rc : EPROTO;
	return NULL;
}

/* ================================================================ submit / poll */

int producer_session_submit(struct ing_producer *p, const struct ing_frame_desc *d)
{
	if (p->broken || !p->call)
		return -EPIPE;
	const char *wafer = d->wafer_id && *d->wafer_id ? d->wafer_id : ING_DEFAULT_WAFER;
	if (!d->data || d->length == 0 || d->length > p->max_frame || !producer_id_ok(d->frame_id) ||
	    !producer_id_ok(wafer))
		return -EINVAL;
	if (producer_frame_find(p, wafer, d->frame_id))
		return -EINVAL;    /* same (wafer, frame) already in flight */
	if (p->nused + p->undelivered_terminal >= p->credits || !p->nfree)
		return -EAGAIN;
	if (p->xport->check) {
		int rc = p->xport->check(p, d);
		if (rc)
			return rc;
	}
	uint32_t slot = p->free_slots[--p->nfree];
	struct pframe *f = &p->frames[slot];
	snprintf(f->id, sizeof(f->id), "%s", d->frame_id);
	snprintf(f->wafer, sizeof(f->wafer), "%s", wafer);
	f->key = ing_id_pair_hash(f->wafer, f->id);
	f->data = d->data;
	f->len = d->length;
	f->sent = 0;
	f->timestamp = d->timestamp ? d->timestamp : ing_wall_ns();
	f->crc = d->has_crc ? d->crc32c : ing_crc32c(0, d->data, d->length);
	f->user = d->user;
	f->busy_refs = 0;
	f->received = f->done = f->node_failed = false;
	f->nheld = 0;
	f->xport_priv = NULL;
	f->t_submit_ns = ing_now_ns();
	f->deadline_ns = f->t_submit_ns + (uint64_t)p->o.frame_timeout_ms * 1000000ull;
	f->used = true;
	f->queued = true;
	p->nused++;
	ix_insert(p, f->key, (int32_t)slot);
	p->sendq[(p->sq_head + p->sq_len) % p->sq_cap] = slot;
	p->sq_len++;
	p->st.submitted++;
	(void)p->xport->pump(p);   /* a failure surfaces as acks from poll */
	return 0;
}

/* Acks go out at the caller's stride ack_size: our fields up to it, zeros past ours. */
static unsigned deliver(struct ing_producer *p, struct ing_ack *acks, size_t ack_size, unsigned max)
{
	unsigned n = 0;
	while (n < max && p->aq_len) {
		struct pack_entry *e = &p->ackq[p->aq_head];
		if (acks) {
			char *dst = (char *)acks + (size_t)n * ack_size;
			memcpy(dst, &e->a, SIZE_MIN(ack_size, sizeof(e->a)));
			if (ack_size > sizeof(e->a))
				memset(dst + sizeof(e->a), 0, ack_size - sizeof(e->a));
		}
		n++;
		if (e->terminal)
			p->undelivered_terminal--;
		p->aq_head = (p->aq_head + 1) % p->aq_cap;
		p->aq_len--;
	}
	return n;
}

/* One round of I/O: wait up to wait_ms on the channel, push sends, timeouts. */
static void drive(struct ing_producer *p, int wait_ms)
{
	if (p->ch && !p->broken) {
		(void)p->xport->pump(p);
		int rc = ing_grpc_chan_poll(p->ch, p->aq_len ? 0 : wait_ms);
		if (rc < 0 && p->broken) {
			p->broken_err = rc;   /* the call's on_close came first: keep the cause */
		} else if (rc < 0) {
			char m[128];
			snprintf(m, sizeof(m), "connection to %.64s lost: %s", p->server, strerror(-rc));
			producer_set_broken(p, rc, m);
		}
		if (!p->broken)
			(void)p->xport->pump(p);
		if (!p->broken && p->xport->poll) {
			rc = p->xport->poll(p);
			if (rc < 0)
				producer_set_broken(p, rc, "rdma connection lost");
		}
	}
	if (p->broken && (p->ch || p->nused))
		producer_teardown_conn(p);
	check_timeouts(p, ing_now_ns());
}

int producer_session_poll(struct ing_producer *p, struct ing_ack *acks, unsigned max,
			  size_t ack_size, int timeout_ms)
{
	if (timeout_ms < 0 || timeout_ms > p->o.frame_timeout_ms)
		timeout_ms = p->o.frame_timeout_ms;
	uint64_t deadline = ing_now_ns() + (uint64_t)timeout_ms * 1000000ull;

	for (;;) {
		/* always one pass of I/O, non-blocking when acks are already waiting */
		uint64_t now = ing_now_ns();
		int wait = now >= deadline ? 0 : (int)((deadline - now + 999999) / 1000000);
		if (wait > 50)
			wait = 50;    /* frame timeouts are checked between waits */
		drive(p, wait);
		if ((p->aq_len && max) || ing_now_ns() >= deadline)
			break;
		if (p->broken && !p->nused)
			break;
	}
	unsigned n = deliver(p, acks, ack_size, max);
	if (!n && p->broken && !p->nused)
		return p->broken_err < 0 ? p->broken_err : -EPIPE;
	return (int)n;
}

void producer_session_close(struct ing_producer *p, int timeout_ms)
{
	struct ing_ack scratch[16];

	if (timeout_ms < 0)
		timeout_ms = 0;
	uint64_t deadline = ing_now_ns() + (uint64_t)timeout_ms * 1000000ull;
	while (!p->broken && p->nused && ing_now_ns() < deadline) {
		uint64_t left = (deadline - ing_now_ns()) / 1000000;
		(void)producer_session_poll(p, scratch, 16, sizeof(scratch[0]), (int)(left ? left : 1));
	}
	if (p->nused)   /* the router has said it for the application's frames */
		ING_INFO(COMP, "session %" PRIu64 ": closing with %u frame(s) in flight", p->session_id,
			 p->nused);
	p->closing = true;
	/* half-close and let the node finish the call; bounded by what is left (>= 500 ms) */
	if (p->call && !p->broken && ing_grpc_ccall_half_close(p->call) == 0) {
		uint64_t end = ing_now_ns() + 500 * 1000000ull;
		if (deadline > end)
			end = deadline;
		while (p->call && p->ch && !p->broken && ing_now_ns() < end) {
			if (ing_grpc_chan_poll(p->ch, 50) < 0)
				break;
			deliver(p, NULL, 0, p->aq_len);
		}
	}
	if (p->call && p->ch)
		ing_grpc_ccall_cancel(p->call);
	ING_DBG(COMP, "session %" PRIu64 " closed: %" PRIu64 " submitted, %" PRIu64 " durable, %" PRIu64
		" failed", p->session_id, p->st.submitted, p->st.durable, p->st.failed);
	producer_free(p);
}

/* ================================================================ accessors */

enum ing_transport ing_producer_transport(const struct ing_producer *p)
{
	if (p && p->ops && p->ops->transport)
		return p->ops->transport(p);
	return p && p->xport ? p->xport->kind : ING_TRANSPORT_GRPC;
}

const char *ing_producer_transport_note(const struct ing_producer *p)
{
	return p ? p->note : "";
}

uint64_t ing_producer_session_id(const struct ing_producer *p)
{
	return p ? p->session_id : 0;
}

uint64_t ing_producer_max_frame(const struct ing_producer *p)
{
	return p ? p->max_frame : 0;
}

unsigned ing_producer_credits(const struct ing_producer *p)
{
	return p ? p->credits : 0;
}

unsigned producer_session_in_flight(const struct ing_producer *p)
{
	return p->nused + p->undelivered_terminal;
}

const struct producer_ops producer_session_ops = {
	.name = "session",
	.submit = producer_session_submit,
	.poll = producer_session_poll,
	.close = producer_session_close,
	.in_flight = producer_session_in_flight,
};
