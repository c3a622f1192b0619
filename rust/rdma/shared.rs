// SPDX-License-Identifier: GPL-2.0

//! Memory shared with user space: [`SharedMem`], what a driver builds its
//! queues on (roxe's rings: `drivers/infiniband/sw/roxe/ring.rs`,
//! `Documentation/rings.md`). Nothing here knows a ring format.
//!
//! The memory comes from `vmalloc_user`, so it is zeroed and may be mapped
//! into user space. For a user-space consumer it is published through an
//! `rdma_user_mmap_entry`; the RDMA core then keeps the pages until both
//! the owner has removed the entry and user space has unmapped them.
//!
//! User space may write anything into mapped memory at any time. This
//! module therefore never forms a Rust reference to it: 32-bit words are
//! accessed atomically through raw pointers, values are copied in and out
//! whole, and their types must accept any bit pattern ([`Plain`]). Every
//! access is checked against the size and the value's alignment.

use super::udata::{Plain, UData};
use crate::bindings;
use core::mem::{align_of, size_of};
use core::ptr::NonNull;
use core::sync::atomic::{AtomicU32, Ordering};
use kernel::alloc::{flags::GFP_KERNEL, KBox};
use kernel::error::{code::*, to_result, Result};
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

/// Memory published to user space through the RDMA core's mmap
/// entries. The core frees it through `mmap_free` once unreferenced.
#[repr(C)]
struct MmapEntry {
    // Must stay first: `mmap_free` recovers the entry from its address.
    entry: Opaque<bindings::rdma_user_mmap_entry>,
    mem: VmallocUser,
}

enum Owner {
    /// Only the kernel uses the memory.
    Kernel(VmallocUser),
    /// Published; the pointer stays valid until `rdma_user_mmap_entry_remove`.
    User(NonNull<MmapEntry>),
}

/// Zeroed memory that the kernel, and user space if published, share.
///
/// # Invariants
///
/// `base` points to `size` bytes of `vmalloc_user` memory (page-aligned)
/// that `owner` keeps alive for the lifetime of `self`.
pub(crate) struct SharedMem {
    owner: Owner,
    base: NonNull<u8>,
    size: usize,
}

// SAFETY: The memory is accessed only atomically or by whole-value copies
// through raw pointers; it can move between and be shared by threads.
unsafe impl Send for SharedMem {}
// SAFETY: See `Send`.
unsafe impl Sync for SharedMem {}

impl SharedMem {
    /// `size` bytes used only inside the kernel.
    pub(crate) fn new_kernel(size: usize) -> Result<Self> {
        let mem = VmallocUser::new(size)?;
        let base = mem.ptr;
        // INVARIANT: `mem` is `size` bytes and lives as long as `self`.
        Ok(Self {
            owner: Owner::Kernel(mem),
            base,
            size,
        })
    }

