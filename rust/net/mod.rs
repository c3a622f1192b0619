// SPDX-License-Identifier: GPL-2.0

//! Network devices, their event notifier, RTNL, socket buffers and the
//! UDP tunnel sockets of each network namespace.

pub(crate) mod device;
pub(crate) mod notifier;
pub(crate) mod skb;
pub(crate) mod tap;
pub(crate) mod udp;

pub(crate) use device::NetDevice;

use core::marker::PhantomData;

/// Proof that the caller holds RTNL, the networking stack's big lock: a
/// netdev's namespace does not change while it is held. Only
/// [`Rtnl::lock`] and the netdev notifier chain (which runs under it) hand
/// one out. Not `Send`: it stays with the thread that holds the lock.
pub(crate) struct Rtnl {
    _not_send: PhantomData<*mut ()>,
}

impl Rtnl {
    /// Takes RTNL (sleeps). The guard lets it go.
    pub(crate) fn lock() -> RtnlGuard {
        // SAFETY: Process context; released by the guard's `drop`.
        unsafe { crate::bindings::roxe_rtnl_lock() };
        RtnlGuard(Rtnl {
            _not_send: PhantomData,
        })
    }

    /// # Safety
    ///
    /// The caller must hold RTNL for as long as the token is used.
    pub(super) unsafe fn assume_held() -> Rtnl {
        Rtnl {
            _not_send: PhantomData,
        }
    }
}

/// RTNL, held until this is dropped.
pub(crate) struct RtnlGuard(Rtnl);

impl core::ops::Deref for RtnlGuard {
    type Target = Rtnl;
    fn deref(&self) -> &Rtnl {
        &self.0
    }
}

impl Drop for RtnlGuard {
    fn drop(&mut self) {
        // SAFETY: Taken in `Rtnl::lock`, once per guard.
        unsafe { crate::bindings::roxe_rtnl_unlock() };
    }
}
