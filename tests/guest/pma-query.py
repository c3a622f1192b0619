#!/usr/bin/env python3
"""Ask a port's Performance Management Agent for its counters with a MAD
through /dev/infiniband/umad*, as perfquery would.

perfquery itself cannot run on a RoCE port: libibmad opens the SMI class
too, and RoCE has no QP0 ("client_register for mgmt 1 failed", on RoCE
hardware as well). This script registers for the PerfMgt class on QP1 only
and addresses the agent by GID, over the wire to a peer or to the local
port itself.

  pma-query.py DEVICE GID_INDEX DEST_GID [--attr counters|ext|classportinfo]
               [--set-select HEX] [--class-version N] [--port-select N]

Prints the MAD status and each counter as NAME VALUE lines (data counters
in 4-octet words, as IB counts them). Exits 1 if no reply came.
"""
import argparse
import fcntl
import ipaddress
import os
import struct
import sys

HDR = struct.Struct("=IIIII4s4s2sBBBBBB16s4sH6x")  # struct ib_user_mad_hdr
MAD_LEN = 256
IOCTL_MAGIC = 0x1B


def _iowr(nr, size):
    return (3 << 30) | (size << 16) | (IOCTL_MAGIC << 8) | nr


REG_REQ = struct.Struct("=I16sBBB3sBx")  # struct ib_user_mad_reg_req (28 bytes)
REGISTER_AGENT = _iowr(1, REG_REQ.size)
ENABLE_PKEY = (IOCTL_MAGIC << 8) | 3

PERF_MGMT = 0x04
ATTRS = {"classportinfo": 0x0001, "counters": 0x0012, "ext": 0x001D}

# (name, byte offset in the attribute, width in bytes)
COUNTERS = [
    ("port_rcv_errors", 8, 2),
    ("port_xmit_discards", 14, 2),
    ("port_xmit_data", 24, 4),
    ("port_rcv_data", 28, 4),
    ("port_xmit_packets", 32, 4),
    ("port_rcv_packets", 36, 4),
]
EXT = [
    ("port_xmit_data", 8, 8),
    ("port_rcv_data", 16, 8),
    ("port_xmit_packets", 24, 8),
    ("port_rcv_packets", 32, 8),
    ("unicast_xmit_packets", 40, 8),
    ("unicast_rcv_packets", 48, 8),
    ("multicast_xmit_packets", 56, 8),
    ("multicast_rcv_packets", 64, 8),
]


def umad_dev(device):
    base = "/sys/class/infiniband_mad"
    for name in sorted(os.listdir(base)):
        if not name.startswith("umad"):
            continue
        with open(f"{base}/{name}/ibdev") as f:
            if f.read().strip() == device:
                return f"/dev/infiniband/{name}"
    sys.exit(f"no umad port for {device} (is ib_umad loaded?)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("device")
    ap.add_argument("gid_index", type=int)
    ap.add_argument("dest_gid")
    ap.add_argument("--attr", choices=ATTRS, default="ext")
    ap.add_argument("--set-select", type=lambda s: int(s, 16))
    ap.add_argument("--class-version", type=int, default=1)
    ap.add_argument("--port-select", type=int, default=1)
    a = ap.parse_args()

    fd = os.open(umad_dev(a.device), os.O_RDWR)
    fcntl.ioctl(fd, ENABLE_PKEY)
    req = bytearray(REG_REQ.pack(0, bytes(16), 1, PERF_MGMT, a.class_version, bytes(3), 0))
    fcntl.ioctl(fd, REGISTER_AGENT, req)
    agent = struct.unpack_from("=I", req)[0]

    gid = ipaddress.IPv6Address(a.dest_gid).packed
    hdr = HDR.pack(
        agent, 0, 1000, 3, 0,
        struct.pack(">I", 1), struct.pack(">I", 0x80010000), bytes(2),
        0, 0, 1, a.gid_index, 64, 0, gid, bytes(4), 0,
    )
    mad = bytearray(MAD_LEN)
    method = 0x02 if a.set_select is not None else 0x01
    struct.pack_into(">BBBBHHQHHI", mad, 0, 1, PERF_MGMT, a.class_version, method,
                     0, 0, 0x1234, ATTRS[a.attr], 0, 0)
    mad[65] = a.port_select
    if a.set_select is not None:
        struct.pack_into(">H", mad, 66, a.set_select)
    os.write(fd, hdr + bytes(mad))

    buf = os.read(fd, HDR.size + MAD_LEN)
    status = struct.unpack_from("=I", buf, 4)[0]
    if status:
        sys.exit(f"no reply: umad status {status} ({os.strerror(status)})")
    reply = buf[HDR.size:]
    method, mad_status = reply[3], struct.unpack_from(">H", reply, 4)[0]
    print(f"method 0x{method:02x}")
    print(f"status 0x{mad_status:04x}")
    data = reply[64:]
    if a.attr == "classportinfo":
        print(f"capability_mask 0x{struct.unpack_from('>H', data, 2)[0]:04x}")
    else:
        print(f"port_select {data[1]}")
        for name, at, width in COUNTERS if a.attr == "counters" else EXT:
            print(name, int.from_bytes(data[at:at + width], "big"))
    os.close(fd)


if __name__ == "__main__":
    main()
