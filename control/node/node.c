/* SPDX-License-Identifier: Apache-2.0 */
/*
 * node.c - the ingest node's start, run and stop (control/node/node.h), moved out of ingestd's
 * main so that tests drive the node directly.
 *
 * Start order: data dir -> topology + placement plan -> EAL -> pool -> control mailbox ->
 * persistence -> loop -> service -> RDMA -> gRPC server -> /metrics -> run. A stop request
 * (SIGINT/SIGTERM through the signalfd, or ing_node_stop as a call on the control thread's
 * mailbox): health NOT_SERVING, GOAWAY, up to 10 s for in-flight frames to become durable and
 * their acks to go out, then every open call is finished and everything is torn down in
 * reverse order. A second request skips the wait.
 */
#include "control/node/node.h"
#include "common/cli.h"
#include "common/clock.h"
#include "common/crc32c.h"
#include "common/hugepages.h"
#include "common/log.h"
#include "common/stripe.h"
#include "control/net/grpc_server.h"
#include "control/net/loop.h"
#include "control/net/metrics.h"
#include "control/service/service.h"
#include "control/fleet/fleet.h"
#include "dataplane/store/store.h"
#include "dataplane/tier/tier.h"
#include "dataplane/hwm.h"
#include "numa/numa.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <sched.h>
#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/file.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <systemd/sd-daemon.h>

#define COMP "ingestd"
#define DRAIN_MS 10000u
#define CLOSE_MS 1000u
#define TICK_NS 20000000ull

enum phase { PH_RUN = 0, PH_DRAIN, PH_CLOSE, PH_DONE };

struct ing_node {
	struct ing_ingestd_opts o;
	struct ing_loop *loop;
	struct ing_pool *pool;
	struct ing_mbox *ctl;      /* the control thread's mailbox (lives until ing_node_destroy) */
	struct ing_persist *persist;
	struct ing_svc *svc;
	struct ing_grpc_server *srv;
	int sfd;
	int phase;
	uint64_t deadline_ns;
	uint64_t not_drained;      /* frames still in flight at the drain deadline: exit 3 */
	struct ing_timer tick;
	char rdma_note[192];
	struct ing_rdma *rdma;     /* NULL: gRPC fallback only */
	struct ing_metrics_srv *metrics;  /* NULL: no --metrics-listen */
	struct ing_timer watchdog; /* systemd WATCHDOG=1 pings, when WATCHDOG_USEC is set */
	struct ing_fleet *fleet;   /* node identity, membership, catalog export */
	struct ing_tier *tier;     /* object store tier (NULL: --sink null) */
	struct ing_hwm hwm;        /* the high-water mark's count: persistence, tier, control */
	bool hwm_init;
	uint64_t watchdog_ns;      /* ping period (half the watchdog timeout), 0: off */
	int port;
	int pool_node;             /* where the pool went (-1: any) */
	bool torn_down;
	int status;                /* ing_node_wait's result */
	char *reload_buf;          /* the config file's text of the last reload (values point in) */
	uint32_t tier_keys_crc;    /* of the tier's credentials in force (changed or not) */
	/* the cpus this process could run on before EAL pinned the control thread */
	int start_cpus[CPU_SETSIZE];
	unsigned n_start_cpus;
};

static void node_info(void *arg, struct ing_svc_node_info *out);

/* /metrics: the service's families plus the data dir's file system, readiness, pages */
static void metrics_render(void *arg, struct ing_mtext *t)
{
	struct ing_node *d = arg;
	struct statvfs v;

	ing_svc_metrics(d->svc, t);
	if (d->o.sink == ING_SINK_FILE && statvfs(d->o.data_dir, &v) == 0) {
		ing_mtext_family(t, "ingest_disk_free_bytes", "gauge",
				 "Bytes available to ingestd on the data dir's file system.");
		ing_mtext_u64(t, "ingest_disk_free_bytes", "", (uint64_t)v.f_bavail * v.f_frsize);
		ing_mtext_family(t, "ingest_disk_size_bytes", "gauge",
				 "Size of the data dir's file system.");
		ing_mtext_u64(t, "ingest_disk_size_bytes", "", (uint64_t)v.f_blocks * v.f_frsize);
	}
	struct ing_svc_node_info info;
	node_info(d, &info);
	ing_mtext_family(t, "ingest_ready", "gauge", "1 when the node is ready, as /readyz says: serving, "
			 "data dir writable, pool prefaulted, not draining.");
	ing_mtext_u64(t, "ingest_ready", "", info.ready);
	ing_mtext_family(t, "ingest_pool_hugepages", "gauge",
			 "1 when every pool region is on hugepages (--hugepages; 0: 4 KiB pages).");
	ing_mtext_u64(t, "ingest_pool_hugepages", "", info.pool_hugepages);
	ing_mtext_family(t, "ingest_build_info", "gauge", "Version of this ingestd (always 1).");
	ing_mtext_printf(t, "ingest_build_info{version=\"%s\"} 1\n", ING_VERSION);
}

/*
 * The node's facts for Stats and its readiness, one function for both (/readyz and
 * StatsReply.ready agree): serving (not stopping), not DRAINING in the fleet, the data
 * dir writable (not read-only, writable by this process, room for the largest frame),
 * the pool prefaulted (it is, once the loop runs: ing_node_start made it first).
 */
static void node_info(void *arg, struct ing_svc_node_info *out)
{
	struct ing_node *d = arg;
	struct statvfs v;
	size_t n = 0;

	memset(out, 0, sizeof(*out));
	out->pool_hugepages = d->pool && ing_pool_on_hugepages(d->pool);
	for (unsigned c = 0; d->pool && c < ing_pool_nclasses(d->pool); c++) {
		uint64_t size;
		unsigned total, nfree;
		if (ing_pool_class_stats(d->pool, c, &size, &total, &nfree) == 0)
			out->pool_bytes += size * total;
	}
#define NOT_READY(...)                                                                  \
	do {                                                                            \
		if (n < sizeof(out->not_ready))                                         \
			n += (size_t)snprintf(out->not_ready + n, sizeof(out->not_ready) - n, \
					      "%s", n ? "; " : "");                     \
		if (n < sizeof(out->not_ready))                                         \
			n += (size_t)snprintf(out->not_ready + n, sizeof(out->not_ready) - n, \
					      __VA_ARGS__);                             \
	} while (0)
	if (d->phase != PH_RUN)
		NOT_READY("stopping: draining in-flight frames");
	if (d->fleet && ing_fleet_state(d->fleet) == ING_MEMBER_DRAINING)
		NOT_READY("draining: fleet state DRAINING (kill -USR2 toggles it)");
	if (!d->pool)
		NOT_READY("no pool");
	if (d->o.sink == ING_SINK_FILE) {
		if (statvfs(d->o.data_dir, &v) != 0) {
			NOT_READY("data dir %s: %s", d->o.data_dir, strerror(errno));
		} else {
			out->disk_free = (uint64_t)v.f_bavail * v.f_frsize;
			out->disk_size = (uint64_t)v.f_blocks * v.f_frsize;
			if (v.f_flag & ST_RDONLY)
				NOT_READY("data dir %s: file system read-only", d->o.data_dir);
			else if (access(d->o.data_dir, W_OK) != 0)
				NOT_READY("data dir %s: not writable: %s", d->o.data_dir, strerror(errno));
			else if (d->pool && out->disk_free < ing_pool_max_len(d->pool))
				NOT_READY("data dir %s: full (%llu bytes free, less than one frame)",
					  d->o.data_dir, (unsigned long long)out->disk_free);
		}
	}
#undef NOT_READY
	out->ready = n == 0;
}

/* /readyz: one line per check, then the verdict */
static bool node_ready(void *arg, struct ing_mtext *t)
{
	struct ing_node *d = arg;
	struct ing_svc_node_info i;

	node_info(d, &i);
	ing_mtext_printf(t, "%s serving gRPC on port %d\n", d->phase == PH_RUN ? "ok" : "fail", d->port);
	if (d->fleet)
		ing_mtext_printf(t, "%s fleet state %s\n",
				 ing_fleet_state(d->fleet) == ING_MEMBER_DRAINING ? "fail" : "ok",
				 ing_fleet_state(d->fleet) == ING_MEMBER_DRAINING ? "DRAINING" : "ACTIVE");
	ing_mtext_printf(t, "%s pool prefaulted: %llu MiB on %s\n", d->pool ? "ok" : "fail",
			 (unsigned long long)(i.pool_bytes >> 20), i.pool_hugepages ? "hugepages" : "4 KiB pages");
	if (d->o.sink == ING_SINK_FILE)
		ing_mtext_printf(t, "%s data dir %s: %llu MiB free of %llu MiB\n",
				 strstr(i.not_ready, "data dir") ? "fail" : "ok", d->o.data_dir,
				 (unsigned long long)(i.disk_free >> 20), (unsigned long long)(i.disk_size >> 20));
	else
		ing_mtext_printf(t, "ok null sink: no data dir\n");
	ing_mtext_printf(t, i.ready ? "ready\n" : "not ready: %s\n", i.not_ready);
	return i.ready;
}

