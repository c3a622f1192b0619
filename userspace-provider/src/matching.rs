// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Which RDMA devices this provider claims.
//!
//! libibverbs (rdma-core v44, `libibverbs/init.c`, `match_device()`) first
//! runs a provider's `match_table` (driver id, then device name, then
//! `device/modalias`), and then, if the provider has a `match_device`
//! callback, calls it unconditionally and lets its answer decide. Only after a
//! yes does it compare the device's uverbs ABI version with
//! `match_min_abi_version..=match_max_abi_version`, printing a warning and
//! refusing the device when it is out of range.
//!
//! roxe devices register with `RDMA_DRIVER_UNKNOWN`, so no table entry can
//! match them. roxe's table is therefore empty, and the callback claims a
//! device exactly when:
//!
//! 1. its driver id is `RDMA_DRIVER_UNKNOWN` (every device that registered
//!    with a real id belongs to another provider), and
//! 2. `<ibdev_path>/roxe_abi_version` exists and holds a roxe ABI version
//!    this provider supports.

use std::ffi::{CStr, OsStr};
use std::fs::File;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use roxe_uapi::{ABI_VERSION_ATTR, UVERBS_ABI_VERSION};

use crate::abi::uverbs::RDMA_DRIVER_UNKNOWN;

/// Oldest roxe ABI version this provider supports.
pub const MIN_ABI_VERSION: u32 = UVERBS_ABI_VERSION;

/// Newest roxe ABI version this provider supports.
pub const MAX_ABI_VERSION: u32 = UVERBS_ABI_VERSION;

/// Longest attribute text accepted; `"4294967295\n"` takes 11 bytes.
const ATTR_MAX_LEN: usize = 16;

/// Whether the device with this driver id and sysfs directory is roxe's.
///
/// `ibdev_path` is `verbs_sysfs_dev.ibdev_path`, the device's directory
/// under `/sys/class/infiniband/`.
pub fn claims(driver_id: u32, ibdev_path: &CStr) -> bool {
    driver_id == RDMA_DRIVER_UNKNOWN && read_abi_version(ibdev_path).is_some_and(is_supported)
}

/// Whether this provider can drive a device of roxe ABI `version`.
pub fn is_supported(version: u32) -> bool {
    (MIN_ABI_VERSION..=MAX_ABI_VERSION).contains(&version)
}

/// Reads and parses `<ibdev_path>/roxe_abi_version`; `None` if the file is
/// missing, unreadable, too long or malformed.
fn read_abi_version(ibdev_path: &CStr) -> Option<u32> {
    let dir = ibdev_path.to_bytes();
    if dir.is_empty() {
        // Never look the attribute up relative to the working directory.
        return None;
    }
    let path =
        Path::new(OsStr::from_bytes(dir)).join(OsStr::from_bytes(ABI_VERSION_ATTR.to_bytes()));
    let mut text = Vec::with_capacity(ATTR_MAX_LEN + 1);
    File::open(path)
        .ok()?
        // One byte more than allowed, so that overlong text is detected.
        .take(ATTR_MAX_LEN as u64 + 1)
        .read_to_end(&mut text)
        .ok()?;
    if text.len() > ATTR_MAX_LEN {
        return None;
    }
    parse_abi_version(&text)
}

