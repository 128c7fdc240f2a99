/* SPDX-License-Identifier: Apache-2.0 */
/*
 * counters.h - what the service counts as frames finish: frames and bytes by transport and
 * result, the one latency view (state.h: enum svc_lat), failures by error code and the
 * per-peer series. Counted here once per frame; Stats (rpc/stats.c) and /metrics (obs/)
 * read the same numbers. Control thread.
 */
#ifndef ING_SERVICE_COUNTERS_H
#define ING_SERVICE_COUNTERS_H

#include <stdint.h>

#include "control/service/state.h"

/* One count per event of a frame's life, everything it moves at once. */
/* A frame refused before admission on a call of transport xport (enum ing_xport) from
 * peer, with code (h3000.ErrorCode). */
void svc_count_refused(struct ing_svc *s, uint8_t xport, const struct svc_peer *peer, int code);
/* The index of transport (enum ing_xport) in the per-transport series (SVC_X_N). */
static inline unsigned svc_xi(uint8_t transport)
{
	return transport == ING_XPORT_RDMA ? 1u : 0u;
}
/* Every byte of frame e is in the node, latency_ns after its admission. */
static inline void svc_count_received(struct ing_svc *s, const struct svc_frame *e,
				      uint64_t latency_ns)
{
	unsigned x = svc_xi(e->f->transport);

	s->c_received++;
	s->c_bytes_rx += e->length;
	s->m.rx_frames[x]++;
	s->m.rx_bytes[x] += e->length;
	ing_hist_add(&s->lat[SVC_LAT_RECEIVED_ALL], latency_ns);
}
/* Frame e failed before persistence (f->status says why). */
void svc_count_failed(struct ing_svc *s, const struct svc_frame *e);
/* Frame e is back from persistence, ok or not; now: when control answers it. For a durable
 * frame, fills stage_ns (the Ack's stages) and records every cut in s->lat. */
void svc_count_done(struct ing_svc *s, const struct svc_frame *e, uint64_t now,
		    uint64_t stage_ns[SVC_NSTAGES]);
/* One frame's outcome for the on-call counters: code 0 stored (bytes), else failed or
 * refused with that h3000.ErrorCode; peer NULL when the peer table was full. */
void svc_ops_frame(struct ing_svc *s, const struct svc_peer *peer, int code, uint64_t bytes);

#endif
