#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Our gRPC client (tests/func/grpc_testcli) against a stock grpcio server (Debian
python3-grpcio) with the test.Echo methods. Usage: grpc_client_interop.py PATH/TO/grpc_testcli
Exit status: that of grpc_testcli (0 when every check passed)."""
import subprocess
import sys
import time
from concurrent import futures

try:
    import grpc
except ImportError:
    print("FAIL: python3-grpcio is not installed (apt install python3-grpcio); "
          "run with /usr/bin/python3", file=sys.stderr)
    sys.exit(1)


def unary(req, ctx):
    return req


def fail(req, ctx):
    ctx.abort(grpc.StatusCode.INVALID_ARGUMENT, "bad 100% \u00e9\u2713 input")


def slow(req, ctx):
    for _ in range(300):          # bounded: 30 s at most
        if not ctx.is_active():
            break
        time.sleep(0.1)
    return b""


def bidi(it, ctx):
    for m in it:
        yield m


def sink(it, ctx):
    n = b = 0
    for m in it:
        n += 1
        b += len(m)
    return ("msgs=%d bytes=%d" % (n, b)).encode()


def many(req, ctx):
    count, size = (int(x) for x in req.decode().split())
    for i in range(count):
        yield bytes([i % 256]) * size


def main():
    cli = sys.argv[1] if len(sys.argv) > 1 else "grpc_testcli"
    h = grpc.method_handlers_generic_handler("test.Echo", {
        "Unary": grpc.unary_unary_rpc_method_handler(unary),
        "Fail": grpc.unary_unary_rpc_method_handler(fail),
        "Slow": grpc.unary_unary_rpc_method_handler(slow),
        "Bidi": grpc.stream_stream_rpc_method_handler(bidi),
        "Sink": grpc.stream_unary_rpc_method_handler(sink),
        "Many": grpc.unary_stream_rpc_method_handler(many),
    })
    srv = grpc.server(futures.ThreadPoolExecutor(max_workers=8),
                      options=[("grpc.max_receive_message_length", 8 << 20)])
    srv.add_generic_rpc_handlers((h,))
    port = srv.add_insecure_port("127.0.0.1:0")
    srv.start()
    try:
        rc = subprocess.run([cli, "127.0.0.1:%d" % port], timeout=150).returncode
    finally:
        srv.stop(grace=1)
    return rc


if __name__ == "__main__":
    sys.exit(main())
