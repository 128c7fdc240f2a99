#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""gen_seeds.py - write the seed corpora in tests/fuzz/corpus/<target>/ (committed; rerun
only to change them). Hand-encoded protobuf, gRPC framing and HTTP/2 (HPACK literals), so
the seeds need nothing but Python."""
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def varint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def fv(field, v):            # varint field
    return varint(field << 3) + varint(v)


def fb(field, b):            # length-delimited field
    if isinstance(b, str):
        b = b.encode()
    return varint(field << 3 | 2) + varint(len(b)) + b


def frame_meta(fid, length, wafer="W1", crc=None, session=0):
    m = fb(1, str(fid)) + fv(2, 0x7F0000001000) + fv(3, 77) + fv(4, length) + fb(5, wafer) + fv(6, 1700000000)
    if crc is not None:
        m += fv(7, crc) + fv(8, 1)
    if session:
        m += fv(9, session)
    return m


def frame_chunk(fid, off, data, last, meta=None, session=0):
    m = fb(1, str(fid)) + fv(2, off)
    if last:
        m += fv(3, 1)
    if meta is not None:
        m += fb(4, meta)
    if session:
        m += fv(5, session)
    return m + fb(15, data)


def negotiate_request():
    return fv(1, 1) + fv(2, 1) + fb(3, varint(1) + varint(2)) + fb(4, "ingest-send") + fv(6, 16 << 20) + fv(7, 32)


def grpc_msg(b, flags=0):
    return struct.pack(">BI", flags, len(b)) + b


def h2frame(ftype, flags, sid, payload):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + struct.pack(">I", sid) + payload


def hpack(headers):
    out = bytearray()
    for n, v in headers:
        n, v = n.encode(), v.encode()
        out += b"\x00" + bytes([len(n)]) + n + bytes([len(v)]) + v
    return bytes(out)


def request(path, sid=1, method="POST", ct="application/grpc", extra=()):
    hs = [(":method", method), (":scheme", "http"), (":path", path), (":authority", "127.0.0.1"),
          ("content-type", ct), ("te", "trailers")] + list(extra)
    return h2frame(1, 0x4, sid, hpack(hs))


def data(sid, b, end=False, pad=None):
    """DATA frame; pad: PADDED with that many bytes of padding."""
    if pad is None:
        return h2frame(0, 0x1 if end else 0, sid, b)
    return h2frame(0, (0x1 if end else 0) | 0x8, sid, bytes([pad]) + b + b"\0" * pad)


def write(target, name, b):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(b)


def main():
    payload = bytes(range(256)) * 4
    chunks = [frame_chunk(7, 0, payload[:600], False, meta=frame_meta(7, 1024)),
              frame_chunk(7, 600, payload[600:], True)]
    # gRPC server: [bits 0-1: read sizes that follow - 1][flags: bit 0 = prepend preface +
    # SETTINGS][read sizes, cycled; 0 = no limit] + HTTP/2
    whole = b"\x00\x01\x00"
    neg = request("/h3000.RDMASvc/Negotiate") + data(1, grpc_msg(negotiate_request()), True)
    write("fuzz_grpc_server", "negotiate", whole + neg)
    write("fuzz_grpc_server", "negotiate-split", b"\x00\x01\x07" + neg)
    push = request("/h3000.RDMASvc/PushFrames") + data(1, grpc_msg(chunks[0])) + data(1, grpc_msg(chunks[1]), True)
    write("fuzz_grpc_server", "push", whole + push)
    one = b"".join(grpc_msg(c) for c in chunks)
    write("fuzz_grpc_server", "push-one-data", b"\x00\x01\x15" + request("/h3000.RDMASvc/PushFrames") + data(1, one, True))
    # placement: reads that split a DATA frame at its header, pad length, gRPC prefix,
    # protobuf keys, the data, the padding; padded frames; two streams interleaving
    write("fuzz_grpc_server", "push-split-boundaries", b"\x03\x01\x09\x01\x05\x02"
          + request("/h3000.RDMASvc/PushFrames") + data(1, one, True, pad=7))
    write("fuzz_grpc_server", "push-padded", b"\x01\x01\x00\x0a" + request("/h3000.RDMASvc/PushFrames")
          + data(1, one[:300], pad=0) + data(1, one[300:900], pad=255) + data(1, one[900:], True, pad=1))
    write("fuzz_grpc_server", "push-interleaved", b"\x02\x01\x00\xc8\x11"
          + request("/h3000.RDMASvc/PushFrames", 1) + request("/h3000.RDMASvc/PushFrames", 3)
          + data(1, one[:500]) + data(3, one[:700]) + data(1, one[500:]) + data(3, one[700:], True)
          + data(1, b"", True))
    write("fuzz_grpc_server", "push-rst-mid-data", whole + request("/h3000.RDMASvc/PushFrames")
          + data(1, one[:700]) + h2frame(3, 0, 1, struct.pack(">I", 8)) + data(1, one[700:]))
    write("fuzz_grpc_server", "push-cut-mid-data", b"\x00\x01\x40" + request("/h3000.RDMASvc/PushFrames")
          + data(1, one)[:800])
    metas = b"".join(grpc_msg(frame_meta(i, 4096)) for i in range(1, 6))
    write("fuzz_grpc_server", "control", whole + request("/h3000.RDMASvc/ControlStream") + data(1, metas) + data(1, b"", True))
    write("fuzz_grpc_server", "health", whole + request("/grpc.health.v1.Health/Check") + data(1, grpc_msg(fb(1, "h3000.RDMASvc")), True))
    write("fuzz_grpc_server", "errors", whole + request("/nope.Svc/X", 1) + data(1, grpc_msg(b""), True)
          + request("/h3000.RDMASvc/Negotiate", 3, method="GET") + request("/h3000.RDMASvc/Negotiate", 5, ct="text/plain")
          + request("/h3000.RDMASvc/Negotiate", 7) + data(7, grpc_msg(b"\x01\x02", flags=1), True))
    write("fuzz_grpc_server", "deadline", whole + request("/h3000.RDMASvc/ControlStream", extra=[("grpc-timeout", "1n")])
          + data(1, grpc_msg(frame_meta(1, 10))))
    write("fuzz_grpc_server", "rst-ping-window", whole + request("/h3000.RDMASvc/PushFrames") + data(1, grpc_msg(chunks[0])[:100])
          + h2frame(6, 0, 0, b"12345678") + h2frame(8, 0, 0, struct.pack(">I", 65536)) + h2frame(3, 0, 1, struct.pack(">I", 8)))
    write("fuzz_grpc_server", "garbage", b"\x00\x00\x00GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    write("fuzz_grpc_server", "too-large", whole + request("/h3000.RDMASvc/ControlStream") + data(1, struct.pack(">BI", 0, 1 << 20) + b"x" * 100))
    # chunk parser: [split seed] + FrameChunk
    write("fuzz_chunk", "first", b"\x05" + chunks[0])
    write("fuzz_chunk", "last", b"\x00" + chunks[1])
    write("fuzz_chunk", "reordered", b"\x02" + fb(15, b"abc") + fv(3, 1) + fb(1, "9") + fv(2, 3))
    write("fuzz_chunk", "unicode-id", b"\x03" + fb(1, "wafer-\u00e9-\u6f22") + fv(2, 0) + fb(15, b"z"))
    write("fuzz_chunk", "unknown-fields", b"\x01" + fb(1, "1") + fv(20, 5) + b"\x31" + b"\0" * 8 + b"\x35" + b"\0" * 4 + fb(21, b"zz"))
    write("fuzz_chunk", "bad-varint", b"\x00" + b"\x08" + b"\xff" * 10 + b"\x01")
    # deframer: [split seed] + gRPC messages
    write("fuzz_deframe", "two", b"\x03" + grpc_msg(b"hello") + grpc_msg(b""))
    write("fuzz_deframe", "partial", b"\x00" + grpc_msg(b"x" * 50) + b"\x00\x00\x00")
    # protobuf messages: [selector] + bytes
    write("fuzz_proto", "frame-meta", b"\x00" + frame_meta(1, 4 << 20, crc=0xDEADBEEF, session=3))
    write("fuzz_proto", "frame-chunk", b"\x01" + chunks[0])
    write("fuzz_proto", "negotiate-request", b"\x02" + negotiate_request())
    write("fuzz_proto", "negotiate-reply", b"\x03" + fv(1, 1) + fv(2, 42) + fv(3, 2) + fb(4, varint(1) + varint(2)) + fb(5, "10.0.0.1")
          + fv(6, 7472) + fv(7, 64 << 20) + fv(8, 64) + fv(9, 1 << 20) + fb(10, "no RDMA device") + fb(11, "0.1.0"))
    write("fuzz_proto", "ack", b"\x04" + fb(1, "5") + fv(2, 1) + fb(3, "ok") + fv(4, 2) + fv(5, 0) + fv(8, 123) + fv(9, 99999))
    write("fuzz_proto", "stats-reply", b"\x06" + b"".join(fv(i, i * 1000) for i in range(1, 12)))
    write("fuzz_proto", "health", b"\x07" + fb(1, "h3000.RDMASvc"))
    write("fuzz_proto", "frame-meta-packed-repeats", b"\x00" + frame_meta(1, 5) * 20)
    member = lambda nid, addr, st: fb(1, nid) + fb(2, addr) + fv(3, st) + fv(4, 1764000000000)
    write("fuzz_proto", "members-request", b"\x08")
    write("fuzz_proto", "members-reply", b"\x09" + fb(1, member("node0", "127.0.0.1:7471", 1))
          + fb(1, member("node1", "[::1]:7471", 2)) + fb(2, "node0") + fv(3, 7) + fb(4, "postgresql"))
    write("fuzz_proto", "get-frame-request", b"\x0a" + fb(1, "W-17") + fb(2, "frame-42") + fv(3, 2))
    write("fuzz_proto", "frame-data", b"\x0b" + fb(1, "W-17") + fb(2, "frame-42") + fv(3, 5) + fv(4, 0x1234abcd)
          + fv(5, 1764000000000) + fb(6, "both") + fv(7, 2) + fv(8, 0) + fb(15, b"hello"))
    write("fuzz_proto", "stats-reply-tier", b"\x06" + fv(3, 7) + fb(60, fv(1, 1) + fb(2, "s3://h:7480/b") + fv(3, 4)
          + fb(4, "credentials refused") + fv(5, 10) + b"\x39" + b"\0" * 8 + fv(21, 1)))
    # store path: wafer \0 frame \0 wafer2 \0 frame2
    write("fuzz_store_path", "plain", b"W1\x0042\x00W1\x0043")
    write("fuzz_store_path", "dots", b"lot..7\x00..\x00lot..7\x00%2E%2E")
    write("fuzz_store_path", "slash", b"a/../../etc\x00x/y\x00a%2F..%2F..%2Fetc\x00x%2Fy")
    write("fuzz_store_path", "long", b"w" * 200 + b"\x00" + b"f" * 256 + b"\x00" + b"w" * 201 + b"\x00" + b"f" * 255)
    write("fuzz_store_path", "unicode", "lot-\u00e9\x00\u6f22\x00lot-%C3%A9\x00x".encode())
    # catalog: rows are read from the bytes
    write("fuzz_catalog", "batch", bytes([3, 0, 1, 2, 65, 66, 0, 0, 0, 5, 0, 4, b"pqrs"[0], 1, 2, 3, 1, 1,
                                          0x80] + list(struct.pack(">Q", 2**63 + 5)) + [1, 67] + [0] * 30))
    write("fuzz_catalog", "dup", bytes([1, 0, 4, 1, 65] + [0] * 12 + [1, 0, 4, 1, 66] + [0] * 12))
    # flag parsers: [selector] + text
    for i, t in enumerate([b"\x00" + b"16M", b"\x00" + b"4KiB", b"\x00" + b"18446744073709551615",
                           b"\x01" + b"0x1F", b"\x81" + b"18446744073709551616",
                           b"\x02" + b"4M:16,16M:8,64M:4", b"\x02" + b"1G:1,", b"\x02" + b"4K:1000000",
                           b"\x40" + b"1.5s", b"\x42" + b"500ms", b"\xc0" + b"2h",
                           b"\x41" + b"64K,4M,16M-64M"]):
        write("fuzz_parse", "seed%d" % i, t)


if __name__ == "__main__":
    sys.exit(main())
