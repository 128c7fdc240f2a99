#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# powerloss.sh BUILD_DIR [short|long] - the power-loss harness (docs/POWERLOSS.md) on its
# own: boots the project's qemu guest (deploy/rxe-vm: Debian's kernel, which has
# dm-log-writes; the host's kernel may not) and runs tests/fault/powerloss_in_guest.sh in it
# as the guest batch powerloss (tests/rxe/guest.sh). short is the form `make test` runs
# inside its one guest boot (fault.powerloss, 24 replay points), long is `make fault` (every
# ack mark and flush point). Logs and manifests land in
# BUILD_DIR/rxe-results/powerloss/powerloss/. Fails (never skips) when the guest cannot boot
# (exit 125 of the harness, with the console tail). Prints PASS last when it passed.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
BUILD=$(cd "${1:?usage: powerloss.sh BUILD_DIR [short|long]}" && pwd)
MODE=${2:-short}
case "$MODE" in short | long) ;; *) echo "usage: powerloss.sh BUILD_DIR [short|long]" >&2; exit 2 ;; esac
PL_MODE=$MODE "$SRC/tests/rxe/guest.sh" "$BUILD" powerloss
rc=$?
"$SRC/tests/rxe/batch_result.sh" "$BUILD" powerloss >/dev/null && [ "$rc" = 0 ] && { echo PASS; exit 0; }
echo "FAIL: powerloss $MODE (exit $rc; logs in $BUILD/rxe-results/powerloss/)"
exit 1
