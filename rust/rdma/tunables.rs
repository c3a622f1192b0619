// SPDX-License-Identifier: GPL-2.0

//! Module parameters an administrator tunes at run time
//! (`/sys/module/roxe/parameters/`), read on every use. `rust/helpers.c`
//! declares them.

use crate::proto::dcqcn::Knobs;

/// DCQCN's reaction point constants as the `dcqcn_*` parameters hold them
/// now, unchecked ([`crate::proto::dcqcn::Params::tuned`] bounds them).
pub(crate) fn dcqcn() -> Knobs {
    // SAFETY: The helper returns the address of a static that lives as
    // long as the module.
    let k = unsafe { crate::bindings::roxe_dcqcn_knobs() };
    macro_rules! field {
        ($f:ident) => {
            // SAFETY: `k` is valid and aligned (above). The parameters'
            // sysfs stores write each field with one aligned word-sized
            // store, so a read races with nothing that can tear; a stale
            // value is only the previous setting.
            unsafe { core::ptr::addr_of!((*k).$f).read_volatile() }
        };
    }
    Knobs {
        time_reset_us: field!(time_reset_us),
        ai_rate_kbps: field!(ai_rate_kbps),
        hai_rate_kbps: field!(hai_rate_kbps),
        min_rate_kbps: field!(min_rate_kbps),
        byte_reset: field!(byte_reset),
        threshold: field!(threshold),
        g_shift: field!(g_shift),
        alpha_period_us: field!(alpha_period_us),
        reduce_period_us: field!(reduce_period_us),
    }
}
