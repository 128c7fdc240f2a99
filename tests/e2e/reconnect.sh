#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# reconnect.sh BUILD_DIR term|kill9|inflight - a single-server producer rides through a
# restart of its ingest node (OPERATIONS.md "Upgrades"), or through a lost connection to a
# node that lives on: ingest-send --server (not --servers) streams 300 frames;
#  term, kill9: the node is stopped mid-run (SIGTERM: it drains; kill -9: frames it held
#    RECEIVED and not DURABLE are lost with it) and started again on the same port and
#    data dir;
#  inflight: the connection drops while the node holds frames RECEIVED and not DURABLE,
#    and the node keeps them: it is stopped (SIGSTOP) until ingest-send, whose PINGs
#    (--keepalive 1s) go unanswered, declares the connection lost, then resumed (SIGCONT).
#    The reconnect's re-send of a frame the node still holds is answered "already in
#    flight": ingest-send must say so and send it again until that earlier send has ended
#    (the gate opens only once it said so), when the node acks it DURABLE as a duplicate.
# ingest-send must reconnect (--reconnect-timeout), re-send what was not DURABLE and exit 0
# with 300 of 300 frames DURABLE. What the node holds is checked independently of what the
# producer says: ingest-verify of the data dir against the manifest (every frame, byte for
# byte) and the catalog (one row per frame: stored once, however often sent).
# The moment of the stop is the test's: the node's fdatasync is held (fsync_gate.so) from
# before the producer starts, so the producer cannot finish before the stop, and the stop
# comes once the node holds frames RECEIVED and not DURABLE (kill -9: those must be
# re-sent; SIGTERM: the gate opens first and the node drains them, the frames not yet
# sent go to the restarted node; inflight: the gate stays closed until the re-send was
# refused). Bounded: every wait has a limit; the EXIT trap stops every process.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib.sh"
BUILD=$(cd "${1:?usage: reconnect.sh BUILD_DIR term|kill9|inflight}" && pwd)
MODE=${2:?usage: reconnect.sh BUILD_DIR term|kill9|inflight}
case $MODE in
term | kill9 | inflight) ;;
*) echo "reconnect.sh: mode term, kill9 or inflight, not '$MODE'" >&2; exit 2 ;;
esac
TMP=$(mktemp -d /tmp/reconnect-$MODE.XXXXXX)
. "$HERE/../fleet/fleet_lib.sh"
ing_need_built "$INGESTD" "$SEND" "$VERIFY"
trap fleet_cleanup EXIT
fail() {
	echo "FAIL: $*" >&2
	fleet_log_tails
	exit 1
}
N=300

step "one node, its fdatasync held from before the producer starts"
node_gate 0
node_start 0
gate_close 0
ADDR=${NODE_ADDR[0]}

KEEPALIVE=()
[ "$MODE" = inflight ] && KEEPALIVE=(--keepalive 1s)   # a node that says nothing is lost
step "ingest-send --server $ADDR: $N frames"
"$SEND" --server "$ADDR" --wafer RC --count $N --sizes 64K-512K --seed 23 --credits 16 \
	--reconnect-timeout 120s --frame-timeout 180s "${KEEPALIVE[@]}" --manifest "$TMP/all.man" \
	--json --quiet >"$TMP/send.json" 2>"$TMP/send.err" &
SEND_PID=$!
hold_received 0
echo "the node holds $HELD frame(s) RECEIVED and not DURABLE"
said() { grep -q "$1" "$TMP/send.err"; }
if [ "$MODE" = inflight ]; then
	step "SIGSTOP of the node (it keeps what it holds) until ingest-send drops the connection"
	kill -STOP "${NODE_PID[0]}"
	wait_for "ingest-send declaring its connection lost" 60 said "connection to $ADDR lost"
	kill -CONT "${NODE_PID[0]}"
	step "the reconnect's re-send of a frame the node still holds waits for that earlier send"
	# the gate is closed: what the node held cannot have ended, so its re-send is refused
	wait_for "ingest-send waiting for a frame the node still holds" 120 said \
		"still holds an earlier send of it in flight"
	release 0
	NODE_GATE[0]=
elif [ "$MODE" = kill9 ]; then
	step "kill -9 of the node; start it again on the same port and data dir"
	kill -KILL "${NODE_PID[0]}"
	wait "${NODE_PID[0]}" 2>/dev/null || true
	NODE_PID[0]=
	release 0
else
	step "SIGTERM (the node drains what it holds); start it again on the same port and data dir"
	release 0
	node_stop 0
fi
kill -0 "$SEND_PID" 2>/dev/null || fail "ingest-send ended while its node was down"
if [ "$MODE" != inflight ]; then
	NODE_GATE[0]=
	node_start 0
	[ "${NODE_ADDR[0]}" = "$ADDR" ] || fail "the node came back on ${NODE_ADDR[0]}, not $ADDR"
fi
rc=0
wait "$SEND_PID" || rc=$?
SEND_PID=
[ "$rc" = 0 ] || fail "ingest-send exited $rc"
{ read -r OK; read -r FAILED; read -r RECONNECTS; read -r RESENT; read -r RECV; read -r DUP; } < <(
	jfields "$TMP/send.json" ok failed reconnects resent resent_after_received duplicate)
[ "$OK" = $N ] && [ "$FAILED" = 0 ] || fail "$OK of $N frames DURABLE, $FAILED failed"
[ "$RECONNECTS" -ge 1 ] || fail "no lost connection counted"
# kill -9: the frames the node held RECEIVED were lost with it and must have been re-sent
if [ "$MODE" = kill9 ]; then
	[ "$RESENT" -ge "$HELD" ] || fail "$RESENT frame(s) re-sent, but the node held $HELD RECEIVED when killed"
fi
# inflight: the node stored what it held from the lost connection; each re-send of such a
# frame was acked as its duplicate (DURABLE once), never failed
if [ "$MODE" = inflight ]; then
	[ "$DUP" -ge "$HELD" ] || fail "$DUP frame(s) acked as duplicates, but the node held $HELD RECEIVED when the connection dropped"
fi
grep -q "reconnected to $ADDR" "$TMP/send.err" || fail "ingest-send did not say it reconnected"
echo "ingest-send: $OK/$N DURABLE ($DUP duplicate), exit 0; $RECONNECTS lost connection(s), $RESENT frame(s) re-sent ($RECV RECEIVED before)"

step "what the node holds: every frame byte for byte, one catalog row each"
node_stop 0
verify_node 0 "$TMP/all.man"
[ "$V_OK" = $N ] && [ "$V_BAD" = 0 ] && [ "$V_MISSING" = 0 ] ||
	fail "ingest-verify: $V_OK ok, $V_BAD bad, $V_MISSING missing of $N"
read -r ROWS DISTINCT < <(python3 - "$TMP/data0/catalog.db" <<'PY'
import sqlite3, sys
db = sqlite3.connect("file:%s?mode=ro" % sys.argv[1], uri=True)
print(*db.execute("select count(*), count(distinct frame_id) from frames where wafer_id = 'RC'").fetchone())
PY
)
[ "$ROWS" = $N ] && [ "$DISTINCT" = $N ] || fail "catalog: $ROWS rows for $DISTINCT frames, want $N and $N"
FILES=$(find "$TMP/data0/frames/RC" -name '*.frame' | wc -l)
[ "$FILES" = $N ] || fail "$FILES frame files, want $N"
echo "reconnect ($MODE): $N/$N DURABLE, ingest-verify $V_OK ok, catalog $ROWS rows, $FILES files; PASS"
