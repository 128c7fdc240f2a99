/* SPDX-License-Identifier: Apache-2.0 */
/*
 * service.h - the ingest node's gRPC service h3000.RDMASvc (Negotiate, ControlStream,
 * PushFrames, Stats): sessions and credits, the PushFrames fallback data path (chunks
 * copied straight into MR-pool slots, handed to persistence), and the RECEIVED/DURABLE
 * acks. Runs entirely on the control thread's loop; dataplane lcores and persistence
 * workers talk to it only through the control thread's mailbox (dataplane.h: ing_mbox).
 *
 * Lifetime (ingestd): pool, control mailbox, persistence, loop -> ing_svc_create ->
 * ing_grpc_server_create(ing_svc_methods()) -> ing_svc_attach_server -> run.
 * Teardown: ing_svc_shutdown_begin, wait for ing_svc_quiescent, ing_svc_close_calls,
 * ing_grpc_server_destroy, ing_persist_stop, ing_svc_destroy (returns every slot it still
 * holds to the pool), ing_pool_destroy.
 */
#ifndef ING_CONTROL_SERVICE_H
#define ING_CONTROL_SERVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/token.h"  /* ING_AUTH_TOKEN_MIN/MAX */
#include "control/net/grpc_server.h"
#include "control/net/loop.h"
#include "dataplane/dataplane.h"

#define ING_PROTO_VERSION 1u
#define ING_DEFAULT_MAX_CHUNK (1u << 20)
#define ING_DEFAULT_FRAME_TIMEOUT_MS 30000u
#define ING_DEFAULT_SESSION_IDLE_MS 300000u
/*
 * Sessions fit the streams the node advertises (docs/ARCHITECTURE.md, "How the limits fit
 * together"): every stream without a session (a stock seed client) takes an implicit one,
 * and one connection may carry SETTINGS_MAX_CONCURRENT_STREAMS (256) streams. A client
 * that fills a connection and opens a second (.NET's EnableMultipleHttp2Connections)
 * needs 512 sessions, so that is the per-address default, and the table holds eight such
 * addresses.
 */
#define ING_DEFAULT_MAX_SESSIONS 4096u
#define ING_DEFAULT_MAX_MSG ((4u << 20) + (64u << 10))
#define ING_DEFAULT_MAX_SESSIONS_PER_PEER 512u
#define ING_DEFAULT_SLOT_STALL_MS 5000u
#define ING_DEFAULT_AUTH_FAIL_BURST 20u
#define ING_DEFAULT_AUTH_BACKOFF_MAX_MS 60000u

/*
 * RDMA availability as Negotiate reports it. Filled by the RDMA side (rdma_cm listener)
 * before ing_svc_create; all-zero means "no RDMA": only TRANSPORT_GRPC_STREAM is offered.
 */
struct ing_svc_rdma {
	bool rdma_available;
	const char *rdma_addr;   /* rdma_cm listen address handed to producers */
	uint16_t rdma_port;
	const char *note;        /* why RDMA is (not) offered, e.g. "no RDMA device" */
	unsigned grant_ms;       /* push: grant lifetime (NegotiateReply.grantTimeoutMs) */
};

struct ing_svc_opts {
	unsigned credits_default;    /* window when the producer asks for none (ING_DEFAULT_CREDITS) */
	unsigned credits_max;        /* cap on any session's window (ING_DEFAULT_CREDITS) */
	uint64_t max_frame;          /* 0: the pool's largest slot */
	uint64_t stripe_min;         /* NegotiateReply.stripeMin when the engine stripes; 0: off */
	uint32_t max_chunk;          /* PushFrames data per chunk advertised (1 MiB) */
	size_t max_msg;              /* gRPC max receive message (== server max_recv_msg) */
	unsigned frame_timeout_ms;   /* a frame must complete within this after admission */
	unsigned session_idle_ms;    /* negotiated sessions with no streams expire after this */
	unsigned max_sessions;       /* bounded session table */
	size_t backlog_max;          /* bytes a blocked PushFrames call may buffer (>= stream window) */
	struct ing_svc_rdma rdma;
	/*
	 * Shared-secret authentication; NULL (default): off. When set (ING_AUTH_TOKEN_MIN..MAX
	 * printable characters, copied by ing_svc_create, never logged): Negotiate must carry
	 * authToken equal to it, PushFrames/ControlStream must name a session such a
	 * Negotiate created (no implicit sessions), Stats needs "authorization: Bearer <token>";
	 * anything else fails UNAUTHENTICATED. grpc.health.v1 is not the service's: stays open.
	 */
	const char *auth_token;
	/*
	 * Fair sharing under abuse (0: the default). One peer address holds at most
	 * max_sessions_per_peer sessions (512: two full
	 * connections of streams), and max_slots_per_peer pool slots (0: three
	 * quarters of the pool, at least 1) while another peer waits for one. A frame admitted into a slot whose bytes make no
	 * progress for slot_stall_ms (5000) fails ERROR_DEADLINE, retryable, and frees the
	 * slot. Failed authentication: a peer may fail auth_fail_burst times (20, one more
	 * each second), then it is refused UNAVAILABLE for a back-off that doubles with every
	 * further failure, up to auth_backoff_max_ms (60000).
	 */
	unsigned max_sessions_per_peer;
	unsigned max_slots_per_peer;
	unsigned slot_stall_ms;
	unsigned auth_fail_burst;
	unsigned auth_backoff_max_ms;
};
void ing_svc_opts_init(struct ing_svc_opts *o);

