#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tier.sh BUILD_DIR [--frames N] [--size SIZE] [--rounds N]
#
# Benchmark of the object store tier (not a test: it asserts nothing, it prints), on a
# single-node Ceph started for it (tests/tier/ceph_lib.sh: monitor, OSD, radosgw on this
# machine). In one run, with the same frames (default 32 x 16 MiB = 512 MiB a measurement)
# and ROUNDS interleaved rounds (default 3, medians compared):
#   upload   ingestd --tier uploading frames already stored (no ingest at the same time),
#            --tier-parallel 4 and 1: wall time from its start to an empty backlog
#   verify   the same upload (4 at once) with each way of verifying an object
#            ($ING_TIER_VERIFY): etag (the default: Content-MD5 sent, the store's ETag
#            against the frame's MD5, computed in the same hash pass as the SHA-256),
#            none (no digest of the store's: what the tier did before), read-back (every
#            object read back, CRC-32C): the rate and the tier thread's CPU per GiB, i.e.
#            what verifying against the store's own digest costs
#   boto3    the same files put to the same radosgw by boto3, 4 threads and 1
#   s3cmd    the same files, s3cmd put (one stream, no multipart)
#   ingest   ingest-send to ingestd without and with --tier (the store taking the frames
#            while they come in): as fast as it goes (closed loop), and paced at 80 % of
#            the tier's upload rate so that the store keeps up (open loop, --rate): the
#            throughput and the DURABLE P99; ingestd's CPU per GiB ingested and the tier
#            thread's per GiB uploaded
# Ratios and their goals: upload/boto3 >= 0.9 at equal parallelism; ingest with the tier
# >= 0.9 x without, while the store keeps up. Ceph runs on the same cores as ingestd here,
# so the closed-loop ratio also pays for the store's own CPU; the CPU per GiB lines are the
# node's share alone. Every step is bounded; the run takes a few minutes.
set -euo pipefail

usage() { echo "usage: bench/tier.sh BUILD_DIR [--frames N] [--size SIZE] [--rounds N]" >&2; exit 2; }
[ $# -ge 1 ] || usage
BUILD=$(cd "$1" && pwd) || usage
shift
FRAMES=32
SIZE=16M
ROUNDS=3
while [ $# -gt 0 ]; do
	case "$1" in
	--frames) FRAMES=${2:?}; shift ;;
	--size) SIZE=${2:?}; shift ;;
	--rounds) ROUNDS=${2:?}; shift ;;
	*) usage ;;
	esac
	shift
done
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/.." && pwd)
INGESTD=$BUILD/apps/ingestd
SEND=$BUILD/apps/ingest-send
PY=/usr/bin/python3
for b in "$INGESTD" "$SEND"; do
	[ -x "$b" ] || { echo "bench: $b is not built" >&2; exit 1; }
done
command -v s3cmd >/dev/null || { echo "bench: s3cmd is missing (deploy/install-deps.sh)" >&2; exit 1; }
fail() { echo "bench: $*" >&2; exit 1; }
. "$SRC/tests/tier/ceph_lib.sh"

TMP=$(mktemp -d /tmp/h3000-bench-tier.XXXXXX)
export TIER_RPC_STUBS=$TMP/stubs
RPC="$PY $SRC/tests/tier/tier_rpc.py"
PID=
cleanup() {
	if [ -n "$PID" ] && kill -0 "$PID" 2>/dev/null; then
		kill -KILL "$PID" 2>/dev/null || true
	fi
	ceph_cleanup
	rm -rf "$TMP"
}
trap cleanup EXIT

