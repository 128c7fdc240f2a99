#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# demo.sh BUILD_DIR [--keep] [--count N] [--data-dir DIR] [--tier] - the `make demo` driver:
#  1. ingest-doctor's summary of this machine (when built);
#  2. ingestd on loopback with its embedded defaults (127.0.0.1:50051, or a free port when
#     that one is taken), data in BUILD_DIR/demo-data unless --data-dir;
#  3. ingest-send: N synthetic frames (default 300) of mixed sizes 1-16 MiB, progress line;
#  4. ingest-verify: every stored frame's bytes, crc32c and catalog row;
#  5. throughput, P50/P95/P99 ack latency, where the frames are; ingestd stopped with SIGTERM;
#  6. the demo data is deleted unless --keep.
# --tier (make demo TIER=1): a single-node Ceph (monitor, OSD, radosgw; tests/tier/ceph_lib.sh,
# the Debian packages ceph-mon, ceph-osd and radosgw) is started first, ingestd tiers every
# frame to it with --local-retention 0s, the demo waits until every frame is in the store and
# its local copy deleted, checks them there (ingest-verify --tier), fetches one back with
# ingest-get, and prints the upload rate; the cluster is stopped and removed at the end.
set -euo pipefail

usage() { echo "usage: deploy/demo.sh BUILD_DIR [--keep] [--count N] [--data-dir DIR] [--tier]" >&2; exit 2; }
[ $# -ge 1 ] || usage
BUILD=$(cd "$1" && pwd) || usage
shift
KEEP=0
COUNT=300
DATA=
TIER=0
while [ $# -gt 0 ]; do
	case "$1" in
	--keep) KEEP=1 ;;
	--tier) TIER=1 ;;
	--count) COUNT=${2:?}; shift ;;
	--data-dir) DATA=${2:?}; shift ;;
	*) usage ;;
	esac
	shift
done
[ -n "$DATA" ] || DATA=$BUILD/demo-data
SIZES=1M-16M
SEED=42
WAFER=demo-wafer
ID_PREFIX="lot A7/frame-"   # string ids as a line would name them: stored under escaped names

INGESTD=$BUILD/apps/ingestd
SEND=$BUILD/apps/ingest-send
VERIFY=$BUILD/apps/ingest-verify
DOCTOR=$BUILD/apps/ingest-doctor
for b in "$INGESTD" "$SEND" "$VERIFY"; do
	[ -x "$b" ] || { echo "demo: $b is not built (run: make build)" >&2; exit 1; }
done

hr() { printf '%s\n' "------------------------------------------------------------------------"; }
say() { printf '\n== %s\n' "$*"; }

# ---------------------------------------------------------------- disk space
mkdir -p "$DATA"
DATA=$(cd "$DATA" && pwd)
if [ -n "$(ls -A "$DATA" 2>/dev/null)" ]; then
	echo "demo: $DATA is not empty; remove it or pass --data-dir" >&2
	exit 1
fi
# mean frame 8.5 MiB, plus 10 % and 256 MiB of headroom for the catalog and the file system
need_mb=$(( COUNT * 85 / 10 * 11 / 10 + 256 ))
avail_mb=$(df -Pm "$DATA" | awk 'NR == 2 { print $4 }')
if [ "$avail_mb" -lt "$need_mb" ]; then
	echo "demo: not enough free space in $DATA: $COUNT frames of 1-16 MiB need about ${need_mb} MiB," >&2
	echo "      ${avail_mb} MiB are free. Free some space, pass --data-dir DIR on a larger disk," >&2
	echo "      or send fewer frames: deploy/demo.sh $BUILD --count $(( (avail_mb - 256) * 10 / 11 * 10 / 85 ))" >&2
	rmdir "$DATA" 2>/dev/null || true
	exit 1
fi

# ---------------------------------------------------------------- 1. the machine
# After the data dir exists, so the doctor checks the file system the frames go to, and
# against the size of ingestd's default pool (4M:16,16M:8,64M:4 = 448 MiB).
if [ -x "$DOCTOR" ]; then
	say "ingest-doctor: this machine, data dir $DATA"
	doc_rc=0
	doc_out=$(mktemp)
	timeout 60 "$DOCTOR" --data-dir "$DATA" --pool-bytes 448M >"$doc_out" 2>&1 || doc_rc=$?
	tail -n 30 "$doc_out"
	rm -f "$doc_out"
	case $doc_rc in
	0) ;;
	1) echo "(ingest-doctor found a FAIL above; the demo goes on with what works here)" ;;
	*) echo "(ingest-doctor exited $doc_rc; the demo goes on)" ;;
	esac
