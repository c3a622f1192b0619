// SPDX-License-Identifier: GPL-2.0

//! On-demand-paging user memory (`struct ib_umem_odp`), and the queue its
//! page faults run on.
//!
//! An [`OdpUmem`] pins nothing. The RDMA core keeps a table of the pages it
//! has mapped (`dma_list`: with virtual DMA, each entry is the page's kernel
//! address with a read and a write bit) and an MMU interval notifier that
//! calls [`invalidate_cb`] before the kernel takes any of them away.
//!
//! The data path runs in softirq and may not sleep, so it never faults:
//! [`OdpUmem::read`] and [`OdpUmem::write`] copy only if every page is
//! there, and otherwise return [`Miss::Absent`] having touched nothing.
//! The driver then asks for [`OdpUmem::fault`] from process context (a
//! work item on the [`FaultQueue`], or a verb) and tries again later.
//!
//! Locking: a copy checks and uses the entries under the umem's spinlock.
//! The notifier takes the core's `umem_mutex` and then that spinlock to
//! mark the range it is about to unmap, drops the spinlock while the core
//! unmaps (which dirties pages and may take the page cache's locks), and
//! takes it again to clear the mark. A copy that finds its range marked
//! misses; one that started before waited for the mark to be set. So no
//! copy touches a page after the notifier returns, and no lock of the
//! memory manager is ever taken under the data path's locks.
//! Order: data path locks → umem spinlock; `umem_mutex` → umem spinlock.

use super::device::{Device, Driver};
use crate::bindings;
use crate::sync::{new_spinlock_irq, SpinLockIrq};
use core::ffi::c_void;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicPtr, Ordering};
use kernel::alloc::flags::{GFP_ATOMIC, GFP_KERNEL};
use kernel::alloc::KBox;
use kernel::error::{code::*, Error, Result};
use kernel::prelude::*;
use kernel::str::CStr;

/// `ODP_READ_ALLOWED_BIT` and `ODP_WRITE_ALLOWED_BIT` of a `dma_list` entry.
const ENTRY_READ: u64 = 1 << 0;
const ENTRY_WRITE: u64 = 1 << 1;

const PAGE_SHIFT: u32 = kernel::page::PAGE_SHIFT as u32;
const PAGE: u64 = 1 << PAGE_SHIFT;

/// Why an access to on-demand-paging memory did not happen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Miss {
    /// A page is not mapped (or is being unmapped) with the access asked
    /// for: fault it in and try again.
    Absent,
    /// The range is not inside the registration.
    Bounds,
}

/// What the notifier and the data path share, at a fixed address that the
/// umem's `private` points to.
#[pin_data]
struct Shared {
    /// The user range an invalidation is unmapping, `start..end`; empty
    /// when none is.
    #[pin]
    unmapping: SpinLockIrq<(u64, u64)>,
}

/// User memory registered for on-demand paging; released on drop.
///
/// # Invariants
///
/// `raw` is a live umem from `ib_umem_odp_get` made with [`OPS`], whose
/// `private` is null or points to `shared`; page shift is `PAGE_SHIFT`.
pub(crate) struct OdpUmem {
    raw: NonNull<bindings::ib_umem_odp>,
    shared: Pin<KBox<Shared>>,
}

// SAFETY: The umem's page table is only used under its locks (see the
// module documentation); the rest of it is fixed at creation.
unsafe impl Send for OdpUmem {}
// SAFETY: As above.
unsafe impl Sync for OdpUmem {}

/// The notifier's operations for every roxe ODP umem.
static OPS: bindings::mmu_interval_notifier_ops = bindings::mmu_interval_notifier_ops {
    invalidate: Some(invalidate_cb),
};