/* systemd watchdog: ping from the control loop, so a stuck loop stops the pings */
static void watchdog_cb(void *arg)
{
	struct ing_node *d = arg;
	(void)sd_notify(0, "WATCHDOG=1");
	ing_timer_arm(d->loop, &d->watchdog, ing_now_ns() + d->watchdog_ns);
}

static void shutdown_tick(void *arg)
{
	struct ing_node *d = arg;
	uint64_t now = ing_now_ns();

	if (d->phase == PH_DRAIN) {
		bool idle = ing_svc_in_flight(d->svc) == 0 && ing_svc_quiescent(d->svc);
		if (!idle && now < d->deadline_ns) {
			ing_timer_arm(d->loop, &d->tick, now + TICK_NS);
			return;
		}
		if (!idle) {
			d->not_drained = ing_svc_in_flight(d->svc);
			ING_WARN(COMP, "drain deadline: %" PRIu64 " frames still in flight; closing calls",
				 d->not_drained);
		} else
			ING_INFO(COMP, "all frames durable and acked; closing calls");
		ing_svc_close_calls(d->svc, ING_GRPC_UNAVAILABLE, "ingest node shutting down");
		d->phase = PH_CLOSE;
		d->deadline_ns = now + CLOSE_MS * 1000000ull;
	}
	if (d->phase == PH_CLOSE) {
		if ((ing_grpc_server_ncalls(d->srv) > 0 || !ing_grpc_server_flushed(d->srv)) &&
		    now < d->deadline_ns) {
			ing_timer_arm(d->loop, &d->tick, now + TICK_NS);
			return;
		}
		d->phase = PH_DONE;
		ing_loop_stop(d->loop);
	}
}

static void node_reload(struct ing_node *d);

/* SIGTERM, SIGINT or ing_node_stop: the first begins the drain, the next skips its wait */
static void stop_request(struct ing_node *d, const char *why)
{
	if (d->phase == PH_RUN) {
		ING_INFO(COMP, "%s: stopping (health NOT_SERVING, GOAWAY, up to %u s to drain)", why,
			 DRAIN_MS / 1000);
		(void)sd_notify(0, "STOPPING=1");
		ing_grpc_server_set_serving(d->srv, false);
		ing_svc_shutdown_begin(d->svc);
		ing_grpc_server_shutdown(d->srv);
		d->phase = PH_DRAIN;
		d->deadline_ns = ing_now_ns() + DRAIN_MS * 1000000ull;
		ing_timer_arm(d->loop, &d->tick, ing_now_ns());
	} else if (d->phase == PH_DRAIN) {
		ING_WARN(COMP, "%s again: not waiting for in-flight frames", why);
		d->deadline_ns = 0;
		ing_timer_arm(d->loop, &d->tick, ing_now_ns());
	}
}

static void signal_cb(void *arg, uint32_t events)
{
	struct ing_node *d = arg;
	struct signalfd_siginfo si;
	(void)events;

	while (read(d->sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
		if (si.ssi_signo == SIGHUP) {
			node_reload(d);
			continue;
		}
		if (si.ssi_signo == SIGUSR2) {   /* fleet: toggle ACTIVE <-> DRAINING */
			if (d->fleet)
				ing_fleet_set_draining(d->fleet,
						       ing_fleet_state(d->fleet) != ING_MEMBER_DRAINING);
			continue;
		}
		stop_request(d, strsignal((int)si.ssi_signo));
	}
}

/* ing_node_stop's call, run on the control thread (nothing once the node is torn down) */
static void stop_msg(void *arg, uint32_t val)
{
	(void)val;
	stop_request(arg, "stop requested");
}

static int write_port_file(const char *path, int port)
{
	char tmp[4096];
	snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid());
	FILE *f = fopen(tmp, "w");
	if (!f)
		return -errno;
	fprintf(f, "%d\n", port);
	if (fclose(f) != 0) {
		int e = -errno;
		unlink(tmp);
		return e;
	}
	if (rename(tmp, path) != 0) {
		int e = -errno;
		unlink(tmp);
		return e;
	}
	return 0;
}

/*
 * One ingestd per data dir: two would each serialise their own copies of a frame id, not
 * each other's, and a second copy with other bytes could be renamed over a frame the first
 * one has already ACKed DURABLE. An flock on <data_dir>/.ingestd.lock, held for the life of
 * the process (released by the kernel on any exit, kill -9 included). The fd is leaked on
 * purpose. 0, or -errno after logging.
 */
static int data_dir_lock(const char *dir)
{
	char holder[64];
	int fd = ing_store_lock(dir, holder, sizeof(holder));

	if (fd == -EBUSY)
		ING_ERR(COMP, "data dir %s is in use by %s; stop it first", dir, holder);
	else if (fd < 0)
		ING_ERR(COMP, "data dir %s: locking %s/.ingestd.lock: %s", dir, dir, strerror(-fd));
	return fd < 0 ? fd : 0;
}

/* fsync the directory holding path (best effort: a failure shows at the probe write) */
static void sync_parent(const char *path)
{
	char parent[PATH_MAX];
	char *slash;
	int fd;

	snprintf(parent, sizeof(parent), "%s", path);
	slash = strrchr(parent, '/');
	if (!slash)
		snprintf(parent, sizeof(parent), ".");
	else if (slash == parent)
		parent[1] = 0;
	else
		*slash = 0;
	fd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0) {
		(void)fsync(fd);
		close(fd);
	}
}

/*
 * Create the data dir (and its parents) and prove it takes a durable write before anything
 * else starts, so that a read-only, full or foreign data dir is one clear line naming the
 * path and the reason rather than a SQLite error later. 0, or -errno after logging.
 */
static int data_dir_ready(const char *dir, enum ing_sink sink)
{
	char path[PATH_MAX];
	struct stat st;
	struct statvfs vfs;
	int fd, rc = 0;

	if (snprintf(path, sizeof(path), "%s", dir) >= (int)sizeof(path)) {
		ING_ERR(COMP, "data dir %.64s...: path too long", dir);
		return -ENAMETOOLONG;
	}
	/* a file where the dir (or a parent) should be, a dir this user cannot write: the
	 * sentence --check-config says, with the fix */
	char why[PATH_MAX + 256];
	if (ing_ingestd_check_data_dir(dir, why, sizeof(why))) {
		ING_ERR(COMP, "%s", why);
		return -ENOTDIR;
	}
	for (char *p = path + 1; ; p++) {   /* mkdir -p */
		if (*p != '/' && *p)
			continue;
		char c = *p;
		*p = 0;
		if (mkdir(path, 0755) == 0) {
			sync_parent(path);   /* the new entry must survive a power loss too */
		} else if (errno != EEXIST) {
			rc = -errno;
			ING_ERR(COMP, "cannot create data dir %s: %s creating %s", dir, strerror(-rc), path);
			return rc;
		}
		*p = c;
		if (!c)
			break;
	}
	if (stat(dir, &st) != 0) {
		rc = -errno;
		ING_ERR(COMP, "data dir %s: %s", dir, strerror(-rc));
		return rc;
	}
	if (!S_ISDIR(st.st_mode)) {
		ING_ERR(COMP, "data dir %s is not a directory", dir);
		return -ENOTDIR;
	}
	if (sink != ING_SINK_FILE)
		return 0;
	rc = data_dir_lock(dir);
	if (rc)
		return rc;
	/* a probe of one 4 KiB block: creat + write + fdatasync + unlink (a fixed name, so
	 * one left by a kill -9 right here is reused, not accumulated) */
	snprintf(path, sizeof(path), "%s/.ingestd-probe", dir);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0) {
		rc = -errno;
	} else {
		static const char block[4096];
		ssize_t w = write(fd, block, sizeof(block));
		if (w != (ssize_t)sizeof(block))
			rc = w < 0 ? -errno : -ENOSPC;
		else if (fdatasync(fd) != 0)
			rc = -errno;
		close(fd);
		(void)unlink(path);
	}
	if (rc) {
		ING_ERR(COMP, "data dir %s is not writable: %s%s", dir, strerror(-rc),
			rc == -ENOSPC || rc == -EDQUOT ? " (free some space first)" :
			rc == -EROFS ? " (mounted read-only)" : "");
		return rc;
	}
	if (statvfs(dir, &vfs) == 0 && (uint64_t)vfs.f_bavail * vfs.f_frsize < (256ull << 20))
		ING_WARN(COMP, "data dir %s: only %llu MiB free; frames will be refused (NO_SPACE) "
			 "when it fills", dir,
			 (unsigned long long)((uint64_t)vfs.f_bavail * vfs.f_frsize >> 20));
	return 0;
}

