#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# tier_store.sh BUILD_DIR [STEP...] - the object store tier against a real store: a
# single-node Ceph (tests/tier/ceph_lib.sh: monitor, OSD, radosgw on loopback, started
# once for every step, stopped on exit even on failure; under ctest the monitor and OSD are
# the run's shared ones, tests/tier/tier_ceph.sh, the radosgw this test's own) and real
# ingestd nodes.
#
# Steps (all by default, or the ones named):
#   badinput   usage errors at start: credentials file readable by others, a bad URL,
#              --local-retention without --tier: exit 2, one line with the fix
#   creds      wrong secret key: ingestd starts, says so at start and in Stats
#              (CREDENTIALS_REFUSED); frames still DURABLE, queued; the doctor warns
#   bucket     a missing bucket: NO_BUCKET at start and in Stats; created: the backlog drains
#   conflict   a frame whose key already holds another object: kept local, counted, the
#              reason in tier_outbox.last_error, the other object left as it was
#   getframe   ingest-get and a grpcio client read frames from the local copy and the store;
#              the token is required; an unknown frame, a bad id; a local copy damaged after
#              it was stored is DATA_LOSS, and ingest-get reads the store's copy instead
#   frames500  500 frames of 1-64 MiB tiered byte-identical: every object read back with
#              boto3 equals its local copy, one successful PUT per object (radosgw's usage
#              log); --local-retention 0s: every local copy goes, ingest-get (from the
#              store) and ingest-verify --tier (every frame, read back from the store)
#   kill9      kill -9 of ingestd while uploads are in progress: restarted, every frame in
#              the store once (objects and successful PUTs counted by the store), none
#              skipped
#   osd        kill -9 of the OSD while uploads are in progress: uploads fail and stall,
#              frames sent meanwhile are ACKed DURABLE; OSD back: everything tiered
#   rgw        the same with kill -9 of radosgw
#   highwater  the store down while the high-water mark is reached: retryable NO_SPACE
#              NACKs, every ACKed frame intact; store back: the backlog drains, local
#              copies go, the refused frames are taken when sent again
#   prune      ingest-catalog prune beside a node that tiers: frames tiered, both, and
#              queued while radosgw is down, all old: prune keeps and names the unverified
#              and the in-store ones; --include-unverified deletes queued frames and their
#              uploads (radosgw back: nothing fails, nothing of them in the store);
#              --forget-in-store deletes rows and local copies, the objects stay, ingest-get
#              no longer finds them; check consistent throughout
# The size mix of frames500 (475 x 1 MiB, 20 x 4-16 MiB, 5 x 64 MiB, ~1.0 GiB) covers both
# ends of 1-64 MiB and each of the default pool's three classes (4M:16,16M:8,64M:4) with
# more frames than slots (each class's slots are taken back and used again), and moves no
# more bytes than that needs: each byte is moved six times (ingest, upload, the OSD, the
# boto3 read-back, ingest-verify, ingest-verify --tier), and on the 2-core machine each
# CPU-second of make test is half a second of its wall time (tests/tier.cmake).
set -u
BUILD=${1:?usage: tier_store.sh BUILD_DIR [STEP...]}
shift
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/tier_lib.sh" tier
STEPS=${*:-badinput creds bucket conflict getframe frames500 kill9 osd rgw highwater prune}
ing_need_built "$CAT"

cleanup() {
	ing_kill_pid
	ceph_cleanup
	rm -rf "$W"
}
trap cleanup EXIT

# node_start DATA_DIR BUCKET [INGESTD ARGS...]: ingestd tiering to BUCKET ($PID, $SERVER)
node_start() {
	local dir=$1 bucket=$2
	shift 2
	NODE_LOG=$W/node.$(basename "$dir").$SECONDS.log
	ing_start "$INGESTD" "$W/port" "$NODE_LOG" --data-dir "$dir" --hugepages off \
		--tier "s3://127.0.0.1:$CEPH_RGW_PORT/$bucket" --tier-credentials "$CEPH_CREDS" "$@"
	PID=$ING_PID
	SERVER=$ING_SERVER
}

