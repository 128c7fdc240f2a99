/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tier_metrics.c - the object store tier's Prometheus families (dataplane/tier/ keeps the state,
 * read through ing_tier_get_stats; the refusals at the high-water mark are counted by the
 * core's admission).
 */
#include "control/service/obs/obs.h"
#include "dataplane/tier/tier.h"

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
