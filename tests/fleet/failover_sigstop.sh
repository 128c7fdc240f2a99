#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# failover_sigstop.sh BUILD_DIR - a hung node: three ingestd on loopback, ingest-send
# --servers streaming 900 frames over 30 wafers; one node is stopped with SIGSTOP
# mid-stream (its TCP connections stay open, nothing answers), at a moment the test
# controls: its fdatasync is held from before the producer starts (fsync_gate.so,
# fleet_lib.sh gate_close), and the stop comes once it holds frames RECEIVED and not
# DURABLE (hold_received), so the failover always has frames to re-send. The producer must
# notice by itself (HTTP/2 PING unanswered within 1 s; the ack deadline, 30 s, is far above
# the time the test takes to stop the node, so it cannot fail the node over first) and
# re-send that node's frames: ingest-send finishes with every frame DURABLE while the node
# is still stopped, with a frame timeout (120 s) far above both, so only the failover can have
# saved the frames. Then SIGCONT: no harm - the node keeps running, holds no bad copy, and
# a second send through the fleet places that node's wafers on it again, all DURABLE.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib.sh"
BUILD=$(cd "${1:?usage: failover_sigstop.sh BUILD_DIR}" && pwd)
TMP=$(mktemp -d /tmp/fleet-sigstop.XXXXXX)
. "$HERE/fleet_lib.sh"
ing_need_built "$INGESTD" "$SEND" "$VERIFY"
trap fleet_cleanup EXIT
fail() {
	echo "FAIL: $*" >&2
	fleet_log_tails
	exit 1
}
ACK_DEADLINE_MS=30000

step "three nodes"
node_gate 2
for i in 0 1 2; do node_start "$i"; done
SERVERS=$(nodes_servers)
gate_close 2   # before the producer: it cannot end before the stop (30 wafers: node 2 has some)

step "stream 900 frames; node 2's fdatasync held from the start: once it holds frames RECEIVED and the others acked frames DURABLE, SIGSTOP it"
"$SEND" --servers "$SERVERS" --wafer LOT9 --wafers 30 --count 900 --size 64K --seed 5 \
	--credits 16 --ack-deadline-ms $ACK_DEADLINE_MS --keepalive-ms 500 --frame-timeout-ms 120000 \
	--manifest "$TMP/all.man" --placement "$TMP/placement" --json --quiet \
	>"$TMP/send.json" 2>"$TMP/send.err" &
SEND_PID=$!
hold_received 2
wait_lines "$TMP/placement" 1 60   # mid-stream: the other nodes acked frames DURABLE
STOP_MS=$(now_ms)
kill -STOP "${NODE_PID[2]}"
echo "stopped node 2 holding $HELD frame(s) RECEIVED and not DURABLE"
rc=0
wait "$SEND_PID" || rc=$?
SEND_PID=
# still stopped: whatever got the frames through, it was not the node coming back
[ "$(ps -o stat= -p "${NODE_PID[2]}" | cut -c1)" = T ] || fail "node 2 is not stopped any more"
[ "$rc" = 0 ] || fail "ingest-send exited $rc with node 2 hung: not every frame DURABLE"
{ read -r OK; read -r FAILOVERS; read -r REROUTED; read -r FIRST; } < <(jfields "$TMP/send.json" \
	ok 'fleet["failovers"]' 'fleet["rerouted"]' 'fleet["first_rerouted_durable_unix_ms"]')
[ "$OK" = 900 ] || fail "$OK of 900 frames DURABLE"
[ "$FAILOVERS" -ge 1 ] || fail "the hung node was never failed over"
grep -Eq "did not answer a PING|no DURABLE ack for frame" "$TMP/send.err" ||
	fail "the failover does not name a missed PING or the ack deadline"
HOW=$(grep -Eo "did not answer a PING within [0-9]+ ms|no DURABLE ack for frame [^ ]+ within [0-9]+ ms" \
	"$TMP/send.err" | head -n1)
[ "$REROUTED" -gt 0 ] || fail "no frame re-sent, though node 2 held $HELD frame(s) RECEIVED and not DURABLE"
[ "$FIRST" -gt 0 ] || fail "re-sent frames but none DURABLE"
[ "$FIRST" -ge "$STOP_MS" ] ||
	fail "a re-sent frame was DURABLE $((STOP_MS - FIRST)) ms before the stop: the node was failed over by something else"
echo "SIGSTOP -> first re-sent frame DURABLE: $((FIRST - STOP_MS)) ms (ack deadline $ACK_DEADLINE_MS ms; detected: $HOW); $REROUTED re-sent"

step "SIGCONT: the node resumes (its gate open again); no harm"
release 2
kill -CONT "${NODE_PID[2]}"
sleep 1
kill -0 "${NODE_PID[2]}" || fail "node 2 died after SIGCONT"
"$SEND" --servers "$SERVERS" --wafer LOT9 --wafers 30 --count 300 --first-id 5001 --size 64K \
	--seed 6 --credits 16 --manifest "$TMP/second.man" --placement "$TMP/placement2" \
	--json --quiet >"$TMP/second.json" 2>"$TMP/send2.err" || fail "send after SIGCONT failed"
ON2=$(json "$TMP/second.json" "fleet['durable_by_node'].get('${NODE_ID[2]}', 0)")
[ "$ON2" -gt 0 ] || fail "node 2 got no wafer after it resumed"
for i in 0 1 2; do node_stop "$i"; done
check_placement "$TMP/placement" "$TMP/all.man"
check_placement "$TMP/placement2" "$TMP/second.man"
echo "fleet failover SIGSTOP: 900/900 DURABLE with the node hung, $FAILOVERS failover(s), $REROUTED re-sent;" \
	"after SIGCONT $ON2 of 300 new frames on it; PASS"
