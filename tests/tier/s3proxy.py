#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""s3proxy.py - a fault-injecting HTTP proxy between an ingest node and a real radosgw, for
tests/tier/tier_faults.sh: the store misbehaving on demand, as a faulty gateway, network or
clock would make it.

  s3proxy.py --upstream HOST:PORT --access-key K --secret-key S --mode-file F
             --port-file P --stats-file J

Listens on 127.0.0.1 (a free port, written to P) and forwards every request to the
gateway; what it does to them is the one word in F, read again for every request (and
every 0.1 s while it holds one):

  pass       forward as they are
  errors     every request fails: a 503 SlowDown, and the next one a connection reset
             (a PUT's after half its body), in turn
  stall      every request is held: a PUT's body is read for its first 256 KiB and then
             no more, nothing is answered, until F says otherwise (then the connection is
             closed)
  blackhole  a PUT is read whole and answered 200 with the ETag of its bytes, and never
             forwarded: a store that acknowledges and keeps nothing (other requests pass)
  alter      a PUT's body is altered (the same length: one byte in each 64 KiB inverted),
             its x-amz-content-sha256 and Content-MD5 computed again over the altered
             bytes and the request signed again with the bucket's keys (botocore's SigV4),
             as a faulty gateway would: the store keeps other bytes than were sent
  transit    a PUT's body is altered and forwarded with the node's own headers: the store
             sees other bytes than the ones hashed (BadDigest / XAmzContentSHA256Mismatch)
  headlen    a HEAD of an object is answered with a Content-Length one more than the
             store's
  skew       every request is signed again dated an hour ago, and the answer's Date put an
             hour ahead: this node's clock an hour behind the store's (RequestTimeTooSkewed)

J holds what it did so far, as JSON ({"forwarded": n, "errors": n, ...}).
"""
import argparse
import base64
import datetime
import hashlib
import http.client
import http.server
import json
import os
import socket
import struct
import sys
import threading
import time
from email.utils import format_datetime, parsedate_to_datetime

from botocore.auth import SIGV4_TIMESTAMP, S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

HOP = {"connection", "keep-alive", "transfer-encoding", "expect", "proxy-connection", "te",
       "upgrade", "content-length"}
HOLD_MAX_S = 600          # a held request ends by then whatever the mode file says


class Signer(S3SigV4Auth):
    """botocore's S3 SigV4, dated skew_s from now."""

    def __init__(self, creds, skew_s):
        super().__init__(creds, "s3", "us-east-1")
        self.skew_s = skew_s

    def add_auth(self, request):
        when = datetime.datetime.utcnow() + datetime.timedelta(seconds=self.skew_s)
        request.context["timestamp"] = when.strftime(SIGV4_TIMESTAMP)
        self._modify_request_before_signing(request)
        canonical = self.canonical_request(request)
        string_to_sign = self.string_to_sign(request, canonical)
        self._inject_signature_to_request(request, self.signature(string_to_sign, request))


class Proxy:
    def __init__(self, a):
        self.a = a
        self.host, port = a.upstream.rsplit(":", 1)
        self.port = int(port)
        self.creds = Credentials(a.access_key, a.secret_key)
        self.lock = threading.Lock()
        self.stats = {}
        self.turn = 0

    def mode(self):
        try:
            with open(self.a.mode_file) as f:
                return f.read().strip() or "pass"
        except OSError:
            return "pass"

    def count(self, what):
        with self.lock:
            self.stats[what] = self.stats.get(what, 0) + 1
            tmp = self.a.stats_file + ".tmp"
            with open(tmp, "w") as f:
                json.dump(self.stats, f)
            os.replace(tmp, self.a.stats_file)

    def next_turn(self):
        with self.lock:
            self.turn += 1
            return self.turn


