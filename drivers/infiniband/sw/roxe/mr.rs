// SPDX-License-Identifier: GPL-2.0

//! Memory regions: DMA MRs for kernel consumers, and user MRs whose pages
//! are pinned through `ib_umem` and kept as a page list for the data path.
//! A dma-buf MR (`ibv_reg_dmabuf_mr`) reaches another driver's buffer
//! instead, through the exporter's kernel mapping of it, and maps it again
//! after the exporter moves it.
//!
//! Fast-registration MRs (`alloc_mr`) map kernel pages given by
//! `ib_map_mr_sg` and become usable through `IB_WR_REG_MR`. Memory windows
//! share the key table: a bound window refers to its MR by key, so a window
//! whose MR is gone reaches nothing.
//!
//! The key table and the checks a key must pass are in `keys.rs`.

use crate::device::Roxe;
use crate::keys::{check_access, Backing, FastPages, KeyEntry, MrData};
use crate::odp::{Implicit, OdpMem, OdpPages};
use crate::proto::access;
use crate::rdma::mr::{Advice, AdviseSge, DmaBufMrArgs, Mr, MrInfo, Rereg, UserMrArgs};
use crate::rdma::odp::{ImplicitRoot, OdpUmem};
use crate::rdma::pd::Pd;
use crate::rdma::random;
use crate::rdma::udata::UData;
use crate::rdma::umem::{DmaBuf, PinnedRange, Umem};
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use kernel::error::code::{EACCES, EINVAL, ENOMEM, EPERM};
use kernel::prelude::*;
use kernel::sync::Arc;

/// Per-MR state.
pub(crate) struct RoxeMr {
    index: u32,
    data: Arc<MrData>,
}

/// Makes the data of a new MR, with a new key, and enters it in the key
/// table.
fn new_mr(
    pd: &Pd<Roxe>,
    access: u32,
    iova: u64,
    iova_len: u64,
    backing: Backing,
) -> Result<RoxeMr> {
    let dev = pd.device().data();
    dev.mrs.take()?;
    let tag = random::u32() & 0xff;
    // The index is only known once the entry is in; a placeholder holds it
    // until the data (whose key includes the index) replaces it.
    let index = match dev.mr_table.insert(KeyEntry::Reserved) {
        Ok(i) => i,
        Err(e) => {
            dev.mrs.give_back();
            return Err(e);
        }
    };
    let (length, valid) = match &backing {
        Backing::Dma => (u64::MAX, true),
        Backing::User(r) => (r.len() as u64, true),
        Backing::Odp(_) => (iova_len, true),
        Backing::Fast(_) => (0, false),
    };
    let data = MrData {
        key: AtomicU32::new(index << 8 | tag),
        pd: AtomicUsize::new(pd.id()),
        iova: AtomicU64::new(iova),
        length: AtomicU64::new(length),
        access: AtomicU32::new(access),
        valid: AtomicBool::new(valid),
        windows: AtomicU32::new(0),
        backing,
    };
    match Arc::new(data, GFP_KERNEL) {
        Ok(data) => {
            dev.mr_table.replace(index, KeyEntry::Mr(data.clone()));
            Ok(RoxeMr { index, data })
        }
        Err(e) => {
            release_key(dev, index);
            Err(e.into())
        }
    }
}

impl RoxeMr {
    /// What the core records for this MR: its key as lkey and rkey, and
    /// its extent.
    fn info(&self, iova: u64, length: u64) -> MrInfo {
        let key = self.data.key();
        MrInfo {
            lkey: key,
            rkey: key,
            iova,
            length,
        }
    }
}

fn release_key(pd_dev: &crate::device::RoxeDev, index: u32) {
    pd_dev.mr_table.remove(index);
    pd_dev.mrs.give_back();
}

pub(crate) fn get_dma(pd: &Pd<Roxe>, access: u32) -> Result<(RoxeMr, MrInfo)> {
    let access = check_access(access)?;
    let mr = new_mr(pd, access, 0, 0, Backing::Dma)?;
    let info = mr.info(0, u64::MAX);
    Ok((mr, info))
}

pub(crate) fn reg_user(
    pd: &Pd<Roxe>,
    args: &UserMrArgs,
    udata: Option<&UData<'_>>,
) -> Result<(RoxeMr, MrInfo)> {
    let access = check_access(args.access)?;
    if let Some(u) = udata {
        u.expect_no_input()?;
    }
    let on_demand = args.access & access::ON_DEMAND != 0;
    if on_demand && args.start == 0 && args.length == u64::MAX {
        // Implicit ODP: the whole address space, at iova 0.
        return reg_implicit(pd, args, access);
    }
    if args.length == 0 || args.length > crate::limits::MAX_MR_SIZE {
        return Err(EINVAL);
    }
    // The last byte's address must not wrap, on either side.
    args.start.checked_add(args.length - 1).ok_or(EINVAL)?;
    args.iova.checked_add(args.length - 1).ok_or(EINVAL)?;
    let backing = if on_demand {
        // Paged on demand: nothing pinned. Huge-page memory is still
        // taken (the core maps huge pages as their small ones).
        let odp_access = (access & !access::HUGETLB) | access::ON_DEMAND;
        let umem = OdpUmem::get(pd.device(), args.start, args.length, odp_access)?;
        Backing::Odp(OdpPages::new(OdpMem::Range(umem)))
    } else {
        let umem = Umem::get(pd.device(), args.start, args.length, access)?;
        Backing::User(PinnedRange::new(umem, args.length)?)
    };
    let mr = new_mr(pd, access, args.iova, args.length, backing)?;
    let info = mr.info(args.iova, args.length);
    Ok((mr, info))
}

