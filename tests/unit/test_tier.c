/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_tier.c - dataplane/tier/tier.c's threads, without a store: what the tier thread
 * publishes and what crosses its mailbox, read and posted from other threads as the control
 * thread does (label tsan: ThreadSanitizer checks every access of it).
 *  - the sequence lock of storeError: a writer changing the string as fast as it can and
 *    readers that must only ever see one of the strings written, whole;
 *  - a running tier thread beside a reader of its Stats and of ing_tier_refusing: the store
 *    refuses connections (a port bound and never listening: no network, nothing answers),
 *    frames are catalogued and finished (ING_EV_TIER_WAKE): the Stats show the store's
 *    state and cause, the high-water mark reached, and the frames in the backlog, these
 *    only through that wake-up (nothing else makes the thread count its outbox); a GetFrame
 *    read of a local copy crosses both mailboxes and comes back byte for byte;
 *  - stop: ing_tier_stop wakes a thread asleep on its mailbox (its 60 s sleep), it does
 *    not wait for the sleep to end.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/clock.h"
#include "common/crc32c.h"
#include "dataplane/dataplane.h"
#include "dataplane/store/store.h"
#include "dataplane/tier/tier.h"
#include "dataplane/tier/tier_internal.h"

#define CATALOG_DIR_TEMPLATE "/tmp/ing_test_tier.XXXXXX"
#include "test_catalog_dir.h"

#define MS 1000000ull

/* ThreadSanitizer tree (ING_TEST_TIME_SCALE=10): caps for a hang stretched, loops shortened */
static unsigned scale(void)
{
	const char *e = getenv("ING_TEST_TIME_SCALE");
	long k = e ? strtol(e, NULL, 10) : 1;
	return k > 1 ? (unsigned)k : 1u;
}

/* ---------------------------------------------------------------- the sequence lock */

static struct tier_seqstr seq_str;
static char strs[3][TIER_SEQSTR_BYTES];
static atomic_bool seq_done;
struct seq_reader {
	pthread_t th;
	unsigned reads, whole, torn;
	char bad[80];
};

static void *seq_writer(void *arg)
{
	unsigned n = *(unsigned *)arg;
	for (unsigned i = 0; i < n; i++) {
		tier_seqstr_write(&seq_str, strs[i % 3]);
		if (i % 64 == 0)
			sched_yield();   /* readers get a whole read in now and then */
	}
	atomic_store(&seq_done, true);
	return NULL;
}

static void *seq_reader(void *arg)
{
	struct seq_reader *r = arg;
	char got[TIER_SEQSTR_BYTES];
	while (!atomic_load(&seq_done)) {
		bool ok = tier_seqstr_read(&seq_str, got);
		r->reads++;
		if (!ok) {
			if (got[0] && !r->torn++)
				snprintf(r->bad, sizeof(r->bad), "a failed read returned '%.40s'", got);
			continue;
		}
		if (!got[0] || !strcmp(got, strs[0]) || !strcmp(got, strs[1]) || !strcmp(got, strs[2])) {
			r->whole++;
		} else if (!r->torn++) {
			snprintf(r->bad, sizeof(r->bad), "torn: %zu bytes, '%.20s...%.20s'", strlen(got), got,
				 got + (strlen(got) > 20 ? strlen(got) - 20 : 0));
		}
	}
	return NULL;
}

static void seqlock_never_torn(void **state)
{
	(void)state;
	/* three strings of other lengths and bytes: a mix of two is none of them */
	memset(strs[0], 'a', TIER_SEQSTR_BYTES - 1);
	memset(strs[1], 'b', 10);
	memset(strs[2], 'c', 700);
	unsigned n = 200000 / scale();
	struct seq_reader rd[2];
	pthread_t w;
	memset(rd, 0, sizeof(rd));
	atomic_store(&seq_done, false);
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&rd[i].th, NULL, seq_reader, &rd[i]), 0);
	assert_int_equal(pthread_create(&w, NULL, seq_writer, &n), 0);
	pthread_join(w, NULL);
	for (int i = 0; i < 2; i++) {
		pthread_join(rd[i].th, NULL);
		print_message("reader %d: %u reads, %u whole, %u torn %s\n", i, rd[i].reads, rd[i].whole,
			      rd[i].torn, rd[i].bad);
		assert_int_equal(rd[i].torn, 0);
	}
	/* the writer is done: a read now is the last string, whole */
	char got[TIER_SEQSTR_BYTES];
	assert_true(tier_seqstr_read(&seq_str, got));
	assert_string_equal(got, strs[(n - 1) % 3]);
	/* a string longer than the words is cut, never overruns them */
	char big[TIER_SEQSTR_BYTES + 100];
	memset(big, 'z', sizeof(big) - 1);
	big[sizeof(big) - 1] = 0;
	tier_seqstr_write(&seq_str, big);
	assert_true(tier_seqstr_read(&seq_str, got));
	assert_int_equal(strlen(got), TIER_SEQSTR_BYTES - 1);
}

