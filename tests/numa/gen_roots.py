#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Regenerate the fake sysfs/procfs roots under tests/numa/roots/<case>/{sys,proc} that
tests/unit/test_doctor.c feeds to ingest-doctor (--sysfs-root/--procfs-root).

Only the files the doctor reads exist. ports/<p>/active_mtu is a fixture-only file (the
kernel has none: live runs ask ibv_query_port instead).
  pass: mlx5_1 on node 0 (same node as nvme1n1 in four_node_smt.xml), RoCE v2 IPv4 GID at
        index 3, MTU 9000/4096, 1024 x 2 MiB hugepages (768 on node 0, 256 on node
        1) mounted, performance governor,
        dataplane cpu isolated, iommu=pt.
  warn: rxe0 (virtual, no numa_node), only an IPv6 RoCE v2 GID, eth0 MTU 1500 (active MTU
        estimated 1024), no hugepages reserved, powersave governor, intel_iommu=on.
  fail: mlx5_0 port DOWN, RoCE v1 GIDs only, active MTU 4096 over a 1500 netdev, too few
        free hugepages, no CAP_IPC_LOCK (the test passes a small --memlock).
  rails: the two-socket two-NIC machine of two_socket_two_nic.xml: mlx5_0 on node 0
        (10.1.0.5), mlx5_1 on node 1 (10.2.0.5), both ACTIVE with RoCE v2 IPv4 GIDs at
        index 3, MTU 9000/4096; mlx5_2 (node 1) port DOWN, no rail; 2 MiB hugepages 600
        free on node 0, 200 on node 1; no CAP_IPC_LOCK; the rails' lcores 1 and 4 isolated.
  rails_rxe: the same machine with Soft-RoCE: rxe0 (rxed0, 169.254.77.1) and rxe1 (rxed1,
        169.254.78.1), no numa_node in sysfs (the kernel does not know: rdma-dev = rxe1@1).
