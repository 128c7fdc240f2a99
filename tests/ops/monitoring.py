#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""monitoring.py BUILD_DIR SRC_DIR - deploy/monitoring against a live node and a real Prometheus.

 1. `promtool check rules deploy/monitoring/ingest-alerts.yml` passes;
 2. the Grafana dashboard is one JSON object with unique panel ids, each panel with a
    datasource, a grid position and at least one query; a query shows the sessions by
    state (ingest_sessions_by_state);
 3. every metric name in the rules' and the dashboard's PromQL exists in the /metrics of a
    live ingestd (fleet catalog and object store tier configured, both out of reach;
    peers; frames stored), Prometheus' own `up` excepted; histogram series (_bucket, _sum,
    _count) count as their family's; ingest-stat shows that node's export and tier lines;
 4. a real Prometheus scraping that node under a job name of its own (not "ingestd": the
    rules and the dashboard name no job) with the rule file loaded evaluates every rule
    without error (health "ok"), and every dashboard query (with $job and $instance = .*)
    runs; the throughput, failures, latency, ready and sessions panels return data; once the node
    stops, IngestNodeDown is pending for it;
 5. every alert has a runbook_url into docs/OPERATIONS.md whose anchor exists there.
Bounded: ~25 s, 120 s at most."""
import json
import os
import re
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from opslib import Run, http_get  # noqa: E402

build, src = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
ingestd = os.path.join(build, "apps", "ingestd")
send = os.path.join(build, "apps", "ingest-send")
stat = os.path.join(build, "apps", "ingest-stat")
RULES = os.path.join(src, "deploy", "monitoring", "ingest-alerts.yml")
DASH = os.path.join(src, "deploy", "monitoring", "ingest-dashboard.json")
PROM = shutil.which("prometheus") or "/usr/bin/prometheus"
PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"
for b in (ingestd, send, stat, PROM, PROMTOOL):
    if not os.access(b, os.X_OK):
        sys.exit(f"FAIL: {b} not found (deploy/install-deps.sh installs prometheus)")

run = Run("ops-monitoring.")
fail, wait_for = run.fail, run.wait_for


# ---- 1. promtool
r = subprocess.run([PROMTOOL, "check", "rules", RULES], capture_output=True, text=True)
if r.returncode != 0 or "SUCCESS" not in r.stdout:
    fail(f"promtool check rules: {r.stdout}{r.stderr}")
nrules = int(re.search(r"SUCCESS: (\d+) rules found", r.stdout).group(1))
print(f"ok: promtool check rules: {nrules} rules")

# ---- 2. the dashboard
dash = json.load(open(DASH))
panels = dash["panels"]
ids = [p["id"] for p in panels]
if len(set(ids)) != len(ids):
    fail(f"duplicate panel ids: {ids}")
queries = []
for p in panels:
    if not p.get("datasource") or "gridPos" not in p or not p.get("targets"):
        fail(f"panel {p.get('title')!r} lacks a datasource, grid position or query")
    queries += [(p["title"], t["expr"]) for t in p["targets"]]
queries += [("variable " + v["name"], v["query"]) for v in dash["templating"]["list"]]
rule_exprs = re.findall(r"^\s+expr: (.*)$", open(RULES).read(), re.M)
if len(rule_exprs) != nrules:
    fail(f"{len(rule_exprs)} exprs read from the rule file, promtool found {nrules} rules")
if not any("ingest_sessions_by_state" in e and re.search(r"by \([^)]*\bstate\b", e) for _, e in queries):
    fail("no dashboard query shows the sessions by state (ingest_sessions_by_state by state)")
print(f"ok: dashboard: {len(panels)} panels, {len(queries)} queries, sessions by state")

# ---- 5. no job name; every alert's runbook_url is an anchor of docs/OPERATIONS.md
text = open(RULES).read() + open(DASH).read()
if re.search(r'job\s*=\s*\\?"', text):
    fail("a rule or dashboard query names a scrape job: " + re.search(r'.{30}job\s*=\s*\\?".{20}', text).group(0))
ops_md = open(os.path.join(src, "docs", "OPERATIONS.md")).read()
anchors = set(re.findall(r'<a id="([^"]+)"></a>', ops_md))
anchors |= {re.sub(r"[^a-z0-9 -]", "", h.lower()).replace(" ", "-") for h in re.findall(r"^#+ (.*)$", ops_md, re.M)}
alerts = re.findall(r"^\s+- alert: (\w+)\n((?:\s{8,}.*\n)+)", open(RULES).read(), re.M)
if len(alerts) != nrules:
    fail(f"{len(alerts)} alerts parsed, promtool found {nrules} rules")
for name, body in alerts:
    m = re.search(r'runbook_url: "file:///usr/share/doc/h3000-ingest/docs/OPERATIONS\.md#([^"]+)"', body)
    if not m:
        fail(f"{name} has no runbook_url into docs/OPERATIONS.md")
    if m.group(1) not in anchors:
        fail(f"{name}'s runbook_url #{m.group(1)} is no anchor of docs/OPERATIONS.md")
print(f"ok: no job name in the rules or the dashboard; {len(alerts)} runbook_urls, each an anchor of "
      "docs/OPERATIONS.md")

# ---- 3. metric names
FUNCS = {"sum", "min", "max", "avg", "count", "topk", "bottomk", "rate", "irate", "increase",
         "changes", "resets", "delta", "deriv", "predict_linear", "histogram_quantile",
         "label_values", "abs", "clamp_min", "clamp_max", "and", "or", "unless", "bool",
         "offset", "by", "without", "on", "ignoring", "group_left", "group_right", "time",
         "vector", "scalar", "humanize"}


def names(expr):
    e = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    e = re.sub(r"\{[^}]*\}", "", e)
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", e)
    e = re.sub(r"\[[^\]]*\]", "", e)
    e = re.sub(r"label_values\(([a-zA-Z_:][a-zA-Z0-9_:]*),[^)]*\)", r"\1", e)
    out = set()
    for m in re.finditer(r"[a-zA-Z_:][a-zA-Z0-9_:]*", e):
        rest = e[m.end():].lstrip()
        if m.group(0) in FUNCS or rest.startswith("("):
            continue
        if m.start() and (e[m.start() - 1].isdigit() or e[m.start() - 1] == "."):
            continue   # 4e3, 10m
        out.add(m.group(0))
    return out


used = {}
for what, expr in queries + [("rule", e) for e in rule_exprs]:
    for n in names(expr):
        used.setdefault(n, what)
if len(used) < 20:
    fail(f"only {len(used)} metric names found in the rules and the dashboard: {sorted(used)}")

# a node with every optional part on: a fleet catalog and an object store tier (both out of
# reach: their families are there all the same, the alerts' inputs at their worst)
dead_fleet_db = "host=127.0.0.1 port=1 dbname=fleet connect_timeout=1"
creds = run.path("s3.cred")
with open(creds, "w") as f:
    f.write("access_key = monitoring-test\nsecret_key = monitoring-test-secret\n")
os.chmod(creds, 0o600)
ing, gport, mport = run.start_ingestd(ingestd, ["--data-dir", run.path("data"), "--pool", "1M:8,4M:4",
                                                "--workers", "1", "--node-id", "m0",
                                                "--fleet-peers", "m1=127.0.0.1:1",
                                                "--fleet-db", dead_fleet_db,
                                                "--tier", "s3://127.0.0.1:1/frames",
                                                "--tier-credentials", creds])
r = subprocess.run([send, "--server", f"127.0.0.1:{gport}", "--count", "30", "--sizes", "64K-2M",
                    "--rate", "10", "--quiet"], capture_output=True, timeout=60)
if r.returncode != 0:
    fail(f"ingest-send exited {r.returncode}: {r.stderr.decode()[-300:]}")
page = http_get(f"http://127.0.0.1:{mport}/metrics")
present = set(re.findall(r"^# TYPE (\S+) ", page, re.M)) | set(re.findall(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)[{ ]", page, re.M))
missing = []
for n, where in sorted(used.items()):
    fam = re.sub(r"_(bucket|sum|count)$", "", n)
    if n == "up":   # Prometheus' own, per target
        continue
    if n not in present and fam not in present:
        missing.append(f"{n} ({where})")
if missing:
    fail("used but not in /metrics: " + ", ".join(missing))
print(f"ok: all {len(used)} metric names of the rules and the dashboard are in /metrics "
      f"({', '.join(sorted(used)[:6])}, ...)")

# ---- 4. a real Prometheus with the rules
rules_copy = run.path("ingest-alerts.yml")
shutil.copy(RULES, rules_copy)
api = run.start_prometheus(PROM, f"""global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: ['{rules_copy}']
scrape_configs:
  - job_name: h3000-ingest-lab
    scrape_interval: 1s
    scrape_timeout: 1s
    static_configs:
      - targets: ['127.0.0.1:{mport}']