/* ---------------------------------------------------------------- the tier thread */

#define NFRAMES 8u
#define FRAME_LEN (16u << 10)
#define MARK (64u << 10)

/* a frame file of FRAME_LEN bytes under data, its row as persistence writes it */
static struct ing_catalog_row stored(const char *data, unsigned i, uint8_t *bytes)
{
	struct ing_catalog_row r;
	char path[1200], wdir[1200];
	memset(&r, 0, sizeof(r));
	snprintf(r.wafer_id, sizeof(r.wafer_id), "W");
	snprintf(r.frame_id, sizeof(r.frame_id), "f%u", i);
	for (unsigned k = 0; k < FRAME_LEN; k++)
		bytes[k] = (uint8_t)(k * 31u + i * 7u);
	assert_int_equal(ing_store_rel_path(r.path, sizeof(r.path), r.wafer_id, r.frame_id), 0);
	snprintf(wdir, sizeof(wdir), "%s/frames/W", data);
	assert_int_equal(ing_store_mkdirs(wdir, 0755), 0);
	snprintf(path, sizeof(path), "%s/%s", data, r.path);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, bytes, FRAME_LEN), (ssize_t)FRAME_LEN);
	close(fd);
	r.length = FRAME_LEN;
	r.crc32c = ing_crc32c(0, bytes, FRAME_LEN);
	r.received_ns = r.durable_ns = ing_wall_ns();
	return r;
}

