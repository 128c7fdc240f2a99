/* SPDX-License-Identifier: Apache-2.0 */
/* test_store.c - dataplane/store/store.c: real files in /tmp (ext4) and /dev/shm (tmpfs). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/crc32c.h"
#include "common/ident.h"
#include "dataplane/store/store.h"

static char dir[64], shm[64];
static uint8_t *buf;
#define BUFCAP (1u << 20)

static int setup(void **state)
{
	(void)state;
	strcpy(dir, "/tmp/ing_test_store.XXXXXX");
	strcpy(shm, "/dev/shm/ing_test_store.XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	if (!mkdtemp(shm))
		shm[0] = 0;
	if (posix_memalign((void **)&buf, 4096, BUFCAP))
		return -1;
	for (unsigned i = 0; i < BUFCAP; i++)
		buf[i] = (uint8_t)(i * 2654435761u >> 13);
	return 0;
}

static int rmrf(const char *d)
{
	char cmd[160];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", d);
	return system(cmd);
}

static int teardown(void **state)
{
	(void)state;
	free(buf);
	rmrf(dir);
	if (shm[0])
		rmrf(shm);
	return 0;
}

/* ing_store_rel_path with a numeric frame id, as the older tests wrote them */
static int relp(char *out, size_t cap, const char *wafer, uint64_t n)
{
	char id[24];
	snprintf(id, sizeof(id), "%llu", (unsigned long long)n);
	return ing_store_rel_path(out, cap, wafer, id);
}

static void expect_name(const char *id, const char *want)
{
	char out[ING_ID_FILE_NAME_MAX + 1];
	assert_int_equal(ing_id_file_name(out, sizeof(out), id), 0);
	assert_string_equal(out, want);
}

/* File names of ids: safe ones as they are, others percent-encoded, long ones hashed. */
static void test_file_names(void **state)
{
	(void)state;
	char out[ING_ID_FILE_NAME_MAX + 1], out2[ING_ID_FILE_NAME_MAX + 1];
	expect_name("W1", "W1");
	expect_name("lot-7.wafer_03", "lot-7.wafer_03");
	expect_name("...", "...");
	expect_name(".hidden", ".hidden");
	expect_name("0b5f9c3e-8d1a-4c2e-9f57-3a1d2b4c5e6f", "0b5f9c3e-8d1a-4c2e-9f57-3a1d2b4c5e6f");
	expect_name(".", "%2E");
	expect_name("..", "%2E%2E");
	expect_name("wafer-12/frame-7", "wafer-12%2Fframe-7");
	expect_name("../../etc/passwd", "%2E%2E%2F%2E%2E%2Fetc%2Fpasswd");
	expect_name("a b", "a%20b");
	expect_name("w\xc3\xa9", "w%C3%A9");
	expect_name("50%", "50%25");
	/* distinct ids, distinct names: an encoded name never equals a plain one */
	expect_name("a%2Fb", "a%252Fb");
	/* the rule is enforced */
	assert_int_equal(ing_id_file_name(out, sizeof(out), ""), -EINVAL);
	assert_int_equal(ing_id_file_name(out, sizeof(out), "a\nb"), -EINVAL);
	assert_int_equal(ing_id_file_name(out, sizeof(out), "\xff"), -EINVAL);
	assert_int_equal(ing_id_file_name(out, sizeof(out), NULL), -EINVAL);
	assert_int_equal(ing_id_file_name(out, 3, "abcd"), -ENAMETOOLONG);
	/* long ids: 256 bytes plain or encoded end in '~' + SHA-256, fit NAME_MAX with room */
	char id[ING_ID_MAX + 2];
	memset(id, 'a', ING_ID_MAX);
	id[ING_ID_MAX] = '\0';
	assert_int_equal(ing_id_file_name(out, sizeof(out), id), 0);
	assert_true(strlen(out) <= ING_ID_FILE_NAME_MAX && strchr(out, '~'));
	id[ING_ID_MAX - 1] = 'b';   /* differs only past the kept prefix */
	assert_int_equal(ing_id_file_name(out2, sizeof(out2), id), 0);
	assert_string_not_equal(out, out2);
	memset(id, '/', 100);       /* 300 bytes encoded, '%2F' not cut in two */
	id[100] = '\0';
	assert_int_equal(ing_id_file_name(out, sizeof(out), id), 0);
	assert_true(strlen(out) <= ING_ID_FILE_NAME_MAX);
	assert_non_null(strchr(out, '~'));
	assert_int_equal((int)(strchr(out, '~') - out) % 3, 0);
	id[ING_ID_MAX + 1] = '\0';
	memset(id, 'a', ING_ID_MAX + 1);
	assert_int_equal(ing_id_file_name(out, sizeof(out), id), -EINVAL);   /* 257 bytes */
}

