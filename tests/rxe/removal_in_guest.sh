#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# removal: RDMA_CM_EVENT_DEVICE_REMOVAL while ingestd serves an RDMA session, and the
# device coming back.
#  1. a second Soft-RoCE device (rxe1 on its own dummy netdev) is made first: librdmacm
#     closes its context of a removed device only when it lists the devices again and
#     finds at least one (a host whose only RDMA device goes away keeps that context, and
#     rxe's removal waits for it: see docs/ARCHITECTURE.md "RDMA device removal");
#  2. ingestd --rdma on --rdma-addr RXE_IP (rxe0); a producer sends frames over RDMA (ok);
#  3. `rdma link delete rxe0`: the kernel delivers DEVICE_REMOVAL; ingestd releases every
#     object it made on the device, stays up, Negotiate/Stats switch to the fallback, and
#     the delete COMPLETES while ingestd runs (nothing of the device is left open);
#  4. a new AUTO producer falls back to the gRPC stream and its frames are stored;
#  5. `rdma link add rxe0` again: ingestd re-opens RDMA on the same address and port by
#     itself (no restart), Stats say so, /metrics counts the removal and the re-open;
#  6. an RDMA producer's frames go over RDMA again, byte-exact (ingest-verify);
#  7. SIGTERM: exit 0. rxe0 is re-created and rxe1 removed for the tests that follow (trap).
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
: "${ING_BUILD_DIR:?}" "${ING_RXE_TMP:?}" "${ING_RXE_OUT:?}" "${RXE_NETDEV:?}" "${RXE_DEV:?}" "${RXE_IP:?}"
B=$ING_BUILD_DIR T=$ING_RXE_TMP OUT=$ING_RXE_OUT
INGESTD=$B/apps/ingestd SEND=$B/apps/ingest-send STATS=$B/tests/rxe_stats VERIFY=$B/apps/ingest-verify
ing_need_built "$INGESTD" "$SEND" "$STATS" "$VERIFY"
SPARE_DEV=rxe1 SPARE_ND=rxed1 SPARE_IP=169.254.78.1/24
PID=
wait_active() {
	for _ in $(seq 1 100); do
		grep -q ACTIVE "/sys/class/infiniband/$1/ports/1/state" 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}
restore() {
	ing_kill_pid
	if ! rdma link show "$RXE_DEV/1" >/dev/null 2>&1; then
		rdma link add "$RXE_DEV" type rxe netdev "$RXE_NETDEV" || echo "WARN: could not re-create $RXE_DEV"
		wait_active "$RXE_DEV" || echo "WARN: $RXE_DEV not ACTIVE"
	fi
	rdma link delete "$SPARE_DEV" 2>/dev/null || true
	ip link delete "$SPARE_ND" 2>/dev/null || true
}
trap restore EXIT
fail() { echo "FAIL: $*"; tail -n 40 "$OUT/ingestd.log" 2>/dev/null || true; exit 1; }
metric() { # metric NAME LABELS: the value in ingestd's /metrics
	curl -fsS "http://127.0.0.1:$(tr -dc '0-9' <"$T/mport")/metrics" |
		awk -v n="$1" -v l="$2" '$1 == n l { print $2 }'
}

step "a second RDMA device ($SPARE_DEV on $SPARE_ND)"
ip link add "$SPARE_ND" mtu 9000 type dummy || fail "ip link add $SPARE_ND"
ip addr add "$SPARE_IP" dev "$SPARE_ND" && ip link set "$SPARE_ND" up || fail "address on $SPARE_ND"
rdma link add "$SPARE_DEV" type rxe netdev "$SPARE_ND" || fail "rdma link add $SPARE_DEV"
wait_active "$SPARE_DEV" || fail "$SPARE_DEV not ACTIVE"

ing_start "$INGESTD" "$T/port" "$OUT/ingestd.log" --data-dir "$T/data" --pool 1M:8,4M:8 \
	--workers 1 --rdma on --rdma-addr "$RXE_IP" --log-level info \
	--metrics-listen 127.0.0.1:0 --metrics-port-file "$T/mport"
PID=$ING_PID
SERVER=$ING_SERVER
wd 60 "$SEND" --server "$SERVER" --transport rdma --count 4 --size 1M --first-id 1 \
	--json --quiet >"$T/s1.json" || fail "RDMA send before the removal"
