// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The `ibv_wr_*` interface of `ibv_qp_ex` (extended posting).
//!
//! Each op gets the `ibv_qp_ex` of a roxe QP created with
//! `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS`. Their common contract, that of the
//! `ibv_wr_post` man page: `wr_start` is called by a thread that has no
//! batch open on the QP and holds no lock of it; every other op only by
//! the thread whose batch is open, between its `wr_start` and its
//! `wr_complete` or `wr_abort`. The batch holds the send lock throughout,
//! so other threads' `post_send` and `wr_start` on the QP wait for it (and
//! the batch's own thread must not call them). The builders and setters
//! keep any error in the batch, and `wr_complete` returns it.

use core::ffi::{c_int, c_void};
use core::ptr;
use core::slice;
use core::sync::atomic::Ordering;

use super::Qp;
use super::post::kick;
use crate::abi::{ibv, verbs};
use crate::errno::Errno;
use crate::ffi::mapping::WqMapping;
use crate::ffi::{ah, errno_ret, mw};
use crate::qp::{BindVia, SendQueue, WrFields, bind_fields, can_post_send, send_wqe};

/// Fills in the `ibv_wr_*` ops of a QP and sets `VERBS_QP_EX`, so that
/// `ibv_qp_to_qp_ex` returns its `ibv_qp_ex`.
///
/// Every QP gets `wr_start`, `wr_complete`, `wr_abort` and the setters
/// (`wr_set_ud_addr` fails the batch on QPs that are not UD,
/// `wr_set_xrc_srqn` on QPs that are not XRC send QPs); a builder only if
/// `send_ops` names its operation (which [`crate::qp::check_init_attr`]
/// has checked against the QP type). `wr_send_tso` stays NULL: roxe has
/// no TSO.
///
/// # Safety
///
/// `vqp` is the `verbs_qp` of a live [`Qp`] that nothing else uses yet,
/// whose send queue offers the `ibv_wr_*` interface
/// ([`SendQueue::enable_wr`]).
pub(super) unsafe fn install_wr_ops(vqp: *mut verbs::Qp, send_ops: u64) {
    let with = |flag: u64| send_ops & flag != 0;
    // SAFETY: per the contract the QP is live and only this thread uses
    // it; `qp_ex` is at offset 0 of the union at offset 0.
    let ex = unsafe { &mut *vqp.cast::<ibv::QpEx>() };
    ex.wr_start = Some(wr_start);
    ex.wr_complete = Some(wr_complete);
    ex.wr_abort = Some(wr_abort);
    ex.wr_set_ud_addr = Some(wr_set_ud_addr);
    ex.wr_set_xrc_srqn = Some(wr_set_xrc_srqn);
    ex.wr_set_sge = Some(wr_set_sge);
    ex.wr_set_sge_list = Some(wr_set_sge_list);
    ex.wr_set_inline_data = Some(wr_set_inline_data);
    ex.wr_set_inline_data_list = Some(wr_set_inline_data_list);
    ex.wr_send = with(ibv::QP_EX_WITH_SEND).then_some(wr_send as _);
    ex.wr_send_imm = with(ibv::QP_EX_WITH_SEND_WITH_IMM).then_some(wr_send_imm as _);
    ex.wr_send_inv = with(ibv::QP_EX_WITH_SEND_WITH_INV).then_some(wr_send_inv as _);
    ex.wr_rdma_write = with(ibv::QP_EX_WITH_RDMA_WRITE).then_some(wr_rdma_write as _);
    ex.wr_rdma_write_imm =
        with(ibv::QP_EX_WITH_RDMA_WRITE_WITH_IMM).then_some(wr_rdma_write_imm as _);
    ex.wr_rdma_read = with(ibv::QP_EX_WITH_RDMA_READ).then_some(wr_rdma_read as _);
    ex.wr_atomic_cmp_swp =
        with(ibv::QP_EX_WITH_ATOMIC_CMP_AND_SWP).then_some(wr_atomic_cmp_swp as _);
    ex.wr_atomic_fetch_add =
        with(ibv::QP_EX_WITH_ATOMIC_FETCH_AND_ADD).then_some(wr_atomic_fetch_add as _);
    ex.wr_atomic_write = with(ibv::QP_EX_WITH_ATOMIC_WRITE).then_some(wr_atomic_write as _);
    ex.wr_local_inv = with(ibv::QP_EX_WITH_LOCAL_INV).then_some(wr_local_inv as _);
    ex.wr_bind_mw = with(ibv::QP_EX_WITH_BIND_MW).then_some(wr_bind_mw as _);
    // SAFETY: as above; `ex` is no longer used.
    unsafe { (*vqp).comp_mask |= verbs::QP_EX };
}

