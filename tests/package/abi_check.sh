#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# abi_check.sh BUILD_DIR SRC_DIR - libingest.so.1's ABI against the committed baseline
# producer/libingest.abi (abidw of the 1.0 library, public headers include/ingest/ only):
#  - any change abidiff finds fails (a struct's size or layout, a function's parameters, a
#    symbol added or removed), until the baseline is updated on purpose: `make
#    abi-baseline` after bumping ING_VERSION_MINOR for additions (a break needs a new
#    major version and SOVERSION);
#  - the exported symbols are exactly the baseline's, all versioned INGEST_1.x.
set -euo pipefail
BUILD=$(cd "${1:?usage: abi_check.sh BUILD_DIR SRC_DIR}" && pwd)
SRC=$(cd "${2:?usage: abi_check.sh BUILD_DIR SRC_DIR}" && pwd)
LIB=$BUILD/producer/libingest.so.1
BASE=$SRC/producer/libingest.abi
fail() { echo "FAIL: $*" >&2; exit 1; }
command -v abidiff >/dev/null || fail "abidiff not installed (Debian abigail-tools; deploy/install-deps.sh)"
[ -f "$LIB" ] || fail "$LIB not built"
[ -f "$BASE" ] || fail "no ABI baseline $BASE (make abi-baseline)"
# no grep -q: under pipefail, -q stops reading early and readelf dies of SIGPIPE
readelf -S "$LIB" | grep '\.debug_info' >/dev/null || fail "$LIB has no debug info: abidiff needs a RelWithDebInfo build"

echo "== abidiff $BASE $LIB"
rc=0
abidiff --headers-dir2 "$SRC/include/ingest" "$BASE" "$LIB" >"$BUILD/abidiff.txt" 2>&1 || rc=$?
cat "$BUILD/abidiff.txt"
if (( rc & 8 )); then
	fail "libingest.so.1: INCOMPATIBLE ABI change against the baseline (above). Keep the 1.x ABI, or make a new major version (SOVERSION) and run 'make abi-baseline'"
elif (( rc & 4 )); then
	fail "libingest.so.1: ABI changed against the baseline (above: a public struct's layout, a function, a symbol). If intended and compatible (only additions): bump ING_VERSION_MINOR, 'make abi-baseline', commit producer/libingest.abi; a break needs a new major version"
elif (( rc != 0 )); then
	fail "abidiff failed (exit $rc)"
fi

echo "== exported symbols"
nm -D --defined-only "$LIB" | awk '$2 == "T" || $2 == "D" || $2 == "B" || $2 == "R" { print $3 }' | sort >"$BUILD/abi-symbols.txt"
cat "$BUILD/abi-symbols.txt"
if grep -v '@@INGEST_1\.' "$BUILD/abi-symbols.txt"; then fail "symbols above are not versioned INGEST_1.x"; fi
if grep -v '^ing_' "$BUILD/abi-symbols.txt"; then fail "exported symbols above lack the ing_ prefix"; fi
echo "PASS: libingest.so.1 matches its ABI baseline ($(wc -l <"$BUILD/abi-symbols.txt") symbols)"
