/* SPDX-License-Identifier: Apache-2.0 */
/*
 * lw_log.c - dm-log-writes log reader and replayer (see lw_log.h). Written from the
 * format's description in the kernel documentation; used by tests/fault/lw_replay.c and
 * unit-tested by tests/unit/test_lw_log.c on logs it builds itself.
 */
#include "lw_log.h"

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#define COPY_CHUNK (1u << 20)

static uint64_t get64(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, sizeof(v));
	return le64toh(v);
}

static uint32_t get32(const uint8_t *p)
{
	uint32_t v;
	memcpy(&v, p, sizeof(v));
	return le32toh(v);
}

static int read_at(int fd, void *buf, size_t len, uint64_t off)
{
	uint8_t *p = buf;
	while (len) {
		ssize_t n = pread(fd, p, len, (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EINVAL;   /* short log */
		p += n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	return 0;
}

static int write_at(int fd, const void *buf, size_t len, uint64_t off)
{
	const uint8_t *p = buf;
	while (len) {
		ssize_t n = pwrite(fd, p, len, (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		p += n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	return 0;
}

static int size_of(int fd, uint64_t *size)
{
	struct stat st;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (S_ISBLK(st.st_mode))
		return ioctl(fd, BLKGETSIZE64, size) < 0 ? -errno : 0;
	*size = (uint64_t)st.st_size;
	return 0;
}

int lw_log_open(struct lw_log *l, const char *path)
{
	uint8_t sb[512];
	int rc;

	memset(l, 0, sizeof(*l));
	l->fd = -1;
	l->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (l->fd < 0)
		return -errno;
	if ((rc = size_of(l->fd, &l->log_size)) || (rc = read_at(l->fd, sb, sizeof(sb), 0)))
		goto bad;
	rc = -EINVAL;
	if (get64(sb) != LW_MAGIC || get64(sb + 8) != LW_VERSION)
		goto bad;
	l->nr_entries = get64(sb + 16);
	l->sectorsize = get32(sb + 24);
	if (l->sectorsize < 512 || l->sectorsize > 65536 || (l->sectorsize & (l->sectorsize - 1)))
		goto bad;
	l->next_off = l->sectorsize;
	return 0;
bad:
	lw_log_close(l);
	return rc;
}

int lw_log_next(struct lw_log *l, struct lw_entry *e)
{
	uint8_t h[512];
	int rc;

	if (l->next_index >= l->nr_entries)
		return 0;
	if (l->next_off + l->sectorsize > l->log_size)
		return -EINVAL;
	if ((rc = read_at(l->fd, h, sizeof(h), l->next_off)))
		return rc;
	memset(e, 0, sizeof(*e));
	e->index = l->next_index;
	e->sector = get64(h);
	e->nr_sectors = get64(h + 8);
	e->flags = get64(h + 16);
	e->data_len = get64(h + 24);
	e->data_off = l->next_off + l->sectorsize;
	if (e->flags & ~(uint64_t)(LW_FLUSH | LW_FUA | LW_DISCARD | LW_MARK | LW_METADATA))
		return -EINVAL;
	if (e->flags & LW_MARK) {
		size_t n = e->data_len;
		if (n > LW_MARK_MAX || n > l->sectorsize - 32u)
			return -EINVAL;
		memcpy(e->mark, h + 32, n);
		e->mark[n] = '\0';
	}
	uint64_t data = (e->flags & LW_DISCARD) ? 0 : e->nr_sectors * l->sectorsize;
	if (e->nr_sectors > l->log_size / l->sectorsize || e->data_off + data > l->log_size)
		return -EINVAL;   /* a torn or foreign log: never read past its end */
	l->next_off = e->data_off + data;
	l->next_index++;
	return 1;
}

static int zero_range(int fd, uint64_t off, uint64_t len)
{
	struct stat st;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (S_ISBLK(st.st_mode)) {
		uint64_t r[2] = { off, len };
		return ioctl(fd, BLKZEROOUT, r) < 0 ? -errno : 0;
	}
	if (fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off, (off_t)len) == 0)
		return 0;
	/* a filesystem without hole punching: write the zeros */
	static const uint8_t zeros[65536];
	while (len) {
		size_t n = len < sizeof(zeros) ? (size_t)len : sizeof(zeros);
		int rc = write_at(fd, zeros, n, off);
		if (rc)
			return rc;
		off += n;
		len -= n;
	}
	return 0;
}

int lw_log_apply(struct lw_log *l, const struct lw_entry *e, int dev_fd)
{
	uint64_t off = e->sector * l->sectorsize, len = e->nr_sectors * l->sectorsize;
	uint8_t *buf;
	int rc = 0;

	if (e->flags & LW_MARK || !len)
		return 0;
	if (e->flags & LW_DISCARD)
		return zero_range(dev_fd, off, len);
	buf = malloc(len < COPY_CHUNK ? len : COPY_CHUNK);
	if (!buf)
		return -ENOMEM;
	for (uint64_t done = 0; done < len && !rc;) {
		size_t n = len - done < COPY_CHUNK ? (size_t)(len - done) : COPY_CHUNK;
		rc = read_at(l->fd, buf, n, e->data_off + done);
		if (!rc)
			rc = write_at(dev_fd, buf, n, off + done);
		done += n;
	}
	free(buf);
	return rc;
}

void lw_log_close(struct lw_log *l)
{
	if (l->fd >= 0)
		close(l->fd);
	l->fd = -1;
}

const char *lw_flags_str(uint64_t flags, char *buf, unsigned size)
{
	static const char *const names[] = { "FLUSH", "FUA", "DISCARD", "MARK", "METADATA" };
	unsigned used = 0;

	buf[0] = '\0';
	for (unsigned i = 0; i < 5; i++)
		if (flags & (1u << i))
			used += (unsigned)snprintf(buf + used, used < size ? size - used : 0, "%s%s",
						   used ? "|" : "", names[i]);
	if (!used)
		snprintf(buf, size, "-");
	return buf;
}
