/* SPDX-License-Identifier: Apache-2.0 */
/*
 * svc_tier.c - the service's face of the object store tier (dataplane/tier/): frames
 * refused at the high-water mark, the tier's state in StatsReply (field 60, TierStats) and
 * /metrics, and rpc GetFrame. The tier thread does the work (uploads, and every read of a
 * frame: the local file or a ranged GET from the store); everything here runs on the
 * control thread and never waits for a disk or the store.
 *
 * GetFrame: the call takes one of the tier's reads (at most ING_TIER_MAX_READS calls at
 * once: RESOURCE_EXHAUSTED beyond), the tier thread fills its buffer with the next 4 MiB and
 * gives it back on its ring; control sends them as FrameData messages of 1 MiB (the gRPC
 * layer's bounded send buffer and on_writable pace a slow client) and hands the read back
 * for the next chunk. So a call holds at most one chunk in the node, whatever the frame's
 * size, and nothing waits on the control thread.
 */
#include "control/svc_internal.h"
#include "control/metrics.h"
#include "common/log.h"
#include "dataplane/tier/tier.h"
#include "h3000.pb-c.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

bool svc_tier_refusing(struct ing_svc *s, uint64_t length, char *why, size_t whylen)
{
	/* the last frame's verdict is what Stats and /metrics call "refusing": a frame of
	 * another size may still fit, and the next one that does clears it */
	s->tier_refusing = s->tier && ing_tier_refusing(s->tier, s->inflight_bytes + length, why, whylen);
	if (s->tier_refusing)
		s->c_tier_refused++;
	return s->tier_refusing;
}

void svc_tier_frame_finished(struct ing_svc *s, uint64_t length)
{
	ing_tier_frame_finished(s->tier, length);
}

void svc_tier_stats(struct ing_svc *s, H3000__StatsReply *r, H3000__TierStats *p,
		    struct ing_tier_stats *st)
{
	if (!s->tier)
		return;
	ing_tier_get_stats(s->tier, st);
	h3000__tier_stats__init(p);
	p->enabled = st->enabled;
	p->store = st->store;
	p->storestate = (H3000__TierStoreState)st->store_state;   /* same numbers (tier.h) */
	p->storeerror = st->store_error;
	p->backlogframes = st->backlog_frames;
	p->backlogbytes = st->backlog_bytes;
	p->lagseconds = st->lag_seconds;
	p->uploadedframes = st->uploaded_frames;
	p->uploadedbytes = st->uploaded_bytes;
	p->uploadbytespersecond = st->upload_bytes_per_second;
	p->uploaderrors = st->upload_errors;
	p->uploadsinprogress = st->uploads_in_progress;
	p->alreadystored = st->already_stored;
	p->conflicts = st->conflicts;
	p->digestmismatches = st->digest_mismatches;
	p->readbacks = st->read_backs;
	p->storecause = (char *)st->store_cause;
	p->verification = (char *)st->verification;
	p->locationsknown = st->census_done;
	p->frameslocal = st->frames_local;
	p->framesboth = st->frames_both;
	p->framestiered = st->frames_tiered;
	p->localbytes = st->local_bytes;
	p->localdeleted = st->local_deleted;
	p->refusing = s->tier_refusing;
	p->refusedframes = s->c_tier_refused;
	p->highwaterpercent = st->high_water_pct;
	p->highwaterbytes = st->high_water_bytes;
	p->diskusedpercent = st->usage_pct;
	p->localretentionms = st->retention_ms;
	r->tier = p;
}

