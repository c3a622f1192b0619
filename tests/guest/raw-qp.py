#!/usr/bin/env python3
"""Raw packet QPs and flow steering (issue 17) on a roxe device, in one guest.

usage: raw-qp.py --dev DEV --ifname IF --ip ADDR --netns NS --peer-if PIF
                 --peer-ip PADDR

DEV's netdev IF (ADDR) is one end of a veth pair whose other end PIF
(PADDR) is in network namespace NS. The script plays the far host with
sockets opened in NS (bad-packets.py's `socket_in`) and checks, byte for
byte:

- out: a raw QP's SEND is the frame PIF receives, exactly; a frame shorter
  than an Ethernet header or longer than the MTU allows fails its WQE with
  IBV_WC_LOC_LEN_ERR and sends nothing;
- in: with no flow nothing lands; a flow on the destination MAC and ether
  type takes exactly the frames it names, whole; an IPv4 + UDP flow takes
  the datagram's frame while a UDP socket on the same port still gets the
  datagram (roxe copies: IBV_FLOW_ATTR_FLAGS_DONT_TRAP's behaviour); a
  destroyed flow takes nothing more;
- refusals: a flow on a UD QP, a flow that matches on a VLAN tag or IPv4
  flags (EOPNOTSUPP), a raw QP or a flow made by a process without
  CAP_NET_RAW (EPERM, the RDMA core's rule);
- counters: raw_rx_frames, raw_tx_frames and raw_rx_drop move by what was
  sent and steered;
- RSS: four receive WQs (two CQs) in an indirection table under an RSS QP
  hashing IPv4 addresses and UDP ports with a Toeplitz key; 48 datagrams
  from different sources, steered by an IPv4 + UDP flow, each land whole
  in the WQ the Toeplitz hash (computed here) picks, completing on that
  WQ's CQ with its number; a WQ moved to RESET takes nothing (its frames
  are dropped and counted), one moved to ERR flushes its receives; an
  RSS QP cannot be moved (EOPNOTSUPP), a hash function other than
  Toeplitz or an IPsec SPI field is refused; a WQ whose producer index
  user space set 2^30 past its receives drops the next frame (counted),
  moves to ERR and raises IBV_EVENT_WQ_FATAL.

Prints `ok   ...` or `FAIL ...` per check, then `raw-qp: N ok, M failed`.
"""
import argparse
import importlib.util
import os
import select
import socket
import struct
import subprocess
import sys
import time

import pyverbs.enums as e
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.flow import Flow, FlowAttr
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.pyverbs_error import PyverbsRDMAError
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.qp import QPEx, QPInitAttrEx
from pyverbs.spec import EthSpec, Ipv4ExtSpec, TcpUdpSpec
from pyverbs.wq import WQ, RwqIndTable, RwqIndTableInitAttr, RxHashConf, WQAttr, WQInitAttr
from pyverbs.wr import SGE, RecvWR, SendWR

_spec = importlib.util.spec_from_file_location(
    "bad_packets", os.path.join(os.path.dirname(os.path.abspath(__file__)), "bad-packets.py"))
bp = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bp)

ETH_P_ALL = 0x0003
# IEEE 802 local experimental ether types.
ETH_TEST, ETH_OTHER = 0x88b5, 0x88b6
UDP_PORT = 5555
DONT_TRAP = e.IBV_FLOW_ATTR_FLAGS_DONT_TRAP
SLOT = 2048


class Checks:
    def __init__(self):
        self.ok = 0
        self.failed = 0

    def __call__(self, good, what):
        print(("ok   " if good else "FAIL ") + what, flush=True)
        if good:
            self.ok += 1
        else:
            self.failed += 1
        return good


def mac_bytes(text):
    return bytes(int(x, 16) for x in text.split(":"))


def counter(dev, name):
    with open(f"/sys/class/infiniband/{dev}/ports/1/hw_counters/{name}") as f:
        return int(f.read())


def poll(cq, want, timeout=3.0):
    """Up to `want` completions within `timeout` s (and a short while
    longer, so an extra one shows), as (wr_id, status, byte_len)."""
    out = []
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        n, wcs = cq.poll(16)
        out += [(wc.wr_id, wc.status, wc.byte_len) for wc in wcs[:n]]
        if len(out) >= want:
            end = min(end, time.monotonic() + 0.3)
        time.sleep(0.01)
    return out


