/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rdma_producer.c - libingest's RDMA transport (struct producer_xport rdma_xport, see
 * producer_internal.h): the producer's frame pool registered as one MR with REMOTE_READ,
 * an rdma_cm RC connection to NegotiateReply.rdmaAddr:rdmaPort carrying the session id in
 * its private data, and FrameMeta{addr, rkey, length, ...} on ControlStream for every frame.
 * The ingest node pulls the bytes with RDMA READ; this side never posts a work request.
 *
 * Remote access: one MR over the whole pool (no memory windows). The node reads a frame
 * only between its FrameMeta and its first ACK (RECEIVED, or a failure), so recycling a
 * frame on the ACK stage of opts.recycle_on is safe; the rkey itself stays valid for the
 * pool until the connection closes (memory windows per frame are a later refinement).
 *
 * Reconnect: when the node drops the connection after a failed READ (its QP went to ERROR),
 * it keeps the session's other frames parked; we reconnect with the same session id (same
 * PD, same MR, same rkey) and the node re-reads them. Bounded: a few attempts, each within
 * connect_timeout_ms. The failed frame's own ack (ERROR_TRANSFER, not retryable) fails that
 * frame alone: the gRPC session stays, and the router above re-sends nothing for it (fleet.c
 * ack_conn_lost). A fleet router's node session (p->shared, fail_fast) does not reconnect: a
 * lost connection breaks the session, and the router re-sends its frames to the next node;
 * a single-server router's session (fail_fast false) does, as a plain session.
 *
 * Registration: the pool is registered once per device (struct rdma_reg: one PD, one MR).
 * A plain session owns its one; a fleet router's node sessions share the router's list
 * (producer_shared.rdma), so one registered pool serves every node on the same device, and
 * the PD outlives the sessions that come and go. A failed node's session destroys its QP
 * before the router re-sends that node's frames anywhere (node_fail in fleet.c): after
 * ibv_destroy_qp returns no READ can arrive through it, so a buffer the application
 * recycles after the frame's DURABLE ack from another node is never read for the old frame.
 *
 * Push (TRANSPORT_RDMA_WRITE negotiated, opts.rdma_mode WRITE; docs/PUSH.md): FrameMeta
 * carries no addr/rkey; the node answers Ack{GRANTED, grantId, grantAddr, grantRkey,
 * grantLength, grantQpNum} and we post one IBV_WR_RDMA_WRITE_WITH_IMM (immediate =
 * grantId) of the whole frame; the frame's bytes are referenced (busy_refs) until its
 * completion. A write that fails with an access/length error fails that frame only; then
 * (our QP is in ERROR) we reconnect, and the node grants the other frames again on the
 * new QP. A grant for another QP than the current one is void (it was issued before a
 * reconnect): it is ignored, a new grant follows.
 */
#include "producer/producer_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/stripe.h"
#include "control/net/grpc.h"
#include "proto/rdma_conn.h"

#define COMP "prod-rdma"
#define RECONNECT_MAX 8            /* attempts per session before giving up */
#define PORT_CHECK_NS 200000000ull /* a router's session looks at its port's link this often */
#define FRAME_META_MAX (11 * 9 + 2 * (ING_ID_MAX + 3))

#ifdef ING_TEST_HOOKS
/* fault injection, test builds only: see "TEST HOOKS" below */
enum test_hook { HOOK_BAD_RKEY, HOOK_BEYOND_MR, HOOK_PUSH_STALE, HOOK_PUSH_SHORT, HOOK_PUSH_OUTSIDE,
		 HOOK_N };
#endif

/* The frame pool registered on one device with one set of access flags. */
struct rdma_reg {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	int access;
	unsigned refs;             /* sessions using it */
	bool dead;                 /* its device was removed: freed with its last user */
	struct rdma_reg *next;     /* in producer_shared.rdma */
};

/* A router's connection lost while its port's link is down (rdma_stop): its QP is gone,
 * its cm_id waits here for the link, then is destroyed (held_reap). Destroying a connected
 * id sends a disconnect request through the port; Soft-RoCE (rxe, Linux 6.1) puts the
 * port's GSI QP (QP1: every CM message of the device) in an error state it never leaves
 * when that send fails on a link that is down, and then no connection on the device is
 * made again, by any process, until the device is removed and added. */
struct rdma_held {
	struct rdma_event_channel *ech;
	struct rdma_cm_id *id;
	struct rdma_held *next;
};

struct rprod {
	struct rdma_event_channel *ech;
	struct rdma_cm_id *id;
	struct rdma_reg *reg;      /* of the first connection's device */
	struct ibv_mr *mr;         /* reg->mr */
	struct ibv_cq *cq;
	unsigned reconnects;
	bool connected;
	/* push */
	uint32_t remote_qpn;       /* the node's QP of the current connection */
	unsigned writes_out;       /* WRITEs posted, not completed */
	unsigned sq;               /* the QP's send queue depth */
	uint32_t *slot_grant;      /* per in-flight slot: grant id of its outstanding WRITE */
	bool need_reconnect;       /* a WRITE failed: the QP is in ERROR */
	uint64_t grants, grants_void, writes_failed;
	uint64_t port_check_ns;    /* next look at the local port's state (port_down) */
#ifdef ING_TEST_HOOKS
	/* per hook (enum test_hook): the frame it corrupts, "" off (see test_hooks_load) */
	char fault[HOOK_N][ING_ID_MAX + 1];
#endif
	char dev[IBV_SYSFS_NAME_MAX];
};

/*
 * Striped push (docs/PUSH.md "Striped push"): a part's RDMA WRITE goes over the session of
 * its rail (`via`) while the frame is the home session's. The router's sessions share this
 * table (producer_shared.rdma_parts): the WRITE's completion on via's CQ, or via's end,
 * lets go of the home frame's reference (busy_refs: its final Ack waits for it); the
 * home's end clears its entries (its frames are gone with it). wr_id of a part's WRITE:
 * PART_WR_TAG | index << 32 | grant id.
 */
#define RDMA_PARTS_MAX 256
#define PART_WR_TAG (1ull << 63)
struct rdma_part_wr {
	struct ing_producer *via;   /* NULL: free */
	struct ing_producer *home;  /* NULL: its home session is gone */
	struct pframe *f;
	uint32_t gid;
};

/* A part WRITE of the table is over (completed, flushed, or its session's end): the home
 * frame's reference goes. */
static void part_wr_end(struct rdma_part_wr *pw)
{
	struct ing_producer *home = pw->home;
	struct pframe *f = pw->f;

	memset(pw, 0, sizeof(*pw));
	if (home)
		producer_frame_unref(home, f);
}

