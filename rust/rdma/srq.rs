// SPDX-License-Identifier: GPL-2.0

//! Shared receive queues (`struct ib_srq`).

use super::cq::Cq;
use super::device::{Device, Driver};
use super::udata::UData;
use super::xrcd::XrcdId;
use crate::bindings;
use core::ptr::addr_of_mut;
use kernel::error::{code::*, from_result};
use kernel::error::{Error, Result};
use kernel::ffi::c_int;
use kernel::init::PinInit;
use kernel::macros::vtable;
use kernel::types::Opaque;

/// The verbs of an SRQ, implemented by the driver's per-SRQ state.
#[vtable]
pub(crate) trait SrqOps<T: Driver>: Send + Sync + Sized {
    /// Creates an SRQ; returns the initialiser, the sizes granted and the
    /// SRQ's number. `xrcd` is the domain of an XRC SRQ (`None`: a basic
    /// one); an XRC SRQ's number is what senders name it by on the wire.
    fn create(
        dev: &Device<T>,
        attr: &SrqAttr,
        xrcd: Option<XrcdId>,
        udata: Option<&UData<'_>>,
    ) -> Result<(impl PinInit<Self, Error>, SrqAttr, u32)>;

    /// The SRQ is initialised and about to be handed to the core: a driver
    /// that finds SRQs by number (XRC packets name theirs) takes an
    /// [`SrqRef`] into its index here, and drops it in `destroy`.
    fn publish(_srq: &Srq<T>) {}

    /// Resizes the SRQ or arms its limit.
    fn modify(srq: &Srq<T>, attr: &SrqAttr, what: SrqModify, udata: Option<&UData<'_>>) -> Result;

    /// Reports the SRQ's sizes and limit.
    fn query(srq: &Srq<T>) -> Result<SrqAttr>;

    /// The SRQ's destruction begins: the driver drops every [`SrqRef`] it
    /// keeps. The abstraction then waits for the ones in use elsewhere
    /// before it drops the state.
    fn destroy(srq: &Srq<T>);

    /// A kernel consumer posts a receive to an SRQ.
    fn post_recv(srq: &Srq<T>, wr_id: u64, sges: &[super::qp::Sge]) -> Result;
}

/// SRQ sizes and limit (`struct ib_srq_attr`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct SrqAttr {
    pub(crate) max_wr: u32,
    pub(crate) max_sge: u32,
    /// Raise `IB_EVENT_SRQ_LIMIT_REACHED` when fewer WQEs than this remain
    /// (0: disarmed).
    pub(crate) srq_limit: u32,
}

impl SrqAttr {
    fn from_raw(a: &bindings::ib_srq_attr) -> Self {
        Self {
            max_wr: a.max_wr,
            max_sge: a.max_sge,
            srq_limit: a.srq_limit,
        }
    }

    fn write_to(&self, a: &mut bindings::ib_srq_attr) {
        a.max_wr = self.max_wr;
        a.max_sge = self.max_sge;
        a.srq_limit = self.srq_limit;
    }
}

/// What `modify_srq` changes.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct SrqModify {
    /// Resize to `attr.max_wr`.
    pub(crate) resize: bool,
    /// Arm the limit at `attr.srq_limit`.
    pub(crate) limit: bool,
}

/// A shared receive queue of driver `T`.
///
/// # Invariants
///
/// `ib` is a live `ib_srq` of a device of `T`; `data` and `upcalls` are
/// initialised between create and destroy.
///
/// `users` counts the live [`SrqRef`]s; `destroy_cb` waits for it to reach
/// zero before it drops `data`.
#[repr(C)]
pub(crate) struct Srq<T: Driver> {
    ib: Opaque<bindings::ib_srq>,
    data: T::Srq,
    upcalls: super::upcall::Upcalls,
    users: core::sync::atomic::AtomicU32,
}

// SAFETY: The C part is written only before the SRQ is handed to the core
// (`create_cb`) or by the core under its own locks; what the driver shares
// is `T::Srq`, which is `Sync`, and atomics.
unsafe impl<T: Driver> Sync for Srq<T> {}

