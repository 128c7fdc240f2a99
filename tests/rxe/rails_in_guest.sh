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
#  4. every rail advertised and observed (issue #26 item 2, the node's side; the rails_*
#     functions below): Negotiate lists both rails (address, port, node, state UP) and
#     gives a session the rail it names (that rail's address and port), refuses a name no
#     rail has with the rails there are; that session's rdma_cm connection is accepted on
#     its rail's listener (on its rail's lcore) and refused on the other's; two ingest-send at once, one per rail: each rail's
#     counters (Stats, /metrics ingest_rail_*{rail=...}) carry exactly its share;
#     `ip link set <rail 1's netdev> down`: rail 1 DOWN with why and since when in Stats,
#     /metrics (ingest_rail_up 0), Negotiate (a session naming it refused UNAVAILABLE),
#     ingest-stat and the log, rail 0 still UP; `ip link set up`: rail 1 UP again by itself
#     and carries frames again; a node started with its one rail's link down serves the
#     gRPC fallback and offers RDMA on that rail once the link is up;
#  5. SIGTERM: exit 0, every slot back first;
#  6. striping (prod_striped, a node with --stripe-min 8M): one 64 MiB frame over both
#     rails at once, each rail's byte counter +32 MiB and parts +1, the frame once in one
#     rail's frames (Stats and /metrics), one catalog row, byte for byte;
#  7. striped push (prod_striped_push): the same frame with --transport rdma-write, one
#     grant per part, each rail +32 MiB, 0 failed, one row, one file, byte for byte.
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
TOPO=$B/apps/ingest-topo ISTAT=$B/apps/ingest-stat
ing_need_built "$INGESTD" "$SEND" "$VERIFY" "$STATS" "$TOPO" "$ISTAT"
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
read -r -a NETDEVS <<<"$RXE_NETDEVS"
read -r -a NODES <<<"$RXE_DEV_NODES"
read -r -a NETDEVS <<<"$RXE_NETDEVS"
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
	--poll-mode adaptive --log-level info --metrics-listen 127.0.0.1:0 --metrics-port-file "$T/mport"
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

# ---- every rail advertised and observed (issue #26 item 2, the node's side) ----
# value NAME FILE: the whole value of a "name value" line of rxe_stats (spaces kept)
value() { sed -n "s/^$1 //p" "$2"; }
# metric NAME LABELS: the value in ingestd's /metrics
metric() {
	curl -fsS "http://127.0.0.1:$(tr -dc '0-9' <"$T/mport")/metrics" |
		awk -v k="$1$2" '$1 == k { print $2 }'
}
# poll_until WHAT SECONDS CMD...: CMD until it succeeds (a watchdog, not a timing assertion)
poll_until() {
	local what=$1 secs=$2 i
	shift 2
	for ((i = 0; i < secs * 5; i++)); do
		"$@" && return 0
		sleep 0.2
	done
	fail "$what: not within ${secs} s"
}
rail_state_is() {   # rail_state_is RAIL UP|DOWN: Stats says so (into $T/stats)
	timeout 60 "$STATS" "127.0.0.1:$PORT" >"$T/stats" && [ "$(value "rail.$1.state" "$T/stats")" = "$2" ]
}
MANIFESTS="r0 r1 w1 g"

rails_negotiate() {
	step "Negotiate lists both rails; a session gets the rail it names; a name no rail has is refused"
	timeout 60 "$STATS" "127.0.0.1:$PORT" negotiate >"$T/neg" || fail "Negotiate: no answer"
	cat "$T/neg"
	[ "$(value status "$T/neg")" = 0 ] || fail "Negotiate: status $(value status "$T/neg")"
	[ "$(value rails "$T/neg")" = 2 ] || fail "Negotiate lists $(value rails "$T/neg") rails, not 2"
	local r port
	for r in 0 1; do
		[ "$(value "rail.$r.device" "$T/neg")" = "${DEVS[$r]}" ] &&
			[ "$(value "rail.$r.rdmaAddr" "$T/neg")" = "${IPS[$r]}" ] &&
			[ "$(value "rail.$r.numaNode" "$T/neg")" = "${NODES[$r]}" ] &&
			[ "$(value "rail.$r.state" "$T/neg")" = UP ] && [ -z "$(value "rail.$r.why" "$T/neg")" ] ||
			fail "Negotiate's rail $r is not ${DEVS[$r]} on ${IPS[$r]}, node ${NODES[$r]}, UP"
		port=$(value "rail.$r.rdmaPort" "$T/neg")
		[ "$port" -gt 0 ] || fail "rail $r: no port"
		grep -q "rail $r: RDMA listener on ${IPS[$r]}:$port " "$OUT/ingestd.log" ||
			fail "rail $r: Negotiate says port $port, the listener is elsewhere"
		timeout 60 "$STATS" "127.0.0.1:$PORT" negotiate "${DEVS[$r]}" >"$T/neg$r" || fail "Negotiate: no answer"
		[ "$(value status "$T/neg$r")" = 0 ] && [ "$(value rail "$T/neg$r")" = "${DEVS[$r]}" ] &&
			[ "$(value rdmaAddr "$T/neg$r")" = "${IPS[$r]}" ] && [ "$(value rdmaPort "$T/neg$r")" = "$port" ] ||
			fail "Negotiate naming ${DEVS[$r]}: $(cat "$T/neg$r")"
		echo "rail ${DEVS[$r]} asked: $(value message "$T/neg$r")"
	done
	timeout 60 "$STATS" "127.0.0.1:$PORT" negotiate mlx5_9 >"$T/negx" || fail "Negotiate: no answer"
	echo "rail mlx5_9 asked: $(cat "$T/negx" | tr '\n' ' ')"
	[ "$(value status "$T/negx")" = 3 ] || fail "Negotiate naming no rail of the node: status $(value status "$T/negx"), not INVALID_ARGUMENT"
	grep -q "no rail \"mlx5_9\" on this node; its rails: ${DEVS[0]} (up), ${DEVS[1]} (up)" "$T/negx" ||
		fail "the refusal does not name the node's rails"
}

