/* SPDX-License-Identifier: Apache-2.0 */
/* ingest-doctor's checks (contract in doctor.h). Each check adds exactly one result line. */
#include "numa/doctor.h"
#include "common/hugepages.h"
#include "numa/numa_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <unistd.h>

#define CAP_IPC_LOCK_BIT 14
#define ROCE_OVERHEAD 96 /* GRH+UDP+BTH+XRC+AtomicETH+ICRC, as the kernel's iboe_get_mtu */
#define MIN_FREE_FAIL (256ull << 20)
#define MIN_FREE_WARN (10ull << 30)

struct ctx {
	const struct ing_doctor_opts *o;
	struct ing_doctor_report *r;
	const char *sys, *proc;
	bool live_sys;
	uint64_t hp_size;     /* default hugepage size, bytes */
	bool hp_ok;           /* every pool region's node has the hugepages it needs free */
	uint64_t hp_need;     /* hugepages a pool region needs */
	uint64_t hp_total;    /* reserved, all sizes, bytes */
	unsigned n_rdma;
	struct ing_plan plan;
	bool have_plan;
	char plan_err[512];       /* why there is no plan */
	struct ing_topo *topo;
	char rails_spec[512];     /* the rails the topology knows, as a rdma-dev list */
	unsigned n_regions;       /* pool regions: the plan's, else one */
	int region_node[ING_PLAN_MAX_REGIONS];
};

const char *ing_check_status_str(enum ing_check_status s)
{
	return s == ING_CHECK_PASS ? "PASS" : s == ING_CHECK_WARN ? "WARN" : "FAIL";
}

void ing_doctor_opts_init(struct ing_doctor_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->sysfs_root = "/sys";
	o->procfs_root = "/proc";
	o->pool_bytes = ING_DOCTOR_DEFAULT_POOL_BYTES;
	o->memlock = ING_DOCTOR_MEMLOCK_RLIMIT;
	o->hugepages = -1;
	ing_plan_opts_init(&o->plan);
}

static void vadd(struct ing_doctor_report *r, const char *section, const char *name,
		 enum ing_check_status st, const char *fix, const char *fmt, va_list ap)
{
	if (r->n >= ING_DOCTOR_MAX_CHECKS)
		return;
	struct ing_check *k = &r->checks[r->n++];
	snprintf(k->section, sizeof(k->section), "%s", section);
	snprintf(k->name, sizeof(k->name), "%s", name);
	k->status = st;
	vsnprintf(k->detail, sizeof(k->detail), fmt, ap);
	snprintf(k->fix, sizeof(k->fix), "%s", st == ING_CHECK_PASS || !fix ? "" : fix);
	if (st == ING_CHECK_PASS)
		r->n_pass++;
	else if (st == ING_CHECK_WARN)
		r->n_warn++;
	else
		r->n_fail++;
}

static void add(struct ctx *c, const char *section, const char *name, enum ing_check_status st,
		const char *fix, const char *fmt, ...) __attribute__((format(printf, 6, 7)));
static void add(struct ctx *c, const char *section, const char *name, enum ing_check_status st,
		const char *fix, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vadd(c->r, section, name, st, fix, fmt, ap);
	va_end(ap);
}

void ing_doctor_add(struct ing_doctor_report *r, const char *section, const char *name,
		    enum ing_check_status st, const char *fix, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vadd(r, section, name, st, fix, fmt, ap);
	va_end(ap);
}

static int cmp_ver(const void *a, const void *b)
{
	return strverscmp((const char *)a, (const char *)b);
}

/* Sorted (version order) entry names of a directory; returns the count (0 if missing). */
static unsigned list_dir(const char *path, char (*names)[64], unsigned max)
{
	DIR *d = opendir(path);
	struct dirent *de;
	unsigned n = 0;
	if (!d)
		return 0;
	while ((de = readdir(d)) && n < max) {
		if (de->d_name[0] == '.' || strlen(de->d_name) >= 64)
			continue;
		memcpy(names[n++], de->d_name, strlen(de->d_name) + 1);
	}
	closedir(d);
	qsort(names, n, sizeof(names[0]), cmp_ver);
	return n;
}

/* ------------------------------------------------------------------ rdma */

static int mtu_enum_to_int(int e)
{
	return e >= 1 && e <= 5 ? 128 << e : 0;
}

/* The largest IB MTU a RoCE port gets over a netdev of this MTU. */
static int roce_mtu_for(int netdev_mtu)
{
	int room = netdev_mtu - ROCE_OVERHEAD;
	for (int m = 4096; m >= 256; m >>= 1)
		if (room >= m)
			return m;
	return 0;
}

static int query_active_mtu(const char *dev, int port)
{
	int n = 0, mtu = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	for (int i = 0; list && i < n; i++) {
		if (strcmp(ibv_get_device_name(list[i]), dev) != 0)
			continue;
		struct ibv_context *ctx = ibv_open_device(list[i]);
		struct ibv_port_attr pa;
		if (ctx && ibv_query_port(ctx, (uint8_t)port, &pa) == 0)
			mtu = mtu_enum_to_int(pa.active_mtu);
		if (ctx)
			ibv_close_device(ctx);
		break;
	}
	if (list)
		ibv_free_device_list(list);
	return mtu;
}

static bool gid_ipv4(const char *gid, char *ip, size_t len)
{
	unsigned g[8];
	if (sscanf(gid, "%x:%x:%x:%x:%x:%x:%x:%x", &g[0], &g[1], &g[2], &g[3], &g[4], &g[5], &g[6],
		   &g[7]) != 8)
		return false;
	if (g[0] | g[1] | g[2] | g[3] | g[4] || g[5] != 0xffff)
		return false;
	snprintf(ip, len, "%u.%u.%u.%u", g[6] >> 8, g[6] & 0xff, g[7] >> 8, g[7] & 0xff);
	return true;
}

static bool gid_zero(const char *gid)
{
	for (; *gid; gid++)
		if (*gid != '0' && *gid != ':')
			return false;
	return true;
}

