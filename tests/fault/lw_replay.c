/* SPDX-License-Identifier: Apache-2.0 */
/*
 * lw_replay - list and replay a dm-log-writes log (tests/fault/lw_log.h), for the
 * power-loss harness (tests/fault/powerloss_in_guest.sh).
 *
 *   lw_replay list LOG                 every entry: "INDEX FLAGS SECTOR NR_SECTORS [MARK]"
 *   lw_replay points LOG               the replay points: "INDEX flush" for every entry
 *                                      with FLUSH or FUA, "INDEX mark NAME" for every mark
 *   lw_replay replay LOG DEV [--from A] (--to N | --mark NAME)
 *                                      apply entries A..N (inclusive; A defaults to 0) to
 *                                      DEV, a copy of the device as it was when logging
 *                                      started (file or block device); --mark NAME: up to
 *                                      and including the first mark of that name
 *
 * The first line of list/points is "# sectorsize S entries N". Replaying [0, N] onto the
 * initial image gives the device a power cut right after entry N would have left; an
 * incremental replay (--from previous+1) onto the same image gives the same bytes.
 * Exit: 0, 1 on a bad log or an I/O error (with a message), 2 on usage errors.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lw_log.h"

static int usage(void)
{
	fprintf(stderr, "usage: lw_replay list LOG | points LOG |\n"
			"       replay LOG DEV [--from A] (--to N | --mark NAME)\n");
	return 2;
}

static int parse_u64(const char *s, uint64_t *v)
{
	char *end;
	errno = 0;
	unsigned long long x = strtoull(s, &end, 10);
	if (errno || end == s || *end || *s == '-')
		return -EINVAL;
	*v = x;
	return 0;
}

static int walk(const char *path, int points)
{
	struct lw_log l;
	struct lw_entry e;
	char fl[64];
	int rc = lw_log_open(&l, path);

	if (rc) {
		fprintf(stderr, "lw_replay: %s: %s\n", path,
			rc == -EINVAL ? "not a dm-log-writes log" : strerror(-rc));
		return 1;
	}
	printf("# sectorsize %u entries %" PRIu64 "\n", l.sectorsize, l.nr_entries);
	while ((rc = lw_log_next(&l, &e)) == 1) {
		if (!points)
			printf("%" PRIu64 " %s %" PRIu64 " %" PRIu64 "%s%s\n", e.index,
			       lw_flags_str(e.flags, fl, sizeof(fl)), e.sector, e.nr_sectors,
			       e.flags & LW_MARK ? " " : "", e.flags & LW_MARK ? e.mark : "");
		else if (e.flags & LW_MARK)
			printf("%" PRIu64 " mark %s\n", e.index, e.mark);
		else if (e.flags & (LW_FLUSH | LW_FUA))
			printf("%" PRIu64 " flush\n", e.index);
	}
	lw_log_close(&l);
	if (rc < 0) {
		fprintf(stderr, "lw_replay: %s: entry %" PRIu64 ": %s\n", path, l.next_index,
			rc == -EINVAL ? "corrupt or truncated" : strerror(-rc));
		return 1;
	}
	return fflush(stdout) ? 1 : 0;
}

static int replay(int argc, char **argv)
{
	uint64_t from = 0, to = UINT64_MAX;
	const char *mark = NULL;
	struct lw_log l;
	struct lw_entry e;
	int rc, dev, stopped = 0;

	if (argc < 4)
		return usage();
	for (int i = 4; i < argc; i++) {
		if (i + 1 >= argc)
			return usage();
		if (!strcmp(argv[i], "--from") && !parse_u64(argv[i + 1], &from))
			i++;
		else if (!strcmp(argv[i], "--to") && !parse_u64(argv[i + 1], &to))
			i++;
		else if (!strcmp(argv[i], "--mark"))
			mark = argv[++i];
		else
			return usage();
	}
	if ((to == UINT64_MAX) == !mark || from > to)
		return usage();
	if ((rc = lw_log_open(&l, argv[2]))) {
		fprintf(stderr, "lw_replay: %s: %s\n", argv[2],
			rc == -EINVAL ? "not a dm-log-writes log" : strerror(-rc));
		return 1;
	}
	dev = open(argv[3], O_WRONLY | O_CLOEXEC);
	if (dev < 0) {
		fprintf(stderr, "lw_replay: %s: %s\n", argv[3], strerror(errno));
		lw_log_close(&l);
		return 1;
	}
	while ((rc = lw_log_next(&l, &e)) == 1) {
		if (e.index >= from && (rc = lw_log_apply(&l, &e, dev)) < 0) {
			fprintf(stderr, "lw_replay: entry %" PRIu64 " onto %s: %s\n", e.index, argv[3],
				strerror(-rc));
			goto out;
		}
		if (e.index == to || (mark && (e.flags & LW_MARK) && !strcmp(e.mark, mark))) {
			stopped = 1;
			break;
		}
	}
	if (rc < 0) {
		fprintf(stderr, "lw_replay: %s: entry %" PRIu64 ": %s\n", argv[2], l.next_index,
			rc == -EINVAL ? "corrupt or truncated" : strerror(-rc));
	} else if (!stopped) {
		fprintf(stderr, "lw_replay: %s: no %s%s among its %" PRIu64 " entries\n", argv[2],
			mark ? "mark " : "entry ", mark ? mark : argv[argc - 1], l.nr_entries);
		rc = -ENOENT;
	}
out:
	if (fsync(dev) < 0 && rc >= 0) {
		fprintf(stderr, "lw_replay: fsync %s: %s\n", argv[3], strerror(errno));
		rc = -EIO;
	}
	close(dev);
	lw_log_close(&l);
	return rc < 0 ? 1 : 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "list"))
		return walk(argv[2], 0);
	if (argc == 3 && !strcmp(argv[1], "points"))
		return walk(argv[2], 1);
	if (argc >= 4 && !strcmp(argv[1], "replay"))
		return replay(argc, argv);
	return usage();
}
