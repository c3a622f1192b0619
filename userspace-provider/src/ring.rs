// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The consumer side of a roxe CQ ring (`Documentation/rings.md`).
//!
//! The kernel describes a ring in a [`roxe_uapi::CreateCqResp`]; [`Geometry`]
//! checks that description once, so that no index can reach outside the
//! mapping afterwards. [`Ring`] polls with free-running `u32` indices: it
//! keeps its own consumer index, loads the kernel's producer index, and
//! refuses to read anything when the distance between the two is impossible.
//! A CQ ring is a work-queue ring whose slots are one CQE each, so
//! [`Geometry`] wraps a [`wq::Geometry`], and the index arithmetic is
//! `roxe_proto::ring`, the kernel module's own.
//!
//! Nothing here touches memory. The mapping is reached through the
//! [`RingMemory`] trait, which the `ffi` module implements for the real
//! `mmap` and the tests implement with plain vectors.

use core::mem::{offset_of, size_of};

use roxe_proto::ring::Corrupt;
use roxe_uapi::{Cqe, CreateCqResp, RingHeader, RingIndex};

use crate::errno::Errno;
use crate::wq;

/// Byte offset of the producer index (a `u32`) in a ring mapping.
pub const PRODUCER_OFFSET: usize = offset_of!(RingHeader, producer) + offset_of!(RingIndex, value);

/// Byte offset of the consumer index (a `u32`) in a ring mapping.
pub const CONSUMER_OFFSET: usize = offset_of!(RingHeader, consumer) + offset_of!(RingIndex, value);

/// Size of one CQ slot.
pub const SLOT_SIZE: usize = size_of::<Cqe>();

/// The shape of a CQ ring, as the kernel described it.
///
/// # Invariants
///
/// The work-queue geometry's slots are [`SLOT_SIZE`] bytes, so (by its
/// invariants) every slot lies inside the mapping.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry(wq::Geometry);

impl Geometry {
    /// Checks the kernel's description of a ring.
    ///
    /// Fails with `EPROTO` if the slot count is not a power of two, the slot
    /// size is not that of [`Cqe`], the mapping is too small for the header
    /// and every slot, or a number does not fit the types `mmap` takes.
    pub fn new(resp: &CreateCqResp) -> Result<Self, Errno> {
        // A CQ ring is a work-queue ring whose slots are exactly one CQE;
        // the shared check covers the slot count, the offset and the
        // mapping size.
        if usize::try_from(resp.slot_size) != Ok(SLOT_SIZE) {
            return Err(Errno::EPROTO);
        }
        let g = wq::Geometry::new(resp, SLOT_SIZE)?;
        // INVARIANT: `wq::Geometry` checked the count, offset and length for
        // slots of `slot_size`, which is `SLOT_SIZE`.
        Ok(Self(g))
    }

    /// The `mmap` offset on the verbs command fd.
    pub fn mmap_offset(&self) -> i64 {
        self.0.mmap_offset()
    }

    /// The length of the mapping in bytes.
    pub fn mmap_len(&self) -> usize {
        self.0.mmap_len()
    }

    /// The number of slots, a power of two.
    pub fn num_slots(&self) -> u32 {
        self.0.num_slots()
    }

    /// Byte offset in the mapping of the slot that free-running index
    /// `index` names.
    ///
    /// For every `index`, `slot_offset(index) + SLOT_SIZE <= mmap_len()`.
    pub fn slot_offset(&self, index: u32) -> usize {
        self.0.slot_offset(index)
    }
}

/// Access to the memory of one mapped ring.
pub trait RingMemory {
    /// The ring's checked shape.
    fn geometry(&self) -> Geometry;

    /// Loads the producer index with acquire ordering, so that the slots it
    /// covers are visible before they are read.
    fn load_producer(&self) -> u32;

    /// Stores the consumer index with release ordering, after the slots it
    /// frees have been read.
    fn store_consumer(&self, consumer: u32);

    /// Copies the slot that free-running index `index` names.
    fn read_slot(&self, index: u32) -> Cqe;

    /// Overwrites the slot that `index` names. Only for published slots
    /// not consumed yet, which the kernel does not write again until the
    /// consumer index frees them.
    fn write_slot(&self, index: u32, cqe: Cqe);
}

