#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# startup.sh BUILD_DIR - ingestd start-up errors:
#  1. every flag with a bad value: exactly one line on stderr, naming the flag, exit 2,
#     before anything starts (no log line, nothing listening);
#  2. an unusable data dir (a regular file, below a file, in use by another ingestd,
#     read-only, full): exit 1 with
#     one ERR line naming the data dir and the reason. The read-only and full cases mount
#     small tmpfs file systems and run only as root (they are skipped, loudly, otherwise);
#  3. ingest-verify: a negative or overflowing count is a usage error, not a hang.
set -uo pipefail
. "$(dirname "$0")/../lib.sh"

ing_test_setup review-startup "${1:-}" ingest-verify ingest-doctor
MOUNTS=()
CLEANUP_EXTRA='for m in "${MOUNTS[@]}"; do umount "$m" 2>/dev/null; done'
bad=0
failure() { echo "FAIL: $*" >&2; bad=1; }

# $1: expected exit, $2: text the single line must contain, rest: arguments
expect_usage() {
	local want=$1 text=$2
	shift 2
	rm -rf "$TMP/dd"
	timeout 20 "$INGESTD" --listen 127.0.0.1:0 --data-dir "$TMP/dd" "$@" >"$TMP/out" 2>&1
	local rc=$?
	local lines
	lines=$(wc -l <"$TMP/out")
	if [ "$rc" != "$want" ]; then
		failure "ingestd $* exited $rc, want $want: $(head -3 "$TMP/out" | tr '\n' '|')"
	elif [ "$lines" != 1 ]; then
		failure "ingestd $*: $lines lines on stderr, want 1: $(head -3 "$TMP/out" | tr '\n' '|')"
	elif ! grep -qF -- "$text" "$TMP/out"; then
		failure "ingestd $*: message does not name '$text': $(cat "$TMP/out")"
	else
		echo "ok: $* -> $(cat "$TMP/out")"
	fi
}

echo "== bad flag values: one line, exit 2"
expect_usage 2 --listen --listen bogus
expect_usage 2 --listen --listen 127.0.0.1:99999
expect_usage 2 --listen --listen 127.0.0.1:
expect_usage 2 --listen --listen '[::1'
expect_usage 2 --pool --pool 4M:0
expect_usage 2 --pool --pool 0:4
expect_usage 2 --pool --pool 4M:2,1M:2
expect_usage 2 --pool --pool 99999999G:1
expect_usage 2 --pool --pool 4M:4,
expect_usage 2 --pool --pool 4M:1000001
expect_usage 2 --pool --pool 1K:1,2K:1,3K:1,4K:1,5K:1,6K:1,7K:1,8K:1,9K:1
expect_usage 2 --hugepages --hugepages maybe
expect_usage 2 --workers --workers 0
expect_usage 2 --workers --workers 65
expect_usage 2 --workers --workers -1
expect_usage 2 --sink --sink disk
expect_usage 2 --credits --credits 0
expect_usage 2 --credits --credits 18446744073709551617
expect_usage 2 --max-frame --max-frame 0
expect_usage 2 --max-frame --max-frame 99999999999G
expect_usage 2 --max-frame --max-frame 4X
expect_usage 2 --frame-timeout --frame-timeout 0
expect_usage 2 --frame-timeout --frame-timeout 86401
expect_usage 2 --lcores --lcores abc
expect_usage 2 --pool-node --pool-node 4096
expect_usage 2 --log-level --log-level loud
expect_usage 2 --ready-fd --ready-fd 2
expect_usage 2 --ready-fd --ready-fd 977
expect_usage 2 --rdma-dev --rdma-dev no-such-dev0
expect_usage 2 --rdma --rdma sometimes
expect_usage 2 --rdma-port --rdma-port 65536
expect_usage 2 --poll-mode --poll-mode spin
expect_usage 2 --max-sessions --max-sessions 0
expect_usage 2 --session-idle --session-idle 0
expect_usage 2 --persist-ring --persist-ring 3
expect_usage 2 --handshake-timeout-ms --handshake-timeout-ms 5
expect_usage 2 --idle-timeout --idle-timeout 0
expect_usage 2 --max-connections --max-connections 0
expect_usage 2 --max-conns-per-peer --max-conns-per-peer x
expect_usage 2 --health-reserve --health-reserve 0
expect_usage 2 --max-sessions-per-peer --max-sessions-per-peer 0
expect_usage 2 --max-slots-per-peer --max-slots-per-peer -1
expect_usage 2 --slot-stall-ms --slot-stall-ms 1
expect_usage 2 --auth-fail-burst --auth-fail-burst 0
expect_usage 2 --auth-backoff-max --auth-backoff-max 86401
expect_usage 2 --tls-client-ca --tls-client-ca "$TMP/none.pem"
expect_usage 2 --tls-cert --tls-cert "$TMP/none.pem" --tls-key "$TMP/none.key"
expect_usage 2 --tls-cert --tls-cert "$TMP/none.pem"
expect_usage 2 --bogus --bogus
expect_usage 2 --data-dir --data-dir ''
expect_usage 2 "unexpected argument" extra