def alter(body):
    b = bytearray(body)
    for i in range(0, len(b), 65536):
        b[i + min(100, len(b) - 1 - i)] ^= 0xFF
    return bytes(b)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    px = None

    def log_message(self, fmt, *args):   # quiet: the test prints what matters
        pass

    # ---- helpers
    def body(self, limit=None):
        n = int(self.headers.get("Content-Length") or 0)
        want = n if limit is None else min(n, limit)
        data = b""
        while len(data) < want:
            chunk = self.rfile.read(want - len(data))
            if not chunk:
                break
            data += chunk
        return data, n

    def reset(self):
        """close the connection with a TCP RST"""
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.close_connection = True
        try:
            self.connection.close()
        except OSError:
            pass

    def answer(self, status, headers, payload, head=False):
        self.send_response_only(status)
        for k, v in headers:
            self.send_header(k, v)
        if not any(k.lower() == "content-length" for k, _ in headers):
            self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if not head and payload:
            self.wfile.write(payload)
        self.wfile.flush()

    def error(self, status, code, head=False):
        xml = ("<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>%s</Code></Error>" % code).encode()
        self.close_connection = True
        self.answer(status, [("Content-Type", "application/xml"), ("Connection", "close")],
                    b"" if head else xml, head)

    def hold(self, px):
        end = time.monotonic() + HOLD_MAX_S
        while px.mode() == "stall" and time.monotonic() < end:
            time.sleep(0.1)
        self.close_connection = True
        try:
            self.connection.close()
        except OSError:
            pass

    def forward(self, body, headers=None, resign_skew=None):
        """the request upstream; (status, headers, payload) of its answer"""
        px = self.px
        hdrs = headers if headers is not None else [(k, v) for k, v in self.headers.items()
                                                      if k.lower() not in HOP]
        if resign_skew is not None:
            keep = [(k, v) for k, v in hdrs if k.lower() not in
                    ("authorization", "x-amz-date", "host", "x-amz-content-sha256", "user-agent")]
            url = "http://%s:%d%s" % (px.host, px.port, self.path)
            req = AWSRequest(method=self.command, url=url, data=body, headers=dict(keep))
            Signer(px.creds, resign_skew).add_auth(req)
            hdrs = [(k, v) for k, v in req.headers.items()]
        c = http.client.HTTPConnection(px.host, px.port, timeout=60)
        try:
            c.putrequest(self.command, self.path, skip_host=any(k.lower() == "host" for k, _ in hdrs),
                         skip_accept_encoding=True)
            for k, v in hdrs:
                c.putheader(k, v)
            if body or self.command == "PUT":
                c.putheader("Content-Length", str(len(body)))
            c.endheaders(body if body else None)
            r = c.getresponse()
            payload = r.read()
            return r.status, [(k, v) for k, v in r.getheaders() if k.lower() not in HOP or
                              (self.command == "HEAD" and k.lower() == "content-length")], payload
        finally:
            c.close()

    # ---- the one handler
    def handle_any(self):
        px = self.px
        mode = px.mode()
        head = self.command == "HEAD"
        is_put = self.command == "PUT"
        is_object = self.path.count("/") >= 2 and not self.path.endswith("/")
        try:
            if mode == "errors":
                if px.next_turn() % 2:
                    self.body(None)
                    px.count("errors.503")
                    self.error(503, "SlowDown", head)
                else:
                    self.body(int(self.headers.get("Content-Length") or 0) // 2)
                    px.count("errors.reset")
                    self.reset()
                return
            if mode == "stall":
                px.count("stall")
                if is_put:
                    self.body(256 << 10)
                self.hold(px)
                return
            body, n = self.body(None)
            if mode == "blackhole" and is_put:
                px.count("blackhole")
                etag = '"%s"' % hashlib.md5(body).hexdigest()
                self.answer(200, [("ETag", etag)], b"")
                return
            if mode in ("alter", "transit") and is_put and body:
                altered = alter(body)
                if mode == "transit":
                    px.count("transit")
                    st, hdrs, payload = self.forward(altered)
                else:
                    px.count("alter")
                    hdrs = [(k, v) for k, v in self.headers.items() if k.lower() not in HOP]
                    hdrs = [(k, base64.b64encode(hashlib.md5(altered).digest()).decode())
                            if k.lower() == "content-md5" else (k, v) for k, v in hdrs]
                    st, hdrs, payload = self.forward(altered, hdrs, resign_skew=0)
                self.answer(st, hdrs, payload, head)
                return
            if mode == "skew":
                px.count("skew")
                st, hdrs, payload = self.forward(body, resign_skew=-3600)
                out = []
                for k, v in hdrs:
                    if k.lower() == "date":
                        try:
                            v = format_datetime(parsedate_to_datetime(v) + datetime.timedelta(hours=1),
                                                usegmt=True)
                        except (TypeError, ValueError):
                            pass
                    out.append((k, v))
                self.answer(st, out, payload, head)
                return
            st, hdrs, payload = self.forward(body)
            if mode == "headlen" and head and is_object and st == 200:
                px.count("headlen")
                hdrs = [(k, str(int(v) + 1)) if k.lower() == "content-length" else (k, v) for k, v in hdrs]
            else:
                px.count("forwarded")
            self.answer(st, hdrs, payload, head)
        except (BrokenPipeError, ConnectionResetError, socket.timeout, OSError) as e:
            px.count("client_gone")
            self.close_connection = True
            print("s3proxy: %s %s: %s" % (self.command, self.path, e), file=sys.stderr)

    do_GET = do_PUT = do_HEAD = do_POST = do_DELETE = handle_any


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--upstream", required=True)
    p.add_argument("--access-key", required=True)
    p.add_argument("--secret-key", required=True)
    p.add_argument("--mode-file", required=True)
    p.add_argument("--port-file", required=True)
    p.add_argument("--stats-file", required=True)
    a = p.parse_args()
    Handler.px = Proxy(a)
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    tmp = a.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(srv.server_address[1]))
    os.replace(tmp, a.port_file)
    srv.serve_forever()


if __name__ == "__main__":
    main()
