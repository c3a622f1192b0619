// SPDX-License-Identifier: GPL-2.0

//! Rings shared with user space (`Documentation/rings.md`).
//!
//! The memory comes from `vmalloc_user`, so it is zeroed and may be mapped
//! into user space. For a user-space consumer the ring is published through
//! an `rdma_user_mmap_entry`; the RDMA core then keeps the pages until both
//! the owner has removed the entry and user space has unmapped them.
//!
//! User space may write anything into a mapped ring at any time. This
//! module therefore never forms a Rust reference to ring memory: indices are
//! accessed atomically through raw pointers and slots are copied in and out
//! whole, and slot types must accept any bit pattern ([`Plain`]).

use super::udata::{Plain, UData};
use crate::bindings;
use crate::proto::ring::Geometry;
use crate::uapi::{RingHeader, RING_HEADER_SIZE};
use core::marker::PhantomData;
use core::mem::{offset_of, size_of};
use core::ptr::NonNull;
use core::sync::atomic::{AtomicU32, Ordering};
use kernel::alloc::{flags::GFP_KERNEL, KBox};
use kernel::error::{code::*, to_result, Result};
use kernel::page::PAGE_SIZE;
use kernel::types::Opaque;

/// Zeroed, user-mappable kernel memory.
///
/// # Invariants
///
/// `ptr` is a `vmalloc_user` allocation of `size` bytes, freed on drop.
struct VmallocUser {
    ptr: NonNull<u8>,
    size: usize,
}

impl VmallocUser {
    fn new(size: usize) -> Result<Self> {
        // SAFETY: Plain allocation; NULL is checked below.
        let ptr = unsafe { bindings::roxe_vmalloc_user(size as _) };
        let ptr = NonNull::new(ptr.cast::<u8>()).ok_or(ENOMEM)?;
        Ok(Self { ptr, size })
    }
}

impl Drop for VmallocUser {
    fn drop(&mut self) {
        // SAFETY: By the type invariant `ptr` came from `vmalloc_user`.
        unsafe { bindings::vfree(self.ptr.as_ptr().cast()) };
    }
}

/// Ring memory published to user space through the RDMA core's mmap
/// entries. The core frees it through `mmap_free` once unreferenced.
#[repr(C)]
struct MmapEntry {
    // Must stay first: `mmap_free` recovers the entry from its address.
    entry: Opaque<bindings::rdma_user_mmap_entry>,
    mem: VmallocUser,
}

enum Owner {
    /// Only the kernel uses the ring.
    Kernel(VmallocUser),
    /// Published; the pointer stays valid until `rdma_user_mmap_entry_remove`.
    User(NonNull<MmapEntry>),
}

/// A ring whose slots start with an `S` and are `slot_size` bytes long.
///
/// # Invariants
///
/// `base` points to `size` bytes of ring memory that `owner` keeps alive
/// for the lifetime of `self`; `size` covers the header and every slot;
/// `slot_size` is at least `size_of::<S>()` and a multiple of 8.
pub(crate) struct Ring<S: Plain> {
    owner: Owner,
    base: NonNull<u8>,
    size: usize,
    slot_size: usize,
    geometry: Geometry,
    _p: PhantomData<S>,
}

// SAFETY: The ring is raw shared memory accessed only atomically or by
// whole-slot copies; it can move between and be shared by threads.
unsafe impl<S: Plain> Send for Ring<S> {}
// SAFETY: See `Send`.
unsafe impl<S: Plain> Sync for Ring<S> {}

impl<S: Plain> Ring<S> {
    fn bytes(geometry: Geometry, slot_size: usize) -> Result<usize> {
        if slot_size < size_of::<S>() || slot_size % 8 != 0 {
            return Err(EINVAL);
        }
        geometry
            .mapping_size(RING_HEADER_SIZE, slot_size, PAGE_SIZE)
            .ok_or(EINVAL)
    }

    /// A ring used only inside the kernel, with `slot_size`-byte slots.
    pub(crate) fn new_kernel(geometry: Geometry, slot_size: usize) -> Result<Self> {
        let size = Self::bytes(geometry, slot_size)?;
        let mem = VmallocUser::new(size)?;
        let base = mem.ptr;
        // INVARIANT: `mem` is `size` bytes and owned by `owner`.
        Ok(Self {
            owner: Owner::Kernel(mem),
            base,
            size,
            slot_size,
            geometry,
            _p: PhantomData,
        })
    }