/// Runs `f` on the send queue of the batch the calling thread has open on
/// `qpx`; does nothing outside a batch.
///
/// # Safety
///
/// `qpx` is the `ibv_qp_ex` of a live roxe QP, and the calling thread is
/// the one whose batch is open on it, if any is.
unsafe fn in_batch(qpx: *mut ibv::QpEx, f: impl FnOnce(&mut SendQueue<WqMapping>)) {
    // SAFETY: `qpx` is a live roxe QP per the contract.
    let qp = unsafe { Qp::from_ex(qpx) };
    // SAFETY: if the send lock is held, it is held by this thread's batch,
    // whose guard `wr_start` parked, per the contract.
    let Some(mut guard) = (unsafe { qp.sq.resume() }) else {
        return;
    };
    if let Some(sq) = guard.as_mut() {
        f(sq);
    }
    guard.park();
}

/// A builder: starts a work request of the batch with `opcode`,
/// `imm_data` and `fields` (or fails the batch with their error), and the
/// `wr_id` and `wr_flags` the application set in `qpx`.
///
/// # Safety
///
/// As for [`in_batch`].
unsafe fn build(qpx: *mut ibv::QpEx, opcode: u32, imm_data: u32, fields: Result<WrFields, Errno>) {
    // SAFETY: `qpx` is live per the contract. The application writes
    // `wr_id` and `wr_flags` before it calls a builder, on this thread;
    // libibverbs never writes them.
    let (wr_id, wr_flags) = unsafe { ((*qpx).wr_id, (*qpx).wr_flags) };
    let wqe = fields.map(|f| send_wqe(wr_id, opcode, wr_flags, imm_data, f));
    // SAFETY: per the contract.
    unsafe { in_batch(qpx, |sq| sq.wr_build(wqe)) };
}

/// `ibv_qp_ex.wr_start`: takes the send lock and opens a batch.
///
/// # Safety
///
/// `qpx` is the `ibv_qp_ex` of a live roxe QP; the calling thread has no
/// batch open on it and holds none of its locks.
unsafe extern "C" fn wr_start(qpx: *mut ibv::QpEx) {
    // SAFETY: `qpx` is a live roxe QP per the contract.
    let qp = unsafe { Qp::from_ex(qpx) };
    let mut guard = qp.sq.lock();
    if let Some(sq) = guard.as_mut() {
        sq.wr_start();
    }
    // Held until `wr_complete` or `wr_abort`.
    guard.park();
}

/// `ibv_qp_ex.wr_complete`: publishes the batch, rings the doorbell as
/// `post_send` does, and releases the send lock.
///
/// Returns 0 or a positive errno. If the batch failed, nothing of it is
/// posted and the first error is returned: `EINVAL` for a QP not yet in
/// RTS, a setter without a builder before it, too many SGEs or inline
/// bytes, a UD work request without `wr_set_ud_addr` or with a NULL AH, a
/// bind `bind_fields` refuses, a work request of an XRC send QP without
/// `wr_set_xrc_srqn` (local invalidates and binds need none), a setter for
/// another QP type; `ENOMEM` if the ring filled up. If the doorbell fails,
/// the batch is in the ring already and its errno is returned (as for
/// `post_send`). `EINVAL` outside a batch.
///
/// # Safety
///
/// `qpx` is the `ibv_qp_ex` of a live roxe QP, and the calling thread has
/// the batch open on it (see above).
unsafe extern "C" fn wr_complete(qpx: *mut ibv::QpEx) -> c_int {
    // SAFETY: `qpx` is a live roxe QP per the contract.
    let qp = unsafe { Qp::from_ex(qpx) };
    // SAFETY: as in `in_batch`.
    let Some(mut guard) = (unsafe { qp.sq.resume() }) else {
        return Errno::EINVAL.get();
    };
    let result = match guard.as_mut() {
        Some(sq) if can_post_send(qp.state.load(Ordering::Acquire)) => sq.wr_complete(),
        Some(sq) => {
            sq.wr_abort();
            Err(Errno::EINVAL)
        }
        None => Err(Errno::EINVAL),
    };
    drop(guard);
    match result {
        // SAFETY: the QP is live, and this thread no longer holds its lock.
        Ok(true) => errno_ret(unsafe { kick(qp.ibv()) }),
        Ok(false) => 0,
        Err(err) => err.get(),
    }
}