rails_session_rail() {
	step "a session negotiated for rail 1 connects on rail 1's listener; on rail 0's it is refused, the log names both"
	local p0 p1 sid
	p0=$(value rail.0.rdmaPort "$T/neg") p1=$(value rail.1.rdmaPort "$T/neg")
	timeout 120 "$STATS" "127.0.0.1:$PORT" connect "${DEVS[1]}" "${IPS[1]}:$p1" >"$T/c1" || fail "connect on rail 1: $(cat "$T/c1")"
	sid=$(value session "$T/c1")
	echo "session $sid (rail ${DEVS[1]}) on ${IPS[1]}:$p1: $(value connect "$T/c1")"
	[ "$(value connect "$T/c1")" = ESTABLISHED ] || fail "session $sid of rail 1 not accepted on rail 1's listener"
	grep -q "session $sid accepted on lcore $LCORE_1 (.*; rail 1 ${DEVS[1]};" "$OUT/ingestd.log" ||
		fail "session $sid not on rail 1's lcore $LCORE_1"
	timeout 120 "$STATS" "127.0.0.1:$PORT" connect "${DEVS[1]}" "${IPS[0]}:$p0" >"$T/c0" || fail "connect on rail 0: $(cat "$T/c0")"
	sid=$(value session "$T/c0")
	echo "session $sid (rail ${DEVS[1]}) on ${IPS[0]}:$p0: $(value connect "$T/c0")"
	[ "$(value connect "$T/c0")" = REJECTED ] || fail "session $sid of rail 1 not refused on rail 0's listener"
	grep "connect request (session $sid) rejected: session negotiated rail 1 (${DEVS[1]}), its connection came in on rail 0 (${DEVS[0]})" \
		"$OUT/ingestd.log" || fail "no log line naming the rail negotiated and the rail connected"
}