/*
 * Where the pool's regions go (--hugepages): on hugepages when asked (on: they must be
 * there) or, by default (auto), when enough of the default size are free on every region's
 * NUMA node (each region maps the whole spec on its own node); else on 4 KiB pages, with
 * one warning that says how to reserve them (the same advice ingest-doctor gives). Returns
 * the pool's hugepages mode (1 or 0), or -ENOMEM (logged) when --hugepages on cannot be met.
 */
static int pool_hugepages_mode(const struct ing_node *d, const struct ing_pool_opts *po)
{
	uint64_t slot[ING_POOL_MAX_CLASSES];
	unsigned count[ING_POOL_MAX_CLASSES];
	unsigned nr = po->nregions ? po->nregions : 1;
	int mode = 1;

	if (d->o.hugepages == 0)
		return 0;
	for (unsigned c = 0; c < po->nclasses; c++) {
		slot[c] = po->cls[c].slot_size;
		count[c] = po->cls[c].count;
	}
	for (unsigned r = 0; r < nr && mode == 1; r++) {
		struct ing_hugepages h;
		char fix[384], where[32] = "";
		ing_hugepages_query(NULL, NULL, po->nregions ? po->region_node[r] : po->numa_node, &h);
		uint64_t need = ing_hugepages_for_pool(slot, count, po->nclasses, h.page_size);
		if (h.node >= 0)
			snprintf(where, sizeof(where), " on node %d", h.node);
		if (h.supported && h.free >= need) {
			ING_INFO(COMP, "pool%s on hugepages: %llu x %llu MiB needed, %llu free%s",
				 nr > 1 ? " region" : "", (unsigned long long)need,
				 (unsigned long long)(h.page_size >> 20), (unsigned long long)h.free, where);
			continue;
		}
		mode = 0;
		ing_hugepages_advice(fix, sizeof(fix), &h, need);
		if (d->o.hugepages > 0) {
			ING_ERR(COMP, "--hugepages on: the pool%s needs %llu x %llu MiB hugepages%s, %llu free%s; %s",
				nr > 1 ? " region" : "", (unsigned long long)need,
				(unsigned long long)(h.page_size >> 20), where, (unsigned long long)h.free,
				h.supported ? "" : " (no hugetlb in this kernel)", fix);
			return -ENOMEM;
		}
		if (!h.supported)
			ING_WARN(COMP, "pool on 4 KiB pages: this kernel has no hugetlb support (slower RDMA: "
				 "more page-table entries per MR); --hugepages off silences this");
		else
			ING_WARN(COMP, "pool on 4 KiB pages (slower RDMA: more page-table entries per MR): "
				 "%llu hugepages free%s; %s; --hugepages off silences this",
				 (unsigned long long)h.free, where, fix);
	}
	return mode;
}

/* --listen and --metrics-listen can be bound (the real bind comes after EAL and the pool) */
static int listen_check(const struct ing_node *d)
{
	char why[384];
	int rc = ing_grpc_listen_check(d->o.listen, why, sizeof(why));
	if (rc) {
		ING_ERR(COMP, "cannot listen on --listen %s", why);
		return rc;
	}
	if (d->o.metrics_listen && (rc = ing_grpc_listen_check(d->o.metrics_listen, why, sizeof(why)))) {
		ING_ERR(COMP, "cannot listen on --metrics-listen %s", why);
		return rc;
	}
	return 0;
}

static void teardown(struct ing_node *d)
{
	if (d->loop) {
		ing_timer_cancel(d->loop, &d->tick);
		ing_timer_cancel(d->loop, &d->watchdog);
	}
	ing_metrics_srv_destroy(d->metrics);
	d->metrics = NULL;
	ing_grpc_server_destroy(d->srv);     /* every call closed: the service lets go of them */
	d->srv = NULL;
	if (d->rdma) {                       /* pollers stop; frames they held go to control */
		if (d->svc)
			(void)ing_svc_attach_rdma(d->svc, NULL);
		ing_rdma_destroy(d->rdma);
		d->rdma = NULL;
	}
	ing_persist_stop(d->persist, 10000); /* drains into the control mailbox */
	d->persist = NULL;
	ing_tier_stop(d->tier);              /* uploads in progress go again at the next start;
					      * the reads it held come back answered */
	ing_svc_destroy(d->svc);             /* returns every slot and read it held */
	d->svc = NULL;
	ing_fleet_stop(d->fleet);            /* after the calls that read it */
	d->fleet = NULL;
	ing_tier_destroy(d->tier);
	d->tier = NULL;
	if (d->hwm_init) {                   /* persistence and the tier are gone */
		ing_hwm_destroy(&d->hwm);
		d->hwm_init = false;
	}
	if (d->sfd >= 0) {
		if (d->loop)
			ing_loop_del_fd(d->loop, d->sfd);
		close(d->sfd);
		d->sfd = -1;
	}
	ing_loop_destroy(d->loop);
	d->loop = NULL;
	ing_pool_destroy(d->pool);
	d->pool = NULL;
	ing_eal_stop();
	explicit_bzero(d->o.auth_token, sizeof(d->o.auth_token));
	explicit_bzero(&d->o.tier_s3, sizeof(d->o.tier_s3));
	d->torn_down = true;
}

/* host:port of the listen address with the bound port (--listen 127.0.0.1:0) */
static void bound_address(const char *listen, int port, char *out, size_t n)
{
	const char *colon = strrchr(listen, ':');
	size_t hl = colon ? (size_t)(colon - listen) : strlen(listen);
	snprintf(out, n, "%.*s:%d", (int)hl, listen, port);
}

/* --listen's host is a wildcard: 0.0.0.0, ::, [::] or none */
static bool wildcard_listen(const char *listen)
{
	const char *colon = strrchr(listen, ':');
	size_t hl = colon ? (size_t)(colon - listen) : strlen(listen);
	return hl == 0 || (hl == 7 && !strncmp(listen, "0.0.0.0", 7)) ||
	       (hl == 4 && !strncmp(listen, "[::]", 4)) || (hl == 2 && !strncmp(listen, "::", 2));
}

/* The interface of the IPv4 default route (/proc/net/route), or "" */
static void default_route_ifname(char *ifname, size_t len)
{
	FILE *f = fopen("/proc/net/route", "re");
	char line[256], name[IF_NAMESIZE + 1];
	unsigned long dest, mask;
	unsigned flags;

	ifname[0] = 0;
	if (!f)
		return;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%16s %lx %*x %x %*d %*d %*d %lx", name, &dest, &flags, &mask) == 4 &&
		    dest == 0 && mask == 0 && (flags & 1u) /* RTF_UP */) {
			snprintf(ifname, len, "%s", name);
			break;
		}
	fclose(f);
}

/*
 * The address producers on other hosts can dial for a node listening on a wildcard: the
 * IPv4 address of the default route's interface, else the first non-loopback interface's
 * that is up (IPv4 before IPv6), else loopback. how says which, for the warning. 0, or -1
 * when only loopback was found.
 */
