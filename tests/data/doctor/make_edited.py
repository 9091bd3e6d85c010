#!/usr/bin/env python3
"""Writes the hand-edited logs, nccl-tests outputs and sysfs trees of this corpus from the real
healthy 2xH200 files beside it. Each edit plants one misconfiguration the way NCCL 2.28 would
print it. Run from this directory: python3 make_edited.py"""
import os
import re
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
HEALTHY = open(os.path.join(HERE, "h200x2-healthy.log")).read().splitlines(keepends=True)
AR = open(os.path.join(HERE, "h200x2-all-reduce-healthy.txt")).read().splitlines(keepends=True)


def write(name, lines):
    with open(os.path.join(HERE, name), "w") as f:
        f.writelines(lines)


def after_version(lines, extra):
    """Inserts `extra` (per rank prefix) after each rank's 'NCCL version' line."""
    out = []
    for l in lines:
        out.append(l)
        m = re.match(r"(vm:\d+:\d+ \[\d\]) NCCL INFO NCCL version", l)
        if m:
            out.extend(f"{m.group(1)} NCCL INFO {e}\n" for e in extra)
    return out


# NCCL_P2P_DISABLE=1: NCCL echoes it, reroutes GPU-GPU paths through the CPU (PHB at the PCIe
# link's 48 GB/s), searches rings over PHB and connects every channel over SHM.
p2p = after_version(HEALTHY, ["NCCL_P2P_DISABLE set by environment to 1"])
p2p = [l.replace("via P2P/CUMEM", "via SHM/direct/direct")
        .replace("GPU/0-70 (2/370.8/NVL)", "GPU/0-70 (2/48.0/PHB)")
        .replace("GPU/0-60 (2/370.8/NVL)", "GPU/0-60 (2/48.0/PHB)")
        .replace("nChannels 12, bw 30.000000/30.000000, type NVL/PIX", "nChannels 2, bw 24.000000/24.000000, type PHB/PIX")
        .replace("nChannels 12, bw 60.000000/60.000000, type NVL/PIX", "nChannels 2, bw 24.000000/24.000000, type PHB/PIX")
        .replace("24 coll channels, 24 collnet channels", "4 coll channels, 4 collnet channels")
       for l in p2p]
write("h200x2-p2p-disabled.log", p2p)

# NCCL_ALGO=Tree NCCL_PROTO=LL: every size runs tree LL.
forced = after_version(HEALTHY, ["NCCL_ALGO set by environment to Tree", "NCCL_PROTO set by environment to LL"])
forced = [re.sub(r"Algo RING proto (LL|SIMPLE)", "Algo TREE proto LL", l) for l in forced]
write("h200x2-forced-tree-ll.log", forced)

# NCCL_MAX_NCHANNELS=2: two collective channels, only channels 0 and 1 connected.
capped = after_version(HEALTHY, ["NCCL_MAX_NCHANNELS set by environment to 2"])
capped = [l.replace("24 coll channels, 24 collnet channels, 0 nvls channels, 32 p2p channels, 32 p2p channels per peer",
                    "2 coll channels, 2 collnet channels, 0 nvls channels, 2 p2p channels, 2 p2p channels per peer")
          for l in capped
          if not re.search(r"Channel (0[2-9]|1\d|2\d)/0 :", l)]
write("h200x2-max-nchannels-2.log", capped)

# Both processes on GPU 0 (busId 60): NCCL's init line for rank 1 shows the same bus id.
dup = [l.replace("cudaDev 1 nvmlDev 1 busId 70", "cudaDev 0 nvmlDev 0 busId 60") for l in HEALTHY]
write("h200x2-same-gpu.log", dup)

# A slow bootstrap: rank 1 waited 45 s for rank 0.
slow = [l.replace("rank 1 nranks 2 total 0.49 (kernels 0.41, alloc 0.01, bootstrap 0.00",
                  "rank 1 nranks 2 total 45.32 (kernels 0.41, alloc 0.01, bootstrap 44.83") for l in HEALTHY]
write("h200x2-slow-init.log", slow)

# The graph dump NCCL writes with P2P off: rings and trees searched over PHB, 2 channels.
graph = open(os.path.join(HERE, "h200x2-graph-healthy.xml")).read()
graph = re.sub(r'nchannels="12" speedintra="(30|60)" speedinter="(30|60)"', 'nchannels="2" speedintra="24" speedinter="24"', graph)
graph = graph.replace('typeintra="NVL"', 'typeintra="PHB"')
with open(os.path.join(HERE, "h200x2-graph-phb.xml"), "w") as f:
    f.write(graph)

