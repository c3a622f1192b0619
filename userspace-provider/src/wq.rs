// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The producer side of a roxe work-queue ring: a QP's send or receive
//! queue, or an SRQ (`Documentation/rings.md`, `roxe_uapi::RingInfo`).
//!
//! User space writes work-queue entries (WQEs) into slots and publishes
//! them by storing the producer index; the kernel consumes them and stores
//! the consumer index. [`Geometry`] checks the kernel's description of a
//! ring once, so that no index can reach outside the mapping. [`Producer`]
//! keeps the producer index (never read back from the ring, so nothing
//! else can move it), checks for room against the consumer index the
//! kernel publishes, and refuses to write when the distance between the
//! two is impossible.
//!
//! The index arithmetic is `roxe_proto::ring`, the kernel module's own.
//!
//! Nothing here touches memory. The mapping is reached through the
//! [`WqMemory`] trait, which the `ffi` module implements for the real
//! `mmap` and the tests implement with plain vectors.

use roxe_proto::ring;
use roxe_uapi::{RING_HEADER_SIZE, RingInfo};

use crate::errno::Errno;

/// Slot sizes are multiples of this many bytes.
pub const SLOT_ALIGN: usize = 64;

/// The shape of a work-queue ring, as the kernel described it.
///
/// # Invariants
///
/// - `slot_size` is a non-zero multiple of [`SLOT_ALIGN`] and at least the
///   `header` size [`Geometry::new`] was given.
/// - `ring.ring_size(RING_HEADER_SIZE, slot_size)` is at most `len`, so
///   every slot lies inside a mapping of `len` bytes, and so do both
///   indices.
/// - `offset` is non-negative (it is an `off_t` for `mmap`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    offset: i64,
    len: usize,
    ring: ring::Geometry,
    slot_size: usize,
}

impl Geometry {
    /// Checks the kernel's description of a ring whose WQEs start with a
    /// `header`-byte fixed part.
    ///
    /// Fails with `EPROTO` if the slot count is not a power of two, the
    /// slot size is not a multiple of 64 or is smaller than `header`, the
    /// mapping is too small for the ring header and every slot, or a number
    /// does not fit the types `mmap` takes.
    pub fn new(info: &RingInfo, header: usize) -> Result<Self, Errno> {
        let ring = ring::Geometry::from_slots(info.num_slots).ok_or(Errno::EPROTO)?;
        let slot_size = usize::try_from(info.slot_size).map_err(|_| Errno::EPROTO)?;
        if slot_size == 0 || slot_size % SLOT_ALIGN != 0 || slot_size < header {
            return Err(Errno::EPROTO);
        }
        let offset = i64::try_from(info.mmap_offset).map_err(|_| Errno::EPROTO)?;
        let len = usize::try_from(info.mmap_size).map_err(|_| Errno::EPROTO)?;
        let needed = ring
            .ring_size(RING_HEADER_SIZE, slot_size)
            .ok_or(Errno::EPROTO)?;
        if len < needed {
            return Err(Errno::EPROTO);
        }
        // INVARIANT: each condition was checked above.
        Ok(Self {
            offset,
            len,
            ring,
            slot_size,
        })
    }

    /// The `mmap` offset on the verbs command fd.
    pub fn mmap_offset(&self) -> i64 {
        self.offset
    }

    /// The length of the mapping in bytes.
    pub fn mmap_len(&self) -> usize {
        self.len
    }

    /// The number of slots, a power of two.
    pub fn num_slots(&self) -> u32 {
        self.ring.num_slots()
    }

    /// The index arithmetic of the ring.
    pub fn ring(&self) -> ring::Geometry {
        self.ring
    }

    /// The size of one slot in bytes.
    pub fn slot_size(&self) -> usize {
        self.slot_size
    }

    /// Byte offset in the mapping of the slot that free-running index
    /// `index` names.
    ///
    /// For every `index`, `slot_offset(index) + slot_size() <= mmap_len()`.
    pub fn slot_offset(&self, index: u32) -> usize {
        // `new` checked that the ring's size for these numbers fits in
        // `len`, so this cannot overflow.
        self.ring
            .slot_offset(RING_HEADER_SIZE, self.slot_size, index)
    }
}

