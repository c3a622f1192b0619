// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Flow steering rules for raw packet QPs (`ibv_create_flow`).
//!
//! A raw packet QP receives whole Ethernet frames, and only those that a
//! flow attached to it selects. The RDMA core hands the driver a flow as
//! a list of specs, one per header layer, each a value and a mask. The
//! driver feeds them, in the order the user gave them, to a [`Rule`]
//! through [`Rule::add_eth`], [`Rule::add_ipv4`], [`Rule::add_ipv6`] and
//! [`Rule::add_l4`], which enforce what hardware enforces:
//!
//! - at most one spec per layer (Ethernet, IP, TCP/UDP);
//! - layers in that order, and a TCP/UDP spec only after an IP spec;
//! - an IP spec implies its ether type (`0x0800` or `0x86dd`), and a
//!   TCP/UDP spec implies the IP protocol (6 or 17); a lower spec whose
//!   mask covers that field must agree with it.
//!
//! Values are compared under their masks: a bit clear in the mask is not
//! compared, and the builder clears it in the value too, so equal rules
//! compare equal.
//!
//! [`Rule::matches`] then decides for each received frame, starting at
//! the destination MAC, whether the rule selects it. It reads untagged
//! Ethernet II only:
//!
//! - A VLAN-tagged frame (outer ether type `0x8100`) is compared as it
//!   stands: its ether type is `0x8100`, and no IP header is looked for
//!   behind the tag. So it matches only a rule with no IP or TCP/UDP spec
//!   whose Ethernet spec leaves the ether type unmasked or asks for
//!   `0x8100`.
//! - An IPv4 header must say version 4 and have an IHL of at least 5, and
//!   the frame must hold all IHL * 4 bytes of it. The ports are read
//!   behind the options, and only from an unfragmented datagram or its
//!   first fragment (fragment offset 0); later fragments carry no ports
//!   and match no TCP/UDP spec.
//! - An IPv6 header must say version 6. The next header is taken from the
//!   fixed 40-byte header: extension headers are not walked, so a packet
//!   with any (hop-by-hop options, fragment, ...) matches no TCP/UDP spec.
//!
//! A rule needs every header it has a spec for, whatever its mask: a
//! frame too short to hold one never matches. The length fields inside
//! the headers are not checked against the frame, since Ethernet pads
//! short frames; nothing past the compared headers is read. An empty
//! rule matches every frame, even an empty one.
//!
//! The matcher reads the frame only through checked accesses, so no
//! frame, however short or damaged, makes it panic.

use super::ip::{Ipv4View, IPPROTO_UDP, IPV4_HDR_LEN, IPV6_HDR_LEN, UDP_HDR_LEN};
use super::udp::FLOW_LABEL_MASK;

/// Bytes of an untagged Ethernet II header: two MACs and the ether type.
pub const ETH_HDR_LEN: usize = 14;
/// Bytes of a TCP header without options.
pub const TCP_HDR_LEN: usize = 20;
/// The ether type of IPv4.
pub const ETH_P_IP: u16 = 0x0800;
/// The ether type of IPv6.
pub const ETH_P_IPV6: u16 = 0x86dd;
/// The ether type of an IEEE 802.1Q VLAN tag.
pub const ETH_P_8021Q: u16 = 0x8100;
/// The IP protocol number (IPv4) and next header (IPv6) of TCP.
pub const IPPROTO_TCP: u8 = 6;

/// The `N` bytes of `buf` from `off`, if there are that many.
fn array_at<const N: usize>(buf: &[u8], off: usize) -> Option<&[u8; N]> {
    let end = off.checked_add(N)?;
    buf.get(off..end)?.try_into().ok()
}

/// `a` with only the bits of `mask` kept.
fn and_bytes<const N: usize>(a: [u8; N], mask: &[u8; N]) -> [u8; N] {
    let mut out = a;
    for (o, m) in out.iter_mut().zip(mask) {
        *o &= m;
    }
    out
}

/// The Ethernet fields a flow can select on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EthFilter {
    /// The destination MAC.
    pub dst_mac: [u8; 6],
    /// The source MAC.
    pub src_mac: [u8; 6],
    /// The ether type, in host byte order.
    pub ether_type: u16,
}

impl EthFilter {
    /// `self` with only the bits of `mask` kept.
    fn and(self, mask: &EthFilter) -> EthFilter {
        EthFilter {
            dst_mac: and_bytes(self.dst_mac, &mask.dst_mac),
            src_mac: and_bytes(self.src_mac, &mask.src_mac),
            ether_type: self.ether_type & mask.ether_type,
        }
    }

    /// Reads the fields of the Ethernet header at the start of `frame`,
    /// or `None` when `frame` is shorter than one.
    fn from_header(frame: &[u8]) -> Option<EthFilter> {
        Some(EthFilter {
            dst_mac: *array_at::<6>(frame, 0)?,
            src_mac: *array_at::<6>(frame, 6)?,
            ether_type: u16::from_be_bytes(*array_at::<2>(frame, 12)?),
        })
    }
}

/// The IPv4 fields a flow can select on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ipv4Filter {
    /// The source address.
    pub src: [u8; 4],
    /// The destination address.
    pub dst: [u8; 4],
    /// The protocol of the payload.
    pub proto: u8,
    /// The type of service byte: DSCP and ECN.
    pub tos: u8,
    /// The time to live.
    pub ttl: u8,
}

impl Ipv4Filter {
    /// `self` with only the bits of `mask` kept.
    fn and(self, mask: &Ipv4Filter) -> Ipv4Filter {
        Ipv4Filter {
            src: and_bytes(self.src, &mask.src),
            dst: and_bytes(self.dst, &mask.dst),
            proto: self.proto & mask.proto,
            tos: self.tos & mask.tos,
            ttl: self.ttl & mask.ttl,
        }
    }

