/* SPDX-License-Identifier: Apache-2.0 */
/*
 * efault_check.c - libingest's producer-side range check on RDMA, against a real ingestd
 * over Soft-RoCE (tests/rxe/ctl_in_guest.sh): a frame whose bytes are not inside the
 * producer's registered pool (ing_frame_alloc) must be refused by ing_producer_submit
 * with -EFAULT before any FrameMeta leaves, so the node never READs it:
 *   1. a malloc'd buffer                                   -> -EFAULT
 *   2. a pool buffer whose [addr, addr+length) runs past the pool's end -> -EFAULT
 *   3. a pool buffer from ing_frame_alloc                  -> 0, then DURABLE ok
 * Usage: rdma_efault_check HOST:PORT FIRST_FRAME_ID     Exit 0: all three held.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ingest/producer.h"

#define FRAME (256u << 10)

static int fails;

static void expect(bool ok, const char *what)
{
	printf("%s: %s\n", ok ? "ok  " : "FAIL", what);
	if (!ok)
		fails++;
}

int main(int argc, char **argv)
{
	struct ing_producer_opts o;
	char err[256] = "";

	if (argc != 3) {
		fprintf(stderr, "usage: %s HOST:PORT FIRST_FRAME_ID\n", argv[0]);
		return 2;
	}
	uint64_t id = strtoull(argv[2], NULL, 0);
	ing_producer_opts_init(&o);
	o.server = argv[1];
	o.transport = ING_TRANSPORT_RDMA;
	o.pool_frames = 2;
	o.pool_frame_size = FRAME;
	o.client_name = "rdma_efault_check";
	struct ing_producer *p = ing_producer_connect(&o, err, sizeof(err));
	if (!p) {
		fprintf(stderr, "rdma_efault_check: connect %s over RDMA: %s\n", argv[1], err);
		return 1;
	}

	uint8_t *heap = malloc(FRAME);
	uint8_t *a = ing_frame_alloc(p, FRAME), *b = ing_frame_alloc(p, FRAME);
	if (!heap || !a || !b) {
		fprintf(stderr, "rdma_efault_check: no buffers (malloc %p, pool %p %p)\n",
			(void *)heap, (void *)a, (void *)b);
		return 1;
	}
	memset(heap, 0x5a, FRAME);
	memset(a, 0xa5, FRAME);
	memset(b, 0x3c, FRAME);
	uint8_t *last = a > b ? a : b;   /* the pool's last buffer: its end is the pool's end */

	char id0[64], id1[64], id2[64];
	snprintf(id0, sizeof(id0), "efault-%" PRIu64 "-heap", id);
	snprintf(id1, sizeof(id1), "efault-%" PRIu64 "-beyond", id);
	snprintf(id2, sizeof(id2), "efault-%" PRIu64 "-ok", id);
	struct ing_frame_desc d = { .frame_id = id0, .wafer_id = "EFAULT-w", .data = heap,
				    .length = FRAME };
	int rc = ing_producer_submit(p, &d);
	printf("submit(malloc'd buffer) = %d (%s)\n", rc, rc ? strerror(-rc) : "accepted");
	expect(rc == -EFAULT, "a buffer not from ing_frame_alloc is refused with -EFAULT");

	d.frame_id = id1;
	d.data = last + 4096;            /* starts inside the pool, ends 4 KiB past it */
	rc = ing_producer_submit(p, &d);
	printf("submit(pool buffer + 4 KiB, %u bytes) = %d (%s)\n", FRAME, rc,
	       rc ? strerror(-rc) : "accepted");
	expect(rc == -EFAULT, "a range crossing the end of the registered pool is refused with -EFAULT");

	d.frame_id = id2;
	d.data = a;
	rc = ing_producer_submit(p, &d);
	printf("submit(ing_frame_alloc buffer) = %d\n", rc);
	expect(rc == 0, "a buffer from ing_frame_alloc is accepted");
	int durable = 0;
	for (int i = 0; rc == 0 && i < 600 && !durable; i++) {
		struct ing_ack acks[8];
		int n = ing_producer_poll(p, acks, 8, 100);
		if (n < 0) {
			fprintf(stderr, "rdma_efault_check: poll: %s\n", strerror(-n));
			break;
		}
		for (int k = 0; k < n; k++) {
			printf("ack frame %s stage %d ok %d %s\n", acks[k].frame_id, acks[k].stage,
			       acks[k].ok, acks[k].msg);
			if (strcmp(acks[k].frame_id, id2) != 0)
				fails++;   /* the refused frames must never be acked: nothing was sent */
			else if (!acks[k].ok)
				durable = -1;
			else if (acks[k].stage == ING_ACK_DURABLE)
				durable = 1;
		}
	}
	expect(durable == 1, "the valid frame is DURABLE ok, over RDMA");
	expect(ing_producer_transport(p) == ING_TRANSPORT_RDMA, "transport is RDMA");
	ing_frame_free(p, a);
	ing_frame_free(p, b);
	ing_producer_close(p, 2000);
	free(heap);
	printf("rdma_efault_check: %s\n", fails ? "FAILED" : "all checks passed");
	return fails ? 1 : 0;
}
