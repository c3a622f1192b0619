// SPDX-License-Identifier: GPL-2.0

//! Network devices, their event notifier, socket buffers and the UDP tunnel
//! socket.

pub(crate) mod device;
pub(crate) mod notifier;
pub(crate) mod skb;
pub(crate) mod udp;

pub(crate) use device::NetDevice;