class Raw:
    """A raw packet QP in RTS with its CQ and a buffer of SLOT-byte slots."""

    def __init__(self, ctx, pd, slots=16):
        self.cq = CQ(ctx, 64)
        cap = QPCap(max_send_wr=16, max_recv_wr=16, max_send_sge=1, max_recv_sge=1)
        self.qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RAW_PACKET, scq=self.cq, rcq=self.cq, cap=cap))
        a = QPAttr(qp_state=e.IBV_QPS_INIT, port_num=1)
        self.qp.modify(a, e.IBV_QP_STATE | e.IBV_QP_PORT)
        self.qp.modify(QPAttr(qp_state=e.IBV_QPS_RTR), e.IBV_QP_STATE)
        self.qp.modify(QPAttr(qp_state=e.IBV_QPS_RTS), e.IBV_QP_STATE)
        self.mr = MR(pd, SLOT * slots, e.IBV_ACCESS_LOCAL_WRITE)
        self.mr.write(bytes(SLOT * slots), SLOT * slots, 0)

    def post_recvs(self, first, n):
        for i in range(first, first + n):
            self.qp.post_recv(RecvWR(wr_id=i, num_sge=1,
                                     sg=[SGE(self.mr.buf + SLOT * i, SLOT, self.mr.lkey)]))

    def send(self, frame, slot=15):
        self.mr.write(frame, len(frame), SLOT * slot)
        wr = SendWR(wr_id=1000 + slot, opcode=e.IBV_WR_SEND, num_sge=1,
                    sg=[SGE(self.mr.buf + SLOT * slot, len(frame), self.mr.lkey)])
        wr.send_flags = e.IBV_SEND_SIGNALED
        self.qp.post_send(wr)

    def slot(self, i, n):
        return self.mr.read(n, SLOT * i)


class Peer:
    """The far host: a packet socket on PIF, in NS."""

    def __init__(self, netns, ifname):
        self.sock = bp.socket_in(netns, socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        self.sock.bind((ifname, 0))
        self.sock.setblocking(False)

    def frames(self, wait=1.0, ether_types=(ETH_TEST, ETH_OTHER)):
        """The frames PIF received (of the test's ether types) within
        `wait` s."""
        out = []
        end = time.monotonic() + wait
        while time.monotonic() < end:
            if not select.select([self.sock], [], [], 0.05)[0]:
                continue
            data, addr = self.sock.recvfrom(65535)
            if addr[2] != socket.PACKET_OUTGOING and struct.unpack("!H", data[12:14])[0] in ether_types:
                out.append(data)
        return out

    def send(self, frame):
        self.sock.send(frame)


def frame(dst, src, ether_type, n, fill):
    return dst + src + struct.pack("!H", ether_type) + bytes((fill + i) & 0xff for i in range(n))


def refused(errno_want, make):
    try:
        make()
    except PyverbsRDMAError as err:
        return err.error_code == errno_want, f"errno {err.error_code}"
    return False, "made"


NOBODY = r'''
import sys, pyverbs.enums as e
from pyverbs.device import Context
from pyverbs.pd import PD
from pyverbs.cq import CQ
from pyverbs.qp import QP, QPCap, QPInitAttr
from pyverbs.pyverbs_error import PyverbsRDMAError
ctx = Context(name=sys.argv[1]); pd = PD(ctx); cq = CQ(ctx, 4)
try:
    QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RAW_PACKET, scq=cq, rcq=cq, cap=QPCap(max_send_wr=1, max_recv_wr=1)))
    print("made")
except PyverbsRDMAError as err:
    print(f"errno {err.error_code}")
'''


# The key of the published Toeplitz verification suite.
RSS_KEY = bytes.fromhex("6d5a56da255b0ec24167253d43a38fb0d0ca2bcbae7b30b477cb2da38030f20c"
                        "6a42b73bbeac01fa")
RSS_PORT = 6666


def toeplitz(key, data):
    """The Toeplitz hash of `data` under `key`, written here independently
    of the kernel's."""
    k = int.from_bytes(key, "big")
    klen = len(key) * 8
    out = 0
    for i in range(len(data) * 8):
        if data[i // 8] & (0x80 >> (i % 8)):
            out ^= (k >> (klen - 32 - i)) & 0xffffffff
    return out


def csum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack(f"!{len(b) // 2}H", b))
    while s >> 16:
        s = (s & 0xffff) + (s >> 16)
    return ~s & 0xffff


def udp_frame(dst_mac, src_mac, src_ip, dst_ip, sport, dport, payload):
    udp = struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 1, 0, 64, 17, 0,
                     socket.inet_aton(src_ip), socket.inet_aton(dst_ip))
    ip = ip[:10] + struct.pack("!H", csum(ip)) + ip[12:]
    return dst_mac + src_mac + b"\x08\x00" + ip + udp


