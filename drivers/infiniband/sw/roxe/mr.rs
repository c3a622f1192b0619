// SPDX-License-Identifier: GPL-2.0

//! Memory regions: DMA MRs for kernel consumers, and user MRs whose pages
//! are pinned through `ib_umem` and kept as a page list for the data path.
//!
//! Fast-registration MRs (`alloc_mr`) map kernel pages given by
//! `ib_map_mr_sg` and become usable through `IB_WR_REG_MR`. Memory windows
//! share the key table: a bound window refers to its MR by key, so a window
//! whose MR is gone reaches nothing.
//!
//! Keys are `index << 8 | tag`, with the index from the device's MR table
//! (reused as late as possible) and a random 8-bit tag, so a stale key
//! names a new MR only if both the index was recycled and the tag repeats.

use crate::device::Roxe;
use crate::proto::access::Window;
use crate::proto::access::{self, AccessError};
use crate::rdma::errno::eopnotsupp;
use crate::rdma::mr::{KernelMemory, Mr, MrInfo, Rereg, UserMrArgs};
use crate::rdma::mw::MwType;
use crate::rdma::pd::Pd;
use crate::rdma::random;
use crate::rdma::udata::UData;
use crate::rdma::umem::{PinnedRange, Umem};
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use kernel::error::code::{EACCES, EINVAL, ENOMEM};
use kernel::prelude::*;
use kernel::sync::Arc;

/// How an MR reaches memory.
pub(crate) enum Backing {
    /// All of kernel memory (`get_dma_mr`), by kernel virtual address.
    Dma,
    /// Pinned user pages.
    User(PinnedRange),
    /// Kernel pages a consumer mapped with `ib_map_mr_sg` (`alloc_mr`).
    Fast(FastPages),
}

/// The page list of a fast-registration MR. `map_mr_sg` fills it while
/// the MR is invalid; the data path reads it once `IB_WR_REG_MR` made the
/// MR valid. Atomics keep a consumer that maps a busy MR (a bug of its
/// own) from racing the data path.
pub(crate) struct FastPages {
    /// Kernel virtual addresses of the pages (roxe uses virtual DMA).
    pages: KVec<AtomicU64>,
    count: AtomicU32,
    shift: AtomicU32,
    /// Offset of the mapped range's first byte in the first page.
    first: AtomicU64,
}

impl FastPages {
    /// Copies between the mapped pages, from byte `off` of the range, and
    /// `len` bytes through `f(kernel address, range in the buffer)`.
    fn each(
        &self,
        off: usize,
        len: usize,
        mut f: impl FnMut(u64, core::ops::Range<usize>) -> Result,
    ) -> core::result::Result<(), KeyError> {
        let shift = self.shift.load(Ordering::Relaxed);
        let size = 1u64 << shift;
        let count = self.count.load(Ordering::Relaxed) as usize;
        let mut pos = self.first.load(Ordering::Relaxed) + off as u64;
        let mut done = 0;
        while done < len {
            // CAST: below `count`, a usize.
            let page = (pos >> shift) as usize;
            if page >= count {
                return Err(KeyError::Bounds);
            }
            let inpage = pos & (size - 1);
            // CAST: at most one page.
            let n = ((size - inpage) as usize).min(len - done);
            let addr = self.pages[page].load(Ordering::Relaxed) + inpage;
            f(addr, done..done + n).map_err(|_| KeyError::Bounds)?;
            done += n;
            pos += n as u64;
        }
        Ok(())
    }

    /// Bytes the mapped pages hold after the first byte.
    fn span(&self) -> u64 {
        let n = u64::from(self.count.load(Ordering::Relaxed));
        (n << self.shift.load(Ordering::Relaxed)).saturating_sub(self.first.load(Ordering::Relaxed))
    }
}

/// What the data path needs of an MR. Shared between the MR and the key
/// table, where the data path finds it by key.
pub(crate) struct MrData {
    /// Changed by `IB_WR_REG_MR` (the low 8 bits only).
    key: AtomicU32,
    /// The PD, which the core may swap with `ibv_rereg_mr`.
    pd: AtomicUsize,
    /// Set by `IB_WR_REG_MR` for fast-registration MRs.
    iova: AtomicU64,
    length: AtomicU64,
    /// Changed in place by `ibv_rereg_mr(IBV_REREG_MR_CHANGE_ACCESS)`.
    access: AtomicU32,
    /// Fast-registration MRs are valid between `IB_WR_REG_MR` and an
    /// invalidate; others always.
    valid: AtomicBool,
    /// Memory windows bound to the MR. Changed only under the key table's
    /// lock; while it is not 0 the MR cannot be deregistered or
    /// re-registered (IBA 10.6.7.2.6), so a window never outlives its MR.
    windows: AtomicU32,
    backing: Backing,
}

