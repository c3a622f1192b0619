// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The provider's device object.

use crate::abi::verbs;

/// A roxe device: libibverbs' `verbs_device` followed by roxe's own state.
///
/// `alloc_device` allocates it zero-filled with `calloc`, `uninit_device`
/// frees it. libibverbs fills in `verbs` after `alloc_device` returns.
///
/// # Invariants
///
/// An all-zero `Device` is a valid value: every field is an integer, a raw
/// pointer or a nullable function pointer. Fields added later must keep this.
#[repr(C)]
pub struct Device {
    /// libibverbs' part; must stay first, since libibverbs only sees this.
    pub verbs: verbs::Device,
}
