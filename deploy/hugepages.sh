#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# hugepages.sh - reserve 2 MiB hugepages for ingestd's MR pool and mount hugetlbfs.
# Usage: deploy/hugepages.sh POOL_MIB [NODE]    (root)
#   POOL_MIB  the pool size in MiB (sum of class slot_size*count); rounded up to 2 MiB pages
#   NODE      reserve on this NUMA node only (default: system-wide)
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 POOL_MIB [NODE]" >&2; exit 2; }
mib=$1; node=${2:-}
[ "$(id -u)" = 0 ] || { echo "hugepages.sh: needs root" >&2; exit 1; }
pages=$(( (mib + 1) / 2 + 8 ))      # + a few for EAL's own heap when it runs on hugepages
if [ -n "$node" ]; then
  f=/sys/devices/system/node/node$node/hugepages/hugepages-2048kB/nr_hugepages
else
  f=/proc/sys/vm/nr_hugepages
fi
cur=$(cat "$f")
if [ "$cur" -lt "$pages" ]; then echo "$pages" > "$f"; fi
got=$(cat "$f")
mountpoint -q /dev/hugepages || { mkdir -p /dev/hugepages; mount -t hugetlbfs nodev /dev/hugepages; }
echo "hugepages: $got x 2 MiB reserved (${node:+node $node, }wanted $pages); hugetlbfs on /dev/hugepages"
[ "$got" -ge "$pages" ] || { echo "hugepages: only $got of $pages pages: memory is fragmented, reserve at boot (hugepages=$pages on the kernel command line)" >&2; exit 1; }
