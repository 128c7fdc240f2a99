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
 * connect_timeout_ms.
 */
#include "producer/producer_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "common/clock.h"
#include "common/log.h"
#include "control/grpc/grpc.h"
#include "proto/rdma_conn.h"

#define COMP "prod-rdma"
#define RECONNECT_MAX 8            /* attempts per session before giving up */
#define FRAME_META_MAX (11 * 9 + 2 * (ING_ID_MAX + 3))

struct rprod {
	struct rdma_event_channel *ech;
	struct rdma_cm_id *id;
	struct ibv_context *ctx;   /* of the first connection: the PD and MR live there */
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	struct ibv_cq *cq;
	unsigned reconnects;
	bool connected;
	/* TEST HOOKS (see test_hooks_load): the frame with this id is announced with a wrong
	 * rkey / an address range crossing the MR's end. "": off (always, in production). */
	char fault_bad_rkey[ING_ID_MAX + 1], fault_beyond_mr[ING_ID_MAX + 1];
	char dev[IBV_SYSFS_NAME_MAX];
};

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

/* Connect (or reconnect) with the same PD/MR. Blocking, bounded by timeout_ms per step. */
static int conn_make(struct ing_producer *p, struct rprod *r, char *err, size_t errlen)
{
	int tmo = p->o.connect_timeout_ms;
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV };
	struct addrinfo *ai = NULL;
	char port[8];
	int rc;

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
	if (r->ctx && r->id->verbs != r->ctx) {
		snprintf(err, errlen, "the route to %s moved to another RDMA device", p->rdma_addr);
		return -ENODEV;
	}
	if (p->o.rdma_device && strcmp(ibv_get_device_name(r->id->verbs->device), p->o.rdma_device)) {
		snprintf(err, errlen, "%s routes through device %s, not %s", p->rdma_addr,
			 ibv_get_device_name(r->id->verbs->device), p->o.rdma_device);
		return -ENODEV;
	}
	if (rdma_resolve_route(r->id, tmo)) {
		snprintf(err, errlen, "rdma_resolve_route: %s", strerror(errno));
		return -errno;
	}
	if ((rc = expect(r, tmo + 500, RDMA_CM_EVENT_ROUTE_RESOLVED, "resolve route", err, errlen)))
		return rc;
	if (!r->ctx) {
		r->ctx = r->id->verbs;
		snprintf(r->dev, sizeof(r->dev), "%s", ibv_get_device_name(r->ctx->device));
		r->pd = ibv_alloc_pd(r->ctx);
		if (!r->pd) {
			snprintf(err, errlen, "ibv_alloc_pd(%s) failed", r->dev);
			return -ENOMEM;
		}
		/* the whole pool, once: every frame's rkey is this MR's */
		r->mr = ibv_reg_mr(r->pd, p->pool.base, p->pool.len,
				   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
		if (!r->mr) {
			snprintf(err, errlen, "ibv_reg_mr(frame pool, %zu bytes): %s (ulimit -l?)",
				 p->pool.len, strerror(errno));
			return -errno ? -errno : -ENOMEM;
		}
	}
	/* The QP only answers READs: no WRs of its own, a minimal CQ. */
	r->cq = ibv_create_cq(r->ctx, 2, NULL, NULL, 0);
	if (!r->cq) {
		snprintf(err, errlen, "ibv_create_cq: %s", strerror(errno));
		return -ENOMEM;
	}
	struct ibv_qp_init_attr qa = {
		.send_cq = r->cq,
		.recv_cq = r->cq,
		.cap = { .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};
	if (rdma_create_qp(r->id, r->pd, &qa)) {
		snprintf(err, errlen, "rdma_create_qp: %s", strerror(errno));
		return -errno;
	}
	struct ibv_device_attr da;
	unsigned resp = 16;
	if (ibv_query_device(r->ctx, &da) == 0 && da.max_qp_rd_atom > 0)
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
	return 0;
}

/* ---------------------------------------------------------------- xport hooks */

static int rdma_probe(struct ing_producer *p, char *why, size_t whylen)
{
	int n = 0;
	struct ibv_device **dl;

	if (!p->pool.base) {
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
		found = !strcmp(ibv_get_device_name(dl[i]), p->o.rdma_device);
	ibv_free_device_list(dl);
	if (!found) {
		snprintf(why, whylen, "rdma: device %s not found", p->o.rdma_device);
		return -ENODEV;
	}
	return 0;
}

static void rdma_stop(struct ing_producer *p)
{
	struct rprod *r = p->xport_priv;

	if (!r)
		return;
	conn_drop(r);
	if (r->mr)
		ibv_dereg_mr(r->mr);
	if (r->pd)
		ibv_dealloc_pd(r->pd);
	if (r->ech)
		rdma_destroy_event_channel(r->ech);
	free(r);
	p->xport_priv = NULL;
}

#ifdef ING_TEST_HOOKS
/*
 * TEST HOOKS (compiled only into the test build ingest_testhooks, never into libingest or
 * ingest-send: see producer/CMakeLists.txt) - fault injection for the Soft-RoCE tests (tests/rxe/rdma_in_guest.sh,
 * deploy/rxe-vm/README.md). Never set them outside a test: they make the node's READ of
 * one frame fail on purpose.
 *   ING_TEST_FAULT_RDMA_BAD_RKEY=<frame id>   that frame's FrameMeta carries a wrong rkey
 *                                             (the node's READ fails: remote access error,
 *                                             the QP goes to ERROR, the session reconnects)
 *   ING_TEST_FAULT_RDMA_BEYOND_MR=<frame id>  that frame's [addr, addr+length) is moved to
 *                                             cross the end of the registered pool
 * When set, every start of the transport logs an ERROR banner naming the hook, and every
 * frame it corrupts is logged. The variables of the first version (ING_FAULT_RDMA_*)
 * are refused loudly rather than honoured, so an old script cannot inject faults unseen.
 */
#define TEST_HOOK_BAD_RKEY "ING_TEST_FAULT_RDMA_BAD_RKEY"
#define TEST_HOOK_BEYOND_MR "ING_TEST_FAULT_RDMA_BEYOND_MR"

static void test_hook_id(const char *name, char *out, size_t cap)
{
	const char *v = getenv(name);

	out[0] = '\0';
	if (!v || !*v)
		return;
	if (!producer_id_ok(v)) {
		ING_ERR(COMP, "TEST HOOK %s is not a valid frame id: ignored", name);
		return;
	}
	snprintf(out, cap, "%s", v);
}

static void test_hooks_load(struct ing_producer *p, struct rprod *r)
{
	static const char *const old[] = { "ING_FAULT_RDMA_BAD_RKEY", "ING_FAULT_RDMA_BEYOND_MR" };

	for (unsigned i = 0; i < 2; i++)
		if (getenv(old[i]))
			ING_ERR(COMP, "%s is no longer read: the test hook is ING_TEST_%s", old[i],
				old[i] + 4);
	test_hook_id(TEST_HOOK_BAD_RKEY, r->fault_bad_rkey, sizeof(r->fault_bad_rkey));
	test_hook_id(TEST_HOOK_BEYOND_MR, r->fault_beyond_mr, sizeof(r->fault_beyond_mr));
	if (r->fault_bad_rkey[0])
		ING_ERR(COMP, "TEST HOOK ACTIVE: %s=%s: session %" PRIu64 " will announce that frame with a wrong rkey (fault injection, not for production)",
			TEST_HOOK_BAD_RKEY, r->fault_bad_rkey, p->session_id);
	if (r->fault_beyond_mr[0])
		ING_ERR(COMP, "TEST HOOK ACTIVE: %s=%s: session %" PRIu64 " will announce that frame beyond its registered pool (fault injection, not for production)",
			TEST_HOOK_BEYOND_MR, r->fault_beyond_mr, p->session_id);
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
	ING_INFO(COMP, "session %" PRIu64 ": RDMA connected to %s:%u via %s (pool %zu bytes registered, qp 0x%x)",
		 p->session_id, p->rdma_addr, p->rdma_port, r->dev, p->pool.len, r->id->qp->qp_num);
	return 0;
}

/* Is [data, data+length) inside the registered pool? -EFAULT (logged, rate-limited) when
 * not: the node could not READ it (the rkey covers the pool only). */
static int rdma_check(struct ing_producer *p, const struct ing_frame_desc *d)
{
	const uint8_t *b = d->data, *base = p->pool.base;

	if (!base || b < base || b >= base + p->pool.len || d->length > (uint64_t)(base + p->pool.len - b)) {
		ING_LOG_RL(ING_LOG_ERR, COMP, "frame %s: %" PRIu64 " bytes at %p are not inside the registered frame pool (%p, %zu bytes): RDMA frames must come from ing_frame_alloc (-EFAULT)",
			   d->frame_id, d->length, d->data, p->pool.base, p->pool.len);
		return -EFAULT;
	}
	return 0;
}

static int rdma_pump(struct ing_producer *p)
{
	struct rprod *r = p->xport_priv;
	uint8_t buf[FRAME_META_MAX];
	struct pframe *f;

	while (p->call && !p->broken && (f = producer_sendq_head(p))) {
		if (f->done) {            /* failed locally before its FrameMeta went out */
			producer_sendq_pop(p);
			continue;
		}
		uint64_t addr = (uint64_t)(uintptr_t)f->data;
		uint32_t rkey = r->mr->rkey;
#ifdef ING_TEST_HOOKS
		if (r->fault_bad_rkey[0] && strcmp(f->id, r->fault_bad_rkey) == 0) {
			rkey ^= 0x00a5a500u;
			ING_WARN(COMP, "TEST HOOK: frame %s announced with a wrong rkey", f->id);
		}
		if (r->fault_beyond_mr[0] && strcmp(f->id, r->fault_beyond_mr) == 0) {
			addr = (uint64_t)(uintptr_t)p->pool.base + p->pool.len - f->len / 2;
			ING_WARN(COMP, "TEST HOOK: frame %s announced half beyond the registered pool",
				 f->id);
		}
#endif
		size_t n = frame_meta_encode(buf, f->id, addr, rkey, f->len, f->wafer, f->timestamp,
					     f->crc, p->session_id);
		int rc = ing_grpc_ccall_send(p->call, buf, n, false);
		if (rc == -ENOBUFS)
			return 0;
		if (rc < 0) {
			producer_set_broken(p, rc, "ControlStream send failed");
			return -EPIPE;
		}
		f->sent = f->len;
		producer_sendq_pop(p);
	}
	return 0;
}

static int rdma_poll(struct ing_producer *p)
{
	struct rprod *r = p->xport_priv;

	if (!r || !r->ech)
		return 0;
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
			char err[160] = "";
			ING_WARN(COMP, "session %" PRIu64 ": RDMA connection closed by the ingest node (%s, status %d); reconnecting",
				 p->session_id, rdma_event_str(t), st);
			r->connected = false;
			conn_drop(r);
			if (++r->reconnects > RECONNECT_MAX) {
				ING_ERR(COMP, "session %" PRIu64 ": %u RDMA reconnects: giving up",
					p->session_id, r->reconnects - 1);
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
			return 0; /* events of the old id are gone with it */
		}
		case RDMA_CM_EVENT_DEVICE_REMOVAL:
			ING_ERR(COMP, "session %" PRIu64 ": RDMA device %s removed", p->session_id, r->dev);
			return -ENODEV;
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
};