static void check_port_gid_mtu(struct ctx *c, struct ing_doctor_rail *r, const char *dev, int port,
			       const char *ll)
{
	char base[PATH_MAX], gid[64], type[32], nd[64], ip[32], fix[320];
	static char names[512][64];
	int v2_any = -1, v1 = -1;

	snprintf(base, sizeof(base), "%s/class/infiniband/%s/ports/%d", c->sys, dev, port);
	if (strcasecmp(ll, "InfiniBand") == 0) {
		add(c, "rdma", "rdma.gid", ING_CHECK_PASS, NULL,
		    "%s port %d is InfiniBand: GID index 0, no RoCE GID needed", dev, port);
		r->gid_index = 0;
	} else {
		char gdir[PATH_MAX + 8];
		snprintf(gdir, sizeof(gdir), "%s/gids", base);
		unsigned n = list_dir(gdir, names, 512);
		for (unsigned i = 0; i < n; i++) {
			int idx = atoi(names[i]);
			if (read_line(gid, sizeof(gid), "%s/gids/%d", base, idx) || gid_zero(gid))
				continue;
			if (read_line(type, sizeof(type), "%s/gid_attrs/types/%d", base, idx))
				continue; /* unused entries fail to read on a real kernel */
			if (strcasecmp(type, "RoCE v2") != 0) {
				if (v1 < 0)
					v1 = idx;
				continue;
			}
			if (!gid_ipv4(gid, ip, sizeof(ip))) {
				if (v2_any < 0)
					v2_any = idx;
				continue;
			}
			r->gid_index = idx;
			snprintf(r->gid_ip, sizeof(r->gid_ip), "%s", ip);
			if (read_line(nd, sizeof(nd), "%s/gid_attrs/ndevs/%d", base, idx) == 0 &&
			    !r->netdev[0])
				snprintf(r->netdev, sizeof(r->netdev), "%s", nd);
			break;
		}
		if (r->gid_index >= 0) {
			add(c, "rdma", "rdma.gid", ING_CHECK_PASS, NULL,
			    "RoCE v2 GID index %d (%s%s%s) on %s port %d: use --gid-index %d",
			    r->gid_index, r->gid_ip, r->netdev[0] ? " on " : "", r->netdev, dev, port,
			    r->gid_index);
		} else {
			snprintf(fix, sizeof(fix),
				 "give the netdev an IPv4 address (ip addr add <addr>/<len> dev %s); the "
				 "RoCE v2 GID appears with it", r->netdev[0] ? r->netdev : "<netdev>");
			if (v2_any >= 0)
				add(c, "rdma", "rdma.gid", ING_CHECK_WARN, fix,
				    "%s port %d: no IPv4 RoCE v2 GID; only IPv6 RoCE v2 at index %d",
				    dev, port, v2_any);
			else
				add(c, "rdma", "rdma.gid", ING_CHECK_FAIL, fix,
				    "%s port %d: no RoCE v2 GID%s", dev, port,
				    v1 >= 0 ? " (RoCE v1 only)" : " (GID table empty)");
		}
	}

	/* MTU: the port's active MTU against what the netdev can carry */
	if (!r->netdev[0] && read_line(nd, sizeof(nd), "%s/gid_attrs/ndevs/0", base) == 0)
		snprintf(r->netdev, sizeof(r->netdev), "%s", nd);
	long nmtu = -1, amtu = -1;
	if (r->netdev[0])
		(void)read_long(&nmtu, "%s/class/net/%s/mtu", c->sys, r->netdev);
	r->netdev_mtu = (int)nmtu;
	if (read_long(&amtu, "%s/active_mtu", base) == 0) /* fixtures only: not a kernel file */
		r->active_mtu = (int)amtu;
	else if (c->live_sys)
		r->active_mtu = query_active_mtu(dev, port);
	if (r->active_mtu <= 0 && nmtu > 0 && strcasecmp(ll, "InfiniBand") != 0) {
		r->active_mtu = roce_mtu_for((int)nmtu);
		r->active_mtu_estimated = true;
	}
	if (r->active_mtu <= 0) {
		add(c, "rdma", "rdma.mtu", ING_CHECK_WARN, "ibv_devinfo -d <dev> shows active_mtu",
		    "%s port %d: active MTU unknown (no netdev MTU, no verbs answer)", dev, port);
		return;
	}
	if (strcasecmp(ll, "InfiniBand") == 0 || nmtu <= 0) {
		add(c, "rdma", "rdma.mtu", r->active_mtu >= 4096 ? ING_CHECK_PASS : ING_CHECK_WARN,
		    "raise the port MTU (opensm / subnet manager partition MTU) to 4096",
		    "%s port %d: active MTU %d", dev, port, r->active_mtu);
		return;
	}
	int carry = roce_mtu_for((int)nmtu);
	snprintf(fix, sizeof(fix), "ip link set %s mtu 9000 (and the switch ports and peers: the "
		 "path MTU is the smallest)", r->netdev);
	if (r->active_mtu > carry)
		add(c, "rdma", "rdma.mtu", ING_CHECK_FAIL, fix,
		    "active MTU %d exceeds what %s (MTU %ld) carries (%d): packets will be dropped",
		    r->active_mtu, r->netdev, nmtu, carry);
	else if (r->active_mtu < 4096 && carry < 4096)
		add(c, "rdma", "rdma.mtu", ING_CHECK_WARN, fix,
		    "active MTU %d%s, limited by %s MTU %ld (RDMA MTU 4096 needs >= %d)",
		    r->active_mtu, r->active_mtu_estimated ? " (estimated)" : "", r->netdev, nmtu,
		    4096 + ROCE_OVERHEAD);
	else if (r->active_mtu < 4096)
		add(c, "rdma", "rdma.mtu", ING_CHECK_WARN,
		    "check the port's max_mtu (ibv_devinfo -v) and the peer's MTU",
		    "active MTU %d < 4096 although %s (MTU %ld) allows 4096", r->active_mtu,
		    r->netdev, nmtu);
	else
		add(c, "rdma", "rdma.mtu", ING_CHECK_PASS, NULL, "active MTU %d%s, %s MTU %ld",
		    r->active_mtu, r->active_mtu_estimated ? " (estimated)" : "", r->netdev, nmtu);
}

/*
 * RDMA WRITE push (docs/PUSH.md): with type-2 memory windows each grant opens exactly its
 * slot; without them ingestd --rdma-write auto hands out the pool MR's rkey. Asked of the
 * live device (ibv_query_device_ex); a device that does not open (a test's sysfs root)
 * gets no line.
 */
static void check_mw(struct ctx *c, const char *dev)
{
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	struct ibv_context *ctx = NULL;

	for (int i = 0; list && i < n && !ctx; i++)
		if (strcmp(ibv_get_device_name(list[i]), dev) == 0)
			ctx = ibv_open_device(list[i]);
	if (list)
		ibv_free_device_list(list);
	if (!ctx)
		return;
	struct ibv_device_attr_ex a;
	memset(&a, 0, sizeof(a));
	int rc = ibv_query_device_ex(ctx, NULL, &a);
	ibv_close_device(ctx);
	bool mw2 = rc == 0 && (a.orig_attr.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B);
	if (mw2)
		add(c, "rdma", "rdma.mw", ING_CHECK_PASS, NULL,
		    "%s has type-2 memory windows: each RDMA WRITE push grant opens only its slot", dev);
	else
		add(c, "rdma", "rdma.mw", ING_CHECK_WARN,
		    "use a device with type-2 memory windows, or run ingestd --rdma-write off (or mw) "
		    "where producers are not trusted",
		    "%s has no type-2 memory windows%s: RDMA WRITE push grants carry the pool MR's rkey, "
		    "so a producer could write anywhere in the pool", dev,
		    rc ? " (ibv_query_device_ex failed)" : "");
}

/* Whether dev would be one of ingestd's default rails: port 1 ACTIVE and, on Ethernet, an
 * IPv4 RoCE v2 GID (its netdev has an IPv4 address). why: what it lacks. */
static bool rail_candidate(const struct ctx *c, const char *dev, char *why, size_t len)
{
	char base[PATH_MAX], st[64], ll[32], gid[64], type[32], ip[32];
	static char names[512][64];

	snprintf(base, sizeof(base), "%s/class/infiniband/%s/ports/1", c->sys, dev);
	if (read_line(st, sizeof(st), "%s/state", base) || !strstr(st, "ACTIVE")) {
		snprintf(why, len, "port 1 not ACTIVE");
		return false;
	}
	if (read_line(ll, sizeof(ll), "%s/link_layer", base) == 0 && !strcasecmp(ll, "InfiniBand"))
		return true;
	char gdir[PATH_MAX + 8];
	snprintf(gdir, sizeof(gdir), "%s/gids", base);
	unsigned n = list_dir(gdir, names, 512);
	for (unsigned i = 0; i < n; i++) {
		int idx = atoi(names[i]);
		if (read_line(gid, sizeof(gid), "%s/gids/%d", base, idx) == 0 && !gid_zero(gid) &&
		    read_line(type, sizeof(type), "%s/gid_attrs/types/%d", base, idx) == 0 &&
		    !strcasecmp(type, "RoCE v2") && gid_ipv4(gid, ip, sizeof(ip)))
			return true;
	}
	snprintf(why, len, "no IPv4 RoCE v2 GID (its netdev has no IPv4 address)");
	return false;
}

