/* SPDX-License-Identifier: Apache-2.0 */
/*
 * svc.c - the ingest service core: sessions, the table of admitted frames, the control
 * thread's mailbox (what the lcores and persistence workers tell it about each frame),
 * acks, the persistence retry list and the service's lifetime (Negotiate/Stats:
 * svc_unary.c).
 *
 * Everything runs on the control thread. One life cycle for every transport: a frame
 * takes its credit and slot from the admission layer (admit.c), gets an entry in svc->fr
 * (found by id through svc->ht) and its transport is started (xport.h); its bytes land
 * in the slot (svc_frame_complete when control copied them; ING_EV_RECEIVED on the mailbox
 * when a dataplane lcore did), persistence checks the crc and makes it durable, it comes
 * back as ING_EV_DONE on the same mailbox, is acked DURABLE on the call that sent it, and
 * admit_put gives slot and credit back, which wakes the frames waiting for them. One failure path
 * (svc_frame_fail: the transport's cancel, one Ack, the slot back) serves the deadline,
 * the stall check, a failed transfer and a bad chunk. The core knows transports only by
 * their ops tables. Calls finish from svc_kick's zero-delay timer, so nothing re-enters
 * a gRPC callback.
 */
#include "control/svc_internal.h"
#include "common/clock.h"
#include "common/ident.h"
#include "common/log.h"
#include "dataplane/rdma/rdma.h"
#include "h3000.pb-c.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#define SWEEP_NS 1000000000ull
#define RETRY_NS 1000000ull

void ing_svc_opts_init(struct ing_svc_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->credits_default = ING_DEFAULT_CREDITS;
	o->credits_max = ING_DEFAULT_CREDITS;
	o->max_chunk = ING_DEFAULT_MAX_CHUNK;
	o->max_msg = ING_DEFAULT_MAX_MSG;
	o->frame_timeout_ms = ING_DEFAULT_FRAME_TIMEOUT_MS;
	o->session_idle_ms = ING_DEFAULT_SESSION_IDLE_MS;
	o->max_sessions = ING_DEFAULT_MAX_SESSIONS;
	o->backlog_max = (16u << 20) + ING_DEFAULT_MAX_MSG;
	o->max_sessions_per_peer = ING_DEFAULT_MAX_SESSIONS_PER_PEER;
	o->slot_stall_ms = ING_DEFAULT_SLOT_STALL_MS;
	o->auth_fail_burst = ING_DEFAULT_AUTH_FAIL_BURST;
	o->auth_backoff_max_ms = ING_DEFAULT_AUTH_BACKOFF_MAX_MS;
}

/* ================================================================ peers */

#define AUTH_REFILL_NS 1000000000ull   /* one failed attempt back per second */

static bool peer_reusable(const struct svc_peer *p, uint64_t now)
{
	return !p->ip[0] || (p->refs == 0 && p->locked_until_ns <= now && p->fail_tat_ns <= now);
}

struct svc_peer *svc_peer_get(struct ing_svc *s, const char *ip)
{
	struct svc_peer *free_p = NULL;
	uint64_t now = ing_now_ns();
	if (!ip)
		return NULL;
	for (unsigned i = 0; i < s->npeers; i++) {
		struct svc_peer *p = &s->peers[i];
		if (p->ip[0] && strcmp(p->ip, ip) == 0) {
			p->refs++;
			return p;
		}
		if (!free_p && peer_reusable(p, now))
			free_p = p;
	}
	if (!free_p) {
		struct ing_log_ctx lc = { .peer = ip };
		ING_LOGC_RL(ING_LOG_WARN, "svc", &lc, "peer table full (%u): %s not tracked", s->npeers, ip);
		return NULL;
	}
	memset(free_p, 0, sizeof(*free_p));
	snprintf(free_p->ip, sizeof(free_p->ip), "%s", ip);
	free_p->refs = 1;
	return free_p;
}

void svc_peer_put(struct ing_svc *s, struct svc_peer *p)
{
	(void)s;
	if (p && p->refs)
		p->refs--;
}

bool svc_auth_locked(struct ing_svc *s, struct svc_peer *p, char *why, size_t whylen)
{
	uint64_t now = ing_now_ns();
	if (!p || p->locked_until_ns <= now)
		return false;
	s->c_auth_locked++;
	snprintf(why, whylen, "too many failed authentication attempts from %s: retry in %" PRIu64 " ms",
		 p->ip, (p->locked_until_ns - now + 999999) / 1000000u);
	return true;
}

void svc_auth_failed(struct ing_svc *s, struct svc_peer *p)
{
	uint64_t now = ing_now_ns();
	if (!p)
		return;
	uint64_t tat = p->fail_tat_ns > now ? p->fail_tat_ns : now;
	p->fail_tat_ns = tat + AUTH_REFILL_NS;
	if (p->fail_tat_ns - now <= (uint64_t)s->o.auth_fail_burst * AUTH_REFILL_NS)
		return;
	/* over the burst: refused for 1 s, 2 s, 4 s, ... up to the maximum */
	uint64_t max = (uint64_t)s->o.auth_backoff_max_ms * 1000000ull;
	uint64_t b = p->strikes < 20 ? AUTH_REFILL_NS << p->strikes : max;
	if (b > max)
		b = max;
	p->strikes++;
	p->locked_until_ns = now + b;
	struct ing_log_ctx lc = { .peer = p->ip };
	ING_LOGC_RL(ING_LOG_WARN, "svc", &lc, "%s: too many failed authentication attempts: refused for %" PRIu64 " ms",
		   p->ip, b / 1000000u);
}

void svc_auth_succeeded(struct svc_peer *p)
{
	if (p)
		p->strikes = 0;
}

/* ================================================================ protobuf-c arena */

/*
 * The arena holds any FrameMeta of known fields. One full of unknown fields (a newer
 * client's) is still valid protobuf, and protobuf-c keeps every unknown field: what does
 * not fit goes to malloc'ed overflow blocks (bounded per call), freed with the arena. Found
 * by tests/fuzz/fuzz_proto: such a FrameMeta was NACKed as malformed.
 */
static void *arena_alloc(void *data, size_t size)
{
	struct svc_call *pc = data;
	size_t off = (pc->arena_used + 15) & ~(size_t)15;
	if (size <= SVC_ARENA && off <= SVC_ARENA - size) {
		pc->arena_used = off + size;
		return pc->arena + off;
	}
	if (size > SVC_ARENA_OVF_MAX || pc->arena_ovf_bytes > SVC_ARENA_OVF_MAX - size)
		return NULL;
	uint8_t *b = malloc(16 + size);   /* first word: the chain; data 16-aligned */
	if (!b)
		return NULL;
	memcpy(b, &pc->arena_ovf, sizeof(void *));
	pc->arena_ovf = b;
	pc->arena_ovf_bytes += size;
	return b + 16;
}

static void arena_ovf_free(struct svc_call *pc)
{
	while (pc->arena_ovf) {
		void *nx;
		memcpy(&nx, pc->arena_ovf, sizeof(void *));
		free(pc->arena_ovf);
		pc->arena_ovf = nx;
	}
	pc->arena_ovf_bytes = 0;
}

static void arena_free(void *data, void *p)
{
	(void)data;
	(void)p; /* released all at once by svc_arena_reset */
}

void *svc_arena_reset(struct svc_call *pc)
{
	arena_ovf_free(pc);
	pc->arena_used = 0;
	return pc->arena;
}

void svc_arena_allocator(struct svc_call *pc, struct ProtobufCAllocator *a)
{
	a->alloc = arena_alloc;
	a->free = arena_free;
	a->allocator_data = pc;
	arena_ovf_free(pc);
	pc->arena_used = 0;
}

/* ================================================================ frame table */

/*
 * Open addressing on the hash of the frame id alone (not the wafer): continuation chunks
 * name only the frame id, and (wafer, frame) lookups probe the same chain. Entries are
 * held only while e->f is set, so the strings compared live in the frame descriptor.
 */
