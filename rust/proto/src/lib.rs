// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Pure RoCEv2 protocol logic for roxe.
//!
//! Nothing here knows about the kernel: the module compiles these files in
//! (see `drivers/infiniband/sw/roxe/roxe_main.rs`), and `cargo test` runs
//! them on the host. Keep every file free of `unsafe`, allocation and
//! kernel types.

#![no_std]
#![forbid(unsafe_code)]

// The unit tests run on the host and may allocate.
#[cfg(test)]
extern crate std;

pub mod access;
pub mod aeth;
pub mod cnp;
pub mod dcqcn;
pub mod flow;
pub mod headers;
pub mod icrc;
pub mod ip;
pub mod mtu;
pub mod opcode;
pub mod pma;
pub mod psn;
pub mod qp;
pub mod recent;
pub mod req;
pub mod resp;
pub mod responder;
pub mod ring;
pub mod rss;
pub mod seg;
pub mod udp;
pub mod wr;
