/* SPDX-License-Identifier: Apache-2.0 */
/*
 * exporter.c - the fleet exporter thread (fleet.h): the node's catalog rows to the fleet
 * catalog in PostgreSQL, its heartbeat, the membership read back. The node's identity and
 * the membership it answers with are identity.c's.
 *
 * The exporter thread owns the PostgreSQL connection and the outbox handle, and receives
 * through one mailbox (dataplane/mbox.c), as every thread of the node: it sleeps on it
 * between rounds, woken by ing_fleet_stop and by a change of state (ing_fleet_set_draining:
 * heartbeat now). Its loop:
 * connect (back-off 250 ms doubling to 5 s while PostgreSQL is away), create the schema
 * if absent (under an advisory lock, so nodes starting together do not race), heartbeat
 * and read the membership every heartbeat period, and export the outbox in batches:
 * one multi-row INSERT ... ON CONFLICT DO NOTHING per batch, then delete those rows from
 * the outbox. A full batch is followed at once by the next; otherwise it waits 100 ms
 * (or until stopped). No libpq call is made on any other thread.
 */
#include "control/fleet/fleet.h"
#include "control/fleet/fleet_internal.h"
#include "common/clock.h"
#include "common/log.h"
#include "dataplane/dataplane.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <libpq-fe.h>

#define COMP "fleet"
#define BACKOFF_MIN_MS 250u
#define BACKOFF_MAX_MS 5000u
#define IDLE_WAIT_MS 100u
#define LAG_EVERY_MS 200u
/* pg_advisory_xact_lock key for schema creation ("h3k" fleet schema) */
#define SCHEMA_LOCK_KEY 0x68336b666c656574LL

static const char pg_schema[] =
	"CREATE TABLE IF NOT EXISTS fleet_frames ("
	" wafer_id text NOT NULL,"
	" frame_id text NOT NULL,"
	" node_id text NOT NULL,"
	" crc32c bigint NOT NULL,"
	" length bigint NOT NULL,"
	" \"timestamp\" bigint,"
	" stored_at timestamptz NOT NULL,"
	" file_name text NOT NULL,"
	" exported_at timestamptz NOT NULL DEFAULT now(),"
	" PRIMARY KEY (wafer_id, frame_id, node_id));"
	"CREATE INDEX IF NOT EXISTS fleet_frames_node ON fleet_frames (node_id);"
	"CREATE TABLE IF NOT EXISTS fleet_members ("
	" node_id text PRIMARY KEY,"
	" address text NOT NULL,"
	" state text NOT NULL CHECK (state IN ('active', 'draining')),"
	" heartbeat timestamptz NOT NULL,"
	" started_at timestamptz NOT NULL DEFAULT now());";

/* ---------------------------------------------------------------- PostgreSQL */

/* libpq's message on one line: it ends in '\n' and may hold more lines (DETAIL, HINT) */
static const char *one_line(const char *m, char *buf, size_t n)
{
	size_t k = 0;
	for (; *m && k + 1 < n; m++)
		buf[k++] = *m == '\n' || *m == '\t' ? ' ' : *m;
	while (k && buf[k - 1] == ' ')
		k--;
	buf[k] = 0;
	return buf;
}

static void pg_drop(struct ing_fleet *f, const char *what)
{
	if (f->pg) {
		char b[512];
		ING_LOG_RL(ING_LOG_WARN, COMP, "fleet catalog: %s: %s; reconnecting", what,
			   one_line(PQerrorMessage(f->pg), b, sizeof(b)));
		PQfinish(f->pg);
		f->pg = NULL;
	}
	atomic_fetch_add(&f->errors, 1);
	atomic_store(&f->pg_up, false);
}

static bool pg_ok(PGresult *r)
{
	ExecStatusType s = PQresultStatus(r);
	return s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK;
}

/* One statement; false (result freed, connection dropped) on failure. */
static bool pg_exec(struct ing_fleet *f, const char *what, const char *sql, int n,
		    const char *const *vals)
{
	PGresult *r = n ? PQexecParams(f->pg, sql, n, NULL, vals, NULL, NULL, 0) : PQexec(f->pg, sql);
	bool ok = pg_ok(r);
	if (!ok) {
		char b[512];
		ING_LOG_RL(ING_LOG_WARN, COMP, "fleet catalog: %s: %s", what,
			   one_line(r ? PQresultErrorMessage(r) : PQerrorMessage(f->pg), b, sizeof(b)));
		PQclear(r);
		pg_drop(f, what);
		return false;
	}
	PQclear(r);
	return true;
}