/// The memory manager is about to take pages of `range` away from the
/// umem of `mni`: unmap them from the data path first.
///
/// # Safety
///
/// Only the MMU notifier calls this, for a notifier inserted by
/// `ib_umem_odp_get` with [`OPS`], which stays live until
/// `ib_umem_odp_release` has removed it (that waits for running calls).
unsafe extern "C" fn invalidate_cb(
    mni: *mut bindings::mmu_interval_notifier,
    range: *const bindings::mmu_notifier_range,
    cur_seq: kernel::ffi::c_ulong,
) -> bool {
    // SAFETY: `range` is valid for the call.
    if !unsafe { bindings::roxe_odp_range_blockable(range) } {
        // The caller may not sleep: `umem_mutex` cannot be taken. The
        // memory manager tries again where it can.
        return false;
    }
    // SAFETY: `mni` is the notifier embedded in a live `ib_umem_odp`.
    let odp = unsafe { bindings::roxe_odp_from_notifier(mni) };
    let (mut start, mut end) = (0u64, 0u64);
    // SAFETY: `odp` is live (see above); `range` is valid for the call;
    // `umem_mutex` is the lock `mmu_interval_set_seq` and
    // `ib_umem_odp_unmap_dma_pages` want held.
    unsafe {
        bindings::roxe_odp_range(range, &mut start, &mut end);
        bindings::roxe_odp_lock(odp);
        bindings::roxe_odp_set_seq(mni, cur_seq);
        start = start.max(bindings::roxe_odp_start(odp));
        end = end.min(bindings::roxe_odp_end(odp));
    }
    if start < end {
        // SAFETY: `private` is null or points to the `Shared` of the
        // `OdpUmem` that owns `odp`, which outlives the notifier; it is set
        // under `umem_mutex`, which is held.
        let shared = unsafe { bindings::roxe_odp_private(odp) }.cast::<Shared>();
        // SAFETY: As above: a live `Shared` or null.
        let shared = unsafe { shared.as_ref() };
        if let Some(s) = shared {
            // Copies running now finish first; later ones miss.
            *s.unmapping.lock() = (start, end);
        }
        // SAFETY: `umem_mutex` is held; the range is inside the umem.
        unsafe { bindings::ib_umem_odp_unmap_dma_pages(odp, start, end) };
        if let Some(s) = shared {
            *s.unmapping.lock() = (0, 0);
        }
    }
    // SAFETY: Taken above.
    unsafe { bindings::roxe_odp_unlock(odp) };
    true
}

impl OdpUmem {
    /// Registers `len` bytes at user address `addr` of the calling process
    /// for on-demand paging with `IB_ACCESS_*` rights `access` (which must
    /// include `IB_ACCESS_ON_DEMAND`, and not `IB_ACCESS_HUGETLB`), and
    /// maps the pages that are present already, faulting none.
    pub(crate) fn get<T: Driver>(
        dev: &Device<T>,
        addr: u64,
        len: u64,
        access: u32,
    ) -> Result<Self> {
        let len = usize::try_from(len).map_err(|_| EINVAL)?;
        let addr = kernel::ffi::c_ulong::try_from(addr).map_err(|_| EINVAL)?;
        let huge = bindings::ib_access_flags_IB_ACCESS_HUGETLB;
        if access & bindings::ib_access_flags_IB_ACCESS_ON_DEMAND == 0 || access & huge != 0 {
            return Err(EINVAL);
        }
        let shared = Self::new_shared()?;
        let ib = dev.as_raw();
        // SAFETY: The device is valid; `OPS` is static; the call takes the
        // calling process's mm and returns an `ERR_PTR` on failure.
        let raw = unsafe { bindings::ib_umem_odp_get(ib, addr, len, access as i32, &OPS) };
        // SAFETY: `raw` came from `ib_umem_odp_get` with `OPS`, without
        // HUGETLB.
        unsafe { Self::adopt(raw, shared) }
    }

    /// Takes `raw`, an `ERR_PTR` or a new umem made with [`OPS`] and page
    /// shift `PAGE_SHIFT`, points its `private` at `shared`, and maps the
    /// pages the process has touched already (no fault needed for them
    /// later; a range with nothing mapped is not an error).
    ///
    /// # Safety
    ///
    /// `raw` is as above, and owned by nobody else.
    unsafe fn adopt(raw: *mut bindings::ib_umem_odp, shared: Pin<KBox<Shared>>) -> Result<Self> {
        let v = raw as isize;
        if (-4095..0).contains(&v) {
            // CAST: within the errno range checked above.
            return Err(Error::from_errno(v as i32));
        }
        let raw = NonNull::new(raw).ok_or(ENOMEM)?;
        let p = (&*shared as *const Shared).cast_mut().cast::<c_void>();
        // SAFETY: `raw` is live; `private` is written under `umem_mutex`,
        // which the notifier takes before it reads it; `shared` lives as
        // long as the umem (see `Drop`).
        unsafe {
            bindings::roxe_odp_lock(raw.as_ptr());
            bindings::roxe_odp_set_private(raw.as_ptr(), p);
            bindings::roxe_odp_unlock(raw.as_ptr());
        }
        // INVARIANT: by the safety requirements, and `private` set above.
        let this = Self { raw, shared };
        // SAFETY: The umem is live.
        let len = unsafe {
            bindings::roxe_odp_end(raw.as_ptr()) - bindings::roxe_odp_start(raw.as_ptr())
        };
        // CAST: a umem's length fits memory.
        let _ = this.map(0, len as usize, false, true);
        Ok(this)
    }