/// The consumer of one CQ ring.
///
/// Its consumer index is a local copy: it is written to the ring but never
/// read back, so nothing else can move it. It starts at 0, where a new ring
/// starts and where the kernel puts the first unconsumed completion when it
/// resizes a CQ.
#[derive(Debug)]
pub struct Ring<M> {
    memory: M,
    consumer: u32,
}

impl<M: RingMemory> Ring<M> {
    /// Starts consuming `memory` at index 0.
    pub fn new(memory: M) -> Self {
        Self {
            memory,
            consumer: 0,
        }
    }

    /// Starts consuming `memory` at index `consumer`, to test wraparound
    /// without polling 2^32 completions first.
    #[cfg(test)]
    fn starting_at(memory: M, consumer: u32) -> Self {
        Self { memory, consumer }
    }

    /// The number of completions published and not consumed yet.
    ///
    /// Fails with `EIO` if the producer index is impossible; nothing may be
    /// read from the ring then.
    pub fn ready(&self) -> Result<u32, Errno> {
        // The indices are free-running, so `producer - consumer` (wrapping)
        // is the number of filled slots. More than the ring holds cannot
        // happen with a correct kernel; a producer index behind the
        // consumer shows up the same way, as a huge wrapped distance.
        let ring = self.memory.geometry().0.ring();
        let producer = self.memory.load_producer();
        ring.used(producer, self.consumer)
            .map_err(|Corrupt| Errno::EIO)
    }

    /// Copies the oldest unconsumed completion.
    ///
    /// Meaningful only after [`Ring::ready`] reported at least one; the
    /// read stays inside the ring either way.
    pub fn peek(&self) -> Cqe {
        self.memory.read_slot(self.consumer)
    }

    /// Frees the oldest unconsumed slot and tells the kernel.
    pub fn consume(&mut self) {
        self.consumer = self.consumer.wrapping_add(1);
        self.memory.store_consumer(self.consumer);
    }

    /// Drops every unconsumed completion of QP `qpn`, keeping the others
    /// in order, and returns how many were dropped. Used when the QP is
    /// reset, as hardware providers do, so that stale flush completions do
    /// not meet the QP's next life.
    ///
    /// The kept completions are packed towards the newest slot (every slot
    /// touched is published and unconsumed, so the kernel does not write
    /// it), then the consumer index moves past the dropped ones.
    ///
    /// Fails with `EIO` as [`Ring::ready`] does.
    pub fn discard_qp(&mut self, qpn: u32) -> Result<u32, Errno> {
        let ready = self.ready()?;
        let end = self.consumer.wrapping_add(ready);
        let mut fill = end;
        let mut i = end;
        while i != self.consumer {
            i = i.wrapping_sub(1);
            let c = self.memory.read_slot(i);
            if c.qp_num != qpn {
                fill = fill.wrapping_sub(1);
                if fill != i {
                    self.memory.write_slot(fill, c);
                }
            }
        }
        let dropped = fill.wrapping_sub(self.consumer);
        if dropped != 0 {
            self.consumer = fill;
            self.memory.store_consumer(self.consumer);
        }
        Ok(dropped)
    }

