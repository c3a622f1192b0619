// SPDX-License-Identifier: GPL-2.0 OR MIT

//! BTH opcodes (IBTA vol 1, chapter 9, and the XRC annex) for the RC, UC,
//! UD and XRC transports, and what each one implies about the packet.
//!
//! An opcode byte is a 3-bit transport followed by a 5-bit operation. Only
//! the opcodes roxe implements have an [`Opcode`]: RD (`0x40..=0x5f`), CNP
//! (`0x81`), XRC FLUSH and ATOMIC WRITE (`0xbc`, `0xbd`), the manufacturer
//! range and every reserved value give `None` from [`Opcode::from_u8`], so
//! no length is ever derived from an unknown opcode. (The receive hook
//! takes CNPs before it parses: `cnp.rs`.)

use super::headers::{Aeth, AtomicAckEth, AtomicEth, Bth, Deth, Feth, Ieth, ImmDt, Reth, Xrceth};

/// The transport service an opcode belongs to (its top three bits).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Transport {
    /// Reliable Connected, `0x00..=0x1f`.
    Rc,
    /// Unreliable Connected, `0x20..=0x3f`.
    Uc,
    /// Unreliable Datagram, `0x60..=0x7f`.
    Ud,
    /// Extended Reliable Connected, `0xa0..=0xbf`.
    Xrc,
}

impl Transport {
    /// Whether the transport is reliable (RC or XRC): requests are
    /// acknowledged, lost packets are sent again after a PSN sequence NAK
    /// or a timeout, and RDMA READ and atomics exist.
    pub const fn is_reliable(self) -> bool {
        matches!(self, Transport::Rc | Transport::Xrc)
    }

    /// The transport's top three opcode bits, in place.
    const fn opcode_base(self) -> u8 {
        match self {
            Transport::Rc => 0x00,
            Transport::Uc => 0x20,
            Transport::Ud => 0x60,
            Transport::Xrc => 0xa0,
        }
    }
}

/// The operation a packet is part of.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Operation {
    /// SEND, with or without immediate data or invalidate.
    Send,
    /// RDMA WRITE, with or without immediate data.
    RdmaWrite,
    /// RDMA READ request.
    RdmaReadRequest,
    /// RDMA READ response.
    RdmaReadResponse,
    /// ACKNOWLEDGE (an ACK or a NAK).
    Acknowledge,
    /// ATOMIC ACKNOWLEDGE.
    AtomicAcknowledge,
    /// CmpSwap.
    CompareSwap,
    /// FetchAdd.
    FetchAdd,
    /// FLUSH.
    Flush,
    /// ATOMIC WRITE.
    AtomicWrite,
}

/// Where a packet sits in its message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Position {
    /// The first packet of a message of several.
    First,
    /// A packet strictly inside a message.
    Middle,
    /// The last packet of a message of several.
    Last,
    /// The only packet of a message.
    Only,
}

impl Position {
    /// Whether the packet starts a message (`First` or `Only`).
    pub const fn starts_message(self) -> bool {
        matches!(self, Position::First | Position::Only)
    }

    /// Whether the packet ends a message (`Last` or `Only`).
    pub const fn ends_message(self) -> bool {
        matches!(self, Position::Last | Position::Only)
    }
}

/// A set of extended transport headers.
///
/// Headers follow the BTH in a fixed order, which is the order of the
/// constants below: DETH, XRCETH, FETH, RETH, AtomicETH, AETH,
/// AtomicAckETH, ImmDt, IETH. No opcode roxe knows carries two headers
/// whose order this would get wrong (FLUSH is FETH then RETH, RDMA WRITE
/// Only with Immediate is RETH then ImmDt, ATOMIC ACKNOWLEDGE is AETH then
/// AtomicAckETH, UD SEND Only with Immediate is DETH then ImmDt, an XRC
/// request is XRCETH then the rest; none has both DETH and XRCETH).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ExtHeaders(u16);

impl ExtHeaders {
    /// No extended header.
    pub const NONE: ExtHeaders = ExtHeaders(0);
    /// Datagram ETH.
    pub const DETH: ExtHeaders = ExtHeaders(1 << 0);
    /// XRC ETH.
    pub const XRCETH: ExtHeaders = ExtHeaders(1 << 1);
    /// FLUSH ETH.
    pub const FETH: ExtHeaders = ExtHeaders(1 << 2);
    /// RDMA ETH.
    pub const RETH: ExtHeaders = ExtHeaders(1 << 3);
    /// Atomic ETH.
    pub const ATOMIC_ETH: ExtHeaders = ExtHeaders(1 << 4);
    /// ACK ETH.
    pub const AETH: ExtHeaders = ExtHeaders(1 << 5);
    /// Atomic ACK ETH.
    pub const ATOMIC_ACK_ETH: ExtHeaders = ExtHeaders(1 << 6);
    /// Immediate data.
    pub const IMMDT: ExtHeaders = ExtHeaders(1 << 7);
    /// Invalidate ETH.
    pub const IETH: ExtHeaders = ExtHeaders(1 << 8);

