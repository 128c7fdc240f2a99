#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# powerloss.sh BUILD_DIR [short|long] - the power-loss harness (docs/POWERLOSS.md): boots
# the project's qemu guest once (deploy/rxe-vm: Debian's kernel, which has dm-log-writes;
# the host's kernel may not) and runs tests/fault/powerloss_in_guest.sh in it. short is
# `make test`'s fault.powerloss (24 replay points), long is `make fault` (every ack mark
# and flush point). Logs and manifests land in BUILD_DIR/powerloss-results/. Fails (never
# skips) when the guest cannot boot (exit 125 of the harness, with the console tail).
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
BUILD=$(cd "${1:?usage: powerloss.sh BUILD_DIR [short|long]}" && pwd)
MODE=${2:-short}
OUT=$BUILD/powerloss-results/$MODE
rm -rf "$OUT"
mkdir -p "$OUT"
# the guest needs ~1 GiB of tmpfs scratch at most (images, logs, replays)
RXE_VM_RW=$OUT RXE_VM_TIMEOUT=${PL_VM_TIMEOUT:-$([ "$MODE" = long ] && echo 3600 || echo 900)} \
	ING_BUILD_DIR=$BUILD ING_SRC_DIR=$SRC PL_OUT=$OUT \
	"$SRC/deploy/rxe-vm/run-in-rxe-vm.sh" bash "$HERE/powerloss_in_guest.sh" "$MODE" 2>&1 | tee "$OUT/run.log"
rc=${PIPESTATUS[0]}
[ "$rc" = 0 ] && grep -q '^PASS$' "$OUT/run.log" && exit 0
echo "FAIL: powerloss $MODE (exit $rc; logs in $OUT)"
exit 1
