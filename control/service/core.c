/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core.c - the ingest service core: the frame table, the one road of every frame
 * (frame_process), its answers on the call, the transports' side of it (transport.h), the
 * calls, the control thread's mailbox and the service's lifetime.
 *
 * One life cycle for every transport, one state switch per frame (as SPDK's
 * nvmf_tcp_req_process): a frame asks in (xport_admit: checks, then its credit and slot
 * from the admission layer, admit.c, then an entry in s->fr found by id through s->ht) and
 * is FILLING while its transport moves its bytes; control filled it (xport_filled: FILLED)
 * or a dataplane lcore did (RECEIVED on the mailbox); either way it is acked RECEIVED and
 * goes to persistence (PERSISTING), comes back as DONE on the same mailbox, is acked on the
 * call that sent it, and its slot and credit go back, which wakes the frames waiting for
 * them. Every failure before persistence (the deadline, the stall check, a failed transfer,
 * a bad chunk, its call gone) is FAILED: the transport's cancel, one answer, the slot back.
 * The core knows transports only by their ops tables and the RPC faces only by the
 * methods they register; calls end at the loop's before_sleep (svc_flush), so nothing
 * re-enters a gRPC callback.
 *
 * Everything runs on the control thread.
 */
#include "control/service/state.h"
#include "control/service/counters.h"
#include "control/service/auth.h"
#include "control/service/xport/rdma_job.h"
#include "common/clock.h"
#include "common/ident.h"
#include "common/log.h"
#include "h3000.pb-c.h"
#include "dataplane/rdma/rdma.h"
#include "dataplane/tier/tier.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SWEEP_NS 1000000000ull
#define MBOX_BUDGET 256u   /* messages per loop wake-up: sockets and timers get their turn */

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

/* ================================================================ the faces' registry */

/* What the faces registered from their constructors (before main): the service serves
 * these methods, and names none of them itself. */
static struct {
	const struct ing_grpc_method *m;
	bool xport;              /* a transport's: the core adds on_writable and on_close */
} faces[SVC_RPC_MAX];
static unsigned nfaces;
static bool faces_overflow;

static void face_add(const struct ing_grpc_method *m, bool xport)
{
	if (nfaces == SVC_RPC_MAX) {
		faces_overflow = true;   /* ing_svc_create refuses to start */
		return;
	}
	faces[nfaces].m = m;
	faces[nfaces].xport = xport;
	nfaces++;
}

void svc_rpc_register(const struct ing_grpc_method *m)
{
	face_add(m, false);
}

void svc_xport_register(const struct ing_grpc_method *m)
{
	face_add(m, true);
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

/* The admitted frame named frame_id (h: its ing_id_hash) that wafer_id (NULL: any) and
 * call pc (NULL: any) match. */
static struct svc_frame *frame_lookup(struct ing_svc *s, const char *wafer_id,
				      const struct svc_call *pc, const char *frame_id, uint64_t h)
{
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

/* ================================================================ answers
 *
 * Every answer (h3000.Ack) is sent on its call: encoded into the call's send buffer, or
 * held in a ring that grows to SVC_ACKQ_MAX while the client does not read them (the call's
 * input is paused meanwhile: the client cannot send more frames than it reads answers
 * for); when the ring is full, the call fails. A frame's answers: RECEIVED (only to a
 * session that asked for it), GRANTED (push: the slot is open for the producer's WRITE),
 * and the final one from its descriptor's outcome; nothing when its call is gone.
 */

#define SVC_ACK_MAX_ENC 1280u    /* encoded Ack upper bound (ids <= 256, msg < ING_FRAME_MSG_MAX, grant fields) */

/* An Ack (what is sent, or held until the client reads). */
struct svc_ack {
	char frame_id[ING_ID_MAX + 1];   /* empty when the id sent was not UTF-8 or too long */
	char wafer_id[ING_ID_MAX + 1];   /* empty when not known yet (refused early) */
	uint64_t latency_ns;
	uint64_t stage_ns[SVC_NSTAGES];  /* DURABLE acks: Ack.stage*Ns, enum svc_stage order */
	uint32_t crc32c;
	uint8_t stage;
	uint8_t code;
	bool ok, retryable, duplicate;
	/* stage GRANTED (push) only */
	uint32_t grant_id, grant_rkey, grant_qp;
	uint64_t grant_addr, grant_length;
	bool grant_striped;              /* a part of a striped frame: the three below */
	uint32_t grant_part, grant_rail;
	uint64_t grant_offset;
	char msg[ING_FRAME_MSG_MAX];
};

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
	m.grantstriped = a->grant_striped;
	m.grantpart = a->grant_part;
	m.grantoffset = a->grant_offset;
	m.grantrail = a->grant_rail;
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

static int ack_send(struct svc_call *pc, const struct svc_ack *a)
{
	uint8_t buf[SVC_ACK_MAX_ENC];
	if (pc->closing)
		return -EPIPE;
	if (pc->aq_len == 0) {
		size_t n = ack_encode(a, buf, sizeof(buf));
		int rc = ing_grpc_call_send(pc->call, buf, n);
		if (rc != -ENOBUFS)
			return rc;
	}
	int rc = aq_push(pc, a);
	if (rc) {
		ING_LOGC(ING_LOG_WARN, "svc", &pc->lc, "call %" PRIu64 " from %s: client is not reading its "
			 "acks (%u queued); failing the call", pc->id, pc->peer_str, pc->aq_len);
		svc_call_finish_later(pc, ING_GRPC_RESOURCE_EXHAUSTED, "client is not reading its acks");
		return rc;
	}
	if (!pc->acks_waiting) {
		ING_DBG("svc", "call %" PRIu64 " from %s: send buffer full, input paused until the client reads",
			pc->id, pc->peer_str);
		pc->acks_waiting = true;
		svc_call_input(pc);
	}
	return 0;
}

static void svc_ack_flush(struct svc_call *pc)
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
		pc->acks_waiting = false;
		svc_call_input(pc);
		svc_call_check_done(pc);
	}
}

