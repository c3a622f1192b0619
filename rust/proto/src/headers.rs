// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The IB transport headers of a RoCEv2 packet (IBTA vol 1, chapter 9),
//! and a parser for a whole UDP payload.
//!
//! Every field is big-endian on the wire. Reserved bits are written as zero
//! and ignored when read, as the IBTA asks. Decoding a header from its
//! fixed-size byte array cannot fail; only [`parse`] deals with lengths,
//! and it checks every one before it slices.

use super::icrc;
use super::opcode::{ExtHeaders, Opcode};
use super::psn::Psn;

/// The transport header version roxe speaks (and the only one defined).
pub const TVER: u8 = 0;
/// The default partition key.
pub const DEFAULT_PKEY: u16 = 0xffff;
/// The largest queue pair number (24 bits).
pub const QPN_MASK: u32 = 0x00ff_ffff;

/// The number of pad bytes that bring a payload of `payload_len` bytes
/// to a multiple of four.
pub const fn pad_len(payload_len: usize) -> u8 {
    // CAST: the value is below 4.
    (payload_len.wrapping_neg() & 3) as u8
}

/// The Base Transport Header, 12 bytes.
///
/// ```text
/// byte 0     opcode
/// byte 1     SE(7) M(6) PadCnt(5:4) TVer(3:0)
/// bytes 2-3  P_Key
/// byte 4     FECN(7) BECN(6) reserved(5:0)   -- "resv8a" in the ICRC
/// bytes 5-7  DestQP
/// byte 8     AckReq(7) reserved(6:0)
/// bytes 9-11 PSN
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Bth {
    /// The opcode byte, as sent ([`Opcode::from_u8`] tells what it is).
    pub opcode: u8,
    /// Solicited event.
    pub se: bool,
    /// Migration state (MigReq).
    pub migreq: bool,
    /// Pad count, 2 bits: bytes between the payload and the ICRC.
    pub pad: u8,
    /// Transport header version, 4 bits.
    pub tver: u8,
    /// Partition key.
    pub pkey: u16,
    /// Forward explicit congestion notification (RoCEv2).
    pub fecn: bool,
    /// Backward explicit congestion notification (RoCEv2).
    pub becn: bool,
    /// Destination queue pair, 24 bits.
    pub dest_qpn: u32,
    /// Acknowledge request.
    pub ack_req: bool,
    /// Packet sequence number.
    pub psn: Psn,
}

impl Bth {
    /// Wire length.
    pub const LEN: usize = 12;

    /// A BTH with all flags clear, no pad and the current version.
    pub const fn new(opcode: Opcode, pkey: u16, dest_qpn: u32, psn: Psn) -> Bth {
        Bth {
            opcode: opcode.to_u8(),
            se: false,
            migreq: false,
            pad: 0,
            tver: TVER,
            pkey,
            fecn: false,
            becn: false,
            dest_qpn: dest_qpn & QPN_MASK,
            ack_req: false,
            psn,
        }
    }

    /// Reads a BTH.
    pub const fn from_bytes(b: &[u8; Self::LEN]) -> Bth {
        Bth {
            opcode: b[0],
            se: b[1] & 0x80 != 0,
            migreq: b[1] & 0x40 != 0,
            pad: (b[1] >> 4) & 0x3,
            tver: b[1] & 0xf,
            pkey: u16::from_be_bytes([b[2], b[3]]),
            fecn: b[4] & 0x80 != 0,
            becn: b[4] & 0x40 != 0,
            dest_qpn: u32::from_be_bytes([0, b[5], b[6], b[7]]),
            ack_req: b[8] & 0x80 != 0,
            psn: Psn::new(u32::from_be_bytes([0, b[9], b[10], b[11]])),
        }
    }

    /// Writes the BTH. Fields wider than their wire width are truncated
    /// to it.
    pub const fn to_bytes(self) -> [u8; Self::LEN] {
        let pkey = self.pkey.to_be_bytes();
        let qpn = self.dest_qpn.to_be_bytes();
        let psn = self.psn.get().to_be_bytes();
        [
            self.opcode,
            (self.se as u8) << 7
                | (self.migreq as u8) << 6
                | (self.pad & 0x3) << 4
                | (self.tver & 0xf),
            pkey[0],
            pkey[1],
            (self.fecn as u8) << 7 | (self.becn as u8) << 6,
            qpn[1],
            qpn[2],
            qpn[3],
            (self.ack_req as u8) << 7,
            psn[1],
            psn[2],
            psn[3],
        ]
    }
}

/// The RDMA Extended Transport Header, 16 bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Reth {
    /// Remote virtual address.
    pub va: u64,
    /// Remote key.
    pub rkey: u32,
    /// Length of the whole RDMA operation in bytes.
    pub dma_len: u32,
}

impl Reth {
    /// Wire length.
    pub const LEN: usize = 16;

    /// Reads a RETH.
    pub const fn from_bytes(b: &[u8; Self::LEN]) -> Reth {
        Reth {
            va: u64::from_be_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]),
            rkey: u32::from_be_bytes([b[8], b[9], b[10], b[11]]),
            dma_len: u32::from_be_bytes([b[12], b[13], b[14], b[15]]),
        }
    }

    /// Writes the RETH.
    pub const fn to_bytes(self) -> [u8; Self::LEN] {
        let v = self.va.to_be_bytes();
        let r = self.rkey.to_be_bytes();
        let l = self.dma_len.to_be_bytes();
        [
            v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], r[0], r[1], r[2], r[3], l[0], l[1],
            l[2], l[3],
        ]
    }
}

/// The ACK Extended Transport Header, 4 bytes.
///
/// [`super::aeth::Syndrome`] interprets the syndrome.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Aeth {
    /// Syndrome: ACK, RNR NAK or NAK, and its argument.
    pub syndrome: u8,
    /// Message sequence number, 24 bits.
    pub msn: u32,
}

impl Aeth {
    /// Wire length.
    pub const LEN: usize = 4;

    /// Reads an AETH.
    pub const fn from_bytes(b: &[u8; Self::LEN]) -> Aeth {
        Aeth {
            syndrome: b[0],
            msn: u32::from_be_bytes([0, b[1], b[2], b[3]]),
        }
    }

