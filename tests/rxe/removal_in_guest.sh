#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# removal: RDMA_CM_EVENT_DEVICE_REMOVAL while ingestd serves an RDMA session.
#  1. ingestd --rdma on; a producer sends frames over RDMA (ok);
#  2. `rdma link delete rxe0`: the kernel delivers DEVICE_REMOVAL; ingestd releases every
#     object it made on the device (QPs, CQs, MRs, PD, ids), logs it, stays up, and
#     Negotiate/Stats switch to the fallback (the delete itself completes when ingestd
#     exits: rxe cannot disassociate, and librdmacm keeps its device context);
#  3. a new AUTO producer falls back to the gRPC stream and its frames are stored;
#  4. SIGTERM: exit 0. rxe0 is re-created for the tests that follow (trap).
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
: "${ING_BUILD_DIR:?}" "${ING_RXE_TMP:?}" "${ING_RXE_OUT:?}" "${RXE_NETDEV:?}" "${RXE_DEV:?}"
B=$ING_BUILD_DIR T=$ING_RXE_TMP OUT=$ING_RXE_OUT
INGESTD=$B/apps/ingestd SEND=$B/apps/ingest-send STATS=$B/tests/rxe_stats
ing_need_built "$INGESTD" "$SEND" "$STATS"
PID=
restore() {
	ing_kill_pid
	if ! rdma link show "$RXE_DEV/1" >/dev/null 2>&1; then
		rdma link add "$RXE_DEV" type rxe netdev "$RXE_NETDEV" || echo "WARN: could not re-create $RXE_DEV"
		for _ in $(seq 1 50); do
			grep -q ACTIVE "/sys/class/infiniband/$RXE_DEV/ports/1/state" 2>/dev/null && break
			sleep 0.1
		done
	fi
}
trap restore EXIT
fail() { echo "FAIL: $*"; tail -n 40 "$OUT/ingestd.log" 2>/dev/null || true; exit 1; }

ing_start "$INGESTD" "$T/port" "$OUT/ingestd.log" --data-dir "$T/data" --pool 1M:8,4M:8 \
	--workers 1 --rdma on --log-level info
PID=$ING_PID
SERVER=$ING_SERVER
timeout 60 "$SEND" --server "$SERVER" --transport rdma --count 4 --size 1M --first-id 1 \
	--json --quiet >"$T/s1.json" || fail "RDMA send before the removal"
[ "$(json "$T/s1.json" 'ok')" = 4 ] || fail "RDMA send: not 4 ok"

echo "== rdma link delete $RXE_DEV while ingestd holds it"
# rxe cannot disassociate user contexts: the delete completes only when every process has
# closed the device. ingestd releases all of its own objects on DEVICE_REMOVAL; librdmacm
# keeps its cached device context until exit, so the delete finishes at ingestd's exit.
timeout 120 rdma link delete "$RXE_DEV" &
DPID=$!
for _ in $(seq 1 300); do grep -q "released; RDMA stays off" "$OUT/ingestd.log" && break; sleep 0.1; done
grep -E "removed|released" "$OUT/ingestd.log" || fail "no DEVICE_REMOVAL handling in the log"
kill -0 "$PID" || fail "ingestd died on device removal"
"$STATS" "$SERVER" | grep -E "transportNote|fallbackSwitches"
"$STATS" "$SERVER" | grep -q "transportNote rdma: RDMA device removed; fallback active" || fail "Stats do not say fallback"

echo "== a new AUTO producer falls back to the gRPC stream"
timeout 60 "$SEND" --server "$SERVER" --count 3 --size 1M --first-id 10 --json --quiet \
	>"$T/s2.json" 2>"$T/s2.err" || fail "fallback send failed"
cat "$T/s2.err"
[ "$(json "$T/s2.json" 'transport')" = grpc ] || fail "AUTO did not fall back"
[ "$(json "$T/s2.json" 'ok')" = 3 ] || fail "fallback: not 3 ok"
echo "note: $(json "$T/s2.json" 'transport_note')"

kill -TERM "$PID"
rc=0
wait "$PID" || rc=$?
PID=
[ $rc = 0 ] || fail "ingestd exit status $rc after the removal"
drc=0
wait "$DPID" || drc=$?
[ $drc = 0 ] || fail "rdma link delete did not complete after ingestd exited (rc $drc)"
echo "rdma link delete completed"
echo "removal_in_guest: all checks passed"