/// [`Upcalls`](super::upcall::Upcalls) bits of an SRQ:
/// `IB_EVENT_SRQ_LIMIT_REACHED` is due.
const UPCALL_LIMIT: u32 = 1;

impl<T: Driver> Srq<T> {
    /// The driver's data.
    pub(crate) fn data(&self) -> &T::Srq {
        &self.data
    }

    /// The device.
    pub(crate) fn device(&self) -> &Device<T> {
        // SAFETY: Set by the core before the driver is called; the device
        // outlives its SRQs.
        unsafe { Device::from_raw((*self.ib.get()).device) }
    }

    /// The id of the SRQ's PD (see [`Pd::id`]): for an XRC SRQ, the PD that
    /// remote accesses through XRC target QPs are checked against.
    ///
    /// [`Pd::id`]: super::pd::Pd::id
    pub(crate) fn pd_id(&self) -> usize {
        // SAFETY: Set by the core before the driver is called; the PD
        // outlives the SRQ. Only the address is taken.
        unsafe { (*self.ib.get()).pd as usize }
    }

    /// The XRC domain of an XRC SRQ; `None` for a basic one.
    pub(crate) fn xrcd(&self) -> Option<XrcdId> {
        // SAFETY: `srq_type` and the domain are set by the core before the
        // driver is called and never change; the helper reads the union
        // member only for an XRC SRQ.
        XrcdId::from_raw(unsafe { bindings::roxe_srq_xrcd(self.ib.get()) })
    }

    /// The CQ every receive completion of an XRC SRQ goes to, whichever
    /// QP the message came through; `None` for a basic SRQ.
    pub(crate) fn xrc_cq(&self) -> Option<&Cq<T>> {
        self.xrcd()?;
        // SAFETY: For an XRC SRQ the core set `ext.cq` before the driver
        // was called and holds a use count on the CQ until the SRQ is
        // destroyed; it is a CQ of this device.
        unsafe {
            (*self.ib.get())
                .ext
                .cq
                .as_ref()
                .map(|c| &*(c as *const bindings::ib_cq).cast::<Cq<T>>())
        }
    }

    /// A counted reference to this SRQ, which the driver may keep in its
    /// index of SRQs by number: while it lives, the SRQ is not freed.
    pub(crate) fn new_ref(&self) -> SrqRef<T> {
        self.users
            .fetch_add(1, core::sync::atomic::Ordering::Relaxed);
        SrqRef(core::ptr::NonNull::from(self))
    }

    /// Waits until no [`SrqRef`] to this SRQ is left. Sleeps.
    fn wait_unused(&self) {
        let mut waited_ms = 0u32;
        while self.users.load(core::sync::atomic::Ordering::Acquire) != 0 {
            // SAFETY: `destroy_cb` runs in process context.
            unsafe { bindings::msleep(1) };
            waited_ms = waited_ms.saturating_add(1);
            if waited_ms == 5000 {
                // A reference the driver keeps and never drops: say so.
                kernel::pr_warn!("SRQ destroy waits for references still held\n");
            }
        }
    }

    /// Reports `IB_EVENT_SRQ_LIMIT_REACHED`. The event handler runs from a
    /// work item, with no driver lock held, so this may be called under any.
    pub(crate) fn report_limit_reached(&self) {
        self.upcalls.raise(UPCALL_LIMIT);
    }

