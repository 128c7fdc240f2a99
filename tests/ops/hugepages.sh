#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# hugepages.sh BUILD_DIR none|reserved - ingestd's default --hugepages auto on this host.
#  none: a pool larger than the free hugepages of its node goes on 4 KiB pages with ONE
#    warning that names the pages and the command that reserves them; ingest-doctor's
#    memory.hugepages fix says the same; frames are stored; --hugepages on refuses to
#    start with the same advice in one line (exit 2, as --check-config).
#  reserved (root): deploy/'s ingest-hugepages reserves the pages on node 0 (the pool's
#    node here), ingestd puts the pool on them (its log, its mappings' KernelPageSize),
#    frames are stored and verified, ingest-doctor passes; the host's hugepage count is
#    restored afterwards. Other processes that take hugepages meanwhile are allowed for.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
MODE=${2:?usage: hugepages.sh BUILD_DIR none|reserved}
ing_test_setup ops-hugepages "${1:-}" ingest-send ingest-verify ingest-doctor
HP=$BUILD/deploy/ingest-hugepages
ing_need_built "$HP"
T=$TMP
NR_FILE=/sys/devices/system/node/node0/hugepages/hugepages-2048kB/nr_hugepages
FREE_FILE=/sys/devices/system/node/node0/hugepages/hugepages-2048kB/free_hugepages
SAVED_NR=
CLEANUP_EXTRA='if [ -n "$SAVED_NR" ]; then echo "$SAVED_NR" >"$NR_FILE"; fi'
[ "$(sed -n 's/^Hugepagesize: *\([0-9]*\) kB/\1/p' /proc/meminfo)" = 2048 ] ||
	{ echo "NOT RUN: the default hugepage size here is not 2 MiB"; exit 77; }
[ -f "$FREE_FILE" ] || { echo "NOT RUN: no per-node hugepage counts (NUMA node 0)"; exit 77; }

send_and_verify() {   # [SIZES]
	timeout 60 "$SEND" --server "$ING_SERVER" --transport grpc --count 6 --sizes "${1:-256K-2M}" \
		--wafer "HP-$MODE" --manifest "$T/m" --json --quiet >"$T/send.json" || fail "ingest-send exited $?"
	[ "$(json "$T/send.json" 'ok')" = 6 ] || fail "not 6 frames ok: $(cat "$T/send.json")"
	timeout 60 "$VERIFY" --data-dir "$T/data" --manifest "$T/m" --quiet || fail "ingest-verify"
}

if [ "$MODE" = none ]; then
	# the host's hugepages are shared with whatever else runs here: a pool is made larger
	# than what is free at that moment, and a start that found enough anyway is tried again
	for attempt in 1 2 3; do
		free=$(cat "$FREE_FILE")
		pages=$(( free + 8 ))
		pool="2M:$pages"
		step "none: $free hugepages free on node 0, pool $pool needs $pages"
		ing_start "$INGESTD" "$T/port" "$T/ingestd.log" --data-dir "$T/data" --pool "$pool" --workers 1 \
			--pool-node 0 --log-format text
		PID=$ING_PID
		grep -q 'pool on hugepages' "$T/ingestd.log" || break
		echo "(another process reserved hugepages meanwhile: again)"
		ing_term_pid
	done
	n=$(grep -c 'WARN.*pool on 4 KiB pages' "$T/ingestd.log" || true)
	[ "$n" = 1 ] || fail "$n warnings about the pool's pages, want exactly one"
	warn=$(grep 'WARN.*pool on 4 KiB pages' "$T/ingestd.log")
	echo "$warn"
	want="'ingest-hugepages --pages $pages --node 0'"
	grep -qF "$want" <<<"$warn" || fail "the warning does not say $want"
	grep -q 'systemctl enable ingest-hugepages' <<<"$warn" || fail "the warning does not name the persistent set-up"
	grep -q "pool $pool: $pages slots, .*, 4 KiB pages, node 0" "$T/ingestd.log" || fail "no 'pool ... 4 KiB pages' line"
	send_and_verify
	ing_term_pid

	step "none: ingest-doctor says the same"
	# from here on nothing is mapped: a margin far above what another run reserves
	free=$(cat "$FREE_FILE")
	pages=$(( free + 256 ))
	pool="2M:$pages"
	want="'ingest-hugepages --pages $pages --node 0'"
	"$DOCTOR" --pool-bytes "$(( pages * 2 ))M" --pool-node 0 --json >"$T/doctor.json" || true
	python3 - "$T/doctor.json" "$want" <<'EOF' || fail "ingest-doctor's memory.hugepages"
import json, sys
d = json.load(open(sys.argv[1]))
c = [k for k in d["checks"] if k["name"] == "memory.hugepages"][0]
print("doctor:", c["status"], c["detail"], "| fix:", c["fix"])
assert c["status"] == "WARN", c
assert sys.argv[2] in c["fix"], c["fix"]
EOF

	step "none: ingest-doctor without --pool checks the pool ingestd starts with by default"
	# the pages ingestd's default pool needs, from its start (the INFO line when enough are
	# free, else the warning), against the doctor's without any pool flag
	ing_start "$INGESTD" "$T/port" "$T/ingestd-default.log" --data-dir "$T/data3" --workers 1 \
		--pool-node 0 --log-format text
	PID=$ING_PID
	node_pages=$(sed -n -e 's/.*pool on hugepages: \([0-9]*\) x 2 MiB needed.*/\1/p' \
		-e "s/.*'ingest-hugepages --pages \([0-9]*\) --node 0'.*/\1/p" "$T/ingestd-default.log" | head -n1)
	ing_term_pid
	[ -n "$node_pages" ] || fail "ingestd's default pool: neither 'pool on hugepages' nor the warning: $(grep -i huge "$T/ingestd-default.log")"
	"$DOCTOR" --pool-node 0 --json >"$T/doctor-default.json" || true
	python3 - "$T/doctor-default.json" "$node_pages" <<'EOF2' || fail "ingest-doctor's default pool is not ingestd's"
