/* SPDX-License-Identifier: Apache-2.0 */
/*
 * grpc_wire.c - gRPC message framing and header encodings shared by server and client.
 */
#include "control/net/grpc_internal.h"
#include "control/net/grpc.h"
#include "common/parse.h"

#include <nghttp2/nghttp2.h>
#include <stdbool.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <stdio.h>
#include <string.h>

void grpc_deframer_init(struct grpc_deframer *d)
{
	memset(d, 0, sizeof(*d));
}

enum grpc_wire_ev grpc_deframe_next(struct grpc_deframer *d, const uint8_t **p, size_t *n,
				    const uint8_t **data, size_t *dlen)
{
	if (d->in_msg) {
		if (d->got == d->len) {
			d->in_msg = 0;
			d->hdr_got = 0;
			return GRPC_WIRE_END;
		}
		if (*n == 0)
			return GRPC_WIRE_NEED;
		size_t take = d->len - d->got;
		if (take > *n)
			take = *n;
		*data = *p;
		*dlen = take;
		*p += take;
		*n -= take;
		d->got += (uint32_t)take;
		return GRPC_WIRE_DATA;
	}
	/* Common case first: the whole prefix is in this piece. */
	if (d->hdr_got == 0 && *n >= GRPC_PREFIX_LEN) {
		memcpy(d->hdr, *p, GRPC_PREFIX_LEN);
		*p += GRPC_PREFIX_LEN;
		*n -= GRPC_PREFIX_LEN;
		d->hdr_got = GRPC_PREFIX_LEN;
	} else {
		size_t take = GRPC_PREFIX_LEN - d->hdr_got;
		if (take > *n)
			take = *n;
		memcpy(d->hdr + d->hdr_got, *p, take);
		*p += take;
		*n -= take;
		d->hdr_got = (uint8_t)(d->hdr_got + take);
		if (d->hdr_got < GRPC_PREFIX_LEN)
			return GRPC_WIRE_NEED;
	}
	d->flags = d->hdr[0];
	d->len = (uint32_t)d->hdr[1] << 24 | (uint32_t)d->hdr[2] << 16 |
		 (uint32_t)d->hdr[3] << 8 | d->hdr[4];
	d->got = 0;
	d->in_msg = 1;
	return GRPC_WIRE_BEGIN;
}

#define H2_PREFACE_LEN 24   /* "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" */
#define H2_FRAME_DATA 0
#define H2_FLAG_PADDED 0x08

void h2_track_init(struct h2_track *t)
{
	memset(t, 0, sizeof(*t));
	t->type = 0xff;   /* no frame yet */
	t->pos = H2P_PREFACE;
	t->left = H2_PREFACE_LEN;
}

/* The header is complete: what its payload holds. */
static void h2_track_head(struct h2_track *t)
{
	uint32_t len = (uint32_t)t->hd[0] << 16 | (uint32_t)t->hd[1] << 8 | t->hd[2];
	uint32_t sid = ((uint32_t)t->hd[5] << 24 | (uint32_t)t->hd[6] << 16 |
			(uint32_t)t->hd[7] << 8 | t->hd[8]) & 0x7fffffffu;
	bool alike = t->type == H2_FRAME_DATA && !(t->flags & H2_FLAG_PADDED) && t->hd[3] == H2_FRAME_DATA &&
		     !(t->hd[4] & H2_FLAG_PADDED) && sid == t->sid && len == t->len;
	t->same = alike ? t->same + 1 : 0;
	t->len = len;
	t->type = t->hd[3];
	t->flags = t->hd[4];
	t->sid = sid;
	t->hd_got = 0;
	t->pad = 0;
	if (t->type == H2_FRAME_DATA && (t->flags & H2_FLAG_PADDED)) {
		if (t->len == 0) {
			t->pos = H2P_LOST;   /* nghttp2: PROTOCOL_ERROR */
			return;
		}
		t->pos = H2P_PAD_LEN;
		t->left = 1;
	} else {
		t->pos = t->type == H2_FRAME_DATA ? H2P_DATA : H2P_PAYLOAD;
		t->left = t->len;
	}
}