    /// Every header, each once, in wire order.
    pub const ALL: [ExtHeaders; 9] = [
        ExtHeaders::DETH,
        ExtHeaders::XRCETH,
        ExtHeaders::FETH,
        ExtHeaders::RETH,
        ExtHeaders::ATOMIC_ETH,
        ExtHeaders::AETH,
        ExtHeaders::ATOMIC_ACK_ETH,
        ExtHeaders::IMMDT,
        ExtHeaders::IETH,
    ];

    /// Both sets together.
    pub const fn union(self, other: ExtHeaders) -> ExtHeaders {
        ExtHeaders(self.0 | other.0)
    }

    /// Whether every header of `other` is in `self`.
    pub const fn contains(self, other: ExtHeaders) -> bool {
        self.0 & other.0 == other.0
    }

    /// Whether the set is empty.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The wire length of one header; `0` for a set that is not exactly
    /// one header.
    const fn single_len(self) -> usize {
        match self {
            ExtHeaders::DETH => Deth::LEN,
            ExtHeaders::XRCETH => Xrceth::LEN,
            ExtHeaders::FETH => Feth::LEN,
            ExtHeaders::RETH => Reth::LEN,
            ExtHeaders::ATOMIC_ETH => AtomicEth::LEN,
            ExtHeaders::AETH => Aeth::LEN,
            ExtHeaders::ATOMIC_ACK_ETH => AtomicAckEth::LEN,
            ExtHeaders::IMMDT => ImmDt::LEN,
            ExtHeaders::IETH => Ieth::LEN,
            _ => 0,
        }
    }

    /// The total wire length of the headers in the set.
    pub const fn len(self) -> usize {
        let mut sum = 0;
        let mut i = 0;
        while i < Self::ALL.len() {
            if self.contains(Self::ALL[i]) {
                sum += Self::ALL[i].single_len();
            }
            i += 1;
        }
        sum
    }

    /// Where `header` starts, counted from the first byte of the BTH, or
    /// `None` if `header` is not exactly one header or is not in the set.
    pub const fn offset_of(self, header: ExtHeaders) -> Option<usize> {
        if header.single_len() == 0 || !self.contains(header) {
            return None;
        }
        // The headers before `header` in wire order are the lower bits.
        Some(Bth::LEN + ExtHeaders(self.0 & (header.0 - 1)).len())
    }
}

/// A BTH opcode that roxe implements.
///
/// The discriminant is the opcode byte on the wire. Variant names are
/// transport, operation and position as the IBTA names them; `Imm` is
/// "with immediate" and `Inv` "with invalidate".
#[allow(missing_docs)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Opcode {
    RcSendFirst = 0x00,
    RcSendMiddle = 0x01,
    RcSendLast = 0x02,
    RcSendLastImm = 0x03,
    RcSendOnly = 0x04,
    RcSendOnlyImm = 0x05,
    RcRdmaWriteFirst = 0x06,
    RcRdmaWriteMiddle = 0x07,
    RcRdmaWriteLast = 0x08,
    RcRdmaWriteLastImm = 0x09,
    RcRdmaWriteOnly = 0x0a,
    RcRdmaWriteOnlyImm = 0x0b,
    RcRdmaReadRequest = 0x0c,
    RcRdmaReadResponseFirst = 0x0d,
    RcRdmaReadResponseMiddle = 0x0e,
    RcRdmaReadResponseLast = 0x0f,
    RcRdmaReadResponseOnly = 0x10,
    RcAcknowledge = 0x11,
    RcAtomicAcknowledge = 0x12,
    RcCompareSwap = 0x13,
    RcFetchAdd = 0x14,
    RcSendLastInv = 0x16,
    RcSendOnlyInv = 0x17,
    RcFlush = 0x1c,
    RcAtomicWrite = 0x1d,

    UcSendFirst = 0x20,
    UcSendMiddle = 0x21,
    UcSendLast = 0x22,
    UcSendLastImm = 0x23,
    UcSendOnly = 0x24,
    UcSendOnlyImm = 0x25,
    UcRdmaWriteFirst = 0x26,
    UcRdmaWriteMiddle = 0x27,
    UcRdmaWriteLast = 0x28,
    UcRdmaWriteLastImm = 0x29,
    UcRdmaWriteOnly = 0x2a,
    UcRdmaWriteOnlyImm = 0x2b,

    UdSendOnly = 0x64,
    UdSendOnlyImm = 0x65,

    XrcSendFirst = 0xa0,
    XrcSendMiddle = 0xa1,
    XrcSendLast = 0xa2,
    XrcSendLastImm = 0xa3,
    XrcSendOnly = 0xa4,
    XrcSendOnlyImm = 0xa5,
    XrcRdmaWriteFirst = 0xa6,
    XrcRdmaWriteMiddle = 0xa7,
    XrcRdmaWriteLast = 0xa8,
    XrcRdmaWriteLastImm = 0xa9,
    XrcRdmaWriteOnly = 0xaa,
    XrcRdmaWriteOnlyImm = 0xab,
    XrcRdmaReadRequest = 0xac,
    XrcRdmaReadResponseFirst = 0xad,
    XrcRdmaReadResponseMiddle = 0xae,
    XrcRdmaReadResponseLast = 0xaf,
    XrcRdmaReadResponseOnly = 0xb0,
    XrcAcknowledge = 0xb1,
    XrcAtomicAcknowledge = 0xb2,
    XrcCompareSwap = 0xb3,
    XrcFetchAdd = 0xb4,
    XrcSendLastInv = 0xb6,
    XrcSendOnlyInv = 0xb7,
}

