/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fleet.c - libingest's fleet mode (opts.servers, docs/FLEET.md): one producer object in
 * front of one ordinary producer session per ingest node.
 *
 *   submit -> fleet frame (kept until DURABLE) -> HRW owner among the nodes that take new
 *             wafers -> that node's session (producer_session_submit, user = the fleet frame)
 *   poll   -> every node session polled without waiting, then one poll(2) over their
 *             sockets; acks are matched to the fleet frame AND to the node it is placed on
 *             (an ack from anywhere else is late: counted, ignored)
 *          -> failure detection: the session broke (reset, GOAWAY, PING unanswered for
 *             2 x keepalive_ms) or a frame sat on a node longer than ack_deadline_ms:
 *             the node's session is destroyed (nothing late can arrive from it), the node
 *             cools down for node_cooldown_ms, and every frame it held that is not
 *             DURABLE goes to the wafer's next node in HRW order
 *          -> Members refresh (each connected node, every membership_refresh_ms): joins,
 *             draining; a node's own answer about itself wins while it is connected
 *          -> redial of cooled-down nodes, frame deadlines, acks out.
 *
 * One server (opts.server, no servers list) is the same router over one node, "pinned":
 * no Members asked, the node's own id and transport note shown, its answers about one
 * frame (busy, full, I/O, not finished in time, a transfer the hardware refused: a bad
 * rkey, a READ beyond the registered memory, a write outside its grant) failing that frame
 * alone as a plain session's would (the session re-establishes its QP by itself), and a
 * lost connection (reset, GOAWAY, the stream closed by a node that stops, see
 * ack_conn_lost) redialled with back-off (100 ms doubling to 2 s) for
 * opts.reconnect_timeout_ms from the loss; the frames that are not DURABLE wait above the
 * session and are re-sent in submit order once a new session is up (those whose bytes the
 * application took back at RECEIVED fail: they cannot be read again). Past the limit every
 * frame kept fails and the producer is broken. So a node restart or upgrade costs a
 * single-server producer nothing but time, by the same code that fails a fleet node over.
 *
 * A re-sent frame may find the node still holding its earlier send (the node outlived the
 * connection: it finishes what it received, and fails an RDMA session's parked frames only
 * after its park time): the node answers "in flight" (ack_in_flight) and the frame goes to
 * it again after a back-off until that copy has ended (frame_retry_later), in both modes:
 * stored once, acked DURABLE once.
 *
 * ing_producer_wake (any thread) writes an eventfd that fleet_wait polls with the
 * sockets: a binding's pump can wait long in poll and still let a submitter in at once.
 *
 * Everything runs on the thread that drives the producer; the node sessions are private
 * (never returned to the application). Memory: the application keeps a frame's bytes
 * until its DURABLE ack (recycle_on is DURABLE here), since a re-send reads them again.
 *
 * Transports: each node session negotiates as the application asked (opts.transport,
 * opts.rdma_mode): RDMA READ pull or WRITE push where the node offers it, the gRPC stream
 * where it does not (AUTO). All of them use the router's one frame pool (struct
 * producer_shared), registered once per RDMA device and shared by every node on it; a
 * node session whose RDMA connection is lost does not reconnect (fail_fast): the node
 * fails like on a broken stream, its session (and QP) is destroyed before any of its
 * frames goes to the next node.
 */
#include "producer/producer_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <openssl/evp.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/ident.h"
#include "common/log.h"
#include "control/net/grpc.h"
#include "h3000.pb-c.h"

#define COMP "fleet"

#define FLEET_MAX_NODES 64
#define FLEET_MAX_FRAMES 4096u
#define FLEET_SUB_ACKS 64
#define FLEET_DEFAULT_ACK_DEADLINE_MS 10000
#define FLEET_DEFAULT_KEEPALIVE_MS 1000
#define FLEET_DEFAULT_COOLDOWN_MS 5000
#define FLEET_DEFAULT_REFRESH_MS 2000
#define FLEET_REDIAL_TIMEOUT_MS 500     /* a redial blocks the producer's thread this long at most */
#define FLEET_MEMBERS_TIMEOUT_MS 2000
#define FLEET_POLL_SLICE_MS 20          /* timers (deadlines, refresh, redial) between waits */
/* one server (pinned) */
#define PINNED_DEFAULT_RECONNECT_MS 30000
#define PINNED_BACKOFF_MIN_MS 100
#define PINNED_BACKOFF_MAX_MS 2000
#define PINNED_REDIAL_TIMEOUT_MS 1000   /* a redial blocks the producer's thread this long at most */
/* a frame the node still holds from an earlier send: sent again after this back-off */
#define INFLIGHT_RETRY_MIN_MS 100
#define INFLIGHT_RETRY_MAX_MS 2000

struct fleet;

struct fnode {
	char id[ING_ID_MAX + 1];
	char addr[256];
	/* rails (see "rails" below): an endpoint is one (node, rail) pair; a node's first
	 * endpoint is its primary (primary == its own index), its other rails point to it */
	int primary;
	char rail[64];                 /* the node's rail this endpoint asks for ("": any) */
	char local_dev[64];            /* the local device that reached it (RDMA) */
	bool gone;                     /* not used again: no local device reaches the rail, or
					* the node does not honour NegotiateRequest.rail (why) */
	int backoff_ms;                /* a rail's next redial wait */
	uint64_t down_since_ns;        /* 0: up (or never down) */
	char why[160];                 /* why it went down (or is gone) */
	uint64_t bytes, downs;
	bool rails_said;               /* "one rail, because ..." logged */
	enum ing_member_state member;  /* reported state (its own answer wins while connected) */
	struct ing_producer *sub;      /* the session; NULL: not connected */
	bool failed;                   /* cooling down after a failure */
	uint64_t down_until_ns;
	struct ing_grpc_ccall *mcall;  /* Members call in flight on sub's channel */
	bool members_unimpl;           /* answered UNIMPLEMENTED: not asked again */
	struct fleet *f;
	uint64_t durable, rerouted_away, failovers;
};

struct fframe {
	bool used;
	bool recv_delivered;   /* RECEIVED ack given to the application */
	bool on_node;          /* handed to nodes[node].sub */
	bool rerouted;
	bool recv_here;        /* the current node acked RECEIVED */
	char id[ING_ID_MAX + 1];
	char wafer[ING_ID_MAX + 1];
	const void *data;
	uint64_t len;
	uint32_t crc;
	int64_t ts;
	void *user;
	int node;              /* the endpoint (node, rail) it is on (on_node); -1: none */
	int group;             /* its node (the primary endpoint HRW chose); -1: to pick */
	int avoid;             /* a rail that refused it (BUSY): another if there is one; -1 */
	uint64_t seq;          /* submit order: sends keep it per node */
	uint64_t t_submit_ns, t_sent_ns, deadline_ns;
	uint64_t refused;      /* bit per node that refused it for node-local reasons */
	unsigned resends;
	/* the node still held an earlier send of it in flight (ack_in_flight): not sent again
	 * before retry_at_ns; retry_ms the back-off of the next wait (0: it never had to) */
	uint64_t retry_at_ns;
	int retry_ms;
};

struct fleet {
	struct ing_producer *top;
	struct fnode nodes[FLEET_MAX_NODES];
	unsigned nnodes;
	struct fframe *fr;
	unsigned cap, nused;
	uint64_t seq;
	uint32_t *order;       /* scratch: unsent frames in submit order */
	unsigned rail_next;    /* rail_pick: of rails with equal bytes in flight, the first from here */
	struct pack_entry *ackq;
	unsigned aq_cap, aq_head, aq_len, undelivered_terminal;
	struct ing_producer_opts sub_o;   /* template of a node session's options */
	char *s_auth, *s_ca, *s_cert, *s_key, *s_sni;
	int ack_deadline_ms, cooldown_ms, refresh_ms;
	uint64_t next_refresh_ns;
	uint64_t first_failover_ns;
	bool learned;          /* some node answered Members */
	struct producer_shared sh;   /* what every node session uses: the pool, its registrations */
	/* one server (pinned): see the top of this file */
	bool pinned;
	int reconnect_ms;      /* < 0: a lost connection fails everything at once */
	uint64_t give_up_ns;   /* the connection is lost: when to stop redialling (0: up) */
	int last_rc;           /* the last dial's -errno */
	char last_err[256];    /* ... and its text */
	char lost_why[160];    /* why the connection went */
	enum ing_transport last_kind;
	/* ing_producer_wake */
	int wake_fd;
	atomic_int woken;
};

/* ================================================================ HRW */

uint64_t fleet_hrw_score(const char *node, size_t nlen, const char *wafer, size_t wlen)
{
	uint8_t md[EVP_MAX_MD_SIZE];
	unsigned mdlen = 0;
	EVP_MD_CTX *c = EVP_MD_CTX_new();
	static const uint8_t zero = 0;

	if (!wlen) {
		wafer = ING_DEFAULT_WAFER;
		wlen = strlen(ING_DEFAULT_WAFER);
	}
	if (!c || !EVP_DigestInit_ex(c, EVP_sha256(), NULL) || !EVP_DigestUpdate(c, node, nlen) ||
	    !EVP_DigestUpdate(c, &zero, 1) || !EVP_DigestUpdate(c, wafer, wlen) ||
	    !EVP_DigestFinal_ex(c, md, &mdlen) || mdlen < 8) {
		EVP_MD_CTX_free(c);
		return 0;    /* OpenSSL out of memory: every node scores 0, ties go by id */
	}
	EVP_MD_CTX_free(c);
	uint64_t s = 0;
	for (int i = 0; i < 8; i++)
		s = (s << 8) | md[i];
	return s;
}

bool fleet_hrw_better(uint64_t score_a, const char *id_a, uint64_t score_b, const char *id_b)
{
	if (score_a != score_b)
		return score_a > score_b;
	return strcmp(id_a, id_b) < 0;   /* strcmp compares as unsigned char: bytewise */
}

uint64_t ing_producer_hrw_score(const char *node_id, const char *wafer_id)
{
	if (!node_id)
		return 0;
	return fleet_hrw_score(node_id, strlen(node_id), wafer_id ? wafer_id : "",
			       wafer_id ? strlen(wafer_id) : 0);
}

int ing_producer_hrw_owner(const char *const *node_ids, unsigned n, const char *wafer_id)
{
	int best = -1;
	uint64_t bs = 0;
	if (!node_ids || !n)
		return -EINVAL;
	for (unsigned i = 0; i < n; i++) {
		if (!node_ids[i])
			return -EINVAL;
		uint64_t s = ing_producer_hrw_score(node_ids[i], wafer_id);
		if (best < 0 || fleet_hrw_better(s, node_ids[i], bs, node_ids[best])) {
			best = (int)i;
			bs = s;
		}
	}
	return best;
}

/* ================================================================ nodes */

static uint64_t ms_ns(int ms)
{
	return (uint64_t)ms * 1000000ull;
}

static const char *member_name(enum ing_member_state s)
{
	switch (s) {
	case ING_MEMBER_ACTIVE: return "active";
	case ING_MEMBER_DRAINING: return "draining";
	case ING_MEMBER_DOWN: return "down";
	default: return "unknown";
	}
}

static enum ing_member_state member_from_wire(int s)
{
	switch (s) {
	case H3000__MEMBER_STATE__MEMBER_ACTIVE: return ING_MEMBER_ACTIVE;
	case H3000__MEMBER_STATE__MEMBER_DRAINING: return ING_MEMBER_DRAINING;
	case H3000__MEMBER_STATE__MEMBER_DOWN: return ING_MEMBER_DOWN;
	default: return ING_MEMBER_UNKNOWN;
	}
}

