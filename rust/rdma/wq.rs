// SPDX-License-Identifier: GPL-2.0

//! Receive work queues (`struct ib_wq`, `ibv_create_wq`) and their
//! indirection tables (`struct ib_rwq_ind_table`), which RSS QPs receive
//! through.
//!
//! The driver allocates a WQ (the core has no size for it) and frees it in
//! `destroy_wq`; the core allocates an indirection table with the driver's
//! size and frees it after `destroy_rwq_ind_table`. A table holds a
//! counted [`WqRef`] to each of its WQs, so the memory safety of a frame
//! on its way through a table to a WQ does not rest on the core's use
//! counts (which refuse to destroy a WQ in a table, or a table an RSS QP
//! uses) but on the references: a WQ's destruction waits for them.

use super::cq::Cq;
use super::device::{Device, Driver};
use super::pd::Pd;
use super::udata::UData;
use crate::bindings;
use core::ptr::addr_of_mut;
use core::sync::atomic::{AtomicU32, Ordering};
use kernel::alloc::{flags::GFP_KERNEL, KBox, KVec};
use kernel::error::{code::*, from_result, Error, Result};
use kernel::ffi::c_int;
use kernel::init::{InPlaceInit, PinInit};
use kernel::macros::vtable;
use kernel::types::Opaque;

/// A WQ's state (`enum ib_wq_state`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WqState {
    /// `IB_WQS_RESET`: takes nothing; where a WQ starts.
    Reset,
    /// `IB_WQS_RDY`: frames land in its WQEs.
    Rdy,
    /// `IB_WQS_ERR`: its WQEs are flushed.
    Err,
}

impl WqState {
    fn from_raw(s: bindings::ib_wq_state) -> Option<Self> {
        match s {
            bindings::ib_wq_state_IB_WQS_RESET => Some(Self::Reset),
            bindings::ib_wq_state_IB_WQS_RDY => Some(Self::Rdy),
            bindings::ib_wq_state_IB_WQS_ERR => Some(Self::Err),
            _ => None,
        }
    }

    /// Whether a WQ may move from `self` to `to`: RESET and RDY to each
    /// other (or to themselves), any state to ERR, ERR back to RESET.
    pub(crate) fn may_move(self, to: WqState) -> bool {
        matches!(
            (self, to),
            (Self::Reset | Self::Rdy, Self::Reset | Self::Rdy)
                | (_, Self::Err)
                | (Self::Err, Self::Reset)
        )
    }

    fn to_raw(self) -> bindings::ib_wq_state {
        match self {
            Self::Reset => bindings::ib_wq_state_IB_WQS_RESET,
            Self::Rdy => bindings::ib_wq_state_IB_WQS_RDY,
            Self::Err => bindings::ib_wq_state_IB_WQS_ERR,
        }
    }
}

/// A WQ's sizes (`max_wr`, `max_sge` of `struct ib_wq_init_attr`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct WqSize {
    pub(crate) max_wr: u32,
    pub(crate) max_sge: u32,
}

/// The verbs of a receive WQ, implemented by the driver's per-WQ state.
#[vtable]
pub(crate) trait WqOps<T: Driver>: Send + Sync + Sized {
    /// Creates a receive WQ (`IB_WQT_RQ`) of `pd` completing to `cq`;
    /// returns the initialiser, the sizes granted and the WQ number.
    fn create(
        pd: &Pd<T>,
        cq: &Cq<T>,
        size: WqSize,
        udata: Option<&UData<'_>>,
    ) -> Result<(impl PinInit<Self, Error>, WqSize, u32)>;

    /// Moves the WQ to `to` if [`WqState::may_move`] allows it from the
    /// state the driver keeps; `cur`, if given, must be that state.
    fn modify(wq: &Wq<T>, cur: Option<WqState>, to: WqState) -> Result;

    /// The WQ's destruction begins (no table holds it).
    fn destroy(_wq: &Wq<T>) {}
}

/// A receive WQ of driver `T`, allocated by [`create_cb`].
///
/// # Invariants
///
/// `ib` is first, so the core's `ib_wq` pointer is this value's; once the
/// core has it, the core fills in `device`, `pd` and `cq` and holds the PD
/// and CQ until `destroy_wq`. `data` is initialised until `destroy_cb`.
/// `users` counts the live [`WqRef`]s; `destroy_cb` waits for it to reach
/// zero before it frees the WQ.
#[repr(C)]
pub(crate) struct Wq<T: Driver> {
    ib: Opaque<bindings::ib_wq>,
    users: AtomicU32,
    data: T::Wq,
}

// SAFETY: The C part is written by the core under its own locks; what the
// driver shares is `T::Wq`, which is `Sync`, and an atomic.
unsafe impl<T: Driver> Sync for Wq<T> {}
// SAFETY: As above; the WQ is used and dropped on any thread.
unsafe impl<T: Driver> Send for Wq<T> {}

