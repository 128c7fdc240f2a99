/*
 * The local high-water mark's accounting, exact whatever the order in which the threads
 * run: a frame counts from its admission (control) until the catalog's count holds it, and
 * never twice.
 *
 * Three writers, each counting what it alone knows:
 *  - the persistence workers add the bytes of every row they insert (committed), in the
 *    same step (mu) as the insert, so the catalog and committed never disagree for a reader
 *    holding mu;
 *  - the tier measures (census of the catalog, or the file system) and takes committed
 *    under mu: used_base = measure - committed at that point;
 *  - control adds the bytes of every frame it finished whose row persistence inserted
 *    (finished_stored); the frames it admitted and has not finished are its pending bytes.
 * Used = used_base + finished_stored + pending: a frame admitted and stored before the
 * measure is in the measure and in committed (net once, via finished_stored or pending);
 * one stored after it is in neither (once, the same way); one that failed leaves pending
 * and never enters finished_stored. With a file-system measure (a % mark) a frame's bytes
 * can be on the disk before its row is inserted: counted twice for that while, never less.
 */
#ifndef ING_HWM_H
#define ING_HWM_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct ing_hwm {
	pthread_mutex_t mu;                /* an insert + its count; a measure + its read */
	uint64_t committed;                /* persistence, under mu */
	_Atomic int64_t used_base;         /* the tier: its measure - committed */
	_Atomic uint64_t finished_stored;  /* control alone */
};

static inline void ing_hwm_init(struct ing_hwm *h)
{
	pthread_mutex_init(&h->mu, NULL);
	h->committed = 0;
	atomic_init(&h->used_base, 0);
	atomic_init(&h->finished_stored, 0);
}

static inline void ing_hwm_destroy(struct ing_hwm *h)
{
	pthread_mutex_destroy(&h->mu);
}

/* Persistence, around a catalog insert: begin, insert, end with the bytes of the rows it
 * inserted. NULL: no mark, nothing to do. */
static inline void ing_hwm_commit_begin(struct ing_hwm *h)
{
	if (h)
		pthread_mutex_lock(&h->mu);
}

static inline void ing_hwm_commit_end(struct ing_hwm *h, uint64_t bytes)
{
	if (!h)
		return;
	h->committed += bytes;
	pthread_mutex_unlock(&h->mu);
}

/* The tier, around its measure: begin, measure, end with what it measured. */
static inline void ing_hwm_measure_begin(struct ing_hwm *h)
{
	pthread_mutex_lock(&h->mu);
}

static inline void ing_hwm_measure_end(struct ing_hwm *h, uint64_t used)
{
	uint64_t c = h->committed;
	pthread_mutex_unlock(&h->mu);
	atomic_store_explicit(&h->used_base, (int64_t)used - (int64_t)c, memory_order_relaxed);
}

/* Control finished a frame it had admitted; stored: persistence inserted its row. */
static inline void ing_hwm_finished(struct ing_hwm *h, uint64_t length, bool stored)
{
	if (!stored)
		return;
	/* one writer (control): a plain add */
	uint64_t r = atomic_load_explicit(&h->finished_stored, memory_order_relaxed);
	atomic_store_explicit(&h->finished_stored, r + length, memory_order_relaxed);
}

/* What is used, control's pending bytes (admitted, not finished) not included. */
static inline uint64_t ing_hwm_used(struct ing_hwm *h)
{
	int64_t u = atomic_load_explicit(&h->used_base, memory_order_relaxed) +
		    (int64_t)atomic_load_explicit(&h->finished_stored, memory_order_relaxed);
	return u > 0 ? (uint64_t)u : 0;
}

#endif
