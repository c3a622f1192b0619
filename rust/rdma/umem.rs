// SPDX-License-Identifier: GPL-2.0

//! Memory an MR keeps resident for the data path: user memory pinned with
//! `ib_umem_get` (`struct ib_umem`), or a dma-buf another driver exported,
//! mapped into the kernel with `dma_buf_vmap`.

use super::device::{Device, Driver};
use crate::bindings;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicBool, AtomicU32, Ordering};
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

/// What a [`PinnedRange`] holds and copies through.
enum Mem {
    /// Pinned user pages, in address order; the registration starts
    /// `offset` bytes into the first.
    User {
        umem: Umem,
        pages: KVec<PinnedPage>,
        offset: usize,
    },
    /// A mapped dma-buf (pinned, or remapped after each move); the
    /// registration starts `offset` bytes into it.
    DmaBuf { buf: DmaBuf, offset: usize },
}

/// The bytes of pinned memory, addressed from the first byte of the
/// registration. Owns the pin.
///
/// # Invariants
///
/// For `Mem::User`, `pages` are the pages `umem` pinned, in address order,
/// and `offset..offset + len` lies within them; for `Mem::DmaBuf`,
/// `offset + len` is at most the buffer's size.
pub(crate) struct PinnedRange {
    mem: Mem,
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
            mem: Mem::User {
                umem,
                pages,
                offset,
            },
            len,
        })
    }

    /// Takes `len` bytes of the dma-buf `buf`, from byte `offset`.
    pub(crate) fn from_dmabuf(buf: DmaBuf, offset: u64, len: u64) -> Result<Self> {
        let offset = usize::try_from(offset).map_err(|_| EINVAL)?;
        let len = usize::try_from(len).map_err(|_| EINVAL)?;
        let end = offset.checked_add(len).ok_or(EINVAL)?;
        if len == 0 || end > buf.size() {
            return Err(EINVAL);
        }
        // INVARIANT: checked just above.
        Ok(Self {
            mem: Mem::DmaBuf { buf, offset },
            len,
        })
    }

    /// Length in bytes.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The dma-buf this range is in, if it is one.
    pub(crate) fn dmabuf(&self) -> Option<&DmaBuf> {
        match &self.mem {
            Mem::DmaBuf { buf, .. } => Some(buf),
            Mem::User { .. } => None,
        }
    }

    /// Whether the memory may be written: pages pinned for writing
    /// ([`Umem::writable`]), or a dma-buf whose file was opened for writing.
    pub(crate) fn writable(&self) -> bool {
        match &self.mem {
            Mem::User { umem, .. } => umem.writable(),
            Mem::DmaBuf { buf, .. } => buf.writable(),
        }
    }

    /// The position of `off..off + n` from the start of the memory, after
    /// checking that it lies inside the registration.
    fn place(&self, off: usize, n: usize) -> Result<usize> {
        let end = off.checked_add(n).ok_or(EFAULT)?;
        if end > self.len {
            return Err(EFAULT);
        }
        Ok(off
            + match &self.mem {
                Mem::User { offset, .. } | Mem::DmaBuf { offset, .. } => *offset,
            })
    }

    /// Calls `f(page, offset in page, bytes, done)` for each page piece of
    /// the user pages from byte `pos` (from [`Self::place`]) for `n` bytes.
    fn pieces(
        pages: &[PinnedPage],
        mut pos: usize,
        n: usize,
        mut f: impl FnMut(PinnedPage, usize, usize, usize),
    ) -> Result {
        let mut done = 0;
        while done < n {
            let in_page = pos % PAGE;
            let chunk = (PAGE - in_page).min(n - done);
            // By the invariant, `pos / PAGE` indexes a pinned page.
            let page = *pages.get(pos / PAGE).ok_or(EFAULT)?;
            f(page, in_page, chunk, done);
            pos += chunk;
            done += chunk;
        }
        Ok(())
    }

    /// Copies `src` into the registration at byte `off`. `EAGAIN`: a
    /// dma-buf that moved and is not mapped again yet.
    pub(crate) fn write(&self, off: usize, src: &[u8]) -> Result {
        let pos = self.place(off, src.len())?;
        let pages = match &self.mem {
            // A moved buffer not mapped again yet: `EAGAIN`.
            Mem::DmaBuf { buf, .. } => return buf.write(pos, src).map_err(|Unmapped| EAGAIN),
            Mem::User { pages, .. } => pages,
        };
        Self::pieces(pages, pos, src.len(), |page, in_page, chunk, done| {
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

    /// Copies bytes from the registration at `off` into `dst`. `EAGAIN`
    /// as for [`Self::write`].
    pub(crate) fn read(&self, off: usize, dst: &mut [u8]) -> Result {
        let pos = self.place(off, dst.len())?;
        let pages = match &self.mem {
            Mem::DmaBuf { buf, .. } => return buf.read(pos, dst).map_err(|Unmapped| EAGAIN),
            Mem::User { pages, .. } => pages,
        };
        let out = dst.as_mut_ptr();
        Self::pieces(pages, pos, dst.len(), |page, in_page, chunk, done| {
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

/// A dma-buf, taken from its file descriptor, attached for the device and
/// mapped into the kernel with `dma_buf_vmap`; unmapped, detached and put
/// on drop.
///
/// An exporter that can move its buffers gets an unpinned attachment: when
/// it moves the buffer, the mapping goes (the C side's `move_notify`), and
/// [`DmaBuf::read`] and [`DmaBuf::write`] answer [`Unmapped`] until
/// [`DmaBuf::remap`] maps it again where it now is. Any other exporter
/// pins the buffer at attach (the GEM helpers do) and the mapping lives as
/// long as this value. The mapping is the exporter's own, with the memory
/// type it chose (vgem's is write-combined), so the data path copies
/// through it rather than through other aliases of its pages. I/O memory
/// is refused.
///
/// # Invariants
///
/// `map` is a `roxe_dmabuf_map` this value owns (from
/// `roxe_dmabuf_import`, released on drop), over a buffer of `size`
/// bytes; copies through its mapping happen only with its lock held.
pub(crate) struct DmaBuf {
    map: NonNull<bindings::roxe_dmabuf_map>,
    size: usize,
    writable: bool,
    /// A remap is queued or running.
    remapping: AtomicBool,
    /// Remaps failed this many times in a row.
    failures: AtomicU32,
    /// Remaps failed [`REMAP_FAIL_LIMIT`] times in a row: the buffer
    /// cannot be reached any more.
    broken: AtomicBool,
}

/// Failed remaps in a row after which a dma-buf MR is broken for good (a
/// transient failure, such as memory short for the mapping, is retried).
const REMAP_FAIL_LIMIT: u32 = 3;

/// The buffer moved and is not mapped again yet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Unmapped;

// SAFETY: The map may be used and released from any thread; its mapping
// is reached only under its lock.
unsafe impl Send for DmaBuf {}
// SAFETY: As above; copies go through raw pointers, under the map's lock.
unsafe impl Sync for DmaBuf {}

impl DmaBuf {
    /// Takes the dma-buf behind the caller's file descriptor `fd`, and
    /// attaches and maps it for `dev` if at least `need` bytes long:
    /// `EBADF` if `fd` is not open, `EINVAL` if it is not a dma-buf or is
    /// shorter, `EOPNOTSUPP` if the exporter gives no kernel mapping of
    /// memory.
    pub(crate) fn map<T: Driver>(dev: &Device<T>, fd: i32, need: u64) -> Result<Self> {
        // SAFETY: `dma_buf_get` looks `fd` up in the calling process and
        // returns a counted buffer or an `ERR_PTR`.
        let raw = unsafe { bindings::roxe_dmabuf_get(fd) };
        let v = raw as isize;
        if (-4095..0).contains(&v) {
            // CAST: within the errno range checked above.
            return Err(Error::from_errno(v as i32));
        }
        let raw = NonNull::new(raw).ok_or(EINVAL)?;
        // SAFETY: `raw` is a counted buffer; its size is fixed at export,
        // and so is its file.
        let (size, writable) = unsafe {
            (
                bindings::roxe_dmabuf_size(raw.as_ptr()),
                bindings::roxe_dmabuf_writable(raw.as_ptr()),
            )
        };
        // Checked before attaching: nothing of a buffer too short is touched.
        if u64::try_from(size).map_or(true, |s| s < need) {
            // SAFETY: The reference taken above, given back once.
            unsafe { bindings::roxe_dmabuf_put(raw.as_ptr()) };
            return Err(EINVAL);
        }
        // SAFETY: `raw` is a counted buffer and `dev` a live device. On
        // success the map owns the reference; on error the helper undid
        // everything else and the reference is still ours.
        let map = unsafe { bindings::roxe_dmabuf_import(raw.as_ptr(), dev.as_raw()) };
        let v = map as isize;
        let map = match NonNull::new(map) {
            Some(m) if !(-4095..0).contains(&v) => m,
            _ => {
                // SAFETY: The reference taken above, given back once.
                unsafe { bindings::roxe_dmabuf_put(raw.as_ptr()) };
                // CAST: an errno, or NULL (never returned).
                return Err(if v < 0 {
                    Error::from_errno(v as i32)
                } else {
                    EINVAL
                });
            }
        };
        // INVARIANT: the map is ours, over `size` bytes.
        Ok(Self {
            map,
            size,
            writable,
            remapping: AtomicBool::new(false),
            failures: AtomicU32::new(0),
            broken: AtomicBool::new(false),
        })
    }

    /// The buffer's size in bytes.
    pub(crate) fn size(&self) -> usize {
        self.size
    }

    /// Whether the file it was taken from was opened for writing. A
    /// buffer exported read-only must not be written through RDMA.
    pub(crate) fn writable(&self) -> bool {
        self.writable
    }

    /// Runs `f` on the mapping's address with the map's lock held, or
    /// answers [`Unmapped`] if the buffer moved and is not mapped again.
    fn with_mapping(&self, f: impl FnOnce(*mut u8)) -> core::result::Result<(), Unmapped> {
        let mut flags = 0;
        // SAFETY: The map is ours and live; the lock is released below.
        let va = unsafe { bindings::roxe_dmabuf_lock(self.map.as_ptr(), &mut flags) };
        let r = if va.is_null() {
            Err(Unmapped)
        } else {
            f(va.cast());
            Ok(())
        };
        // SAFETY: Taken just above with these flags.
        unsafe { bindings::roxe_dmabuf_unlock(self.map.as_ptr(), flags) };
        r
    }

    /// Whether the buffer is mapped now (it may move right after).
    pub(crate) fn mapped(&self) -> bool {
        self.with_mapping(|_| ()).is_ok()
    }

    /// Copies `src` to byte `pos` of the buffer; `pos + src.len()` is at
    /// most the size ([`PinnedRange`]'s invariant and `place`).
    fn write(&self, pos: usize, src: &[u8]) -> core::result::Result<(), Unmapped> {
        debug_assert!(pos + src.len() <= self.size);
        self.with_mapping(|va| {
            // SAFETY: The mapping covers the whole size while the lock is
            // held (a move takes it away under the lock), and the range is
            // within it. The exporter's other users may touch the bytes at
            // the same time, as with any RDMA write: they are copied
            // through raw pointers, never references to them.
            unsafe { core::ptr::copy_nonoverlapping(src.as_ptr(), va.add(pos), src.len()) }
        })
    }

    /// Copies from byte `pos` of the buffer into `dst`, within the size.
    fn read(&self, pos: usize, dst: &mut [u8]) -> core::result::Result<(), Unmapped> {
        debug_assert!(pos + dst.len() <= self.size);
        self.with_mapping(|va| {
            // SAFETY: As in `write`, in the other direction.
            unsafe { core::ptr::copy_nonoverlapping(va.add(pos), dst.as_mut_ptr(), dst.len()) }
        })
    }

    /// Claims the right to queue a remap: false if one is queued or
    /// running, or the buffer is broken. [`DmaBuf::remap`] gives it back.
    pub(crate) fn start_remap(&self) -> bool {
        !self.broken.load(Ordering::Acquire) && !self.remapping.swap(true, Ordering::AcqRel)
    }

    /// Gives back the claim [`DmaBuf::start_remap`] took, without a remap
    /// (it could not be queued).
    pub(crate) fn remap_cancelled(&self) {
        self.remapping.store(false, Ordering::Release);
    }

    /// Whether a remap failed: the memory cannot be reached any more.
    pub(crate) fn broken(&self) -> bool {
        self.broken.load(Ordering::Acquire)
    }

    /// Maps the buffer again where the exporter moved it, if it is not
    /// mapped. Sleeps (takes the buffer's reservation lock, and waits for
    /// the exporter's copy). [`REMAP_FAIL_LIMIT`] failures in a row mark
    /// the buffer broken: every later access is refused.
    pub(crate) fn remap(&self) -> Result {
        // The claim goes first: a move from here on is met by a later
        // miss, which queues another remap.
        self.remapping.store(false, Ordering::Release);
        // SAFETY: The map is ours and live; process context.
        let err = unsafe { bindings::roxe_dmabuf_remap(self.map.as_ptr()) };
        if err == 0 {
            self.failures.store(0, Ordering::Relaxed);
            return Ok(());
        }
        if self.failures.fetch_add(1, Ordering::Relaxed) + 1 >= REMAP_FAIL_LIMIT {
            self.broken.store(true, Ordering::Release);
        }
        Err(Error::from_errno(err))
    }
}

impl Drop for DmaBuf {
    fn drop(&mut self) {
        // SAFETY: By the type invariant the map is ours; released once.
        unsafe { bindings::roxe_dmabuf_release(self.map.as_ptr()) };
    }
}
