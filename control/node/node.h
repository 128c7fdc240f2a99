/* SPDX-License-Identifier: Apache-2.0 */
/*
 * node.h - the ingest node as a library: start, run, stop. apps/ingestd.c is a thin main
 * around it (its option table, node/opts.h, fills struct ing_ingestd_opts); tests drive it
 * directly. Target ing_node: the composition root that links everything the node runs.
 *
 * Threads: ing_node_start and ing_node_wait run on one thread, which becomes the control
 * thread (EAL main lcore: EAL pins it). ing_node_stop may be called from any thread.
 * One node per process: DPDK's EAL starts once and cannot be started again after
 * ing_node_wait has stopped it.
 */
#ifndef ING_CONTROL_NODE_H
#define ING_CONTROL_NODE_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "control/node/opts.h"

struct ing_node;
/*
 * Bring the node up on the calling thread, in order: data dir (created, locked, probed),
 * placement plan, EAL, pool, control mailbox, persistence, loop, service, RDMA (or the logged
 * gRPC fallback), gRPC server, /metrics; then the port files, --ready-fd and
 * sd_notify(READY=1). o is copied (o->auth_token is wiped from the copy once the service
 * holds it). signals: SIGINT/SIGTERM blocked by the caller in every thread, read through
 * a signalfd (first: drain, second: stop waiting); NULL: only ing_node_stop stops it.
 * 0 and *out, -EINVAL for a configuration this machine cannot satisfy (a usage error:
 * a cpu, node or device it lacks), another -errno on a runtime failure (logged). On
 * failure everything started is released.
 */
int ing_node_start(const struct ing_ingestd_opts *o, const sigset_t *signals,
		   struct ing_node **out);
/* The gRPC port the node listens on (the one picked when the listen port was 0). */
int ing_node_port(const struct ing_node *n);
/*
 * Ask the node to stop, as SIGTERM does: health NOT_SERVING, GOAWAY, up to 10 s for the
 * frames in flight to become durable and acked; a second call stops waiting. Any thread;
 * returns at once.
 */
void ing_node_stop(struct ing_node *n);
/*
 * Run the control loop on the calling thread (the one that called ing_node_start) until
 * the node has stopped, then tear everything down in reverse order. Returns the exit
 * status: 0 clean stop, 1 runtime error, 3 stopped with frames not drained (their
 * producers got no DURABLE ack).
 */
int ing_node_wait(struct ing_node *n);
/* Free the node after ing_node_wait (or instead of it: then it is torn down first). */
void ing_node_destroy(struct ing_node *n);

#endif
