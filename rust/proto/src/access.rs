// SPDX-License-Identifier: GPL-2.0

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
pub const SUPPORTED: u32 =
    LOCAL_WRITE | REMOTE_WRITE | REMOTE_READ | REMOTE_ATOMIC | MW_BIND | FLUSH_GLOBAL | FLUSH_PERSISTENT;

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
    if flags & !SUPPORTED != 0 {
        return Err(AccessError::Unsupported);
    }
    Ok(flags)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remote_write_needs_local_write() {
        assert_eq!(check_mr(REMOTE_WRITE), Err(AccessError::Invalid));
        assert_eq!(check_mr(REMOTE_ATOMIC), Err(AccessError::Invalid));
        assert_eq!(check_mr(REMOTE_WRITE | LOCAL_WRITE), Ok(REMOTE_WRITE | LOCAL_WRITE));
        assert_eq!(check_mr(REMOTE_READ), Ok(REMOTE_READ));
        assert_eq!(check_mr(0), Ok(0));
    }

    #[test]
    fn optional_hints_are_dropped() {
        assert_eq!(check_mr(LOCAL_WRITE | RELAXED_ORDERING), Ok(LOCAL_WRITE));
    }

    #[test]
    fn unimplemented_flags_are_refused() {
        assert_eq!(check_mr(ON_DEMAND), Err(AccessError::Unsupported));
        assert_eq!(check_mr(ZERO_BASED), Err(AccessError::Unsupported));
        assert_eq!(check_mr(HUGETLB), Err(AccessError::Unsupported));
        assert_eq!(check_mr(1 << 15), Err(AccessError::Unsupported));
    }

    #[test]
    fn every_flag_combination_is_classified() {
        for f in 0..(1u32 << 11) {
            match check_mr(f) {
                Ok(v) => assert_eq!(v & !SUPPORTED, 0),
                Err(AccessError::Invalid) => assert!(f & LOCAL_WRITE == 0),
                Err(AccessError::Unsupported) => assert!(f & !SUPPORTED & !OPTIONAL_RANGE != 0),
            }
        }
    }
}
