#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# failover_kill9.sh BUILD_DIR - three ingestd on loopback, one ingest-send --servers
# streaming 900 frames over 30 wafers; one node is killed with kill -9 mid-stream, at a
# moment the test controls: the node's fdatasync is held from before the producer starts
# (fsync_gate.so, fleet_lib.sh gate_close), so the producer cannot finish without it, and
# the kill comes once its Stats show frames RECEIVED and not DURABLE (hold_received) and
# the other nodes acked frames DURABLE, so there are always frames to re-send.
# Checks: ingest-send finishes with every frame DURABLE somewhere (exit 0), frames were
# re-sent (> 0) after one failover; the killed node restarts on its data dir; every frame
# is on the node that acked it DURABLE, byte for byte and in its catalog; no node holds a
# bad copy; a frame stored twice (acked RECEIVED, maybe stored, by the killed node, then
# re-sent) is counted, never a conflict: sending the whole run again gives 0 failures
# (frames that moved during the outage are new to their owner again; the rest duplicates).
# The nodes export to a temporary PostgreSQL (the fleet catalog, node ids node0..2): once
# the restarted node's export has caught up, ingest-verify --fleet finds 0 missing and
# every copy intact, and counts the copies stored twice.
# Prints the failover figures: kill -> first re-sent frame DURABLE, frames re-sent,
# copies stored twice. Bounded: every wait has a limit; the EXIT trap stops every process.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib.sh"
BUILD=$(cd "${1:?usage: failover_kill9.sh BUILD_DIR}" && pwd)
TMP=$(mktemp -d /tmp/fleet-kill9.XXXXXX)
FLEET_PG=1
. "$HERE/pg_lib.sh"
. "$HERE/fleet_lib.sh"
ing_need_built "$INGESTD" "$SEND" "$VERIFY"
trap fleet_cleanup EXIT
fail() {
	echo "FAIL: $*" >&2
	fleet_log_tails
	exit 1
}

step "temporary PostgreSQL, three nodes"
fleet_pg_start
node_gate 1
for i in 0 1 2; do node_start "$i"; done
SERVERS=$(nodes_servers)
gate_close 1   # before the producer: it cannot end before the kill (30 wafers: node 1 has some)
echo "servers $SERVERS"

step "stream 900 frames over 30 wafers; node 1's fdatasync held from the start: once it holds frames RECEIVED and the others acked frames DURABLE, kill -9 it"
# the ack deadline is far above the hold: the kill, not the deadline, fails the node over
"$SEND" --servers "$SERVERS" --wafer LOT7 --wafers 30 --count 900 --size 64K --seed 11 \
	--credits 16 --ack-deadline-ms 60000 --frame-timeout-ms 120000 \
	--manifest "$TMP/all.man" --placement "$TMP/placement" --json --quiet \
	>"$TMP/send.json" 2>"$TMP/send.err" &
SEND_PID=$!
hold_received 1
wait_lines "$TMP/placement" 1 60   # mid-stream: the other nodes acked frames DURABLE
KILL_MS=$(now_ms)
kill -KILL "${NODE_PID[1]}"
wait "${NODE_PID[1]}" 2>/dev/null || true
NODE_PID[1]=
echo "killed node 1 holding $HELD frame(s) RECEIVED and not DURABLE"
release 1
NODE_GATE[1]=
rc=0
wait "$SEND_PID" || rc=$?
SEND_PID=
[ "$rc" = 0 ] || fail "ingest-send exited $rc: not every frame DURABLE"
KILLED=${NODE_ID[1]}
{ read -r OK; read -r REROUTED; read -r FAILOVERS; read -r RECV; read -r FIRST; read -r AFTER; } < <(
	jfields "$TMP/send.json" ok 'fleet["rerouted"]' 'fleet["failovers"]' \
		'fleet["resent_after_received"]' 'fleet["first_rerouted_durable_unix_ms"]' \
		"fleet['durable_by_node'].get('$KILLED', 0)")
