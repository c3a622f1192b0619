//! The ABI between the roxe kernel module and its rdma-core provider.
//!
//! The provider (`userspace-provider/`) depends on this as the `roxe-uapi`
//! crate.
//!
//! The items live in `abi.rs`, which the kernel module includes directly
//! with `#[path]` (crate-level attributes such as `#![no_std]` may only
//! appear in a crate root, so they stay here).

#![no_std]
#![forbid(unsafe_code)]

mod abi;
pub use abi::*;