# send N SIZES FIRST_ID MANIFEST [ARGS...]: frames that must all be ACKed DURABLE
send() {
	local n=$1 sizes=$2 first=$3 man=$4
	shift 4
	"$SEND" --server "$SERVER" --count "$n" --sizes "$sizes" --first-id "$first" --manifest "$man" \
		--quiet "$@" >"$W/send.out" 2>&1 || fail "ingest-send of $n frames: $(tail -3 "$W/send.out")"
}

# objects BUCKET: how many objects the store holds there (boto3)
objects() { ceph_s3 count "$1" || fail "listing bucket $1 failed"; }

step_badinput() {
	step "bad input at start: each is one line with the fix, exit 2, nothing started"
	local creds=$W/open.creds rc
	printf 'access_key = %s\nsecret_key = %s\n' "$CEPH_ACCESS_KEY" "$CEPH_SECRET_KEY" >"$creds"
	chmod 644 "$creds"
	rc=0
	"$INGESTD" --data-dir "$W/bad" --tier "s3://127.0.0.1:$CEPH_RGW_PORT/frames" \
		--tier-credentials "$creds" >"$W/bad.out" 2>&1 || rc=$?
	[ "$rc" = 2 ] && grep -q "chmod 600" "$W/bad.out" ||
		fail "credentials readable by others: exit $rc, $(cat "$W/bad.out")"
	rc=0
	"$INGESTD" --data-dir "$W/bad" --tier "s3://127.0.0.1:$CEPH_RGW_PORT" \
		--tier-credentials "$CEPH_CREDS" >"$W/bad.out" 2>&1 || rc=$?
	[ "$rc" = 2 ] && grep -q "no bucket" "$W/bad.out" || fail "URL without bucket: exit $rc, $(cat "$W/bad.out")"
	rc=0
	"$INGESTD" --data-dir "$W/bad" --local-retention 7d >"$W/bad.out" 2>&1 || rc=$?
	[ "$rc" = 2 ] && grep -q "needs --tier" "$W/bad.out" ||
		fail "--local-retention without --tier: exit $rc, $(cat "$W/bad.out")"
	[ ! -e "$W/bad/catalog.db" ] || fail "a refused start left a catalog behind"
}

step_creds() {
	step "wrong credentials: clear at start and in Stats, frames durable and queued"
	local wrong=$W/wrong.creds
	(umask 077; printf 'access_key = %s\nsecret_key = not-the-secret\n' "$CEPH_ACCESS_KEY" >"$wrong")
	ceph_s3 mb creds
	ing_start "$INGESTD" "$W/port" "$W/node.creds.log" --data-dir "$W/dc" --hugepages off \
		--tier "s3://127.0.0.1:$CEPH_RGW_PORT/creds" --tier-credentials "$wrong"
	PID=$ING_PID
	SERVER=$ING_SERVER
	tier_wait "storeState == 4" 60 "credentials refused"
	tier_stat storeError | grep -q "refused the credentials" || fail "Stats storeError: $(tier_stat storeError)"
	grep -q "credentials refused.*refused the credentials" "$W/node.creds.log" ||
		fail "no clear line at start in the log"
	send 5 1M 1 "$W/creds.man"
	tier_wait "framesDurable == 5 and backlogFrames == 5 and uploadedFrames == 0" 30 "frames queued"
	"$DOCTOR" --tier "s3://127.0.0.1:$CEPH_RGW_PORT/creds" --tier-credentials "$wrong" >"$W/doctor.out" 2>&1
	grep -q "WARN  tier.store.*refused the credentials" "$W/doctor.out" || fail "doctor: $(grep tier "$W/doctor.out")"
	ing_term_pid
	"$VERIFY" --data-dir "$W/dc" --manifest "$W/creds.man" --quiet || fail "frames lost"
}

