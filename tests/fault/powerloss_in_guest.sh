#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# powerloss_in_guest.sh MODE - the power-loss harness; runs as root inside the qemu guest
# (tests/fault/powerloss.sh boots it), whose Debian kernel has dm-log-writes. MODE short
# (make test: every ack mark and flush point up to PL_POINTS, default 24) or long (make
# fault: every one).
#
# A cut of the power loses the page cache AND the disk's volatile write cache; kill -9
# loses neither. So: ingestd's data dir is an ext4 on a device-mapper log-writes target,
# which logs every write once a FLUSH (or its own FUA) made it durable, in that order;
# ingest-send puts a log mark right after it records each DURABLE ack (--durable-hook ->
# `dmsetup message ... mark ack-N`, waited for). Replaying the log onto the device's
# initial image up to an entry gives the disk a power cut there would have left. For each
# replay point (the ack marks and the flush points):
#   - mount (ext4 replays its journal): every frame acked DURABLE before the point is
#     there, byte-exact, and in the catalog (ingest-verify against the durable manifest);
#   - no partial file under a final name: every <id>.frame present is byte-exact
#     (ingest-verify --no-catalog against the manifest of every frame sent);
#   - SQLite PRAGMA integrity_check is ok;
#   - ingestd starts on it, answers Health (SERVING) and Stats, leaves no temp file, and
#     exits 0 on SIGTERM (short form: at every 6th point and the last, PL_RESTART_EVERY;
#     long form: at every point); unmount; e2fsck -fn is clean.
# Negative control: the same run with tests/fault/nosync.so preloaded into ingestd
# (fsync/fdatasync are no-ops): the same check must report lost frames at ack marks, or
# the harness cannot see a loss and the test fails.
#
# Env: ING_BUILD_DIR ING_SRC_DIR PL_OUT (host dir for logs, read-write) PL_FRAMES (frames
# per run: 12 short, 24 long) PL_POINTS (short form cap) PL_KEEP=1 (keep scratch files).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib.sh"
MODE=${1:-short}
: "${ING_BUILD_DIR:?}" "${PL_OUT:?}"
B=$ING_BUILD_DIR
case "$MODE" in
short) FRAMES=${PL_FRAMES:-8} MAXPTS=${PL_POINTS:-24} NEGPTS=${PL_NEG_POINTS:-4} RESTART_EVERY=${PL_RESTART_EVERY:-6} ;;
long) FRAMES=${PL_FRAMES:-16} MAXPTS=0 NEGPTS=0 RESTART_EVERY=${PL_RESTART_EVERY:-1} ;;
*) echo "usage: powerloss_in_guest.sh short|long" >&2; exit 2 ;;
esac
INGESTD=$B/apps/ingestd SEND=$B/apps/ingest-send VERIFY=$B/apps/ingest-verify
REPLAY=$B/tests/lw_replay PROBE=$B/tests/pl_probe NOSYNC=$B/tests/nosync.so
ing_need_built "$INGESTD" "$SEND" "$VERIFY" "$REPLAY" "$PROBE"
[ -f "$NOSYNC" ] || { echo "FAIL: $NOSYNC not built" >&2; exit 1; }
export DM_DISABLE_UDEV=1 ING_CRC32C=table   # no udev in the guest; crc32 is slow under TCG
T=${ING_RXE_TMP:-/tmp}/powerloss
rm -rf "$T"
mkdir -p "$T/mnt" "$PL_OUT"
IMG_MB=32 LOG_MB=256
PID= DM= LOOPS=()

