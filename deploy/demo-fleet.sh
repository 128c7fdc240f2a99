#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# demo-fleet.sh BUILD_DIR [--keep] [--count N] [--rdma] - the `make demo-fleet` driver, all on
# this machine, loopback only:
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
# --rdma (make demo-fleet RDMA=1): the same over RDMA, inside the Soft-RoCE qemu guest
# (deploy/rxe-vm, 4 vCPUs): the three nodes serve RDMA on the guest's rxe device (each its
# own rdma_cm port), ingest-send --servers pulls every frame with RDMA READ (libingest's
# one registered pool, shared by the three node sessions); membership is the servers list
# and every node's files are checked against what it acked (no PostgreSQL in the guest).
set -euo pipefail
usage() { echo "usage: deploy/demo-fleet.sh BUILD_DIR [--keep] [--count N] [--rdma]" >&2; exit 2; }
[ $# -ge 1 ] || usage
BUILD=$(cd "$1" && pwd) || usage
shift
KEEP=0
COUNT=
RDMA=0
ARGS=("$@")
while [ $# -gt 0 ]; do
	case "$1" in
	--keep) KEEP=1 ;;
	--count) COUNT=${2:?}; shift ;;
	--rdma) RDMA=1 ;;
	*) usage ;;
	esac
	shift
done
SRC=$(cd "$(dirname "$0")/.." && pwd)
if [ "$RDMA" = 1 ] && [ "${RXE_VM:-0}" != 1 ]; then
	echo "demo-fleet: booting the Soft-RoCE guest (qemu TCG, 4 vCPUs; a minute or more)"
	exec env RXE_VM_SMP="${RXE_VM_SMP:-4}" RXE_VM_MEM="${RXE_VM_MEM:-3072}" RXE_VM_RW= \
		"$SRC/deploy/rxe-vm/run-in-rxe-vm.sh" bash "$SRC/deploy/demo-fleet.sh" "$BUILD" "${ARGS[@]}"
fi
# under TCG a smaller run shows the same
COUNT=${COUNT:-$([ "$RDMA" = 1 ] && echo 240 || echo 600)}
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
# the fleet tests' helpers: temporary PostgreSQL, nodes on loopback, always stopped on exit
FLEET_PG=1
XPORT=()
if [ "$RDMA" = 1 ]; then
	FLEET_PG=0
	XPORT=(--transport rdma)
	echo 256 >/proc/sys/vm/nr_hugepages   # the nodes' pools on hugepage MRs
else
	. "$SRC/tests/fleet/pg_lib.sh"
fi
. "$SRC/tests/fleet/fleet_lib.sh"
# node I: on RDMA its own rdma_cm port and cpu pair
demo_node() {
	if [ "$RDMA" = 1 ]; then
		node_start "$1" --rdma on --rdma-port $((7480 + $1)) --lcores "$((2 * ($1 % 2))),$((2 * ($1 % 2) + 1))"
	else
		node_start "$1"
	fi
}
for b in "$INGESTD" "$SEND" "$VERIFY"; do
	[ -x "$b" ] || { echo "demo-fleet: $b is not built (run: make build)" >&2; exit 1; }
done
trap fleet_cleanup EXIT

if [ "$RDMA" = 1 ]; then
	step "three ingest nodes over RDMA on $RXE_DEV ($RXE_IP), membership from the servers list"
else
	step "PostgreSQL (fleet catalog + membership) and three ingest nodes"
	fleet_pg_start
fi
for i in 0 1 2; do
	demo_node "$i"
	cm=
	[ "$RDMA" = 1 ] && cm="  rdma_cm $RXE_IP:$((7480 + i))"
	echo "  node$i  ${NODE_ADDR[$i]}  data $TMP/data$i$cm"
done
SERVERS=$(nodes_servers)

step "ingest-send --servers $SERVERS ${XPORT[*]}: $COUNT frames over 24 wafers; kill -9 node1 half-way"
"$SEND" --servers "$SERVERS" "${XPORT[@]}" --wafer demo-lot --wafers 24 --count "$COUNT" --size 256K \
	--seed 42 --credits 16 --ack-deadline-ms 5000 --manifest "$TMP/all.man" --placement "$TMP/placement" \
	--json >"$TMP/send.json" 2>"$TMP/send.err" &
SEND_PID=$!
wait_lines "$TMP/placement" $((COUNT / 2)) 120
KILL_MS=$(now_ms)
kill -KILL "${NODE_PID[1]}"
wait "${NODE_PID[1]}" 2>/dev/null || true
NODE_PID[1]=
echo "  killed node1 (pid gone) after $(grep -vc '^#' "$TMP/placement") DURABLE acks"
rc=0
wait "$SEND_PID" || rc=$?
SEND_PID=
[ "$rc" = 0 ] || fail "ingest-send exited $rc (see $TMP/send.err)"
grep -E "^ingest-send: [0-9]+ frames|^  transport|^  fleet|^  node |first failover" "$TMP/send.err" || true

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

if [ "$RDMA" = 1 ]; then
	step "node1 restarts; ingest-verify of every node against the frames it acked"
	demo_node 1
	for i in 0 1 2; do node_stop "$i"; done
	check_placement "$TMP/placement" "$TMP/all.man"
	echo "  $COUNT frames sent: every one acked DURABLE by a node that holds it byte for byte; $COPIES_TWICE stored on two nodes (same crc32c)"
	echo
	echo "demo-fleet: none lost - every one of $COUNT frames is DURABLE on a node, moved over RDMA"
	exit 0
fi
step "node1 restarts; export catches up; ingest-verify --fleet against PostgreSQL and every node"
node_start 1
fleet_pg_verify "$TMP/all.man"
echo "  $COUNT frames sent: $F_MISSING missing, $F_BAD bad, $F_COPIES copies, $F_DUPLICATES stored on two nodes (same crc32c)"
[ "$F_MISSING" = 0 ] && [ "$F_BAD" = 0 ] || fail "frames lost or corrupt"
for i in 0 1 2; do node_stop "$i"; done
echo
echo "demo-fleet: none lost - every one of $COUNT frames is DURABLE on a node and in the fleet catalog"