/* Session p ends: its part WRITEs end; parts of its own frames written by others forget it. */
static void parts_forget(struct ing_producer *p)
{
	struct rdma_part_wr *t = p->shared ? p->shared->rdma_parts : NULL;

	for (unsigned i = 0; t && i < RDMA_PARTS_MAX; i++) {
		if (t[i].via == p)
			part_wr_end(&t[i]);
		else if (t[i].via && t[i].home == p)
			t[i].home = NULL;
	}
}

/* ---------------------------------------------------------------- FrameMeta encoding */

/* h3000.FrameMeta, proto3 encoding (zero scalars omitted). */
static size_t frame_meta_encode(uint8_t *b, const char *id, uint64_t addr, uint32_t rkey,
				uint64_t len, const char *wafer, int64_t ts, uint32_t crc,
				uint64_t session)
{
	size_t n = 0;

	n += pb_put_string_field(b + n, 1, id, strlen(id));
	n += pb_put_uint_field(b + n, 2, addr);
	n += pb_put_uint_field(b + n, 3, rkey);
	n += pb_put_uint_field(b + n, 4, len);
	n += pb_put_string_field(b + n, 5, wafer, strlen(wafer));
	n += pb_put_uint_field(b + n, 6, (uint64_t)ts);
	n += pb_put_uint_field(b + n, 7, crc);
	n += pb_put_uint_field(b + n, 8, 1);
	n += pb_put_uint_field(b + n, 9, session);
	return n;
}

/* One FrameMeta.stripe entry (h3000.StripePart) into b: its bytes, or 0. */
static size_t stripe_part_encode(uint8_t *b, const struct ing_stripe_part *sp, const struct stripe_via_p *v,
				 uint64_t frame_addr)
{
	uint8_t m[6 * 11];
	size_t n = 0;

	n += pb_put_uint_field(m + n, 1, sp->off);
	n += pb_put_uint_field(m + n, 2, sp->len);
	n += pb_put_uint_field(m + n, 3, sp->rail);
	n += pb_put_uint_field(m + n, 4, v->session);
	if (frame_addr) {   /* pull; push: the node grants the part (no addr, no rkey) */
		n += pb_put_uint_field(m + n, 5, frame_addr + sp->off);
		n += pb_put_uint_field(m + n, 6, v->rkey);
	}
	return pb_put_string_field(b, 10, (const char *)m, n);
}

/*
 * Striping (docs/ARCHITECTURE.md "Striping"): a frame of at least the producer's own
 * opts.stripe_min (default 8 MiB) and the node's stripeMin (ing_stripe_decide), with
 * two or more of the node's rails connected by RDMA READ, names one part per rail (its
 * session there and that device's rkey; the address is the same: the pool is one mapping,
 * registered per device). The node reads each part over its rail into the frame's one
 * slot. Push (every rail's session negotiated RDMA WRITE): the parts name the sessions
 * only; the node grants each part on its rail (rdma_part_grant). Appends the parts to b;
 * returns their bytes (0: sent whole).
 */
_Static_assert(ING_STRIPE_OFF == UINT64_MAX, "opts.stripe_min's never is ing_stripe_decide's");

static size_t stripe_encode(struct ing_producer *p, const struct pframe *f, uint64_t addr, uint8_t *b)
{
	struct stripe_via_p v[ING_STRIPE_MAX_PARTS];
	uint8_t rails[ING_STRIPE_MAX_PARTS];
	struct ing_stripe st;
	size_t n = 0;

	if (!p->router || !ing_stripe_decide(f->len, p->o.stripe_min, p->stripe_min, 2))
		return 0;
	unsigned nv = fleet_stripe_vias(p, v, ING_STRIPE_MAX_PARTS);
	if (nv < 2)
		return 0;
	for (unsigned i = 0; i < nv; i++)
		rails[i] = v[i].rail;
	if (ing_stripe_split(&st, f->len, rails, nv, 0) < 2)
		return 0;
	for (unsigned i = 0; i < st.nparts; i++)
		n += stripe_part_encode(b + n, &st.part[i], &v[i], p->push ? 0 : addr);
	ING_DBG(COMP, "session %" PRIu64 ": frame %s (%" PRIu64 " bytes) striped over %u rails (%s)", p->session_id,
		f->id, f->len, st.nparts, p->push ? "push" : "pull");
	return n;
}

static int rdma_read_rkey(const struct ing_producer *p, uint32_t *rkey)
{
	const struct rprod *r = p && p->xport && p->xport->kind == ING_TRANSPORT_RDMA ? p->xport_priv : NULL;

	if (!r || !r->connected || !r->mr || p->push || p->broken)
		return -ENOTCONN;
	*rkey = r->mr->rkey;
	return 0;
}

/* ---------------------------------------------------------------- CM helpers */

/* Wait for the next CM event on the channel, bounded: 0 (type and status set) or -ETIMEDOUT. */
static int wait_event(struct rprod *r, int timeout_ms, enum rdma_cm_event_type *type, int *status)
{
	uint64_t end = ing_now_ns() + (uint64_t)timeout_ms * 1000000ull;

	for (;;) {
		struct rdma_cm_event *ev;
		if (rdma_get_cm_event(r->ech, &ev) == 0) {
			*type = ev->event;
			*status = ev->status;
			rdma_ack_cm_event(ev);
			return 0;
		}
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return -errno;
		uint64_t now = ing_now_ns();
		if (now >= end)
			return -ETIMEDOUT;
		struct pollfd pfd = { .fd = r->ech->fd, .events = POLLIN };
		int ms = (int)((end - now) / 1000000ull) + 1;
		if (poll(&pfd, 1, ms) < 0 && errno != EINTR)
			return -errno;
	}
}

static int expect(struct rprod *r, int timeout_ms, enum rdma_cm_event_type want, const char *what,
		  char *err, size_t errlen)
{
	enum rdma_cm_event_type t = RDMA_CM_EVENT_ADDR_ERROR;
	int st = 0, rc = wait_event(r, timeout_ms, &t, &st);

	if (rc) {
		snprintf(err, errlen, "%s: %s", what, rc == -ETIMEDOUT ? "timed out" : strerror(-rc));
		return rc;
	}
	if (t != want) {
		snprintf(err, errlen, "%s: got %s (status %d)%s", what, rdma_event_str(t), st,
			 t == RDMA_CM_EVENT_REJECTED ? ": the ingest node refused the connection" : "");
		return -ECONNREFUSED;
	}
	return 0;
}

