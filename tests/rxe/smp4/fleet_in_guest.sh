#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# fleet: libingest in fleet mode over RDMA (docs/FLEET.md "Over RDMA"), three ingestd on the
# guest's rxe device (own gRPC and rdma_cm ports, own data dirs), real processes:
#  A. RDMA WRITE push to three nodes, 120 frames over 30 wafers; node 1's fdatasync is held
#     from before the producer starts (tests/fleet/fsync_gate.c: it makes no frame DURABLE,
#     so the producer cannot end first) and, once it holds frames RECEIVED and not DURABLE
#     and the others have acked frames DURABLE, it is killed with kill -9: ingest-send ends
#     with every frame DURABLE
#     somewhere, frames re-sent (> 0), each node holds byte for byte every frame it acked
#     (ingest-verify), the two others received their frames by push (Stats);
#  B. AUTO: RDMA READ pull to two nodes, the gRPC stream to a third that has no RDMA
#     (--rdma off); one pull node, its pool (4 slots) smaller than the producer's credits
#     (8: FrameMetas wait there for a slot), is held like node 1 until every slot holds a
#     frame RECEIVED and not DURABLE (so it can take no more), then stopped with SIGSTOP:
#     the producer fails it over (a missed PING, well within the ack deadline) while it is
#     still stopped, every frame DURABLE. Then the node resumes (SIGCONT) after the producer
#     recycled every frame buffer many times: its slots free up and the FrameMetas that
#     waited could be READ through the rkey it held - none is: its framesReceived does not
#     move, it stores no frame with another frame's bytes and none it did not hold before
#     the stop (the producer destroyed that QP before it re-sent the frames).
# Prints the failover figures: kill -> first re-sent frame DURABLE, SIGSTOP -> the same.
# 120 frames of 256 KiB over 30 wafers a run (4 a wafer): the closed gates, not the frame
# count, make the kill and the stop land mid-stream (docs/ARCHITECTURE.md, "gate"); 240
# cost A alone ~30 s more of the guest's CPU.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../../lib.sh"
step() { echo "== [${SECONDS}s] $*"; }   # where the time goes under TCG
: "${ING_BUILD_DIR:?}" "${ING_RXE_TMP:?}" "${ING_RXE_OUT:?}" "${RXE_IP:?}"
BUILD=$ING_BUILD_DIR
TMP=$ING_RXE_TMP
FLEET_STATS=$BUILD/tests/rxe_stats
FLEET_KEEP=1   # the guest's scratch dir goes with the guest; the logs go to ING_RXE_OUT
. "$HERE/../../fleet/fleet_lib.sh"
STATS=$FLEET_STATS
ing_need_built "$INGESTD" "$SEND" "$VERIFY" "$STATS" "$BUILD/tests/fsync_gate.so"
trap fleet_guest_finish EXIT
fail() {
	echo "FAIL: $*" >&2
	fleet_log_tails
	exit 1
}
[ "$(nproc)" -ge 4 ] || fail "this test needs the 4-vCPU guest (RXE_VM_SMP=4), it has $(nproc)"
# nsnap I: node I's Stats into $TMP/st.I once (a process start costs a second under TCG);
# nsv I KEY: one value of that snapshot
nsnap() { wd 60 "$STATS" "${NODE_ADDR[$1]}" >"$TMP/st.$1" || fail "Stats of node $1: no answer"; }
nsv() { awk -v k="$2" '$1 == k { print $2 }' "$TMP/st.$1"; }
# rdma_node I PORT [ARGS]: node I with its own rdma_cm port, control + one lcore on its cpu
# pair, on the guest's first device (one rail: the guest may have a second NIC, batch rails')
rdma_node() {
	local i=$1 port=$2
	shift 2
	node_start "$i" --rdma on --rdma-dev "$RXE_DEV" --rdma-port "$port" --lcores "$((2 * (i % 2))),$((2 * (i % 2) + 1))" "$@"
}

