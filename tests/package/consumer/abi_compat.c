/* SPDX-License-Identifier: Apache-2.0 */
/*
 * abi_compat.c - libingest 1.x's ABI promises, checked from a downstream program built
 * against the installed header: abi_compat SERVER PREFIX (frame ids PREFIX-1, -2, -3)
 *  - ing_version() agrees with ING_VERSION_*; ing_strerror knows ack codes and -errno;
 *  - the log handler gets the library's lines, none reach stderr, default level WARN;
 *  - a caller built with an OLDER, smaller struct ing_producer_opts (only opts_size and
 *    server): ing_producer_opts_init_sz writes nothing past it, connect fills defaults;
 *  - a NEWER, larger struct: the unknown tail is zeroed by init, accepted when zero and
 *    refused when set; same for struct ing_frame_desc (-EOPNOTSUPP);
 *  - acks at a larger caller stride: every element at its place, the unknown tail zeroed,
 *    nothing written past the acks returned; a stride below the 1.0 struct: -EINVAL;
 *  - stats into a smaller struct: nothing written past it.
 * Prints one line per check, exits 0 when all hold.
 */
#include <ingest/producer.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;
#define CHECK(cond, ...)                                                  \
	do {                                                              \
		if (cond) {                                               \
			printf("ok: " __VA_ARGS__);                       \
		} else {                                                  \
			printf("FAILED: " __VA_ARGS__);                   \
			failures++;                                       \
		}                                                         \
		printf("\n");                                             \
	} while (0)

static unsigned lines_info, lines_warn;
static char last_comp[32];

static void on_log(void *ctx, enum ing_log_level level, const char *comp, const char *msg)
{
	(void)msg;
	*(int *)ctx += 1;
	if (level == ING_LOG_INFO)
		lines_info++;
	else if (level <= ING_LOG_WARN)
		lines_warn++;
	snprintf(last_comp, sizeof(last_comp), "%s", comp);
}

static int all_bytes(const void *p, size_t n, unsigned char v)
{
	const unsigned char *b = p;
	for (size_t i = 0; i < n; i++)
		if (b[i] != v)
			return 0;
	return 1;
}

/* send one frame and wait for its DURABLE ack at the caller's stride */
static int send_one(struct ing_producer *p, const char *id, const void *data, size_t len)
{
	struct ing_frame_desc d = { .frame_id = id, .wafer_id = "ABI-w", .data = data, .length = len };
	if (ing_producer_submit(p, &d))
		return -1;
	struct ing_ack a[2];
	for (int i = 0; i < 500; i++) {
		int n = ing_producer_poll(p, a, 2, 20);
		for (int k = 0; k < n; k++) {
			if (!a[k].ok)
				return -1;
			if (a[k].stage == ING_ACK_DURABLE)
				return 0;
		}
		if (n < 0)
			return -1;
	}
	return -1;
}

