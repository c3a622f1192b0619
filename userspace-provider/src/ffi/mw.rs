// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Memory windows: allocation and deallocation through the kernel, with
//! no driver data in either direction, and binding through the send
//! queue.
//!
//! A bind is a send WQE (`roxe_uapi::SendWqe` with `IBV_WR_BIND_MW`) that
//! the kernel carries out in order with the other work requests of the
//! QP. Type 1 windows are bound with `ibv_bind_mw` ([`bind_mw`]), type 2
//! windows with a bind work request (`ibv_post_send`, or `ibv_wr_bind_mw`
//! of the extended interface); `crate::qp::bind_fields` has the checks
//! and the WQE's fields.

use core::ffi::c_int;
use core::mem::size_of_val;
use core::ptr::{self, NonNull};

use super::qp::post_single;
use super::{cmd_result, drop_box, ibv_cmd_alloc_mw, ibv_cmd_dealloc_mw, set_errno, try_box};
use crate::abi::{ibv, uverbs};
use crate::errno::Errno;
use crate::qp::{Bind, BindVia};

/// `verbs_context_ops.alloc_mw`.
///
/// Returns NULL with `errno` set on failure. `ibv_cmd_alloc_mw` fills in
/// every field of the `ibv_mw`; the kernel picks the rkey and refuses an
/// unknown type.
///
/// # Safety
///
/// `pd` is a live roxe PD.
pub(super) unsafe extern "C" fn alloc_mw(pd: *mut ibv::Pd, mw_type: ibv::MwType) -> *mut ibv::Mw {
    let Some(mw) = try_box(ibv::Mw::ZERO) else {
        set_errno(Errno::ENOMEM);
        return ptr::null_mut();
    };
    let mut cmd = ibv::AllocMw::default();
    let mut resp = uverbs::AllocMwResp::default();
    // SAFETY: `pd` is live per the contract; `mw` is a live `ibv_mw`;
    // `cmd` and `resp` are writable for exactly the (core) sizes passed,
    // so there is no driver data either way.
    let ret = unsafe {
        ibv_cmd_alloc_mw(
            pd,
            mw_type,
            mw.as_ptr(),
            &raw mut cmd,
            size_of_val(&cmd),
            &raw mut resp,
            size_of_val(&resp),
        )
    };
    if let Err(err) = cmd_result(ret) {
        // SAFETY: `mw` came from `try_box` and was never published.
        unsafe { drop_box(mw) };
        set_errno(err);
        return ptr::null_mut();
    }
    mw.as_ptr()
}

/// `verbs_context_ops.dealloc_mw`: returns 0 or a positive errno, which
/// `ibv_dealloc_mw` returns unchanged. On failure the MW stays valid.
///
/// # Safety
///
/// `mw` was returned by [`alloc_mw`] and is not deallocated yet; the caller
/// does not use it after a successful call.
pub(super) unsafe extern "C" fn dealloc_mw(mw: *mut ibv::Mw) -> c_int {
    let Some(mw) = NonNull::new(mw) else {
        return Errno::EINVAL.get();
    };
    // SAFETY: `mw` is a live MW of an open context per the contract.
    let ret = unsafe { ibv_cmd_dealloc_mw(mw.as_ptr()) };
    if let Err(err) = cmd_result(ret) {
        return err.get();
    }
    // SAFETY: `mw` came from `try_box` in `alloc_mw`; the kernel object is
    // gone and the caller no longer uses it.
    unsafe { drop_box(mw) };
    0
}

