/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rdma_cm.c - the RDMA engine on the ingest node: device + PD + pool MRs (registered once),
 * one CQ/channel/poller (with its mailbox) per dataplane lcore, and the rdma_cm listener
 * whose event channel, timer and connection events the control thread's loop serves.
 *
 * Connection life (control thread):
 *   CONNECT_REQUEST (session id in private data, checked by the service) -> RC QP on the
 *   session's lcore CQ -> rdma_accept -> attach to the lcore -> ESTABLISHED
 *   -> DISCONNECTED / CONNECT_ERROR / lcore CONN_ERROR -> rdma_disconnect (QP to ERROR, WRs
 *   flush) + detach -> lcore CONN_RELEASED + CM gone (or a bounded timeout) -> destroy.
 * Every CM event is acked before it is acted on, so destroying an id never waits on an
 * unacked event of our own.
 */
#include "dataplane/rdma/rdma.h"

#include "common/clock.h"
#include "common/log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rdma/rdma_cma.h>
#include <rte_launch.h>
#include <rte_lcore.h>

#define COMP "rdma-cm"
#define CM_EVENTS_PER_WAKE 64
#define CONN_DESTROY_TIMEOUT_MS 10000
#define REOPEN_NS 1000000000ull   /* after DEVICE_REMOVAL: look for the device once a second */

struct rdma_engine_lcore {
	struct ing_rdma *r;
	unsigned idx;
	unsigned lcore_id;
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq;
	struct ing_rdma_lcore *lc;
	pthread_t th;
	bool launched;
};

enum rconn_state { RC_ACCEPTED = 1, RC_ESTABLISHED, RC_DOWN };

struct rconn {
	struct ing_rdma *r;
	struct rdma_cm_id *id;
	uint64_t session_id;
	uint32_t qp_num;
	unsigned lcore;
	unsigned rd_atom;
	enum rconn_state state;
	bool released;     /* the lcore no longer touches the QP */
	bool cm_gone;      /* DISCONNECTED (or equivalent) seen */
	bool was_up;
	uint64_t destroy_deadline_ns; /* 0: none */
	struct rconn *next;
};

struct ing_rdma {
	struct ing_rdma_opts o;
	struct ing_pool *pool;
	struct ing_persist *persist;
	struct ing_mbox *ctl;     /* the control thread's mailbox */
	struct ing_rdma_cbs cbs;
	struct rdma_event_channel *ech;
	struct rdma_cm_id *listen_id;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_device_attr dattr;
	uint32_t max_msg_sz;
	struct ibv_mr *mrs[ING_POOL_MAX_CLASSES];
	uint32_t lkeys[ING_POOL_MAX_CLASSES];
	unsigned nmr;
	int push_mode;     /* 0 off, 1 memory windows, 2 pool MR (ing_rdma_push_mode) */
	bool device_lost;
	uint64_t reopen_at_ns;   /* device_lost: next re-open attempt */
	char addr[INET6_ADDRSTRLEN];
	uint16_t port;
	char devname[IBV_SYSFS_NAME_MAX];
	unsigned nl;
	struct rdma_engine_lcore lcs[ING_RDMA_MAX_LCORES];
	struct rconn *conns;
	struct ing_rdma_stats st;
};

void ing_rdma_opts_init(struct ing_rdma_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->port = ING_RDMA_DEFAULT_PORT;
	o->nlcores = 1;
	o->use_eal = true;
	o->rd_atom = ING_RDMA_DEFAULT_RD_ATOM;
	o->sq_depth = ING_RDMA_DEFAULT_SQ_DEPTH;
	o->cq_size = ING_RDMA_DEFAULT_CQ_SIZE;
	o->job_ring_size = ING_DEFAULT_RING_SIZE;
	ing_rdma_lcore_opts_init(&o->lcore);
}

/* ---------------------------------------------------------------- lcore io (production) */

static int io_deliver(void *arg, struct ing_frame *f)
{
	struct ing_rdma *r = ((struct rdma_engine_lcore *)arg)->r;

	if (r->persist)
		return ing_persist_submit(r->persist, f);
	/* no persistence (tests, null benches): the frame is "done" once received */
	f->t_durable_ns = f->t_received_ns;
	return ing_mbox_send(r->ctl, ING_EV_DONE, f);
}

/* ---------------------------------------------------------------- connections */

static const char *sess_str(uint64_t s, char *buf, size_t n)
{
	snprintf(buf, n, "%llu", (unsigned long long)s);
	return buf;
}

static struct rconn *conn_by_session(struct ing_rdma *r, uint64_t session_id, bool live_only)
{
	struct rconn *best = NULL;

	for (struct rconn *c = r->conns; c; c = c->next) {
		if (c->session_id != session_id)
			continue;
		if (c->state != RC_DOWN)
			return c;
		if (!live_only && !best)
			best = c;
	}
	return best;
}

static struct rconn *conn_by_qp(struct ing_rdma *r, uint32_t qp_num)
{
	for (struct rconn *c = r->conns; c; c = c->next)
		if (c->qp_num == qp_num)
			return c;
	return NULL;
}

static void conn_unlink_free(struct ing_rdma *r, struct rconn *c)
{
	for (struct rconn **pp = &r->conns; *pp; pp = &(*pp)->next) {
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	}
	if (c->id) {
		if (c->id->qp)
			rdma_destroy_qp(c->id);
		rdma_destroy_id(c->id);
	}
	free(c);
}