static bool pg_connect(struct ing_fleet *f)
{
	/* defaults first: a key in the caller's conninfo (expanded from dbname) wins */
	static const char *const keys[] = { "connect_timeout", "application_name", "keepalives_idle",
					    "keepalives_interval", "keepalives_count",
					    "tcp_user_timeout", "dbname", NULL };
	const char *vals[] = { "3", "ingestd", "5", "2", "3", "10000", f->conninfo, NULL };
	PGconn *c = PQconnectdbParams(keys, vals, 1);
	if (!c || PQstatus(c) != CONNECTION_OK) {
		char b[512];
		ING_LOG_RL(ING_LOG_WARN, COMP, "fleet catalog: cannot connect: %s",
			   c ? one_line(PQerrorMessage(c), b, sizeof(b)) : "out of memory");
		PQfinish(c);
		atomic_fetch_add(&f->errors, 1);
		atomic_store(&f->pg_up, false);
		return false;
	}
	f->pg = c;
	f->prepared = false;
	char lock[96];
	snprintf(lock, sizeof(lock), "SELECT pg_advisory_xact_lock(%lld)", (long long)SCHEMA_LOCK_KEY);
	if (!pg_exec(f, "SET", "SET statement_timeout = 30000; SET client_min_messages = warning", 0, NULL) ||
	    !pg_exec(f, "BEGIN", "BEGIN", 0, NULL) || !pg_exec(f, "schema lock", lock, 0, NULL) ||
	    !pg_exec(f, "schema", pg_schema, 0, NULL) || !pg_exec(f, "COMMIT", "COMMIT", 0, NULL))
		return false;
	atomic_store(&f->pg_up, true);
	ING_INFO(COMP, "fleet catalog: connected to %s:%s/%s as node %s", PQhost(c), PQport(c), PQdb(c),
		 f->node_id);
	return true;
}

static bool pg_heartbeat(struct ing_fleet *f)
{
	const char *state = ing_fleet_state(f) == ING_MEMBER_DRAINING ? "draining" : "active";
	const char *hv[] = { f->node_id, f->advertise, state };
	if (!pg_exec(f, "heartbeat",
		     "INSERT INTO fleet_members (node_id, address, state, heartbeat, started_at)"
		     " VALUES ($1, $2, $3, now(), now()) ON CONFLICT (node_id) DO UPDATE SET"
		     " address = EXCLUDED.address, state = EXCLUDED.state, heartbeat = now()",
		     3, hv))
		return false;
	atomic_fetch_add(&f->heartbeats, 1);

	char secs[32];
	snprintf(secs, sizeof(secs), "%.3f", ING_FLEET_DOWN_PERIODS * f->heartbeat_ms / 1000.0);
	const char *mv[] = { secs };
	PGresult *r = PQexecParams(f->pg,
				   "SELECT node_id, address, state,"
				   " (extract(epoch FROM heartbeat) * 1000)::bigint,"
				   " now() - heartbeat > make_interval(secs => $1::float8)"
				   " FROM fleet_members ORDER BY node_id COLLATE \"C\" LIMIT 256",
				   1, NULL, mv, NULL, NULL, 0);
	if (!pg_ok(r)) {
		char b[512];
		ING_LOG_RL(ING_LOG_WARN, COMP, "fleet catalog: members: %s",
			   one_line(PQresultErrorMessage(r), b, sizeof(b)));
		PQclear(r);
		pg_drop(f, "members");
		return false;
	}
	int nt = PQntuples(r);
	struct ing_fleet_member *m = calloc((size_t)nt + 1, sizeof(*m));
	if (!m) {
		PQclear(r);
		return true;
	}
	for (int i = 0; i < nt; i++) {
		snprintf(m[i].node_id, sizeof(m[i].node_id), "%s", PQgetvalue(r, i, 0));
		snprintf(m[i].address, sizeof(m[i].address), "%s", PQgetvalue(r, i, 1));
		m[i].heartbeat_ms = strtoll(PQgetvalue(r, i, 3), NULL, 10);
		if (PQgetvalue(r, i, 4)[0] == 't')
			m[i].state = ING_MEMBER_DOWN;
		else if (!strcmp(PQgetvalue(r, i, 2), "draining"))
			m[i].state = ING_MEMBER_DRAINING;
		else
			m[i].state = ING_MEMBER_ACTIVE;
	}
	PQclear(r);
	pthread_mutex_lock(&f->mu);
	free(f->pgm);
	f->pgm = m;
	f->npgm = (unsigned)nt;
	f->pg_seen = true;
	pthread_mutex_unlock(&f->mu);
	return true;
}

