#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# tier_faults.sh BUILD_DIR [CASE...] - the object store tier's two promises against a store
# that misbehaves: a local copy goes only when the store's own digest of what it keeps is
# the frame's, and the local high-water mark bounds the disk.
#
# A single-node Ceph (tests/tier/ceph_lib.sh, free ports: under ctest the run's shared monitor
# and OSD, tests/tier/tier_ceph.sh, and a radosgw of its own) and between node and radosgw a
# fault-injecting proxy (tests/tier/s3proxy.py). Each case, on its own bucket and
# data dir, with --tier-timeout 3s --local-retention 0s --local-high-water 32M:
#   frames before the fault, tiered (local copies deleted at once);
#   the fault on; frames sent into it (more than the mark holds: some refused NO_SPACE,
#   retryable) while a sampler measures the frame files on disk every 0.1 s; held until
#   the node names the fault where an operator looks (Stats.tier storeCause/storeError,
#   ingest-stat's tier line, /metrics ingest_tier_store_problem{cause=...}) and the frames
#   sent into it are answered; then the local counts are checked against the files;
#   the fault off: the backlog drains (timed); frames after it, tiered;
# and asserts: every acked frame is intact (ingest-verify of every DURABLE-acked frame,
# objects read straight from radosgw, not through the proxy: every deleted local copy's
# object holds the frame's bytes), the files on disk never exceeded the mark by more than
# one frame, the backlog drained, no conflict was filed for a store's wrong answer.
#
# Cases (all by default, or those named):
#   errors     every request answered 503 SlowDown or reset mid-request, in turn
#   stall      the store stops reading and answering: each request fails after 3 s
#   blackhole  PUTs acknowledged (200, the right ETag) and nothing kept
#   alter      the bytes altered on their way in, re-signed: the store keeps other bytes
#              of the same length (its ETag is their MD5, not the frame's)
#   transit    the bytes altered on their way in, not re-signed: the store refuses them
#   headlen    every HEAD of an object answers a length one more than the object's
#   skew       every request dated an hour before the store's clock (RequestTimeTooSkewed)
# Each fault window is condition-driven (no fixed duration); every wait has a generous cap.
# Prints a summary line per case: frames acked, lost, deleted without a matching object,
# the peak of the frame files on disk against the mark, the drain time, what Stats said.
set -u
BUILD=${1:?usage: tier_faults.sh BUILD_DIR [CASE...]}
shift
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/tier_lib.sh" tier-faults
CASES=${*:-errors stall blackhole alter transit headlen skew}
MARK=$((32 << 20))
MAXFRAME=3500000            # --sizes 300K-3500K: the largest frame
PROXY_PID=
SAMPLER_PID=
SUMMARY=$W/summary

tier_fail_more() {
	[ -s "$W/proxy.stats" ] && { echo "--- proxy"; cat "$W/proxy.stats"; echo; }
	[ -s "$W/proxy.log" ] && { echo "--- proxy log"; tail -5 "$W/proxy.log"; }
}
stop_sampler() {
	if [ -n "$SAMPLER_PID" ]; then
		kill "$SAMPLER_PID" 2>/dev/null
		wait "$SAMPLER_PID" 2>/dev/null
	fi
	SAMPLER_PID=
}
cleanup() {
	stop_sampler
	ing_kill_pid
	if [ -n "$PROXY_PID" ]; then
		kill "$PROXY_PID" 2>/dev/null
		wait "$PROXY_PID" 2>/dev/null
	fi
	ceph_cleanup
	rm -rf "$W"
}
trap cleanup EXIT

mode() { echo "$1" >"$W/proxy.mode"; }

