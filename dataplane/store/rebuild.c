/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rebuild.c - catalog recovery: a new catalog.db from the frame files (store.h,
 * ing_catalog_rebuild). The frame files are the truth: a file appears only by an atomic
 * rename after its fdatasync, and its path names its wafer and frame. What a file cannot
 * say (a shortened name's id, the producer's timestamp, the CRC-32C acknowledged back
 * then) comes from whatever rows the damaged catalog still gives, read first into a
 * scratch database keyed by path, so that memory stays bounded however many frames there
 * are.
 *
 * Steps: lock the data dir; salvage; count the files (for the progress line); write every
 * row into catalog.db.rebuilding in transactions of ING_REBUILD_BATCH; then the salvaged
 * rows of frames in the object store that have no file (the tier deleted it, on purpose:
 * their bytes are in the store, dataplane/tier/); close it (SQLite checkpoints its WAL),
 * fsync; rename the old catalog (and its -wal/-shm) to catalog.db.damaged-<time>, the new
 * one to catalog.db; fsync the directory. The tier's outbox is not carried over: ingestd
 * --tier queues every frame still local again (a frame already in the store is found
 * there, same bytes, and not uploaded twice).
 */
#include "dataplane/store/store.h"
#include "common/clock.h"
#include "common/crc32c.h"
#include "common/ident.h"
#include "common/log.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#define COMP "catalog"
#define ING_REBUILD_BATCH 256u
#define READ_CHUNK (4u << 20)
#define PROGRESS_NS 2000000000ull

struct rb {
	const char *dir;
	struct ing_catalog_rebuild_report *r;
	sqlite3 *salvage;            /* scratch: the old catalog's readable rows, by path */
	sqlite3_stmt *st_find, *st_used;
	struct ing_catalog *cat;     /* the new catalog */
	struct ing_catalog_row *rows;
	unsigned nrows;
	uint8_t *buf;
	uint64_t total, last_ns;
	void (*progress)(void *, uint64_t, uint64_t, uint64_t);
	void *parg;
};

static int fsync_path(const char *path, bool dir)
{
	int fd = open(path, (dir ? O_RDONLY | O_DIRECTORY : O_RDWR) | O_CLOEXEC);
	int rc = 0;
	if (fd < 0)
		return -errno;
	if (fsync(fd) != 0)
		rc = -errno;
	close(fd);
	return rc;
}

