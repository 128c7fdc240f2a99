#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# guest.sh BUILD_DIR BATCH... - one boot of the Soft-RoCE qemu guest (deploy/rxe-vm) that
# runs the guest test batches of tests/rxe/run_all.sh in turn (ctest rdma.guest,
# rdma.guest_2, ...: tests/rdma.cmake's ING_RXE_BOOTS; make fault's power-loss run). The
# guest gets what its batches need: 4 vCPUs and 3 GiB when smp4 is among them; two NUMA
# nodes of 4 vCPUs each and two NICs (each with its rxe device, on its own subnet) when
# rails is (RXE_VM_SMP / RXE_VM_MEM / RXE_VM_NUMA / RXE_VM_NICS set by the caller win).
# Why 4 vCPUs a node: smp4's tests run on cpus 0-3 with one rail, which the plan places on
# node 0 (rxe has no NUMA node); with 2 a node their lcores 2-3 would be remote and the
# NUMA-local-first placement would leave them idle. So smp4 runs there as in a one-node
# 4-vCPU guest (its nodes name their rail, --rdma-dev $RXE_DEV; node 1's cpus stay idle),
# and the rails test gets its two nodes. run_all.sh's batch_needs checks what each batch
# needs. Each batch's verdict
# lands in BUILD_DIR/rxe-results/<batch>/{summary,rc} and its tests' logs in
# BUILD_DIR/rxe-results/<batch>/<test>/; tests/rxe/batch_result.sh turns one batch into
# one ctest (rdma.rxe, rdma.rxe_smp4, rdma.rails, fault.powerloss).
# Exit status: 0 when the guest booted and every batch reached a verdict (passed or not:
# the batch's own ctest reports it), else the harness's (125: no boot, with the console
# tail). RXE_VM_TIMEOUT (default 3600 s) only catches a hung guest: run_all.sh stops a test
# that makes no progress long before.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
BUILD=$(cd "${1:?usage: guest.sh BUILD_DIR BATCH...}" && pwd)
shift
[ $# -gt 0 ] || { echo "usage: guest.sh BUILD_DIR BATCH..." >&2; exit 2; }
RES=$BUILD/rxe-results
for b in "$@"; do rm -rf "${RES:?}/$b"; done
mkdir -p "$RES"
smp=2 mem=2048 numa=1 nics=1
for b in "$@"; do
	case $b in
	smp4) smp=4 mem=3072 ;;
	rails) smp=8 mem=3072 numa=2 nics=2 ;;
	esac
done
RXE_VM_SMP=${RXE_VM_SMP:-$smp} RXE_VM_MEM=${RXE_VM_MEM:-$mem} RXE_VM_TIMEOUT=${RXE_VM_TIMEOUT:-3600} \
RXE_VM_NUMA=${RXE_VM_NUMA:-$numa} RXE_VM_NICS=${RXE_VM_NICS:-$nics} \
RXE_VM_RW=$RES ING_SRC_DIR=$SRC ING_BUILD_DIR=$BUILD ING_RXE_RESULTS=$RES \
	"$SRC/deploy/rxe-vm/run-in-rxe-vm.sh" "$HERE/run_all.sh" "$@"
rc=$?
for b in "$@"; do
	[ -s "$RES/$b/rc" ] || { echo "guest.sh: batch $b reached no verdict (harness exit $rc)"; exit $((rc ? rc : 1)); }
done
exit 0