def rss_checks(check, args, ctx, pd, peer, mine, theirs):
    """RSS QPs over receive WQs (see the module documentation)."""
    nwq, per_wq = 4, 48
    cqs = [CQ(ctx, 256) for _ in range(2)]
    wqs, mrs = [], []
    for i in range(nwq):
        wq = WQ(ctx, WQInitAttr(wq_pd=pd, wq_cq=cqs[i % 2], wq_type=e.IBV_WQT_RQ,
                                max_wr=per_wq, max_sge=1))
        wq.modify(WQAttr(attr_mask=e.IBV_WQ_ATTR_STATE, wq_state=e.IBV_WQS_RDY))
        mr = MR(pd, SLOT * per_wq, e.IBV_ACCESS_LOCAL_WRITE)
        for j in range(per_wq):
            wq.post_recv(RecvWR(wr_id=i * 1000 + j, num_sge=1,
                                sg=[SGE(mr.buf + SLOT * j, SLOT, mr.lkey)]))
        wqs.append(wq)
        mrs.append(mr)
    table = RwqIndTable(ctx, RwqIndTableInitAttr(log_ind_tbl_size=2, wqs_list=wqs))
    fields = (e.IBV_RX_HASH_SRC_IPV4 | e.IBV_RX_HASH_DST_IPV4 | e.IBV_RX_HASH_SRC_PORT_UDP
              | e.IBV_RX_HASH_DST_PORT_UDP)

    def rss_qp(function=e.IBV_RX_HASH_FUNC_TOEPLITZ, hash_fields=fields):
        conf = RxHashConf(rx_hash_function=function, rx_hash_key_len=len(RSS_KEY),
                          rx_hash_key=list(RSS_KEY), rx_hash_fields_mask=hash_fields)
        mask = e.IBV_QP_INIT_ATTR_PD | e.IBV_QP_INIT_ATTR_RX_HASH | e.IBV_QP_INIT_ATTR_IND_TABLE
        return QPEx(ctx, QPInitAttrEx(qp_type=e.IBV_QPT_RAW_PACKET, comp_mask=mask, pd=pd,
                                      hash_conf=conf, ind_table=table))

    qp = rss_qp()
    fa = FlowAttr(num_of_specs=2, flags=DONT_TRAP)
    fa.specs.append(Ipv4ExtSpec(dst_ip=args.ip))
    fa.specs.append(TcpUdpSpec(e.IBV_FLOW_SPEC_UDP, dst_port=RSS_PORT))
    flow = Flow(qp, fa)
    drops0 = counter(args.dev, "raw_rx_drop")

    def burst(first, n):
        """Sends n datagrams; returns {seq: (wq index, frame)}."""
        sent = {}
        for seq in range(first, first + n):
            src = f"198.51.100.{seq % 250 + 1}"
            sport = 1024 + seq * 7
            f = udp_frame(mine, theirs, src, args.ip, sport, RSS_PORT,
                          struct.pack("!I", seq) + bytes(range(60)))
            h = toeplitz(RSS_KEY, socket.inet_aton(src) + socket.inet_aton(args.ip)
                         + struct.pack("!HH", sport, RSS_PORT))
            sent[seq] = (h & (nwq - 1), f)
            peer.send(f)
        return sent

    def landed(want):
        out = []
        end = time.monotonic() + 4
        while time.monotonic() < end and len(out) < want:
            for c in cqs:
                n, wcs = c.poll(32)
                out += [(wc.qp_num, wc.wr_id, wc.status, wc.byte_len) for wc in wcs[:n]]
            time.sleep(0.01)
        time.sleep(0.2)
        for c in cqs:
            n, wcs = c.poll(32)
            out += [(wc.qp_num, wc.wr_id, wc.status, wc.byte_len) for wc in wcs[:n]]
        return out

    sent = burst(0, 32)
    got = landed(32)
    wqn = [w.wqn for w in wqs]
    right = 0
    for num, wr_id, status, n in got:
        i, j = wr_id // 1000, wr_id % 1000
        data = mrs[i].read(n, SLOT * j) if 0 <= i < nwq else b""
        seq = struct.unpack("!I", data[42:46])[0] if len(data) >= 46 else -1
        if (status == e.IBV_WC_SUCCESS and num == wqn[i] and seq in sent
                and sent[seq] == (i, data)):
            right += 1
    spread = sorted({v[0] for v in sent.values()})
    check(len(got) == 32 and right == 32 and len(spread) >= 3,
          f"RSS: 32 datagrams each land whole in the WQ the Toeplitz hash picks, with that WQ's "
          f"number ({right} right of {len(got)}, WQs used {spread})")

    # A WQ in RESET takes nothing; its frames are dropped and counted.
    wqs[spread[0]].modify(WQAttr(attr_mask=e.IBV_WQ_ATTR_STATE, wq_state=e.IBV_WQS_RESET))
    sent = burst(100, 32)
    to_reset = sum(1 for v in sent.values() if v[0] == spread[0])
    got = landed(32 - to_reset)
    drops = counter(args.dev, "raw_rx_drop") - drops0
    check(len(got) == 32 - to_reset and all(g[0] != wqn[spread[0]] for g in got)
          and drops == to_reset,
          f"a WQ in RESET takes none of the {to_reset} frames hashed to it, each counted in "
          f"raw_rx_drop (+{drops}); the other WQs take the rest ({len(got)})")

    # ERR flushes a WQ's receives.
    w = wqs[spread[0]]
    for j in range(2):
        w.post_recv(RecvWR(wr_id=spread[0] * 1000 + 900 + j, num_sge=1,
                           sg=[SGE(mrs[spread[0]].buf, SLOT, mrs[spread[0]].lkey)]))
    w.modify(WQAttr(attr_mask=e.IBV_WQ_ATTR_STATE, wq_state=e.IBV_WQS_ERR))
    got = landed(2)
    check(sorted(g[1] for g in got) == [spread[0] * 1000 + 900, spread[0] * 1000 + 901]
          and all(g[2] == e.IBV_WC_WR_FLUSH_ERR and g[0] == wqn[spread[0]] for g in got),
          f"a WQ moved to ERR flushes its receives with WR_FLUSH_ERR ({got})")

    # Refusals.
    good, how = refused(95, lambda: qp.modify(QPAttr(qp_state=e.IBV_QPS_INIT, port_num=1),
                                              e.IBV_QP_STATE | e.IBV_QP_PORT))
    check(good, f"an RSS QP has no state to move: EOPNOTSUPP ({how})")
    good, how = refused(95, lambda: rss_qp(function=2))
    check(good, f"an RSS QP with a hash function other than Toeplitz is refused ({how})")
    # IBV_RX_HASH_IPSEC_SPI, which Debian's pyverbs does not name.
    good, how = refused(95, lambda: rss_qp(hash_fields=fields | (1 << 8)))
    check(good, f"an RSS QP hashing on an IPsec SPI is refused ({how})")
    for o in (flow, qp, table, *wqs, *mrs, *cqs):
        o.close()
    garbage_producer(check, args, ctx, pd, peer, mine, theirs)