    fn new_shared() -> Result<Pin<KBox<Shared>>> {
        KBox::pin_init(
            pin_init!(Shared {
                unmapping <- new_spinlock_irq!((0, 0), "roxe_odp_umem"),
            }),
            GFP_KERNEL,
        )
    }

    /// Whether the data path may write the memory at all.
    pub(crate) fn writable(&self) -> bool {
        // SAFETY: The umem is live; `writable` is fixed at creation.
        unsafe { bindings::roxe_odp_writable(self.raw.as_ptr()) }
    }

    /// Maps `len` bytes from byte `off` of the registration, faulting them
    /// in (for writing too if `write`) unless `snapshot`, in which case only
    /// the pages already present are mapped. Sleeps.
    fn map(&self, off: usize, len: usize, write: bool, snapshot: bool) -> Result {
        let raw = self.raw.as_ptr();
        // SAFETY: The umem is live.
        let (addr, end) = unsafe { (bindings::roxe_odp_address(raw), bindings::roxe_odp_end(raw)) };
        let va = addr.checked_add(off as u64).ok_or(EFAULT)?;
        let n = (len as u64).min(end.saturating_sub(va));
        if n == 0 {
            return Ok(());
        }
        let mask = ENTRY_READ | if write { ENTRY_WRITE } else { 0 };
        // SAFETY: The umem is live and the range inside it; the call sleeps,
        // and its callers are in process context. On success it returns
        // with `umem_mutex` held, released at once.
        let r = unsafe { bindings::ib_umem_odp_map_dma_and_lock(raw, va, n, mask, !snapshot) };
        if r < 0 {
            return Err(Error::from_errno(r));
        }
        // SAFETY: Held since the call succeeded.
        unsafe { bindings::roxe_odp_unlock(raw) };
        Ok(())
    }

    /// Faults in `len` bytes from byte `off` of the registration, for
    /// writing too if `write` and the memory is writable, and maps them for
    /// the data path. Sleeps: process context only.
    pub(crate) fn fault(&self, off: usize, len: usize, write: bool) -> Result {
        self.map(off, len, write && self.writable(), false)
    }

    /// Maps the pages of `len` bytes at byte `off` that are present
    /// already, faulting none. Sleeps: process context only.
    pub(crate) fn snapshot(&self, off: usize, len: usize) -> Result {
        self.map(off, len, false, true)
    }

    /// Calls `f(kernel address, chunk, done)` for each page piece of
    /// `off..off + n` of the registration, if every page is mapped with the
    /// access asked for; otherwise calls nothing. The pages stay mapped
    /// during the calls.
    fn with_pages(
        &self,
        off: usize,
        n: usize,
        write: bool,
        mut f: impl FnMut(*mut u8, usize, usize),
    ) -> core::result::Result<(), Miss> {
        let raw = self.raw.as_ptr();
        // SAFETY: The umem is live; these are fixed at creation.
        let (addr, start, uend) = unsafe {
            (
                bindings::roxe_odp_address(raw),
                bindings::roxe_odp_start(raw),
                bindings::roxe_odp_end(raw),
            )
        };
        let va = addr.checked_add(off as u64).ok_or(Miss::Bounds)?;
        let end = va.checked_add(n as u64).ok_or(Miss::Bounds)?;
        if va < start || end > uend {
            return Err(Miss::Bounds);
        }
        if n == 0 {
            return Ok(());
        }
        let need = if write { ENTRY_WRITE } else { ENTRY_READ };
        let guard = self.shared.unmapping.lock();
        let (us, ue) = *guard;
        if va < ue && us < end {
            return Err(Miss::Absent);
        }
        // CAST: page indices of a registration that fits memory.
        let first = ((va - start) >> PAGE_SHIFT) as usize;
        let last = ((end - 1 - start) >> PAGE_SHIFT) as usize;
        for idx in first..=last {
            // SAFETY: `idx` is below the umem's page count (the range is
            // inside it); entries are read with `READ_ONCE`.
            if unsafe { bindings::roxe_odp_entry(raw, idx) } & need == 0 {
                return Err(Miss::Absent);
            }
        }
        let mut pos = va;
        let mut done = 0;
        while done < n {
            // CAST: as above.
            let idx = ((pos - start) >> PAGE_SHIFT) as usize;
            // CAST: below a page.
            let in_page = (pos & (PAGE - 1)) as usize;
            // CAST: a page fits a usize.
            let chunk = (PAGE as usize - in_page).min(n - done);
            // SAFETY: As above. The entry was found mapped under the lock
            // that the notifier takes before it unmaps anything, and is
            // still held; with virtual DMA it holds the page's kernel
            // address, valid for a whole page.
            let p = unsafe {
                let e = bindings::roxe_odp_entry(raw, idx);
                bindings::roxe_odp_entry_ptr(e).cast::<u8>().add(in_page)
            };
            f(p, chunk, done);
            pos += chunk as u64;
            done += chunk;
        }
        drop(guard);
        Ok(())
    }

