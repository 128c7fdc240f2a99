/* SPDX-License-Identifier: Apache-2.0 */
/*
 * eal.c - DPDK EAL start-up. The EAL only gives us lcore threads, rings and mempools;
 * no PCI device, no telemetry socket and (by default) no hugepages are touched.
 */
#include "dataplane/dataplane_internal.h"
#include "common/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <rte_eal.h>
#include <rte_log.h>
#include <rte_errno.h>
#include <rte_launch.h>
#include <rte_lcore.h>

#define COMP "eal"
#define EAL_MAX_ARGS 24

enum { EAL_DOWN = 0, EAL_UP, EAL_GONE };
static pthread_mutex_t eal_lock = PTHREAD_MUTEX_INITIALIZER;
static int eal_state = EAL_DOWN;

static unsigned name_counter;

/*
 * DPDK's own log lines go through ing_log_write (component "eal"), so they carry our
 * format: a --log-format json daemon prints nothing but JSON lines. EAL writes a message
 * with one or more fputs/fprintf calls; whole lines are logged, a partial one is kept.
 */
static char eal_partial[512];
static size_t eal_partial_len;

static ssize_t eal_log_write(void *cookie, const char *buf, size_t n)
{
	(void)cookie;
	for (size_t i = 0; i < n; i++) {
		char c = buf[i];
		if (c != '\n' && eal_partial_len < sizeof(eal_partial) - 1) {
			eal_partial[eal_partial_len++] = c;
			continue;
		}
		if (c != '\n')
			continue;   /* an over-long line is cut */
		eal_partial[eal_partial_len] = 0;
		if (eal_partial_len)
			ING_WARN(COMP, "%s", eal_partial);
		eal_partial_len = 0;
	}
	return (ssize_t)n;
}

static void eal_log_route(void)
{
	static FILE *f;
	cookie_io_functions_t io = { .write = eal_log_write };
	if (f)
		return;
	f = fopencookie(NULL, "w", io);
	if (!f)
		return;
	setvbuf(f, NULL, _IOLBF, 0);
	rte_openlog_stream(f);
}

void dp_unique_name(char *out, size_t len, const char *prefix)
{
	unsigned n = __atomic_fetch_add(&name_counter, 1, __ATOMIC_RELAXED);
	char num[16];
	int k = snprintf(num, sizeof(num), "_%u", n);
	size_t room = len - 1 - (size_t)k;

	snprintf(out, len, "%.*s%s", (int)room, prefix ? prefix : "ing", num);
}

void ing_eal_opts_init(struct ing_eal_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->lcores = NULL;
	o->main_lcore = -1;
	o->no_huge = true;
	o->mem_mb = 64;
	o->file_prefix = NULL;
	o->log_level = "warning";
}

int ing_eal_start(const struct ing_eal_opts *o)
{
	struct ing_eal_opts def;
	char mem[16], mainl[16], prefix[64], loglvl[64], lcores[128];
	char store[EAL_MAX_ARGS][128];
	char *argv[EAL_MAX_ARGS + 1];
	char line[1024];
	int argc = 0, rc;

	if (!o) {
		ing_eal_opts_init(&def);
		o = &def;
	}
	pthread_mutex_lock(&eal_lock);
	if (eal_state == EAL_UP) {
		pthread_mutex_unlock(&eal_lock);
		ING_DBG(COMP, "EAL already running");
		return 0;
	}
	if (eal_state == EAL_GONE) {
		pthread_mutex_unlock(&eal_lock);
		ING_ERR(COMP, "EAL cannot be restarted in the same process");
		return -EALREADY;
	}

#define ARG(s)                                                                      \
	do {                                                                        \
		snprintf(store[argc], sizeof(store[argc]), "%s", (s));              \
		argv[argc] = store[argc];                                           \
		argc++;                                                             \
	} while (0)

	snprintf(lcores, sizeof(lcores), "%s", o->lcores && *o->lcores ? o->lcores : "0");
	snprintf(mem, sizeof(mem), "%u", o->mem_mb ? o->mem_mb : 64);
	snprintf(loglvl, sizeof(loglvl), "%s", o->log_level && *o->log_level ? o->log_level : "warning");
	ARG("ingestd");
	ARG("-l");
	ARG(lcores);
	if (o->main_lcore >= 0) {
		snprintf(mainl, sizeof(mainl), "%d", o->main_lcore);
		ARG("--main-lcore");
		ARG(mainl);
	}
	ARG("-m");
	ARG(mem);
	if (o->no_huge) {
		ARG("--no-huge");
		ARG("--no-shconf");
	} else {
		if (o->file_prefix && *o->file_prefix)
			snprintf(prefix, sizeof(prefix), "%s", o->file_prefix);
		else
			snprintf(prefix, sizeof(prefix), "ingestd-%d", (int)getpid());
		ARG("--file-prefix");
		ARG(prefix);
	}
	ARG("--no-pci");
	ARG("--no-telemetry");
	ARG("--log-level");
	ARG(loglvl);
	argv[argc] = NULL;
#undef ARG

	size_t off = 0;
	line[0] = 0;
	for (int i = 1; i < argc && off < sizeof(line); i++) {
		int k = snprintf(line + off, sizeof(line) - off, "%s%s", i > 1 ? " " : "", argv[i]);
		if (k < 0)
			break;
		off += (size_t)k;
	}
	ING_INFO(COMP, "starting EAL: %s", line);

	eal_log_route();
	rc = rte_eal_init(argc, argv);
	if (rc < 0) {
		int err = rte_errno ? rte_errno : EINVAL;
		/* a failed rte_eal_init cannot be retried either (EAL keeps its run-once flag) */
		eal_state = err == EALREADY ? EAL_GONE : EAL_DOWN;
		pthread_mutex_unlock(&eal_lock);
		ING_ERR(COMP, "rte_eal_init failed: %s (args: %s)", rte_strerror(err), line);
		return -err;
	}
	eal_state = EAL_UP;
	pthread_mutex_unlock(&eal_lock);
	ING_INFO(COMP, "EAL up: %u lcores, main lcore %u", rte_lcore_count(), rte_get_main_lcore());
	return 0;
}

void ing_eal_stop(void)
{
	pthread_mutex_lock(&eal_lock);
	if (eal_state != EAL_UP) {
		pthread_mutex_unlock(&eal_lock);
		return;
	}
	rte_eal_mp_wait_lcore();
	int rc = rte_eal_cleanup();
	if (rc < 0)
		ING_WARN(COMP, "rte_eal_cleanup: %s", rte_strerror(-rc));
	eal_state = EAL_GONE;
	pthread_mutex_unlock(&eal_lock);
}
