/* SPDX-License-Identifier: Apache-2.0 */
/*
 * peers.c - the static membership list, ingestd --fleet-peers "id=host:port,..." (fleet.h:
 * ing_fleet_parse_peers). No thread, no PostgreSQL, no DPDK: ingestd's option table checks
 * the list with it as the node does.
 */
#include "control/fleet/fleet.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

int ing_fleet_parse_peers(const char *s, struct ing_fleet_member *out, unsigned max, unsigned *n,
			  char *why, size_t whylen)
{
	unsigned k = 0;
	const char *p = s;

	*n = 0;
	while (p && *p) {
		const char *end = strchr(p, ',');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		const char *eq = memchr(p, '=', len);
		if (!eq || eq == p || eq + 1 == p + len) {
			snprintf(why, whylen, "peer %u: want id=host:port", k + 1);
			return -EINVAL;
		}
		size_t il = (size_t)(eq - p), al = len - il - 1;
		if (il > ING_FLEET_ID_MAX || al > ING_FLEET_ADDR_MAX) {
			snprintf(why, whylen, "peer %u: id longer than %d or address longer than %d bytes",
				 k + 1, ING_FLEET_ID_MAX, ING_FLEET_ADDR_MAX);
			return -EINVAL;
		}
		if (!memchr(eq + 1, ':', al)) {
			snprintf(why, whylen, "peer %u: address '%.*s' is not host:port", k + 1, (int)al, eq + 1);
			return -EINVAL;
		}
		if (k >= max || k >= ING_FLEET_MAX_MEMBERS) {
			snprintf(why, whylen, "more than %u peers", max < ING_FLEET_MAX_MEMBERS ? max : ING_FLEET_MAX_MEMBERS);
			return -EINVAL;
		}
		struct ing_fleet_member *m = &out[k];
		memset(m, 0, sizeof(*m));
		memcpy(m->node_id, p, il);
		memcpy(m->address, eq + 1, al);
		m->state = ING_MEMBER_ACTIVE;
		for (unsigned j = 0; j < k; j++)
			if (!strcmp(out[j].node_id, m->node_id)) {
				snprintf(why, whylen, "peer id '%s' given twice", m->node_id);
				return -EINVAL;
			}
		k++;
		p = end ? end + 1 : NULL;
		if (end && !*p) {
			snprintf(why, whylen, "trailing ','");
			return -EINVAL;
		}
	}
	if (!k) {
		snprintf(why, whylen, "empty list");
		return -EINVAL;
	}
	*n = k;
	return 0;
}