impl Opcode {
    /// Every opcode roxe implements, in numeric order.
    pub const ALL: [Opcode; 62] = [
        Opcode::RcSendFirst,
        Opcode::RcSendMiddle,
        Opcode::RcSendLast,
        Opcode::RcSendLastImm,
        Opcode::RcSendOnly,
        Opcode::RcSendOnlyImm,
        Opcode::RcRdmaWriteFirst,
        Opcode::RcRdmaWriteMiddle,
        Opcode::RcRdmaWriteLast,
        Opcode::RcRdmaWriteLastImm,
        Opcode::RcRdmaWriteOnly,
        Opcode::RcRdmaWriteOnlyImm,
        Opcode::RcRdmaReadRequest,
        Opcode::RcRdmaReadResponseFirst,
        Opcode::RcRdmaReadResponseMiddle,
        Opcode::RcRdmaReadResponseLast,
        Opcode::RcRdmaReadResponseOnly,
        Opcode::RcAcknowledge,
        Opcode::RcAtomicAcknowledge,
        Opcode::RcCompareSwap,
        Opcode::RcFetchAdd,
        Opcode::RcSendLastInv,
        Opcode::RcSendOnlyInv,
        Opcode::RcFlush,
        Opcode::RcAtomicWrite,
        Opcode::UcSendFirst,
        Opcode::UcSendMiddle,
        Opcode::UcSendLast,
        Opcode::UcSendLastImm,
        Opcode::UcSendOnly,
        Opcode::UcSendOnlyImm,
        Opcode::UcRdmaWriteFirst,
        Opcode::UcRdmaWriteMiddle,
        Opcode::UcRdmaWriteLast,
        Opcode::UcRdmaWriteLastImm,
        Opcode::UcRdmaWriteOnly,
        Opcode::UcRdmaWriteOnlyImm,
        Opcode::UdSendOnly,
        Opcode::UdSendOnlyImm,
        Opcode::XrcSendFirst,
        Opcode::XrcSendMiddle,
        Opcode::XrcSendLast,
        Opcode::XrcSendLastImm,
        Opcode::XrcSendOnly,
        Opcode::XrcSendOnlyImm,
        Opcode::XrcRdmaWriteFirst,
        Opcode::XrcRdmaWriteMiddle,
        Opcode::XrcRdmaWriteLast,
        Opcode::XrcRdmaWriteLastImm,
        Opcode::XrcRdmaWriteOnly,
        Opcode::XrcRdmaWriteOnlyImm,
        Opcode::XrcRdmaReadRequest,
        Opcode::XrcRdmaReadResponseFirst,
        Opcode::XrcRdmaReadResponseMiddle,
        Opcode::XrcRdmaReadResponseLast,
        Opcode::XrcRdmaReadResponseOnly,
        Opcode::XrcAcknowledge,
        Opcode::XrcAtomicAcknowledge,
        Opcode::XrcCompareSwap,
        Opcode::XrcFetchAdd,
        Opcode::XrcSendLastInv,
        Opcode::XrcSendOnlyInv,
    ];