/// Reads what a bind of `mw` to `info` needs from the window and the MR.
/// `rkey` is the new rkey a bind work request asks for. Fails with
/// `EINVAL` if `mw` is NULL.
///
/// # Safety
///
/// `mw` is NULL or a live `ibv_mw`, and `info.mr` is NULL or a live
/// `ibv_mr`, neither written by another thread during the call.
pub(super) unsafe fn bind_request(
    mw: *const ibv::Mw,
    rkey: u32,
    info: &ibv::MwBindInfo,
) -> Result<Bind, Errno> {
    if mw.is_null() {
        return Err(Errno::EINVAL);
    }
    // SAFETY: `mw` is live per the contract; only the two fields are read.
    let (mw_type, mw_rkey) = unsafe { ((*mw).type_, (*mw).rkey) };
    // SAFETY: `info.mr` is NULL or live per the contract.
    let mr_lkey = unsafe { info.mr.as_ref() }.map(|mr| mr.lkey);
    Ok(Bind {
        mw_type,
        mw_rkey,
        rkey,
        mr_lkey,
        addr: info.addr,
        length: info.length,
        access: info.mw_access_flags,
    })
}

/// The `ibv_send_wr` of a type 1 bind: `mw_bind`'s `wr_id`, send flags and
/// bind info, for `mw`. Its `bind_mw.rkey` is 0: an `ibv_bind_mw` bind
/// takes the next rkey of the window (`crate::qp::bind_fields`).
fn type1_wr(mw: *mut ibv::Mw, mw_bind: &ibv::MwBind) -> ibv::SendWr {
    ibv::SendWr {
        wr_id: mw_bind.wr_id,
        next: ptr::null_mut(),
        sg_list: ptr::null_mut(),
        num_sge: 0,
        opcode: ibv::WR_BIND_MW,
        send_flags: mw_bind.send_flags,
        imm_data: 0,
        wr: ibv::SendWrWr {
            rdma: ibv::RdmaWr {
                remote_addr: 0,
                rkey: 0,
            },
        },
        remote_srqn: 0,
        extra: ibv::SendWrExtra {
            bind_mw: ibv::BindMwWr {
                mw,
                rkey: 0,
                bind_info: mw_bind.bind_info,
            },
        },
    }
}

/// `verbs_context_ops.bind_mw`: binds a type 1 window (or unbinds it, with
/// a zero length), through the QP's send queue like a bind work request,
/// with `mw_bind`'s `wr_id` and send flags.
///
/// Posts the bind WQE and rings the doorbell as `ibv_post_send` does; the
/// new rkey is `ibv_inc_rkey(mw->rkey)`. On success `mw->rkey` holds it and
/// 0 is returned; the kernel carries the bind out in order with the QP's
/// other work requests, and one it refuses completes with
/// `IBV_WC_MW_BIND_ERR` (the caller then has to restore the old rkey,
/// as with rdma-core's other providers). On failure `mw->rkey` is left
/// alone and a positive errno returned: `EINVAL` for a NULL window or
/// `mw_bind`, a window that is not type 1, `IBV_ACCESS_ZERO_BASED`, no MR
/// for a non-empty range, a QP that is not RC or UC or not yet in RTS;
/// `ENOMEM` when the send ring is full; or the doorbell's errno (the WQE is
/// in the ring then, as for `ibv_post_send`).
///
/// # Safety
///
/// `qp` is a live roxe QP that this thread holds no lock of; `mw` is NULL
/// or a live `ibv_mw` that no other thread writes during the call;
/// `mw_bind` is NULL or readable, and its `bind_info.mr` NULL or a live
/// `ibv_mr`.
pub(super) unsafe extern "C" fn bind_mw(
    qp: *mut ibv::Qp,
    mw: *mut ibv::Mw,
    mw_bind: *mut ibv::MwBind,
) -> c_int {
    // SAFETY: NULL or readable per the contract.
    let Some(mw_bind) = (unsafe { mw_bind.as_ref() }) else {
        return Errno::EINVAL.get();
    };
    if mw.is_null() {
        return Errno::EINVAL.get();
    }
    let wr = type1_wr(mw, mw_bind);
    // SAFETY: `qp` is live and unlocked; `wr` has no SGEs, and its window
    // and MR are NULL or live, per the contract.
    match unsafe { post_single(qp, &wr, BindVia::Verb) } {
        Ok(wqe) => {
            // SAFETY: `mw` is not NULL (checked above), so it is live, and
            // nothing else writes it, per the contract.
            unsafe { (*mw).rkey = wqe.rkey };
            0
        }
        Err(err) => err.get(),
    }
}
