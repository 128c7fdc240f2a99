/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_chunk - the PushFrames FrameChunk parser (control/service/xport/chunk.c).
 * Input: one byte of split seed, then the message. Oracles: the parse does not depend on
 * how the bytes are split; the data callbacks cover exactly the data field, in order; a
 * message the parser accepts (with a well-formed meta) decodes the same with protobuf-c.
 */
#include "control/service/xport/chunk.h"
#include "h3000.pb-c.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct seen {
	uint64_t begin_len;
	unsigned begins;
	uint64_t next_off;
	uint64_t bytes;
	uint32_t hash;
};

static int on_begin(void *arg, struct chunk_parser *p, uint64_t len)
{
	struct seen *s = arg;
	(void)p;
	s->begin_len = len;
	s->begins++;
	return 0;
}

static int on_data(void *arg, struct chunk_parser *p, uint64_t off, const uint8_t *d, size_t n)
{
	struct seen *s = arg;
	(void)p;
	if (off != s->next_off || n == 0 || off + n > s->begin_len)
		abort();   /* pieces out of order, empty, or past the announced length */
	for (size_t i = 0; i < n; i++)
		s->hash = s->hash * 31u + d[i];
	s->next_off += n;
	s->bytes += n;
	return 0;
}

static const struct chunk_parser_cbs cbs = { .data_begin = on_begin, .data = on_data };

struct result {
	int rc;
	char frame_id[CP_ID_MAX + 1];
	size_t id_len;
	uint64_t offset, session_id, data_len;
	bool last, has_data, ordered, late, meta_oversize, id_oversize;
	uint32_t seen_mask;
	size_t meta_len;
	struct seen s;
};

static struct chunk_parser P;   /* 4 KiB meta buffer: not on the stack per run */

static void run(const uint8_t *d, size_t n, size_t piece, struct result *r)
{
	memset(r, 0, sizeof(*r));
	chunk_parser_init(&P, &cbs, &r->s);
	chunk_parser_begin(&P, n);
	int rc = 0;
	for (size_t off = 0; off < n && rc == 0;) {
		size_t k = n - off < piece ? n - off : piece;
		rc = chunk_parser_feed(&P, d + off, k);
		off += k;
	}
	if (rc == 0)
		rc = chunk_parser_end(&P);
	r->rc = rc;
	memcpy(r->frame_id, P.frame_id, sizeof(r->frame_id));
	r->id_len = P.id_len;
	r->id_oversize = P.id_oversize;
	r->offset = P.offset;
	r->session_id = P.session_id;
	r->data_len = P.data_len;
	r->last = P.last;
	r->has_data = P.has_data;
	r->ordered = P.ordered;
	r->late = P.late_fields;
	r->meta_oversize = P.meta_oversize;
	r->seen_mask = P.seen;
	r->meta_len = P.meta_len;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	size_t piece = 1 + data[0] % 17;
	const uint8_t *msg = data + 1;
	size_t n = size - 1;
	struct result whole, split;

	run(msg, n, n ? n : 1, &whole);
	run(msg, n, piece, &split);
	if (whole.rc != split.rc)
		abort();
	if (whole.rc != 0)
		return 0;
	/* accepted: the same answer however the bytes came */
	if (memcmp(whole.frame_id, split.frame_id, sizeof(whole.frame_id)) != 0 ||
	    whole.id_len != split.id_len || whole.id_oversize != split.id_oversize ||
	    whole.offset != split.offset ||
	    whole.session_id != split.session_id || whole.last != split.last ||
	    whole.has_data != split.has_data || whole.data_len != split.data_len ||
	    whole.seen_mask != split.seen_mask || whole.ordered != split.ordered ||
	    whole.late != split.late || whole.meta_len != split.meta_len ||
	    whole.s.hash != split.s.hash || whole.s.bytes != split.s.bytes)
		abort();
	/* the data callbacks saw the whole field */
	if (whole.has_data && (whole.s.begins != 1 || whole.s.bytes != whole.data_len))
		abort();
	if (!whole.has_data && whole.s.begins != 0)
		abort();

	/* the same message through protobuf-c */
	H3000__FrameChunk *fc = h3000__frame_chunk__unpack(NULL, n, msg);
	if (!fc) {
		/* protobuf-c refuses what the parser takes only for a bad meta (which the
		 * service then NACKs when it unpacks the meta, or as too large) */
		if (!(whole.seen_mask & (1u << CP_F_META)))
			abort();
		return 0;
	}
	/* the id as stock protobuf decodes it (when the parser kept it whole and it has no NUL) */
	size_t kept = whole.id_len < CP_ID_MAX ? whole.id_len : CP_ID_MAX;
	if (!whole.id_oversize && !memchr(whole.frame_id, 0, kept) &&
	    (strlen(fc->frameid) != whole.id_len || strcmp(fc->frameid, whole.frame_id) != 0))
		abort();
	if (fc->offset != whole.offset ||
	    fc->sessionid != whole.session_id || fc->last != whole.last ||
	    fc->data.len != whole.data_len)
		abort();
	h3000__frame_chunk__free_unpacked(fc, NULL);
	return 0;
}