step_bucket() {
	step "missing bucket: clear at start and in Stats; created: the backlog drains"
	node_start "$W/dc" later
	tier_wait "storeState == 5" 60 "no bucket"
	tier_stat storeError | grep -q "bucket 'later' does not exist.*create it" ||
		fail "Stats storeError: $(tier_stat storeError)"
	grep -q "object store no bucket: bucket 'later' does not exist" "$NODE_LOG" || fail "no clear line in the log"
	ceph_s3 mb later
	tier_wait "backlogFrames == 0 and framesBoth == 5 and storeState == 2" 60 "the backlog drains"
	[ "$(objects later)" = 5 ] || fail "$(objects later) objects in bucket later, 5 expected"
	ing_term_pid
}

step_conflict() {
	step "another object already under a frame's key: a conflict, the frame stays local"
	ceph_s3 mb conflict
	head -c 1000 /dev/urandom >"$W/other"
	ceph_s3 put conflict ingest-send/frame-3 "$W/other"   # before the node can upload frame-3
	node_start "$W/dx" conflict
	send 5 1M 1 "$W/x.man"
	tier_wait "backlogFrames == 1 and framesBoth == 4 and conflicts == 1 and storeState == 2" 60 \
		"every frame tiered but the conflict"
	sqlite3 "$W/dx/catalog.db" "SELECT last_error FROM tier_outbox WHERE frame_id = 'frame-3'" |
		grep -q "another object is stored under key ingest-send/frame-3.*the frame stays local" ||
		fail "the conflict is not in tier_outbox.last_error"
	[ "$(sqlite3 "$W/dx/catalog.db" "SELECT location FROM frames WHERE frame_id = 'frame-3'")" = local ] ||
		fail "frame-3 is not local"
	ceph_s3 get conflict ingest-send/frame-3 "$W/other.back"
	cmp -s "$W/other" "$W/other.back" || fail "the node overwrote the other object"
	ing_term_pid
	rm -rf "$W/dx"
}

step_getframe() {
	step "GetFrame: the bytes from the local copy or the store, checked; a corrupt copy; auth"
	local tok=$W/token
	(umask 077; echo "tier-test-token-0123456789" >"$tok")
	ceph_s3 mb getframe
	node_start "$W/dg" getframe --auth-token-file "$tok"
	"$SEND" --server "$SERVER" --auth-token-file "$tok" --count 3 --sizes 5M --first-id 1 --quiet \
		--manifest "$W/g.man" >"$W/send.out" 2>&1 || fail "ingest-send: $(tail -2 "$W/send.out")"
	local i   # (Stats needs the token too: the catalog says when they are tiered)
	for i in $(seq 1 300); do
		[ "$(sqlite3 "$W/dg/catalog.db" "SELECT count(*) FROM frames WHERE location = 'both'")" = 3 ] && break
		sleep 0.2
	done
	[ "$i" -lt 300 ] || fail "the 3 frames were not tiered"
	if "$GET" --server "$SERVER" --wafer ingest-send --frame frame-1 --out "$W/g1" 2>"$W/get.err"; then
		fail "GetFrame without the token succeeded"
	fi
	grep -q "unauthenticated: .*authorization: Bearer" "$W/get.err" || fail "ingest-get: $(cat "$W/get.err")"
	[ ! -e "$W/g1" ] || fail "a refused GetFrame left its output file"
	"$GET" --server "$SERVER" --auth-token-file "$tok" --wafer ingest-send --frame frame-1 --out "$W/g1" \
		2>"$W/get.err" || fail "ingest-get: $(cat "$W/get.err")"
	cmp -s "$W/g1" "$W/dg/frames/ingest-send/frame-1.frame" || fail "ingest-get: other bytes than the local copy"
	"$GET" --server "$SERVER" --auth-token-file "$tok" --wafer ingest-send --frame nope --out "$W/gx" \
		2>"$W/get.err" && fail "GetFrame of an unknown frame succeeded"
	grep -q "not found: no frame nope of wafer ingest-send" "$W/get.err" || fail "ingest-get: $(cat "$W/get.err")"
	"$GET" --server "$SERVER" --auth-token-file "$tok" --frame $'bad\x01id' --out "$W/gx" 2>"$W/get.err" &&
		fail "a bad frame id was taken"
	grep -q "a frame id is" "$W/get.err" || fail "ingest-get: $(cat "$W/get.err")"
	# the local copy damaged after it was stored: DATA_LOSS from it, the store's copy read instead
	printf 'XXXX' | dd of="$W/dg/frames/ingest-send/frame-2.frame" bs=1 seek=1000 conv=notrunc status=none
	"$GET" --server "$SERVER" --auth-token-file "$tok" --wafer ingest-send --frame frame-2 --source local \
		--out "$W/g2" 2>"$W/get.err" && fail "a corrupt local copy was returned as good"
	grep -q "data loss: the local copy of frame ingest-send/frame-2 is corrupt" "$W/get.err" ||
		fail "ingest-get: $(cat "$W/get.err")"
	[ ! -e "$W/g2" ] || fail "the corrupt bytes were left in the output file"
	"$GET" --server "$SERVER" --auth-token-file "$tok" --wafer ingest-send --frame frame-2 --out "$W/g2" \
		2>"$W/get.err" || fail "ingest-get from the store after the local copy failed: $(cat "$W/get.err")"
	grep -q "reading the object store's" "$W/get.err" && grep -q "from the object store" "$W/get.err" ||
		fail "ingest-get did not fall back to the store: $(cat "$W/get.err")"
	"$VERIFY" --data-dir "$W/dg" --manifest "$W/g.man" --quiet >/dev/null 2>&1 &&
		fail "ingest-verify passed the damaged local copy"
	# a stock gRPC client (grpcio) reads the frame from the store
	"$PY" "$HERE/tier_rpc.py" get "$SERVER" ingest-send frame-2 "$W/g2py" store >/dev/null 2>"$W/get.err" &&
		fail "grpcio GetFrame without the token succeeded"
	ing_term_pid
	node_start "$W/dg" getframe
	"$PY" "$HERE/tier_rpc.py" get "$SERVER" ingest-send frame-2 "$W/g2py" store >"$W/g.json" ||
		fail "grpcio GetFrame: $(cat "$W/g.json")"
	cmp -s "$W/g2py" "$W/g2" || fail "grpcio and ingest-get read different bytes"
	json "$W/g.json" 'source == 2 and length == 5 * 1048576 and location == "both"' | grep -q True ||
		fail "GetFrame's first message: $(cat "$W/g.json")"
	ing_term_pid
	rm -rf "$W/dg"
}

