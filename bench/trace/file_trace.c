/* SPDX-License-Identifier: Apache-2.0 */
/*
 * file_trace.c - an LD_PRELOAD library for a program built with -finstrument-functions:
 * it records every function entry and exit of every thread, in one global order, and
 * writes them when the program exits (bench/trace/file_path.py turns them into the path
 * through the source files). glibc exports no-op __cyg_profile_func_enter/_exit; these
 * take their place. Off unless H3000_FILE_TRACE names the output file. A measuring aid for
 * issue #28's "how many times a fallback frame returns to a file it left"; never linked
 * into the product.
 *
 *   cc -O2 -shared -fPIC -o file_trace.so bench/trace/file_trace.c -ldl
 *   H3000_FILE_TRACE=/tmp/t.txt LD_PRELOAD=./file_trace.so build-trace/apps/ingestd ...
 *
 * Output: one line per distinct function address, "A <hex id> <object> <hex offset>",
 * then one line per event in order, "E <thread> <+|-> <hex id>".
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define NOI __attribute__((no_instrument_function))
#define MAX_EV (16u << 20)

struct ev {
	void *fn;
	uint32_t tid;
	uint32_t enter;
};

static struct ev *evs;
static _Atomic uint64_t nev;
static _Atomic int on;
static __thread uint32_t my_tid;

NOI static void __attribute__((constructor)) ft_init(void)
{
	if (!getenv("H3000_FILE_TRACE"))
		return;
	evs = mmap(NULL, (size_t)MAX_EV * sizeof(*evs), PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (evs == MAP_FAILED)
		return;
	atomic_store(&on, 1);
}

NOI static inline void rec(void *fn, uint32_t enter)
{
	if (!atomic_load_explicit(&on, memory_order_relaxed))
		return;
	if (!my_tid)
		my_tid = (uint32_t)syscall(SYS_gettid);
	uint64_t i = atomic_fetch_add_explicit(&nev, 1, memory_order_relaxed);
	if (i >= MAX_EV)
		return;
	evs[i].fn = fn;
	evs[i].tid = my_tid;
	evs[i].enter = enter;
}

NOI void __cyg_profile_func_enter(void *fn, void *site)
{
	(void)site;
	rec(fn, 1);
}

NOI void __cyg_profile_func_exit(void *fn, void *site)
{
	(void)site;
	rec(fn, 0);
}

/* distinct addresses: a small open-addressing table */
#define NADDR (1u << 16)
static void *addrs[NADDR];

NOI static unsigned addr_id(void *fn)
{
	unsigned h = (unsigned)(((uintptr_t)fn >> 4) * 2654435761u) & (NADDR - 1);
	while (addrs[h] && addrs[h] != fn)
		h = (h + 1) & (NADDR - 1);
	addrs[h] = fn;
	return h;
}

NOI static void __attribute__((destructor)) ft_dump(void)
{
	if (!atomic_exchange(&on, 0))
		return;
	const char *path = getenv("H3000_FILE_TRACE");
	FILE *o = fopen(path, "w");
	if (!o)
		return;
	uint64_t n = atomic_load(&nev);
	if (n > MAX_EV) {
		fprintf(o, "# truncated: %llu events, kept %u\n", (unsigned long long)n, MAX_EV);
		n = MAX_EV;
	}
	for (uint64_t i = 0; i < n; i++)
		addr_id(evs[i].fn);
	for (unsigned h = 0; h < NADDR; h++) {
		Dl_info di;
		if (!addrs[h])
			continue;
		if (dladdr(addrs[h], &di) && di.dli_fname)
			fprintf(o, "A %x %s %lx\n", h, di.dli_fname,
				(unsigned long)((uintptr_t)addrs[h] - (uintptr_t)di.dli_fbase));
		else
			fprintf(o, "A %x ? %lx\n", h, (unsigned long)(uintptr_t)addrs[h]);
	}
	for (uint64_t i = 0; i < n; i++)
		fprintf(o, "E %u %c %x\n", evs[i].tid, evs[i].enter ? '+' : '-', addr_id(evs[i].fn));
	fclose(o);
}