/* The damaged catalog's readable rows into a scratch database, until its first error. */
static int salvage(struct rb *b, const char *old, const char *scratch)
{
	sqlite3 *db = NULL;
	sqlite3_stmt *rd = NULL, *wr = NULL;
	int rc;

	unlink(scratch);
	if (sqlite3_open_v2(scratch, &b->salvage, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) ||
	    sqlite3_exec(b->salvage, "PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF;"
			 "CREATE TABLE old (path TEXT PRIMARY KEY, wafer_id TEXT, frame_id TEXT,"
			 " timestamp INTEGER, crc32c INTEGER, transport INTEGER, received_ns INTEGER,"
			 " durable_ns INTEGER, location TEXT, object_md5 TEXT, tiered_ns INTEGER,"
			 " local_deleted_ns INTEGER, length INTEGER, used INTEGER DEFAULT 0) WITHOUT ROWID;",
			 NULL, NULL, NULL)) {
		ING_ERR(COMP, "scratch database %s: %s", scratch, sqlite3_errmsg(b->salvage));
		return -EIO;
	}
	if (sqlite3_prepare_v2(b->salvage, "SELECT wafer_id, frame_id, timestamp, crc32c, transport,"
			       " received_ns, durable_ns, location, object_md5, tiered_ns FROM old"
			       " WHERE path = ?1", -1, &b->st_find, NULL) ||
	    sqlite3_prepare_v2(b->salvage, "UPDATE old SET used = 1 WHERE path = ?1", -1, &b->st_used,
			       NULL)) {
		ING_ERR(COMP, "scratch database: %s", sqlite3_errmsg(b->salvage));
		return -EIO;
	}
	if (access(old, F_OK) != 0)
		return 0;
	rc = sqlite3_open_v2(old, &db, SQLITE_OPEN_READONLY, NULL);
	/* schema 3 (the tier's columns), else a schema 2 catalog: every frame local */
	if (rc == SQLITE_OK &&
	    sqlite3_prepare_v2(db, "SELECT path, wafer_id, frame_id, timestamp, crc32c, transport,"
			       " received_ns, durable_ns, location, object_md5, tiered_ns, local_deleted_ns,"
			       " length FROM frames", -1, &rd, NULL) != SQLITE_OK)
		rc = sqlite3_prepare_v2(db, "SELECT path, wafer_id, frame_id, timestamp, crc32c, transport,"
					" received_ns, durable_ns, 'local', NULL, NULL, NULL, length FROM frames",
					-1, &rd, NULL);
	if (rc != SQLITE_OK) {
		ING_INFO(COMP, "%s gives no rows (%s): every id comes from its file's name", old,
			 db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
		sqlite3_close(db);
		return 0;
	}
	sqlite3_exec(b->salvage, "BEGIN", NULL, NULL, NULL);
	sqlite3_prepare_v2(b->salvage, "INSERT OR IGNORE INTO old VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,"
			   "?10,?11,?12,?13,0)", -1, &wr, NULL);
	while ((rc = sqlite3_step(rd)) == SQLITE_ROW) {
		for (int i = 0; i < 13; i++)
			sqlite3_bind_value(wr, i + 1, sqlite3_column_value(rd, i));
		if (sqlite3_step(wr) == SQLITE_DONE)
			b->r->salvaged_rows++;
		sqlite3_reset(wr);
	}
	if (rc != SQLITE_DONE)
		ING_INFO(COMP, "%s: %llu rows read before: %s", old,
			 (unsigned long long)b->r->salvaged_rows, sqlite3_errmsg(db));
	sqlite3_finalize(wr);
	sqlite3_finalize(rd);
	sqlite3_close(db);
	sqlite3_exec(b->salvage, "COMMIT", NULL, NULL, NULL);
	return 0;
}

/* the old catalog's row for rel, into row (ids, timestamp, transport, times); false: none */
static bool old_row(struct rb *b, const char *rel, struct ing_catalog_row *row, uint32_t *crc)
{
	sqlite3_stmt *st = b->st_find;
	bool found = false;
	sqlite3_bind_text(st, 1, rel, -1, SQLITE_STATIC);
	if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0) && sqlite3_column_text(st, 1)) {
		snprintf(row->wafer_id, sizeof(row->wafer_id), "%s", sqlite3_column_text(st, 0));
		snprintf(row->frame_id, sizeof(row->frame_id), "%s", sqlite3_column_text(st, 1));
		row->timestamp = sqlite3_column_int64(st, 2);
		*crc = (uint32_t)sqlite3_column_int64(st, 3);
		row->transport = (uint8_t)sqlite3_column_int(st, 4);
		row->received_ns = sqlite3_column_int64(st, 5);
		row->durable_ns = sqlite3_column_int64(st, 6);
		/* a file is here: its frame is local, and both when its object was verified */
		if (ing_location_parse((const char *)sqlite3_column_text(st, 7)) > ING_LOC_LOCAL &&
		    sqlite3_column_text(st, 8)) {
			row->location = ING_LOC_BOTH;
			snprintf(row->object_md5, sizeof(row->object_md5), "%s", sqlite3_column_text(st, 8));
			row->tiered_ns = sqlite3_column_int64(st, 9);
		}
		found = true;
		sqlite3_bind_text(b->st_used, 1, rel, -1, SQLITE_STATIC);
		(void)sqlite3_step(b->st_used);
		sqlite3_reset(b->st_used);
	}
	sqlite3_reset(st);
	return found;
}

static int flush_rows(struct rb *b);

/*
 * The old rows of frames in the object store whose file is not here (no file was found
 * for them): deleted by the tier on purpose ('tiered'), or gone since ('both'): their
 * bytes are in the store, so their rows stay, as tiered.
 */