static inline uint32_t slot_of(const struct ing_svc *s, uint64_t h)
{
	return (uint32_t)(h ^ (h >> 32)) & s->ht_mask;
}

/* The admitted frame named frame_id that wafer_id (NULL: any) and call pc (NULL: any) match. */
static struct svc_frame *frame_lookup(struct ing_svc *s, const char *wafer_id,
				      const struct svc_call *pc, const char *frame_id)
{
	uint64_t h = ing_id_hash(frame_id, strlen(frame_id));
	for (uint32_t i = slot_of(s, h);; i = (i + 1) & s->ht_mask) {
		uint32_t v = s->ht[i];
		if (v == 0)
			return NULL;
		struct svc_frame *e = &s->fr[v - 1];
		if (e->id_hash == h && (!pc || e->call == pc) && strcmp(e->f->frame_id, frame_id) == 0 &&
		    (!wafer_id || strcmp(e->f->wafer_id, wafer_id) == 0))
			return e;
	}
}

struct svc_frame *svc_frame_find(struct ing_svc *s, const char *wafer_id, const char *frame_id)
{
	return frame_lookup(s, wafer_id, NULL, frame_id);
}

struct svc_frame *svc_frame_find_call(struct ing_svc *s, const struct svc_call *pc,
				      const char *frame_id)
{
	return frame_lookup(s, NULL, pc, frame_id);
}

static void ht_insert(struct ing_svc *s, struct svc_frame *e)
{
	uint32_t i = slot_of(s, e->id_hash);
	while (s->ht[i] != 0)
		i = (i + 1) & s->ht_mask;
	s->ht[i] = e->idx + 1;
}

/* Linear probing with backward-shift deletion: no tombstones. */
static void ht_remove(struct ing_svc *s, struct svc_frame *e)
{
	uint32_t i = slot_of(s, e->id_hash);
	while (s->ht[i] != e->idx + 1) {
		if (s->ht[i] == 0)
			return;
		i = (i + 1) & s->ht_mask;
	}
	s->ht[i] = 0;
	for (uint32_t j = (i + 1) & s->ht_mask; s->ht[j] != 0; j = (j + 1) & s->ht_mask) {
		uint32_t k = slot_of(s, s->fr[s->ht[j] - 1].id_hash);
		/* leave the entry if its home k lies cyclically in (i, j] */
		bool stay = (i <= j) ? (i < k && k <= j) : (i < k || k <= j);
		if (stay)
			continue;
		s->ht[i] = s->ht[j];
		s->ht[j] = 0;
		i = j;
	}
}

/* The frame's next check: its deadline, or the moment it would count as stalled. */
static uint64_t frame_check_at(const struct svc_frame *e)
{
	uint64_t stall = e->progress_ns + (uint64_t)e->svc->o.slot_stall_ms * 1000000ull;
	return stall < e->deadline_ns ? stall : e->deadline_ns;
}

/*
 * Completion deadline, and the stall check: a slot whose bytes stop coming (a meta-only
 * frame, a client that went quiet) is given back after slot_stall_ms rather than held to
 * the frame timeout, so such frames cannot keep other producers waiting. Bytes that arrive
 * only move progress_ns; the timer is re-armed here, not on the data path.
 */
static void frame_timeout_cb(void *arg)
{
	struct svc_frame *e = arg;
	if (e->state != FE_FILLING)
		return;
	struct ing_frame *f = e->f;
	uint64_t now = ing_now_ns();
	if (now >= e->deadline_ns) {
		svc_frame_fail(e, ING_E_DEADLINE, true,
			       "frame %s: not complete after %u ms (%" PRIu64 " of %" PRIu64 " bytes)",
			       f->frame_id, e->svc->o.frame_timeout_ms, f->filled, f->length);
		return;
	}
	uint64_t at = frame_check_at(e);
	if (now < at) {
		ing_timer_arm(e->svc->loop, &e->timer, at);
		return;
	}
	e->svc->c_stalled++;
	svc_frame_fail(e, ING_E_DEADLINE, true,
		       "frame %s: no bytes for %u ms (%" PRIu64 " of %" PRIu64
		       " bytes); slot released, send it again", f->frame_id, e->svc->o.slot_stall_ms,
		       f->filled, f->length);
}

struct svc_frame *svc_frame_admit(struct ing_svc *s, struct svc_call *pc,
				  const struct xport_ops *xp, struct ing_frame *f, int *rc)
{
	struct svc_frame *e = &s->fr[f->index];   /* one record per pool slot */
	if (f->index >= s->nfr || e->state != FE_FREE) {   /* cannot happen */
		ING_ERR("svc", "frame %s: slot %u has no free record", f->frame_id, f->index);
		admit_put(&s->adm, f, pc->sess ? &pc->sess->cr : NULL, pc->peer ? &pc->peer->share : NULL);
		*rc = -ENOSPC;
		return NULL;
	}
	s->nfr_used++;
	e->f = f;
	e->xp = xp;
	e->call = pc;
	e->sess = pc->sess;     /* admit_try counted the credit and the peer's slot */
	e->peer = pc->peer;
	if (e->peer)
		e->peer->refs++;    /* the entry stays while the frame holds its slot */
	e->id_hash = ing_id_hash(f->frame_id, strlen(f->frame_id));
	s->admissions++;
	e->length = f->length;
	s->inflight_bytes += e->length;   /* the high-water mark counts them (svc_tier.c) */
	e->state = FE_FILLING;
	ht_insert(s, e);
	pc->open_frames++;
	e->progress_ns = ing_now_ns();
	e->deadline_ns = e->progress_ns + (uint64_t)s->o.frame_timeout_ms * 1000000ull;
	/* a dataplane transfer is bounded by its lcore: no timer may free the slot under it */
	if (!(xp->flags & XPORT_F_DATAPLANE))
		ing_timer_arm(s->loop, &e->timer, frame_check_at(e));
	*rc = xp->start ? xp->start(e) : 0;
	if (*rc) {
		e->call = NULL;          /* the caller answers the frame */
		pc->open_frames--;
		svc_frame_release(e);
		return NULL;
	}
	return e;
}

void svc_frame_progress(struct svc_frame *e)
{
	e->progress_ns = ing_now_ns();   /* frame_timeout_cb reads it */
}

/* The slot of a session goes free (expired, evicted, its implicit stream ended). */
static void session_drop(struct ing_svc *s, struct svc_session *ss)
{
	if (ss->peer) {
		ss->peer->sessions--;
		svc_peer_put(s, ss->peer);
		ss->peer = NULL;
	}
	ss->in_use = false;
	s->nsess--;
}

static void session_maybe_idle(struct ing_svc *s, struct svc_session *ss)
{
	if (ss->cr.inflight)
		return;
	ss->idle_since_ns = ing_now_ns();   /* implicit with a stream: idle since (eviction) */
	if (ss->streams)
		return;
	if (ss->implicit)
		session_drop(s, ss);
}

/* Give the slot back, drop the entry, release the credit. The call (if any) learns it. */
void svc_frame_release(struct svc_frame *e)
{
	struct ing_svc *s = e->svc;
	struct svc_call *pc = e->call;

	struct svc_session *ss = e->sess;

	ing_timer_cancel(s->loop, &e->timer);
	ht_remove(s, e);
	/* slot, credit and the peer's count go back through admission, which wakes waiters */
	admit_put(&s->adm, e->f, ss ? &ss->cr : NULL, e->peer ? &e->peer->share : NULL);
	svc_peer_put(s, e->peer);
	s->inflight_bytes -= e->length;
	svc_tier_frame_finished(s, e->length);   /* stored until the tier has measured again */
	e->f = NULL;
	e->xp = NULL;
	e->call = NULL;
	e->state = FE_FREE;
	e->peer = NULL;
	e->sess = NULL;
	if (ss)
		session_maybe_idle(s, ss);
	s->nfr_used--;
	if (pc) {
		pc->open_frames--;
		svc_call_check_done(pc);
	}
	svc_kick(s);
}

