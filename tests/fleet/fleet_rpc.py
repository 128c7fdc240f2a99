#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""fleet_rpc.py - ask an ingest node with a stock gRPC client (python3-grpcio).

  fleet_rpc.py members HOST:PORT   rpc Members, as JSON
  fleet_rpc.py stats HOST:PORT     rpc Stats (the fleet fields and frame counters), as JSON
  fleet_rpc.py negotiate HOST:PORT rpc Negotiate (nodeId, nodeState), as JSON
  fleet_rpc.py wait HOST:PORT EXPR SECONDS
                                   poll Stats every 0.1 s until the Python expression
                                   EXPR over its fields (ints and floats) is true; print
                                   the last Stats as JSON; exit 1 when SECONDS pass first
  fleet_rpc.py export-rate HOST:PORT ROWS SECONDS [READY_FILE]
                                   poll Stats every 20 ms: from the first exported row to
                                   ROWS exported; print {rows, seconds, rows_per_s};
                                   READY_FILE is created once polling has started

Stubs are generated from proto/h3000.proto with grpc_tools.protoc into a temp dir.
Exit 0 with the JSON on stdout; 1 and the gRPC status on stderr when the call fails.
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
import rpc_stubs  # noqa: E402  (tests/rpc_stubs.py)


def load_stubs():
    return rpc_stubs.load("FLEET_RPC_STUBS", "fleet-rpc")


def main():
    if sys.argv[1:2] == ["export-rate"] and len(sys.argv) in (5, 6):
        return export_rate(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]),
                           sys.argv[5] if len(sys.argv) == 6 else None)
    if sys.argv[1:2] == ["wait"] and len(sys.argv) == 5:
        return wait(sys.argv[2], sys.argv[3], float(sys.argv[4]))
    if len(sys.argv) != 3 or sys.argv[1] not in ("members", "stats", "negotiate"):
        sys.exit(__doc__)
    import grpc
    from google.protobuf import json_format
    pb, pbg = load_stubs()
    ch = grpc.insecure_channel(sys.argv[2])
    stub = pbg.RDMASvcStub(ch)
    try:
        if sys.argv[1] == "members":
            r = stub.Members(pb.MembersRequest(), timeout=10)
        elif sys.argv[1] == "stats":
            r = stub.Stats(pb.StatsRequest(), timeout=10)
            r.ClearField("latency")
            r.ClearField("stageLatency")
        else:
            r = stub.Negotiate(pb.NegotiateRequest(versionMin=1, versionMax=1, clientName="fleet_rpc",
                                                   transports=[pb.TRANSPORT_GRPC_STREAM]), timeout=10)
    except grpc.RpcError as e:
        print("fleet_rpc: %s: %s %s" % (sys.argv[1], e.code(), e.details()), file=sys.stderr)
        return 1
    print(json.dumps(json_format.MessageToDict(r, preserving_proto_field_name=True,
                                               always_print_fields_with_no_presence=True)
                     if _has_new_kw() else
                     json_format.MessageToDict(r, preserving_proto_field_name=True,
                                               including_default_value_fields=True)))
    return 0


def stats_dict(pb, stub):
    r = stub.Stats(pb.StatsRequest(), timeout=10)
    d = {}
    for f in r.DESCRIPTOR.fields:   # the scalars (a message field, e.g. tier, is not JSON)
        if f.label != f.LABEL_REPEATED and f.type != f.TYPE_MESSAGE:
            d[f.name] = getattr(r, f.name)
    return d


def wait(addr, expr, seconds):
    import time
    import grpc
    pb, pbg = load_stubs()
    stub = pbg.RDMASvcStub(grpc.insecure_channel(addr))
    end = time.monotonic() + seconds
    d = {}
    while True:
        try:
            d = stats_dict(pb, stub)
            if eval(expr, {}, d):
                print(json.dumps(d))
                return 0
        except grpc.RpcError as e:
            d = {"error": str(e.code())}
        if time.monotonic() > end:
            print(json.dumps(d))
            print("fleet_rpc: wait: '%s' still false after %.0f s" % (expr, seconds), file=sys.stderr)
            return 1
        time.sleep(0.1)


def export_rate(addr, rows, seconds, ready=None):
    import time
    import grpc
    pb, pbg = load_stubs()
    stub = pbg.RDMASvcStub(grpc.insecure_channel(addr))
    end = time.monotonic() + seconds
    t0 = e0 = None
    while time.monotonic() < end:
        d = stats_dict(pb, stub)
        now = time.monotonic()
        if ready:
            open(ready, "w").close()
            ready = None
        ex = d["fleetExportedRows"]
        if t0 is None and ex > 0:
            t0, e0 = now, ex
        if ex >= rows:
            dt = now - t0
            n = ex - e0
            print(json.dumps({"rows": n, "seconds": round(dt, 3),
                              "rows_per_s": round(n / dt, 1) if dt > 0 else 0}))
            return 0
        time.sleep(0.02)
    print("fleet_rpc: export-rate: %d rows not exported within %.0f s" % (rows, seconds), file=sys.stderr)
    return 1


def _has_new_kw():
    import inspect
    from google.protobuf import json_format
    return "always_print_fields_with_no_presence" in inspect.signature(json_format.MessageToDict).parameters


if __name__ == "__main__":
    sys.exit(main())
