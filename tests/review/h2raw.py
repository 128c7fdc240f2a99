# SPDX-License-Identifier: Apache-2.0
"""
A raw HTTP/2 client for the abuse tests (tests/review/limits.py, creds.py): what a hostile
client does with a socket, from any loopback source address (127.0.0.2, ...), so that
"another host" can be played on one machine. It sends the preface, SETTINGS, HEADERS
(HPACK literals, no Huffman) and gRPC messages in DATA frames, and reads back DATA
payloads (gRPC messages, decoded by the caller) and stream ends. It never decodes HPACK:
the tests look at what came back in DATA frames, and at ingestd's log.
"""
import socket
import struct
import time

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST, SETTINGS, PING, GOAWAY, WINDOW_UPDATE = 0, 1, 3, 4, 6, 7, 8
END_STREAM, END_HEADERS, ACK = 0x1, 0x4, 0x1


def frame(ftype, flags, sid, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + struct.pack(">I", sid) + payload


def _lit(name, value):
    name, value = name.encode(), value.encode()
    assert len(name) < 127 and len(value) < 127
    return b"\x00" + bytes([len(name)]) + name + bytes([len(value)]) + value


def tcp(addr, src="127.0.0.2", timeout=10):
    """A TCP connection to 'host:port' from source address src (nothing sent)."""
    host, port = addr.rsplit(":", 1)
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind((src, 0))
    s.settimeout(timeout)
    s.connect((host, int(port)))
    return s


def closed_by_peer(s, timeout):
    """True when the peer closes s (EOF or reset) within timeout s; reads and drops data."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        s.settimeout(max(0.05, deadline - time.time()))
        try:
            if not s.recv(65536):
                return True
        except socket.timeout:
            return False
        except OSError:
            return True
    return False


class H2:
    """One HTTP/2 connection. Streams are numbered 1, 3, 5, ..."""

    def __init__(self, addr, src="127.0.0.2", settings=True, timeout=10):
        self.addr = addr
        self.s = tcp(addr, src, timeout)
        self.next_sid = 1
        self.buf = b""
        self.data = {}      # sid -> bytes of DATA received
        self.ended = set()  # sids the server ended (END_STREAM or RST_STREAM)
        self.goaway = False
        self.eof = False
        if settings:
            self.s.sendall(PREFACE + frame(SETTINGS, 0, 0) +
                           frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", 1 << 30)))

    def open(self, path, metadata=()):
        """HEADERS of a gRPC POST to path; returns the stream id."""
        sid = self.next_sid
        self.next_sid += 2
        hb = b"".join(_lit(n, v) for n, v in (
            (":method", "POST"), (":scheme", "http"), (":path", path),
            (":authority", self.addr), ("content-type", "application/grpc"), ("te", "trailers"))
            + tuple(metadata))
        self.s.sendall(frame(HEADERS, END_HEADERS, sid, hb))
        return sid

    def send(self, sid, msg, end=False):
        """One gRPC message (uncompressed) on sid; end: half-close after it."""
        body = b"\x00" + struct.pack(">I", len(msg)) + msg
        self.s.sendall(frame(DATA, END_STREAM if end else 0, sid, body))

    def pump(self, timeout=0.2):
        """Read what arrived for up to timeout s; answers SETTINGS and PING."""
        deadline = time.time() + timeout
        while not self.eof:
            left = deadline - time.time()
            if left <= 0:
                break
            self.s.settimeout(left)
            try:
                b = self.s.recv(1 << 20)
            except socket.timeout:
                break
            except OSError:
                self.eof = True
                break
            if not b:
                self.eof = True
                break
            self.buf += b
            while len(self.buf) >= 9:
                n = int.from_bytes(self.buf[:3], "big")
                if len(self.buf) < 9 + n:
                    break
                ft, fl = self.buf[3], self.buf[4]
                sid = int.from_bytes(self.buf[5:9], "big") & 0x7FFFFFFF
                pl = self.buf[9:9 + n]
                self.buf = self.buf[9 + n:]
                if ft == SETTINGS and not fl & ACK:
                    self.s.sendall(frame(SETTINGS, ACK, 0))
                elif ft == PING and not fl & ACK:
                    self.s.sendall(frame(PING, ACK, 0, pl))
                elif ft == DATA:
                    self.data[sid] = self.data.get(sid, b"") + pl
                    if n:   # give the window back so the server can keep sending
                        self.s.sendall(frame(WINDOW_UPDATE, 0, sid, struct.pack(">I", n)))
                elif ft == GOAWAY:
                    self.goaway = True
                elif ft == RST:
                    self.ended.add(sid)
                if ft in (DATA, HEADERS) and fl & END_STREAM:
                    self.ended.add(sid)

    def messages(self, sid):
        """The gRPC messages received on sid so far (payload bytes)."""
        b, out = self.data.get(sid, b""), []
        while len(b) >= 5:
            n = struct.unpack(">I", b[1:5])[0]
            if len(b) < 5 + n:
                break
            out.append(b[5:5 + n])
            b = b[5 + n:]
        return out

    def close(self):
        try:
            self.s.close()
        except OSError:
            pass
