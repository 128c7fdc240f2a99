/* SPDX-License-Identifier: Apache-2.0 */
/*
 * members.c - rpc Members: the fleet's membership producers route by. The fleet state lives
 * in control/fleet/ (its exporter thread talks to PostgreSQL); this reads its snapshot on
 * the control thread and never waits for PostgreSQL. (The fleet's other faces: the node id
 * and state in NegotiateReply, rpc/negotiate.c; the export counters in Stats, rpc/stats.c,
 * and /metrics, obs/fleet_metrics.c.)
 *
 * Members needs no token even when the node has one: like grpc.health.v1 it says only
 * which nodes exist, and a producer asks it before it negotiates.
 */
#include "control/service/state.h"
#include "control/service/pb.h"
#include "control/service/rpc/unary.h"
#include "common/log.h"
#include "control/fleet/fleet.h"
#include "h3000.pb-c.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int members_msg(struct ing_grpc_call *c, const uint8_t *msg, size_t len)
{
	struct ing_svc *s = ing_grpc_call_user(c);
	(void)msg;
	(void)len;
	if (!s->fleet) {
		ing_grpc_call_finish(c, ING_GRPC_UNIMPLEMENTED, "this node has no fleet identity");
		return ING_GRPC_UNIMPLEMENTED;
	}
	struct ing_fleet_member *m = calloc(ING_FLEET_MAX_MEMBERS, sizeof(*m));
	H3000__Member *pm = calloc(ING_FLEET_MAX_MEMBERS, sizeof(*pm));
	H3000__Member **pp = calloc(ING_FLEET_MAX_MEMBERS, sizeof(*pp));
	int rc = ING_GRPC_RESOURCE_EXHAUSTED;
	if (!m || !pm || !pp) {
		ing_grpc_call_finish(c, rc, "out of memory");
		goto out;
	}
	uint64_t epoch = 0;
	const char *source = "static";
	unsigned n = ing_fleet_members(s->fleet, m, ING_FLEET_MAX_MEMBERS, &epoch, &source);
	if (n > ING_FLEET_MAX_MEMBERS)
		n = ING_FLEET_MAX_MEMBERS;
	H3000__MembersReply rep = H3000__MEMBERS_REPLY__INIT;
	for (unsigned i = 0; i < n; i++) {
		h3000__member__init(&pm[i]);
		pm[i].nodeid = m[i].node_id;
		pm[i].address = m[i].address;
		pm[i].state = svc_pb_member_state(m[i].state);
		pm[i].heartbeatunixms = m[i].heartbeat_ms;
		pp[i] = &pm[i];
	}
	rep.n_members = n;
	rep.members = pp;
	rep.selfid = (char *)ing_fleet_node_id(s->fleet);
	rep.epoch = epoch;
	rep.source = (char *)source;
	size_t sz = protobuf_c_message_get_packed_size(&rep.base);
	uint8_t *buf = malloc(sz ? sz : 1);
	if (!buf) {
		ing_grpc_call_finish(c, rc, "out of memory");
		goto out;
	}
	protobuf_c_message_pack(&rep.base, buf);
	rc = ing_grpc_call_send(c, buf, sz) ? ING_GRPC_INTERNAL : 0;
	free(buf);
	if (!rc)
		ing_grpc_call_finish(c, ING_GRPC_OK, NULL);
out:
	free(m);
	free(pm);
	free(pp);
	return rc;
}

static const struct ing_grpc_method members_method = {
	.path = "/h3000.RDMASvc/Members",
	.on_start = svc_unary_start,
	.on_message = members_msg,
	.on_close = svc_unary_close,
};
SVC_RPC_REGISTER(members_method)
