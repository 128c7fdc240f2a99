#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Regenerate the synthetic hwloc XML topologies used by tests/unit/test_numa_plan.c.

CPU trees come from hwloc's synthetic backend (lstopo --input "..."), PU numbering is
Linux-like (SMT siblings at cpu i and i + ncores); PCI devices with their OS devices
(openfabrics mlx5_*, net, block nvme*) are then attached by hand under the Package or Group
that gives them their NUMA locality, as hwloc 2.x does on real machines.
Run from anywhere: python3 tests/numa/gen_topologies.py (needs lstopo-no-graphics 2.x).
"""
import os
import subprocess
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))


def synth(desc):
    out = subprocess.run(["lstopo-no-graphics", "--input", desc, "--of", "xml", "-"],
                         check=True, capture_output=True, text=True).stdout
    return ET.fromstring(out.split("\n", 2)[2])  # drop the XML/DOCTYPE lines


def max_gp(root):
    return max(int(o.get("gp_index", "0")) for o in root.iter("object"))


def attach(root, parent, bus, pci_type, osdevs):
    """Bridge -> PCIDev -> OS devices under parent. osdevs: [(name, osdev_type, infos)]."""
    gp = max_gp(root)
    br = ET.SubElement(parent, "object", {"type": "Bridge", "gp_index": str(gp + 1),
                                           "bridge_type": "0-1", "depth": "0",
                                           "bridge_pci": "0000:[%02x-%02x]" % (bus, bus)})
    pci = ET.SubElement(br, "object", {"type": "PCIDev", "gp_index": str(gp + 2),
                                        "pci_busid": "0000:%02x:00.0" % bus,
                                        "pci_type": pci_type, "pci_link_speed": "15.753846"})
    for i, (name, ty, infos) in enumerate(osdevs):
        od = ET.SubElement(pci, "object", {"type": "OSDev", "gp_index": str(gp + 3 + i),
                                            "name": name, "osdev_type": str(ty)})
        for k, v in infos:
            ET.SubElement(od, "info", {"name": k, "value": v})


def find(root, type_, os_index=None, nth=None):
    objs = [o for o in root.iter("object") if o.get("type") == type_]
    if os_index is not None:
        return [o for o in objs if o.get("os_index") == str(os_index)][0]
    return objs[nth]


def group_of_node(root, node):
    for g in root.iter("object"):
        if g.get("type") in ("Group", "Package"):
            for c in g:
                if c.get("type") == "NUMANode" and c.get("os_index") == str(node):
                    return g
    raise KeyError(node)


MLX = "0207 [15b3:1017] [15b3:0007] 00"
NVME = "0108 [144d:a808] [144d:a801] 00"
VIRTIO_BLK = "0180 [1af4:1042] [1af4:1100] 01"
VIRTIO_NET = "0200 [1af4:1041] [1af4:1100] 01"


def ib(name):
    return (name, 3, [("NodeGUID", "b859:9f03:00a1:0001"), ("Port1State", "4"),
                      ("Port1LID", "0"), ("Port1LMC", "0")])


def write(root, fname, comment):
    ET.indent(root, "  ")
    with open(os.path.join(HERE, fname), "w") as f:
        f.write('<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE topology SYSTEM "hwloc2.dtd">\n')
        # hwloc's minimalistic XML parser takes no comments: the description goes in an info
        machine = root.find("object")
        machine.insert(0, ET.Element("info", {"name": "TestDescription", "value": comment}))
        ET.indent(root, "  ")
        f.write(ET.tostring(root, encoding="unicode"))
        f.write("\n")


def main():
    # 2 sockets, one node each, 4 cores x 2 threads: mlx5_0 on node 1, nvme0n1 on node 0.
    r = synth("pack:2 numa:1 core:4 pu:2(indexes=2*8:1*2)")
    attach(r, find(r, "Package", os_index=1), 0x81, MLX,
           [ib("mlx5_0"), ("ens1f0np0", 2, [("Address", "b8:59:9f:a1:00:01")])])
    attach(r, find(r, "Package", os_index=0), 0x01, NVME,
           [("nvme0n1", 0, [("Size", "3750748848"), ("SectorSize", "512")])])
    write(r, "two_socket.xml", "2 packages x 4 cores x 2 PUs; mlx5_0 on node 1, nvme0n1 on node 0")

    # The shape issue #26 is for: 2 sockets, one RDMA NIC on each, the NVMe on socket 0.
    r = synth("pack:2 numa:1 core:4 pu:2(indexes=2*8:1*2)")
    attach(r, find(r, "Package", os_index=0), 0x17, MLX,
           [ib("mlx5_0"), ("ens1f0np0", 2, [("Address", "b8:59:9f:a1:00:01")])])
    attach(r, find(r, "Package", os_index=0), 0x01, NVME,
           [("nvme0n1", 0, [("Size", "3750748848"), ("SectorSize", "512")])])
    attach(r, find(r, "Package", os_index=1), 0x81, MLX,
           [ib("mlx5_1"), ("ens2f0np0", 2, [("Address", "b8:59:9f:a1:00:02")])])
    write(r, "two_socket_two_nic.xml",
          "2 packages x 4 cores x 2 PUs; mlx5_0 + nvme0n1 on node 0, mlx5_1 on node 1")

    # The 4-vCPU two-node guest's shape with a NIC per node: two cores a node.
    r = synth("pack:2 numa:1 core:2 pu:1")
    attach(r, find(r, "Package", os_index=0), 0x17, MLX,
           [ib("mlx5_0"), ("ens1f0np0", 2, [("Address", "b8:59:9f:a1:00:01")])])
    attach(r, find(r, "Package", os_index=1), 0x81, MLX,
           [ib("mlx5_1"), ("ens2f0np0", 2, [("Address", "b8:59:9f:a1:00:02")])])
    write(r, "small_two_nic.xml", "2 packages x 2 cores; mlx5_0 on node 0, mlx5_1 on node 1")

    # 2 sockets x 2 nodes (SNC), 4 cores x 2 threads per node: 4 nodes, 16 cores, 32 PUs.
    r = synth("pack:2 numa:2 core:4 pu:2(indexes=2*16:1*2)")
    attach(r, group_of_node(r, 0), 0x17, MLX,
           [ib("mlx5_1"), ("ens2f0np0", 2, [("Address", "b8:59:9f:a1:00:02")])])
    attach(r, group_of_node(r, 0), 0x18, NVME, [("nvme1n1", 0, [("SectorSize", "4096")])])
    attach(r, group_of_node(r, 2), 0x81, MLX,
           [ib("mlx5_0"), ("ens1f0np0", 2, [("Address", "b8:59:9f:a1:00:01")])])
    attach(r, group_of_node(r, 3), 0xc1, NVME, [("nvme0n1", 0, [("SectorSize", "4096")])])
    write(r, "four_node_smt.xml",
          "4 nodes x 4 cores x 2 PUs; mlx5_1+nvme1n1 on node 0, mlx5_0 on node 2, nvme0n1 on node 3")

    # A 2-vCPU VM: one node, no RDMA device, virtio disk and NIC with no locality.
    r = synth("pack:1 core:2 pu:1")
    m = find(r, "Machine", nth=0)
    attach(r, m, 0x00, VIRTIO_BLK, [("vda", 0, [("SectorSize", "512")])])
    br = [o for o in m if o.get("type") == "Bridge"][-1]
    pci = ET.SubElement(br, "object", {"type": "PCIDev", "gp_index": str(max_gp(r) + 1),
                                        "pci_busid": "0000:00:03.0", "pci_type": VIRTIO_NET,
                                        "pci_link_speed": "0.000000"})
    ET.SubElement(pci, "object", {"type": "OSDev", "gp_index": str(max_gp(r) + 1),
                                  "name": "eth0", "osdev_type": "2"})
    write(r, "vm_single.xml", "2-vCPU single-node VM, no RDMA device, virtio vda + eth0")


if __name__ == "__main__":
    main()
