// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Rings mapped from the verbs command fd: a CQ ring, which the kernel
//! produces, and a work-queue ring (a QP's send or receive queue, an SRQ,
//! or a receive WQ), which user space produces.

use core::ffi::c_int;
use core::ptr::{self, NonNull};
use core::sync::atomic::{AtomicU32, Ordering};

use roxe_uapi::{Cqe, RING_HEADER_SIZE, RingInfo};

use super::{last_errno, mmap, munmap};
use crate::errno::Errno;
use crate::qp::{RECV_WQE_HEADER, RecvQueue};
use crate::ring::{CONSUMER_OFFSET, Geometry, PRODUCER_OFFSET, RingMemory};
use crate::wq::{self, Producer, WqMemory};

/// `PROT_READ`.
const PROT_READ: c_int = 0x1;
/// `PROT_WRITE`.
const PROT_WRITE: c_int = 0x2;
/// `MAP_SHARED`.
const MAP_SHARED: c_int = 0x01;
/// `MAP_FAILED`.
const MAP_FAILED: *mut core::ffi::c_void = usize::MAX as *mut core::ffi::c_void;

/// One mapped ring's memory, unmapped on drop.
///
/// # Invariants
///
/// `base` is the page-aligned start of a live `MAP_SHARED` read-write
/// mapping of `len` bytes that this value owns, and `len` is at least
/// `RING_HEADER_SIZE`. The kernel accesses the two indices in it only
/// atomically.
#[derive(Debug)]
struct Region {
    base: NonNull<u8>,
    len: usize,
}

// SAFETY: a `Region` owns plain shared memory, which any thread may read,
// write and unmap.
unsafe impl Send for Region {}

impl Region {
    /// Maps `len` bytes at `offset` of `fd`.
    ///
    /// Fails with `EPROTO` if `len` cannot hold a ring header, or with
    /// `mmap`'s errno.
    fn map(fd: c_int, offset: i64, len: usize) -> Result<Self, Errno> {
        if len < RING_HEADER_SIZE {
            return Err(Errno::EPROTO);
        }
        // SAFETY: a new shared mapping at an address the kernel picks
        // replaces no existing memory; the length and offset are those the
        // kernel gave (the kernel rejects any it did not).
        let addr = unsafe {
            mmap(
                ptr::null_mut(),
                len,
                PROT_READ | PROT_WRITE,
                MAP_SHARED,
                fd,
                offset,
            )
        };
        if addr == MAP_FAILED {
            return Err(last_errno());
        }
        // `mmap` without `MAP_FIXED` never places a mapping at NULL.
        let base = NonNull::new(addr.cast()).ok_or(Errno::EIO)?;
        // INVARIANT: `mmap` succeeded: `base` starts a fresh page-aligned
        // mapping of `len` bytes, owned by nothing else; `len` was checked.
        Ok(Self { base, len })
    }

    /// The ring index (a `u32`) at byte `offset` of the header.
    fn index(&self, offset: usize) -> &AtomicU32 {
        debug_assert!(offset == PRODUCER_OFFSET || offset == CONSUMER_OFFSET);
        // SAFETY: both index offsets are multiples of 4 below
        // `RING_HEADER_SIZE`, which is inside the mapping (type
        // invariant); `base` is page-aligned, so the `u32` is aligned. The
        // mapping lives as long as `self`, and the kernel accesses the
        // indices only atomically (type invariant), as `from_ptr` requires.
        unsafe { AtomicU32::from_ptr(self.base.as_ptr().add(offset).cast()) }
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: per the type invariant `self` owns this mapping, and
        // nothing borrows from it any more. `munmap` can fail only for
        // arguments that are not a mapping, so its result is not checked.
        unsafe { munmap(self.base.as_ptr().cast(), self.len) };
    }
}

/// A mapped CQ ring.
///
/// # Invariants
///
/// `region` is `geometry.mmap_len()` bytes long.
#[derive(Debug)]
pub(super) struct Mapping {
    region: Region,
    geometry: Geometry,
}

