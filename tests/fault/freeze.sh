#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# freeze.sh BUILD_DIR - the data dir's filesystem frozen under a stream (root: ext4 on a
# loop device, fsfreeze):
#  1. while frozen (6 s): no frame becomes DURABLE, ingestd's memory stays bounded (RSS
#     grows by less than MEM_SLACK_MIB over the prefaulted pool: the paused stream's window
#     plus small change), health stays SERVING;
#  2. thawed: everything lands: every frame of the stream ok, verified byte for byte;
#  3. frozen again with frames in flight, SIGTERM: ingestd drains for its 10 s, fails the
#     frames still in flight and exits 3 (not 0: "stopped cleanly" would be a lie);
#     thawed and restarted: every DURABLE-acked frame intact, no temp file left.
# Not root: FAILS (it cannot make its conditions otherwise).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib.sh"
. "$HERE/fault_lib.sh"

BUILD=${1:?usage: freeze.sh BUILD_DIR}
BUILD=$(cd "$BUILD" && pwd)
INGESTD=$BUILD/apps/ingestd SEND=$BUILD/apps/ingest-send VERIFY=$BUILD/apps/ingest-verify
ing_need_built "$INGESTD" "$SEND" "$VERIFY"
need_root "freeze.sh"
MEM_SLACK_MIB=${MEM_SLACK_MIB:-48}

TMP=$(mktemp -d /tmp/fault-freeze.XXXXXX)
MNT=$TMP/mnt
DATA=$MNT/data
PID= SPID=
cleanup() {
	fsfreeze -u "$MNT" 2>/dev/null || true
	for p in $SPID; do kill -KILL "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
	ing_kill_pid
	loopfs_cleanup
	if [ "${FAULT_KEEP:-0}" = 1 ]; then echo "kept $TMP"; else rm -rf "$TMP"; fi
}
trap cleanup EXIT
fail() {
	fsfreeze -u "$MNT" 2>/dev/null || true
	echo "FAIL: $*" >&2
	for l in "$TMP"/ingestd*.log "$TMP"/send*.err; do
		[ -f "$l" ] || continue
		echo "--- $l (tail) ---" >&2
		tail -n 15 "$l" >&2
	done
	exit 1
}
start_ingestd() {   # $1: log name
	ing_start "$INGESTD" "$TMP/port" "$TMP/$1.log" --data-dir "$DATA" --pool 1M:8,4M:4 \
		--workers 1 --log-level warn
	PID=$ING_PID
	SERVER=$ING_SERVER
}
wait_acked() {   # $1: manifest, $2: at least (a cap for a hang: 120 s, no progress verdict)
	local end=$((SECONDS + 120))
	while [ "$SECONDS" -lt "$end" ]; do
		[ "$(lines "$1")" -ge "$2" ] && return 0
		kill -0 "$SPID" 2>/dev/null || fail "ingest-send ended before $2 frames were acked"
		sleep 0.05
	done
	fail "fewer than $2 frames acked DURABLE in 120 s"
}

step "256 MiB ext4 on a loop device, ingestd on it (pool 24 MiB)"
loopfs_make "$TMP/fs.img" "$MNT" 256M
start_ingestd ingestd1
timeout 60 "$SEND" --server "$SERVER" --transport grpc --count 20 --size 1M --first-id 1 \
	--wafer FZ0 --quiet || fail "warm-up send"
base=$(rss_kib "$PID")

step "stream, freeze the filesystem"
S1=(--transport grpc --credits 8 --count 300 --sizes 64K-1M --seed 5 --first-id 1000 --wafer FZ1
    --frame-timeout-ms 120000)
timeout 180 "$SEND" --server "$SERVER" "${S1[@]}" --manifest "$TMP/sent1" \
	--durable-manifest "$TMP/acked1" --json --quiet >"$TMP/send1.json" 2>"$TMP/send1.err" &
