/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fleet.h - the ingest node as a member of a fleet: its identity (node id, advertised
 * address, ACTIVE/DRAINING), the membership it answers with (rpc Members), and the export
 * of its catalog rows to the fleet catalog in PostgreSQL.
 *
 * Durability stays local: a frame is DURABLE when its file and its SQLite catalog row are.
 * The catalog commit also writes the row into a local outbox table (an SQLite trigger, same
 * transaction, so a crash loses no row); one exporter thread moves outbox rows to
 * PostgreSQL in batches (INSERT ... ON CONFLICT DO NOTHING: re-exporting is harmless) and
 * deletes them after PostgreSQL's COMMIT. It also heartbeats the node into fleet_members
 * and reads the membership back. Ingest never waits for PostgreSQL: an outage only grows
 * the outbox (the export lag), and it drains when PostgreSQL is back.
 *
 * Threads: ing_fleet_start/stop from main; the getters from any thread (the control
 * thread answers Members/Stats/metrics from them). All PostgreSQL and outbox I/O happens on
 * the exporter thread. The membership snapshot and counters are read under one mutex or
 * with atomics: a read of a few hundred bytes for a unary RPC, not a message stream, so
 * no ring is needed here.
 */
#ifndef ING_FLEET_FLEET_H
#define ING_FLEET_FLEET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ING_FLEET_ID_MAX 128            /* bytes of a node id */
#define ING_FLEET_ADDR_MAX 256          /* bytes of host:port */
#define ING_FLEET_MAX_MEMBERS 256
#define ING_DEFAULT_FLEET_HEARTBEAT_MS 1000u
#define ING_DEFAULT_FLEET_BATCH 500u    /* outbox rows per PostgreSQL transaction */
#define ING_FLEET_DOWN_PERIODS 3        /* heartbeat older than this many periods: DOWN */

/* The values of h3000.MemberState. */
enum ing_member_state {
	ING_MEMBER_UNSPECIFIED = 0,
	ING_MEMBER_ACTIVE = 1,
	ING_MEMBER_DRAINING = 2,
	ING_MEMBER_DOWN = 3,
};

struct ing_fleet_member {
	char node_id[ING_FLEET_ID_MAX + 1];
	char address[ING_FLEET_ADDR_MAX + 1];
	enum ing_member_state state;
	int64_t heartbeat_ms;   /* Unix ms of the last heartbeat; 0 for static peers */
};

struct ing_fleet_opts {
	const char *node_id;      /* required: this node's id (1..ING_FLEET_ID_MAX bytes) */
	const char *advertise;    /* required: host:port producers dial */
	const char *conninfo;     /* libpq connection string; NULL: no fleet catalog */
	const char *peers;        /* "id=host:port,..." static membership; NULL: none */
	const char *catalog;      /* the node's catalog.db (outbox); NULL: nothing to export */
	unsigned heartbeat_ms;    /* ING_DEFAULT_FLEET_HEARTBEAT_MS */
	unsigned batch;           /* ING_DEFAULT_FLEET_BATCH */
	bool draining;            /* start DRAINING */
};
void ing_fleet_opts_init(struct ing_fleet_opts *o);

/*
 * Check a --fleet-peers list ("id=host:port,..."; ids and addresses non-empty, no
 * duplicates, at most ING_FLEET_MAX_MEMBERS). 0, or -EINVAL with the reason in why.
 */
int ing_fleet_parse_peers(const char *s, struct ing_fleet_member *out, unsigned max, unsigned *n,
			  char *why, size_t whylen);

struct ing_fleet;

/*
 * Create the node's fleet state and, with a conninfo, start the exporter thread. It
 * starts even when PostgreSQL is down (it connects later, with back-off). NULL + log on
 * a bad option or when the thread cannot start.
 */
struct ing_fleet *ing_fleet_start(const struct ing_fleet_opts *o);
/* Stop the exporter (it finishes the PostgreSQL call it is in) and free. NULL ok. */
void ing_fleet_stop(struct ing_fleet *f);

const char *ing_fleet_node_id(const struct ing_fleet *f);
/* ACTIVE or DRAINING. Any thread; the exporter writes a change at its next heartbeat. */
enum ing_member_state ing_fleet_state(const struct ing_fleet *f);
void ing_fleet_set_draining(struct ing_fleet *f, bool draining);

struct ing_fleet_stats {
	bool enabled;            /* a fleet catalog is configured */
	bool pg_up;              /* the last PostgreSQL round trip succeeded */
	uint64_t lag_rows;       /* outbox rows not yet in PostgreSQL */
	double lag_seconds;      /* age of the oldest of them (0: none) */
	uint64_t exported;       /* rows exported since start */
	uint64_t errors;         /* failed connects and transactions since start */
	uint64_t heartbeats;     /* heartbeats written since start */
	uint64_t batches;        /* export transactions committed since start */
};
void ing_fleet_get_stats(struct ing_fleet *f, struct ing_fleet_stats *st);

/*
 * The membership this node answers with: from PostgreSQL (its last good read; a member
 * whose heartbeat is older than ING_FLEET_DOWN_PERIODS periods is DOWN) when there is a
 * fleet catalog and it was read at least once, else the static peers. This node is
 * always in it, with its current state. Copies up to max members into out, sorted by
 * node id; returns how many there are (may exceed max). epoch changes when the set or a
 * state changes; source is "postgresql" or "static" (static string).
 */
unsigned ing_fleet_members(struct ing_fleet *f, struct ing_fleet_member *out, unsigned max,
			   uint64_t *epoch, const char **source);

/* ---------------------------------------------------------------- ingest-verify --fleet */

struct ing_fleet_verify_node {
	const char *node_id;
	const char *data_dir;
};

struct ing_fleet_verify_result {
	uint64_t frames;        /* frames in the manifest */
	uint64_t ok;            /* in PostgreSQL on >= 1 node, every copy intact */
	uint64_t missing;       /* in no node's row in PostgreSQL */
	uint64_t bad;           /* a copy missing from its node's catalog or file, or corrupt */
	uint64_t copies;        /* copies checked */
	uint64_t duplicates;    /* frames stored on more than one node (same CRC: allowed) */
	uint64_t unknown_node;  /* copies on a node with no --data-dir given (not checked) */
};

/*
 * Check every frame of an ingest-send manifest against the fleet catalog at conninfo and
 * each node's data dir: the frame has a row in fleet_frames on at least one node; every
 * row's node has the frame in its catalog.db with the same CRC and length, and its file
 * has exactly those bytes (CRC recomputed). Problems go to stderr (at most max_errors
 * lines). 0 when the check ran (see res), -errno on a setup error (logged).
 */
int ing_fleet_verify(const char *conninfo, const char *manifest,
		     const struct ing_fleet_verify_node *nodes, unsigned n_nodes,
		     unsigned max_errors, struct ing_fleet_verify_result *res);

#endif
