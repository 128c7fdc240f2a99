#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""
Fair sharing of the node under abuse: a hostile client on another loopback address
(127.0.0.2.., raw sockets, tests/review/h2raw.py) tries each lockout of issue 8; a
producer on 127.0.0.1 (stock grpcio) must still be served every time.
  1. connections: 300 idle TCP connections (no preface) from one host: Health/Check and a
     frame from another host still work (per-peer limit), and the idle ones are closed by
     the handshake timeout;
  2. a connection with no open stream is closed (GOAWAY) after --idle-timeout;
  3. a full connection table evicts its connection idle longest for a newcomer; when every
     connection is busy, Health/Check still answers (health reserve), other calls on that
     connection get UNAVAILABLE, and a reserve connection cannot be held open;
  4. sessions: 1,250 streams with one bad chunk each (implicit sessions) from one host,
     then from 16 hosts filling the table (--max-sessions 1024): Negotiate and PushFrames of another client work
     (per-peer limit, then eviction of the session of a stream idle longest);
  5. slots: meta-only frames (a descriptor, never the bytes) on every slot, from one host:
     the stalled frames are failed retryable (ERROR_DEADLINE) after --slot-stall-ms, and
     another producer's frame is stored long before the frame timeout (its peer, over its
     share while another waits, takes no more slots);
  6. many streams from one host: 300 ControlStreams without a session (256 on one
     connection, the limit it advertises, and 44 on a second) are all served.

