#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# fallback.sh BUILD_DIR [--frames N] [--size SIZE] [--rounds N] [--data-dir DIR] [--compare BUILD_DIR2]
#
# Benchmark of the gRPC fallback data path (not a test: it asserts nothing, it prints).
# In one run, with the same frames (default 500 x 4 MiB) and the same ingest-send client:
#   null      ingest-send -> ingestd --sink null  (network + gRPC + slot, no disk), and
#             ingestd's CPU per GB (utime + stime from /proc/PID/stat, all its threads)
#   file      ingest-send -> ingestd --sink file  (the whole path: write, fdatasync, catalog)
#   grpc++    ingest-send -> bench/grpc_cpp_server.cc, the stock C++ gRPC server (Debian's
#             libgrpc++), sync API and callback API: counts bytes, acks, stores nothing
#   grpcio    ingest-send -> bench/grpcio_server.py (stock Python grpcio, same behaviour)
#   iperf3    TCP over loopback, 1 MiB writes, the same byte count (and its receiver's CPU:
#             what a plain TCP receiver costs on this machine)
#   fio       O_DIRECT 1 MiB sequential write (+ fsync at the end) in the data dir
#   --compare another build's ingestd (e.g. main before a change) on the null sink, in
#             the same rounds: before/after in one run
# The client runs with --reuse-buffers: each buffer's bytes are generated once and resent
# under new frame ids (crc32c exact, verified by the node), so the synthetic generator is
# not part of the measurement, as iperf3 does not generate its data either.
# Every server is started once and warmed up by one untimed null-sink and iperf3 run (first
# touch of the pool, TCP autotuning); then the clients run in ROUNDS interleaved rounds
# (default 3) and the medians are compared, which tames the noise of a shared machine.
# Runs are 2 GiB so that per-run fixed costs (the first frame's latency, the last DURABLE
# ack, slow start) stay small next to the transfer, for iperf3 as for ingest-send; both
# move the same bytes in 1 MiB writes (ingest-send's chunks), one TCP stream, unpinned.
# The ratios and their targets (issue #20):
#   null / iperf3 >= 0.9, null / grpc++ (sync and callback) >= 3,
#   ingestd <= 0.15 core-s/GB on the null sink, file / min(fio, null) >= 0.9
# The C++ baseline is built on first use (the tree re-configured with
# -DING_BENCH_GRPC_CPP=ON, then cmake --build BUILD --target bench_grpc_cpp_server, ~20 s;
# needs libgrpc++-dev and protobuf-compiler-grpc).
# Every step is bounded (timeout); a run takes about a minute here, more under load.
set -euo pipefail

usage() {
	echo "usage: bench/fallback.sh BUILD_DIR [--frames N] [--size SIZE] [--rounds N] [--data-dir DIR] [--compare BUILD_DIR2]" >&2
	exit 2
}
[ $# -ge 1 ] || usage
BUILD=$(cd "$1" && pwd) || usage
shift
FRAMES=500
SIZE=4M
ROUNDS=3
DATA_PARENT=$BUILD
COMPARE=
while [ $# -gt 0 ]; do
	case "$1" in
	--frames) FRAMES=${2:?}; shift ;;
	--size) SIZE=${2:?}; shift ;;
	--rounds) ROUNDS=${2:?}; shift ;;
	--data-dir) DATA_PARENT=${2:?}; shift ;;
	--compare) COMPARE=$(cd "${2:?}" && pwd) || usage; shift ;;
	*) usage ;;
	esac
	shift
done
HERE=$(cd "$(dirname "$0")" && pwd)
INGESTD=$BUILD/apps/ingestd
SEND=$BUILD/apps/ingest-send
CPP=$BUILD/bench/bench_grpc_cpp_server
PY=/usr/bin/python3
for b in "$INGESTD" "$SEND" ${COMPARE:+"$COMPARE/apps/ingestd"}; do
	[ -x "$b" ] || { echo "bench: $b is not built" >&2; exit 1; }
done
for t in iperf3 fio; do
	command -v "$t" >/dev/null || { echo "bench: $t is missing (deploy/install-deps.sh)" >&2; exit 1; }