/* INSERT for n rows: $1 the node id, then 7 parameters a row. */
static const char *insert_sql(struct ing_fleet *f, unsigned n)
{
	static const char head[] = "INSERT INTO fleet_frames (node_id, wafer_id, frame_id, crc32c, length,"
				   " \"timestamp\", stored_at, file_name) VALUES ";
	static const char tail[] = " ON CONFLICT DO NOTHING";
	size_t need = sizeof(head) + sizeof(tail) + (size_t)n * 120;
	if (need > f->sql_cap) {
		char *s = realloc(f->sql, need);
		if (!s)
			return NULL;
		f->sql = s;
		f->sql_cap = need;
	}
	size_t o = (size_t)snprintf(f->sql, f->sql_cap, "%s", head);
	for (unsigned i = 0; i < n; i++) {
		unsigned b = 2 + i * 7;
		o += (size_t)snprintf(f->sql + o, f->sql_cap - o,
				      "%s($1,$%u,$%u,$%u::bigint,$%u::bigint,$%u::bigint,"
				      "to_timestamp($%u::bigint / 1000.0),$%u)",
				      i ? "," : "", b, b + 1, b + 2, b + 3, b + 4, b + 5, b + 6);
	}
	snprintf(f->sql + o, f->sql_cap - o, "%s", tail);
	return f->sql;
}

/* Export one batch: rows exported (0: outbox empty), or -errno. */
static int export_batch(struct ing_fleet *f)
{
	int n = outbox_read(f->ob, f->rows, f->batch);
	if (n <= 0)
		return n;
	const char *sql = insert_sql(f, (unsigned)n);
	size_t np = 1 + (size_t)n * 7;
	const char **vals = calloc(np, sizeof(*vals));
	char (*nums)[4][24] = calloc((size_t)n, sizeof(*nums));
	if (!sql || !vals || !nums) {
		free(vals);
		free(nums);
		return -ENOMEM;
	}
	vals[0] = f->node_id;
	for (int i = 0; i < n; i++) {
		const struct outbox_row *r = &f->rows[i];
		const char **v = &vals[1 + (size_t)i * 7];
		snprintf(nums[i][0], sizeof(nums[i][0]), "%" PRIu32, r->crc32c);
		snprintf(nums[i][1], sizeof(nums[i][1]), "%" PRIu64, r->length);
		snprintf(nums[i][2], sizeof(nums[i][2]), "%" PRId64, r->timestamp);
		snprintf(nums[i][3], sizeof(nums[i][3]), "%" PRId64, r->queued_ms);
		v[0] = r->wafer_id;
		v[1] = r->frame_id;
		v[2] = nums[i][0];
		v[3] = nums[i][1];
		v[4] = nums[i][2];
		v[5] = nums[i][3];
		v[6] = r->path;
	}
	bool ok;
	if ((unsigned)n == f->batch) {
		/* full batches (the bulk of a backlog) skip the parse of a statement with
		 * 1 + 7 * batch parameters: prepared once per connection */
		if (!f->prepared) {
			PGresult *r = PQprepare(f->pg, "fleet_export", sql, (int)np, NULL);
			f->prepared = pg_ok(r);
			PQclear(r);
		}
		if (f->prepared) {
			PGresult *r = PQexecPrepared(f->pg, "fleet_export", (int)np, vals, NULL, NULL, 0);
			ok = pg_ok(r);
			if (!ok) {
				char b[512];
				ING_LOG_RL(ING_LOG_WARN, COMP, "fleet catalog: export: %s",
					   one_line(PQresultErrorMessage(r), b, sizeof(b)));
				pg_drop(f, "export");
			}
			PQclear(r);
		} else {
			ok = pg_exec(f, "export", sql, (int)np, vals);
		}
	} else {
		ok = pg_exec(f, "export", sql, (int)np, vals);
	}
	free(vals);
	free(nums);
	if (!ok)
		return -EIO;
	/* committed (autocommit statement): the rows may go; a crash before this re-sends them */
	int rc = outbox_delete_upto(f->ob, f->rows[n - 1].seq);
	if (rc)
		return rc;
	atomic_fetch_add(&f->exported, (uint64_t)n);
	atomic_fetch_add(&f->batches, 1);
	return n;
}