static void conn_drop(struct rprod *r)
{
	if (!r->id)
		return;
	if (r->connected)
		rdma_disconnect(r->id);
	r->connected = false;
	if (r->id->qp)
		rdma_destroy_qp(r->id);
	rdma_destroy_id(r->id);
	r->id = NULL;
	if (r->cq) {
		ibv_destroy_cq(r->cq);
		r->cq = NULL;
	}
}

/* Is the local port of a resolved id down? Its why ("link down (rxe1 port 1: DOWN)") then.
 * A pull producer posts no work request, so its QP never fails by itself: without this a
 * local link lost shows only as the node's ack once its park time is over. */
static bool port_down(struct rdma_cm_id *id, char *why, size_t whylen)
{
	struct ibv_port_attr pa;

	if (!id || !id->verbs || ibv_query_port(id->verbs, id->port_num, &pa) ||
	    pa.state == IBV_PORT_ACTIVE)
		return false;
	snprintf(why, whylen, "link down (%s port %u: %s)", ibv_get_device_name(id->verbs->device),
		 id->port_num, ibv_port_state_str(pa.state));
	return true;
}

/* librdmacm lists the devices again and closes its own context of any that is gone: the
 * kernel removes an rxe device (rdma link delete) only once every process let go of it. */
static void cm_devices_sync(void)
{
	int n = 0;
	struct ibv_context **l = rdma_get_devices(&n);

	if (l)
		rdma_free_devices(l);
}

/* The held connections whose link is back, or whose device is gone (all: every one), are
 * destroyed. */
static void held_reap(struct producer_shared *sh, bool all)
{
	char why[128];
	bool freed = false;

	for (struct rdma_held **pp = sh ? &sh->rdma_held : NULL; pp && *pp;) {
		struct rdma_held *h = *pp;
		if (!all && port_down(h->id, why, sizeof(why))) {
			pp = &h->next;
			continue;
		}
		*pp = h->next;
		rdma_destroy_id(h->id);
		rdma_destroy_event_channel(h->ech);
		free(h);
		freed = true;
	}
	if (freed && !all)
		cm_devices_sync();
}

/* ---------------------------------------------------------------- registrations */

static void reg_free(struct rdma_reg *g)
{
	if (g->mr)
		ibv_dereg_mr(g->mr);
	if (g->pd)
		ibv_dealloc_pd(g->pd);
	free(g);
}

/* The pool registered on ctx with these access flags: the router's, shared, or a new one
 * (put into the router's list, or the session's own). NULL with err set. */
static struct rdma_reg *reg_get(struct ing_producer *p, struct ibv_context *ctx, int access,
				char *err, size_t errlen)
{
	struct rdma_reg **list = p->shared ? &p->shared->rdma : NULL;

	for (struct rdma_reg *g = list ? *list : NULL; g; g = g->next)
		if (g->ctx == ctx && g->access == access && !g->dead) {
			g->refs++;
			return g;
		}
	struct rdma_reg *g = calloc(1, sizeof(*g));
	if (!g) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	g->ctx = ctx;
	g->access = access;
	g->pd = ibv_alloc_pd(ctx);
	if (!g->pd) {
		snprintf(err, errlen, "ibv_alloc_pd(%s) failed", ibv_get_device_name(ctx->device));
		reg_free(g);
		return NULL;
	}
	/* the whole pool, once: every frame's rkey is this MR's */
	g->mr = ibv_reg_mr(g->pd, p->pl->base, p->pl->len, access);
	if (!g->mr) {
		snprintf(err, errlen, "ibv_reg_mr(frame pool, %zu bytes): %s (ulimit -l?)", p->pl->len,
			 strerror(errno));
		reg_free(g);
		return NULL;
	}
	g->refs = 1;
	if (list) {
		g->next = *list;
		*list = g;
	}
	return g;
}

/* A session lets go of its registration. Its own is freed; the router's stays for the next
 * session on that device, unless the device is gone. */
static void reg_put(struct ing_producer *p, struct rdma_reg *g)
{
	if (!g || --g->refs)
		return;
	if (!p->shared) {
		reg_free(g);
		return;
	}
	if (!g->dead)
		return;
	for (struct rdma_reg **pp = &p->shared->rdma; *pp;
	     pp = &(*pp)->next)
		if (*pp == g) {
			*pp = g->next;
			break;
		}
	reg_free(g);
}

static void rdma_shared_release(struct producer_shared *sh)
{
	held_reap(sh, true);
	free(sh->rdma_parts);   /* every session is gone: no entry is in use */
	sh->rdma_parts = NULL;
	struct rdma_reg *g = sh->rdma;

	while (g) {
		struct rdma_reg *nx = g->next;
		if (g->refs)
			ING_ERR(COMP, "frame pool registration on %s still used by %u session(s) at release",
				ibv_get_device_name(g->ctx->device), g->refs);
		reg_free(g);
		g = nx;
	}
	sh->rdma = NULL;
}

