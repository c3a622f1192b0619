// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The RoCEv2 invariant CRC (IBTA vol 1, Annex A17 for what RoCEv2 covers
//! and masks, chapter 7 for the IB ICRC itself).
//!
//! The ICRC is the Ethernet CRC-32 (polynomial 0x04c11db7, bit-reflected,
//! initial value `0xffffffff`, result inverted) over:
//!
//! 1. eight bytes of `0xff`, standing for the masked LRH of a native IB
//!    packet;
//! 2. the IP header with its variant fields set to all ones: for IPv4 the
//!    type of service, the TTL and the header checksum; for IPv6 the
//!    traffic class, the flow label and the hop limit;
//! 3. the UDP header with its checksum set to all ones;
//! 4. the BTH with its byte 4 (FECN, BECN and reserved bits, "resv8a") set
//!    to all ones;
//! 5. everything after the BTH up to the ICRC: extended headers, payload
//!    and pad bytes.
//!
//! On the wire the ICRC is the inverted CRC register, least significant
//! byte first, like the Ethernet FCS: `finish().to_le_bytes()`. (rxe stores
//! the inverted `crc32_le` register with a CPU-endian store, which is this
//! order on the little-endian hosts it interoperates from.)

/// Bytes of ICRC at the end of every packet.
pub const LEN: usize = 4;

/// The reflected IEEE 802.3 polynomial.
const POLY: u32 = 0xedb8_8320;

/// Tables for slicing by eight: `TABLES[0]` is the classic byte table, and
/// `TABLES[k][b]` is the CRC of byte `b` followed by `k` zero bytes.
static TABLES: [[u32; 256]; 8] = make_tables();

const fn make_tables() -> [[u32; 256]; 8] {
    let mut t = [[0u32; 256]; 8];
    let mut i = 0;
    while i < 256 {
        // CAST: i < 256.
        let mut c = i as u32;
        let mut bit = 0;
        while bit < 8 {
            c = if c & 1 != 0 { (c >> 1) ^ POLY } else { c >> 1 };
            bit += 1;
        }
        t[0][i] = c;
        i += 1;
    }
    let mut k = 1;
    while k < 8 {
        let mut i = 0;
        while i < 256 {
            let prev = t[k - 1][i];
            t[k][i] = (prev >> 8) ^ t[0][(prev & 0xff) as usize];
            i += 1;
        }
        k += 1;
    }
    t
}

/// One table lookup, indexed by the low byte of `x`.
#[inline(always)]
fn lookup(k: usize, x: u32) -> u32 {
    // CAST: masked to a byte, so the index is below 256.
    TABLES[k & 7][(x & 0xff) as usize]
}

/// An incremental CRC-32 (IEEE, as in Ethernet, zlib and the kernel's
/// `crc32_le` with the usual inversions).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Crc32 {
    /// The CRC register, not inverted.
    state: u32,
}

impl Default for Crc32 {
    fn default() -> Self {
        Self::new()
    }
}

impl Crc32 {
    /// An empty CRC.
    pub const fn new() -> Crc32 {
        Crc32 { state: !0 }
    }

    /// Adds one byte.
    #[inline]
    pub fn update_byte(&mut self, b: u8) {
        self.state = lookup(0, self.state ^ u32::from(b)) ^ (self.state >> 8);
    }

    /// Adds `data`.
    pub fn update(&mut self, data: &[u8]) {
        let mut blocks = data.chunks_exact(8);
        let mut crc = self.state;
        for b in &mut blocks {
            let lo = crc ^ u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            let hi = u32::from_le_bytes([b[4], b[5], b[6], b[7]]);
            crc = lookup(7, lo)
                ^ lookup(6, lo >> 8)
                ^ lookup(5, lo >> 16)
                ^ lookup(4, lo >> 24)
                ^ lookup(3, hi)
                ^ lookup(2, hi >> 8)
                ^ lookup(1, hi >> 16)
                ^ lookup(0, hi >> 24);
        }
        self.state = crc;
        for &b in blocks.remainder() {
            self.update_byte(b);
        }
    }

    /// The CRC of everything added so far.
    pub const fn finish(self) -> u32 {
        !self.state
    }
}

/// The CRC-32 of `data` in one go.
pub fn crc32(data: &[u8]) -> u32 {
    let mut c = Crc32::new();
    c.update(data);
    c.finish()
}

