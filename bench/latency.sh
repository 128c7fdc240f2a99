#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# latency.sh BUILD_DIR [--out DIR] [--data-dir PARENT] [--guest] [INGEST-BENCH OPTIONS...]
#
# What `make bench` runs: starts ingestd (file sink) on 127.0.0.1 with a kernel-picked port
# and a fresh data dir, runs ingest-bench against it (default: a short sweep over the gRPC
# fallback, 4 MiB frames, 10,30,50,70,90 % of the measured capacity, 5 s per point after
# 1 s of warm-up; options after BUILD_DIR are passed on and override those), stops
# ingestd, removes the data dir and prints where the report is. Not a test: it asserts
# nothing. RDMA transports run only inside the Soft-RoCE guest: --guest boots it
# (deploy/rxe-vm, qemu TCG: slow and CPU-heavy, minutes), measures the RDMA floors there
# (ib_read_lat / ib_write_lat of the frame size, passed to ingest-bench as --floor) and
# sweeps grpc, rdma (READ pull) and rdma-write (WRITE push) against an ingestd with --rdma on (1 MiB frames, 2 s per point,
# unless given); the results land in --out on the host.
# BENCH_NODE_ARGS="..." adds ingestd options (word-split), for A/B runs of one option.
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
GUEST=0
ARGS=()
while [ $# -gt 0 ]; do
	case "$1" in
	--out) OUT=${2:?}; shift ;;
	--data-dir) DATA_PARENT=${2:?}; shift ;;
	--guest) GUEST=1 ;;
	*) ARGS+=("$1") ;;
	esac
	shift
done
INGESTD=$BUILD/apps/ingestd
BENCH=$BUILD/apps/ingest-bench
for b in "$INGESTD" "$BENCH"; do
	[ -x "$b" ] || { echo "bench: $b is not built" >&2; exit 1; }
done
if [ "$GUEST" = 1 ] && [ "${RXE_VM:-0}" != 1 ]; then
	mkdir -p "$OUT"
	OUT=$(cd "$OUT" && pwd)
	# 4 GiB: the guest's writes (the stored frames of three transports' sweeps, over 1 GiB
	# at the default durations) live in a tmpfs of half its memory
	exec env ING_BUILD_DIR="$BUILD" RXE_VM_RW="$OUT" RXE_VM_MEM="${RXE_VM_MEM:-4096}" \
		"$SRC/deploy/rxe-vm/run-in-rxe-vm.sh" \
		bash "$SRC/bench/latency.sh" "$BUILD" --guest --out "$OUT" "${ARGS[@]}"
fi
# in the guest only the dirs of RXE_VM_RW are kept; the data dir is scratch: /tmp there
[ "${RXE_VM:-0}" = 1 ] && [ "$DATA_PARENT" = "$BUILD" ] && DATA_PARENT=/tmp
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

EXTRA=(--duration 5s --warmup 1s --capacity-time 4s)
NODE=()
if [ "$GUEST" = 1 ]; then
	# the frame size of the sweep (the last --sizes wins; 1M by default here)
	SIZE=1M
	for ((i = 0; i < ${#ARGS[@]}; i++)); do
		[ "${ARGS[$i]}" = --sizes ] && SIZE=${ARGS[$((i + 1))]%%,*}
	done
	SIZE=${SIZE##*-}   # a range MIN-MAX: the pool and the floors take its largest frame
	SZ=$(numfmt --from=iec "$SIZE")
	EXTRA=(--transport grpc,rdma,rdma-write --sizes "$SIZE" --duration 2s --warmup 1s --capacity-time 3s)
	NODE=(--rdma on --pool "$SIZE:40" --credits 16 --workers 1)
	for t in ib_read_lat ib_write_lat; do   # the RDMA floor: one message of the frame size
		timeout 120 "$t" -d "$RXE_DEV" -x "$RXE_GID_INDEX" -s "$SZ" -n 100 -F >"$TMP/$t-srv.log" 2>&1 &
		sp=$!
		sleep 2
		if timeout 120 "$t" -d "$RXE_DEV" -x "$RXE_GID_INDEX" -s "$SZ" -n 100 -F "$RXE_IP" \
			>"$TMP/$t.log" 2>&1; then
			# columns: bytes iters t_min t_max t_typical t_avg t_stdev 99% 99.9% (usec)
			line=$(grep -A1 '#bytes' "$TMP/$t.log" | tail -1)
			echo "bench: $t $SIZE: $line"
			EXTRA+=(--floor "$(awk -v n="$t $SIZE" '{printf "%s=%.4f:%.4f", n, $5 / 1000, $8 / 1000}' <<<"$line")")
		else
			echo "bench: $t failed (floor not measured):" >&2
			tail -5 "$TMP/$t.log" >&2
		fi
		wait "$sp" 2>/dev/null || true
	done
fi
# BENCH_NODE_ARGS (env): more ingestd options, e.g. "--worker-nice 0" for an A/B run
# shellcheck disable=SC2206
NODE+=(${BENCH_NODE_ARGS:-})
"$INGESTD" --listen 127.0.0.1:0 --port-file "$TMP/port" --data-dir "$DATA/d" "${NODE[@]}" \
	>"$TMP/ingestd.log" 2>&1 &
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
	"${EXTRA[@]}" --max-time 600 "${ARGS[@]}" || rc=$?
if [ -s "$OUT/report.md" ]; then
	echo "bench: results in $OUT (report: $OUT/report.md)"
else
	echo "bench: no report written (ingest-bench exit $rc; ingestd log follows)" >&2
	tail -20 "$TMP/ingestd.log" >&2
fi
exit $rc
