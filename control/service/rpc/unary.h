/* SPDX-License-Identifier: Apache-2.0 */
/*
 * unary.h - what the unary RPC faces share: the method hooks of a call that carries the
 * service as its user data, and the one reply (or refusal) it finishes with.
 */
#ifndef ING_SERVICE_RPC_UNARY_H
#define ING_SERVICE_RPC_UNARY_H

#include <protobuf-c/protobuf-c.h>

#include "control/net/grpc_server.h"

/* on_start / on_close of a unary method: the call's user data is the service (ctx). */
int svc_unary_start(struct ing_grpc_call *c, void *ctx);
void svc_unary_close(struct ing_grpc_call *c, int status);
/* Send m and finish OK: 0, or the status the call fails with (out of memory, closed). */
int svc_unary_reply(struct ing_grpc_call *c, const ProtobufCMessage *m);
/* Finish with status and msg (logged with the client's address); returns status. */
int svc_unary_fail(struct ing_grpc_call *c, int status, const char *msg);

#endif