static void conn_maybe_destroy(struct ing_rdma *r, struct rconn *c)
{
	if (c->released && c->cm_gone) {
		ING_DBG(COMP, "qp 0x%x session %llu: destroyed", c->qp_num,
			(unsigned long long)c->session_id);
		conn_unlink_free(r, c);
	}
}

static void conn_destroy_timeout(struct rconn *c)
{
	ING_WARN(COMP, "qp 0x%x session %llu: no %s within %d ms of the disconnect; destroying anyway",
		 c->qp_num, (unsigned long long)c->session_id,
		 !c->released ? "release by the lcore" : "CM DISCONNECTED", CONN_DESTROY_TIMEOUT_MS);
	if (!c->released) {
		/* the lcore still owns the QP: wait for it (it is bounded by drain_ms) */
		c->destroy_deadline_ns = ing_now_ns() + (uint64_t)CONN_DESTROY_TIMEOUT_MS * 1000000ull;
		return;
	}
	c->cm_gone = true;
	conn_maybe_destroy(c->r, c);
}

/* Take a connection down once: QP to ERROR (flushes), lcore detach, service told. */
static void conn_down(struct ing_rdma *r, struct rconn *c, const char *why)
{
	char sb[24];

	if (c->state == RC_DOWN)
		return;
	ING_LOGC(ING_LOG_INFO, COMP, (&(struct ing_log_ctx){ .session = c->session_id }),
		 "qp 0x%x session %s: connection down: %s", c->qp_num,
		 sess_str(c->session_id, sb, sizeof(sb)), why);
	c->state = RC_DOWN;
	if (rdma_disconnect(c->id) && errno != EINVAL)
		ING_DBG(COMP, "qp 0x%x: rdma_disconnect: %s", c->qp_num, strerror(errno));
	if (c->id->qp) {
		/* rdma_disconnect moves the QP to ERROR when connected; make sure in all states */
		struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };
		if (ibv_modify_qp(c->id->qp, &a, IBV_QP_STATE))
			ING_DBG(COMP, "qp 0x%x: modify to ERR failed", c->qp_num);
	}
	if (ing_rdma_lcore_detach(r->lcs[c->lcore].lc, c->qp_num))
		ING_ERR(COMP, "qp 0x%x: lcore mailbox full; detach lost", c->qp_num);
	if (c->was_up && r->cbs.conn_state)
		r->cbs.conn_state(r->cbs.arg, c->session_id, false);
	if (r->st.conns_active)
		r->st.conns_active--;
	c->destroy_deadline_ns = ing_now_ns() + (uint64_t)CONN_DESTROY_TIMEOUT_MS * 1000000ull;
}

static void reject(struct rdma_cm_id *id, const char *why, uint64_t session_id, struct ing_rdma *r)
{
	ING_LOGC(ING_LOG_WARN, COMP, (&(struct ing_log_ctx){ .session = session_id }),
		 "connect request (session %llu) rejected: %s", (unsigned long long)session_id, why);
	r->st.conns_rejected++;
	if (rdma_reject(id, NULL, 0))
		ING_DBG(COMP, "rdma_reject: %s", strerror(errno));
	rdma_destroy_id(id);
}

