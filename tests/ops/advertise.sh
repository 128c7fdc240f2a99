#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# advertise.sh BUILD_DIR - what a node listening on every address tells the fleet
# (Members, as ingest-stat shows it):
#  1. --listen 0.0.0.0:0 without --advertise: the member's address and id are the default
#     route's interface's IPv4 address (what `ip route` / `ip addr` say; without a default
#     route, the first global address up) with the bound port, never 0.0.0.0; one WARN
#     at start says so and names --advertise;
#  2. --advertise HOST:PORT wins: Members says it, no such WARN;
#  3. --listen 127.0.0.1:0: the listen address with the bound port, no WARN.
set -uo pipefail
. "$(dirname "$0")/../lib.sh"

ing_test_setup ops-advertise "${1:-}" ingest-stat

# the address this host's routing says other hosts reach it at
dev=$(ip -4 route show default 2>/dev/null | awk '{ for (i = 1; i < NF; i++) if ($i == "dev") { print $(i + 1); exit } }')
if [ -n "$dev" ]; then
	want=$(ip -4 -o addr show dev "$dev" scope global | awk '{ sub(/\/.*/, "", $4); print $4; exit }')
else
	want=$(ip -4 -o addr show up scope global | awk '{ sub(/\/.*/, "", $4); print $4; exit }')
fi
[ -n "$want" ] || { echo "NOT RUN: this host has no global IPv4 address to advertise"; exit 77; }
echo "this host: default route via ${dev:-(none)}, address $want"

# start LISTEN [ARGS...]: ingestd, its port in $port, its Members rows in $TMP/members
start() {
	local listen=$1
	shift
	rm -f "$TMP/port"
	"$INGESTD" --listen "$listen" --port-file "$TMP/port" --data-dir "$TMP/data" --pool 1M:4 \
		--workers 1 "$@" >"$TMP/ingestd.log" 2>&1 &
	PID=$!
	ing_wait_port "$PID" "$TMP/port" "$TMP/ingestd.log"
	port=$(tr -dc '0-9' <"$TMP/port")
	"$STAT" --server "127.0.0.1:$port" >"$TMP/stat" 2>&1 || fail "ingest-stat: $(cat "$TMP/stat")"
	sed -n '/^Members/,$p' "$TMP/stat" >"$TMP/members"
	cat "$TMP/members"
}
warns() { grep -c "WARN.*advertising" "$TMP/ingestd.log"; }

step "1. --listen 0.0.0.0:0: the default route's address, one WARN"
start 0.0.0.0:0
grep -q "^ *$want:$port  *$want:$port  *ACTIVE.*(this node)" "$TMP/members" ||
	fail "Members does not list this node as $want:$port (id and address)"
grep -q "0\.0\.0\.0" "$TMP/members" && fail "Members advertises 0.0.0.0"
[ "$(warns)" = 1 ] || fail "$(warns) WARN lines about the advertised address, want 1"
grep -q "WARN.*listening on 0.0.0.0:$port: advertising $want:$port (the address of ${dev:-}.*set --advertise HOST:PORT" \
	"$TMP/ingestd.log" || fail "the WARN does not say what and how: $(grep advertising "$TMP/ingestd.log")"
ing_term_pid

step "2. --advertise wins, no WARN"
start 0.0.0.0:0 --advertise ingest-7.example:50051
grep -q "^ *ingest-7.example:50051  *ingest-7.example:50051  *ACTIVE" "$TMP/members" ||
	fail "Members does not say --advertise's ingest-7.example:50051"
[ "$(warns)" = 0 ] || fail "a WARN although --advertise was given"
ing_term_pid

step "3. a concrete listen address: itself, no WARN"
start 127.0.0.1:0
grep -q "^ *127.0.0.1:$port  *127.0.0.1:$port  *ACTIVE" "$TMP/members" || fail "Members does not say 127.0.0.1:$port"
[ "$(warns)" = 0 ] || fail "a WARN for a concrete listen address"
ing_term_pid
echo "PASS: advertised address"
