/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fleet.c - node identity, membership and the exporter thread (fleet.h).
 *
 * The exporter thread owns the PostgreSQL connection and the outbox handle. Its loop:
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

struct ing_fleet {
	char node_id[ING_FLEET_ID_MAX + 1];
	char advertise[ING_FLEET_ADDR_MAX + 1];
	char *conninfo;
	char catalog[PATH_MAX];
	unsigned heartbeat_ms, batch;
	_Atomic int state;                 /* enum ing_member_state: ACTIVE or DRAINING */
	/* --- membership snapshot and stop flag, under mu --- */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool stop;
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
	PGconn *pg;
	struct outbox *ob;
	bool ob_enabled;
	bool prepared;                     /* "fleet_export" (a full batch) on this connection */
	struct outbox_row *rows;
	char *sql;                         /* INSERT for a full batch */
	size_t sql_cap;
};

void ing_fleet_opts_init(struct ing_fleet_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->heartbeat_ms = ING_DEFAULT_FLEET_HEARTBEAT_MS;
	o->batch = ING_DEFAULT_FLEET_BATCH;
}

/* ---------------------------------------------------------------- static membership */

int ing_fleet_parse_peers(const char *s, struct ing_fleet_member *out, unsigned max, unsigned *n,
			  char *why, size_t whylen)
{
	unsigned k = 0;
	const char *p = s;

	*n = 0;
	while (p && *p) {
		const char *end = strchr(p, ',');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		const char *eq = memchr(p, '=', len);
		if (!eq || eq == p || eq + 1 == p + len) {
			snprintf(why, whylen, "peer %u: want id=host:port", k + 1);
			return -EINVAL;
		}
		size_t il = (size_t)(eq - p), al = len - il - 1;
		if (il > ING_FLEET_ID_MAX || al > ING_FLEET_ADDR_MAX) {
			snprintf(why, whylen, "peer %u: id longer than %d or address longer than %d bytes",
				 k + 1, ING_FLEET_ID_MAX, ING_FLEET_ADDR_MAX);
			return -EINVAL;
		}
		if (!memchr(eq + 1, ':', al)) {
			snprintf(why, whylen, "peer %u: address '%.*s' is not host:port", k + 1, (int)al, eq + 1);
			return -EINVAL;
		}
		if (k >= max || k >= ING_FLEET_MAX_MEMBERS) {
			snprintf(why, whylen, "more than %u peers", max < ING_FLEET_MAX_MEMBERS ? max : ING_FLEET_MAX_MEMBERS);
			return -EINVAL;
		}
		struct ing_fleet_member *m = &out[k];
		memset(m, 0, sizeof(*m));
		memcpy(m->node_id, p, il);
		memcpy(m->address, eq + 1, al);
		m->state = ING_MEMBER_ACTIVE;
		for (unsigned j = 0; j < k; j++)
			if (!strcmp(out[j].node_id, m->node_id)) {
				snprintf(why, whylen, "peer id '%s' given twice", m->node_id);
				return -EINVAL;
			}
		k++;
		p = end ? end + 1 : NULL;
		if (end && !*p) {
			snprintf(why, whylen, "trailing ','");
			return -EINVAL;
		}
	}
	if (!k) {
		snprintf(why, whylen, "empty list");
		return -EINVAL;
	}
	*n = k;
	return 0;
}

/* ---------------------------------------------------------------- getters */

const char *ing_fleet_node_id(const struct ing_fleet *f)
{
	return f->node_id;
}

enum ing_member_state ing_fleet_state(const struct ing_fleet *f)
{
	return (enum ing_member_state)atomic_load_explicit(&f->state, memory_order_relaxed);
}

void ing_fleet_set_draining(struct ing_fleet *f, bool draining)
{
	int want = draining ? ING_MEMBER_DRAINING : ING_MEMBER_ACTIVE;
	int was = atomic_exchange(&f->state, want);
	if (was != want)
		ING_INFO(COMP, "node %s is now %s%s", f->node_id, draining ? "DRAINING" : "ACTIVE",
			 draining ? " (producers send it no new wafers)" : "");
	pthread_mutex_lock(&f->mu);
	pthread_cond_signal(&f->cv);   /* heartbeat the change now */
	pthread_mutex_unlock(&f->mu);
}

