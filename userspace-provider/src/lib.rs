// SPDX-License-Identifier: GPL-2.0 OR MIT

//! `libroxe-rdmav34.so`: the rdma-core userspace provider for roxe devices.
//!
//! libibverbs (`IBVERBS_PRIVATE_34`, rdma-core 44) loads this library when
//! `/etc/libibverbs.d/roxe.driver` names it. An ELF constructor registers the
//! provider; libibverbs then asks it to match, allocate and open devices.
//!
//! What exists today: device matching ([`matching`]), device allocation,
//! contexts that answer `query_device_ex` and `query_port` through the kernel,
//! protection domains, memory regions (`reg_mr`, `rereg_mr`, `dereg_mr`),
//! completion queues with a user-mapped ring ([`ring`], [`cq`]; plain and
//! extended polling without system calls, `req_notify_cq`, `resize_cq`),
//! address handles, queue pairs and shared receive queues whose work
//! requests go straight into user-mapped rings ([`wq`], [`qp`]; sends ring a
//! doorbell, receives need no system call; sends also through the
//! `ibv_wr_*` interface), memory windows, bound through the send ring,
//! XRC (domains, XRC SRQs, XRC send QPs, whose WQEs name the remote SRQ,
//! and ringless XRC receive QPs, created or opened), and raw packet QPs,
//! which send and receive whole Ethernet frames, with the flow steering
//! rules that deliver frames to them ([`flow`]); receive work queues,
//! posted like SRQs, their indirection tables, and RSS QPs over those
//! ([`rwq`]).
//! Every other verb is left NULL, so libibverbs' own dummy answers
//! `EOPNOTSUPP`.
//!
//! All `unsafe` code lives in the private `ffi` module.

#![deny(unsafe_code)]
#![warn(missing_docs)]
#![warn(clippy::undocumented_unsafe_blocks)]

pub mod abi;
pub mod attr;
pub mod context;
pub mod cq;
pub mod device;
pub mod errno;
pub mod flow;
pub mod matching;
pub mod qp;
pub mod ring;
pub mod rwq;
pub mod wq;

#[allow(unsafe_code)]
mod ffi;
