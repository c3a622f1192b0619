// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Rules the responder applies to request packets before it touches
//! memory: how much payload each packet of a message may carry, where the
//! bytes of an RDMA WRITE packet land, and which RDMA READ requests it has
//! served and may therefore answer again when a duplicate arrives.
//!
//! Every value here comes off the wire, so every sum is checked.

use super::opcode::Position;
use super::psn::Psn;
use super::recent::Recent;
use super::seg;

/// The longest message a RETH may describe (IBTA C9-94: the DMA length is
/// at most 2^31).
pub const MAX_DMA_LEN: u32 = 1 << 31;

/// Whether a SEND or RDMA WRITE request packet at `pos` may carry `len`
/// payload bytes at path MTU `mtu`.
///
/// A message is cut into full packets: First and Middle packets carry
/// exactly one MTU. The packet that ends a message of several carries the
/// rest, at least one byte and at most one MTU (an empty rest would have
/// ended the message one packet earlier). A message of one packet carries
/// at most one MTU, and may be empty.
pub fn payload_len_ok(pos: Position, len: usize, mtu: u32) -> bool {
    // CAST: a u32 fits a usize on every target roxe builds for.
    let mtu = mtu as usize;
    match pos {
        Position::First | Position::Middle => len == mtu,
        Position::Last => len != 0 && len <= mtu,
        Position::Only => len <= mtu,
    }
}

/// Places `n` payload bytes of an RDMA WRITE packet at `pos`: the message
/// targets `total` bytes from `va`, and `off` of them have arrived.
///
/// Returns the address the bytes go to and the new offset, or `None` if the
/// packet does not fit the message: it runs past `total`, it ends the
/// message short of `total`, or it leaves nothing for the packet that must
/// still end the message.
pub fn write_place(va: u64, off: u32, n: u32, total: u32, pos: Position) -> Option<(u64, u32)> {
    let end = off.checked_add(n)?;
    let fits = if pos.ends_message() {
        end == total
    } else {
        end < total
    };
    if !fits {
        return None;
    }
    Some((va.checked_add(u64::from(off))?, end))
}

/// An RDMA READ request as the responder saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadRequest {
    /// The address the read starts at.
    pub va: u64,
    /// The PSN of the request, which is that of its first response.
    pub psn: Psn,
    /// The remote key it names.
    pub rkey: u32,
    /// The DMA length.
    pub len: u32,
}

impl ReadRequest {
    const EMPTY: ReadRequest = ReadRequest {
        va: 0,
        psn: Psn::ZERO,
        rkey: 0,
        len: 0,
    };

    /// Whether `dup`, a request whose PSN lies behind the expected one,
    /// asks again for this request or for the tail of it, at path MTU
    /// `mtu`: its PSN is that of one of this request's responses, it names
    /// the same key, it starts where that response's bytes start, and it
    /// ends within this request. This is how a requester asks again after
    /// losing responses.
    pub fn covers(&self, dup: &ReadRequest, mtu: u32) -> bool {
        let Some(n) = seg::packet_count(self.len, mtu) else {
            return false;
        };
        if !dup.psn.in_range(self.psn, self.psn.wrapping_add(n)) {
            return false;
        }
        if self.len == 0 {
            // An empty read names no memory; its key means nothing.
            return dup.len == 0;
        }
        if dup.rkey != self.rkey {
            return false;
        }
        let skip = u64::from(self.psn.distance(dup.psn)) * u64::from(mtu);
        let Some(end) = skip.checked_add(u64::from(dup.len)) else {
            return false;
        };
        self.va.checked_add(skip) == Some(dup.va) && end <= u64::from(self.len)
    }
}

/// The RDMA READ requests a responder has served, the newest `limit` of
/// them (its `max_dest_rd_atomic`, the responder resources it granted),
/// at most `N`.
///
/// A requester keeps at most that many reads outstanding, so when it asks
/// again after a loss, the request it repeats is among them. A duplicate
/// that matches none of them is not answered.
pub struct ReadResources<const N: usize>(Recent<ReadRequest, N>);