[ "$OK" = 900 ] || fail "$OK of 900 frames DURABLE"
[ "$REROUTED" -gt 0 ] || fail "no frame re-sent after the kill, though node 1 held $HELD frame(s) RECEIVED and not DURABLE"
[ "$FAILOVERS" -ge 1 ] || fail "no failover counted"
[ "$FIRST" -gt 0 ] || fail "no re-sent frame reached DURABLE"
KILL_TO_DURABLE=$((FIRST - KILL_MS))
[ "$KILL_TO_DURABLE" -ge 0 ] ||
	fail "a re-sent frame was DURABLE $((-KILL_TO_DURABLE)) ms before the kill: the node was failed over by something else"
echo "node 1 ($KILLED) acked $AFTER frames before it died; $REROUTED re-sent, $RECV of them RECEIVED there"

# routing as specified (docs/FLEET.md, the same code as tests/fleet/hrw.py): every frame is
# on its wafer's owner among all three nodes, or among the two left after the kill
python3 - "$HERE" "$TMP/placement" "${NODE_ID[0]}" "${NODE_ID[1]}" "${NODE_ID[2]}" <<'PY' ||
import sys
sys.path.insert(0, sys.argv[1])
from hrw import owner
a, b, c = sys.argv[3:6]
bad = [l for l in open(sys.argv[2]) if not l.startswith("#")
       and l.split()[2] not in (owner([a, b, c], l.split()[1]), owner([a, c], l.split()[1]))]
print("%d frames off their HRW owner" % len(bad))
sys.exit(1 if bad else 0)
PY
	fail "frames placed against the HRW rule"

step "restart the killed node on its data dir; check every node"
node_start 1
fleet_pg_verify "$TMP/all.man"
[ "$F_MISSING" = 0 ] && [ "$F_BAD" = 0 ] || fail "ingest-verify --fleet: $F_MISSING missing, $F_BAD bad"
echo "ingest-verify --fleet: 0 missing, 0 bad, $F_COPIES copies, $F_DUPLICATES frames on two nodes"
for i in 0 1 2; do node_stop "$i"; done
check_placement "$TMP/placement" "$TMP/all.man"
echo "copies stored twice: $COPIES_TWICE (at most the $RECV re-sent frames node 1 had RECEIVED)"
[ "$COPIES_TWICE" -le "$RECV" ] || fail "$COPIES_TWICE frames stored twice but only $RECV were re-sent after RECEIVED"

step "the same 900 frames again: duplicates (same crc) are acked, never a conflict"
for i in 0 1 2; do node_start "$i"; done
"$SEND" --servers "$(nodes_servers)" --wafer LOT7 --wafers 30 --count 900 --size 64K \
	--seed 11 --credits 16 --json --quiet >"$TMP/again.json" 2>"$TMP/send-again.err" ||
	fail "re-send of the same frames failed"
{ read -r DUP; read -r OK2; } < <(jfields "$TMP/again.json" duplicate ok)
[ "$OK2" = 900 ] || fail "$OK2 of 900 frames acked on the second send"
# frames that went elsewhere than their owner in the first send are new to it now
MOVED=$(python3 - "$HERE" "$TMP/placement" "${NODE_ID[0]},${NODE_ID[1]},${NODE_ID[2]}" <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
from hrw import owner
nodes = sys.argv[3].split(",")
print(sum(1 for l in open(sys.argv[2]) if not l.startswith("#")
          and owner(nodes, l.split()[1]) != l.split()[2]))
PY
)
[ "$DUP" -ge $((900 - MOVED)) ] ||
	fail "only $DUP of 900 frames acked as duplicates; $MOVED had gone to another node than their owner"

echo "second send: 900 ok, $DUP duplicates (same crc32c, not rewritten)"
for i in 0 1 2; do node_stop "$i"; done

echo "fleet failover kill -9: 900/900 DURABLE; kill -> first re-sent frame DURABLE ${KILL_TO_DURABLE} ms;" \
	"frames re-sent $REROUTED; failovers $FAILOVERS; copies stored twice $COPIES_TWICE (fleet catalog: $F_DUPLICATES); PASS"