static int guess_address(char *host, size_t len, char *how, size_t howlen)
{
	struct ifaddrs *ifa = NULL;
	char route_if[IF_NAMESIZE + 1];
	int best = 0;   /* 3 default route's, 2 IPv4 up, 1 IPv6 global up */

	snprintf(host, len, "127.0.0.1");
	snprintf(how, howlen, "no interface but loopback is up");
	default_route_ifname(route_if, sizeof(route_if));
	if (getifaddrs(&ifa) != 0)
		return -1;
	for (struct ifaddrs *i = ifa; i; i = i->ifa_next) {
		if (!i->ifa_addr || !(i->ifa_flags & IFF_UP) || (i->ifa_flags & IFF_LOOPBACK))
			continue;
		char a[INET6_ADDRSTRLEN];
		int rank;
		if (i->ifa_addr->sa_family == AF_INET) {
			inet_ntop(AF_INET, &((struct sockaddr_in *)(void *)i->ifa_addr)->sin_addr, a, sizeof(a));
			rank = route_if[0] && !strcmp(i->ifa_name, route_if) ? 3 : 2;
		} else if (i->ifa_addr->sa_family == AF_INET6) {
			const struct in6_addr *a6 = &((struct sockaddr_in6 *)(void *)i->ifa_addr)->sin6_addr;
			if (IN6_IS_ADDR_LINKLOCAL(a6) || IN6_IS_ADDR_LOOPBACK(a6))
				continue;
			inet_ntop(AF_INET6, a6, a, sizeof(a));
			rank = 1;
		} else {
			continue;
		}
		if (rank <= best)
			continue;
		best = rank;
		snprintf(host, len, rank == 1 ? "[%s]" : "%s", a);
		snprintf(how, howlen, rank == 3 ? "the address of %s, the default route's interface" :
				      "the address of %s, the first interface up (no default route)",
			 i->ifa_name);
	}
	freeifaddrs(ifa);
	return best ? 0 : -1;
}

/*
 * What the node advertises (Members, its default fleet id): --advertise; else the listen
 * address with the bound port, unless that is a wildcard (0.0.0.0 is no address to dial):
 * then a guess from the interfaces, with one warning that says what and how to choose.
 */
static void advertised_address(const struct ing_node *d, int port, char *out, size_t n)
{
	char host[INET6_ADDRSTRLEN + 2], how[128];

	if (d->o.advertise) {
		snprintf(out, n, "%s", d->o.advertise);
		return;
	}
	if (!wildcard_listen(d->o.listen)) {
		bound_address(d->o.listen, port, out, n);
		return;
	}
	char bound[ING_FLEET_ADDR_MAX + 1];
	int rc = guess_address(host, sizeof(host), how, sizeof(how));
	snprintf(out, n, "%s:%d", host, port);
	bound_address(d->o.listen, port, bound, sizeof(bound));
	ING_WARN(COMP, "listening on %s: advertising %s (%s) in Members%s; set --advertise HOST:PORT "
		 "to the address producers dial%s", bound, out, how,
		 d->o.node_id ? "" : " and as this node's fleet id",
		 rc ? " (other hosts cannot reach loopback)" : "");
}

/* Node identity, membership and (with --fleet-db) the catalog export. 0 or -1 (logged). */
static int fleet_start(struct ing_node *d, int port)
{
	char advertise[ING_FLEET_ADDR_MAX + 1], catalog[PATH_MAX];
	struct ing_fleet_opts fo;
	ing_fleet_opts_init(&fo);
	advertised_address(d, port, advertise, sizeof(advertise));
	fo.advertise = advertise;
	fo.node_id = d->o.node_id ? d->o.node_id : advertise;
	fo.conninfo = d->o.fleet_db;
	fo.peers = d->o.fleet_peers;
	fo.heartbeat_ms = d->o.fleet_heartbeat_ms;
	fo.batch = d->o.fleet_batch;
	fo.draining = d->o.drain;
	if (d->o.sink == ING_SINK_FILE) {
		snprintf(catalog, sizeof(catalog), "%s/catalog.db", d->o.data_dir);
		fo.catalog = catalog;
	}
	d->fleet = ing_fleet_start(&fo);
	if (!d->fleet)
		return -1;
	ing_svc_attach_fleet(d->svc, d->fleet);
	return 0;
}

/* The cpus this thread may run on, captured before EAL pins it to the control lcore:
 * persistence workers the plan leaves unpinned run on these, not on control's one cpu
 * (threads inherit their creator's mask). This honours taskset and the cgroup's cpuset;
 * the dataplane lcores' cpus stay in the set (on a small machine that is all there is, and
 * the scheduler balances). */
static void capture_start_cpus(struct ing_node *d)
{
	cpu_set_t start_set;

	if (sched_getaffinity(0, sizeof(start_set), &start_set) == 0)
		for (int c = 0; c < CPU_SETSIZE; c++)
			if (CPU_ISSET(c, &start_set))
				d->start_cpus[d->n_start_cpus++] = c;
}

/*
 * The placement plan (numa/): where control, each rail's lcores and each region's workers
 * run, and the EAL lcore list from it. *have: false without a topology (EAL gets --lcores
 * as given). 0; -EINVAL with *usage for a flag naming what this machine lacks; -EIO.
 */
static int start_plan(struct ing_node *d, struct ing_plan *plan, bool *have, char *lcores,
		      size_t lcores_len, int *main_lcore, bool *usage)
{
	char err[512];
	int rc = ing_ingestd_plan(&d->o, plan, err, sizeof(err));

	*have = false;
	if (rc == 1) {
		ING_WARN(COMP, "no topology (%s): no placement plan; EAL lcores %s", err,
			 d->o.lcores ? d->o.lcores : "0");
		return 0;
	}
	if (rc == -EINVAL) {
		fprintf(stderr, "ingestd: %s (see --help)\n", err);
		*usage = true;
		return -EINVAL;
	}
	if (rc) {
		ING_ERR(COMP, "placement plan: %s", err);
		return -EIO;
	}
	*have = true;
	ing_plan_log(plan);
	if (ing_plan_eal_lcores(plan, lcores, lcores_len, main_lcore) != 0) {
		ING_ERR(COMP, "placement plan: EAL lcore list too long");
		return -EIO;
	}
	return 0;
}

/* EAL on the plan's lcores. Its own heap (descriptors) stays on 4 KiB pages (no_huge):
 * only the pool's regions go on hugepages, mapped MAP_HUGETLB by the pool (no hugetlbfs). */
static int start_eal(struct ing_node *d, const struct ing_plan *plan, const char *lcores,
		     int main_lcore)
{
	struct ing_eal_opts eo;
	ing_eal_opts_init(&eo);
	if (plan) {
		eo.lcores = lcores;
		eo.main_lcore = main_lcore;
	} else {
		eo.lcores = d->o.lcores;
	}
	int rc = ing_eal_start(&eo);
	if (rc) {
		ING_ERR(COMP, "EAL start failed: %s", strerror(-rc));
		return -EIO;
	}
	return 0;
}

/* which credentials the tier holds, to tell a reload that rotates them (not the keys) */
static uint32_t keys_crc(const struct ing_s3 *s3)
{
	uint32_t c = ing_crc32c(0, s3->access_key, strlen(s3->access_key));
	return ing_crc32c(c, s3->secret_key, strlen(s3->secret_key) + 1);
}