/* One rail's device: its ports, GID, MTU and memory windows. */
static void check_rail(struct ctx *c, struct ing_doctor_rail *dr)
{
	static char ports[16][64];
	char path[PATH_MAX], state[64], phys[64], ll[32];
	const char *dev = dr->dev;

	snprintf(path, sizeof(path), "%s/class/infiniband/%s/ports", c->sys, dev);
	unsigned np = list_dir(path, ports, 16);
	int use = -1;
	for (unsigned i = 0; i < np; i++) {
		int p = atoi(ports[i]);
		if (read_line(phys, sizeof(phys), "%s/%s/phys_state", path, ports[i]))
			snprintf(phys, sizeof(phys), "?");
		if (read_line(state, sizeof(state), "%s/%s/state", path, ports[i]))
			snprintf(state, sizeof(state), "?");
		bool active = strstr(state, "ACTIVE") != NULL;
		char fix[256];
		snprintf(fix, sizeof(fix), "bring the link up: ip link set <netdev> up, check cable "
			 "and switch port (rdma link show %s/%d)", dev, p);
		add(c, "rdma", "rdma.port", active ? ING_CHECK_PASS : ING_CHECK_FAIL, fix,
		    "%s port %d: state %s, phys_state %s", dev, p, state, phys);
		if (use < 0 && active)
			use = p;
	}
	if (!np) {
		add(c, "rdma", "rdma.port", ING_CHECK_FAIL, "check the driver (dmesg)",
		    "%s has no ports in sysfs", dev);
		return;
	}
	if (use < 0)
		use = atoi(ports[0]);
	dr->port = use;
	if (read_line(ll, sizeof(ll), "%s/%d/link_layer", path, use))
		snprintf(ll, sizeof(ll), "Ethernet");
	check_port_gid_mtu(c, dr, dev, use, ll);
	check_mw(c, dev);
}

static struct ing_doctor_rail *rail_new(struct ctx *c, const char *dev, int node)
{
	struct ing_doctor_rail *dr = &c->r->rails[c->r->n_rails++];
	long sys_node = -1;
	memset(dr, 0, sizeof(*dr));
	snprintf(dr->dev, sizeof(dr->dev), "%s", dev);
	dr->port = dr->gid_index = dr->active_mtu = dr->netdev_mtu = -1;
	(void)read_long(&sys_node, "%s/class/infiniband/%s/device/numa_node", c->sys, dev);
	dr->node = node >= 0 ? node : (int)sys_node;
	return dr;
}

/*
 * The rails: rdma-dev's devices, else every device with an ACTIVE port and an IPv4 RoCE v2
 * GID (ingestd's default), else the first device (its checks say why it cannot serve).
 * Each rail gets its port, GID, MTU and memory-window checks.
 */
static void check_rdma(struct ctx *c)
{
	struct ing_doctor_report *r = c->r;
	static char devs[64][64];
	struct ing_rail_spec spec[ING_DOCTOR_MAX_RAILS];
	char path[PATH_MAX], all[512] = "", rails[512] = "", why[256];

	snprintf(path, sizeof(path), "%s/class/infiniband", c->sys);
	unsigned n = list_dir(path, devs, 64);
	c->n_rdma = n;
	for (unsigned i = 0; i < n; i++) {
		size_t off = strlen(all);
		snprintf(all + off, sizeof(all) - off, "%s%s", i ? ", " : "", devs[i]);
	}
	int ns = ing_rail_list_parse(c->o->rdma_dev, spec, ING_DOCTOR_MAX_RAILS, why, sizeof(why));
	if (ns < 0) {
		add(c, "rdma", "rdma.devices", ING_CHECK_FAIL,
		    "write rdma-dev as 'mlx5_0, mlx5_1' (a node override: 'rxe1@1')", "rdma-dev %s", why);
		return;
	}
	if (!n && !ns) {
		add(c, "rdma", "rdma.devices", ING_CHECK_WARN,
		    "load the NIC's RDMA driver (modprobe mlx5_ib), or for tests Soft-RoCE: "
		    "rdma link add rxe0 type rxe netdev <netdev>",
		    "no RDMA device: fallback (gRPC) transport only");
		return;
	}
	for (int k = 0; k < ns; k++) {
		bool found = false;
		for (unsigned i = 0; i < n; i++)
			found |= !strcmp(devs[i], spec[k].dev);
		if (!found) {
			add(c, "rdma", "rdma.devices", ING_CHECK_FAIL,
			    "pick one of the devices listed (rdma link show), or load its driver",
			    "RDMA device '%s' not found (devices: %s)", spec[k].dev, n ? all : "none");
			return;
		}
		rail_new(c, spec[k].dev, spec[k].node);
	}
	for (unsigned i = 0; !ns && i < n; i++) {
		if (rail_candidate(c, devs[i], why, sizeof(why))) {
			if (r->n_rails < ING_DOCTOR_MAX_RAILS)
				rail_new(c, devs[i], -1);
			continue;
		}
		add(c, "rdma", "rdma.unused", ING_CHECK_WARN,
		    "bring its port up and give its netdev an IPv4 address, or leave it out (rdma-dev "
		    "lists the rails)", "%s is not a rail: %s", devs[i], why);
	}
	if (!r->n_rails)
		rail_new(c, devs[0], -1);   /* none would serve: say why of the first */
	for (unsigned i = 0; i < r->n_rails; i++) {
		size_t off = strlen(rails);
		snprintf(rails + off, sizeof(rails) - off, "%s%s", i ? ", " : "", r->rails[i].dev);
	}
	add(c, "rdma", "rdma.devices", ING_CHECK_PASS, NULL, "%u RDMA device%s: %s; checking %s%s", n,
	    n == 1 ? "" : "s", all, rails, r->n_rails > 1 ? " (one rail each)" : "");
	for (unsigned i = 0; i < r->n_rails; i++)
		check_rail(c, &r->rails[i]);
	/* the first rail's facts where a script found them before rails */
	const struct ing_doctor_rail *f = &r->rails[0];
	snprintf(r->rdma_dev, sizeof(r->rdma_dev), "%s", f->dev);
	r->port = f->port;
	r->gid_index = f->gid_index;
	snprintf(r->gid_ip, sizeof(r->gid_ip), "%s", f->gid_ip);
	r->active_mtu = f->active_mtu;
	r->active_mtu_estimated = f->active_mtu_estimated;
	snprintf(r->netdev, sizeof(r->netdev), "%s", f->netdev);
	r->netdev_mtu = f->netdev_mtu;
}

/*
 * The plan ingestd would make around these rails (those the topology knows), before the
 * memory checks: they count hugepages per pool region, on the region's node.
 */