    /// `size` bytes that the process behind `udata` may map.
    pub(crate) fn new_user(udata: &UData<'_>, size: usize) -> Result<Self> {
        let ctx = udata.ucontext_raw().ok_or(EINVAL)?;
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
        })
    }

    /// The offset and length user space passes to `mmap`, if published.
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

    /// The size in bytes.
    pub(crate) fn len(&self) -> usize {
        self.size
    }

    /// A pointer to the `len` bytes at `offset`, if they are inside and
    /// `offset` is a multiple of `align` (which is not zero).
    fn at(&self, offset: usize, len: usize, align: usize) -> Option<*mut u8> {
        let end = offset.checked_add(len)?;
        // `checked_rem`: no division-by-zero panic path, which objtool
        // would see as a call that returns.
        if end > self.size || offset.checked_rem(align) != Some(0) {
            return None;
        }
        // SAFETY: `offset` is within the allocation (checked above).
        Some(unsafe { self.base.as_ptr().add(offset) })
    }

    /// The 32-bit word at `offset`, loaded with acquire ordering, or
    /// `None` if it is outside or misaligned.
    pub(crate) fn load_u32(&self, offset: usize) -> Option<u32> {
        let p = self.at(offset, 4, 4)?;
        // SAFETY: In bounds and 4-aligned (the base is page-aligned); only
        // atomic accesses are made to these words from the kernel, and user
        // space's plain stores are the usual shared-memory contract.
        Some(unsafe { AtomicU32::from_ptr(p.cast::<u32>()) }.load(Ordering::Acquire))
    }

    /// Stores `v` at `offset` with release ordering; `None` if outside or
    /// misaligned.
    pub(crate) fn store_u32(&self, offset: usize, v: u32) -> Option<()> {
        let p = self.at(offset, 4, 4)?;
        // SAFETY: As in `load_u32`.
        unsafe { AtomicU32::from_ptr(p.cast::<u32>()) }.store(v, Ordering::Release);
        Some(())
    }

    /// Reads a `U` at `offset`, or `None` if it is outside or misaligned.
    /// User space may have written anything there; `U` accepts any bits.
    pub(crate) fn read<U: Plain>(&self, offset: usize) -> Option<U> {
        let p = self.at(offset, size_of::<U>(), align_of::<U>())?;
        // SAFETY: In bounds and aligned (checked above); `U: Plain`.
        Some(unsafe { p.cast::<U>().read_volatile() })
    }

    /// Writes `value` at `offset`; `None` if outside or misaligned. A plain
    /// (volatile, not atomic) store: callers keep it off the words they
    /// access with [`SharedMem::load_u32`] and [`SharedMem::store_u32`], as
    /// roxe's rings keep slots and indices apart.
    pub(crate) fn write<U: Plain>(&self, offset: usize, value: U) -> Option<()> {
        let p = self.at(offset, size_of::<U>(), align_of::<U>())?;
        // SAFETY: In bounds and aligned (checked above).
        unsafe { p.cast::<U>().write_volatile(value) };
        Some(())
    }

    /// Copies the `dst.len()` bytes at `offset` into `dst`; `None` if they
    /// are outside. User space may be writing them meanwhile; any bits do.
    pub(crate) fn read_bytes(&self, offset: usize, dst: &mut [u8]) -> Option<()> {
        let p = self.at(offset, dst.len(), 1)?;
        // SAFETY: In bounds (checked above); bytes need no alignment, and
        // `dst` is ours, so the ranges do not overlap.
        unsafe { core::ptr::copy_nonoverlapping(p, dst.as_mut_ptr(), dst.len()) };
        Some(())
    }

    /// Copies `len` bytes at `src_offset` of `src`, another object, to
    /// `offset`; `None` if either range is outside or `src` is `self`.
    pub(crate) fn copy_from(
        &self,
        offset: usize,
        src: &SharedMem,
        src_offset: usize,
        len: usize,
    ) -> Option<()> {
        if core::ptr::eq(self, src) {
            return None;
        }
        let to = self.at(offset, len, 1)?;
        let from = src.at(src_offset, len, 1)?;
        // SAFETY: Both ranges are in bounds (checked above), and distinct
        // objects never share memory.
        unsafe { core::ptr::copy_nonoverlapping(from, to, len) };
        Some(())
    }
}

impl Drop for SharedMem {
    fn drop(&mut self) {
        if let Owner::User(e) = &self.owner {
            // SAFETY: The entry is inserted. After this call the core frees
            // it (and the pages) once user space has unmapped them; we never
            // touch it again.
            unsafe { bindings::rdma_user_mmap_entry_remove(e.as_ref().entry.get()) };
        }
    }
}

/// The `mmap` verb: maps memory published by [`SharedMem::new_user`].
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
    // `SharedMem::new_user`; the core calls this once, when nothing uses it.
    drop(unsafe { KBox::from_raw(entry.cast::<MmapEntry>()) });
}
