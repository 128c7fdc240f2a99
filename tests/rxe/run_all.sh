#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# run_all.sh - runs inside the Soft-RoCE guest (deploy/rxe-vm/run-in-rxe-vm.sh): every
# tests/rxe/*_in_guest.sh in name order, each bounded by a timeout, one PASS/FAIL line
# each, the log tail of the failures, and a non-zero exit status if any failed (or none ran).
#
# Contract for a *_in_guest.sh: runs as root in the guest with RXE_DEV RXE_IP RXE_GID_INDEX
# RXE_NETDEV set, plus ING_BUILD_DIR (host build tree, read-only), ING_SRC_DIR, ING_RXE_OUT
# (a per-test read-write dir on the host, for logs/artifacts) and ING_RXE_TMP (guest scratch,
# tmpfs: keep totals small). Exit 0 = pass. It must not skip: when its real part is missing
# (a binary not built) it fails with a clear message. Exit 77 with a line "NOT RUN: why"
# is for a tool a user's machine may lack (the .NET SDK): reported NOT RUN, not passed.
set -uo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
: "${ING_SRC_DIR:=$(cd "$HERE/../.." && pwd)}"
: "${ING_BUILD_DIR:=$ING_SRC_DIR/build}"
: "${ING_RXE_RESULTS:=}"
: "${ING_RXE_TEST_TIMEOUT:=300}"
: "${ING_RXE_ONLY:=}"          # regex: run only matching tests (manual runs)
export ING_SRC_DIR ING_BUILD_DIR
# qemu TCG emulates crc32 (SSE4.2) far slower than the table it runs natively: CRC-32C is
# chosen by CPU features, so pick the table here explicitly (common/crc32c.c).
export ING_CRC32C=table

if [ "${RXE_VM:-0}" != 1 ] || [ -z "${RXE_DEV:-}" ]; then
	echo "run_all.sh: not inside the rxe guest (RXE_VM/RXE_DEV unset): run it through deploy/rxe-vm/run-in-rxe-vm.sh" >&2
	exit 2
fi
if [ ! -d "$ING_BUILD_DIR" ]; then
	echo "run_all.sh: ING_BUILD_DIR=$ING_BUILD_DIR is not a directory" >&2
	exit 2
fi

echo "== rxe guest: $(uname -r), dev $RXE_DEV on $RXE_NETDEV ip $RXE_IP gid-index $RXE_GID_INDEX, build $ING_BUILD_DIR"
pass=0 fail=0 notrun=0 failed=()
for t in "$HERE"/*_in_guest.sh; do
	[ -e "$t" ] || continue
	name=$(basename "$t" _in_guest.sh)
	if [ -n "$ING_RXE_ONLY" ] && ! [[ $name =~ $ING_RXE_ONLY ]]; then
		continue
	fi
	out=/tmp/rxe-out/$name
	[ -n "$ING_RXE_RESULTS" ] && [ -d "$ING_RXE_RESULTS" ] && out=$ING_RXE_RESULTS/$name
	rm -rf "$out" "/tmp/rxe-tmp/$name"
	mkdir -p "$out" "/tmp/rxe-tmp/$name"
	t0=$(date +%s.%N)
	ING_RXE_OUT=$out ING_RXE_TMP=/tmp/rxe-tmp/$name \
		timeout -k 5 "$ING_RXE_TEST_TIMEOUT" bash "$t" > "$out/log" 2>&1
	rc=$?
	el=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}')
	if [ $rc = 0 ]; then
		echo "PASS: $name (${el}s)"
		pass=$((pass + 1))
	elif [ $rc = 77 ] && grep -q '^NOT RUN: ' "$out/log"; then
		# a tool the user's machine may lack (the .NET SDK): said so, never a pass
		echo "NOT RUN: $name - $(grep -m1 '^NOT RUN: ' "$out/log" | cut -c10-)"
		notrun=$((notrun + 1))
	else
		[ $rc = 124 ] && why="timeout ${ING_RXE_TEST_TIMEOUT}s" || why="exit $rc"
		echo "FAIL: $name ($why, ${el}s) - last lines of $out/log:"
		tail -n 40 "$out/log" | sed 's/^/    | /'
		fail=$((fail + 1))
		failed+=("$name")
	fi
	rm -rf "/tmp/rxe-tmp/$name"
done
echo "== rxe tests: $pass passed, $fail failed${failed:+ (${failed[*]})}, $notrun not run"
[ $((pass + fail)) -gt 0 ] || { echo "run_all.sh: no *_in_guest.sh test ran" >&2; exit 1; }
[ $fail = 0 ]
