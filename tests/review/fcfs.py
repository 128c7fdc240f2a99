#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""
Pool slots are first come, first served (control/service/xport/stream.c): a large frame waiting for
the one slot big enough for it is not starved by a steady flow of small frames from
another stream, although small frames may fall back into the large class.

ingestd --pool 1M:2,8M:1; stream S pipelines 600 small frames (512 KiB), each on its own
connection; once S is flowing, stream L sends one 6 MiB frame, which only the 8M slot
holds. Checked: every frame is DURABLE ok, L's frame is durable while more than half of S
is still to go (before the fix it waited for S to run dry in most runs), and it was stored
byte for byte.

usage: fcfs.py --ingestd PATH --proto-dir DIR --work DIR
"""
import os
import sys
import threading

import rtlib


def main():
    a = rtlib.setup(__doc__)
    import grpc
    import h3000_pb2 as PB
    import h3000_pb2_grpc as RPC

    data_dir = os.path.join(a.work, "data")
    node = rtlib.Ingestd(a, ["--data-dir", data_dir, "--pool", "1M:2,8M:1", "--workers", "1",
                             "--credits", "64"])
    check = rtlib.Checks()

    def chunks(fid, wafer, data, csize=1 << 20):
        for off in range(0, len(data), csize):
            c = PB.FrameChunk(frameId=fid, offset=off, data=data[off:off + csize],
                              last=off + csize >= len(data))
            if off == 0:
                c.meta.CopyFrom(PB.FrameMeta(frameId=fid, length=len(data), waferId=wafer))
            yield c

    try:
        addr = node.wait_ready()
        # One connection per stream: on a shared one the client's own HTTP/2 scheduling
        # could hold L's chunks behind S's data, which says nothing about the node.
        def stub_on_own_connection():
            ch = grpc.insecure_channel(addr,
                                       options=[("grpc.use_local_subchannel_pool", 1)])
            grpc.channel_ready_future(ch).result(timeout=10)
            return RPC.RDMASvcStub(ch)
        stub_s, stub_l = stub_on_own_connection(), stub_on_own_connection()

        n_small = 600
        small = bytes((i * 7) & 0xFF for i in range(512 << 10))
        big = bytes((i * 13 + 5) & 0xFF for i in range(6 << 20))
        order = []                    # ("S"|"L", frame id) in DURABLE order
        lock = threading.Lock()
        s_started = threading.Event()

        def small_frames():
            for i in range(n_small):
                if i == 8:
                    s_started.set()
                yield from chunks("s-%d" % (1000 + i), "FCFS-S", small)

        def run(label, stub, reqs):
            for ack in stub.PushFrames(reqs, timeout=120):
                if ack.stage == PB.ACK_STAGE_DURABLE or not ack.ok:
                    with lock:
                        order.append((label, ack.frameId, ack.ok, ack.msg))

        ts = threading.Thread(target=run, args=("S", stub_s, small_frames()))
        ts.start()
        s_started.wait(30)
        tl = threading.Thread(target=run, args=("L", stub_l, chunks("large-7", "FCFS-L", big)))
        tl.start()
        ts.join(150)
        tl.join(150)

        bad = [o for o in order if not o[2]]
        check(not bad, "every frame DURABLE ok (%s)" % (bad[:3],))
        check(len(order) == n_small + 1, "%d acks for %d frames" % (len(order), n_small + 1))
        check(sorted(o[1] for o in order if o[0] == "S") ==
              sorted("s-%d" % (1000 + i) for i in range(n_small)) and
              [o[1] for o in order if o[0] == "L"] == ["large-7"],
              "each frame acked once, under the string id it was sent with")
        pos = [i for i, o in enumerate(order) if o[0] == "L"]
        small_after = len(order) - 1 - pos[0] if pos else 0
        check(bool(pos) and small_after >= n_small // 2,
              "the large frame became durable with %d of %d small frames still to go "
              "(served in turn, not after the small stream)" % (small_after, n_small))
        path = os.path.join(data_dir, "frames", "FCFS-L", "large-7.frame")
        check(os.path.exists(path) and open(path, "rb").read() == big,
              "the large frame is stored byte for byte")
    finally:
        rc = node.stop()
        check(rc == 0, "ingestd exited 0 after SIGTERM (got %s)" % rc)
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