void svc_frame_fail(struct svc_frame *e, int code, bool retryable, const char *fmt, ...)
{
	struct svc_ack a = { .ok = false, .code = (uint8_t)code, .retryable = retryable };
	va_list ap;
	svc_ack_set_id(&a, e->f->wafer_id, e->f->frame_id);
	va_start(ap, fmt);
	vsnprintf(a.msg, sizeof(a.msg), fmt, ap);
	va_end(ap);
	e->svc->c_failed++;
	svc_metrics_result(e->svc, e->xp->xport, SVC_R_FAILED, e->length);
	svc_ops_frame(e->svc, e->peer, code, 0);
	struct ing_log_ctx lc = svc_log_frame(e);
	ING_LOGC_RL(ING_LOG_WARN, "svc", &lc, "%s", a.msg);
	if (e->call) {
		if (e->xp->cancel)
			e->xp->cancel(e);
		svc_send_ack(e->call, &a);
	}
	svc_frame_release(e);
}

static void persist_retry(struct ing_svc *s)
{
	while (s->retry_len) {
		struct svc_frame *e = &s->fr[s->retry[s->retry_head]];
		if (ing_persist_submit(s->persist, e->f) != 0) {
			if (!ing_timer_armed(&s->retry_timer))
				ing_timer_arm(s->loop, &s->retry_timer, ing_now_ns() + RETRY_NS);
			return;
		}
		e->state = FE_PERSISTING;
		s->retry_head = (s->retry_head + 1) % s->nfr;
		s->retry_len--;
	}
}

static void retry_timer_cb(void *arg)
{
	persist_retry(arg);
}

/* ING_EV_RECEIVED: a dataplane lcore filled the slot and sends the frame to persistence. */
static void frame_received(struct svc_frame *e, uint64_t t_ns)
{
	struct ing_svc *s = e->svc;
	uint64_t t_admit = e->f->t_admit_ns;
	uint64_t lat = t_ns > t_admit ? t_ns - t_admit : 0;

	s->c_received++;
	s->c_bytes_rx += e->length;
	svc_metrics_received(s, e->xp->xport, e->length, lat);
	s->persisting++;
	e->state = FE_PERSISTING;
	svc_ack_received(e, lat);
}

/* All bytes are in: ack RECEIVED, hand the frame to persistence (never dropped). */
void svc_frame_complete(struct svc_frame *e)
{
	struct ing_svc *s = e->svc;
	struct ing_frame *f = e->f;

	ing_timer_cancel(s->loop, &e->timer);
	f->t_received_ns = ing_now_ns();
	s->c_received++;
	s->c_bytes_rx += f->length;
	svc_metrics_received(s, f->transport, f->length, f->t_received_ns - f->t_admit_ns);
	svc_ack_received(e, f->t_received_ns - f->t_admit_ns);
	s->persisting++;
	if (s->retry_len == 0 && ing_persist_submit(s->persist, f) == 0) {
		e->state = FE_PERSISTING;
		return;
	}
	struct ing_log_ctx lc = svc_log_frame(e);
	ING_LOGC(ING_LOG_DEBUG, "svc", &lc, "frame %s: persistence ring full, queued for retry (%u waiting)",
		 f->frame_id, s->retry_len + 1);
	e->state = FE_RETRY;
	s->retry[(s->retry_head + s->retry_len) % s->nfr] = e->idx;
	s->retry_len++;
	persist_retry(s);
}


/* The record of a frame the service holds in state st, or NULL. */
static struct svc_frame *frame_record(struct ing_svc *s, const struct ing_frame *f, uint8_t st)
{
	struct svc_frame *e = f->index < s->nfr ? &s->fr[f->index] : NULL;

	return e && e->f == f && e->state == st ? e : NULL;
}

/*
 * ING_EV_DONE: the frame is control's again. Persisted (or failed in persistence) after
 * its RECEIVED; or failed by the dataplane lcore that was filling it (no RECEIVED).
 */
static void frame_done(struct ing_svc *s, struct ing_frame *f)
{
	struct svc_frame *e = frame_record(s, f, FE_FILLING);

	if (e) {   /* the transfer failed in the dataplane */
		s->c_rdma_errors++;
		svc_frame_fail(e, f->status ? f->status : ING_E_INTERNAL, f->retryable, "frame %s: %s",
			       f->frame_id, f->msg[0] ? f->msg : "transfer failed");
		return;
	}
	e = frame_record(s, f, FE_PERSISTING);
	if (!e) {
		struct ing_log_ctx lc = { .wafer = f->wafer_id, .frame = f->frame_id };
		ING_LOGC(ING_LOG_ERR, "svc", &lc, "frame %s: ack for a frame the service does not hold; "
			 "slot returned", f->frame_id);
		ing_pool_put(f);
		return;
	}
	uint64_t now = ing_now_ns();
	uint64_t t_dur = f->t_durable_ns ? f->t_durable_ns : now;
	struct svc_ack a = {
		.ok = f->status == ING_E_NONE,
		.code = (uint8_t)f->status,
		.retryable = f->retryable,
		.duplicate = f->duplicate,
		.crc32c = f->crc_computed,
		/* a failed frame has no stage: DURABLE would read as stored to a client that
		   looks at the stage alone (Ack.stored says it plainly) */
		.stage = f->status == ING_E_NONE ? H3000__ACK_STAGE__ACK_STAGE_DURABLE :
						   H3000__ACK_STAGE__ACK_STAGE_UNSPECIFIED,
		.latency_ns = t_dur > f->t_admit_ns ? t_dur - f->t_admit_ns : 0,
	};
	svc_ack_set_id(&a, f->wafer_id, f->frame_id);
	if (f->status != ING_E_NONE) {
		size_t n = strnlen(f->msg, sizeof(f->msg) - 1);
		memcpy(a.msg, f->msg, n);
		a.msg[n] = '\0';
		if (n == 0)
			snprintf(a.msg, sizeof(a.msg), "frame %s: persistence failed (code %d)",
				 f->frame_id, (int)f->status);
		s->c_failed++;
		struct ing_log_ctx lc = svc_log_frame(e);
		ING_LOGC_RL(ING_LOG_WARN, "svc", &lc, "%s", a.msg);
	} else {
		memcpy(a.msg, "ok", 3);   /* what the seed's consumer says */
		s->c_durable++;
		s->c_bytes_durable += f->length;
		if (f->duplicate)
			s->c_dup++;
	}
	s->persisting--;
	svc_metrics_durable(s, f, now, a.stage_ns);   /* the stages, in the one latency view */
	svc_ops_frame(s, e->peer, f->status, f->length);
	if (e->call)
		svc_send_ack(e->call, &a);
	else
		s->c_orphan_acks++;
	svc_frame_release(e);
}

/* One event on the control thread's mailbox (calls run inside ing_mbox_run). */
static void on_event(void *ctx, const struct ing_msg *m)
{
	struct ing_svc *s = ctx;
	struct svc_frame *e;

	switch (m->kind) {
	case ING_EV_RECEIVED:
		e = frame_record(s, m->f, FE_FILLING);
		if (e)
			frame_received(e, m->f->t_received_ns);
		else
			ING_LOG_RL(ING_LOG_ERR, "svc", "frame %s: RECEIVED for a frame not being filled",
				   m->f->frame_id);
		break;
	case ING_EV_GRANTED:
		e = frame_record(s, m->f, FE_FILLING);
		if (e)
			svc_frame_granted(e, m->val, (uint32_t)(m->u64 >> 32), (uint32_t)m->u64);
		break;
	case ING_EV_DONE:
		frame_done(s, m->f);
		break;
	case ING_EV_CONN_ERROR:
	case ING_EV_CONN_RELEASED:
		ing_rdma_conn_event(s->rdma, m);   /* NULL engine (gone): nothing to do */
		break;
	case ING_EV_TIER_READ_DONE:
		svc_tier_read_done(s, m->arg);
		break;
	default:
		ING_LOG_RL(ING_LOG_ERR, "svc", "unknown message %u on the control mailbox", m->kind);
		break;
	}
}

#define MBOX_BUDGET 256u   /* messages per loop wake-up: sockets and timers get their turn */

