/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rdma_cm.c - the RDMA engine on the ingest node: one rail per RDMA device (its device
 * context, PD and registrations of its pool region, its rdma_cm listener, one CQ/channel/
 * poller with its mailbox per lcore of the rail), and the one rdma_cm event channel whose
 * fd, timer and connection events the control thread's loop serves for every rail.
 *
 * Connection life (control thread):
 *   CONNECT_REQUEST on a rail's listener (session id in private data, checked by the
 *   service) -> RC QP on the CQ of one of that rail's lcores -> rdma_accept -> attach to the
 *   lcore -> ESTABLISHED -> DISCONNECTED / CONNECT_ERROR / lcore CONN_ERROR -> rdma_disconnect
 *   (QP to ERROR, WRs flush) + detach -> lcore CONN_RELEASED + CM gone (or a bounded
 *   timeout) -> destroy.
 * Every CM event is acked before it is acted on, so destroying an id never waits on an
 * unacked event of our own.
 *
 * Rails share nothing on the data path: a rail's lcores poll only their own CQs, its QPs
 * live in its PD, its MRs cover its own pool region. A device removal takes its rail down
 * alone; the others keep serving, and the rail is set up again when its device is back.
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
#include <time.h>
#include <unistd.h>

#include <rdma/rdma_cma.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_memory.h>   /* SOCKET_ID_ANY */

#define COMP "rdma-cm"
#define CM_EVENTS_PER_WAKE 64
#define CONN_DESTROY_TIMEOUT_MS 10000
#define REOPEN_NS 1000000000ull   /* a rail down: look for its device once a second */

struct rdma_engine_lcore {
	struct ing_rdma *r;
	unsigned idx;
	unsigned rail;
	unsigned lcore_id;
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq;
	struct ing_rdma_lcore *lc;
	pthread_t th;
	bool launched;
	int numa_node;       /* of its cpu, -1 unknown */
	uint64_t sessions;   /* sessions placed on it since start (ing_rdma_lcore_pick_on) */
};

enum rconn_state { RC_ACCEPTED = 1, RC_ESTABLISHED, RC_DOWN };

struct rconn {
	struct ing_rdma *r;
	struct rdma_cm_id *id;
	uint64_t session_id;
	uint32_t qp_num;
	unsigned rail;
	unsigned lcore;
	unsigned rd_atom;
	enum rconn_state state;
	bool released;     /* the lcore no longer touches the QP */
	bool cm_gone;      /* DISCONNECTED (or equivalent) seen */
	bool was_up;
	bool disc_held;    /* its rail's link was down: no DREQ sent yet (rail_link sends it) */
	uint64_t destroy_deadline_ns; /* 0: none */
	struct rconn *next;
};

struct rdma_rail {
	struct ing_rdma *r;
	unsigned idx;
	/* what the options ask for */
	char want_dev[IBV_SYSFS_NAME_MAX];   /* "" any device */
	char want_addr[INET6_ADDRSTRLEN];    /* "" the first address on the device */
	uint16_t want_port;                  /* after the first open: where producers were told */
	int plan_node;                       /* -1: the device's */
	unsigned region;
	unsigned first_lc, nl;               /* its pollers: r->lcs[first_lc ..] */
	/* set up by rail_open, released by rail_release */
	struct rdma_cm_id *listen_id;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_device_attr dattr;
	uint32_t max_msg_sz;
	struct ibv_mr *mrs[ING_POOL_MAX_CLASSES];
	uint32_t lkeys[ING_POOL_MAX_CLASSES];
	unsigned nmr;
	/* striping (o.stripe): the other regions too, with the access of its own region's
	 * (local write, and MW bind or remote write for push), so a part of a frame whose slot
	 * is on another node can land there (xlkeys[region][class]; its own region's entries
	 * stay 0: lkeys above) */
	struct ibv_mr *xmrs[ING_POOL_MAX_REGIONS][ING_POOL_MAX_CLASSES];
	uint32_t xlkeys[ING_POOL_MAX_REGIONS][ING_POOL_MAX_CLASSES];
	int push_mode;       /* 0 off, 1 memory windows, 2 pool MR */
	bool up;             /* its objects are open (rail_open .. rail_release) */
	bool link_down;      /* open, but its port is not ACTIVE (PORT_ERR, ibv_query_port) */
	bool opened_once;
	uint8_t port_num;    /* its listener's port on the device */
	uint32_t link_mbps;  /* active speed x width, 0 unknown */
	uint64_t downs;      /* times it stopped serving since start */
	uint64_t reopen_at_ns;
	uint64_t down_since_ns;
	char why[160];
	struct ing_rdma_lcore_stats gone;   /* counters of its pollers a release destroyed */
	uint64_t striped_in;                /* striped frames whose home it was, complete */
	char addr[INET6_ADDRSTRLEN];
	uint16_t port;
	char devname[IBV_SYSFS_NAME_MAX];
	int dev_node;        /* the device's (sysfs), -1 unknown (rxe: no PCI device) */
	bool has_net4;       /* addr is IPv4 with a known prefix: its subnet */
	uint32_t net4, mask4;
	uint64_t removals, reopens;
};