/// `ibv_qp_ex.wr_abort`: drops every work request of the batch and
/// releases the send lock.
///
/// # Safety
///
/// As for [`wr_complete`].
unsafe extern "C" fn wr_abort(qpx: *mut ibv::QpEx) {
    // SAFETY: `qpx` is a live roxe QP per the contract.
    let qp = unsafe { Qp::from_ex(qpx) };
    // SAFETY: as in `in_batch`.
    if let Some(mut guard) = unsafe { qp.sq.resume() } {
        if let Some(sq) = guard.as_mut() {
            sq.wr_abort();
        }
    }
}

/// `ibv_qp_ex.wr_send`.
///
/// # Safety
///
/// As for [`wr_complete`]; so for every builder and setter below.
unsafe extern "C" fn wr_send(qpx: *mut ibv::QpEx) {
    // SAFETY: per the contract.
    unsafe { build(qpx, ibv::WR_SEND, 0, Ok(WrFields::None)) };
}

/// `ibv_qp_ex.wr_send_imm`; `imm_data` is in network byte order.
///
/// # Safety
///
/// As for [`wr_send`].
unsafe extern "C" fn wr_send_imm(qpx: *mut ibv::QpEx, imm_data: u32) {
    // SAFETY: per the contract.
    unsafe { build(qpx, ibv::WR_SEND_WITH_IMM, imm_data, Ok(WrFields::None)) };
}

/// `ibv_qp_ex.wr_send_inv`.
///
/// # Safety
///
/// As for [`wr_send`].
unsafe extern "C" fn wr_send_inv(qpx: *mut ibv::QpEx, invalidate_rkey: u32) {
    // SAFETY: per the contract.
    unsafe {
        build(
            qpx,
            ibv::WR_SEND_WITH_INV,
            invalidate_rkey,
            Ok(WrFields::None),
        )
    };
}

/// `ibv_qp_ex.wr_rdma_write`.
///
/// # Safety
///
/// As for [`wr_send`].
unsafe extern "C" fn wr_rdma_write(qpx: *mut ibv::QpEx, rkey: u32, remote_addr: u64) {
    let fields = WrFields::Rdma { remote_addr, rkey };
    // SAFETY: per the contract.
    unsafe { build(qpx, ibv::WR_RDMA_WRITE, 0, Ok(fields)) };
}

/// `ibv_qp_ex.wr_rdma_write_imm`; `imm_data` is in network byte order.
///
/// # Safety
///
/// As for [`wr_send`].
unsafe extern "C" fn wr_rdma_write_imm(
    qpx: *mut ibv::QpEx,
    rkey: u32,
    remote_addr: u64,
    imm_data: u32,
) {
    let fields = WrFields::Rdma { remote_addr, rkey };
    // SAFETY: per the contract.
    unsafe { build(qpx, ibv::WR_RDMA_WRITE_WITH_IMM, imm_data, Ok(fields)) };
}

/// `ibv_qp_ex.wr_rdma_read`.
///
/// # Safety
///
/// As for [`wr_send`].
unsafe extern "C" fn wr_rdma_read(qpx: *mut ibv::QpEx, rkey: u32, remote_addr: u64) {
    let fields = WrFields::Rdma { remote_addr, rkey };
    // SAFETY: per the contract.
    unsafe { build(qpx, ibv::WR_RDMA_READ, 0, Ok(fields)) };
}

/// `ibv_qp_ex.wr_atomic_cmp_swp`.
///
/// # Safety
///
/// As for [`wr_send`].
unsafe extern "C" fn wr_atomic_cmp_swp(
    qpx: *mut ibv::QpEx,
    rkey: u32,
    remote_addr: u64,
    compare: u64,
    swap: u64,
) {
    let fields = WrFields::Atomic {
        remote_addr,
        compare_add: compare,
        swap,
        rkey,
    };
    // SAFETY: per the contract.
    unsafe { build(qpx, ibv::WR_ATOMIC_CMP_AND_SWP, 0, Ok(fields)) };
}

