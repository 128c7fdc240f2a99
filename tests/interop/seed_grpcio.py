#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""
A stock seed client (Debian's python3-grpcio) against a real ingestd: stubs generated at
test time from the SEED fixture alone (tests/interop/seed/rdma_stream.proto), no
Negotiate, exactly what the original producers send: FrameMeta with a GUID frameId
(uuid4), no waferId, a timestamp in ms since the epoch.

On one ControlStream (this host has no RDMA connection behind the stream, so every frame
is answered with a NACK):
  - 500 pipelined FrameMeta -> exactly 500 Acks, each naming a frame that was sent, one per
    frame, ok=false with a non-empty msg;
  - ids at the edge of the rule (256 bytes, multi-byte UTF-8) pass validation: the same
    NACK as the GUIDs, naming the id;
  - an empty id, a 257-byte id and an id with a control character: ok=false, msg names
    the rule (invalid UTF-8 cannot be sent from a Python str field; the C tests cover it);
  - the stream is still usable after all of that (one more GUID frame) and ends with
    status OK; ingestd stops cleanly (exit 0).

usage: seed_grpcio.py --ingestd PATH --proto-dir tests/interop/seed --work DIR
Prints "N passed, M failed" last; exits 1 on any failure.
"""
import os
import queue
import re
import sys
import time
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "review"))
import rtlib  # noqa: E402

N_FRAMES = 500
CALL_TIMEOUT_S = 60   # every read below is bounded by the call's deadline


class Feeder:
    """Request iterator fed from the test thread; close() half-closes the stream."""
    _END = object()

    def __init__(self):
        self.q = queue.Queue()

    def send(self, m):
        self.q.put(m)

    def close(self):
        self.q.put(self._END)

    def __iter__(self):
        return self

    def __next__(self):
        m = self.q.get()
        if m is self._END:
            raise StopIteration
        return m


def main():
    a = rtlib.setup(__doc__.split("\n\n")[0], protos=("rdma_stream.proto",))
    import grpc
    import rdma_stream_pb2 as pb
    import rdma_stream_pb2_grpc as rpc

    check = rtlib.Checks()
    node = rtlib.Ingestd(a, ["--data-dir", os.path.join(a.work, "data"), "--pool", "1M:8",
                             "--workers", "1", "--frame-timeout", "5"])
    ch = None
    try:
        addr = node.wait_ready()
        ch = grpc.insecure_channel(addr)
        grpc.channel_ready_future(ch).result(timeout=10)
        stub = rpc.RDMASvcStub(ch)

        def meta(fid, i=0):
            # what the C# seed client sends: GUID id, its buffer's address/rkey/length,
            # no waferId, ToUnixTimeMilliseconds()
            return pb.FrameMeta(frameId=fid, addr=0x7f0000000000 + (i << 20), rkey=0x1234,
                                length=1 << 20, timestamp=int(time.time() * 1000))

        feed = Feeder()
        resp = stub.ControlStream(feed, timeout=CALL_TIMEOUT_S)

        # 500 pipelined seed frames
        sent = [str(uuid.uuid4()) for _ in range(N_FRAMES)]
        for i, f in enumerate(sent):
            feed.send(meta(f, i))
        acks = [next(resp) for _ in range(N_FRAMES)]
        ids = [x.frameId for x in acks]
        check(len(acks) == N_FRAMES, "%d Acks for %d FrameMeta" % (len(acks), N_FRAMES))
        check(set(ids) <= set(sent), "every Ack names a frame that was sent")
        check(len(set(ids)) == len(ids) and set(ids) == set(sent),
              "exactly one Ack per frame (%d distinct ids of %d sent)" % (len(set(ids)), N_FRAMES))
        check(all(not x.ok for x in acks), "every Ack is ok=false (no RDMA behind this stream)")
        check(all(x.msg.strip() for x in acks), "every NACK has a non-empty msg")
        # the node's NACK names the frame: compare messages with the id taken out
        def norm(msg, fid):
            return msg.replace(fid, "<id>") if fid else msg
        nack = norm(acks[0].msg, acks[0].frameId)
        print("  NACK msg: %r" % acks[0].msg)
        check(all(norm(x.msg, x.frameId) == nack for x in acks), "every seed frame gets the same NACK")

        # ids at the edge of the rule are valid: same NACK as a GUID, naming the id
        for what, fid in (("a 256-byte id", "x" * 256),
                          ("a multi-byte UTF-8 id", "wafer-\u03a9-\u6f22\u5b57-" + str(uuid.uuid4())),
                          ("a 256-byte id of 2-byte characters", "\u00e9" * 128)):
            feed.send(meta(fid))
            x = next(resp)
            check(x.frameId == fid and not x.ok and norm(x.msg, fid) == nack,
                  "%s passes validation (Ack names it, same NACK as a GUID)" % what)

        # ids that break the rule: ok=false, the msg names the rule
        # (the msg says what is wrong and states the rule: 1..256 bytes, UTF-8, no controls)
        bad = [("an empty id", "", r"empty"),
               ("a 257-byte id", "y" * 257, r"long|257"),
               ("an id with a control character", "ab\x01cd", r"control"),
               ("an id with a newline", "frame\n1", r"control")]
        for what, fid, rule in bad:
            feed.send(meta(fid))
            x = next(resp)
            check(not x.ok and re.search(rule, x.msg, re.I) is not None and "256" in x.msg and
                  re.search(r"control", x.msg, re.I) is not None and norm(x.msg, fid) != nack,
                  "%s: ok=false, msg names the rule (%r)" % (what, x.msg))

        # still usable: one more seed frame, then half-close -> status OK, no extra Acks
        last = str(uuid.uuid4())
        feed.send(meta(last))
        x = next(resp)
        check(x.frameId == last and not x.ok and norm(x.msg, last) == nack,
              "the stream is still usable after bad ids (Ack for %s)" % last)
        feed.close()
        rest = list(resp)
        check(rest == [], "no Ack beyond one per frame (%d extra)" % len(rest))
        check(resp.code() == grpc.StatusCode.OK,
              "ControlStream ends with status OK (%s %r)" % (resp.code(), resp.details()))
    except grpc.RpcError as e:
        check(False, "ControlStream failed: %s %r" % (e.code(), e.details()))
    except RuntimeError as e:
        check(False, str(e))
    finally:
        if ch is not None:
            ch.close()
        alive = node.proc.poll() is None
        rc = node.stop()
        check(alive and rc == 0, "ingestd was up to the end and stopped cleanly (exit %s)" % rc)
        if check.failures:
            print("--- ingestd log (tail)\n" + node.log_tail())
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
