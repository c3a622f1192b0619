// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The IP and UDP headers around a RoCEv2 packet, and the GRH that a UD
//! receive buffer gets in front of its payload.
//!
//! roxe builds its own headers: a 20-byte IPv4 header (RFC 791) without
//! options, or a 40-byte IPv6 header (RFC 8200) without extension headers,
//! then an 8-byte UDP header (RFC 768). Every field is big-endian on the
//! wire. The writers check the one thing that can go wrong, a length that
//! does not fit its 16-bit field, and write nothing when it does not.
//!
//! The parsers take whatever bytes arrived and never index past them.
//! They check only the version; what the IP stack has already checked
//! (header checksum, lengths) they leave to it.

use super::udp::FLOW_LABEL_MASK;

/// Bytes of an IPv4 header without options.
pub const IPV4_HDR_LEN: usize = 20;
/// Bytes of an IPv6 header.
pub const IPV6_HDR_LEN: usize = 40;
/// Bytes of a UDP header.
pub const UDP_HDR_LEN: usize = 8;
/// Bytes of the Global Route Header a UD receive starts with.
pub const GRH_LEN: usize = 40;

/// The IP protocol number (IPv4) and next header (IPv6) of UDP.
pub const IPPROTO_UDP: u8 = 17;
/// The IPv4 "don't fragment" flag, in the flags and fragment offset field.
pub const IPV4_DF: u16 = 0x4000;

/// Copies `src` into `dst` from offset `at` on, as far as both reach.
fn put(dst: &mut [u8], at: usize, src: &[u8]) {
    for (d, s) in dst.iter_mut().skip(at).zip(src) {
        *d = *s;
    }
}

/// A running ones-complement sum of big-endian 16-bit words (RFC 1071).
///
/// It is kept in 64 bits with the carry out of bit 63 added back in, so it
/// cannot overflow on any input; 2^16 - 1 divides 2^64 - 1, so folding it
/// to 16 bits at the end gives the same result as a 16-bit sum all along.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Sum(u64);

impl Sum {
    /// Adds a 32-bit value: two 16-bit words, high one first.
    fn add_u32(&mut self, w: u32) {
        let (s, carry) = self.0.overflowing_add(u64::from(w));
        // On a carry `s` is below `w`, so adding one cannot overflow.
        self.0 = s + u64::from(carry);
    }

    /// Adds `data`, which starts at an even offset of the checksummed
    /// bytes. An odd last byte counts as the high byte of a word whose low
    /// byte is zero, as RFC 1071 pads.
    fn add(&mut self, data: &[u8]) {
        let mut words = data.chunks_exact(4);
        for w in &mut words {
            self.add_u32(u32::from_be_bytes([w[0], w[1], w[2], w[3]]));
        }
        let tail = words.remainder();
        // One to three bytes are left: pad them to a word of four.
        let mut last = [0u8; 4];
        put(&mut last, 0, tail);
        self.add_u32(u32::from_be_bytes(last));
    }

    /// The sum folded to 16 bits, not yet complemented.
    fn fold(self) -> u16 {
        let mut s = self.0;
        while s > 0xffff {
            s = (s & 0xffff) + (s >> 16);
        }
        // CAST: the loop leaves `s` at most 0xffff.
        s as u16
    }
}

/// The RFC 791 header checksum of `hdr`: the ones complement of the ones
/// complement sum of its 16-bit words.
///
/// The checksum field is summed as it is, so a caller that wants the value
/// to store zeroes it first. Over a header whose checksum is already filled
/// in, the result is 0 when the header is intact.
pub fn ipv4_checksum(hdr: &[u8]) -> u16 {
    let mut sum = Sum::default();
    sum.add(hdr);
    !sum.fold()
}

