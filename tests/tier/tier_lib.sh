# SPDX-License-Identifier: Apache-2.0
# tests/tier/tier_lib.sh - what the tier tests share (tier_store.sh, tier_faults.sh):
# tests/lib.sh and ceph_lib.sh, the programs of BUILD, a private temp dir W, the gRPC client
# of Stats (RPC, tier_wait, tier_stat) and a fail() that prints the nodes' logs and the last
# Stats (then the caller's tier_fail_more, if it defines one). Whatever runs in the
# background (ingestd through ing_start, the Ceph daemons, a proxy) is started from the
# test's own shell with a parent-death signal (ING_LAUNCH), so that it dies with the test.
#
#   BUILD=... ; . "$HERE/tier_lib.sh" NAME   # W=/tmp/h3000-NAME.XXXXXX; sets the programs
#                                            # (ing_programs) PY RPC PID SERVER
HERE=${HERE:-$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)}
. "$HERE/../lib.sh"
. "$HERE/ceph_lib.sh"

ing_programs "$BUILD"
ing_need_built "$INGESTD" "$SEND" "$VERIFY" "$GET" "$DOCTOR" "$STAT"
# what a test killed earlier left (ceph_lib.sh: dirs of ours whose test is gone), then ours
test_dir_sweep /tmp/h3000-"$1".*
W=$(mktemp -d "/tmp/h3000-$1.XXXXXX")
test_dir_own "$W"
export TIER_RPC_STUBS=$W/stubs
PY=/usr/bin/python3
# the nodes and the Stats client die with the test's shell, as the Ceph daemons do
export ING_LAUNCH="setpriv --pdeathsig KILL --"
RPC="$ING_LAUNCH $PY $HERE/tier_rpc.py"
PID=
SERVER=

fail() {
	echo "FAIL: $*"
	for f in "$W"/node*.log; do
		[ -f "$f" ] || continue
		echo "--- $f (last lines)"
		tail -20 "$f"
	done
	[ -s "$W/stats.json" ] && { echo "--- last Stats"; cat "$W/stats.json"; echo; }
	if declare -F tier_fail_more >/dev/null; then
		tier_fail_more
	fi
	exit 1
}

# tier_wait EXPR SECONDS WHAT: poll Stats (frame counters + TierStats) until EXPR holds
tier_wait() {
	$RPC wait "$SERVER" "$1" "$2" >"$W/stats.json" || fail "$3: '$1' not reached within $2 s"
}
tier_stat() { json "$W/stats.json" "$1"; }
