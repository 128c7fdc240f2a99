/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rdma_verbs.c - the real verbs behind struct ing_rdma_ops, the READ plan arithmetic and
 * the CM private data codec. No state.
 */
#include "dataplane/rdma/rdma.h"

#include <endian.h>
#include <errno.h>
#include <string.h>

/* ibv_post_send & co. are static inlines in verbs.h: wrap them so they fit the table. */
static int verbs_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	return ibv_post_send(qp, wr, bad);
}

static int verbs_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc)
{
	return ibv_poll_cq(cq, n, wc);
}

static int verbs_req_notify_cq(struct ibv_cq *cq, int solicited_only)
{
	return ibv_req_notify_cq(cq, solicited_only);
}

static int verbs_get_cq_event(struct ibv_comp_channel *ch, struct ibv_cq **cq, void **ctx)
{
	return ibv_get_cq_event(ch, cq, ctx);
}

static void verbs_ack_cq_events(struct ibv_cq *cq, unsigned n)
{
	ibv_ack_cq_events(cq, n);
}

static int verbs_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	return ibv_post_recv(qp, wr, bad);
}

static struct ibv_mw *verbs_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type)
{
	return ibv_alloc_mw(pd, type);
}

static int verbs_dealloc_mw(struct ibv_mw *mw)
{
	return ibv_dealloc_mw(mw);
}

const struct ing_rdma_ops ing_rdma_verbs_ops = {
	.post_send = verbs_post_send,
	.poll_cq = verbs_poll_cq,
	.req_notify_cq = verbs_req_notify_cq,
	.get_cq_event = verbs_get_cq_event,
	.ack_cq_events = verbs_ack_cq_events,
	.post_recv = verbs_post_recv,
	.alloc_mw = verbs_alloc_mw,
	.dealloc_mw = verbs_dealloc_mw,
};

bool ing_rdma_device_has_mw2(struct ibv_context *ctx)
{
	struct ibv_device_attr_ex a;

	memset(&a, 0, sizeof(a));
	if (!ctx || ibv_query_device_ex(ctx, NULL, &a))
		return false;
	return (a.orig_attr.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B) != 0;
}

int ing_rdma_plan_init(struct ing_rdma_plan *p, uint32_t chunk, uint32_t max_msg_sz,
		       unsigned rd_atom, unsigned sq_depth)
{
	if (!p)
		return -EINVAL;
	if (!chunk)
		chunk = ING_RDMA_DEFAULT_CHUNK;
	if (max_msg_sz && chunk > max_msg_sz)
		chunk = max_msg_sz;
	if (chunk < 4096 && !(max_msg_sz && max_msg_sz < 4096))
		return -EINVAL;
	if (!rd_atom)
		rd_atom = ING_RDMA_DEFAULT_RD_ATOM;
	if (!sq_depth)
		sq_depth = ING_RDMA_DEFAULT_SQ_DEPTH;
	p->chunk = chunk;
	p->limit = rd_atom < sq_depth ? rd_atom : sq_depth;
	/* Half the window per signaled WR: a completion arrives while the other half is still
	 * on the wire, so the pipeline never drains between batches. */
	p->sig_every = p->limit > 1 ? p->limit / 2 : 1;
	return 0;
}
