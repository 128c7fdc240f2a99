/* SPDX-License-Identifier: Apache-2.0 */
/*
 * verbs_check.c - real-verbs check of the RDMA engine, run inside the Soft-RoCE guest by
 * tests/rxe/engine_in_guest.sh (no fakes anywhere):
 *
 *   basic    the device (rxe0) opens, its port is ACTIVE, PD/MR/CQ/channel can be made;
 *   engine   the node side (ing_rdma_create: rdma_cm listener on the control loop, MR pool
 *            registered once, one adaptive poller thread) pulls frames with chunked READs
 *            from a producer made of plain librdmacm calls in a second thread:
 *              sizes 1 B .. 8 MiB byte-identical; many frames in flight (window);
 *              a bad rkey fails exactly that frame, the producer reconnects with the same
 *              session and the other frames complete; a length beyond the producer's MR
 *              fails that frame only; a producer that vanishes mid-transfer gets its frames
 *              failed after the park timeout and every slot returns to the pool.
 *
 * Usage: rdma_verbs_check [--ip A.B.C.D] [--dev rxe0] [basic|engine]...  (default: both)
 *        rdma_verbs_check --ip A.B.C.D bench [--bench-size B] [--bench-count N] [--bench-credits C]
 *        (bench: the data plane alone, used by bench/rdma.sh)
 * Prints one PASS/FAIL line per check; exit status 0 only if all passed.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "common/clock.h"
#include "common/log.h"
#include "control/net/loop.h"
#include "dataplane/dataplane.h"
#include "dataplane/rdma/rdma.h"

static int failures;
static const char *g_ip, *g_dev;
static bool g_bench;                 /* "bench": stream frames, print MB/s + poller CPU */
static uint64_t g_bench_size = 4 << 20;
static unsigned g_bench_count = 64, g_bench_credits = 8;

#define CHECK(cond, ...)                                                              \
	do {                                                                          \
		if (cond) {                                                           \
			printf("PASS: ");                                             \
		} else {                                                              \
			printf("FAIL: ");                                             \
			failures++;                                                   \
		}                                                                     \
		printf(__VA_ARGS__);                                                  \
		printf("\n");                                                         \
		fflush(stdout);                                                       \
	} while (0)

/* ---------------------------------------------------------------- basic */

