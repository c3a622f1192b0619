// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Posting through `ibv_post_send` and `ibv_post_recv`: work requests
//! become WQEs in the send or receive ring, which are then published with
//! the producer index; sends also ring the doorbell.

use core::ffi::c_int;
use core::ptr;
use core::slice;
use core::sync::atomic::Ordering;

use roxe_uapi::SendWqe;

use super::Qp;
use crate::abi::ibv;
use crate::errno::Errno;
use crate::ffi::lock::SpinLock;
use crate::ffi::mapping::WqMapping;
use crate::ffi::{ah, cmd_result, errno_ret, ibv_cmd_post_send, mw};
use crate::qp::{
    BindVia, RecvQueue, SendQueue, WrFields, WrPart, bind_fields, can_post_recv, can_post_send,
    check_bind_wr, check_num_sge, raw_wqe, send_wqe, wr_part, xrc_wqe,
};

/// The SGEs of a work request, after checking their number against `max`.
///
/// # Safety
///
/// `sg_list` points to `num_sge` readable `ibv_sge`s if `num_sge` is
/// positive, which stay unchanged for `'a`.
unsafe fn sges<'a>(
    sg_list: *const ibv::Sge,
    num_sge: c_int,
    max: u32,
) -> Result<&'a [ibv::Sge], Errno> {
    let n = check_num_sge(num_sge, max)?;
    if n == 0 {
        return Ok(&[]);
    }
    if sg_list.is_null() {
        return Err(Errno::EINVAL);
    }
    // SAFETY: `n` is the caller's `num_sge` (checked positive and bounded),
    // and per the contract the list holds that many.
    Ok(unsafe { slice::from_raw_parts(sg_list, n) })
}

/// Writes one send work request into the send ring (not published), and
/// returns the fixed part of the WQE it wrote (without its SGE and inline
/// counts).
///
/// A memory-window bind is checked as [`bind_fields`] does for a bind
/// asked for `via`: `ibv_post_send` posts type 2 binds,
/// [`mw::bind_mw`] posts type 1 binds through here too. On an XRC send QP
/// every WQE carries `qp_type.xrc.remote_srqn` ([`xrc_wqe`]). On a raw
/// packet QP only `IBV_WR_SEND` is accepted, and its WQE carries the frame
/// and nothing about a destination ([`raw_wqe`]).
///
/// # Safety
///
/// `wr` is a valid `ibv_send_wr` as `ibv_post_send` requires: its SGE list
/// holds `num_sge` entries; with `IBV_SEND_INLINE` they describe readable
/// memory; on a UD QP `wr.ud.ah` is NULL or a live roxe AH; for a bind,
/// `bind_mw.mw` is NULL or a live `ibv_mw` and `bind_mw.bind_info.mr` NULL
/// or a live `ibv_mr`.
pub(super) unsafe fn post_one_send(
    qp_type: u32,
    sq: &mut SendQueue<WqMapping>,
    wr: &ibv::SendWr,
    via: BindVia,
) -> Result<SendWqe, Errno> {
    // SAFETY: per the contract.
    let sges = unsafe { sges(wr.sg_list, wr.num_sge, sq.max_sge()) }?;
    // SAFETY (the union reads): `wr_part` names the member that the
    // caller filled in for this QP type and opcode, as libibverbs'
    // `ibv_cmd_post_send` reads it.
    let fields = match wr_part(qp_type, wr.opcode)? {
        WrPart::None => WrFields::None,
        WrPart::Rdma => {
            // SAFETY: see above.
            let r = unsafe { wr.wr.rdma };
            WrFields::Rdma {
                remote_addr: r.remote_addr,
                rkey: r.rkey,
            }
        }
        WrPart::Atomic => {
            // SAFETY: see above.
            let a = unsafe { wr.wr.atomic };
            WrFields::Atomic {
                remote_addr: a.remote_addr,
                compare_add: a.compare_add,
                swap: a.swap,
                rkey: a.rkey,
            }
        }
        WrPart::Ud => {
            // SAFETY: see above.
            let u = unsafe { wr.wr.ud };
            WrFields::Ud {
                // SAFETY: NULL or a live roxe AH, per the contract.
                ah_num: unsafe { ah::number(u.ah) }.ok_or(Errno::EINVAL)?,
                remote_qpn: u.remote_qpn,
                remote_qkey: u.remote_qkey,
            }
        }
        WrPart::Bind => {
            check_bind_wr(wr.num_sge, wr.imm_data)?;
            // SAFETY: see above.
            let b = unsafe { wr.extra.bind_mw };
            // SAFETY: the window and the MR are NULL or live, per the
            // contract.
            let bind = unsafe { mw::bind_request(b.mw, b.rkey, &b.bind_info) }?;
            bind_fields(via, &bind)?
        }
    };
    let wqe = send_wqe(wr.wr_id, wr.opcode, wr.send_flags, wr.imm_data, fields);
    let wqe = match qp_type {
        ibv::QPT_XRC_SEND => xrc_wqe(wqe, wr.remote_srqn),
        ibv::QPT_RAW_PACKET => raw_wqe(wqe),
        _ => wqe,
    };
    sq.push(wqe, sges, |sge, dst| {
        // CAST: this is C's `(void *)(uintptr_t)sge->addr`; `usize` is 64
        // bits on the only target this crate builds for.
        let src = ptr::with_exposed_provenance::<u8>(sge.addr as usize);
        // SAFETY: with `IBV_SEND_INLINE` the caller's SGEs describe
        // readable memory (the contract); `dst` is exactly `sge.length`
        // bytes of the provider's own scratch slot, so they do not overlap.
        unsafe { ptr::copy_nonoverlapping(src, dst.as_mut_ptr(), dst.len()) };
    })?;
    Ok(wqe)
}

