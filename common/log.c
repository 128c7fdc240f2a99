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
static const char *const level_json[] = { "error", "warning", "info", "debug" };
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

static int log_format = ING_LOG_TEXT;

void ing_log_set_format(enum ing_log_format f)
{
	__atomic_store_n(&log_format, (int)f, __ATOMIC_RELAXED);
}

int ing_log_parse_format(const char *s, enum ing_log_format *out)
{
	if (s && strcasecmp(s, "text") == 0)
		*out = ING_LOG_TEXT;
	else if (s && strcasecmp(s, "json") == 0)
		*out = ING_LOG_JSON;
	else
		return -EINVAL;
	return 0;
}

/* Length of the valid UTF-8 sequence at s (2..4), or 0 (strict: no overlong, surrogate). */
static size_t utf8_len(const unsigned char *s)
{
	unsigned char c = s[0], lo = 0x80, hi = 0xbf;
	size_t n;
	if (c >= 0xc2 && c <= 0xdf)
		n = 2;
	else if (c >= 0xe0 && c <= 0xef)
		n = 3;
	else if (c >= 0xf0 && c <= 0xf4)
		n = 4;
	else
		return 0;
	if (c == 0xe0)
		lo = 0xa0;
	else if (c == 0xed)
		hi = 0x9f;
	else if (c == 0xf0)
		lo = 0x90;
	else if (c == 0xf4)
		hi = 0x8f;
	if (s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < n; i++)
		if (s[i] < 0x80 || s[i] > 0xbf)
			return 0;
	return n;
}

/*
 * Append s as the inside of a JSON string; stops (without splitting an escape or a
 * character) at cap. Valid UTF-8 passes as is; a stray byte becomes \u00XX, so every line
 * is valid JSON in valid UTF-8.
 */
static size_t json_escape(char *out, size_t n, size_t cap, const char *s)
{
	static const char hex[] = "0123456789abcdef";
	while (*s) {
		unsigned char c = (unsigned char)*s;
		char e[7];
		const char *src = e;
		size_t k;
		if (c == '"' || c == '\\') {
			e[0] = '\\';
			e[1] = (char)c;
			k = 2;
		} else if (c == '\n' || c == '\t' || c == '\r') {
			e[0] = '\\';
			e[1] = c == '\n' ? 'n' : c == '\t' ? 't' : 'r';
			k = 2;
		} else if (c >= 0x80 && (k = utf8_len((const unsigned char *)s)) > 0) {
			src = s;
		} else if (c < 0x20 || c >= 0x7f) {
			memcpy(e, "\\u00", 4);
			e[4] = hex[c >> 4];
			e[5] = hex[c & 15];
			k = 6;
		} else {
			e[0] = (char)c;
			k = 1;
		}
		if (n + k > cap)
			break;
		memcpy(out + n, src, k);
		n += k;
		s += src == s ? k : 1;
	}
	return n;
}

/* ,"key":"value" with value escaped, when it fits below cap */
static size_t json_field(char *line, size_t len, size_t cap, const char *key, const char *v)
{
	size_t k = strlen(key);
	if (len + k + 6 >= cap)
		return len;
	line[len++] = ',';
	line[len++] = '"';
	memcpy(line + len, key, k);
	len += k;
	memcpy(line + len, "\":\"", 3);
	len = json_escape(line, len + 3, cap - 1, v);
	line[len++] = '"';
	return len;
}

/*
 * msg without the peer's address where ctx->peer carries it (JSON: a field of its own):
 * " from PEER" and " (PEER)" go, " (PEER, more)" keeps " (more)". Into out (len bytes).
 */
static const char *msg_without_peer(const char *msg, const char *peer, char *out, size_t len)
{
	size_t pl = peer ? strlen(peer) : 0;
	const char *at;

	if (!pl || !(at = strstr(msg, peer)))
		return msg;
	size_t head = (size_t)(at - msg), tail_off = head + pl;
	if (head >= 6 && !strncmp(at - 6, " from ", 6)) {
		head -= 6;
	} else if (head >= 2 && !strncmp(at - 2, " (", 2) && msg[tail_off] == ')') {
		head -= 2;
		tail_off++;
	} else if (head >= 1 && at[-1] == '(' && !strncmp(msg + tail_off, ", ", 2)) {
		tail_off += 2;   /* "(PEER, identity ...)" -> "(identity ...)" */
	} else {
		return msg;
	}
	snprintf(out, len, "%.*s%s", (int)head, msg, msg + tail_off);
	return out;
}

