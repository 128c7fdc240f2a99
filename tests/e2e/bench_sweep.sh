#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench_sweep.sh BUILD_DIR - ingest-bench against a real ingestd on loopback, a tiny sweep
# (1 MiB frames, 2 load points of about a second each). Asserts what a user of the
# benchmark checks, never a timing:
#  1. it exits 0 and the results directory holds report.md, results.json, points.csv,
#     timeline.csv and the PNG plots (real PNGs, embedded by report.md);
#  2. results.json: the run's parameters, host and git revision; a capacity; both floors;
#     every point with every stage (producer and node) counted for every durable frame, and
#     percentiles that are ordered (p50 <= p90 <= p95 <= p99 <= p99.9 <= max);
#  3. points.csv: one row per point with the header's columns;
#  4. the node's Stats carries the same stage histograms (StatsReply.stageLatency), counted
#     for every durable frame;
#  5. bad usage exits 2 with a message naming the option;
#  6. a report another can be compared with: the node as it said (version = ingestd
#     --version's, the pool slots it was started with, its framesDurable = Stats' after
#     the run, no other producer), this tool's git revision from the build (a commit of
#     this repository, not "unknown"), the machine's load before and after with the
#     warning exactly when the load was above 0.5 per CPU, --repeat 2: two repetitions
#     of every point with min <= median <= max, their frames adding up to the point's;
#     a plan line and an ETA on every point line;
#  7. TLS (--tls-ca, --tls-server-name) against a node with a certificate, with a token.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"

BUILD=${1:?usage: bench_sweep.sh BUILD_DIR}
BUILD=$(cd "$BUILD" && pwd)
INGESTD=$BUILD/apps/ingestd
BENCH=$BUILD/apps/ingest-bench
STATS=$BUILD/tests/rxe_stats
ing_need_built "$INGESTD" "$BENCH" "$STATS"
command -v gnuplot >/dev/null || { echo "FAIL: gnuplot is missing (deploy/install-deps.sh installs gnuplot-nox)" >&2; exit 1; }

TMP=$(mktemp -d /tmp/bench-sweep.XXXXXX)
PID=
cleanup() {
	ing_kill_pid
	rm -rf "$TMP"
}
trap cleanup EXIT
fail() {
	echo "FAIL: $*" >&2
	tail -n 30 "$TMP/bench.err" "$TMP/ingestd.log" >&2 2>/dev/null || true
	exit 1
}

step "ingestd on loopback"
ing_start "$INGESTD" "$TMP/port" "$TMP/ingestd.log" --data-dir "$TMP/data"
PID=$ING_PID
SERVER=$ING_SERVER

step "ingest-bench: 1 MiB frames, capacity then 20 % and 50 % open loop"
OUT=$TMP/out
timeout 120 "$BENCH" --server "$SERVER" --data-dir "$TMP/data" --out "$OUT" --git-rev test-rev \
	--sizes 1M --loads 20,50 --capacity-s 1.5 --warmup 0.3 --duration 1 --repeat 2 --json \
	>"$TMP/stdout.json" 2>"$TMP/bench.err" || fail "ingest-bench exited $?"
for f in report.md results.json points.csv timeline.csv latency_vs_load_grpc_1024K.png \
	cdf_grpc_1024K.png stages_p99_grpc_1024K.png throughput.png; do
	[ -s "$OUT/$f" ] || fail "$f missing or empty"