/// `ibv_reg_dmabuf_mr`: `args.length` bytes of the dma-buf behind the
/// caller's descriptor `args.fd`, from byte `args.offset`, at `args.iova`.
///
/// The buffer stays mapped until the MR is deregistered, and is mapped
/// again after each move of an exporter that can move it (see
/// `Documentation/dmabuf.md`). A
/// buffer not exported for writing gets no right that writes: `EACCES`, as
/// no process could map it writable either.
pub(crate) fn reg_dmabuf(pd: &Pd<Roxe>, args: &DmaBufMrArgs) -> Result<(RoxeMr, MrInfo)> {
    let access = check_access(args.access)?;
    if access & (access::ON_DEMAND | access::HUGETLB) != 0 {
        return Err(EINVAL);
    }
    if args.length == 0 || args.length > crate::limits::MAX_MR_SIZE {
        return Err(EINVAL);
    }
    let end = args.offset.checked_add(args.length).ok_or(EINVAL)?;
    args.iova.checked_add(args.length - 1).ok_or(EINVAL)?;
    let buf = DmaBuf::map(pd.device(), args.fd, end)?;
    if access::needs_writable_pin(access) && !buf.writable() {
        return Err(EACCES);
    }
    let range = PinnedRange::from_dmabuf(buf, args.offset, args.length)?;
    let mr = new_mr(pd, access, args.iova, args.length, Backing::User(range))?;
    let info = mr.info(args.iova, args.length);
    Ok((mr, info))
}

/// An implicit ODP MR (`ibv_reg_mr(pd, NULL, SIZE_MAX, ...)`): the
/// registering process's whole address space, at iova 0, its pieces made
/// as they are first used.
fn reg_implicit(pd: &Pd<Roxe>, args: &UserMrArgs, access: u32) -> Result<(RoxeMr, MrInfo)> {
    if args.iova != 0 {
        return Err(EINVAL);
    }
    let odp_access = (access & !access::HUGETLB) | access::ON_DEMAND;
    let root = ImplicitRoot::new(pd.device(), odp_access)?;
    let mem = OdpMem::Implicit(Implicit::new(root)?);
    let mr = new_mr(pd, access, 0, u64::MAX, Backing::Odp(OdpPages::new(mem)))?;
    let info = mr.info(0, u64::MAX);
    Ok((mr, info))
}

pub(crate) fn rereg(
    mr: &Mr<Roxe>,
    what: Rereg,
    args: &UserMrArgs,
    pd: &Pd<Roxe>,
    udata: Option<&UData<'_>>,
) -> Result<Option<(RoxeMr, MrInfo)>> {
    let this = mr.data();
    if !matches!(this.data.backing, Backing::User(_)) {
        return Err(EINVAL);
    }
    // Not under bound windows (IBA 10.6.7.2.6, as rxe): they rest on the
    // MR's pages, rights and PD. (A bind racing this call is caught where
    // it matters: `dereg` of the old MR checks again under the lock.)
    if this.data.windows.load(Ordering::Relaxed) != 0 {
        return Err(EINVAL);
    }
    let access = if what.access {
        // Paging on demand is chosen at registration, not changed later.
        if args.access & access::ON_DEMAND != 0 {
            return Err(EINVAL);
        }
        check_access(args.access)?
    } else {
        this.data.access.load(Ordering::Acquire)
    };
    if what.translation {
        // New pages: a new MR with a new key replaces the old one.
        let new = UserMrArgs { access, ..*args };
        return reg_user(pd, &new, udata).map(Some);
    }
    if let Some(u) = udata {
        u.expect_no_input()?;
    }
    // Rights change in place, over the pages pinned at registration: pages
    // pinned read-only (no write right then) cannot become writable, or a
    // read-only mapping of a file the caller may not write would be
    // written through RDMA. Re-pinning needs a new translation.
    if let Backing::User(r) = &this.data.backing {
        if what.access && access::needs_writable_pin(access) && !r.writable() {
            return Err(EACCES);
        }
    }
    // Access and PD change in place; the key stays. (The core swaps its
    // own PD pointer once this returns.)
    this.data.access.store(access, Ordering::Release);
    if what.pd {
        this.data.pd.store(pd.id(), Ordering::Release);
    }
    Ok(None)
}

