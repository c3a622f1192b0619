// SPDX-License-Identifier: GPL-2.0

//! roxe's rings (`Documentation/rings.md`): a header with the producer and
//! consumer indices (`uapi::RingHeader`), then a power-of-two number of
//! fixed-size slots, in memory shared with user space for user objects
//! (`rdma::shared::SharedMem`). The send and receive queues, SRQs and CQs
//! are rings; libroxe reads and writes the same layout. User space may
//! write anything into a mapped ring at any time: every slot is copied in
//! or out whole, each access stays inside its slot, and slot types accept
//! any bits (`Plain`).

use crate::proto::ring::Geometry;
use crate::rdma::shared::SharedMem;
use crate::rdma::udata::{Plain, UData};
use crate::uapi::{RingHeader, RING_HEADER_SIZE};
use core::marker::PhantomData;
use core::mem::{offset_of, size_of};
use kernel::error::code::EINVAL;
use kernel::page::PAGE_SIZE;
use kernel::prelude::*;

/// A ring whose slots start with an `S` and are `slot_size` bytes long.
///
/// Its memory covers the header and every slot, and `slot_size` is at
/// least `size_of::<S>()` and a multiple of 8 (checked when it is made),
/// so every slot access below is in bounds and aligned; `SharedMem` checks
/// each one again.
pub(crate) struct Ring<S: Plain> {
    mem: SharedMem,
    slot_size: usize,
    geometry: Geometry,
    _p: PhantomData<S>,
}

impl<S: Plain> Ring<S> {
    fn bytes(geometry: Geometry, slot_size: usize) -> Result<usize> {
        if slot_size < size_of::<S>() || slot_size % 8 != 0 {
            return Err(EINVAL);
        }
        geometry
            .mapping_size(RING_HEADER_SIZE, slot_size, PAGE_SIZE)
            .ok_or(EINVAL)
    }

    fn with(mem: SharedMem, geometry: Geometry, slot_size: usize) -> Self {
        Self {
            mem,
            slot_size,
            geometry,
            _p: PhantomData,
        }
    }

    /// A ring used only inside the kernel, with `slot_size`-byte slots.
    pub(crate) fn new_kernel(geometry: Geometry, slot_size: usize) -> Result<Self> {
        let mem = SharedMem::new_kernel(Self::bytes(geometry, slot_size)?)?;
        Ok(Self::with(mem, geometry, slot_size))
    }

    /// A ring that the process behind `udata` may map.
    pub(crate) fn new_user(
        udata: &UData<'_>,
        geometry: Geometry,
        slot_size: usize,
    ) -> Result<Self> {
        let mem = SharedMem::new_user(udata, Self::bytes(geometry, slot_size)?)?;
        Ok(Self::with(mem, geometry, slot_size))
    }

    /// The offset and length user space passes to `mmap`, for a user ring.
    pub(crate) fn mmap_info(&self) -> Option<(u64, u64)> {
        self.mem.mmap_info()
    }

    /// The ring's shape.
    pub(crate) fn geometry(&self) -> Geometry {
        self.geometry
    }

    /// Bytes per slot.
    pub(crate) fn slot_size(&self) -> usize {
        self.slot_size
    }

    /// The producer index (acquire).
    pub(crate) fn producer(&self) -> u32 {
        let at = offset_of!(RingHeader, producer);
        self.mem.load_u32(at).unwrap_or(0)
    }

    /// Publishes the producer index (release).
    pub(crate) fn set_producer(&self, v: u32) {
        let _ = self.mem.store_u32(offset_of!(RingHeader, producer), v);
    }

    /// The consumer index (acquire).
    pub(crate) fn consumer(&self) -> u32 {
        let at = offset_of!(RingHeader, consumer);
        self.mem.load_u32(at).unwrap_or(0)
    }

    /// Publishes the consumer index (release).
    pub(crate) fn set_consumer(&self, v: u32) {
        let _ = self.mem.store_u32(offset_of!(RingHeader, consumer), v);
    }

    /// Where the slot that `index` names starts (the geometry masks the
    /// index).
    fn slot(&self, index: u32) -> usize {
        RING_HEADER_SIZE + self.geometry.slot(index) as usize * self.slot_size
    }

    /// `offset` within a slot, if `len` bytes there stay inside it.
    fn inside(&self, offset: usize, len: usize) -> Option<usize> {
        (offset.checked_add(len)? <= self.slot_size).then_some(offset)
    }

    /// Reads a `U` at byte `offset` within the slot that `index` names, or
    /// `None` if it would not fit inside the slot or is misaligned. User
    /// space may have written anything there; `U` accepts any bits.
    pub(crate) fn read_at<U: Plain>(&self, index: u32, offset: usize) -> Option<U> {
        let offset = self.inside(offset, size_of::<U>())?;
        self.mem.read(self.slot(index) + offset)
    }

    /// Copies `dst.len()` bytes at byte `offset` within the slot that
    /// `index` names into `dst`, or returns `None` if they would not fit
    /// inside the slot.
    pub(crate) fn read_bytes(&self, index: u32, offset: usize, dst: &mut [u8]) -> Option<()> {
        let offset = self.inside(offset, dst.len())?;
        self.mem.read_bytes(self.slot(index) + offset, dst)
    }

    /// Writes a `U` at byte `offset` within the slot that `index` names, or
    /// returns `None` if it would not fit inside the slot or is misaligned.
    pub(crate) fn write_at<U: Plain>(&self, index: u32, offset: usize, value: U) -> Option<()> {
        let offset = self.inside(offset, size_of::<U>())?;
        self.mem.write(self.slot(index) + offset, value)
    }

    /// Copies slot `src_index` of `src`, another ring with slots of the
    /// same size, whole into slot `index`.
    pub(crate) fn copy_slot_from(&self, index: u32, src: &Ring<S>, src_index: u32) -> Option<()> {
        if src.slot_size != self.slot_size {
            return None;
        }
        let (to, from) = (self.slot(index), src.slot(src_index));
        self.mem.copy_from(to, &src.mem, from, self.slot_size)
    }

    /// Writes the slot that `index` names.
    pub(crate) fn write(&self, index: u32, value: S) {
        let _ = self.mem.write(self.slot(index), value);
    }

    /// Reads the slot that `index` names. User space may have written
    /// anything there; `S` accepts any bits.
    pub(crate) fn read(&self, index: u32) -> S {
        self.mem.read(self.slot(index)).unwrap_or_else(S::zeroed)
    }
}
