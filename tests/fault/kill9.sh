#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# kill9.sh BUILD_DIR [ITERATIONS] - kill -9 at random moments, real processes on loopback
# (gRPC fallback). Each round streams a new range of frames with ingest-send
# --durable-manifest (a line per frame ACKed DURABLE, flushed per ack) and kills, at a
# random moment 0.1-1.5 s in, either ingestd (then verifies with the node down and
# restarts it on the same data dir) or the producer (the node keeps running). After every
# round and at the end: every DURABLE-acked frame is on disk and in the catalog, byte for
# byte (0 lost, 0 corrupt), no catalog row shares a frame id or a path, no temp file is
# left once ingestd has (re)started. Ends with SIGTERM: exit 0. FAULT_SEED fixes the
# random choices (printed). No root needed.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib.sh"
. "$HERE/fault_lib.sh"

BUILD=${1:?usage: kill9.sh BUILD_DIR [ITERATIONS]}
BUILD=$(cd "$BUILD" && pwd)
ITER=${2:-${FAULT_ITERATIONS:-3}}
INGESTD=$BUILD/apps/ingestd SEND=$BUILD/apps/ingest-send VERIFY=$BUILD/apps/ingest-verify
ing_need_built "$INGESTD" "$SEND" "$VERIFY"
SEED=${FAULT_SEED:-$(( $(date +%s) % 100000 ))}
RANDOM=$SEED

TMP=$(mktemp -d /tmp/fault-kill9.XXXXXX)
DATA=$TMP/data
PID= SPID=
cleanup() {
	for p in $PID $SPID; do
		kill -KILL "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	if [ "${FAULT_KEEP:-0}" = 1 ]; then echo "kept $TMP"; else rm -rf "$TMP"; fi
}
trap cleanup EXIT
fail() {
	echo "FAIL: $* (FAULT_SEED=$SEED)" >&2
	for l in "$TMP"/ingestd*.log "$TMP"/send*.err; do
		[ -f "$l" ] || continue
		echo "--- $l (tail) ---" >&2
		tail -n 15 "$l" >&2
	done
	exit 1
}

NSTART=0
start_ingestd() {
	NSTART=$((NSTART + 1))
	ing_start "$INGESTD" "$TMP/port" "$TMP/ingestd$NSTART.log" --data-dir "$DATA" \
		--pool 1M:8,4M:4 --workers 2 --log-level warn
	PID=$ING_PID
	SERVER=$ING_SERVER
	local t
	t=$(temp_files "$DATA")
	[ "$t" = 0 ] || fail "$t temp files left after ingestd start $NSTART"
}

check_acked() {   # $1: manifest, $2: when
	[ "$(lines "$1")" -gt 0 ] || return 0
	verify_json "$DATA" "$1" || fail "$2: DURABLE-acked frames lost ($V_MISSING) or corrupt ($V_BAD)"
}

echo "kill9: $ITER rounds, FAULT_SEED=$SEED"
start_ingestd
ACKED=0 LOST=0 CORRUPT=0 KD=0 KP=0 V_MISSING=0 V_BAD=0
: >"$TMP/all-acked"
for i in $(seq 1 "$ITER"); do
	man=$TMP/acked.$i
	timeout 120 "$SEND" --server "$SERVER" --transport grpc --credits 8 --count 3000 \
		--sizes 4K-64K --seed $((SEED + i)) --first-id $((i * 1000000)) --wafer F$i \
		--durable-manifest "$man" --quiet >/dev/null 2>"$TMP/send.$i.err" &
	SPID=$!
	delay=$(awk -v r=$RANDOM 'BEGIN { printf "%.2f", 0.1 + (r % 141) / 100 }')
	sleep "$delay"
	if [ $((RANDOM % 2)) = 0 ]; then
		victim=ingestd
		KD=$((KD + 1))
		kill -KILL "$PID"
		wait "$PID" 2>/dev/null || true
		PID=
		wait "$SPID" 2>/dev/null || true   # the producer sees the connection go
		SPID=
		check_acked "$man" "round $i, ingestd down"
		start_ingestd
	else
		victim=ingest-send
		KP=$((KP + 1))
		kill -KILL "$SPID" 2>/dev/null || true
		wait "$SPID" 2>/dev/null || true
		SPID=
		kill -0 "$PID" 2>/dev/null || fail "round $i: ingestd died when its producer was killed"
		check_acked "$man" "round $i, producer killed"
	fi
	n=$(lines "$man")
	ACKED=$((ACKED + n))
	grep -v '^#' "$man" >>"$TMP/all-acked" 2>/dev/null || true
	d=$(catalog_dups "$DATA")
	[ "$d" = 0 ] || fail "round $i: $d duplicate catalog rows"
	echo "round $i: killed $victim after ${delay}s, $n frames DURABLE before"
done

step "every DURABLE-acked frame of every round, then SIGTERM"
check_acked "$TMP/all-acked" "end"
LOST=$V_MISSING CORRUPT=$V_BAD
kill -TERM "$PID"
rc=0
wait "$PID" || rc=$?
PID=
[ "$rc" = 0 ] || fail "ingestd exited $rc on SIGTERM"
t=$(temp_files "$DATA")
[ "$t" = 0 ] || fail "$t temp files left after SIGTERM"
d=$(catalog_dups "$DATA")
[ "$d" = 0 ] || fail "$d duplicate catalog rows at the end"
echo "fault kill9: $ITER rounds ($KD ingestd, $KP producer kills), frames acked DURABLE $ACKED," \
	"lost $LOST, corrupt $CORRUPT, duplicate rows $d, temp files $t"
[ "$LOST" = 0 ] && [ "$CORRUPT" = 0 ] || fail "lost or corrupt frames"
echo "PASS"
