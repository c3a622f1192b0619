// SPDX-License-Identifier: GPL-2.0

//! Address handles: where UD datagrams go. Each AH is entered in the
//! device's AH table; user-space UD work requests name it by that number
//! (`ah_num`), which the kernel looks up and never trusts blindly.
//!
//! The numbers are device-wide, but an AH is only usable by a QP of its own
//! PD ([`crate::tx::ah_with`]): a process cannot send through another process's AH by
//! guessing its number, and a user QP never through a kernel AH.

use crate::device::{Roxe, RoxeDev};
use crate::limits::PORT;
use crate::rdma::ah::{flags_for, AhAttr, GidType};
use crate::rdma::device::Device;
use crate::rdma::pd::Pd;
use crate::rdma::udata::UData;
use crate::tx::AhInfo;
use crate::uapi::CreateAhResp;
use kernel::error::code::EINVAL;
use kernel::prelude::*;

/// Per-AH state: its number in the device's AH table.
pub(crate) struct RoxeAh {
    num: u32,
}

impl RoxeAh {
    /// The number UD work requests name the AH by.
    pub(crate) fn num(&self) -> u32 {
        self.num
    }
}

fn validate(attr: &AhAttr, pd: usize, user: bool) -> Result<AhInfo> {
    // RoCE needs a global route and a resolved RoCE v2 source GID.
    if !attr.is_roce || !attr.has_grh || attr.port != PORT {
        return Err(EINVAL);
    }
    let (sgid, kind) = attr.sgid.ok_or(EINVAL)?;
    if kind != GidType::RoceV2 {
        return Err(EINVAL);
    }
    // The flow label is 20 bits, and only those are kept: UCX passes the
    // complement of a path number (all ones for path 0) and relies on the
    // upper bits going, as rxe and RNICs drop them.
    let flow_label = attr.flow_label & 0xf_ffff;
    Ok(AhInfo {
        dgid: attr.dgid,
        sgid,
        dmac: attr.dmac,
        flow_label,
        hop_limit: attr.hop_limit,
        traffic_class: attr.traffic_class,
        sl: attr.sl,
        pd,
        user,
    })
}

pub(crate) fn create(
    dev: &Device<Roxe>,
    pd: &Pd<Roxe>,
    attr: &AhAttr,
    sleepable: bool,
    udata: Option<&UData<'_>>,
) -> Result<RoxeAh> {
    if let Some(u) = udata {
        u.expect_no_input()?;
    }
    let info = validate(attr, pd.id(), udata.is_some())?;
    let d = dev.data();
    d.ahs.take()?;
    let num = match d.ah_table.insert_with(info, flags_for(sleepable)) {
        Ok(n) => n,
        Err(e) => {
            d.ahs.give_back();
            return Err(e);
        }
    };
    if let Some(u) = udata {
        if let Err(e) = u.respond(&CreateAhResp {
            ah_num: num,
            _reserved: 0,
        }) {
            release(d, num);
            return Err(e);
        }
    }
    Ok(RoxeAh { num })
}

fn release(d: &RoxeDev, num: u32) {
    d.ah_table.remove(num);
    d.ahs.give_back();
}

pub(crate) fn destroy(dev: &Device<Roxe>, ah: RoxeAh) {
    release(dev.data(), ah.num);
}