/// `ibv_qp_ex.wr_atomic_fetch_add`.
///
/// # Safety
///
/// As for [`wr_send`].
unsafe extern "C" fn wr_atomic_fetch_add(
    qpx: *mut ibv::QpEx,
    rkey: u32,
    remote_addr: u64,
    add: u64,
) {
    let fields = WrFields::Atomic {
        remote_addr,
        compare_add: add,
        swap: 0,
        rkey,
    };
    // SAFETY: per the contract.
    unsafe { build(qpx, ibv::WR_ATOMIC_FETCH_AND_ADD, 0, Ok(fields)) };
}

/// `ibv_qp_ex.wr_atomic_write`: stores the 8 bytes at `atomic_wr`
/// remotely in one piece. The bytes travel in the WQE's `compare_add`
/// (a WQE with neither SGEs nor inline data, as `roxe_uapi` defines).
///
/// # Safety
///
/// As for [`wr_send`]; `atomic_wr` is NULL or points to 8 readable bytes.
unsafe extern "C" fn wr_atomic_write(
    qpx: *mut ibv::QpEx,
    rkey: u32,
    remote_addr: u64,
    atomic_wr: *const c_void,
) {
    let fields = if atomic_wr.is_null() {
        Err(Errno::EINVAL)
    } else {
        // SAFETY: 8 readable bytes per the contract, of any alignment.
        let value = unsafe { ptr::read_unaligned(atomic_wr.cast::<u64>()) };
        Ok(WrFields::Atomic {
            remote_addr,
            compare_add: value,
            swap: 0,
            rkey,
        })
    };
    // SAFETY: per the contract.
    unsafe { build(qpx, ibv::WR_ATOMIC_WRITE, 0, fields) };
}

/// `ibv_qp_ex.wr_local_inv`.
///
/// # Safety
///
/// As for [`wr_send`].
unsafe extern "C" fn wr_local_inv(qpx: *mut ibv::QpEx, invalidate_rkey: u32) {
    // SAFETY: per the contract.
    unsafe { build(qpx, ibv::WR_LOCAL_INV, invalidate_rkey, Ok(WrFields::None)) };
}

/// `ibv_qp_ex.wr_bind_mw`: binds a type 2 window with the new `rkey`, as
/// a bind work request of `post_send` does (`mw->rkey` is left alone).
///
/// # Safety
///
/// As for [`wr_send`]; `mw` is NULL or a live `ibv_mw`, `bind_info` NULL
/// or readable, and its `mr` NULL or a live `ibv_mr`.
unsafe extern "C" fn wr_bind_mw(
    qpx: *mut ibv::QpEx,
    mw: *mut ibv::Mw,
    rkey: u32,
    bind_info: *const ibv::MwBindInfo,
) {
    // SAFETY: NULL or readable per the contract.
    let fields = unsafe { bind_info.as_ref() }
        .ok_or(Errno::EINVAL)
        // SAFETY: the window and the MR are NULL or live per the contract.
        .and_then(|info| unsafe { mw::bind_request(mw, rkey, info) })
        .and_then(|b| bind_fields(BindVia::WorkRequest, &b));
    // SAFETY: per the contract.
    unsafe { build(qpx, ibv::WR_BIND_MW, 0, fields) };
}

/// `ibv_qp_ex.wr_set_ud_addr`.
///
/// # Safety
///
/// As for [`wr_send`]; `ah` is NULL or a live roxe AH.
unsafe extern "C" fn wr_set_ud_addr(
    qpx: *mut ibv::QpEx,
    ah: *mut ibv::Ah,
    remote_qpn: u32,
    remote_qkey: u32,
) {
    // SAFETY: NULL or a live roxe AH per the contract.
    let ah_num = unsafe { ah::number(ah) };
    // SAFETY: per the contract.
    unsafe {
        in_batch(qpx, |sq| match ah_num {
            Some(n) => sq.wr_set_ud(n, remote_qpn, remote_qkey),
            None => sq.wr_fail(Errno::EINVAL),
        });
    }
}

/// `ibv_qp_ex.wr_set_xrc_srqn`: the remote XRC SRQ of the last work
/// request.
///
/// # Safety
///
/// As for [`wr_send`].
unsafe extern "C" fn wr_set_xrc_srqn(qpx: *mut ibv::QpEx, remote_srqn: u32) {
    // SAFETY: per the contract.
    unsafe { in_batch(qpx, |sq| sq.wr_set_xrc_srqn(remote_srqn)) };
}

