/* SPDX-License-Identifier: Apache-2.0 */
#include "common/hugepages.h"

#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

static uint64_t read_u64(const char *path)
{
	FILE *f = fopen(path, "re");
	unsigned long long v = 0;
	if (!f)
		return 0;
	if (fscanf(f, "%llu", &v) != 1)
		v = 0;
	fclose(f);
	return v;
}

void ing_hugepages_query(const char *sys, const char *proc, int node, struct ing_hugepages *out)
{
	char path[PATH_MAX], line[128];
	unsigned long long kb = 0;
	FILE *f;

	memset(out, 0, sizeof(*out));
	out->node = -1;
	snprintf(path, sizeof(path), "%s/meminfo", proc ? proc : "/proc");
	f = fopen(path, "re");
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "Hugepagesize: %llu kB", &kb) == 1)
			break;
	if (f)
		fclose(f);
	out->page_size = kb ? (uint64_t)kb << 10 : 2ull << 20;
	kb = out->page_size >> 10;
	sys = sys ? sys : "/sys";

	snprintf(path, sizeof(path), "%s/kernel/mm/hugepages/hugepages-%llukB", sys, kb);
	DIR *d = opendir(path);
	out->supported = d != NULL;
	if (d)
		closedir(d);
	if (node >= 0) {
		snprintf(path, sizeof(path), "%s/devices/system/node/node%d/hugepages/hugepages-%llukB",
			 sys, node, kb);
		d = opendir(path);
		if (d) {
			closedir(d);
			out->node = node;
			snprintf(path, sizeof(path), "%s/devices/system/node/node%d/hugepages/"
				 "hugepages-%llukB/nr_hugepages", sys, node, kb);
			out->nr = read_u64(path);
			snprintf(path, sizeof(path), "%s/devices/system/node/node%d/hugepages/"
				 "hugepages-%llukB/free_hugepages", sys, node, kb);
			out->free = read_u64(path);
			return;
		}
	}
	snprintf(path, sizeof(path), "%s/kernel/mm/hugepages/hugepages-%llukB/nr_hugepages", sys, kb);
	out->nr = read_u64(path);
	snprintf(path, sizeof(path), "%s/kernel/mm/hugepages/hugepages-%llukB/free_hugepages", sys, kb);
	out->free = read_u64(path);
}

uint64_t ing_hugepages_for_pool(const uint64_t *slot_size, const unsigned *count, unsigned n,
				uint64_t page_size)
{
	uint64_t pages = 0;
	if (!page_size)
		return 0;
	for (unsigned i = 0; i < n; i++)
		pages += (slot_size[i] + page_size - 1) / page_size * count[i];
	return pages;
}

void ing_hugepages_advice(char *buf, size_t len, const struct ing_hugepages *h, uint64_t pages)
{
	char node[24] = "", where[32] = "";
	if (h->node >= 0) {
		snprintf(node, sizeof(node), " --node %d", h->node);
		snprintf(where, sizeof(where), " on node %d", h->node);
	}
	snprintf(buf, len,
		 "reserve %llu x %llu MiB hugepages%s: 'ingest-hugepages --pages %llu%s' (root) now; "
		 "'systemctl enable ingest-hugepages' reserves what the pool in ingestd's config needs "
		 "before every start of ingestd.service (docs/OPERATIONS.md, Hugepages)",
		 (unsigned long long)pages, (unsigned long long)(h->page_size >> 20), where,
		 (unsigned long long)pages, node);
}
