/* SPDX-License-Identifier: Apache-2.0 */
/* libingest: version query, error strings, the library's default log level. */
#include "ingest/ingest.h"
#include "common/log.h"

#include <errno.h>
#include <string.h>

#define STR2(x) #x
#define STR(x) STR2(x)

ING_API unsigned ing_version(void)
{
	return ING_VERSION_NUMBER;
}

ING_API const char *ing_version_string(void)
{
	return STR(ING_VERSION_MAJOR) "." STR(ING_VERSION_MINOR) "." STR(ING_VERSION_PATCH);
}

ING_API const char *ing_strerror(int code)
{
	static const char *const names[] = {
		[ING_OK] = "ok",
		[ING_ERR_INVALID_ARGUMENT] = "invalid argument (bad frame descriptor or chunk)",
		[ING_ERR_TOO_LARGE] = "frame larger than the negotiated maximum",
		[ING_ERR_CRC_MISMATCH] = "bytes do not match the declared CRC-32C",
		[ING_ERR_DUPLICATE_CONFLICT] = "frame id already stored with other bytes",
		[ING_ERR_DEADLINE] = "frame not durable in time",
		[ING_ERR_TRANSFER] = "transfer failed (RDMA READ or stream)",
		[ING_ERR_IO] = "storage I/O error on the ingest node",
		[ING_ERR_NO_SPACE] = "ingest node storage full",
		[ING_ERR_NO_TRANSPORT] = "no RDMA connection for this session",
		[ING_ERR_BUSY] = "ingest node busy (no credit or buffer)",
		[ING_ERR_CANCELLED] = "cancelled",
		[ING_ERR_INTERNAL] = "internal error on the ingest node",
		[ING_ERR_SHUTTING_DOWN] = "ingest node shutting down",
	};
	if (code >= 0) {
		if ((size_t)code < sizeof(names) / sizeof(names[0]) && names[code])
			return names[code];
		return "unknown ingest error code";
	}
	const char *s = strerrordesc_np(-code);   /* static, thread-safe (unlike strerror) */
	return s ? s : "unknown errno";
}

ING_API int ing_error_retryable(int code)
{
	switch (code) {
	/* acks: the node or the way there, not the frame */
	case ING_ERR_CRC_MISMATCH:     /* the bytes may have been damaged on the way */
	case ING_ERR_DEADLINE:
	case ING_ERR_TRANSFER:
	case ING_ERR_IO:
	case ING_ERR_NO_SPACE:
	case ING_ERR_NO_TRANSPORT:
	case ING_ERR_BUSY:
	case ING_ERR_SHUTTING_DOWN:
	/* errnos of open, submit and poll: the peer, the network, time, no credit now */
	case -EAGAIN:
	case -ENOBUFS:
	case -EPIPE:
	case -ECONNREFUSED:
	case -ECONNRESET:
	case -ECONNABORTED:
	case -ETIMEDOUT:
	case -EHOSTUNREACH:
	case -EHOSTDOWN:
	case -ENETUNREACH:
	case -ENETDOWN:
	case -ESHUTDOWN:
	case -EIO:
	case -EBUSY:
	case -EINTR:
		return 1;
	default:
		return 0;
	}
}

#ifdef ING_SHARED_LIB
/* libingest.so speaks only of warnings and errors unless the application asks for more. */
__attribute__((constructor)) static void libingest_log_default(void)
{
	ing_log_set_default_level(ING_LOG_WARN);
}
#endif
