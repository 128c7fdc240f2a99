/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fring.c - frame-pointer rings between threads: an rte_ring plus an optional eventfd
 * doorbell for a consumer that sleeps (persistence workers, the control thread's epoll).
 *
 * Doorbell protocol (no lost wake-up, one eventfd write per consumer wake-up, not per push):
 *   producer: enqueue; if (exchange(rung, 1) == 0) write(efd)
 *   consumer: ing_fring_clear() = read(efd); rung = 0;  then pop until empty; then sleep
 * A push that commits after the consumer's clear either finds rung == 0 and writes the
 * eventfd itself, or finds rung == 1 set after the clear by a producer that writes it.
 */
#include "dataplane/dataplane_internal.h"
#include "common/clock.h"
#include "common/log.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <rte_errno.h>
#include <rte_ring.h>

#define COMP "ring"

struct ing_fring {
	struct rte_ring *r;
	int efd;
	int rung;          /* doorbell armed-and-written flag, see the protocol above */
	char name[RTE_RING_NAMESIZE];
};

/* rte_ring_count with atomic loads (the inline one reads the tails plainly) */
static unsigned ring_count(const struct rte_ring *rr)
{
	uint32_t prod = __atomic_load_n(&rr->prod.tail, __ATOMIC_ACQUIRE);
	uint32_t cons = __atomic_load_n(&rr->cons.tail, __ATOMIC_ACQUIRE);
	uint32_t n = (prod - cons) & rr->mask;

	return n > rr->capacity ? rr->capacity : n;
}

struct ing_fring *ing_fring_create(const char *name, unsigned size, unsigned flags, bool doorbell)
{
	struct ing_fring *r;
	unsigned rflags = RING_F_EXACT_SZ;

	if (!size || size > RTE_RING_SZ_MASK) {
		ING_ERR(COMP, "ring %s: bad size %u", name ? name : "?", size);
		return NULL;
	}
	r = calloc(1, sizeof(*r));
	if (!r) {
		ING_ERR(COMP, "out of memory");
		return NULL;
	}
	r->efd = -1;
	dp_unique_name(r->name, sizeof(r->name), name ? name : "fring");
	/*
	 * Multi-producer/consumer sides use RTS (relaxed tail sync): our producers include
	 * preemptible pthreads (persistence workers, control), and with the classic MP
	 * mode one preempted producer makes every other producer spin until it runs again.
	 */
#if defined(__SANITIZE_THREAD__)
	/*
	 * ThreadSanitizer builds only: the RTS tail is published with an 8-byte CAS that the
	 * other side reads as 4 bytes at offset 4, a pairing TSan cannot see; the classic
	 * MP/MC mode (same contract, C11 atomics) it can check.
	 */
	rflags |= flags & ING_FRING_SP ? RING_F_SP_ENQ : 0;
	rflags |= flags & ING_FRING_SC ? RING_F_SC_DEQ : 0;
#else
	rflags |= flags & ING_FRING_SP ? RING_F_SP_ENQ : RING_F_MP_RTS_ENQ;
	rflags |= flags & ING_FRING_SC ? RING_F_SC_DEQ : RING_F_MC_RTS_DEQ;
#endif
	r->r = rte_ring_create(r->name, size, SOCKET_ID_ANY, rflags);
	if (!r->r) {
		ING_ERR(COMP, "rte_ring_create(%s, %u): %s (EAL started?)", r->name, size,
			rte_strerror(rte_errno));
		ing_fring_destroy(r);
		return NULL;
	}
	if (doorbell) {
		r->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		if (r->efd < 0) {
			ING_ERR(COMP, "ring %s: eventfd: %s", r->name, strerror(errno));
			ing_fring_destroy(r);
			return NULL;
		}
	}
	return r;
}

void ing_fring_destroy(struct ing_fring *r)
{
	if (!r)
		return;
	if (r->r) {
		unsigned left = ring_count(r->r);
		if (left)
			ING_WARN(COMP, "ring %s destroyed with %u frames inside", r->name, left);
		rte_ring_free(r->r);
	}
	if (r->efd >= 0)
		close(r->efd);
	free(r);
}

static void ring_bell(struct ing_fring *r)
{
	uint64_t one = 1;
	ssize_t w = write(r->efd, &one, sizeof(one));
	(void)w;   /* EAGAIN: the counter is saturated, the consumer is awake anyway */
}

void fring_kick(struct ing_fring *r)
{
	if (r && r->efd >= 0) {
		__atomic_store_n(&r->rung, 1, __ATOMIC_SEQ_CST);
		ring_bell(r);
	}
}

/*
 * ThreadSanitizer builds: what the pointers carry is handed over by the ring. The ring's
 * own slots are in tests/tsan.supp (its MP tail hand-off between producers is a relaxed
 * wait, which C11 does not count as an edge); the frames are annotated: everything a
 * producer wrote before a push happens before the pop that returns it.
 */
#if defined(__SANITIZE_THREAD__)
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
#define FRING_RELEASE(r) __tsan_release(r)
#define FRING_ACQUIRE(r) __tsan_acquire(r)
#else
#define FRING_RELEASE(r) ((void)(r))
#define FRING_ACQUIRE(r) ((void)(r))
#endif

int ing_fring_push_msg(struct ing_fring *r, void *const *m, unsigned n)
{
	if (!n)
		return 0;
	FRING_RELEASE(r);
	if (rte_ring_enqueue_bulk(r->r, m, n, NULL) != n)
		return -ENOBUFS;
	if (r->efd >= 0 && __atomic_exchange_n(&r->rung, 1, __ATOMIC_SEQ_CST) == 0)
		ring_bell(r);
	return 0;
}

unsigned ing_fring_pop_msg(struct ing_fring *r, void **m, unsigned max)
{
	unsigned n = rte_ring_dequeue_burst(r->r, m, max, NULL);
	if (n)
		FRING_ACQUIRE(r);
	return n;
}

int ing_fring_push(struct ing_fring *r, struct ing_frame **f, unsigned n)
{
	return ing_fring_push_msg(r, (void *const *)f, n);
}

unsigned ing_fring_pop(struct ing_fring *r, struct ing_frame **f, unsigned max)
{
	return ing_fring_pop_msg(r, (void **)f, max);
}

int ing_fring_fd(const struct ing_fring *r)
{
	return r ? r->efd : -1;
}

void ing_fring_clear(struct ing_fring *r)
{
	uint64_t v;

	if (r->efd < 0)
		return;
	ssize_t rd = read(r->efd, &v, sizeof(v));
	(void)rd;
	__atomic_store_n(&r->rung, 0, __ATOMIC_SEQ_CST);
}

int ing_fring_wait(struct ing_fring *r, int timeout_ms)
{
	if (ring_count(r->r))
		return 1;
	if (r->efd < 0) {
		/* no doorbell: bounded sleep-poll */
		uint64_t deadline = ing_now_ns() + (uint64_t)(timeout_ms < 0 ? 0 : timeout_ms) * 1000000ull;
		struct timespec ts = { 0, 100000 };
		while (!ring_count(r->r)) {
			if (ing_now_ns() >= deadline)
				return 0;
			nanosleep(&ts, NULL);
		}
		return 1;
	}
	struct pollfd pfd = { .fd = r->efd, .events = POLLIN };
	int rc = poll(&pfd, 1, timeout_ms);
	if (rc < 0)
		return errno == EINTR ? 0 : -errno;
	return rc > 0 ? 1 : 0;
}

unsigned ing_fring_count(const struct ing_fring *r)
{
	return ring_count(r->r);
}
