/* SPDX-License-Identifier: Apache-2.0 */
/*
 * catalog.c - the frame catalog in SQLite (WAL, synchronous=FULL). One handle per thread
 * (opened without SQLite's own mutexes); several handles on one file serialise their write
 * transactions through SQLite's locks plus a busy timeout. Frame ids are u64 stored as the
 * same bit pattern in an INTEGER PRIMARY KEY.
 */
#include "dataplane/dataplane_internal.h"
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

static const char schema[] =
	"CREATE TABLE IF NOT EXISTS frames ("
	" frame_id INTEGER PRIMARY KEY,"
	" wafer_id TEXT NOT NULL,"
	" timestamp INTEGER,"
	" length INTEGER NOT NULL,"
	" crc32c INTEGER NOT NULL,"
	" path TEXT NOT NULL,"
	" transport INTEGER,"
	" received_ns INTEGER,"
	" durable_ns INTEGER);"
	"CREATE INDEX IF NOT EXISTS frames_wafer ON frames(wafer_id);";

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
	    exec(c, schema) < 0)
		goto fail;
	if (prep(c, "SELECT wafer_id, timestamp, length, crc32c, path, transport, received_ns,"
		    " durable_ns FROM frames WHERE frame_id = ?1", &c->st_lookup) < 0 ||
	    prep(c, "INSERT INTO frames (frame_id, wafer_id, timestamp, length, crc32c, path,"
		    " transport, received_ns, durable_ns) VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9)",
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

int ing_catalog_lookup(struct ing_catalog *c, uint64_t frame_id, struct ing_catalog_row *row)
{
	sqlite3_stmt *st = c->st_lookup;
	int rc, ret;

	sqlite3_bind_int64(st, 1, (sqlite3_int64)frame_id);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		if (row) {
			memset(row, 0, sizeof(*row));
			row->frame_id = frame_id;
			copy_text(row->wafer_id, sizeof(row->wafer_id), sqlite3_column_text(st, 0));
			row->timestamp = sqlite3_column_int64(st, 1);
			row->length = (uint64_t)sqlite3_column_int64(st, 2);
			row->crc32c = (uint32_t)sqlite3_column_int64(st, 3);
			copy_text(row->path, sizeof(row->path), sqlite3_column_text(st, 4));
			row->transport = (uint8_t)sqlite3_column_int(st, 5);
			row->received_ns = sqlite3_column_int64(st, 6);
			row->durable_ns = sqlite3_column_int64(st, 7);
		}
		ret = 0;
	} else if (rc == SQLITE_DONE) {
		ret = -ENOENT;
	} else {
		ING_LOG_RL(ING_LOG_ERR, COMP, "%s: lookup %llu: %s", c->path,
			   (unsigned long long)frame_id, sqlite3_errmsg(c->db));
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
	rc = step_simple(c->st_begin);
	if (rc) {
		char b[256];
		ING_LOG_RL(ING_LOG_ERR, COMP, "%s: BEGIN: %s", c->path,
			   why(c, rc, sqlite3_errmsg(c->db), b, sizeof(b)));
		return map_rc_db(c, rc) == -ENOSPC ? -ENOSPC : -EIO;
	}
	for (unsigned i = 0; i < n; i++) {
		const struct ing_catalog_row *r = &rows[i];
		sqlite3_bind_int64(st, 1, (sqlite3_int64)r->frame_id);
		sqlite3_bind_text(st, 2, r->wafer_id, -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 3, r->timestamp);
		sqlite3_bind_int64(st, 4, (sqlite3_int64)r->length);
		sqlite3_bind_int64(st, 5, (sqlite3_int64)r->crc32c);
		sqlite3_bind_text(st, 6, r->path, -1, SQLITE_STATIC);
		sqlite3_bind_int(st, 7, r->transport);
		sqlite3_bind_int64(st, 8, r->received_ns);
		sqlite3_bind_int64(st, 9, r->durable_ns);
		rc = sqlite3_step(st);
		sqlite3_reset(st);
		sqlite3_clear_bindings(st);
		if (rc != SQLITE_DONE) {
			char b[256];
			ret = map_rc_db(c, rc);
			if (ret != -EEXIST)
				ING_LOG_RL(ING_LOG_ERR, COMP, "%s: insert of frame %llu: %s", c->path,
					   (unsigned long long)r->frame_id,
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
		ING_LOG_RL(ING_LOG_ERR, COMP, "%s: COMMIT of %u rows (frames %llu..): %s", c->path, n,
			   (unsigned long long)rows[0].frame_id,
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