static void mbox_cb(void *arg, uint32_t events)
{
	struct ing_svc *s = arg;
	unsigned done = 0, n;
	(void)events;

	do {
		n = ing_mbox_run(s->ctl, MBOX_BUDGET - done, on_event, s);
		done += n;
	} while (done < MBOX_BUDGET && (n || !ing_mbox_idle(s->ctl)));
	/* budget spent: the doorbell was not consumed, so the loop calls again at once */
	persist_retry(s);
}

/* ================================================================ sessions */

static uint64_t random_id(void)
{
	uint64_t id = 0;
	if (getrandom(&id, sizeof(id), GRND_NONBLOCK) != (ssize_t)sizeof(id))
		id = ing_now_ns() * 0x9e3779b97f4a7c15ull;
	return id;
}

struct svc_session *svc_session_find(struct ing_svc *s, uint64_t id)
{
	for (unsigned i = 0; i < s->o.max_sessions; i++)
		if (s->sess[i].in_use && s->sess[i].id == id)
			return &s->sess[i];
	return NULL;
}

static void sweep(struct ing_svc *s)
{
	uint64_t now = ing_now_ns();
	uint64_t idle = (uint64_t)s->o.session_idle_ms * 1000000ull;
	for (unsigned i = 0; i < s->o.max_sessions; i++) {
		struct svc_session *ss = &s->sess[i];
		if (!ss->in_use || ss->streams || ss->cr.inflight)
			continue;
		if (now - ss->idle_since_ns >= idle) {
			struct ing_log_ctx lc = svc_log_session(ss);
			ING_LOGC(ING_LOG_INFO, "svc", &lc, "session %" PRIu64 " (%s) expired after %u ms idle",
				 ss->id, ss->client[0] ? ss->client : "implicit", s->o.session_idle_ms);
			session_drop(s, ss);
		}
	}
}

static void sweep_timer_cb(void *arg)
{
	struct ing_svc *s = arg;
	sweep(s);
	ing_timer_arm(s->loop, &s->sweep_timer, ing_now_ns() + SWEEP_NS);
}

#define EVICT_STREAM_IDLE_NS 1000000000ull   /* an implicit stream idle this long may go */

/* An implicit session whose stream has nothing in flight and nothing waiting. */
static bool stream_idle(const struct svc_session *ss, uint64_t now)
{
	const struct svc_call *pc = ss->icall;
	if (!ss->implicit || ss->cr.inflight || now - ss->idle_since_ns < EVICT_STREAM_IDLE_NS)
		return false;
	return !pc || !(pc->blocked || pc->finished || pc->want_finish);
}

/*
 * Table full (or the peer at its limit when peer is set): give up the session idle
 * longest, so the newcomer is served. First choice: negotiated sessions with no stream and
 * nothing in flight (a burst of Negotiates does not expire a session negotiated a moment
 * ago whose producer is about to open its stream); then the implicit session of a stream
 * that has had nothing in flight for a while (its call ends RESOURCE_EXHAUSTED). NULL when
 * every session is busy.
 */
static struct svc_session *evict_oldest_idle(struct ing_svc *s, struct svc_peer *peer,
					     const char *newcomer)
{
	struct svc_session *old = NULL;
	uint64_t now = ing_now_ns();
	for (int pass = 0; pass < 2 && !old; pass++) {
		for (unsigned i = 0; i < s->o.max_sessions; i++) {
			struct svc_session *ss = &s->sess[i];
			if (!ss->in_use || ss->cr.inflight || (peer && ss->peer != peer))
				continue;
			if (pass == 0 ? ss->streams != 0 : !stream_idle(ss, now))
				continue;
			if (!old || ss->idle_since_ns < old->idle_since_ns)
				old = ss;
		}
	}
	if (!old)
		return NULL;
	struct ing_log_ctx lc = svc_log_session(old);
	ING_LOGC(ING_LOG_INFO, "svc", &lc, "%s (%u): session %" PRIu64 " (%s, %s), idle %" PRIu64
		 " ms, evicted for a new session of %s", peer ? "peer at its session limit" : "session table full",
		 peer ? s->o.max_sessions_per_peer : s->o.max_sessions, old->id,
		 old->client[0] ? old->client : (old->implicit ? "implicit" : "?"),
		 old->peer ? old->peer->ip : "?", (uint64_t)((now - old->idle_since_ns) / 1000000u),
		 newcomer);
	s->c_evicted++;
	struct svc_call *pc = old->icall;   /* negotiated ones have no stream (pass 0) */
	if (pc) {
		pc->sess = NULL;
		pc->evicted = true;
		svc_call_finish_later(pc, ING_GRPC_RESOURCE_EXHAUSTED,
				      "session evicted: the session table is full and this stream was idle");
	}
	session_drop(s, old);
	return old;
}

struct svc_session *svc_session_new(struct ing_svc *s, struct svc_peer *peer)
{
	struct svc_session *ss = NULL;
	const char *who = peer ? peer->ip : "?";
	if (peer && peer->sessions >= s->o.max_sessions_per_peer &&
	    !evict_oldest_idle(s, peer, who)) {
		snprintf(s->sess_why, sizeof(s->sess_why),
			 "%s holds %u sessions, all busy (limit per peer address)", who, peer->sessions);
		return NULL;
	}
	for (unsigned i = 0; i < s->o.max_sessions; i++) {
		if (!s->sess[i].in_use) {
			ss = &s->sess[i];
			break;
		}
	}
	if (!ss)
		ss = evict_oldest_idle(s, NULL, who);
	if (!ss) {
		snprintf(s->sess_why, sizeof(s->sess_why), "session table full (%u sessions, all busy)",
			 s->o.max_sessions);
		return NULL;
	}
	memset(ss, 0, sizeof(*ss));
	if (peer) {
		ss->peer = peer;
		peer->refs++;
		peer->sessions++;
	}
	do {
		ss->id = random_id();
	} while (ss->id == 0 || svc_session_find(s, ss->id));
	ss->in_use = true;
	ss->idle_since_ns = ing_now_ns();
	ss->cr.credits = s->o.credits_default < s->o.credits_max ? s->o.credits_default : s->o.credits_max;
	ss->max_frame = s->max_frame;
	ss->transport = ING_XPORT_GRPC;
	s->nsess++;
	return ss;
}

struct svc_session *svc_session_implicit(struct ing_svc *s, struct svc_peer *peer)
{
	struct svc_session *ss = svc_session_new(s, peer);
	if (ss)
		ss->implicit = true;
	return ss;
}

/* ================================================================ calls */

struct svc_call *svc_call_new(struct ing_svc *s, struct ing_grpc_call *c,
			      const struct xport_ops *xp, size_t size)
{
	struct svc_call *pc = size >= sizeof(*pc) ? calloc(1, size) : NULL;
	if (!pc) {
		struct ing_log_ctx lc = { .peer = ing_grpc_call_peer(c) };
		ING_LOGC(ING_LOG_ERR, "svc", &lc, "out of memory for a call from %s", ing_grpc_call_peer(c));
		return NULL;
	}
	pc->svc = s;
	pc->call = c;
	pc->id = ing_grpc_call_id(c);
	pc->xp = xp;
	pc->peer = svc_peer_get(s, ing_grpc_call_peer_addr(c));
	pc->next = s->calls;
	if (s->calls)
		s->calls->prev = pc;
	s->calls = pc;
	s->ncalls++;
	return pc;
}

