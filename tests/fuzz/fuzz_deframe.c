/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_deframe - the gRPC length-prefixed message deframer (control/net/grpc_wire.c).
 * Input: one byte of split seed, then the byte stream. Oracles: the events do not depend
 * on how the stream is split; every payload byte is handed out exactly once, in order;
 * each message's pieces add up to its announced length; nothing is consumed twice.
 */
#include "control/net/grpc_internal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct trace {
	unsigned begins, ends;
	uint64_t payload;
	uint32_t hash;
	uint64_t in_msg_bytes;
	uint32_t cur_len;
	bool idle;
};

static void run(const uint8_t *d, size_t n, size_t piece, struct trace *t)
{
	struct grpc_deframer df;
	grpc_deframer_init(&df);
	memset(t, 0, sizeof(*t));
	for (size_t off = 0; off < n;) {
		size_t k = n - off < piece ? n - off : piece;
		const uint8_t *p = d + off;
		size_t left = k;
		for (;;) {
			const uint8_t *data = NULL;
			size_t dl = 0;
			size_t before = left;
			enum grpc_wire_ev ev = grpc_deframe_next(&df, &p, &left, &data, &dl);
			if (left > before || p != d + off + (k - left))
				abort();   /* consumed count and pointer disagree */
			if (ev == GRPC_WIRE_NEED) {
				if (left != 0)
					abort();
				break;
			}
			if (ev == GRPC_WIRE_BEGIN) {
				t->begins++;
				t->cur_len = df.len;
				t->in_msg_bytes = 0;
				t->hash = t->hash * 7u + df.flags + df.len;
			} else if (ev == GRPC_WIRE_DATA) {
				if (dl == 0 || data < d || data + dl > d + n)
					abort();
				t->in_msg_bytes += dl;
				if (t->in_msg_bytes > t->cur_len)
					abort();
				for (size_t i = 0; i < dl; i++)
					t->hash = t->hash * 31u + data[i];
				t->payload += dl;
			} else if (ev == GRPC_WIRE_END) {
				if (t->in_msg_bytes != t->cur_len)
					abort();
				t->ends++;
			} else {
				abort();
			}
		}
		off += k;
	}
	t->idle = grpc_deframer_idle(&df);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	size_t piece = 1 + data[0] % 11;
	struct trace a, b;
	run(data + 1, size - 1, size, &a);
	run(data + 1, size - 1, piece, &b);
	if (memcmp(&a, &b, sizeof(a)) != 0)
		abort();
	if (a.begins < a.ends || a.begins > a.ends + 1)
		abort();
	/* every byte is prefix or payload: a stream that ends idle used them all */
	if (a.idle && a.payload + 5ull * a.ends != size - 1)
		abort();
	return 0;
}
