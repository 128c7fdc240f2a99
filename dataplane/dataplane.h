/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dataplane.h - the ingest node's data plane as seen by the control thread and ingestd:
 * frame descriptors, the MR pool of frame buffers, the rings between threads, the
 * persistence workers, and EAL start-up. Files and catalog: dataplane/store/store.h.
 *
 * Ownership rule: a struct ing_frame is owned by exactly one thread at a time; it moves
 * between threads only inside a message on the next owner's mailbox. Control takes it from
 * the pool, fills it (fallback) or sends it to a dataplane lcore (RDMA), which tells
 * control RECEIVED and sends it on to a persistence worker, which sends it back to control
 * (DONE); control sends the Acks and puts it back into the pool.
 */
#ifndef ING_DATAPLANE_H
#define ING_DATAPLANE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/ident.h"
#include "dataplane/msg.h"   /* struct ing_msg and every thread's kinds */

#define ING_FRAME_MSG_MAX 512   /* room for a 256-byte id and the reason */
#define ING_POOL_MAX_CLASSES 8
#define ING_POOL_MAX_REGIONS 8   /* one per NUMA node that carries a rail */
#define ING_DEFAULT_MAX_FRAME (64ull << 20)
#define ING_DEFAULT_CREDITS 64
#define ING_DEFAULT_WORKERS 2
#define ING_DEFAULT_RING_SIZE 4096
/* persistence workers: SCHED_BATCH at this nice level (see ing_persist_opts.nice) */
#define ING_DEFAULT_WORKER_NICE 5

/* Mirrors h3000.ErrorCode in proto/h3000.proto (same numeric values). */
enum ing_err {
	ING_E_NONE = 0,
	ING_E_INVALID_ARGUMENT = 1,
	ING_E_TOO_LARGE = 2,
	ING_E_CRC_MISMATCH = 3,
	ING_E_DUPLICATE_CONFLICT = 4,
	ING_E_DEADLINE = 5,
	ING_E_TRANSFER = 6,
	ING_E_IO = 7,
	ING_E_NO_SPACE = 8,
	ING_E_NO_TRANSPORT = 9,
	ING_E_BUSY = 10,
	ING_E_CANCELLED = 11,
	ING_E_INTERNAL = 12,
	ING_E_SHUTTING_DOWN = 13,
};

/* Mirrors h3000.Transport. */
enum ing_xport { ING_XPORT_NONE = 0, ING_XPORT_RDMA = 1, ING_XPORT_GRPC = 2 };

/* Where persistence puts the bytes. */
enum ing_sink { ING_SINK_FILE = 0, ING_SINK_NULL = 1 };

/*
 * One frame in the ingest node. Lives inside the pool (one descriptor per slot, so taking
 * a slot never allocates). Fields are grouped by the stage that writes them.
 */
