/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_thread.h - what the kernel says of one of this process's threads, found by the
 * name it gave itself (/proc/self/task/<tid>/comm, e.g. "ing-persist0"): test_thread_file
 * reads its /proc/self/task/<tid>/<file> ("status", "stat") into buf. A thread names itself
 * when it starts: it is waited for, 60 s at most (a cap for a hang, not a budget).
 */
#ifndef ING_TEST_THREAD_H
#define ING_TEST_THREAD_H

#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"

static inline void test_thread_file(const char *name, const char *file, char *buf, size_t cap)
{
	uint64_t deadline = ing_now_ns() + 60000000000ull;
	for (;;) {
		DIR *d = opendir("/proc/self/task");
		assert_non_null(d);
		struct dirent *e;
		bool found = false;
		while (!found && (e = readdir(d)) != NULL) {
			char path[300], comm[64];
			if (e->d_name[0] == '.')
				continue;
			snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
			FILE *fp = fopen(path, "r");
			if (!fp)
				continue;
			bool match = false;
			if (fgets(comm, sizeof(comm), fp)) {
				comm[strcspn(comm, "\n")] = 0;
				match = strcmp(comm, name) == 0;
			}
			fclose(fp);
			if (!match)
				continue;
			snprintf(path, sizeof(path), "/proc/self/task/%s/%s", e->d_name, file);
			fp = fopen(path, "r");
			assert_non_null(fp);
			size_t n = fread(buf, 1, cap - 1, fp);
			fclose(fp);
			assert_true(n > 0);
			buf[n] = 0;
			found = true;
		}
		closedir(d);
		if (found)
			return;
		assert_true(ing_now_ns() < deadline);
		struct timespec ts = { 0, 1000000 };
		nanosleep(&ts, NULL);
	}
}

#endif
