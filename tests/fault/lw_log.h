/* SPDX-License-Identifier: Apache-2.0 */
/*
 * lw_log.h - reader of the log that the kernel's device-mapper "log-writes" target writes
 * (Documentation/admin-guide/device-mapper/log-writes.rst), for the power-loss harness:
 * walk the entries in log order and apply them to a scratch copy of the logged device.
 *
 * On-disk layout, little-endian: a super block in the first sector (magic, version,
 * nr_entries, sectorsize), then nr_entries records, each one sector holding the entry
 * header (sector, nr_sectors, flags, data_len; a MARK's name follows the header in the
 * same sector) and, unless the entry is a DISCARD, nr_sectors sectors of the data
 * written. sector and nr_sectors count device sectors of `sectorsize` bytes.
 * Writes appear in the log once a FLUSH (or their own FUA) made them durable, so
 * replaying entries [0, N] gives the device as a power cut right after entry N leaves it.
 */
#ifndef ING_TESTS_LW_LOG_H
#define ING_TESTS_LW_LOG_H

#include <stdbool.h>
#include <stdint.h>

#define LW_MAGIC 0x6a736677736872ull
#define LW_VERSION 1ull

enum lw_flag {
	LW_FLUSH = 1u << 0,
	LW_FUA = 1u << 1,
	LW_DISCARD = 1u << 2,
	LW_MARK = 1u << 3,
	LW_METADATA = 1u << 4,
};

#define LW_MARK_MAX 480   /* a mark name fits in one sector with the header */

struct lw_log {
	int fd;
	uint32_t sectorsize;
	uint64_t nr_entries;
	uint64_t log_size;    /* bytes of the log file/device */
	uint64_t next_index;  /* entry lw_log_next returns next */
	uint64_t next_off;    /* its byte offset in the log */
};

struct lw_entry {
	uint64_t index;       /* 0-based position in the log */
	uint64_t sector;      /* device sectors of log->sectorsize bytes */
	uint64_t nr_sectors;
	uint64_t flags;       /* enum lw_flag */
	uint64_t data_len;
	uint64_t data_off;    /* byte offset of the written data in the log */
	char mark[LW_MARK_MAX + 1];  /* LW_MARK: its name, NUL-terminated */
};

/* Open a log (file or block device) read-only and check its super block.
 * Returns 0, -EINVAL (not a log-writes log: bad magic, version or sector size), -errno. */
int lw_log_open(struct lw_log *l, const char *path);

/* Read the next entry into *e. Returns 1, 0 at the end (nr_entries read), -EINVAL for an
 * entry that does not fit in the log, -errno on a read error. */
int lw_log_next(struct lw_log *l, struct lw_entry *e);

/* Apply one entry to the device image open in dev_fd (a regular file or a block device):
 * writes copy their data, DISCARDs zero their range (a hole in a file, BLKZEROOUT on a
 * device: discarded blocks read back as zeros, deterministically), FLUSH-only and MARK
 * entries change nothing. Returns 0 or -errno. */
int lw_log_apply(struct lw_log *l, const struct lw_entry *e, int dev_fd);

/* Release the log (tolerates one whose lw_log_open failed, and a second call). */
void lw_log_close(struct lw_log *l);

/* "FLUSH|FUA|..." for a flags word into buf (size >= 48); "-" for none. */
const char *lw_flags_str(uint64_t flags, char *buf, unsigned size);

#endif
