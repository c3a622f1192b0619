// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Error numbers, as libibverbs and its callers expect them.

use core::ffi::c_int;

/// A positive `errno` value (Linux numbering).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Errno(c_int);

impl Errno {
    /// No such entry: an empty CQ in the extended polling interface.
    pub const ENOENT: Self = Self(2);
    /// I/O error: a corrupt ring, or a libibverbs failure without a reason.
    pub const EIO: Self = Self(5);
    /// Out of memory.
    pub const ENOMEM: Self = Self(12);
    /// Busy: a PD that parent domains still stand for.
    pub const EBUSY: Self = Self(16);
    /// Invalid argument.
    pub const EINVAL: Self = Self(22);
    /// Protocol error: the kernel's response does not follow roxe's ABI.
    pub const EPROTO: Self = Self(71);
    /// Operation not supported.
    pub const EOPNOTSUPP: Self = Self(95);

    /// The number.
    pub const fn get(self) -> c_int {
        self.0
    }

    /// The error for a raw number that should be a positive errno: the
    /// return value of a failed libibverbs `ibv_cmd_*` call, or `errno`
    /// after a failed C library call.
    ///
    /// Anything but a positive number (which those do not produce) is
    /// reported as `EIO` rather than as success.
    pub fn from_raw(raw: c_int) -> Self {
        if raw > 0 { Self(raw) } else { Self::EIO }
    }
}

#[cfg(test)]
mod tests {
    use super::Errno;
    use std::io;

    /// The constants are the host's numbers: the C library names them so.
    #[test]
    fn constants_match_the_c_library() {
        let expected = [
            (Errno::ENOENT, "No such file or directory"),
            (Errno::EIO, "Input/output error"),
            (Errno::ENOMEM, "Cannot allocate memory"),
            (Errno::EBUSY, "Device or resource busy"),
            (Errno::EINVAL, "Invalid argument"),
            (Errno::EPROTO, "Protocol error"),
            (Errno::EOPNOTSUPP, "Operation not supported"),
        ];
        for (errno, text) in expected {
            let shown = io::Error::from_raw_os_error(errno.get()).to_string();
            assert!(shown.starts_with(text), "{errno:?}: {shown}");
        }
    }

    #[test]
    fn from_raw_never_reports_success() {
        assert_eq!(Errno::from_raw(22), Errno::EINVAL);
        assert_eq!(Errno::from_raw(0), Errno::EIO);
        assert_eq!(Errno::from_raw(-1), Errno::EIO);
    }
}
