/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ingest-catalog: the catalog of a data dir, for when something went wrong with it, and
 * retention without an object store tier.
 *   check    SQLite's quick_check, and the rows against the frame files (exit 1: damaged
 *            or not in step, with the fix)
 *   rebuild  a new catalog.db from the frame files (dataplane/store/rebuild.c): ids from
 *            the file names, CRC-32C recomputed; the damaged file is kept beside it
 *   prune    delete the frames DURABLE longer ago than --older-than (of --wafer W only):
 *            row and file, crash-safe through a journal (below); --dry-run says what
 * rebuild refuses a data dir an ingestd is running on; prune works beside it. Exit status:
 * 0 done / consistent, 1 not (what and why printed), 2 usage error.
 */
#include "common/json.h"
#include "common/cli.h"
#include "common/clock.h"
#include "common/ident.h"
#include "common/log.h"
#include "common/parse.h"
#include "control/node.h"
#include "dataplane/store/store.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#define PROG "ingest-catalog"
#define PRUNE_JOURNAL "prune.journal"   /* an unfinished prune batch (prune, below) */

struct cat_cfg {
	const char *data_dir, *config;
	bool json;
	/* prune */
	uint64_t older_than_ms;
	bool older_than_set, dry_run;
	const char *wafer;
};
#define C struct cat_cfg

static void cfg_init(void *p)
{
	C *c = p;
	memset(c, 0, sizeof(*c));
}

/* --older-than DURATION: a unit is required (30d, 12h, 2h30m); up to 100 years */
static int set_older_than(const struct ing_opt *d, void *cfg, const char *v, char *why, size_t whylen)
{
	C *c = cfg;
	uint64_t ms;
	(void)d;
	if (ing_parse_duration_ms(v, 0, 36500ull * 86400000ull, &ms)) {
		snprintf(why, whylen, "'%.64s' is not an age with a unit (30d, 12h, 2h30m; at most 36500d)", v);
		return -EINVAL;
	}
	c->older_than_ms = ms;
	c->older_than_set = true;
	return 0;
}

static const struct ing_opt opts[] = {
	ING_OPT_GROUP_("The data dir"),
	ING_OPT_PATH_(C, "data-dir", data_dir, "DIR", "ingestd's data dir (catalog.db and frames/)"),
	{ "config", "FILE", ING_OPT_PATH, offsetof(C, config), 0, 0, 0, NULL, NULL,
	  "ingestd's config file: its data-dir (a --data-dir given here wins)", NULL, 0 },
	ING_OPT_GROUP_("prune"),
	ING_OPT_CUSTOM_(C, "older-than", older_than_ms, set_older_than, "AGE",
			"delete the frames DURABLE longer ago than AGE (30d, 12h)"),
	ING_OPT_STR_(C, "wafer", wafer, "ID", "only this wafer's frames"),
	ING_OPT_BOOL_(C, "dry-run", dry_run, "say what would be deleted, delete nothing"),
	ING_OPT_GROUP_("Output"),
	ING_OPT_BOOL_(C, "json", json, "the result as one JSON object"),
	ING_OPT_LOG_LEVEL_ENTRY(C, "info"),
};