/// The state of a memory window in the key table.
pub(crate) struct MwState {
    /// The current rkey; binds change its low 8 bits.
    key: u32,
    pd: usize,
    mw_type: MwType,
    /// The binding, if any, with the QP a type 2 window is bound to.
    bound: Option<(Window, u32)>,
}

impl MwState {
    /// An unbound window.
    pub(crate) fn new(key: u32, pd: usize, mw_type: MwType) -> Self {
        MwState {
            key,
            pd,
            mw_type,
            bound: None,
        }
    }
}

/// An entry of the key table: an MR's data, or a memory window.
pub(crate) enum KeyEntry {
    Mr(Arc<MrData>),
    Mw(MwState),
    /// An index taken while its entry is being made.
    Reserved,
}

/// Why an access through a key was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KeyError {
    /// No MR has this key, or it is in another PD.
    BadKey,
    /// The MR does not grant the access.
    Access,
    /// The range is not inside the MR.
    Bounds,
}

impl MrData {
    /// The `IB_ACCESS_*` rights the MR grants: those it was given, less any
    /// that would write to pages pinned read-only. `rereg` refuses to add
    /// write rights to such an MR, so this only matters if that check is
    /// ever bypassed; the data path and binds go through here either way.
    pub(crate) fn access(&self) -> u32 {
        access::effective(self.access.load(Ordering::Acquire), self.pinned_writable())
    }

    /// Whether the MR's memory may be written at all: user pages only if
    /// `ib_umem_get` pinned them for writing; kernel memory always.
    fn pinned_writable(&self) -> bool {
        match &self.backing {
            Backing::User(r) => r.writable(),
            Backing::Dma | Backing::Fast(_) => true,
        }
    }

    fn key(&self) -> u32 {
        self.key.load(Ordering::Relaxed)
    }

    fn usable(&self, key: u32, pd: usize) -> bool {
        self.key() == key
            && self.pd.load(Ordering::Acquire) == pd
            && self.valid.load(Ordering::Relaxed)
    }

    /// Checks that `len` bytes at `va` lie inside the MR and that `need`
    /// rights are granted; returns the byte offset into the MR.
    pub(crate) fn check(
        &self,
        va: u64,
        len: u32,
        need: u32,
    ) -> core::result::Result<usize, KeyError> {
        if self.access() & need != need {
            return Err(KeyError::Access);
        }
        if let Backing::Dma = self.backing {
            // A DMA MR spans kernel memory: the offset is the address.
            // CAST: kernel addresses fit a usize.
            return va
                .checked_add(u64::from(len))
                .map(|_| va as usize)
                .ok_or(KeyError::Bounds);
        }
        let off = va
            .checked_sub(self.iova.load(Ordering::Relaxed))
            .ok_or(KeyError::Bounds)?;
        let end = off.checked_add(u64::from(len)).ok_or(KeyError::Bounds)?;
        if end > self.length.load(Ordering::Relaxed) {
            return Err(KeyError::Bounds);
        }
        // CAST: below the MR's length, which fits memory.
        Ok(off as usize)
    }

    /// Copies `src` into the MR at byte offset `off` (checked by [`check`]).
    ///
    /// [`check`]: MrData::check
    pub(crate) fn write(&self, off: usize, src: &[u8]) -> core::result::Result<(), KeyError> {
        match &self.backing {
            Backing::User(r) => r.write(off, src).map_err(|_| KeyError::Bounds),
            Backing::Dma => KernelMemory::write(off as u64, src).map_err(|_| KeyError::Bounds),
            Backing::Fast(f) => f.each(off, src.len(), |a, r| KernelMemory::write(a, &src[r])),
        }
    }

    /// Copies bytes at offset `off` of the MR into `dst`.
    pub(crate) fn read(&self, off: usize, dst: &mut [u8]) -> core::result::Result<(), KeyError> {
        match &self.backing {
            Backing::User(r) => r.read(off, dst).map_err(|_| KeyError::Bounds),
            Backing::Dma => KernelMemory::read(off as u64, dst).map_err(|_| KeyError::Bounds),
            Backing::Fast(f) => f.each(off, dst.len(), |a, r| KernelMemory::read(a, &mut dst[r])),
        }
    }
}

