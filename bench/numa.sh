#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench/numa.sh - what NUMA placement is worth on this machine: the same ingest load
# (ingest-send -> ingestd, sink null) once with the plan's placement (ingest-topo) and once
# deliberately remote (--lcores on another node's cores, --pool-node that node), printing
# MB/s for each and the ratio planned/remote. Not a test: no timing assertion.
# On a single-node machine there is nothing to compare: it says so and exits 0.
#
# usage: bench/numa.sh [BUILD_DIR]   (default: ./build)
# env:   COUNT (frames, default 2000)  SIZE (bytes per frame, default 4M)
#        LISTEN (default 127.0.0.1:50551)  SERVER (what ingest-send dials, default $LISTEN)
#        INGESTD_ARGS (extra ingestd arguments, e.g. "--rdma-dev mlx5_0")
# Written against these flags (ingestd / ingest-send are maintained elsewhere; adjust here
# if they change): ingestd --listen ADDR --data-dir DIR --sink null|file --lcores LIST
# --pool-node N;  ingest-send --server ADDR --count N --size SIZE.
set -uo pipefail

BUILD=${1:-build}
COUNT=${COUNT:-2000}
SIZE=${SIZE:-4M}
LISTEN=${LISTEN:-127.0.0.1:50551}
SERVER=${SERVER:-$LISTEN}
TOPO=$BUILD/apps/ingest-topo
INGESTD=$BUILD/apps/ingestd
SEND=$BUILD/apps/ingest-send

die() { echo "numa.sh: $*" >&2; exit 1; }
[ -x "$TOPO" ] || die "$TOPO not built (cmake --build $BUILD --target ingest-topo)"

plan=$("$TOPO" --json) || die "ingest-topo failed"
# control, dataplane list, pool node, and a remote placement with the same shape
read -r nodes plan_lcores plan_pool remote_lcores remote_node <<<"$(python3 - "$plan" <<'PY'
import json, sys
d = json.loads(sys.argv[1])
t, p = d["topology"], d["plan"]
nodes = len(t["nodes"])
home = p["home_node"]
want = 1 + len(p["dataplane_cpus"])
remote = [n for n in t["nodes"] if n["id"] != home and len(n["cores"]) >= want]
if nodes < 2 or not remote:
    print(nodes, "-", "-", "-", "-")
else:
    r = remote[0]
    print(nodes, p["eal"]["lcores"], p["pool_node"] if p["pool_node"] is not None else home,
          ",".join(str(c) for c in r["cores"][:want]), r["id"])
PY
)"
if [ "${nodes:-1}" -lt 2 ] || [ "$remote_node" = - ]; then
	echo "numa.sh: this machine has ${nodes:-1} NUMA node(s) with enough cores: cannot compare a local and a remote placement."
	echo "numa.sh: run it on a multi-socket (or SNC) machine; ingest-topo shows the topology."
	exit 0
fi
echo "numa.sh: $nodes nodes; planned: --lcores $plan_lcores --pool-node $plan_pool;" \
     "remote: --lcores $remote_lcores --pool-node $remote_node; $COUNT x $SIZE"
[ -x "$INGESTD" ] || die "$INGESTD not built"
[ -x "$SEND" ] || die "$SEND not built"

bytes=$(numfmt --from=iec "$SIZE") || die "SIZE=$SIZE: not a size"
work=$(mktemp -d /tmp/ing-numa-bench-XXXXXX) || die "mktemp"
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT

wait_listen() { # bounded: 20 s
	local host=${LISTEN%:*} port=${LISTEN##*:}
	for _ in $(seq 200); do
		kill -0 "$pid" 2>/dev/null || return 1
		(exec 3<>"/dev/tcp/$host/$port") 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}

run_one() { # run_one NAME LCORES POOL_NODE -> prints MB/s
	local name=$1 lcores=$2 node=$3
	# shellcheck disable=SC2086
	"$INGESTD" --listen "$LISTEN" --data-dir "$work/$name" --sink null --lcores "$lcores" \
		--pool-node "$node" ${INGESTD_ARGS:-} > "$work/$name.log" 2>&1 &
	pid=$!
	wait_listen || { cat "$work/$name.log" >&2; die "ingestd ($name) did not start listening on $LISTEN"; }
	local t0 t1
	t0=$(date +%s.%N)
	"$SEND" --server "$SERVER" --count "$COUNT" --size "$SIZE" > "$work/$name.send" 2>&1 \
		|| { cat "$work/$name.send" >&2; die "ingest-send ($name) failed"; }
	t1=$(date +%s.%N)
	kill "$pid"; wait "$pid" 2>/dev/null; pid=
	awk -v a="$t0" -v b="$t1" -v n="$COUNT" -v s="$bytes" 'BEGIN{printf "%.1f", n*s/(b-a)/1e6}'
}

local_mbs=$(run_one planned "$plan_lcores" "$plan_pool") || exit 1
remote_mbs=$(run_one remote "$remote_lcores" "$remote_node") || exit 1
echo "planned placement: $local_mbs MB/s"
echo "remote placement:  $remote_mbs MB/s"
awk -v a="$local_mbs" -v b="$remote_mbs" 'BEGIN{ if (b > 0) printf "ratio planned/remote: %.2f\n", a/b; else print "ratio: n/a (remote run moved no data)" }'