static const struct ing_cli cli = {
	.prog = PROG,
	.synopsis = "check|rebuild|prune (--data-dir DIR | --config FILE) [--older-than AGE "
		    "[--wafer ID] [--dry-run]] [--json]",
	.summary = "check, rebuild or prune the catalog and frames of an h3000 ingest node's data dir",
	.about = "check: SQLite's quick_check of <data-dir>/catalog.db, and its rows counted against\n"
		 "  the frame files; the fix when they disagree.\n"
		 "rebuild: a new catalog.db from the frame files: every frames/<wafer>/<frame>.frame\n"
		 "  becomes a row, its ids decoded from the escaped names, its CRC-32C recomputed,\n"
		 "  its timestamps and the acknowledged CRC taken from the old catalog's readable rows\n"
		 "  (shortened names of ids above 200 bytes need them). The damaged catalog is kept\n"
		 "  as catalog.db.damaged-<time>. Stop ingestd first: the data dir is locked.\n"
		 "prune: delete every frame (catalog row and file) that became DURABLE more than\n"
		 "  --older-than ago, of --wafer only if given; --dry-run counts them. Runs beside\n"
		 "  a running ingestd (cron, a systemd timer). Crash-safe: each batch is written to\n"
		 "  <data-dir>/prune.journal before its rows are deleted, and a file is deleted\n"
		 "  only once its row is; an interrupted prune is finished by the next one.\n",
	.opts = opts,
	.nopts = sizeof(opts) / sizeof(opts[0]),
	.max_args = 1,
	.init = cfg_init,
	.cfg_size = sizeof(C),
	.notes = "Retention: ingest-catalog prune --config /etc/h3000/ingestd.conf --older-than 30d\n"
		 "(run it as the service user: runuser -u h3000 -- ...).\n"
		 "A catalog SQLite cannot read makes ingestd stop at start with 'catalog.db is\n"
		 "damaged (...): ... ingest-catalog rebuild --data-dir DIR'. After a rebuild,\n"
		 "start ingestd again; a fleet node exports the rebuilt rows once more (the fleet\n"
		 "catalog ignores the ones it has). docs/OPERATIONS.md, Catalog recovery.\n",
	.exit_status = "  0  check: consistent; rebuild: every frame file catalogued; prune: done\n"
		       "  1  check: damaged or not in step with the files; rebuild: failed, or some\n"
		       "     files not catalogued or with another CRC than acknowledged (listed);\n"
		       "     prune: failed (what was deleted is consistent, run it again)\n"
		       "  2  usage error\n",
	.commands = "check rebuild prune",
};

static int read_ingestd_config(C *c)
{
	struct ing_ingestd_opts io;

	ing_ingestd_opts_init(&io);
	if (ing_ingestd_opts_read_config_as(PROG, c->config, &io))
		return ING_EXIT_USAGE;
	if (!c->data_dir)
		c->data_dir = io.data_dir;
	return 0;
}

static void progress(void *arg, uint64_t done, uint64_t total, uint64_t bytes)
{
	(void)arg;
	fprintf(stderr, "\r%s: %" PRIu64 " of %" PRIu64 " frames, %.1f MiB read", PROG, done, total,
		(double)bytes / (1 << 20));
	if (done == total)
		fputc('\n', stderr);
}

static int prune_journal_before_rebuild(const C *c);

static int rebuild(const C *c)
{
	struct ing_catalog_rebuild_report r;
	if (prune_journal_before_rebuild(c))
		return ING_EXIT_FAILURE;
	int rc = ing_catalog_rebuild(c->data_dir, &r, isatty(STDERR_FILENO) && !c->json ? progress : NULL,
				     NULL);
	bool complete = rc == 0 && r.catalogued == r.files && !r.crc_differs;
	if (c->json) {
		printf("{\"dataDir\":");
		ing_json_str(stdout, c->data_dir);
		printf(",\"ok\":%s,\"error\":", complete ? "true" : "false");
		ing_json_str(stdout, rc ? strerror(-rc) : "");
		printf(",\"files\":%" PRIu64 ",\"catalogued\":%" PRIu64 ",\"idsFromNames\":%" PRIu64
		       ",\"idsFromOldCatalog\":%" PRIu64 ",\"salvagedRows\":%" PRIu64 ",\"notCatalogued\":%" PRIu64
		       ",\"crcDiffers\":%" PRIu64 ",\"unreadable\":%" PRIu64 ",\"bytes\":%" PRIu64 ",\"keptAs\":",
		       r.files, r.catalogued, r.ids_from_names, r.ids_from_old, r.salvaged_rows,
		       r.not_catalogued, r.crc_differs, r.unreadable, r.bytes);
		ing_json_str(stdout, r.kept_as);
		printf("}\n");
		return complete ? ING_EXIT_OK : ING_EXIT_FAILURE;
	}
	if (rc) {
		fprintf(stderr, "%s: rebuild of %s/catalog.db failed: %s (the old catalog is untouched)\n",
			PROG, c->data_dir, strerror(-rc));
		return ING_EXIT_FAILURE;
	}
	printf("%s: rebuilt %s/catalog.db: %" PRIu64 " of %" PRIu64 " frame files catalogued (%.1f MiB, "
	       "CRC-32C recomputed); ids: %" PRIu64 " from file names, %" PRIu64 " from the old catalog's "
	       "%" PRIu64 " readable rows\n", PROG, c->data_dir, r.catalogued, r.files,
	       (double)r.bytes / (1 << 20), r.ids_from_names, r.ids_from_old, r.salvaged_rows);
	if (r.kept_as[0])
		printf("%s: the damaged catalog is kept as %s (remove it once the node runs well)\n", PROG,
		       r.kept_as);
	if (r.not_catalogued || r.unreadable)
		printf("%s: %" PRIu64 " files not catalogued, %" PRIu64 " unreadable: listed above\n", PROG,
		       r.not_catalogued, r.unreadable);
	if (r.crc_differs)
		printf("%s: %" PRIu64 " files differ from the CRC-32C acknowledged for them (listed above; "
		       "their rows keep the acknowledged value): restore them from a backup or have "
		       "the producer re-send them\n", PROG, r.crc_differs);
	printf("%s: %s\n", PROG, complete ? "done: start ingestd again (systemctl start ingestd)" :
				       "done, with the files above left out or damaged; ingestd can start");
	return complete ? ING_EXIT_OK : ING_EXIT_FAILURE;
}