impl<const N: usize> Default for ReadResources<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> ReadResources<N> {
    /// No requests held.
    pub const fn new() -> Self {
        ReadResources(Recent::new(ReadRequest::EMPTY))
    }

    /// Forgets every request.
    pub fn clear(&mut self) {
        self.0.clear();
    }

    /// How many requests are held.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether none is held.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Remembers `req`, forgetting the oldest so that no more than `limit`
    /// (at least one, at most `N`) are held.
    pub fn remember(&mut self, req: ReadRequest, limit: usize) {
        self.0.remember(req, limit);
    }

    /// The held request that `dup` asks again for ([`ReadRequest::covers`]),
    /// the newest if several do.
    pub fn find(&self, dup: &ReadRequest, mtu: u32) -> Option<ReadRequest> {
        self.0.find(|r| r.covers(dup, mtu))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use Position::*;

    #[test]
    fn payload_lengths_follow_ibta() {
        for mtu in [256u32, 1024, 4096] {
            let m = mtu as usize;
            for pos in [First, Middle] {
                assert!(payload_len_ok(pos, m, mtu));
                assert!(!payload_len_ok(pos, m - 4, mtu), "{pos:?} short");
                assert!(!payload_len_ok(pos, 0, mtu), "{pos:?} empty");
                assert!(!payload_len_ok(pos, m + 4, mtu), "{pos:?} long");
            }
            assert!(!payload_len_ok(Last, 0, mtu), "an empty Last");
            assert!(payload_len_ok(Last, 1, mtu));
            assert!(payload_len_ok(Last, m, mtu));
            assert!(!payload_len_ok(Last, m + 1, mtu));
            assert!(payload_len_ok(Only, 0, mtu), "an empty message");
            assert!(payload_len_ok(Only, m, mtu));
            assert!(!payload_len_ok(Only, m + 4, mtu));
        }
    }

    #[test]
    fn writes_land_inside_their_message() {
        // The finding: an MR that ends at 2^64, a message that fills it up
        // to there, then an empty packet past its end.
        let va = u64::MAX - 2047;
        assert_eq!(write_place(va, 0, 1024, 2048, First), Some((va, 1024)));
        assert_eq!(
            write_place(va, 1024, 1024, 2048, Last),
            Some((va + 1024, 2048))
        );
        assert_eq!(
            write_place(va, 1024, 1024, 2048, Middle),
            None,
            "a Middle that ends the message"
        );
        assert_eq!(
            write_place(va, 2048, 0, 2048, Last),
            None,
            "an empty packet past the end"
        );
        assert_eq!(write_place(va, 2048, 0, 2048, Middle), None);
        assert_eq!(
            write_place(va, 1024, 512, 2048, Last),
            None,
            "a Last short of the DMA length"
        );
        assert_eq!(
            write_place(va, 1024, 2048, 2048, Last),
            None,
            "past the DMA length"
        );
        assert_eq!(
            write_place(va, u32::MAX, 1, u32::MAX, Last),
            None,
            "offset overflow"
        );
        // A whole MR up to the last byte of the address space.
        assert_eq!(
            write_place(u64::MAX - 255, 0, 256, 256, Only),
            Some((u64::MAX - 255, 256))
        );
        assert_eq!(
            write_place(7, 0, 0, 0, Only),
            Some((7, 0)),
            "an empty write"
        );
        assert_eq!(write_place(u64::MAX, 4096, 0, 8192, Middle), None);
    }

    proptest! {
        #[test]
        fn a_placed_write_never_wraps(va: u64, off: u32, n in 0u32..8192, total: u32, p in 0u8..4) {
            let pos = [First, Middle, Last, Only][p as usize];
            if let Some((at, end)) = write_place(va, off, n, total, pos) {
                prop_assert_eq!(u64::from(end), u64::from(off) + u64::from(n));
                prop_assert!(end <= total);
                prop_assert_eq!(u128::from(at), u128::from(va) + u128::from(off));
            }
        }
    }

    fn req(psn: u32, va: u64, rkey: u32, len: u32) -> ReadRequest {
        ReadRequest {
            va,
            psn: Psn::new(psn),
            rkey,
            len,
        }
    }

    #[test]
    fn a_duplicate_must_match_what_was_served() {
        let served = req(100, 0x1000, 7, 3000);
        // Three responses at MTU 1024: PSNs 100, 101, 102.
        assert!(served.covers(&served, 1024), "the same request");
        assert!(
            served.covers(&req(101, 0x1400, 7, 1976), 1024),
            "the rest from the second response"
        );
        assert!(
            served.covers(&req(102, 0x1800, 7, 952), 1024),
            "the last response"
        );
        assert!(
            served.covers(&req(101, 0x1400, 7, 100), 1024),
            "less than the rest"
        );
        assert!(
            !served.covers(&req(103, 0x1c00, 7, 1), 1024),
            "past its PSNs"
        );
        assert!(
            !served.covers(&req(99, 0xc00, 7, 3000), 1024),
            "before its PSNs"
        );
        assert!(
            !served.covers(&req(100, 0x1000, 8, 3000), 1024),
            "another key"
        );
        assert!(!served.covers(&req(100, 0x1000, 7, 3001), 1024), "longer");
        assert!(
            !served.covers(&req(100, 0x1008, 7, 8), 1024),
            "another address"
        );
        assert!(
            !served.covers(&req(101, 0x1000, 7, 8), 1024),
            "an address that is not its response's"
        );
        assert!(!served.covers(&req(100, 0x0, 7, 3000), 1024));
        // Near the top of the address space, nothing wraps.
        let top = req(5, u64::MAX - 2047, 7, 2048);
        assert!(top.covers(&req(6, u64::MAX - 1023, 7, 1024), 1024));
        assert!(!top.covers(&req(6, u64::MAX - 1023, 7, u32::MAX), 1024));
        // PSNs wrap at 2^24.
        let wrap = req(0xff_ffff, 0, 7, 2048);
        assert!(wrap.covers(&req(0, 1024, 7, 1024), 1024));
        // An empty read covers only an empty read at its PSN.
        let empty = req(50, 0, 0, 0);
        assert!(empty.covers(&req(50, 0x1234, 99, 0), 1024));
        assert!(!empty.covers(&req(50, 0, 0, 1), 1024));
        assert!(!empty.covers(&req(51, 0, 0, 0), 1024));
    }

    #[test]
    fn resources_hold_the_newest_limit() {
        let mut r = ReadResources::<4>::new();
        let probe = |r: &ReadResources<4>, psn: u32| {
            r.find(&req(psn, u64::from(psn) << 12, 1, 8), 1024)
                .is_some()
        };
        for psn in 0..3 {
            r.remember(req(psn, u64::from(psn) << 12, 1, 8), 2);
        }
        assert_eq!(r.len(), 2);
        assert!(!probe(&r, 0), "the oldest is forgotten");
        assert!(probe(&r, 1) && probe(&r, 2));
        // A larger limit holds more, up to N.
        for psn in 3..10 {
            r.remember(req(psn, u64::from(psn) << 12, 1, 8), 128);
        }
        assert_eq!(r.len(), 4);
        assert!((6..10).all(|p| probe(&r, p)));
        assert!(!probe(&r, 5));
        // A smaller limit (max_dest_rd_atomic lowered) trims at the next.
        r.remember(req(10, 10 << 12, 1, 8), 1);
        assert_eq!(r.len(), 1);
        assert!(probe(&r, 10) && !probe(&r, 9));
        // Zero is taken as one: a read served can always be asked again.
        r.remember(req(11, 11 << 12, 1, 8), 0);
        assert!(probe(&r, 11));
        r.clear();
        assert!(r.is_empty() && !probe(&r, 11));
    }

    #[test]
    fn the_newest_match_wins() {
        let mut r = ReadResources::<4>::new();
        r.remember(req(10, 0x1000, 1, 8), 4);
        r.remember(req(10, 0x2000, 1, 8), 4);
        assert_eq!(
            r.find(&req(10, 0x2000, 1, 8), 1024),
            Some(req(10, 0x2000, 1, 8))
        );
        assert_eq!(
            r.find(&req(10, 0x1000, 1, 8), 1024),
            Some(req(10, 0x1000, 1, 8))
        );
    }
}