/// Access to the memory of one mapped work-queue ring.
pub trait WqMemory {
    /// The ring's checked shape.
    fn geometry(&self) -> Geometry;

    /// Loads the consumer index with acquire ordering, so that the kernel
    /// has finished reading the slots it frees before they are rewritten.
    fn load_consumer(&self) -> u32;

    /// Stores the producer index with release ordering, after the slots it
    /// publishes have been written.
    fn store_producer(&self, producer: u32);

    /// Copies `bytes` to the start of the slot that free-running index
    /// `index` names. Bytes beyond the slot size are not written.
    fn write_slot(&mut self, index: u32, bytes: &[u8]);
}

/// The producer of one work-queue ring.
///
/// WQEs are written with [`Producer::push`] and become visible to the
/// kernel only with [`Producer::publish`], so a batch is published with one
/// store.
#[derive(Debug)]
pub struct Producer<M> {
    memory: M,
    /// The index of the next slot to fill.
    producer: u32,
    /// The index last stored in the ring.
    published: u32,
    /// Where a WQE is built before it is copied into its slot: one slot's
    /// worth of bytes, allocated once so that posting never allocates.
    scratch: Vec<u8>,
}

impl<M: WqMemory> Producer<M> {
    /// Starts producing into `memory` at index 0, where a new ring starts.
    ///
    /// Fails with `ENOMEM` if the scratch slot cannot be allocated.
    pub fn new(memory: M) -> Result<Self, Errno> {
        Self::starting_at(memory, 0)
    }

    /// Starts producing at index `start`: where the kernel left a resized
    /// ring (and, in tests, near wraparound without posting 2^32 WQEs).
    pub fn starting_at(memory: M, start: u32) -> Result<Self, Errno> {
        let len = memory.geometry().slot_size();
        let mut scratch = Vec::new();
        scratch.try_reserve_exact(len).map_err(|_| Errno::ENOMEM)?;
        scratch.resize(len, 0);
        Ok(Self {
            memory,
            producer: start,
            published: start,
            scratch,
        })
    }

    /// Writes one WQE into the next free slot, without publishing it.
    ///
    /// `build` gets a zeroed buffer of one slot's size and returns how many
    /// bytes of it make up the WQE; only those are copied into the ring.
    /// Fails, with nothing written, with `ENOMEM` if the ring is full, with
    /// `EIO` if the kernel's consumer index is impossible, with whatever
    /// `build` fails with, or with `EINVAL` if `build` claims more bytes
    /// than a slot holds.
    pub fn push(
        &mut self,
        build: impl FnOnce(&mut [u8]) -> Result<usize, Errno>,
    ) -> Result<(), Errno> {
        // The kernel has not consumed `producer - consumer` (wrapping) slots
        // yet. More than the ring holds cannot happen with a correct kernel;
        // a consumer index ahead of the producer shows up the same way, as a
        // huge wrapped distance.
        let ring = self.memory.geometry().ring();
        let consumer = self.memory.load_consumer();
        let free = ring
            .free(self.producer, consumer)
            .map_err(|ring::Corrupt| Errno::EIO)?;
        if free == 0 {
            return Err(Errno::ENOMEM);
        }
        self.scratch.fill(0);
        let len = build(&mut self.scratch)?;
        let wqe = self.scratch.get(..len).ok_or(Errno::EINVAL)?;
        self.memory.write_slot(self.producer, wqe);
        self.producer = self.producer.wrapping_add(1);
        Ok(())
    }

    /// Makes every WQE pushed so far visible to the kernel. Returns whether
    /// there was anything new to publish.
    pub fn publish(&mut self) -> bool {
        if self.producer == self.published {
            return false;
        }
        self.memory.store_producer(self.producer);
        self.published = self.producer;
        true
    }

    /// Forgets every WQE pushed since the last [`Producer::publish`]: the
    /// kernel never saw them, and their slots are free again.
    pub fn discard(&mut self) {
        self.producer = self.published;
    }

