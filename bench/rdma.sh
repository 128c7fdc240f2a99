#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench/rdma.sh [BUILD_DIR] - RDMA READ (pull) and RDMA WRITE (push) data paths vs the
# device's own READ and WRITE bandwidth, on Soft-RoCE inside the qemu guest (deploy/rxe-vm).
# Run on the host: it boots the guest and re-runs itself there. Not a test: it prints
# numbers and ratios, it asserts nothing.
#
#   baseline  ib_read_bw, same device (rxe0), same message size, 1 QP
#   engine    the node's RDMA engine alone (rdma_verbs_check bench: READs into MR-pool
#             slots through the lcore poller, no gRPC, no persistence)
#   ingest    ingest-send --transport rdma -> ingestd --sink null (READs into MR-pool
#             slots, chunked, adaptive poller), frames of the same size
#   ratio     ingest MB/s / ib_read_bw MB/s   (target >= 0.9x on real NICs)
#   push      ib_write_bw (same size, same count), then ingest-send --transport rdma-write
#             into the same ingestd (a memory window per grant): push MB/s / ib_write_bw MB/s
#   summary   one line: pull/ib_read_bw and push/ib_write_bw, measured in the same run
#   CPU       data-plane lcore CPU seconds per GB moved (and the whole ingestd's)
#   scaling   N = 1, 2, 3 dataplane lcores (ingestd --lcores 0-N, all on node 0, where the
#             plan puts the one rail: the guest has 4 vCPUs a node) and
#             N producers at once, one session per lcore by the placement rule: aggregate
#             MB/s (all producers' bytes over the longest producer's time) against
#             ib_read_bw -q N / ib_write_bw -q N (N QPs) in the same run, pull and push,
#             and how many frames each lcore carried (Stats lcores)
#   rails     (the guest boots with two NUMA nodes and two NICs, rxe0 on node 0 and rxe1 on
#             node 1, each on its own subnet) one ingestd with both rails (--rdma-dev
#             'rxe0@0, rxe1@1', a pool region per node), pull and push:
#               1 rail    one ingest-send on rail 0 against ib_read_bw / ib_write_bw on rxe0
#               2 rails   two ingest-send at once, one per rail (--rdma-dev rxe<i>, dialling
#                         that rail's address), aggregate = both producers' bytes / the
#                         longer one's time, against the perftest tool on rxe0 and rxe1 at
#                         once (one per device, their two results summed)
#             and the per-rail split: the bytes each rail's lcore received (node Stats, the
#             lcore of each rail read from ingestd's "rail N: RDMA listener" line) and each
#             producer's own MB/s. Until the producer spreads frames over rails itself
#             (issue #26 item 3), "2 rails" is two producers, one per rail; it says so.
#   stripe    one 64 MiB frame at a time over 1 rail and over 2 rails, striped (the node
#             runs --stripe-min 64M: only those frames are), same run, and the ratio; READ
#             pull, then WRITE push
#
# Knobs (env): BENCH_SIZE (4M), BENCH_COUNT (256 frames: with --reuse-buffers the producer
#              generates its ~20 pool buffers once, inside the timed run), BENCH_CREDITS (16),
#              BENCH_POLL (adaptive|busy), BENCH_ITERS (ib_read_bw iterations, = COUNT),
#              BENCH_REUSE (1: ingest-send --reuse-buffers; 0: fresh synthetic content
#              and its CRC-32C for every frame, as the first version of this bench did),
#              BENCH_WORKERS (1: persistence workers, where the node verifies the CRC),
#              BENCH_SCALE (1: the scaling table; 0: skip it), BENCH_SCALE_COUNT (64 frames
#              per producer), BENCH_SCALE_MAX (3 lcores, at most vCPUs - 1),
#              BENCH_RAILS (1: the rails and stripe tables; the guest needs RXE_VM_NICS=2,
#              the default of this script), BENCH_RAILS_COUNT (64 frames per producer),
#              BENCH_STRIPE_COUNT (4 frames of 64 MiB), BENCH_SINGLE (1: the one-rail pull,
#              push and scaling parts; 0: the rails tables alone).
# Caveats under TCG: both ends share the guest's vCPUs (8 by default, 4 a NUMA node, RXE_VM_SMP:
# with 2 a node, lcores 2-3 would be remote to rail 0 and the placement would leave them idle; rxe's
# kernel work runs on them too), and the guest's vCPUs share the host's cores: the scaling
# table says what the node does with more lcores against what the device does with more
# QPs in the same run, not what a NIC would. Without --reuse-buffers ingest-send generates every frame's content and its
# CRC-32C on the same CPUs, which ib_read_bw does not: that measured the producer's
# generator, not the data path. With it, the producer fills each pool buffer once and
# resends it under new frame ids with its (exact, cached) CRC. The node still verifies the
# declared CRC-32C of every frame (persistence, also with --sink null), which ib_read_bw
# does not do either: the line "node CRC" says what that costs.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/.." && pwd)
BUILD=${1:-${ING_BUILD_DIR:-$SRC/build}}
BUILD=$(cd "$BUILD" && pwd)

