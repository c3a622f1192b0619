#!/usr/bin/env python3
"""A hostile peer on the wire: learns live QPs by watching RoCEv2 traffic and
sends in-window packets at them.

usage: fuzz.py --if IF --ip LOCAL --peer PEER [--seconds 60] [--seed S]
               [--rate N] [--spoof ADDR] [--alt-dst ADDR] [--pcap FILE]
               [--summary FILE]
       fuzz.py --selftest

Runs on one of two hosts that carry RDMA traffic between them (LOCAL and
PEER, one Ethernet segment). A packet socket on IF sees every RoCEv2
packet (UDP port 4791) both ways. From those the script learns, for each
of PEER's QP numbers that LOCAL's QPs send to:
  - the responder's expected PSN (the PSN of the last request LOCAL sent
    it, plus the packets that request asks for; or one past the PSN PEER
    acknowledged),
  - the requester's window: PEER's QPs send their requests to LOCAL's QP
    numbers, not their own, but roxe and rxe derive the UDP source port
    from both QP numbers, so the two directions of a connection share it;
    the PSNs of PEER's requests then give the PSNs PEER waits responses
    for, and LOCAL's responses the last one answered,
  - the MSN in LOCAL's ACKs, the path MTU (the payload of First and Middle
    packets), and the R_Keys, virtual addresses and lengths in the RETHs
    and AtomicETHs that LOCAL's QPs send (those name PEER's memory).
Then for --seconds it sends PEER packets from LOCAL's address (IPv4, UDP
port 4791, the connection's source port, a right ICRC unless the kind is
bad-icrc), built with bad-packets.py's header builders: every RC opcode
(SEND First/Middle/Last/Only with and without immediate or invalidate,
RDMA WRITE First/Middle/Last/Only with and without immediate, READ request,
CmpSwap, FetchAdd, Atomic Write, FLUSH, ACK and NAK with every syndrome
class, ATOMIC ACK and READ responses), at PSNs around the live window,
with mutated payload lengths, pad counts, R_Keys, addresses and DMA
lengths (inside, at the edges of and outside the learned ranges), MSNs and
BTH flags; UC and UD opcodes at RC QPs; QP numbers next to live ones;
packets with a spoofed source address (--spoof) or sent to another
address of PEER (--alt-dst), which roxe should drop because they do not
match the QP's path; and random garbage, half of it with a right ICRC.

Every choice comes from one random.Random(--seed); what the choices act on
(QP numbers, PSNs, keys) is what the wire showed at that moment, so a run
is replayed exactly only together with the same traffic. --pcap records
every packet sent (raw IPv4, readable by tcpdump -r) for that.

Prints the seed first, then per kind how many packets it sent and how many
of those were in-window (at a QP number seen in the last 5 s, at a PSN no
more than 8 from its window), what it learnt, and `fuzz: N packets, M
in-window`. --summary FILE also gets those lines. The exit status is 0 if
it ran (it judges nothing; the kernel logs and the peer's counters do).
"""
import argparse
import collections
import itertools
import importlib.util
import os
import random
import select
import socket
import struct
import sys
import time

_spec = importlib.util.spec_from_file_location(
    "bad_packets", os.path.join(os.path.dirname(os.path.abspath(__file__)), "bad-packets.py"))
bp = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bp)

ETH_P_ALL = 0x0003
SO_ATTACH_FILTER = 26
# Our own packets carry this TTL (the ICRC masks it): the packet socket
# filter leaves them out, so the fuzzer learns only from real traffic.
OWN_TTL = 61
SNAP = 160          # bytes of each packet the filter keeps: headers only
LIVE = 5.0          # a QP seen this recently is live
NEAR = 8            # PSNs this close to the window count as in-window
PSN_MASK = 0xffffff

# RC opcodes.
SEND_FIRST, SEND_MIDDLE, SEND_LAST, SEND_LAST_IMM, SEND_ONLY, SEND_ONLY_IMM = range(6)
WRITE_FIRST, WRITE_MIDDLE, WRITE_LAST, WRITE_LAST_IMM, WRITE_ONLY, WRITE_ONLY_IMM = range(6, 12)
READ_REQUEST = 0x0c
READ_RESP_FIRST, READ_RESP_MIDDLE, READ_RESP_LAST, READ_RESP_ONLY = 0x0d, 0x0e, 0x0f, 0x10
ACKNOWLEDGE, ATOMIC_ACK, CMP_SWAP, FETCH_ADD = 0x11, 0x12, 0x13, 0x14
SEND_LAST_INV, SEND_ONLY_INV = 0x16, 0x17
FLUSH, ATOMIC_WRITE = 0x1c, 0x1d
REQUESTS = {SEND_FIRST, SEND_MIDDLE, SEND_LAST, SEND_LAST_IMM, SEND_ONLY, SEND_ONLY_IMM,
            WRITE_FIRST, WRITE_MIDDLE, WRITE_LAST, WRITE_LAST_IMM, WRITE_ONLY, WRITE_ONLY_IMM,
            READ_REQUEST, CMP_SWAP, FETCH_ADD, SEND_LAST_INV, SEND_ONLY_INV, FLUSH, ATOMIC_WRITE}
