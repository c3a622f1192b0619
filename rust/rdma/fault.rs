// SPDX-License-Identifier: GPL-2.0

//! Test-only fault injection: roxe's own, because the test kernel is built
//! without `CONFIG_FAULT_INJECTION`. Each point is a module parameter that
//! counts down (`rust/helpers.c` declares it); production leaves them at 0
//! and nothing fails.

use core::sync::atomic::{AtomicU32, Ordering};

/// Counts the parameter at `knob` down: with N written there, the Nth call
/// from then on returns true (once), every other call false.
///
/// # Safety
///
/// `knob` must be the address of one of roxe's fault parameters.
unsafe fn fires(knob: *mut u32) -> bool {
    // SAFETY: Per the contract `knob` is a module parameter, a static
    // `unsigned int` that lives as long as the module and is suitably
    // aligned for an `AtomicU32`. Besides this countdown, only the
    // parameter's sysfs store writes it, with one aligned word-sized store,
    // which cannot tear.
    let n = unsafe { AtomicU32::from_ptr(knob) };
    n.fetch_update(Ordering::AcqRel, Ordering::Acquire, |c| c.checked_sub(1)) == Ok(1)
}

/// Whether this call is the one `/sys/module/roxe/parameters/fail_qp_table`
/// chose to fail.
pub(crate) fn fail_qp_table() -> bool {
    // SAFETY: The helper returns the address of that module parameter.
    unsafe { fires(crate::bindings::roxe_fail_qp_table()) }
}

/// Whether this call is the one `/sys/module/roxe/parameters/fail_cq_init`
/// chose to fail.
pub(crate) fn fail_cq_init() -> bool {
    // SAFETY: The helper returns the address of that module parameter.
    unsafe { fires(crate::bindings::roxe_fail_cq_init()) }
}

/// Whether this call is the one `/sys/module/roxe/parameters/fail_srq_init`
/// chose to fail.
pub(crate) fn fail_srq_init() -> bool {
    // SAFETY: The helper returns the address of that module parameter.
    unsafe { fires(crate::bindings::roxe_fail_srq_init()) }
}
