/* SPDX-License-Identifier: Apache-2.0 */
/*
 * grpc_tls.c - TLS helpers shared by the gRPC server and client.
 *
 * OpenSSL writes to the socket with write(2), which raises SIGPIPE when the peer has gone
 * (any SSL_* call may write: handshake, alerts, close_notify). A library must not kill its
 * host process, and the cleartext paths use MSG_NOSIGNAL; around OpenSSL calls SIGPIPE is
 * blocked on this thread and a SIGPIPE raised meanwhile is swallowed (one that was already
 * pending before is left for the application).
 */
#include "control/net/grpc_internal.h"

#include <sys/socket.h>
#include <stdint.h>
#include <errno.h>
#include <openssl/err.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>

void grpc_sigpipe_block(struct grpc_sigpipe_guard *g)
{
	sigset_t pipe_set, pending;
	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	sigemptyset(&pending);
	sigpending(&pending);
	g->was_pending = sigismember(&pending, SIGPIPE) == 1;
	pthread_sigmask(SIG_BLOCK, &pipe_set, &g->old);
}

void grpc_sigpipe_unblock(struct grpc_sigpipe_guard *g)
{
	int saved = errno;
	if (!g->was_pending) {
		sigset_t pipe_set;
		sigemptyset(&pipe_set);
		sigaddset(&pipe_set, SIGPIPE);
		const struct timespec zero = { 0, 0 };
		while (sigtimedwait(&pipe_set, NULL, &zero) == SIGPIPE)
			;
	}
	pthread_sigmask(SIG_SETMASK, &g->old, NULL);
	errno = saved;
}

int grpc_ssl_write(SSL *ssl, const void *buf, int len)
{
	struct grpc_sigpipe_guard g;
	grpc_sigpipe_block(&g);
	int n = SSL_write(ssl, buf, len);
	grpc_sigpipe_unblock(&g);
	return n;
}

int grpc_ssl_read(SSL *ssl, void *buf, int len)
{
	struct grpc_sigpipe_guard g;
	grpc_sigpipe_block(&g);
	int n = SSL_read(ssl, buf, len);
	grpc_sigpipe_unblock(&g);
	return n;
}

int grpc_ssl_handshake(SSL *ssl)
{
	struct grpc_sigpipe_guard g;
	grpc_sigpipe_block(&g);
	int n = SSL_do_handshake(ssl);
	grpc_sigpipe_unblock(&g);
	return n;
}

void grpc_ssl_shutdown(SSL *ssl)
{
	struct grpc_sigpipe_guard g;
	grpc_sigpipe_block(&g);
	(void)SSL_shutdown(ssl);   /* one non-blocking attempt at close_notify */
	grpc_sigpipe_unblock(&g);
}

const char *grpc_ssl_errstr(unsigned long e, char *buf, size_t len, const char *dflt)
{
	if (!e)
		return dflt;
	ERR_error_string_n(e, buf, len);
	return buf;
}

ssize_t grpc_tls_read(SSL *ssl, void *buf, size_t len)
{
	int n = grpc_ssl_read(ssl, buf, (int)(len > INT32_MAX ? INT32_MAX : len));
	if (n > 0)
		return n;
	int e = SSL_get_error(ssl, n);
	ERR_clear_error();
	if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
		return -EAGAIN;
	return e == SSL_ERROR_ZERO_RETURN ? 0 : -ECONNRESET;
}

ssize_t grpc_tls_write(SSL *ssl, const void *buf, size_t len)
{
	int n = grpc_ssl_write(ssl, buf, (int)(len > INT32_MAX ? INT32_MAX : len));
	if (n > 0)
		return n;
	int e = SSL_get_error(ssl, n);
	ERR_clear_error();
	if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
		return -EAGAIN;
	return -EPIPE;
}
