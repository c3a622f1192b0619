// SPDX-License-Identifier: GPL-2.0

//! `rdma link add NAME type TYPE netdev DEV` support (`struct rdma_link_ops`).

use crate::bindings;
use crate::net::NetDevice;
use core::marker::PhantomData;
use core::pin::Pin;
use kernel::alloc::{flags::GFP_KERNEL, KBox};
use kernel::error::{from_result, Result};
use kernel::ffi::{c_char, c_int};
use kernel::str::CStr;
use kernel::types::Opaque;

/// A link type that `rdma link add` can instantiate.
pub(crate) trait LinkOps: 'static {
    /// The `type` argument of `rdma link add`.
    const TYPE: &'static CStr;

    /// Creates a device named `name` on top of `ndev`.
    fn newlink(name: &CStr, ndev: &NetDevice) -> Result;
}

/// A registered link type. Dropping it unregisters.
///
/// # Invariants
///
/// `ops` is registered with `rdma_link_register` and pinned until `drop`.
pub(crate) struct Registration<T: LinkOps> {
    ops: Pin<KBox<Opaque<bindings::rdma_link_ops>>>,
    _p: PhantomData<T>,
}

// SAFETY: The registration only holds a pinned C structure that the RDMA
// core reads under its own lock; it can be dropped from any thread.
unsafe impl<T: LinkOps> Send for Registration<T> {}
// SAFETY: `&Registration` exposes nothing.
unsafe impl<T: LinkOps> Sync for Registration<T> {}

impl<T: LinkOps> Registration<T> {
    /// Registers `T` with the RDMA netlink code.
    pub(crate) fn new() -> Result<Self> {
        let ops = KBox::pin(Opaque::<bindings::rdma_link_ops>::uninit(), GFP_KERNEL)?;
        // SAFETY: `ops` is a fresh heap allocation that only we can see.
        unsafe {
            ops.get().write(bindings::rdma_link_ops {
                list: bindings::list_head {
                    next: core::ptr::null_mut(),
                    prev: core::ptr::null_mut(),
                },
                type_: T::TYPE.as_char_ptr(),
                newlink: Some(Self::newlink),
            })
        };
        // SAFETY: `ops` is initialised and stays pinned until `drop`
        // unregisters it; `type_` points to a `'static` string.
        unsafe { bindings::rdma_link_register(ops.get()) };
        // INVARIANT: registered above.
        Ok(Self {
            ops,
            _p: PhantomData,
        })
    }

    /// # Safety
    ///
    /// Called only by the RDMA netlink code, for the link type this registration added, with
    /// `name` NUL-terminated and `ndev` a netdev it holds for the call.
    unsafe extern "C" fn newlink(name: *const c_char, ndev: *mut bindings::net_device) -> c_int {
        from_result(|| {
            // SAFETY: The netlink code passes a NUL-terminated name it owns
            // for the duration of the call.
            let name = unsafe { CStr::from_char_ptr(name) };
            // SAFETY: The caller holds a reference on `ndev` for the call.
            let ndev = unsafe { NetDevice::from_raw(ndev) };
            T::newlink(name, ndev)?;
            Ok(0)
        })
    }
}

impl<T: LinkOps> Drop for Registration<T> {
    fn drop(&mut self) {
        // SAFETY: By the type invariant `ops` is registered. The call takes
        // the link-ops lock, so no `newlink` runs after it returns.
        unsafe { bindings::rdma_link_unregister(self.ops.get()) };
    }
}
