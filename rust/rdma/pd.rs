// SPDX-License-Identifier: GPL-2.0

//! Protection domains (`struct ib_pd`).

use super::device::{Device, Driver};
use super::udata::UData;
use crate::bindings;
use core::ptr::addr_of_mut;
use kernel::error::from_result;
use kernel::error::Result;
use kernel::ffi::c_int;
use kernel::macros::vtable;
use kernel::types::Opaque;

/// The verbs of a PD, implemented by the driver's per-PD state.
#[vtable]
pub(crate) trait PdOps<T: Driver>: Send + Sync + Sized {
    /// Allocates a PD; `udata` is `None` for kernel callers.
    fn alloc(dev: &Device<T>, udata: Option<&UData<'_>>) -> Result<Self>;

    /// Releases a PD that nothing uses any more.
    fn dealloc(dev: &Device<T>, pd: Self);
}

/// A protection domain of driver `T`. The RDMA core allocates it with room
/// for the driver's data (`size_ib_pd`).
///
/// # Invariants
///
/// `ib` is a live `ib_pd` of a device of `T`; `data` is initialised
/// between `alloc_pd` and `dealloc_pd`.
#[repr(C)]
pub(crate) struct Pd<T: Driver> {
    ib: Opaque<bindings::ib_pd>,
    data: T::Pd,
}

impl<T: Driver> Pd<T> {
    /// The driver's data.
    pub(crate) fn data(&self) -> &T::Pd {
        &self.data
    }

    /// The device the PD belongs to.
    /// A number that identifies this PD among the live PDs (its address):
    /// objects may be used together only if their PD ids are equal.
    pub(crate) fn id(&self) -> usize {
        core::ptr::from_ref(self) as usize
    }

    pub(crate) fn device(&self) -> &Device<T> {
        // SAFETY: The core sets `device` before any driver call and the
        // device outlives its PDs.
        unsafe { Device::from_raw((*self.ib.get()).device) }
    }

    /// # Safety
    ///
    /// `pd` must be an initialised PD of driver `T`, alive for `'a`.
    pub(crate) unsafe fn from_raw<'a>(pd: *mut bindings::ib_pd) -> &'a Self {
        // SAFETY: `ib` is the first field of the `#[repr(C)]` container the
        // core allocated with `size_ib_pd`.
        unsafe { &*pd.cast::<Self>() }
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, through the ops table of a device registered with this
    /// type, for the `alloc` verb: every pointer is valid for the call and its objects belong
    /// to this driver.
    pub(super) unsafe extern "C" fn alloc_cb(
        pd: *mut bindings::ib_pd,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: The core passes NULL or the call's valid udata.
            let udata = unsafe { UData::from_raw(udata) };
            // SAFETY: The core set `device` on the zeroed allocation.
            let dev = unsafe { Device::<T>::from_raw((*pd).device) };
            let data = <T::Pd as PdOps<T>>::alloc(dev, udata.as_ref())?;
            let this = pd.cast::<Self>();
            // SAFETY: The container has room for `data` (`size_ib_pd`) and
            // nothing initialised it yet.
            unsafe { addr_of_mut!((*this).data).write(data) };
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, through the ops table of a device registered with this
    /// type, for the `dealloc` verb: every pointer is valid for the call and its objects belong
    /// to this driver.
    pub(super) unsafe extern "C" fn dealloc_cb(
        pd: *mut bindings::ib_pd,
        _udata: *mut bindings::ib_udata,
    ) -> c_int {
        let this = pd.cast::<Self>();
        // SAFETY: The core calls this once for a PD that `alloc_cb`
        // initialised, after every object using it is gone.
        let data = unsafe { addr_of_mut!((*this).data).read() };
        // SAFETY: As above.
        let dev = unsafe { Device::<T>::from_raw((*pd).device) };
        <T::Pd as PdOps<T>>::dealloc(dev, data);
        0
    }
}