static void on_connect_request(struct ing_rdma *r, struct rdma_cm_id *id, const void *priv,
			       size_t privlen, unsigned remote_resp_res)
{
	uint64_t sid = 0;
	char why[128];
	int rc;

	if (r->device_lost) {
		reject(id, "RDMA device removed", 0, r);
		return;
	}
	if (ing_rdma_cm_priv_parse(priv, privlen, &sid)) {
		reject(id, "no/invalid h3000 private data (session id)", 0, r);
		return;
	}
	if (r->cbs.session_check && (rc = r->cbs.session_check(r->cbs.arg, sid))) {
		snprintf(why, sizeof(why), "session check: %s", strerror(-rc));
		reject(id, why, sid, r);
		return;
	}
	if (id->verbs != r->ctx) {
		reject(id, "request arrived on another RDMA device than the listener's", sid, r);
		return;
	}
	if (!remote_resp_res) {
		reject(id, "producer offers 0 responder resources (cannot serve READs)", sid, r);
		return;
	}
	/* a reconnect of a session whose old connection we have not seen fail yet */
	struct rconn *old = conn_by_session(r, sid, true);
	if (old)
		conn_down(r, old, "superseded by a new connection of the same session");

	unsigned li = (unsigned)(sid % r->nl);
	struct rdma_engine_lcore *el = &r->lcs[li];
	struct ibv_qp_init_attr qa = {
		.send_cq = el->cq,
		.recv_cq = el->cq,
		.cap = { .max_send_wr = r->o.sq_depth,
			 .max_recv_wr = !r->push_mode ? 1 : r->o.lcore.recv_depth ? r->o.lcore.recv_depth
								    : ING_RDMA_DEFAULT_RECV_DEPTH,
			 .max_send_sge = 1,
			 .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
		.sq_sig_all = 0,
	};
	if (rdma_create_qp(id, r->pd, &qa)) {
		snprintf(why, sizeof(why), "rdma_create_qp: %s", strerror(errno));
		reject(id, why, sid, r);
		return;
	}
	unsigned rd = r->o.rd_atom;
	if (rd > (unsigned)r->dattr.max_qp_init_rd_atom)
		rd = (unsigned)r->dattr.max_qp_init_rd_atom;
	if (rd > remote_resp_res)
		rd = remote_resp_res;
	if (!rd)
		rd = 1;
	struct rconn *c = calloc(1, sizeof(*c));
	if (!c) {
		rdma_destroy_qp(id);
		reject(id, "out of memory", sid, r);
		return;
	}
	c->r = r;
	c->id = id;
	c->session_id = sid;
	c->qp_num = id->qp->qp_num;
	c->lcore = li;
	c->rd_atom = rd;
	c->state = RC_ACCEPTED;
	id->context = c;
	struct rdma_conn_param cp = {
		.initiator_depth = (uint8_t)(rd > 255 ? 255 : rd),
		.responder_resources = 0,
		.retry_count = 7,
		.rnr_retry_count = 7,
	};
	if (rdma_accept(id, &cp)) {
		snprintf(why, sizeof(why), "rdma_accept: %s", strerror(errno));
		id->context = NULL;
		rdma_destroy_qp(id);
		free(c);
		reject(id, why, sid, r);
		return;
	}
	/* rdma_accept took the QP to RTS: the lcore may post as soon as it sees it */
	if (ing_rdma_lcore_attach(el->lc, id->qp, sid, rd, r->o.sq_depth)) {
		ING_ERR(COMP, "qp 0x%x: lcore %u mailbox full; dropping the connection", c->qp_num,
			el->lcore_id);
		c->next = r->conns;
		r->conns = c;
		c->released = true;
		conn_down(r, c, "lcore busy");
		return;
	}
	c->next = r->conns;
	r->conns = c;
	r->st.conns_accepted++;
	r->st.conns_active++;
	ING_LOGC(ING_LOG_INFO, COMP, (&(struct ing_log_ctx){ .session = sid }),
		 "qp 0x%x session %llu accepted on lcore %u (READs in flight %u, peer responder resources %u)",
		 c->qp_num, (unsigned long long)sid, el->lcore_id, rd, remote_resp_res);
}

static void release_device(struct ing_rdma *r, const char *why);
static void add_lcore_stats(struct ing_rdma_stats *s, const struct ing_rdma_lcore_stats *ls);

/* librdmacm lists the devices again and closes its context of any that is gone and unused
 * (it cannot do so while no device at all is listed: see docs/ARCHITECTURE.md). Returns the
 * number of devices listed. */
static int sync_cm_devices(void)
{
	int n = 0;
	struct ibv_context **l = rdma_get_devices(&n);

	if (l)
		rdma_free_devices(l);
	return l ? n : 0;
}

static void try_reopen(struct ing_rdma *r);
static int device_open(struct ing_rdma *r, char *why, size_t whylen);

static void on_device_removal(struct ing_rdma *r)
{
	if (r->device_lost)
		return;
	r->device_lost = true;
	r->st.device_removals++;
	ING_ERR(COMP, "RDMA device %s removed: failing its connections; new sessions use the gRPC fallback",
		r->devname);
	for (struct rconn *c = r->conns; c; c = c->next)
		conn_down(r, c, "device removed");
	if (r->cbs.device_lost)
		r->cbs.device_lost(r->cbs.arg, "RDMA device removed");
	/* the kernel waits for us to release every object on the device */
	char why[96];
	snprintf(why, sizeof(why), "RDMA device %s removed", r->devname);
	release_device(r, why);
	/* and for librdmacm to close its cached context of it: it does so when it next lists
	 * the devices and the removed one is gone (rdma_get_devices; the timer repeats it) */
	sync_cm_devices();
	r->reopen_at_ns = ing_now_ns() + REOPEN_NS;
	ING_WARN(COMP, "RDMA device %s released; RDMA re-opens when a device is back (checked every %u s)",
		 r->devname, (unsigned)(REOPEN_NS / 1000000000ull));
}

/*
 * After DEVICE_REMOVAL, once a second: let librdmacm drop removed devices (so the kernel's
 * removal completes) and, when a device is listed, set the engine up again on the same
 * address and port. The service then offers RDMA again (cbs.device_back).
 */
static void try_reopen(struct ing_rdma *r)
{
	char why[192] = "";
	int n = sync_cm_devices();

	r->reopen_at_ns = ing_now_ns() + REOPEN_NS;
	if (n <= 0)
		return;
	if (device_open(r, why, sizeof(why)) == 0) {
		int rc = ing_rdma_start(r);
		if (rc == 0) {
			r->device_lost = false;
			r->st.device_reopens++;
			ING_WARN(COMP, "RDMA device %s is back: listener on %s:%u re-opened", r->devname,
				 r->addr, r->port);
			if (r->cbs.device_back)
				r->cbs.device_back(r->cbs.arg, r->addr, r->port);
			return;
		}
		snprintf(why, sizeof(why), "lcore start: %s", strerror(-rc));
	}
	release_device(r, "RDMA re-open failed");
	ING_LOG_RL(ING_LOG_WARN, COMP, "RDMA re-open: %s (next try in %u s)", why,
		   (unsigned)(REOPEN_NS / 1000000000ull));
}

static int cm_drain(struct ing_rdma *r)
{
	int k;

	for (k = 0; k < CM_EVENTS_PER_WAKE; k++) {
		struct rdma_cm_event *ev;
		uint8_t priv[64];
		size_t privlen = 0;
		unsigned resp_res = 0;

		if (rdma_get_cm_event(r->ech, &ev)) {
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				ING_LOG_RL(ING_LOG_ERR, COMP, "rdma_get_cm_event: %s", strerror(errno));
			return k;
		}
		r->st.cm_events++;
		enum rdma_cm_event_type type = ev->event;
		struct rdma_cm_id *id = ev->id;
		int status = ev->status;
		if (type == RDMA_CM_EVENT_CONNECT_REQUEST) {
			privlen = ev->param.conn.private_data_len;
			if (privlen > sizeof(priv))
				privlen = sizeof(priv);
			if (ev->param.conn.private_data)
				memcpy(priv, ev->param.conn.private_data, privlen);
			else
				privlen = 0;
			/* already from our side: initiator_depth = the READs we may issue = the
			 * producer's responder resources */
			resp_res = ev->param.conn.initiator_depth;
		}
		rdma_ack_cm_event(ev);

		struct rconn *c = (id && id != r->listen_id && !r->device_lost) ? id->context : NULL;
		if (c == (void *)r)
			c = NULL;
		switch (type) {
		case RDMA_CM_EVENT_CONNECT_REQUEST:
			on_connect_request(r, id, priv, privlen, resp_res);
			break;
		case RDMA_CM_EVENT_ESTABLISHED:
			if (!c)
				break;
			c->state = c->state == RC_DOWN ? RC_DOWN : RC_ESTABLISHED;
			c->was_up = true;
			ING_LOGC(ING_LOG_INFO, COMP, (&(struct ing_log_ctx){ .session = c->session_id }),
				 "qp 0x%x session %llu: established", c->qp_num,
				 (unsigned long long)c->session_id);
			if (r->cbs.conn_state)
				r->cbs.conn_state(r->cbs.arg, c->session_id, true);
			break;
		case RDMA_CM_EVENT_DISCONNECTED:
		case RDMA_CM_EVENT_CONNECT_ERROR:
		case RDMA_CM_EVENT_UNREACHABLE:
		case RDMA_CM_EVENT_REJECTED:
			if (!c)
				break;
			if (type != RDMA_CM_EVENT_DISCONNECTED) {
				ING_LOGC(ING_LOG_WARN, COMP, (&(struct ing_log_ctx){ .session = c->session_id }),
					 "qp 0x%x session %llu: %s (status %d)", c->qp_num,
					 (unsigned long long)c->session_id, rdma_event_str(type), status);
				r->st.conn_errors++;
			}
			conn_down(r, c, rdma_event_str(type));
			c->cm_gone = true;
			conn_maybe_destroy(r, c);
			break;
		case RDMA_CM_EVENT_TIMEWAIT_EXIT:
			if (c) {
				c->cm_gone = true;
				conn_maybe_destroy(r, c);
			}
			break;
		case RDMA_CM_EVENT_DEVICE_REMOVAL:
			on_device_removal(r);
			break;
		case RDMA_CM_EVENT_ADDR_CHANGE:
			ING_WARN(COMP, "address change on the RDMA listener (%s)", r->addr);
			break;
		default:
			ING_INFO(COMP, "unexpected CM event %s (status %d) on %s", rdma_event_str(type),
				 status, c ? "a connection" : "the listener");
			break;
		}
	}
	return k;
}

void ing_rdma_tick(struct ing_rdma *r)
{
	uint64_t now = ing_now_ns();

	if (!r)
		return;
	if (r->device_lost && now >= r->reopen_at_ns)
		try_reopen(r);
	for (struct rconn *c = r->conns, *nx; c; c = nx) {
		nx = c->next;
		if (c->destroy_deadline_ns && now >= c->destroy_deadline_ns) {
			c->destroy_deadline_ns = 0;
			conn_destroy_timeout(c);
		}
	}
}

void ing_rdma_set_cbs(struct ing_rdma *r, const struct ing_rdma_cbs *cbs)
{
	if (r && cbs)
		r->cbs = *cbs;
}

int ing_rdma_cm_fd(const struct ing_rdma *r)
{
	return r && r->ech ? r->ech->fd : -1;
}

int ing_rdma_cm_dispatch(struct ing_rdma *r)
{
	return r ? cm_drain(r) : 0;
}

void ing_rdma_conn_event(struct ing_rdma *r, const struct ing_msg *m)
{
	struct rconn *c = r ? conn_by_qp(r, m->val) : NULL;

	switch (m->kind) {
	case ING_EV_CONN_ERROR:
		if (!r)
			return;
		r->st.conn_errors++;
		if (c)
			conn_down(r, c, m->u64 ? ibv_wc_status_str((enum ibv_wc_status)m->u64) : "lcore error");
		break;
	case ING_EV_CONN_RELEASED:
		if (c) {
			c->released = true;
			conn_maybe_destroy(r, c);
		}
		break;
	default:
		break;
	}
}

/* ---------------------------------------------------------------- set-up */

static int bind_addr(struct ing_rdma *r, struct rdma_cm_id *id, const char *host, uint16_t port)
{
	struct addrinfo hints = { .ai_flags = AI_NUMERICHOST | AI_PASSIVE, .ai_socktype = SOCK_STREAM };
	struct addrinfo *ai = NULL;
	char ps[8];
	int rc;

	snprintf(ps, sizeof(ps), "%u", port);
	rc = getaddrinfo(host, ps, &hints, &ai);
	if (rc)
		return -EINVAL;
	rc = rdma_bind_addr(id, ai->ai_addr) ? -errno : 0;
	freeaddrinfo(ai);
	(void)r;
	return rc;
}

static bool dev_ok(const struct ing_rdma *r, const struct rdma_cm_id *id)
{
	return id->verbs && (!r->o.device || !strcmp(ibv_get_device_name(id->verbs->device), r->o.device));
}

/* Find a local address that binds to an RDMA device (rxe on a dummy netdev, a RoCE NIC). */
static int bind_auto(struct ing_rdma *r, char *why, size_t whylen)
{
	struct ifaddrs *ifa = NULL;

	if (getifaddrs(&ifa)) {
		snprintf(why, whylen, "getifaddrs: %s", strerror(errno));
		return -errno;
	}
	for (struct ifaddrs *i = ifa; i; i = i->ifa_next) {
		char host[INET6_ADDRSTRLEN];
		if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || (i->ifa_flags & IFF_LOOPBACK) ||
		    !(i->ifa_flags & IFF_UP))
			continue;
		inet_ntop(AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, host, sizeof(host));
		if (bind_addr(r, r->listen_id, host, r->o.port) == 0 && dev_ok(r, r->listen_id)) {
			snprintf(r->addr, sizeof(r->addr), "%s", host);
			freeifaddrs(ifa);
			return 0;
		}
		/* a bound id cannot be re-bound: start over with a fresh one */
		rdma_destroy_id(r->listen_id);
		r->listen_id = NULL;
		if (rdma_create_id(r->ech, &r->listen_id, r, RDMA_PS_TCP)) {
			snprintf(why, whylen, "rdma_create_id: %s", strerror(errno));
			freeifaddrs(ifa);
			return -errno;
		}
	}
	freeifaddrs(ifa);
	snprintf(why, whylen, "no local IPv4 address is on an RDMA device%s%s",
		 r->o.device ? " named " : "", r->o.device ? r->o.device : "");
	return -ENODEV;
}

