// SPDX-License-Identifier: GPL-2.0

//! Test-only fault injection: roxe's own, because the test kernel is built
//! without `CONFIG_FAULT_INJECTION`. Each point is a module parameter that
//! counts down (`rust/helpers.c` declares it); production leaves them at 0
//! and nothing fails.

use core::sync::atomic::{AtomicU32, Ordering};

/// Whether this call is the one `/sys/module/roxe/parameters/fail_qp_table`
/// chose to fail: with N written there, the Nth call from then on returns
/// true (once), every other call false.
pub(crate) fn fail_qp_table() -> bool {
    // SAFETY: The helper returns the address of the module parameter, a
    // static `unsigned int` that lives as long as the module and is
    // suitably aligned for an `AtomicU32`. Besides this countdown, only
    // the parameter's sysfs store writes it, with one aligned word-sized
    // store, which cannot tear.
    let n = unsafe { AtomicU32::from_ptr(crate::bindings::roxe_fail_qp_table()) };
    n.fetch_update(Ordering::AcqRel, Ordering::Acquire, |c| c.checked_sub(1)) == Ok(1)
}