    /// Writes the AETH; the MSN is truncated to 24 bits.
    pub const fn to_bytes(self) -> [u8; Self::LEN] {
        let m = self.msn.to_be_bytes();
        [self.syndrome, m[1], m[2], m[3]]
    }
}

/// The Atomic Extended Transport Header, 28 bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct AtomicEth {
    /// Remote virtual address (8-byte aligned).
    pub va: u64,
    /// Remote key.
    pub rkey: u32,
    /// The swap value of CmpSwap, or the addend of FetchAdd.
    pub swap_add: u64,
    /// The compare value of CmpSwap.
    pub compare: u64,
}

impl AtomicEth {
    /// Wire length.
    pub const LEN: usize = 28;

    /// Reads an AtomicETH.
    pub const fn from_bytes(b: &[u8; Self::LEN]) -> AtomicEth {
        AtomicEth {
            va: u64::from_be_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]),
            rkey: u32::from_be_bytes([b[8], b[9], b[10], b[11]]),
            swap_add: u64::from_be_bytes([b[12], b[13], b[14], b[15], b[16], b[17], b[18], b[19]]),
            compare: u64::from_be_bytes([b[20], b[21], b[22], b[23], b[24], b[25], b[26], b[27]]),
        }
    }

    /// Writes the AtomicETH.
    pub const fn to_bytes(self) -> [u8; Self::LEN] {
        let v = self.va.to_be_bytes();
        let r = self.rkey.to_be_bytes();
        let s = self.swap_add.to_be_bytes();
        let c = self.compare.to_be_bytes();
        [
            v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], r[0], r[1], r[2], r[3], s[0], s[1],
            s[2], s[3], s[4], s[5], s[6], s[7], c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7],
        ]
    }
}

/// The Atomic ACK Extended Transport Header, 8 bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct AtomicAckEth {
    /// The remote value before the atomic operation.
    pub orig: u64,
}

impl AtomicAckEth {
    /// Wire length.
    pub const LEN: usize = 8;

    /// Reads an AtomicAckETH.
    pub const fn from_bytes(b: &[u8; Self::LEN]) -> AtomicAckEth {
        AtomicAckEth {
            orig: u64::from_be_bytes(*b),
        }
    }

    /// Writes the AtomicAckETH.
    pub const fn to_bytes(self) -> [u8; Self::LEN] {
        self.orig.to_be_bytes()
    }
}

/// The Datagram Extended Transport Header, 8 bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Deth {
    /// Queue key.
    pub qkey: u32,
    /// Source queue pair, 24 bits (after a reserved byte).
    pub src_qpn: u32,
}

impl Deth {
    /// Wire length.
    pub const LEN: usize = 8;

    /// Reads a DETH.
    pub const fn from_bytes(b: &[u8; Self::LEN]) -> Deth {
        Deth {
            qkey: u32::from_be_bytes([b[0], b[1], b[2], b[3]]),
            src_qpn: u32::from_be_bytes([0, b[5], b[6], b[7]]),
        }
    }

    /// Writes the DETH; the source QPN is truncated to 24 bits.
    pub const fn to_bytes(self) -> [u8; Self::LEN] {
        let q = self.qkey.to_be_bytes();
        let s = self.src_qpn.to_be_bytes();
        [q[0], q[1], q[2], q[3], 0, s[1], s[2], s[3]]
    }
}

/// The XRC Extended Transport Header, 4 bytes: a reserved byte, then the
/// 24-bit number of the shared receive queue an XRC request is for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Xrceth {
    /// The XRC SRQ number, 24 bits.
    pub srqn: u32,
}

impl Xrceth {
    /// Wire length.
    pub const LEN: usize = 4;

    /// Reads an XRCETH; the reserved byte is ignored.
    pub const fn from_bytes(b: &[u8; Self::LEN]) -> Xrceth {
        Xrceth {
            srqn: u32::from_be_bytes([0, b[1], b[2], b[3]]),
        }
    }

    /// Writes the XRCETH with the reserved byte zero; the SRQ number is
    /// truncated to 24 bits.
    pub const fn to_bytes(self) -> [u8; Self::LEN] {
        let s = self.srqn.to_be_bytes();
        [0, s[1], s[2], s[3]]
    }
}

/// Immediate data, 4 bytes.
///
/// The value is the four wire bytes read big-endian. The verbs carry
/// `imm_data` as `__be32`, the same bytes in memory, so the kernel
/// converts with `u32::from_be` and `to_be`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ImmDt(pub u32);

impl ImmDt {
    /// Wire length.
    pub const LEN: usize = 4;

    /// Reads immediate data.
    pub const fn from_bytes(b: &[u8; Self::LEN]) -> ImmDt {
        ImmDt(u32::from_be_bytes(*b))
    }

    /// Writes immediate data.
    pub const fn to_bytes(self) -> [u8; Self::LEN] {
        self.0.to_be_bytes()
    }
}

/// The Invalidate Extended Transport Header, 4 bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Ieth {
    /// The rkey to invalidate.
    pub rkey: u32,
}

impl Ieth {
    /// Wire length.
    pub const LEN: usize = 4;

    /// Reads an IETH.
    pub const fn from_bytes(b: &[u8; Self::LEN]) -> Ieth {
        Ieth {
            rkey: u32::from_be_bytes(*b),
        }
    }

    /// Writes the IETH.
    pub const fn to_bytes(self) -> [u8; Self::LEN] {
        self.rkey.to_be_bytes()
    }
}

/// The FLUSH Extended Transport Header, 4 bytes (IBTA memory placement
/// extensions): 26 reserved bits, then the selectivity level in bits 5:4
/// and the placement type in bits 3:0 of the last byte.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Feth {
    /// Selectivity level, 2 bits.
    pub selectivity: u8,
    /// Placement type, 4 bits.
    pub placement_type: u8,
}

impl Feth {
    /// Wire length.
    pub const LEN: usize = 4;

    /// Reads a FETH.
    pub const fn from_bytes(b: &[u8; Self::LEN]) -> Feth {
        Feth {
            selectivity: (b[3] >> 4) & 0x3,
            placement_type: b[3] & 0xf,
        }
    }