step_frames500() {
	step "500 frames of 1-64 MiB tiered byte-identical"
	ceph_s3 mb frames
	node_start "$W/d500" frames
	local t0=$SECONDS
	send 475 1M 1 "$W/m1"
	send 20 4M-16M 476 "$W/m2"
	send 5 64M 496 "$W/m3"
	cat "$W/m1" "$W/m2" "$W/m3" >"$W/m500"
	tier_wait "backlogFrames == 0 and framesBoth == 500 and uploadedFrames == 500" 300 "500 frames tiered"
	echo "  500 frames ($(tier_stat uploadedBytes) bytes) durable and tiered in $((SECONDS - t0)) s"
	"$VERIFY" --data-dir "$W/d500" --manifest "$W/m500" >"$W/verify.out" 2>&1 ||
		fail "ingest-verify: $(tail -5 "$W/verify.out")"
	ceph_s3 cmp-dir frames "$W/d500" >"$W/cmp.out" 2>&1 || fail "boto3 read-back: $(tail -5 "$W/cmp.out")"
	grep -q "^500 objects, 500 local copies, 500 equal" "$W/cmp.out" || fail "boto3: $(cat "$W/cmp.out")"
	local puts
	puts=$(ceph_usage_puts_settled frames 500)
	[ "$puts" = 500 ] || fail "$puts successful PUTs, 500 objects"
	ing_term_pid

	step "--local-retention 0s: every local copy goes once its object is verified again"
	node_start "$W/d500" frames --local-retention 0s
	tier_wait "framesTiered == 500 and framesBoth == 0 and localBytes == 0 and localDeleted == 500" 120 "local copies deleted"
	[ -z "$(find "$W/d500/frames" -name '*.frame')" ] || fail "local copies left: $(find "$W/d500/frames" -name '*.frame' | head -3)"
	local id ids="1 2 475 476 495 496 498 500" pairs=()
	for id in $ids; do
		"$GET" --server "$SERVER" --wafer ingest-send --frame "frame-$id" --out "$W/get.$id" 2>"$W/get.err" ||
			fail "ingest-get frame-$id: $(cat "$W/get.err")"
		grep -q "from the object store (location tiered), crc32c" "$W/get.err" || fail "ingest-get: $(cat "$W/get.err")"
		pairs+=("ingest-send/frame-$id" "$W/boto.$id")
	done
	# (one boto3 start for the eight: each costs ~0.7 s of CPU)
	ceph_s3 get frames "${pairs[@]}" || fail "boto3 get of frames $ids"
	for id in $ids; do
		cmp -s "$W/get.$id" "$W/boto.$id" || fail "frame-$id: ingest-get and boto3 read different bytes"
		rm -f "$W/get.$id" "$W/boto.$id"
	done
	if "$GET" --server "$SERVER" --wafer ingest-send --frame frame-1 --source local --out "$W/x" 2>"$W/get.err"; then
		fail "--source local of a tiered frame succeeded"
	fi
	grep -q "no copy there: .*no local copy (location tiered" "$W/get.err" || fail "ingest-get: $(cat "$W/get.err")"
	"$VERIFY" --data-dir "$W/d500" --manifest "$W/m500" --tier "s3://127.0.0.1:$CEPH_RGW_PORT/frames" \
		--tier-credentials "$CEPH_CREDS" >"$W/verify.out" 2>&1 || fail "ingest-verify --tier (tiered): $(tail -5 "$W/verify.out")"
	grep -q "500 ok, 0 bad.*500 objects read back" "$W/verify.out" || fail "ingest-verify: $(tail -2 "$W/verify.out")"
	"$VERIFY" --data-dir "$W/d500" --manifest "$W/m3" >"$W/verify.out" 2>&1 &&
		fail "ingest-verify without --tier passed frames it cannot read"
	grep -q "tiered: its bytes are only in the object store" "$W/verify.out" || fail "ingest-verify: $(tail -2 "$W/verify.out")"
	ing_term_pid
	rm -rf "$W/d500"
}