impl<T: Driver> Wq<T> {
    /// The driver's data.
    pub(crate) fn data(&self) -> &T::Wq {
        &self.data
    }

    /// The device.
    pub(crate) fn device(&self) -> &Device<T> {
        // SAFETY: Set by the core once it has the WQ, before the driver is
        // called again for it; the device outlives its WQs.
        unsafe { Device::from_raw((*self.ib.get()).device) }
    }

    /// The WQ number.
    pub(crate) fn wq_num(&self) -> u32 {
        // SAFETY: Written by `create_cb` before the core saw the WQ.
        unsafe { (*self.ib.get()).wq_num }
    }

    /// The id of the WQ's PD (see [`Pd::id`]), which its WQEs' lkeys must
    /// belong to.
    pub(crate) fn pd_id(&self) -> usize {
        // SAFETY: Set by the core once it has the WQ (before any table can
        // hold it); the PD outlives the WQ. Only the address is taken.
        unsafe { (*self.ib.get()).pd as usize }
    }

    /// The CQ the WQ's receives complete to.
    pub(crate) fn cq(&self) -> Option<&Cq<T>> {
        // SAFETY: Set by the core once it has the WQ, to a CQ of this
        // device that it holds (use count) until the WQ is destroyed; NULL
        // before.
        unsafe {
            (*self.ib.get())
                .cq
                .as_ref()
                .map(|c| &*(c as *const bindings::ib_cq).cast::<Cq<T>>())
        }
    }

    /// A counted reference: the WQ is not freed while it lives.
    pub(crate) fn new_ref(&self) -> WqRef<T> {
        self.users.fetch_add(1, Ordering::Relaxed);
        WqRef(core::ptr::NonNull::from(self))
    }

    /// Reports `IB_EVENT_WQ_FATAL` to the WQ's owner.
    pub(crate) fn report_fatal(&self) {
        let mut ev = bindings::ib_event {
            // SAFETY: Set by the core; the device outlives the WQ.
            device: unsafe { (*self.ib.get()).device },
            event: bindings::ib_event_type_IB_EVENT_WQ_FATAL,
            ..Default::default()
        };
        ev.element.wq = self.ib.get();
        // SAFETY: The WQ is live; the handler, if any, is the one the core
        // gave `create_cb` (uverbs' queues the event under an irq-safe
        // lock: it may be called in any context).
        unsafe {
            if let Some(h) = (*self.ib.get()).event_handler {
                h(&mut ev, (*self.ib.get()).wq_context);
            }
        }
    }

    fn wait_unused(&self) {
        let mut waited_ms = 0u32;
        while self.users.load(Ordering::Acquire) != 0 {
            // SAFETY: `destroy_cb` runs in process context.
            unsafe { bindings::msleep(1) };
            waited_ms = waited_ms.saturating_add(1);
            if waited_ms == 5000 {
                kernel::pr_warn!("WQ destroy waits for references still held\n");
            }
        }
    }
}

/// A counted reference to a WQ ([`Wq::new_ref`]), as [`SrqRef`] is to an
/// SRQ: indirection tables hold one for each entry.
///
/// [`SrqRef`]: super::srq::SrqRef
///
/// # Invariants
///
/// The pointer is a live, initialised `Wq<T>` whose `users` counts this
/// reference.
pub(crate) struct WqRef<T: Driver>(core::ptr::NonNull<Wq<T>>);

// SAFETY: `Wq<T>` is `Sync` and the count is atomic.
unsafe impl<T: Driver> Send for WqRef<T> {}
// SAFETY: As above.
unsafe impl<T: Driver> Sync for WqRef<T> {}

impl<T: Driver> core::ops::Deref for WqRef<T> {
    type Target = Wq<T>;

    fn deref(&self) -> &Wq<T> {
        // SAFETY: By the type invariant the WQ is live while this exists.
        unsafe { self.0.as_ref() }
    }
}

impl<T: Driver> Clone for WqRef<T> {
    fn clone(&self) -> Self {
        self.new_ref()
    }
}

impl<T: Driver> Drop for WqRef<T> {
    fn drop(&mut self) {
        // Pairs with `wait_unused`'s acquire.
        self.users.fetch_sub(1, Ordering::Release);
    }
}

fn err_ptr<P>(e: Error) -> *mut P {
    // CAST: `ERR_PTR`: a small negative errno stored in a pointer.
    e.to_errno() as isize as *mut P
}