    /// Writes the FETH; both fields are truncated to their widths.
    pub const fn to_bytes(self) -> [u8; Self::LEN] {
        [
            0,
            0,
            0,
            (self.selectivity & 0x3) << 4 | (self.placement_type & 0xf),
        ]
    }
}

/// The extended headers of one packet. [`parse`] fills exactly those that
/// the opcode carries; [`encode_headers`] requires exactly those.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Ext {
    /// Datagram ETH (UD).
    pub deth: Option<Deth>,
    /// XRC ETH (XRC requests).
    pub xrceth: Option<Xrceth>,
    /// FLUSH ETH.
    pub feth: Option<Feth>,
    /// RDMA ETH.
    pub reth: Option<Reth>,
    /// Atomic ETH.
    pub atomic_eth: Option<AtomicEth>,
    /// ACK ETH.
    pub aeth: Option<Aeth>,
    /// Atomic ACK ETH.
    pub atomic_ack_eth: Option<AtomicAckEth>,
    /// Immediate data.
    pub immdt: Option<ImmDt>,
    /// Invalidate ETH.
    pub ieth: Option<Ieth>,
}

impl Ext {
    /// The set of headers present.
    pub const fn present(&self) -> ExtHeaders {
        let mut s = ExtHeaders::NONE;
        if self.deth.is_some() {
            s = s.union(ExtHeaders::DETH);
        }
        if self.xrceth.is_some() {
            s = s.union(ExtHeaders::XRCETH);
        }
        if self.feth.is_some() {
            s = s.union(ExtHeaders::FETH);
        }
        if self.reth.is_some() {
            s = s.union(ExtHeaders::RETH);
        }
        if self.atomic_eth.is_some() {
            s = s.union(ExtHeaders::ATOMIC_ETH);
        }
        if self.aeth.is_some() {
            s = s.union(ExtHeaders::AETH);
        }
        if self.atomic_ack_eth.is_some() {
            s = s.union(ExtHeaders::ATOMIC_ACK_ETH);
        }
        if self.immdt.is_some() {
            s = s.union(ExtHeaders::IMMDT);
        }
        if self.ieth.is_some() {
            s = s.union(ExtHeaders::IETH);
        }
        s
    }
}

/// A parsed packet: the UDP payload of a RoCEv2 datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet<'a> {
    /// The opcode; equal to `bth.opcode`.
    pub opcode: Opcode,
    /// The base transport header.
    pub bth: Bth,
    /// The extended headers `opcode` carries, and no others.
    pub ext: Ext,
    /// The payload, without the pad bytes. Empty for opcodes without
    /// payload.
    pub payload: &'a [u8],
    /// The ICRC as sent: the last four bytes read little-endian, which is
    /// how [`icrc::Icrc::finish`] returns it.
    pub icrc: u32,
}

/// Why [`parse`] rejected a packet. Each reason is its own variant so the
/// receive path can count drops per reason; [`ParseError::index`] numbers
/// them densely for a counter array.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum ParseError {
    /// Fewer bytes than a BTH.
    TooShort = 0,
    /// An opcode roxe does not implement (including RD, CNP, reserved and
    /// manufacturer-specific ones).
    UnknownOpcode = 1,
    /// A transport header version other than [`TVER`].
    BadVersion = 2,
    /// Fewer bytes than the opcode's headers, the pad count and the ICRC.
    Truncated = 3,
    /// Payload or pad bytes on an opcode that carries no payload.
    UnexpectedPayload = 4,
    /// Payload and pad together are not a multiple of four bytes.
    Misaligned = 5,
}

impl ParseError {
    /// Every reason, in [`ParseError::index`] order.
    pub const ALL: [ParseError; 6] = [
        ParseError::TooShort,
        ParseError::UnknownOpcode,
        ParseError::BadVersion,
        ParseError::Truncated,
        ParseError::UnexpectedPayload,
        ParseError::Misaligned,
    ];

    /// A dense index in `0..ALL.len()`.
    pub const fn index(self) -> usize {
        self as usize
    }

    /// A short name, for counters and logs.
    pub const fn name(self) -> &'static str {
        match self {
            ParseError::TooShort => "too_short",
            ParseError::UnknownOpcode => "unknown_opcode",
            ParseError::BadVersion => "bad_version",
            ParseError::Truncated => "truncated",
            ParseError::UnexpectedPayload => "unexpected_payload",
            ParseError::Misaligned => "misaligned",
        }
    }
}

/// The `N` bytes of `buf` from `off`, if there are that many.
fn array_at<const N: usize>(buf: &[u8], off: usize) -> Option<&[u8; N]> {
    let end = off.checked_add(N)?;
    buf.get(off..end)?.try_into().ok()
}

/// The extended header `h` of a packet whose headers are `hdrs`, if the
/// opcode's header set `set` has it.
fn ext_at<const N: usize>(hdrs: &[u8], set: ExtHeaders, h: ExtHeaders) -> Option<&[u8; N]> {
    array_at(hdrs, set.offset_of(h)?)
}

/// Reads the extended headers `set` from `hdrs`, which starts with the BTH.
/// A header that does not fit is left out; [`parse`] has checked the
/// length, so that does not happen there.
fn decode_ext(hdrs: &[u8], set: ExtHeaders) -> Ext {
    Ext {
        deth: ext_at(hdrs, set, ExtHeaders::DETH).map(Deth::from_bytes),
        xrceth: ext_at(hdrs, set, ExtHeaders::XRCETH).map(Xrceth::from_bytes),
        feth: ext_at(hdrs, set, ExtHeaders::FETH).map(Feth::from_bytes),
        reth: ext_at(hdrs, set, ExtHeaders::RETH).map(Reth::from_bytes),
        atomic_eth: ext_at(hdrs, set, ExtHeaders::ATOMIC_ETH).map(AtomicEth::from_bytes),
        aeth: ext_at(hdrs, set, ExtHeaders::AETH).map(Aeth::from_bytes),
        atomic_ack_eth: ext_at(hdrs, set, ExtHeaders::ATOMIC_ACK_ETH).map(AtomicAckEth::from_bytes),
        immdt: ext_at(hdrs, set, ExtHeaders::IMMDT).map(ImmDt::from_bytes),
        ieth: ext_at(hdrs, set, ExtHeaders::IETH).map(Ieth::from_bytes),
    }
}

