#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# join_drain.sh BUILD_DIR - membership changes under a running stream. A temporary
# PostgreSQL (fleet catalog + membership), three ingestd (node0..2); ingest-send is given
# node0's address ONLY and learns the rest from rpc Members. 1200 frames over 60 wafers,
# open loop at 100 frames/s. After 300 DURABLE acks node3 starts and joins (heartbeat in
# PostgreSQL); after 700, node1 is set DRAINING (SIGUSR2).
# Checks, from the placement ingest-send writes (frame n, wafer, node), exactly by the HRW
# rule of docs/FLEET.md (tests/fleet/hrw.py):
#  - before the producer knew node3 (frames below the first one placed on node3): every
#    frame on owner(node0..2); after: on owner(node0..3); after the last frame node1
#    took: on owner(node0, node2, node3) - a draining node gets no new wafers;
#  - the drain was seen while frames were still coming (node1's last frame is not among
#    the last 100); every frame DURABLE; the fleet catalog (ingest-verify --fleet) has
#    all of them, 0 missing, 0 bad.
# Prints the share of wafers that moved at the join (about 1/4) and at the drain.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib.sh"
BUILD=$(cd "${1:?usage: join_drain.sh BUILD_DIR}" && pwd)
TMP=$(mktemp -d /tmp/fleet-join.XXXXXX)
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
for i in 0 1 2; do node_start "$i"; done
# the producer learns the fleet from node0 at connect: start it once node0 lists all three
wait_members "${NODE_ADDR[0]}" 3

step "1200 frames at 100/s, given node0 only; node3 joins after 300, node1 drains after 700"
"$SEND" --servers "${NODE_ADDR[0]}" --wafer LOT3 --wafers 60 --count 1200 --size 16K --seed 3 \
	--rate 100 --credits 16 --membership-refresh-ms 300 --frame-timeout-ms 120000 \
	--manifest "$TMP/all.man" --placement "$TMP/placement" --json --quiet --log-level info \
	>"$TMP/send.json" 2>"$TMP/send.err" &
SEND_PID=$!
wait_lines "$TMP/placement" 300 90
node_start 3
wait_lines "$TMP/placement" 700 90
kill -USR2 "${NODE_PID[1]}"
rc=0
wait "$SEND_PID" || rc=$?
SEND_PID=
[ "$rc" = 0 ] || fail "ingest-send exited $rc"
{ read -r OK; read -r KNOWN; } < <(jfields "$TMP/send.json" ok 'fleet["nodes_known"]')
[ "$OK" = 1200 ] || fail "$OK of 1200 frames DURABLE"
[ "$KNOWN" = 4 ] || fail "the producer knew $KNOWN nodes, want 4 (3 learned from Members + the joiner)"

python3 - "$HERE" "$TMP/placement" >"$TMP/routing.txt" <<'PY' || { cat "$TMP/routing.txt"; fail "placement against the HRW rule"; }
import sys
sys.path.insert(0, sys.argv[1])
from hrw import owner
rows = []
for l in open(sys.argv[2]):
    if l.startswith("#"):
        continue
    f, w, node, resends = l.split()
    rows.append((int(f.split("-")[-1]), w, node))
rows.sort()
first3 = min((n for n, w, node in rows if node == "node3"), default=None)
last1 = max(n for n, w, node in rows if node == "node1")
if first3 is None:
    print("no frame ever went to node3"); sys.exit(1)
bad = []
for n, w, node in rows:
    if n < first3:
        want = owner(["node0", "node1", "node2"], w)
    elif n <= last1:
        want = owner(["node0", "node1", "node2", "node3"], w)
    else:
        want = owner(["node0", "node2", "node3"], w)
    if node != want:
        bad.append((n, w, node, want))
if bad:
    print("%d frames off their HRW owner, e.g. %s" % (len(bad), bad[:5])); sys.exit(1)
if last1 > rows[-1][0] - 100:
    print("node1 took frame %d of %d: the drain was not seen in time" % (last1, rows[-1][0])); sys.exit(1)
wafers = sorted({w for n, w, node in rows})
joined = [w for w in wafers if owner(["node0", "node1", "node2"], w) != owner(["node0", "node1", "node2", "node3"], w)]
drained = [w for w in wafers if owner(["node0", "node1", "node2", "node3"], w) == "node1"]
seen3 = {w for n, w, node in rows if node == "node3" and n <= last1}
print("join: %d of %d wafers moved (%.2f; 1/N = 0.25), all to node3 (first frame there: %d)"
      % (len(joined), len(wafers), len(joined) / len(wafers), first3))
print("drain: %d of %d wafers moved off node1 (%.2f; node1's last frame: %d of %d)"
      % (len(drained), len(wafers), len(drained) / len(wafers), last1, rows[-1][0]))
if not seen3 <= set(joined):
    print("wafers on node3 that HRW did not move: %s" % sorted(seen3 - set(joined))); sys.exit(1)
PY
cat "$TMP/routing.txt"

step "fleet catalog: every frame once, intact"
fleet_pg_verify "$TMP/all.man"
[ "$F_MISSING" = 0 ] && [ "$F_BAD" = 0 ] || fail "ingest-verify --fleet: $F_MISSING missing, $F_BAD bad"
for i in 0 1 2 3; do node_stop "$i"; done
echo "fleet join+drain: 1200/1200 DURABLE, routing exact; $(tr '\n' ' ' <"$TMP/routing.txt")PASS"