/* The call is over (on_close): partial frames are discarded, persisted ones finish alone. */
void svc_call_free(struct svc_call *pc)
{
	struct ing_svc *s;
	if (!pc)
		return;
	s = pc->svc;
	if (pc->want_finish)
		s->want_finish--;
	pc->want_finish = false;
	pc->finished = true;
	if (pc->xp->conn_lost)
		pc->xp->conn_lost(pc);   /* its queued admission request, its own state */
	for (uint32_t i = 0; i < s->nfr; i++) {
		struct svc_frame *e = &s->fr[i];
		if (e->state == FE_FREE || e->call != pc)
			continue;
		if (e->state == FE_FILLING && !(e->xp->flags & XPORT_F_DATAPLANE)) {
			struct ing_log_ctx lc = svc_log_frame(e);
			ING_LOGC_RL(ING_LOG_INFO, "svc", &lc, "frame %s: stream from %s closed after %" PRIu64
				   " of %" PRIu64 " bytes; partial frame discarded", e->f->frame_id,
				   ing_grpc_call_peer(pc->call), e->f->filled, e->f->length);
			s->c_failed++;
			svc_metrics_result(s, e->xp->xport, SVC_R_FAILED, e->length);
			svc_ops_frame(s, e->peer, ING_E_CANCELLED, 0);
			if (e->xp->cancel)
				e->xp->cancel(e);
			e->call = NULL;
			svc_frame_release(e);
		} else {
			/* persisting, or a dataplane transfer (it comes back as DONE): detach */
			e->call = NULL;
		}
	}
	if (pc->sess) {
		if (pc->sess->icall == pc)
			pc->sess->icall = NULL;
		pc->sess->streams--;
		session_maybe_idle(s, pc->sess);
	}
	if (pc->prev)
		pc->prev->next = pc->next;
	else
		s->calls = pc->next;
	if (pc->next)
		pc->next->prev = pc->prev;
	s->ncalls--;
	svc_peer_put(s, pc->peer);
	free(pc->aq);
	arena_ovf_free(pc);
	free(pc);
}

int svc_call_bind_session(struct svc_call *pc, uint64_t sid)
{
	struct ing_svc *s = pc->svc;
	struct svc_session *ss;
	if (pc->sess)
		return 0;
	if (pc->evicted) {
		snprintf(pc->err_msg, sizeof(pc->err_msg), "session evicted: the session table is full");
		pc->err_status = ING_GRPC_RESOURCE_EXHAUSTED;
		return -ENOSPC;
	}
	if (s->auth && svc_auth_locked(s, pc->peer, pc->err_msg, sizeof(pc->err_msg))) {
		pc->err_status = ING_GRPC_RESOURCE_EXHAUSTED;
		return -EAGAIN;
	}
	if (sid) {
		ss = svc_session_find(s, sid);
		if (!ss) {
			snprintf(pc->err_msg, sizeof(pc->err_msg),
				 "unknown session %" PRIu64 " (expired or never negotiated)", sid);
			pc->err_status = ING_GRPC_FAILED_PRECONDITION;
			if (s->auth)   /* a guessed session id is a failed attempt too */
				svc_auth_failed(s, pc->peer);
			return -ENOENT;
		}
		/* a session id alone is no credential: only its owner may use it */
		const char *ident = ing_grpc_call_identity(pc->call);
		bool mine = ss->implicit ? false :
			    ss->owner_ident[0] ? ident && strcmp(ident, ss->owner_ident) == 0 :
			    ss->owner_conn == ing_grpc_call_conn_id(pc->call);
		if (!mine) {
			snprintf(pc->err_msg, sizeof(pc->err_msg),
				 "session %" PRIu64 " belongs to another client (it is bound to the %s that negotiated it)",
				 sid, ss->owner_ident[0] ? "client certificate" : "connection");
			pc->err_status = ING_GRPC_PERMISSION_DENIED;
			struct ing_log_ctx lc = svc_log_call(pc);
			lc.session = sid;
			ING_LOGC_RL(ING_LOG_WARN, "svc", &lc, "%s (%s): %s", ing_grpc_call_peer(pc->call),
				    ident ? ident : "no certificate", pc->err_msg);
			if (s->auth)
				svc_auth_failed(s, pc->peer);
			return -EACCES;
		}
		if (s->auth && !ss->authed) {   /* cannot happen today: every session is */
			snprintf(pc->err_msg, sizeof(pc->err_msg),
				 "session %" PRIu64 " was not created by an authenticated Negotiate", sid);
			pc->err_status = ING_GRPC_UNAUTHENTICATED;
			s->c_auth_refused++;
			return -EACCES;
		}
	} else if (s->auth) {
		/* no implicit sessions: the session is the proof of an authenticated Negotiate */
		snprintf(pc->err_msg, sizeof(pc->err_msg),
			 "this node requires Negotiate with an authToken: name the session it returns "
			 "(h3000-session-id header or sessionId)");
		pc->err_status = ING_GRPC_UNAUTHENTICATED;
		s->c_auth_refused++;
		svc_auth_failed(s, pc->peer);
		return -EACCES;
	} else {
		ss = svc_session_implicit(s, pc->peer);
		if (!ss) {
			snprintf(pc->err_msg, sizeof(pc->err_msg), "%s", s->sess_why);
			pc->err_status = ING_GRPC_RESOURCE_EXHAUSTED;
			return -ENOSPC;
		}
		ss->owner_conn = ing_grpc_call_conn_id(pc->call);
		ss->icall = pc;
	}
	pc->sess = ss;
	ss->streams++;
	return 0;
}

bool svc_auth_token_ok(const struct ing_svc *s, const char *t, size_t n)
{
	volatile unsigned char d = 0;

	if (!s->auth || !t)
		return false;
	/* every byte of the secret is always compared, and the lengths must be equal: the
	 * time depends on the lengths only; "token\0anything" is n > auth_len: refused */
	for (size_t i = 0; i < s->auth_len; i++)
		d |= (unsigned char)s->auth_token[i] ^ (unsigned char)(i < n ? t[i] : 0);
	d |= (unsigned char)(n != s->auth_len);
	return d == 0;
}

/* Session from the h3000-session-id header, if the request carries one. */
int svc_call_bind_header(struct svc_call *pc)
{
	const char *h = ing_grpc_call_header(pc->call, "h3000-session-id");
	if (!h)
		return 0;
	char *end = NULL;
	errno = 0;
	unsigned long long v = strtoull(h, &end, 10);
	if (errno || end == h || *end != '\0') {
		snprintf(pc->err_msg, sizeof(pc->err_msg), "h3000-session-id is not a decimal number");
		pc->err_status = ING_GRPC_INVALID_ARGUMENT;
		return -EINVAL;
	}
	return svc_call_bind_session(pc, v);
}

void svc_call_pause(struct svc_call *pc, unsigned why)
{
	if (pc->pause_why == 0 && !pc->finished)
		ing_grpc_call_pause(pc->call);
	pc->pause_why |= why;
}

void svc_call_unpause(struct svc_call *pc, unsigned why)
{
	if (!(pc->pause_why & why))
		return;
	pc->pause_why &= ~why;
	if (pc->pause_why == 0 && !pc->finished)
		ing_grpc_call_resume(pc->call);
}

static bool call_done(const struct svc_call *pc)
{
	return pc->half_closed && pc->open_frames == 0 && !pc->blocked && pc->aq_len == 0;
}

/* Finish from the loop (svc_kick), never inside a chain of callbacks. */
void svc_call_finish_later(struct svc_call *pc, int status, const char *msg)
{
	if (pc->finished || pc->want_finish)
		return;
	pc->want_finish = true;
	pc->fin_status = status;
	pc->fin_msg = msg;
	pc->svc->want_finish++;
	svc_kick(pc->svc);
}

/* Half-closed and nothing left: finish OK (from the loop, never inside a callback chain). */
void svc_call_check_done(struct svc_call *pc)
{
	if (!pc->finished && !pc->want_finish && call_done(pc))
		svc_call_finish_later(pc, ING_GRPC_OK, NULL);
}

/* ================================================================ acks */

/* ---- the rest of the transports' view of the core (control/xport.h) */

uint64_t svc_call_session(const struct svc_call *pc)
{
	return pc->sess ? pc->sess->id : 0;
}

bool svc_call_push(const struct svc_call *pc)
{
	return pc->sess && pc->sess->push;
}

void svc_call_error(struct svc_call *pc, int status, const char *fmt, ...)
{
	va_list ap;

	pc->err_status = status;
	va_start(ap, fmt);
	vsnprintf(pc->err_msg, sizeof(pc->err_msg), fmt, ap);
	va_end(ap);
}

