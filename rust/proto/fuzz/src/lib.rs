// SPDX-License-Identifier: GPL-2.0

//! A mutation fuzzer for the roxe-proto packet parser and ICRC.
//!
//! Each iteration builds a valid RoCEv2 packet of a random opcode, with a
//! correct ICRC over a random IPv4 or IPv6 header, checks that it parses
//! back to what was encoded, then mutates it (bit flips, byte writes,
//! truncation, extension, insertion, deletion, random opcode, pad and
//! version bits, splices) and checks that the parser returns `Ok` or
//! `Err` without panicking, and that every `Ok` is internally consistent:
//! the pieces add up to the input length, the payload is the right slice
//! of the input, and re-encoding the parsed packet gives a packet that
//! parses to the same thing. Single-bit flips must also break the ICRC
//! unless they hit a byte the ICRC masks.
//!
//! It is deterministic for a given seed, needs no external crates and
//! runs on stable Rust: `fuzz-parse` (src/main.rs) drives it.

use std::panic::{self, AssertUnwindSafe};

use roxe_proto::headers::{
    self, Aeth, AtomicAckEth, AtomicEth, Bth, Deth, Ext, Feth, Ieth, ImmDt, ParseError, Reth,
    Xrceth,
};
use roxe_proto::icrc::{self, Icrc, IpHeader};
use roxe_proto::opcode::{ExtHeaders, Opcode};
use roxe_proto::psn::Psn;
use roxe_proto::udp;

/// splitmix64: small, fast and good enough to drive mutations.
pub struct Rng(u64);

