#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# reconnect: a single-server producer over RDMA READ pull, then RDMA WRITE push, through a
# lost connection to a node that lives on and still holds frames of the lost session (the
# Soft-RoCE side of tests/e2e/reconnect.sh inflight), real processes:
#  1. ingestd --rdma on --rdma-write auto, its fdatasync held (tests/fleet/fsync_gate.c)
#     from before the producer starts: the frames it reads stay RECEIVED, not DURABLE;
#  2. ingest-send --server --transport rdma (then rdma-write) --keepalive 1s; once the node
#     holds frames RECEIVED and not DURABLE it is stopped (SIGSTOP) until ingest-send
#     declares the connection lost (the session goes, its QP with it), then resumed;
#  3. ingest-send reconnects on RDMA (a new session, a new QP); its re-sends of the frames
#     the node still holds (a FrameMeta, or a frame waiting for its grant) are answered
#     "already in flight": ingest-send says it waits for them, and the gate opens only then;
#     it exits 0 with every frame DURABLE once: as many duplicates as frames held at least,
#     every frame byte for byte (ingest-verify), one catalog row per frame;
#  4. every pool slot back, SIGTERM: ingestd exits 0.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib.sh"
: "${ING_BUILD_DIR:?}" "${ING_RXE_TMP:?}" "${ING_RXE_OUT:?}" "${RXE_IP:?}"
BUILD=$ING_BUILD_DIR
TMP=$ING_RXE_TMP
FLEET_STATS=$BUILD/tests/rxe_stats   # hold_received reads Stats with it (no python under TCG)
FLEET_KEEP=1   # the guest's scratch dir goes with the guest; the logs go to ING_RXE_OUT
. "$HERE/../fleet/fleet_lib.sh"
STATS=$FLEET_STATS
ing_need_built "$INGESTD" "$SEND" "$VERIFY" "$STATS" "$BUILD/tests/fsync_gate.so"
trap fleet_guest_finish EXIT
fail() {
	echo "FAIL: $*" >&2
	fleet_log_tails
	exit 1
}
N=48

step "ingestd --rdma on --rdma-write auto, its fdatasync held"
node_gate 0
node_start 0 --rdma on --rdma-write auto
ADDR=${NODE_ADDR[0]}
grep -q "RDMA READ yes" "$TMP/node0.log" || fail "ingestd does not offer RDMA READ"

# run TRANSPORT NAME WAFER: one producer through a lost connection (steps 2 and 3)
run() {
	local xport=$1 name=$2 wafer=$3 said_n=0
	gate_close 0
	step "$name: ingest-send --server $ADDR --transport $xport, $N frames"
	"$SEND" --server "$ADDR" --transport "$xport" --wafer "$wafer" --count $N --sizes 64K-256K \
		--seed 31 --credits 8 --keepalive 1s --reconnect-timeout 300s --frame-timeout 600s \
		--manifest "$TMP/$name.man" --json --quiet >"$TMP/$name.json" 2>"$TMP/$name.err" &
	SEND_PID=$!
	hold_received 0
	echo "the node holds $HELD frame(s) RECEIVED and not DURABLE"
	said() { grep -q "$1" "$TMP/$name.err"; }
	step "$name: SIGSTOP of the node (it keeps what it holds) until ingest-send drops the connection"
	kill -STOP "${NODE_PID[0]}"
	wait_for "ingest-send declaring its connection lost" 120 said "connection to $ADDR lost"
	kill -CONT "${NODE_PID[0]}"
	step "$name: the re-sends of frames the node still holds wait for those earlier sends"
	# the gate is closed: what the node held cannot have ended, so its re-send is refused
	wait_for "ingest-send waiting for a frame the node still holds" 300 said \
		"still holds an earlier send of it in flight"
	release 0
	local rc=0
	wait "$SEND_PID" || rc=$?
	SEND_PID=
	cat "$TMP/$name.json"; echo
	grep -m 4 -E "lost|reconnected|still holds" "$TMP/$name.err" || true
	[ "$rc" = 0 ] || fail "$name: ingest-send exited $rc"
	# jget, not python: a python start costs 10-20 s in the TCG guest
	local ok failed reconnects dup transport
	ok=$(jget "$TMP/$name.json" ok) failed=$(jget "$TMP/$name.json" failed)
	reconnects=$(jget "$TMP/$name.json" reconnects) dup=$(jget "$TMP/$name.json" duplicate)
	transport=$(jget "$TMP/$name.json" transport)
	[ "$ok" = $N ] && [ "$failed" = 0 ] || fail "$name: $ok of $N DURABLE, $failed failed"
	[ "$transport" = "$xport" ] || fail "$name: transport $transport, not $xport"
	[ "$reconnects" -ge 1 ] || fail "$name: no lost connection counted"
	[ "$dup" -ge "$HELD" ] ||
		fail "$name: $dup frame(s) acked as duplicates, but the node held $HELD RECEIVED when the connection dropped"
	local want=RDMA_READ
	[ "$xport" = rdma-write ] && want=RDMA_WRITE
	grep -Eq "reconnected to $ADDR( rail [^ ]+)? \(session [0-9]+, transport $want\)" "$TMP/$name.err" ||
		fail "$name: ingest-send did not reconnect over $want"
	echo "$name: $ok/$N DURABLE ($dup duplicate, $HELD held), $reconnects lost connection(s)"
}

run rdma pull RG-pull
run rdma-write push RG-push

step "what the node holds: every frame byte for byte, one catalog row each"
# the parked frames of the lost sessions fail after the node's park time: every slot back
ok=0
for i in $(seq 1 300); do
	"$STATS" "$ADDR" >"$TMP/stats"
	free=$(awk '$1 == "poolSlotsFree" { print $2 }' "$TMP/stats")
	total=$(awk '$1 == "poolSlotsTotal" { print $2 }' "$TMP/stats")
	infl=$(awk '$1 == "framesInFlight" { print $2 }' "$TMP/stats")
	if [ "$free" = "$total" ] && [ "$infl" = 0 ]; then ok=1; break; fi
	sleep 0.2
done
[ $ok = 1 ] || fail "slots not back: free $free of $total, in flight $infl"
node_stop 0
{ head -n 1 "$TMP/pull.man"; grep -hv '^#' "$TMP/pull.man" "$TMP/push.man"; } >"$TMP/all.man"
verify_node 0 "$TMP/all.man"
[ "$V_OK" = $((2 * N)) ] && [ "$V_BAD" = 0 ] && [ "$V_MISSING" = 0 ] ||
	fail "ingest-verify: $V_OK ok, $V_BAD bad, $V_MISSING missing of $((2 * N))"
# (the sqlite3 shell, not python: a python start costs 10-20 s under TCG)
for w in RG-pull RG-push; do
	# (no process substitution: the guest has no /dev/fd)
	read -r rows distinct <<<"$(sqlite3 -separator ' ' "$TMP/data0/catalog.db" \
		"SELECT count(*), count(DISTINCT frame_id) FROM frames WHERE wafer_id='$w'")"
	[ "$rows" = $N ] && [ "$distinct" = $N ] || fail "catalog: $rows rows for $distinct frames of $w, want $N"
done
echo "reconnect_in_guest: all checks passed"
