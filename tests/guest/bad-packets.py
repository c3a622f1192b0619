#!/usr/bin/env python3
"""Send hostile RoCEv2 packets to a roxe device and check how it counts them.

usage: bad-packets.py --ip ADDR --from PEER --netns NS [--dev DEV] [--port N]
                      [--count N] [--garbage N] [--seed S]
       bad-packets.py --selftest

Builds whole IPv4 + UDP + RoCE packets on a raw socket (IP_HDRINCL), so every
header byte is the script's, and sends them from PEER to ADDR, UDP port 4791.
ADDR must be the address of the netdev under DEV, and the raw socket is
opened in network namespace NS, on the far side of the wire (a veth) from
that netdev, where PEER is an address: roxe takes nothing that arrives on
`lo`, so packets to a local address sent from this host never reach it.
Each kind of bad packet must be dropped and counted
under its own reason in /sys/class/infiniband/DEV/ports/N/hw_counters: the
script reads every counter before and after each kind, and the named counter
must grow by exactly the number sent while no other counter moves (so none
is delivered, and none is counted twice).

Kinds (each --count times, default 10), in the order rx.rs and
rust/proto/src/headers.rs's parse() check them:
  bad-icrc            RC SEND Only to QP 0x100, one ICRC bit flipped
                      -> rx_drop_icrc
  unknown-qp          RC SEND Only with a right ICRC to QP 0xabcde, every
                      other one with TOS, TTL and BTH byte 4 changed (the ICRC
                      masks them) -> rx_drop_unknown_qp
  unknown-opcode      reserved, RD, native IB CNP and vendor opcodes
                      -> rx_drop_parse_unknown_opcode
  cnp-unknown-qp      a RoCEv2 CNP (opcode 0x81) to QP 0xabcde
                      -> rx_drop_unknown_qp
  cnp-long            a CNP with 4 to 16 bytes too many
                      -> rx_drop_parse_unexpected_payload
  too-short           UDP payloads of 5, 0, 1 and 11 bytes (less than a BTH)
                      -> rx_drop_parse_too_short
  bad-version         RC SEND Only with BTH TVer 1 to 15
                      -> rx_drop_parse_bad_version
  truncated           RC RDMA WRITE Only that ends inside its RETH
                      -> rx_drop_parse_truncated
  unexpected-payload  RC ACKNOWLEDGE with 4 payload bytes
                      -> rx_drop_parse_unexpected_payload
  misaligned          RC SEND Only with 5 payload bytes and pad count 0
                      -> rx_drop_parse_misaligned
  ip-options          an IPv4 header with 4 bytes of NOP options -> rx_drop_ip
  garbage             --garbage (default 200) random UDP payloads of 0 to
                      1500 bytes from --seed; every other one starts with a
                      known opcode and TVer 0, so the parser gets past its
                      first checks. The rx_drop_* counters together must grow
                      by exactly that many, and each by what this script's
                      model of parse() predicts.

Prints one line per kind, `ok   bad-icrc: rx_drop_icrc +10` or `FAIL ...`,
then `bad-packets: N ok, M failed`; the exit status is 0 only if every kind
passed. It checks its ICRC code against the ConnectX-4 and scapy vectors of
rust/proto/src/icrc.rs before it sends anything. --selftest checks the ICRC,
the packets and the model of the parser without sending (no root needed).
"""
import argparse
import collections
import ctypes
import os
import random
import socket
import struct
import sys
import time
import zlib

ROCE_PORT = 4791
ICRC_LEN = 4
IP_DF = 0x4000