bool svc_call_closing(const struct svc_call *pc)
{
	return pc->finished || pc->want_finish;
}

void svc_call_set_blocked(struct svc_call *pc, bool blocked)
{
	pc->blocked = blocked;
}

void svc_call_half_close(struct svc_call *pc)
{
	pc->half_closed = true;
}

void svc_call_end_frames(struct svc_call *pc, const char *why)
{
	struct ing_svc *s = pc->svc;

	for (uint32_t i = 0; i < s->nfr && pc->open_frames; i++) {
		struct svc_frame *e = &s->fr[i];
		if (e->state == FE_FILLING && e->call == pc)
			svc_frame_fail(e, ING_E_CANCELLED, true,
				       "frame %s: %s after %" PRIu64 " of %" PRIu64 " bytes",
				       e->f->frame_id, why, e->f->filled, e->length);
	}
}

void svc_call_admit_req(struct svc_call *pc, struct admit_req *r, const struct xport_ops *xp,
			void *owner, uint64_t length)
{
	r->xp = xp;
	r->owner = owner;
	r->credit = pc->sess ? &pc->sess->cr : NULL;
	r->share = pc->peer ? &pc->peer->share : NULL;
	r->length = length;
	/* an RDMA session's frames take slots of its rail's region (local to that NIC) */
	r->region = svc_engine_session_region(pc->svc, pc->sess ? pc->sess->id : 0);
}

struct admit *svc_admission(struct ing_svc *s)
{
	return &s->adm;
}

void svc_note_parked(struct ing_svc *s)
{
	s->c_ctl_parked++;
}

const struct ing_svc_opts *svc_opts(const struct ing_svc *s)
{
	return &s->o;
}

struct ing_rdma *svc_rdma_engine(const struct ing_svc *s)
{
	return s->rdma;
}

struct ing_frame *svc_frame_ing(const struct svc_frame *e)
{
	return e->f;
}

struct ing_svc *svc_frame_service(const struct svc_frame *e)
{
	return e->svc;
}

struct svc_call *svc_frame_call(const struct svc_frame *e)
{
	return e->call;
}

bool svc_frame_filling(const struct svc_frame *e)
{
	return e->state == FE_FILLING;
}

static size_t ack_encode(const struct svc_ack *a, uint8_t *buf, size_t cap)
{
	H3000__Ack m = H3000__ACK__INIT;
	m.frameid = (char *)a->frame_id;
	m.waferid = (char *)a->wafer_id;
	m.ok = a->ok;
	m.msg = (char *)a->msg;
	m.stage = (H3000__AckStage)a->stage;
	m.code = (H3000__ErrorCode)a->code;
	m.retryable = a->retryable;
	m.duplicate = a->duplicate;
	m.crc32c = a->crc32c;
	m.latencyns = a->latency_ns;
	m.stagereceivedns = a->stage_ns[SVC_ST_RECEIVED];
	m.stagecrcns = a->stage_ns[SVC_ST_CRC];
	m.stagewrittenns = a->stage_ns[SVC_ST_WRITTEN];
	m.stagesyncedns = a->stage_ns[SVC_ST_SYNCED];
	m.stagecataloguedns = a->stage_ns[SVC_ST_CATALOGUED];
	m.stageackns = a->stage_ns[SVC_ST_ACK];
	m.grantid = a->grant_id;
	m.grantaddr = a->grant_addr;
	m.grantrkey = a->grant_rkey;
	m.grantlength = a->grant_length;
	m.grantqpnum = a->grant_qp;
	m.stored = a->ok && a->stage == H3000__ACK_STAGE__ACK_STAGE_DURABLE;
	size_t n = h3000__ack__get_packed_size(&m);
	if (n > cap)
		return 0;
	return h3000__ack__pack(&m, buf);
}

