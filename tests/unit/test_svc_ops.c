/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_svc_ops.c - control/service/counters.c and obs/ops.c: failures counted by code, the per-peer table's
 * bounded cardinality (16 addresses, the rest under "other", an idle entry taken over),
 * the /metrics lines it renders, and the log contexts of frames, calls and sessions.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "control/service/counters.h"
#include "control/service/obs/obs.h"
#include "control/net/metrics.h"
#include "common/clock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct ing_svc *svc_new(void)
{
	struct ing_svc *s = calloc(1, sizeof(*s));
	assert_non_null(s);
	return s;
}

static void peer_set(struct svc_peer *p, unsigned i)
{
	memset(p, 0, sizeof(*p));
	snprintf(p->ip, sizeof(p->ip), "10.0.0.%u", i);
}

static void test_failures_by_code(void **state)
{
	(void)state;
	struct ing_svc *s = svc_new();
	struct svc_peer p;
	peer_set(&p, 1);
	svc_ops_frame(s, &p, 0, 1000);
	svc_ops_frame(s, &p, ING_E_CRC_MISMATCH, 0);
	svc_ops_frame(s, &p, ING_E_CRC_MISMATCH, 0);
	svc_ops_frame(s, NULL, ING_E_BUSY, 0);
	svc_ops_frame(s, &p, 99, 0);   /* not a code: counted as internal */
	assert_int_equal(s->ops.failures[ING_E_CRC_MISMATCH], 2);
	assert_int_equal(s->ops.failures[ING_E_BUSY], 1);
	assert_int_equal(s->ops.failures[ING_E_INTERNAL], 1);
	assert_string_equal(s->ops.peer[0].ip, "10.0.0.1");
	assert_int_equal(s->ops.peer[0].durable, 1);
	assert_int_equal(s->ops.peer[0].bytes, 1000);
	assert_int_equal(s->ops.peer[0].failed, 3);
	assert_int_equal(s->ops.other.failed, 1);   /* no peer entry: "other" */

	struct ing_mtext t = { 0 };
	svc_ops_metrics(s, &t);
	assert_int_equal(t.err, 0);
	assert_non_null(strstr(t.buf, "ingest_frame_failures_total{code=\"crc_mismatch\"} 2\n"));
	assert_non_null(strstr(t.buf, "ingest_frame_failures_total{code=\"busy\"} 1\n"));
	assert_non_null(strstr(t.buf, "ingest_frame_failures_total{code=\"shutting_down\"} 0\n"));
	assert_null(strstr(t.buf, "code=\"none\""));
	assert_non_null(strstr(t.buf, "ingest_connections 0\n"));
	assert_non_null(strstr(t.buf, "ingest_peer_frames_total{peer=\"10.0.0.1\",result=\"durable\"} 1\n"));
	assert_non_null(strstr(t.buf, "ingest_peer_frames_total{peer=\"10.0.0.1\",result=\"failed\"} 3\n"));
	assert_non_null(strstr(t.buf, "ingest_peer_bytes_total{peer=\"10.0.0.1\"} 1000\n"));
	assert_non_null(strstr(t.buf, "ingest_peer_frames_total{peer=\"other\",result=\"failed\"} 1\n"));
	free(t.buf);
	free(s);
}

static unsigned count_lines(const char *buf, const char *prefix)
{
	unsigned n = 0;
	for (const char *p = buf; (p = strstr(p, prefix)); p++)
		if (p == buf || p[-1] == '\n')
			n++;
	return n;
}

static void test_bounded_peers(void **state)
{
	(void)state;
	struct ing_svc *s = svc_new();
	struct svc_peer p;
	/* 40 addresses: the first 16 get series, the other 24 count under "other" */
	for (unsigned i = 1; i <= 40; i++) {
		peer_set(&p, i);
		svc_ops_frame(s, &p, 0, 10);
	}
	for (unsigned i = 0; i < SVC_OPS_PEERS; i++) {
		char want[48];
		snprintf(want, sizeof(want), "10.0.0.%u", i + 1);
		assert_string_equal(s->ops.peer[i].ip, want);
		assert_int_equal(s->ops.peer[i].durable, 1);
	}
	assert_int_equal(s->ops.other.durable, 40 - SVC_OPS_PEERS);
	assert_int_equal(s->ops.other.bytes, 10 * (40 - SVC_OPS_PEERS));

	struct ing_mtext t = { 0 };
	svc_ops_metrics(s, &t);
	/* 16 peers + other: 17 series per family, whatever the number of addresses */
	assert_int_equal(count_lines(t.buf, "ingest_peer_bytes_total{"), SVC_OPS_PEERS + 1);
	assert_int_equal(count_lines(t.buf, "ingest_peer_frames_total{"), 2 * (SVC_OPS_PEERS + 1));
	assert_int_equal(count_lines(t.buf, "ingest_peer_sessions{"), SVC_OPS_PEERS + 1);
	free(t.buf);

	/* an entry idle for 10 minutes is taken by the next new address; its series end */
	s->ops.peer[3].last_ns = ing_now_ns() - SVC_OPS_PEER_IDLE_NS - 1;
	peer_set(&p, 41);
	svc_ops_frame(s, &p, 0, 7);
	assert_string_equal(s->ops.peer[3].ip, "10.0.0.41");
	assert_int_equal(s->ops.peer[3].durable, 1);
	assert_int_equal(s->ops.peer[3].bytes, 7);
	assert_int_equal(s->ops.peer_takeovers, 1);
	/* no other idle entry: the next newcomer is "other" again */
	peer_set(&p, 42);
	svc_ops_frame(s, &p, 0, 7);
	assert_int_equal(s->ops.other.durable, 40 - SVC_OPS_PEERS + 1);
	memset(&t, 0, sizeof(t));
	svc_ops_metrics(s, &t);
	assert_null(strstr(t.buf, "peer=\"10.0.0.4\""));
	assert_non_null(strstr(t.buf, "ingest_peer_series_takeovers_total 1\n"));
	free(t.buf);
	free(s);
}

static void test_log_contexts(void **state)
{
	(void)state;
	struct svc_peer p;
	struct svc_session ss = { .id = 77 };
	struct ing_frame f;
	struct svc_frame e = { 0 };
	peer_set(&p, 9);
	ss.peer = &p;
	memset(&f, 0, sizeof(f));
	snprintf(f.wafer_id, sizeof(f.wafer_id), "w-1");
	snprintf(f.frame_id, sizeof(f.frame_id), "f-2");
	e.f = &f;
	e.sess = &ss;
	e.peer = &p;
	struct ing_log_ctx c = svc_log_frame(&e);   /* no call: the peer's address */
	assert_string_equal(c.peer, "10.0.0.9");
	assert_int_equal(c.session, 77);
	assert_string_equal(c.wafer, "w-1");
	assert_string_equal(c.frame, "f-2");
	f.wafer_id[0] = 0;   /* not known yet: no field */
	c = svc_log_frame(&e);
	assert_null(c.wafer);
	c = svc_log_session(&ss);
	assert_string_equal(c.peer, "10.0.0.9");
	assert_int_equal(c.session, 77);
	assert_null(c.frame);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_failures_by_code),
		cmocka_unit_test(test_bounded_peers),
		cmocka_unit_test(test_log_contexts),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