/* a TCP port on 127.0.0.1 that refuses connections while fd stays open (bound, no listen) */
static int refusing_port(int *fd)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof(a);
	*fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(*fd >= 0);
	assert_int_equal(bind(*fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(getsockname(*fd, (struct sockaddr *)&a, &al), 0);
	return ntohs(a.sin_port);
}

/* The control side's other reader: Stats and the admission check, as fast as it can. */
struct stats_reader {
	struct ing_tier *t;
	pthread_t th;
	atomic_bool stop;
	unsigned reads, refusing_seen;
	_Atomic uint64_t max_local, max_backlog;   /* the most it has seen */
	char bad[200];
};

static void *stats_reader(void *arg)
{
	struct stats_reader *r = arg;
	struct ing_tier_stats st;
	char why[400];
	while (!atomic_load(&r->stop)) {
		ing_tier_get_stats(r->t, &st);
		r->reads++;
		size_t el = strnlen(st.store_error, sizeof(st.store_error));
		if (!r->bad[0] && el == sizeof(st.store_error))
			snprintf(r->bad, sizeof(r->bad), "storeError not terminated");
		else if (!r->bad[0] && el && strncmp(st.store_error, "cannot reach the object store ", 30))
			snprintf(r->bad, sizeof(r->bad), "storeError '%.150s'", st.store_error);
		else if (!r->bad[0] && st.store_state != ING_TIER_STORE_UNKNOWN &&
			 st.store_state != ING_TIER_STORE_UNREACHABLE)
			snprintf(r->bad, sizeof(r->bad), "store state %d", (int)st.store_state);
		else if (!r->bad[0] && (st.frames_local < atomic_load(&r->max_local) ||
					st.backlog_frames < atomic_load(&r->max_backlog)))
			snprintf(r->bad, sizeof(r->bad), "counts went back: local %" PRIu64 " after %" PRIu64
				 ", backlog %" PRIu64 " after %" PRIu64, st.frames_local,
				 atomic_load(&r->max_local), st.backlog_frames, atomic_load(&r->max_backlog));
		if (st.frames_local > atomic_load(&r->max_local))
			atomic_store(&r->max_local, st.frames_local);
		if (st.backlog_frames > atomic_load(&r->max_backlog))
			atomic_store(&r->max_backlog, st.backlog_frames);
		r->refusing_seen += ing_tier_refusing(r->t, 0, why, sizeof(why));
	}
	return NULL;
}

/* r->done: the call the tier thread posts to control's mailbox when it hands a read back */
static _Atomic(void *) read_done_with;
static void read_done(void *r, uint32_t val)
{
	(void)val;
	atomic_store(&read_done_with, r);
}

static void thread_publishes_and_wakes(void **state)
{
	(void)state;
	char data[128], cat[160], why[200];
	static uint8_t bytes[NFRAMES][FRAME_LEN];
	snprintf(data, sizeof(data), "%s/stats", dir);
	snprintf(cat, sizeof(cat), "%s/catalog.db", data);
	assert_int_equal(ing_store_mkdirs(data, 0755), 0);
	struct ing_catalog *c = ing_catalog_open(cat);
	assert_non_null(c);

	int pfd, port = refusing_port(&pfd);
	struct ing_s3 s3;
	char url[80];
	ing_s3_init(&s3);
	snprintf(url, sizeof(url), "s3://127.0.0.1:%d/frames", port);
	assert_int_equal(ing_s3_parse_url(&s3, url, why, sizeof(why)), 0);
	snprintf(s3.access_key, sizeof(s3.access_key), "TESTKEY");
	snprintf(s3.secret_key, sizeof(s3.secret_key), "test-secret");
	struct ing_mbox *ctl = ing_mbox_create("ctl", 64);
	assert_non_null(ctl);
	struct ing_tier_opts o;
	ing_tier_opts_init(&o);
	o.data_dir = data;
	o.s3 = &s3;
	o.high_water_bytes = MARK;
	o.ctl = ctl;
	struct ing_tier *t = ing_tier_start(&o);
	assert_non_null(t);

	struct stats_reader rd = { .t = t };
	assert_int_equal(pthread_create(&rd.th, NULL, stats_reader, &rd), 0);
	/* frames become DURABLE (catalog row, the outbox's trigger in the same transaction) and
	 * control finishes each: the tier is woken by its mailbox, once however many */
	for (unsigned i = 0; i < NFRAMES; i++) {
		struct ing_catalog_row r = stored(data, i, bytes[i]);
		assert_int_equal(ing_catalog_insert(c, &r, 1), 0);
		ing_tier_frame_finished(t, FRAME_LEN, false);   /* rows inserted here: the census has them */
	}
	/* only the wake-up makes the thread count its outbox again (the probe of a refusing
	 * store does not, nor the mark's measure once a second): a cap for a hang, not a time
	 * to meet */
	struct ing_tier_stats st;
	uint64_t end = ing_now_ns() + 60000ull * scale() * MS;
	for (;;) {
		ing_tier_get_stats(t, &st);
		if (st.backlog_frames == NFRAMES && st.frames_local == NFRAMES && st.refusing &&
		    st.store_state == ING_TIER_STORE_UNREACHABLE && st.store_error[0])
			break;
		if (ing_now_ns() > end)
			fail_msg("Stats after %u frames: backlog %" PRIu64 ", local %" PRIu64 ", refusing %d, "
				 "state %d, '%s'", NFRAMES, st.backlog_frames, st.frames_local, st.refusing,
				 (int)st.store_state, st.store_error);
		usleep(10000);
	}
	print_message("Stats: %s (%s): %s\n", ing_tier_store_state_name(st.store_state), st.store_cause,
		      st.store_error);
	assert_string_equal(st.store_cause, "unreachable");
	assert_true(st.local_bytes == NFRAMES * FRAME_LEN && st.backlog_bytes == NFRAMES * FRAME_LEN);
	assert_true(st.high_water_bytes == MARK && st.census_done && st.uploaded_frames == 0);
	assert_true(ing_tier_refusing(t, 0, why, sizeof(why)));
	assert_non_null(strstr(why, "local frames at --local-high-water"));

	/* a GetFrame read: control's read crosses to the tier's mailbox and back to control's */
	struct ing_tier_read *r = ing_tier_read_get(t);
	assert_non_null(r);
	snprintf(r->wafer_id, sizeof(r->wafer_id), "W");
	snprintf(r->frame_id, sizeof(r->frame_id), "f3");
	r->want = ING_TIER_FROM_ANY;
	r->done = read_done;
	atomic_store(&read_done_with, NULL);
	assert_int_equal(ing_tier_read_submit(t, r), 0);
	struct ing_msg m;
	unsigned got = 0;
	end = ing_now_ns() + 60000ull * scale() * MS;
	while ((got = ing_mbox_pop(ctl, &m, 1)) == 0 && ing_now_ns() < end)
		(void)ing_mbox_wait(ctl, 1000);
	assert_int_equal(got, 1);
	assert_int_equal(m.kind, ING_MSG_CALL);   /* the tier hands r back as a call of r->done */
	m.fn(m.arg, m.val);
	assert_ptr_equal(atomic_load(&read_done_with), r);
	assert_int_equal(r->status, 0);
	assert_true(r->from == ING_TIER_FROM_LOCAL && r->last && r->n == FRAME_LEN && r->offset == 0);
	assert_memory_equal(r->buf, bytes[3], FRAME_LEN);
	ing_tier_read_put(t, r);

	/* the reader sees what this thread saw too (before it is stopped: a busy machine may
	 * have kept it off a cpu since) */
	end = ing_now_ns() + 60000ull * scale() * MS;
	while ((atomic_load(&rd.max_local) != NFRAMES || atomic_load(&rd.max_backlog) != NFRAMES) &&
	       ing_now_ns() < end)
		usleep(10000);
	atomic_store(&rd.stop, true);
	pthread_join(rd.th, NULL);
	print_message("the reader: %u Stats read, the mark reached in %u of them\n", rd.reads, rd.refusing_seen);
	if (rd.bad[0])
		fail_msg("the reader saw: %s", rd.bad);
	if (atomic_load(&rd.max_local) != NFRAMES || atomic_load(&rd.max_backlog) != NFRAMES)
		fail_msg("the reader's Stats: at most %" PRIu64 " local, %" PRIu64 " in the backlog; %u "
			 "frames were sent", atomic_load(&rd.max_local), atomic_load(&rd.max_backlog), NFRAMES);
	ing_tier_stop(t);
	ing_tier_destroy(t);
	ing_mbox_destroy(ctl);
	close(pfd);
	ing_catalog_close(c);
}

/* The tier thread's task id, found by its name. */
static pid_t tier_tid(void)
{
	char cmd[200];
	snprintf(cmd, sizeof(cmd), "grep -lx ingest-tier /proc/%d/task/*/comm 2>/dev/null", (int)getpid());
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	int tid = 0;
	if (fscanf(p, "/proc/%*d/task/%d/comm", &tid) != 1)
		tid = 0;
	pclose(p);
	return (pid_t)tid;
}

/* The system call the task is blocked in (-1: running, or unknown). */
static long blocked_in(pid_t tid)
{
	char path[80], buf[64] = "";
	snprintf(path, sizeof(path), "/proc/%d/task/%d/syscall", (int)getpid(), (int)tid);
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	long nr = -1;
	if (!fgets(buf, sizeof(buf), f) || sscanf(buf, "%ld", &nr) != 1)
		nr = -1;
	fclose(f);
	return nr;
}

static bool in_poll(long nr)
{
#ifdef SYS_poll
	if (nr == SYS_poll)
		return true;
#endif
	return nr == SYS_ppoll;
}

static void stop_wakes_a_sleeping_thread(void **state)
{
	(void)state;
	char data[128], cat[160];
	snprintf(data, sizeof(data), "%s/stop", dir);
	snprintf(cat, sizeof(cat), "%s/catalog.db", data);
	assert_int_equal(ing_store_mkdirs(data, 0755), 0);
	struct ing_catalog *c = ing_catalog_open(cat);
	assert_non_null(c);
	struct ing_mbox *ctl = ing_mbox_create("ctl", 64);
	struct ing_tier_opts o;
	ing_tier_opts_init(&o);
	o.data_dir = data;   /* no store: it serves reads only, and sleeps 60 s at a time */
	o.ctl = ctl;
	struct ing_tier *t = ing_tier_start(&o);
	assert_non_null(t);
	pid_t tid = 0;
	uint64_t end = ing_now_ns() + 60000ull * scale() * MS;
	while ((!tid || !in_poll(blocked_in(tid))) && ing_now_ns() < end) {
		if (!tid)
			tid = tier_tid();
		usleep(10000);
	}
	assert_true(tid > 0 && in_poll(blocked_in(tid)));
	/* asleep in its loop's poll: its mailbox wakes it. The bound tells a wake-up from the
	 * 60 s sleep's end (a busy machine may take seconds, never half a minute) */
	uint64_t t0 = ing_now_ns();
	ing_tier_stop(t);
	uint64_t took = ing_now_ns() - t0;
	print_message("stopped in %.3f s\n", (double)took / 1e9);
	assert_true(took < 30000 * MS);
	ing_tier_destroy(t);
	ing_mbox_destroy(ctl);
	ing_catalog_close(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(seqlock_never_torn),
		cmocka_unit_test(thread_publishes_and_wakes),
		cmocka_unit_test(stop_wakes_a_sleeping_thread),
	};
	return cmocka_run_group_tests(tests, catalog_dir_setup, catalog_dir_teardown);
}
