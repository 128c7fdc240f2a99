#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Stock grpcio client (Debian python3-grpcio) against tests/func/grpc_testsrv: proves the
transport in control/net/grpc_*.c speaks real gRPC. Usage: grpc_interop.py PATH/TO/grpc_testsrv
Exit 0 when every check passes; prints one line per check."""
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

try:
    import grpc
except ImportError:
    print("FAIL: python3-grpcio is not installed (apt install python3-grpcio); "
          "run with /usr/bin/python3", file=sys.stderr)
    sys.exit(1)

SRV = sys.argv[1] if len(sys.argv) > 1 else "grpc_testsrv"
failures = []


def check(name, cond, detail=""):
    print(("ok   " if cond else "FAIL ") + name + ((": " + detail) if detail else ""), flush=True)
    if not cond:
        failures.append(name)


def start(extra=()):
    p = subprocess.Popen([SRV, "--max-seconds", "120", *extra], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    if not line.startswith("PORT "):
        p.kill()
        raise RuntimeError("test server did not start: %r" % line)
    return p, int(line.split()[1])


def stop(p):
    p.send_signal(signal.SIGTERM)
    try:
        return p.wait(timeout=10)
    except subprocess.TimeoutExpired:
        p.kill()
        return -1


def uu(ch, path):
    return ch.unary_unary(path, request_serializer=None, response_deserializer=None)


def code_of(fn):
    try:
        fn()
        return grpc.StatusCode.OK
    except grpc.RpcError as e:
        return e.code()


def stats(ch):
    s = uu(ch, "/test.Echo/Stats")(b"", timeout=5).decode()
    return dict(kv.split("=") for kv in s.split())


def suite(ch, label):
    echo = uu(ch, "/test.Echo/Unary")
    check(label + "unary echo", echo(b"hello", timeout=5) == b"hello")
    check(label + "empty message", echo(b"", timeout=5) == b"")
    resp = echo(b"x", timeout=5, metadata=(("x-echo-md", "from-python"),))
    check(label + "metadata", resp == b"from-python", repr(resp))
    big = os.urandom(1 << 20)
    check(label + "1 MiB echo", echo(big, timeout=10) == big)

    health = uu(ch, "/grpc.health.v1.Health/Check")
    check(label + "health SERVING", health(b"", timeout=5) == b"\x08\x01")
    check(label + "health h3000.RDMASvc", health(b"\x0a\x0dh3000.RDMASvc", timeout=5) == b"\x08\x01")
    c = code_of(lambda: health(b"\x0a\x03foo", timeout=5))
    check(label + "health unknown service -> NOT_FOUND", c == grpc.StatusCode.NOT_FOUND, str(c))
    c = code_of(lambda: uu(ch, "/x/y")(b"", timeout=5))
    check(label + "unknown method -> UNIMPLEMENTED", c == grpc.StatusCode.UNIMPLEMENTED, str(c))

    try:
        echo(b"\0" * (5 << 20), timeout=10)
        c = grpc.StatusCode.OK
    except grpc.RpcError as e:
        c = e.code()
        d = e.details()
    check(label + "5 MiB message -> RESOURCE_EXHAUSTED", c == grpc.StatusCode.RESOURCE_EXHAUSTED,
          str(c))
    check(label + "connection usable after oversize", echo(b"again", timeout=5) == b"again")

    t0 = time.monotonic()
    c = code_of(lambda: uu(ch, "/test.Echo/Slow")(b"z", timeout=0.3))
    dt = time.monotonic() - t0
    check(label + "deadline -> DEADLINE_EXCEEDED", c == grpc.StatusCode.DEADLINE_EXCEEDED and dt < 3,
          "%s after %.2fs" % (c, dt))
    time.sleep(0.2)
    st = stats(ch)
    # The client resets the stream at its own deadline too; whichever lands first wins.
    check(label + "handler on_close after deadline", st["slow_close"] in ("4", "1"), str(st))

    before = int(stats(ch)["hold_started"])
    fut = uu(ch, "/test.Echo/Hold").future(b"h", timeout=30)
    for _ in range(100):
        if int(stats(ch)["hold_started"]) > before:
            break
        time.sleep(0.02)
    fut.cancel()
    ok = False
    for _ in range(100):
        st = stats(ch)
        if st["hold_close"] == "1" and int(st["hold_started"]) > before:
            ok = True
            break
        time.sleep(0.02)
    check(label + "cancel -> handler on_close(CANCELLED)", ok and fut.cancelled(), str(st))

    n = 1000
    bidi = ch.stream_stream("/test.Echo/Bidi", request_serializer=None, response_deserializer=None)
    msgs = [bytes([i % 251]) * (i % 3000) for i in range(n)]
    got = list(bidi(iter(msgs), timeout=30))
    check(label + "bidi 1000 messages", got == msgs, "%d back" % len(got))

    sink = ch.stream_unary("/test.Echo/Sink", request_serializer=None, response_deserializer=None)
    chunk = b"\xab" * (1 << 20)
    t0 = time.monotonic()
    r = sink(iter([chunk] * 64), timeout=60)
    dt = time.monotonic() - t0
    check(label + "client streaming 64 x 1 MiB", r == b"msgs=64 bytes=67108864",
          "%r, %.0f MiB/s" % (r, 64 / dt))

    many = ch.unary_stream("/test.Echo/Many", request_serializer=None, response_deserializer=None)
    got = list(many(b"300 65536", timeout=60))
    check(label + "server streaming 300 x 64 KiB (bounded send buffer)",
          len(got) == 300 and all(len(g) == 65536 for g in got), "%d msgs" % len(got))
    got = list(many(b"3 4000000", timeout=60))
    check(label + "server streaming 3 x 4 MB", len(got) == 3 and all(len(g) == 4000000 for g in got))

    st = stats(ch)
    check(label + "no calls left open", st["calls"] == "1", str(st))   # the Stats call itself


def main():
    p, port = start()
    try:
        with grpc.insecure_channel("127.0.0.1:%d" % port) as ch:
            suite(ch, "h2c: ")
        # Graceful shutdown with a call in progress: GOAWAY, the call may finish.
        with grpc.insecure_channel("127.0.0.1:%d" % port) as ch:
            many = ch.unary_stream("/test.Echo/Many", request_serializer=None,
                                   response_deserializer=None)
            it = many(b"200 65536", timeout=30)
            first = next(it)
            p.send_signal(signal.SIGTERM)
            rest = list(it)
            check("shutdown lets the call in progress finish", 1 + len(rest) == 200,
                  "%d msgs" % (1 + len(rest)))
            c = code_of(lambda: uu(ch, "/test.Echo/Unary")(b"late", timeout=3))
            check("after shutdown new calls fail", c != grpc.StatusCode.OK, str(c))
        rc = p.wait(timeout=10)
        check("server exits 0 after SIGTERM", rc == 0, "rc=%s" % rc)
    finally:
        if p.poll() is None:
            stop(p)

    # TLS with ALPN h2 and a throwaway self-signed certificate.
    with tempfile.TemporaryDirectory() as d:
        cert, key = os.path.join(d, "c.pem"), os.path.join(d, "k.pem")
        r = subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                            "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost",
                            "-keyout", key, "-out", cert], capture_output=True)
        if r.returncode != 0:
            check("TLS: openssl req", False, r.stderr.decode()[-200:])
        else:
            p, port = start(["--tls", cert, key])
            try:
                creds = grpc.ssl_channel_credentials(root_certificates=open(cert, "rb").read())
                with grpc.secure_channel("localhost:%d" % port, creds) as ch:
                    suite(ch, "tls: ")
            finally:
                check("TLS server exits 0", stop(p) == 0)

    print("%d failure(s)" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