static int aq_push(struct svc_call *pc, const struct svc_ack *a)
{
	if (!pc->aq) {
		pc->aq_cap = 256;
		pc->aq = malloc(pc->aq_cap * sizeof(*pc->aq));
		if (!pc->aq)
			return -ENOMEM;
	}
	if (pc->aq_len == pc->aq_cap) {
		if (pc->aq_cap >= SVC_ACKQ_MAX)
			return -ENOBUFS;
		/* grow, unrolling the ring */
		struct svc_ack *n = malloc(2 * pc->aq_cap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		for (unsigned i = 0; i < pc->aq_len; i++)
			n[i] = pc->aq[(pc->aq_head + i) % pc->aq_cap];
		free(pc->aq);
		pc->aq = n;
		pc->aq_head = 0;
		pc->aq_cap *= 2;
	}
	pc->aq[(pc->aq_head + pc->aq_len) % pc->aq_cap] = *a;
	pc->aq_len++;
	return 0;
}

/* Queue an Ack on the call; when the client does not read, hold it and pause the input. */
int svc_send_ack(struct svc_call *pc, const struct svc_ack *a)
{
	uint8_t buf[SVC_ACK_MAX_ENC];
	if (pc->finished || pc->want_finish)
		return -EPIPE;
	if (pc->aq_len == 0) {
		size_t n = ack_encode(a, buf, sizeof(buf));
		int rc = ing_grpc_call_send(pc->call, buf, n);
		if (rc != -ENOBUFS)
			return rc;
	}
	int rc = aq_push(pc, a);
	if (rc) {
		struct ing_log_ctx lc = svc_log_call(pc);
		ING_LOGC(ING_LOG_WARN, "svc", &lc, "call %" PRIu64 " from %s: client is not reading its "
			 "acks (%u queued); failing the call", pc->id, ing_grpc_call_peer(pc->call), pc->aq_len);
		svc_call_finish_later(pc, ING_GRPC_RESOURCE_EXHAUSTED, "client is not reading its acks");
		return rc;
	}
	if (!(pc->pause_why & SVC_PAUSE_SEND))
		ING_DBG("svc", "call %" PRIu64 " from %s: send buffer full, input paused until the client reads",
			pc->id, ing_grpc_call_peer(pc->call));
	svc_call_pause(pc, SVC_PAUSE_SEND);
	return 0;
}

/* on_writable: move held acks out; resume the input once they are all out. */
void svc_call_flush(struct svc_call *pc)
{
	uint8_t buf[SVC_ACK_MAX_ENC];
	while (pc->aq_len && !pc->finished) {
		size_t n = ack_encode(&pc->aq[pc->aq_head], buf, sizeof(buf));
		int rc = ing_grpc_call_send(pc->call, buf, n);
		if (rc == -ENOBUFS)
			return;
		pc->aq_head = (pc->aq_head + 1) % pc->aq_cap;
		pc->aq_len--;
		if (rc)
			break;
	}
	if (pc->aq_len == 0) {
		svc_call_unpause(pc, SVC_PAUSE_SEND);
		svc_call_check_done(pc);
	}
}

static void copy_utf8(char *dst, const char *src)
{
	size_t n = src ? strnlen(src, ING_ID_MAX + 1) : 0;
	if (n && n <= ING_ID_MAX && ing_utf8_valid(src, n))
		memcpy(dst, src, n);
	else
		n = 0;
	dst[n] = '\0';
}

void svc_ack_set_id(struct svc_ack *a, const char *wafer, const char *id)
{
	copy_utf8(a->frame_id, id);
	copy_utf8(a->wafer_id, wafer);
}

void svc_ack_received(struct svc_frame *e, uint64_t latency_ns)
{
	if (!e->call || !e->sess || !e->sess->ack_received)
		return;
	struct svc_ack a = { .ok = true, .stage = H3000__ACK_STAGE__ACK_STAGE_RECEIVED,
			     .latency_ns = latency_ns };
	svc_ack_set_id(&a, e->f->wafer_id, e->f->frame_id);
	svc_send_ack(e->call, &a);
}

/* The slot is open for the producer's WRITE: Ack{GRANTED} to the frame's call. A frame
 * whose call is gone is never written: its grant expires in the lcore. The lcore still
 * owns the frame: only what admission set is read here (buf, length, ids). */
void svc_frame_granted(struct svc_frame *e, uint32_t grant_id, uint32_t grant_rkey,
		       uint32_t qp_num)
{
	if (!e->call)
		return;
	struct svc_ack a = {
		.ok = true,
		.stage = H3000__ACK_STAGE__ACK_STAGE_GRANTED,
		.grant_id = grant_id,
		.grant_rkey = grant_rkey,
		.grant_qp = qp_num,
		.grant_addr = (uint64_t)(uintptr_t)e->f->buf,
		.grant_length = e->f->length,
	};
	svc_ack_set_id(&a, e->f->wafer_id, e->f->frame_id);
	svc_send_ack(e->call, &a);
}

void svc_vnack(struct svc_call *pc, const char *wafer, const char *frame_id, int code,
	       bool retryable, const char *fmt, va_list ap)
{
	struct svc_ack a = { .ok = false, .code = (uint8_t)code, .retryable = retryable };
	svc_ack_set_id(&a, wafer, frame_id);
	vsnprintf(a.msg, sizeof(a.msg), fmt, ap);
	pc->svc->c_refused++;
	svc_metrics_result(pc->svc, pc->xp->xport, SVC_R_REFUSED, 0);
	svc_ops_frame(pc->svc, pc->peer, code, 0);
	struct ing_log_ctx lc = svc_log_call(pc);
	lc.wafer = wafer;
	lc.frame = frame_id;
	ING_LOGC_RL(ING_LOG_WARN, "svc", &lc, "%s (peer %s)", a.msg, ing_grpc_call_peer(pc->call));
	svc_send_ack(pc, &a);
}

void svc_nack(struct svc_call *pc, const char *wafer, const char *frame_id, int code,
	      bool retryable, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	svc_vnack(pc, wafer, frame_id, code, retryable, fmt, ap);
	va_end(ap);
}

int svc_meta_check(struct svc_call *pc, const char *frame_id, size_t id_len,
		   const char *meta_frame_id, uint64_t length, const char *wafer,
		   const char **wafer_out, char *why, size_t whylen)
{
	uint64_t max = pc->sess ? pc->sess->max_frame : pc->svc->max_frame;
	char idp[96];
	const char *bad = ing_id_check(frame_id, id_len);

	ing_id_printable(idp, sizeof(idp), frame_id, strnlen(frame_id, ING_ID_MAX));
	if (bad) {
		snprintf(why, whylen, "frameId '%s' %s: a frameId must be " ING_ID_RULE, idp, bad);
		return ING_E_INVALID_ARGUMENT;
	}
	if (meta_frame_id && strcmp(meta_frame_id, frame_id) != 0) {
		snprintf(why, whylen, "frame %s: meta.frameId differs from the chunk's frameId", frame_id);
		return ING_E_INVALID_ARGUMENT;
	}
	if (length == 0) {
		snprintf(why, whylen, "frame %s: length 0", frame_id);
		return ING_E_INVALID_ARGUMENT;
	}
	if (length > max) {
		snprintf(why, whylen, "frame %s: length %" PRIu64 " above the maximum %" PRIu64,
			 frame_id, length, max);
		return ING_E_TOO_LARGE;
	}
	if (!wafer || !*wafer) {
		wafer = ING_DEFAULT_WAFER;
	} else if ((bad = ing_id_check(wafer, strlen(wafer)))) {
		char wp[96];
		ing_id_printable(wp, sizeof(wp), wafer, strlen(wafer));
		snprintf(why, whylen, "frame %s: waferId '%s' %s: a waferId must be empty (wafer \""
			 ING_DEFAULT_WAFER "\") or " ING_ID_RULE, frame_id, wp, bad);
		return ING_E_INVALID_ARGUMENT;
	}
	*wafer_out = wafer;
	/* the local disk is at the high-water mark (the object store is behind or away):
	 * refused before it takes a slot, retryable */
	if (svc_tier_refusing(pc->svc, length, why, whylen))
		return ING_E_NO_SPACE;
	return ING_E_NONE;
}

/*
 * protobuf-c hands strings over NUL-terminated, so an id with a NUL byte inside would
 * silently become a shorter, different id. True when a top-level string field of
 * number f1 or f2 in msg holds a NUL (a malformed msg: false, unpack reports it).
 */
bool svc_pb_string_has_nul(const uint8_t *msg, size_t len, uint32_t f1, uint32_t f2)
{
	size_t i = 0;
	while (i < len) {
		uint64_t key = 0, v = 0;
		unsigned sh = 0;
		do {
			if (i >= len || sh > 63)
				return false;
			key |= (uint64_t)(msg[i] & 0x7f) << sh;
			sh += 7;
		} while (msg[i++] & 0x80);
		switch (key & 7) {
		case 0:
			while (i < len && (msg[i] & 0x80))
				i++;
			i++;
			break;
		case 1:
			i += 8;
			break;
		case 5:
			i += 4;
			break;
		case 2:
			sh = 0;
			do {
				if (i >= len || sh > 63)
					return false;
				v |= (uint64_t)(msg[i] & 0x7f) << sh;
				sh += 7;
			} while (msg[i++] & 0x80);
			if (v > len - i)
				return false;
			if (((key >> 3) == f1 || (key >> 3) == f2) && memchr(msg + i, 0, (size_t)v))
				return true;
			i += (size_t)v;
			break;
		default:
			return false;
		}
	}
	return false;
}

/* ================================================================ waking waiters */

static void finish_call(struct svc_call *pc)
{
	if (pc->want_finish)
		pc->svc->want_finish--;
	pc->want_finish = false;
	pc->finished = true;
	ing_grpc_call_finish(pc->call, pc->fin_status, pc->fin_msg);
}

static void kick_timer_cb(void *arg)
{
	struct ing_svc *s = arg;
	s->in_kick = true;
	for (int round = 0; round < 8; round++) {
		s->kick_again = false;
		persist_retry(s);
		for (struct svc_call *pc = s->calls, *nx; pc && s->want_finish; pc = nx) {
			nx = pc->next;
			if (pc->want_finish && !pc->finished)
				finish_call(pc);
		}
		if (!s->kick_again)
			break;
	}
	s->in_kick = false;
	if (s->kick_again)
		ing_timer_arm(s->loop, &s->kick_timer, ing_now_ns());
}

void svc_kick(struct ing_svc *s)
{
	if (s->in_kick) {
		s->kick_again = true;
		return;
	}
	if (!ing_timer_armed(&s->kick_timer))
		ing_timer_arm(s->loop, &s->kick_timer, ing_now_ns());
}

/* ================================================================ lifetime */

const struct ing_grpc_method *ing_svc_methods(struct ing_svc *s, unsigned *n)
{
	*n = sizeof(s->methods) / sizeof(s->methods[0]);
	return s->methods;
}

void ing_svc_attach_server(struct ing_svc *s, struct ing_grpc_server *srv)
{
	s->srv = srv;
}

void ing_svc_shutdown_begin(struct ing_svc *s)
{
	s->stopping = true;
}

bool ing_svc_stopping(const struct ing_svc *s)
{
	return s->stopping;
}

bool ing_svc_quiescent(const struct ing_svc *s)
{
	if (s->persisting || s->retry_len)
		return false;
	for (const struct svc_call *pc = s->calls; pc; pc = pc->next) {
		if (pc->finished)
			continue;
		if (pc->aq_len || ing_grpc_call_send_buffered(pc->call))
			return false;
	}
	return true;
}

uint64_t ing_svc_in_flight(const struct ing_svc *s)
{
	return s->nfr_used;
}

void ing_svc_close_calls(struct ing_svc *s, int status, const char *message)
{
	for (struct svc_call *pc = s->calls, *nx; pc; pc = nx) {
		nx = pc->next;
		if (pc->finished)
			continue;
		pc->fin_status = status;
		pc->fin_msg = message;
		finish_call(pc);
	}
}

struct ing_svc *ing_svc_create(struct ing_loop *loop, struct ing_pool *pool,
			       struct ing_persist *persist, struct ing_mbox *ctl,
			       const struct ing_svc_opts *o)
{
	struct ing_svc *s = calloc(1, sizeof(*s));
	if (!s) {
		ING_ERR("svc", "out of memory");
		return NULL;
	}
	s->loop = loop;
	s->pool = pool;
	s->persist = persist;
	s->ctl = ctl;
	s->o = *o;
	s->t_start_ns = ing_now_ns();
	for (unsigned i = 0; i < SVC_LAT_N; i++)
		ing_hist_reset(&s->lat[i]);
	ing_timer_init(&s->retry_timer, retry_timer_cb, s);
	ing_timer_init(&s->sweep_timer, sweep_timer_cb, s);
	ing_timer_init(&s->kick_timer, kick_timer_cb, s);
	if (!loop || !pool || !persist || !ctl) {
		ING_ERR("svc", "loop, pool, persistence and the control mailbox are required");
		goto fail;
	}
	if (s->o.max_sessions == 0)
		s->o.max_sessions = ING_DEFAULT_MAX_SESSIONS;
	if (s->o.credits_max == 0)
		s->o.credits_max = ING_DEFAULT_CREDITS;
	if (s->o.credits_default == 0)
		s->o.credits_default = s->o.credits_max;
	if (s->o.frame_timeout_ms == 0)
		s->o.frame_timeout_ms = ING_DEFAULT_FRAME_TIMEOUT_MS;
	if (o->auth_token) {
		size_t n = strnlen(o->auth_token, ING_AUTH_TOKEN_MAX + 1);
		if (n < ING_AUTH_TOKEN_MIN || n > ING_AUTH_TOKEN_MAX) {
			ING_ERR("svc", "auth token must be %u..%u characters", ING_AUTH_TOKEN_MIN,
				ING_AUTH_TOKEN_MAX);
			goto fail;
		}
		memcpy(s->auth_token, o->auth_token, n);
		s->auth_token[n] = '\0';
		s->auth_len = n;
		s->auth = true;
	}
	s->o.auth_token = NULL;   /* the caller's buffer may go: only the copy is used */
	s->max_frame = ing_pool_max_len(pool);
	if (s->o.max_frame && s->o.max_frame < s->max_frame)
		s->max_frame = s->o.max_frame;

	s->nfr = ing_pool_total(pool);
	if (s->nfr == 0) {
		ING_ERR("svc", "the pool has no slots");
		goto fail;
	}
	uint32_t hsz = 16;
	while (hsz < 2 * s->nfr)
		hsz <<= 1;
	s->ht_mask = hsz - 1;
	s->fr = calloc(s->nfr, sizeof(*s->fr));
	s->ht = calloc(hsz, sizeof(*s->ht));
	s->retry = calloc(s->nfr, sizeof(*s->retry));
	s->sess = calloc(s->o.max_sessions, sizeof(*s->sess));
	/* every session, slot and connection could come from a different address */
	s->npeers = s->o.max_sessions + s->nfr + 1024;
	s->peers = calloc(s->npeers, sizeof(*s->peers));
	if (s->o.max_sessions_per_peer == 0)
		s->o.max_sessions_per_peer = ING_DEFAULT_MAX_SESSIONS_PER_PEER;
	if (s->o.slot_stall_ms == 0)
		s->o.slot_stall_ms = ING_DEFAULT_SLOT_STALL_MS;
	if (s->o.auth_fail_burst == 0)
		s->o.auth_fail_burst = ING_DEFAULT_AUTH_FAIL_BURST;
	if (s->o.auth_backoff_max_ms == 0)
		s->o.auth_backoff_max_ms = ING_DEFAULT_AUTH_BACKOFF_MAX_MS;
	s->max_slots_per_peer = s->o.max_slots_per_peer ? s->o.max_slots_per_peer :
				(s->nfr * 3 + 3) / 4;
	if (admit_init(&s->adm, loop, pool, s->max_slots_per_peer, s->o.frame_timeout_ms)) {
		ING_ERR("svc", "the pool's size classes are unusable");
		goto fail;
	}
	if (!s->fr || !s->ht || !s->retry || !s->sess || !s->peers) {
		ING_ERR("svc", "out of memory for %u frame entries / %u sessions", s->nfr, s->o.max_sessions);
		goto fail;
	}
	for (uint32_t i = 0; i < s->nfr; i++) {
		s->fr[i].idx = i;
		s->fr[i].svc = s;
		ing_timer_init(&s->fr[i].timer, frame_timeout_cb, &s->fr[i]);
	}
	int rc = ing_loop_add_fd(loop, ing_mbox_fd(ctl), EPOLLIN, mbox_cb, s);
	if (rc) {
		ING_ERR("svc", "cannot watch the control mailbox: %s", strerror(-rc));
		goto fail;
	}
	s->ctl_fd_added = true;
	ing_timer_arm(loop, &s->sweep_timer, ing_now_ns() + SWEEP_NS);

	if (s->o.rdma.rdma_available)
		snprintf(s->note, sizeof(s->note), "rdma: %s:%u; fallback available",
			 s->o.rdma.rdma_addr ? s->o.rdma.rdma_addr : "?", s->o.rdma.rdma_port);
	else
		snprintf(s->note, sizeof(s->note), "rdma: %s; fallback active",
			 s->o.rdma.note && s->o.rdma.note[0] ? s->o.rdma.note : "not available");

	s->methods[0] = svc_negotiate_method;
	s->methods[0].ctx = s;
	s->methods[1] = svc_stats_method;
	s->methods[1].ctx = s;
	s->methods[2] = svc_stream_method;
	s->methods[2].ctx = s;
	s->methods[3] = svc_ctl_method;
	s->methods[3].ctx = s;
	s->methods[4] = svc_members_method;
	s->methods[4].ctx = s;
	s->methods[5] = svc_getframe_method;
	s->methods[5].ctx = s;
	return s;
fail:
	ing_svc_destroy(s);
	return NULL;
}

void ing_svc_destroy(struct ing_svc *s)
{
	if (!s)
		return;
	while (s->calls) /* normally none: the server closed them */
		svc_call_free(s->calls);
	if (s->ctl)   /* what the stopped lcores and workers sent last */
		while (ing_mbox_run(s->ctl, 256, on_event, s))
			;
	if (s->ctl_fd_added)
		ing_loop_del_fd(s->loop, ing_mbox_fd(s->ctl));
	if (s->fr) {
		for (uint32_t i = 0; i < s->nfr; i++) {
			struct svc_frame *e = &s->fr[i];
			if (e->state == FE_FREE)
				continue;
			if (e->state == FE_PERSISTING)
				ING_LOGC(ING_LOG_WARN, "svc", (&(struct ing_log_ctx){
						 .wafer = e->f ? e->f->wafer_id : NULL,
						 .frame = e->f ? e->f->frame_id : NULL }),
					 "frame %s: still in persistence at shutdown; slot not returned",
					 e->f ? e->f->frame_id : "?");
			else
				ing_pool_put(e->f);
			ing_timer_cancel(s->loop, &e->timer);
		}
	}
	svc_tier_destroy(s);
	admit_fini(&s->adm);   /* its timer callback would find s freed */
	if (s->loop) {
		ing_timer_cancel(s->loop, &s->retry_timer);
		ing_timer_cancel(s->loop, &s->sweep_timer);
		ing_timer_cancel(s->loop, &s->kick_timer);
	}
	free(s->fr);
	free(s->ht);
	free(s->retry);
	free(s->sess);
	free(s->peers);
	explicit_bzero(s->auth_token, sizeof(s->auth_token));
	free(s);
}

void svc_on_writable(struct ing_grpc_call *c)
{
	struct svc_call *pc = ing_grpc_call_user(c);
	if (pc)
		svc_call_flush(pc);
}

void svc_on_close(struct ing_grpc_call *c, int status)
{
	struct svc_call *pc = ing_grpc_call_user(c);
	(void)status;
	if (!pc)
		return;
	ing_grpc_call_set_user(c, NULL);
	svc_call_free(pc);
}
