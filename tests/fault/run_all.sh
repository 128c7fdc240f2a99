#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# run_all.sh BUILD_DIR - `make fault`: the long form of the fault suite. kill9.sh for
# FAULT_ITERATIONS rounds (default 50), then disk_full.sh and freeze.sh. Needs root.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=${1:?usage: run_all.sh BUILD_DIR}
failed=0
for t in "kill9.sh $BUILD ${FAULT_ITERATIONS:-50}" "disk_full.sh $BUILD" "freeze.sh $BUILD"; do
	echo "=== fault: $t"
	# shellcheck disable=SC2086
	bash "$HERE"/$t 2>&1 | tee /tmp/fault-run.$$.log | grep -E '^(== |round |fault |FAIL|PASS|---)' || true
	grep -q '^PASS$' /tmp/fault-run.$$.log || { failed=$((failed + 1)); tail -30 /tmp/fault-run.$$.log; }
done
rm -f /tmp/fault-run.$$.log
echo "fault suite: $((3 - failed)) passed, $failed failed"
exit $((failed > 0))