impl Rng {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n`; `n` must not be zero.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    fn u32(&mut self) -> u32 {
        self.next_u64() as u32
    }

    fn u8(&mut self) -> u8 {
        self.next_u64() as u8
    }

    fn bool(&mut self) -> bool {
        self.next_u64() & 1 == 1
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.u8()).collect()
    }
}

/// What a run saw.
#[derive(Debug, Default, Clone)]
pub struct Stats {
    /// Iterations run.
    pub iterations: u64,
    /// Mutated packets the parser accepted.
    pub ok: u64,
    /// Mutated packets the parser rejected, per [`ParseError::index`].
    pub errors: [u64; ParseError::ALL.len()],
    /// Single-bit flips whose ICRC failure was checked.
    pub icrc_flips: u64,
}

/// A failure: the iteration, the input and what went wrong.
#[derive(Debug)]
pub struct Failure {
    /// The iteration that failed (replay with the same seed).
    pub iteration: u64,
    /// The bytes handed to the parser.
    pub input: Vec<u8>,
    /// The panic message.
    pub message: String,
}

/// A valid packet with its network headers.
struct Valid {
    ip: Vec<u8>,
    v6: bool,
    /// The UDP datagram: UDP header, BTH onward, ICRC.
    datagram: Vec<u8>,
    bth: Bth,
    ext: Ext,
    payload: Vec<u8>,
}

impl Valid {
    fn ip(&self) -> IpHeader<'_> {
        if self.v6 {
            IpHeader::V6(&self.ip)
        } else {
            IpHeader::V4(&self.ip)
        }
    }
}

fn random_ext(rng: &mut Rng, set: ExtHeaders) -> Ext {
    let has = |h| set.contains(h);
    Ext {
        deth: has(ExtHeaders::DETH).then(|| Deth {
            qkey: rng.u32(),
            src_qpn: rng.u32() & 0xff_ffff,
        }),
        xrceth: has(ExtHeaders::XRCETH).then(|| Xrceth {
            srqn: rng.u32() & 0xff_ffff,
        }),
        feth: has(ExtHeaders::FETH).then(|| Feth {
            selectivity: rng.u8() & 3,
            placement_type: rng.u8() & 0xf,
        }),
        reth: has(ExtHeaders::RETH).then(|| Reth {
            va: rng.next_u64(),
            rkey: rng.u32(),
            dma_len: rng.u32(),
        }),
        atomic_eth: has(ExtHeaders::ATOMIC_ETH).then(|| AtomicEth {
            va: rng.next_u64(),
            rkey: rng.u32(),
            swap_add: rng.next_u64(),
            compare: rng.next_u64(),
        }),
        aeth: has(ExtHeaders::AETH).then(|| Aeth {
            syndrome: rng.u8(),
            msn: rng.u32() & 0xff_ffff,
        }),
        atomic_ack_eth: has(ExtHeaders::ATOMIC_ACK_ETH).then(|| AtomicAckEth {
            orig: rng.next_u64(),
        }),
        immdt: has(ExtHeaders::IMMDT).then(|| ImmDt(rng.u32())),
        ieth: has(ExtHeaders::IETH).then(|| Ieth { rkey: rng.u32() }),
    }
}

fn valid_packet(rng: &mut Rng) -> Valid {
    let op = Opcode::ALL[rng.below(Opcode::ALL.len())];
    let payload_len = if !op.has_payload() {
        0
    } else {
        match rng.below(10) {
            0..=5 => rng.below(9),
            6..=8 => rng.below(300),
            _ => rng.below(4097),
        }
    };
    let payload = rng.bytes(payload_len);
    let bth = Bth {
        opcode: op.to_u8(),
        se: rng.bool(),
        migreq: rng.bool(),
        pad: headers::pad_len(payload_len),
        tver: headers::TVER,
        pkey: rng.u32() as u16,
        fecn: rng.bool(),
        becn: rng.bool(),
        dest_qpn: rng.u32() & headers::QPN_MASK,
        ack_req: rng.bool(),
        psn: Psn::new(rng.u32()),
    };
    let ext = random_ext(rng, op.ext_headers());
    let len = headers::packet_len(op, payload_len).expect("small lengths do not overflow");
    let mut datagram = vec![0u8; 8 + len];
    let n = headers::encode_packet(&bth, &ext, &payload, &mut datagram[8..])
        .expect("a valid packet encodes");
    assert_eq!(n, len);

    let sport = udp::source_port(rng.u32() & 0xff_ffff, bth.dest_qpn);
    let udp_len = (8 + len) as u16;
    datagram[0..2].copy_from_slice(&sport.to_be_bytes());
    datagram[2..4].copy_from_slice(&udp::ROCE_V2_PORT.to_be_bytes());
    datagram[4..6].copy_from_slice(&udp_len.to_be_bytes());
    datagram[6..8].copy_from_slice(&(rng.u32() as u16).to_be_bytes());

    let v6 = rng.bool();
    let mut ip = rng.bytes(if v6 { 40 } else { 20 });
    ip[0] = if v6 { 0x60 | (ip[0] & 0x0f) } else { 0x45 };
    let mut valid = Valid {
        ip,
        v6,
        datagram,
        bth,
        ext,
        payload,
    };
    let ip = valid.ip.clone();
    let ip = if v6 {
        IpHeader::V6(&ip)
    } else {
        IpHeader::V4(&ip)
    };
    icrc::fill(ip, &mut valid.datagram).expect("long enough for an ICRC");
    valid
}

/// Checks that a valid packet parses back to what was encoded, and that
/// its ICRC holds however the datagram is split.
fn check_valid(rng: &mut Rng, v: &Valid) {
    let buf = &v.datagram[8..];
    let p = headers::parse(buf).unwrap_or_else(|e| panic!("valid packet rejected: {e:?}"));
    assert_eq!(p.bth, v.bth);
    assert_eq!(p.ext, v.ext);
    assert_eq!(p.payload, &v.payload[..]);
    assert!(icrc::verify(v.ip(), &v.datagram));

    let covered = &v.datagram[..v.datagram.len() - icrc::LEN];
    let mut c = Icrc::new(v.ip());
    let mut at = 0;
    while at < covered.len() {
        let step = 1 + rng.below(covered.len() - at).min(rng.below(64));
        c.update(&covered[at..at + step]);
        at += step;
    }
    assert_eq!(
        c.finish(),
        p.icrc,
        "incremental ICRC differs from the one on the wire"
    );
}

/// Parses `buf` and checks an `Ok` result for internal consistency.
fn check_parse(buf: &[u8]) -> Result<(), ParseError> {
    let p = headers::parse(buf)?;
    let hdr_len = p.opcode.header_len();
    let pad = usize::from(p.bth.pad);
    assert_eq!(p.opcode.to_u8(), p.bth.opcode);
    assert_eq!(p.bth.tver, headers::TVER);
    assert!(pad <= 3);
    assert_eq!(
        hdr_len + p.payload.len() + pad + icrc::LEN,
        buf.len(),
        "lengths do not add up"
    );
    assert_eq!((p.payload.len() + pad) % 4, 0);
    assert!(p.opcode.has_payload() || (p.payload.is_empty() && pad == 0));
    assert_eq!(p.ext.present(), p.opcode.ext_headers());
    // The payload is the slice of `buf` right after the headers.
    let start = p.payload.as_ptr() as usize - buf.as_ptr() as usize;
    assert_eq!(start, hdr_len, "payload does not start after the headers");
    assert_eq!(&buf[start..start + p.payload.len()], p.payload);
    let icrc_at = buf.len() - icrc::LEN;
    assert_eq!(p.icrc.to_le_bytes(), buf[icrc_at..]);

    // Re-encoding gives a packet of the same length that parses the same.
    let mut out = vec![0u8; buf.len()];
    let n = headers::encode_packet(&p.bth, &p.ext, p.payload, &mut out)
        .expect("a parsed packet re-encodes");
    assert_eq!(n, buf.len());
    let q = headers::parse(&out).expect("a re-encoded packet parses");
    assert_eq!(
        (q.opcode, q.bth, q.ext, q.payload),
        (p.opcode, p.bth, p.ext, p.payload)
    );
    // Outside reserved bits, pad bytes and the ICRC, the bytes are equal.
    assert_eq!(out[..4], buf[..4]);
    assert_eq!(out[5..8], buf[5..8]);
    assert_eq!(out[9..12], buf[9..12]);
    assert_eq!(out[hdr_len..hdr_len + p.payload.len()], *p.payload);
    Ok(())
}

const MUTATIONS: usize = 12;

/// Applies one random mutation to `buf`.
fn mutate(rng: &mut Rng, buf: &mut Vec<u8>, other: &[u8]) {
    match rng.below(MUTATIONS) {
        0 if !buf.is_empty() => {
            let i = rng.below(buf.len());
            buf[i] ^= 1 << rng.below(8);
        }
        1 if !buf.is_empty() => {
            let i = rng.below(buf.len());
            buf[i] = rng.u8();
        }
        2 => {
            let n = rng.below(buf.len() + 1);
            buf.truncate(n);
        }
        3 => {
            let n = 1 + rng.below(16);
            buf.extend(rng.bytes(n));
        }
        4 if !buf.is_empty() => buf[0] = rng.u8(),
        5 if !buf.is_empty() => buf[0] = Opcode::ALL[rng.below(Opcode::ALL.len())].to_u8(),
        6 if buf.len() > 1 => buf[1] = (buf[1] & !0x30) | (rng.u8() & 0x30),
        7 if buf.len() > 1 => buf[1] = (buf[1] & !0x0f) | (rng.u8() & 0x0f),
        8 => {
            let i = rng.below(buf.len() + 1);
            buf.insert(i, rng.u8());
        }
        9 if !buf.is_empty() => {
            let i = rng.below(buf.len());
            buf.remove(i);
        }
        10 => {
            // Round the length to a multiple of four, give or take one.
            let n = (buf.len() & !3) + [0, 1, 3][rng.below(3)];
            buf.resize(n, 0);
        }
        11 if !other.is_empty() => {
            // Splice: this packet's head and another's tail.
            let at = rng.below(buf.len() + 1);
            let from = rng.below(other.len());
            buf.truncate(at);
            buf.extend_from_slice(&other[from..]);
        }
        _ => {}
    }
}

/// Runs `iterations` iterations from `seed`.
pub fn run(seed: u64, iterations: u64) -> Result<Stats, Failure> {
    let mut rng = Rng::new(seed);
    let mut stats = Stats::default();
    let mut previous = Vec::new();
    let mut input = Vec::new();
    for iteration in 0..iterations {
        let outcome = panic::catch_unwind(AssertUnwindSafe(|| {
            let v = valid_packet(&mut rng);
            input = v.datagram[8..].to_vec();
            check_valid(&mut rng, &v);

            // One bit flip anywhere in the UDP datagram must break the ICRC
            // unless it lands on a masked byte (UDP checksum, BTH byte 4).
            if rng.below(4) == 0 {
                let mut d = v.datagram.clone();
                let i = rng.below(d.len());
                d[i] ^= 1 << rng.below(8);
                let masked = matches!(i, 6 | 7 | 12);
                assert_eq!(
                    icrc::verify(v.ip(), &d),
                    masked,
                    "bit flip at datagram byte {i}"
                );
                stats.icrc_flips += 1;
            }

            let mut buf = v.datagram[8..].to_vec();
            for _ in 0..1 + rng.below(4) {
                mutate(&mut rng, &mut buf, &previous);
            }
            input.clone_from(&buf);
            match check_parse(&buf) {
                Ok(()) => stats.ok += 1,
                Err(e) => stats.errors[e.index()] += 1,
            }
            previous = buf;
        }));
        stats.iterations = iteration + 1;
        if let Err(e) = outcome {
            let message = e
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            return Err(Failure {
                iteration,
                input,
                message,
            });
        }
    }
    Ok(stats)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_run_reaches_every_outcome() {
        let stats = run(1, 20_000).unwrap_or_else(|f| panic!("{f:?}"));
        assert!(stats.ok > 0);
        for e in ParseError::ALL {
            assert!(stats.errors[e.index()] > 0, "{e:?} never produced");
        }
        assert!(stats.icrc_flips > 0);
    }

    #[test]
    fn runs_are_deterministic() {
        let a = run(7, 2_000).unwrap();
        let b = run(7, 2_000).unwrap();
        assert_eq!((a.ok, a.errors), (b.ok, b.errors));
    }
}
