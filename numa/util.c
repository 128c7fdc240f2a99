/* SPDX-License-Identifier: Apache-2.0 */
/* Small helpers for numa/: cpu lists, JSON strings, one-line sysfs/procfs reads. */
#include "numa/numa.h"
#include "numa/numa_internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; s && *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c == '\n')
			fputs("\\n", f);
		else if (c == '\t')
			fputs("\\t", f);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

int set_err(char *err, size_t errlen, int e, const char *fmt, ...)
{
	if (err && errlen) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return -e;
}

static int vread_line(char *buf, size_t len, const char *fmt, va_list ap)
{
	char path[1024];
	int n = vsnprintf(path, sizeof(path), fmt, ap);
	if (n < 0 || (size_t)n >= sizeof(path))
		return -ENAMETOOLONG;
	FILE *f = fopen(path, "re");
	if (!f)
		return -errno;
	buf[0] = '\0';
	if (!fgets(buf, (int)len, f)) {
		int e = ferror(f) ? -EIO : -ENODATA;
		fclose(f);
		return e;
	}
	fclose(f);
	buf[strcspn(buf, "\n")] = '\0';
	return 0;
}

int read_line(char *buf, size_t len, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int rc = vread_line(buf, len, fmt, ap);
	va_end(ap);
	return rc;
}

int read_long(long *v, const char *fmt, ...)
{
	char buf[64], *end;
	va_list ap;
	va_start(ap, fmt);
	int rc = vread_line(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (rc)
		return rc;
	errno = 0;
	long x = strtol(buf, &end, 0);
	if (errno || end == buf)
		return -EINVAL;
	*v = x;
	return 0;
}

int ing_cpulist_parse(const char *s, int *cpus, unsigned max)
{
	unsigned n = 0;
	const char *p = s;

	if (!s || !*s)
		return -EINVAL;
	while (*p) {
		char *end;
		errno = 0;
		long a = strtol(p, &end, 10), b;
		if (end == p || errno || a < 0 || a > 65535)
			return -EINVAL;
		b = a;
		p = end;
		if (*p == '-') {
			p++;
			b = strtol(p, &end, 10);
			if (end == p || errno || b < a || b > 65535)
				return -EINVAL;
			p = end;
		}
		for (long c = a; c <= b; c++) {
			for (unsigned i = 0; i < n && i < max; i++)
				if (cpus[i] == (int)c)
					return -EINVAL;
			if (n >= max)
				return -E2BIG;
			cpus[n++] = (int)c;
		}
		if (*p == ',')
			p++;
		else if (*p)
			return -EINVAL;
	}
	return (int)n;
}

static int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	return (x > y) - (x < y);
}

void ing_cpulist_format(const int *cpus, unsigned n, char *buf, size_t len)
{
	int tmp[ING_PLAN_MAX_LCORES * 2];
	size_t off = 0;

	if (!len)
		return;
	buf[0] = '\0';
	if (n > sizeof(tmp) / sizeof(tmp[0]))
		n = sizeof(tmp) / sizeof(tmp[0]);
	memcpy(tmp, cpus, n * sizeof(int));
	qsort(tmp, n, sizeof(int), cmp_int);
	for (unsigned i = 0; i < n;) {
		unsigned j = i;
		while (j + 1 < n && tmp[j + 1] <= tmp[j] + 1)
			j++;
		int w;
		if (tmp[j] == tmp[i])
			w = snprintf(buf + off, len - off, "%s%d", off ? "," : "", tmp[i]);
		else
			w = snprintf(buf + off, len - off, "%s%d-%d", off ? "," : "", tmp[i], tmp[j]);
		if (w < 0 || (size_t)w >= len - off)
			return;
		off += (size_t)w;
		i = j + 1;
	}
}

const char *human_bytes(uint64_t b, char *buf, size_t len)
{
	if (b >= (1ull << 30) && !(b & ((1ull << 30) - 1)))
		snprintf(buf, len, "%llu GiB", (unsigned long long)(b >> 30));
	else if (b >= (1ull << 30))
		snprintf(buf, len, "%.1f GiB", (double)b / (double)(1ull << 30));
	else if (b >= (1ull << 20) && !(b & ((1ull << 20) - 1)))
		snprintf(buf, len, "%llu MiB", (unsigned long long)(b >> 20));
	else if (b >= (1ull << 20))
		snprintf(buf, len, "%.1f MiB", (double)b / (double)(1ull << 20));
	else if (b >= 1024 && !(b & 1023))
		snprintf(buf, len, "%llu KiB", (unsigned long long)(b >> 10));
	else
		snprintf(buf, len, "%llu bytes", (unsigned long long)b);
	return buf;
}
