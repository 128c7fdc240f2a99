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

# the two-socket two-NIC machine: one rail per NIC, each on its socket; the config lines
# ingest-topo prints are read back by ingestd's own option table and give the same plan
N2=$F/two_socket_two_nic.xml
expect_rc 0 "$TOPO" --topology "$N2"
grep -q 'placement plan (2 NUMA nodes, 2 rails)' <<<"$out" || fail "two rails"
grep -q 'rail 1        : mlx5_1 netdev ens2f0np0, node 1' <<<"$out" || fail "rail 1 on node 1"
grep -q 'region 1      : node 1, workers 2 on cpus 5-6' <<<"$out" || fail "region 1's workers"
grep -q "disk rule     : rail 1's frames are written by node 1's workers" <<<"$out" || fail "disk rule"
grep -q '^rdma-dev = mlx5_0@0, mlx5_1@1$' <<<"$out" || fail "config lines"
printf 'rdma-dev = mlx5_1@1, mlx5_0\ndataplane = 2\nworkers = 1\n' >"$d/in.conf"
expect_rc 0 "$TOPO" --topology "$N2" --config "$d/in.conf" --config-lines
printf '%s\n' "$out" >"$d/plan.conf"
grep -q '^lcores = 0-1,4-6$' "$d/plan.conf" || { cat "$d/plan.conf"; fail "--config: two lcores per rail"; }
expect_rc 0 "$TOPO" --topology "$N2" --config "$d/plan.conf" --config-lines
[ "$out" = "$(cat "$d/plan.conf")" ] || { echo "$out"; fail "the printed config lines give another plan"; }
expect_rc 0 "$TOPO" --topology "$N2" --config "$d/plan.conf" --workers 3 --config-lines
grep -q '^workers = 3$' <<<"$out" || fail "a flag wins over --config"
printf 'rdma-dev = mlx5_0@x\n' >"$d/bad.conf"
expect_rc 2 "$TOPO" --config "$d/bad.conf"
grep -q "bad.conf:1: rdma-dev: 'mlx5_0@x'" <<<"$out" || fail "a bad rdma-dev in the file"
expect_rc 1 "$TOPO" --topology "$N2" --rdma-dev 'mlx5_1@7'
expect_rc 0 "$DOCTOR" --sysfs-root "$R/rails/sys" --procfs-root "$R/rails/proc" \
	--topology "$N2" --memlock unlimited --data-dir "$d"
grep -q 'rdma: rail 1: device mlx5_1 port 1, GID index 3 (10.2.0.5)' <<<"$out" || fail "doctor: rail 1"
grep -q 'WARN  rdma.unused' <<<"$out" || fail "doctor: the DOWN device"
printf 'rdma-dev = rxe0@0, rxe1@1\ndata-dir = %s\n' "$d" >"$d/rxe.conf"
expect_rc 0 "$DOCTOR" --config "$d/rxe.conf" --sysfs-root "$R/rails_rxe/sys" \
	--procfs-root "$R/rails_rxe/proc" --topology "$N2" --memlock unlimited
grep -q 'PASS  numa.nic .*rxe1 on node 1 (rdma-dev override' <<<"$out" || fail "doctor --config: rxe1@1"

# a plan tuned with ingest-topo on this machine is applied as printed: ingestd --config with
# the printed lines runs its control thread and pins its persistence workers where the plan
# says (read back from the kernel)
INGESTD=$(dirname "$TOPO")/ingestd
[ -x "$INGESTD" ] || fail "$INGESTD not built"
last=$(nproc --all); last=$((last - 1))
expect_rc 0 "$TOPO" --worker-cpus "$last" --workers 2 --config-lines
printf '%s\n' "$out" >"$d/live.conf"
grep -q "^worker-cpus = $last$" "$d/live.conf" || { cat "$d/live.conf"; fail "no worker-cpus line"; }
ctl=$(sed -n 's/^control-cpu = //p' "$d/live.conf")
"$INGESTD" --config "$d/live.conf" --data-dir "$d/data" --listen 127.0.0.1:0 --port-file "$d/port" \
	--pool 1M:2 --hugepages off --rdma off >"$d/ingestd.log" 2>&1 &
ipid=$!
for _ in $(seq 1 300); do [ -s "$d/port" ] && break; kill -0 $ipid 2>/dev/null || break; sleep 0.1; done
[ -s "$d/port" ] || { cat "$d/ingestd.log"; fail "ingestd --config (printed lines) did not start"; }
n=$((n + 1))
workers=0
for t in /proc/$ipid/task/*; do
	case $(cat "$t/comm") in ing-persist*) ;; *) continue ;; esac
	cpus=$(sed -n 's/^Cpus_allowed_list:\s*//p' "$t/status")
	[ "$cpus" = "$last" ] || { kill $ipid; fail "persistence worker $(cat "$t/comm") on cpus $cpus, not $last"; }
	workers=$((workers + 1))
done
main=$(sed -n 's/^Cpus_allowed_list:\s*//p' "/proc/$ipid/status")
kill -TERM $ipid; wait $ipid || fail "ingestd exited $? on SIGTERM"
[ "$workers" = 2 ] || fail "$workers persistence workers, not 2"
[ "$main" = "$ctl" ] || fail "the control thread runs on cpus $main, not the plan's $ctl"
echo "cli: the printed plan applied: control on cpu $ctl, 2 workers pinned on cpu $last"
echo "cli: OK ($n commands)"