impl Mapping {
    /// Maps the CQ ring `geometry` describes from `fd`.
    pub(super) fn new(fd: c_int, geometry: Geometry) -> Result<Self, Errno> {
        let region = Region::map(fd, geometry.mmap_offset(), geometry.mmap_len())?;
        // INVARIANT: mapped with exactly that length.
        Ok(Self { region, geometry })
    }
}

impl RingMemory for Mapping {
    fn geometry(&self) -> Geometry {
        self.geometry
    }

    fn load_producer(&self) -> u32 {
        self.region.index(PRODUCER_OFFSET).load(Ordering::Acquire)
    }

    fn store_consumer(&self, consumer: u32) {
        self.region
            .index(CONSUMER_OFFSET)
            .store(consumer, Ordering::Release);
    }

    fn read_slot(&self, index: u32) -> Cqe {
        let offset = self.geometry.slot_offset(index);
        // SAFETY: `Geometry` guarantees `offset + size_of::<Cqe>()` is
        // within a mapping of its length, which `region` is (type
        // invariant); `offset` is `RING_HEADER_SIZE` (128) plus a multiple
        // of 64 from a page-aligned base, so the `Cqe` (alignment 8) is
        // aligned. Every bit pattern is a valid `Cqe` (integers only). The
        // read is volatile because the kernel writes this memory outside
        // the program's view; `load_producer`'s acquire ordering made the
        // kernel's writes to published slots visible, and the kernel does
        // not write a slot again before `store_consumer` frees it.
        unsafe {
            self.region
                .base
                .as_ptr()
                .add(offset)
                .cast::<Cqe>()
                .read_volatile()
        }
    }

    fn write_slot(&self, index: u32, cqe: Cqe) {
        let offset = self.geometry.slot_offset(index);
        // SAFETY: In bounds and aligned as for `read_slot`. Per the trait,
        // only published, unconsumed slots are written, which the kernel
        // leaves alone until `store_consumer` frees them.
        unsafe {
            self.region
                .base
                .as_ptr()
                .add(offset)
                .cast::<Cqe>()
                .write_volatile(cqe)
        }
    }
}

/// A mapped work-queue ring.
///
/// # Invariants
///
/// `region` is `geometry.mmap_len()` bytes long.
#[derive(Debug)]
pub(super) struct WqMapping {
    region: Region,
    geometry: wq::Geometry,
}

impl WqMapping {
    /// Maps the work-queue ring `geometry` describes from `fd`.
    pub(super) fn new(fd: c_int, geometry: wq::Geometry) -> Result<Self, Errno> {
        let region = Region::map(fd, geometry.mmap_offset(), geometry.mmap_len())?;
        // INVARIANT: mapped with exactly that length.
        Ok(Self { region, geometry })
    }

    /// The producer index in the ring header: where the kernel left it in
    /// a ring it filled on a resize.
    pub(super) fn load_producer(&self) -> u32 {
        self.region.index(PRODUCER_OFFSET).load(Ordering::Acquire)
    }
}

impl WqMemory for WqMapping {
    fn geometry(&self) -> wq::Geometry {
        self.geometry
    }

    fn load_consumer(&self) -> u32 {
        self.region.index(CONSUMER_OFFSET).load(Ordering::Acquire)
    }

    fn store_producer(&self, producer: u32) {
        self.region
            .index(PRODUCER_OFFSET)
            .store(producer, Ordering::Release);
    }

    fn write_slot(&mut self, index: u32, bytes: &[u8]) {
        let offset = self.geometry.slot_offset(index);
        let len = bytes.len().min(self.geometry.slot_size());
        // SAFETY: `wq::Geometry` guarantees `offset + slot_size` is within
        // a mapping of its length, which `region` is (type invariant), and
        // at most `slot_size` bytes are copied; `bytes` is a separate
        // allocation, so the ranges do not overlap. The slot is free: the
        // producer checked it against the kernel's consumer index (acquire)
        // before writing, and the kernel reads a slot only after the
        // producer index that publishes it, which is stored (release) after
        // this copy.
        unsafe {
            ptr::copy_nonoverlapping(bytes.as_ptr(), self.region.base.as_ptr().add(offset), len);
        }
    }
}