/// `ibv_advise_mr`: faults in (or, with `PrefetchNoFault`, maps what is
/// present of) the ranges of ODP MRs of `pd` that `sges` name. With
/// `flush` it is done before this returns; otherwise it runs on the fault
/// queue, best effort, as prefetching is only a hint.
pub(crate) fn advise(pd: &Pd<Roxe>, advice: Advice, flush: bool, sges: &[AdviseSge]) -> Result {
    let write = advice == Advice::PrefetchWrite;
    let fault = advice != Advice::PrefetchNoFault;
    let keys = &pd.device().data().mr_table;
    for s in sges {
        // A bad key is an error even when the work is queued.
        let mr = crate::keys::odp_mr(keys, s.lkey, pd.id())?;
        if flush {
            mr.prefetch(s.addr, s.length, write, fault)?;
            continue;
        }
        if write && mr.access() & access::LOCAL_WRITE == 0 {
            return Err(EPERM);
        }
        let (addr, length) = (s.addr, s.length);
        // Best effort: a prefetch that cannot be queued, or fails later,
        // only leaves the pages to be faulted when used.
        let _ = crate::rdma::odp::spawn(move || {
            let _ = mr.prefetch(addr, length, write, fault);
        });
    }
    Ok(())
}

/// The most pages a fast-registration MR maps.
pub(crate) const MAX_FAST_PAGES: u32 = 512;

/// `alloc_mr(IB_MR_TYPE_MEM_REG)`: an MR for kernel consumers to map with
/// `ib_map_mr_sg` and register with `IB_WR_REG_MR`. Invalid until then.
pub(crate) fn alloc_fast(pd: &Pd<Roxe>, max_num_sg: u32) -> Result<(RoxeMr, MrInfo)> {
    if max_num_sg == 0 || max_num_sg > MAX_FAST_PAGES {
        return Err(EINVAL);
    }
    let mut pages = KVec::with_capacity(max_num_sg as usize, GFP_KERNEL)?;
    for _ in 0..max_num_sg {
        pages.push(AtomicU64::new(0), GFP_KERNEL)?;
    }
    let fast = FastPages {
        pages,
        count: AtomicU32::new(0),
        shift: AtomicU32::new(12),
        first: AtomicU64::new(0),
    };
    let mr = new_mr(pd, 0, 0, 0, Backing::Fast(fast))?;
    let info = mr.info(0, 0);
    Ok((mr, info))
}

/// `ib_map_mr_sg` starts: the page list empties, for pages of `page_size`.
pub(crate) fn map_begin(mr: &RoxeMr, page_size: u32) -> Result {
    let Backing::Fast(f) = &mr.data.backing else {
        return Err(EINVAL);
    };
    if !page_size.is_power_of_two() || page_size < 512 {
        return Err(EINVAL);
    }
    f.count.store(0, Ordering::Relaxed);
    f.shift.store(page_size.trailing_zeros(), Ordering::Relaxed);
    Ok(())
}

/// The next page of an `ib_map_mr_sg`; fails once the list is full.
pub(crate) fn map_page(mr: &RoxeMr, addr: u64) -> Result {
    let Backing::Fast(f) = &mr.data.backing else {
        return Err(EINVAL);
    };
    let n = f.count.load(Ordering::Relaxed) as usize;
    let slot = f.pages.get(n).ok_or(ENOMEM)?;
    slot.store(addr, Ordering::Relaxed);
    // CAST: below the list's length, a u32.
    f.count.store(n as u32 + 1, Ordering::Relaxed);
    Ok(())
}

/// `ib_map_mr_sg` is done: the range starts at `iova`.
pub(crate) fn map_end(mr: &RoxeMr, iova: u64) {
    if let Backing::Fast(f) = &mr.data.backing {
        let mask = (1u64 << f.shift.load(Ordering::Relaxed)) - 1;
        f.first.store(iova & mask, Ordering::Relaxed);
    }
}

/// Deregisters an MR; refused with `EINVAL` while memory windows are bound
/// to it (IBA 10.6.7.2.6, as rxe), which would otherwise reach through a
/// stale key whatever the index comes to hold next.
pub(crate) fn dereg(mr: &Mr<Roxe>) -> Result {
    let dev = mr.device().data();
    let index = mr.data().index;
    // Checked and removed under one hold of the lock that binds take.
    let gone = dev.mr_table.locked(|t| match t.get(index) {
        Some(KeyEntry::Mr(m)) if m.windows.load(Ordering::Relaxed) != 0 => Err(EINVAL),
        _ => Ok(t.remove(index)),
    })?;
    // A remap still queued for a dma-buf MR leaves it alone from now on.
    if let Some(KeyEntry::Mr(m)) = &gone {
        m.valid.store(false, Ordering::Release);
    }
    // The entry (a reference to the MR's data) goes after the lock.
    drop(gone);
    dev.mrs.give_back();
    Ok(())
}