static void update_lag(struct ing_fleet *f)
{
	uint64_t rows = 0;
	int64_t oldest = 0;
	if (f->ob_enabled && outbox_lag(f->ob, &rows, &oldest) == 0) {
		atomic_store_explicit(&f->lag_rows, rows, memory_order_relaxed);
		atomic_store_explicit(&f->oldest_ms, oldest, memory_order_relaxed);
	}
}

/* What the mailbox brings besides calls: nothing is posted to it today. */
static void on_mail(void *ctx, const struct ing_msg *m)
{
	(void)ctx;
	ING_LOG_RL(ING_LOG_ERR, COMP, "unknown message %u on the fleet exporter's mailbox", m->kind);
}

/* Sleep on the mailbox up to ms, or until kicked (stop, a change of state); true when
 * stopping. The doorbell is re-armed first (ing_mbox_idle), so a kick is never lost. */
static bool wait_ms(struct ing_fleet *f, unsigned ms)
{
	if (atomic_load(&f->stop))
		return true;
	(void)ing_mbox_run(f->mb, 64, on_mail, f);
	if (ing_mbox_idle(f->mb) && !atomic_load(&f->stop))
		(void)ing_mbox_wait(f->mb, (int)ms);
	return atomic_load(&f->stop);
}

static bool stopping(struct ing_fleet *f)
{
	return atomic_load(&f->stop);
}

static void *exporter(void *arg)
{
	struct ing_fleet *f = arg;
	unsigned backoff = BACKOFF_MIN_MS;
	uint64_t next_hb = 0, next_lag = 0, next_connect = 0;
	int last_state = -1;

	while (!stopping(f)) {
		uint64_t now = ing_now_ns();
		if (f->ob && !f->ob_enabled) {
			int rc = outbox_enable(f->ob);
			if (rc == 0)
				f->ob_enabled = true;
			else if (rc != -ENOENT && rc != -EBUSY)
				ING_LOG_RL(ING_LOG_WARN, COMP, "outbox set-up failed (%s); retrying", strerror(-rc));
		}
		if (now >= next_lag) {
			update_lag(f);
			next_lag = now + LAG_EVERY_MS * 1000000ull;
		}
		if (!f->pg && now < next_connect) {
			/* waiting to redial: keep the lag in Stats fresh meanwhile (an outage is when
			 * it matters), so sleep in slices of the lag period */
			uint64_t left_ms = (next_connect - now) / 1000000ull + 1;
			if (wait_ms(f, (unsigned)(left_ms < LAG_EVERY_MS ? left_ms : LAG_EVERY_MS)))
				break;
			continue;
		}
		if (!f->pg && !pg_connect(f)) {
			next_connect = ing_now_ns() + (uint64_t)backoff * 1000000ull;
			backoff = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2;
			continue;
		}
		backoff = BACKOFF_MIN_MS;
		int st = (int)ing_fleet_state(f);
		if (now >= next_hb || st != last_state) {
			if (!pg_heartbeat(f)) {
				if (wait_ms(f, backoff))
					break;
				continue;
			}
			last_state = st;
			next_hb = now + (uint64_t)f->heartbeat_ms * 1000000ull;
		}
		int n = 0;
		if (f->ob_enabled) {
			n = export_batch(f);
			if (n > 0 && (unsigned)n < f->batch)
				update_lag(f);
			if (n < 0 && !f->pg)
				continue;   /* connection lost: back-off path */
		}
		if (n < (int)f->batch) {
			uint64_t until_hb = next_hb > ing_now_ns() ? (next_hb - ing_now_ns()) / 1000000ull : 0;
			unsigned w = until_hb < IDLE_WAIT_MS ? (unsigned)until_hb : IDLE_WAIT_MS;
			if (n < 0)
				w = BACKOFF_MIN_MS;   /* outbox busy or failing: do not spin */
			if (w && wait_ms(f, w))
				break;
		}
	}
	return NULL;
}