# Opcodes (IBTA vol 1, chapter 9) as rust/proto/src/opcode.rs knows them:
# BTH plus extended headers, in bytes. Every other opcode is unknown.
HEADER_LEN = {
    0x00: 12, 0x01: 12, 0x02: 12, 0x03: 16, 0x04: 12, 0x05: 16,
    0x06: 28, 0x07: 12, 0x08: 12, 0x09: 16, 0x0a: 28, 0x0b: 32,
    0x0c: 28, 0x0d: 16, 0x0e: 12, 0x0f: 16, 0x10: 16, 0x11: 16,
    0x12: 24, 0x13: 40, 0x14: 40, 0x16: 16, 0x17: 16, 0x1c: 32,
    0x1d: 28,
    0x20: 12, 0x21: 12, 0x22: 12, 0x23: 16, 0x24: 12, 0x25: 16,
    0x26: 28, 0x27: 12, 0x28: 12, 0x29: 16, 0x2a: 28, 0x2b: 32,
    0x64: 20, 0x65: 24,
}
# XRC (0xa0 on): RC's operations, each request with a 4-byte XRCETH after
# the BTH; responses as RC's. No XRC FLUSH or ATOMIC WRITE.
HEADER_LEN.update({
    0xa0 + op: n + (0 if 0x0d <= op <= 0x12 else 4)
    for op, n in HEADER_LEN.items() if op <= 0x17
})
# Opcodes whose packets end right after their headers: RDMA READ request,
# ACKNOWLEDGE, ATOMIC ACKNOWLEDGE, CmpSwap, FetchAdd, FLUSH.
NO_PAYLOAD = {0x0c, 0x11, 0x12, 0x13, 0x14, 0x1c, 0xac, 0xb1, 0xb2, 0xb3, 0xb4}

RC_SEND_ONLY = 0x04
RC_RDMA_WRITE_ONLY = 0x0a
RC_ACKNOWLEDGE = 0x11
# Opcodes roxe does not implement: reserved RC, UC and UD values, RD,
# native IB's CNP (RoCEv2's is 0x81) and the vendor range.
UNKNOWN_OPCODES = (0x1e, 0xff, 0x15, 0x40, 0x80, 0xe0, 0x1f, 0x60, 0x2c, 0x18)
# RoCEv2's CNP: BTH, 16 reserved bytes, ICRC.
CNP = 0x81
CNP_LEN = 12 + 16 + 4
# No QP has this number: roxe numbers QPs from 16 up.
MISSING_QPN = 0xabcde
# The UDP payload lengths of too-short packets (a BTH is 12 bytes).
SHORT_LENS = (5, 0, 1, 11)

# --- ICRC -----------------------------------------------------------------


def icrc(ip_hdr, udp):
    """The ICRC of an IPv4 RoCEv2 packet, as rust/proto/src/icrc.rs computes
    it: CRC-32 over 8 bytes of 0xff (the masked LRH), the IP header with TOS,
    TTL and header checksum set to 0xff, the UDP header with its checksum set
    to 0xff, the BTH with byte 4 set to 0xff, and the rest of `udp`. `udp` is
    the UDP datagram from its header up to, not including, the ICRC. It goes
    on the wire as struct.pack('<I', icrc(...))."""
    ip = bytearray(ip_hdr)
    for i in (1, 8, 10, 11):
        ip[i] = 0xff
    u = bytearray(udp)
    for i in (6, 7, 8 + 4):
        if i < len(u):
            u[i] = 0xff
    return zlib.crc32(b"\xff" * 8 + bytes(ip) + bytes(u)) & 0xffffffff


def unhex(s):
    return bytes.fromhex("".join(s.split()))


# From rust/proto/src/icrc.rs: a CNP captured from a ConnectX-4 Lx (scapy's
# test/contrib/roce.uts), less its Ethernet header; its ICRC is 0x2a00fd82,
# sent as 82 fd 00 2a. TOS 0xc2 and BECN in BTH byte 4, both masked.
CX4_CNP = unhex("""45c2 003c 718c 4000 4011 9161 0a00 1101 0a00 1201
                   0000 12b7 0028 0000
                   8100 ffff 4000 0118 0000 0000
                   0000 0000 0000 0000 0000 0000 0000 0000
                   82fd 002a""")
