#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""s3tool.py - a second S3 client (boto3) for the tier tests and bench/tier.sh: it proves
that what ingestd stored are ordinary S3 objects, and it is the baseline the tier's upload
rate is compared with.

  s3tool.py --endpoint URL --access-key K --secret-key S COMMAND ...
    mb BUCKET                    create the bucket
    count BUCKET                 number of objects
    keys BUCKET                  one key a line
    md5sums BUCKET               "<md5 of the bytes read back> <key>" a line, every object
    get BUCKET KEY OUT [KEY OUT]...  download objects (one boto3 start for several: each
                                 start costs ~0.7 s of CPU)
    put BUCKET KEY FILE          upload one object
    head BUCKET KEY              its length, ETag and metadata as JSON
    cmp-dir BUCKET DATA_DIR      every object against <DATA_DIR>/frames/<key>.frame (the node's
                                 local copies): the same keys, the same bytes (MD5 of what is
                                 read back); prints "N objects, M equal", exit 1 otherwise
    putdir BUCKET PREFIX DIR N   upload every file of DIR as PREFIX<name>, N at once; prints
                                 "bytes seconds MB/s" (the bench baseline)
"""
import argparse
import concurrent.futures
import hashlib
import json
import os
import sys
import time

import boto3
import botocore.config


def client(a):
    cfg = botocore.config.Config(s3={"addressing_style": "path"}, retries={"max_attempts": 3},
                                 max_pool_connections=32)
    return boto3.client("s3", endpoint_url=a.endpoint, aws_access_key_id=a.access_key,
                        aws_secret_access_key=a.secret_key, region_name="us-east-1", config=cfg)


def all_keys(s3, bucket):
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        for o in page.get("Contents", []):
            yield o["Key"]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--endpoint", required=True)
    p.add_argument("--access-key", required=True)
    p.add_argument("--secret-key", required=True)
    p.add_argument("cmd")
    p.add_argument("args", nargs="*")
    a = p.parse_args()
    s3 = client(a)
    if a.cmd == "mb":
        s3.create_bucket(Bucket=a.args[0])
    elif a.cmd == "count":
        print(sum(1 for _ in all_keys(s3, a.args[0])))
    elif a.cmd == "keys":
        for k in all_keys(s3, a.args[0]):
            print(k)
    elif a.cmd == "md5sums":
        for k in all_keys(s3, a.args[0]):
            h = hashlib.md5()
            body = s3.get_object(Bucket=a.args[0], Key=k)["Body"]
            for chunk in iter(lambda: body.read(1 << 20), b""):
                h.update(chunk)
            print(h.hexdigest(), k)
    elif a.cmd == "get":
        if len(a.args) < 3 or len(a.args) % 2 == 0:
            p.error("get BUCKET KEY OUT [KEY OUT]...")
        for key, out in zip(a.args[1::2], a.args[2::2]):
            s3.download_file(a.args[0], key, out)
    elif a.cmd == "put":
        with open(a.args[2], "rb") as f:
            s3.put_object(Bucket=a.args[0], Key=a.args[1], Body=f)
    elif a.cmd == "head":
        h = s3.head_object(Bucket=a.args[0], Key=a.args[1])
        print(json.dumps({"length": h["ContentLength"], "etag": h["ETag"].strip('"'),
                          "metadata": h.get("Metadata", {})}))
    elif a.cmd == "cmp-dir":
        bucket, d = a.args[0], a.args[1]
        keys = sorted(all_keys(s3, bucket))
        local = set()
        for root, _, files in os.walk(os.path.join(d, "frames")):
            for f in files:
                if f.endswith(".frame"):
                    rel = os.path.relpath(os.path.join(root, f), os.path.join(d, "frames"))
                    local.add(rel[:-len(".frame")])
        bad = equal = 0
        for k in keys:
            if k not in local:
                print("object %s: no local copy" % k, file=sys.stderr)
                bad += 1
                continue
            h = hashlib.md5()
            body = s3.get_object(Bucket=bucket, Key=k)["Body"]
            for chunk in iter(lambda: body.read(1 << 20), b""):
                h.update(chunk)
            with open(os.path.join(d, "frames", k + ".frame"), "rb") as f:
                lh = hashlib.md5(f.read()).hexdigest()
            if h.hexdigest() != lh:
                print("object %s: other bytes than the local copy" % k, file=sys.stderr)
                bad += 1
            else:
                equal += 1
        for k in sorted(local - set(keys)):
            print("local copy %s: no object" % k, file=sys.stderr)
            bad += 1
        print("%d objects, %d local copies, %d equal" % (len(keys), len(local), equal))
        return 1 if bad else 0
    elif a.cmd == "putdir":
        bucket, prefix, d, n = a.args[0], a.args[1], a.args[2], int(a.args[3])
        files = sorted(os.path.join(d, f) for f in os.listdir(d))
        total = sum(os.path.getsize(f) for f in files)

        def put(path):
            with open(path, "rb") as f:
                s3.put_object(Bucket=bucket, Key=prefix + os.path.basename(path), Body=f)

        t0 = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(max_workers=n) as ex:
            for fut in [ex.submit(put, f) for f in files]:
                fut.result()
        dt = time.monotonic() - t0
        print("%d %.3f %.1f" % (total, dt, total / 1e6 / dt))
    else:
        p.error("unknown command " + a.cmd)
    return 0


if __name__ == "__main__":
    sys.exit(main())
