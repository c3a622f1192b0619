// SPDX-License-Identifier: GPL-2.0

//! Memory windows. An MW gets its rkey from the same key space as MRs, so
//! no rkey ever names both. Its binding lives in the key table
//! (`keys::MwState`): type 1 windows are bound with `ibv_bind_mw`, type 2
//! with a bind work request, and both through the send queue.

use crate::device::Roxe;
use crate::keys::{self, KeyEntry, MwState};
use crate::rdma::device::Device;
use crate::rdma::mw::MwType;
use crate::rdma::pd::Pd;
use crate::rdma::random;
use crate::rdma::udata::UData;
use kernel::prelude::*;

/// Per-MW state.
pub(crate) struct RoxeMw {
    index: u32,
}

pub(crate) fn alloc(
    dev: &Device<Roxe>,
    pd: &Pd<Roxe>,
    mw_type: MwType,
    udata: Option<&UData<'_>>,
) -> Result<(RoxeMw, u32)> {
    if let Some(u) = udata {
        u.expect_no_input()?;
    }
    let d = dev.data();
    d.mws.take()?;
    let tag = random::u32() & 0xff;
    match d.mr_table.insert(KeyEntry::Reserved) {
        Ok(index) => {
            let key = index << 8 | tag;
            d.mr_table
                .replace(index, KeyEntry::Mw(MwState::new(key, pd.id(), mw_type)));
            Ok((RoxeMw { index }, key))
        }
        Err(e) => {
            d.mws.give_back();
            Err(e)
        }
    }
}

pub(crate) fn dealloc(dev: &Device<Roxe>, mw: RoxeMw) {
    let d = dev.data();
    keys::remove_mw(&d.mr_table, mw.index);
    d.mws.give_back();
}