# scapy's UC SEND Only (same file), without its ICRC 78 f3 53 f3.
SCAPY_UC = unhex("""4501 0040 0478 4000 4011 b4d5 c0a8 0007 c0a8 0007
                    c000 12b7 002c aca2
                    2460 ffff 0000 00d3 00cf 1710
                    4630 818b e289 35d9 0e9a 9550 5401 be88 5e50 0000""")
SCAPY_UC_ICRC = bytes([0x78, 0xf3, 0x53, 0xf3])


def check_icrc():
    """Raises if icrc() disagrees with the vectors from real packets."""
    assert zlib.crc32(b"123456789") == 0xcbf43926
    ip, udp = CX4_CNP[:20], CX4_CNP[20:]
    got = icrc(ip, udp[:-ICRC_LEN])
    if got != 0x2a00fd82 or struct.pack("<I", got) != udp[-ICRC_LEN:]:
        raise AssertionError(f"ICRC of the ConnectX-4 CNP is {got:#010x}, want 0x2a00fd82")
    got = struct.pack("<I", icrc(SCAPY_UC[:20], SCAPY_UC[20:]))
    if got != SCAPY_UC_ICRC:
        raise AssertionError(f"ICRC of scapy's UC SEND is {got.hex()}, want {SCAPY_UC_ICRC.hex()}")


# --- Packets --------------------------------------------------------------


def ip_checksum(hdr):
    s = sum(struct.unpack(f"!{len(hdr) // 2}H", hdr))
    while s > 0xffff:
        s = (s & 0xffff) + (s >> 16)
    return ~s & 0xffff


def ipv4_header(src, dst, total_len, ident, tos=0, ttl=64, options=b""):
    """An IPv4 header for a UDP datagram, DF set, with a right checksum."""
    ihl = 5 + len(options) // 4
    hdr = struct.pack("!BBHHHBBH4s4s", 0x40 | ihl, tos, total_len, ident, IP_DF,
                      ttl, socket.IPPROTO_UDP, 0, src, dst) + options
    return hdr[:10] + struct.pack("!H", ip_checksum(hdr)) + hdr[12:]


def bth(opcode, qpn, psn=0, pad=0, tver=0, pkey=0xffff, byte4=0):
    """A Base Transport Header (headers.rs `Bth`): SE, MigReq and AckReq
    clear; `byte4` is FECN, BECN and the reserved bits."""
    return struct.pack("!BBHII", opcode, (pad & 3) << 4 | (tver & 0xf), pkey,
                       (byte4 & 0xff) << 24 | (qpn & 0xffffff), psn & 0xffffff)


def reth(va, rkey, dma_len):
    return struct.pack("!QII", va, rkey, dma_len)


def deth(qkey, src_qpn):
    return struct.pack("!II", qkey, src_qpn & 0xffffff)


def aeth(syndrome, msn):
    return struct.pack("!I", (syndrome & 0xff) << 24 | (msn & 0xffffff))


def build(src, dst, ident, sport, roce, icrc_xor=0, tos=0, ttl=64, options=b""):
    """A whole IPv4 packet carrying `roce` to UDP port 4791. `icrc_xor` None
    appends no ICRC; otherwise the right ICRC xor `icrc_xor` follows `roce`.
    The UDP checksum is 0 (none, as RoCEv2 over IPv4 allows). Linux rewrites
    tot_len and the IP checksum of IP_HDRINCL packets, and the ID when it is
    0: tot_len is right here, the checksum is masked in the ICRC, and `ident`
    must not be 0."""
    assert ident != 0
    n = len(roce) + (0 if icrc_xor is None else ICRC_LEN)
    ip = ipv4_header(src, dst, 20 + len(options) + 8 + n, ident, tos, ttl, options)
    udp = struct.pack("!HHHH", sport, ROCE_PORT, 8 + n, 0)
    pkt = ip + udp + roce
    if icrc_xor is not None:
        pkt += struct.pack("<I", icrc(ip, udp + roce) ^ icrc_xor)
    return pkt


