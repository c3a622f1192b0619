// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The user/kernel ABI items of roxe (see `lib.rs`).

use core::ffi::CStr;

/// The uverbs ABI version of roxe devices.
///
/// The kernel module sets `ib_device_ops.uverbs_abi_ver` to this value. The
/// kernel reports it in `/sys/class/infiniband_verbs/uverbsN/abi_version` and
/// in the netlink attribute `RDMA_NLDEV_ATTR_CHARDEV_ABI`, and libibverbs
/// compares it against the provider's `match_min_abi_version` and
/// `match_max_abi_version`. Bump it on every incompatible change to the
/// structures in this crate.
///
/// The value starts above the range that rdma-core's `librxe` accepts (1 and
/// 2 on 64-bit hosts). librxe claims any device whose name starts with `rxe`,
/// and libibverbs tries providers in no fixed order, so a roxe device named
/// `rxe...` would otherwise be bound to librxe. With this value librxe's
/// version check refuses such a device and roxe's provider gets it.
pub const UVERBS_ABI_VERSION: u32 = 3;

/// Name of the read-only sysfs attribute that marks an `ib_device` as roxe.
///
/// The kernel module creates it in `/sys/class/infiniband/<dev>/`. Reading it
/// yields [`UVERBS_ABI_VERSION`] in decimal followed by one newline (`"3\n"`),
/// with no other text. roxe devices register with `RDMA_DRIVER_UNKNOWN`,
/// because the kernel's `enum rdma_driver_id` has no roxe entry, so libibverbs
/// cannot match them by driver id. The provider claims a device only if this
/// attribute exists and holds a version the provider supports.
pub const ABI_VERSION_ATTR: &CStr = c"roxe_abi_version";
