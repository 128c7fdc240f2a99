/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pool.c - the MR pool: frame buffers in size classes, one region per NUMA node that
 * carries a rail.
 *
 * A region holds every size class; each class of a region is ONE mmap'ed mapping bound to
 * the region's node (so a rail registers it with ibv_reg_mr once), carved into equal
 * slots. The free slots are tracked by an rte_mempool per class and region whose objects
 * are the struct ing_frame descriptors, one per slot, bound to their slot once at
 * creation. The mempools have no per-lcore cache, so get/put work from EAL lcores and
 * plain pthreads alike (the backing store is DPDK's lock-free "lf_stack" driver: last freed,
 * first taken, see class_mempool_lifo). Regions share nothing:
 * one more rail's region is more mappings and mempools, never a shared lock.
 */
#include "dataplane/dataplane_internal.h"
#include "common/log.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <rte_errno.h>
#include <rte_memory.h>
#include <rte_mempool.h>

#define COMP "pool"

#ifndef MPOL_BIND
#define MPOL_BIND 2
#endif
#ifndef MPOL_MF_STRICT
#define MPOL_MF_STRICT (1 << 0)
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

struct pool_class {
	uint8_t *base;
	size_t len;
	uint64_t slot_size;
	uint64_t limit;       /* the largest frame it takes: the class's size on 4 KiB pages,
			       * whether or not its slots are hugepage-rounded (so --max-frame and
			       * the class a frame lands in do not depend on the pages) */
	unsigned count;
	bool huge;
	struct rte_mempool *mp;
};

struct pool_region {
	int node;             /* -1: not bound */
	struct pool_class cls[ING_POOL_MAX_CLASSES];
};

struct ing_pool {
	char name[64];
	unsigned nclasses;
	unsigned nregions;    /* regions mapped so far (destroy releases those) */
	unsigned home;
	bool mbind;
	struct pool_region rg[ING_POOL_MAX_REGIONS];
};

static uint64_t default_hugepage_size(void)
{
	FILE *f = fopen("/proc/meminfo", "re");
	char line[128];
	uint64_t kb = 2048;

	if (!f)
		return kb << 10;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long v;
		if (sscanf(line, "Hugepagesize: %llu kB", &v) == 1) {
			kb = v;
			break;
		}
	}
	fclose(f);
	return kb << 10;
}

static int region_bind(void *base, size_t len, int node)
{
	unsigned long mask[16] = { 0 };
	unsigned long bits = sizeof(unsigned long) * 8;

	if (node < 0)
		return 0;
	if ((unsigned long)node >= bits * 16)
		return -EINVAL;
	mask[node / bits] = 1ul << (node % bits);
	if (syscall(SYS_mbind, base, len, MPOL_BIND, mask, bits * 16 + 1, MPOL_MF_STRICT) < 0)
		return -errno;
	return 0;
}

static int region_prefault(uint8_t *base, size_t len, uint64_t page)
{
	if (madvise(base, len, MADV_POPULATE_WRITE) == 0)
		return 0;
	if (errno != EINVAL)   /* EFAULT/ENOMEM: the pages are not there (node full, ...) */
		return -errno;
	for (size_t off = 0; off < len; off += page)
		((volatile uint8_t *)base)[off] = 0;
	return 0;
}

struct slot_init_arg {
	struct ing_pool *p;
	unsigned r, c;
	unsigned first;   /* pool index of the class's first slot */
};

static void slot_init(struct rte_mempool *mp, void *opaque, void *obj, unsigned idx)
{
	struct slot_init_arg *a = opaque;
	struct pool_class *pc = &a->p->rg[a->r].cls[a->c];
	struct ing_frame *f = obj;

	(void)mp;
	memset(f, 0, sizeof(*f));
	f->pool = a->p;
	f->buf = pc->base + (size_t)idx * pc->slot_size;
	f->cap = pc->slot_size;
	f->slot = idx;
	f->index = a->first + idx;
	f->cls = (uint8_t)a->c;
	f->region = (uint8_t)a->r;
}

