# SPDX-License-Identifier: Apache-2.0
# tests/fleet/fleet_lib.sh - three (or more) real ingestd on loopback for the fleet tests,
# each with its own data dir, started and always stopped (EXIT trap) by the test. Source
# after tests/lib.sh with BUILD and TMP set; the test defines fail().
#   node_start I [ARGS...]   start node I (port picked by the kernel the first time, the
#                            same port on a restart); sets NODE_PID[I], NODE_ADDR[I]
#   node_stop I              SIGTERM, wait (20 s at most); fails unless exit 0
#   node_gate I              before node_start I: the node runs with fsync_gate.so
#                            (tests/fleet/fsync_gate.c), its gate open
#   gate_close I             close node I's gate now (after node_start I: its start syncs
#                            its catalog), before the producer starts: node I can make no
#                            frame DURABLE, so the producer cannot end before the test acts,
#                            however fast it runs (a gate closed after N acks lost that race
#                            in the Soft-RoCE guest: the producer had ended)
#   hold_received I [N]      close node I's gate, if gate_close did not (its fdatasync waits
#                            from now on), and wait
#                            (60 s at most) until a sync call waits in it (<gate>.waiting:
#                            the frames of that persistence batch cannot become DURABLE)
#                            and Stats shows N (1) frames RECEIVED and not DURABLE
#                            (received - durable - failed); they stay so until the test
#                            kills, stops or releases the node: a moment the test controls.
#                            Sets HELD (received - durable - failed then) and HELD_RECEIVED
#                            (framesReceived then); with FLEET_STATS (tests/rxe/rxe_stats)
#                            Stats is read with it, not python
#   release I                open node I's gate again
#   now_ms                   wall clock in ms (no process started)
#   nodes_servers            "addr1,addr2,..." of the nodes started so far
#   node_of_addr ADDR        I of the node with that address
#   verify_node I MANIFEST [--allow-missing]  ingest-verify of node I's data dir: sets
#                            V_OK V_BAD V_MISSING (the JSON summary)
#   fleet_log_tails          the tail of every node log and *.err in TMP on stderr: what a
#                            test's fail() prints after its message
#   fleet_guest_finish       EXIT trap of a test in the Soft-RoCE guest (FLEET_KEEP=1: the
#                            guest's scratch goes with it): the node logs and *.err copied to
#                            ING_RXE_OUT, then fleet_cleanup
# With FLEET_PG=1 (set before sourcing; tests/fleet/pg_lib.sh sourced too) the nodes run
# with --node-id nodeI and the fleet catalog of a temporary PostgreSQL (fleet_pg_start):
#   fleet_pg_verify MANIFEST  every running node's export lag drains to 0, then
#                            ingest-verify --fleet over every node's data dir: sets
#                            F_MISSING F_BAD F_DUPLICATES F_COPIES
INGESTD=$BUILD/apps/ingestd VERIFY=$BUILD/apps/ingest-verify
# FLEET_SEND: another ingest-send (e.g. the ASan tree's) against these nodes
SEND=${FLEET_SEND:-$BUILD/apps/ingest-send}
declare -a NODE_PID NODE_ADDR NODE_PORT NODE_ID NODE_GATE
NODE_N=0
# extra ingestd flags for every node (e.g. the fleet catalog), set by the test
NODE_ARGS=${NODE_ARGS:-}

fleet_cleanup() {
	local i
	[ "${FLEET_PG:-0}" = 1 ] && { pg_cleanup || true; }
	for i in "${!NODE_PID[@]}"; do
		local p=${NODE_PID[$i]}
		[ -n "$p" ] || continue
		kill -CONT "$p" 2>/dev/null || true
		kill -KILL "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	[ -n "${SEND_PID:-}" ] && { kill -KILL "$SEND_PID" 2>/dev/null || true; wait "$SEND_PID" 2>/dev/null || true; }
	if [ "${FLEET_KEEP:-0}" = 1 ]; then echo "kept $TMP"; else rm -rf "$TMP"; fi
}