def predict(pkt):
    """The counter roxe must charge `pkt` (a whole IPv4 packet) to: rx.rs's
    checks in order, with rust/proto/src/headers.rs's parse() in the middle.
    A packet that passes them all goes to the QP lookup, and counts as
    rx_drop_unknown_qp only if no QP has its number; the callers make sure
    of that."""
    ihl = (pkt[0] & 0xf) * 4
    if pkt[0] >> 4 != 4 or ihl != 20:
        return "rx_drop_ip"
    udp = pkt[ihl:]
    roce = udp[8:]
    if len(roce) < 12:
        return "rx_drop_parse_too_short"
    op = roce[0]
    if op == CNP:
        if len(roce) != CNP_LEN:
            return ("rx_drop_parse_truncated" if len(roce) < CNP_LEN
                    else "rx_drop_parse_unexpected_payload")
        if roce[1] & 0x3f != 0:
            return "rx_drop_parse_bad_version"
        if struct.pack("<I", icrc(pkt[:ihl], udp[:-ICRC_LEN])) != udp[-ICRC_LEN:]:
            return "rx_drop_icrc"
        return "rx_drop_unknown_qp"
    if op not in HEADER_LEN:
        return "rx_drop_parse_unknown_opcode"
    if roce[1] & 0xf != 0:
        return "rx_drop_parse_bad_version"
    pad = (roce[1] >> 4) & 3
    payload_len = len(roce) - (HEADER_LEN[op] + pad + ICRC_LEN)
    if payload_len < 0:
        return "rx_drop_parse_truncated"
    if op in NO_PAYLOAD and (payload_len != 0 or pad != 0):
        return "rx_drop_parse_unexpected_payload"
    if (payload_len + pad) % 4 != 0:
        return "rx_drop_parse_misaligned"
    if struct.pack("<I", icrc(pkt[:ihl], udp[:-ICRC_LEN])) != udp[-ICRC_LEN:]:
        return "rx_drop_icrc"
    # The multicast QP number to a unicast address.
    if struct.unpack("!I", roce[4:8])[0] & 0xffffff == 0xffffff:
        return "rx_drop_address"
    return "rx_drop_unknown_qp"


