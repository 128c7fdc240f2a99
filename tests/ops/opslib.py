# SPDX-License-Identifier: Apache-2.0
"""Scaffolding shared by the ops tests (tests/ops/*.py): a temp dir, every process started
stopped at the end, fail() with the tails of the logs, waits with a deadline (and an overall
budget), HTTP GETs, and ingestd / Prometheus started on loopback with kernel-picked ports."""
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request


def http_get(url, timeout=5):
    """The body of a 200 answer (urllib raises on others)."""
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()


def http_status(url, timeout=10):
    """(status, body) of any answer."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


class Run:
    # No budget for the whole run: each wait has its own cap for a hang, and ctest's TIMEOUT
    # catches the rest; a busy machine only makes the test slower.
    def __init__(self, prefix, logs=("ingestd.log", "prometheus.log")):
        self.tmp = tempfile.mkdtemp(prefix=prefix)
        self.procs = []
        self.t0 = time.monotonic()   # for the PASS line's elapsed time only
        self.logs = logs

    def path(self, name):
        return os.path.join(self.tmp, name)

    def stop_all(self):
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def fail(self, msg):
        print(f"FAIL: {msg}", file=sys.stderr)
        self.stop_all()
        for name in self.logs:
            p = self.path(name)
            if os.path.exists(p):
                print(f"--- {name} (tail)", file=sys.stderr)
                sys.stderr.write(open(p, errors="replace").read()[-2500:])
        shutil.rmtree(self.tmp, ignore_errors=True)
        sys.exit(1)

    def finish(self, msg):
        self.stop_all()
        shutil.rmtree(self.tmp, ignore_errors=True)
        print(f"{msg} ({time.monotonic() - self.t0:.1f} s)")

    def wait_for(self, what, pred, timeout=60):
        """pred()'s first true value, polled every 0.1 s; fail after timeout (a hang)."""
        deadline = time.monotonic() + timeout
        while True:
            v = pred()
            if v:
                return v
            if time.monotonic() > deadline:
                self.fail(f"no {what} within {timeout} s")
            time.sleep(0.1)

    def start_ingestd(self, ingestd, args, metrics=True, log="ingestd.log"):
        """ingestd on 127.0.0.1:0 (+ /metrics); (process, gRPC port, metrics port or None)."""
        portf, mportf = self.path(log + ".port"), self.path(log + ".mport")
        extra = ["--metrics-listen", "127.0.0.1:0", "--metrics-port-file", mportf] if metrics else []
        out = open(self.path(log), "wb")
        p = subprocess.Popen([ingestd, "--listen", "127.0.0.1:0", "--port-file", portf] + extra + args,
                             stdout=out, stderr=out)
        self.procs.append(p)
        files = (portf, mportf) if metrics else (portf,)

        def ready():
            if p.poll() is not None:
                self.fail(f"ingestd exited {p.returncode} during start-up")
            return all(os.path.exists(f) and open(f).read().strip() for f in files)

        self.wait_for("ingestd's port files", ready)
        return p, int(open(portf).read()), int(open(mportf).read()) if metrics else None

    def prom_query(self, api, expr):
        """The result of a Prometheus instant query (fail unless status is success)."""
        import json
        import urllib.parse
        d = json.loads(http_get(f"{api}/query?" + urllib.parse.urlencode({"query": expr})))
        if d.get("status") != "success":
            self.fail(f"query {expr}: {d}")
        return d["data"]["result"]

    def start_prometheus(self, prom, config):
        """Debian's prometheus with config (YAML text) on a free loopback port; its API URL."""
        with open(self.path("prometheus.yml"), "w") as f:
            f.write(config)
        log = open(self.path("prometheus.log"), "wb")
        for _ in range(3):   # the picked port may be taken by someone else meanwhile
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
            p = subprocess.Popen([prom, "--config.file", self.path("prometheus.yml"),
                                  "--storage.tsdb.path", self.path("tsdb"),
                                  "--web.listen-address", f"127.0.0.1:{port}", "--log.level", "warn"],
                                 stdout=log, stderr=log)
            self.procs.append(p)
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and p.poll() is None:
                try:
                    http_get(f"http://127.0.0.1:{port}/-/ready", timeout=1)
                    return f"http://127.0.0.1:{port}/api/v1"
                except OSError:
                    time.sleep(0.2)
        self.fail("prometheus did not become ready")