struct ing_frame {
	/* --- set by control at admission (ing_pool_get clears everything below buf) --- */
	char frame_id[ING_ID_MAX + 1];   /* checked by ing_id_check */
	char wafer_id[ING_ID_MAX + 1];   /* checked; never empty (ING_DEFAULT_WAFER) */
	uint64_t session_id;
	uint64_t length;      /* declared bytes, 1 .. slot capacity */
	uint64_t filled;      /* bytes landed so far (fallback: next expected offset) */
	int64_t timestamp;    /* producer's, stored as sent (any unit) */
	uint32_t crc32c;      /* declared by the producer, valid when has_crc */
	bool has_crc;
	uint8_t transport;    /* enum ing_xport */
	uint64_t raddr;       /* RDMA: producer address */
	uint32_t rkey;        /* RDMA: producer rkey (never logged) */
	uint32_t qp_num;      /* RDMA: which connection */
	/* RDMA WRITE push (docs/PUSH.md): the producer writes into buf under a grant. The
	 * grant fields are owned by the dataplane lcore while it holds the frame. */
	bool push;            /* set by control at admission */
	uint8_t push_state;   /* lcore: enum push_state in dataplane/rdma/rdma_poller.c */
	uint32_t grant_id;    /* lcore: immediate the write must carry (0: none yet) */
	uint32_t grant_rkey;  /* lcore: rkey handed out in the grant (never logged) */
	void *grant_mw;       /* lcore: the memory window bound over the slot (MW mode) */
	uint64_t grant_deadline_ns;
	/* Striping (common/stripe.h, docs/ARCHITECTURE.md "Striping"): a part of a striped
	 * frame is a descriptor of its own, never a pool slot: buf/cap point into the striped
	 * frame's slot at the part's offset; length, raddr, rkey and session_id are the
	 * part's. An lcore READs it (push: grants it, docs/PUSH.md "Striped push") as it
	 * does a frame and posts ING_EV_PART_IN on control's
	 * mailbox when every byte of it is in (no RECEIVED, no persistence: the frame is
	 * control's); a part that fails comes back as ING_EV_DONE, as a frame does. */
	struct ing_frame *part_of; /* the striped frame; NULL: a whole frame */
	uint32_t part_lkey;   /* lkey of the striped frame's slot in the PD of the part's rail */
	void *part_mr;        /* push: the struct ibv_mr of that slot in the PD of the part's
			       * rail (a window binds over it; MR mode grants its rkey) */
	uint8_t part;         /* the part's index in its stripe */
	uint64_t t_admit_ns;  /* ing_now_ns() at admission */
	uint64_t t_received_ns;
	uint64_t t_durable_ns;   /* group's directory fsync + catalog commit done */
	/* stage stamps by persistence, one clock read each (Ack.stage*Ns; 0: not reached) */
	uint64_t t_crc_ns;       /* crc32c checked */
	uint64_t t_written_ns;   /* written to the temp file, before its fdatasync */
	uint64_t t_synced_ns;    /* fdatasync'ed and renamed */
	uint64_t t_persist_ns;   /* a persistence worker took it (0: never; /metrics queue stage) */
	/*
	 * --- gRPC fallback: crc32c computed by control while it copies the bytes in (one
	 * pass over cache-hot input), so persistence need not read the frame again ---
	 */
	uint32_t crc_run;     /* crc32c of buf[0..filled) */
	bool crc_done;        /* crc_run covers buf[0..length): persistence uses it */
	/* --- set by the dataplane lcore / persistence worker --- */
	int32_t status;       /* enum ing_err; ING_E_NONE = ok */
	bool retryable;
	bool duplicate;       /* already stored with the same crc (file present): not rewritten */
	bool cataloged;       /* persistence inserted its catalog row (the high-water mark's count) */
	uint32_t crc_computed;
	char msg[ING_FRAME_MSG_MAX]; /* human-readable reason when status != 0 */
	/* --- the slot (set once at pool creation, never changed) --- */
	struct ing_pool *pool;
	uint8_t *buf;         /* 4 KiB aligned (O_DIRECT, io_uring fixed buffer) */
	uint64_t cap;         /* slot capacity, a multiple of 4 KiB */
	uint32_t slot;        /* index within its class */
	uint32_t index;       /* index within the pool, 0 .. ing_pool_total() - 1 */
	uint8_t cls;          /* size class */
	uint8_t region;       /* pool region (its NUMA node: ing_pool_region_node) */
	/* --- set by the persistence worker that took it (which worker wrote it) --- */
	uint8_t persist_worker;
};

/* ---------------------------------------------------------------- EAL */

struct ing_eal_opts {
	const char *lcores;   /* EAL -l list, e.g. "0-1"; NULL: "0" (control only) */
	int main_lcore;       /* -1: first of lcores */
	bool no_huge;         /* default true; false needs hugepages reserved and mounted */
	unsigned mem_mb;      /* EAL heap (rings, descriptors): default 64 */
	const char *file_prefix; /* default "ingestd-<pid>" */
	const char *log_level;   /* EAL log level, default "warning" */
};
void ing_eal_opts_init(struct ing_eal_opts *o);
/* Start EAL once per process (main thread). 0 or -errno; logs the EAL arguments used. */
int ing_eal_start(const struct ing_eal_opts *o);
void ing_eal_stop(void);

/* ---------------------------------------------------------------- MR pool */

struct ing_pool_class {
	uint64_t slot_size;   /* rounded up to 4 KiB (to the hugepage size when on hugepages) */
	unsigned count;
};

/*
 * Regions: the pool is one region per NUMA node that carries a rail (docs/ARCHITECTURE.md
 * "Rails"), each with every size class of the spec, mbind()ed to its node, so a frame a
 * rail moves lands in memory local to that rail's NIC. A pool without regions given is
 * one region on numa_node.
 */