/// Writes a 20-byte IPv4 header for a UDP datagram of `payload_len` bytes
/// (UDP header included), with the checksum filled in.
///
/// The header has no options, identification 0 and "don't fragment" set:
/// RFC 6864 lets an atomic datagram carry any ID, and RoCEv2 packets are
/// never fragmented.
///
/// Returns `false`, and leaves `out` alone, when the total length would
/// not fit in 16 bits.
pub fn write_ipv4_header(
    out: &mut [u8; IPV4_HDR_LEN],
    src: [u8; 4],
    dst: [u8; 4],
    payload_len: usize,
    tos: u8,
    ttl: u8,
) -> bool {
    let Some(total) = payload_len
        .checked_add(IPV4_HDR_LEN)
        .and_then(|n| u16::try_from(n).ok())
    else {
        return false;
    };
    let len = total.to_be_bytes();
    let frag = IPV4_DF.to_be_bytes();
    let mut h = [
        // Version 4, IHL 5 words.
        0x45,
        tos,
        len[0],
        len[1],
        // Identification.
        0,
        0,
        frag[0],
        frag[1],
        ttl,
        IPPROTO_UDP,
        // The checksum, filled in below.
        0,
        0,
        src[0],
        src[1],
        src[2],
        src[3],
        dst[0],
        dst[1],
        dst[2],
        dst[3],
    ];
    let csum = ipv4_checksum(&h).to_be_bytes();
    h[10] = csum[0];
    h[11] = csum[1];
    *out = h;
    true
}

/// Writes a 40-byte IPv6 header for a UDP datagram of `payload_len` bytes
/// (UDP header included; this is the IPv6 payload length).
///
/// The flow label is cut to its 20 bits.
///
/// Returns `false`, and leaves `out` alone, when `payload_len` does not fit
/// in 16 bits (roxe sends no jumbograms).
pub fn write_ipv6_header(
    out: &mut [u8; IPV6_HDR_LEN],
    src: [u8; 16],
    dst: [u8; 16],
    payload_len: usize,
    traffic_class: u8,
    flow_label: u32,
    hop_limit: u8,
) -> bool {
    let Ok(len) = u16::try_from(payload_len) else {
        return false;
    };
    // Version 6, traffic class and flow label share the first word.
    let word0 = (6u32 << 28) | (u32::from(traffic_class) << 20) | (flow_label & FLOW_LABEL_MASK);
    let mut h = [0u8; IPV6_HDR_LEN];
    put(&mut h, 0, &word0.to_be_bytes());
    put(&mut h, 4, &len.to_be_bytes());
    h[6] = IPPROTO_UDP;
    h[7] = hop_limit;
    put(&mut h, 8, &src);
    put(&mut h, 24, &dst);
    *out = h;
    true
}

/// Writes an 8-byte UDP header for `payload_len` bytes of payload, with a
/// zero checksum.
///
/// A zero checksum means "none" over IPv4, and RoCEv2 over IPv4 sends
/// none: the ICRC covers the packet. Over IPv6 a zero checksum is not
/// allowed (RFC 8200, section 8.1), so an IPv6 sender stores
/// [`udp6_checksum`] in bytes 6 and 7 once the payload is in place.
///
/// Returns `false`, and leaves `out` alone, when the UDP length would not
/// fit in 16 bits.
pub fn write_udp_header(
    out: &mut [u8; UDP_HDR_LEN],
    src_port: u16,
    dst_port: u16,
    payload_len: usize,
) -> bool {
    let Some(len) = payload_len
        .checked_add(UDP_HDR_LEN)
        .and_then(|n| u16::try_from(n).ok())
    else {
        return false;
    };
    let s = src_port.to_be_bytes();
    let d = dst_port.to_be_bytes();
    let l = len.to_be_bytes();
    *out = [s[0], s[1], d[0], d[1], l[0], l[1], 0, 0];
    true
}

/// The UDP checksum over IPv6 of the datagram `udp`: its header, with the
/// checksum field zeroed by the caller, and its payload.
///
/// The sum covers the RFC 8200 (section 8.1) pseudo-header too: source and
/// destination address, the upper-layer length (`udp.len()`) and next
/// header 17. A result of 0 is sent as 0xffff, since 0 on the wire would
/// mean "no checksum". Over a datagram whose checksum is already filled
/// in, the result is therefore 0xffff when the datagram is intact.
pub fn udp6_checksum(src: &[u8; 16], dst: &[u8; 16], udp: &[u8]) -> u16 {
    let mut sum = Sum::default();
    sum.add(src);
    sum.add(dst);
    // The pseudo-header holds the length in 32 bits. Summing it as 64
    // bits adds only zero words for any real datagram, and keeps the
    // function total for a slice of 4 GiB or more. No target Linux supports
    // has a usize wider than 64 bits, so the fallback is never taken.
    let len = u64::try_from(udp.len()).unwrap_or(u64::MAX);
    sum.add(&len.to_be_bytes());
    sum.add(&[0, 0, 0, IPPROTO_UDP]);
    sum.add(udp);
    match !sum.fold() {
        0 => 0xffff,
        c => c,
    }
}