/* The MR pool, the control thread's mailbox and the persistence workers. */
static int start_storage(struct ing_node *d, const struct ing_plan *plan)
{
	struct ing_pool_opts pool_o;
	ing_pool_opts_init(&pool_o);
	pool_o.name = "frames";
	(void)ing_pool_parse_classes(&pool_o, d->o.pool); /* validated in parse_args */
	pool_o.numa_node = d->o.pool_node >= 0 ? d->o.pool_node : (plan ? plan->pool_node : -1);
	if (plan && plan->n_regions > 1) {
		/* one region per node that carries a rail: each rail's bytes land on its node */
		pool_o.nregions = plan->n_regions;
		for (unsigned g = 0; g < plan->n_regions; g++)
			pool_o.region_node[g] = plan->regions[g].node;
		pool_o.home_region = plan->control_region;
		ING_INFO(COMP, "pool: %u regions (one per NUMA node that carries a rail), each %s: %llu MiB "
			 "in all", plan->n_regions, d->o.pool,
			 (unsigned long long)((ing_pool_spec_bytes(&pool_o) * plan->n_regions) >> 20));
	}
	int rc = pool_hugepages_mode(d, &pool_o);
	if (rc < 0)
		return rc;
	/* on: required; auto with enough free: tried, a class that loses a race for its
	 * pages falls back to 4 KiB pages (said once below) */
	pool_o.hugepages = rc == 0 ? 0 : d->o.hugepages > 0 ? 1 : -1;
	bool want_huge = rc == 1;
	d->pool = ing_pool_create(&pool_o);
	if (!d->pool)
		return -EIO;
	d->pool_node = pool_o.numa_node;
	if (want_huge && !ing_pool_on_hugepages(d->pool))
		ING_WARN(COMP, "pool partly on 4 KiB pages: the free hugepages were taken by another "
			 "process while it was mapped; reserve more (ingest-hugepages)");
	/*
	 * Sized so that no post of a frame's message can find it full: per pool slot at most
	 * three messages wait here at once (an lcore's GRANTED, RECEIVED, DONE; the fallback's
	 * DONE alone; a striped frame's parts' PART_IN or failed DONE, at most
	 * ING_STRIPE_MAX_PARTS, then its DONE), per RDMA connection two (CONN_ERROR, CONN_RELEASED; at most
	 * ING_RDMA_MAX_LCORES x ING_RDMA_DEFAULT_MAX_CONNS of them), and 4096 for calls ({fn,
	 * arg}: the tier's read answers, at most ING_TIER_MAX_READS, and stop requests).
	 */
	unsigned slots = ing_pool_total(d->pool);
	unsigned per_slot = d->o.stripe_min ? ING_STRIPE_MAX_PARTS + 1 : 3;
	d->ctl = ing_mbox_create("control", per_slot * slots + 2 * ING_RDMA_MAX_LCORES * ING_RDMA_DEFAULT_MAX_CONNS +
					    4096);
	if (!d->ctl)
		return -EIO;
	struct ing_persist_opts pe;
	ing_persist_opts_init(&pe);
	pe.data_dir = d->o.data_dir;
	pe.workers = d->o.workers;
	pe.nice = d->o.worker_nice;
	pe.sink = d->o.sink;
	/* every frame of the pool may hash to one worker: its mailbox holds them all, so a
	 * complete frame always has room (--persist-ring only ever raises it) */
	if (d->o.persist_ring)
		pe.ring_size = d->o.persist_ring;
	if (pe.ring_size < slots)
		pe.ring_size = slots;
	if (plan && plan->n_workers > 0) {
		pe.worker_cpus = plan->worker_cpus;   /* per worker, -1: not pinned */
		pe.n_worker_cpus = plan->n_workers;
	}
	if (plan && plan->n_regions > 1) {
		/* a group of workers per pool region: each takes the frames whose slots are on its
		 * node (the plan put its workers there) */
		pe.groups = plan->n_regions;
		for (unsigned g = 0; g < plan->n_regions; g++)
			pe.group_node[g] = plan->regions[g].node;
	}
	pe.unpinned_cpus = d->n_start_cpus ? d->start_cpus : NULL;
	pe.n_unpinned_cpus = d->n_start_cpus;
	if (d->o.sink == ING_SINK_FILE) {   /* the rows it inserts, for the tier's mark */
		ing_hwm_init(&d->hwm);
		d->hwm_init = true;
		pe.hwm = &d->hwm;
	}
	d->persist = ing_persist_start(&pe, d->ctl);
	if (!d->persist)
		return -EIO;
	if (d->o.sink == ING_SINK_FILE) {   /* after persistence: the catalog exists */
		struct ing_tier_opts to;
		ing_tier_opts_init(&to);
		to.data_dir = d->o.data_dir;
		to.s3 = d->o.tier ? &d->o.tier_s3 : NULL;
		to.parallel = d->o.tier_parallel;
		to.retention_ms = d->o.local_retention_ms;
		to.high_water_pct = d->o.local_high_water_pct;
		to.high_water_bytes = d->o.local_high_water_bytes;
		to.ctl = d->ctl;                 /* where its read answers go (GetFrame) */
		to.hwm = &d->hwm;                /* its measure and what persistence inserted */
		to.cpus = d->n_start_cpus ? d->start_cpus : NULL;
		to.ncpus = d->n_start_cpus;
		to.nice = d->o.worker_nice;
		d->tier = ing_tier_start(&to);   /* also reads frames back (GetFrame) */
		d->tier_keys_crc = keys_crc(&d->o.tier_s3);   /* what a reload compares with */
		explicit_bzero(&d->o.tier_s3, sizeof(d->o.tier_s3));   /* the tier has its copy */
		if (!d->tier)
			return -EIO;
	}
	return 0;
}


/* The service's and the gRPC server's options from ingestd's. */
static void service_opts(const struct ing_node *d, struct ing_svc_opts *so,
			 struct ing_grpc_server_opts *gso)
{
	ing_svc_opts_init(so);
	so->credits_default = d->o.credits;
	so->credits_max = d->o.credits;
	so->max_frame = d->o.max_frame;
	so->stripe_min = d->o.stripe_min;
	so->frame_timeout_ms = d->o.frame_timeout_ms;
	so->max_sessions = d->o.max_sessions;
	so->session_idle_ms = d->o.session_idle_ms;
	so->auth_token = d->o.auth_token_file ? d->o.auth_token : NULL;
	so->max_sessions_per_peer = d->o.max_sessions_per_peer;
	so->max_slots_per_peer = d->o.max_slots_per_peer;
	so->slot_stall_ms = d->o.slot_stall_ms;
	so->auth_fail_burst = d->o.auth_fail_burst;
	so->auth_backoff_max_ms = d->o.auth_backoff_max_ms;
	ing_grpc_server_opts_init(gso);
	if (gso->max_recv_msg < so->max_chunk + (64u << 10))
		gso->max_recv_msg = so->max_chunk + (64u << 10);
	so->max_msg = gso->max_recv_msg;
	if (so->backlog_max < (size_t)gso->window_bytes + gso->max_recv_msg)
		so->backlog_max = (size_t)gso->window_bytes + gso->max_recv_msg;
	gso->listen = d->o.listen;
	gso->tls_cert = d->o.tls_cert;
	gso->tls_key = d->o.tls_key;
	gso->tls_client_ca = d->o.tls_client_ca;
	if (d->o.handshake_timeout_ms)
		gso->handshake_timeout_ms = d->o.handshake_timeout_ms;
	if (d->o.idle_timeout_ms)
		gso->idle_timeout_ms = d->o.idle_timeout_ms;
	if (d->o.max_connections)
		gso->max_connections = d->o.max_connections;
	if (d->o.max_conns_per_peer)
		gso->max_conns_per_peer = d->o.max_conns_per_peer;
	if (d->o.health_reserve)
		gso->health_reserve = d->o.health_reserve;
	/* every stream without a session takes one: a peer limited below one connection's
	   streams is refused below what the node advertises (SETTINGS) */
	unsigned spp = so->max_sessions_per_peer ? so->max_sessions_per_peer :
						   ING_DEFAULT_MAX_SESSIONS_PER_PEER;
	if (spp < gso->max_concurrent_streams)
		ING_WARN(COMP, "--max-sessions-per-peer %u is below the %u concurrent streams a "
			 "connection may open: a client's streams past %u get RESOURCE_EXHAUSTED",
			 spp, gso->max_concurrent_streams, spp);
}

/* The RDMA engine (rdma_cm listener + dataplane pollers), or a loud gRPC-only fallback;
 * what Negotiate offers goes into so->rdma. -EIO only when --rdma on cannot be had. */