done
$PY -c 'import grpc' 2>/dev/null || { echo "bench: python3-grpcio is missing" >&2; exit 1; }
# (the tree looks for C++ gRPC only when asked: bench/CMakeLists.txt, ING_BENCH_GRPC_CPP)
if ! { cmake -DING_BENCH_GRPC_CPP=ON "$BUILD" && timeout 600 cmake --build "$BUILD" --target bench_grpc_cpp_server; } \
	>"$BUILD/bench-grpc-cpp-build.log" 2>&1; then
	tail -5 "$BUILD/bench-grpc-cpp-build.log" >&2
	echo "bench: cannot build the C++ gRPC baseline (log: $BUILD/bench-grpc-cpp-build.log)" >&2
	exit 1
fi

TMP=$(mktemp -d /tmp/h3000-bench.XXXXXX)
DATA=$(mktemp -d "$DATA_PARENT/bench-data.XXXXXX")
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do
		kill -TERM "$p" 2>/dev/null || true
	done
	for p in "${PIDS[@]}"; do
		for _ in $(seq 1 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$p" 2>/dev/null || true
	done
	rm -rf "$TMP" "$DATA"
}
trap cleanup EXIT

bytes=$($PY -c "
import re,sys
m=re.fullmatch(r'(\d+)([KMG]?)', sys.argv[1]); u={'':1,'K':1<<10,'M':1<<20,'G':1<<30}[m.group(2)]
print(int(m.group(1))*u*int(sys.argv[2]))" "$SIZE" "$FRAMES")
field() { $PY -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2], {}, d))" "$@"; }
TCK=$(getconf CLK_TCK)

# cpu_ticks PID: utime + stime of the whole process so far (all threads)
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
# core_s_per_gb TICKS: what TICKS of CPU cost per GB of this run's bytes
core_s_per_gb() { $PY -c "import sys; print('%.3f' % (int(sys.argv[1]) / $TCK / ($bytes / 1e9)))" "$1"; }

# wait_port FILE PID: wait (bounded) until a server wrote its port
wait_port() {
	for _ in $(seq 1 300); do
		[ -s "$1" ] && { tr -dc '0-9' <"$1"; return 0; }
		kill -0 "$2" 2>/dev/null || return 1
		sleep 0.1
	done
	return 1
}

# start_ingestd NAME INGESTD SINK: ingestd on a free loopback port; sets PORT and PID
start_ingestd() {
	local name=$1 bin=$2 sink=$3
	mkdir -p "$DATA/$name"
	rm -f "$TMP/port"
	"$bin" --listen 127.0.0.1:0 --data-dir "$DATA/$name" --sink "$sink" --pool "$SIZE:64" \
		--port-file "$TMP/port" --log-level warn >"$TMP/ingestd-$name.log" 2>&1 &
	PID=$!
	PIDS+=("$PID")
	PORT=$(wait_port "$TMP/port" "$PID") ||
		{ echo "bench: ingestd ($name) did not start" >&2; tail "$TMP/ingestd-$name.log" >&2; exit 1; }
}

# start_server NAME CMD...: a baseline server that writes its port to $TMP/NAME.port; sets PORT, PID
start_server() {
	local name=$1
	shift
	rm -f "$TMP/$name.port"
	"$@" --listen 127.0.0.1:0 --port-file "$TMP/$name.port" >"$TMP/$name.log" 2>&1 &
	PID=$!
	PIDS+=("$PID")
	PORT=$(wait_port "$TMP/$name.port" "$PID") ||
		{ echo "bench: $name did not start" >&2; cat "$TMP/$name.log" >&2; exit 1; }
}

# send_to NAME PORT FIRST_ID [PID]: sets RESULT (MB/s of ingest-send) and, with PID, CPU
# (that server's ticks during the run). New frame ids every round, so the file sink never
# skips a duplicate.
send_to() {
	local c0=0
	[ -z "${4:-}" ] || c0=$(cpu_ticks "$4")
	timeout 120 "$SEND" --server "127.0.0.1:$2" --transport grpc --count "$FRAMES" --size "$SIZE" \
		--seed 5 --first-id "$3" --wafer bench --reuse-buffers --json --quiet >"$TMP/send-$1.json" ||
		{ echo "bench: ingest-send to $1 failed" >&2; exit 1; }
	RESULT=$(field "$TMP/send-$1.json" mb_s)
	CPU=0
	[ -z "${4:-}" ] || CPU=$(($(cpu_ticks "$4") - c0))
}