/* The listening id, bound to the configured address (or the first local address on an
 * RDMA device), its device's attributes and the largest message. 0 or -1 with why. */
static int listener_open(struct ing_rdma *r, char *why, size_t whylen)
{
	if (rdma_create_id(r->ech, &r->listen_id, r, RDMA_PS_TCP)) {
		snprintf(why, whylen, "rdma_create_id: %s", strerror(errno));
		return -1;
	}
	if (r->o.addr && *r->o.addr) {
		int rc = bind_addr(r, r->listen_id, r->o.addr, r->o.port);
		if (rc) {
			snprintf(why, whylen, "rdma_bind_addr(%s:%u): %s", r->o.addr, r->o.port, strerror(-rc));
			return -1;
		}
		if (!dev_ok(r, r->listen_id)) {
			snprintf(why, whylen, "address %s is not on an RDMA device%s%s", r->o.addr,
				 r->o.device ? " named " : "", r->o.device ? r->o.device : "");
			return -1;
		}
		snprintf(r->addr, sizeof(r->addr), "%s", r->o.addr);
	} else if (bind_auto(r, why, whylen)) {
		return -1;
	}
	if (rdma_listen(r->listen_id, 64)) {
		snprintf(why, whylen, "rdma_listen(%s:%u): %s", r->addr, r->o.port, strerror(errno));
		return -1;
	}
	r->port = ntohs(rdma_get_src_port(r->listen_id));
	r->ctx = r->listen_id->verbs;
	snprintf(r->devname, sizeof(r->devname), "%s", ibv_get_device_name(r->ctx->device));
	if (ibv_query_device(r->ctx, &r->dattr)) {
		snprintf(why, whylen, "ibv_query_device(%s) failed", r->devname);
		return -1;
	}
	struct ibv_port_attr pa;
	r->max_msg_sz = 0;
	if (ibv_query_port(r->ctx, r->listen_id->port_num ? r->listen_id->port_num : 1, &pa) == 0)
		r->max_msg_sz = pa.max_msg_sz;
	return 0;
}

