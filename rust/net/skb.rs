// SPDX-License-Identifier: GPL-2.0

//! Socket buffers: received RoCEv2 datagrams, and packets being sent.

use super::device::NetDevice;
use crate::bindings;
use core::ptr::NonNull;
use kernel::error::{code::*, Result};
use kernel::types::ARef;

/// A received UDP datagram, owned; freed (as dropped) when this is dropped
/// unless [`RxSkb::consume`] says it was used.
///
/// # Invariants
///
/// `raw` is an skb this value owns one reference to, whose network and
/// transport headers point at its IP and UDP headers.
pub(crate) struct RxSkb {
    raw: NonNull<bindings::sk_buff>,
}

/// The bytes of a received packet, once made linear.
pub(crate) struct Linear<'a> {
    /// The IP header and everything after it.
    pub(crate) ip: &'a [u8],
    /// The UDP header and everything after it (the UDP layer trimmed the
    /// packet to the UDP length).
    pub(crate) udp: &'a [u8],
}

impl RxSkb {
    /// Takes ownership of a received skb.
    ///
    /// # Safety
    ///
    /// The caller hands over a reference to `raw`, a valid skb whose
    /// network and transport headers are set.
    pub(crate) unsafe fn from_raw(raw: NonNull<bindings::sk_buff>) -> Self {
        // INVARIANT: as the caller guarantees.
        Self { raw }
    }

    /// The device the packet arrived on.
    pub(crate) fn dev(&self) -> Option<&NetDevice> {
        // SAFETY: The skb is valid; a received skb holds its device alive
        // while it is being processed.
        let dev = unsafe { bindings::roxe_skb_dev(self.raw.as_ptr()) };
        // SAFETY: As above, the device outlives this borrow of the skb.
        (!dev.is_null()).then(|| unsafe { NetDevice::from_raw(dev) })
    }

    /// Makes the packet linear and returns its bytes from the IP header on.
    pub(crate) fn linear(&mut self) -> Result<Linear<'_>> {
        let (mut ip, mut ip_len) = (core::ptr::null(), 0u32);
        let (mut udp, mut udp_len) = (core::ptr::null(), 0u32);
        // SAFETY: The skb is owned (so no one else changes it), and the
        // out-pointers are valid.
        kernel::error::to_result(unsafe {
            bindings::roxe_skb_linear_udp(
                self.raw.as_ptr(),
                &mut ip,
                &mut ip_len,
                &mut udp,
                &mut udp_len,
            )
        })?;
        if ip.is_null() || udp.is_null() {
            return Err(EINVAL);
        }
        // SAFETY: The helper pointed both at the skb's now linear data,
        // `*_len` bytes each up to its tail, which stays unchanged while
        // `self` is borrowed.
        unsafe {
            Ok(Linear {
                ip: core::slice::from_raw_parts(ip, ip_len as usize),
                udp: core::slice::from_raw_parts(udp, udp_len as usize),
            })
        }
    }

    /// Whether the packet was addressed to this host alone: not a
    /// broadcast, a multicast, a frame for another host, or a copy of one
    /// this host sent that looped back (`PACKET_HOST`).
    pub(crate) fn to_host(&self) -> bool {
        // SAFETY: The skb is valid while we own it.
        unsafe { bindings::roxe_skb_to_host(self.raw.as_ptr()) }
    }

    /// Whether the packet came in a multicast frame from the wire
    /// (`PACKET_MULTICAST`), not a multicast a local socket looped back.
    pub(crate) fn multicast_frame(&self) -> bool {
        // SAFETY: The skb is valid while we own it.
        unsafe { bindings::roxe_skb_multicast_frame(self.raw.as_ptr()) }
    }

    /// Frees the packet as used (not dropped).
    pub(crate) fn consume(self) {
        let raw = self.raw;
        core::mem::forget(self);
        // SAFETY: We own the reference (and forgot `self`, so it is not
        // released twice).
        unsafe { bindings::roxe_skb_consume(raw.as_ptr()) };
    }
}

impl Drop for RxSkb {
    fn drop(&mut self) {
        // SAFETY: We own the reference.
        unsafe { bindings::roxe_skb_free(self.raw.as_ptr()) };
    }
}

/// `ENETUNREACH`, which `kernel::error::code` does not name.
fn enetunreach() -> kernel::error::Error {
    // CAST: a small errno constant.
    kernel::error::Error::from_errno(-(kernel::bindings::ENETUNREACH as i32))
}