/*
 * Without reserved hugepages: 4 KiB pages, but 2 MiB-aligned and MADV_HUGEPAGE, so that
 * transparent hugepages back the slots where the kernel has them (THP "madvise" or
 * "always"). The bytes of a fallback frame are written by the kernel's recv copy and read
 * by the crc32c: with 2 MiB pages that costs a TLB miss per 2 MiB, not per 4 KiB
 * (bench/fallback.sh: docs/ARCHITECTURE.md, the fallback's receive path).
 */
static void *map_thp(size_t len)
{
	const size_t align = 2u << 20;
	uint8_t *m = mmap(NULL, len + align, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return MAP_FAILED;
	uint8_t *a = (uint8_t *)(((uintptr_t)m + align - 1) & ~(uintptr_t)(align - 1));
	if (a > m)
		munmap(m, (size_t)(a - m));
	if (a + len < m + len + align)
		munmap(a + len, (size_t)(m + len + align - (a + len)));
	(void)madvise(a, len, MADV_HUGEPAGE);   /* EINVAL: no THP in this kernel, still fine */
	return a;
}

static int class_map(struct ing_pool *p, unsigned r, unsigned c, const struct ing_pool_opts *o,
		     uint64_t hpsz)
{
	struct pool_class *pc = &p->rg[r].cls[c];
	int node = p->mbind ? p->rg[r].node : -1;
	uint64_t want = o->cls[c].slot_size;
	void *m = MAP_FAILED;
	int rc;

	pc->count = o->cls[c].count;
	pc->limit = round_up_u64(want, ING_PAGE_4K);
	if (o->hugepages != 0) {
		pc->slot_size = round_up_u64(want, hpsz);
		pc->len = (size_t)(pc->slot_size * pc->count);
		m = mmap(NULL, pc->len, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
		if (m == MAP_FAILED) {
			rc = -errno;
			if (o->hugepages > 0) {
				ING_ERR(COMP, "%s region %u class %u: %zu bytes of hugepages (%" PRIu64
					" KiB pages) unavailable: %s", p->name, r, c, pc->len, hpsz >> 10,
					strerror(-rc));
				return rc;
			}
			/* auto: the caller says it once for the pool (ing_pool_on_hugepages) */
			ING_INFO(COMP, "%s region %u class %u: no hugepages for %zu bytes (%s), using 4 KiB pages",
				 p->name, r, c, pc->len, strerror(-rc));
		} else {
			pc->huge = true;
		}
	}
	if (m == MAP_FAILED) {
		pc->slot_size = round_up_u64(want, ING_PAGE_4K);
		pc->len = (size_t)(pc->slot_size * pc->count);
		m = map_thp(pc->len);
		if (m == MAP_FAILED) {
			rc = -errno;
			ING_ERR(COMP, "%s region %u class %u: mmap %zu bytes: %s", p->name, r, c, pc->len,
				strerror(-rc));
			return rc;
		}
	}
	pc->base = m;
	/* the slots must not be COW-shared with a child: ibverbs pins them */
	if (madvise(m, pc->len, MADV_DONTFORK) < 0)
		ING_WARN(COMP, "%s region %u class %u: MADV_DONTFORK: %s", p->name, r, c, strerror(errno));
	rc = region_bind(m, pc->len, node);
	if (rc < 0) {
		ING_ERR(COMP, "%s region %u class %u: mbind to node %d: %s", p->name, r, c, node,
			strerror(-rc));
		return rc;
	}
	if (o->prefault) {
		rc = region_prefault(m, pc->len, pc->huge ? hpsz : ING_PAGE_4K);
		if (rc < 0) {
			char on[32] = "";
			if (node >= 0)
				snprintf(on, sizeof(on), " on node %d", node);
			ING_ERR(COMP, "%s region %u class %u: prefault %zu bytes%s: %s", p->name, r, c,
				pc->len, on, strerror(-rc));
			return rc;
		}
	}
	return 0;
}

/*
 * The free slots are a stack (DPDK's lock-free "lf_stack" mempool driver): the slot freed last is taken
 * next, so a stream of frames that come and go one after another keeps landing in the same
 * few slots, whose lines are still in the cache, instead of cycling through the whole class
 * (the kernel's recv copy writes every byte of a fallback frame: into a cold slot each
 * write first fetches the line from memory). The objects are the descriptors, bound to
 * their slots once here (slot_init), as with rte_mempool_create.
 */
static struct rte_mempool *class_mempool_lifo(const char *name, unsigned count, int socket,
					      struct slot_init_arg *arg)
{
	/* "lf_stack": lock-free (a 128-bit compare-and-swap), as the ring it replaced; "stack"
	 * (a spinlock) only where the CPU has no such CAS (DPDK then refuses lf_stack) */
	static const char *const drivers[] = { "lf_stack", "stack" };

	for (unsigned k = 0; k < sizeof(drivers) / sizeof(drivers[0]); k++) {
		struct rte_mempool *mp = rte_mempool_create_empty(name, count, sizeof(struct ing_frame),
								  0, 0, socket, 0);
		if (!mp)
			return NULL;
		if (rte_mempool_set_ops_byname(mp, drivers[k], NULL) == 0 &&
		    rte_mempool_populate_default(mp) >= 0) {
			rte_mempool_obj_iter(mp, slot_init, arg);
			return mp;
		}
		rte_mempool_free(mp);
	}
	return NULL;
}

static int class_mempool(struct ing_pool *p, unsigned r, unsigned c)
{
	struct pool_class *pc = &p->rg[r].cls[c];
	struct slot_init_arg arg = { .p = p, .r = r, .c = c };
	int node = p->mbind ? p->rg[r].node : -1;

	for (unsigned q = 0; q <= r; q++)
		for (unsigned k = 0; k < (q < r ? p->nclasses : c); k++)
			arg.first += p->rg[q].cls[k].count;
	char mpname[RTE_MEMPOOL_NAMESIZE];

	dp_unique_name(mpname, sizeof(mpname), "ingp");
	pc->mp = class_mempool_lifo(mpname, pc->count, node >= 0 ? node : SOCKET_ID_ANY, &arg);
	if (!pc->mp && node >= 0)   /* --no-huge EAL heaps live on socket 0 / any only */
		pc->mp = class_mempool_lifo(mpname, pc->count, SOCKET_ID_ANY, &arg);
	if (!pc->mp) {
		ING_ERR(COMP, "%s region %u class %u: rte_mempool_create(%u descriptors): %s (EAL started?)",
			p->name, r, c, pc->count, rte_strerror(rte_errno));
		return rte_errno ? -rte_errno : -ENOMEM;
	}
	return 0;
}

struct ing_pool *ing_pool_create(const struct ing_pool_opts *o)
{
	struct ing_pool *p;
	uint64_t hpsz = default_hugepage_size();

	if (!o || !o->nclasses || o->nclasses > ING_POOL_MAX_CLASSES) {
		ING_ERR(COMP, "pool needs 1..%d classes", ING_POOL_MAX_CLASSES);
		return NULL;
	}
	if (o->nregions > ING_POOL_MAX_REGIONS || (o->nregions && o->home_region >= o->nregions)) {
		ING_ERR(COMP, "pool %s: %u regions (at most %d), home %u", o->name ? o->name : "?",
			o->nregions, ING_POOL_MAX_REGIONS, o->home_region);
		return NULL;
	}
	for (unsigned c = 0; c < o->nclasses; c++) {
		if (!o->cls[c].slot_size || !o->cls[c].count || o->cls[c].slot_size > (1ull << 40) ||
		    (c && o->cls[c].slot_size <= o->cls[c - 1].slot_size)) {
			ING_ERR(COMP, "pool %s: class %u invalid (sizes ascending, counts > 0)",
				o->name ? o->name : "?", c);
			return NULL;
		}
	}
	p = calloc(1, sizeof(*p));
	if (!p) {
		ING_ERR(COMP, "out of memory");
		return NULL;
	}
	snprintf(p->name, sizeof(p->name), "%s", o->name ? o->name : "frames");
	p->nclasses = o->nclasses;
	p->mbind = o->mbind;
	p->home = o->nregions ? o->home_region : 0;
	unsigned nr = o->nregions ? o->nregions : 1;
	for (unsigned r = 0; r < nr; r++) {
		p->rg[r].node = o->nregions ? o->region_node[r] : o->numa_node;
		p->nregions = r + 1;   /* destroy releases what exists so far */
		for (unsigned c = 0; c < o->nclasses; c++) {
			if (class_map(p, r, c, o, hpsz) < 0 || class_mempool(p, r, c) < 0) {
				ing_pool_destroy(p);
				return NULL;
			}
			const struct pool_class *pc = &p->rg[r].cls[c];
			ING_INFO(COMP, "%s region %u class %u: %u x %" PRIu64 " KiB at %p (%zu bytes) on %s "
				 "pages, node %d%s%s", p->name, r, c, pc->count, pc->slot_size >> 10,
				 (void *)pc->base, pc->len, pc->huge ? "huge" : "4 KiB", p->rg[r].node,
				 p->mbind || p->rg[r].node < 0 ? "" : " (label only: not bound)",
				 o->prefault ? ", prefaulted" : "");
		}
	}
	return p;
}

void ing_pool_destroy(struct ing_pool *p)
{
	if (!p)
		return;
	for (unsigned r = 0; r < p->nregions; r++)
		for (unsigned c = 0; c < p->nclasses; c++) {
			struct pool_class *pc = &p->rg[r].cls[c];
			if (pc->mp) {
				unsigned avail = rte_mempool_avail_count(pc->mp);
				if (avail != pc->count)
					ING_WARN(COMP, "%s region %u class %u destroyed with %u of %u slots "
						 "still taken", p->name, r, c, pc->count - avail, pc->count);
				rte_mempool_free(pc->mp);
			}
			if (pc->base)
				munmap(pc->base, pc->len);
		}
	free(p);
}

/*
 * A descriptor changes threads through the mempool (its ring driver is in DPDK's static
 * archive, not instrumented): tell ThreadSanitizer that put releases and get acquires it.
 */
#if defined(__SANITIZE_THREAD__)
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
#define POOL_ACQUIRED(f) __tsan_acquire(f)
#define POOL_RELEASED(f) __tsan_release(f)
#else
#define POOL_ACQUIRED(f) ((void)(f))
#define POOL_RELEASED(f) ((void)(f))
#endif

struct ing_frame *ing_pool_get(struct ing_pool *p, uint64_t len)
{
	return ing_pool_get_in(p, -1, len, ING_POOL_MAX_CLASSES);
}

struct ing_frame *ing_pool_get_below(struct ing_pool *p, uint64_t len, unsigned cls_end)
{
	return ing_pool_get_in(p, -1, len, cls_end);
}

static struct ing_frame *region_get(struct ing_pool *p, unsigned r, uint64_t len, unsigned cls_end)
{
	void *obj;

	for (unsigned c = 0; c < p->nclasses && c < cls_end; c++) {
		struct pool_class *pc = &p->rg[r].cls[c];
		if (pc->limit < len)
			continue;
		if (rte_mempool_get(pc->mp, &obj) == 0) {
			struct ing_frame *f = obj;
			POOL_ACQUIRED(f);
			memset(f, 0, offsetof(struct ing_frame, pool));
			return f;
		}
	}
	return NULL;
}

struct ing_frame *ing_pool_get_in(struct ing_pool *p, int region, uint64_t len, unsigned cls_end)
{
	struct ing_frame *f;

	if (!p)
		return NULL;
	if (region >= 0)
		return (unsigned)region < p->nregions ? region_get(p, (unsigned)region, len, cls_end) : NULL;
	if ((f = region_get(p, p->home, len, cls_end)))
		return f;
	for (unsigned r = 0; r < p->nregions; r++)
		if (r != p->home && (f = region_get(p, r, len, cls_end)))
			return f;
	return NULL;
}

void ing_pool_put(struct ing_frame *f)
{
	if (!f || !f->pool)
		return;
	POOL_RELEASED(f);
	rte_mempool_put(f->pool->rg[f->region].cls[f->cls].mp, f);
}

uint64_t ing_pool_max_len(const struct ing_pool *p)
{
	return p && p->nclasses ? p->rg[0].cls[p->nclasses - 1].limit : 0;
}

unsigned ing_pool_total(const struct ing_pool *p)
{
	unsigned n = 0;

	for (unsigned r = 0; p && r < p->nregions; r++)
		for (unsigned c = 0; c < p->nclasses; c++)
			n += p->rg[r].cls[c].count;
	return n;
}

unsigned ing_pool_free(const struct ing_pool *p)
{
	unsigned n = 0;

	for (unsigned r = 0; p && r < p->nregions; r++)
		for (unsigned c = 0; c < p->nclasses; c++)
			if (p->rg[r].cls[c].mp)
				n += rte_mempool_avail_count(p->rg[r].cls[c].mp);
	return n;
}

const char *ing_pool_driver(const struct ing_pool *p)
{
	if (!p || !p->nregions || !p->nclasses || !p->rg[0].cls[0].mp)
		return "";
	return rte_mempool_get_ops(p->rg[0].cls[0].mp->ops_index)->name;
}

/* true only when every class mapping of every region sits on hugepages */
bool ing_pool_on_hugepages(const struct ing_pool *p)
{
	if (!p || !p->nclasses || !p->nregions)
		return false;
	for (unsigned r = 0; r < p->nregions; r++)
		for (unsigned c = 0; c < p->nclasses; c++)
			if (!p->rg[r].cls[c].huge)
				return false;
	return true;
}

unsigned ing_pool_nregions(const struct ing_pool *p)
{
	return p ? p->nregions : 0;
}

unsigned ing_pool_home_region(const struct ing_pool *p)
{
	return p ? p->home : 0;
}

int ing_pool_region_node(const struct ing_pool *p, unsigned r)
{
	return p && r < p->nregions ? p->rg[r].node : -1;
}

int ing_pool_region_of_node(const struct ing_pool *p, int node)
{
	for (unsigned r = 0; p && r < p->nregions; r++)
		if (p->rg[r].node == node)
			return (int)r;
	return -1;
}

int ing_pool_region(const struct ing_pool *p, unsigned r, unsigned c, void **base, size_t *len)
{
	if (!p || r >= p->nregions || c >= p->nclasses || !p->rg[r].cls[c].base)
		return -ENOENT;
	if (base)
		*base = p->rg[r].cls[c].base;
	if (len)
		*len = p->rg[r].cls[c].len;
	return 0;
}

unsigned ing_pool_nclasses(const struct ing_pool *p)
{
	return p ? p->nclasses : 0;
}

int ing_pool_class_stats(const struct ing_pool *p, unsigned c, uint64_t *slot_size,
			 unsigned *total, unsigned *free_slots)
{
	if (!p || c >= p->nclasses || !p->nregions)
		return -ENOENT;
	*slot_size = p->rg[0].cls[c].limit;
	*total = *free_slots = 0;
	for (unsigned r = 0; r < p->nregions; r++) {
		*total += p->rg[r].cls[c].count;
		*free_slots += p->rg[r].cls[c].mp ? rte_mempool_avail_count(p->rg[r].cls[c].mp) : 0;
	}
	return 0;
}

int ing_pool_region_stats(const struct ing_pool *p, unsigned r, unsigned *total,
			  unsigned *free_slots)
{
	if (!p || r >= p->nregions)
		return -ENOENT;
	*total = *free_slots = 0;
	for (unsigned c = 0; c < p->nclasses; c++) {
		*total += p->rg[r].cls[c].count;
		*free_slots += p->rg[r].cls[c].mp ? rte_mempool_avail_count(p->rg[r].cls[c].mp) : 0;
	}
	return 0;
}