/// # Safety
///
/// Only the RDMA core calls this, through the ops table of a device registered with driver
/// `T`, for `create_wq`: `pd` is a PD of this driver and `attr` valid attributes whose `cq`
/// is a CQ of this driver, both held by the core for the call; `udata` is NULL or valid.
pub(super) unsafe extern "C" fn create_cb<T: Driver>(
    pd: *mut bindings::ib_pd,
    attr: *mut bindings::ib_wq_init_attr,
    udata: *mut bindings::ib_udata,
) -> *mut bindings::ib_wq {
    let made = (|| -> Result<*mut bindings::ib_wq> {
        // SAFETY: Valid for the call (the contract).
        let a = unsafe { &mut *attr };
        if a.wq_type != bindings::ib_wq_type_IB_WQT_RQ {
            return Err(super::errno::eopnotsupp());
        }
        if a.create_flags != 0 {
            return Err(super::errno::eopnotsupp());
        }
        if a.cq.is_null() {
            return Err(EINVAL);
        }
        // SAFETY: A PD of this driver, held by the core.
        let pd = unsafe { Pd::<T>::from_raw(pd) };
        // SAFETY: A CQ of this driver (the contract), held by the core.
        let cq = unsafe { &*a.cq.cast::<Cq<T>>() };
        // SAFETY: NULL or the call's valid udata.
        let udata = unsafe { UData::from_raw(udata) };
        let size = WqSize {
            max_wr: a.max_wr,
            max_sge: a.max_sge,
        };
        let (init, granted, num) = <T::Wq as WqOps<T>>::create(pd, cq, size, udata.as_ref())?;
        let (handler, context) = (a.event_handler, a.wq_context);
        let fill = move |slot: *mut Wq<T>| {
            // SAFETY: `slot` is the new allocation, written once per field
            // before anything uses it.
            unsafe {
                // The core copies neither the event handler nor the
                // context into the WQ: the driver does.
                addr_of_mut!((*slot).ib).write(Opaque::new(bindings::ib_wq {
                    wq_num: num,
                    event_handler: handler,
                    wq_context: context,
                    ..Default::default()
                }));
                addr_of_mut!((*slot).users).write(AtomicU32::new(0));
                init.__pinned_init(addr_of_mut!((*slot).data))
            }
        };
        // SAFETY: `fill` initialises every field of the slot it is given,
        // and on error leaves nothing initialised that needs a drop (the C
        // part and the count are plain data).
        let init = unsafe { kernel::init::pin_init_from_closure(fill) };
        let wq = KBox::pin_init(init, GFP_KERNEL)?;
        a.max_wr = granted.max_wr;
        a.max_sge = granted.max_sge;
        // SAFETY: The WQ stays where it is until `destroy_cb` rebuilds the
        // box from this pointer.
        let raw = KBox::into_raw(unsafe { core::pin::Pin::into_inner_unchecked(wq) });
        // INVARIANT: `ib` is the first field; the core fills in the rest.
        Ok(raw.cast::<bindings::ib_wq>())
    })();
    match made {
        Ok(p) => p,
        Err(e) => err_ptr(e),
    }
}

/// # Safety
///
/// Only the RDMA core calls this, through the ops table of a device registered with driver
/// `T`, for `modify_wq` on a WQ [`create_cb`] returned, with valid attributes.
pub(super) unsafe extern "C" fn modify_cb<T: Driver>(
    wq: *mut bindings::ib_wq,
    attr: *mut bindings::ib_wq_attr,
    mask: u32,
    udata: *mut bindings::ib_udata,
) -> c_int {
    from_result(|| {
        // SAFETY: NULL or the call's valid udata.
        if let Some(u) = unsafe { UData::from_raw(udata) } {
            u.expect_no_input()?;
        }
        // SAFETY: Valid for the call.
        let a = unsafe { &*attr };
        // SAFETY: A live WQ of this driver (the contract).
        let this = unsafe { &*wq.cast::<Wq<T>>() };
        if mask & bindings::ib_wq_attr_mask_IB_WQ_FLAGS != 0 {
            return Err(super::errno::eopnotsupp());
        }
        if mask & bindings::ib_wq_attr_mask_IB_WQ_STATE == 0 {
            return Ok(0);
        }
        let cur = if mask & bindings::ib_wq_attr_mask_IB_WQ_CUR_STATE != 0 {
            Some(WqState::from_raw(a.curr_wq_state).ok_or(EINVAL)?)
        } else {
            None
        };
        let to = WqState::from_raw(a.wq_state).ok_or(EINVAL)?;
        <T::Wq as WqOps<T>>::modify(this, cur, to)?;
        // The core reads `state` when a modify names no current state; the
        // driver's own copy, under its lock, is the one that counts.
        // SAFETY: A live WQ; an aligned `u32`-sized field.
        unsafe { core::ptr::write_volatile(addr_of_mut!((*wq).state), to.to_raw()) };
        Ok(0)
    })
}

