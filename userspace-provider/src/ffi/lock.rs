// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The spin lock of CQs, QPs and SRQs.

use core::cell::UnsafeCell;
use core::hint;
use core::mem;
use core::ops::{Deref, DerefMut};
use core::sync::atomic::{AtomicBool, Ordering};

/// Busy-wait rounds before a waiter starts yielding the CPU.
const SPINS_BEFORE_YIELD: u32 = 64;

/// A spin lock whose holder can keep it from one C call to the next.
///
/// `ibv_start_poll` takes a CQ's lock and `ibv_end_poll` releases it, with
/// `ibv_next_poll` and the `ibv_wc_read_*` calls in between. A
/// `std::sync::Mutex` guard cannot outlive the call that made it, so the
/// holder of this lock can [`SpinGuard::park`] its guard (keep the lock with
/// no guard) and [`SpinLock::resume`] it in a later call.
///
/// It spins, as the `pthread_spinlock_t` of rdma-core's providers does:
/// holders keep it for one poll, one polling batch, one resize system
/// call, or while they write one batch of work requests into a ring (QPs
/// and SRQs only ever take and drop it within one call). It takes no
/// other lock and allocates nothing, so it does not care whether it is
/// taken in a signal handler or a normal context.
pub(super) struct SpinLock<T> {
    locked: AtomicBool,
    data: UnsafeCell<T>,
}

// SAFETY: `data` is reached only through a `SpinGuard`, and at most one
// guard exists at a time (see its `# Invariants`), so sharing the lock only
// hands the `T` from thread to thread, which `T: Send` allows.
unsafe impl<T: Send> Sync for SpinLock<T> {}

impl<T> SpinLock<T> {
    /// An unlocked lock around `data`.
    pub(super) const fn new(data: T) -> Self {
        Self {
            locked: AtomicBool::new(false),
            data: UnsafeCell::new(data),
        }
    }

    /// Waits for the lock and takes it.
    pub(super) fn lock(&self) -> SpinGuard<'_, T> {
        let mut spins = 0;
        loop {
            if self
                .locked
                .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                // INVARIANT: this thread just set `locked`.
                return SpinGuard { lock: self };
            }
            while self.locked.load(Ordering::Relaxed) {
                if spins < SPINS_BEFORE_YIELD {
                    spins += 1;
                    hint::spin_loop();
                } else {
                    std::thread::yield_now();
                }
            }
        }
    }

    /// Takes back the guard this thread parked.
    ///
    /// Returns `None`, and changes nothing, if the lock is not held at all:
    /// a cheap defence against the most likely misuse, ending a batch that
    /// never started.
    ///
    /// # Safety
    ///
    /// If the lock is held, the calling thread holds it through a guard it
    /// parked, and has not resumed that guard since without parking it
    /// again.
    pub(super) unsafe fn resume(&self) -> Option<SpinGuard<'_, T>> {
        // INVARIANT: per the contract the lock is either free (no guard is
        // made) or held through this thread's parked guard, which is the
        // one guard being re-created here.
        self.locked
            .load(Ordering::Relaxed)
            .then_some(SpinGuard { lock: self })
    }
}

/// Access to the value of a taken [`SpinLock`]; dropping it unlocks.
///
/// # Invariants
///
/// `lock.locked` is true, and this is the only guard of `lock`.
pub(super) struct SpinGuard<'a, T> {
    lock: &'a SpinLock<T>,
}

impl<T> SpinGuard<'_, T> {
    /// Keeps the lock but drops the guard; [`SpinLock::resume`] brings it
    /// back.
    pub(super) fn park(self) {
        mem::forget(self);
    }
}

impl<T> Deref for SpinGuard<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        // SAFETY: per the type invariant this guard is the only access to
        // `data`.
        unsafe { &*self.lock.data.get() }
    }
}

impl<T> DerefMut for SpinGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`, and `self` is borrowed mutably.
        unsafe { &mut *self.lock.data.get() }
    }
}

impl<T> Drop for SpinGuard<'_, T> {
    fn drop(&mut self) {
        self.lock.locked.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::SpinLock;
    use std::sync::Arc;
    use std::thread;

    #[test]
    fn excludes_other_threads() {
        let lock = Arc::new(SpinLock::new((0u64, 0u64)));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let lock = Arc::clone(&lock);
                thread::spawn(move || {
                    for _ in 0..20_000 {
                        let mut pair = lock.lock();
                        // Unsynchronised, these two would drift apart.
                        pair.0 += 1;
                        pair.1 = pair.0;
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("worker thread");
        }
        let pair = lock.lock();
        assert_eq!(*pair, (80_000, 80_000));
    }

    #[test]
    fn a_parked_guard_keeps_the_lock() {
        let lock = Arc::new(SpinLock::new(0u32));
        let mut guard = lock.lock();
        *guard = 1;
        guard.park();

        // Another thread waits until the parked guard is resumed and dropped.
        let other = {
            let lock = Arc::clone(&lock);
            thread::spawn(move || *lock.lock())
        };
        thread::sleep(std::time::Duration::from_millis(50));
        assert!(!other.is_finished());

        // SAFETY: this thread parked the guard above.
        let mut guard = unsafe { lock.resume() }.expect("the lock is held");
        *guard = 2;
        drop(guard);
        assert_eq!(other.join().expect("waiter"), 2);
    }

    #[test]
    fn resume_without_a_holder_gives_nothing() {
        let lock = SpinLock::new(());
        // SAFETY: the lock is free, which the contract allows.
        assert!(unsafe { lock.resume() }.is_none());
        drop(lock.lock());
    }
}
