// SPDX-License-Identifier: GPL-2.0

//! Read-only sysfs attributes in `/sys/class/infiniband/<dev>/`.

use core::fmt;

/// The most attributes a driver can declare.
pub(crate) const MAX_ATTRS: usize = 4;

/// A sysfs `show` buffer: one page, which sysfs guarantees.
pub(crate) struct Buffer<'a> {
    buf: &'a mut [u8],
    len: usize,
}

impl<'a> Buffer<'a> {
    pub(super) fn new(buf: &'a mut [u8]) -> Self {
        Self { buf, len: 0 }
    }

    pub(super) fn len(&self) -> usize {
        self.len
    }
}

impl fmt::Write for Buffer<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let end = self.len.checked_add(s.len()).ok_or(fmt::Error)?;
        // Keep one byte free: sysfs expects room for a terminating NUL.
        if end >= self.buf.len() {
            return Err(fmt::Error);
        }
        self.buf[self.len..end].copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}
