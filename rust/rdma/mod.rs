// SPDX-License-Identifier: GPL-2.0

//! Safe abstractions over the RDMA core (`drivers/infiniband/core`).
//!
//! These are written as if for an upstream `kernel::rdma`: every `unsafe`
//! block of roxe lives under `rust/`, and the driver in
//! `drivers/infiniband/sw/roxe/` only uses the safe types here.

pub(crate) mod ah;
pub(crate) mod attr;
pub(crate) mod cq;
pub(crate) mod device;
pub(crate) mod errno;
pub(crate) mod fault;
pub(crate) mod flow;
pub(crate) mod link;
pub(crate) mod mr;
pub(crate) mod mw;
pub(crate) mod odp;
pub(crate) mod pd;
pub(crate) mod qp;
pub(crate) mod random;
pub(crate) mod shared;
pub(crate) mod srq;
pub(crate) mod sysfs;
pub(crate) mod tunables;
pub(crate) mod udata;
pub(crate) mod umem;
pub(crate) mod upcall;
pub(crate) mod wq;
pub(crate) mod xrcd;

/// Whether interrupts are disabled on this CPU. Verbs may be called so
/// (the MAD layer posts under `spin_lock_irqsave`); drivers then must not
/// take bottom-half locks or transmit.
pub(crate) fn irqs_disabled() -> bool {
    // SAFETY: Reads the CPU's interrupt state; no memory is touched.
    unsafe { crate::bindings::roxe_irqs_disabled() }
}