static int start_rdma(struct ing_node *d, const struct ing_plan *plan, struct ing_svc_opts *so)
{
	char why[192] = "";

	so->rdma.rdma_available = false;
	if (d->o.rdma != 0) {
		struct ing_rdma_opts ro;
		struct ing_rail_spec rs[ING_PLAN_MAX_RAILS];
		char addrs[ING_PLAN_MAX_RAILS][48], lwhy[200];
		ing_rdma_opts_init(&ro);
		ro.port = (uint16_t)d->o.rdma_port;
		/* without rails from a plan: one rail, the first device and address given (both
		 * lists were checked by the option table) */
		if (ing_rail_list_parse(d->o.rdma_dev, rs, ING_PLAN_MAX_RAILS, lwhy, sizeof(lwhy)) > 0)
			ro.device = rs[0].dev;
		if (ing_addr_list_parse(d->o.rdma_addr, addrs, ING_PLAN_MAX_RAILS, lwhy, sizeof(lwhy)) > 0)
			ro.addr = addrs[0];
		ro.nlcores = 0;             /* one poller per EAL worker lcore */
		/* a job per pool slot at most: an lcore's mailbox always has room for one */
		if (ro.job_ring_size < ing_pool_total(d->pool))
			ro.job_ring_size = ing_pool_total(d->pool);
		/* striping: a frame's parts may all end up on one lcore (moved there from lost
		 * rails): a job per part of every slot */
		if (d->o.stripe_min && ro.job_ring_size < ING_STRIPE_MAX_PARTS * ing_pool_total(d->pool))
			ro.job_ring_size = ING_STRIPE_MAX_PARTS * ing_pool_total(d->pool);
		ro.lcore.mode = d->o.poll_mode;
		ro.push = d->o.rdma_write;
		ro.stripe = d->o.stripe_min != 0;   /* every rail registers every region */
		ro.lcore.grant_ms = d->o.grant_ms;
		if (plan && plan->n_rails) {
			/* one rail per device of the plan: its address, node, region and lcores */
			ro.nrails = plan->n_rails;
			for (unsigned i = 0; i < plan->n_rails && i < ING_RDMA_MAX_RAILS; i++) {
				const struct ing_plan_rail *pr = &plan->rails[i];
				struct ing_rdma_rail_opts *rr = &ro.rails[i];
				rr->device = pr->dev[0] ? pr->dev : NULL;
				rr->addr = pr->addr[0] ? pr->addr : NULL;
				rr->numa_node = pr->node;
				rr->region = plan->n_regions > 1 ? pr->region : 0;
				rr->nlcores = pr->n_lcores < ING_RDMA_MAX_LCORES ? pr->n_lcores : ING_RDMA_MAX_LCORES;
				for (unsigned k = 0; k < rr->nlcores; k++)
					rr->lcore_ids[k] = (unsigned)pr->lcores[k];
			}
		}
		d->rdma = ing_rdma_create(&ro, d->pool, d->persist, d->ctl, NULL, why, sizeof(why));
		if (!d->rdma && d->o.rdma > 0) {
			ING_ERR(COMP, "--rdma on: %s (--rdma auto serves the gRPC stream without RDMA; "
				"ingest-doctor checks the RDMA set-up)", why);
			return -EIO;
		}
		if (d->rdma && d->o.rdma > 0 && ing_rdma_rails_up(d->rdma) < ing_rdma_nrails(d->rdma)) {
			struct ing_rdma_rail_info ri;
			for (unsigned i = 0; ing_rdma_rail_info(d->rdma, i, &ri) == 0; i++)
				if (!ri.up)
					ING_ERR(COMP, "--rdma on: rail %u (%s) is down: %s (--rdma auto serves on "
						"the rails that work)", i, ri.device, ri.why);
			return -EIO;
		}
	} else {
		snprintf(why, sizeof(why), "disabled by --rdma off");
	}
	if (d->rdma) {
		size_t off = 0;
		struct ing_rdma_rail_info ri;
		for (unsigned i = 0; ing_rdma_rail_info(d->rdma, i, &ri) == 0 && off < sizeof(d->rdma_note); i++)
			off += (size_t)snprintf(d->rdma_note + off, sizeof(d->rdma_note) - off,
						"%s%s:%u on %s%s", i ? ", " : "rdma_cm ", ri.addr, ri.port,
						ri.device, ri.up ? "" : " (down)");
		so->rdma.rdma_available = true;
		so->rdma.rdma_addr = ing_rdma_addr(d->rdma);
		so->rdma.rdma_port = ing_rdma_port(d->rdma);
		so->rdma.grant_ms = d->o.grant_ms;
	} else {
		snprintf(d->rdma_note, sizeof(d->rdma_note), "%s", why[0] ? why : "no RDMA device on this node");
		/* a host without RDMA (or RDMA off on purpose) is a way to run, said once at INFO;
		 * a device that is there and failed is worth a WARN */
		if (d->o.rdma == 0 || !strncmp(d->rdma_note, "no RDMA device", 14))
			ING_INFO(COMP, "RDMA not available (%s): producers get the gRPC stream (PushFrames)%s",
				 d->rdma_note, d->o.rdma == 0 ? "" : "; rdma = off says it is meant");
		else
			ING_WARN(COMP, "RDMA READ not available (%s): producers get the gRPC fallback",
				 d->rdma_note);
	}
	so->rdma.note = d->rdma_note;
	return 0;
}

/* The service on the loop, with the RDMA engine attached and its pollers launched. */
static int start_service(struct ing_node *d, struct ing_svc_opts *so)
{
	if (d->o.max_frame && d->o.max_frame > ing_pool_max_len(d->pool))
		ING_WARN(COMP, "--max-frame %" PRIu64 " above the largest pool slot %" PRIu64 "; capped",
			 d->o.max_frame, ing_pool_max_len(d->pool));
	d->svc = ing_svc_create(d->loop, d->pool, d->persist, d->ctl, so);
	explicit_bzero(d->o.auth_token, sizeof(d->o.auth_token));   /* the service has its copy */
	so->auth_token = NULL;
	if (!d->svc)
		return -EIO;
	ing_svc_attach_tier(d->svc, d->tier);
	if (d->rdma) {
		int rc = ing_svc_attach_rdma(d->svc, d->rdma);
		if (rc == 0)
			rc = ing_rdma_start(d->rdma);
		if (rc) {
			ING_ERR(COMP, "RDMA engine start failed: %s", strerror(-rc));
			return rc;
		}
	}
	return 0;
}

/* The gRPC server carrying the service, the fleet, /metrics and the signals, all on the loop. */
static int start_server(struct ing_node *d, const struct ing_grpc_server_opts *gso,
			const sigset_t *signals)
{
	unsigned nm;
	const struct ing_grpc_method *methods = ing_svc_methods(d->svc, &nm);
	d->srv = ing_grpc_server_create(d->loop, gso, methods, nm);
	if (!d->srv)
		return -EIO;
	ing_svc_attach_server(d->svc, d->srv);
	ing_svc_set_node_info(d->svc, node_info, d);
	d->port = ing_grpc_server_port(d->srv);
	if (fleet_start(d, d->port))
		return -EIO;
	if (d->o.metrics_listen) {
		d->metrics = ing_metrics_srv_create(d->loop, d->o.metrics_listen, metrics_render, d);
		if (!d->metrics)
			return -EIO;
		ing_metrics_srv_set_ready(d->metrics, node_ready);
	}
	if (signals) {
		d->sfd = signalfd(-1, signals, SFD_NONBLOCK | SFD_CLOEXEC);
		if (d->sfd < 0) {
			int rc = -errno;
			ING_ERR(COMP, "signalfd: %s", strerror(errno));
			return rc;
		}
		int rc = ing_loop_add_fd(d->loop, d->sfd, EPOLLIN, signal_cb, d);
		if (rc) {
			ING_ERR(COMP, "cannot watch signals: %s", strerror(-rc));
			return rc;
		}
	}
	ing_grpc_server_set_serving(d->srv, true);
	return 0;
}

/* What the node serves, in a few lines. */
static void log_serving(const struct ing_node *d, const struct ing_svc_opts *so,
			const struct ing_grpc_server_opts *gso)
{
	ING_INFO(COMP, "h3000 ingestd %s serving gRPC on %s (port %d, %s)", ING_VERSION, d->o.listen,
		 d->port, d->o.tls_cert ? "TLS" : "cleartext h2c");
	ING_INFO(COMP, "pool %s: %u slots, largest %" PRIu64 " bytes, %s, node %d", d->o.pool, ing_pool_total(d->pool),
		 ing_pool_max_len(d->pool), ing_pool_on_hugepages(d->pool) ? "hugepages" : "4 KiB pages",
		 d->pool_node);
	ING_INFO(COMP, "persistence: %u workers, sink %s, data dir %s, crc32c %s", d->o.workers,
		 d->o.sink == ING_SINK_FILE ? "file" : "null", d->o.data_dir, ing_crc32c_impl());
	ING_INFO(COMP, "sessions: credits %u, max frame %" PRIu64 ", frame timeout %u s", d->o.credits,
		 d->o.max_frame && d->o.max_frame < ing_pool_max_len(d->pool) ? d->o.max_frame :
									     ing_pool_max_len(d->pool),
		 d->o.frame_timeout_ms / 1000);
	ING_INFO(COMP, "limits: connections %u (%u per address, +%u for health), handshake %u ms, idle %u s; "
		 "sessions %u (%u per address); slot stall %u ms%s",
		 gso->max_connections, gso->max_conns_per_peer, gso->health_reserve,
		 gso->handshake_timeout_ms, gso->idle_timeout_ms / 1000, so->max_sessions,
		 so->max_sessions_per_peer ? so->max_sessions_per_peer : ING_DEFAULT_MAX_SESSIONS_PER_PEER,
		 so->slot_stall_ms ? so->slot_stall_ms : ING_DEFAULT_SLOT_STALL_MS,
		 d->o.tls_client_ca ? "; client certificates required" : "");
	int pm = d->rdma ? ing_rdma_push_mode(d->rdma) : 0;
	ING_INFO(COMP, "transports: gRPC stream (PushFrames) yes; RDMA READ %s (%s); RDMA WRITE push %s",
		 d->rdma ? "yes" : "no", d->rdma_note,
		 pm == 1 ? "yes (memory window per grant)" : pm == 2 ? "yes (pool MR: grants not bounded)" : "no");
	if (d->o.auth_token_file)
		ING_INFO(COMP, "authentication: shared token from %s required (Negotiate authToken; "
			 "Stats: authorization: Bearer; health open)", d->o.auth_token_file);
	else
		ING_INFO(COMP, "authentication: off (any client may stream; see --auth-token-file)");
}