static int node_find_id(const struct fleet *f, const char *id)
{
	for (unsigned i = 0; i < f->nnodes; i++)
		if (strcmp(f->nodes[i].id, id) == 0)
			return (int)i;
	return -1;
}

static int node_find_addr(const struct fleet *f, const char *addr)
{
	for (unsigned i = 0; i < f->nnodes; i++)
		if (strcmp(f->nodes[i].addr, addr) == 0)
			return (int)i;
	return -1;
}

static int node_add(struct fleet *f, const char *id, const char *addr, enum ing_member_state st)
{
	if (f->nnodes == FLEET_MAX_NODES || !producer_id_ok(id) || !addr || !*addr ||
	    strlen(addr) >= sizeof(f->nodes[0].addr)) {
		ING_LOG_RL(ING_LOG_WARN, COMP, "member '%.64s' at '%.64s' not added (%s)", id ? id : "",
			   addr ? addr : "", f->nnodes == FLEET_MAX_NODES ? "too many nodes" : "bad id or address");
		return -1;
	}
	struct fnode *n = &f->nodes[f->nnodes];
	memset(n, 0, sizeof(*n));
	snprintf(n->id, sizeof(n->id), "%s", id);
	snprintf(n->addr, sizeof(n->addr), "%s", addr);
	n->member = st;
	n->f = f;
	n->primary = (int)f->nnodes;
	return (int)f->nnodes++;
}

/* Connected and not failed (the endpoint can carry frames). */
static bool ep_up(const struct fnode *n)
{
	return n->sub && !n->failed && !n->sub->broken;
}

/* The node's rail index of rail device dev, as p's NegotiateReply listed them; -1. */
static int rail_index_of(const struct ing_producer *p, const char *dev)
{
	for (unsigned k = 0; dev && *dev && k < p->nrails; k++)
		if (!strcmp(p->rails[k].dev, dev))
			return (int)p->rails[k].index;
	return -1;
}

unsigned fleet_stripe_vias(struct ing_producer *p, struct stripe_via_p *v, unsigned max)
{
	struct fleet *f = p->router;
	int home = -1;
	unsigned n = 0;

	for (unsigned i = 0; f && i < f->nnodes; i++)
		if (f->nodes[i].sub == p)
			home = (int)i;
	if (home < 0)
		return 0;
	int grp = f->nodes[home].primary;
	/* p's own rail first (its FrameMeta's addr/rkey are that rail's), then the others */
	for (int pass = 0; pass < 2; pass++)
		for (unsigned j = 0; j < f->nnodes && n < max; j++) {
			const struct fnode *e = &f->nodes[j];
			if ((pass == 0) != ((int)j == home) || e->primary != grp || !ep_up(e))
				continue;
			uint32_t rkey = 0;
			int idx = rail_index_of(p, e->sub->rail);
			/* pull: each rail's rkey of the pool; push (p->push): each rail's session
			 * with a connection that can write (the node grants every part) */
			const struct producer_xport *x = e->sub->xport;
			bool can = x && e->sub->push == p->push &&
				   (p->push ? x->push_ready && x->part_write && !x->push_ready(e->sub)
					    : x->read_rkey && !x->read_rkey(e->sub, &rkey));
			if (idx < 0 || idx > 255 || !can) {
				if (pass == 0)
					return 0;
				continue;
			}
			v[n++] = (struct stripe_via_p){ .rail = (uint8_t)idx, .session = e->sub->session_id,
							.rkey = rkey };
		}
	return n;
}

struct ing_producer *fleet_rail_session(struct ing_producer *p, unsigned rail)
{
	struct fleet *f = p->router;
	int home = -1;

	for (unsigned i = 0; f && i < f->nnodes; i++)
		if (f->nodes[i].sub == p)
			home = (int)i;
	if (home < 0)
		return NULL;
	for (unsigned j = 0; j < f->nnodes; j++) {
		const struct fnode *e = &f->nodes[j];
		if (e->primary == f->nodes[home].primary && ep_up(e) && rail_index_of(p, e->sub->rail) == (int)rail)
			return e->sub;
	}
	return NULL;
}

/* Takes new wafers: connected, not cooling down, its node not draining or reported down. */
static bool node_eligible(const struct fnode *n)
{
	const struct fnode *pn = &n->f->nodes[n->primary];
	return ep_up(n) && pn->member != ING_MEMBER_DRAINING && pn->member != ING_MEMBER_DOWN;
}

/* Node g (a primary endpoint) takes new wafers through one of its rails at least. */
static bool group_eligible(const struct fleet *f, int g)
{
	for (unsigned j = 0; j < f->nnodes; j++)
		if (f->nodes[j].primary == g && node_eligible(&f->nodes[j]))
			return true;
	return false;
}

/* Another endpoint of i's node than i exists. */
static bool sibling_known(const struct fleet *f, unsigned i)
{
	for (unsigned j = 0; j < f->nnodes; j++)
		if (j != i && f->nodes[j].primary == f->nodes[i].primary)
			return true;
	return false;
}

/* Another endpoint of i's node than i is up. */
static bool sibling_up(const struct fleet *f, unsigned i)
{
	for (unsigned j = 0; j < f->nnodes; j++)
		if (j != i && f->nodes[j].primary == f->nodes[i].primary && ep_up(&f->nodes[j]))
			return true;
	return false;
}

unsigned fleet_rail_pick(const uint64_t *load, const bool *ok, unsigned n, unsigned from)
{
	unsigned best = n;
	for (unsigned k = 0; k < n; k++) {
		unsigned j = (from + k) % n;
		if (ok[j] && (best == n || load[j] < load[best]))
			best = j;
	}
	return best;
}

/* The endpoint of node g that gets the next frame: the eligible rail with the fewest bytes
 * in flight (load), not blocked (no credit now); of equals the next after the last pick
 * (f->rail_next); -1: none. */
static int rail_pick(const struct fleet *f, int g, const uint64_t *load, const bool *blocked,
		     int avoid)
{
	bool ok[FLEET_MAX_NODES];
	for (unsigned j = 0; j < f->nnodes; j++)
		ok[j] = f->nodes[j].primary == g && !blocked[j] && node_eligible(&f->nodes[j]);
	unsigned j = f->nnodes;
	if (avoid >= 0 && ok[avoid]) {
		ok[avoid] = false;   /* it refused the frame: another rail if one can take it */
		j = fleet_rail_pick(load, ok, f->nnodes, f->rail_next);
		ok[avoid] = true;
	}
	if (j == f->nnodes)
		j = fleet_rail_pick(load, ok, f->nnodes, f->rail_next);
	return j < f->nnodes ? (int)j : -1;
}

/* The wafer's owner among the eligible nodes, skipping those in `skip`; -1: none. */
static int route_pick(const struct fleet *f, const char *wafer, uint64_t skip)
{
	int best = -1;
	uint64_t bs = 0;
	size_t wl = strlen(wafer);
	for (unsigned i = 0; i < f->nnodes; i++) {
		const struct fnode *n = &f->nodes[i];
		if (n->primary != (int)i || !group_eligible(f, (int)i) || (i < 64 && (skip >> i) & 1))
			continue;
		uint64_t s = fleet_hrw_score(n->id, strlen(n->id), wafer, wl);
		if (best < 0 || fleet_hrw_better(s, n->id, bs, f->nodes[best].id)) {
			best = (int)i;
			bs = s;
		}
	}
	return best;
}

static const char *node_transport(const struct ing_producer *sub)
{
	if (sub->xport->kind != ING_TRANSPORT_RDMA)
		return "gRPC stream";
	return sub->push ? "RDMA_WRITE" : "RDMA_READ";
}

/* The application's transport note: the fleet, and the transport of its connected nodes. */
static void fleet_note(struct fleet *f)
{
	unsigned up = 0, rd = 0, wr = 0, nodes = 0, rails = 0;

	if (f->pinned)
		return;   /* one server: the session's own note (node_dial) */
	for (unsigned i = 0; i < f->nnodes; i++) {
		const struct ing_producer *sub = f->nodes[i].sub;
		if (f->nodes[i].primary != (int)i) {
			rails += sub != NULL;   /* a node's other rails: counted apart */
			continue;
		}
		nodes++;
		if (!sub)
			continue;
		up++;
		if (sub->xport->kind == ING_TRANSPORT_RDMA && sub->push)
			wr++;
		else if (sub->xport->kind == ING_TRANSPORT_RDMA)
			rd++;
	}
	snprintf(f->top->note, sizeof(f->top->note), "fleet of %u node(s), %u up, membership %s; "
		 "RDMA_READ to %u, RDMA_WRITE to %u, gRPC stream to %u; %u more rail(s) up", nodes, up,
		 f->learned ? "from Members" : "static (servers list)", rd, wr, up - rd - wr, rails);
}

/* ================================================================ rails */

/*
 * Rails (issue 26): a node with several RDMA rails (NegotiateReply.rails: one rdma_cm
 * listener per device) is reached over each of them that a local device reaches (the
 * device rdma_resolve_addr picks for the rail's address, one of opts.rdma_device's list;
 * default every device). Each (node, rail) is an endpoint of this router: its own gRPC
 * session, asking for its rail in NegotiateRequest.rail, and its own RDMA connection; the
 * frame pool is registered once per local device (producer_shared). The node's first
 * endpoint is its primary (the node's own pick of rail for us; HRW, Members, the node's
 * state are the primary's); its other rails are found from the primary's Negotiate.
 *
 * Frames go to the node HRW picks, then to its rail with the fewest bytes in flight
 * (rail_pick). A rail lost (QP error, link down, device removed, its stream broken) while
 * another rail of the node is up costs no frame: its session is destroyed (no late READ or
 * ack can come through it), its frames in flight go to the other rails (the node answers
 * "already in flight" while it still holds an earlier copy: frame_retry_later), and the
 * rail is redialled with back-off (100 ms doubling to 2 s) until it carries frames again.
 * The last rail lost is the node lost (fleet: failover; one server: reconnect). A node that
 * lists no rails, or does not put a session on the rail it asks for, is used over one rail,
 * and the log says so.
 */
#define RAIL_BACKOFF_MIN_MS 100
#define RAIL_BACKOFF_MAX_MS 2000

static double since_s(uint64_t t0)
{
	return t0 ? (double)(ing_now_ns() - t0) / 1e9 : 0.0;
}

/* One server: the session's note, and the rails when there are several. */
static void pinned_note(struct fleet *f)
{
	struct ing_producer *top = f->top;
	const struct fnode *p0 = &f->nodes[0];
	size_t o;

	if (!f->pinned)
		return;
	for (unsigned j = 0; j < f->nnodes; j++)
		if (f->nodes[j].sub) {
			snprintf(top->note, sizeof(top->note), "%s", f->nodes[j].sub->note);
			break;
		}
	if (f->nnodes < 2)
		return;
	o = strlen(top->note);
	o += (size_t)snprintf(top->note + o, o < sizeof(top->note) ? sizeof(top->note) - o : 0,
			      "; rails of %s:", p0->id);
	for (unsigned j = 0; j < f->nnodes && o < sizeof(top->note); j++) {
		const struct fnode *n = &f->nodes[j];
		o += (size_t)snprintf(top->note + o, sizeof(top->note) - o, " %s%s%s %s",
				      n->rail[0] ? n->rail : "?", n->local_dev[0] ? " via " : "",
				      n->local_dev, n->gone ? "unused" : ep_up(n) ? "up" : "down");
	}
}

