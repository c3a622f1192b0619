// SPDX-License-Identifier: GPL-2.0

//! Completion queues (`struct ib_cq`).

use super::device::{Device, Driver};
use super::udata::UData;
use super::upcall::Upcalls;
use crate::bindings;
use crate::proto::wr::{WcOp, WcStatus};
use core::ptr::addr_of_mut;
use kernel::error::{code::*, from_result};
use kernel::error::{Error, Result};
use kernel::ffi::c_int;
use kernel::init::PinInit;
use kernel::macros::vtable;
use kernel::types::Opaque;

/// The verbs of a CQ, implemented by the driver's per-CQ state.
#[vtable]
pub(crate) trait CqOps<T: Driver>: Send + Sync + Sized {
    /// Creates a CQ. Returns the initialiser of its state and the number
    /// of entries it actually holds (at least `init.cqe`).
    fn create(
        dev: &Device<T>,
        init: &CqInit,
        udata: Option<&UData<'_>>,
    ) -> Result<(impl PinInit<Self, Error>, u32)>;

    /// Called just before a CQ's state is dropped.
    fn destroy(cq: &Cq<T>);

    /// Resizes a CQ; returns the new number of entries.
    fn resize(_cq: &Cq<T>, _cqe: u32, _udata: Option<&UData<'_>>) -> Result<u32> {
        kernel::build_error(kernel::error::VTABLE_DEFAULT_ERROR)
    }

    /// Arms the CQ; returns whether completions are already waiting.
    fn req_notify(cq: &Cq<T>, kind: Notify) -> Result<bool>;

    /// Takes the next completion from a kernel consumer's CQ.
    fn poll(cq: &Cq<T>) -> Option<Wc<T>>;
}

/// Creation parameters (`struct ib_cq_init_attr`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct CqInit {
    /// Entries the caller wants room for.
    pub(crate) cqe: u32,
    /// The completion vector.
    pub(crate) comp_vector: u32,
    /// `IB_UVERBS_CQ_FLAGS_*`.
    pub(crate) flags: u32,
}

/// What `ib_req_notify_cq` asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Notify {
    /// The next completion of any kind.
    NextCompletion,
    /// The next solicited (or error) completion.
    Solicited,
}

/// A completion queue of driver `T`.
///
/// # Invariants
///
/// `ib` is a live `ib_cq` of a device of `T`; `data` and `upcalls` are
/// initialised between `create_cq` and `destroy_cq`.
#[repr(C)]
pub(crate) struct Cq<T: Driver> {
    ib: Opaque<bindings::ib_cq>,
    data: T::Cq,
    upcalls: Upcalls,
}

/// [`Upcalls`] bits of a CQ: the completion handler is due.
const UPCALL_COMP: u32 = 1;
/// [`Upcalls`] bits of a CQ: `IB_EVENT_CQ_ERR` is due.
const UPCALL_ERR: u32 = 2;

/// What a completion carries besides its length: the immediate data of a
/// SEND or RDMA WRITE with immediate, or the rkey a SEND with invalidate
/// invalidated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WcExtra {
    /// Nothing.
    None,
    /// Immediate data, in network byte order as it came.
    Imm(u32),
    /// The rkey invalidated.
    Invalidated(u32),
}

/// A work completion for a kernel consumer (`struct ib_wc`), which
/// [`CqOps::poll`] hands back.
pub(crate) struct Wc<T: Driver> {
    pub(crate) wr_id: u64,
    pub(crate) status: WcStatus,
    pub(crate) opcode: WcOp,
    /// Driver detail for an error completion.
    pub(crate) vendor_err: u32,
    pub(crate) byte_len: u32,
    /// The local QP, if it still exists.
    pub(crate) qp: Option<super::qp::QpRef<T>>,
    /// UD: the sender's QP.
    pub(crate) src_qp: u32,
    pub(crate) extra: WcExtra,
    /// UD: a GRH precedes the data.
    pub(crate) grh: bool,
    /// UD: the `enum rdma_network_type` the datagram came by, if known.
    pub(crate) network_hdr_type: Option<u8>,
    pub(crate) pkey_index: u16,
    pub(crate) sl: u8,
    pub(crate) port_num: u8,
}