def uverbs_mappings():
    """The address ranges of this process's mappings of a uverbs device
    file: the rings libroxe mapped."""
    out = set()
    with open("/proc/self/maps") as f:
        for line in f:
            if "/dev/infiniband/uverbs" in line:
                lo, hi = line.split()[0].split("-")
                out.add((int(lo, 16), int(hi, 16)))
    return out


def async_event_fd():
    """The descriptor of the device context's async events (libibverbs
    opened it as an anonymous inode), or None. Only while it is the one
    such descriptor: completion channels are the same kind of inode."""
    fds = []
    for name in os.listdir("/proc/self/fd"):
        try:
            if "infinibandevent" in os.readlink(f"/proc/self/fd/{name}"):
                fds.append(int(name))
        except OSError:
            pass
    return fds[0] if len(fds) == 1 else None


def take_async_event(efd):
    """Reads one event from the context's async event descriptor and
    acknowledges it; returns its type. By hand: Debian's pyverbs reads
    events without acknowledging them, and ibv_destroy_wq waits until
    every event the kernel reported for the WQ is acknowledged (it waited
    forever after pyverbs' get_async_event). The
    kernel's record (struct ib_uverbs_async_event_desc) is the element's
    user handle (here the struct ibv_wq *), the type and 4 spare bytes;
    ibv_ack_async_event reads only the element and the type of its
    struct ibv_async_event, which has the same two first."""
    import ctypes
    element, kind = struct.unpack("=QI4x", os.read(efd, 16))
    lib = ctypes.CDLL("libibverbs.so.1")
    ev = (ctypes.c_uint64 * 2)(element, kind)
    lib.ibv_ack_async_event(ctypes.byref(ev))
    return kind


