// SPDX-License-Identifier: GPL-2.0

//! Module parameters an administrator tunes at run time
//! (`/sys/module/roxe/parameters/`), read on every use. `rust/helpers.c`
//! declares them.

use crate::bindings as b;
use crate::proto::dcqcn::Knobs;

// The C defaults are rust/proto's.
const _: () = {
    let d = Knobs::DEFAULT;
    assert!(d.time_reset_us == b::ROXE_DCQCN_TIME_RESET_US);
    assert!(d.ai_rate_kbps == b::ROXE_DCQCN_AI_RATE_KBPS);
    assert!(d.hai_rate_kbps == b::ROXE_DCQCN_HAI_RATE_KBPS);
    assert!(d.min_rate_kbps == b::ROXE_DCQCN_MIN_RATE_KBPS);
    assert!(d.byte_reset == b::ROXE_DCQCN_BYTE_RESET);
    assert!(d.threshold == b::ROXE_DCQCN_THRESHOLD);
    assert!(d.g_shift == b::ROXE_DCQCN_G_SHIFT);
    assert!(d.alpha_period_us == b::ROXE_DCQCN_ALPHA_PERIOD_US);
    assert!(d.reduce_period_us == b::ROXE_DCQCN_REDUCE_PERIOD_US);
    // The bound the parameter keeps is the one `Params::tuned` applies.
    assert!(b::ROXE_DCQCN_G_SHIFT_MAX == 16);
};

/// The rate a QP starts at and returns to, kbit/s: 100 Gbit/s, above what
/// any link a software device runs on carries, so a QP without CNPs is
/// never held back. Not a parameter; `dcqcn_min_rate_kbps` stays at most
/// this.
pub(crate) const LINE_KBPS: u64 = b::ROXE_DCQCN_LINE_KBPS as u64;

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