static int check(const C *c)
{
	char path[4096], why[512] = "", holder[64];
	int64_t rows = -1, files = ing_store_count_frames(c->data_dir);
	bool ok = false;

	snprintf(path, sizeof(path), "%s/" PRUNE_JOURNAL, c->data_dir);
	bool interrupted = access(path, F_OK) == 0;
	snprintf(path, sizeof(path), "%s/catalog.db", c->data_dir);
	int lock = ing_store_lock(c->data_dir, holder, sizeof(holder));
	if (lock >= 0)
		close(lock);   /* only to know: a running node's catalog is read all the same (WAL) */
	struct ing_catalog *cat = access(path, F_OK) == 0 ? ing_catalog_open_ro(path) : NULL;
	if (!cat) {
		snprintf(why, sizeof(why), access(path, F_OK) ? "there is no catalog.db" :
			 "catalog.db cannot be opened (see above)");
	} else if (ing_catalog_quick_check(cat, why, sizeof(why)) == 0) {
		rows = ing_catalog_count(cat);
		if (rows < 0)
			snprintf(why, sizeof(why), "the rows cannot be counted");
		else if (files < 0)
			snprintf(why, sizeof(why), "%s/frames: %s", c->data_dir, strerror((int)-files));
		else if (interrupted)
			snprintf(why, sizeof(why), "an interrupted prune (%s/" PRUNE_JOURNAL ", %" PRId64
				 " rows, %" PRId64 " frame files)", c->data_dir, rows, files);
		else if (rows != files && lock != -EBUSY)
			snprintf(why, sizeof(why), "%" PRId64 " rows for %" PRId64 " frame files", rows, files);
		else
			ok = true;
	}
	ing_catalog_close(cat);
	if (c->json) {
		printf("{\"dataDir\":");
		ing_json_str(stdout, c->data_dir);
		printf(",\"ok\":%s,\"rows\":%" PRId64 ",\"files\":%" PRId64 ",\"ingestdRunning\":%s,"
		       "\"problem\":", ok ? "true" : "false", rows, files, lock == -EBUSY ? "true" : "false");
		ing_json_str(stdout, why);
		printf("}\n");
	} else if (ok) {
		printf("%s: %s: quick_check ok, %" PRId64 " rows, %" PRId64 " frame files%s\n", PROG, path,
		       rows, files, lock == -EBUSY ? " (ingestd is running: frames in flight may differ)" : "");
	} else if (interrupted && rows >= 0) {
		printf("%s: %s: %s: finish it: %s prune --data-dir %s --older-than 36500d (that deletes "
		       "nothing else)\n", PROG, path, why, PROG, c->data_dir);
	} else {
		printf("%s: %s: %s: stop ingestd, then: %s rebuild --data-dir %s (docs/OPERATIONS.md, "
		       "Catalog recovery)\n", PROG, path, why, PROG, c->data_dir);
	}
	return ok ? ING_EXIT_OK : ING_EXIT_FAILURE;
}

