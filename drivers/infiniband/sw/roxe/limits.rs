// SPDX-License-Identifier: GPL-2.0

//! The resource limits roxe publishes and enforces.
//!
//! Each is at least what rxe publishes, so that software written against
//! rxe's limits runs unchanged.

use core::sync::atomic::{AtomicU32, Ordering};
use kernel::error::{code::ENOMEM, Result};

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

/// A count of live objects of one kind, bounded by a published limit.
pub(crate) struct Budget {
    used: AtomicU32,
    max: u32,
}

impl Budget {
    /// A budget of `max` objects.
    pub(crate) const fn new(max: u32) -> Self {
        Self { used: AtomicU32::new(0), max }
    }

    /// Takes one unit, or fails with `ENOMEM` at the limit (the errno
    /// libibverbs users expect when a resource is exhausted).
    pub(crate) fn take(&self) -> Result {
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n < self.max).then_some(n + 1))
            .map(|_| ())
            .map_err(|_| ENOMEM)
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
