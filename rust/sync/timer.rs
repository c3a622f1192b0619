// SPDX-License-Identifier: GPL-2.0

//! A kernel timer (`struct timer_list`) embedded in an object, in the
//! shape of `kernel::workqueue`'s `HasWork`: the object declares which
//! field holds its [`Timer`] with [`impl_has_timer!`], and what firing
//! does by implementing [`TimerCallback`]. The callback gets the object
//! back from the timer's address, so the object needs no other pointer
//! to itself and the timer no allocation of its own.
//!
//! The kernel's Rust library of this version has no timer type.

use crate::bindings;
use core::marker::PhantomData;
use kernel::types::Opaque;

/// What an object does when its [`Timer`] fires. Runs in softirq context.
pub(crate) trait TimerCallback {
    /// The timer of `this` fired.
    fn fired(this: &Self);
}

/// An object with a [`Timer`] field.
///
/// # Safety
///
/// `OFFSET` must be the byte offset, within `Self`, of a field of type
/// `Timer<Self>`. [`impl_has_timer!`] writes a correct implementation.
pub(crate) unsafe trait HasTimer: Sized {
    /// Where the timer lies in the object.
    const OFFSET: usize;

    /// The object's timer.
    fn timer(&self) -> &Timer<Self>;
}

/// Implements [`HasTimer`] for a type, naming its `Timer<Self>` field:
/// `impl_has_timer! { impl{T: Driver} HasTimer for QpTimer<T> { self.timer } }`.
macro_rules! impl_has_timer {
    (impl$({$($generics:tt)*})? HasTimer for $ty:ty { self.$field:ident }) => {
        // SAFETY: `OFFSET` is the field's offset, and `timer` (which only
        // compiles if the field is a `Timer<Self>`) names the same field.
        unsafe impl$(<$($generics)*>)? $crate::sync::timer::HasTimer for $ty {
            const OFFSET: usize = ::core::mem::offset_of!(Self, $field);

            fn timer(&self) -> &$crate::sync::timer::Timer<Self> {
                &self.$field
            }
        }
    };
}
pub(crate) use impl_has_timer;

/// A timer that calls [`TimerCallback::fired`] on the object `T` that
/// embeds it.
///
/// # Invariants
///
/// A `Timer` is only ever reached inside an object whose owner called
/// [`Timer::init`] on it first (there is no other way to make one); from
/// then on the object does not move, and it is not freed or dropped before
/// [`Timer::shutdown_sync`] has returned.
#[repr(transparent)]
pub(crate) struct Timer<T> {
    raw: Opaque<bindings::timer_list>,
    _owner: PhantomData<fn(&T)>,
}

// SAFETY: The timer functions used here may be called from any thread; the
// callback hands out only `&T`, and `T: Sync` is required for it to run on
// another CPU than the one that armed it.
unsafe impl<T: Sync> Sync for Timer<T> {}
// SAFETY: As above; the timer itself holds no thread-bound state.
unsafe impl<T: Send> Send for Timer<T> {}

impl<T: HasTimer + TimerCallback + Sync> Timer<T> {
    /// Sets up the timer at `slot`; it does not fire until armed.
    ///
    /// # Safety
    ///
    /// `slot` must point to the `Timer` field (the one [`HasTimer`] names)
    /// of a `T` that stays at its address until [`Timer::shutdown_sync`]
    /// has returned, and is neither dropped nor freed before that; nothing
    /// may use the timer before this call.
    pub(crate) unsafe fn init(slot: *mut Self) {
        // SAFETY: Per the contract the memory is ours to set up.
        // INVARIANT: set up here, before any use.
        unsafe {
            bindings::roxe_timer_setup(
                Opaque::raw_get(core::ptr::addr_of!((*slot).raw)),
                Some(Self::fire),
            )
        };
    }

    /// The C callback: recovers the owner and calls it.
    ///
    /// # Safety
    ///
    /// Only the kernel's timer code calls this, for a timer set up by
    /// [`Timer::init`]; `t` is that timer's `timer_list`.
    unsafe extern "C" fn fire(t: *mut bindings::timer_list) {
        // CAST: `Timer` is `repr(transparent)` over the `timer_list`.
        // SAFETY: `t` is the `Timer<T>` field of a `T` at `T::OFFSET`
        // (`init`'s contract and `HasTimer`'s), and the owner shuts the
        // timer down before it goes away, so the `T` is live.
        let owner = unsafe { &*t.cast::<u8>().sub(T::OFFSET).cast::<T>() };
        T::fired(owner);
    }
}

/// The length of one timer tick (a jiffy) in microseconds: the finest
/// step a [`Timer`] waits in, so any wait it is armed for may run this much
/// longer.
pub(crate) fn tick_us() -> u32 {
    // SAFETY: `jiffies_to_usecs` reads only the build's HZ.
    unsafe { bindings::roxe_timer_tick_usecs() }
}

impl<T> Timer<T> {
    /// (Re)starts the timer to fire in `msecs` milliseconds. After
    /// [`Timer::shutdown_sync`] this does nothing.
    pub(crate) fn arm(&self, msecs: u32) {
        // SAFETY: By the type invariant the timer is set up; after a
        // shutdown `mod_timer` is a no-op.
        unsafe { bindings::roxe_timer_arm(self.raw.get(), msecs) };
    }

    /// Has the timer fire in `msecs` milliseconds at the latest: starts it
    /// if it is idle, brings it forward if it would fire later, and
    /// leaves it alone if it fires sooner. After
    /// [`Timer::shutdown_sync`] this does nothing.
    pub(crate) fn arm_by(&self, msecs: u32) {
        // SAFETY: By the type invariant the timer is set up; after a
        // shutdown `timer_reduce` is a no-op.
        unsafe { bindings::roxe_timer_reduce(self.raw.get(), msecs) };
    }

    /// Waits for a running callback and keeps the timer from firing or
    /// being armed again. Must not be called from the callback.
    pub(crate) fn shutdown_sync(&self) {
        // SAFETY: By the type invariant the timer is set up.
        unsafe { bindings::roxe_timer_shutdown_sync(self.raw.get()) };
    }
}
