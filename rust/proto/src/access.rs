// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Memory access rights (`IB_ACCESS_*`), checked the way the IB
//! specification requires.

/// Local write.
pub const LOCAL_WRITE: u32 = 1 << 0;
/// Remote RDMA Write.
pub const REMOTE_WRITE: u32 = 1 << 1;
/// Remote RDMA Read.
pub const REMOTE_READ: u32 = 1 << 2;
/// Remote atomics.
pub const REMOTE_ATOMIC: u32 = 1 << 3;
/// Memory-window binding.
pub const MW_BIND: u32 = 1 << 4;
/// Zero-based virtual addresses.
pub const ZERO_BASED: u32 = 1 << 5;
/// On-demand paging.
pub const ON_DEMAND: u32 = 1 << 6;
/// Huge pages only.
pub const HUGETLB: u32 = 1 << 7;
/// Flush to global visibility.
pub const FLUSH_GLOBAL: u32 = 1 << 8;
/// Flush to persistence.
pub const FLUSH_PERSISTENT: u32 = 1 << 9;
/// Relaxed ordering (an optional hint).
pub const RELAXED_ORDERING: u32 = 1 << 20;
/// The range of optional hints a device may ignore.
pub const OPTIONAL_RANGE: u32 = 0x3ff0_0000;

/// What roxe implements.
pub const SUPPORTED: u32 = LOCAL_WRITE
    | REMOTE_WRITE
    | REMOTE_READ
    | REMOTE_ATOMIC
    | MW_BIND
    | FLUSH_GLOBAL
    | FLUSH_PERSISTENT
    | ON_DEMAND;

/// The rights that let an MR's pages be written, by the device or through
/// a window bound over it: the pages must have been pinned for writing
/// (the set the RDMA core's `ib_access_writable` names).
pub const WRITE_RIGHTS: u32 = LOCAL_WRITE | REMOTE_WRITE | REMOTE_ATOMIC | MW_BIND;

/// Whether rights `flags` need pages pinned for writing.
pub fn needs_writable_pin(flags: u32) -> bool {
    flags & WRITE_RIGHTS != 0
}

/// The rights an MR whose pages were pinned with `pinned_writable` really
/// grants of `flags`: without a writable pin, none that writes.
pub fn effective(flags: u32, pinned_writable: bool) -> u32 {
    if pinned_writable {
        flags
    } else {
        flags & !WRITE_RIGHTS
    }
}

/// Why a set of access flags is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AccessError {
    /// A combination the IB specification forbids (EINVAL).
    Invalid,
    /// A valid flag roxe does not implement (EOPNOTSUPP).
    Unsupported,
}

/// Checks `flags` for a memory registration and returns them without the
/// optional hints roxe ignores.
pub fn check_mr(flags: u32) -> Result<u32, AccessError> {
    let flags = flags & !OPTIONAL_RANGE;
    // Remote write and remote atomic access need local write (IBTA o10-19.1.1).
    if flags & (REMOTE_WRITE | REMOTE_ATOMIC) != 0 && flags & LOCAL_WRITE == 0 {
        return Err(AccessError::Invalid);
    }
    // Huge pages matter only to paging on demand, which maps them as
    // their small pages.
    let huge_ok = if flags & ON_DEMAND != 0 { HUGETLB } else { 0 };
    if flags & !(SUPPORTED | huge_ok) != 0 {
        return Err(AccessError::Unsupported);
    }
    Ok(flags)
}

/// The rights a memory window may grant: remote access only, optionally
/// addressed from zero.
pub const WINDOW_SUPPORTED: u32 = REMOTE_WRITE | REMOTE_READ | REMOTE_ATOMIC | ZERO_BASED;

/// A memory window's binding: which part of which MR it exposes, and how.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    /// The key of the MR underneath.
    pub mr_key: u32,
    /// The MR address of the window's first byte.
    pub addr: u64,
    /// Bytes in the window.
    pub len: u64,
    /// `REMOTE_*` rights and `ZERO_BASED`.
    pub access: u32,
}

/// Why a bind is refused (the work request completes with a bind error).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BindError {
    /// Rights a window cannot grant.
    Access,
    /// The MR does not allow binds, or misses the local write that remote
    /// write and atomic rights need.
    MrAccess,
    /// The range is not inside the MR.
    Bounds,
    /// A type 1 window cannot be zero-based.
    ZeroBased,
}

