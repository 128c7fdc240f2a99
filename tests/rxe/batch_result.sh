#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# batch_result.sh BUILD_DIR BATCH - the verdict of one guest test batch from the last boot
# of tests/rxe/guest.sh (ctest fixture rdma_guest, test rdma.guest): its PASS/FAIL lines,
# and exit 0 only if every test of the batch passed. The logs are in
# BUILD_DIR/rxe-results/BATCH/<test>/log.
set -uo pipefail
RES=${1:?usage: batch_result.sh BUILD_DIR BATCH}/rxe-results/${2:?BATCH}
if [ ! -s "$RES/rc" ]; then
	echo "FAIL: guest batch $2 has no verdict in $RES: the guest boot (ctest rdma.guest) did not run it (its output says why)"
	exit 1
fi
cat "$RES/summary"
exit "$(cat "$RES/rc")"
