// SPDX-License-Identifier: GPL-2.0

//! The UDP tunnel socket that receives RoCEv2 packets.

use super::skb::RxSkb;
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

/// A kernel UDP socket in the initial network namespace whose datagrams go
/// to `H::receive` instead of a socket queue. Closed on drop.
///
/// # Invariants
///
/// `sock` is a socket set up by `roxe_udp_tunnel_open` and not yet closed.
pub(crate) struct TunnelSocket<H: Receive> {
    sock: NonNull<bindings::socket>,
    _h: PhantomData<H>,
}

// SAFETY: The socket is only closed, once, from `drop`; the kernel
// serialises its own use of it.
unsafe impl<H: Receive> Send for TunnelSocket<H> {}
// SAFETY: No method reads or writes through `&self`.
unsafe impl<H: Receive> Sync for TunnelSocket<H> {}

impl<H: Receive> TunnelSocket<H> {
    /// Binds UDP `port` (IPv4, or IPv6 only when `ipv6`).
    pub(crate) fn open(port: u16, ipv6: bool) -> Result<Self> {
        let mut sock: *mut bindings::socket = core::ptr::null_mut();
        // SAFETY: `encap_rcv` has the signature the UDP layer calls; `sock`
        // is a valid out-pointer.
        to_result(unsafe {
            bindings::roxe_udp_tunnel_open(port, ipv6, Some(Self::encap_rcv), &mut sock)
        })?;
        // INVARIANT: the call succeeded, so `sock` is an open tunnel socket.
        let sock = NonNull::new(sock).ok_or(kernel::error::code::EINVAL)?;
        Ok(Self {
            sock,
            _h: PhantomData,
        })
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

impl<H: Receive> Drop for TunnelSocket<H> {
    fn drop(&mut self) {
        // SAFETY: By the type invariant the socket is open; this closes it
        // and waits for receive hooks still running on other CPUs, so the
        // module's code is not left in use.
        unsafe { bindings::roxe_udp_tunnel_close(self.sock.as_ptr()) };
    }
}
