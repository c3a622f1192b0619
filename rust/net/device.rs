// SPDX-License-Identifier: GPL-2.0

//! Network devices (`struct net_device`).

use crate::bindings;
use core::ptr::NonNull;
use kernel::str::CStr;
use kernel::types::{AlwaysRefCounted, Opaque};

/// A network device.
///
/// # Invariants
///
/// `self.0` is a valid `struct net_device`. A `&NetDevice` is only handed out
/// while the caller holds a reference on the device (through [`kernel::types::ARef`])
/// or the kernel guarantees it stays alive for the duration of a callback.
#[repr(transparent)]
pub(crate) struct NetDevice(Opaque<bindings::net_device>);

// SAFETY: `struct net_device` is designed to be used from any thread; its
// mutable state is protected by RTNL and its own locks.
unsafe impl Send for NetDevice {}
// SAFETY: See `Send`; the methods below only read fields the kernel allows
// to be read concurrently (with `READ_ONCE` where it matters).
unsafe impl Sync for NetDevice {}

// SAFETY: `dev_hold`/`dev_put` manage the device's reference count, which
// keeps the allocation alive while it is non-zero.
unsafe impl AlwaysRefCounted for NetDevice {
    fn inc_ref(&self) {
        // SAFETY: By the type invariant the device is valid.
        unsafe { bindings::roxe_netdev_hold(self.as_raw()) };
    }

    unsafe fn dec_ref(obj: NonNull<Self>) {
        // SAFETY: The caller owns a reference taken by `inc_ref` or handed
        // over by the kernel.
        unsafe { bindings::roxe_netdev_put(obj.cast::<bindings::net_device>().as_ptr()) };
    }
}

impl NetDevice {
    /// Borrows a `NetDevice` from a raw pointer.
    ///
    /// # Safety
    ///
    /// `ptr` must point to a valid `net_device` that stays alive for `'a`.
    pub(crate) unsafe fn from_raw<'a>(ptr: *mut bindings::net_device) -> &'a Self {
        // SAFETY: `NetDevice` is a transparent wrapper; the caller guarantees
        // validity for `'a`.
        unsafe { &*ptr.cast::<Self>() }
    }

    /// Returns the raw `struct net_device` pointer.
    pub(crate) fn as_raw(&self) -> *mut bindings::net_device {
        self.0.get()
    }

    /// The interface name, such as `eth0`.
    pub(crate) fn name(&self) -> &CStr {
        // SAFETY: `name` is a NUL-terminated array inside a valid device; it
        // lives as long as `self`.
        unsafe { CStr::from_char_ptr((*self.as_raw()).name.as_ptr()) }
    }

    /// The interface index.
    pub(crate) fn ifindex(&self) -> i32 {
        // SAFETY: The device is valid; `ifindex` is fixed while registered.
        unsafe { (*self.as_raw()).ifindex }
    }

    /// The current MTU in bytes.
    pub(crate) fn mtu(&self) -> u32 {
        // SAFETY: The device is valid; the helper reads with `READ_ONCE`.
        unsafe { bindings::roxe_netdev_mtu(self.as_raw()) }
    }

    /// Whether this is a VLAN device stacked on another netdev.
    pub(crate) fn is_vlan(&self) -> bool {
        // SAFETY: The device is valid.
        unsafe { bindings::roxe_netdev_is_vlan(self.as_raw()) }
    }

    /// Whether the interface is administratively up and has carrier.
    pub(crate) fn is_up(&self) -> bool {
        // SAFETY: The device is valid.
        unsafe { bindings::roxe_netdev_is_up(self.as_raw()) }
    }

    /// The EUI-64 derived from the device's MAC address, as used for GUIDs.
    pub(crate) fn eui64(&self) -> [u8; 8] {
        let mut eui = [0u8; 8];
        // SAFETY: The device is valid and `eui` has the 8 bytes the helper writes.
        unsafe { bindings::roxe_netdev_eui48(eui.as_mut_ptr(), self.as_raw()) };
        eui
    }
}