/* The current part is over: the next one (empty parts are passed at once). */
static void h2_track_next(struct h2_track *t)
{
	for (;;) {
		if (t->left || t->pos == H2P_LOST)
			return;
		switch (t->pos) {
		case H2P_DATA:
			t->pos = H2P_PADDING;
			t->left = t->pad;
			break;
		case H2P_PREFACE:
		case H2P_PADDING:
		case H2P_PAYLOAD:
			t->pos = H2P_HEAD;
			t->left = 9;
			return;
		default:
			return;
		}
	}
}

void h2_track_advance(struct h2_track *t, const uint8_t *p, size_t n)
{
	while (n && t->pos != H2P_LOST) {
		size_t k = n < t->left ? n : t->left;
		switch (t->pos) {
		case H2P_HEAD:
			memcpy(t->hd + t->hd_got, p, k);
			t->hd_got = (uint8_t)(t->hd_got + k);
			t->left -= (uint32_t)k;
			if (!t->left) {
				h2_track_head(t);
				p += k;
				n -= k;
				h2_track_next(t);
				continue;
			}
			break;
		case H2P_PAD_LEN:
			t->pad = p[0];
			t->left = 0;
			if (t->pad > t->len - 1) {
				t->pos = H2P_LOST;   /* nghttp2: PROTOCOL_ERROR, invalid padding */
				return;
			}
			t->pos = H2P_DATA;
			t->left = t->len - 1 - t->pad;
			p += 1;
			n -= 1;
			h2_track_next(t);
			continue;
		default:
			t->left -= (uint32_t)k;
			break;
		}
		p += k;
		n -= k;
		h2_track_next(t);
	}
}

int grpc_timeout_parse(const char *s, size_t len, uint64_t *ns)
{
	if (len < 2 || len > 9)
		return -EINVAL;
	uint64_t v = 0;
	for (size_t i = 0; i + 1 < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
		v = v * 10 + (uint64_t)(s[i] - '0');
	}
	uint64_t mul;
	switch (s[len - 1]) {
	case 'H': mul = 3600ull * 1000000000ull; break;
	case 'M': mul = 60ull * 1000000000ull; break;
	case 'S': mul = 1000000000ull; break;
	case 'm': mul = 1000000ull; break;
	case 'u': mul = 1000ull; break;
	case 'n': mul = 1ull; break;
	default: return -EINVAL;
	}
	/* 99999999H is 3.6e20 ns, beyond 64 bits: saturate. */
	if (v > UINT64_MAX / mul)
		*ns = UINT64_MAX;
	else
		*ns = v * mul;
	return 0;
}

void grpc_timeout_format(uint64_t ns, char *out, size_t outlen)
{
	static const struct { char unit; uint64_t mul; } u[] = {
		{ 'n', 1ull }, { 'u', 1000ull }, { 'm', 1000000ull }, { 'S', 1000000000ull },
		{ 'M', 60000000000ull }, { 'H', 3600000000000ull },
	};
	/* The finest unit whose value fits in 8 digits, rounded up (never shorten a deadline). */
	for (size_t i = 0; i < sizeof(u) / sizeof(u[0]); i++) {
		uint64_t v = ns / u[i].mul + (ns % u[i].mul ? 1 : 0);
		if (v <= 99999999ull) {
			snprintf(out, outlen, "%llu%c", (unsigned long long)v, u[i].unit);
			return;
		}
	}
	snprintf(out, outlen, "99999999H");
}

size_t grpc_pct_encode(const char *in, char *out, size_t outlen)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t o = 0;
	if (!outlen)
		return 0;
	for (const unsigned char *s = (const unsigned char *)(in ? in : ""); *s; s++) {
		if (*s >= 0x20 && *s <= 0x7e && *s != '%') {
			if (o + 1 >= outlen)
				break;
			out[o++] = (char)*s;
		} else {
			if (o + 3 >= outlen)
				break;
			out[o++] = '%';
			out[o++] = hex[*s >> 4];
			out[o++] = hex[*s & 15];
		}
	}
	out[o] = '\0';
	return o;
}

size_t grpc_pct_decode(const char *in, size_t inlen, char *out, size_t outlen)
{
	size_t o = 0;
	if (!outlen)
		return 0;
	for (size_t i = 0; i < inlen && o + 1 < outlen; i++) {
		int hi, lo;
		if (in[i] == '%' && i + 2 < inlen && (hi = ing_hex_digit(in[i + 1])) >= 0 &&
		    (lo = ing_hex_digit(in[i + 2])) >= 0) {
			out[o++] = (char)(hi << 4 | lo);
			i += 2;
		} else {
			out[o++] = in[i];
		}
	}
	out[o] = '\0';
	return o;
}

