/* SPDX-License-Identifier: Apache-2.0 */
/*
 * h3000 ingest - library-wide part of libingest's C API: version, error codes, logging.
 * Included by <ingest/producer.h>. ABI: libingest.so.1, symbols versioned INGEST_1.0.
 */
#ifndef INGEST_INGEST_H
#define INGEST_INGEST_H

#ifdef __cplusplus
extern "C" {
#endif

#ifndef ING_API
#define ING_API __attribute__((visibility("default")))
#endif

/* The header's version; ing_version() is the loaded library's. Same major: compatible. */
#define ING_VERSION_MAJOR 1
#define ING_VERSION_MINOR 6
#define ING_VERSION_PATCH 0
#define ING_VERSION_NUMBER (ING_VERSION_MAJOR * 10000 + ING_VERSION_MINOR * 100 + ING_VERSION_PATCH)

/* The library's version as ING_VERSION_NUMBER encodes it (10000 * major + 100 * minor + patch). */
ING_API unsigned ing_version(void);
/* The library's version as "MAJOR.MINOR.PATCH". Static storage. */
ING_API const char *ing_version_string(void);

/*
 * Why a frame failed: struct ing_ack.code (the wire's h3000.ErrorCode, same numbers).
 * Functions that return int return 0 or a negative errno instead.
 */
enum ing_error {
	ING_OK = 0,
	ING_ERR_INVALID_ARGUMENT = 1,   /* bad descriptor or chunk (length, offset, wafer id) */
	ING_ERR_TOO_LARGE = 2,          /* length above the negotiated maximum */
	ING_ERR_CRC_MISMATCH = 3,       /* bytes do not match the declared crc32c */
	ING_ERR_DUPLICATE_CONFLICT = 4, /* frame id already stored with other bytes */
	ING_ERR_DEADLINE = 5,           /* not DURABLE within frame_timeout_ms */
	ING_ERR_TRANSFER = 6,           /* RDMA READ or stream failure, connection lost */
	ING_ERR_IO = 7,                 /* storage I/O error on the node (retryable) */
	ING_ERR_NO_SPACE = 8,           /* node storage full (retryable) */
	ING_ERR_NO_TRANSPORT = 9,       /* no RDMA connection for this session */
	ING_ERR_BUSY = 10,              /* no credit or buffer on the node (retryable) */
	ING_ERR_CANCELLED = 11,         /* producer went away or cancelled */
	ING_ERR_INTERNAL = 12,
	ING_ERR_SHUTTING_DOWN = 13,     /* ingest node is stopping (retryable) */
};

/*
 * A static description of code: an enum ing_error (ack code, >= 0) or a negative errno
 * returned by a libingest function (-EAGAIN, ...). Never NULL; unknown codes say so.
 * Any thread.
 */
ING_API const char *ing_strerror(int code);
/*
 * 1 when a later attempt may succeed, 0 when it cannot without a change (a bad option,
 * token, certificate or frame): for a negative errno of ing_producer_open, submit or poll
 * (-ECONNREFUSED, -ETIMEDOUT, -EAGAIN, -EPIPE, ... are), or an ack's enum ing_error
 * (IO, NO_SPACE, BUSY, SHUTTING_DOWN, TRANSFER, DEADLINE, CRC_MISMATCH are). Any thread.
 * Bindings decide retries from this, never from a message's text.
 */
ING_API int ing_error_retryable(int code);

enum ing_log_level {
	ING_LOG_ERR = 0,
	ING_LOG_WARN = 1,
	ING_LOG_INFO = 2,
	ING_LOG_DEBUG = 3,
};

/*
 * A log line: level, component tag ("producer", "grpc", ...) and the message without
 * timestamp or newline. Called on the thread that logs (the one driving the producer);
 * msg is valid during the call only. Never called with auth tokens or rkeys.
 */
typedef void (*ing_log_fn)(void *ctx, enum ing_log_level level, const char *component,
			   const char *msg);

/*
 * Where the library's log lines go: fn(ctx, ...) for each line at or below the level,
 * or, with fn NULL (the default), one timestamped line on stderr. Process-wide; set it
 * before creating producers, not while another thread uses the library.
 */
ING_API void ing_log_set_handler(ing_log_fn fn, void *ctx);
/* Most verbose level passed on; default ING_LOG_WARN (or $ING_LOG_LEVEL). Any thread. */
ING_API void ing_log_set_level(enum ing_log_level level);

#ifdef __cplusplus
}
#endif
#endif