impl MrData {
    /// Applies `op` to the 64-bit word at byte offset `off` (checked by
    /// [`check`], 8-aligned) and returns the value it held. The key table's
    /// lock, held by [`with_key`], makes this atomic against other remote
    /// atomics.
    ///
    /// [`check`]: MrData::check
    pub(crate) fn atomic(
        &self,
        off: usize,
        op: impl FnOnce(u64) -> u64,
    ) -> core::result::Result<u64, KeyError> {
        let mut b = [0u8; 8];
        self.read(off, &mut b)?;
        let orig = u64::from_ne_bytes(b);
        self.write(off, &op(orig).to_ne_bytes())?;
        Ok(orig)
    }
}

/// Runs `f` on the MR named by local key `key` if it belongs to PD `pd`
/// and is valid. The key table's lock is held meanwhile, so `dereg` waits
/// for `f` to finish.
pub(crate) fn with_key<R>(
    dev: &crate::device::RoxeDev,
    key: u32,
    pd: usize,
    f: impl FnOnce(&MrData) -> core::result::Result<R, KeyError>,
) -> core::result::Result<R, KeyError> {
    dev.mr_table
        .with(key >> 8, |e| match e {
            KeyEntry::Mr(m) if m.usable(key, pd) => f(m),
            _ => Err(KeyError::BadKey),
        })
        .unwrap_or(Err(KeyError::BadKey))
}

/// The responder QP a remote access arrives on: its PD and number.
#[derive(Clone, Copy)]
pub(crate) struct Asker {
    pub(crate) pd: usize,
    pub(crate) qpn: u32,
}

/// Runs `f(mr, offset)` for `len` bytes at `va` through remote key `rkey`,
/// which names an MR or a bound memory window of PD `pd`, if it grants
/// `need`. A type 2 window must be bound to QP `qpn`.
pub(crate) fn with_rkey<R>(
    dev: &crate::device::RoxeDev,
    who: Asker,
    rkey: u32,
    va: u64,
    len: u32,
    need: u32,
    f: impl FnOnce(&MrData, usize) -> core::result::Result<R, KeyError>,
) -> core::result::Result<R, KeyError> {
    let Asker { pd, qpn } = who;
    dev.mr_table.locked(|t| match t.get(rkey >> 8) {
        Some(KeyEntry::Mr(m)) if m.usable(rkey, pd) => f(m, m.check(va, len, need)?),
        Some(KeyEntry::Mw(w)) if w.key == rkey && w.pd == pd => {
            let Some((win, bound_qpn)) = w.bound else {
                return Err(KeyError::BadKey);
            };
            if w.mw_type == MwType::Two && bound_qpn != qpn {
                return Err(KeyError::BadKey);
            }
            let at = win
                .translate(va, u64::from(len), need)
                .ok_or(KeyError::Access)?;
            // A window's remote rights rest on the MR's: writing through it
            // needs the MR's local write still (and so a writable pin).
            let mr_need = if need & (access::REMOTE_WRITE | access::REMOTE_ATOMIC) != 0 {
                access::LOCAL_WRITE
            } else {
                0
            };
            match t.get(win.mr_key >> 8) {
                Some(KeyEntry::Mr(m)) if m.usable(win.mr_key, pd) => {
                    f(m, m.check(at, len, mr_need)?)
                }
                _ => Err(KeyError::BadKey),
            }
        }
        _ => Err(KeyError::BadKey),
    })
}

/// Checks that remote key `rkey` names a usable MR (not a window) of PD
/// `pd` that grants `need`, for an operation on the whole MR (a FLUSH with
/// the MR selectivity level, which names no range).
pub(crate) fn check_whole(
    dev: &crate::device::RoxeDev,
    rkey: u32,
    pd: usize,
    need: u32,
) -> core::result::Result<(), KeyError> {
    dev.mr_table.locked(|t| match t.get(rkey >> 8) {
        Some(KeyEntry::Mr(m)) if m.usable(rkey, pd) => {
            if m.access() & need == need {
                Ok(())
            } else {
                Err(KeyError::Access)
            }
        }
        _ => Err(KeyError::BadKey),
    })
}

