/* SPDX-License-Identifier: Apache-2.0 */
/*
 * store.c - durable frame files: <data_dir>/frames/<wafer>/<frame>.frame (names: see
 * ing_store_name).
 *
 * Crash safety: the bytes go to "<final>.tmp.<pid>", are fdatasync'ed, the temp file is
 * renamed over the final name and the directory is fsync'ed, so a frame file either
 * exists complete or not at all. Directories created on the way are made durable by
 * fsync'ing their parents. Called by persistence workers only (blocking).
 */
#include "dataplane/store/store.h"
#include "common/clock.h"
#include "common/crc32c.h"
#include "common/io.h"
#include "common/ident.h"
#include "common/log.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define COMP "store"
#define WRITE_CHUNK (64u << 20)   /* bytes per pwrite call */
#define ING_PAGE_4K 4096ull

static inline uint64_t round_up_u64(uint64_t v, uint64_t a)
{
	return (v + a - 1) / a * a;
}

int ing_store_rel_path(char *out, size_t outlen, const char *wafer_id, const char *frame_id)
{
	char w[ING_ID_FILE_NAME_MAX + 1], f[ING_ID_FILE_NAME_MAX + 1];
	int rc = ing_id_file_name(w, sizeof(w), wafer_id);
	if (rc == 0)
		rc = ing_id_file_name(f, sizeof(f), frame_id);
	if (rc)
		return rc;
	int n = snprintf(out, outlen, "frames/%s/%s.frame", w, f);
	if (n < 0 || (size_t)n >= outlen)
		return -ENAMETOOLONG;
	return 0;
}

static int fsync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int rc = 0;

	if (fd < 0)
		return -errno;
	if (fsync(fd) < 0)
		rc = -errno;
	close(fd);
	return rc;
}

static void parent_of(char *buf)
{
	char *s = strrchr(buf, '/');
	if (!s)
		strcpy(buf, ".");
	else if (s == buf)
		buf[1] = 0;
	else
		*s = 0;
}

int ing_store_mkdirs(const char *path, int mode)
{
	char buf[PATH_MAX], parent[PATH_MAX];
	size_t n = strlen(path);

	if (n == 0 || n >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, path, n + 1);
	while (n > 1 && buf[n - 1] == '/')
		buf[--n] = 0;
	/* walk every prefix ending before a '/' and the full path */
	for (size_t i = 1; i <= n; i++) {
		if (buf[i] != '/' && buf[i] != 0)
			continue;
		char saved = buf[i];
		buf[i] = 0;
		if (mkdir(buf, (mode_t)mode) == 0) {
			memcpy(parent, buf, i + 1);
			parent_of(parent);
			int rc = fsync_dir(parent);
			if (rc < 0) {
				buf[i] = saved;
				return rc;
			}
		} else if (errno != EEXIST) {
			int rc = -errno;
			buf[i] = saved;
			return rc;
		}
		buf[i] = saved;
	}
	struct stat st;
	if (stat(path, &st) < 0)
		return -errno;
	return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
}

/*
 * rel stays below data_dir: relative, and no component is "." or "..". (A wafer id such as
 * "lot..7" is a valid name: refusing every ".." substring made such frames fail forever
 * with a retryable I/O error.)
 */
static bool rel_ok(const char *rel)
{
	const char *p = rel;

	if (!*rel || *rel == '/')
		return false;
	while (*p) {
		size_t n = strcspn(p, "/");
		if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
			return false;
		p += n;
		if (*p == '/')
			p++;
	}
	return true;
}

static int write_all(int fd, const uint8_t *buf, uint64_t len)
{
	uint64_t off = 0;

	while (off < len) {
		size_t chunk = len - off > WRITE_CHUNK ? WRITE_CHUNK : (size_t)(len - off);
		ssize_t w = pwrite(fd, buf + off, chunk, (off_t)off);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (w == 0)
			return -EIO;
		off += (uint64_t)w;
	}
	return 0;
}

