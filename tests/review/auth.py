#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""
Shared-secret authentication against a real ingestd --auth-token-file with stock grpcio
clients and ingest-send:
  1. a token file group/other may read: ingestd refuses to start (exit 2, "chmod 600");
  2. Negotiate without a token / with a wrong one: UNAUTHENTICATED "bad or missing authToken";
  3. PushFrames / ControlStream naming no session (the implicit sessions are off):
     UNAUTHENTICATED, and nothing is stored;
  4. the right token: Negotiate, then a frame on its session (header or sessionId) is DURABLE;
  5. grpc.health.v1 Health/Check answers without any token;
  6. Stats without "authorization: Bearer <token>" (or with a wrong one): UNAUTHENTICATED;
  7. ingest-send --auth-token-file: the right token stores the frame (exit 0), a wrong one
     fails with the node's message (non-zero);
  8. the token is never in ingestd's log.

usage: auth.py --ingestd PATH --ingest-send PATH --proto-dir DIR --work DIR
"""
import os
import subprocess
import sys
import time

import rtlib

TOKEN = "h3000-review-token-5f0c2a9e"
WRONG = "h3000-review-token-00000000"
WAFER = "AUTH"


crc32c = rtlib.crc32c


def write_secret(path, text, mode):
    with open(path, "w") as f:
        f.write(text + "\n")
    os.chmod(path, mode)


def main():
    a = rtlib.setup(__doc__, extra_args=("--ingest-send",),
                    protos=("h3000.proto", "health.proto"))
    import grpc
    import h3000_pb2 as PB
    import h3000_pb2_grpc as RPC
    import health_pb2 as HPB
    import health_pb2_grpc as HRPC

    failures = []

    def check(cond, what):
        print(("ok: " if cond else "FAIL: ") + what)
        if not cond:
            failures.append(what)

    tok = os.path.join(a.work, "token")
    wrong = os.path.join(a.work, "wrong")
    loose = os.path.join(a.work, "token644")
    write_secret(tok, TOKEN, 0o600)
    write_secret(wrong, WRONG, 0o600)
    write_secret(loose, TOKEN, 0o644)
    data_dir = os.path.join(a.work, "data")
    base = [a.ingestd, "--listen", "127.0.0.1:0", "--data-dir", data_dir, "--pool", "1M:4",
            "--workers", "1", "--rdma", "off"]

    # 1. a secret others can read is refused before anything starts
    r = subprocess.run(base + ["--auth-token-file", loose], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=30)
    err = r.stderr.decode(errors="replace")
    check(r.returncode == 2 and "chmod 600" in err and TOKEN not in err,
          "token file with mode 644: exit %d, %r" % (r.returncode, err.strip()))

    port_file = os.path.join(a.work, "port")
    log_path = os.path.join(a.work, "ingestd.log")
    log = open(log_path, "wb")
    proc = subprocess.Popen(base + ["--auth-token-file", tok, "--port-file", port_file],
                            stdout=log, stderr=subprocess.STDOUT)

    def stored(fid, wafer=WAFER):
        return os.path.exists(os.path.join(data_dir, "frames", wafer, "%s.frame" % fid))

    def chunk(fid, sid=0):
        data = os.urandom(5000)
        c = PB.FrameChunk(frameId=fid, offset=0, data=data, last=True, sessionId=sid)
        c.meta.CopyFrom(PB.FrameMeta(frameId=fid, length=len(data), waferId=WAFER,
                                     crc32c=crc32c(data), hasCrc32c=True))
        return c

    def code_of(fn):
        try:
            fn()
            return None, ""
        except grpc.RpcError as e:
            return e.code(), e.details() or ""

    try:
        rtlib.wait_port_file(proc, port_file, log_path)
        addr = "127.0.0.1:%s" % open(port_file).read().strip()
        ch = grpc.insecure_channel(addr)
        grpc.channel_ready_future(ch).result(timeout=10)
        stub = RPC.RDMASvcStub(ch)
        health = HRPC.HealthStub(ch)
        bearer = (("authorization", "Bearer " + TOKEN),)

        def negotiate(token=None):
            rq = PB.NegotiateRequest(versionMin=1, versionMax=1, clientName="auth.py",
                                     transports=[PB.TRANSPORT_GRPC_STREAM])
            if token is not None:
                rq.authToken = token
            return stub.Negotiate(rq, timeout=5)

        # 5. health is open
        h = health.Check(HPB.HealthCheckRequest(service=""), timeout=5)
        check(h.status == HPB.HealthCheckResponse.SERVING, "Health/Check without a token: SERVING")

        # 2. Negotiate needs the token
        for name, t in (("no", None), ("an empty", ""), ("a wrong", WRONG),
                        ("a prefix of the", TOKEN[:-1]), ("a longer", TOKEN + "x")):
            code, det = code_of(lambda: negotiate(t))
            check(code == grpc.StatusCode.UNAUTHENTICATED and "bad or missing authToken" in det,
                  "Negotiate with %s token: %s %r" % (name, code, det))

        # 3. no session named: no implicit session, nothing stored
        code, det = code_of(lambda: list(stub.PushFrames(iter([chunk("auth-101")]), timeout=10)))
        check(code == grpc.StatusCode.UNAUTHENTICATED and "requires Negotiate with an authToken" in det,
              "PushFrames without a session: %s %r" % (code, det))
        code, det = code_of(lambda: list(stub.PushFrames(
            iter([chunk("auth-102", sid=12345)]), timeout=10)))
        check(code is not None and code != grpc.StatusCode.OK,
              "PushFrames naming a session never negotiated: refused (%s %r)" % (code, det))
        meta = PB.FrameMeta(frameId="auth-103", length=5000, waferId=WAFER, addr=4096, rkey=1)
        code, det = code_of(lambda: list(stub.ControlStream(iter([meta]), timeout=10)))
        check(code == grpc.StatusCode.UNAUTHENTICATED and "requires Negotiate with an authToken" in det,
              "ControlStream without a session: %s %r" % (code, det))

        # 6. Stats needs the bearer token
        code, det = code_of(lambda: stub.Stats(PB.StatsRequest(), timeout=5))
        check(code == grpc.StatusCode.UNAUTHENTICATED and "authorization: Bearer" in det,
              "Stats without authorization: %s %r" % (code, det))
        code, det = code_of(lambda: stub.Stats(PB.StatsRequest(), timeout=5,
                                               metadata=(("authorization", "Bearer " + WRONG),)))
        check(code == grpc.StatusCode.UNAUTHENTICATED, "Stats with a wrong bearer token: %s" % code)
        st = stub.Stats(PB.StatsRequest(), timeout=5, metadata=bearer)
        check(st.framesReceived == 0 and
              not any(stored(f) for f in ("auth-101", "auth-102", "auth-103")),
              "nothing stored from the refused calls (framesReceived %d)" % st.framesReceived)

        # 4. the right token
        rep = negotiate(TOKEN)
        check(rep.sessionId != 0, "Negotiate with the token: session %d" % rep.sessionId)
        acks = list(stub.PushFrames(iter([chunk("auth-201")]), timeout=10,
                                    metadata=(("h3000-session-id", str(rep.sessionId)),)))
        check([(k.frameId, k.ok, k.stage) for k in acks] ==
              [("auth-201", True, PB.ACK_STAGE_DURABLE)] and stored("auth-201"),
              "frame on the negotiated session (header): one DURABLE ack, stored")
        acks = list(stub.PushFrames(iter([chunk("auth-202", sid=rep.sessionId)]), timeout=10))
        check([(k.frameId, k.ok, k.stage) for k in acks] ==
              [("auth-202", True, PB.ACK_STAGE_DURABLE)] and stored("auth-202"),
              "frame on the negotiated session (sessionId): one DURABLE ack, stored")
        st = stub.Stats(PB.StatsRequest(), timeout=5, metadata=bearer)
        check(st.framesDurable == 2, "Stats with the bearer token: framesDurable %d" % st.framesDurable)

        # 7. ingest-send
        send = [a.ingest_send, "--server", addr, "--count", "1", "--size", "64K", "--quiet",
                "--transport", "grpc", "--connect-timeout-ms", "5000"]
        r = subprocess.run(send + ["--first-id", "301", "--auth-token-file", tok],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
        out = (r.stdout + r.stderr).decode(errors="replace")
        check(r.returncode == 0 and stored("frame-301", "ingest-send") and TOKEN not in out,
              "ingest-send with the right token: exit %d, stored %s" %
              (r.returncode, stored("frame-301", "ingest-send")))
        if r.returncode != 0:
            print(out)
        for name, extra in (("a wrong token", ["--auth-token-file", wrong]), ("no token", [])):
            r = subprocess.run(send + ["--first-id", "302"] + extra, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, timeout=60)
            err = r.stderr.decode(errors="replace")
            check(r.returncode != 0 and "UNAUTHENTICATED" in err and
                  "bad or missing authToken" in err and not stored("frame-302", "ingest-send") and
                  WRONG not in err,
                  "ingest-send with %s: exit %d, %r" % (name, r.returncode,
                                                        err.strip().splitlines()[-1:]))
        r = subprocess.run(send + ["--first-id", "303", "--auth-token-file", loose],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
        err = r.stderr.decode(errors="replace")
        check(r.returncode == 2 and "chmod 600" in err,
              "ingest-send with a mode-644 token file: exit %d" % r.returncode)
    except Exception as e:  # noqa: BLE001
        failures.append(repr(e))
        print("FAIL:", repr(e))
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
    text = open(log_path, errors="replace").read()
    check(TOKEN not in text and WRONG not in text, "no token in ingestd's log")
    if failures:
        print(text[-3000:])
        print("%d failed" % len(failures))
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
