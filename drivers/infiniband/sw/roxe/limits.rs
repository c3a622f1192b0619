// SPDX-License-Identifier: GPL-2.0

//! The resource limits roxe publishes and enforces.
//!
//! Each is at least what rxe publishes, so that software written against
//! rxe's limits runs unchanged.

use core::sync::atomic::{AtomicI32, AtomicU32, Ordering};
use kernel::error::{code::ENOMEM, Result};

/// The only port of a roxe device.
pub(crate) const PORT: u32 = 1;

/// Protection domains per device (rxe: 2^20).
pub(crate) const MAX_PD: u32 = 1 << 20;
/// Completion queues per device (rxe: 2^20).
pub(crate) const MAX_CQ: u32 = 1 << 20;
/// Entries per CQ (rxe: 2^15 - 1). Rings round up to a power of two.
pub(crate) const MAX_CQE: u32 = 0xffff;
/// Memory regions per device (rxe: 2^19 - 2). Keys hold a 24-bit index,
/// shared with memory windows.
pub(crate) const MAX_MR: u32 = 1 << 20;
/// The largest MR in bytes (rxe: 2^64 - 1; roxe keeps pinned page lists
/// bounded).
pub(crate) const MAX_MR_SIZE: u64 = 1 << 40;
/// Address handles per device (rxe: 2^15 - 1).
pub(crate) const MAX_AH: u32 = (1 << 15) - 1;
/// Queue pairs per device (rxe: 2^20 - 16); QPNs run from 16 to 2^20 - 1.
pub(crate) const MAX_QP: u32 = (1 << 20) - 16;
/// Work requests per queue (rxe: 2^20).
pub(crate) const MAX_QP_WR: u32 = 1 << 20;
/// Outstanding RDMA Reads and atomics per QP (rxe: 128).
pub(crate) const MAX_QP_RD_ATOM: u32 = 128;
/// Shared receive queues per device (rxe: 2^20 - 0x20001).
pub(crate) const MAX_SRQ: u32 = (1 << 20) - 0x2_0001;
/// XRC domains per device. The core shares one between every process that
/// opens the same file, so a few are plenty; the limit bounds what a user
/// can make the kernel allocate.
pub(crate) const MAX_XRCD: u32 = 1 << 16;
/// Receive work queues per device (rxe has none). Each is a ring in user
/// memory; the limit bounds what a user can make the kernel track.
pub(crate) const MAX_WQ: u32 = 1 << 16;
/// Receive WQ indirection tables per device (rxe has none).
pub(crate) const MAX_IND_TABLES: u32 = 1 << 12;
/// Log2 of the entries of the largest indirection table (the core allows
/// up to 2^16; a NIC offers a few hundred).
pub(crate) const MAX_IND_TABLE_LOG: u32 = 10;
/// Work requests per SRQ (rxe: 2^20).
pub(crate) const MAX_SRQ_WR: u32 = 1 << 20;
/// Scatter/gather entries per SRQ receive (rxe: 27).
pub(crate) const MAX_SRQ_SGE: u32 = 32;
/// Memory windows per device (rxe: 2^19 - 1).
pub(crate) const MAX_MW: u32 = (1 << 19) - 1;
/// Responder resources for RDMA Reads and atomics across the device
/// (rxe: 0x3f000).
pub(crate) const MAX_RES_RD_ATOM: u32 = 0x3f000;
/// Slots in the largest CQ ring.
pub(crate) const MAX_CQ_SLOTS: u32 = MAX_CQE + 1;

/// Read-response packets the RC requesters of one device may have asked
/// for and not yet received, all QPs together. The responders answer each
/// read request in one burst, and the bursts of several QPs arrive
/// together: more than the netdev's receive ring holds (a virtio NIC's
/// holds 256) and some are lost, which the requesters answer by asking
/// for everything again.
pub(crate) const READ_CREDITS: u32 = 192;

/// A device's pool of read-response credits: taken in whole requests,
/// given back one response packet at a time or all at once when a QP goes
/// back, fails or is reset. A QP that has starved for credits may overdraw
/// the pool ([`Credits::overdraw`]), so the count can go below zero.
pub(crate) struct Credits(AtomicI32);

impl Credits {
    /// A pool of `n` credits.
    pub(crate) const fn new(n: u32) -> Self {
        // CAST: READ_CREDITS is small.
        Self(AtomicI32::new(n as i32))
    }

    /// Takes `n` credits, or none if fewer are left.
    pub(crate) fn take(&self, n: u32) -> bool {
        let Ok(n) = i32::try_from(n) else {
            return false;
        };
        self.0
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |c| {
                if c >= n {
                    Some(c - n)
                } else {
                    None
                }
            })
            .is_ok()
    }

    /// Takes `n` credits that may not be there, down to a pool of
    /// `-READ_CREDITS` at most (all QPs together), or none. Only a QP
    /// holding none overdraws, by one read request (`READ_WINDOW` packets)
    /// at a time.
    pub(crate) fn overdraw(&self, n: u32) -> bool {
        let Ok(n) = i32::try_from(n) else {
            return false;
        };
        // CAST: READ_CREDITS is small.
        let floor = -(READ_CREDITS as i32);
        self.0
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |c| {
                c.checked_sub(n).filter(|r| *r >= floor)
            })
            .is_ok()
    }

    /// Gives back `n` credits taken by [`Credits::take`] or
    /// [`Credits::overdraw`].
    pub(crate) fn give_back(&self, n: u32) {
        if n != 0 {
            self.0
                .fetch_add(i32::try_from(n).unwrap_or(i32::MAX), Ordering::AcqRel);
        }
    }
}

/// A count of live objects of one kind, bounded by a published limit.
pub(crate) struct Budget {
    used: AtomicU32,
    max: u32,
}

impl Budget {
    /// A budget of `max` objects.
    pub(crate) const fn new(max: u32) -> Self {
        Self {
            used: AtomicU32::new(0),
            max,
        }
    }

    /// Takes one unit, or fails with `ENOMEM` at the limit (the errno
    /// libibverbs users expect when a resource is exhausted).
    pub(crate) fn take(&self) -> Result {
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.max).then_some(n + 1)
            })
            .map(|_| ())
            .map_err(|_| ENOMEM)
    }

    /// Units taken and not given back.
    pub(crate) fn in_use(&self) -> u32 {
        self.used.load(Ordering::Acquire)
    }

    /// Returns one unit taken by [`Budget::take`].
    pub(crate) fn give_back(&self) {
        let prev = self.used.fetch_sub(1, Ordering::AcqRel);
        // A release without a take is a driver bug; keep the count sane.
        if prev == 0 {
            self.used.store(0, Ordering::Release);
        }
    }
}

/// One unit of a [`Budget`], given back when dropped unless the object it
/// was taken for keeps it ([`Unit::keep`]): an error path cannot leak it.
pub(crate) struct Unit<'a>(&'a Budget);

impl Budget {
    /// Takes one unit as a [`Unit`]; fails like [`Budget::take`].
    pub(crate) fn take_unit(&self) -> Result<Unit<'_>> {
        self.take()?;
        Ok(Unit(self))
    }
}

impl Unit<'_> {
    /// The object was made and owns the unit now; whoever destroys it
    /// calls [`Budget::give_back`].
    pub(crate) fn keep(self) {
        core::mem::forget(self);
    }
}

impl Drop for Unit<'_> {
    fn drop(&mut self) {
        self.0.give_back();
    }
}
