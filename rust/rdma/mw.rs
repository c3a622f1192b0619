// SPDX-License-Identifier: GPL-2.0

//! Memory windows (`struct ib_mw`).

use super::device::{Device, Driver};
use super::pd::Pd;
use super::udata::UData;
use crate::bindings;
use core::ptr::addr_of_mut;
use kernel::error::Result;
use kernel::error::{code::*, from_result};
use kernel::ffi::c_int;
use kernel::macros::vtable;
use kernel::types::Opaque;

/// The verbs of a memory window, implemented by the driver's per-MW state.
/// Both are optional: a driver without windows names [`NoMw`].
#[vtable]
pub(crate) trait MwOps<T: Driver>: Send + Sync + Sized {
    /// Allocates a memory window; returns its state and rkey. A driver
    /// that has it has `dealloc` too.
    fn alloc(
        _dev: &Device<T>,
        _pd: &Pd<T>,
        _mw_type: MwType,
        _udata: Option<&UData<'_>>,
    ) -> Result<(Self, u32)> {
        kernel::build_error(kernel::error::VTABLE_DEFAULT_ERROR)
    }

    /// Frees a memory window.
    fn dealloc(_dev: &Device<T>, _mw: Self) {
        kernel::build_error(kernel::error::VTABLE_DEFAULT_ERROR)
    }
}

/// The MW state of a driver without memory windows.
pub(crate) struct NoMw;

#[vtable]
impl<T: Driver> MwOps<T> for NoMw {}

/// Memory-window types.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MwType {
    /// Type 1: bound with `ibv_bind_mw`, PD-scoped.
    One,
    /// Type 2: bound with a work request, QP-scoped.
    Two,
}

/// A memory window of driver `T`.
///
/// # Invariants
///
/// `ib` is a live `ib_mw` of a device of `T`; `data` is initialised between
/// alloc and dealloc.
#[repr(C)]
pub(crate) struct Mw<T: Driver> {
    ib: Opaque<bindings::ib_mw>,
    data: T::Mw,
}

impl<T: Driver> Mw<T> {
    /// The driver's data.
    pub(crate) fn data(&self) -> &T::Mw {
        &self.data
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, through the ops table of a device registered with this
    /// type, for the `alloc` verb: every pointer is valid for the call and its objects belong
    /// to this driver.
    pub(super) unsafe extern "C" fn alloc_cb(
        mw: *mut bindings::ib_mw,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            let (t, dev, pd) =
                // SAFETY: The core set `type`, `device` and `pd` (a live PD
                // of the device) before the call.
                unsafe { ((*mw).type_, Device::<T>::from_raw((*mw).device), Pd::<T>::from_raw((*mw).pd)) };
            let t = match t {
                bindings::ib_mw_type_IB_MW_TYPE_1 => MwType::One,
                bindings::ib_mw_type_IB_MW_TYPE_2 => MwType::Two,
                _ => return Err(EINVAL),
            };
            // SAFETY: NULL or the call's valid udata.
            let udata = unsafe { UData::from_raw(udata) };
            let (data, rkey) = <T::Mw as MwOps<T>>::alloc(dev, pd, t, udata.as_ref())?;
            let this = mw.cast::<Self>();
            // SAFETY: Room for `data` (`size_ib_mw`); not initialised yet.
            unsafe {
                addr_of_mut!((*this).data).write(data);
                (*mw).rkey = rkey;
            }
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, through the ops table of a device registered with this
    /// type, for the `dealloc` verb: every pointer is valid for the call and its objects belong
    /// to this driver.
    pub(super) unsafe extern "C" fn dealloc_cb(mw: *mut bindings::ib_mw) -> c_int {
        let this = mw.cast::<Self>();
        // SAFETY: Called once, for an initialised MW.
        let data = unsafe { addr_of_mut!((*this).data).read() };
        // SAFETY: As above.
        let dev = unsafe { Device::<T>::from_raw((*mw).device) };
        <T::Mw as MwOps<T>>::dealloc(dev, data);
        0
    }
}
