#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# tier_ceph.sh up|down ENV_FILE - one Ceph monitor and OSD shared by the tier tests of a
# ctest run (the fixture tier_ceph: tier.ceph_up is its FIXTURES_SETUP, tier.ceph_down its
# FIXTURES_CLEANUP; tier.store and tier.faults require it and find it through CEPH_SHARED,
# ceph_lib.sh). A cold start (monitor and OSD mkfs, the OSD's boot, the S3 user) is paid once
# per run instead of once per test; each test still starts a radosgw of its own (a few
# seconds) and uses buckets of its own, so no test depends on another's data or gateway.
#
#   up    starts the keeper: a process (a child of this script, left running when it exits)
#         whose children the monitor and OSD are, with a parent-death signal as in
#         ceph_lib.sh. It watches the process that ran `up` (ctest) and stops the cluster
#         when that process is gone: ctest killed in any way (kill -9 included), the daemons
#         go with it within a second or two (tier.cleanup step 3 proves it); the keeper
#         killed, its daemons die with it (their parent-death signal). It starts the OSD
#         again when a test killed it (ceph_kill_osd) and has given it back
#         (ceph_start_osd), or when that test is gone. Writes ENV_FILE (CEPH_DIR, the
#         keeper's pid and start time) once the cluster serves; its log is ENV_FILE's name
#         with .log.
#   down  stops the keeper (TERM: it stops the daemons and removes the dir) and waits until
#         nothing of it runs; removes ENV_FILE.
set -u
CMD=${1:?usage: tier_ceph.sh up|down ENV_FILE}
ENV_FILE=${2:?usage: tier_ceph.sh up|down ENV_FILE}
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib.sh"
. "$HERE/ceph_lib.sh"
LOG=${ENV_FILE%.env}.log
fail() {
	echo "FAIL: $*"
	exit 1
}

# keeper WATCH_PID WATCH_START: (in the background) the cluster, for as long as WATCH lives
keeper() {
	local watch=$1 watch_st=$2 me=$BASHPID holder hst
	trap 'echo "keeper: stopping ($(date +%T))"; ceph_cleanup; exit 0' TERM INT
	trap 'ceph_cleanup' EXIT
	ceph_cluster_start "$me"
	echo "keeper $me: mon and osd up in $((SECONDS - _CEPH_T0)) s in $CEPH_DIR; watching pid $watch"
	printf 'CEPH_DIR=%s\nCEPH_KEEPER=%s\nCEPH_KEEPER_ST=%s\n' "$CEPH_DIR" "$me" "$(_ceph_start_time "$me")" \
		>"$ENV_FILE.tmp" && mv "$ENV_FILE.tmp" "$ENV_FILE"
	# (builtins only in this loop: ceph_lib.sh's _ceph_started, _ceph_running)
	while _ceph_started "$watch" "$watch_st"; do
		if ! _ceph_running mon.a; then
			echo "keeper: the monitor died: $(_ceph_logs)"
			exit 1
		fi
		if ! _ceph_running osd.0; then
			holder= hst=
			[ ! -f "$CEPH_DIR/run/osd.hold" ] || read -r holder hst <"$CEPH_DIR/run/osd.hold"
			if ! _ceph_started "$holder" "$hst"; then
				[ -z "$holder" ] || echo "keeper: the OSD's holder $holder is gone"
				rm -f "$CEPH_DIR/run/osd.hold"
				echo "keeper: starting the OSD again ($(date +%T))"
				ceph_start_osd
				echo "keeper: the OSD is active ($(date +%T))"
			fi
		fi
		sleep 1
	done
	echo "keeper: pid $watch (the run) is gone: stopping ($(date +%T))"
	exit 0
}

case $CMD in
up)
	rm -f "$ENV_FILE"
	: >"$LOG"
	# the run: ctest, the parent of tests/watchdog.py that runs this (ING_TEST_RUNNER_PID);
	# run by hand, this shell's parent
	watch=${ING_TEST_RUNNER_PID:-$PPID}
	keeper "$watch" "$(_ceph_start_time "$watch")" </dev/null >>"$LOG" 2>&1 &
	KEEPER=$!
	end=$((SECONDS + 2 * CEPH_WAIT))
	until [ -s "$ENV_FILE" ]; do
		kill -0 "$KEEPER" 2>/dev/null || fail "the keeper ended before the cluster served: $(tail -20 "$LOG")"
		[ $SECONDS -lt $end ] || { kill "$KEEPER"; fail "the cluster is not up after $((2 * CEPH_WAIT)) s: $(tail -20 "$LOG")"; }
		sleep 0.5
	done
	cat "$LOG"
	echo "shared Ceph up for this run: $ENV_FILE"
	;;
down)
	[ -s "$ENV_FILE" ] || { echo "no shared Ceph ($ENV_FILE missing): nothing to stop"; exit 0; }
	. "$ENV_FILE"
	if [ "$(_ceph_start_time "$CEPH_KEEPER")" = "$CEPH_KEEPER_ST" ]; then
		kill "$CEPH_KEEPER"
		end=$((SECONDS + CEPH_WAIT))
		while _ceph_started "$CEPH_KEEPER" "$CEPH_KEEPER_ST"; do
			[ $SECONDS -lt $end ] || fail "the keeper $CEPH_KEEPER still runs $CEPH_WAIT s after TERM"
			sleep 0.2
		done
	fi
	# what a killed keeper may have left (its daemons die with it; the dir stays)
	test_dir_sweep "$CEPH_DIR"
	[ ! -e "$CEPH_DIR" ] || fail "$CEPH_DIR still there"
	tail -3 "$LOG"
	rm -f "$ENV_FILE"
	echo "shared Ceph stopped"
	;;
*) fail "usage: tier_ceph.sh up|down ENV_FILE" ;;
esac
