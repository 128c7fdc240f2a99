/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsync_gate.c - LD_PRELOAD library for the fleet failover tests (test build only; never
 * installed): while the file named by $ING_TEST_FSYNC_GATE exists, fsync, fdatasync,
 * syncfs and sync_file_range wait (polling it every 5 ms) before they do their real work.
 *
 * What it is for: an ingest node makes a frame DURABLE only after fdatasync of its file and
 * the catalog's commit. With the gate closed (the file created) the node keeps taking
 * frames and acking them RECEIVED, but none becomes DURABLE: the test sees, in the node's
 * Stats, frames RECEIVED and not DURABLE, a state that lasts until it acts. It then kills
 * or stops the node at a moment it chose, so "no frame re-sent after the kill" can only
 * mean a bug, never an unlucky schedule (fleet.failover_kill9 failed 3 of 32 runs that way
 * when the kill came after 200 DURABLE acks, whatever the node held at that instant).
 * A call that waits creates <gate>.waiting: from then on at least the frames of the batch
 * it serves stay RECEIVED and not DURABLE (the persistence worker is the node's only
 * caller of these while frames flow). Removing the gate file opens the gate. Without the
 * variable the calls pass straight through.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

/* While the gate is closed: wait, and say so in <gate>.waiting (created by the first call
 * that waits): a call is blocked, so the frames of the batch it serves cannot become
 * DURABLE until the gate opens. */
static void gate_wait(void)
{
	const char *path = getenv("ING_TEST_FSYNC_GATE");
	struct timespec ts = { 0, 5 * 1000 * 1000 };
	char mark[4096];
	bool said = false;

	if (!path || !*path || (size_t)snprintf(mark, sizeof(mark), "%s.waiting", path) >= sizeof(mark))
		return;
	while (access(path, F_OK) == 0) {
		if (!said) {
			int fd = open(mark, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
			if (fd >= 0)
				close(fd);
			said = true;
		}
		nanosleep(&ts, NULL);
	}
}

#define REAL(name) ((__typeof__(&name))dlsym(RTLD_NEXT, #name))

int fsync(int fd)
{
	gate_wait();
	return REAL(fsync)(fd);
}

int fdatasync(int fd)
{
	gate_wait();
	return REAL(fdatasync)(fd);
}

int syncfs(int fd)
{
	gate_wait();
	return REAL(syncfs)(fd);
}

int sync_file_range(int fd, off64_t off, off64_t n, unsigned int flags)
{
	gate_wait();
	return REAL(sync_file_range)(fd, off, n, flags);
}
