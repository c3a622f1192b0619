// SPDX-License-Identifier: GPL-2.0

//! Memory regions: DMA MRs for kernel consumers, and user MRs whose pages
//! are pinned through `ib_umem` and kept as a page list for the data path.
//!
//! Keys are `index << 8 | tag`, with the index from the device's MR table
//! (reused as late as possible) and a random 8-bit tag, so a stale key
//! names a new MR only if both the index was recycled and the tag repeats.

use crate::device::Roxe;
use crate::proto::access::{self, AccessError};
use crate::rdma::errno::eopnotsupp;
use crate::rdma::mr::{KernelMemory, Mr, MrInfo, Rereg, UserMrArgs};
use crate::rdma::pd::Pd;
use crate::rdma::random;
use crate::rdma::udata::UData;
use crate::rdma::umem::{PinnedRange, Umem};
use kernel::sync::Arc;
use kernel::error::code::EINVAL;
use core::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use kernel::prelude::*;

/// How an MR reaches memory.
pub(crate) enum Backing {
    /// All of kernel memory (`get_dma_mr`), by kernel virtual address.
    Dma,
    /// Pinned user pages.
    User(PinnedRange),
}

/// What the data path needs of an MR. Shared between the MR and the key
/// table, where the data path finds it by key.
pub(crate) struct MrData {
    key: u32,
    /// The PD, which the core may swap with `ibv_rereg_mr`.
    pd: AtomicUsize,
    iova: u64,
    /// Changed in place by `ibv_rereg_mr(IBV_REREG_MR_CHANGE_ACCESS)`.
    access: AtomicU32,
    backing: Backing,
}

/// An entry of the key table: MRs carry their data, MWs only hold a key.
pub(crate) enum KeyEntry {
    Mr(Arc<MrData>),
    Mw,
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
    /// `IB_ACCESS_*` rights.
    pub(crate) fn access(&self) -> u32 {
        self.access.load(Ordering::Acquire)
    }

    /// Checks that `len` bytes at `va` lie inside the MR and that `need`
    /// rights are granted; returns the byte offset into the MR.
    pub(crate) fn check(&self, va: u64, len: u32, need: u32) -> core::result::Result<usize, KeyError> {
        if self.access() & need != need {
            return Err(KeyError::Access);
        }
        let Backing::User(range) = &self.backing else {
            // A DMA MR spans kernel memory: the offset is the address.
            // CAST: kernel addresses fit a usize.
            return va.checked_add(u64::from(len)).map(|_| va as usize).ok_or(KeyError::Bounds);
        };
        let off = va.checked_sub(self.iova).ok_or(KeyError::Bounds)?;
        let end = off.checked_add(u64::from(len)).ok_or(KeyError::Bounds)?;
        if end > range.len() as u64 {
            return Err(KeyError::Bounds);
        }
        // CAST: below `range.len()`, a usize.
        Ok(off as usize)
    }

    /// Copies `src` into the MR at byte offset `off` (checked by [`check`]).
    ///
    /// [`check`]: MrData::check
    pub(crate) fn write(&self, off: usize, src: &[u8]) -> core::result::Result<(), KeyError> {
        match &self.backing {
            Backing::User(r) => r.write(off, src).map_err(|_| KeyError::Bounds),
            Backing::Dma => KernelMemory::write(off as u64, src).map_err(|_| KeyError::Bounds),
        }
    }

    /// Copies bytes at offset `off` of the MR into `dst`.
    pub(crate) fn read(&self, off: usize, dst: &mut [u8]) -> core::result::Result<(), KeyError> {
        match &self.backing {
            Backing::User(r) => r.read(off, dst).map_err(|_| KeyError::Bounds),
            Backing::Dma => KernelMemory::read(off as u64, dst).map_err(|_| KeyError::Bounds),
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
    pub(crate) fn atomic(&self, off: usize, op: impl FnOnce(u64) -> u64) -> core::result::Result<u64, KeyError> {
        let mut b = [0u8; 8];
        self.read(off, &mut b)?;
        let orig = u64::from_ne_bytes(b);
        self.write(off, &op(orig).to_ne_bytes())?;
        Ok(orig)
    }
}

/// Runs `f` on the MR named by `key` if it belongs to PD `pd`. The key
/// table's lock is held meanwhile, so `dereg` waits for `f` to finish.
pub(crate) fn with_key<R>(
    dev: &crate::device::RoxeDev,
    key: u32,
    pd: usize,
    f: impl FnOnce(&MrData) -> core::result::Result<R, KeyError>,
) -> core::result::Result<R, KeyError> {
    dev.mr_table
        .with(key >> 8, |e| match e {
            KeyEntry::Mr(m) if m.key == key && m.pd.load(Ordering::Acquire) == pd => f(m),
            _ => Err(KeyError::BadKey),
        })
        .unwrap_or(Err(KeyError::BadKey))
}

/// Per-MR state.
pub(crate) struct RoxeMr {
    index: u32,
    data: Arc<MrData>,
}

impl RoxeMr {
    /// `IB_ACCESS_*` rights.
    pub(crate) fn access(&self) -> u32 {
        self.data.access()
    }
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
    let index = match dev.mr_table.insert(KeyEntry::Mw) {
        Ok(i) => i,
        Err(e) => {
            dev.mrs.give_back();
            return Err(e);
        }
    };
    let data = MrData {
        key: index << 8 | tag,
        pd: AtomicUsize::new(pd.id()),
        iova,
        access: AtomicU32::new(access),
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
    let key = mr.data.key;
    Ok((mr, MrInfo { lkey: key, rkey: key, iova: 0, length: u64::MAX }))
}

pub(crate) fn reg_user(pd: &Pd<Roxe>, args: &UserMrArgs, udata: Option<&UData<'_>>) -> Result<(RoxeMr, MrInfo)> {
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
    let key = mr.data.key;
    Ok((mr, MrInfo { lkey: key, rkey: key, iova: args.iova, length: args.length }))
}

pub(crate) fn rereg(
    mr: &Mr<Roxe>,
    what: Rereg,
    args: &UserMrArgs,
    pd: &Pd<Roxe>,
    udata: Option<&UData<'_>>,
) -> Result<Option<(RoxeMr, MrInfo)>> {
    let this = mr.data();
    if matches!(this.data.backing, Backing::Dma) {
        return Err(EINVAL);
    }
    let access = if what.access { check_access(args.access)? } else { this.access() };
    if what.translation {
        // New pages: a new MR with a new key replaces the old one.
        let new = UserMrArgs { access, ..*args };
        return reg_user(pd, &new, udata).map(Some);
    }
    if let Some(u) = udata {
        u.expect_no_input()?;
    }
    // Access and PD change in place; the key stays. (The core swaps its
    // own PD pointer once this returns.)
    this.data.access.store(access, Ordering::Release);
    if what.pd {
        this.data.pd.store(pd.id(), Ordering::Release);
    }
    Ok(None)
}

pub(crate) fn dereg(mr: &Mr<Roxe>) -> Result {
    release_key(mr.device().data(), mr.data().index);
    Ok(())
}
