#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# install-deps.sh - install every Debian 12 package h3000 ingest needs to build, run the
# demo, run the tests and the Soft-RoCE guest.  Idempotent: installs only what is missing,
# and does nothing (no apt, no root needed) when everything is present.
set -euo pipefail

PKGS=(
  # build
  build-essential cmake pkg-config
  libibverbs-dev librdmacm-dev ibverbs-providers rdma-core
  libdpdk-dev libprotobuf-c-dev protobuf-c-compiler protobuf-compiler
  libhwloc-dev hwloc libnghttp2-dev libssl-dev libsqlite3-dev sqlite3 liburing-dev
  libcmocka-dev libsystemd-dev
  # tests: real gRPC client, RDMA tools, Soft-RoCE guest
  python3 python3-grpcio python3-grpc-tools python3-h2 openssl
  ibverbs-utils rdmacm-utils perftest
  qemu-system-x86 busybox-static kmod cpio xz-utils iproute2 util-linux
  # tests: a real Prometheus scraping /metrics (+ promtool), systemd-analyze, curl
  prometheus systemd curl
  # bench
  iperf3 fio
)

missing=()
for p in "${PKGS[@]}"; do
  [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" = 'install ok installed' ] || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PKGS[@]} packages present"
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "install-deps: missing packages: ${missing[*]}" >&2
  echo "install-deps: run as root, or: sudo apt-get install ${missing[*]}" >&2
  exit 1
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get -o DPkg::Lock::Timeout=600 update -qq
apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done"