RESPONSES = {READ_RESP_FIRST, READ_RESP_MIDDLE, READ_RESP_LAST, READ_RESP_ONLY, ACKNOWLEDGE,
             ATOMIC_ACK}
WITH_RETH = {WRITE_FIRST, WRITE_ONLY, WRITE_ONLY_IMM, READ_REQUEST, ATOMIC_WRITE}
WITH_AETH = {READ_RESP_FIRST, READ_RESP_LAST, READ_RESP_ONLY, ACKNOWLEDGE, ATOMIC_ACK}
FULL_MTU = {SEND_FIRST, SEND_MIDDLE, WRITE_FIRST, WRITE_MIDDLE, READ_RESP_FIRST, READ_RESP_MIDDLE}
# UC and UD opcodes: the wrong transport for an RC QP.
OTHER_TRANSPORT = (0x20, 0x21, 0x22, 0x24, 0x26, 0x28, 0x2a, 0x2b, 0x64, 0x65)

# AETH syndromes, one list per class: ACK with a credit count (0x1f: none
# given), RNR NAK with a timer, the reserved class, NAK codes (PSN sequence
# error, invalid request, remote access, remote operational, invalid RD
# request) and reserved NAK codes, and the top bit set.
SYNDROMES = {
    "ack": [0x00, 0x01, 0x0f, 0x1e, 0x1f],
    "rnr": [0x20, 0x21, 0x2e, 0x3f],
    "reserved": [0x40, 0x4a, 0x5f],
    "nak": [0x60, 0x61, 0x62, 0x63, 0x64],
    "nak-reserved": [0x65, 0x70, 0x7f],
    "high-bit": [0x80, 0xc0, 0xff],
}
# A few addresses and lengths at the edges of everything.
EDGE_VAS = (0, 1, 8, 0x1000, (1 << 63) - 8, 1 << 63, (1 << 64) - 8, (1 << 64) - 1)
EDGE_LENS = (0, 1, 7, 8, 1024, 4096, (1 << 31) - 1, 1 << 31, (1 << 31) + 1, 0xffffffff)


def psn_diff(a, b):
    """a - b as a signed 24-bit PSN distance."""
    d = (a - b) & PSN_MASK
    return d - (1 << 24) if d & 0x800000 else d


# --- What the wire shows -------------------------------------------------


class Target:
    """One of PEER's QPs, as seen from the wire."""

    def __init__(self, qpn):
        self.qpn = qpn
        self.sport = 0xc000
        self.seen = 0.0
        self.epsn = None       # the responder's expected PSN
        self.acked = None      # the requester's last PSN answered
        self.sent = None       # the requester's next PSN (PEER's requests)
        self.msn = 0
        self.mtu = None        # the path MTU (from full First/Middle packets)
        self.peer_qpn = None   # LOCAL's QP on the other end