/* Tell whoever waits that the node serves: port files, --ready-fd, systemd (READY=1 and
 * the watchdog's pings at half its timeout). */
static int announce_ready(struct ing_node *d)
{
	int rc;

	if (d->o.port_file) {
		rc = write_port_file(d->o.port_file, d->port);
		if (rc) {
			ING_ERR(COMP, "cannot write port file %s: %s", d->o.port_file, strerror(-rc));
			return rc;
		}
	}
	if (d->metrics && d->o.metrics_port_file) {
		rc = write_port_file(d->o.metrics_port_file, ing_metrics_srv_port(d->metrics));
		if (rc) {
			ING_ERR(COMP, "cannot write metrics port file %s: %s", d->o.metrics_port_file,
				strerror(-rc));
			return rc;
		}
	}
	if (d->o.ready_fd >= 0) {
		char line[32];
		int n = snprintf(line, sizeof(line), "READY %d\n", d->port);
		if (write(d->o.ready_fd, line, (size_t)n) != n)
			ING_WARN(COMP, "--ready-fd %d: %s", d->o.ready_fd, strerror(errno));
		close(d->o.ready_fd);
	}
	uint64_t wd_usec = 0;
	if (sd_watchdog_enabled(0, &wd_usec) > 0 && wd_usec > 0) {
		d->watchdog_ns = wd_usec * 1000ull / 2;
		ing_timer_arm(d->loop, &d->watchdog, ing_now_ns());
		ING_INFO(COMP, "systemd watchdog: %llu ms, pinging every %llu ms",
			 (unsigned long long)(wd_usec / 1000), (unsigned long long)(d->watchdog_ns / 1000000));
	}
	(void)sd_notifyf(0, "READY=1\nSTATUS=serving gRPC on port %d\nMAINPID=%d", d->port, (int)getpid());
	return 0;
}

/* ---------------------------------------------------------------- reload (SIGHUP) */

/*
 * What a running node takes from its config file again, by key; every other key needs a
 * restart (the pool, the ports, the data dir, EAL and the plan, RDMA, the session table,
 * the tier's store, the fleet's identity) and is kept as it started, said by key.
 */
static const char *const reloadable[] = {
	"log-level", "log-format", "auth-token-file", "tls-cert", "tls-key", "tls-client-ca",
	"tier-credentials", "credits", "max-frame", "frame-timeout", "session-idle",
	"handshake-timeout", "idle-timeout", "max-connections", "max-conns-per-peer",
	"health-reserve", "max-sessions-per-peer", "max-slots-per-peer", "slot-stall",
	"auth-fail-burst", "auth-backoff-max", "drain", NULL,
};

static bool is_reloadable(const char *name)
{
	for (unsigned i = 0; reloadable[i]; i++)
		if (!strcmp(reloadable[i], name))
			return true;
	return false;
}

/* n's reloadable settings into the running o (the strings point into n's file text) */
static void take_reloadable(struct ing_ingestd_opts *o, const struct ing_ingestd_opts *n)
{
	o->log_level = n->log_level;
	o->log_format = n->log_format;
	o->auth_token_file = n->auth_token_file;
	o->tls_cert = n->tls_cert;
	o->tls_key = n->tls_key;
	o->tls_client_ca = n->tls_client_ca;
	o->tier_credentials = n->tier_credentials;
	o->credits = n->credits;
	o->max_frame = n->max_frame;
	o->frame_timeout_ms = n->frame_timeout_ms;
	o->session_idle_ms = n->session_idle_ms;
	o->handshake_timeout_ms = n->handshake_timeout_ms;
	o->idle_timeout_ms = n->idle_timeout_ms;
	o->max_connections = n->max_connections;
	o->max_conns_per_peer = n->max_conns_per_peer;
	o->health_reserve = n->health_reserve;
	o->max_sessions_per_peer = n->max_sessions_per_peer;
	o->max_slots_per_peer = n->max_slots_per_peer;
	o->slot_stall_ms = n->slot_stall_ms;
	o->auth_fail_burst = n->auth_fail_burst;
	o->auth_backoff_max_ms = n->auth_backoff_max_ms;
	o->drain = n->drain;
}

/* an error line printed by the option parser, as a log message: "ingestd: " and the
 * "; try 'ingestd --help'" tail off, one line */
static const char *parse_error_text(char *e)
{
	char *p = e;
	if (!strncmp(p, "ingestd: ", 9))
		p += 9;
	char *t = strstr(p, "; try 'ingestd --help'");
	if (t)
		*t = 0;
	for (char *q = p; *q; q++)
		if (*q == '\n')
			*q = *(q + 1) ? ' ' : 0;
	return *p ? p : "the configuration does not parse";
}

