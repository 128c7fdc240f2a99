// SPDX-License-Identifier: Apache-2.0
/*
 * send_acked - test helper: sends synthetic frames (the same content as ingest-send
 * --count/--sizes/--seed) over the gRPC fallback and appends one manifest line
 * ("frame_id wafer length crc32c synth:SEED", ingest-verify's format) for every frame the
 * node ACKed DURABLE, flushed as the ack arrives. So after ingestd is killed mid-stream,
 * the --acked manifest lists exactly the frames the node promised to keep.
 *
 * usage: send_acked --server ADDR --count N --sizes MIN-MAX --seed S --wafer W
 *                   --first-id N --acked PATH [--credits N]
 * Exit: 0 every frame DURABLE, 1 connection lost or frames failed, 2 usage/setup error.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ingest/producer.h"
#include "producer/synth.h"

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "server", required_argument, 0, 's' }, { "count", required_argument, 0, 'n' },
		{ "sizes", required_argument, 0, 'z' },  { "seed", required_argument, 0, 'e' },
		{ "wafer", required_argument, 0, 'w' },  { "first-id", required_argument, 0, 'f' },
		{ "acked", required_argument, 0, 'a' },  { "credits", required_argument, 0, 'c' },
		{ 0, 0, 0, 0 },
	};
	struct synth_spec sp = { .seed = 1, .size_min = 1u << 20, .size_max = 1u << 20 };
	const char *server = NULL, *wafer = "acked", *acked = NULL;
	uint64_t count = 0, first = 1;
	unsigned credits = 8;
	int opt;

	while ((opt = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (opt) {
		case 's': server = optarg; break;
		case 'n': count = strtoull(optarg, NULL, 10); break;
		case 'z':
			if (synth_parse_range(optarg, &sp.size_min, &sp.size_max)) {
				fprintf(stderr, "send_acked: bad --sizes '%s'\n", optarg);
				return 2;
			}
			break;
		case 'e': sp.seed = strtoull(optarg, NULL, 0); break;
		case 'w': wafer = optarg; break;
		case 'f': first = strtoull(optarg, NULL, 10); break;
		case 'a': acked = optarg; break;
		case 'c': credits = (unsigned)strtoul(optarg, NULL, 10); break;
		default: return 2;
		}
	}
	if (!server || !count || !acked || !credits) {
		fprintf(stderr, "send_acked: need --server, --count, --acked\n");
		return 2;
	}
	FILE *man = fopen(acked, "w");
	if (!man) {
		fprintf(stderr, "send_acked: %s: %s\n", acked, strerror(errno));
		return 2;
	}
	fprintf(man, "# DURABLE-acked frames: frame_id wafer length crc32c source\n");
	fflush(man);

	struct ing_producer_opts o;
	ing_producer_opts_init(&o);
	o.server = server;
	o.transport = ING_TRANSPORT_GRPC;
	o.credits = credits;
	o.client_name = "send_acked";
	o.recycle_on = ING_ACK_DURABLE;
	o.pool_frames = credits;
	o.pool_frame_size = (sp.size_max + 4095) & ~4095ull;
	char err[256];
	struct ing_producer *p = ing_producer_connect(&o, err, sizeof(err));
	if (!p) {
		fprintf(stderr, "send_acked: %s\n", err);
		fclose(man);
		return 2;
	}
	uint32_t *crcs = calloc(count, sizeof(*crcs));
	void **bufs = calloc(count, sizeof(*bufs));
	if (!crcs || !bufs) {
		fprintf(stderr, "send_acked: out of memory\n");
		return 2;
	}
	uint64_t next = 0, done = 0, ok = 0;
	int ret = 0;
	struct ing_ack acks[32];
	while (done < count) {
		while (next < count) {
			uint64_t id = first + next, len = synth_frame_len(&sp, id);
			void *b = bufs[next] ? bufs[next] : ing_frame_alloc(p, len);
			if (!b)
				break;
			bufs[next] = b;
			crcs[next] = synth_fill_crc(b, len, id, sp.seed);
			struct ing_frame_desc d = { .frame_id = id, .wafer_id = wafer, .data = b,
						    .length = len, .crc32c = crcs[next], .has_crc = 1,
						    .user = (void *)(uintptr_t)(next + 1) };
			int rc = ing_producer_submit(p, &d);
			if (rc == -EAGAIN)
				break;
			if (rc) {
				fprintf(stderr, "send_acked: frame %" PRIu64 ": submit: %s\n", id, strerror(-rc));
				ret = 1;
				goto out;
			}
			next++;
		}
		int n = ing_producer_poll(p, acks, 32, 100);
		if (n < 0) {
			fprintf(stderr, "send_acked: connection lost: %s\n", strerror(-n));
			ret = 1;
			goto out;
		}
		for (int k = 0; k < n; k++) {
			struct ing_ack *a = &acks[k];
			uint64_t i = (uint64_t)(uintptr_t)a->user;
			if (!i || (a->ok && a->stage != ING_ACK_DURABLE))
				continue;
			i--;
			if (bufs[i]) {
				ing_frame_free(p, bufs[i]);
				bufs[i] = NULL;
			}
			done++;
			if (!a->ok) {
				fprintf(stderr, "send_acked: frame %" PRIu64 " failed: %s\n", a->frame_id, a->msg);
				ret = 1;
				continue;
			}
			ok++;
			fprintf(man, "%" PRIu64 " %s %" PRIu64 " %08x synth:%" PRIu64 "\n", a->frame_id, wafer,
				synth_frame_len(&sp, a->frame_id), crcs[i], sp.seed);
			fflush(man);
		}
	}
out:
	fprintf(stderr, "send_acked: %" PRIu64 " of %" PRIu64 " frames DURABLE\n", ok, count);
	fclose(man);
	ing_producer_close(p, ret ? 0 : 2000);
	free(crcs);
	free(bufs);
	return ret;
}