need_mb=$((bytes / 1048576 * 2 + 256))
avail_mb=$(df -Pm "$DATA" | awk 'NR == 2 { print $4 }')
if [ "$avail_mb" -lt "$need_mb" ]; then
	echo "bench: $DATA has ${avail_mb} MiB free, the file sink and fio need ${need_mb} MiB (use --data-dir or --frames)" >&2
	exit 1
fi

echo "bench/fallback: $FRAMES frames x $SIZE ($((bytes / 1048576)) MiB) per run, $ROUNDS rounds (median); data dir $DATA"
echo "client: ingest-send --transport grpc --reuse-buffers (bytes generated once per buffer)"
echo "load average $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cpus before the run (other load skews every figure)"
start_ingestd null "$INGESTD" null
PORT_NULL=$PORT PID_NULL=$PID
start_ingestd file "$INGESTD" file
PORT_FILE=$PORT
if [ -n "$COMPARE" ]; then
	start_ingestd compare "$COMPARE/apps/ingestd" null
	PORT_CMP=$PORT PID_CMP=$PID
fi
start_server grpcio "$PY" "$HERE/grpcio_server.py"
PORT_GRPCIO=$PORT
start_server cpp-sync "$CPP" --api sync
PORT_SYNC=$PORT PID_SYNC=$PID
start_server cpp-cb "$CPP" --api callback
PORT_CB=$PORT PID_CB=$PID
iport=$((20000 + RANDOM % 20000))
iperf3 -s -B 127.0.0.1 -p "$iport" >"$TMP/iperf3-s.log" 2>&1 &
PID_IPERF=$!
PIDS+=("$PID_IPERF")
sleep 0.5

run_iperf3() {
	local c0
	c0=$(cpu_ticks "$PID_IPERF")
	timeout 60 iperf3 -c 127.0.0.1 -p "$iport" -l 1M -n "$bytes" -J >"$TMP/iperf3.json" ||
		{ echo "bench: iperf3 failed" >&2; cat "$TMP/iperf3-s.log" >&2; exit 1; }
	RESULT=$($PY -c "import json,sys; d=json.load(open(sys.argv[1])); print('%.1f' % (d['end']['sum_received']['bits_per_second'] / 8e6))" "$TMP/iperf3.json")
	CPU=$(($(cpu_ticks "$PID_IPERF") - c0))
}

# warm-up, not counted
send_to null "$PORT_NULL" 1
[ -z "$COMPARE" ] || send_to compare "$PORT_CMP" 1
run_iperf3

R_NULL=() C_NULL=() R_CMP=() C_CMP=() R_FILE=() R_GRPCIO=() R_SYNC=() C_SYNC=() R_CB=() C_CB=()
R_IPERF=() C_IPERF=() R_FIO=()
for r in $(seq 1 "$ROUNDS"); do
	first=$((r * 1000000))
	send_to null "$PORT_NULL" "$first" "$PID_NULL"
	R_NULL+=("$RESULT") C_NULL+=("$(core_s_per_gb "$CPU")")
	if [ -n "$COMPARE" ]; then
		send_to compare "$PORT_CMP" "$first" "$PID_CMP"
		R_CMP+=("$RESULT") C_CMP+=("$(core_s_per_gb "$CPU")")
	fi
	send_to file "$PORT_FILE" "$first"
	R_FILE+=("$RESULT")
	rm -rf "$DATA/file/frames"     # bounded disk use; the next round uses other ids
	send_to cpp-sync "$PORT_SYNC" "$first" "$PID_SYNC"
	R_SYNC+=("$RESULT") C_SYNC+=("$(core_s_per_gb "$CPU")")
	send_to cpp-cb "$PORT_CB" "$first" "$PID_CB"
	R_CB+=("$RESULT") C_CB+=("$(core_s_per_gb "$CPU")")
	send_to grpcio "$PORT_GRPCIO" "$first"
	R_GRPCIO+=("$RESULT")
	run_iperf3
	R_IPERF+=("$RESULT") C_IPERF+=("$(core_s_per_gb "$CPU")")
	timeout 90 fio --name=seqwrite --directory="$DATA" --rw=write --bs=1M --size="$bytes" --direct=1 \
		--ioengine=psync --end_fsync=1 --numjobs=1 --output-format=json >"$TMP/fio.json" 2>"$TMP/fio.err" ||
		{ echo "bench: fio failed (O_DIRECT unsupported here? try --data-dir on a disk):" >&2; cat "$TMP/fio.err" >&2; exit 1; }
	R_FIO+=("$($PY -c "import json,sys; d=json.load(open(sys.argv[1])); print('%.1f' % (d['jobs'][0]['write']['bw_bytes'] / 1e6))" "$TMP/fio.json")")
	rm -f "$DATA"/seqwrite.*
	line="round $r: null ${R_NULL[-1]} (${C_NULL[-1]} core-s/GB)"
	[ -z "$COMPARE" ] || line+="  compare ${R_CMP[-1]} (${C_CMP[-1]})"
	line+="  file ${R_FILE[-1]}  grpc++ sync ${R_SYNC[-1]} (${C_SYNC[-1]})  callback ${R_CB[-1]} (${C_CB[-1]})"
	line+="  grpcio ${R_GRPCIO[-1]}  iperf3 ${R_IPERF[-1]} (${C_IPERF[-1]})  fio ${R_FIO[-1]}  (MB/s)"
	echo "$line"