    /// The opcode for a wire byte, or `None` for any opcode roxe does not
    /// implement.
    pub const fn from_u8(v: u8) -> Option<Opcode> {
        Some(match v {
            0x00 => Opcode::RcSendFirst,
            0x01 => Opcode::RcSendMiddle,
            0x02 => Opcode::RcSendLast,
            0x03 => Opcode::RcSendLastImm,
            0x04 => Opcode::RcSendOnly,
            0x05 => Opcode::RcSendOnlyImm,
            0x06 => Opcode::RcRdmaWriteFirst,
            0x07 => Opcode::RcRdmaWriteMiddle,
            0x08 => Opcode::RcRdmaWriteLast,
            0x09 => Opcode::RcRdmaWriteLastImm,
            0x0a => Opcode::RcRdmaWriteOnly,
            0x0b => Opcode::RcRdmaWriteOnlyImm,
            0x0c => Opcode::RcRdmaReadRequest,
            0x0d => Opcode::RcRdmaReadResponseFirst,
            0x0e => Opcode::RcRdmaReadResponseMiddle,
            0x0f => Opcode::RcRdmaReadResponseLast,
            0x10 => Opcode::RcRdmaReadResponseOnly,
            0x11 => Opcode::RcAcknowledge,
            0x12 => Opcode::RcAtomicAcknowledge,
            0x13 => Opcode::RcCompareSwap,
            0x14 => Opcode::RcFetchAdd,
            0x16 => Opcode::RcSendLastInv,
            0x17 => Opcode::RcSendOnlyInv,
            0x1c => Opcode::RcFlush,
            0x1d => Opcode::RcAtomicWrite,
            0x20 => Opcode::UcSendFirst,
            0x21 => Opcode::UcSendMiddle,
            0x22 => Opcode::UcSendLast,
            0x23 => Opcode::UcSendLastImm,
            0x24 => Opcode::UcSendOnly,
            0x25 => Opcode::UcSendOnlyImm,
            0x26 => Opcode::UcRdmaWriteFirst,
            0x27 => Opcode::UcRdmaWriteMiddle,
            0x28 => Opcode::UcRdmaWriteLast,
            0x29 => Opcode::UcRdmaWriteLastImm,
            0x2a => Opcode::UcRdmaWriteOnly,
            0x2b => Opcode::UcRdmaWriteOnlyImm,
            0x64 => Opcode::UdSendOnly,
            0x65 => Opcode::UdSendOnlyImm,
            0xa0 => Opcode::XrcSendFirst,
            0xa1 => Opcode::XrcSendMiddle,
            0xa2 => Opcode::XrcSendLast,
            0xa3 => Opcode::XrcSendLastImm,
            0xa4 => Opcode::XrcSendOnly,
            0xa5 => Opcode::XrcSendOnlyImm,
            0xa6 => Opcode::XrcRdmaWriteFirst,
            0xa7 => Opcode::XrcRdmaWriteMiddle,
            0xa8 => Opcode::XrcRdmaWriteLast,
            0xa9 => Opcode::XrcRdmaWriteLastImm,
            0xaa => Opcode::XrcRdmaWriteOnly,
            0xab => Opcode::XrcRdmaWriteOnlyImm,
            0xac => Opcode::XrcRdmaReadRequest,
            0xad => Opcode::XrcRdmaReadResponseFirst,
            0xae => Opcode::XrcRdmaReadResponseMiddle,
            0xaf => Opcode::XrcRdmaReadResponseLast,
            0xb0 => Opcode::XrcRdmaReadResponseOnly,
            0xb1 => Opcode::XrcAcknowledge,
            0xb2 => Opcode::XrcAtomicAcknowledge,
            0xb3 => Opcode::XrcCompareSwap,
            0xb4 => Opcode::XrcFetchAdd,
            0xb6 => Opcode::XrcSendLastInv,
            0xb7 => Opcode::XrcSendOnlyInv,
            _ => return None,
        })
    }

    /// The opcode byte on the wire.
    pub const fn to_u8(self) -> u8 {
        self as u8
    }

    /// The operation bits: the low five bits, shared across transports.
    const fn op_bits(self) -> u8 {
        self.to_u8() & 0x1f
    }

    /// The transport service.
    pub const fn transport(self) -> Transport {
        match self.to_u8() >> 5 {
            0 => Transport::Rc,
            1 => Transport::Uc,
            5 => Transport::Xrc,
            // Only UD opcodes (3) are left: `from_u8` admits no others.
            _ => Transport::Ud,
        }
    }

    /// The opcode of the same operation and position on transport `t`, if
    /// `t` has one (UC has no RDMA READ, UD only SEND Only, XRC no FLUSH).
    pub const fn on_transport(self, t: Transport) -> Option<Opcode> {
        Opcode::from_u8(t.opcode_base() | self.op_bits())
    }

    /// The ACKNOWLEDGE opcode of transport `t`: the XRC one for XRC, the RC
    /// one otherwise (only reliable transports acknowledge).
    pub const fn acknowledge(t: Transport) -> Opcode {
        match t {
            Transport::Xrc => Opcode::XrcAcknowledge,
            _ => Opcode::RcAcknowledge,
        }
    }

    /// The ATOMIC ACKNOWLEDGE opcode of transport `t`: the XRC one for
    /// XRC, the RC one otherwise.
    pub const fn atomic_acknowledge(t: Transport) -> Opcode {
        match t {
            Transport::Xrc => Opcode::XrcAtomicAcknowledge,
            _ => Opcode::RcAtomicAcknowledge,
        }
    }

