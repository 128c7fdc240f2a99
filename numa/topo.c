/* SPDX-License-Identifier: Apache-2.0 */
/* Topology: hwloc with I/O devices, plus a sysfs scan for virtual RDMA devices (rxe). */
#include "numa/numa.h"
#include "numa/numa_internal.h"
#include "common/log.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <hwloc.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#define MAX_DEVS 64

struct ing_topo {
	hwloc_topology_t h;
	bool live;
	char source[PATH_MAX];
	unsigned n_rdma, n_block;
	struct ing_topo_dev rdma[MAX_DEVS];
	struct ing_topo_dev block[MAX_DEVS];
};

static hwloc_obj_t node_obj(const struct ing_topo *t, int node)
{
	hwloc_obj_t o = NULL;
	while ((o = hwloc_get_next_obj_by_type(t->h, HWLOC_OBJ_NUMANODE, o)))
		if ((int)o->os_index == node)
			return o;
	return NULL;
}

unsigned ing_topo_n_nodes(const struct ing_topo *t)
{
	int n = hwloc_get_nbobjs_by_type(t->h, HWLOC_OBJ_NUMANODE);
	return n > 0 ? (unsigned)n : 1;
}

static int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	return (x > y) - (x < y);
}

int ing_topo_node_id(const struct ing_topo *t, unsigned i)
{
	int ids[256];
	unsigned n = 0;
	hwloc_obj_t o = NULL;
	while ((o = hwloc_get_next_obj_by_type(t->h, HWLOC_OBJ_NUMANODE, o)) && n < 256)
		ids[n++] = (int)o->os_index;
	if (!n)
		return i == 0 ? 0 : -1;
	qsort(ids, n, sizeof(int), cmp_int);
	return i < n ? ids[i] : -1;
}

bool ing_topo_node_exists(const struct ing_topo *t, int node)
{
	if (hwloc_get_nbobjs_by_type(t->h, HWLOC_OBJ_NUMANODE) <= 0)
		return node == 0;
	return node_obj(t, node) != NULL;
}

uint64_t ing_topo_node_memory(const struct ing_topo *t, int node)
{
	hwloc_obj_t o = node_obj(t, node);
	return o && o->attr ? o->attr->numanode.local_memory : 0;
}

static hwloc_const_cpuset_t node_cpuset(const struct ing_topo *t, int node)
{
	hwloc_obj_t o = node_obj(t, node);
	if (!o && hwloc_get_nbobjs_by_type(t->h, HWLOC_OBJ_NUMANODE) <= 0 && node == 0)
		return hwloc_topology_get_topology_cpuset(t->h);
	return o ? o->cpuset : NULL;
}

unsigned ing_topo_node_pus(const struct ing_topo *t, int node, int *cpus, unsigned max)
{
	hwloc_const_cpuset_t cs = node_cpuset(t, node);
	unsigned n = 0;
	hwloc_obj_t pu = NULL;
	if (!cs)
		return 0;
	while ((pu = hwloc_get_next_obj_by_type(t->h, HWLOC_OBJ_PU, pu))) {
		if (!hwloc_bitmap_isset(cs, pu->os_index))
			continue;
		if (n < max)
			cpus[n] = (int)pu->os_index;
		n++;
	}
	if (cpus)
		qsort(cpus, n < max ? n : max, sizeof(int), cmp_int);
	return n;
}

unsigned ing_topo_node_cores(const struct ing_topo *t, int node, int *cpus, unsigned max)
{
	hwloc_const_cpuset_t cs = node_cpuset(t, node);
	hwloc_obj_type_t type = hwloc_get_nbobjs_by_type(t->h, HWLOC_OBJ_CORE) > 0 ? HWLOC_OBJ_CORE
										 : HWLOC_OBJ_PU;
	unsigned n = 0;
	hwloc_obj_t c = NULL;
	if (!cs)
		return 0;
	while ((c = hwloc_get_next_obj_by_type(t->h, type, c))) {
		if (!hwloc_bitmap_intersects(c->cpuset, cs))
			continue;
		/* the core's first PU in logical order (that is its "primary" hyperthread) */
		hwloc_obj_t pu = hwloc_get_obj_inside_cpuset_by_type(t->h, c->cpuset, HWLOC_OBJ_PU, 0);
		if (!pu)
			continue;
		if (n < max)
			cpus[n] = (int)pu->os_index;
		n++;
	}
	return n;
}