/// Rings the send doorbell: an `ibv_post_send` command with no work
/// requests. The kernel then checks every WQE published since the last
/// time; one it refuses completes with an error and moves the QP to ERR.
///
/// # Safety
///
/// `ibqp` is a live roxe QP.
pub(super) unsafe fn kick(ibqp: *mut ibv::Qp) -> Result<(), Errno> {
    let mut ignored = ptr::null_mut();
    // SAFETY: `ibqp` is a live QP of an open context. With an empty list,
    // `ibv_cmd_post_send` sends `wr_count = 0`, `sge_count = 0` and
    // `wqe_size = sizeof(struct ib_uverbs_send_wr)` (which the kernel
    // requires as a minimum) and never reads `wr`; it writes `ignored`
    // only on failure.
    cmd_result(unsafe { ibv_cmd_post_send(ibqp, ptr::null_mut(), &raw mut ignored) })
}

/// Runs `post` on the QP's send queue under the send lock, then publishes
/// what it wrote and, if that was anything, rings the doorbell. `post`
/// gets the QP type and the send queue.
///
/// Returns what `post` returned, after publishing whatever it wrote before
/// it failed. Fails with `EINVAL`, before `post` runs, if the QP is not in
/// a state that allows posting (before RTS), and with the doorbell's errno
/// if `post` succeeded but the doorbell failed (the WQEs are in the ring
/// then: the kernel flushes them when the QP enters ERR, and discards them
/// on RESET).
///
/// # Safety
///
/// `ibqp` is a live roxe QP, and this thread holds none of its locks.
unsafe fn post_batch<R>(
    ibqp: *mut ibv::Qp,
    post: impl FnOnce(u32, &mut SendQueue<WqMapping>) -> Result<R, Errno>,
) -> Result<R, Errno> {
    // SAFETY: `ibqp` is a live roxe QP per the contract.
    let qp = unsafe { Qp::from_ibv(ibqp) };
    if !can_post_send(qp.state.load(Ordering::Acquire)) {
        return Err(Errno::EINVAL);
    }
    let (result, posted) = {
        let mut guard = qp.sq.lock();
        let sq = guard.as_mut().ok_or(Errno::EINVAL)?;
        let result = post(qp.qp_type, sq);
        (result, sq.publish())
    };
    if posted {
        // SAFETY: `ibqp` is live.
        let rang = unsafe { kick(ibqp) };
        if let (Ok(_), Err(err)) = (&result, rang) {
            return Err(err);
        }
    }
    result
}