    /// The operation the packet belongs to.
    pub const fn operation(self) -> Operation {
        match self.op_bits() {
            0x00..=0x05 | 0x16 | 0x17 => Operation::Send,
            0x06..=0x0b => Operation::RdmaWrite,
            0x0c => Operation::RdmaReadRequest,
            0x0d..=0x10 => Operation::RdmaReadResponse,
            0x11 => Operation::Acknowledge,
            0x12 => Operation::AtomicAcknowledge,
            0x13 => Operation::CompareSwap,
            0x14 => Operation::FetchAdd,
            0x1c => Operation::Flush,
            // 0x1d (RC only), the last one `from_u8` admits.
            _ => Operation::AtomicWrite,
        }
    }

    /// Where the packet sits in its message.
    pub const fn position(self) -> Position {
        match self.op_bits() {
            0x00 | 0x06 | 0x0d => Position::First,
            0x01 | 0x07 | 0x0e => Position::Middle,
            0x02 | 0x03 | 0x08 | 0x09 | 0x0f | 0x16 => Position::Last,
            _ => Position::Only,
        }
    }

    /// The extended headers that follow the BTH.
    pub const fn ext_headers(self) -> ExtHeaders {
        let op = match self.op_bits() {
            0x03 | 0x05 | 0x09 => ExtHeaders::IMMDT,
            0x06 | 0x0a | 0x0c | 0x1d => ExtHeaders::RETH,
            0x0b => ExtHeaders::RETH.union(ExtHeaders::IMMDT),
            0x0d | 0x0f | 0x10 | 0x11 => ExtHeaders::AETH,
            0x12 => ExtHeaders::AETH.union(ExtHeaders::ATOMIC_ACK_ETH),
            0x13 | 0x14 => ExtHeaders::ATOMIC_ETH,
            0x16 | 0x17 => ExtHeaders::IETH,
            0x1c => ExtHeaders::FETH.union(ExtHeaders::RETH),
            _ => ExtHeaders::NONE,
        };
        match self.transport() {
            Transport::Ud => op.union(ExtHeaders::DETH),
            // Every XRC request names the SRQ it is for; responses go to
            // the initiator QP the BTH names.
            Transport::Xrc if self.is_request() => op.union(ExtHeaders::XRCETH),
            _ => op,
        }
    }

    /// The length of the BTH and every extended header: where the
    /// payload starts.
    pub const fn header_len(self) -> usize {
        Bth::LEN + self.ext_headers().len()
    }

    /// Whether the packet carries a payload (possibly of zero bytes).
    /// Packets of the other opcodes must end right after their headers.
    pub const fn has_payload(self) -> bool {
        !matches!(
            self.operation(),
            Operation::RdmaReadRequest
                | Operation::Acknowledge
                | Operation::AtomicAcknowledge
                | Operation::CompareSwap
                | Operation::FetchAdd
                | Operation::Flush
        )
    }

    /// Whether a requester sends this opcode (the responder's receive
    /// path handles it).
    pub const fn is_request(self) -> bool {
        !self.is_response()
    }

    /// Whether a responder sends this opcode (the requester's completer
    /// handles it).
    pub const fn is_response(self) -> bool {
        matches!(
            self.operation(),
            Operation::RdmaReadResponse | Operation::Acknowledge | Operation::AtomicAcknowledge
        )
    }

    /// Whether the packet carries immediate data.
    pub const fn has_immediate(self) -> bool {
        self.ext_headers().contains(ExtHeaders::IMMDT)
    }

