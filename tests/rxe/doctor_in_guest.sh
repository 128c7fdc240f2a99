#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# doctor_in_guest.sh - runs inside the Soft-RoCE guest (tests/rxe/run_all.sh contract):
# ingest-doctor and ingest-topo on a real rxe device. Asserts the doctor finds $RXE_DEV
# with an ACTIVE port, reports the RoCE v2 GID index the harness computed ($RXE_GID_INDEX)
# and an active MTU of 4096 (the harness gives the netdev MTU 9000), that its exit status
# matches its FAIL count, and that ingest-topo lists the (virtual) rxe device.
# By hand: deploy/rxe-vm/run-in-rxe-vm.sh bash tests/rxe/doctor_in_guest.sh
set -uo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
: "${ING_SRC_DIR:=$(cd "$HERE/../.." && pwd)}"
: "${ING_BUILD_DIR:=$ING_SRC_DIR/build}"
: "${ING_RXE_TMP:=$(mktemp -d)}"
: "${ING_RXE_OUT:=$ING_RXE_TMP}"

fail() { echo "doctor_in_guest: FAIL: $*" >&2; exit 1; }

[ -n "${RXE_DEV:-}" ] || fail "RXE_DEV unset: run me inside the rxe guest (deploy/rxe-vm/run-in-rxe-vm.sh)"
DOCTOR=$ING_BUILD_DIR/apps/ingest-doctor
TOPO=$ING_BUILD_DIR/apps/ingest-topo
[ -x "$DOCTOR" ] || fail "$DOCTOR not built (cmake --build $ING_BUILD_DIR --target ingest-doctor)"
[ -x "$TOPO" ] || fail "$TOPO not built (cmake --build $ING_BUILD_DIR --target ingest-topo)"

data=$ING_RXE_TMP/data
mkdir -p "$data"

echo "== ingest-doctor --rdma-dev $RXE_DEV --data-dir $data (expect GID index ${RXE_GID_INDEX:-?})"
"$DOCTOR" --rdma-dev "$RXE_DEV" --data-dir "$data" > "$ING_RXE_OUT/doctor.txt" 2>&1
rc=$?
cat "$ING_RXE_OUT/doctor.txt"
"$DOCTOR" --rdma-dev "$RXE_DEV" --data-dir "$data" --json > "$ING_RXE_OUT/doctor.json" 2>/dev/null
rc_json=$?
[ $rc = $rc_json ] || fail "text run exit $rc, JSON run exit $rc_json"

txt=$ING_RXE_OUT/doctor.txt
nfail=$(grep -c '^  FAIL ' "$txt")
if [ "$nfail" -gt 0 ]; then [ $rc = 1 ] || fail "$nfail FAIL lines but exit $rc"; else [ $rc = 0 ] || fail "no FAIL line but exit $rc"; fi
grep -q "^  PASS  rdma.devices .*$RXE_DEV" "$txt" || fail "rdma.devices did not find $RXE_DEV"
grep -q "^  PASS  rdma.port .*$RXE_DEV port 1: state 4: ACTIVE" "$txt" || fail "port of $RXE_DEV not ACTIVE"
grep -q "^  PASS  rdma.gid  *RoCE v2 GID index [0-9]" "$txt" || fail "no RoCE v2 GID index reported"
grep -q "^  PASS  rdma.mtu  *active MTU 4096" "$txt" || fail "active MTU is not 4096"

# the same facts from the JSON (no jq in the guest: sed on our own one-line output)
gid=$(sed -n 's/.*"gid_index":\([-0-9]*\).*/\1/p' "$ING_RXE_OUT/doctor.json")
mtu=$(sed -n 's/.*"active_mtu":\([-0-9]*\).*/\1/p' "$ING_RXE_OUT/doctor.json")
est=$(sed -n 's/.*"active_mtu_estimated":\([a-z]*\).*/\1/p' "$ING_RXE_OUT/doctor.json")
dev=$(sed -n 's/.*"rdma":{"device":"\([^"]*\)".*/\1/p' "$ING_RXE_OUT/doctor.json")
[ "$dev" = "$RXE_DEV" ] || fail "JSON device '$dev' != $RXE_DEV"
[ "$mtu" = 4096 ] || fail "JSON active_mtu '$mtu' != 4096"
[ "$est" = false ] || fail "active MTU was estimated, not read from the device (ibv_query_port)"
if [ -n "${RXE_GID_INDEX:-}" ]; then
	[ "$gid" = "$RXE_GID_INDEX" ] || fail "GID index $gid != the harness's $RXE_GID_INDEX"
fi

echo "== ingest-topo --json"
"$TOPO" --json --data-dir "$data" > "$ING_RXE_OUT/topo.json" || fail "ingest-topo exit $?"
cat "$ING_RXE_OUT/topo.json"
grep -q "\"rdma\":\[{\"name\":\"$RXE_DEV\"" "$ING_RXE_OUT/topo.json" || fail "ingest-topo does not list $RXE_DEV"
grep -q "\"plan\":{\"rdma_dev\":\"$RXE_DEV\"" "$ING_RXE_OUT/topo.json" || fail "the plan is not built around $RXE_DEV"

echo "doctor_in_guest: OK ($RXE_DEV, GID index $gid, active MTU $mtu, $nfail FAIL)"