else
	say "ingest-doctor not built: skipping the machine check"
fi

RUN=$(mktemp -d /tmp/h3000-demo.XXXXXX)
PID=
cleanup() {
	if [ -n "$PID" ] && kill -0 "$PID" 2>/dev/null; then
		kill -TERM "$PID" 2>/dev/null || true
		for _ in $(seq 1 100); do kill -0 "$PID" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$PID" 2>/dev/null || true
	fi
	[ "$TIER" = 0 ] || ceph_cleanup
	if [ "$KEEP" = 1 ]; then
		echo "demo: kept the frames in $DATA and the logs in $RUN"
	else
		rm -rf "$DATA" "$RUN"
		echo "demo: deleted the demo data ($DATA); pass --keep to keep it"
	fi
}
trap cleanup EXIT

# ---------------------------------------------------------------- 1b. the object store
TIER_ARGS=() VERIFY_TIER=()
if [ "$TIER" = 1 ]; then
	SRC=$(cd "$(dirname "$0")/.." && pwd)
	fail() { echo "demo: $*" >&2; exit 1; }
	. "$SRC/tests/tier/ceph_lib.sh"
	say "a single-node Ceph for the object store tier (monitor, OSD, radosgw on loopback)"
	ceph_start
	ceph_s3 mb demo-frames
	TIER_ARGS=(--tier "s3://127.0.0.1:$CEPH_RGW_PORT/demo-frames" --tier-credentials "$CEPH_CREDS"
		   --local-retention 0s)
	# a frame whose local copy is already gone is checked in the store
	VERIFY_TIER=(--tier "s3://127.0.0.1:$CEPH_RGW_PORT/demo-frames" --tier-credentials "$CEPH_CREDS")
	echo "ingestd uploads every frame to s3://127.0.0.1:$CEPH_RGW_PORT/demo-frames and deletes"
	echo "its local copy once the object is verified (--local-retention 0s)"
fi

# ---------------------------------------------------------------- 2. ingestd
LISTEN=()
if (exec 3<>/dev/tcp/127.0.0.1/50051) 2>/dev/null; then
	echo "demo: 127.0.0.1:50051 is taken; ingestd listens on a free loopback port instead"
	LISTEN=(--listen 127.0.0.1:0)
fi
say "starting ingestd (embedded defaults${LISTEN:+, ${LISTEN[*]}}), data dir $DATA"
"$INGESTD" "${LISTEN[@]}" --data-dir "$DATA" --port-file "$RUN/port" "${TIER_ARGS[@]}" >"$RUN/ingestd.log" 2>&1 &
PID=$!
for _ in $(seq 1 300); do
	[ -s "$RUN/port" ] && break
	if ! kill -0 "$PID" 2>/dev/null; then
		echo "demo: ingestd exited during start-up:" >&2
		tail -n 30 "$RUN/ingestd.log" >&2
		PID=
		exit 1
	fi
	sleep 0.1
done
[ -s "$RUN/port" ] || { echo "demo: ingestd did not come up within 30 s" >&2; tail -n 30 "$RUN/ingestd.log" >&2; exit 1; }
PORT=$(tr -dc '0-9' <"$RUN/port")
echo "ingestd pid $PID listening on 127.0.0.1:$PORT (log: $RUN/ingestd.log)"

# ---------------------------------------------------------------- 3. send
say "ingest-send: $COUNT synthetic frames, sizes $SIZES (seed $SEED), wafer $WAFER"
rc=0
"$SEND" --server "127.0.0.1:$PORT" --count "$COUNT" --sizes "$SIZES" --seed "$SEED" \
	--wafer "$WAFER" --id-prefix "$ID_PREFIX" --manifest "$RUN/manifest" --json >"$RUN/send.json" || rc=$?
if [ "$rc" != 0 ]; then
	echo "demo: ingest-send exited $rc (some frames not DURABLE); ingestd log tail:" >&2
	tail -n 20 "$RUN/ingestd.log" >&2
	exit 1
fi

# ---------------------------------------------------------------- 4. verify
if [ "$TIER" = 1 ]; then
	say "ingest-verify: every stored frame, in its file or (local copy deleted) in the store"
else
	say "ingest-verify: every stored frame (length, bytes, crc32c, catalog row)"
fi
"$VERIFY" --data-dir "$DATA" --manifest "$RUN/manifest" "${VERIFY_TIER[@]}" || { echo "demo: verification FAILED" >&2; exit 1; }