int grpc_status_from_http(int http_status)
{
	switch (http_status) {
	case 400: return ING_GRPC_INTERNAL;
	case 401: return ING_GRPC_UNAUTHENTICATED;
	case 403: return ING_GRPC_PERMISSION_DENIED;
	case 404: return ING_GRPC_UNIMPLEMENTED;
	case 429:
	case 502:
	case 503:
	case 504: return ING_GRPC_UNAVAILABLE;
	default: return ING_GRPC_UNKNOWN;
	}
}

/* 0..65535 in decimal: getaddrinfo would silently take 99999 modulo 65536 */
static bool port_ok(const char *p)
{
	unsigned long v = 0;
	if (!*p || strlen(p) > 5)
		return false;
	for (; *p; p++) {
		if (*p < '0' || *p > '9')
			return false;
		v = v * 10 + (unsigned long)(*p - '0');
	}
	return v <= 65535;
}

/* "host:port" / "[v6]:port" -> host, port (strings into buf). 0 or -EINVAL (also for a
 * port that is not a number in 0..65535). */
int grpc_split_hostport(const char *in, char *buf, size_t buflen, const char **host,
			  const char **port)
{
	if (!in || strlen(in) >= buflen)
		return -EINVAL;
	strcpy(buf, in);
	char *colon;
	if (buf[0] == '[') {
		char *rb = strchr(buf, ']');
		if (!rb || rb[1] != ':')
			return -EINVAL;
		*rb = '\0';
		*host = buf + 1;
		*port = rb + 2;
		return port_ok(*port) ? 0 : -EINVAL;
	}
	colon = strrchr(buf, ':');
	if (!colon)
		return -EINVAL;
	*colon = '\0';
	*host = buf;
	*port = colon + 1;
	return port_ok(*port) ? 0 : -EINVAL;
}

int grpc_tcp_listen(const char *host, const char *port, int backlog, int *port_out,
		    const char **gai_why)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_PASSIVE | AI_NUMERICSERV }, *res = NULL;
	int gr = getaddrinfo(*host ? host : NULL, port, &hints, &res);
	if (gr) {
		*gai_why = gai_strerror(gr);
		return -EINVAL;
	}
	int rc = -EADDRNOTAVAIL;
	for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
		int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd < 0) {
			rc = -errno;
			continue;
		}
		int one = 1;
		(void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, backlog) < 0) {
			rc = -errno;
			close(fd);
			continue;
		}
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		getsockname(fd, (struct sockaddr *)&ss, &sl);
		*port_out = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
						     : ntohs(((struct sockaddr_in *)&ss)->sin_port);
		rc = fd;
		break;
	}
	freeaddrinfo(res);
	return rc;
}

int ing_grpc_listen_check(const char *addr, char *why, size_t whylen)
{
	char buf[256];
	const char *host, *port, *gai_why = NULL;
	int bound;

	if (!addr || grpc_split_hostport(addr, buf, sizeof(buf), &host, &port) < 0) {
		snprintf(why, whylen, "'%s' is not host:port or [v6]:port", addr ? addr : "");
		return -EINVAL;
	}
	if (!strcmp(port, "0"))
		return 0;   /* any free port: nothing to collide with */
	int fd = grpc_tcp_listen(host, port, 1, &bound, &gai_why);
	if (gai_why) {
		snprintf(why, whylen, "%s: %s", addr, gai_why);
		return -EINVAL;
	}
	if (fd < 0) {
		if (fd == -EADDRINUSE)
			snprintf(why, whylen, "%s: %s: another process listens there (ss -ltnp "
				 "'sport = :%s' names it): stop it, or choose another address", addr,
				 strerror(-fd), port);
		else if (fd == -EACCES)
			snprintf(why, whylen, "%s: %s: ports below 1024 need root or "
				 "CAP_NET_BIND_SERVICE", addr, strerror(-fd));
		else if (fd == -EADDRNOTAVAIL)
			snprintf(why, whylen, "%s: %s: no interface of this machine has that address",
				 addr, strerror(-fd));
		else
			snprintf(why, whylen, "%s: %s", addr, strerror(-fd));
		return fd;
	}
	close(fd);
	return 0;
}
