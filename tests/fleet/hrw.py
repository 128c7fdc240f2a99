#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""
hrw.py - the fleet's wafer placement (docs/FLEET.md, "Routing") in plain Python, the way a
producer in any language computes it, and a check of the shared test vectors.

  score(node, wafer) = first 8 bytes, big-endian, of SHA-256(node || 0x00 || wafer)
                       (UTF-8 bytes; an empty wafer id is "default")
  owner(nodes, wafer) = the node with the highest score; equal scores: the smaller node id
                        (bytewise)

  hrw.py --check tests/fleet/hrw_vectors.tsv   recompute every vector (exit 1 on a mismatch)
  hrw.py --moved N                             share of 10000 wafers that move when a node
                                               joins N nodes (about 1/(N+1))
"""
import argparse
import hashlib
import sys


def score(node: str, wafer: str) -> int:
    w = wafer if wafer else "default"
    h = hashlib.sha256(node.encode("utf-8") + b"\x00" + w.encode("utf-8")).digest()
    return int.from_bytes(h[:8], "big")


def owner(nodes, wafer: str) -> str:
    best = None
    for n in nodes:
        s = score(n, wafer)
        if best is None or s > best[0] or (s == best[0] and n.encode() < best[1].encode()):
            best = (s, n)
    return best[1]


def order(nodes, wafer: str):
    """Failover order: owner first, then the next-highest scores."""
    return sorted(nodes, key=lambda n: (-score(n, wafer), n.encode()))


def unescape(s: str) -> str:
    return "" if s == "-" else s.encode("ascii").decode("unicode_escape").encode("latin-1").decode("utf-8")


def check(path: str) -> int:
    bad = total = 0
    with open(path, encoding="ascii") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line or line.startswith("#"):
                continue
            kind, *rest = line.split("\t")
            total += 1
            if kind == "score":
                node, wafer, want = unescape(rest[0]), unescape(rest[1]), rest[2]
                got = "%016x" % score(node, wafer)
            elif kind == "owner":
                nodes = [unescape(x) for x in rest[0].split(",")]
                wafer, want = unescape(rest[1]), unescape(rest[2])
                got = owner(nodes, wafer)
            elif kind == "order":
                nodes = [unescape(x) for x in rest[0].split(",")]
                wafer, want = unescape(rest[1]), rest[2]
                got = ",".join(order(nodes, wafer))
            else:
                print("unknown vector kind %r" % kind, file=sys.stderr)
                return 1
            if got != want:
                bad += 1
                print("MISMATCH %s %r: want %s got %s" % (kind, rest, want, got))
    print("hrw vectors: %d checked, %d mismatches" % (total, bad))
    return 1 if bad or total < 8 else 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--check")
    ap.add_argument("--moved", type=int)
    a = ap.parse_args()
    if a.check:
        return check(a.check)
    if a.moved:
        nodes = ["node-%d" % i for i in range(a.moved)]
        wafers = ["W%05d" % i for i in range(10000)]
        before = {w: owner(nodes, w) for w in wafers}
        after = {w: owner(nodes + ["node-new"], w) for w in wafers}
        moved = sum(1 for w in wafers if before[w] != after[w])
        print("%d of %d wafers moved (%.3f; 1/%d = %.3f)" %
              (moved, len(wafers), moved / len(wafers), a.moved + 1, 1 / (a.moved + 1)))
        return 0
    ap.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
