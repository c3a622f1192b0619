// SPDX-License-Identifier: GPL-2.0

//! Raw bindings to the RDMA core and network headers roxe uses.
//!
//! `scripts/gen-bindings` produces `bindings_generated.rs` at build time from
//! `bindings_helper.h`, with the kernel's own bindgen options. Only the safe
//! abstractions in `rust/` may use this module; the driver never does.

#![allow(
    clippy::all,
    clippy::undocumented_unsafe_blocks,
    dead_code,
    missing_docs,
    non_camel_case_types,
    non_upper_case_globals,
    non_snake_case,
    improper_ctypes,
    unreachable_pub,
    unsafe_op_in_unsafe_fn,
    unnecessary_transmutes,
    unknown_lints
)]

use kernel::ffi;

// The kernel blocklists these in bindgen and defines them by hand; so do we.
type __kernel_size_t = usize;
type __kernel_ssize_t = isize;
type __kernel_ptrdiff_t = isize;

include!("bindings_generated.rs");