/// Parses the UDP payload of a RoCEv2 packet: the BTH, the extended
/// headers, the payload, the pad bytes and the 4-byte ICRC.
///
/// The checks run in the order of the [`ParseError`] variants, so a packet
/// is charged to the first rule it breaks. The ICRC is returned, not
/// checked: that needs the IP and UDP headers ([`icrc`]). Nor does the
/// parser look at anything that depends on the QP (the transport of the
/// opcode, the PSN, the P_Key or the lengths against the MTU).
pub fn parse(buf: &[u8]) -> Result<Packet<'_>, ParseError> {
    let bth = Bth::from_bytes(array_at(buf, 0).ok_or(ParseError::TooShort)?);
    let opcode = Opcode::from_u8(bth.opcode).ok_or(ParseError::UnknownOpcode)?;
    if bth.tver != TVER {
        return Err(ParseError::BadVersion);
    }
    let hdr_len = opcode.header_len();
    let pad = usize::from(bth.pad);
    // OVERFLOW: header_len is at most 44 and pad at most 3.
    let fixed = hdr_len + pad + icrc::LEN;
    let payload_len = buf.len().checked_sub(fixed).ok_or(ParseError::Truncated)?;
    if !opcode.has_payload() && (payload_len != 0 || pad != 0) {
        return Err(ParseError::UnexpectedPayload);
    }
    // OVERFLOW: payload_len + pad <= buf.len().
    if (payload_len + pad) % 4 != 0 {
        return Err(ParseError::Misaligned);
    }

    // The slices below cannot fail after the length check; they report
    // `Truncated` rather than panic should that ever change.
    let hdrs = buf.get(..hdr_len).ok_or(ParseError::Truncated)?;
    let rest = buf.get(hdr_len..).ok_or(ParseError::Truncated)?;
    let payload = rest.get(..payload_len).ok_or(ParseError::Truncated)?;
    let rest = rest.get(payload_len..).ok_or(ParseError::Truncated)?;
    let icrc_bytes: &[u8; icrc::LEN] = array_at(rest, pad).ok_or(ParseError::Truncated)?;
    Ok(Packet {
        opcode,
        bth,
        ext: decode_ext(hdrs, opcode.ext_headers()),
        payload,
        icrc: u32::from_le_bytes(*icrc_bytes),
    })
}

/// Why a packet could not be encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EncodeError {
    /// `bth.opcode` is not an opcode roxe implements.
    UnknownOpcode,
    /// The extended headers given are not exactly those of the opcode.
    HeaderMismatch,
    /// `bth.pad` does not match the payload length.
    PadMismatch,
    /// A payload for an opcode that carries none.
    UnexpectedPayload,
    /// The output buffer is too small.
    BufferTooSmall,
}

/// Copies `bytes` into `out` at `off`.
fn put<const N: usize>(out: &mut [u8], off: usize, bytes: [u8; N]) -> Result<(), EncodeError> {
    let end = off.checked_add(N).ok_or(EncodeError::BufferTooSmall)?;
    let dst: &mut [u8; N] = out
        .get_mut(off..end)
        .and_then(|s| s.try_into().ok())
        .ok_or(EncodeError::BufferTooSmall)?;
    *dst = bytes;
    Ok(())
}

/// Writes the extended header `h` if the packet has it.
fn put_ext<const N: usize>(
    out: &mut [u8],
    set: ExtHeaders,
    h: ExtHeaders,
    bytes: Option<[u8; N]>,
) -> Result<(), EncodeError> {
    match (set.offset_of(h), bytes) {
        (Some(off), Some(b)) => put(out, off, b),
        (None, None) => Ok(()),
        _ => Err(EncodeError::HeaderMismatch),
    }
}

/// Writes the BTH and the extended headers at the start of `out` and
/// returns their length, `Opcode::header_len`.
///
/// `ext` must hold exactly the headers the opcode carries. The BTH is
/// written as given, pad count and version included.
pub fn encode_headers(bth: &Bth, ext: &Ext, out: &mut [u8]) -> Result<usize, EncodeError> {
    let opcode = Opcode::from_u8(bth.opcode).ok_or(EncodeError::UnknownOpcode)?;
    let set = opcode.ext_headers();
    if ext.present() != set {
        return Err(EncodeError::HeaderMismatch);
    }
    let len = opcode.header_len();
    if out.len() < len {
        return Err(EncodeError::BufferTooSmall);
    }
    put(out, 0, bth.to_bytes())?;
    put_ext(out, set, ExtHeaders::DETH, ext.deth.map(|h| h.to_bytes()))?;
    put_ext(
        out,
        set,
        ExtHeaders::XRCETH,
        ext.xrceth.map(|h| h.to_bytes()),
    )?;
    put_ext(out, set, ExtHeaders::FETH, ext.feth.map(|h| h.to_bytes()))?;
    put_ext(out, set, ExtHeaders::RETH, ext.reth.map(|h| h.to_bytes()))?;
    put_ext(
        out,
        set,
        ExtHeaders::ATOMIC_ETH,
        ext.atomic_eth.map(|h| h.to_bytes()),
    )?;
    put_ext(out, set, ExtHeaders::AETH, ext.aeth.map(|h| h.to_bytes()))?;
    put_ext(
        out,
        set,
        ExtHeaders::ATOMIC_ACK_ETH,
        ext.atomic_ack_eth.map(|h| h.to_bytes()),
    )?;
    put_ext(out, set, ExtHeaders::IMMDT, ext.immdt.map(|h| h.to_bytes()))?;
    put_ext(out, set, ExtHeaders::IETH, ext.ieth.map(|h| h.to_bytes()))?;
    Ok(len)
}

/// The length of a whole packet (UDP payload) of `opcode` with
/// `payload_len` bytes of payload: headers, payload, pad and ICRC.
pub fn packet_len(opcode: Opcode, payload_len: usize) -> Option<usize> {
    opcode
        .header_len()
        .checked_add(payload_len)?
        .checked_add(usize::from(pad_len(payload_len)))?
        .checked_add(icrc::LEN)
}