/* Rails of node g not used: the node does not honour NegotiateRequest.rail (or cannot
 * say which rail a session is on). One rail, said once. */
static void rails_off(struct fleet *f, int g, const char *why)
{
	bool said = false;
	for (unsigned j = 0; j < f->nnodes; j++) {
		struct fnode *n = &f->nodes[j];
		if (n->primary != g || j == (unsigned)g || n->gone)
			continue;
		n->gone = true;
		n->failed = true;
		snprintf(n->why, sizeof(n->why), "%.159s", why);
		said = true;
	}
	if (said)
		ING_WARN(f->pinned ? "producer" : COMP, "node %s: %s; using one rail", f->nodes[g].id, why);
}

static int node_dial(struct fleet *f, unsigned i, int timeout_ms);

/* The primary endpoint g is up: an endpoint for each of its node's other rails. */
static void rails_discover(struct fleet *f, unsigned g, int timeout_ms)
{
	struct fnode *pn = &f->nodes[g];
	struct ing_producer *sub = pn->sub;
	uint64_t now = ing_now_ns();

	if (sub->xport->kind != ING_TRANSPORT_RDMA)
		return;   /* the gRPC stream: rails are RDMA's */
	snprintf(pn->local_dev, sizeof(pn->local_dev), "%s", sub->local_dev);
	if (sub->nrails < 2) {
		if (!pn->rails_said)
			ING_INFO(f->pinned ? "producer" : COMP, "node %s lists %s (NegotiateReply.rails): "
				 "one RDMA connection, via %s", pn->id, sub->nrails ? "one rail" : "no rails",
				 sub->local_dev);
		pn->rails_said = true;
		snprintf(pn->rail, sizeof(pn->rail), "%s", sub->rail);
		return;
	}
	if (!sub->rail[0]) {
		if (!pn->rails_said)
			ING_WARN(f->pinned ? "producer" : COMP, "node %s lists %u rails but does not say "
				 "which one a session is on (NegotiateReply.rail): using one rail", pn->id,
				 sub->nrails);
		pn->rails_said = true;
		return;
	}
	if (!pn->rail[0])
		snprintf(pn->rail, sizeof(pn->rail), "%s", sub->rail);
	for (unsigned k = 0; k < sub->nrails; k++) {
		const struct prail *rk = &sub->rails[k];
		bool known = !strcmp(rk->dev, pn->rail);
		for (unsigned j = 0; j < f->nnodes && !known; j++)
			known = f->nodes[j].primary == (int)g && !strcmp(f->nodes[j].rail, rk->dev);
		if (known)
			continue;
		int j = node_add(f, pn->id, pn->addr, pn->member);
		if (j < 0)
			continue;
		struct fnode *n = &f->nodes[j];
		n->primary = (int)g;
		snprintf(n->rail, sizeof(n->rail), "%s", rk->dev);
		n->backoff_ms = RAIL_BACKOFF_MIN_MS;
		f->sh.fail_fast = true;   /* a lost rail: its frames to the others, not a reconnect */
		if (!rk->up) {
			n->failed = true;
			n->down_since_ns = now;
			n->down_until_ns = now + ms_ns(n->backoff_ms);
			snprintf(n->why, sizeof(n->why), "the node reports it down%s%s",
				 rk->why[0] ? ": " : "", rk->why);
			ING_WARN(f->pinned ? "producer" : COMP, "node %s rail %s (%s:%u) is down (%s): "
				 "tried again with back-off", pn->id, rk->dev, rk->addr, rk->port, n->why);
			continue;
		}
		(void)node_dial(f, (unsigned)j, timeout_ms);
	}
	pinned_note(f);
}

/* A rail endpoint's dial failed or its rail is down: its next try, with back-off. */
static void rail_wait(struct fleet *f, struct fnode *n, const char *why, bool gone)
{
	uint64_t now = ing_now_ns();
	const char *comp = f->pinned ? "producer" : COMP;

	n->failed = true;
	snprintf(n->why, sizeof(n->why), "%.159s", why);
	if (gone) {
		n->gone = true;
		ING_WARN(comp, "node %s rail %s not used: %s", n->id, n->rail, why);
		pinned_note(f);
		return;
	}
	if (!n->down_since_ns)
		n->down_since_ns = now;
	n->down_until_ns = now + ms_ns(n->backoff_ms);
	ING_LOG_RL(ING_LOG_WARN, comp, "node %s rail %s not back yet: %s; next try in %d ms (down "
		   "for %.1f s)", n->id, n->rail, why, n->backoff_ms, since_s(n->down_since_ns));
	n->backoff_ms = n->backoff_ms * 2 > RAIL_BACKOFF_MAX_MS ? RAIL_BACKOFF_MAX_MS
								 : n->backoff_ms * 2;
}

/* A rail endpoint's session is up: is it on the rail asked? 0, or -errno (sub destroyed). */
static int rail_connected(struct fleet *f, unsigned i, struct ing_producer *sub)
{
	struct fnode *n = &f->nodes[i];
	const char *comp = f->pinned ? "producer" : COMP;

	if (strcmp(sub->rail, n->rail) != 0) {
		/* the node put the session elsewhere: the rail is down there, or the node does not
		 * honour NegotiateRequest.rail (then one rail) */
		const struct prail *rk = NULL;
		for (unsigned k = 0; k < sub->nrails; k++)
			if (!strcmp(sub->rails[k].dev, n->rail))
				rk = &sub->rails[k];
		char why[256];
		bool down = rk && !rk->up;
		if (down)
			snprintf(why, sizeof(why), "the node reports it down%s%s", rk->why[0] ? ": " : "",
				 rk->why);
		else
			snprintf(why, sizeof(why), "it does not honour NegotiateRequest.rail (asked %s, "
				 "the session is on '%s')", n->rail, sub->rail);
		producer_destroy(sub);
		if (!down)
			rails_off(f, n->primary, why);
		if (down || n->primary == (int)i) {
			if (!down)
				n->rail[0] = '\0';   /* the primary: any rail the node gives */
			rail_wait(f, n, why, false);
		}
		return down ? -ENETDOWN : -EPROTO;
	}
	if (sub->xport->kind != ING_TRANSPORT_RDMA) {
		producer_destroy(sub);
		rail_wait(f, n, "the session is not on RDMA", true);
		return -EPROTO;
	}
	snprintf(n->local_dev, sizeof(n->local_dev), "%s", sub->local_dev);
	if (n->down_since_ns)
		ING_WARN(comp, "node %s rail %s is back (via %s, session %" PRIu64 ") after %.1f s down "
			 "(%s): it carries frames again", n->id, n->rail, n->local_dev, sub->session_id,
			 since_s(n->down_since_ns), n->why);
	else
		ING_INFO(comp, "node %s rail %s connected via %s, session %" PRIu64 ", %s", n->id,
			 n->rail, n->local_dev, sub->session_id, node_transport(sub));
	n->down_since_ns = 0;
	n->why[0] = '\0';
	n->backoff_ms = RAIL_BACKOFF_MIN_MS;
	return 0;
}

/* One server: a session is up again after every one was lost. */
static void pinned_back(struct fleet *f, struct fnode *n, struct ing_producer *sub)
{
	if (!f->give_up_ns)
		return;
	unsigned waiting = 0;
	for (unsigned k = 0; k < f->cap; k++)
		waiting += f->fr[k].used && !f->fr[k].on_node;
	ING_WARN("producer", "reconnected to %s%s%s (session %" PRIu64 ", transport %s): "
		 "re-sending %u frame(s) that were not DURABLE", n->addr, n->rail[0] ? " rail " : "",
		 n->rail, sub->session_id, node_transport(sub), waiting);
	f->give_up_ns = 0;
}

static int node_dial(struct fleet *f, unsigned i, int timeout_ms)
{
	struct fnode *n = &f->nodes[i];
	struct ing_producer_opts so = f->sub_o;
	/* a rail of a node: any endpoint once the node's rails are known (a primary that comes
	 * back must come back on its own rail, over RDMA) */
	bool rail_ep = n->primary != (int)i || (n->rail[0] && sibling_known(f, i));
	char err[256] = "";

	so.server = n->addr;
	so.connect_timeout_ms = timeout_ms;
	so.auth_token = f->s_auth;
	so.tls_ca = f->s_ca;
	so.tls_cert = f->s_cert;
	so.tls_key = f->s_key;
	so.tls_server_name = f->s_sni;
	if (rail_ep)
		so.transport = ING_TRANSPORT_RDMA;   /* a rail is RDMA or nothing */
	struct ing_producer *sub = producer_session_connect_shared(&so, &f->sh, n->rail, err,
								   sizeof(err));
	if (!sub && rail_ep) {
		/* no device of the list reaches the rail (EXDEV, conn_make), or none of them is on
		 * this host (EOPNOTSUPP): not used; else (a link down, a device gone: ENODEV,
		 * ETIMEDOUT, ...): again later */
		rail_wait(f, n, err, errno == EXDEV || errno == EOPNOTSUPP);
		return errno > 0 ? -errno : -ECONNREFUSED;
	}
	if (!sub) {
		int rc = errno > 0 ? -errno : -ECONNREFUSED;
		int wait = f->cooldown_ms;
		n->failed = true;
		f->last_rc = rc;
		snprintf(f->last_err, sizeof(f->last_err), "%s", err);
		if (f->pinned) {
			if (!n->backoff_ms)
				n->backoff_ms = PINNED_BACKOFF_MIN_MS;
			wait = n->backoff_ms;
			n->backoff_ms = n->backoff_ms * 2 > PINNED_BACKOFF_MAX_MS ? PINNED_BACKOFF_MAX_MS
										  : n->backoff_ms * 2;
		}
		n->down_until_ns = ing_now_ns() + ms_ns(wait);
		if (f->pinned && f->give_up_ns)
			ING_LOG_RL(ING_LOG_WARN, "producer", "%s not reachable yet: %s; next try in %d ms "
				   "(%d frame(s) kept to re-send, %.1f s left of reconnect_timeout_ms %d)",
				   n->addr, err, wait, (int)f->nused,
				   (double)(f->give_up_ns - ing_now_ns()) / 1e9, f->reconnect_ms);
		else if (f->pinned && f->nnodes > 1)
			ING_LOG_RL(ING_LOG_WARN, "producer", "node %s rail %s not back yet: %s; next try "
				   "in %d ms (down for %.1f s)", n->id, n->rail[0] ? n->rail : "?", err,
				   wait, since_s(n->down_since_ns));
		else if (!f->pinned)
			ING_LOG_RL(ING_LOG_WARN, COMP, "node %s (%s) not reachable: %s; next try in %d ms",
				   n->id, n->addr, err, wait);
		return rc;
	}
	sub->router = f;   /* striping: its node's other rails */
	if (rail_ep) {
		int rc = rail_connected(f, i, sub);
		if (rc)
			return rc;
		n->sub = sub;
		n->failed = false;
		if (f->pinned) {
			f->last_kind = sub->xport->kind;
			pinned_back(f, n, sub);
		}
		pinned_note(f);
		fleet_note(f);
		return 0;
	}
	if (f->pinned) {
		/* one server: the node's own id, transport and note are the application's */
		if (sub->node_id[0])
			snprintf(n->id, sizeof(n->id), "%s", sub->node_id);
		struct ing_producer *top = f->top;
		top->session_id = sub->session_id;
		if (top->max_frame)
			top->max_frame = sub->max_frame;   /* a reconnect: what the node says now */
		f->last_kind = sub->xport->kind;
		n->backoff_ms = PINNED_BACKOFF_MIN_MS;
		pinned_back(f, n, sub);
	}
	if (n->down_since_ns && f->nnodes > 1)
		ING_WARN(f->pinned ? "producer" : COMP, "node %s rail %s is back (session %" PRIu64
			 ") after %.1f s down (%s): it carries frames again", n->id,
			 n->rail[0] ? n->rail : "?", sub->session_id, since_s(n->down_since_ns), n->why);
	n->down_since_ns = 0;
	n->why[0] = '\0';
	n->sub = sub;
	n->failed = false;
	n->members_unimpl = false;
	rails_discover(f, i, timeout_ms);
	if (f->pinned) {
		pinned_note(f);
		return 0;   /* one server: sent to whatever its state (draining is for fleets) */
	}
	if (sub->node_state == H3000__MEMBER_STATE__MEMBER_DRAINING)
		n->member = ING_MEMBER_DRAINING;
	else if (sub->node_state == H3000__MEMBER_STATE__MEMBER_ACTIVE || n->member == ING_MEMBER_DOWN)
		n->member = ING_MEMBER_ACTIVE;
	if (!f->pinned && sub->node_id[0] && strcmp(sub->node_id, n->id) != 0)
		ING_LOG_RL(ING_LOG_WARN, COMP, "node at %s calls itself '%s', the membership says '%s'",
			   n->addr, sub->node_id, n->id);
	ING_INFO(COMP, "node %s (%s) connected, session %" PRIu64 ", %s, transport %s (%s)", n->id,
		 n->addr, sub->session_id, member_name(n->member), node_transport(sub), sub->note);
	fleet_note(f);
	return 0;
}