proxy_start() {
	mode pass
	$ING_LAUNCH "$PY" "$HERE/s3proxy.py" --upstream "127.0.0.1:$CEPH_RGW_PORT" --access-key "$CEPH_ACCESS_KEY" \
		--secret-key "$CEPH_SECRET_KEY" --mode-file "$W/proxy.mode" --port-file "$W/proxy.port" \
		--stats-file "$W/proxy.stats" 2>"$W/proxy.log" &
	PROXY_PID=$!
	local i
	for i in $(seq 1 300); do
		[ -s "$W/proxy.port" ] && break
		kill -0 "$PROXY_PID" 2>/dev/null || fail "the proxy exited: $(cat "$W/proxy.log")"
		sleep 0.1
	done
	[ -s "$W/proxy.port" ] || fail "the proxy wrote no port in 30 s"
	PROXY_PORT=$(cat "$W/proxy.port")
}
proxy_count() { $PY -c "import json,sys; d=json.load(open(sys.argv[1])); print(sum(v for k, v in d.items() if k.startswith(sys.argv[2])))" "$W/proxy.stats" "$1" 2>/dev/null || echo 0; }
# proxy_since FILE: what the proxy did since FILE (a copy of its stats) was taken
proxy_since() {
	$PY -c "import json,sys
a = json.load(open(sys.argv[1])) if open(sys.argv[1]).read().strip() else {}
b = json.load(open(sys.argv[2]))
print(', '.join('%s %d' % (k, v - a.get(k, 0)) for k, v in sorted(b.items()) if v > a.get(k, 0)))" "$1" "$W/proxy.stats"
}

# frame_files DIR: "count bytes" of every file under DIR/frames (frames, and temp files
# being written)
frame_files() { find "$1/frames" -type f -printf '%s\n' 2>/dev/null | awk '{ n++; s += $1 } END { print n + 0, s + 0 }'; }

# sampler DIR OUT: the largest "bytes of files under frames/" seen, every 0.1 s, into OUT
# (until the test's shell is gone, if nothing stops it before)
sampler() {
	local peak=0 b
	while kill -0 $$ 2>/dev/null; do
		b=$(frame_files "$1" | awk '{ print $2 }')
		if [ "$b" -gt "$peak" ]; then
			peak=$b
			echo "$peak" >"$2"
		fi
		sleep 0.1
	done
}

# send FIRST N MANIFEST [ARGS...]: N frames of 0.3-3.5 MB; DURABLE-acked ones listed in
# MANIFEST; a refusal must be the high-water mark's retryable NO_SPACE
send() {
	local rc=0
	"$SEND" --server "$SERVER" --count "$2" --sizes 300K-3500K --first-id "$1" --wafer tf \
		--durable-manifest "$3" --quiet "${@:4}" >"$W/send.out" 2>&1 || rc=$?
	if [ "$rc" != 0 ]; then
		grep -q "storage full (the node: local frames at --local-high-water 32 MiB.*retry later): retryable" \
			"$W/send.out" || fail "ingest-send from frame $1: $(tail -3 "$W/send.out")"
	fi
}
acked() { cat "$@" 2>/dev/null | grep -vc '^#'; }