/* ---------------------------------------------------------------- prune */

/*
 * Crash safety: a batch of frames is written to <data-dir>/prune.journal (one "wafer TAB
 * frame TAB path TAB inode" line each; ids have no control characters) and fsync'ed before
 * its rows are deleted in one transaction; then the files are unlinked, their directories
 * fsync'ed, and the journal removed. Whatever a crash interrupts, the journal lists frames
 * the operator asked to delete: the next prune (or rebuild) finishes them, rows and files,
 * before anything else. A row never names a deleted file for longer than one batch.
 */
#define PRUNE_BATCH 1000

struct prune_item {
	char wafer[ING_ID_MAX + 1], frame[ING_ID_MAX + 1];
	char path[512];
	uint64_t ino;              /* the file's inode when chosen (0: no file, e.g. tiered) */
	uint64_t length;
};

struct prune_run {
	const C *c;
	sqlite3 *db;
	sqlite3_stmt *st_del;
	bool online;               /* an ingestd runs on the data dir: no rmdir of wafer dirs */
	uint64_t frames, bytes, files, kept_new;
	char err[512];
};

static int db_fail(struct prune_run *p, const char *what)
{
	snprintf(p->err, sizeof(p->err), "%s: %s", what, sqlite3_errmsg(p->db));
	return -EIO;
}

static int prune_exec(struct prune_run *p, const char *sql)
{
	return sqlite3_exec(p->db, sql, NULL, NULL, NULL) == SQLITE_OK ? 0 : db_fail(p, sql);
}

static void journal_path(const C *c, char *buf, size_t len)
{
	snprintf(buf, len, "%s/" PRUNE_JOURNAL, c->data_dir);
}

static int fsync_path(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	int rc = fsync(fd) ? -errno : 0;
	close(fd);
	return rc;
}

/* the journal of a batch, durable before its rows go */
static int journal_write(struct prune_run *p, const struct prune_item *it, unsigned n)
{
	char path[4096], tmp[4200];
	journal_path(p->c, path, sizeof(path));
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	FILE *f = fopen(tmp, "we");
	if (!f) {
		snprintf(p->err, sizeof(p->err), "%.400s: %s", tmp, strerror(errno));
		return -errno;
	}
	for (unsigned i = 0; i < n; i++)
		fprintf(f, "%s\t%s\t%s\t%" PRIu64 "\n", it[i].wafer, it[i].frame, it[i].path, it[i].ino);
	int rc = fflush(f) || fsync(fileno(f)) ? -errno : 0;
	if (fclose(f) && !rc)
		rc = -EIO;
	if (!rc && rename(tmp, path))
		rc = -errno;
	if (!rc)
		rc = fsync_path(p->c->data_dir);
	if (rc)
		snprintf(p->err, sizeof(p->err), "writing %.400s: %s", path, strerror(-rc));
	return rc;
}

/* the rows of the batch, in one transaction */
static int rows_delete(struct prune_run *p, const struct prune_item *it, unsigned n)
{
	int rc = prune_exec(p, "BEGIN IMMEDIATE");
	for (unsigned i = 0; i < n && !rc; i++) {
		sqlite3_reset(p->st_del);
		sqlite3_bind_text(p->st_del, 1, it[i].wafer, -1, SQLITE_STATIC);
		sqlite3_bind_text(p->st_del, 2, it[i].frame, -1, SQLITE_STATIC);
		if (sqlite3_step(p->st_del) != SQLITE_DONE)
			rc = db_fail(p, "DELETE FROM frames");
	}
	if (!rc)
		rc = prune_exec(p, "COMMIT");
	if (rc)
		sqlite3_exec(p->db, "ROLLBACK", NULL, NULL, NULL);
	return rc;
}

