/* SPDX-License-Identifier: Apache-2.0 */
/*
 * catalog.c - the frame catalog in SQLite (WAL, synchronous=FULL). One handle per thread
 * (opened without SQLite's own mutexes); several handles on one file serialise their write
 * transactions through SQLite's locks plus a busy timeout. A frame is (wafer_id, frame_id),
 * both TEXT as the producer sent them, and where its bytes are (location: local, both,
 * tiered; schema 3, PRAGMA user_version = 3). Older schemas are migrated on open, each in
 * one transaction: schema 1 had INTEGER frame ids (migrate_v1), schema 2 no tier columns
 * (migrate_v2).
 */
#include "dataplane/store/store.h"
#include "common/log.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sqlite3.h>

#define COMP "catalog"
#define BUSY_TIMEOUT_MS 10000

struct ing_catalog {
	sqlite3 *db;
	sqlite3_stmt *st_lookup, *st_insert, *st_begin, *st_commit, *st_rollback, *st_count;
	char path[256];
};

#define SCHEMA_VERSION 3
#define SET_VERSION "PRAGMA user_version = 3;"

/* The tier columns (schema 3), as migrate_v2 adds them to a schema-2 table. */
#define TIER_COLUMN_LOCATION \
	"location TEXT NOT NULL DEFAULT 'local' CHECK (location IN ('local', 'both', 'tiered'))"
#define TIER_COLUMN_MD5 "object_md5 TEXT"
#define TIER_COLUMN_TIERED "tiered_ns INTEGER"
#define TIER_COLUMN_DELETED "local_deleted_ns INTEGER"

#define FRAMES_COLUMNS \
	" wafer_id TEXT NOT NULL," \
	" frame_id TEXT NOT NULL," \
	" timestamp INTEGER," \
	" length INTEGER NOT NULL," \
	" crc32c INTEGER NOT NULL," \
	" path TEXT NOT NULL," \
	" transport INTEGER," \
	" received_ns INTEGER," \
	" durable_ns INTEGER," \
	" " TIER_COLUMN_LOCATION "," \
	" " TIER_COLUMN_MD5 "," \
	" " TIER_COLUMN_TIERED "," \
	" " TIER_COLUMN_DELETED "," \
	" PRIMARY KEY (wafer_id, frame_id)) WITHOUT ROWID;"

/* the local copies the retention may delete, oldest first (dataplane/tier/): only rows
 * whose object is verified and whose local copy is still there are in it */
#define FRAMES_BOTH_INDEX \
	"CREATE INDEX IF NOT EXISTS frames_both ON frames (durable_ns) WHERE location = 'both';"

static const char schema[] =
	"CREATE TABLE IF NOT EXISTS frames (" FRAMES_COLUMNS
	FRAMES_BOTH_INDEX
	SET_VERSION;

/* what a lookup reads, after the key (a reader of a schema 1 or 2 file: constants) */
#define LOOKUP_COLUMNS "timestamp, length, crc32c, path, transport, received_ns, durable_ns"
#define LOOKUP_TIER_COLUMNS ", location, object_md5, tiered_ns, local_deleted_ns"
#define LOOKUP_TIER_NONE ", 'local', NULL, NULL, NULL"

const char *ing_location_name(enum ing_location l)
{
	switch (l) {
	case ING_LOC_LOCAL: return "local";
	case ING_LOC_BOTH: return "both";
	case ING_LOC_TIERED: return "tiered";
	}
	return NULL;
}

int ing_location_parse(const char *s)
{
	if (!s)
		return -1;
	for (int l = ING_LOC_LOCAL; l <= ING_LOC_TIERED; l++)
		if (!strcmp(s, ing_location_name((enum ing_location)l)))
			return l;
	return -1;
}

/*
 * SQLite's message plus the OS error behind it, if any: "disk I/O error" alone does not say
 * that the disk is full or read-only.
 */
