// SPDX-License-Identifier: GPL-2.0

//! A tap on one netdev: every frame it receives, whole, as a packet
//! socket sees it (the stack still gets the frame). Raw packet QPs take
//! their frames from here; and frames go out whole ([`xmit`]).

use super::device::NetDevice;
use crate::bindings;
use core::marker::PhantomData;
use core::sync::atomic::{AtomicBool, Ordering};
use kernel::error::{to_result, Result};
use kernel::ffi::c_int;
use kernel::init::PinInit;
use kernel::prelude::{pin_data, pinned_drop};
use kernel::types::Opaque;

/// What a [`Tap`] does with each frame.
pub(crate) trait TapHandler: 'static {
    /// A frame the tap's netdev received (not one it sent); runs in
    /// softirq. The frame is borrowed for the call only.
    fn frame(frame: &Frame<'_>);
}

/// A received frame, borrowed from the tap's call.
///
/// # Invariants
///
/// `skb` is a valid received skb, alive for `'a` (its MAC header is
/// checked before it is read: [`Frame::len`] is 0 without one).
pub(crate) struct Frame<'a> {
    skb: *mut bindings::sk_buff,
    _p: PhantomData<&'a bindings::sk_buff>,
}

impl Frame<'_> {
    /// The device the frame arrived on.
    pub(crate) fn dev(&self) -> Option<&NetDevice> {
        // SAFETY: The skb is valid; a received skb holds its device alive
        // while it is processed.
        let dev = unsafe { bindings::roxe_skb_dev(self.skb) };
        // SAFETY: As above, for as long as this borrow.
        (!dev.is_null()).then(|| unsafe { NetDevice::from_raw(dev) })
    }

    /// The frame's length from its destination MAC on; 0 if it has no MAC
    /// header, or the device took its VLAN tag off into the skb.
    pub(crate) fn len(&self) -> usize {
        // SAFETY: The skb is valid (the type invariant).
        unsafe { bindings::roxe_frame_len(self.skb) as usize }
    }

    /// Copies the frame's first `buf.len()` bytes into `buf`; fails if the
    /// frame is shorter.
    pub(crate) fn copy_to(&self, buf: &mut [u8]) -> Result {
        let n = u32::try_from(buf.len()).map_err(|_| kernel::error::code::EINVAL)?;
        // SAFETY: The skb is valid; `buf` is writable for `n` bytes.
        to_result(unsafe { bindings::roxe_frame_copy(self.skb, buf.as_mut_ptr().cast(), n) })
    }
}

/// A tap on one netdev that calls `H::frame` for each frame it receives,
/// once [`Tap::add`]ed, until [`Tap::remove`]d (or dropped).
///
/// # Invariants
///
/// `pt` is on the netdev's tap list exactly when `added` is true; its
/// function is [`Tap::rcv`], which only `H::frame` runs in.
#[pin_data(PinnedDrop)]
pub(crate) struct Tap<H: TapHandler> {
    #[pin]
    pt: Opaque<bindings::packet_type>,
    added: AtomicBool,
    _h: PhantomData<H>,
}

// SAFETY: The `packet_type` is written only by `add` (before the stack
// sees it) and read by the stack under its own rules; the flag is atomic.
unsafe impl<H: TapHandler> Sync for Tap<H> {}
// SAFETY: As above; nothing in a tap is tied to a thread.
unsafe impl<H: TapHandler> Send for Tap<H> {}

impl<H: TapHandler> Tap<H> {
    /// A tap on no netdev yet.
    pub(crate) fn new() -> impl PinInit<Self> {
        kernel::prelude::pin_init!(Self {
            pt <- Opaque::ffi_init(|_| {}),
            added: AtomicBool::new(false),
            _h: PhantomData,
        })
    }

    /// # Safety
    ///
    /// Only the network stack calls this, for a tap `add` put on a
    /// netdev's list: `skb` is a frame it gives us a reference to.
    unsafe extern "C" fn rcv(
        skb: *mut bindings::sk_buff,
        _dev: *mut bindings::net_device,
        _pt: *mut bindings::packet_type,
        _orig: *mut bindings::net_device,
    ) -> c_int {
        // SAFETY: The stack passes a valid skb.
        if !unsafe { bindings::roxe_skb_outgoing(skb) } {
            H::frame(&Frame {
                skb,
                _p: PhantomData,
            });
        }
        // SAFETY: A tap owns the reference it was given (`deliver_skb`
        // took it for the call).
        unsafe { bindings::roxe_skb_consume(skb) };
        0
    }

    /// Puts the tap on `dev`, holding a reference to it until
    /// [`Tap::remove`]. The caller serialises `add` and `remove`. Does
    /// nothing if the tap is on a netdev already.
    pub(crate) fn add(&self, dev: &NetDevice) {
        if self.added.load(Ordering::Acquire) {
            return;
        }
        // SAFETY: `pt` is ours and not on any list (`added` is false, and
        // the caller serialises); the stack reads it from here on, until
        // `remove` takes it off; the helper holds `dev` until then.
        unsafe { bindings::roxe_tap_add(self.pt.get(), dev.as_raw(), Some(Self::rcv)) };
        // INVARIANT: on the list now.
        self.added.store(true, Ordering::Release);
    }

    /// Takes the tap off its netdev and waits for every running call of
    /// `H::frame`. Sleeps.
    pub(crate) fn remove(&self) {
        if self.added.swap(false, Ordering::AcqRel) {
            // SAFETY: `pt` is on the list (`added` was true).
            unsafe { bindings::roxe_tap_remove(self.pt.get()) };
        }
    }
}

#[pinned_drop]
impl<H: TapHandler> PinnedDrop for Tap<H> {
    fn drop(self: core::pin::Pin<&mut Self>) {
        self.remove();
    }
}

/// Sends `frame`, a whole Ethernet frame from its destination MAC on, out
/// of `dev`.
pub(crate) fn xmit(dev: &NetDevice, frame: &[u8]) -> Result {
    let n = u32::try_from(frame.len()).map_err(|_| kernel::error::code::EINVAL)?;
    // SAFETY: `dev` is a live netdev; `frame` is readable for `n` bytes and
    // copied before the call returns.
    to_result(unsafe { bindings::roxe_raw_xmit(dev.as_raw(), frame.as_ptr().cast(), n) })
}
