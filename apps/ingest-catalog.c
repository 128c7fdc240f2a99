/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ingest-catalog: the catalog of a data dir, for when something went wrong with it.
 *   check    SQLite's quick_check, and the rows against the frame files (exit 1: damaged
 *            or not in step, with the fix)
 *   rebuild  a new catalog.db from the frame files (dataplane/store/rebuild.c): ids from
 *            the file names, CRC-32C recomputed; the damaged file is kept beside it
 * Both refuse a data dir an ingestd is running on. Exit status: 0 done / consistent, 1 not
 * (what and why printed), 2 usage error.
 */
#include "common/json.h"
#include "common/cli.h"
#include "common/log.h"
#include "control/node/opts.h"
#include "dataplane/store/store.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define PROG "ingest-catalog"

struct cat_cfg {
	const char *data_dir, *config;
	bool json;
};
#define C struct cat_cfg

static void cfg_init(void *p)
{
	C *c = p;
	memset(c, 0, sizeof(*c));
}

static const struct ing_opt opts[] = {
	ING_OPT_PATH_(C, "data-dir", data_dir, "DIR", "ingestd's data dir (catalog.db and frames/)"),
	{ "config", "FILE", ING_OPT_PATH, offsetof(C, config), 0, 0, 0, NULL, NULL,
	  "ingestd's config file: its data-dir (a --data-dir given here wins)", NULL, 0 },
	ING_OPT_BOOL_(C, "json", json, "the result as one JSON object"),
	ING_OPT_LOG_LEVEL_ENTRY(C, "info"),
};

static const struct ing_cli cli = {
	.prog = PROG,
	.synopsis = "check|rebuild (--data-dir DIR | --config FILE) [--json]",
	.summary = "check or rebuild the catalog of an h3000 ingest node's data dir",
	.about = "check: SQLite's quick_check of <data-dir>/catalog.db, and its rows counted against\n"
		 "  the frame files; the fix when they disagree.\n"
		 "rebuild: a new catalog.db from the frame files: every frames/<wafer>/<frame>.frame\n"
		 "  becomes a row, its ids decoded from the escaped names, its CRC-32C recomputed,\n"
		 "  its timestamps and the acknowledged CRC taken from the old catalog's readable rows\n"
		 "  (shortened names of ids above 200 bytes need them). The damaged catalog is kept\n"
		 "  as catalog.db.damaged-<time>. Stop ingestd first: the data dir is locked.\n",
	.opts = opts,
	.nopts = sizeof(opts) / sizeof(opts[0]),
	.max_args = 1,
	.init = cfg_init,
	.cfg_size = sizeof(C),
	.notes = "A catalog SQLite cannot read makes ingestd stop at start with 'catalog.db is\n"
		 "damaged (...): ... ingest-catalog rebuild --data-dir DIR'. After a rebuild,\n"
		 "start ingestd again; a fleet node exports the rebuilt rows once more (the fleet\n"
		 "catalog ignores the ones it has). docs/OPERATIONS.md, Catalog recovery.\n",
	.exit_status = "  0  check: consistent; rebuild: every frame file catalogued\n"
		       "  1  check: damaged or not in step with the files; rebuild: failed, or some\n"
		       "     files not catalogued or with another CRC than acknowledged (listed)\n"
		       "  2  usage error\n",
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

static int rebuild(const C *c)
{
	struct ing_catalog_rebuild_report r;
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
	} else {
		printf("%s: %s: %s: stop ingestd, then: %s rebuild --data-dir %s (docs/OPERATIONS.md, "
		       "Catalog recovery)\n", PROG, path, why, PROG, c->data_dir);
	}
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
		return ing_cli_usage_error(&cli, "say what to do: check or rebuild");
	if (!c.data_dir)
		return ing_cli_usage_error(&cli, "--data-dir DIR (or --config FILE) is needed");
	if (!strcmp(argv[argi], "check"))
		return check(&c);
	if (!strcmp(argv[argi], "rebuild"))
		return rebuild(&c);
	return ing_cli_usage_error(&cli, "'%s' is not check or rebuild", argv[argi]);
}
