#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# run_all.sh BUILD_DIR - `make fault`: the long form of the fault suite. kill9.sh for
# FAULT_ITERATIONS rounds (default 50), then disk_full.sh, freeze.sh and powerloss.sh long
# (every replay point of a dm-log-writes log, in the qemu guest). Needs root.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=${1:?usage: run_all.sh BUILD_DIR}
failed=0
tests=("kill9.sh $BUILD ${FAULT_ITERATIONS:-50}" "disk_full.sh $BUILD" "freeze.sh $BUILD"
       "powerloss.sh $BUILD long")
for t in "${tests[@]}"; do
	echo "=== fault: $t"
	# shellcheck disable=SC2086
	bash "$HERE"/$t 2>&1 | tee /tmp/fault-run.$$.log | grep -E '^(== |round |fault |FAIL|PASS|---|pos point|neg point)' || true
	grep -q '^PASS$' /tmp/fault-run.$$.log || { failed=$((failed + 1)); tail -30 /tmp/fault-run.$$.log; }
done
rm -f /tmp/fault-run.$$.log
echo "fault suite: $((${#tests[@]} - failed)) passed, $failed failed"
exit $((failed > 0))