static void check_basic(void)
{
	int n = 0;
	struct ibv_device **dl = ibv_get_device_list(&n);
	struct ibv_device *d = NULL;

	CHECK(dl && n > 0, "ibv_get_device_list: %d device(s)", n);
	for (int i = 0; dl && i < n; i++)
		if (!g_dev || !strcmp(ibv_get_device_name(dl[i]), g_dev))
			d = dl[i];
	CHECK(d, "device %s present", g_dev ? g_dev : "(any)");
	if (!d) {
		if (dl)
			ibv_free_device_list(dl);
		return;
	}
	struct ibv_context *ctx = ibv_open_device(d);
	CHECK(ctx, "ibv_open_device(%s)", ibv_get_device_name(d));
	if (!ctx) {
		ibv_free_device_list(dl);
		return;
	}
	struct ibv_device_attr da;
	struct ibv_port_attr pa;
	int rc = ibv_query_device(ctx, &da);
	CHECK(rc == 0, "ibv_query_device: max_qp_rd_atom %d max_qp_init_rd_atom %d max_mr_size %llu max_cqe %d",
	      da.max_qp_rd_atom, da.max_qp_init_rd_atom, (unsigned long long)da.max_mr_size, da.max_cqe);
	rc = ibv_query_port(ctx, 1, &pa);
	CHECK(rc == 0 && pa.state == IBV_PORT_ACTIVE, "port 1 %s, active_mtu %d, max_msg_sz %u, link_layer %s",
	      ibv_port_state_str(pa.state), 128 << pa.active_mtu, pa.max_msg_sz,
	      pa.link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet" : "IB");
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	void *buf = aligned_alloc(4096, 1 << 20);
	struct ibv_mr *mr = pd && buf ? ibv_reg_mr(pd, buf, 1 << 20, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ) : NULL;
	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	struct ibv_cq *cq = ch ? ibv_create_cq(ctx, 64, NULL, ch, 0) : NULL;
	CHECK(pd && mr && ch && cq && ibv_req_notify_cq(cq, 0) == 0, "PD, 1 MiB MR (REMOTE_READ), comp channel, CQ, req_notify");
	if (cq)
		ibv_destroy_cq(cq);
	if (ch)
		ibv_destroy_comp_channel(ch);
	if (mr)
		ibv_dereg_mr(mr);
	free(buf);
	if (pd)
		ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(dl);
}

/* ---------------------------------------------------------------- the fake producer */

#define PBUF (48u << 20)
#define SESSION 42

enum { P_RUN = 0, P_VANISH = 1, P_STOP = 2 };

struct prod {
	pthread_t th;
	uint16_t port;
	uint8_t *buf;
	struct rdma_event_channel *ech;
	struct rdma_cm_id *id;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	struct ibv_cq *cq;
	int cmd;              /* P_* (atomic) */
	int connected;        /* connections established so far (atomic) */
	int up;               /* currently connected (atomic) */
	int err;
};

static int p_wait(struct prod *p, enum rdma_cm_event_type want, int ms)
{
	uint64_t end = ing_now_ns() + (uint64_t)ms * 1000000ull;
	for (;;) {
		struct rdma_cm_event *ev;
		if (rdma_get_cm_event(p->ech, &ev) == 0) {
			enum rdma_cm_event_type t = ev->event;
			rdma_ack_cm_event(ev);
			if (t == want)
				return 0;
			fprintf(stderr, "producer: got %s, wanted %s\n", rdma_event_str(t), rdma_event_str(want));
			return -EPROTO;
		}
		if (ing_now_ns() > end)
			return -ETIMEDOUT;
		struct pollfd pf = { .fd = p->ech->fd, .events = POLLIN };
		poll(&pf, 1, 50);
	}
}

static void p_drop(struct prod *p, bool graceful)
{
	if (!p->id)
		return;
	if (graceful)
		rdma_disconnect(p->id);
	if (p->id->qp)
		rdma_destroy_qp(p->id);
	rdma_destroy_id(p->id);
	p->id = NULL;
	if (p->cq)
		ibv_destroy_cq(p->cq);
	p->cq = NULL;
	__atomic_store_n(&p->up, 0, __ATOMIC_RELEASE);
}

static int p_connect(struct prod *p)
{
	struct addrinfo *ai;
	char port[8];
	snprintf(port, sizeof(port), "%u", p->port);
	if (getaddrinfo(g_ip, port, NULL, &ai))
		return -EINVAL;
	int rc = rdma_create_id(p->ech, &p->id, p, RDMA_PS_TCP);
	if (!rc)
		rc = rdma_resolve_addr(p->id, NULL, ai->ai_addr, 2000);
	freeaddrinfo(ai);
	if (rc || p_wait(p, RDMA_CM_EVENT_ADDR_RESOLVED, 5000))
		return -EIO;
	if (rdma_resolve_route(p->id, 2000) || p_wait(p, RDMA_CM_EVENT_ROUTE_RESOLVED, 5000))
		return -EIO;
	if (!p->pd) {
		p->pd = ibv_alloc_pd(p->id->verbs);
		p->mr = p->pd ? ibv_reg_mr(p->pd, p->buf, PBUF, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ) : NULL;
		if (!p->mr)
			return -ENOMEM;
	}
	p->cq = ibv_create_cq(p->id->verbs, 2, NULL, NULL, 0);
	struct ibv_qp_init_attr qa = { .send_cq = p->cq, .recv_cq = p->cq, .qp_type = IBV_QPT_RC,
				       .cap = { .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 } };
	if (!p->cq || rdma_create_qp(p->id, p->pd, &qa))
		return -ENOMEM;
	struct ing_rdma_cm_priv priv;
	ing_rdma_cm_priv_pack(&priv, SESSION);
	struct rdma_conn_param cp = { .private_data = &priv, .private_data_len = sizeof(priv),
				      .responder_resources = 16, .retry_count = 7, .rnr_retry_count = 7 };
	if (rdma_connect(p->id, &cp) || p_wait(p, RDMA_CM_EVENT_ESTABLISHED, 5000))
		return -ECONNREFUSED;
	__atomic_add_fetch(&p->connected, 1, __ATOMIC_RELEASE);
	__atomic_store_n(&p->up, 1, __ATOMIC_RELEASE);
	return 0;
}

static void *prod_main(void *arg)
{
	struct prod *p = arg;

	p->ech = rdma_create_event_channel();
	fcntl(p->ech->fd, F_SETFL, fcntl(p->ech->fd, F_GETFL) | O_NONBLOCK);
	if ((p->err = p_connect(p))) {
		fprintf(stderr, "producer: connect failed: %d\n", p->err);
		return NULL;
	}
	for (;;) {
		int cmd = __atomic_load_n(&p->cmd, __ATOMIC_ACQUIRE);
		if (cmd == P_STOP)
			break;
		if (cmd == P_VANISH) {
			/* like a process killed: the kernel tears the id down, nothing else */
			p_drop(p, false);
			while (__atomic_load_n(&p->cmd, __ATOMIC_ACQUIRE) == P_VANISH)
				usleep(10000);
			continue;
		}
		struct rdma_cm_event *ev;
		if (p->id && rdma_get_cm_event(p->ech, &ev) == 0) {
			enum rdma_cm_event_type t = ev->event;
			rdma_ack_cm_event(ev);
			if (t == RDMA_CM_EVENT_DISCONNECTED) {
				fprintf(stderr, "producer: disconnected by the node; reconnecting (session %d)\n", SESSION);
				p_drop(p, false);
				if ((p->err = p_connect(p)))
					fprintf(stderr, "producer: reconnect failed: %d\n", p->err);
			}
			continue;
		}
		struct pollfd pf = { .fd = p->ech->fd, .events = POLLIN };
		poll(&pf, 1, 20);
	}
	p_drop(p, true);
	return NULL;
}

/* ---------------------------------------------------------------- the node */

#define DONE_MAX 4096

struct node {
	struct ing_loop *loop;
	struct ing_pool *pool;
	struct ing_mbox *ctl;       /* plays the control thread's mailbox */
	struct ing_rdma *r;
	struct ing_timer tick;
	unsigned received_notes;
	struct ing_frame *done[DONE_MAX];   /* frames back (ING_EV_DONE), oldest first */
	unsigned dh, dt;
};

static int cb_session(void *arg, uint64_t sid)
{
	(void)arg;
	return sid == SESSION ? 0 : -EPERM;
}

/* the control thread's part: its mailbox, the CM channel, the engine's timer */
static void on_ctl(void *arg, uint32_t events)
{
	struct node *nd = arg;
	struct ing_msg m[32];
	(void)events;

	for (;;) {
		unsigned k = ing_mbox_pop(nd->ctl, m, 32);
		if (!k && ing_mbox_idle(nd->ctl))
			break;
		for (unsigned i = 0; i < k; i++) {
			if (m[i].kind == ING_EV_RECEIVED)
				nd->received_notes++;
			else if (m[i].kind == ING_EV_DONE)
				nd->done[nd->dt++ % DONE_MAX] = m[i].f;
			else
				ing_rdma_conn_event(nd->r, &m[i]);
		}
	}
}

static void on_cm(void *arg, uint32_t events)
{
	(void)events;
	ing_rdma_cm_dispatch(arg);
}

static void on_tick(void *arg)
{
	struct node *nd = arg;
	ing_rdma_tick(nd->r);
	ing_timer_arm(nd->loop, &nd->tick, ing_now_ns() + ING_RDMA_TICK_MS * 1000000ull);
}

static unsigned take_done(struct node *nd, struct ing_frame **f, unsigned max)
{
	unsigned k = 0;
	while (k < max && nd->dh != nd->dt)
		f[k++] = nd->done[nd->dh++ % DONE_MAX];
	return k;
}

struct job {
	uint64_t id, off, len;
	uint32_t rkey;
	bool expect_ok;
	bool done;
	int status;
};

/* Submit jobs, wait (bounded) until all are acked, verify bytes. Returns failures. */
static int run_jobs(struct node *nd, struct prod *p, struct job *j, unsigned n, int timeout_ms,
		    const char *what)
{
	unsigned left = n, bad = 0, retr = 0;
	uint64_t end = ing_now_ns() + (uint64_t)timeout_ms * 1000000ull;
	uint64_t t0 = ing_now_ns(), bytes = 0;

	for (unsigned i = 0; i < n; i++) {
		struct ing_frame *f = NULL;
		while (!(f = ing_pool_get(nd->pool, j[i].len)) && ing_now_ns() < end)
			ing_loop_run_once(nd->loop, 5);
		if (!f) {
			printf("  %s: no pool slot for frame %llu\n", what, (unsigned long long)j[i].id);
			return n;
		}
		snprintf(f->frame_id, sizeof(f->frame_id), "%llu", (unsigned long long)j[i].id);
		f->session_id = SESSION;
		f->length = j[i].len;
		f->raddr = (uintptr_t)p->buf + j[i].off;
		f->rkey = j[i].rkey ? j[i].rkey : p->mr->rkey;
		memset(f->buf, 0xee, j[i].len < 4096 ? j[i].len : 4096);
		int rc;
		while ((rc = ing_rdma_submit(nd->r, f)) == -ENOBUFS)
			ing_loop_run_once(nd->loop, 5);
		if (rc) {
			printf("  %s: submit frame %llu: %s\n", what, (unsigned long long)j[i].id, strerror(-rc));
			ing_pool_put(f);
			return n;
		}
	}
	while (left && ing_now_ns() < end) {
		struct ing_frame *f[32];
		ing_loop_run_once(nd->loop, 10);
		unsigned k = take_done(nd, f, 32);
		for (unsigned i = 0; i < k; i++) {
			struct job *x = &j[0];
			for (unsigned q = 0; q < n; q++)   /* the frame id names its job */
				if (j[q].id == strtoull(f[i]->frame_id, NULL, 10))
					x = &j[q];
			x->done = true;
			x->status = f[i]->status;
			left--;
			bool ok = f[i]->status == ING_E_NONE;
			if (ok)
				bytes += f[i]->length;
			if (ok && memcmp(f[i]->buf, p->buf + x->off, x->len)) {
				printf("  %s: frame %llu (%llu bytes): DATA MISMATCH\n", what,
				       (unsigned long long)x->id, (unsigned long long)x->len);
				bad++;
			} else if (ok != x->expect_ok) {
				printf("  %s: frame %llu (%llu bytes): status %d (%s), expected %s\n", what,
				       (unsigned long long)x->id, (unsigned long long)x->len, f[i]->status,
				       f[i]->msg, x->expect_ok ? "ok" : "failure");
				bad++;
			} else if (!ok) {
				printf("  %s: frame %llu failed as expected: code %d retryable %d: %s\n", what,
				       (unsigned long long)x->id, f[i]->status, f[i]->retryable, f[i]->msg);
				retr += f[i]->retryable;
			}
			ing_pool_put(f[i]);
		}
	}
	double s = (double)(ing_now_ns() - t0) / 1e9;
	printf("  %s: %u/%u frames acked, %.1f MB in %.2f s (%.1f MB/s)\n", what, n - left, n,
	       (double)bytes / 1e6, s, (double)bytes / 1e6 / s);
	return (int)(bad + left);
}

static void fill(uint8_t *b, size_t n, uint32_t seed)
{
	uint64_t x = 0x9e3779b97f4a7c15ull ^ seed;
	for (size_t i = 0; i + 8 <= n; i += 8) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		memcpy(b + i, &x, 8);
	}
}