/// Why a local memory operation failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LocalError {
    /// A bind was refused: the completion is a bind error.
    Bind,
    /// An invalidate or registration was refused.
    Op,
}

/// What a memory-window bind asks for, as a work request carries it.
pub(crate) struct BindArgs {
    pub(crate) new_key: u32,
    pub(crate) mr_lkey: u32,
    pub(crate) addr: u64,
    pub(crate) len: u64,
    pub(crate) access: u32,
    /// Whether it came through `ibv_bind_mw` (type 1) rather than a
    /// bind work request (type 2).
    pub(crate) type1_call: bool,
}

/// Binds the window named by `a.new_key`'s index, for QP `qpn` of PD `pd`.
pub(crate) fn bind(
    dev: &crate::device::RoxeDev,
    pd: usize,
    qpn: u32,
    a: &BindArgs,
) -> core::result::Result<(), LocalError> {
    dev.mr_table.locked(|t| {
        let mr = match t.get(a.mr_lkey >> 8) {
            Some(KeyEntry::Mr(m)) if m.usable(a.mr_lkey, pd) => Some((
                m.access(),
                m.iova.load(Ordering::Relaxed),
                m.length.load(Ordering::Relaxed),
                matches!(m.backing, Backing::Dma),
            )),
            _ => None,
        };
        let Some(KeyEntry::Mw(w)) = t.get_mut(a.new_key >> 8) else {
            return Err(LocalError::Bind);
        };
        let type1 = w.mw_type == MwType::One;
        if w.pd != pd || type1 != a.type1_call {
            return Err(LocalError::Bind);
        }
        // A type 2 window is bound once, with a new key, until invalidated.
        if !type1 && (w.bound.is_some() || w.key == a.new_key) {
            return Err(LocalError::Bind);
        }
        let win = match mr {
            // DMA MRs span all kernel memory: no window onto them.
            Some((acc, iova, len, false)) => {
                Window::bind(a.mr_lkey, a.addr, a.len, a.access, type1, acc, iova, len)
                    .map_err(|_| LocalError::Bind)?
            }
            _ if a.len == 0 && type1 => Window {
                mr_key: 0,
                addr: 0,
                len: 0,
                access: 0,
            },
            _ => return Err(LocalError::Bind),
        };
        w.key = a.new_key;
        let new = (win.len != 0 || !type1).then_some((win, qpn));
        // INVARIANT: a window with a binding counts once in its MR's
        // `windows` (a type 1 rebind moves it from the old MR).
        let old = core::mem::replace(&mut w.bound, new);
        if let Some((old, _)) = old {
            count_window(t, &old, false);
        }
        if let Some((win, _)) = new {
            count_window(t, &win, true);
        }
        Ok(())
    })
}

/// Counts a window bound to (or unbound from) the MR it lies in. Called
/// under the key table's lock.
fn count_window(t: &crate::table::Entries<'_, KeyEntry>, win: &Window, bound: bool) {
    // The MR cannot have gone while the window was bound to it (`dereg`
    // refuses), so the index still names it even if its key changed.
    if let Some(KeyEntry::Mr(m)) = t.get(win.mr_key >> 8) {
        if bound {
            m.windows.fetch_add(1, Ordering::Relaxed);
        } else {
            let dec = |n: u32| n.checked_sub(1);
            let _ = m
                .windows
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, dec);
        }
    }
}

/// Removes memory window `index` from the key table, unbinding it from its
/// MR.
pub(crate) fn remove_mw(dev: &crate::device::RoxeDev, index: u32) {
    let gone = dev.mr_table.locked(|t| {
        let gone = t.remove(index);
        if let Some(KeyEntry::Mw(MwState {
            bound: Some((win, _)),
            ..
        })) = &gone
        {
            count_window(t, win, false);
        }
        gone
    });
    drop(gone);
}

