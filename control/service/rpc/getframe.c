/* SPDX-License-Identifier: Apache-2.0 */
/*
 * getframe.c - rpc GetFrame: any stored frame back, from the node's disk or the object
 * store tier (dataplane/tier/). The tier thread does every read (the local file or a ranged
 * GET from the store); everything here runs on the control thread and never waits for a
 * disk or the store. (The tier's other faces: its high-water refusal is the core's
 * admission check, its state is in Stats, rpc/stats.c, and /metrics, obs/tier_metrics.c.)
 *
 * GetFrame: the call takes one of the tier's reads (at most ING_TIER_MAX_READS calls at
 * once: RESOURCE_EXHAUSTED beyond), the tier thread fills its buffer with the next 4 MiB and
 * gives it back on its ring; control sends them as FrameData messages of 1 MiB (the gRPC
 * layer's bounded send buffer and on_writable pace a slow client) and hands the read back
 * for the next chunk. So a call holds at most one chunk in the node, whatever the frame's
 * size, and nothing waits on the control thread.
 */
#include "control/service/state.h"
#include "control/service/auth.h"
#include "control/service/pb.h"
#include "common/ident.h"
#include "common/log.h"
#include "dataplane/tier/tier.h"
#include "h3000.pb-c.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

/* ---------------------------------------------------------------- rpc GetFrame */

#define GET_MSG_DATA (1u << 20)   /* data per FrameData, well inside the 4 MiB message limit */
#define GET_MSG_MAX (GET_MSG_DATA + 2048)

/* One GetFrame call. Freed when both the call is over and its read is back from the tier. */
struct get_call {
	struct ing_svc *s;
	struct ing_grpc_call *call;    /* NULL once the call is over */
	struct ing_tier_read *rd;
	bool rd_out;                   /* submitted: the tier thread has it */
	bool first_sent;
	bool finished;
	size_t pos;                    /* bytes of rd->buf sent so far */
};

static void get_free(struct get_call *g)
{
	if (g->rd)
		ing_tier_read_put(g->s->tier, g->rd);
	free(g);
}

static int read_status(int st)
{
	switch (st) {
	case -ENOENT: return ING_GRPC_NOT_FOUND;
	case -ENODATA: return ING_GRPC_FAILED_PRECONDITION;
	case -EAGAIN:
	case -ECANCELED: return ING_GRPC_UNAVAILABLE;
	case -EBADMSG:
	case -EIO: return ING_GRPC_DATA_LOSS;
	default: return ING_GRPC_INTERNAL;
	}
}

static void get_finish(struct get_call *g, int status, const char *msg)
{
	if (g->finished || !g->call)
		return;
	g->finished = true;
	if (status != ING_GRPC_OK) {
		g->s->c_get_failed++;
		ING_LOG_RL(ING_LOG_INFO, "svc", "GetFrame from %s: %s", ing_grpc_call_peer(g->call), msg);
	} else {
		g->s->c_get_frames++;
	}
	ing_grpc_call_finish(g->call, status, msg);
}

/* Send what the tier read into rd->buf, a message at a time, as far as the call takes it. */
static void get_pump(struct get_call *g)
{
	struct ing_svc *s = g->s;
	struct ing_tier_read *r = g->rd;
	static const char *const loc[] = { "local", "both", "tiered" };

	while (g->pos < r->n) {
		size_t k = r->n - g->pos < GET_MSG_DATA ? r->n - g->pos : GET_MSG_DATA;
		H3000__FrameData m = H3000__FRAME_DATA__INIT;
		if (!g->first_sent) {
			m.waferid = r->wafer_id;
			m.frameid = r->frame_id;
			m.length = r->length;
			m.crc32c = r->crc32c;
			m.timestamp = r->timestamp;
			m.location = (char *)loc[r->location < 3 ? r->location : 0];
			m.source = r->from == ING_TIER_FROM_STORE ? H3000__FRAME_SOURCE__SOURCE_STORE :
								    H3000__FRAME_SOURCE__SOURCE_LOCAL;
		}
		m.offset = r->offset + g->pos;
		m.data.data = r->buf + g->pos;
		m.data.len = k;
		size_t len = h3000__frame_data__get_packed_size(&m);
		if (len > GET_MSG_MAX) {
			get_finish(g, ING_GRPC_INTERNAL, "FrameData larger than expected");
			return;
		}
		h3000__frame_data__pack(&m, s->get_buf);
		int rc = ing_grpc_call_send(g->call, s->get_buf, len);
		if (rc == -ENOBUFS)
			return;   /* on_writable goes on */
		if (rc) {
			g->finished = true;   /* the call is closing: on_close frees */
			return;
		}
		g->first_sent = true;
		g->pos += k;
		s->c_get_bytes += k;
	}
	if (r->last) {
		get_finish(g, ING_GRPC_OK, NULL);
		return;
	}
	g->pos = 0;
	if (ing_tier_read_submit(s->tier, r)) {
		get_finish(g, ING_GRPC_INTERNAL, "the read could not be handed to the tier thread");
		return;
	}
	g->rd_out = true;
}