# nccl-tests reaching 45% of the healthy busbw at the largest sizes, and one wrong row.
def scale_row(l, f):
    x = l.split()
    for i in (6, 7, 10, 11):
        x[i] = f"{float(x[i]) * f:.2f}"
    for i in (5, 9):
        x[i] = f"{float(x[i]) / f:.2f}"
    return "  ".join(x) + "\n"
slow_ar = [scale_row(l, 0.45) if l.split() and l.split()[0].isdigit() and int(l.split()[0]) >= 8 << 20 else l for l in AR]
write("h200x2-all-reduce-45pct.txt", slow_ar)
wrong = []
for l in AR:
    x = l.split()
    if x and x[0] == "8388608":
        x[8] = "3"
        l = "  ".join(x) + "\n"
    wrong.append(l)
write("h200x2-all-reduce-wrong.txt", wrong)


# sysfs trees.
def config(port, acs_ctrl):
    """4 KiB config space: PCIe capability (port type) at 0x40, ACS at 0x100."""
    c = bytearray(4096)
    c[6] = 0x10
    c[0x34] = 0x40
    c[0x40] = 0x10
    c[0x42] = port << 4
    if acs_ctrl is not None:
        c[0x100:0x104] = struct.pack("<I", 0x0001000D)
        c[0x106:0x108] = struct.pack("<H", acs_ctrl)
    return bytes(c)


def dev(root, path, files, cfg=None):
    d = os.path.join(root, path)
    os.makedirs(d, exist_ok=True)
    for k, v in files.items():
        os.makedirs(os.path.dirname(os.path.join(d, k)), exist_ok=True)
        with open(os.path.join(d, k), "w") as f:
            f.write(v + "\n")
    if cfg is not None:
        with open(os.path.join(d, "config"), "wb") as f:
            f.write(cfg)


GPU = {"class": "0x030200", "vendor": "0x10de"}
# Healthy: the 2xH200 VM's GPUs at full width and speed, IOMMU pass-through, eth0 up.
h = os.path.join(HERE, "sysfs-healthy")
for bdf in ("0000:00:06.0", "0000:00:07.0"):
    dev(h, f"devices/pci0000:00/{bdf}", dict(GPU, numa_node="-1", current_link_width="16", max_link_width="16",
        current_link_speed="32.0 GT/s PCIe", max_link_speed="32.0 GT/s PCIe", **{"iommu_group/type": "identity"}))
dev(h, "class/net/eth0", {"operstate": "up", "type": "1"})
dev(h, "class/net/lo", {"operstate": "unknown", "type": "772"})

# Degraded: a PCIe switch whose downstream port has ACS redirect on, a GPU at x8 and 2.5 GT/s on
# NUMA node 1, the IOMMU translating, an RDMA NIC on NUMA node 0, docker0 and a down eth1.
d = os.path.join(HERE, "sysfs-degraded")
rp = "devices/pci0000:00/0000:00:01.0"
dev(d, rp, {"class": "0x060400", "vendor": "0x8086"}, config(4, 0x1D))
up = rp + "/0000:01:00.0"
dev(d, up, {"class": "0x060400", "vendor": "0x1000"}, config(5, None))
dn = up + "/0000:02:00.0"
dev(d, dn, {"class": "0x060400", "vendor": "0x1000"}, config(6, 0x1D))
dev(d, dn + "/0000:03:00.0", dict(GPU, numa_node="1", current_link_width="8", max_link_width="16",
    current_link_speed="2.5 GT/s PCIe", max_link_speed="32.0 GT/s PCIe", **{"iommu_group/type": "DMA-FQ"}))
dev(d, "devices/pci0000:00/0000:00:02.0/0000:05:00.0", {"class": "0x020700", "vendor": "0x15b3", "numa_node": "0",
    "current_link_width": "16", "max_link_width": "16"})
dev(d, "class/infiniband/mlx5_0", {"device/numa_node": "0", "ports/1/state": "4: ACTIVE"})
dev(d, "class/net/docker0", {"operstate": "up", "type": "1"})
os.makedirs(os.path.join(d, "class/net/docker0/bridge"), exist_ok=True)
with open(os.path.join(d, "class/net/docker0/bridge/.keep"), "w") as f:
    f.write("")
dev(d, "class/net/eth1", {"operstate": "down", "type": "1"})
dev(d, "class/net/ib0", {"operstate": "up", "type": "32"})
