/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_catalog - the catalog's input (dataplane/store/catalog.c): batches of rows built from the
 * bytes (frame ids that collide, any length/crc/timestamp, wafer ids and paths of any
 * bytes; keys are (wafer, frame) pairs), inserted in transactions into a fresh catalog file. Oracle: a shadow
 * table. An insert either adds the whole batch or (-EEXIST: an id already there or twice
 * in the batch) nothing; every lookup returns exactly the row inserted; the count agrees.
 */
#include "dataplane/store/store.h"
#include "common/log.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define MAXROWS 64

struct rd {
	const uint8_t *p;
	size_t n;
};

static uint8_t take8(struct rd *r)
{
	if (!r->n)
		return 0;
	r->n--;
	return *r->p++;
}

static uint64_t take(struct rd *r, unsigned bytes)
{
	uint64_t v = 0;
	for (unsigned i = 0; i < bytes; i++)
		v = v << 8 | take8(r);
	return v;
}

static void take_str(struct rd *r, char *dst, size_t cap)
{
	size_t len = take8(r) % (cap < 256 ? cap : 256);   /* < cap: room for the NUL */
	for (size_t i = 0; i < len; i++)
		dst[i] = (char)take8(r);
	dst[len] = 0;
}

static bool same(const struct ing_catalog_row *a, const struct ing_catalog_row *b)
{
	return strcmp(a->frame_id, b->frame_id) == 0 && strcmp(a->wafer_id, b->wafer_id) == 0 &&
	       a->timestamp == b->timestamp && a->length == b->length && a->crc32c == b->crc32c &&
	       strcmp(a->path, b->path) == 0 && a->transport == b->transport &&
	       a->received_ns == b->received_ns && a->durable_ns == b->durable_ns;
}

static struct ing_catalog_row shadow[MAXROWS];
static unsigned nshadow;

static bool same_key(const struct ing_catalog_row *a, const struct ing_catalog_row *b)
{
	return strcmp(a->frame_id, b->frame_id) == 0 && strcmp(a->wafer_id, b->wafer_id) == 0;
}

static bool in_shadow(const struct ing_catalog_row *r)
{
	for (unsigned i = 0; i < nshadow; i++)
		if (same_key(&shadow[i], r))
			return true;
	return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static bool quiet;
	if (!quiet) {
		ing_log_set_level(ING_LOG_ERR);
		quiet = true;
	}
	/* a fresh catalog per input (a crash must replay alone), on tmpfs where there is one:
	 * the catalog syncs its directory and every commit */
	static char path[128];
	if (!path[0]) {
		const char *dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
		snprintf(path, sizeof(path), "%s/ing-fuzz-catalog-%d.db", dir, (int)getpid());
	}
	struct ing_catalog *c = ing_catalog_open(path);
	if (!c)
		abort();
	struct rd r = { data, size };
	nshadow = 0;
	struct ing_catalog_row batch[8];
	while (r.n > 0 && nshadow < MAXROWS - 8) {
		unsigned nb = 1 + take8(&r) % 8;
		memset(batch, 0, sizeof(batch));
		for (unsigned i = 0; i < nb; i++) {
			struct ing_catalog_row *w = &batch[i];
			uint8_t sel = take8(&r);
			/* small ids collide often (the same frame id under two wafers is two
			 * frames); the top bit takes any bytes */
			if (sel & 0x80)
				take_str(&r, w->frame_id, sizeof(w->frame_id));
			else
				snprintf(w->frame_id, sizeof(w->frame_id), "%u", take8(&r) % 16);
			if (sel & 0x40)
				take_str(&r, w->wafer_id, sizeof(w->wafer_id));
			else
				snprintf(w->wafer_id, sizeof(w->wafer_id), "W%u", take8(&r) % 2);
			w->timestamp = (int64_t)take(&r, (sel & 1) ? 8 : 1);
			w->length = take(&r, (sel & 2) ? 8 : 3);
			w->crc32c = (uint32_t)take(&r, (sel & 4) ? 4 : 1);
			take_str(&r, w->path, sizeof(w->path));
			w->transport = take8(&r);
			w->received_ns = (int64_t)take(&r, (sel & 8) ? 8 : 1);
			w->durable_ns = (int64_t)take(&r, (sel & 16) ? 8 : 1);
		}
		bool conflict = false;
		for (unsigned i = 0; i < nb; i++) {
			if (in_shadow(&batch[i]))
				conflict = true;
			for (unsigned j = 0; j < i; j++)
				if (same_key(&batch[j], &batch[i]))
					conflict = true;
		}
		int rc = ing_catalog_insert(c, batch, nb);
		if (rc != (conflict ? -EEXIST : 0))
			abort();
		if (!rc)
			for (unsigned i = 0; i < nb; i++)
				shadow[nshadow++] = batch[i];
		/* a refused batch left nothing behind */
		for (unsigned i = 0; i < nb && rc; i++)
			if (!in_shadow(&batch[i]) &&
			    ing_catalog_lookup(c, batch[i].wafer_id, batch[i].frame_id, NULL) != -ENOENT)
				abort();
	}
	for (unsigned i = 0; i < nshadow; i++) {
		struct ing_catalog_row got;
		if (ing_catalog_lookup(c, shadow[i].wafer_id, shadow[i].frame_id, &got) != 0 ||
		    !same(&got, &shadow[i]))
			abort();
	}
	if (ing_catalog_count(c) != (int64_t)nshadow)
		abort();
	ing_catalog_close(c);
	char side[160];
	unlink(path);
	snprintf(side, sizeof(side), "%s-wal", path);
	unlink(side);
	snprintf(side, sizeof(side), "%s-shm", path);
	unlink(side);
	return 0;
}