fail() {
	echo "FAIL: $*"
	for l in "$T"/*.log "$T"/*.err; do
		[ -s "$l" ] || continue
		echo "--- $l (tail) ---"
		tail -n 20 "$l"
	done
	exit 1
}

# umount_mnt: unmount $T/mnt; a moment's "target is busy" (a process that just exited, a
# directory walk) is waited out, 30 s at most
umount_mnt() {
	local i
	for i in $(seq 1 60); do
		umount "$T/mnt" 2>"$T/umount.err" && return 0
		grep -q 'target is busy' "$T/umount.err" || break
		sleep 0.5
	done
	cat "$T/umount.err" >&2
	return 1
}

cleanup() {
	if [ -n "$PID" ]; then kill -KILL "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; fi
	umount "$T/mnt" 2>/dev/null || umount -l "$T/mnt" 2>/dev/null || true
	[ -n "$DM" ] && dmsetup remove "$DM" 2>/dev/null || true
	local l
	for l in "${LOOPS[@]}"; do losetup -d "$l" 2>/dev/null || true; done
	cp "$T"/*.log "$T"/*.err "$T"/*.man "$T"/*.points "$PL_OUT/" 2>/dev/null || true
	[ "${PL_KEEP:-0}" = 1 ] || rm -rf "$T"
}
trap cleanup EXIT

step "guest $(uname -r): modules and tools"
[ "$(id -u)" = 0 ] || fail "needs root (device-mapper, loop devices, mount)"
for m in loop dm-mod dm-log-writes ext4; do
	modprobe "$m" 2>"$T/modprobe.err" || fail "modprobe $m: $(cat "$T/modprobe.err") (the guest kernel must have dm-log-writes)"
done
for t in dmsetup losetup mkfs.ext4 e2fsck sqlite3 mount umount; do
	command -v "$t" >/dev/null || fail "$t not installed on the host (the guest uses the host's /)"
done
dmsetup targets | grep -q '^log-writes' || fail "dm target log-writes not registered after modprobe"

# record RUN PRELOAD: mkfs, log-writes device, ingestd (with PRELOAD in LD_PRELOAD) and
# ingest-send with a log mark per DURABLE ack; leaves $T/RUN.base (the initial image),
# $T/RUN.lw (the log), $T/RUN.sent.man, $T/RUN.acked.man, $T/RUN.points.
record() {
	local run=$1 preload=$2 data=$T/$1.img log=$T/$1.lw dl ll sectors
	step "(${SECONDS}s) $run: ext4 on log-writes, ingestd${preload:+ with $(basename "$preload")}, $FRAMES frames"
	rm -f "$data" "$log"
	truncate -s ${IMG_MB}M "$data"
	truncate -s ${LOG_MB}M "$log"
	mkfs.ext4 -q -F -m 0 -E lazy_itable_init=0,lazy_journal_init=0 "$data" >/dev/null || fail "mkfs.ext4"
	cp --sparse=always "$data" "$T/$run.base"
	tick "mkfs"
	dl=$(losetup -f --show "$data") || fail "losetup $data"
	LOOPS+=("$dl")
	ll=$(losetup -f --show "$log") || fail "losetup $log"
	LOOPS+=("$ll")
	sectors=$(blockdev --getsz "$dl")
	DM=pl_$run
	dmsetup create "$DM" --table "0 $sectors log-writes $dl $ll" || fail "dmsetup create log-writes"
	dmsetup mknodes "$DM"
	[ -b "/dev/mapper/$DM" ] || fail "/dev/mapper/$DM missing after dmsetup mknodes"
	# commit=600: ext4 commits its journal only when asked (fsync, fdatasync) or every 10
	# minutes, not every 5 s: nothing but ingestd's own syncs can make an ack come true, so
	# the positive run proves them, and the negative control cannot be rescued by a timer
	mount -o commit=600 "/dev/mapper/$DM" "$T/mnt" || fail "mount the log-writes device"
	dmsetup message "$DM" 0 mark mounted || fail "dmsetup message mark"
	tick "log-writes up, mounted"
	local bin=$INGESTD
	if [ -n "$preload" ]; then
		# the data dir and an empty catalog first, by a normal ingestd (then sync): the
		# loss the control must see is then the acked frames themselves, not a catalog
		# that never reached the disk
		ing_start "$INGESTD" "$T/port" "$T/$run.ingestd0.log" --data-dir "$T/mnt/data" --pool 1M:2 \
			--workers 1 --log-level warn
		kill -TERM "$ING_PID"
		wait "$ING_PID" || fail "$run: the first ingestd exited $? on SIGTERM"
		sync
		bin=ingestd_nosync
	fi
	ing_start "$bin" "$T/port" "$T/$run.ingestd.log" \
		--data-dir "$T/mnt/data" --pool 1M:8 --workers 1 --log-level warn
	PID=$ING_PID
	tick "ingestd up"
	# sizes up to 1 MiB: several extents per frame, ingestd's O_DIRECT path
	wd 300 "$SEND" --server "$ING_SERVER" --transport grpc --credits 4 --count "$FRAMES" \
		--sizes 16K-1M --seed 11 --wafer PL --manifest "$T/$run.sent.man" \
		--durable-manifest "$T/$run.acked.man" \
		--durable-hook "dmsetup message $DM 0 mark ack-\$ING_DURABLE_SEQ" \
		--quiet >"$T/$run.send.log" 2>&1 || fail "$run: ingest-send exited $?"
	tick "sent"
	kill -TERM "$PID"
	local rc=0
	wait "$PID" || rc=$?
	PID=
	[ "$rc" = 0 ] || fail "$run: ingestd exited $rc on SIGTERM"
	umount_mnt || fail "umount"
	dmsetup remove "$DM" || fail "dmsetup remove"   # writes the log's final super block
	DM=
	losetup -d "$dl" "$ll"
	LOOPS=()
	tick "ingestd stopped, log closed"
	"$REPLAY" points "$log" >"$T/$run.points" || fail "lw_replay points"
	"$REPLAY" list "$log" >"$T/$run.entries" || fail "lw_replay list"
	echo "$run: $(lines "$T/$run.acked.man") frames acked DURABLE, $(head -1 "$T/$run.points" | cut -d' ' -f5) log entries," \
		"$(grep -c ' mark ack-' "$T/$run.points") ack marks, $(grep -c ' flush$' "$T/$run.points") flush points"
	[ "$(lines "$T/$run.acked.man")" = "$FRAMES" ] || fail "$run: not every frame acked DURABLE"
	[ "$(grep -c ' mark ack-' "$T/$run.points")" = "$FRAMES" ] || fail "$run: not one log mark per DURABLE ack"
}

lines() { grep -vc '^#' "$1" || true; }

# ingestd with fsync & co. made no-ops (exec: ing_start's $! must be ingestd itself)
ingestd_nosync() { LD_PRELOAD=$NOSYNC NOSYNC_LOG=1 exec "$INGESTD" "$@"; }

# choose RUN MAX: replay points (entry index + label), all when MAX is 0, else every ack
# mark first, then flush points evenly spread over the log, MAX in all, in log order.
choose() {
	local run=$1 max=$2
	if [ "$max" = 0 ]; then
		grep -v '^#' "$T/$run.points" | grep -v ' mark mounted$'
		return
	fi
	{
		grep ' mark ack-' "$T/$run.points" | head -n "$max"
		local nm nf left
		nm=$(grep -c ' mark ack-' "$T/$run.points" || true)
		left=$((max - nm))
		nf=$(grep -c ' flush$' "$T/$run.points" || true)
		if [ "$left" -gt 0 ] && [ "$nf" -gt 0 ]; then
			grep ' flush$' "$T/$run.points" | awk -v n="$nf" -v k="$left" \
				'{ i = NR - 1; if (k >= n || int(i * k / n) != int((i + 1) * k / n)) print }'
		fi
	} | sort -n -k1,1
}

# acked_counts RUN: "IDX N" for every point of RUN: N frames had their DURABLE ack recorded
# before entry IDX (ack-N is the mark after the Nth line of the durable manifest).
acked_counts() {
	awk '/^#/ { next } $2 == "mark" && $3 ~ /^ack-/ { k = substr($3, 5) + 0; if (k > m) m = k }
		{ print $1, m + 0 }' "$T/$1.points"
}

# check_point RUN IDX N RESTART: the checks above on the image replayed up to entry IDX, N
# frames acked before it, ingestd restarted on it when RESTART is 1; returns non-zero with the reason in $WHY (the caller decides whether
# that is a failure). $T/RUN.acc holds the image replayed up to the previous point.
WHY=
# tick WHAT: with PL_DEBUG=1, the time since the previous tick (where a point's time goes)
TICK=0
tick() {
	[ "${PL_DEBUG:-0}" = 1 ] || return 0
	local now
	now=$(date +%s.%N)
	awk -v a="$TICK" -v b="$now" -v w="$1" 'BEGIN { printf "  %.2fs %s\n", b - a, w }'
	TICK=$now
}
check_point() {
	local run=$1 idx=$2 n=$3 restart=$4 img=$T/scratch.img out rc
	WHY=
	tick start
	"$REPLAY" replay "$T/$run.lw" "$T/$run.acc" --from $((ACC_NEXT)) --to "$idx" 2>"$T/replay.err" ||
		fail "lw_replay to $idx: $(cat "$T/replay.err")"
	ACC_NEXT=$((idx + 1))
	cp --sparse=always "$T/$run.acc" "$img"   # the mount replays ext4's journal: on a copy
	head -n $((n + 1)) "$T/$run.acked.man" >"$T/cut.man"   # header + the first n acks
	tick "replay, copy"
	mount -o loop "$img" "$T/mnt" 2>"$T/mount.err" || { WHY="mount failed: $(cat "$T/mount.err")"; return 1; }
	tick "mount"
	if [ "$n" -gt 0 ]; then
		rc=0
		out=$(wd 120 "$VERIFY" --data-dir "$T/mnt/data" --manifest "$T/cut.man" --json --quiet 2>"$T/verify.err") || rc=$?
		if [ "$rc" != 0 ]; then
			WHY="$n frames acked before, ingest-verify: ${out:-exit $rc}: $(grep -c 'No such file' "$T/verify.err" || true) frame files and $(grep -c 'no catalog row' "$T/verify.err" || true) catalog rows missing; first: $(head -n 1 "$T/verify.err")"
			umount "$T/mnt"
			return 1
		fi
	fi
	tick "verify acked"
	# every file under a final name is a whole frame (byte-exact, whatever its catalog state)
	find "$T/mnt/data/frames" -name '*.frame' -printf '%f\n' >"$T/present.ids" 2>/dev/null || true
	if [ -s "$T/present.ids" ]; then
		awk 'NR == FNR { sub(/\.frame$/, ""); p[$1] = 1; n++; next }
			/^#/ || ($1 in p) { print; if (!/^#/) m++ } END { exit m != n }' \
			"$T/present.ids" "$T/$run.sent.man" >"$T/present.man" ||
			{ WHY="a .frame file that was never sent among: $(tr '\n' ' ' <"$T/present.ids")"; umount "$T/mnt"; return 1; }
		wd 120 "$VERIFY" --data-dir "$T/mnt/data" --manifest "$T/present.man" --no-catalog --quiet \
			2>"$T/verify.err" || { WHY="partial file under a final name: $(head -c 400 "$T/verify.err")"; umount "$T/mnt"; return 1; }
	fi
	tick "verify present"
	if [ -f "$T/mnt/data/catalog.db" ]; then
		out=$(sqlite3 "$T/mnt/data/catalog.db" 'PRAGMA integrity_check;' 2>&1) || true
		[ "$out" = ok ] || { WHY="catalog integrity_check: $out"; umount "$T/mnt"; return 1; }
	elif [ "$n" -gt 0 ]; then
		WHY="no catalog.db, $n frames acked"; umount "$T/mnt"; return 1
	fi
	tick "integrity_check"
	if [ "$restart" != 1 ]; then
		umount_mnt || { WHY="umount failed"; return 1; }
		out=$(e2fsck -fn "$img" 2>&1) || { WHY="e2fsck -fn after recovery: $(echo "$out" | tail -5 | tr '\n' ' ')"; return 1; }
		tick "umount, e2fsck"
		return 0
	fi
	rm -f "$T/port"
	"$INGESTD" --listen 127.0.0.1:0 --port-file "$T/port" --data-dir "$T/mnt/data" --pool 1M:2 \
		--workers 1 --log-level warn >"$T/restart.log" 2>&1 &
	PID=$!
	local i
	for i in $(seq 1 600); do
		[ -s "$T/port" ] && break
		kill -0 "$PID" 2>/dev/null || break
		sleep 0.1
	done
	if [ ! -s "$T/port" ]; then
		kill -KILL "$PID" 2>/dev/null || true
		wait "$PID" 2>/dev/null || true
		PID=
		WHY="ingestd did not start on it: $(tail -3 "$T/restart.log")"
		umount "$T/mnt"
		return 1
	fi
	tick "ingestd up"
	out=$("$PROBE" "127.0.0.1:$(tr -dc '0-9' <"$T/port")" 2>&1) || WHY="ingestd up but not answering: $out"
	rc=$(find "$T/mnt/data/frames" -name '*.tmp.*' 2>/dev/null | wc -l)
	[ "$rc" = 0 ] || WHY="${WHY:+$WHY; }$rc temp files left after ingestd started"
	tick "probe"
	kill -TERM "$PID"
	rc=0
	wait "$PID" || rc=$?
	PID=
	[ "$rc" = 0 ] || WHY="${WHY:+$WHY; }ingestd exited $rc on SIGTERM"
	umount "$T/mnt" || { WHY="${WHY:+$WHY; }umount failed"; return 1; }
	tick "ingestd stopped, umount"
	# the journal was replayed by the mount: the filesystem must now be clean
	out=$(e2fsck -fn "$img" 2>&1) || WHY="${WHY:+$WHY; }e2fsck -fn after recovery and restart: $(echo "$out" | tail -5 | tr '\n' ' ')"
	tick "e2fsck"
	[ -z "$WHY" ]
}

# replay_run RUN POINTS_FILE: check the points listed in the file ("IDX KIND [LABEL]", log
# order) on RUN's log; sets PTS (points checked), BAD (points that failed), FIRST_BAD.
replay_run() {
	local run=$1 list=$2 idx kind label total restart
	total=$(wc -l <"$list")
	local -A acked
	acked_counts "$run" >"$T/$run.acked.idx"   # (no /dev/fd in the guest: no <(...))
	while read -r idx n; do acked[$idx]=$n; done <"$T/$run.acked.idx"
	PTS=0 BAD=0 FIRST_BAD=
	cp --sparse=always "$T/$run.base" "$T/$run.acc"
	ACC_NEXT=0
	while read -r idx kind label; do
		PTS=$((PTS + 1))
		restart=0
		[ $((PTS % RESTART_EVERY)) = 0 ] || [ "$PTS" = "$total" ] && restart=1
		if check_point "$run" "$idx" "${acked[$idx]}" "$restart"; then
			echo "$run point $idx ($kind${label:+ $label}): ok, ${acked[$idx]} frames acked before$([ $restart = 1 ] && echo ', ingestd restarted') (${SECONDS}s)"
		else
			BAD=$((BAD + 1))
			echo "$run point $idx ($kind${label:+ $label}): LOSS: $WHY (${SECONDS}s)"
			[ -n "$FIRST_BAD" ] || FIRST_BAD="point $idx ($kind $label): $WHY"
		fi
	done <"$list"
	rm -f "$T/$run.acc" "$T/scratch.img"
}

T0=$(date +%s)
record pos ""
choose pos "$MAXPTS" >"$T/pos.chosen"
step "pos: replay and check $(wc -l <"$T/pos.chosen") points (ack marks and flush points)"
replay_run pos "$T/pos.chosen"
POS_PTS=$PTS POS_BAD=$BAD
ACKED=$(lines "$T/pos.acked.man")
[ "$POS_PTS" -gt 0 ] || fail "no replay point checked"
[ "$POS_BAD" = 0 ] || fail "power loss lost or corrupted acked data: $FIRST_BAD"

record neg "$NOSYNC"
grep -q 'nosync: pid' "$T/neg.ingestd.log" || fail "the negative control's ingestd did not load $NOSYNC"
grep ' mark ack-' "$T/neg.points" >"$T/neg.acks"
if [ "$NEGPTS" -gt 0 ]; then   # spread over the run, the last one included
	awk -v n="$(wc -l <"$T/neg.acks")" -v k="$NEGPTS" \
		'{ i = NR - 1; if (k >= n || int(i * k / n) != int((i + 1) * k / n) || NR == n) print }' \
		"$T/neg.acks" >"$T/neg.chosen"
else
	cp "$T/neg.acks" "$T/neg.chosen"
fi
step "neg (syncs disabled): the same check at $(wc -l <"$T/neg.chosen") ack marks must see lost frames"
replay_run neg "$T/neg.chosen"
NEG_PTS=$PTS NEG_BAD=$BAD
[ "$NEG_BAD" -gt 0 ] || fail "negative control: with fsync/fdatasync disabled no loss was seen at $NEG_PTS ack marks: the harness cannot see a lost frame"

echo "fault powerloss ($MODE): $POS_PTS crash points checked ($(grep -c ' mark ack-' "$T/pos.chosen" || true) ack marks," \
	"$(grep -c ' flush$' "$T/pos.chosen" || true) flush points), frames acked DURABLE $ACKED, lost 0, corrupt 0;" \
	"negative control (fsync/fdatasync no-ops): loss seen at $NEG_BAD of $NEG_PTS ack marks; $(($(date +%s) - T0)) s"
echo "PASS"