// The typed completion codes are the kernel's `enum ib_wc_status` and
// `enum ib_wc_opcode` values, so `poll_cb` passes them on as they are.
const fn pairs_equal(pairs: &[(u32, u32)]) -> bool {
    let mut i = 0;
    while i < pairs.len() {
        if pairs[i].0 != pairs[i].1 {
            return false;
        }
        i += 1;
    }
    true
}
const _: () = {
    use bindings::*;
    use WcOp as O;
    use WcStatus as S;
    assert!(pairs_equal(&[
        (O::Send as u32, ib_wc_opcode_IB_WC_SEND),
        (O::RdmaWrite as u32, ib_wc_opcode_IB_WC_RDMA_WRITE),
        (O::RdmaRead as u32, ib_wc_opcode_IB_WC_RDMA_READ),
        (O::CompSwap as u32, ib_wc_opcode_IB_WC_COMP_SWAP),
        (O::FetchAdd as u32, ib_wc_opcode_IB_WC_FETCH_ADD),
        (O::BindMw as u32, ib_wc_opcode_IB_WC_BIND_MW),
        (O::LocalInv as u32, ib_wc_opcode_IB_WC_LOCAL_INV),
        (O::Flush as u32, ib_wc_opcode_IB_WC_FLUSH),
        (O::AtomicWrite as u32, ib_wc_opcode_IB_WC_ATOMIC_WRITE),
        (O::RegMr as u32, ib_wc_opcode_IB_WC_REG_MR),
        (O::Recv as u32, ib_wc_opcode_IB_WC_RECV),
        (O::RecvRdmaImm as u32, ib_wc_opcode_IB_WC_RECV_RDMA_WITH_IMM),
    ]));
    assert!(pairs_equal(&[
        (S::Success as u32, ib_wc_status_IB_WC_SUCCESS),
        (S::LocLenErr as u32, ib_wc_status_IB_WC_LOC_LEN_ERR),
        (S::LocQpOpErr as u32, ib_wc_status_IB_WC_LOC_QP_OP_ERR),
        (S::LocProtErr as u32, ib_wc_status_IB_WC_LOC_PROT_ERR),
        (S::WrFlushErr as u32, ib_wc_status_IB_WC_WR_FLUSH_ERR),
        (S::MwBindErr as u32, ib_wc_status_IB_WC_MW_BIND_ERR),
        (S::BadRespErr as u32, ib_wc_status_IB_WC_BAD_RESP_ERR),
        (S::LocAccessErr as u32, ib_wc_status_IB_WC_LOC_ACCESS_ERR),
        (S::RemInvReqErr as u32, ib_wc_status_IB_WC_REM_INV_REQ_ERR),
        (S::RemAccessErr as u32, ib_wc_status_IB_WC_REM_ACCESS_ERR),
        (S::RemOpErr as u32, ib_wc_status_IB_WC_REM_OP_ERR),
        (S::RetryExcErr as u32, ib_wc_status_IB_WC_RETRY_EXC_ERR),
        (
            S::RnrRetryExcErr as u32,
            ib_wc_status_IB_WC_RNR_RETRY_EXC_ERR
        ),
        (S::GeneralErr as u32, ib_wc_status_IB_WC_GENERAL_ERR),
    ]));
};

impl<T: Driver> Cq<T> {
    /// The driver's data.
    pub(crate) fn data(&self) -> &T::Cq {
        &self.data
    }

    /// The device the CQ belongs to.
    pub(crate) fn device(&self) -> &Device<T> {
        // SAFETY: The core sets `device` before any driver call, and the
        // device outlives its CQs.
        unsafe { Device::from_raw((*self.ib.get()).device) }
    }

    /// Has the consumer's completion handler run (after a completion
    /// arrived on an armed CQ). The handler runs from a work item, with no
    /// driver lock held, so this may be called under any of them.
    pub(crate) fn call_comp_handler(&self) {
        self.upcalls.raise(UPCALL_COMP);
    }

    /// Reports `IB_EVENT_CQ_ERR` (overflow, or a corrupted ring), from a
    /// work item like [`Cq::call_comp_handler`].
    pub(crate) fn report_error(&self) {
        self.upcalls.raise(UPCALL_ERR);
    }

