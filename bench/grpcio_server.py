#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""grpcio_server.py - baseline for bench/fallback.sh: a stock Python grpcio server that
implements h3000.RDMASvc Negotiate and PushFrames, counts the bytes of every FrameChunk
and acks each frame when its last chunk arrives: string ids echoed, RECEIVED then DURABLE
to sessions that asked for RECEIVED acks (NegotiateRequest.ackReceived), else one DURABLE,
as ingestd does. Nothing is stored. It is fed by the same ingest-send client as ingestd,
so the ratio between the two is the cost of the server side only.

Needs Debian's python3-grpcio and python3-protobuf (/usr/bin/python3) and protoc
(protobuf-compiler) to generate h3000_pb2 from proto/h3000.proto into a temp dir.

  grpcio_server.py [--listen 127.0.0.1:0] [--port-file PATH] [--workers 4]
"""
import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading

import grpc
from concurrent import futures

HERE = os.path.dirname(os.path.abspath(__file__))
PROTO_DIR = os.path.join(HERE, "..", "proto")


def load_pb2():
    out = tempfile.mkdtemp(prefix="h3000-pb2-")
    subprocess.run(["protoc", "--python_out=" + out, "-I" + PROTO_DIR,
                    os.path.join(PROTO_DIR, "h3000.proto")], check=True)
    sys.path.insert(0, out)
    try:
        import h3000_pb2  # noqa: E402
    finally:
        sys.path.remove(out)
        shutil.rmtree(out, ignore_errors=True)   # the module is loaded: no file needed
    return h3000_pb2


class Counters:
    def __init__(self):
        self.lock = threading.Lock()
        self.frames = 0
        self.bytes = 0
        self.sessions = 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--listen", default="127.0.0.1:0")
    ap.add_argument("--port-file")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--credits", type=int, default=64)
    args = ap.parse_args()

    pb = load_pb2()
    cnt = Counters()
    max_msg = (4 << 20) + (64 << 10)

    two_stage = set()   # sessions that asked for RECEIVED acks (NegotiateRequest.ackReceived)

    def negotiate(req, ctx):
        with cnt.lock:
            cnt.sessions += 1
            sid = cnt.sessions
            if req.ackReceived:
                two_stage.add(sid)
        credits = min(req.credits or args.credits, args.credits)
        return pb.NegotiateReply(
            version=1, sessionId=sid, transport=pb.TRANSPORT_GRPC_STREAM,
            available=[pb.TRANSPORT_GRPC_STREAM], maxFrameSize=64 << 20, credits=credits,
            maxChunkSize=1 << 20, message="grpcio baseline: counts bytes, stores nothing",
            serverVersion="grpcio-" + grpc.__version__, ackReceived=req.ackReceived)

    def push_frames(req_iter, ctx):
        # frames by their string id; the wafer comes from the first chunk's meta (empty:
        # "default"); acks echo both ids, RECEIVED only to sessions that asked for it
        md = dict(ctx.invocation_metadata())
        sid = int(md.get("h3000-session-id", "0") or 0)
        got = {}
        for ch in req_iter:
            n = len(ch.data)
            if ch.HasField("meta"):
                got[ch.frameId] = [0, ch.meta.waferId or "default"]
            ent = got.setdefault(ch.frameId, [0, "default"])
            ent[0] += n
            if ch.last:
                total, wafer = got.pop(ch.frameId)
                with cnt.lock:
                    cnt.frames += 1
                    cnt.bytes += total
                if (sid or ch.sessionId) in two_stage:
                    yield pb.Ack(frameId=ch.frameId, waferId=wafer, ok=True,
                                 stage=pb.ACK_STAGE_RECEIVED)
                yield pb.Ack(frameId=ch.frameId, waferId=wafer, ok=True, msg="ok",
                             stage=pb.ACK_STAGE_DURABLE)

    def stats(req, ctx):
        with cnt.lock:
            return pb.StatsReply(framesReceived=cnt.frames, framesDurable=cnt.frames,
                                 bytesReceived=cnt.bytes, bytesDurable=cnt.bytes)

    handler = grpc.method_handlers_generic_handler("h3000.RDMASvc", {
        "Negotiate": grpc.unary_unary_rpc_method_handler(
            negotiate, request_deserializer=pb.NegotiateRequest.FromString,
            response_serializer=pb.NegotiateReply.SerializeToString),
        "PushFrames": grpc.stream_stream_rpc_method_handler(
            push_frames, request_deserializer=pb.FrameChunk.FromString,
            response_serializer=pb.Ack.SerializeToString),
        "Stats": grpc.unary_unary_rpc_method_handler(
            stats, request_deserializer=pb.StatsRequest.FromString,
            response_serializer=pb.StatsReply.SerializeToString),
    })
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=args.workers),
                         options=[("grpc.max_receive_message_length", max_msg),
                                  ("grpc.max_send_message_length", max_msg)])
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port(args.listen)
    if not port:
        print("grpcio_server: cannot listen on " + args.listen, file=sys.stderr)
        return 2
    server.start()
    if args.port_file:
        tmp = args.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write("%d\n" % port)
        os.rename(tmp, args.port_file)
    print("grpcio_server: listening on port %d (grpcio %s)" % (port, grpc.__version__),
          file=sys.stderr)

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *a: stop.set())
    signal.signal(signal.SIGINT, lambda *a: stop.set())
    while not stop.wait(0.5):
        pass
    server.stop(2).wait(5)
    print("grpcio_server: %d frames, %d bytes, %d sessions" % (cnt.frames, cnt.bytes, cnt.sessions),
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