struct ing_rdma {
	struct ing_rdma_opts o;
	struct ing_pool *pool;
	struct ing_persist *persist;
	struct ing_mbox *ctl;     /* the control thread's mailbox */
	struct ing_rdma_cbs cbs;
	struct rdma_event_channel *ech;
	unsigned nrails;
	struct rdma_rail rails[ING_RDMA_MAX_RAILS];
	unsigned nl;
	struct rdma_engine_lcore lcs[ING_RDMA_MAX_LCORES];
	struct rconn *conns;
	struct ing_rdma_sticky sticky;   /* sessions whose frames an lcore may still hold */
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

/* the name a rail goes by in logs: its device once known, else what was asked */
static const char *rail_name(const struct rdma_rail *rl)
{
	return rl->devname[0] ? rl->devname : rl->want_dev[0] ? rl->want_dev
	     : rl->want_addr[0] ? rl->want_addr : "(any device)";
}

/* a rail producers may use: open, and its link ACTIVE */
static bool rail_serving(const struct rdma_rail *rl)
{
	return rl->up && !rl->link_down;
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

static struct rconn *conn_by_session(const struct ing_rdma *r, uint64_t session_id, bool live_only)
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

/* Is connection c's rail link down? Then no CM message may go out through its port: the
 * disconnect request (rdma_disconnect, or rdma_destroy_id of a connected id) waits for the
 * link (rail_link). Soft-RoCE (rxe, Linux 6.1) puts the port's GSI QP (QP1, every CM
 * message of the device) in an error state it never leaves when a send on it fails because
 * the link is down: no connection on that device is ever made again, for any process,
 * until the device is removed and added. A real NIC drops the message and retries. */
static bool conn_link_down(const struct ing_rdma *r, const struct rconn *c)
{
	if (c->rail >= r->nrails || !r->rails[c->rail].up)
		return false;
	const struct rdma_rail *rl = &r->rails[c->rail];
	struct ibv_port_attr pa;
	/* asked now: a QP's error on a link just lost comes before the port's event (1 s tick) */
	return rl->link_down ||
	       (ibv_query_port(rl->ctx, rl->port_num, &pa) == 0 && pa.state != IBV_PORT_ACTIVE);
}

static void conn_maybe_destroy(struct ing_rdma *r, struct rconn *c)
{
	if (c->disc_held)
		return;   /* rail_link destroys it once the link is back */
	if (c->released && c->cm_gone) {
		ING_DBG(COMP, "qp 0x%x session %llu: destroyed", c->qp_num,
			(unsigned long long)c->session_id);
		/* its lcore parked the session's frames when it released the QP (park_ms): a
		 * reconnect within that time must land there */
		uint64_t now = ing_now_ns();
		ing_rdma_sticky_keep(&r->sticky, c->session_id, c->lcore,
				     now + ((uint64_t)r->o.lcore.park_ms + r->o.lcore.drain_ms + 1000) * 1000000ull,
				     now);
		conn_unlink_free(r, c);
	}
}

/* A connection whose disconnect waited for its link: the link is back, so the DREQ now,
 * then its end. */
static void conn_release_held(struct ing_rdma *r, struct rconn *c)
{
	c->disc_held = false;
	if (rdma_disconnect(c->id) && errno != EINVAL)
		ING_DBG(COMP, "qp 0x%x: rdma_disconnect: %s", c->qp_num, strerror(errno));
	c->cm_gone = true;
	conn_maybe_destroy(r, c);
}

/* The rail's NUMA node as the placement rule sees it: where it was placed, else its
 * device's. */
static int rail_node(const struct rdma_rail *rl)
{
	return rl->plan_node >= 0 ? rl->plan_node : rl->dev_node;
}

/*
 * The lcore of a session connecting on rail rl: where it already is on this rail (an
 * earlier connection not yet gone, or frames its lcore may still hold), else the
 * placement rule (rdma_place.c) over the rail's lcores. *sticky: it kept its lcore.
 */
static unsigned place_session(struct ing_rdma *r, struct rdma_rail *rl, uint64_t sid, bool *sticky)
{
	struct rconn *old = conn_by_session(r, sid, false);
	int li = old ? (int)old->lcore : ing_rdma_sticky_find(&r->sticky, sid, ing_now_ns());

	*sticky = li >= 0 && (unsigned)li < r->nl && r->lcs[li].rail == rl->idx;
	if (*sticky)
		return (unsigned)li;
	struct ing_rdma_lcore_load l[ING_RDMA_MAX_LCORES];
	for (unsigned i = 0; i < r->nl; i++)
		l[i] = (struct ing_rdma_lcore_load){ .numa_node = r->lcs[i].numa_node,
						     .sessions = r->lcs[i].sessions,
						     .rail = r->lcs[i].rail };
	for (struct rconn *c = r->conns; c; c = c->next)
		if (c->state != RC_DOWN && c->lcore < r->nl)
			l[c->lcore].conns++;
	li = ing_rdma_lcore_pick_on(l, r->nl, (int)rl->idx, rail_node(rl));
	return li < 0 ? rl->first_lc : (unsigned)li;
}

static void conn_destroy_timeout(struct rconn *c)
{
	if (c->disc_held && c->released)
		return;   /* waits for its rail's link (conn_link_down) */
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
	bool link_down = conn_link_down(r, c);
	if (link_down)
		c->disc_held = true;   /* no DREQ into a port that is down: rail_link sends it */
	else if (rdma_disconnect(c->id) && errno != EINVAL)
		ING_DBG(COMP, "qp 0x%x: rdma_disconnect: %s", c->qp_num, strerror(errno));
	if (c->id->qp) {
		/* rdma_disconnect moves the QP to ERROR when connected; make sure in all states */
		struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };
		if (ibv_modify_qp(c->id->qp, &a, IBV_QP_STATE))
			ING_DBG(COMP, "qp 0x%x: modify to ERR failed", c->qp_num);
	}
	if (ing_rdma_lcore_detach(r->lcs[c->lcore].lc, c->qp_num))
		ING_ERR(COMP, "qp 0x%x: lcore mailbox full; detach lost", c->qp_num);
	/* lost with its link down: the producer moves its frames over another rail, so the
	 * lcore parks them for no time (the moved copy is admitted at once, not after park_ms) */
	else if (link_down && ing_rdma_lcore_unpark(r->lcs[c->lcore].lc, c->session_id))
		ING_ERR(COMP, "qp 0x%x: lcore mailbox full; unpark lost (its frames wait park_ms)", c->qp_num);
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

static void on_connect_request(struct ing_rdma *r, struct rdma_rail *rl, struct rdma_cm_id *id,
			       const void *priv, size_t privlen, unsigned remote_resp_res)
{
	uint64_t sid = 0;
	char why[256];
	int rc;

	if (!rl->up) {
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
	if (id->verbs != rl->ctx) {
		reject(id, "request arrived on another RDMA device than the listener's", sid, r);
		return;
	}
	/* a session negotiated for one rail connects on that rail's listener: its frames take
	 * that rail's region, and a producer that opens a session per rail would otherwise put
	 * two of its sessions on one rail without knowing it */
	int want = r->cbs.session_rail ? r->cbs.session_rail(r->cbs.arg, sid) : -1;
	if (want >= 0 && (unsigned)want != rl->idx) {
		snprintf(why, sizeof(why), "session negotiated rail %d (%s), its connection came in on "
			 "rail %u (%s) at %s:%u: connect to the rail Negotiate named (rdmaAddr/rdmaPort)",
			 want, (unsigned)want < r->nrails ? rail_name(&r->rails[want]) : "?", rl->idx,
			 rl->devname, rl->addr, rl->port);
		reject(id, why, sid, r);
		return;
	}
	if (!remote_resp_res) {
		reject(id, "producer offers 0 responder resources (cannot serve READs)", sid, r);
		return;
	}
	/* a reconnect of a session whose old connection we have not seen fail yet */
	struct rconn *old = conn_by_session(r, sid, true);
	if (old)
		conn_down(r, old, old->rail == rl->idx ? "superseded by a new connection of the same session"
						       : "superseded by a connection of the same session "
							 "on another rail");

	bool sticky = false;
	unsigned li = place_session(r, rl, sid, &sticky);
	struct rdma_engine_lcore *el = &r->lcs[li];
	struct ibv_qp_init_attr qa = {
		.send_cq = el->cq,
		.recv_cq = el->cq,
		.cap = { .max_send_wr = r->o.sq_depth,
			 .max_recv_wr = !rl->push_mode ? 1 : r->o.lcore.recv_depth ? r->o.lcore.recv_depth
								     : ING_RDMA_DEFAULT_RECV_DEPTH,
			 .max_send_sge = 1,
			 .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
		.sq_sig_all = 0,
	};
	if (rdma_create_qp(id, rl->pd, &qa)) {
		snprintf(why, sizeof(why), "rdma_create_qp: %s", strerror(errno));
		reject(id, why, sid, r);
		return;
	}
	unsigned rd = r->o.rd_atom;
	if (rd > (unsigned)rl->dattr.max_qp_init_rd_atom)
		rd = (unsigned)rl->dattr.max_qp_init_rd_atom;
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
	c->rail = rl->idx;
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
	if (!sticky)
		el->sessions++;
	ING_LOGC(ING_LOG_INFO, COMP, (&(struct ing_log_ctx){ .session = sid }),
		 "qp 0x%x session %llu accepted on lcore %u (%s; rail %u %s; READs in flight %u, peer responder resources %u)",
		 c->qp_num, (unsigned long long)sid, el->lcore_id,
		 sticky ? "its lcore: a reconnect" : "placed: least loaded", rl->idx, rl->devname, rd,
		 remote_resp_res);
}

static void rail_release(struct rdma_rail *rl, const char *why);
static int rail_open(struct rdma_rail *rl, char *why, size_t whylen);
static int rail_start(struct rdma_rail *rl);
void ing_rdma_striped_frame_in(struct ing_rdma *r, unsigned home_rail)
{
	if (r && home_rail < r->nrails)
		r->rails[home_rail].striped_in++;
}

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

static bool any_rail_up(const struct ing_rdma *r)
{
	for (unsigned i = 0; i < r->nrails; i++)
		if (rail_serving(&r->rails[i]))
			return true;
	return false;
}

/* Since when and how long a rail has been down, for its log lines: "since 22:41:07 UTC". */
static const char *since_str(uint64_t down_since_ns, char *buf, size_t n)
{
	struct timespec rt;
	clock_gettime(CLOCK_REALTIME, &rt);
	uint64_t now = ing_now_ns(), ago = down_since_ns && now > down_since_ns ? now - down_since_ns : 0;
	time_t at = rt.tv_sec - (time_t)(ago / 1000000000ull);
	struct tm tm;
	gmtime_r(&at, &tm);
	snprintf(buf, n, "since %02d:%02d:%02d UTC, %.1f s ago", tm.tm_hour, tm.tm_min, tm.tm_sec,
		 (double)ago / 1e9);
	return buf;
}

/*
 * A rail stopped serving (up: false) or serves again: the service is told (cbs.rail_state),
 * and when it was the last rail up that went, or the first that came back, cbs.device_lost
 * or cbs.device_back (Negotiate offers only the fallback, or RDMA again). before: the rails
 * serving before the change.
 */
static void rail_told(struct ing_rdma *r, struct rdma_rail *rl, bool up, const char *why,
		      const char *lost, bool before_any)
{
	bool after_any = any_rail_up(r);
	if (r->cbs.rail_state)
		r->cbs.rail_state(r->cbs.arg, rl->idx, up, why);
	if (up && !before_any && after_any && r->cbs.device_back)
		r->cbs.device_back(r->cbs.arg, rl->addr, rl->port);
	if (!up && before_any && !after_any && r->cbs.device_lost)
		r->cbs.device_lost(r->cbs.arg, lost);
}

/* A rail is down (released): its reason, when, and its re-open time. */
static void rail_mark_down(struct rdma_rail *rl, const char *why)
{
	rl->up = false;
	snprintf(rl->why, sizeof(rl->why), "%s", why);
	if (!rl->down_since_ns) {
		rl->down_since_ns = ing_now_ns();
		rl->downs++;
	}
	rl->reopen_at_ns = ing_now_ns() + REOPEN_NS;
}

static void on_rail_removal(struct ing_rdma *r, struct rdma_rail *rl)
{
	char why[IBV_SYSFS_NAME_MAX + 64], since[64];

	if (!rl->up)
		return;
	bool before = any_rail_up(r);
	rl->removals++;
	r->st.device_removals++;
	snprintf(why, sizeof(why), "RDMA device %s removed", rl->devname);
	/* the kernel waits for us to release every object on the device */
	for (struct rconn *c = r->conns; c; c = c->next)
		if (c->rail == rl->idx)
			conn_down(r, c, "device removed");
	rail_release(rl, why);
	rl->link_down = false;
	rail_mark_down(rl, why);
	ING_ERR(COMP, "rail %u (%s): down: %s, %s: its connections failed%s", rl->idx, rl->devname,
		why, since_str(rl->down_since_ns, since, sizeof(since)),
		r->nrails > 1 ? "; the other rails go on" : "; new sessions use the gRPC fallback");
	rail_told(r, rl, false, why, r->nrails > 1 ? "every RDMA device removed" : "RDMA device removed",
		  before);
	/* and for librdmacm to close its cached context of it: it does so when it next lists
	 * the devices and the removed one is gone (rdma_get_devices; the timer repeats it) */
	sync_cm_devices();
	ING_WARN(COMP, "rail %u: RDMA device %s released; RDMA re-opens on this rail when a device is "
		 "back (checked every %u s)", rl->idx, rl->devname, (unsigned)(REOPEN_NS / 1000000000ull));
}

/*
 * A rail down (removed, or never opened), once a second: let librdmacm drop removed
 * devices (so the kernel's removal completes) and, when a device is listed, set the rail
 * up again on the same address and port. The service then offers it again
 * (cbs.rail_state; cbs.device_back when it is the first rail up).
 */
static void try_reopen(struct ing_rdma *r, struct rdma_rail *rl)
{
	char why[192] = "", since[64];
	int n = sync_cm_devices();
	bool before = any_rail_up(r);

	rl->reopen_at_ns = ing_now_ns() + REOPEN_NS;
	if (n <= 0)
		return;
	if (rail_open(rl, why, sizeof(why)) == 0) {
		int rc = rail_start(rl);
		if (rc == 0) {
			bool was_open = rl->opened_once;
			rl->up = true;
			rl->opened_once = true;
			if (was_open) {
				rl->reopens++;
				r->st.device_reopens++;
			}
			if (rl->link_down) {   /* open again, its link not (yet) ACTIVE */
				snprintf(rl->why, sizeof(rl->why), "link down (port %u not ACTIVE after the re-open)",
					 rl->port_num);
				ING_WARN(COMP, "rail %u (%s): RDMA device %s is back: listener on %s:%u re-opened; "
					 "its link is down: it serves when its port is ACTIVE", rl->idx, rl->devname,
					 rl->devname, rl->addr, rl->port);
				return;
			}
			ING_WARN(COMP, "rail %u (%s): up again: RDMA device %s is back: listener on %s:%u "
				 "re-opened (it was down: %s, %s)", rl->idx, rl->devname, rl->devname, rl->addr,
				 rl->port, rl->why, since_str(rl->down_since_ns, since, sizeof(since)));
			rl->why[0] = '\0';
			rl->down_since_ns = 0;
			rail_told(r, rl, true, "", "", before);
			return;
		}
		snprintf(why, sizeof(why), "lcore start: %s", strerror(-rc));
	}
	rail_release(rl, "RDMA re-open failed");
	ING_LOG_RL(ING_LOG_WARN, COMP, "rail %u (%s): RDMA re-open: %s (next try in %u s)", rl->idx,
		   rail_name(rl), why, (unsigned)(REOPEN_NS / 1000000000ull));
}

/* The rail whose listener id is id, or NULL. */
static struct rdma_rail *rail_of_listener(struct ing_rdma *r, const struct rdma_cm_id *id)
{
	for (unsigned i = 0; id && i < r->nrails; i++)
		if (r->rails[i].listen_id == id)
			return &r->rails[i];
	return NULL;
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
		struct rdma_rail *lrail = rail_of_listener(r, type == RDMA_CM_EVENT_CONNECT_REQUEST
							      ? ev->listen_id : id);
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

		/* a connection's id carries its rconn; a listener's is its rail's */
		struct rconn *c = id && !rail_of_listener(r, id) && type != RDMA_CM_EVENT_CONNECT_REQUEST
				  ? id->context : NULL;
		if (c && (c->rail >= r->nrails || !r->rails[c->rail].up))
			c = NULL;
		switch (type) {
		case RDMA_CM_EVENT_CONNECT_REQUEST:
			if (lrail)
				on_connect_request(r, lrail, id, priv, privlen, resp_res);
			else
				reject(id, "no listener of ours took it", 0, r);
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
			if (lrail)
				on_rail_removal(r, lrail);
			else if (c)
				on_rail_removal(r, &r->rails[c->rail]);
			break;
		case RDMA_CM_EVENT_ADDR_CHANGE:
			ING_WARN(COMP, "address change on an RDMA listener (%s)",
				 lrail ? lrail->addr : "a connection");
			break;
		default:
			ING_INFO(COMP, "unexpected CM event %s (status %d) on %s", rdma_event_str(type),
				 status, c ? "a connection" : "a listener");
			break;
		}
	}
	return k;
}

/*
 * A rail's link went down (IBV_EVENT_PORT_ERR, or its port no longer ACTIVE) or came back
 * (PORT_ACTIVE). Its objects stay open: a flap costs no re-registration, and connections
 * with nothing in flight survive it; a QP that had work in flight fails by its own retry
 * limit (the lcore parks its frames for the producer's reconnect, as after any QP error).
 */
static void rail_link(struct ing_rdma *r, struct rdma_rail *rl, bool active, const char *how)
{
	char since[64];

	if (active == !rl->link_down)
		return;
	bool before = any_rail_up(r);
	if (!active) {
		rl->link_down = true;
		snprintf(rl->why, sizeof(rl->why), "link down (port %u: %s)", rl->port_num, how);
		rl->down_since_ns = ing_now_ns();
		rl->downs++;
		ING_ERR(COMP, "rail %u (%s): down: %s, %s; new sessions go to the other rails%s", rl->idx,
			rl->devname, rl->why, since_str(rl->down_since_ns, since, sizeof(since)),
			r->nrails > 1 ? "" : " (none: the gRPC fallback)");
		/* the frames its lcores parked for a reconnect over this rail: none can come; the
		 * producers move them, so they fail now instead of after park_ms */
		for (unsigned k = rl->first_lc; k < rl->first_lc + rl->nl; k++)
			if (r->lcs[k].lc && ing_rdma_lcore_unpark(r->lcs[k].lc, 0))
				ING_ERR(COMP, "rail %u: lcore %u's mailbox full; unpark lost", rl->idx, k);
		rail_told(r, rl, false, rl->why, r->nrails > 1 ? "every RDMA rail down" : rl->why, before);
		return;
	}
	rl->link_down = false;
	/* the connections lost while it was down: their disconnect now, then their end */
	for (struct rconn *c = r->conns, *nx; c; c = nx) {
		nx = c->next;
		if (c->disc_held && c->rail == rl->idx)
			conn_release_held(r, c);
	}
	struct ibv_port_attr pa;
	if (ibv_query_port(rl->ctx, rl->port_num, &pa) == 0)
		rl->link_mbps = ing_rdma_link_mbps(pa.active_speed, pa.active_width);
	ING_WARN(COMP, "rail %u (%s): up again (port %u: %s; it was down: %s, %s)", rl->idx,
		 rl->devname, rl->port_num, how, rl->why,
		 since_str(rl->down_since_ns, since, sizeof(since)));
	rl->why[0] = '\0';
	rl->down_since_ns = 0;
	rail_told(r, rl, true, "", "", before);
}

/* Once a tick, for a rail that is open: its device's async events (ack'ed, port ones acted
 * on), then its port's state as the device says it (an event missed, or a port that was
 * never ACTIVE since the open). */
static void rail_link_check(struct ing_rdma *r, struct rdma_rail *rl)
{
	struct ibv_async_event ev;
	char how[64];

	for (int k = 0; k < 64 && rl->up && ibv_get_async_event(rl->ctx, &ev) == 0; k++) {
		enum ibv_event_type t = ev.event_type;
		bool port = t == IBV_EVENT_PORT_ERR || t == IBV_EVENT_PORT_ACTIVE;
		unsigned pn = port ? (unsigned)ev.element.port_num : 0;
		ibv_ack_async_event(&ev);
		if (port && pn == rl->port_num) {
			snprintf(how, sizeof(how), "%s", t == IBV_EVENT_PORT_ACTIVE ? "IBV_EVENT_PORT_ACTIVE"
							  : "IBV_EVENT_PORT_ERR");
			rail_link(r, rl, t == IBV_EVENT_PORT_ACTIVE, how);
		} else if (t == IBV_EVENT_DEVICE_FATAL) {
			ING_ERR(COMP, "rail %u (%s): IBV_EVENT_DEVICE_FATAL (rdma_cm's DEVICE_REMOVAL takes it down)",
				rl->idx, rl->devname);
		} else {
			ING_DBG(COMP, "rail %u (%s): async event %s", rl->idx, rl->devname,
				ibv_event_type_str(t));
		}
	}
	struct ibv_port_attr pa;
	if (rl->up && ibv_query_port(rl->ctx, rl->port_num, &pa) == 0) {
		bool active = pa.state == IBV_PORT_ACTIVE;
		if (active == rl->link_down) {
			snprintf(how, sizeof(how), "ibv_query_port state %s", ibv_port_state_str(pa.state));
			rail_link(r, rl, active, how);
		}
	}
}

void ing_rdma_tick(struct ing_rdma *r)
{
	uint64_t now = ing_now_ns();

	if (!r)
		return;
	for (unsigned i = 0; i < r->nrails; i++) {
		if (!r->rails[i].up && now >= r->rails[i].reopen_at_ns)
			try_reopen(r, &r->rails[i]);
		if (r->rails[i].up)
			rail_link_check(r, &r->rails[i]);
	}
	for (struct rconn *c = r->conns, *nx; c; c = nx) {
		nx = c->next;
		/* held for a link that came back before its rail saw it go (a flap within a tick) */
		if (c->disc_held && !conn_link_down(r, c)) {
			conn_release_held(r, c);
			continue;
		}
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

static int bind_addr(struct rdma_cm_id *id, const char *host, uint16_t port)
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
	return rc;
}

static bool dev_ok(const struct rdma_rail *rl, const struct rdma_cm_id *id)
{
	return id->verbs && (!rl->want_dev[0] || !strcmp(ibv_get_device_name(id->verbs->device), rl->want_dev));
}

/* addr's IPv4 subnet from the interface that has it (Negotiate's rail for a peer). */
static void rail_subnet(struct rdma_rail *rl, const struct ifaddrs *ifa)
{
	struct in_addr a;

	rl->has_net4 = false;
	if (inet_pton(AF_INET, rl->addr, &a) != 1)
		return;
	for (const struct ifaddrs *i = ifa; i; i = i->ifa_next) {
		if (!i->ifa_addr || !i->ifa_netmask || i->ifa_addr->sa_family != AF_INET ||
		    ((const struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr != a.s_addr)
			continue;
		rl->mask4 = ((const struct sockaddr_in *)i->ifa_netmask)->sin_addr.s_addr;
		rl->net4 = a.s_addr & rl->mask4;
		rl->has_net4 = true;
		return;
	}
}

/* Find a local address that binds to the rail's device (rxe on a dummy netdev, a RoCE NIC):
 * the first IPv4 address, up and not loopback, whose rdma_cm id lands on it. */
static int bind_auto(struct rdma_rail *rl, const struct ifaddrs *ifa, uint16_t port, char *why,
		     size_t whylen)
{
	struct ing_rdma *r = rl->r;

	for (const struct ifaddrs *i = ifa; i; i = i->ifa_next) {
		char host[INET6_ADDRSTRLEN];
		if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || (i->ifa_flags & IFF_LOOPBACK) ||
		    !(i->ifa_flags & IFF_UP))
			continue;
		inet_ntop(AF_INET, &((const struct sockaddr_in *)i->ifa_addr)->sin_addr, host, sizeof(host));
		if (bind_addr(rl->listen_id, host, port) == 0 && dev_ok(rl, rl->listen_id)) {
			snprintf(rl->addr, sizeof(rl->addr), "%s", host);
			return 0;
		}
		/* a bound id cannot be re-bound: start over with a fresh one */
		rdma_destroy_id(rl->listen_id);
		rl->listen_id = NULL;
		if (rdma_create_id(r->ech, &rl->listen_id, rl, RDMA_PS_TCP)) {
			snprintf(why, whylen, "rdma_create_id: %s", strerror(errno));
			return -errno;
		}
	}
	snprintf(why, whylen, "no local IPv4 address is on an RDMA device%s%s",
		 rl->want_dev[0] ? " named " : "", rl->want_dev);
	return -ENODEV;
}

/* The NUMA node of an RDMA device from sysfs (ibdev_path/device/numa_node), -1 when it
 * has none (Soft-RoCE has no PCI device) or the machine has no NUMA. */
static int device_numa_node(struct ibv_device *dev)
{
	char path[IBV_SYSFS_PATH_MAX + 32];
	int node = -1;

	snprintf(path, sizeof(path), "%s/device/numa_node", dev->ibdev_path);
	FILE *f = fopen(path, "r");
	if (f) {
		if (fscanf(f, "%d", &node) != 1)
			node = -1;
		fclose(f);
	}
	return node;
}

/* The rail's listening id, bound to its address (or the first local address on its
 * device), its device's attributes and the largest message. 0 or -1 with why. */
static int listener_open(struct rdma_rail *rl, char *why, size_t whylen)
{
	struct ing_rdma *r = rl->r;
	struct ifaddrs *ifa = NULL;
	int rc = 0;

	if (rdma_create_id(r->ech, &rl->listen_id, rl, RDMA_PS_TCP)) {
		snprintf(why, whylen, "rdma_create_id: %s", strerror(errno));
		return -1;
	}
	if (getifaddrs(&ifa)) {
		snprintf(why, whylen, "getifaddrs: %s", strerror(errno));
		return -1;
	}
	if (rl->want_addr[0]) {
		rc = bind_addr(rl->listen_id, rl->want_addr, rl->want_port);
		if (rc)
			snprintf(why, whylen, "rdma_bind_addr(%s:%u): %s", rl->want_addr, rl->want_port,
				 strerror(-rc));
		else if (!dev_ok(rl, rl->listen_id)) {
			snprintf(why, whylen, "address %s is not on an RDMA device%s%s", rl->want_addr,
				 rl->want_dev[0] ? " named " : "", rl->want_dev);
			rc = -ENODEV;
		} else
			snprintf(rl->addr, sizeof(rl->addr), "%s", rl->want_addr);
	} else {
		rc = bind_auto(rl, ifa, rl->want_port, why, whylen);
	}
	if (!rc)
		rail_subnet(rl, ifa);
	freeifaddrs(ifa);
	if (rc)
		return -1;
	if (rdma_listen(rl->listen_id, 64)) {
		snprintf(why, whylen, "rdma_listen(%s:%u): %s", rl->addr, rl->want_port, strerror(errno));
		return -1;
	}
	rl->port = ntohs(rdma_get_src_port(rl->listen_id));
	rl->ctx = rl->listen_id->verbs;
	snprintf(rl->devname, sizeof(rl->devname), "%s", ibv_get_device_name(rl->ctx->device));
	rl->dev_node = device_numa_node(rl->ctx->device);
	if (ibv_query_device(rl->ctx, &rl->dattr)) {
		snprintf(why, whylen, "ibv_query_device(%s) failed", rl->devname);
		return -1;
	}
	struct ibv_port_attr pa;
	rl->max_msg_sz = 0;
	rl->port_num = rl->listen_id->port_num ? rl->listen_id->port_num : 1;
	if (ibv_query_port(rl->ctx, rl->port_num, &pa) == 0) {
		rl->max_msg_sz = pa.max_msg_sz;
		rl->link_mbps = ing_rdma_link_mbps(pa.active_speed, pa.active_width);
		rl->link_down = pa.state != IBV_PORT_ACTIVE;
	}
	/* its async events (PORT_ERR, PORT_ACTIVE, ...) are read by the tick, never waited for */
	int fl = fcntl(rl->ctx->async_fd, F_GETFL);
	if (fl < 0 || fcntl(rl->ctx->async_fd, F_SETFL, fl | O_NONBLOCK) < 0) {
		snprintf(why, whylen, "O_NONBLOCK on %s's async event fd: %s", rl->devname, strerror(errno));
		return -1;
	}
	return 0;
}

/*
 * Push (RDMA WRITE): with type-2 memory windows every grant opens exactly its slot, so the
 * pool MR only gets MW_BIND; without them the pool MR itself takes remote writes (any
 * connected producer of a push session can write anywhere in the pool: ingest-doctor
 * warns). --rdma-write decides the rail's push mode; returns the pool MR's access flags.
 */
static int push_mode_pick(struct rdma_rail *rl)
{
	bool mw2 = ing_rdma_device_has_mw2(rl->ctx);
	int access = IBV_ACCESS_LOCAL_WRITE;

	switch (rl->r->o.push) {
	case ING_RDMA_PUSH_AUTO:
		rl->push_mode = mw2 ? 1 : 2;
		break;
	case ING_RDMA_PUSH_MW:
		rl->push_mode = mw2 ? 1 : 0;
		break;
	case ING_RDMA_PUSH_MR:
		rl->push_mode = 2;
		break;
	default:
		rl->push_mode = 0;
		break;
	}
	if (rl->push_mode == 1)
		access |= IBV_ACCESS_MW_BIND;
	else if (rl->push_mode == 2)
		access |= IBV_ACCESS_REMOTE_WRITE;
	if (rl->r->o.push != ING_RDMA_PUSH_OFF && !mw2)
		ING_WARN(COMP, "device %s has no type-2 memory windows: %s", rl->devname,
			 rl->push_mode ? "RDMA WRITE push grants carry the pool MR's rkey (writes are not bounded to the granted slot)"
				       : "RDMA WRITE push is off (--rdma-write mw)");
	return access;
}

/* The rail's pool region, once in its PD: its slots are addressed by lkey of their class. */
static int pool_register(struct rdma_rail *rl, int access, char *why, size_t whylen)
{
	struct ing_pool *pool = rl->r->pool;

	rl->nmr = ing_pool_nclasses(pool);
	for (unsigned c = 0; c < rl->nmr; c++) {
		void *base;
		size_t len;
		if (ing_pool_region(pool, rl->region, c, &base, &len)) {
			snprintf(why, whylen, "pool region %u class %u missing", rl->region, c);
			return -1;
		}
		rl->mrs[c] = ibv_reg_mr(rl->pd, base, len, access);
		if (!rl->mrs[c]) {
			snprintf(why, whylen, "ibv_reg_mr(pool region %u class %u, %zu bytes): %s (memlock limit?)",
				 rl->region, c, len, strerror(errno));
			return -1;
		}
		rl->lkeys[c] = rl->mrs[c]->lkey;
	}
	/* striping: every other region in this PD as well (a striped frame's one slot is in
	 * its home rail's region; this rail's part lands there, across the interconnect) */
	for (unsigned g = 0; rl->r->o.stripe && g < ing_pool_nregions(pool); g++) {
		if (g == rl->region)
			continue;
		for (unsigned c = 0; c < rl->nmr; c++) {
			void *base;
			size_t len;
			if (ing_pool_region(pool, g, c, &base, &len)) {
				snprintf(why, whylen, "pool region %u class %u missing", g, c);
				return -1;
			}
			/* the same access as its own region's: a striped push frame's part is
			 * granted over this rail into another region's slot (a window binds
			 * over this MR, or MR mode grants its rkey) */
			rl->xmrs[g][c] = ibv_reg_mr(rl->pd, base, len, access);
			if (!rl->xmrs[g][c]) {
				snprintf(why, whylen, "ibv_reg_mr(pool region %u class %u for striping, %zu bytes): %s "
					 "(memlock limit?)", g, c, len, strerror(errno));
				return -1;
			}
			rl->xlkeys[g][c] = rl->xmrs[g][c]->lkey;
		}
	}
	return 0;
}

/* Each of the rail's lcores: completion channel, CQ and poller (with its mailbox), push set
 * up on it. */
static int lcores_open(struct rdma_rail *rl, char *why, size_t whylen)
{
	struct ing_rdma *r = rl->r;

	for (unsigned i = rl->first_lc; i < rl->first_lc + rl->nl; i++) {
		struct rdma_engine_lcore *el = &r->lcs[i];
		struct ing_rdma_lcore_opts lo = r->o.lcore;
		el->ch = ibv_create_comp_channel(rl->ctx);
		if (!el->ch) {
			snprintf(why, whylen, "ibv_create_comp_channel: %s", strerror(errno));
			return -1;
		}
		if (fcntl(el->ch->fd, F_SETFL, fcntl(el->ch->fd, F_GETFL) | O_NONBLOCK)) {
			snprintf(why, whylen, "O_NONBLOCK on the completion channel: %s", strerror(errno));
			return -1;
		}
		int cqe = (int)r->o.cq_size;
		if (cqe > rl->dattr.max_cqe)
			cqe = rl->dattr.max_cqe;
		el->cq = ibv_create_cq(rl->ctx, cqe, el, el->ch, 0);
		if (!el->cq) {
			snprintf(why, whylen, "ibv_create_cq(%d): %s", cqe, strerror(errno));
			return -1;
		}
		lo.lcore_id = el->lcore_id;
		lo.region = (int)rl->region;
		if (!lo.max_msg_sz || (rl->max_msg_sz && lo.max_msg_sz > rl->max_msg_sz))
			lo.max_msg_sz = rl->max_msg_sz;
		if (!lo.ops)
			lo.ops = &ing_rdma_verbs_ops;
		struct ing_rdma_lcore_io io = {
			.ctl = r->ctl,
			.arg = el,
			.deliver = io_deliver,
			.mbox_size = r->o.job_ring_size,
		};
		el->lc = ing_rdma_lcore_create(&lo, el->cq, el->ch, el->ch->fd, &io, rl->lkeys, rl->nmr);
		if (!el->lc) {
			snprintf(why, whylen, "lcore poller %u", el->lcore_id);
			return -1;
		}
		/* one window per slot of its region: a grant holds a slot, so they never run out;
		 * striping: per slot of every region (a part of a striped push frame is granted
		 * over this rail into a slot of another rail's region) */
		unsigned total = 0, nfree = 0;
		for (unsigned g = 0; g < ing_pool_nregions(r->pool); g++) {
			unsigned t = 0;
			if ((g == rl->region || r->o.stripe) && !ing_pool_region_stats(r->pool, g, &t, &nfree))
				total += t;
		}
		if (rl->push_mode &&
		    ing_rdma_lcore_set_push(el->lc, rl->pd, rl->mrs, rl->nmr, rl->push_mode == 1 ? total : 0)) {
			snprintf(why, whylen, "RDMA WRITE push set-up on lcore %u failed (--rdma-write off to run without it)",
				 el->lcore_id);
			return -1;
		}
	}
	return 0;
}

/*
 * Everything of a rail on its device: the listening id (bound to its address, or the first
 * local address on its device), its verbs context, the PD, the MRs of its pool region and
 * each of its lcores' channel, CQ and poller. Used at start and again after DEVICE_REMOVAL
 * (try_reopen); on failure the caller releases what was made (rail_release).
 */
static int rail_open(struct rdma_rail *rl, char *why, size_t whylen)
{
	if (listener_open(rl, why, whylen))
		return -1;
	rl->pd = ibv_alloc_pd(rl->ctx);
	if (!rl->pd) {
		snprintf(why, whylen, "ibv_alloc_pd(%s) failed", rl->devname);
		return -1;
	}
	int access = push_mode_pick(rl);
	if (pool_register(rl, access, why, whylen) || lcores_open(rl, why, whylen))
		return -1;
	rl->want_port = rl->port;   /* a re-open listens where producers were told */
	return 0;
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

/* Launch the rail's pollers (EAL worker lcores or threads). 0 or -errno. */
static int rail_start(struct rdma_rail *rl)
{
	struct ing_rdma *r = rl->r;

	for (unsigned i = rl->first_lc; i < rl->first_lc + rl->nl; i++) {
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
 * Let go of everything of a rail on its device (destroy, or DEVICE_REMOVAL: the kernel
 * waits for every id/QP/MR/PD/CQ of a removed device to be released): stop its pollers
 * (bounded by sleep_ms), destroy its connections, fail the frames its lcores held (back to
 * control), free its verbs objects. The event channel, the other rails and the shell stay.
 */
static void rail_release(struct rdma_rail *rl, const char *why)
{
	struct ing_rdma *r = rl->r;

	for (unsigned i = rl->first_lc; i < rl->first_lc + rl->nl; i++)
		ing_rdma_lcore_stop(r->lcs[i].lc);
	for (unsigned i = rl->first_lc; i < rl->first_lc + rl->nl; i++) {
		struct rdma_engine_lcore *el = &r->lcs[i];
		if (!el->launched)
			continue;
		if (r->o.use_eal)
			rte_eal_wait_lcore(el->lcore_id); /* bounded: the loop sleeps <= sleep_ms */
		else
			pthread_join(el->th, NULL);
		el->launched = false;
	}
	for (struct rconn *c = r->conns, *nx; c; c = nx) {
		nx = c->next;
		if (c->rail != rl->idx)
			continue;
		if (c->state != RC_DOWN && c->id) {
			rdma_disconnect(c->id);
			if (r->st.conns_active)
				r->st.conns_active--;
		}
		conn_unlink_free(r, c);
	}
	for (unsigned i = rl->first_lc; i < rl->first_lc + rl->nl; i++) {
		struct rdma_engine_lcore *el = &r->lcs[i];
		if (el->lc) { /* its counters go on in the engine's and the rail's (totals never go back) */
			struct ing_rdma_lcore_stats ls;
			ing_rdma_lcore_get_stats(el->lc, &ls);
			add_lcore_stats(&r->st, &ls);
			rl->gone.frames_ok += ls.frames_ok;
			rl->gone.bytes_received += ls.bytes_received;
			rl->gone.frames_failed += ls.frames_failed;
			rl->gone.wc_errors += ls.wc_errors;
			rl->gone.parts_ok += ls.parts_ok;
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
		if (rl->mrs[c])
			ibv_dereg_mr(rl->mrs[c]);
		rl->mrs[c] = NULL;
		for (unsigned g = 0; g < ING_POOL_MAX_REGIONS; g++) {
			if (rl->xmrs[g][c])
				ibv_dereg_mr(rl->xmrs[g][c]);
			rl->xmrs[g][c] = NULL;
			rl->xlkeys[g][c] = 0;
		}
	}
	if (rl->pd)
		ibv_dealloc_pd(rl->pd);
	rl->pd = NULL;
	if (rl->listen_id)
		rdma_destroy_id(rl->listen_id);
	rl->listen_id = NULL;
	rl->ctx = NULL;
	rl->push_mode = 0;
}

/* The rails from the options: the list, or one rail from addr/device/lcores (nrails 0). */
static int rails_setup(struct ing_rdma *r, char *why, size_t whylen)
{
	struct ing_rdma_rail_opts one;
	const struct ing_rdma_rail_opts *ro = r->o.rails;
	unsigned n = r->o.nrails;

	if (!n) {
		memset(&one, 0, sizeof(one));
		one.device = r->o.device;
		one.addr = r->o.addr;
		one.numa_node = -1;
		one.nlcores = r->o.nlcores;
		memcpy(one.lcore_ids, r->o.lcore_ids, sizeof(one.lcore_ids));
		if (!one.nlcores) {
			/* every EAL worker lcore polls; none (e.g. -l 0): one pinned-by-nobody thread */
			unsigned id;
			r->o.use_eal = true;
			RTE_LCORE_FOREACH_WORKER(id) {
				if (one.nlcores == ING_RDMA_MAX_LCORES)
					break;
				one.lcore_ids[one.nlcores++] = id;
			}
			if (!one.nlcores) {
				r->o.use_eal = false;
				one.nlcores = 1;
				ING_WARN(COMP, "no EAL worker lcore: the RDMA poller runs on an unpinned thread");
			}
		}
		ro = &one;
		n = 1;
	}
	if (n > ING_RDMA_MAX_RAILS) {
		snprintf(why, whylen, "%u rails, at most %d", n, ING_RDMA_MAX_RAILS);
		return -1;
	}
	r->nrails = n;
	r->nl = 0;
	for (unsigned i = 0; i < n; i++) {
		struct rdma_rail *rl = &r->rails[i];
		rl->r = r;
		rl->idx = i;
		snprintf(rl->want_dev, sizeof(rl->want_dev), "%s", ro[i].device ? ro[i].device : "");
		snprintf(rl->want_addr, sizeof(rl->want_addr), "%s", ro[i].addr ? ro[i].addr : "");
		rl->want_port = r->o.port;
		rl->plan_node = ro[i].numa_node;
		rl->dev_node = -1;
		rl->region = ro[i].region;
		if (rl->region >= ing_pool_nregions(r->pool)) {
			snprintf(why, whylen, "rail %u: pool region %u, the pool has %u", i, rl->region,
				 ing_pool_nregions(r->pool));
			return -1;
		}
		if (!ro[i].nlcores || r->nl + ro[i].nlcores > ING_RDMA_MAX_LCORES) {
			snprintf(why, whylen, "rail %u: %u pollers (each rail needs one, the engine runs "
				 "at most %d in all)", i, ro[i].nlcores, ING_RDMA_MAX_LCORES);
			return -1;
		}
		rl->first_lc = r->nl;
		rl->nl = ro[i].nlcores;
		for (unsigned k = 0; k < rl->nl; k++) {
			struct rdma_engine_lcore *el = &r->lcs[r->nl++];
			el->r = r;
			el->idx = r->nl - 1;
			el->rail = i;
			el->lcore_id = ro[i].lcore_ids[k];
			el->numa_node = -1;
			if (r->o.use_eal && el->lcore_id < RTE_MAX_LCORE) {
				unsigned sock = rte_lcore_to_socket_id(el->lcore_id);
				el->numa_node = sock == (unsigned)SOCKET_ID_ANY ? -1 : (int)sock;
			}
		}
	}
	return 0;
}

/* One line per rail: where it listens, its device and node, its region and pollers. */
static void log_rails(const struct ing_rdma *r)
{
	for (unsigned i = 0; i < r->nrails; i++) {
		const struct rdma_rail *rl = &r->rails[i];
		char ids[128] = "";
		for (unsigned k = 0, off = 0; k < rl->nl && off < sizeof(ids); k++)
			off += (unsigned)snprintf(ids + off, sizeof(ids) - off, "%s%u", k ? "," : "",
						  r->lcs[rl->first_lc + k].lcore_id);
		if (rl->up)
			ING_INFO(COMP, "rail %u: RDMA listener on %s:%u (device %s, node %d%s, pool region %u "
				 "node %d registered, %u poller(s) on lcore(s) %s, max_qp_rd_atom %d, "
				 "max_qp_init_rd_atom %d, max_msg_sz %u, push %s, link %s%u Mb/s)", i, rl->addr,
				 rl->port, rl->devname, rail_node(rl),
				 rl->plan_node >= 0 && rl->plan_node != rl->dev_node ? " as placed" : "",
				 rl->region, ing_pool_region_node(r->pool, rl->region), rl->nl, ids,
				 rl->dattr.max_qp_rd_atom, rl->dattr.max_qp_init_rd_atom, rl->max_msg_sz,
				 rl->push_mode == 1 ? "memory windows" : rl->push_mode == 2 ? "pool MR" : "off",
				 rl->link_down ? "DOWN, " : "", rl->link_mbps);
		else
			ING_WARN(COMP, "rail %u (%s): down: %s; tried again every %u s", i, rail_name(rl),
				 rl->why, (unsigned)(REOPEN_NS / 1000000000ull));
	}
}

struct ing_rdma *ing_rdma_create(const struct ing_rdma_opts *o, struct ing_pool *pool,
				 struct ing_persist *persist, struct ing_mbox *ctl,
				 const struct ing_rdma_cbs *cbs, char *why, size_t whylen)
{
	struct ing_rdma *r;
	char wbuf[192], first_why[192] = "";
	int ndev = 0;

	if (!why) {
		why = wbuf;
		whylen = sizeof(wbuf);
	}
	why[0] = 0;
	if (!o || !pool || !ctl || o->nlcores > ING_RDMA_MAX_LCORES || o->nrails > ING_RDMA_MAX_RAILS) {
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
		/* a host without RDMA: the caller says it once (ingestd: one INFO line) */
		snprintf(why, whylen, "no RDMA device (ibv_get_device_list found none)");
		return NULL;
	}
	r = calloc(1, sizeof(*r));
	if (!r) {
		snprintf(why, whylen, "out of memory");
		return NULL;
	}
	r->o = *o;
	r->pool = pool;
	r->persist = persist;
	r->ctl = ctl;
	ing_rdma_sticky_init(&r->sticky);
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
	if (rails_setup(r, why, whylen))
		goto fail;
	unsigned up = 0;
	for (unsigned i = 0; i < r->nrails; i++) {
		struct rdma_rail *rl = &r->rails[i];
		char rwhy[192] = "";
		if (rail_open(rl, rwhy, sizeof(rwhy)) == 0) {
			rl->up = rl->opened_once = true;
			if (rl->link_down) {   /* open, and it serves once its port is ACTIVE */
				snprintf(rl->why, sizeof(rl->why), "link down (port %u not ACTIVE at start)",
					 rl->port_num);
				rl->down_since_ns = ing_now_ns();
				rl->downs++;
			}
			up++;
			continue;
		}
		rail_release(rl, "RDMA set-up failed");
		rail_mark_down(rl, rwhy);
		if (!first_why[0])
			snprintf(first_why, sizeof(first_why), "%s%s%s", r->nrails > 1 ? rail_name(rl) : "",
				 r->nrails > 1 ? ": " : "", rwhy);
	}
	if (!up) {
		snprintf(why, whylen, "%s", first_why);
		goto fail;
	}
	log_rails(r);
	return r;
fail:
	ING_WARN(COMP, "RDMA not available: %s", why);
	ing_rdma_destroy(r);
	return NULL;
}

int ing_rdma_start(struct ing_rdma *r)
{
	if (!r)
		return -EINVAL;
	for (unsigned i = 0; i < r->nrails; i++) {
		if (!r->rails[i].up)
			continue;
		int rc = rail_start(&r->rails[i]);
		if (rc)
			return rc;
	}
	return 0;
}

void ing_rdma_destroy(struct ing_rdma *r)
{
	if (!r)
		return;
	for (unsigned i = 0; i < r->nrails; i++)
		rail_release(&r->rails[i], "ingest node shutting down");
	while (r->conns)   /* none should be left: every one is on a rail */
		conn_unlink_free(r, r->conns);
	r->st.conns_active = 0;
	if (r->ech)
		rdma_destroy_event_channel(r->ech);
	free(r);
}

/* The rail producers are told about: the first one up (rail 0 when none is). */
static const struct rdma_rail *rail_primary(const struct ing_rdma *r)
{
	for (unsigned i = 0; i < r->nrails; i++)
		if (rail_serving(&r->rails[i]))
			return &r->rails[i];
	return &r->rails[0];
}

const char *ing_rdma_addr(const struct ing_rdma *r)
{
	return r && r->nrails ? rail_primary(r)->addr : "";
}

uint16_t ing_rdma_port(const struct ing_rdma *r)
{
	return r && r->nrails ? rail_primary(r)->port : 0;
}

const char *ing_rdma_device(const struct ing_rdma *r)
{
	return r && r->nrails ? rail_primary(r)->devname : "";
}

int ing_rdma_rail_for_peer(const struct ing_rdma *r, const char *peer, unsigned *rail,
			   const char **addr, uint16_t *port)
{
	const struct rdma_rail *pick = NULL;
	struct in_addr a;
	bool v4 = peer && inet_pton(AF_INET, peer, &a) == 1;

	for (unsigned i = 0; r && i < r->nrails; i++) {
		const struct rdma_rail *rl = &r->rails[i];
		if (!rail_serving(rl))
			continue;
		if (!pick)
			pick = rl;
		if (v4 && rl->has_net4 && (a.s_addr & rl->mask4) == rl->net4) {
			pick = rl;
			break;
		}
	}
	if (!pick)
		return -ENODEV;
	if (rail)
		*rail = pick->idx;
	if (addr)
		*addr = pick->addr;
	if (port)
		*port = pick->port;
	return 0;
}

int ing_rdma_session_region(const struct ing_rdma *r, uint64_t session_id)
{
	const struct rconn *c = r ? conn_by_session(r, session_id, false) : NULL;

	return c ? (int)r->rails[c->rail].region : -1;
}

bool ing_rdma_session_connected(const struct ing_rdma *r, uint64_t session_id)
{
	struct rconn *c = r ? conn_by_session(r, session_id, true) : NULL;

	return c && c->state == RC_ESTABLISHED;
}

int ing_rdma_submit(struct ing_rdma *r, struct ing_frame *f)
{
	/* a broken connection still takes jobs: the lcore parks them for the reconnect */
	struct rconn *c = r ? conn_by_session(r, f->session_id, false) : NULL;

	if (!c || !r->rails[c->rail].up)
		return -ENOTCONN;
	if (f->region != r->rails[c->rail].region)
		return -EXDEV;
	f->qp_num = c->qp_num;
	f->transport = ING_XPORT_RDMA;
	return ing_rdma_lcore_submit(r->lcs[c->lcore].lc, f);
}

int ing_rdma_submit_part(struct ing_rdma *r, struct ing_frame *p, unsigned *rail)
{
	struct rconn *c = r ? conn_by_session(r, p->session_id, false) : NULL;

	if (!c || !r->rails[c->rail].up)
		return -ENOTCONN;
	const struct rdma_rail *rl = &r->rails[c->rail];
	if (p->region == rl->region && p->cls < rl->nmr) {
		p->part_lkey = rl->lkeys[p->cls];
		p->part_mr = rl->mrs[p->cls];
	} else if (p->region < ING_POOL_MAX_REGIONS && p->cls < rl->nmr && rl->xmrs[p->region][p->cls]) {
		p->part_lkey = rl->xlkeys[p->region][p->cls];
		p->part_mr = rl->xmrs[p->region][p->cls];
	} else {
		return -EXDEV;
	}
	if (p->push && !rl->push_mode)
		return -EPROTONOSUPPORT;   /* this rail grants nothing (--rdma-write off) */
	if (rail)
		*rail = c->rail;
	p->qp_num = c->qp_num;
	p->transport = ING_XPORT_RDMA;
	return ing_rdma_lcore_submit(r->lcs[c->lcore].lc, p);
}

int ing_rdma_session_rail(const struct ing_rdma *r, uint64_t session_id)
{
	const struct rconn *c = r ? conn_by_session(r, session_id, false) : NULL;
	return c && r->rails[c->rail].up ? (int)c->rail : -1;
}

bool ing_rdma_stripes(const struct ing_rdma *r)
{
	return r && r->o.stripe;
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

int ing_rdma_lcore_info(const struct ing_rdma *r, unsigned i, struct ing_rdma_lcore_info *info)
{
	if (!r || i >= r->nl || !r->lcs[i].lc)
		return -ENOENT;
	memset(info, 0, sizeof(*info));
	info->lcore_id = r->lcs[i].lcore_id;
	info->rail = r->lcs[i].rail;
	info->numa_node = r->lcs[i].numa_node;
	info->sessions = r->lcs[i].sessions;
	info->frames_held = ing_rdma_lcore_frames_held(r->lcs[i].lc);
	for (const struct rconn *c = r->conns; c; c = c->next)
		info->conns += c->state != RC_DOWN && c->lcore == i;
	return 0;
}

int ing_rdma_device_node(const struct ing_rdma *r)
{
	return r && r->nrails ? rail_node(rail_primary(r)) : -1;
}

unsigned ing_rdma_nrails(const struct ing_rdma *r)
{
	return r ? r->nrails : 0;
}

unsigned ing_rdma_rails_up(const struct ing_rdma *r)
{
	unsigned n = 0;
	for (unsigned i = 0; r && i < r->nrails; i++)
		n += rail_serving(&r->rails[i]);
	return n;
}

int ing_rdma_rail_info(const struct ing_rdma *r, unsigned i, struct ing_rdma_rail_info *info)
{
	if (!r || i >= r->nrails)
		return -ENOENT;
	const struct rdma_rail *rl = &r->rails[i];
	memset(info, 0, sizeof(*info));
	snprintf(info->device, sizeof(info->device), "%s", rl->devname[0] ? rl->devname : rl->want_dev);
	snprintf(info->addr, sizeof(info->addr), "%s", rl->addr[0] ? rl->addr : rl->want_addr);
	info->port = rl->port ? rl->port : rl->want_port;
	info->numa_node = rail_node(rl);
	info->dev_node = rl->dev_node;
	info->region = rl->region;
	info->first_lcore = rl->first_lc;
	info->nlcores = rl->nl;
	info->up = rail_serving(rl);
	info->link_down = rl->up && rl->link_down;
	info->link_mbps = rl->link_mbps;
	info->removals = rl->removals;
	info->reopens = rl->reopens;
	info->downs = rl->downs;
	info->down_since_ns = info->up ? 0 : rl->down_since_ns;
	snprintf(info->why, sizeof(info->why), "%s", info->up ? "" : rl->why);
	return 0;
}

int ing_rdma_rail_stats(const struct ing_rdma *r, unsigned i, struct ing_rdma_rail_stats *s)
{
	if (!r || i >= r->nrails)
		return -ENOENT;
	const struct rdma_rail *rl = &r->rails[i];
	memset(s, 0, sizeof(*s));
	ing_rdma_rail_stats_add(s, &rl->gone);
	s->frames_received += rl->striped_in;
	for (unsigned k = rl->first_lc; k < rl->first_lc + rl->nl; k++) {
		struct ing_rdma_lcore_stats ls;
		if (!r->lcs[k].lc)
			continue;
		ing_rdma_lcore_get_stats(r->lcs[k].lc, &ls);
		ing_rdma_rail_stats_add(s, &ls);
	}
	for (const struct rconn *c = r->conns; c; c = c->next)
		s->conns += c->state != RC_DOWN && c->rail == i;
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

/* Push offered to a new session: 1 (memory windows) only when every rail up binds windows,
 * 2 (the pool MR: grants not bounded) when any rail up does that, 0 when none is up. */
int ing_rdma_push_mode(const struct ing_rdma *r)
{
	int mode = 0;
	for (unsigned i = 0; r && i < r->nrails; i++) {
		const struct rdma_rail *rl = &r->rails[i];
		if (!rail_serving(rl))
			continue;
		if (!rl->push_mode)
			return 0;
		if (rl->push_mode > mode)
			mode = rl->push_mode;
	}
	return mode;
}
