// SPDX-License-Identifier: GPL-2.0

//! The kernel's random numbers.

use crate::bindings;

/// A random `u32` from the kernel's CSPRNG.
pub(crate) fn u32() -> u32 {
    // SAFETY: No preconditions.
    unsafe { bindings::get_random_u32() }
}