import json, re, sys
d = json.load(open(sys.argv[1]))
c = [k for k in d["checks"] if k["name"] == "memory.hugepages"][0]
print("doctor (no --pool):", c["status"], c["detail"], "| fix:", c["fix"])
m = re.search(r"\((\d+) x 2 MiB\)", c["detail"]) or re.search(r"--pages (\d+)", c["fix"] or "")
assert m and m.group(1) == sys.argv[2], "ingestd's default pool needs %s pages" % sys.argv[2]
EOF2
	echo "ingestd's default pool and the doctor's: $node_pages x 2 MiB"

	step "none: --hugepages on refuses to start (and --check-config says so), with the same advice"
	for check in "" --check-config; do
		rc=0
		timeout 60 "$INGESTD" --listen 127.0.0.1:0 --data-dir "$T/data2" --pool "$pool" --workers 1 \
			--pool-node 0 --hugepages on $check >"$T/on.log" 2>&1 || rc=$?
		[ "$rc" = 2 ] || fail "--hugepages on $check without hugepages exited $rc (want 2): $(tail -3 "$T/on.log")"
		[ "$(wc -l <"$T/on.log")" = 1 ] || fail "--hugepages on $check: more than one line: $(cat "$T/on.log")"
		grep -qF -- "--pool '$pool' needs $pages x 2 MiB hugepages, " "$T/on.log" &&
			grep -qF -- " free (--hugepages on): reserve $pages x 2 MiB hugepages on node 0: $want" "$T/on.log" ||
			fail "--hugepages on $check: $(cat "$T/on.log")"
	done
	cat "$T/on.log"
	echo "PASS: no hugepages: one warning with the fix, the doctor agrees, frames stored"
	exit 0
fi

[ "$MODE" = reserved ] || fail "mode $MODE: none or reserved"
if [ "$(id -u)" != 0 ]; then
	echo "NOT RUN: func.ops.hugepages_reserved reserves hugepages: it needs root"
	exit 77
fi
[ -w "$NR_FILE" ] || { echo "NOT RUN: $NR_FILE is not writable here"; exit 77; }
SAVED_NR=$(cat "$NR_FILE")
# 1 MiB slots: each takes a whole 2 MiB page, and the largest frame stays 1 MiB
pool=1M:8
# other processes on this host (any ingestd: auto is the default) take free hugepages as
# they start: the reservation leaves room for them, and is made again if they took it all
for attempt in 1 2 3; do
	step "reserved: ingest-hugepages --pages 264 --node 0 (the pool's 8, and room for other runs)"
	if ! "$HP" --pages 264 --node 0 >"$T/hp.txt" 2>&1; then
		cat "$T/hp.txt"
		grep -q 'other processes took them' "$T/hp.txt" || fail "ingest-hugepages failed"
		continue
	fi
	cat "$T/hp.txt"
	ing_start "$INGESTD" "$T/port" "$T/ingestd.log" --data-dir "$T/data" --pool "$pool" --workers 1 \
		--pool-node 0 --log-format text
	PID=$ING_PID
	grep -q 'pool on hugepages: 8 x 2 MiB needed' "$T/ingestd.log" && break
	echo "(the free hugepages were taken by another process meanwhile: again)"
	ing_term_pid
done
grep -q 'pool on hugepages: 8 x 2 MiB needed' "$T/ingestd.log" || fail "ingestd did not choose hugepages"
grep -q "pool $pool: 8 slots, .*, hugepages, node 0" "$T/ingestd.log" || fail "the pool is not on hugepages"
if grep -q 'WARN.*pool .*4 KiB pages' "$T/ingestd.log"; then fail "a 4 KiB pages warning with hugepages free"; fi
grep -q "max frame 1048576," "$T/ingestd.log" || fail "the largest frame is not the class's 1 MiB: $(grep 'max frame' "$T/ingestd.log")"
# the pool's region: one mapping of 16 MiB (8 slots of a 2 MiB page) on 2 MiB pages
python3 - "$PID" <<'EOF' || fail "no 16 MiB mapping on 2 MiB pages in ingestd's smaps"
import re, sys
cur = None
for line in open("/proc/%s/smaps" % sys.argv[1]):
    m = re.match(r"^([0-9a-f]+)-([0-9a-f]+) ", line)
    if m:
        cur = int(m.group(2), 16) - int(m.group(1), 16)
    elif line.startswith("KernelPageSize:") and line.split()[1] == "2048" and cur == 16 << 20:
        print("pool region: 16 MiB, KernelPageSize 2048 kB")
        sys.exit(0)
sys.exit(1)
EOF
send_and_verify 256K-1M
ing_term_pid
"$DOCTOR" --pool-bytes 16M --pool-node 0 --json >"$T/doctor.json" || true
python3 - "$T/doctor.json" <<'EOF' || fail "ingest-doctor's memory.hugepages with pages reserved"
import json, sys
c = [k for k in json.load(open(sys.argv[1]))["checks"] if k["name"] == "memory.hugepages"][0]
print("doctor:", c["status"], c["detail"])
assert c["status"] == "PASS", c
EOF
echo "PASS: hugepages reserved by ingest-hugepages: the pool is on them, frames stored"