static int tiered_rows(struct rb *b)
{
	sqlite3_stmt *st = NULL;
	int rc = 0;
	if (sqlite3_prepare_v2(b->salvage, "SELECT path, wafer_id, frame_id, timestamp, crc32c, transport,"
			       " received_ns, durable_ns, location, object_md5, tiered_ns, local_deleted_ns,"
			       " length FROM old WHERE used = 0 AND location IN ('both', 'tiered')"
			       " AND object_md5 IS NOT NULL", -1, &st, NULL))
		return 0;   /* the old catalog gave no tier columns */
	while (rc == 0 && sqlite3_step(st) == SQLITE_ROW) {
		struct ing_catalog_row *row = &b->rows[b->nrows];
		memset(row, 0, sizeof(*row));
		snprintf(row->path, sizeof(row->path), "%s", sqlite3_column_text(st, 0));
		snprintf(row->wafer_id, sizeof(row->wafer_id), "%s", sqlite3_column_text(st, 1));
		snprintf(row->frame_id, sizeof(row->frame_id), "%s", sqlite3_column_text(st, 2));
		row->timestamp = sqlite3_column_int64(st, 3);
		row->crc32c = (uint32_t)sqlite3_column_int64(st, 4);
		row->transport = (uint8_t)sqlite3_column_int(st, 5);
		row->received_ns = sqlite3_column_int64(st, 6);
		row->durable_ns = sqlite3_column_int64(st, 7);
		bool was_both = ing_location_parse((const char *)sqlite3_column_text(st, 8)) == ING_LOC_BOTH;
		row->location = ING_LOC_TIERED;
		snprintf(row->object_md5, sizeof(row->object_md5), "%s", sqlite3_column_text(st, 9));
		row->tiered_ns = sqlite3_column_int64(st, 10);
		row->local_deleted_ns = sqlite3_column_int64(st, 11);
		row->length = (uint64_t)sqlite3_column_int64(st, 12);
		if (was_both)
			ING_WARN(COMP, "%s/%s: its local copy is gone; its object was verified in the store: "
				 "catalogued as tiered (ingest-verify --tier checks it)", b->dir, row->path);
		b->r->tiered++;
		if (++b->nrows == ING_REBUILD_BATCH)
			rc = flush_rows(b);
	}
	sqlite3_finalize(st);
	if (b->r->tiered)
		ING_INFO(COMP, "%llu frames whose bytes are only in the object store: rows kept from the old "
			 "catalog", (unsigned long long)b->r->tiered);
	return rc;
}

static int flush_rows(struct rb *b)
{
	if (!b->nrows)
		return 0;
	int rc = ing_catalog_insert(b->cat, b->rows, b->nrows);
	if (rc) {
		ING_ERR(COMP, "writing rows to the new catalog: %s", strerror(-rc));
		return rc;
	}
	b->r->catalogued += b->nrows;
	b->nrows = 0;
	return 0;
}

/* CRC-32C and length of a file; -errno */
static int file_crc(struct rb *b, const char *path, uint32_t *crc, uint64_t *len, struct stat *st)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;
	if (fd < 0)
		return -errno;
	if (fstat(fd, st) != 0) {
		int rc = -errno;
		close(fd);
		return rc;
	}
	*crc = 0;
	*len = 0;
	while ((n = read(fd, b->buf, READ_CHUNK)) > 0) {
		*crc = ing_crc32c(*crc, b->buf, (size_t)n);
		*len += (uint64_t)n;
	}
	int rc = n < 0 ? -errno : 0;
	close(fd);
	return rc;
}

static bool frame_file(const char *name)
{
	size_t n = strlen(name);
	return n > 6 && !strcmp(name + n - 6, ".frame");
}

static void tick(struct rb *b, bool force)
{
	uint64_t now = ing_now_ns();
	if (!b->progress || (!force && now - b->last_ns < PROGRESS_NS))
		return;
	b->last_ns = now;
	b->progress(b->parg, b->r->files, b->total, b->r->bytes);
}