# fault_frames BUCKET DIR: 60 x 4 MiB sent; returns once uploads are in progress
fault_frames() {
	ceph_s3 mb "$1"
	node_start "$2" "$1" --tier-timeout 5s "${@:3}"
	send 60 4M 1 "$W/$1.m1"
	tier_wait "uploadsInProgress >= 1 and uploadedFrames >= 5" 60 "uploads in progress"
}

step_kill9() {
	step "kill -9 of ingestd mid-tier: resume, nothing uploaded twice, nothing skipped"
	fault_frames kill9 "$W/dk"
	kill -9 "$PID"
	wait "$PID" 2>/dev/null
	PID=
	local before inprog
	before=$(tier_stat uploadedFrames)
	inprog=$(tier_stat uploadsInProgress)
	local t0=$SECONDS
	node_start "$W/dk" kill9
	tier_wait "backlogFrames == 0 and framesBoth == 60" 120 "resumed after kill -9"
	echo "  killed after $before uploads, $inprog in progress; backlog drained $((SECONDS - t0)) s after" \
		"the restart; $(tier_stat alreadyStored) found already stored (same bytes), $(tier_stat uploadedFrames) uploaded"
	[ "$(objects kill9)" = 60 ] || fail "$(objects kill9) objects, 60 frames"
	ceph_s3 cmp-dir kill9 "$W/dk" >"$W/cmp.out" 2>&1 || fail "read-back: $(tail -5 "$W/cmp.out")"
	local puts
	puts=$(ceph_usage_puts_settled kill9 60)
	[ "$puts" = 60 ] || fail "$puts successful PUTs for 60 objects"
	[ "$(sqlite3 "$W/dk/catalog.db" "SELECT count(*) FROM frames WHERE location = 'both'")" = 60 ] ||
		fail "catalog: not every frame is 'both'"
	ing_term_pid
	# a local copy that goes while ingest-verify runs (the node's retention deletes copies it
	# has verified in the store): with --tier the object is checked instead, nothing is bad
	ls "$W/dk/frames/"*/frame-7.frame >/dev/null || fail "no frame-7 file"
	rm -f "$W/dk/frames/"*/frame-7.frame
	"$VERIFY" --data-dir "$W/dk" --manifest "$W/kill9.m1" --tier "s3://127.0.0.1:$CEPH_RGW_PORT/kill9" \
		--tier-credentials "$CEPH_CREDS" >"$W/verify.out" 2>&1 ||
		fail "ingest-verify --tier with frame-7's local copy gone: $(tail -3 "$W/verify.out")"
	grep -q "60 ok, 0 bad" "$W/verify.out" || fail "ingest-verify --tier: $(tail -1 "$W/verify.out")"
	rm -rf "$W/dk"
}