    /// The ring's memory.
    pub fn memory(&self) -> &M {
        &self.memory
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use roxe_uapi::RING_HEADER_SIZE;
    use std::cell::{Cell, RefCell};

    /// A ring in a plain vector, with a kernel-side producer for tests.
    pub(crate) struct FakeRing {
        geometry: Geometry,
        producer: Cell<u32>,
        /// Every consumer value stored, in order.
        pub(crate) consumer_stores: RefCell<Vec<u32>>,
        slots: RefCell<Vec<Cqe>>,
        /// Every index passed to `read_slot`.
        pub(crate) reads: RefCell<Vec<u32>>,
    }

    impl FakeRing {
        /// An empty ring of `num_slots` slots whose indices start at `start`.
        pub(crate) fn new(num_slots: u32, start: u32) -> Self {
            let geometry = Geometry::new(&resp(num_slots, exact_len(num_slots)))
                .expect("test geometry is valid");
            Self {
                geometry,
                producer: Cell::new(start),
                consumer_stores: RefCell::new(Vec::new()),
                slots: RefCell::new(vec![Cqe::default(); num_slots as usize]),
                reads: RefCell::new(Vec::new()),
            }
        }

        /// Publishes one completion, as the kernel would.
        pub(crate) fn produce(&self, cqe: Cqe) {
            let p = self.producer.get();
            let slot = (p & (self.geometry.num_slots() - 1)) as usize;
            self.slots.borrow_mut()[slot] = cqe;
            self.producer.set(p.wrapping_add(1));
        }

        /// Overwrites the producer index, as a broken kernel might.
        pub(crate) fn set_producer(&self, producer: u32) {
            self.producer.set(producer);
        }
    }

    impl RingMemory for FakeRing {
        fn geometry(&self) -> Geometry {
            self.geometry
        }
        fn load_producer(&self) -> u32 {
            self.producer.get()
        }
        fn store_consumer(&self, consumer: u32) {
            self.consumer_stores.borrow_mut().push(consumer);
        }
        fn read_slot(&self, index: u32) -> Cqe {
            self.reads.borrow_mut().push(index);
            let offset = self.geometry.slot_offset(index);
            assert!(offset + SLOT_SIZE <= self.geometry.mmap_len());
            self.slots.borrow()[(offset - RING_HEADER_SIZE) / SLOT_SIZE]
        }
        fn write_slot(&self, index: u32, cqe: Cqe) {
            let offset = self.geometry.slot_offset(index);
            assert!(offset + SLOT_SIZE <= self.geometry.mmap_len());
            self.slots.borrow_mut()[(offset - RING_HEADER_SIZE) / SLOT_SIZE] = cqe;
        }
    }

    /// A CQE whose fields all derive from `n`.
    pub(crate) fn cqe(n: u32) -> Cqe {
        Cqe {
            wr_id: u64::from(n) << 32 | 0xabcd,
            status: n % 22,
            opcode: 128 + n % 2,
            vendor_err: n + 1,
            byte_len: n + 2,
            imm_data: n + 3,
            qp_num: n + 4,
            src_qp: n + 5,
            wc_flags: n + 6,
            pkey_index: 7,
            slid: 8,
            sl: 9,
            dlid_path_bits: 10,
            port_num: 1,
            ..Cqe::default()
        }
    }

    pub(crate) fn resp(num_slots: u32, mmap_size: u64) -> CreateCqResp {
        CreateCqResp {
            mmap_offset: 0x1000,
            mmap_size,
            num_slots,
            slot_size: SLOT_SIZE as u32,
        }
    }

    pub(crate) fn exact_len(num_slots: u32) -> u64 {
        (RING_HEADER_SIZE + num_slots as usize * SLOT_SIZE) as u64
    }

    #[test]
    fn discard_qp_keeps_the_others_in_order() {
        // Across the index wraparound: 8 slots starting near u32::MAX.
        let mut ring = Ring::starting_at(FakeRing::new(8, u32::MAX - 2), u32::MAX - 2);
        let qp = |n: u32, q: u32| Cqe {
            qp_num: q,
            ..cqe(n)
        };
        for (n, q) in [(1, 7), (2, 9), (3, 7), (4, 7), (5, 9), (6, 11)] {
            ring.memory().produce(qp(n, q));
        }
        assert_eq!(ring.discard_qp(7), Ok(3));
        let mut left = Vec::new();
        while ring.ready() != Ok(0) {
            left.push(ring.peek());
            ring.consume();
        }
        assert_eq!(left, vec![qp(2, 9), qp(5, 9), qp(6, 11)]);
        // Nothing of that QP left: nothing changes.
        ring.memory().produce(qp(8, 9));
        assert_eq!(ring.discard_qp(7), Ok(0));
        assert_eq!(ring.ready(), Ok(1));
        assert_eq!(ring.discard_qp(9), Ok(1));
        assert_eq!(ring.ready(), Ok(0));
        // An impossible producer index reads nothing.
        let c = ring.consumer;
        ring.memory().set_producer(c.wrapping_add(100));
        assert_eq!(ring.discard_qp(9), Err(Errno::EIO));
    }

    #[test]
    fn index_offsets_follow_the_uapi_header() {
        assert_eq!(PRODUCER_OFFSET, 0);
        assert_eq!(CONSUMER_OFFSET, 64);
        assert_eq!(SLOT_SIZE, 64);
        assert_eq!(RING_HEADER_SIZE, 128);
    }

    #[test]
    fn geometry_accepts_a_ring_that_fits() {
        let g = Geometry::new(&resp(8, 4096)).expect("valid");
        assert_eq!(
            (g.mmap_offset(), g.mmap_len(), g.num_slots()),
            (0x1000, 4096, 8)
        );
        // The smallest mapping that holds header and slots is enough.
        assert!(Geometry::new(&resp(1, exact_len(1))).is_ok());
        assert!(Geometry::new(&resp(1 << 20, exact_len(1 << 20))).is_ok());
    }

    #[test]
    fn geometry_rejects_slot_counts_that_are_not_powers_of_two() {
        for n in [0, 3, 6, 100, u32::MAX] {
            assert_eq!(Geometry::new(&resp(n, 1 << 40)), Err(Errno::EPROTO), "{n}");
        }
    }

    #[test]
    fn geometry_rejects_a_foreign_slot_size() {
        for size in [0, 32, 63, 65, 128] {
            let r = CreateCqResp {
                slot_size: size,
                ..resp(8, 4096)
            };
            assert_eq!(Geometry::new(&r), Err(Errno::EPROTO), "{size}");
        }
    }

    #[test]
    fn geometry_rejects_a_mapping_too_small_for_its_slots() {
        assert_eq!(
            Geometry::new(&resp(8, exact_len(8) - 1)),
            Err(Errno::EPROTO)
        );
        assert_eq!(Geometry::new(&resp(8, 0)), Err(Errno::EPROTO));
        assert_eq!(Geometry::new(&resp(1 << 31, 4096)), Err(Errno::EPROTO));
    }

    #[test]
    fn geometry_rejects_an_offset_mmap_cannot_take() {
        let r = CreateCqResp {
            mmap_offset: 1 << 63,
            ..resp(8, 4096)
        };
        assert_eq!(Geometry::new(&r), Err(Errno::EPROTO));
    }

    #[test]
    fn every_index_lands_inside_the_mapping() {
        for n in [1u32, 2, 8, 1024] {
            let g = Geometry::new(&resp(n, exact_len(n))).expect("valid");
            for index in [0, 1, n - 1, n, n + 1, u32::MAX - 1, u32::MAX] {
                let off = g.slot_offset(index);
                assert!(off >= RING_HEADER_SIZE, "n={n} index={index}");
                assert!(off + SLOT_SIZE <= g.mmap_len(), "n={n} index={index}");
            }
            assert_eq!(g.slot_offset(n), g.slot_offset(0));
        }
    }

    #[test]
    fn ring_consumes_in_order_and_publishes_each_step() {
        let mut ring = Ring::new(FakeRing::new(4, 0));
        assert_eq!(ring.ready(), Ok(0));
        for n in 0..3 {
            ring.memory().produce(cqe(n));
        }
        assert_eq!(ring.ready(), Ok(3));
        for n in 0..3 {
            assert_eq!(ring.peek(), cqe(n));
            ring.consume();
        }
        assert_eq!(ring.ready(), Ok(0));
        assert_eq!(*ring.memory().consumer_stores.borrow(), [1, 2, 3]);
    }

    #[test]
    fn ring_wraps_its_slots_and_its_indices() {
        let start = u32::MAX - 2;
        let mut ring = Ring::starting_at(FakeRing::new(4, start), start);
        // Fill, drain, and refill across the u32 wrap and the slot wrap.
        for round in 0..3u32 {
            for n in 0..4 {
                ring.memory().produce(cqe(round * 10 + n));
            }
            assert_eq!(ring.ready(), Ok(4), "round {round}: full");
            for n in 0..4 {
                assert_eq!(ring.peek(), cqe(round * 10 + n));
                ring.consume();
            }
            assert_eq!(ring.ready(), Ok(0), "round {round}: empty");
        }
        let stores = ring.memory().consumer_stores.borrow();
        assert_eq!(stores.len(), 12);
        assert_eq!(stores[0], u32::MAX - 1);
        assert_eq!(stores[1], u32::MAX);
        assert_eq!(stores[2], 0);
        assert_eq!(*stores.last().expect("12 stores"), start.wrapping_add(12));
    }

    #[test]
    fn ring_reports_a_corrupt_producer_without_reading() {
        let ring = Ring::new(FakeRing::new(4, 0));
        for producer in [5, u32::MAX, 0x8000_0000] {
            ring.memory().set_producer(producer);
            assert_eq!(ring.ready(), Err(Errno::EIO), "{producer}");
        }
        assert!(ring.memory().reads.borrow().is_empty());
        assert!(ring.memory().consumer_stores.borrow().is_empty());
    }
}
