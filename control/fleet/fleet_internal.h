/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fleet_internal.h - private pieces of fleet/: the node's fleet state (identity.c reads it,
 * exporter.c's thread writes it) and the SQLite outbox (outbox.c, unit-tested on its own).
 * Only the exporter thread (and tests) use an outbox handle.
 */
#ifndef ING_FLEET_INTERNAL_H
#define ING_FLEET_INTERNAL_H

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/ident.h"
#include "control/fleet/fleet.h"

struct ing_mbox;
struct outbox;
struct outbox_row;
struct pg_conn;

/*
 * The node's fleet state. The exporter thread owns the PostgreSQL connection and the
 * outbox, and sleeps on its mailbox (dataplane/mbox.c): a stop or a change of state kicks
 * it; other threads read the membership snapshot under mu and the counters as atomics.
 */
struct ing_fleet {
	char node_id[ING_FLEET_ID_MAX + 1];
	char advertise[ING_FLEET_ADDR_MAX + 1];
	char *conninfo;
	char catalog[PATH_MAX];
	unsigned heartbeat_ms, batch;
	_Atomic int state;                 /* enum ing_member_state: ACTIVE or DRAINING */
	_Atomic bool stop;                 /* the exporter ends (ing_fleet_stop) */
	struct ing_mbox *mb;               /* the exporter's mailbox; NULL: no exporter */
	/* --- membership snapshot, under mu --- */
	pthread_mutex_t mu;
	struct ing_fleet_member *peers;    /* static (--fleet-peers) */
	unsigned npeers;
	struct ing_fleet_member *pgm;      /* last good read of fleet_members */
	unsigned npgm;
	bool pg_seen;
	/* --- counters, written by the exporter --- */
	_Atomic bool pg_up;
	_Atomic uint64_t lag_rows, exported, errors, heartbeats, batches;
	_Atomic int64_t oldest_ms;
	/* --- exporter thread --- */
	bool thread_started;
	pthread_t thread;
	struct pg_conn *pg;
	struct outbox *ob;
	bool ob_enabled;
	bool prepared;                     /* "fleet_export" (a full batch) on this connection */
	struct outbox_row *rows;
	char *sql;                         /* INSERT for a full batch */
	size_t sql_cap;
};

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