/* One file: its row, or counted and logged as why not. */
static int one_file(struct rb *b, const char *wdir, const char *fname)
{
	struct ing_catalog_row *row = &b->rows[b->nrows];
	char path[PATH_MAX], base[ING_ID_FILE_NAME_MAX + 8], wafer[ING_ID_MAX + 1], frame[ING_ID_MAX + 1];
	uint32_t crc = 0, old_crc = 0;
	uint64_t len = 0;
	struct stat st;

	memset(row, 0, sizeof(*row));
	if ((size_t)snprintf(row->path, sizeof(row->path), "frames/%s/%s", wdir, fname) >= sizeof(row->path) ||
	    (size_t)snprintf(path, sizeof(path), "%s/%s", b->dir, row->path) >= sizeof(path)) {
		b->r->files++;
		b->r->not_catalogued++;
		ING_WARN(COMP, "%s/frames/%s/%s: not catalogued: path too long", b->dir, wdir, fname);
		return 0;
	}
	snprintf(base, sizeof(base), "%.*s", (int)(strlen(fname) - 6), fname);
	b->r->files++;
	bool have_old = old_row(b, row->path, row, &old_crc);
	int wn = ing_id_from_file_name(wafer, sizeof(wafer), wdir);
	int fn = ing_id_from_file_name(frame, sizeof(frame), base);
	if (wn == 0 && fn == 0) {
		snprintf(row->wafer_id, sizeof(row->wafer_id), "%s", wafer);
		snprintf(row->frame_id, sizeof(row->frame_id), "%s", frame);
		b->r->ids_from_names++;
	} else if ((wn == -ENOENT || fn == -ENOENT) && wn != -EINVAL && fn != -EINVAL && have_old) {
		b->r->ids_from_old++;   /* a shortened name: the old catalog knew its id */
	} else {
		b->r->not_catalogued++;
		ING_WARN(COMP, "%s: not catalogued: %s", path,
			 wn == -EINVAL || fn == -EINVAL ? "not a name ingestd writes (a stray file?)" :
			 "its name is shortened (id above 200 bytes escaped) and the old catalog does "
			 "not have it: look the frame up in a backup of the catalog");
		return 0;
	}
	/* the row's own path must be what ingestd would write for these ids */
	char want[sizeof(row->path)];
	if (ing_store_rel_path(want, sizeof(want), row->wafer_id, row->frame_id) || strcmp(want, row->path)) {
		b->r->not_catalogued++;
		ING_WARN(COMP, "%s: not catalogued: the old catalog's ids for it name another file", path);
		return 0;
	}
	int rc = file_crc(b, path, &crc, &len, &st);
	if (rc) {
		b->r->unreadable++;
		ING_ERR(COMP, "%s: not catalogued: %s", path, strerror(-rc));
		return 0;
	}
	row->length = len;
	row->crc32c = crc;
	if (have_old && old_crc != crc) {
		/* the acknowledged CRC stays: ingest-verify and a re-send then see the damage */
		b->r->crc_differs++;
		row->crc32c = old_crc;
		ING_WARN(COMP, "%s: CRC-32C 0x%08x, the old catalog had 0x%08x: the file was damaged "
			 "after it was stored; the old value is kept", path, crc, old_crc);
	}
	if (!have_old) {
		int64_t mt = (int64_t)st.st_mtim.tv_sec * 1000000000ll + st.st_mtim.tv_nsec;
		row->received_ns = mt;
		row->durable_ns = mt;
	}
	b->r->bytes += len;
	if (++b->nrows == ING_REBUILD_BATCH)
		return flush_rows(b);
	return 0;
}

