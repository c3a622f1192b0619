//! Error numbers, printed by name.

use std::fmt;

/// An errno value as the kernel returned it (positive).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Errno(pub i32);

/// The errnos the verbs commands use.
pub const ENOENT: Errno = Errno(libc::ENOENT);
pub const ENOMEM: Errno = Errno(libc::ENOMEM);
pub const EACCES: Errno = Errno(libc::EACCES);
pub const EFAULT: Errno = Errno(libc::EFAULT);
pub const EBUSY: Errno = Errno(libc::EBUSY);
pub const EINVAL: Errno = Errno(libc::EINVAL);
pub const ENOSPC: Errno = Errno(libc::ENOSPC);
pub const EOPNOTSUPP: Errno = Errno(libc::EOPNOTSUPP);

impl Errno {
    fn name(self) -> Option<&'static str> {
        Some(match self.0 {
            libc::EPERM => "EPERM",
            libc::ENOENT => "ENOENT",
            libc::EIO => "EIO",
            libc::EBADF => "EBADF",
            libc::EAGAIN => "EAGAIN",
            libc::ENOMEM => "ENOMEM",
            libc::EACCES => "EACCES",
            libc::EFAULT => "EFAULT",
            libc::EBUSY => "EBUSY",
            libc::EEXIST => "EEXIST",
            libc::ENODEV => "ENODEV",
            libc::EINVAL => "EINVAL",
            libc::ENOSPC => "ENOSPC",
            libc::ERANGE => "ERANGE",
            libc::ENOSYS => "ENOSYS",
            libc::EOVERFLOW => "EOVERFLOW",
            libc::EOPNOTSUPP => "EOPNOTSUPP",
            libc::ETIMEDOUT => "ETIMEDOUT",
            libc::EPROTONOSUPPORT => "EPROTONOSUPPORT",
            _ => return None,
        })
    }
}

impl fmt::Display for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => write!(f, "{n}"),
            None => write!(f, "errno {}", self.0),
        }
    }
}

impl fmt::Debug for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl std::error::Error for Errno {}