/* Connect (or reconnect) with the same PD/MR. Blocking, bounded by timeout_ms per step. */
static int conn_make(struct ing_producer *p, struct rprod *r, char *err, size_t errlen)
{
	int tmo = p->o.connect_timeout_ms;
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV };
	struct addrinfo *ai = NULL;
	char port[8];
	int rc;

	held_reap(p->shared, false);   /* before a new connection: the ends a link allows now */
	snprintf(port, sizeof(port), "%u", p->rdma_port);
	rc = getaddrinfo(p->rdma_addr, port, &hints, &ai);
	if (rc) {
		snprintf(err, errlen, "address %s:%s: %s", p->rdma_addr, port, gai_strerror(rc));
		return -EINVAL;
	}
	if (rdma_create_id(r->ech, &r->id, r, RDMA_PS_TCP)) {
		snprintf(err, errlen, "rdma_create_id: %s", strerror(errno));
		freeaddrinfo(ai);
		return -errno;
	}
	rc = rdma_resolve_addr(r->id, NULL, ai->ai_addr, tmo);
	freeaddrinfo(ai);
	if (rc) {
		snprintf(err, errlen, "rdma_resolve_addr(%s): %s", p->rdma_addr, strerror(errno));
		return -errno;
	}
	if ((rc = expect(r, tmo + 500, RDMA_CM_EVENT_ADDR_RESOLVED, "resolve address", err, errlen)))
		return rc;
	if (r->reg && r->id->verbs != r->reg->ctx) {
		snprintf(err, errlen, "the route to %s moved to another RDMA device", p->rdma_addr);
		return -ENODEV;
	}
	if (!producer_devlist_has(p->o.rdma_device, ibv_get_device_name(r->id->verbs->device))) {
		/* the local device that reaches this rail (routing) is not one the producer may use */
		snprintf(err, errlen, "%s routes through device %s, not %s%s", p->rdma_addr,
			 ibv_get_device_name(r->id->verbs->device), strchr(p->o.rdma_device, ',') ?
			 "one of " : "", p->o.rdma_device);
		return -EXDEV;   /* not ours to use (a rail reached through it is unused) */
	}
	if (rdma_resolve_route(r->id, tmo)) {
		snprintf(err, errlen, "rdma_resolve_route: %s", strerror(errno));
		return -errno;
	}
	if ((rc = expect(r, tmo + 500, RDMA_CM_EVENT_ROUTE_RESOLVED, "resolve route", err, errlen)))
		return rc;
	if (port_down(r->id, err, errlen))
		return -ENETDOWN;   /* no connect request into a port that cannot carry it */
	if (!r->reg) {
		snprintf(r->dev, sizeof(r->dev), "%s", ibv_get_device_name(r->id->verbs->device));
		/* pull: the node READs it; push: only we touch it (the node is written to) */
		r->reg = reg_get(p, r->id->verbs,
				 IBV_ACCESS_LOCAL_WRITE | (p->push ? 0 : IBV_ACCESS_REMOTE_READ), err, errlen);
		if (!r->reg)
			return -ENOMEM;
		r->mr = r->reg->mr;
	}
	/* Pull: the QP only answers READs, no WRs of its own, a minimal CQ. Push: one WRITE
	 * per frame in flight; a router's rail session also writes one part of each striped
	 * frame of the other rails' sessions (each at most its credits in flight). */
	unsigned sq = p->push ? p->credits * (p->shared ? PRODUCER_MAX_RAILS : 1) + 1 : 1;
	if (sq > 16384 && p->credits < 16384)
		sq = 16384;   /* within every device's max_qp_wr; a part beyond waits (ENOBUFS) */
	r->sq = sq;
	r->cq = ibv_create_cq(r->reg->ctx, (int)sq + 1, NULL, NULL, 0);
	if (!r->cq) {
		snprintf(err, errlen, "ibv_create_cq: %s", strerror(errno));
		return -ENOMEM;
	}
	struct ibv_qp_init_attr qa = {
		.send_cq = r->cq,
		.recv_cq = r->cq,
		.cap = { .max_send_wr = sq, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};
	if (rdma_create_qp(r->id, r->reg->pd, &qa)) {
		snprintf(err, errlen, "rdma_create_qp: %s", strerror(errno));
		return -errno;
	}
	struct ibv_device_attr da;
	unsigned resp = 16;
	if (ibv_query_device(r->reg->ctx, &da) == 0 && da.max_qp_rd_atom > 0)
		resp = (unsigned)da.max_qp_rd_atom;
	struct ing_rdma_cm_priv priv;
	ing_rdma_cm_priv_pack(&priv, p->session_id);
	struct rdma_conn_param cp = {
		.private_data = &priv,
		.private_data_len = sizeof(priv),
		.responder_resources = (uint8_t)(resp > 255 ? 255 : resp),
		.initiator_depth = 0,
		.retry_count = 7,
		.rnr_retry_count = 7,
	};
	if (rdma_connect(r->id, &cp)) {
		snprintf(err, errlen, "rdma_connect: %s", strerror(errno));
		return -errno;
	}
	if ((rc = expect(r, tmo + 1000, RDMA_CM_EVENT_ESTABLISHED, "connect", err, errlen)))
		return rc;
	r->connected = true;
	r->need_reconnect = false;
	r->writes_out = 0;
	if (p->push) {
		struct ibv_qp_attr qa2;
		struct ibv_qp_init_attr qi;
		if (ibv_query_qp(r->id->qp, &qa2, IBV_QP_DEST_QPN, &qi)) {
			snprintf(err, errlen, "ibv_query_qp: %s", strerror(errno));
			return -EIO;
		}
		r->remote_qpn = qa2.dest_qp_num;
	}
	return 0;
}

/* ---------------------------------------------------------------- xport hooks */

static int rdma_probe(struct ing_producer *p, char *why, size_t whylen)
{
	int n = 0;
	struct ibv_device **dl;

	if (!p->pl || !p->pl->base) {
		snprintf(why, whylen, "rdma: no registered frame pool (opts.pool_frames = 0)");
		return -EINVAL;
	}
	setenv("RDMAV_HUGEPAGES_SAFE", "1", 0);
	dl = ibv_get_device_list(&n);
	if (!dl || n <= 0) {
		if (dl)
			ibv_free_device_list(dl);
		snprintf(why, whylen, "rdma: no RDMA device on this host");
		return -ENODEV;
	}
	bool found = !p->o.rdma_device;
	for (int i = 0; i < n && !found; i++)
		found = producer_devlist_has(p->o.rdma_device, ibv_get_device_name(dl[i]));
	ibv_free_device_list(dl);
	if (!found) {
		snprintf(why, whylen, "rdma: %s %s not found", strchr(p->o.rdma_device, ',') ?
			 "none of the devices" : "device", p->o.rdma_device);
		return -ENODEV;
	}
	return 0;
}

static void rdma_stop(struct ing_producer *p)
{
	struct rprod *r = p->xport_priv;

	if (!r)
		return;
	struct rdma_held *h = NULL;
	char why[128];
	bool gone = r->reg && r->reg->dead;   /* its device removed: nothing waits for it */
	if (!gone && p->shared && r->id && r->connected && port_down(r->id, why, sizeof(why)) &&
	    (h = calloc(1, sizeof(*h)))) {
		/* no CM message into a port that is down (struct rdma_held): the QP goes now (no
		 * READ or WRITE through it any more), the cm_id when the link is back */
		if (r->id->qp)
			rdma_destroy_qp(r->id);
		if (r->cq)
			ibv_destroy_cq(r->cq);
		r->cq = NULL;
		h->id = r->id;
		h->ech = r->ech;
		h->next = p->shared->rdma_held;
		p->shared->rdma_held = h;
		r->id = NULL;
		r->ech = NULL;
		r->connected = false;
		ING_INFO(COMP, "session %" PRIu64 ": %s: the connection's end waits for the link", p->session_id, why);
	}
	conn_drop(r);
	parts_forget(p);
	reg_put(p, r->reg);
	r->reg = NULL;
	r->mr = NULL;
	if (r->ech)
		rdma_destroy_event_channel(r->ech);
	if (r->grants)
		ING_INFO(COMP, "session %" PRIu64 ": push: %" PRIu64 " grants, %" PRIu64 " void (older QP), %" PRIu64 " writes failed",
			 p->session_id, r->grants, r->grants_void, r->writes_failed);
	free(r->slot_grant);
	free(r);
	p->xport_priv = NULL;
	if (gone) {
		/* our objects on the removed device are gone: librdmacm's context of it next */
		held_reap(p->shared, false);
		cm_devices_sync();
	}
}