/* ================================================================ acks to the application */

static void fack(struct fleet *f, struct fframe *ff, enum ing_ack_stage stage, int ok, int code,
		 int retryable, const struct ing_ack *from, const char *node_id, const char *msg)
{
	struct ing_producer *p = f->top;
	bool terminal = !ok || stage == ING_ACK_DURABLE;
	if (f->aq_len == f->aq_cap) {
		ING_LOG_RL(ING_LOG_ERR, COMP, "ack queue full (%u): ack of frame %s lost", f->aq_cap,
			   ff->id);
		return;
	}
	struct pack_entry *e = &f->ackq[(f->aq_head + f->aq_len) % f->aq_cap];
	memset(e, 0, sizeof(*e));
	if (from)
		e->a = *from;
	e->terminal = terminal;
	memcpy(e->a.frame_id, ff->id, sizeof(e->a.frame_id));
	memcpy(e->a.wafer_id, ff->wafer, sizeof(e->a.wafer_id));
	e->a.stage = stage;
	e->a.ok = ok;
	e->a.code = code;
	e->a.retryable = retryable;
	e->a.latency_ns = ing_now_ns() - ff->t_submit_ns;
	e->a.user = ff->user;
	e->a.resends = ff->resends;
	e->a.stored = ok && stage == ING_ACK_DURABLE;
	snprintf(e->a.node_id, sizeof(e->a.node_id), "%s", node_id ? node_id : "");
	if (msg)
		snprintf(e->a.msg, sizeof(e->a.msg), "%s", msg);
	f->aq_len++;
	if (!terminal)
		return;
	if (ok) {
		p->st.durable++;
		p->st.bytes += ff->len;
		p->st.duplicates += e->a.duplicate ? 1 : 0;
	} else {
		p->st.failed++;
	}
	ff->used = false;
	f->nused--;
	f->undelivered_terminal++;
}

/* Take a frame off its node and queue it for the next one. */
static void frame_unplace(struct fleet *f, struct fframe *ff, bool refused)
{
	struct ing_producer *p = f->top;
	if (ff->node >= 0 && ff->on_node) {
		f->nodes[ff->node].rerouted_away++;
		ff->resends++;
		ff->rerouted = true;
		p->st.rerouted++;
	}
	if (refused && ff->group >= 0) {
		if (ff->group < 64)
			ff->refused |= 1ull << ff->group;
		ff->group = -1;   /* another node */
	}
	ff->node = -1;
	ff->on_node = false;
	ff->recv_here = false;
	ff->retry_at_ns = 0;   /* a wait for that node's earlier copy is over with it */
}

/*
 * Node i failed: its session is destroyed at once (no late ack can come from it), it
 * cools down, and every frame on it or queued for it goes to its wafer's next node.
 */
static void pinned_lost(struct fleet *f, unsigned i, const char *why);
static void fack(struct fleet *f, struct fframe *ff, enum ing_ack_stage stage, int ok, int code,
		 int retryable, const struct ing_ack *from, const char *node_id, const char *msg);

/*
 * Rail i of a node is lost while another rail of it is up: its session is destroyed (no
 * READ or ack can come through it any more), its frames in flight go to the other rails
 * (place_and_send), and it is redialled with back-off (rail_wait).
 */
static void rail_fail(struct fleet *f, unsigned i, const char *why)
{
	struct fnode *n = &f->nodes[i];
	struct ing_producer *p = f->top;
	unsigned moved = 0, recv = 0, handed = 0;
	char up[160] = "";

	for (unsigned k = 0; k < f->cap; k++) {
		struct fframe *ff = &f->fr[k];
		if (!ff->used || ff->node != (int)i)
			continue;
		if (f->pinned && ff->recv_delivered && p->o.recycle_on == ING_ACK_RECEIVED) {
			handed++;   /* as pinned_lost: its bytes are the application's again */
			fack(f, ff, ING_ACK_RECEIVED, 0, ING_ERR_TRANSFER, 1, NULL, n->id,
			     "rail lost after RECEIVED and before DURABLE; not re-sent: its buffer was "
			     "handed back at RECEIVED (recycle_on DURABLE keeps it for a re-send)");
			continue;
		}
		moved++;
		if (ff->recv_here) {
			recv++;
			p->st.resent_after_received++;
		}
		frame_unplace(f, ff, false);
	}
	struct ing_producer *sub = n->sub;
	n->sub = NULL;
	n->downs++;
	n->failovers++;
	p->st.failovers++;
	if (!f->first_failover_ns)
		f->first_failover_ns = ing_now_ns();
	producer_destroy(sub);   /* its QP is gone before any of its frames is re-sent */
	n->backoff_ms = RAIL_BACKOFF_MIN_MS;
	n->down_since_ns = 0;
	for (unsigned j = 0, o = 0; j < f->nnodes; j++)
		if (j != i && f->nodes[j].primary == n->primary && ep_up(&f->nodes[j]))
			o += (unsigned)snprintf(up + o, o < sizeof(up) ? sizeof(up) - o : 0, "%s%s",
						o ? ", " : "", f->nodes[j].rail);
	ING_WARN(f->pinned ? "producer" : COMP, "node %s rail %s (via %s) down: %s; %u frame(s) in "
		 "flight on it moved to rail(s) %s (%u had reached RECEIVED there)%s", n->id, n->rail,
		 n->local_dev[0] ? n->local_dev : "?", why, moved, up, recv,
		 handed ? "; frames whose buffer was handed back at RECEIVED failed (retryable)" : "");
	rail_wait(f, n, why, false);
	pinned_note(f);
	fleet_note(f);
}

static void node_fail(struct fleet *f, unsigned i, const char *why)
{
	struct fnode *n = &f->nodes[i];
	struct ing_producer *p = f->top;
	uint64_t now = ing_now_ns();
	unsigned moved = 0, recv = 0;

	if (sibling_up(f, i)) {
		rail_fail(f, i, why);
		return;
	}
	if (f->pinned) {
		pinned_lost(f, i, why);
		return;
	}

	for (unsigned k = 0; k < f->cap; k++) {
		struct fframe *ff = &f->fr[k];
		if (!ff->used || ff->node != (int)i)
			continue;
		if (ff->on_node) {
			moved++;
			/* a RECEIVED frame may be stored there too: same bytes, same crc32c */
			if (ff->recv_here) {
				recv++;
				p->st.resent_after_received++;
			}
		}
		frame_unplace(f, ff, false);
	}
	ING_WARN(COMP, "node %s (%s) failed: %s; %u frame(s) re-sent to the next nodes (%u had "
		 "reached RECEIVED there); cooldown %d ms", n->id, n->addr, why, moved, recv,
		 f->cooldown_ms);
	if (!f->first_failover_ns)
		f->first_failover_ns = now;
	n->failovers++;
	n->downs++;
	p->st.failovers++;
	struct ing_producer *sub = n->sub;
	n->sub = NULL;
	n->failed = true;
	n->down_since_ns = now;
	snprintf(n->why, sizeof(n->why), "%.159s", why);
	n->down_until_ns = now + ms_ns(f->cooldown_ms);
	producer_destroy(sub);   /* cancels an open Members call: its on_close clears mcall;
				  * over RDMA its QP is gone before any frame is re-sent */
	n->mcall = NULL;
	fleet_note(f);
}

/* ================================================================ one server */

/* Every frame kept fails (the connection is not coming back) and the producer is broken. */
static void pinned_give_up(struct fleet *f, const char *why)
{
	struct ing_producer *p = f->top;
	char m[512];

	snprintf(m, sizeof(m), "%s", why);
	for (unsigned k = 0; k < f->cap; k++) {
		struct fframe *ff = &f->fr[k];
		if (ff->used)
			fack(f, ff, ff->recv_delivered ? ING_ACK_RECEIVED : ING_ACK_NONE, 0,
			     ING_ERR_TRANSFER, 1, NULL, "", m);
	}
	p->broken = true;
	p->broken_err = f->last_rc < 0 ? f->last_rc : -EPIPE;
	snprintf(p->broken_msg, sizeof(p->broken_msg), "%.159s", m);
	ING_WARN("producer", "%s", m);
}

/*
 * The one node's connection is gone: its session is destroyed (no late ack), the frames
 * not DURABLE wait for the next session, except those the application took back at
 * RECEIVED; then redial with back-off, within reconnect_ms of the loss.
 */
static void pinned_lost(struct fleet *f, unsigned i, const char *why)
{
	struct fnode *n = &f->nodes[i];
	struct ing_producer *p = f->top;
	uint64_t now = ing_now_ns();
	unsigned kept = 0, handed = 0;

	snprintf(f->lost_why, sizeof(f->lost_why), "%s", why);
	struct ing_producer *sub = n->sub;
	f->last_rc = sub && sub->broken_err < 0 ? sub->broken_err : -ECONNRESET;
	n->sub = NULL;
	n->failed = true;
	n->failovers++;
	n->downs++;
	n->down_since_ns = now;
	snprintf(n->why, sizeof(n->why), "%.159s", why);
	p->st.failovers++;
	if (!f->first_failover_ns)
		f->first_failover_ns = now;
	producer_destroy(sub);   /* over RDMA its QP is gone before anything is re-sent */
	if (f->reconnect_ms < 0) {
		char m[400];
		snprintf(m, sizeof(m), "connection to %s lost: %s (reconnect_timeout_ms < 0: no reconnect)",
			 n->addr, why);
		pinned_give_up(f, m);
		return;
	}
	for (unsigned k = 0; k < f->cap; k++) {
		struct fframe *ff = &f->fr[k];
		if (!ff->used)
			continue;   /* one node: every frame is its */
		if (ff->recv_delivered && p->o.recycle_on == ING_ACK_RECEIVED) {
			/* its bytes are the application's again since its RECEIVED ack */
			handed++;
			fack(f, ff, ING_ACK_RECEIVED, 0, ING_ERR_TRANSFER, 1, NULL, n->id,
			     "connection lost after RECEIVED and before DURABLE; not re-sent: its buffer "
			     "was handed back at RECEIVED (recycle_on DURABLE keeps it for a re-send)");
			continue;
		}
		if (ff->on_node) {
			kept++;
			if (ff->recv_here)
				p->st.resent_after_received++;
		}
		frame_unplace(f, ff, false);
	}
	f->give_up_ns = now + ms_ns(f->reconnect_ms);
	n->backoff_ms = PINNED_BACKOFF_MIN_MS;
	n->down_until_ns = now + ms_ns(n->backoff_ms);
	snprintf(f->last_err, sizeof(f->last_err), "%s", why);
	ING_WARN("producer", "connection to %s lost: %s; reconnecting (for up to %d ms) to re-send "
		 "%u frame(s) not DURABLE%s", n->addr, why, f->reconnect_ms, kept,
		 handed ? "; frames whose buffer was handed back at RECEIVED failed (retryable)" : "");
}