struct ing_pool_opts {
	const char *name;     /* unique per process */
	unsigned nclasses;
	struct ing_pool_class cls[ING_POOL_MAX_CLASSES]; /* ascending slot_size */
	int hugepages;        /* 1: required, 0: never, -1: try, fall back to 4 KiB pages */
	int numa_node;        /* nregions 0: the one region's node (-1: any); else unused */
	unsigned nregions;    /* 0: one region on numa_node */
	int region_node[ING_POOL_MAX_REGIONS]; /* each region's node, -1: not bound */
	unsigned home_region; /* a frame with no region asked for tries this one first (the
			       * control thread's node: the fallback's copy stays local) */
	bool mbind;           /* default true; false: the nodes only label the regions (unit
			       * tests on a one-node machine) */
	bool prefault;        /* touch every page at creation (default true) */
};
void ing_pool_opts_init(struct ing_pool_opts *o);
/*
 * The pool spec, the one grammar of ingestd --pool, its config file and ingest-doctor:
 * SIZE:COUNT,... ("4M:16,16M:8,64M:4"), 1..ING_POOL_MAX_CLASSES classes, sizes
 * (common/parse.h: 4096, 512K, 4M, 1G) 1 byte .. 1 TiB strictly ascending, counts
 * 1..1000000. Parsed into o->cls: 0, or -EINVAL with the reason in why (nothing logged).
 * Any thread; no DPDK (dataplane/pool_spec.c).
 */
int ing_pool_spec_parse(struct ing_pool_opts *o, const char *spec, char *why, size_t whylen);
/* The same, logging the reason (ERR) instead. 0 or -EINVAL. */
int ing_pool_parse_classes(struct ing_pool_opts *o, const char *spec);
/* Bytes the classes of o map: each slot rounded up to 4 KiB (the pool's smallest page). */
uint64_t ing_pool_spec_bytes(const struct ing_pool_opts *o);

struct ing_pool;
/* Map each region's classes (one mapping per class and region), carve slots, build the
 * descriptor mempools. NULL + log on error. */
struct ing_pool *ing_pool_create(const struct ing_pool_opts *o);
void ing_pool_destroy(struct ing_pool *p);  /* tolerant of NULL and of half-built pools */
/*
 * Take the smallest free slot that holds len bytes (falls back to larger classes), from
 * the home region first, then the others in order. NULL: len above the largest class
 * (check ing_pool_max_len first) or none free (backpressure: retry after a put). Any
 * thread; lockless.
 */
struct ing_frame *ing_pool_get(struct ing_pool *p, uint64_t len);
/* The same, from classes below cls_end only (admission: classes an earlier waiter
 * could use are left to it). */
struct ing_frame *ing_pool_get_below(struct ing_pool *p, uint64_t len, unsigned cls_end);
/* The same from region only (a rail's frames: region >= 0), or as ing_pool_get_below
 * (region < 0). A region the pool lacks has no slot: NULL. */
struct ing_frame *ing_pool_get_in(struct ing_pool *p, int region, uint64_t len, unsigned cls_end);
void ing_pool_put(struct ing_frame *f);   /* any thread */
uint64_t ing_pool_max_len(const struct ing_pool *p);
unsigned ing_pool_total(const struct ing_pool *p);
unsigned ing_pool_free(const struct ing_pool *p);
/* the free slots' mempool driver: "lf_stack" (lock-free), "stack" where the CPU lacks the
 * 128-bit CAS; "" for no pool */
const char *ing_pool_driver(const struct ing_pool *p);
bool ing_pool_on_hugepages(const struct ing_pool *p);
unsigned ing_pool_nregions(const struct ing_pool *p);
/* The region a frame with no region asked for tries first (ing_pool_opts.home_region). */
unsigned ing_pool_home_region(const struct ing_pool *p);
/* Region r's NUMA node (-1: not bound, or no such region). */
int ing_pool_region_node(const struct ing_pool *p, unsigned r);
/* The region of NUMA node node, -1 when none is there. */
int ing_pool_region_of_node(const struct ing_pool *p, int node);
/* Class c's mapping in region r (for ibv_reg_mr: once per mapping and PD). 0 or -ENOENT. */
int ing_pool_region(const struct ing_pool *p, unsigned r, unsigned c, void **base, size_t *len);
unsigned ing_pool_nclasses(const struct ing_pool *p);
/* Class c, over every region: the largest frame it takes (its size as --pool gave it,
 * 4 KiB-rounded, whatever the pages), slots, slots free now (approximate). 0 or -ENOENT. */
int ing_pool_class_stats(const struct ing_pool *p, unsigned c, uint64_t *slot_size,
			 unsigned *total, unsigned *free_slots);
/* Region r's slots and slots free now (approximate). 0 or -ENOENT. */
int ing_pool_region_stats(const struct ing_pool *p, unsigned r, unsigned *total,
			  unsigned *free_slots);

/* ---------------------------------------------------------------- mailboxes */