/* "frames/W/F.frame": its directory, "frames/W" */
static void dir_of(const char *rel, char *buf, size_t len)
{
	snprintf(buf, len, "%s", rel);
	char *slash = strrchr(buf, '/');
	if (slash)
		*slash = '\0';
}

/*
 * The files of a batch whose rows are gone; each directory fsync'ed (and, when no ingestd
 * runs, removed once empty: a wafer's last frame), then the journal removed.
 */
static int files_delete(struct prune_run *p, const struct prune_item *it, unsigned n)
{
	char abs[4096], dir[600], last[600] = "";
	for (unsigned i = 0; i < n; i++) {
		struct stat st;
		snprintf(abs, sizeof(abs), "%s/%s", p->c->data_dir, it[i].path);
		if (lstat(abs, &st) != 0)
			continue;   /* no local copy (tiered), or deleted before a crash */
		if (it[i].ino && (uint64_t)st.st_ino != it[i].ino) {
			p->kept_new++;   /* the frame was stored again since it was chosen */
			continue;
		}
		if (unlink(abs) != 0 && errno != ENOENT) {
			snprintf(p->err, sizeof(p->err), "unlink %.400s: %s", abs, strerror(errno));
			return -errno;
		}
		p->files++;
	}
	/* rows come in key order, so a wafer's frames are together: each dir once */
	for (unsigned i = 0; i < n; i++) {
		dir_of(it[i].path, dir, sizeof(dir));
		if (!strcmp(dir, last))
			continue;
		snprintf(last, sizeof(last), "%s", dir);
		snprintf(abs, sizeof(abs), "%s/%s", p->c->data_dir, dir);
		if (!p->online && rmdir(abs) == 0) {
			char parent[4096];
			dir_of(abs, parent, sizeof(parent));   /* frames/: where the wafer's dir was */
			(void)fsync_path(parent);
			continue;
		}
		int frc = fsync_path(abs);
		if (frc && frc != -ENOENT) {
			snprintf(p->err, sizeof(p->err), "fsync %.400s: %s", abs, strerror(-frc));
			return frc;
		}
	}
	char jp[4096];
	journal_path(p->c, jp, sizeof(jp));
	if (unlink(jp) != 0 && errno != ENOENT) {
		snprintf(p->err, sizeof(p->err), "unlink %.400s: %s", jp, strerror(errno));
		return -errno;
	}
	return fsync_path(p->c->data_dir);
}

/* An interrupted prune's journal: finish its batch (rows, then files; files only when
 * p->db is NULL, before a rebuild). 0 when there was none or it is done; *finished counts
 * its frames. */
static int journal_finish(struct prune_run *p, struct prune_item *it, unsigned *finished)
{
	char jp[4096], line[2 * ING_ID_MAX + 600];
	unsigned n = 0;
	*finished = 0;
	journal_path(p->c, jp, sizeof(jp));
	FILE *f = fopen(jp, "re");
	if (!f)
		return errno == ENOENT ? 0 : -errno;
	while (n < PRUNE_BATCH && fgets(line, sizeof(line), f)) {
		char *w = line, *fr = strchr(w, '\t'), *pa = fr ? strchr(fr + 1, '\t') : NULL,
		     *ino = pa ? strchr(pa + 1, '\t') : NULL;
		if (!ino)
			continue;   /* a torn last line: never written whole, so never acted on */
		*fr++ = *pa++ = *ino++ = '\0';
		memset(&it[n], 0, sizeof(it[n]));
		snprintf(it[n].wafer, sizeof(it[n].wafer), "%.*s", ING_ID_MAX, w);
		snprintf(it[n].frame, sizeof(it[n].frame), "%.*s", ING_ID_MAX, fr);
		snprintf(it[n].path, sizeof(it[n].path), "%.*s", (int)sizeof(it[n].path) - 1, pa);
		it[n].ino = strtoull(ino, NULL, 10);
		n++;
	}
	fclose(f);
	int rc = p->db ? rows_delete(p, it, n) : 0;   /* no catalog: rebuild makes a new one */
	if (!rc)
		rc = files_delete(p, it, n);
	*finished = n;
	return rc;
}

