#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""
Credentials done properly (issue 8), against a real ingestd with stock grpcio clients,
ingest-send and a raw HTTP/2 client on another loopback address (tests/review/h2raw.py).
Certificates are made with openssl in --work at test time.
  1. the token compare is length-exact: the token followed by NUL and anything is refused;
  2. a session id alone is no credential: another connection naming it is refused
     PERMISSION_DENIED and stores nothing; the connection that negotiated it stores;
  3. failed authentication is rate-limited: after --auth-fail-burst failures an address is
     refused RESOURCE_EXHAUSTED (even with the right token) for a back-off; another address
     is not affected;
  4. mTLS (--tls-client-ca): no client certificate, one from another CA and an expired one
     are refused at the handshake; a good one works and its subject is the identity in the
     log; a session negotiated with certificate A is refused to certificate B;
  5. ingest-send --tls-ca/--tls-cert/--tls-key stores a frame over mTLS; without a client
     certificate, or verifying another server name, it fails with a clear message.

usage: creds.py --ingestd PATH --ingest-send PATH --proto-dir DIR --work DIR
"""
import os
import subprocess
import sys
import time

import h2raw
import rtlib

TOKEN = "h3000-creds-token-7c1d0e55"


def openssl(*args, cwd):
    subprocess.run(["openssl"] + list(args), cwd=cwd, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.PIPE, timeout=60)


def make_pki(d):
    """ca1 (signs the server and clients a, b, expired), ca2 (signs client 'other')."""
    os.makedirs(d, exist_ok=True)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    for ca in ("ca1", "ca2"):
        openssl("req", "-x509", *ec, "-keyout", ca + ".key", "-out", ca + ".pem", "-days", "2",
                "-subj", "/CN=h3000 test " + ca, cwd=d)
    with open(os.path.join(d, "san.cnf"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    with open(os.path.join(d, "client.cnf"), "w") as f:
        f.write("extendedKeyUsage=clientAuth\n")

    def leaf(name, ca, subj, ext):
        openssl("req", "-new", *ec, "-keyout", name + ".key", "-out", name + ".csr", "-subj", subj,
                cwd=d)
        openssl("x509", "-req", "-in", name + ".csr", "-CA", ca + ".pem", "-CAkey", ca + ".key",
                "-CAcreateserial", "-days", "2", "-extfile", ext, "-out", name + ".pem", cwd=d)

    leaf("server", "ca1", "/CN=ingest-node", "san.cnf")
    leaf("a", "ca1", "/O=h3000/CN=producer-a", "client.cnf")
    leaf("b", "ca1", "/O=h3000/CN=producer-b", "client.cnf")
    leaf("other", "ca2", "/O=elsewhere/CN=producer-x", "client.cnf")
    # expired: signed by ca1, valid only in 2020 (openssl ca takes explicit dates)
    os.makedirs(os.path.join(d, "newcerts"), exist_ok=True)
    open(os.path.join(d, "index.txt"), "w").close()
    with open(os.path.join(d, "serial"), "w") as f:
        f.write("1000\n")
    with open(os.path.join(d, "ca.cnf"), "w") as f:
        f.write("[ca]\ndefault_ca=d\n[d]\ndir=%s\ndatabase=$dir/index.txt\n"
                "new_certs_dir=$dir/newcerts\nserial=$dir/serial\ndefault_md=sha256\n"
                "policy=p\nextensions=x\n[p]\ncommonName=supplied\norganizationName=optional\n"
                "[x]\nextendedKeyUsage=clientAuth\n" % d)
    openssl("req", "-new", *ec, "-keyout", "expired.key", "-out", "expired.csr",
            "-subj", "/O=h3000/CN=producer-old", cwd=d)
    openssl("ca", "-batch", "-config", "ca.cnf", "-cert", "ca1.pem", "-keyfile", "ca1.key",
            "-in", "expired.csr", "-out", "expired.pem", "-startdate", "20200101000000Z",
            "-enddate", "20200102000000Z", "-notext", cwd=d)
    return {n: os.path.join(d, n) for n in ("ca1.pem", "ca2.pem", "server.pem", "server.key",
                                            "a.pem", "a.key", "b.pem", "b.key", "other.pem",
                                            "other.key", "expired.pem", "expired.key")}


def main():
    a = rtlib.setup(__doc__, extra_args=("--ingest-send",), protos=("h3000.proto",))
    import grpc
    import h3000_pb2 as PB
    import h3000_pb2_grpc as RPC

    check = rtlib.Checks()
    crc32c = rtlib.crc32c
    tok = os.path.join(a.work, "token")
    with open(tok, "w") as f:
        f.write(TOKEN + "\n")
    os.chmod(tok, 0o600)
    pki = make_pki(os.path.join(a.work, "pki"))
    rd = lambda p: open(pki[p], "rb").read()

    def code_of(fn):
        try:
            return fn(), None, ""
        except grpc.RpcError as e:
            return None, e.code(), e.details() or ""

    def plain(addr):
        return grpc.insecure_channel(addr, options=(("grpc.use_local_subchannel_pool", 1),))

    def tls(addr, who=None, ca="ca1.pem"):
        creds = grpc.ssl_channel_credentials(
            root_certificates=rd(ca),
            private_key=rd(who + ".key") if who else None,
            certificate_chain=rd(who + ".pem") if who else None)
        return grpc.secure_channel(addr, creds, options=(("grpc.use_local_subchannel_pool", 1),
                                                         ("grpc.ssl_target_name_override", "localhost")))

    def negotiate(ch, token=TOKEN):
        rq = PB.NegotiateRequest(versionMin=1, versionMax=1, clientName="creds.py",
                                 transports=[PB.TRANSPORT_GRPC_STREAM])
        if token is not None:
            rq.authToken = token
        return code_of(lambda: RPC.RDMASvcStub(ch).Negotiate(rq, timeout=10))

    def push(ch, fid, sid, wafer):
        data = os.urandom(10000)
        c = PB.FrameChunk(frameId=str(fid), offset=0, data=data, last=True, sessionId=sid)
        c.meta.CopyFrom(PB.FrameMeta(frameId=str(fid), length=len(data), waferId=wafer,
                                     crc32c=crc32c(data), hasCrc32c=True))
        acks, code, det = code_of(lambda: list(RPC.RDMASvcStub(ch).PushFrames(iter([c]), timeout=10)))
        if acks is None:
            return code, det
        d = [x for x in acks if x.stage == PB.ACK_STAGE_DURABLE and x.ok]
        return (grpc.StatusCode.OK, "durable") if d else (grpc.StatusCode.OK, repr(acks))

    def stored(data_dir, wafer, fid):
        return os.path.exists(os.path.join(data_dir, "frames", wafer, "%s.frame" % fid))

    base = ["--pool", "1M:4", "--workers", "1", "--rdma", "off"]

    # ------------------------------------------------------------ 1-3: token, cleartext
    data_dir = os.path.join(a.work, "data1")
    node = rtlib.Ingestd(a, base + ["--data-dir", data_dir, "--auth-token-file", tok,
                                    "--auth-fail-burst", "5"], log="ingestd1.log", metrics=True)
    try:
        addr = node.wait_ready()
        ch = plain(addr)
        # 1. NUL suffix
        r, code, det = negotiate(ch, TOKEN + "\0anything")
        check(code == grpc.StatusCode.UNAUTHENTICATED,
              "Negotiate with the token followed by NUL and more: %s %r" % (code, det))
        r, code, det = negotiate(ch, TOKEN + "\0")
        check(code == grpc.StatusCode.UNAUTHENTICATED, "Negotiate with the token followed by one NUL: %s" % code)
        r, code, det = negotiate(ch)
        check(r is not None and r.sessionId, "Negotiate with the exact token: session %s (%s %r)"
              % (r and r.sessionId, code, det))
        # 2. stolen session id on another connection
        thief = plain(addr)
        code, det = push(thief, 10, r.sessionId, "STOLEN")
        check(code == grpc.StatusCode.PERMISSION_DENIED and "belongs to another client" in det,
              "PushFrames naming the session of another connection: %s %r" % (code, det))
        check(not stored(data_dir, "STOLEN", 10), "nothing stored from the stolen session id")
        hdr = (("h3000-session-id", str(r.sessionId)),)
        meta = PB.FrameMeta(frameId="11", length=5000, waferId="STOLEN", addr=4096, rkey=1)
        _, code, det = code_of(lambda: list(RPC.RDMASvcStub(thief).ControlStream(
            iter([meta]), metadata=hdr, timeout=10)))
        check(code == grpc.StatusCode.PERMISSION_DENIED,
              "ControlStream with the stolen id in the h3000-session-id header: %s %r" % (code, det))
        thief.close()
        code, det = push(ch, 12, r.sessionId, "OWN")
        check(code == grpc.StatusCode.OK and det == "durable" and stored(data_dir, "OWN", 12),
              "the connection that negotiated the session stores on it: %s %r" % (code, det))
        ch.close()
        # 3. rate limit: burst 5 (the NUL attempts above already count 2)
        ch = plain(addr)
        codes = [negotiate(ch, "wrong-token-0123456789")[1] for _ in range(12)]
        check(codes[0] == grpc.StatusCode.UNAUTHENTICATED and
              codes[-1] == grpc.StatusCode.RESOURCE_EXHAUSTED,
              "12 wrong tokens in a row from 127.0.0.1: UNAUTHENTICATED, then RESOURCE_EXHAUSTED: %s"
              % [c.name for c in codes])
        r, code, det = negotiate(ch)
        check(code == grpc.StatusCode.RESOURCE_EXHAUSTED and "retry in" in det,
              "during the back-off even the right token is refused, unchecked: %s %r" % (code, det))
        locked = node.metric("ingest_limit_events_total", '{event="auth_locked_out"}')
        refused = node.metric("ingest_auth_refused_total")
        check(locked is not None and locked >= codes.count(grpc.StatusCode.RESOURCE_EXHAUSTED) + 1
              and refused is not None and refused >= 2,
              "/metrics counts the calls refused during the back-off (%r) and the wrong tokens (%r)"
              % (locked, refused))
        ch.close()
        # another address is not locked out (raw HTTP/2 from 127.0.0.2: the reply message)
        c = h2raw.H2(addr, "127.0.0.2")
        sid = c.open("/h3000.RDMASvc/Negotiate")
        c.send(sid, PB.NegotiateRequest(versionMin=1, versionMax=1, authToken=TOKEN)
               .SerializeToString(), end=True)
        deadline = time.time() + 10
        while sid not in c.ended and time.time() < deadline:
            c.pump(0.2)
        msgs = c.messages(sid)
        rep = PB.NegotiateReply.FromString(msgs[0]) if msgs else None
        check(rep is not None and rep.sessionId != 0,
              "meanwhile 127.0.0.2 negotiates with the right token (session %s)" % (rep and rep.sessionId))
        c.close()
        log = open(node.log_path, errors="replace").read()
        check(TOKEN not in log, "the token is never in ingestd's log")
    finally:
        rc = node.stop()
        check(rc == 0, "ingestd exit status %d" % rc)

    # ------------------------------------------------------------ 4-5: mTLS
    data_dir = os.path.join(a.work, "data2")
    node = rtlib.Ingestd(a, base + ["--data-dir", data_dir, "--tls-cert", pki["server.pem"],
                                    "--tls-key", pki["server.key"],
                                    "--tls-client-ca", pki["ca1.pem"]], log="ingestd2.log")
    try:
        addr = node.wait_ready()
        for who, what in ((None, "no client certificate"), ("other", "a certificate from another CA"),
                          ("expired", "an expired certificate")):
            ch = tls(addr, who)
            r, code, det = negotiate(ch, None)
            check(r is None and code == grpc.StatusCode.UNAVAILABLE,
                  "mTLS, %s: refused at the handshake (%s)" % (what, code))
            ch.close()
        cha = tls(addr, "a")
        r, code, det = negotiate(cha, None)
        check(r is not None and r.sessionId, "mTLS, certificate A (ca1): Negotiate works (%s %r)" % (code, det))
        code, det = push(cha, 20, r.sessionId, "MTLS")
        check(code == grpc.StatusCode.OK and det == "durable", "... and its frame is stored: %s %r" % (code, det))
        chb = tls(addr, "b")
        code, det = push(chb, 21, r.sessionId, "MTLS")
        check(code == grpc.StatusCode.PERMISSION_DENIED and "client certificate" in det,
              "certificate B naming certificate A's session: %s %r" % (code, det))
        chb.close()
        cha2 = tls(addr, "a")
        code, det = push(cha2, 22, r.sessionId, "MTLS")
        check(code == grpc.StatusCode.OK and det == "durable",
              "certificate A on a second connection may use its own session: %s %r" % (code, det))
        cha.close()
        cha2.close()
        log = open(node.log_path, errors="replace").read()
        check('identity "CN=producer-a,O=h3000"' in log,
              "the certificate's subject is the identity in ingestd's log")

        # 5. ingest-send over TLS
        def send(*extra, fid):
            r = subprocess.run([a.ingest_send, "--server", addr, "--transport", "grpc", "--count", "1",
                                "--size", "64K", "--wafer", "SEND", "--id-prefix", "f", "--first-id", str(fid)] + list(extra),
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
            return r.returncode, r.stdout.decode(errors="replace")
        rc, out = send("--tls-ca", pki["ca1.pem"], "--tls-cert", pki["a.pem"], "--tls-key", pki["a.key"], fid=30)
        check(rc == 0 and stored(data_dir, "SEND", "f30"), "ingest-send --tls-ca --tls-cert --tls-key: stored (exit %d)" % rc)
        rc, out = send("--tls-ca", pki["ca1.pem"], fid=31)
        check(rc != 0 and not stored(data_dir, "SEND", "f31") and ("certificate required" in out or "client certificate" in out),
              "ingest-send without a client certificate: exit %d, %r" % (rc, out.strip()[-200:]))
        rc, out = send("--tls-ca", pki["ca1.pem"], "--tls-cert", pki["a.pem"], "--tls-key", pki["a.key"],
                       "--tls-server-name", "other-node.example", fid=32)
        check(rc != 0 and "other-node.example" in out,
              "ingest-send verifying another server name: exit %d, %r" % (rc, out.strip()[-200:]))
        rc, out = send(fid=33)
        check(rc != 0 and not stored(data_dir, "SEND", "f33"), "ingest-send in cleartext to a TLS node: exit %d" % rc)
    finally:
        rc = node.stop()
        check(rc == 0, "ingestd exit status %d" % rc)

    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
