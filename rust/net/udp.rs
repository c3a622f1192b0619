// SPDX-License-Identifier: GPL-2.0

//! The UDP tunnel socket that receives RoCEv2 packets.

use super::skb::RxSkb;
use super::{NetDevice, Rtnl};
use crate::bindings;
use core::marker::PhantomData;
use core::ptr::NonNull;
use kernel::error::{to_result, Result};
use kernel::ffi::c_int;

/// What a tunnel socket does with each packet it receives.
pub(crate) trait Receive {
    /// Handles one UDP datagram. Runs in softirq context; the packet is
    /// freed when `skb` is dropped.
    fn receive(skb: RxSkb);
}

/// roxe's RoCEv2 sockets in every network namespace (`roxe_net_*` in
/// `helpers.c`): a namespace has its two sockets on the RoCEv2 port (IPv4
/// and IPv6) while at least one of its netdevs is attached
/// ([`attach`]), and their datagrams go to `H::receive` instead of a
/// socket queue. Dropping the registration closes every namespace's
/// sockets and waits for receive hooks still running.
///
/// # Invariants
///
/// The pernet operations are registered, with `H`'s hook, until `drop`.
pub(crate) struct NetSockets<H: Receive> {
    _h: PhantomData<H>,
}

impl<H: Receive> NetSockets<H> {
    /// Registers the per-namespace state. Only one registration may exist
    /// at a time (the state is the module's).
    pub(crate) fn register() -> Result<Self> {
        // SAFETY: `encap_rcv` has the signature the UDP layer calls.
        to_result(unsafe { bindings::roxe_net_register(Some(Self::encap_rcv)) })?;
        // INVARIANT: registered above.
        Ok(Self { _h: PhantomData })
    }

    /// # Safety
    ///
    /// Called only by the UDP stack, for a socket this type configured, with `skb` a valid
    /// buffer whose reference passes to this function.
    unsafe extern "C" fn encap_rcv(_sk: *mut bindings::sock, skb: *mut bindings::sk_buff) -> c_int {
        if let Some(skb) = NonNull::new(skb) {
            // SAFETY: The UDP layer hands over its reference to `skb`, with
            // the transport header set to the UDP header.
            H::receive(unsafe { RxSkb::from_raw(skb) });
        }
        // Zero tells the UDP layer the packet was consumed.
        0
    }
}

impl<H: Receive> Drop for NetSockets<H> {
    fn drop(&mut self) {
        // SAFETY: Registered (type invariant). This runs every namespace's
        // exit, which closes its sockets and waits for running hooks, so
        // the module's code is not left in use.
        unsafe { bindings::roxe_net_unregister() };
    }
}

/// Counts `ndev` as carrying a device in its namespace, opening the
/// namespace's sockets for the first one. Fails with `ENODEV` if `ndev` is
/// not registered (or no [`NetSockets`] is), and with the socket's error,
/// such as `EADDRINUSE` when another driver holds the port there.
pub(crate) fn attach(ndev: &NetDevice, _rtnl: &Rtnl) -> Result {
    // SAFETY: `ndev` is valid and held for the call; RTNL is held (the
    // token says so), as the helper requires.
    to_result(unsafe { bindings::roxe_net_attach(ndev.as_raw()) })
}

/// Stops counting `ndev` in its namespace; the last one closes the
/// namespace's sockets. Nothing happens for a netdev not attached there.
pub(crate) fn detach(ndev: &NetDevice, _rtnl: &Rtnl) {
    // SAFETY: As in `attach`.
    unsafe { bindings::roxe_net_detach(ndev.as_raw()) };
}