""")


def query(expr):
    return run.prom_query(api, expr)


wait_for("the target up", lambda: (lambda r: r and r[0]["value"][1] == "1")(query('up{job="h3000-ingest-lab"}')))
# traffic while it scrapes, so that rate() has points
r = subprocess.run([send, "--server", f"127.0.0.1:{gport}", "--count", "30", "--sizes", "64K-2M",
                    "--rate", "10", "--first-id", "1000", "--quiet"], capture_output=True, timeout=60)
subprocess.run([send, "--server", f"127.0.0.1:{gport}", "--count", "1", "--size", "64K",
                "--seed", "9", "--quiet"], capture_output=True, timeout=60)   # one conflict


def rules_ok():
    groups = json.loads(http_get(f"{api}/rules"))["data"]["groups"]
    rs = [x for g in groups for x in g["rules"]]
    if len(rs) != nrules or any(x.get("lastEvaluation", "").startswith("0001") for x in rs):
        return None
    return rs


rs = wait_for("every rule evaluated", rules_ok)
bad = [f"{x['name']}: {x.get('lastError')}" for x in rs if x["health"] != "ok"]
if bad:
    fail("rules that do not evaluate: " + "; ".join(bad))
print(f"ok: Prometheus evaluates all {len(rs)} rules (health ok)")
MUST = ("Ready", "Stored throughput", "Frames/s by result", "Failures by code",
        "Ack latency P99 (admission to RECEIVED / DURABLE)", "Process memory",
        "Top producers (stored bytes/s)", "Fleet export lag",
        "Object store tier: backlog and lag", "Sessions by state, connections")


def empty_panels():
    empty = []
    for title, expr in queries:
        if title.startswith("variable "):
            continue
        if not query(expr.replace("$instance", ".*").replace("$job", ".*")):
            empty.append(title)
    return empty


# the panels that must have data get it once Prometheus scraped enough (rates need two
# scrapes): polled until they do, 60 s at most, not read once after a fixed pause
last = []
def musts_or_last():
    global last
    last = empty_panels()
    return last if not any(m in last for m in MUST) else None


deadline = time.monotonic() + 60
empty = musts_or_last()
while empty is None and time.monotonic() < deadline:
    time.sleep(0.5)
    empty = musts_or_last()
if empty is None:
    for must in MUST:
        if must in last:
            fail(f"the panel {must!r} has no data against a node with traffic (60 s of scrapes)")
print(f"ok: all {len(queries) - 1} dashboard queries run; empty here (no RDMA, nothing failing): "
      f"{sorted(set(empty))}")

# ingest-stat shows the same node's export and tier lines (where present)
r = subprocess.run([stat, "--server", f"127.0.0.1:{gport}", "--sample", "0"], capture_output=True,
                   text=True, timeout=60)
print(r.stdout, end="")
if not re.search(r"^         export   lag \d+ rows .*, PostgreSQL DOWN$", r.stdout, re.M):
    fail("ingest-stat shows no export line with PostgreSQL DOWN")
if not re.search(r"^         tier     s3://127\.0\.0\.1:1/frames (UNREACHABLE|UNKNOWN).*; backlog \d+ frames",
                 r.stdout, re.M):
    fail("ingest-stat shows no tier line for the unreachable store")
# the node stops: IngestNodeDown (pending: its for: is 1m) for that target, by no job name
ing.terminate()
if ing.wait(timeout=60) != 0:
    fail(f"ingestd exited {ing.returncode} after SIGTERM")


def node_down():
    al = json.loads(http_get(f"{api}/alerts"))["data"]["alerts"]
    return [a for a in al if a["labels"]["alertname"] == "IngestNodeDown" and
            a["labels"].get("instance") == f"127.0.0.1:{mport}" and a["state"] in ("pending", "firing")]


a = wait_for("IngestNodeDown for the stopped node", node_down)
print(f"ok: the node stopped: IngestNodeDown {a[0]['state']} for {a[0]['labels']['instance']} "
      f"(job {a[0]['labels'].get('job')})")
run.stop_all()
run.finish("PASS: deploy/monitoring")
