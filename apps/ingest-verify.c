/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ingest-verify - check what ingestd stored against what ingest-send sent.
 *
 * Expected frames come from a manifest written by `ingest-send --manifest PATH` (lines
 * "frame_id wafer length crc32c source", ids escaped as common/ident.h's ing_id_escape,
 * source "synth:SEED" or "file:PATH"; v1 manifests of numeric ids are still read), or
 * from the same synthetic parameters as the send (--id-prefix, --first-id, --count,
 * --size/--sizes, --seed, --wafer). For every frame it checks:
 *   - <data-dir>/frames/<wafer>/<frame>.frame (names from ing_id_file_name) exists and has
 *     exactly `length` bytes;
 *   - its crc32c equals the expected one, and its bytes equal the regenerated synthetic
 *     content (synth:) or the source file (file:, when that file is still readable);
 *   - catalog.db has the frame's row with the same wafer, length, crc32c and path.
 * With --allow-missing (after a crash: the manifest lists what was sent, not what was
 * acked) a frame without a catalog row counts as missing, not bad; a frame that has a row
 * must still pass every check, since its row is what a DURABLE ack promised.
 * Frames the node has tiered (catalog location both or tiered, README "Object store tier")
 * are checked in the object store the same way, with --tier URL --tier-credentials FILE
 * (the node's): the object has exactly `length` bytes, whose crc32c and content are the
 * expected ones, and its x-amz-meta-crc32c and ETag are the catalog's. A tiered frame
 * (no local copy left) without --tier cannot be checked: reported, exit 1.
 * With --fleet CONNINFO (a fleet of nodes, docs/FLEET_NODE.md): every manifest frame must
 * have a row in the fleet catalog (PostgreSQL) on at least one node, and every such copy
 * must be intact in that node's catalog and file (--data-dir NODE=DIR, once per node);
 * copies on two nodes with the same CRC are counted as duplicates, not errors.
 * Exit status: 0 all good, 1 a frame bad or missing (or the catalog unreadable), 2 usage.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cli.h"
#include "common/io.h"
#include "common/parse.h"
#include "common/clock.h"
#include "common/crc32c.h"
#include "common/ident.h"
#include "dataplane/store/s3.h"
#include "dataplane/store/store.h"
#include "producer/synth.h"
#include "control/fleet/fleet.h"

#define MAX_FLEET_NODES 64

#define DEFAULT_WAFER "ingest-send"
#define DEFAULT_ID_PREFIX "frame-"

struct expect {
	char id[ING_ID_MAX + 1];
	char wafer[ING_ID_MAX + 1];
	uint64_t key;         /* synthetic content key: synth_key(id), or the number (v1) */
	uint64_t len;
	uint32_t crc;
	bool has_crc;
	bool synth;
	uint64_t seed;
	char src[PATH_MAX];   /* file: source */
};

struct verify {
	const char *data_dir;
	struct ing_catalog *cat;   /* read-only (dataplane/store/catalog.c) */
	bool check_catalog;
	bool allow_missing;
	bool quiet;
	unsigned max_errors;
	unsigned shown;
	uint8_t *buf, *buf2;
	size_t cap, cap2;
	uint64_t frames, ok, bad, bytes, missing;
	/* the object store (--tier): frames with a verified object are checked there too */
	struct ing_s3 *s3;
	uint64_t objects, unchecked;
	size_t got;
};

static void problem(struct verify *v, const struct expect *e, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void problem(struct verify *v, const struct expect *e, const char *fmt, ...)
{
	if (v->shown++ >= v->max_errors)
		return;
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "ingest-verify: frame %s (wafer %s): ", e->id, e->wafer);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

static int grow(uint8_t **b, size_t *cap, uint64_t len)
{
	if (len <= *cap)
		return 0;
	void *n = realloc(*b, (size_t)len);
	if (!n)
		return -ENOMEM;
	*b = n;
	*cap = (size_t)len;
	return 0;
}

/* Read exactly len bytes of path into *b; -EFBIG/-ENODATA when its size differs. */
static int read_exact(const char *path, uint8_t **b, size_t *cap, uint64_t len, uint64_t *size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	struct stat st;
	if (fstat(fd, &st)) {
		int e = -errno;
		close(fd);
		return e;
	}
	*size = (uint64_t)st.st_size;
	if ((uint64_t)st.st_size != len) {
		close(fd);
		return (uint64_t)st.st_size > len ? -EFBIG : -ENODATA;
	}
	if (grow(b, cap, len ? len : 1)) {
		close(fd);
		return -ENOMEM;
	}
	int rc = ing_read_full(fd, *b, len);
	close(fd);
	return rc;
}

static bool check_catalog(struct verify *v, const struct expect *e, const char *rel,
			  struct ing_catalog_row *rowp)
{
	struct ing_catalog_row row;
	bool good = true;
	int rc = ing_catalog_lookup(v->cat, e->wafer, e->id, &row);
	if (rc == 0)
		*rowp = row;

	if (rc == -ENOENT) {
		problem(v, e, "no catalog row");
		return false;
	}
	if (rc) {
		problem(v, e, "catalog lookup: %s", strerror(-rc));
		return false;
	}
	/* the row was found by (wafer, frame): its key columns match by construction */
	if (row.length != e->len) {
		problem(v, e, "catalog length %" PRIu64 ", expected %" PRIu64, row.length, e->len);
		good = false;
	}
	if (e->has_crc && row.crc32c != e->crc) {
		problem(v, e, "catalog crc32c %08x, expected %08x", row.crc32c, e->crc);
		good = false;
	}
	if (strcmp(row.path, rel) && !(row.path[0] == '/' && strstr(row.path, rel))) {
		problem(v, e, "catalog path '%s', expected '%s'", row.path, rel);
		good = false;
	}
	return good;
}

/* 1 the catalog has a row for e, 0 it has none, -1 lookup error (reported) */
static int catalog_has(struct verify *v, const struct expect *e)
{
	int rc = ing_catalog_lookup(v->cat, e->wafer, e->id, NULL);

	if (rc == 0)
		return 1;
	if (rc == -ENOENT)
		return 0;
	problem(v, e, "catalog lookup: %s", strerror(-rc));
	return -1;
}

/* The bytes of a copy (the file, or the object read back) against what was sent. */
static bool check_bytes(struct verify *v, const struct expect *e, const uint8_t *b, const char *what)
{
	bool good = true;
	uint32_t crc = ing_crc32c(0, b, e->len);
	if (e->has_crc && crc != e->crc) {
		problem(v, e, "%scrc32c %08x, expected %08x", what, crc, e->crc);
		good = false;
	}
	if (e->synth) {
		uint64_t at = synth_compare(b, e->len, e->key, e->seed);
		if (at != UINT64_MAX) {
			problem(v, e, "%scontent differs from the synthetic frame at byte %" PRIu64, what, at);
			good = false;
		}
	} else if (e->src[0]) {
		uint64_t ssize;
		int r2 = read_exact(e->src, &v->buf2, &v->cap2, e->len, &ssize);
		if (r2 == 0 && memcmp(b, v->buf2, e->len)) {
			problem(v, e, "%scontent differs from %s", what, e->src);
			good = false;
		} else if (r2 && !v->quiet) {
			fprintf(stderr, "ingest-verify: frame %s: source %s not compared (%s)\n",
				e->id, e->src, strerror(-r2));
		}
	}
	return good;
}

static int object_sink(void *arg, const uint8_t *p, size_t n)
{
	struct verify *v = arg;
	if (v->got + n > v->cap)
		return -EFBIG;
	memcpy(v->buf + v->got, p, n);
	v->got += n;
	return 0;
}

/* The frame's object in the store: its length, bytes and metadata as the catalog says. */
static bool check_object(struct verify *v, const struct expect *e, const struct ing_catalog_row *row)
{
	char key[ING_S3_KEY_MAX + 1], why[1024];
	struct ing_s3_object o;
	if (ing_s3_key(v->s3, key, sizeof(key), e->wafer, e->id)) {
		problem(v, e, "no object key for these ids");
		return false;
	}
	if (grow(&v->buf, &v->cap, e->len + 1)) {
		problem(v, e, "out of memory");
		return false;
	}
	v->got = 0;
	enum ing_s3_result res = ing_s3_get(v->s3, key, 0, 0, object_sink, v, &o, why, sizeof(why));
	v->objects++;
	if (res != ING_S3_OK) {
		problem(v, e, "object %s: %s", key, why);
		return false;
	}
	if (v->got != e->len) {
		problem(v, e, "object %s has %zu bytes, expected %" PRIu64, key, v->got, e->len);
		return false;
	}
	bool good = check_bytes(v, e, v->buf, "object: ");
	if (!o.has_crc || o.crc32c != row->crc32c) {
		problem(v, e, "object %s: x-amz-meta-crc32c %s%08x, the catalog %08x", key,
			o.has_crc ? "" : "missing/", o.crc32c, row->crc32c);
		good = false;
	}
	if (row->object_md5[0] && strcmp(o.etag, row->object_md5)) {
		problem(v, e, "object %s: ETag %s, the catalog recorded %s", key, o.etag, row->object_md5);
		good = false;
	}
	return good;
}

static bool check_frame(struct verify *v, struct expect *e)
{
	char rel[512], full[PATH_MAX + 600];
	uint64_t size = 0;
	bool good = true;
	struct ing_catalog_row row = { .location = ING_LOC_LOCAL };

	if (v->allow_missing) {
		int has = catalog_has(v, e);
		if (has <= 0) {
			v->frames++;
			if (has == 0)
				v->missing++;
			else
				v->bad++;
			return has == 0;
		}
	}
	char wn[ING_ID_FILE_NAME_MAX + 1], fn[ING_ID_FILE_NAME_MAX + 1];
	if (ing_id_file_name(wn, sizeof(wn), e->wafer) || ing_id_file_name(fn, sizeof(fn), e->id)) {
		problem(v, e, "frame or wafer id breaks the id rule (" ING_ID_RULE ")");
		v->frames++;
		v->bad++;
		return false;
	}
	snprintf(rel, sizeof(rel), "frames/%s/%s.frame", wn, fn);
	snprintf(full, sizeof(full), "%s/%s", v->data_dir, rel);
	if (v->check_catalog && !check_catalog(v, e, rel, &row))
		good = false;
	/* a tiered frame's local copy was deleted on purpose, once its object was verified */
	if (row.location != ING_LOC_TIERED) {
		int rc = read_exact(full, &v->buf, &v->cap, e->len, &size);
		if (rc == -EFBIG || rc == -ENODATA) {
			problem(v, e, "%s has %" PRIu64 " bytes, expected %" PRIu64, full, size, e->len);
			good = false;
		} else if (rc == -ENOENT && row.location == ING_LOC_BOTH) {
			/* the node's retention deleted it while this ran (only a copy whose object
			 * it verified): the object, checked below with --tier, is the copy now */
			row.location = ING_LOC_TIERED;
		} else if (rc) {
			problem(v, e, "%s: %s", full, strerror(-rc));
			good = false;
		} else if (!check_bytes(v, e, v->buf, "")) {
			good = false;
		}
	}
	if (row.location != ING_LOC_LOCAL && v->s3) {
		if (!check_object(v, e, &row))
			good = false;
	} else if (row.location == ING_LOC_TIERED) {
		v->unchecked++;
		problem(v, e, "tiered: its bytes are only in the object store (give the node's --tier URL and "
			"--tier-credentials FILE to check them there)");
		good = false;
	}
	v->frames++;
	if (good) {
		v->ok++;
		v->bytes += e->len;
	} else {
		v->bad++;
	}
	return good;
}

/* One manifest line; version 1 had numeric ids (their synthetic content key is the number). */
static int parse_manifest_line(char *line, struct expect *e, int version)
{
	char src[PATH_MAX + 16], tid[3 * ING_ID_MAX + 1], tw[3 * ING_ID_MAX + 1];
	unsigned long long len;
	unsigned crc;
	memset(e, 0, sizeof(*e));
	if (sscanf(line, "%768s %768s %llu %x %4111[^\n]", tid, tw, &len, &crc, src) != 5)
		return -EINVAL;
	if (ing_id_unescape(e->id, sizeof(e->id), tid) || ing_id_unescape(e->wafer, sizeof(e->wafer), tw))
		return -EINVAL;
	if (version == 1) {
		if (ing_parse_u64(e->id, UINT64_MAX, &e->key))
			return -EINVAL;
	} else {
		e->key = synth_key(e->id);
	}
	e->len = len;
	e->crc = crc;
	e->has_crc = true;
	if (!strncmp(src, "synth:", 6)) {
		e->synth = true;
		if (ing_parse_u64(src + 6, UINT64_MAX, &e->seed))
			return -EINVAL;
	} else if (!strncmp(src, "file:", 5)) {
		if (strlen(src + 5) >= sizeof(e->src))
			return -EINVAL;
		memcpy(e->src, src + 5, strlen(src + 5) + 1);
	} else {
		return -EINVAL;
	}
	return 0;
}

/* ---------------------------------------------------------------- options */

struct verify_cfg {
	const char *data_dirs[MAX_FLEET_NODES];   /* --data-dir, once (or once per node) */
	unsigned ndirs;
	const char *manifest, *wafer, *prefix, *fleet, *sizes;
	uint64_t first, count, size, seed;
	unsigned max_errors;
	bool no_catalog, allow_missing, json, quiet;
	struct synth_spec synth;
	/* the node's object store (ingestd --tier ...) */
	const char *tier, *tier_credentials, *tier_region;
	int tier_path_style;
	struct ing_s3 s3;
};

static void cfg_init(void *p)
{
	struct verify_cfg *c = p;
	memset(c, 0, sizeof(*c));
	c->wafer = DEFAULT_WAFER;
	c->prefix = DEFAULT_ID_PREFIX;
	c->first = 1;
	c->size = 4u << 20;
	c->seed = 1;
	c->max_errors = 20;
	c->tier_path_style = 1;
	ing_s3_init(&c->s3);
}

static int set_data_dir(const struct ing_opt *d, void *cfg, const char *v, char *why, size_t whylen)
{
	struct verify_cfg *c = cfg;
	(void)d;
	if (!*v) {
		snprintf(why, whylen, "empty value: give a directory");
		return -EINVAL;
	}
	if (c->ndirs == MAX_FLEET_NODES) {
		snprintf(why, whylen, "more than %d data dirs", MAX_FLEET_NODES);
		return -EINVAL;
	}
	c->data_dirs[c->ndirs++] = v;
	return 0;
}

#define C struct verify_cfg
static const struct ing_opt opts[] = {
	ING_OPT_GROUP_("What to check"),
	ING_OPT_CUSTOM_(C, "data-dir", data_dirs, set_data_dir, "DIR", "ingestd's data dir (--fleet: NODE=DIR, once per node)"),
	ING_OPT_PATH_(C, "manifest", manifest, "PATH", "written by ingest-send --manifest (or --durable-manifest)"),
	ING_OPT_GROUP_("The frames sent (without a manifest)"),
	ING_OPT_U64_(C, "first-id", first, 0, UINT64_MAX, "without a manifest, the synthetic frames of a send with the\n"
		     "same --first-id, --count, --size/--sizes, --seed, --wafer,\n"
		     "--id-prefix: the first counter"),
	ING_OPT_U64_(C, "count", count, 0, 1ull << 40, "how many synthetic frames"),
	ING_OPT_SIZE_(C, "size", size, 1, 1ull << 40, "their size"),
	ING_OPT_STR_(C, "sizes", sizes, "LIST", "their sizes, as ingest-send --sizes (e.g. 1M-16M)"),
	ING_OPT_U64_(C, "seed", seed, 0, UINT64_MAX, "their seed"),
	ING_OPT_STR_(C, "wafer", wafer, "ID", "their wafer (default " DEFAULT_WAFER ")"),
	ING_OPT_STR_(C, "id-prefix", prefix, "P", "their frame id prefix (default " DEFAULT_ID_PREFIX ")"),
	ING_OPT_GROUP_("Checks"),
	ING_OPT_BOOL_(C, "no-catalog", no_catalog, "do not check catalog.db (ingestd --sink null)"),
	ING_OPT_BOOL_(C, "allow-missing", allow_missing, "a frame without a catalog row is missing, not bad (after a\n"
		      "crash: a manifest of sent frames; rows must still be intact)"),
	ING_OPT_UINT_(C, "max-errors", max_errors, 0, UINT32_MAX, "problems printed"),
	ING_OPT_GROUP_("Output"),
	ING_OPT_BOOL_(C, "json", json, "summary as JSON on stdout"),
	ING_OPT_BOOL_(C, "quiet", quiet, "only problems and the exit status"),
	ING_OPT_GROUP_("Object store tier and fleet"),
	ING_OPT_STR_(C, "tier", tier, "URL", "the node's object store (ingestd --tier): frames the catalog\n"
		     "has there (location both or tiered) are read back and\n"
		     "checked there too"),
	ING_OPT_PATH_(C, "tier-credentials", tier_credentials, "FILE", "its keys (ingestd --tier-credentials)"),
	ING_OPT_STR_(C, "tier-region", tier_region, "NAME", "its SigV4 region (default us-east-1)"),
	ING_OPT_CHOICE_(C, "tier-path-style", tier_path_style, "on=1|off=0", "path-style requests (default on)"),
	ING_OPT_STR_(C, "fleet", fleet, "CONNINFO", "a fleet: every frame in the fleet catalog (PostgreSQL, libpq\n"
		     "conninfo) on >= 1 node, each copy intact in that node's\n"
		     "catalog and file (--data-dir NODE=DIR once per node); copies\n"
		     "on two nodes with the same crc32c are counted, not errors"),
};

static const struct ing_cli cli = {
	.prog = "ingest-verify",
	.synopsis = "--data-dir DIR (--manifest PATH | --count N ...) [options]",
	.summary = "check stored h3000 frames against what was sent, byte for byte",
	.about = "For every frame of a manifest (or of the synthetic parameters of a send): its\n"
		 "file exists with the length, crc32c and bytes sent, and catalog.db has its row.\n"
		 "  ingest-verify --fleet CONNINFO --manifest PATH --data-dir NODE=DIR...\n"
		 "checks a fleet of nodes.\n",
	.opts = opts,
	.nopts = sizeof(opts) / sizeof(opts[0]),
	.max_args = 0,
	.init = cfg_init,
	.cfg_size = sizeof(struct verify_cfg),
	.exit_status = "  0  every frame is stored intact\n"
		       "  1  a frame is bad or missing, no frame was checked, or the catalog or the\n"
		       "     manifest could not be read\n"
		       "  2  usage error\n",
};

/* The options and the checks between them: 0, 1 (--help/--version) or 2. */
static int parse_args(int argc, char **argv, struct verify_cfg *c)
{
	char why[256];
	int argi, rc = ing_cli_parse(&cli, argc, argv, c, &argi);
	if (rc)
		return rc;
	if (c->sizes) {
		if (synth_spec_sizes(&c->synth, c->sizes, why, sizeof(why)))
			return ing_cli_usage_error(&cli, "--sizes: %s", why);
		c->synth.seed = c->seed;
	} else {
		synth_spec_fixed(&c->synth, c->seed, c->size);
	}
	if (c->count && c->first > UINT64_MAX - (c->count - 1))
		return ing_cli_usage_error(&cli, "--first-id %" PRIu64 " + --count %" PRIu64
					   " passes the largest frame id", c->first, c->count);
	if (c->fleet) {
		if (!c->manifest || !c->ndirs)
			return ing_cli_usage_error(&cli, "--fleet needs --manifest PATH and --data-dir "
						   "NODE=DIR for each node");
		return 0;
	}
	if (!c->ndirs)
		return ing_cli_usage_error(&cli, "--data-dir DIR is missing (ingestd's data dir)");
	if (c->ndirs > 1)
		return ing_cli_usage_error(&cli, "--data-dir given %u times: one node, one data dir "
					   "(several only with --fleet)", c->ndirs);
	if (!c->manifest && !c->count)
		return ing_cli_usage_error(&cli, "nothing to check: give --manifest PATH, or --count N "
					   "and the other synthetic parameters of the send");
	if (c->allow_missing && c->no_catalog)
		return ing_cli_usage_error(&cli, "--allow-missing needs the catalog (not --no-catalog)");
	if (!*c->wafer)
		c->wafer = ING_DEFAULT_WAFER;
	if (ing_id_check(c->wafer, strlen(c->wafer)))
		return ing_cli_usage_error(&cli, "--wafer: a wafer id is " ING_ID_RULE);
	if (c->tier || c->tier_credentials) {
		char twhy[PATH_MAX + 160];
		if (!c->tier || !c->tier_credentials)
			return ing_cli_usage_error(&cli, "--tier and --tier-credentials go together");
		if (c->no_catalog)
			return ing_cli_usage_error(&cli, "--tier needs the catalog (it says where each frame is)");
		if (ing_s3_parse_url(&c->s3, c->tier, twhy, sizeof(twhy)))
			return ing_cli_usage_error(&cli, "--tier: %s", twhy);
		if (ing_s3_read_credentials(&c->s3, c->tier_credentials, twhy, sizeof(twhy)))
			return ing_cli_usage_error(&cli, "--tier-credentials: '%s': %s", c->tier_credentials, twhy);
		if (c->tier_region)
			snprintf(c->s3.region, sizeof(c->s3.region), "%s", c->tier_region);
		c->s3.path_style = c->tier_path_style != 0;
	}
	return 0;
}

/* --fleet CONNINFO --manifest PATH --data-dir NODE=DIR...: ing_fleet_verify */
static int fleet_main(const char *conninfo, const char *manifest, const char *const *dirs,
		      unsigned ndirs, unsigned max_errors, bool json, bool quiet)
{
	static struct ing_fleet_verify_node nodes[MAX_FLEET_NODES];
	static char ids[MAX_FLEET_NODES][ING_FLEET_ID_MAX + 1];
	for (unsigned i = 0; i < ndirs; i++) {
		const char *eq = strchr(dirs[i], '=');
		if (!eq || eq == dirs[i] || !eq[1] || (size_t)(eq - dirs[i]) > ING_FLEET_ID_MAX)
			return ing_cli_usage_error(&cli, "--fleet: --data-dir '%s' is not NODE=DIR", dirs[i]);
		snprintf(ids[i], sizeof(ids[i]), "%.*s", (int)(eq - dirs[i]), dirs[i]);
		nodes[i].node_id = ids[i];
		nodes[i].data_dir = eq + 1;
	}
	struct ing_fleet_verify_result r;
	uint64_t t0 = ing_now_ns();
	if (ing_fleet_verify(conninfo, manifest, nodes, ndirs, max_errors, &r))
		return ING_EXIT_FAILURE;   /* said why */
	double s = (double)(ing_now_ns() - t0) / 1e9;
	if (json)
		printf("{\"frames\":%" PRIu64 ",\"ok\":%" PRIu64 ",\"missing\":%" PRIu64 ",\"bad\":%" PRIu64
		       ",\"copies\":%" PRIu64 ",\"duplicates\":%" PRIu64 ",\"unknown_node\":%" PRIu64
		       ",\"nodes\":%u,\"seconds\":%.3f}\n", r.frames, r.ok, r.missing, r.bad, r.copies,
		       r.duplicates, r.unknown_node, ndirs, s);
	else if (!quiet)
		fprintf(stderr, "ingest-verify --fleet: %" PRIu64 " frames in %.2f s: %" PRIu64 " ok, %" PRIu64
			" missing, %" PRIu64 " bad; %" PRIu64 " copies on %u nodes, %" PRIu64
			" frames stored twice or more (same crc32c: allowed)%s\n", r.frames, s, r.ok,
			r.missing, r.bad, r.copies, ndirs, r.duplicates,
			r.unknown_node ? "; some copies on nodes not given with --data-dir" : "");
	return r.missing || r.bad || !r.frames ? 1 : 0;
}

/* Open catalog.db read-only (unless --no-catalog): 0 or the exit status, said why. */
static int open_catalog(const struct verify_cfg *c, struct verify *v)
{
	char db[PATH_MAX];
	struct stat st;

	if (!v->check_catalog)
		return 0;
	snprintf(db, sizeof(db), "%s/catalog.db", v->data_dir);
	if (stat(db, &st)) {
		fprintf(stderr, "ingest-verify: %s: %s (is --data-dir ingestd's data dir? use "
			"--no-catalog for a node run with --sink null)\n", db, strerror(errno));
		return ING_EXIT_FAILURE;
	}
	(void)c;
	v->cat = ing_catalog_open_ro(db);   /* logs why not */
	if (!v->cat) {
		fprintf(stderr, "ingest-verify: %s: cannot open the catalog\n", db);
		return ING_EXIT_FAILURE;
	}
	return 0;
}

/* Every frame of the manifest: 0, or the exit status when it cannot be read. */
static int check_manifest(const char *manifest, struct verify *v, struct expect *e)
{
	FILE *f = fopen(manifest, "r");
	if (!f) {
		fprintf(stderr, "ingest-verify: --manifest %s: %s\n", manifest, strerror(errno));
		return ING_EXIT_FAILURE;
	}
	char line[PATH_MAX + 2048];
	unsigned lineno = 0;
	int version = 2;
	while (fgets(line, sizeof(line), f)) {
		lineno++;
		if (lineno == 1 && !strncmp(line, "# ingest-send manifest v1:", 26))
			version = 1;
		if (line[0] == '#' || line[0] == '\n')
			continue;
		if (parse_manifest_line(line, e, version)) {
			fprintf(stderr, "ingest-verify: %s:%u: not 'frame_id wafer length crc32c source'\n",
				manifest, lineno);
			v->bad++;
			continue;
		}
		check_frame(v, e);
	}
	fclose(f);
	return 0;
}

/* Every synthetic frame of --first-id, --count, --size(s), --seed, --wafer, --id-prefix. */
static void check_synthetic(const struct verify_cfg *c, struct verify *v, struct expect *e)
{
	for (uint64_t i = 0; i < c->count; i++) {
		memset(e, 0, sizeof(*e));
		snprintf(e->id, sizeof(e->id), "%s%" PRIu64, c->prefix, c->first + i);
		snprintf(e->wafer, sizeof(e->wafer), "%s", c->wafer);
		e->key = synth_key(e->id);
		e->len = synth_frame_len(&c->synth, e->key);
		e->synth = true;
		e->seed = c->synth.seed;
		check_frame(v, e);
	}
}

static void summary(const struct verify_cfg *c, const struct verify *v, double s)
{
	if (v->shown > v->max_errors)
		fprintf(stderr, "ingest-verify: (%u more problems not shown)\n", v->shown - v->max_errors);
	if (c->json)
		printf("{\"frames\":%" PRIu64 ",\"ok\":%" PRIu64 ",\"bad\":%" PRIu64 ",\"missing\":%" PRIu64
		       ",\"bytes\":%" PRIu64 ",\"catalog\":%s,\"objects\":%" PRIu64 ",\"unchecked\":%" PRIu64
		       ",\"seconds\":%.3f}\n", v->frames, v->ok, v->bad, v->missing, v->bytes,
		       v->check_catalog ? "true" : "false", v->objects, v->unchecked, s);
	else if (!v->quiet)
		fprintf(stderr, "ingest-verify: %" PRIu64 " frames checked (%.1f MiB) in %.2f s: %" PRIu64
			" ok, %" PRIu64 " bad%s; %" PRIu64 " objects read back from the store%s\n", v->frames,
			(double)v->bytes / 1048576.0, s, v->ok, v->bad,
			v->check_catalog ? " (files, bytes, crc32c and catalog rows)" : " (catalog not checked)",
			v->objects, v->unchecked ? ", tiered frames not checked: give --tier" : "");
	if (v->allow_missing && !v->quiet && !c->json)
		fprintf(stderr, "ingest-verify: %" PRIu64 " frames not in the catalog (never made durable)\n",
			v->missing);
}

int main(int argc, char **argv)
{
	static struct verify_cfg c;
	struct verify v = { 0 };
	int rc;

	cfg_init(&c);
	rc = parse_args(argc, argv, &c);
	if (rc)
		return rc == 1 ? ING_EXIT_OK : rc;
	if (c.fleet)
		return fleet_main(c.fleet, c.manifest, c.data_dirs, c.ndirs, c.max_errors, c.json, c.quiet);
	v.data_dir = c.data_dirs[0];
	v.check_catalog = !c.no_catalog;
	v.allow_missing = c.allow_missing;
	v.quiet = c.quiet;
	v.max_errors = c.max_errors;
	v.s3 = c.tier ? &c.s3 : NULL;
	rc = open_catalog(&c, &v);
	struct expect *e = rc ? NULL : malloc(sizeof(*e));
	if (!rc && !e)
		rc = ING_EXIT_FAILURE;
	uint64_t t0 = ing_now_ns();
	if (!rc && c.manifest)
		rc = check_manifest(c.manifest, &v, e);
	if (!rc) {
		check_synthetic(&c, &v, e);
		summary(&c, &v, (double)(ing_now_ns() - t0) / 1e9);
		rc = v.bad || !v.frames ? ING_EXIT_FAILURE : ING_EXIT_OK;
	}
	free(e);
	ing_catalog_close(v.cat);
	free(v.buf);
	free(v.buf2);
	explicit_bzero(&c.s3, sizeof(c.s3));
	return rc;
}
