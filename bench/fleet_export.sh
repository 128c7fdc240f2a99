#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench/fleet_export.sh BUILD_DIR [ROWS] - export throughput of the fleet catalog: rows per
# second from one node's outbox into PostgreSQL (a temporary local cluster, tests/fleet/
# pg_lib.sh), batched (--fleet-batch 500, the default) against one row per transaction
# (--fleet-batch 1, the baseline), measured in the same run on the same cluster.
#
# The node's catalog is filled with ROWS synthetic rows (default 20000) while it has no
# fleet catalog; started with --fleet-db, it queues them all into its outbox and exports
# them. PostgreSQL is stopped while the node starts and the poller (Stats every 20 ms)
# gets going, then started: the rate runs from the first exported row seen to the last.
# Not a test: no assertion on the figures; the machine's load changes them.
set -uo pipefail
BUILD=${1:?usage: fleet_export.sh BUILD_DIR [ROWS]}
ROWS=${2:-20000}
BASE_ROWS=$(( ROWS / 10 ))
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/tests/lib.sh"
. "$ROOT/tests/fleet/pg_lib.sh"
B=$BUILD/apps
W=$(mktemp -d /tmp/h3000-fleet-bench.XXXXXX)
export FLEET_RPC_STUBS=$W/stubs
RPC="/usr/bin/python3 $ROOT/tests/fleet/fleet_rpc.py"
PID=
fail() { echo "fleet_export: $*" >&2; [ -f "$W/n.log" ] && tail -5 "$W/n.log" >&2; exit 1; }
cleanup() { [ -n "$PID" ] && kill -KILL "$PID" 2>/dev/null; wait 2>/dev/null; pg_cleanup; rm -rf "$W"; }
trap cleanup EXIT
ing_need_built "$B/ingestd"

# catalog N DIR: a node data dir whose catalog holds N rows
catalog() {
	ing_start "$B/ingestd" "$W/port" "$W/n.log" --data-dir "$2" --pool 1M:4
	PID=$ING_PID
	kill -TERM "$PID"; wait "$PID"; PID=
	sqlite3 "$2/catalog.db" "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < $1)
		INSERT INTO frames (wafer_id, frame_id, timestamp, length, crc32c, path, transport, received_ns, durable_ns)
		SELECT 'bench-' || (i % 25), 'frame-' || i, i, 4194304, i * 2654435761 % 4294967296,
		       'frames/bench-' || (i % 25) || '/frame-' || i || '.frame', 2, i, i FROM c;" ||
		fail "sqlite3 failed"
}

# run BATCH N: export N queued rows with --fleet-batch BATCH; prints the JSON of the rate
run() {
	rm -rf "$W/d"
	cp -a "$W/d$2" "$W/d"
	pg_sql "TRUNCATE fleet_frames" 2>/dev/null
	pg_stop
	ing_start "$B/ingestd" "$W/port" "$W/n.log" --data-dir "$W/d" --pool 1M:4 --node-id bench \
		--fleet-db "$PG_CONNINFO" --fleet-batch "$1"
	PID=$ING_PID
	rm -f "$W/ready"
	$RPC export-rate "$ING_SERVER" "$2" 600 "$W/ready" >"$W/rate.json" &
	local poller=$! i
	for i in $(seq 1 300); do [ -e "$W/ready" ] && break; sleep 0.1; done
	pg_start_again
	wait $poller || fail "batch $1: export did not finish"
	cat "$W/rate.json"
	kill -TERM "$PID"; wait "$PID"; PID=
	local got
	got=$(pg_sql "SELECT count(*) FROM fleet_frames")
	[ "$got" = "$2" ] || fail "batch $1: PostgreSQL holds $got rows, want $2"
}

pg_start
catalog "$ROWS" "$W/d$ROWS"
catalog "$BASE_ROWS" "$W/d$BASE_ROWS"
base=$(run 1 "$BASE_ROWS") || exit 1
main=$(run 500 "$ROWS") || exit 1
echo "baseline --fleet-batch 1:   $base"
echo "default  --fleet-batch 500: $main"
/usr/bin/python3 -c "import json,sys; b=json.loads(sys.argv[1]); m=json.loads(sys.argv[2]); print('export: %.0f rows/s batched, %.0f rows/s one row a transaction: %.1fx' % (m['rows_per_s'], b['rows_per_s'], m['rows_per_s'] / b['rows_per_s']))" "$base" "$main"