/// A route to a destination, holding a reference on its `dst_entry`.
///
/// A route is looked up once and kept (per QP, per address handle), but
/// the routing tables may change under it: when its device goes down and
/// comes back, the kept `dst_entry` is dead: the kernel has moved it to
/// the blackhole device, which discards what is sent on it and has an MTU
/// of 68. [`Route::send`] checks that the route still stands and, if not,
/// sends on a route looked up again; [`Route::renew`] replaces a dead route
/// for good.
///
/// # Invariants
///
/// `dst` is a route this value holds one reference to.
pub(crate) struct Route {
    dst: NonNull<bindings::dst_entry>,
    ipv6: bool,
    /// What tells whether the route still stands (`dst_check`).
    cookie: u32,
    /// The device the route was looked up on.
    dev: ARef<NetDevice>,
    /// A route to one of this host's own addresses: `dev` receives what is
    /// sent on it.
    local: bool,
    /// The source and destination addresses (IPv4 in the first 4 bytes).
    src: [u8; 16],
    to: [u8; 16],
    /// The path MTU when the route was looked up.
    mtu_at_lookup: u32,
}

// SAFETY: Routes are reference counted and may be used and released from
// any context.
unsafe impl Send for Route {}
// SAFETY: As above; `&Route` only reads.
unsafe impl Sync for Route {}

impl Route {
    /// Wraps a route the caller holds a reference to, looked up on `dev`.
    fn new(
        dst: NonNull<bindings::dst_entry>,
        ipv6: bool,
        dev: &NetDevice,
        src: [u8; 16],
        to: [u8; 16],
    ) -> Self {
        // SAFETY: The caller holds a reference on `dst`, so it is valid.
        let local = unsafe { bindings::roxe_dst_is_local(dst.as_ptr()) };
        // SAFETY: As above.
        let cookie = unsafe { bindings::roxe_dst_cookie(dst.as_ptr(), ipv6) };
        // SAFETY: As above.
        let mtu_at_lookup = unsafe { bindings::roxe_dst_mtu(dst.as_ptr()) };
        // INVARIANT: the caller hands over its reference.
        Self {
            dst,
            ipv6,
            cookie,
            dev: ARef::from(dev),
            local,
            src,
            to,
            mtu_at_lookup,
        }
    }

    /// Looks up the IPv4 route out of `dev` from `src` to `dst`.
    pub(crate) fn ipv4(dev: &NetDevice, src: [u8; 4], dst: [u8; 4]) -> Result<Self> {
        // SAFETY: `dev` is valid; the helper returns a referenced route or NULL.
        let d = unsafe {
            bindings::roxe_route4(
                dev.as_raw(),
                u32::from_ne_bytes(src),
                u32::from_ne_bytes(dst),
            )
        };
        let mut s = [0u8; 16];
        let mut t = [0u8; 16];
        s[..4].copy_from_slice(&src);
        t[..4].copy_from_slice(&dst);
        // INVARIANT: a non-NULL result carries a reference.
        Ok(Self::new(
            NonNull::new(d).ok_or_else(enetunreach)?,
            false,
            dev,
            s,
            t,
        ))
    }

    /// Looks up the IPv6 route out of `dev` from `src` to `dst`.
    pub(crate) fn ipv6(dev: &NetDevice, src: [u8; 16], dst: [u8; 16]) -> Result<Self> {
        let s = bindings::in6_addr {
            in6_u: bindings::in6_addr__bindgen_ty_1 { u6_addr8: src },
        };
        let t = bindings::in6_addr {
            in6_u: bindings::in6_addr__bindgen_ty_1 { u6_addr8: dst },
        };
        // SAFETY: All pointers are valid for the call.
        let d = unsafe { bindings::roxe_route6(dev.as_raw(), &s, &t) };
        // INVARIANT: a non-NULL result carries a reference.
        Ok(Self::new(
            NonNull::new(d).ok_or_else(enetunreach)?,
            true,
            dev,
            src,
            dst,
        ))
    }

    /// Whether the routing tables still stand behind this route.
    pub(crate) fn is_current(&self) -> bool {
        // SAFETY: We hold a reference on the route.
        unsafe { bindings::roxe_dst_current(self.dst.as_ptr(), self.cookie) }
    }

    /// The same route looked up again.
    fn again(&self) -> Result<Self> {
        if self.ipv6 {
            Self::ipv6(&self.dev, self.src, self.to)
        } else {
            let mut s = [0u8; 4];
            let mut t = [0u8; 4];
            s.copy_from_slice(&self.src[..4]);
            t.copy_from_slice(&self.to[..4]);
            Self::ipv4(&self.dev, s, t)
        }
    }

