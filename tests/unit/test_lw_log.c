/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_lw_log.c - the dm-log-writes reader of the power-loss harness (tests/fault/lw_log.c)
 * on logs this test writes itself in the kernel's layout: entries and marks read back as
 * written, every prefix replayed onto the initial image gives the image the writes up to
 * that entry make (discards read back as zeros), incremental replay gives the same bytes,
 * and foreign, truncated or over-counted logs are refused instead of read past their end.
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "lw_log.h"

#define DEV_SECTORS 64u

struct spec {              /* one entry of the synthetic log */
	uint64_t sector, nr, flags;
	uint8_t fill;          /* data pattern of a write */
	const char *mark;
};

static const struct spec log_spec[] = {
	{ 2, 3, 0, 0xa1, NULL },                 /* write */
	{ 10, 1, LW_FUA, 0xb2, NULL },           /* FUA write */
	{ 0, 0, LW_FLUSH, 0, NULL },             /* empty flush */
	{ 0, 0, LW_MARK, 0, "ack-1" },
	{ 3, 2, LW_DISCARD, 0, NULL },           /* discard inside the first write */
	{ 20, 4, LW_FLUSH | LW_METADATA, 0xc3, NULL },  /* flush carrying data */
	{ 0, 0, LW_MARK, 0, "ack-2" },
	{ 63, 1, 0, 0xd4, NULL },                /* last sector of the device */
};
#define NSPEC (sizeof(log_spec) / sizeof(log_spec[0]))

static void put64(uint8_t *p, uint64_t v)
{
	v = htole64(v);
	memcpy(p, &v, 8);
}

static uint8_t fill_at(const struct spec *s, uint64_t i)
{
	return (uint8_t)(s->fill + i * 7u);
}

/* Write the log of `n` entries (nr_entries = claimed) with sector size ss; returns the fd. */
static int write_log(char *path, uint32_t ss, size_t n, uint64_t claimed, uint64_t magic)
{
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	uint8_t *blk = calloc(1, ss);
	assert_non_null(blk);
	put64(blk, magic);
	put64(blk + 8, LW_VERSION);
	put64(blk + 16, claimed);
	uint32_t ss_le = htole32(ss);
	memcpy(blk + 24, &ss_le, 4);
	off_t off = 0;
	assert_int_equal(pwrite(fd, blk, ss, off), (ssize_t)ss);
	off += ss;
	for (size_t k = 0; k < n; k++) {
		const struct spec *s = &log_spec[k];
		memset(blk, 0, ss);
		put64(blk, s->sector);
		put64(blk + 8, s->nr);
		put64(blk + 16, s->flags);
		put64(blk + 24, s->mark ? strlen(s->mark) : 0);
		if (s->mark)
			memcpy(blk + 32, s->mark, strlen(s->mark));
		assert_int_equal(pwrite(fd, blk, ss, off), (ssize_t)ss);
		off += ss;
		if (s->flags & LW_DISCARD)
			continue;   /* a discard carries no data */
		for (uint64_t i = 0; i < s->nr * ss; i++) {
			uint8_t b = fill_at(s, i);
			assert_int_equal(pwrite(fd, &b, 1, off + (off_t)i), 1);
		}
		off += (off_t)(s->nr * ss);
	}
	free(blk);
	return fd;
}

/* The device after entries [0, upto] on an initial image of 0xee bytes. */
static void expected_image(uint8_t *img, uint32_t ss, size_t upto)
{
	memset(img, 0xee, (size_t)DEV_SECTORS * ss);
	for (size_t k = 0; k <= upto && k < NSPEC; k++) {
		const struct spec *s = &log_spec[k];
		uint8_t *p = img + s->sector * ss;
		if (s->flags & LW_DISCARD)
			memset(p, 0, s->nr * ss);
		else
			for (uint64_t i = 0; i < s->nr * ss; i++)
				p[i] = fill_at(s, i);
	}
}

static int fresh_image(char *path, uint32_t ss)
{
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	uint8_t *img = malloc((size_t)DEV_SECTORS * ss);
	assert_non_null(img);
	memset(img, 0xee, (size_t)DEV_SECTORS * ss);
	assert_int_equal(pwrite(fd, img, (size_t)DEV_SECTORS * ss, 0), (ssize_t)(DEV_SECTORS * ss));
	free(img);
	return fd;
}

static void check_image(int fd, uint32_t ss, size_t upto)
{
	size_t len = (size_t)DEV_SECTORS * ss;
	uint8_t *want = malloc(len), *got = malloc(len);
	assert_non_null(want);
	assert_non_null(got);
	expected_image(want, ss, upto);
	assert_int_equal(pread(fd, got, len, 0), (ssize_t)len);
	if (memcmp(want, got, len)) {
		for (size_t i = 0; i < len; i++)
			if (want[i] != got[i]) {
				fail_msg("replay to %zu (sector size %u): byte %zu is %02x, want %02x",
					 upto, ss, i, got[i], want[i]);
			}
	}
	free(want);
	free(got);
}