/*
 * One mailbox per thread (SPDK's spdk_thread_send_msg model): the control thread, every
 * dataplane lcore, every persistence worker, the tier thread and the fleet exporter receive
 * everything other threads tell them
 * through their own mailbox, a bounded MP/SC queue of struct ing_msg with an eventfd
 * doorbell, and sleep on that one fd. A message is an event about a frame ({kind, frame}:
 * the frame moves with it, one owner at a time) or a call ({fn, arg}: fn runs on the
 * owner's thread); the message and its kinds are dataplane/msg.h's. Messages about one
 * frame that one thread posts, or that a hand-off orders (the lcore posts RECEIVED before
 * it hands the frame to persistence, which posts DONE), arrive in that order: one ordered
 * channel per frame. Any thread posts; only the owner pops. No allocation after create; a
 * full mailbox is -ENOBUFS (the node sizes the frame-carrying ones from the pool, so it
 * cannot happen to a frame).
 */
struct ing_mbox;
/* size: messages it holds (any number, not rounded). NULL + log on error. No EAL needed. */
struct ing_mbox *ing_mbox_create(const char *name, unsigned size);
void ing_mbox_destroy(struct ing_mbox *mb);   /* tolerant of NULL */
/* Any thread. Post one message, or n in order (all or none). 0 or -ENOBUFS (full: retry
 * later; nothing was posted). */
int ing_mbox_post(struct ing_mbox *mb, const struct ing_msg *m);
int ing_mbox_post_n(struct ing_mbox *mb, const struct ing_msg *m, unsigned n);
/* Any thread: the event {kind, f}; the call {fn, arg, val}. 0 or -ENOBUFS. */
int ing_mbox_send(struct ing_mbox *mb, uint32_t kind, struct ing_frame *f);
int ing_mbox_call(struct ing_mbox *mb, ing_msg_fn fn, void *arg, uint32_t val);
/* Owner: pop up to max messages (a copy each), oldest first. Returns the count. */
unsigned ing_mbox_pop(struct ing_mbox *mb, struct ing_msg *m, unsigned max);
/* Owner: pop up to max messages, run the calls and hand the events to on_event(ctx, m),
 * in order. Returns the count (fewer than max: the mailbox was empty). */
typedef void (*ing_msg_handler)(void *ctx, const struct ing_msg *m);
unsigned ing_mbox_run(struct ing_mbox *mb, unsigned max, ing_msg_handler on_event, void *ctx);
/*
 * Owner, found the mailbox empty and about to sleep: consume the doorbell, re-arm it and
 * look again. true: still empty, sleep on ing_mbox_fd (a later post rings it); false: a
 * message came in meanwhile, pop again.
 */
bool ing_mbox_idle(struct ing_mbox *mb);
/*
 * Owner whose event loop watches ing_mbox_fd, on its doorbell: ing_mbox_run until the
 * mailbox is empty and ing_mbox_idle says it stays so, at most max messages. Returns the
 * count; max: the budget was spent before the doorbell was consumed, so the fd is still
 * readable and the loop comes back at once (other fds get their turn meanwhile).
 */
unsigned ing_mbox_drain(struct ing_mbox *mb, unsigned max, ing_msg_handler on_event, void *ctx);
/* That owner's doorbell callback, for its event loop to call directly (the signature of an
 * fd callback; arg: the sink, which the owner keeps): ing_mbox_drain(mb, budget, ...). */
struct ing_mbox_sink {
	struct ing_mbox *mb;
	unsigned budget;
	ing_msg_handler on_event;
	void *ctx;
};
void ing_mbox_sink_cb(void *sink, uint32_t events);
/* Owner: sleep until the doorbell rings or timeout_ms passes (-1: no limit). 1 rung,
 * 0 timeout, -errno. */
int ing_mbox_wait(struct ing_mbox *mb, int timeout_ms);
/* Any thread: wake the owner without a message (it re-checks its stop flag). */
void ing_mbox_kick(struct ing_mbox *mb);
/* The doorbell eventfd (epoll, poll), -1 for NULL. */
int ing_mbox_fd(const struct ing_mbox *mb);
unsigned ing_mbox_count(const struct ing_mbox *mb);      /* any thread, approximate */

/* ---------------------------------------------------------------- persistence */

