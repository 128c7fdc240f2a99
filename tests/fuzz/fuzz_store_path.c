/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_store_path - frame file names from what a producer sends: the id rule
 * (common/ident.c: ing_id_check, ing_id_file_name) and the store's public path function
 * ing_store_rel_path (dataplane/store/store.c). Input: "wafer\0frame\0wafer2\0frame2" (missing
 * parts empty). Oracles: an accepted pair, joined to a data dir and resolved lexically
 * (".", "..", "//"), names a file exactly two levels below <data_dir>/frames, ending in
 * ".frame", made of one component per id; an id the rule refuses is never given a path;
 * two different pairs never share a path (one file per frame).
 */
#include "common/ident.h"
#include "dataplane/store/store.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DATA_DIR "/srv/ingest"

/* Lexical resolution of an absolute path: its components, ".." popping one. */
static int resolve(const char *path, char comps[][512], int maxc)
{
	int nc = 0;
	const char *p = path;
	while (*p) {
		while (*p == '/')
			p++;
		size_t k = strcspn(p, "/");
		if (k == 0)
			break;
		if (k == 1 && p[0] == '.') {
			/* stays */
		} else if (k == 2 && p[0] == '.' && p[1] == '.') {
			if (nc > 0)
				nc--;
		} else {
			if (nc == maxc || k >= 512)
				abort();
			memcpy(comps[nc], p, k);
			comps[nc][k] = 0;
			nc++;
		}
		p += k;
	}
	return nc;
}

/* 0 and the path in rel (checked), or the refusal */
static int path_of(const char *wafer, const char *frame, char *rel, size_t cap)
{
	int rc = ing_store_rel_path(rel, cap, wafer, frame);
	bool frame_ok = ing_id_check(frame, strlen(frame)) == NULL;
	bool wafer_ok = !*wafer || ing_id_check(wafer, strlen(wafer)) == NULL;
	if (rc == 0 && (!frame_ok || !wafer_ok))
		abort();   /* an id the rule refuses got a file name */
	if (rc != 0)
		return rc;
	char full[2048];
	static char comps[64][512];
	snprintf(full, sizeof(full), "%s/%s", DATA_DIR, rel);
	int nc = resolve(full, comps, 64);
	size_t fl = strlen(comps[nc - 1]);
	/* /srv/ingest/frames/<wafer name>/<frame name>.frame */
	if (nc != 5 || strcmp(comps[0], "srv") || strcmp(comps[1], "ingest") ||
	    strcmp(comps[2], "frames") || fl <= 6 || strcmp(comps[4] + fl - 6, ".frame"))
		abort();   /* a path outside <data_dir>/frames/<wafer>/ */
	/* the components are the ids' own file names */
	char name[ING_ID_FILE_NAME_MAX + 1];
	if (ing_id_file_name(name, sizeof(name), frame) != 0 || strlen(name) != fl - 6 ||
	    memcmp(name, comps[4], fl - 6) != 0)
		abort();
	if (*wafer && (ing_id_file_name(name, sizeof(name), wafer) != 0 || strcmp(name, comps[3])))
		abort();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > 4096)
		return 0;
	char *buf = calloc(1, size + 4);   /* four NULs past the end: missing parts are "" */
	if (!buf)
		abort();
	memcpy(buf, data, size);
	const char *part[4];
	const char *p = buf;
	for (int i = 0; i < 4; i++) {
		part[i] = p;
		p += strlen(p) + (p < buf + size ? 1 : 0);
	}
	char r1[1024], r2[1024];
	int rc1 = path_of(part[0], part[1], r1, sizeof(r1));
	int rc2 = path_of(part[2], part[3], r2, sizeof(r2));
	if (rc1 == 0 && rc2 == 0 && strcmp(r1, r2) == 0) {
		/* the same file: only for the same frame (an empty wafer is the default one) */
		const char *w1 = *part[0] ? part[0] : ING_DEFAULT_WAFER;
		const char *w2 = *part[2] ? part[2] : ING_DEFAULT_WAFER;
		if (strcmp(w1, w2) || strcmp(part[1], part[3]))
			abort();   /* two frames, one file */
	}
	free(buf);
	return 0;
}