/// The IPv4 address in an IPv4-mapped IPv6 address (`::ffff:a.b.c.d`,
/// RFC 4291 section 2.5.5.2), which is how a RoCEv2 GID holds one.
pub fn ipv4_mapped(gid: &[u8; 16]) -> Option<[u8; 4]> {
    match *gid {
        [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, a, b, c, d] => Some([a, b, c, d]),
        _ => None,
    }
}

/// The GID of an IPv4 address: the IPv4-mapped IPv6 address
/// `::ffff:a.b.c.d`.
pub fn gid_from_ipv4(addr: [u8; 4]) -> [u8; 16] {
    let [a, b, c, d] = addr;
    [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, a, b, c, d]
}

/// The version nibble of an IP header's first byte.
const fn version(first: u8) -> u8 {
    first >> 4
}

/// The first 20 bytes of a received IPv4 header, read field by field.
///
/// # Invariants
///
/// The bytes begin with version 4.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ipv4View<'a> {
    /// The fixed part of the header.
    hdr: &'a [u8; IPV4_HDR_LEN],
}

impl<'a> Ipv4View<'a> {
    /// A view of the IPv4 header at the start of `hdr`, or `None` when
    /// `hdr` is shorter than 20 bytes or is not version 4.
    pub fn new(hdr: &'a [u8]) -> Option<Ipv4View<'a>> {
        let hdr = hdr.first_chunk::<IPV4_HDR_LEN>()?;
        if version(hdr[0]) != 4 {
            return None;
        }
        // INVARIANT: the version was just checked.
        Some(Ipv4View { hdr })
    }

    /// The header length in bytes from the IHL field (20 with no options).
    /// A damaged header may claim less than 20.
    pub fn header_len(&self) -> usize {
        usize::from(self.hdr[0] & 0xf) * 4
    }

    /// The type of service byte: DSCP and ECN.
    pub fn tos(&self) -> u8 {
        self.hdr[1]
    }

    /// The total length of the datagram, header included.
    pub fn total_len(&self) -> u16 {
        u16::from_be_bytes([self.hdr[2], self.hdr[3]])
    }

    /// The time to live.
    pub fn ttl(&self) -> u8 {
        self.hdr[8]
    }

    /// The protocol of the payload ([`IPPROTO_UDP`] for RoCEv2).
    pub fn protocol(&self) -> u8 {
        self.hdr[9]
    }

    /// The source address.
    pub fn src(&self) -> [u8; 4] {
        [self.hdr[12], self.hdr[13], self.hdr[14], self.hdr[15]]
    }

    /// The destination address.
    pub fn dst(&self) -> [u8; 4] {
        [self.hdr[16], self.hdr[17], self.hdr[18], self.hdr[19]]
    }

    /// The fixed 20 bytes of the header, options left out.
    pub fn bytes(&self) -> &'a [u8; IPV4_HDR_LEN] {
        self.hdr
    }
}

/// The source and destination address of the IPv4 header at the start of
/// `hdr`, or `None` when `hdr` is shorter than 20 bytes or is not
/// version 4.
pub fn ipv4_addrs(hdr: &[u8]) -> Option<([u8; 4], [u8; 4])> {
    Ipv4View::new(hdr).map(|v| (v.src(), v.dst()))
}

/// The first 40 bytes of `hdr` if they are an IPv6 header: long enough and
/// version 6.
fn ipv6_fixed(hdr: &[u8]) -> Option<&[u8; IPV6_HDR_LEN]> {
    hdr.first_chunk::<IPV6_HDR_LEN>()
        .filter(|h| version(h[0]) == 6)
}

/// The source and destination address of the IPv6 header at the start of
/// `hdr`, or `None` when `hdr` is shorter than 40 bytes or is not
/// version 6.
pub fn ipv6_addrs(hdr: &[u8]) -> Option<([u8; 16], [u8; 16])> {
    // Bytes 0 to 7 hold the fields before the addresses; the chunks
    // always exist in a 40-byte header.
    let (_, rest) = ipv6_fixed(hdr)?.split_first_chunk::<8>()?;
    let (src, rest) = rest.split_first_chunk::<16>()?;
    let dst = rest.first_chunk::<16>()?;
    Some((*src, *dst))
}

