#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# run_all.sh [BATCH...] - runs inside the Soft-RoCE guest (deploy/rxe-vm/run-in-rxe-vm.sh):
# the guest tests of each BATCH in turn, in one boot (default: main). A batch is a set of
# tests that needs the same guest:
#   main       tests/rxe/*_in_guest.sh but rails            (rdma.rxe)
#   smp4       tests/rxe/smp4/*_in_guest.sh, needs 4 vCPUs  (rdma.rxe_smp4)
#   powerloss  tests/fault/powerloss_in_guest.sh $PL_MODE (short; long for make fault),
#              no hugepages (its scratch is tmpfs)           (fault.powerloss)
#   rails      tests/rxe/rails_in_guest.sh and tests/rxe/rails/*_in_guest.sh, needs two
#              NUMA nodes, two NICs and 4 vCPUs (RXE_VM_NUMA=2 RXE_VM_NICS=2 RXE_VM_SMP=4)
#                                                           (rdma.rails)
# A batch that needs more of the guest than it has (vCPUs, NUMA nodes, NICs) fails with
# that message: the host side (tests/rxe/guest.sh) boots the guest its batches need. In a
# batch whose needs are checked (every batch but main) a test that says NOT RUN fails: the
# guest it asks for is there, so a skip would hide a defect (main keeps NOT RUN for a tool
# a user's machine may lack, the .NET SDK).
# Each test: one PASS/FAIL line and the log tail of a failure; at the end of each batch a
# line "== batch NAME: ..." and, with ING_RXE_RESULTS, the files <results>/NAME/summary (its
# lines) and <results>/NAME/rc (0 = every test passed), which tests/rxe/batch_result.sh
# reads for the ctest of that batch. Exit status non-zero if any test failed (or none ran).
#
# No wall-clock verdicts: a test is stopped only when it makes no progress - no file of its
# per-test dirs (its log, its ingestd's log, data, manifests) changed size or appeared for
# ING_RXE_STALL seconds (default 300, times the time scale below); the failure names the
# step ('== ' line) that stalled. A test's newest step is echoed (heartbeat, every SCAN s).
# Time scale: the guest measures its own speed at boot (CRC of 64 MiB with cksum, against
# ING_RXE_REF_MBS, the MB/s of an idle 2-core host's guest) and exports
# ING_TEST_TIME_SCALE = ceil(reference / measured), at least 1; tests/lib.sh's wd() caps
# each command of a guest test at its SECONDS times that scale.
#
# Contract for a *_in_guest.sh: runs as root in the guest with RXE_DEV RXE_IP RXE_GID_INDEX
# RXE_NETDEV set, plus ING_BUILD_DIR (host build tree, read-only), ING_SRC_DIR, ING_RXE_OUT
# (a per-test read-write dir on the host, for logs/artifacts) and ING_RXE_TMP (guest scratch,
# tmpfs: keep totals small), ING_TEST_TIME_SCALE. Exit 0 = pass. It must not skip: when its
# real part is missing (a binary not built) it fails with a clear message. Exit 77 with a
# line "NOT RUN: why" is for a tool a user's machine may lack (the .NET SDK): reported NOT
# RUN, not passed. Print a '== ' step line before each step (tests/lib.sh step).
set -uo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
: "${ING_SRC_DIR:=$(cd "$HERE/../.." && pwd)}"
: "${ING_BUILD_DIR:=$ING_SRC_DIR/build}"
: "${ING_RXE_RESULTS:=}"
: "${ING_RXE_STALL:=300}"       # seconds without progress before a test is stopped (x scale)
: "${ING_RXE_ONLY:=}"          # regex: run only matching tests (manual runs)
: "${ING_RXE_HUGEPAGES:=256}"   # 2 MiB pages per NUMA node for the pools of the tests' ingestd
: "${ING_RXE_REF_MBS:=30}"      # cksum MB/s of the guest on an idle 2-core host
: "${PL_MODE:=short}"
export ING_SRC_DIR ING_BUILD_DIR
# qemu TCG emulates crc32 (SSE4.2) far slower than the table it runs natively: CRC-32C is
# chosen by CPU features, so pick the table here explicitly (common/crc32c.c).
export ING_CRC32C=table
# The watchdog's loop: every POLL s it looks whether the test ended (builtins only: the
# wait is a read with a timeout on a FIFO, no sleep process), every SCAN s it scans the
# test's progress (find, awk, grep: processes, each started over 9p under TCG). A test's
# end is seen within 1 s (it was up to 5 s, ~2.5 s a test on average, 11 tests in
# rdma.guest's batches, 3 in rdma.guest_2's); the qemu process's CPU for four short tests
# was the same either way (65 s, both booted side by side).
POLL=1
SCAN=30
POLL_FIFO=/tmp/rxe-poll.fifo

