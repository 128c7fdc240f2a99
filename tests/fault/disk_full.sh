#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# disk_full.sh BUILD_DIR - the data dir's filesystem fills up under a stream (root: a
# 64 MiB ext4 on a loop device, filled with a ballast file to a few MiB free):
#  1. frames that do not fit fail with ERROR_NO_SPACE (code 8: 'ingest node storage full'), retryable; ingestd keeps
#     serving (health SERVING, same pid);
#  2. no temp file and no partial frame file is left (every frame file has the full
#     length), every DURABLE-acked and every catalogued frame is intact;
#  3. space freed (ballast removed), the same frames re-sent to the same ingestd (no
#     restart): all ok, the stored ones as duplicates, every frame verified;
#  4. SIGTERM: exit 0.
# Not root: FAILS (it cannot make its conditions otherwise).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib.sh"
. "$HERE/fault_lib.sh"

BUILD=${1:?usage: disk_full.sh BUILD_DIR}
BUILD=$(cd "$BUILD" && pwd)
INGESTD=$BUILD/apps/ingestd SEND=$BUILD/apps/ingest-send VERIFY=$BUILD/apps/ingest-verify
ing_need_built "$INGESTD" "$SEND" "$VERIFY"
need_root "disk_full.sh"

TMP=$(mktemp -d /tmp/fault-diskfull.XXXXXX)
MNT=$TMP/mnt
DATA=$MNT/data
PID=
cleanup() {
	ing_kill_pid
	loopfs_cleanup
	if [ "${FAULT_KEEP:-0}" = 1 ]; then echo "kept $TMP"; else rm -rf "$TMP"; fi
}
trap cleanup EXIT
fail() {
	echo "FAIL: $*" >&2
	for l in "$TMP"/ingestd.log "$TMP"/send*.err; do
		[ -f "$l" ] || continue
		echo "--- $l (tail) ---" >&2
		tail -n 15 "$l" >&2
	done
	exit 1
}

step "64 MiB ext4 on a loop device, ingestd on it"
loopfs_make "$TMP/fs.img" "$MNT" 64M
ing_start "$INGESTD" "$TMP/port" "$TMP/ingestd.log" --data-dir "$DATA" --pool 1M:8 \
	--workers 1 --log-level warn
PID=$ING_PID
SERVER=$ING_SERVER

step "fill it to ~6 MiB free"
avail=$(df --output=avail -B1 "$MNT" | tail -1)
fallocate -l $((avail - 6 * 1048576)) "$MNT/ballast" || fail "fallocate ballast"
df -h "$MNT" | tail -1

FR=(--transport grpc --credits 4 --count 40 --size 512K --seed 7 --first-id 1 --wafer DF)
step "send 40 frames of 512 KiB (20 MiB) into 6 MiB"
rc=0
timeout 120 "$SEND" --server "$SERVER" "${FR[@]}" --manifest "$TMP/sent" \
	--durable-manifest "$TMP/acked" --json --quiet >"$TMP/send1.json" 2>"$TMP/send1.err" || rc=$?
ok=$(json "$TMP/send1.json" ok) failed=$(json "$TMP/send1.json" failed)
echo "first send: $ok ok, $failed failed (exit $rc)"
[ "$failed" -gt 0 ] || fail "no frame failed on a full disk"
[ "$ok" -gt 0 ] || fail "not one frame fitted in 6 MiB"
# each failure line names the code's text and says retryable (ingest-send's NO_SPACE fix)
grep -q "failed: ingest node storage full .*: retryable" "$TMP/send1.err" ||
	fail "failures are not NO_SPACE ('ingest node storage full'), retryable"
if grep "ingest-send: frame .* failed: " "$TMP/send1.err" | grep -qv "failed: ingest node storage full .*: retryable"; then
	fail "a frame failed with another code than NO_SPACE: $(grep 'ingest-send: frame .* failed: ' "$TMP/send1.err" | grep -v 'storage full' | head -1)"
fi

step "node still serving, nothing partial left"
kill -0 "$PID" 2>/dev/null || fail "ingestd died on a full disk"
health "$SERVER" || fail "health is not SERVING on a full disk"
t=$(temp_files "$DATA")
[ "$t" = 0 ] || fail "$t temp files left on the full disk"
python3 - "$DATA" "$TMP/sent" <<'PY' || fail "partial frame files"
import os, sys
data, man = sys.argv[1], sys.argv[2]
want = {}
for line in open(man):
    if line.startswith("#") or not line.strip():
        continue
    fid, wafer, length = line.split()[:3]
    want[os.path.join(data, "frames", wafer, fid + ".frame")] = int(length)
bad = 0
for root, _, files in os.walk(os.path.join(data, "frames")):
    for f in files:
        p = os.path.join(root, f)
        if p not in want or os.path.getsize(p) != want[p]:
            print("partial or stray file:", p, os.path.getsize(p), want.get(p))
            bad += 1
print("frame files on disk:", sum(len(f) for _, _, f in os.walk(os.path.join(data, "frames"))), "partial:", bad)
sys.exit(1 if bad else 0)
PY
verify_json "$DATA" "$TMP/acked" || fail "a DURABLE-acked frame is missing ($V_MISSING) or bad ($V_BAD)"
verify_json "$DATA" "$TMP/sent" --allow-missing || fail "a catalogued frame is damaged ($V_BAD)"

step "free the space, re-send to the same ingestd"
rm -f "$MNT/ballast"
sync -f "$MNT"
timeout 120 "$SEND" --server "$SERVER" "${FR[@]}" --manifest "$TMP/sent2" --json --quiet \
	>"$TMP/send2.json" 2>"$TMP/send2.err" || fail "re-send after freeing space failed"
ok2=$(json "$TMP/send2.json" ok) dup2=$(json "$TMP/send2.json" duplicate)
echo "re-send: $ok2 ok ($dup2 duplicates)"
[ "$ok2" = 40 ] || fail "re-send: $ok2 of 40 ok"
[ "$dup2" -ge "$ok" ] || fail "re-send: $dup2 duplicates, $ok frames were stored before"
kill -0 "$PID" 2>/dev/null || fail "ingestd is not the same process"
verify_json "$DATA" "$TMP/sent2" || fail "after resume: missing $V_MISSING, bad $V_BAD"
d=$(catalog_dups "$DATA")
[ "$d" = 0 ] || fail "$d duplicate catalog rows"

step "SIGTERM"
kill -TERM "$PID"
rc=0
wait "$PID" || rc=$?
PID=
[ "$rc" = 0 ] || fail "ingestd exited $rc on SIGTERM"
echo "fault disk_full: $failed of 40 frames NO_SPACE (retryable), $ok stored; after freeing: 40 ok, 0 partial, 0 temp"
echo "PASS"