step "A: three nodes over RDMA WRITE push"
node_gate 1
for i in 0 1 2; do rdma_node "$i" $((7480 + i)); done
gate_close 1   # before the producer: it cannot end before the kill (30 wafers: node 1 has some)
SERVERS=$(nodes_servers)
echo "servers $SERVERS"
wd 600 "$SEND" --servers "$SERVERS" --transport rdma-write --wafer RF-A --wafers 30 --count 120 \
	--size 256K --seed 21 --credits 8 --ack-deadline-ms 60000 --frame-timeout-ms 300000 \
	--manifest "$TMP/a.man" --placement "$TMP/a.pl" --json --quiet --log-level info \
	>"$TMP/a.json" 2>"$TMP/a.err" &
SEND_PID=$!
hold_received 1
wait_lines "$TMP/a.pl" 1 300   # mid-stream: the other nodes acked frames DURABLE
KILL_MS=$(now_ms)   # before the signal: a date process takes long under TCG
kill -KILL "${NODE_PID[1]}"
wait "${NODE_PID[1]}" 2>/dev/null || true
NODE_PID[1]=
release 1
NODE_GATE[1]=
echo "killed node 1 holding $HELD frame(s) RECEIVED and not DURABLE"
rc=0
wait "$SEND_PID" || rc=$?
SEND_PID=
[ "$rc" = 0 ] || fail "ingest-send exited $rc: not every frame DURABLE"
# jget, not python: a python start costs 10-20 s in the TCG guest
OK=$(jget "$TMP/a.json" ok) REROUTED=$(jget "$TMP/a.json" rerouted)
FIRST=$(jget "$TMP/a.json" first_rerouted_durable_unix_ms) XPORT=$(jget "$TMP/a.json" transport)
NOTE=$(grep -o '"transport_note":"[^"]*"' "$TMP/a.json" | cut -d'"' -f4)
echo "transport $XPORT: $NOTE"
[ "$OK" = 120 ] || fail "$OK of 120 frames DURABLE"
[ "$XPORT" = rdma-write ] || fail "the fleet did not push ($XPORT)"
[ "$REROUTED" -gt 0 ] || fail "no frame re-sent after the kill, though node 1 held $HELD"
[ "$FIRST" -gt 0 ] || fail "no re-sent frame reached DURABLE"
grep -q "transport RDMA_WRITE" "$TMP/a.err" || fail "no node session on RDMA_WRITE"
for i in 0 2; do
	nsnap "$i"
	[ "$(nsv "$i" pushFramesReceived)" -ge 1 ] || fail "node $i received no frame by push"
	[ "$(nsv "$i" rdmaReadsPosted)" = 0 ] || fail "node $i READ frames of a push producer"
done
rdma_node 1 7481        # the killed node restarts on its data dir, over RDMA again
for i in 0 1 2; do node_stop "$i"; done
check_placement "$TMP/a.pl" "$TMP/a.man"
KILL_FIG="kill -9 -> first re-sent frame DURABLE $((FIRST - KILL_MS)) ms, $REROUTED frame(s) re-sent, copies stored twice $COPIES_TWICE"
echo "A: 120/120 DURABLE, byte-exact on the nodes that acked them; $KILL_FIG"

step "B: AUTO - READ pull to nodes 3 and 4, the gRPC stream to node 5 (no RDMA); SIGSTOP node 4"
node_gate 4
rdma_node 3 7483
rdma_node 4 7484 --pool 1M:4      # fewer slots than the producer's credits: FrameMetas wait
node_start 5 --rdma off --lcores 0,1
gate_close 4   # as node 1 in A
SERVERS2=${NODE_ADDR[3]},${NODE_ADDR[4]},${NODE_ADDR[5]}
ACK_DEADLINE_MS=30000   # the stopped node misses its PINGs (500 ms) long before
wd 600 "$SEND" --servers "$SERVERS2" --wafer RF-B --wafers 30 --count 120 --size 256K --seed 22 \
	--credits 8 --ack-deadline-ms $ACK_DEADLINE_MS --keepalive-ms 500 --frame-timeout-ms 300000 \
	--manifest "$TMP/b.man" --placement "$TMP/b.pl" --json --quiet --log-level info \
	>"$TMP/b.json" 2>"$TMP/b.err" &
