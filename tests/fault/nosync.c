/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nosync.c - LD_PRELOAD library for the power-loss harness's negative control: fsync,
 * fdatasync, syncfs, sync_file_range and sync return success without doing anything, so
 * nothing a process writes is made durable on purpose. The harness must then SEE frames
 * that were acked DURABLE and are lost after a power cut (a harness that cannot see a
 * loss proves nothing). open() flags are left alone: ingestd's frame writes use O_DIRECT,
 * which still puts the bytes on the device, but without the FLUSH that fdatasync would
 * send they sit in the device's volatile cache (dm-log-writes logs a write only once a
 * later FLUSH or its own FUA made it durable), and the rename of the temp file, the
 * directory entry and the catalog's WAL commit are never forced out at all: ext4 commits
 * them with its next periodic journal commit (every 5 s by default; the harness mounts with
 * commit=600 so no timer does ingestd's job), long after the ack.
 * Every call is counted; with NOSYNC_LOG=1 the count is printed at exit on stderr.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>
#include <unistd.h>
#include <fcntl.h>

static unsigned long calls;

static void count(void)
{
	__atomic_add_fetch(&calls, 1, __ATOMIC_RELAXED);
}

int fsync(int fd)
{
	(void)fd;
	count();
	return 0;
}

int fdatasync(int fd)
{
	(void)fd;
	count();
	return 0;
}

int syncfs(int fd)
{
	(void)fd;
	count();
	return 0;
}

int sync_file_range(int fd, off64_t off, off64_t n, unsigned int flags)
{
	(void)fd;
	(void)off;
	(void)n;
	(void)flags;
	count();
	return 0;
}

void sync(void)
{
	count();
}

__attribute__((constructor)) static void nosync_banner(void)
{
	const char *v = getenv("NOSYNC_LOG");
	if (v && *v == '1')
		fprintf(stderr, "nosync: fsync/fdatasync/syncfs/sync_file_range/sync are no-ops in pid %d\n",
			(int)getpid());
}

__attribute__((destructor)) static void nosync_report(void)
{
	const char *v = getenv("NOSYNC_LOG");
	if (v && *v == '1')
		fprintf(stderr, "nosync: pid %d skipped %lu sync calls\n", (int)getpid(),
			__atomic_load_n(&calls, __ATOMIC_RELAXED));
}