class Packets:
    """Builds the packets of every kind, each with its own IP ID (never 0)
    and a source port from 0xc000 up."""

    def __init__(self, addr, src=None):
        self.addr = socket.inet_aton(addr)
        self.src = socket.inet_aton(src or addr)
        self.ident = 0x1000

    def make(self, roce, src=None, dst=None, **kw):
        """`roce` in a packet from the peer (or `src`) to the device (or
        `dst`)."""
        self.ident = self.ident % 0xffff + 1
        sport = 0xc000 | (self.ident & 0x3fff)
        src = socket.inet_aton(src) if src else self.src
        dst = socket.inet_aton(dst) if dst else self.addr
        return build(src, dst, self.ident, sport, roce, **kw)

    def bad_icrc(self, i):
        # A different bit in each: i * 7 % 32 visits all four bytes.
        return self.make(bth(RC_SEND_ONLY, 0x100, psn=i) + b"bad icrc", icrc_xor=1 << (i * 7 % 32))

    def unknown_qp(self, i):
        if i % 2:
            # ECN and DSCP in TOS, another TTL, FECN, BECN and the reserved
            # bits in BTH byte 4: all masked, so the ICRC still holds.
            return self.make(bth(RC_SEND_ONLY, MISSING_QPN, psn=i, byte4=0xff) + b"no qp...",
                             tos=0xba, ttl=17)
        return self.make(bth(RC_SEND_ONLY, MISSING_QPN, psn=i) + b"no qp...")

    def unknown_opcode(self, i):
        op = UNKNOWN_OPCODES[i % len(UNKNOWN_OPCODES)]
        return self.make(bth(op, MISSING_QPN, psn=i) + b"unknown!")

    def cnp_unknown_qp(self, i):
        return self.make(bth(CNP, MISSING_QPN, byte4=0x40) + bytes(16))

    def cnp_long(self, i):
        return self.make(bth(CNP, MISSING_QPN, byte4=0x40) + bytes(16 + 4 * (1 + i % 4)))

    def too_short(self, i):
        n = SHORT_LENS[i % len(SHORT_LENS)]
        return self.make(bth(RC_SEND_ONLY, MISSING_QPN)[:n], icrc_xor=None)

    def bad_version(self, i):
        return self.make(bth(RC_SEND_ONLY, MISSING_QPN, psn=i, tver=1 + i % 15) + b"version!")

    def truncated(self, i):
        # Cut after 1 to 15 bytes of the 16-byte RETH: 13 to 27 bytes in
        # all, past a BTH but short of the 32 the opcode needs with its ICRC.
        cut = 1 + i % 15
        r = reth(0x1000, 0x1234, 8)[:cut]
        return self.make(bth(RC_RDMA_WRITE_ONLY, MISSING_QPN, psn=i) + r, icrc_xor=None)

    def unexpected_payload(self, i):
        return self.make(bth(RC_ACKNOWLEDGE, MISSING_QPN, psn=i) + aeth(0, i) + b"data")

    def misaligned(self, i):
        return self.make(bth(RC_SEND_ONLY, MISSING_QPN, psn=i) + b"five!")

    def ip_options(self, i):
        return self.make(bth(RC_SEND_ONLY, MISSING_QPN, psn=i) + b"options!",
                         options=b"\x01\x01\x01\x01")

    def garbage(self, rng, count):
        """`count` random packets and what each must be counted as. None of
        them gets as far as the QP lookup: one that would (its last four
        bytes a right ICRC, about one in 2**32) is replaced by another."""
        known = sorted(HEADER_LEN)
        out = []
        while len(out) < count:
            roce = bytearray(rng.randbytes(rng.randint(0, 1500)))
            if len(out) % 2 and len(roce) >= 2:
                roce[0] = rng.choice(known)
                roce[1] &= 0xf0
            pkt = self.make(bytes(roce), icrc_xor=None)
            want = predict(pkt)
            if want != "rx_drop_unknown_qp":
                out.append((pkt, want))
        return out


# (name, counter, Packets method): the kinds, in the order roxe checks.
KINDS = [
    ("bad-icrc", "rx_drop_icrc", Packets.bad_icrc),
    ("unknown-qp", "rx_drop_unknown_qp", Packets.unknown_qp),
    ("unknown-opcode", "rx_drop_parse_unknown_opcode", Packets.unknown_opcode),
    ("cnp-unknown-qp", "rx_drop_unknown_qp", Packets.cnp_unknown_qp),
    ("cnp-long", "rx_drop_parse_unexpected_payload", Packets.cnp_long),
    ("too-short", "rx_drop_parse_too_short", Packets.too_short),
    ("bad-version", "rx_drop_parse_bad_version", Packets.bad_version),
    ("truncated", "rx_drop_parse_truncated", Packets.truncated),
    ("unexpected-payload", "rx_drop_parse_unexpected_payload", Packets.unexpected_payload),
    ("misaligned", "rx_drop_parse_misaligned", Packets.misaligned),
    ("ip-options", "rx_drop_ip", Packets.ip_options),
]

def check_build():
    """Raises unless build() gives the vectors' bytes back from their fields
    (all but the scapy packet's UDP checksum: build() leaves it 0, and the
    ICRC masks it)."""
    cnp = build(bytes([10, 0, 17, 1]), bytes([10, 0, 18, 1]), 0x718c, 0,
                bth(0x81, 0x118, byte4=0x40) + bytes(16), tos=0xc2)
    if cnp != CX4_CNP:
        raise AssertionError(f"the ConnectX-4 CNP rebuilt is {cnp.hex()}")
    addr = bytes([192, 168, 0, 7])
    uc = build(addr, addr, 1144, 0xc000, SCAPY_UC[28:], tos=1)
    want = SCAPY_UC[:26] + b"\0\0" + SCAPY_UC[28:] + SCAPY_UC_ICRC
    if uc != want:
        raise AssertionError(f"scapy's UC SEND rebuilt is {uc.hex()}")