/*
 * Push (RDMA WRITE): with type-2 memory windows every grant opens exactly its slot, so the
 * pool MR only gets MW_BIND; without them the pool MR itself takes remote writes (any
 * connected producer of a push session can write anywhere in the pool: ingest-doctor
 * warns). --rdma-write decides r->push_mode; returns the pool MR's access flags.
 */
static int push_mode_pick(struct ing_rdma *r)
{
	bool mw2 = ing_rdma_device_has_mw2(r->ctx);
	int access = IBV_ACCESS_LOCAL_WRITE;

	switch (r->o.push) {
	case ING_RDMA_PUSH_AUTO:
		r->push_mode = mw2 ? 1 : 2;
		break;
	case ING_RDMA_PUSH_MW:
		r->push_mode = mw2 ? 1 : 0;
		break;
	case ING_RDMA_PUSH_MR:
		r->push_mode = 2;
		break;
	default:
		r->push_mode = 0;
		break;
	}
	if (r->push_mode == 1)
		access |= IBV_ACCESS_MW_BIND;
	else if (r->push_mode == 2)
		access |= IBV_ACCESS_REMOTE_WRITE;
	if (r->o.push != ING_RDMA_PUSH_OFF && !mw2)
		ING_WARN(COMP, "device %s has no type-2 memory windows: %s", r->devname,
			 r->push_mode ? "RDMA WRITE push grants carry the pool MR's rkey (writes are not bounded to the granted slot)"
				      : "RDMA WRITE push is off (--rdma-write mw)");
	return access;
}