    /// A ring that the process behind `udata` may map.
    pub(crate) fn new_user(
        udata: &UData<'_>,
        geometry: Geometry,
        slot_size: usize,
    ) -> Result<Self> {
        let ctx = udata.ucontext_raw().ok_or(EINVAL)?;
        let size = Self::bytes(geometry, slot_size)?;
        let mem = VmallocUser::new(size)?;
        let base = mem.ptr;
        let entry = KBox::new(
            MmapEntry {
                entry: Opaque::uninit(),
                mem,
            },
            GFP_KERNEL,
        )?;
        let entry = KBox::into_raw(entry);
        // SAFETY: `entry` is a fresh allocation; the core requires the mmap
        // entry to start zeroed before insertion.
        unsafe { core::ptr::write_bytes((*entry).entry.get(), 0, 1) };
        // SAFETY: `ctx` is the caller's live ucontext; `entry` is zeroed and
        // stays allocated until `mmap_free` (after removal) frees it.
        let ret = unsafe { bindings::rdma_user_mmap_entry_insert(ctx, (*entry).entry.get(), size) };
        if let Err(e) = to_result(ret) {
            // SAFETY: Insertion failed, so the core does not know `entry`.
            drop(unsafe { KBox::from_raw(entry) });
            return Err(e);
        }
        // SAFETY: `entry` is non-null (from `KBox::into_raw`).
        let entry = unsafe { NonNull::new_unchecked(entry) };
        // INVARIANT: the inserted entry owns `mem` until we remove it.
        Ok(Self {
            owner: Owner::User(entry),
            base,
            size,
            slot_size,
            geometry,
            _p: PhantomData,
        })
    }

    /// The offset and length user space passes to `mmap`, for a user ring.
    pub(crate) fn mmap_info(&self) -> Option<(u64, u64)> {
        match &self.owner {
            Owner::Kernel(_) => None,
            Owner::User(e) => {
                // SAFETY: The entry is inserted and owned by us until drop.
                let pgoff = unsafe { (*e.as_ref().entry.get()).start_pgoff };
                Some(((pgoff as u64) << kernel::page::PAGE_SHIFT, self.size as u64))
            }
        }
    }

    /// The ring's shape.
    pub(crate) fn geometry(&self) -> Geometry {
        self.geometry
    }

    /// Bytes per slot.
    pub(crate) fn slot_size(&self) -> usize {
        self.slot_size
    }

    fn index(&self, offset: usize) -> &AtomicU32 {
        // SAFETY: `offset` is one of the two header fields, inside the
        // allocation and 4-byte aligned (the allocation is page aligned);
        // the memory lives as long as `self` and is only accessed
        // atomically (or by user space, which the kernel cannot prevent).
        unsafe { AtomicU32::from_ptr(self.base.as_ptr().add(offset).cast::<u32>()) }
    }

    /// The producer index (acquire).
    pub(crate) fn producer(&self) -> u32 {
        self.index(offset_of!(RingHeader, producer))
            .load(Ordering::Acquire)
    }

    /// Publishes the producer index (release).
    pub(crate) fn set_producer(&self, v: u32) {
        self.index(offset_of!(RingHeader, producer))
            .store(v, Ordering::Release)
    }

    /// The consumer index (acquire).
    pub(crate) fn consumer(&self) -> u32 {
        self.index(offset_of!(RingHeader, consumer))
            .load(Ordering::Acquire)
    }

    /// Publishes the consumer index (release).
    pub(crate) fn set_consumer(&self, v: u32) {
        self.index(offset_of!(RingHeader, consumer))
            .store(v, Ordering::Release)
    }

    fn slot_ptr(&self, index: u32) -> *mut u8 {
        let slot = self.geometry.slot(index) as usize;
        // The geometry masks the index, and `size` covers every slot.
        let off = RING_HEADER_SIZE + slot * self.slot_size;
        debug_assert!(off + self.slot_size <= self.size);
        // SAFETY: In bounds of the allocation, as computed above.
        unsafe { self.base.as_ptr().add(off) }
    }

    /// Reads a `U` at byte `offset` within the slot that `index` names, or
    /// `None` if it would not fit inside the slot. User space may have
    /// written anything there; `U` accepts any bits.
    pub(crate) fn read_at<U: Plain>(&self, index: u32, offset: usize) -> Option<U> {
        let end = offset.checked_add(size_of::<U>())?;
        if end > self.slot_size || offset % core::mem::align_of::<U>() != 0 {
            return None;
        }
        // SAFETY: In bounds of the slot (checked above), and aligned: slots
        // start 8-aligned and `offset` is a multiple of `U`'s alignment.
        Some(unsafe { self.slot_ptr(index).add(offset).cast::<U>().read_volatile() })
    }

    /// Copies `dst.len()` bytes at byte `offset` within the slot that `index`
    /// names into `dst`, or returns `None` if they would not fit inside the
    /// slot. User space may be writing the bytes meanwhile; any bits do.
    pub(crate) fn read_bytes(&self, index: u32, offset: usize, dst: &mut [u8]) -> Option<()> {
        let end = offset.checked_add(dst.len())?;
        if end > self.slot_size {
            return None;
        }
        // SAFETY: In bounds of the slot (checked above); bytes need no
        // alignment, and the source is only read through a raw pointer.
        unsafe {
            core::ptr::copy_nonoverlapping(
                self.slot_ptr(index).add(offset),
                dst.as_mut_ptr(),
                dst.len(),
            )
        };
        Some(())
    }