static void write_json(enum ing_log_level lvl, const char *comp, const struct ing_log_ctx *ctx,
		       const char *msg, uint64_t suppressed)
{
	char line[2048];
	struct timespec ts;
	struct tm tm;
	size_t cap = sizeof(line) - 4;   /* room for "}\n" and the closing quote */

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	int n = snprintf(line, sizeof(line),
			 "{\"ts\":\"%04d-%02d-%02dT%02d:%02d:%02d.%06ldZ\",\"level\":\"%s\",\"comp\":\"",
			 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
			 tm.tm_sec, ts.tv_nsec / 1000, level_json[lvl]);
	size_t len = json_escape(line, (size_t)n, 200, comp);
	len += (size_t)snprintf(line + len, sizeof(line) - len, "\",\"pid\":%d", (int)getpid());
	if (ctx) {   /* each bounded, so that msg keeps most of the line */
		char sid[24];
		if (ctx->peer)
			len = json_field(line, len, 600, "peer", ctx->peer);
		if (ctx->session) {
			snprintf(sid, sizeof(sid), "%llu", (unsigned long long)ctx->session);
			len = json_field(line, len, 640, "session", sid);
		}
		if (ctx->wafer)
			len = json_field(line, len, 1000, "wafer", ctx->wafer);
		if (ctx->frame)
			len = json_field(line, len, 1400, "frame", ctx->frame);
	}
	if (suppressed)   /* lines a rate-limited call site left out since its last */
		len += (size_t)snprintf(line + len, sizeof(line) - len, ",\"suppressed\":%llu",
					(unsigned long long)suppressed);
	char bare[1024];
	if (ctx && ctx->peer)
		msg = msg_without_peer(msg, ctx->peer, bare, sizeof(bare));
	memcpy(line + len, ",\"msg\":\"", 8);
	len = json_escape(line, len + 8, cap, msg);
	memcpy(line + len, "\"}\n", 3);
	len += 3;
	ssize_t w = write(STDERR_FILENO, line, len);
	(void)w;
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

static void log_vwrite(enum ing_log_level lvl, const char *comp, const struct ing_log_ctx *ctx,
		       uint64_t suppressed, const char *fmt, va_list ap0)
	__attribute__((format(printf, 5, 0)));

void ing_log_write(enum ing_log_level lvl, const char *comp, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	log_vwrite(lvl, comp, NULL, 0, fmt, ap);
	va_end(ap);
}

void ing_log_write_rl(enum ing_log_level lvl, const char *comp, const struct ing_log_ctx *ctx,
		      uint64_t suppressed, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	log_vwrite(lvl, comp, ctx, suppressed, fmt, ap);
	va_end(ap);
}

void ing_log_write_ctx(enum ing_log_level lvl, const char *comp, const struct ing_log_ctx *ctx,
		       const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	log_vwrite(lvl, comp, ctx, 0, fmt, ap);
	va_end(ap);
}

static void log_vwrite(enum ing_log_level lvl, const char *comp, const struct ing_log_ctx *ctx,
		       uint64_t suppressed, const char *fmt, va_list ap0)
{
	char line[1024], msg[1024];
	struct timespec ts;
	struct tm tm;
	int saved = errno;
	ing_log_fn fn = __atomic_load_n(&log_fn, __ATOMIC_ACQUIRE);

	int m = vsnprintf(msg, sizeof(msg), fmt, ap0);
	size_t ml = m < 0 ? 0 : (size_t)m < sizeof(msg) ? (size_t)m : sizeof(msg) - 1;
	if (__atomic_load_n(&log_format, __ATOMIC_RELAXED) == ING_LOG_JSON && !fn) {
		write_json(lvl, comp, ctx, msg, suppressed);
		errno = saved;
		return;
	}
	if (suppressed && ml < sizeof(msg))   /* said only when some were left out */
		snprintf(msg + ml, sizeof(msg) - ml, " (+%llu suppressed)", (unsigned long long)suppressed);
	if (fn) {
		fn(log_ctx, lvl, comp, msg);
		errno = saved;
		return;
	}
	clock_gettime(CLOCK_REALTIME, &ts);
	localtime_r(&ts.tv_sec, &tm);
	int n = snprintf(line, sizeof(line), "%02d:%02d:%02d.%03ld %-5s %-8s %s", tm.tm_hour, tm.tm_min,
			 tm.tm_sec, ts.tv_nsec / 1000000, level_names[lvl], comp, msg);
	size_t len = n < 0 ? 0 : (size_t)n;
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