/* one "name old -> new" item into the summary (values redacted) */
static void add_item(char *buf, size_t len, size_t *n, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void add_item(char *buf, size_t len, size_t *n, const char *fmt, ...)
{
	va_list ap;
	if (*n >= len)
		return;
	if (*n)
		*n += (size_t)snprintf(buf + *n, len - *n, ", ");
	if (*n >= len)
		return;
	va_start(ap, fmt);
	*n += (size_t)vsnprintf(buf + *n, len - *n, fmt, ap);
	va_end(ap);
}

/*
 * SIGHUP, on the control thread: read the config file and the command line's flags again
 * (as at start: the flags win), check what can be checked before anything changes (the
 * parse, files readable, the TLS key against its certificate, max-frame against the pool),
 * then apply what a running node can take (log level and format, the shared secret,
 * TLS certificate and key for new connections, the store's credentials, the limits), keep
 * every other key as it is (one WARN per key: needs a restart), and say it all in one INFO
 * line. A new configuration that does not parse or check keeps the running one, with why.
 * Open connections, streams and frames in flight are not touched.
 */
static void node_reload(struct ing_node *d)
{
	const struct ing_cli *c = &ing_ingestd_cli;
	struct ing_ingestd_opts *n = NULL;
	char *buf = NULL, *err = NULL, why[1024];
	const char *src = d->o.config ? d->o.config : "the command line";
	size_t errlen = 0;
	int rc;

	if (d->phase != PH_RUN) {
		ING_INFO(COMP, "SIGHUP while stopping: not reloading");
		return;
	}
	if (!d->o.argv) {   /* a node started by a program that gave no command line */
		ING_WARN(COMP, "SIGHUP: this node was started without a command line to read again; "
			 "not reloading");
		return;
	}
	n = calloc(1, sizeof(*n));
	buf = malloc(64 << 10);
	FILE *ef = open_memstream(&err, &errlen);
	if (!n || !buf || !ef) {
		ING_ERR(COMP, "reload of %s: out of memory; keeping the running configuration", src);
		if (ef)
			fclose(ef);
		goto out;
	}
	ing_ingestd_opts_init(n);
	FILE *was = ing_cli_set_errors(ef);
	rc = ing_ingestd_opts_parse_buf(d->o.argc, d->o.argv, n, buf, 64 << 10);
	ing_cli_set_errors(was);
	fclose(ef);
	if (rc) {
		ING_ERR(COMP, "reload of %s failed: %s; keeping the running configuration", src,
			parse_error_text(err ? err : (char[]){ 0 }));
		goto out;
	}
	if (ing_ingestd_opts_check_reload(n, why, sizeof(why))) {
		ING_ERR(COMP, "reload of %s failed: %s; keeping the running configuration", src, why);
		goto out;
	}

	/* what differs, by key: applied or kept */
	char applied[1536], kept[768];
	size_t na = 0, nk = 0;
	applied[0] = kept[0] = 0;
	for (unsigned i = 0; i < c->nopts; i++) {
		const struct ing_opt *od = &c->opts[i];
		char a[512], b[512];
		if (od->type == ING_OPT_GROUP || !od->help || (od->flags & ING_OPTF_NOCONF))
			continue;
		int ra = ing_ingestd_opt_value(od, &d->o, true, a, sizeof(a));
		int rb = ing_ingestd_opt_value(od, n, true, b, sizeof(b));
		if (ra == -ENOENT)
			snprintf(a, sizeof(a), "(default)");
		if (rb == -ENOENT)
			snprintf(b, sizeof(b), "(default)");
		if (!strcmp(a, b))
			continue;
		bool tls_toggle = (!strcmp(od->name, "tls-cert") || !strcmp(od->name, "tls-key")) &&
				  (ra == -ENOENT || rb == -ENOENT);
		if (is_reloadable(od->name) && !tls_toggle) {
			add_item(applied, sizeof(applied), &na, "%s %s -> %s", od->name, a, b);
			continue;
		}
		ING_WARN(COMP, "reload: %s changed (%s -> %s): %s; kept %s", od->name, a, b,
			 tls_toggle ? "TLS on or off needs a restart" : "needs a restart", a);
		add_item(kept, sizeof(kept), &nk, "%s", od->name);
	}
	/* TLS on or off stays as it started: so do the paths, for the context built below */
	if ((!d->o.tls_cert) != (!n->tls_cert)) {
		n->tls_cert = d->o.tls_cert;
		n->tls_key = d->o.tls_key;
		n->tls_client_ca = d->o.tls_client_ca;
	}

	/* apply: the server first (a TLS context that fails to build changes nothing) */
	struct ing_ingestd_opts next = d->o;
	take_reloadable(&next, n);
	struct ing_svc_opts so;
	struct ing_grpc_server_opts gso;
	struct ing_node tmp = *d;    /* service_opts reads the node's options */
	tmp.o = next;
	memcpy(tmp.o.auth_token, n->auth_token, sizeof(n->auth_token));
	service_opts(&tmp, &so, &gso);
	bool cert_changed = false, token_changed = false;
	if (ing_grpc_server_reload(d->srv, &gso, why, sizeof(why), &cert_changed)) {
		ING_ERR(COMP, "reload of %s failed: %s; keeping the running configuration", src, why);
		explicit_bzero(&tmp.o, sizeof(tmp.o));
		goto out;
	}
	rc = ing_svc_reload(d->svc, &so, &token_changed);
	explicit_bzero(&tmp.o, sizeof(tmp.o));
	explicit_bzero(&so, sizeof(so));
	if (rc)
		ING_ERR(COMP, "reload: the shared secret of %s was refused; the old one stays",
			n->auth_token_file ? n->auth_token_file : "--auth-token-file");
	if (cert_changed)
		add_item(applied, sizeof(applied), &na, "TLS certificate (new connections)");
	if (token_changed && !strstr(applied, "auth-token-file"))
		add_item(applied, sizeof(applied), &na, "shared secret (the contents of %s)",
			 n->auth_token_file);
	else if (token_changed)
		add_item(applied, sizeof(applied), &na, "shared secret");
	if (d->tier && n->tier && d->o.tier && !strcmp(n->tier, d->o.tier)) {
		uint32_t kc = keys_crc(&n->tier_s3);
		if (kc != d->tier_keys_crc) {
			if (ing_tier_set_credentials(d->tier, n->tier_s3.access_key, n->tier_s3.secret_key))
				ING_ERR(COMP, "reload: the object store's new credentials could not reach the "
					"tier thread; the old ones stay until the next reload");
			else {
				d->tier_keys_crc = kc;
				add_item(applied, sizeof(applied), &na, "object store credentials");
			}
		}
	}
	if (n->log_level) {
		enum ing_log_level l;
		if (!ing_log_parse_level(n->log_level, &l))
			ing_log_set_level(l);
	} else if (d->o.log_level) {
		ing_log_set_level(ING_LOG_INFO);   /* the key removed: the default again */
	}
	ing_log_set_format(n->log_format);
	if (d->fleet && n->drain != d->o.drain)
		ing_fleet_set_draining(d->fleet, n->drain);
	d->o = next;
	explicit_bzero(d->o.auth_token, sizeof(d->o.auth_token));
	explicit_bzero(&d->o.tier_s3, sizeof(d->o.tier_s3));
	free(d->reload_buf);         /* nothing running points into the last one any more */
	d->reload_buf = buf;
	buf = NULL;
	if (!na && !nk)
		ING_INFO(COMP, "reload of %s: nothing changed", src);
	else
		ING_INFO(COMP, "reload of %s: applied: %s; needs a restart (kept): %s", src,
			 na ? applied : "nothing", nk ? kept : "nothing");
out:
	if (n) {
		explicit_bzero(n->auth_token, sizeof(n->auth_token));
		explicit_bzero(&n->tier_s3, sizeof(n->tier_s3));
	}
	free(n);
	free(buf);
	free(err);
}

int ing_node_start(const struct ing_ingestd_opts *o, const sigset_t *signals,
		   struct ing_node **out)
{
	struct ing_node *d;
	struct ing_plan plan;
	struct ing_svc_opts so;
	struct ing_grpc_server_opts gso;
	char err[512], lcores[128] = "";
	int main_lcore = -1, rc;
	bool have_plan = false, usage = false;

	*out = NULL;
	ing_crc32c_use_isal();   /* before any thread computes a crc (common/crc32c.h) */
	d = calloc(1, sizeof(*d));
	if (!d) {
		ING_ERR(COMP, "out of memory");
		return -ENOMEM;
	}
	d->o = *o;
	d->sfd = -1;
	capture_start_cpus(d);
	/* a pool this machine cannot hold fails here, with the numbers, not as a bare mmap error */
	if (ing_ingestd_opts_check_host(&d->o, true, err, sizeof(err), NULL, 0)) {
		fprintf(stderr, "ingestd: %s\n", err);
		usage = true;
		rc = -EINVAL;
		goto fail;
	}
	if ((rc = data_dir_ready(d->o.data_dir, d->o.sink)) ||
	    (rc = start_plan(d, &plan, &have_plan, lcores, sizeof(lcores), &main_lcore, &usage)) ||
	    /* the ports before EAL and the pool take their time: one in use is said at once */
	    (rc = listen_check(d)) ||
	    (rc = start_eal(d, have_plan ? &plan : NULL, lcores, main_lcore)) ||
	    (rc = start_storage(d, have_plan ? &plan : NULL)))
		goto fail;
	d->loop = ing_loop_create();
	if (!d->loop) {
		rc = -EIO;
		goto fail;
	}
	ing_timer_init(&d->tick, shutdown_tick, d);
	ing_timer_init(&d->watchdog, watchdog_cb, d);
	service_opts(d, &so, &gso);
	if ((rc = start_rdma(d, have_plan ? &plan : NULL, &so)) ||
	    (rc = start_service(d, &so)) ||
	    (rc = start_server(d, &gso, signals)))
		goto fail;
	log_serving(d, &so, &gso);
	if ((rc = announce_ready(d)))
		goto fail;
	*out = d;
	return 0;
fail:
	teardown(d);
	ing_mbox_destroy(d->ctl);
	free(d);
	/* -EINVAL means a usage error to the caller: only the plan reports one */
	return usage ? -EINVAL : (rc < 0 && rc != -EINVAL ? rc : -EIO);
}

int ing_node_port(const struct ing_node *n)
{
	return n->port;
}

void ing_node_stop(struct ing_node *n)
{
	/* the mailbox has room for every frame's messages and 4096 more: full only if the
	 * control thread is stuck, so try for a second and say so */
	for (int i = 0; n && ing_mbox_call(n->ctl, stop_msg, n, 0); i++) {
		if (i == 1000) {
			ING_ERR(COMP, "stop request: the control thread's mailbox stays full");
			return;
		}
		nanosleep(&(struct timespec){ .tv_nsec = 1000000 }, NULL);
	}
}

int ing_node_wait(struct ing_node *d)
{
	int rc;

	if (d->torn_down)
		return d->status;
	rc = ing_loop_run(d->loop);
	teardown(d);
	if (rc) {
		ING_ERR(COMP, "event loop failed: %s", strerror(-rc));
		d->status = 1;
	} else if (d->not_drained) {
		/* the producer got no DURABLE ack for these: not a clean stop (exit status 3) */
		ING_ERR(COMP, "stopped with %" PRIu64 " frames not drained (failed, not durable)",
			d->not_drained);
		d->status = 3;
	} else {
		ING_INFO(COMP, "stopped");
		d->status = 0;
	}
	return d->status;
}

void ing_node_destroy(struct ing_node *n)
{
	if (!n)
		return;
	if (!n->torn_down)
		teardown(n);
	ing_mbox_destroy(n->ctl);
	free(n->reload_buf);
	free(n);
}