/// The IP header a RoCEv2 packet travels in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IpHeader<'a> {
    /// An IPv4 header, 20 bytes for RoCEv2 (options, if a caller passes
    /// them, are covered too; rxe assumes there are none).
    V4(&'a [u8]),
    /// An IPv6 header, 40 bytes.
    V6(&'a [u8]),
}

impl IpHeader<'_> {
    /// The bits forced to one in byte `i` of the header.
    fn mask(&self, i: usize) -> u8 {
        match (self, i) {
            // TOS, TTL, header checksum.
            (IpHeader::V4(_), 1 | 8 | 10 | 11) => 0xff,
            // Traffic class (low nibble of byte 0, high nibble of byte 1),
            // flow label (rest of bytes 1 to 3), hop limit.
            (IpHeader::V6(_), 0) => 0x0f,
            (IpHeader::V6(_), 1..=3 | 7) => 0xff,
            _ => 0,
        }
    }

    fn bytes(&self) -> &[u8] {
        match self {
            IpHeader::V4(b) | IpHeader::V6(b) => b,
        }
    }
}

/// Offsets in the UDP datagram of the bytes masked to all ones: the UDP
/// checksum (6 and 7) and BTH byte 4 (8 + 4).
const fn udp_masked(off: usize) -> bool {
    matches!(off, 6 | 7 | 12)
}
/// The first UDP datagram offset past every masked byte.
const UDP_MASKED_END: usize = 13;

/// An ICRC computed over a packet given in pieces.
///
/// Start with the IP header, then feed the UDP datagram, from the first
/// byte of the UDP header up to the last pad byte, in order and split
/// anywhere: a header buffer and then payload fragments, say. The masked
/// UDP and BTH bytes are recognised by their offset, so the caller passes
/// the bytes as they are on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Icrc {
    crc: Crc32,
    /// How far into the UDP datagram the CRC has got, counted only up to
    /// [`UDP_MASKED_END`].
    udp_off: usize,
}

impl Icrc {
    /// Starts an ICRC: the masked LRH and the masked IP header.
    pub fn new(ip: IpHeader<'_>) -> Icrc {
        let mut crc = Crc32::new();
        crc.update(&[0xff; 8]);
        for (i, &b) in ip.bytes().iter().enumerate() {
            crc.update_byte(b | ip.mask(i));
        }
        Icrc { crc, udp_off: 0 }
    }

    /// Adds the next bytes of the UDP datagram.
    pub fn update(&mut self, mut data: &[u8]) {
        while self.udp_off < UDP_MASKED_END {
            let Some((&b, rest)) = data.split_first() else {
                return;
            };
            self.crc
                .update_byte(if udp_masked(self.udp_off) { 0xff } else { b });
            self.udp_off += 1;
            data = rest;
        }
        self.crc.update(data);
    }

    /// The ICRC, as [`super::headers::Packet::icrc`] reads it; it goes on
    /// the wire as `to_le_bytes()`.
    pub const fn finish(self) -> u32 {
        self.crc.finish()
    }

    /// The ICRC Linux's rxe (6.12 and before) puts on, and expects in, an
    /// RC FLUSH packet: after the whole packet, `headers` (BTH, FETH and
    /// RETH as on the wire, unmasked) once more. rxe's opcode table gives
    /// FLUSH no payload offset, so it takes the packet's 32 header bytes
    /// for a payload and adds them to the CRC a second time. Feed the
    /// packet as for [`Icrc::finish`] first.
    pub fn finish_rxe_flush(mut self, headers: &[u8]) -> u32 {
        self.update(headers);
        self.finish()
    }
}

/// The ICRC of a packet: `udp` is the UDP datagram (UDP header onward)
/// without the ICRC.
pub fn icrc(ip: IpHeader<'_>, udp: &[u8]) -> u32 {
    let mut c = Icrc::new(ip);
    c.update(udp);
    c.finish()
}

/// The ICRC of an IPv4 packet; `udp` as for [`icrc`].
pub fn icrc_ipv4(ip_hdr: &[u8], udp: &[u8]) -> u32 {
    icrc(IpHeader::V4(ip_hdr), udp)
}

/// The ICRC of an IPv6 packet; `udp` as for [`icrc`].
pub fn icrc_ipv6(ip_hdr: &[u8], udp: &[u8]) -> u32 {
    icrc(IpHeader::V6(ip_hdr), udp)
}

