/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mbox.c - one mailbox per thread: a bounded multi-producer / single-consumer queue of small
 * messages (struct ing_msg: an event about a frame, or a {fn, arg} call) plus an eventfd
 * doorbell for an owner that sleeps. The control thread, every dataplane lcore and every
 * persistence worker receive everything through their own mailbox; DPDK's ring does the
 * queueing (rte_ring elem API on memory of our own, so unit tests need no EAL).
 *
 * Doorbell protocol (no lost wake-up; one eventfd write per owner wake-up, not per message):
 *   post:  enqueue; if (exchange(rung, 1) == 0) write(efd)
 *   owner: pop until empty; ing_mbox_idle(): read(efd); exchange(rung, 0); look again;
 *          still empty: sleep on efd
 * Both sides use seq_cst read-modify-writes on rung, so for every message either the
 * owner's look after its re-arm sees it, or the poster's exchange sees the re-arm (0) and
 * writes the eventfd, which the owner then finds readable. An owner that never sleeps
 * (a busy-polling lcore) never re-arms, so its posters never make a system call.
 * "Was the queue empty before my enqueue?" cannot decide the doorbell: the owner may empty
 * it between that look and the enqueue and go to sleep with the message inside (the RDMA
 * notice ring lost its RECEIVED and GRANTED notices for good that way).
 */
#include "dataplane/dataplane_internal.h"
#include "common/log.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <rte_common.h>
#include <rte_ring.h>
#include <rte_ring_elem.h>

#define COMP "mbox"

struct ing_mbox {
	struct rte_ring *r;       /* aligned_alloc'ed, rte_ring_init'ed */
	int efd;
	int rung;                 /* 1: the doorbell was written since the owner last re-armed */
	char name[RTE_RING_NAMESIZE];
};

/*
 * ThreadSanitizer builds: what a message points to (a frame, a call's argument) is handed
 * over by the ring. The ring's own slot copies are in tests/tsan.supp (its MP tail hand-off
 * between producers is a relaxed wait, which C11 does not count as an edge); the payloads
 * are annotated: everything a poster wrote before a post happens before the pop of it.
 */
#if defined(__SANITIZE_THREAD__)
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
#define MBOX_RELEASE(mb) __tsan_release(mb)
#define MBOX_ACQUIRE(mb) __tsan_acquire(mb)
#else
#define MBOX_RELEASE(mb) ((void)(mb))
#define MBOX_ACQUIRE(mb) ((void)(mb))
#endif

/* rte_ring_count with atomic loads (the inline one reads the tails plainly) */
static unsigned ring_count(const struct rte_ring *rr)
{
	uint32_t prod = __atomic_load_n(&rr->prod.tail, __ATOMIC_ACQUIRE);
	uint32_t cons = __atomic_load_n(&rr->cons.tail, __ATOMIC_ACQUIRE);
	uint32_t n = (prod - cons) & rr->mask;

	return n > rr->capacity ? rr->capacity : n;
}

struct ing_mbox *ing_mbox_create(const char *name, unsigned size)
{
	unsigned flags = RING_F_SC_DEQ | RING_F_EXACT_SZ;
	struct ing_mbox *mb;

	if (!size || size > RTE_RING_SZ_MASK) {
		ING_ERR(COMP, "mailbox %s: bad size %u", name ? name : "?", size);
		return NULL;
	}
	mb = calloc(1, sizeof(*mb));
	if (!mb) {
		ING_ERR(COMP, "out of memory");
		return NULL;
	}
	mb->efd = -1;
	snprintf(mb->name, sizeof(mb->name), "%s", name ? name : "mbox");
	/*
	 * Posters include preemptible pthreads (persistence workers, control): RTS (relaxed
	 * tail sync) keeps one preempted poster from making every other one spin until it runs
	 * again, as the classic MP mode does. ThreadSanitizer builds only: the RTS tail is
	 * published with an 8-byte CAS that the consumer reads as 4 bytes, a pairing TSan
	 * cannot see; the classic mode (same contract, C11 atomics) it can check.
	 */
#if !defined(__SANITIZE_THREAD__)
	flags |= RING_F_MP_RTS_ENQ;
#endif
	ssize_t sz = rte_ring_get_memsize_elem(sizeof(struct ing_msg), rte_align32pow2(size + 1));
	if (sz < 0) {
		ING_ERR(COMP, "mailbox %s: size %u too large", mb->name, size);
		free(mb);
		return NULL;
	}
	mb->r = aligned_alloc(RTE_CACHE_LINE_SIZE, RTE_ALIGN_CEIL((size_t)sz, RTE_CACHE_LINE_SIZE));
	if (!mb->r || rte_ring_init(mb->r, mb->name, size, flags)) {
		ING_ERR(COMP, "mailbox %s: cannot set up its ring of %u", mb->name, size);
		free(mb->r);
		free(mb);
		return NULL;
	}
	mb->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (mb->efd < 0) {
		ING_ERR(COMP, "mailbox %s: eventfd: %s", mb->name, strerror(errno));
		free(mb->r);
		free(mb);
		return NULL;
	}
	return mb;
}

