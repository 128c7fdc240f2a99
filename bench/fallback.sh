#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# fallback.sh BUILD_DIR [--frames N] [--size SIZE] [--rounds N] [--data-dir DIR]
#
# Benchmark of the gRPC fallback data path (not a test: it asserts nothing, it prints).
# In one run, with the same frames (default 500 x 4 MiB) and the same ingest-send client:
#   null   ingest-send -> ingestd --sink null     (network + gRPC + slot copy, no disk)
#   file   ingest-send -> ingestd --sink file     (the whole path: write, fdatasync, catalog)
#   grpcio ingest-send -> bench/grpcio_server.py  (stock Python grpcio server, counts bytes)
#   iperf3 TCP over loopback, 1 MiB writes, the same byte count
#   fio    O_DIRECT 1 MiB sequential write (+ fsync at the end) in the data dir
# The client runs with --reuse-buffers: each buffer's bytes are generated once and resent
# under new frame ids (crc32c exact, verified by the node), so the synthetic generator is
# not part of the measurement, as iperf3 does not generate its data either.
# Every server is started once and warmed up by one untimed null-sink and iperf3 run (first
# touch of the pool, TCP autotuning); then the clients run in ROUNDS interleaved rounds
# (default 3) and the medians are compared, which tames the noise of a shared machine.
# Runs are 2 GiB so that per-run fixed costs (the first frame's latency, the last DURABLE
# ack, slow start) stay small next to the transfer, for iperf3 as for ingest-send; both
# move the same bytes in 1 MiB writes (ingest-send's chunks), one TCP stream, unpinned.
# The ratios and their targets:
#   null/iperf3 >= 0.6, null/grpcio >= 1.5, file/min(fio, null) >= 0.8
# Every step is bounded (timeout); the whole run takes well under 3 minutes (~30 s here).
set -euo pipefail

usage() { echo "usage: bench/fallback.sh BUILD_DIR [--frames N] [--size SIZE] [--rounds N] [--data-dir DIR]" >&2; exit 2; }
[ $# -ge 1 ] || usage
BUILD=$(cd "$1" && pwd) || usage
shift
FRAMES=500
SIZE=4M
ROUNDS=3
DATA_PARENT=$BUILD
while [ $# -gt 0 ]; do
	case "$1" in
	--frames) FRAMES=${2:?}; shift ;;
	--size) SIZE=${2:?}; shift ;;
	--rounds) ROUNDS=${2:?}; shift ;;
	--data-dir) DATA_PARENT=${2:?}; shift ;;
	*) usage ;;
	esac
	shift
done
HERE=$(cd "$(dirname "$0")" && pwd)
INGESTD=$BUILD/apps/ingestd
SEND=$BUILD/apps/ingest-send
PY=/usr/bin/python3
for b in "$INGESTD" "$SEND"; do
	[ -x "$b" ] || { echo "bench: $b is not built" >&2; exit 1; }
done
for t in iperf3 fio; do
	command -v "$t" >/dev/null || { echo "bench: $t is missing (deploy/install-deps.sh)" >&2; exit 1; }
done
$PY -c 'import grpc' 2>/dev/null || { echo "bench: python3-grpcio is missing" >&2; exit 1; }

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

# wait_port FILE PID: wait (bounded) until a server wrote its port
wait_port() {
	for _ in $(seq 1 300); do
		[ -s "$1" ] && { tr -dc '0-9' <"$1"; return 0; }
		kill -0 "$2" 2>/dev/null || return 1
		sleep 0.1
	done
	return 1
}

# start_ingestd SINK: ingestd on a free loopback port; sets PORT
start_ingestd() {
	local sink=$1 pid
	mkdir -p "$DATA/$sink"
	rm -f "$TMP/port"
	"$INGESTD" --listen 127.0.0.1:0 --data-dir "$DATA/$sink" --sink "$sink" --pool "$SIZE:64" \
		--port-file "$TMP/port" --log-level warn >"$TMP/ingestd-$sink.log" 2>&1 &
	pid=$!
	PIDS+=("$pid")
	PORT=$(wait_port "$TMP/port" "$pid") ||
		{ echo "bench: ingestd --sink $sink did not start" >&2; tail "$TMP/ingestd-$sink.log" >&2; exit 1; }
}