/// `ibv_qp_ex.wr_set_sge`.
///
/// # Safety
///
/// As for [`wr_send`].
unsafe extern "C" fn wr_set_sge(qpx: *mut ibv::QpEx, lkey: u32, addr: u64, length: u32) {
    let sge = ibv::Sge { addr, length, lkey };
    // SAFETY: per the contract.
    unsafe { in_batch(qpx, |sq| sq.wr_set_sge(sge)) };
}

/// The `n` elements at `ptr` as a slice, or `EINVAL` if `ptr` is NULL (and
/// `n` is not 0) or `n` elements could not be one object.
///
/// # Safety
///
/// `ptr` points to `n` readable elements that stay unchanged for `'a`, if
/// `n` is not 0.
unsafe fn c_array<'a, T>(ptr: *const T, n: usize) -> Result<&'a [T], Errno> {
    if n == 0 {
        return Ok(&[]);
    }
    let fits = n
        .checked_mul(core::mem::size_of::<T>())
        .is_some_and(|bytes| isize::try_from(bytes).is_ok());
    if ptr.is_null() || !fits {
        return Err(Errno::EINVAL);
    }
    // SAFETY: non-NULL, of a size that fits an object, and readable for
    // `n` elements per the contract.
    Ok(unsafe { slice::from_raw_parts(ptr, n) })
}

/// `ibv_qp_ex.wr_set_sge_list`.
///
/// # Safety
///
/// As for [`wr_send`]; `sg_list` points to `num_sge` readable SGEs.
unsafe extern "C" fn wr_set_sge_list(
    qpx: *mut ibv::QpEx,
    num_sge: usize,
    sg_list: *const ibv::Sge,
) {
    // SAFETY: per the contract; the SGEs are copied before this returns.
    let sges = unsafe { c_array(sg_list, num_sge) };
    // SAFETY: per the contract.
    unsafe {
        in_batch(qpx, |sq| match sges {
            Ok(sges) => sq.wr_set_sge_list(sges),
            Err(err) => sq.wr_fail(err),
        });
    }
}

/// Sets the inline data of the pending work request to the bytes of
/// `bufs`, which are copied now.
///
/// # Safety
///
/// As for [`in_batch`]; each buffer in `bufs` with a non-zero length
/// describes readable memory.
unsafe fn set_inline(qpx: *mut ibv::QpEx, bufs: Result<&[ibv::DataBuf], Errno>) {
    let copy = |buf: &ibv::DataBuf, dst: &mut [u8]| {
        // SAFETY: `dst` is `buf.length` bytes of the provider's own buffer,
        // and `buf` describes that many readable bytes, per the contract.
        unsafe { ptr::copy_nonoverlapping(buf.addr.cast::<u8>(), dst.as_mut_ptr(), dst.len()) };
    };
    // SAFETY: per the contract.
    unsafe {
        in_batch(qpx, |sq| match bufs {
            Ok(bufs) => sq.wr_set_inline(bufs, copy),
            Err(err) => sq.wr_fail(err),
        });
    }
}

/// `ibv_qp_ex.wr_set_inline_data`.
///
/// # Safety
///
/// As for [`wr_send`]; `addr` points to `length` readable bytes.
unsafe extern "C" fn wr_set_inline_data(qpx: *mut ibv::QpEx, addr: *mut c_void, length: usize) {
    let buf = [ibv::DataBuf { addr, length }];
    // SAFETY: per the contract.
    unsafe { set_inline(qpx, Ok(&buf)) };
}

/// `ibv_qp_ex.wr_set_inline_data_list`.
///
/// # Safety
///
/// As for [`wr_send`]; `buf_list` points to `num_buf` readable
/// `ibv_data_buf`s, each describing readable memory.
unsafe extern "C" fn wr_set_inline_data_list(
    qpx: *mut ibv::QpEx,
    num_buf: usize,
    buf_list: *const ibv::DataBuf,
) {
    // SAFETY: per the contract; the buffers are copied before this returns.
    let bufs = unsafe { c_array(buf_list, num_buf) };
    // SAFETY: per the contract.
    unsafe { set_inline(qpx, bufs) };
}
