/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rdma_rail.c - the pure part of the rails (docs/ARCHITECTURE.md "Rails"): a port's link
 * rate, which rail a session that names one gets (Negotiate), and the one-line list of the
 * rails its errors carry, a rail's counters from its lcores'. No verbs calls:
 * unit.test_rail_state and unit.test_rails drive them.
 */
#include "dataplane/rdma/rdma.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

uint32_t ing_rdma_link_mbps(unsigned active_speed, unsigned active_width)
{
	uint32_t lane, lanes;

	switch (active_speed) {   /* IB_SPEED_*: Gb/s per lane as ibstat's Rate counts it */
	case 1: lane = 2500; break;     /* SDR */
	case 2: lane = 5000; break;     /* DDR */
	case 4: lane = 10000; break;    /* QDR */
	case 8: lane = 10000; break;    /* FDR10 */
	case 16: lane = 14000; break;   /* FDR */
	case 32: lane = 25000; break;   /* EDR */
	case 64: lane = 50000; break;   /* HDR */
	case 128: lane = 100000; break; /* NDR */
	default: return 0;
	}
	switch (active_width) {   /* IB_WIDTH_* */
	case 1: lanes = 1; break;
	case 2: lanes = 4; break;
	case 4: lanes = 8; break;
	case 8: lanes = 12; break;
	case 16: lanes = 2; break;
	default: return 0;
	}
	return lane * lanes;
}

void ing_rdma_rails_describe(const struct ing_rdma_rail_info *rails, unsigned n, uint64_t now_ns,
			     char *buf, size_t len)
{
	size_t off = 0;

	if (!len)
		return;
	buf[0] = '\0';
	for (unsigned i = 0; i < n && off < len; i++) {
		const struct ing_rdma_rail_info *ri = &rails[i];
		int w;
		if (ri->up)
			w = snprintf(buf + off, len - off, "%s%s (up)", i ? ", " : "", ri->device);
		else
			w = snprintf(buf + off, len - off, "%s%s (down %llu s: %s)", i ? ", " : "",
				     ri->device,
				     (unsigned long long)(ri->down_since_ns && now_ns > ri->down_since_ns
							  ? (now_ns - ri->down_since_ns) / 1000000000ull : 0),
				     ri->why[0] ? ri->why : "?");
		if (w < 0)
			break;
		off += (size_t)w;
	}
	if (!n)
		snprintf(buf, len, "none");
}

int ing_rdma_rail_choose(const struct ing_rdma_rail_info *rails, unsigned n, const char *want,
			 uint64_t now_ns, char *msg, size_t msglen)
{
	char list[512];

	for (unsigned i = 0; want && i < n; i++) {
		if (strcmp(rails[i].device, want) != 0)
			continue;
		if (rails[i].up)
			return (int)i;
		ing_rdma_rails_describe(rails, n, now_ns, list, sizeof(list));
		snprintf(msg, msglen, "rail \"%s\" is down (%s); this node's rails: %s", want,
			 rails[i].why[0] ? rails[i].why : "?", list);
		return -ENETDOWN;
	}
	ing_rdma_rails_describe(rails, n, now_ns, list, sizeof(list));
	snprintf(msg, msglen, "no rail \"%s\" on this node; its rails: %s", want ? want : "", list);
	return -ENOENT;
}

void ing_rdma_rail_stats_add(struct ing_rdma_rail_stats *s, const struct ing_rdma_lcore_stats *ls)
{
	s->frames_received += ls->frames_ok;   /* whole frames only: a part is in parts_ok */
	s->bytes_received += ls->bytes_received;
	s->frames_failed += ls->frames_failed;
	s->completion_errors += ls->wc_errors;
	s->parts_received += ls->parts_ok;
}