rails_share() {
	step "two ingest-send at once, ${DEVS[0]} and ${DEVS[1]}: each rail's counters carry its share"
	timeout 60 "$STATS" "127.0.0.1:$PORT" >"$T/stats.before" || fail "Stats: no answer"
	send p0 0 rdma 16 64K-2M >"$T/p0.out" 2>&1 &
	local a=$!
	send p1 1 rdma 20 64K-2M >"$T/p1.out" 2>&1 &
	local b=$!
	wait "$a" || fail "p0: $(cat "$T/p0.out")"
	wait "$b" || fail "p1: $(cat "$T/p1.out")"
	MANIFESTS+=" p0 p1"
	timeout 60 "$STATS" "127.0.0.1:$PORT" >"$T/stats" || fail "Stats: no answer"
	[ "$(value rails "$T/stats")" = 2 ] || fail "Stats lists $(value rails "$T/stats") rails, not 2"
	local r tag want got gotb wantb m
	for r in 0 1; do
		tag=p$r want=$((16 + 4 * r))
		got=$(($(value "rail.$r.framesReceived" "$T/stats") - $(value "rail.$r.framesReceived" "$T/stats.before")))
		gotb=$(($(value "rail.$r.bytesReceived" "$T/stats") - $(value "rail.$r.bytesReceived" "$T/stats.before")))
		wantb=$(jget "$T/$tag.json" bytes)
		echo "rail $r (${DEVS[$r]}): +$got frames, +$gotb bytes (its ingest-send: $want frames, $wantb bytes)," \
			"$(value "rail.$r.framesFailed" "$T/stats") failed, $(value "rail.$r.completionErrors" "$T/stats") completion errors"
		[ "$got" = "$want" ] && [ "$gotb" = "$wantb" ] || fail "rail $r carried $got frames / $gotb bytes, not its producer's $want / $wantb"
		[ "$(value "rail.$r.framesFailed" "$T/stats")" = 0 ] && [ "$(value "rail.$r.completionErrors" "$T/stats")" = 0 ] ||
			fail "rail $r failed frames or had error completions"
		m=$(metric ingest_rail_frames_total "{rail=\"${DEVS[$r]}\",index=\"$r\"}")
		[ "$m" = "$(value "rail.$r.framesReceived" "$T/stats")" ] || fail "/metrics: rail $r frames $m, Stats $(value "rail.$r.framesReceived" "$T/stats")"
		m=$(metric ingest_rail_bytes_total "{rail=\"${DEVS[$r]}\",index=\"$r\"}")
		[ "$m" = "$(value "rail.$r.bytesReceived" "$T/stats")" ] || fail "/metrics: rail $r bytes $m, Stats $(value "rail.$r.bytesReceived" "$T/stats")"
		[ "$(metric ingest_rail_up "{rail=\"${DEVS[$r]}\",index=\"$r\"}")" = 1 ] || fail "/metrics: rail $r not up"
	done
}

rails_link_down_up() {
	local nd=${NETDEVS[1]} dev=${DEVS[1]}
	step "ip link set $nd down: rail 1 ($dev) down with why and since when, rail 0 serves"
	ip link set "$nd" down
	poll_until "rail 1 DOWN in Stats" 60 rail_state_is 1 DOWN
	grep '^rail\.' "$T/stats"
	local why
	why=$(value rail.1.why "$T/stats")
	[[ "$why" == "link down (port 1: "* ]] || fail "rail 1's why: '$why'"
	[ "$(value rail.1.downSinceUnixMs "$T/stats")" -gt 0 ] && [ "$(value rail.1.downs "$T/stats")" -ge 1 ] ||
		fail "rail 1: no since-when or downs count"
	[ "$(value rail.0.state "$T/stats")" = UP ] || fail "rail 0 went down with rail 1"
	[ "$(metric ingest_rail_up "{rail=\"$dev\",index=\"1\"}")" = 0 ] || fail "/metrics: rail 1 not 0"
	[ "$(metric ingest_rail_up "{rail=\"${DEVS[0]}\",index=\"0\"}")" = 1 ] || fail "/metrics: rail 0 not 1"
	grep -E "rail 1 \($dev\): down: link down \(port 1: (IBV_EVENT_PORT_ERR|ibv_query_port state [A-Za-z_]+)\), since [0-9:]+ UTC" "$OUT/ingestd.log" ||
		fail "no log line naming rail 1, why and since when"
	timeout 60 "$STATS" "127.0.0.1:$PORT" negotiate "$dev" >"$T/negd" || fail "Negotiate: no answer"
	echo "rail $dev asked while down: $(tr '\n' ' ' <"$T/negd")"
	[ "$(value status "$T/negd")" = 14 ] && grep -q "rail \"$dev\" is down (link down" "$T/negd" ||
		fail "Negotiate naming the down rail: not UNAVAILABLE with why"
	timeout 60 "$STATS" "127.0.0.1:$PORT" negotiate >"$T/neg" || fail "Negotiate: no answer"
	[ "$(value rail "$T/neg")" = "${DEVS[0]}" ] && [ "$(value rail.1.state "$T/neg")" = DOWN ] ||
		fail "Negotiate without a rail while rail 1 is down: $(tr '\n' ' ' <"$T/neg")"
	timeout 60 "$ISTAT" --server "127.0.0.1:$PORT" --sample 0 >"$T/istat" || fail "ingest-stat exited $?"
	grep "rail     " "$T/istat"
	grep -q "rail     1 $dev ${IPS[1]}:[0-9]* node ${NODES[1]}, .*: DOWN since [0-9:]* ([0-9.]* s): link down" "$T/istat" ||
		fail "ingest-stat does not show rail 1 down"

	step "ip link set $nd up: rail 1 up again by itself, and it carries frames"
	ip link set "$nd" up
	poll_until "rail 1 UP again in Stats" 60 rail_state_is 1 UP
	[ -z "$(value rail.1.why "$T/stats")" ] || fail "rail 1 up with a why"
	[ "$(metric ingest_rail_up "{rail=\"$dev\",index=\"1\"}")" = 1 ] || fail "/metrics: rail 1 not back to 1"
	grep -E "rail 1 \($dev\): up again" "$OUT/ingestd.log" || fail "no log line of rail 1 back"
	local before
	before=$(value rail.1.framesReceived "$T/stats")
	send a1 1 rdma 6 64K-1M
	MANIFESTS+=" a1"
	timeout 60 "$STATS" "127.0.0.1:$PORT" >"$T/stats" || fail "Stats: no answer"
	[ $(($(value rail.1.framesReceived "$T/stats") - before)) = 6 ] || fail "rail 1 did not carry the 6 frames after its return"
}

rails_link_down_at_start() {
	local nd=${NETDEVS[1]} dev=${DEVS[1]} PORT
	step "a node whose one rail ($dev) has its link down at start: the gRPC fallback, RDMA once the link is up"
	ip link set "$nd" down
	ing_start "$INGESTD" "$T/port2" "$OUT/ingestd-linkdown.log" --listen 0.0.0.0:0 --data-dir "$T/data2" \
		--rdma-dev "$dev@${NODES[1]}" --pool 1M:4 --workers 1 --rdma auto --poll-mode adaptive --log-level info
	PID=$ING_PID
	PORT=${ING_SERVER##*:}
	timeout 60 "$STATS" "127.0.0.1:$PORT" >"$T/stats" || fail "Stats: no answer"
	grep -E '^(rail\.0\.(state|why)|transportNote) ' "$T/stats"
	[ "$(value rail.0.state "$T/stats")" = DOWN ] && [ "$(value rail.0.why "$T/stats")" = "link down (port 1 not ACTIVE at start)" ] ||
		fail "the rail is not DOWN with its link's why"
	[ "$(value transportNote "$T/stats")" = "rdma: RDMA link down; fallback active" ] || fail "no fallback note"
	timeout 60 "$STATS" "127.0.0.1:$PORT" negotiate >"$T/negs" || fail "Negotiate: no answer"
	[ "$(value transport "$T/negs")" = 2 ] || fail "RDMA offered on a rail whose link is down: $(tr '\n' ' ' <"$T/negs")"
	ip link set "$nd" up
	poll_until "the rail UP once its link is" 60 rail_state_is 0 UP
	timeout 60 "$STATS" "127.0.0.1:$PORT" negotiate >"$T/negs" || fail "Negotiate: no answer"
	echo "after ip link set up: $(value message "$T/negs")"
	[ "$(value transport "$T/negs")" = 1 ] && [ "$(value rail "$T/negs")" = "$dev" ] ||
		fail "RDMA not offered once the link is up: $(tr '\n' ' ' <"$T/negs")"
	ing_term_pid
}

rails_negotiate
rails_session_rail
rails_share
rails_link_down_up

step "every stored frame byte for byte (ingest-verify)"
{ head -n 1 "$T/m-r0"; for m in $MANIFESTS; do grep -v '^#' "$T/m-$m"; done; } >"$T/m-all"
timeout 300 "$VERIFY" --data-dir "$T/data" --manifest "$T/m-all" ||
	fail "ingest-verify: stored frames not byte for byte what was sent"
echo "$(grep -vc '^#' "$T/m-all") frames verified"

# ---- the multi-rail producer (issue 26 items 3-4): libingest over every rail it reaches,
# a rail lost costs no frame. Each step is its own function (the node's checks go beside
# them); they use the ingestd above ($PORT, $T/data) and rail 0's address for gRPC.
# rail_of TAG DEV FIELD: FIELD of rail DEV (its device or local_device) in ingest-send TAG's
# one-line --json summary, "rails" list ("" if none). awk, not python: a python start costs
# 10-20 s in the TCG guest, and this ran ~15 times a batch (the rails batch's unexplained
# 50-100 s per two-device step). The rails' objects are flat and their strings hold no '"'.
rail_of() {
	awk -v dev="$2" -v k="\"$3\":" '{
		i = index($0, "\"rails\":["); if (!i) exit
		s = substr($0, i + 9); e = index(s, "}]"); if (e) s = substr(s, 1, e)
		n = split(s, r, /\},\{/)
		for (j = 1; j <= n; j++) {
			if (index(r[j], "\"device\":\"" dev "\"") == 0 && index(r[j], "\"local_device\":\"" dev "\"") == 0) continue
			p = index(r[j], k); if (!p) exit
			v = substr(r[j], p + length(k))
			if (substr(v, 1, 1) == "\"") { v = substr(v, 2); sub(/".*/, "", v) } else sub(/[,}].*/, "", v)
			print v; exit
		}
	}' "$T/$1.json"
}
# msend TAG COUNT SIZES [ingest-send args]: a producer given rail 0's gRPC address, every
# local device unless the args say; fails unless every frame is DURABLE
msend() {
	local tag=$1 count=$2 sizes=$3
	shift 3
	timeout 900 "$SEND" --server "${IPS[0]}:$PORT" --count "$count" --sizes "$sizes" --credits 8 \
		--seed "7$count" --first-id 1 --wafer "MR-$tag" --manifest "$T/m-$tag" --json "$@" \
		>"$T/$tag.json" 2>"$T/$tag.err" ||
		fail "$tag: ingest-send exited $? ($(cat "$T/$tag.json") $(tail -n 5 "$T/$tag.err"))"
	cat "$T/$tag.json"; echo
	[ "$(jget "$T/$tag.json" ok)" = "$count" ] && [ "$(jget "$T/$tag.json" failed)" = 0 ] ||
		fail "$tag: not $count of $count frames ok ($(tail -n 5 "$T/$tag.err"))"
}
# stored_once TAG COUNT: the node holds each frame of TAG once (catalog rows, frame files)
# and byte for byte (ingest-verify)
stored_once() {
	local tag=$1 count=$2 rows files
	rows=$(sqlite3 "file:$T/data/catalog.db?mode=ro" "SELECT count(*) FROM frames WHERE wafer_id = 'MR-$tag'")
	files=$(find "$T/data/frames/MR-$tag" -name '*.frame' | wc -l)
	[ "$rows" = "$count" ] || fail "$tag: $rows catalog rows for $count frames"
	[ "$files" = "$count" ] || fail "$tag: $files frame files for $count frames"
	timeout 300 "$VERIFY" --data-dir "$T/data" --manifest "$T/m-$tag" ||
		fail "$tag: stored frames not byte for byte what was sent"
	echo "$tag: $count frames stored once each ($rows rows, $files files), byte for byte"
}
# lcore_frames RAIL: frames received by rail RAIL's lcore (node Stats)
lcore_frames() {
	local lc i
	lc=$(eval echo "\$LCORE_$1")
	timeout 60 "$STATS" "127.0.0.1:$PORT" >"$T/stats" || fail "Stats: no answer"
	for i in 0 1; do
		[ "$(sv "lcore.$i.lcore")" = "$lc" ] && { sv "lcore.$i.framesReceived"; return; }
	done
	fail "no lcore $lc in Stats"
}

# 20 frames of 256K-2M a transport (was 40 of 256K-4M: 228 s of a 945 s batch at load 10-25
# under TCG): the first frames in flight already go to both rails (fewest bytes in flight),
# and 2M frames still take more than one READ/WRITE chunk; every check is the same.
prod_rails_spread() {
	step "producer over both rails: frames spread by bytes in flight, READ and WRITE, byte-exact"
	local a0 a1 tag xp n0 n1 n=20
	for xp in rdma rdma-write; do
		tag=sp-$xp
		a0=$(lcore_frames 0) a1=$(lcore_frames 1)
		msend "$tag" "$n" 256K-2M --transport "$xp"
		n0=$(rail_of "$tag" "${DEVS[0]}" frames) n1=$(rail_of "$tag" "${DEVS[1]}" frames)
		[ -n "$n0" ] && [ -n "$n1" ] ||
			fail "$tag: the producer did not use both rails (its rails: $(grep -o '"rails":\[[^]]*\]' "$T/$tag.json"); $(grep -i rail "$T/$tag.err" | head -n 3))"
		[ "$n0" -gt 0 ] && [ "$n1" -gt 0 ] && [ $((n0 + n1)) = "$n" ] ||
			fail "$tag: rails carried $n0 + $n1 frames, not a share each of $n"
		[ "$(rail_of "$tag" "${DEVS[1]}" local_device)" = "${DEVS[1]}" ] ||
			fail "$tag: rail ${DEVS[1]} not reached through the local ${DEVS[1]}"
		[ $(( $(lcore_frames 0) - a0 )) = "$n0" ] && [ $(( $(lcore_frames 1) - a1 )) = "$n1" ] ||
			fail "$tag: the node's rail lcores did not carry what the producer sent over each rail"
		echo "$tag: rail ${DEVS[0]} $n0 frames, rail ${DEVS[1]} $n1 frames (node lcores agree)"
		stored_once "$tag" "$n"
	done
}

# prod_rail_lost HOW: a rail lost mid-stream and back (HOW: link = ip link down/up of its
# netdev, dev = rdma link delete/add of its device), under ONE running producer: 0 failed,
# each frame stored once (catalog rows, files, ingest-verify against the producer's source
# data), the producer says which rail, why and when it came back, and that producer's new
# session on the rail carries frames again (the node's rail-1 lcore counts them). Figures:
# time from the loss to its frames in flight moved (the producer's log line against the
# clock read just before the loss), frames moved, failed, stored twice.
# ingest-send is paced and open-ended (--count far beyond the step), stopped with SIGTERM
# once the rail carried frames after its return: it drains (no new frame, those in flight
# finish) and reports the ones never sent as not_sent, so no verdict waits on a duration.
tod() { awk -F: '{ printf "%.3f", $1 * 3600 + $2 * 60 + $3 }' <<<"$1"; }   # HH:MM:SS.mmm -> s
prod_rail_lost() {
	local how=$1 tag=lost-$1 nd=${NETDEVS[1]} dev=${DEVS[1]} spid i a1 t0 line moved secs sess back rc
	step "rail $dev lost mid-stream ($how) and back, one running producer: no frame lost, none stored twice"
	"$SEND" --server "${IPS[0]}:$PORT" --count 100000 --sizes 64K-256K --credits 8 --rate 8 \
		--seed 71 --first-id 1 --wafer "MR-$tag" --manifest "$T/m-$tag" --json --transport rdma \
		--log-level info >"$T/$tag.json" 2>"$T/$tag.err" &
	spid=$!
	a1=$(lcore_frames 1)
	for i in $(seq 1 600); do [ $(( $(lcore_frames 1) - a1 )) -ge 4 ] && break; sleep 0.5; done
	[ $(( $(lcore_frames 1) - a1 )) -ge 4 ] || fail "$tag: rail $dev carries no frames before the loss"
	t0=$(date +%T.%3N)
	if [ "$how" = link ]; then
		ip link set "$nd" down
	else
		# bounded: the kernel removes an rxe device only once every process let go of it
		timeout 120 rdma link delete "$dev" >"$T/$tag.rdma" 2>&1 ||
			fail "$tag: rdma link delete $dev: exit $? ($(cat "$T/$tag.rdma"))"
	fi
	echo "$tag: $how of $dev taken down at $t0"
	for i in $(seq 1 600); do grep -q "rail $dev (via .*) down: " "$T/$tag.err" && break; sleep 0.2; done
	line=$(grep -m 1 "rail $dev (via .*) down: " "$T/$tag.err") ||
		{ cp "$T/$tag.err" "$OUT/$tag.err"; fail "$tag: the producer never said rail $dev went down"; }
	echo "$line"
	moved=$(grep "rail $dev (via .*) down: " "$T/$tag.err" |
		sed -n 's/.*; \([0-9]*\) frame(s) in flight on it moved.*/\1/p' | awk '{ n += $1 } END { print n + 0 }')
	secs=$(awk -v a="$(tod "$t0")" -v b="$(tod "${line%% *}")" 'BEGIN { d = b - a; if (d < 0) d += 86400; printf "%.3f", d }')
	if [ "$how" = link ]; then
		ip link set "$nd" up
	else
		timeout 120 rdma link add "$dev" type rxe netdev "$nd" >"$T/$tag.rdma" 2>&1 ||
			fail "$tag: rdma link add $dev type rxe netdev $nd: exit $? ($(cat "$T/$tag.rdma"))"
	fi
	for i in $(seq 1 600); do grep -q "rail $dev is back" "$T/$tag.err" && break; sleep 0.5; done
	grep "rail $dev is back" "$T/$tag.err" ||
		{ cp "$T/$tag.err" "$OUT/$tag.err"; fail "$tag: rail $dev not back ($(grep "rail $dev" "$T/$tag.err" | tail -n 3))"; }
	sess=$(grep -m 1 -o "rail $dev is back (via [^,]*, session [0-9]*" "$T/$tag.err" | grep -o '[0-9]*$')
	kill -0 "$spid" 2>/dev/null || fail "$tag: ingest-send ended by itself ($(tail -n 3 "$T/$tag.err"))"
	back=$(lcore_frames 1)
	for i in $(seq 1 600); do [ $(( $(lcore_frames 1) - back )) -ge 3 ] && break; sleep 0.5; done
	[ $(( $(lcore_frames 1) - back )) -ge 3 ] || fail "$tag: rail $dev carried no frame after its return"
	grep -q "session $sess accepted on lcore $LCORE_1 (.*; rail 1 $dev;" "$OUT/ingestd.log" ||
		fail "$tag: the producer's session $sess after the return is not on rail 1's lcore $LCORE_1"
	kill -TERM "$spid"
	wait "$spid" && rc=0 || rc=$?
	cp "$T/$tag.err" "$OUT/$tag.err"
	cat "$T/$tag.json"; echo
	local sent ok failed
	sent=$(( $(jget "$T/$tag.json" frames) - $(jget "$T/$tag.json" not_sent) ))
	ok=$(jget "$T/$tag.json" ok) failed=$(jget "$T/$tag.json" failed)
	[ "$failed" = 0 ] && [ "$ok" = "$sent" ] && [ "$sent" -gt 0 ] ||
		fail "$tag: $ok of $sent frames sent ok, $failed failed (ingest-send exit $rc)"
	[ "$(rail_of "$tag" "$dev" downs)" -ge 1 ] || fail "$tag: rail $dev never counted down"
	moved=$(grep "rail $dev (via .*) down: " "$T/$tag.err" |
		sed -n 's/.*; \([0-9]*\) frame(s) in flight on it moved.*/\1/p' | awk '{ n += $1 } END { print n + 0 }')
	[ "$(rail_of "$tag" "$dev" moved_away)" = "$moved" ] ||
		fail "$tag: rail $dev moved_away $(rail_of "$tag" "$dev" moved_away), its log line says $moved"
	stored_once "$tag" "$sent"
	echo "$tag figures: rail $dev lost ($how) -> its $moved frame(s) in flight moved to rail ${DEVS[0]} in $secs s;" \
		"$sent frames sent, $ok ok, $failed failed, stored twice 0 ($sent rows, $sent files);" \
		"back as session $sess, which carried $(( $(lcore_frames 1) - back )) frame(s) on rail 1 after the return"
}

# a producer with one device and the node with two: the rail they share
prod_one_device() {
	step "producer with ${DEVS[0]} only, node with two rails: every frame over the rail they share"
	msend one-dev 16 256K-2M --transport rdma --rdma-dev "${DEVS[0]}"
	[ "$(rail_of one-dev "${DEVS[0]}" frames)" = 16 ] || fail "one-dev: not every frame over ${DEVS[0]}"
	[ "$(rail_of one-dev "${DEVS[1]}" state)" = unused ] ||
		fail "one-dev: rail ${DEVS[1]} is not 'unused' for a producer without ${DEVS[1]}"
	stored_once one-dev 16
}

# a node with one rail and the producer with two devices: the same (a second ingestd)
prod_node_one_rail() {
	step "node with one rail (${DEVS[0]}), producer with both devices: the rail they share"
	local pid2 port2 n
	ing_start "$INGESTD" "$T/port2" "$OUT/ingestd-1rail.log" --listen 0.0.0.0:0 --data-dir "$T/data1" \
		--rdma-dev "${DEVS[0]}@${NODES[0]}" --rdma-port 7473 --pool 1M:8,4M:4 --workers 1 --credits 8 \
		--rdma on --poll-mode adaptive --log-level info
	pid2=$ING_PID port2=${ING_SERVER##*:}
	timeout 600 "$SEND" --server "${IPS[0]}:$port2" --count 16 --sizes 256K-2M --credits 8 --seed 3 \
		--first-id 1 --wafer MR-one-rail --manifest "$T/m-one-rail" --json --transport rdma \
		>"$T/one-rail.json" 2>"$T/one-rail.err" || fail "one-rail: ingest-send exited $?"
	cat "$T/one-rail.json"; echo
	[ "$(jget "$T/one-rail.json" ok)" = 16 ] || fail "one-rail: not 16 of 16 frames ok"
	n=$(grep -o '"local_device":"[^"]*"' "$T/one-rail.json" | sort -u)
	[ "$n" = "\"local_device\":\"${DEVS[0]}\"" ] || fail "one-rail: local devices used: $n"
	timeout 300 "$VERIFY" --data-dir "$T/data1" --manifest "$T/m-one-rail" || fail "one-rail: not byte for byte"
	kill -TERM "$pid2"; wait "$pid2" || fail "the one-rail ingestd exited $? on SIGTERM"
}

# READ pull, WRITE push and the gRPC fallback at the same time, over both rails
prod_all_at_once() {
	step "READ pull, WRITE push and the gRPC fallback at the same time"
	local p1 p2 p3 t
	msend mix-r 30 64K-2M --transport rdma & p1=$!
	msend mix-w 30 64K-2M --transport rdma-write & p2=$!
	msend mix-g 12 64K-1M --transport grpc & p3=$!
	wait "$p1" || fail "mix-r failed"
	wait "$p2" || fail "mix-w failed"
	wait "$p3" || fail "mix-g failed"
	for t in mix-r:30 mix-w:30 mix-g:12; do stored_once "${t%:*}" "${t#*:}"; done
}

prod_node_one_rail
prod_all_at_once
prod_one_device
prod_rails_spread
prod_rail_lost link
prod_rail_lost dev

step "every slot back, then SIGTERM: exit 0"
for _ in $(seq 1 300); do
	timeout 60 "$STATS" "127.0.0.1:$PORT" >"$T/stats" || fail "Stats: no answer"
	[ "$(sv poolSlotsFree)" = "$(sv poolSlotsTotal)" ] && break
	sleep 0.2
done
[ "$(sv poolSlotsFree)" = "$(sv poolSlotsTotal)" ] || fail "slots not back: $(sv poolSlotsFree) of $(sv poolSlotsTotal)"
[ "$(sv poolSlotsTotal)" = 48 ] || fail "the pool has $(sv poolSlotsTotal) slots, not 2 regions x 24"
ing_term_pid
rails_link_down_at_start

# striped_stored_once DIR TAG: the node of data dir DIR holds TAG's one striped frame once
# (one catalog row, one frame file) and byte for byte (ingest-verify against the producer's
# manifest of its source)
striped_stored_once() {
	local dir=$1 tag=$2
	[ "$(sqlite3 "file:$dir/catalog.db?mode=ro" "SELECT count(*) FROM frames WHERE wafer_id = 'MR-$tag'")" = 1 ] ||
		fail "$tag: not one catalog row for the striped frame"
	[ "$(find "$dir/frames/MR-$tag" -name '*.frame' | wc -l)" = 1 ] || fail "$tag: not one frame file"
	timeout 300 "$VERIFY" --data-dir "$dir" --manifest "$T/m-$tag" ||
		fail "$tag: the stored frame is not byte for byte what was sent"
}

# ---- striping (issue #26 item 3): one 64 MiB frame over both rails at once, still one
# frame (one slot, one catalog row, one CRC, one Ack). A node of its own: --stripe-min 8M
# (the default, said here), a 64 MiB size class, no hugepages (the regions of the node above are
# sized for its small frames).
prod_striped() {
	step "one 64 MiB frame striped over both rails (READ pull): each rail carries half, one row, byte for byte"
	local pid3 port3 r gotb half sum=0 tag=stripe
	ing_start "$INGESTD" "$T/port3" "$OUT/ingestd-stripe.log" --listen 0.0.0.0:0 --data-dir "$T/data3" \
		--rdma-dev "$RAILS" --rdma-port 7474 --pool 64M:2 --hugepages off --workers 1 --credits 4 \
		--rdma on --poll-mode adaptive --log-level info --stripe-min 8M \
		--metrics-listen 127.0.0.1:0 --metrics-port-file "$T/mport3"
	pid3=$ING_PID port3=${ING_SERVER##*:}
	timeout 60 "$STATS" "127.0.0.1:$port3" >"$T/stats3.before" || fail "Stats: no answer"
	timeout 900 "$SEND" --server "${IPS[0]}:$port3" --count 1 --sizes 64M --credits 1 --seed 26 \
		--first-id 1 --wafer "MR-$tag" --manifest "$T/m-$tag" --json --transport rdma \
		>"$T/$tag.json" 2>"$T/$tag.err" ||
		fail "$tag: ingest-send exited $? ($(cat "$T/$tag.json") $(tail -n 5 "$T/$tag.err"))"
	cat "$T/$tag.json"; echo
	[ "$(jget "$T/$tag.json" ok)" = 1 ] && [ "$(jget "$T/$tag.json" failed)" = 0 ] ||
		fail "$tag: the 64 MiB frame did not come back DURABLE ($(tail -n 5 "$T/$tag.err"))"
	timeout 60 "$STATS" "127.0.0.1:$port3" >"$T/stats3" || fail "Stats: no answer"
	for r in 0 1; do
		gotb=$(($(value "rail.$r.bytesReceived" "$T/stats3") - $(value "rail.$r.bytesReceived" "$T/stats3.before")))
		echo "$tag: rail $r (${DEVS[$r]}) +$gotb bytes, $(value "rail.$r.framesFailed" "$T/stats3") failed," \
			"$(value "rail.$r.completionErrors" "$T/stats3") completion errors"
		# each rail its half of the frame (the split: equal page-aligned shares)
		half=$((32 << 20))
		[ "$gotb" = "$half" ] || fail "$tag: rail $r carried $gotb bytes of the 64 MiB frame, not its half ($half)"
		sum=$((sum + gotb))
	done
	[ "$sum" = $((64 << 20)) ] || fail "$tag: the rails carried $sum bytes, not the frame's 64 MiB"
	# one frame: counted once, in its home rail's frames (the rail its FrameMeta came over);
	# each rail counted its part in its parts; /metrics says what Stats says
	local frames=0 dp df m
	for r in 0 1; do
		dp=$(($(value "rail.$r.partsReceived" "$T/stats3") - $(value "rail.$r.partsReceived" "$T/stats3.before")))
		df=$(($(value "rail.$r.framesReceived" "$T/stats3") - $(value "rail.$r.framesReceived" "$T/stats3.before")))
		echo "$tag: rail $r +$df frames, +$dp parts"
		[ "$dp" = 1 ] || fail "$tag: rail $r counted $dp parts of the striped frame, not 1"
		frames=$((frames + df))
		for m in frames:framesReceived parts:partsReceived; do
			[ "$(curl -fsS "http://127.0.0.1:$(tr -dc '0-9' <"$T/mport3")/metrics" |
				awk -v k="ingest_rail_${m%%:*}_total{rail=\"${DEVS[$r]}\",index=\"$r\"}" '$1 == k { print $2 }')" = \
			  "$(value "rail.$r.${m#*:}" "$T/stats3")" ] || fail "$tag: /metrics ingest_rail_${m%%:*}_total of rail $r is not Stats' ${m#*:}"
		done
	done
	[ "$frames" = 1 ] || fail "$tag: the striped frame counted $frames times in the rails' frames, not once"
	striped_stored_once "$T/data3" "$tag"
	echo "$tag: one 64 MiB frame, 32 MiB over each rail, one catalog row, byte for byte (ingest-verify)"
	kill -TERM "$pid3"; wait "$pid3" || fail "the striping ingestd exited $? on SIGTERM"
}

# 7. striped push (docs/PUSH.md "Striped push"): the same 64 MiB frame pushed with RDMA WRITE
#    WITH IMM over both rails at once, one grant per part, each bound by its rail's lcore.
prod_striped_push() {
	step "one 64 MiB frame pushed striped over both rails (RDMA WRITE push): one grant per part, each rail carries half, one row, byte for byte"
	local pid4 port4 r gotb half sum=0 tag=pstripe g0 g1
	ing_start "$INGESTD" "$T/port4" "$OUT/ingestd-pstripe.log" --listen 0.0.0.0:0 --data-dir "$T/data4" \
		--rdma-dev "$RAILS" --rdma-port 7475 --pool 64M:2 --hugepages off --workers 1 --credits 4 \
		--rdma on --rdma-write auto --poll-mode adaptive --log-level info --stripe-min 8M
	pid4=$ING_PID port4=${ING_SERVER##*:}
	timeout 60 "$STATS" "127.0.0.1:$port4" >"$T/stats4.before" || fail "Stats: no answer"
	timeout 900 "$SEND" --server "${IPS[0]}:$port4" --count 1 --sizes 64M --credits 1 --seed 27 \
		--first-id 1 --wafer "MR-$tag" --manifest "$T/m-$tag" --json --transport rdma-write \
		>"$T/$tag.json" 2>"$T/$tag.err" ||
		fail "$tag: ingest-send exited $? ($(cat "$T/$tag.json") $(tail -n 5 "$T/$tag.err"))"
	cat "$T/$tag.json"; echo
	[ "$(jget "$T/$tag.json" transport)" = rdma-write ] || fail "$tag: transport is not rdma-write"
	[ "$(jget "$T/$tag.json" ok)" = 1 ] && [ "$(jget "$T/$tag.json" failed)" = 0 ] ||
		fail "$tag: the 64 MiB frame did not come back DURABLE ($(tail -n 5 "$T/$tag.err"))"
	timeout 60 "$STATS" "127.0.0.1:$port4" >"$T/stats4" || fail "Stats: no answer"
	g0=$(value pushGrants "$T/stats4.before") g1=$(value pushGrants "$T/stats4")
	echo "$tag: pushGrants +$((g1 - g0))"
	[ $((g1 - g0)) -ge 2 ] || fail "$tag: $((g1 - g0)) push grants for a frame in two parts"
	for r in 0 1; do
		gotb=$(($(value "rail.$r.bytesReceived" "$T/stats4") - $(value "rail.$r.bytesReceived" "$T/stats4.before")))
		echo "$tag: rail $r (${DEVS[$r]}) +$gotb bytes, $(value "rail.$r.framesFailed" "$T/stats4") failed," \
			"$(value "rail.$r.completionErrors" "$T/stats4") completion errors"
		half=$((32 << 20))
		[ "$gotb" = "$half" ] || fail "$tag: rail $r carried $gotb bytes of the 64 MiB frame, not its half ($half)"
		[ "$(value "rail.$r.framesFailed" "$T/stats4")" = 0 ] || fail "$tag: rail $r failed frames"
		sum=$((sum + gotb))
	done
	[ "$sum" = $((64 << 20)) ] || fail "$tag: the rails carried $sum bytes, not the frame's 64 MiB"
	striped_stored_once "$T/data4" "$tag"
	echo "$tag: one 64 MiB frame pushed, 32 MiB written over each rail, one catalog row, byte for byte (ingest-verify)"
	kill -TERM "$pid4"; wait "$pid4" || fail "the striped push ingestd exited $? on SIGTERM"
}
prod_striped
prod_striped_push
echo "rails: OK"