/* r->done, a call on the control mailbox: the tier thread answered read r */
static void get_read_done(void *arg, uint32_t val)
{
	struct ing_tier_read *r = arg;
	struct get_call *g = r->owner;
	(void)val;
	g->rd_out = false;
	if (!g->call) {   /* the call ended while the tier held the read */
		get_free(g);
		return;
	}
	if (r->status) {
		get_finish(g, read_status(r->status), r->msg);
		return;
	}
	g->pos = 0;
	get_pump(g);
}

static int get_start(struct ing_grpc_call *c, void *ctx)
{
	struct get_call *g = calloc(1, sizeof(*g));
	if (!g)
		return ING_GRPC_RESOURCE_EXHAUSTED;
	g->s = ctx;
	g->call = c;
	ing_grpc_call_set_user(c, g);
	return ING_GRPC_OK;
}

static int get_fail(struct get_call *g, int status, const char *msg)
{
	get_finish(g, status, msg);
	return status;
}

static int get_message(struct ing_grpc_call *c, const uint8_t *msg, size_t len)
{
	struct get_call *g = ing_grpc_call_user(c);
	struct ing_svc *s = g->s;
	char why[ING_ID_MAX + 200];

	if (g->rd)
		return get_fail(g, ING_GRPC_INVALID_ARGUMENT, "one GetFrameRequest per call");
	int rc = svc_require_bearer(s, c, "GetFrame");
	if (rc) {
		g->finished = true;
		return rc;
	}
	if (!s->tier)
		return get_fail(g, ING_GRPC_UNAVAILABLE, "this node keeps no frames (--sink null)");
	if (!s->get_buf && !(s->get_buf = malloc(GET_MSG_MAX)))   /* one for all calls; the core frees it */
		return get_fail(g, ING_GRPC_RESOURCE_EXHAUSTED, "out of memory for GetFrame");
	if (svc_pb_string_has_nul(msg, len, 1, 2))
		return get_fail(g, ING_GRPC_INVALID_ARGUMENT,
				"waferId or frameId contains a NUL byte: both must be " ING_ID_RULE);
	H3000__GetFrameRequest *q = h3000__get_frame_request__unpack(NULL, len, msg);
	if (!q)
		return get_fail(g, ING_GRPC_INVALID_ARGUMENT, "malformed GetFrameRequest");
	const char *wafer = q->waferid && q->waferid[0] ? q->waferid : ING_DEFAULT_WAFER;
	const char *bad = ing_id_check(q->frameid, strlen(q->frameid));
	const char *badw = ing_id_check(wafer, strlen(wafer));
	int src = q->source;
	if (bad || badw) {
		char idp[96];
		ing_id_printable(idp, sizeof(idp), bad ? q->frameid : wafer, strlen(bad ? q->frameid : wafer));
		snprintf(why, sizeof(why), "%s '%s' %s: it must be " ING_ID_RULE, bad ? "frameId" : "waferId",
			 idp, bad ? bad : badw);
		h3000__get_frame_request__free_unpacked(q, NULL);
		return get_fail(g, ING_GRPC_INVALID_ARGUMENT, why);
	}
	if (src < ING_TIER_FROM_ANY || src > ING_TIER_FROM_STORE) {
		h3000__get_frame_request__free_unpacked(q, NULL);
		return get_fail(g, ING_GRPC_INVALID_ARGUMENT, "source must be SOURCE_ANY, SOURCE_LOCAL or SOURCE_STORE");
	}
	struct ing_tier_read *r = ing_tier_read_get(s->tier);
	if (!r) {
		h3000__get_frame_request__free_unpacked(q, NULL);
		snprintf(why, sizeof(why), "%u GetFrame calls are being served already: retry", ING_TIER_MAX_READS);
		return get_fail(g, ING_GRPC_RESOURCE_EXHAUSTED, why);
	}
	snprintf(r->wafer_id, sizeof(r->wafer_id), "%s", wafer);
	snprintf(r->frame_id, sizeof(r->frame_id), "%s", q->frameid);
	h3000__get_frame_request__free_unpacked(q, NULL);
	r->want = (enum ing_tier_source)src;
	r->owner = g;
	r->done = get_read_done;
	g->rd = r;
	if (ing_tier_read_submit(s->tier, r))
		return get_fail(g, ING_GRPC_UNAVAILABLE, "the tier thread is busy: retry");
	g->rd_out = true;
	return 0;
}

static void get_half_close(struct ing_grpc_call *c)
{
	struct get_call *g = ing_grpc_call_user(c);
	if (g && !g->rd && !g->finished)
		get_finish(g, ING_GRPC_INVALID_ARGUMENT, "no GetFrameRequest");
}

static void get_writable(struct ing_grpc_call *c)
{
	struct get_call *g = ing_grpc_call_user(c);
	if (g && g->rd && !g->rd_out && !g->finished)
		get_pump(g);
}

static void get_close(struct ing_grpc_call *c, int status)
{
	struct get_call *g = ing_grpc_call_user(c);
	(void)status;
	if (!g)
		return;
	ing_grpc_call_set_user(c, NULL);
	g->call = NULL;
	if (!g->rd_out)
		get_free(g);   /* else freed when the tier gives the read back */
}

static const struct ing_grpc_method getframe_method = {
	.path = "/h3000.RDMASvc/GetFrame",
	.on_start = get_start,
	.on_message = get_message,
	.on_half_close = get_half_close,
	.on_writable = get_writable,
	.on_close = get_close,
};
SVC_RPC_REGISTER(getframe_method)