[ $# -gt 0 ] || set -- main
for b in "$@"; do
	case "$b" in
	main | smp4 | powerloss | rails) ;;
	*) echo "run_all.sh: unknown batch '$b' (main, smp4, powerloss, rails)" >&2; exit 2 ;;
	esac
done
if [ "${RXE_VM:-0}" != 1 ] || [ -z "${RXE_DEV:-}" ]; then
	echo "run_all.sh: not inside the rxe guest (RXE_VM/RXE_DEV unset): run it through deploy/rxe-vm/run-in-rxe-vm.sh" >&2
	exit 2
fi
if [ ! -d "$ING_BUILD_DIR" ]; then
	echo "run_all.sh: ING_BUILD_DIR=$ING_BUILD_DIR is not a directory" >&2
	exit 2
fi

# the guest's own speed -> ING_TEST_TIME_SCALE (an integer, at least 1)
t0=$(date +%s%N)
head -c 64M /dev/zero | cksum >/dev/null
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
mbs=$(( 64000 / (ms > 0 ? ms : 1) ))
scale=$(( (ING_RXE_REF_MBS + (mbs > 0 ? mbs : 1) - 1) / (mbs > 0 ? mbs : 1) ))
[ "$scale" -ge 1 ] || scale=1
export ING_TEST_TIME_SCALE=$scale
STALL=$(( ING_RXE_STALL * scale ))
echo "== rxe guest: $(uname -r), $(nproc) vCPU, $(awk '/MemTotal/ {print int($2/1024)}' /proc/meminfo) MiB," \
	"dev $RXE_DEV on $RXE_NETDEV ip $RXE_IP gid-index $RXE_GID_INDEX, build $ING_BUILD_DIR;" \
	"speed ${mbs} MB/s (reference $ING_RXE_REF_MBS): time scale $scale, stall watchdog ${STALL} s; batches: $*"

