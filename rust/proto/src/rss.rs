// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Receive-side scaling for RSS QPs: which receive work queue of an
//! indirection table a frame goes to.
//!
//! An RSS QP (`ibv_create_qp_ex` with `IBV_QP_INIT_ATTR_RX_HASH` and an
//! indirection table) names the header fields to hash
//! (`enum ibv_rx_hash_fields`) and a Toeplitz key. For each frame it
//! receives, [`Rss::hash`] builds the hash input from the selected fields
//! the frame has, in the order the Toeplitz definition gives (source
//! address, destination address, source port, destination port), and the
//! low bits of the hash pick the table entry ([`Rss::entry`]).
//!
//! Which fields a frame contributes:
//! - IPv4 addresses from an IPv4 header (version 4, IHL at least 5, the
//!   whole header present); IPv6 addresses from an IPv6 header. The
//!   selections of the other IP version are ignored for that frame.
//! - TCP ports from a TCP header and UDP ports from a UDP one, read behind
//!   the IPv4 options or the fixed IPv6 header, and only from an
//!   unfragmented IPv4 datagram: every fragment of one hashes on its
//!   addresses alone, so all land in the same WQ.
//! - Nothing from a frame that is not untagged IPv4 or IPv6: its hash is
//!   that of the empty input, 0, so it goes to entry 0.
//!
//! The key is zero-extended: input bits whose 32-bit window runs past the
//! key's end see zero bits there. A 40-byte key covers every input.
//!

use super::flow::{ETH_HDR_LEN, ETH_P_IP, ETH_P_IPV6, IPPROTO_TCP, TCP_HDR_LEN};
use super::ip::{IPPROTO_UDP, IPV6_HDR_LEN, UDP_HDR_LEN};

/// `enum ibv_rx_hash_fields` bits roxe hashes on.
pub mod fields {
    /// `IBV_RX_HASH_SRC_IPV4`.
    pub const SRC_IPV4: u64 = 1 << 0;
    /// `IBV_RX_HASH_DST_IPV4`.
    pub const DST_IPV4: u64 = 1 << 1;
    /// `IBV_RX_HASH_SRC_IPV6`.
    pub const SRC_IPV6: u64 = 1 << 2;
    /// `IBV_RX_HASH_DST_IPV6`.
    pub const DST_IPV6: u64 = 1 << 3;
    /// `IBV_RX_HASH_SRC_PORT_TCP`.
    pub const SRC_PORT_TCP: u64 = 1 << 4;
    /// `IBV_RX_HASH_DST_PORT_TCP`.
    pub const DST_PORT_TCP: u64 = 1 << 5;
    /// `IBV_RX_HASH_SRC_PORT_UDP`.
    pub const SRC_PORT_UDP: u64 = 1 << 6;
    /// `IBV_RX_HASH_DST_PORT_UDP`.
    pub const DST_PORT_UDP: u64 = 1 << 7;
    /// Every field above. `IBV_RX_HASH_IPSEC_SPI` (bit 8) and
    /// `IBV_RX_HASH_INNER` (bit 31) are not offered.
    pub const SUPPORTED: u64 = 0xff;
}

/// `IBV_RX_HASH_FUNC_TOEPLITZ`, the only hash function offered.
pub const FUNC_TOEPLITZ: u8 = 1;
/// The longest key taken, in bytes.
pub const KEY_MAX: usize = 40;
/// The longest hash input: two IPv6 addresses and two ports.
const INPUT_MAX: usize = 36;

/// Why an RSS configuration is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RssError {
    /// A hash function or field roxe does not offer (`EOPNOTSUPP`).
    Unsupported,
    /// A key of no bytes or more than [`KEY_MAX`] (`EINVAL`).
    BadKey,
}

/// An RSS QP's hash: the key and the fields it covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rss {
    key: [u8; KEY_MAX],
    key_len: usize,
    fields: u64,
}