/* The pool's regions, once per PD: slots are addressed by lkey of their class. */
static int pool_register(struct ing_rdma *r, int access, char *why, size_t whylen)
{
	r->nmr = ing_pool_nclasses(r->pool);
	for (unsigned c = 0; c < r->nmr; c++) {
		void *base;
		size_t len;
		if (ing_pool_region(r->pool, c, &base, &len)) {
			snprintf(why, whylen, "pool region %u missing", c);
			return -1;
		}
		r->mrs[c] = ibv_reg_mr(r->pd, base, len, access);
		if (!r->mrs[c]) {
			snprintf(why, whylen, "ibv_reg_mr(pool class %u, %zu bytes): %s (memlock limit?)", c,
				 len, strerror(errno));
			return -1;
		}
		r->lkeys[c] = r->mrs[c]->lkey;
	}
	return 0;
}

/* Each lcore's completion channel, CQ and poller (with its mailbox), push set up on it. */
static int lcores_open(struct ing_rdma *r, char *why, size_t whylen)
{
	r->nl = r->o.nlcores;
	for (unsigned i = 0; i < r->nl; i++) {
		struct rdma_engine_lcore *el = &r->lcs[i];
		struct ing_rdma_lcore_opts lo = r->o.lcore;
		el->r = r;
		el->idx = i;
		el->lcore_id = r->o.lcore_ids[i];
		el->ch = ibv_create_comp_channel(r->ctx);
		if (!el->ch) {
			snprintf(why, whylen, "ibv_create_comp_channel: %s", strerror(errno));
			return -1;
		}
		if (fcntl(el->ch->fd, F_SETFL, fcntl(el->ch->fd, F_GETFL) | O_NONBLOCK)) {
			snprintf(why, whylen, "O_NONBLOCK on the completion channel: %s", strerror(errno));
			return -1;
		}
		int cqe = (int)r->o.cq_size;
		if (cqe > r->dattr.max_cqe)
			cqe = r->dattr.max_cqe;
		el->cq = ibv_create_cq(r->ctx, cqe, el, el->ch, 0);
		if (!el->cq) {
			snprintf(why, whylen, "ibv_create_cq(%d): %s", cqe, strerror(errno));
			return -1;
		}
		lo.lcore_id = el->lcore_id;
		if (!lo.max_msg_sz || (r->max_msg_sz && lo.max_msg_sz > r->max_msg_sz))
			lo.max_msg_sz = r->max_msg_sz;
		if (!lo.ops)
			lo.ops = &ing_rdma_verbs_ops;
		struct ing_rdma_lcore_io io = {
			.ctl = r->ctl,
			.arg = el,
			.deliver = io_deliver,
			.mbox_size = r->o.job_ring_size,
		};
		el->lc = ing_rdma_lcore_create(&lo, el->cq, el->ch, el->ch->fd, &io, r->lkeys, r->nmr);
		if (!el->lc) {
			snprintf(why, whylen, "lcore poller %u", el->lcore_id);
			return -1;
		}
		/* one window per pool slot: a grant holds a slot, so they never run out */
		if (r->push_mode &&
		    ing_rdma_lcore_set_push(el->lc, r->pd, r->mrs, r->nmr,
					    r->push_mode == 1 ? ing_pool_total(r->pool) : 0)) {
			snprintf(why, whylen, "RDMA WRITE push set-up on lcore %u failed (--rdma-write off to run without it)",
				 el->lcore_id);
			return -1;
		}
	}
	return 0;
}

/*
 * Everything on the device: the listening id (bound to the configured address, or the first
 * local address on an RDMA device), its verbs context, the PD, the pool's MRs and each
 * lcore's channel, CQ and poller. Used at start and again after DEVICE_REMOVAL
 * (timers: reopen); on failure the caller releases what was made (release_device).
 */
static int device_open(struct ing_rdma *r, char *why, size_t whylen)
{
	if (listener_open(r, why, whylen))
		return -1;
	r->pd = ibv_alloc_pd(r->ctx);
	if (!r->pd) {
		snprintf(why, whylen, "ibv_alloc_pd(%s) failed", r->devname);
		return -1;
	}
	int access = push_mode_pick(r);
	if (pool_register(r, access, why, whylen) || lcores_open(r, why, whylen))
		return -1;
	return 0;
}

