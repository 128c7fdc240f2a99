/* SPDX-License-Identifier: Apache-2.0 */
/*
 * metrics.c - the /metrics HTTP/1.1 responder and the exposition-format helpers. A scrape
 * is one short connection: read the request head (bounded), render the page, write it
 * without blocking (EPOLLOUT), close. A deadline timer bounds every connection.
 */
#include "control/net/metrics.h"
#include "control/net/grpc_internal.h"   /* grpc_split_hostport, grpc_tcp_listen */
#include "common/clock.h"
#include "common/log.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <dirent.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#define COMP "metrics"
#define REQ_MAX 4096u
#define CONN_NS 10000000000ull

struct mconn {
	struct ing_metrics_srv *s;
	int fd;
	bool writing;
	struct ing_timer timer;
	char req[REQ_MAX + 1];
	size_t rlen;
	char *out;                 /* head + body, malloc'ed */
	size_t olen, off;
	struct mconn *next, *prev;
};

struct ing_metrics_srv {
	struct ing_loop *loop;
	int lfd;
	int port;
	ing_metrics_render_fn render;
	ing_metrics_ready_fn ready;
	void *arg;
	struct mconn *conns;
	unsigned nconns;
	uint64_t scrapes;
};

/* ---------------------------------------------------------------- text helpers */

void ing_mtext_printf(struct ing_mtext *t, const char *fmt, ...)
{
	va_list ap;
	if (t->err)
		return;
	for (;;) {
		size_t room = t->cap - t->len;
		va_start(ap, fmt);
		int n = vsnprintf(t->buf ? t->buf + t->len : NULL, room, fmt, ap);
		va_end(ap);
		if (n < 0) {
			t->err = -EINVAL;
			return;
		}
		if ((size_t)n < room) {
			t->len += (size_t)n;
			return;
		}
		size_t cap = t->cap ? t->cap * 2 : 16384;
		while (cap - t->len <= (size_t)n)
			cap *= 2;
		char *nb = realloc(t->buf, cap);
		if (!nb) {
			t->err = -ENOMEM;
			return;
		}
		t->buf = nb;
		t->cap = cap;
	}
}

