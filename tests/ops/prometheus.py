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
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from opslib import Run, http_get  # noqa: E402

build = os.path.abspath(sys.argv[1])
ingestd = os.path.join(build, "apps", "ingestd")
send = os.path.join(build, "apps", "ingest-send")
PROM = shutil.which("prometheus") or "/usr/bin/prometheus"
for b in (ingestd, send):
    if not os.access(b, os.X_OK):
        sys.exit(f"FAIL: {b} not built")
if not os.access(PROM, os.X_OK):
    sys.exit("FAIL: prometheus not installed (Debian package 'prometheus'; deploy/install-deps.sh)")

run = Run("ops-prom.")
fail = run.fail

# ---- ingestd with /metrics
ing, gport, mport = run.start_ingestd(ingestd, ["--data-dir", run.path("data"), "--pool", "1M:8,4M:8",
                                                "--workers", "1"])
page = http_get(f"http://127.0.0.1:{mport}/metrics")
if "ingest_frames_total" not in page:
    fail("/metrics has no ingest_frames_total")

# ---- Prometheus: 1 s scrapes of ingestd, temp storage, loopback only
api = run.start_prometheus(PROM, f"""global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: ingestd
    scrape_interval: 1s
    scrape_timeout: 1s
    static_configs:
      - targets: ['127.0.0.1:{mport}']
""")


def query(expr):
    return run.prom_query(api, expr)


def scalar(expr):
    r = query(expr)
    if len(r) != 1:
        fail(f"{expr}: want one series, got {r}")
    return float(r[0]["value"][1])


# the target is up (scraped at least once)
run.wait_for("the ingestd target up in Prometheus",
             lambda: (lambda r: r and float(r[0]["value"][1]) == 1)(query('up{job="ingestd"}')))
print("ok: Prometheus scrapes ingestd (up == 1)")

# ---- traffic: 40 frames of 256 KiB-2 MiB at 10 frames/s
r = subprocess.run([send, "--server", f"127.0.0.1:{gport}", "--count", "40", "--sizes",
                    "256K-2M", "--rate", "10", "--quiet", "--json"],
                   capture_output=True, timeout=60)
if r.returncode != 0:
    fail(f"ingest-send exited {r.returncode}: {r.stderr.decode()[-500:]}")
sent = json.loads(r.stdout.decode().strip().splitlines()[-1])
# Prometheus has the traffic once it scraped the last ack (1 s scrapes; a busy machine
# may take longer: a condition, not a fixed pause)
run.wait_for("the 40 durable frames in Prometheus (a scrape after the last ack)",
             lambda: (lambda r: r and float(r[0]["value"][1]) == 40)(
                 query('ingest_frames_total{transport="grpc",result="durable"}')))
run.wait_for("a positive rate of received and durable bytes",
             lambda: all((lambda r: r and float(r[0]["value"][1]) > 0)(query(e)) for e in (
                 'rate(ingest_received_bytes_total{transport="grpc"}[30s])',
                 'rate(ingest_frame_bytes_total{transport="grpc",result="durable"}[30s])')))

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

run.stop_all()
if ing.returncode != 0:
    fail(f"ingestd exited {ing.returncode} after SIGTERM")
run.finish("PASS: Prometheus scrape")