    /// # Safety
    ///
    /// Only the workqueue calls this, for the work item `create_cb` set up in
    /// the `upcalls` of a CQ: `work` is that field of a live CQ.
    unsafe extern "C" fn upcall_cb(work: *mut bindings::work_struct) {
        // SAFETY: Only `create_cb` sets this function up, for the `upcalls`
        // of a `Cq<T>`; the work item runs only while the CQ is live
        // (`destroy_cb` cancels it first).
        let up = unsafe { Upcalls::from_work(work) };
        let off = core::mem::offset_of!(Self, upcalls);
        // SAFETY: As above: `up` is the `upcalls` field of a live `Cq<T>`.
        let this = unsafe { &*(up as *const Upcalls).cast::<u8>().sub(off).cast::<Self>() };
        let due = up.take();
        if due & UPCALL_ERR != 0 {
            let ev = bindings::ib_event_type_IB_EVENT_CQ_ERR;
            // SAFETY: The CQ is live; the helper checks for a NULL handler.
            unsafe { bindings::roxe_dispatch_cq_event(this.ib.get(), ev) };
        }
        if due & UPCALL_COMP != 0 {
            // SAFETY: The CQ is live; the helper checks for a NULL handler.
            unsafe { bindings::roxe_cq_comp(this.ib.get()) };
        }
    }