/* the frames of the age (and wafer), and their bytes; also those of no known age */
static int prune_count(struct prune_run *p, int64_t cutoff, uint64_t *frames, uint64_t *bytes,
		       uint64_t *wafers, uint64_t *no_age)
{
	sqlite3_stmt *st = NULL;
	const char *sql = "SELECT count(*), coalesce(sum(length), 0), count(DISTINCT wafer_id),"
			  " (SELECT count(*) FROM frames WHERE coalesce(durable_ns, received_ns) IS NULL"
			  "  AND (?2 IS NULL OR wafer_id = ?2))"
			  " FROM frames WHERE coalesce(durable_ns, received_ns) < ?1 AND (?2 IS NULL OR wafer_id = ?2)";
	if (sqlite3_prepare_v2(p->db, sql, -1, &st, NULL) != SQLITE_OK)
		return db_fail(p, "SELECT count(*)");
	sqlite3_bind_int64(st, 1, cutoff);
	if (p->c->wafer)
		sqlite3_bind_text(st, 2, p->c->wafer, -1, SQLITE_STATIC);
	int rc = 0;
	if (sqlite3_step(st) == SQLITE_ROW) {
		*frames = (uint64_t)sqlite3_column_int64(st, 0);
		*bytes = (uint64_t)sqlite3_column_int64(st, 1);
		*wafers = (uint64_t)sqlite3_column_int64(st, 2);
		*no_age = (uint64_t)sqlite3_column_int64(st, 3);
	} else {
		rc = db_fail(p, "SELECT count(*)");
	}
	sqlite3_finalize(st);
	return rc;
}

/* rebuild: an interrupted prune's files go first, so that the new catalog has none of them */
static int prune_journal_before_rebuild(const C *c)
{
	struct prune_run p = { .c = c };
	char holder[64];
	unsigned n = 0;
	int lock = ing_store_lock(c->data_dir, holder, sizeof(holder));
	if (lock < 0)
		return 0;   /* rebuild itself says why it cannot run */
	struct prune_item *it = calloc(PRUNE_BATCH, sizeof(*it));
	int rc = it ? journal_finish(&p, it, &n) : -ENOMEM;
	close(lock);
	free(it);
	if (rc)
		fprintf(stderr, "%s: finishing an interrupted prune first: %s\n", PROG, p.err[0] ? p.err : strerror(-rc));
	else if (n)
		printf("%s: finished an interrupted prune first: %u frame files deleted (" PRUNE_JOURNAL ")\n",
		       PROG, n);
	return rc;
}

static void prune_progress(const struct prune_run *p, uint64_t total, bool last)
{
	if (p->c->json || !isatty(STDERR_FILENO))
		return;
	fprintf(stderr, "\r%s: pruned %" PRIu64 " of %" PRIu64 " frames (%.1f MiB)%s", PROG, p->frames,
		total, (double)p->bytes / (1 << 20), last ? "\n" : "");
}