"""
import os
import shutil

HERE = os.path.dirname(os.path.abspath(__file__))
ROOTS = os.path.join(HERE, "roots")

V1_LL = "fe80:0000:0000:0000:ba59:9fff:fea1:0001"


def v4(a):
    b = [int(x) for x in a.split(".")]
    return "0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x" % tuple(b)


def w(root, rel, text):
    p = os.path.join(root, rel)
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, "w") as f:
        f.write(text + "\n")


def rdma(sys, dev, ndev, state, phys, gids, node=None, active_mtu=None, ll="Ethernet"):
    base = "class/infiniband/%s" % dev
    if node is not None:
        w(sys, base + "/device/numa_node", str(node))
    p = base + "/ports/1"
    w(sys, p + "/state", state)
    w(sys, p + "/phys_state", phys)
    w(sys, p + "/link_layer", ll)
    if active_mtu:
        w(sys, p + "/active_mtu", str(active_mtu))
    for i in range(8):
        if i < len(gids):
            gid, ty = gids[i]
            w(sys, p + "/gids/%d" % i, gid)
            w(sys, p + "/gid_attrs/types/%d" % i, ty)
            w(sys, p + "/gid_attrs/ndevs/%d" % i, ndev)
        else:
            w(sys, p + "/gids/%d" % i, "0000:0000:0000:0000:0000:0000:0000:0000")


def common(proc, sys, capeff, cmdline, hp_nr, hp_free, mounted, governor, ncpus, isolated,
           per_node=()):
    w(proc, "self/status", "Name:\tingest-doctor\nCapInh:\t0000000000000000\n"
      "CapPrm:\t%s\nCapEff:\t%s\nCapBnd:\t000001ffffffffff" % (capeff, capeff))
    w(proc, "meminfo", "MemTotal:       65536000 kB\nHugePages_Total:    %d\n"
      "HugePages_Free:     %d\nHugepagesize:       2048 kB" % (hp_nr, hp_free))
    mounts = "sysfs /sys sysfs rw,nosuid,nodev,noexec,relatime 0 0\n"
    if mounted:
        mounts += "hugetlbfs /dev/hugepages hugetlbfs rw,relatime,pagesize=2M 0 0\n"
    w(proc, "mounts", mounts.rstrip("\n"))
    w(proc, "cmdline", cmdline)
    for size, nr, fr in (("2048kB", hp_nr, hp_free), ("1048576kB", 0, 0)):
        w(sys, "kernel/mm/hugepages/hugepages-%s/nr_hugepages" % size, str(nr))
        w(sys, "kernel/mm/hugepages/hugepages-%s/free_hugepages" % size, str(fr))
    # per NUMA node: (node, nr, free) of the 2 MiB pages
    for node, nr, fr in per_node:
        d = "devices/system/node/node%d/hugepages/hugepages-2048kB/" % node
        w(sys, d + "nr_hugepages", str(nr))
        w(sys, d + "free_hugepages", str(fr))
    for c in range(ncpus):
        if governor:
            w(sys, "devices/system/cpu/cpu%d/cpufreq/scaling_governor" % c, governor)
        else:
            os.makedirs(os.path.join(sys, "devices/system/cpu/cpu%d" % c), exist_ok=True)
    w(sys, "devices/system/cpu/isolated", isolated)


def main():
    shutil.rmtree(ROOTS, ignore_errors=True)

    r = os.path.join(ROOTS, "pass")
    sys, proc = r + "/sys", r + "/proc"
    rdma(sys, "mlx5_1", "ens2f0np0", "4: ACTIVE", "5: LinkUp",
         [(V1_LL, "IB/RoCE v1"), (V1_LL, "RoCE v2"), (v4("192.168.10.2"), "IB/RoCE v1"),
          (v4("192.168.10.2"), "RoCE v2")], node=0, active_mtu=4096)
    w(sys, "class/net/ens2f0np0/mtu", "9000")
    common(proc, sys, "000001ffffffffff",
           "BOOT_IMAGE=/vmlinuz root=/dev/nvme1n1p2 intel_iommu=on iommu=pt isolcpus=1-3",
           1024, 1024, True, "performance", 32, "1-3",
           per_node=((0, 768, 768), (1, 256, 256), (2, 0, 0), (3, 0, 0)))

    r = os.path.join(ROOTS, "warn")
    sys, proc = r + "/sys", r + "/proc"
    rdma(sys, "rxe0", "eth0", "4: ACTIVE", "5: LinkUp",
         [(V1_LL, "IB/RoCE v1"), (V1_LL, "RoCE v2")])
    w(sys, "class/net/eth0/mtu", "1500")
    common(proc, sys, "0000000000000000", "BOOT_IMAGE=/vmlinuz root=/dev/vda1 intel_iommu=on",
           0, 0, False, "powersave", 2, "")

    r = os.path.join(ROOTS, "rails")
    sys, proc = r + "/sys", r + "/proc"
    for dev, nd, ip, node in (("mlx5_0", "ens1f0np0", "10.1.0.5", 0),
                              ("mlx5_1", "ens2f0np0", "10.2.0.5", 1)):
        rdma(sys, dev, nd, "4: ACTIVE", "5: LinkUp",
             [(V1_LL, "IB/RoCE v1"), (V1_LL, "RoCE v2"), (v4(ip), "IB/RoCE v1"),
              (v4(ip), "RoCE v2")], node=node, active_mtu=4096)
        w(sys, "class/net/%s/mtu" % nd, "9000")
    rdma(sys, "mlx5_2", "ens2f1np1", "1: DOWN", "3: Disabled", [(V1_LL, "RoCE v2")], node=1,
         active_mtu=4096)
    w(sys, "class/net/ens2f1np1/mtu", "9000")
    common(proc, sys, "0000000000000000",
           "BOOT_IMAGE=/vmlinuz root=/dev/nvme0n1p2 intel_iommu=on iommu=pt isolcpus=1,4",
           800, 800, True, "performance", 16, "1,4", per_node=((0, 600, 600), (1, 200, 200)))

    r = os.path.join(ROOTS, "rails_rxe")
    sys, proc = r + "/sys", r + "/proc"
    for dev, nd, ip in (("rxe0", "rxed0", "169.254.77.1"), ("rxe1", "rxed1", "169.254.78.1")):
        rdma(sys, dev, nd, "4: ACTIVE", "5: LinkUp",
             [(V1_LL, "IB/RoCE v1"), (V1_LL, "RoCE v2"), (v4(ip), "IB/RoCE v1"),
              (v4(ip), "RoCE v2")], active_mtu=4096)
        w(sys, "class/net/%s/mtu" % nd, "9000")
    common(proc, sys, "000001ffffffffff", "BOOT_IMAGE=/vmlinuz root=/dev/vda1",
           512, 512, False, None, 4, "", per_node=((0, 256, 256), (1, 256, 256)))

    r = os.path.join(ROOTS, "fail")
    sys, proc = r + "/sys", r + "/proc"
    rdma(sys, "mlx5_0", "ens1f0np0", "1: DOWN", "3: Disabled",
         [(V1_LL, "IB/RoCE v1"), (v4("10.0.0.7"), "IB/RoCE v1")], node=1, active_mtu=4096)
    w(sys, "class/net/ens1f0np0/mtu", "1500")
    common(proc, sys, "0000000000000000", "BOOT_IMAGE=/vmlinuz root=/dev/nvme0n1p2",
           64, 10, True, "performance", 16, "")


if __name__ == "__main__":
    main()
