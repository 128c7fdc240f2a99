/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ingest-catalog: the catalog of a data dir, for when something went wrong with it, and
 * retention (with an object store tier too: docs/TIER.md).
 *   check    SQLite's quick_check, the rows with a local copy against the frame files, and
 *            the object store tier's tables against the rows (exit 1: damaged or not in
 *            step, with the fix)
 *   rebuild  a new catalog.db from the frame files (dataplane/store/rebuild.c): ids from
 *            the file names, CRC-32C recomputed; the damaged file is kept beside it
 *   prune    delete the frames DURABLE longer ago than --older-than (of --wafer W only):
 *            row and file, crash-safe through a journal (below); --dry-run says what.
 *            With an object store tier it keeps, and counts, the frames whose upload is
 *            not verified (their local copy is their only one; --include-unverified) and
 *            those in the store (their row is how the node finds the object;
 *            --forget-in-store)
 * rebuild refuses a data dir an ingestd is running on; prune works beside it. Exit status:
 * 0 done / consistent, 1 not (what and why printed), 2 usage error.
 */
#include "common/json.h"
#include "common/cli.h"
#include "common/clock.h"
#include "common/ident.h"
#include "common/log.h"
#include "common/parse.h"
#include "control/node/opts.h"
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
	bool older_than_set, dry_run, include_unverified, forget_in_store;
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
	ING_OPT_BOOL_(C, "include-unverified", include_unverified,
		      "also the frames queued for the object store and not verified there: their "
		      "only copy goes, and their upload"),
	ING_OPT_BOOL_(C, "forget-in-store", forget_in_store,
		      "also the frames verified in the object store (both, tiered): rows and local "
		      "copies go, the objects stay"),
	ING_OPT_GROUP_("Output"),
	ING_OPT_BOOL_(C, "json", json, "the result as one JSON object"),
	ING_OPT_LOG_LEVEL_ENTRY(C, "info"),
};