/* Redial the one node when its back-off is over; give up past the limit. */
static void pinned_timers(struct fleet *f, uint64_t now)
{
	struct fnode *n = &f->nodes[0];
	struct ing_producer *p = f->top;

	if (p->broken)
		return;
	if (f->give_up_ns && now >= f->give_up_ns) {
		char m[1024];
		snprintf(m, sizeof(m), "connection to %s lost (%.120s) and not back within %d ms "
			 "(reconnect_timeout_ms): %.200s", n->addr, f->lost_why, f->reconnect_ms,
			 f->last_err);
		pinned_give_up(f, m);
		return;
	}
	int tmo = p->o.connect_timeout_ms < PINNED_REDIAL_TIMEOUT_MS ? p->o.connect_timeout_ms
								    : PINNED_REDIAL_TIMEOUT_MS;
	if (f->give_up_ns) {
		uint64_t left = (f->give_up_ns - now) / 1000000 + 1;
		if ((uint64_t)tmo > left)
			tmo = (int)left;
	}
	/* every rail down (or not dialled yet) whose back-off is over */
	for (unsigned i = 0; i < f->nnodes && !p->broken; i++) {
		n = &f->nodes[i];
		if (!n->sub && !n->gone && now >= n->down_until_ns)
			(void)node_dial(f, i, tmo);
	}
}

/* ================================================================ membership */

static void apply_members(struct fleet *f, struct fnode *from, const H3000__MembersReply *r)
{
	f->learned = true;
	for (size_t k = 0; k < r->n_members; k++) {
		const H3000__Member *m = r->members[k];
		if (!m || !m->nodeid || !*m->nodeid)
			continue;
		enum ing_member_state st = member_from_wire(m->state);
		bool self = r->selfid && strcmp(r->selfid, m->nodeid) == 0;
		int j = node_find_id(f, m->nodeid);
		if (j < 0) {
			/* a node listed by its address before its id was known */
			j = m->address ? node_find_addr(f, m->address) : -1;
			if (j >= 0 && strcmp(f->nodes[j].id, f->nodes[j].addr) == 0 && !f->nodes[j].sub) {
				snprintf(f->nodes[j].id, sizeof(f->nodes[j].id), "%s", m->nodeid);
			} else {
				j = node_add(f, m->nodeid, m->address, st);
				if (j >= 0)
					ING_INFO(COMP, "node %s (%s) joined the fleet (%s, told by %s)",
						 m->nodeid, m->address, member_name(st), from ? from->id : "?");
				continue;
			}
		}
		struct fnode *n = &f->nodes[j];
		/* while connected, only the node's own word about itself counts */
		if ((self || !n->sub) && st != ING_MEMBER_UNKNOWN && st != n->member) {
			ING_INFO(COMP, "node %s: %s -> %s", n->id, member_name(n->member), member_name(st));
			n->member = st;
		}
		if (!n->sub && m->address && *m->address && strcmp(m->address, n->addr) != 0 &&
		    strlen(m->address) < sizeof(n->addr))
			snprintf(n->addr, sizeof(n->addr), "%s", m->address);
	}
}

static void members_on_message(struct ing_grpc_ccall *cc, void *arg, const uint8_t *msg, size_t len)
{
	struct fnode *n = arg;
	(void)cc;
	H3000__MembersReply *r = h3000__members_reply__unpack(NULL, len, msg);
	if (!r) {
		ING_LOG_RL(ING_LOG_WARN, COMP, "node %s: Members reply does not parse", n->id);
		return;
	}
	apply_members(n->f, n, r);
	h3000__members_reply__free_unpacked(r, NULL);
}

static void members_on_close(struct ing_grpc_ccall *cc, void *arg, int status, const char *message)
{
	struct fnode *n = arg;
	(void)cc;
	n->mcall = NULL;
	if (status == ING_GRPC_UNIMPLEMENTED) {
		n->members_unimpl = true;   /* an older node: its id is its address */
		ING_DBG(COMP, "node %s has no Members rpc: static membership", n->id);
	} else if (status != ING_GRPC_OK && status != ING_GRPC_CANCELLED) {
		ING_LOG_RL(ING_LOG_DEBUG, COMP, "node %s: Members: grpc-status %d %s", n->id, status,
			   message ? message : "");
	}
}

static void members_refresh(struct fleet *f, uint64_t now)
{
	if (f->pinned || now < f->next_refresh_ns)
		return;
	f->next_refresh_ns = now + ms_ns(f->refresh_ms);
	for (unsigned i = 0; i < f->nnodes; i++) {
		struct fnode *n = &f->nodes[i];
		if (n->primary != (int)i || !n->sub || !n->sub->ch || n->sub->broken || n->mcall ||
		    n->members_unimpl)
			continue;   /* (a node's rails: its primary asks) */
		struct ing_grpc_ccall_cbs cbs = {
			.on_message = members_on_message, .on_close = members_on_close, .arg = n,
		};
		n->mcall = ing_grpc_chan_call(n->sub->ch, PRODUCER_PATH_MEMBERS, NULL,
					      FLEET_MEMBERS_TIMEOUT_MS, &cbs);
		if (n->mcall && ing_grpc_ccall_send(n->mcall, (const uint8_t *)"", 0, true) < 0)
			ing_grpc_ccall_cancel(n->mcall);   /* on_close clears mcall */
	}
}

/*
 * At connect: Members from every server given (blocking calls, bounded). A server that
 * answers is the node it calls itself (selfId), whatever address it advertises: answered[k]
 * is set. One that answers UNIMPLEMENTED or not at all is left to the caller.
 */
static void members_learn(struct fleet *f, char (*addrs)[256], unsigned naddr, int timeout_ms,
			  bool *answered)
{
	for (unsigned k = 0; k < naddr; k++) {
		struct ing_grpc_chan_opts co;
		char cerr[512] = "", gmsg[160] = "";
		uint8_t *resp = NULL;
		size_t rlen = 0;

		ing_grpc_chan_opts_init(&co);
		co.target = addrs[k];
		co.connect_timeout_ms = timeout_ms;
		co.tls = f->s_ca != NULL;
		co.tls_ca = f->s_ca;
		co.tls_cert = f->s_cert;
		co.tls_key = f->s_key;
		co.tls_server_name = f->s_sni;
		struct ing_grpc_chan *ch = ing_grpc_chan_connect(&co, cerr, sizeof(cerr));
		if (!ch)
			continue;
		int st = ing_grpc_unary(ch, PRODUCER_PATH_MEMBERS, NULL, (const uint8_t *)"", 0, &resp,
					&rlen, timeout_ms, gmsg, sizeof(gmsg));
		ing_grpc_chan_close(ch);
		if (st == ING_GRPC_OK) {
			H3000__MembersReply *r = h3000__members_reply__unpack(NULL, rlen, resp);
			if (r) {
				ING_INFO(COMP, "membership from %s: %zu member(s), source %s, epoch %" PRIu64,
					 addrs[k], r->n_members, r->source ? r->source : "?", r->epoch);
				apply_members(f, NULL, r);
				int j = r->selfid && *r->selfid ? node_find_id(f, r->selfid) : -1;
				if (j < 0 && r->selfid && *r->selfid)
					j = node_add(f, r->selfid, addrs[k], ING_MEMBER_ACTIVE);
				if (j >= 0) {
					answered[k] = true;
					/* dial it where the producer was told it is: known to be reachable */
					snprintf(f->nodes[j].addr, sizeof(f->nodes[j].addr), "%s", addrs[k]);
				}
				h3000__members_reply__free_unpacked(r, NULL);
			}
		} else if (st != ING_GRPC_UNIMPLEMENTED) {
			ING_LOG_RL(ING_LOG_WARN, COMP, "Members from %s: grpc-status %d %s", addrs[k], st,
				   gmsg);
		}
		free(resp);
	}
}

/* ================================================================ connect / close */

static char *dup_opt(const char *s)
{
	return s ? strdup(s) : NULL;
}

static const struct producer_ops fleet_ops;

static void fleet_free(struct ing_producer *p)
{
	struct fleet *f = p->fleet;
	if (f) {
		for (unsigned i = 0; i < f->nnodes; i++)
			if (f->nodes[i].sub)
				producer_destroy(f->nodes[i].sub);
		/* after every session: the pool's registrations (RDMA) */
		const struct producer_xport *rdma = PRODUCER_RDMA_XPORT;
		if (rdma && rdma->shared_release)
			rdma->shared_release(&f->sh);
		if (f->s_auth) {
			explicit_bzero(f->s_auth, strlen(f->s_auth));
			free(f->s_auth);
		}
		free(f->s_ca);
		free(f->s_cert);
		free(f->s_key);
		free(f->s_sni);
		free(f->fr);
		free(f->order);
		free(f->ackq);
		if (f->wake_fd >= 0)
			close(f->wake_fd);
		free(f);
	}
	p->fleet = NULL;
	producer_destroy(p);
}

/* the servers list "a:p,b:p, c:p" into addrs: how many, 0 with err set */
static unsigned parse_servers(const char *s, char (*addrs)[256], char *err, size_t errlen)
{
	const char *list = s;
	unsigned naddr = 0;
	while (*s) {
		while (*s == ',' || *s == ' ')
			s++;
		size_t l = strcspn(s, ", ");
		if (!l)
			break;
		if (naddr == FLEET_MAX_NODES || l >= sizeof(addrs[0])) {
			snprintf(err, errlen, "servers: %s", naddr == FLEET_MAX_NODES ?
				 "more than 64 nodes" : "an address longer than 255 characters");
			return 0;
		}
		memcpy(addrs[naddr], s, l);
		addrs[naddr][l] = '\0';
		naddr++;
		s += l;
	}
	if (!naddr)
		snprintf(err, errlen, "servers: no address in '%s'", list);
	return naddr;
}

/* the options of the node sessions: the transport asked for, keep until DURABLE, the
 * router's pool (producer_shared); the fleet keeps its own copies of the secrets and paths
 * (f->s_*) */