static const char *why(struct ing_catalog *c, int rc, const char *sqlmsg, char *buf, size_t len)
{
	/* SQLite records the OS errno only for I/O and open errors; otherwise it is stale */
	bool os = (rc & 0xff) == SQLITE_IOERR || (rc & 0xff) == SQLITE_CANTOPEN;
	int se = os && c->db ? sqlite3_system_errno(c->db) : 0;

	if (se)
		snprintf(buf, len, "%s (%s)", sqlmsg, strerror(se));
	else
		snprintf(buf, len, "%s", sqlmsg);
	return buf;
}

static int map_rc(int rc)
{
	switch (rc & 0xff) {
	case SQLITE_OK:
	case SQLITE_DONE:
	case SQLITE_ROW:
		return 0;
	case SQLITE_CONSTRAINT:
		return -EEXIST;
	case SQLITE_FULL:
		return -ENOSPC;
	case SQLITE_BUSY:
	case SQLITE_LOCKED:
		return -EBUSY;
	case SQLITE_NOMEM:
		return -ENOMEM;
	default:
		return -EIO;
	}
}

/* map_rc with the OS error behind it: an I/O error from a full disk is -ENOSPC (retryable) */
static int map_rc_db(struct ing_catalog *c, int rc)
{
	bool os = (rc & 0xff) == SQLITE_IOERR || (rc & 0xff) == SQLITE_CANTOPEN;
	int se = os && c->db ? sqlite3_system_errno(c->db) : 0;

	if ((rc & 0xff) == SQLITE_IOERR && (se == ENOSPC || se == EDQUOT))
		return -ENOSPC;
	if ((rc & 0xff) == SQLITE_READONLY || ((rc & 0xff) == SQLITE_CANTOPEN && se == EROFS))
		return -EROFS;
	return map_rc(rc);
}

/*
 * A catalog SQLite cannot read (not a database, a corrupt page) says what to do: the frame
 * files are the truth, and ingest-catalog rebuilds the catalog from them. True (after
 * logging; on the data path at most once a second) when rc is such an error.
 */
static bool damaged(const struct ing_catalog *c, int rc, const char *sqlmsg, bool data_path)
{
	char dir[sizeof(c->path)];
	char *slash;

	if ((rc & 0xff) != SQLITE_NOTADB && (rc & 0xff) != SQLITE_CORRUPT)
		return false;
	snprintf(dir, sizeof(dir), "%s", c->path);
	slash = strrchr(dir, '/');
	if (slash)
		*slash = '\0';
	else
		snprintf(dir, sizeof(dir), ".");
#define DAMAGED_FMT "%s is damaged (%s): stop ingestd, then rebuild it from the frame files: " \
	"ingest-catalog rebuild --data-dir %s (docs/OPERATIONS.md, Catalog recovery)"
	if (data_path)
		ING_LOG_RL(ING_LOG_ERR, COMP, DAMAGED_FMT, c->path, sqlmsg, dir);
	else
		ING_ERR(COMP, DAMAGED_FMT, c->path, sqlmsg, dir);
#undef DAMAGED_FMT
	return true;
}

static int prep(struct ing_catalog *c, const char *sql, sqlite3_stmt **st)
{
	int rc = sqlite3_prepare_v3(c->db, sql, -1, SQLITE_PREPARE_PERSISTENT, st, NULL);
	if (rc != SQLITE_OK) {
		ING_ERR(COMP, "%s: prepare '%s': %s", c->path, sql, sqlite3_errmsg(c->db));
		return -EIO;
	}
	return 0;
}

static int exec(struct ing_catalog *c, const char *sql)
{
	char *err = NULL, b[256];
	int rc = sqlite3_exec(c->db, sql, NULL, NULL, &err);
	if (rc != SQLITE_OK && damaged(c, rc, err ? err : sqlite3_errstr(rc), false)) {
		sqlite3_free(err);
		return -EBADMSG;
	}
	if (rc != SQLITE_OK) {
		ING_ERR(COMP, "%s: '%s': %s", c->path, sql,
			why(c, rc, err ? err : sqlite3_errstr(rc), b, sizeof(b)));
		sqlite3_free(err);
		return map_rc_db(c, rc);
	}
	return 0;
}

