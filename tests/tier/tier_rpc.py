#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""tier_rpc.py - ask an ingest node about its object store tier with a stock gRPC client
(python3-grpcio).

  tier_rpc.py stats HOST:PORT      rpc Stats: the frame counters and StatsReply.tier
                                   (TierStats) in one flat JSON object
  tier_rpc.py wait HOST:PORT EXPR SECONDS
                                   poll Stats every 0.1 s until the Python expression
                                   EXPR over those fields is true; print them as JSON;
                                   exit 1 when SECONDS pass first
  tier_rpc.py get HOST:PORT WAFER FRAME OUT [SOURCE]
                                   rpc GetFrame with grpcio: write the bytes to OUT, print
                                   the first message's fields as JSON (SOURCE: any, local,
                                   store); exit 1 and the status on stderr when it fails

Stubs are generated from proto/h3000.proto with grpc_tools.protoc ($TIER_RPC_STUBS: a dir
to generate them into once and reuse).
"""
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
import rpc_stubs  # noqa: E402  (tests/rpc_stubs.py)


def load_stubs():
    return rpc_stubs.load("TIER_RPC_STUBS", "tier-rpc")


def flat(r):
    d = {}
    for f in r.DESCRIPTOR.fields:
        if f.label == f.LABEL_REPEATED or f.message_type is not None:
            continue
        d[f.name] = getattr(r, f.name)
    if r.HasField("tier"):
        for f in r.tier.DESCRIPTOR.fields:
            d[f.name] = getattr(r.tier, f.name)
    return d


def main():
    import grpc
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    pb, pbg = load_stubs()
    stub = pbg.RDMASvcStub(grpc.insecure_channel(sys.argv[2]))
    cmd = sys.argv[1]
    if cmd == "stats" and len(sys.argv) == 3:
        try:
            print(json.dumps(flat(stub.Stats(pb.StatsRequest(), timeout=10))))
        except grpc.RpcError as e:
            print("tier_rpc: stats: %s %s" % (e.code(), e.details()), file=sys.stderr)
            return 1
        return 0
    if cmd == "wait" and len(sys.argv) == 5:
        expr, end = sys.argv[3], time.monotonic() + float(sys.argv[4])
        d = {}
        while True:
            try:
                d = flat(stub.Stats(pb.StatsRequest(), timeout=10))
                if eval(expr, {}, d):
                    print(json.dumps(d))
                    return 0
            except grpc.RpcError as e:
                d = {"error": str(e.code())}
            if time.monotonic() > end:
                print(json.dumps(d))
                print("tier_rpc: wait: '%s' still false after %s s" % (expr, sys.argv[4]), file=sys.stderr)
                return 1
            time.sleep(0.1)
    if cmd == "get" and len(sys.argv) in (6, 7):
        src = {"any": 0, "local": 1, "store": 2}[sys.argv[6] if len(sys.argv) == 7 else "any"]
        req = pb.GetFrameRequest(waferId=sys.argv[3], frameId=sys.argv[4], source=src)
        first = None
        try:
            with open(sys.argv[5], "wb") as out:
                for m in stub.GetFrame(req, timeout=120):
                    if first is None:
                        first = {f.name: getattr(m, f.name) for f in m.DESCRIPTOR.fields
                                 if f.name != "data"}
                    out.write(m.data)
        except grpc.RpcError as e:
            print("tier_rpc: get: %s %s" % (e.code(), e.details()), file=sys.stderr)
            return 1
        print(json.dumps(first))
        return 0
    sys.exit(__doc__)


if __name__ == "__main__":
    sys.exit(main())
