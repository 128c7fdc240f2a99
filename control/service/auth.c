/* SPDX-License-Identifier: Apache-2.0 */
/*
 * auth.c - shared-secret authentication and who may use a session (auth.h). The token itself
 * is never logged; a refusal is logged with the client's address alone, rate-limited.
 */
#include "control/service/auth.h"
#include "control/service/state.h"
#include "common/clock.h"
#include "common/log.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define AUTH_REFILL_NS 1000000000ull   /* one failed attempt back per second */

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

int svc_auth_refuse(struct ing_svc *s, struct ing_grpc_call *c, const char *rpc, const char *msg)
{
	s->c_auth_refused++;
	struct ing_log_ctx lc = { .peer = ing_grpc_call_peer(c) };
	ING_LOGC_RL(ING_LOG_WARN, "svc", &lc, "%s from %s refused: %s (%" PRIu64 " refused so far)", rpc,
		    ing_grpc_call_peer(c), msg, s->c_auth_refused);
	ing_grpc_call_finish(c, ING_GRPC_UNAUTHENTICATED, msg);
	return ING_GRPC_UNAUTHENTICATED;
}

int svc_require_bearer(struct ing_svc *s, struct ing_grpc_call *c, const char *rpc)
{
	if (!s->auth)
		return 0;
	/* the one credential of these calls: the node's token as a bearer token (nghttp2
	 * refuses NUL, CR and LF in header values: strlen is the value's length) */
	char why[160];
	struct svc_peer *peer = svc_peer_get(s, ing_grpc_call_peer_addr(c));
	const char *h = ing_grpc_call_header(c, "authorization");
	int rc = 0;
	if (svc_auth_locked(s, peer, why, sizeof(why))) {
		struct ing_log_ctx lc = { .peer = ing_grpc_call_peer(c) };
		ING_LOGC(ING_LOG_INFO, "svc", &lc, "%s from %s refused: %s", rpc, ing_grpc_call_peer(c), why);
		ing_grpc_call_finish(c, ING_GRPC_RESOURCE_EXHAUSTED, why);
		rc = ING_GRPC_RESOURCE_EXHAUSTED;
	} else if (!h || strncasecmp(h, "Bearer ", 7) != 0 || !svc_auth_token_ok(s, h + 7, strlen(h + 7))) {
		svc_auth_failed(s, peer);
		snprintf(why, sizeof(why), "this node requires the header 'authorization: Bearer <token>' for %s",
			 rpc);
		rc = svc_auth_refuse(s, c, rpc, why);
	} else {
		svc_auth_succeeded(peer);
	}
	svc_peer_put(s, peer);
	return rc;
}

/* ================================================================ a call's session */

/*
 * Why call pc cannot have session sid (0: an implicit one): 0 with *ss; or -errno with
 * pc->status and pc->fin_msg, and *strike when that was a failed authentication attempt.
 */
static int bind_check(struct ing_svc *s, struct svc_call *pc, uint64_t sid, const char *ident,
		      uint64_t conn, bool locked, struct svc_session **ss, bool *strike)
{
	*strike = false;
	if (pc->evicted) {
		pc->status = ING_GRPC_RESOURCE_EXHAUSTED;
		snprintf(pc->fin_msg, sizeof(pc->fin_msg), "session evicted: the session table is full");
		return -ENOSPC;
	}
	if (locked) {   /* pc->fin_msg says until when */
		pc->status = ING_GRPC_RESOURCE_EXHAUSTED;
		return -EAGAIN;
	}
	if (!sid && s->auth) {
		/* no implicit sessions: the session is the proof of an authenticated Negotiate */
		pc->status = ING_GRPC_UNAUTHENTICATED;
		snprintf(pc->fin_msg, sizeof(pc->fin_msg),
			 "this node requires Negotiate with an authToken: name the session it returns "
			 "(h3000-session-id header or sessionId)");
		s->c_auth_refused++;
		*strike = true;
		return -EACCES;
	}
	if (!sid) {
		*ss = svc_session_implicit(s, pc->peer);
		if (!*ss) {
			pc->status = ING_GRPC_RESOURCE_EXHAUSTED;
			snprintf(pc->fin_msg, sizeof(pc->fin_msg), "%s", s->sess_why);
			return -ENOSPC;
		}
		(*ss)->owner_conn = conn;
		(*ss)->icall = pc;
		return 0;
	}
	*ss = svc_session_find(s, sid);
	if (!*ss) {
		pc->status = ING_GRPC_FAILED_PRECONDITION;
		snprintf(pc->fin_msg, sizeof(pc->fin_msg),
			 "unknown session %" PRIu64 " (expired or never negotiated)", sid);
		*strike = s->auth;   /* a guessed session id is a failed attempt too */
		return -ENOENT;
	}
	/* a session id alone is no credential: only its owner may use it */
	const struct svc_session *o = *ss;
	bool mine = o->implicit ? false : o->owner_ident[0] ? ident && strcmp(ident, o->owner_ident) == 0 :
				  o->owner_conn == conn;
	if (!mine) {
		pc->status = ING_GRPC_PERMISSION_DENIED;
		snprintf(pc->fin_msg, sizeof(pc->fin_msg),
			 "session %" PRIu64 " belongs to another client (it is bound to the %s that negotiated it)",
			 sid, o->owner_ident[0] ? "client certificate" : "connection");
		*strike = s->auth;
		return -EACCES;
	}
	if (s->auth && !o->authed) {   /* cannot happen today: every session is */
		pc->status = ING_GRPC_UNAUTHENTICATED;
		snprintf(pc->fin_msg, sizeof(pc->fin_msg),
			 "session %" PRIu64 " was not created by an authenticated Negotiate", sid);
		s->c_auth_refused++;
		return -EACCES;
	}
	return 0;
}

int svc_session_bind(struct ing_svc *s, struct svc_call *pc, uint64_t sid)
{
	const char *ident = ing_grpc_call_identity(pc->call);
	uint64_t conn = ing_grpc_call_conn_id(pc->call);
	bool locked = s->auth && svc_auth_locked(s, pc->peer, pc->fin_msg, sizeof(pc->fin_msg));
	struct svc_session *ss = NULL;
	bool strike;
	int rc;

	if (pc->sess)
		return 0;
	rc = bind_check(s, pc, sid, ident, conn, locked, &ss, &strike);
	if (!rc) {
		pc->sess = ss;
		pc->lc.session = ss->id;
		ss->streams++;
		return 0;
	}
	struct ing_log_ctx lc = pc->lc;
	lc.session = sid;
	if (pc->status == ING_GRPC_PERMISSION_DENIED)   /* someone else's session: a warning */
		ING_LOGC_RL(ING_LOG_WARN, "svc", &lc, "%s from %s (%s) refused: %s", pc->xp->rpc,
			    pc->peer_str, ident ? ident : "no certificate", pc->fin_msg);
	else
		ING_LOGC(ING_LOG_INFO, "svc", &lc, "%s from %s refused: %s", pc->xp->rpc, pc->peer_str,
			 pc->fin_msg);
	if (strike)
		svc_auth_failed(s, pc->peer);
	return rc;
}
