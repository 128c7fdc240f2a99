#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# sdk_missing.sh SRC_DIR BUILD_DIR - a machine without the .NET SDK: every C# test step
# (tests/dotnet/run.sh) says NOT RUN in a line of its own and exits 77, which ctest
# reports as skipped (SKIP_RETURN_CODE), never as passed. Runs run.sh with a PATH that
# holds bash and nothing else.
set -euo pipefail
SRC=$(cd "${1:?usage: sdk_missing.sh SRC_DIR BUILD_DIR}" && pwd)
BUILD=$(cd "${2:?BUILD_DIR}" && pwd)
BIN=$(mktemp -d /tmp/nodotnet.XXXXXX)
trap 'rm -rf "$BIN"' EXIT
ln -s "$(command -v bash)" "$BIN/bash"
fails=0
for step in build interop binding sample; do
	rc=0
	out=$(env -i PATH="$BIN" HOME=/nonexistent "$BIN/bash" "$SRC/tests/dotnet/run.sh" "$step" "$BUILD" "$SRC" 2>&1) || rc=$?
	if [ "$rc" = 77 ] && [ "$(printf '%s\n' "$out" | grep -c '^NOT RUN: dotnet SDK not found')" = 1 ]; then
		echo "ok: step $step without dotnet: exit 77, one NOT RUN line"
	else
		echo "FAIL: step $step without dotnet: exit $rc, output: $out"
		fails=$((fails + 1))
	fi
done
echo "$((4 - fails)) passed, $fails failed"
[ "$fails" = 0 ]
