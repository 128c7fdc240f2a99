# SPDX-License-Identifier: Apache-2.0
# tests/ops/catalog_lib.sh - the fixture of the ingest-catalog tests (catalog_recovery.sh,
# prune.sh): source it after tests/lib.sh with BUILD set and NAME the temp dir's prefix.
# Sets INGESTD, SEND, VERIFY, CAT (each checked built), T (a temp dir, removed at exit), D
# ($T/data) and PID; defines fail (the node's last log lines), start (ingestd on D, 127.0.0.1,
# a small pool, and the arguments given), send (ingest-send over gRPC to it, quiet) and q (an SQL query on D's
# catalog). The EXIT trap kills a node left running, runs "$CLEANUP_EXTRA" if set, removes T.
INGESTD=$BUILD/apps/ingestd
SEND=$BUILD/apps/ingest-send
VERIFY=$BUILD/apps/ingest-verify
CAT=$BUILD/apps/ingest-catalog
ing_need_built "$INGESTD" "$SEND" "$VERIFY" "$CAT"
command -v sqlite3 >/dev/null || { echo "FAIL: sqlite3 not installed (deploy/install-deps.sh)" >&2; exit 1; }
T=$(mktemp -d "/tmp/${NAME:-ops-catalog}.XXXXXX")
D=$T/data
PID=
CLEANUP_EXTRA=
cleanup() { ing_kill_pid; [ -z "$CLEANUP_EXTRA" ] || eval "$CLEANUP_EXTRA"; rm -rf "$T"; }
trap cleanup EXIT
fail() {
	echo "FAIL: $*" >&2
	tail -n 20 "$T/ingestd.log" >&2 2>/dev/null || true
	exit 1
}
start() { ing_start "$INGESTD" "$T/port" "$T/ingestd.log" --data-dir "$D" --pool 1M:8 --workers 1 "$@"; PID=$ING_PID; }
send() { timeout 120 "$SEND" --server "$ING_SERVER" --transport grpc --quiet "$@"; }
q() { sqlite3 "$D/catalog.db" "$1"; }