unsigned ing_topo_n_pus(const struct ing_topo *t)
{
	int n = hwloc_get_nbobjs_by_type(t->h, HWLOC_OBJ_PU);
	return n > 0 ? (unsigned)n : 0;
}

unsigned ing_topo_n_cores(const struct ing_topo *t)
{
	int n = hwloc_get_nbobjs_by_type(t->h, HWLOC_OBJ_CORE);
	return n > 0 ? (unsigned)n : ing_topo_n_pus(t);
}

static hwloc_obj_t pu_obj(const struct ing_topo *t, int cpu)
{
	if (cpu < 0)
		return NULL;
	return hwloc_get_pu_obj_by_os_index(t->h, (unsigned)cpu);
}

int ing_topo_cpu_node(const struct ing_topo *t, int cpu)
{
	hwloc_obj_t pu = pu_obj(t, cpu);
	if (!pu)
		return -1;
	for (unsigned i = 0; i < ing_topo_n_nodes(t); i++) {
		int id = ing_topo_node_id(t, i);
		hwloc_const_cpuset_t cs = node_cpuset(t, id);
		if (cs && hwloc_bitmap_isset(cs, (unsigned)cpu))
			return id;
	}
	return -1;
}

int ing_topo_cpu_core(const struct ing_topo *t, int cpu)
{
	hwloc_obj_t pu = pu_obj(t, cpu);
	if (!pu)
		return -1;
	hwloc_obj_t c = hwloc_get_ancestor_obj_by_type(t->h, HWLOC_OBJ_CORE, pu);
	return c ? (int)c->logical_index : (int)pu->logical_index;
}

void ing_topo_cpus_str(const struct ing_topo *t, char *buf, size_t len)
{
	hwloc_bitmap_list_snprintf(buf, len, hwloc_topology_get_topology_cpuset(t->h));
}

bool ing_topo_is_live(const struct ing_topo *t)
{
	return t->live;
}

const char *ing_topo_source(const struct ing_topo *t)
{
	return t->source;
}

unsigned ing_topo_n_rdma(const struct ing_topo *t)
{
	return t->n_rdma;
}

const struct ing_topo_dev *ing_topo_rdma(const struct ing_topo *t, unsigned i)
{
	return i < t->n_rdma ? &t->rdma[i] : NULL;
}

unsigned ing_topo_n_block(const struct ing_topo *t)
{
	return t->n_block;
}

const struct ing_topo_dev *ing_topo_block(const struct ing_topo *t, unsigned i)
{
	return i < t->n_block ? &t->block[i] : NULL;
}

const struct ing_topo_dev *ing_topo_find_rdma(const struct ing_topo *t, const char *name)
{
	for (unsigned i = 0; name && i < t->n_rdma; i++)
		if (strcmp(t->rdma[i].name, name) == 0)
			return &t->rdma[i];
	return NULL;
}

const struct ing_topo_dev *ing_topo_find_block(const struct ing_topo *t, const char *name)
{
	for (unsigned i = 0; name && i < t->n_block; i++)
		if (strcmp(t->block[i].name, name) == 0)
			return &t->block[i];
	return NULL;
}

/* The NUMA node an I/O object is local to: its non-I/O ancestor covers exactly one node. */
static void fill_locality(struct ing_topo *t, hwloc_obj_t io, struct ing_topo_dev *d)
{
	hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(t->h, io);
	d->node = -1;
	d->cpus[0] = '\0';
	if (!anc)
		return;
	if (anc->cpuset)
		hwloc_bitmap_list_snprintf(d->cpus, sizeof(d->cpus), anc->cpuset);
	if (anc->nodeset && hwloc_bitmap_weight(anc->nodeset) == 1)
		d->node = hwloc_bitmap_first(anc->nodeset);
	else if (ing_topo_n_nodes(t) == 1)
		d->node = ing_topo_node_id(t, 0);
}