#ifdef ING_TEST_HOOKS
/*
 * TEST HOOKS (compiled only into the test build ingest_testhooks, never into libingest or
 * ingest-send: see producer/CMakeLists.txt) - fault injection for the Soft-RoCE tests
 * (tests/rxe/rdma_in_guest.sh, push_in_guest.sh, smp4/lcores_in_guest.sh,
 * deploy/rxe-vm/README.md). Never set them outside a test: they make one frame's transfer
 * fail on purpose.
 *   ING_TEST_FAULT_RDMA_BAD_RKEY=<frame id>   that frame's FrameMeta carries a wrong rkey
 *                                             (the node's READ fails: remote access error,
 *                                             the QP goes to ERROR, the session reconnects)
 *   ING_TEST_FAULT_RDMA_BEYOND_MR=<frame id>  that frame's [addr, addr+length) is moved to
 *                                             cross the end of the registered pool
 *   ING_TEST_FAULT_PUSH_STALE_GRANT, _PUSH_SHORT_WRITE, _PUSH_OUTSIDE_GRANT=<frame id>
 *                                             push: that frame is written with an immediate
 *                                             naming no grant / one byte short / across the
 *                                             end of its grant
 * A hook corrupts the first send of its frame in the process only: the fault it models
 * happens once, and a send of that frame again (the library re-sends what a lost
 * connection took) goes out as the application's frame would, so a test sees what a user
 * would. When set, every start of the transport logs an ERROR banner naming the hook,
 * and every frame it corrupts (or leaves alone on a re-send) is logged. The variables of
 * the first version (ING_FAULT_RDMA_*) are refused loudly rather than honoured, so an old
 * script cannot inject faults unseen.
 */
static const struct {
	const char *env;
	const char *what;
} test_hooks[HOOK_N] = {
	[HOOK_BAD_RKEY] = { "ING_TEST_FAULT_RDMA_BAD_RKEY", "announce that frame with a wrong rkey" },
	[HOOK_BEYOND_MR] = { "ING_TEST_FAULT_RDMA_BEYOND_MR",
			     "announce that frame beyond its registered pool" },
	[HOOK_PUSH_STALE] = { "ING_TEST_FAULT_PUSH_STALE_GRANT",
			      "write that frame with an immediate that names no grant" },
	[HOOK_PUSH_SHORT] = { "ING_TEST_FAULT_PUSH_SHORT_WRITE",
			      "write that frame one byte short of its grant" },
	[HOOK_PUSH_OUTSIDE] = { "ING_TEST_FAULT_PUSH_OUTSIDE_GRANT",
				"write that frame across the end of its grant" },
};

/* Whether a hook has corrupted its frame already, in this process (whatever session or
 * producer sent it: a reconnect's new session must not corrupt it again). Test builds only. */
static atomic_bool test_hook_fired[HOOK_N];

static void test_hooks_load(struct ing_producer *p, struct rprod *r)
{
	static const char *const old[] = { "ING_FAULT_RDMA_BAD_RKEY", "ING_FAULT_RDMA_BEYOND_MR" };

	for (unsigned i = 0; i < 2; i++)
		if (getenv(old[i]))
			ING_ERR(COMP, "%s is no longer read: the test hook is ING_TEST_%s", old[i],
				old[i] + 4);
	for (unsigned h = 0; h < HOOK_N; h++) {
		const char *v = getenv(test_hooks[h].env);
		r->fault[h][0] = '\0';
		if (!v || !*v)
			continue;
		if (!producer_id_ok(v)) {
			ING_ERR(COMP, "TEST HOOK %s is not a valid frame id: ignored", test_hooks[h].env);
			continue;
		}
		snprintf(r->fault[h], sizeof(r->fault[h]), "%s", v);
		ING_ERR(COMP, "TEST HOOK ACTIVE: %s=%s: session %" PRIu64 " will %s, its first send "
			"in this process only (fault injection, not for production)", test_hooks[h].env,
			v, p->session_id, test_hooks[h].what);
	}
}

/* Does hook h corrupt this send of frame f? Only its frame, only its first send (marked
 * sent by test_hooks_spent once the send went out: a send that must wait is no send). */
static bool test_hook_hits(const struct rprod *r, enum test_hook h, const struct pframe *f)
{
	if (!r->fault[h][0] || strcmp(f->id, r->fault[h]) != 0)
		return false;
	if (atomic_load(&test_hook_fired[h])) {
		ING_WARN(COMP, "TEST HOOK %s: frame %s sent again: left as the application's frame "
			 "(a hook corrupts the first send only)", test_hooks[h].env, f->id);
		return false;
	}
	return true;
}

/* The hooks in mask (bits of enum test_hook) corrupted a send that went out. */
static void test_hooks_spent(unsigned mask, const struct pframe *f)
{
	for (unsigned h = 0; h < HOOK_N; h++) {
		if (!(mask & (1u << h)))
			continue;
		atomic_store(&test_hook_fired[h], true);
		ING_WARN(COMP, "TEST HOOK %s: frame %s sent corrupted: %s", test_hooks[h].env, f->id,
			 test_hooks[h].what);
	}
}
#endif /* ING_TEST_HOOKS */

static int rdma_start(struct ing_producer *p, char *err, size_t errlen)
{
	struct rprod *r = calloc(1, sizeof(*r));
	int rc;

	if (!r) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	p->xport_priv = r;
	if (!p->rdma_addr[0] || !p->rdma_port) {
		snprintf(err, errlen, "the ingest node announced no rdma_cm address");
		return -EINVAL;
	}
	if (p->push) {
		r->slot_grant = calloc(p->credits ? p->credits : 1, sizeof(*r->slot_grant));
		if (!r->slot_grant) {
			snprintf(err, errlen, "out of memory");
			return -ENOMEM;
		}
	}
	r->ech = rdma_create_event_channel();
	if (!r->ech) {
		snprintf(err, errlen, "rdma_create_event_channel: %s", strerror(errno));
		return -errno;
	}
	if (fcntl(r->ech->fd, F_SETFL, fcntl(r->ech->fd, F_GETFL) | O_NONBLOCK)) {
		snprintf(err, errlen, "O_NONBLOCK: %s", strerror(errno));
		return -errno;
	}
#ifdef ING_TEST_HOOKS
	test_hooks_load(p, r);
#endif
	rc = conn_make(p, r, err, errlen);
	if (rc)
		return rc;
	snprintf(p->local_dev, sizeof(p->local_dev), "%s", r->dev);
	ING_INFO(COMP, "session %" PRIu64 ": RDMA connected to %s:%u%s%s via %s (pool %zu bytes registered, qp 0x%x)",
		 p->session_id, p->rdma_addr, p->rdma_port, p->rail[0] ? ", rail " : "", p->rail,
		 r->dev, p->pl->len, r->id->qp->qp_num);
	return 0;
}