static const struct ing_cli cli = {
	.prog = PROG,
	.synopsis = "check|rebuild|prune (--data-dir DIR | --config FILE) [--older-than AGE "
		    "[--wafer ID] [--dry-run] [--include-unverified] [--forget-in-store]] [--json]",
	.summary = "check, rebuild or prune the catalog and frames of an h3000 ingest node's data dir",
	.about = "check: SQLite's quick_check of <data-dir>/catalog.db, and its rows with a local\n"
		 "  copy counted against the frame files; with an object store tier, its count of\n"
		 "  the frames per location (what --local-high-water holds to) against the rows,\n"
		 "  and every local frame queued for the store; the fix when they disagree.\n"
		 "rebuild: a new catalog.db from the frame files: every frames/<wafer>/<frame>.frame\n"
		 "  becomes a row, its ids decoded from the escaped names, its CRC-32C recomputed,\n"
		 "  its timestamps and the acknowledged CRC taken from the old catalog's readable rows\n"
		 "  (shortened names of ids above 200 bytes need them); a frame only in the object\n"
		 "  store keeps its old row. The damaged catalog is kept as\n"
		 "  catalog.db.damaged-<time>. Stop ingestd first: the data dir is locked. The\n"
		 "  tier's tables start again empty: ingestd --tier counts the frames per location\n"
		 "  from the new rows, queues the local ones, and verifies a 'both' frame's object\n"
		 "  again before its local copy goes.\n"
		 "prune: delete every frame (catalog row and file) that became DURABLE more than\n"
		 "  --older-than ago, of --wafer only if given; --dry-run counts them. Runs beside\n"
		 "  a running ingestd (cron, a systemd timer). Crash-safe: each batch is written to\n"
		 "  <data-dir>/prune.journal before its rows are deleted, and a file is deleted\n"
		 "  only once its row is; an interrupted prune is finished by the next one.\n"
		 "  With an object store tier (--tier), frames are kept, counted and named unless\n"
		 "  a flag says otherwise: a frame queued for the store and not verified there (its\n"
		 "  local copy is its only one: --include-unverified deletes it and its upload), a\n"
		 "  frame verified in the store (location both or tiered: its row is how ingest-get\n"
		 "  finds the object; ingestd's --local-retention frees its local copy after\n"
		 "  checking the object; --forget-in-store deletes the row and the local copy, the\n"
		 "  object stays for the bucket's lifecycle rules).\n",
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
	/* catalogued: a row per frame file, and the old rows of frames only in the object store */
	uint64_t from_files = r.catalogued >= r.tiered ? r.catalogued - r.tiered : 0;
	bool complete = rc == 0 && from_files == r.files && !r.crc_differs;
	if (c->json) {
		printf("{\"dataDir\":");
		ing_json_str(stdout, c->data_dir);
		printf(",\"ok\":%s,\"error\":", complete ? "true" : "false");
		ing_json_str(stdout, rc ? strerror(-rc) : "");
		printf(",\"files\":%" PRIu64 ",\"catalogued\":%" PRIu64 ",\"idsFromNames\":%" PRIu64
		       ",\"idsFromOldCatalog\":%" PRIu64 ",\"salvagedRows\":%" PRIu64 ",\"notCatalogued\":%" PRIu64
		       ",\"crcDiffers\":%" PRIu64 ",\"unreadable\":%" PRIu64 ",\"bytes\":%" PRIu64
		       ",\"onlyInStore\":%" PRIu64 ",\"keptAs\":", r.files, from_files, r.ids_from_names,
		       r.ids_from_old, r.salvaged_rows, r.not_catalogued, r.crc_differs, r.unreadable, r.bytes,
		       r.tiered);
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
	       "%" PRIu64 " readable rows\n", PROG, c->data_dir, from_files, r.files,
	       (double)r.bytes / (1 << 20), r.ids_from_names, r.ids_from_old, r.salvaged_rows);
	if (r.tiered)
		printf("%s: %" PRIu64 " frames only in the object store keep their old rows (ingestd --tier "
		       "counts them again at start, and verifies a 'both' frame's object again before its "
		       "local copy goes)\n", PROG, r.tiered);
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

/* ---------------------------------------------------------------- prune */

/*
 * Crash safety: a batch of frames is written to <data-dir>/prune.journal (one "wafer TAB
 * frame TAB path TAB inode" line each; ids have no control characters) and fsync'ed before
 * its rows are deleted in one transaction; then the files are unlinked, their directories
 * fsync'ed, and the journal removed. Whatever a crash interrupts, the journal lists frames
 * the operator asked to delete: the next prune (or rebuild) finishes them, rows and files,
 * before anything else. A row never names a deleted file for longer than one batch.
 *
 * With an object store tier (docs/TIER.md), which frames may go is asked of the catalog
 * itself, in the SELECT that chooses a batch and again in each row's DELETE (inside the
 * batch's write transaction, so the tier thread cannot change a frame in between): a
 * local frame with a row in the tier's upload queue (tier_outbox: not verified in the
 * store, its local copy its only one) only with --include-unverified, and then its queued
 * upload goes in the same transaction (else the tier would fail it for ever as "local copy
 * missing"); a frame in the store (both, tiered) only with --forget-in-store. A row the
 * DELETE keeps (it changed since the SELECT) keeps its file.
 */
#define PRUNE_BATCH 1000

enum prune_fate { PF_DELETED, PF_GONE, PF_KEPT };

struct prune_item {
	char wafer[ING_ID_MAX + 1], frame[ING_ID_MAX + 1];
	char path[512];
	uint64_t ino;              /* the file's inode when chosen (0: no file, e.g. tiered) */
	uint64_t length;
	enum prune_fate fate;      /* rows_delete: deleted now, no row any more, or kept */
};

/* What the catalog holds of the tier (a catalog no ingestd --tier opened has none). */
struct prune_schema {
	bool location;             /* frames.location (schema 3) */
	bool outbox;               /* tier_outbox */
	bool tier_on;              /* its trigger: the last ingestd ran with --tier */
};

struct prune_run {
	const C *c;
	sqlite3 *db;
	struct prune_schema sc;
	bool prepared;
	sqlite3_stmt *st_sel, *st_del, *st_row, *st_unqueue, *st_count;
	bool online;               /* an ingestd runs on the data dir: no rmdir of wafer dirs */
	uint64_t frames, bytes, files, kept_new, kept_changed, unqueued;
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

static bool query_true(sqlite3 *db, const char *sql)
{
	sqlite3_stmt *st = NULL;
	bool yes = sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW &&
		   sqlite3_column_int64(st, 0) > 0;
	sqlite3_finalize(st);
	return yes;
}

static void schema_of(sqlite3 *db, struct prune_schema *sc)
{
	sc->location = query_true(db, "SELECT count(*) FROM pragma_table_info('frames') WHERE name = 'location'");
	sc->outbox = query_true(db, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'tier_outbox'");
	sc->tier_on = query_true(db, "SELECT count(*) FROM sqlite_master WHERE type = 'trigger'"
				 " AND name = 'tier_outbox_frames'");
}

#define PRUNE_AGE "coalesce(durable_ns, received_ns) < ?1 AND (?2 IS NULL OR wafer_id = ?2)"
#define PRUNE_QUEUED "EXISTS (SELECT 1 FROM tier_outbox o WHERE o.wafer_id = frames.wafer_id" \
		     " AND o.frame_id = frames.frame_id)"

/*
 * The statements for this catalog as it is now (again when an ingestd created the tier's
 * tables meanwhile). E: the row may go; a local frame "unverified": queued for the store.
 */
static int prune_prepare(struct prune_run *p)
{
	struct prune_schema sc;
	char e[512], sql[8192];
	schema_of(p->db, &sc);
	if (p->prepared && sc.location == p->sc.location && sc.outbox == p->sc.outbox)
		return 0;
	p->sc = sc;
	sqlite3_stmt **all[] = { &p->st_sel, &p->st_del, &p->st_row, &p->st_unqueue, &p->st_count };
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
		sqlite3_finalize(*all[i]);
		*all[i] = NULL;
	}
	const char *loc = sc.location ? "location" : "'local'", *queued = sc.outbox ? PRUNE_QUEUED : "0";
	snprintf(e, sizeof(e), "(%s = 'local' AND (%d OR NOT %s) OR %s <> 'local' AND %d)", loc,
		 p->c->include_unverified, queued, loc, p->c->forget_in_store);
	snprintf(sql, sizeof(sql), "SELECT wafer_id, frame_id, path, length FROM frames WHERE " PRUNE_AGE
		 " AND %s LIMIT ?3", e);
	if (sqlite3_prepare_v2(p->db, sql, -1, &p->st_sel, NULL) != SQLITE_OK)
		return db_fail(p, "prepare SELECT");
	snprintf(sql, sizeof(sql), "DELETE FROM frames WHERE wafer_id = ?1 AND frame_id = ?2 AND %s", e);
	if (sqlite3_prepare_v2(p->db, sql, -1, &p->st_del, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(p->db, "SELECT 1 FROM frames WHERE wafer_id = ?1 AND frame_id = ?2", -1,
			       &p->st_row, NULL) != SQLITE_OK ||
	    (sc.outbox && sqlite3_prepare_v2(p->db, "DELETE FROM tier_outbox WHERE wafer_id = ?1 AND"
					     " frame_id = ?2", -1, &p->st_unqueue, NULL) != SQLITE_OK))
		return db_fail(p, "prepare DELETE");
	/* the age's frames: those that go (count, bytes, wafers), those kept because their upload
	 * is not verified (count, bytes), those kept because they are in the store (count, of
	 * them with a local copy, its bytes), those of no known age */
	snprintf(sql, sizeof(sql),
		 "SELECT coalesce(sum(%1$s), 0), coalesce(sum(CASE WHEN %1$s THEN length END), 0),"
		 " count(DISTINCT CASE WHEN %1$s THEN wafer_id END),"
		 " coalesce(sum(NOT %1$s AND %2$s = 'local'), 0),"
		 " coalesce(sum(CASE WHEN NOT %1$s AND %2$s = 'local' THEN length END), 0),"
		 " coalesce(sum(NOT %1$s AND %2$s <> 'local'), 0),"
		 " coalesce(sum(NOT %1$s AND %2$s = 'both'), 0),"
		 " coalesce(sum(CASE WHEN NOT %1$s AND %2$s = 'both' THEN length END), 0),"
		 " (SELECT count(*) FROM frames WHERE coalesce(durable_ns, received_ns) IS NULL"
		 "  AND (?2 IS NULL OR wafer_id = ?2))"
		 " FROM frames WHERE " PRUNE_AGE, e, loc);
	if (sqlite3_prepare_v2(p->db, sql, -1, &p->st_count, NULL) != SQLITE_OK)
		return db_fail(p, "prepare SELECT count(*)");
	p->prepared = true;
	return 0;
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

/* one statement over a frame's key: 0 or -EIO; *changes its rows, *row whether one came */
static int step_key(struct prune_run *p, sqlite3_stmt *st, const struct prune_item *it, bool *row,
		    const char *what)
{
	sqlite3_reset(st);
	sqlite3_bind_text(st, 1, it->wafer, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, it->frame, -1, SQLITE_STATIC);
	int rc = sqlite3_step(st);
	if (row)
		*row = rc == SQLITE_ROW;
	sqlite3_reset(st);
	return rc == SQLITE_DONE || rc == SQLITE_ROW ? 0 : db_fail(p, what);
}

/* The rows of the batch, in one transaction, each only if it may still go (it[i].fate). */
static int rows_delete(struct prune_run *p, struct prune_item *it, unsigned n)
{
	int rc = prune_exec(p, "BEGIN IMMEDIATE");
	if (!rc)
		rc = prune_prepare(p);   /* under the write lock: the tier's tables as they are */
	for (unsigned i = 0; i < n && !rc; i++) {
		bool row;
		rc = step_key(p, p->st_del, &it[i], NULL, "DELETE FROM frames");
		if (rc)
			break;
		if (sqlite3_changes(p->db) == 1) {
			it[i].fate = PF_DELETED;
			if (p->st_unqueue && !(rc = step_key(p, p->st_unqueue, &it[i], NULL, "DELETE FROM tier_outbox")))
				p->unqueued += (uint64_t)sqlite3_changes(p->db);
			continue;
		}
		/* kept: changed since it was chosen (queued for the store again, say); or gone: an
		 * interrupted prune's row deleted before the crash, whose file still goes */
		rc = step_key(p, p->st_row, &it[i], &row, "SELECT FROM frames");
		it[i].fate = row ? PF_KEPT : PF_GONE;
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
 * The files of a batch whose rows are gone (not those kept); each directory fsync'ed (and,
 * when no ingestd runs, removed once empty: a wafer's last frame), then the journal
 * removed.
 */
static int files_delete(struct prune_run *p, const struct prune_item *it, unsigned n)
{
	char abs[4096], dir[600], last[600] = "";
	for (unsigned i = 0; i < n; i++) {
		struct stat st;
		if (it[i].fate == PF_KEPT) {
			p->kept_changed++;
			continue;
		}
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
 * its frames deleted (not those kept: they changed, or this run's flags keep them). */
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
		it[n].fate = PF_GONE;
		n++;
	}
	fclose(f);
	int rc = p->db ? rows_delete(p, it, n) : 0;   /* no catalog: rebuild makes a new one */
	if (!rc)
		rc = files_delete(p, it, n);
	for (unsigned i = 0; i < n; i++)
		*finished += it[i].fate != PF_KEPT;
	return rc;
}

/* What the age (and wafer) holds: what goes, what stays and why. */
struct prune_counts {
	uint64_t frames, bytes, wafers;       /* may go */
	uint64_t unverified, unverified_bytes; /* kept: queued for the store, not verified */
	uint64_t in_store, in_store_local, in_store_local_bytes; /* kept: both or tiered */
	uint64_t no_age;
};

static int prune_count(struct prune_run *p, int64_t cutoff, struct prune_counts *k)
{
	sqlite3_stmt *st = p->st_count;
	uint64_t *v[] = { &k->frames, &k->bytes, &k->wafers, &k->unverified, &k->unverified_bytes,
			  &k->in_store, &k->in_store_local, &k->in_store_local_bytes, &k->no_age };
	sqlite3_reset(st);
	sqlite3_bind_int64(st, 1, cutoff);
	sqlite3_bind_text(st, 2, p->c->wafer, -1, SQLITE_STATIC);   /* NULL: every wafer */
	int rc = 0;
	if (sqlite3_step(st) == SQLITE_ROW) {
		for (int i = 0; i < (int)(sizeof(v) / sizeof(v[0])); i++)
			*v[i] = (uint64_t)sqlite3_column_int64(st, i);
	} else {
		rc = db_fail(p, "SELECT count(*)");
	}
	sqlite3_reset(st);
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

/* The frames the tier keeps from the prune, why, and what the operator can do. */
static void prune_kept(const struct prune_run *p, const struct prune_counts *k, bool dry)
{
	const char *keep = dry ? "would keep" : "kept";
	if (k->unverified)
		printf("%s: %s %" PRIu64 " frames (%.1f MiB) queued for the object store and not verified "
		       "there: their local copy is their only one. %s; or delete them anyway, and their "
		       "uploads: --include-unverified\n", PROG, keep, k->unverified,
		       (double)k->unverified_bytes / (1 << 20), p->sc.tier_on ?
		       "They are in the tier's backlog (ingest-stat: tier line): once verified they are "
		       "in the store (below)" : "They were queued by a run with --tier, and this node runs "
		       "without it now: start ingestd with --tier to upload them");
	if (k->in_store)
		printf("%s: %s %" PRIu64 " frames verified in the object store (%" PRIu64 " of them with a "
		       "local copy, %.1f MiB): their catalog row is how ingest-get and ingest-verify --tier "
		       "find the object. ingestd's --local-retention frees local copies once it has checked "
		       "the object; --forget-in-store deletes these rows and local copies (the objects stay "
		       "in the store: expire them with the bucket's lifecycle rules)\n", PROG, keep,
		       k->in_store, k->in_store_local, (double)k->in_store_local_bytes / (1 << 20));
}

static void prune_json_kept(const struct prune_counts *k)
{
	printf(",\"keptUnverified\":%" PRIu64 ",\"keptUnverifiedBytes\":%" PRIu64 ",\"keptInStore\":%" PRIu64
	       ",\"keptInStoreLocal\":%" PRIu64 ",\"keptInStoreLocalBytes\":%" PRIu64, k->unverified,
	       k->unverified_bytes, k->in_store, k->in_store_local, k->in_store_local_bytes);
}

static int prune(const C *c)
{
	struct prune_run p = { .c = c };
	struct prune_item *it = calloc(PRUNE_BATCH, sizeof(*it));
	char path[4096], holder[64], when[32];
	struct prune_counts k = { 0 };
	unsigned recovered = 0;
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
	if ((rc = prune_exec(&p, "PRAGMA synchronous = FULL")) || (rc = prune_prepare(&p)))
		goto out;
	if (!c->dry_run && (rc = journal_finish(&p, it, &recovered)))
		goto out;
	if (recovered && !c->json)
		printf("%s: finished an interrupted prune: %u frames (" PRUNE_JOURNAL ")\n", PROG, recovered);
	if ((rc = prune_prepare(&p)) || (rc = prune_count(&p, cutoff, &k)))
		goto out;
	if (c->dry_run) {
		char jp[4096];
		journal_path(c, jp, sizeof(jp));
		if (c->json) {
			printf("{\"dataDir\":");
			ing_json_str(stdout, c->data_dir);
			printf(",\"dryRun\":true,\"olderThanMs\":%" PRIu64 ",\"cutoffUnixNs\":%" PRId64
			       ",\"frames\":%" PRIu64 ",\"bytes\":%" PRIu64 ",\"wafers\":%" PRIu64
			       ",\"noAge\":%" PRIu64, c->older_than_ms, cutoff, k.frames, k.bytes, k.wafers, k.no_age);
			prune_json_kept(&k);
			printf(",\"interruptedPrune\":%s}\n", access(jp, F_OK) ? "false" : "true");
		} else {
			printf("%s: --dry-run: would delete %" PRIu64 " frames (%.1f MiB) of %" PRIu64
			       " wafer%s%s%s, DURABLE before %s; nothing deleted\n", PROG, k.frames,
			       (double)k.bytes / (1 << 20), k.wafers, k.wafers == 1 ? "" : "s",
			       c->wafer ? " (wafer " : "", c->wafer ? c->wafer : "", when);
			prune_kept(&p, &k, true);
			if (!access(jp, F_OK))
				printf("%s: an interrupted prune's journal is there: the next prune finishes it\n", PROG);
		}
		goto out;
	}
	for (;;) {
		unsigned n = 0;
		int st;
		if ((rc = prune_prepare(&p)))
			break;
		sqlite3_reset(p.st_sel);
		sqlite3_bind_int64(p.st_sel, 1, cutoff);
		sqlite3_bind_text(p.st_sel, 2, c->wafer, -1, SQLITE_STATIC);
		sqlite3_bind_int(p.st_sel, 3, PRUNE_BATCH);
		while ((st = sqlite3_step(p.st_sel)) == SQLITE_ROW) {
			struct prune_item *x = &it[n];
			struct stat sb;
			memset(x, 0, sizeof(*x));
			snprintf(x->wafer, sizeof(x->wafer), "%s", (const char *)sqlite3_column_text(p.st_sel, 0));
			snprintf(x->frame, sizeof(x->frame), "%s", (const char *)sqlite3_column_text(p.st_sel, 1));
			snprintf(x->path, sizeof(x->path), "%s", (const char *)sqlite3_column_text(p.st_sel, 2));
			x->length = (uint64_t)sqlite3_column_int64(p.st_sel, 3);
			snprintf(path, sizeof(path), "%s/%s", c->data_dir, x->path);
			if (lstat(path, &sb) == 0)
				x->ino = (uint64_t)sb.st_ino;
			n++;
		}
		sqlite3_reset(p.st_sel);
		if (st != SQLITE_DONE && st != SQLITE_ROW) {
			rc = db_fail(&p, "SELECT FROM frames");
			break;
		}
		if (!n)
			break;
		if ((rc = journal_write(&p, it, n)) || (rc = rows_delete(&p, it, n)) ||
		    (rc = files_delete(&p, it, n)))
			break;
		unsigned gone = 0;
		for (unsigned i = 0; i < n; i++) {
			if (it[i].fate == PF_KEPT)
				continue;
			p.bytes += it[i].length;
			gone++;
		}
		p.frames += gone;
		prune_progress(&p, k.frames > p.frames ? k.frames : p.frames, false);
		if (!gone)
			break;   /* a whole batch changed under the prune: what is left, next time */
	}
	prune_progress(&p, k.frames > p.frames ? k.frames : p.frames, true);
	/* what stays: counted again now (the tier may have verified frames meanwhile) */
	if (!rc && (k.unverified || k.in_store))
		rc = prune_count(&p, cutoff, &k);
	if (c->json) {
		printf("{\"dataDir\":");
		ing_json_str(stdout, c->data_dir);
		printf(",\"dryRun\":false,\"ok\":%s,\"error\":", rc ? "false" : "true");
		ing_json_str(stdout, rc ? p.err : "");
		printf(",\"olderThanMs\":%" PRIu64 ",\"cutoffUnixNs\":%" PRId64 ",\"frames\":%" PRIu64
		       ",\"bytes\":%" PRIu64 ",\"files\":%" PRIu64 ",\"keptStoredAgain\":%" PRIu64
		       ",\"keptChanged\":%" PRIu64 ",\"uploadsDropped\":%" PRIu64
		       ",\"finishedInterrupted\":%u,\"noAge\":%" PRIu64 ",\"ingestdRunning\":%s",
		       c->older_than_ms, cutoff, p.frames, p.bytes, p.files, p.kept_new, p.kept_changed,
		       p.unqueued, recovered, k.no_age, p.online ? "true" : "false");
		prune_json_kept(&k);
		printf("}\n");
	} else if (!rc) {
		printf("%s: deleted %" PRIu64 " frames (%.1f MiB, %" PRIu64 " files) DURABLE before %s%s%s%s\n",
		       PROG, p.frames, (double)p.bytes / (1 << 20), p.files, when, c->wafer ? ", wafer " : "",
		       c->wafer ? c->wafer : "", p.online ? " (beside a running ingestd)" : "");
		if (p.unqueued)
			printf("%s: %" PRIu64 " of them were queued for the object store and not verified there "
			       "(--include-unverified): their uploads are dropped\n", PROG, p.unqueued);
		if (p.kept_new)
			printf("%s: %" PRIu64 " files kept: stored again while the prune ran\n", PROG, p.kept_new);
		if (p.kept_changed)
			printf("%s: %" PRIu64 " frames kept: the object store tier changed them while the prune "
			       "ran (queued again: their object was not found as verified)\n", PROG, p.kept_changed);
		prune_kept(&p, &k, false);
		if (k.no_age)
			printf("%s: %" PRIu64 " frames have no DURABLE time in the catalog (kept)\n", PROG, k.no_age);
	}
out:
	if (rc && !c->json)
		fprintf(stderr, "%s: prune of %s stopped: %s; what was deleted is consistent: run it again\n",
			PROG, c->data_dir, p.err[0] ? p.err : strerror(-rc));
	sqlite3_stmt *all[] = { p.st_sel, p.st_del, p.st_row, p.st_unqueue, p.st_count };
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		sqlite3_finalize(all[i]);
	if (p.db)
		sqlite3_close(p.db);
	if (lock >= 0)
		close(lock);
	free(it);
	return rc ? ING_EXIT_FAILURE : ING_EXIT_OK;
}

/* ---------------------------------------------------------------- check */

static int64_t query_i64(sqlite3 *db, const char *sql)
{
	sqlite3_stmt *st = NULL;
	int64_t v = -1;
	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return v;
}

/*
 * What the catalog says of the object store tier, read in one transaction (consistent with
 * a running ingestd's writes): the frames per location; the tier's own count of them
 * (tier_usage, what the high-water mark holds to), compared while its triggers keep it;
 * the upload queue, its rows whose frame is gone, the local frames it misses.
 */
struct tier_view {
	struct prune_schema sc;
	bool counted;                     /* tier_usage is kept by its triggers: compared */
	int64_t frames[3], bytes[3];      /* the rows, per enum ing_location */
	int64_t used_frames[3], used_bytes[3];
	int64_t queued, orphans, unqueued;
};

static void tier_view_read(const char *path, struct tier_view *v)
{
	sqlite3 *db = NULL;
	sqlite3_stmt *st = NULL;
	memset(v, 0, sizeof(*v));
	v->queued = v->orphans = v->unqueued = -1;
	if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK) {
		sqlite3_close(db);
		return;
	}
	sqlite3_busy_timeout(db, 10000);
	sqlite3_exec(db, "BEGIN", NULL, NULL, NULL);
	schema_of(db, &v->sc);
	if (v->sc.location &&
	    sqlite3_prepare_v2(db, "SELECT location, count(*), coalesce(sum(length), 0) FROM frames"
			       " GROUP BY location", -1, &st, NULL) == SQLITE_OK) {
		while (sqlite3_step(st) == SQLITE_ROW) {
			int l = ing_location_parse((const char *)sqlite3_column_text(st, 0));
			if (l >= 0) {
				v->frames[l] = sqlite3_column_int64(st, 1);
				v->bytes[l] = sqlite3_column_int64(st, 2);
			}
		}
	}
	sqlite3_finalize(st);
	st = NULL;
	v->counted = query_i64(db, "SELECT count(*) FROM sqlite_master WHERE type = 'trigger' AND name IN"
			       " ('tier_usage_insert', 'tier_usage_move', 'tier_usage_delete')") == 3;
	if (v->counted &&
	    sqlite3_prepare_v2(db, "SELECT location, frames, bytes FROM tier_usage", -1, &st, NULL) == SQLITE_OK) {
		while (sqlite3_step(st) == SQLITE_ROW) {
			int l = ing_location_parse((const char *)sqlite3_column_text(st, 0));
			if (l >= 0) {
				v->used_frames[l] = sqlite3_column_int64(st, 1);
				v->used_bytes[l] = sqlite3_column_int64(st, 2);
			}
		}
	}
	sqlite3_finalize(st);
	if (v->sc.outbox && v->sc.location) {
		v->queued = query_i64(db, "SELECT count(*) FROM tier_outbox");
		v->orphans = query_i64(db, "SELECT count(*) FROM tier_outbox o WHERE NOT EXISTS (SELECT 1"
				       " FROM frames f WHERE f.wafer_id = o.wafer_id AND f.frame_id = o.frame_id)");
		if (v->sc.tier_on)
			v->unqueued = query_i64(db, "SELECT count(*) FROM frames f WHERE location = 'local' AND"
						" NOT EXISTS (SELECT 1 FROM tier_outbox o WHERE o.wafer_id ="
						" f.wafer_id AND o.frame_id = f.frame_id)");
	}
	sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
	sqlite3_close(db);
}

/* "local 3 frames 300 bytes, both ..., tiered ..." */
static void locations_text(const int64_t *f, const int64_t *b, char *out, size_t n)
{
	snprintf(out, n, "local %" PRId64 " frames %" PRId64 " bytes, both %" PRId64 " frames %" PRId64
		 " bytes, tiered %" PRId64 " frames %" PRId64 " bytes", f[0], b[0], f[1], b[1], f[2], b[2]);
}

static int check(const C *c)
{
	char path[4096], why[800] = "", holder[64], note[600] = "";
	int64_t rows = -1, local_rows = -1, files = ing_store_count_frames(c->data_dir);
	struct tier_view tv;
	const char *fix = NULL;   /* the fix, when not a rebuild */
	bool ok = false;

	memset(&tv, 0, sizeof(tv));
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
		tier_view_read(path, &tv);
		/* a frame only in the object store has a row and no file */
		local_rows = tv.sc.location ? tv.frames[ING_LOC_LOCAL] + tv.frames[ING_LOC_BOTH] : rows;
		bool counts_differ = tv.counted && (memcmp(tv.frames, tv.used_frames, sizeof(tv.frames)) ||
						    memcmp(tv.bytes, tv.used_bytes, sizeof(tv.bytes)));
		if (rows < 0)
			snprintf(why, sizeof(why), "the rows cannot be counted");
		else if (files < 0)
			snprintf(why, sizeof(why), "%s/frames: %s", c->data_dir, strerror((int)-files));
		else if (interrupted)
			snprintf(why, sizeof(why), "an interrupted prune (%s/" PRUNE_JOURNAL ", %" PRId64
				 " rows, %" PRId64 " frame files)", c->data_dir, rows, files);
		else if (local_rows != files && lock != -EBUSY)
			snprintf(why, sizeof(why), "%" PRId64 " rows with a local copy for %" PRId64 " frame files%s",
				 local_rows, files, tv.frames[ING_LOC_TIERED] ? " (the rows of frames only in the "
				 "object store have none)" : "");
		else if (counts_differ) {
			char a[200], b[200];
			locations_text(tv.used_frames, tv.used_bytes, a, sizeof(a));
			locations_text(tv.frames, tv.bytes, b, sizeof(b));
			snprintf(why, sizeof(why), "the object store tier's count of where the frames are "
				 "(tier_usage, what --local-high-water holds to: %s) is not the rows' (%s)", a, b);
			fix = "restart ingestd: at start with --tier it counts them again from the rows";
		} else if (tv.unqueued > 0) {
			snprintf(why, sizeof(why), "%" PRId64 " local frames are not queued for the object store "
				 "(tier_outbox)", tv.unqueued);
			fix = "restart ingestd: at start with --tier it queues every local frame";
		} else
			ok = true;
		if (tv.orphans > 0)
			snprintf(note, sizeof(note), "%" PRId64 " queued uploads name frames no longer in the "
				 "catalog (deleted by a prune before it knew the tier): ingestd drops them at start "
				 "with --tier, or when it comes to them", tv.orphans);
		else if (tv.queued > 0 && !tv.sc.tier_on)
			snprintf(note, sizeof(note), "%" PRId64 " frames are queued for the object store by a run "
				 "with --tier; this node runs without it now", tv.queued);
	}
	ing_catalog_close(cat);
	if (c->json) {
		printf("{\"dataDir\":");
		ing_json_str(stdout, c->data_dir);
		printf(",\"ok\":%s,\"rows\":%" PRId64 ",\"localRows\":%" PRId64 ",\"files\":%" PRId64
		       ",\"ingestdRunning\":%s,\"tier\":{\"on\":%s,\"local\":%" PRId64 ",\"both\":%" PRId64
		       ",\"tiered\":%" PRId64 ",\"queued\":%" PRId64 ",\"orphanedUploads\":%" PRId64
		       ",\"unqueued\":%" PRId64 ",\"countsChecked\":%s},\"problem\":", ok ? "true" : "false", rows,
		       local_rows, files, lock == -EBUSY ? "true" : "false", tv.sc.tier_on ? "true" : "false",
		       tv.frames[ING_LOC_LOCAL], tv.frames[ING_LOC_BOTH], tv.frames[ING_LOC_TIERED],
		       tv.queued, tv.orphans, tv.unqueued, tv.counted ? "true" : "false");
		ing_json_str(stdout, why);
		printf(",\"note\":");
		ing_json_str(stdout, note);
		printf("}\n");
		return ok ? ING_EXIT_OK : ING_EXIT_FAILURE;
	}
	if (ok) {
		printf("%s: %s: quick_check ok, %" PRId64 " rows, %" PRId64 " frame files%s\n", PROG, path, rows,
		       files, lock == -EBUSY ? " (ingestd is running: frames in flight may differ)" : "");
		if (tv.sc.location && (tv.frames[ING_LOC_BOTH] || tv.frames[ING_LOC_TIERED] || tv.queued > 0))
			printf("%s: object store tier: %" PRId64 " frames local (%" PRId64 " queued for the store), "
			       "%" PRId64 " both, %" PRId64 " only in the store%s\n", PROG, tv.frames[ING_LOC_LOCAL],
			       tv.queued > 0 ? tv.queued : 0, tv.frames[ING_LOC_BOTH], tv.frames[ING_LOC_TIERED],
			       tv.counted ? "; the tier's counts match the rows" : "");
	} else if (interrupted && rows >= 0) {
		printf("%s: %s: %s: finish it: %s prune --data-dir %s --older-than 36500d (that deletes "
		       "nothing else)\n", PROG, path, why, PROG, c->data_dir);
	} else if (fix) {
		printf("%s: %s: %s: %s\n", PROG, path, why, fix);
	} else {
		printf("%s: %s: %s: stop ingestd, then: %s rebuild --data-dir %s (docs/OPERATIONS.md, "
		       "Catalog recovery)\n", PROG, path, why, PROG, c->data_dir);
	}
	if (note[0])
		printf("%s: %s\n", PROG, note);
	return ok ? ING_EXIT_OK : ING_EXIT_FAILURE;
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
	if (!is_prune && (c.older_than_set || c.wafer || c.dry_run || c.include_unverified ||
			  c.forget_in_store))
		return ing_cli_usage_error(&cli, "--older-than, --wafer, --dry-run, --include-unverified and "
					   "--forget-in-store go with prune");
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
