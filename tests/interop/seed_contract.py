#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""
The frozen seed contract, checked mechanically: tests/interop/seed/rdma_stream.proto (a
byte-for-byte copy of the original wire contract) and proto/h3000.proto are compiled to
descriptor sets with protoc (or grpc_tools.protoc), and every element of the seed must be in the
project's proto unchanged:
  - the package;
  - every message of the seed, and in it every field: number, name, type (and the type
    name of message/enum fields), label, proto3 optional;
  - every service of the seed by name, and in it every method: input and output types,
    client and server streaming.
Additions (new fields, messages, methods) are allowed and listed. Options name generated
code (csharp_namespace: the C# namespace), never the wire, and that is shown, not assumed:
  - the project proto compiled without its file options (`option` lines at the start of
    a line) has the same descriptor, byte for byte, as the project proto with its file
    options cleared: an option adds nothing else;
  - no seed field carries an option (deprecated, packed, ...) or a json_name the seed
    does not;
  - the gRPC paths of the seed's methods (/h3000.RDMASvc/ControlStream: package and
    service, never a language's namespace) are the same;
  - a FrameMeta and an Ack with every seed field set, encoded with the seed's message
    classes, decode with the project's to the same values and re-encode to the same
    bytes, and the other way round.
To prove the check is not vacuous, it is then run against mutated copies of the project
proto (a field type, name, number, label, json_name, field option, a lost 'stream',
another package), each of which must be caught.

usage: seed_contract.py --seed SEED.proto --proto PROJECT.proto --work DIR
       seed_contract.py --seed SEED.proto --proto PROJECT.proto --work DIR --no-self-test
Prints "N passed, M failed" last; exits 1 on any difference.
"""
import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys

try:
    from google.protobuf import descriptor_pb2
except ImportError:
    sys.exit("seed_contract: python3-protobuf is missing (deploy/install-deps.sh installs "
             "python3-grpc-tools, which brings it)")

FD = descriptor_pb2.FieldDescriptorProto

# SHA-256 of the original rdma_stream.proto: the fixture is frozen byte for byte.
SEED_SHA256 = "af1be426bc71e7ee2170cd4b64bde71c1948a893e0628858a176462d70dfb769"


def compile_set(proto, out):
    """FileDescriptorSet of one .proto (its own directory is the include path)."""
    # Debian's protoc (protobuf-compiler, a build dependency) when there, else grpc_tools'
    protoc = shutil.which("protoc")
    cmd = ([protoc] if protoc else [sys.executable, "-m", "grpc_tools.protoc"]) + [
        "-I", os.path.dirname(os.path.abspath(proto)), "--descriptor_set_out=" + out,
        os.path.abspath(proto)]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
    if r.returncode != 0:
        raise RuntimeError("protoc failed on %s:\n%s" % (proto, r.stdout.decode(errors="replace")))
    s = descriptor_pb2.FileDescriptorSet()
    with open(out, "rb") as f:
        s.ParseFromString(f.read())
    if len(s.file) != 1:
        raise RuntimeError("%s: expected one file in the descriptor set" % proto)
    return s.file[0]


def field_sig(f):
    return {"name": f.name, "number": f.number, "type": FD.Type.Name(f.type),
            "type_name": f.type_name, "label": FD.Label.Name(f.label),
            "proto3_optional": f.proto3_optional, "json_name": f.json_name,
            "options": f.options.SerializeToString(deterministic=True).hex()}


def method_sig(m):
    return {"input": m.input_type, "output": m.output_type,
            "client_streaming": m.client_streaming, "server_streaming": m.server_streaming}


def compare(seed, proj):
    """[(ok, what)] for every element of the seed contract; [] of additions."""
    res = []
    res.append((seed.package == proj.package,
                "package: seed %r, project %r" % (seed.package, proj.package)))
    pmsgs = {m.name: m for m in proj.message_type}
    for sm in seed.message_type:
        pm = pmsgs.get(sm.name)
        res.append((pm is not None, "message %s present" % sm.name))
        if pm is None:
            continue
        pby_num = {f.number: f for f in pm.field}
        for sf in sm.field:
            pf = pby_num.get(sf.number)
            want = field_sig(sf)
            if pf is None:
                res.append((False, "%s field %d (%s): missing in the project proto" %
                            (sm.name, sf.number, sf.name)))
                continue
            got = field_sig(pf)
            diff = ["%s: seed %r, project %r" % (k, want[k], got[k]) for k in want if want[k] != got[k]]
            res.append((not diff, "%s field %d %s %s %s%s" %
                        (sm.name, sf.number, want["label"], want["type"], sf.name,
                         ("" if not diff else ": " + "; ".join(diff)))))
    psvcs = {s.name: s for s in proj.service}
    for ss in seed.service:
        ps = psvcs.get(ss.name)
        res.append((ps is not None, "service %s.%s present" % (seed.package, ss.name)))
        if ps is None:
            continue
        pmeth = {m.name: m for m in ps.method}
        for sme in ss.method:
            pme = pmeth.get(sme.name)
            if pme is None:
                res.append((False, "rpc %s.%s: missing in the project proto" % (ss.name, sme.name)))
                continue
            want, got = method_sig(sme), method_sig(pme)
            diff = ["%s: seed %r, project %r" % (k, want[k], got[k]) for k in want if want[k] != got[k]]
            res.append((not diff, "rpc %s.%s(%s%s) returns (%s%s)%s" %
                        (ss.name, sme.name, "stream " if want["client_streaming"] else "",
                         want["input"], "stream " if want["server_streaming"] else "",
                         want["output"], ("" if not diff else ": " + "; ".join(diff)))))
    adds = []
    smsgs = {m.name: m for m in seed.message_type}
    for pm in proj.message_type:
        sm = smsgs.get(pm.name)
        if sm is None:
            continue
        seen = {f.number for f in sm.field}
        adds += ["%s.%s = %d" % (pm.name, f.name, f.number) for f in pm.field if f.number not in seen]
    return res, adds


def grpc_paths(fd):
    """{method name: gRPC path} of every service of one file, as the wire names them."""
    return {"%s.%s" % (s.name, m.name): "/%s.%s/%s" % (fd.package, s.name, m.name)
            for s in fd.service for m in s.method}


def options_only_name_code(proj_proto, proj, work):
    """[(ok, what)]: the project's options change nothing but generated code."""
    res = []
    opts = [(f.name, v) for f, v in proj.options.ListFields()]
    with open(proj_proto) as f:
        text = f.read()
    stripped, n = re.subn(r"^option\s+[^;]*;[ \t]*\n", "", text, flags=re.M)
    sdir = os.path.join(work, "no-options")
    os.makedirs(sdir, exist_ok=True)
    sp = os.path.join(sdir, os.path.basename(proj_proto))
    with open(sp, "w") as f:
        f.write(stripped)
    bare = compile_set(sp, os.path.join(work, "no-options.pb"))
    cleared = descriptor_pb2.FileDescriptorProto()
    cleared.CopyFrom(proj)
    cleared.ClearField("options")
    res.append((bare.SerializeToString(deterministic=True) == cleared.SerializeToString(deterministic=True),
                "file options (%s) name generated code only: without its %d option line(s) the "
                "project proto has the same descriptor byte for byte" %
                (", ".join("%s = %r" % o for o in opts) or "none", n)))
    return res


def wire_roundtrip(seed, proj):
    """[(ok, what)]: seed messages encoded by one side decode identically on the other."""
    from google.protobuf import descriptor_pool, message_factory

    def classes(fd):
        pool = descriptor_pool.DescriptorPool()
        pool.Add(fd)
        fac = message_factory.MessageFactory(pool)
        return {m.name: fac.GetPrototype(pool.FindMessageTypeByName("%s.%s" % (fd.package, m.name)))
                for m in fd.message_type}

    sc, pc = classes(seed), classes(proj)
    values = {FD.TYPE_STRING: "fr\u00e9me-\u2603-1", FD.TYPE_UINT64: (1 << 64) - 2,
              FD.TYPE_UINT32: (1 << 32) - 3, FD.TYPE_INT64: -(1 << 62) - 5, FD.TYPE_BOOL: True}
    res = []
    for sm in seed.message_type:
        if sm.name not in pc:
            continue
        fields = {f.name: values[f.type] for f in sm.field if f.type in values}
        for a, b, way in ((sc, pc, "seed -> project"), (pc, sc, "project -> seed")):
            wire = a[sm.name](**fields).SerializeToString(deterministic=True)
            back = b[sm.name]()
            back.ParseFromString(wire)
            same = all(getattr(back, k) == v for k, v in fields.items())
            res.append((same and back.SerializeToString(deterministic=True) == wire,
                        "%s with all %d seed fields set, %s: same values, same %d bytes" %
                        (sm.name, len(fields), way, len(wire))))
    return res


def failures(seed_proto, proj_proto, work, tag):
    seed = compile_set(seed_proto, os.path.join(work, tag + "-seed.pb"))
    proj = compile_set(proj_proto, os.path.join(work, tag + "-project.pb"))
    res, _ = compare(seed, proj)
    return [w for ok, w in res if not ok]


# Mutations of the project proto that the check must catch: (what, regex, replacement).
MUTATIONS = [
    ("FrameMeta.frameId made bytes", r"(message FrameMeta \{[^}]*?)\b\w+(\s+frameId\s*=\s*1;)",
     r"\1bytes\2"),
    ("Ack.frameId renamed", r"(message Ack \{[^}]*?\s)frameId(\s*=\s*1;)", r"\1frame_id\2"),
    ("FrameMeta.rkey renumbered", r"(\brkey\s*=\s*)3;", r"\g<1>33;"),
    ("Ack.msg made repeated", r"(message Ack \{[^}]*?)(\bstring\s+msg\s*=)", r"\1repeated \2"),
    ("ControlStream loses 'stream' on its input", r"(ControlStream\s*\(\s*)stream\s+", r"\1"),
    ("package renamed", r"\bpackage\s+h3000\s*;", "package h3000v2;"),
    ("FrameMeta.timestamp int64 -> uint64", r"\bint64(\s+timestamp\s*=\s*6;)", r"uint64\1"),
    ("Ack.msg gets a json_name", r"(\bstring\s+msg\s*=\s*3)\s*;", r'\1 [json_name = "message"];'),
    ("FrameMeta.addr gets a field option", r"(\buint64\s+addr\s*=\s*2)\s*;", r"\1 [deprecated = true];"),
]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", required=True)
    ap.add_argument("--proto", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--no-self-test", action="store_true")
    a = ap.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    npass = nfail = 0

    with open(a.seed, "rb") as f:
        got = hashlib.sha256(f.read()).hexdigest()
    res = [(got == SEED_SHA256, "the seed fixture is the original contract byte for byte "
            "(sha256 %s)" % got[:16])]
    seed = compile_set(a.seed, os.path.join(a.work, "seed.pb"))
    proj = compile_set(a.proto, os.path.join(a.work, "project.pb"))
    more, adds = compare(seed, proj)
    res += more
    sp, pp = grpc_paths(seed), grpc_paths(proj)
    res += [(pp.get(k) == v, "gRPC path of %s: seed %s, project %s" % (k, v, pp.get(k)))
            for k, v in sorted(sp.items())]
    res += options_only_name_code(a.proto, proj, a.work)
    res += wire_roundtrip(seed, proj)
    for ok, what in res:
        print(("ok: " if ok else "FAIL: ") + what)
        npass += ok
        nfail += not ok
    if adds:
        print("additions in the project proto (allowed): " + ", ".join(adds))

    if not a.no_self_test:
        base = [w for ok, w in res if not ok]
        with open(a.proto) as f:
            text = f.read()
        for i, (what, rx, rep) in enumerate(MUTATIONS):
            mutated, n = re.subn(rx, rep, text, count=1, flags=re.S)
            mdir = os.path.join(a.work, "mut%d" % i)
            os.makedirs(mdir)
            mp = os.path.join(mdir, os.path.basename(a.proto))
            with open(mp, "w") as f:
                f.write(mutated)
            if n != 1:
                # the project proto no longer has the shape this mutation edits: the
                # mutation would prove nothing, say so
                print("FAIL: self-test '%s': pattern not found in %s" % (what, a.proto))
                nfail += 1
                continue
            try:
                # only what the mutation itself broke counts, not a difference already there
                caught = [w for w in failures(a.seed, mp, a.work, "mut%d" % i) if w not in base]
            except RuntimeError as e:
                caught = ["does not compile: %s" % str(e).splitlines()[0]]
            ok = len(caught) > 0
            print(("ok: " if ok else "FAIL: ") + "self-test '%s' is caught%s" %
                  (what, (" (" + caught[0] + ")") if caught else ""))
            npass += ok
            nfail += not ok

    print("%d passed, %d failed" % (npass, nfail))
    return 1 if nfail else 0


if __name__ == "__main__":
    sys.exit(main())