static int write_file(const char *tmp, const uint8_t *buf, uint64_t len, uint64_t cap,
		      uint64_t *t_written_ns)
{
	uint64_t dlen = round_up_u64(len, ING_PAGE_4K);
	bool direct = ((uintptr_t)buf & (ING_PAGE_4K - 1)) == 0 && cap >= dlen;
	int fd = -1, rc;

	if (direct) {
		fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_DIRECT, 0644);
		if (fd < 0 && errno == EINVAL)
			direct = false;   /* filesystem without O_DIRECT (older tmpfs, ...) */
		else if (fd < 0)
			return -errno;
	}
	if (!direct) {
		fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (fd < 0)
			return -errno;
	}
	if (direct) {
		rc = write_all(fd, buf, dlen);
		if (rc == -EINVAL) {
			/* O_DIRECT accepted at open but the alignment refused: go buffered */
			int fl = fcntl(fd, F_GETFL);
			if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_DIRECT) < 0) {
				rc = -errno;
				goto out;
			}
			direct = false;
		} else if (rc == 0 && dlen != len && ftruncate(fd, (off_t)len) < 0) {
			rc = -errno;
			goto out;
		}
		if (rc < 0 && direct)
			goto out;
	}
	if (!direct) {
		if (ftruncate(fd, 0) < 0) {
			rc = -errno;
			goto out;
		}
		rc = write_all(fd, buf, len);
		if (rc < 0)
			goto out;
	}
	if (t_written_ns)
		*t_written_ns = ing_now_ns();
	rc = fdatasync(fd) < 0 ? -errno : 0;
out:
	if (close(fd) < 0 && !rc)
		rc = -errno;
	return rc;
}

int ing_store_write(const char *data_dir, const char *rel, const uint8_t *buf, uint64_t len,
		   uint64_t cap, bool sync_dir, uint64_t *t_written_ns)
{
	char final[PATH_MAX], tmp[PATH_MAX], dir[PATH_MAX];
	int rc;

	if (!data_dir || !rel || !buf || !len || !rel_ok(rel))
		return -EINVAL;
	if ((size_t)snprintf(final, sizeof(final), "%s/%s", data_dir, rel) >= sizeof(final) ||
	    (size_t)snprintf(tmp, sizeof(tmp), "%s.tmp.%d", final, (int)getpid()) >= sizeof(tmp))
		return -ENAMETOOLONG;
	memcpy(dir, final, sizeof(dir));
	parent_of(dir);
	rc = ing_store_mkdirs(dir, 0755);
	if (rc < 0)
		return rc;
	rc = write_file(tmp, buf, len, cap, t_written_ns);
	if (rc == 0 && rename(tmp, final) < 0)
		rc = -errno;
	if (rc < 0) {
		int saved = rc;
		(void)unlink(tmp);
		return saved;
	}
	return sync_dir ? fsync_dir(dir) : 0;
}

int ing_store_sync_dir(const char *data_dir, const char *rel)
{
	char dir[PATH_MAX];

	if ((size_t)snprintf(dir, sizeof(dir), "%s/%s", data_dir, rel) >= sizeof(dir))
		return -ENAMETOOLONG;
	parent_of(dir);
	return fsync_dir(dir);
}

/* Wall-clock second at which process pid started, or -1 when unknown. */
static long long proc_start_s(long pid)
{
	char path[64], line[1024];
	unsigned long long ticks = 0, btime = 0;
	long hz = sysconf(_SC_CLK_TCK);
	FILE *f;
	char *p;

	snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
	f = fopen(path, "re");
	if (!f)
		return -1;
	p = fgets(line, sizeof(line), f);
	fclose(f);
	if (!p || !(p = strrchr(line, ')')))
		return -1;
	/* after "pid (comm)": state is field 3, starttime field 22 */
	if (sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d"
			  " %*d %*d %llu", &ticks) != 1 || hz <= 0)
		return -1;
	f = fopen("/proc/stat", "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "btime %llu", &btime) == 1)
			break;
	fclose(f);
	return btime ? (long long)(btime + ticks / (unsigned long long)hz) : -1;
}

