/* SPDX-License-Identifier: Apache-2.0 */
#include "common/log.h"
#include "common/clock.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

static const char *const level_names[] = { "ERR", "WARN", "INFO", "DEBUG" };
static int log_level = -1; /* resolved from $ING_LOG_LEVEL on first use */
static int log_default = ING_LOG_INFO;
static ing_log_fn log_fn;   /* NULL: stderr */
static void *log_ctx;

void ing_log_set_handler(ing_log_fn fn, void *ctx)
{
	log_ctx = ctx;
	__atomic_store_n(&log_fn, fn, __ATOMIC_RELEASE);
}

void ing_log_set_default_level(enum ing_log_level lvl)
{
	__atomic_store_n(&log_default, (int)lvl, __ATOMIC_RELAXED);
}

int ing_log_parse_level(const char *s, enum ing_log_level *out)
{
	static const struct { const char *name; enum ing_log_level lvl; } map[] = {
		{ "err", ING_LOG_ERR },   { "error", ING_LOG_ERR }, { "warn", ING_LOG_WARN },
		{ "warning", ING_LOG_WARN }, { "info", ING_LOG_INFO }, { "debug", ING_LOG_DEBUG },
	};
	for (size_t i = 0; s && i < sizeof(map) / sizeof(map[0]); i++) {
		if (strcasecmp(s, map[i].name) == 0) {
			*out = map[i].lvl;
			return 0;
		}
	}
	return -EINVAL;
}

void ing_log_set_level(enum ing_log_level lvl)
{
	if ((int)lvl < ING_LOG_ERR)
		lvl = ING_LOG_ERR;
	if ((int)lvl > ING_LOG_DEBUG)
		lvl = ING_LOG_DEBUG;
	__atomic_store_n(&log_level, (int)lvl, __ATOMIC_RELAXED);
}

enum ing_log_level ing_log_get_level(void)
{
	int l = __atomic_load_n(&log_level, __ATOMIC_RELAXED);
	if (l < 0) {
		enum ing_log_level e = (enum ing_log_level)__atomic_load_n(&log_default, __ATOMIC_RELAXED);
		const char *env = getenv("ING_LOG_LEVEL");
		if (env)
			(void)ing_log_parse_level(env, &e);
		l = (int)e;
		__atomic_store_n(&log_level, l, __ATOMIC_RELAXED);
	}
	return (enum ing_log_level)l;
}

void ing_log_write(enum ing_log_level lvl, const char *comp, const char *fmt, ...)
{
	char line[1024];
	struct timespec ts;
	struct tm tm;
	int saved = errno;
	ing_log_fn fn = __atomic_load_n(&log_fn, __ATOMIC_ACQUIRE);

	if (fn) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(line, sizeof(line), fmt, ap);
		va_end(ap);
		fn(log_ctx, lvl, comp, line);
		errno = saved;
		return;
	}
	clock_gettime(CLOCK_REALTIME, &ts);
	localtime_r(&ts.tv_sec, &tm);
	int n = snprintf(line, sizeof(line), "%02d:%02d:%02d.%03ld %-5s %-8s ", tm.tm_hour, tm.tm_min,
			 tm.tm_sec, ts.tv_nsec / 1000000, level_names[lvl], comp);
	va_list ap;
	va_start(ap, fmt);
	int m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
	if (len > sizeof(line) - 2)
		len = sizeof(line) - 2;
	line[len++] = '\n';
	ssize_t w = write(STDERR_FILENO, line, len);
	(void)w;
	errno = saved;
}

int ing_log_rl_allow(struct ing_log_rl *rl, uint64_t *suppressed)
{
	uint64_t now = ing_now_ns();
	if (rl->last_ns && now - rl->last_ns < 1000000000ull) {
		rl->suppressed++;
		return 0;
	}
	*suppressed = rl->suppressed;
	rl->suppressed = 0;
	rl->last_ns = now;
	return 1;
}
