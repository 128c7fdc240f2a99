# SPDX-License-Identifier: Apache-2.0
# tests/lib.sh - helpers shared by the shell functional tests, on the host and inside the
# Soft-RoCE guest. Source it first; each test defines its own fail() (printing that
# test's logs and exiting non-zero), which these functions call.

# json FILE EXPR: a Python expression over the top-level keys of a JSON file (ingest-send
# --json summaries), e.g. json s.json 'latency_ms["durable"]["count"]'.
json() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2], {}, d))" "$@"; }

# jget FILE KEY: the first "KEY": value of a JSON file (a string without its quotes),
# without starting python: a python start costs 10-20 s in the TCG guest. For ingest-send's
# --json summary, whose top-level keys come before any nested key of the same name (ok,
# failed, transport, transport_note, mb_s, session_id, and under "fleet" rerouted,
# failovers, first_rerouted_durable_unix_ms). A string value must hold no '"'.
jget() {
	awk -v k="\"$2\":" '{ i = index($0, k); if (!i) next
		v = substr($0, i + length(k))
		if (substr(v, 1, 1) == "\"") { v = substr(v, 2); sub(/".*/, "", v) } else sub(/[,}].*/, "", v)
		print v; exit }' "$1"
}

# ing_start INGESTD PORTFILE LOG [INGESTD ARGS...]: start ingestd in the background on
# 127.0.0.1 with a port picked by the kernel and wait for its port file (ing_wait_port).
# Sets ING_PID and ING_SERVER (127.0.0.1:PORT); calls fail if ingestd exits first or
# writes no port.
# ING_LAUNCH, if set, is put before the command: "setpriv --pdeathsig KILL --" (the tier
# tests) makes ingestd die with the test's shell, however that is killed.
ing_start() {
	local bin=$1 pf=$2 log=$3
	shift 3
	rm -f "$pf"
	# shellcheck disable=SC2086 # ING_LAUNCH is words
	${ING_LAUNCH:-} "$bin" --listen 127.0.0.1:0 --port-file "$pf" "$@" >"$log" 2>&1 &
	ING_PID=$!
	ing_wait_port "$ING_PID" "$pf" "$log"
}

# ing_wait_port PID PORTFILE LOG: wait for the port file of the ingestd with that pid,
# started some other way (as another user, ...). Sets ING_SERVER; calls fail if it exits
# first, or when its start-up made no progress for 60 s x the time scale: no new log line,
# no CPU time, no memory touched (a watchdog for a hang, not a budget: on a host short of
# memory and CPU, prefaulting the frame pool alone took 11 s and 30 s per size class), or
# after 10 times that in all (a start-up that spins).
ing_wait_port() {
	local pid=$1 pf=$2 log=$3 cap now last= idle_end end
	cap=$(ing_scaled 60)
	idle_end=$((SECONDS + cap))
	end=$((SECONDS + 10 * cap))
	while [ ! -s "$pf" ]; do
		kill -0 "$pid" 2>/dev/null || fail "ingestd exited during start-up (log: $log)"
		# progress: the log's size, the process's CPU ticks (utime, stime) and resident pages
		now="$(stat -c %s "$log" 2>/dev/null) $(cut -d' ' -f14,15 "/proc/$pid/stat" 2>/dev/null) $(cut -d' ' -f2 "/proc/$pid/statm" 2>/dev/null)"
		if [ "$now" != "$last" ]; then
			last=$now
			idle_end=$((SECONDS + cap))
		fi
		[ "$SECONDS" -lt "$idle_end" ] && [ "$SECONDS" -lt "$end" ] || break
		sleep 0.1
	done
	if [ ! -s "$pf" ]; then
		kill -KILL "$pid" 2>/dev/null   # not left running behind the failed test
		if [ "$SECONDS" -ge "$end" ]; then
			fail "ingestd wrote no port file within $((10 * cap)) s (log: $log)"
		fi
		fail "ingestd's start-up made no progress for $cap s (no log line, no CPU time, no memory touched) and wrote no port file (log: $log)"
	fi
	ING_SERVER=127.0.0.1:$(tr -dc '0-9' <"$pf")
}

step() { echo "== $*"; }

# ing_programs BUILD: the programs of that build tree, INGESTD SEND VERIFY STAT GET CAT DOCTOR
# ($BUILD/apps/ingestd, ingest-send, ...), whether built or not (ing_need_built checks).
ing_programs() {
	INGESTD=$1/apps/ingestd
	SEND=$1/apps/ingest-send
	VERIFY=$1/apps/ingest-verify
	STAT=$1/apps/ingest-stat
	GET=$1/apps/ingest-get
	CAT=$1/apps/ingest-catalog
	DOCTOR=$1/apps/ingest-doctor
}

# ing_test_setup NAME BUILD_DIR [PROGRAM...]: the preamble of a test that runs the built
# programs against an ingestd of its own. Sets BUILD (BUILD_DIR, absolute; an empty one exits
# with the script's usage) and the programs (ing_programs), and exits 1 unless ingestd and
# each PROGRAM named (ingest-send, ..., under $BUILD/apps) are built. TMP: a fresh
# /tmp/NAME.XXXXXX. PID and SPID: the ingestd and a producer the test runs in the
# background (empty: none). An EXIT trap kills both, runs the command in CLEANUP_EXTRA if
# the test set one, and removes TMP (kept, and named, with ING_KEEP_TMP=1). A default fail()
# prints the message and the last 30 lines of each $TMP/ingestd*.log, and exits 1 (a test
# may define its own after this call).
ing_test_setup() {
	local name=$1 p
	[ -n "${2:-}" ] || { echo "usage: $(basename "$0") BUILD_DIR ..." >&2; exit 2; }
	BUILD=$(cd "$2" && pwd) || exit 1
	shift 2
	ing_programs "$BUILD"
	ing_need_built "$INGESTD"
	for p in "$@"; do
		ing_need_built "$BUILD/apps/$p"
	done
	TMP=$(mktemp -d "/tmp/$name.XXXXXX")
	PID=
	SPID=
	trap ing_test_cleanup EXIT
	fail() {
		local l
		echo "FAIL: $*" >&2
		for l in "$TMP"/ingestd*.log; do
			[ -f "$l" ] || continue
			echo "--- $l (tail) ---" >&2
			tail -n 30 "$l" >&2
		done
		exit 1
	}
}

# the EXIT trap of ing_test_setup (under set -e too: nothing here fails the test)
ing_test_cleanup() {
	if [ -n "${SPID:-}" ]; then
		kill -KILL "$SPID" 2>/dev/null || true
		wait "$SPID" 2>/dev/null || true
	fi
	ing_kill_pid || true
	if [ -n "${CLEANUP_EXTRA:-}" ]; then eval "$CLEANUP_EXTRA" || true; fi
	if [ "${ING_KEEP_TMP:-0}" = 1 ]; then echo "kept $TMP"; else rm -rf "$TMP"; fi
}

# ing_metrics_url PORTFILE: wait (ing_wait_port's watchdog) for the --metrics-port-file of
# the ingestd in $PID (its log: $TMP/ingestd.log); sets ING_METRICS to its /metrics URL.
ing_metrics_url() {
	local srv=${ING_SERVER:-}
	ing_wait_port "$PID" "$1" "$TMP/ingestd.log"
	ING_METRICS=http://$ING_SERVER/metrics
	ING_SERVER=$srv
}

# Time limits in tests are watchdogs for a hang, never budgets. ING_TEST_TIME_SCALE (an
# integer >= 1; tests/rxe/run_all.sh measures the guest's speed at boot and sets it, the
# ThreadSanitizer tree sets 10) stretches each cap below on a slow or busy machine.
ing_scaled() {
	local s=${ING_TEST_TIME_SCALE:-1}
	[[ $s =~ ^[0-9]+$ ]] && [ "$s" -ge 1 ] || s=1
	echo $(($1 * s))
}

# wd SECONDS COMMAND...: run COMMAND under a watchdog for a hang: stopped after SECONDS x
# the time scale; then a line on stderr names the command and the cap, and the status is
# 124 (timeout's).
wd() {
	local cap rc=0
	cap=$(ing_scaled "$1")
	shift
	timeout -k 10 "$cap" "$@" || rc=$?
	[ "$rc" != 124 ] || echo "watchdog: no result within $cap s (a hang?) from: $*" >&2
	return "$rc"
}

# wait_for WHAT SECONDS COMMAND...: wait until COMMAND succeeds (checked every 0.1 s), at
# most SECONDS x the time scale; then fail "WHAT: not within N s".
wait_for() {
	local what=$1 cap end
	cap=$(ing_scaled "$2")
	shift 2
	end=$((SECONDS + cap))
	until "$@"; do
		[ "$SECONDS" -lt "$end" ] || fail "$what: not within $cap s"
		sleep 0.1
	done
}

# ing_readme_programs SRC_DIR: the programs of README's table ("## Programs"), one a line.
ing_readme_programs() {
	sed -n '/^## Programs/,/^## [^P]/p' "$1/README.md" | sed -n 's/^| `\([a-z][a-z-]*\)` |.*/\1/p'
}

# ing_check_programs SRC_DIR ROOT BINDIR: every program of README's table is ROOT/BINDIR/PROG
# with its man page and bash completion under ROOT/share (ROOT: an install prefix, or an
# unpacked package's usr/), and ROOT/BINDIR holds no program the table lacks. Calls fail.
ing_check_programs() {
	local src=$1 root=$2 bindir=$3 p progs
	progs=$(ing_readme_programs "$src")
	[ "$(echo "$progs" | wc -w)" -ge 9 ] || fail "README's program table not found or short: '$progs'"
	for p in $progs; do
		[ -x "$root/$bindir/$p" ] || fail "README's table lists $p; /$bindir/$p is not installed"
		[ -s "$root/share/man/man1/$p.1.gz" ] || fail "$p has no man page share/man/man1/$p.1.gz"
		[ -s "$root/share/bash-completion/completions/$p" ] ||
			fail "$p has no bash completion share/bash-completion/completions/$p"
		grep -q "^complete .* $p\$" "$root/share/bash-completion/completions/$p" ||
			fail "share/bash-completion/completions/$p does not complete $p"
	done
	for p in "$root/$bindir"/*; do
		grep -qx "$(basename "$p")" <<<"$progs" || fail "/$bindir/$(basename "$p") is installed but not in README's program table"
	done
	echo "README's $(echo "$progs" | wc -w) programs: each in $bindir with its man page and completion, and no other"
}

# ing_need_built PROGRAM...: exit 1 naming the first program that is not built.
ing_need_built() {
	local b
	for b in "$@"; do
		[ -x "$b" ] || { echo "FAIL: $b not built" >&2; exit 1; }
	done
}

# ing_kill_pid: an EXIT trap for scripts whose ingestd is in $PID (empty: none running).
ing_kill_pid() {
	if [ -n "${PID:-}" ] && kill -0 "$PID" 2>/dev/null; then
		kill -KILL "$PID"
		wait "$PID" 2>/dev/null || true
	fi
}

# ing_term_pid: SIGTERM the ingestd in $PID, wait for it and fail unless it exits 0 (a clean
# drain); $PID is emptied.
ing_term_pid() {
	local rc=0
	kill -TERM "$PID"
	wait "$PID" || rc=$?
	PID=
	[ "$rc" = 0 ] || fail "ingestd exited $rc on SIGTERM"
}

# stat_of KEY: one counter of the node at $SERVER, read with tests/rxe/rxe_stats ($STATS).
# A node that does not answer Stats within 60 s (x the time scale) gives an empty value (the
# caller's check fails) and, on stderr, the stacks of its threads ($PID, when gdb is
# there), so that the hang can be read from the log.
stat_of() {
	local out cap
	cap=$(ing_scaled 60)
	if ! out=$(timeout "$cap" "$STATS" "$SERVER"); then
		echo "Stats of $SERVER: no answer within $cap s" >&2
		if [ -n "${PID:-}" ] && command -v gdb >/dev/null; then
			echo "--- threads of ingestd $PID ---" >&2
			gdb -batch -p "$PID" -ex "thread apply all bt" 2>&1 | grep -v '^\[New\|^\[Thread' | head -200 >&2
		fi
		return 1
	fi
	awk -v k="$1" '$1 == k { print $2 }' <<<"$out"
}
