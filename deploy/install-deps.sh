#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# install-deps.sh [build|deb|demo|demo-tier|all] [--list] - install the Debian 12 packages h3000
# ingest needs, in nested sets:
#   build  compile and install the product (make build, make install): compilers, the
#          libraries it links, cmocka (the release tree builds the unit tests), help2man
#   demo   build + the few tools `make demo` runs (python3 for its summary); no service
#          packages: nothing that Debian starts as a daemon
#   demo-tier  demo + a single-node Ceph for `make demo TIER=1` (ceph-mon, ceph-osd,
#          radosgw) and what talks to it (python3-boto3, python3-grpcio for GetFrame, curl)
#   deb    build + what `make deb` packs with (dpkg-dev, fakeroot)
#   all    (default) deb + what the tests, the demo and the benchmarks run: PostgreSQL,
#          qemu for the Soft-RoCE guest, real gRPC clients (python3-grpcio, Node.js and the
#          npm packages of tests/interop/node from its package-lock.json), Prometheus,
#          lintian, clang for the fuzz targets, perftest, fio, ...
# A production node needs only `build` to build, or nothing but the .deb.
# Idempotent: installs only what is missing, and does nothing (no apt, no npm, no root
# needed) when everything is present.
set -euo pipefail

set_name=${1:-all}
case $set_name in build|deb|demo|demo-tier|all) ;; *)
  echo "usage: $0 [build|deb|demo|demo-tier|all] [--list]   (default all: build + deb + tests)" >&2; exit 2 ;;
esac
list=0
[ "${2:-}" != --list ] || list=1

BUILD_PKGS=(
  build-essential cmake pkg-config
  libibverbs-dev librdmacm-dev ibverbs-providers rdma-core
  libdpdk-dev libprotobuf-c-dev protobuf-c-compiler protobuf-compiler
  libhwloc-dev hwloc libnghttp2-dev libssl-dev libsqlite3-dev
  # ingestd's crc32c (ISA-L, common/crc32c_isal.c)
  libisal-dev
  libcmocka-dev help2man libsystemd-dev
  # fleet catalog client (ingestd --fleet-db, ingest-verify --fleet)
  libpq-dev
  # object store tier: S3 over HTTP with SigV4 (ingestd --tier, ingest-verify --tier)
  libcurl4-openssl-dev
)
DEMO_PKGS=(
  # make demo: deploy/demo.sh's summary (python3: json, sqlite3)
  python3
)
DEMO_TIER_PKGS=(
  # make demo TIER=1: tests/tier/ceph_lib.sh's single-node Ceph, its S3 client, GetFrame
  ceph-mon ceph-osd radosgw python3-boto3 python3-grpcio python3-grpc-tools curl
)
DEB_PKGS=(
  # make deb: cpack -G DEB (dpkg-shlibdeps, dpkg-deb)
  dpkg-dev fakeroot
)
TEST_PKGS=(
  sqlite3
  # the fleet tests' PostgreSQL
  postgresql postgresql-client
  # package and ABI checks (make test)
  abigail-tools lintian
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
  # the object store tier's tests, demo and bench (tests/tier): a single-node Ceph with
  # radosgw, and a second S3 client (boto3; s3cmd for the bench baseline)
  ceph-mon ceph-osd radosgw python3-boto3 s3cmd
  # bench (bench/fallback.sh: iperf3, fio, and the stock C++ gRPC server it builds on demand)
  iperf3 fio gnuplot-nox libgrpc++-dev libprotobuf-dev protobuf-compiler-grpc
)
PKGS=("${BUILD_PKGS[@]}")
case $set_name in
  demo) PKGS+=("${DEMO_PKGS[@]}") ;;
  demo-tier) PKGS+=("${DEMO_PKGS[@]}" "${DEMO_TIER_PKGS[@]}") ;;
  deb) PKGS+=("${DEB_PKGS[@]}") ;;
  all) PKGS+=("${DEB_PKGS[@]}" "${DEMO_PKGS[@]}" "${DEMO_TIER_PKGS[@]}" "${TEST_PKGS[@]}") ;;
esac
mapfile -t PKGS < <(printf '%s\n' "${PKGS[@]}" | awk '!seen[$0]++')   # once each
if [ "$list" = 1 ]; then   # the set's packages, one a line: nothing is installed
  printf '%s\n' "${PKGS[@]}"
  exit 0
fi

missing=()
for p in "${PKGS[@]}"; do
  [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" = 'install ok installed' ] || missing+=("$p")
done
# npm: Debian's nodejs ships without it (package npm); a nodejs build that bundles npm
# conflicts with that package, so ask for it only when there is no npm at all
if [ "$set_name" = all ]; then command -v npm >/dev/null 2>&1 || missing+=(npm); fi
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PKGS[@]} packages of set '$set_name' present"
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
if [ "$set_name" = all ] && [ -f "$node_dir/package-lock.json" ]; then
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