/// Splits a UDP datagram into the part the ICRC covers and the ICRC.
fn split_icrc(datagram: &[u8]) -> Option<(&[u8], &[u8; LEN])> {
    let at = datagram.len().checked_sub(LEN)?;
    // `at` is at most the length, so the split cannot panic.
    let (covered, tail) = datagram.split_at(at);
    Some((covered, tail.try_into().ok()?))
}

/// Whether the ICRC at the end of `datagram` (the whole UDP datagram) is
/// right. `false` if the datagram is shorter than an ICRC.
pub fn verify(ip: IpHeader<'_>, datagram: &[u8]) -> bool {
    match split_icrc(datagram) {
        Some((covered, sent)) => icrc(ip, covered).to_le_bytes() == *sent,
        None => false,
    }
}

/// Writes the ICRC into the last four bytes of `datagram` (the whole UDP
/// datagram). Returns `None`, and writes nothing, if it is too short.
pub fn fill(ip: IpHeader<'_>, datagram: &mut [u8]) -> Option<u32> {
    let at = datagram.len().checked_sub(LEN)?;
    // `at` is at most the length, so the split cannot panic.
    let (covered, tail) = datagram.split_at_mut(at);
    let v = icrc(ip, covered);
    let tail: &mut [u8; LEN] = tail.try_into().ok()?;
    *tail = v.to_le_bytes();
    Some(v)
}

#[cfg(test)]
pub(crate) mod tests {

    /// An RC FLUSH as roxe sent it to rxe (captured on the wire,
    /// 2026-12-02): its ICRC is the standard one, and rxe's variant, which
    /// rxe dropped it for, differs. The variant is the one rxe 6.12 accepted
    /// when roxe sent it.
    #[test]
    fn flush_icrc_standard_and_rxe_variant() {
        let ip: [u8; 20] = [
            0x45, 0x00, 0x00, 0x40, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb6, 0xa9, 0xc0, 0x00,
            0x02, 0x02, 0xc0, 0x00, 0x02, 0x01,
        ];
        let udp: [u8; 40] = [
            0xc1, 0x10, 0x12, 0xb7, 0x00, 0x2c, 0x00, 0x00, // UDP
            0x1c, 0x00, 0xff, 0xff, 0x00, 0x00, 0x00, 0x11, 0x80, 0x00, 0x04, 0x57, // BTH
            0x00, 0x00, 0x00, 0x01, // FETH
            0x00, 0x00, 0x00, 0x00, 0x1b, 0xe4, 0x50, 0x40, 0x00, 0x00, 0x02, 0x78, 0x00, 0x00,
            0x00, 0xc8, // RETH
        ];
        let mut c = Icrc::new(IpHeader::V4(&ip));
        c.update(&udp);
        assert_eq!(c.finish().to_le_bytes(), [0x3e, 0x01, 0x36, 0x5b]);
        assert_eq!(
            c.finish_rxe_flush(&udp[8..]).to_le_bytes(),
            [0x4e, 0x16, 0xd7, 0x75]
        );
    }
    use super::*;
    use proptest::prelude::*;
    use std::{string::String, vec, vec::Vec};

    /// Builds the Annex A17 pseudo-packet by hand, the slow way, for an
    /// independent CRC implementation to hash.
    fn pseudo_packet(ip: IpHeader<'_>, udp: &[u8]) -> Vec<u8> {
        let mut v = vec![0xff; 8];
        let mut iph = ip.bytes().to_vec();
        match ip {
            IpHeader::V4(_) => {
                iph[1] = 0xff;
                iph[8] = 0xff;
                iph[10] = 0xff;
                iph[11] = 0xff;
            }
            IpHeader::V6(_) => {
                iph[0] |= 0x0f;
                iph[1] = 0xff;
                iph[2] = 0xff;
                iph[3] = 0xff;
                iph[7] = 0xff;
            }
        }
        v.extend_from_slice(&iph);
        let mut u = udp.to_vec();
        u[6] = 0xff;
        u[7] = 0xff;
        u[12] = 0xff;
        v.extend_from_slice(&u);
        v
    }

    pub(crate) fn unhex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn crc32_check_value() {
        // The standard check value of CRC-32/ISO-HDLC.
        assert_eq!(crc32(b"123456789"), 0xcbf4_3926);
        assert_eq!(crc32(b""), 0);
    }

    #[test]
    fn lrh_mask_gives_rxe_seed() {
        // rxe starts its CRC from 0xdebb20e3, "the result of computing a
        // CRC with a seed of 0xffffffff and 8 bytes of 0xff".
        let mut c = Crc32::new();
        c.update(&[0xff; 8]);
        assert_eq!(c.state, 0xdebb_20e3);
    }