SPID=$!
wait_acked "$TMP/acked1" 20
fsfreeze -f "$MNT"
sleep 1
a0=$(lines "$TMP/acked1")
maxrss=0 healthy=0
for i in $(seq 1 10); do
	r=$(rss_kib "$PID") || fail "ingestd died while the filesystem was frozen"
	[ "$r" -gt "$maxrss" ] && maxrss=$r
	health "$SERVER" && healthy=$((healthy + 1))
	sleep 0.5
done
a1=$(lines "$TMP/acked1")
grow=$(( (maxrss - base) / 1024 ))
echo "frozen: acked $a0 -> $a1, RSS $((base / 1024)) MiB before, at most $((maxrss / 1024)) MiB frozen (+$grow MiB), health SERVING $healthy/10"
[ "$a1" = "$a0" ] || fail "frames became DURABLE on a frozen filesystem ($a0 -> $a1): the freeze did not hold"
[ "$healthy" = 10 ] || fail "health not SERVING while frozen ($healthy/10)"
[ "$grow" -lt "$MEM_SLACK_MIB" ] || fail "memory grew by $grow MiB while frozen (limit $MEM_SLACK_MIB)"

step "thaw: everything lands"
fsfreeze -u "$MNT"
rc=0
wait "$SPID" || rc=$?
SPID=
[ "$rc" = 0 ] || fail "ingest-send exited $rc after the thaw"
[ "$(json "$TMP/send1.json" ok)" = 300 ] || fail "after thaw: $(json "$TMP/send1.json" ok) of 300 ok"
verify_json "$DATA" "$TMP/sent1" || fail "after thaw: missing $V_MISSING, bad $V_BAD"
echo "after thaw: 300 of 300 ok, verified"

step "freeze again with frames in flight, SIGTERM"
S2=(--transport grpc --credits 8 --count 300 --sizes 64K-1M --seed 6 --first-id 5000 --wafer FZ2
    --frame-timeout-ms 120000)
timeout 180 "$SEND" --server "$SERVER" "${S2[@]}" --durable-manifest "$TMP/acked2" --quiet \
	>/dev/null 2>"$TMP/send2.err" &
SPID=$!
wait_acked "$TMP/acked2" 10
fsfreeze -f "$MNT"
sleep 0.5
t0=$(date +%s)
kill -TERM "$PID"
rc=
# drain 10 s + close 1 s + persistence stop 10 s, at most. A thread blocked in the frozen
# filesystem keeps the process from being reaped (wait would block) until the thaw: its
# main thread having exited (state Z) is what "exited" means here.
# (the cap catches a hang: the node's own deadlines are what ends it)
gone=
while [ $(( $(date +%s) - t0 )) -lt 120 ]; do
	st=$(awk '{ print $3 }' "/proc/$PID/stat" 2>/dev/null || echo Z)
	if [ "$st" = Z ]; then
		gone=$(( $(date +%s) - t0 ))
		break
	fi
	sleep 0.1
done
fsfreeze -u "$MNT"
rc=0
wait "$PID" || rc=$?
[ -n "$gone" ] || fail "ingestd still running 120 s after SIGTERM on a frozen disk (exit $rc after the thaw)"
PID=
echo "SIGTERM while frozen: ingestd's main thread ended after $gone s, exit status $rc"
grep -E "drain deadline|not drained" "$TMP/ingestd1.log" || true
[ "$rc" = 3 ] || fail "SIGTERM with frames stuck on a frozen disk: exit $rc, want 3"
wait "$SPID" 2>/dev/null || true
SPID=

step "restart: DURABLE-acked frames intact, no temp files"
start_ingestd ingestd2
t=$(temp_files "$DATA")
[ "$t" = 0 ] || fail "$t temp files left after the restart"
verify_json "$DATA" "$TMP/acked2" || fail "a DURABLE-acked frame is lost ($V_MISSING) or bad ($V_BAD)"
kill -TERM "$PID"
rc=0
wait "$PID" || rc=$?
PID=
[ "$rc" = 0 ] || fail "idle ingestd exited $rc on SIGTERM"
echo "fault freeze: frozen 6 s with +$grow MiB RSS, health up; 300/300 landed after thaw; SIGTERM while frozen: exit 3"
echo "PASS"