    /// Replaces this route by a fresh lookup if it no longer stands.
    /// Returns whether it was replaced; a failed lookup keeps the old one.
    pub(crate) fn renew(&mut self) -> bool {
        if self.is_current() {
            return false;
        }
        match self.again() {
            Ok(r) => {
                *self = r;
                true
            }
            Err(_) => false,
        }
    }

    /// Whether this route carries IPv6.
    pub(crate) fn is_ipv6(&self) -> bool {
        self.ipv6
    }

    /// The path MTU of the route. A route that no longer stands may have
    /// been moved to the blackhole device (MTU 68) by then, so its MTU is
    /// taken from a route looked up again, or, with none to be had (the
    /// link is down), the MTU it had when it was looked up.
    pub(crate) fn mtu(&self) -> u32 {
        if self.is_current() {
            // SAFETY: We hold a reference on the route.
            return unsafe { bindings::roxe_dst_mtu(self.dst.as_ptr()) };
        }
        self.again().map_or(self.mtu_at_lookup, |r| r.mtu_at_lookup)
    }

    /// Allocates a packet of `len` bytes from the IP header on and lets `fill`
    /// write all of it, then sends it; `fill` returns `false` to drop the
    /// packet instead (`EIO`). Fails with `ENOMEM` when no memory is left, or
    /// with what the IP layer returns. A packet to one of this host's own
    /// addresses does not leave: the device the route was looked up on
    /// receives it, as if from the wire. A multicast packet leaves without
    /// the IP layer's loopback copy; when this host may be a member of the
    /// group, the device receives a copy of its own, as sent to this host.
    ///
    /// A route that no longer stands is looked up again for this packet
    /// (the caller may [`Route::renew`] it to keep the new one).
    pub(crate) fn send(&self, len: usize, fill: impl FnOnce(&mut [u8]) -> bool) -> Result {
        if !self.is_current() {
            return self.again()?.send_on(len, fill);
        }
        self.send_on(len, fill)
    }

    /// [`Route::send`] on this route as it is.
    fn send_on(&self, len: usize, fill: impl FnOnce(&mut [u8]) -> bool) -> Result {
        let len32 = u32::try_from(len).map_err(|_| EINVAL)?;
        let mut data: *mut u8 = core::ptr::null_mut();
        // SAFETY: We hold a reference on the route; `data` is a valid out-pointer.
        let skb = unsafe { bindings::roxe_tx_alloc(self.dst.as_ptr(), len32, &mut data) };
        if skb.is_null() || data.is_null() {
            return Err(ENOMEM);
        }
        // SAFETY: The helper put `len` bytes at `data` in the new skb, which
        // nothing else references yet.
        if !fill(unsafe { core::slice::from_raw_parts_mut(data, len) }) {
            // SAFETY: The skb is ours and was never sent.
            unsafe { bindings::roxe_skb_free(skb) };
            return Err(EIO);
        }
        let rc = if self.local {
            // SAFETY: The skb is ours and filled with an IP packet to a local
            // address; the helper consumes it and takes its own reference on
            // the route. `dev` is held.
            unsafe { bindings::roxe_tx_loopback(skb, self.dst.as_ptr(), self.dev.as_raw()) }
        } else {
            // SAFETY: The skb is ours and filled; the helper consumes it and
            // takes its own reference on the route.
            unsafe { bindings::roxe_tx_send(skb, self.dst.as_ptr(), self.ipv6) }
        };
        // The helpers return 0 or a negative errno: a packet the IP layer
        // or a qdisc dropped is `ENOBUFS`.
        if rc < 0 {
            return Err(kernel::error::Error::from_errno(rc));
        }
        Ok(())
    }
}

impl Clone for Route {
    fn clone(&self) -> Self {
        // SAFETY: We hold a reference, so taking another is allowed.
        unsafe { bindings::roxe_dst_hold(self.dst.as_ptr()) };
        // INVARIANT: the reference was just taken.
        Self {
            dst: self.dst,
            ipv6: self.ipv6,
            cookie: self.cookie,
            dev: self.dev.clone(),
            local: self.local,
            src: self.src,
            to: self.to,
            mtu_at_lookup: self.mtu_at_lookup,
        }
    }
}

impl Drop for Route {
    fn drop(&mut self) {
        // SAFETY: We own one reference.
        unsafe { bindings::roxe_dst_release(self.dst.as_ptr()) };
    }
}
