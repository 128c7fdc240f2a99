#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench/dotnet.sh [BUILD_DIR] [--guest] - C# producers against ingest-send, same ingestd,
# same run: not a test, it prints figures and ratios and asserts nothing.
#
#   host (default): ingestd --rdma off --sink null (the producers' path, not the disk):
#     baseline  ingest-send --transport grpc --reuse-buffers
#     binding   bench/dotnet/DotnetSend --transport grpc (H3000.Ingest over libingest, its
#               Poll loop; 4 warm-up frames before its clock starts: the JIT's first
#               compilations), and its managed allocations per frame on the steady path
#               (GC.GetAllocatedBytesForCurrentThread; goal 0)
#     async     the same through SubmitAsync + ReadAcksAsync (the library's pump thread),
#               allocations of every thread (GC.GetTotalAllocatedBytes)
#     grpc-net  DotnetSend --transport grpc-net: a pure Grpc.Net.Client PushFrames producer
#   --guest: the same over RDMA READ and RDMA WRITE inside the Soft-RoCE guest
#     (deploy/rxe-vm; TCG: the ratios are what counts, not the MB/s)
# Each pair runs BENCH_ROUNDS rounds of (ingest-send, C#) back to back; it prints every
# figure, the median of the per-round ratios C#/ingest-send, and each producer's CPU
# seconds per GiB sent (ingest-send: the whole process; C#: the measured window, every
# thread), which a busy machine disturbs far less than MiB/s. Needs `tests/dotnet/run.sh build`
# (or ctest dotnet.build) first.
# Knobs (env): BENCH_SIZE (bytes, 4194304), BENCH_COUNT (frames, 400; guest 64),
# BENCH_CREDITS (16), BENCH_ROUNDS (3), BENCH_ONLY (read,write,binding,async,grpc-net: which
# pairs), BENCH_RECYCLE_ON (received|durable: --recycle-on of both producers; empty: each
# one's default, DURABLE since 1.4).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/.." && pwd)
GUEST=0
BUILD=
for a in "$@"; do
	case $a in
	--guest) GUEST=1 ;;
	*) BUILD=$a ;;
	esac
done
BUILD=$(cd "${BUILD:-${ING_BUILD_DIR:-$SRC/build}}" && pwd)
if [ "$GUEST" = 1 ] && [ "${RXE_VM:-0}" != 1 ]; then
	exec env ING_BUILD_DIR="$BUILD" RXE_VM_RW= "$SRC/deploy/rxe-vm/run-in-rxe-vm.sh" \
		bash "$SRC/bench/dotnet.sh" "$BUILD" --guest
fi
command -v dotnet >/dev/null 2>&1 || { echo "bench/dotnet.sh: the .NET SDK (dotnet) is not installed" >&2; exit 1; }
DSEND=$BUILD/dotnet/bin/DotnetSend/release/DotnetSend.dll
SEND=$BUILD/apps/ingest-send INGESTD=$BUILD/apps/ingestd
for f in "$DSEND" "$SEND" "$INGESTD"; do
	[ -f "$f" ] || { echo "bench/dotnet.sh: $f not built (make build; tests/dotnet/run.sh build $BUILD $SRC)" >&2; exit 1; }
done
export DOTNET_CLI_TELEMETRY_OPTOUT=1 DOTNET_NOLOGO=1 LD_LIBRARY_PATH=$BUILD/producer
[ "$GUEST" = 1 ] && export HOME=/tmp/bench-dotnet-home && mkdir -p "$HOME"
: "${BENCH_SIZE:=4194304}" "${BENCH_CREDITS:=16}" "${BENCH_ROUNDS:=3}" "${BENCH_ONLY:=read,write,binding,async,grpc-net}"
RECYCLE=()
[ -n "${BENCH_RECYCLE_ON:-}" ] && RECYCLE=(--recycle-on "$BENCH_RECYCLE_ON")
if [ "$GUEST" = 1 ]; then : "${BENCH_COUNT:=64}"; else : "${BENCH_COUNT:=400}"; fi
T=$(mktemp -d /tmp/bench-dotnet.XXXXXX)
PID=
cleanup() { if [ -n "$PID" ]; then kill -TERM "$PID" 2>/dev/null; wait "$PID" 2>/dev/null || true; fi; rm -rf "$T"; }
trap cleanup EXIT
RDMA=(--rdma off)
[ "$GUEST" = 1 ] && RDMA=(--rdma on --rdma-write auto)
"$INGESTD" --listen 127.0.0.1:0 --port-file "$T/port" --data-dir "$T/data" --sink null \
	--pool 4M:32 --workers 1 --credits "$BENCH_CREDITS" "${RDMA[@]}" >"$T/ingestd.log" 2>&1 &