def garbage_producer(check, args, ctx, pd, peer, mine, theirs):
    """A WQ whose mapped producer index user space set to what no honest
    provider writes (2^30 past the receives it posted) meets a frame: the
    frame is dropped and counted, no receive completes, the WQ moves to
    ERR (so RDY is refused; RESET then works) and the context gets
    IBV_EVENT_WQ_FATAL for it."""
    import ctypes
    cq = CQ(ctx, 16)
    mr = MR(pd, SLOT * 4, e.IBV_ACCESS_LOCAL_WRITE)
    before = uverbs_mappings()
    wq = WQ(ctx, WQInitAttr(wq_pd=pd, wq_cq=cq, wq_type=e.IBV_WQT_RQ, max_wr=4, max_sge=1))
    rings = sorted(uverbs_mappings() - before)
    wq.modify(WQAttr(attr_mask=e.IBV_WQ_ATTR_STATE, wq_state=e.IBV_WQS_RDY))
    for j in range(4):
        wq.post_recv(RecvWR(wr_id=j, num_sge=1, sg=[SGE(mr.buf + SLOT * j, SLOT, mr.lkey)]))
    # pyverbs will not make a table of one entry: two, both this WQ.
    table = RwqIndTable(ctx, RwqIndTableInitAttr(log_ind_tbl_size=1, wqs_list=[wq, wq]))
    conf = RxHashConf(rx_hash_function=e.IBV_RX_HASH_FUNC_TOEPLITZ, rx_hash_key_len=len(RSS_KEY),
                      rx_hash_key=list(RSS_KEY),
                      rx_hash_fields_mask=e.IBV_RX_HASH_SRC_IPV4 | e.IBV_RX_HASH_DST_IPV4)
    mask = e.IBV_QP_INIT_ATTR_PD | e.IBV_QP_INIT_ATTR_RX_HASH | e.IBV_QP_INIT_ATTR_IND_TABLE
    qp = QPEx(ctx, QPInitAttrEx(qp_type=e.IBV_QPT_RAW_PACKET, comp_mask=mask, pd=pd,
                                hash_conf=conf, ind_table=table))
    fa = FlowAttr(num_of_specs=2, flags=DONT_TRAP)
    fa.specs.append(Ipv4ExtSpec(dst_ip=args.ip))
    fa.specs.append(TcpUdpSpec(e.IBV_FLOW_SPEC_UDP, dst_port=RSS_PORT + 1))
    flow = Flow(qp, fa)
    check(len(rings) == 1, f"creating a WQ mapped one ring ({[hex(a) for a, _ in rings]})")
    if len(rings) != 1:
        return
    producer = ctypes.c_uint32.from_address(rings[0][0])
    posted = producer.value
    producer.value = (posted + (1 << 30)) & 0xffffffff
    efd = async_event_fd()
    drops0 = counter(args.dev, "raw_rx_drop")
    peer.send(udp_frame(mine, theirs, "198.51.100.9", args.ip, 4000, RSS_PORT + 1, b"g" * 64))
    event = None
    if efd is not None and select.select([efd], [], [], 3.0)[0]:
        event = take_async_event(efd)
    got = poll(cq, 4, timeout=1.0)
    drops = counter(args.dev, "raw_rx_drop") - drops0
    check(posted == 4 and not got and drops == 1,
          f"a frame for a WQ whose producer index user space moved from {posted} to 2^30 past it: "
          f"dropped and counted in raw_rx_drop (+{drops}), no completion ({got})")
    check(event == e.IBV_EVENT_WQ_FATAL,
          f"the context gets IBV_EVENT_WQ_FATAL (event {event}, async fd {efd})")
    good, how = refused(22, lambda: wq.modify(WQAttr(attr_mask=e.IBV_WQ_ATTR_STATE,
                                                     wq_state=e.IBV_WQS_RDY)))
    check(good, f"the WQ is in ERR: RDY is refused with EINVAL ({how})")
    try:
        wq.modify(WQAttr(attr_mask=e.IBV_WQ_ATTR_STATE, wq_state=e.IBV_WQS_RESET))
        check(True, "and RESET is taken")
    except PyverbsRDMAError as err:
        check(False, f"and RESET is taken ({err})")
    for o in (flow, qp, table, wq, mr, cq):
        o.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dev", default="roxe0")
    ap.add_argument("--ifname", required=True)
    ap.add_argument("--ip", required=True)
    ap.add_argument("--netns", required=True)
    ap.add_argument("--peer-if", required=True)
    ap.add_argument("--peer-ip", required=True)
    args = ap.parse_args()
    check = Checks()
    mine = mac_bytes(open(f"/sys/class/net/{args.ifname}/address").read().strip())
    theirs = mac_bytes(subprocess.run(
        ["ip", "-n", args.netns, "-o", "link", "show", args.peer_if], capture_output=True,
        text=True, check=True).stdout.split("link/ether ")[1].split()[0])
    peer = Peer(args.netns, args.peer_if)
    ctx = Context(name=args.dev)
    pd = PD(ctx)
    raw = Raw(ctx, pd)
    before = {n: counter(args.dev, n) for n in ("raw_rx_frames", "raw_tx_frames", "raw_rx_drop")}

    # Out: the SEND is the frame, whole.
    out = frame(theirs, mine, ETH_TEST, 200, 7)
    raw.send(out)
    got = poll(raw.cq, 1)
    seen = peer.frames()
    check(len(got) == 1 and got[0][:2] == (1015, e.IBV_WC_SUCCESS),
          f"a raw SEND of a {len(out)}-byte frame completes ({got})")
    check(seen == [out], f"... and the far end receives exactly that frame ({len(seen)} frame(s))")

    # In: nothing without a flow; then exactly what the flow names.
    raw.post_recvs(0, 8)
    a = frame(mine, theirs, ETH_TEST, 300, 1)
    peer.send(a)
    check(poll(raw.cq, 1, timeout=1.0) == [], "with no flow, a frame to the QP's netdev lands nowhere")
    def trap_attr():
        f = FlowAttr(num_of_specs=1)
        f.specs.append(EthSpec(dst_mac=":".join(f"{b:02x}" for b in mine), ether_type=ETH_TEST))
        return f

    good, how = refused(95, lambda: Flow(raw.qp, trap_attr()))
    check(good, f"a flow without DONT_TRAP (roxe copies frames, never takes them) is refused "
          f"with EOPNOTSUPP ({how})")
    fa = FlowAttr(num_of_specs=1, flags=DONT_TRAP)
    fa.specs.append(EthSpec(dst_mac=":".join(f"{b:02x}" for b in mine), ether_type=ETH_TEST))
    flow = Flow(raw.qp, fa)
    b = frame(mine, theirs, ETH_TEST, 500, 2)
    peer.send(b)
    peer.send(frame(mine, theirs, ETH_OTHER, 100, 3))
    peer.send(frame(b"\x02\x00\x00\x00\x00\x01", theirs, ETH_TEST, 100, 4))
    got = poll(raw.cq, 1)
    check(got == [(0, e.IBV_WC_SUCCESS, len(b))] and raw.slot(0, len(b)) == b,
          f"a flow on (destination MAC, ether type) takes exactly its frame, whole ({got})")

    # IPv4 + UDP: the frame lands, and the stack still gets the datagram.
    raw2 = Raw(ctx, pd)
    raw2.post_recvs(0, 4)
    fa2 = FlowAttr(num_of_specs=2, flags=DONT_TRAP)
    fa2.specs.append(Ipv4ExtSpec(dst_ip=args.ip))
    fa2.specs.append(TcpUdpSpec(e.IBV_FLOW_SPEC_UDP, dst_port=UDP_PORT))
    flow2 = Flow(raw2.qp, fa2)
    listener = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    listener.bind((args.ip, UDP_PORT))
    listener.settimeout(3)
    sender = bp.socket_in(args.netns, socket.AF_INET, socket.SOCK_DGRAM)
    payload = b"roxe raw qp " * 10
    sender.sendto(payload, (args.ip, UDP_PORT))
    got = poll(raw2.cq, 1)
    landed = raw2.slot(0, got[0][2]) if len(got) == 1 else b""
    ok = (len(got) == 1 and got[0][1] == e.IBV_WC_SUCCESS and landed[:6] == mine
          and landed[12:14] == b"\x08\x00" and landed.endswith(payload)
          and struct.unpack("!H", landed[36:38])[0] == UDP_PORT)
    check(ok, f"an IPv4 + UDP flow takes the datagram's frame ({got})")
    try:
        check(listener.recv(2048) == payload, "... and the UDP socket on that port still gets the datagram")
    except OSError as err:
        check(False, f"... and the UDP socket on that port still gets the datagram ({err})")
    check(poll(raw.cq, 1, timeout=0.5) == [], "... and the Ethernet flow of the other QP does not take it")

    # A destroyed flow takes nothing more.
    flow.close()
    peer.send(frame(mine, theirs, ETH_TEST, 100, 5))
    check(poll(raw.cq, 1, timeout=1.0) == [], "after its flow is destroyed, the QP gets no frame")

    # Out of bounds: no frame goes, the WQE fails.
    raw3 = Raw(ctx, pd)
    raw3.send(b"\x01" * 10)
    got = poll(raw3.cq, 1)
    check(len(got) == 1 and got[0][1] == e.IBV_WC_LOC_LEN_ERR and not peer.frames(0.5),
          f"a 10-byte frame (shorter than an Ethernet header) fails with LOC_LEN_ERR, nothing sent ({got})")
    mtu = int(open(f"/sys/class/net/{args.ifname}/mtu").read())
    for what, n in (("an untagged frame 2 bytes over the MTU", mtu + 2),
                    ("a frame over the MTU plus Ethernet and VLAN headers", mtu + 5)):
        raw4 = Raw(ctx, pd)
        raw4.send(frame(theirs, mine, ETH_TEST, n, 9), slot=0)
        got = poll(raw4.cq, 1)
        check(len(got) == 1 and got[0][1] == e.IBV_WC_LOC_LEN_ERR and not peer.frames(0.5),
              f"{what} fails with LOC_LEN_ERR, nothing sent ({got})")
        raw4.qp.close()

    # Refusals.
    ud_cq = CQ(ctx, 4)
    ud = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_UD, scq=ud_cq, rcq=ud_cq,
                           cap=QPCap(max_send_wr=1, max_recv_wr=1)))
    a = QPAttr(qp_state=e.IBV_QPS_INIT, port_num=1)
    a.qkey = 0x1111
    a.pkey_index = 0
    ud.modify(a, e.IBV_QP_STATE | e.IBV_QP_PORT | e.IBV_QP_QKEY | e.IBV_QP_PKEY_INDEX)

    def on_ud():
        f = FlowAttr(num_of_specs=1, flags=DONT_TRAP)
        f.specs.append(EthSpec(dst_mac=":".join(f"{b:02x}" for b in mine)))
        Flow(ud, f)

    good, how = refused(95, on_ud)
    check(good, f"a flow on a UD QP is refused with EOPNOTSUPP ({how})")

    def vlan():
        f = FlowAttr(num_of_specs=1, flags=DONT_TRAP)
        f.specs.append(EthSpec(vlan_tag=5))
        Flow(raw.qp, f)

    good, how = refused(95, vlan)
    check(good, f"a flow on a VLAN tag is refused with EOPNOTSUPP ({how})")
    r = subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
                        "--inh-caps=-all", "--bounding-set=-all", "python3", "-c", NOBODY, args.dev],
                       capture_output=True, text=True)
    check(r.stdout.strip() == "errno 1",
          f"a process without CAP_NET_RAW cannot make a raw QP: EPERM ({r.stdout.strip()} {r.stderr.strip()[-200:]})")

    after = {n: counter(args.dev, n) for n in before}
    moved = {n: after[n] - before[n] for n in before}
    check(moved["raw_tx_frames"] == 1 and moved["raw_rx_frames"] == 2,
          f"counters: raw_tx_frames +1, raw_rx_frames +2 ({moved})")
    for o in (flow2, ud, raw3.qp, raw2.qp, raw.qp):
        o.close()
    rss_checks(check, args, ctx, pd, peer, mine, theirs)
    print(f"raw-qp: {check.ok} ok, {check.failed} failed")
    return 0 if check.failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