struct ing_rdma *ing_rdma_create(const struct ing_rdma_opts *o, struct ing_pool *pool,
				 struct ing_persist *persist, struct ing_mbox *ctl,
				 const struct ing_rdma_cbs *cbs, char *why, size_t whylen)
{
	struct ing_rdma *r;
	char wbuf[192];
	int ndev = 0;

	if (!why) {
		why = wbuf;
		whylen = sizeof(wbuf);
	}
	why[0] = 0;
	if (!o || !pool || !ctl || o->nlcores > ING_RDMA_MAX_LCORES) {
		snprintf(why, whylen, "bad arguments");
		ING_ERR(COMP, "rdma create: %s", why);
		return NULL;
	}
	/* hugepage-backed MRs and fork: must be set before libibverbs initialises */
	setenv("RDMAV_HUGEPAGES_SAFE", "1", 0);
	struct ibv_device **dl = ibv_get_device_list(&ndev);
	if (dl)
		ibv_free_device_list(dl);
	if (ndev <= 0) {
		snprintf(why, whylen, "no RDMA device (ibv_get_device_list found none)");
		ING_WARN(COMP, "RDMA not available: %s", why);
		return NULL;
	}
	r = calloc(1, sizeof(*r));
	if (!r) {
		snprintf(why, whylen, "out of memory");
		return NULL;
	}
	r->o = *o;
	if (!r->o.nlcores) {
		/* every EAL worker lcore polls; none (e.g. -l 0): one pinned-by-nobody thread */
		unsigned id;
		r->o.use_eal = true;
		RTE_LCORE_FOREACH_WORKER(id) {
			if (r->o.nlcores == ING_RDMA_MAX_LCORES)
				break;
			r->o.lcore_ids[r->o.nlcores++] = id;
		}
		if (!r->o.nlcores) {
			r->o.use_eal = false;
			r->o.nlcores = 1;
			ING_WARN(COMP, "no EAL worker lcore: the RDMA poller runs on an unpinned thread");
		}
	}
	r->pool = pool;
	r->persist = persist;
	r->ctl = ctl;
	if (cbs)
		r->cbs = *cbs;
	if (!r->o.sq_depth)
		r->o.sq_depth = ING_RDMA_DEFAULT_SQ_DEPTH;
	if (!r->o.cq_size)
		r->o.cq_size = ING_RDMA_DEFAULT_CQ_SIZE;
	if (!r->o.job_ring_size)
		r->o.job_ring_size = ING_DEFAULT_RING_SIZE;
	if (!r->o.rd_atom)
		r->o.rd_atom = ING_RDMA_DEFAULT_RD_ATOM;

	r->ech = rdma_create_event_channel();
	if (!r->ech) {
		snprintf(why, whylen, "rdma_create_event_channel: %s (rdma_ucm loaded?)", strerror(errno));
		goto fail;
	}
	if (fcntl(r->ech->fd, F_SETFL, fcntl(r->ech->fd, F_GETFL) | O_NONBLOCK)) {
		snprintf(why, whylen, "O_NONBLOCK on the CM channel: %s", strerror(errno));
		goto fail;
	}
	if (device_open(r, why, whylen))
		goto fail;
	r->o.port = r->port; /* a re-open after DEVICE_REMOVAL listens where producers were told */
	ING_INFO(COMP, "RDMA listener on %s:%u (device %s, max_qp_rd_atom %d, max_qp_init_rd_atom %d, max_msg_sz %u, %u pool region(s) registered, %u poller(s), push %s)",
		 r->addr, r->port, r->devname, r->dattr.max_qp_rd_atom, r->dattr.max_qp_init_rd_atom,
		 r->max_msg_sz, r->nmr, r->nl,
		 r->push_mode == 1 ? "memory windows" : r->push_mode == 2 ? "pool MR" : "off");
	return r;
fail:
	ING_WARN(COMP, "RDMA not available: %s", why);
	ing_rdma_destroy(r);
	return NULL;
}

static void *lcore_thread(void *arg)
{
	struct rdma_engine_lcore *el = arg;
	char name[16];

	snprintf(name, sizeof(name), "ing-rdma%u", el->idx);
	pthread_setname_np(pthread_self(), name);
	(void)ing_rdma_lcore_run(el->lc);
	return NULL;
}

int ing_rdma_start(struct ing_rdma *r)
{
	if (!r)
		return -EINVAL;
	for (unsigned i = 0; i < r->nl; i++) {
		struct rdma_engine_lcore *el = &r->lcs[i];
		int rc;
		if (el->launched)
			continue;
		if (r->o.use_eal) {
			if (el->lcore_id >= RTE_MAX_LCORE || !rte_lcore_is_enabled(el->lcore_id) ||
			    el->lcore_id == rte_get_main_lcore()) {
				ING_ERR(COMP, "lcore %u is not an enabled EAL worker lcore", el->lcore_id);
				return -EINVAL;
			}
			rc = rte_eal_remote_launch(ing_rdma_lcore_run, el->lc, el->lcore_id);
			if (rc) {
				ING_ERR(COMP, "rte_eal_remote_launch(lcore %u): %s", el->lcore_id, strerror(-rc));
				return rc;
			}
		} else {
			rc = pthread_create(&el->th, NULL, lcore_thread, el);
			if (rc) {
				ING_ERR(COMP, "pthread_create: %s", strerror(rc));
				return -rc;
			}
		}
		el->launched = true;
	}
	return 0;
}

/*
 * Let go of everything on the device (destroy, or DEVICE_REMOVAL: the kernel waits for
 * every id/QP/MR/PD/CQ of a removed device to be released): stop the pollers (bounded by
 * sleep_ms), destroy the connections, fail the frames the lcores held (back to control),
 * free the verbs objects. The event channel and the shell stay.
 */