if [ "${RXE_VM:-0}" != 1 ]; then
	# (RXE_VM_TIMEOUT: a cap for a hung guest; the whole bench takes TCG tens of minutes)
	exec env ING_BUILD_DIR="$BUILD" RXE_VM_RW= RXE_VM_SMP="${RXE_VM_SMP:-8}" RXE_VM_TIMEOUT="${RXE_VM_TIMEOUT:-5400}" \
		RXE_VM_MEM="${RXE_VM_MEM:-3072}" RXE_VM_NUMA="${RXE_VM_NUMA:-2}" \
		RXE_VM_NICS="${RXE_VM_NICS:-2}" RXE_VM_ACCEL="${RXE_VM_ACCEL:-tcg}" \
		"$SRC/deploy/rxe-vm/run-in-rxe-vm.sh" \
		bash "$SRC/bench/rdma.sh" "$BUILD"
fi

: "${BENCH_SIZE:=4M}" "${BENCH_COUNT:=256}" "${BENCH_CREDITS:=16}" "${BENCH_POLL:=adaptive}"
: "${BENCH_ITERS:=$BENCH_COUNT}" "${BENCH_REUSE:=1}" "${BENCH_WORKERS:=1}"
: "${BENCH_SCALE:=1}" "${BENCH_SCALE_COUNT:=64}" "${BENCH_SCALE_MAX:=3}"
: "${BENCH_RAILS:=1}" "${BENCH_RAILS_COUNT:=64}" "${BENCH_STRIPE_COUNT:=4}" "${BENCH_SINGLE:=1}"
# the pools on hugepage MRs, as the tests run them (ingestd --hugepages auto)
echo 256 >/proc/sys/vm/nr_hugepages 2>/dev/null || true
REUSE=()
[ "$BENCH_REUSE" = 1 ] && REUSE=(--reuse-buffers)
STATS=$BUILD/tests/rxe_stats
bytes_of() { numfmt --from=iec "$1"; }
SZ=$(bytes_of "$BENCH_SIZE")
INGESTD=$BUILD/apps/ingestd SEND=$BUILD/apps/ingest-send
for b in "$INGESTD" "$SEND"; do [ -x "$b" ] || { echo "bench/rdma.sh: $b not built" >&2; exit 1; }; done
T=$(mktemp -d /tmp/bench-rdma.XXXXXX)
PID=
cleanup() { [ -n "$PID" ] && kill -KILL "$PID" 2>/dev/null; rm -rf "$T"; }
trap cleanup EXIT

echo "== bench/rdma.sh: $RXE_DEV ($RXE_IP, gid $RXE_GID_INDEX), frame/message size $BENCH_SIZE, $BENCH_COUNT frames, poll $BENCH_POLL, reuse-buffers $BENCH_REUSE, $BENCH_WORKERS persistence worker(s), $(nproc) vCPU, ${RXE_NUMA:-1} NUMA node(s), NICs: ${RXE_DEVS:-$RXE_DEV}"
[ "${RXE_VM_ACCEL:-tcg}" != tcg ] ||
	echo "   (qemu TCG: the vCPUs are emulated, rxe moves the bytes on them, and they may be the ceiling: compare the ratios of one run, not MB/s)"

# ib_bw TOOL [ITERS [QPS]]: the perftest TOOL (ib_read_bw / ib_write_bw) over rxe with this
# run's size, ITERS messages (BENCH_ITERS) per QP over QPS QPs (1); prints its result line
# and sets BW_MBS (MB/s) and BW_GBPS.
ib_bw() {
	local tool=$1 iters=${2:-$BENCH_ITERS} qps=${3:-1} sp ok=0 line
	timeout 300 "$tool" -d "$RXE_DEV" -x "$RXE_GID_INDEX" -s "$SZ" -n "$iters" -q "$qps" -F --report_gbits \
		>"$T/bw-srv.log" 2>&1 &
	sp=$!
	for _ in 1 2 3 4 5 6 7 8 9 10; do   # the server needs a moment to listen under TCG
		sleep 1
		if timeout 300 "$tool" -d "$RXE_DEV" -x "$RXE_GID_INDEX" -s "$SZ" -n "$iters" -q "$qps" -F \
			--report_gbits "$RXE_IP" >"$T/bw-cli.log" 2>&1; then ok=1; break; fi
		grep -q "Couldn't connect" "$T/bw-cli.log" && kill -0 $sp 2>/dev/null || break
	done
	[ $ok = 1 ] || { cat "$T/bw-cli.log" "$T/bw-srv.log"; exit 1; }
	wait $sp || true
	line=$(grep -A1 '#bytes' "$T/bw-cli.log" | tail -1)
	BW_GBPS=$(awk '{print $4}' <<<"$line")
	BW_MBS=$(awk -v g="$BW_GBPS" 'BEGIN{printf "%.1f", g * 1000 / 8}')
	printf '%-13s: %s\n' "$tool" "$line"
}