# fault_case NAME MODE CAUSES TEXT [EXTRA]: the fault MODE must show in Stats as a
# storeCause of CAUSES (words, "a|b") with TEXT (a regex) in storeError, EXTRA (a Python
# expression over Stats) true too
fault_case() {
	local name=$1 pmode=$2 cause=$3 text=$4 extra=${5:-True}
	local causes
	causes=$(echo "$cause" | awk -F'|' '{ for (i = 1; i <= NF; i++) printf "\"%s\",", $i }')
	local bucket=tf-$name dir=$W/d$name
	step "$name: $pmode between node and store"
	ceph_osd_use   # a shared OSD stays up for the case (another test kills it only between cases)
	ceph_s3 mb "$bucket"
	mode pass
	NODE_LOG=$W/node.$name.log
	ing_start "$INGESTD" "$W/port" "$NODE_LOG" --data-dir "$dir" --hugepages off \
		--tier "s3://127.0.0.1:$PROXY_PORT/$bucket" --tier-credentials "$CEPH_CREDS" \
		--tier-timeout 3s --local-retention 0s --local-high-water 32M \
		--metrics-listen 127.0.0.1:0 --metrics-port-file "$W/mport"
	PID=$ING_PID
	SERVER=$ING_SERVER
	local i
	for i in $(seq 1 300); do [ -s "$W/mport" ] && break; sleep 0.1; done
	local metrics=http://127.0.0.1:$(cat "$W/mport")/metrics
	rm -f "$W"/*.man "$W/peak" "$W"/resent.*
	echo 0 >"$W/peak"

	# before: tiered, local copies deleted at once
	send 1 10 "$W/before.man"
	tier_wait "framesTiered == $(acked "$W/before.man") and backlogFrames == 0" 120 "frames before the fault tiered"

	# the fault, frames sent into it (two at a time, so the disk fills up to the mark before
	# a frame is refused), the disk sampled
	cp "$W/proxy.stats" "$W/proxy.before" 2>/dev/null || : >"$W/proxy.before"
	sampler "$dir" "$W/peak" &
	SAMPLER_PID=$!
	local p0 e0
	p0=$(proxy_count "")
	e0=$(tier_stat uploadErrors)
	mode "$pmode"
	send 11 24 "$W/during.man" --credits 2
	tier_wait "storeCause in ($causes) and uploadErrors >= $e0 + 1 and ($extra)" 180 "$name named in Stats"
	tier_stat storeError | grep -Eq "$text" || fail "$name: Stats storeError '$(tier_stat storeError)' does not say /$text/"
	cp "$W/stats.json" "$W/stats.fault.json"
	[ "$(proxy_count "")" -gt "$p0" ] || fail "$name: the proxy saw no request during the fault"
	# where else an operator looks: ingest-stat's tier line, /metrics
	"$STAT" --server "$SERVER" --sample 0 >"$W/stat.out" 2>&1 || fail "ingest-stat: $(tail -2 "$W/stat.out")"
	grep -E "^ +tier +s3://.*(UNREACHABLE|ERROR|CREDENTIALS_REFUSED)" "$W/stat.out" | grep -Eq "$text" ||
		fail "$name: ingest-stat's tier line does not name it: $(grep ' tier ' "$W/stat.out")"
	curl -sf --max-time 10 "$metrics" >"$W/metrics.out" || fail "$name: /metrics unreadable"
	grep -Eq "^ingest_tier_store_problem\{cause=\"($cause)\"\} 1" "$W/metrics.out" ||
		fail "$name: /metrics has no ingest_tier_store_problem{cause=\"$cause\"}: $(grep tier_store "$W/metrics.out")"
	# still named a few Stats later (a later answer that says less does not replace it)
	for i in 1 2 3; do
		sleep 0.5
		$RPC stats "$SERVER" >"$W/stats.json" || fail "Stats"
		echo "$(tier_stat storeCause)" | grep -Eqx "$cause" ||
			fail "$name: Stats changed its cause to '$(tier_stat storeCause)': $(tier_stat storeError)"
	done
	# nothing is deleted while the store misbehaves: the local counts are the files on disk
	local files bytes
	read -r files bytes < <(frame_files "$dir")
	tier_wait "localBytes == $bytes and framesLocal + framesBoth == $files" 60 \
		"$name: Stats' local counts ($files files, $bytes bytes on disk)"
	grep -q "^ingest_tier_local_bytes $bytes$" <(curl -sf --max-time 10 "$metrics") ||
		fail "$name: /metrics ingest_tier_local_bytes is not the $bytes bytes on disk"

	# the fault off: the backlog drains, the frames after it go too
	local injected
	injected=$(proxy_since "$W/proxy.before")
	mode pass
	local t0=$SECONDS
	tier_wait "backlogFrames == 0 and framesLocal == 0 and framesBoth == 0 and storeState == 2" 180 \
		"$name: the backlog drained after the fault"
	local drain=$((SECONDS - t0))
	# the frames refused at the mark are taken when sent again (the same ids and bytes)
	local id resent=0
	for id in $(seq 11 34); do
		grep -q "^frame-$id " "$W/during.man" && continue
		send "$id" 1 "$W/resent.$id.man"
		[ "$(acked "$W/resent.$id.man")" = 1 ] || fail "$name: frame-$id refused again after the fault"
		resent=$((resent + 1))
	done
	cat "$W"/resent.*.man >"$W/resent.man" 2>/dev/null
	send 101 6 "$W/after.man"
	local total
	total=$(acked "$W/before.man" "$W/during.man" "$W/resent.man" "$W/after.man")
	tier_wait "backlogFrames == 0 and framesTiered == $total and conflicts == 0" 120 "$name: frames after the fault tiered"
	stop_sampler
	local peak
	peak=$(cat "$W/peak")
	[ "$peak" -le $((MARK + MAXFRAME)) ] ||
		fail "$name: $peak bytes of frame files on disk, over the mark ($MARK) plus one frame"
	ing_term_pid

	# every acked frame, its object read straight from radosgw (not through the proxy)
	cat "$W/before.man" "$W/during.man" "$W/resent.man" "$W/after.man" >"$W/all.man"
	"$VERIFY" --data-dir "$dir" --manifest "$W/all.man" --tier "s3://127.0.0.1:$CEPH_RGW_PORT/$bucket" \
		--tier-credentials "$CEPH_CREDS" >"$W/verify.out" 2>&1 ||
		fail "$name: ingest-verify --tier (radosgw itself): $(tail -5 "$W/verify.out")"
	grep -q "$total ok, 0 bad" "$W/verify.out" || fail "$name: ingest-verify: $(tail -2 "$W/verify.out")"
	local tiered
	tiered=$(sqlite3 "$dir/catalog.db" "SELECT count(*) FROM frames WHERE location = 'tiered'")
	[ "$tiered" = "$total" ] || fail "$name: $tiered of $total frames tiered"
	printf "%-9s acked %3d (%d of them refused NO_SPACE in the fault, taken when sent again), lost 0, " \
		"$name" "$total" "$resent" >>"$SUMMARY"
	printf "deleted without a matching object 0 (%d tiered, all read back " "$tiered" >>"$SUMMARY"
	printf "from radosgw); peak %.2f MiB on disk, mark 32 MiB; drained in %d s; proxy in the fault: %s; Stats: %s: %s\n" \
		"$(echo "$peak" | awk '{ print $1 / 1048576 }')" "$drain" \
		"$injected" "$(json "$W/stats.fault.json" storeCause)" \
		"$(json "$W/stats.fault.json" 'storeError[:200]')" >>"$SUMMARY"
	tail -1 "$SUMMARY"
	rm -rf "$dir"
	ceph_osd_done
}

case_errors() {
	fault_case errors errors "server_error|unreachable" "answered HTTP 503|cannot reach"
}
case_stall() {
	fault_case stall stall timeout "made no progress for 3 s"
}
case_blackhole() {
	fault_case blackhole blackhole object_missing "acknowledged the upload of .* has no such object"
}
case_alter() {
	fault_case alter alter digest_mismatch "keeps other bytes under .* than this node uploaded" \
		"digestMismatches >= 1"
}
case_transit() {
	fault_case transit transit transit_corruption "other bytes than this node sent.*the network, a proxy or the gateway"
}
case_headlen() {
	fault_case headlen headlen inconsistent_answers "answers for .* contradict each other"
}
case_skew() {
	fault_case skew skew clock_skew "clock skew: .*the store's clock is (1 h 0 min|59 min [0-9]+ s) ahead of this node's"
}

ceph_start
proxy_start
echo "proxy on 127.0.0.1:$PROXY_PORT in front of radosgw at $CEPH_S3"
: >"$SUMMARY"
for c in $CASES; do
	"case_$c"
done
echo "------------------------------------------------------------------------"
cat "$SUMMARY"
echo "PASS: tier faults ($CASES) in $SECONDS s"
