// SPDX-License-Identifier: GPL-2.0

//! Netdev events that change a roxe device: its port follows the link.

use crate::device::Roxe;
use crate::limits::PORT;
use crate::net::notifier::{Event, Handler};
use crate::net::{NetDevice, Rtnl};
use crate::rdma::device::{Device, PortEvent};
use kernel::prelude::*;

/// The netdev notifier handler.
pub(crate) struct Events;

impl Handler for Events {
    fn event(&self, event: Event, ndev: &NetDevice, rtnl: &Rtnl) {
        // A netdev leaving its namespace (unregistered, or moved to
        // another) stops counting there at once, whatever becomes of its
        // device: the namespace's sockets close with the last one. This
        // runs for every netdev, even one whose roxe device is already
        // being unregistered and can no longer be looked up.
        if event == Event::Unregister {
            crate::net::udp::detach(ndev, rtnl);
        }
        let Some(dev) = Device::<Roxe>::get_by_netdev(ndev) else {
            return;
        };
        match event {
            Event::Unregister => {
                pr_info!(
                    "{}: {} is going away, removing the device\n",
                    dev.name(),
                    ndev.name()
                );
                dev.unregister_queued();
            }
            Event::Up | Event::Down | Event::Change => {
                let ev = if ndev.is_up() {
                    PortEvent::Active
                } else {
                    PortEvent::Error
                };
                dev.dispatch_port_event(PORT, ev);
            }
            // The port MTU is read from the netdev on every query, so a new
            // MTU needs no bookkeeping here.
            Event::ChangeMtu | Event::Other(_) => {}
        }
    }
}