# ---- rails: 1 and 2 rails of one ingestd against perftest on one and on both devices
# ib_pair TOOL DEV... : the perftest TOOL on each DEV at once (one server and one client per
# device, its own port), BENCH_RAILS_COUNT messages of BENCH_SIZE each; sets PAIR_MBS (the
# devices' results summed) and PAIR_EACH ("rxe0 a MB/s + rxe1 b MB/s"). In the 8-vCPU TCG
# guest perftest now and then reports 0.000000 Gb/s for a run that moved every message (its
# cycle-count timing): such a run is no figure; the pair runs again, at most 3 times, and
# says so.
ib_pair() {
	local try
	for try in 1 2 3; do
		: >"$T/pair-lines"
		ib_pair_once "$@" && return 0
		echo "             ($1 on ${BAD_DEV}: no bandwidth figure, '$BAD_LINE'; run $try of 3 again)"
	done
	echo "rails: $1 gave no bandwidth figure 3 times; last output of $BAD_DEV:"
	cat "$T/pair-cli-$BAD_DEV.log" "$T/pair-srv-$BAD_DEV.log"
	exit 1
}
ib_pair_once() {
	local tool=$1 i d k pids=() srv=() sum=0 each= g line bad=
	shift
	for d in "$@"; do
		i=${d#rxe}
		timeout 300 "$tool" -d "$d" -x "${GIDS[$i]}" -p $((18515 + i)) -s "$SZ" -n "$BENCH_RAILS_COUNT" -F \
			--report_gbits >"$T/pair-srv-$d.log" 2>&1 &
		srv+=($!)
	done
	for d in "$@"; do
		i=${d#rxe}
		(
			for _ in 1 2 3 4 5 6 7 8 9 10; do   # each server needs a moment to listen under TCG
				sleep 1
				timeout 300 "$tool" -d "$d" -x "${GIDS[$i]}" -p $((18515 + i)) -s "$SZ" -n "$BENCH_RAILS_COUNT" \
					-F --report_gbits "${IPS[$i]}" >"$T/pair-cli-$d.log" 2>&1 && exit 0
				grep -q "Couldn't connect" "$T/pair-cli-$d.log" || exit 1
			done
			exit 1
		) &
		pids+=($!)
	done
	k=0
	for d in "$@"; do
		wait "${pids[$k]}" || { echo "rails: $tool on $d failed:"; cat "$T/pair-cli-$d.log" "$T/pair-srv-$d.log"; exit 1; }
		k=$((k + 1))
		line=$(grep -A1 '#bytes' "$T/pair-cli-$d.log" | tail -1)
		g=$(awk '{print $4}' <<<"$line")
		echo "             $tool $d: $line" >>"$T/pair-lines"
		if ! awk -v g="$g" 'BEGIN { exit !(g + 0 > 0) }'; then
			# no figure is no figure: never a 0 in the sum (and a ratio that flatters)
			[ -n "$bad" ] || bad=$d BAD_LINE=$line
			continue
		fi
		sum=$(awk -v a="$sum" -v g="$g" 'BEGIN{printf "%.1f", a + g * 1000 / 8}')
		each+="${each:+ + }$d $(awk -v g="$g" 'BEGIN{printf "%.1f", g * 1000 / 8}') MB/s"
	done
	for k in "${srv[@]}"; do wait "$k" || true; done
	BAD_DEV=$bad
	[ -z "$bad" ] || return 1
	PAIR_MBS=$sum PAIR_EACH=$each
}
# rails_lcore_bytes FILE: "bytes-of-rail-0 bytes-of-rail-1" from a Stats snapshot (the
# lcore of each rail from ingestd's log; the node's per-lcore counters, until Stats has
# per-rail ones)
rails_lcore_bytes() {
	local r lc out=
	for r in 0 1; do
		lc=$(sed -n "s/.*rail $r: RDMA listener .* poller(s) on lcore(s) \([0-9]*\),.*/\1/p" "$T/rails-ingestd.log" | head -n 1)
		out+=" $(awk -v lc="$lc" '$1 ~ /^lcore\.[0-9]+\.lcore$/ && $2 == lc { split($1, a, "."); i = a[2] }
			$1 ~ /^lcore\.[0-9]+\.bytesReceived$/ { split($1, a, "."); b[a[2]] = $2 }
			END { print (i == "" ? 0 : b[i] + 0) }' "$1")"
	done
	echo "$out"
}
# rails_send TAG RAIL MODE COUNT SIZE CREDITS: one ingest-send on rail RAIL's device and
# address, in the background (its JSON in $T/TAG.json); RAILS_PID
rails_send() {
	local tag=$1 r=$2 mode=$3 count=$4 size=$5 credits=$6
	"$SEND" --server "${IPS[$r]}:$RPORT" --rdma-dev "${DEVS[$r]}" --transport "$mode" --count "$count" \
		--size "$size" --credits "$credits" --first-id $((RAILS_ID += 100000)) --wafer "rails-$tag" \
		"${REUSE[@]}" --json --quiet >"$T/$tag.json" 2>"$T/$tag.err" &
	RAILS_PID=$!
}
jmbs() { python3 -c 'import json, sys; print("%.1f" % json.load(open(sys.argv[1]))["mb_s"])' "$1"; }
# rails_stripe_2 MODE WHAT: one 64 MiB frame at a time over both rails at once, striped (the
# node runs --stripe-min 64M: only these frames are; docs/ARCHITECTURE.md "Striping"; push:
# docs/PUSH.md "Striped push"), against one rail (stripe 1, the same producer given rxe0
# only); sets STRIPE2_MBS and prints each rail's bytes from the node's lcore counters.
rails_stripe_2() {
	local mode=$1 what=$2 b0 b1 s0 s1
	STRIPE2_MBS=
	"$STATS" "127.0.0.1:$RPORT" >"$T/rs0"
	"$SEND" --server "${IPS[0]}:$RPORT" --rdma-dev "${DEVS[0]},${DEVS[1]}" --transport "$mode" \
		--count "$BENCH_STRIPE_COUNT" --size 64M --credits 1 --first-id $((RAILS_ID += 100000)) \
		--wafer "rails-stripe2-$mode" "${REUSE[@]}" --json --quiet >"$T/stripe2-$mode.json" 2>"$T/stripe2-$mode.err" ||
		{ echo "stripe 2     : FAILED ($what): ingest-send exited $?"; tail -n 5 "$T/stripe2-$mode.err"; return 0; }
	"$STATS" "127.0.0.1:$RPORT" >"$T/rs1"
	read -r b0 b1 <<<"$(rails_lcore_bytes "$T/rs0")"
	read -r s0 s1 <<<"$(rails_lcore_bytes "$T/rs1")"
	STRIPE2_MBS=$(jmbs "$T/stripe2-$mode.json")
	echo "stripe 2     : one 64 MiB frame at a time striped over rail 0 + rail 1 ($what): $STRIPE2_MBS MB/s" \
		"($BENCH_STRIPE_COUNT frames; node lcores: rail 0 $(((s0 - b0) / 1000000)) MB, rail 1 $(((s1 - b1) / 1000000)) MB)"
}
bench_rails() {
	read -r -a DEVS <<<"${RXE_DEVS:-$RXE_DEV}"
	read -r -a IPS <<<"${RXE_IPS:-$RXE_IP}"
	read -r -a GIDS <<<"${RXE_GID_INDEXES:-$RXE_GID_INDEX}"
	read -r -a NODES <<<"${RXE_DEV_NODES:-0}"
	echo
	if [ "${#DEVS[@]}" -lt 2 ]; then
		echo "rails: NOT MEASURED: the guest has one NIC (boot it with RXE_VM_NICS=2 RXE_VM_NUMA=2, this script's default)"
		return 0
	fi
	local pool="$BENCH_SIZE:$((BENCH_CREDITS + 4)),64M:2" n hp need mode tool one pair b0 b1 s0 s1
	# each region (the whole spec) on its node's hugepages
	need=$(( ($(bytes_of "$BENCH_SIZE") * (BENCH_CREDITS + 4) + 128 * 1048576) / 2097152 + 2 ))
	for n in $(seq 0 $((${RXE_NUMA:-1} - 1))); do
		hp=/sys/devices/system/node/node$n/hugepages/hugepages-2048kB
		[ -d "$hp" ] || continue
		[ "$(cat "$hp/free_hugepages")" -ge "$need" ] ||
			echo $(( $(cat "$hp/nr_hugepages") + need - $(cat "$hp/free_hugepages") )) >"$hp/nr_hugepages" 2>/dev/null || true
	done
	"$INGESTD" --listen 0.0.0.0:0 --data-dir "$T/rdata" --rdma-dev "${DEVS[0]}@${NODES[0]}, ${DEVS[1]}@${NODES[1]}" \
		--pool "$pool" --workers "$BENCH_WORKERS" --sink null --credits "$BENCH_CREDITS" --rdma on \
		--poll-mode "$BENCH_POLL" --port-file "$T/rport" --log-level info --stripe-min 64M \
		>"$T/rails-ingestd.log" 2>&1 &
	PID=$!
	for _ in $(seq 1 600); do [ -s "$T/rport" ] && break; sleep 0.1; done
	[ -s "$T/rport" ] || { cat "$T/rails-ingestd.log"; exit 1; }
	RPORT=$(tr -dc '0-9' <"$T/rport")
	RAILS_ID=0
	grep -E "rail [01]: RDMA listener" "$T/rails-ingestd.log" | sed 's/^/   /'
	echo "rails: ${DEVS[0]} (${IPS[0]}, node ${NODES[0]}) and ${DEVS[1]} (${IPS[1]}, node ${NODES[1]}), $BENCH_SIZE frames, $BENCH_RAILS_COUNT per producer, null sink, pool $pool per region"
	echo "  (2 rails = two ingest-send processes at once, one per rail address: the producer does not spread one stream over rails yet)"
	printf '%-10s %-6s %12s %24s %7s  %s\n' mode rails "ingest MB/s" "perftest MB/s" ratio "per rail: node lcore bytes (producer MB/s)"
	for mode in rdma rdma-write; do
		tool=ib_read_bw
		[ "$mode" = rdma-write ] && tool=ib_write_bw
		# warm-up: each rail's connection and first touch
		for r in 0 1; do rails_send "warm$r" "$r" "$mode" 4 "$BENCH_SIZE" "$BENCH_CREDITS"; wait "$RAILS_PID"; done
		ib_pair "$tool" "${DEVS[0]}"
		local p1=$PAIR_MBS
		"$STATS" "127.0.0.1:$RPORT" >"$T/rs0"
		rails_send one 0 "$mode" "$BENCH_RAILS_COUNT" "$BENCH_SIZE" "$BENCH_CREDITS"
		wait "$RAILS_PID" || { cat "$T/one.err"; exit 1; }
		"$STATS" "127.0.0.1:$RPORT" >"$T/rs1"
		one=$(jmbs "$T/one.json")
		read -r b0 b1 <<<"$(rails_lcore_bytes "$T/rs0")"
		read -r s0 s1 <<<"$(rails_lcore_bytes "$T/rs1")"
		printf '%-10s %-6s %12s %24s %7s  rail 0 %d MB, rail 1 %d MB (%s MB/s)\n' "$mode" 1 "$one" "$p1 ($tool ${DEVS[0]})" \
			"$(awk -v a="$one" -v b="$p1" 'BEGIN{printf "%.2fx", a / b}')" $(((s0 - b0) / 1000000)) $(((s1 - b1) / 1000000)) "$one"
		ib_pair "$tool" "${DEVS[0]}" "${DEVS[1]}"
		pair=$PAIR_MBS
		"$STATS" "127.0.0.1:$RPORT" >"$T/rs0"
		rails_send two0 0 "$mode" "$BENCH_RAILS_COUNT" "$BENCH_SIZE" "$BENCH_CREDITS"
		local q0=$RAILS_PID
		rails_send two1 1 "$mode" "$BENCH_RAILS_COUNT" "$BENCH_SIZE" "$BENCH_CREDITS"
		wait "$q0" || { cat "$T/two0.err"; exit 1; }
		wait "$RAILS_PID" || { cat "$T/two1.err"; exit 1; }
		"$STATS" "127.0.0.1:$RPORT" >"$T/rs1"
		two=$(python3 -c 'import json, sys
ds = [json.load(open(p)) for p in sys.argv[1:]]
assert all(d["failed"] == 0 for d in ds), "failed frames"
print("%.1f" % (sum(d["bytes"] for d in ds) / 1e6 / max(d["wall_s"] for d in ds)))' "$T/two0.json" "$T/two1.json")
		read -r b0 b1 <<<"$(rails_lcore_bytes "$T/rs0")"
		read -r s0 s1 <<<"$(rails_lcore_bytes "$T/rs1")"
		printf '%-10s %-6s %12s %24s %7s  rail 0 %d MB (%s MB/s), rail 1 %d MB (%s MB/s)\n' "$mode" 2 "$two" "$pair (sum)" \
			"$(awk -v a="$two" -v b="$pair" 'BEGIN{printf "%.2fx", a / b}')" $(((s0 - b0) / 1000000)) "$(jmbs "$T/two0.json")" \
			$(((s1 - b1) / 1000000)) "$(jmbs "$T/two1.json")"
		cat "$T/pair-lines"
		echo "             perftest at once: $PAIR_EACH; 2 rails / 1 rail: $(awk -v a="$two" -v b="$one" 'BEGIN{printf "%.2fx", a / b}')" \
			"(perftest 2 devices / 1: $(awk -v a="$pair" -v b="$p1" 'BEGIN{printf "%.2fx", a / b}'))"
		echo "rails $mode  : 2 rails $two MB/s = $(awk -v a="$two" -v b="$pair" 'BEGIN{printf "%.2f", a / b}')x $tool on ${DEVS[0]} + ${DEVS[1]} at once ($pair MB/s; target >= 0.9x)"
	done
	# striping: one 64 MiB frame at a time (credits 1) over one rail, then over two; READ
	# pull, then RDMA WRITE push (a grant per part)
	local what
	for mode in rdma rdma-write; do
		what="READ pull"
		[ "$mode" = rdma-write ] && what="WRITE push"
		rails_send "stripe1-$mode" 0 "$mode" 1 64M 1
		wait "$RAILS_PID" || { cat "$T/stripe1-$mode.err"; exit 1; }
		rails_send "stripe1-$mode" 0 "$mode" "$BENCH_STRIPE_COUNT" 64M 1
		wait "$RAILS_PID" || { cat "$T/stripe1-$mode.err"; exit 1; }
		echo "stripe 1     : one 64 MiB frame at a time over rail 0 ($what): $(jmbs "$T/stripe1-$mode.json") MB/s ($BENCH_STRIPE_COUNT frames)"
		rails_stripe_2 "$mode" "$what"
		[ -z "$STRIPE2_MBS" ] ||
			echo "stripe ratio : $(awk -v a="$STRIPE2_MBS" -v b="$(jmbs "$T/stripe1-$mode.json")" 'BEGIN{printf "%.2f", a / b}')x one rail, $what (target >= 1.6x)"
	done
	kill -TERM "$PID"; wait "$PID" || true; PID=
	rm -rf "$T/rdata"
}
[ "$BENCH_RAILS" != 1 ] || bench_rails
[ "$BENCH_SINGLE" = 1 ] || exit 0
echo

# ---- baseline: ib_read_bw
ib_bw ib_read_bw
gbps=$BW_GBPS base=$BW_MBS
echo "baseline     : $base MB/s (BW average $gbps Gb/s)"

# ---- the data plane alone: the RDMA engine reading into pool slots, no gRPC/persistence
VC=$BUILD/tests/rdma_verbs_check
if [ -x "$VC" ]; then
	ING_LOG_LEVEL=warn "$VC" --ip "$RXE_IP" bench --bench-size "$SZ" --bench-count "$BENCH_COUNT" \
		--bench-credits "$BENCH_CREDITS" >"$T/vc.all" 2>"$T/vc.err" || cat "$T/vc.all" "$T/vc.err"
	grep -E "^engine-bench" "$T/vc.all" >"$T/vc.out" || true
	eng=$(awk '{for (i = 1; i < NF; i++) if ($(i + 1) == "MB/s,") print $i}' "$T/vc.out")
	echo "engine only  : $(sed 's/^engine-bench: //' "$T/vc.out")"
	[ -n "$eng" ] && echo "engine ratio : $(awk -v a="$eng" -v b="$base" 'BEGIN{printf "%.2f", a / b}')x of ib_read_bw"
fi

# ---- ingest: ingest-send -> ingestd null sink
"$INGESTD" --listen 127.0.0.1:0 --data-dir "$T/data" --rdma-dev "$RXE_DEV" --pool "$BENCH_SIZE:$((BENCH_CREDITS + 4))" \
	--workers "$BENCH_WORKERS" --sink null --credits "$BENCH_CREDITS" --rdma on --poll-mode "$BENCH_POLL" \
	--port-file "$T/port" --log-level warn >"$T/ingestd.log" 2>&1 &
PID=$!
for _ in $(seq 1 300); do [ -s "$T/port" ] && break; sleep 0.1; done
[ -s "$T/port" ] || { cat "$T/ingestd.log"; exit 1; }
SERVER=127.0.0.1:$(tr -dc '0-9' <"$T/port")
# CPU ticks of the data-plane pollers (EAL workers / ing-rdma threads) and of the process
ticks() {
	local dp=0 all t comm st
	for t in /proc/$PID/task/*; do
		comm=$(cat "$t/comm" 2>/dev/null) || continue
		st=$(awk '{print $14 + $15}' "$t/stat" 2>/dev/null) || continue
		case "$comm" in *worker*|ing-rdma*|lcore*) dp=$((dp + st));; esac
	done
	all=$(awk '{print $14 + $15}' /proc/$PID/stat)
	echo "$dp $all"
}
HZ=$(getconf CLK_TCK)
# per-thread CPU ticks of ingestd: "tid comm utime stime" (the profile of where the node
# spends; rxe's packet processing runs in softirqs and lands in the stime of whatever
# thread it interrupted, so utime is the thread's own work)
tdump() {
	local t
	for t in /proc/$PID/task/*; do
		awk -v tid="${t##*/}" -v c="$(cat "$t/comm" 2>/dev/null)" '{print tid, c, $14, $15}' "$t/stat" 2>/dev/null
	done
}
stats_to() { [ -x "$STATS" ] && "$STATS" "$SERVER" >"$1" 2>/dev/null || : >"$1"; }
# warm-up (connect, first-touch of the producer pool)
"$SEND" --server "$SERVER" --transport rdma --count 4 --size "$BENCH_SIZE" --first-id 900000 --quiet
read -r dp0 all0 <<<"$(ticks)"
tdump >"$T/td0"
stats_to "$T/st0"
TIMEFORMAT='%U %S'
{ time "$SEND" --server "$SERVER" --transport rdma --count "$BENCH_COUNT" --size "$BENCH_SIZE" \
	--credits "$BENCH_CREDITS" "${REUSE[@]}" --json --quiet >"$T/send.json" 2>"$T/send.err"; } 2>"$T/send.time"
read -r dp1 all1 <<<"$(ticks)"
tdump >"$T/td1"
stats_to "$T/st1"
cat "$T/send.json"; echo
python3 - "$T/send.json" "$base" "$dp0" "$dp1" "$all0" "$all1" "$HZ" "$T/send.time" "$T/td0" "$T/td1" "$T/st0" "$T/st1" "$PID" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
base = float(sys.argv[2]); dp = (int(sys.argv[4]) - int(sys.argv[3])); al = (int(sys.argv[6]) - int(sys.argv[5]))
hz = float(sys.argv[7]); gb = d["bytes"] / 1e9
try:
    u, s = open(sys.argv[8]).read().split()[-2:]
    prod, prod_u = float(u) + float(s), float(u)
except Exception:
    prod = prod_u = float("nan")
def td(path):
    r = {}
    for line in open(path):
        tid, comm, u, s = line.split()
        r[tid] = (comm, int(u), int(s))
    return r
t0, t1 = td(sys.argv[9]), td(sys.argv[10])
threads = sorted(((t1[k][1] + t1[k][2] - t0.get(k, ("", 0, 0))[1] - t0.get(k, ("", 0, 0))[2],
                   t1[k][1] - t0.get(k, ("", 0, 0))[1], k, t1[k][0]) for k in t1), reverse=True)
def stats(path):
    r = {}
    for line in open(path):
        k, _, v = line.strip().partition(" ")
        try:
            r[k] = int(v)
        except ValueError:
            pass
    return r
s0, s1 = stats(sys.argv[11]), stats(sys.argv[12])
dl = {k: s1.get(k, 0) - s0.get(k, 0) for k in s1}
print(f"ingest       : {d['mb_s']:.1f} MB/s ({d['ok']} frames ok, {d['failed']} failed, transport {d['transport']})")
print(f"ratio        : {d['mb_s'] / base:.2f}x of ib_read_bw (target >= 0.9x)")
print(f"CPU per GB   : data-plane lcore {dp / hz / gb:.2f} s/GB, whole ingestd {al / hz / gb:.2f} s/GB,"
      f" ingest-send {prod / gb:.2f} s/GB (user {prod_u / gb:.2f}) ({gb:.2f} GB moved)")
main = sys.argv[13]
print("threads      : " + ", ".join(f"{c}{'(control)' if k == main else ''} {t / hz / gb:.2f} (user {u / hz / gb:.2f})"
                                    for t, u, k, c in threads if t > 0) + " s/GB"
      "  (persistence workers: the node's CRC-32C verify of every frame)")
if dl.get("rdmaPollerPolls"):
    print(f"poller       : {dl.get('rdmaReadsPosted', 0)} READs, {dl.get('rdmaCompletions', 0)} completions,"
          f" {dl['rdmaPollerPolls']} passes ({dl.get('rdmaPollerIdlePolls', 0)} idle),"
          f" {dl.get('rdmaPollerIdleSleeps', 0)} sleeps, busy {dl.get('rdmaPollerBusyNs', 0) / 1e9 / gb:.2f} s/GB")
print(f"ack latency  : RECEIVED p50 {d['latency_ms']['received']['p50']:.1f} ms, DURABLE p50 {d['latency_ms']['durable']['p50']:.1f} ms")
EOF

# ---- push: ib_write_bw, then ingest-send --transport rdma-write into the same ingestd
ib_bw ib_write_bw
wbase=$BW_MBS
echo "baseline W   : $wbase MB/s (BW average $BW_GBPS Gb/s)"
"$SEND" --server "$SERVER" --transport rdma-write --count 4 --size "$BENCH_SIZE" --first-id 800000 --quiet
stats_to "$T/sp0"
"$SEND" --server "$SERVER" --transport rdma-write --count "$BENCH_COUNT" --size "$BENCH_SIZE" \
	--first-id 500000 --credits "$BENCH_CREDITS" "${REUSE[@]}" --json --quiet >"$T/push.json" 2>"$T/push.err" \
	|| { cat "$T/push.err"; exit 1; }
stats_to "$T/sp1"
cat "$T/push.json"; echo
python3 - "$T/send.json" "$base" "$T/push.json" "$wbase" "$T/sp0" "$T/sp1" <<'EOF'
import json, sys
pull, base = json.load(open(sys.argv[1])), float(sys.argv[2])
push, wbase = json.load(open(sys.argv[3])), float(sys.argv[4])
def stats(path):
    r = {}
    for line in open(path):
        k, _, v = line.strip().partition(" ")
        try:
            r[k] = int(v)
        except ValueError:
            pass
    return r
s0, s1 = stats(sys.argv[5]), stats(sys.argv[6])
print(f"push         : {push['mb_s']:.1f} MB/s ({push['ok']} frames ok, {push['failed']} failed, transport {push['transport']},"
      f" {s1.get('pushGrants', 0) - s0.get('pushGrants', 0)} grants, memory windows {s1.get('pushMemoryWindow', 0)})")
print(f"push ratio   : {push['mb_s'] / wbase:.2f}x of ib_write_bw")
print(f"ack latency  : push RECEIVED p50 {push['latency_ms']['received']['p50']:.1f} ms, DURABLE p50 {push['latency_ms']['durable']['p50']:.1f} ms")
print(f"summary      : pull {pull['mb_s']:.1f} MB/s = {pull['mb_s'] / base:.2f}x ib_read_bw ({base:.1f} MB/s);"
      f" push {push['mb_s']:.1f} MB/s = {push['mb_s'] / wbase:.2f}x ib_write_bw ({wbase:.1f} MB/s)")
EOF
kill -TERM "$PID"; wait "$PID" || true; PID=

# ---- scaling: N dataplane lcores, N producers at once, against N-QP perftest
[ "$BENCH_SCALE" = 1 ] || exit 0
maxn=$BENCH_SCALE_MAX
[ $((maxn + 1)) -le "$(nproc)" ] || maxn=$(($(nproc) - 1))
[ "$maxn" -ge 1 ] || { echo "scaling: needs 2 vCPUs or more"; exit 0; }
# scale_row MODE N: ingestd with N dataplane lcores, N producers of MODE (rdma | rdma-write)
# at once; sets ROW_MBS and ROW_LCORES (frames per lcore, "a/b/c")
scale_row() {
	local mode=$1 n=$2 k pids=() port
	"$INGESTD" --listen 127.0.0.1:0 --data-dir "$T/sdata" --rdma-dev "$RXE_DEV" --lcores "0-$n" \
		--pool "$BENCH_SIZE:$((n * (BENCH_CREDITS + 4)))" --workers "$BENCH_WORKERS" --sink null \
		--credits "$BENCH_CREDITS" --rdma on --poll-mode "$BENCH_POLL" --port-file "$T/sport" \
		--log-level warn >"$T/singestd.log" 2>&1 &
	PID=$!
	for _ in $(seq 1 300); do [ -s "$T/sport" ] && break; sleep 0.1; done
	[ -s "$T/sport" ] || { cat "$T/singestd.log"; exit 1; }
	port=$(tr -dc '0-9' <"$T/sport")
	for k in $(seq 1 "$n"); do
		"$SEND" --server "127.0.0.1:$port" --transport "$mode" --count "$BENCH_SCALE_COUNT" \
			--size "$BENCH_SIZE" --credits "$BENCH_CREDITS" --first-id $((k * 100000)) \
			--wafer "scale-$k" "${REUSE[@]}" --json --quiet >"$T/scale-$k.json" 2>"$T/scale-$k.err" &
		pids+=($!)
	done
	for k in "${pids[@]}"; do wait "$k" || { cat "$T"/scale-*.err; exit 1; }; done
	ROW_MBS=$(python3 -c 'import json, sys
ds = [json.load(open(p)) for p in sys.argv[1:]]
assert all(d["failed"] == 0 for d in ds)
print("%.1f" % (sum(d["bytes"] for d in ds) / 1e6 / max(d["wall_s"] for d in ds)))' "$T"/scale-*.json)
	ROW_LCORES=$("$STATS" "127.0.0.1:$port" | awk '$1 ~ /^lcore\.[0-9]+\.framesReceived$/ {
		printf "%s%s", sep, $2; sep = "/" }')
	kill -TERM "$PID"; wait "$PID" || true; PID=
	rm -rf "$T/sdata" "$T"/scale-*.json "$T/sport"
}
echo
echo "scaling: $BENCH_SIZE frames, $BENCH_SCALE_COUNT per producer, null sink, $(nproc) vCPU; aggregate = all producers' bytes / the longest producer's time"
printf '%-10s %7s %9s %12s %20s %7s  %s\n' mode lcores producers "ingest MB/s" "perftest -q N MB/s" ratio "frames per lcore"
for mode in rdma rdma-write; do
	tool=ib_read_bw
	[ "$mode" = rdma-write ] && tool=ib_write_bw
	for n in $(seq 1 "$maxn"); do
		ib_bw "$tool" "$BENCH_SCALE_COUNT" "$n" >/dev/null
		scale_row "$mode" "$n"
		printf '%-10s %7s %9s %12s %20s %7s  %s\n' "$mode" "$n" "$n" "$ROW_MBS" "$BW_MBS ($tool)" \
			"$(awk -v a="$ROW_MBS" -v b="$BW_MBS" 'BEGIN{printf "%.2fx", a / b}')" "$ROW_LCORES"
	done
done