/// Posts the single send work request `wr` (its `next` is not followed)
/// as [`post_send`] does, checking a bind as one asked for `via`. Returns
/// the fixed part of the WQE it wrote.
///
/// # Safety
///
/// `ibqp` is a live roxe QP that this thread holds no lock of, and `wr` is
/// valid as `post_one_send` requires.
pub(in crate::ffi) unsafe fn post_single(
    ibqp: *mut ibv::Qp,
    wr: &ibv::SendWr,
    via: BindVia,
) -> Result<SendWqe, Errno> {
    let post = |qp_type, sq: &mut SendQueue<WqMapping>| {
        // SAFETY: `wr` is valid per the contract.
        unsafe { post_one_send(qp_type, sq, wr, via) }
    };
    // SAFETY: per the contract.
    unsafe { post_batch(ibqp, post) }
}

/// `verbs_context_ops.post_send`: writes the work requests into the send
/// ring, publishes them, and rings the doorbell.
///
/// The work requests of an XRC send QP each go to the remote XRC SRQ in
/// their `qp_type.xrc.remote_srqn`. An XRC receive QP has no send queue.
/// Those of a raw packet QP are `IBV_WR_SEND`s of whole Ethernet frames.
///
/// Returns 0, or a positive errno with `*bad_wr` set to the first work
/// request that was not posted; those before it were. `EINVAL` for a QP
/// without a send queue (an XRC receive QP) or that is not yet in RTS
/// (nothing is posted), too many SGEs or too much
/// inline data, a UD work request without an AH, an opcode other than
/// `IBV_WR_SEND` on a raw packet QP, or a memory-window bind that
/// [`bind_fields`] refuses (only type 2 windows, on RC and UC QPs;
/// `ibv_bind_mw` binds type 1); `ENOMEM` when the ring is full. A bind
/// leaves `bind_mw.mw->rkey` alone: the caller knows the new rkey from
/// `bind_mw.rkey`. If the doorbell itself fails, the work requests are in
/// the ring already, but `*bad_wr` is the first of this call and the
/// doorbell's errno is returned: the kernel flushes them when the QP
/// enters ERR, and discards them on RESET.
///
/// # Safety
///
/// `ibqp` is a live roxe QP; `wr` is NULL or a valid list of
/// `ibv_send_wr` (see `post_one_send`); `bad_wr` is NULL or writable.
pub(in crate::ffi) unsafe extern "C" fn post_send(
    ibqp: *mut ibv::Qp,
    wr: *mut ibv::SendWr,
    bad_wr: *mut *mut ibv::SendWr,
) -> c_int {
    // SAFETY: NULL or writable per the contract.
    let Some(bad_wr) = (unsafe { bad_wr.as_mut() }) else {
        return Errno::EINVAL.get();
    };
    *bad_wr = ptr::null_mut();
    if wr.is_null() {
        return 0;
    }
    let post_list = |qp_type, sq: &mut SendQueue<WqMapping>| {
        let mut cur = wr;
        // SAFETY: each element of the caller's list is valid per the
        // contract.
        while let Some(w) = unsafe { cur.as_ref() } {
            // SAFETY: as above.
            if let Err(err) = unsafe { post_one_send(qp_type, sq, w, BindVia::WorkRequest) } {
                *bad_wr = cur;
                return Err(err);
            }
            cur = w.next;
        }
        Ok(())
    };
    // SAFETY: `ibqp` is a live roxe QP per the contract; libibverbs calls
    // the op with no lock of the QP held.
    let result = unsafe { post_batch(ibqp, post_list) };
    // Failures that no single work request caused name the first one.
    if result.is_err() && bad_wr.is_null() {
        *bad_wr = wr;
    }
    errno_ret(result)
}