    /// Reads the fields of the header `hdr`.
    fn from_header(hdr: &Ipv4View<'_>) -> Ipv4Filter {
        Ipv4Filter {
            src: hdr.src(),
            dst: hdr.dst(),
            proto: hdr.protocol(),
            tos: hdr.tos(),
            ttl: hdr.ttl(),
        }
    }
}

/// The IPv6 fields a flow can select on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ipv6Filter {
    /// The source address.
    pub src: [u8; 16],
    /// The destination address.
    pub dst: [u8; 16],
    /// The flow label: 20 bits, in host byte order.
    pub flow_label: u32,
    /// The next header of the fixed header.
    pub next_hdr: u8,
    /// The traffic class: DSCP and ECN.
    pub traffic_class: u8,
    /// The hop limit.
    pub hop_limit: u8,
}

impl Ipv6Filter {
    /// `self` with only the bits of `mask` kept.
    fn and(self, mask: &Ipv6Filter) -> Ipv6Filter {
        Ipv6Filter {
            src: and_bytes(self.src, &mask.src),
            dst: and_bytes(self.dst, &mask.dst),
            flow_label: self.flow_label & mask.flow_label,
            next_hdr: self.next_hdr & mask.next_hdr,
            traffic_class: self.traffic_class & mask.traffic_class,
            hop_limit: self.hop_limit & mask.hop_limit,
        }
    }

    /// Reads the fields of the IPv6 header at the start of `ip`, or
    /// `None` when `ip` is shorter than the fixed header or is not
    /// version 6.
    fn from_header(ip: &[u8]) -> Option<Ipv6Filter> {
        // Bytes 0 to 3: version (4 bits), traffic class (8), flow label (20).
        let word = u32::from_be_bytes(*array_at::<4>(ip, 0)?);
        if word >> 28 != 6 || ip.len() < IPV6_HDR_LEN {
            return None;
        }
        let [next_hdr, hop_limit] = *array_at::<2>(ip, 6)?;
        Some(Ipv6Filter {
            src: *array_at::<16>(ip, 8)?,
            dst: *array_at::<16>(ip, 24)?,
            flow_label: word & FLOW_LABEL_MASK,
            // CAST: shifted and masked to 8 bits.
            traffic_class: ((word >> 20) & 0xff) as u8,
            next_hdr,
            hop_limit,
        })
    }
}

/// The TCP or UDP ports a flow can select on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PortFilter {
    /// The source port, in host byte order.
    pub src: u16,
    /// The destination port, in host byte order.
    pub dst: u16,
}

impl PortFilter {
    /// `self` with only the bits of `mask` kept.
    fn and(self, mask: &PortFilter) -> PortFilter {
        PortFilter {
            src: self.src & mask.src,
            dst: self.dst & mask.dst,
        }
    }
}

/// The IP spec of a rule: one version, its value and its mask.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum L3 {
    /// An IPv4 spec.
    V4 {
        /// The fields to compare against.
        val: Ipv4Filter,
        /// The bits of each field that are compared.
        mask: Ipv4Filter,
    },
    /// An IPv6 spec.
    V6 {
        /// The fields to compare against.
        val: Ipv6Filter,
        /// The bits of each field that are compared.
        mask: Ipv6Filter,
    },
}

impl L3 {
    /// The ether type this spec implies.
    pub const fn ether_type(&self) -> u16 {
        match self {
            L3::V4 { .. } => ETH_P_IP,
            L3::V6 { .. } => ETH_P_IPV6,
        }
    }

    /// The spec's payload protocol: its value and its mask.
    fn proto(&self) -> (u8, u8) {
        match self {
            L3::V4 { val, mask } => (val.proto, mask.proto),
            L3::V6 { val, mask } => (val.next_hdr, mask.next_hdr),
        }
    }
}

/// The transport a TCP/UDP spec selects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum L4Proto {
    /// TCP.
    Tcp,
    /// UDP.
    Udp,
}

impl L4Proto {
    /// The IP protocol number (and IPv6 next header) of the transport.
    pub const fn ip_proto(self) -> u8 {
        match self {
            L4Proto::Tcp => IPPROTO_TCP,
            L4Proto::Udp => IPPROTO_UDP,
        }
    }

    /// Bytes of the transport's header without options: what a frame
    /// must hold for the spec to match.
    pub const fn header_len(self) -> usize {
        match self {
            L4Proto::Tcp => TCP_HDR_LEN,
            L4Proto::Udp => UDP_HDR_LEN,
        }
    }
}

/// Why a spec cannot join a [`Rule`]. The driver answers each with
/// `EINVAL`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RuleError {
    /// The rule already has a spec for this layer.
    Duplicate,
    /// A spec for a higher layer came before this one.
    OutOfOrder,
    /// A TCP/UDP spec with no IP spec before it.
    L4WithoutL3,
    /// The Ethernet spec asks for an ether type other than the IP spec's.
    EtherTypeConflict,
    /// The IP spec asks for a protocol other than the TCP/UDP spec's.
    ProtoConflict,
    /// An IPv6 flow label value or mask wider than 20 bits.
    FlowLabelTooWide,
}

/// A flow steering rule: the specs of one flow, each a value and a mask.
///
/// Build it with [`Rule::new`] and the `add_*` methods, which check the
/// specs against each other and clear value bits outside their masks. A
/// rule written by hand instead is matched as it stands: a TCP/UDP spec
/// without an IP spec then matches nothing, and specs that disagree match
/// nothing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Rule {
    /// The Ethernet spec: value, then mask.
    pub eth: Option<(EthFilter, EthFilter)>,
    /// The IP spec.
    pub l3: Option<L3>,
    /// The TCP/UDP spec: transport, value, then mask.
    pub l4: Option<(L4Proto, PortFilter, PortFilter)>,
}