# store_fault NAME KILL START: kill a daemon mid-upload; ingest goes on; restart: all tiered
store_fault() {
	local name=$1 kill=$2 start=$3
	fault_frames "$name" "$W/d$name"
	$kill
	local t0=$SECONDS
	send 20 4M 101 "$W/$name.m2"   # DURABLE acks while the store cannot take them
	tier_wait "framesDurable == 80 and uploadErrors >= 1 and backlogFrames >= 20" 120 "uploads stall"
	echo "  $name killed: 20 more frames DURABLE; uploads failing ($(tier_stat uploadErrors) errors, store state" \
		"$(tier_stat storeState)), backlog $(tier_stat backlogFrames)"
	$start
	local t1=$SECONDS
	tier_wait "backlogFrames == 0 and framesBoth == 80" 180 "uploads resume"
	echo "  $name back: backlog drained in $((SECONDS - t1)) s ($((SECONDS - t0)) s after the kill)"
	[ "$(objects "$name")" = 80 ] || fail "$(objects "$name") objects, 80 frames"
	ceph_s3 cmp-dir "$name" "$W/d$name" >"$W/cmp.out" 2>&1 || fail "read-back: $(tail -5 "$W/cmp.out")"
	cat "$W/$name.m1" "$W/$name.m2" >"$W/$name.man"
	"$VERIFY" --data-dir "$W/d$name" --manifest "$W/$name.man" --quiet || fail "frames lost"
	ing_term_pid
	rm -rf "$W/d$name"
}

step_osd() {
	step "kill -9 of the OSD mid-upload: uploads stall, DURABLE acks go on, then resume"
	# a shared OSD (ctest: tests/tier/tier_ceph.sh): the other tests' work on it ends first,
	# so that the kill still lands mid-upload
	ceph_osd_claim
	store_fault osd ceph_kill_osd ceph_start_osd
	# the gateway may finish a write it had already taken when the OSD comes back: the
	# retry then finds the object (412, same bytes) and never writes it a second time
	local puts
	puts=$(ceph_usage_puts_settled osd 80)
	[ "$puts" -le 80 ] || fail "$puts successful PUTs for 80 objects"
}

step_rgw() {
	step "kill -9 of radosgw mid-upload: uploads fail, DURABLE acks go on, then resume"
	# (radosgw's usage log loses what it had not flushed when it is killed: no PUT count here)
	store_fault rgw ceph_kill_rgw ceph_start_rgw
}