done
for f in "$OUT"/*.png; do
	[ "$(head -c 4 "$f" | tail -c 3)" = PNG ] || fail "$f is not a PNG"
	grep -q "($(basename "$f"))" "$OUT/report.md" || fail "report.md does not embed $(basename "$f")"
done
cmp -s "$OUT/results.json" "$TMP/stdout.json" || fail "--json output differs from results.json"

step "results.json: parameters, capacity, floors, every stage of every point"
/usr/bin/python3 - "$OUT/results.json" <<'PY' || fail "results.json check"
import json, sys
d = json.load(open(sys.argv[1]))
def need(c, what):
    if not c:
        sys.exit("results.json: " + what)
need(d["git_rev"] == "test-rev", "git_rev")
need(d["host"]["uname"] and d["host"]["cpus_online"] >= 1, "host")
need(d["params"]["loads_pct"] == [20.0, 50.0] and d["params"]["sizes"] == [1 << 20], "params")
need(d["params"]["transports"] == ["grpc"], "transports")
need(len(d["capacity"]) == 1 and d["capacity"][0]["fps"] > 0, "capacity")
fl = d["floors"][0]
need(fl["tcp_loopback_rtt"]["count"] >= 10 and fl["disk_write_fdatasync"]["count"] >= 10, "floors")
need(len(d["points"]) == 2, "two points")
stages = ["received", "durable", "node.received", "node.crc", "node.written", "node.synced",
          "node.catalogued", "node.ack", "node.total"]
for p in d["points"]:
    need(p["failed"] == 0 and p["ok"] > 0 and p["ok"] == p["sent"], "point %s frames" % p["load_pct"])
    need(abs(p["offered_fps"] - p["load_pct"] / 100 * d["capacity"][0]["fps"]) < 1e-6 * p["offered_fps"] + 0.01,
         "offered rate is the fraction of the capacity")
    for s in stages:
        h = p["stages"][s]
        need(h["count"] == p["ok"], "stage %s counts %d of %d frames" % (s, h["count"], p["ok"]))
        v = [h[k] for k in ("p50_ms", "p90_ms", "p95_ms", "p99_ms", "p999_ms", "max_ms")]
        need(v == sorted(v), "stage %s percentiles out of order: %s" % (s, v))
    need(p["stages"]["node.written"]["max_ms"] > 0, "the node reported a write stage")
PY

step "points.csv: a row per point"
[ "$(wc -l <"$OUT/points.csv")" -eq 3 ] || fail "points.csv: want header + 2 rows"
hdr=$(head -1 "$OUT/points.csv" | tr ',' '\n' | wc -l)
awk -F, -v n="$hdr" 'NR > 1 && NF != n { exit 1 }' "$OUT/points.csv" || fail "points.csv: ragged rows"
grep -q '^## grpc, 1.0 MiB frames' "$OUT/report.md" || fail "report.md: no section for the sweep"
grep -q 'TCP loopback round trip' "$OUT/report.md" || fail "report.md: no floors"
grep -q 'Bar (RECEIVED P99 at 50% load.*RECEIVED P99.9 at 50%' "$OUT/report.md" ||
	fail "report.md: no RECEIVED bar (P99 at 50 % vs 3x the unloaded P50, P99.9)"
/usr/bin/python3 - "$OUT/results.json" <<'PY' || fail "results.json: RECEIVED taken apart"
import json, sys
for p in json.load(open(sys.argv[1]))["points"]:
    st = p["stages"]
    for s in ("received.lag", "received.outside"):   # one sample per RECEIVED ack
        if st[s]["count"] != st["received"]["count"] or st[s]["max_ms"] > st["received"]["max_ms"]:
            sys.exit("%s: %s counts %d of %d RECEIVED acks, max %.3f ms vs %.3f" % (
                p["load_pct"], s, st[s]["count"], st["received"]["count"], st[s]["max_ms"],
                st["received"]["max_ms"]))
PY

step "Stats: the node's stage histograms, live"
durable=$(stat_of framesDurable)
[ "${durable:-0}" -gt 0 ] || fail "Stats: no durable frames"
for s in received crc written synced catalogued ack total; do
	n=$(stat_of "stage.$s.count")
	[ "$n" = "$durable" ] || fail "Stats: stage $s counted ${n:-none} of $durable durable frames"
done

step "a report that can be compared: node, tool, load, repetitions, plan"
VER=$("$INGESTD" --version | sed -n 's/^ingestd (h3000 ingest) //p')
SRC=$(cd "$(dirname "$0")/../.." && pwd)
after=$(stat_of framesDurable)
rc=0
/usr/bin/python3 - "$OUT/results.json" "$VER" "$after" "$(nproc)" "$SRC" <<'PY' || rc=$?
import json, subprocess, sys
d = json.load(open(sys.argv[1]))
ver, after, cpus, src = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
def need(c, what):
    if not c:
        sys.exit("results.json: " + what)
n = d["node"]
need(n["known"] and n["version"].endswith(" " + ver), "node version %r, ingestd --version %r" % (n["version"], ver))
need(n["pool_slots"] == 28 and n["max_frame"] == 64 << 20, "node pool: %d slots, max frame %d (started with the default pool 4M:16,16M:8,64M:4)" % (n["pool_slots"], n["max_frame"]))
need(n["frames_durable_after"] == after, "framesDurable after the run %d, Stats says %d" % (n["frames_durable_after"], after))
need(n["frames_of_others_during_run"] == 0, "frames of others: %d (this test is alone on the node)" % n["frames_of_others_during_run"])
need("GRPC_STREAM" in n["transports_available"], "transports %r" % n["transports_available"])
rev = d["git_rev_built"]
need(rev and not rev.startswith("unknown"), "git_rev_built %r" % rev)
h = rev.split("-dirty")[0].rsplit("-g", 1)[-1]
need(subprocess.run(["git", "-C", src, "cat-file", "-e", h + "^{commit}"]).returncode == 0,
     "git_rev_built %r is no commit of %s" % (rev, src))
need(d["tool_version"] == ver, "tool_version")
l = d["load"]
need(l["cpus"] == cpus and len(l["before"]) == 3 and len(l["after"]) == 3 and min(l["before"] + l["after"]) >= 0, "load %r" % l)
need(l["loaded"] == (l["before"][0] > l["loaded_per_cpu_threshold"] * cpus), "loaded flag vs its own numbers")
need(d["params"]["repeat"] == 2, "repeat")
for p in d["points"]:
    need(len(p["repetitions"]) == 2, "two repetitions")
    need(sum(r["ok"] for r in p["repetitions"]) == p["ok"], "repetitions' frames add up")
    for k, v in p["spread"].items():
        if k != "repetitions":
            need(v["min"] <= v["median"] <= v["max"], "spread %s %r" % (k, v))
print("node %s, %d slots; tool git %s; load %.2f before (%s); repetitions 2" % (
    n["version"], n["pool_slots"], rev, l["before"][0], "loaded" if l["loaded"] else "not loaded"))
sys.exit(0 if not l["loaded"] else 3)
PY
if [ "$rc" = 3 ]; then   # the machine was loaded: the warning in both places
	grep -q '^> \*\*Warning: the machine was loaded\*\*' "$OUT/report.md" || fail "loaded, and report.md does not warn"
	grep -q 'WARNING: the machine is loaded before the run' "$TMP/bench.err" || fail "loaded, and no warning on stderr"
elif [ "$rc" = 0 ]; then
	if grep -q 'the machine was loaded' "$OUT/report.md"; then fail "not loaded, and report.md warns"; fi
else
	fail "comparable report"
fi
grep -q "^| node | \`$SERVER\` ingestd h3000-ingestd $VER" "$OUT/report.md" || fail "report.md: no node line"
grep -q '^| machine load | load average ' "$OUT/report.md" || fail "report.md: no load line"
grep -q '^Spread over the 2 repetitions' "$OUT/report.md" || fail "report.md: no spread table"
grep -q '^ingest-bench: plan: 1 transport x 1 size: capacity (closed loop), then 2 loads x 2 repetitions of 1.0 s (+ 0.3 s warm-up) = 5 points; about .*, done about ' "$TMP/bench.err" ||
	fail "no plan line: $(head -3 "$TMP/bench.err")"
[ "$(grep -c '^\[[2-5]/5\] grpc 1.0 MiB load .*; ETA ' "$TMP/bench.err")" = 4 ] || fail "point lines with an ETA: $(grep ETA "$TMP/bench.err")"

step "TLS and a token"
command -v openssl >/dev/null || fail "openssl is missing"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$TMP/key.pem" \
	-out "$TMP/cert.pem" -days 2 -subj /CN=ingest-test -addext subjectAltName=DNS:ingest-test \
	>/dev/null 2>&1 || fail "openssl req"
printf '%s\n' "a-shared-secret-for-the-bench-0123" >"$TMP/token"
chmod 600 "$TMP/token"
ing_term_pid
ing_start "$INGESTD" "$TMP/port2" "$TMP/ingestd.log" --data-dir "$TMP/data2" --pool 1M:8 \
	--tls-cert "$TMP/cert.pem" --tls-key "$TMP/key.pem" --auth-token-file "$TMP/token"
PID=$ING_PID
timeout 120 "$BENCH" --server "$ING_SERVER" --tls-ca "$TMP/cert.pem" --tls-server-name ingest-test \
	--auth-token-file "$TMP/token" --out "$TMP/tls" --sizes 256K --loads 50 --capacity-fps 20 \
	--warmup 0.2 --duration 0.5 --no-plots 2>"$TMP/bench.err" || fail "ingest-bench over TLS exited $?"
[ "$(json "$TMP/tls/results.json" 'params["tls"]')" = True ] || fail "results.json: tls not recorded"
[ "$(json "$TMP/tls/results.json" 'node["known"]')" = True ] || fail "over TLS, the node's version not known"
[ "$(json "$TMP/tls/results.json" 'points[0]["ok"]')" -gt 0 ] || fail "over TLS, no frame stored"
grep -q '^| security | TLS, auth token |' "$TMP/tls/report.md" || fail "report.md: no security line"
# a rate too low for --duration (0.4 frames/s, a 0.5 s window: at most one frame): the window
# is lengthened to hold --min-frames 3, said on a line; exactly 3 frames are scheduled in it
timeout 120 "$BENCH" --server "$ING_SERVER" --tls-ca "$TMP/cert.pem" --tls-server-name ingest-test \
	--auth-token-file "$TMP/token" --out "$TMP/slow" --sizes 256K --loads 20 --capacity-fps 2 \
	--warmup 0 --duration 0.5 --min-frames 3 --no-plots 2>"$TMP/slow.err" ||
	fail "ingest-bench at 0.4 frames/s exited $? ($(tail -n 3 "$TMP/slow.err"))"
grep -q 'ingest-bench: 20% load: 0.40 frames/s offered: the window is 5.0 s, not --duration 0.5 s, to hold --min-frames 3' "$TMP/slow.err" ||
	fail "no line for the lengthened window: $(cat "$TMP/slow.err")"
[ "$(json "$TMP/slow/results.json" 'points[0]["sent"] + points[0]["unsent"]')" = 3 ] &&
	[ "$(json "$TMP/slow/results.json" 'points[0]["failed"]')" = 0 ] ||
	fail "the lengthened point did not schedule 3 frames: $(json "$TMP/slow/results.json" 'points[0]')"
echo "ok: a point too short for its rate is lengthened to hold --min-frames"
rc=0
timeout 60 "$BENCH" --server "$ING_SERVER" --out "$TMP/x" --sizes 256K --loads 50 --capacity-fps 20 \
	--duration 0.5 --no-plots --auth-token-file "$TMP/token" 2>"$TMP/err" || rc=$?
[ "$rc" = 1 ] || fail "cleartext against the TLS node: exit $rc, want 1: $(cat "$TMP/err")"
echo "ok: TLS with --tls-ca and --tls-server-name; cleartext against it exits 1"

step "bad usage exits 2"
rc=0
"$BENCH" --loads 20,abc --out "$TMP/x" 2>"$TMP/usage.err" || rc=$?
[ "$rc" -eq 2 ] || fail "--loads 20,abc: exit $rc, want 2"
grep -q -- '--loads' "$TMP/usage.err" || fail "the message does not name --loads"
rc=0
"$BENCH" --tls-cert "$TMP/cert.pem" --tls-ca "$TMP/cert.pem" 2>"$TMP/usage.err" || rc=$?
[ "$rc" -eq 2 ] && grep -q -- '--tls-cert and --tls-key go together' "$TMP/usage.err" || fail "--tls-cert alone: exit $rc: $(cat "$TMP/usage.err")"
rc=0
"$BENCH" --repeat 0 2>"$TMP/usage.err" || rc=$?
[ "$rc" -eq 2 ] && grep -q -- "--repeat: '0' is not a number in 1..20" "$TMP/usage.err" || fail "--repeat 0: exit $rc: $(cat "$TMP/usage.err")"
echo "PASS"