void ing_fleet_get_stats(struct ing_fleet *f, struct ing_fleet_stats *st)
{
	memset(st, 0, sizeof(*st));
	st->enabled = f->conninfo != NULL;
	st->pg_up = atomic_load_explicit(&f->pg_up, memory_order_relaxed);
	st->lag_rows = atomic_load_explicit(&f->lag_rows, memory_order_relaxed);
	int64_t oldest = atomic_load_explicit(&f->oldest_ms, memory_order_relaxed);
	if (st->lag_rows && oldest > 0) {
		int64_t now_ms = ing_wall_ns() / 1000000;
		st->lag_seconds = now_ms > oldest ? (double)(now_ms - oldest) / 1000.0 : 0.0;
	}
	st->exported = atomic_load_explicit(&f->exported, memory_order_relaxed);
	st->errors = atomic_load_explicit(&f->errors, memory_order_relaxed);
	st->heartbeats = atomic_load_explicit(&f->heartbeats, memory_order_relaxed);
	st->batches = atomic_load_explicit(&f->batches, memory_order_relaxed);
}

static int member_cmp(const void *a, const void *b)
{
	return strcmp(((const struct ing_fleet_member *)a)->node_id,
		      ((const struct ing_fleet_member *)b)->node_id);
}

/* FNV-1a over what a producer routes by: ids, addresses, states */
static uint64_t members_epoch(const struct ing_fleet_member *m, unsigned n)
{
	uint64_t h = 1469598103934665603ull;
	for (unsigned i = 0; i < n; i++) {
		const char *parts[] = { m[i].node_id, m[i].address };
		for (unsigned k = 0; k < 2; k++) {
			for (const char *c = parts[k]; *c; c++)
				h = (h ^ (uint8_t)*c) * 1099511628211ull;
			h = (h ^ 0xff) * 1099511628211ull;
		}
		h = (h ^ (uint8_t)m[i].state) * 1099511628211ull;
	}
	return h ? h : 1;
}

unsigned ing_fleet_members(struct ing_fleet *f, struct ing_fleet_member *out, unsigned max,
			   uint64_t *epoch, const char **source)
{
	struct ing_fleet_member *all = calloc(ING_FLEET_MAX_MEMBERS + 1, sizeof(*all));
	unsigned n = 0;
	bool self_seen = false;

	pthread_mutex_lock(&f->mu);
	const struct ing_fleet_member *src = f->pg_seen ? f->pgm : f->peers;
	unsigned ns = f->pg_seen ? f->npgm : f->npeers;
	*source = f->pg_seen ? "postgresql" : "static";
	if (all) {
		for (unsigned i = 0; i < ns && n < ING_FLEET_MAX_MEMBERS; i++)
			all[n++] = src[i];
	}
	pthread_mutex_unlock(&f->mu);
	if (!all) {
		*epoch = 0;
		return 0;
	}
	for (unsigned i = 0; i < n; i++) {
		if (strcmp(all[i].node_id, f->node_id))
			continue;
		self_seen = true;   /* this node answers: not DOWN, whatever its heartbeat says */
		all[i].state = ing_fleet_state(f);
		snprintf(all[i].address, sizeof(all[i].address), "%s", f->advertise);
	}
	if (!self_seen) {
		struct ing_fleet_member *m = &all[n++];
		memset(m, 0, sizeof(*m));
		snprintf(m->node_id, sizeof(m->node_id), "%s", f->node_id);
		snprintf(m->address, sizeof(m->address), "%s", f->advertise);
		m->state = ing_fleet_state(f);
		m->heartbeat_ms = ing_wall_ns() / 1000000;
	}
	qsort(all, n, sizeof(*all), member_cmp);
	*epoch = members_epoch(all, n);
	memcpy(out, all, sizeof(*all) * (n < max ? n : max));
	free(all);
	return n;
}

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

/* Wait up to ms, or until stopped or signalled; true when stopping. */
static bool wait_ms(struct ing_fleet *f, unsigned ms)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&f->mu);
	if (!f->stop)
		(void)pthread_cond_timedwait(&f->cv, &f->mu, &ts);
	bool stop = f->stop;
	pthread_mutex_unlock(&f->mu);
	return stop;
}

static bool stopping(struct ing_fleet *f)
{
	pthread_mutex_lock(&f->mu);
	bool s = f->stop;
	pthread_mutex_unlock(&f->mu);
	return s;
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
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&f->cv, &ca);
	pthread_condattr_destroy(&ca);
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
		pthread_mutex_lock(&f->mu);
		f->stop = true;
		pthread_cond_broadcast(&f->cv);
		pthread_mutex_unlock(&f->mu);
		pthread_join(f->thread, NULL);
	}
	if (f->pg)
		PQfinish(f->pg);
	outbox_close(f->ob);
	free(f->rows);
	free(f->sql);
	free(f->conninfo);
	free(f->peers);
	free(f->pgm);
	pthread_cond_destroy(&f->cv);
	pthread_mutex_destroy(&f->mu);
	free(f);
}
