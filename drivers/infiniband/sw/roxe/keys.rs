// SPDX-License-Identifier: GPL-2.0

//! The key table: what an lkey or rkey names (an MR's data, a memory
//! window), and every check a key must pass before memory is touched
//! through it: owner PD, validity, rights, range, window binding. The data
//! path and the MR and MW verbs share it; it knows nothing of them.
//!
//! Keys are `index << 8 | tag`, with the index from the device's MR table
//! (reused as late as possible) and a random 8-bit tag, so a stale key
//! names a new MR only if both the index was recycled and the tag repeats.

use crate::odp::OdpPages;
use crate::proto::access::Window;
use crate::proto::access::{self, AccessError};
use crate::rdma::errno::eopnotsupp;
use crate::rdma::mr::KernelMemory;
use crate::rdma::mw::MwType;
use crate::rdma::odp::{self, Miss};
use crate::rdma::umem::PinnedRange;
use crate::table::Table;
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use kernel::error::code::{EAGAIN, EINVAL, ENOENT, EPERM};
use kernel::prelude::*;
use kernel::sync::Arc;

/// The device's key table: MRs and memory windows by key index.
pub(crate) type KeyTable = Table<KeyEntry>;

/// How an MR reaches memory.
pub(crate) enum Backing {
    /// All of kernel memory (`get_dma_mr`), by kernel virtual address.
    Dma,
    /// Pinned user pages.
    User(PinnedRange),
    /// Kernel pages a consumer mapped with `ib_map_mr_sg` (`alloc_mr`).
    Fast(FastPages),
    /// User memory paged on demand: nothing pinned.
    Odp(OdpPages),
}

/// Queues a fault of `len` bytes at offset `off` of `mr`, an ODP MR whose
/// access just missed, unless one of it is queued already; or, for a
/// dma-buf MR whose buffer moved, a remap of the buffer. Any context.
fn request_fault(mr: &Arc<MrData>, off: usize, len: usize, write: bool) {
    if let Backing::User(r) = &mr.backing {
        request_remap(mr, r);
        return;
    }
    let Backing::Odp(o) = &mr.backing else {
        return;
    };
    if !o.start_fault() {
        return;
    }
    let held = mr.clone();
    let queued = odp::spawn(move || {
        if let Backing::Odp(o) = &held.backing {
            o.fault(off, len, write);
        }
    });
    if queued.is_err() {
        // Memory is short: the next miss tries again.
        o.cancel_fault();
    }
}

/// Queues a remap of the dma-buf under `r`, a range of `mr`, unless one is
/// queued already or the buffer is broken.
fn request_remap(mr: &Arc<MrData>, r: &PinnedRange) {
    let Some(b) = r.dmabuf() else {
        return;
    };
    if !b.start_remap() {
        return;
    }
    let held = mr.clone();
    let queued = odp::spawn(move || {
        // A deregistered MR is not mapped again: its buffer goes with this
        // last reference.
        if !held.valid.load(Ordering::Acquire) {
            return;
        }
        if let Some(b) = held.dmabuf() {
            // Repeated failures mark the buffer broken: later accesses are
            // refused.
            let _ = b.remap();
        }
    });
    if queued.is_err() {
        // Memory is short: give the claim back; the next miss tries again.
        b.remap_cancelled();
    }
}

/// The key error for an access to pinned memory or a dma-buf `r` that
/// failed with `e`: a dma-buf that moved and is not mapped again yet is
/// absent (a remap is asked for), unless mapping it failed for good.
fn range_miss(r: &PinnedRange, e: Error, off: usize, len: usize, write: bool) -> KeyError {
    match r.dmabuf() {
        Some(b) if e == EAGAIN && b.broken() => KeyError::Access,
        Some(_) if e == EAGAIN => KeyError::Absent { off, len, write },
        _ => KeyError::Bounds,
    }
}

/// The key error for a miss `m` of `len` bytes at offset `off` of ODP
/// memory `o`.
fn miss(o: &OdpPages, m: Miss, off: usize, len: usize, write: bool) -> KeyError {
    match m {
        Miss::Bounds => KeyError::Bounds,
        Miss::Absent if !o.wait_for_fault() => KeyError::Access,
        Miss::Absent => KeyError::Absent { off, len, write },
    }
}