/// The Toeplitz hash of `input` under `key` (zero-extended).
pub fn toeplitz(key: &[u8], input: &[u8]) -> u32 {
    let bit = |i: usize| -> u32 {
        let byte = key.get(i / 8).copied().unwrap_or(0);
        u32::from((byte >> (7 - i % 8)) & 1)
    };
    // The 32-bit window of the key that starts at input bit 0.
    let mut window: u32 = (0..32).fold(0, |w, i| (w << 1) | bit(i));
    let mut hash = 0u32;
    for (n, byte) in input.iter().enumerate() {
        for b in 0..8 {
            if byte & (0x80 >> b) != 0 {
                hash ^= window;
            }
            // Slide the window one key bit on.
            window = (window << 1) | bit(n * 8 + b + 32);
        }
    }
    hash
}

impl Rss {
    /// Checks an RSS QP's configuration (`struct ibv_rx_hash_conf`).
    pub fn new(function: u8, key: &[u8], fields: u64) -> Result<Rss, RssError> {
        if function != FUNC_TOEPLITZ || fields & !fields::SUPPORTED != 0 {
            return Err(RssError::Unsupported);
        }
        if key.is_empty() || key.len() > KEY_MAX {
            return Err(RssError::BadKey);
        }
        let mut k = [0u8; KEY_MAX];
        k[..key.len()].copy_from_slice(key);
        Ok(Rss {
            key: k,
            key_len: key.len(),
            fields,
        })
    }

    /// The fields the hash covers (`enum ibv_rx_hash_fields`).
    pub fn fields(&self) -> u64 {
        self.fields
    }

    /// The hash of `frame`, an Ethernet frame from its destination MAC.
    pub fn hash(&self, frame: &[u8]) -> u32 {
        let mut input = [0u8; INPUT_MAX];
        let n = self.input(frame, &mut input);
        toeplitz(&self.key[..self.key_len], &input[..n])
    }

    /// The entry of a table of `1 << log_size` entries that `frame` goes to.
    pub fn entry(&self, frame: &[u8], log_size: u32) -> usize {
        let mask = 1u32.checked_shl(log_size).map_or(u32::MAX, |s| s - 1);
        // CAST: u32 fits usize on every target roxe builds for.
        (self.hash(frame) & mask) as usize
    }