static int sync_parent(struct ing_catalog *c, const char *path)
{
	char dir[PATH_MAX];
	char *slash;
	int fd, rc = 0;

	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else if (slash == dir)
		dir[1] = 0;
	else
		*slash = 0;
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fsync(fd) < 0)
		rc = -errno;
	if (fd >= 0)
		close(fd);
	if (rc)
		ING_ERR(COMP, "%s: fsync of its directory %s: %s", c->path, dir, strerror(-rc));
	return rc;
}

static int64_t query_int(struct ing_catalog *c, const char *sql)
{
	sqlite3_stmt *st = NULL;
	int64_t v = -1;

	if (sqlite3_prepare_v2(c->db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return v;
}

static int64_t int_id_columns(struct ing_catalog *c)
{
	return query_int(c, "SELECT count(*) FROM pragma_table_info('frames')"
			 " WHERE name='frame_id' AND upper(type)='INTEGER'");
}

/*
 * Schema 1 (frame_id INTEGER PRIMARY KEY, ids unique across wafers) to schema 3 (the
 * frames table as it is now, tier columns included: every frame local), in one
 * transaction: a crash leaves either catalog whole. Ids become their decimal text (the
 * file names were already the decimal id, so paths stay valid); u64 ids above INT64_MAX
 * were stored as the same bit pattern and come back unsigned.
 */
static int migrate_v1(struct ing_catalog *c)
{
	sqlite3_stmt *rd = NULL, *wr = NULL;
	int64_t n = 0;
	/* every persistence worker opens its own handle at start: the first to get the
	 * write lock migrates, the others find schema 3 once they hold it */
	int rc = exec(c, "BEGIN IMMEDIATE;");
	if (rc == 0 && int_id_columns(c) <= 0)
		return exec(c, "COMMIT;");
	if (rc == 0)
		rc = exec(c, "ALTER TABLE frames RENAME TO frames_v1;"
		      "DROP INDEX IF EXISTS frames_wafer;"
		      "CREATE TABLE frames (" FRAMES_COLUMNS);
	if (rc == 0 &&
	    (sqlite3_prepare_v2(c->db, "SELECT frame_id, wafer_id, timestamp, length, crc32c, path,"
				" transport, received_ns, durable_ns FROM frames_v1", -1, &rd, NULL) != SQLITE_OK ||
	     sqlite3_prepare_v2(c->db, "INSERT INTO frames (frame_id, wafer_id, timestamp, length,"
				" crc32c, path, transport, received_ns, durable_ns)"
				" VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9)", -1, &wr, NULL) != SQLITE_OK))
		rc = -EIO;
	while (rc == 0) {
		int st = sqlite3_step(rd);
		if (st == SQLITE_DONE)
			break;
		if (st != SQLITE_ROW) {
			rc = -EIO;
			break;
		}
		char id[24];
		snprintf(id, sizeof(id), "%llu", (unsigned long long)(uint64_t)sqlite3_column_int64(rd, 0));
		sqlite3_bind_text(wr, 1, id, -1, SQLITE_TRANSIENT);
		for (int i = 1; i < 9; i++)
			sqlite3_bind_value(wr, i + 1, sqlite3_column_value(rd, i));
		if (sqlite3_step(wr) != SQLITE_DONE)
			rc = -EIO;
		sqlite3_reset(wr);
		n++;
	}
	sqlite3_finalize(rd);
	sqlite3_finalize(wr);
	if (rc == 0)
		rc = exec(c, "DROP TABLE frames_v1;" FRAMES_BOTH_INDEX SET_VERSION "COMMIT;");
	if (rc < 0) {
		if (!sqlite3_get_autocommit(c->db))
			(void)exec(c, "ROLLBACK;");
		ING_ERR(COMP, "%s: migrating the catalog from numeric frame ids failed (%s); it is unchanged",
			c->path, sqlite3_errmsg(c->db));
		return rc;
	}
	ING_INFO(COMP, "%s: catalog migrated to string frame ids (schema 1 -> %d, %lld rows)", c->path,
		 SCHEMA_VERSION, (long long)n);
	return 0;
}

static int64_t has_column(struct ing_catalog *c, const char *name)
{
	char sql[160];
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM pragma_table_info('frames') WHERE name='%s'", name);
	return query_int(c, sql);
}

/*
 * Schema 2 to 3: the tier columns, in one transaction (ADD COLUMN rewrites no row: the
 * defaults are read for rows written before). Every existing frame is 'local'.
 */
static int migrate_v2(struct ing_catalog *c)
{
	/* as in migrate_v1: the first worker to hold the write lock migrates */
	int rc = exec(c, "BEGIN IMMEDIATE;");
	if (rc == 0 && has_column(c, "location") > 0)
		return exec(c, "COMMIT;");
	if (rc == 0)
		rc = exec(c, "ALTER TABLE frames ADD COLUMN " TIER_COLUMN_LOCATION ";"
			  "ALTER TABLE frames ADD COLUMN " TIER_COLUMN_MD5 ";"
			  "ALTER TABLE frames ADD COLUMN " TIER_COLUMN_TIERED ";"
			  "ALTER TABLE frames ADD COLUMN " TIER_COLUMN_DELETED ";"
			  FRAMES_BOTH_INDEX SET_VERSION "COMMIT;");
	if (rc < 0) {
		char msg[256];
		snprintf(msg, sizeof(msg), "%s", sqlite3_errmsg(c->db));   /* before ROLLBACK resets it */
		if (!sqlite3_get_autocommit(c->db))
			(void)exec(c, "ROLLBACK;");
		ING_ERR(COMP, "%s: adding the tier columns to the catalog failed (%s); it is unchanged",
			c->path, msg);
		return rc;
	}
	ING_INFO(COMP, "%s: catalog migrated to schema %d (tier columns: every frame is local)", c->path,
		 SCHEMA_VERSION);
	return 0;
}

/* Bring the file to SCHEMA_VERSION, or say why not. */
static int schema_init(struct ing_catalog *c)
{
	int64_t ver = query_int(c, "PRAGMA user_version");
	int64_t has = query_int(c, "SELECT count(*) FROM sqlite_master WHERE type='table' AND name='frames'");
	int64_t int_ids = int_id_columns(c);

	if (ver > SCHEMA_VERSION) {
		ING_ERR(COMP, "%s: catalog schema %lld is newer than this ingestd (%d); refusing to open it",
			c->path, (long long)ver, SCHEMA_VERSION);
		return -EPROTO;
	}
	if (has > 0 && int_ids > 0)
		return migrate_v1(c);
	if (has > 0 && has_column(c, "location") == 0) {
		int rc = migrate_v2(c);
		if (rc < 0)
			return rc;
	}
	return exec(c, schema);
}

/* A reader's check: the frames table exists and its schema is one this code reads. */
static int schema_check_ro(struct ing_catalog *c)
{
	int64_t ver = query_int(c, "PRAGMA user_version");
	int64_t has = query_int(c, "SELECT count(*) FROM sqlite_master WHERE type='table' AND name='frames'");

	if (ver < 0 || has < 0) {
		if (damaged(c, sqlite3_errcode(c->db), sqlite3_errmsg(c->db), false))
			return -EBADMSG;
		ING_ERR(COMP, "%s: not readable as a catalog: %s", c->path, sqlite3_errmsg(c->db));
		return -EIO;
	}
	if (ver > SCHEMA_VERSION) {
		ING_ERR(COMP, "%s: catalog schema %lld is newer than this program (%d)", c->path,
			(long long)ver, SCHEMA_VERSION);
		return -EPROTO;
	}
	if (has == 0) {
		ING_ERR(COMP, "%s: no frames table (not a catalog)", c->path);
		return -ENOENT;
	}
	return 0;
}

struct ing_catalog *ing_catalog_open_ro(const char *path)
{
	struct ing_catalog *c;
	int rc;

	if (!path) {
		ING_ERR(COMP, "no catalog path");
		return NULL;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		ING_ERR(COMP, "out of memory");
		return NULL;
	}
	snprintf(c->path, sizeof(c->path), "%s", path);
	rc = sqlite3_open_v2(path, &c->db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, NULL);
	if (rc != SQLITE_OK) {
		char b[256];
		ING_ERR(COMP, "open %s: %s", path,
			c->db ? why(c, rc, sqlite3_errmsg(c->db), b, sizeof(b)) : sqlite3_errstr(rc));
		goto fail;
	}
	sqlite3_extended_result_codes(c->db, 1);
	sqlite3_busy_timeout(c->db, BUSY_TIMEOUT_MS);
	if (schema_check_ro(c) < 0)
		goto fail;
	/* the same lookup as the writer's: a schema-1 file (INTEGER ids) matches a decimal id
	 * through the column's affinity */
	if (prep(c, has_column(c, "location") > 0 ?
		    "SELECT " LOOKUP_COLUMNS LOOKUP_TIER_COLUMNS " FROM frames WHERE wafer_id = ?1 AND frame_id = ?2" :
		    "SELECT " LOOKUP_COLUMNS LOOKUP_TIER_NONE " FROM frames WHERE wafer_id = ?1 AND frame_id = ?2",
		 &c->st_lookup) < 0 ||
	    prep(c, "SELECT count(*) FROM frames", &c->st_count) < 0)
		goto fail;
	return c;
fail:
	ing_catalog_close(c);
	return NULL;
}

struct ing_catalog *ing_catalog_open(const char *path)
{
	struct ing_catalog *c;
	int rc;

	if (!path) {
		ING_ERR(COMP, "no catalog path");
		return NULL;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		ING_ERR(COMP, "out of memory");
		return NULL;
	}
	snprintf(c->path, sizeof(c->path), "%s", path);
	bool created = access(path, F_OK) != 0;
	rc = sqlite3_open_v2(path, &c->db,
			     SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
	if (rc != SQLITE_OK) {
		char b[256];
		ING_ERR(COMP, "open %s: %s", path,
			c->db ? why(c, rc, sqlite3_errmsg(c->db), b, sizeof(b)) : sqlite3_errstr(rc));
		goto fail;
	}
	sqlite3_extended_result_codes(c->db, 1);
	sqlite3_busy_timeout(c->db, BUSY_TIMEOUT_MS);
	if (exec(c, "PRAGMA journal_mode=WAL;") < 0 || exec(c, "PRAGMA synchronous=FULL;") < 0 ||
	    schema_init(c) < 0)
		goto fail;
	if (prep(c, "SELECT " LOOKUP_COLUMNS LOOKUP_TIER_COLUMNS " FROM frames"
		    " WHERE wafer_id = ?1 AND frame_id = ?2", &c->st_lookup) < 0 ||
	    prep(c, "INSERT INTO frames (frame_id, wafer_id, timestamp, length, crc32c, path,"
		    " transport, received_ns, durable_ns, location, object_md5, tiered_ns,"
		    " local_deleted_ns) VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13)",
		 &c->st_insert) < 0 ||
	    prep(c, "BEGIN IMMEDIATE", &c->st_begin) < 0 || prep(c, "COMMIT", &c->st_commit) < 0 ||
	    prep(c, "ROLLBACK", &c->st_rollback) < 0 ||
	    prep(c, "SELECT count(*) FROM frames", &c->st_count) < 0)
		goto fail;
	/*
	 * SQLite syncs the directory when it creates the -wal file, not when it creates the
	 * database file itself: without this, a power loss soon after the first start could
	 * take catalog.db (and with it every row in the WAL) away.
	 */
	if (created && sync_parent(c, path) < 0)
		goto fail;
	return c;
fail:
	ing_catalog_close(c);
	return NULL;
}

void ing_catalog_close(struct ing_catalog *c)
{
	if (!c)
		return;
	sqlite3_finalize(c->st_lookup);
	sqlite3_finalize(c->st_insert);
	sqlite3_finalize(c->st_begin);
	sqlite3_finalize(c->st_commit);
	sqlite3_finalize(c->st_rollback);
	sqlite3_finalize(c->st_count);
	if (c->db && sqlite3_close(c->db) != SQLITE_OK)
		ING_WARN(COMP, "close %s: %s", c->path, sqlite3_errmsg(c->db));
	free(c);
}

static void copy_text(char *dst, size_t n, const unsigned char *s)
{
	snprintf(dst, n, "%s", s ? (const char *)s : "");
}

int ing_catalog_lookup(struct ing_catalog *c, const char *wafer_id, const char *frame_id,
		       struct ing_catalog_row *row)
{
	sqlite3_stmt *st = c->st_lookup;
	int rc, ret;

	sqlite3_bind_text(st, 1, wafer_id, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, frame_id, -1, SQLITE_STATIC);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		if (row) {
			memset(row, 0, sizeof(*row));
			copy_text(row->frame_id, sizeof(row->frame_id), (const unsigned char *)frame_id);
			copy_text(row->wafer_id, sizeof(row->wafer_id), (const unsigned char *)wafer_id);
			row->timestamp = sqlite3_column_int64(st, 0);
			row->length = (uint64_t)sqlite3_column_int64(st, 1);
			row->crc32c = (uint32_t)sqlite3_column_int64(st, 2);
			copy_text(row->path, sizeof(row->path), sqlite3_column_text(st, 3));
			row->transport = (uint8_t)sqlite3_column_int(st, 4);
			row->received_ns = sqlite3_column_int64(st, 5);
			row->durable_ns = sqlite3_column_int64(st, 6);
			int loc = ing_location_parse((const char *)sqlite3_column_text(st, 7));
			row->location = (uint8_t)(loc < 0 ? ING_LOC_LOCAL : loc);
			copy_text(row->object_md5, sizeof(row->object_md5), sqlite3_column_text(st, 8));
			row->tiered_ns = sqlite3_column_int64(st, 9);
			row->local_deleted_ns = sqlite3_column_int64(st, 10);
		}
		ret = 0;
	} else if (rc == SQLITE_DONE) {
		ret = -ENOENT;
	} else {
		ING_LOG_RL(ING_LOG_ERR, COMP, "%s: lookup %s/%s: %s", c->path, wafer_id, frame_id,
			   sqlite3_errmsg(c->db));
		ret = -EIO;
	}
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	return ret;
}

static int step_simple(sqlite3_stmt *st)
{
	int rc = sqlite3_step(st);
	sqlite3_reset(st);
	return rc == SQLITE_DONE || rc == SQLITE_ROW ? 0 : rc;
}

int ing_catalog_insert(struct ing_catalog *c, const struct ing_catalog_row *rows, unsigned n)
{
	sqlite3_stmt *st = c->st_insert;
	int rc, ret = 0;

	if (!n)
		return 0;
	if (!st)
		return -EROFS;   /* opened by ing_catalog_open_ro */
	rc = step_simple(c->st_begin);
	if (rc) {
		char b[256];
		ING_LOG_RL(ING_LOG_ERR, COMP, "%s: BEGIN: %s", c->path,
			   why(c, rc, sqlite3_errmsg(c->db), b, sizeof(b)));
		return map_rc_db(c, rc) == -ENOSPC ? -ENOSPC : -EIO;
	}
	for (unsigned i = 0; i < n; i++) {
		const struct ing_catalog_row *r = &rows[i];
		sqlite3_bind_text(st, 1, r->frame_id, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 2, r->wafer_id, -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 3, r->timestamp);
		sqlite3_bind_int64(st, 4, (sqlite3_int64)r->length);
		sqlite3_bind_int64(st, 5, (sqlite3_int64)r->crc32c);
		sqlite3_bind_text(st, 6, r->path, -1, SQLITE_STATIC);
		sqlite3_bind_int(st, 7, r->transport);
		sqlite3_bind_int64(st, 8, r->received_ns);
		sqlite3_bind_int64(st, 9, r->durable_ns);
		const char *loc = ing_location_name((enum ing_location)r->location);
		sqlite3_bind_text(st, 10, loc ? loc : "local", -1, SQLITE_STATIC);
		if (r->object_md5[0])
			sqlite3_bind_text(st, 11, r->object_md5, -1, SQLITE_STATIC);
		if (r->tiered_ns)
			sqlite3_bind_int64(st, 12, r->tiered_ns);
		if (r->local_deleted_ns)
			sqlite3_bind_int64(st, 13, r->local_deleted_ns);
		rc = sqlite3_step(st);
		sqlite3_reset(st);
		sqlite3_clear_bindings(st);
		if (rc != SQLITE_DONE) {
			char b[256];
			ret = map_rc_db(c, rc);
			if (ret != -EEXIST && damaged(c, rc, sqlite3_errmsg(c->db), true))
				break;
			if (ret != -EEXIST)
				ING_LOG_RL(ING_LOG_ERR, COMP, "%s: insert of frame %s/%s: %s", c->path,
					   r->wafer_id, r->frame_id,
					   why(c, rc, sqlite3_errmsg(c->db), b, sizeof(b)));
			break;
		}
	}
	if (!ret) {
		char b[256];
		rc = step_simple(c->st_commit);
		if (!rc)
			return 0;
		ret = map_rc_db(c, rc) == -EEXIST ? -EIO : map_rc_db(c, rc);
		ING_LOG_RL(ING_LOG_ERR, COMP, "%s: COMMIT of %u rows (frames %s/%s..): %s", c->path, n,
			   rows[0].wafer_id, rows[0].frame_id,
			   why(c, rc, sqlite3_errmsg(c->db), b, sizeof(b)));
	}
	/* SQLite may already have rolled back (SQLITE_FULL); ROLLBACK then just fails */
	if (!sqlite3_get_autocommit(c->db))
		(void)step_simple(c->st_rollback);
	return ret == -EEXIST || ret == -ENOSPC ? ret : -EIO;
}

int64_t ing_catalog_count(struct ing_catalog *c)
{
	int64_t n = -EIO;

	if (sqlite3_step(c->st_count) == SQLITE_ROW)
		n = sqlite3_column_int64(c->st_count, 0);
	sqlite3_reset(c->st_count);
	return n;
}

int ing_catalog_quick_check(struct ing_catalog *c, char *why, size_t whylen)
{
	sqlite3_stmt *st = NULL;
	int rc = sqlite3_prepare_v2(c->db, "PRAGMA quick_check(5)", -1, &st, NULL);
	size_t n = 0;

	why[0] = '\0';
	if (rc == SQLITE_OK) {
		while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
			const char *t = (const char *)sqlite3_column_text(st, 0);
			if (t && strcmp(t, "ok") && n < whylen)
				n += (size_t)snprintf(why + n, whylen - n, "%s%s", n ? "; " : "", t);
		}
	}
	if (rc != SQLITE_DONE && n == 0)
		snprintf(why, whylen, "%s", sqlite3_errmsg(c->db));
	sqlite3_finalize(st);
	return why[0] ? -EBADMSG : 0;
}