step_highwater() {
	step "store down at the high-water mark: retryable NO_SPACE, nothing lost, drains after"
	ceph_s3 mb highwater
	ceph_kill_rgw
	node_start "$W/dh" highwater --local-high-water 256M --tier-timeout 5s
	local rc=0
	"$SEND" --server "$SERVER" --count 40 --sizes 16M --first-id 1 --manifest "$W/hw.all" \
		--durable-manifest "$W/hw.ok" --quiet >"$W/send.out" 2>&1 || rc=$?
	[ "$rc" != 0 ] || fail "640 MiB were all taken with a 256 MiB high-water mark and no store"
	grep -q "failed: ingest node storage full (the node: local frames at --local-high-water 256 MiB.*retry later): retryable" "$W/send.out" ||
		fail "no retryable NO_SPACE NACK naming the mark: $(tail -3 "$W/send.out")"
	local ok
	ok=$(grep -vc '^#' "$W/hw.ok")
	[ "$ok" -ge 1 ] && [ "$ok" -lt 40 ] || fail "$ok of 40 frames taken"
	# one more: refused (nothing is deleted while the store is down), and Stats says so
	"$SEND" --server "$SERVER" --count 1 --sizes 16M --first-id 41 --quiet >"$W/send.out" 2>&1 &&
		fail "a frame was taken at the mark with the store down"
	grep -q "storage full.*retryable" "$W/send.out" || fail "frame 41: $(tail -2 "$W/send.out")"
	$RPC stats "$SERVER" >"$W/stats.json" || fail "Stats"
	[ "$(tier_stat refusedFrames)" -ge 2 ] && [ "$(tier_stat refusing)" = True ] ||
		fail "Stats: refusing $(tier_stat refusing), refusedFrames $(tier_stat refusedFrames)"
	echo "  store down: $ok frames taken ($(tier_stat localBytes) bytes local), $(tier_stat refusedFrames) refused NO_SPACE"
	"$VERIFY" --data-dir "$W/dh" --manifest "$W/hw.ok" --quiet || fail "an ACKed frame is not intact"
	ceph_start_rgw
	local t0=$SECONDS
	tier_wait "backlogFrames == 0 and storeState == 2 and localBytes < 256 * 1048576" 120 "drained after the store came back"
	echo "  store back: drained in $((SECONDS - t0)) s, $(tier_stat localDeleted) local copies deleted"
	# the refused frames sent again, one at a time: each is taken once the tier has made room
	# (uploaded, then deleted verified copies below 90 % of the mark); a refusal says retry
	local id i n=0 t1=$SECONDS
	for id in $(seq 1 40); do
		grep -q "^frame-$id " "$W/hw.ok" && continue
		for i in $(seq 1 10); do
			"$SEND" --server "$SERVER" --count 1 --sizes 16M --first-id "$id" --quiet >"$W/send.out" 2>&1 && break
			grep -q "storage full.*retryable" "$W/send.out" || fail "resend of frame-$id: $(tail -3 "$W/send.out")"
			tier_wait "backlogFrames == 0 and localBytes <= 256 * 1048576 * 9 // 10" 120 "room again"
		done
		[ "$i" -lt 10 ] || fail "frame-$id still refused after 10 tries"
		n=$((n + 1))
	done
	echo "  the $n refused frames taken when sent again ($((SECONDS - t1)) s, the store taking them)"
	tier_wait "backlogFrames == 0 and framesBoth + framesTiered == 40" 120 "all 40 tiered"
	[ "$(sqlite3 "$W/dh/catalog.db" "SELECT count(*) FROM frames")" = 40 ] || fail "not 40 frames in the catalog"
	[ "$(objects highwater)" = 40 ] || fail "$(objects highwater) objects, 40 frames"
	"$VERIFY" --data-dir "$W/dh" --manifest "$W/hw.all" --tier "s3://127.0.0.1:$CEPH_RGW_PORT/highwater" \
		--tier-credentials "$CEPH_CREDS" >"$W/verify.out" 2>&1 || fail "ingest-verify --tier: $(tail -5 "$W/verify.out")"
	ing_term_pid
	rm -rf "$W/dh"
}

