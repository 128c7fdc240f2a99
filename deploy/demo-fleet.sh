#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# demo-fleet.sh BUILD_DIR [--keep] [--count N] - the `make demo-fleet` driver, all on this
# machine, loopback only:
#  1. a temporary PostgreSQL cluster (the fleet catalog and membership; initdb + pg_ctl in
#     a temp dir, random port) and three ingestd node0..node2, each with its own data dir;
#  2. ingest-send --servers with all three: N frames (default 600) of 256 KiB over 24
#     wafers, each wafer to its HRW owner; node1 is killed with kill -9 in the middle;
#  3. where every frame ended up: frames and wafers per node, frames re-sent, the time
#     from the kill to the first re-sent frame's DURABLE ack;
#  4. node1 restarts on its data dir, the export to PostgreSQL catches up, and
#     ingest-verify --fleet checks every frame against the fleet catalog and every node's
#     files: none lost, every copy intact, copies stored twice counted;
#  5. everything stopped; the temp dir deleted unless --keep.
set -euo pipefail
usage() { echo "usage: deploy/demo-fleet.sh BUILD_DIR [--keep] [--count N]" >&2; exit 2; }
[ $# -ge 1 ] || usage
BUILD=$(cd "$1" && pwd) || usage
shift
KEEP=0
COUNT=600
while [ $# -gt 0 ]; do
	case "$1" in
	--keep) KEEP=1 ;;
	--count) COUNT=${2:?}; shift ;;
	*) usage ;;
	esac
	shift
done
SRC=$(cd "$(dirname "$0")/.." && pwd)
TMP=$(mktemp -d /tmp/h3000-demo-fleet.XXXXXX)
FLEET_KEEP=$KEEP
fail() {
	echo "demo-fleet: FAILED: $*" >&2
	for l in "$TMP"/node*.log "$TMP"/send.err; do
		[ -f "$l" ] && { echo "--- $l (tail) ---" >&2; tail -n 10 "$l" >&2; }
	done
	exit 1
}
step() { printf '\n== %s\n' "$*"; }
json() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2], {}, d))" "$@"; }
FLEET_PG=1
# the fleet tests' helpers: temporary PostgreSQL, nodes on loopback, always stopped on exit
. "$SRC/tests/fleet/pg_lib.sh"
. "$SRC/tests/fleet/fleet_lib.sh"
for b in "$INGESTD" "$SEND" "$VERIFY"; do
	[ -x "$b" ] || { echo "demo-fleet: $b is not built (run: make build)" >&2; exit 1; }
done
trap fleet_cleanup EXIT

step "PostgreSQL (fleet catalog + membership) and three ingest nodes"
fleet_pg_start
for i in 0 1 2; do
	node_start "$i"
	echo "  node$i  ${NODE_ADDR[$i]}  data $TMP/data$i"
done
SERVERS=$(nodes_servers)

step "ingest-send --servers $SERVERS: $COUNT frames over 24 wafers; kill -9 node1 half-way"
"$SEND" --servers "$SERVERS" --wafer demo-lot --wafers 24 --count "$COUNT" --size 256K --seed 42 \
	--credits 16 --ack-deadline-ms 5000 --manifest "$TMP/all.man" --placement "$TMP/placement" \
	--json >"$TMP/send.json" 2>"$TMP/send.err" &
SEND_PID=$!
wait_lines "$TMP/placement" $((COUNT / 2)) 120
kill -KILL "${NODE_PID[1]}"
KILL_MS=$(date +%s%3N)
wait "${NODE_PID[1]}" 2>/dev/null || true
NODE_PID[1]=
echo "  killed node1 (pid gone) after $(grep -vc '^#' "$TMP/placement") DURABLE acks"
rc=0
wait "$SEND_PID" || rc=$?
SEND_PID=
[ "$rc" = 0 ] || fail "ingest-send exited $rc (see $TMP/send.err)"
grep -E "^ingest-send: [0-9]+ frames|^  fleet|^  node node|first failover" "$TMP/send.err" || true

step "where every frame ended up"
FIRST=$(json "$TMP/send.json" 'fleet["first_rerouted_durable_unix_ms"]')
python3 - "$TMP/placement" <<'PY'
import sys
frames, wafers, resent = {}, {}, 0
for l in open(sys.argv[1]):
    if l.startswith("#"):
        continue
    f, w, node, r = l.split()
    frames[node] = frames.get(node, 0) + 1
    wafers.setdefault(node, set()).add(w)
    resent += int(r) > 0
for node in sorted(frames):
    print("  %-6s %5d frames DURABLE  %3d wafers" % (node, frames[node], len(wafers[node])))
print("  total  %5d frames, %d of them re-sent after the kill" % (sum(frames.values()), resent))
PY
[ "$FIRST" -gt 0 ] && echo "  kill -9 -> first re-sent frame DURABLE: $((FIRST - KILL_MS)) ms"

step "node1 restarts; export catches up; ingest-verify --fleet against PostgreSQL and every node"
node_start 1
fleet_pg_verify "$TMP/all.man"
echo "  $COUNT frames sent: $F_MISSING missing, $F_BAD bad, $F_COPIES copies, $F_DUPLICATES stored on two nodes (same crc32c)"
[ "$F_MISSING" = 0 ] && [ "$F_BAD" = 0 ] || fail "frames lost or corrupt"
for i in 0 1 2; do node_stop "$i"; done
echo
echo "demo-fleet: none lost - every one of $COUNT frames is DURABLE on a node and in the fleet catalog"