    /// Writes the hash input of `frame` to `out`; returns its length.
    fn input(&self, frame: &[u8], out: &mut [u8; INPUT_MAX]) -> usize {
        let Some(et) = frame.get(12..ETH_HDR_LEN) else {
            return 0;
        };
        let Some(ip) = frame.get(ETH_HDR_LEN..) else {
            return 0;
        };
        let ether_type = u16::from_be_bytes([et[0], et[1]]);
        let (src, dst, proto, l4, sel) = match ether_type {
            ETH_P_IP => {
                let Some(&vihl) = ip.first() else {
                    return 0;
                };
                let ihl = usize::from(vihl & 0x0f) * 4;
                if vihl >> 4 != 4 || ihl < 20 || ip.len() < ihl {
                    return 0;
                }
                // More fragments or a fragment offset: a fragment, whose
                // ports (if any) all its fragments do not share.
                let fragment = u16::from_be_bytes([ip[6], ip[7]]) & 0x3fff != 0;
                (
                    &ip[12..16],
                    &ip[16..20],
                    ip[9],
                    (!fragment).then(|| &ip[ihl..]),
                    (fields::SRC_IPV4, fields::DST_IPV4),
                )
            }
            ETH_P_IPV6 => {
                if ip.len() < IPV6_HDR_LEN || ip[0] >> 4 != 6 {
                    return 0;
                }
                (
                    &ip[8..24],
                    &ip[24..40],
                    ip[6],
                    Some(&ip[IPV6_HDR_LEN..]),
                    (fields::SRC_IPV6, fields::DST_IPV6),
                )
            }
            _ => return 0,
        };
        let mut n = 0;
        let mut put = |bytes: &[u8], out: &mut [u8; INPUT_MAX]| {
            out[n..n + bytes.len()].copy_from_slice(bytes);
            n += bytes.len();
        };
        if self.fields & sel.0 != 0 {
            put(src, out);
        }
        if self.fields & sel.1 != 0 {
            put(dst, out);
        }
        let ports = match proto {
            IPPROTO_TCP => Some((fields::SRC_PORT_TCP, fields::DST_PORT_TCP, TCP_HDR_LEN)),
            IPPROTO_UDP => Some((fields::SRC_PORT_UDP, fields::DST_PORT_UDP, UDP_HDR_LEN)),
            _ => None,
        };
        if let (Some((s, d, hlen)), Some(l4)) = (ports, l4) {
            if l4.len() >= hlen {
                if self.fields & s != 0 {
                    put(&l4[0..2], out);
                }
                if self.fields & d != 0 {
                    put(&l4[2..4], out);
                }
            }
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec;
    use std::vec::Vec;

    /// The key of the published Toeplitz verification suite (Microsoft's
    /// "Verifying the RSS Hash Calculation").
    const KEY: [u8; 40] = [
        0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3, 0x8f,
        0xb0, 0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30,
        0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa,
    ];

    /// Source, destination, source port, destination port, hash of the
    /// addresses, hash of addresses and ports.
    type Vector = ([u8; 4], [u8; 4], u16, u16, u32, u32);

    /// The suite's IPv4 vectors.
    const V4: [Vector; 5] = [
        (
            [66, 9, 149, 187],
            [161, 142, 100, 80],
            2794,
            1766,
            0x323e8fc2,
            0x51ccc178,
        ),
        (
            [199, 92, 111, 2],
            [65, 69, 140, 83],
            14230,
            4739,
            0xd718262a,
            0xc626b0ea,
        ),
        (
            [24, 19, 198, 95],
            [12, 22, 207, 184],
            12898,
            38024,
            0xd2d0a5de,
            0x5c2b394a,
        ),
        (
            [38, 27, 205, 30],
            [209, 142, 163, 6],
            48228,
            2217,
            0x82989176,
            0xafc7327f,
        ),
        (
            [153, 39, 163, 191],
            [202, 188, 127, 2],
            44251,
            1303,
            0x5d1809c5,
            0x10e828a2,
        ),
    ];

    fn eth(ether_type: u16) -> Vec<u8> {
        let mut f = vec![0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2];
        f.extend_from_slice(&ether_type.to_be_bytes());
        f
    }

    fn v4_frame(src: [u8; 4], dst: [u8; 4], proto: u8, sport: u16, dport: u16) -> Vec<u8> {
        let mut f = eth(ETH_P_IP);
        f.extend_from_slice(&[0x45, 0, 0, 40, 0, 0, 0x40, 0, 64, proto, 0, 0]);
        f.extend_from_slice(&src);
        f.extend_from_slice(&dst);
        f.extend_from_slice(&sport.to_be_bytes());
        f.extend_from_slice(&dport.to_be_bytes());
        f.extend_from_slice(&[0; 16]);
        f
    }

    #[test]
    fn toeplitz_matches_the_published_ipv4_vectors() {
        for (src, dst, sport, dport, ip_hash, tcp_hash) in V4 {
            let mut input = Vec::new();
            input.extend_from_slice(&src);
            input.extend_from_slice(&dst);
            assert_eq!(toeplitz(&KEY, &input), ip_hash);
            input.extend_from_slice(&sport.to_be_bytes());
            input.extend_from_slice(&dport.to_be_bytes());
            assert_eq!(toeplitz(&KEY, &input), tcp_hash);
        }
    }

    #[test]
    fn frames_hash_as_their_selected_fields() {
        let ip = Rss::new(FUNC_TOEPLITZ, &KEY, fields::SRC_IPV4 | fields::DST_IPV4).unwrap();
        let tcp = Rss::new(
            FUNC_TOEPLITZ,
            &KEY,
            fields::SRC_IPV4 | fields::DST_IPV4 | fields::SRC_PORT_TCP | fields::DST_PORT_TCP,
        )
        .unwrap();
        for (src, dst, sport, dport, ip_hash, tcp_hash) in V4 {
            let f = v4_frame(src, dst, IPPROTO_TCP, sport, dport);
            assert_eq!(ip.hash(&f), ip_hash);
            assert_eq!(tcp.hash(&f), tcp_hash);
            // TCP port fields leave a UDP datagram's ports out.
            let u = v4_frame(src, dst, IPPROTO_UDP, sport, dport);
            assert_eq!(tcp.hash(&u), ip_hash);
            assert_eq!(ip.entry(&f, 3), (ip_hash & 7) as usize);
        }
    }

    #[test]
    fn ipv6_addresses_and_ports() {
        // From the same suite: 3ffe:2501:200:1fff::7 port 2794 to
        // 3ffe:2501:200:3::1 port 1766.
        let src = [
            0x3f, 0xfe, 0x25, 0x01, 0x02, 0x00, 0x1f, 0xff, 0, 0, 0, 0, 0, 0, 0, 7,
        ];
        let dst = [
            0x3f, 0xfe, 0x25, 0x01, 0x02, 0x00, 0x00, 0x03, 0, 0, 0, 0, 0, 0, 0, 1,
        ];
        let mut f = eth(ETH_P_IPV6);
        f.extend_from_slice(&[0x60, 0, 0, 0, 0, 20, IPPROTO_TCP, 64]);
        f.extend_from_slice(&src);
        f.extend_from_slice(&dst);
        f.extend_from_slice(&2794u16.to_be_bytes());
        f.extend_from_slice(&1766u16.to_be_bytes());
        f.extend_from_slice(&[0; 16]);
        let ip = Rss::new(FUNC_TOEPLITZ, &KEY, fields::SRC_IPV6 | fields::DST_IPV6).unwrap();
        assert_eq!(ip.hash(&f), 0x2cc18cd5);
        let all = Rss::new(FUNC_TOEPLITZ, &KEY, fields::SUPPORTED).unwrap();
        assert_eq!(all.hash(&f), 0x40207d3d);
        // IPv4 selections do not apply to an IPv6 frame.
        let v4 = Rss::new(FUNC_TOEPLITZ, &KEY, fields::SRC_IPV4 | fields::DST_IPV4).unwrap();
        assert_eq!(v4.hash(&f), 0);
    }

    #[test]
    fn later_fragments_and_other_frames() {
        let all = Rss::new(FUNC_TOEPLITZ, &KEY, fields::SUPPORTED).unwrap();
        let (src, dst, sport, dport, ip_hash, _) = V4[0];
        let mut f = v4_frame(src, dst, IPPROTO_TCP, sport, dport);
        // Fragment offset 1: no ports are read.
        f[ETH_HDR_LEN + 6] = 0;
        f[ETH_HDR_LEN + 7] = 1;
        assert_eq!(all.hash(&f), ip_hash);
        // Nor from the first fragment (more fragments, offset 0): every
        // fragment of a datagram hashes the same.
        f[ETH_HDR_LEN + 6] = 0x20;
        f[ETH_HDR_LEN + 7] = 0;
        assert_eq!(all.hash(&f), ip_hash);
        // ARP, a VLAN tag, a bad version, truncations: hash 0, never a panic.
        assert_eq!(all.hash(&eth(0x0806)), 0);
        assert_eq!(all.hash(&eth(0x8100)), 0);
        let mut bad = v4_frame(src, dst, IPPROTO_TCP, sport, dport);
        bad[ETH_HDR_LEN] = 0x65;
        assert_eq!(all.hash(&bad), 0);
        let full = v4_frame(src, dst, IPPROTO_TCP, sport, dport);
        for len in 0..full.len() {
            let _ = all.hash(&full[..len]);
            assert!(all.entry(&full[..len], 3) < 8);
        }
    }

    #[test]
    fn configurations_refused() {
        assert_eq!(
            Rss::new(2, &KEY, fields::SRC_IPV4),
            Err(RssError::Unsupported)
        );
        assert_eq!(
            Rss::new(FUNC_TOEPLITZ, &KEY, 1 << 8),
            Err(RssError::Unsupported)
        );
        assert_eq!(
            Rss::new(FUNC_TOEPLITZ, &KEY, 1 << 31),
            Err(RssError::Unsupported)
        );
        assert_eq!(Rss::new(FUNC_TOEPLITZ, &[], 0), Err(RssError::BadKey));
        assert_eq!(Rss::new(FUNC_TOEPLITZ, &[0; 41], 0), Err(RssError::BadKey));
        // A short key is zero-extended.
        let short = Rss::new(FUNC_TOEPLITZ, &KEY[..8], fields::SRC_IPV4).unwrap();
        let f = v4_frame([1, 2, 3, 4], [5, 6, 7, 8], IPPROTO_UDP, 1, 2);
        let mut k = [0u8; 40];
        k[..8].copy_from_slice(&KEY[..8]);
        assert_eq!(short.hash(&f), toeplitz(&k, &[1, 2, 3, 4]));
    }
}