static void entries_read_back(uint32_t ss)
{
	char lp[] = "/tmp/test_lw_log.XXXXXX";
	int lfd = write_log(lp, ss, NSPEC, NSPEC, LW_MAGIC);
	struct lw_log l;
	struct lw_entry e;

	assert_int_equal(lw_log_open(&l, lp), 0);
	assert_int_equal(l.sectorsize, ss);
	assert_int_equal(l.nr_entries, NSPEC);
	for (size_t k = 0; k < NSPEC; k++) {
		assert_int_equal(lw_log_next(&l, &e), 1);
		assert_int_equal(e.index, k);
		assert_int_equal(e.sector, log_spec[k].sector);
		assert_int_equal(e.nr_sectors, log_spec[k].nr);
		assert_int_equal(e.flags, log_spec[k].flags);
		if (log_spec[k].mark)
			assert_string_equal(e.mark, log_spec[k].mark);
	}
	assert_int_equal(lw_log_next(&l, &e), 0);
	assert_int_equal(lw_log_next(&l, &e), 0);
	lw_log_close(&l);
	lw_log_close(&l);
	close(lfd);
	unlink(lp);
}

static void test_entries_512(void **state)
{
	(void)state;
	entries_read_back(512);
}

static void test_entries_4096(void **state)
{
	(void)state;
	entries_read_back(4096);
}

/* every prefix onto a fresh image, then the whole log incrementally onto one image */
static void replay_prefixes(uint32_t ss)
{
	char lp[] = "/tmp/test_lw_log.XXXXXX";
	int lfd = write_log(lp, ss, NSPEC, NSPEC, LW_MAGIC);
	struct lw_log l;
	struct lw_entry e;

	for (size_t upto = 0; upto < NSPEC; upto++) {
		char ip[] = "/tmp/test_lw_img.XXXXXX";
		int dev = fresh_image(ip, ss);
		assert_int_equal(lw_log_open(&l, lp), 0);
		while (lw_log_next(&l, &e) == 1 && e.index <= upto)
			assert_int_equal(lw_log_apply(&l, &e, dev), 0);
		lw_log_close(&l);
		check_image(dev, ss, upto);
		close(dev);
		unlink(ip);
	}
	char ip[] = "/tmp/test_lw_img.XXXXXX";
	int dev = fresh_image(ip, ss);
	for (size_t upto = 0; upto < NSPEC; upto++) {
		assert_int_equal(lw_log_open(&l, lp), 0);
		while (lw_log_next(&l, &e) == 1 && e.index <= upto)
			if (e.index == upto)
				assert_int_equal(lw_log_apply(&l, &e, dev), 0);
		lw_log_close(&l);
		check_image(dev, ss, upto);
	}
	close(dev);
	unlink(ip);
	close(lfd);
	unlink(lp);
}

static void test_replay_512(void **state)
{
	(void)state;
	replay_prefixes(512);
}

static void test_replay_4096(void **state)
{
	(void)state;
	replay_prefixes(4096);
}

static void test_refuses_bad_logs(void **state)
{
	(void)state;
	struct lw_log l;
	struct lw_entry e;
	char p1[] = "/tmp/test_lw_log.XXXXXX", p2[] = "/tmp/test_lw_log.XXXXXX";
	char p3[] = "/tmp/test_lw_log.XXXXXX";

	/* not a log: wrong magic */
	int fd = write_log(p1, 512, NSPEC, NSPEC, LW_MAGIC ^ 1);
	assert_int_equal(lw_log_open(&l, p1), -EINVAL);
	lw_log_close(&l);
	close(fd);
	unlink(p1);
	assert_int_equal(lw_log_open(&l, "/nonexistent/log"), -ENOENT);

	/* the super block claims more entries than were written */
	fd = write_log(p2, 512, 3, 5, LW_MAGIC);
	assert_int_equal(lw_log_open(&l, p2), 0);
	for (int k = 0; k < 3; k++)
		assert_int_equal(lw_log_next(&l, &e), 1);
	assert_int_equal(lw_log_next(&l, &e), -EINVAL);
	lw_log_close(&l);
	close(fd);
	unlink(p2);

	/* torn in the middle of the first entry's data */
	fd = write_log(p3, 512, NSPEC, NSPEC, LW_MAGIC);
	assert_int_equal(ftruncate(fd, 512 + 512 + 700), 0);
	assert_int_equal(lw_log_open(&l, p3), 0);
	assert_int_equal(lw_log_next(&l, &e), -EINVAL);
	lw_log_close(&l);
	close(fd);
	unlink(p3);
}

static void test_flags_str(void **state)
{
	(void)state;
	char b[64];
	assert_string_equal(lw_flags_str(0, b, sizeof(b)), "-");
	assert_string_equal(lw_flags_str(LW_FLUSH | LW_FUA, b, sizeof(b)), "FLUSH|FUA");
	assert_string_equal(lw_flags_str(LW_MARK, b, sizeof(b)), "MARK");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_entries_512),
		cmocka_unit_test(test_entries_4096),
		cmocka_unit_test(test_replay_512),
		cmocka_unit_test(test_replay_4096),
		cmocka_unit_test(test_refuses_bad_logs),
		cmocka_unit_test(test_flags_str),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