static void test_rel_path(void **state)
{
	(void)state;
	char out[64];
	assert_int_equal(relp(out, sizeof(out), "W1", 42), 0);
	assert_string_equal(out, "frames/W1/42.frame");
	assert_int_equal(relp(out, sizeof(out), "W1", UINT64_MAX), 0);
	assert_string_equal(out, "frames/W1/18446744073709551615.frame");
	assert_int_equal(relp(out, 10, "W1", 42), -ENAMETOOLONG);
	assert_int_equal(ing_store_rel_path(out, sizeof(out), "../x", "../../etc/passwd"), 0);
	assert_string_equal(out, "frames/%2E%2E%2Fx/%2E%2E%2F%2E%2E%2Fetc%2Fpasswd.frame");
	assert_int_equal(ing_store_rel_path(out, sizeof(out), "", "1"), -EINVAL);
	assert_int_equal(ing_store_rel_path(out, sizeof(out), "W", "a\x7f"), -EINVAL);
}

static void check_file(const char *root, const char *rel, const uint8_t *want, uint64_t len)
{
	char path[256];
	snprintf(path, sizeof(path), "%s/%s", root, rel);
	struct stat st;
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_size, (off_t)len);
	uint8_t *got = malloc(len + 1);
	assert_non_null(got);
	int fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(read(fd, got, len + 1), (ssize_t)len);
	close(fd);
	assert_memory_equal(got, want, len);
	free(got);
}

/* no "*.tmp.*" anywhere below root */
static void check_no_temp(const char *root)
{
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "test -z \"$(find '%s' -name '*.tmp.*')\"", root);
	assert_int_equal(system(cmd), 0);
}

static void write_set(const char *root)
{
	static const uint64_t lens[] = { 1, 511, 4095, 4096, 4097, 10000, 65536, 123457, BUFCAP };
	char rel[128];
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		/* aligned buffer: O_DIRECT path (rounded write + truncate) */
		assert_int_equal(relp(rel, sizeof(rel), "W1", 100 + i), 0);
		assert_int_equal(ing_store_write(root, rel, buf, lens[i], BUFCAP, true, NULL), 0);
		check_file(root, rel, buf, lens[i]);
		/* unaligned buffer: buffered path */
		uint64_t n = lens[i] < BUFCAP ? lens[i] : BUFCAP - 3;
		assert_int_equal(relp(rel, sizeof(rel), "W2", 200 + i), 0);
		assert_int_equal(ing_store_write(root, rel, buf + 3, n, BUFCAP - 3, true, NULL), 0);
		check_file(root, rel, buf + 3, n);
		/* aligned, but the slot cannot take the rounded length: buffered */
		assert_int_equal(relp(rel, sizeof(rel), "W3", 300 + i), 0);
		assert_int_equal(ing_store_write(root, rel, buf, lens[i], lens[i], true, NULL), 0);
		check_file(root, rel, buf, lens[i]);
	}
	/* overwrite keeps exactly the new content */
	assert_int_equal(relp(rel, sizeof(rel), "W1", 100), 0);
	assert_int_equal(ing_store_write(root, rel, buf + 4096, 9000, BUFCAP - 4096, true, NULL), 0);
	check_file(root, rel, buf + 4096, 9000);
	check_no_temp(root);
}

static void test_write_ext4(void **state)
{
	(void)state;
	write_set(dir);
}

static void test_write_tmpfs(void **state)
{
	(void)state;
	char mnt[160];
	if (shm[0]) {
		write_set(shm);   /* O_DIRECT refused on older tmpfs: buffered fallback */
		return;
	}
	/* no /dev/shm: a tmpfs of our own (root), else a clear failure, never a skip */
	snprintf(mnt, sizeof(mnt), "%s/tmpfs", dir);
	assert_int_equal(mkdir(mnt, 0755), 0);
	if (mount("tmpfs", mnt, "tmpfs", 0, "size=64m") != 0)
		fail_msg("no /dev/shm and cannot mount a tmpfs (%s): this case needs root", strerror(errno));
	write_set(mnt);
	assert_int_equal(umount(mnt), 0);
}