static void make_plan(struct ctx *c, const char *terr)
{
	struct ing_doctor_report *r = c->r;
	struct ing_plan_opts po = c->o->plan;

	c->n_regions = 1;
	c->region_node[0] = c->o->plan.pool_node;
	if (!c->topo) {
		snprintf(c->plan_err, sizeof(c->plan_err), "%s", terr);
		return;
	}
	bool all_known = r->n_rails > 0;
	for (unsigned i = 0, off = 0; i < r->n_rails && off < sizeof(c->rails_spec); i++) {
		const struct ing_doctor_rail *dr = &r->rails[i];
		if (!ing_topo_find_rdma(c->topo, dr->dev)) {
			all_known = false;
			continue;
		}
		off += (unsigned)snprintf(c->rails_spec + off, sizeof(c->rails_spec) - off, "%s%s",
					  off ? ", " : "", dr->dev);
	}
	/* rdma-dev as given (its @node overrides) when the topology has every device of it */
	if (!po.rdma_dev)
		po.rdma_dev = c->o->rdma_dev && all_known ? c->o->rdma_dev
			    : c->rails_spec[0] ? c->rails_spec : NULL;
	if (!po.data_dir && !po.block_dev && ing_topo_is_live(c->topo))
		po.data_dir = c->o->data_dir;
	if (ing_plan_make(c->topo, &po, &c->plan, c->plan_err, sizeof(c->plan_err)))
		return;
	c->have_plan = true;
	c->n_regions = c->plan.n_regions;
	for (unsigned g = 0; g < c->plan.n_regions; g++)
		c->region_node[g] = c->plan.regions[g].node;
}

/* ------------------------------------------------------------------ memory */

/* The pool is prefaulted at start: on 4 KiB pages it needs that much memory available. */
static void check_pool_memory(struct ctx *c)
{
	const struct ing_doctor_opts *o = c->o;
	char path[PATH_MAX], line[256], a[32], b[32];
	uint64_t total = 0, avail = 0;
	bool on_huge = o->hugepages > 0 || (o->hugepages < 0 && c->hp_ok);

	snprintf(path, sizeof(path), "%s/meminfo", c->proc);
	FILE *f = fopen(path, "re");
	while (f && fgets(line, sizeof(line), f)) {
		unsigned long long kb;
		if (sscanf(line, "MemTotal: %llu kB", &kb) == 1)
			total = kb << 10;
		else if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
			avail = kb << 10;
	}
	if (f)
		fclose(f);
	uint64_t have = avail ? avail : total, bytes = o->pool_bytes * c->n_regions;
	char regions[48] = "";
	if (c->n_regions > 1)
		snprintf(regions, sizeof(regions), " (%u regions x %s)", c->n_regions,
			 human_bytes(o->pool_bytes, b, 32));
	if (on_huge)
		add(c, "memory", "memory.pool", ING_CHECK_PASS, NULL,
		    "pool %s%s on hugepages (memory.hugepages)", human_bytes(bytes, a, 32), regions);
	else if (!have)
		add(c, "memory", "memory.pool", ING_CHECK_WARN, "check /proc/meminfo",
		    "pool %s: no MemTotal in %s", human_bytes(bytes, a, 32), path);
	else if (bytes > have)
		add(c, "memory", "memory.pool", ING_CHECK_FAIL,
		    "give --pool fewer or smaller size classes, or free memory",
		    "pool %s%s > %s %s: ingestd cannot prefault it", human_bytes(bytes, a, 32), regions,
		    human_bytes(have, b, 32), avail ? "available (MemAvailable)" : "memory (MemTotal)");
	else
		add(c, "memory", "memory.pool", ING_CHECK_PASS, NULL, "pool %s%s <= %s %s",
		    human_bytes(bytes, a, 32), regions, human_bytes(have, b, 32), avail ? "available" : "memory");
}

