// SPDX-License-Identifier: GPL-2.0

//! Memory windows. An MW gets its rkey from the same key space as MRs, so
//! no rkey ever names both. Binding (type 1 through `ibv_bind_mw`, type 2
//! through a work request) needs the send path and comes with issue 4.

use crate::device::Roxe;
use crate::rdma::device::Device;
use crate::rdma::mw::MwType;
use crate::rdma::random;
use crate::rdma::udata::UData;
use kernel::prelude::*;

/// Per-MW state.
pub(crate) struct RoxeMw {
    index: u32,
    #[allow(dead_code)] // Checked by binds (issue 4).
    mw_type: MwType,
}

pub(crate) fn alloc(dev: &Device<Roxe>, mw_type: MwType, udata: Option<&UData<'_>>) -> Result<(RoxeMw, u32)> {
    if let Some(u) = udata {
        u.expect_no_input()?;
    }
    let d = dev.data();
    d.mws.take()?;
    let tag = random::u32() & 0xff;
    match d.mr_table.insert(crate::mr::KeyEntry::Mw) {
        Ok(index) => Ok((RoxeMw { index, mw_type }, index << 8 | tag)),
        Err(e) => {
            d.mws.give_back();
            Err(e)
        }
    }
}

pub(crate) fn dealloc(dev: &Device<Roxe>, mw: RoxeMw) {
    let d = dev.data();
    d.mr_table.remove(mw.index);
    d.mws.give_back();
}