/// Parses the attribute text: decimal digits and at most one trailing
/// newline, nothing else (no sign, no spaces), fitting a `u32`.
pub fn parse_abi_version(text: &[u8]) -> Option<u32> {
    let digits = text.strip_suffix(b"\n").unwrap_or(text);
    if digits.is_empty() {
        return None;
    }
    digits.iter().try_fold(0u32, |value, &byte| {
        if !byte.is_ascii_digit() {
            return None;
        }
        value.checked_mul(10)?.checked_add(u32::from(byte - b'0'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CString;
    use std::fs;
    use std::path::PathBuf;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A fresh directory standing in for `/sys/class/infiniband/<dev>`.
    struct FakeIbdev {
        dir: PathBuf,
    }

    impl FakeIbdev {
        fn new(attr: Option<&[u8]>) -> Self {
            static NEXT: AtomicUsize = AtomicUsize::new(0);
            let dir = std::env::temp_dir().join(format!(
                "roxe-matching-{}-{}",
                std::process::id(),
                NEXT.fetch_add(1, Ordering::Relaxed)
            ));
            fs::create_dir_all(&dir).expect("create test directory");
            if let Some(text) = attr {
                fs::write(dir.join("roxe_abi_version"), text).expect("write attribute");
            }
            Self { dir }
        }

        fn path(&self) -> CString {
            CString::new(self.dir.as_os_str().as_bytes()).expect("no NUL in temp path")
        }
    }

    impl Drop for FakeIbdev {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.dir);
        }
    }

    fn current() -> Vec<u8> {
        format!("{UVERBS_ABI_VERSION}\n").into_bytes()
    }

    #[test]
    fn parses_what_the_kernel_writes() {
        assert_eq!(parse_abi_version(b"3\n"), Some(3));
        assert_eq!(parse_abi_version(b"3"), Some(3));
        assert_eq!(parse_abi_version(b"4294967295\n"), Some(u32::MAX));
    }

    #[test]
    fn rejects_anything_else() {
        for text in [
            &b""[..],
            b"\n",
            b"\n\n",
            b"3\n\n",
            b" 3\n",
            b"3 \n",
            b"+3\n",
            b"-3\n",
            b"0x3\n",
            b"3x\n",
            b"4294967296\n",
            b"99999999999999\n",
        ] {
            assert_eq!(
                parse_abi_version(text),
                None,
                "{:?}",
                String::from_utf8_lossy(text)
            );
        }
    }

    #[test]
    fn supports_exactly_the_shared_version() {
        assert!(is_supported(UVERBS_ABI_VERSION));
        assert!(!is_supported(UVERBS_ABI_VERSION - 1));
        assert!(!is_supported(UVERBS_ABI_VERSION + 1));
    }

    #[test]
    fn claims_an_unknown_driver_device_with_the_attribute() {
        let dev = FakeIbdev::new(Some(&current()));
        assert!(claims(RDMA_DRIVER_UNKNOWN, &dev.path()));
    }

    #[test]
    fn refuses_a_device_with_a_real_driver_id() {
        // 18 is RDMA_DRIVER_RXE; any id other than UNKNOWN belongs to
        // another provider, even with the attribute present.
        let dev = FakeIbdev::new(Some(&current()));
        assert!(!claims(18, &dev.path()));
        assert!(!claims(1, &dev.path()));
    }

    #[test]
    fn refuses_a_device_without_the_attribute() {
        let dev = FakeIbdev::new(None);
        assert!(!claims(RDMA_DRIVER_UNKNOWN, &dev.path()));
    }

    #[test]
    fn refuses_an_unsupported_or_malformed_version() {
        let old = format!("{}\n", UVERBS_ABI_VERSION - 1);
        let new = format!("{}\n", UVERBS_ABI_VERSION + 1);
        for text in [old.as_bytes(), new.as_bytes(), b"roxe\n", b""] {
            let dev = FakeIbdev::new(Some(text));
            assert!(!claims(RDMA_DRIVER_UNKNOWN, &dev.path()));
        }
    }

    #[test]
    fn refuses_overlong_text() {
        let mut text = vec![b'0'; ATTR_MAX_LEN];
        text.extend_from_slice(&current());
        let dev = FakeIbdev::new(Some(&text));
        assert!(!claims(RDMA_DRIVER_UNKNOWN, &dev.path()));
    }

    #[test]
    fn refuses_an_empty_path() {
        assert!(!claims(RDMA_DRIVER_UNKNOWN, c""));
    }
}
