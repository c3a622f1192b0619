//! The rings roxe shares with user space (`Documentation/rings.md`), seen
//! from the user's side: a `RingHeader`, then `num_slots` slots. Slots are
//! found with the index arithmetic the kernel module uses
//! (`roxe_proto::ring`).

use crate::abi;
use crate::errno::Errno;
use crate::sys::{Mapping, Share};
use crate::uverbs::Verbs;
use roxe_proto::ring::Geometry;
use roxe_uapi::{Cqe, RING_HEADER_SIZE};
use std::time::{Duration, Instant};

/// A mapped ring.
pub struct Ring {
    map: Mapping,
    geometry: Geometry,
    slot_size: usize,
}

impl Ring {
    /// Maps the ring at `offset` (`len` bytes) of `num_slots` slots of
    /// `slot_size` bytes. Fails if the kernel's numbers do not describe a
    /// ring that fits the mapping.
    pub fn map(
        v: &Verbs,
        offset: u64,
        len: u64,
        num_slots: u32,
        slot_size: u32,
    ) -> Result<Ring, Errno> {
        let len = usize::try_from(len).map_err(|_| Errno(libc::EOVERFLOW))?;
        let slot_size = usize::try_from(slot_size).map_err(|_| Errno(libc::EOVERFLOW))?;
        let geometry = Geometry::from_slots(num_slots).ok_or(Errno(libc::ERANGE))?;
        let need = geometry.ring_size(RING_HEADER_SIZE, slot_size);
        if need.is_none_or(|n| n > len) {
            return Err(Errno(libc::ERANGE));
        }
        let map = v.mmap(offset, len, Share::Shared)?;
        Ok(Ring {
            map,
            geometry,
            slot_size,
        })
    }

    /// The mapping under the ring.
    pub fn mapping(&self) -> &Mapping {
        &self.map
    }

    /// Unmaps the ring.
    pub fn unmap(self) -> Result<(), Errno> {
        self.map.unmap()
    }

    pub fn num_slots(&self) -> u32 {
        self.geometry.num_slots()
    }

    pub fn slot_size(&self) -> usize {
        self.slot_size
    }

    pub fn producer(&self) -> u32 {
        self.map.load_acquire(abi::PRODUCER)
    }

    pub fn consumer(&self) -> u32 {
        self.map.load_acquire(abi::CONSUMER)
    }

    pub fn set_producer(&self, v: u32) {
        self.map.store_release(abi::PRODUCER, v)
    }

    pub fn set_consumer(&self, v: u32) {
        self.map.store_release(abi::CONSUMER, v)
    }

    fn slot_offset(&self, index: u32) -> usize {
        // `map` checked that the ring's size fits the mapping.
        self.geometry
            .slot_offset(RING_HEADER_SIZE, self.slot_size, index)
    }

    /// Writes `data` at the start of the slot that `index` names.
    pub fn write_slot(&self, index: u32, data: &[u8]) {
        assert!(
            data.len() <= self.slot_size,
            "{} bytes do not fit a {}-byte slot",
            data.len(),
            self.slot_size
        );
        self.map.write(self.slot_offset(index), data);
    }

    /// Reads the whole slot that `index` names.
    pub fn read_slot(&self, index: u32) -> Vec<u8> {
        let mut v = vec![0u8; self.slot_size];
        self.map.read(self.slot_offset(index), &mut v);
        v
    }

    /// The whole mapping's bytes.
    pub fn snapshot(&self) -> Vec<u8> {
        let mut v = vec![0u8; self.map.len()];
        self.map.read(0, &mut v);
        v
    }

    /// Overwrites the whole mapping, header included.
    pub fn overwrite(&self, bytes: &[u8]) {
        self.map.write(0, bytes);
    }
}

/// A CQ ring, polled as the provider would.
pub struct CqRing(pub Ring);

impl CqRing {
    /// Completions the kernel published and we have not consumed.
    pub fn pending(&self) -> u32 {
        self.0.producer().wrapping_sub(self.0.consumer())
    }

    /// Takes one completion, if there is one.
    pub fn poll(&self) -> Option<Cqe> {
        let c = self.0.consumer();
        if self.0.producer() == c {
            return None;
        }
        let cqe = abi::cqe(&self.0.read_slot(c));
        self.0.set_consumer(c.wrapping_add(1));
        Some(cqe)
    }

    /// Polls until `n` completions have arrived or `timeout` has passed,
    /// then takes whatever else is already there (at most a ring's worth),
    /// so that extra completions are seen too.
    pub fn collect(&self, n: usize, timeout: Duration) -> Vec<Cqe> {
        let start = Instant::now();
        let mut v = Vec::new();
        // TIMEOUT: bounded by `timeout`; the kernel produces flush
        // completions synchronously, so this normally returns at once.
        while v.len() < n && start.elapsed() < timeout {
            match self.poll() {
                Some(c) => v.push(c),
                None => std::thread::sleep(Duration::from_millis(1)),
            }
        }
        for _ in 0..self.0.num_slots() {
            match self.poll() {
                Some(c) => v.push(c),
                None => break,
            }
        }
        v
    }

    /// Waits a moment and returns everything that arrived.
    pub fn settle(&self) -> Vec<Cqe> {
        std::thread::sleep(Duration::from_millis(20));
        self.collect(0, Duration::ZERO)
    }
}