    fn set_cqe(ib: *mut bindings::ib_cq, cqe: u32) {
        // SAFETY: The core reads `cqe` only after create/resize return, and
        // calls those one at a time per CQ.
        unsafe { (*ib).cqe = i32::try_from(cqe).unwrap_or(i32::MAX) };
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, through the ops table of a device registered with this
    /// type, for the `create` verb: every pointer is valid for the call and its objects belong
    /// to this driver.
    pub(super) unsafe extern "C" fn create_cb(
        cq: *mut bindings::ib_cq,
        attr: *const bindings::ib_cq_init_attr,
        attrs: *mut bindings::uverbs_attr_bundle,
    ) -> c_int {
        from_result(|| {
            // SAFETY: NULL for kernel callers, else the call's bundle.
            let udata = unsafe { UData::from_raw(bindings::roxe_attrs_udata(attrs)) };
            // SAFETY: The core passes valid attributes.
            let a = unsafe { &*attr };
            let init = CqInit {
                cqe: a.cqe,
                comp_vector: a.comp_vector,
                flags: a.flags,
            };
            // SAFETY: The core set `device` on the zeroed allocation.
            let dev = unsafe { Device::<T>::from_raw((*cq).device) };
            let (data, cqe) = <T::Cq as CqOps<T>>::create(dev, &init, udata.as_ref())?;
            let this = cq.cast::<Self>();
            // SAFETY: The container has room for `data` (`size_ib_cq`) and
            // is pinned (the core never moves it). On error the initialiser
            // cleans up after itself.
            unsafe { data.__pinned_init(addr_of_mut!((*this).data))? };
            // SAFETY: The field is ours, pinned with the CQ, and unused until
            // the CQ is returned to the core; `destroy_cb` cancels the work
            // before the memory goes.
            unsafe { Upcalls::init(addr_of_mut!((*this).upcalls), Self::upcall_cb) };
            Self::set_cqe(cq, cqe);
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, through the ops table of a device registered with this
    /// type, for the `destroy` verb: every pointer is valid for the call and its objects belong
    /// to this driver.
    pub(super) unsafe extern "C" fn destroy_cb(
        cq: *mut bindings::ib_cq,
        _udata: *mut bindings::ib_udata,
    ) -> c_int {
        let this = cq.cast::<Self>();
        // SAFETY: The core calls this once, for a CQ that `create_cb`
        // initialised and that no QP uses any more (it checks `usecnt`).
        let cq_ref = unsafe { &*this };
        <T::Cq as CqOps<T>>::destroy(cq_ref);
        // No QP completes into the CQ any more: a handler still due is
        // dropped, and one running is waited for.
        cq_ref.upcalls.cancel_sync();
        // SAFETY: As above; nothing uses the data after this.
        unsafe { core::ptr::drop_in_place(addr_of_mut!((*this).data)) };
        0
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, through the ops table of a device registered with this
    /// type, for the `resize` verb: every pointer is valid for the call and its objects belong
    /// to this driver.
    pub(super) unsafe extern "C" fn resize_cb(
        cq: *mut bindings::ib_cq,
        cqe: c_int,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            let cqe = u32::try_from(cqe).map_err(|_| EINVAL)?;
            // SAFETY: The core passes NULL or the call's valid udata.
            let udata = unsafe { UData::from_raw(udata) };
            // SAFETY: The CQ is initialised; the core holds it.
            let this = unsafe { &*cq.cast::<Self>() };
            let n = <T::Cq as CqOps<T>>::resize(this, cqe, udata.as_ref())?;
            Self::set_cqe(cq, n);
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, through the ops table of a device registered with this
    /// type, for the `req_notify` verb: every pointer is valid for the call and its objects
    /// belong to this driver.
    pub(super) unsafe extern "C" fn req_notify_cb(
        cq: *mut bindings::ib_cq,
        flags: bindings::ib_cq_notify_flags,
    ) -> c_int {
        from_result(|| {
            let kind = match flags & bindings::ib_cq_notify_flags_IB_CQ_SOLICITED_MASK {
                bindings::ib_cq_notify_flags_IB_CQ_SOLICITED => Notify::Solicited,
                bindings::ib_cq_notify_flags_IB_CQ_NEXT_COMP => Notify::NextCompletion,
                _ => return Err(EINVAL),
            };
            let report_missed =
                flags & bindings::ib_cq_notify_flags_IB_CQ_REPORT_MISSED_EVENTS != 0;
            // SAFETY: The CQ is initialised; the core holds it.
            let this = unsafe { &*cq.cast::<Self>() };
            let pending = <T::Cq as CqOps<T>>::req_notify(this, kind)?;
            Ok(if report_missed && pending { 1 } else { 0 })
        })
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, through the ops table of a device registered with this
    /// type, for the `poll` verb: every pointer is valid for the call and its objects belong to
    /// this driver.
    pub(super) unsafe extern "C" fn poll_cb(
        cq: *mut bindings::ib_cq,
        num: c_int,
        wc: *mut bindings::ib_wc,
    ) -> c_int {
        // SAFETY: The CQ is initialised; the core holds it.
        let this = unsafe { &*cq.cast::<Self>() };
        let mut n = 0;
        while n < num {
            let Some(c) = <T::Cq as CqOps<T>>::poll(this) else {
                break;
            };
            let mut w = bindings::ib_wc::default();
            w.__bindgen_anon_1.wr_id = c.wr_id;
            w.status = c.status as u32;
            w.opcode = c.opcode as u32;
            w.vendor_err = c.vendor_err;
            w.byte_len = c.byte_len;
            // Only the pointer is kept: the consumer that polls owns the QP.
            w.qp = c.qp.as_ref().map_or(core::ptr::null_mut(), |q| q.as_raw());
            w.src_qp = c.src_qp;
            let mut flags = 0u32;
            match c.extra {
                WcExtra::None => {}
                WcExtra::Imm(imm) => {
                    w.ex.imm_data = imm;
                    flags |= bindings::ib_wc_flags_IB_WC_WITH_IMM;
                }
                WcExtra::Invalidated(rkey) => {
                    w.ex.invalidate_rkey = rkey;
                    flags |= bindings::ib_wc_flags_IB_WC_WITH_INVALIDATE;
                }
            }
            if c.grh {
                flags |= bindings::ib_wc_flags_IB_WC_GRH;
            }
            if let Some(t) = c.network_hdr_type {
                w.network_hdr_type = t;
                flags |= bindings::ib_wc_flags_IB_WC_WITH_NETWORK_HDR_TYPE;
            }
            // CAST: flag bits, each below bit 31.
            w.wc_flags = flags as c_int;
            w.pkey_index = c.pkey_index;
            w.sl = c.sl;
            w.port_num = u32::from(c.port_num);
            // SAFETY: The caller's array holds `num` entries and `n < num`.
            unsafe { wc.add(n as usize).write(w) };
            n += 1;
        }
        n
    }
}