# --- Self-test ------------------------------------------------------------


def check_packet(pkt, addr):
    """Raises unless `pkt` has the IPv4 and UDP headers build() promises."""
    ihl = (pkt[0] & 0xf) * 4
    ver, tos, tot, ident, frag, ttl, proto = struct.unpack("!BBHHHBB", pkt[:10])
    assert ver >> 4 == 4 and ihl >= 20, "IPv4 header"
    assert tot == len(pkt), f"tot_len {tot} for {len(pkt)} bytes"
    assert ident != 0, "IP ID 0 (the kernel would pick one)"
    assert frag == IP_DF and proto == socket.IPPROTO_UDP, "DF, not a fragment, UDP"
    assert ttl in (64, 17), f"TTL {ttl}"
    assert ip_checksum(pkt[:ihl]) == 0, "IP header checksum"
    assert pkt[12:16] == addr and pkt[16:20] == addr, "addresses"
    sport, dport, ulen, csum = struct.unpack("!HHHH", pkt[ihl:ihl + 8])
    assert sport >= 0xc000 and dport == ROCE_PORT, f"UDP ports {sport} {dport}"
    assert ulen == len(pkt) - ihl and csum == 0, "UDP length, no UDP checksum"


def selftest():
    """Checks the ICRC, the packets and predict() without sending; returns
    the number of failures."""
    fails = 0

    def test(what, fn):
        nonlocal fails
        try:
            fn()
            print(f"ok   {what}")
        except AssertionError as e:
            fails += 1
            print(f"FAIL {what}: {e}")

    test("ICRC vectors (ConnectX-4 CNP, scapy UC SEND Only)", check_icrc)
    test("build() reproduces both vectors byte for byte", check_build)

    def masked_fields():
        # What the kernel may rewrite (the IP checksum), and what a network
        # may change (TOS, TTL, BTH byte 4), leaves the ICRC as it was.
        pkt = bytearray(Packets("192.0.2.1").unknown_qp(0))
        for i, v in ((10, 0), (11, 0), (1, 0x03), (8, 1), (28 + 4, 0xc0)):
            p = bytearray(pkt)
            p[i] = v
            assert predict(bytes(p)) == "rx_drop_unknown_qp", f"byte {i} = {v:#x} breaks the ICRC"
        for i in (0x0c, 0x14, 28 + 2, 28 + 7, len(pkt) - 5):
            p = bytearray(pkt)
            p[i] ^= 0x01
            assert predict(bytes(p)) == "rx_drop_icrc", f"byte {i} is not covered by the ICRC"
    test("the ICRC ignores TOS, TTL, IP checksum, BTH byte 4; covers address, port, QPN, data",
         masked_fields)

    def parse_rules():
        # headers.rs's each_error_has_its_own_trigger, through predict():
        # an RC SEND Only with 4 payload bytes (28 bytes of IP and UDP
        # header, 12 of BTH, 4 of payload, 4 of ICRC), then changed.
        good = Packets("192.0.2.1").make(bth(RC_SEND_ONLY, MISSING_QPN) + b"abcd")
        ack = Packets("192.0.2.1").make(bth(RC_ACKNOWLEDGE, MISSING_QPN) + aeth(0, 0))

        def byte(pkt, i, v):
            return pkt[:i] + bytes([v]) + pkt[i + 1:]
        for what, pkt, want in [
            ("the packet", good, "rx_drop_unknown_qp"),
            ("11 bytes", good[:28 + 11], "rx_drop_parse_too_short"),
            ("RD SEND First", byte(good, 28, 0x40), "rx_drop_parse_unknown_opcode"),
            ("native IB's CNP", byte(good, 28, 0x80), "rx_drop_parse_unknown_opcode"),
            ("a RoCEv2 CNP of 20 bytes", byte(good, 28, 0x81), "rx_drop_parse_truncated"),
            ("TVer 1", byte(good, 29, 0x01), "rx_drop_parse_bad_version"),
            ("BTH and ICRC less a byte", good[:28 + 15], "rx_drop_parse_truncated"),
            ("pad 3, BTH and ICRC", byte(good[:28 + 16], 29, 0x30), "rx_drop_parse_truncated"),
            ("an ACK", ack, "rx_drop_unknown_qp"),
            ("an ACK with 4 more bytes", ack + bytes(4), "rx_drop_parse_unexpected_payload"),
            ("an ACK with pad 1", byte(ack + b"\0", 29, 0x10), "rx_drop_parse_unexpected_payload"),
            ("a byte more", good + b"\0", "rx_drop_parse_misaligned"),
        ]:
            got = predict(pkt)
            assert got == want, f"{what}: {got}, want {want}"
    test("predict() follows parse()'s order", parse_rules)

    addr = "192.0.2.1"
    for name, counter, make in KINDS:
        def kind(name=name, counter=counter, make=make):
            pk = Packets(addr)
            for i in range(10):
                pkt = make(pk, i)
                check_packet(pkt, socket.inet_aton(addr))
                got = predict(pkt)
                assert got == counter, f"packet {i} ({pkt.hex()}) would count as {got}"
        test(f"{name}: well-formed IP and UDP, each packet maps to {counter}", kind)

    def garbage():
        pk = Packets(addr)
        packets = pk.garbage(random.Random(1), 200)
        for pkt, _ in packets:
            check_packet(pkt, socket.inet_aton(addr))
        lens = [len(p) - 28 for p, _ in packets]
        assert min(lens) >= 0 and max(lens) <= 1500, "payload lengths"
        kinds = collections.Counter(w for _, w in packets)
        assert len(kinds) >= 5, f"only {dict(kinds)}"
        print(f"     garbage, seed 1: {fmt(kinds)}")
        again = Packets(addr).garbage(random.Random(1), 200)
        assert again == packets, "the same seed gives other packets"
    test("garbage: well-formed IP and UDP, seeded, reaches several counters", garbage)

    def idents():
        pk = Packets(addr)
        ids = {struct.unpack("!H", make(pk, i)[4:6])[0] for _, _, make in KINDS for i in range(10)}
        assert len(ids) == 10 * len(KINDS), f"{len(ids)} IDs for {10 * len(KINDS)} packets"
    test("every packet has its own IP ID", idents)
    print(f"selftest: {fails} failed")
    return fails


