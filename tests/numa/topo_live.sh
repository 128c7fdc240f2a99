#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# ingest-topo on the live machine (tests/numa.cmake: func.numa.topo_live).
# usage: topo_live.sh PATH/TO/ingest-topo
set -uo pipefail
TOPO=${1:?usage: topo_live.sh ingest-topo}
fail() { echo "topo_live: FAIL: $*" >&2; exit 1; }
[ -x "$TOPO" ] || fail "$TOPO is not built"
unset HWLOC_XMLFILE

out=$("$TOPO" --data-dir /tmp) || fail "ingest-topo exit $?"
echo "$out"
grep -q '^topology (live):' <<<"$out" || fail "no topology header"
grep -q '^placement plan' <<<"$out" || fail "no plan"
grep -q '^  EAL           : -l ' <<<"$out" || fail "no EAL arguments"

json=$("$TOPO" --json --data-dir /tmp) || fail "ingest-topo --json exit $?"
echo "$json"
TOPO_JSON=$json python3 - <<'PY' || fail "JSON invalid or plan incomplete"
import json, os
d = json.loads(os.environ["TOPO_JSON"])
t, p = d["topology"], d["plan"]
assert t["source"] == "live" and len(t["nodes"]) >= 1 and t["pus"] >= 1
cpus = set()
for n in t["nodes"]:
    for part in filter(None, n["cpus"].split(",")):
        a, _, b = part.partition("-")
        cpus.update(range(int(a), int(b or a) + 1))
assert p["control_cpu"] in cpus, p
assert p["dataplane_cpus"] and all(c in cpus for c in p["dataplane_cpus"]), p
assert p["control_cpu"] not in p["dataplane_cpus"]
assert p["poll_mode_hint"] in ("busy", "adaptive")
assert p["eal"]["main_lcore"] == p["control_cpu"]
# the config lines that rebuild this plan, and a region for the pool
assert "control-cpu = %d\n" % p["control_cpu"] in p["config"], p["config"]
assert p["regions"] and p["regions"][0]["node"] == p["pool_node"], p
assert len(p["rails"]) == len(t["rdma"]) or p["warnings"], p
PY
echo "topo_live: OK"