    /// Whether `len` bytes at byte `off` are mapped for reading now.
    pub(crate) fn present(&self, off: usize, len: usize) -> core::result::Result<(), Miss> {
        self.with_pages(off, len, false, |_, _, _| {})
    }

    /// Copies `src` into the registration at byte `off`, if the pages are
    /// mapped for writing.
    pub(crate) fn write(&self, off: usize, src: &[u8]) -> core::result::Result<(), Miss> {
        self.with_pages(off, src.len(), true, |p, chunk, done| {
            // SAFETY: `p` is valid for `chunk` bytes of a mapped page (see
            // `with_pages`); `done + chunk` stays within `src`. User space
            // may touch the page at the same time, as with any RDMA write:
            // bytes are copied through raw pointers only.
            unsafe { core::ptr::copy_nonoverlapping(src.as_ptr().add(done), p, chunk) }
        })
    }

    /// Copies bytes of the registration at `off` into `dst`, if the pages
    /// are mapped.
    pub(crate) fn read(&self, off: usize, dst: &mut [u8]) -> core::result::Result<(), Miss> {
        let out = dst.as_mut_ptr();
        self.with_pages(off, dst.len(), false, |p, chunk, done| {
            // SAFETY: As in `write`, in the other direction, into `dst`,
            // which has room for `done + chunk` bytes.
            unsafe { core::ptr::copy_nonoverlapping(p, out.add(done), chunk) }
        })
    }
}

impl Drop for OdpUmem {
    fn drop(&mut self) {
        // SAFETY: By the type invariant. The call unmaps every page and
        // removes the notifier, waiting for a running invalidation, before
        // `shared` (which `private` names) is freed after it.
        unsafe { bindings::ib_umem_odp_release(self.raw.as_ptr()) };
    }
}

/// The root of an implicit on-demand-paging registration: the whole
/// address space of the registering process, with no page table of its
/// own. Its pieces are [`OdpUmem`]s made by [`ImplicitRoot::child`].
///
/// # Invariants
///
/// `raw` is a live implicit umem from `ib_umem_odp_alloc_implicit`, and
/// this holds a grab (`mmgrab`) on its `owning_mm`.
pub(crate) struct ImplicitRoot {
    raw: NonNull<bindings::ib_umem_odp>,
}

// SAFETY: The root is only read after creation (children copy from it).
unsafe impl Send for ImplicitRoot {}
// SAFETY: As above.
unsafe impl Sync for ImplicitRoot {}

impl ImplicitRoot {
    /// Registers the calling process's whole address space for on-demand
    /// paging with `IB_ACCESS_*` rights `access` (no HUGETLB).
    pub(crate) fn new<T: Driver>(dev: &Device<T>, access: u32) -> Result<Self> {
        if access & bindings::ib_access_flags_IB_ACCESS_HUGETLB != 0 {
            return Err(EINVAL);
        }
        // SAFETY: The device is valid; the call takes the calling
        // process's mm and returns an `ERR_PTR` on failure.
        let raw = unsafe { bindings::ib_umem_odp_alloc_implicit(dev.as_raw(), access as i32) };
        let v = raw as isize;
        if (-4095..0).contains(&v) {
            // CAST: within the errno range checked above.
            return Err(Error::from_errno(v as i32));
        }
        let raw = NonNull::new(raw).ok_or(ENOMEM)?;
        // SAFETY: `raw` is live and its `owning_mm` is the caller's, live
        // now. The core takes no reference on it for an implicit root,
        // and children need it to stay allocated: this grab does that.
        unsafe { bindings::roxe_odp_mmgrab(raw.as_ptr()) };
        // INVARIANT: live, grabbed above.
        Ok(Self { raw })
    }

