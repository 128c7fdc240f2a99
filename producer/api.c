/* SPDX-License-Identifier: Apache-2.0 */
/*
 * api.c - libingest's producer API (include/ingest/producer.h) over its two layers. The
 * caller's structs are brought to the library's own size (opts_size, desc_size, the ack
 * stride), then the call goes to the layer behind the handle (p->ops): the router
 * (fleet.c), with opts.servers over several nodes, with opts.server over that one node
 * (redialled after a lost connection), driving one session (producer.c) per node through
 * the producer_session_* functions. The layers never call this file, and the session
 * layer knows nothing of the router above it.
 */
#include "producer/producer_internal.h"
#include "common/log.h"

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#define COMP "producer"
#define SIZE_MIN(a, b) ((a) < (b) ? (a) : (b))
/* The 1.0 struct ing_frame_desc ends with user: the least a caller can pass. */
#define DESC_SIZE_1_0 (offsetof(struct ing_frame_desc, user) + sizeof(void *))
/* The 1.0 struct ing_ack ends with msg: the least stride a caller can pass. */
#define ACK_SIZE_1_0 (offsetof(struct ing_ack, msg) + sizeof(((struct ing_ack *)0)->msg))

static bool tail_is_zero(const void *s, size_t ours, size_t theirs)
{
	const unsigned char *b = s;
	for (size_t i = ours; i < theirs; i++)
		if (b[i])
			return false;
	return true;
}

struct ing_producer *ing_producer_connect(const struct ing_producer_opts *uo, char *err,
					  size_t errlen)
{
	struct ing_producer *p = NULL;

	(void)ing_producer_open(&p, uo, err, errlen);
	return p;
}

int ing_producer_open(struct ing_producer **out, const struct ing_producer_opts *uo, char *err,
		      size_t errlen)
{
	char dummy[8];
	struct ing_producer_opts full;
	const struct ing_producer_opts *o = NULL;

	if (out)
		*out = NULL;
	if (!err || !errlen) {
		err = dummy;
		errlen = sizeof(dummy);
	}
	*err = '\0';
	if (!out) {
		snprintf(err, errlen, "no place for the producer (out is NULL)");
		return -EINVAL;
	}
	/* the first opts_size bytes of the caller's struct over our defaults */
	if (uo) {
		if (uo->opts_size < offsetof(struct ing_producer_opts, server) + sizeof(uo->server)) {
			snprintf(err, errlen, "opts.opts_size %zu: initialise the options with ing_producer_opts_init",
				 uo->opts_size);
			return -EINVAL;
		}
		if (!tail_is_zero(uo, sizeof(full), uo->opts_size)) {
			snprintf(err, errlen, "options set that libingest %s does not know (opts_size %zu > %zu)",
				 ing_version_string(), uo->opts_size, sizeof(full));
			return -EOPNOTSUPP;
		}
		producer_opts_defaults(&full);
		memcpy(&full, uo, SIZE_MIN(uo->opts_size, sizeof(full)));
		full.opts_size = sizeof(full);
		o = &full;
	}
	bool fleet = o && o->servers && *o->servers;
	if (!o || (!fleet && (!o->server || !*o->server))) {
		snprintf(err, errlen, "no server address");
		return -EINVAL;
	}
	if (o->auth_token && strnlen(o->auth_token, PRODUCER_AUTH_TOKEN_MAX + 1) > PRODUCER_AUTH_TOKEN_MAX) {
		snprintf(err, errlen, "auth_token longer than %u characters", PRODUCER_AUTH_TOKEN_MAX);
		return -EINVAL;
	}
	if (o->rdma_device && strnlen(o->rdma_device, PRODUCER_DEVLIST_MAX) >= PRODUCER_DEVLIST_MAX) {
		snprintf(err, errlen, "rdma_device: a device list longer than %u characters",
			 PRODUCER_DEVLIST_MAX - 1);
		return -EINVAL;
	}
	if ((o->tls_cert || o->tls_key || o->tls_server_name) && !o->tls_ca) {
		snprintf(err, errlen, "TLS options need tls_ca (the CA that signed the node's certificate)");
		return -EINVAL;
	}
	if (!!o->tls_cert != !!o->tls_key) {
		snprintf(err, errlen, "tls_cert and tls_key go together");
		return -EINVAL;
	}
	if (o->transport > ING_TRANSPORT_GRPC || o->rdma_mode > ING_RDMA_MODE_WRITE ||
	    (o->recycle_on != ING_ACK_NONE && o->recycle_on != ING_ACK_RECEIVED &&
	     o->recycle_on != ING_ACK_DURABLE)) {
		snprintf(err, errlen, "bad options (transport %d, recycle_on %d)", o->transport,
			 o->recycle_on);
		return -EINVAL;
	}
	/* one server too: a fleet of that node (fleet.c), which redials it after a loss */
	errno = 0;
	*out = fleet_connect(o, err, errlen);
	if (*out)
		return 0;
	return errno > 0 ? -errno : -EPROTO;
}

void ing_producer_wake(struct ing_producer *p)
{
	if (p && p->fleet)
		fleet_wake(p);
}

int ing_producer_submit_sz(struct ing_producer *p, const struct ing_frame_desc *ud,
			   size_t desc_size)
{
	struct ing_frame_desc full;
	const struct ing_frame_desc *d = ud;

	if (!p || !ud || desc_size < DESC_SIZE_1_0)
		return -EINVAL;
	if (desc_size != sizeof(full)) {
		if (!tail_is_zero(ud, sizeof(full), desc_size))
			return -EOPNOTSUPP;
		memset(&full, 0, sizeof(full));
		memcpy(&full, ud, SIZE_MIN(desc_size, sizeof(full)));
		d = &full;
	}
	return p->ops->submit(p, d);
}

int ing_producer_poll_sz(struct ing_producer *p, struct ing_ack *acks, unsigned max,
			 size_t ack_size, int timeout_ms)
{
	if (!p || (acks && ack_size < ACK_SIZE_1_0))
		return -EINVAL;
	return p->ops->poll(p, acks, max, ack_size, timeout_ms);
}

void ing_producer_close(struct ing_producer *p, int timeout_ms)
{
	if (p)
		p->ops->close(p, timeout_ms);
}

unsigned ing_producer_in_flight(const struct ing_producer *p)
{
	return p ? p->ops->in_flight(p) : 0;
}

void ing_producer_get_stats_sz(const struct ing_producer *p, struct ing_producer_stats *s,
			       size_t stats_size)
{
	struct ing_producer_stats st;

	if (!s || !stats_size)
		return;
	memset(&st, 0, sizeof(st));
	if (p) {
		st = p->st;
		st.in_flight = p->ops->in_flight(p);
		if (p->ops->stats)
			p->ops->stats(p, &st);
	}
	memcpy(s, &st, SIZE_MIN(stats_size, sizeof(st)));
	if (stats_size > sizeof(st))
		memset((char *)s + sizeof(st), 0, stats_size - sizeof(st));
}
