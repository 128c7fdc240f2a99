/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tier_db.c - the tier's catalog access: the upload outbox (tier_outbox) and the frames'
 * location, on the tier thread's own connection to catalog.db.
 *
 * An AFTER INSERT trigger on `frames` queues each new row in tier_outbox, inside the
 * persistence worker's own catalog transaction: a DURABLE frame always has its outbox
 * row, across any crash, and persistence needs no change (the fleet's outbox, the same
 * way: control/fleet/outbox.c). A row leaves the outbox in the transaction that marks its
 * frame 'both' (object verified), so every outbox row is a frame still 'local'.
 *
 * The outbox's key (seq) is AUTOINCREMENT: never handed out twice, even once the outbox has
 * emptied (a plain INTEGER PRIMARY KEY reuses 1, 2, ... then; an outbox of that form is
 * migrated on open, rows kept). Where the frames are is counted by the catalog itself:
 * tier_usage holds frames and bytes per location, kept by triggers on `frames` in the
 * same transactions that insert a frame or move it, and recomputed from `frames` when the
 * tier starts; so the count the high-water mark holds to cannot drift from the catalog.
 * tier_meta holds since when the tier verifies objects against the store's own digest:
 * a 'both' row verified before that (by the metadata the node itself had sent) is
 * verified again before its local copy may go.
 *
 * synchronous=NORMAL on this connection: what it commits may be lost by a power cut and
 * comes back as work that is redone without harm. A lost 'both' leaves the frame queued:
 * its PUT finds the object (412), the same bytes, done. A lost 'tiered' (the local copy
 * was deleted and its directory fsync'ed first) leaves 'both' with no file: reads go to the
 * store, and the next deletion pass verifies the object again and records it.
 */
#include "dataplane/tier/tier_internal.h"
#include "common/log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#define COMP "tier"
#define BUSY_TIMEOUT_MS 10000

struct tier_db {
	sqlite3 *db;
	sqlite3_stmt *st_due, *st_mark_both, *st_dequeue, *st_failed, *st_cand, *st_deleted,
		*st_unmark, *st_enqueue, *st_backlog, *st_usage, *st_next_due, *st_oldest_both, *st_loc,
		*st_queued, *st_begin, *st_commit, *st_rollback;
	char path[PATH_MAX];
};

/* Unix ms from SQLite's clock (julianday of the Unix epoch is 2440587.5) */
#define NOW_MS "CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)"

#define OUTBOX_TABLE(name) \
	"CREATE TABLE IF NOT EXISTS " name " (" \
	" seq INTEGER PRIMARY KEY AUTOINCREMENT," /* never reused: see the top */ \
	" wafer_id TEXT NOT NULL," \
	" frame_id TEXT NOT NULL," \
	" length INTEGER NOT NULL," \
	" crc32c INTEGER NOT NULL," \
	" path TEXT NOT NULL," \
	" queued_ms INTEGER NOT NULL," \
	" attempts INTEGER NOT NULL DEFAULT 0," \
	" next_ms INTEGER NOT NULL DEFAULT 0," \
	" last_error TEXT," \
	" requeued INTEGER NOT NULL DEFAULT 0," /* queued again by the tier, not a new frame */ \
	" UNIQUE (wafer_id, frame_id));"

/* when the next backed-off row is due (tier_db_next_due), without a scan of the outbox */
static const char outbox_next_index[] =
	"CREATE INDEX IF NOT EXISTS tier_outbox_next ON tier_outbox (next_ms);";

#define OUTBOX_COLS "wafer_id, frame_id, length, crc32c, path, queued_ms"
#define OUTBOX_ALL "seq, " OUTBOX_COLS ", attempts, next_ms, last_error, requeued"

static const char outbox_trigger[] =
	"CREATE TRIGGER tier_outbox_frames AFTER INSERT ON frames BEGIN"
	" INSERT OR IGNORE INTO tier_outbox (" OUTBOX_COLS ")"
	" VALUES (NEW.wafer_id, NEW.frame_id, NEW.length, NEW.crc32c, NEW.path, " NOW_MS "); END;";

/* every frame still local is queued (at each start: a frame the trigger missed, a run
 * without --tier, is queued then; the queued ones are left as they are, and no seq is
 * spent on them: an ignored INSERT would advance AUTOINCREMENT's counter) */
static const char outbox_backfill[] =
	"INSERT OR IGNORE INTO tier_outbox (" OUTBOX_COLS ")"
	" SELECT wafer_id, frame_id, length, crc32c, path, " NOW_MS " FROM frames f"
	" WHERE location = 'local' AND NOT EXISTS (SELECT 1 FROM tier_outbox o"
	" WHERE o.wafer_id = f.wafer_id AND o.frame_id = f.frame_id);";

/* rows of frames that are no longer in the catalog (deleted by ingest-catalog prune before
 * it knew the tier, or by hand): nothing to upload, and their missing file would fail
 * them again and again */
static const char outbox_orphans[] =
	"DELETE FROM tier_outbox WHERE NOT EXISTS (SELECT 1 FROM frames f"
	" WHERE f.wafer_id = tier_outbox.wafer_id AND f.frame_id = tier_outbox.frame_id);";

/* An outbox of the first form (seq reused once the outbox emptied) into the AUTOINCREMENT
 * one, rows and their seq kept (sqlite_sequence starts above the largest), and the trigger
 * that writes it dropped first and made again: one transaction. */
static const char outbox_migrate[] =
	"DROP TRIGGER IF EXISTS tier_outbox_frames;"
	"ALTER TABLE tier_outbox RENAME TO tier_outbox_v1;"
	OUTBOX_TABLE("tier_outbox")
	"INSERT INTO tier_outbox (" OUTBOX_ALL ") SELECT " OUTBOX_ALL " FROM tier_outbox_v1;"
	"DROP TABLE tier_outbox_v1;";

/* Frames and bytes per location, kept by the catalog's own transactions. */
static const char usage_table[] =
	"CREATE TABLE IF NOT EXISTS tier_usage (location TEXT PRIMARY KEY, frames INTEGER NOT NULL,"
	" bytes INTEGER NOT NULL) WITHOUT ROWID;";

#define USAGE_ADD(loc, len) \
	" UPDATE tier_usage SET frames = frames + 1, bytes = bytes + " len " WHERE location = " loc ";"
#define USAGE_SUB(loc, len) \
	" UPDATE tier_usage SET frames = frames - 1, bytes = bytes - " len " WHERE location = " loc ";"

static const char usage_triggers[] =
	"CREATE TRIGGER IF NOT EXISTS tier_usage_insert AFTER INSERT ON frames BEGIN"
	USAGE_ADD("NEW.location", "NEW.length") " END;"
	"CREATE TRIGGER IF NOT EXISTS tier_usage_move AFTER UPDATE OF location, length ON frames BEGIN"
	USAGE_SUB("OLD.location", "OLD.length") USAGE_ADD("NEW.location", "NEW.length") " END;"
	"CREATE TRIGGER IF NOT EXISTS tier_usage_delete AFTER DELETE ON frames BEGIN"
	USAGE_SUB("OLD.location", "OLD.length") " END;";

/* the count from scratch: one pass over the catalog (under the enable's write lock, so no
 * frame committed meanwhile is missed or counted twice) */
static const char usage_recount[] =
	"DELETE FROM tier_usage;"
	"INSERT INTO tier_usage (location, frames, bytes)"
	" SELECT location, count(*), coalesce(sum(length), 0) FROM frames GROUP BY location;"
	"INSERT OR IGNORE INTO tier_usage VALUES ('local', 0, 0), ('both', 0, 0), ('tiered', 0, 0);";

static const char meta_table[] =
	"CREATE TABLE IF NOT EXISTS tier_meta (key TEXT PRIMARY KEY, value INTEGER) WITHOUT ROWID;";
/* set once: the first start that verifies against the store's digest */
static const char meta_digest_since[] =
	"INSERT OR IGNORE INTO tier_meta VALUES ('store_digest_since_ns', " NOW_MS " * 1000000);";

static int exec(struct tier_db *t, const char *sql)
{
	char *err = NULL;
	int rc = sqlite3_exec(t->db, sql, NULL, NULL, &err);
	if (rc != SQLITE_OK) {
		ING_LOG_RL(ING_LOG_WARN, COMP, "%s: %s", t->path, err ? err : sqlite3_errstr(rc));
		sqlite3_free(err);
		return (rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED ? -EBUSY : -EIO;
	}
	return 0;
}

static int64_t query_int(struct tier_db *t, const char *sql)
{
	sqlite3_stmt *st = NULL;
	int64_t v = -1;

	if (sqlite3_prepare_v2(t->db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return v;
}

/* a statement that returns no row; 0 or -errno (logged) */
static int step_done(struct tier_db *t, sqlite3_stmt *st, const char *what)
{
	int rc = sqlite3_step(st);
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	if (rc == SQLITE_DONE || rc == SQLITE_ROW)
		return 0;
	ING_LOG_RL(ING_LOG_WARN, COMP, "%s: %s: %s", t->path, what, sqlite3_errmsg(t->db));
	return (rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED ? -EBUSY : -EIO;
}

static int prep(struct tier_db *t, const char *sql, sqlite3_stmt **st)
{
	if (sqlite3_prepare_v3(t->db, sql, -1, SQLITE_PREPARE_PERSISTENT, st, NULL) != SQLITE_OK) {
		ING_ERR(COMP, "%s: prepare '%s': %s", t->path, sql, sqlite3_errmsg(t->db));
		return -EIO;
	}
	return 0;
}

void tier_db_close(struct tier_db *t)
{
	if (!t)
		return;
	sqlite3_stmt *all[] = { t->st_due, t->st_mark_both, t->st_dequeue, t->st_failed, t->st_cand,
				t->st_deleted, t->st_unmark, t->st_enqueue, t->st_backlog, t->st_usage,
				t->st_next_due, t->st_oldest_both, t->st_loc, t->st_queued, t->st_begin,
				t->st_commit, t->st_rollback };
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		sqlite3_finalize(all[i]);
	if (t->db)
		sqlite3_close(t->db);
	free(t);
}

/* Inside a BEGIN IMMEDIATE: the statements (NULL ones skipped), then COMMIT; ROLLBACK on
 * an error. 0 or -errno. */
static int txn_run(struct tier_db *t, const char *const *sql, size_t n)
{
	int rc = 0;
	for (size_t i = 0; i < n && rc == 0; i++)
		if (sql[i])
			rc = exec(t, sql[i]);
	if (rc == 0)
		rc = exec(t, "COMMIT;");
	if (rc && !sqlite3_get_autocommit(t->db))
		(void)exec(t, "ROLLBACK;");
	return rc;
}

#define NSQL(a) (sizeof(a) / sizeof((a)[0]))

/* The tier's own tables, an outbox of the first form migrated (one transaction). */
static int tables(struct tier_db *t)
{
	int rc = exec(t, "BEGIN IMMEDIATE;");
	if (rc)
		return rc;
	bool old = query_int(t, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name ="
			     " 'tier_outbox' AND sql NOT LIKE '%AUTOINCREMENT%'") > 0;
	bool trig = query_int(t, "SELECT count(*) FROM sqlite_master WHERE type = 'trigger' AND name ="
			      " 'tier_outbox_frames'") > 0;
	const char *const sql[] = { old ? outbox_migrate : NULL, old && trig ? outbox_trigger : NULL,
				    OUTBOX_TABLE("tier_outbox"), outbox_next_index, usage_table, meta_table };
	rc = txn_run(t, sql, NSQL(sql));
	if (rc)
		return rc;
	if (old)
		ING_INFO(COMP, "%s: tier outbox migrated to a key that is never reused (%lld queued frames "
			 "kept)", t->path, (long long)query_int(t, "SELECT count(*) FROM tier_outbox"));
	return 0;
}

struct tier_db *tier_db_open(const char *catalog_path)
{
	struct tier_db *t = calloc(1, sizeof(*t));
	if (!t) {
		ING_ERR(COMP, "out of memory");
		return NULL;
	}
	snprintf(t->path, sizeof(t->path), "%s", catalog_path);
	int rc = sqlite3_open_v2(catalog_path, &t->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL);
	if (rc != SQLITE_OK) {
		ING_ERR(COMP, "open %s: %s", catalog_path, t->db ? sqlite3_errmsg(t->db) : sqlite3_errstr(rc));
		goto fail;
	}
	sqlite3_busy_timeout(t->db, BUSY_TIMEOUT_MS);
	if (exec(t, "PRAGMA journal_mode=WAL;") < 0 || exec(t, "PRAGMA synchronous=NORMAL;") < 0 ||
	    tables(t) < 0)
		goto fail;
	if (query_int(t, "SELECT count(*) FROM pragma_table_info('frames') WHERE name='location'") <= 0) {
		ING_ERR(COMP, "%s: no frames table of schema 3 (location column)", catalog_path);
		goto fail;
	}
	if (prep(t, "SELECT seq, " OUTBOX_COLS ", attempts FROM tier_outbox WHERE next_ms <= ?1"
		    " ORDER BY seq LIMIT ?2", &t->st_due) ||
	    /* only the frame this outbox row queued: one deleted meanwhile (ingest-catalog
	     * prune) and stored again has another row, under another seq, and other bytes
	     * maybe; its own upload verifies it */
	    prep(t, "UPDATE frames SET location = 'both', object_md5 = ?3, tiered_ns = ?4"
		    " WHERE wafer_id = ?1 AND frame_id = ?2 AND location = 'local'"
		    " AND EXISTS (SELECT 1 FROM tier_outbox WHERE seq = ?5)", &t->st_mark_both) ||
	    prep(t, "DELETE FROM tier_outbox WHERE seq = ?1", &t->st_dequeue) ||
	    prep(t, "UPDATE tier_outbox SET attempts = attempts + 1, next_ms = ?2, last_error = ?3"
		    " WHERE seq = ?1", &t->st_failed) ||
	    prep(t, "SELECT wafer_id, frame_id, length, crc32c, path, object_md5, durable_ns, tiered_ns"
		    " FROM frames WHERE location = 'both' AND durable_ns <= ?1 ORDER BY durable_ns LIMIT ?2",
		 &t->st_cand) ||
	    prep(t, "UPDATE frames SET location = 'tiered', local_deleted_ns = ?3"
		    " WHERE wafer_id = ?1 AND frame_id = ?2 AND location = 'both'", &t->st_deleted) ||
	    prep(t, "UPDATE frames SET location = 'local', object_md5 = NULL, tiered_ns = NULL,"
		    " local_deleted_ns = NULL WHERE wafer_id = ?1 AND frame_id = ?2", &t->st_unmark) ||
	    prep(t, "INSERT OR IGNORE INTO tier_outbox (" OUTBOX_COLS ", requeued) SELECT wafer_id,"
		    " frame_id, length, crc32c, path, " NOW_MS ", 1 FROM frames WHERE wafer_id = ?1"
		    " AND frame_id = ?2", &t->st_enqueue) ||
	    prep(t, "SELECT count(*), total(length), coalesce(min(queued_ms), 0),"
		    " coalesce(min(next_ms), 0) FROM tier_outbox", &t->st_backlog) ||
	    prep(t, "SELECT location, frames, bytes FROM tier_usage", &t->st_usage) ||
	    prep(t, "SELECT coalesce(min(next_ms), 0) FROM tier_outbox WHERE next_ms > ?1", &t->st_next_due) ||
	    prep(t, "SELECT min(durable_ns) FROM frames WHERE location = 'both'", &t->st_oldest_both) ||
	    prep(t, "SELECT location FROM frames WHERE wafer_id = ?1 AND frame_id = ?2", &t->st_loc) ||
	    prep(t, "SELECT count(*) FROM tier_outbox WHERE seq = ?1", &t->st_queued) ||
	    prep(t, "BEGIN IMMEDIATE", &t->st_begin) || prep(t, "COMMIT", &t->st_commit) ||
	    prep(t, "ROLLBACK", &t->st_rollback))
		goto fail;
	return t;
fail:
	tier_db_close(t);
	return NULL;
}

int tier_db_enable(struct tier_db *t)
{
	int rc = exec(t, "BEGIN IMMEDIATE;");
	if (rc)
		return rc;
	bool fresh = query_int(t, "SELECT count(*) FROM sqlite_master WHERE type='trigger'"
			       " AND name='tier_outbox_frames'") == 0;
	int64_t dropped = 0, queued = 0;
	rc = exec(t, outbox_orphans);
	if (rc == 0) {
		dropped = sqlite3_changes64(t->db);
		rc = exec(t, outbox_backfill);
		queued = sqlite3_changes64(t->db);
	}
	if (rc) {
		(void)exec(t, "ROLLBACK;");
		return rc;
	}
	const char *const sql[] = { fresh ? outbox_trigger : NULL, usage_triggers, usage_recount,
				    meta_digest_since };
	rc = txn_run(t, sql, NSQL(sql));
	if (rc)
		return rc;
	if (fresh)
		ING_INFO(COMP, "%s: tier outbox trigger created; %lld frames queued for the object store",
			 t->path, (long long)query_int(t, "SELECT count(*) FROM tier_outbox"));
	else if (queued)
		ING_WARN(COMP, "%s: %lld local frames were not queued for the object store: queued now",
			 t->path, (long long)queued);
	if (dropped)
		ING_INFO(COMP, "%s: %lld queued uploads of frames no longer in the catalog (deleted by "
			 "ingest-catalog prune or by hand) dropped", t->path, (long long)dropped);
	return 0;
}

int tier_db_disable(struct tier_db *t)
{
	if (query_int(t, "SELECT count(*) FROM sqlite_master WHERE type='trigger'"
			 " AND name IN ('tier_outbox_frames', 'tier_usage_insert')") <= 0)
		return 0;
	ING_INFO(COMP, "%s: no object store configured (--tier): tier outbox trigger dropped "
		 "(%lld queued frames kept for the next run with --tier)", t->path,
		 (long long)query_int(t, "SELECT count(*) FROM tier_outbox"));
	/* the location counts too: nothing reads them without a store, and the next run with
	 * one counts them again from the catalog */
	return exec(t, "BEGIN IMMEDIATE; DROP TRIGGER IF EXISTS tier_outbox_frames;"
		    " DROP TRIGGER IF EXISTS tier_usage_insert; DROP TRIGGER IF EXISTS tier_usage_move;"
		    " DROP TRIGGER IF EXISTS tier_usage_delete; COMMIT;");
}

int64_t tier_db_digest_since(struct tier_db *t)
{
	int64_t v = query_int(t, "SELECT value FROM tier_meta WHERE key = 'store_digest_since_ns'");
	return v > 0 ? v : INT64_MAX;
}

static void copy_text(char *dst, size_t n, const unsigned char *s)
{
	snprintf(dst, n, "%s", s ? (const char *)s : "");
}

int tier_db_due(struct tier_db *t, int64_t now_ms, struct tier_row *rows, unsigned max)
{
	sqlite3_stmt *st = t->st_due;
	int n = 0, rc = SQLITE_DONE;

	sqlite3_bind_int64(st, 1, now_ms);
	sqlite3_bind_int64(st, 2, max);
	while ((unsigned)n < max && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct tier_row *r = &rows[n++];
		memset(r, 0, sizeof(*r));
		r->seq = sqlite3_column_int64(st, 0);
		copy_text(r->wafer_id, sizeof(r->wafer_id), sqlite3_column_text(st, 1));
		copy_text(r->frame_id, sizeof(r->frame_id), sqlite3_column_text(st, 2));
		r->length = (uint64_t)sqlite3_column_int64(st, 3);
		r->crc32c = (uint32_t)sqlite3_column_int64(st, 4);
		copy_text(r->path, sizeof(r->path), sqlite3_column_text(st, 5));
		r->queued_ms = sqlite3_column_int64(st, 6);
		r->attempts = (unsigned)sqlite3_column_int(st, 7);
		rc = SQLITE_DONE;
	}
	if (rc != SQLITE_DONE && rc != SQLITE_ROW) {
		ING_LOG_RL(ING_LOG_WARN, COMP, "%s: outbox read: %s", t->path, sqlite3_errmsg(t->db));
		n = -EIO;
	}
	sqlite3_reset(st);
	return n;
}

static void bind_key(sqlite3_stmt *st, const struct tier_row *r)
{
	sqlite3_bind_text(st, 1, r->wafer_id, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, r->frame_id, -1, SQLITE_STATIC);
}

static int txn_end(struct tier_db *t, int rc)
{
	if (rc == 0)
		rc = step_done(t, t->st_commit, "COMMIT");
	if (rc && !sqlite3_get_autocommit(t->db))
		(void)step_done(t, t->st_rollback, "ROLLBACK");
	return rc;
}

int tier_db_uploaded(struct tier_db *t, const struct tier_row *r, const char *etag,
		     int64_t tiered_ns)
{
	int rc = step_done(t, t->st_begin, "BEGIN");
	if (rc)
		return rc;
	bind_key(t->st_mark_both, r);
	sqlite3_bind_text(t->st_mark_both, 3, etag, -1, SQLITE_STATIC);
	sqlite3_bind_int64(t->st_mark_both, 4, tiered_ns);
	sqlite3_bind_int64(t->st_mark_both, 5, r->seq);
	rc = step_done(t, t->st_mark_both, "mark both");
	if (rc == 0) {
		sqlite3_bind_int64(t->st_dequeue, 1, r->seq);
		rc = step_done(t, t->st_dequeue, "dequeue");
	}
	return txn_end(t, rc);
}

int tier_db_dequeue(struct tier_db *t, const struct tier_row *r)
{
	sqlite3_bind_int64(t->st_dequeue, 1, r->seq);
	return step_done(t, t->st_dequeue, "dequeue");
}

int tier_db_location(struct tier_db *t, const struct tier_row *r)
{
	bind_key(t->st_loc, r);
	int rc = sqlite3_step(t->st_loc), ret;
	if (rc == SQLITE_ROW)
		ret = ing_location_parse((const char *)sqlite3_column_text(t->st_loc, 0));
	else if (rc == SQLITE_DONE)
		ret = -ENOENT;
	else {
		ING_LOG_RL(ING_LOG_WARN, COMP, "%s: location of %s/%s: %s", t->path, r->wafer_id,
			   r->frame_id, sqlite3_errmsg(t->db));
		ret = -EIO;
	}
	sqlite3_reset(t->st_loc);
	sqlite3_clear_bindings(t->st_loc);
	return ret < 0 && ret != -ENOENT && ret != -EIO ? -EIO : ret;
}

int tier_db_failed(struct tier_db *t, const struct tier_row *r, int64_t next_ms, const char *why)
{
	sqlite3_bind_int64(t->st_failed, 1, r->seq);
	sqlite3_bind_int64(t->st_failed, 2, next_ms);
	sqlite3_bind_text(t->st_failed, 3, why, -1, SQLITE_STATIC);
	return step_done(t, t->st_failed, "record a failed attempt");
}

int tier_db_candidates(struct tier_db *t, int64_t cutoff_ns, struct tier_row *rows, unsigned max)
{
	sqlite3_stmt *st = t->st_cand;
	int n = 0, rc = SQLITE_DONE;

	sqlite3_bind_int64(st, 1, cutoff_ns);
	sqlite3_bind_int64(st, 2, max);
	while ((unsigned)n < max && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct tier_row *r = &rows[n++];
		memset(r, 0, sizeof(*r));
		copy_text(r->wafer_id, sizeof(r->wafer_id), sqlite3_column_text(st, 0));
		copy_text(r->frame_id, sizeof(r->frame_id), sqlite3_column_text(st, 1));
		r->length = (uint64_t)sqlite3_column_int64(st, 2);
		r->crc32c = (uint32_t)sqlite3_column_int64(st, 3);
		copy_text(r->path, sizeof(r->path), sqlite3_column_text(st, 4));
		copy_text(r->object_md5, sizeof(r->object_md5), sqlite3_column_text(st, 5));
		r->durable_ns = sqlite3_column_int64(st, 6);
		r->tiered_ns = sqlite3_column_int64(st, 7);
		rc = SQLITE_DONE;
	}
	if (rc != SQLITE_DONE && rc != SQLITE_ROW) {
		ING_LOG_RL(ING_LOG_WARN, COMP, "%s: deletion candidates: %s", t->path, sqlite3_errmsg(t->db));
		n = -EIO;
	}
	sqlite3_reset(st);
	return n;
}

int tier_db_local_deleted(struct tier_db *t, const struct tier_row *r, int64_t deleted_ns)
{
	bind_key(t->st_deleted, r);
	sqlite3_bind_int64(t->st_deleted, 3, deleted_ns);
	return step_done(t, t->st_deleted, "mark tiered");
}

int tier_db_requeue(struct tier_db *t, const struct tier_row *r)
{
	int rc = step_done(t, t->st_begin, "BEGIN");
	if (rc)
		return rc;
	bind_key(t->st_unmark, r);
	rc = step_done(t, t->st_unmark, "mark local");
	if (rc == 0) {
		bind_key(t->st_enqueue, r);
		rc = step_done(t, t->st_enqueue, "queue again");
	}
	return txn_end(t, rc);
}

int tier_db_backlog(struct tier_db *t, struct tier_backlog *b)
{
	int rc = sqlite3_step(t->st_backlog), ret = 0;
	if (rc == SQLITE_ROW) {
		b->frames = (uint64_t)sqlite3_column_int64(t->st_backlog, 0);
		b->bytes = (uint64_t)sqlite3_column_double(t->st_backlog, 1);
		b->oldest_ms = sqlite3_column_int64(t->st_backlog, 2);
		b->next_due_ms = sqlite3_column_int64(t->st_backlog, 3);
	} else {
		ret = -EIO;
	}
	sqlite3_reset(t->st_backlog);
	return ret;
}

int tier_db_usage(struct tier_db *t, struct tier_census *c)
{
	sqlite3_stmt *st = t->st_usage;
	int rc;
	memset(c, 0, sizeof(*c));
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		int l = ing_location_parse((const char *)sqlite3_column_text(st, 0));
		int64_t f = sqlite3_column_int64(st, 1), b = sqlite3_column_int64(st, 2);
		if (l < 0)
			continue;
		c->frames[l] = f > 0 ? (uint64_t)f : 0;
		c->bytes[l] = b > 0 ? (uint64_t)b : 0;
	}
	sqlite3_reset(st);
	if (rc != SQLITE_DONE) {
		ING_LOG_RL(ING_LOG_WARN, COMP, "%s: location counts: %s", t->path, sqlite3_errmsg(t->db));
		return -EIO;
	}
	return 0;
}

/* one integer of a one-row query (NULL: dflt) */
static int64_t step_int(struct tier_db *t, sqlite3_stmt *st, int64_t dflt, const char *what)
{
	int64_t v = dflt;
	int rc = sqlite3_step(st);
	if (rc == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL)
		v = sqlite3_column_int64(st, 0);
	else if (rc != SQLITE_ROW && rc != SQLITE_DONE)
		ING_LOG_RL(ING_LOG_WARN, COMP, "%s: %s: %s", t->path, what, sqlite3_errmsg(t->db));
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	return v;
}

int tier_db_queued(struct tier_db *t, const struct tier_row *r)
{
	sqlite3_bind_int64(t->st_queued, 1, r->seq);
	int64_t n = step_int(t, t->st_queued, -1, "queued upload");
	return n < 0 ? -EIO : n > 0;
}

int64_t tier_db_next_due(struct tier_db *t, int64_t now_ms)
{
	sqlite3_bind_int64(t->st_next_due, 1, now_ms);
	return step_int(t, t->st_next_due, 0, "next due row");
}

int64_t tier_db_oldest_both(struct tier_db *t)
{
	return step_int(t, t->st_oldest_both, INT64_MAX, "oldest verified copy");
}