static void test_bad_args(void **state)
{
	(void)state;
	assert_int_equal(ing_store_write(dir, "../escape.frame", buf, 10, BUFCAP, true, NULL), -EINVAL);
	assert_int_equal(ing_store_write(dir, "/abs.frame", buf, 10, BUFCAP, true, NULL), -EINVAL);
	assert_int_equal(ing_store_write(dir, "frames/W/1.frame", buf, 0, BUFCAP, true, NULL), -EINVAL);
	assert_int_equal(ing_store_write(NULL, "frames/W/1.frame", buf, 10, BUFCAP, true, NULL), -EINVAL);
	/* a file where the wafer directory should be: an error, no temp file */
	char blk[160];
	snprintf(blk, sizeof(blk), "%s/frames/BLOCK", dir);
	int fd = open(blk, O_CREAT | O_WRONLY, 0644);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(ing_store_write(dir, "frames/BLOCK/1.frame", buf, 10, BUFCAP, true, NULL), -ENOTDIR);
	/* a read-only directory (root bypasses permissions, so use a missing root instead) */
	assert_true(ing_store_write("/proc/ing-no-such", "frames/W/1.frame", buf, 10, BUFCAP, true, NULL) < 0);
	check_no_temp(dir);
}

static void test_enospc(void **state)
{
	(void)state;
	char mnt[160], rel[64];
	snprintf(mnt, sizeof(mnt), "%s/small", dir);
	assert_int_equal(mkdir(mnt, 0755), 0);
	if (mount("tmpfs", mnt, "tmpfs", 0, "size=256k") != 0) {
		fail_msg("cannot mount a small tmpfs (%s): the ENOSPC case needs root to make its own "
			 "full filesystem (run the unit tests as root; CI does)", strerror(errno));
	}
	assert_int_equal(relp(rel, sizeof(rel), "W1", 1), 0);
	int rc = ing_store_write(mnt, rel, buf, BUFCAP, BUFCAP, true, NULL);
	int rc2 = ing_store_write(mnt, rel, buf + 1, BUFCAP - 1, BUFCAP - 1, true, NULL);
	/* a small one still fits afterwards: nothing half-written is left behind */
	assert_int_equal(relp(rel, sizeof(rel), "W1", 2), 0);
	int rc3 = ing_store_write(mnt, rel, buf, 8192, BUFCAP, true, NULL);
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "test -z \"$(find '%s' -name '*.tmp.*')\"", mnt);
	int left = system(cmd);
	umount2(mnt, MNT_DETACH);
	assert_int_equal(rc, -ENOSPC);
	assert_int_equal(rc2, -ENOSPC);
	assert_int_equal(rc3, 0);
	assert_int_equal(left, 0);
}

static void test_odirect_refused(void **state)
{
	(void)state;
	char mnt[160];
	snprintf(mnt, sizeof(mnt), "%s/ramfs", dir);
	assert_int_equal(mkdir(mnt, 0755), 0);
	/* ramfs has no direct I/O at all: open(O_DIRECT) fails with EINVAL */
	if (mount("ramfs", mnt, "ramfs", 0, NULL) != 0) {
		fail_msg("cannot mount ramfs (%s): the O_DIRECT refusal case needs root to make its own "
			 "filesystem without direct I/O (run the unit tests as root; CI does)", strerror(errno));
	}
	char probe[200];
	snprintf(probe, sizeof(probe), "%s/probe", mnt);
	int fd = open(probe, O_CREAT | O_WRONLY | O_DIRECT, 0644);
	int probe_errno = errno;
	if (fd >= 0)
		close(fd);
	unlink(probe);
	char rel[64];
	assert_int_equal(relp(rel, sizeof(rel), "W1", 7), 0);
	int rc = ing_store_write(mnt, rel, buf, 10000, BUFCAP, true, NULL);
	if (rc == 0)
		check_file(mnt, rel, buf, 10000);
	check_no_temp(mnt);
	umount2(mnt, MNT_DETACH);
	assert_int_equal(rc, 0);
	if (fd >= 0)
		print_message("note: this kernel's ramfs accepts O_DIRECT\n");
	else
		assert_int_equal(probe_errno, EINVAL);
}

/* a valid wafer id with ".." inside ("lot..7") is stored, not refused as a path escape */
static void test_wafer_dotdot_stored(void **state)
{
	(void)state;
	char rel[64];
	assert_int_equal(relp(rel, sizeof(rel), "lot..7", 9), 0);
	assert_int_equal(ing_store_write(dir, rel, buf, 5000, BUFCAP, true, NULL), 0);
	check_file(dir, rel, buf, 5000);
	assert_int_equal(relp(rel, sizeof(rel), "..x", 10), 0);
	assert_int_equal(ing_store_write(dir, rel, buf, 10, BUFCAP, true, NULL), 0);
	/* real escapes are still refused */
	assert_int_equal(ing_store_write(dir, "frames/../x.frame", buf, 10, BUFCAP, true, NULL), -EINVAL);
	assert_int_equal(ing_store_write(dir, "frames/./x.frame", buf, 10, BUFCAP, true, NULL), -EINVAL);
	assert_int_equal(ing_store_write(dir, "frames//x.frame", buf, 10, BUFCAP, true, NULL), -EINVAL);
	assert_int_equal(ing_store_write(dir, "..", buf, 10, BUFCAP, true, NULL), -EINVAL);
	check_no_temp(dir);
}