/* Is [data, data+length) inside the registered pool? -EFAULT (logged, rate-limited) when
 * not: the node could not READ it (the rkey covers the pool only). */
static int rdma_check(struct ing_producer *p, const struct ing_frame_desc *d)
{
	const uint8_t *b = d->data, *base = p->pl->base;
	size_t plen = p->pl->len;

	if (!base || b < base || b >= base + plen || d->length > (uint64_t)(base + plen - b)) {
		ING_LOG_RL(ING_LOG_ERR, COMP, "frame %s: %" PRIu64 " bytes at %p are not inside the registered frame pool (%p, %zu bytes): RDMA frames must come from ing_frame_alloc (-EFAULT)",
			   d->frame_id, d->length, d->data, base, plen);
		return -EFAULT;
	}
	return 0;
}

static int rdma_pump(struct ing_producer *p)
{
	struct rprod *r = p->xport_priv;
	uint8_t buf[FRAME_META_MAX + ING_STRIPE_MAX_PARTS * 72];
	struct pframe *f;

	while (p->call && !p->broken && (f = producer_sendq_head(p))) {
		if (f->done) {            /* failed locally before its FrameMeta went out */
			producer_sendq_pop(p);
			continue;
		}
		uint64_t addr = (uint64_t)(uintptr_t)f->data;
		uint32_t rkey = r->mr->rkey;
		if (p->push)   /* push: the node grants a slot; nothing of ours is remote-readable */
			addr = rkey = 0;
#ifdef ING_TEST_HOOKS
		unsigned hooked = 0;
		if (test_hook_hits(r, HOOK_BAD_RKEY, f)) {
			rkey ^= 0x00a5a500u;
			hooked |= 1u << HOOK_BAD_RKEY;
		}
		if (test_hook_hits(r, HOOK_BEYOND_MR, f)) {
			addr = (uint64_t)(uintptr_t)p->pl->base + p->pl->len - f->len / 2;
			hooked |= 1u << HOOK_BEYOND_MR;
		}
#endif
		size_t n = frame_meta_encode(buf, f->id, addr, rkey, f->len, f->wafer, f->timestamp,
					     f->crc, p->session_id);
		n += stripe_encode(p, f, addr, buf + n);
		int rc = ing_grpc_ccall_send(p->call, buf, n, false);
		if (rc == -ENOBUFS)
			return 0;
		if (rc < 0) {
			producer_set_broken(p, rc, "ControlStream send failed");
			return -EPIPE;
		}
#ifdef ING_TEST_HOOKS
		test_hooks_spent(hooked, f);
#endif
		f->sent = f->len;
		producer_sendq_pop(p);
	}
	return 0;
}

/* ---------------------------------------------------------------- push */

static int rdma_push_ready(const struct ing_producer *p)
{
	const struct rprod *r = p && p->xport && p->xport->kind == ING_TRANSPORT_RDMA ? p->xport_priv : NULL;

	return r && p->push && r->connected && r->id && r->mr && !p->broken && !r->need_reconnect ? 0 : -ENOTCONN;
}

/* A part WRITE of ours completed (wc of our CQ whose wr_id carries PART_WR_TAG). */
static void part_wr_completed(struct ing_producer *p, struct rprod *r, const struct ibv_wc *wc)
{
	struct rdma_part_wr *t = p->shared ? p->shared->rdma_parts : NULL;
	unsigned idx = (unsigned)((wc->wr_id & ~PART_WR_TAG) >> 32);
	uint32_t gid = (uint32_t)wc->wr_id;

	if (!t || idx >= RDMA_PARTS_MAX || t[idx].via != p || t[idx].gid != gid)
		return;
	if (wc->status != IBV_WC_SUCCESS && wc->status != IBV_WC_WR_FLUSH_ERR) {
		r->writes_failed++;
		ING_LOG_RL(ING_LOG_WARN, COMP, "session %" PRIu64 " frame %s: RDMA WRITE of a striped part failed: %s (vendor_err 0x%x); the node moves the part to another rail",
			   p->session_id, t[idx].f->id, ibv_wc_status_str(wc->status), wc->vendor_err);
	}
	part_wr_end(&t[idx]);
}

/*
 * Push, striped: this session (its rail's) writes part w of home's frame f: bytes
 * [grantOffset, + grantLength) of the frame into the grant, one RDMA WRITE WITH IMM over
 * our QP. A grant for another QP than ours is void (a new one follows, or the node moves
 * the part). 0, or -errno (nothing posted; the node's grant expires or its rail is lost,
 * and the part moves).
 */
static int rdma_part_write(struct ing_producer *p, struct ing_producer *home, struct pframe *f,
			   const struct wire_ack *w)
{
	struct rprod *r = p->xport_priv;
	struct rdma_part_wr *t;
	unsigned idx;

	if (rdma_push_ready(p) || w->grant_qp != r->remote_qpn) {
		if (r)
			r->grants_void++;
		ING_LOG_RL(ING_LOG_DEBUG, COMP, "session %" PRIu64 ": grant %u (part %u of frame %s) names qp 0x%x, ours is 0x%x: void",
			   p->session_id, w->grant_id, w->grant_part, f->id, w->grant_qp, r ? r->remote_qpn : 0);
		return -ENOTCONN;
	}
	if (!p->shared)
		return -ENOTCONN;   /* a router's session only */
	if (!p->shared->rdma_parts && !(p->shared->rdma_parts = calloc(RDMA_PARTS_MAX, sizeof(*t))))
		return -ENOMEM;
	t = p->shared->rdma_parts;
	for (idx = 0; idx < RDMA_PARTS_MAX && t[idx].via; idx++)
		;
	if (idx == RDMA_PARTS_MAX || r->writes_out >= r->sq) {
		ING_LOG_RL(ING_LOG_ERR, COMP, "session %" PRIu64 ": %u WRITEs in flight (%u striped parts of the router): part %u of frame %s waits for the node to move it",
			   p->session_id, r->writes_out, RDMA_PARTS_MAX, w->grant_part, f->id);
		return -ENOBUFS;
	}
	r->grants++;
	struct ibv_sge sge = { .addr = (uintptr_t)f->data + w->grant_offset, .length = (uint32_t)w->grant_length,
			       .lkey = r->mr->lkey };
	struct ibv_send_wr wr, *bad = NULL;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = PART_WR_TAG | (uint64_t)idx << 32 | w->grant_id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.imm_data = htobe32(w->grant_id);
	wr.wr.rdma.remote_addr = w->grant_addr;
	wr.wr.rdma.rkey = w->grant_rkey;
	int rc = ibv_post_send(r->id->qp, &wr, &bad);
	if (rc) {
		ING_LOG_RL(ING_LOG_ERR, COMP, "session %" PRIu64 " frame %s: ibv_post_send(RDMA WRITE WITH IMM, part %u): %s",
			   p->session_id, f->id, w->grant_part, strerror(rc));
		r->need_reconnect = true;   /* the node moves the part once this rail is lost */
		return -rc;
	}
	t[idx] = (struct rdma_part_wr){ .via = p, .home = home, .f = f, .gid = w->grant_id };
	r->writes_out++;
	f->busy_refs++;
	return 0;
}

