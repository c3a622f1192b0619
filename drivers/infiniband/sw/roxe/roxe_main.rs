// SPDX-License-Identifier: GPL-2.0

//! roxe: RoCEv2 RDMA over any Ethernet netdev, written in Rust.
//!
//! `rdma link add roxe0 type roxe netdev eth0` creates a device. This crate
//! root only wires the module together. The driver logic sits in this
//! directory and contains no `unsafe` (each module is `deny(unsafe_code)`);
//! the abstractions it builds on live in the top-level `rust/` directory.

#![recursion_limit = "512"]

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
    pub(crate) mod cnp;
    pub(crate) mod dcqcn;
    pub(crate) mod flow;
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
    pub(crate) mod rss;
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
mod flows;
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
mod odp;
#[deny(unsafe_code)]
mod pd;
#[deny(unsafe_code)]
mod qp;
#[deny(unsafe_code)]
mod raw;
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
mod wq;
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
    // 2. unregister every roxe device (this waits for each to finish; each
    //    detaches its netdev, closing its namespace's sockets with the last);
    // 3. stop listening to netdev events, which only matter while devices
    //    exist (the handler detaches netdevs, so it must go before 4);
    // 4. close whatever RoCEv2 sockets are left in any namespace, waiting
    //    for running receive hooks;
    // 5. destroy the queue on-demand paging faults run on (each device
    //    waited for its own as it went).
    _link: rdma::link::Registration<verbs::Link>,
    _devices: rdma::device::DriverRegistration<device::Roxe>,
    _notifier: net::notifier::Registration<netevent::Events>,
    _sockets: net::udp::NetSockets<rx::Rx>,
    _faults: rdma::odp::FaultQueue,
}

impl kernel::Module for RoxeModule {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        // Set up in the reverse of the teardown order. No socket opens
        // here: a namespace gets its own with its first device.
        let faults = rdma::odp::FaultQueue::new(kernel::c_str!("roxe_odp"))?;
        let sockets = net::udp::NetSockets::register()?;
        let notifier = net::notifier::Registration::new(netevent::Events)?;
        let devices = rdma::device::DriverRegistration::new();
        let link = rdma::link::Registration::new()?;
        pr_info!("loaded (uverbs ABI {})\n", uapi::UVERBS_ABI_VERSION);
        Ok(Self {
            _link: link,
            _devices: devices,
            _notifier: notifier,
            _sockets: sockets,
            _faults: faults,
        })
    }
}