void ing_mtext_family(struct ing_mtext *t, const char *name, const char *type, const char *help)
{
	ing_mtext_printf(t, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

void ing_mtext_sample(struct ing_mtext *t, const char *name, const char *labels, double v)
{
	ing_mtext_printf(t, "%s%s%s%s %.9g\n", name, *labels ? "{" : "", labels, *labels ? "}" : "", v);
}

void ing_mtext_u64(struct ing_mtext *t, const char *name, const char *labels, uint64_t v)
{
	ing_mtext_printf(t, "%s%s%s%s %llu\n", name, *labels ? "{" : "", labels, *labels ? "}" : "",
			 (unsigned long long)v);
}

void ing_mtext_rows(struct ing_mtext *t, const struct ing_mtext_col *cols, size_t ncols,
		    const void *rows, size_t row_size, size_t nrows, size_t label_off)
{
	for (size_t k = 0; k < ncols; k++) {
		const struct ing_mtext_col *c = &cols[k];
		ing_mtext_family(t, c->name, c->type, c->help);
		for (size_t i = 0; i < nrows; i++) {
			const char *row = (const char *)rows + i * row_size;
			if (c->dbl) {
				double v;
				memcpy(&v, row + c->off, sizeof(v));
				ing_mtext_sample(t, c->name, row + label_off, v);
			} else {
				uint64_t v;
				memcpy(&v, row + c->off, sizeof(v));
				ing_mtext_u64(t, c->name, row + label_off, v);
			}
		}
	}
}

void ing_mtext_hist(struct ing_mtext *t, const char *name, const char *labels,
		    const struct ing_hist *h)
{
	const char *sep = *labels ? "," : "";
	uint64_t cum = 0;
	for (unsigned i = 0; i < ING_HIST_PROM_NB; i++) {
		cum += h->prom[i];
		ing_mtext_printf(t, "%s_bucket{%s%sle=\"%.9g\"} %llu\n", name, labels, sep,
				 (double)ing_hist_prom_le_ns[i] / 1e9, (unsigned long long)cum);
	}
	cum += h->prom[ING_HIST_PROM_NB];
	ing_mtext_printf(t, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", name, labels, sep,
			 (unsigned long long)cum);
	ing_mtext_printf(t, "%s_sum%s%s%s %.9g\n", name, *labels ? "{" : "", labels,
			 *labels ? "}" : "", (double)h->sum / 1e9);
	ing_mtext_printf(t, "%s_count%s%s%s %llu\n", name, *labels ? "{" : "", labels,
			 *labels ? "}" : "", (unsigned long long)cum);
}

/*
 * process_* as Prometheus' client libraries name them. /proc/self/stat fields (after the
 * command in parentheses): 14 utime, 15 stime (clock ticks), 22 starttime (ticks after
 * boot), 23 vsize (bytes), 24 rss (pages); boot time from /proc/stat's btime.
 */
void ing_mtext_process(struct ing_mtext *t)
{
	char buf[1024];
	unsigned long long utime = 0, stime = 0, start = 0, vsize = 0, btime = 0;
	long long rss = 0;
	long tck = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
	bool have_stat = false;
	FILE *f = fopen("/proc/self/stat", "re");

	if (f) {
		size_t n = fread(buf, 1, sizeof(buf) - 1, f);
		buf[n] = 0;
		fclose(f);
		const char *p = strrchr(buf, ')');
		/* fields 3..24 after ") " */
		have_stat = p && sscanf(p + 2, "%*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %llu %llu "
					"%*s %*s %*s %*s %*s %*s %llu %llu %lld", &utime, &stime,
					&start, &vsize, &rss) == 5;
	}
	f = fopen("/proc/stat", "re");
	while (f && fgets(buf, sizeof(buf), f))
		if (sscanf(buf, "btime %llu", &btime) == 1)
			break;
	if (f)
		fclose(f);
	if (have_stat && tck > 0) {
		ing_mtext_family(t, "process_cpu_seconds_total", "counter",
				 "Total user and system CPU time spent in seconds.");
		ing_mtext_sample(t, "process_cpu_seconds_total", "", (double)(utime + stime) / (double)tck);
		ing_mtext_family(t, "process_resident_memory_bytes", "gauge", "Resident memory size in bytes.");
		ing_mtext_u64(t, "process_resident_memory_bytes", "", (uint64_t)(rss > 0 ? rss : 0) * (uint64_t)page);
		ing_mtext_family(t, "process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.");
		ing_mtext_u64(t, "process_virtual_memory_bytes", "", vsize);
		if (btime) {
			ing_mtext_family(t, "process_start_time_seconds", "gauge",
					 "Start time of the process since unix epoch in seconds.");
			ing_mtext_printf(t, "process_start_time_seconds %.2f\n",
					 (double)btime + (double)start / (double)tck);
		}
	}
	DIR *d = opendir("/proc/self/fd");
	if (d) {
		uint64_t n = 0;
		struct dirent *e;
		while ((e = readdir(d)))
			n += e->d_name[0] != '.';
		closedir(d);
		ing_mtext_family(t, "process_open_fds", "gauge", "Number of open file descriptors.");
		ing_mtext_u64(t, "process_open_fds", "", n > 0 ? n - 1 : 0);   /* not opendir's own */
	}
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		ing_mtext_family(t, "process_max_fds", "gauge", "Maximum number of open file descriptors.");
		ing_mtext_u64(t, "process_max_fds", "", rl.rlim_cur == RLIM_INFINITY ? UINT64_MAX : rl.rlim_cur);
	}
}

/* ---------------------------------------------------------------- connections */

static void conn_close(struct mconn *c)
{
	struct ing_metrics_srv *s = c->s;
	ing_timer_cancel(s->loop, &c->timer);
	ing_loop_del_fd(s->loop, c->fd);
	close(c->fd);
	if (c->prev)
		c->prev->next = c->next;
	else
		s->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	s->nconns--;
	free(c->out);
	free(c);
}

static void conn_timeout(void *arg)
{
	conn_close(arg);
}

/* Queue a whole response; body may be NULL (HEAD, or none). */
static void respond(struct mconn *c, const char *status, const char *ctype, const char *body,
		    size_t blen, bool head_only)
{
	char head[256];
	int hn = snprintf(head, sizeof(head),
			  "HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
			  "Connection: close\r\n\r\n", status, ctype, blen);
	size_t total = (size_t)hn + (head_only ? 0 : blen);
	c->out = malloc(total ? total : 1);
	if (!c->out) {
		conn_close(c);
		return;
	}
	memcpy(c->out, head, (size_t)hn);
	if (!head_only && blen)
		memcpy(c->out + hn, body, blen);
	c->olen = total;
	c->off = 0;
	c->writing = true;
	(void)ing_loop_mod_fd(c->s->loop, c->fd, EPOLLOUT);
}

/* /healthz: the loop answered, so it turns; /readyz: the node's checks (503 when one fails) */
static void health_request(struct mconn *c, bool head, bool ready)
{
	static const char plain[] = "text/plain; charset=utf-8";
	struct ing_mtext t = { 0 };
	bool ok = true;

	if (ready && c->s->ready)
		ok = c->s->ready(c->s->arg, &t);
	else
		ing_mtext_printf(&t, "ok: control loop turning\n");
	if (t.err) {
		static const char m[] = "out of memory\n";
		respond(c, "500 Internal Server Error", plain, m, sizeof(m) - 1, head);
	} else {
		respond(c, ok ? "200 OK" : "503 Service Unavailable", plain, t.buf, t.len, head);
	}
	free(t.buf);
}

static void handle_request(struct mconn *c)
{
	static const char plain[] = "text/plain; charset=utf-8";
	char method[16], target[256], version[16];
	char *eol = strstr(c->req, "\r\n");
	if (!eol || sscanf(c->req, "%15s %255s %15s", method, target, version) != 3 ||
	    strncmp(version, "HTTP/1.", 7) != 0) {
		static const char m[] = "bad request\n";
		respond(c, "400 Bad Request", plain, m, sizeof(m) - 1, false);
		return;
	}
	bool head = !strcmp(method, "HEAD");
	if (strcmp(method, "GET") && !head) {
		static const char m[] = "only GET and HEAD\n";
		respond(c, "405 Method Not Allowed", plain, m, sizeof(m) - 1, false);
		return;
	}
	target[strcspn(target, "?")] = 0;
	if (!strcmp(target, "/healthz") || !strcmp(target, "/readyz")) {
		health_request(c, head, !strcmp(target, "/readyz"));
		return;
	}
	if (strcmp(target, "/metrics")) {
		static const char m[] = "not found: the metrics are at /metrics (health: /healthz, /readyz)\n";
		respond(c, "404 Not Found", plain, m, sizeof(m) - 1, head);
		return;
	}
	struct ing_mtext t = { 0 };
	c->s->scrapes++;
	c->s->render(c->s->arg, &t);
	ing_mtext_process(&t);
	ing_mtext_family(&t, "ingest_metrics_scrapes_total", "counter",
			 "Scrapes of this endpoint served, this one included.");
	ing_mtext_u64(&t, "ingest_metrics_scrapes_total", "", c->s->scrapes);
	if (t.err) {
		static const char m[] = "out of memory rendering the metrics\n";
		ING_LOG_RL(ING_LOG_ERR, COMP, "rendering /metrics: %s", strerror(-t.err));
		respond(c, "500 Internal Server Error", plain, m, sizeof(m) - 1, head);
	} else {
		respond(c, "200 OK", "text/plain; version=0.0.4; charset=utf-8", t.buf, t.len, head);
	}
	free(t.buf);
}

static void conn_event(void *arg, uint32_t events)
{
	struct mconn *c = arg;

	if (c->writing) {
		while (c->off < c->olen) {
			ssize_t n = send(c->fd, c->out + c->off, c->olen - c->off, MSG_NOSIGNAL);
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
				return;
			if (n <= 0) {
				conn_close(c);
				return;
			}
			c->off += (size_t)n;
		}
		/* whatever the client still sent (a body, pipelined requests) is read and
		 * dropped, bounded: closing with unread input would send a RST that may
		 * destroy the response in the client's receive queue */
		shutdown(c->fd, SHUT_WR);
		for (int i = 0; i < 16 && recv(c->fd, c->req, REQ_MAX, MSG_DONTWAIT) > 0; i++)
			;
		conn_close(c);
		return;
	}
	if (events & (EPOLLERR | EPOLLHUP) && !(events & EPOLLIN)) {
		conn_close(c);
		return;
	}
	for (;;) {
		if (c->rlen >= REQ_MAX) {
			static const char m[] = "request head too large\n";
			respond(c, "400 Bad Request", "text/plain; charset=utf-8", m, sizeof(m) - 1, false);
			return;
		}
		ssize_t n = recv(c->fd, c->req + c->rlen, REQ_MAX - c->rlen, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n <= 0) {   /* closed before a whole request head, or an error */
			conn_close(c);
			return;
		}
		c->rlen += (size_t)n;
		c->req[c->rlen] = 0;
		if (strstr(c->req, "\r\n\r\n") || strstr(c->req, "\n\n")) {
			handle_request(c);
			return;
		}
	}
}

static void listen_event(void *arg, uint32_t events)
{
	struct ing_metrics_srv *s = arg;
	(void)events;

	for (;;) {
		int fd = accept4(s->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
				ING_LOG_RL(ING_LOG_WARN, COMP, "accept: %s", strerror(errno));
			return;
		}
		if (s->nconns >= ING_METRICS_MAX_CONNS) {
			ING_LOG_RL(ING_LOG_WARN, COMP, "%u scrapes open already: connection refused",
				   s->nconns);
			close(fd);
			continue;
		}
		struct mconn *c = calloc(1, sizeof(*c));
		if (!c) {
			close(fd);
			continue;
		}
		c->s = s;
		c->fd = fd;
		if (ing_loop_add_fd(s->loop, fd, EPOLLIN, conn_event, c) != 0) {
			close(fd);
			free(c);
			continue;
		}
		ing_timer_init(&c->timer, conn_timeout, c);
		ing_timer_arm(s->loop, &c->timer, ing_now_ns() + CONN_NS);
		c->next = s->conns;
		if (s->conns)
			s->conns->prev = c;
		s->conns = c;
		s->nconns++;
	}
}

struct ing_metrics_srv *ing_metrics_srv_create(struct ing_loop *loop, const char *addr,
					       ing_metrics_render_fn render, void *arg)
{
	char buf[256];
	const char *host, *port;
	struct ing_metrics_srv *s;

	if (!addr || grpc_split_hostport(addr, buf, sizeof(buf), &host, &port) < 0) {
		ING_ERR(COMP, "bad metrics listen address '%s' (host:port or [v6]:port)",
			addr ? addr : "(null)");
		return NULL;
	}
	s = calloc(1, sizeof(*s));
	if (!s) {
		ING_ERR(COMP, "out of memory");
		return NULL;
	}
	s->loop = loop;
	s->lfd = -1;
	s->render = render;
	s->arg = arg;
	const char *gai_why = NULL;
	int rc = grpc_tcp_listen(host, port, 64, &s->port, &gai_why);
	if (gai_why) {
		ING_ERR(COMP, "metrics listen address '%s': %s", addr, gai_why);
		free(s);
		return NULL;
	}
	if (rc >= 0) {
		s->lfd = rc;
		rc = 0;
	}
	if (rc == 0)
		rc = ing_loop_add_fd(loop, s->lfd, EPOLLIN, listen_event, s);
	if (rc) {
		ING_ERR(COMP, "cannot serve metrics on %s: %s", addr, strerror(-rc));
		ing_metrics_srv_destroy(s);
		return NULL;
	}
	ING_INFO(COMP, "Prometheus metrics at http://%s/metrics (port %d)", addr, s->port);
	return s;
}

void ing_metrics_srv_set_ready(struct ing_metrics_srv *s, ing_metrics_ready_fn fn)
{
	if (s)
		s->ready = fn;
}

int ing_metrics_srv_port(const struct ing_metrics_srv *s)
{
	return s ? s->port : -1;
}

void ing_metrics_srv_destroy(struct ing_metrics_srv *s)
{
	if (!s)
		return;
	while (s->conns)
		conn_close(s->conns);
	if (s->lfd >= 0) {
		ing_loop_del_fd(s->loop, s->lfd);
		close(s->lfd);
	}
	free(s);
}