    /// Whether the data path may write the memory at all.
    pub(crate) fn writable(&self) -> bool {
        // SAFETY: The umem is live; `writable` is fixed at creation.
        unsafe { bindings::roxe_odp_writable(self.raw.as_ptr()) }
    }

    /// A piece of the address space, `len` bytes at user address `addr`,
    /// with its own page table and notifier. Sleeps: process context. Fails
    /// with `EFAULT` once the process's memory is gone.
    pub(crate) fn child(&self, addr: u64, len: u64) -> Result<OdpUmem> {
        let addr = kernel::ffi::c_ulong::try_from(addr).map_err(|_| EINVAL)?;
        let len = usize::try_from(len).map_err(|_| EINVAL)?;
        let shared = OdpUmem::new_shared()?;
        // SAFETY: The root is live and implicit, and outlives the call;
        // `OPS` is static. The call returns an `ERR_PTR` on failure.
        let raw = unsafe { bindings::ib_umem_odp_alloc_child(self.raw.as_ptr(), addr, len, &OPS) };
        // SAFETY: A child is made with `OPS` and page shift `PAGE_SHIFT`.
        unsafe { OdpUmem::adopt(raw, shared) }
    }
}

impl Drop for ImplicitRoot {
    fn drop(&mut self) {
        // SAFETY: By the type invariant. The driver drops every child
        // before the root (their notifiers hold their own references).
        unsafe {
            bindings::roxe_odp_mmdrop(self.raw.as_ptr());
            bindings::ib_umem_odp_release(self.raw.as_ptr());
        }
    }
}

/// The module's queue for page faults; [`spawn`] and [`flush`] use it
/// while this lives.
static QUEUE: AtomicPtr<bindings::workqueue_struct> = AtomicPtr::new(core::ptr::null_mut());

/// Owns the fault queue: made once at module load, destroyed (after
/// running what is queued) at unload, after every device is gone.
///
/// # Invariants
///
/// `0` is a live workqueue, published in [`QUEUE`].
pub(crate) struct FaultQueue(NonNull<bindings::workqueue_struct>);

// SAFETY: A workqueue may be used and destroyed from any thread.
unsafe impl Send for FaultQueue {}
// SAFETY: As above.
unsafe impl Sync for FaultQueue {}

impl FaultQueue {
    /// Makes the queue, named `name`.
    pub(crate) fn new(name: &'static CStr) -> Result<Self> {
        // SAFETY: `name` is a static NUL-terminated string.
        let wq = unsafe { bindings::roxe_alloc_wq(name.as_char_ptr()) };
        let wq = NonNull::new(wq).ok_or(ENOMEM)?;
        if QUEUE
            .compare_exchange(
                core::ptr::null_mut(),
                wq.as_ptr(),
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_err()
        {
            // SAFETY: Made above and never published.
            unsafe { bindings::roxe_destroy_wq(wq.as_ptr()) };
            return Err(EBUSY);
        }
        // INVARIANT: live and published.
        Ok(Self(wq))
    }
}

impl Drop for FaultQueue {
    fn drop(&mut self) {
        QUEUE.store(core::ptr::null_mut(), Ordering::Release);
        // SAFETY: By the type invariant; the call runs what is queued
        // first. No device exists any more to queue more.
        unsafe { bindings::roxe_destroy_wq(self.0.as_ptr()) };
    }
}

/// Runs `f` on the fault queue, from any context. Fails if the queue is
/// gone or memory is short; `f` is then dropped.
pub(crate) fn spawn(f: impl FnOnce() + Send + 'static) -> Result {
    let q = QUEUE.load(Ordering::Acquire);
    if q.is_null() {
        return Err(ENODEV);
    }
    // SAFETY: The queue lives until the `FaultQueue` drops, at module
    // unload, after every device is gone; devices are what call this.
    let q = unsafe { kernel::workqueue::Queue::from_raw(q.cast_const().cast()) };
    q.try_spawn(GFP_ATOMIC, f).map_err(|_| ENOMEM)
}

/// Waits for every queued fault to finish (they may hold the last
/// reference to an MR, and with it a umem that names its device).
/// Sleeps.
pub(crate) fn flush() {
    let q = QUEUE.load(Ordering::Acquire);
    if !q.is_null() {
        // SAFETY: Live while published (see `spawn`).
        unsafe { bindings::roxe_flush_wq(q) };
    }
}