/* CAP_IPC_LOCK lifts the memlock limit for ibv_reg_mr */
static void check_memlock(struct ctx *c)
{
	const struct ing_doctor_opts *o = c->o;
	char line[256], a[32], b[32], path[PATH_MAX];
	uint64_t pool = o->pool_bytes;
	bool cap = false;

	snprintf(path, sizeof(path), "%s/self/status", c->proc);
	FILE *f = fopen(path, "re");
	while (f && fgets(line, sizeof(line), f)) {
		unsigned long long eff;
		if (sscanf(line, "CapEff: %llx", &eff) == 1)
			cap = (eff >> CAP_IPC_LOCK_BIT) & 1;
	}
	if (f)
		fclose(f);
	int64_t lim = o->memlock;
	if (lim == ING_DOCTOR_MEMLOCK_RLIMIT) {
		struct rlimit rl;
		lim = getrlimit(RLIMIT_MEMLOCK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY
			      ? (int64_t)rl.rlim_cur : ING_DOCTOR_MEMLOCK_UNLIMITED;
	}
	/* each rail registers its pool region in its own PD: the kernel pins it once per rail;
	 * with striping on (stripe-min) every rail registers every region: rails x regions */
	unsigned nr = c->r->n_rails > 1 ? c->r->n_rails : 1;
	unsigned ng = nr > 1 && c->n_regions > 1 && o->plan.stripe_min ? c->n_regions : 1;
	uint64_t need = pool * nr * ng + (16ull << 20); /* + QPs, CQs, small MRs */
	char per[64] = "", why[96] = "";
	if (nr > 1 && ng > 1)
		snprintf(per, sizeof(per), "%u rails x %u regions x ", nr, ng);
	else if (nr > 1)
		snprintf(per, sizeof(per), "%u rails x ", nr);
	if (nr > 1 && c->n_regions > 1)
		snprintf(why, sizeof(why), o->plan.stripe_min ? " (stripe-min %s: every rail registers every region)"
				       : " (stripe-min 0: each rail registers its own region)",
			 human_bytes(o->plan.stripe_min, b, 32));
	if (lim == ING_DOCTOR_MEMLOCK_UNLIMITED)
		add(c, "memory", "memory.memlock", ING_CHECK_PASS, NULL, "memlock unlimited%s",
		    cap ? ", CAP_IPC_LOCK" : "");
	else if (cap)
		add(c, "memory", "memory.memlock", ING_CHECK_PASS, NULL,
		    "CAP_IPC_LOCK: the memlock limit (%s) does not apply", human_bytes((uint64_t)lim, a, 32));
	else if ((uint64_t)lim >= need)
		add(c, "memory", "memory.memlock", ING_CHECK_PASS, NULL,
		    "memlock %s >= %spool %s + 16 MiB%s", human_bytes((uint64_t)lim, a, 32), per,
		    human_bytes(pool, b, 32), why);
	else
		add(c, "memory", "memory.memlock", c->n_rdma ? ING_CHECK_FAIL : ING_CHECK_WARN,
		    o->plan.stripe_min && ng > 1
			    ? "ulimit -l unlimited (shell), LimitMEMLOCK=infinity (systemd unit) or "
			      "'<user> - memlock unlimited' in /etc/security/limits.conf; or stripe-min = 0 "
			      "(each rail pins its own region only)"
			    : "ulimit -l unlimited (shell), LimitMEMLOCK=infinity (systemd unit) or "
			      "'<user> - memlock unlimited' in /etc/security/limits.conf",
		    "memlock %s < %spool %s + 16 MiB%s and no CAP_IPC_LOCK: ibv_reg_mr will fail%s",
		    human_bytes((uint64_t)lim, a, 32), per, human_bytes(pool, b, 32), why,
		    c->n_rdma ? "" : " (once RDMA is used)");
}

/* hugepages: default size from meminfo, counts from sysfs; sets c->hp_* */
static void check_hugepages(struct ctx *c)
{
	const struct ing_doctor_opts *o = c->o;
	char line[256], a[32], b[32], fix[320], path[PATH_MAX];
	uint64_t pool = o->pool_bytes;

	snprintf(path, sizeof(path), "%s/meminfo", c->proc);
	FILE *f = fopen(path, "re");
	while (f && fgets(line, sizeof(line), f)) {
		unsigned long long kb;
		if (sscanf(line, "Hugepagesize: %llu kB", &kb) == 1)
			c->hp_size = kb << 10;
	}
	if (f)
		fclose(f);
	static char sizes[16][64];
	snprintf(path, sizeof(path), "%s/kernel/mm/hugepages", c->sys);
	unsigned ns = list_dir(path, sizes, 16);
	char per_size[256] = "";
	for (unsigned i = 0; i < ns; i++) {
		unsigned long long kb;
		long nr = 0, fr = 0;
		if (sscanf(sizes[i], "hugepages-%llukB", &kb) != 1)
			continue;
		(void)read_long(&nr, "%s/%s/nr_hugepages", path, sizes[i]);
		(void)read_long(&fr, "%s/%s/free_hugepages", path, sizes[i]);
		c->hp_total += (uint64_t)nr * (kb << 10);
		if (nr) {
			size_t off = strlen(per_size);
			snprintf(per_size + off, sizeof(per_size) - off, "%s%ld x %s (%ld free)",
				 off ? ", " : "", nr, human_bytes(kb << 10, a, 32), fr);
		}
	}
	if (!c->hp_size)
		c->hp_size = 2ull << 20;
	/* the decision ingestd makes (control/node/node.c): enough free on every region's node? */
	enum ing_check_status short_st = o->hugepages > 0 ? ING_CHECK_FAIL : ING_CHECK_WARN;
	c->hp_ok = true;
	for (unsigned g = 0; g < c->n_regions; g++) {
		struct ing_hugepages h;
		char rg[48] = "";
		ing_hugepages_query(c->sys, c->proc, c->region_node[g], &h);
		uint64_t pages = o->pool_nclasses ? ing_hugepages_for_pool(o->pool_slot, o->pool_count,
									    o->pool_nclasses, h.page_size)
						  : (pool + h.page_size - 1) / h.page_size;
		c->hp_need = pages;
		if (h.free < pages)
			c->hp_ok = false;
		char where[32] = "";
		if (h.node >= 0)
			snprintf(where, sizeof(where), " on node %d", h.node);
		if (c->n_regions > 1)
			snprintf(rg, sizeof(rg), "pool region %u: ", g);
		ing_hugepages_advice(fix, sizeof(fix), &h, pages);
		if (o->hugepages == 0) {
			add(c, "memory", "memory.hugepages", ING_CHECK_PASS, NULL,
			    "not used (--hugepages off): the MR pool uses 4 KiB pages");
			return;
		} else if (!ns || !h.supported) {
			add(c, "memory", "memory.hugepages", short_st,
			    "use a kernel with CONFIG_HUGETLBFS; until then ingestd runs with --hugepages off",
			    "kernel has no hugetlb support: the MR pool uses 4 KiB pages (slower)");
			return;
		} else if (!c->hp_total) {
			add(c, "memory", "memory.hugepages", short_st, fix,
			    "%sno hugepages reserved: the MR pool (%llu x %s) uses 4 KiB pages (slower, more "
			    "MTT entries)", rg, (unsigned long long)pages, human_bytes(h.page_size, a, 32));
		} else if (h.free < pages) {
			add(c, "memory", "memory.hugepages", short_st, fix,
			    "%s%s reserved; %llu x %s free%s = %s < pool %s: %s", rg, per_size,
			    (unsigned long long)h.free, human_bytes(h.page_size, a, 32), where,
			    human_bytes(h.free * h.page_size, b, 32), human_bytes(pool, line, 32),
			    o->hugepages > 0 ? "ingestd --hugepages on will not start" :
					       "the MR pool uses 4 KiB pages (slower)");
		} else {
			add(c, "memory", "memory.hugepages", ING_CHECK_PASS, NULL,
			    "%s%s reserved; free%s %s >= pool %s (%llu x %s)", rg, per_size, where,
			    human_bytes(h.free * h.page_size, a, 32), human_bytes(pool, b, 32),
			    (unsigned long long)pages, human_bytes(h.page_size, line, 32));
		}
	}
}

/* hugetlbfs mount */
static void check_hugetlbfs(struct ctx *c)
{
	char line[256], path[PATH_MAX];
	char mnt[256] = "", mopt[256] = "";

	snprintf(path, sizeof(path), "%s/mounts", c->proc);
	FILE *f = fopen(path, "re");
	while (f && fgets(line, sizeof(line), f)) {
		char dev[64], dir[256], fs[64], opts[256];
		if (sscanf(line, "%63s %255s %63s %255s", dev, dir, fs, opts) == 4 &&
		    strcmp(fs, "hugetlbfs") == 0 && !mnt[0]) {
			snprintf(mnt, sizeof(mnt), "%s", dir);
			const char *ps = strstr(opts, "pagesize=");
			snprintf(mopt, sizeof(mopt), "%s", ps ? ps : "");
			mopt[strcspn(mopt, ",")] = '\0';
		}
	}
	if (f)
		fclose(f);
	/* the pool maps its hugepages anonymously (MAP_HUGETLB) and EAL runs --no-huge:
	 * a hugetlbfs mount is reported, not required */
	if (mnt[0])
		add(c, "memory", "memory.hugetlbfs", ING_CHECK_PASS, NULL, "hugetlbfs mounted on %s%s%s "
		    "(not needed: the pool maps hugepages without it)", mnt, mopt[0] ? " " : "", mopt);
	else
		add(c, "memory", "memory.hugetlbfs", ING_CHECK_PASS, NULL,
		    "no hugetlbfs mounted (not needed: the pool maps hugepages without it)");
}

/* MR length: a multiple of the page size it lives on */
static void check_alignment(struct ctx *c)
{
	char a[32], b[32];
	uint64_t pool = c->o->pool_bytes;

	uint64_t align = c->hp_total ? c->hp_size : 4096;
	if (pool % align)
		add(c, "memory", "memory.alignment", ING_CHECK_FAIL,
		    "round --pool-bytes (and the slot sizes) up to a multiple of the page size",
		    "MR length %llu is not a multiple of the %s %spage size (next: %llu)",
		    (unsigned long long)pool, human_bytes(align, a, 32), c->hp_total ? "huge" : "",
		    (unsigned long long)((pool / align + 1) * align));
	else
		add(c, "memory", "memory.alignment", ING_CHECK_PASS, NULL,
		    "MR length %s = %llu x %s %spages", human_bytes(pool, a, 32),
		    (unsigned long long)(pool / align), human_bytes(align, b, 32), c->hp_total ? "huge" : "");
}

static void check_hugepages_safe(struct ctx *c)
{
	const char *safe = getenv("RDMAV_HUGEPAGES_SAFE");
	bool safe_on = safe && strcmp(safe, "0") != 0 && *safe;
	if (safe_on)
		add(c, "memory", "memory.hugepages_safe", ING_CHECK_PASS, NULL,
		    "RDMAV_HUGEPAGES_SAFE=%s", safe);
	else if (c->hp_total && c->n_rdma)
		add(c, "memory", "memory.hugepages_safe", ING_CHECK_WARN,
		    "export RDMAV_HUGEPAGES_SAFE=1 (Environment= in the systemd unit)",
		    "RDMAV_HUGEPAGES_SAFE not set: libibverbs' fork protection mishandles hugepage MRs");
	else
		add(c, "memory", "memory.hugepages_safe", ING_CHECK_PASS, NULL,
		    "RDMAV_HUGEPAGES_SAFE not set (not needed: %s)",
		    c->n_rdma ? "no hugepages" : "no RDMA device");
}

static void check_memory(struct ctx *c)
{
	check_memlock(c);
	check_hugepages(c);
	check_pool_memory(c);
	check_hugetlbfs(c);
	check_alignment(c);
	check_hugepages_safe(c);
}

/* ------------------------------------------------------------------ storage */

static const char *fs_name(long type, enum ing_check_status *st)
{
	static const struct { long magic; const char *name; enum ing_check_status st; } fs[] = {
		{ 0xEF53, "ext2/3/4", ING_CHECK_PASS },       { 0x58465342, "xfs", ING_CHECK_PASS },
		{ 0x9123683E, "btrfs", ING_CHECK_PASS },  { 0x2FC12FC1, "zfs", ING_CHECK_PASS },
		{ (long)0xF2F52010, "f2fs", ING_CHECK_PASS }, { 0x01021994, "tmpfs", ING_CHECK_WARN },
		{ (long)0x858458F6, "ramfs", ING_CHECK_WARN }, { 0x794C7630, "overlay", ING_CHECK_WARN },
		{ 0x6969, "nfs", ING_CHECK_WARN },        { (long)0xFF534D42, "cifs", ING_CHECK_WARN },
		{ 0x65735546, "fuse", ING_CHECK_WARN },   { 0x01021997, "9p", ING_CHECK_WARN },
	};
	for (size_t i = 0; i < sizeof(fs) / sizeof(fs[0]); i++)
		if ((type & 0xffffffffL) == (fs[i].magic & 0xffffffffL)) {
			*st = fs[i].st;
			return fs[i].name;
		}
	*st = ING_CHECK_WARN;
	return "unknown";
}

static void check_storage(struct ctx *c)
{
	const char *dir = c->o->data_dir;
	char probe_dir[PATH_MAX], a[32], b[32], path[PATH_MAX + 64];
	struct stat st;

	if (!dir) {
		add(c, "storage", "storage.dir", ING_CHECK_WARN,
		    "ingest-doctor --data-dir <the dir given to ingestd>",
		    "no --data-dir given: storage not checked");
		return;
	}
	snprintf(probe_dir, sizeof(probe_dir), "%s", dir);
	if (stat(dir, &st) == 0 && S_ISDIR(st.st_mode)) {
		if (access(dir, W_OK | X_OK) == 0)
			add(c, "storage", "storage.dir", ING_CHECK_PASS, NULL, "%s exists, writable", dir);
		else {
			add(c, "storage", "storage.dir", ING_CHECK_FAIL,
			    "chown the data dir to the ingestd user (or run ingestd as its owner)",
			    "%s is not writable: %s", dir, strerror(errno));
			return;
		}
	} else if (stat(dir, &st) == 0) {
		add(c, "storage", "storage.dir", ING_CHECK_FAIL, "point --data-dir at a directory",
		    "%s exists and is not a directory", dir);
		return;
	} else {
		/* the nearest existing ancestor is where it would be created */
		char *slash;
		while ((slash = strrchr(probe_dir, '/')) && stat(probe_dir, &st) != 0)
			slash == probe_dir ? (void)(probe_dir[1] = '\0') : (void)(*slash = '\0');
		if (stat(probe_dir, &st) != 0)
			snprintf(probe_dir, sizeof(probe_dir), ".");
		if (access(probe_dir, W_OK | X_OK) != 0) {
			add(c, "storage", "storage.dir", ING_CHECK_FAIL,
			    "create the data dir and give it to the ingestd user (install -d -o ...)",
			    "%s does not exist and %s is not writable: %s", dir, probe_dir,
			    strerror(errno));
			return;
		}
		add(c, "storage", "storage.dir", ING_CHECK_WARN, "mkdir -p it (ingestd creates it too)",
		    "%s does not exist yet (checking %s instead)", dir, probe_dir);
	}

	struct statfs sf;
	enum ing_check_status fst = ING_CHECK_WARN;
	const char *fsn = "unknown";
	if (statfs(probe_dir, &sf) == 0)
		fsn = fs_name((long)sf.f_type, &fst);
	add(c, "storage", "storage.fs", fst,
	    "put the data dir on a local xfs or ext4 filesystem on NVMe",
	    "%s is on %s%s", probe_dir, fsn,
	    fst == ING_CHECK_PASS ? ""
	    : strcmp(fsn, "tmpfs") == 0 || strcmp(fsn, "ramfs") == 0 ? " (not durable: lost on reboot)"
								      : " (not a local disk filesystem)");

	struct statvfs vf;
	if (statvfs(probe_dir, &vf) == 0) {
		uint64_t avail = (uint64_t)vf.f_bavail * vf.f_frsize;
		uint64_t total = (uint64_t)vf.f_blocks * vf.f_frsize;
		/* FAIL: not even one pool's worth of frames fits; WARN: hours, not days */
		uint64_t floor = c->o->pool_bytes > MIN_FREE_FAIL ? c->o->pool_bytes : MIN_FREE_FAIL;
		enum ing_check_status s = avail < floor ? ING_CHECK_FAIL
					: avail < MIN_FREE_WARN ? ING_CHECK_WARN : ING_CHECK_PASS;
		add(c, "storage", "storage.space", s,
		    "free space or point --data-dir at a bigger filesystem (frames are up to 64 MiB)",
		    "%s free of %s", human_bytes(avail, a, 32), human_bytes(total, b, 32));
	} else {
		add(c, "storage", "storage.space", ING_CHECK_WARN, "check the data dir by hand: df -h",
		    "statvfs(%s): %s", probe_dir, strerror(errno));
	}

	/* O_DIRECT: a real aligned write, made durable, then removed */
	snprintf(path, sizeof(path), "%s/.ingest-doctor-probe-%ld", probe_dir, (long)getpid());
	void *buf = NULL;
	if (posix_memalign(&buf, 4096, 4096)) {
		add(c, "storage", "storage.odirect", ING_CHECK_WARN, "run it again", "out of memory for the probe");
		return;
	}
	memset(buf, 0xa5, 4096);
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_DIRECT | O_CLOEXEC, 0600);
	int e = fd < 0 ? errno : 0;
	if (fd >= 0) {
		ssize_t w = pwrite(fd, buf, 4096, 0);
		e = w == 4096 ? 0 : w < 0 ? errno : EIO;
		if (!e && fdatasync(fd))
			e = errno;
		close(fd);
		unlink(path);
	}
	free(buf);
	if (!e)
		add(c, "storage", "storage.odirect", ING_CHECK_PASS, NULL,
		    "O_DIRECT 4 KiB write + fdatasync in %s works", probe_dir);
	else if (e == EINVAL || e == EOPNOTSUPP)
		add(c, "storage", "storage.odirect", ING_CHECK_WARN,
		    "use xfs or ext4 for the data dir to get O_DIRECT (NIC -> NVMe with no copy)",
		    "O_DIRECT not supported on %s: buffered writes + fdatasync (one more copy)", fsn);
	else
		add(c, "storage", "storage.odirect", ING_CHECK_FAIL,
		    "check permissions, free space and dmesg for I/O errors",
		    "probe write in %s failed: %s", probe_dir, strerror(e));
}

