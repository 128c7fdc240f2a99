#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# ingest-topo / ingest-doctor command lines on the shipped fixtures (func.numa.cli):
# exit statuses (0 / 1 on FAIL or no plan / 2 usage), cross-node warnings, $HWLOC_XMLFILE.
# usage: cli.sh ingest-topo ingest-doctor SRCDIR
set -uo pipefail
TOPO=${1:?} DOCTOR=${2:?} SRC=${3:?}
F=$SRC/tests/numa R=$SRC/tests/numa/roots
n=0
fail() { echo "cli: FAIL: $*" >&2; exit 1; }
expect_rc() { # expect_rc WANT CMD...
	local want=$1; shift
	out=$("$@" 2>&1); local rc=$?
	n=$((n + 1))
	[ $rc = "$want" ] || { echo "$out"; fail "exit $rc, want $want: $*"; }
}

expect_rc 0 "$TOPO" --help
expect_rc 0 "$DOCTOR" --help
grep -q -- '--sysfs-root' <<<"$out" || fail "doctor --help lacks --sysfs-root"
expect_rc 2 "$TOPO" --no-such-option
expect_rc 2 "$TOPO" --pool-node x
expect_rc 2 "$DOCTOR" --pool-bytes 12Q
expect_rc 2 "$DOCTOR" extra-arg

expect_rc 0 "$TOPO" --topology "$F/two_socket.xml"
grep -q 'WARNING: mlx5_0 is on node 1, nvme0n1 on node 0' <<<"$out" || fail "no cross-node warning"
grep -q 'control lcore : cpu 4' <<<"$out" || fail "two_socket control cpu"
HWLOC_XMLFILE=$F/four_node_smt.xml expect_rc 0 "$TOPO" --json
grep -q '"control_cpu":8,"dataplane_cpus":\[9,0\]' <<<"$out" || fail "four_node plan via HWLOC_XMLFILE (two rails)"
expect_rc 1 "$TOPO" --topology "$F/two_socket.xml" --pool-node 5
grep -q -- '--pool-node 5: no such NUMA node (nodes: 0-1)' <<<"$out" || fail "pool-node error text"
expect_rc 1 "$TOPO" --topology "$F/vm_single.xml" --lcores 0,7
expect_rc 1 "$TOPO" --topology "$F/nope.xml"

d=$(mktemp -d /tmp/ing-cli-XXXXXX) || fail mktemp
trap 'rm -rf "$d"' EXIT
expect_rc 1 "$DOCTOR" --sysfs-root "$R/fail/sys" --procfs-root "$R/fail/proc" \
	--topology "$F/two_socket.xml" --memlock 64K --data-dir "$d"
grep -q 'FAIL  rdma.port' <<<"$out" || fail "fail root: rdma.port"
expect_rc 0 "$DOCTOR" --sysfs-root "$R/warn/sys" --procfs-root "$R/warn/proc" \
	--topology "$F/vm_single.xml" --memlock unlimited --data-dir "$d"
grep -q 'summary: .* 0 FAIL' <<<"$out" || fail "warn root summary"
expect_rc 0 "$DOCTOR" --sysfs-root "$R/warn/sys" --procfs-root "$R/warn/proc" \
	--topology "$F/vm_single.xml" --memlock unlimited --data-dir "$d" --json
grep -q '"gid_index":-1' <<<"$out" || fail "warn root JSON"
echo "cli: OK ($n commands)"
