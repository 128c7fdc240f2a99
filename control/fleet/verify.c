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
#include "common/crc32c.h"
#include "common/ident.h"
#include "common/io.h"
#include "common/log.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <libpq-fe.h>
#include <sqlite3.h>

#define READ_CHUNK (4u << 20)

struct vnode {
	const char *id;
	const char *dir;
	sqlite3 *db;
	sqlite3_stmt *st;
	uint64_t copies;
};

struct vctx {
	unsigned shown, max_errors;
	uint8_t *buf;
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
	if (sqlite3_open_v2(db, &n->db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK ||
	    sqlite3_busy_timeout(n->db, 5000) != SQLITE_OK ||
	    sqlite3_prepare_v2(n->db, "SELECT length, crc32c, path FROM frames"
				      " WHERE wafer_id = ?1 AND frame_id = ?2", -1, &n->st, NULL) != SQLITE_OK) {
		fprintf(stderr, "ingest-verify: node %s: %s: %s\n", n->id, db,
			n->db ? sqlite3_errmsg(n->db) : "cannot open");
		return -EIO;
	}
	return 0;
}

/* CRC-32C of the file's bytes; -errno, or -EFBIG/-ENODATA when its size is not len. */
static int file_crc(struct vctx *v, const char *path, uint64_t len, uint32_t *crc)
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
	if ((uint64_t)st.st_size != len) {
		close(fd);
		return (uint64_t)st.st_size > len ? -EFBIG : -ENODATA;
	}
	uint32_t c = 0;
	for (uint64_t off = 0; off < len;) {
		size_t n = len - off < READ_CHUNK ? (size_t)(len - off) : READ_CHUNK;
		int rc = ing_read_full(fd, v->buf, n);
		if (rc) {
			close(fd);
			return rc;
		}
		c = ing_crc32c(c, v->buf, n);
		off += n;
	}
	close(fd);
	*crc = c;
	return 0;
}

/* One copy of a frame on node n: true when intact and the manifest's CRC. */
static bool check_copy(struct vctx *v, struct vnode *n, const char *wafer, const char *frame,
		       uint64_t len, uint32_t crc, uint32_t pg_crc, uint64_t pg_len)
{
	if (pg_crc != crc || pg_len != len) {
		problem(v, wafer, frame, "node %s: fleet catalog says %" PRIu64 " bytes crc32c %08x, "
			"manifest %" PRIu64 " bytes %08x (a conflicting copy)", n->id, pg_len, pg_crc, len, crc);
		return false;
	}
	sqlite3_bind_text(n->st, 1, wafer, -1, SQLITE_STATIC);
	sqlite3_bind_text(n->st, 2, frame, -1, SQLITE_STATIC);
	int rc = sqlite3_step(n->st);
	bool ok = false;
	if (rc == SQLITE_ROW) {
		uint64_t clen = (uint64_t)sqlite3_column_int64(n->st, 0);
		uint32_t ccrc = (uint32_t)sqlite3_column_int64(n->st, 1);
		const unsigned char *rel = sqlite3_column_text(n->st, 2);
		char path[PATH_MAX];
		uint32_t fcrc = 0;
		snprintf(path, sizeof(path), "%s/%s", n->dir, rel ? (const char *)rel : "");
		if (clen != len || ccrc != crc) {
			problem(v, wafer, frame, "node %s: its catalog has %" PRIu64 " bytes crc32c %08x, "
				"expected %" PRIu64 " bytes %08x", n->id, clen, ccrc, len, crc);
		} else if ((rc = file_crc(v, path, len, &fcrc)) != 0) {
			problem(v, wafer, frame, "node %s: %s: %s", n->id, path,
				rc == -EFBIG || rc == -ENODATA ? "wrong size" : strerror(-rc));
		} else if (fcrc != crc) {
			problem(v, wafer, frame, "node %s: %s: bytes have crc32c %08x, expected %08x",
				n->id, path, fcrc, crc);
		} else {
			ok = true;
		}
	} else if (rc == SQLITE_DONE) {
		problem(v, wafer, frame, "node %s: in the fleet catalog but not in the node's catalog",
			n->id);
	} else {
		problem(v, wafer, frame, "node %s: catalog lookup: %s", n->id, sqlite3_errmsg(n->db));
	}
	sqlite3_reset(n->st);
	sqlite3_clear_bindings(n->st);
	return ok;
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
	v.buf = malloc(READ_CHUNK);
	if (!vn || !v.buf) {
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
	for (unsigned i = 0; vn && i < n_nodes; i++) {
		sqlite3_finalize(vn[i].st);
		sqlite3_close(vn[i].db);
	}
	free(vn);
	free(v.buf);
	return ret;
}