/* ------------------------------------------------------------------ numa */

static void check_numa(struct ctx *c, struct ing_topo *t, const char *terr)
{
	struct ing_doctor_report *r = c->r;
	char l[256];

	if (!t) {
		add(c, "numa", "numa.topology", ING_CHECK_WARN, "install hwloc / check the XML file",
		    "topology not available: %s", terr);
		return;
	}
	ing_topo_cpus_str(t, l, sizeof(l));
	add(c, "numa", "numa.topology", ING_CHECK_PASS, NULL, "%u NUMA node%s, %u cores, %u cpus (%s)%s",
	    ing_topo_n_nodes(t), ing_topo_n_nodes(t) == 1 ? "" : "s", ing_topo_n_cores(t),
	    ing_topo_n_pus(t), l, ing_topo_n_nodes(t) == 1 ? ": no NUMA placement to get wrong" : "");

	/* each rail's node: rdma-dev's @node, else what sysfs says (firmware tables) */
	for (unsigned i = 0; i < r->n_rails && r->rails[i].dev[0]; i++) {
		const struct ing_doctor_rail *dr = &r->rails[i];
		long sys_node = -1;
		char fix[192];
		(void)read_long(&sys_node, "%s/class/infiniband/%s/device/numa_node", c->sys, dr->dev);
		snprintf(fix, sizeof(fix), "say where it is: rdma-dev = %s@N (N its socket's node), or "
			 "enable NUMA/SRAT in the BIOS", dr->dev);
		if (dr->node < 0 && ing_topo_n_nodes(t) > 1)
			add(c, "numa", "numa.nic", ING_CHECK_WARN, fix,
			    "NUMA node of %s unknown: placement cannot follow the NIC", dr->dev);
		else if (dr->node >= 0 && sys_node != dr->node)
			add(c, "numa", "numa.nic", ING_CHECK_PASS, NULL, "%s on node %d (rdma-dev override%s)",
			    dr->dev, dr->node, sys_node < 0 ? "; the kernel does not know its node" : "");
		else
			add(c, "numa", "numa.nic", ING_CHECK_PASS, NULL, "%s on node %d%s", dr->dev,
			    dr->node < 0 ? 0 : dr->node, dr->node < 0 ? " (single node)" : "");
	}

	if (!c->have_plan) {
		add(c, "numa", "numa.placement", ING_CHECK_FAIL,
		    "fix the placement options (ingest-topo shows what is possible)", "no plan: %s",
		    c->plan_err);
		return;
	}
	struct ing_plan *p = &c->plan;
	char dp[128], w[128] = "not pinned", rg[64] = "";
	int wc[ING_PLAN_MAX_WORKERS];
	unsigned nw = 0;
	ing_cpulist_format(p->dataplane_cpus, p->n_dataplane, dp, sizeof(dp));
	for (unsigned i = 0; i < p->n_workers; i++)
		if (p->worker_cpus[i] >= 0)
			wc[nw++] = p->worker_cpus[i];
	if (nw)
		ing_cpulist_format(wc, nw, w, sizeof(w));
	if (p->n_regions > 1) {
		int nodes[ING_PLAN_MAX_REGIONS];
		char nl[48];
		for (unsigned g = 0; g < p->n_regions; g++)
			nodes[g] = p->regions[g].node;
		ing_cpulist_format(nodes, p->n_regions, nl, sizeof(nl));
		snprintf(rg, sizeof(rg), ", %u rails, pool regions on nodes %s", p->n_rails, nl);
	}
	if (p->n_remote) {
		const char *first = "";
		for (unsigned i = 0; i < p->n_warnings; i++)
			if (strstr(p->warnings[i], "node")) {
				first = p->warnings[i];
				break;
			}
		add(c, "numa", "numa.placement", ING_CHECK_WARN,
		    "put NIC and NVMe on one socket, or accept it; ingest-topo shows the plan",
		    "%u cross-node placement%s: %s", p->n_remote, p->n_remote == 1 ? "" : "s", first);
	} else {
		add(c, "numa", "numa.placement", ING_CHECK_PASS, NULL,
		    "control cpu %d, dataplane cpus %s, workers %s, MR pool node %d%s (%s poll)",
		    p->control_cpu, dp, w, p->pool_node, rg,
		    p->poll_mode_hint == ING_POLL_BUSY ? "busy" : "adaptive");
	}
}

