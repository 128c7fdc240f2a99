#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# tier_cleanup.sh BUILD_DIR - a tier test killed any way leaves nothing running.
#  1. a test's shell (tier_lib.sh: a Ceph, an ingestd tiering to it, a Stats client
#     waiting) is killed with SIGKILL, so that no trap of its runs: its monitor, OSD,
#     radosgw, ingestd and client are gone at once (the daemons run in the foreground as the
#     shell's children with a parent-death signal; daemonized, they outlived such a test by
#     hours);
#  2. what it left on disk (its Ceph dir and temp dir) is removed by the next test's start
#     (test_dir_sweep), with a process of ours still naming the dir; a dir whose test still
#     runs, and its processes, are left alone.
# ctest's TIMEOUT kills the test's whole process tree; the daemons are in it now (they were
# re-parented to init before).
#  3. a run killed with SIGKILL (ctest, which ran the fixture tier.ceph_up) takes the shared
#     monitor and OSD with it: their keeper watches it, stops them and removes their dir.
# Label tier, release tree (Ceph), ~1-2 minutes.
set -u
BUILD=$(cd "${1:?usage: tier_cleanup.sh BUILD_DIR}" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/tier_lib.sh" tier-cleanup
CHILD=
RUN=
cleanup() {
	[ -z "$CHILD" ] || kill -9 "$CHILD" 2>/dev/null
	[ -z "$RUN" ] || kill -9 "$RUN" 2>/dev/null
	[ -z "${KEEP:-}" ] || { kill -9 "$KEEP"; wait "$KEEP"; } 2>/dev/null
	test_dir_sweep "$W"/owned.*
	rm -rf "$W"
}
trap cleanup EXIT

# procs DIR: our processes whose command line names DIR (one "pid command" a line)
procs() {
	local f p
	for f in $(grep -lsaF -- "$1/" /proc/[0-9]*/cmdline); do
		p=${f#/proc/}
		p=${p%/cmdline}
		[ "$p" != $$ ] && grep -qsaF -- "$1/" "$f" && echo "$p $(tr '\0' ' ' <"$f" 2>/dev/null)"
	done
}
# gone DIR WHAT: every process naming DIR ends (60 s x the time scale at most: a cap for a hang)
gone() {
	local end=$((SECONDS + $(ing_scaled 60)))
	while [ -n "$(procs "$1")" ]; do
		[ $SECONDS -lt $end ] || fail "$2: still running: $(procs "$1")"
		sleep 0.2
	done
}

step "1. a tier test's shell killed with SIGKILL: nothing of it keeps running"
# the child is a tier test in miniature: Ceph, a node tiering to it, a Stats client waiting
cat >"$W/child.sh" <<EOF
set -u
BUILD=$BUILD
HERE=$HERE
. "\$HERE/tier_lib.sh" tier-cleanup-child
trap 'ceph_cleanup; rm -rf "\$W"' EXIT
ceph_start
ceph_s3 mb cleanup
ing_start "\$INGESTD" "\$W/port" "\$W/node.log" --data-dir "\$W/data" --hugepages off \\
	--tier "s3://127.0.0.1:\$CEPH_RGW_PORT/cleanup" --tier-credentials "\$CEPH_CREDS"
\$RPC wait "\$ING_SERVER" "storeState == 2 and framesDurable > 1" 3600 >/dev/null &
echo "\$CEPH_DIR \$W \$ING_PID \$!" >"$W/child.ready"
wait
EOF
bash "$W/child.sh" >"$W/child.log" 2>&1 &
CHILD=$!
end=$((SECONDS + $(ing_scaled 300)))
until [ -s "$W/child.ready" ]; do
	kill -0 "$CHILD" 2>/dev/null || fail "the child test ended before it was ready: $(tail -20 "$W/child.log")"
	[ $SECONDS -lt $end ] || fail "the child test is not ready: $(tail -20 "$W/child.log")"
	sleep 0.5
done
read -r CDIR CW CNODE CRPC <"$W/child.ready"
echo "child $CHILD: Ceph in $CDIR, ingestd $CNODE, Stats client $CRPC, its temp dir $CW"
procs "$CDIR" | awk '{ print "  " $2 }' | sort | uniq -c
n=$(procs "$CDIR" | grep -cE ' (ceph-mon|ceph-osd|radosgw) ')
[ "$n" = 3 ] || fail "the child's Ceph is not the three daemons: $(procs "$CDIR")"
procs "$CW" | grep -q "^$CNODE .*/apps/ingestd " || fail "the child's ingestd is not running"
grep -qa tier_rpc.py "/proc/$CRPC/cmdline" || fail "the child's Stats client is not running"
kill -9 "$CHILD"
wait "$CHILD" 2>/dev/null
CHILD=
gone "$CDIR" "the killed test's Ceph"
gone "$CW" "the killed test's ingestd"
end=$((SECONDS + $(ing_scaled 60)))
while grep -qsa tier_rpc.py "/proc/$CRPC/cmdline"; do
	[ $SECONDS -lt $end ] || fail "the killed test's Stats client (pid $CRPC) still runs"
	sleep 0.2
done
[ -d "$CDIR" ] && [ -d "$CW" ] || fail "the killed test's dirs are gone: its trap ran?"
echo "ok: nothing of the killed test runs; its dirs $CDIR and $CW are left"

step "2. the next test's start removes them, and nothing of a test that still runs"
# a process of ours still naming the dead test's dir (as a daemonized Ceph of before did)
"$PY" -c 'import time; time.sleep(600)' "$CW/stale" </dev/null >/dev/null 2>&1 &
LEFT=$!
# a dir of a test that runs (this one): left alone, and its process too
LIVE=$(mktemp -d "$W/owned.XXXXXX")
test_dir_own "$LIVE"
"$PY" -c 'import time; time.sleep(600)' "$LIVE/x" </dev/null >/dev/null 2>&1 &
KEEP=$!
test_dir_sweep "$CDIR" "$CW" "$LIVE" >"$W/sweep.out" 2>"$W/sweep.err"
cat "$W/sweep.out"
grep -qF "removed what a killed test left: $CDIR (" "$W/sweep.out" || fail "the Ceph dir was not swept"
grep -qF "removed what a killed test left: $CW (1 processes)" "$W/sweep.out" || fail "the temp dir was not swept"
[ ! -e "$CDIR" ] && [ ! -e "$CW" ] || fail "a swept dir is still there"
rc=0
wait "$LEFT" || rc=$?
[ "$rc" = 137 ] || fail "the stale process naming the dead test's dir: exit $rc, not killed by the sweep"
[ -d "$LIVE" ] && kill -0 "$KEEP" 2>/dev/null || fail "the sweep touched a dir whose test runs"
echo "ok: the dead test's dirs removed; a running test's dir and process kept"

step "3. the run's shared Ceph (tier.ceph_up, tier_ceph.sh) dies with the run killed with SIGKILL"
# a run in miniature: a process that ran `tier_ceph.sh up` (as ctest runs the fixture) and
# lives on; the shared monitor and OSD are its keeper's children, not its own
env -u ING_TEST_RUNNER_PID bash -c "bash '$HERE/tier_ceph.sh' up '$W/run.env'; exec sleep 3600" >"$W/run.out" 2>&1 &
RUN=$!
end=$((SECONDS + $(ing_scaled 600)))
until grep -q '^shared Ceph up' "$W/run.out" 2>/dev/null; do
	kill -0 "$RUN" 2>/dev/null || fail "tier_ceph.sh up ended: $(tail -20 "$W/run.out")"
	[ $SECONDS -lt $end ] || fail "the shared Ceph is not up: $(tail -20 "$W/run.out")"
	sleep 0.5
done
SDIR=$(sed -n 's/^CEPH_DIR=//p' "$W/run.env")
SKEEPER=$(sed -n 's/^CEPH_KEEPER=//p' "$W/run.env")
echo "run $RUN: shared Ceph in $SDIR, its keeper $SKEEPER"
n=$(procs "$SDIR" | grep -cE ' (ceph-mon|ceph-osd) ')
[ "$n" = 2 ] || fail "the shared Ceph is not a monitor and an OSD: $(procs "$SDIR")"
kill -9 "$RUN"
wait "$RUN" 2>/dev/null
RUN=
gone "$SDIR" "the killed run's shared Ceph"
end=$((SECONDS + $(ing_scaled 60)))
while kill -0 "$SKEEPER" 2>/dev/null; do
	[ $SECONDS -lt $end ] || fail "the killed run's keeper (pid $SKEEPER) still runs"
	sleep 0.2
done
[ ! -e "$SDIR" ] || fail "the keeper did not remove $SDIR"
echo "ok: the run killed, its shared monitor and OSD and their keeper are gone, and their dir"
echo "PASS: a killed tier test or run leaves nothing running, and its dirs go at the next start"
