#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/fleet/export.sh BUILD_DIR - the fleet catalog with a real PostgreSQL (a temporary
# cluster, tests/fleet/pg_lib.sh) and two ingestd nodes on loopback:
#  1. frames sent to each node are exported (Stats: lag 0, exported = sent) and
#     `ingest-verify --fleet` finds every frame, every copy intact;
#  2. the same frames sent to the other node too: stored twice, same CRC, counted as
#     duplicates by ingest-verify --fleet, not errors;
#  3. the export is idempotent: a node restarted with its whole catalog queued again
#     exports it again, and PostgreSQL still holds one row per (frame, node);
#  4. membership: Members from either node lists both (source postgresql); SIGUSR2 makes
#     one DRAINING (Members, Negotiate); kill -9 of one: DOWN after 3 heartbeats;
#  5. ingest-verify --fleet catches a corrupt copy and a frame no node has.
set -uo pipefail
BUILD=${1:?usage: export.sh BUILD_DIR}
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib.sh"
. "$HERE/pg_lib.sh"
step() { echo "== $(date -u +%T) $*"; }
B=$BUILD/apps
RPC="/usr/bin/python3 $HERE/fleet_rpc.py"
HB=200
W=$(mktemp -d /tmp/h3000-fleet-export.XXXXXX)
export FLEET_RPC_STUBS=$W/stubs
P1= P2=

