/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pool_spec.c - the MR pool's options (ing_pool_opts_init) and its size classes as
 * ingestd --pool, its config file and ingest-doctor --config spell them. No DPDK here:
 * programs that only check a spec (the doctor, ingestd's option table) link this object
 * without the pool.
 */
#include "common/log.h"
#include "common/parse.h"
#include "dataplane/dataplane.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#define COMP "pool"
#define SLOT_MAX (1ull << 40)   /* a slot is 1 byte .. 1 TiB */
#define COUNT_MAX 1000000u

void ing_pool_opts_init(struct ing_pool_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->name = "frames";
	o->hugepages = -1;
	o->numa_node = -1;
	o->mbind = true;
	o->prefault = true;
}

/* "16": a count 1..COUNT_MAX over [s, end) */
static int parse_count(const char *s, const char *end, unsigned *out)
{
	uint64_t v = 0;

	if (s == end)
		return -EINVAL;
	for (const char *p = s; p < end; p++) {
		if (*p < '0' || *p > '9')
			return -EINVAL;
		v = v * 10 + (uint64_t)(*p - '0');
		if (v > COUNT_MAX)
			return -ERANGE;
	}
	if (!v)
		return -ERANGE;
	*out = (unsigned)v;
	return 0;
}

int ing_pool_spec_parse(struct ing_pool_opts *o, const char *spec, char *why, size_t whylen)
{
	struct ing_pool_class cls[ING_POOL_MAX_CLASSES];
	unsigned n = 0;
	const char *p = spec;

	if (!spec || !*spec) {
		snprintf(why, whylen, "empty: give size classes SIZE:COUNT,... (e.g. 4M:16,16M:8)");
		return -EINVAL;
	}
	for (;;) {
		const char *comma = strchr(p, ',');
		const char *end = comma ? comma : p + strlen(p);
		const char *colon = memchr(p, ':', (size_t)(end - p));
		int len = (int)(end - p) > 64 ? 64 : (int)(end - p);
		uint64_t size;

		if (n == ING_POOL_MAX_CLASSES) {
			snprintf(why, whylen, "more than %d size classes", ING_POOL_MAX_CLASSES);
			return -EINVAL;
		}
		if (p == end) {
			snprintf(why, whylen, "class %u is empty (a stray ',')", n + 1);
			return -EINVAL;
		}
		if (!colon) {
			snprintf(why, whylen, "class '%.*s' is not SIZE:COUNT (e.g. 4M:16)", len, p);
			return -EINVAL;
		}
		if (ing_parse_size_n(p, (size_t)(colon - p), &size) || !size || size > SLOT_MAX) {
			snprintf(why, whylen, "class '%.*s': the size must be 1 byte .. 1T (4096, 512K, 4M, 1G)",
				 len, p);
			return -EINVAL;
		}
		if (parse_count(colon + 1, end, &cls[n].count)) {
			snprintf(why, whylen, "class '%.*s': the count must be 1..%u", len, p, COUNT_MAX);
			return -EINVAL;
		}
		if (n && size <= cls[n - 1].slot_size) {
			snprintf(why, whylen, "class '%.*s': sizes must ascend (each class larger than the "
				 "one before)", len, p);
			return -EINVAL;
		}
		cls[n++].slot_size = size;
		if (!comma)
			break;
		p = comma + 1;
	}
	memcpy(o->cls, cls, sizeof(cls[0]) * n);
	o->nclasses = n;
	return 0;
}

int ing_pool_parse_classes(struct ing_pool_opts *o, const char *spec)
{
	char why[160];
	if (!o) {
		ING_ERR(COMP, "pool spec: no options");
		return -EINVAL;
	}
	if (ing_pool_spec_parse(o, spec, why, sizeof(why))) {
		ING_ERR(COMP, "pool spec '%s': %s", spec ? spec : "", why);
		return -EINVAL;
	}
	return 0;
}

uint64_t ing_pool_spec_bytes(const struct ing_pool_opts *o)
{
	uint64_t total = 0;
	for (unsigned i = 0; i < o->nclasses; i++)
		total += ((o->cls[i].slot_size + 4095) & ~4095ull) * o->cls[i].count;
	return total;
}
