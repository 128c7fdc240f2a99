#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# dotnet: RDMA from C# through H3000.Ingest on Soft-RoCE, real verbs: the .NET program
# bench/dotnet/DotnetSend (built on the host by ctest dotnet.build, framework-dependent;
# the guest sees the host's /usr/bin/dotnet and the build tree over 9p) loads
# libingest.so.1 and sends synthetic frames:
#  1. ingestd --rdma on; 10 frames of 1 MiB + 3 bytes over RDMA READ (--transport rdma):
#     all stored, transport rdma, byte-exact (ingest-verify regenerates every frame);
#  2. 10 frames of 3 MiB over RDMA WRITE push (--transport rdma-write): the same;
#  3. SIGTERM: ingestd exits 0.
# 1 and 2 are two runs of one DotnetSend process (--then): .NET's start-up under qemu TCG
# is most of a run (~30 of 35 s here), so one start, not two; each run prints its own
# summary line, checked as before. No SDK on the host (no dotnet): exit 77, run_all.sh
# reports it NOT RUN. The process is bounded by 480 s (a watchdog, 240 s a run).
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
: "${ING_BUILD_DIR:?}" "${ING_RXE_TMP:?}" "${ING_RXE_OUT:?}" "${RXE_IP:?}"
B=$ING_BUILD_DIR
T=$ING_RXE_TMP
OUT=$ING_RXE_OUT
INGESTD=$B/apps/ingestd VERIFY=$B/apps/ingest-verify
DSEND=$B/dotnet/bin/DotnetSend/release/DotnetSend.dll
if ! command -v dotnet >/dev/null 2>&1; then
	echo "NOT RUN: dotnet SDK not found: the C# RDMA test needs it on the host"
	exit 77
fi
ing_need_built "$INGESTD" "$VERIFY"
[ -f "$DSEND" ] || { echo "FAIL: $DSEND not built (ctest -R dotnet.build, or tests/dotnet/run.sh build)"; exit 1; }
PID=
trap ing_kill_pid EXIT
fail() {
	echo "FAIL: $*"
	echo "--- ingestd log (tail) ---"
	tail -n 40 "$OUT/ingestd.log" 2>/dev/null || true
	exit 1
}
export DOTNET_CLI_TELEMETRY_OPTOUT=1 DOTNET_NOLOGO=1 DOTNET_SKIP_FIRST_TIME_EXPERIENCE=1
export HOME=$T/home LD_LIBRARY_PATH=$B/producer
mkdir -p "$HOME"

step "start ingestd (--rdma on)"
ing_start "$INGESTD" "$T/port" "$OUT/ingestd.log" --data-dir "$T/data" \
	--pool 1M:8,4M:16 --workers 1 --credits 8 --rdma on --rdma-write auto --log-level info
PID=$ING_PID
grep -q "RDMA READ yes" "$OUT/ingestd.log" || fail "ingestd does not offer RDMA"

# ARGS NAME TRANSPORT SIZE: the options of one DotnetSend run
args() {
	echo --server "$ING_SERVER" --transport "$2" --count 10 --size "$3" --buffers 4 --credits 8 \
		--wafer "cs-$1" --id-prefix "cs-$1-" --seed 5 --manifest "$T/$1.man"
}
RSIZE=$(( (1 << 20) + 3 )) WSIZE=$(( 3 << 20 ))
step "C#: 10 frames of $RSIZE bytes, --transport rdma, then 10 of $WSIZE bytes, --transport rdma-write (one process)"
t0=$(date +%s)
rc=0
# shellcheck disable=SC2046 # (the options are words without spaces)
wd 480 dotnet "$DSEND" $(args read rdma $RSIZE) --then $(args write rdma-write $WSIZE) \
	>"$T/runs.json" 2>"$OUT/dotnet.err" || rc=$?
cat "$T/runs.json" "$OUT/dotnet.err"
echo "($(( $(date +%s) - t0 )) s)"
[ "$rc" = 0 ] || fail "DotnetSend exited $rc"
[ "$(grep -c '^{' "$T/runs.json")" = 2 ] || fail "DotnetSend printed $(grep -c '^{' "$T/runs.json") summaries, not 2"
grep '^{' "$T/runs.json" | sed -n 1p >"$T/read.json"
grep '^{' "$T/runs.json" | sed -n 2p >"$T/write.json"
check() {   # check NAME TRANSPORT
	local name=$1 tr=$2
	[ "$(jget "$T/$name.json" transport)" = "$tr" ] || fail "$name: transport is not $tr"
	[ "$(jget "$T/$name.json" ok)" = 10 ] || fail "$name: not 10 frames stored"
	step "every frame byte-exact (ingest-verify), $tr"
	"$VERIFY" --data-dir "$T/data" --manifest "$T/$name.man" || fail "ingest-verify ($tr)"
}
check read rdma
check write rdma-write

step "SIGTERM"
ing_term_pid
echo "PASS: C# over RDMA READ and RDMA WRITE, byte-exact"
