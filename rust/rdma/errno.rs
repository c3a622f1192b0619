// SPDX-License-Identifier: GPL-2.0

//! Error numbers that verbs return and the 6.12 kernel crate does not name.

use crate::bindings;
use kernel::error::Error;

/// `EOPNOTSUPP` (95), what user space expects for an unsupported verb or
/// option. The kernel crate only has the kernel-internal `ENOTSUPP` (524).
pub(crate) fn eopnotsupp() -> Error {
    // CAST: a small positive errno constant.
    Error::from_errno(-(bindings::EOPNOTSUPP as i32))
}
