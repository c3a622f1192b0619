// SPDX-License-Identifier: GPL-2.0

//! Protection domains. A PD has no state of its own: it only scopes which
//! MRs, MWs, QPs and AHs may be used together, which the RDMA core's object
//! pointers already express.

use crate::device::Roxe;
use crate::rdma::device::Device;
use crate::rdma::udata::UData;
use kernel::prelude::*;

/// Per-PD state.
pub(crate) struct RoxePd;

pub(crate) fn alloc(dev: &Device<Roxe>, udata: Option<&UData<'_>>) -> Result<RoxePd> {
    if let Some(u) = udata {
        u.expect_no_input()?;
    }
    dev.data().pds.take()?;
    Ok(RoxePd)
}

pub(crate) fn dealloc(dev: &Device<Roxe>, _pd: RoxePd) {
    dev.data().pds.give_back();
}
