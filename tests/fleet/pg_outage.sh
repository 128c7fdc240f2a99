#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/fleet/pg_outage.sh BUILD_DIR - PostgreSQL stopped in the middle of a stream: the
# node goes on ACKing every frame DURABLE (its file + SQLite catalog), Stats shows the
# fleet catalog down and the export lag growing (rows and seconds), and once PostgreSQL
# is back the lag drains to 0 and `ingest-verify --fleet` finds every frame.
set -uo pipefail
BUILD=${1:?usage: pg_outage.sh BUILD_DIR}
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib.sh"
. "$HERE/pg_lib.sh"
step() { echo "== $(date -u +%T) $*"; }
B=$BUILD/apps
RPC="/usr/bin/python3 $HERE/fleet_rpc.py"
W=$(mktemp -d /tmp/h3000-fleet-outage.XXXXXX)
export FLEET_RPC_STUBS=$W/stubs
P1= SEND=
N=200
RATE=8

fail() {
	echo "FAIL: $*" >&2
	for f in "$W"/*.log; do [ -f "$f" ] && { echo "--- $f" >&2; tail -20 "$f" >&2; }; done
	exit 1
}
cleanup() {
	for p in $P1 $SEND; do kill -KILL "$p" 2>/dev/null; done
	wait 2>/dev/null
	pg_cleanup
	rm -rf "$W"
}
trap cleanup EXIT
ing_need_built "$B/ingestd" "$B/ingest-send" "$B/ingest-verify"
# wait_stats EXPR SECONDS WHAT: poll rpc Stats of the node until EXPR (over its fields)
wait_stats() {
	$RPC wait "$S1" "$1" "$2" >"$W/stats.json" || fail "$3: '$1' not true after $2 s: $(cat "$W/stats.json")"
}
field() { json "$W/stats.json" "$1"; }

step "temporary PostgreSQL, one node exporting to it"
pg_start
ing_start "$B/ingestd" "$W/port1" "$W/n1.log" --data-dir "$W/d1" --node-id n1 \
	--fleet-db "$PG_CONNINFO" --fleet-heartbeat-ms 200 --pool 1M:16
P1=$ING_PID S1=$ING_SERVER

step "a stream of $N frames at $RATE frames/s; PostgreSQL stopped once 10 are exported"
"$B/ingest-send" --server "$S1" --count $N --size 16K --wafer outage --rate $RATE \
	--manifest "$W/sent.man" --json --quiet >"$W/send.json" 2>"$W/send.log" &
SEND=$!
wait_stats "fleetExportedRows >= 10 and fleetPgUp" 60 "export before the outage"
pg_stop || fail "pg_ctl stop failed"
$RPC stats "$S1" >"$W/stats.json" || fail "Stats failed"
d_stop=$(field framesDurable) lag_stop=$(field fleetExportLagRows)
echo "PostgreSQL stopped: $d_stop frames durable, lag $lag_stop rows"
[ "$d_stop" -lt $N ] || fail "the stream was over before PostgreSQL stopped (machine too slow?)"

step "PostgreSQL down: acks go on, the export lag grows"
wait "$SEND"; rc=$?; SEND=
[ $rc = 0 ] || fail "ingest-send exited $rc during the outage: $(cat "$W/send.log")"
[ "$(json "$W/send.json" ok)" = $N ] && [ "$(json "$W/send.json" failed)" = 0 ] ||
	fail "not every frame ACKed DURABLE ok during the outage: $(cat "$W/send.json")"
# the lag is the exporter's count, refreshed every 200 ms: wait for it to cover the last frames
wait_stats "framesDurable == $N and not fleetPgUp and fleetExportErrors > 0 and fleetExportLagRows + fleetExportedRows == $N" 30 "after the stream"
lag=$(field fleetExportLagRows) ex=$(field fleetExportedRows) lags=$(field fleetExportLagSeconds)
echo "all $N frames DURABLE, $((N - d_stop)) of them with PostgreSQL down; lag $lag rows ($lags s), $ex exported"
[ "$lag" = $((N - ex)) ] || fail "lag $lag rows, want $N durable - $ex exported"
[ "$lag" -gt "$lag_stop" ] || fail "lag did not grow during the outage: $lag_stop -> $lag rows"
/usr/bin/python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) > 0 else 1)" "$lags" ||
	fail "export lag $lags s with $lag rows waiting"

step "PostgreSQL back: the lag drains to 0"
pg_start_again
wait_stats "fleetExportLagRows == 0 and fleetExportedRows >= $N and fleetPgUp" 60 "drain after the outage"
got=$(pg_sql "SELECT count(*) FROM fleet_frames WHERE node_id = 'n1' AND wafer_id = 'outage'")
[ "$got" = $N ] || fail "fleet_frames holds $got rows of the stream, want $N"
"$B/ingest-verify" --fleet "$PG_CONNINFO" --manifest "$W/sent.man" --data-dir "n1=$W/d1" \
	--json >"$W/verify.json" || fail "ingest-verify --fleet: $(cat "$W/verify.json")"
echo "verify: $(cat "$W/verify.json")"
[ "$(json "$W/verify.json" ok)" = $N ] || fail "ingest-verify --fleet: $(cat "$W/verify.json")"
echo "PASS"