PID=$!
for _ in $(seq 1 300); do [ -s "$T/port" ] && break; sleep 0.1; done
[ -s "$T/port" ] || { cat "$T/ingestd.log"; exit 1; }
S=127.0.0.1:$(cat "$T/port")
field() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$1" "$2"; }
n=0
c_send() {   # TRANSPORT -> "mib_s cpu_s_per_gib" (the CPU of the whole process: bash's `times` of its subshell)
	n=$((n + 1))
	local t
	t=$(
		"$SEND" --server "$S" --transport "$1" --count "$BENCH_COUNT" --size "$BENCH_SIZE" \
			--credits "$BENCH_CREDITS" --reuse-buffers "${RECYCLE[@]}" --wafer "b$(date +%s%N)" --json --quiet >"$T/r$n.json"
		times   # not in a pipe: a forked `times` would see no children
	)
	t=${t##*$'\n'}   # its second line: the children's user and system time
	echo "$(field "$T/r$n.json" mib_s) $(python3 -c "import re,sys; u,s=[int(m)*60+float(x) for m,x in re.findall(r'(\d+)m([\d.]+)s', sys.argv[1])]; print((u+s)/(float(sys.argv[2])/2**30))" "$t" "$(field "$T/r$n.json" bytes)")"
}
cs_send() {   # TRANSPORT [DOTNETSEND OPTIONS] -> "mib_s alloc_bytes alloc_frames"
	n=$((n + 1))
	local rc=()
	[ "$1" != grpc-net ] && rc=("${RECYCLE[@]}")
	dotnet "$DSEND" --server "$S" --transport "$1" --count "$BENCH_COUNT" --size "$BENCH_SIZE" \
		--credits "$BENCH_CREDITS" --buffers "$BENCH_CREDITS" --reuse-buffers --warmup 4 --wafer "b$(date +%s%N)" \
		"${rc[@]}" "${@:2}" >"$T/r$n.json"
	echo "$(field "$T/r$n.json" mib_s) $(field "$T/r$n.json" alloc_bytes) $(field "$T/r$n.json" alloc_frames) $(field "$T/r$n.json" cpu_s_per_gib)"
}
pair() {   # LABEL C_TRANSPORT CS_TRANSPORT [DOTNETSEND OPTIONS]: BENCH_ROUNDS x (ingest-send, C#), medians
	local r a res out=()
	for r in $(seq 1 "$BENCH_ROUNDS"); do
		a=$(c_send "$2")
		res=$(cs_send "$3" "${@:4}")   # "mib_s alloc_bytes alloc_frames cpu_s_per_gib" (no /dev/fd in the guest)
		out+=("${a// /,},${res// /,}")
	done
	python3 - "$1" "$2" "$3${4:+ ${*:4}}" "${out[@]}" <<'PY'
import statistics, sys
label, ct, cst = sys.argv[1:4]
# each row: ingest-send mib_s, its CPU s/GiB, C# mib_s, alloc bytes, alloc frames, C# CPU s/GiB
rows = [tuple(map(float, r.split(","))) for r in sys.argv[4:]]
ratio = statistics.median(r[2] / r[0] for r in rows)
alloc = "" if rows[0][3] < 0 else ", managed allocations %s" % " / ".join(
    "%d bytes in %d frames" % (r[3], r[4]) for r in rows)
print("%-28s ingest-send %s %s MiB/s; C# %s %s MiB/s; median ratio C#/ingest-send %.2f; "
      "CPU s/GiB ingest-send %.2f, C# %.2f (medians)%s"
      % (label, ct, " ".join("%.0f" % r[0] for r in rows), cst, " ".join("%.0f" % r[2] for r in rows), ratio,
         statistics.median(r[1] for r in rows), statistics.median(r[5] for r in rows), alloc))
PY
}
echo "== bench/dotnet.sh: $BENCH_COUNT x $BENCH_SIZE bytes, credits $BENCH_CREDITS, --reuse-buffers, recycle on ${BENCH_RECYCLE_ON:-the default}, ingestd --sink null, $(nproc) cpus, load $(cut -d' ' -f1 /proc/loadavg)$([ "$GUEST" = 1 ] && echo ", Soft-RoCE guest (TCG)")"
if [ "$GUEST" = 1 ]; then
	[[ $BENCH_ONLY =~ read ]] && pair "RDMA READ (H3000.Ingest)" rdma rdma
	[[ $BENCH_ONLY =~ write ]] && pair "RDMA WRITE (H3000.Ingest)" rdma-write rdma-write
else
	[[ $BENCH_ONLY =~ binding ]] && pair "fallback (H3000.Ingest)" grpc grpc
	[[ $BENCH_ONLY =~ async ]] && pair "fallback (H3000.Ingest async)" grpc grpc --async
	[[ $BENCH_ONLY =~ grpc-net ]] && pair "fallback (Grpc.Net.Client)" grpc grpc-net
fi
exit 0