/* Every frames/<wafer>/<name>.frame in readdir order; count_only: just count them. */
static int walk(struct rb *b, bool count_only)
{
	char frames[PATH_MAX], sub[PATH_MAX];
	struct dirent *de, *fe;
	DIR *d, *w;
	int rc = 0;

	snprintf(frames, sizeof(frames), "%s/frames", b->dir);
	d = opendir(frames);
	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while (rc == 0 && (de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;   /* ".", "..": ingestd's names never start with a dot otherwise */
		if ((size_t)snprintf(sub, sizeof(sub), "%s/%s", frames, de->d_name) >= sizeof(sub))
			continue;
		w = opendir(sub);
		if (!w)
			continue;
		while (rc == 0 && (fe = readdir(w))) {
			if (!frame_file(fe->d_name))
				continue;   /* temp files of a dead writer, anything else */
			if (count_only)
				b->total++;
			else
				rc = one_file(b, de->d_name, fe->d_name);
			if (!count_only)
				tick(b, false);
		}
		closedir(w);
	}
	closedir(d);
	return rc;
}

int64_t ing_store_count_frames(const char *data_dir)
{
	struct rb b = { .dir = data_dir };
	int rc = walk(&b, true);
	return rc ? rc : (int64_t)b.total;
}

int ing_catalog_rebuild(const char *data_dir, struct ing_catalog_rebuild_report *r,
			void (*progress)(void *arg, uint64_t done, uint64_t total, uint64_t bytes),
			void *arg)
{
	char old[PATH_MAX], tmp[PATH_MAX], scratch[PATH_MAX], kept[PATH_MAX], a[PATH_MAX + 8],
		bb[PATH_MAX + 8], holder[64], stamp[32];
	struct rb b = { .dir = data_dir, .r = r, .progress = progress, .parg = arg };
	struct stat dst;
	int lock, rc;

	memset(r, 0, sizeof(*r));
	if (stat(data_dir, &dst) != 0) {
		rc = -errno;
		ING_ERR(COMP, "data dir %s: %s", data_dir, strerror(-rc));
		return rc;
	}
	if (!S_ISDIR(dst.st_mode)) {
		ING_ERR(COMP, "data dir %s is not a directory", data_dir);
		return -ENOTDIR;
	}
	lock = ing_store_lock(data_dir, holder, sizeof(holder));
	if (lock == -EBUSY) {
		ING_ERR(COMP, "data dir %s is in use by %s: stop it first (systemctl stop ingestd)",
			data_dir, holder);
		return lock;
	}
	if (lock < 0) {
		ING_ERR(COMP, "data dir %s: cannot lock it: %s", data_dir, strerror(-lock));
		return lock;
	}
	snprintf(old, sizeof(old), "%s/catalog.db", data_dir);
	snprintf(tmp, sizeof(tmp), "%s/catalog.db.rebuilding", data_dir);
	snprintf(scratch, sizeof(scratch), "%s/catalog.db.salvage", data_dir);
	for (const char *sfx = ""; sfx; sfx = !*sfx ? "-wal" : !strcmp(sfx, "-wal") ? "-shm" : NULL) {
		snprintf(a, sizeof(a), "%s%s", tmp, sfx);
		unlink(a);   /* an earlier rebuild that was interrupted */
	}
	b.rows = calloc(ING_REBUILD_BATCH, sizeof(*b.rows));
	b.buf = malloc(READ_CHUNK);
	if (!b.rows || !b.buf) {
		rc = -ENOMEM;
		ING_ERR(COMP, "out of memory");
		goto out;
	}
	rc = salvage(&b, old, scratch);
	if (rc)
		goto out;
	rc = walk(&b, true);
	if (rc) {
		ING_ERR(COMP, "%s/frames: %s", data_dir, strerror(-rc));
		goto out;
	}
	b.cat = ing_catalog_open(tmp);
	if (!b.cat) {
		rc = -EIO;
		goto out;
	}
	rc = walk(&b, false);
	if (rc == 0)
		rc = tiered_rows(&b);
	if (rc == 0)
		rc = flush_rows(&b);
	tick(&b, true);
	ing_catalog_close(b.cat);   /* the last connection: SQLite checkpoints and drops the WAL */
	b.cat = NULL;
	if (rc)
		goto out;
	/* the new file as the data dir's owner, so that the service user can open it */
	if (geteuid() == 0 && chown(tmp, dst.st_uid, dst.st_gid) != 0)
		ING_WARN(COMP, "%s: chown to the data dir's owner: %s", tmp, strerror(errno));
	rc = fsync_path(tmp, false);
	if (rc) {
		ING_ERR(COMP, "fsync %s: %s", tmp, strerror(-rc));
		goto out;
	}
	time_t now = time(NULL);
	struct tm tm;
	localtime_r(&now, &tm);
	strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", &tm);
	snprintf(kept, sizeof(kept), "%s/catalog.db.damaged-%s", data_dir, stamp);
	if (access(old, F_OK) == 0) {
		for (const char *sfx = ""; sfx; sfx = !*sfx ? "-wal" : !strcmp(sfx, "-wal") ? "-shm" : NULL) {
			snprintf(a, sizeof(a), "%s%s", old, sfx);
			snprintf(bb, sizeof(bb), "%s%s", kept, sfx);
			if (rename(a, bb) != 0 && errno != ENOENT) {
				rc = -errno;
				ING_ERR(COMP, "keeping %s as %s: %s", a, bb, strerror(-rc));
				goto out;
			}
		}
		if ((size_t)snprintf(r->kept_as, sizeof(r->kept_as), "%s", kept) >= sizeof(r->kept_as))
			snprintf(r->kept_as, sizeof(r->kept_as), "catalog.db.damaged-%s", stamp);
	}
	if (rename(tmp, old) != 0) {
		rc = -errno;
		ING_ERR(COMP, "renaming %s to %s: %s", tmp, old, strerror(-rc));
		goto out;
	}
	rc = fsync_path(data_dir, true);
	if (rc)
		ING_ERR(COMP, "fsync of %s: %s", data_dir, strerror(-rc));
out:
	if (b.cat)
		ing_catalog_close(b.cat);
	sqlite3_finalize(b.st_find);
	sqlite3_finalize(b.st_used);
	if (b.salvage)
		sqlite3_close(b.salvage);
	unlink(scratch);
	free(b.rows);
	free(b.buf);
	close(lock);
	return rc;
}