/* ------------------------------------------------------------------ cpu */

static bool cmdline_has(const char *cmdline, const char *key, char *val, size_t len)
{
	size_t kl = strlen(key);
	for (const char *p = cmdline; (p = strstr(p, key)); p += kl) {
		if (p != cmdline && p[-1] != ' ')
			continue;
		if (p[kl] != '=' && p[kl] != ' ' && p[kl] != '\0')
			continue;
		if (val && len) {
			val[0] = '\0';
			if (p[kl] == '=') {
				size_t n = strcspn(p + kl + 1, " \n");
				snprintf(val, len, "%.*s", (int)(n < len ? n : len - 1), p + kl + 1);
			}
		}
		return true;
	}
	return false;
}

static void check_cpu(struct ctx *c)
{
	static char cpus[1024][64];
	char path[PATH_MAX], gov[64], bad[256] = "", cmdline[4096] = "", iso[256] = "", v[256];
	unsigned n_gov = 0, n_bad = 0;

	snprintf(path, sizeof(path), "%s/devices/system/cpu", c->sys);
	unsigned n = list_dir(path, cpus, 1024);
	for (unsigned i = 0; i < n; i++) {
		int id;
		char tail;
		if (sscanf(cpus[i], "cpu%d%c", &id, &tail) != 1)
			continue;
		if (read_line(gov, sizeof(gov), "%s/%s/cpufreq/scaling_governor", path, cpus[i]))
			continue;
		n_gov++;
		if (strcmp(gov, "performance") != 0) {
			size_t off = strlen(bad);
			if (n_bad++ < 8)
				snprintf(bad + off, sizeof(bad) - off, "%scpu%d=%s", off ? ", " : "", id, gov);
		}
	}
	if (!n_gov)
		add(c, "cpu", "cpu.governor", ING_CHECK_PASS, NULL,
		    "no cpufreq (VM or fixed frequency): nothing to tune");
	else if (n_bad)
		add(c, "cpu", "cpu.governor", ING_CHECK_WARN,
		    "cpupower frequency-set -g performance (or tuned-adm profile latency-performance)",
		    "%u of %u cpus not on the performance governor: %s%s", n_bad, n_gov, bad,
		    n_bad > 8 ? ", ..." : "");
	else
		add(c, "cpu", "cpu.governor", ING_CHECK_PASS, NULL, "all %u cpus: performance", n_gov);

	(void)read_line(cmdline, sizeof(cmdline), "%s/cmdline", c->proc);
	(void)read_line(iso, sizeof(iso), "%s/devices/system/cpu/isolated", c->sys);
	if (!iso[0] && cmdline_has(cmdline, "isolcpus", v, sizeof(v)))
		snprintf(iso, sizeof(iso), "%s", v);
	if (!c->have_plan) {
		add(c, "cpu", "cpu.isolation", ING_CHECK_WARN, "fix numa.placement first",
		    "no placement plan: isolation not checked (isolated: %s)", iso[0] ? iso : "none");
	} else if (c->plan.poll_mode_hint == ING_POLL_ADAPTIVE) {
		add(c, "cpu", "cpu.isolation", ING_CHECK_PASS, NULL,
		    "adaptive poll mode (cores shared): isolation not needed (isolated: %s)",
		    iso[0] ? iso : "none");
	} else {
		int isolated[1024], missing[ING_PLAN_MAX_LCORES];
		int ni = 0;
		unsigned nm = 0;
		const char *list = iso;
		/* isolcpus may carry flags: "domain,managed_irq,2-5" */
		while (*list && !(*list >= '0' && *list <= '9'))
			list = strchr(list, ',') ? strchr(list, ',') + 1 : list + strlen(list);
		if (*list)
			ni = ing_cpulist_parse(list, isolated, 1024);
		for (unsigned i = 0; i < c->plan.n_dataplane; i++) {
			bool found = false;
			for (int k = 0; k < ni; k++)
				found |= isolated[k] == c->plan.dataplane_cpus[i];
			if (!found)
				missing[nm++] = c->plan.dataplane_cpus[i];
		}
		char ml[64], fix[320];
		ing_cpulist_format(missing, nm, ml, sizeof(ml));
		if (snprintf(fix, sizeof(fix), "add isolcpus=%s nohz_full=%s rcu_nocbs=%s to the "
			     "kernel command line (or a tuned cpu-partitioning profile)", ml, ml,
			     ml) >= (int)sizeof(fix))
			snprintf(fix, sizeof(fix), "isolate the dataplane cpus (isolcpus=, nohz_full=)");
		if (nm)
			add(c, "cpu", "cpu.isolation", ING_CHECK_WARN, fix,
			    "busy-polling dataplane cpus %s are not isolated: the scheduler puts other "
			    "work there", ml);
		else
			add(c, "cpu", "cpu.isolation", ING_CHECK_PASS, NULL,
			    "dataplane cpus isolated (%s)", iso);
	}

	bool iommu_on = cmdline_has(cmdline, "intel_iommu", v, sizeof(v)) && strstr(v, "on");
	iommu_on |= cmdline_has(cmdline, "amd_iommu", v, sizeof(v)) && strstr(v, "on");
	bool pt = cmdline_has(cmdline, "iommu", v, sizeof(v)) && strcmp(v, "pt") == 0;
	pt |= cmdline_has(cmdline, "iommu.passthrough", v, sizeof(v)) && strcmp(v, "1") == 0;
	if (iommu_on && !pt)
		add(c, "cpu", "cpu.iommu", ING_CHECK_WARN,
		    "add iommu=pt to the kernel command line (keeps the IOMMU for VFIO, skips it for "
		    "host DMA)",
		    "IOMMU translates DMA (no iommu=pt): RDMA and NVMe DMA pay IOTLB misses");
	else
		add(c, "cpu", "cpu.iommu", ING_CHECK_PASS, NULL, "%s",
		    pt ? "IOMMU in passthrough mode" : "IOMMU not forced on by the kernel command line");
}

