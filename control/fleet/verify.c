/* SPDX-License-Identifier: Apache-2.0 */
/*
 * verify.c - ingest-verify --fleet: a manifest against the fleet catalog (PostgreSQL) and
 * every node's data dir (fleet.h, ing_fleet_verify).
 *
 * For each manifest frame: its rows in fleet_frames (one per node holding a copy). No row:
 * missing. Each row: the node's catalog.db has the frame with the row's length and CRC,
 * the file it names has exactly those bytes (CRC recomputed from the file), and the CRC
 * is the manifest's. Two or more intact copies with the manifest's CRC are a duplicate
 * (a frame re-sent after a failover whose first copy did become durable): allowed and
 * counted. A copy with another CRC is bad (a conflict).
 */
#include "control/fleet/fleet.h"
#include "common/ident.h"
#include "common/log.h"
#include "dataplane/store/store.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <libpq-fe.h>

struct vnode {
	const char *id;
	const char *dir;
	struct ing_catalog *cat;   /* its catalog.db, read-only (dataplane/store/) */
	uint64_t copies;
};

struct vctx {
	unsigned shown, max_errors;
	uint8_t *buf;              /* a copy's bytes (ing_store_check_file) */
	size_t cap;
};

static void problem(struct vctx *v, const char *wafer, const char *frame, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static void problem(struct vctx *v, const char *wafer, const char *frame, const char *fmt, ...)
{
	if (v->shown++ >= v->max_errors)
		return;
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "ingest-verify: frame %s (wafer %s): ", frame, wafer);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

static int node_open(struct vnode *n)
{
	char db[PATH_MAX];
	struct stat st;
	snprintf(db, sizeof(db), "%s/catalog.db", n->dir);
	if (stat(db, &st)) {
		fprintf(stderr, "ingest-verify: node %s: %s: %s\n", n->id, db, strerror(errno));
		return -ENOENT;
	}
	n->cat = ing_catalog_open_ro(db);   /* logs why not */
	if (!n->cat) {
		fprintf(stderr, "ingest-verify: node %s: %s: cannot open\n", n->id, db);
		return -EIO;
	}
	return 0;
}

/* One copy of a frame on node n: true when intact and the manifest's CRC. */
static bool check_copy(struct vctx *v, struct vnode *n, const char *wafer, const char *frame,
		       uint64_t len, uint32_t crc, uint32_t pg_crc, uint64_t pg_len)
{
	struct ing_catalog_row row;
	char path[PATH_MAX + 600];
	uint64_t size;
	uint32_t fcrc;
	int rc;

	if (pg_crc != crc || pg_len != len) {
		problem(v, wafer, frame, "node %s: fleet catalog says %" PRIu64 " bytes crc32c %08x, "
			"manifest %" PRIu64 " bytes %08x (a conflicting copy)", n->id, pg_len, pg_crc, len, crc);
		return false;
	}
	rc = ing_catalog_lookup(n->cat, wafer, frame, &row);
	if (rc == -ENOENT) {
		problem(v, wafer, frame, "node %s: in the fleet catalog but not in the node's catalog",
			n->id);
		return false;
	}
	if (rc) {
		problem(v, wafer, frame, "node %s: catalog lookup: %s", n->id, strerror(-rc));
		return false;
	}
	if (row.length != len || row.crc32c != crc) {
		problem(v, wafer, frame, "node %s: its catalog has %" PRIu64 " bytes crc32c %08x, "
			"expected %" PRIu64 " bytes %08x", n->id, row.length, row.crc32c, len, crc);
		return false;
	}
	snprintf(path, sizeof(path), "%s/%s", n->dir, row.path);
	rc = ing_store_check_file(path, len, &crc, &v->buf, &v->cap, &size, &fcrc);
	if (rc == -EBADMSG)
		problem(v, wafer, frame, "node %s: %s: bytes have crc32c %08x, expected %08x", n->id, path,
			fcrc, crc);
	else if (rc)
		problem(v, wafer, frame, "node %s: %s: %s", n->id, path,
			rc == -EFBIG || rc == -ENODATA ? "wrong size" : strerror(-rc));
	return rc == 0;
}

int ing_fleet_verify(const char *conninfo, const char *manifest,
		     const struct ing_fleet_verify_node *nodes, unsigned n_nodes,
		     unsigned max_errors, struct ing_fleet_verify_result *res)
{
	struct vctx v = { .max_errors = max_errors };
	struct vnode *vn = calloc(n_nodes ? n_nodes : 1, sizeof(*vn));
	PGconn *pg = NULL;
	FILE *f = NULL;
	int ret = -EIO;

	memset(res, 0, sizeof(*res));
	if (!vn) {
		ret = -ENOMEM;
		goto out;
	}
	for (unsigned i = 0; i < n_nodes; i++) {
		vn[i].id = nodes[i].node_id;
		vn[i].dir = nodes[i].data_dir;
		if (node_open(&vn[i])) {
			ret = -ENOENT;
			goto out;
		}
	}
	pg = PQconnectdb(conninfo);
	if (!pg || PQstatus(pg) != CONNECTION_OK) {
		fprintf(stderr, "ingest-verify: fleet catalog: %s", pg ? PQerrorMessage(pg) : "out of memory\n");
		ret = -ECONNREFUSED;
		goto out;
	}
	PGresult *pr = PQprepare(pg, "copies", "SELECT node_id, crc32c, length FROM fleet_frames"
					       " WHERE wafer_id = $1 AND frame_id = $2 ORDER BY node_id", 2, NULL);
	if (PQresultStatus(pr) != PGRES_COMMAND_OK) {
		fprintf(stderr, "ingest-verify: fleet catalog: %s", PQresultErrorMessage(pr));
		PQclear(pr);
		goto out;
	}
	PQclear(pr);
	f = fopen(manifest, "r");
	if (!f) {
		fprintf(stderr, "ingest-verify: %s: %s\n", manifest, strerror(errno));
		ret = -errno;
		goto out;
	}
	char line[PATH_MAX + 2048];
	unsigned lineno = 0;
	while (fgets(line, sizeof(line), f)) {
		char tid[3 * ING_ID_MAX + 1], tw[3 * ING_ID_MAX + 1];
		char id[ING_ID_MAX + 1], wafer[ING_ID_MAX + 1];
		unsigned long long len;
		unsigned crc;
		lineno++;
		if (line[0] == '#' || line[0] == '\n')
			continue;
		if (sscanf(line, "%768s %768s %llu %x", tid, tw, &len, &crc) != 4 ||
		    ing_id_unescape(id, sizeof(id), tid) || ing_id_unescape(wafer, sizeof(wafer), tw)) {
			fprintf(stderr, "ingest-verify: %s:%u: bad line\n", manifest, lineno);
			res->bad++;
			continue;
		}
		if (!wafer[0])
			snprintf(wafer, sizeof(wafer), "%s", ING_DEFAULT_WAFER);
		res->frames++;
		const char *pv[] = { wafer, id };
		PGresult *r = PQexecPrepared(pg, "copies", 2, pv, NULL, NULL, 0);
		if (PQresultStatus(r) != PGRES_TUPLES_OK) {
			fprintf(stderr, "ingest-verify: fleet catalog: %s", PQresultErrorMessage(r));
			PQclear(r);
			goto out;
		}
		int nt = PQntuples(r);
		unsigned good = 0, checked = 0;
		bool bad = false;
		for (int i = 0; i < nt; i++) {
			const char *node = PQgetvalue(r, i, 0);
			uint32_t pcrc = (uint32_t)strtoull(PQgetvalue(r, i, 1), NULL, 10);
			uint64_t plen = strtoull(PQgetvalue(r, i, 2), NULL, 10);
			struct vnode *n = NULL;
			for (unsigned k = 0; k < n_nodes; k++)
				if (!strcmp(vn[k].id, node))
					n = &vn[k];
			res->copies++;
			if (!n) {
				res->unknown_node++;
				problem(&v, wafer, id, "a copy on node %s, whose data dir was not given "
					"(not checked)", node);
				continue;
			}
			checked++;
			n->copies++;
			if (check_copy(&v, n, wafer, id, len, crc, pcrc, plen))
				good++;
			else
				bad = true;
		}
		PQclear(r);
		if (nt == 0) {
			res->missing++;
			problem(&v, wafer, id, "in no node's rows of the fleet catalog (missing)");
		} else if (bad) {
			res->bad++;
		} else if (checked == 0) {
			res->bad++;   /* copies exist, none could be checked: not proven */
		} else {
			res->ok++;
		}
		if (good > 1)
			res->duplicates++;
	}
	if (v.shown > v.max_errors)
		fprintf(stderr, "ingest-verify: (%u more problems not shown)\n", v.shown - v.max_errors);
	ret = 0;
out:
	if (f)
		fclose(f);
	PQfinish(pg);
	for (unsigned i = 0; vn && i < n_nodes; i++)
		ing_catalog_close(vn[i].cat);
	free(vn);
	free(v.buf);
	return ret;
}
