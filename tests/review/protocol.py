# SPDX-License-Identifier: Apache-2.0
"""
Protocol defects found while serving seed clients (issue: seed wire contract, point 5),
each checked against a real ingestd with python3-grpcio:

 1. With --auth-token-file, a ControlStream that names no session is refused
    UNAUTHENTICATED before its message is judged: a valid seed FrameMeta and a malformed
    one alike (it used to end with status OK and a "malformed FrameMeta" NACK).
 2. A PushFrames frame refused on its first chunk (bad waferId, an id outside the rule)
    gets exactly one NACK; its later chunks are dropped without another answer, and the
    stream goes on (it used to get one more non-retryable "not in progress" NACK per
    chunk; a refusal as SHUTTING_DOWN takes the same path).
 3. The UNIMPLEMENTED answer to a compressed message carries grpc-accept-encoding.
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rtlib  # noqa: E402

a = rtlib.setup(__doc__)
import grpc  # noqa: E402
import h3000_pb2 as PB  # noqa: E402
import h3000_pb2_grpc as RPC  # noqa: E402

check = rtlib.Checks()
TOKEN = "protocol-test-token-0123456789abcdef"


def code_of(fn):
    try:
        return None, "", fn()
    except grpc.RpcError as e:
        return e.code(), e.details() or "", e


def chunks(fid, data, wafer="PROTO", csize=4096, sid=0):
    out = []
    for off in range(0, len(data), csize):
        c = PB.FrameChunk(frameId=fid, offset=off, data=data[off:off + csize],
                          last=off + csize >= len(data), sessionId=sid)
        if off == 0:
            c.meta.CopyFrom(PB.FrameMeta(frameId=fid, length=len(data), waferId=wafer,
                                         crc32c=rtlib.crc32c(data), hasCrc32c=True))
        out.append(c)
    return out


# ---------------------------------------------------------------- 1. auth before parse
tok = os.path.join(a.work, "token")
with open(tok, "w") as f:
    f.write(TOKEN + "\n")
os.chmod(tok, 0o600)
node = rtlib.Ingestd(a, ["--data-dir", os.path.join(a.work, "data-auth"), "--auth-token-file", tok],
                     log="ingestd-auth.log")
try:
    addr = node.wait_ready()
    ch = grpc.insecure_channel(addr)
    stub = RPC.RDMASvcStub(ch)
    raw = ch.stream_stream("/h3000.RDMASvc/ControlStream",
                           request_serializer=lambda b: b, response_deserializer=lambda b: b)
    seed = PB.FrameMeta(frameId="0b5f9c3e-8d1a-4c2e-9f57-3a1d2b4c5e6f", addr=4096, rkey=1,
                        length=5000, timestamp=int(time.time() * 1000))
    for what, call in (("a valid seed FrameMeta", lambda: list(stub.ControlStream(iter([seed]), timeout=10))),
                       ("a malformed message", lambda: list(raw(iter([b"\x0a\xff\xff\xff"]), timeout=10))),
                       ("an oversize message", lambda: list(raw(iter([b"\x0a" + b"\x7f" * 5000]), timeout=10)))):
        code, det, _ = code_of(call)
        check(code == grpc.StatusCode.UNAUTHENTICATED,
              "auth on, ControlStream without a session, %s: %s %r (want UNAUTHENTICATED)"
              % (what, code, det))
finally:
    node.stop()

# ---------------------------------------------------------------- 2. one answer per refused frame
node = rtlib.Ingestd(a, ["--data-dir", os.path.join(a.work, "data-push")], log="ingestd-push.log")
try:
    addr = node.wait_ready()
    ch = grpc.insecure_channel(addr)
    stub = RPC.RDMASvcStub(ch)
    data = os.urandom(5 * 4096 + 17)
    good = os.urandom(3 * 4096)
    reqs = (chunks("bad-wafer", data, wafer="bad\twafer")          # bad waferId: refused
            + chunks("x" * 257, data)                               # id above 256 bytes
            + chunks("", data)                                      # empty id
            + chunks("after", good))                                # a good frame after them
    acks = list(stub.PushFrames(iter(reqs), timeout=30))
    per = {}
    for k in acks:
        per.setdefault(k.frameId, []).append(k)
    bw = per.get("bad-wafer", [])
    check(len(bw) == 1 and not bw[0].ok and "waferId" in bw[0].msg,
          "frame with a bad waferId, 6 chunks: exactly one NACK naming waferId (%d acks: %s)"
          % (len(bw), [(x.ok, x.msg) for x in bw]))
    long_acks = [k for k in acks if k.frameId == "" and "longer than 256 bytes" in k.msg]
    empty_acks = [k for k in acks if k.frameId == "" and "is empty" in k.msg]
    rule = "1 to 256 bytes of UTF-8 without control characters"
    check(len(long_acks) == 1 and not long_acks[0].ok and rule in long_acks[0].msg,
          "257-byte frame id, 6 chunks: exactly one NACK naming the rule (%d acks)" % len(long_acks))
    check(len(empty_acks) == 1 and not empty_acks[0].ok and rule in empty_acks[0].msg,
          "empty frame id, 6 chunks: exactly one NACK naming the rule (%d acks: %s)"
          % (len(empty_acks), [x.msg for x in empty_acks]))
    af = per.get("after", [])
    check(len(af) == 1 and af[0].ok and af[0].stage == PB.ACK_STAGE_DURABLE,
          "the good frame after them: one final ack, DURABLE ok (%s)" % [(x.ok, x.stage, x.msg) for x in af])
    check(len(acks) == 4, "four frames, four answers (got %d)" % len(acks))

finally:
    node.stop()

# ---------------------------------------------------------------- 3. compressed message
# A raw HTTP/2 client (python3-h2): grpcio consumes grpc-accept-encoding itself, so the
# header is read off the wire here.
import gzip  # noqa: E402
import socket  # noqa: E402
import h2.config  # noqa: E402
import h2.connection  # noqa: E402
import h2.events  # noqa: E402

node = rtlib.Ingestd(a, ["--data-dir", os.path.join(a.work, "data-gz")], log="ingestd-gz.log")
try:
    addr = node.wait_ready()
    host, port = addr.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=10)
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    conn.initiate_connection()
    sid = conn.get_next_available_stream_id()
    conn.send_headers(sid, [(":method", "POST"), (":scheme", "http"), (":authority", addr),
                            (":path", "/h3000.RDMASvc/PushFrames"),
                            ("content-type", "application/grpc"), ("te", "trailers"),
                            ("grpc-encoding", "gzip")])
    body = gzip.compress(chunks("gz", good)[0].SerializeToString())
    conn.send_data(sid, b"\x01" + len(body).to_bytes(4, "big") + body, end_stream=True)
    sock.sendall(conn.data_to_send())
    headers, done = {}, False
    deadline = time.time() + 60
    while not done and time.time() < deadline:
        data = sock.recv(65536)
        if not data:
            break
        for ev in conn.receive_data(data):
            if isinstance(ev, (h2.events.ResponseReceived, h2.events.TrailersReceived)):
                for k, v in ev.headers:
                    headers[k.decode() if isinstance(k, bytes) else k] = v.decode() if isinstance(v, bytes) else v
            if isinstance(ev, (h2.events.StreamEnded, h2.events.StreamReset)):
                done = True
        sock.sendall(conn.data_to_send())
    sock.close()
    check(headers.get("grpc-status") == "12",
          "gzip-compressed message: grpc-status %s (want 12 UNIMPLEMENTED)" % headers.get("grpc-status"))
    enc = headers.get("grpc-accept-encoding", "")
    check("identity" in [x.strip() for x in enc.split(",")],
          "the UNIMPLEMENTED answer carries grpc-accept-encoding: %r" % enc)
    # and the node is fine afterwards
    stub = RPC.RDMASvcStub(grpc.insecure_channel(addr))
    acks = list(stub.PushFrames(iter(chunks("plain", good)), timeout=10))
    check(len(acks) == 1 and acks[0].ok, "an uncompressed call afterwards: DURABLE ok")
finally:
    node.stop()

sys.exit(check.summary())
