// SPDX-License-Identifier: GPL-2.0

//! roxe: RoCEv2 RDMA over any Ethernet netdev, written in Rust.
//!
//! `rdma link add roxe0 type roxe netdev eth0` creates a device. This crate
//! root only wires the module together. The driver logic sits in this
//! directory and contains no `unsafe` (each module is `deny(unsafe_code)`);
//! the abstractions it builds on live in the top-level `rust/` directory.

#![recursion_limit = "256"]

use kernel::prelude::*;

// The abstraction layer: every `unsafe` block of roxe lives below `rust/`.
#[path = "../../../../rust/bindings.rs"]
mod bindings;
#[path = "../../../../rust/net/mod.rs"]
mod net;
#[path = "../../../../rust/sync/mod.rs"]
mod sync;
// The RDMA abstractions cover each object fully, including accessors that
// only later parts of the driver (the data path) use.
#[path = "../../../../rust/rdma/mod.rs"]
#[allow(dead_code)]
mod rdma;

// Pure logic shared with the host tests (`cargo test` in rust/proto).
// The shared crates are written for their own crate roots, where their
// items are `pub` and some are used only by tests or by user space.
#[path = "../../../../rust/proto/src"]
#[allow(unreachable_pub, dead_code)]
mod proto {
    pub(crate) mod access;
    pub(crate) mod aeth;
    pub(crate) mod headers;
    pub(crate) mod icrc;
    pub(crate) mod ip;
    pub(crate) mod mtu;
    pub(crate) mod opcode;
    pub(crate) mod pma;
    pub(crate) mod psn;
    pub(crate) mod qp;
    pub(crate) mod recent;
    pub(crate) mod req;
    pub(crate) mod resp;
    pub(crate) mod responder;
    pub(crate) mod ring;
    pub(crate) mod seg;
    pub(crate) mod udp;
    pub(crate) mod wr;
}

// The user/kernel ABI, shared with the user-space provider.
#[path = "../../../../rust/uapi/src/abi.rs"]
#[allow(unreachable_pub, dead_code)]
mod uapi;

#[deny(unsafe_code)]
mod ah;
#[deny(unsafe_code)]
mod counters;
#[deny(unsafe_code)]
mod cq;
#[deny(unsafe_code)]
mod device;
#[deny(unsafe_code)]
mod keys;
#[deny(unsafe_code)]
mod limits;
#[deny(unsafe_code)]
mod mcast;
#[deny(unsafe_code)]
mod mr;
#[deny(unsafe_code)]
mod mw;
#[deny(unsafe_code)]
mod netevent;
#[deny(unsafe_code)]
mod pd;
#[deny(unsafe_code)]
mod qp;
#[deny(unsafe_code)]
mod ring;
#[deny(unsafe_code)]
mod rx;
#[deny(unsafe_code)]
mod srq;
#[deny(unsafe_code)]
mod table;
#[deny(unsafe_code)]
mod tx;
#[deny(unsafe_code)]
mod verbs;
#[deny(unsafe_code)]
mod wqe;

module! {
    type: RoxeModule,
    name: "roxe",
    author: "The roxe developers",
    description: "RoCEv2 RDMA over any Ethernet netdev",
    license: "GPL",
    alias: ["rdma-link-roxe"],
}

struct RoxeModule {
    // Fields drop in declaration order, which is the teardown order:
    // 1. stop `rdma link add` from creating devices;
    // 2. unregister every roxe device (this waits for each to finish);
    // 3. close the RoCEv2 sockets (after the devices, so no packet finds a
    //    half-torn-down device; closing waits for running receive hooks);
    // 4. stop listening to netdev events, which only matter while devices exist.
    _link: rdma::link::Registration<verbs::Link>,
    _devices: rdma::device::DriverRegistration<device::Roxe>,
    _sock6: net::udp::TunnelSocket<rx::Rx>,
    _sock4: net::udp::TunnelSocket<rx::Rx>,
    _notifier: net::notifier::Registration<netevent::Events>,
}

/// Opens the RoCEv2 port, saying clearly when another driver holds it.
fn open_port(ipv6: bool) -> Result<net::udp::TunnelSocket<rx::Rx>> {
    net::udp::TunnelSocket::open(proto::udp::ROCE_V2_PORT, ipv6).inspect_err(|e| {
        let family = if ipv6 { "IPv6" } else { "IPv4" };
        if e.to_errno() == -(kernel::bindings::EADDRINUSE as i32) {
            pr_err!(
                "UDP port {} ({}) is taken: is rdma_rxe loaded? Only one RoCEv2 driver can run per host\n",
                proto::udp::ROCE_V2_PORT,
                family
            );
        } else {
            pr_err!("cannot open UDP port {} ({}): {:?}\n", proto::udp::ROCE_V2_PORT, family, e);
        }
    })
}

impl kernel::Module for RoxeModule {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        // Set up in the reverse of the teardown order.
        let notifier = net::notifier::Registration::new(netevent::Events)?;
        let sock4 = open_port(false)?;
        let sock6 = open_port(true)?;
        let devices = rdma::device::DriverRegistration::new();
        let link = rdma::link::Registration::new()?;
        pr_info!("loaded (uverbs ABI {})\n", uapi::UVERBS_ABI_VERSION);
        Ok(Self {
            _link: link,
            _devices: devices,
            _sock6: sock6,
            _sock4: sock4,
            _notifier: notifier,
        })
    }
}