    /// A CNP captured from a Mellanox ConnectX-4 Lx, from scapy's test
    /// suite (`test/contrib/roce.uts`, "RoCE CNP captured on ConnectX-4
    /// Lx"), less its Ethernet header. A hardware-generated ICRC, with
    /// BECN set in the masked BTH byte and TOS 0xc2, both of which the
    /// ICRC must ignore.
    pub(crate) const CX4_CNP: &str = "45c2 003c 718c 4000 4011 9161 0a00 1101 0a00 1201
                           0000 12b7 0028 0000
                           8100 ffff 4000 0118 0000 0000
                           0000 0000 0000 0000 0000 0000 0000 0000
                           82fd 002a";

    #[test]
    fn connectx4_capture() {
        let pkt = unhex(CX4_CNP);
        let (ip, udp) = pkt.split_at(20);
        assert!(verify(IpHeader::V4(ip), udp));
        let (covered, sent) = udp.split_at(udp.len() - 4);
        assert_eq!(icrc_ipv4(ip, covered).to_le_bytes(), sent);
        assert_eq!(icrc_ipv4(ip, covered), 0x2a00_fd82);
        let mut copy = udp.to_vec();
        copy[udp.len() - 4..].fill(0);
        assert_eq!(fill(IpHeader::V4(ip), &mut copy), Some(0x2a00_fd82));
        assert_eq!(copy, udp);
    }

    /// scapy's example UC SEND Only packet (`test/contrib/roce.uts`, "RoCE
    /// layer"): IPv4 192.168.0.7 to itself, TOS 1, id 1144, DF, TTL 64;
    /// UDP 49152 to 4791; BTH opcode 0x24, MigReq, pad 2, P_Key 0xffff,
    /// QP 211, PSN 13571856; 18 payload bytes and 2 pad bytes. scapy's
    /// own ICRC code gives 0x78f353f3 for the wire bytes read big-endian.
    const SCAPY_UC: &str = "4501 0040 0478 4000 4011 b4d5 c0a8 0007 c0a8 0007
                            c000 12b7 002c aca2
                            2460 ffff 0000 00d3 00cf 1710
                            4630 818b e289 35d9 0e9a 9550 5401 be88 5e50 0000";

    #[test]
    fn scapy_vector() {
        let pkt = unhex(SCAPY_UC);
        let (ip, udp) = pkt.split_at(20);
        assert_eq!(icrc_ipv4(ip, udp).to_le_bytes(), [0x78, 0xf3, 0x53, 0xf3]);
        // And it parses as the packet scapy describes.
        let with_icrc = [&udp[8..], &[0x78, 0xf3, 0x53, 0xf3][..]].concat();
        let p = super::super::headers::parse(&with_icrc).unwrap();
        assert_eq!(p.opcode.to_u8(), 0x24);
        assert_eq!(
            (p.bth.pad, p.bth.dest_qpn, p.bth.psn.get()),
            (2, 211, 13_571_856)
        );
        assert_eq!(p.payload.len(), 18);
    }

    /// An RC SEND Only over IPv6 with a 5-byte payload, made up for this
    /// test: fe80::1 to fe80::2, traffic class 0x68, flow label 0x12345,
    /// hop limit 64, UDP 0xc123 to 4791 with checksum 0xbeef, BTH with
    /// FECN set, QP 0x12, PSN 0x345678. The expected ICRC was computed
    /// with Python's `zlib.crc32` over the pseudo-packet built by hand as
    /// the module comment describes; the test also checks it against
    /// `crc32fast`.
    const MADE_UP_V6: &str = "6681 2345 0020 1140 fe80 0000 0000 0000 0000 0000 0000 0001
                              fe80 0000 0000 0000 0000 0000 0000 0002
                              c123 12b7 0020 beef
                              0430 ffff 8000 0012 0034 5678
                              6865 6c6c 6f00 0000";

    #[test]
    fn ipv6_vector() {
        let pkt = unhex(MADE_UP_V6);
        let (ip, udp) = pkt.split_at(40);
        let want = crc32fast::hash(&pseudo_packet(IpHeader::V6(ip), udp));
        assert_eq!(icrc_ipv6(ip, udp), want);
        assert_eq!(icrc_ipv6(ip, udp), 0x1bd5_fc94);
    }