    /// # Safety
    ///
    /// Only the workqueue calls this, for the work item `create_cb` set up in
    /// the `upcalls` of an SRQ: `work` is that field of a live SRQ.
    unsafe extern "C" fn upcall_cb(work: *mut bindings::work_struct) {
        // SAFETY: Only `create_cb` sets this function up, for the `upcalls`
        // of an `Srq<T>`; the work item runs only while the SRQ is live
        // (`destroy_cb` cancels it first).
        let up = unsafe { super::upcall::Upcalls::from_work(work) };
        let off = core::mem::offset_of!(Self, upcalls);
        let base = (up as *const super::upcall::Upcalls).cast::<u8>();
        // SAFETY: As above: `up` is the `upcalls` field of a live `Srq<T>`.
        let this = unsafe { &*base.sub(off).cast::<Self>() };
        if up.take() & UPCALL_LIMIT == 0 {
            return;
        }
        let mut ev = bindings::ib_event {
            device: this.device().as_raw(),
            event: bindings::ib_event_type_IB_EVENT_SRQ_LIMIT_REACHED,
            ..Default::default()
        };
        ev.element.srq = this.ib.get();
        // SAFETY: The SRQ is live; the handler, if any, was set by the core.
        unsafe {
            if let Some(h) = (*this.ib.get()).event_handler {
                h(&mut ev, (*this.ib.get()).srq_context);
            }
        }
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, through the ops table of a device registered with this
    /// type, for the `create` verb: every pointer is valid for the call and its objects belong
    /// to this driver.
    pub(super) unsafe extern "C" fn create_cb(
        srq: *mut bindings::ib_srq,
        init: *mut bindings::ib_srq_init_attr,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: The core passes valid attributes.
            let ia = unsafe { &mut *init };
            let xrcd = match ia.srq_type {
                bindings::ib_srq_type_IB_SRQT_BASIC => None,
                bindings::ib_srq_type_IB_SRQT_XRC if T::HAS_ALLOC_XRCD => {
                    // SAFETY: The core passes valid attributes; for an XRC
                    // SRQ it checked the domain and holds it.
                    let x = XrcdId::from_raw(unsafe { bindings::roxe_srq_init_xrcd(ia) });
                    Some(x.ok_or(EINVAL)?)
                }
                _ => return Err(super::errno::eopnotsupp()),
            };
            let attr = SrqAttr::from_raw(&ia.attr);
            // SAFETY: NULL or the call's valid udata.
            let udata = unsafe { UData::from_raw(udata) };
            // SAFETY: Set by the core before the call.
            let dev = unsafe { Device::<T>::from_raw((*srq).device) };
            let (data, granted, num) =
                <T::Srq as SrqOps<T>>::create(dev, &attr, xrcd, udata.as_ref())?;
            let this = srq.cast::<Self>();
            // SAFETY: Room for `data` (`size_ib_srq`); pinned by the core.
            unsafe { data.__pinned_init(addr_of_mut!((*this).data))? };
            // SAFETY: The field is ours, pinned with the SRQ, and unused until
            // the SRQ is returned to the core; `destroy_cb` cancels the work
            // before the memory goes.
            unsafe { super::upcall::Upcalls::init(addr_of_mut!((*this).upcalls), Self::upcall_cb) };
            // SAFETY: The field is ours and nothing refers to the SRQ yet.
            unsafe { addr_of_mut!((*this).users).write(core::sync::atomic::AtomicU32::new(0)) };
            // SAFETY: The SRQ is not visible to anyone yet; the helper
            // writes the number only into an XRC SRQ's union member.
            unsafe { bindings::roxe_srq_set_xrc_num(srq, num) };
            granted.write_to(&mut ia.attr);
            // SAFETY: Initialised just above; the core keeps the memory
            // until `destroy_cb`, which waits for every reference.
            <T::Srq as SrqOps<T>>::publish(unsafe { &*this });
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, through the ops table of a device registered with this
    /// type, for the `modify` verb: every pointer is valid for the call and its objects belong
    /// to this driver.
    pub(super) unsafe extern "C" fn modify_cb(
        srq: *mut bindings::ib_srq,
        attr: *mut bindings::ib_srq_attr,
        mask: bindings::ib_srq_attr_mask,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            let known =
                bindings::ib_srq_attr_mask_IB_SRQ_MAX_WR | bindings::ib_srq_attr_mask_IB_SRQ_LIMIT;
            if mask & !known != 0 {
                return Err(EINVAL);
            }
            let what = SrqModify {
                resize: mask & bindings::ib_srq_attr_mask_IB_SRQ_MAX_WR != 0,
                limit: mask & bindings::ib_srq_attr_mask_IB_SRQ_LIMIT != 0,
            };
            // SAFETY: The core passes valid attributes.
            let a = SrqAttr::from_raw(unsafe { &*attr });
            // SAFETY: NULL or the call's valid udata.
            let udata = unsafe { UData::from_raw(udata) };
            // SAFETY: Initialised; the core holds the SRQ.
            let this = unsafe { &*srq.cast::<Self>() };
            <T::Srq as SrqOps<T>>::modify(this, &a, what, udata.as_ref())?;
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, through the ops table of a device registered with this
    /// type, for the `query` verb: every pointer is valid for the call and its objects belong
    /// to this driver.
    pub(super) unsafe extern "C" fn query_cb(
        srq: *mut bindings::ib_srq,
        attr: *mut bindings::ib_srq_attr,
    ) -> c_int {
        from_result(|| {
            // SAFETY: Initialised; the core holds the SRQ.
            let this = unsafe { &*srq.cast::<Self>() };
            let a = <T::Srq as SrqOps<T>>::query(this)?;
            // SAFETY: The core passes a valid out-struct.
            a.write_to(unsafe { &mut *attr });
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, through the ops table of a device registered with this
    /// type, for the `post_recv` verb: every pointer is valid for the call and its objects
    /// belong to this driver.
    pub(super) unsafe extern "C" fn post_recv_cb(
        srq: *mut bindings::ib_srq,
        wr: *const bindings::ib_recv_wr,
        bad: *mut *const bindings::ib_recv_wr,
    ) -> c_int {
        // SAFETY: Initialised; the core holds the SRQ.
        let this = unsafe { &*srq.cast::<Self>() };
        // SAFETY: The core passes a kernel consumer's chain and out-pointer.
        unsafe {
            super::qp::post_recv_chain(wr, bad, |wr_id, sges| {
                <T::Srq as SrqOps<T>>::post_recv(this, wr_id, sges)
            })
        }
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, through the ops table of a device registered with this
    /// type, for the `destroy` verb: every pointer is valid for the call and its objects belong
    /// to this driver.
    pub(super) unsafe extern "C" fn destroy_cb(
        srq: *mut bindings::ib_srq,
        _udata: *mut bindings::ib_udata,
    ) -> c_int {
        let this = srq.cast::<Self>();
        // SAFETY: Called once for an initialised SRQ that no QP uses (the
        // core checks its use count).
        let srq_ref = unsafe { &*this };
        <T::Srq as SrqOps<T>>::destroy(srq_ref);
        // A packet that found the SRQ by number before the driver let go
        // of it finishes first.
        srq_ref.wait_unused();
        // No QP takes from the SRQ any more: an event still due is dropped,
        // one running is waited for.
        srq_ref.upcalls.cancel_sync();
        // SAFETY: As above.
        unsafe { core::ptr::drop_in_place(addr_of_mut!((*this).data)) };
        0
    }
}

/// A counted reference to an SRQ ([`Srq::new_ref`]), as [`QpRef`] is to a
/// QP: the driver keeps these in its index of SRQs by number, for XRC
/// packets, which name their SRQ. The SRQ's destruction waits until none
/// is left.
///
/// [`QpRef`]: super::qp::QpRef
///
/// # Invariants
///
/// The pointer is a live, initialised `Srq<T>` whose `users` counts this
/// reference: `destroy_cb` does not drop the state or return (letting the
/// core free the memory) while `users` is above zero.
pub(crate) struct SrqRef<T: Driver>(core::ptr::NonNull<Srq<T>>);

// SAFETY: `Srq<T>` is `Sync` and the count is atomic, so a reference may
// be used and dropped on any thread.
unsafe impl<T: Driver> Send for SrqRef<T> {}
// SAFETY: As above.
unsafe impl<T: Driver> Sync for SrqRef<T> {}

impl<T: Driver> core::ops::Deref for SrqRef<T> {
    type Target = Srq<T>;

    fn deref(&self) -> &Srq<T> {
        // SAFETY: By the type invariant the SRQ is live while this exists.
        unsafe { self.0.as_ref() }
    }
}

impl<T: Driver> Clone for SrqRef<T> {
    fn clone(&self) -> Self {
        self.new_ref()
    }
}

impl<T: Driver> Drop for SrqRef<T> {
    fn drop(&mut self) {
        // Pairs with `wait_unused`'s acquire.
        self.users
            .fetch_sub(1, core::sync::atomic::Ordering::Release);
    }
}