/// The source and destination GIDs of the IPv4 or IPv6 header at the
/// start of `hdr` (an IPv4 address as its IPv4-mapped GID), or `None` when
/// `hdr` is neither.
pub fn gids(hdr: &[u8]) -> Option<([u8; 16], [u8; 16])> {
    match ipv4_addrs(hdr) {
        Some((s, d)) => Some((gid_from_ipv4(s), gid_from_ipv4(d))),
        None => ipv6_addrs(hdr),
    }
}

/// Whether `gid` is a multicast address: IPv4 224.0.0.0/4 (mapped), or
/// IPv6 ff00::/8.
pub fn is_multicast(gid: &[u8; 16]) -> bool {
    match ipv4_mapped(gid) {
        Some([a, ..]) => a & 0xf0 == 0xe0,
        None => gid[0] == 0xff,
    }
}

/// The 40-byte GRH a UD receive gets in front of its payload, for a packet
/// that came in the IPv4 header at the start of `hdr`: 20 zero bytes, then
/// the 20 bytes of the header (options left out).
///
/// This is the layout Linux gives `union rdma_network_hdr` and that rxe
/// and the ConnectX drivers deliver; user space finds the header at offset
/// 20 (`ib_get_rdma_header_version` tells the two kinds apart by the IPv6
/// version nibble in byte 0, which is zero here). `None` when `hdr` is
/// shorter than 20 bytes or is not version 4.
pub fn grh_from_ipv4(hdr: &[u8]) -> Option<[u8; GRH_LEN]> {
    let v = Ipv4View::new(hdr)?;
    let mut grh = [0u8; GRH_LEN];
    put(&mut grh, GRH_LEN - IPV4_HDR_LEN, v.bytes());
    Some(grh)
}

