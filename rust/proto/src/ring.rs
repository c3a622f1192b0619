// SPDX-License-Identifier: GPL-2.0

//! Index arithmetic for the rings shared with user space (see
//! `Documentation/rings.md`). Indices are free-running `u32` counters; a
//! ring of `num_slots` (a power of two) is empty when they are equal and
//! full when they differ by `num_slots`.

/// The shape of a ring: its number of slots.
///
/// # Invariants
///
/// `num_slots` is a power of two and at least 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    num_slots: u32,
}

/// The other side's index is impossible: user space corrupted it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Corrupt;

impl Geometry {
    /// A ring with room for at least `wanted` entries, or `None` if that
    /// exceeds `max_slots` (itself rounded down to a power of two).
    pub fn for_entries(wanted: u32, max_slots: u32) -> Option<Geometry> {
        let num_slots = wanted.max(1).checked_next_power_of_two()?;
        if num_slots > max_slots {
            return None;
        }
        // INVARIANT: a power of two, at least 1.
        Some(Geometry { num_slots })
    }

    /// Number of slots.
    pub fn num_slots(self) -> u32 {
        self.num_slots
    }

    /// The slot that index `index` names.
    pub fn slot(self, index: u32) -> u32 {
        index & (self.num_slots - 1)
    }

    /// Entries between `consumer` and `producer`, or [`Corrupt`] if the
    /// distance exceeds the ring.
    pub fn used(self, producer: u32, consumer: u32) -> Result<u32, Corrupt> {
        let used = producer.wrapping_sub(consumer);
        if used > self.num_slots {
            Err(Corrupt)
        } else {
            Ok(used)
        }
    }

    /// Free slots the producer may fill.
    pub fn free(self, producer: u32, consumer: u32) -> Result<u32, Corrupt> {
        Ok(self.num_slots - self.used(producer, consumer)?)
    }

    /// Bytes of a mapping holding `header` bytes and every slot of
    /// `slot_size` bytes, rounded up to `page`, or `None` on overflow.
    pub fn mapping_size(self, header: usize, slot_size: usize, page: usize) -> Option<usize> {
        let slots = usize::try_from(self.num_slots)
            .ok()?
            .checked_mul(slot_size)?;
        let raw = slots.checked_add(header)?;
        let rounded = raw.checked_add(page - 1)? / page * page;
        Some(rounded)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_round_up_to_powers_of_two() {
        assert_eq!(
            Geometry::for_entries(0, 1024).map(Geometry::num_slots),
            Some(1)
        );
        assert_eq!(
            Geometry::for_entries(1, 1024).map(Geometry::num_slots),
            Some(1)
        );
        assert_eq!(
            Geometry::for_entries(3, 1024).map(Geometry::num_slots),
            Some(4)
        );
        assert_eq!(
            Geometry::for_entries(1024, 1024).map(Geometry::num_slots),
            Some(1024)
        );
        assert_eq!(Geometry::for_entries(1025, 1024), None);
        assert_eq!(Geometry::for_entries(u32::MAX, u32::MAX), None);
    }

    #[test]
    fn empty_full_and_wraparound() {
        let g = Geometry::for_entries(8, 1 << 20).unwrap();
        assert_eq!(g.used(5, 5), Ok(0));
        assert_eq!(g.free(5, 5), Ok(8));
        assert_eq!(g.used(13, 5), Ok(8));
        assert_eq!(g.free(13, 5), Ok(0));
        // Across the u32 wrap.
        assert_eq!(g.used(3, u32::MAX - 2), Ok(6));
        assert_eq!(g.slot(u32::MAX), 7);
        assert_eq!(g.slot(u32::MAX.wrapping_add(1)), 0);
    }

    #[test]
    fn corrupt_indices_are_detected() {
        let g = Geometry::for_entries(8, 1 << 20).unwrap();
        assert_eq!(g.used(14, 5), Err(Corrupt));
        // A consumer "ahead" of the producer is a huge distance.
        assert_eq!(g.used(5, 6), Err(Corrupt));
        for cons in 0..64u32 {
            for prod in 0..64u32 {
                let ok = prod.wrapping_sub(cons) <= 8;
                assert_eq!(g.used(prod, cons).is_ok(), ok);
            }
        }
    }

    #[test]
    fn slot_is_always_in_range() {
        for log in 0..20 {
            let g = Geometry::for_entries(1 << log, 1 << 20).unwrap();
            for i in [0u32, 1, 7, 1 << 19, u32::MAX, u32::MAX - 1] {
                assert!(g.slot(i) < g.num_slots());
            }
        }
    }

    #[test]
    fn mapping_sizes() {
        let g = Geometry::for_entries(64, 1 << 20).unwrap();
        assert_eq!(g.mapping_size(128, 64, 4096), Some(8192));
        let g = Geometry::for_entries(1, 1 << 20).unwrap();
        assert_eq!(g.mapping_size(128, 64, 4096), Some(4096));
        let g = Geometry::for_entries(1 << 31, u32::MAX).unwrap();
        assert_eq!(g.mapping_size(128, usize::MAX / 2, 4096), None);
    }
}