struct ing_hwm;
struct ing_persist_opts {
	const char *data_dir;  /* created if missing; frames/ and catalog.db inside */
	/* counts the bytes of the rows inserted, as one step with the insert (NULL: none);
	 * dataplane/hwm.h */
	struct ing_hwm *hwm;
	unsigned workers;      /* default ING_DEFAULT_WORKERS */
	unsigned ring_size;    /* per worker, default ING_DEFAULT_RING_SIZE */
	enum ing_sink sink;    /* file (default) or null (benchmarks: no write, no catalog) */
	bool verify_crc;       /* default true: compute crc32c and compare when declared */
	/*
	 * 1..19: each worker runs SCHED_BATCH at this nice level, so a worker waking from
	 * fdatasync or busy copying a frame into the page cache never preempts the control
	 * thread (which serves HTTP/2 and sends the RECEIVED acks) or an RDMA poller on a
	 * shared cpu; 0: plain SCHED_OTHER threads. Default ING_DEFAULT_WORKER_NICE.
	 */
	unsigned nice;
	/*
	 * Per-worker placement (a plan's worker_cpus): worker i runs on
	 * worker_cpus[i % n_worker_cpus], or is not pinned where that is -1. NULL/0: see cpu.
	 */
	const int *worker_cpus;
	unsigned n_worker_cpus;
	/*
	 * Where a worker that is not pinned runs: the process's cpus as they were before EAL
	 * pinned the main thread (ingestd captures them first thing in main). Threads inherit
	 * their creator's mask, so without this a worker started from the EAL main thread
	 * would share the control lcore's one cpu. NULL/0: every configured cpu (the kernel
	 * narrows that to the cgroup's cpuset, but not to a taskset mask). Both lists are
	 * copied by ing_persist_start.
	 */
	const int *unpinned_cpus;
	unsigned n_unpinned_cpus;
	/*
	 * Worker groups, one per pool region (its NUMA node): group g has `workers` workers
	 * (workers g*workers .. g*workers + workers - 1, worker_cpus in that order) and takes
	 * the frames whose slot is in region g, so the CRC-32C and the write of a frame run
	 * on the node whose memory holds it. 0 or 1: one group for every frame.
	 */
	unsigned groups;
	int group_node[ING_POOL_MAX_REGIONS];   /* for logs and ing_persist_worker_node */
};
void ing_persist_opts_init(struct ing_persist_opts *o);

struct ing_persist;
/*
 * Start the workers, each with its own mailbox and its cpu affinity set explicitly (never
 * the caller's mask by inheritance; the placement is logged once). Completed frames from
 * any thread go to ing_persist_submit; each comes back as ING_EV_DONE on ctl, the control
 * thread's mailbox (status, duplicate, crc, t_durable_ns set). NULL + log on error.
 */
struct ing_persist *ing_persist_start(const struct ing_persist_opts *o, struct ing_mbox *ctl);
/* Stop after draining what was submitted (bounded by timeout_ms); tolerant of NULL.
 * Every frame submitted is posted to ctl first (failed SHUTTING_DOWN past the deadline). */
void ing_persist_stop(struct ing_persist *p, int timeout_ms);
/*
 * Hand a complete frame (length bytes in buf, t_received_ns set) to a worker of the group
 * of its slot's region (f->region), chosen within the group by ing_id_pair_hash (the
 * same (wafer, frame) in the same region always lands on the same worker, so duplicates
 * serialise; control lets one copy of a frame be in flight at a time anyway): ING_EV_PERSIST
 * on that worker's mailbox. The worker records itself in f->persist_worker.
 * 0 or -ENOBUFS (mailbox full: retry later; the frame is still the caller's). Any thread.
 */
int ing_persist_submit(struct ing_persist *p, struct ing_frame *f);
struct ing_persist_stats {
	uint64_t frames, bytes, duplicates, failures, fsyncs, batches;
	uint64_t rewrites;   /* catalogued frames whose missing/short file was written again */
};
void ing_persist_get_stats(const struct ing_persist *p, struct ing_persist_stats *s);
/* The same for group g's workers only. 0 or -ENOENT. */
int ing_persist_get_group_stats(const struct ing_persist *p, unsigned g, struct ing_persist_stats *s);
unsigned ing_persist_nworkers(const struct ing_persist *p);
unsigned ing_persist_ngroups(const struct ing_persist *p);
/* Worker w's group and that group's NUMA node (-1 unknown). 0 or -ENOENT. */
int ing_persist_worker_group(const struct ing_persist *p, unsigned w, unsigned *group, int *node);

/*
 * Called by a background thread itself (persistence workers, the tier thread): SCHED_BATCH
 * (no wake-up preemption of other threads) and nice for this thread only (Linux:
 * setpriority on a tid), unless it already runs at that nice or lower; nice 0: nothing. A
 * failure is logged (who names the thread) and it runs at the normal priority.
 */
void ing_thread_lower_priority(unsigned nice, const char *who);

#endif
