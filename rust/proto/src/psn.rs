// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Packet sequence numbers: 24-bit serial arithmetic (IBTA vol 1, chapter 9).
//!
//! PSNs wrap at 2^24. Two PSNs are ordered by the shorter way round the
//! circle, so a comparison is meaningful only while the two are less than
//! half the space (2^23) apart; the transport keeps its windows far smaller
//! than that.

use core::cmp::Ordering;

/// Number of bits in a PSN.
pub const BITS: u32 = 24;
/// Mask of the bits a PSN occupies.
pub const MASK: u32 = (1 << BITS) - 1;
/// Half the PSN space: the largest distance over which ordering holds.
pub const HALF: u32 = 1 << (BITS - 1);

/// A 24-bit packet sequence number.
///
/// # Invariants
///
/// The value is at most [`MASK`]; every constructor masks its input.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Psn(u32);

impl Psn {
    /// PSN zero.
    pub const ZERO: Psn = Psn(0);
    /// The largest PSN, after which the sequence wraps to zero.
    pub const MAX: Psn = Psn(MASK);

    /// The PSN in the low 24 bits of `v`; the high bits are dropped, as
    /// they are when a PSN is read from its 32-bit word on the wire.
    pub const fn new(v: u32) -> Psn {
        // INVARIANT: masked to 24 bits.
        Psn(v & MASK)
    }

    /// The PSN as an integer below 2^24.
    pub const fn get(self) -> u32 {
        self.0
    }

    /// The PSN `n` steps after this one, modulo 2^24.
    pub const fn wrapping_add(self, n: u32) -> Psn {
        Psn::new(self.0.wrapping_add(n))
    }

    /// The PSN `n` steps before this one, modulo 2^24.
    pub const fn wrapping_sub(self, n: u32) -> Psn {
        Psn::new(self.0.wrapping_sub(n))
    }

    /// The PSN after this one.
    pub const fn next(self) -> Psn {
        self.wrapping_add(1)
    }

    /// How many steps forward from `self` reach `to`, in `0..2^24`.
    ///
    /// `a.distance(a.wrapping_add(n)) == n % 2^24` for every `n`.
    pub const fn distance(self, to: Psn) -> u32 {
        to.0.wrapping_sub(self.0) & MASK
    }

    /// `self - other` as a signed number in `-2^23..2^23`: positive when
    /// `self` is after `other` within half the space.
    pub const fn diff(self, other: Psn) -> i32 {
        // Shift the 24-bit difference into the top of an i32 and back, so
        // that bit 23 becomes the sign.
        // CAST: a u32 reinterpreted as i32 to sign-extend, by design.
        ((self.0.wrapping_sub(other.0) << 8) as i32) >> 8
    }

    /// Whether `self` lies in the half-open range `[start, end)` going
    /// forward from `start` and wrapping at 2^24. The range is empty when
    /// `start == end`.
    pub const fn in_range(self, start: Psn, end: Psn) -> bool {
        start.distance(self) < start.distance(end)
    }
}

/// Orders two PSNs within half the space (rxe's `psn_compare`).
///
/// `Less` means `a` comes before `b`. This is not a total order: it is not
/// transitive over the whole circle, which is why [`Psn`] does not
/// implement `Ord`. PSNs exactly 2^23 apart each compare `Less` than the
/// other.
pub const fn cmp(a: Psn, b: Psn) -> Ordering {
    let d = a.diff(b);
    if d < 0 {
        Ordering::Less
    } else if d > 0 {
        Ordering::Greater
    } else {
        Ordering::Equal
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn new_masks_to_24_bits() {
        assert_eq!(Psn::new(0x0100_0000).get(), 0);
        assert_eq!(Psn::new(0xffff_ffff), Psn::MAX);
        assert_eq!(Psn::MAX.get(), 0x00ff_ffff);
    }

    #[test]
    fn add_wraps_at_2_pow_24() {
        assert_eq!(Psn::MAX.next(), Psn::ZERO);
        assert_eq!(Psn::MAX.wrapping_add(2), Psn::new(1));
        assert_eq!(Psn::ZERO.wrapping_sub(1), Psn::MAX);
        assert_eq!(Psn::new(5).wrapping_add(1 << 24), Psn::new(5));
    }

    #[test]
    fn distance_goes_forward_across_the_wrap() {
        assert_eq!(Psn::new(0xff_fffe).distance(Psn::new(1)), 3);
        assert_eq!(Psn::new(1).distance(Psn::new(0xff_fffe)), 0xff_fffd);
        assert_eq!(Psn::new(7).distance(Psn::new(7)), 0);
    }

    #[test]
    fn cmp_across_the_wrap() {
        assert_eq!(cmp(Psn::MAX, Psn::ZERO), Ordering::Less);
        assert_eq!(cmp(Psn::ZERO, Psn::MAX), Ordering::Greater);
        assert_eq!(cmp(Psn::new(10), Psn::new(10)), Ordering::Equal);
        assert_eq!(cmp(Psn::new(0), Psn::new(HALF - 1)), Ordering::Less);
        // Exactly half apart: each looks older than the other.
        assert_eq!(cmp(Psn::new(0), Psn::new(HALF)), Ordering::Less);
        assert_eq!(cmp(Psn::new(HALF), Psn::new(0)), Ordering::Less);
        assert_eq!(Psn::new(0).diff(Psn::new(HALF)), -(HALF as i32));
    }

    #[test]
    fn in_range_with_wrap() {
        let start = Psn::new(0xff_fffe);
        let end = Psn::new(2);
        for (v, inside) in [
            (0xff_fffd, false),
            (0xff_fffe, true),
            (0xff_ffff, true),
            (0, true),
            (1, true),
            (2, false),
        ] {
            assert_eq!(Psn::new(v).in_range(start, end), inside, "{v:#x}");
        }
        // Empty range.
        assert!(!Psn::new(3).in_range(Psn::new(3), Psn::new(3)));
    }

    proptest! {
        #[test]
        fn add_then_distance(a in 0u32..=MASK, n in any::<u32>()) {
            let a = Psn::new(a);
            let b = a.wrapping_add(n);
            prop_assert_eq!(a.distance(b), n & MASK);
            prop_assert_eq!(b.wrapping_sub(n), a);
            prop_assert!(b.get() <= MASK);
        }

        #[test]
        fn diff_is_antisymmetric_inside_half(a in 0u32..=MASK, n in 0u32..HALF) {
            let a = Psn::new(a);
            let b = a.wrapping_add(n);
            prop_assert_eq!(b.diff(a), n as i32);
            prop_assert_eq!(a.diff(b), -(n as i32));
            let want = if n == 0 { Ordering::Equal } else { Ordering::Less };
            prop_assert_eq!(cmp(a, b), want);
            prop_assert_eq!(cmp(b, a), want.reverse());
        }

        #[test]
        fn in_range_matches_distance(s in 0u32..=MASK, len in 0u32..=MASK, off in 0u32..=MASK) {
            let start = Psn::new(s);
            let end = start.wrapping_add(len);
            let p = start.wrapping_add(off);
            prop_assert_eq!(p.in_range(start, end), off < len);
        }

        #[test]
        fn diff_range(a in any::<u32>(), b in any::<u32>()) {
            let d = Psn::new(a).diff(Psn::new(b));
            prop_assert!((-(HALF as i32)..HALF as i32).contains(&d));
            prop_assert_eq!(Psn::new(b).wrapping_add(d as u32), Psn::new(a));
        }
    }
}