    /// Writes a `U` at byte `offset` within the slot that `index` names, or
    /// returns `None` if it would not fit inside the slot.
    pub(crate) fn write_at<U: Plain>(&self, index: u32, offset: usize, value: U) -> Option<()> {
        let end = offset.checked_add(size_of::<U>())?;
        if end > self.slot_size || offset % core::mem::align_of::<U>() != 0 {
            return None;
        }
        // SAFETY: In bounds of the slot and aligned, as in `read_at`.
        unsafe {
            self.slot_ptr(index)
                .add(offset)
                .cast::<U>()
                .write_volatile(value)
        };
        Some(())
    }

    /// Copies `src` to byte `offset` within the slot that `index` names, or
    /// returns `None` if it would not fit inside the slot.
    pub(crate) fn write_bytes(&self, index: u32, offset: usize, src: &[u8]) -> Option<()> {
        let end = offset.checked_add(src.len())?;
        if end > self.slot_size {
            return None;
        }
        // SAFETY: In bounds of the slot (checked above); bytes need no
        // alignment.
        unsafe {
            core::ptr::copy_nonoverlapping(
                src.as_ptr(),
                self.slot_ptr(index).add(offset),
                src.len(),
            )
        };
        Some(())
    }

    /// Copies a whole slot of `src` into the slot `index` names, or returns
    /// `None` if the two rings' slots differ in size. User space may be
    /// writing the source meanwhile; any bits do.
    pub(crate) fn copy_slot_from(&self, index: u32, src: &Ring<S>, src_index: u32) -> Option<()> {
        if src.slot_size != self.slot_size || core::ptr::eq(self, src) {
            return None;
        }
        // SAFETY: Both slots are in bounds and `slot_size` bytes long; two
        // distinct rings never share memory.
        unsafe {
            core::ptr::copy_nonoverlapping(
                src.slot_ptr(src_index),
                self.slot_ptr(index),
                self.slot_size,
            )
        };
        Some(())
    }

    /// Writes the slot that `index` names.
    pub(crate) fn write(&self, index: u32, value: S) {
        // SAFETY: The slot is in bounds, holds at least an `S`, and is
        // suitably aligned (slots follow a 128-byte header, their size is a
        // multiple of 8, and `S` is at most 8-aligned, see `Plain`).
        unsafe { self.slot_ptr(index).cast::<S>().write_volatile(value) };
    }

    /// Reads the slot that `index` names. User space may have written
    /// anything there; `S` accepts any bits.
    pub(crate) fn read(&self, index: u32) -> S {
        // SAFETY: In bounds and aligned as in `write`; `S: Plain`.
        unsafe { self.slot_ptr(index).cast::<S>().read_volatile() }
    }
}

impl<S: Plain> Drop for Ring<S> {
    fn drop(&mut self) {
        if let Owner::User(e) = &self.owner {
            // SAFETY: The entry is inserted. After this call the core frees
            // it (and the pages) once user space has unmapped them; we never
            // touch it again.
            unsafe { bindings::rdma_user_mmap_entry_remove(e.as_ref().entry.get()) };
        }
    }
}

/// The `mmap` verb: maps a ring published by [`Ring::new_user`].
///
/// # Safety
///
/// Only the RDMA core calls this, through the ops table of a device registered with this type,
/// for the `mmap` verb: every pointer is valid for the call and its objects belong to this
/// driver.
pub(super) unsafe extern "C" fn mmap_cb(
    uctx: *mut bindings::ib_ucontext,
    vma: *mut bindings::vm_area_struct,
) -> kernel::ffi::c_int {
    // SAFETY: The core passes a live ucontext and VMA. The lookup checks
    // that the VMA's offset and length match an inserted entry and takes a
    // reference on it.
    let entry = unsafe { bindings::rdma_user_mmap_entry_get(uctx, vma) };
    if entry.is_null() {
        return EINVAL.to_errno();
    }
    let me = entry.cast::<MmapEntry>();
    // SAFETY: All of roxe's entries are `MmapEntry`s (the `entry` field is
    // first), and the reference keeps it alive. The VMA length equals the
    // entry's, which equals the allocation's.
    let ret = unsafe { bindings::remap_vmalloc_range(vma, (*me).mem.ptr.as_ptr().cast(), 0) };
    // SAFETY: Drops the reference taken by the lookup.
    unsafe { bindings::rdma_user_mmap_entry_put(entry) };
    ret
}

/// The `mmap_free` verb: the core dropped the last reference to an entry.
///
/// # Safety
///
/// Only the RDMA core calls this, through the ops table of a device registered with this type,
/// for the `mmap_free` verb: every pointer is valid for the call and its objects belong to this
/// driver.
pub(super) unsafe extern "C" fn mmap_free_cb(entry: *mut bindings::rdma_user_mmap_entry) {
    // SAFETY: Every entry roxe inserts is a `KBox<MmapEntry>` leaked in
    // `Ring::new_user`; the core calls this once, when nothing uses it.
    drop(unsafe { KBox::from_raw(entry.cast::<MmapEntry>()) });
}