/// What [`Rule::matches`] found behind a matching IP header.
struct Transport<'a> {
    /// The IPv4 protocol or IPv6 next header.
    proto: u8,
    /// The bytes behind the IP header, or `None` for a later fragment.
    bytes: Option<&'a [u8]>,
}

impl Rule {
    /// A rule with no specs, which matches every frame.
    pub const fn new() -> Rule {
        Rule {
            eth: None,
            l3: None,
            l4: None,
        }
    }

    /// Adds the Ethernet spec `val` under `mask`.
    ///
    /// On an error the rule is left as it was.
    pub fn add_eth(&mut self, val: EthFilter, mask: EthFilter) -> Result<(), RuleError> {
        if self.eth.is_some() {
            return Err(RuleError::Duplicate);
        }
        if self.l3.is_some() || self.l4.is_some() {
            return Err(RuleError::OutOfOrder);
        }
        self.eth = Some((val.and(&mask), mask));
        Ok(())
    }

    /// Adds the IPv4 spec `val` under `mask`.
    ///
    /// On an error the rule is left as it was.
    pub fn add_ipv4(&mut self, val: Ipv4Filter, mask: Ipv4Filter) -> Result<(), RuleError> {
        self.add_l3(L3::V4 {
            val: val.and(&mask),
            mask,
        })
    }

    /// Adds the IPv6 spec `val` under `mask`.
    ///
    /// On an error the rule is left as it was.
    pub fn add_ipv6(&mut self, val: Ipv6Filter, mask: Ipv6Filter) -> Result<(), RuleError> {
        if val.flow_label & !FLOW_LABEL_MASK != 0 || mask.flow_label & !FLOW_LABEL_MASK != 0 {
            return Err(RuleError::FlowLabelTooWide);
        }
        self.add_l3(L3::V6 {
            val: val.and(&mask),
            mask,
        })
    }

    /// Adds the IP spec `l3`, whose value is already masked.
    fn add_l3(&mut self, l3: L3) -> Result<(), RuleError> {
        if self.l3.is_some() {
            return Err(RuleError::Duplicate);
        }
        if self.l4.is_some() {
            return Err(RuleError::OutOfOrder);
        }
        if let Some((val, mask)) = &self.eth {
            if val.ether_type & mask.ether_type != l3.ether_type() & mask.ether_type {
                return Err(RuleError::EtherTypeConflict);
            }
        }
        self.l3 = Some(l3);
        Ok(())
    }

    /// Adds the TCP/UDP spec for `proto`: ports `val` under `mask`.
    ///
    /// On an error the rule is left as it was.
    pub fn add_l4(
        &mut self,
        proto: L4Proto,
        val: PortFilter,
        mask: PortFilter,
    ) -> Result<(), RuleError> {
        if self.l4.is_some() {
            return Err(RuleError::Duplicate);
        }
        let Some(l3) = &self.l3 else {
            return Err(RuleError::L4WithoutL3);
        };
        let (want, want_mask) = l3.proto();
        if want & want_mask != proto.ip_proto() & want_mask {
            return Err(RuleError::ProtoConflict);
        }
        self.l4 = Some((proto, val.and(&mask), mask));
        Ok(())
    }

    /// Whether the rule selects `frame`, an untagged Ethernet II frame
    /// starting at the destination MAC. See the module documentation for
    /// which headers are read and how.
    pub fn matches(&self, frame: &[u8]) -> bool {
        if self.eth.is_none() && self.l3.is_none() && self.l4.is_none() {
            return true;
        }
        let Some(eth) = EthFilter::from_header(frame) else {
            return false;
        };
        if let Some((val, mask)) = &self.eth {
            if eth.and(mask) != val.and(mask) {
                return false;
            }
        }
        let Some(l3) = &self.l3 else {
            // A TCP/UDP spec without an IP spec cannot be located.
            return self.l4.is_none();
        };
        if eth.ether_type != l3.ether_type() {
            return false;
        }
        let Some(ip) = frame.get(ETH_HDR_LEN..) else {
            return false;
        };
        let transport = match l3 {
            L3::V4 { val, mask } => match_ipv4(ip, val, mask),
            L3::V6 { val, mask } => match_ipv6(ip, val, mask),
        };
        let Some(transport) = transport else {
            return false;
        };
        let Some((proto, val, mask)) = &self.l4 else {
            return true;
        };
        if transport.proto != proto.ip_proto() {
            return false;
        }
        // A later fragment has no transport header to read.
        let Some(l4) = transport.bytes else {
            return false;
        };
        if l4.len() < proto.header_len() {
            return false;
        }
        // TCP and UDP both start with the source, then the destination port.
        let (Some(src), Some(dst)) = (array_at::<2>(l4, 0), array_at::<2>(l4, 2)) else {
            return false;
        };
        let got = PortFilter {
            src: u16::from_be_bytes(*src),
            dst: u16::from_be_bytes(*dst),
        };
        got.and(mask) == val.and(mask)
    }
}