fleet_log_tails() {
	local l
	for l in "$TMP"/node*.log "$TMP"/*.err; do
		[ -f "$l" ] || continue
		echo "--- $l (tail) ---" >&2
		tail -n 25 "$l" >&2
	done
}

fleet_guest_finish() {
	cp "$TMP"/node*.log "$TMP"/*.err "${ING_RXE_OUT:?}/" 2>/dev/null || true
	fleet_cleanup
}

node_start() {
	local i=$1
	shift
	local listen=127.0.0.1:${NODE_PORT[$i]:-0} pf=$TMP/port$i log=$TMP/node$i.log
	local -a fleet=()
	if [ "${FLEET_PG:-0}" = 1 ]; then
		NODE_ID[$i]=node$i
		fleet=(--node-id "node$i" --fleet-db "$PG_CONNINFO" --fleet-heartbeat-ms 500)
	fi
	rm -f "$pf"
	local -a env=()
	[ -n "${NODE_GATE[$i]:-}" ] &&
		env=(env "LD_PRELOAD=$BUILD/tests/fsync_gate.so" "ING_TEST_FSYNC_GATE=${NODE_GATE[$i]}")
	# shellcheck disable=SC2086
	"${env[@]}" "$INGESTD" --listen "$listen" --port-file "$pf" --data-dir "$TMP/data$i" \
		--pool 1M:16,4M:8 --workers 1 --log-level info "${fleet[@]}" $NODE_ARGS "$@" >>"$log" 2>&1 &
	NODE_PID[$i]=$!
	local k
	for k in $(seq 1 600); do
		[ -s "$pf" ] && break
		kill -0 "${NODE_PID[$i]}" 2>/dev/null || fail "node $i exited during start-up (log: $log)"
		sleep 0.1
	done
	[ -s "$pf" ] || fail "node $i wrote no port file within 60 s"
	NODE_PORT[$i]=$(tr -dc '0-9' <"$pf")
	NODE_ADDR[$i]=127.0.0.1:${NODE_PORT[$i]}
	# the id routing hashes: --node-id when the test gives one (NODE_ID[i]), else the address
	[ -n "${NODE_ID[$i]:-}" ] || NODE_ID[$i]=${NODE_ADDR[$i]}
	[ "$i" -ge "$NODE_N" ] && NODE_N=$((i + 1))
	return 0
}

node_stop() {
	local i=$1 p=${NODE_PID[$1]} k rc=0
	kill -TERM "$p" 2>/dev/null || true
	for k in $(seq 1 600); do
		kill -0 "$p" 2>/dev/null || break
		sleep 0.1
	done
	kill -0 "$p" 2>/dev/null && { kill -KILL "$p"; fail "node $i did not stop within 60 s of SIGTERM"; }
	wait "$p" || rc=$?
	NODE_PID[$i]=
	[ "$rc" = 0 ] || fail "node $i exited $rc on SIGTERM (log: $TMP/node$i.log)"
}

node_gate() {
	[ -f "$BUILD/tests/fsync_gate.so" ] || fail "$BUILD/tests/fsync_gate.so not built"
	NODE_GATE[$1]=$TMP/gate$1
	rm -f "${NODE_GATE[$1]}"
}

gate_close() {
	[ -n "${NODE_GATE[$1]:-}" ] || fail "gate_close $1: node $1 was not started with node_gate"
	rm -f "${NODE_GATE[$1]}.waiting"
	touch "${NODE_GATE[$1]}"
}

hold_received() {
	local i=$1 n=${2:-1} k
	[ -n "${NODE_GATE[$i]:-}" ] || fail "hold_received $i: node $i was not started with node_gate"
	# closed already (gate_close): a call may wait in it and have said so
	[ -e "${NODE_GATE[$i]}" ] || gate_close "$i"
	for k in $(seq 1 600); do
		[ -e "${NODE_GATE[$i]}.waiting" ] && break
		sleep 0.1
	done
	[ -e "${NODE_GATE[$i]}.waiting" ] || fail "node $i: no sync call reached the closed gate within 60 s"
	if [ -n "${FLEET_STATS:-}" ]; then
		# the Soft-RoCE guest: tests/rxe/rxe_stats (a C client; no python start under TCG)
		for k in $(seq 1 600); do
			# (no process substitution: the guest has no /dev/fd)
			read -r HELD HELD_RECEIVED <<<"$("$FLEET_STATS" "${NODE_ADDR[$i]}" | awk '
				$1 == "framesReceived" { r = $2 } $1 == "framesDurable" { d = $2 }
				$1 == "framesFailed" { f = $2 } END { print r - d - f, r + 0 }')"
			[ "${HELD:-0}" -ge "$n" ] && return 0
			sleep 0.1
		done
		fail "node $i holds ${HELD:-no} frame(s) RECEIVED and not DURABLE after 60 s, not $n"
	fi
	$RPC wait "${NODE_ADDR[$i]}" "framesReceived - framesDurable - framesFailed >= $n" 60 \
		>"$TMP/held$i.json" || fail "node $i holds fewer than $n frame(s) RECEIVED and not DURABLE after 60 s: $(cat "$TMP/held$i.json")"
	{ read -r HELD; read -r HELD_RECEIVED; } < <(jfields "$TMP/held$i.json" \
		"framesReceived - framesDurable - framesFailed" framesReceived)
}

release() {
	rm -f "${NODE_GATE[$1]}" "${NODE_GATE[$1]}.waiting"
}

nodes_servers() {
	local i s=
	for i in $(seq 0 $((NODE_N - 1))); do
		[ -n "${NODE_ADDR[$i]:-}" ] && s=${s:+$s,}${NODE_ADDR[$i]}
	done
	echo "$s"
}

node_of_addr() {
	local i
	for i in $(seq 0 $((NODE_N - 1))); do
		[ "${NODE_ADDR[$i]:-}" = "$1" ] && { echo "$i"; return 0; }
	done
	echo -1
}

verify_node() {
	local i=$1 man=$2 out
	shift 2
	out=$("$VERIFY" --data-dir "$TMP/data$i" --manifest "$man" --json --quiet "$@") || true
	# the three counters without a python start (slow on a loaded machine)
	V_OK=$(grep -o '"ok":[0-9]*' <<<"$out" | cut -d: -f2)
	V_BAD=$(grep -o '"bad":[0-9]*' <<<"$out" | cut -d: -f2)
	V_MISSING=$(grep -o '"missing":[0-9]*' <<<"$out" | cut -d: -f2)
	[ -n "$V_OK" ] && [ -n "$V_BAD" ] && [ -n "$V_MISSING" ] ||
		fail "ingest-verify of node $i gave no summary: $out"
}

# now_ms: wall clock in ms, without a process (bash's EPOCHREALTIME; a date process takes
# long under TCG), to compare with ingest-send's first_rerouted_durable_unix_ms
now_ms() {
	local t=${EPOCHREALTIME//[.,]/}
	echo $((t / 1000))
}

# jfields FILE EXPR...: several values of an ingest-send --json summary, one a line, from
# one python start (EXPR over the top-level keys, as lib.sh's json).
jfields() {
	python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))
for e in sys.argv[2:]: print(eval(e, {}, d))' "$@"
}

# wait_lines FILE N SECONDS: until FILE has N lines not starting with '#'.
wait_lines() {
	local k c
	for k in $(seq 1 $(($3 * 10))); do
		c=$(grep -vc '^#' "$1" 2>/dev/null || true)
		[ "${c:-0}" -ge "$2" ] && return 0
		sleep 0.1
	done
	fail "$1: fewer than $2 lines after $3 s"
}

# check_placement PLACEMENT MANIFEST: every manifest frame has a DURABLE ack in PLACEMENT
# (a line 'frame wafer node resends'), and each node holds, byte for byte and in its
# catalog, every frame it acked. Sets COPIES_TWICE: frames found intact on more than one
# node (a re-send of a frame the failed node had stored too). Fails on any bad copy.
check_placement() {
	local pl=$1 man=$2 i
	rm -f "$TMP"/acked-*.man
	# awk, not python: a python start costs 10-20 s in the Soft-RoCE guest
	awk -v tmp="$TMP" '
		FNR == 1 { file++ }
		/^#/ { next }
		file == 1 { placed[$2 SUBSEP $1] = $3; next }
		{
			k = $2 SUBSEP $1
			if (!(k in placed)) { if (++miss <= 3) ex = ex " " $2 "/" $1; next }
			n = placed[k]; gsub(":", "_", n); f = tmp "/acked-" n ".man"
			if (!(f in seen)) { seen[f] = 1; print "# ingest-send manifest v2: frame_id wafer length crc32c source" > f }
			print > f
		}
		END { if (miss) { printf "FAIL: %d manifest frames without a DURABLE ack, e.g.%s\n", miss, ex; exit 1 } }
	' "$pl" "$man" || fail "placement does not cover the manifest"
	local total=0
	for i in $(seq 0 $((NODE_N - 1))); do
		local sub=$TMP/acked-${NODE_ID[$i]//:/_}.man
		if [ -f "$sub" ]; then
			verify_node "$i" "$sub"
			[ "$V_BAD" = 0 ] && [ "$V_MISSING" = 0 ] ||
				fail "node $i lost ($V_MISSING) or corrupted ($V_BAD) frames it acked DURABLE"
		fi
		verify_node "$i" "$man" --allow-missing
		[ "$V_BAD" = 0 ] || fail "node $i holds $V_BAD bad copies"
		total=$((total + V_OK))
	done
	COPIES_TWICE=$((total - $(grep -vc '^#' "$man")))
}

RPC="/usr/bin/python3 $(dirname "${BASH_SOURCE[0]}")/fleet_rpc.py"
export FLEET_RPC_STUBS=$TMP/stubs

# wait_members ADDR N [SECONDS]: until rpc Members of the node at ADDR lists N ACTIVE
# members (PostgreSQL membership: a node is listed after its first heartbeat).
wait_members() {
	local addr=$1 n=$2 secs=${3:-30} k got=
	for k in $(seq 1 $((secs * 5))); do
		got=$($RPC members "$addr" 2>/dev/null | /usr/bin/python3 -c "
import json, sys
print(sum(1 for m in json.load(sys.stdin)['members'] if m['state'] == 'MEMBER_ACTIVE'))" 2>/dev/null) || got=
		[ "$got" = "$n" ] && return 0
		sleep 0.2
	done
	fail "Members of $addr lists ${got:-no} ACTIVE member(s) after $secs s, want $n"
}

fleet_pg_start() {
	pg_start
	echo "PostgreSQL on 127.0.0.1:$PG_PORT"
}

fleet_pg_verify() {
	local man=$1 i
	local -a dirs=()
	for i in $(seq 0 $((NODE_N - 1))); do
		dirs+=(--data-dir "${NODE_ID[$i]}=$TMP/data$i")
		[ -n "${NODE_PID[$i]:-}" ] || continue
		$RPC wait "${NODE_ADDR[$i]}" "fleetExportLagRows == 0 and fleetPgUp" 60 >"$TMP/lag$i.json" ||
			fail "node $i: export lag not 0 after 60 s: $(cat "$TMP/lag$i.json")"
	done
	"$VERIFY" --fleet "$PG_CONNINFO" --manifest "$man" "${dirs[@]}" --json >"$TMP/fleet-verify.json" \
		2>"$TMP/fleet-verify.err" || fail "ingest-verify --fleet: $(cat "$TMP/fleet-verify.json" "$TMP/fleet-verify.err")"
	{ read -r F_MISSING; read -r F_BAD; read -r F_DUPLICATES; read -r F_COPIES; } < <(
		jfields "$TMP/fleet-verify.json" missing bad duplicates copies)
}