/// The ODP MR named by local key `lkey` of PD `pd`, for `ibv_advise_mr`:
/// `ENOENT` if the key names no such MR.
pub(crate) fn odp_mr(keys: &KeyTable, lkey: u32, pd: usize) -> Result<Arc<MrData>> {
    keys.with(lkey >> 8, |e| match e {
        KeyEntry::Mr(m) if m.usable(lkey, pd) && matches!(m.backing, Backing::Odp(_)) => {
            Some(m.clone())
        }
        _ => None,
    })
    .flatten()
    .ok_or(ENOENT)
}

impl MrData {
    /// The dma-buf of a dma-buf MR.
    pub(crate) fn dmabuf(&self) -> Option<&crate::rdma::umem::DmaBuf> {
        match &self.backing {
            Backing::User(r) => r.dmabuf(),
            _ => None,
        }
    }

    /// Faults in (`fault`) or maps what is present of (`!fault`) `len`
    /// bytes at `va` of this ODP MR, for writing too if `write`:
    /// `ibv_advise_mr`. Sleeps. `EPERM` for a write to read-only memory,
    /// `EINVAL` for a range outside the MR.
    pub(crate) fn prefetch(&self, va: u64, len: u32, write: bool, fault: bool) -> Result {
        let Backing::Odp(o) = &self.backing else {
            return Err(ENOENT);
        };
        if write && !o.writable() {
            return Err(EPERM);
        }
        let off = self.check(va, len, 0).map_err(|_| EINVAL)?;
        o.map(off, len as usize, write, !fault)
    }
}

/// The page list of a fast-registration MR. `map_mr_sg` fills it while
/// the MR is invalid; the data path reads it once `IB_WR_REG_MR` made the
/// MR valid. Atomics keep a consumer that maps a busy MR (a bug of its
/// own) from racing the data path.
pub(crate) struct FastPages {
    /// Kernel virtual addresses of the pages (roxe uses virtual DMA).
    pub(crate) pages: KVec<AtomicU64>,
    pub(crate) count: AtomicU32,
    pub(crate) shift: AtomicU32,
    /// Offset of the mapped range's first byte in the first page.
    pub(crate) first: AtomicU64,
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
    pub(crate) key: AtomicU32,
    /// The PD, which the core may swap with `ibv_rereg_mr`.
    pub(crate) pd: AtomicUsize,
    /// Set by `IB_WR_REG_MR` for fast-registration MRs.
    pub(crate) iova: AtomicU64,
    pub(crate) length: AtomicU64,
    /// Changed in place by `ibv_rereg_mr(IBV_REREG_MR_CHANGE_ACCESS)`.
    pub(crate) access: AtomicU32,
    /// Fast-registration MRs are valid between `IB_WR_REG_MR` and an
    /// invalidate; others always.
    pub(crate) valid: AtomicBool,
    /// Memory windows bound to the MR. Changed only under the key table's
    /// lock; while it is not 0 the MR cannot be deregistered or
    /// re-registered (IBA 10.6.7.2.6), so a window never outlives its MR.
    pub(crate) windows: AtomicU32,
    pub(crate) backing: Backing,
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
    /// An on-demand-paging MR's pages for `len` bytes at byte `off` of it
    /// are not mapped (for writing, if `write`); a fault was asked for.
    Absent { off: usize, len: usize, write: bool },
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
            Backing::Odp(o) => o.writable(),
            Backing::Dma | Backing::Fast(_) => true,
        }
    }

    pub(crate) fn key(&self) -> u32 {
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
            Backing::User(r) => r
                .write(off, src)
                .map_err(|e| range_miss(r, e, off, src.len(), true)),
            Backing::Dma => KernelMemory::write(off as u64, src).map_err(|_| KeyError::Bounds),
            Backing::Fast(f) => f.each(off, src.len(), |a, r| KernelMemory::write(a, &src[r])),
            Backing::Odp(o) => o
                .write(off, src)
                .map_err(|m| miss(o, m, off, src.len(), true)),
        }
    }

    /// Checks that `len` bytes at offset `off` (checked by [`check`]) can
    /// be read now: on ODP memory, that they are mapped. Copies nothing.
    ///
    /// [`check`]: MrData::check
    pub(crate) fn probe(&self, off: usize, len: usize) -> core::result::Result<(), KeyError> {
        match &self.backing {
            Backing::Odp(o) => o.present(off, len).map_err(|m| miss(o, m, off, len, false)),
            Backing::User(r) => match r.dmabuf() {
                Some(b) if !b.mapped() => Err(range_miss(r, EAGAIN, off, len, false)),
                _ => Ok(()),
            },
            _ => Ok(()),
        }
    }

    /// Copies bytes at offset `off` of the MR into `dst`.
    pub(crate) fn read(&self, off: usize, dst: &mut [u8]) -> core::result::Result<(), KeyError> {
        match &self.backing {
            Backing::User(r) => {
                let len = dst.len();
                r.read(off, dst)
                    .map_err(|e| range_miss(r, e, off, len, false))
            }
            Backing::Dma => KernelMemory::read(off as u64, dst).map_err(|_| KeyError::Bounds),
            Backing::Fast(f) => f.each(off, dst.len(), |a, r| KernelMemory::read(a, &mut dst[r])),
            Backing::Odp(o) => {
                let len = dst.len();
                o.read(off, dst).map_err(|m| miss(o, m, off, len, false))
            }
        }
    }
}