now() { date +%s.%N; }
# node DIR [ARGS...]: ingestd on a free loopback port ($PID, $SERVER)
node() {
	local dir=$1
	shift
	rm -f "$TMP/port"
	"$INGESTD" --listen 127.0.0.1:0 --port-file "$TMP/port" --data-dir "$dir" --hugepages off \
		--log-level warn "$@" >>"$TMP/ingestd.log" 2>&1 &
	PID=$!
	for _ in $(seq 1 300); do
		[ -s "$TMP/port" ] && break
		kill -0 "$PID" 2>/dev/null || fail "ingestd exited: $(tail -3 "$TMP/ingestd.log")"
		sleep 0.1
	done
	[ -s "$TMP/port" ] || fail "ingestd did not start"
	SERVER=127.0.0.1:$(tr -dc '0-9' <"$TMP/port")
}
stop() {
	kill -TERM "$PID"
	wait "$PID" || true
	PID=
}
tier_args() { echo --tier "s3://127.0.0.1:$CEPH_RGW_PORT/$1" --tier-credentials "$CEPH_CREDS"; }
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# cpu_of PID TID_NAME: user+sys seconds of the thread called NAME in process PID
cpu_of() {
	local t
	for t in /proc/"$1"/task/*; do
		if [ "$(cat "$t/comm" 2>/dev/null)" = "$2" ]; then
			awk -v hz="$(getconf CLK_TCK)" '{ print ($14 + $15) / hz }' "$t/stat"
			return
		fi
	done
	echo 0
}

# cpu_per_gib PID: the tier thread's cpu-s per GiB of the frames (BYTES) it uploaded
cpu_per_gib() { echo "$(cpu_of "$1" ingest-tier) $BYTES" | awk '{ printf "%.3f\n", $1 / ($2 / 1073741824) }'; }

ceph_start
BYTES=$("$PY" -c "import sys; m={'K':1<<10,'M':1<<20,'G':1<<30}; s=sys.argv[1]; print(int(s[:-1])*m[s[-1]]*int(sys.argv[2]) if s[-1] in m else int(s)*int(sys.argv[2]))" "$SIZE" "$FRAMES")
echo "bench: $FRAMES frames x $SIZE ($((BYTES >> 20)) MiB) a measurement, $ROUNDS rounds; radosgw at $CEPH_S3"

for r in $(seq 1 "$ROUNDS"); do
	# ---- the frames, stored without a tier, twice (one copy for each parallelism)
	D=$TMP/d$r
	node "$D"
	"$SEND" --server "$SERVER" --count "$FRAMES" --sizes "$SIZE" --wafer "bench$r" --quiet --reuse-buffers >/dev/null 2>&1 ||
		fail "ingest-send failed"
	stop
	cp -a "$D" "$D.p1"
	cp -a "$D" "$D.none"
	cp -a "$D" "$D.rb"
	# ---- the tier's upload rate, parallel 4 and 1
	for p in 4 1; do
		dir=$D
		[ "$p" = 4 ] || dir=$D.p1
		ceph_s3 mb "tier$r-p$p"
		node "$dir" $(tier_args "tier$r-p$p") --tier-parallel "$p"
		t0=$(now)   # serving: the tier thread is up (boto3's time starts at its first PUT too)
		$RPC wait "$SERVER" "backlogFrames == 0 and framesBoth == $FRAMES" 600 >"$TMP/stats.json" ||
			fail "the tier did not upload the frames"
		t1=$(now)
		echo "$BYTES $t0 $t1" | awk '{ printf "%.1f\n", $1 / 1e6 / ($3 - $2) }' >>"$TMP/tier.p$p"
		if [ "$p" = 4 ]; then cpu_per_gib "$PID" >>"$TMP/vcpu.etag"; fi
		stop
	done
	# ---- the same upload without the store's digest, and with every object read back
	for v in none rb; do
		mode=none
		[ "$v" = rb ] && mode=read-back
		ceph_s3 mb "tier$r-$v"
		ING_TIER_VERIFY=$mode node "$D.$v" $(tier_args "tier$r-$v") --tier-parallel 4
		t0=$(now)
		$RPC wait "$SERVER" "backlogFrames == 0 and framesBoth == $FRAMES" 600 >"$TMP/stats.json" ||
			fail "the tier did not upload the frames (ING_TIER_VERIFY=$mode)"
		t1=$(now)
		echo "$BYTES $t0 $t1" | awk '{ printf "%.1f\n", $1 / 1e6 / ($3 - $2) }' >>"$TMP/tier.$v"
		cpu_per_gib "$PID" >>"$TMP/vcpu.$v"
		stop
	done
	# ---- boto3 and s3cmd putting the same files to the same radosgw
	for p in 4 1; do
		ceph_s3 mb "boto$r-p$p"
		ceph_s3 putdir "boto$r-p$p" "bench$r/" "$D/frames/bench$r" "$p" | awk '{ print $3 }' >>"$TMP/boto.p$p"
	done
	ceph_s3 mb "s3cmd$r"
	t0=$(now)
	s3cmd --no-ssl --host="127.0.0.1:$CEPH_RGW_PORT" --host-bucket="127.0.0.1:$CEPH_RGW_PORT" \
		--access_key="$CEPH_ACCESS_KEY" --secret_key="$CEPH_SECRET_KEY" --disable-multipart \
		--no-progress --no-check-md5 put --recursive "$D/frames/bench$r/" "s3://s3cmd$r/" >/dev/null 2>"$TMP/s3cmd.err" ||
		fail "s3cmd: $(tail -2 "$TMP/s3cmd.err")"
	t1=$(now)
	echo "$BYTES $t0 $t1" | awk '{ printf "%.1f\n", $1 / 1e6 / ($3 - $2) }' >>"$TMP/s3cmd"
	rm -rf "$D" "$D.p1" "$D.none" "$D.rb"
	# ---- ingest throughput without and with the tier
	for mode in off on; do
		args=()
		if [ "$mode" = on ]; then
			ceph_s3 mb "ingest$r"
			read -ra args <<<"$(tier_args "ingest$r")"
		fi
		node "$TMP/i$r$mode" "${args[@]}"
		"$SEND" --server "$SERVER" --count "$FRAMES" --sizes "$SIZE" --wafer "ing$r" --quiet --json \
			--reuse-buffers >"$TMP/send.json" 2>/dev/null || fail "ingest-send failed"
		"$PY" -c "import json,sys; print(json.load(open(sys.argv[1]))['mb_s'])" "$TMP/send.json" >>"$TMP/ingest.$mode"
		if [ "$mode" = on ]; then
			$RPC stats "$SERVER" >"$TMP/stats.json"
			"$PY" -c "import json,sys; print(json.load(open(sys.argv[1]))['backlogFrames'])" "$TMP/stats.json" >>"$TMP/backlog"
			$RPC wait "$SERVER" "backlogFrames == 0 and framesBoth == $FRAMES" 600 >/dev/null ||
				fail "the tier did not catch up"
			cpu=$(cpu_of "$PID" ingest-tier)
			echo "$cpu $BYTES" | awk '{ printf "%.3f\n", $1 / ($2 / 1073741824) }' >>"$TMP/cpu"
		else
			awk -v hz="$(getconf CLK_TCK)" -v b="$BYTES" '{ printf "%.3f\n", ($14 + $15) / hz / (b / 1073741824) }' \
				"/proc/$PID/stat" >>"$TMP/cpu.ingest"
		fi
		stop
		rm -rf "$TMP/i$r$mode"
	done
	# ---- paced below the store's rate: the store keeps up
	fps=$(echo "$(median <"$TMP/tier.p4") $BYTES $FRAMES" | awk '{ f = int(0.8 * $1 * 1e6 / ($2 / $3)); print f < 1 ? 1 : f }')
	for mode in off on; do
		args=()
		if [ "$mode" = on ]; then
			ceph_s3 mb "paced$r"
			read -ra args <<<"$(tier_args "paced$r")"
		fi
		node "$TMP/p$r$mode" "${args[@]}"
		"$SEND" --server "$SERVER" --count "$FRAMES" --sizes "$SIZE" --wafer "pace$r" --quiet --json \
			--reuse-buffers --rate "$fps" >"$TMP/send.json" 2>/dev/null || fail "ingest-send failed"
		"$PY" -c "import json,sys; d=json.load(open(sys.argv[1])); print(d['mb_s'], d['latency_ms']['durable']['p99'])" \
			"$TMP/send.json" >>"$TMP/paced.$mode"
		if [ "$mode" = on ]; then
			$RPC stats "$SERVER" >"$TMP/stats.json"
			"$PY" -c "import json,sys; print(json.load(open(sys.argv[1]))['backlogFrames'])" "$TMP/stats.json" >>"$TMP/paced.backlog"
		fi
		stop
		rm -rf "$TMP/p$r$mode"
	done
	echo "$fps" >"$TMP/fps"
	echo "bench: round $r done"
done

m() { median <"$TMP/$1"; }
echo "------------------------------------------------------------------------"
echo "object store tier, $FRAMES x $SIZE, medians of $ROUNDS rounds (MB/s)"
printf "  upload, 4 at once  tier %7.1f   boto3 4 threads %7.1f   ratio %.2f (goal >= 0.9)\n" \
	"$(m tier.p4)" "$(m boto.p4)" "$(echo "$(m tier.p4) $(m boto.p4)" | awk '{ print $1 / $2 }')"
printf "  upload, one        tier %7.1f   boto3 1 thread  %7.1f   ratio %.2f   s3cmd %7.1f   ratio %.2f\n" \
	"$(m tier.p1)" "$(m boto.p1)" "$(echo "$(m tier.p1) $(m boto.p1)" | awk '{ print $1 / $2 }')" \
	"$(m s3cmd)" "$(echo "$(m tier.p1) $(m s3cmd)" | awk '{ print $1 / $2 }')"
printf "  ingest             tier off %7.1f   tier on %7.1f   ratio %.2f (goal >= 0.9)\n" \
	"$(m ingest.off)" "$(m ingest.on)" "$(echo "$(m ingest.on) $(m ingest.off)" | awk '{ print $1 / $2 }')"
printf "  with the tier on:  backlog at the end of the ingest %s frames of %s (0: the store kept up)\n" \
	"$(m backlog)" "$FRAMES"
pm() { awk -v k="$2" '{ print $k }' "$TMP/$1" | median; }
printf "  paced, %s frames/s (80 %% of the tier's rate): tier off %7.1f MB/s, DURABLE p99 %.1f ms;\n" \
	"$(cat "$TMP/fps")" "$(pm paced.off 1)" "$(pm paced.off 2)"
printf "                     tier on  %7.1f MB/s, DURABLE p99 %.1f ms; throughput ratio %.2f (goal >= 0.9),\n" \
	"$(pm paced.on 1)" "$(pm paced.on 2)" "$(echo "$(pm paced.on 1) $(pm paced.off 1)" | awk '{ print $1 / $2 }')"
printf "                     backlog at the end %s frames\n" "$(m paced.backlog)"
printf "  node cpu:          ingest %.2f cpu-s per GiB (ingestd, tier off); the tier thread adds %.2f per\n" \
	"$(m cpu.ingest)" "$(m cpu)"
printf "                     GiB uploaded (%.0f %% more)\n" \
	"$(echo "$(m cpu) $(m cpu.ingest)" | awk '{ print 100 * $1 / $2 }')"
printf "  verification, 4 at once (upload MB/s; the tier thread's cpu-s per GiB uploaded):\n"
printf "    etag       %7.1f MB/s  %.2f cpu-s/GiB   Content-MD5 sent; the store's ETag = the frame's MD5\n" \
	"$(m tier.p4)" "$(m vcpu.etag)"
printf "    none       %7.1f MB/s  %.2f cpu-s/GiB   no digest of the store's (no local copy may go)\n" \
	"$(m tier.none)" "$(m vcpu.none)"
printf "    read-back  %7.1f MB/s  %.2f cpu-s/GiB   every object read back, CRC-32C\n" \
	"$(m tier.rb)" "$(m vcpu.rb)"
printf "    cost of etag against none: rate ratio %.2f, +%.2f cpu-s per GiB (%.0f %% more);" \
	"$(echo "$(m tier.p4) $(m tier.none)" | awk '{ print $1 / $2 }')" \
	"$(echo "$(m vcpu.etag) $(m vcpu.none)" | awk '{ print $1 - $2 }')" \
	"$(echo "$(m vcpu.etag) $(m vcpu.none)" | awk '{ print ($2 > 0 ? 100 * ($1 - $2) / $2 : 0) }')"
printf " read-back against none: rate ratio %.2f\n" "$(echo "$(m tier.rb) $(m tier.none)" | awk '{ print $1 / $2 }')"
echo "(Ceph's monitor, OSD and radosgw share this machine's cores with ingestd and the clients)"