/// Invalidates `rkey`: a fast-registration MR, or a type 2 window (bound,
/// for a remote invalidate, to QP `qpn`). Both must be in PD `pd`.
pub(crate) fn invalidate(
    dev: &crate::device::RoxeDev,
    pd: usize,
    qpn: Option<u32>,
    rkey: u32,
) -> core::result::Result<(), LocalError> {
    dev.mr_table.locked(|t| match t.get_mut(rkey >> 8) {
        Some(KeyEntry::Mr(m))
            if m.key() == rkey
                && m.pd.load(Ordering::Acquire) == pd
                && matches!(m.backing, Backing::Fast(_)) =>
        {
            // Not under bound windows (as rxe).
            if m.windows.load(Ordering::Relaxed) != 0 {
                return Err(LocalError::Op);
            }
            m.valid.store(false, Ordering::Relaxed);
            Ok(())
        }
        Some(KeyEntry::Mw(w)) if w.key == rkey && w.pd == pd && w.mw_type == MwType::Two => {
            match w.bound {
                Some((win, b)) if qpn.map_or(true, |q| q == b) => {
                    w.bound = None;
                    count_window(t, &win, false);
                    Ok(())
                }
                _ => Err(LocalError::Op),
            }
        }
        _ => Err(LocalError::Op),
    })
}

/// `IB_WR_REG_MR`: makes fast-registration MR `key >> 8` of PD `pd` valid
/// under `key`, for `length` bytes at `iova`, with rights `access`.
pub(crate) fn fast_register(
    dev: &crate::device::RoxeDev,
    pd: usize,
    key: u32,
    access: u32,
    iova: u64,
    length: u64,
) -> core::result::Result<(), LocalError> {
    let access = check_access(access).map_err(|_| LocalError::Op)?;
    dev.mr_table
        .with(key >> 8, |e| match e {
            KeyEntry::Mr(m)
                if m.pd.load(Ordering::Acquire) == pd && !m.valid.load(Ordering::Relaxed) =>
            {
                let Backing::Fast(f) = &m.backing else {
                    return Err(LocalError::Op);
                };
                if length > f.span() || iova.checked_add(length).is_none() {
                    return Err(LocalError::Op);
                }
                m.key.store(key, Ordering::Relaxed);
                m.access.store(access, Ordering::Release);
                m.iova.store(iova, Ordering::Relaxed);
                m.length.store(length, Ordering::Relaxed);
                m.valid.store(true, Ordering::Relaxed);
                Ok(())
            }
            _ => Err(LocalError::Op),
        })
        .unwrap_or(Err(LocalError::Op))
}

/// Per-MR state.
pub(crate) struct RoxeMr {
    index: u32,
    data: Arc<MrData>,
}

fn check_access(flags: u32) -> Result<u32> {
    access::check_mr(flags).map_err(|e| match e {
        AccessError::Invalid => EINVAL,
        AccessError::Unsupported => eopnotsupp(),
    })
}

/// Makes the data of a new MR, with a new key, and enters it in the key
/// table.
fn new_mr(pd: &Pd<Roxe>, access: u32, iova: u64, backing: Backing) -> Result<RoxeMr> {
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

fn release_key(pd_dev: &crate::device::RoxeDev, index: u32) {
    pd_dev.mr_table.remove(index);
    pd_dev.mrs.give_back();
}

pub(crate) fn get_dma(pd: &Pd<Roxe>, access: u32) -> Result<(RoxeMr, MrInfo)> {
    let access = check_access(access)?;
    let mr = new_mr(pd, access, 0, Backing::Dma)?;
    let key = mr.data.key();
    Ok((
        mr,
        MrInfo {
            lkey: key,
            rkey: key,
            iova: 0,
            length: u64::MAX,
        },
    ))
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
    if args.length == 0 || args.length > crate::limits::MAX_MR_SIZE {
        return Err(EINVAL);
    }
    // The last byte's address must not wrap, on either side.
    args.start.checked_add(args.length - 1).ok_or(EINVAL)?;
    args.iova.checked_add(args.length - 1).ok_or(EINVAL)?;
    let umem = Umem::get(pd.device(), args.start, args.length, access)?;
    let range = PinnedRange::new(umem, args.length)?;
    let mr = new_mr(pd, access, args.iova, Backing::User(range))?;
    let key = mr.data.key();
    Ok((
        mr,
        MrInfo {
            lkey: key,
            rkey: key,
            iova: args.iova,
            length: args.length,
        },
    ))
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
    let mr = new_mr(pd, 0, 0, Backing::Fast(fast))?;
    let key = mr.data.key();
    Ok((
        mr,
        MrInfo {
            lkey: key,
            rkey: key,
            iova: 0,
            length: 0,
        },
    ))
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
    // The entry (a reference to the MR's data) goes after the lock.
    drop(gone);
    dev.mrs.give_back();
    Ok(())
}
