/* SPDX-License-Identifier: Apache-2.0 */
/*
 * svc_tier.c - the service's face of the object store tier (dataplane/tier/): frames
 * refused at the high-water mark, the tier's state in StatsReply (field 60, TierStats) and
 * /metrics. The tier thread does the work; everything here reads its snapshot on the
 * control thread and never waits for the store.
 */
#include "control/svc_internal.h"
#include "control/metrics.h"
#include "dataplane/tier/tier.h"
#include "h3000.pb-c.h"

#include <stdio.h>
#include <string.h>

void ing_svc_attach_tier(struct ing_svc *s, struct ing_tier *t)
{
	s->tier = t;
}

bool svc_tier_refusing(struct ing_svc *s, char *why, size_t whylen)
{
	if (!s->tier || !ing_tier_refusing(s->tier, why, whylen))
		return false;
	s->c_tier_refused++;
	return true;
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
	p->locationsknown = st->census_done;
	p->frameslocal = st->frames_local;
	p->framesboth = st->frames_both;
	p->framestiered = st->frames_tiered;
	p->localbytes = st->local_bytes;
	p->localdeleted = st->local_deleted;
	p->refusing = st->refusing;
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
			 "1 while new frames are refused NO_SPACE at --local-high-water.");
	ing_mtext_u64(t, "ingest_tier_refusing", "", st.refusing);
	ing_mtext_family(t, "ingest_tier_refused_frames_total", "counter",
			 "Frames refused NO_SPACE (retryable) at --local-high-water.");
	ing_mtext_u64(t, "ingest_tier_refused_frames_total", "", s->c_tier_refused);
}
