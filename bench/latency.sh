#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# latency.sh BUILD_DIR [--out DIR] [--data-dir PARENT] [INGEST-BENCH OPTIONS...]
#
# What `make bench` runs: starts ingestd (file sink) on 127.0.0.1 with a kernel-picked port
# and a fresh data dir, runs ingest-bench against it (default: a short sweep over the gRPC
# fallback, 4 MiB frames, 10,30,50,70,90 % of the measured capacity, 3 s per point after
# 1 s of warm-up; options after BUILD_DIR are passed on and override those), stops
# ingestd, removes the data dir and prints where the report is. Not a test: it asserts
# nothing. RDMA transports run only inside the Soft-RoCE guest (bench/rdma.sh shows how).
# Bounded: ingest-bench refuses sweeps longer than --max-time, and the whole script runs
# under a timeout.
set -euo pipefail

usage() { echo "usage: bench/latency.sh BUILD_DIR [--out DIR] [--data-dir PARENT] [ingest-bench options]" >&2; exit 2; }
[ $# -ge 1 ] || usage
BUILD=$(cd "$1" && pwd) || usage
shift
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/.." && pwd)
OUT=$BUILD/bench-results/latency-$(date -u +%Y%m%dT%H%M%SZ)
DATA_PARENT=$BUILD
ARGS=()
while [ $# -gt 0 ]; do
	case "$1" in
	--out) OUT=${2:?}; shift ;;
	--data-dir) DATA_PARENT=${2:?}; shift ;;
	*) ARGS+=("$1") ;;
	esac
	shift
done
INGESTD=$BUILD/apps/ingestd
BENCH=$BUILD/apps/ingest-bench
for b in "$INGESTD" "$BENCH"; do
	[ -x "$b" ] || { echo "bench: $b is not built" >&2; exit 1; }
done
command -v gnuplot >/dev/null || { echo "bench: gnuplot is missing (deploy/install-deps.sh installs gnuplot-nox)" >&2; exit 1; }

TMP=$(mktemp -d /tmp/h3000-latency.XXXXXX)
DATA=$(mktemp -d "$DATA_PARENT/bench-data.XXXXXX")
PID=
cleanup() {
	if [ -n "$PID" ] && kill -0 "$PID" 2>/dev/null; then
		kill -TERM "$PID" 2>/dev/null || true
		for _ in $(seq 1 100); do kill -0 "$PID" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$PID" 2>/dev/null || true
		wait "$PID" 2>/dev/null || true
	fi
	rm -rf "$TMP" "$DATA"
}
trap cleanup EXIT

"$INGESTD" --listen 127.0.0.1:0 --port-file "$TMP/port" --data-dir "$DATA/d" >"$TMP/ingestd.log" 2>&1 &
PID=$!
for _ in $(seq 1 300); do
	[ -s "$TMP/port" ] && break
	kill -0 "$PID" 2>/dev/null || { cat "$TMP/ingestd.log" >&2; echo "bench: ingestd exited" >&2; exit 1; }
	sleep 0.1
done
[ -s "$TMP/port" ] || { echo "bench: ingestd wrote no port file in 30 s" >&2; exit 1; }
SERVER=127.0.0.1:$(tr -dc '0-9' <"$TMP/port")
REV=$(git -C "$SRC" rev-parse --short HEAD 2>/dev/null || echo unknown)
if [ -n "$(git -C "$SRC" status --porcelain --untracked-files=no 2>/dev/null)" ]; then REV="$REV-dirty"; fi

mkdir -p "$(dirname "$OUT")"
rc=0
timeout 900 "$BENCH" --server "$SERVER" --data-dir "$DATA/d" --out "$OUT" --git-rev "$REV" \
	--duration 3 --warmup 1 --capacity-s 4 --max-time 600 "${ARGS[@]}" || rc=$?
if [ -s "$OUT/report.md" ]; then
	echo "bench: results in $OUT (report: $OUT/report.md)"
else
	echo "bench: no report written (ingest-bench exit $rc; ingestd log follows)" >&2
	tail -20 "$TMP/ingestd.log" >&2
fi
exit $rc