SEND_PID=$!
hold_received 4 4      # all four slots: nothing more can be READ before the stop
wait_lines "$TMP/b.pl" 1 300
STOP_MS=$(now_ms)   # before the signal: a date process takes long under TCG
kill -STOP "${NODE_PID[4]}"
echo "stopped node 4 holding $HELD frame(s) RECEIVED and not DURABLE"
rc=0
wait "$SEND_PID" || rc=$?
SEND_PID=
[ "$(ps -o stat= -p "${NODE_PID[4]}" | cut -c1)" = T ] || fail "node 4 is not stopped any more"
[ "$rc" = 0 ] || fail "ingest-send exited $rc with node 4 stopped: not every frame DURABLE"
OK=$(jget "$TMP/b.json" ok) REROUTED=$(jget "$TMP/b.json" rerouted)
FIRST=$(jget "$TMP/b.json" first_rerouted_durable_unix_ms) FAILOVERS=$(jget "$TMP/b.json" failovers)
[ "$OK" = 120 ] || fail "$OK of 120 frames DURABLE"
[ "$FAILOVERS" -ge 1 ] && [ "$REROUTED" -gt 0 ] || fail "node 4 not failed over ($FAILOVERS), $REROUTED re-sent"
[ "$FIRST" -gt 0 ] || fail "re-sent frames but none DURABLE"
HOW=$(grep -Eo "did not answer a PING within [0-9]+ ms|no DURABLE ack for frame [^ ]+ within [0-9]+ ms" \
	"$TMP/b.err" | head -n1) || true
[ -n "$HOW" ] || fail "the failover names no missed PING or ack deadline"
grep -q "${NODE_ADDR[3]}) connected, .*transport RDMA_READ" "$TMP/b.err" || fail "node 3 not on RDMA_READ"
grep -q "${NODE_ADDR[5]}) connected, .*transport gRPC stream" "$TMP/b.err" || fail "node 5 (no RDMA) not on the gRPC stream"
nsnap 3
nsnap 5
[ "$(nsv 3 rdmaBytesRead)" -gt 0 ] || fail "node 3 read nothing over RDMA"
[ "$(nsv 5 framesReceived)" -gt 0 ] || fail "node 5 received nothing over the gRPC stream"
STOP_FIG="SIGSTOP -> first re-sent frame DURABLE $((FIRST - STOP_MS)) ms (ack deadline $ACK_DEADLINE_MS ms, detected: $HOW), $REROUTED frame(s) re-sent"
echo "B: 120/120 DURABLE with node 4 stopped; $STOP_FIG"

step "B: node 4 resumes after the producer recycled its buffers: nothing read through the old rkey"
ACKED4=$(awk -v n="${NODE_ID[4]}" '!/^#/ && $3 == n' "$TMP/b.pl" | wc -l)
release 4
kill -CONT "${NODE_PID[4]}"
ok=0
for k in $(seq 1 300); do
	nsnap 4
	if [ "$(nsv 4 framesInFlight)" = 0 ] && [ "$(nsv 4 poolSlotsFree)" = "$(nsv 4 poolSlotsTotal)" ]; then
		ok=1
		break
	fi
	sleep 0.2
done
[ $ok = 1 ] || fail "node 4 still holds frames after SIGCONT"
grep -E "^frames|^rdmaReadErrors|^lcore\.0\.(framesFailed|completionErrors)" "$TMP/st.4"
verify_node 4 "$TMP/b.man" --allow-missing
echo "node 4: $ACKED4 frame(s) acked DURABLE before the stop, $HELD held RECEIVED, $V_OK stored, $V_BAD bad"
[ "$V_BAD" = 0 ] || fail "node 4 stored $V_BAD frame(s) with bytes that are not theirs"
[ "$V_OK" -le $((ACKED4 + HELD)) ] ||
	fail "node 4 stored $V_OK frames, more than the $ACKED4 it acked plus the $HELD it held: it read frames after the failover"
R4=$(nsv 4 framesReceived)
[ "$R4" = "$HELD_RECEIVED" ] ||
	fail "node 4 received $((R4 - HELD_RECEIVED)) frame(s) after SIGCONT: READs through the rkey it held before the failover"
for i in 3 4 5; do node_stop "$i"; done
check_placement "$TMP/b.pl" "$TMP/b.man"

echo "fleet over RDMA: A (push) $KILL_FIG; B (pull + gRPC) $STOP_FIG; PASS"