/// Writes the receive work requests of `wr` into `rq` and publishes them.
///
/// Returns 0, or a positive errno with `*bad_wr` set to the first work
/// request that was not posted (`EINVAL` for too many SGEs, `ENOMEM` when
/// the ring is full, `EIO` for a corrupt consumer index).
///
/// # Safety
///
/// `wr` is a valid, non-NULL list of `ibv_recv_wr` whose SGE lists hold
/// `num_sge` entries each.
unsafe fn post_recv_list(
    rq: &mut RecvQueue<WqMapping>,
    wr: *mut ibv::RecvWr,
    bad_wr: &mut *mut ibv::RecvWr,
) -> c_int {
    let mut result = Ok(());
    let mut cur = wr;
    // SAFETY: each element of the caller's list is valid per the contract.
    while let Some(w) = unsafe { cur.as_ref() } {
        // SAFETY: as above.
        let posted = unsafe { sges(w.sg_list, w.num_sge, rq.max_sge()) }
            .and_then(|sges| rq.push(w.wr_id, sges));
        if let Err(err) = posted {
            *bad_wr = cur;
            result = Err(err);
            break;
        }
        cur = w.next;
    }
    rq.publish();
    errno_ret(result)
}

/// Posts the receive work requests `wr` to the receive queue `rq` under
/// its lock, without entering the kernel: the body of `ibv_post_recv`,
/// `ibv_post_srq_recv` and `ibv_post_wq_recv`. `accepts` says whether the
/// queue's owner takes work requests now (a QP's state).
///
/// Returns 0, or a positive errno with `*bad_wr` set to the first work
/// request that was not posted: `EINVAL` for a NULL `bad_wr`, or, with
/// nothing posted, when `accepts` is false or there is no ring; and
/// otherwise as `post_recv_list`. An empty list posts nothing and returns
/// 0.
///
/// # Safety
///
/// `wr` is NULL or a valid list of `ibv_recv_wr` whose SGE lists hold
/// `num_sge` entries each; `bad_wr` is NULL or writable.
pub(in crate::ffi) unsafe fn post_recv_to(
    rq: &SpinLock<Option<RecvQueue<WqMapping>>>,
    accepts: bool,
    wr: *mut ibv::RecvWr,
    bad_wr: *mut *mut ibv::RecvWr,
) -> c_int {
    // SAFETY: NULL or writable per the contract.
    let Some(bad_wr) = (unsafe { bad_wr.as_mut() }) else {
        return Errno::EINVAL.get();
    };
    *bad_wr = ptr::null_mut();
    if wr.is_null() {
        return 0;
    }
    let mut guard = rq.lock();
    let Some(rq) = guard.as_mut().filter(|_| accepts) else {
        *bad_wr = wr;
        return Errno::EINVAL.get();
    };
    // SAFETY: `wr` is a valid non-NULL list per the contract.
    unsafe { post_recv_list(rq, wr, bad_wr) }
}

/// `verbs_context_ops.post_recv`: writes the work requests into the
/// receive ring and publishes them, without entering the kernel.
///
/// Returns 0, or a positive errno with `*bad_wr` set to the first work
/// request that was not posted: `EINVAL` for a QP in RESET or one without
/// a receive queue of its own (one with an SRQ, an XRC QP, an RSS QP;
/// nothing is posted), and otherwise as [`post_recv_to`].
///
/// # Safety
///
/// `ibqp` is a live roxe QP; `wr` is NULL or a valid list of
/// `ibv_recv_wr`; `bad_wr` is NULL or writable.
pub(in crate::ffi) unsafe extern "C" fn post_recv(
    ibqp: *mut ibv::Qp,
    wr: *mut ibv::RecvWr,
    bad_wr: *mut *mut ibv::RecvWr,
) -> c_int {
    // SAFETY: `ibqp` is a live roxe QP per the contract.
    let qp = unsafe { Qp::from_ibv(ibqp) };
    let accepts = can_post_recv(qp.state.load(Ordering::Acquire));
    // SAFETY: per the contract.
    unsafe { post_recv_to(&qp.rq, accepts, wr, bad_wr) }
}
