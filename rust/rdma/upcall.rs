// SPDX-License-Identifier: GPL-2.0

//! Upcalls into a verbs consumer (completion handlers and asynchronous
//! event handlers), run from a work item.
//!
//! The data path produces completions and events with the device's QP
//! index lock and the QP's state lock held, in softirq or with bottom
//! halves disabled. A consumer's handler may call back into verbs (poll the
//! CQ, re-arm it, post to the same QP), which take those same locks; called
//! there, it would deadlock. So the data path only marks what is due, and a
//! work item calls the handlers in process context with no driver lock held.

use crate::bindings;
use core::sync::atomic::{AtomicU32, Ordering};
use kernel::types::Opaque;

/// The upcalls one verbs object has pending, and the work item that runs
/// them.
///
/// # Invariants
///
/// Once [`Upcalls::init`] has run, `work` is an initialised `work_struct`
/// whose function recovers the object that embeds this `Upcalls`; from then
/// on the object does not move, and it is not freed before
/// [`Upcalls::cancel_sync`] has returned.
#[repr(C)]
pub(crate) struct Upcalls {
    work: Opaque<bindings::work_struct>,
    pending: AtomicU32,
}

impl Upcalls {
    /// Sets up the work item at `this` to run `f`.
    ///
    /// # Safety
    ///
    /// `this` must point to writable memory for an `Upcalls` inside an
    /// object that is pinned until [`Upcalls::cancel_sync`] returns, and
    /// nothing else may use it yet. `f` must accept the `work` field of
    /// exactly this `Upcalls`.
    pub(super) unsafe fn init(
        this: *mut Self,
        f: unsafe extern "C" fn(*mut bindings::work_struct),
    ) {
        // SAFETY: Per the contract the memory is ours to write.
        unsafe {
            core::ptr::addr_of_mut!((*this).pending).write(AtomicU32::new(0));
            // INVARIANT: the work item is initialised here, before any use.
            bindings::roxe_work_init(Opaque::raw_get(core::ptr::addr_of!((*this).work)), Some(f));
        }
    }

    /// Marks the upcalls in `bits` due and makes sure the work item runs
    /// after this. Callable in any context, with any lock held.
    pub(super) fn raise(&self, bits: u32) {
        self.pending.fetch_or(bits, Ordering::Release);
        // SAFETY: By the type invariant the work item is initialised and
        // its object outlives it. `queue_work` orders the store above
        // before the work function runs.
        unsafe { bindings::roxe_work_queue(self.work.get()) };
    }

    /// Takes the upcalls that are due; the work function calls this.
    pub(super) fn take(&self) -> u32 {
        self.pending.swap(0, Ordering::Acquire)
    }

    /// Waits for a running work item and drops one that is queued: after
    /// this the work function does not run again unless raised again.
    ///
    /// Must be called in process context, and not from the work function.
    pub(super) fn cancel_sync(&self) {
        // SAFETY: By the type invariant the work item is initialised.
        unsafe { bindings::roxe_work_cancel_sync(self.work.get()) };
    }

    /// The `Upcalls` that embeds `work`.
    ///
    /// # Safety
    ///
    /// `work` must be the `work` field of a live `Upcalls`.
    pub(super) unsafe fn from_work<'a>(work: *mut bindings::work_struct) -> &'a Self {
        // CAST: `work` is the first field of the `#[repr(C)]` struct.
        // SAFETY: Per the contract.
        unsafe { &*work.cast::<Self>() }
    }
}
