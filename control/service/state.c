/* SPDX-License-Identifier: Apache-2.0 */
/*
 * state.c - the service's tables (state.h): sessions (found by id, made by Negotiate or
 * for a stream that names none, evicted when the table is full, expired when idle) and
 * peer addresses (what each holds, for the per-peer limits and the failed-auth back-off),
 * and the log contexts that name them. Fixed tables, no allocation after create.
 * Control thread.
 */
#include "control/service/state.h"
#include "common/clock.h"
#include "common/log.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#define EVICT_STREAM_IDLE_NS 1000000000ull   /* an implicit stream idle this long may go */

/* ================================================================ peers */

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

/* ================================================================ calls ending */

void svc_call_input(struct svc_call *pc)
{
	bool want = pc->blocked || pc->acks_waiting;

	if (want == pc->paused || pc->finished)
		return;
	pc->paused = want;
	if (want)
		ing_grpc_call_pause(pc->call);
	else
		ing_grpc_call_resume(pc->call);   /* held input: at this turn's flush */
}

void svc_call_finish_later(struct svc_call *pc, int status, const char *msg)
{
	if (pc->finished || pc->want_finish)
		return;
	pc->want_finish = true;
	pc->closing = true;
	pc->status = status;
	snprintf(pc->fin_msg, sizeof(pc->fin_msg), "%s", msg ? msg : "");
	pc->svc->want_finish++;
	ing_loop_hook_arm(&pc->svc->flush);
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

void svc_session_drop(struct ing_svc *s, struct svc_session *ss)
{
	if (ss->peer) {
		ss->peer->sessions--;
		svc_peer_put(s, ss->peer);
		ss->peer = NULL;
	}
	ss->in_use = false;
	s->nsess--;
}

void svc_session_sweep(struct ing_svc *s)
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
			svc_session_drop(s, ss);
		}
	}
}

/* An implicit session whose stream has nothing in flight and nothing waiting. */
static bool stream_idle(const struct svc_session *ss, uint64_t now)
{
	const struct svc_call *pc = ss->icall;
	if (!ss->implicit || ss->cr.inflight || now - ss->idle_since_ns < EVICT_STREAM_IDLE_NS)
		return false;
	return !pc || !(pc->blocked || pc->closing);
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
	svc_session_drop(s, old);
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
	ss->rail = -1;
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

/* ================================================================ log contexts */

static const char *nonempty(const char *s)
{
	return s && *s ? s : NULL;
}

struct ing_log_ctx svc_log_frame(const struct svc_frame *e)
{
	struct ing_log_ctx c = { 0 };
	if (e->call)
		c.peer = e->call->peer_str;
	else if (e->peer)
		c.peer = nonempty(e->peer->ip);
	c.session = e->sess ? e->sess->id : 0;
	if (e->f) {
		c.wafer = nonempty(e->f->wafer_id);
		c.frame = nonempty(e->f->frame_id);
	}
	return c;
}

struct ing_log_ctx svc_log_session(const struct svc_session *ss)
{
	struct ing_log_ctx c = { .session = ss->id };
	c.peer = ss->peer ? nonempty(ss->peer->ip) : NULL;
	return c;
}
