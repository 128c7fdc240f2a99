#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""
Session table bookkeeping against a real ingestd (--max-sessions 2) with a stock grpcio
client:
  1. the table is full of idle negotiated sessions: a new Negotiate evicts the one idle
     longest, not the one negotiated a moment ago (its producer is about to stream);
  2. a session with an open stream is never evicted: Negotiate then says the table is full
     (RESOURCE_EXHAUSTED), and the streaming session keeps working.

usage: sessions.py --ingestd PATH --proto-dir DIR --work DIR
"""
import os
import queue
import sys
import time

import rtlib


class Feeder:
    END = object()

    def __init__(self):
        self.q = queue.Queue()

    def __iter__(self):
        return self

    def __next__(self):
        m = self.q.get()
        if m is self.END:
            raise StopIteration
        return m


def main():
    a = rtlib.setup(__doc__)
    import grpc
    import h3000_pb2 as PB
    import h3000_pb2_grpc as RPC

    node = rtlib.Ingestd(a, ["--data-dir", os.path.join(a.work, "data"), "--pool", "1M:4",
                             "--workers", "1", "--max-sessions", "2"])
    check = rtlib.Checks()
    crc32c = rtlib.crc32c

    try:
        ch = grpc.insecure_channel(node.wait_ready())
        grpc.channel_ready_future(ch).result(timeout=10)
        stub = RPC.RDMASvcStub(ch)

        def negotiate(name):
            return stub.Negotiate(PB.NegotiateRequest(versionMin=1, versionMax=1,
                                                      clientName=name), timeout=5).sessionId

        def frame(fid, sid, feeder=None):
            data = os.urandom(5000)
            c = PB.FrameChunk(frameId=fid, offset=0, data=data, last=True)
            c.meta.CopyFrom(PB.FrameMeta(frameId=fid, length=len(data), waferId="SES",
                                         crc32c=crc32c(data), hasCrc32c=True))
            return c

        def push_one(fid, sid):
            acks = list(stub.PushFrames(iter([frame(fid, sid)]), timeout=10,
                                        metadata=(("h3000-session-id", str(sid)),)))
            return any(k.ok and k.stage == PB.ACK_STAGE_DURABLE for k in acks)

        # 1. oldest idle session goes first
        s1 = negotiate("first")
        time.sleep(0.05)
        s2 = negotiate("second")
        time.sleep(0.05)
        s3 = negotiate("third")     # table full: s1 (idle longest) makes room
        ok2 = False
        try:
            ok2 = push_one("ses-9001", s2)
        except grpc.RpcError as e:
            print("  second session:", e.code(), e.details())
        check(ok2, "a session negotiated before the table filled still streams")
        try:
            push_one("ses-9002", s1)
            check(False, "the oldest idle session was evicted")
        except grpc.RpcError as e:
            check(e.code() == grpc.StatusCode.FAILED_PRECONDITION,
                  "the oldest idle session was evicted (%s)" % e.code())
        ok3 = False
        try:
            ok3 = push_one("ses-9003", s3)
        except grpc.RpcError as e:
            print("  third session:", e.code(), e.details())
        check(ok3, "the new session streams")

        # 2. sessions with an open stream are never evicted
        f1, f2 = Feeder(), Feeder()
        it1 = stub.PushFrames(f1, timeout=30, metadata=(("h3000-session-id", str(s2)),))
        it2 = stub.PushFrames(f2, timeout=30, metadata=(("h3000-session-id", str(s3)),))
        f1.q.put(frame("ses-9011", s2))
        f2.q.put(frame("ses-9012", s3))
        a1, a2 = next(it1), next(it2)   # the streams are bound to their sessions now
        check(a1.ok and a2.ok and (a1.frameId, a2.frameId) == ("ses-9011", "ses-9012"),
              "two open streams")
        try:
            negotiate("fourth")
            check(False, "table full of streaming sessions: RESOURCE_EXHAUSTED")
        except grpc.RpcError as e:
            check(e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED,
                  "table full of streaming sessions: %s %s" % (e.code(), e.details()))
        f1.q.put(frame("ses-9021", s2))
        f1.q.put(Feeder.END)
        f2.q.put(Feeder.END)
        rest = list(it1)
        list(it2)
        check(any(k.frameId == "ses-9021" and k.ok and k.stage == PB.ACK_STAGE_DURABLE
                  for k in rest),
              "the streaming session still works")
    except Exception as e:  # noqa: BLE001
        check(False, "no exception: %r" % e)
    finally:
        node.stop()
    if check.failures:
        print(node.log_tail())
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
