#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# fuzz-all.sh BUILD_FUZZ SECONDS - `make fuzz`: every libFuzzer target in turn for SECONDS,
# over its committed seeds and a corpus kept in BUILD_FUZZ/fuzz-long/<target> (it grows
# from run to run). Prints executions per target and in total; exits 1 if any target
# found a crash (the reproducer is in BUILD_FUZZ/fuzz-long/<target>/artifacts: copy it into
# tests/fuzz/corpus/<target>/ with the fix, so the regression run keeps replaying it).
set -uo pipefail
build=$1 secs=$2
src=$(cd "$(dirname "$0")" && pwd)
total=0 failed=0
for f in "$build"/tests/fuzz_*; do
	[ -x "$f" ] || continue
	n=$(basename "$f")
	line=$("$src/run.sh" "$f" "$src/corpus/$n" "$build/fuzz-long/$n" "$secs" | tail -1) || failed=1
	echo "$line"
	e=$(echo "$line" | awk '$3 ~ /^[0-9]+$/ && $4 == "execs" {print $3}')
	total=$((total + ${e:-0}))
done
echo "fuzz: total $total execs"
exit $failed