[ "$(jget "$T/s1.json" ok)" = 4 ] || fail "RDMA send: not 4 ok"
port_before=$(grep -o "RDMA listener on [0-9.]*:[0-9]*" "$OUT/ingestd.log" | head -1 | awk -F: '{print $NF}')

step "rdma link delete $RXE_DEV while ingestd holds it"
wd 120 rdma link delete "$RXE_DEV" &
DPID=$!
for _ in $(seq 1 300); do grep -q "released; RDMA re-opens" "$OUT/ingestd.log" && break; sleep 0.1; done
grep -E "removed|released" "$OUT/ingestd.log" || fail "no DEVICE_REMOVAL handling in the log"
kill -0 "$PID" || fail "ingestd died on device removal"
"$STATS" "$SERVER" | grep "transportNote rdma: RDMA device removed; fallback active" >/dev/null || fail "Stats do not say fallback"
drc=0
wait "$DPID" || drc=$?
[ $drc = 0 ] || fail "rdma link delete did not complete while ingestd runs (rc $drc): a context of the device is still open"
kill -0 "$PID" || fail "ingestd died when the removal completed"
echo "rdma link delete completed with ingestd running"

step "a new AUTO producer falls back to the gRPC stream"
wd 60 "$SEND" --server "$SERVER" --count 3 --size 1M --first-id 10 --json --quiet \
	>"$T/s2.json" 2>"$T/s2.err" || fail "fallback send failed"
[ "$(jget "$T/s2.json" transport)" = grpc ] || fail "AUTO did not fall back"
[ "$(jget "$T/s2.json" ok)" = 3 ] || fail "fallback: not 3 ok"
echo "note: $(jget "$T/s2.json" transport_note)"

step "rdma link add $RXE_DEV: ingestd re-opens RDMA by itself"
rdma link add "$RXE_DEV" type rxe netdev "$RXE_NETDEV" || fail "rdma link add $RXE_DEV"
wait_active "$RXE_DEV" || fail "$RXE_DEV not ACTIVE again"
for _ in $(seq 1 200); do grep -q "is back: listener on" "$OUT/ingestd.log" && break; sleep 0.1; done
grep "is back: listener on" "$OUT/ingestd.log" || fail "RDMA not re-opened within 20 s of the device's return"
port_after=$(grep -o "is back: listener on [0-9.]*:[0-9]*" "$OUT/ingestd.log" | tail -1 | awk -F: '{print $NF}')
[ "$port_after" = "$port_before" ] || fail "re-opened on port $port_after, not $port_before"
"$STATS" "$SERVER" | grep -E "transportNote"
"$STATS" "$SERVER" | grep "transportNote rdma: $RXE_IP:$port_before; fallback available" >/dev/null ||
	fail "Stats do not offer RDMA again"
[ "$(metric ingest_rdma_device_events_total '{event="removed"}')" = 1 ] || fail "/metrics: removal not counted"
[ "$(metric ingest_rdma_device_events_total '{event="reopened"}')" = 1 ] || fail "/metrics: re-open not counted"

step "RDMA producers work again"
wd 120 "$SEND" --server "$SERVER" --transport rdma --count 6 --size 1M --first-id 20 \
	--manifest "$T/m3.tsv" --json --quiet >"$T/s3.json" || fail "RDMA send after the re-open"
[ "$(jget "$T/s3.json" transport)" = rdma ] || fail "not RDMA after the re-open"
[ "$(jget "$T/s3.json" ok)" = 6 ] || fail "RDMA after the re-open: not 6 ok"
wd 60 "$SEND" --server "$SERVER" --count 2 --size 1M --first-id 30 --json --quiet \
	>"$T/s4.json" || fail "AUTO send after the re-open"
[ "$(jget "$T/s4.json" transport)" = rdma ] || fail "AUTO does not pick RDMA after the re-open"

kill -TERM "$PID"
rc=0
wait "$PID" || rc=$?
PID=
[ $rc = 0 ] || fail "ingestd exit status $rc after the removal and re-open"
"$VERIFY" --data-dir "$T/data" --manifest "$T/m3.tsv" || fail "frames sent after the re-open do not verify"
echo "removal_in_guest: all checks passed"
