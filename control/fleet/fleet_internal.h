/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fleet_internal.h - private pieces of fleet/: the SQLite outbox (outbox.c), unit-tested
 * on its own. Only the exporter thread (and tests) use an outbox handle.
 */
#ifndef ING_FLEET_INTERNAL_H
#define ING_FLEET_INTERNAL_H

#include <limits.h>
#include <stdint.h>

#include "common/ident.h"

/* One catalog row on its way to PostgreSQL. */
struct outbox_row {
	int64_t seq;                       /* outbox order */
	char wafer_id[ING_ID_MAX + 1];
	char frame_id[ING_ID_MAX + 1];
	uint32_t crc32c;
	uint64_t length;
	int64_t timestamp;                 /* the producer's, as stored */
	int64_t queued_ms;                 /* Unix ms of the catalog commit */
	char path[PATH_MAX];               /* relative to the data dir, as in the catalog */
};

struct outbox;

/*
 * Open the node's catalog.db for the outbox (its own SQLite connection, WAL, busy
 * timeout). The catalog may not exist yet: outbox_enable then fails -ENOENT and the
 * exporter tries again. NULL + log on error.
 */
struct outbox *outbox_open(const char *catalog_path);
void outbox_close(struct outbox *o);
/*
 * Create the outbox table and the trigger that copies every new catalog row into it, in
 * one transaction. When the trigger did not exist (first start with a fleet catalog, or
 * one after a run without it), every catalog row is queued too: PostgreSQL ignores rows
 * it already has, so nothing is lost and nothing is stored twice. 0, -ENOENT (no frames
 * table yet), or -EIO/-EBUSY.
 */
int outbox_enable(struct outbox *o);
/* Drop the trigger (a run without a fleet catalog): the outbox stops growing. 0 or -errno. */
int outbox_disable(struct outbox *o);
/* The oldest rows, up to max: how many (0: empty), or -errno. */
int outbox_read(struct outbox *o, struct outbox_row *rows, unsigned max);
/* Forget rows up to and including seq (after PostgreSQL committed them). 0 or -errno. */
int outbox_delete_upto(struct outbox *o, int64_t seq);
/* Rows queued, and the queued_ms of the oldest (0 when none). 0 or -errno. */
int outbox_lag(struct outbox *o, uint64_t *rows, int64_t *oldest_ms);

#endif