fail() {
	echo "FAIL: $*" >&2
	for f in "$W"/*.log; do [ -f "$f" ] && { echo "--- $f" >&2; tail -20 "$f" >&2; }; done
	exit 1
}
cleanup() {
	for p in $P1 $P2; do kill -KILL "$p" 2>/dev/null; done
	wait 2>/dev/null
	pg_cleanup
	rm -rf "$W"
}
trap cleanup EXIT
ing_need_built "$B/ingestd" "$B/ingest-send" "$B/ingest-verify"

# node N: start ingestd node N (data dir $W/dN) -> P<N>, S<N> (its address)
node() {
	local n=$1
	shift
	ing_start "$B/ingestd" "$W/port$n" "$W/n$n.log" --data-dir "$W/d$n" --node-id "n$n" \
		--fleet-db "$PG_CONNINFO" --fleet-heartbeat-ms $HB --pool 1M:16 "$@"
	eval "P$n=$ING_PID S$n=$ING_SERVER"
}
# stat ADDR FIELD: one field of rpc Stats
stat() { $RPC stats "$1" | /usr/bin/python3 -c "import json,sys; print(json.load(sys.stdin).get(sys.argv[1], 0))" "$2"; }
# wait_lag0 ADDR EXPORTED: until the node's export lag is 0 and it exported >= EXPORTED rows
wait_lag0() {
	$RPC wait "$1" "fleetExportLagRows == 0 and fleetExportedRows >= $2" 30 >"$W/wait.json" ||
		fail "$1: export lag not 0 with >= $2 rows exported after 30 s: $(cat "$W/wait.json")"
}
members() { $RPC members "$1" | /usr/bin/python3 -c "
import json,sys
d=json.load(sys.stdin)
print(d['source'], ' '.join('%s=%s' % (m['nodeId'], m['state'].replace('MEMBER_','')) for m in d['members']))"; }

step "temporary PostgreSQL"
pg_start
echo "PostgreSQL on 127.0.0.1:$PG_PORT ($PG_DIR)"

step "two nodes, frames to each, exported"
node 1
node 2
"$B/ingest-send" --server "$S1" --count 120 --size 32K --wafer wA --manifest "$W/a.man" --quiet ||
	fail "ingest-send to n1 failed"
"$B/ingest-send" --server "$S2" --count 80 --size 32K --wafer wB --seed 2 --manifest "$W/b.man" --quiet ||
	fail "ingest-send to n2 failed"
wait_lag0 "$S1" 120
wait_lag0 "$S2" 80
got=$(pg_sql "SELECT node_id || ':' || count(*) FROM fleet_frames GROUP BY node_id ORDER BY 1" | tr '\n' ' ')
[ "$got" = "n1:120 n2:80 " ] || fail "fleet_frames per node: '$got', want 'n1:120 n2:80'"
[ "$(stat "$S1" fleetPgUp)" = True ] || fail "n1 Stats: fleetPgUp is not true"
[ "$(stat "$S1" fleetExportErrors)" = 0 ] || fail "n1 Stats: export errors"
row=$(pg_sql "SELECT wafer_id, frame_id, length, lpad(to_hex(crc32c), 8, '0'), file_name FROM fleet_frames WHERE node_id='n1' AND frame_id='frame-7'")
want=$(awk '$1 == "frame-7" { printf "%s|%s|%s|%s|", $2, $1, $3, $4 }' "$W/a.man")
case "$row" in "${want}frames/wA/frame-7.frame") ;; *) fail "PostgreSQL row of wA/frame-7: '$row', manifest '$want'" ;; esac
cat "$W/a.man" "$W/b.man" >"$W/all.man"
"$B/ingest-verify" --fleet "$PG_CONNINFO" --manifest "$W/all.man" --data-dir "n1=$W/d1" \
	--data-dir "n2=$W/d2" --json >"$W/v1.json" || fail "ingest-verify --fleet: $(cat "$W/v1.json")"
echo "verify: $(cat "$W/v1.json")"
[ "$(json "$W/v1.json" 'ok')" = 200 ] && [ "$(json "$W/v1.json" 'missing')" = 0 ] &&
	[ "$(json "$W/v1.json" 'duplicates')" = 0 ] || fail "ingest-verify --fleet: $(cat "$W/v1.json")"

step "the same frames on the other node: duplicates, allowed"
"$B/ingest-send" --server "$S2" --count 120 --size 32K --wafer wA --quiet || fail "re-send to n2 failed"
wait_lag0 "$S2" 200
"$B/ingest-verify" --fleet "$PG_CONNINFO" --manifest "$W/all.man" --data-dir "n1=$W/d1" \
	--data-dir "n2=$W/d2" --json >"$W/v2.json" || fail "ingest-verify --fleet with duplicates: $(cat "$W/v2.json")"
echo "verify: $(cat "$W/v2.json")"
[ "$(json "$W/v2.json" 'duplicates')" = 120 ] && [ "$(json "$W/v2.json" 'copies')" = 320 ] ||
	fail "want 120 duplicates in 320 copies: $(cat "$W/v2.json")"

step "idempotent export: n1 restarted with its whole catalog queued again"
kill -TERM "$P1"; wait "$P1" 2>/dev/null; P1=
sqlite3 "$W/d1/catalog.db" "DROP TRIGGER fleet_outbox_frames" || fail "sqlite3 failed"
node 1   # no trigger: the node queues every catalog row again
wait_lag0 "$S1" 120
[ "$(stat "$S1" fleetExportedRows)" = 120 ] || fail "n1 re-exported $(stat "$S1" fleetExportedRows) rows, want 120"
[ "$(pg_sql "SELECT count(*) FROM fleet_frames WHERE node_id='n1'")" = 120 ] ||
	fail "n1 has $(pg_sql "SELECT count(*) FROM fleet_frames WHERE node_id='n1'") rows after re-export, want 120"
[ "$(stat "$S1" fleetExportErrors)" = 0 ] || fail "n1: export errors on re-export"

step "membership: both nodes, DRAINING, DOWN"
sleep 0.5
m=$(members "$S1")
[ "$m" = "postgresql n1=ACTIVE n2=ACTIVE" ] || fail "Members from n1: '$m'"
addr=$(pg_sql "SELECT address FROM fleet_members WHERE node_id='n2'")
[ "$addr" = "$S2" ] || fail "fleet_members address of n2: '$addr', want $S2"
kill -USR2 "$P2"
for i in $(seq 1 600); do
	m=$(members "$S1")
	[ "$m" = "postgresql n1=ACTIVE n2=DRAINING" ] && break
	sleep 0.1
done
[ "$m" = "postgresql n1=ACTIVE n2=DRAINING" ] || fail "Members from n1 after SIGUSR2 to n2: '$m'"
st=$($RPC negotiate "$S2" | /usr/bin/python3 -c "import json,sys; d=json.load(sys.stdin); print(d['nodeId'], d['nodeState'])")
[ "$st" = "n2 MEMBER_DRAINING" ] || fail "Negotiate on n2: '$st'"
kill -KILL "$P2"; wait "$P2" 2>/dev/null; P2=
sleep $(( (4 * HB + 999) / 1000 ))
m=$(members "$S1")
[ "$m" = "postgresql n1=ACTIVE n2=DOWN" ] || fail "Members from n1 after kill -9 of n2: '$m'"

step "ingest-verify --fleet finds a corrupt copy and a frame no node has"
f=$(ls "$W/d2/frames/wB/" | head -1)
printf 'X' | dd of="$W/d2/frames/wB/$f" bs=1 seek=100 conv=notrunc status=none
pg_sql "DELETE FROM fleet_frames WHERE wafer_id='wB' AND frame_id='frame-3'"
"$B/ingest-verify" --fleet "$PG_CONNINFO" --manifest "$W/all.man" --data-dir "n1=$W/d1" \
	--data-dir "n2=$W/d2" --json >"$W/v3.json" 2>"$W/v3.err" && fail "ingest-verify --fleet passed a corrupt copy"
echo "verify: $(cat "$W/v3.json")"
[ "$(json "$W/v3.json" 'bad')" -ge 1 ] && [ "$(json "$W/v3.json" 'missing')" = 1 ] ||
	fail "want >= 1 bad and 1 missing: $(cat "$W/v3.json")"
grep -q "crc32c" "$W/v3.err" || fail "no crc32c problem reported: $(cat "$W/v3.err")"
echo "PASS"