usage: limits.py --ingestd PATH --proto-dir DIR --work DIR
"""
import os
import sys
import time

import h2raw
import rtlib


def main():
    a = rtlib.setup(__doc__, protos=("h3000.proto", "health.proto"))
    import grpc
    import h3000_pb2 as PB
    import h3000_pb2_grpc as RPC
    import health_pb2 as HPB
    import health_pb2_grpc as HRPC

    check = rtlib.Checks()
    crc32c = rtlib.crc32c
    push_path = "/h3000.RDMASvc/PushFrames"

    def lim(node, event):
        return node.metric("ingest_limit_events_total", '{event="%s"}' % event)

    def channel(addr):
        # a connection of its own (no subchannel shared with another channel of the test)
        ch = grpc.insecure_channel(addr, options=(("grpc.use_local_subchannel_pool", 1),))
        return ch

    def code_of(fn):
        try:
            return fn(), None, ""
        except grpc.RpcError as e:
            return None, e.code(), e.details() or ""

    def health(addr):
        ch = channel(addr)
        try:
            r, code, det = code_of(lambda: HRPC.HealthStub(ch).Check(
                HPB.HealthCheckRequest(service=""), timeout=5))
            return (r.status == HPB.HealthCheckResponse.SERVING) if r else (code, det)
        finally:
            ch.close()

    def chunk(fid, wafer, data, sid=0, with_data=True):
        c = PB.FrameChunk(frameId=str(fid), offset=0, last=with_data, sessionId=sid)
        if with_data:
            c.data = data
        c.meta.CopyFrom(PB.FrameMeta(frameId=str(fid), length=len(data), waferId=wafer,
                                     crc32c=crc32c(data), hasCrc32c=True))
        return c

    def store_one(addr, fid, wafer, timeout=10):
        """Negotiate, then one frame on that session: the DURABLE ack's ok, or the error."""
        ch = channel(addr)
        try:
            stub = RPC.RDMASvcStub(ch)
            r, code, det = code_of(lambda: stub.Negotiate(PB.NegotiateRequest(
                versionMin=1, versionMax=1, clientName="limits.py",
                transports=[PB.TRANSPORT_GRPC_STREAM]), timeout=timeout))
            if r is None:
                return "Negotiate: %s %s" % (code, det)
            data = os.urandom(20000)
            acks, code, det = code_of(lambda: list(stub.PushFrames(
                iter([chunk(fid, wafer, data, r.sessionId)]), timeout=timeout)))
            if acks is None:
                return "PushFrames: %s %s" % (code, det)
            dur = [x for x in acks if x.stage == PB.ACK_STAGE_DURABLE]
            return bool(dur and dur[-1].ok) or "acks %r" % acks
        finally:
            ch.close()

    # ------------------------------------------------------------ 1. connections, defaults
    data_dir = os.path.join(a.work, "data1")
    node = rtlib.Ingestd(a, ["--data-dir", data_dir, "--pool", "1M:4", "--workers", "1",
                             "--rdma", "off"], log="ingestd1.log", metrics=True)
    socks = []
    try:
        addr = node.wait_ready()
        for _ in range(300):
            try:
                socks.append(h2raw.tcp(addr, "127.0.0.2"))
            except OSError:
                break
        time.sleep(0.3)   # let ingestd accept (and refuse) them all
        check(len(socks) == 300, "300 idle TCP connections opened from 127.0.0.2")
        h = health(addr)
        check(h is True, "Health/Check from 127.0.0.1 with 300 idle connections from 127.0.0.2 open: %r" % (h,))
        r = store_one(addr, 1, "LIM1")
        check(r is True, "a frame from 127.0.0.1 is stored meanwhile: %r" % (r,))
        # the handshake timeout (default 5 s) closes every idle one that was accepted
        deadline = time.time() + 60
        open_left = [s for s in socks
                     if not h2raw.closed_by_peer(s, max(0.01, deadline - time.time()))]
        check(not open_left, "every idle connection without an HTTP/2 preface is closed by the node (%d still open)"
              % len(open_left))
        ev = {k: lim(node, k) for k in ("conn_handshake_timeout", "conn_evicted", "conn_refused")}
        check(ev["conn_handshake_timeout"] > 0 and ev["conn_evicted"] > 0
              and sum(ev.values()) == 300,
              "/metrics counts each of the 300: closed at the handshake timeout, evicted (per-peer limit) or refused: %r" % ev)
    finally:
        for s in socks:
            s.close()
        rc = node.stop()
        check(rc == 0, "ingestd exit status %d" % rc)

    # ------------------------------------------------------------ 2, 3. small connection table
    data_dir = os.path.join(a.work, "data2")
    node = rtlib.Ingestd(a, ["--data-dir", data_dir, "--pool", "1M:4", "--workers", "1",
                             "--rdma", "off", "--idle-timeout", "1",
                             "--handshake-timeout-ms", "1000"], log="ingestd2.log", metrics=True)
    try:
        addr = node.wait_ready()
        # 2. idle timeout: preface + SETTINGS, no stream: GOAWAY and close
        c = h2raw.H2(addr, "127.0.0.2")
        deadline = time.time() + 60
        while not c.eof and time.time() < deadline:
            c.pump(0.2)
        check(c.goaway and c.eof, "a connection with no stream gets GOAWAY and is closed after --idle-timeout 1 (goaway %s, closed %s)"
              % (c.goaway, c.eof))
        c.close()
        # handshake timeout: nothing sent at all
        s = h2raw.tcp(addr, "127.0.0.2")
        check(h2raw.closed_by_peer(s, 10), "a connection that sends nothing is closed after --handshake-timeout-ms 1000")
        s.close()
        ev = {k: lim(node, k) for k in ("conn_idle_closed", "conn_handshake_timeout")}
        check(ev["conn_idle_closed"] >= 1 and ev["conn_handshake_timeout"] >= 1,
              "/metrics counts the idle close and the handshake timeout: %r" % ev)
    finally:
        rc = node.stop()
        check(rc == 0, "ingestd exit status %d" % rc)

    data_dir = os.path.join(a.work, "data2b")
    node = rtlib.Ingestd(a, ["--data-dir", data_dir, "--pool", "1M:4", "--workers", "1",
                             "--rdma", "off", "--max-connections", "4", "--max-conns-per-peer", "4",
                             "--health-reserve", "2"], log="ingestd2b.log", metrics=True)
    conns = []
    try:
        addr = node.wait_ready()
        # 3a. a full table of idle connections: the newcomer evicts the one idle longest
        conns = [h2raw.H2(addr, "127.0.0.3") for _ in range(4)]
        for c in conns:
            c.pump(0.05)
        r = store_one(addr, 2, "LIM2")
        check(r is True, "table full of idle connections (4 of --max-connections 4): a producer is served: %r" % (r,))
        for c in conns:
            c.pump(0.3)
        check(any(c.eof for c in conns), "the connection idle longest was evicted for it")
        for c in conns:
            c.close()

        # 3b. every connection busy (an open stream each): Health/Check still answers
        conns = []
        for _ in range(4):
            c = h2raw.H2(addr, "127.0.0.4")
            c.open(push_path)
            conns.append(c)
        for c in conns:
            c.pump(0.1)
        h = health(addr)
        check(h is True, "all 4 connections busy: Health/Check answers from the health reserve: %r" % (h,))
        ch = channel(addr)
        _, code, det = code_of(lambda: RPC.RDMASvcStub(ch).Negotiate(PB.NegotiateRequest(), timeout=5))
        ch.close()
        check(code == grpc.StatusCode.UNAVAILABLE and "Health/Check" in det,
              "Negotiate on a health-reserve connection: UNAVAILABLE (%s %r)" % (code, det))
        # a reserve connection cannot be held: a Health/Check call left open does not keep it
        hold = h2raw.H2(addr, "127.0.0.5")
        hold.open("/grpc.health.v1.Health/Check")
        deadline = time.time() + 60
        while not hold.eof and time.time() < deadline:
            hold.pump(0.2)
        check(hold.eof, "a health-reserve connection holding an open call is closed after the handshake timeout")
        hold.close()
        ev = {k: lim(node, k) for k in ("conn_evicted", "conn_health_reserve")}
        check(ev["conn_evicted"] >= 1 and ev["conn_health_reserve"] >= 1,
              "/metrics counts the eviction and the health-reserve connections: %r" % ev)
    finally:
        for c in conns:
            c.close()
        rc = node.stop()
        check(rc == 0, "ingestd exit status %d" % rc)

    # ------------------------------------------------------------ 4. sessions, defaults
    # the table at 1024 (default 4096), so that 16 hosts of 80 streams fill it; the
    # per-address limit stays the default (512)
    data_dir = os.path.join(a.work, "data3")
    node = rtlib.Ingestd(a, ["--data-dir", data_dir, "--pool", "1M:4", "--workers", "1",
                             "--rdma", "off", "--max-sessions", "1024"], log="ingestd3.log",
                         metrics=True)
    conns = []
    try:
        addr = node.wait_ready()
        bad = PB.FrameChunk(frameId="99", offset=0, data=b"x" * 100, last=True)
        bad.meta.CopyFrom(PB.FrameMeta(frameId="99", length=0, waferId="BAD"))   # length 0: refused
        bad = bad.SerializeToString()

        def flood(src, nconn, per_conn):
            out = []
            for _ in range(nconn):
                c = h2raw.H2(addr, src)
                for _ in range(per_conn):
                    c.send(c.open(push_path), bad)
                out.append(c)
            return out

        # one host, 1,250 streams (5 connections x 250), one bad chunk each
        conns = flood("127.0.0.2", 5, 250)
        for c in conns:
            c.pump(0.5)
        r = store_one(addr, 3, "LIM3")
        check(r is True, "1,250 streams with implicit sessions from 127.0.0.2: another client's Negotiate and frame work: %r" % (r,))
        for c in conns:
            c.close()
        time.sleep(0.5)
        # 16 hosts x 80 streams: the table (1024) is full of idle implicit sessions
        conns = []
        for i in range(16):
            conns += flood("127.0.0.%d" % (10 + i), 1, 80)
        for c in conns:
            c.pump(0.2)
        time.sleep(1.5)   # the streams have been idle for a while now
        r = store_one(addr, 4, "LIM4")
        check(r is True, "session table full of idle streams from 16 hosts: another client's Negotiate and frame work: %r" % (r,))
        log = node.log_tail(200000)
        check("evicted for a new session" in log, "ingestd logs the eviction")
        n = lim(node, "session_evicted")
        check(n >= 1, "/metrics counts the session evictions: %r" % n)
    finally:
        for c in conns:
            c.close()
        rc = node.stop()
        check(rc == 0, "ingestd exit status %d" % rc)

    # ------------------------------------------------------------ 5. slots held by meta-only frames
    data_dir = os.path.join(a.work, "data4")
    node = rtlib.Ingestd(a, ["--data-dir", data_dir, "--pool", "1M:4", "--workers", "1",
                             "--rdma", "off", "--frame-timeout", "60"],
                         log="ingestd4.log", metrics=True)
    conns = []
    try:
        addr = node.wait_ready()
        c = h2raw.H2(addr, "127.0.0.2")
        conns.append(c)
        sids = []
        for fid in range(100, 104):   # four descriptors of 1 MiB, never any bytes
            sid = c.open(push_path)
            c.send(sid, chunk(fid, "HOG", b"\0" * 1000000, with_data=False).SerializeToString())
            sids.append(sid)
        c.pump(0.5)
        t0 = time.time()
        r = store_one(addr, 5, "LIM5", timeout=20)
        check(r is True, "4 meta-only frames from 127.0.0.2 on a 4-slot pool: another producer's frame is stored: %r" % (r,))
        check(time.time() - t0 < 20, "... within 20 s, long before the 60 s frame timeout")
        deadline = time.time() + 60
        acks = []
        while time.time() < deadline:
            c.pump(0.2)
            acks = [PB.Ack.FromString(m) for sid in sids for m in c.messages(sid)]
            if len(acks) >= 3:
                break
        failed = [x for x in acks if not x.ok and x.retryable and x.code == PB.ERROR_DEADLINE]
        check(len(failed) >= 3, "the stalled meta-only frames fail retryable ERROR_DEADLINE after --slot-stall-ms (default 5 s): %r"
              % [(x.frameId, x.code, x.retryable, x.msg) for x in acks])
        n = lim(node, "slot_stalled")
        check(n >= len(failed), "/metrics counts the stalled slots: %r" % n)
    finally:
        for c in conns:
            c.close()
        rc = node.stop()
        check(rc == 0, "ingestd exit status %d" % rc)

    # ------------------------------------------------------------ 6. many streams from one host
    # 300 ControlStreams from one address, stock-seed style (no session: one implicit session
    # each): 256 on one connection (its SETTINGS_MAX_CONCURRENT_STREAMS) and 44 on a second,
    # as .NET's EnableMultipleHttp2Connections does. Every stream is served (one Ack each:
    # ERROR_NO_TRANSPORT, no RDMA here), none is refused RESOURCE_EXHAUSTED.
    data_dir = os.path.join(a.work, "data5")
    node = rtlib.Ingestd(a, ["--data-dir", data_dir, "--pool", "1M:4", "--workers", "1",
                             "--rdma", "off"], log="ingestd5.log", metrics=True)
    conns = []
    try:
        addr = node.wait_ready()
        meta = PB.FrameMeta(frameId="m", addr=4096, rkey=7, length=4096)
        streams = []
        for n in (256, 44):
            c = h2raw.H2(addr, "127.0.0.6")
            conns.append(c)
            c.pump(0.2)   # the node's SETTINGS first
            for i in range(n):
                meta.frameId = "many-%d-%d" % (len(conns), i)
                sid = c.open("/h3000.RDMASvc/ControlStream")
                c.send(sid, meta.SerializeToString())
                streams.append((c, sid))
        deadline = time.time() + 30
        while time.time() < deadline:
            for c in conns:
                c.pump(0.2)
            if all(len(c.messages(sid)) >= 1 or sid in c.ended for c, sid in streams):
                break
        acks = [[PB.Ack.FromString(m) for m in c.messages(sid)] for c, sid in streams]
        served = sum(1 for x in acks if len(x) == 1 and x[0].code == PB.ERROR_NO_TRANSPORT)
        ended = sum(1 for c, sid in streams if sid in c.ended)
        check(served == 300 and ended == 0,
              "300 ControlStreams from one address (256 + 44 on two connections): %d answered "
              "with their frame's Ack, %d ended by the node" % (served, ended))
        check(not any(c.eof or c.goaway for c in conns),
              "both connections stay open, no GOAWAY")
    finally:
        for c in conns:
            c.close()
        rc = node.stop()
        check(rc == 0, "ingestd exit status %d" % rc)

    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
