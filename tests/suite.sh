#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# suite.sh full|quick - the passes of `make test` (full) and `make test-quick` (quick), run by
# the Makefile once the release tree is built (full) or the ASan tree (quick).
#   full: the release tree's pass (label release: the qemu guest boots, packages, faults,
#         .NET, tier, the multi-process fleet tests; and any test the sanitized tree does not
#         define, so that none is left out) starts at once in the background, the guest
#         boots first (their COST); meanwhile the ASan/UBSan and fuzz trees are built and
#         their passes run: every other test once, under the sanitizers (ctest -LE
#         release), then the fuzz regression (ctest -L fuzz). Each pass runs JOBS tests at
#         once (ctest -j; tests/*.cmake hold the resource locks for what two tests cannot
#         share). The release pass's lines are prefixed [release].
#   quick: unit + functional tests in the ASan/UBSan tree (ctest -L 'unit|func' -LE
#          release), the inner loop.
# At the end: the ten slowest tests, each pass's count and wall time, and the total since
# ING_SUITE_T0 (the Makefile sets it before its first prerequisite), or since this script.
# Logs: <tree>/test-logs/<pass>.log. Exit status non-zero if any pass failed.
# Env: BUILD BUILD_ASAN BUILD_FUZZ (trees), JOBS (tests at once; default nproc), MAKE.
set -uo pipefail
MODE=${1:?usage: suite.sh full|quick}
SRC=$(cd "$(dirname "$0")/.." && pwd)
cd "$SRC"
: "${BUILD:=build}" "${BUILD_ASAN:=build-asan}" "${BUILD_FUZZ:=build-fuzz}" "${MAKE:=make}"
: "${JOBS:=$(nproc 2>/dev/null || echo 2)}"
: "${ING_SUITE_T0:=$(date +%s)}"
export ASAN_OPTIONS=halt_on_error=1:detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
SUITE_START=$(date +%s)
rc_all=0
declare -A PASS_WALL PASS_RC

# pass NAME TREE CTEST-ARGS...: one ctest run, its output on stdout and in TREE/test-logs/NAME.log
pass() {
	local name=$1 tree=$2 t0=$SECONDS rc
	shift 2
	mkdir -p "$tree/test-logs"
	(cd "$tree" && ctest -j"$JOBS" --output-on-failure "$@") 2>&1 | tee "$tree/test-logs/$name.log"
	rc=${PIPESTATUS[0]}
	PASS_WALL[$name]=$((SECONDS - t0))
	PASS_RC[$name]=$rc
	[ "$rc" = 0 ] || rc_all=1
}

# summary LOG...: the ten slowest tests of these ctest logs, each pass's counts, the total
summary() {
	echo
	echo "== ten slowest tests"
	local f
	for f in "$@"; do
		[ -f "$f" ] || continue
		sed -nE "s/^ *[0-9]+\/[0-9]+ Test +#[0-9]+: ([^ ]+) \.*[ *]*([A-Za-z][A-Za-z ]*[a-z])[ ]+([0-9.]+) sec.*/\3 \1 \2 $(basename "$f" .log)/p" "$f"
	done | sort -rn | head -n 10 | awk '{ printf "  %8.1f s  %-36s %s (%s)\n", $1, $2, $3, $NF }'
	echo "== passes"
	for f in "$@"; do
		[ -f "$f" ] || continue
		local n
		n=$(basename "$f" .log)
		printf '  %-8s %s; wall %s s\n' "$n" \
			"$(grep -E '^[0-9]+% tests passed' "$f" | tail -n 1 || echo 'no summary (ctest did not finish)')" \
			"${PASS_WALL[$n]:-?}"
	done
	local total=$(($(date +%s) - ING_SUITE_T0))
	printf '== total: %d min %02d s (make test %s, %d tests at once per pass%s)\n' $((total / 60)) \
		$((total % 60)) "$([ $rc_all = 0 ] && echo passed || echo FAILED)" "$JOBS" "${PASS_JOBS:-}"
}

case $MODE in
quick)
	pass quick "$BUILD_ASAN" -L 'unit|func' -LE release
	summary "$BUILD_ASAN/test-logs/quick.log"
	;;
full)
	command -v dotnet >/dev/null 2>&1 ||
		echo "dotnet SDK not found: $(cd "$BUILD" && ctest -N -L dotnet | sed -n 's/^Total Tests: //p') C# tests not run"
	# the release pass: label release, and whatever the sanitized tree does not define
	# (configured first, a few seconds: its test list)
	"$MAKE" --no-print-directory configure-asan || { echo "configure of $BUILD_ASAN failed" >&2; exit 1; }
	names() { (cd "$1" && ctest -N "${@:2}") | sed -n 's/^ *Test *#[0-9]*: //p' | sort; }
	mapfile -t extra < <(comm -23 <(names "$BUILD" -LE release) <(names "$BUILD_ASAN" -LE release) | grep -v '^fuzz\.')
	mapfile -t rel < <({ names "$BUILD" -L release; printf '%s\n' "${extra[@]}"; } | sed '/^$/d' | sort -u)
	[ ${#extra[@]} = 0 ] ||
		echo "release pass: also ${extra[*]} (not labelled release, and the sanitized tree does not define them)"
	rx="^($(printf '%s\n' "${rel[@]}" | sed 's/[.]/\\./g' | paste -sd'|'))\$"
	mkdir -p "$BUILD/test-logs"
	rm -f "$BUILD/test-logs/release.log" "$BUILD/test-logs/release.status"
	(
		t0=$SECONDS
		# one slot more than JOBS: the two guest boots hold two slots for most of the run,
		# and the host tests of this pass (tier, packages, faults, C#) go beside them
		cd "$BUILD" && ctest -j"$((JOBS + 1))" --output-on-failure -R "$rx" >test-logs/release.log 2>&1
		rc=$?
		echo "$rc $((SECONDS - t0))" >test-logs/release.status
	) &
	RPID=$!
	tail -n +1 -F "$BUILD/test-logs/release.log" 2>/dev/null | sed -u 's/^/[release] /' &
	TPID=$!
	# the sanitized and fuzz trees, built while the guest boots
	if "$MAKE" --no-print-directory build-asan build-fuzz; then
		pass asan "$BUILD_ASAN" -LE release
		pass fuzz "$BUILD_FUZZ" -L fuzz
	else
		echo "make build-asan build-fuzz failed: the sanitized and fuzz passes did not run" >&2
		rc_all=1
	fi
	echo "== waiting for the release tree's pass (guest, packages, faults, .NET, tier, fleet)"
	wait "$RPID"
	sleep 1
	kill "$TPID" 2>/dev/null
	wait "$TPID" 2>/dev/null
	read -r rrc rwall <"$BUILD/test-logs/release.status" || rrc=1 rwall=?
	PASS_WALL[release]=$rwall
	PASS_JOBS=" (release: $((JOBS + 1)))"
	[ "$rrc" = 0 ] || rc_all=1
	summary "$BUILD_ASAN/test-logs/asan.log" "$BUILD_FUZZ/test-logs/fuzz.log" "$BUILD/test-logs/release.log"
	;;
*)
	echo "usage: suite.sh full|quick" >&2
	exit 2
	;;
esac
exit $rc_all
