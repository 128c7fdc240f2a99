#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""oncall.py BUILD_DIR SRC_DIR - what on-call reaches for, against a live ingestd (authentication on,
static fleet of three, /metrics on):

 1. /metrics: frames failed by code (a conflicting re-send: duplicate_conflict; a grpcio
    PushFrames of a frame over --max-frame: too_large), per-peer series for 127.0.0.1 that count exactly what was
    stored, the connections gauge following a real gRPC client's connection (1 while a
    grpcio channel is open, 0 after), process_* of the ingestd process itself;
 2. /healthz 200; /readyz 200 "ready", 503 naming DRAINING after SIGUSR2, 200 again after
    the second SIGUSR2;
 3. ingest-stat (--config: ingestd's file gives it the port and the token): the text
    screen's Health, failures, pool, disk, sessions and Members lines; exit 0, and 1 with
    "NOT READY: draining" while DRAINING; --json: every Stats field, the same counts as
    /metrics, the three members; --watch 500ms --count 3: three screens, rates over the
    interval; without the token: exit 1 naming --auth-token-file; a dead address: exit 1,
    UNREACHABLE with the hint;
 4. ingest-stat's latencies over its window, not since start: a quiet window says no frame
    was acked in it while the since-start P99 stays; --json --watch during ingest-send:
    each screen's window counts exactly the frames the node's own framesDurable counter
    gained since the screen before, and its P99 is within the since-start range;
 5. ingest-get --config (ingestd's file: port on this host, token): a frame back, the same
    bytes as the node's file of it.
"""
import json
import os
import re
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from opslib import Run, http_status  # noqa: E402

build = os.path.abspath(sys.argv[1])
src = os.path.abspath(sys.argv[2])
ingestd = os.path.join(build, "apps", "ingestd")
send = os.path.join(build, "apps", "ingest-send")
stat = os.path.join(build, "apps", "ingest-stat")
for b in (ingestd, send, stat):
    if not os.access(b, os.X_OK):
        sys.exit(f"FAIL: {b} not built")
try:
    import grpc
except ImportError:
    sys.exit("FAIL: python3-grpcio is missing (deploy/install-deps.sh installs it)")

run = Run("ops-oncall.", limit=180, logs=("ingestd.log",))
fail, wait_for, tmp = run.fail, run.wait_for, run.tmp
subprocess.check_call([sys.executable, "-m", "grpc_tools.protoc", "-I", os.path.join(src, "proto"),
                       "--python_out=" + tmp, "--grpc_python_out=" + tmp,
                       os.path.join(src, "proto", "h3000.proto")])
sys.path.insert(0, tmp)
import h3000_pb2  # noqa: E402
import h3000_pb2_grpc  # noqa: E402


def http(path):
    return http_status(f"http://127.0.0.1:{mport}{path}")


def metrics():
    st, body = http("/metrics")
    if st != 200:
        fail(f"/metrics: HTTP {st}")
    out = {}
    for ln in body.splitlines():
        if ln and not ln.startswith("#"):
            k, v = ln.rsplit(" ", 1)
            out[k] = float(v)
    return out


token = os.path.join(tmp, "token")
with open(token, "w") as f:
    f.write("oncall-test-token-0123456789\n")
os.chmod(token, 0o600)
data = os.path.join(tmp, "data")
proc, port, mport = run.start_ingestd(ingestd, ["--data-dir", data, "--pool", "2M:8,4M:4", "--workers", "1",
                                                "--max-frame", "2M", "--auth-token-file", token,
                                                "--node-id", "n0",
                                                "--fleet-peers", "n1=127.0.0.1:1,n2=127.0.0.1:2"])
server = f"127.0.0.1:{port}"
conf = os.path.join(tmp, "ingestd.conf")
with open(conf, "w") as f:   # what the node runs with, as ingest-stat --config reads it
    f.write(f"listen = 0.0.0.0:{port}\ndata-dir = {data}\nauth-token-file = {token}\n")


def run_send(*args, check=True):
    r = subprocess.run([send, "--server", server, "--auth-token-file", token, "--quiet",
                        "--transport", "grpc", *args], capture_output=True, timeout=120)
    if check and r.returncode != 0:
        fail(f"ingest-send {args} exited {r.returncode}: {r.stderr.decode()[-500:]}")
    return r


def run_stat(*args):
    return subprocess.run([stat, *args], capture_output=True, timeout=120, text=True)


# ---- 1. /metrics
run_send("--count", "20", "--sizes", "64K-1M", "--wafer", "OC-w1")
run_send("--count", "1", "--size", "64K", "--wafer", "OC-w1", "--seed", "9", check=False)   # conflict
# a frame over --max-frame 2M, from a stock gRPC client (ingest-send would not send it)
with grpc.insecure_channel(server) as ch:
    stub = h3000_pb2_grpc.RDMASvcStub(ch)
    neg = stub.Negotiate(h3000_pb2.NegotiateRequest(versionMin=1, versionMax=1, clientName="oncall",
                                                    authToken=open(token).read().strip()), timeout=30)
    meta = h3000_pb2.FrameMeta(frameId="big-1", waferId="OC-w2", length=3 << 20)
    acks = list(stub.PushFrames(iter([h3000_pb2.FrameChunk(frameId="big-1", meta=meta, data=b"x" * 1024,
                                                           last=True)]),
                                metadata=[("h3000-session-id", str(neg.sessionId))], timeout=30))
    if len(acks) != 1 or acks[0].ok or acks[0].code != h3000_pb2.ERROR_TOO_LARGE:
        fail(f"the 3 MiB frame: {acks}")
m = wait_for("the failures to be counted", lambda: (lambda m: m if m.get(
    'ingest_frame_failures_total{code="duplicate_conflict"}') == 1 and m.get(
    'ingest_frame_failures_total{code="too_large"}', 0) >= 1 else None)(metrics()))
stored = m['ingest_frames_total{transport="grpc",result="durable"}']
if stored != 20:
    fail(f"{stored} frames stored, want 20")
peer_ok = m.get('ingest_peer_frames_total{peer="127.0.0.1",result="durable"}')
peer_failed = m.get('ingest_peer_frames_total{peer="127.0.0.1",result="failed"}')
failed_all = sum(v for k, v in m.items() if k.startswith("ingest_frame_failures_total"))
if peer_ok != 20 or peer_failed != failed_all:
    fail(f"peer 127.0.0.1: durable {peer_ok}, failed {peer_failed}; want 20 and {failed_all}")
if m['ingest_peer_bytes_total{peer="127.0.0.1"}'] != m['ingest_frame_bytes_total{transport="grpc",result="durable"}']:
    fail("ingest_peer_bytes_total does not add up to the stored bytes")
peers = {re.search(r'peer="([^"]*)"', k).group(1) for k in m if k.startswith("ingest_peer_bytes_total")}
if peers != {"127.0.0.1", "other"}:
    fail(f"peer series: {peers}")
for k in ("process_cpu_seconds_total", "process_resident_memory_bytes", "process_open_fds",
          "process_max_fds", "process_start_time_seconds", "process_virtual_memory_bytes"):
    if k not in m:
        fail(f"no {k}")
with open(f"/proc/{proc.pid}/stat") as f:
    rss = int(f.read().rsplit(")", 1)[1].split()[21]) * os.sysconf("SC_PAGE_SIZE")
if abs(m["process_resident_memory_bytes"] - rss) > max(rss // 4, 16 << 20):
    fail(f"process_resident_memory_bytes {m['process_resident_memory_bytes']} vs /proc {rss}")
if abs(m["process_start_time_seconds"] - time.time()) > 600:
    fail(f"process_start_time_seconds {m['process_start_time_seconds']} is not recent")
too_large = m['ingest_frame_failures_total{code="too_large"}']
print(f"ok: failures by code: duplicate_conflict 1, too_large {too_large:.0f}; peer 127.0.0.1 "
      f"stored {peer_ok:.0f}; process rss {m['process_resident_memory_bytes'] / 2**20:.0f} MiB")

wait_for("no connection left", lambda: metrics().get("ingest_connections") == 0)
ch = grpc.insecure_channel(server)
grpc.channel_ready_future(ch).result(timeout=30)
wait_for("ingest_connections 1 with a grpcio channel open", lambda: metrics().get("ingest_connections") == 1)
ch.close()
wait_for("ingest_connections 0 after it closed", lambda: metrics().get("ingest_connections") == 0)
print("ok: ingest_connections follows a grpcio channel: 0, 1, 0")

# ---- 2. /healthz, /readyz
st, body = http("/healthz")
if st != 200 or "ok" not in body:
    fail(f"/healthz: {st} {body!r}")
st, body = http("/readyz")
if st != 200 or not body.endswith("ready\n") or "fail" in body:
    fail(f"/readyz: {st} {body!r}")
print("ok: /readyz 200:", body.strip().replace("\n", " | "))

# ---- 3. ingest-stat
r = run_stat("--config", conf, "--sample", "200ms")
if r.returncode != 0:
    fail(f"ingest-stat --config exited {r.returncode}: {r.stdout}{r.stderr}")
screen = r.stdout
print(screen, end="")
for pat in (r"^Health   SERVING, ready; up ", r"^Stats    stored .*/s, .* frames/s",
            r"^         frames   durable 20, duplicate 0, failed 1, refused \d+",
            r"^         failures .*duplicate_conflict 1", r"^         failures .*too_large \d",
            r"^         pool     32\.0 MiB on (hugepages|4 KiB pages), \d+ of 12 slots in use",
            r"^         disk     .* free of ", r"^         sessions \d+ .*connections [1-9]",
            r"^Members  3 \(static, epoch \d+\)", r"^         n0 .* ACTIVE .*\(this node\)$",
            r"^         n1 +127\.0\.0\.1:1 +ACTIVE", r"^         n2 +127\.0\.0\.1:2 +ACTIVE"):
    if not re.search(pat, screen, re.M):
        fail(f"the screen has no line matching {pat!r}")

r = run_stat("--server", server, "--auth-token-file", token, "--json", "--sample", "0")
if r.returncode != 0:
    fail(f"ingest-stat --json exited {r.returncode}: {r.stderr}")
j = json.loads(r.stdout)
s = j["stats"]
if not (j["health"] == "SERVING" and j["ready"] and s["framesDurable"] == 20 and s["ready"]):
    fail(f"--json: {j['health']} ready {j['ready']} framesDurable {s['framesDurable']}")
fails = {f["code"]: f["count"] for f in s["failures"]}
if fails.get("ERROR_DUPLICATE_CONFLICT") != 1 or fails.get("ERROR_TOO_LARGE", 0) < 1:
    fail(f"--json failures: {fails}")
if s["poolBytes"] != 32 << 20 or s["diskSizeBytes"] <= 0 or s["connections"] < 1:
    fail(f"--json pool/disk/connections: {s['poolBytes']} {s['diskSizeBytes']} {s['connections']}")
if sorted(x["nodeId"] for x in j["members"]["members"]) != ["n0", "n1", "n2"]:
    fail(f"--json members: {j['members']}")
if not j["throughput"]["sinceStart"]:
    fail("--sample 0: the rates should be averages since the start")
for k in ("uptimeNs", "bytesDurable", "stageLatency", "fleetNodeId", "notReady", "poolHugepages"):
    if k not in s:
        fail(f"--json stats lacks {k}")
print(f"ok: --json: {len(s)} Stats fields, failures {fails}, members n0 n1 n2")

t0 = time.monotonic()
r = run_stat("--server", server, "--auth-token-file", token, "--watch=500ms", "--count", "3")
n = len(re.findall(r"^Health   SERVING, ready", r.stdout, re.M))
if r.returncode != 0 or n != 3:
    fail(f"--watch=500ms --count 3: exit {r.returncode}, {n} screens: {r.stdout}")
rates = re.findall(r"^Stats .*over the last ([0-9.]+) s", r.stdout, re.M)
if len(rates) != 3 or not all(0.1 <= float(x) <= 30 for x in rates[1:]):
    fail(f"--watch rates measured over {rates}")
print(f"ok: --watch: 3 screens in {time.monotonic() - t0:.1f} s, rates over {rates} s")

r = run_stat("--server", server)
if r.returncode != 1 or "--auth-token-file" not in r.stdout:
    fail(f"without the token: exit {r.returncode}, {r.stdout}")
r = run_stat("--server", "127.0.0.1:1")
if r.returncode != 1 or "UNREACHABLE: cannot reach 127.0.0.1:1" not in r.stdout or "is ingestd running" not in r.stdout:
    fail(f"a dead address: exit {r.returncode}, {r.stdout}")
print("ok: no token: exit 1 naming --auth-token-file; dead address: exit 1, UNREACHABLE with the hint")

# ---- 4. latencies over the window, not since start
r = run_stat("--config", conf, "--sample", "300ms")
if r.returncode != 0:
    fail(f"ingest-stat --sample 300ms exited {r.returncode}: {r.stdout}{r.stderr}")
if not re.search(r"^         ack      no frame acked in the last 0\.\d s$", r.stdout, re.M) or \
        not re.search(r"^                  since start P50 .*, P99 [0-9.]+ [mu]?s \(20 frames\)$", r.stdout, re.M):
    fail(f"a quiet window: the screen should say no frame was acked in it, and the since-start P99:\n{r.stdout}")
# one screen, then 30 frames, then screens until the windows have counted all 30: each
# window must count exactly what the node's own framesDurable counter gained in it
stat_p = subprocess.Popen([stat, "--config", conf, "--json", "--watch=2s", "--count", "30", "--sample", "0"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
prev = json.loads(stat_p.stdout.readline())
if prev["window"] is not None:
    fail("--sample 0: the first screen has no window")
base = prev["stats"]["framesDurable"]
run_send("--count", "30", "--sizes", "64K-256K", "--wafer", "OC-w3")
seen, windows, busy = 0, 0, 0
while seen < 30:
    ln = stat_p.stdout.readline()
    if not ln:
        fail(f"ingest-stat --watch ended after {windows} windows, {seen} of 30 frames counted: "
             f"{stat_p.stderr.read()}")
    cur = json.loads(ln)
    w, gained = cur["window"], cur["stats"]["framesDurable"] - prev["stats"]["framesDurable"]
    if w is None or w["ack"]["count"] != gained:
        fail(f"a window counts {w and w['ack']['count']} frames, the node's framesDurable gained {gained}")
    if gained:
        busy += 1
        if not 0 < w["ack"]["p50Ns"] <= w["ack"]["p95Ns"] <= w["ack"]["p99Ns"]:
            fail(f"window quantiles with {gained} frames: {w['ack']}")
        if set(w["stages"]) != {"queue", "write", "sync", "commit", "ack"}:
            fail(f"window stages: {sorted(w['stages'])}")
    seen += gained
    windows += 1
    prev = cur
stat_p.terminate()
stat_p.wait(timeout=30)
if seen != 30 or prev["stats"]["framesDurable"] != base + 30:
    fail(f"the windows counted {seen} frames, the node stored {prev['stats']['framesDurable'] - base}")
print(f"ok: ingest-stat windows: a quiet one says so; 30 frames counted over {windows} windows "
      f"({busy} with frames), each window's count = the node's framesDurable gain")

# ---- 5. ingest-get --config
get = os.path.join(build, "apps", "ingest-get")
fdir = os.path.join(data, "frames", "OC-w1")
frame = sorted(f for f in os.listdir(fdir) if f.endswith(".frame"))[0]
out_path = os.path.join(tmp, "got.raw")
r = subprocess.run([get, "--config", conf, "--wafer", "OC-w1", "--frame", frame[:-len(".frame")],
                    "--out", out_path], capture_output=True, text=True, timeout=120)
if r.returncode != 0:
    fail(f"ingest-get --config exited {r.returncode}: {r.stderr}")
with open(out_path, "rb") as a, open(os.path.join(fdir, frame), "rb") as b:
    if a.read() != b.read():
        fail("ingest-get --config: the bytes differ from the node's file")
print(f"ok: ingest-get --config {conf}: frame {frame[:-6]} back, the node's bytes")

# ---- draining: /readyz 503 and ingest-stat exit 1, then back
proc.send_signal(signal.SIGUSR2)
st, body = wait_for("/readyz 503", lambda: (lambda r: r if r[0] == 503 else None)(http("/readyz")))
if "draining" not in body or "fail fleet state DRAINING" not in body:
    fail(f"/readyz while DRAINING: {body!r}")
r = run_stat("--config", conf, "--sample", "0")
if r.returncode != 1 or "NOT READY: draining" not in r.stdout or "DRAINING" not in r.stdout:
    fail(f"ingest-stat while DRAINING: exit {r.returncode}: {r.stdout}")
proc.send_signal(signal.SIGUSR2)
wait_for("/readyz 200 again", lambda: http("/readyz")[0] == 200)
if run_stat("--config", conf, "--sample", "0").returncode != 0:
    fail("ingest-stat after ACTIVE again: not exit 0")
print("ok: DRAINING: /readyz 503 and ingest-stat exit 1 'NOT READY: draining'; ACTIVE again: 200, exit 0")

proc.send_signal(signal.SIGTERM)
rc = proc.wait(timeout=30)
if rc != 0:
    fail(f"ingestd exited {rc}")
run.finish("PASS: on-call metrics, health endpoints and ingest-stat")
