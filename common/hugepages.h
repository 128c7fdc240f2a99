/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hugepages.h - how many hugepages the MR pool needs and how many a NUMA node has free,
 * and the one sentence that tells an operator how to reserve them. ingestd (its
 * --hugepages auto decision and warning) and ingest-doctor (its memory.hugepages check)
 * use the same counts and the same words, which name deploy/'s persistent set-up
 * (ingest-hugepages and its systemd unit). No DPDK; any thread.
 */
#ifndef ING_COMMON_HUGEPAGES_H
#define ING_COMMON_HUGEPAGES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ing_hugepages {
	bool supported;       /* the kernel has hugetlb (a hugepages-<size>kB directory) */
	uint64_t page_size;   /* the default hugepage size (meminfo Hugepagesize), bytes */
	int node;             /* the NUMA node counted; -1: the whole system */
	uint64_t nr;          /* pages of page_size reserved there (nr_hugepages) */
	uint64_t free;        /* of those, free now (free_hugepages) */
};

/*
 * Count the default-size hugepages on NUMA node (or system-wide with node -1, or when the
 * kernel has no per-node counts) below the roots sys ("/sys") and proc ("/proc"). A
 * missing file reads as 0; out->supported says whether hugetlb exists at all.
 */
void ing_hugepages_query(const char *sys, const char *proc, int node, struct ing_hugepages *out);

/* Pages of page_size a pool of n classes needs: each slot rounded up to the page, times
 * its count (what dataplane/pool.c maps). */
uint64_t ing_hugepages_for_pool(const uint64_t *slot_size, const unsigned *count, unsigned n,
				uint64_t page_size);

/*
 * The fix, one line: how to reserve pages (of h->page_size on h->node) for the pool now
 * and at every boot. Shared by ingestd's warning and ingest-doctor's fix text.
 */
void ing_hugepages_advice(char *buf, size_t len, const struct ing_hugepages *h, uint64_t pages);

#endif
