// SPDX-License-Identifier: GPL-2.0

//! A device's flow rules for raw packet QPs, and the tap that feeds them:
//! the state only, which the device holds. Steering and delivery are
//! `raw.rs`'s.

use crate::net::tap::Tap;
use crate::proto::flow::Rule;
use crate::rdma::device::Driver;
use crate::rdma::qp::QpRef;
use crate::sync::{new_spinlock_bh, SpinLockBh};
use core::sync::atomic::AtomicU64;
use kernel::alloc::KVec;
use kernel::new_mutex;
use kernel::prelude::*;
use kernel::sync::Mutex;

/// One flow: frames its rule matches go to its QP.
pub(crate) struct Steer<T: Driver> {
    pub(crate) id: u64,
    pub(crate) qp: QpRef<T>,
    pub(crate) rule: Rule,
}

/// The handler of a device's tap (`raw.rs` implements it).
pub(crate) struct RawTap;

/// A device's flows, and the tap that feeds them.
#[pin_data]
pub(crate) struct RawFlows<T: Driver> {
    /// The flows; a freed slot is `None` until a new flow takes it.
    #[pin]
    pub(crate) list: SpinLockBh<KVec<Option<Steer<T>>>>,
    /// How many flows exist; the tap is on the netdev while any does.
    #[pin]
    pub(crate) users: Mutex<u32>,
    #[pin]
    pub(crate) tap: Tap<RawTap>,
    pub(crate) next_id: AtomicU64,
}

impl<T: Driver> RawFlows<T> {
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            list <- new_spinlock_bh!(KVec::new(), "roxe_flows"),
            users <- new_mutex!(0, "roxe_flow_users"),
            tap <- Tap::new(),
            next_id: AtomicU64::new(1),
        })
    }

    /// Takes the tap off the netdev (the device is going).
    pub(crate) fn stop(&self) {
        self.tap.remove();
    }
}