    /// The ring's memory.
    pub fn memory(&self) -> &M {
        &self.memory
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::cell::{Cell, RefCell};

    /// A ring in a plain vector, with a kernel-side consumer for tests.
    pub(crate) struct FakeWq {
        geometry: Geometry,
        consumer: Cell<u32>,
        /// Every producer value stored, in order.
        pub(crate) producer_stores: RefCell<Vec<u32>>,
        /// The mapping's bytes after the header, slot by slot.
        slots: Vec<u8>,
        /// Every index passed to `write_slot`.
        pub(crate) writes: Vec<u32>,
    }

    impl FakeWq {
        /// An empty ring of `num_slots` slots of `slot_size` bytes whose
        /// indices start at `start`.
        pub(crate) fn new(num_slots: u32, slot_size: u32, start: u32) -> Self {
            let info = info(num_slots, slot_size, exact_len(num_slots, slot_size));
            let geometry = Geometry::new(&info, 16).expect("test geometry is valid");
            Self {
                geometry,
                consumer: Cell::new(start),
                producer_stores: RefCell::new(Vec::new()),
                slots: vec![0xee; num_slots as usize * slot_size as usize],
                writes: Vec::new(),
            }
        }

        /// Frees `n` slots, as the kernel would after consuming them.
        pub(crate) fn consume(&self, n: u32) {
            self.consumer.set(self.consumer.get().wrapping_add(n));
        }

        /// Overwrites the consumer index, as a broken kernel might.
        pub(crate) fn set_consumer(&self, consumer: u32) {
            self.consumer.set(consumer);
        }

        /// The bytes of the slot that `index` names.
        pub(crate) fn slot(&self, index: u32) -> &[u8] {
            let start = self.geometry.slot_offset(index) - RING_HEADER_SIZE;
            &self.slots[start..start + self.geometry.slot_size()]
        }
    }

    impl WqMemory for FakeWq {
        fn geometry(&self) -> Geometry {
            self.geometry
        }
        fn load_consumer(&self) -> u32 {
            self.consumer.get()
        }
        fn store_producer(&self, producer: u32) {
            self.producer_stores.borrow_mut().push(producer);
        }
        fn write_slot(&mut self, index: u32, bytes: &[u8]) {
            self.writes.push(index);
            let offset = self.geometry.slot_offset(index);
            assert!(offset + self.geometry.slot_size() <= self.geometry.mmap_len());
            assert!(bytes.len() <= self.geometry.slot_size());
            let start = offset - RING_HEADER_SIZE;
            self.slots[start..start + bytes.len()].copy_from_slice(bytes);
        }
    }

    pub(crate) fn info(num_slots: u32, slot_size: u32, mmap_size: u64) -> RingInfo {
        RingInfo {
            mmap_offset: 0x3000,
            mmap_size,
            num_slots,
            slot_size,
        }
    }

    pub(crate) fn exact_len(num_slots: u32, slot_size: u32) -> u64 {
        RING_HEADER_SIZE as u64 + u64::from(num_slots) * u64::from(slot_size)
    }

    /// Pushes one WQE of `len` bytes, each `byte`.
    fn push_bytes(p: &mut Producer<FakeWq>, byte: u8, len: usize) -> Result<(), Errno> {
        p.push(|out| {
            out[..len].fill(byte);
            Ok(len)
        })
    }

    #[test]
    fn geometry_accepts_a_ring_that_fits() {
        let g = Geometry::new(&info(8, 128, 4096), 72).expect("valid");
        assert_eq!(
            (g.mmap_offset(), g.mmap_len(), g.num_slots(), g.slot_size()),
            (0x3000, 4096, 8, 128)
        );
        assert!(Geometry::new(&info(1, 64, exact_len(1, 64)), 16).is_ok());
        assert!(Geometry::new(&info(1 << 20, 640, exact_len(1 << 20, 640)), 72).is_ok());
        // A slot exactly the size of the header.
        assert!(Geometry::new(&info(4, 64, 4096), 64).is_ok());
    }

    #[test]
    fn geometry_rejects_slot_counts_that_are_not_powers_of_two() {
        for n in [0, 3, 6, 100, u32::MAX] {
            assert_eq!(
                Geometry::new(&info(n, 64, 1 << 40), 16),
                Err(Errno::EPROTO),
                "{n}"
            );
        }
    }

    #[test]
    fn geometry_rejects_bad_slot_sizes() {
        // Not a multiple of 64, zero, or too small for the fixed part.
        for (size, header) in [(0, 16), (16, 16), (63, 16), (65, 16), (96, 16), (64, 72)] {
            assert_eq!(
                Geometry::new(&info(8, size, 1 << 20), header),
                Err(Errno::EPROTO),
                "slot {size} header {header}"
            );
        }
    }

    #[test]
    fn geometry_rejects_a_mapping_too_small_for_its_slots() {
        assert_eq!(
            Geometry::new(&info(8, 128, exact_len(8, 128) - 1), 72),
            Err(Errno::EPROTO)
        );
        assert_eq!(Geometry::new(&info(8, 64, 0), 16), Err(Errno::EPROTO));
        // The product overflows 32 bits: the size is compared in `usize`.
        assert_eq!(
            Geometry::new(&info(1 << 31, 1 << 20, 4096), 72),
            Err(Errno::EPROTO)
        );
        assert_eq!(
            Geometry::new(&info(1 << 31, 0xffff_ffc0, 1 << 40), 72),
            Err(Errno::EPROTO)
        );
    }

    #[test]
    fn geometry_rejects_an_offset_mmap_cannot_take() {
        let i = RingInfo {
            mmap_offset: 1 << 63,
            ..info(8, 64, 4096)
        };
        assert_eq!(Geometry::new(&i, 16), Err(Errno::EPROTO));
    }

    #[test]
    fn every_index_lands_inside_the_mapping() {
        for (n, size) in [(1u32, 64u32), (2, 128), (8, 576), (1024, 64)] {
            let g = Geometry::new(&info(n, size, exact_len(n, size)), 16).expect("valid");
            for index in [0, 1, n - 1, n, n + 1, u32::MAX - 1, u32::MAX] {
                let off = g.slot_offset(index);
                assert!(off >= RING_HEADER_SIZE, "n={n} index={index}");
                assert!(off + g.slot_size() <= g.mmap_len(), "n={n} index={index}");
            }
            assert_eq!(g.slot_offset(n), g.slot_offset(0));
        }
    }

    #[test]
    fn push_writes_slots_and_publish_stores_once_per_batch() {
        let mut p = Producer::new(FakeWq::new(4, 64, 0)).expect("producer");
        assert!(!p.publish(), "nothing to publish yet");
        push_bytes(&mut p, 1, 20).expect("room");
        push_bytes(&mut p, 2, 64).expect("room");
        assert!(p.memory().producer_stores.borrow().is_empty());
        assert!(p.publish());
        assert!(!p.publish());
        assert_eq!(*p.memory().producer_stores.borrow(), [2]);
        assert_eq!(p.memory().slot(0)[..20], [1; 20]);
        // Only the WQE's bytes are copied; the rest of the slot is untouched.
        assert_eq!(p.memory().slot(0)[20..], [0xee; 44]);
        assert_eq!(p.memory().slot(1), [2; 64]);
    }

    #[test]
    fn push_hands_the_builder_a_zeroed_slot() {
        let mut p = Producer::new(FakeWq::new(2, 64, 0)).expect("producer");
        push_bytes(&mut p, 7, 64).expect("room");
        p.push(|out| {
            assert_eq!(out.len(), 64);
            assert!(out.iter().all(|&b| b == 0), "left over from the last WQE");
            Ok(8)
        })
        .expect("room");
    }

    #[test]
    fn a_full_ring_refuses_without_writing() {
        let mut p = Producer::new(FakeWq::new(2, 64, 0)).expect("producer");
        push_bytes(&mut p, 1, 8).expect("room");
        push_bytes(&mut p, 2, 8).expect("room");
        let mut called = false;
        let full = p.push(|_| {
            called = true;
            Ok(8)
        });
        assert_eq!(full, Err(Errno::ENOMEM));
        assert!(!called, "the builder ran for a full ring");
        assert_eq!(p.memory().writes, [0, 1]);
        // Unpublished WQEs count as used too: publishing does not free room.
        p.publish();
        assert_eq!(push_bytes(&mut p, 3, 8), Err(Errno::ENOMEM));
        // The kernel consumes one; its slot is reused.
        p.memory().consume(1);
        push_bytes(&mut p, 3, 8).expect("room again");
        assert_eq!(p.memory().writes, [0, 1, 2]);
        assert_eq!(p.memory().slot(2)[..8], [3; 8]);
        assert_eq!(p.memory().slot(0)[..8], [3; 8], "index 2 is slot 0");
    }

    #[test]
    fn wraps_its_slots_and_its_indices() {
        let start = u32::MAX - 2;
        let mut p = Producer::starting_at(FakeWq::new(4, 64, start), start).expect("producer");
        for round in 0..3u8 {
            for n in 0..4 {
                push_bytes(&mut p, round * 10 + n, 16).expect("room");
            }
            assert_eq!(
                push_bytes(&mut p, 0, 16),
                Err(Errno::ENOMEM),
                "round {round}"
            );
            assert!(p.publish());
            for n in 0..4u8 {
                let index = start.wrapping_add(u32::from(round) * 4 + u32::from(n));
                assert_eq!(p.memory().slot(index)[..16], [round * 10 + n; 16]);
            }
            p.memory().consume(4);
        }
        let stores = p.memory().producer_stores.borrow();
        assert_eq!(
            *stores,
            [
                start.wrapping_add(4),
                start.wrapping_add(8),
                start.wrapping_add(12)
            ]
        );
        assert_eq!(stores[0], 1, "the first batch crossed the u32 wrap");
    }

    #[test]
    fn an_impossible_consumer_stops_the_producer() {
        let mut p = Producer::new(FakeWq::new(4, 64, 0)).expect("producer");
        for consumer in [1, 5, u32::MAX - 4, 0x8000_0000] {
            p.memory().set_consumer(consumer);
            assert_eq!(push_bytes(&mut p, 1, 8), Err(Errno::EIO), "{consumer}");
        }
        assert!(p.memory().writes.is_empty());
        assert!(!p.publish());
    }

    #[test]
    fn discard_drops_only_what_is_unpublished() {
        let mut p = Producer::new(FakeWq::new(4, 64, 0)).expect("producer");
        push_bytes(&mut p, 1, 8).expect("room");
        assert!(p.publish());
        push_bytes(&mut p, 2, 8).expect("room");
        push_bytes(&mut p, 3, 8).expect("room");
        p.discard();
        assert!(!p.publish(), "nothing left to publish");
        // The discarded slots are free again: three more fit, not one.
        for b in 4..7 {
            push_bytes(&mut p, b, 8).expect("room");
        }
        assert_eq!(push_bytes(&mut p, 7, 8), Err(Errno::ENOMEM));
        assert!(p.publish());
        assert_eq!(*p.memory().producer_stores.borrow(), [1, 4]);
        assert_eq!(p.memory().writes, [0, 1, 2, 1, 2, 3]);
        assert_eq!(p.memory().slot(1)[..8], [4; 8]);
    }

    #[test]
    fn a_failed_build_writes_nothing() {
        let mut p = Producer::new(FakeWq::new(4, 64, 0)).expect("producer");
        assert_eq!(p.push(|_| Err(Errno::EINVAL)), Err(Errno::EINVAL));
        assert_eq!(p.push(|_| Ok(65)), Err(Errno::EINVAL));
        assert!(p.memory().writes.is_empty());
        assert!(!p.publish());
        push_bytes(&mut p, 9, 8).expect("room");
        assert_eq!(p.memory().writes, [0], "failures did not use up a slot");
    }
}
