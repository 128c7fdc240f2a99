# SPDX-License-Identifier: Apache-2.0
# tests/tier/ceph_lib.sh - a single-node Ceph for the object store tests: one monitor, one
# OSD (BlueStore on a sparse file, so the disk it takes is what is stored), one radosgw,
# all on 127.0.0.1 with random free ports, in a private temp dir, authentication off
# (loopback only). Cold start to S3 serving takes ~15-20 s and ~0.3 GB of memory.
#
#   . tests/tier/ceph_lib.sh
#   trap 'ceph_cleanup' EXIT        # or call ceph_cleanup from your own EXIT trap
#   ceph_start                      # sets CEPH_DIR, CEPH_S3 (http://127.0.0.1:PORT),
#                                   # CEPH_CREDS (a credentials file, mode 600),
#                                   # CEPH_ACCESS_KEY, CEPH_SECRET_KEY
#   ceph_s3 mb BUCKET               # tests/tier/s3tool.py with the cluster's endpoint/keys
#   ceph_kill_osd / ceph_start_osd  # kill -9 the OSD / start it again
#   ceph_kill_rgw / ceph_start_rgw  # the same for radosgw
#
# The daemons die with the test, however it ends: each runs in the foreground (-f) as a
# child of the test's own shell, with a parent-death signal (setpriv --pdeathsig KILL). So
# kill -9 of the test's shell, ctest's TIMEOUT (it kills the test's process tree) and Ctrl-C
# leave no monitor, OSD or radosgw behind (daemonized, they were re-parented to init and
# outlived the test by hours). Call ceph_start, ceph_start_osd and ceph_start_rgw from that
# shell itself, never inside $(...), a pipeline or a ( ) subshell: the daemon would die with
# that subshell at once. And ceph_start first removes what a test killed before this
# change, or by a kill nothing survives, left: a dir of ours (/tmp/h3000-*) whose test is
# gone (its owner file: pid and start time) and the processes of ours whose command line
# names it; never anything else (another test's dir has a live owner; an operator's Ceph
# names no such dir).
#
# Every wait is bounded (CEPH_WAIT seconds). Pitfall: with "auth = none" radosgw needs
# "ms mon client mode = crc" in its own section, or it loops on
# "get_initial_auth_request returned -13" and gives up after 300 s. Needs the Debian
# packages ceph-mon, ceph-osd, radosgw and python3-boto3 (deploy/install-deps.sh); without
# them ceph_start fails saying so. Callers define fail() (print and exit non-zero).

CEPH_WAIT=${CEPH_WAIT:-60}
CEPH_DIR=
CEPH_S3=
CEPH_CREDS=
CEPH_ACCESS_KEY=H3000TIERTESTKEY0001
CEPH_SECRET_KEY=h3000-tier-test-secret-key-not-for-production
CEPH_RGW_PORT=
_CEPH_TOOL=$(dirname "${BASH_SOURCE[0]}")/s3tool.py

