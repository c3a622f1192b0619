// SPDX-License-Identifier: GPL-2.0

//! Pinned user memory (`struct ib_umem`).

use super::device::{Device, Driver};
use crate::bindings;
use core::ptr::NonNull;
use kernel::alloc::{flags::GFP_KERNEL, KVec};
use kernel::error::{code::*, Error, Result};

/// A page of pinned user memory, as the data path will address it.
///
/// # Invariants
///
/// Points to a `struct page` pinned by the [`Umem`] it came from, for as
/// long as that `Umem` lives.
#[derive(Clone, Copy)]
pub(crate) struct PinnedPage(NonNull<bindings::page>);

// SAFETY: A pinned page may be used from any thread.
unsafe impl Send for PinnedPage {}
// SAFETY: As above.
unsafe impl Sync for PinnedPage {}

/// User memory pinned with `ib_umem_get`; released on drop.
///
/// # Invariants
///
/// `raw` is a live umem returned by `ib_umem_get`.
pub(crate) struct Umem {
    raw: NonNull<bindings::ib_umem>,
}

// SAFETY: The umem is only read after creation and released once.
unsafe impl Send for Umem {}
// SAFETY: As above.
unsafe impl Sync for Umem {}

impl Umem {
    /// Pins `len` bytes at user address `addr` of the calling process with
    /// `IB_ACCESS_*` rights `access` (writable pages for any write right).
    pub(crate) fn get<T: Driver>(dev: &Device<T>, addr: u64, len: u64, access: u32) -> Result<Self> {
        let len = usize::try_from(len).map_err(|_| EINVAL)?;
        let addr = kernel::ffi::c_ulong::try_from(addr).map_err(|_| EINVAL)?;
        // SAFETY: The device is valid; `ib_umem_get` validates the range
        // against the caller's address space and returns an `ERR_PTR` on
        // failure.
        let raw = unsafe { bindings::ib_umem_get(dev.as_raw(), addr, len, access as i32) };
        let v = raw as isize;
        if (-4095..0).contains(&v) {
            // CAST: within the errno range checked above.
            return Err(Error::from_errno(v as i32));
        }
        let raw = NonNull::new(raw).ok_or(ENOMEM)?;
        // INVARIANT: a live umem from `ib_umem_get`.
        Ok(Self { raw })
    }

    /// Offset of the first byte into the first page.
    pub(crate) fn offset(&self) -> usize {
        // SAFETY: The umem is live.
        unsafe { bindings::roxe_umem_offset(self.raw.as_ptr()) }
    }

    /// The pinned pages, in address order.
    pub(crate) fn pages(&self) -> Result<KVec<PinnedPage>> {
        // SAFETY: The umem is live.
        let n = unsafe { bindings::roxe_umem_num_pages(self.raw.as_ptr()) };
        let mut v: KVec<*mut bindings::page> = KVec::with_capacity(n, GFP_KERNEL)?;
        // SAFETY: `v` has room for `n` pointers; the helper writes at most
        // `n` and returns how many.
        let got = unsafe { bindings::roxe_umem_pages(self.raw.as_ptr(), v.as_mut_ptr(), n) };
        // SAFETY: The helper initialised the first `got <= n` elements.
        unsafe { v.set_len(got.min(n)) };
        let mut out = KVec::with_capacity(v.len(), GFP_KERNEL)?;
        for p in v.iter() {
            // INVARIANT: pinned by this umem.
            out.push(PinnedPage(NonNull::new(*p).ok_or(EFAULT)?), GFP_KERNEL)?;
        }
        Ok(out)
    }
}

impl Drop for Umem {
    fn drop(&mut self) {
        // SAFETY: By the type invariant; unpins the pages.
        unsafe { bindings::ib_umem_release(self.raw.as_ptr()) };
    }
}