    #[test]
    fn variant_fields_are_ignored_and_invariant_ones_are_not() {
        let pkt = unhex(SCAPY_UC);
        let (ip, udp) = pkt.split_at(20);
        let base = icrc_ipv4(ip, udp);
        for (i, ignored) in [
            (1, true),
            (8, true),
            (10, true),
            (11, true),
            (0, false),
            (9, false),
            (12, false),
        ] {
            let mut ip2 = ip.to_vec();
            ip2[i] ^= 0x5a;
            assert_eq!(icrc_ipv4(&ip2, udp) == base, ignored, "ip byte {i}");
        }
        for (i, ignored) in [
            (6, true),
            (7, true),
            (12, true),
            (0, false),
            (5, false),
            (8, false),
            (13, false),
            (20, false),
        ] {
            let mut udp2 = udp.to_vec();
            udp2[i] ^= 0x5a;
            assert_eq!(icrc_ipv4(ip, &udp2) == base, ignored, "udp byte {i}");
        }
        let pkt = unhex(MADE_UP_V6);
        let (ip, udp) = pkt.split_at(40);
        let base = icrc_ipv6(ip, udp);
        for (i, mask, ignored) in [
            (0, 0x0f, true),
            (0, 0xf0, false),
            (1, 0xff, true),
            (3, 0xff, true),
            (7, 0xff, true),
            (4, 0xff, false),
            (6, 0xff, false),
            (8, 0x01, false),
        ] {
            let mut ip2 = ip.to_vec();
            ip2[i] ^= mask;
            assert_eq!(
                icrc_ipv6(&ip2, udp) == base,
                ignored,
                "ip6 byte {i} mask {mask:#x}"
            );
        }
    }

    #[test]
    fn short_inputs_do_not_panic() {
        assert!(!verify(IpHeader::V4(&[]), &[1, 2, 3]));
        assert_eq!(fill(IpHeader::V6(&[]), &mut [0; 3]), None);
        let _ = icrc_ipv4(&[1], &[2]);
        let _ = icrc_ipv6(&[], &[]);
    }

    proptest! {
        #[test]
        fn crc32_matches_crc32fast(data in proptest::collection::vec(any::<u8>(), 0..1024)) {
            prop_assert_eq!(crc32(&data), crc32fast::hash(&data));
        }

        #[test]
        fn crc32_incremental_equals_one_shot(
            data in proptest::collection::vec(any::<u8>(), 0..600),
            cuts in proptest::collection::vec(any::<usize>(), 0..6),
        ) {
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c % (data.len() + 1)).collect();
            cuts.sort_unstable();
            let mut c = Crc32::new();
            let mut at = 0;
            for cut in cuts.into_iter().chain([data.len()]) {
                c.update(&data[at..cut]);
                at = cut;
            }
            prop_assert_eq!(c.finish(), crc32(&data));
        }

        #[test]
        fn icrc_incremental_equals_one_shot(
            v6 in any::<bool>(),
            ip in any::<[u8; 40]>(),
            udp in proptest::collection::vec(any::<u8>(), 20..400),
            cuts in proptest::collection::vec(any::<usize>(), 0..8),
        ) {
            let ip = if v6 { IpHeader::V6(&ip[..]) } else { IpHeader::V4(&ip[..20]) };
            let one_shot = icrc(ip, &udp);
            prop_assert_eq!(one_shot, crc32fast::hash(&pseudo_packet(ip, &udp)));
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c % (udp.len() + 1)).collect();
            cuts.sort_unstable();
            let mut c = Icrc::new(ip);
            let mut at = 0;
            for cut in cuts.into_iter().chain([udp.len()]) {
                c.update(&udp[at..cut]);
                at = cut;
            }
            prop_assert_eq!(c.finish(), one_shot);
        }

        #[test]
        fn fill_then_verify(
            ip in any::<[u8; 20]>(),
            mut udp in proptest::collection::vec(any::<u8>(), 4..200),
            flip in any::<usize>(),
        ) {
            prop_assert!(fill(IpHeader::V4(&ip), &mut udp).is_some());
            prop_assert!(verify(IpHeader::V4(&ip), &udp));
            // A flipped bit outside the masked bytes is caught.
            let i = flip % udp.len();
            if !udp_masked(i) {
                udp[i] ^= 1;
                prop_assert!(!verify(IpHeader::V4(&ip), &udp));
            }
        }
    }
}
