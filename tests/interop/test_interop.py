#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""
Interop and bad-input tests: a stock gRPC client (Debian's python3-grpcio) against a real
ingestd on loopback, with real files and a real SQLite catalog.

usage: test_interop.py --ingestd PATH --proto-dir DIR [--work DIR] [-k PATTERN]... [-v]

Stubs are generated at test time from proto/h3000.proto and proto/health.proto with
grpc_tools.protoc. ingestd runs on 127.0.0.1 port 0 (--port-file) with a temp data dir
and a small pool; it is always torn down. Frame ids are strings ("f-<n>", GUIDs, paths,
spaces, non-ASCII); streams that do not negotiate ackReceived get one final ack per frame. Prints "N passed, M failed" last; exits 1 on
any failure.
"""
import argparse
import hashlib
import os
import queue
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import unittest

ARGS = None
PB = None       # h3000_pb2
RPC = None      # h3000_pb2_grpc
HPB = None      # health_pb2
HRPC = None     # health_pb2_grpc
grpc = None

ID_RULE = "1 to 256 bytes of UTF-8 without control characters"
POOL = "1M:8,4M:4"
POOL_TOTAL = 12
MAX_FRAME = 4 << 20
FRAME_TIMEOUT_S = 2
WAIT_S = 20

# ------------------------------------------------------------------ helpers


def crc32c(data):
    """CRC-32C (Castagnoli), table driven; only used on small frames (pure Python)."""
    tbl = crc32c.table
    if tbl is None:
        tbl = []
        for i in range(256):
            c = i
            for _ in range(8):
                c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
            tbl.append(c)
        crc32c.table = tbl
    c = 0xFFFFFFFF
    for b in data:
        c = tbl[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


crc32c.table = None


def gen_stubs(proto_dir, out):
    from grpc_tools import protoc  # noqa: F401  (fail early with a clear import error)
    for p in ("h3000.proto", "health.proto"):
        rc = subprocess.call([sys.executable, "-m", "grpc_tools.protoc", "-I", proto_dir,
                              "--python_out=" + out, "--grpc_python_out=" + out,
                              os.path.join(proto_dir, p)])
        if rc != 0:
            raise RuntimeError("grpc_tools.protoc failed for %s" % p)
    sys.path.insert(0, out)


class Node:
    """One ingestd process on 127.0.0.1:0 with its own data dir."""

    def __init__(self, work, name, extra=(), tls_ca=None):
        self.dir = os.path.join(work, name)
        shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(self.dir)
        self.data = os.path.join(self.dir, "data")
        self.port_file = os.path.join(self.dir, "port")
        self.log_path = os.path.join(self.dir, "ingestd.log")
        self.log = open(self.log_path, "wb")
        cmd = [ARGS.ingestd, "--listen", "127.0.0.1:0", "--data-dir", self.data,
               "--pool", POOL, "--port-file", self.port_file, "--workers", "1",
               "--frame-timeout", str(FRAME_TIMEOUT_S)] + list(extra)
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 60
        self.port = None
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("ingestd exited with %d at start-up:\n%s" %
                                   (self.proc.returncode, self.tail()))
            try:
                with open(self.port_file) as f:
                    self.port = int(f.read().strip())
                break
            except (OSError, ValueError):
                time.sleep(0.05)
        if not self.port:
            self.stop()
            raise RuntimeError("ingestd did not write its port file in 15 s:\n" + self.tail())
        self.addr = "127.0.0.1:%d" % self.port
        opts = [("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1)]
        if tls_ca:
            with open(tls_ca, "rb") as f:
                creds = grpc.ssl_channel_credentials(root_certificates=f.read())
            self.channel = grpc.secure_channel(self.addr, creds, options=opts)
        else:
            self.channel = grpc.insecure_channel(self.addr, options=opts)
        grpc.channel_ready_future(self.channel).result(timeout=10)
        self.stub = RPC.RDMASvcStub(self.channel)
        self.health = HRPC.HealthStub(self.channel)

    def tail(self, n=40):
        try:
            with open(self.log_path, "rb") as f:
                return b"".join(f.readlines()[-n:]).decode(errors="replace")
        except OSError:
            return ""

    def alive(self):
        return self.proc.poll() is None

    def stop(self, sig=signal.SIGTERM, timeout=15):
        """Stop; returns the exit status (kills after timeout)."""
        try:
            self.channel.close()
        except Exception:
            pass
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
                return None
        self.log.close()
        return self.proc.returncode

    def stats(self):
        return self.stub.Stats(PB.StatsRequest(), timeout=30)

    def catalog_rows(self, frame_id, wafer=None):
        db = os.path.join(self.data, "catalog.db")
        con = sqlite3.connect("file:%s?mode=ro" % db, uri=True, timeout=30)
        try:
            q = "SELECT frame_id, wafer_id, length, crc32c, path FROM frames WHERE frame_id = ?"
            if wafer is None:
                return con.execute(q, (frame_id,)).fetchall()
            return con.execute(q + " AND wafer_id = ?", (frame_id, wafer)).fetchall()
        finally:
            con.close()

    def frame_path(self, wafer, frame_id):
        return os.path.join(self.data, "frames", file_name(wafer or "default"),
                            file_name(frame_id) + ".frame")

    def session(self, ack_received=True, credits=0):
        """Negotiate a session; returns the metadata that names it on a stream."""
        r = self.stub.Negotiate(PB.NegotiateRequest(versionMin=1, versionMax=1, credits=credits,
                                                    ackReceived=ack_received), timeout=30)
        if r.ackReceived != ack_received:
            raise AssertionError("NegotiateReply.ackReceived %s, asked %s" %
                                 (r.ackReceived, ack_received))
        if not r.ackStored:
            raise AssertionError("NegotiateReply.ackStored is false: Acks must carry stored")
        return (("h3000-session-id", str(r.sessionId)),)


def file_name(frame_or_wafer_id):
    """The on-disk name of an id, as the node's contract defines it (common/ident.h): an id
    of at most 200 bytes of [A-Za-z0-9._-] other than "." and ".." as it is; any other id
    percent-encoded (every byte outside [A-Za-z0-9_-] becomes %XX); an encoded name above
    200 bytes becomes its first 120 bytes (never cutting a %XX) + '~' + SHA-256 hex."""
    b = frame_or_wafer_id.encode()
    plain = set(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
    if b not in (b".", b"..") and len(b) <= 200 and all(c in plain or c == 0x2E for c in b):
        return b.decode()
    enc = "".join(chr(c) if c in plain else "%%%02X" % c for c in b)
    if len(enc) > 200:
        k = 120
        if enc[k - 1] == "%":
            k -= 1
        elif enc[k - 2] == "%":
            k -= 2
        enc = enc[:k] + "~" + hashlib.sha256(b).hexdigest().upper()
    return enc


NODE = None
_next_id = [int(time.time() * 1000) % 1000000 * 1000]


def fid():
    """A fresh frame id: a string, as the contract has it ("f-<n>")."""
    _next_id[0] += 1
    return "f-%d" % _next_id[0]


def payload(n, seed):
    # deterministic, not all-equal bytes; cheap for megabytes
    block = bytes((i * 131 + seed * 7) & 0xFF for i in range(4093))
    return (block * (n // len(block) + 1))[:n]


def meta(frame_id, length, wafer="W1", crc=None):
    m = PB.FrameMeta(frameId=frame_id, length=length, waferId=wafer,
                     timestamp=time.time_ns())
    if crc is not None:
        m.crc32c = crc
        m.hasCrc32c = True
    return m


def chunks(frame_id, data, wafer="W1", chunk=256 << 10, crc=None, length=None):
    length = len(data) if length is None else length
    out = []
    off = 0
    while True:
        piece = data[off:off + chunk]
        c = PB.FrameChunk(frameId=frame_id, offset=off, data=piece,
                          last=off + len(piece) >= len(data))
        if off == 0:
            c.meta.CopyFrom(meta(frame_id, length, wafer, crc))
        out.append(c)
        off += len(piece)
        if off >= len(data):
            return out


def push(chunk_list, timeout=WAIT_S, metadata=None):
    """Send chunks on one PushFrames call, half-close, return all acks."""
    return list(NODE.stub.PushFrames(iter(chunk_list), timeout=timeout, metadata=metadata))


def by_frame(acks):
    d = {}
    for a in acks:
        d.setdefault(a.frameId, []).append(a)
    return d


class Feeder:
    """A request iterator fed from the test thread; close() half-closes."""
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


def wait_idle(tc, node=None, timeout=10):
    """All slots back in the pool and nothing in flight (bounded)."""
    node = node or NODE
    deadline = time.time() + timeout
    st = None
    while time.time() < deadline:
        st = node.stats()
        if st.poolSlotsFree == st.poolSlotsTotal and st.framesInFlight == 0:
            return st
        time.sleep(0.05)
    tc.fail("slots not back: %d of %d free, %d in flight" %
            (st.poolSlotsFree, st.poolSlotsTotal, st.framesInFlight))


def seed_of(frame_id):
    return sum(frame_id.encode()) & 0xFF


def assert_good_frame(tc, size=100000, wafer="W1"):
    """The node still serves: one frame pushed on an implicit session, one final ack
    (DURABLE, ok, both ids echoed), file identical."""
    f = fid()
    data = payload(size, seed_of(f))
    acks = by_frame(push(chunks(f, data, wafer)))[f]
    tc.assertEqual([a.stage for a in acks], [PB.ACK_STAGE_DURABLE], acks)
    tc.assertTrue(acks[0].ok, acks)
    tc.assertEqual((acks[0].frameId, acks[0].waferId), (f, wafer))
    with open(NODE.frame_path(wafer, f), "rb") as fh:
        tc.assertEqual(fh.read(), data)
    return f


# ------------------------------------------------------------------ tests


class T1Basics(unittest.TestCase):
    def test_health_serving(self):
        r = NODE.health.Check(HPB.HealthCheckRequest(service=""), timeout=30)
        self.assertEqual(r.status, HPB.HealthCheckResponse.SERVING)
        r = NODE.health.Check(HPB.HealthCheckRequest(service="h3000.RDMASvc"), timeout=30)
        self.assertEqual(r.status, HPB.HealthCheckResponse.SERVING)

    def test_negotiate(self):
        r = NODE.stub.Negotiate(PB.NegotiateRequest(
            versionMin=1, versionMax=3, clientName="interop",
            transports=[PB.TRANSPORT_RDMA_READ, PB.TRANSPORT_GRPC_STREAM],
            credits=1000, maxFrameSize=1 << 40), timeout=30)
        self.assertEqual(r.version, 1)
        self.assertNotEqual(r.sessionId, 0)
        self.assertEqual(r.transport, PB.TRANSPORT_GRPC_STREAM)
        self.assertEqual(list(r.available), [PB.TRANSPORT_GRPC_STREAM])
        self.assertIn("RDMA", r.message.upper())
        self.assertLessEqual(r.credits, 64)
        self.assertGreater(r.credits, 0)
        self.assertEqual(r.maxFrameSize, MAX_FRAME)
        self.assertEqual(r.maxChunkSize, 1 << 20)
        self.assertTrue(r.serverVersion)
        r2 = NODE.stub.Negotiate(PB.NegotiateRequest(versionMin=1, versionMax=1, credits=3,
                                                     maxFrameSize=1 << 20), timeout=30)
        self.assertEqual(r2.credits, 3)
        self.assertEqual(r2.maxFrameSize, 1 << 20)
        self.assertNotEqual(r2.sessionId, r.sessionId)

    def test_negotiate_rails_without_rdma(self):
        # a node without RDMA lists no rails, gives no session a rail, and a request that
        # names one falls back like any other (its message says the name was ignored)
        r = NODE.stub.Negotiate(PB.NegotiateRequest(
            versionMin=1, versionMax=1, clientName="interop-rails",
            transports=[PB.TRANSPORT_RDMA_READ, PB.TRANSPORT_GRPC_STREAM], rail="mlx5_1"), timeout=30)
        self.assertEqual(r.transport, PB.TRANSPORT_GRPC_STREAM)
        self.assertEqual(len(r.rails), 0)
        self.assertEqual(r.rail, "")
        self.assertIn('rail "mlx5_1" ignored: this node has no RDMA rails', r.message)
        s = NODE.stub.Stats(PB.StatsRequest(), timeout=30)
        self.assertEqual(len(s.rails), 0)

    def test_negotiate_version_mismatch(self):
        with self.assertRaises(grpc.RpcError) as cm:
            NODE.stub.Negotiate(PB.NegotiateRequest(versionMin=2, versionMax=5), timeout=30)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.FAILED_PRECONDITION)
        self.assertIn("version", cm.exception.details())

    def test_negotiate_rdma_only(self):
        with self.assertRaises(grpc.RpcError) as cm:
            NODE.stub.Negotiate(PB.NegotiateRequest(versionMin=1, versionMax=1,
                                                    transports=[PB.TRANSPORT_RDMA_READ]), timeout=30)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.FAILED_PRECONDITION)

    def test_unknown_method(self):
        call = NODE.channel.unary_unary("/h3000.RDMASvc/NoSuchMethod",
                                        request_serializer=lambda b: b,
                                        response_deserializer=lambda b: b)
        with self.assertRaises(grpc.RpcError) as cm:
            call(b"", timeout=30)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.UNIMPLEMENTED)

    def test_stats(self):
        st = NODE.stats()
        self.assertEqual(st.poolSlotsTotal, POOL_TOTAL)
        self.assertGreater(st.uptimeNs, 0)
        self.assertIn("fallback", st.transportNote)
        before = st.framesDurable
        assert_good_frame(self)
        st = NODE.stats()
        self.assertGreaterEqual(st.framesDurable, before + 1)
        self.assertGreater(st.ackLatencyP50Ns, 0)
        self.assertGreaterEqual(st.ackLatencyP99Ns, st.ackLatencyP50Ns)
        self.assertGreaterEqual(st.sessionsActive, 0)
        # the /metrics histograms, per stage, with their fixed bucket bounds
        lat = {h.stage: h for h in st.latency}
        self.assertEqual(set(lat), {"ack_received", "ack_durable", "queue", "write", "sync",
                                    "commit", "ack"})
        for h in lat.values():
            self.assertEqual(len(h.bucketCounts), len(h.bucketUpperNs) + 1)
            self.assertEqual(sum(h.bucketCounts), h.count)
            self.assertEqual(list(h.bucketUpperNs), sorted(h.bucketUpperNs))
        self.assertGreaterEqual(lat["ack_durable"].count, 1)
        self.assertGreater(lat["ack_durable"].sumNs, 0)


class T2ControlStream(unittest.TestCase):
    def test_lockstep(self):
        feed = Feeder()
        resp = NODE.stub.ControlStream(feed, timeout=WAIT_S)
        for i in range(5):
            f = fid()
            feed.send(PB.FrameMeta(frameId=f, addr=0x1000, rkey=7, length=4096, waferId="W1"))
            a = next(resp)
            self.assertEqual(a.frameId, f)
            self.assertEqual(a.waferId, "W1")   # a NACK names the wafer too, once it is valid
            self.assertFalse(a.ok)
            self.assertEqual(a.code, PB.ERROR_NO_TRANSPORT)
            self.assertIn("PushFrames", a.msg)
            self.assertIn(f, a.msg)
        feed.close()
        self.assertEqual(list(resp), [])

    def test_pipelined_10k(self):
        ids = [fid() for _ in range(10000)]
        reqs = (PB.FrameMeta(frameId=f, addr=0x1000 + i, rkey=9, length=1 << 20,
                             waferId="W1") for i, f in enumerate(ids))
        acks = list(NODE.stub.ControlStream(reqs, timeout=30))
        self.assertEqual(len(acks), 10000)
        self.assertEqual([a.frameId for a in acks], ids)
        self.assertTrue(all(a.code == PB.ERROR_NO_TRANSPORT for a in acks))

    def test_client_not_reading(self):
        # The client reads nothing for a while: the node's per-call send buffer fills, it
        # pauses that call's input (bounded memory) and resumes when the client reads.
        # Every ack still arrives, in order.
        ch = grpc.insecure_channel(NODE.addr, options=[("grpc.http2.bdp_probe", 0),
                                                       ("grpc.http2.lookahead_bytes", 65536)])
        try:
            stub = RPC.RDMASvcStub(ch)
            n = 130000
            ids = [fid() for _ in range(n)]
            reqs = (PB.FrameMeta(frameId=f, length=100, waferId="W" * 64) for f in ids)
            resp = stub.ControlStream(reqs, timeout=300)
            time.sleep(2)
            k = 0
            for a in resp:
                self.assertEqual(a.frameId, ids[k])
                k += 1
            self.assertEqual(k, n)
        finally:
            ch.close()

    def test_invalid_descriptors(self):
        ids = [fid() for _ in range(4)]
        reqs = [PB.FrameMeta(frameId=ids[0], length=0, waferId="W1"),
                PB.FrameMeta(frameId=ids[1], length=MAX_FRAME + 1, waferId="W1"),
                PB.FrameMeta(frameId=ids[2], length=10, waferId="W\x07"),
                PB.FrameMeta(frameId="", length=10, waferId="W1"),
                PB.FrameMeta(frameId="x" * 257, length=10, waferId="W1"),
                PB.FrameMeta(frameId="bell\x07", length=10, waferId="W1"),
                # "../etc" follows the id rule: a valid wafer (stored under an escaped
                # name), so this descriptor is only refused for want of RDMA
                PB.FrameMeta(frameId=ids[3], length=10, waferId="../etc")]
        acks = list(NODE.stub.ControlStream(iter(reqs), timeout=10))
        self.assertEqual([a.code for a in acks],
                         [PB.ERROR_INVALID_ARGUMENT, PB.ERROR_TOO_LARGE] +
                         [PB.ERROR_INVALID_ARGUMENT] * 4 + [PB.ERROR_NO_TRANSPORT], acks)
        self.assertFalse(any(a.ok for a in acks))
        self.assertEqual([a.frameId for a in acks[:3]], ids[:3])
        # the wafer is echoed only where it passed the rule (the last: refused for want of
        # RDMA); a refused descriptor's wafer is not repeated back
        self.assertEqual([a.waferId for a in acks], [""] * 6 + ["../etc"])
        self.assertEqual(acks[-1].frameId, ids[3])
        for a in acks[2:6]:     # a bad wafer id, then the three bad frame ids
            self.assertIn(ID_RULE, a.msg)

    def test_string_ids_echoed(self):
        # ControlStream acks carry the exact string ids sent, in order, also non-ASCII
        ids = ["6F9619FF-8B86-D011-B42D-00C04FC964FF", "wafer-12/frame-7", "frame with spaces",
               "Kühler-Ω-画像-\U0001F600", "x" * 256, "é" * 128]
        reqs = [PB.FrameMeta(frameId=f, length=100, waferId="W-echo") for f in ids]
        acks = list(NODE.stub.ControlStream(iter(reqs), timeout=10))
        self.assertEqual([a.frameId for a in acks], ids)
        self.assertTrue(all(a.code == PB.ERROR_NO_TRANSPORT for a in acks), acks)


class T3PushFrames(unittest.TestCase):
    def test_push_several(self):
        sizes = [1, 4095, 4096, 65537, (1 << 20) + 3, 3 * (1 << 20) + 17, MAX_FRAME]
        frames = {}
        req = []
        for i, n in enumerate(sizes):
            f = fid()
            frames[f] = payload(n, i)
            crc = crc32c(frames[f]) if n <= 65537 else None
            req += chunks(f, frames[f], wafer="W-push", chunk=(1 << 20) if i % 2 else 300001,
                          crc=crc)
        acks = push(req, timeout=60)
        got = by_frame(acks)
        self.assertEqual(set(got), set(frames))
        for f, data in frames.items():
            # an implicit session (no Negotiate): one final ack per frame
            st = [a.stage for a in got[f]]
            self.assertEqual(st, [PB.ACK_STAGE_DURABLE], got[f])
            self.assertTrue(got[f][0].ok, got[f])
            self.assertEqual(got[f][0].msg, "ok")
            self.assertEqual(got[f][0].waferId, "W-push")
            self.assertFalse(got[f][0].duplicate)
            if len(data) <= 65537:
                self.assertEqual(got[f][0].crc32c, crc32c(data))
            with open(NODE.frame_path("W-push", f), "rb") as fh:
                self.assertEqual(fh.read(), data, "frame %s differs on disk" % f)
            rows = NODE.catalog_rows(f)
            self.assertEqual(len(rows), 1)
            self.assertEqual(rows[0][1], "W-push")
            self.assertEqual(rows[0][2], len(data))
        wait_idle(self)

    def test_push_more_frames_than_slots(self):
        # 30 frames through 12 slots: the node pauses the stream, never drops or allocates.
        frames = {}
        req = []
        for i in range(30):
            f = fid()
            frames[f] = payload(200000 + i, i)
            req += chunks(f, frames[f], wafer="W-many", chunk=65536)
        got = by_frame(push(req, timeout=60))
        self.assertEqual(set(got), set(frames))
        for f, data in frames.items():
            self.assertEqual(len(got[f]), 1, got[f])
            self.assertEqual(got[f][-1].stage, PB.ACK_STAGE_DURABLE)
            self.assertTrue(got[f][-1].ok)
            with open(NODE.frame_path("W-many", f), "rb") as fh:
                self.assertEqual(fh.read(), data)
        wait_idle(self)

    def test_negotiated_session(self):
        # a session that did not ask for RECEIVED acks: one final ack per frame
        r = NODE.stub.Negotiate(PB.NegotiateRequest(versionMin=1, versionMax=1, credits=2), timeout=30)
        self.assertFalse(r.ackReceived)
        f = fid()
        data = payload(70000, 3)
        acks = push(chunks(f, data), metadata=(("h3000-session-id", str(r.sessionId)),))
        self.assertEqual([(a.frameId, a.stage, a.ok) for a in acks],
                         [(f, PB.ACK_STAGE_DURABLE, True)], acks)
        # the same session named in the messages instead of the header
        f2 = fid()
        c = chunks(f2, data)
        for x in c:
            x.sessionId = r.sessionId
        acks = push(c)
        self.assertEqual([(a.frameId, a.stage, a.ok) for a in acks],
                         [(f2, PB.ACK_STAGE_DURABLE, True)], acks)

    def test_ack_received_session(self):
        # ackReceived=True: RECEIVED then DURABLE, the session named by header or sessionId
        r = NODE.stub.Negotiate(PB.NegotiateRequest(versionMin=1, versionMax=1, credits=2,
                                                    ackReceived=True), timeout=30)
        self.assertTrue(r.ackReceived)
        data = payload(70000, 4)
        f = fid()
        acks = push(chunks(f, data), metadata=(("h3000-session-id", str(r.sessionId)),))
        self.assertEqual([(a.frameId, a.waferId, a.stage, a.ok) for a in acks],
                         [(f, "W1", PB.ACK_STAGE_RECEIVED, True),
                          (f, "W1", PB.ACK_STAGE_DURABLE, True)], acks)
        f2 = fid()
        c = chunks(f2, data)
        for x in c:
            x.sessionId = r.sessionId
        acks = push(c)
        self.assertEqual([(a.frameId, a.stage, a.ok) for a in acks],
                         [(f2, PB.ACK_STAGE_RECEIVED, True), (f2, PB.ACK_STAGE_DURABLE, True)],
                         acks)
        with open(NODE.frame_path("W1", f2), "rb") as fh:
            self.assertEqual(fh.read(), data)

    def test_unknown_session(self):
        f = fid()
        with self.assertRaises(grpc.RpcError) as cm:
            push(chunks(f, b"x" * 10), metadata=(("h3000-session-id", "12345"),))
        self.assertEqual(cm.exception.code(), grpc.StatusCode.FAILED_PRECONDITION)
        self.assertIn("unknown session", cm.exception.details())
        c = chunks(f, b"x" * 10)
        c[0].sessionId = 777
        with self.assertRaises(grpc.RpcError) as cm:
            push(c)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.FAILED_PRECONDITION)

    def test_duplicate_same_crc(self):
        f = assert_good_frame(self, 50000, wafer="W-dup")
        path = NODE.frame_path("W-dup", f)
        st1 = os.stat(path)
        acks = push(chunks(f, payload(50000, seed_of(f)), wafer="W-dup"))
        self.assertEqual(len(acks), 1, acks)
        self.assertEqual(acks[-1].stage, PB.ACK_STAGE_DURABLE)
        self.assertTrue(acks[-1].ok, acks)
        self.assertTrue(acks[-1].stored, acks)   # a duplicate of a stored frame is stored
        self.assertTrue(acks[-1].duplicate, acks)
        st2 = os.stat(path)
        self.assertEqual((st1.st_ino, st1.st_mtime_ns), (st2.st_ino, st2.st_mtime_ns))
        self.assertEqual(len(NODE.catalog_rows(f)), 1)

    def test_duplicate_conflict(self):
        f = assert_good_frame(self, 50000, wafer="W-dup")
        other = bytearray(payload(50000, seed_of(f)))
        other[100] ^= 0xFF
        acks = push(chunks(f, bytes(other), wafer="W-dup"))
        self.assertEqual(len(acks), 1, acks)
        # a failed frame has no stage (never DURABLE) and says plainly it is not stored
        self.assertEqual(acks[-1].stage, PB.ACK_STAGE_UNSPECIFIED)
        self.assertFalse(acks[-1].ok)
        self.assertFalse(acks[-1].stored)
        self.assertEqual(acks[-1].code, PB.ERROR_DUPLICATE_CONFLICT, acks)
        with open(NODE.frame_path("W-dup", f), "rb") as fh:
            self.assertEqual(fh.read(), payload(50000, seed_of(f)))
        wait_idle(self)

    def test_credit_window_of_one(self):
        # credits=1: each frame waits for the previous one's DURABLE ack before admission
        r = NODE.stub.Negotiate(PB.NegotiateRequest(versionMin=1, versionMax=1, credits=1,
                                                    ackReceived=True), timeout=30)
        self.assertEqual(r.credits, 1)
        self.assertTrue(r.ackReceived)
        frames = {fid(): payload(150000 + i, i) for i in range(6)}
        req = []
        for f, data in frames.items():
            req += chunks(f, data, chunk=40000)
        acks = push(req, metadata=(("h3000-session-id", str(r.sessionId)),))
        got = by_frame(acks)
        order = [a.frameId for a in acks if a.stage == PB.ACK_STAGE_DURABLE]
        self.assertEqual(order, list(frames))
        # with one credit, frame n+1 is RECEIVED only after frame n is DURABLE
        seq = [(a.frameId, a.stage) for a in acks]
        for i, f in enumerate(list(frames)[1:]):
            prev = list(frames)[i]
            self.assertLess(seq.index((prev, PB.ACK_STAGE_DURABLE)),
                            seq.index((f, PB.ACK_STAGE_RECEIVED)))
        for f, data in frames.items():
            self.assertTrue(got[f][-1].ok)
            with open(NODE.frame_path("W1", f), "rb") as fh:
                self.assertEqual(fh.read(), data)
        wait_idle(self)

    def test_pool_exhaustion_concurrent_streams(self):
        # 3 MiB frames fit only the four 4 MiB slots; three streams push 4 each at once
        results = {}
        errors = []

        def worker(k):
            try:
                frames = {fid(): payload((3 << 20) + k * 1000 + i, k * 10 + i) for i in range(4)}
                req = []
                for f, data in frames.items():
                    req += chunks(f, data, wafer="W-conc", chunk=1 << 20)
                results[k] = (frames, by_frame(push(req, timeout=60)))
            except Exception as e:  # reported below
                errors.append(e)
        ts = [threading.Thread(target=worker, args=(k,)) for k in range(3)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(90)
        self.assertEqual(errors, [])
        self.assertEqual(len(results), 3)
        for frames, got in results.values():
            for f, data in frames.items():
                self.assertEqual(got[f][-1].stage, PB.ACK_STAGE_DURABLE)
                self.assertTrue(got[f][-1].ok, got[f])
                with open(NODE.frame_path("W-conc", f), "rb") as fh:
                    self.assertEqual(fh.read(), data)
        wait_idle(self)

    def test_interleaved_frames(self):
        a, b = fid(), fid()
        da, db = payload(250000, 1), payload(180001, 2)
        ca, cb = chunks(a, da, chunk=50000), chunks(b, db, chunk=50000)
        req = []
        for i in range(max(len(ca), len(cb))):
            req += ca[i:i + 1] + cb[i:i + 1]
        got = by_frame(push(req, metadata=NODE.session()))
        for f, data in ((a, da), (b, db)):
            self.assertEqual([x.stage for x in got[f]], [PB.ACK_STAGE_RECEIVED, PB.ACK_STAGE_DURABLE])
            self.assertTrue(all(x.ok for x in got[f]), got[f])
            with open(NODE.frame_path("W1", f), "rb") as fh:
                self.assertEqual(fh.read(), data)

    def test_same_id_in_flight_elsewhere(self):
        f = fid()
        data = payload(300000, 4)
        c = chunks(f, data, chunk=100000)
        feed = Feeder()
        resp = NODE.stub.PushFrames(feed, timeout=WAIT_S)
        feed.send(c[0])
        deadline = time.time() + 60
        while NODE.stats().framesInFlight == 0 and time.time() < deadline:
            time.sleep(0.02)
        other = by_frame(push(c))[f]
        # refused on its first chunk: one NACK, its later chunks dropped without more
        self.assertEqual(len(other), 1, other)
        self.assertFalse(other[0].ok)
        self.assertEqual(other[0].code, PB.ERROR_INVALID_ARGUMENT)
        self.assertIn("in flight", other[0].msg)
        self.assertIn(f, other[0].msg)
        for x in c[1:]:
            feed.send(x)
        feed.close()
        got = [x for x in resp]
        self.assertEqual([x.stage for x in got], [PB.ACK_STAGE_DURABLE])
        self.assertTrue(got[-1].ok)
        with open(NODE.frame_path("W1", f), "rb") as fh:
            self.assertEqual(fh.read(), data)
        wait_idle(self)

    def test_unusual_field_order(self):
        # data written before the other fields: the node stages it and still gets it right
        f = fid()
        data = payload(10000, 5)
        m = meta(f, len(data)).SerializeToString()

        def key(field, wt):
            return encode_varint(field << 3 | wt)
        raw = (key(15, 2) + encode_varint(len(data)) + data + key(3, 0) + b"\x01" +
               key(4, 2) + encode_varint(len(m)) + m + key(1, 2) + pb_bytes(f))
        call = NODE.channel.stream_stream("/h3000.RDMASvc/PushFrames",
                                          request_serializer=lambda b: b,
                                          response_deserializer=PB.Ack.FromString)
        acks = list(call(iter([raw]), timeout=10))
        self.assertEqual(acks[-1].stage, PB.ACK_STAGE_DURABLE, acks)
        self.assertTrue(acks[-1].ok, acks)
        with open(NODE.frame_path("W1", f), "rb") as fh:
            self.assertEqual(fh.read(), data)

    # The node computes the crc32c while it copies chunk bytes into the slot, chained
    # chunk by chunk (control/service/xport/stream.c); the next three tests fail if that chain takes
    # in bytes of a refused chunk, loses the staged path, or skips the declared check.

    def raw_call(self):
        return NODE.channel.stream_stream("/h3000.RDMASvc/PushFrames",
                                          request_serializer=lambda b: b,
                                          response_deserializer=PB.Ack.FromString)

    def test_crc_chain_skips_refused_chunk(self):
        # chunk 2 first arrives with `offset` repeated after data (refused: its bytes went
        # to the slot but must not count), then properly: stored bytes and crc exact
        f = fid()
        data = payload(700000, 21)
        crc = crc32c(data)
        cs = chunks(f, data, crc=crc)
        bad = bytes(len(cs[1].data))          # zeros where the real bytes go

        def key(field, wt):
            return encode_varint(field << 3 | wt)
        refused = (key(1, 2) + pb_bytes(f) + key(2, 0) + encode_varint(cs[1].offset) +
                   key(15, 2) + encode_varint(len(bad)) + bad +
                   key(2, 0) + encode_varint(cs[1].offset + 8))
        reqs = [cs[0].SerializeToString(), refused] + [c.SerializeToString() for c in cs[1:]]
        acks = by_frame(list(self.raw_call()(iter(reqs), timeout=WAIT_S,
                                             metadata=NODE.session())))[f]
        self.assertFalse(acks[0].ok, acks)
        self.assertEqual(acks[0].code, PB.ERROR_INVALID_ARGUMENT, acks)
        self.assertEqual([a.stage for a in acks[1:]],
                         [PB.ACK_STAGE_RECEIVED, PB.ACK_STAGE_DURABLE], acks)
        self.assertTrue(acks[-1].ok, acks)
        self.assertEqual(acks[-1].crc32c, crc, acks)
        with open(NODE.frame_path("W1", f), "rb") as fh:
            self.assertEqual(fh.read(), data)
        self.assertEqual(NODE.catalog_rows(f)[0][3], crc)
        wait_idle(self)

    def crc_staged_then_direct(self, declared):
        # chunk 1 with data before the other fields (staged), the rest in order (direct)
        f = fid()
        data = payload(600000, 23)
        cs = chunks(f, data, crc=declared(data))
        first = cs[0]
        m = first.meta.SerializeToString()

        def key(field, wt):
            return encode_varint(field << 3 | wt)
        raw0 = (key(15, 2) + encode_varint(len(first.data)) + first.data + key(4, 2) +
                encode_varint(len(m)) + m + key(1, 2) + pb_bytes(f))
        reqs = [raw0] + [c.SerializeToString() for c in cs[1:]]
        return f, data, by_frame(list(self.raw_call()(iter(reqs), timeout=WAIT_S)))[f]

    def test_crc_chain_staged_then_direct(self):
        f, data, acks = self.crc_staged_then_direct(crc32c)
        self.assertEqual(acks[-1].stage, PB.ACK_STAGE_DURABLE, acks)
        self.assertTrue(acks[-1].ok and acks[-1].stored, acks)
        self.assertEqual(acks[-1].crc32c, crc32c(data), acks)
        self.assertEqual(NODE.catalog_rows(f)[0][3], acks[-1].crc32c)
        with open(NODE.frame_path("W1", f), "rb") as fh:
            self.assertEqual(fh.read(), data)
        wait_idle(self)

    def test_crc_mismatch_staged_then_direct(self):
        f, data, acks = self.crc_staged_then_direct(lambda d: crc32c(d) ^ 0x80000000)
        self.assertEqual(acks[-1].stage, PB.ACK_STAGE_UNSPECIFIED, acks)
        self.assertFalse(acks[-1].ok or acks[-1].stored, acks)
        self.assertEqual(acks[-1].code, PB.ERROR_CRC_MISMATCH, acks[-1])
        self.assertEqual(NODE.catalog_rows(f), [])
        wait_idle(self)

    def test_cancel_mid_stream(self):
        f = fid()
        data = payload(3 << 20, 9)
        feed = Feeder()
        resp = NODE.stub.PushFrames(feed, timeout=WAIT_S)
        feed.send(chunks(f, data, chunk=1 << 20)[0])
        # wait until the node holds the partial frame
        deadline = time.time() + 60
        while NODE.stats().framesInFlight == 0 and time.time() < deadline:
            time.sleep(0.02)
        self.assertEqual(NODE.stats().framesInFlight, 1)
        resp.cancel()
        feed.close()
        wait_idle(self)
        self.assertTrue(NODE.alive())
        # the same frame can be sent again and is stored once
        acks = push(chunks(f, data))
        self.assertEqual(len(acks), 1, acks)
        self.assertTrue(acks[-1].ok and not acks[-1].duplicate, acks)
        self.assertEqual(len(NODE.catalog_rows(f)), 1)

    def test_deadline_exceeded(self):
        feed = Feeder()
        resp = NODE.stub.PushFrames(feed, timeout=1)
        f = fid()
        feed.send(chunks(f, payload(2 << 20, 1), chunk=1 << 20)[0])
        with self.assertRaises(grpc.RpcError) as cm:
            list(resp)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.DEADLINE_EXCEEDED)
        feed.close()
        wait_idle(self)

    def test_oversize_message(self):
        f = fid()
        big = PB.FrameChunk(frameId=f, offset=0, data=b"\0" * (5 << 20), last=True)
        big.meta.CopyFrom(meta(f, 5 << 20))
        with self.assertRaises(grpc.RpcError) as cm:
            push([big], timeout=10)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.RESOURCE_EXHAUSTED)
        wait_idle(self)
        assert_good_frame(self)


def pb_bytes(s):
    """A length-delimited protobuf field body: varint length + the UTF-8 bytes."""
    b = s.encode() if isinstance(s, str) else s
    return encode_varint(len(b)) + b


def encode_varint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


class T4BadInput(unittest.TestCase):
    """Each bad input: the right error, then the node still serves and no slot leaked."""

    def expect_nack(self, req, frame_id, code, timeout=10, rule=False):
        acks = by_frame(push(req, timeout=timeout)).get(frame_id, [])
        self.assertTrue(acks, "no ack for frame %r" % frame_id)
        # a refused or failed frame gets one NACK; its later chunks are dropped silently
        self.assertEqual(len(acks), 1, acks)
        a = acks[-1]
        self.assertFalse(a.ok, acks)
        self.assertEqual(a.code, code, a)
        if frame_id:
            self.assertIn(frame_id, a.msg)
        if rule:
            self.assertIn(ID_RULE, a.msg)
        wait_idle(self)
        assert_good_frame(self)
        wait_idle(self)
        return a

    def test_length_zero(self):
        f = fid()
        c = PB.FrameChunk(frameId=f, offset=0, last=True)
        c.meta.CopyFrom(meta(f, 0))
        self.expect_nack([c], f, PB.ERROR_INVALID_ARGUMENT)

    def test_length_above_max(self):
        f = fid()
        c = PB.FrameChunk(frameId=f, offset=0, data=b"abc")
        c.meta.CopyFrom(meta(f, MAX_FRAME + 1))
        self.expect_nack([c], f, PB.ERROR_TOO_LARGE)

    def test_chunk_past_declared_length(self):
        f = fid()
        c = chunks(f, payload(300000, 2), chunk=100000, length=250000)
        self.expect_nack(c, f, PB.ERROR_INVALID_ARGUMENT)

    def test_first_chunk_past_declared_length(self):
        f = fid()
        c = chunks(f, payload(3000, 2), length=2000)
        self.expect_nack(c, f, PB.ERROR_INVALID_ARGUMENT)

    def test_frame_never_completes(self):
        f = fid()
        feed = Feeder()
        resp = NODE.stub.PushFrames(feed, timeout=WAIT_S)
        feed.send(chunks(f, payload(200000, 3), chunk=50000)[0])
        t0 = time.time()
        a = next(resp)   # the deadline NACK arrives while the stream stays open
        took = time.time() - t0
        feed.close()
        self.assertEqual(list(resp), [])
        self.assertEqual(a.frameId, f)
        self.assertFalse(a.ok)
        self.assertEqual(a.code, PB.ERROR_DEADLINE)
        self.assertTrue(a.retryable)
        self.assertGreater(took, FRAME_TIMEOUT_S - 0.5)
        wait_idle(self)
        assert_good_frame(self)

    def test_duplicate_first_chunk(self):
        f = fid()
        c = chunks(f, payload(300000, 4), chunk=100000)
        self.expect_nack([c[0], c[0]] + c[1:], f, PB.ERROR_INVALID_ARGUMENT)

    def test_missing_first_chunk(self):
        f = fid()
        c = chunks(f, payload(300000, 5), chunk=100000)
        self.expect_nack(c[1:], f, PB.ERROR_INVALID_ARGUMENT)

    def test_first_chunk_without_meta(self):
        f = fid()
        c = chunks(f, payload(3000, 5))
        c[0].ClearField("meta")
        self.expect_nack(c, f, PB.ERROR_INVALID_ARGUMENT)

    def test_offset_gap(self):
        f = fid()
        c = chunks(f, payload(300000, 6), chunk=100000)
        self.expect_nack([c[0], c[2]], f, PB.ERROR_INVALID_ARGUMENT)

    def test_last_too_early(self):
        f = fid()
        c = chunks(f, payload(300000, 7), chunk=100000)
        c[1].last = True
        self.expect_nack(c[:2], f, PB.ERROR_INVALID_ARGUMENT)

    def test_bad_wafer_id(self):
        # "../../etc" is a valid wafer id now (see T5StringIds); a control character,
        # a 257-byte wafer id are not
        f = fid()
        self.expect_nack(chunks(f, b"abc", wafer="W\tx"), f, PB.ERROR_INVALID_ARGUMENT,
                         rule=True)
        f = fid()
        self.expect_nack(chunks(f, b"abc", wafer="w" * 257), f, PB.ERROR_INVALID_ARGUMENT,
                         rule=True)

    def test_bad_frame_ids(self):
        # too long, empty, a control character: one NACK each naming the rule, for a
        # frame sent in three chunks (the later ones dropped), nothing stored
        for bad in ("x" * 257, "é" * 128 + "x", "", "ctl\x1bchar", "del\x7f", "c1\u0085"):
            with self.subTest(frame_id=bad):
                c = chunks(bad, payload(300000, 9), wafer="W-badid", chunk=100000)
                acks = push(c)
                self.assertEqual(len(acks), 1, "frame id %r: %s" % (bad, acks))
                a = acks[0]
                self.assertFalse(a.ok, a)
                self.assertEqual(a.code, PB.ERROR_INVALID_ARGUMENT, a)
                self.assertIn(ID_RULE, a.msg)
                # Ack.frameId is the id as sent; an id above 256 bytes is answered with an
                # empty frameId (h3000.proto): cut to 256 bytes it would name another,
                # valid frame
                want = "" if len(bad.encode()) > 256 else bad
                self.assertEqual(a.frameId, want, "frame id of %d bytes acked as one of %d" %
                                 (len(bad.encode()), len(a.frameId.encode())))
                if bad:
                    self.assertEqual(NODE.catalog_rows(bad), [])
                wait_idle(self)
        self.assertFalse(os.path.exists(os.path.join(NODE.data, "frames", "W-badid")))
        assert_good_frame(self)

    def test_invalid_utf8_frame_id(self):
        # bytes that are not UTF-8 (a stock client cannot even send them: raw protobuf)
        bad = b"frame-\xff\xfe"
        data = b"0123456789"
        m = (b"\x0a" + pb_bytes(bad) + b"\x20" + encode_varint(len(data)) +
             b"\x2a" + pb_bytes("W1"))
        raw = (b"\x0a" + pb_bytes(bad) + b"\x18\x01" + b"\x22" + pb_bytes(m) +
               b"\x7a" + pb_bytes(data))
        call = NODE.channel.stream_stream("/h3000.RDMASvc/PushFrames",
                                          request_serializer=lambda b: b,
                                          response_deserializer=PB.Ack.FromString)
        acks = list(call(iter([raw]), timeout=10))
        self.assertEqual(len(acks), 1, acks)
        self.assertFalse(acks[0].ok)
        self.assertEqual(acks[0].code, PB.ERROR_INVALID_ARGUMENT)
        self.assertIn(ID_RULE, acks[0].msg)
        wait_idle(self)
        assert_good_frame(self)

    def test_refused_frame_retried_on_same_stream(self):
        # refused on its first chunk (a bad wafer): one NACK, the rest of its chunks
        # dropped up to last=true; then the same id, sent properly on the same stream, is
        # a new frame and stored
        f = fid()
        data = payload(250000, 12)
        req = (chunks(f, data, wafer="bad\x01wafer", chunk=60000) +
               chunks(f, data, wafer="W-retry", chunk=60000))
        acks = push(req, metadata=NODE.session())
        self.assertEqual([(a.frameId, a.ok, a.stage) for a in acks],
                         [(f, False, acks[0].stage), (f, True, PB.ACK_STAGE_RECEIVED),
                          (f, True, PB.ACK_STAGE_DURABLE)], acks)
        self.assertEqual(acks[0].code, PB.ERROR_INVALID_ARGUMENT)
        self.assertIn(ID_RULE, acks[0].msg)
        with open(NODE.frame_path("W-retry", f), "rb") as fh:
            self.assertEqual(fh.read(), data)
        wait_idle(self)

    def test_meta_frame_id_mismatch(self):
        f = fid()
        c = chunks(f, b"abcdef")
        c[0].meta.frameId = f + "x"
        self.expect_nack(c, f, PB.ERROR_INVALID_ARGUMENT)

    def test_stream_continues_after_bad_frame(self):
        bad, good = fid(), fid()
        b = PB.FrameChunk(frameId=bad, offset=0, last=True)
        b.meta.CopyFrom(meta(bad, 0))
        data = payload(123457, 8)
        got = by_frame(push([b] + chunks(good, data)))
        self.assertEqual(len(got[bad]), 1, got[bad])
        self.assertFalse(got[bad][0].ok)
        self.assertEqual([a.stage for a in got[good]], [PB.ACK_STAGE_DURABLE])
        self.assertTrue(got[good][0].ok, got[good])
        wait_idle(self)

    def test_waiting_for_slot_then_cancel(self):
        # four 3 MiB frames take the four 4 MiB slots; a fifth waits (its stream paused);
        # cancelling one of the four lets the fifth in; it completes; the rest cancel
        n = 3 << 20
        ids = [fid() for _ in range(5)]
        datas = [payload(n, i) for i in range(5)]
        feeds, resps = [], []
        for i in range(5):
            feed = Feeder()
            feeds.append(feed)
            resps.append(NODE.stub.PushFrames(feed, timeout=WAIT_S))
            feed.send(chunks(ids[i], datas[i], chunk=1 << 20)[0])
            if i < 4:
                deadline = time.time() + 60
                while NODE.stats().framesInFlight < i + 1 and time.time() < deadline:
                    time.sleep(0.02)
        time.sleep(0.2)
        st = NODE.stats()
        self.assertEqual(st.framesInFlight, 4)
        self.assertEqual(st.poolSlotsFree, POOL_TOTAL - 4)
        resps[0].cancel()
        feeds[0].close()
        deadline = time.time() + 60
        while time.time() < deadline:   # the waiting frame takes the freed slot
            if NODE.stats().framesInFlight == 4:
                break
            time.sleep(0.02)
        for c in chunks(ids[4], datas[4], chunk=1 << 20)[1:]:
            feeds[4].send(c)
        feeds[4].close()
        got = list(resps[4])
        self.assertEqual([(a.frameId, a.stage, a.ok) for a in got],
                         [(ids[4], PB.ACK_STAGE_DURABLE, True)])
        with open(NODE.frame_path("W1", ids[4]), "rb") as fh:
            self.assertEqual(fh.read(), datas[4])
        for i in (1, 2, 3):
            resps[i].cancel()
            feeds[i].close()
        wait_idle(self)
        assert_good_frame(self)

    def test_crc_mismatch(self):
        # the bytes are RECEIVED (session that asked for that stage), the check fails at
        # DURABLE; an implicit session gets only the failed DURABLE ack
        f = fid()
        data = payload(5000, 3)
        acks = by_frame(push(chunks(f, data, crc=crc32c(data) ^ 1), metadata=NODE.session()))[f]
        self.assertEqual([a.stage for a in acks], [PB.ACK_STAGE_RECEIVED, PB.ACK_STAGE_UNSPECIFIED])
        self.assertTrue(acks[0].ok)
        self.assertFalse(acks[0].stored)   # RECEIVED: in the node, not stored yet
        self.assertFalse(acks[-1].ok or acks[-1].stored)
        self.assertEqual(acks[-1].code, PB.ERROR_CRC_MISMATCH, acks[-1])
        self.assertEqual(NODE.catalog_rows(f), [])
        f = fid()
        acks = by_frame(push(chunks(f, data, crc=crc32c(data) ^ 1)))[f]
        self.assertEqual([(a.stage, a.ok, a.code) for a in acks],
                         [(PB.ACK_STAGE_UNSPECIFIED, False, PB.ERROR_CRC_MISMATCH)], acks)
        self.assertEqual(NODE.catalog_rows(f), [])
        wait_idle(self)
        assert_good_frame(self)

    def test_malformed_protobuf(self):
        call = NODE.channel.stream_stream("/h3000.RDMASvc/PushFrames",
                                          request_serializer=lambda b: b,
                                          response_deserializer=PB.Ack.FromString)
        with self.assertRaises(grpc.RpcError) as cm:
            list(call(iter([b"\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\x7f"]), timeout=30))
        self.assertEqual(cm.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        with self.assertRaises(grpc.RpcError) as cm:
            list(call(iter([b"\x7a\x10abc"]), timeout=30))   # data field longer than the message
        self.assertEqual(cm.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        wait_idle(self)
        assert_good_frame(self)

    def test_non_grpc_http2(self):
        # hand-made HTTP/2: preface, empty SETTINGS, HEADERS "GET /" (HPACK static
        # entries + a literal :authority), END_STREAM. Expect an HTTP answer on stream 1.
        hdrs = bytes([0x82, 0x86, 0x84, 0x41, 9]) + b"localhost"
        s = socket.create_connection(("127.0.0.1", NODE.port), timeout=30)
        s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\0\0\0\x04\0\0\0\0\0" +
                  len(hdrs).to_bytes(3, "big") + b"\x01\x05\0\0\0\x01" + hdrs)
        buf, answered = b"", False
        deadline = time.time() + 60
        try:
            while time.time() < deadline and not answered:
                b = s.recv(65536)
                if not b:
                    break
                buf += b
                while len(buf) >= 9:
                    n = int.from_bytes(buf[:3], "big")
                    if len(buf) < 9 + n:
                        break
                    ftype, sid = buf[3], int.from_bytes(buf[5:9], "big") & 0x7FFFFFFF
                    if ftype == 1 and sid == 1:
                        answered = True
                    buf = buf[9 + n:]
        finally:
            s.close()
        self.assertTrue(answered, "no HEADERS answer to a plain HTTP/2 GET")
        curl = shutil.which("curl")
        if curl:  # a real non-gRPC HTTP/2 client too, when the host has one
            r = subprocess.run([curl, "-s", "-o", "/dev/null", "-w", "%{http_code}",
                                "--http2-prior-knowledge", "--max-time", "5",
                                "http://%s/h3000.RDMASvc/Stats" % NODE.addr],
                               capture_output=True, text=True, timeout=10)
            self.assertNotIn(r.stdout.strip(), ("200", "000"), r)
        self.assertTrue(NODE.alive())
        assert_good_frame(self)

    def test_garbage_bytes(self):
        s = socket.create_connection(("127.0.0.1", NODE.port), timeout=30)
        s.sendall(os.urandom(4096) + b"GET / HTTP/1.1\r\n\r\n" * 10)
        s.settimeout(60)
        closed = False
        deadline = time.time() + 60
        try:
            while time.time() < deadline:
                b = s.recv(65536)
                if not b:
                    closed = True
                    break
        except (ConnectionResetError, BrokenPipeError):
            closed = True
        except socket.timeout:
            pass
        s.close()
        self.assertTrue(closed, "the node kept a garbage connection open")
        self.assertTrue(NODE.alive())
        assert_good_frame(self)

    def test_producer_killed_mid_frame(self):
        f = fid()
        data = payload(3 << 20, 11)
        code = r"""
import sys, time, grpc
sys.path.insert(0, %r)
import h3000_pb2 as PB, h3000_pb2_grpc as RPC
f, n = %r, %d
ch = grpc.insecure_channel(%r)
stub = RPC.RDMASvcStub(ch)
def gen():
    c = PB.FrameChunk(frameId=f, offset=0, data=bytes(1 << 20))
    c.meta.CopyFrom(PB.FrameMeta(frameId=f, length=n, waferId="W-kill"))
    yield c
    print("sent", flush=True)
    time.sleep(60)
for a in stub.PushFrames(gen()):
    pass
""" % (ARGS.stubs, f, len(data), NODE.addr)
        p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
        try:
            line = p.stdout.readline()
            self.assertEqual(line.strip(), b"sent")
            deadline = time.time() + 60
            while NODE.stats().framesInFlight == 0 and time.time() < deadline:
                time.sleep(0.02)
            self.assertEqual(NODE.stats().framesInFlight, 1)
        finally:
            p.kill()
            p.wait(5)
            p.stdout.close()
        wait_idle(self)
        self.assertTrue(NODE.alive())
        acks = push(chunks(f, data, wafer="W-kill"))
        self.assertEqual(len(acks), 1, acks)
        self.assertTrue(acks[-1].ok and not acks[-1].duplicate, acks)
        self.assertEqual(len(NODE.catalog_rows(f)), 1)
        with open(NODE.frame_path("W-kill", f), "rb") as fh:
            self.assertEqual(fh.read(), data)


class T5StringIds(unittest.TestCase):
    """String ids end to end: acks echo them exactly, files land under the escaped name
    inside the data dir, the catalog keeps the original ids."""

    def push_one(self, frame_id, wafer, size=20000, seed=1):
        data = payload(size, seed)
        acks = push(chunks(frame_id, data, wafer, chunk=8000, crc=crc32c(data)))
        self.assertEqual(len(acks), 1, acks)
        a = acks[0]
        self.assertEqual((a.frameId, a.stage, a.ok, a.code), (frame_id, PB.ACK_STAGE_DURABLE,
                                                              True, PB.ERROR_NONE), a)
        self.assertEqual(a.waferId, wafer or "default")
        self.assertEqual(a.crc32c, crc32c(data))
        return data, a

    def assert_stored(self, frame_id, wafer, data):
        path = NODE.frame_path(wafer, frame_id)
        self.assertTrue(os.path.realpath(path).startswith(
            os.path.realpath(os.path.join(NODE.data, "frames")) + os.sep), path)
        with open(path, "rb") as fh:
            self.assertEqual(fh.read(), data, path)
        rows = NODE.catalog_rows(frame_id, wafer or "default")
        self.assertEqual(len(rows), 1, rows)
        self.assertEqual((rows[0][0], rows[0][1], rows[0][2], rows[0][3]),
                         (frame_id, wafer or "default", len(data), crc32c(data)))
        self.assertEqual(os.path.join(NODE.data, rows[0][4]) if not os.path.isabs(rows[0][4])
                         else rows[0][4], path)

    def test_round_trip(self):
        tag = fid()
        cases = [("6F9619FF-8B86-D011-B42D-00C04FC964FF-" + tag, "W-str"),   # a GUID
                 ("wafer-12/frame-7-" + tag, "W-str"),                       # a slash
                 ("frame with spaces " + tag, "W-str"),
                 ("Kühler-Ω-画像-\U0001F600-" + tag, "W-str"),               # non-ASCII
                 ("100%-" + tag, "W-str"),
                 ("..", "W-str-" + tag), (".", "W-str-" + tag),
                 ("dot.ted-" + tag, "wafer 7/β"),                             # escaped wafer
                 (tag + "-" + "é" * 120, "W-str"),                            # long: hashed
                 (("z" * 250 + tag)[-256:], "W-str")]                         # 256 bytes
        for i, (f, w) in enumerate(cases):
            data, _ = self.push_one(f, w, seed=i)
            self.assert_stored(f, w, data)
        # names on disk: plain ids as they are, others percent-encoded
        self.assertTrue(os.path.isfile(os.path.join(
            NODE.data, "frames", "W-str", "wafer-12%2Fframe-7-" + tag + ".frame")))
        self.assertTrue(os.path.isfile(os.path.join(
            NODE.data, "frames", "wafer%207%2F%CE%B2", "dot.ted-" + tag + ".frame")))
        self.assertTrue(os.path.isfile(os.path.join(
            NODE.data, "frames", "W-str-" + tag, "%2E%2E.frame")))
        wait_idle(self)

    def test_path_escape_wafer_is_stored_inside(self):
        # "../etc" follows the id rule: a valid wafer, stored under its escaped name
        for w in ("../etc", "../../etc", "/abs/path"):
            f = fid()
            data, _ = self.push_one(f, w, seed=7)
            self.assert_stored(f, w, data)
            self.assertTrue(os.path.isfile(os.path.join(NODE.data, "frames", file_name(w),
                                                        f + ".frame")))
        self.assertEqual(file_name("../etc"), "%2E%2E%2Fetc")
        self.assertFalse(os.path.exists(os.path.join(NODE.data, "etc")))
        self.assertFalse(os.path.exists(os.path.join(NODE.dir, "etc")))
        self.assertFalse(os.path.exists("/abs/path"))

    def test_empty_wafer_is_default(self):
        f = fid()
        data, a = self.push_one(f, "", seed=3)
        self.assertEqual(a.waferId, "default")
        with open(os.path.join(NODE.data, "frames", "default", f + ".frame"), "rb") as fh:
            self.assertEqual(fh.read(), data)
        self.assertEqual([r[1] for r in NODE.catalog_rows(f)], ["default"])

    def test_same_frame_id_two_wafers(self):
        f = fid()
        d1, a1 = self.push_one(f, "W-two-a", seed=1)
        d2, a2 = self.push_one(f, "W-two-b", seed=2)      # other bytes: not a conflict
        self.assertFalse(a1.duplicate or a2.duplicate)
        self.assertNotEqual(d1, d2)
        self.assert_stored(f, "W-two-a", d1)
        self.assert_stored(f, "W-two-b", d2)
        self.assertEqual(sorted(r[1] for r in NODE.catalog_rows(f)), ["W-two-a", "W-two-b"])
        # and the same (wafer, frame) again is a duplicate of its own wafer's frame only
        acks = push(chunks(f, d2, "W-two-b"))
        self.assertEqual([(a.ok, a.duplicate, a.waferId) for a in acks],
                         [(True, True, "W-two-b")], acks)
        acks = push(chunks(f, d2, "W-two-a"))
        self.assertEqual([(a.ok, a.code) for a in acks],
                         [(False, PB.ERROR_DUPLICATE_CONFLICT)], acks)
        self.assertIn(f, acks[0].msg)

    def test_ids_on_one_stream(self):
        # many string ids on one stream, interleaved chunks: each ack names its frame
        ids = ["mix %d/%s" % (i, "ü" * i) for i in range(8)]
        tag = fid()
        ids = [x + " " + tag for x in ids]
        datas = {f: payload(30000 + i, i) for i, f in enumerate(ids)}
        cs = [chunks(f, datas[f], "W-mix", chunk=10000) for f in ids]
        req = []
        for k in range(max(len(c) for c in cs)):
            for c in cs:
                req += c[k:k + 1]
        got = by_frame(push(req))
        self.assertEqual(set(got), set(ids))
        for f in ids:
            self.assertEqual([(a.stage, a.ok) for a in got[f]], [(PB.ACK_STAGE_DURABLE, True)])
            self.assert_stored(f, "W-mix", datas[f])
        wait_idle(self)


class T9Shutdown(unittest.TestCase):
    def test_sigterm_drains_and_exits_0(self):
        node = Node(ARGS.work, "shutdown")
        try:
            f = fid()
            data = payload(1 << 20, 12)
            feed = Feeder()
            resp = node.stub.PushFrames(feed, timeout=WAIT_S, metadata=node.session())
            for c in chunks(f, data):
                feed.send(c)
            a = next(resp)
            self.assertEqual(a.stage, PB.ACK_STAGE_RECEIVED)
            node.proc.send_signal(signal.SIGTERM)
            a = next(resp)     # the in-flight frame still becomes durable and is acked
            self.assertEqual(a.stage, PB.ACK_STAGE_DURABLE)
            self.assertTrue(a.ok)
            feed.close()
            try:
                list(resp)
            except grpc.RpcError:
                pass
            rc = node.stop(timeout=15)
            self.assertEqual(rc, 0, node.tail())
        finally:
            node.stop(signal.SIGKILL)

    def test_persistence_ring_full(self):
        # --persist-ring 2, far below the pool's slots: a worker's mailbox still holds every
        # slot (the node raises it), so no complete frame ever finds it full; all durable
        node = Node(ARGS.work, "ring", extra=("--persist-ring", "2", "--log-level", "debug"))
        try:
            results, errors = {}, []

            def worker(k):
                try:
                    frames = {fid(): payload(300000 + k, k * 10 + i) for i in range(5)}
                    req = []
                    for f, data in frames.items():
                        req += chunks(f, data, wafer="W-ring", chunk=100000)
                    results[k] = (frames, by_frame(node.stub.PushFrames(iter(req), timeout=60)))
                except Exception as e:
                    errors.append(e)
            ts = [threading.Thread(target=worker, args=(k,)) for k in range(3)]
            for t in ts:
                t.start()
            for t in ts:
                t.join(90)
            self.assertEqual(errors, [])
            for frames, got in results.values():
                for f, data in frames.items():
                    self.assertTrue(got[f][-1].ok and got[f][-1].stage == PB.ACK_STAGE_DURABLE, got[f])
                    with open(node.frame_path("W-ring", f), "rb") as fh:
                        self.assertEqual(fh.read(), data)
            wait_idle(self, node)
        finally:
            rc = node.stop()
        self.assertEqual(rc, 0, node.tail())

    def test_tls(self):
        openssl = shutil.which("openssl")
        self.assertTrue(openssl, "openssl CLI missing (deploy/install-deps.sh installs it)")
        d = os.path.join(ARGS.work, "tls-cert")
        os.makedirs(d, exist_ok=True)
        key, cert = os.path.join(d, "key.pem"), os.path.join(d, "cert.pem")
        subprocess.run([openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-subj",
                        "/CN=localhost", "-keyout", key, "-out", cert, "-days", "1", "-addext",
                        "subjectAltName=IP:127.0.0.1,DNS:localhost"],
                       check=True, capture_output=True, timeout=30)
        node = Node(ARGS.work, "tls", extra=("--tls-cert", cert, "--tls-key", key), tls_ca=cert)
        try:
            r = node.health.Check(HPB.HealthCheckRequest(service=""), timeout=30)
            self.assertEqual(r.status, HPB.HealthCheckResponse.SERVING)
            f = fid()
            data = payload(300000, 1)
            got = by_frame(node.stub.PushFrames(iter(chunks(f, data, wafer="W-tls")), timeout=20))[f]
            self.assertEqual([(a.stage, a.ok) for a in got], [(PB.ACK_STAGE_DURABLE, True)])
            with open(node.frame_path("W-tls", f), "rb") as fh:
                self.assertEqual(fh.read(), data)
        finally:
            rc = node.stop()
        self.assertEqual(rc, 0, node.tail())

    def test_session_expires_when_idle(self):
        node = Node(ARGS.work, "idle", extra=("--session-idle", "1"))
        try:
            r = node.stub.Negotiate(PB.NegotiateRequest(versionMin=1, versionMax=1), timeout=30)
            md = (("h3000-session-id", str(r.sessionId)),)
            f = fid()
            acks = list(node.stub.PushFrames(iter(chunks(f, b"abc")), metadata=md, timeout=10))
            self.assertTrue(acks[-1].ok, acks)
            self.assertEqual(node.stats().sessionsActive, 1)
            deadline = time.time() + 60
            while node.stats().sessionsActive and time.time() < deadline:
                time.sleep(0.1)
            self.assertEqual(node.stats().sessionsActive, 0)
            with self.assertRaises(grpc.RpcError) as cm:
                list(node.stub.PushFrames(iter(chunks(fid(), b"abc")), metadata=md, timeout=10))
            self.assertEqual(cm.exception.code(), grpc.StatusCode.FAILED_PRECONDITION)
        finally:
            rc = node.stop()
        self.assertEqual(rc, 0, node.tail())

    def test_usage_error_exit_2(self):
        r = subprocess.run([ARGS.ingestd, "--pool", "nonsense"], capture_output=True, timeout=10)
        self.assertEqual(r.returncode, 2)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
        r = subprocess.run([ARGS.ingestd, "--help"], capture_output=True, timeout=10)
        self.assertEqual(r.returncode, 0)
        self.assertIn(b"--listen", r.stdout)


# ------------------------------------------------------------------ main


def main():
    global ARGS, PB, RPC, HPB, HRPC, NODE, grpc
    ap = argparse.ArgumentParser()
    ap.add_argument("--ingestd", required=True)
    ap.add_argument("--proto-dir", required=True)
    ap.add_argument("--work", default=None)
    ap.add_argument("-k", dest="patterns", action="append", default=[],
                    help="run tests whose name contains PATTERN (repeatable)")
    ap.add_argument("-v", dest="verbose", action="store_true")
    ARGS = ap.parse_args()
    own_work = ARGS.work is None
    ARGS.work = ARGS.work or tempfile.mkdtemp(prefix="ingest-interop-")
    os.makedirs(ARGS.work, exist_ok=True)
    ARGS.stubs = os.path.join(ARGS.work, "stubs")
    os.makedirs(ARGS.stubs, exist_ok=True)
    try:
        import grpc as _grpc
        grpc = _grpc
        gen_stubs(ARGS.proto_dir, ARGS.stubs)
    except Exception as e:  # a missing real part is a failure, not a skip
        print("interop: cannot set up grpcio stubs: %s (install python3-grpcio python3-grpc-tools)" % e)
        print("0 passed, 1 failed")
        return 1
    import h3000_pb2
    import h3000_pb2_grpc
    import health_pb2
    import health_pb2_grpc
    PB, RPC, HPB, HRPC = h3000_pb2, h3000_pb2_grpc, health_pb2, health_pb2_grpc

    loader = unittest.TestLoader()
    if ARGS.patterns:
        loader.testNamePatterns = ["*%s*" % p for p in ARGS.patterns]
    suite = unittest.TestSuite()
    for cls in (T1Basics, T2ControlStream, T3PushFrames, T4BadInput, T5StringIds, T9Shutdown):
        suite.addTests(loader.loadTestsFromTestCase(cls))
    t0 = time.time()
    try:
        NODE = Node(ARGS.work, "main")
    except Exception as e:
        print("interop: ingestd did not start: %s" % e)
        print("0 passed, 1 failed")
        return 1
    try:
        res = unittest.TextTestRunner(verbosity=2 if ARGS.verbose else 1,
                                      stream=sys.stdout).run(suite)
    finally:
        alive = NODE.alive()
        rc = NODE.stop()
    # a test with failing subTests counts once
    failed = len({getattr(t, "test_case", t).id() for t, _ in res.failures + res.errors})
    passed = res.testsRun - failed - len(res.skipped)
    if not alive or rc != 0:
        print("interop: ingestd %s (exit status %s); log tail:\n%s" %
              ("had died" if not alive else "did not stop cleanly", rc, NODE.tail()))
        failed += 1
    elif failed:
        print("ingestd log tail:\n" + NODE.tail(60))
    print("%d passed, %d failed (%.1f s)" % (passed, failed, time.time() - t0))
    if own_work and failed == 0:
        shutil.rmtree(ARGS.work, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    status = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # a failed test may leave a request iterator blocked in a grpc thread: do not wait for it
    os._exit(status)