    /// Whether the packet carries an rkey to invalidate.
    pub const fn has_invalidate(self) -> bool {
        self.ext_headers().contains(ExtHeaders::IETH)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_known_byte_round_trips_and_nothing_else_parses() {
        let mut known = 0;
        for v in 0..=u8::MAX {
            match Opcode::from_u8(v) {
                Some(op) => {
                    assert_eq!(op.to_u8(), v);
                    known += 1;
                }
                None => assert!(!Opcode::ALL.iter().any(|op| op.to_u8() == v), "{v:#x}"),
            }
        }
        assert_eq!(known, Opcode::ALL.len());
        for w in Opcode::ALL.windows(2) {
            assert!(w[0].to_u8() < w[1].to_u8());
        }
    }

    #[test]
    fn rd_cnp_and_reserved_are_unknown() {
        for v in 0x40..=0x5f {
            assert_eq!(Opcode::from_u8(v), None, "RD {v:#x}");
        }
        // 0xb5 and 0xb8 are reserved in the XRC range; roxe has no XRC
        // FLUSH (0xbc) or ATOMIC WRITE (0xbd).
        for v in [
            0x15, 0x18, 0x1b, 0x1e, 0x1f, 0x2c, 0x30, 0x60, 0x63, 0x66, 0x80, 0x81, 0xb5, 0xb8,
            0xbc, 0xbd, 0xbf, 0xc0, 0xe0, 0xff,
        ] {
            assert_eq!(Opcode::from_u8(v), None, "{v:#x}");
        }
    }

    #[test]
    fn header_lengths_match_ibta() {
        // (opcode, BTH plus extended headers) from the IBTA header tables;
        // rxe_opcode.c gives the same numbers.
        let want = [
            (Opcode::RcSendFirst, 12),
            (Opcode::RcSendMiddle, 12),
            (Opcode::RcSendLast, 12),
            (Opcode::RcSendLastImm, 16),
            (Opcode::RcSendOnly, 12),
            (Opcode::RcSendOnlyImm, 16),
            (Opcode::RcRdmaWriteFirst, 28),
            (Opcode::RcRdmaWriteMiddle, 12),
            (Opcode::RcRdmaWriteLast, 12),
            (Opcode::RcRdmaWriteLastImm, 16),
            (Opcode::RcRdmaWriteOnly, 28),
            (Opcode::RcRdmaWriteOnlyImm, 32),
            (Opcode::RcRdmaReadRequest, 28),
            (Opcode::RcRdmaReadResponseFirst, 16),
            (Opcode::RcRdmaReadResponseMiddle, 12),
            (Opcode::RcRdmaReadResponseLast, 16),
            (Opcode::RcRdmaReadResponseOnly, 16),
            (Opcode::RcAcknowledge, 16),
            (Opcode::RcAtomicAcknowledge, 24),
            (Opcode::RcCompareSwap, 40),
            (Opcode::RcFetchAdd, 40),
            (Opcode::RcSendLastInv, 16),
            (Opcode::RcSendOnlyInv, 16),
            (Opcode::RcFlush, 32),
            (Opcode::RcAtomicWrite, 28),
            (Opcode::UcSendFirst, 12),
            (Opcode::UcSendMiddle, 12),
            (Opcode::UcSendLast, 12),
            (Opcode::UcSendLastImm, 16),
            (Opcode::UcSendOnly, 12),
            (Opcode::UcSendOnlyImm, 16),
            (Opcode::UcRdmaWriteFirst, 28),
            (Opcode::UcRdmaWriteMiddle, 12),
            (Opcode::UcRdmaWriteLast, 12),
            (Opcode::UcRdmaWriteLastImm, 16),
            (Opcode::UcRdmaWriteOnly, 28),
            (Opcode::UcRdmaWriteOnlyImm, 32),
            (Opcode::UdSendOnly, 20),
            (Opcode::UdSendOnlyImm, 24),
            // XRC: the RC headers, and an XRCETH (4) on every request.
            (Opcode::XrcSendFirst, 16),
            (Opcode::XrcSendMiddle, 16),
            (Opcode::XrcSendLast, 16),
            (Opcode::XrcSendLastImm, 20),
            (Opcode::XrcSendOnly, 16),
            (Opcode::XrcSendOnlyImm, 20),
            (Opcode::XrcRdmaWriteFirst, 32),
            (Opcode::XrcRdmaWriteMiddle, 16),
            (Opcode::XrcRdmaWriteLast, 16),
            (Opcode::XrcRdmaWriteLastImm, 20),
            (Opcode::XrcRdmaWriteOnly, 32),
            (Opcode::XrcRdmaWriteOnlyImm, 36),
            (Opcode::XrcRdmaReadRequest, 32),
            (Opcode::XrcRdmaReadResponseFirst, 16),
            (Opcode::XrcRdmaReadResponseMiddle, 12),
            (Opcode::XrcRdmaReadResponseLast, 16),
            (Opcode::XrcRdmaReadResponseOnly, 16),
            (Opcode::XrcAcknowledge, 16),
            (Opcode::XrcAtomicAcknowledge, 24),
            (Opcode::XrcCompareSwap, 44),
            (Opcode::XrcFetchAdd, 44),
            (Opcode::XrcSendLastInv, 20),
            (Opcode::XrcSendOnlyInv, 20),
        ];
        assert_eq!(want.len(), Opcode::ALL.len());
        for (op, len) in want {
            assert_eq!(op.header_len(), len, "{op:?}");
            assert!(op.header_len() >= Bth::LEN);
            assert_eq!(op.header_len() % 4, 0);
        }
    }

    #[test]
    fn header_offsets_follow_wire_order() {
        let h = Opcode::RcRdmaWriteOnlyImm.ext_headers();
        assert_eq!(h.offset_of(ExtHeaders::RETH), Some(12));
        assert_eq!(h.offset_of(ExtHeaders::IMMDT), Some(28));
        assert_eq!(h.offset_of(ExtHeaders::AETH), None);
        let h = Opcode::RcAtomicAcknowledge.ext_headers();
        assert_eq!(h.offset_of(ExtHeaders::AETH), Some(12));
        assert_eq!(h.offset_of(ExtHeaders::ATOMIC_ACK_ETH), Some(16));
        let h = Opcode::RcFlush.ext_headers();
        assert_eq!(h.offset_of(ExtHeaders::FETH), Some(12));
        assert_eq!(h.offset_of(ExtHeaders::RETH), Some(16));
        let h = Opcode::UdSendOnlyImm.ext_headers();
        assert_eq!(h.offset_of(ExtHeaders::DETH), Some(12));
        assert_eq!(h.offset_of(ExtHeaders::IMMDT), Some(20));
        // A set of two is not a header.
        assert_eq!(h.offset_of(h), None);
        assert_eq!(h.offset_of(ExtHeaders::NONE), None);
        // XRCETH comes right after the BTH, before everything else.
        let h = Opcode::XrcRdmaWriteOnlyImm.ext_headers();
        assert_eq!(h.offset_of(ExtHeaders::XRCETH), Some(12));
        assert_eq!(h.offset_of(ExtHeaders::RETH), Some(16));
        assert_eq!(h.offset_of(ExtHeaders::IMMDT), Some(32));
        let h = Opcode::XrcCompareSwap.ext_headers();
        assert_eq!(h.offset_of(ExtHeaders::XRCETH), Some(12));
        assert_eq!(h.offset_of(ExtHeaders::ATOMIC_ETH), Some(16));
        let h = Opcode::XrcSendOnlyInv.ext_headers();
        assert_eq!(h.offset_of(ExtHeaders::XRCETH), Some(12));
        assert_eq!(h.offset_of(ExtHeaders::IETH), Some(16));
        // Responses carry none.
        let h = Opcode::XrcAtomicAcknowledge.ext_headers();
        assert_eq!(h.offset_of(ExtHeaders::XRCETH), None);
        assert_eq!(h.offset_of(ExtHeaders::AETH), Some(12));
        assert_eq!(h.offset_of(ExtHeaders::ATOMIC_ACK_ETH), Some(16));
    }

    #[test]
    fn xrc_mirrors_rc() {
        for op in Opcode::ALL {
            let Some(x) = op.on_transport(Transport::Xrc) else {
                // Only FLUSH and ATOMIC WRITE have no XRC opcode.
                if op.transport() == Transport::Rc {
                    assert!(
                        matches!(op.operation(), Operation::Flush | Operation::AtomicWrite),
                        "{op:?}"
                    );
                }
                continue;
            };
            assert_eq!(x.transport(), Transport::Xrc);
            assert_eq!(x.to_u8() & 0x1f, op.to_u8() & 0x1f);
            assert_eq!(x.operation(), op.operation(), "{op:?}");
            assert_eq!(x.position(), op.position(), "{op:?}");
            assert_eq!(x.has_payload(), op.has_payload(), "{op:?}");
            assert_eq!(x.is_request(), op.is_request(), "{op:?}");
            if op.transport() == Transport::Rc {
                assert_eq!(x.on_transport(Transport::Rc), Some(op));
                let extra = if x.is_request() { Xrceth::LEN } else { 0 };
                assert_eq!(x.header_len(), op.header_len() + extra, "{op:?}");
            }
        }
        assert_eq!(Opcode::XrcSendFirst.to_u8(), 0xa0);
        assert_eq!(Opcode::XrcAcknowledge.to_u8(), 0xb1);
        assert_eq!(Opcode::XrcSendOnlyInv.to_u8(), 0xb7);
        assert_eq!(Opcode::RcFlush.on_transport(Transport::Xrc), None);
        assert_eq!(Opcode::RcAtomicWrite.on_transport(Transport::Xrc), None);
        assert_eq!(Opcode::RcRdmaReadRequest.on_transport(Transport::Uc), None);
        assert_eq!(
            Opcode::RcSendOnly.on_transport(Transport::Ud),
            Some(Opcode::UdSendOnly)
        );
        assert_eq!(
            Opcode::XrcSendOnlyImm.on_transport(Transport::Uc),
            Some(Opcode::UcSendOnlyImm)
        );
    }

    #[test]
    fn acknowledge_opcodes_per_transport() {
        use Transport as T;
        assert!(T::Rc.is_reliable() && T::Xrc.is_reliable());
        assert!(!T::Uc.is_reliable() && !T::Ud.is_reliable());
        assert_eq!(Opcode::acknowledge(T::Rc), Opcode::RcAcknowledge);
        assert_eq!(Opcode::acknowledge(T::Xrc), Opcode::XrcAcknowledge);
        assert_eq!(
            Opcode::atomic_acknowledge(T::Rc),
            Opcode::RcAtomicAcknowledge
        );
        assert_eq!(
            Opcode::atomic_acknowledge(T::Xrc),
            Opcode::XrcAtomicAcknowledge
        );
        // Unreliable transports have none: the RC ones stand in.
        for t in [T::Uc, T::Ud] {
            assert_eq!(Opcode::acknowledge(t), Opcode::RcAcknowledge);
            assert_eq!(Opcode::atomic_acknowledge(t), Opcode::RcAtomicAcknowledge);
        }
        for t in [T::Rc, T::Xrc] {
            assert_eq!(Opcode::acknowledge(t).transport(), t);
            assert_eq!(Opcode::acknowledge(t).operation(), Operation::Acknowledge);
            assert_eq!(Opcode::atomic_acknowledge(t).transport(), t);
            assert_eq!(
                Opcode::atomic_acknowledge(t).operation(),
                Operation::AtomicAcknowledge
            );
        }
    }

    #[test]
    fn classification() {
        use Operation as O;
        use Position as P;
        let cases = [
            (Opcode::RcSendFirst, O::Send, P::First, true, true),
            (Opcode::RcSendMiddle, O::Send, P::Middle, true, true),
            (Opcode::RcSendLastInv, O::Send, P::Last, true, true),
            (Opcode::RcSendOnlyInv, O::Send, P::Only, true, true),
            (
                Opcode::UcRdmaWriteLastImm,
                O::RdmaWrite,
                P::Last,
                true,
                true,
            ),
            (
                Opcode::RcRdmaReadRequest,
                O::RdmaReadRequest,
                P::Only,
                false,
                true,
            ),
            (
                Opcode::RcRdmaReadResponseFirst,
                O::RdmaReadResponse,
                P::First,
                true,
                false,
            ),
            (
                Opcode::RcRdmaReadResponseMiddle,
                O::RdmaReadResponse,
                P::Middle,
                true,
                false,
            ),
            (
                Opcode::RcRdmaReadResponseLast,
                O::RdmaReadResponse,
                P::Last,
                true,
                false,
            ),
            (
                Opcode::RcRdmaReadResponseOnly,
                O::RdmaReadResponse,
                P::Only,
                true,
                false,
            ),
            (Opcode::RcAcknowledge, O::Acknowledge, P::Only, false, false),
            (
                Opcode::RcAtomicAcknowledge,
                O::AtomicAcknowledge,
                P::Only,
                false,
                false,
            ),
            (Opcode::RcCompareSwap, O::CompareSwap, P::Only, false, true),
            (Opcode::RcFetchAdd, O::FetchAdd, P::Only, false, true),
            (Opcode::RcFlush, O::Flush, P::Only, false, true),
            (Opcode::RcAtomicWrite, O::AtomicWrite, P::Only, true, true),
            (Opcode::UdSendOnlyImm, O::Send, P::Only, true, true),
            (Opcode::XrcSendLastInv, O::Send, P::Last, true, true),
            (
                Opcode::XrcRdmaReadRequest,
                O::RdmaReadRequest,
                P::Only,
                false,
                true,
            ),
            (
                Opcode::XrcRdmaReadResponseMiddle,
                O::RdmaReadResponse,
                P::Middle,
                true,
                false,
            ),
            (
                Opcode::XrcAcknowledge,
                O::Acknowledge,
                P::Only,
                false,
                false,
            ),
            (Opcode::XrcFetchAdd, O::FetchAdd, P::Only, false, true),
        ];
        for (op, operation, position, payload, request) in cases {
            assert_eq!(op.operation(), operation, "{op:?}");
            assert_eq!(op.position(), position, "{op:?}");
            assert_eq!(op.has_payload(), payload, "{op:?}");
            assert_eq!(op.is_request(), request, "{op:?}");
            assert_eq!(op.is_response(), !request, "{op:?}");
        }
    }

    #[test]
    fn table_wide_invariants() {
        for op in Opcode::ALL {
            let h = op.ext_headers();
            // Transports.
            let t = op.transport();
            assert_eq!(h.contains(ExtHeaders::DETH), t == Transport::Ud, "{op:?}");
            assert_eq!(
                h.contains(ExtHeaders::XRCETH),
                t == Transport::Xrc && op.is_request(),
                "{op:?}"
            );
            if !t.is_reliable() {
                assert!(
                    matches!(op.operation(), Operation::Send | Operation::RdmaWrite),
                    "{op:?}"
                );
            }
            // Responses are reliable and carry an AETH unless they are
            // middles.
            if op.is_response() {
                assert!(t.is_reliable(), "{op:?}");
                assert_eq!(
                    h.contains(ExtHeaders::AETH),
                    op.position() != Position::Middle,
                    "{op:?}"
                );
            } else {
                assert!(!h.contains(ExtHeaders::AETH), "{op:?}");
            }
            // RETH exactly on the packets that start an RDMA operation.
            let starts_rdma = op.position().starts_message()
                && matches!(
                    op.operation(),
                    Operation::RdmaWrite
                        | Operation::RdmaReadRequest
                        | Operation::Flush
                        | Operation::AtomicWrite
                );
            assert_eq!(h.contains(ExtHeaders::RETH), starts_rdma, "{op:?}");
            // Immediate data and invalidate only end a message, never both.
            if op.has_immediate() || op.has_invalidate() {
                assert!(op.position().ends_message(), "{op:?}");
                assert!(!(op.has_immediate() && op.has_invalidate()), "{op:?}");
            }
            // Every offset lies inside the header block.
            for one in ExtHeaders::ALL {
                if let Some(off) = h.offset_of(one) {
                    assert!(off + one.len() <= op.header_len(), "{op:?}");
                }
            }
        }
    }
}