static int node_opts(struct fleet *f, const struct ing_producer_opts *o, char *err, size_t errlen)
{
	f->sub_o = f->top->o;
	f->sub_o.pool_frames = 0;
	f->sub_o.keepalive_ms = o->keepalive_ms ? o->keepalive_ms
						: f->pinned ? 0 : FLEET_DEFAULT_KEEPALIVE_MS;
	if (f->pinned)
		f->sub_o.frame_timeout_ms = INT_MAX / 2;   /* the router's deadline is the frame's */
	f->sub_o.servers = NULL;
	f->s_auth = dup_opt(o->auth_token);
	f->s_ca = dup_opt(o->tls_ca);
	f->s_cert = dup_opt(o->tls_cert);
	f->s_key = dup_opt(o->tls_key);
	f->s_sni = dup_opt(o->tls_server_name);
	if ((o->auth_token && !f->s_auth) || (o->tls_ca && !f->s_ca) || (o->tls_cert && !f->s_cert) ||
	    (o->tls_key && !f->s_key) || (o->tls_server_name && !f->s_sni)) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	f->sub_o.auth_token = f->sub_o.tls_ca = f->sub_o.tls_cert = f->sub_o.tls_key = NULL;
	f->sub_o.tls_server_name = NULL;
	return 0;
}

/* the window: what the nodes up give together, room for the ones not up yet */
static int window_alloc(struct fleet *f, unsigned credits, unsigned up, char *err, size_t errlen)
{
	f->cap = credits + credits / up * (f->nnodes - up);
	if (f->cap > FLEET_MAX_FRAMES)
		f->cap = FLEET_MAX_FRAMES;
	f->fr = calloc(f->cap, sizeof(*f->fr));
	f->order = calloc(f->cap, sizeof(*f->order));
	f->aq_cap = 2 * f->cap + 2;
	f->ackq = calloc(f->aq_cap, sizeof(*f->ackq));
	if (!f->fr || !f->order || !f->ackq) {
		snprintf(err, errlen, "out of memory (%u frames)", f->cap);
		return -1;
	}
	return 0;
}

struct ing_producer *fleet_connect(const struct ing_producer_opts *o, char *err, size_t errlen)
{
	char (*addrs)[256] = calloc(FLEET_MAX_NODES, sizeof(*addrs));
	unsigned naddr = 0;
	struct ing_producer *p = calloc(1, sizeof(*p));
	struct fleet *f = calloc(1, sizeof(*f));

	if (!p || !f || !addrs) {
		free(p);
		free(f);
		free(addrs);
		snprintf(err, errlen, "out of memory");
		errno = ENOMEM;
		return NULL;
	}
	p->fleet = f;
	p->ops = &fleet_ops;
	f->top = p;
	f->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	f->pinned = !o->servers || !*o->servers;
	p->o = *o;
	if (!f->pinned)
		p->o.recycle_on = ING_ACK_DURABLE;   /* a re-send reads the bytes again */
	else if (p->o.recycle_on == ING_ACK_NONE)
		p->o.recycle_on = ING_ACK_RECEIVED;
	if (f->wake_fd < 0) {
		snprintf(err, errlen, "eventfd: %s", strerror(errno));
		errno = errno ? errno : ENOMEM;
		goto fail_early;
	}
	snprintf(p->client_name, sizeof(p->client_name), "%s",
		 o->client_name ? o->client_name : "libingest");
	p->o.client_name = p->client_name;
	p->o.servers = NULL;
	p->o.server = NULL;
	if (p->o.connect_timeout_ms <= 0)
		p->o.connect_timeout_ms = PRODUCER_DEFAULT_CONNECT_MS;
	if (p->o.frame_timeout_ms <= 0)
		p->o.frame_timeout_ms = PRODUCER_DEFAULT_FRAME_TIMEOUT_MS;
	if (!p->o.pool_frame_size)
		p->o.pool_frame_size = PRODUCER_DEFAULT_POOL_FRAME;
	/* one server: no ack deadline unless asked (a slow node is not failed over to itself) */
	f->ack_deadline_ms = o->ack_deadline_ms > 0 ? o->ack_deadline_ms
			   : f->pinned ? 0 : FLEET_DEFAULT_ACK_DEADLINE_MS;
	f->reconnect_ms = o->reconnect_timeout_ms > 0 ? o->reconnect_timeout_ms
			: o->reconnect_timeout_ms < 0 ? -1 : PINNED_DEFAULT_RECONNECT_MS;
	f->cooldown_ms = o->node_cooldown_ms > 0 ? o->node_cooldown_ms : FLEET_DEFAULT_COOLDOWN_MS;
	f->refresh_ms = o->membership_refresh_ms > 0 ? o->membership_refresh_ms : FLEET_DEFAULT_REFRESH_MS;

	if (f->pinned) {
		if (strlen(o->server) >= sizeof(addrs[0])) {
			snprintf(err, errlen, "server: an address longer than 255 characters");
			errno = EINVAL;
			goto fail;
		}
		snprintf(addrs[0], sizeof(addrs[0]), "%s", o->server);
		naddr = 1;
	} else {
		naddr = parse_servers(o->servers, addrs, err, errlen);
	}
	errno = EINVAL;
	if (!naddr || node_opts(f, o, err, errlen))
		goto fail;

	/* the frame pool every node session uses (registered per RDMA device as they connect) */
	if (p->o.pool_frames) {
		int rc = producer_pool_create(&p->pool, p->o.pool_frames, p->o.pool_frame_size);
		if (rc) {
			snprintf(err, errlen, "frame pool %u x %" PRIu64 " bytes: %s", p->o.pool_frames,
				 p->o.pool_frame_size, strerror(-rc));
			errno = -rc;
			goto fail;
		}
	} else if (p->o.transport == ING_TRANSPORT_RDMA && !f->pinned) {
		snprintf(err, errlen, "transport rdma needs a registered frame pool (opts.pool_frames; "
			 "frames from ing_frame_alloc)");
		errno = EINVAL;
		goto fail;
	}
	p->pl = &p->pool;
	f->sh.pool = &p->pool;
	/* one server: its session keeps rdma_producer.c's own RDMA reconnect (same session,
	 * the node re-reads the parked frames); the router redials when the session breaks */
	f->sh.fail_fast = !f->pinned;

	if (f->pinned) {
		(void)node_add(f, addrs[0], addrs[0], ING_MEMBER_UNKNOWN);
		int rc = node_dial(f, 0, p->o.connect_timeout_ms);
		if (rc) {
			snprintf(err, errlen, "%s", f->last_err);
			errno = -rc;
			goto fail;
		}
		struct ing_producer *sub = f->nodes[0].sub;
		unsigned credits = 0;
		for (unsigned i = 0; i < f->nnodes; i++)   /* its rails' together */
			credits += f->nodes[i].sub ? f->nodes[i].sub->credits : 0;
		if (window_alloc(f, credits, 1, err, errlen)) {
			errno = ENOMEM;
			goto fail;
		}
		p->credits = f->cap;
		p->max_frame = sub->max_frame;
		p->o.auth_token = NULL;
		p->o.tls_ca = p->o.tls_cert = p->o.tls_key = p->o.tls_server_name = NULL;
		free(addrs);
		return p;
	}

	bool answered[FLEET_MAX_NODES] = { false };
	members_learn(f, addrs, naddr, p->o.connect_timeout_ms, answered);
	/* a server with no Members rpc, or unreachable and not in the membership: its id is
	 * its address as given */
	for (unsigned k = 0; k < naddr; k++)
		if (!answered[k] && node_find_addr(f, addrs[k]) < 0 && node_find_id(f, addrs[k]) < 0)
			(void)node_add(f, addrs[k], addrs[k], ING_MEMBER_UNKNOWN);

	unsigned up = 0, credits = 0;
	uint64_t max_frame = 0;
	for (unsigned i = 0; i < f->nnodes; i++) {
		if (f->nodes[i].member == ING_MEMBER_DOWN)
			continue;
		if (node_dial(f, i, p->o.connect_timeout_ms) == 0) {
			struct ing_producer *sub = f->nodes[i].sub;
			up++;
			credits += sub->credits;
			if (!max_frame || sub->max_frame < max_frame)
				max_frame = sub->max_frame;
		}
	}
	if (!up) {
		snprintf(err, errlen, "no ingest node reachable of %u (servers '%.160s')", f->nnodes,
			 o->servers);
		errno = f->last_rc < 0 ? -f->last_rc : ECONNREFUSED;
		goto fail;
	}
	if (window_alloc(f, credits, up, err, errlen)) {
		errno = ENOMEM;
		goto fail;
	}
	p->credits = f->cap;
	p->max_frame = max_frame;
	fleet_note(f);
	f->next_refresh_ns = ing_now_ns() + ms_ns(f->refresh_ms);
	p->o.auth_token = NULL;
	p->o.tls_ca = p->o.tls_cert = p->o.tls_key = p->o.tls_server_name = NULL;
	ING_INFO(COMP, "%s; window %u frames, max frame %" PRIu64, p->note, f->cap, p->max_frame);
	free(addrs);
	return p;
fail:
fail_early:;
	/* the caller has err (ingest-send prints it): a log line would say it twice */
	int e = errno ? errno : EPROTO;
	ING_INFO(COMP, "connect: %s", err);
	free(addrs);
	fleet_free(p);
	errno = e;
	return NULL;
}

/* ================================================================ the work */

/*
 * What a failed ack says beyond its code (the node's answer, or the session's own for the
 * frames it held when its connection broke).
 *
 * ack_conn_lost: the frame went with its connection or its node, it was not refused for
 * itself: TRANSFER marked retryable (the session's frames when its connection broke; the
 * node's frames of an RDMA connection that did not come back within its park time; an RDMA
 * post on a QP in error), NO_TRANSPORT (the session has no RDMA connection left on the node:
 * a new session negotiates again), SHUTTING_DOWN (the node stops), CANCELLED (the node ended
 * the call's frames). The node fails: with one server the connection is redialled and every
 * frame not DURABLE is sent again. A TRANSFER that is not retryable is the frame's own
 * transfer refused by the hardware (a READ or WRITE with an access or length error: a bad
 * rkey, a range beyond the registered memory, a write outside its grant): the node fails
 * that frame alone and the session re-establishes its QP (rdma_producer.c), so nothing else
 * is sent again, and that frame would fail the same way on any node: the application's.
 *
 * ack_in_flight: the node holds this (wafer, frame) in flight already, from an earlier send
 * whose outcome it has not reached (control/service/core.c admission answers
 * ERROR_INVALID_ARGUMENT marked retryable, the only retryable INVALID_ARGUMENT): the send on
 * a session lost a moment ago, which the node still makes DURABLE (persistence) or fails (an
 * RDMA connection that did not come back, after its park time), or another producer's send
 * of the same frame. Not the frame's fault and not final: see frame_retry_later.
 */
static bool ack_conn_lost(const struct ing_ack *a)
{
	switch (a->code) {
	case ING_ERR_TRANSFER:
		return a->retryable;
	case ING_ERR_NO_TRANSPORT:
	case ING_ERR_SHUTTING_DOWN:
	case ING_ERR_CANCELLED:
		return true;
	default:
		return false;
	}
}

static bool ack_in_flight(const struct ing_ack *a)
{
	return !a->ok && a->code == ING_ERR_INVALID_ARGUMENT && a->retryable;
}

/*
 * The node still holds an earlier send of ff (ack_in_flight): ff stays placed on that node
 * and goes to it again after a back-off (100 ms doubling to 2 s), until that copy has ended:
 * then the node stores it (the copy failed) or acks it DURABLE as a duplicate (the copy was
 * stored), so the application gets one DURABLE ack and the node holds one copy. Bounded by
 * the frame's deadline like any wait.
 */