int ing_doctor_run(const struct ing_doctor_opts *o, struct ing_doctor_report *r)
{
	struct ctx c = { .o = o, .r = r };
	char terr[512] = "";

	memset(r, 0, sizeof(*r));
	r->port = r->gid_index = r->active_mtu = r->netdev_mtu = -1;
	c.sys = o->sysfs_root ? o->sysfs_root : "/sys";
	c.proc = o->procfs_root ? o->procfs_root : "/proc";
	c.live_sys = strcmp(c.sys, "/sys") == 0;

	c.topo = ing_topo_load(o->topology, terr, sizeof(terr));
	check_rdma(&c);
	make_plan(&c, terr);   /* the memory checks count per pool region */
	check_memory(&c);
	check_storage(&c);
	check_numa(&c, c.topo, terr);
	check_cpu(&c);
	ing_topo_destroy(c.topo);
	return (int)r->n_fail;
}

void ing_doctor_format_text(const struct ing_doctor_report *r, FILE *f)
{
	const char *sec = "";
	char gid[16] = "none";
	if (r->gid_index >= 0)
		snprintf(gid, sizeof(gid), "%d", r->gid_index);
	for (unsigned i = 0; i < r->n; i++) {
		const struct ing_check *k = &r->checks[i];
		if (strcmp(sec, k->section) != 0) {
			sec = k->section;
			fprintf(f, "[%s]\n", sec);
		}
		fprintf(f, "  %s  %-22s %s\n", ing_check_status_str(k->status), k->name, k->detail);
		if (k->fix[0])
			fprintf(f, "        fix: %s\n", k->fix);
	}
	for (unsigned i = 0; i < r->n_rails; i++) {
		const struct ing_doctor_rail *d = &r->rails[i];
		snprintf(gid, sizeof(gid), "none");
		if (d->gid_index >= 0)
			snprintf(gid, sizeof(gid), "%d", d->gid_index);
		char rl[16] = "";
		if (r->n_rails > 1)
			snprintf(rl, sizeof(rl), "rail %u: ", i);
		fprintf(f, "rdma: %sdevice %s port %d, GID index %s%s%s%s, active MTU %d%s, netdev %s MTU %d\n", rl,
			d->dev, d->port, gid,
			d->gid_ip[0] ? " (" : "", d->gid_ip, d->gid_ip[0] ? ")" : "", d->active_mtu,
			d->active_mtu_estimated ? " (estimated)" : "", d->netdev[0] ? d->netdev : "?",
			d->netdev_mtu);
	}
	fprintf(f, "summary: %u PASS, %u WARN, %u FAIL -> %s\n", r->n_pass, r->n_warn, r->n_fail,
		r->n_fail ? "FAIL" : r->n_warn ? "PASS with warnings" : "PASS");
}

void ing_doctor_format_json(const struct ing_doctor_report *r, FILE *f)
{
	fputs("{\"checks\":[", f);
	for (unsigned i = 0; i < r->n; i++) {
		const struct ing_check *k = &r->checks[i];
		fputs(i ? ",{\"section\":" : "{\"section\":", f);
		json_str(f, k->section);
		fputs(",\"name\":", f);
		json_str(f, k->name);
		fprintf(f, ",\"status\":\"%s\",\"detail\":", ing_check_status_str(k->status));
		json_str(f, k->detail);
		fputs(",\"fix\":", f);
		json_str(f, k->fix);
		fputc('}', f);
	}
	fputs("],\"rdma\":{\"device\":", f);
	json_str(f, r->rdma_dev);
	fprintf(f, ",\"port\":%d,\"gid_index\":%d,\"gid_ip\":", r->port, r->gid_index);
	json_str(f, r->gid_ip);
	fprintf(f, ",\"active_mtu\":%d,\"active_mtu_estimated\":%s,\"netdev\":", r->active_mtu,
		r->active_mtu_estimated ? "true" : "false");
	json_str(f, r->netdev);
	fprintf(f, ",\"netdev_mtu\":%d},\"rails\":[", r->netdev_mtu);
	for (unsigned i = 0; i < r->n_rails; i++) {
		const struct ing_doctor_rail *d = &r->rails[i];
		fputs(i ? ",{\"device\":" : "{\"device\":", f);
		json_str(f, d->dev);
		fprintf(f, ",\"node\":%d,\"port\":%d,\"gid_index\":%d,\"gid_ip\":", d->node, d->port,
			d->gid_index);
		json_str(f, d->gid_ip);
		fprintf(f, ",\"active_mtu\":%d,\"netdev\":", d->active_mtu);
		json_str(f, d->netdev);
		fprintf(f, ",\"netdev_mtu\":%d}", d->netdev_mtu);
	}
	fprintf(f, "],\"summary\":{\"pass\":%u,\"warn\":%u,\"fail\":%u,\"result\":\"%s\"}}",
		r->n_pass, r->n_warn, r->n_fail,
		r->n_fail ? "FAIL" : r->n_warn ? "WARN" : "PASS");
}
