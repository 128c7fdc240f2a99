#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# run.sh FUZZER SEED_DIR WORK_DIR SECONDS - run one libFuzzer target for SECONDS over its
# committed seeds plus its own growing corpus in WORK_DIR/corpus (the source tree is never
# written). Crash inputs land in WORK_DIR/artifacts. Prints one line
#   fuzz: <target> <executions> execs <seconds> s <corpus size> inputs
# and exits non-zero on any crash, sanitizer report, leak or timeout.
set -euo pipefail
fuzzer=$1 seeds=$2 work=$3 secs=$4
name=$(basename "$fuzzer")
[ -x "$fuzzer" ] || { echo "run.sh: $fuzzer is not built" >&2; exit 1; }
[ -d "$seeds" ] && [ -n "$(ls -A "$seeds")" ] || { echo "run.sh: no seed corpus in $seeds" >&2; exit 1; }
mkdir -p "$work/corpus" "$work/artifacts"
log=$work/last.log
export ASAN_OPTIONS=${ASAN_OPTIONS:-halt_on_error=1:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
rc=0
# -close_fd_mask=2: the code under test logs to stderr; libFuzzer and the sanitizers keep
# reporting on a duplicate of it.
"$fuzzer" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
	-print_final_stats=1 -close_fd_mask=2 -artifact_prefix="$work/artifacts/" \
	"$work/corpus" "$seeds" >"$log" 2>&1 || rc=$?
execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
if [ "$rc" != 0 ]; then
	grep -m1 -A40 -E '^==[0-9]+==|runtime error|^SUMMARY' "$log" || tail -40 "$log"
	echo "fuzz: $name FAILED (exit $rc); reproducer(s): $(ls "$work/artifacts" | tr '\n' ' ')"
	exit 1
fi
echo "fuzz: $name ${execs:-0} execs ${secs} s $(ls "$work/corpus" | wc -l) inputs"