impl Window {
    /// Checks a bind of `len` bytes at MR address `addr`, granting
    /// `access`, on an MR with rights `mr_access` covering `mr_len` bytes
    /// from `mr_iova`. `type1` windows may not be zero-based. A zero-length
    /// bind is always allowed: it leaves the window reaching nothing.
    #[allow(clippy::too_many_arguments)]
    pub fn bind(
        mr_key: u32,
        addr: u64,
        len: u64,
        access: u32,
        type1: bool,
        mr_access: u32,
        mr_iova: u64,
        mr_len: u64,
    ) -> Result<Window, BindError> {
        // Local rights mean nothing for a window (it is reached only
        // remotely); consumers pass them anyway, so they are dropped.
        let access = access & !(OPTIONAL_RANGE | LOCAL_WRITE);
        if access & !WINDOW_SUPPORTED != 0 {
            return Err(BindError::Access);
        }
        if type1 && access & ZERO_BASED != 0 {
            return Err(BindError::ZeroBased);
        }
        if len != 0 {
            if mr_access & MW_BIND == 0 {
                return Err(BindError::MrAccess);
            }
            if access & (REMOTE_WRITE | REMOTE_ATOMIC) != 0 && mr_access & LOCAL_WRITE == 0 {
                return Err(BindError::MrAccess);
            }
            let off = addr.checked_sub(mr_iova).ok_or(BindError::Bounds)?;
            let end = off.checked_add(len).ok_or(BindError::Bounds)?;
            if end > mr_len {
                return Err(BindError::Bounds);
            }
        }
        Ok(Window {
            mr_key,
            addr,
            len,
            access,
        })
    }

