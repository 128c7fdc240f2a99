#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# rails: one ingestd, two rails (docs/ARCHITECTURE.md "Rails"), in the guest booted with two
# NUMA nodes and two NICs (RXE_VM_NUMA=2 RXE_VM_NICS=2 RXE_VM_SMP=4 RXE_VM_MEM=3072; run it
# by hand with deploy/rxe-vm/README.md's command, ING_RXE_ONLY=rails). Real processes,
# real verbs; what is checked is read from the kernel, not from what ingestd says:
#  1. ingestd --rdma-dev 'rxe0@0, rxe1@1' (the kernel gives rxe no NUMA node: the operator
#     says it), --rdma on: both rails listen, each on its own address;
#  2. placement: each pool region's pages are bound to and lie on its rail's node
#     (/proc/PID/numa_maps: bind:N and only N<N>= pages, on hugepages reserved per node);
#     each rail's poller thread is pinned to one cpu of its rail's node, the control thread
#     to node 0's (/proc/PID/task/*/status Cpus_allowed_list, /sys/devices/system/node);
#  3. frames over each rail with the single-device producer: ingest-send --rdma-dev rxe0
#     dialling the node on rail 0's network, then --rdma-dev rxe1 on rail 1's: RDMA READ on
#     both, RDMA WRITE push on rail 1; each session accepted on its own rail's lcore, each
#     rail's lcore (Stats, on its node) carried exactly its rail's frames and failed none;
#     the gRPC fallback beside them; every stored frame byte for byte (ingest-verify);
#  4. SIGTERM: exit 0, every slot back first.
# Outside that boot it says NOT RUN (exit 77) on a line of its own: its real part, the second
# NUMA node and NIC, is not there.
# rxe-timeout: 600
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
step() { echo "== [${SECONDS}s] $*"; }
: "${ING_BUILD_DIR:?}" "${ING_RXE_TMP:?}" "${ING_RXE_OUT:?}"
if [ "${RXE_NUMA:-1}" -lt 2 ] || [ "${RXE_NICS:-1}" -lt 2 ]; then
	echo "NOT RUN: needs the guest with two NUMA nodes and two NICs (RXE_VM_NUMA=2 RXE_VM_NICS=2" \
		"RXE_VM_SMP=4 RXE_VM_MEM=3072); this one has ${RXE_NUMA:-1} node(s), ${RXE_NICS:-1} NIC(s)"
	exit 77
