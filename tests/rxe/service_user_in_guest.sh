#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# service_user_in_guest.sh - runs inside the Soft-RoCE guest (tests/rxe/run_all.sh contract):
# ingestd as ingestd.service runs it, an unprivileged user with no capabilities and the
# unit's LimitMEMLOCK=infinity (here: nobody, prlimit + setpriv), on real RDMA:
#  1. the kernel's device nodes are usable by any user (/dev/infiniband/uverbs*, rdma_cm
#     mode 0666: what the unit's DeviceAllow= lets through);
#  2. with hugepages reserved in the guest by deploy/'s ingest-hugepages, the default
#     --hugepages auto puts the pool on them as that user (no hugetlbfs, no privilege);
#  3. RDMA READ pull and RDMA WRITE push into that pool, every frame verified, the files
#     and the catalog owned by the service user; SIGTERM: exit 0. The guest's hugepage
#     count is restored.
set -euo pipefail
: "${ING_BUILD_DIR:?}" "${RXE_DEV:?}"
: "${ING_RXE_TMP:=$(mktemp -d)}"
: "${ING_RXE_OUT:=$ING_RXE_TMP}"
. "${ING_SRC_DIR:?}/tests/lib.sh"
INGESTD=$ING_BUILD_DIR/apps/ingestd
SEND=$ING_BUILD_DIR/apps/ingest-send
VERIFY=$ING_BUILD_DIR/apps/ingest-verify
HP=$ING_BUILD_DIR/deploy/ingest-hugepages
ing_need_built "$INGESTD" "$SEND" "$VERIFY" "$HP"
USR=nobody
GRP=$(id -gn "$USR")
NR=/proc/sys/vm/nr_hugepages
SAVED=$(cat "$NR")
T=$(mktemp -d "$ING_RXE_TMP/svcuser.XXXXXX")
chmod 755 "$T"
PID=
cleanup() { ing_kill_pid; echo "$SAVED" >"$NR" 2>/dev/null || true; }
trap cleanup EXIT
fail() {
	echo "service_user: FAIL: $*" >&2
	tail -n 20 "$ING_RXE_OUT/ingestd-user.log" >&2 2>/dev/null || true
	exit 1
}

step "1. the device nodes"
for n in /dev/infiniband/uverbs* /dev/infiniband/rdma_cm; do
	[ "$(stat -c %a "$n")" = 666 ] || fail "$n is mode $(stat -c %a "$n"), not 666"
done
ls -l /dev/infiniband

step "2. hugepages reserved by ingest-hugepages; ingestd as $USR, memlock unlimited"
"$HP" --pool 4M:8 --node 0 || fail "ingest-hugepages"
install -d -o "$USR" -g "$GRP" -m 750 "$T/data" "$T/run"
prlimit --memlock=unlimited:unlimited setpriv --reuid "$USR" --regid "$GRP" --clear-groups \
	--inh-caps=-all --bounding-set=-all -- \
	"$INGESTD" --listen 127.0.0.1:0 --port-file "$T/run/port" --data-dir "$T/data" --pool 4M:8 \
	--workers 1 --rdma on --rdma-port 7476 >"$ING_RXE_OUT/ingestd-user.log" 2>&1 &
PID=$!
ing_wait_port "$PID" "$T/run/port" "$ING_RXE_OUT/ingestd-user.log"
[ "$(ps -o user= -p "$PID" | tr -d ' ')" = "$USR" ] || fail "ingestd does not run as $USR"
grep -q "CapEff:[[:space:]]*0000000000000000" "/proc/$PID/status" || fail "ingestd has capabilities: $(grep Cap "/proc/$PID/status")"
grep -q "pool 4M:8: 8 slots, .*, hugepages, node" "$ING_RXE_OUT/ingestd-user.log" ||
	fail "the pool is not on hugepages: $(grep -E 'pool|hugepage' "$ING_RXE_OUT/ingestd-user.log")"
grep -q "RDMA READ yes" "$ING_RXE_OUT/ingestd-user.log" || fail "no RDMA for $USR"

step "3. RDMA READ and WRITE push into the hugepage pool"
wd 120 "$SEND" --server "$ING_SERVER" --transport rdma --count 4 --size 1M --manifest "$T/m1" \
	--json --quiet >"$T/pull.json" || fail "pull exited $?"
wd 120 "$SEND" --server "$ING_SERVER" --transport rdma-write --count 4 --size 1M --first-id 100 \
	--manifest "$T/m2" --json --quiet >"$T/push.json" || fail "push exited $?"
# (grep, not python: an interpreter's start costs seconds under TCG)
grep -q '"frames":4,"ok":4,' "$T/pull.json" && grep -q '"frames":4,"ok":4,' "$T/push.json" ||
	fail "not 4 + 4 frames ok: $(cat "$T/pull.json" "$T/push.json")"
grep -q '"transport":"rdma",' "$T/pull.json" && grep -q '"transport":"rdma-write",' "$T/push.json" ||
	fail "not over RDMA: $(cat "$T/pull.json" "$T/push.json")"
"$VERIFY" --data-dir "$T/data" --manifest "$T/m1" --quiet || fail "verify pull"
"$VERIFY" --data-dir "$T/data" --manifest "$T/m2" --quiet || fail "verify push"
owners=$(find "$T/data/frames" "$T/data/catalog.db" -printf '%u\n' | sort -u | tr '\n' ' ')
[ "$owners" = "$USR " ] || fail "stored files owned by: $owners"
ing_term_pid
echo "service user: RDMA READ and WRITE push into a hugepage pool as $USR: $(grep -o '"mb_s":[0-9.]*' "$T/pull.json") / $(grep -o '"mb_s":[0-9.]*' "$T/push.json")"
