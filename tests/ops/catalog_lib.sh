# SPDX-License-Identifier: Apache-2.0
# tests/ops/catalog_lib.sh - the fixture of the ingest-catalog tests (catalog_recovery.sh,
# prune.sh): source it after tests/lib.sh with BUILD_DIR as the script's first argument and
# NAME the temp dir's prefix. ing_test_setup (tests/lib.sh) sets BUILD, the programs (ingestd,
# ingest-send, ingest-verify and ingest-catalog checked built), PID, fail and the EXIT trap
# (a node left running killed, "$CLEANUP_EXTRA" run if set, the temp dir removed); here T
# (that temp dir) and D ($T/data), and start (ingestd on D, 127.0.0.1, a small pool, and
# the arguments given), send (ingest-send over gRPC to it, quiet) and q (an SQL query on D's
# catalog).
ing_test_setup "${NAME:-ops-catalog}" "${1:-}" ingest-send ingest-verify ingest-catalog
command -v sqlite3 >/dev/null || { echo "FAIL: sqlite3 not installed (deploy/install-deps.sh)" >&2; exit 1; }
T=$TMP
D=$T/data
start() { ing_start "$INGESTD" "$T/port" "$T/ingestd.log" --data-dir "$D" --pool 1M:8 --workers 1 "$@"; PID=$ING_PID; }
send() { timeout 120 "$SEND" --server "$ING_SERVER" --transport grpc --quiet "$@"; }
q() { sqlite3 "$D/catalog.db" "$1"; }