impl MrData {
    /// Applies `op` to the 64-bit word at byte offset `off` (checked by
    /// [`check`], 8-aligned) and returns the value it held. The key table's
    /// lock, held by [`with_key`], makes this atomic against other remote
    /// atomics. On ODP memory, a page mapped for reading only misses at the
    /// write, before anything changed, and the fault asked for is a write.
    ///
    /// [`check`]: MrData::check
    pub(crate) fn atomic(
        &self,
        off: usize,
        op: impl FnOnce(u64) -> u64,
    ) -> core::result::Result<u64, KeyError> {
        let mut b = [0u8; 8];
        self.read(off, &mut b).map_err(|e| match e {
            KeyError::Absent { off, len, .. } => KeyError::Absent {
                off,
                len,
                write: true,
            },
            e => e,
        })?;
        let orig = u64::from_ne_bytes(b);
        self.write(off, &op(orig).to_ne_bytes())?;
        Ok(orig)
    }
}

/// Runs `f` on the MR named by local key `key` if it belongs to PD `pd`
/// and is valid. The key table's lock is held meanwhile, so `dereg` waits
/// for `f` to finish.
pub(crate) fn with_key<R>(
    keys: &KeyTable,
    key: u32,
    pd: usize,
    f: impl FnOnce(&MrData) -> core::result::Result<R, KeyError>,
) -> core::result::Result<R, KeyError> {
    keys.with(key >> 8, |e| match e {
        KeyEntry::Mr(m) if m.usable(key, pd) => f(m).inspect_err(|e| fault_on_miss(m, e)),
        _ => Err(KeyError::BadKey),
    })
    .unwrap_or(Err(KeyError::BadKey))
}

/// After an access through `m` failed with `e`: a miss on an ODP MR asks
/// for the fault.
fn fault_on_miss(m: &Arc<MrData>, e: &KeyError) {
    if let KeyError::Absent { off, len, write } = *e {
        request_fault(m, off, len, write);
    }
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
    keys: &KeyTable,
    who: Asker,
    rkey: u32,
    va: u64,
    len: u32,
    need: u32,
    f: impl FnOnce(&MrData, usize) -> core::result::Result<R, KeyError>,
) -> core::result::Result<R, KeyError> {
    let Asker { pd, qpn } = who;
    keys.locked(|t| match t.get(rkey >> 8) {
        Some(KeyEntry::Mr(m)) if m.usable(rkey, pd) => {
            f(m, m.check(va, len, need)?).inspect_err(|e| fault_on_miss(m, e))
        }
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
                    f(m, m.check(at, len, mr_need)?).inspect_err(|e| fault_on_miss(m, e))
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
    keys: &KeyTable,
    rkey: u32,
    pd: usize,
    need: u32,
) -> core::result::Result<(), KeyError> {
    keys.locked(|t| match t.get(rkey >> 8) {
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
    keys: &KeyTable,
    pd: usize,
    qpn: u32,
    a: &BindArgs,
) -> core::result::Result<(), LocalError> {
    keys.locked(|t| {
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
pub(crate) fn remove_mw(keys: &KeyTable, index: u32) {
    let gone = keys.locked(|t| {
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
    keys: &KeyTable,
    pd: usize,
    qpn: Option<u32>,
    rkey: u32,
) -> core::result::Result<(), LocalError> {
    keys.locked(|t| match t.get_mut(rkey >> 8) {
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
    keys: &KeyTable,
    pd: usize,
    key: u32,
    access: u32,
    iova: u64,
    length: u64,
) -> core::result::Result<(), LocalError> {
    let access = check_access(access).map_err(|_| LocalError::Op)?;
    keys.with(key >> 8, |e| match e {
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

pub(crate) fn check_access(flags: u32) -> Result<u32> {
    access::check_mr(flags).map_err(|e| match e {
        AccessError::Invalid => EINVAL,
        AccessError::Unsupported => eopnotsupp(),
    })
}