done

$PY - "$COMPARE" "${R_NULL[*]}" "${C_NULL[*]}" "${R_CMP[*]:-}" "${C_CMP[*]:-}" "${R_FILE[*]}" \
	"${R_SYNC[*]}" "${C_SYNC[*]}" "${R_CB[*]}" "${C_CB[*]}" "${R_GRPCIO[*]}" "${R_IPERF[*]}" \
	"${C_IPERF[*]}" "${R_FIO[*]}" <<'PYEOF'
import statistics, sys
compare = sys.argv[1]
med = lambda a: statistics.median(map(float, a.split())) if a.strip() else 0.0
(null, c_null, cmp_, c_cmp, file, sync, c_sync, cb, c_cb, grpcio, iperf, c_iperf,
 fio) = (med(a) for a in sys.argv[2:])
print()
print("%-56s %8s %12s" % ("bench/fallback results (median of the rounds)", "MB/s", "core-s/GB"))
rows = [("ingest-send -> ingestd --sink null (gRPC fallback)", null, c_null)]
if compare:
    rows.append(("ingest-send -> --compare ingestd --sink null", cmp_, c_cmp))
rows += [("ingest-send -> ingestd --sink file", file, None),
         ("ingest-send -> stock C++ gRPC server, sync API", sync, c_sync),
         ("ingest-send -> stock C++ gRPC server, callback API", cb, c_cb),
         ("ingest-send -> python grpcio server", grpcio, None),
         ("iperf3 loopback, 1 MiB writes (receiver's CPU)", iperf, c_iperf),
         ("fio O_DIRECT 1 MiB sequential write", fio, None)]
for name, v, c in rows:
    print("%-56s %8.1f %12s" % (name, v, "%.3f" % c if c is not None else ""))
print()
def ratio(name, num, den, target, unit="x"):
    r = num / den if den else 0.0
    print("%-40s %6.2f   target >= %.1f  %s" % (name, r, target, "ok" if r >= target else "BELOW"))
ratio("null-sink / iperf3", null, iperf, 0.9)
ratio("null-sink / grpc++ sync", null, sync, 3.0)
ratio("null-sink / grpc++ callback", null, cb, 3.0)
ratio("file-sink / min(fio, null-sink)", file, min(fio, null), 0.9)
print("%-40s %6.3f   target <= 0.15 %s  (iperf3's receiver: %.3f)" %
      ("ingestd core-s/GB, null sink", c_null, "ok" if c_null <= 0.15 else "ABOVE", c_iperf))
if compare:
    print("%-40s %6.2f   (MB/s; core-s/GB %.3f -> %.3f)" %
          ("null-sink / --compare null-sink", null / cmp_ if cmp_ else 0.0, c_cmp, c_null))
PYEOF
echo "load average $(cut -d' ' -f1-3 /proc/loadavg) after the run"
