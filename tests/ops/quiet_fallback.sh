#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# quiet_fallback.sh BUILD_DIR - a host without RDMA, as its site engineer sees it:
#  1. ingestd (rdma auto, the default) says once, at INFO, that RDMA is not available and
#     why; no WARN about RDMA at start;
#  2. producers that asked for auto (ingest-send's default) get the gRPC stream without a
#     WARN per session, on their side or the node's;
#  3. /metrics: ingest_sessions keeps its meaning (every session in the table, idle ones
#     too), ingest_sessions_by_state tells them apart: two finished runs' sessions idle,
#     the running one's streaming or active.
set -uo pipefail
. "$(dirname "$0")/../lib.sh"

ing_test_setup ops-quiet "${1:-}" ingest-send
if [ -n "$(ls /sys/class/infiniband 2>/dev/null)" ]; then
	echo "NOT RUN: this host has RDMA devices ($(ls /sys/class/infiniband | tr '\n' ' '))"
	exit 77
fi

step "1. one INFO line at start, no WARN about RDMA"
ing_start "$INGESTD" "$TMP/port" "$TMP/ingestd.log" --data-dir "$TMP/data" --pool 1M:8 --workers 1 \
	--hugepages off --metrics-listen 127.0.0.1:0 --metrics-port-file "$TMP/mport"
PID=$ING_PID
grep -i "rdma" "$TMP/ingestd.log" | grep -E " (WARN|ERR) " && fail "a WARN or ERR about RDMA at start"
[ "$(grep -c "INFO.*RDMA not available (no RDMA device" "$TMP/ingestd.log")" = 1 ] ||
	fail "want one INFO line 'RDMA not available (no RDMA device ...)'"
echo "ok: $(grep "RDMA not available" "$TMP/ingestd.log")"

step "2. producers asking for auto: no WARN per session"
for r in 1 2; do
	"$SEND" --server "$ING_SERVER" --wafer "run$r" --count 3 --sizes 64K >"$TMP/send$r.out" 2>&1 ||
		fail "ingest-send run $r: $(cat "$TMP/send$r.out")"
	grep -E " WARN " "$TMP/send$r.out" && fail "ingest-send run $r warned about the fallback"
done
grep -E " WARN .*(session|fallback|RDMA)" "$TMP/ingestd.log" && fail "the node warned per session"
echo "ok: two auto runs, no WARN on either side"

step "3. /metrics: idle sessions apart from streaming ones"
"$SEND" --server "$ING_SERVER" --wafer run3 --count 40 --rate 4 --sizes 64K \
	--durable-manifest "$TMP/dm" >"$TMP/send3.out" 2>&1 &
SPID=$!
wait_for "run 3's first DURABLE frame" 60 test -s "$TMP/dm"
ing_metrics_url "$TMP/mport"
curl -sf "$ING_METRICS" >"$TMP/metrics" || fail "no /metrics"
kill -0 "$SPID" 2>/dev/null || fail "run 3 ended before the scrape: $(cat "$TMP/send3.out")"
m() { awk -v k="$1" '$1 == k { print $2 }' "$TMP/metrics"; }
grep "^ingest_sessions" "$TMP/metrics"
[ "$(m 'ingest_sessions{transport="grpc"}')" = 3 ] || fail "ingest_sessions{grpc} is not 3 (every session)"
[ "$(m 'ingest_sessions_by_state{transport="grpc",state="idle"}')" = 2 ] ||
	fail "want the two finished runs' sessions idle"
busy=$(( $(m 'ingest_sessions_by_state{transport="grpc",state="streaming"}') +
	 $(m 'ingest_sessions_by_state{transport="grpc",state="active"}') ))
[ "$busy" = 1 ] || fail "want run 3's session streaming or active, got $busy"
grep -q "^# HELP ingest_sessions Sessions in the table (negotiated and not expired, idle ones included)" \
	"$TMP/metrics" || fail "ingest_sessions' HELP does not say idle ones are counted"
wait "$SPID" || fail "run 3 exited $?: $(cat "$TMP/send3.out")"
SPID=
ing_term_pid
echo "PASS: a host without RDMA is quiet; sessions by state"
