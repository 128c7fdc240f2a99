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
#  5. bad usage exits 2 with a message naming the option.
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
	--sizes 1M --loads 20,50 --capacity-s 1.5 --warmup 0.3 --duration 1 --json \
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

step "bad usage exits 2"
rc=0
"$BENCH" --loads 20,abc --out "$TMP/x" 2>"$TMP/usage.err" || rc=$?
[ "$rc" -eq 2 ] || fail "--loads 20,abc: exit $rc, want 2"
grep -q -- '--loads' "$TMP/usage.err" || fail "the message does not name --loads"
echo "PASS"
