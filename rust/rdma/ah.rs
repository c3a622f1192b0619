// SPDX-License-Identifier: GPL-2.0

//! Address handles (`struct ib_ah`).

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

/// The verbs of an AH, implemented by the driver's per-AH state.
#[vtable]
pub(crate) trait AhOps<T: Driver>: Send + Sync + Sized {
    /// Creates an AH. When `sleepable` is false the caller is in atomic
    /// context and nothing may sleep.
    /// The AH belongs to `pd`; with `udata` it is a user AH.
    fn create(
        dev: &Device<T>,
        pd: &Pd<T>,
        attr: &AhAttr,
        sleepable: bool,
        udata: Option<&UData<'_>>,
    ) -> Result<Self>;

    /// Destroys an AH.
    fn destroy(dev: &Device<T>, ah: Self);
}

/// The kind of GID an address handle sends from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum GidType {
    /// RoCE v2 (UDP/IP encapsulation).
    RoceV2,
    /// Anything else (IB, RoCE v1).
    Other,
}

/// A RoCE address vector, copied out of `struct rdma_ah_attr`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct AhAttr {
    pub(crate) port: u32,
    pub(crate) sl: u8,
    pub(crate) static_rate: u8,
    /// Whether the global route header was given (always, for RoCE).
    pub(crate) has_grh: bool,
    /// Whether the attribute is of the RoCE type.
    pub(crate) is_roce: bool,
    pub(crate) dgid: [u8; 16],
    pub(crate) sgid_index: u8,
    pub(crate) flow_label: u32,
    pub(crate) hop_limit: u8,
    pub(crate) traffic_class: u8,
    pub(crate) dmac: [u8; 6],
    /// The source GID and its type, if the core resolved one.
    pub(crate) sgid: Option<([u8; 16], GidType)>,
}

impl AhAttr {
    /// # Safety
    ///
    /// `a` must be a valid `rdma_ah_attr` whose `sgid_attr` is NULL or valid.
    pub(super) unsafe fn from_raw(a: &bindings::rdma_ah_attr) -> Self {
        let is_roce = a.type_ == bindings::rdma_ah_attr_type_RDMA_AH_ATTR_TYPE_ROCE;
        // SAFETY: The union holds the RoCE member for RoCE attributes; for
        // any other type the bytes are only copied, never trusted.
        let dmac = unsafe { a.__bindgen_anon_1.roce.dmac };
        // SAFETY: `raw` covers the whole GID union.
        let dgid = unsafe { a.grh.dgid.raw };
        // SAFETY: Per the function's contract.
        let sgid = unsafe { a.grh.sgid_attr.as_ref() }.map(|g| {
            // SAFETY: As above.
            let raw = unsafe { g.gid.raw };
            let t = if g.gid_type == bindings::ib_gid_type_IB_GID_TYPE_ROCE_UDP_ENCAP {
                GidType::RoceV2
            } else {
                GidType::Other
            };
            (raw, t)
        });
        Self {
            port: a.port_num,
            sl: a.sl,
            static_rate: a.static_rate,
            has_grh: u32::from(a.ah_flags) & bindings::ib_ah_flags_IB_AH_GRH != 0,
            is_roce,
            dgid,
            sgid_index: a.grh.sgid_index,
            flow_label: a.grh.flow_label,
            hop_limit: a.grh.hop_limit,
            traffic_class: a.grh.traffic_class,
            dmac,
            sgid,
        }
    }
}

impl AhAttr {
    /// Writes the attribute back for a query (without a source GID
    /// reference, which the querying core code does not need).
    pub(crate) fn write_to(&self, a: &mut bindings::rdma_ah_attr) {
        a.type_ = bindings::rdma_ah_attr_type_RDMA_AH_ATTR_TYPE_ROCE;
        a.port_num = self.port;
        a.sl = self.sl;
        a.static_rate = self.static_rate;
        a.ah_flags = bindings::ib_ah_flags_IB_AH_GRH as u8;
        a.grh.dgid.raw = self.dgid;
        a.grh.sgid_index = self.sgid_index;
        a.grh.flow_label = self.flow_label;
        a.grh.hop_limit = self.hop_limit;
        a.grh.traffic_class = self.traffic_class;
        a.grh.sgid_attr = core::ptr::null();
        a.__bindgen_anon_1.roce.dmac = self.dmac;
    }
}

