// SPDX-License-Identifier: GPL-2.0

//! Raw packet QPs (`IBV_QPT_RAW_PACKET`): whole Ethernet frames in and out
//! of the device's netdev.
//!
//! Out: a SEND's message is the frame, from its destination MAC on; it
//! goes to the netdev's queue as it is (`qp::req`).
//!
//! In: only what a flow rule (`ibv_create_flow`) steers to the QP. While
//! a device has flows, a tap on its netdev ([`crate::net::tap`]) sees every
//! frame the netdev receives; each frame that a flow's [`Rule`] matches
//! lands, as a copy, in the next receive of each QP it is steered to. The
//! stack still gets the frame (a packet socket's semantics, and what
//! `IBV_FLOW_ATTR_FLAGS_DONT_TRAP` asks of a NIC); stealing frames, as a
//! NIC does without that flag, would need the netdev's one `rx_handler`,
//! which bridges, bonds and macvlans use.
//!
//! Locks: the flow list (bottom halves off) is taken alone, and released
//! before a QP's state lock is taken for delivery. The tap's mutex is
//! taken only in process context (creating and dropping flows).

use crate::counters::Event;
use crate::device::Roxe;
use crate::flows::{RawTap, Steer};
use crate::net::tap::{Frame, TapHandler};
use crate::proto::flow::Rule;
use crate::rdma::device::Device;
use crate::rdma::flow::FlowOps;
use crate::rdma::qp::{Qp, QpRef, QpType};
use core::sync::atomic::Ordering;
use kernel::alloc::flags::GFP_ATOMIC;
use kernel::alloc::KVec;
use kernel::error::code::EINVAL;
use kernel::prelude::*;
use kernel::types::ARef;

/// The bytes of a frame a rule looks at: Ethernet, a VLAN tag, an IPv6
/// header and a TCP or UDP header's ports fit.
const HEAD: usize = 128;
/// The shortest frame taken: an Ethernet header.
const ETH_HLEN: usize = 14;
const VLAN_HLEN: usize = 4;
/// Flows per device: each is scanned for every frame the netdev receives.
const MAX_FLOWS: u32 = 1024;

/// The tap's handler: finds the roxe device of the netdev and delivers.
impl TapHandler for RawTap {
    fn frame(frame: &Frame<'_>) {
        let Some(dev) = frame.dev().and_then(Device::<Roxe>::get_by_netdev) else {
            return;
        };
        deliver(&dev, frame);
    }
}

/// Delivers a received frame to every raw QP a flow steers it to, once
/// per QP.
fn deliver(dev: &Device<Roxe>, frame: &Frame<'_>) {
    let len = frame.len();
    if len < ETH_HLEN {
        return;
    }
    // A frame GRO merged past the MTU is not one a wire carried (and could
    // be 64 KiB): no raw QP takes it.
    let d = dev.data();
    if frame
        .dev()
        .map_or(true, |n| len > n.mtu() as usize + ETH_HLEN + VLAN_HLEN)
    {
        d.counters.event(Event::RawRxDrop);
        return;
    }
    let mut head = [0u8; HEAD];
    let n = len.min(HEAD);
    if frame.copy_to(&mut head[..n]).is_err() {
        return;
    }
    let mut to: KVec<QpRef<Roxe>> = KVec::new();
    {
        let list = d.raw.list.lock();
        for s in list.iter().flatten() {
            if !s.rule.matches(&head[..n]) || to.iter().any(|q| q.qp_num() == s.qp.qp_num()) {
                continue;
            }
            if to.push(s.qp.clone(), GFP_ATOMIC).is_err() {
                d.counters.event(Event::RawRxDrop);
            }
        }
    }
    if to.is_empty() {
        return;
    }
    let copied = KVec::from_elem(0u8, len, GFP_ATOMIC)
        .ok()
        .and_then(|mut b| frame.copy_to(&mut b).ok().map(|()| b));
    let Some(bytes) = copied else {
        for _ in 0..to.len() {
            d.counters.event(Event::RawRxDrop);
        }
        return;
    };
    for qp in to.iter() {
        if let Some(rss) = &qp.data().rss {
            rss.deliver(d, &bytes);
            continue;
        }
        let mut st = qp.data().state.lock();
        let landed = crate::qp::resp::recv_raw(qp, &mut st, &bytes);
        d.counters.event(if landed {
            Event::RawRx
        } else {
            Event::RawRxDrop
        });
    }
}

/// A flow of a raw packet QP (`ibv_create_flow`): steers while it lives.
pub(crate) struct RoxeFlow {
    dev: ARef<Device<Roxe>>,
    id: u64,
}

#[vtable]
impl FlowOps<Roxe> for RoxeFlow {
    fn create(qp: &Qp<Roxe>, rule: &Rule, dont_trap: bool) -> Result<Self> {
        // The core lets UD QPs have flows too (a NIC steers datagrams by
        // them); roxe steers whole frames to raw packet QPs only. And it
        // copies frames, never takes them from the stack: a flow must ask
        // for that (a user-space stack that expects its frames stolen would
        // otherwise have the kernel answer its traffic too).
        if qp.data().qp_type != QpType::RawPacket || !dont_trap {
            return Err(crate::rdma::errno::eopnotsupp());
        }
        let dev = qp.device();
        let raw = &dev.data().raw;
        let ndev = dev.netdev(crate::limits::PORT).ok_or(EINVAL)?;
        let id = raw.next_id.fetch_add(1, Ordering::Relaxed);
        let steer = Steer {
            id,
            qp: qp.new_ref(),
            rule: *rule,
        };
        let mut users = raw.users.lock();
        if *users >= MAX_FLOWS {
            return Err(kernel::error::code::ENOSPC);
        }
        {
            let mut list = raw.list.lock();
            match list.iter_mut().find(|s| s.is_none()) {
                Some(slot) => *slot = Some(steer),
                // Growing under the lock, which does not allow sleeping.
                None => list.push(Some(steer), GFP_ATOMIC)?,
            }
        }
        *users += 1;
        if *users == 1 {
            // The device holds its netdev until it goes, after its flows.
            raw.tap.add(&ndev);
        }
        Ok(RoxeFlow {
            dev: ARef::from(dev),
            id,
        })
    }
}

impl Drop for RoxeFlow {
    fn drop(&mut self) {
        let raw = &self.dev.data().raw;
        let mut users = raw.users.lock();
        let gone = {
            let mut list = raw.list.lock();
            list.iter_mut()
                .find(|s| s.as_ref().is_some_and(|s| s.id == self.id))
                .and_then(Option::take)
        };
        // The QP reference goes after the list's lock.
        drop(gone);
        *users = users.saturating_sub(1);
        if *users == 0 {
            // Waits for a delivery under way, which may hold a QP.
            raw.tap.remove();
        }
    }
}

/// Sends `frame` out of the QP's netdev.
pub(crate) fn xmit(dev: &Device<Roxe>, ndev: &crate::net::NetDevice, frame: &[u8]) -> Result {
    crate::net::tap::xmit(ndev, frame)?;
    dev.data().counters.event(Event::RawTx);
    Ok(())
}