static void release_device(struct ing_rdma *r, const char *why)
{
	for (unsigned i = 0; i < r->nl; i++)
		ing_rdma_lcore_stop(r->lcs[i].lc);
	for (unsigned i = 0; i < r->nl; i++) {
		struct rdma_engine_lcore *el = &r->lcs[i];
		if (!el->launched)
			continue;
		if (r->o.use_eal)
			rte_eal_wait_lcore(el->lcore_id); /* bounded: the loop sleeps <= sleep_ms */
		else
			pthread_join(el->th, NULL);
		el->launched = false;
	}
	while (r->conns) {
		struct rconn *c = r->conns;
		if (c->state != RC_DOWN && c->id)
			rdma_disconnect(c->id);
		conn_unlink_free(r, c);
	}
	r->st.conns_active = 0;
	for (unsigned i = 0; i < ING_RDMA_MAX_LCORES; i++) {
		struct rdma_engine_lcore *el = &r->lcs[i];
		if (el->lc) { /* its counters go on in the engine's (totals never go back) */
			struct ing_rdma_lcore_stats ls;
			ing_rdma_lcore_get_stats(el->lc, &ls);
			add_lcore_stats(&r->st, &ls);
		}
		/* the frames it held and the jobs in its mailbox go back to control, failed */
		ing_rdma_lcore_destroy_why(el->lc, why);
		el->lc = NULL;
		if (el->cq)
			ibv_destroy_cq(el->cq);
		el->cq = NULL;
		if (el->ch)
			ibv_destroy_comp_channel(el->ch);
		el->ch = NULL;
	}
	for (unsigned c = 0; c < ING_POOL_MAX_CLASSES; c++) {
		if (r->mrs[c])
			ibv_dereg_mr(r->mrs[c]);
		r->mrs[c] = NULL;
	}
	if (r->pd)
		ibv_dealloc_pd(r->pd);
	r->pd = NULL;
	if (r->listen_id)
		rdma_destroy_id(r->listen_id);
	r->listen_id = NULL;
	r->ctx = NULL;
}

void ing_rdma_destroy(struct ing_rdma *r)
{
	if (!r)
		return;
	release_device(r, "ingest node shutting down");
	if (r->ech)
		rdma_destroy_event_channel(r->ech);
	free(r);
}

const char *ing_rdma_addr(const struct ing_rdma *r)
{
	return r ? r->addr : "";
}

uint16_t ing_rdma_port(const struct ing_rdma *r)
{
	return r ? r->port : 0;
}

const char *ing_rdma_device(const struct ing_rdma *r)
{
	return r ? r->devname : "";
}

bool ing_rdma_session_connected(const struct ing_rdma *r, uint64_t session_id)
{
	struct rconn *c = r ? conn_by_session((struct ing_rdma *)r, session_id, true) : NULL;

	return c && c->state == RC_ESTABLISHED;
}

int ing_rdma_submit(struct ing_rdma *r, struct ing_frame *f)
{
	/* a broken connection still takes jobs: the lcore parks them for the reconnect */
	struct rconn *c = r && !r->device_lost ? conn_by_session(r, f->session_id, false) : NULL;

	if (!c)
		return -ENOTCONN;
	f->qp_num = c->qp_num;
	f->transport = ING_XPORT_RDMA;
	return ing_rdma_lcore_submit(r->lcs[c->lcore].lc, f);
}

unsigned ing_rdma_nlcores(const struct ing_rdma *r)
{
	return r ? r->nl : 0;
}

int ing_rdma_lcore_stats(const struct ing_rdma *r, unsigned i, unsigned *lcore_id,
			 struct ing_rdma_lcore_stats *s)
{
	if (!r || i >= r->nl || !r->lcs[i].lc)
		return -ENOENT;
	*lcore_id = r->lcs[i].lcore_id;
	ing_rdma_lcore_get_stats(r->lcs[i].lc, s);
	return 0;
}

static void add_lcore_stats(struct ing_rdma_stats *s, const struct ing_rdma_lcore_stats *ls)
{
	s->reads_posted += ls->reads_posted;
	s->bytes_read += ls->bytes_posted;
	s->frames_ok += ls->frames_ok;
	s->frames_failed += ls->frames_failed;
	s->wc_errors += ls->wc_errors;
	s->busy_ns += ls->busy_ns;
	s->polls += ls->polls;
	s->idle_polls += ls->idle_polls;
	s->sleeps += ls->sleeps;
	s->completions += ls->completions;
	s->push_grants += ls->push_grants;
	s->push_frames_ok += ls->push_frames_ok;
	s->push_grant_errors += ls->push_grant_errors;
}

void ing_rdma_get_stats(const struct ing_rdma *r, struct ing_rdma_stats *s)
{
	memset(s, 0, sizeof(*s));
	if (!r)
		return;
	*s = r->st; /* with the counts of pollers released by a device removal */
	for (unsigned i = 0; i < r->nl; i++) {
		struct ing_rdma_lcore_stats ls;
		if (!r->lcs[i].lc)
			continue;
		ing_rdma_lcore_get_stats(r->lcs[i].lc, &ls);
		add_lcore_stats(s, &ls);
	}
}

int ing_rdma_push_mode(const struct ing_rdma *r)
{
	return r && !r->device_lost ? r->push_mode : 0;
}