class Wire:
    """Learns targets from the packet socket."""

    def __init__(self, local, peer):
        self.local = socket.inet_aton(local)
        self.peer = socket.inet_aton(peer)
        self.targets = {}
        self.by_sport = {}      # sport -> PEER's QPN (LOCAL sends to it)
        self.peer_reqs = {}     # sport -> next PSN of PEER's requests on it
        self.peer_acked = {}    # sport -> last PSN PEER answered on it
        self.rkeys = collections.deque(maxlen=64)        # (va, rkey, len), PEER's memory
        self.local_rkeys = collections.deque(maxlen=16)  # LOCAL's memory (PEER's requests)
        self.mtu = 1024
        self.packets = 0

    def target(self, qpn):
        t = self.targets.get(qpn)
        if t is None:
            t = self.targets[qpn] = Target(qpn)
        return t

    def learn(self, frame, now):
        """Takes one Ethernet frame (possibly cut at SNAP bytes)."""
        if len(frame) < 14 + 20 + 8 + 12 or frame[12:14] != b"\x08\x00":
            return
        ip = frame[14:]
        ihl = (ip[0] & 0xf) * 4
        tot = struct.unpack("!H", ip[2:4])[0]
        src, dst = ip[12:16], ip[16:20]
        udp = ip[ihl:]
        if len(udp) < 8 + 12:
            return
        sport = struct.unpack("!H", udp[0:2])[0]
        roce = udp[8:]
        op = roce[0]
        if op not in bp.HEADER_LEN or op >= 0x20:
            return
        pad = (roce[1] >> 4) & 3
        qpn = struct.unpack("!I", roce[4:8])[0] & 0xffffff
        psn = struct.unpack("!I", roce[8:12])[0] & PSN_MASK
        plen = tot - ihl - 8 - bp.HEADER_LEN[op] - pad - bp.ICRC_LEN
        ext = roce[12:]
        self.packets += 1
        if src == self.local and dst == self.peer:
            t = self.target(qpn)
            t.seen = now
            t.sport = sport
            self.by_sport[sport] = qpn
            if t.sent is None and sport in self.peer_reqs:
                t.sent = self.peer_reqs[sport]
            if op in REQUESTS:
                n = 1
                if op in WITH_RETH and len(ext) >= 16:
                    va, rkey, dlen = struct.unpack("!QII", ext[:16])
                    self.rkeys.append((va, rkey, dlen))
                    if op == READ_REQUEST:
                        n = max(1, -(-dlen // (t.mtu or self.mtu)))
                elif op in (CMP_SWAP, FETCH_ADD) and len(ext) >= 12:
                    va, rkey = struct.unpack("!QI", ext[:12])
                    self.rkeys.append((va, rkey, 8))
                elif op == FLUSH and len(ext) >= 20:
                    self.rkeys.append(struct.unpack("!QII", ext[4:20]))
                t.epsn = (psn + n) & PSN_MASK
            else:
                if op in WITH_AETH and len(ext) >= 4:
                    t.msn = struct.unpack("!I", ext[:4])[0] & 0xffffff
                t.acked = psn
                self.peer_acked[sport] = psn
            if op in FULL_MTU and 256 <= plen <= 4096:
                t.mtu = self.mtu = plen
        elif src == self.peer and dst == self.local:
            qpn_peer = self.by_sport.get(sport)
            t = self.targets.get(qpn_peer) if qpn_peer is not None else None
            if t is not None:
                t.peer_qpn = qpn
            if op in REQUESTS:
                n = 1
                if op in WITH_RETH and len(ext) >= 16:
                    va, rkey, dlen = struct.unpack("!QII", ext[:16])
                    self.local_rkeys.append((va, rkey, dlen))
                    if op == READ_REQUEST:
                        n = max(1, -(-dlen // ((t and t.mtu) or self.mtu)))
                if op in FULL_MTU and 256 <= plen <= 4096 and t is not None:
                    t.mtu = plen
                nxt = (psn + n) & PSN_MASK
                self.peer_reqs[sport] = nxt
                if t is not None:
                    t.sent = nxt
                    if t.acked is None:
                        t.acked = (psn - 1) & PSN_MASK
            elif op == ACKNOWLEDGE and t is not None and len(ext) >= 4 and ext[0] < 0x20:
                # PEER's responder took everything up to this PSN.
                t.epsn = (psn + 1) & PSN_MASK

    def live(self, now):
        return [t for t in self.targets.values() if now - t.seen <= LIVE]


# --- Packets -------------------------------------------------------------


def bth(opcode, qpn, psn, pad=0, se=0, mig=0, ackreq=0, tver=0, pkey=0xffff, byte4=0):
    """A BTH with every flag settable (bad-packets.py's bth() leaves SE,
    MigReq and AckReq clear)."""
    return struct.pack("!BBHII", opcode, (se & 1) << 7 | (mig & 1) << 6 | (pad & 3) << 4 | (tver & 0xf),
                       pkey, (byte4 & 0xff) << 24 | (qpn & 0xffffff),
                       (ackreq & 1) << 31 | (psn & PSN_MASK))


class Fuzzer:
    """Chooses and builds the packets. Every choice is self.rng's."""

    KINDS = [
        # (kind, weight)
        ("send", 14), ("write", 14), ("read", 8), ("atomic", 6), ("atomic-write", 3),
        ("flush", 3), ("ack", 12), ("read-resp", 10), ("atomic-ack", 4),
        ("wrong-transport", 3), ("near-qpn", 3), ("bad-icrc", 3), ("spoof-src", 4),
        ("alt-dst", 2), ("garbage", 8),
    ]

    def __init__(self, rng, wire, local, spoof, alt_dst):
        self.rng = rng
        self.wire = wire
        self.local = socket.inet_aton(local)
        self.peer = wire.peer
        self.spoof = socket.inet_aton(spoof) if spoof else None
        self.alt_dst = socket.inet_aton(alt_dst) if alt_dst else None
        self.ident = rng.randrange(1, 0xffff)
        self.kinds = [k for k, _ in self.KINDS]
        self.cum_weights = list(itertools.accumulate(w for _, w in self.KINDS))
        self.live = self.known = []
        # Payload bytes come from one random block.
        self.block = rng.randbytes(8192)
        self.sent = collections.Counter()
        self.in_window = collections.Counter()
        self.opcodes = collections.Counter()
        self.syndromes = collections.Counter()
        self.no_target = 0

    # -- choosing
    def round(self, now):
        """Called once per burst: the live and known targets, in QPN order
        (so the choices among them depend only on the seed and the wire)."""
        self.live = sorted(self.wire.live(now), key=lambda t: t.qpn)
        self.known = sorted(self.wire.targets.values(), key=lambda t: t.qpn)

    def pick_target(self):
        if self.live and self.rng.random() < 0.9:
            return self.rng.choice(self.live), True
        if self.known:
            return self.rng.choice(self.known), False
        return None, False

    def psn_near(self, base):
        """(PSN, in-window?) around `base`: mostly at it or just behind or
        ahead, sometimes far."""
        r = self.rng.random()
        if r < 0.45:
            off = 0
        elif r < 0.70:
            off = -self.rng.randint(1, NEAR)
        elif r < 0.90:
            off = self.rng.randint(1, NEAR)
        elif r < 0.95:
            off = self.rng.choice((-1, 1)) * self.rng.randint(NEAR + 1, 1 << 22)
        else:
            psn = self.rng.getrandbits(24)
            return psn, abs(psn_diff(psn, base)) <= NEAR
        return (base + off) & PSN_MASK, abs(off) <= NEAR

    def req_psn(self, t):
        if t.epsn is None:
            return self.rng.getrandbits(24), False
        return self.psn_near(t.epsn)

    def resp_psn(self, t):
        """A PSN in (or near) the requester's window: the PSNs it sent and
        waits answers for."""
        lo = t.acked if t.acked is not None else None
        hi = t.sent
        if lo is None and hi is None:
            return self.rng.getrandbits(24), False
        if lo is not None and hi is not None and 0 < psn_diff(hi, lo) <= 4096 and self.rng.random() < 0.6:
            psn = (lo + self.rng.randint(1, psn_diff(hi, lo))) & PSN_MASK
            return psn, True
        return self.psn_near((lo + 1) & PSN_MASK if lo is not None else hi)

    def key(self):
        """(va, rkey, dma_len): a learned RETH of PEER's memory, mutated
        (or not) in any of its fields."""
        rng, keys = self.rng, self.wire.rkeys
        if keys and rng.random() < 0.85:
            va, rkey, dlen = rng.choice(keys)
        else:
            va, rkey, dlen = rng.choice(EDGE_VAS), rng.getrandbits(32), rng.choice(EDGE_LENS)
        r = rng.random()
        if r < 0.35:
            pass                                      # as learned
        elif r < 0.50:
            off = rng.randrange(max(1, dlen))         # inside the range
            va, dlen = va + off, rng.randint(0, max(0, dlen - off))
        elif r < 0.60:
            va = va + dlen - rng.randint(0, 16)       # across the end
            dlen = rng.randint(1, 64)
        elif r < 0.65:
            va = va - rng.randint(1, 4096)            # before the start
        elif r < 0.72:
            rkey ^= 1 << rng.randrange(32)            # another key, one bit off
        elif r < 0.77:
            rkey = (rkey & ~0xff) | rng.getrandbits(8)  # same index, other key byte
        elif r < 0.82:
            dlen = rng.choice(EDGE_LENS)
        elif r < 0.87:
            va = rng.choice(EDGE_VAS)
        elif r < 0.92 and self.wire.local_rkeys:
            va, rkey, dlen = rng.choice(self.wire.local_rkeys)  # LOCAL's key, not PEER's
        else:
            va, rkey, dlen = rng.getrandbits(64), rng.getrandbits(32), rng.getrandbits(32)
        return va & ((1 << 64) - 1), rkey & 0xffffffff, dlen & 0xffffffff

    def payload_len(self, op, t):
        """A payload size: mostly what the opcode's place in a message
        allows at t's path MTU, sometimes not."""
        rng, mtu = self.rng, (t.mtu if t is not None and t.mtu else self.wire.mtu)
        r = rng.random()
        if op in FULL_MTU:
            if r < 0.6:
                return mtu
        elif r < 0.6:
            return rng.choice((1, 4, 7, 8, 64, mtu // 2, mtu - 1, mtu))
        return rng.choice((0, 1, 3, mtu - 4, mtu + 1, mtu + 4, rng.randint(0, 1400)))

    def payload(self, n):
        off = self.rng.randrange(len(self.block) - n)
        return self.block[off:off + n]

    # -- building
    def packet(self, op, t, psn, ext=b"", n=None, flags=True):
        """The RoCE part: BTH, `ext`, a payload of `n` bytes (or none) and
        its pad (sometimes a wrong pad count, the bytes still aligned)."""
        rng = self.rng
        body = b"" if n is None else self.payload(n)
        pad = -len(body) % 4
        body += bytes(pad)
        if rng.random() < 0.1:
            pad = rng.randrange(4)
        se, mig, ackreq = (rng.getrandbits(1), rng.getrandbits(1), rng.getrandbits(1)) if flags else (0, 0, 0)
        self.opcodes[op] += 1
        return bth(op, t.qpn if t is not None else rng.getrandbits(24), psn, pad=pad, se=se,
                   mig=mig, ackreq=ackreq) + ext + body

    def make(self, roce, sport, src=None, dst=None, icrc_xor=0):
        self.ident = self.ident % 0xffff + 1
        return bp.build(src or self.local, dst or self.peer, self.ident, sport, roce,
                        icrc_xor=icrc_xor, ttl=OWN_TTL)

    def request(self, kind, t):
        """A request packet of `kind` at target t: (roce, in-window?)."""
        rng = self.rng
        psn, inw = self.req_psn(t)
        if kind == "send":
            op = rng.choice((SEND_FIRST, SEND_MIDDLE, SEND_LAST, SEND_LAST_IMM, SEND_ONLY,
                             SEND_ONLY_IMM, SEND_LAST_INV, SEND_ONLY_INV))
            ext = b""
            if op in (SEND_LAST_IMM, SEND_ONLY_IMM):
                ext = struct.pack("!I", rng.getrandbits(32))
            elif op in (SEND_LAST_INV, SEND_ONLY_INV):
                ext = struct.pack("!I", self.key()[1])
            return self.packet(op, t, psn, ext, self.payload_len(op, t)), inw
        if kind == "write":
            op = rng.choice((WRITE_FIRST, WRITE_MIDDLE, WRITE_LAST, WRITE_LAST_IMM, WRITE_ONLY,
                             WRITE_ONLY_IMM))
            ext = b""
            if op in (WRITE_FIRST, WRITE_ONLY, WRITE_ONLY_IMM):
                ext = bp.reth(*self.key())
            if op in (WRITE_LAST_IMM, WRITE_ONLY_IMM):
                ext += struct.pack("!I", rng.getrandbits(32))
            return self.packet(op, t, psn, ext, self.payload_len(op, t)), inw
        if kind == "read":
            return self.packet(READ_REQUEST, t, psn, bp.reth(*self.key())), inw
        if kind == "atomic":
            va, rkey, _ = self.key()
            if rng.random() < 0.7:
                va &= ~7
            ext = struct.pack("!QIQQ", va, rkey, rng.getrandbits(64), rng.getrandbits(64))
            return self.packet(rng.choice((CMP_SWAP, FETCH_ADD)), t, psn, ext), inw
        if kind == "atomic-write":
            va, rkey, dlen = self.key()
            if rng.random() < 0.6:
                va, dlen = va & ~7, 8
            n = 8 if rng.random() < 0.8 else rng.choice((0, 4, 12, 16))
            return self.packet(ATOMIC_WRITE, t, psn, bp.reth(va, rkey, dlen), n), inw
        if kind == "flush":
            feth = struct.pack("!I", rng.getrandbits(2) << 4 | rng.choice((0, 1, 2, 3, 15)))
            return self.packet(FLUSH, t, psn, feth + bp.reth(*self.key())), inw
        raise ValueError(kind)

    def response(self, kind, t):
        rng = self.rng
        psn, inw = self.resp_psn(t)
        msn = (t.msn + rng.choice((0, 0, 0, 1, -1, 2, 1 << 23))) & 0xffffff if rng.random() < 0.9 \
            else rng.getrandbits(24)
        if kind == "ack":
            cls = rng.choice(sorted(SYNDROMES))
            syn = rng.choice(SYNDROMES[cls])
            self.syndromes[cls] += 1
            return self.packet(ACKNOWLEDGE, t, psn, bp.aeth(syn, msn), flags=False), inw
        if kind == "read-resp":
            op = rng.choice((READ_RESP_FIRST, READ_RESP_MIDDLE, READ_RESP_LAST, READ_RESP_ONLY))
            ext = bp.aeth(0 if rng.random() < 0.9 else rng.getrandbits(8), msn) if op != READ_RESP_MIDDLE \
                else b""
            return self.packet(op, t, psn, ext, self.payload_len(op, t), flags=False), inw
        if kind == "atomic-ack":
            ext = bp.aeth(0, msn) + struct.pack("!Q", rng.getrandbits(64))
            return self.packet(ATOMIC_ACK, t, psn, ext, flags=False), inw
        raise ValueError(kind)

    def next(self):
        """One packet: (kind, whole IPv4 packet, in-window?, destination
        or None). Call round() first."""
        rng = self.rng
        kind = rng.choices(self.kinds, cum_weights=self.cum_weights)[0]
        t, live = self.pick_target()
        if t is None and kind not in ("garbage",):
            self.no_target += 1
            kind = "garbage"
        sport = t.sport if t is not None else 0xc000 | rng.getrandbits(14)
        src = dst = None
        icrc_xor = 0
        inw = False
        if kind in ("send", "write", "read", "atomic", "atomic-write", "flush"):
            roce, inw = self.request(kind, t)
        elif kind in ("ack", "read-resp", "atomic-ack"):
            roce, inw = self.response(kind, t)
        elif kind in ("bad-icrc", "spoof-src", "alt-dst"):
            # An otherwise good-looking in-window packet: only its ICRC, or
            # its source or destination address, is wrong.
            inner = rng.choice(("send", "write", "read", "atomic", "ack", "read-resp"))
            roce, inw = (self.request if inner in ("send", "write", "read", "atomic")
                         else self.response)(inner, t)
            if kind == "bad-icrc":
                icrc_xor = 1 << rng.randrange(32)
            elif kind == "spoof-src":
                src = self.spoof or bytes([192, 0, 2, 77])
            else:
                dst = self.alt_dst or self.peer
        elif kind == "wrong-transport":
            op = rng.choice(OTHER_TRANSPORT)
            psn, inw = self.req_psn(t)
            ext = b""
            if op in (0x26, 0x2a, 0x2b):
                ext = bp.reth(*self.key())
            if op in (0x2b,):
                ext += struct.pack("!I", rng.getrandbits(32))
            if op in (0x64, 0x65):
                ext = struct.pack("!II", rng.choice((0x80010000, rng.getrandbits(32))), rng.getrandbits(24))
                if op == 0x65:
                    ext += struct.pack("!I", rng.getrandbits(32))
            roce = self.packet(op, t, psn, ext, self.payload_len(op, t))
        elif kind == "near-qpn":
            # A QP number next to a live one (or the GSI QP): none of the
            # learned state applies to it.
            near = rng.choice((1, t.qpn + rng.randint(1, 4), t.qpn - rng.randint(1, 4),
                               t.qpn ^ (1 << rng.randrange(24))))
            fake = Target(near & 0xffffff)
            fake.epsn = t.epsn
            roce, inw = self.request(rng.choice(("send", "write", "read")), fake)
            inw = False
        else:
            # Garbage: random bytes after a BTH-like start; half of it with
            # a right ICRC, so it gets past the ICRC check if it parses.
            n = rng.randint(0, 1400)
            roce = bytearray(rng.randbytes(n))
            if n >= 12 and rng.random() < 0.7:
                roce[0] = rng.choice(sorted(bp.HEADER_LEN))
                roce[1] &= 0xf0
                if t is not None and rng.random() < 0.7:
                    roce[5:8] = struct.pack("!I", t.qpn)[1:]
                if t is not None and t.epsn is not None and rng.random() < 0.5:
                    roce[9:12] = struct.pack("!I", t.epsn)[1:]
            roce = bytes(roce)
            if rng.random() < 0.5:
                icrc_xor = None
                roce += rng.randbytes(4)
        pkt = self.make(roce, sport, src, dst, icrc_xor)
        inw = inw and live
        self.sent[kind] += 1
        if inw:
            self.in_window[kind] += 1
        return kind, pkt, inw, dst


# --- Running -------------------------------------------------------------


def packet_filter():
    """Classic BPF: IPv4, UDP, not a fragment, TTL not OWN_TTL, destination
    port 4791; keep SNAP bytes."""
    ins = [
        (0x28, 0, 0, 12),                 # ldh [12]
        (0x15, 0, 10, 0x0800),            # jeq IPv4
        (0x30, 0, 0, 23),                 # ldb [23]
        (0x15, 0, 8, 17),                 # jeq UDP
        (0x30, 0, 0, 22),                 # ldb [22]
        (0x15, 6, 0, OWN_TTL),            # jeq OWN_TTL -> drop
        (0x28, 0, 0, 20),                 # ldh [20]
        (0x45, 4, 0, 0x1fff),             # jset fragment offset -> drop
        (0xb1, 0, 0, 14),                 # ldxb 4*([14]&0xf)
        (0x48, 0, 0, 16),                 # ldh [x+16]
        (0x15, 0, 1, bp.ROCE_PORT),       # jeq 4791
        (0x06, 0, 0, SNAP),               # ret SNAP
        (0x06, 0, 0, 0),                  # ret 0
    ]
    import ctypes
    prog = b"".join(struct.pack("HBBI", *i) for i in ins)
    buf = ctypes.create_string_buffer(prog)
    fprog = struct.pack("HL", len(ins), ctypes.addressof(buf))
    return fprog, buf


class Pcap:
    def __init__(self, path, limit):
        self.f = open(path, "wb") if path else None
        self.limit = limit
        self.n = 0
        if self.f:
            # LINKTYPE_RAW (101): each record is an IP packet.
            self.f.write(struct.pack("<IHHiIII", 0xa1b2c3d4, 2, 4, 0, 0, 65535, 101))

    def write(self, pkt, now):
        if self.f and self.n < self.limit:
            self.n += 1
            s = int(now)
            self.f.write(struct.pack("<IIII", s, int((now - s) * 1e6), len(pkt), len(pkt)) + pkt)

    def close(self):
        if self.f:
            self.f.close()


def report(args, fz, wire, elapsed, out):
    lines = [f"fuzz: seed {args.seed}, {elapsed:.1f} s, target {args.peer} from {args.ip}"]
    total = sum(fz.sent.values())
    inw = sum(fz.in_window.values())
    for kind in fz.kinds:
        lines.append(f"  {kind:16} {fz.sent[kind]:7} sent, {fz.in_window[kind]:7} in-window")
    lines.append("  opcodes: " + " ".join(f"{op:#04x}:{n}" for op, n in sorted(fz.opcodes.items())))
    lines.append("  ACK syndrome classes: " + " ".join(f"{c}:{n}" for c, n in sorted(fz.syndromes.items())))
    paired = sum(1 for t in wire.targets.values() if t.peer_qpn is not None)
    lines.append(f"  learnt: {wire.packets} RoCE packets seen, {len(wire.targets)} QPs of {args.peer} "
                 f"({paired} paired with {args.ip}'s), {len(wire.rkeys)} recent R_Keys, path MTU {wire.mtu}; "
                 f"{fz.no_target} packets had no target yet (sent as garbage)")
    lines.append(f"fuzz: {total} packets, {inw} in-window")
    text = "\n".join(lines)
    print(text, flush=True)
    if out:
        with open(out, "w") as f:
            f.write(text + "\n")


def run(args):
    rng = random.Random(args.seed)
    print(f"fuzz: seed {args.seed} (replay: --seed {args.seed})", flush=True)
    wire = Wire(args.ip, args.peer)
    fz = Fuzzer(rng, wire, args.ip, args.spoof, args.alt_dst)
    rx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    fprog, _keep = packet_filter()
    rx.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER, fprog)
    rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 18)
    rx.bind((args.ifname, 0))
    rx.setblocking(False)
    tx = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    tx.setsockopt(socket.IPPROTO_IP, socket.IP_HDRINCL, 1)
    pcap = Pcap(args.pcap, args.pcap_max)
    # Listen until the traffic shows a QP (at most --warmup seconds): the
    # --seconds of fuzzing are then all aimed at live QPs.
    start = time.monotonic()
    while time.monotonic() < start + args.warmup and not wire.live(time.monotonic()):
        select.select([rx], [], [], 0.1)
        while True:
            try:
                frame = rx.recv(SNAP)
            except BlockingIOError:
                break
            wire.learn(frame, time.monotonic())
    print(f"fuzz: first live QP after {time.monotonic() - start:.1f} s" if wire.live(time.monotonic())
          else f"fuzz: no live QP after {args.warmup} s; fuzzing anyway", flush=True)
    start = time.monotonic()
    cpu0 = time.process_time()
    end = start + args.seconds
    tick = 0.01
    budget = 0.0
    last = start
    errors = collections.Counter()
    next_note = start + 10
    while True:
        now = time.monotonic()
        if now >= end:
            break
        # Learn from everything that arrived since the last round.
        while True:
            try:
                frame = rx.recv(SNAP)
            except BlockingIOError:
                break
            wire.learn(frame, now)
        budget = min(budget + (now - last) * args.rate, args.rate * 0.25)
        last = now
        wall = time.time()
        if budget >= 1:
            fz.round(now)
        while budget >= 1:
            budget -= 1
            kind, pkt, _, dst = fz.next()
            try:
                tx.sendto(pkt, (socket.inet_ntoa(dst or fz.peer), 0))
            except OSError as x:
                errors[x.strerror] += 1
            pcap.write(pkt, wall)
        if now >= next_note:
            next_note += 10
            print(f"fuzz: {now - start:.0f} s: {sum(fz.sent.values())} sent, "
                  f"{sum(fz.in_window.values())} in-window, {len(wire.live(now))} live QPs, "
                  f"{wire.packets} RoCE packets seen, CPU {time.process_time() - cpu0:.1f} s", flush=True)
        select.select([rx], [], [], tick)
    pcap.close()
    if errors:
        print("fuzz: send errors: " + ", ".join(f"{k} x{v}" for k, v in errors.items()))
    report(args, fz, wire, time.monotonic() - start, args.summary)
    return 0


# --- Self-test -----------------------------------------------------------


def selftest():
    """The learning and the packets, on synthetic traffic; no root."""
    fails = 0

    def check(good, what):
        nonlocal fails
        print(("ok   " if good else "FAIL ") + what)
        fails += not good

    local, peer = "192.0.2.2", "192.0.2.1"
    wire = Wire(local, peer)
    mk = bp.Packets(local)
    eth = b"\0" * 12 + b"\x08\x00"

    def frame(src, dst, roce, sport):
        return eth + bp.build(socket.inet_aton(src), socket.inet_aton(dst), 7, sport, roce)

    # LOCAL writes 2 KiB to QP 0x11 of PEER at PSN 100, 101; PEER ACKs.
    reth = bp.reth(0x7f0000001000, 0x1234, 2048)
    wire.learn(frame(local, peer, bth(WRITE_FIRST, 0x11, 100) + reth + bytes(1024), 0xc123), 1.0)
    wire.learn(frame(local, peer, bth(WRITE_LAST, 0x11, 101) + bytes(1024), 0xc123), 1.0)
    wire.learn(frame(peer, local, bth(ACKNOWLEDGE, 0x22, 101) + bp.aeth(0, 5), 0xc123), 1.0)
    # PEER's QP reads from LOCAL's 0x22: READ at PSN 500 for 3 KiB.
    wire.learn(frame(peer, local, bth(READ_REQUEST, 0x22, 500) + bp.reth(0x5000, 0x99, 3072), 0xc123), 1.1)
    wire.learn(frame(local, peer, bth(READ_RESP_FIRST, 0x11, 500) + bp.aeth(0, 9) + bytes(1024), 0xc123), 1.1)
    t = wire.targets.get(0x11)
    check(t is not None and t.epsn == 102, f"responder ePSN learnt from a write: {t and t.epsn}")
    check(wire.mtu == 1024, f"path MTU from a First: {wire.mtu}")
    check((0x7f0000001000, 0x1234, 2048) in wire.rkeys, "R_Key, VA and length from the RETH")
    check(t.peer_qpn == 0x22 and t.sent == 503 and t.acked == 500 and t.msn == 9,
          f"requester window paired by source port: peer QP {t.peer_qpn}, sent {t.sent}, "
          f"acked {t.acked}, MSN {t.msn}")
    fz = Fuzzer(random.Random(5), wire, local, "192.0.2.77", "192.0.2.101")
    fz.round(1.5)
    pkts = [fz.next() for _ in range(3000)]
    check(set(fz.sent) == set(fz.kinds), f"every kind is sent: {sorted(set(fz.kinds) - set(fz.sent))} missing")
    need = REQUESTS | RESPONSES
    check(need <= set(fz.opcodes), f"every RC opcode is sent: {sorted(need - set(fz.opcodes))} missing")
    check(set(fz.syndromes) == set(SYNDROMES), "every syndrome class is sent")
    inw = sum(fz.in_window.values())
    check(inw > len(pkts) // 3, f"{inw} of {len(pkts)} packets in-window")
    # The packets an in-window request kind produces parse and carry a
    # right ICRC (unless the kind breaks it).
    parsed = collections.Counter()
    for kind, pkt, _, _ in pkts:
        if kind in ("send", "write", "read", "atomic", "ack", "read-resp", "atomic-ack", "spoof-src"):
            parsed[bp.predict(pkt)] += 1
        if kind == "spoof-src":
            assert pkt[12:16] == socket.inet_aton("192.0.2.77")
    check(parsed["rx_drop_unknown_qp"] > 0.8 * sum(parsed.values()),
          f"good-looking kinds pass parse() and the ICRC: {dict(parsed)}")
    check(all(len(p) <= 1500 for _, p, _, _ in pkts), "no packet is longer than 1500 bytes")
    again = Fuzzer(random.Random(5), wire, local, "192.0.2.77", "192.0.2.101")
    again.round(1.5)
    check([again.next()[1] for _ in range(3000)] == [p for _, p, _, _ in pkts],
          "the same seed and wire give the same packets")
    del mk
    print(f"selftest: {fails} failed")
    return fails


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--if", dest="ifname", help="the interface to watch")
    ap.add_argument("--ip", help="this host's address (packets go from it)")
    ap.add_argument("--peer", help="the target host's address")
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--warmup", type=float, default=30,
                    help="seconds to wait for a live QP before the fuzzing starts")
    ap.add_argument("--seed", type=int, default=None, help="default: from the clock")
    ap.add_argument("--rate", type=float, default=800, help="packets per second")
    ap.add_argument("--spoof", default="192.0.2.77", help="the source address of spoof-src packets")
    ap.add_argument("--alt-dst", default=None, help="another address of the peer, for alt-dst")
    ap.add_argument("--pcap", help="write every packet sent to this file")
    ap.add_argument("--pcap-max", type=int, default=200000)
    ap.add_argument("--summary", help="also write the summary to this file")
    ap.add_argument("--selftest", action="store_true")
    args = ap.parse_args()
    if args.selftest:
        return 1 if selftest() else 0
    if not (args.ifname and args.ip and args.peer):
        ap.error("--if, --ip and --peer are required (or --selftest)")
    if args.seed is None:
        args.seed = int(time.time() * 1000) % 1000000007
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