    /// The MR address of `len` bytes at window address `va` if the window
    /// grants `need` on all of them. A zero-based window's addresses start
    /// at 0; others use the MR's.
    pub fn translate(&self, va: u64, len: u64, need: u32) -> Option<u64> {
        if self.access & need != need {
            return None;
        }
        let base = if self.access & ZERO_BASED != 0 {
            0
        } else {
            self.addr
        };
        let off = va.checked_sub(base)?;
        if off.checked_add(len)? > self.len {
            return None;
        }
        self.addr.checked_add(off)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_binds_are_checked() {
        let mr = LOCAL_WRITE | REMOTE_WRITE | MW_BIND;
        let w = Window::bind(7, 0x1100, 0x100, REMOTE_WRITE, true, mr, 0x1000, 0x1000).unwrap();
        assert_eq!(
            w,
            Window {
                mr_key: 7,
                addr: 0x1100,
                len: 0x100,
                access: REMOTE_WRITE
            }
        );
        // Outside the MR, either end.
        assert_eq!(
            Window::bind(7, 0xfff, 0x10, REMOTE_READ, true, mr, 0x1000, 0x1000),
            Err(BindError::Bounds)
        );
        assert_eq!(
            Window::bind(7, 0x1f00, 0x101, REMOTE_READ, true, mr, 0x1000, 0x1000),
            Err(BindError::Bounds)
        );
        assert_eq!(
            Window::bind(7, u64::MAX, 2, REMOTE_READ, false, mr, 0, u64::MAX),
            Err(BindError::Bounds)
        );
        // The MR must allow binds; remote write needs local write on it.
        assert_eq!(
            Window::bind(7, 0x1000, 8, REMOTE_READ, true, LOCAL_WRITE, 0x1000, 8),
            Err(BindError::MrAccess)
        );
        assert_eq!(
            Window::bind(7, 0x1000, 8, REMOTE_WRITE, true, MW_BIND, 0x1000, 8),
            Err(BindError::MrAccess)
        );
        // Windows grant remote rights only (local write is ignored); type 1
        // is never zero-based.
        assert_eq!(
            Window::bind(7, 0x1000, 8, LOCAL_WRITE | REMOTE_READ, true, mr, 0x1000, 8)
                .map(|w| w.access),
            Ok(REMOTE_READ)
        );
        assert_eq!(
            Window::bind(7, 0x1000, 8, MW_BIND, true, mr, 0x1000, 8),
            Err(BindError::Access)
        );
        assert_eq!(
            Window::bind(7, 0x1000, 8, ZERO_BASED, true, mr, 0x1000, 8),
            Err(BindError::ZeroBased)
        );
        // A zero-length bind needs nothing of the MR.
        assert!(Window::bind(7, 0, 0, 0, true, 0, 0x1000, 8).is_ok());
    }

    #[test]
    fn windows_translate_inside_their_range_and_rights() {
        let w = Window {
            mr_key: 1,
            addr: 0x1100,
            len: 0x100,
            access: REMOTE_READ,
        };
        assert_eq!(w.translate(0x1100, 0x100, REMOTE_READ), Some(0x1100));
        assert_eq!(w.translate(0x11ff, 1, REMOTE_READ), Some(0x11ff));
        assert_eq!(w.translate(0x11ff, 2, REMOTE_READ), None);
        assert_eq!(w.translate(0x10ff, 1, REMOTE_READ), None);
        assert_eq!(w.translate(0x1100, 1, REMOTE_WRITE), None);
        let z = Window {
            access: REMOTE_READ | ZERO_BASED,
            ..w
        };
        assert_eq!(z.translate(0, 0x100, REMOTE_READ), Some(0x1100));
        assert_eq!(z.translate(0x10, 0x10, REMOTE_READ), Some(0x1110));
        assert_eq!(z.translate(0x1100, 1, REMOTE_READ), None);
        let empty = Window { len: 0, ..w };
        assert_eq!(empty.translate(0x1100, 1, REMOTE_READ), None);
        assert_eq!(w.translate(u64::MAX, 2, REMOTE_READ), None);
    }

    #[test]
    fn remote_write_needs_local_write() {
        assert_eq!(check_mr(REMOTE_WRITE), Err(AccessError::Invalid));
        assert_eq!(check_mr(REMOTE_ATOMIC), Err(AccessError::Invalid));
        assert_eq!(
            check_mr(REMOTE_WRITE | LOCAL_WRITE),
            Ok(REMOTE_WRITE | LOCAL_WRITE)
        );
        assert_eq!(check_mr(REMOTE_READ), Ok(REMOTE_READ));
        assert_eq!(check_mr(0), Ok(0));
    }

    #[test]
    fn write_rights_need_a_writable_pin() {
        for f in [
            LOCAL_WRITE,
            REMOTE_WRITE | LOCAL_WRITE,
            REMOTE_ATOMIC | LOCAL_WRITE,
            MW_BIND,
        ] {
            assert!(needs_writable_pin(f), "{f:#x}");
            assert_eq!(effective(f | REMOTE_READ, false), REMOTE_READ);
            assert_eq!(effective(f | REMOTE_READ, true), f | REMOTE_READ);
        }
        for f in [0, REMOTE_READ, FLUSH_GLOBAL, REMOTE_READ | FLUSH_PERSISTENT] {
            assert!(!needs_writable_pin(f), "{f:#x}");
            assert_eq!(effective(f, false), f);
        }
    }

    #[test]
    fn optional_hints_are_dropped() {
        assert_eq!(check_mr(LOCAL_WRITE | RELAXED_ORDERING), Ok(LOCAL_WRITE));
    }

    #[test]
    fn unimplemented_flags_are_refused() {
        assert_eq!(check_mr(ON_DEMAND), Ok(ON_DEMAND));
        assert_eq!(check_mr(ON_DEMAND | HUGETLB), Ok(ON_DEMAND | HUGETLB));
        assert_eq!(check_mr(ZERO_BASED), Err(AccessError::Unsupported));
        assert_eq!(check_mr(HUGETLB), Err(AccessError::Unsupported));
        assert_eq!(check_mr(1 << 15), Err(AccessError::Unsupported));
    }

    #[test]
    fn every_flag_combination_is_classified() {
        for f in 0..(1u32 << 11) {
            match check_mr(f) {
                Ok(v) => assert_eq!(v & !SUPPORTED & !HUGETLB, 0),
                Err(AccessError::Invalid) => assert!(f & LOCAL_WRITE == 0),
                Err(AccessError::Unsupported) => {
                    let huge_alone = f & HUGETLB != 0 && f & ON_DEMAND == 0;
                    assert!(f & !SUPPORTED & !OPTIONAL_RANGE & !HUGETLB != 0 || huge_alone)
                }
            }
        }
    }
}