/* Push, striped: the node granted part w->grant_part of frame f on rail w->grant_rail:
 * the session of that rail writes it. */
static void rdma_part_grant(struct ing_producer *p, struct pframe *f, const struct wire_ack *w)
{
	char msg[200];

	if (f->node_failed || f->done)
		return;
	if (!w->grant_id || !w->grant_length || w->grant_length > UINT32_MAX || w->grant_offset > f->len ||
	    w->grant_length > f->len - w->grant_offset) {
		snprintf(msg, sizeof(msg), "the ingest node granted part %u as %" PRIu64 " bytes at %" PRIu64
			 " (grant %u) of a frame of %" PRIu64, w->grant_part, w->grant_length, w->grant_offset,
			 w->grant_id, f->len);
		producer_frame_fail(p, f, ING_ERR_INTERNAL, 0, msg);
		return;
	}
	struct ing_producer *via = p->router ? fleet_rail_session(p, w->grant_rail) : NULL;
	if (!via || !via->xport || !via->xport->part_write) {
		ING_LOG_RL(ING_LOG_WARN, COMP, "session %" PRIu64 ": part %u of frame %s granted on rail %u, where this producer has no session now: the node moves it when it sees the rail's connection gone",
			   p->session_id, w->grant_part, f->id, w->grant_rail);
		return;
	}
	(void)via->xport->part_write(via, p, f, w);
	f->sent = f->len;
}

/* Push: the node granted frame f a slot: one RDMA WRITE WITH IMM of the whole frame. */
static void rdma_grant(struct ing_producer *p, struct pframe *f, const struct wire_ack *w)
{
	struct rprod *r = p->xport_priv;
	uint32_t slot = producer_frame_slot(p, f);
	char msg[200];

	if (w->grant_striped) {   /* a part of a striped frame: over its rail's session */
		rdma_part_grant(p, f, w);
		return;
	}
	r->grants++;
	if (!r->connected || !r->id || w->grant_qp != r->remote_qpn) {
		r->grants_void++;
		ING_LOG_RL(ING_LOG_DEBUG, COMP, "session %" PRIu64 ": grant %u for frame %s names qp 0x%x, ours is 0x%x: void (a new grant follows)",
			   p->session_id, w->grant_id, f->id, w->grant_qp, r->remote_qpn);
		return;
	}
	if (f->node_failed || f->done)
		return;
	if (r->slot_grant[slot]) {
		ING_LOG_RL(ING_LOG_WARN, COMP, "session %" PRIu64 ": second grant for frame %s while its write is in flight: ignored",
			   p->session_id, f->id);
		return;
	}
	if (w->grant_length != f->len || !w->grant_id) {
		snprintf(msg, sizeof(msg), "the ingest node granted %" PRIu64 " bytes (grant %u) for a frame of %" PRIu64,
			 w->grant_length, w->grant_id, f->len);
		producer_frame_fail(p, f, ING_ERR_INTERNAL, 0, msg);
		return;
	}
	uint64_t raddr = w->grant_addr;
	uint32_t len = (uint32_t)f->len, imm = w->grant_id;
#ifdef ING_TEST_HOOKS
	unsigned hooked = 0;
	if (test_hook_hits(r, HOOK_PUSH_STALE, f)) {
		imm ^= 0x40000000u;
		hooked |= 1u << HOOK_PUSH_STALE;
	}
	if (len > 1 && test_hook_hits(r, HOOK_PUSH_SHORT, f)) {
		len -= 1;
		hooked |= 1u << HOOK_PUSH_SHORT;
	}
	if (test_hook_hits(r, HOOK_PUSH_OUTSIDE, f)) {
		raddr += (len + 1) / 2;
		hooked |= 1u << HOOK_PUSH_OUTSIDE;
	}
#endif
	struct ibv_sge sge = { .addr = (uintptr_t)f->data, .length = len, .lkey = r->mr->lkey };
	struct ibv_send_wr wr, *bad = NULL;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = ((uint64_t)slot << 32) | w->grant_id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.imm_data = htobe32(imm);
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = w->grant_rkey;
	int rc = ibv_post_send(r->id->qp, &wr, &bad);
	if (rc) {
		ING_LOG_RL(ING_LOG_ERR, COMP, "session %" PRIu64 " frame %s: ibv_post_send(RDMA WRITE WITH IMM): %s",
			   p->session_id, f->id, strerror(rc));
		snprintf(msg, sizeof(msg), "posting the RDMA WRITE failed: %s", strerror(rc));
		producer_frame_fail(p, f, ING_ERR_TRANSFER, 1, msg);
		return;
	}
#ifdef ING_TEST_HOOKS
	test_hooks_spent(hooked, f);
#endif
	r->slot_grant[slot] = w->grant_id;
	r->writes_out++;
	f->busy_refs++;
	f->sent = f->len;
}

/* Completions of our WRITEs. A frame's own error (access, length) fails that frame; any
 * error means the QP is in ERROR: reconnect once the rest flushed. */
