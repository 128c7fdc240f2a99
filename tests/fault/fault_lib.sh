# SPDX-License-Identifier: Apache-2.0
# tests/fault/fault_lib.sh - helpers of the fault suite (source after tests/lib.sh).

# need_root WHAT: the test cannot make its conditions without root: FAIL, never skip.
need_root() {
	if [ "$(id -u)" != 0 ]; then
		echo "FAIL: $1 needs root (loop devices, mount, fsfreeze); CI runs as root" >&2
		exit 1
	fi
	local t
	for t in losetup mount umount mkfs.ext4 fsfreeze sqlite3; do
		command -v "$t" >/dev/null || { echo "FAIL: $t not installed (deploy/install-deps.sh)" >&2; exit 1; }
	done
}

# loopfs_make IMG MNT SIZE: a fresh ext4 of SIZE on a loop device, mounted at MNT.
loopfs_make() {
	local img=$1 mnt=$2 size=$3
	rm -f "$img"
	truncate -s "$size" "$img"
	mkfs.ext4 -q -F -m 0 -E lazy_itable_init=0,lazy_journal_init=0 "$img" >/dev/null ||
		fail "mkfs.ext4 $img"
	mkdir -p "$mnt"
	mount -o loop "$img" "$mnt" || fail "cannot loop-mount $img (no loop devices?)"
	LOOPFS_MOUNTS+=("$mnt")
}

# loopfs_cleanup: thaw and unmount what loopfs_make mounted (EXIT traps).
LOOPFS_MOUNTS=()
loopfs_cleanup() {
	local m
	for m in "${LOOPFS_MOUNTS[@]}"; do
		fsfreeze -u "$m" 2>/dev/null || true
		umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
	done
	LOOPFS_MOUNTS=()
}

# lines FILE: frames listed in a manifest (0 when absent).
lines() { if [ -f "$1" ]; then grep -vc '^#' "$1" || true; else echo 0; fi; }

# verify_json DATA MANIFEST [ARGS]: ingest-verify --json; sets V_OK V_BAD V_MISSING, and
# returns ingest-verify's status.
verify_json() {
	local data=$1 man=$2 out rc=0
	shift 2
	out=$(timeout 300 "$VERIFY" --data-dir "$data" --manifest "$man" --json --quiet "$@") || rc=$?
	V_OK=$(echo "$out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["ok"])' 2>/dev/null || echo 0)
	V_BAD=$(echo "$out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["bad"])' 2>/dev/null || echo -1)
	V_MISSING=$(echo "$out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["missing"])' 2>/dev/null || echo -1)
	return $rc
}

# catalog_dups DATA: catalog rows sharing a frame (wafer, frame id) or a file path (must
# be 0; a tab never appears in an id).
catalog_dups() {
	sqlite3 "file:$1/catalog.db?mode=ro" \
		"SELECT (SELECT count(*) - count(DISTINCT wafer_id || char(9) || frame_id) FROM frames) +
		        (SELECT count(*) - count(DISTINCT path) FROM frames);"
}

# temp_files DATA: frame temp files left in the data dir.
temp_files() { find "$1/frames" -name '*.tmp.*' 2>/dev/null | wc -l; }

# rss_kib PID
rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }

# health SERVER: grpc.health.v1 Health/Check answers SERVING (Debian's python3-grpcio,
# hence /usr/bin/python3; raw bytes: no generated stubs needed). The 30 s deadline only
# catches a node that does not answer at all: a busy machine may take seconds.
health() {
	/usr/bin/python3 - "$1" <<'PY'
import sys, grpc
ch = grpc.insecure_channel(sys.argv[1])
call = ch.unary_unary("/grpc.health.v1.Health/Check")
resp = call(b"", timeout=30)
sys.exit(0 if resp == b"\x08\x01" else 1)
PY
}