/// The 40-byte GRH a UD receive gets in front of its payload, for a packet
/// that came in the IPv6 header at the start of `hdr`: the header itself,
/// whose layout the IB GRH shares. `None` when `hdr` is shorter than 40
/// bytes or is not version 6.
pub fn grh_from_ipv6(hdr: &[u8]) -> Option<[u8; GRH_LEN]> {
    ipv6_fixed(hdr).copied()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::vec::Vec;

    #[test]
    fn gids_of_both_versions() {
        let mut v4 = [0u8; IPV4_HDR_LEN];
        v4[0] = 0x45;
        v4[12..16].copy_from_slice(&[192, 0, 2, 1]);
        v4[16..20].copy_from_slice(&[192, 0, 2, 2]);
        assert_eq!(
            gids(&v4),
            Some((gid_from_ipv4([192, 0, 2, 1]), gid_from_ipv4([192, 0, 2, 2])))
        );
        let mut v6 = [0u8; IPV6_HDR_LEN];
        v6[0] = 0x60;
        v6[8] = 0xfe;
        v6[24] = 0xff;
        let (s, d) = gids(&v6).unwrap();
        assert_eq!((s[0], d[0]), (0xfe, 0xff));
        assert_eq!(gids(&v4[..19]), None);
        assert_eq!(gids(&[0x50; 40]), None);
    }

    #[test]
    fn multicast_gids() {
        assert!(is_multicast(&gid_from_ipv4([224, 0, 0, 1])));
        assert!(is_multicast(&gid_from_ipv4([239, 255, 1, 2])));
        assert!(!is_multicast(&gid_from_ipv4([192, 0, 2, 255])));
        assert!(!is_multicast(&gid_from_ipv4([240, 0, 0, 1])));
        let mut g = [0u8; 16];
        g[0] = 0xff;
        assert!(is_multicast(&g));
        g[0] = 0xfe;
        assert!(!is_multicast(&g));
    }

    /// The largest value of a 16-bit length field.
    const MAX_LEN16: usize = 0xffff;

    /// The example header from Wikipedia's "IPv4 header checksum" article,
    /// checksum included.
    const WIKI: [u8; 20] = [
        0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8, 0x00,
        0x01, 0xc0, 0xa8, 0x00, 0xc7,
    ];

    /// A plain RFC 1071 sum, one 16-bit word at a time, to check [`Sum`]
    /// against.
    fn naive_sum(data: &[u8]) -> u16 {
        let mut s: u64 = 0;
        for pair in data.chunks(2) {
            let hi = u64::from(pair[0]);
            let lo = pair.get(1).copied().map_or(0, u64::from);
            s += (hi << 8) | lo;
        }
        while s > 0xffff {
            s = (s & 0xffff) + (s >> 16);
        }
        s as u16
    }

    /// The pseudo-header and datagram of [`udp6_checksum`], laid out as
    /// bytes, summed the plain way.
    fn naive_udp6(src: &[u8; 16], dst: &[u8; 16], udp: &[u8]) -> u16 {
        let mut b = Vec::new();
        b.extend_from_slice(src);
        b.extend_from_slice(dst);
        b.extend_from_slice(&u32::try_from(udp.len()).unwrap().to_be_bytes());
        b.extend_from_slice(&[0, 0, 0, IPPROTO_UDP]);
        b.extend_from_slice(udp);
        match !naive_sum(&b) {
            0 => 0xffff,
            c => c,
        }
    }

    #[test]
    fn ipv4_checksum_known_answer() {
        let mut h = WIKI;
        h[10] = 0;
        h[11] = 0;
        assert_eq!(ipv4_checksum(&h), 0xb861);
        // Over the intact header the checksum comes out zero, and any
        // damage shows.
        assert_eq!(ipv4_checksum(&WIKI), 0);
        let mut bad = WIKI;
        bad[15] ^= 0x01;
        assert_ne!(ipv4_checksum(&bad), 0);
    }

    #[test]
    fn checksum_edges() {
        // Nothing, or only zeroes, sums to zero.
        assert_eq!(ipv4_checksum(&[]), 0xffff);
        assert_eq!(ipv4_checksum(&[0; 7]), 0xffff);
        // An odd last byte is the high byte of its word.
        assert_eq!(ipv4_checksum(&[0x12]), !0x1200);
        assert_eq!(ipv4_checksum(&[0x00, 0x01, 0x12]), !0x1201);
        // The carry out of bit 15 is added back in: 0xffff + 0x0002 is
        // 0x0002 in ones complement arithmetic.
        assert_eq!(ipv4_checksum(&[0xff, 0xff, 0x00, 0x02]), !0x0002);
        // Negative zero plus anything is that thing.
        assert_eq!(ipv4_checksum(&[0xff, 0xff, 0xff, 0xff]), 0);

        // The carry out of bit 63 is added back in too (2^64 - 2 + 5 is
        // 4 modulo 2^64 - 1), which no slice short of 16 GiB reaches.
        let mut s = Sum(u64::MAX - 1);
        s.add_u32(5);
        assert_eq!(s, Sum(4));
        let mut s = Sum(u64::MAX);
        s.add_u32(u32::MAX);
        assert_eq!(s, Sum(u64::from(u32::MAX)));
        // Folding: 0x0001_0000_fffe is 1 + 0 + 0xfffe = 0xffff.
        assert_eq!(Sum(0x0001_0000_fffe).fold(), 0xffff);
        assert_eq!(Sum(u64::MAX).fold(), 0xffff);
    }

    #[test]
    fn write_ipv4_matches_the_textbook_header() {
        // The Wikipedia header is exactly what roxe sends: DF, ID 0, UDP.
        let mut h = [0xaa; IPV4_HDR_LEN];
        assert!(write_ipv4_header(
            &mut h,
            [192, 168, 0, 1],
            [192, 168, 0, 199],
            0x73 - IPV4_HDR_LEN,
            0,
            64
        ));
        assert_eq!(h, WIKI);
    }

    #[test]
    fn write_ipv4_fields_and_limits() {
        let mut h = [0u8; IPV4_HDR_LEN];
        assert!(write_ipv4_header(
            &mut h,
            [10, 0, 0, 1],
            [10, 0, 0, 2],
            1000,
            0x02,
            1
        ));
        let v = Ipv4View::new(&h).unwrap();
        assert_eq!(v.header_len(), IPV4_HDR_LEN);
        assert_eq!(v.tos(), 0x02);
        assert_eq!(usize::from(v.total_len()), 1020);
        assert_eq!(v.ttl(), 1);
        assert_eq!(v.protocol(), IPPROTO_UDP);
        assert_eq!(u16::from_be_bytes([h[4], h[5]]), 0);
        assert_eq!(u16::from_be_bytes([h[6], h[7]]), IPV4_DF);
        assert_eq!(ipv4_checksum(&h), 0);

        // The largest datagram fits; one byte more is refused and leaves
        // the buffer alone.
        assert!(write_ipv4_header(
            &mut h,
            [1; 4],
            [2; 4],
            MAX_LEN16 - IPV4_HDR_LEN,
            0,
            64
        ));
        assert_eq!(Ipv4View::new(&h).unwrap().total_len(), 0xffff);
        assert_eq!(ipv4_checksum(&h), 0);
        let before = h;
        assert!(!write_ipv4_header(
            &mut h,
            [3; 4],
            [4; 4],
            MAX_LEN16 - IPV4_HDR_LEN + 1,
            0,
            64
        ));
        assert!(!write_ipv4_header(
            &mut h,
            [3; 4],
            [4; 4],
            usize::MAX,
            0,
            64
        ));
        assert!(!write_ipv4_header(
            &mut h,
            [3; 4],
            [4; 4],
            usize::MAX - 19,
            0,
            64
        ));
        assert_eq!(h, before);
    }

    #[test]
    fn write_ipv6_layout_by_hand() {
        let src = [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
        let dst = [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];
        let mut h = [0u8; IPV6_HDR_LEN];
        // A flow label wider than 20 bits loses its high bits.
        assert!(write_ipv6_header(
            &mut h,
            src,
            dst,
            0x1234,
            0xab,
            0xfff1_2345,
            7
        ));
        assert_eq!(h[..8], [0x6a, 0xb1, 0x23, 0x45, 0x12, 0x34, 17, 7]);
        assert_eq!(h[8..24], src);
        assert_eq!(h[24..], dst);
        assert_eq!(ipv6_addrs(&h), Some((src, dst)));

        assert!(write_ipv6_header(&mut h, dst, src, MAX_LEN16, 0, 0, 64));
        assert_eq!(h[4..6], [0xff, 0xff]);
        let before = h;
        assert!(!write_ipv6_header(
            &mut h,
            src,
            dst,
            MAX_LEN16 + 1,
            0,
            0,
            64
        ));
        assert!(!write_ipv6_header(&mut h, src, dst, usize::MAX, 0, 0, 64));
        assert_eq!(h, before);
    }

    #[test]
    fn write_udp_layout_and_limits() {
        let mut u = [0xaa; UDP_HDR_LEN];
        assert!(write_udp_header(&mut u, 0xc123, 4791, 28));
        assert_eq!(u, [0xc1, 0x23, 0x12, 0xb7, 0x00, 0x24, 0, 0]);
        assert!(write_udp_header(&mut u, 1, 2, MAX_LEN16 - UDP_HDR_LEN));
        assert_eq!(u[4..6], [0xff, 0xff]);
        let before = u;
        assert!(!write_udp_header(&mut u, 3, 4, MAX_LEN16 - UDP_HDR_LEN + 1));
        assert!(!write_udp_header(&mut u, 3, 4, usize::MAX));
        assert_eq!(u, before);
    }

    #[test]
    fn udp6_checksum_known_answers() {
        let src = [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
        let dst = [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];
        // A UD SEND's BTH and four bytes of payload, worked out with an
        // independent script.
        let payload = [
            0x64, 0x00, 0xff, 0xff, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, b'r', b'o',
            b'x', b'e',
        ];
        let mut d = [0u8; UDP_HDR_LEN + 16];
        let (hdr, body) = d.split_at_mut(UDP_HDR_LEN);
        assert!(write_udp_header(
            hdr.try_into().unwrap(),
            0xc000,
            4791,
            payload.len()
        ));
        body.copy_from_slice(&payload);
        let c = udp6_checksum(&src, &dst, &d);
        assert_eq!(c, 0xe12b);

        // With the checksum stored, the sum over the datagram is negative
        // zero, which the function reports as 0xffff.
        d[6..8].copy_from_slice(&c.to_be_bytes());
        assert_eq!(udp6_checksum(&src, &dst, &d), 0xffff);
        // Damage anywhere, addresses included, shows.
        d[20] ^= 0x40;
        assert_ne!(udp6_checksum(&src, &dst, &d), 0xffff);
        d[20] ^= 0x40;
        let mut other = dst;
        other[15] = 3;
        assert_ne!(udp6_checksum(&src, &other, &d), 0xffff);

        // An odd-length datagram (the same script): header and one byte.
        let mut odd = [0u8; UDP_HDR_LEN + 1];
        let (hdr, body) = odd.split_at_mut(UDP_HDR_LEN);
        assert!(write_udp_header(hdr.try_into().unwrap(), 0x1234, 4791, 1));
        body[0] = 0x01;
        assert_eq!(udp6_checksum(&src, &dst, &odd), 0xdcec);
    }

    #[test]
    fn udp6_checksum_never_sends_zero() {
        // Choose the last payload word so the sum is exactly 0xffff: the
        // complement is 0 and must go out as 0xffff.
        let src = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9];
        let dst = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 10];
        let mut d = [0u8; UDP_HDR_LEN + 4];
        let (hdr, _) = d.split_at_mut(UDP_HDR_LEN);
        assert!(write_udp_header(hdr.try_into().unwrap(), 0xd00d, 4791, 4));
        let fill = udp6_checksum(&src, &dst, &d);
        d[10..12].copy_from_slice(&fill.to_be_bytes());
        assert_eq!(
            naive_sum(&[&src[..], &dst, &[0, 0, 0, 12, 0, 0, 0, 17], &d].concat()),
            0xffff
        );
        assert_eq!(udp6_checksum(&src, &dst, &d), 0xffff);
    }

    #[test]
    fn mapped_gids() {
        let gid = gid_from_ipv4([192, 0, 2, 7]);
        assert_eq!(
            gid,
            [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 7]
        );
        assert_eq!(ipv4_mapped(&gid), Some([192, 0, 2, 7]));
        // The unspecified IPv4 address is still mapped.
        assert_eq!(ipv4_mapped(&gid_from_ipv4([0; 4])), Some([0; 4]));

        // A link-local GID, the IPv4-compatible form (no 0xffff), a
        // near miss in the prefix, and all ones are not mapped.
        let link_local = [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 1, 2, 3, 4];
        assert_eq!(ipv4_mapped(&link_local), None);
        assert_eq!(
            ipv4_mapped(&[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4]),
            None
        );
        assert_eq!(
            ipv4_mapped(&[0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, 0xff, 1, 2, 3, 4]),
            None
        );
        assert_eq!(
            ipv4_mapped(&[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xfe, 1, 2, 3, 4]),
            None
        );
        assert_eq!(ipv4_mapped(&[0xff; 16]), None);
    }

    #[test]
    fn parsers_reject_short_and_wrong_version() {
        assert_eq!(
            ipv4_addrs(&WIKI),
            Some(([192, 168, 0, 1], [192, 168, 0, 199]))
        );
        assert_eq!(ipv4_addrs(&WIKI[..19]), None);
        assert_eq!(ipv4_addrs(&[]), None);
        let mut v6 = WIKI;
        v6[0] = 0x65;
        assert_eq!(ipv4_addrs(&v6), None);
        assert_eq!(grh_from_ipv4(&v6), None);
        assert_eq!(grh_from_ipv4(&WIKI[..19]), None);

        let mut h = [0u8; IPV6_HDR_LEN];
        assert!(write_ipv6_header(&mut h, [1; 16], [2; 16], 0, 0, 0, 1));
        assert_eq!(ipv6_addrs(&h), Some(([1; 16], [2; 16])));
        assert_eq!(ipv6_addrs(&h[..39]), None);
        assert_eq!(grh_from_ipv6(&h[..39]), None);
        h[0] = 0x45;
        assert_eq!(ipv6_addrs(&h), None);
        assert_eq!(grh_from_ipv6(&h), None);
    }

    #[test]
    fn grh_placement() {
        // IPv4: the first 20 bytes are zero and the header sits at 20;
        // options and payload behind it stay out.
        let mut pkt = Vec::from(WIKI);
        pkt[0] = 0x46;
        pkt.extend_from_slice(&[0x01, 0x01, 0x01, 0x00, 0xde, 0xad]);
        let grh = grh_from_ipv4(&pkt).unwrap();
        assert_eq!(grh[..20], [0; 20]);
        assert_eq!(grh[20..], pkt[..20]);
        // The kernel tells the kinds apart by the version nibble in byte 0.
        assert_ne!(grh[0] >> 4, 6);

        // IPv6: the header itself, nothing after it.
        let mut pkt = [0x5a; IPV6_HDR_LEN + 8];
        let (h, _) = pkt.split_at_mut(IPV6_HDR_LEN);
        assert!(write_ipv6_header(
            h.try_into().unwrap(),
            [3; 16],
            [4; 16],
            8,
            0x12,
            0x54321,
            9
        ));
        let grh = grh_from_ipv6(&pkt).unwrap();
        assert_eq!(grh[..], pkt[..IPV6_HDR_LEN]);
        assert_eq!(grh[0] >> 4, 6);
    }

    proptest! {
        #[test]
        fn sum_matches_the_plain_sum(data in proptest::collection::vec(any::<u8>(), 0..200)) {
            prop_assert_eq!(ipv4_checksum(&data), !naive_sum(&data));
        }

        #[test]
        fn udp6_matches_the_plain_sum_and_verifies(
            src in any::<[u8; 16]>(),
            dst in any::<[u8; 16]>(),
            ports in any::<(u16, u16)>(),
            payload in proptest::collection::vec(any::<u8>(), 0..200),
        ) {
            let mut d = std::vec![0u8; UDP_HDR_LEN];
            let hdr: &mut [u8; UDP_HDR_LEN] = d.as_mut_slice().try_into().unwrap();
            prop_assert!(write_udp_header(hdr, ports.0, ports.1, payload.len()));
            d.extend_from_slice(&payload);
            let c = udp6_checksum(&src, &dst, &d);
            prop_assert_eq!(c, naive_udp6(&src, &dst, &d));
            prop_assert_ne!(c, 0);
            d[6..8].copy_from_slice(&c.to_be_bytes());
            prop_assert_eq!(udp6_checksum(&src, &dst, &d), 0xffff);
        }

        #[test]
        fn ipv4_round_trips(
            src in any::<[u8; 4]>(),
            dst in any::<[u8; 4]>(),
            len in 0usize..=MAX_LEN16 - IPV4_HDR_LEN,
            tos in any::<u8>(),
            ttl in any::<u8>(),
        ) {
            let mut h = [0u8; IPV4_HDR_LEN];
            prop_assert!(write_ipv4_header(&mut h, src, dst, len, tos, ttl));
            prop_assert_eq!(ipv4_checksum(&h), 0);
            prop_assert_eq!(ipv4_addrs(&h), Some((src, dst)));
            let v = Ipv4View::new(&h).unwrap();
            prop_assert_eq!(usize::from(v.total_len()), len + IPV4_HDR_LEN);
            prop_assert_eq!((v.tos(), v.ttl()), (tos, ttl));
            let grh = grh_from_ipv4(&h).unwrap();
            prop_assert_eq!(&grh[20..], &h[..]);
        }

        #[test]
        fn ipv6_round_trips(
            src in any::<[u8; 16]>(),
            dst in any::<[u8; 16]>(),
            len in 0usize..=MAX_LEN16,
            tc in any::<u8>(),
            fl in any::<u32>(),
            hop in any::<u8>(),
        ) {
            let mut h = [0u8; IPV6_HDR_LEN];
            prop_assert!(write_ipv6_header(&mut h, src, dst, len, tc, fl, hop));
            prop_assert_eq!(ipv6_addrs(&h), Some((src, dst)));
            let w = u32::from_be_bytes([h[0], h[1], h[2], h[3]]);
            prop_assert_eq!(w >> 28, 6);
            prop_assert_eq!((w >> 20) & 0xff, u32::from(tc));
            prop_assert_eq!(w & FLOW_LABEL_MASK, fl & FLOW_LABEL_MASK);
            prop_assert_eq!(usize::from(u16::from_be_bytes([h[4], h[5]])), len);
            prop_assert_eq!((h[6], h[7]), (IPPROTO_UDP, hop));
            prop_assert_eq!(grh_from_ipv6(&h), Some(h));
        }

        #[test]
        fn parsers_take_any_bytes(data in proptest::collection::vec(any::<u8>(), 0..64)) {
            // No input panics, and each parser answers exactly when the
            // bytes are long enough and of its version.
            let v4 = data.len() >= IPV4_HDR_LEN && data[0] >> 4 == 4;
            let v6 = data.len() >= IPV6_HDR_LEN && data[0] >> 4 == 6;
            prop_assert_eq!(ipv4_addrs(&data).is_some(), v4);
            prop_assert_eq!(grh_from_ipv4(&data).is_some(), v4);
            prop_assert_eq!(ipv6_addrs(&data).is_some(), v6);
            prop_assert_eq!(grh_from_ipv6(&data).is_some(), v6);
        }
    }
}
