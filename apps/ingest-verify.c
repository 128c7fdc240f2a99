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
 * Exit: 0 all good, 1 some frame bad, 2 usage or setup error.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

/* A plain decimal/hex number, no sign, no overflow ("-1" would wrap to 2^64-1). */
static bool parse_u64(const char *s, uint64_t *out)
{
	return ing_parse_u64(s, UINT64_MAX, out) == 0;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: ingest-verify --data-dir DIR (--manifest PATH | synthetic parameters)\n"
		"  --manifest PATH   written by ingest-send --manifest\n"
		"  --first-id N --count N --size SIZE | --sizes MIN-MAX --seed S --wafer ID\n"
		"  [--id-prefix P]   (default " DEFAULT_ID_PREFIX ")\n"
		"                    the same synthetic parameters as the send\n"
		"  --no-catalog      do not check catalog.db\n"
		"  --allow-missing   a frame without a catalog row is missing, not bad (after a\n"
		"                    crash: a manifest of sent frames; rows must still be intact)\n"
		"  --max-errors N    problems printed (default 20)\n"
		"  --tier URL --tier-credentials FILE [--tier-region R] [--tier-path-style on|off]\n"
		"                    the node's object store: frames the catalog has there (location\n"
		"                    both or tiered) are read back and checked there too\n"
		"  --json            summary as JSON on stdout\n"
		"  --quiet           only problems and the exit status\n"
		"       ingest-verify --fleet CONNINFO --manifest PATH --data-dir NODE=DIR...\n"
		"  --fleet CONNINFO  a fleet: every frame in the fleet catalog (PostgreSQL, libpq\n"
		"                    conninfo) on >= 1 node, each copy intact in that node's\n"
		"                    catalog and file (--data-dir NODE=DIR once per node); copies\n"
		"                    on two nodes with the same crc32c are counted, not errors\n");
}