# batch_tests BATCH: its test scripts, one a line
batch_tests() {
	case $1 in
	main) ls -1 "$HERE"/*_in_guest.sh 2>/dev/null | grep -v '/rails_in_guest\.sh$' ;;
	smp4) ls -1 "$HERE"/smp4/*_in_guest.sh 2>/dev/null ;;
	rails) ls -1 "$HERE"/rails_in_guest.sh "$HERE"/rails/*_in_guest.sh 2>/dev/null ;;
	powerloss) echo "$ING_SRC_DIR/tests/fault/powerloss_in_guest.sh" ;;
	esac
}
# batch_needs BATCH: empty, or why this guest cannot run it
batch_needs() {
	case $1 in
	smp4) [ "$(nproc)" -ge 4 ] || echo "needs 4 vCPUs, the guest has $(nproc) (RXE_VM_SMP=4)" ;;
	rails)
		[ "${RXE_NUMA:-1}" -ge 2 ] && [ "${RXE_NICS:-1}" -ge 2 ] && [ "$(nproc)" -ge 4 ] ||
			echo "needs two NUMA nodes, two NICs and 4 vCPUs, the guest has ${RXE_NUMA:-1} node(s)," \
				"${RXE_NICS:-1} NIC(s), $(nproc) vCPU(s) (RXE_VM_NUMA=2 RXE_VM_NICS=2 RXE_VM_SMP=4)"
		;;
	esac
}
# hugepages BATCH: the default-size hugepages its tests' ingestd pools need: ING_RXE_HUGEPAGES
# on each NUMA node (the kernel spreads them evenly; a rail's pool region takes its node's)
batch_hugepages() {
	case $1 in
	powerloss) echo 0 ;;
	*) echo $((ING_RXE_HUGEPAGES * ${RXE_NUMA:-1})) ;;
	esac
}

# progress signature of a test: count and total size of the files in its dirs (-xdev: never
# into a file system a test mounted there, whose umount a directory held open would fail)
progress() { find "$@" -xdev -printf '%s\n' 2>/dev/null | awk '{ s += $1 } END { print NR, s }'; }

# run_test BATCH NAME SCRIPT: one test under the progress watchdog; appends to $SUMMARY
run_test() {
	local batch=$1 name=$2 t=$3 out tmp pid rc sig last step= idle=0 why= t0=$SECONDS tick=0
	out=/tmp/rxe-out/$batch/$name
	[ -n "$ING_RXE_RESULTS" ] && out=$ING_RXE_RESULTS/$batch/$name
	tmp=/tmp/rxe-tmp/$batch/$name
	rm -rf "$out" "$tmp"
	mkdir -p "$out" "$tmp"
	local -a args=()
	[ "$batch" = powerloss ] && args=("$PL_MODE")
	ING_RXE_OUT=$out ING_RXE_TMP=$tmp PL_OUT=$out setsid bash "$t" "${args[@]}" >"$out/log" 2>&1 &
	pid=$!
	[ -p "$POLL_FIFO" ] || mkfifo "$POLL_FIFO"
	last=$(progress "$out" "$tmp")
	while kill -0 "$pid" 2>/dev/null; do
		# (read times out: nothing writes the FIFO; opened read-write, so open never waits)
		read -r -t "$POLL" _ <>"$POLL_FIFO"
		kill -0 "$pid" 2>/dev/null || break
		tick=$((tick + POLL))
		[ "$tick" -ge "$SCAN" ] || continue
		tick=0
		sig=$(progress "$out" "$tmp")
		if [ "$sig" != "$last" ]; then
			last=$sig
			idle=0
			local s
			s=$(grep -a '^== ' "$out/log" | tail -n 1)
			if [ -n "$s" ] && [ "$s" != "$step" ]; then
				step=$s
				echo "   $name: ${s#== }"
			fi
		else
			idle=$((idle + SCAN))
			if [ "$idle" -ge "$STALL" ]; then
				why="no progress for ${idle} s in step '${step#== }'"
				kill -TERM -- "-$pid" 2>/dev/null
				sleep 5
				kill -KILL -- "-$pid" 2>/dev/null
				break
			fi
		fi
	done
	wait "$pid"
	rc=$?
	# whatever the test left running in its process group (an ingestd of a failed test held
	# the next tests' hugepages and EAL files: one failure became three) goes with it
	kill -KILL -- "-$pid" 2>/dev/null
	local el=$((SECONDS - t0))
	if [ -z "$why" ] && [ $rc = 77 ] && [ "$batch" != main ]; then
		# batch_needs checked this batch's guest: what the test asks for is there
		why="NOT RUN in batch $batch, whose guest has what it needs: $(grep -m1 '^NOT RUN: ' "$out/log" | cut -c10-)"
	fi
	if [ -z "$why" ] && [ $rc = 0 ]; then
		echo "PASS: $name (${el}s)" | tee -a "$SUMMARY"
		pass=$((pass + 1))
	elif [ -z "$why" ] && [ $rc = 77 ] && grep -q '^NOT RUN: ' "$out/log"; then
		# a tool the user's machine may lack (the .NET SDK): said so, never a pass
		echo "NOT RUN: $name - $(grep -m1 '^NOT RUN: ' "$out/log" | cut -c10-)" | tee -a "$SUMMARY"
		notrun=$((notrun + 1))
	else
		[ -n "$why" ] || why="exit $rc"
		{
			echo "FAIL: $name ($why, ${el}s) - last lines of $out/log:"
			tail -n 40 "$out/log" | sed 's/^/    | /'
		} | tee -a "$SUMMARY"
		fail=$((fail + 1))
		failed+=("$name")
	fi
	rm -rf "$tmp"
}

total_fail=0 total_ran=0
for batch in "$@"; do
	pass=0 fail=0 notrun=0 failed=()
	t0=$SECONDS
	SUMMARY=/tmp/rxe-out/$batch.summary
	[ -n "$ING_RXE_RESULTS" ] && SUMMARY=$ING_RXE_RESULTS/$batch/summary
	mkdir -p "$(dirname "$SUMMARY")"
	rm -f "$SUMMARY" "$(dirname "$SUMMARY")/rc"
	echo "== batch $batch: $(date -u +%FT%TZ)" >"$SUMMARY"
	need=$(batch_needs "$batch")
	hp=$(batch_hugepages "$batch")
	echo "$hp" >/proc/sys/vm/nr_hugepages
	got=$(cat /proc/sys/vm/nr_hugepages)
	[ -n "$need" ] || [ "$got" -ge "$hp" ] ||
		need="the guest reserved $got of $hp hugepages (RXE_VM_MEM too small?)"
	if [ -n "$need" ]; then
		echo "FAIL: batch $batch: $need" | tee -a "$SUMMARY"
		fail=1 failed=("(batch)")
	else
		# (no process substitution: the guest has no /dev/fd)
		mapfile -t tests <<<"$(batch_tests "$batch")"
		echo "== batch $batch: ${#tests[@]} tests, $got hugepages"
		for t in "${tests[@]}"; do
			[ -e "$t" ] || continue
			name=$(basename "$t" _in_guest.sh)
			if [ -n "$ING_RXE_ONLY" ] && ! [[ $name =~ $ING_RXE_ONLY ]]; then
				continue
			fi
			run_test "$batch" "$name" "$t"
		done
	fi
	line="== batch $batch: $pass passed, $fail failed${failed:+ (${failed[*]})}, $notrun not run, $((SECONDS - t0)) s"
	echo "$line" | tee -a "$SUMMARY"
	rc=0
	[ $fail = 0 ] || rc=1
	if [ $((pass + fail)) = 0 ]; then
		echo "run_all.sh: batch $batch ran no test" | tee -a "$SUMMARY" >&2
		rc=1
	fi
	echo $rc >"$(dirname "$SUMMARY")/rc"
	total_fail=$((total_fail + rc))
	total_ran=$((total_ran + pass + fail))
done
[ "$total_fail" = 0 ]
