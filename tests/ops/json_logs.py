#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""json_logs.py BUILD_DIR - ingestd --log-format json, as a journald/Loki user reads it.

ingestd runs with --log-format json --log-level debug on a data dir whose name holds a
double quote, a backslash, a tab and a non-ASCII letter; ingest-send stores frames, then
re-sends one id with other bytes (a WARN line); SIGTERM. Every line ingestd wrote to
stderr must parse as one JSON object with ts (RFC 3339 UTC), level, comp, pid and msg,
and the data dir must come back intact from the msg that names it. Who a line is about
is in fields of their own: the session line has "peer" and "session" (the session id in
its msg, the peer only in its field), the refused frame's line "peer", "session", "wafer"
and "frame". No msg repeats its line's peer, none says "(+0 suppressed)" (a rate-limited
line that left some out has a "suppressed" count field)."""
import datetime
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

build = os.path.abspath(sys.argv[1])
ingestd = os.path.join(build, "apps", "ingestd")
send = os.path.join(build, "apps", "ingest-send")
for b in (ingestd, send):
    if not os.access(b, os.X_OK):
        sys.exit(f"FAIL: {b} not built")

tmp = tempfile.mkdtemp(prefix="ops-json.")
proc = None


def fail(msg):
    print(f"FAIL: {msg}", file=sys.stderr)
    if proc and proc.poll() is None:
        proc.kill()
        proc.wait()
    log = os.path.join(tmp, "ingestd.log")
    if os.path.exists(log):
        sys.stderr.write(open(log, "rb").read()[-3000:].decode("utf-8", "replace"))
    shutil.rmtree(tmp, ignore_errors=True)
    sys.exit(1)


data = os.path.join(tmp, 'da"ta\\dir\tx\u00e9')
portf = os.path.join(tmp, "port")
with open(os.path.join(tmp, "ingestd.log"), "wb") as log:
    proc = subprocess.Popen([ingestd, "--listen", "127.0.0.1:0", "--port-file", portf,
                             "--data-dir", data, "--pool", "1M:4,4M:4", "--workers", "1",
                             "--log-format", "json", "--log-level", "debug"],
                            stdout=log, stderr=log)
deadline = time.monotonic() + 30
while not (os.path.exists(portf) and open(portf).read().strip()):
    if proc.poll() is not None:
        fail(f"ingestd exited {proc.returncode} during start-up")
    if time.monotonic() > deadline:
        fail("no port file within 30 s")
    time.sleep(0.1)
server = "127.0.0.1:" + open(portf).read().strip()

r = subprocess.run([send, "--server", server, "--count", "5", "--sizes", "10K-2M", "--quiet"],
                   capture_output=True, timeout=60)
if r.returncode != 0:
    fail(f"ingest-send exited {r.returncode}: {r.stderr.decode()[-500:]}")
# frame 1 again with other bytes: refused (a WARN line on the node)
subprocess.run([send, "--server", server, "--count", "1", "--size", "10K", "--seed", "9",
                "--quiet"], capture_output=True, timeout=60)
proc.send_signal(signal.SIGTERM)
try:
    rc = proc.wait(timeout=30)
except subprocess.TimeoutExpired:
    fail("ingestd did not stop within 30 s of SIGTERM")
if rc != 0:
    fail(f"ingestd exited {rc} after SIGTERM")

raw = open(os.path.join(tmp, "ingestd.log"), "rb").read()
lines = raw.split(b"\n")
if lines[-1] != b"":
    fail("the log does not end with a newline")
lines = lines[:-1]
levels = set()
msgs = []
objs = []
for i, ln in enumerate(lines, 1):
    try:
        text = ln.decode("utf-8")   # strict: a stray byte would be escaped, not passed
        o = json.loads(text)
    except (UnicodeDecodeError, ValueError) as e:
        fail(f"line {i} is not a JSON object ({e}): {ln[:200]!r}")
    if not isinstance(o, dict):
        fail(f"line {i}: not an object: {text[:200]}")
    for k, t in (("ts", str), ("level", str), ("comp", str), ("pid", int), ("msg", str)):
        if not isinstance(o.get(k), t):
            fail(f"line {i}: no {k} of type {t.__name__}: {text[:200]}")
    if o["pid"] != proc.pid:
        fail(f"line {i}: pid {o['pid']}, ingestd is {proc.pid}")
    if o["level"] not in ("error", "warning", "info", "debug"):
        fail(f"line {i}: level {o['level']!r}")
    ts = datetime.datetime.strptime(o["ts"], "%Y-%m-%dT%H:%M:%S.%fZ")
    if abs((datetime.datetime.utcnow() - ts).total_seconds()) > 600:
        fail(f"line {i}: ts {o['ts']} is not now (UTC)")
    for k in ("peer", "session", "wafer", "frame"):
        if k in o and not (isinstance(o[k], str) and o[k]):
            fail(f"line {i}: {k} is not a non-empty string: {text[:200]}")
    levels.add(o["level"])
    msgs.append(o["msg"])
    objs.append(o)

if len(lines) < 10:
    fail(f"only {len(lines)} lines logged")
for want in ("info", "warning", "debug"):
    if want not in levels:
        fail(f"no {want} line among {len(lines)} (levels seen: {sorted(levels)})")
if not any(data in m for m in msgs):
    fail("no msg carries the data dir intact (quote, backslash, tab, non-ASCII)")
if not any(m == "stopped" for m in msgs):
    fail("no 'stopped' line at the end")
sess = [o for o in objs if o["msg"].startswith("session ") and " for ingest-send:" in o["msg"]]
if len(sess) < 2:
    fail(f"{len(sess)} session lines, want one per ingest-send run")
for o in sess:
    if "peer" not in o or "session" not in o:
        fail(f"a session line without peer/session fields: {o}")
    if not o["msg"].startswith(f"session {o['session']} for ingest-send: credits "):
        fail(f"the fields do not match the msg: {o}")
for o in objs:
    if "peer" in o and o["peer"] in o["msg"]:
        fail(f"a msg repeats the peer of its own field: {o}")
    if "suppressed)" in o["msg"]:
        fail(f"a msg carries a suppressed count: {o}")
    if "suppressed" in o and not (isinstance(o["suppressed"], int) and o["suppressed"] > 0):
        fail(f"a suppressed field that is not a positive count: {o}")
conflict = [o for o in objs if o["level"] == "warning" and "already stored" in o["msg"]]
if not conflict:
    fail("no warning line for the refused frame (already stored with another crc)")
c = conflict[0]
for k, want in (("wafer", "ingest-send"), ("frame", "frame-1")):
    if c.get(k) != want:
        fail(f"the refused frame's line has {k}={c.get(k)!r}, want {want!r}: {c}")
if c.get("session") not in {o["session"] for o in sess} or not c.get("peer", "").startswith("127.0.0.1:"):
    fail(f"the refused frame's line lacks its session or peer: {c}")
print(f"ok: fields: {json.dumps({k: c[k] for k in ('peer', 'session', 'wafer', 'frame')})}")
print(f"ok: {len(lines)} lines, every one a JSON object; levels {sorted(levels)}; "
      "the data dir's quote, backslash, tab and e-acute survive")
shutil.rmtree(tmp, ignore_errors=True)
print("PASS: JSON logs")
