// SPDX-License-Identifier: GPL-2.0

//! XRC domains (`struct ib_xrcd`).
//!
//! The RDMA core does the sharing: one domain per inode of the file a
//! process names, found again by the next process that opens the same
//! file, counted and freed with its last user. A driver needs only to tell
//! domains apart, which their address does, so it keeps no state in one.

use super::device::{Device, Driver};
use super::udata::UData;
use crate::bindings;
use kernel::error::from_result;
use kernel::ffi::c_int;

/// An XRC domain, as the objects that belong to one name it: XRC SRQs and
/// XRC target QPs may work together only if their ids are equal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct XrcdId(usize);

impl XrcdId {
    /// The id of the domain at `x`; `None` for NULL. Only the address is
    /// used: the pointer is never read.
    pub(crate) fn from_raw(x: *const bindings::ib_xrcd) -> Option<Self> {
        (!x.is_null()).then_some(XrcdId(x as usize))
    }
}

/// # Safety
///
/// Only the RDMA core calls this, through the ops table of a device registered with driver
/// `T`, for the `alloc_xrcd` verb: every pointer is valid for the call.
pub(super) unsafe extern "C" fn alloc_cb<T: Driver>(
    xrcd: *mut bindings::ib_xrcd,
    udata: *mut bindings::ib_udata,
) -> c_int {
    from_result(|| {
        // SAFETY: The core passes NULL or the call's valid udata.
        let udata = unsafe { UData::from_raw(udata) };
        // SAFETY: The core set `device` on the zeroed allocation.
        let dev = unsafe { Device::<T>::from_raw((*xrcd).device) };
        T::alloc_xrcd(dev, udata.as_ref())?;
        Ok(0)
    })
}

/// # Safety
///
/// Only the RDMA core calls this, through the ops table of a device registered with driver
/// `T`, for the `dealloc_xrcd` verb, once nothing uses the domain.
pub(super) unsafe extern "C" fn dealloc_cb<T: Driver>(
    xrcd: *mut bindings::ib_xrcd,
    _udata: *mut bindings::ib_udata,
) -> c_int {
    // SAFETY: As in `alloc_cb`.
    let dev = unsafe { Device::<T>::from_raw((*xrcd).device) };
    T::dealloc_xrcd(dev);
    0
}