static bool wait_until(struct node *nd, int *flag, int want, int ms)
{
	uint64_t end = ing_now_ns() + (uint64_t)ms * 1000000ull;
	while (__atomic_load_n(flag, __ATOMIC_ACQUIRE) < want && ing_now_ns() < end)
		ing_loop_run_once(nd->loop, 10);
	return __atomic_load_n(flag, __ATOMIC_ACQUIRE) >= want;
}

/* The producer's ESTABLISHED can come before the node's: run the node's loop (which
 * dispatches its CM events) until it sees the session connected too. */
static bool wait_session(struct node *nd, uint64_t sid, int ms)
{
	uint64_t end = ing_now_ns() + (uint64_t)ms * 1000000ull;
	while (!ing_rdma_session_connected(nd->r, sid) && ing_now_ns() < end)
		ing_loop_run_once(nd->loop, 10);
	return ing_rdma_session_connected(nd->r, sid);
}

/* CPU seconds of this process's thread named `name` (utime + stime). */
static double thread_cpu(const char *name)
{
	char path[300], comm[64], buf[1024];
	double s = 0;
	long hz = sysconf(_SC_CLK_TCK);
	DIR *d = opendir("/proc/self/task");
	struct dirent *de;

	while (d && (de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm", de->d_name);
		FILE *f = fopen(path, "r");
		if (!f)
			continue;
		if (!fgets(comm, sizeof(comm), f))
			comm[0] = 0;
		fclose(f);
		comm[strcspn(comm, "\n")] = 0;
		if (strcmp(comm, name))
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/stat", de->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		size_t k = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
		buf[k] = 0;
		char *q = strrchr(buf, ')');
		unsigned long ut = 0, st = 0;
		if (q && sscanf(q + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) == 2)
			s += (double)(ut + st) / (double)hz;
	}
	if (d)
		closedir(d);
	return s;
}

/* The data plane alone: frames of g_bench_size streamed with g_bench_credits in flight,
 * READ into pool slots, no persistence, no verification. */
static void bench_stream(struct node *nd, struct prod *p)
{
	unsigned sent = 0, done = 0, failed = 0, slots = (unsigned)(PBUF / g_bench_size);
	uint64_t bytes = 0;
	double cpu0 = thread_cpu("ing-rdma0");
	uint64_t t0 = ing_now_ns(), end = t0 + 300ull * 1000000000ull;

	while (done < g_bench_count && ing_now_ns() < end) {
		while (sent < g_bench_count && sent - done < g_bench_credits) {
			struct ing_frame *f = ing_pool_get(nd->pool, g_bench_size);
			if (!f)
				break;
			snprintf(f->frame_id, sizeof(f->frame_id), "%llu", (unsigned long long)(10000 + sent));
			f->session_id = SESSION;
			f->length = g_bench_size;
			f->raddr = (uintptr_t)p->buf + (uint64_t)(sent % slots) * g_bench_size;
			f->rkey = p->mr->rkey;
			if (ing_rdma_submit(nd->r, f)) {
				ing_pool_put(f);
				break;
			}
			sent++;
		}
		struct ing_frame *f[32];
		ing_loop_run_once(nd->loop, 1);
		unsigned k = take_done(nd, f, 32);
		for (unsigned i = 0; i < k; i++) {
			if (f[i]->status == ING_E_NONE)
				bytes += f[i]->length;
			else
				failed++;
			ing_pool_put(f[i]);
		}
		done += k;
	}
	double s = (double)(ing_now_ns() - t0) / 1e9, cpu = thread_cpu("ing-rdma0") - cpu0;
	printf("engine-bench: %u frames of %llu bytes, %u in flight: %.1f MB/s, %u failed, poller CPU %.2f s = %.2f s/GB\n",
	       done, (unsigned long long)g_bench_size, g_bench_credits, (double)bytes / 1e6 / s, failed,
	       cpu, bytes ? cpu / ((double)bytes / 1e9) : 0.0);
	CHECK(done == g_bench_count && !failed, "engine bench: all %u frames read", g_bench_count);
}

static void check_engine(void)
{
	struct node nd = { 0 };
	struct prod p = { 0 };
	struct ing_eal_opts eo;
	char why[192] = "";

	ing_eal_opts_init(&eo);
	eo.no_huge = true;
	eo.lcores = "0";
	CHECK(ing_eal_start(&eo) == 0, "EAL (--no-huge)");
	nd.loop = ing_loop_create();
	struct ing_pool_opts po;
	ing_pool_opts_init(&po);
	po.name = "vcheck";
	po.hugepages = 0;
	if (g_bench) {
		char spec[64];
		snprintf(spec, sizeof(spec), "%llu:%u", (unsigned long long)g_bench_size, g_bench_credits + 2);
		ing_pool_parse_classes(&po, spec);
	} else {
		ing_pool_parse_classes(&po, "64K:16,1M:16,8M:8");
	}
	nd.pool = ing_pool_create(&po);
	nd.ctl = ing_mbox_create("vctl", 4 * 1024);
	CHECK(nd.loop && nd.pool && nd.ctl, "loop, pool (%u slots), control mailbox", nd.pool ? ing_pool_total(nd.pool) : 0);
	if (!nd.loop || !nd.pool || !nd.ctl)
		return;
	CHECK(ing_loop_add_fd(nd.loop, ing_mbox_fd(nd.ctl), EPOLLIN, on_ctl, &nd) == 0,
	      "control mailbox on the loop");
	struct ing_rdma_opts ro;
	ing_rdma_opts_init(&ro);
	ro.addr = g_ip;
	ro.port = 0;
	ro.use_eal = false;
	ro.rd_atom = 8;
	ro.lcore.busy_polls = 2000;
	ro.lcore.park_ms = 4000;
	ro.lcore.chunk_size = 256 << 10; /* more chunks per frame: exercises the window */
	if (g_bench) {                   /* as ingestd runs it */
		ro.rd_atom = ING_RDMA_DEFAULT_RD_ATOM;
		ro.lcore.busy_polls = ING_RDMA_DEFAULT_BUSY_POLLS;
		ro.lcore.chunk_size = ING_RDMA_DEFAULT_CHUNK;
	}
	struct ing_rdma_cbs cbs = { .arg = &nd, .session_check = cb_session };
	nd.r = ing_rdma_create(&ro, nd.pool, NULL, nd.ctl, &cbs, why, sizeof(why));
	CHECK(nd.r, "ing_rdma_create on %s: %s", g_ip, nd.r ? ing_rdma_device(nd.r) : why);
	if (!nd.r)
		return;
	CHECK(ing_loop_add_fd(nd.loop, ing_rdma_cm_fd(nd.r), EPOLLIN, on_cm, nd.r) == 0,
	      "rdma_cm channel on the control loop");
	ing_timer_init(&nd.tick, on_tick, &nd);
	ing_timer_arm(nd.loop, &nd.tick, ing_now_ns() + ING_RDMA_TICK_MS * 1000000ull);
	CHECK(ing_rdma_start(nd.r) == 0, "poller started; listening on %s:%u", ing_rdma_addr(nd.r), ing_rdma_port(nd.r));

	p.port = ing_rdma_port(nd.r);
	p.buf = aligned_alloc(4096, PBUF);
	fill(p.buf, PBUF, 7);
	pthread_create(&p.th, NULL, prod_main, &p);
	CHECK(wait_until(&nd, &p.connected, 1, 15000) && wait_session(&nd, SESSION, 5000),
	      "producer connected (session %d in CM private data)", SESSION);
	if (!p.connected)
		goto out;
	if (g_bench) {
		bench_stream(&nd, &p);
		goto out;
	}

	/* 1: sizes, byte-identical */
	{
		static const uint64_t sz[] = { 1, 7, 4096, 65536, 65537, 1 << 20, (1 << 20) + 1,
					       (3 << 20) + 123, 8 << 20 };
		struct job j[9];
		uint64_t off = 0;
		for (unsigned i = 0; i < 9; i++) {
			j[i] = (struct job){ .id = 100 + i, .off = off, .len = sz[i], .expect_ok = true };
			off += (sz[i] + 4095) & ~4095ull;
		}
		CHECK(run_jobs(&nd, &p, j, 9, 60000, "sizes") == 0, "frames of 1 B .. 8 MiB read and byte-identical");
	}
	/* 2: window: many frames in flight */
	{
		struct job j[24];
		for (unsigned i = 0; i < 24; i++)
			j[i] = (struct job){ .id = 200 + i, .off = (uint64_t)i << 20, .len = (i % 3 == 0) ? 4 << 20 : 1 << 20,
					     .expect_ok = true };
		for (unsigned i = 0; i < 24; i++)
			if (j[i].off + j[i].len > PBUF)
				j[i].off = 0;
		CHECK(run_jobs(&nd, &p, j, 24, 90000, "window") == 0, "24 frames in flight (1-4 MiB) all byte-identical");
	}
	/* 3: bad rkey fails exactly that frame; the others complete (after a reconnect) */
	{
		int before = p.connected;
		struct job j[5];
		for (unsigned i = 0; i < 5; i++)
			j[i] = (struct job){ .id = 300 + i, .off = (uint64_t)i * (2 << 20), .len = 2 << 20, .expect_ok = true };
		j[2].rkey = p.mr->rkey ^ 0x5a5a00u;
		j[2].expect_ok = false;
		int bad = run_jobs(&nd, &p, j, 5, 90000, "bad-rkey");
		CHECK(bad == 0 && j[2].status == ING_E_TRANSFER, "bad rkey fails exactly that frame (ERROR_TRANSFER), 4 others ok");
		CHECK(p.connected > before, "producer reconnected with the same session (%d connections)", p.connected);
	}
	/* 4: length beyond the producer's MR: that frame fails, the next one works */
	{
		CHECK(wait_until(&nd, &p.up, 1, 15000), "producer up again");
		struct job j[2] = {
			{ .id = 400, .off = PBUF - (1 << 20), .len = 4 << 20, .expect_ok = false },
			{ .id = 401, .off = 0, .len = 1 << 20, .expect_ok = true },
		};
		CHECK(run_jobs(&nd, &p, j, 2, 90000, "beyond-mr") == 0, "READ beyond the producer's registered region fails that frame only");
	}
	/* 5: the producer vanishes mid-transfer: frames fail after the park timeout, slots back */
	{
		CHECK(wait_until(&nd, &p.up, 1, 15000), "producer up again");
		struct job j[6];
		for (unsigned i = 0; i < 6; i++)
			j[i] = (struct job){ .id = 500 + i, .off = (uint64_t)i * (8 << 20) % (PBUF - (8 << 20)), .len = 8 << 20, .expect_ok = false };
		__atomic_store_n(&p.cmd, P_VANISH, __ATOMIC_RELEASE);
		/* no expectation on the first ones: they may finish before the QP dies */
		for (unsigned i = 0; i < 6; i++)
			j[i].expect_ok = false;
		uint64_t t0 = ing_now_ns();
		int res = run_jobs(&nd, &p, j, 6, 60000, "vanish");
		unsigned failed = 0, ok = 0;
		for (unsigned i = 0; i < 6; i++) {
			failed += j[i].done && j[i].status != ING_E_NONE;
			ok += j[i].done && j[i].status == ING_E_NONE;
		}
		CHECK(failed + ok == 6 && failed >= 1, "vanished producer: %u frame(s) failed, %u completed before, all acked in %.1f s (res %d)",
		      failed, ok, (double)(ing_now_ns() - t0) / 1e9, res);
		/* give the node a moment to destroy the dead connection */
		for (int i = 0; i < 100 && ing_pool_free(nd.pool) != ing_pool_total(nd.pool); i++)
			ing_loop_run_once(nd.loop, 10);
		CHECK(ing_pool_free(nd.pool) == ing_pool_total(nd.pool), "every slot back in the pool (%u/%u)",
		      ing_pool_free(nd.pool), ing_pool_total(nd.pool));
	}
	struct ing_rdma_stats st;
	ing_rdma_get_stats(nd.r, &st);
	printf("  stats: READs %llu, bytes %llu, frames ok %llu failed %llu, wc errors %llu, CM events %llu, accepted %llu, conn errors %llu, polls %llu idle %llu sleeps %llu, RECEIVED notices %u\n",
	       (unsigned long long)st.reads_posted, (unsigned long long)st.bytes_read,
	       (unsigned long long)st.frames_ok, (unsigned long long)st.frames_failed,
	       (unsigned long long)st.wc_errors, (unsigned long long)st.cm_events,
	       (unsigned long long)st.conns_accepted, (unsigned long long)st.conn_errors,
	       (unsigned long long)st.polls, (unsigned long long)st.idle_polls,
	       (unsigned long long)st.sleeps, nd.received_notes);
	CHECK(st.sleeps > 0, "adaptive poller slept on the CQ channel / doorbells (%llu sleeps)", (unsigned long long)st.sleeps);
out:
	__atomic_store_n(&p.cmd, P_STOP, __ATOMIC_RELEASE);
	pthread_join(p.th, NULL);
	ing_loop_del_fd(nd.loop, ing_rdma_cm_fd(nd.r));
	ing_timer_cancel(nd.loop, &nd.tick);
	ing_rdma_destroy(nd.r);
	nd.r = NULL;
	on_ctl(&nd, 0);   /* what the stopped poller sent last */
	struct ing_frame *f[32];
	unsigned k;
	while ((k = take_done(&nd, f, 32)))
		for (unsigned i = 0; i < k; i++)
			ing_pool_put(f[i]);
	CHECK(ing_pool_free(nd.pool) == ing_pool_total(nd.pool), "after destroy: every slot back (%u/%u)",
	      ing_pool_free(nd.pool), ing_pool_total(nd.pool));
	if (p.mr)
		ibv_dereg_mr(p.mr);
	if (p.pd)
		ibv_dealloc_pd(p.pd);
	if (p.ech)
		rdma_destroy_event_channel(p.ech);
	free(p.buf);
	ing_loop_del_fd(nd.loop, ing_mbox_fd(nd.ctl));
	ing_mbox_destroy(nd.ctl);
	ing_pool_destroy(nd.pool);
	ing_loop_destroy(nd.loop);
}

int main(int argc, char **argv)
{
	bool basic = false, engine = false;

	g_ip = getenv("RXE_IP");
	g_dev = getenv("RXE_DEV");
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--ip") && i + 1 < argc)
			g_ip = argv[++i];
		else if (!strcmp(argv[i], "--dev") && i + 1 < argc)
			g_dev = argv[++i];
		else if (!strcmp(argv[i], "basic"))
			basic = true;
		else if (!strcmp(argv[i], "engine"))
			engine = true;
		else if (!strcmp(argv[i], "bench"))
			engine = g_bench = true;
		else if (!strcmp(argv[i], "--bench-size") && i + 1 < argc)
			g_bench_size = strtoull(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--bench-count") && i + 1 < argc)
			g_bench_count = (unsigned)strtoul(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--bench-credits") && i + 1 < argc)
			g_bench_credits = (unsigned)strtoul(argv[++i], NULL, 0);
		else {
			fprintf(stderr, "usage: %s [--ip A.B.C.D] [--dev NAME] [basic] [engine]\n", argv[0]);
			return 2;
		}
	}
	if (!basic && !engine)
		basic = engine = true;
	if (g_bench && (g_bench_size == 0 || g_bench_size > PBUF || !g_bench_count || !g_bench_credits)) {
		fprintf(stderr, "bench: size 1..%u, count and credits >= 1\n", PBUF);
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (basic)
		check_basic();
	if (engine) {
		if (!g_ip) {
			CHECK(0, "engine: no --ip and no RXE_IP");
		} else {
			check_engine();
		}
	}
	printf("verbs_check: %d failure(s)\n", failures);
	return failures ? 1 : 0;
}