fi
B=$ING_BUILD_DIR
T=$ING_RXE_TMP
OUT=$ING_RXE_OUT
INGESTD=$B/apps/ingestd SEND=$B/apps/ingest-send VERIFY=$B/apps/ingest-verify STATS=$B/tests/rxe_stats
TOPO=$B/apps/ingest-topo
ing_need_built "$INGESTD" "$SEND" "$VERIFY" "$STATS" "$TOPO"
PID=
trap ing_kill_pid EXIT
fail() {
	echo "FAIL: $*"
	echo "--- ingestd log (tail) ---"
	tail -n 60 "$OUT/ingestd.log" 2>/dev/null || true
	exit 1
}
read -r -a DEVS <<<"$RXE_DEVS"
read -r -a IPS <<<"$RXE_IPS"
read -r -a NODES <<<"$RXE_DEV_NODES"
RAILS="${DEVS[0]}@${NODES[0]}, ${DEVS[1]}@${NODES[1]}"
cpus_of_node() { cat "/sys/devices/system/node/node$1/cpulist"; }
# in_list CPU LIST ("0-1,4"): whether the cpu is in the list
in_list() {
	local c=$1 part a b
	IFS=, read -r -a parts <<<"$2"
	for part in "${parts[@]}"; do
		a=${part%-*} b=${part#*-}
		[ "$c" -ge "$a" ] && [ "$c" -le "$b" ] && return 0
	done
	return 1
}
echo "guest: $RXE_NUMA NUMA nodes (node 0 cpus $(cpus_of_node 0), node 1 cpus $(cpus_of_node 1)), NICs: $RXE_DEVS on $RXE_NETDEVS, $RXE_IPS"
for d in "${DEVS[@]}"; do
	echo "$d: the kernel's NUMA node: $(cat /sys/class/infiniband/$d/device/numa_node 2>/dev/null || echo 'none (no parent device)')"
done

step "each node's own hugepages for its pool region"
POOL=1M:16,4M:8   # 48 MiB a region: 24 pages of 2 MiB on each node
for n in 0 1; do
	hp=/sys/devices/system/node/node$n/hugepages/hugepages-2048kB
	free=$(cat "$hp/free_hugepages")
	[ "$free" -ge 24 ] || echo $(( $(cat "$hp/nr_hugepages") + 24 - free )) >"$hp/nr_hugepages"
	echo "node $n: $(cat "$hp/free_hugepages") of $(cat "$hp/nr_hugepages") hugepages free"
done

step "the plan: ingest-topo --rdma-dev '$RAILS'"
"$TOPO" --rdma-dev "$RAILS" --workers 1 | tee "$OUT/topo.txt"
grep -q "rail 1        : ${DEVS[1]} netdev .*, node ${NODES[1]} (rdma-dev override)" "$OUT/topo.txt" ||
	fail "ingest-topo does not place ${DEVS[1]} on node ${NODES[1]}"

step "ingestd with both rails"
ing_start "$INGESTD" "$T/port" "$OUT/ingestd.log" --listen 0.0.0.0:0 --data-dir "$T/data" \
	--rdma-dev "$RAILS" --pool "$POOL" --hugepages on --workers 1 --credits 8 --rdma on \
	--poll-mode adaptive --log-level info
PID=$ING_PID
PORT=${ING_SERVER##*:}
grep -E "rail [01]: RDMA listener|pool: |region [01] class|worker placement|plan: rail" "$OUT/ingestd.log"
for r in 0 1; do
	grep -q "rail $r: RDMA listener on ${IPS[$r]}:[0-9]* (device ${DEVS[$r]}, node ${NODES[$r]} as placed, pool region $r node ${NODES[$r]} registered" \
		"$OUT/ingestd.log" || fail "rail $r does not listen on ${IPS[$r]} with ${DEVS[$r]} and region $r"
done

step "the kernel: each region's pages on its node (numa_maps)"
: >"$OUT/numa_maps"
for r in 0 1; do
	n=${NODES[$r]}
	addrs=$(sed -n "s/.* region $r class [0-9]*: .* at 0x\([0-9a-f]*\) (.*/\1/p" "$OUT/ingestd.log")
	[ "$(wc -w <<<"$addrs")" = 2 ] || fail "region $r: not two class mappings in the log ($addrs)"
	for a in $addrs; do
		line=$(grep "^$a " "/proc/$PID/numa_maps") || fail "region $r: mapping $a not in numa_maps"
		echo "region $r (node $n): $line" | tee -a "$OUT/numa_maps"
		grep -q " bind:$n " <<<"$line" || fail "region $r mapping $a is not bound to node $n"
		grep -q " huge " <<<"$line" || fail "region $r mapping $a is not on hugepages"
		grep -q " N$n=" <<<"$line" || fail "region $r mapping $a has no page on node $n"
		other=$(grep -o ' N[0-9]*=' <<<"$line" | grep -v " N$n=" || true)
		[ -z "$other" ] || fail "region $r mapping $a has pages on another node:$other"
	done
done

step "the kernel: each rail's poller pinned on its node, control on node 0"
: >"$OUT/threads"
for t in /proc/$PID/task/*; do
	echo "$(cat "$t/comm") $(sed -n 's/^Cpus_allowed_list:\s*//p' "$t/status")" >>"$OUT/threads"
done
cat "$OUT/threads"
for r in 0 1; do
	lc=$(sed -n "s/.*rail $r: RDMA listener .* 1 poller(s) on lcore(s) \([0-9]*\),.*/\1/p" "$OUT/ingestd.log")
	[ -n "$lc" ] || fail "rail $r: its lcore is not in the log"
	cpus=$(awk -v l="$lc" '$1 ~ ("worker-?" l "$") { print $2 }' "$OUT/threads")
	[ -n "$cpus" ] || fail "rail $r: no EAL worker thread for lcore $lc"
	[ "$cpus" = "$lc" ] || fail "rail $r: lcore $lc's thread may run on cpus $cpus, not just $lc"
	in_list "$lc" "$(cpus_of_node "${NODES[$r]}")" || fail "rail $r: lcore $lc is not on node ${NODES[$r]}"
	echo "rail $r (${DEVS[$r]}): lcore $lc pinned to cpu $cpus, node ${NODES[$r]} (cpus $(cpus_of_node "${NODES[$r]}"))"
	eval "LCORE_$r=$lc"
done
main=$(sed -n 's/^Cpus_allowed_list:\s*//p' "/proc/$PID/status")
in_list "${main%%[,-]*}" "$(cpus_of_node 0)" || fail "the control thread runs on $main, not on node 0"
grep "worker placement" "$OUT/ingestd.log"

step "frames over rail 0: ingest-send --rdma-dev ${DEVS[0]} to ${IPS[0]} (READ)"
send() {   # send TAG RAIL TRANSPORT COUNT SIZES: one producer on rail RAIL's network
	local tag=$1 r=$2 xp=$3 count=$4 sizes=$5 dev=()
	[ "$xp" = grpc ] || dev=(--rdma-dev "${DEVS[$r]}")
	timeout 300 "$SEND" --server "${IPS[$r]}:$PORT" "${dev[@]}" --transport "$xp" --count "$count" \
		--sizes "$sizes" --credits 4 --seed "$r$count" --first-id 1 --wafer "RAILS-$tag" \
		--manifest "$T/m-$tag" --json --quiet >"$T/$tag.json" 2>"$T/$tag.err" ||
		fail "$tag: ingest-send exited $? ($(cat "$T/$tag.json") $(tail -n 3 "$T/$tag.err"))"
	cat "$T/$tag.json"; echo
	[ "$(jget "$T/$tag.json" ok)" = "$count" ] && [ "$(jget "$T/$tag.json" failed)" = 0 ] ||
		fail "$tag: not $count of $count frames ok"
	[ "$(jget "$T/$tag.json" transport)" = "$xp" ] || fail "$tag: transport $(jget "$T/$tag.json" transport), not $xp"
}
send r0 0 rdma 24 64K-4M
step "frames over rail 1: ingest-send --rdma-dev ${DEVS[1]} to ${IPS[1]} (READ, then WRITE push)"
send r1 1 rdma 24 64K-4M
send w1 1 rdma-write 12 64K-4M
step "the gRPC fallback beside them"
send g 0 grpc 8 64K-1M

step "each session on its own rail's lcore; each lcore carried its rail's frames"
for tag in r0:0 r1:1 w1:1; do
	t=${tag%:*} r=${tag#*:}
	sid=$(jget "$T/$t.json" session_id)
	lc=$(eval echo "\$LCORE_$r")
	grep -q "session $sid accepted on lcore $lc (.*; rail $r ${DEVS[$r]};" "$OUT/ingestd.log" ||
		fail "$t: session $sid not accepted on rail $r's lcore $lc ($(grep "session $sid accepted" "$OUT/ingestd.log"))"
	echo "$t: session $sid on rail $r (${DEVS[$r]}), lcore $lc"
done
timeout 60 "$STATS" "127.0.0.1:$PORT" >"$T/stats" || fail "Stats: no answer"
sv() { awk -v k="$1" '$1 == k { print $2 }' "$T/stats"; }
[ "$(sv lcores)" = 2 ] || fail "Stats lists $(sv lcores) lcores, not 2"
for i in 0 1; do
	lc=$(sv "lcore.$i.lcore") node=$(sv "lcore.$i.numaNode") got=$(sv "lcore.$i.framesReceived")
	echo "lcore $lc (node $node): $got frames, $(sv "lcore.$i.bytesReceived") bytes, $(sv "lcore.$i.framesFailed") failed"
	[ "$(sv "lcore.$i.framesFailed")" = 0 ] || fail "lcore $lc failed frames"
	if [ "$lc" = "$LCORE_0" ]; then want=24 wnode=${NODES[0]}; else want=36 wnode=${NODES[1]}; fi
	[ "$got" = "$want" ] || fail "lcore $lc carried $got frames, not its rail's $want"
	[ "$node" = "$wnode" ] || fail "lcore $lc reports node $node, not $wnode"
done

step "every stored frame byte for byte (ingest-verify)"
{ head -n 1 "$T/m-r0"; for m in r0 r1 w1 g; do grep -v '^#' "$T/m-$m"; done; } >"$T/m-all"
timeout 300 "$VERIFY" --data-dir "$T/data" --manifest "$T/m-all" ||
	fail "ingest-verify: stored frames not byte for byte what was sent"
echo "$(grep -vc '^#' "$T/m-all") frames verified"

step "every slot back, then SIGTERM: exit 0"
for _ in $(seq 1 300); do
	timeout 60 "$STATS" "127.0.0.1:$PORT" >"$T/stats" || fail "Stats: no answer"
	[ "$(sv poolSlotsFree)" = "$(sv poolSlotsTotal)" ] && break
	sleep 0.2
done
[ "$(sv poolSlotsFree)" = "$(sv poolSlotsTotal)" ] || fail "slots not back: $(sv poolSlotsFree) of $(sv poolSlotsTotal)"
[ "$(sv poolSlotsTotal)" = 48 ] || fail "the pool has $(sv poolSlotsTotal) slots, not 2 regions x 24"
ing_term_pid
echo "rails: OK"