static int prune(const C *c)
{
	struct prune_run p = { .c = c };
	struct prune_item *it = calloc(PRUNE_BATCH, sizeof(*it));
	char path[4096], holder[64], when[32];
	uint64_t total = 0, total_bytes = 0, wafers = 0, no_age = 0;
	unsigned recovered = 0;
	sqlite3_stmt *st_sel = NULL;
	int rc = 0;

	int64_t cutoff = ing_wall_ns() - (int64_t)(c->older_than_ms * 1000000ull);
	time_t ct = (time_t)(cutoff / 1000000000);
	strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", localtime(&ct));
	int lock = ing_store_lock(c->data_dir, holder, sizeof(holder));
	if (lock < 0 && lock != -EBUSY) {
		fprintf(stderr, "%s: %s: %s\n", PROG, c->data_dir, strerror(-lock));
		free(it);
		return ING_EXIT_FAILURE;
	}
	p.online = lock == -EBUSY;
	snprintf(path, sizeof(path), "%s/catalog.db", c->data_dir);
	if (!it || access(path, F_OK) ||
	    sqlite3_open_v2(path, &p.db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK) {
		fprintf(stderr, "%s: %s: %s\n", PROG, path, !it ? "out of memory" : access(path, F_OK) ?
			"there is no catalog.db (is --data-dir ingestd's?)" : sqlite3_errmsg(p.db));
		rc = -EIO;
		goto out;
	}
	sqlite3_busy_timeout(p.db, 10000);
	if ((rc = prune_exec(&p, "PRAGMA synchronous = FULL")) ||
	    sqlite3_prepare_v2(p.db, "DELETE FROM frames WHERE wafer_id = ?1 AND frame_id = ?2", -1,
			       &p.st_del, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(p.db, "SELECT wafer_id, frame_id, path, length FROM frames"
			       " WHERE coalesce(durable_ns, received_ns) < ?1 AND (?2 IS NULL OR wafer_id = ?2)"
			       " LIMIT ?3", -1, &st_sel, NULL) != SQLITE_OK) {
		rc = rc ? rc : db_fail(&p, "prepare");
		goto out;
	}
	if (!c->dry_run && (rc = journal_finish(&p, it, &recovered)))
		goto out;
	if (recovered && !c->json)
		printf("%s: finished an interrupted prune: %u frames (" PRUNE_JOURNAL ")\n", PROG, recovered);
	if ((rc = prune_count(&p, cutoff, &total, &total_bytes, &wafers, &no_age)))
		goto out;
	if (c->dry_run) {
		char jp[4096];
		journal_path(c, jp, sizeof(jp));
		if (c->json) {
			printf("{\"dataDir\":");
			ing_json_str(stdout, c->data_dir);
			printf(",\"dryRun\":true,\"olderThanMs\":%" PRIu64 ",\"cutoffUnixNs\":%" PRId64
			       ",\"frames\":%" PRIu64 ",\"bytes\":%" PRIu64 ",\"wafers\":%" PRIu64
			       ",\"noAge\":%" PRIu64 ",\"interruptedPrune\":%s}\n", c->older_than_ms, cutoff,
			       total, total_bytes, wafers, no_age, access(jp, F_OK) ? "false" : "true");
		} else {
			printf("%s: --dry-run: would delete %" PRIu64 " frames (%.1f MiB) of %" PRIu64
			       " wafer%s%s%s, DURABLE before %s; nothing deleted\n", PROG, total,
			       (double)total_bytes / (1 << 20), wafers, wafers == 1 ? "" : "s",
			       c->wafer ? " (wafer " : "", c->wafer ? c->wafer : "", when);
			if (!access(jp, F_OK))
				printf("%s: an interrupted prune's journal is there: the next prune finishes it\n", PROG);
		}
		goto out;
	}
	for (;;) {
		unsigned n = 0;
		sqlite3_reset(st_sel);
		sqlite3_bind_int64(st_sel, 1, cutoff);
		if (c->wafer)
			sqlite3_bind_text(st_sel, 2, c->wafer, -1, SQLITE_STATIC);
		sqlite3_bind_int(st_sel, 3, PRUNE_BATCH);
		int st;
		while ((st = sqlite3_step(st_sel)) == SQLITE_ROW) {
			struct prune_item *x = &it[n];
			struct stat sb;
			memset(x, 0, sizeof(*x));
			snprintf(x->wafer, sizeof(x->wafer), "%s", (const char *)sqlite3_column_text(st_sel, 0));
			snprintf(x->frame, sizeof(x->frame), "%s", (const char *)sqlite3_column_text(st_sel, 1));
			snprintf(x->path, sizeof(x->path), "%s", (const char *)sqlite3_column_text(st_sel, 2));
			x->length = (uint64_t)sqlite3_column_int64(st_sel, 3);
			snprintf(path, sizeof(path), "%s/%s", c->data_dir, x->path);
			if (lstat(path, &sb) == 0)
				x->ino = (uint64_t)sb.st_ino;
			n++;
		}
		sqlite3_reset(st_sel);
		if (st != SQLITE_DONE && st != SQLITE_ROW) {
			rc = db_fail(&p, "SELECT FROM frames");
			break;
		}
		if (!n)
			break;
		if ((rc = journal_write(&p, it, n)) || (rc = rows_delete(&p, it, n)) ||
		    (rc = files_delete(&p, it, n)))
			break;
		for (unsigned i = 0; i < n; i++)
			p.bytes += it[i].length;
		p.frames += n;
		prune_progress(&p, total > p.frames ? total : p.frames, false);
	}
	prune_progress(&p, total > p.frames ? total : p.frames, true);
	if (c->json) {
		printf("{\"dataDir\":");
		ing_json_str(stdout, c->data_dir);
		printf(",\"dryRun\":false,\"ok\":%s,\"error\":", rc ? "false" : "true");
		ing_json_str(stdout, rc ? p.err : "");
		printf(",\"olderThanMs\":%" PRIu64 ",\"cutoffUnixNs\":%" PRId64 ",\"frames\":%" PRIu64
		       ",\"bytes\":%" PRIu64 ",\"files\":%" PRIu64 ",\"keptStoredAgain\":%" PRIu64
		       ",\"finishedInterrupted\":%u,\"noAge\":%" PRIu64 ",\"ingestdRunning\":%s}\n",
		       c->older_than_ms, cutoff, p.frames, p.bytes, p.files, p.kept_new, recovered, no_age,
		       p.online ? "true" : "false");
	} else if (!rc) {
		printf("%s: deleted %" PRIu64 " frames (%.1f MiB, %" PRIu64 " files) DURABLE before %s%s%s%s\n",
		       PROG, p.frames, (double)p.bytes / (1 << 20), p.files, when, c->wafer ? ", wafer " : "",
		       c->wafer ? c->wafer : "", p.online ? " (beside a running ingestd)" : "");
		if (p.kept_new)
			printf("%s: %" PRIu64 " files kept: stored again while the prune ran\n", PROG, p.kept_new);
		if (no_age)
			printf("%s: %" PRIu64 " frames have no DURABLE time in the catalog (kept)\n", PROG, no_age);
	}
out:
	if (rc && !c->json)
		fprintf(stderr, "%s: prune of %s stopped: %s; what was deleted is consistent: run it again\n",
			PROG, c->data_dir, p.err[0] ? p.err : strerror(-rc));
	sqlite3_finalize(st_sel);
	sqlite3_finalize(p.st_del);
	if (p.db)
		sqlite3_close(p.db);
	if (lock >= 0)
		close(lock);
	free(it);
	return rc ? ING_EXIT_FAILURE : ING_EXIT_OK;
}

int main(int argc, char **argv)
{
	static const char *const first[] = { "config", NULL };
	C c;
	int argi, rc;

	cfg_init(&c);
	if (!ing_cli_parse_only(&cli, argc, argv, &c, first) && c.config && read_ingestd_config(&c))
		return ING_EXIT_USAGE;
	rc = ing_cli_parse(&cli, argc, argv, &c, &argi);
	if (rc)
		return rc == 1 ? ING_EXIT_OK : rc;
	if (argi >= argc)
		return ing_cli_usage_error(&cli, "say what to do: check, rebuild or prune");
	if (!c.data_dir)
		return ing_cli_usage_error(&cli, "--data-dir DIR (or --config FILE) is needed");
	bool is_prune = !strcmp(argv[argi], "prune");
	if (!is_prune && (c.older_than_set || c.wafer || c.dry_run))
		return ing_cli_usage_error(&cli, "--older-than, --wafer and --dry-run go with prune");
	if (!strcmp(argv[argi], "check"))
		return check(&c);
	if (!strcmp(argv[argi], "rebuild"))
		return rebuild(&c);
	if (is_prune) {
		if (!c.older_than_set)
			return ing_cli_usage_error(&cli, "prune needs --older-than AGE (e.g. 30d)");
		if (c.wafer && ing_id_check(c.wafer, strlen(c.wafer)))
			return ing_cli_usage_error(&cli, "--wafer: a wafer id is " ING_ID_RULE);
		return prune(&c);
	}
	return ing_cli_usage_error(&cli, "'%s' is not check, rebuild or prune", argv[argi]);
}