void svc_tier_metrics(struct ing_svc *s, struct ing_mtext *t)
{
	if (!s->tier)
		return;
	struct ing_tier_stats st;
	ing_tier_get_stats(s->tier, &st);
	if (!st.enabled)
		return;
	ing_mtext_family(t, "ingest_tier_store_up", "gauge",
			 "1 when the object store answered the last request as expected.");
	ing_mtext_u64(t, "ingest_tier_store_up", "", st.store_state == ING_TIER_STORE_OK);
	ing_mtext_family(t, "ingest_tier_backlog_frames", "gauge",
			 "Durable frames not yet verified in the object store.");
	ing_mtext_u64(t, "ingest_tier_backlog_frames", "", st.backlog_frames);
	ing_mtext_family(t, "ingest_tier_backlog_bytes", "gauge", "Bytes of those frames.");
	ing_mtext_u64(t, "ingest_tier_backlog_bytes", "", st.backlog_bytes);
	ing_mtext_family(t, "ingest_tier_lag_seconds", "gauge",
			 "Age of the oldest frame not yet in the object store (0: none).");
	ing_mtext_sample(t, "ingest_tier_lag_seconds", "", st.lag_seconds);
	ing_mtext_family(t, "ingest_tier_uploaded_frames_total", "counter",
			 "Frames uploaded and verified in the object store.");
	ing_mtext_u64(t, "ingest_tier_uploaded_frames_total", "", st.uploaded_frames);
	ing_mtext_family(t, "ingest_tier_uploaded_bytes_total", "counter",
			 "Bytes uploaded and verified (rate() of it is the upload rate).");
	ing_mtext_u64(t, "ingest_tier_uploaded_bytes_total", "", st.uploaded_bytes);
	ing_mtext_family(t, "ingest_tier_upload_errors_total", "counter",
			 "Failed upload attempts (each retried).");
	ing_mtext_u64(t, "ingest_tier_upload_errors_total", "", st.upload_errors);
	ing_mtext_family(t, "ingest_tier_conflicts_total", "counter",
			 "Frames whose key holds other bytes in the store (kept local).");
	ing_mtext_u64(t, "ingest_tier_conflicts_total", "", st.conflicts);
	ing_mtext_family(t, "ingest_tier_digest_mismatches_total", "counter",
			 "Uploads the store kept with other bytes than the frame's (its ETag or a read-back); "
			 "the local copy is kept.");
	ing_mtext_u64(t, "ingest_tier_digest_mismatches_total", "", st.digest_mismatches);
	ing_mtext_family(t, "ingest_tier_read_backs_total", "counter",
			 "Objects verified by reading them back (the store's ETag is not the frame's MD5).");
	ing_mtext_u64(t, "ingest_tier_read_backs_total", "", st.read_backs);
	if (st.store_state != ING_TIER_STORE_OK && st.store_state != ING_TIER_STORE_UNKNOWN) {
		char l[64];
		snprintf(l, sizeof(l), "cause=\"%s\"", st.store_cause);
		ing_mtext_family(t, "ingest_tier_store_problem", "gauge",
				 "1, labelled with what is wrong with the object store (Stats.tier.storeError "
				 "says it in words).");
		ing_mtext_u64(t, "ingest_tier_store_problem", l, 1);
	}
	if (st.census_done) {
		ing_mtext_family(t, "ingest_tier_frames", "gauge",
				 "Catalogued frames by where their bytes are: local (upload pending), "
				 "both, tiered (object only).");
		ing_mtext_u64(t, "ingest_tier_frames", "location=\"local\"", st.frames_local);
		ing_mtext_u64(t, "ingest_tier_frames", "location=\"both\"", st.frames_both);
		ing_mtext_u64(t, "ingest_tier_frames", "location=\"tiered\"", st.frames_tiered);
		ing_mtext_family(t, "ingest_tier_local_bytes", "gauge", "Bytes of frames with a local copy.");
		ing_mtext_u64(t, "ingest_tier_local_bytes", "", st.local_bytes);
	}
	ing_mtext_family(t, "ingest_tier_local_deleted_total", "counter",
			 "Local copies deleted after their object was verified.");
	ing_mtext_u64(t, "ingest_tier_local_deleted_total", "", st.local_deleted);
	ing_mtext_family(t, "ingest_tier_refusing", "gauge",
			 "1 when the last new frame was refused NO_SPACE at --local-high-water.");
	ing_mtext_u64(t, "ingest_tier_refusing", "", s->tier_refusing);
	ing_mtext_family(t, "ingest_tier_refused_frames_total", "counter",
			 "Frames refused NO_SPACE (retryable) at --local-high-water.");
	ing_mtext_u64(t, "ingest_tier_refused_frames_total", "", s->c_tier_refused);
}

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

/* ING_EV_TIER_READ_DONE on the control mailbox (svc.c): the tier thread answered read r */
void svc_tier_read_done(struct ing_svc *s, struct ing_tier_read *r)
{
	struct get_call *g = r->owner;
	(void)s;
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

void ing_svc_attach_tier(struct ing_svc *s, struct ing_tier *t)
{
	s->tier = t;
	if (!t)
		return;
	s->get_buf = malloc(GET_MSG_MAX);
	if (!s->get_buf)
		ING_ERR("svc", "GetFrame unavailable: out of memory");
}

void svc_tier_destroy(struct ing_svc *s)
{
	/* reads still out came back on the control mailbox, drained before this (svc.c) */
	free(s->get_buf);
	s->get_buf = NULL;
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
	if (!s->tier || !s->get_buf)
		return get_fail(g, ING_GRPC_UNAVAILABLE, "this node keeps no frames (--sink null)");
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

const struct ing_grpc_method svc_getframe_method = {
	.path = "/h3000.RDMASvc/GetFrame",
	.on_start = get_start,
	.on_message = get_message,
	.on_half_close = get_half_close,
	.on_writable = get_writable,
	.on_close = get_close,
};