struct ing_svc;

/*
 * Create the service. It serves ctl, the control thread's mailbox (its doorbell goes on the
 * loop): the frames lcores and persistence workers send back, and calls posted from other
 * threads. pool, persist and ctl stay owned by the caller and must outlive the service.
 * NULL + log on error.
 */
struct ing_svc *ing_svc_create(struct ing_loop *loop, struct ing_pool *pool,
			       struct ing_persist *persist, struct ing_mbox *ctl,
			       const struct ing_svc_opts *o);
/* The method table for ing_grpc_server_create (valid as long as the service). */
const struct ing_grpc_method *ing_svc_methods(struct ing_svc *s, unsigned *n);
/* Tell the service which server carries it (Stats, shutdown). */
void ing_svc_attach_server(struct ing_svc *s, struct ing_grpc_server *srv);
/*
 * Reload (ingestd's SIGHUP): take o's run-time settings (the shared secret, credits,
 * max_frame, frame_timeout_ms, session_idle_ms, the per-peer limits, slot_stall_ms, the
 * failed-auth back-off) for what comes next: sessions negotiated from now on, frames
 * admitted from now on, the next check of a deadline; open calls and sessions keep going.
 * max_sessions, max_msg, backlog_max, max_chunk and rdma stay as created. *token_changed:
 * the secret (or its being required) changed. 0, or -EINVAL (logged: a token of a bad
 * length) with nothing changed. The control thread.
 */
int ing_svc_reload(struct ing_svc *s, const struct ing_svc_opts *o, bool *token_changed);
/* Refuse new frames from now on (Ack code SHUTTING_DOWN, retryable); in-flight frames finish. */
void ing_svc_shutdown_begin(struct ing_svc *s);
/* True after ing_svc_shutdown_begin. */
bool ing_svc_stopping(const struct ing_svc *s);
/* True when no frame is waiting for persistence and every queued ack has been written out. */
bool ing_svc_quiescent(const struct ing_svc *s);
/* Frames admitted and not yet finished (DURABLE-acked or failed). */
uint64_t ing_svc_in_flight(const struct ing_svc *s);
/* Finish every open call with status/message (shutdown). */
void ing_svc_close_calls(struct ing_svc *s, int status, const char *message);
/*
 * Drain the control mailbox, return every slot the service still holds, free everything.
 * Call after the server is destroyed (no call left) and persistence stopped. NULL ok.
 */
void ing_svc_destroy(struct ing_svc *s);

/*
 * Prometheus page of the service (control/service/obs/metrics.c): frames and bytes by transport
 * and result, ack latency and per-stage histograms, pool slots per size class,
 * persistence queue, sessions, RDMA errors/reconnects, lcore busy ratio. Control thread.
 */
struct ing_mtext;
void ing_svc_metrics(struct ing_svc *s, struct ing_mtext *t);

/*
 * Node-level facts the service does not own (the data dir's disk, the pool's pages,
 * readiness), for Stats (fields 70-79). fn fills them on the control thread whenever a
 * StatsReply is built; the node's /readyz uses the same function, so both agree.
 */
struct ing_svc_node_info {
	uint64_t disk_free, disk_size;   /* bytes; 0 with the null sink */
	bool pool_hugepages;
	uint64_t pool_bytes;
	bool ready;                      /* serving, data dir writable, pool ready, not draining */
	char not_ready[192];             /* why not, "" when ready */
};
typedef void (*ing_svc_node_info_fn)(void *arg, struct ing_svc_node_info *out);
void ing_svc_set_node_info(struct ing_svc *s, ing_svc_node_info_fn fn, void *arg);

/*
 * RDMA data path (control/service/engine.c, xport/rdma_job.c): ControlStream jobs go to r, its callbacks (session
 * check of CM connect requests, connection state, device removal) come here, and the
 * service drives it from the loop: its CM channel, its timer, the lcores' connection
 * events. Call after ing_svc_create, before the loop runs; NULL detaches it (before the
 * engine is destroyed: ingestd does so after the server, before persistence).
 */
struct ing_rdma;
int ing_svc_attach_rdma(struct ing_svc *s, struct ing_rdma *r);   /* 0 or -errno */

/*
 * Fleet identity and export (control/fleet/fleet.h): rpc Members answers from f, NegotiateReply
 * carries its node id and state, Stats and /metrics its export counters. Without one,
 * Members answers UNIMPLEMENTED. f outlives the service's calls. Before the loop runs.
 */
struct ing_fleet;
void ing_svc_attach_fleet(struct ing_svc *s, struct ing_fleet *f);

/*
 * Object store tier (dataplane/tier/tier.h): new frames are refused NO_SPACE (retryable)
 * while it is at the high-water mark; Stats (field 60) and /metrics show its state. t
 * outlives the service's calls. Before the loop runs; NULL ok.
 */
struct ing_tier;
void ing_svc_attach_tier(struct ing_svc *s, struct ing_tier *t);

#endif