# send_to NAME PORT FIRST_ID: sets RESULT (MB/s of ingest-send). New frame ids every round,
# so the file sink never skips a duplicate.
send_to() {
	timeout 90 "$SEND" --server "127.0.0.1:$2" --transport grpc --count "$FRAMES" --size "$SIZE" \
		--seed 5 --first-id "$3" --wafer bench --reuse-buffers --json --quiet >"$TMP/send-$1.json" ||
		{ echo "bench: ingest-send to $1 failed" >&2; exit 1; }
	RESULT=$(field "$TMP/send-$1.json" mb_s)
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
start_ingestd null
PORT_NULL=$PORT
start_ingestd file
PORT_FILE=$PORT
rm -f "$TMP/gport"
$PY "$HERE/grpcio_server.py" --listen 127.0.0.1:0 --port-file "$TMP/gport" >"$TMP/grpcio.log" 2>&1 &
gpid=$!
PIDS+=("$gpid")
PORT_GRPCIO=$(wait_port "$TMP/gport" "$gpid") ||
	{ echo "bench: grpcio_server did not start" >&2; cat "$TMP/grpcio.log" >&2; exit 1; }
iport=$((20000 + RANDOM % 20000))
iperf3 -s -B 127.0.0.1 -p "$iport" >"$TMP/iperf3-s.log" 2>&1 &
PIDS+=("$!")
sleep 0.5

# warm-up, not counted
send_to null "$PORT_NULL" 1
timeout 60 iperf3 -c 127.0.0.1 -p "$iport" -l 1M -n "$bytes" -J >"$TMP/iperf3.json" ||
	{ echo "bench: iperf3 failed" >&2; cat "$TMP/iperf3-s.log" >&2; exit 1; }

R_NULL=() R_FILE=() R_GRPCIO=() R_IPERF=() R_FIO=()
for r in $(seq 1 "$ROUNDS"); do
	first=$((r * 1000000))
	send_to null "$PORT_NULL" "$first"
	R_NULL+=("$RESULT")
	send_to file "$PORT_FILE" "$first"
	R_FILE+=("$RESULT")
	rm -rf "$DATA/file/frames"     # bounded disk use; the next round uses other ids
	send_to grpcio "$PORT_GRPCIO" "$first"
	R_GRPCIO+=("$RESULT")
	timeout 60 iperf3 -c 127.0.0.1 -p "$iport" -l 1M -n "$bytes" -J >"$TMP/iperf3.json" ||
		{ echo "bench: iperf3 failed" >&2; cat "$TMP/iperf3-s.log" >&2; exit 1; }
	R_IPERF+=("$($PY -c "import json,sys; d=json.load(open(sys.argv[1])); print('%.1f' % (d['end']['sum_received']['bits_per_second'] / 8e6))" "$TMP/iperf3.json")")
	timeout 90 fio --name=seqwrite --directory="$DATA" --rw=write --bs=1M --size="$bytes" --direct=1 \
		--ioengine=psync --end_fsync=1 --numjobs=1 --output-format=json >"$TMP/fio.json" 2>"$TMP/fio.err" ||
		{ echo "bench: fio failed (O_DIRECT unsupported here? try --data-dir on a disk):" >&2; cat "$TMP/fio.err" >&2; exit 1; }
	R_FIO+=("$($PY -c "import json,sys; d=json.load(open(sys.argv[1])); print('%.1f' % (d['jobs'][0]['write']['bw_bytes'] / 1e6))" "$TMP/fio.json")")
	rm -f "$DATA"/seqwrite.*
	echo "round $r: null ${R_NULL[-1]}  file ${R_FILE[-1]}  grpcio ${R_GRPCIO[-1]}  iperf3 ${R_IPERF[-1]}  fio ${R_FIO[-1]}  (MB/s)"
done

$PY - "${R_NULL[*]}" "${R_FILE[*]}" "${R_GRPCIO[*]}" "${R_IPERF[*]}" "${R_FIO[*]}" <<'PYEOF'
import statistics, sys
null, file, grpcio, iperf, fio = (statistics.median(map(float, a.split())) for a in sys.argv[1:])
print()
print("%-52s %8s" % ("bench/fallback results (median of the rounds)", "MB/s"))
for name, v in (("ingest-send -> ingestd --sink null (gRPC fallback)", null),
                ("ingest-send -> ingestd --sink file", file),
                ("ingest-send -> python grpcio server", grpcio),
                ("iperf3 loopback, 1 MiB writes", iperf),
                ("fio O_DIRECT 1 MiB sequential write", fio)):
    print("%-52s %8.1f" % (name, v))
print()
def ratio(name, num, den, target):
    r = num / den if den else 0.0
    print("%-34s %6.2f   target >= %.1f  %s" % (name, r, target, "ok" if r >= target else "BELOW"))
ratio("null-sink / iperf3", null, iperf, 0.6)
ratio("null-sink / grpcio", null, grpcio, 1.5)
ratio("file-sink / min(fio, null-sink)", file, min(fio, null), 0.8)
PYEOF
echo "load average $(cut -d' ' -f1-3 /proc/loadavg) after the run"
