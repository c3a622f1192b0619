// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Index arithmetic for the rings shared with user space (see
//! `Documentation/rings.md`). Indices are free-running `u32` counters; a
//! ring of `num_slots` (a power of two) is empty when they are equal and
//! full when they differ by `num_slots`.
//!
//! Both sides use this one definition: the kernel module compiles this file
//! in, and the user-space provider (`userspace-provider/`) and the hostile
//! test program (`tests/hostile/`) depend on this crate for it.

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

    /// The ring the other side described as having `num_slots` slots, or
    /// `None` if that is not a power of two.
    pub fn from_slots(num_slots: u32) -> Option<Geometry> {
        if !num_slots.is_power_of_two() {
            return None;
        }
        // INVARIANT: a power of two, so at least 1.
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

    /// Bytes from the start of the ring to the end of its last slot:
    /// `header` bytes and every slot of `slot_size` bytes, or `None` on
    /// overflow. Every slot offset [`Geometry::slot_offset`] gives for the
    /// same `header` and `slot_size` lies within that many bytes.
    pub fn ring_size(self, header: usize, slot_size: usize) -> Option<usize> {
        let slots = usize::try_from(self.num_slots)
            .ok()?
            .checked_mul(slot_size)?;
        slots.checked_add(header)
    }

    /// Bytes of a mapping holding `header` bytes and every slot of
    /// `slot_size` bytes, rounded up to `page`, or `None` on overflow.
    pub fn mapping_size(self, header: usize, slot_size: usize, page: usize) -> Option<usize> {
        let raw = self.ring_size(header, slot_size)?;
        let rounded = raw.checked_add(page - 1)? / page * page;
        Some(rounded)
    }

    /// Byte offset from the start of the ring of the slot that index
    /// `index` names, after `header` bytes and slots of `slot_size` bytes.
    ///
    /// The slot ends within [`Geometry::ring_size`] bytes, so if that is
    /// `Some` for the same `header` and `slot_size`, this cannot overflow.
    pub fn slot_offset(self, header: usize, slot_size: usize, index: u32) -> usize {
        // CAST: lossless, `usize` has at least 32 bits wherever roxe runs.
        header + self.slot(index) as usize * slot_size
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
    fn described_slot_counts_must_be_powers_of_two() {
        for n in [1u32, 2, 8, 1 << 20, 1 << 31] {
            assert_eq!(Geometry::from_slots(n).map(Geometry::num_slots), Some(n));
        }
        for n in [0u32, 3, 6, 100, (1 << 31) + 1, u32::MAX] {
            assert_eq!(Geometry::from_slots(n), None, "{n}");
        }
    }

    #[test]
    fn used_and_free_at_the_edges() {
        let g = Geometry::from_slots(8).unwrap();
        // Empty and full across the u32 wrap.
        assert_eq!(g.used(u32::MAX, u32::MAX), Ok(0));
        assert_eq!(g.used(7, u32::MAX), Ok(8));
        assert_eq!(g.free(7, u32::MAX), Ok(0));
        assert_eq!(g.used(0, u32::MAX - 7), Ok(8));
        // One past full, across the wrap, and a consumer ahead by one.
        assert_eq!(g.used(8, u32::MAX), Err(Corrupt));
        assert_eq!(g.free(0, u32::MAX - 8), Err(Corrupt));
        assert_eq!(g.free(1, 2), Err(Corrupt));
        // The largest ring: half the index space.
        let g = Geometry::from_slots(1 << 31).unwrap();
        assert_eq!(g.used(0x8000_0000, 0), Ok(1 << 31));
        assert_eq!(g.free(0x8000_0000, 0), Ok(0));
        assert_eq!(g.used(0x8000_0001, 0), Err(Corrupt));
    }

    #[test]
    fn slot_offsets_stay_inside_the_ring() {
        for (n, header, size) in [
            (1u32, 128usize, 64usize),
            (2, 128, 128),
            (8, 0, 576),
            (1024, 128, 64),
        ] {
            let g = Geometry::from_slots(n).unwrap();
            let len = g.ring_size(header, size).unwrap();
            assert_eq!(len, header + n as usize * size);
            for index in [0, 1, n - 1, n, n + 1, u32::MAX - 1, u32::MAX] {
                let off = g.slot_offset(header, size, index);
                assert!(off >= header, "n={n} index={index}");
                assert!(off + size <= len, "n={n} index={index}");
                assert_eq!((off - header) % size, 0);
            }
            assert_eq!(
                g.slot_offset(header, size, n),
                g.slot_offset(header, size, 0)
            );
            assert_eq!(g.slot_offset(header, size, n - 1), len - size);
        }
        // Sizes that do not fit `usize`.
        let g = Geometry::from_slots(1 << 31).unwrap();
        assert_eq!(g.ring_size(128, usize::MAX / 2), None);
        assert_eq!(g.ring_size(usize::MAX, 0), Some(usize::MAX));
        assert_eq!(g.ring_size(usize::MAX, 1), None);
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
