// SPDX-License-Identifier: GPL-2.0

//! Pinned user memory (`struct ib_umem`).

use super::device::{Device, Driver};
use crate::bindings;
use core::ptr::NonNull;
use kernel::alloc::{flags::GFP_KERNEL_ACCOUNT, KVec};
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
    pub(crate) fn get<T: Driver>(
        dev: &Device<T>,
        addr: u64,
        len: u64,
        access: u32,
    ) -> Result<Self> {
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

    /// Whether the pages were pinned for writing (`FOLL_WRITE`): `ib_umem_get`
    /// decides this once, from the access rights it was given, and the pin
    /// never changes afterwards. Pages pinned read-only may belong to a file
    /// the caller cannot write; nothing may ever write to them.
    pub(crate) fn writable(&self) -> bool {
        // SAFETY: The umem is live; `ib_umem_get` set the `writable` bit
        // before returning it and nothing changes it later.
        unsafe { (*self.raw.as_ptr()).writable() != 0 }
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
        // Sized by the caller's MR: charged to its memory cgroup.
        let mut v: KVec<*mut bindings::page> = KVec::with_capacity(n, GFP_KERNEL_ACCOUNT)?;
        // SAFETY: `v` has room for `n` pointers; the helper writes at most
        // `n` and returns how many.
        let got = unsafe { bindings::roxe_umem_pages(self.raw.as_ptr(), v.as_mut_ptr(), n) };
        // SAFETY: The helper initialised the first `got <= n` elements.
        unsafe { v.set_len(got.min(n)) };
        let mut out = KVec::with_capacity(v.len(), GFP_KERNEL_ACCOUNT)?;
        for p in v.iter() {
            // INVARIANT: pinned by this umem.
            out.push(
                PinnedPage(NonNull::new(*p).ok_or(EFAULT)?),
                GFP_KERNEL_ACCOUNT,
            )?;
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

/// The bytes of pinned user memory, addressed from the first byte of the
/// registration. Owns the pin.
///
/// # Invariants
///
/// `pages` are the pages `umem` pinned, in address order, and the range
/// `offset..offset + len` lies within them.
pub(crate) struct PinnedRange {
    umem: Umem,
    pages: KVec<PinnedPage>,
    offset: usize,
    len: usize,
}

const PAGE: usize = kernel::page::PAGE_SIZE;

impl PinnedRange {
    /// Takes the pages of `umem`, which pinned `len` bytes.
    pub(crate) fn new(umem: Umem, len: u64) -> Result<Self> {
        let pages = umem.pages()?;
        let offset = umem.offset();
        let len = usize::try_from(len).map_err(|_| EINVAL)?;
        let end = offset.checked_add(len).ok_or(EINVAL)?;
        if end > pages.len().checked_mul(PAGE).ok_or(EINVAL)? {
            return Err(EFAULT);
        }
        // INVARIANT: checked just above.
        Ok(Self {
            umem,
            pages,
            offset,
            len,
        })
    }

    /// Length in bytes.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Whether the pages were pinned for writing ([`Umem::writable`]).
    pub(crate) fn writable(&self) -> bool {
        self.umem.writable()
    }

    /// Calls `f(page, offset in page, bytes)` for each page piece of
    /// `off..off + n`, after checking the range is inside the registration.
    fn pieces(
        &self,
        off: usize,
        n: usize,
        mut f: impl FnMut(PinnedPage, usize, usize, usize),
    ) -> Result {
        let end = off.checked_add(n).ok_or(EFAULT)?;
        if end > self.len {
            return Err(EFAULT);
        }
        let mut pos = self.offset + off;
        let mut done = 0;
        while done < n {
            let in_page = pos % PAGE;
            let chunk = (PAGE - in_page).min(n - done);
            // By the invariant, `pos / PAGE` indexes a pinned page.
            let page = *self.pages.get(pos / PAGE).ok_or(EFAULT)?;
            f(page, in_page, chunk, done);
            pos += chunk;
            done += chunk;
        }
        Ok(())
    }

    /// Copies `src` into the registration at byte `off`.
    pub(crate) fn write(&self, off: usize, src: &[u8]) -> Result {
        self.pieces(off, src.len(), |page, in_page, chunk, done| {
            // SAFETY: The page is pinned while `self` lives; the mapping is
            // released before the next one is made; `in_page + chunk` stays
            // within the page and `done + chunk` within `src`. User space may
            // access the page at the same time, as with any RDMA write;
            // bytes are copied through raw pointers, never references to it.
            unsafe {
                let va = bindings::roxe_kmap_local_page(page.0.as_ptr()).cast::<u8>();
                core::ptr::copy_nonoverlapping(src.as_ptr().add(done), va.add(in_page), chunk);
                bindings::roxe_kunmap_local(va.cast());
            }
        })
    }

    /// Copies bytes from the registration at `off` into `dst`.
    pub(crate) fn read(&self, off: usize, dst: &mut [u8]) -> Result {
        let out = dst.as_mut_ptr();
        self.pieces(off, dst.len(), |page, in_page, chunk, done| {
            // SAFETY: As in `write`, with the copy in the other direction
            // into `dst`, which has room for `done + chunk` bytes.
            unsafe {
                let va = bindings::roxe_kmap_local_page(page.0.as_ptr()).cast::<u8>();
                core::ptr::copy_nonoverlapping(va.add(in_page), out.add(done), chunk);
                bindings::roxe_kunmap_local(va.cast());
            }
        })
    }
}
