// SPDX-License-Identifier: GPL-2.0

//! Memory an MR keeps resident for the data path: user memory pinned with
//! `ib_umem_get` (`struct ib_umem`), or a dma-buf another driver exported,
//! mapped into the kernel with `dma_buf_vmap`.

use super::device::{Device, Driver};
use crate::bindings;
use core::ffi::c_void;
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

/// What keeps a [`PinnedRange`]'s pages resident.
enum Pin {
    User(Umem),
    DmaBuf(DmaBuf),
}

/// The bytes of pinned memory, addressed from the first byte of the
/// registration. Owns the pin.
///
/// # Invariants
///
/// `pages` are pages that `pin` keeps resident, in address order, and the
/// range `offset..offset + len` lies within them.
pub(crate) struct PinnedRange {
    pin: Pin,
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
            pin: Pin::User(umem),
            pages,
            offset,
            len,
        })
    }

    /// Takes `len` bytes of the mapped dma-buf `buf`, from byte `offset`.
    pub(crate) fn from_dmabuf(buf: DmaBuf, offset: u64, len: u64) -> Result<Self> {
        let offset = usize::try_from(offset).map_err(|_| EINVAL)?;
        let len = usize::try_from(len).map_err(|_| EINVAL)?;
        let end = offset.checked_add(len).ok_or(EINVAL)?;
        if len == 0 || end > buf.size() {
            return Err(EINVAL);
        }
        let first = offset / PAGE;
        let count = end.div_ceil(PAGE) - first;
        let pages = buf.pages(first, count)?;
        // INVARIANT: `pages` are the `count` pages from the one holding
        // byte `offset` to the one holding byte `end - 1`.
        Ok(Self {
            pin: Pin::DmaBuf(buf),
            pages,
            offset: offset % PAGE,
            len,
        })
    }

    /// Length in bytes.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Whether the memory may be written: pages pinned for writing
    /// ([`Umem::writable`]), or a dma-buf whose file was opened for writing.
    pub(crate) fn writable(&self) -> bool {
        match &self.pin {
            Pin::User(u) => u.writable(),
            Pin::DmaBuf(b) => b.writable(),
        }
    }

    /// Whether this is a dma-buf's memory.
    pub(crate) fn is_dmabuf(&self) -> bool {
        matches!(self.pin, Pin::DmaBuf(_))
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

/// A dma-buf, taken from its file descriptor and mapped into the kernel
/// with `dma_buf_vmap`; unmapped and put on drop.
///
/// The mapping keeps the exporter's pages resident (and where they are)
/// until it is released: the shmem-backed exporters (vgem, udmabuf, the
/// GEM shmem helpers) take their pages for a vmap and hold them until the
/// vunmap. An exporter that maps I/O memory is refused, since the data path
/// copies with `kmap_local_page`.
///
/// # Invariants
///
/// `raw` is a dma-buf this value holds a reference to; `vaddr` is the
/// kernel address of its whole length, from a `dma_buf_vmap` that this
/// value releases, and page aligned.
pub(crate) struct DmaBuf {
    raw: NonNull<bindings::dma_buf>,
    vaddr: NonNull<c_void>,
}

// SAFETY: The buffer and its mapping may be used and released from any
// thread; nothing here changes after creation.
unsafe impl Send for DmaBuf {}
// SAFETY: As above.
unsafe impl Sync for DmaBuf {}

impl DmaBuf {
    /// Takes the dma-buf behind the caller's file descriptor `fd` and maps
    /// it: `EBADF` if `fd` is not open, `EINVAL` if it is not a dma-buf,
    /// `EOPNOTSUPP` if the exporter gives no kernel mapping of memory.
    pub(crate) fn map(fd: i32) -> Result<Self> {
        // SAFETY: `dma_buf_get` looks `fd` up in the calling process and
        // returns a counted buffer or an `ERR_PTR`.
        let raw = unsafe { bindings::roxe_dmabuf_get(fd) };
        let v = raw as isize;
        if (-4095..0).contains(&v) {
            // CAST: within the errno range checked above.
            return Err(Error::from_errno(v as i32));
        }
        let raw = NonNull::new(raw).ok_or(EINVAL)?;
        let mut vaddr: *mut c_void = core::ptr::null_mut();
        // SAFETY: `raw` is a counted buffer; the helper writes `vaddr` only
        // when it returns 0.
        let err = unsafe { bindings::roxe_dmabuf_vmap(raw.as_ptr(), &mut vaddr) };
        let mapped = if err != 0 {
            Err(Error::from_errno(err))
        } else {
            NonNull::new(vaddr).ok_or_else(super::errno::eopnotsupp)
        };
        let vaddr = match mapped {
            Ok(p) if (p.as_ptr() as usize) % PAGE == 0 => p,
            other => {
                if let Ok(p) = other {
                    // SAFETY: Mapped just above, and not kept.
                    unsafe { bindings::roxe_dmabuf_vunmap(raw.as_ptr(), p.as_ptr()) };
                }
                // SAFETY: The reference taken above, given back once.
                unsafe { bindings::roxe_dmabuf_put(raw.as_ptr()) };
                return Err(other.err().unwrap_or_else(super::errno::eopnotsupp));
            }
        };
        // INVARIANT: counted, mapped and page aligned, as checked.
        Ok(Self { raw, vaddr })
    }

    /// The buffer's size in bytes.
    pub(crate) fn size(&self) -> usize {
        // SAFETY: The buffer is live; its size is fixed at export.
        unsafe { bindings::roxe_dmabuf_size(self.raw.as_ptr()) }
    }

    /// Whether the file it was taken from was opened for writing. A
    /// buffer passed read-only must not be written through RDMA.
    pub(crate) fn writable(&self) -> bool {
        // SAFETY: The buffer is live; its file lives as long as it does.
        unsafe { bindings::roxe_dmabuf_writable(self.raw.as_ptr()) }
    }

    /// The `count` pages of the mapping from page `first` on.
    fn pages(&self, first: usize, count: usize) -> Result<KVec<PinnedPage>> {
        let end = first.checked_add(count).ok_or(EINVAL)?;
        if end > self.size().div_ceil(PAGE) {
            return Err(EINVAL);
        }
        // Sized by the caller's MR: charged to its memory cgroup.
        let mut out = KVec::with_capacity(count, GFP_KERNEL_ACCOUNT)?;
        for i in first..end {
            // SAFETY: Page `i` lies inside the mapping, which covers the
            // buffer's whole size from `vaddr` (checked above); the helper
            // only looks the address up.
            let page = unsafe {
                bindings::roxe_kernel_addr_page(
                    self.vaddr.as_ptr().cast::<u8>().add(i * PAGE).cast(),
                )
            };
            // INVARIANT: resident while the mapping, which the range that
            // keeps these pages also owns, lives.
            out.push(
                PinnedPage(NonNull::new(page).ok_or(EFAULT)?),
                GFP_KERNEL_ACCOUNT,
            )?;
        }
        Ok(out)
    }
}

impl Drop for DmaBuf {
    fn drop(&mut self) {
        // SAFETY: By the type invariant: the mapping and the reference
        // are this value's, released once, the mapping first.
        unsafe {
            bindings::roxe_dmabuf_vunmap(self.raw.as_ptr(), self.vaddr.as_ptr());
            bindings::roxe_dmabuf_put(self.raw.as_ptr());
        }
    }
}