int main(int argc, char **argv)
{
	if (argc != 3)
		return 2;
	const char *server = argv[1];
	char id[3][64];
	for (int i = 0; i < 3; i++)
		snprintf(id[i], sizeof(id[i]), "%s-%d", argv[2], i + 1);
	static uint8_t data[64 * 1024];
	char err[256];
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i * 7);

	/* version, errors */
	CHECK(ing_version() == ING_VERSION_NUMBER && ing_version() / 10000 == ING_VERSION_MAJOR,
	      "ing_version() %u, header %d", ing_version(), ING_VERSION_NUMBER);
	char vs[32];
	snprintf(vs, sizeof(vs), "%d.%d.%d", ING_VERSION_MAJOR, ING_VERSION_MINOR, ING_VERSION_PATCH);
	CHECK(!strcmp(ing_version_string(), vs), "ing_version_string() %s", ing_version_string());
	CHECK(strstr(ing_strerror(ING_ERR_DUPLICATE_CONFLICT), "other bytes") != NULL,
	      "ing_strerror(ING_ERR_DUPLICATE_CONFLICT): %s", ing_strerror(ING_ERR_DUPLICATE_CONFLICT));
	CHECK(!strcmp(ing_strerror(-EAGAIN), "Resource temporarily unavailable"),
	      "ing_strerror(-EAGAIN): %s", ing_strerror(-EAGAIN));
	CHECK(strstr(ing_strerror(9999), "unknown") != NULL, "ing_strerror(9999): %s", ing_strerror(9999));

	/* logging: through the handler only; INFO lines only once asked for */
	int nlog = 0;
	ing_log_set_handler(on_log, &nlog);

	/* an older caller: its struct ends after server */
	struct old_opts {
		size_t opts_size;
		const char *server;
	};
	unsigned char obuf[sizeof(struct ing_producer_opts) + 64];
	memset(obuf, 0xa5, sizeof(obuf));
	struct ing_producer_opts *oo = (struct ing_producer_opts *)(void *)obuf;
	ing_producer_opts_init_sz(oo, sizeof(struct old_opts));
	CHECK(oo->opts_size == sizeof(struct old_opts) && oo->server == NULL &&
	      all_bytes(obuf + sizeof(struct old_opts), sizeof(obuf) - sizeof(struct old_opts), 0xa5),
	      "opts_init with an older, smaller struct writes nothing past its %zu bytes",
	      sizeof(struct old_opts));
	oo->server = server;
	memset(obuf + sizeof(struct old_opts), 0x00, sizeof(obuf) - sizeof(struct old_opts));
	memset(obuf + sizeof(struct old_opts), 0x7f, 8);   /* garbage the library must not read */
	struct ing_producer *p = ing_producer_connect(oo, err, sizeof(err));
	CHECK(p != NULL, "connect with the older struct (defaults for the rest): %s", p ? "connected" : err);
	CHECK(p && send_one(p, id[0], data, sizeof(data)) == 0, "a frame DURABLE through that connection");
	CHECK(lines_info == 0, "default log level WARN: no INFO line (%u warning lines)", lines_warn);
	ing_producer_close(p, 2000);

	/* a newer caller: a field this library does not know */
	struct new_opts {
		struct ing_producer_opts o;
		uint64_t future_option;
	} no;
	memset(&no, 0xa5, sizeof(no));
	ing_producer_opts_init_sz(&no.o, sizeof(no));
	CHECK(no.o.opts_size == sizeof(no) && no.future_option == 0 && no.o.connect_timeout_ms > 0,
	      "opts_init with a newer, larger struct: defaults, unknown tail zeroed");
	no.o.server = server;
	no.o.transport = ING_TRANSPORT_GRPC;
	ing_log_set_level(ING_LOG_INFO);
	p = ing_producer_connect(&no.o, err, sizeof(err));
	CHECK(p != NULL, "connect with the unknown tail zero: %s", p ? "connected" : err);
	CHECK(lines_info > 0 && !strcmp(last_comp, "producer"),
	      "ing_log_set_level(INFO): %u INFO lines to the handler (last from '%s')", lines_info, last_comp);
	ing_log_set_level(ING_LOG_WARN);

	/* acks at a larger stride */
	struct big_ack {
		struct ing_ack a;
		uint64_t future_field;
		uint32_t more;
	} acks[4];
	memset(acks, 0xa5, sizeof(acks));
	struct ing_frame_desc d = { .frame_id = id[1], .wafer_id = "ABI-w", .data = data, .length = 1000 };
	int rc = p ? ing_producer_submit(p, &d) : -1;
	int got = 0, durable = 0;
	for (int i = 0; p && !rc && !durable && i < 500; i++) {
		memset(acks, 0xa5, sizeof(acks));
		got = ing_producer_poll_sz(p, &acks[0].a, 4, sizeof(acks[0]), 20);
		for (int k = 0; k < got; k++)
			if (acks[k].a.ok && acks[k].a.stage == ING_ACK_DURABLE)
				durable = 1;
	}
	CHECK(durable && got >= 1 && got < 4 && !strcmp(acks[got - 1].a.frame_id, id[1]) &&
	      acks[got - 1].future_field == 0 && acks[got - 1].more == 0 &&
	      all_bytes(&acks[got], sizeof(acks[0]) * (size_t)(4 - got), 0xa5),
	      "poll at a %zu-byte stride: %d ack(s) in place, unknown fields zeroed, the rest untouched",
	      sizeof(acks[0]), got);
	CHECK(p && ing_producer_poll_sz(p, &acks[0].a, 4, 16, 0) == -EINVAL,
	      "poll with a stride below the 1.0 struct ing_ack: -EINVAL");

	/* a frame descriptor with a field this library does not know */
	struct new_desc {
		struct ing_frame_desc d;
		uint64_t future_field;
	} nd = { .d = { .frame_id = id[2], .wafer_id = "ABI-w", .data = data, .length = 1000 },
		 .future_field = 1 };
	CHECK(p && ing_producer_submit_sz(p, &nd.d, sizeof(nd)) == -EOPNOTSUPP, "submit with an unknown field set: -EOPNOTSUPP");
	nd.future_field = 0;
	CHECK(p && ing_producer_submit_sz(p, &nd.d, sizeof(nd)) == 0, "submit with the unknown field zero: accepted");

	/* stats into an older, smaller struct */
	struct {
		uint64_t submitted, received, durable;
		unsigned char guard[64];
	} ost;
	memset(&ost, 0xa5, sizeof(ost));
	ing_producer_get_stats_sz(p, (struct ing_producer_stats *)(void *)&ost, 3 * sizeof(uint64_t));
	CHECK(ost.submitted == 2 && all_bytes(ost.guard, sizeof(ost.guard), 0xa5),
	      "stats into a smaller struct: submitted %llu, nothing written past it",
	      (unsigned long long)ost.submitted);
	ing_producer_close(p, 5000);

	no.future_option = 1;
	p = ing_producer_connect(&no.o, err, sizeof(err));
	CHECK(p == NULL && strstr(err, "does not know") != NULL, "connect with an unknown option set refused: %s", err);
	ing_producer_close(p, 0);
	CHECK(lines_warn + lines_info == (unsigned)nlog, "every log line went to the handler (%d)", nlog);

	printf("%s\n", failures ? "abi_compat: FAILED" : "abi_compat: all ABI checks hold");
	return failures ? 1 : 0;
}
