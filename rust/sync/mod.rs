// SPDX-License-Identifier: GPL-2.0

//! Locks and a timer the kernel's Rust library of this version does not
//! offer.
//!
//! The data path runs in softirq (the UDP tunnel's receive hook) as well as
//! in process context (verbs calls). A lock taken in both must disable
//! bottom halves in process context, or a softirq on the same CPU could
//! spin on a lock its own interrupted thread holds. [`SpinLockBh`] is the
//! kernel's `spin_lock_bh` behind `kernel::sync::lock::Lock`, so guards, pinning
//! and lockdep classes work as for `SpinLock`.

use crate::bindings;

/// A spinlock that disables interrupts while held, for state that verbs
/// called with interrupts off reach (the CM creates address handles under
/// its own `spin_lock_irqsave`).
pub(crate) type SpinLockIrq<T> = kernel::sync::lock::Lock<T, SpinLockIrqBackend>;

/// Creates a [`SpinLockIrq`] initialiser with a name and its own lock class.
macro_rules! new_spinlock_irq {
    ($inner:expr, $name:literal $(,)?) => {
        kernel::sync::lock::Lock::<_, $crate::sync::SpinLockIrqBackend>::new(
            $inner,
            kernel::c_str!($name),
            kernel::static_lock_class!(),
        )
    };
}
pub(crate) use new_spinlock_irq;

/// The `spin_lock_irqsave` backend; the guard keeps the saved flags.
pub(crate) struct SpinLockIrqBackend;

// SAFETY: `spin_lock_irqsave` gives mutual exclusion; the default `relock`
// calls `lock` again, which is the same locking method, and the new flags
// replace the old.
unsafe impl kernel::sync::lock::Backend for SpinLockIrqBackend {
    type State = kernel::bindings::spinlock_t;
    type GuardState = kernel::ffi::c_ulong;

    unsafe fn init(
        ptr: *mut Self::State,
        name: *const kernel::ffi::c_char,
        key: *mut kernel::bindings::lock_class_key,
    ) {
        // SAFETY: The caller guarantees `ptr` is valid for writes and that
        // `name` and `key` live forever.
        unsafe { kernel::bindings::__spin_lock_init(ptr, name, key) }
    }

    unsafe fn lock(ptr: *mut Self::State) -> Self::GuardState {
        // SAFETY: The caller guarantees `ptr` is an initialised lock.
        unsafe { bindings::roxe_spin_lock_irqsave(ptr.cast()) }
    }

    unsafe fn unlock(ptr: *mut Self::State, flags: &Self::GuardState) {
        // SAFETY: The caller owns the lock, taken by `lock` with `flags`.
        unsafe { bindings::roxe_spin_unlock_irqrestore(ptr.cast(), *flags) }
    }
}

/// A spinlock that disables bottom halves while held.
pub(crate) type SpinLockBh<T> = kernel::sync::lock::Lock<T, SpinLockBhBackend>;

/// Creates a [`SpinLockBh`] initialiser with a name and its own lock class.
macro_rules! new_spinlock_bh {
    ($inner:expr, $name:literal $(,)?) => {
        kernel::sync::lock::Lock::<_, $crate::sync::SpinLockBhBackend>::new(
            $inner,
            kernel::c_str!($name),
            kernel::static_lock_class!(),
        )
    };
}
pub(crate) use new_spinlock_bh;

/// The `spin_lock_bh` backend.
pub(crate) struct SpinLockBhBackend;

// SAFETY: `spin_lock_bh` gives mutual exclusion like `spin_lock`, and the
// default `relock` calls `lock` again, which is the same locking method.
unsafe impl kernel::sync::lock::Backend for SpinLockBhBackend {
    type State = kernel::bindings::spinlock_t;
    type GuardState = ();

    unsafe fn init(
        ptr: *mut Self::State,
        name: *const kernel::ffi::c_char,
        key: *mut kernel::bindings::lock_class_key,
    ) {
        // SAFETY: The caller guarantees `ptr` is valid for writes and that
        // `name` and `key` live forever.
        unsafe { kernel::bindings::__spin_lock_init(ptr, name, key) }
    }

    unsafe fn lock(ptr: *mut Self::State) -> Self::GuardState {
        // SAFETY: The caller guarantees `ptr` is an initialised lock. The two
        // bindgen runs describe the same C `spinlock_t`.
        unsafe { bindings::roxe_spin_lock_bh(ptr.cast()) }
    }

    unsafe fn unlock(ptr: *mut Self::State, _guard_state: &Self::GuardState) {
        // SAFETY: The caller owns the lock, taken by `lock` above.
        unsafe { bindings::roxe_spin_unlock_bh(ptr.cast()) }
    }
}

pub(crate) mod timer;