/// # Safety
///
/// Only the RDMA core calls this, through the ops table of a device registered with driver
/// `T`, once for a WQ [`create_cb`] returned that no indirection table uses.
pub(super) unsafe extern "C" fn destroy_cb<T: Driver>(
    wq: *mut bindings::ib_wq,
    _udata: *mut bindings::ib_udata,
) -> c_int {
    let this = wq.cast::<Wq<T>>();
    {
        // SAFETY: Live until the box is dropped below.
        let w = unsafe { &*this };
        // A frame that reached the WQ through a table finishes first; then
        // the driver lets go of the WQ's number.
        w.wait_unused();
        <T::Wq as WqOps<T>>::destroy(w);
    }
    // SAFETY: `create_cb` made `wq` from a `KBox<Wq<T>>` (its first
    // field), and the core gives it back once.
    drop(unsafe { KBox::from_raw(this) });
    0
}

/// The verbs of an indirection table, implemented by the driver's state.
#[vtable]
pub(crate) trait IndTableOps<T: Driver>: Send + Sync + Sized {
    /// Creates a table of `1 << log_size` entries, `wqs` in order;
    /// returns the initialiser and the table's number.
    fn create(
        dev: &Device<T>,
        wqs: KVec<WqRef<T>>,
        log_size: u32,
    ) -> Result<(impl PinInit<Self, Error>, u32)>;
}

/// A receive WQ indirection table of driver `T`.
///
/// # Invariants
///
/// `ib` is a live `ib_rwq_ind_table` the core allocated with the size of
/// `Self`; `data` is initialised between create and destroy.
#[repr(C)]
pub(crate) struct IndTable<T: Driver> {
    ib: Opaque<bindings::ib_rwq_ind_table>,
    data: T::IndTable,
}

impl<T: Driver> IndTable<T> {
    /// The driver's data.
    pub(crate) fn data(&self) -> &T::IndTable {
        &self.data
    }

    /// # Safety
    ///
    /// `p` is a live indirection table of driver `T`, initialised, that
    /// stays live for `'a`.
    pub(super) unsafe fn from_raw<'a>(p: *mut bindings::ib_rwq_ind_table) -> &'a Self {
        // SAFETY: `ib` is the first field of the `#[repr(C)]` container the
        // core allocated with `size_ib_rwq_ind_table`.
        unsafe { &*p.cast::<Self>() }
    }
}

/// # Safety
///
/// Only the RDMA core calls this, through the ops table of a device registered with driver
/// `T`, for `create_rwq_ind_table`: `table` is the core's zeroed allocation of
/// `size_ib_rwq_ind_table` bytes with `device` set, `attr` lists `1 << log_ind_tbl_size`
/// WQs of this driver that the core holds.
pub(super) unsafe extern "C" fn create_ind_cb<T: Driver>(
    table: *mut bindings::ib_rwq_ind_table,
    attr: *mut bindings::ib_rwq_ind_table_init_attr,
    udata: *mut bindings::ib_udata,
) -> c_int {
    from_result(|| {
        // SAFETY: NULL or the call's valid udata.
        if let Some(u) = unsafe { UData::from_raw(udata) } {
            u.expect_no_input()?;
        }
        // SAFETY: Valid for the call.
        let a = unsafe { &*attr };
        let n = 1usize.checked_shl(a.log_ind_tbl_size).ok_or(EINVAL)?;
        let mut wqs = KVec::with_capacity(n, GFP_KERNEL)?;
        for i in 0..n {
            // SAFETY: The core's array has `n` entries, each a WQ of this
            // driver it holds for the call.
            let w = unsafe { &*(*a.ind_tbl.add(i)).cast::<Wq<T>>() };
            wqs.push(w.new_ref(), GFP_KERNEL)?;
        }
        // SAFETY: The core set `device` before the call.
        let dev = unsafe { Device::<T>::from_raw((*table).device) };
        let (init, num) = <T::IndTable as IndTableOps<T>>::create(dev, wqs, a.log_ind_tbl_size)?;
        let this = table.cast::<IndTable<T>>();
        // SAFETY: Room for `data` in the core's allocation, not yet
        // initialised; on failure the core frees the memory unused.
        unsafe { init.__pinned_init(addr_of_mut!((*this).data))? };
        // SAFETY: The table is not yet visible to anyone else.
        unsafe { (*table).ind_tbl_num = num };
        Ok(0)
    })
}

/// # Safety
///
/// Only the RDMA core calls this, through the ops table of a device registered with driver
/// `T`, once for a table [`create_ind_cb`] initialised that no QP uses.
pub(super) unsafe extern "C" fn destroy_ind_cb<T: Driver>(
    table: *mut bindings::ib_rwq_ind_table,
) -> c_int {
    let this = table.cast::<IndTable<T>>();
    // SAFETY: Initialised by `create_ind_cb`, dropped once here; the core
    // frees the memory after.
    unsafe { core::ptr::drop_in_place(addr_of_mut!((*this).data)) };
    0
}
