// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Properties of the shared constants that the kernel module and the
//! provider both rely on.

use roxe_uapi::{ABI_VERSION_ATTR, UVERBS_ABI_VERSION};

/// rdma-core's librxe (v44, `providers/rxe/rxe.c`) accepts uverbs ABI
/// versions 1 and 2 on 64-bit hosts and claims every device named `rxe*`.
const LIBRXE_MAX_ABI: u32 = 2;

#[test]
#[allow(clippy::assertions_on_constants)]
fn abi_version_is_above_librxe_range() {
    assert!(
        UVERBS_ABI_VERSION > LIBRXE_MAX_ABI,
        "librxe would claim a roxe device named rxe*"
    );
}

#[test]
fn attribute_name_is_a_plain_sysfs_file_name() {
    let name = ABI_VERSION_ATTR.to_bytes();
    assert_eq!(name, b"roxe_abi_version");
    assert!(name.iter().all(|&b| b.is_ascii_lowercase() || b == b'_'));
}