static void touch_at(const char *path, time_t mtime)
{
	FILE *fp = fopen(path, "w");
	assert_non_null(fp);
	fclose(fp);
	struct timespec ts[2] = { { mtime, 0 }, { mtime, 0 } };
	assert_int_equal(utimensat(AT_FDCWD, path, ts, 0), 0);
}

/*
 * A temp file named after a pid that is alive again (pid reuse, or a restarted ingestd
 * that got the same pid: PID 1 in a container) but older than that process is stale.
 */
static void test_sweep_reused_pid(void **state)
{
	(void)state;
	char wd[160], old_self[224], new_self[224], old_init[224], new_init[224], cmd[224];
	time_t now = time(NULL);
	snprintf(wd, sizeof(wd), "%s/sweep2/frames/W", dir);
	snprintf(cmd, sizeof(cmd), "mkdir -p '%s'", wd);
	assert_int_equal(system(cmd), 0);
	snprintf(old_self, sizeof(old_self), "%s/1.frame.tmp.%d", wd, (int)getpid());
	snprintf(new_self, sizeof(new_self), "%s/2.frame.tmp.%d", wd, (int)getpid());
	snprintf(old_init, sizeof(old_init), "%s/3.frame.tmp.1", wd);
	snprintf(new_init, sizeof(new_init), "%s/4.frame.tmp.1", wd);
	touch_at(old_self, now - 3600);   /* before this process started */
	touch_at(new_self, now);          /* this process may be writing it */
	touch_at(old_init, 1000);         /* 1970: before pid 1 started */
	touch_at(new_init, now);
	char sd[160];
	snprintf(sd, sizeof(sd), "%s/sweep2", dir);
	assert_int_equal(ing_store_sweep_tmp(sd), 2);
	struct stat st;
	assert_int_equal(stat(old_self, &st), -1);
	assert_int_equal(stat(old_init, &st), -1);
	assert_int_equal(stat(new_self, &st), 0);
	assert_int_equal(stat(new_init, &st), 0);
}

/* The one frame-file check (ingest-verify, and --fleet's check of every node's copy): size,
 * bytes read back, their CRC-32C against the expected one. */
static void test_check_file(void **state)
{
	(void)state;
	char path[256];
	uint8_t data[10000], *got = NULL;
	size_t cap = 0;
	uint64_t size;
	uint32_t crc, want, other;
	snprintf(path, sizeof(path), "%s/check.frame", dir);
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i * 7 + 3);
	want = ing_crc32c(0, data, sizeof(data));
	other = want ^ 1;
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	assert_int_equal(fwrite(data, 1, sizeof(data), f), sizeof(data));
	assert_int_equal(fclose(f), 0);

	assert_int_equal(ing_store_check_file(path, sizeof(data), &want, &got, &cap, &size, &crc), 0);
	assert_int_equal(size, sizeof(data));
	assert_int_equal(crc, want);
	assert_memory_equal(got, data, sizeof(data));   /* the bytes, for further comparisons */
	assert_int_equal(ing_store_check_file(path, sizeof(data), NULL, &got, &cap, &size, &crc), 0);
	assert_int_equal(ing_store_check_file(path, sizeof(data), &other, &got, &cap, &size, &crc),
			 -EBADMSG);
	assert_int_equal(crc, want);
	assert_int_equal(ing_store_check_file(path, sizeof(data) - 1, NULL, &got, &cap, &size, &crc),
			 -EFBIG);
	assert_int_equal(size, sizeof(data));
	assert_int_equal(ing_store_check_file(path, sizeof(data) + 1, NULL, &got, &cap, &size, &crc),
			 -ENODATA);
	assert_int_equal(truncate(path, 0), 0);
	assert_int_equal(ing_store_check_file(path, 0, NULL, &got, &cap, &size, &crc), 0);   /* empty */
	assert_int_equal(unlink(path), 0);
	assert_int_equal(ing_store_check_file(path, 1, NULL, &got, &cap, &size, &crc), -ENOENT);
	free(got);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_file_names),
		cmocka_unit_test(test_rel_path),
		cmocka_unit_test(test_write_ext4),
		cmocka_unit_test(test_write_tmpfs),
		cmocka_unit_test(test_bad_args),
		cmocka_unit_test(test_enospc),
		cmocka_unit_test(test_odirect_refused),
		cmocka_unit_test(test_wafer_dotdot_stored),
		cmocka_unit_test(test_sweep_reused_pid),
		cmocka_unit_test(test_check_file),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