static void collect_hwloc_devs(struct ing_topo *t)
{
	hwloc_obj_t o = NULL;
	while ((o = hwloc_get_next_osdev(t->h, o))) {
		enum hwloc_obj_osdev_type_e ty = o->attr->osdev.type;
		struct ing_topo_dev *d;
		if (!o->name)
			continue;
		if (ty == HWLOC_OBJ_OSDEV_OPENFABRICS && t->n_rdma < MAX_DEVS)
			d = &t->rdma[t->n_rdma++];
		else if (ty == HWLOC_OBJ_OSDEV_BLOCK && t->n_block < MAX_DEVS)
			d = &t->block[t->n_block++];
		else
			continue;
		memset(d, 0, sizeof(*d));
		snprintf(d->name, sizeof(d->name), "%s", o->name);
		fill_locality(t, o, d);
		d->port_state = -1;
		if (ty == HWLOC_OBJ_OSDEV_OPENFABRICS) {
			/* hwloc's IB_PORT_ACTIVE is 4; an XML topology keeps what it saw */
			const char *st = hwloc_obj_get_info_by_name(o, "Port1State");
			if (st)
				d->port_state = atoi(st) == 4;
		}
		hwloc_obj_t pci = o->parent;
		if (pci && pci->type == HWLOC_OBJ_PCI_DEVICE) {
			snprintf(d->pci, sizeof(d->pci), "%04x:%02x:%02x.%01x",
				 pci->attr->pcidev.domain, pci->attr->pcidev.bus,
				 pci->attr->pcidev.dev, pci->attr->pcidev.func);
			if (ty == HWLOC_OBJ_OSDEV_OPENFABRICS) {
				/* the netdev of a RoCE port is its sibling OS device */
				for (hwloc_obj_t s = pci->io_first_child; s; s = s->next_sibling)
					if (s->type == HWLOC_OBJ_OS_DEVICE &&
					    s->attr->osdev.type == HWLOC_OBJ_OSDEV_NETWORK && s->name) {
						snprintf(d->netdev, sizeof(d->netdev), "%s", s->name);
						break;
					}
			}
		}
	}
}

/* The IPv4 addresses of each RDMA device's netdev (live machine). */
static void collect_addrs(struct ing_topo *t)
{
	struct ifaddrs *ifa = NULL;

	if (getifaddrs(&ifa))
		return;
	for (unsigned k = 0; k < t->n_rdma; k++) {
		struct ing_topo_dev *d = &t->rdma[k];
		d->addrs_known = true;
		for (struct ifaddrs *i = ifa; i && d->netdev[0]; i = i->ifa_next) {
			if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !i->ifa_name ||
			    strcmp(i->ifa_name, d->netdev) || d->n_addrs >= 4)
				continue;
			inet_ntop(AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr,
				  d->addrs[d->n_addrs], sizeof(d->addrs[0]));
			d->n_addrs++;
		}
	}
	freeifaddrs(ifa);
}

/* Soft-RoCE and other virtual RDMA devices have no PCI parent: hwloc leaves them out. The
 * scan also reads every device's port 1 state (hwloc's live view has none). */
static void collect_sysfs_rdma(struct ing_topo *t)
{
	DIR *dir = opendir("/sys/class/infiniband");
	struct dirent *de;
	if (!dir)
		return;
	while ((de = readdir(dir)) && t->n_rdma < MAX_DEVS) {
		if (de->d_name[0] == '.')
			continue;
		struct ing_topo_dev *d = (struct ing_topo_dev *)ing_topo_find_rdma(t, de->d_name);
		bool fresh = !d;
		if (fresh) {
			if (strlen(de->d_name) >= sizeof(d->name))
				continue;
			d = &t->rdma[t->n_rdma++];
			memset(d, 0, sizeof(*d));
			memcpy(d->name, de->d_name, strlen(de->d_name) + 1);
			d->node = -1;
			d->from_sysfs = true;
		}
		char st[64];
		d->port_state = read_line(st, sizeof(st), "/sys/class/infiniband/%s/ports/1/state",
					  de->d_name) == 0 ? strstr(st, "ACTIVE") != NULL : -1;
		if (!d->netdev[0]) {
			char nd[ING_TOPO_NAME_MAX];
			if (read_line(nd, sizeof(nd), "/sys/class/infiniband/%s/ports/1/gid_attrs/ndevs/0",
				      de->d_name) == 0)
				snprintf(d->netdev, sizeof(d->netdev), "%s", nd);
		}
		if (!fresh)
			continue;
		long node = -1;
		if (read_long(&node, "/sys/class/infiniband/%s/device/numa_node", de->d_name) &&
		    d->netdev[0])
			(void)read_long(&node, "/sys/class/net/%s/device/numa_node", d->netdev);
		d->node = (int)node;
		if (d->node < 0 && ing_topo_n_nodes(t) == 1)
			d->node = ing_topo_node_id(t, 0);
		if (d->node >= 0) {
			int cpus[1024];
			unsigned n = ing_topo_node_pus(t, d->node, cpus, 1024);
			ing_cpulist_format(cpus, n < 256 ? n : 256, d->cpus, sizeof(d->cpus));
		}
	}
	closedir(dir);
}

