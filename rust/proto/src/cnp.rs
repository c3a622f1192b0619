// SPDX-License-Identifier: GPL-2.0 OR MIT

//! RoCEv2 congestion notification (IBTA Annex A17): the ECN bits roxe
//! puts on its packets, the CE mark a queue on the way may leave, and the
//! Congestion Notification Packet (CNP) a receiver sends back for it.
//!
//! A CNP is a BTH with opcode `0x81`, the P_Key of the marked packet, BECN
//! set, the destination QP of the marked packet's sender and PSN 0, then
//! 16 reserved zero bytes and the ICRC: 32 bytes after the UDP header.
//! See `Documentation/congestion.md`.

use super::headers::Bth;
use super::psn::Psn;

/// The CNP's BTH opcode (not a transport opcode: `opcode` does
/// not know it).
pub const OPCODE: u8 = 0x81;

/// Reserved bytes after the BTH.
pub const RESERVED: usize = 16;

/// A CNP's length from the BTH to the end of the ICRC.
pub const LEN: usize = Bth::LEN + RESERVED + super::icrc::LEN;

/// The ECN field of the IP header (the low two bits of the IPv4 TOS or
/// the IPv6 traffic class).
pub const ECN_MASK: u8 = 0b11;
/// ECN-capable transport, codepoint 0.
pub const ECT0: u8 = 0b10;
/// Congestion experienced.
pub const CE: u8 = 0b11;

/// The traffic class a packet goes out with: `tclass` as the user set it,
/// marked ECT(0) when its ECN bits are 0 (Not-ECT). ECT(1) that the user
/// set is kept; CE is not a sender's to set (RFC 3168), so it goes out
/// ECT(0).
pub const fn mark_ect(tclass: u8) -> u8 {
    match tclass & ECN_MASK {
        0 | CE => (tclass & !ECN_MASK) | ECT0,
        _ => tclass,
    }
}

/// The ECN bits of an IPv4 or IPv6 header (only its first two bytes are
/// read); 0 for anything else.
pub fn ecn(ip: &[u8]) -> u8 {
    match (ip.first().map(|b| b >> 4), ip.get(1)) {
        (Some(4), Some(tos)) => tos & ECN_MASK,
        // The traffic class straddles bytes 0 and 1: its low two bits are
        // bits 5 and 4 of byte 1.
        (Some(6), Some(b)) => (b >> 4) & ECN_MASK,
        _ => 0,
    }
}

/// What a received CNP says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cnp {
    /// The QP whose rate should fall.
    pub dest_qpn: u32,
    /// Its P_Key.
    pub pkey: u16,
}

/// Why bytes that start with [`OPCODE`] are no CNP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CnpError {
    /// Not [`LEN`] bytes long.
    Length,
    /// A transport header version other than 0, or a pad count.
    Header,
    /// Another opcode.
    Opcode,
}

/// Parses `roce` (BTH to ICRC) as a CNP. The ICRC is the caller's to
/// check.
pub fn parse(roce: &[u8]) -> Result<Cnp, CnpError> {
    if roce.first() != Some(&OPCODE) {
        return Err(CnpError::Opcode);
    }
    if roce.len() != LEN {
        return Err(CnpError::Length);
    }
    let mut b = [0u8; Bth::LEN];
    b.copy_from_slice(&roce[..Bth::LEN]);
    let bth = Bth::from_bytes(&b);
    if bth.tver != 0 || bth.pad != 0 {
        return Err(CnpError::Header);
    }
    Ok(Cnp {
        dest_qpn: bth.dest_qpn,
        pkey: bth.pkey,
    })
}

/// The CNP's bytes up to the ICRC (which the transmit path adds), for
/// QP `dest_qpn` with P_Key `pkey`.
pub fn encode(dest_qpn: u32, pkey: u16) -> [u8; Bth::LEN + RESERVED] {
    let bth = Bth {
        opcode: OPCODE,
        se: false,
        migreq: false,
        pad: 0,
        tver: 0,
        pkey,
        fecn: false,
        becn: true,
        dest_qpn: dest_qpn & 0x00ff_ffff,
        ack_req: false,
        psn: Psn::new(0),
    };
    let mut out = [0u8; Bth::LEN + RESERVED];
    out[..Bth::LEN].copy_from_slice(&bth.to_bytes());
    out
}

