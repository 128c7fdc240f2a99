#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""prometheus.py BUILD_DIR - ingestd's /metrics scraped by a real Prometheus.

ingestd --metrics-listen 127.0.0.1:0 (port from --metrics-port-file); Debian's prometheus
on 127.0.0.1 (a kernel-picked free port), its own temp storage, a scrape config for
ingestd with a 1 s interval. ingest-send stores 40 frames over ~4 s (open loop). Then
Prometheus's HTTP API must give: up == 1, a non-zero rate() of received and durable
bytes, and finite positive histogram_quantile()s of the DURABLE ack latency and of the
write stage. Bounded: ~20 s, 90 s at most; every process is stopped at the end."""
import json
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

build = os.path.abspath(sys.argv[1])
ingestd = os.path.join(build, "apps", "ingestd")
send = os.path.join(build, "apps", "ingest-send")
PROM = shutil.which("prometheus") or "/usr/bin/prometheus"
for b in (ingestd, send):
    if not os.access(b, os.X_OK):
        sys.exit(f"FAIL: {b} not built")
if not os.access(PROM, os.X_OK):
    sys.exit("FAIL: prometheus not installed (Debian package 'prometheus'; deploy/install-deps.sh)")

T0 = time.monotonic()
LIMIT = 90
tmp = tempfile.mkdtemp(prefix="ops-prom.")
procs = []


def stop_all():
    for p in procs:
        if p.poll() is None:
            p.terminate()
    for p in procs:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def fail(msg):
    print(f"FAIL: {msg}", file=sys.stderr)
    stop_all()
    for name in ("ingestd.log", "prometheus.log"):
        path = os.path.join(tmp, name)
        if os.path.exists(path):
            print(f"--- {name} (tail)", file=sys.stderr)
            sys.stderr.write(open(path, errors="replace").read()[-2500:])
    shutil.rmtree(tmp, ignore_errors=True)
    sys.exit(1)


def budget():
    if time.monotonic() - T0 > LIMIT:
        fail(f"over the {LIMIT} s budget")


def wait_file(path, proc, what):
    deadline = time.monotonic() + 30
    while not (os.path.exists(path) and open(path).read().strip()):
        if proc.poll() is not None:
            fail(f"{what} exited {proc.returncode} during start-up")
        if time.monotonic() > deadline:
            fail(f"{what}: no {path} within 30 s")
        time.sleep(0.1)
    return int(open(path).read().strip())


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()


# ---- ingestd with /metrics
portf, mportf = os.path.join(tmp, "port"), os.path.join(tmp, "mport")
log = open(os.path.join(tmp, "ingestd.log"), "wb")
ing = subprocess.Popen([ingestd, "--listen", "127.0.0.1:0", "--port-file", portf,
                        "--metrics-listen", "127.0.0.1:0", "--metrics-port-file", mportf,
                        "--data-dir", os.path.join(tmp, "data"), "--pool", "1M:8,4M:8",
                        "--workers", "1"], stdout=log, stderr=log)
procs.append(ing)
gport = wait_file(portf, ing, "ingestd")
mport = wait_file(mportf, ing, "ingestd")
page = http_get(f"http://127.0.0.1:{mport}/metrics")
if "ingest_frames_total" not in page:
    fail("/metrics has no ingest_frames_total")

# ---- Prometheus: 1 s scrapes of ingestd, temp storage, loopback only
with open(os.path.join(tmp, "prometheus.yml"), "w") as f:
    f.write(f"""global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: ingestd
    scrape_interval: 1s
    scrape_timeout: 1s
    static_configs:
      - targets: ['127.0.0.1:{mport}']
""")
plog = open(os.path.join(tmp, "prometheus.log"), "wb")
prom = None
for attempt in range(3):   # the picked port may be taken by someone else meanwhile
    pport = free_port()
    prom = subprocess.Popen([PROM, "--config.file", os.path.join(tmp, "prometheus.yml"),
                             "--storage.tsdb.path", os.path.join(tmp, "tsdb"),
                             "--web.listen-address", f"127.0.0.1:{pport}",
                             "--log.level", "warn"], stdout=plog, stderr=plog)
    procs.append(prom)
    api = f"http://127.0.0.1:{pport}/api/v1"
    ready = False
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and prom.poll() is None:
        try:
            http_get(f"http://127.0.0.1:{pport}/-/ready", timeout=1)
            ready = True
            break
        except OSError:
            time.sleep(0.2)
    if ready:
        break
if not ready:
    fail("prometheus did not become ready")


def query(expr):
    budget()
    url = f"{api}/query?" + urllib.parse.urlencode({"query": expr})
    d = json.loads(http_get(url))
    if d.get("status") != "success":
        fail(f"query {expr}: {d}")
    return d["data"]["result"]


def scalar(expr):
    r = query(expr)
    if len(r) != 1:
        fail(f"{expr}: want one series, got {r}")
    return float(r[0]["value"][1])


# the target is up (scraped at least once)
deadline = time.monotonic() + 20
while True:
    r = query('up{job="ingestd"}')
    if r and float(r[0]["value"][1]) == 1:
        break
    if time.monotonic() > deadline:
        fail(f"ingestd target not up in Prometheus: {r}")
    time.sleep(0.5)
print("ok: Prometheus scrapes ingestd (up == 1)")

# ---- traffic: 40 frames of 256 KiB-2 MiB at 10 frames/s
r = subprocess.run([send, "--server", f"127.0.0.1:{gport}", "--count", "40", "--sizes",
                    "256K-2M", "--rate", "10", "--quiet", "--json"],
                   capture_output=True, timeout=60)
if r.returncode != 0:
    fail(f"ingest-send exited {r.returncode}: {r.stderr.decode()[-500:]}")
sent = json.loads(r.stdout.decode().strip().splitlines()[-1])
time.sleep(2.5)   # two more scrapes after the last ack

rx = scalar('rate(ingest_received_bytes_total{transport="grpc"}[30s])')
dur = scalar('rate(ingest_frame_bytes_total{transport="grpc",result="durable"}[30s])')
if not (rx > 0 and dur > 0):
    fail(f"rate of bytes is not positive: received {rx}, durable {dur}")
print(f"ok: rate(ingest_received_bytes_total[30s]) = {rx:.0f} B/s, durable {dur:.0f} B/s")
frames = scalar('ingest_frames_total{transport="grpc",result="durable"}')
if frames != 40:
    fail(f"ingest_frames_total durable = {frames}, sent 40 ({sent})")
q = scalar('histogram_quantile(0.95, sum by (le) '
           '(rate(ingest_ack_latency_seconds_bucket{stage="durable"}[30s])))')
if not (math.isfinite(q) and q > 0):
    fail(f"histogram_quantile of the DURABLE ack latency is {q}")
print(f"ok: histogram_quantile(0.95, ack latency DURABLE) = {q * 1000:.1f} ms")
w = scalar('histogram_quantile(0.5, sum by (le) (rate(ingest_stage_seconds_bucket{stage="write"}[30s])))')
if not (math.isfinite(w) and w > 0):
    fail(f"histogram_quantile of the write stage is {w}")
print(f"ok: histogram_quantile(0.5, stage write) = {w * 1000:.2f} ms")
free = scalar("ingest_disk_free_bytes")
if free <= 0:
    fail(f"ingest_disk_free_bytes = {free}")

stop_all()
if ing.returncode != 0:
    fail(f"ingestd exited {ing.returncode} after SIGTERM")
shutil.rmtree(tmp, ignore_errors=True)
print(f"PASS: Prometheus scrape ({time.monotonic() - T0:.1f} s)")