echo "== unusable data dir: one ERR line naming it, exit 1"
# $1: data dir, $2: text the ERR line must contain
expect_dir() {
	timeout 20 "$INGESTD" --listen 127.0.0.1:0 --data-dir "$1" --pool 1M:2 --log-level err \
		>"$TMP/out" 2>&1
	local rc=$?
	if [ "$rc" != 1 ]; then
		failure "data dir $1: exit $rc, want 1: $(head -3 "$TMP/out" | tr '\n' '|')"
	elif [ "$(grep -c ERR "$TMP/out")" != 1 ] || ! grep ERR "$TMP/out" | grep -qF "$1" ||
	     ! grep ERR "$TMP/out" | grep -qF "$2"; then
		failure "data dir $1: want one ERR line naming it and '$2': $(cat "$TMP/out" | tr '\n' '|')"
	else
		echo "ok: $1 -> $(grep ERR "$TMP/out")"
	fi
}
# a second ingestd on a data dir in use: refused, naming the dir and the first one's pid
ing_start "$INGESTD" "$TMP/busy-port" "$TMP/ingestd-busy.log" --data-dir "$TMP/busy" --pool 1M:2 --log-level err
PID=$ING_PID
expect_dir "$TMP/busy" "in use by another ingestd (pid $PID)"
ing_term_pid
: >"$TMP/afile"
expect_dir "$TMP/afile" "is a file, not a directory: point --data-dir at a directory"
expect_dir "$TMP/afile/sub" "cannot be created: '$TMP/afile' is a file, not a directory"
if [ "$(id -u)" = 0 ] && mkdir -p "$TMP/ro" "$TMP/full" &&
   mount -t tmpfs -o size=1M tmpfs "$TMP/ro" 2>/dev/null; then
	MOUNTS+=("$TMP/ro")
	mkdir -p "$TMP/ro/data"
	ing_start "$INGESTD" "$TMP/ro-port" "$TMP/ingestd-ro.log" --data-dir "$TMP/ro/data" --pool 1M:2 \
		--log-level err
	PID=$ING_PID
	ing_term_pid
	mount -o remount,ro "$TMP/ro"
	expect_dir "$TMP/ro/data" "Read-only file system"
	# the doctor names the reason too (a missing data dir on a read-only file system)
	"$DOCTOR" --data-dir "$TMP/ro/newdir" >"$TMP/out" 2>&1
	if grep storage.dir "$TMP/out" | grep -q "FAIL.*Read-only file system"; then
		echo "ok: ingest-doctor: $(grep storage.dir "$TMP/out")"
	else
		failure "ingest-doctor on a read-only fs: $(grep storage.dir "$TMP/out")"
	fi
	if mount -t tmpfs -o size=1M tmpfs "$TMP/full" 2>/dev/null; then
		MOUNTS+=("$TMP/full")
		mkdir -p "$TMP/full/data"
		dd if=/dev/zero of="$TMP/full/fill" bs=64k 2>/dev/null
		expect_dir "$TMP/full/data" "No space left on device"
	fi
else
	echo "SKIP: read-only and full data dir cases need root and tmpfs mounts"
fi

echo "== ingest-verify: bad numbers are usage errors (exit 2), never a 2^64-frame loop"
mkdir -p "$TMP/vd"
for a in "--count -1" "--count 99999999999999999999" "--first-id 18446744073709551615 --count 2" \
	 "--max-errors -3" "--seed x"; do
	# shellcheck disable=SC2086
	timeout 10 "$VERIFY" --data-dir "$TMP/vd" --no-catalog --quiet $a >"$TMP/out" 2>&1
	rc=$?
	if [ "$rc" != 2 ] || [ "$(wc -l <"$TMP/out")" != 1 ]; then
		failure "ingest-verify $a: exit $rc, want 2 with one line: $(head -2 "$TMP/out" | tr '\n' '|')"
	else
		echo "ok: ingest-verify $a -> $(cat "$TMP/out")"
	fi
done

[ "$bad" = 0 ] && echo PASS
exit "$bad"
