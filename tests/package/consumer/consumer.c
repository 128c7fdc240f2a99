/* SPDX-License-Identifier: Apache-2.0 */
/*
 * consumer.c - a downstream application of an installed libingest, built by the package
 * tests with pkg-config and with find_package(ingest) against nothing but the installed
 * header and library: consumer SERVER WAFER FIRST COUNT sends COUNT frames of 200 KiB
 * (ids pkg-FIRST, pkg-FIRST+1, ...)
 * over the gRPC fallback and checks that every one is acked DURABLE, ok, with the CRC-32C
 * the library computed. Prints "consumer: N frames durable" and exits 0, else 1.
 */
#include <ingest/producer.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FRAME_LEN (200u * 1024u + 17u)

int main(int argc, char **argv)
{
	if (argc != 5) {
		fprintf(stderr, "usage: consumer SERVER WAFER FIRST COUNT\n");
		return 2;
	}
	const char *wafer = argv[2];
	unsigned long first = strtoul(argv[3], NULL, 10);
	unsigned count = (unsigned)strtoul(argv[4], NULL, 10);
	if (count == 0 || count > 64)
		return 2;

	struct ing_producer_opts o;
	ing_producer_opts_init(&o);
	o.server = argv[1];
	o.transport = ING_TRANSPORT_GRPC;
	o.client_name = "package-consumer";
	char err[256];
	struct ing_producer *p = ing_producer_connect(&o, err, sizeof(err));
	if (!p) {
		fprintf(stderr, "consumer: connect: %s\n", err);
		return 1;
	}
	uint8_t *data = malloc((size_t)count * FRAME_LEN);
	uint32_t *crc = calloc(count, sizeof(*crc));
	unsigned durable = 0, bad = 0, sent = 0;
	if (!data || !crc)
		return 1;
	for (size_t i = 0; i < (size_t)count * FRAME_LEN; i++)
		data[i] = (uint8_t)(i * 2654435761u >> 13);
	for (unsigned i = 0; i < count; i++)
		crc[i] = ing_crc32c(0, data + (size_t)i * FRAME_LEN, FRAME_LEN);

	for (int rounds = 0; durable + bad < count && rounds < 6000; rounds++) {
		while (sent < count) {
			char id[32];
			snprintf(id, sizeof(id), "pkg-%lu", first + sent);
			struct ing_frame_desc d = {
				.frame_id = id, .wafer_id = wafer,
				.data = data + (size_t)sent * FRAME_LEN, .length = FRAME_LEN,
				.user = (void *)(uintptr_t)(sent + 1),
			};
			int rc = ing_producer_submit(p, &d);
			if (rc == -EAGAIN)
				break;
			if (rc) {
				fprintf(stderr, "consumer: submit: %d\n", rc);
				return 1;
			}
			sent++;
		}
		struct ing_ack acks[16];
		int n = ing_producer_poll(p, acks, 16, 10);
		if (n < 0) {
			fprintf(stderr, "consumer: poll: %d\n", n);
			return 1;
		}
		for (int k = 0; k < n; k++) {
			unsigned i = (unsigned)(uintptr_t)acks[k].user - 1;
			if (!acks[k].ok || i >= count) {
				fprintf(stderr, "consumer: frame %u failed: %s\n", i, acks[k].msg);
				bad++;
			} else if (acks[k].stage == ING_ACK_DURABLE) {
				if (acks[k].crc32c != crc[i]) {
					fprintf(stderr, "consumer: frame %u: node crc %08x, ours %08x\n", i,
						acks[k].crc32c, crc[i]);
					bad++;
				} else {
					durable++;
				}
			}
		}
	}
	ing_producer_close(p, 5000);
	free(data);
	free(crc);
	printf("consumer: %u frames durable\n", durable);
	return durable == count && !bad ? 0 : 1;
}
