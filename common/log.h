/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Logging: level + component tag, one line per call, to stderr (or a set sink).
 * Thread-safe (one write(2) per line). Never log rkeys or auth tokens.
 * Data-path code uses ING_LOG_RL (rate-limited per call site).
 */
#ifndef ING_COMMON_LOG_H
#define ING_COMMON_LOG_H

#include <stdint.h>

#include "ingest/ingest.h"   /* enum ing_log_level, ing_log_fn: libingest's public part */

/*
 * Set the global threshold (default INFO, or $ING_LOG_LEVEL: err|warn|info|debug).
 * ing_log_set_level and ing_log_set_handler are libingest's public API (ingest/ingest.h).
 */
enum ing_log_level ing_log_get_level(void);
/* The threshold used when neither ing_log_set_level nor $ING_LOG_LEVEL set one (libingest: WARN). */
void ing_log_set_default_level(enum ing_log_level lvl);
/* Parse "err|error|warn|warning|info|debug" (case-insensitive); -EINVAL if unknown. */
int ing_log_parse_level(const char *s, enum ing_log_level *out);

/*
 * Line format: text (default: "HH:MM:SS.mmm LEVEL comp message") or JSON, one object per
 * line for journald/Loki ({"ts":"<RFC 3339 UTC>","level":"info","comp":"svc","pid":N,
 * "msg":"..."}; control characters and bytes that are not UTF-8 escaped: every line parses).
 * Set once at start-up, before other threads log.
 */
enum ing_log_format { ING_LOG_TEXT = 0, ING_LOG_JSON };
void ing_log_set_format(enum ing_log_format f);
/* Parse "text|json" (case-insensitive); -EINVAL if unknown. */
int ing_log_parse_format(const char *s, enum ing_log_format *out);

void ing_log_write(enum ing_log_level lvl, const char *comp, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/*
 * Who a line is about. JSON lines carry each set member as a field of its own, after
 * "pid" ("peer":"10.0.0.7:41234","session":"1234","wafer":"w-12","frame":"f-7"; the
 * session id as a string: it is a 64-bit number), so journald/Loki queries need not
 * parse "msg"; text lines are unchanged (the message names them too).
 */
struct ing_log_ctx {
	const char *peer;     /* client address; NULL: none */
	uint64_t session;     /* 0: none */
	const char *wafer;    /* NULL: none */
	const char *frame;    /* NULL: none */
};
void ing_log_write_ctx(enum ing_log_level lvl, const char *comp, const struct ing_log_ctx *ctx,
		       const char *fmt, ...) __attribute__((format(printf, 4, 5)));

#define ING_LOG(lvl, comp, ...)                                                     \
	do {                                                                        \
		if ((lvl) <= ing_log_get_level())                                   \
			ing_log_write((lvl), (comp), __VA_ARGS__);                  \
	} while (0)
#define ING_ERR(comp, ...) ING_LOG(ING_LOG_ERR, comp, __VA_ARGS__)
#define ING_WARN(comp, ...) ING_LOG(ING_LOG_WARN, comp, __VA_ARGS__)
#define ING_INFO(comp, ...) ING_LOG(ING_LOG_INFO, comp, __VA_ARGS__)
#define ING_DBG(comp, ...) ING_LOG(ING_LOG_DEBUG, comp, __VA_ARGS__)
/* The same with a struct ing_log_ctx * (NULL: none) */
#define ING_LOGC(lvl, comp, ctx, ...)                                               \
	do {                                                                        \
		if ((lvl) <= ing_log_get_level())                                   \
			ing_log_write_ctx((lvl), (comp), (ctx), __VA_ARGS__);       \
	} while (0)

/* At most one line per second per call site; the number left out since the last line is
 * appended (" (+N suppressed)", only when N > 0; JSON: a field "suppressed"). */
struct ing_log_rl {
	uint64_t last_ns;
	uint64_t suppressed;
};
int ing_log_rl_allow(struct ing_log_rl *rl, uint64_t *suppressed);
void ing_log_write_rl(enum ing_log_level lvl, const char *comp, const struct ing_log_ctx *ctx,
		      uint64_t suppressed, const char *fmt, ...) __attribute__((format(printf, 5, 6)));
#define ING_LOG_RL(lvl, comp, fmt, ...)                                             \
	do {                                                                        \
		static __thread struct ing_log_rl rl__;                             \
		uint64_t sup__;                                                     \
		if ((lvl) <= ing_log_get_level() && ing_log_rl_allow(&rl__, &sup__)) \
			ing_log_write_rl((lvl), (comp), NULL, sup__, fmt, ##__VA_ARGS__); \
	} while (0)

/* ING_LOG_RL with a struct ing_log_ctx * */
#define ING_LOGC_RL(lvl, comp, ctx, fmt, ...)                                       \
	do {                                                                        \
		static __thread struct ing_log_rl rl__;                             \
		uint64_t sup__;                                                     \
		if ((lvl) <= ing_log_get_level() && ing_log_rl_allow(&rl__, &sup__)) \
			ing_log_write_rl((lvl), (comp), (ctx), sup__, fmt, ##__VA_ARGS__); \
	} while (0)

#endif