/// Matches the IPv4 header at the start of `ip` against `val` under
/// `mask`, and finds what it carries.
fn match_ipv4<'a>(ip: &'a [u8], val: &Ipv4Filter, mask: &Ipv4Filter) -> Option<Transport<'a>> {
    let hdr = Ipv4View::new(ip)?;
    let hdr_len = hdr.header_len();
    if hdr_len < IPV4_HDR_LEN {
        return None;
    }
    // The whole header, options included, must be there.
    let rest = ip.get(hdr_len..)?;
    let got = Ipv4Filter::from_header(&hdr);
    if got.and(mask) != val.and(mask) {
        return None;
    }
    // Bytes 6 and 7: three flag bits, then the 13-bit fragment offset.
    let frag_off = u16::from_be_bytes(*array_at::<2>(ip, 6)?) & 0x1fff;
    Some(Transport {
        proto: got.proto,
        bytes: (frag_off == 0).then_some(rest),
    })
}

/// Matches the IPv6 header at the start of `ip` against `val` under
/// `mask`, and finds what its fixed header says it carries.
fn match_ipv6<'a>(ip: &'a [u8], val: &Ipv6Filter, mask: &Ipv6Filter) -> Option<Transport<'a>> {
    let got = Ipv6Filter::from_header(ip)?;
    if got.and(mask) != val.and(mask) {
        return None;
    }
    Some(Transport {
        proto: got.next_hdr,
        bytes: ip.get(IPV6_HDR_LEN..),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec::Vec;

    const MAC_A: [u8; 6] = [0x02, 0x00, 0x00, 0x00, 0x00, 0x0a];
    const MAC_B: [u8; 6] = [0x02, 0x00, 0x00, 0x00, 0x00, 0x0b];
    const BCAST: [u8; 6] = [0xff; 6];
    const V4_A: [u8; 4] = [192, 168, 1, 10];
    const V4_B: [u8; 4] = [192, 168, 1, 20];
    const V6_A: [u8; 16] = [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
    const V6_B: [u8; 16] = [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];
    const ROCE_PORT: u16 = 4791;
    const SPORT: u16 = 0xc123;
    const HTTP_PORT: u16 = 80;

    fn eth(dst: [u8; 6], src: [u8; 6], ether_type: u16) -> Vec<u8> {
        let mut f = Vec::new();
        f.extend_from_slice(&dst);
        f.extend_from_slice(&src);
        f.extend_from_slice(&ether_type.to_be_bytes());
        f
    }

    /// An IPv4 header with `opt_words` words of options, protocol `proto`
    /// and fragment field `frag`.
    fn ipv4(proto: u8, opt_words: u8, frag: u16) -> Vec<u8> {
        let mut h = std::vec![0x45 + opt_words, 0x28, 0, 0, 0, 0];
        h.extend_from_slice(&frag.to_be_bytes());
        h.extend_from_slice(&[64, proto, 0, 0]);
        h.extend_from_slice(&V4_A);
        h.extend_from_slice(&V4_B);
        h.extend(core::iter::repeat_n(1u8, usize::from(opt_words) * 4));
        h
    }

    /// An IPv6 header: traffic class 0xb8, flow label 0x12345.
    fn ipv6(next_hdr: u8) -> Vec<u8> {
        let mut h = std::vec![0x6b, 0x81, 0x23, 0x45, 0, 12, next_hdr, 64];
        h.extend_from_slice(&V6_A);
        h.extend_from_slice(&V6_B);
        h
    }

    fn udp(src: u16, dst: u16) -> Vec<u8> {
        let mut h = Vec::new();
        h.extend_from_slice(&src.to_be_bytes());
        h.extend_from_slice(&dst.to_be_bytes());
        h.extend_from_slice(&[0, 12, 0, 0]);
        h.extend_from_slice(b"data");
        h
    }

    fn tcp(src: u16, dst: u16) -> Vec<u8> {
        let mut h = Vec::new();
        h.extend_from_slice(&src.to_be_bytes());
        h.extend_from_slice(&dst.to_be_bytes());
        // Sequence, acknowledgement, data offset 5, SYN, window,
        // checksum, urgent pointer.
        h.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x02, 0xff, 0xff, 0, 0, 0, 0]);
        h
    }

    fn cat(parts: &[&[u8]]) -> Vec<u8> {
        parts.concat()
    }

    /// The frames of the matrix, each with a name.
    fn frames() -> Vec<(&'static str, Vec<u8>)> {
        let arp_body = [0u8, 1, 8, 0, 6, 4, 0, 1];
        std::vec![
            (
                "arp",
                cat(&[&eth(BCAST, MAC_A, 0x0806), &arp_body, &[0; 20]])
            ),
            (
                "v4_udp",
                cat(&[
                    &eth(MAC_B, MAC_A, ETH_P_IP),
                    &ipv4(IPPROTO_UDP, 0, 0x4000),
                    &udp(SPORT, ROCE_PORT)
                ]),
            ),
            (
                "v4_tcp",
                cat(&[
                    &eth(MAC_B, MAC_A, ETH_P_IP),
                    &ipv4(IPPROTO_TCP, 0, 0),
                    &tcp(SPORT, HTTP_PORT)
                ]),
            ),
            (
                "v4_udp_opts",
                cat(&[
                    &eth(MAC_B, MAC_A, ETH_P_IP),
                    &ipv4(IPPROTO_UDP, 2, 0),
                    &udp(SPORT, ROCE_PORT)
                ]),
            ),
            (
                // More fragments set, offset 0: the first fragment.
                "v4_udp_frag0",
                cat(&[
                    &eth(MAC_B, MAC_A, ETH_P_IP),
                    &ipv4(IPPROTO_UDP, 0, 0x2000),
                    &udp(SPORT, ROCE_PORT)
                ]),
            ),
            (
                // Offset 185 * 8 bytes: what follows the header is data,
                // though it happens to look like the same ports.
                "v4_udp_frag1",
                cat(&[
                    &eth(MAC_B, MAC_A, ETH_P_IP),
                    &ipv4(IPPROTO_UDP, 0, 185),
                    &udp(SPORT, ROCE_PORT)
                ]),
            ),
            (
                "v6_udp",
                cat(&[
                    &eth(MAC_B, MAC_A, ETH_P_IPV6),
                    &ipv6(IPPROTO_UDP),
                    &udp(SPORT, ROCE_PORT)
                ]),
            ),
            (
                // A hop-by-hop options header (next header 0) before UDP.
                "v6_hbh_udp",
                cat(&[
                    &eth(MAC_B, MAC_A, ETH_P_IPV6),
                    &ipv6(0),
                    &[IPPROTO_UDP, 0, 1, 4, 0, 0, 0, 0],
                    &udp(SPORT, ROCE_PORT),
                ]),
            ),
            (
                "vlan_v4_udp",
                cat(&[
                    &eth(MAC_B, MAC_A, ETH_P_8021Q),
                    &[0x00, 0x05],
                    &ETH_P_IP.to_be_bytes(),
                    &ipv4(IPPROTO_UDP, 0, 0),
                    &udp(SPORT, ROCE_PORT),
                ]),
            ),
            (
                // A good IPv4 UDP frame but for version 6 in the header.
                "v4_bad_version",
                {
                    let mut f = cat(&[
                        &eth(MAC_B, MAC_A, ETH_P_IP),
                        &ipv4(IPPROTO_UDP, 0, 0),
                        &udp(SPORT, ROCE_PORT),
                    ]);
                    f[ETH_HDR_LEN] = 0x65;
                    f
                },
            ),
            (
                // A good IPv6 UDP frame but for version 4 in the header.
                "v6_bad_version",
                {
                    let mut f = cat(&[
                        &eth(MAC_B, MAC_A, ETH_P_IPV6),
                        &ipv6(IPPROTO_UDP),
                        &udp(SPORT, ROCE_PORT),
                    ]);
                    f[ETH_HDR_LEN] = 0x4b;
                    f
                },
            ),
            ("v4_ihl4", {
                let mut f = cat(&[
                    &eth(MAC_B, MAC_A, ETH_P_IP),
                    &ipv4(IPPROTO_UDP, 0, 0),
                    &udp(SPORT, ROCE_PORT),
                ]);
                f[ETH_HDR_LEN] = 0x44;
                f
            }),
            (
                // IHL 15 claims 60 bytes of header; the frame ends before.
                "v4_ihl15_short",
                {
                    let mut f = cat(&[
                        &eth(MAC_B, MAC_A, ETH_P_IP),
                        &ipv4(IPPROTO_UDP, 0, 0),
                        &udp(SPORT, 1),
                    ]);
                    f[ETH_HDR_LEN] = 0x4f;
                    f
                },
            ),
        ]
    }

    fn full<const N: usize>() -> [u8; N] {
        [0xff; N]
    }

    fn eth_mask(dst: [u8; 6], src: [u8; 6], ether_type: u16) -> EthFilter {
        EthFilter {
            dst_mac: dst,
            src_mac: src,
            ether_type,
        }
    }

    fn rule_eth(val: EthFilter, mask: EthFilter) -> Rule {
        let mut r = Rule::new();
        r.add_eth(val, mask).unwrap();
        r
    }

    fn rule_v4_dst(dst: [u8; 4], mask: [u8; 4]) -> Rule {
        let mut r = Rule::new();
        let val = Ipv4Filter {
            dst,
            ..Default::default()
        };
        let mask = Ipv4Filter {
            dst: mask,
            ..Default::default()
        };
        r.add_ipv4(val, mask).unwrap();
        r
    }

    fn dst_port(port: u16) -> (PortFilter, PortFilter) {
        (
            PortFilter { src: 0, dst: port },
            PortFilter {
                src: 0,
                dst: 0xffff,
            },
        )
    }

    fn rule_l4(v6: bool, proto: L4Proto, port: u16) -> Rule {
        let mut r = Rule::new();
        if v6 {
            r.add_ipv6(Ipv6Filter::default(), Ipv6Filter::default())
                .unwrap();
        } else {
            r.add_ipv4(Ipv4Filter::default(), Ipv4Filter::default())
                .unwrap();
        }
        let (val, mask) = dst_port(port);
        r.add_l4(proto, val, mask).unwrap();
        r
    }

    fn rule_v6_src(src: [u8; 16]) -> Rule {
        let mut r = Rule::new();
        let val = Ipv6Filter {
            src,
            ..Default::default()
        };
        let mask = Ipv6Filter {
            src: full(),
            ..Default::default()
        };
        r.add_ipv6(val, mask).unwrap();
        r
    }

    /// The rules of the matrix, each with the names of the frames it
    /// must match, all others it must not.
    fn rules() -> Vec<(&'static str, Rule, &'static [&'static str])> {
        let all: &[&str] = &[
            "arp",
            "v4_udp",
            "v4_tcp",
            "v4_udp_opts",
            "v4_udp_frag0",
            "v4_udp_frag1",
            "v6_udp",
            "v6_hbh_udp",
            "vlan_v4_udp",
            "v4_bad_version",
            "v6_bad_version",
            "v4_ihl4",
            "v4_ihl15_short",
        ];
        let to_b: &[&str] = &[
            "v4_udp",
            "v4_tcp",
            "v4_udp_opts",
            "v4_udp_frag0",
            "v4_udp_frag1",
            "v6_udp",
            "v6_hbh_udp",
            "vlan_v4_udp",
            "v4_bad_version",
            "v6_bad_version",
            "v4_ihl4",
            "v4_ihl15_short",
        ];
        let good_v4: &[&str] = &[
            "v4_udp",
            "v4_tcp",
            "v4_udp_opts",
            "v4_udp_frag0",
            "v4_udp_frag1",
        ];
        let z = EthFilter::default();
        std::vec![
            ("empty", Rule::new(), all),
            // Only the destination MAC, every bit compared.
            (
                "dst_mac",
                rule_eth(eth_mask(MAC_B, [0; 6], 0), eth_mask(full(), [0; 6], 0)),
                to_b,
            ),
            (
                "dst_mac_bcast",
                rule_eth(eth_mask(BCAST, [0; 6], 0), eth_mask(full(), [0; 6], 0)),
                &["arp"],
            ),
            // The group bit alone: multicast and broadcast frames.
            (
                "dst_mac_group_bit",
                rule_eth(
                    eth_mask([1, 0, 0, 0, 0, 0], [0; 6], 0),
                    eth_mask([1, 0, 0, 0, 0, 0], [0; 6], 0)
                ),
                &["arp"],
            ),
            // The first five bytes of the source MAC: every frame here
            // comes from MAC_A; MAC_B's last byte differs, so it is
            // masked out rather than compared.
            (
                "src_mac_prefix",
                rule_eth(
                    eth_mask(MAC_B, MAC_B, 0),
                    eth_mask([0; 6], [0xff, 0xff, 0xff, 0xff, 0xff, 0], 0),
                ),
                all,
            ),
            (
                "src_mac_other",
                rule_eth(
                    eth_mask([0; 6], [0x02, 0, 0, 0, 1, 0], 0),
                    eth_mask([0; 6], full(), 0)
                ),
                &[],
            ),
            (
                "ether_type_arp",
                rule_eth(
                    eth_mask([0; 6], [0; 6], 0x0806),
                    eth_mask([0; 6], [0; 6], 0xffff)
                ),
                &["arp"]
            ),
            (
                "ether_type_vlan",
                rule_eth(
                    eth_mask([0; 6], [0; 6], ETH_P_8021Q),
                    eth_mask([0; 6], [0; 6], 0xffff)
                ),
                &["vlan_v4_udp"],
            ),
            (
                "ether_type_ipv4",
                rule_eth(
                    eth_mask([0; 6], [0; 6], ETH_P_IP),
                    eth_mask([0; 6], [0; 6], 0xffff)
                ),
                &[
                    "v4_udp",
                    "v4_tcp",
                    "v4_udp_opts",
                    "v4_udp_frag0",
                    "v4_udp_frag1",
                    "v4_bad_version",
                    "v4_ihl4",
                    "v4_ihl15_short",
                ],
            ),
            // An all-zero Ethernet mask still needs the header.
            ("eth_zero_mask", rule_eth(z, z), all),
            (
                "v4_dst_24",
                rule_v4_dst([192, 168, 1, 0], [255, 255, 255, 0]),
                good_v4
            ),
            (
                "v4_dst_24_other",
                rule_v4_dst([192, 168, 2, 0], [255, 255, 255, 0]),
                &[]
            ),
            // Value bits outside the mask are ignored.
            (
                "v4_dst_24_dirty",
                rule_v4_dst([192, 168, 1, 99], [255, 255, 255, 0]),
                good_v4
            ),
            ("v4_dst_exact_a", rule_v4_dst(V4_A, full()), &[]),
            (
                "v4_udp_roce",
                rule_l4(false, L4Proto::Udp, ROCE_PORT),
                &["v4_udp", "v4_udp_opts", "v4_udp_frag0"],
            ),
            ("v4_tcp_roce", rule_l4(false, L4Proto::Tcp, ROCE_PORT), &[]),
            (
                "v4_tcp_http",
                rule_l4(false, L4Proto::Tcp, HTTP_PORT),
                &["v4_tcp"]
            ),
            ("v4_udp_http", rule_l4(false, L4Proto::Udp, HTTP_PORT), &[]),
            (
                "v6_udp_roce",
                rule_l4(true, L4Proto::Udp, ROCE_PORT),
                &["v6_udp"]
            ),
            ("v6_tcp_roce", rule_l4(true, L4Proto::Tcp, ROCE_PORT), &[]),
            ("v6_src_a", rule_v6_src(V6_A), &["v6_udp", "v6_hbh_udp"]),
            ("v6_src_b", rule_v6_src(V6_B), &[]),
            (
                "v6_class_label",
                {
                    let mut r = Rule::new();
                    let val = Ipv6Filter {
                        traffic_class: 0xb8,
                        flow_label: 0x12345,
                        hop_limit: 64,
                        next_hdr: IPPROTO_UDP,
                        ..Default::default()
                    };
                    let mask = Ipv6Filter {
                        traffic_class: 0xff,
                        flow_label: FLOW_LABEL_MASK,
                        hop_limit: 0xff,
                        next_hdr: 0xff,
                        ..Default::default()
                    };
                    r.add_ipv6(val, mask).unwrap();
                    r
                },
                &["v6_udp"],
            ),
            (
                "v6_label_other",
                {
                    let mut r = Rule::new();
                    let val = Ipv6Filter {
                        flow_label: 0x12346,
                        ..Default::default()
                    };
                    let mask = Ipv6Filter {
                        flow_label: FLOW_LABEL_MASK,
                        ..Default::default()
                    };
                    r.add_ipv6(val, mask).unwrap();
                    r
                },
                &[],
            ),
            (
                "v4_tos_ttl_proto",
                {
                    let mut r = Rule::new();
                    let val = Ipv4Filter {
                        tos: 0x28,
                        ttl: 64,
                        proto: IPPROTO_TCP,
                        ..Default::default()
                    };
                    let mask = Ipv4Filter {
                        tos: 0xfc,
                        ttl: 0xff,
                        proto: 0xff,
                        ..Default::default()
                    };
                    r.add_ipv4(val, mask).unwrap();
                    r
                },
                &["v4_tcp"],
            ),
            (
                "full_stack",
                {
                    let mut r = rule_eth(
                        eth_mask(MAC_B, MAC_A, ETH_P_IP),
                        eth_mask(full(), full(), 0xffff),
                    );
                    let v = Ipv4Filter {
                        src: V4_A,
                        dst: V4_B,
                        proto: IPPROTO_UDP,
                        ..Default::default()
                    };
                    let m = Ipv4Filter {
                        src: full(),
                        dst: full(),
                        proto: 0xff,
                        ..Default::default()
                    };
                    r.add_ipv4(v, m).unwrap();
                    let p = PortFilter {
                        src: SPORT,
                        dst: ROCE_PORT,
                    };
                    r.add_l4(
                        L4Proto::Udp,
                        p,
                        PortFilter {
                            src: 0xffff,
                            dst: 0xffff,
                        },
                    )
                    .unwrap();
                    r
                },
                &["v4_udp", "v4_udp_opts", "v4_udp_frag0"],
            ),
        ]
    }

    #[test]
    fn matrix() {
        let frames = frames();
        for (rname, rule, want) in rules() {
            for w in want {
                assert!(frames.iter().any(|(n, _)| n == w), "unknown frame {w}");
            }
            for (fname, frame) in &frames {
                assert_eq!(
                    rule.matches(frame),
                    want.contains(fname),
                    "rule {rname} on frame {fname}"
                );
            }
        }
    }

    /// The bytes a rule needs from a frame whose IP header (if any) is
    /// `ip_hdr` bytes long.
    fn needed(rule: &Rule, ip_hdr: usize) -> usize {
        let mut n = 0;
        if rule.eth.is_some() || rule.l3.is_some() {
            n = ETH_HDR_LEN;
        }
        if rule.l3.is_some() {
            n += ip_hdr;
        }
        if let Some((proto, _, _)) = &rule.l4 {
            n += proto.header_len();
        }
        n
    }

    #[test]
    fn truncated() {
        let frames = frames();
        let ip_hdr = |name: &str| match name {
            "v4_udp_opts" => IPV4_HDR_LEN + 8,
            n if n.starts_with("v6") => IPV6_HDR_LEN,
            _ => IPV4_HDR_LEN,
        };
        let mut checked = 0;
        for (fname, frame) in frames.iter().filter(|(n, _)| {
            [
                "arp",
                "v4_udp",
                "v4_tcp",
                "v4_udp_opts",
                "v6_udp",
                "vlan_v4_udp",
            ]
            .contains(n)
        }) {
            for (rname, rule, _) in rules() {
                let whole = rule.matches(frame);
                let need = needed(&rule, ip_hdr(fname));
                for len in 0..=frame.len() {
                    let got = rule.matches(&frame[..len]);
                    if len < need {
                        assert!(!got, "rule {rname} on {fname} cut to {len}");
                    } else {
                        // Nothing past the needed headers is read.
                        assert_eq!(got, whole, "rule {rname} on {fname} cut to {len}");
                    }
                    checked += usize::from(got);
                }
            }
        }
        // Guard against a vacuous loop: many prefixes do match.
        assert!(checked > 100);
    }

    #[test]
    fn garbage_never_panics() {
        // Every one- and two-byte change of a frame, run through every
        // rule: the matcher must only answer.
        let (_, base) = &frames()[1];
        let rules = rules();
        for i in 0..base.len() {
            for b in [0x00, 0x0f, 0x40, 0x4f, 0x60, 0xff] {
                let mut f = base.clone();
                f[i] = b;
                for (_, r, _) in &rules {
                    let _ = r.matches(&f);
                }
            }
        }
    }

    #[test]
    fn builder_order_and_duplicates() {
        let z4 = Ipv4Filter::default();
        let z6 = Ipv6Filter::default();
        let zp = PortFilter::default();
        let ze = EthFilter::default();

        let mut r = Rule::new();
        assert_eq!(r.add_l4(L4Proto::Udp, zp, zp), Err(RuleError::L4WithoutL3));
        r.add_eth(ze, ze).unwrap();
        assert_eq!(r.add_eth(ze, ze), Err(RuleError::Duplicate));
        assert_eq!(r.add_l4(L4Proto::Tcp, zp, zp), Err(RuleError::L4WithoutL3));
        r.add_ipv4(z4, z4).unwrap();
        assert_eq!(r.add_ipv4(z4, z4), Err(RuleError::Duplicate));
        assert_eq!(r.add_ipv6(z6, z6), Err(RuleError::Duplicate));
        r.add_l4(L4Proto::Udp, zp, zp).unwrap();
        assert_eq!(r.add_l4(L4Proto::Udp, zp, zp), Err(RuleError::Duplicate));
        let before = r;
        assert_eq!(r.add_eth(ze, ze), Err(RuleError::Duplicate));
        assert_eq!(r, before);

        // Ethernet after IP.
        let mut r = Rule::new();
        r.add_ipv6(z6, z6).unwrap();
        assert_eq!(r.add_eth(ze, ze), Err(RuleError::OutOfOrder));
        assert_eq!(r.eth, None);

        // IP after TCP/UDP, in a rule written by hand.
        let mut r = Rule {
            l4: Some((L4Proto::Udp, zp, zp)),
            ..Rule::new()
        };
        assert_eq!(r.add_ipv4(z4, z4), Err(RuleError::OutOfOrder));
        assert_eq!(r.l3, None);
    }

    #[test]
    fn builder_implied_fields() {
        let z4 = Ipv4Filter::default();
        let z6 = Ipv6Filter::default();
        let zp = PortFilter::default();
        let et = |val: u16, mask: u16| {
            let mut r = Rule::new();
            r.add_eth(
                eth_mask([0; 6], [0; 6], val),
                eth_mask([0; 6], [0; 6], mask),
            )
            .unwrap();
            r
        };

        // The ether type must agree with the IP version where it is masked.
        assert_eq!(
            et(0x0806, 0xffff).add_ipv4(z4, z4),
            Err(RuleError::EtherTypeConflict)
        );
        assert_eq!(
            et(ETH_P_IPV6, 0xffff).add_ipv4(z4, z4),
            Err(RuleError::EtherTypeConflict)
        );
        assert_eq!(
            et(ETH_P_IP, 0xffff).add_ipv6(z6, z6),
            Err(RuleError::EtherTypeConflict)
        );
        assert_eq!(et(ETH_P_IP, 0xffff).add_ipv4(z4, z4), Ok(()));
        assert_eq!(et(ETH_P_IPV6, 0xffff).add_ipv6(z6, z6), Ok(()));
        assert_eq!(et(0x0806, 0).add_ipv6(z6, z6), Ok(()));
        // Under mask 0xff00, 0x0800 and 0x86dd differ.
        assert_eq!(et(0x0800, 0xff00).add_ipv4(z4, z4), Ok(()));
        assert_eq!(
            et(0x0800, 0xff00).add_ipv6(z6, z6),
            Err(RuleError::EtherTypeConflict)
        );
        // A value bit outside the mask does not count.
        assert_eq!(et(0x08ff, 0xff00).add_ipv4(z4, z4), Ok(()));

        // The IP protocol must agree with the transport where it is masked.
        let v4 = |proto: u8, mask: u8| {
            let mut r = Rule::new();
            let v = Ipv4Filter {
                proto,
                ..Default::default()
            };
            let m = Ipv4Filter {
                proto: mask,
                ..Default::default()
            };
            r.add_ipv4(v, m).unwrap();
            r
        };
        assert_eq!(
            v4(IPPROTO_UDP, 0xff).add_l4(L4Proto::Tcp, zp, zp),
            Err(RuleError::ProtoConflict)
        );
        assert_eq!(v4(IPPROTO_UDP, 0xff).add_l4(L4Proto::Udp, zp, zp), Ok(()));
        assert_eq!(v4(IPPROTO_UDP, 0).add_l4(L4Proto::Tcp, zp, zp), Ok(()));
        let v6 = |next_hdr: u8| {
            let mut r = Rule::new();
            let v = Ipv6Filter {
                next_hdr,
                ..Default::default()
            };
            let m = Ipv6Filter {
                next_hdr: 0xff,
                ..Default::default()
            };
            r.add_ipv6(v, m).unwrap();
            r
        };
        assert_eq!(
            v6(IPPROTO_TCP).add_l4(L4Proto::Udp, zp, zp),
            Err(RuleError::ProtoConflict)
        );
        assert_eq!(v6(IPPROTO_TCP).add_l4(L4Proto::Tcp, zp, zp), Ok(()));

        // Flow labels have 20 bits.
        let wide = Ipv6Filter {
            flow_label: FLOW_LABEL_MASK + 1,
            ..Default::default()
        };
        let mut r = Rule::new();
        assert_eq!(r.add_ipv6(wide, z6), Err(RuleError::FlowLabelTooWide));
        assert_eq!(r.add_ipv6(z6, wide), Err(RuleError::FlowLabelTooWide));
        assert_eq!(r, Rule::new());
    }

    #[test]
    fn builder_normalises_values() {
        let mut a = Rule::new();
        let mut b = Rule::new();
        let mask = eth_mask([0xff, 0xff, 0xff, 0, 0, 0], [0; 6], 0);
        a.add_eth(eth_mask(MAC_A, BCAST, 0x1234), mask).unwrap();
        b.add_eth(eth_mask([0x02, 0, 0, 0, 0, 0], [0; 6], 0), mask)
            .unwrap();
        assert_eq!(a, b);

        let mut a = Rule::new();
        let v = Ipv6Filter {
            src: V6_A,
            flow_label: 0xf_ffff,
            hop_limit: 7,
            ..Default::default()
        };
        let m = Ipv6Filter {
            flow_label: 0xf_0000,
            ..Default::default()
        };
        a.add_ipv6(v, m).unwrap();
        let (mut p, pm) = dst_port(ROCE_PORT);
        p.src = 0xbeef;
        a.add_l4(L4Proto::Udp, p, pm).unwrap();
        let want_l3 = L3::V6 {
            val: Ipv6Filter {
                flow_label: 0xf_0000,
                ..Default::default()
            },
            mask: m,
        };
        assert_eq!(a.l3, Some(want_l3));
        assert_eq!(
            a.l4,
            Some((
                L4Proto::Udp,
                PortFilter {
                    src: 0,
                    dst: ROCE_PORT
                },
                pm
            ))
        );
    }

    #[test]
    fn hand_written_rules() {
        let frames = frames();
        let (_, v4_udp) = &frames[1];
        // A TCP/UDP spec with no IP spec cannot be located.
        let (val, mask) = dst_port(ROCE_PORT);
        let r = Rule {
            l4: Some((L4Proto::Udp, val, mask)),
            ..Rule::new()
        };
        assert!(!r.matches(v4_udp));
        // Unmasked value bits are ignored at match time too.
        let r = Rule {
            eth: Some((eth_mask(MAC_B, BCAST, 0x1234), eth_mask(full(), [0; 6], 0))),
            ..Rule::new()
        };
        assert!(r.matches(v4_udp));
    }
}