static void frame_retry_later(struct fleet *f, struct fframe *ff, const char *nid, const char *msg)
{
	struct ing_producer *p = f->top;

	ff->retry_ms = !ff->retry_ms ? INFLIGHT_RETRY_MIN_MS
		     : ff->retry_ms * 2 > INFLIGHT_RETRY_MAX_MS ? INFLIGHT_RETRY_MAX_MS
								 : ff->retry_ms * 2;
	ff->retry_at_ns = ing_now_ns() + ms_ns(ff->retry_ms);
	ff->node = -1;   /* the node (group) stays: any of its rails */
	ff->on_node = false;
	ff->recv_here = false;
	ff->resends++;
	p->st.rerouted++;
	ING_LOG_RL(ING_LOG_WARN, f->pinned ? "producer" : COMP, "frame %s: node %s still holds an "
		   "earlier send of it in flight (%s); sending it again in %d ms, once that one has "
		   "ended it is stored or acked as a duplicate", ff->id, nid, msg, ff->retry_ms);
}

static void handle_ack(struct fleet *f, unsigned i, const struct ing_ack *a)
{
	struct ing_producer *p = f->top;
	struct fnode *n = &f->nodes[i];
	struct fframe *ff = a->user;
	const char *nid = f->pinned ? a->node_id : n->id;   /* one server: what the node says */

	/* matched per node and per frame state: anything else is late (or stale) */
	if (!ff || ff < f->fr || ff >= f->fr + f->cap || !ff->used || ff->node != (int)i ||
	    !ff->on_node || strcmp(ff->id, a->frame_id) != 0 || strcmp(ff->wafer, a->wafer_id) != 0) {
		p->st.late_acks++;
		return;
	}
	if (a->ok && a->stage == ING_ACK_RECEIVED) {
		ff->recv_here = true;
		if (!ff->recv_delivered) {
			ff->recv_delivered = true;
			p->st.received++;
			fack(f, ff, ING_ACK_RECEIVED, 1, 0, 0, a, nid, a->msg);
		}
		return;
	}
	if (a->ok) {
		if (!ff->recv_delivered) {
			ff->recv_delivered = true;
			p->st.received++;
		}
		n->durable++;
		n->bytes += ff->len;
		if (ff->rerouted && f->first_failover_ns && !p->st.first_failover_to_durable_ns)
			p->st.first_failover_to_durable_ns = ing_now_ns() - f->first_failover_ns;
		fack(f, ff, ING_ACK_DURABLE, 1, 0, 0, a, nid, a->msg);
		return;
	}
	if (ack_in_flight(a)) {
		frame_retry_later(f, ff, nid, a->msg);
		return;
	}
	/* the node, not the frame: all its frames move (node_fail re-places this one); in a
	 * fleet also a node that did not finish a frame in time (hung: DEADLINE) */
	if (ack_conn_lost(a) || (!f->pinned && a->code == ING_ERR_DEADLINE)) {
		node_fail(f, i, a->msg[0] ? a->msg : ing_strerror(a->code));
		return;
	}
	if (a->code == ING_ERR_BUSY && sibling_up(f, i)) {
		/* a rail the node cannot take it on now (its RDMA connection down there, no
		 * credit): another rail of the node, not a failure */
		ING_LOG_RL(ING_LOG_WARN, f->pinned ? "producer" : COMP, "node %s rail %s refused "
			   "frame %s (%s): sending it over another rail", n->id, n->rail, ff->id, a->msg);
		frame_unplace(f, ff, false);
		ff->avoid = (int)i;
		return;
	}
	if (!f->pinned && (a->code == ING_ERR_IO || a->code == ING_ERR_NO_SPACE ||
			   a->code == ING_ERR_BUSY)) {
		ING_LOG_RL(ING_LOG_WARN, COMP, "node %s refused frame %s (%s): trying the next node",
			   n->id, ff->id, ing_strerror(a->code));
		frame_unplace(f, ff, true);
		return;
	}
	/* the frame itself (crc, conflict, size, a transfer the hardware refused, ...): every
	 * node would say the same; with one server also its refusals (busy, full, I/O, a frame
	 * not finished in time), as a plain session's: the application decides (retryable) */
	fack(f, ff, ff->recv_delivered ? ING_ACK_RECEIVED : ING_ACK_NONE, 0, a->code,
	     a->retryable, a, nid, a->msg);
}

static int cmp_seq(const void *x, const void *y, void *arg)
{
	const struct fframe *fr = arg;
	uint64_t a = fr[*(const uint32_t *)x].seq, b = fr[*(const uint32_t *)y].seq;
	return a < b ? -1 : a > b;
}

/* Place waiting frames on their wafer's owner and hand them to its session, in submit order:
 * the owner by HRW (route_pick, kept while the node takes wafers), the rail of the owner
 * with the fewest bytes in flight (rail_pick). */
static void place_and_send(struct fleet *f)
{
	bool blocked[FLEET_MAX_NODES] = { false };
	uint64_t load[FLEET_MAX_NODES] = { 0 };
	unsigned n = 0;

	uint64_t now = ing_now_ns();

	for (unsigned k = 0; k < f->cap; k++) {
		struct fframe *ff = &f->fr[k];
		if (!ff->used)
			continue;
		if (ff->on_node) {
			load[ff->node] += ff->len;
			continue;
		}
		if (now < ff->retry_at_ns)
			continue;   /* (waits for the node's earlier copy: frame_retry_later) */
		/* its node stopped taking wafers (draining, failed): another */
		if (ff->group >= 0 && !group_eligible(f, ff->group))
			ff->group = -1;
		if (ff->group < 0) {
			ff->group = route_pick(f, ff->wafer, ff->refused);
			if (ff->group < 0 && ff->refused)
				ff->group = route_pick(f, ff->wafer, 0);   /* all refused: ask again */
		}
		if (ff->group >= 0)
			f->order[n++] = k;
	}
	if (n > 1)
		qsort_r(f->order, n, sizeof(*f->order), cmp_seq, f->fr);
	for (unsigned k = 0; k < n; k++) {
		struct fframe *ff = &f->fr[f->order[k]];
		struct ing_frame_desc d = {
			.frame_id = ff->id, .wafer_id = ff->wafer, .timestamp = ff->ts, .data = ff->data,
			.length = ff->len, .crc32c = ff->crc, .has_crc = 1, .user = ff,
		};
		int e;
		while (ff->used && !ff->on_node && (e = rail_pick(f, ff->group, load, blocked, ff->avoid)) >= 0) {
			struct fnode *nd = &f->nodes[e];
			int rc = producer_session_submit(nd->sub, &d);
			if (rc == 0) {
				ff->node = e;
				ff->on_node = true;
				ff->t_sent_ns = ing_now_ns();
				load[e] += ff->len;
				f->rail_next = (unsigned)e + 1;
			} else if (rc == -EAGAIN || rc == -EPIPE) {
				blocked[e] = true;   /* no credit there now / failure seen on poll */
			} else if (rc == -EINVAL && ff->len <= nd->sub->max_frame) {
				blocked[e] = true;   /* an earlier copy of it still there: wait */
			} else {
				fack(f, ff, ING_ACK_NONE, 0, ING_ERR_INVALID_ARGUMENT, 0, NULL, nd->id,
				     rc == -EINVAL ? "frame larger than the node's maximum" : strerror(-rc));
			}
		}
	}
}

static void check_timers(struct fleet *f, uint64_t now)
{
	/* a frame on a node for longer than the ack deadline: the node is hung */
	for (unsigned k = 0; k < f->cap; k++) {
		struct fframe *ff = &f->fr[k];
		if (f->ack_deadline_ms && ff->used && ff->on_node &&
		    now - ff->t_sent_ns > ms_ns(f->ack_deadline_ms)) {
			char why[ING_ID_MAX + 96];
			snprintf(why, sizeof(why), "no DURABLE ack for frame %s within %d ms", ff->id,
				 f->ack_deadline_ms);
			node_fail(f, (unsigned)ff->node, why);
		}
	}
	/* the application's own deadline: the frame fails wherever it is */
	for (unsigned k = 0; k < f->cap; k++) {
		struct fframe *ff = &f->fr[k];
		if (!ff->used || now < ff->deadline_ns)
			continue;
		char m[160];
		snprintf(m, sizeof(m), "no DURABLE ack within %d ms (%u re-send(s)%s)",
			 f->top->o.frame_timeout_ms, ff->resends, ff->retry_ms ?
			 "; the node still held an earlier send of it in flight" : "");
		fack(f, ff, ff->recv_delivered ? ING_ACK_RECEIVED : ING_ACK_NONE, 0, ING_ERR_DEADLINE, 1,
		     NULL, ff->group >= 0 ? f->nodes[ff->group].id : "", m);
	}
	if (f->pinned) {
		pinned_timers(f, now);
		return;
	}
	/* cooled-down nodes (and new members): dial */
	for (unsigned i = 0; i < f->nnodes; i++) {
		struct fnode *n = &f->nodes[i];
		if (n->sub || n->gone || now < n->down_until_ns)
			continue;
		int tmo = f->top->o.connect_timeout_ms < FLEET_REDIAL_TIMEOUT_MS ?
				  f->top->o.connect_timeout_ms : FLEET_REDIAL_TIMEOUT_MS;
		(void)node_dial(f, i, tmo);
	}
	members_refresh(f, now);
}

/* One pass without waiting: sends, every node's I/O and acks, failures, timers. */
static void fleet_pass(struct fleet *f)
{
	struct ing_ack acks[FLEET_SUB_ACKS];

	place_and_send(f);
	for (unsigned i = 0; i < f->nnodes; i++) {
		struct fnode *n = &f->nodes[i];
		if (!n->sub)
			continue;
		int got = producer_session_poll(n->sub, acks, FLEET_SUB_ACKS, sizeof(acks[0]), 0);
		/* acks first: DURABLE acks that came in before a break count */
		for (int k = 0; k < got && n->sub; k++)
			handle_ack(f, i, &acks[k]);
		if (n->sub && (n->sub->broken || !n->sub->call)) {
			/* broken, or the node ended the stream (GOAWAY on shutdown) */
			node_fail(f, i, n->sub->broken ? n->sub->broken_msg : "the node closed the stream");
		}
	}
	check_timers(f, ing_now_ns());
	place_and_send(f);
}

/* Wait for any node's socket, at most wait_ms. */
static void fleet_wait(struct fleet *f, int wait_ms)
{
	struct pollfd pfd[FLEET_MAX_NODES + 1];
	nfds_t n = 0;
	pfd[n++] = (struct pollfd){ .fd = f->wake_fd, .events = POLLIN };
	for (unsigned i = 0; i < f->nnodes; i++) {
		struct ing_producer *s = f->nodes[i].sub;
		if (!s || !s->ch)
			continue;
		pfd[n].fd = ing_grpc_chan_fd(s->ch);
		pfd[n].events = POLLIN | (ing_grpc_chan_pending(s->ch) ? POLLOUT : 0);
		pfd[n].revents = 0;
		n++;
	}
	if (poll(pfd, n, wait_ms) > 0 && (pfd[0].revents & POLLIN)) {
		uint64_t v;
		(void)!read(f->wake_fd, &v, sizeof(v));   /* drained; woken says it */
	}
}

void fleet_wake(struct ing_producer *p)
{
	struct fleet *f = p->fleet;
	uint64_t one = 1;

	atomic_store_explicit(&f->woken, 1, memory_order_release);
	(void)!write(f->wake_fd, &one, sizeof(one));
}

