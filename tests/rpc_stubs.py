# SPDX-License-Identifier: Apache-2.0
"""rpc_stubs.py - Python gRPC stubs of proto/h3000.proto for the test clients
(tests/fleet/fleet_rpc.py, tests/tier/tier_rpc.py), generated with grpc_tools.protoc.

load(env, prefix): into the dir named by $env when it is set (generated there once and
reused: the tests poll often), else into a new temp dir named prefix...; returns the
modules (h3000_pb2, h3000_pb2_grpc). A failed protoc exits with "<prefix>: ... failed".
"""
import os
import subprocess
import sys
import tempfile

PROTO_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "proto")


def load(env, prefix):
    out = os.environ.get(env)
    if not (out and os.path.exists(os.path.join(out, "h3000_pb2_grpc.py"))):
        if out:
            os.makedirs(out, exist_ok=True)
        else:
            out = tempfile.mkdtemp(prefix=prefix + "-")
        rc = subprocess.call([sys.executable, "-m", "grpc_tools.protoc", "-I", PROTO_DIR,
                              "--python_out", out, "--grpc_python_out", out,
                              os.path.join(PROTO_DIR, "h3000.proto")])
        if rc:
            sys.exit("%s: grpc_tools.protoc failed" % prefix)
    sys.path.insert(0, out)
    import h3000_pb2
    import h3000_pb2_grpc
    return h3000_pb2, h3000_pb2_grpc
