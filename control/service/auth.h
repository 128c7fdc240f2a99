/* SPDX-License-Identifier: Apache-2.0 */
/*
 * auth.h - the service's shared-secret authentication (ingestd --auth-token-file): the
 * length-exact token compare, the failed-attempt bucket and back-off per peer address, the
 * bearer check of the unary RPCs, and which call may use which session (svc_session_bind).
 * Control thread.
 */
#ifndef ING_SERVICE_AUTH_H
#define ING_SERVICE_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ing_grpc_call;
struct ing_svc;
struct svc_call;
struct svc_peer;

/* True when t[0..n) is exactly the node's token (no shorter, no longer: a NUL inside is a
 * mismatch); the time depends on the lengths only. False when authentication is off. */
bool svc_auth_token_ok(const struct ing_svc *s, const char *t, size_t n);
/*
 * Failed-authentication back-off. svc_auth_locked: true (and why) while the peer is refused
 * after too many failures; nothing it sends is checked then. svc_auth_failed counts one
 * failure; svc_auth_succeeded clears the back-off.
 */
bool svc_auth_locked(struct ing_svc *s, struct svc_peer *p, char *why, size_t whylen);
void svc_auth_failed(struct ing_svc *s, struct svc_peer *p);
void svc_auth_succeeded(struct svc_peer *p);
/* Finish call c UNAUTHENTICATED (counted, logged rate-limited with the client's address
 * alone); returns the status. */
int svc_auth_refuse(struct ing_svc *s, struct ing_grpc_call *c, const char *rpc, const char *msg);
/*
 * With authentication on, rpc needs "authorization: Bearer <token>" (Stats, GetFrame): 0 to
 * go on, or the status the call was finished with (UNAUTHENTICATED, or RESOURCE_EXHAUSTED
 * while the address is locked out after failures).
 */
int svc_require_bearer(struct ing_svc *s, struct ing_grpc_call *c, const char *rpc);

/*
 * Bind call pc to session sid (0: an implicit one, where the node takes unauthenticated
 * clients): a session id alone is no credential, only the connection (or, with mTLS, the
 * client certificate) that negotiated it may use it; a peer locked out after failed
 * authentications is refused; a failed attempt counts. 0, or -errno with pc->status and
 * pc->fin_msg set (logged).
 */
int svc_session_bind(struct ing_svc *s, struct svc_call *pc, uint64_t sid);

#endif