static void svc_ack_release(struct svc_call *pc)
{
	free(pc->aq);
	pc->aq = NULL;
	pc->aq_len = pc->aq_cap = pc->aq_head = 0;
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

static void svc_ack_refusal(struct svc_call *pc, const char *wafer, const char *frame_id,
			    int code, bool retryable, const char *msg)
{
	struct svc_ack a = { .ok = false, .code = (uint8_t)code, .retryable = retryable };

	copy_utf8(a.frame_id, frame_id);
	copy_utf8(a.wafer_id, wafer);
	snprintf(a.msg, sizeof(a.msg), "%s", msg);
	ack_send(pc, &a);
}

/* An admitted frame's ids: valid UTF-8 of at most ING_ID_MAX bytes (the id rule). */
static void frame_ids(struct svc_ack *a, const struct ing_frame *f)
{
	memcpy(a->frame_id, f->frame_id, sizeof(a->frame_id));
	memcpy(a->wafer_id, f->wafer_id, sizeof(a->wafer_id));
}

static void svc_ack_received(struct svc_frame *e, uint64_t latency_ns)
{
	if (!e->call || !e->sess || !e->sess->ack_received)
		return;
	struct svc_ack a = { .ok = true, .stage = H3000__ACK_STAGE__ACK_STAGE_RECEIVED,
			     .latency_ns = latency_ns };
	frame_ids(&a, e->f);
	ack_send(e->call, &a);
}

/* A frame whose call is gone is never written: its grant expires in the lcore. The lcore
 * still owns the frame: only what admission set is read here (buf, length, ids). g: what
 * was granted, the frame itself or a part of it (a striped push frame, xport/stripe.c),
 * whose grant names the part, its offset and its rail. */
static void svc_ack_granted(struct svc_frame *e, const struct ing_frame *g, uint32_t grant_id,
			    uint32_t grant_rkey, uint32_t qp_num)
{
	if (!e->call)
		return;
	struct svc_ack a = {
		.ok = true,
		.stage = H3000__ACK_STAGE__ACK_STAGE_GRANTED,
		.grant_id = grant_id,
		.grant_rkey = grant_rkey,
		.grant_qp = qp_num,
		.grant_addr = (uint64_t)(uintptr_t)g->buf,
		.grant_length = g->length,
	};
	if (g->part_of) {
		int rail = ing_rdma_session_rail(e->env->rdma, g->session_id);
		if (rail < 0)
			return;   /* its rail went down meanwhile: the part fails there and moves */
		a.grant_striped = true;
		a.grant_part = g->part;
		a.grant_offset = (uint64_t)(g->buf - e->f->buf);
		a.grant_rail = (uint32_t)rail;
	}
	frame_ids(&a, e->f);
	ack_send(e->call, &a);
}

static void svc_ack_final(struct svc_frame *e, uint64_t latency_ns, const uint64_t stage_ns[SVC_NSTAGES])
{
	const struct ing_frame *f = e->f;
	bool ok = f->status == ING_E_NONE;
	struct svc_ack a = {
		.ok = ok,
		.code = (uint8_t)f->status,
		.retryable = f->retryable,
		.duplicate = f->duplicate,
		.crc32c = f->crc_computed,
		/* a failed frame has no stage: DURABLE would read as stored to a client that
		   looks at the stage alone (Ack.stored says it plainly) */
		.stage = ok ? H3000__ACK_STAGE__ACK_STAGE_DURABLE : H3000__ACK_STAGE__ACK_STAGE_UNSPECIFIED,
		.latency_ns = latency_ns,
	};
	if (!e->call)
		return;
	frame_ids(&a, f);
	if (ok) {
		memcpy(a.msg, "ok", 3);   /* what the seed's consumer says */
		memcpy(a.stage_ns, stage_ns, sizeof(a.stage_ns));
	} else {
		size_t n = strnlen(f->msg, sizeof(f->msg) - 1);
		memcpy(a.msg, f->msg, n);
		a.msg[n] = '\0';
		if (n == 0)
			snprintf(a.msg, sizeof(a.msg), "frame %s: persistence failed (code %d)",
				 f->frame_id, (int)f->status);
	}
	ack_send(e->call, &a);
}

/* ================================================================ one frame's road */

static void frame_process(struct svc_frame *e);

/* The record of a frame the service holds in state st, or NULL. */
static struct svc_frame *frame_record(struct ing_svc *s, const struct ing_frame *f, uint8_t st)
{
	struct svc_frame *e = f->index < s->nfr ? &s->fr[f->index] : NULL;

	return e && e->f == f && e->state == st ? e : NULL;
}

/* The frame's next check: its deadline, or the moment it would count as stalled. */
static uint64_t frame_check_at(const struct svc_frame *e)
{
	uint64_t stall = e->progress_ns + (uint64_t)e->svc->o.slot_stall_ms * 1000000ull;
	return stall < e->deadline_ns ? stall : e->deadline_ns;
}

/* Frame e fails before persistence: its outcome goes into its descriptor (as a failure in
 * persistence does), its answer comes from there. silent: no answer (its call is gone). */
static void frame_failv(struct svc_frame *e, int code, bool retryable, bool silent,
			const char *fmt, va_list ap)
{
	struct ing_frame *f = e->f;
	char msg[ING_FRAME_MSG_MAX];

	if (e->state != FE_FILLING)
		return;
	vsnprintf(msg, sizeof(msg), fmt, ap);   /* fmt's arguments may be f->msg itself */
	memcpy(f->msg, msg, sizeof(f->msg));
	f->status = code;
	f->retryable = retryable;
	e->silent = silent;
	e->state = FE_FAILED;
	frame_process(e);
}

static void frame_fail(struct svc_frame *e, int code, bool retryable, bool silent,
		       const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static void frame_fail(struct svc_frame *e, int code, bool retryable, bool silent,
		       const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	frame_failv(e, code, retryable, silent, fmt, ap);
	va_end(ap);
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
		frame_fail(e, ING_E_DEADLINE, true, false,
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
	frame_fail(e, ING_E_DEADLINE, true, false,
		   "frame %s: no bytes for %u ms (%" PRIu64 " of %" PRIu64
		   " bytes); slot released, send it again", f->frame_id, e->svc->o.slot_stall_ms,
		   f->filled, f->length);
}

/* Give the slot back, drop the entry, release the credit. The call (if any) learns it. */
static void frame_release(struct svc_frame *e)
{
	struct ing_svc *s = e->svc;
	struct svc_call *pc = e->call;
	struct svc_session *ss = e->sess;
	struct svc_peer *peer = e->peer;
	struct ing_frame *f = e->f;

	ht_remove(s, e);
	xport_stripe_free(e);
	s->inflight_bytes -= e->length;
	/* used from now on when persistence inserted its row (the mark: dataplane/hwm.h) */
	ing_tier_frame_finished(s->tier, e->length, f && f->cataloged);
	s->nfr_used--;
	e->f = NULL;
	e->xp = NULL;
	e->call = NULL;
	e->state = FE_FREE;
	e->peer = NULL;
	e->sess = NULL;
	ing_timer_cancel(s->loop, &e->timer);
	/* slot, credit and the peer's count go back through admission, which wakes waiters */
	admit_put(&s->adm, f, ss ? &ss->cr : NULL, peer ? &peer->share : NULL);
	svc_peer_put(s, peer);
	if (ss)
		svc_session_maybe_idle(s, ss);
	if (pc) {
		pc->open_frames--;
		svc_call_check_done(pc);   /* its end, when that was its last frame */
	}
}

/*
 * The frame's one road (as SPDK's nvmf_tcp_req_process): every event about a frame sets
 * its state and comes here; each state's work moves it on, until it waits for something
 * outside the control thread (its bytes, persistence) or is free again:
 *
 *   FILLING --xport_filled--> FILLED --+--> PERSISTING --DONE--> DONE --+--> RELEASE --> FREE
 *   FILLING --lcore's RECEIVED-> RECEIVED --+                           |
 *   FILLING --deadline, stall, xport_fail, a failed transfer, its call gone--> FAILED --+
 */
static void frame_process(struct svc_frame *e)
{
	static const uint64_t no_stages[SVC_NSTAGES];
	struct ing_svc *s = e->svc;
	struct ing_frame *f = e->f;
	uint64_t now, lat, stage_ns[SVC_NSTAGES];
	uint8_t prev;

	do {
		prev = e->state;
		switch (e->state) {
		case FE_FILLED:      /* control put its last byte in: RECEIVED is ours to stamp */
			f->t_received_ns = ing_now_ns();
			f->crc_done = (e->xp->flags & XPORT_F_CRC) != 0;
			/* fall through */
		case FE_RECEIVED:    /* every byte is in: counted, acked to sessions that asked */
			lat = f->t_received_ns > f->t_admit_ns ? f->t_received_ns - f->t_admit_ns : 0;
			svc_count_received(s, e, lat);
			svc_ack_received(e, lat);
			e->state = FE_PERSISTING;   /* an lcore's frame is on its way there already */
			if (prev == FE_FILLED) {
				ing_timer_cancel(s->loop, &e->timer);
				if (ing_persist_submit(s->persist, f) != 0) {
					/* cannot happen: every worker's mailbox holds the whole pool */
					snprintf(f->msg, sizeof(f->msg), "frame %s: the persistence mailbox is "
						 "full (it holds every pool slot)", f->frame_id);
					f->status = ING_E_INTERNAL;
					f->retryable = true;
					e->state = FE_FAILED;
					break;
				}
			}
			s->persisting++;
			break;
		case FE_DONE:        /* back from persistence: counted, answered (DURABLE or why not) */
			now = ing_now_ns();
			lat = f->t_durable_ns ? f->t_durable_ns : now;
			lat = lat > f->t_admit_ns ? lat - f->t_admit_ns : 0;
			s->persisting--;
			svc_count_done(s, e, now, stage_ns);   /* and the stages, in the latency view */
			if (f->status != ING_E_NONE)
				ING_LOGC_RL(ING_LOG_WARN, "svc", &e->lc, "%s", f->msg[0] ? f->msg : "persistence failed");
			s->c_orphan_acks += !e->call;
			svc_ack_final(e, lat, stage_ns);
			e->state = FE_RELEASE;
			break;
		case FE_FAILED:      /* counted; the transport stops writing; answered */
			svc_count_failed(s, e);
			ING_LOGC_RL(e->silent ? ING_LOG_INFO : ING_LOG_WARN, "svc", &e->lc, "%s", f->msg);
			if (e->call && e->xp->cancel)
				e->xp->cancel(e);
			if (!e->silent)
				svc_ack_final(e, 0, no_stages);
			e->state = FE_RELEASE;
			break;
		case FE_RELEASE:     /* its slot, credit and entry go back */
			frame_release(e);
			break;
		default:             /* FILLING, PERSISTING: waiting; FREE: done */
			break;
		}
	} while (e->state != prev);
}

/* ================================================================ the transports' side */

/* ---- answers before admission */

static void refusev(struct svc_call *pc, const char *wafer, const char *frame_id, int code,
		    bool retryable, const char *fmt, va_list ap)
{
	struct ing_log_ctx lc = pc->lc;
	char msg[ING_FRAME_MSG_MAX];

	vsnprintf(msg, sizeof(msg), fmt, ap);
	lc.wafer = wafer;
	lc.frame = frame_id;
	svc_count_refused(pc->svc, pc->xp->xport, pc->peer, code);
	ING_LOGC_RL(ING_LOG_WARN, "svc", &lc, "%s (peer %s)", msg, pc->peer_str);
	svc_ack_refusal(pc, wafer, frame_id, code, retryable, msg);
}

static void refuse(struct svc_call *pc, const char *wafer, const char *frame_id, int code,
		   bool retryable, const char *fmt, ...) __attribute__((format(printf, 6, 7)));
static void refuse(struct svc_call *pc, const char *wafer, const char *frame_id, int code,
		   bool retryable, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	refusev(pc, wafer, frame_id, code, retryable, fmt, ap);
	va_end(ap);
}

void xport_refuse(struct svc_call *pc, const char *wafer, const char *frame_id, int code,
		  bool retryable, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	refusev(pc, wafer, frame_id, code, retryable, fmt, ap);
	va_end(ap);
}

/* ---- the call's session */

/* Session from the h3000-session-id header, if the request carries one. */
static int call_bind_header(struct svc_call *pc)
{
	const char *h = ing_grpc_call_header(pc->call, "h3000-session-id");
	if (!h)
		return 0;
	char *end = NULL;
	errno = 0;
	unsigned long long v = strtoull(h, &end, 10);
	if (errno || end == h || *end != '\0') {
		snprintf(pc->fin_msg, sizeof(pc->fin_msg), "h3000-session-id is not a decimal number");
		pc->status = ING_GRPC_INVALID_ARGUMENT;
		return -EINVAL;
	}
	return svc_session_bind(pc->svc, pc, v);
}

/* Finish the call now with pc->status and pc->fin_msg. */
static void call_finish(struct svc_call *pc)
{
	if (pc->finished)
		return;
	if (pc->want_finish)
		pc->svc->want_finish--;
	pc->want_finish = false;
	pc->finished = true;
	pc->closing = true;
	ing_grpc_call_finish(pc->call, pc->status, pc->fin_msg[0] ? pc->fin_msg : NULL);
}

/* ---- a frame asking in */

/* The frame's own rules: id, length, wafer, the object store's high-water mark. An
 * h3000.ErrorCode with the reason (naming the frame and the rule), *wafer the wafer it is
 * filed under (an empty one is ING_DEFAULT_WAFER). */
static int meta_check(struct svc_call *pc, const struct xport_req *r, const char **wafer_out,
		      char *why, size_t whylen)
{
	struct ing_svc *s = pc->svc;
	const H3000__FrameMeta *m = r->meta;
	const char *F = r->frame_id, *wafer = m->waferid, *bad = ing_id_check(F, r->id_len);
	uint64_t max = pc->sess ? pc->sess->max_frame : s->max_frame;
	char idp[96];

	ing_id_printable(idp, sizeof(idp), F, strnlen(F, ING_ID_MAX));
	if (bad) {
		snprintf(why, whylen, "frameId '%s' %s: a frameId must be " ING_ID_RULE, idp, bad);
		return ING_E_INVALID_ARGUMENT;
	}
	if (r->chunk_id && m->frameid && strcmp(m->frameid, F) != 0) {
		snprintf(why, whylen, "frame %s: meta.frameId differs from the chunk's frameId", F);
		return ING_E_INVALID_ARGUMENT;
	}
	if (m->length == 0) {
		snprintf(why, whylen, "frame %s: length 0", F);
		return ING_E_INVALID_ARGUMENT;
	}
	if (m->length > max) {
		snprintf(why, whylen, "frame %s: length %" PRIu64 " above the maximum %" PRIu64,
			 F, m->length, max);
		return ING_E_TOO_LARGE;
	}
	if (!wafer || !*wafer) {
		wafer = ING_DEFAULT_WAFER;
	} else if ((bad = ing_id_check(wafer, strlen(wafer)))) {
		char wp[96];
		ing_id_printable(wp, sizeof(wp), wafer, strlen(wafer));
		snprintf(why, whylen, "frame %s: waferId '%s' %s: a waferId must be empty (wafer \""
			 ING_DEFAULT_WAFER "\") or " ING_ID_RULE, F, wp, bad);
		return ING_E_INVALID_ARGUMENT;
	}
	*wafer_out = wafer;
	/* the local disk is at the high-water mark (the object store is behind or away):
	 * refused before it takes a slot, retryable. The last frame's verdict is what Stats
	 * and /metrics call "refusing": a frame of another size may still fit. */
	s->tier_refusing = s->tier && ing_tier_refusing(s->tier, s->inflight_bytes + m->length, why, whylen);
	if (s->tier_refusing) {
		s->c_tier_refused++;
		return ING_E_NO_SPACE;
	}
	return ING_E_NONE;
}

/* The admission queue's turn for a waiting request: the expired one is answered here. */
static void req_wake(struct admit_req *ar, bool expired)
{
	struct xport_req *r = (struct xport_req *)((char *)ar - offsetof(struct xport_req, ar));
	struct svc_call *pc = ar->owner;

	if (pc->closing) {
		admit_cancel(&pc->svc->adm, ar);   /* the call is ending: hold nothing back */
		pc->wait = NULL;
		return;
	}
	if (expired) {
		pc->wait = NULL;   /* off the queue */
		refuse(pc, r->wafer, r->frame_id, ING_E_BUSY, true, "frame %s: no pool slot or credit for %u ms",
		       r->frame_id, pc->svc->o.frame_timeout_ms);
	}
	pc->xp->progress(pc, expired);
}

/* The admitted frame f into the table on call pc, its deadline armed, its transport
 * started. NULL (slot and credit given back) when start fails. */
static struct svc_frame *frame_enter(struct ing_svc *s, struct svc_call *pc,
				     const struct xport_ops *xp, struct ing_frame *f, uint64_t id_hash,
				     int *rc)
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
	e->id_hash = id_hash;
	e->lc = (struct ing_log_ctx){ .peer = pc->peer_str, .session = pc->sess->id,
				      .wafer = f->wafer_id, .frame = f->frame_id };
	e->silent = false;
	s->admissions++;
	e->length = f->length;
	s->inflight_bytes += e->length;   /* the high-water mark counts them */
	e->state = FE_FILLING;
	ht_insert(s, e);
	pc->open_frames++;
	e->progress_ns = ing_now_ns();
	e->deadline_ns = e->progress_ns + (uint64_t)s->o.frame_timeout_ms * 1000000ull;
	/* a dataplane transfer is bounded by its lcore: no timer may free the slot under it */
	uint64_t at = frame_check_at(e);
	if (!(xp->flags & XPORT_F_DATAPLANE))
		ing_timer_arm(s->loop, &e->timer, at);
	*rc = xp->start ? xp->start(e) : 0;
	if (*rc) {
		e->call = NULL;          /* the caller answers the frame */
		pc->open_frames--;
		frame_release(e);
		return NULL;
	}
	return e;
}

/* Every message names its session first (authentication is decided before anything else
 * is said about it): the call is bound on its first one; a session that differs is
 * refused. */
static enum xport_verdict call_session(struct svc_call *pc, uint64_t session_id, const char *F)
{
	if (!pc->sess && svc_session_bind(pc->svc, pc, session_id)) {
		call_finish(pc);   /* pc->status, pc->fin_msg: why (logged) */
		return XPORT_CLOSED;
	}
	if (session_id && session_id != pc->sess->id) {
		refuse(pc, NULL, F, ING_E_INVALID_ARGUMENT, false,
		       "frame %s: sessionId %" PRIu64 " differs from the stream's session %" PRIu64,
		       F, session_id, pc->sess->id);
		return XPORT_ANSWERED;
	}
	return XPORT_GO;
}

/*
 * The checks of a frame asking in, after its session's: 0 when it may take a credit and a
 * slot; else the h3000.ErrorCode it is refused with (*retry, the wafer to echo in *echo,
 * why), or -1 when its answer is given already (a first chunk again fails the frame under
 * way, and goes with it).
 */
static int frame_check(struct svc_call *pc, struct xport_req *r, const char **echo, bool *retry,
		       char *why, size_t whylen)
{
	struct ing_svc *s = pc->svc;
	const char *F = r->frame_id;
	struct svc_frame *e;
	int code;

	*echo = NULL;
	*retry = false;
	r->id_hash = ing_id_hash(F, strlen(F));
	if (r->bad) {
		snprintf(why, whylen, "%s", r->bad_why);
		return r->bad;
	}
	if (s->env.stopping) {
		*retry = true;
		snprintf(why, whylen, "frame %s: ingest node is shutting down", F);
		return ING_E_SHUTTING_DOWN;
	}
	code = meta_check(pc, r, &r->wafer, why, whylen);
	if (code) {
		*echo = code == ING_E_NO_SPACE ? r->wafer : NULL;   /* retryable: the tier makes room */
		*retry = code == ING_E_NO_SPACE;
		return code;
	}
	*echo = r->wafer;
	if (r->chunk_id && (e = frame_lookup(s, NULL, pc, F, r->id_hash)) && e->state == FE_FILLING) {
		frame_fail(e, ING_E_INVALID_ARGUMENT, false, false,
			   "frame %s: duplicate first chunk while the frame is in progress; frame dropped", F);
		return -1;
	}
	if (frame_lookup(s, r->wafer, NULL, F, r->id_hash)) {
		/* an earlier send still here (a lost session's): retryable, the only retryable
		 * INVALID_ARGUMENT, which libingest waits out (producer/fleet.c ack_in_flight) */
		*retry = true;
		snprintf(why, whylen, "frame %s of wafer %s: already in flight in this node", F, r->wafer);
		return ING_E_INVALID_ARGUMENT;
	}
	if (r->first_bytes > r->meta->length) {
		snprintf(why, whylen, "frame %s: chunk of %" PRIu64 " bytes past the declared length %" PRIu64,
			 F, r->first_bytes, r->meta->length);
		return ING_E_INVALID_ARGUMENT;
	}
	if (r->unready) {
		snprintf(why, whylen, "frame %s: %s", F, r->unready);
		return ING_E_NO_TRANSPORT;
	}
	return 0;
}

/* The admitted slot f gets the frame's descriptor, then its entry and its start. */
static struct svc_frame *frame_admit(struct svc_call *pc, struct xport_req *r,
				     const struct xport_ops *xp, struct ing_frame *f, int *rc)
{
	const H3000__FrameMeta *m = r->meta;

	snprintf(f->frame_id, sizeof(f->frame_id), "%s", r->frame_id);   /* checked: <= ING_ID_MAX */
	snprintf(f->wafer_id, sizeof(f->wafer_id), "%s", r->wafer);
	f->session_id = pc->sess->id;
	f->length = m->length;
	f->filled = 0;
	f->timestamp = m->timestamp;
	f->crc32c = m->crc32c;
	f->has_crc = m->hascrc32c;
	f->transport = xp->xport;
	if (xp->flags & XPORT_F_DATAPLANE) {
		f->raddr = m->addr;
		f->rkey = m->rkey;
	}
	f->t_admit_ns = ing_now_ns();
	/* a striped frame: its start (xport/stripe.c) reads the parts from the FrameMeta */
	struct svc_frame *se = f->index < pc->svc->nfr ? &pc->svc->fr[f->index] : NULL;
	if (se)
		se->stripe_meta = (xp->flags & XPORT_F_DATAPLANE) && m->n_stripe ? m : NULL;
	struct svc_frame *e = frame_enter(pc->svc, pc, xp, f, r->id_hash, rc);
	if (se)
		se->stripe_meta = NULL;
	return e;
}

enum xport_verdict xport_admit(struct svc_call *pc, struct xport_req *r, struct svc_frame **out)
{
	struct ing_svc *s = pc->svc;
	const char *F = r->frame_id, *echo;
	const struct xport_ops *xp;
	struct ing_frame *f;
	char why[ING_FRAME_MSG_MAX];
	bool retry;
	int code, rc;
	enum xport_verdict v;

	*out = NULL;
	r->wafer = NULL;
	pc->wait = NULL;
	v = call_session(pc, r->session_id, F);
	if (v != XPORT_GO) {
		admit_cancel(&s->adm, &r->ar);
		return v;
	}
	xp = pc->sess->push && r->xp->push ? r->xp->push : r->xp;
	code = frame_check(pc, r, &echo, &retry, why, sizeof(why));
	if (!code) {
		/* credit and slot through the admission queue (first come, first served per size
		 * class, shared with the other transports); a retry keeps its place */
		bool queued = r->ar.queued;
		r->ar.wake = req_wake;
		r->ar.owner = pc;
		r->ar.credit = &pc->sess->cr;
		r->ar.share = pc->peer ? &pc->peer->share : NULL;
		r->ar.length = r->meta->length;
		/* an RDMA session's frames take slots of its rail's region (local to that NIC) */
		r->ar.region = svc_engine_session_region(s, pc->sess->id);
		rc = admit_try(&s->adm, &r->ar, &f);
		if (rc == -EAGAIN) {
			if (!queued && (xp->flags & XPORT_F_DATAPLANE))
				s->c_ctl_parked++;   /* Stats ctlFramesParked: ControlStream FrameMetas */
			pc->wait = r;
			ING_DBG("svc", "frame %s: waits for a %s (call %" PRIu64 " from %s)", F,
				r->ar.why == ADMIT_CREDIT ? "credit" : "pool slot", pc->id, pc->peer_str);
			return XPORT_WAIT;
		}
		if (rc == 0 && (*out = frame_admit(pc, r, xp, f, &rc)))
			return XPORT_GO;
		if (rc == -EINVAL) {   /* above every size class: meta_check keeps it below */
			code = ING_E_TOO_LARGE;
			snprintf(why, sizeof(why), "frame %s: %" PRIu64 " bytes fit no slot", F, r->meta->length);
		} else {               /* a full lcore mailbox: cannot be, it holds every slot */
			code = ING_E_BUSY;
			retry = true;
			snprintf(why, sizeof(why), "frame %s: %s cannot take it (%s)", F, xp->name, strerror(-rc));
		}
	}
	if (code > 0)
		refuse(pc, echo, F, code, retry, "%s", why);
	admit_cancel(&s->adm, &r->ar);
	return XPORT_ANSWERED;
}

enum xport_verdict xport_frame(struct svc_call *pc, uint64_t session_id, const char *frame_id,
			       struct svc_frame **e)
{
	enum xport_verdict v = call_session(pc, session_id, frame_id);

	*e = v == XPORT_GO ? frame_lookup(pc->svc, NULL, pc, frame_id, ing_id_hash(frame_id, strlen(frame_id))) :
			     NULL;
	return v;
}

/* ---- its bytes, its end */

void xport_filled(struct svc_frame *e, uint64_t n, bool last)
{
	struct ing_frame *f = e->f;

	if (e->state != FE_FILLING)
		return;
	f->filled += n;
	if (n)
		e->progress_ns = ing_now_ns();   /* frame_timeout_cb reads it */
	if (f->filled == f->length) {
		e->state = FE_FILLED;
		frame_process(e);
	} else if (last) {
		frame_fail(e, ING_E_INVALID_ARGUMENT, false, false,
			   "frame %s: last chunk ends at %" PRIu64 " of %" PRIu64 " bytes; frame dropped",
			   f->frame_id, f->filled, f->length);
	}
}

void xport_fail(struct svc_frame *e, int code, bool retryable, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	frame_failv(e, code, retryable, false, fmt, ap);
	va_end(ap);
}

/* ================================================================ calls */

static void call_free(struct svc_call *pc);

struct svc_call *xport_open(struct ing_grpc_call *c, void *ctx, const struct xport_ops *xp,
			    size_t size, int *status)
{
	struct ing_svc *s = ctx;
	struct svc_call *pc;

	if (s->env.stopping) {
		*status = ING_GRPC_UNAVAILABLE;
		ing_grpc_call_finish(c, *status, "ingest node is shutting down");
		return NULL;
	}
	pc = size >= sizeof(*pc) ? calloc(1, size) : NULL;
	if (!pc) {
		struct ing_log_ctx lc = { .peer = ing_grpc_call_peer(c) };
		ING_LOGC(ING_LOG_ERR, "svc", &lc, "out of memory for a call from %s", ing_grpc_call_peer(c));
		*status = ING_GRPC_RESOURCE_EXHAUSTED;
		ing_grpc_call_finish(c, *status, "out of memory");
		return NULL;
	}
	pc->svc = s;
	pc->env = &s->env;
	pc->call = c;
	pc->id = ing_grpc_call_id(c);
	pc->xp = xp;
	pc->peer = svc_peer_get(s, ing_grpc_call_peer_addr(c));
	pc->peer_str = ing_grpc_call_peer(c);
	pc->lc.peer = pc->peer_str;
	pc->next = s->calls;
	if (s->calls)
		s->calls->prev = pc;
	s->calls = pc;
	s->ncalls++;
	if (call_bind_header(pc)) {   /* logged */
		*status = pc->status;
		call_finish(pc);
		call_free(pc);   /* a call refused by on_start gets no on_close */
		return NULL;
	}
	ing_grpc_call_set_user(c, pc);
	return pc;
}

/* The call is over (on_close): partial frames are discarded, persisted ones finish alone. */
static void call_free(struct svc_call *pc)
{
	struct ing_svc *s = pc->svc;

	if (pc->want_finish)
		s->want_finish--;
	pc->want_finish = false;
	pc->finished = true;
	pc->closing = true;
	if (pc->wait)
		admit_cancel(&s->adm, &pc->wait->ar);   /* its waiting frame, never admitted */
	pc->wait = NULL;
	if (pc->xp->conn_lost)
		pc->xp->conn_lost(pc);   /* its own state */
	for (uint32_t i = 0; i < s->nfr; i++) {
		struct svc_frame *e = &s->fr[i];
		if (e->state == FE_FREE || e->call != pc)
			continue;
		if (e->state == FE_FILLING && !(e->xp->flags & XPORT_F_DATAPLANE))
			frame_fail(e, ING_E_CANCELLED, true, true,
				   "frame %s: stream from %s closed after %" PRIu64 " of %" PRIu64
				   " bytes; partial frame discarded", e->f->frame_id, pc->peer_str,
				   e->f->filled, e->f->length);
		else {   /* persisting, or a dataplane transfer (it comes back as DONE): detach */
			e->call = NULL;
			e->lc = svc_log_frame(e);   /* the peer's address now: the call's text goes */
		}
	}
	if (pc->sess) {
		if (pc->sess->icall == pc)
			pc->sess->icall = NULL;
		pc->sess->streams--;
		svc_session_maybe_idle(s, pc->sess);
	}
	if (pc->prev)
		pc->prev->next = pc->next;
	else
		s->calls = pc->next;
	if (pc->next)
		pc->next->prev = pc->prev;
	s->ncalls--;
	svc_peer_put(s, pc->peer);
	svc_ack_release(pc);
	svc_arena_fini(&pc->arena);
	free(pc);
}

void xport_pause(struct svc_call *pc)
{
	pc->blocked = true;
	svc_call_input(pc);
}

void xport_resume(struct svc_call *pc)
{
	pc->blocked = false;
	if (pc->closing)
		return;
	svc_call_input(pc);   /* may deliver (and hold) the next message, at the next flush */
	svc_call_check_done(pc);
}

void xport_done(struct svc_call *pc)
{
	struct ing_svc *s = pc->svc;

	pc->input_over = true;
	for (uint32_t i = 0; i < s->nfr && pc->open_frames; i++) {
		struct svc_frame *e = &s->fr[i];
		if (e->state == FE_FILLING && e->call == pc && !(e->xp->flags & XPORT_F_DATAPLANE))
			frame_fail(e, ING_E_CANCELLED, true, false,
				   "frame %s: stream ended after %" PRIu64 " of %" PRIu64 " bytes",
				   e->f->frame_id, e->f->filled, e->length);
	}
	svc_call_check_done(pc);
}

int xport_close(struct svc_call *pc, int status, const char *fmt, ...)
{
	va_list ap;

	if (pc->finished)
		return pc->status;
	va_start(ap, fmt);
	vsnprintf(pc->fin_msg, sizeof(pc->fin_msg), fmt, ap);
	va_end(ap);
	pc->status = status;
	ING_LOGC_RL(ING_LOG_WARN, "svc", &pc->lc, "%s from %s: %s", pc->xp->rpc, pc->peer_str, pc->fin_msg);
	call_finish(pc);
	return status;
}

/* the method hooks the core adds to a transport's: held acks, and the call's end */
static void call_writable(struct ing_grpc_call *c)
{
	struct svc_call *pc = ing_grpc_call_user(c);
	if (pc)
		svc_ack_flush(pc);
}

static void call_close(struct ing_grpc_call *c, int status)
{
	struct svc_call *pc = ing_grpc_call_user(c);
	(void)status;
	if (!pc)
		return;
	ing_grpc_call_set_user(c, NULL);
	call_free(pc);
}

/* before_sleep: the calls that are done or failed during this turn get their trailers. */
static int svc_flush(void *arg)
{
	struct ing_svc *s = arg;
	int n = 0;

	for (struct svc_call *pc = s->calls, *nx; pc && s->want_finish; pc = nx) {
		nx = pc->next;
		if (pc->want_finish && !pc->finished) {
			call_finish(pc);
			n++;
		}
	}
	return n;
}

/* ================================================================ the control mailbox */

/* A part of a striped frame came back: in (ING_EV_PART_IN) or failed (ING_EV_DONE). */
static void part_event(struct ing_svc *s, const struct ing_msg *m)
{
	struct svc_frame *e = frame_record(s, m->f->part_of, FE_FILLING);

	if (!e || !e->stripe) {   /* cannot be: a striped frame waits for every part */
		ING_LOG_RL(ING_LOG_ERR, "svc", "frame %s: a part for a frame not being filled", m->f->frame_id);
		return;
	}
	if (m->kind == ING_EV_PART_IN)
		xport_stripe_part_in(e, m->f);
	else
		xport_stripe_part_failed(e, m->f);
}

/* One event on the control thread's mailbox (calls run inside ing_mbox_run). */
static void on_event(void *ctx, const struct ing_msg *m)
{
	struct ing_svc *s = ctx;
	struct svc_frame *e;

	switch (m->kind) {
	case ING_EV_RECEIVED:   /* f->t_received_ns is the lcore's */
		e = frame_record(s, m->f, FE_FILLING);
		if (!e) {
			ING_LOG_RL(ING_LOG_ERR, "svc", "frame %s: RECEIVED for a frame not being filled",
				   m->f->frame_id);
			break;
		}
		e->state = FE_RECEIVED;
		frame_process(e);
		break;
	case ING_EV_GRANTED:   /* a push frame's slot, or a part of a striped one */
		e = frame_record(s, m->f->part_of ? m->f->part_of : m->f, FE_FILLING);
		if (e)
			svc_ack_granted(e, m->f, m->val, (uint32_t)(m->u64 >> 32), (uint32_t)m->u64);
		break;
	case ING_EV_PART_IN:    /* a part of a striped frame is in (xport/stripe.c) */
		part_event(s, m);
		break;
	case ING_EV_DONE:
		if (m->f->part_of) {   /* a part failed: never a slot of the pool */
			part_event(s, m);
			break;
		}
		/* the frame is control's again: failed in the dataplane while filling (its
		 * status and reason set), or back from persistence after RECEIVED */
		if ((e = frame_record(s, m->f, FE_FILLING))) {
			s->c_rdma_errors++;
			frame_fail(e, m->f->status ? m->f->status : ING_E_INTERNAL, m->f->retryable, false,
				   "frame %s: %s", m->f->frame_id, m->f->msg[0] ? m->f->msg : "transfer failed");
		} else if ((e = frame_record(s, m->f, FE_PERSISTING))) {
			e->state = FE_DONE;
			frame_process(e);
		} else {
			struct ing_log_ctx lc = { .wafer = m->f->wafer_id, .frame = m->f->frame_id };
			ING_LOGC(ING_LOG_ERR, "svc", &lc, "frame %s: ack for a frame the service does not "
				 "hold; slot returned", m->f->frame_id);
			ing_pool_put(m->f);
		}
		break;
	case ING_EV_CONN_ERROR:
	case ING_EV_CONN_RELEASED:
		ing_rdma_conn_event(s->env.rdma, m);   /* NULL engine (gone): nothing to do */
		break;
	default:
		ING_LOG_RL(ING_LOG_ERR, "svc", "unknown message %u on the control mailbox", m->kind);
		break;
	}
}

static void sweep_timer_cb(void *arg)
{
	struct ing_svc *s = arg;
	svc_session_sweep(s);
	ing_timer_arm(s->loop, &s->sweep_timer, ing_now_ns() + SWEEP_NS);
}

/* ================================================================ lifetime */

void ing_svc_attach_fleet(struct ing_svc *s, struct ing_fleet *f)
{
	s->fleet = f;
}

void ing_svc_attach_tier(struct ing_svc *s, struct ing_tier *t)
{
	s->tier = t;
}

void ing_svc_set_node_info(struct ing_svc *s, ing_svc_node_info_fn fn, void *arg)
{
	s->ops.info_fn = fn;
	s->ops.info_arg = arg;
}

const struct ing_grpc_method *ing_svc_methods(struct ing_svc *s, unsigned *n)
{
	*n = s->nmethods;
	return s->methods;
}

void ing_svc_attach_server(struct ing_svc *s, struct ing_grpc_server *srv)
{
	s->srv = srv;
}

void ing_svc_shutdown_begin(struct ing_svc *s)
{
	s->env.stopping = true;
}

bool ing_svc_stopping(const struct ing_svc *s)
{
	return s->env.stopping;
}

bool ing_svc_quiescent(const struct ing_svc *s)
{
	if (s->persisting)
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
		pc->status = status;
		snprintf(pc->fin_msg, sizeof(pc->fin_msg), "%s", message ? message : "");
		call_finish(pc);
	}
}

/* The registered faces' methods, served with the service as their ctx. */
static int methods_init(struct ing_svc *s)
{
	if (faces_overflow) {
		ING_ERR("svc", "more than %u gRPC methods registered", SVC_RPC_MAX);
		return -ENOSPC;
	}
	for (unsigned i = 0; i < nfaces; i++) {
		struct ing_grpc_method *m = &s->methods[i];
		*m = *faces[i].m;
		m->ctx = s;
		if (faces[i].xport) {
			m->on_writable = call_writable;
			m->on_close = call_close;
		}
	}
	s->nmethods = nfaces;
	return 0;
}

/* Zeros of the options the service defaults itself (create and reload agree). */
static void svc_opts_defaults(struct ing_svc_opts *o)
{
	if (o->max_sessions == 0)
		o->max_sessions = ING_DEFAULT_MAX_SESSIONS;
	if (o->credits_max == 0)
		o->credits_max = ING_DEFAULT_CREDITS;
	if (o->credits_default == 0)
		o->credits_default = o->credits_max;
	if (o->frame_timeout_ms == 0)
		o->frame_timeout_ms = ING_DEFAULT_FRAME_TIMEOUT_MS;
	if (o->max_sessions_per_peer == 0)
		o->max_sessions_per_peer = ING_DEFAULT_MAX_SESSIONS_PER_PEER;
	if (o->slot_stall_ms == 0)
		o->slot_stall_ms = ING_DEFAULT_SLOT_STALL_MS;
	if (o->auth_fail_burst == 0)
		o->auth_fail_burst = ING_DEFAULT_AUTH_FAIL_BURST;
	if (o->auth_backoff_max_ms == 0)
		o->auth_backoff_max_ms = ING_DEFAULT_AUTH_BACKOFF_MAX_MS;
}

/* The shared secret from o (NULL: authentication off): 0, or -EINVAL (logged) for a bad length. */
static int svc_set_token(struct ing_svc *s, const char *token)
{
	if (!token) {
		explicit_bzero(s->auth_token, sizeof(s->auth_token));
		s->auth_len = 0;
		s->auth = false;
		return 0;
	}
	size_t n = strnlen(token, ING_AUTH_TOKEN_MAX + 1);
	if (n < ING_AUTH_TOKEN_MIN || n > ING_AUTH_TOKEN_MAX) {
		ING_ERR("svc", "auth token must be %u..%u characters", ING_AUTH_TOKEN_MIN,
			ING_AUTH_TOKEN_MAX);
		return -EINVAL;
	}
	explicit_bzero(s->auth_token, sizeof(s->auth_token));
	memcpy(s->auth_token, token, n);
	s->auth_token[n] = '\0';
	s->auth_len = n;
	s->auth = true;
	return 0;
}

int ing_svc_reload(struct ing_svc *s, const struct ing_svc_opts *o, bool *token_changed)
{
	struct ing_svc_opts n = *o;
	svc_opts_defaults(&n);
	bool had = s->auth;
	bool same = had && n.auth_token && strlen(n.auth_token) == s->auth_len &&
		    svc_auth_token_ok(s, n.auth_token, s->auth_len);
	*token_changed = false;
	if (!same && (had || n.auth_token)) {
		if (svc_set_token(s, n.auth_token))
			return -EINVAL;
		*token_changed = true;
	}
	/* only what a running service can take: the table sizes (max_sessions), the
	 * transports' buffers (max_msg, backlog, chunk) and RDMA stay as they started */
	s->o.credits_default = n.credits_default;
	s->o.credits_max = n.credits_max;
	s->o.max_frame = n.max_frame;
	s->max_frame = ing_pool_max_len(s->pool);
	if (n.max_frame && n.max_frame < s->max_frame)
		s->max_frame = n.max_frame;
	s->o.frame_timeout_ms = n.frame_timeout_ms;
	s->env.frame_timeout_ms = n.frame_timeout_ms;
	s->adm.wait_timeout_ns = (uint64_t)n.frame_timeout_ms * 1000000ull;
	s->o.session_idle_ms = n.session_idle_ms;
	s->o.max_sessions_per_peer = n.max_sessions_per_peer;
	s->o.max_slots_per_peer = n.max_slots_per_peer;
	s->max_slots_per_peer = n.max_slots_per_peer ? n.max_slots_per_peer : (s->nfr * 3 + 3) / 4;
	s->adm.max_slots_per_peer = s->max_slots_per_peer;
	s->o.slot_stall_ms = n.slot_stall_ms;
	s->o.auth_fail_burst = n.auth_fail_burst;
	s->o.auth_backoff_max_ms = n.auth_backoff_max_ms;
	return 0;
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
	ing_timer_init(&s->sweep_timer, sweep_timer_cb, s);
	ing_loop_hook_init(&s->flush, svc_flush, s);
	if (!loop || !pool || !persist || !ctl) {
		ING_ERR("svc", "loop, pool, persistence and the control mailbox are required");
		goto fail;
	}
	svc_opts_defaults(&s->o);
	if (svc_set_token(s, o->auth_token))
		goto fail;
	s->o.auth_token = NULL;   /* the caller's buffer may go: only the copy is used */
	s->max_frame = ing_pool_max_len(pool);
	if (s->o.max_frame && s->o.max_frame < s->max_frame)
		s->max_frame = s->o.max_frame;
	s->env.max_msg = s->o.max_msg;
	s->env.backlog_max = s->o.backlog_max;
	s->env.frame_timeout_ms = s->o.frame_timeout_ms;

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
	s->sess = calloc(s->o.max_sessions, sizeof(*s->sess));
	/* every session, slot and connection could come from a different address */
	s->npeers = s->o.max_sessions + s->nfr + 1024;
	s->peers = calloc(s->npeers, sizeof(*s->peers));
	s->max_slots_per_peer = s->o.max_slots_per_peer ? s->o.max_slots_per_peer :
				(s->nfr * 3 + 3) / 4;
	if (admit_init(&s->adm, loop, pool, s->max_slots_per_peer, s->o.frame_timeout_ms)) {
		ING_ERR("svc", "the pool's size classes are unusable");
		goto fail;
	}
	if (!s->fr || !s->ht || !s->sess || !s->peers) {
		ING_ERR("svc", "out of memory for %u frame entries / %u sessions", s->nfr, s->o.max_sessions);
		goto fail;
	}
	for (uint32_t i = 0; i < s->nfr; i++) {
		s->fr[i].idx = i;
		s->fr[i].svc = s;
		s->fr[i].env = &s->env;
		ing_timer_init(&s->fr[i].timer, frame_timeout_cb, &s->fr[i]);
	}
	if (methods_init(s))
		goto fail;
	s->ctl_sink = (struct ing_mbox_sink){ .mb = ctl, .budget = MBOX_BUDGET, .on_event = on_event,
					      .ctx = s };
	int rc = ing_loop_add_fd(loop, ing_mbox_fd(ctl), EPOLLIN, ing_mbox_sink_cb, &s->ctl_sink);
	if (rc) {
		ING_ERR("svc", "cannot watch the control mailbox: %s", strerror(-rc));
		goto fail;
	}
	s->ctl_fd_added = true;
	ing_loop_before_sleep(loop, &s->flush);
	ing_timer_arm(loop, &s->sweep_timer, ing_now_ns() + SWEEP_NS);

	if (s->o.rdma.rdma_available)
		snprintf(s->note, sizeof(s->note), "rdma: %s:%u; fallback available",
			 s->o.rdma.rdma_addr ? s->o.rdma.rdma_addr : "?", s->o.rdma.rdma_port);
	else
		snprintf(s->note, sizeof(s->note), "rdma: %s; fallback active",
			 s->o.rdma.note && s->o.rdma.note[0] ? s->o.rdma.note : "not available");
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
		call_free(s->calls);
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
	/* the GetFrame reads still out came back on the control mailbox, drained above */
	free(s->get_buf);
	admit_fini(&s->adm);   /* its timer and hook would find s freed */
	if (s->loop) {
		ing_timer_cancel(s->loop, &s->sweep_timer);
		ing_loop_hook_del(s->loop, &s->flush);
	}
	free(s->fr);
	free(s->ht);
	free(s->sess);
	free(s->peers);
	explicit_bzero(s->auth_token, sizeof(s->auth_token));
	free(s);
}
