# SPDX-License-Identifier: Apache-2.0
"""
Scaffolding shared by the review tests (tests/review/*.py): the --ingestd/--proto-dir/--work
arguments and grpcio stubs generated from proto/h3000.proto into --work, CRC-32C, an
ingestd started on 127.0.0.1 with a kernel-picked port, and checks that end in the
"N passed, M failed" line.
"""
import argparse
import os
import shutil
import subprocess
import sys
import time

_TABLE = []
for _i in range(256):
    _c = _i
    for _ in range(8):
        _c = (_c >> 1) ^ 0x82F63B78 if _c & 1 else _c >> 1
    _TABLE.append(_c)


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = _TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def setup(doc, extra_args=(), protos=("h3000.proto",)):
    """Parse --ingestd/--proto-dir/--work (+ extra_args, all required), make --work fresh,
    generate the stubs of protos into it and put it on sys.path."""
    ap = argparse.ArgumentParser(description=doc)
    for name in ("--ingestd", "--proto-dir", "--work") + tuple(extra_args):
        ap.add_argument(name, required=True)
    a = ap.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    for p in protos:
        subprocess.check_call([sys.executable, "-m", "grpc_tools.protoc", "-I", a.proto_dir,
                               "--python_out=" + a.work, "--grpc_python_out=" + a.work,
                               os.path.join(a.proto_dir, p)])
    sys.path.insert(0, a.work)
    return a


class Checks:
    def __init__(self):
        self.n = 0
        self.failures = []

    def __call__(self, cond, what):
        self.n += 1
        print(("ok: " if cond else "FAIL: ") + what)
        if not cond:
            self.failures.append(what)

    def summary(self):
        print("%d passed, %d failed" % (self.n - len(self.failures), len(self.failures)))
        return 1 if self.failures else 0


def time_scale():
    """ING_TEST_TIME_SCALE (an integer >= 1, as tests/lib.sh reads it): stretches watchdogs."""
    try:
        return max(1, int(os.environ.get("ING_TEST_TIME_SCALE", "1")))
    except ValueError:
        return 1


def wait_port_file(proc, port_file, log_path, stall=60):
    """The port ingestd wrote to PORT_FILE. A watchdog for a hang, not a budget: it fails only
    when the process exits first or its log has not grown for STALL x the time scale seconds
    (a start on a busy machine, prefaulting a pool under ASan, keeps logging)."""
    stall *= time_scale()
    last_size, last_change = -1, time.time()
    while not os.path.exists(port_file) or not open(port_file).read().strip():
        if proc.poll() is not None:
            raise RuntimeError("ingestd exited (status %s) before it listened (log %s)"
                               % (proc.returncode, log_path))
        size = os.path.getsize(log_path) if os.path.exists(log_path) else 0
        if size != last_size:
            last_size, last_change = size, time.time()
        elif time.time() - last_change > stall:
            raise RuntimeError("ingestd did not start: its log made no progress for %d s (log %s)"
                               % (stall, log_path))
        time.sleep(0.05)
    return open(port_file).read().strip()


class Ingestd:
    """ingestd --listen 127.0.0.1:0 with extra args; its log in --work/<log>."""

    def __init__(self, a, args, log="ingestd.log", metrics=False):
        self.port_file = os.path.join(a.work, log + ".port")
        self.mport_file = os.path.join(a.work, log + ".mport") if metrics else None
        self.log_path = os.path.join(a.work, log)
        self.log = open(self.log_path, "wb")
        extra = ["--metrics-listen", "127.0.0.1:0", "--metrics-port-file", self.mport_file] if metrics else []
        self.proc = subprocess.Popen([a.ingestd, "--listen", "127.0.0.1:0",
                                      "--port-file", self.port_file] + extra + args,
                                     stdout=self.log, stderr=subprocess.STDOUT)

    def metric(self, name, labels=""):
        """The value of NAME{LABELS} on /metrics (started with metrics=True); None if absent."""
        import urllib.request
        port = open(self.mport_file).read().strip()
        text = urllib.request.urlopen("http://127.0.0.1:%s/metrics" % port, timeout=5).read().decode()
        for line in text.splitlines():
            k, _, v = line.rpartition(" ")
            if k == name + labels:
                return float(v)
        return None

    def wait_ready(self, stall=60):
        """'127.0.0.1:PORT' once the port file is written; RuntimeError if it exits first."""
        return "127.0.0.1:%s" % wait_port_file(self.proc, self.port_file, self.log_path, stall)

    def stop(self, timeout=15):
        """SIGTERM, then SIGKILL after timeout; returns the exit status."""
        self.proc.terminate()
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait()
        self.log.close()
        return rc

    def log_tail(self, n=3000):
        return open(self.log_path, errors="replace").read()[-n:]
