/* SPDX-License-Identifier: Apache-2.0 */
/*
 * outbox.c - the node's outbox of catalog rows for the fleet catalog, inside catalog.db.
 *
 * An AFTER INSERT trigger on `frames` copies each new row into `fleet_outbox`, so the copy
 * commits in the persistence worker's own catalog transaction: a frame that is DURABLE
 * has its outbox row, across any crash, and persistence needs no change at all. The
 * exporter thread reads the oldest rows, sends them, and deletes them once PostgreSQL
 * has committed them; a crash in between sends them again, which PostgreSQL ignores
 * (ON CONFLICT DO NOTHING on (wafer_id, frame_id, node_id)).
 */
#include "control/fleet/fleet_internal.h"
#include "common/log.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#define COMP "fleet"
#define BUSY_TIMEOUT_MS 10000

struct outbox {
	sqlite3 *db;
	sqlite3_stmt *st_read, *st_delete, *st_lag;
	char path[PATH_MAX];
};

static const char outbox_table[] =
	"CREATE TABLE IF NOT EXISTS fleet_outbox ("
	" seq INTEGER PRIMARY KEY,"
	" wafer_id TEXT NOT NULL,"
	" frame_id TEXT NOT NULL,"
	" crc32c INTEGER NOT NULL,"
	" length INTEGER NOT NULL,"
	" timestamp INTEGER,"
	" path TEXT NOT NULL,"
	" queued_ms INTEGER NOT NULL);";

/* Unix ms from SQLite's clock (julianday of the Unix epoch is 2440587.5) */
#define NOW_MS "CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)"

static const char outbox_trigger[] =
	"CREATE TRIGGER fleet_outbox_frames AFTER INSERT ON frames BEGIN"
	" INSERT INTO fleet_outbox (wafer_id, frame_id, crc32c, length, timestamp, path, queued_ms)"
	" VALUES (NEW.wafer_id, NEW.frame_id, NEW.crc32c, NEW.length, NEW.timestamp, NEW.path, "
	NOW_MS "); END;";

static const char outbox_backfill[] =
	"INSERT INTO fleet_outbox (wafer_id, frame_id, crc32c, length, timestamp, path, queued_ms)"
	" SELECT wafer_id, frame_id, crc32c, length, timestamp, path, " NOW_MS " FROM frames;";