# ---------------------------------------------------------------- 4b. the tier
if [ "$TIER" = 1 ]; then
	say "object store tier: every frame uploaded, verified, its local copy deleted"
	export TIER_RPC_STUBS=$RUN/stubs
	/usr/bin/python3 "$SRC/tests/tier/tier_rpc.py" wait "127.0.0.1:$PORT" \
		"backlogFrames == 0 and framesTiered == $COUNT" 600 >"$RUN/tier.json" ||
		{ echo "demo: the frames were not all tiered within 10 min" >&2; tail -n 20 "$RUN/ingestd.log" >&2; exit 1; }
	python3 - "$RUN/tier.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
print("  store           %s" % d["store"])
print("  uploaded        %d frames, %.1f MiB (%d were already there)" % (d["uploadedFrames"],
      d["uploadedBytes"] / 1048576, d["alreadyStored"]))
print("  upload rate     %.1f MB/s over the last 10 s" % (d["uploadBytesPerSecond"] / 1e6))
print("  where           %d local, %d local + store, %d store only; %d local copies deleted" % (
      d["framesLocal"], d["framesBoth"], d["framesTiered"], d["localDeleted"]))
EOF
	say "ingest-verify --tier: every frame read back from the store and checked"
	"$VERIFY" --data-dir "$DATA" --manifest "$RUN/manifest" "${VERIFY_TIER[@]}" || { echo "demo: verification in the store FAILED" >&2; exit 1; }
	say "ingest-get: frame '${ID_PREFIX}1' back from the store (its local copy is gone)"
	"$BUILD/apps/ingest-get" --server "127.0.0.1:$PORT" --wafer "$WAFER" --frame "${ID_PREFIX}1" \
		--out "$RUN/frame-1" || { echo "demo: ingest-get FAILED" >&2; exit 1; }
fi

# ---------------------------------------------------------------- 5. results
say "stopping ingestd (SIGTERM)"
kill -TERM "$PID"
src=0
for _ in $(seq 1 300); do kill -0 "$PID" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$PID" 2>/dev/null; then
	echo "demo: ingestd did not stop within 30 s" >&2
	exit 1
fi
wait "$PID" || src=$?
PID=
echo "ingestd exited with status $src"

python3 - "$RUN/send.json" "$DATA" "$KEEP" <<'EOF'
import json, os, sys
d = json.load(open(sys.argv[1]))
data = sys.argv[2]
lr, ld = d["latency_ms"]["received"], d["latency_ms"]["durable"]
print("-" * 72)
print("h3000 ingest demo: %d frames, %.1f MiB in %.2f s" % (d["frames"], d["bytes"] / 1048576, d["wall_s"]))
print("  throughput      %.1f MB/s (%.1f MiB/s)" % (d["mb_s"], d["mib_s"]))
def row(label, h):
    print("  %-15s p50 %.2f ms  p95 %.2f ms  p99 %.2f ms" % (label, h["p50"], h["p95"], h["p99"]))
print("  ack latency, submit -> ack at the producer (includes waiting behind the frames in flight):")
row("ack RECEIVED", lr)
row("ack DURABLE", ld)
if d["latency_ms"].get("node_durable", {}).get("count"):
    print("  node time, frame admitted -> ack sent (the ingest node's own share):")
    row("node RECEIVED", d["latency_ms"]["node_received"])
    row("node DURABLE", d["latency_ms"]["node_durable"])
print("  frames ok       %d (duplicates %d), failed %d" % (d["ok"], d["duplicate"], d["failed"]))
print("  transport       %s: %s" % (d["transport"], d["transport_note"]))
print("  stored in       %s/frames/<wafer>/<frame id, escaped>.frame" % data)
try:
    import sqlite3
    row = sqlite3.connect(os.path.join(data, "catalog.db")).execute(
        "SELECT wafer_id, frame_id, path FROM frames ORDER BY durable_ns LIMIT 1").fetchone()
    if row:
        print("                  e.g. frame %r of wafer %r is %s" % (row[1], row[0], row[2]))
except Exception as e:  # the catalog is shown as an example only
    print("                  (catalog example unavailable: %s)" % e)
if sys.argv[3] != "1":
    print("                  (deleted when the demo ends; pass --keep to keep them)")
print("  catalog         %s/catalog.db (sqlite3: SELECT * FROM frames)" % data)
print("-" * 72)
EOF
[ "$src" = 0 ] || { echo "demo: ingestd exit status $src" >&2; exit 1; }
echo "demo: OK"
