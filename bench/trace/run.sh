#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# run.sh BUILD SRCROOT [RUNS]: one 4 KiB PushFrames frame through BUILD's ingestd (built
# with -finstrument-functions, see README.md) RUNS times (default 5), each traced by
# file_trace.so; prints the issue's count and the full count of every run, then medians.
# SEND=path overrides the sender (default BUILD/apps/ingest-send). Loopback, port 0.
set -euo pipefail
B=$(realpath "$1"); SRC=$(realpath "$2"); RUNS=${3:-5}
HERE=$(cd "$(dirname "$0")" && pwd)
T=$(mktemp -d /tmp/filetrace.XXXXXX)
trap 'rm -rf "$T"' EXIT
cc -O2 -shared -fPIC -o "$T/file_trace.so" "$HERE/file_trace.c" -ldl
SEND=${SEND:-$B/apps/ingest-send}
issue=() full=()
for r in $(seq "$RUNS"); do
	mkdir -p "$T/d"
	rm -f "$T/port"
	H3000_FILE_TRACE=$T/trace LD_PRELOAD=$T/file_trace.so "$B/apps/ingestd" --listen 127.0.0.1:0 \
		--data-dir "$T/d" --sink file --pool 4M:8 --port-file "$T/port" --log-level warn \
		--hugepages off >"$T/log" 2>&1 &
	P=$!
	for _ in $(seq 600); do [ -s "$T/port" ] && break; sleep 0.1; done
	[ -s "$T/port" ] || { cat "$T/log"; echo "run.sh: ingestd did not start" >&2; exit 1; }
	PORT=$(tr -dc 0-9 <"$T/port")
	sleep 1   # the node idle before the frame: its start-up is not in the window
	"$SEND" --server "127.0.0.1:$PORT" --transport grpc --count 1 --size 4096 --seed 5 \
		--first-id 7 --wafer w --quiet
	sleep 0.5
	kill -TERM "$P"; wait "$P" || true
	i=$(python3 "$HERE/file_path.py" "$T/trace" "$SRC" --issue | sed -n 's/.*returns to a file left \([0-9]*\).*/\1/p')
	f=$(python3 "$HERE/file_path.py" "$T/trace" "$SRC" | sed -n 's/.*returns to a file left \([0-9]*\).*/\1/p')
	echo "run $r: issue's count $i, full count $f"
	issue+=("$i"); full+=("$f")
	[ "$r" = "$RUNS" ] && cp "$T/trace" "${KEEP_TRACE:-/dev/null}" 2>/dev/null || true
	rm -rf "$T/d" "$T/trace"
done
med() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)] " (" a[1] "-" a[NR] ")"}'; }
echo "issue's count (control thread, msg_finish -> ack write, .c files): median $(med "${issue[@]}")"
echo "full count (all threads, on_data_chunk -> ack write): median $(med "${full[@]}")"