/* ---------------------------------------------------------------- life */

struct ing_fleet *ing_fleet_start(const struct ing_fleet_opts *o)
{
	if (!o->node_id || !o->node_id[0] || strlen(o->node_id) > ING_FLEET_ID_MAX) {
		ING_ERR(COMP, "node id must be 1..%d bytes", ING_FLEET_ID_MAX);
		return NULL;
	}
	if (!o->advertise || !o->advertise[0] || strlen(o->advertise) > ING_FLEET_ADDR_MAX) {
		ING_ERR(COMP, "advertised address must be 1..%d bytes", ING_FLEET_ADDR_MAX);
		return NULL;
	}
	struct ing_fleet *f = calloc(1, sizeof(*f));
	if (!f) {
		ING_ERR(COMP, "out of memory");
		return NULL;
	}
	pthread_mutex_init(&f->mu, NULL);
	snprintf(f->node_id, sizeof(f->node_id), "%s", o->node_id);
	snprintf(f->advertise, sizeof(f->advertise), "%s", o->advertise);
	f->heartbeat_ms = o->heartbeat_ms ? o->heartbeat_ms : ING_DEFAULT_FLEET_HEARTBEAT_MS;
	f->batch = o->batch ? o->batch : ING_DEFAULT_FLEET_BATCH;
	atomic_store(&f->state, o->draining ? ING_MEMBER_DRAINING : ING_MEMBER_ACTIVE);
	if (o->peers) {
		char why[160];
		f->peers = calloc(ING_FLEET_MAX_MEMBERS, sizeof(*f->peers));
		if (!f->peers ||
		    ing_fleet_parse_peers(o->peers, f->peers, ING_FLEET_MAX_MEMBERS, &f->npeers, why,
					  sizeof(why))) {
			ING_ERR(COMP, "fleet peers: %s", f->peers ? why : "out of memory");
			goto fail;
		}
	}
	if (o->catalog)
		snprintf(f->catalog, sizeof(f->catalog), "%s", o->catalog);
	if (!o->conninfo) {
		/* no fleet catalog: a trigger left by an earlier run must not grow the outbox */
		if (o->catalog) {
			struct outbox *ob = outbox_open(o->catalog);
			if (ob)
				(void)outbox_disable(ob);
			outbox_close(ob);
		}
		ING_INFO(COMP, "node %s (%s), %s; membership: %u static peers, no fleet catalog",
			 f->node_id, f->advertise,
			 o->draining ? "DRAINING" : "ACTIVE", f->npeers);
		return f;
	}
	f->conninfo = strdup(o->conninfo);
	f->rows = calloc(f->batch, sizeof(*f->rows));
	if (!f->conninfo || !f->rows) {
		ING_ERR(COMP, "out of memory");
		goto fail;
	}
	if (o->catalog) {
		f->ob = outbox_open(o->catalog);
		if (!f->ob)
			goto fail;
	}
	f->mb = ing_mbox_create("fleet", 64);
	if (!f->mb)
		goto fail;
	int rc = pthread_create(&f->thread, NULL, exporter, f);
	if (rc) {
		ING_ERR(COMP, "cannot start the fleet exporter thread: %s", strerror(rc));
		goto fail;
	}
	f->thread_started = true;
	ING_INFO(COMP, "node %s (%s), %s; fleet catalog export every %u ms heartbeat, batches of %u rows%s",
		 f->node_id, f->advertise, o->draining ? "DRAINING" : "ACTIVE", f->heartbeat_ms, f->batch,
		 o->catalog ? "" : " (no catalog: membership only)");
	return f;
fail:
	ing_fleet_stop(f);
	return NULL;
}

void ing_fleet_stop(struct ing_fleet *f)
{
	if (!f)
		return;
	if (f->thread_started) {
		atomic_store(&f->stop, true);
		ing_mbox_kick(f->mb);
		pthread_join(f->thread, NULL);
	}
	ing_mbox_destroy(f->mb);
	if (f->pg)
		PQfinish(f->pg);
	outbox_close(f->ob);
	free(f->rows);
	free(f->sql);
	free(f->conninfo);
	free(f->peers);
	free(f->pgm);
	pthread_mutex_destroy(&f->mu);
	free(f);
}