ceph_free_port() {
	/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

_ceph() {
	timeout "$CEPH_WAIT" ceph -c "$CEPH_DIR/ceph.conf" --connect-timeout 10 "$@"
}

# The helpers below that loops call (the keeper's every second, the waits' every 0.5 s) use
# bash builtins only: with sed, cut and cat one keeper round took ~18 ms of CPU (8 forks and
# execs), ~10 CPU-s over a run's tier tests on a 2-core machine where every CPU-second counts.

# _ceph_stat_fields PID: /proc/PID/stat after the command name into the array _CEPH_STAT
# (_CEPH_STAT[0] the state, [19] the start time); false if the process is gone
_ceph_stat_fields() {
	local s
	_CEPH_STAT=()
	{ read -r s <"/proc/$1/stat"; } 2>/dev/null || return 1
	read -r -a _CEPH_STAT <<<"${s##*) }"
	[ ${#_CEPH_STAT[@]} -gt 19 ]
}

# _ceph_alive PID: the process runs (a zombie, a child not yet reaped, does not)
_ceph_alive() {
	_ceph_stat_fields "$1" && [ "${_CEPH_STAT[0]}" != Z ]
}

# _ceph_running NAME: the daemon this shell started as NAME runs (its pid in _CEPH_PID)
_ceph_running() {
	_CEPH_PID=
	{ read -r _CEPH_PID <"$CEPH_DIR/run/$1.child"; } 2>/dev/null || return 1
	[ -n "$_CEPH_PID" ] && _ceph_alive "$_CEPH_PID"
}

# _ceph_pid NAME: the pid of the daemon this shell started as NAME ("" if none or dead)
_ceph_pid() {
	if _ceph_running "$1"; then echo "$_CEPH_PID"; fi
}

# _ceph_daemon NAME COMMAND...: COMMAND -f in the background, a child of this shell that
# gets SIGKILL when this shell dies (the header); its pid in run/NAME.child
_ceph_daemon() {
	local name=$1
	shift
	setpriv --pdeathsig KILL -- "$@" -f >>"$CEPH_DIR/log/setup.log" 2>&1 &
	echo $! >"$CEPH_DIR/run/$name.child"
}

# _ceph_stop PID...: SIGTERM, SIGKILL after 10 s, and reaped (they are this shell's children)
_ceph_stop() {
	local p deadline=$((SECONDS + 10))
	for p in "$@"; do
		kill "$p" 2>/dev/null || true
	done
	for p in "$@"; do
		{
			while _ceph_alive "$p" && [ $SECONDS -lt $deadline ]; do
				sleep 0.2
			done
			kill -9 "$p" || true
			wait "$p" || true
		} 2>/dev/null
	done
}

# _ceph_await NAME WHAT COMMAND...: wait until COMMAND succeeds (CEPH_WAIT s at most), failing
# at once with the logs if the daemon NAME exits first
_ceph_await() {
	local name=$1 what=$2 p deadline=$((SECONDS + CEPH_WAIT))
	shift 2
	p=$(cat "$CEPH_DIR/run/$name.child")
	until "$@" >/dev/null 2>&1; do
		_ceph_alive "$p" || fail "$name exited during start-up: $(_ceph_logs)"
		[ $SECONDS -lt $deadline ] || fail "$what after ${CEPH_WAIT} s: $(_ceph_logs)"
		sleep 0.5
	done
}

# test_dir_own DIR [PID]: DIR belongs to this test (its shell's pid, or PID, and its start
# time, in DIR/owner)
test_dir_own() {
	local p=${2:-$$}
	echo "$p $(_ceph_start_time "$p")" >"$1/owner"
}
_ceph_start_time() { if _ceph_stat_fields "$1"; then echo "${_CEPH_STAT[19]}"; fi; }
# _ceph_started PID START: PID is the process that started at START (not a reused pid)
_ceph_started() { [ -n "$1" ] && _ceph_stat_fields "$1" && [ "${_CEPH_STAT[19]}" = "$2" ]; }

# test_dir_sweep GLOB...: for each dir of ours matching GLOB whose owner test is gone: kill
# the processes of ours whose command line names the dir, and remove it
test_dir_sweep() {
	local d pid st f p n
	for d in "$@"; do
		[ -d "$d" ] && [ -O "$d" ] && [ -f "$d/owner" ] || continue
		read -r pid st <"$d/owner" || continue
		[ -n "$pid" ] && [ "$(_ceph_start_time "$pid")" = "$st" ] && continue   # its test runs
		n=0
		for f in $(grep -lsaF -- "$d/" /proc/[0-9]*/cmdline); do
			p=${f#/proc/}
			p=${p%/cmdline}
			# looked at again: the grep above named the dir too, and has exited
			[ "$p" != $$ ] && [ -O "/proc/$p" ] && grep -qsaF -- "$d/" "$f" &&
				kill -9 "$p" 2>/dev/null && n=$((n + 1))
		done
		rm -rf "$d"
		echo "removed what a killed test left: $d ($n processes)"
	done
}

_ceph_logs() {
	local f
	for f in "$CEPH_DIR"/log/*.log; do
		[ -f "$f" ] || continue
		echo "--- $f (last lines)"
		tail -5 "$f"
	done
}

# ceph_start: this test's Ceph. Alone (CEPH_SHARED unset): a cluster of its own (monitor,
# OSD, user) and its gateway. With CEPH_SHARED (an env file written by tier_ceph.sh up, the
# ctest fixture tier.ceph_up): the run's shared monitor and OSD, and a radosgw of this test's
# own on a free port (its own kills and restarts touch no other test); the shared OSD is
# killed only under its lock (ceph_kill_osd).
ceph_start() {
	if [ -n "${CEPH_SHARED:-}" ]; then
		_ceph_attach
	else
		ceph_cluster_start
		CEPH_RGW_NAME=client.rgw
		CEPH_RGW_PORT=$(ceph_free_port)
		ceph_start_rgw
		echo "ceph: mon, osd, radosgw up in $((SECONDS - _CEPH_T0)) s; S3 at $CEPH_S3 (dir $CEPH_DIR)"
	fi
}

# ceph_cluster_start [OWNER_PID]: the monitor, the OSD and the S3 user (no gateway) in a new
# CEPH_DIR owned by OWNER_PID (default: this shell); the daemons are this process's children
ceph_cluster_start() {
	local b
	for b in ceph-mon ceph-osd radosgw radosgw-admin monmaptool ceph; do
		command -v "$b" >/dev/null ||
			fail "$b not found: the tier tests need a single-node Ceph (apt-get install ceph-mon ceph-osd radosgw; deploy/install-deps.sh)"
	done
	command -v setpriv >/dev/null || fail "setpriv not found (util-linux)"
	/usr/bin/python3 -c 'import boto3' 2>/dev/null ||
		fail "python3-boto3 not found (apt-get install python3-boto3; deploy/install-deps.sh)"
	test_dir_sweep /tmp/h3000-ceph.*
	CEPH_DIR=$(mktemp -d /tmp/h3000-ceph.XXXXXX) || fail "mktemp failed"
	test_dir_own "$CEPH_DIR" "${1:-$$}"
	mkdir -p "$CEPH_DIR"/{mon,osd,run,log}
	local mon_port fsid
	_CEPH_T0=$SECONDS
	mon_port=$(ceph_free_port)
	fsid=$(cat /proc/sys/kernel/random/uuid)
	cat >"$CEPH_DIR/ceph.conf" <<EOF
[global]
fsid = $fsid
mon host = v2:127.0.0.1:$mon_port
public addr = 127.0.0.1
auth cluster required = none
auth service required = none
auth client required = none
auth supported = none
keyring = /dev/null
run dir = $CEPH_DIR/run
admin socket = $CEPH_DIR/run/\$name.asok
pid file = $CEPH_DIR/run/\$name.pid
log file = $CEPH_DIR/log/\$name.log
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
osd crush chooseleaf type = 0
mon allow pool size one = true
mon warn on pool no redundancy = false
mon max pg per osd = 1000
mon data avail warn = 1
mon data avail crit = 0
mon data = $CEPH_DIR/mon
osd data = $CEPH_DIR/osd
osd objectstore = bluestore
bluestore block path = $CEPH_DIR/osd/block.file
bluestore block create = true
bluestore block size = 17179869184
bluestore block db create = false
bluestore block wal create = false
bluestore cache autotune = false
bluestore cache size = 134217728
osd memory target = 939524096
EOF
	monmaptool --create --add a "v2:127.0.0.1:$mon_port" --fsid "$fsid" "$CEPH_DIR/monmap" \
		>"$CEPH_DIR/log/setup.log" 2>&1 || fail "monmaptool failed: $(tail -3 "$CEPH_DIR/log/setup.log")"
	timeout "$CEPH_WAIT" ceph-mon -c "$CEPH_DIR/ceph.conf" --mkfs -i a --monmap "$CEPH_DIR/monmap" \
		>>"$CEPH_DIR/log/setup.log" 2>&1 || fail "ceph-mon --mkfs failed: $(tail -3 "$CEPH_DIR/log/setup.log")"
	_ceph_daemon mon.a ceph-mon -c "$CEPH_DIR/ceph.conf" -i a
	_ceph_await mon.a "the monitor does not answer on its admin socket" \
		timeout 10 ceph --admin-daemon "$CEPH_DIR/run/mon.a.asok" mon_status
	local osd_uuid
	osd_uuid=$(cat /proc/sys/kernel/random/uuid)
	_ceph osd new "$osd_uuid" >>"$CEPH_DIR/log/setup.log" 2>&1 ||
		fail "ceph osd new failed (monitor not answering): $(_ceph_logs)"
	timeout "$CEPH_WAIT" ceph-osd -c "$CEPH_DIR/ceph.conf" -i 0 --mkfs --osd-uuid "$osd_uuid" \
		>>"$CEPH_DIR/log/setup.log" 2>&1 || fail "ceph-osd --mkfs failed: $(_ceph_logs)"
	ceph_start_osd
	timeout "$CEPH_WAIT" radosgw-admin -c "$CEPH_DIR/ceph.conf" user create --uid=tier \
		--display-name="h3000 tier test" --access-key="$CEPH_ACCESS_KEY" \
		--secret="$CEPH_SECRET_KEY" >>"$CEPH_DIR/log/setup.log" 2>&1 ||
		fail "radosgw-admin user create failed: $(tail -3 "$CEPH_DIR/log/setup.log")"
	CEPH_CREDS=$CEPH_DIR/s3.creds
	(umask 077; printf 'access_key = %s\nsecret_key = %s\n' "$CEPH_ACCESS_KEY" "$CEPH_SECRET_KEY" >"$CEPH_CREDS")
}

# _ceph_attach: the shared cluster of CEPH_SHARED (its keeper must run), this test's gateway
_ceph_attach() {
	local t0=$SECONDS CEPH_KEEPER= CEPH_KEEPER_ST=
	[ -s "$CEPH_SHARED" ] || fail "no shared Ceph: $CEPH_SHARED missing (the ctest fixture tier.ceph_up starts it; alone, unset CEPH_SHARED)"
	. "$CEPH_SHARED"
	[ -n "$CEPH_KEEPER" ] && [ "$(_ceph_start_time "$CEPH_KEEPER")" = "$CEPH_KEEPER_ST" ] && [ -d "$CEPH_DIR" ] ||
		fail "the shared Ceph of $CEPH_SHARED is gone (its keeper $CEPH_KEEPER ended: $(tail -5 "${CEPH_SHARED%.env}.log" 2>/dev/null))"
	_CEPH_SHARED_MODE=1
	CEPH_CREDS=$CEPH_DIR/s3.creds
	exec {_CEPH_LOCK_FD}>>"$CEPH_DIR/osd.lock"
	CEPH_RGW_NAME=client.rgw.$$
	CEPH_RGW_PORT=$(ceph_free_port)
	ceph_start_rgw
	echo "ceph: the run's shared monitor and OSD (dir $CEPH_DIR), this test's radosgw up in $((SECONDS - t0)) s; S3 at $CEPH_S3"
}

# ceph_start_osd: start the OSD and wait until it has booted (its own state, from its admin
# socket: after a kill -9 the monitor still lists the dead one as up for a while)
# Shared: the keeper starts it again once this test's hold (ceph_kill_osd) is gone; this
# waits for that, then gives up the OSD's lock.
ceph_start_osd() {
	if [ -z "${_CEPH_SHARED_MODE:-}" ]; then
		_ceph_daemon osd.0 ceph-osd -c "$CEPH_DIR/ceph.conf" -i 0
		_ceph_await osd.0 "the OSD is not active" _ceph_osd_active
		return
	fi
	rm -f "$CEPH_DIR/run/osd.hold"
	local deadline=$((SECONDS + CEPH_WAIT))
	until [ -n "$(_ceph_pid osd.0)" ] && _ceph_osd_active; do
		[ $SECONDS -lt $deadline ] || fail "the shared OSD is not active again after ${CEPH_WAIT} s: $(_ceph_logs)"
		sleep 0.5
	done
	flock -u "$_CEPH_LOCK_FD"
}
_ceph_osd_active() {
	timeout 10 ceph --admin-daemon "$CEPH_DIR/run/osd.0.asok" status 2>/dev/null | grep -q '"state": "active"'
}

# ceph_start_rgw: start this test's radosgw (CEPH_RGW_NAME on CEPH_RGW_PORT, its section in
# a conf of its own) and wait until it answers HTTP
ceph_start_rgw() {
	local conf=$CEPH_DIR/$CEPH_RGW_NAME.conf
	if [ ! -f "$conf" ]; then
		{
			cat "$CEPH_DIR/ceph.conf"
			printf '[%s]\nrgw frontends = beast endpoint=127.0.0.1:%s\nms mon client mode = crc\n' \
				"$CEPH_RGW_NAME" "$CEPH_RGW_PORT"
			printf 'rgw enable usage log = true\nrgw usage log tick interval = 1\nrgw usage log flush threshold = 1\n'
		} >"$conf"
	fi
	_ceph_daemon "$CEPH_RGW_NAME" radosgw -c "$conf" -n "$CEPH_RGW_NAME"
	_ceph_await "$CEPH_RGW_NAME" "radosgw does not answer on port $CEPH_RGW_PORT" \
		curl -s -o /dev/null --max-time 2 "http://127.0.0.1:$CEPH_RGW_PORT/"
	CEPH_S3=http://127.0.0.1:$CEPH_RGW_PORT
}

# _ceph_kill9 NAME: kill -9 the daemon and wait until it is gone
_ceph_kill9() {
	local p deadline=$((SECONDS + CEPH_WAIT))
	p=$(_ceph_pid "$1")
	[ -n "$p" ] || fail "$1 is not running"
	# (the shell's "Killed" notice of its child goes to /dev/null with the wait)
	{
		kill -9 "$p"
		while _ceph_alive "$p" && [ $SECONDS -lt $deadline ]; do
			sleep 0.1
		done
		_ceph_alive "$p" || wait "$p" || true
	} 2>/dev/null
	! _ceph_alive "$p" || fail "$1 (pid $p) survives kill -9"
	rm -f "$CEPH_DIR/run/$1.pid" "$CEPH_DIR/run/$1.child"
}

# Shared: the OSD is the keeper's child and other tests use it. Killing it takes its lock
# exclusively (a test that needs the OSD up holds it shared: ceph_osd_use) and leaves a hold
# (this test's pid and start time) so that the keeper does not start it again before
# ceph_start_osd; a killed test's hold is ignored.
ceph_kill_osd() {
	if [ -n "${_CEPH_SHARED_MODE:-}" ]; then
		ceph_osd_claim
		echo "$$ $(_ceph_start_time $$)" >"$CEPH_DIR/run/osd.hold"
	fi
	_ceph_kill9 osd.0
}
ceph_kill_rgw() { _ceph_kill9 "$CEPH_RGW_NAME"; }

# ceph_osd_use / ceph_osd_done: around work that needs the OSD up, when shared (a lock
# shared with other tests' work; another test's ceph_kill_osd waits for it). Nothing alone.
CEPH_WAIT_LOCK=${CEPH_WAIT_LOCK:-1800}
ceph_osd_use() {
	[ -n "${_CEPH_SHARED_MODE:-}" ] || return 0
	flock -s -w "$CEPH_WAIT_LOCK" "$_CEPH_LOCK_FD" ||
		fail "the shared OSD's lock not free after $CEPH_WAIT_LOCK s (another tier test killed the OSD)"
}
# ceph_osd_claim: the shared OSD's lock taken exclusively before ceph_kill_osd (which takes
# it too), so that other tests' work on it has ended before what the kill is to interrupt
# starts
ceph_osd_claim() {
	[ -n "${_CEPH_SHARED_MODE:-}" ] || return 0
	flock -x -w "$CEPH_WAIT_LOCK" "$_CEPH_LOCK_FD" ||
		fail "the shared OSD's lock not free after $CEPH_WAIT_LOCK s (another tier test uses the OSD)"
}
ceph_osd_done() {
	[ -z "${_CEPH_SHARED_MODE:-}" ] || flock -u "$_CEPH_LOCK_FD"
}

# ceph_s3 ARGS...: tests/tier/s3tool.py against this cluster
ceph_s3() {
	setpriv --pdeathsig KILL -- /usr/bin/python3 "$_CEPH_TOOL" --endpoint "$CEPH_S3" --access-key "$CEPH_ACCESS_KEY" \
		--secret-key "$CEPH_SECRET_KEY" "$@"
}

# ceph_usage_puts BUCKET: successful object PUTs the gateway logged into BUCKET (its usage
# log, flushed every second: wait a moment after the last PUT). A PUT refused by
# If-None-Match (412) is not successful: this counts the objects written, each time one was.
ceph_usage_puts() {
	timeout "$CEPH_WAIT" radosgw-admin -c "$CEPH_DIR/ceph.conf" usage show --uid=tier 2>/dev/null |
		/usr/bin/python3 -c 'import json,sys
d = json.load(sys.stdin)
print(sum(c.get("successful_ops", 0) for e in d.get("entries", []) for b in e.get("buckets", [])
          if b.get("bucket") == sys.argv[1] for c in b.get("categories", []) if c.get("category") == "put_obj"))' "$1"
}

# ceph_usage_puts_settled BUCKET MIN: ceph_usage_puts once the gateway's usage log has
# caught up: the count has reached MIN (every object written was PUT at least once) and
# read the same twice in a row, a second apart (a late duplicate would still show); 60 s
# at most (then whatever it read last: the caller's check fails with that number).
ceph_usage_puts_settled() {
	local n last=-1 deadline=$((SECONDS + 60))
	while :; do
		n=$(ceph_usage_puts "$1")
		[ -n "$n" ] || n=0
		if [ "$n" -ge "$2" ] && [ "$n" = "$last" ]; then break; fi
		[ $SECONDS -lt $deadline ] || break
		last=$n
		sleep 1
	done
	echo "$n"
}

# ceph_cleanup: stop every daemon (TERM, then KILL after 10 s) and remove the dir. Shared:
# this test's radosgw only (the keeper stops the rest with the run).
ceph_cleanup() {
	[ -n "$CEPH_DIR" ] && [ -d "$CEPH_DIR" ] || return 0
	local n p pids=()
	if [ -n "${_CEPH_SHARED_MODE:-}" ]; then
		p=$(_ceph_pid "$CEPH_RGW_NAME")
		[ -z "$p" ] || _ceph_stop "$p"
		rm -f "$CEPH_DIR/$CEPH_RGW_NAME.conf" "$CEPH_DIR/run/$CEPH_RGW_NAME".*
		CEPH_DIR=
		return 0
	fi
	for n in "${CEPH_RGW_NAME:-client.rgw}" osd.0 mon.a; do
		p=$(_ceph_pid "$n")
		[ -z "$p" ] || pids+=("$p")
	done
	[ ${#pids[@]} = 0 ] || _ceph_stop "${pids[@]}"
	rm -rf "$CEPH_DIR"
	CEPH_DIR=
}