step_prune() {
	step "ingest-catalog prune beside a node that tiers: what stays, what goes, nothing fails after"
	local dir=$W/dp out=$W/prune.out
	ceph_s3 mb prune
	# tiered (local copies deleted once verified), then both (no retention), then queued
	node_start "$dir" prune --local-retention 0s
	send 5 1M 1 "$W/pt.man" --wafer P-t
	tier_wait "framesTiered == 5 and backlogFrames == 0" 120 "P-t tiered"
	ing_term_pid
	node_start "$dir" prune --tier-timeout 5s
	send 5 1M 1 "$W/pb.man" --wafer P-b
	tier_wait "framesBoth == 5 and backlogFrames == 0" 120 "P-b in the store, local copies kept"
	ceph_kill_rgw
	send 5 1M 1 "$W/pu.man" --wafer P-u
	send 5 1M 1 "$W/pv.man" --wafer P-v
	tier_wait "backlogFrames == 10 and uploadErrors >= 1" 120 "P-u and P-v queued, the store down"
	sqlite3 "$dir/catalog.db" "UPDATE frames SET durable_ns = durable_ns - 40 * 86400 * 1000000000"
	"$CAT" prune --data-dir "$dir" --older-than 30d >"$out" || fail "prune: $(cat "$out")"
	cat "$out"
	grep -q "deleted 0 frames" "$out" && grep -q "kept 10 frames (10.0 MiB) queued for the object store and not verified there" "$out" &&
		grep -q "kept 10 frames verified in the object store (5 of them with a local copy, 5.0 MiB)" "$out" ||
		fail "prune beside the tier: $(cat "$out")"
	# the store is gone for P-v: dropped with its queued uploads
	"$CAT" prune --data-dir "$dir" --older-than 30d --wafer P-v --include-unverified --json >"$out" ||
		fail "prune --include-unverified: $(cat "$out")"
	[ "$(json "$out" frames)" = 5 ] && [ "$(json "$out" uploadsDropped)" = 5 ] && [ "$(json "$out" files)" = 5 ] ||
		fail "prune --include-unverified: $(cat "$out")"
	local errors
	$RPC stats "$SERVER" >"$W/stats.json" || fail "Stats"
	errors=$(tier_stat uploadErrors)
	ceph_start_rgw
	# radosgw back: P-u goes to the store; nothing of P-v is tried again (no 'local copy
	# missing' for ever), and the local counts are the files
	tier_wait "backlogFrames == 0 and framesBoth == 10 and framesTiered == 5 and storeState == 2" 180 \
		"the backlog drained after the prune"
	local files bytes
	read -r files bytes < <(find "$dir/frames" -name '*.frame' -printf '%s\n' | awk '{ n++; s += $1 } END { print n + 0, s + 0 }')
	tier_wait "localBytes == $bytes and framesLocal + framesBoth == $files" 30 "the local counts are the files"
	[ "$(sqlite3 "$dir/catalog.db" "SELECT count(*) FROM tier_outbox")" = 0 ] || fail "uploads left queued"
	! grep -q "P-v.*local copy" "$NODE_LOG" || fail "the tier failed a pruned frame: $(grep 'P-v' "$NODE_LOG" | tail -2)"
	[ "$(ceph_s3 count prune)" = 15 ] || fail "$(ceph_s3 count prune) objects, 15 expected (P-v never uploaded)"
	echo "  the store back: P-u tiered, P-v gone with its uploads ($errors upload errors before, none of P-v after)"
	"$CAT" check --data-dir "$dir" >"$out" || fail "check: $(cat "$out")"
	grep -q "5 only in the store; the tier's counts match the rows" "$out" || fail "check: $(cat "$out")"
	# a frame only in the store is read from it; --forget-in-store forgets it, the object stays
	"$GET" --server "$SERVER" --wafer P-t --frame frame-2 --out "$W/pt2" --quiet || fail "ingest-get of a tiered frame"
	"$CAT" prune --data-dir "$dir" --older-than 30d --forget-in-store --json >"$out" || fail "$(cat "$out")"
	[ "$(json "$out" frames)" = 15 ] && [ "$(json "$out" files)" = 10 ] || fail "prune --forget-in-store: $(cat "$out")"
	[ "$(ceph_s3 count prune)" = 15 ] || fail "prune touched the store: $(ceph_s3 count prune) objects"
	local rc=0
	"$GET" --server "$SERVER" --wafer P-t --frame frame-2 --out "$W/pt2" 2>"$W/get.err" || rc=$?
	[ "$rc" = 1 ] && grep -q "not found" "$W/get.err" || fail "ingest-get of a forgotten frame: exit $rc $(cat "$W/get.err")"
	tier_wait "framesLocal + framesBoth + framesTiered == 0 and localBytes == 0" 30 "Stats after the prune"
	ing_term_pid
	"$CAT" check --data-dir "$dir" >"$out" || fail "check after the prunes: $(cat "$out")"
	rm -rf "$dir"
}

ceph_start
for s in $STEPS; do
	"step_$s"
done
echo "PASS: tier store ($STEPS) in $SECONDS s"