static int cmp_dev(const void *a, const void *b)
{
	return strverscmp(((const struct ing_topo_dev *)a)->name, ((const struct ing_topo_dev *)b)->name);
}

struct ing_topo *ing_topo_load(const char *xml, char *err, size_t errlen)
{
	struct ing_topo *t = calloc(1, sizeof(*t));
	if (!t) {
		set_err(err, errlen, ENOMEM, "out of memory");
		return NULL;
	}
	if (!xml || !*xml)
		xml = getenv("HWLOC_XMLFILE");
	if (xml && !*xml)
		xml = NULL;
	t->live = !xml;
	snprintf(t->source, sizeof(t->source), "%s", xml ? xml : "live");
	if (hwloc_topology_init(&t->h) < 0) {
		set_err(err, errlen, errno, "hwloc_topology_init: %s", strerror(errno));
		free(t);
		return NULL;
	}
	hwloc_topology_set_io_types_filter(t->h, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
	if (xml) {
		if (access(xml, R_OK) != 0) {
			set_err(err, errlen, errno, "topology XML %s: %s", xml, strerror(errno));
			goto fail;
		}
		if (hwloc_topology_set_xml(t->h, xml) < 0) {
			set_err(err, errlen, EINVAL, "topology XML %s: cannot be used: %s", xml,
				strerror(errno));
			goto fail;
		}
	}
	if (hwloc_topology_load(t->h) < 0) {
		set_err(err, errlen, EINVAL, "hwloc could not load the %s topology%s%s: %s",
			xml ? "XML" : "live", xml ? " " : "", xml ? xml : "", strerror(errno));
		goto fail;
	}
	collect_hwloc_devs(t);
	if (t->live) {
		collect_sysfs_rdma(t);
		collect_addrs(t);
	}
	/* name order (mlx5_0 before mlx5_1), not PCI order: "the first device" is predictable */
	qsort(t->rdma, t->n_rdma, sizeof(t->rdma[0]), cmp_dev);
	qsort(t->block, t->n_block, sizeof(t->block[0]), cmp_dev);
	return t;
fail:
	hwloc_topology_destroy(t->h);
	free(t);
	return NULL;
}

void ing_topo_destroy(struct ing_topo *t)
{
	if (!t)
		return;
	if (t->h)
		hwloc_topology_destroy(t->h);
	free(t);
}

int ing_blockdev_for_path(const char *sysfs_root, const char *path, char *name, size_t len)
{
	char link[PATH_MAX], real[PATH_MAX], tmp[PATH_MAX];
	struct stat st;
	const char *root = sysfs_root ? sysfs_root : "/sys";

	if (stat(path, &st) != 0)
		return -errno;
	if (major(st.st_dev) == 0)
		return -ENODEV; /* tmpfs, overlay, nfs, btrfs subvolume: no single block device */
	snprintf(link, sizeof(link), "%s/dev/block/%u:%u", root, major(st.st_dev), minor(st.st_dev));
	if (!realpath(link, real))
		return -ENODEV;
	for (int depth = 0; depth < 8; depth++) {
		/* a partition's sysfs dir sits inside its disk's and has a "partition" file */
		if (snprintf(tmp, sizeof(tmp), "%s/partition", real) >= (int)sizeof(tmp))
			return -ENAMETOOLONG;
		if (access(tmp, F_OK) == 0) {
			char *slash = strrchr(real, '/');
			if (!slash)
				return -ENODEV;
			*slash = '\0';
			continue;
		}
		/* dm / md: follow the first slave */
		if (snprintf(tmp, sizeof(tmp), "%s/slaves", real) >= (int)sizeof(tmp))
			return -ENAMETOOLONG;
		DIR *d = opendir(tmp);
		if (d) {
			struct dirent *de;
			char first[256] = "";
			while ((de = readdir(d)))
				if (de->d_name[0] != '.' &&
				    (!first[0] || strcmp(de->d_name, first) < 0))
					snprintf(first, sizeof(first), "%s", de->d_name);
			closedir(d);
			if (first[0]) {
				snprintf(link, sizeof(link), "%s/class/block/%s", root, first);
				if (!realpath(link, real))
					return -ENODEV;
				continue;
			}
		}
		break;
	}
	const char *base = strrchr(real, '/');
	base = base ? base + 1 : real;
	if (snprintf(name, len, "%s", base) >= (int)len)
		return -ENAMETOOLONG;
	return 0;
}