/*
 * A temp file "<id>.frame.tmp.<pid>" whose writer is gone (crash, kill -9): its pid is
 * dead, or the pid now belongs to a process that started after the file was last written
 * (pid reuse; a restarted ingestd that got the same pid, as PID 1 in a container does).
 */
static bool stale_tmp(int dfd, const char *name)
{
	const char *t = strstr(name, ".frame.tmp.");
	struct stat st;
	long long start;
	char *end;

	if (!t)
		return false;
	long pid = strtol(t + strlen(".frame.tmp."), &end, 10);
	if (*end || pid <= 0)
		return false;
	if (kill((pid_t)pid, 0) < 0 && errno == ESRCH)
		return true;
	start = proc_start_s(pid);
	/* 2 s of slack: btime and the tick count are rounded */
	return start > 0 && fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	       (long long)st.st_mtim.tv_sec + 2 < start;
}

int ing_store_sweep_tmp(const char *data_dir)
{
	char frames[PATH_MAX], sub[PATH_MAX];
	struct dirent *de, *fe;
	DIR *d, *w;
	int n = 0;

	if ((size_t)snprintf(frames, sizeof(frames), "%s/frames", data_dir) >= sizeof(frames))
		return -ENAMETOOLONG;
	d = opendir(frames);
	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.' && (!de->d_name[1] || (de->d_name[1] == '.' && !de->d_name[2])))
			continue;
		if ((size_t)snprintf(sub, sizeof(sub), "%s/%s", frames, de->d_name) >= sizeof(sub))
			continue;
		w = opendir(sub);
		if (!w)
			continue;
		while ((fe = readdir(w))) {
			if (!stale_tmp(dirfd(w), fe->d_name))
				continue;
			if (unlinkat(dirfd(w), fe->d_name, 0) == 0)
				n++;
			else
				ING_WARN(COMP, "removing stale %s/%s: %s", sub, fe->d_name, strerror(errno));
		}
		closedir(w);
	}
	closedir(d);
	return n;
}

int ing_store_lock(const char *dir, char *holder, size_t holderlen)
{
	char path[PATH_MAX], pid[32] = "";
	int fd;

	if ((size_t)snprintf(path, sizeof(path), "%s/.ingestd.lock", dir) >= sizeof(path))
		return -ENAMETOOLONG;
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
		int rc = -errno;
		ssize_t n = pread(fd, pid, sizeof(pid) - 1, 0);
		pid[n > 0 ? n : 0] = 0;
		pid[strcspn(pid, "\n")] = 0;
		close(fd);
		if (rc != -EWOULDBLOCK)
			return rc;
		snprintf(holder, holderlen, "another ingestd (pid %s)", pid[0] ? pid : "?");
		return -EBUSY;
	}
	int n = snprintf(pid, sizeof(pid), "%d\n", (int)getpid());
	if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)n, 0) != n)
		ING_WARN(COMP, "%s: cannot record the pid: %s", path, strerror(errno));
	return fd;
}

int ing_store_check_file(const char *path, uint64_t len, const uint32_t *crc, uint8_t **buf,
			 size_t *cap, uint64_t *size_out, uint32_t *crc_out)
{
	struct stat st;
	int rc = 0, fd = open(path, O_RDONLY | O_CLOEXEC);

	*size_out = 0;
	*crc_out = 0;
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st)) {
		rc = -errno;
	} else if ((*size_out = (uint64_t)st.st_size) != len) {
		rc = *size_out > len ? -EFBIG : -ENODATA;
	} else if (len + 1 > *cap) {   /* + 1: a 0-byte frame still gets a buffer */
		void *n = realloc(*buf, (size_t)len + 1);
		if (!n)
			rc = -ENOMEM;
		else {
			*buf = n;
			*cap = (size_t)len + 1;
		}
	}
	if (!rc)
		rc = ing_read_full(fd, *buf, (size_t)len);
	close(fd);
	if (rc)
		return rc;
	*crc_out = ing_crc32c(0, *buf, (size_t)len);
	return crc && *crc_out != *crc ? -EBADMSG : 0;
}
