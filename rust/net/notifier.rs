// SPDX-License-Identifier: GPL-2.0

//! The netdev notifier chain (`register_netdevice_notifier`).

use super::{NetDevice, Rtnl};
use crate::bindings;
use core::pin::Pin;
use kernel::alloc::{flags::GFP_KERNEL, KBox};
use kernel::error::{to_result, Result};
use kernel::ffi::{c_int, c_ulong, c_void};
use kernel::types::Opaque;

/// A netdev event, as far as roxe distinguishes them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Event {
    /// The interface was brought up.
    Up,
    /// The interface was brought down.
    Down,
    /// Carrier or other state changed.
    Change,
    /// The MTU changed.
    ChangeMtu,
    /// The device is being unregistered.
    Unregister,
    /// Any other event, with its raw `NETDEV_*` number.
    Other(c_ulong),
}

impl Event {
    fn from_raw(event: c_ulong) -> Self {
        // CAST: the `netdev_cmd` values are small non-negative integers.
        match event as bindings::netdev_cmd {
            bindings::netdev_cmd_NETDEV_UP => Event::Up,
            bindings::netdev_cmd_NETDEV_DOWN => Event::Down,
            bindings::netdev_cmd_NETDEV_CHANGE => Event::Change,
            bindings::netdev_cmd_NETDEV_CHANGEMTU => Event::ChangeMtu,
            bindings::netdev_cmd_NETDEV_UNREGISTER => Event::Unregister,
            _ => Event::Other(event),
        }
    }
}

/// Receives netdev events.
pub(crate) trait Handler: Send + Sync + 'static {
    /// Called for every event on every network device, of every network
    /// namespace, in process context with RTNL held.
    fn event(&self, event: Event, dev: &NetDevice, rtnl: &Rtnl);
}

#[repr(C)]
struct Inner<T: Handler> {
    // Must stay first: the callback recovers `Inner` from the block's address.
    nb: Opaque<bindings::notifier_block>,
    handler: T,
}

/// A registered netdev notifier. Dropping it unregisters.
///
/// # Invariants
///
/// `inner.nb` is registered with `register_netdevice_notifier` and `inner`
/// does not move while registered.
pub(crate) struct Registration<T: Handler> {
    inner: Pin<KBox<Inner<T>>>,
}

// SAFETY: The notifier block is only touched by the notifier chain under
// its own lock, and the handler is `Send + Sync`.
unsafe impl<T: Handler> Send for Registration<T> {}
// SAFETY: `&Registration` exposes nothing.
unsafe impl<T: Handler> Sync for Registration<T> {}

impl<T: Handler> Registration<T> {
    /// Registers `handler` for netdev events.
    ///
    /// The kernel replays `NETDEV_REGISTER` and `NETDEV_UP` for existing
    /// devices during this call, so the handler must be ready for events
    /// before `new` returns.
    pub(crate) fn new(handler: T) -> Result<Self> {
        let inner = KBox::pin(
            Inner {
                nb: Opaque::uninit(),
                handler,
            },
            GFP_KERNEL,
        )?;
        let nb = inner.nb.get();
        // SAFETY: `nb` points to writable memory owned by `inner`; nothing
        // else sees it before registration.
        unsafe {
            nb.write(bindings::notifier_block {
                notifier_call: Some(Self::call),
                next: core::ptr::null_mut(),
                priority: 0,
            })
        };
        // SAFETY: `nb` is initialised and pinned inside a heap allocation
        // that outlives the registration (it is unregistered in `drop`).
        to_result(unsafe { bindings::register_netdevice_notifier(nb) })?;
        // INVARIANT: registration succeeded and `inner` is pinned.
        Ok(Self { inner })
    }

    /// # Safety
    ///
    /// Called only by the notifier chain this block is registered on, with `nb` the block
    /// embedded in a live registration and `ptr` the chain's argument for `event`.
    unsafe extern "C" fn call(
        nb: *mut bindings::notifier_block,
        event: c_ulong,
        ptr: *mut c_void,
    ) -> c_int {
        // SAFETY: `nb` is the first field of a `#[repr(C)] Inner<T>` that is
        // alive while registered, and the chain only calls registered blocks.
        let inner = unsafe { &*nb.cast::<Inner<T>>() };
        // SAFETY: netdev notifier chains always pass a `netdev_notifier_info`.
        let raw = unsafe { bindings::roxe_netdev_notifier_info_to_dev(ptr) };
        if raw.is_null() {
            return bindings::NOTIFY_DONE as c_int;
        }
        // SAFETY: The notifier holds the device alive for the callback.
        let dev = unsafe { NetDevice::from_raw(raw) };
        // SAFETY: The netdev notifier chain is called with RTNL held.
        let rtnl = unsafe { Rtnl::assume_held() };
        inner.handler.event(Event::from_raw(event), dev, &rtnl);
        bindings::NOTIFY_OK as c_int
    }
}

impl<T: Handler> Drop for Registration<T> {
    fn drop(&mut self) {
        // SAFETY: By the type invariant the block is registered. After this
        // returns no callback is running or will run.
        unsafe { bindings::unregister_netdevice_notifier(self.inner.nb.get()) };
    }
}