/// The notification point's limit for one QP: at most one CNP per
/// [`Notifier::GAP_US`], however many marked packets come.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Notifier {
    last: Option<u64>,
}

impl Notifier {
    /// Microseconds between two CNPs of one QP (DCQCN's 50 us).
    pub const GAP_US: u64 = 50;

    /// A QP that has sent no CNP.
    pub const fn new() -> Self {
        Notifier { last: None }
    }

    /// A CE-marked packet arrived at `now` (microseconds): whether to send
    /// a CNP for it.
    pub fn marked(&mut self, now: u64) -> bool {
        match self.last {
            Some(at) if now.wrapping_sub(at) < Self::GAP_US => false,
            _ => {
                self.last = Some(now);
                true
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::icrc::tests::{unhex, CX4_CNP};
    use super::super::icrc::{fill, IpHeader};
    use super::*;

    #[test]
    fn parses_the_connectx4_capture() {
        let pkt = unhex(CX4_CNP);
        let roce = &pkt[28..];
        assert_eq!(roce.len(), LEN);
        assert_eq!(
            parse(roce),
            Ok(Cnp {
                dest_qpn: 0x118,
                pkey: 0xffff
            })
        );
        // Its TOS 0xc2 is DSCP 48 with ECT(0).
        assert_eq!(ecn(&pkt), ECT0);
    }

    #[test]
    fn encodes_what_connectx4_sends() {
        let pkt = unhex(CX4_CNP);
        let mut roce = encode(0x118, 0xffff).to_vec();
        assert_eq!(roce[..], pkt[28..28 + Bth::LEN + RESERVED]);
        // With the ICRC over it, byte for byte the capture.
        let mut udp = pkt[20..28].to_vec();
        udp.append(&mut roce);
        udp.extend_from_slice(&[0; 4]);
        fill(IpHeader::V4(&pkt[..20]), &mut udp);
        assert_eq!(udp[..], pkt[20..]);
    }

    #[test]
    fn rejects_what_is_no_cnp() {
        let pkt = unhex(CX4_CNP);
        let roce = &pkt[28..];
        assert_eq!(parse(&roce[..LEN - 1]), Err(CnpError::Length));
        let mut long = roce.to_vec();
        long.push(0);
        assert_eq!(parse(&long), Err(CnpError::Length));
        let mut v = roce.to_vec();
        v[1] = 0x01;
        assert_eq!(parse(&v), Err(CnpError::Header));
        v[1] = 0x10;
        assert_eq!(parse(&v), Err(CnpError::Header));
        v[0] = 0x80;
        assert_eq!(parse(&v), Err(CnpError::Opcode));
        assert_eq!(parse(&[]), Err(CnpError::Opcode));
    }

    #[test]
    fn ecn_marks() {
        assert_eq!(mark_ect(0), ECT0);
        assert_eq!(mark_ect(0xb8), 0xba);
        // ECT(1) and ECT(0) the user chose stay; CE does not go out.
        assert_eq!(mark_ect(0x01), 0x01);
        assert_eq!(mark_ect(0x02), 0x02);
        assert_eq!(mark_ect(0x03), 0x02);
        assert_eq!(mark_ect(0xbb), 0xba);
        let mut v4 = [0u8; 20];
        v4[0] = 0x45;
        v4[1] = 0xbb;
        assert_eq!(ecn(&v4), CE);
        // IPv6: version 6, traffic class 0x03 (CE) across bytes 0 and 1.
        let mut v6 = [0u8; 40];
        v6[0] = 0x60;
        v6[1] = 0x30;
        assert_eq!(ecn(&v6), CE);
        v6[1] = 0x20;
        assert_eq!(ecn(&v6), ECT0);
        assert_eq!(ecn(&[]), 0);
        assert_eq!(ecn(&[0x50, 0xff]), 0);
    }

    #[test]
    fn one_cnp_per_gap() {
        let mut n = Notifier::default();
        assert!(n.marked(1000));
        assert!(!n.marked(1001));
        assert!(!n.marked(1049));
        assert!(n.marked(1050));
        let sent = (0..10_000u64).filter(|t| n.marked(2000 + t)).count();
        assert_eq!(sent, 200);
    }
}