/* --fleet CONNINFO --manifest PATH --data-dir NODE=DIR...: ing_fleet_verify */
static int fleet_main(const char *conninfo, const char *manifest, const char *const *dirs,
		      unsigned ndirs, unsigned max_errors, bool json, bool quiet)
{
	static struct ing_fleet_verify_node nodes[MAX_FLEET_NODES];
	static char ids[MAX_FLEET_NODES][ING_FLEET_ID_MAX + 1];
	if (!manifest || !ndirs) {
		fprintf(stderr, "ingest-verify: --fleet needs --manifest PATH and --data-dir NODE=DIR for each node\n");
		return 2;
	}
	for (unsigned i = 0; i < ndirs; i++) {
		const char *eq = strchr(dirs[i], '=');
		if (!eq || eq == dirs[i] || !eq[1] || (size_t)(eq - dirs[i]) > ING_FLEET_ID_MAX) {
			fprintf(stderr, "ingest-verify: --fleet: --data-dir '%s' is not NODE=DIR\n", dirs[i]);
			return 2;
		}
		snprintf(ids[i], sizeof(ids[i]), "%.*s", (int)(eq - dirs[i]), dirs[i]);
		nodes[i].node_id = ids[i];
		nodes[i].data_dir = eq + 1;
	}
	struct ing_fleet_verify_result r;
	uint64_t t0 = ing_now_ns();
	if (ing_fleet_verify(conninfo, manifest, nodes, ndirs, max_errors, &r))
		return 2;
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

int main(int argc, char **argv)
{
	enum { O_DIR = 256, O_MAN, O_FIRST, O_COUNT, O_SIZE, O_SIZES, O_SEED, O_WAFER, O_NOCAT,
	       O_MAXERR, O_JSON, O_QUIET, O_HELP, O_MISSING, O_PREFIX, O_FLEET, O_TIER, O_TIER_CREDS,
	       O_TIER_REGION, O_TIER_PATH };
	static const struct option lo[] = {
		{ "data-dir", required_argument, 0, O_DIR },
		{ "manifest", required_argument, 0, O_MAN },
		{ "first-id", required_argument, 0, O_FIRST },
		{ "count", required_argument, 0, O_COUNT },
		{ "size", required_argument, 0, O_SIZE },
		{ "sizes", required_argument, 0, O_SIZES },
		{ "seed", required_argument, 0, O_SEED },
		{ "wafer", required_argument, 0, O_WAFER },
		{ "id-prefix", required_argument, 0, O_PREFIX },
		{ "no-catalog", no_argument, 0, O_NOCAT },
		{ "allow-missing", no_argument, 0, O_MISSING },
		{ "max-errors", required_argument, 0, O_MAXERR },
		{ "json", no_argument, 0, O_JSON },
		{ "quiet", no_argument, 0, O_QUIET },
		{ "help", no_argument, 0, O_HELP },
		{ "fleet", required_argument, 0, O_FLEET },
		{ "tier", required_argument, 0, O_TIER },
		{ "tier-credentials", required_argument, 0, O_TIER_CREDS },
		{ "tier-region", required_argument, 0, O_TIER_REGION },
		{ "tier-path-style", required_argument, 0, O_TIER_PATH },
		{ 0, 0, 0, 0 },
	};
	struct verify v = { .check_catalog = true, .max_errors = 20 };
	struct synth_spec sp = { .seed = 1, .size_min = 4u << 20, .size_max = 4u << 20 };
	const char *manifest = NULL, *wafer = DEFAULT_WAFER, *prefix = DEFAULT_ID_PREFIX;
	uint64_t first = 1, count = 0;
	bool json = false;
	const char *fleet = NULL;
	const char *tier = NULL, *tier_creds = NULL, *tier_region = NULL;
	bool path_style = true;
	static struct ing_s3 s3;
	static const char *dirs[MAX_FLEET_NODES];
	unsigned ndirs = 0;
	int opt, ret = 2;
	uint64_t n;

	int li = 0;
	while ((opt = getopt_long(argc, argv, "h", lo, &li)) != -1) {
		switch (opt) {
		case O_DIR:
			v.data_dir = optarg;
			if (ndirs == MAX_FLEET_NODES) {
				fprintf(stderr, "ingest-verify: more than %d --data-dir\n", MAX_FLEET_NODES);
				return 2;
			}
			dirs[ndirs++] = optarg;
			break;
		case O_FLEET: fleet = optarg; break;
		case O_TIER: tier = optarg; break;
		case O_TIER_CREDS: tier_creds = optarg; break;
		case O_TIER_REGION: tier_region = optarg; break;
		case O_TIER_PATH:
			if (strcmp(optarg, "on") && strcmp(optarg, "off"))
				goto bad;
			path_style = !strcmp(optarg, "on");
			break;
		case O_MAN: manifest = optarg; break;
		case O_FIRST: if (!parse_u64(optarg, &first)) goto bad; break;
		case O_COUNT: if (!parse_u64(optarg, &count) || count > (1ull << 40)) goto bad; break;
		case O_SIZE:
			if (synth_parse_size(optarg, &sp.size_min) || !sp.size_min)
				goto bad;
			sp.size_max = sp.size_min;
			break;
		case O_SIZES:
			if (synth_parse_range(optarg, &sp.size_min, &sp.size_max))
				goto bad;
			break;
		case O_SEED: if (!parse_u64(optarg, &sp.seed)) goto bad; break;
		case O_WAFER: wafer = optarg; break;
		case O_PREFIX: prefix = optarg; break;
		case O_NOCAT: v.check_catalog = false; break;
		case O_MISSING: v.allow_missing = true; break;
		case O_MAXERR:
			if (!parse_u64(optarg, &n) || n > UINT32_MAX)
				goto bad;
			v.max_errors = (unsigned)n;
			break;
		case O_JSON: json = true; break;
		case O_QUIET: v.quiet = true; break;
		case O_HELP: case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (count && first > UINT64_MAX - (count - 1)) {
		fprintf(stderr, "ingest-verify: --first-id %" PRIu64 " + --count %" PRIu64
			" passes the largest frame id\n", first, count);
		return 2;
	}
	if (fleet)
		return fleet_main(fleet, manifest, dirs, ndirs, v.max_errors, json, v.quiet);
	if (!v.data_dir || (!manifest && !count) || optind != argc) {
		usage(stderr);
		return 2;
	}
	if (tier || tier_creds) {
		char why[PATH_MAX + 160];
		ing_s3_init(&s3);
		if (!tier || !tier_creds) {
			fprintf(stderr, "ingest-verify: --tier and --tier-credentials go together\n");
			return 2;
		}
		if (ing_s3_parse_url(&s3, tier, why, sizeof(why))) {
			fprintf(stderr, "ingest-verify: --tier: %s\n", why);
			return 2;
		}
		if (ing_s3_read_credentials(&s3, tier_creds, why, sizeof(why))) {
			fprintf(stderr, "ingest-verify: --tier-credentials: '%s': %s\n", tier_creds, why);
			return 2;
		}
		if (tier_region)
			snprintf(s3.region, sizeof(s3.region), "%s", tier_region);
		s3.path_style = path_style;
		if (!v.check_catalog) {
			fprintf(stderr, "ingest-verify: --tier needs the catalog (it says where each frame is)\n");
			return 2;
		}
		v.s3 = &s3;
	}
	if (v.allow_missing && !v.check_catalog) {
		fprintf(stderr, "ingest-verify: --allow-missing needs the catalog (not --no-catalog)\n");
		return 2;
	}
	if (!*wafer)
		wafer = ING_DEFAULT_WAFER;
	if (ing_id_check(wafer, strlen(wafer))) {
		fprintf(stderr, "ingest-verify: bad --wafer: a wafer id is " ING_ID_RULE "\n");
		return 2;
	}
	if (v.check_catalog) {
		char db[PATH_MAX];
		struct stat st;
		snprintf(db, sizeof(db), "%s/catalog.db", v.data_dir);
		if (stat(db, &st)) {
			fprintf(stderr, "ingest-verify: %s: %s (use --no-catalog for --sink null)\n", db,
				strerror(errno));
			return 2;
		}
		v.cat = ing_catalog_open_ro(db);   /* logs why not */
		if (!v.cat) {
			fprintf(stderr, "ingest-verify: %s: cannot open the catalog\n", db);
			goto out;
		}
	}

	uint64_t t0 = ing_now_ns();
	struct expect *e = malloc(sizeof(*e));
	if (!e)
		goto out;
	if (manifest) {
		FILE *f = fopen(manifest, "r");
		if (!f) {
			fprintf(stderr, "ingest-verify: %s: %s\n", manifest, strerror(errno));
			free(e);
			goto out;
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
				fprintf(stderr, "ingest-verify: %s:%u: bad line\n", manifest, lineno);
				v.bad++;
				continue;
			}
			check_frame(&v, e);
		}
		fclose(f);
	}
	for (uint64_t i = 0; i < count; i++) {
		memset(e, 0, sizeof(*e));
		snprintf(e->id, sizeof(e->id), "%s%" PRIu64, prefix, first + i);
		snprintf(e->wafer, sizeof(e->wafer), "%s", wafer);
		e->key = synth_key(e->id);
		e->len = synth_frame_len(&sp, e->key);
		e->synth = true;
		e->seed = sp.seed;
		check_frame(&v, e);
	}
	free(e);
	double s = (double)(ing_now_ns() - t0) / 1e9;
	if (v.shown > v.max_errors)
		fprintf(stderr, "ingest-verify: (%u more problems not shown)\n", v.shown - v.max_errors);
	if (json)
		printf("{\"frames\":%" PRIu64 ",\"ok\":%" PRIu64 ",\"bad\":%" PRIu64 ",\"missing\":%" PRIu64
		       ",\"bytes\":%" PRIu64 ",\"catalog\":%s,\"objects\":%" PRIu64 ",\"unchecked\":%" PRIu64
		       ",\"seconds\":%.3f}\n", v.frames, v.ok, v.bad, v.missing, v.bytes,
		       v.check_catalog ? "true" : "false", v.objects, v.unchecked, s);
	else if (!v.quiet)
		fprintf(stderr, "ingest-verify: %" PRIu64 " frames checked (%.1f MiB) in %.2f s: %" PRIu64
			" ok, %" PRIu64 " bad%s; %" PRIu64 " objects read back from the store%s\n", v.frames,
			(double)v.bytes / 1048576.0, s, v.ok, v.bad,
			v.check_catalog ? " (files, bytes, crc32c and catalog rows)" : " (catalog not checked)",
			v.objects, v.unchecked ? ", tiered frames not checked: give --tier" : "");
	if (v.allow_missing && !v.quiet && !json)
		fprintf(stderr, "ingest-verify: %" PRIu64 " frames not in the catalog (never made durable)\n",
			v.missing);
	ret = v.bad || !v.frames ? 1 : 0;
out:
	ing_catalog_close(v.cat);
	free(v.buf);
	free(v.buf2);
	explicit_bzero(&s3, sizeof(s3));
	return ret;
bad:
	fprintf(stderr, "ingest-verify: bad value '%s' for --%s\n", optarg, lo[li].name);
	return 2;
}