/// Checks the kernel's description of a receive ring (a WQ's or an SRQ's)
/// and maps it, for a queue whose granted SGE limit is `max_sge`.
///
/// Fails with `EPROTO` if the description is invalid or a WQE with
/// `max_sge` SGEs does not fit a slot, and otherwise with `mmap`'s errno.
pub(super) fn map_recv_queue(
    fd: c_int,
    info: &RingInfo,
    max_sge: u32,
) -> Result<RecvQueue<WqMapping>, Errno> {
    let geometry = wq::Geometry::new(info, RECV_WQE_HEADER)?;
    RecvQueue::new(Producer::new(WqMapping::new(fd, geometry)?)?, max_sge)
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::ring::Ring;
    use crate::ring::tests::{cqe, resp};
    use roxe_uapi::{CreateCqResp, RING_HEADER_SIZE};
    use std::fs::{self, File, OpenOptions};
    use std::os::unix::fs::FileExt;
    use std::os::unix::io::AsRawFd;
    use std::sync::atomic::AtomicUsize;

    /// A file standing in for the kernel's side of a ring: the test writes
    /// the producer index and slots with `pwrite`, which shares the page
    /// cache with the mapping.
    pub(in crate::ffi) struct Backing {
        pub(in crate::ffi) file: File,
    }

    impl Backing {
        pub(in crate::ffi) fn new(len: u64) -> Self {
            static NEXT: AtomicUsize = AtomicUsize::new(0);
            let path = std::env::temp_dir().join(format!(
                "roxe-ring-test-{}-{}",
                std::process::id(),
                NEXT.fetch_add(1, Ordering::Relaxed)
            ));
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .open(&path)
                .expect("create ring backing file");
            fs::remove_file(&path).expect("unlink ring backing file");
            file.set_len(len).expect("size ring backing file");
            Self { file }
        }

        pub(in crate::ffi) fn fd(&self) -> c_int {
            self.file.as_raw_fd()
        }

        pub(in crate::ffi) fn set_producer(&self, producer: u32) {
            self.file
                .write_at(&producer.to_ne_bytes(), PRODUCER_OFFSET as u64)
                .expect("write producer");
        }

        pub(in crate::ffi) fn consumer(&self) -> u32 {
            let mut bytes = [0; 4];
            self.file
                .read_exact_at(&mut bytes, CONSUMER_OFFSET as u64)
                .expect("read consumer");
            u32::from_ne_bytes(bytes)
        }

        pub(in crate::ffi) fn producer(&self) -> u32 {
            let mut bytes = [0; 4];
            self.file
                .read_exact_at(&mut bytes, PRODUCER_OFFSET as u64)
                .expect("read producer");
            u32::from_ne_bytes(bytes)
        }

        pub(in crate::ffi) fn set_consumer(&self, consumer: u32) {
            self.file
                .write_at(&consumer.to_ne_bytes(), CONSUMER_OFFSET as u64)
                .expect("write consumer");
        }

        pub(in crate::ffi) fn read_at(&self, offset: u64, len: usize) -> Vec<u8> {
            let mut bytes = vec![0; len];
            self.file
                .read_exact_at(&mut bytes, offset)
                .expect("read ring bytes");
            bytes
        }

        pub(in crate::ffi) fn write_slot(&self, slot: u32, cqe: &Cqe) {
            let c = cqe;
            let mut bytes = Vec::with_capacity(64);
            bytes.extend_from_slice(&c.wr_id.to_ne_bytes());
            for v in [
                c.status,
                c.opcode,
                c.vendor_err,
                c.byte_len,
                c.imm_data,
                c.qp_num,
                c.src_qp,
                c.wc_flags,
            ] {
                bytes.extend_from_slice(&v.to_ne_bytes());
            }
            bytes.extend_from_slice(&c.pkey_index.to_ne_bytes());
            bytes.extend_from_slice(&c.slid.to_ne_bytes());
            bytes.extend_from_slice(&[c.sl, c.dlid_path_bits, c.port_num, 0]);
            bytes.resize(64, 0);
            let offset = RING_HEADER_SIZE as u64 + u64::from(slot) * 64;
            self.file.write_at(&bytes, offset).expect("write slot");
        }
    }

    /// A ring description for a file-backed mapping at offset 0.
    pub(in crate::ffi) fn file_resp(num_slots: u32, len: u64) -> CreateCqResp {
        CreateCqResp {
            mmap_offset: 0,
            ..resp(num_slots, len)
        }
    }

    #[test]
    fn reads_what_the_producer_wrote_and_publishes_the_consumer() {
        let backing = Backing::new(4096);
        let geometry = Geometry::new(&file_resp(8, 4096)).expect("valid");
        let mapping = Mapping::new(backing.fd(), geometry).expect("mmap");
        assert_eq!(mapping.load_producer(), 0);

        // Slot 7 is the last one; index 15 names it again.
        backing.write_slot(7, &cqe(7));
        backing.set_producer(3);
        assert_eq!(mapping.load_producer(), 3);
        assert_eq!(mapping.read_slot(7), cqe(7));
        assert_eq!(mapping.read_slot(15), cqe(7));
        assert_eq!(mapping.read_slot(u32::MAX), cqe(7));

        mapping.store_consumer(0xdead_beef);
        assert_eq!(backing.consumer(), 0xdead_beef);
    }

    #[test]
    fn a_ring_over_a_mapping_polls_in_order() {
        let backing = Backing::new(4096);
        let geometry = Geometry::new(&file_resp(4, 4096)).expect("valid");
        let mut ring = Ring::new(Mapping::new(backing.fd(), geometry).expect("mmap"));
        for n in 0..4 {
            backing.write_slot(n, &cqe(n));
        }
        backing.set_producer(4);
        assert_eq!(ring.ready(), Ok(4));
        for n in 0..4 {
            assert_eq!(ring.peek(), cqe(n));
            ring.consume();
            assert_eq!(backing.consumer(), n + 1);
        }
        backing.set_producer(9);
        assert_eq!(ring.ready(), Err(Errno::EIO));
    }

    #[test]
    fn a_work_queue_mapping_writes_slots_and_publishes_the_producer() {
        use crate::wq::{Geometry as WqGeometry, Producer};
        let backing = Backing::new(4096);
        let info = roxe_uapi::RingInfo {
            mmap_offset: 0,
            mmap_size: 4096,
            num_slots: 4,
            slot_size: 128,
        };
        let geometry = WqGeometry::new(&info, 72).expect("valid");
        let mut p =
            Producer::new(WqMapping::new(backing.fd(), geometry).expect("mmap")).expect("producer");
        for n in 0..4u8 {
            p.push(|out| {
                out[..100].fill(n + 1);
                Ok(100)
            })
            .expect("room");
        }
        assert_eq!(backing.producer(), 0, "nothing is visible before publish");
        assert!(p.publish());
        assert_eq!(backing.producer(), 4);
        for n in 0..4u8 {
            let slot = backing.read_at(RING_HEADER_SIZE as u64 + u64::from(n) * 128, 128);
            assert_eq!(slot[..100], [n + 1; 100]);
            assert_eq!(slot[100..], [0; 28], "slot {n}: written past the WQE");
        }
        let full = p.push(|_| Ok(0));
        assert_eq!(full, Err(Errno::ENOMEM));
        // The kernel consumed three: the producer wraps to slot 0.
        backing.set_consumer(3);
        p.push(|out| {
            out[..4].fill(9);
            Ok(4)
        })
        .expect("room");
        p.publish();
        assert_eq!(backing.producer(), 5);
        assert_eq!(backing.read_at(RING_HEADER_SIZE as u64, 5), [9, 9, 9, 9, 1]);
        // A consumer index the kernel cannot have written.
        backing.set_consumer(6);
        assert_eq!(p.push(|_| Ok(0)), Err(Errno::EIO));
    }

    #[test]
    fn mapping_failure_reports_errno() {
        let geometry = Geometry::new(&file_resp(4, 4096)).expect("valid");
        assert_eq!(
            Mapping::new(-1, geometry).map(|_| ()),
            Err(Errno::from_raw(9))
        );
    }
}
