#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# install-deps.sh - install every Debian 12 package h3000 ingest needs to build, run the
# demo, run the tests and the Soft-RoCE guest, then the Node.js test client's npm packages
# (tests/interop/node, from its package-lock.json).  Idempotent: installs only what is
# missing, and does nothing (no apt, no npm, no root needed) when everything is present.
set -euo pipefail

PKGS=(
  # build
  build-essential cmake pkg-config
  libibverbs-dev librdmacm-dev ibverbs-providers rdma-core
  libdpdk-dev libprotobuf-c-dev protobuf-c-compiler protobuf-compiler
  libhwloc-dev hwloc libnghttp2-dev libssl-dev libsqlite3-dev sqlite3
  libcmocka-dev help2man libsystemd-dev
  # fleet catalog (ingestd --fleet-db, ingest-verify --fleet) and its tests' PostgreSQL
  libpq-dev postgresql postgresql-client
  # packaging and ABI checks (make deb, make test)
  abigail-tools lintian dpkg-dev fakeroot
  # fuzz targets (tests/fuzz, make fuzz): clang + libFuzzer
  clang-14 libfuzzer-14-dev libclang-rt-14-dev
  # tests: real gRPC client, RDMA tools, Soft-RoCE guest
  python3 python3-grpcio python3-grpc-tools python3-h2 openssl
  nodejs
  ibverbs-utils rdmacm-utils perftest
  qemu-system-x86 busybox-static kmod cpio xz-utils iproute2 util-linux
  # tests: a real Prometheus scraping /metrics (+ promtool), systemd-analyze, curl
  prometheus systemd curl
  # fault suite (tests/fault): loop-mounted ext4, fsfreeze, catalog checks
  e2fsprogs mount
  # bench
  iperf3 fio gnuplot-nox
)

missing=()
for p in "${PKGS[@]}"; do
  [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" = 'install ok installed' ] || missing+=("$p")
done
# npm: Debian's nodejs ships without it (package npm); a nodejs build that bundles npm
# conflicts with that package, so ask for it only when there is no npm at all
command -v npm >/dev/null 2>&1 || missing+=(npm)
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PKGS[@]} packages present"
elif [ "$(id -u)" != 0 ]; then
  echo "install-deps: missing packages: ${missing[*]}" >&2
  echo "install-deps: run as root, or: sudo apt-get install ${missing[*]}" >&2
  exit 1
else
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get -o DPkg::Lock::Timeout=600 update -qq
  apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  echo "install-deps: done"
fi

# The Node.js interop test's packages (@grpc/grpc-js, @grpc/proto-loader), exactly as
# locked, into tests/interop/node/node_modules (git-ignored). A stamp holds the hash of the
# lock file it was installed from, so a second run needs no network.
node_dir="$(cd "$(dirname "$0")/.." && pwd)/tests/interop/node"
if [ -f "$node_dir/package-lock.json" ]; then
  want="$(sha256sum "$node_dir/package-lock.json" | cut -d' ' -f1)"
  stamp="$node_dir/node_modules/.h3000-lock-sha256"
  if [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
    echo "install-deps: node test packages present"
  else
    echo "install-deps: npm ci in tests/interop/node"
    (cd "$node_dir" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >/dev/null)
    echo "$want" >"$stamp"
  fi
fi
