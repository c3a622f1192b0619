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
use crate::rdma::mr::{Mr, MrInfo, Rereg, UserMrArgs};
use crate::rdma::pd::Pd;
use crate::rdma::random;
use crate::rdma::udata::UData;
use crate::rdma::umem::{PinnedPage, Umem};
use kernel::alloc::KVec;
use kernel::error::code::EINVAL;
use core::sync::atomic::{AtomicU32, Ordering};
use kernel::prelude::*;

/// How an MR reaches memory.
#[allow(dead_code)] // Read by the data path (issue 4).
pub(crate) enum Backing {
    /// All of kernel memory (`get_dma_mr`).
    Dma,
    /// Pinned user pages.
    User {
        /// Keeps the pages pinned.
        _umem: Umem,
        /// The pages, in address order.
        pages: KVec<PinnedPage>,
        /// Offset of the first byte into the first page.
        offset: usize,
    },
}

/// Per-MR state.
#[allow(dead_code)] // Read by the data path (issue 4).
pub(crate) struct RoxeMr {
    index: u32,
    key: u32,
    /// Changed in place by `ibv_rereg_mr(IBV_REREG_MR_CHANGE_ACCESS)`.
    access: AtomicU32,
    backing: Backing,
}

#[allow(dead_code)] // Used by the data path (issue 4).
impl RoxeMr {
    /// The MR's key (lkey and rkey are equal).
    pub(crate) fn key(&self) -> u32 {
        self.key
    }

    /// `IB_ACCESS_*` rights.
    pub(crate) fn access(&self) -> u32 {
        self.access.load(Ordering::Acquire)
    }

    /// Where the MR's bytes live.
    pub(crate) fn backing(&self) -> &Backing {
        &self.backing
    }
}

fn check_access(flags: u32) -> Result<u32> {
    access::check_mr(flags).map_err(|e| match e {
        AccessError::Invalid => EINVAL,
        AccessError::Unsupported => eopnotsupp(),
    })
}

/// Takes an index and makes a key for a new MR.
fn new_key(pd: &Pd<Roxe>) -> Result<(u32, u32)> {
    let dev = pd.device().data();
    dev.mrs.take()?;
    let tag = random::u32() & 0xff;
    match dev.mr_table.insert(tag) {
        Ok(index) => Ok((index, index << 8 | tag)),
        Err(e) => {
            dev.mrs.give_back();
            Err(e)
        }
    }
}

fn release_key(pd_dev: &crate::device::RoxeDev, index: u32) {
    pd_dev.mr_table.remove(index);
    pd_dev.mrs.give_back();
}

pub(crate) fn get_dma(pd: &Pd<Roxe>, access: u32) -> Result<(RoxeMr, MrInfo)> {
    let access = check_access(access)?;
    let (index, key) = new_key(pd)?;
    let info = MrInfo { lkey: key, rkey: key, iova: 0, length: u64::MAX };
    Ok((RoxeMr { index, key, access: AtomicU32::new(access), backing: Backing::Dma }, info))
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
    let pages = umem.pages()?;
    let offset = umem.offset();
    let (index, key) = new_key(pd)?;
    let info = MrInfo { lkey: key, rkey: key, iova: args.iova, length: args.length };
    let mr = RoxeMr {
        index,
        key,
        access: AtomicU32::new(access),
        backing: Backing::User { _umem: umem, pages, offset },
    };
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
    if matches!(this.backing, Backing::Dma) {
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
    // Access (and PD, which the core swaps) change in place; the key stays.
    this.access.store(access, Ordering::Release);
    Ok(None)
}

pub(crate) fn dereg(mr: &Mr<Roxe>) -> Result {
    release_key(mr.device().data(), mr.data().index);
    Ok(())
}
