/* SPDX-License-Identifier: Apache-2.0 */
/*
 * unary.c - the unary RPC faces' shared hooks and reply (unary.h).
 */
#include "control/service/rpc/unary.h"
#include "common/log.h"

#include <stdlib.h>

int svc_unary_start(struct ing_grpc_call *c, void *ctx)
{
	ing_grpc_call_set_user(c, ctx);
	return ING_GRPC_OK;
}

void svc_unary_close(struct ing_grpc_call *c, int status)
{
	(void)c;
	(void)status;
}

int svc_unary_reply(struct ing_grpc_call *c, const ProtobufCMessage *m)
{
	size_t n = protobuf_c_message_get_packed_size(m);
	uint8_t stackbuf[1024];
	uint8_t *buf = n <= sizeof(stackbuf) ? stackbuf : malloc(n);
	if (!buf) {
		ing_grpc_call_finish(c, ING_GRPC_RESOURCE_EXHAUSTED, "out of memory");
		return ING_GRPC_RESOURCE_EXHAUSTED;
	}
	protobuf_c_message_pack(m, buf);
	int rc = ing_grpc_call_send(c, buf, n);
	if (buf != stackbuf)
		free(buf);
	if (rc)
		return ING_GRPC_INTERNAL;
	ing_grpc_call_finish(c, ING_GRPC_OK, NULL);
	return 0;
}

int svc_unary_fail(struct ing_grpc_call *c, int status, const char *msg)
{
	struct ing_log_ctx lc = { .peer = ing_grpc_call_peer(c) };
	ING_LOGC(ING_LOG_INFO, "svc", &lc, "%s from %s: %s", "rpc refused", ing_grpc_call_peer(c), msg);
	ing_grpc_call_finish(c, status, msg);
	return status;
}
