/* SPDX-License-Identifier: Apache-2.0 */
#ifndef ING_COMMON_CLOCK_H
#define ING_COMMON_CLOCK_H

#include <stdint.h>
#include <time.h>

/* CLOCK_MONOTONIC in ns: deadlines, latencies. Any thread. */
static inline uint64_t ing_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* CLOCK_REALTIME in ns since the epoch: timestamps stored in the catalog. */
static inline int64_t ing_wall_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000ll + (int64_t)ts.tv_nsec;
}

#endif
