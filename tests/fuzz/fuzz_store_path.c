/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_store_path - frame file names from what a producer sends (dataplane/store.c):
 * the waferId check and ing_store_rel_path. Input: 8 bytes of frame id, then the waferId.
 * Oracle: an accepted name, joined to a data dir and resolved lexically (".", "..", "//"),
 * is a file exactly two levels below <data_dir>/frames, named after the frame id; a waferId
 * with '/', NUL, or "."/".." is never accepted.
 */
#include "dataplane/dataplane.h"

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DATA_DIR "/srv/ingest"

/* Lexical resolution of an absolute path into out: returns the number of components. */
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 8)
		return 0;
	uint64_t frame_id;
	memcpy(&frame_id, data, 8);
	size_t wn = size - 8;
	char *wafer = malloc(wn + 1);
	if (!wafer)
		abort();
	memcpy(wafer, data + 8, wn);
	wafer[wn] = 0;   /* the protobuf string as the node sees it: up to the first NUL */

	char rel[4096];
	bool ok = ing_store_wafer_id_ok(wafer);
	int rc = ing_store_rel_path(rel, sizeof(rel), wafer, frame_id);
	if (ok != (rc == 0 || rc == -ENAMETOOLONG))
		abort();
	if (ok && (strchr(wafer, '/') || !strcmp(wafer, ".") || !strcmp(wafer, "..") ||
		   strlen(wafer) > ING_WAFER_ID_MAX || !*wafer))
		abort();
	if (rc == 0) {
		char full[8192];
		snprintf(full, sizeof(full), "%s/%s", DATA_DIR, rel);
		static char comps[64][512];
		int nc = resolve(full, comps, 64);
		char want[64];
		snprintf(want, sizeof(want), "%" PRIu64 ".frame", frame_id);
		/* /srv/ingest/frames/<wafer>/<id>.frame */
		if (nc != 5 || strcmp(comps[0], "srv") || strcmp(comps[1], "ingest") ||
		    strcmp(comps[2], "frames") || strcmp(comps[3], wafer) || strcmp(comps[4], want))
			abort();   /* a path outside <data_dir>/frames/<wafer>/ */
	}
	free(wafer);
	return 0;
}