static void push_poll_cq(struct ing_producer *p, struct rprod *r)
{
	struct ibv_wc wc[16];
	int n;

	while (r->cq && (n = ibv_poll_cq(r->cq, 16, wc)) > 0) {
		for (int i = 0; i < n; i++) {
			uint32_t slot = (uint32_t)(wc[i].wr_id >> 32), gid = (uint32_t)wc[i].wr_id;
			if (r->writes_out)
				r->writes_out--;
			if (wc[i].status != IBV_WC_SUCCESS)
				r->need_reconnect = true;
			if (wc[i].wr_id & PART_WR_TAG) {   /* a part of another session's frame */
				part_wr_completed(p, r, &wc[i]);
				continue;
			}
			if (slot >= p->credits || r->slot_grant[slot] != gid)
				continue;
			struct pframe *f = &p->frames[slot];
			r->slot_grant[slot] = 0;
			if (wc[i].status != IBV_WC_SUCCESS && wc[i].status != IBV_WC_WR_FLUSH_ERR) {
				char msg[200];
				r->writes_failed++;
				ING_LOG_RL(ING_LOG_WARN, COMP, "session %" PRIu64 " frame %s: RDMA WRITE failed: %s (vendor_err 0x%x); failing this frame, reconnecting for the others",
					   p->session_id, f->id, ibv_wc_status_str(wc[i].status), wc[i].vendor_err);
				snprintf(msg, sizeof(msg), "RDMA WRITE into grant %u failed: %s", gid,
					 ibv_wc_status_str(wc[i].status));
				producer_frame_fail(p, f, ING_ERR_TRANSFER, 0, msg);
			}
			producer_frame_unref(p, f);
		}
	}
}

/* Before the QP goes: wait (bounded) for the flushes of our WRITEs, then let go of any
 * frame whose completion never came (the node grants it again on the next QP). */
static void push_forget_writes(struct ing_producer *p, struct rprod *r)
{
	uint64_t end = ing_now_ns() + 1000000000ull;

	if (!p->push || !r->slot_grant)
		return;
	while (r->writes_out && ing_now_ns() < end) {
		push_poll_cq(p, r);
		if (r->writes_out)
			poll(NULL, 0, 1);
	}
	for (unsigned s = 0; s < p->credits; s++) {
		if (!r->slot_grant[s])
			continue;
		r->slot_grant[s] = 0;
		producer_frame_unref(p, &p->frames[s]);
	}
	struct rdma_part_wr *t = p->shared ? p->shared->rdma_parts : NULL;
	for (unsigned i = 0; t && i < RDMA_PARTS_MAX; i++)
		if (t[i].via == p)
			part_wr_end(&t[i]);
	r->writes_out = 0;
}

/* Drop the connection and make a new one with the same session (bounded attempts). */
static int reconnect(struct ing_producer *p, struct rprod *r, const char *why)
{
	char err[160] = "";

	ING_WARN(COMP, "session %" PRIu64 ": %s; reconnecting", p->session_id, why);
	push_forget_writes(p, r);
	conn_drop(r);
	if (++r->reconnects > RECONNECT_MAX) {
		ING_ERR(COMP, "session %" PRIu64 ": %u RDMA reconnects: giving up", p->session_id,
			r->reconnects - 1);
		return -ENOTCONN;
	}
	int rc = conn_make(p, r, err, sizeof(err));
	if (rc) {
		ING_ERR(COMP, "session %" PRIu64 ": RDMA reconnect failed: %s", p->session_id, err);
		conn_drop(r);
		return rc;
	}
	ING_INFO(COMP, "session %" PRIu64 ": RDMA reconnected (qp 0x%x)", p->session_id,
		 r->id->qp->qp_num);
	return 0;
}

/* A router's node session: no reconnect, the router moves the frames to the next node. */
static bool fail_fast(const struct ing_producer *p)
{
	return p->shared && p->shared->fail_fast;
}

/* The session is broken, saying why (the router's failover log names it). */
static int lost(struct ing_producer *p, int err, const char *why)
{
	producer_set_broken(p, err, why);
	return err;
}

static int rdma_poll(struct ing_producer *p)
{
	struct rprod *r = p->xport_priv;

	if (!r || !r->ech)
		return 0;
	if (fail_fast(p) && r->connected) {
		/* a router's rail: its local link lost moves its frames to the other rails now */
		uint64_t now = ing_now_ns();
		char why[128];
		if (now >= r->port_check_ns) {
			r->port_check_ns = now + PORT_CHECK_NS;
			if (port_down(r->id, why, sizeof(why))) {
				ING_WARN(COMP, "session %" PRIu64 ": %s", p->session_id, why);
				return lost(p, -ENETDOWN, why);
			}
		}
	}
	if (p->push) {
		push_poll_cq(p, r);
		if (r->need_reconnect && r->connected) {
			if (fail_fast(p))
				return lost(p, -EIO, "an RDMA WRITE failed, the QP is in error");
			/* our QP is in ERROR: tell the node (it parks the grants) and start over */
			return reconnect(p, r, "an RDMA WRITE failed, the QP is in error");
		}
	}
	for (int k = 0; k < 16; k++) {
		struct rdma_cm_event *ev;
		if (rdma_get_cm_event(r->ech, &ev)) {
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				break;
			ING_LOG_RL(ING_LOG_ERR, COMP, "rdma_get_cm_event: %s", strerror(errno));
			return -errno;
		}
		enum rdma_cm_event_type t = ev->event;
		int st = ev->status;
		rdma_ack_cm_event(ev);
		switch (t) {
		case RDMA_CM_EVENT_DISCONNECTED:
		case RDMA_CM_EVENT_CONNECT_ERROR:
		case RDMA_CM_EVENT_UNREACHABLE: {
			char why[96];
			snprintf(why, sizeof(why), "RDMA connection closed by the ingest node (%s, status %d)",
				 rdma_event_str(t), st);
			r->connected = false;
			if (fail_fast(p))
				return lost(p, -ECONNRESET, why);
			return reconnect(p, r, why); /* events of the old id are gone with it */
		}
		case RDMA_CM_EVENT_DEVICE_REMOVAL:
			ING_ERR(COMP, "session %" PRIu64 ": RDMA device %s removed", p->session_id, r->dev);
			if (r->reg)
				r->reg->dead = true;   /* the kernel waits for its PD and MR */
			return lost(p, -ENODEV, "RDMA device removed");
		case RDMA_CM_EVENT_TIMEWAIT_EXIT:
			break;
		default:
			ING_DBG(COMP, "session %" PRIu64 ": CM event %s (status %d)", p->session_id,
				rdma_event_str(t), st);
			break;
		}
	}
	return 0;
}

const struct producer_xport rdma_xport = {
	.name = "rdma",
	.kind = ING_TRANSPORT_RDMA,
	.call_path = PRODUCER_PATH_CONTROL,
	.probe = rdma_probe,
	.start = rdma_start,
	.check = rdma_check,
	.pump = rdma_pump,
	.poll = rdma_poll,
	.stop = rdma_stop,
	.grant = rdma_grant,
	.shared_release = rdma_shared_release,
	.read_rkey = rdma_read_rkey,
	.push_ready = rdma_push_ready,
	.part_write = rdma_part_write,
};