void ing_mbox_destroy(struct ing_mbox *mb)
{
	if (!mb)
		return;
	unsigned left = ring_count(mb->r);
	if (left)
		ING_WARN(COMP, "mailbox %s destroyed with %u messages inside", mb->name, left);
	close(mb->efd);
	free(mb->r);
	free(mb);
}

static void bell(struct ing_mbox *mb)
{
	uint64_t one = 1;

	/* EAGAIN: the counter is saturated, the owner is awake anyway */
	if (write(mb->efd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		ING_LOG_RL(ING_LOG_WARN, COMP, "mailbox %s: doorbell: %s", mb->name, strerror(errno));
}

int mbox_enqueue(struct ing_mbox *mb, const struct ing_msg *m, unsigned n)
{
	MBOX_RELEASE(mb);
	return rte_ring_enqueue_bulk_elem(mb->r, m, sizeof(*m), n, NULL) == n ? 0 : -ENOBUFS;
}

void mbox_ring(struct ing_mbox *mb)
{
	if (__atomic_exchange_n(&mb->rung, 1, __ATOMIC_SEQ_CST) == 0)
		bell(mb);
}

int ing_mbox_post_n(struct ing_mbox *mb, const struct ing_msg *m, unsigned n)
{
	if (!n)
		return 0;
	int rc = mbox_enqueue(mb, m, n);
	if (rc == 0)
		mbox_ring(mb);
	return rc;
}

int ing_mbox_post(struct ing_mbox *mb, const struct ing_msg *m)
{
	return ing_mbox_post_n(mb, m, 1);
}

int ing_mbox_send(struct ing_mbox *mb, uint32_t kind, struct ing_frame *f)
{
	struct ing_msg m = { .kind = kind, .f = f };

	return ing_mbox_post(mb, &m);
}

int ing_mbox_call(struct ing_mbox *mb, ing_msg_fn fn, void *arg, uint32_t val)
{
	struct ing_msg m = { .kind = ING_MSG_CALL, .val = val, .arg = arg, .fn = fn };

	return ing_mbox_post(mb, &m);
}

unsigned ing_mbox_pop(struct ing_mbox *mb, struct ing_msg *m, unsigned max)
{
	unsigned n = rte_ring_sc_dequeue_burst_elem(mb->r, m, sizeof(*m), max, NULL);

	if (n)
		MBOX_ACQUIRE(mb);
	return n;
}

unsigned ing_mbox_run(struct ing_mbox *mb, unsigned max, ing_msg_handler on_event, void *ctx)
{
	struct ing_msg m[32];
	unsigned done = 0;

	while (done < max) {
		unsigned want = max - done < 32 ? max - done : 32;
		unsigned n = ing_mbox_pop(mb, m, want);
		for (unsigned i = 0; i < n; i++) {
			if (m[i].kind == ING_MSG_CALL)
				m[i].fn(m[i].arg, m[i].val);
			else
				on_event(ctx, &m[i]);
		}
		done += n;
		if (n < want)
			break;
	}
	return done;
}

bool ing_mbox_idle(struct ing_mbox *mb)
{
	uint64_t v;

	if (read(mb->efd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		ING_LOG_RL(ING_LOG_WARN, COMP, "mailbox %s: doorbell read: %s", mb->name, strerror(errno));
	(void)__atomic_exchange_n(&mb->rung, 0, __ATOMIC_SEQ_CST);
	return ring_count(mb->r) == 0;
}

unsigned ing_mbox_drain(struct ing_mbox *mb, unsigned max, ing_msg_handler on_event, void *ctx)
{
	unsigned done = 0, n;

	do {
		n = ing_mbox_run(mb, max - done, on_event, ctx);
		done += n;
	} while (done < max && (n || !ing_mbox_idle(mb)));
	return done;
}

void ing_mbox_sink_cb(void *sink, uint32_t events)
{
	struct ing_mbox_sink *k = sink;
	(void)events;
	(void)ing_mbox_drain(k->mb, k->budget, k->on_event, k->ctx);
}

int ing_mbox_wait(struct ing_mbox *mb, int timeout_ms)
{
	struct pollfd pfd = { .fd = mb->efd, .events = POLLIN };
	int rc = poll(&pfd, 1, timeout_ms);

	if (rc < 0)
		return errno == EINTR ? 0 : -errno;
	return rc > 0 ? 1 : 0;
}

void ing_mbox_kick(struct ing_mbox *mb)
{
	if (!mb)
		return;
	__atomic_store_n(&mb->rung, 1, __ATOMIC_SEQ_CST);
	bell(mb);
}

int ing_mbox_fd(const struct ing_mbox *mb)
{
	return mb ? mb->efd : -1;
}

unsigned ing_mbox_count(const struct ing_mbox *mb)
{
	return ring_count(mb->r);
}
