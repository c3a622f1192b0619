// SPDX-License-Identifier: GPL-2.0

//! Pure RoCEv2 protocol logic for roxe.
//!
//! Nothing here knows about the kernel: the module compiles these files in
//! (see `drivers/infiniband/sw/roxe/roxe_main.rs`), and `cargo test` runs
//! them on the host. Keep every file free of `unsafe`, allocation and
//! kernel types.

#![no_std]
#![forbid(unsafe_code)]

pub mod access;
pub mod mtu;
pub mod qp;
pub mod ring;
pub mod wr;