/// Writes a whole packet into `out`: headers, `payload`, zeroed pad bytes
/// and a zeroed ICRC for the caller to fill in once it knows the IP and
/// UDP headers. Returns the packet length.
///
/// `bth.pad` must equal [`pad_len`] of the payload length.
pub fn encode_packet(
    bth: &Bth,
    ext: &Ext,
    payload: &[u8],
    out: &mut [u8],
) -> Result<usize, EncodeError> {
    let opcode = Opcode::from_u8(bth.opcode).ok_or(EncodeError::UnknownOpcode)?;
    if !opcode.has_payload() && !payload.is_empty() {
        return Err(EncodeError::UnexpectedPayload);
    }
    if bth.pad != pad_len(payload.len()) {
        return Err(EncodeError::PadMismatch);
    }
    let total = packet_len(opcode, payload.len()).ok_or(EncodeError::BufferTooSmall)?;
    let out = out.get_mut(..total).ok_or(EncodeError::BufferTooSmall)?;
    let hdr_len = encode_headers(bth, ext, out)?;
    let tail = out.get_mut(hdr_len..).ok_or(EncodeError::BufferTooSmall)?;
    if tail.len() < payload.len() {
        return Err(EncodeError::BufferTooSmall);
    }
    let (body, tail) = tail.split_at_mut(payload.len());
    body.copy_from_slice(payload);
    tail.fill(0);
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::vec;

    #[test]
    fn bth_layout_by_hand() {
        let bth = Bth {
            opcode: 0x0a,
            se: true,
            migreq: true,
            pad: 2,
            tver: 0,
            pkey: 0x8001,
            fecn: true,
            becn: false,
            dest_qpn: 0x12_3456,
            ack_req: true,
            psn: Psn::new(0xab_cdef),
        };
        let b = bth.to_bytes();
        assert_eq!(
            b,
            [0x0a, 0xe0, 0x80, 0x01, 0x80, 0x12, 0x34, 0x56, 0x80, 0xab, 0xcd, 0xef]
        );
        assert_eq!(Bth::from_bytes(&b), bth);
    }

    #[test]
    fn bth_reserved_bits_are_ignored_and_cleared() {
        // Reserved bits set in bytes 4 and 8; TVer 0xf.
        let b = [0x04, 0x3f, 0xff, 0xff, 0x3f, 0, 0, 1, 0x7f, 0, 0, 9];
        let bth = Bth::from_bytes(&b);
        assert!(!bth.fecn && !bth.becn && !bth.ack_req && !bth.se && !bth.migreq);
        assert_eq!(
            (bth.pad, bth.tver, bth.dest_qpn, bth.psn.get()),
            (3, 0xf, 1, 9)
        );
        assert_eq!(
            bth.to_bytes(),
            [0x04, 0x3f, 0xff, 0xff, 0, 0, 0, 1, 0, 0, 0, 9]
        );
    }

    #[test]
    fn ext_layouts_by_hand() {
        let reth = Reth {
            va: 0x0102_0304_0506_0708,
            rkey: 0x0a0b_0c0d,
            dma_len: 0x1000,
        };
        assert_eq!(
            reth.to_bytes(),
            [1, 2, 3, 4, 5, 6, 7, 8, 0xa, 0xb, 0xc, 0xd, 0, 0, 0x10, 0]
        );
        let aeth = Aeth {
            syndrome: 0x1f,
            msn: 0x00_0102,
        };
        assert_eq!(aeth.to_bytes(), [0x1f, 0, 1, 2]);
        let deth = Deth {
            qkey: 0x8001_0000,
            src_qpn: 0x00_0001,
        };
        assert_eq!(deth.to_bytes(), [0x80, 1, 0, 0, 0, 0, 0, 1]);
        let feth = Feth {
            selectivity: 1,
            placement_type: 2,
        };
        assert_eq!(feth.to_bytes(), [0, 0, 0, 0x12]);
        let a = AtomicEth {
            va: 8,
            rkey: 1,
            swap_add: 2,
            compare: 3,
        };
        let b = a.to_bytes();
        assert_eq!((b[7], b[11], b[19], b[27]), (8, 1, 2, 3));
        assert_eq!(
            AtomicAckEth { orig: 0x0102 }.to_bytes(),
            [0, 0, 0, 0, 0, 0, 1, 2]
        );
        assert_eq!(ImmDt(0xdead_beef).to_bytes(), [0xde, 0xad, 0xbe, 0xef]);
        assert_eq!(Ieth { rkey: 7 }.to_bytes(), [0, 0, 0, 7]);
        // Reserved DETH byte and FETH bits are ignored.
        assert_eq!(
            Deth::from_bytes(&[0, 0, 0, 1, 0xff, 0, 0, 2]),
            Deth {
                qkey: 1,
                src_qpn: 2
            }
        );
        assert_eq!(
            Feth::from_bytes(&[0xff, 0xff, 0xff, 0xff]),
            Feth {
                selectivity: 3,
                placement_type: 0xf
            }
        );
    }

    #[test]
    fn pad_lengths() {
        assert_eq!([0, 1, 2, 3, 4, 5, 4096].map(pad_len), [0, 3, 2, 1, 0, 3, 0]);
        assert_eq!(pad_len(usize::MAX), 1);
    }

    /// A RoCEv2 packet of `opcode` with every header it needs and
    /// `payload`.
    fn build(opcode: Opcode, payload: &[u8]) -> ([u8; 256], usize) {
        let mut bth = Bth::new(opcode, DEFAULT_PKEY, 0x11, Psn::new(0x22));
        bth.pad = pad_len(payload.len());
        let ext = restrict(&full_ext(), opcode.ext_headers());
        let mut out = [0u8; 256];
        let n = encode_packet(&bth, &ext, payload, &mut out).unwrap();
        (out, n)
    }

    fn full_ext() -> Ext {
        Ext {
            deth: Some(Deth {
                qkey: 0x8001_0000,
                src_qpn: 1,
            }),
            xrceth: Some(Xrceth { srqn: 0x12_3456 }),
            feth: Some(Feth {
                selectivity: 1,
                placement_type: 1,
            }),
            reth: Some(Reth {
                va: 0x1000,
                rkey: 0x55,
                dma_len: 5,
            }),
            atomic_eth: Some(AtomicEth {
                va: 0x2000,
                rkey: 0x66,
                swap_add: 1,
                compare: 2,
            }),
            aeth: Some(Aeth {
                syndrome: 0x1f,
                msn: 3,
            }),
            atomic_ack_eth: Some(AtomicAckEth { orig: 4 }),
            immdt: Some(ImmDt(5)),
            ieth: Some(Ieth { rkey: 6 }),
        }
    }

    fn restrict(e: &Ext, set: ExtHeaders) -> Ext {
        Ext {
            deth: e.deth.filter(|_| set.contains(ExtHeaders::DETH)),
            xrceth: e.xrceth.filter(|_| set.contains(ExtHeaders::XRCETH)),
            feth: e.feth.filter(|_| set.contains(ExtHeaders::FETH)),
            reth: e.reth.filter(|_| set.contains(ExtHeaders::RETH)),
            atomic_eth: e
                .atomic_eth
                .filter(|_| set.contains(ExtHeaders::ATOMIC_ETH)),
            aeth: e.aeth.filter(|_| set.contains(ExtHeaders::AETH)),
            atomic_ack_eth: e
                .atomic_ack_eth
                .filter(|_| set.contains(ExtHeaders::ATOMIC_ACK_ETH)),
            immdt: e.immdt.filter(|_| set.contains(ExtHeaders::IMMDT)),
            ieth: e.ieth.filter(|_| set.contains(ExtHeaders::IETH)),
        }
    }

    #[test]
    fn write_only_imm_by_hand() {
        let (b, n) = build(Opcode::RcRdmaWriteOnlyImm, b"hello");
        // 32 bytes of headers, 5 of payload, 3 of pad, 4 of ICRC.
        assert_eq!(n, 44);
        assert_eq!(b[0], 0x0b);
        assert_eq!(b[1], 0x30); // pad 3
        assert_eq!(&b[12..20], &0x1000u64.to_be_bytes()); // RETH va
        assert_eq!(&b[28..32], &[0, 0, 0, 5]); // ImmDt after RETH
        assert_eq!(&b[32..37], b"hello");
        assert_eq!(&b[37..44], &[0; 7]);
        let p = parse(&b[..n]).unwrap();
        assert_eq!(p.payload, b"hello");
        assert_eq!(p.ext.reth.unwrap().dma_len, 5);
        assert_eq!(p.ext.immdt, Some(ImmDt(5)));
        assert_eq!(p.ext.aeth, None);
    }

    /// An XRC request of `opcode` for SRQ `srqn`, with `payload`, encoded
    /// and parsed back.
    fn xrc_round_trip(opcode: Opcode, srqn: u32, payload: &[u8]) -> ([u8; 256], usize) {
        let mut bth = Bth::new(opcode, DEFAULT_PKEY, 0x11, Psn::new(0x22));
        bth.pad = pad_len(payload.len());
        let mut ext = restrict(&full_ext(), opcode.ext_headers());
        ext.xrceth = Some(Xrceth { srqn });
        let mut out = [0u8; 256];
        let n = encode_packet(&bth, &ext, payload, &mut out).unwrap();
        let p = parse(&out[..n]).unwrap();
        assert_eq!(
            (p.opcode, p.bth, p.ext, p.payload),
            (opcode, bth, ext, payload)
        );
        (out, n)
    }

    #[test]
    fn xrc_send_carries_its_srqn() {
        let (b, n) = xrc_round_trip(Opcode::XrcSendOnly, 0xab_cdef, b"hi");
        // 16 bytes of headers, 2 of payload, 2 of pad, 4 of ICRC.
        assert_eq!(n, 24);
        assert_eq!(b[0], 0xa4);
        assert_eq!(&b[12..16], &[0, 0xab, 0xcd, 0xef]);
        assert_eq!(&b[16..18], b"hi");
        assert_eq!(parse(&b[..n]).unwrap().ext.xrceth.unwrap().srqn, 0xab_cdef);
    }

    #[test]
    fn xrc_write_first_has_xrceth_then_reth() {
        let (b, n) = xrc_round_trip(Opcode::XrcRdmaWriteFirst, 0x00_0102, b"abcd");
        assert_eq!(n, 32 + 4 + 4);
        assert_eq!(b[0], 0xa6);
        assert_eq!(&b[12..16], &[0, 0, 1, 2]);
        assert_eq!(&b[16..24], &0x1000u64.to_be_bytes()); // RETH va
        assert_eq!(&b[28..32], &[0, 0, 0, 5]); // RETH DMA length
        assert_eq!(&b[32..36], b"abcd");
        let p = parse(&b[..n]).unwrap();
        assert_eq!(p.ext.xrceth, Some(Xrceth { srqn: 0x102 }));
        assert_eq!(p.ext.reth.unwrap().rkey, 0x55);
    }

    #[test]
    fn xrceth_reserved_byte_and_width() {
        // The reserved byte is ignored on receive and sent as zero.
        let (mut b, n) = xrc_round_trip(Opcode::XrcSendOnlyImm, 7, b"");
        b[12] = 0xff;
        let p = parse(&b[..n]).unwrap();
        assert_eq!(p.ext.xrceth, Some(Xrceth { srqn: 7 }));
        let mut out = [0u8; 64];
        let m = encode_packet(&p.bth, &p.ext, p.payload, &mut out).unwrap();
        assert_eq!(m, n);
        assert_eq!(&out[12..16], &[0, 0, 0, 7]);
        assert_eq!(
            Xrceth::from_bytes(&[0xa5, 1, 2, 3]),
            Xrceth { srqn: 0x01_0203 }
        );
        // The SRQ number is cut to 24 bits.
        assert_eq!(
            Xrceth { srqn: 0xffab_cdef }.to_bytes(),
            [0, 0xab, 0xcd, 0xef]
        );
        let (b, n) = xrc_round_trip(Opcode::XrcSendOnly, 0xab_cdef, b"");
        let mut bth = Bth::from_bytes(b[..12].try_into().unwrap());
        bth.pad = 0;
        let ext = Ext {
            xrceth: Some(Xrceth { srqn: 0xffab_cdef }),
            ..Ext::default()
        };
        let m = encode_packet(&bth, &ext, b"", &mut out).unwrap();
        assert_eq!(out[..m], b[..n]);
    }

    #[test]
    fn xrc_requests_need_the_xrceth_and_responses_refuse_it() {
        let mut out = [0u8; 64];
        let send = Bth::new(Opcode::XrcSendOnly, DEFAULT_PKEY, 1, Psn::ZERO);
        assert_eq!(
            encode_headers(&send, &Ext::default(), &mut out),
            Err(EncodeError::HeaderMismatch)
        );
        let xrc = Ext {
            xrceth: Some(Xrceth { srqn: 1 }),
            ..Ext::default()
        };
        assert_eq!(encode_headers(&send, &xrc, &mut out), Ok(16));
        // An RC SEND has no XRCETH.
        let rc = Bth::new(Opcode::RcSendOnly, DEFAULT_PKEY, 1, Psn::ZERO);
        assert_eq!(
            encode_headers(&rc, &xrc, &mut out),
            Err(EncodeError::HeaderMismatch)
        );
        let ack = Bth::new(Opcode::XrcAcknowledge, DEFAULT_PKEY, 1, Psn::ZERO);
        let aeth = Ext {
            aeth: Some(Aeth::default()),
            ..Ext::default()
        };
        assert_eq!(encode_headers(&ack, &aeth, &mut out), Ok(16));
        let both = Ext {
            xrceth: Some(Xrceth { srqn: 1 }),
            ..aeth
        };
        assert_eq!(
            encode_headers(&ack, &both, &mut out),
            Err(EncodeError::HeaderMismatch)
        );
    }

    #[test]
    fn every_opcode_round_trips() {
        for op in Opcode::ALL {
            let payload: &[u8] = if op.has_payload() { b"abcdefg" } else { b"" };
            let (b, n) = build(op, payload);
            let p = parse(&b[..n]).unwrap();
            assert_eq!(p.opcode, op);
            assert_eq!(p.payload, payload);
            assert_eq!(p.ext.present(), op.ext_headers(), "{op:?}");
            assert_eq!(p.ext, restrict(&full_ext(), op.ext_headers()));
        }
    }

    #[test]
    fn each_error_has_its_own_trigger() {
        let (good, n) = build(Opcode::RcSendOnly, b"abcd");
        let good = &good[..n];
        assert!(parse(good).is_ok());

        assert_eq!(parse(&good[..11]), Err(ParseError::TooShort));
        assert_eq!(parse(&[]), Err(ParseError::TooShort));

        let mut b = good.to_vec();
        b[0] = 0x40; // RD SEND First.
        assert_eq!(parse(&b), Err(ParseError::UnknownOpcode));
        b[0] = 0x81; // CNP.
        assert_eq!(parse(&b), Err(ParseError::UnknownOpcode));

        let mut b = good.to_vec();
        b[1] |= 1;
        assert_eq!(parse(&b), Err(ParseError::BadVersion));

        // BTH + ICRC, one byte short.
        assert_eq!(parse(&good[..15]), Err(ParseError::Truncated));
        // Pad 3 with only the ICRC after the BTH.
        let mut b = good[..16].to_vec();
        b[1] |= 0x30;
        assert_eq!(parse(&b), Err(ParseError::Truncated));

        let (ack, n) = build(Opcode::RcAcknowledge, b"");
        let mut b = ack[..n].to_vec();
        assert!(parse(&b).is_ok());
        b.extend_from_slice(&[0; 4]);
        assert_eq!(parse(&b), Err(ParseError::UnexpectedPayload));
        let mut b = ack[..n + 1].to_vec();
        b[1] |= 0x10; // Pad 1, with a byte to cover it.
        assert_eq!(parse(&b), Err(ParseError::UnexpectedPayload));

        // One extra byte on a SEND: payload 5 with pad 0.
        assert_eq!(parse(&[good, &[0]].concat()), Err(ParseError::Misaligned));
        // Pad 1 on an empty payload.
        let (e, n) = build(Opcode::RcSendOnly, b"");
        let mut b = e[..n + 1].to_vec();
        b[1] |= 0x10;
        assert_eq!(parse(&b), Err(ParseError::Misaligned));
    }

    #[test]
    fn error_indices_are_dense_and_named() {
        for (i, e) in ParseError::ALL.iter().enumerate() {
            assert_eq!(e.index(), i);
            assert!(!e.name().is_empty());
        }
    }

    #[test]
    fn icrc_is_read_little_endian() {
        let (mut b, n) = build(Opcode::RcSendOnly, b"");
        b[n - 4..n].copy_from_slice(&[0x82, 0xfd, 0x00, 0x2a]);
        assert_eq!(parse(&b[..n]).unwrap().icrc, 0x2a00_fd82);
    }

    #[test]
    fn encode_errors() {
        let bth = Bth::new(Opcode::RcRdmaWriteFirst, DEFAULT_PKEY, 1, Psn::ZERO);
        let mut out = [0u8; 64];
        assert_eq!(
            encode_headers(&bth, &Ext::default(), &mut out),
            Err(EncodeError::HeaderMismatch)
        );
        let ext = Ext {
            reth: Some(Reth::default()),
            ..Ext::default()
        };
        assert_eq!(encode_headers(&bth, &ext, &mut out), Ok(28));
        assert_eq!(
            encode_headers(&bth, &ext, &mut out[..27]),
            Err(EncodeError::BufferTooSmall)
        );
        let too_many = Ext {
            immdt: Some(ImmDt(1)),
            ..ext
        };
        assert_eq!(
            encode_headers(&bth, &too_many, &mut out),
            Err(EncodeError::HeaderMismatch)
        );
        assert_eq!(
            encode_packet(&bth, &ext, b"x", &mut out),
            Err(EncodeError::PadMismatch)
        );
        assert_eq!(
            encode_packet(&bth, &ext, b"xxxx", &mut out[..35]),
            Err(EncodeError::BufferTooSmall)
        );
        assert_eq!(encode_packet(&bth, &ext, b"xxxx", &mut out[..36]), Ok(36));
        let mut raw = bth;
        raw.opcode = 0x15;
        assert_eq!(
            encode_headers(&raw, &ext, &mut out),
            Err(EncodeError::UnknownOpcode)
        );
        let ack = Bth::new(Opcode::RcAcknowledge, DEFAULT_PKEY, 1, Psn::ZERO);
        let aeth = Ext {
            aeth: Some(Aeth::default()),
            ..Ext::default()
        };
        assert_eq!(
            encode_packet(&ack, &aeth, b"xxxx", &mut out),
            Err(EncodeError::UnexpectedPayload)
        );
    }

    // Strategies.

    fn psn() -> impl Strategy<Value = Psn> {
        (0u32..=0xff_ffff).prop_map(Psn::new)
    }

    prop_compose! {
        fn bth_for(op: Opcode)(
            se in any::<bool>(), migreq in any::<bool>(), pkey in any::<u16>(),
            fecn in any::<bool>(), becn in any::<bool>(), dest_qpn in 0u32..=QPN_MASK,
            ack_req in any::<bool>(), psn in psn(),
        ) -> Bth {
            let opcode = op.to_u8();
            let tver = TVER;
            Bth { opcode, se, migreq, pad: 0, tver, pkey, fecn, becn, dest_qpn, ack_req, psn }
        }
    }

    prop_compose! {
        fn any_ext()(deth in (any::<u32>(), 0u32..=QPN_MASK), srqn in 0u32..=0xff_ffff,
                     feth in (0u8..4, 0u8..16),
                     reth in any::<(u64, u32, u32)>(), atomic in any::<(u64, u32, u64, u64)>(),
                     aeth in (any::<u8>(), 0u32..=0xff_ffff), orig in any::<u64>(),
                     imm in any::<u32>(), inv in any::<u32>()) -> Ext {
            Ext {
                deth: Some(Deth { qkey: deth.0, src_qpn: deth.1 }),
                xrceth: Some(Xrceth { srqn }),
                feth: Some(Feth { selectivity: feth.0, placement_type: feth.1 }),
                reth: Some(Reth { va: reth.0, rkey: reth.1, dma_len: reth.2 }),
                atomic_eth: Some(AtomicEth {
                    va: atomic.0,
                    rkey: atomic.1,
                    swap_add: atomic.2,
                    compare: atomic.3,
                }),
                aeth: Some(Aeth { syndrome: aeth.0, msn: aeth.1 }),
                atomic_ack_eth: Some(AtomicAckEth { orig }),
                immdt: Some(ImmDt(imm)),
                ieth: Some(Ieth { rkey: inv }),
            }
        }
    }

    fn opcode() -> impl Strategy<Value = Opcode> {
        proptest::sample::select(&Opcode::ALL[..])
    }

    proptest! {
        #[test]
        fn bth_round_trips(b in any::<[u8; 12]>()) {
            // Every byte pattern decodes, and re-encodes to itself with the
            // reserved bits cleared.
            let mut want = b;
            want[4] &= 0xc0;
            want[8] &= 0x80;
            prop_assert_eq!(Bth::from_bytes(&b).to_bytes(), want);
        }

        #[test]
        fn headers_round_trip(e in any_ext()) {
            let rt = |h: Ext| Ext {
                deth: h.deth.map(|x| Deth::from_bytes(&x.to_bytes())),
                xrceth: h.xrceth.map(|x| Xrceth::from_bytes(&x.to_bytes())),
                feth: h.feth.map(|x| Feth::from_bytes(&x.to_bytes())),
                reth: h.reth.map(|x| Reth::from_bytes(&x.to_bytes())),
                atomic_eth: h.atomic_eth.map(|x| AtomicEth::from_bytes(&x.to_bytes())),
                aeth: h.aeth.map(|x| Aeth::from_bytes(&x.to_bytes())),
                atomic_ack_eth: h.atomic_ack_eth.map(|x| AtomicAckEth::from_bytes(&x.to_bytes())),
                immdt: h.immdt.map(|x| ImmDt::from_bytes(&x.to_bytes())),
                ieth: h.ieth.map(|x| Ieth::from_bytes(&x.to_bytes())),
            };
            let all = ExtHeaders::ALL.iter().fold(ExtHeaders::NONE, |a, &h| a.union(h));
            prop_assert_eq!(e.present(), all);
            prop_assert_eq!(rt(e), e);
        }

        #[test]
        fn packets_round_trip(
            (op, bth) in opcode().prop_flat_map(|op| (Just(op), bth_for(op))),
            ext in any_ext(),
            payload in proptest::collection::vec(any::<u8>(), 0..200),
        ) {
            let payload: &[u8] = if op.has_payload() { &payload } else { &[] };
            let mut bth = bth;
            bth.pad = pad_len(payload.len());
            let ext = restrict(&ext, op.ext_headers());
            let mut out = [0u8; 512];
            let n = encode_packet(&bth, &ext, payload, &mut out).unwrap();
            prop_assert_eq!(Some(n), packet_len(op, payload.len()));
            prop_assert_eq!(n % 4, 0);
            let p = parse(&out[..n]).unwrap();
            prop_assert_eq!(p.opcode, op);
            prop_assert_eq!(p.bth, bth);
            prop_assert_eq!(p.ext, ext);
            prop_assert_eq!(p.payload, payload);
            prop_assert_eq!(p.icrc, 0);
        }

        #[test]
        fn parser_never_panics(buf in proptest::collection::vec(any::<u8>(), 0..128)) {
            check_consistent(&buf);
        }

        #[test]
        fn parser_never_panics_on_known_opcodes(
            op in opcode(), flags in any::<u8>(),
            rest in proptest::collection::vec(any::<u8>(), 0..96),
        ) {
            let mut buf = vec![op.to_u8(), flags & 0x30];
            buf.extend_from_slice(&rest);
            check_consistent(&buf);
        }
    }

    /// Parses `buf` and, if that succeeds, checks that the pieces add up.
    fn check_consistent(buf: &[u8]) {
        if let Ok(p) = parse(buf) {
            let pad = usize::from(p.bth.pad);
            assert_eq!(p.opcode.to_u8(), p.bth.opcode);
            assert_eq!(
                p.opcode.header_len() + p.payload.len() + pad + icrc::LEN,
                buf.len()
            );
            assert_eq!((p.payload.len() + pad) % 4, 0);
            assert_eq!(p.ext.present(), p.opcode.ext_headers());
            let start = p.opcode.header_len();
            assert_eq!(&buf[start..start + p.payload.len()], p.payload);
            assert!(p.opcode.has_payload() || p.payload.is_empty());
        }
    }
}