# --- Sending and counting -------------------------------------------------


CLONE_NEWNET = 0x40000000


def socket_in(netns, *args):
    """A socket opened in network namespace `netns` (`ip netns` name), or
    in this one if `netns` is None. The socket stays in the namespace it
    was opened in; the caller's thread comes back to its own."""
    if not netns:
        return socket.socket(*args)
    libc = ctypes.CDLL(None, use_errno=True)
    here = os.open("/proc/self/ns/net", os.O_RDONLY)
    there = os.open(f"/run/netns/{netns}", os.O_RDONLY)
    try:
        if libc.setns(there, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns into {netns}")
        try:
            return socket.socket(*args)
        finally:
            if libc.setns(here, CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "setns back")
    finally:
        os.close(here)
        os.close(there)


def raw_socket(netns):
    """A raw IPv4 socket that sends whole packets (IP_HDRINCL)."""
    sock = socket_in(netns, socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_HDRINCL, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)
    return sock


# Counters of volume, not of events: every packet that reaches the hook
# moves rx_packets and rx_bytes (the PMA's counts), whatever becomes of it.
# The checks here are about where a packet went, so they leave them out.
VOLUME = {"rx_packets", "rx_bytes", "rx_multicast_packets", "tx_bytes", "tx_multicast_packets"}


class Counters:
    def __init__(self, dev, port):
        self.dir = f"/sys/class/infiniband/{dev}/ports/{port}/hw_counters"

    def read(self):
        out = {}
        for name in os.listdir(self.dir):
            if name == "lifespan" or name in VOLUME:
                continue
            with open(os.path.join(self.dir, name)) as f:
                out[name] = int(f.read())
        return out

    def growth(self, before, n, timeout=5.0):
        """How much each counter grew since `before`, once they have grown
        by `n` in all (or after `timeout` seconds): a moment later, so a
        packet counted twice shows too."""
        time.sleep(0.2)
        end = time.monotonic() + timeout
        while True:
            d = delta(before, self.read())
            if sum(d.values()) >= n or time.monotonic() >= end:
                break
            time.sleep(0.1)
        time.sleep(0.2)
        return delta(before, self.read())


def delta(before, after):
    return {k: v - before.get(k, 0) for k, v in after.items() if v != before.get(k, 0)}


def fmt(d):
    return ", ".join(f"{k} +{v}" for k, v in sorted(d.items())) or "nothing"


def send_all(sock, addr, packets):
    for p in packets:
        sock.sendto(p, (addr, 0))


def run_kind(sock, ctr, addr, name, counter, packets):
    before = ctr.read()
    if counter not in before:
        print(f"FAIL {name}: there is no counter {counter} in {ctr.dir}")
        return False
    send_all(sock, addr, packets)
    d = ctr.growth(before, len(packets))
    got = d.pop(counter, 0)
    if got == len(packets) and not d:
        print(f"ok   {name}: {counter} +{got}")
        return True
    print(f"FAIL {name}: {counter} +{got}, want +{len(packets)}; other counters: {fmt(d)}")
    return False


def run_garbage(sock, ctr, addr, packets):
    n = len(packets)
    want = collections.Counter(w for _, w in packets)
    before = ctr.read()
    send_all(sock, addr, [p for p, _ in packets])
    d = ctr.growth(before, n)
    drops = sum(v for k, v in d.items() if k.startswith("rx_drop_"))
    if drops == n and d == dict(want):
        print(f"ok   garbage: rx_drop_* +{drops} ({fmt(d)})")
        return True
    print(f"FAIL garbage: rx_drop_* +{drops}, want +{n}; counted {fmt(d)}; predicted {fmt(want)}")
    return False


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ip", help="the address of DEV's netdev (packets go to it)")
    ap.add_argument("--from", dest="src", help="the peer's address (packets come from it)")
    ap.add_argument("--netns", help="the network namespace the peer's address is in")
    ap.add_argument("--dev", default="roxe0")
    ap.add_argument("--port", type=int, default=1)
    ap.add_argument("--count", type=int, default=10, help="packets of each kind")
    ap.add_argument("--garbage", type=int, default=200, help="random packets")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--selftest", action="store_true", help="check without sending")
    args = ap.parse_args()
    if args.selftest:
        return 1 if selftest() else 0
    if not args.ip or not args.src or not args.netns:
        ap.error("--ip, --from and --netns are required (or --selftest)")

    try:
        check_icrc()
        check_build()
    except AssertionError as e:
        print(f"FAIL self-test: {e}")
        return 1
    ctr = Counters(args.dev, args.port)
    if not os.path.isdir(ctr.dir):
        print(f"FAIL {ctr.dir} does not exist")
        return 1
    sock = raw_socket(args.netns)

    pk = Packets(args.ip, args.src)
    results = []
    for name, counter, make in KINDS:
        packets = [make(pk, i) for i in range(args.count)]
        results.append(run_kind(sock, ctr, args.ip, name, counter, packets))
    packets = pk.garbage(random.Random(args.seed), args.garbage)
    results.append(run_garbage(sock, ctr, args.ip, packets))

    ok = sum(results)
    print(f"bad-packets: {ok} ok, {len(results) - ok} failed")
    return 0 if ok == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