/// An address handle of driver `T`.
///
/// # Invariants
///
/// `ib` is a live `ib_ah` of a device of `T`; `data` is initialised between
/// `create_ah` and `destroy_ah`.
#[repr(C)]
pub(crate) struct Ah<T: Driver> {
    ib: Opaque<bindings::ib_ah>,
    /// The address vector as created, for `query_ah` (the MAD layer
    /// matches a reply to its request by the request AH's source GID).
    attr: AhAttr,
    data: T::Ah,
}

impl<T: Driver> Ah<T> {
    /// The driver's data.
    pub(crate) fn data(&self) -> &T::Ah {
        &self.data
    }

    /// The device.
    pub(crate) fn device(&self) -> &Device<T> {
        // SAFETY: The core sets `device` before calling the driver; the
        // device outlives its AHs.
        unsafe { Device::from_raw((*self.ib.get()).device) }
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, through the ops table of a device registered with this
    /// type, for the `create` verb: every pointer is valid for the call and its objects belong
    /// to this driver.
    pub(super) unsafe extern "C" fn create_cb(
        ah: *mut bindings::ib_ah,
        init: *mut bindings::rdma_ah_init_attr,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: The core passes valid attributes.
            let init = unsafe { &*init };
            // SAFETY: As above.
            let attr = unsafe { init.ah_attr.as_ref() }.ok_or(EINVAL)?;
            // SAFETY: As above; `sgid_attr` is NULL or held by the core.
            let attr = unsafe { AhAttr::from_raw(attr) };
            let sleepable =
                init.flags & bindings::rdma_create_ah_flags_RDMA_CREATE_AH_SLEEPABLE != 0;
            // SAFETY: The core passes NULL or the call's valid udata.
            let udata = unsafe { UData::from_raw(udata) };
            // SAFETY: The core set `device` and `pd` (a live PD of the
            // device, which the AH holds a use count on) on the zeroed
            // allocation before the call.
            let (dev, pd) = unsafe {
                (
                    Device::<T>::from_raw((*ah).device),
                    Pd::<T>::from_raw((*ah).pd),
                )
            };
            let data = <T::Ah as AhOps<T>>::create(dev, pd, &attr, sleepable, udata.as_ref())?;
            let this = ah.cast::<Self>();
            // SAFETY: The container has room for both fields (`size_ib_ah`).
            unsafe {
                addr_of_mut!((*this).attr).write(attr);
                addr_of_mut!((*this).data).write(data);
            }
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, through the ops table of a device registered with this
    /// type, for the `query_ah` verb: `ah` is an AH that `create_cb` initialised and `out` is
    /// valid and exclusive for the call.
    pub(super) unsafe extern "C" fn query_cb(
        ah: *mut bindings::ib_ah,
        out: *mut bindings::rdma_ah_attr,
    ) -> c_int {
        let this = ah.cast::<Self>();
        // SAFETY: `attr` was written by `create_cb` and is never changed.
        let attr = unsafe { &(*this).attr };
        // SAFETY: Per the function's contract.
        attr.write_to(unsafe { &mut *out });
        0
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, through the ops table of a device registered with this
    /// type, for the `destroy` verb: every pointer is valid for the call and its objects belong
    /// to this driver.
    pub(super) unsafe extern "C" fn destroy_cb(ah: *mut bindings::ib_ah, _flags: u32) -> c_int {
        let this = ah.cast::<Self>();
        // SAFETY: Called once, for an AH that `create_cb` initialised.
        let data = unsafe { addr_of_mut!((*this).data).read() };
        // SAFETY: As above.
        let dev = unsafe { Device::<T>::from_raw((*ah).device) };
        <T::Ah as AhOps<T>>::destroy(dev, data);
        0
    }
}

/// Whether an allocation may sleep.
pub(crate) fn flags_for(sleepable: bool) -> kernel::alloc::Flags {
    if sleepable {
        kernel::alloc::flags::GFP_KERNEL
    } else {
        kernel::alloc::flags::GFP_ATOMIC
    }
}