static int fleet_submit(struct ing_producer *p, const struct ing_frame_desc *d)
{
	struct fleet *f = p->fleet;
	const char *wafer = d->wafer_id && *d->wafer_id ? d->wafer_id : ING_DEFAULT_WAFER;

	if (p->broken)
		return -EPIPE;
	if (!d->data || d->length == 0 || d->length > p->max_frame || !producer_id_ok(d->frame_id) ||
	    !producer_id_ok(wafer))
		return -EINVAL;
	/* any node may get it, over RDMA: it must be in the registered pool (as one session's) */
	const uint8_t *b = d->data;
	if (f->pinned) {
		/* one server: its transport says (RDMA: inside the pool), as a plain session */
		struct ing_producer *sub = NULL;
		for (unsigned i = 0; i < f->nnodes && !sub; i++)
			sub = f->nodes[i].sub;
		int rc = sub && sub->xport->check ? sub->xport->check(sub, d) : 0;
		if (rc)
			return rc;
	} else if (p->o.transport != ING_TRANSPORT_GRPC && p->pool.base &&
	    (b < p->pool.base || b >= p->pool.base + p->pool.len ||
	     d->length > (uint64_t)(p->pool.base + p->pool.len - b))) {
		ING_LOG_RL(ING_LOG_ERR, COMP, "frame %s: %" PRIu64 " bytes at %p are not inside the registered frame pool (%p, %zu bytes): fleet frames over RDMA must come from ing_frame_alloc (-EFAULT)",
			   d->frame_id, d->length, d->data, p->pool.base, p->pool.len);
		return -EFAULT;
	}
	int free_k = -1;
	for (unsigned k = 0; k < f->cap; k++) {
		struct fframe *ff = &f->fr[k];
		if (!ff->used) {
			if (free_k < 0)
				free_k = (int)k;
			continue;
		}
		if (strcmp(ff->id, d->frame_id) == 0 && strcmp(ff->wafer, wafer) == 0)
			return -EINVAL;    /* same (wafer, frame) already in flight */
	}
	if (f->nused + f->undelivered_terminal >= f->cap || free_k < 0)
		return -EAGAIN;
	struct fframe *ff = &f->fr[free_k];
	memset(ff, 0, sizeof(*ff));
	ff->used = true;
	snprintf(ff->id, sizeof(ff->id), "%s", d->frame_id);
	snprintf(ff->wafer, sizeof(ff->wafer), "%s", wafer);
	ff->data = d->data;
	ff->len = d->length;
	ff->crc = d->has_crc ? d->crc32c : ing_crc32c(0, d->data, d->length);
	ff->ts = d->timestamp ? d->timestamp : ing_wall_ns();
	ff->user = d->user;
	ff->node = -1;
	ff->group = -1;
	ff->avoid = -1;
	ff->seq = ++f->seq;
	ff->t_submit_ns = ing_now_ns();
	ff->deadline_ns = ff->t_submit_ns + ms_ns(p->o.frame_timeout_ms);
	f->nused++;
	p->st.submitted++;
	place_and_send(f);
	return 0;
}

static int fleet_poll(struct ing_producer *p, struct ing_ack *acks, unsigned max, size_t ack_size,
	       int timeout_ms)
{
	struct fleet *f = p->fleet;
	if (timeout_ms < 0 || timeout_ms > p->o.frame_timeout_ms)
		timeout_ms = p->o.frame_timeout_ms;
	uint64_t deadline = ing_now_ns() + ms_ns(timeout_ms);

	for (;;) {
		fleet_pass(f);
		uint64_t now = ing_now_ns();
		if ((f->aq_len && max) || now >= deadline)
			break;
		if (p->broken && !f->nused)
			break;
		if (atomic_exchange_explicit(&f->woken, 0, memory_order_acq_rel))
			break;   /* ing_producer_wake */
		uint64_t left = (deadline - now + 999999) / 1000000;
		fleet_wait(f, left > FLEET_POLL_SLICE_MS ? FLEET_POLL_SLICE_MS : (int)left);
	}
	unsigned n = 0;
	while (n < max && f->aq_len) {
		struct pack_entry *e = &f->ackq[f->aq_head];
		if (acks) {
			char *dst = (char *)acks + (size_t)n * ack_size;
			memcpy(dst, &e->a, ack_size < sizeof(e->a) ? ack_size : sizeof(e->a));
			if (ack_size > sizeof(e->a))
				memset(dst + sizeof(e->a), 0, ack_size - sizeof(e->a));
		}
		n++;
		if (e->terminal)
			f->undelivered_terminal--;
		f->aq_head = (f->aq_head + 1) % f->aq_cap;
		f->aq_len--;
	}
	if (!n && p->broken && !f->nused && !f->aq_len)
		return p->broken_err < 0 ? p->broken_err : -EPIPE;
	return (int)n;
}

static void fleet_close(struct ing_producer *p, int timeout_ms)
{
	struct fleet *f = p->fleet;
	struct ing_ack scratch[16];
	if (timeout_ms < 0)
		timeout_ms = 0;
	uint64_t deadline = ing_now_ns() + ms_ns(timeout_ms);
	while (f->nused && ing_now_ns() < deadline) {
		uint64_t left = (deadline - ing_now_ns()) / 1000000;
		(void)fleet_poll(p, scratch, 16, sizeof(scratch[0]), (int)(left ? left : 1));
	}
	if (f->nused)
		ING_WARN(f->pinned ? "producer" : COMP, "closing with %u frame(s) not DURABLE", f->nused);
	for (unsigned i = 0; i < f->nnodes; i++) {
		if (f->nodes[i].sub) {
			producer_session_close(f->nodes[i].sub, 0);
			f->nodes[i].sub = NULL;
		}
	}
	ING_DBG(COMP, "closed: %" PRIu64 " submitted, %" PRIu64 " durable, %" PRIu64 " failed, %" PRIu64
		" re-sent, %" PRIu64 " failovers", p->st.submitted, p->st.durable, p->st.failed,
		p->st.rerouted, p->st.failovers);
	fleet_free(p);
}

static unsigned fleet_in_flight(const struct ing_producer *p)
{
	return p->fleet->nused + p->fleet->undelivered_terminal;
}

static void fleet_stats(const struct ing_producer *p, struct ing_producer_stats *st)
{
	const struct fleet *f = p->fleet;
	st->nodes = 0;
	st->nodes_up = 0;
	for (unsigned i = 0; i < f->nnodes; i++) {
		if (f->nodes[i].primary != (int)i)
			continue;   /* a rail of a node */
		st->nodes++;
		st->nodes_up += group_eligible(f, (int)i);
	}
}

/* RDMA when a connected node session uses it (the note says which, to how many). */
static enum ing_transport fleet_transport(const struct ing_producer *p)
{
	const struct fleet *f = p->fleet;

	if (f->pinned) {
		for (unsigned i = 0; i < f->nnodes; i++)
			if (f->nodes[i].sub)
				return f->nodes[i].sub->xport->kind;
		return f->last_kind;
	}
	for (unsigned i = 0; i < f->nnodes; i++)
		if (f->nodes[i].sub && f->nodes[i].sub->xport->kind == ING_TRANSPORT_RDMA)
			return ING_TRANSPORT_RDMA;
	return ING_TRANSPORT_GRPC;
}

/* The router as the layer behind the application's handle (api.c). */
static const struct producer_ops fleet_ops = {
	.name = "fleet",
	.submit = fleet_submit,
	.poll = fleet_poll,
	.close = fleet_close,
	.in_flight = fleet_in_flight,
	.stats = fleet_stats,
	.transport = fleet_transport,
};

/* The i-th node (primary endpoint), -1 past the last. */
static int nth_node(const struct fleet *f, unsigned i)
{
	for (unsigned j = 0; j < f->nnodes; j++)
		if (f->nodes[j].primary == (int)j && i-- == 0)
			return (int)j;
	return -1;
}

int ing_producer_fleet_node_sz(const struct ing_producer *p, unsigned i, struct ing_fleet_node *out,
			       size_t node_size)
{
	struct ing_fleet_node n;
	int g = p && p->fleet ? nth_node(p->fleet, i) : -1;
	if (!out || g < 0)
		return -ENOENT;
	const struct fleet *f = p->fleet;
	const struct fnode *fn = &f->nodes[g];
	memset(&n, 0, sizeof(n));
	snprintf(n.node_id, sizeof(n.node_id), "%s", fn->id);
	snprintf(n.address, sizeof(n.address), "%s", fn->addr);
	n.state = !group_eligible(f, g) && fn->failed ? ING_MEMBER_DOWN
		: fn->member == ING_MEMBER_UNKNOWN ? ING_MEMBER_ACTIVE : fn->member;
	/* the node's rails together */
	for (unsigned j = 0; j < f->nnodes; j++) {
		const struct fnode *e = &f->nodes[j];
		if (e->primary != g)
			continue;
		n.connected |= e->sub != NULL;
		n.durable += e->durable;
		n.rerouted_away += e->rerouted_away;
		n.failovers += e->failovers;
	}
	memcpy(out, &n, node_size < sizeof(n) ? node_size : sizeof(n));
	if (node_size > sizeof(n))
		memset((char *)out + sizeof(n), 0, node_size - sizeof(n));
	return 0;
}

int ing_producer_rail_sz(const struct ing_producer *p, unsigned i, struct ing_rail *out,
			 size_t rail_size)
{
	struct ing_rail r;
	const struct fleet *f = p ? p->fleet : NULL;
	unsigned k = 0;
	int e = -1;

	if (!f || !out || rail_size < sizeof(r.node_id))
		return -ENOENT;
	/* the endpoints over RDMA or with a rail: node by node, rail by rail */
	for (unsigned g = 0; g < f->nnodes && e < 0; g++) {
		if (f->nodes[g].primary != (int)g)
			continue;
		for (unsigned j = 0; j < f->nnodes && e < 0; j++) {
			const struct fnode *n = &f->nodes[j];
			if (n->primary != (int)g || (!n->rail[0] && !n->local_dev[0]))
				continue;
			if (k++ == i)
				e = (int)j;
		}
	}
	if (e < 0)
		return -ENOENT;
	const struct fnode *n = &f->nodes[e];
	uint64_t inflight = 0;
	for (unsigned q = 0; q < f->cap; q++)
		if (f->fr[q].used && f->fr[q].on_node && f->fr[q].node == e)
			inflight += f->fr[q].len;
	memset(&r, 0, sizeof(r));
	snprintf(r.node_id, sizeof(r.node_id), "%s", n->id);
	snprintf(r.device, sizeof(r.device), "%s", n->rail);
	snprintf(r.local_device, sizeof(r.local_device), "%s", n->local_dev);
	if (n->sub && n->sub->rdma_addr[0])
		snprintf(r.address, sizeof(r.address), "%s:%u", n->sub->rdma_addr, n->sub->rdma_port);
	r.state = n->gone ? ING_RAIL_UNUSED : ep_up(n) ? ING_RAIL_UP : ING_RAIL_DOWN;
	r.frames = n->durable;
	r.bytes = n->bytes;
	r.in_flight_bytes = inflight;
	r.moved_away = n->rerouted_away;
	r.downs = n->downs;
	r.down_ms = r.state == ING_RAIL_DOWN && n->down_since_ns
		? (ing_now_ns() - n->down_since_ns) / 1000000 : 0;
	snprintf(r.why, sizeof(r.why), "%s", r.state == ING_RAIL_UP ? "" : n->why);
	memcpy(out, &r, rail_size < sizeof(r) ? rail_size : sizeof(r));
	if (rail_size > sizeof(r))
		memset((char *)out + sizeof(r), 0, rail_size - sizeof(r));
	return 0;
}