static int exec(struct outbox *o, const char *sql)
{
	char *err = NULL;
	int rc = sqlite3_exec(o->db, sql, NULL, NULL, &err);
	if (rc != SQLITE_OK) {
		ING_LOG_RL(ING_LOG_WARN, COMP, "%s: outbox: %s", o->path, err ? err : sqlite3_errstr(rc));
		sqlite3_free(err);
		return (rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED ? -EBUSY : -EIO;
	}
	return 0;
}

static int64_t query_int(struct outbox *o, const char *sql)
{
	sqlite3_stmt *st = NULL;
	int64_t v = -1;

	if (sqlite3_prepare_v2(o->db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return v;
}

struct outbox *outbox_open(const char *catalog_path)
{
	struct outbox *o = calloc(1, sizeof(*o));
	if (!o) {
		ING_ERR(COMP, "out of memory");
		return NULL;
	}
	snprintf(o->path, sizeof(o->path), "%s", catalog_path);
	int rc = sqlite3_open_v2(catalog_path, &o->db,
				 SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
	if (rc != SQLITE_OK) {
		ING_ERR(COMP, "outbox: open %s: %s", catalog_path,
			o->db ? sqlite3_errmsg(o->db) : sqlite3_errstr(rc));
		outbox_close(o);
		return NULL;
	}
	sqlite3_busy_timeout(o->db, BUSY_TIMEOUT_MS);
	/*
	 * NORMAL, not FULL, on this connection only: its commits (outbox deletes after an
	 * export, the trigger set-up) need no fsync of their own. Lost by a power cut, they
	 * undo themselves: deleted rows come back and are exported again (PostgreSQL ignores
	 * them), a lost trigger set-up is done again at the next start. The rows themselves
	 * are written by the persistence workers' FULL commits.
	 */
	if (exec(o, "PRAGMA journal_mode=WAL;") < 0 || exec(o, "PRAGMA synchronous=NORMAL;") < 0) {
		outbox_close(o);
		return NULL;
	}
	return o;
}

void outbox_close(struct outbox *o)
{
	if (!o)
		return;
	sqlite3_finalize(o->st_read);
	sqlite3_finalize(o->st_delete);
	sqlite3_finalize(o->st_lag);
	if (o->db)
		sqlite3_close(o->db);
	free(o);
}

static int prepare(struct outbox *o)
{
	if (o->st_read)
		return 0;
	if (sqlite3_prepare_v3(o->db, "SELECT seq, wafer_id, frame_id, crc32c, length, timestamp,"
			       " queued_ms, path FROM fleet_outbox ORDER BY seq LIMIT ?1", -1,
			       SQLITE_PREPARE_PERSISTENT, &o->st_read, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v3(o->db, "DELETE FROM fleet_outbox WHERE seq <= ?1", -1,
			       SQLITE_PREPARE_PERSISTENT, &o->st_delete, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v3(o->db, "SELECT count(*), coalesce(min(queued_ms), 0) FROM fleet_outbox",
			       -1, SQLITE_PREPARE_PERSISTENT, &o->st_lag, NULL) != SQLITE_OK) {
		ING_ERR(COMP, "%s: outbox statements: %s", o->path, sqlite3_errmsg(o->db));
		sqlite3_finalize(o->st_read);
		sqlite3_finalize(o->st_delete);
		sqlite3_finalize(o->st_lag);
		o->st_read = o->st_delete = o->st_lag = NULL;
		return -EIO;
	}
	return 0;
}

int outbox_enable(struct outbox *o)
{
	if (query_int(o, "SELECT count(*) FROM sqlite_master WHERE type='table' AND name='frames'") <= 0)
		return -ENOENT;
	int rc = exec(o, "BEGIN IMMEDIATE;");
	if (rc)
		return rc;
	rc = exec(o, outbox_table);
	bool fresh = rc == 0 && query_int(o, "SELECT count(*) FROM sqlite_master WHERE type='trigger'"
					     " AND name='fleet_outbox_frames'") == 0;
	if (rc == 0 && fresh)
		rc = exec(o, outbox_trigger);
	if (rc == 0 && fresh)
		rc = exec(o, outbox_backfill);
	if (rc == 0)
		rc = exec(o, "COMMIT;");
	if (rc) {
		if (!sqlite3_get_autocommit(o->db))
			(void)exec(o, "ROLLBACK;");
		return rc;
	}
	if (fresh)
		ING_INFO(COMP, "%s: outbox trigger created; %lld catalog rows queued for the fleet catalog",
			 o->path, (long long)query_int(o, "SELECT count(*) FROM fleet_outbox"));
	return prepare(o);
}

int outbox_disable(struct outbox *o)
{
	if (query_int(o, "SELECT count(*) FROM sqlite_master WHERE type='trigger'"
			 " AND name='fleet_outbox_frames'") <= 0)
		return 0;
	ING_INFO(COMP, "%s: no fleet catalog configured: outbox trigger dropped (queued rows kept)",
		 o->path);
	return exec(o, "DROP TRIGGER IF EXISTS fleet_outbox_frames;");
}

static void copy_text(char *dst, size_t n, const unsigned char *s)
{
	snprintf(dst, n, "%s", s ? (const char *)s : "");
}

int outbox_read(struct outbox *o, struct outbox_row *rows, unsigned max)
{
	if (prepare(o))
		return -EIO;
	sqlite3_stmt *st = o->st_read;
	int n = 0, rc = SQLITE_DONE;

	sqlite3_bind_int64(st, 1, max);
	while ((unsigned)n < max && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct outbox_row *r = &rows[n++];
		r->seq = sqlite3_column_int64(st, 0);
		copy_text(r->wafer_id, sizeof(r->wafer_id), sqlite3_column_text(st, 1));
		copy_text(r->frame_id, sizeof(r->frame_id), sqlite3_column_text(st, 2));
		r->crc32c = (uint32_t)sqlite3_column_int64(st, 3);
		r->length = (uint64_t)sqlite3_column_int64(st, 4);
		r->timestamp = sqlite3_column_int64(st, 5);
		r->queued_ms = sqlite3_column_int64(st, 6);
		copy_text(r->path, sizeof(r->path), sqlite3_column_text(st, 7));
		rc = SQLITE_DONE;
	}
	if (rc != SQLITE_DONE && rc != SQLITE_ROW) {
		ING_LOG_RL(ING_LOG_WARN, COMP, "%s: outbox read: %s", o->path, sqlite3_errmsg(o->db));
		n = -EIO;
	}
	sqlite3_reset(st);
	return n;
}

int outbox_delete_upto(struct outbox *o, int64_t seq)
{
	if (prepare(o))
		return -EIO;
	sqlite3_bind_int64(o->st_delete, 1, seq);
	int rc = sqlite3_step(o->st_delete);
	sqlite3_reset(o->st_delete);
	if (rc != SQLITE_DONE) {
		ING_LOG_RL(ING_LOG_WARN, COMP, "%s: outbox delete: %s", o->path, sqlite3_errmsg(o->db));
		return (rc & 0xff) == SQLITE_BUSY ? -EBUSY : -EIO;
	}
	return 0;
}

int outbox_lag(struct outbox *o, uint64_t *rows, int64_t *oldest_ms)
{
	if (prepare(o))
		return -EIO;
	int rc = sqlite3_step(o->st_lag), ret = 0;
	if (rc == SQLITE_ROW) {
		*rows = (uint64_t)sqlite3_column_int64(o->st_lag, 0);
		*oldest_ms = sqlite3_column_int64(o->st_lag, 1);
	} else {
		ret = -EIO;
	}
	sqlite3_reset(o->st_lag);
	return ret;
}
