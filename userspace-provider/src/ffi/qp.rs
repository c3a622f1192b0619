// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Queue pairs: creation with mapped send and receive rings, modify, query
//! and destroy through the kernel, and posting work requests into the
//! rings.
//!
//! Receives never enter the kernel: `post_recv` writes the WQEs and
//! publishes them with the producer index. Sends do the same, then ring
//! the doorbell: an empty `ibv_cmd_post_send` (no work requests), which
//! makes the kernel look at the send ring. The checks and the WQE layout
//! are in the safe modules `qp` and `wq`.

use core::cell::UnsafeCell;
use core::ffi::c_int;
use core::mem::{offset_of, size_of_val};
use core::ptr::{self, NonNull};
use core::slice;
use core::sync::atomic::{AtomicU32, Ordering};

use super::lock::SpinLock;
use super::mapping::WqMapping;
use super::{
    ah, cmd_result, drop_box, errno_ret, ibv_cmd_create_qp_ex, ibv_cmd_destroy_qp,
    ibv_cmd_modify_qp, ibv_cmd_post_send, ibv_cmd_query_qp, set_errno, try_box,
};
use crate::abi::{driver, ibv, verbs};
use crate::errno::Errno;
use crate::qp::{
    RECV_WQE_HEADER, RecvQueue, SEND_WQE_HEADER, SendQueue, WrFields, WrPart, can_post_recv,
    can_post_send, check_init_attr, check_num_sge, check_rq_presence, send_wqe, wr_part,
};
use crate::wq::{self, Producer};

/// A roxe QP: libibverbs' `verbs_qp`, then the rings and their state.
///
/// [`create_qp`] and [`create_qp_ex`] allocate it with `try_box`,
/// [`destroy_qp`] frees it.
///
/// The send and the receive queue have a lock each, so that one thread can
/// post sends while another posts receives, as the verbs allow; nothing
/// ever holds both.
#[repr(C)]
pub(super) struct Qp {
    /// libibverbs' part. libibverbs writes `state` and `events_completed`
    /// from any thread (under `qp->mutex`), so it is an `UnsafeCell`, and
    /// roxe touches it only through raw pointers.
    vqp: UnsafeCell<verbs::Qp>,
    /// `enum ibv_qp_state` as of the last successful `modify_qp` or
    /// `query_qp` that named it; the posting ops check it. The kernel may
    /// since have moved the QP to ERR, where posting is allowed anyway.
    state: AtomicU32,
    /// `enum ibv_qp_type`, fixed at creation.
    qp_type: u32,
    /// The send queue; `None` until creation has mapped it.
    sq: SpinLock<Option<SendQueue<WqMapping>>>,
    /// The receive queue; `None` until creation has mapped it, and for
    /// ever on a QP with an SRQ.
    rq: SpinLock<Option<RecvQueue<WqMapping>>>,
}

impl Qp {
    /// A QP before the kernel knows it: zeroed `verbs_qp` (what libibverbs
    /// expects from `calloc`), no rings.
    fn new(qp_type: u32) -> Self {
        Self {
            vqp: UnsafeCell::new(verbs::Qp::ZERO),
            state: AtomicU32::new(ibv::QPS_RESET),
            qp_type,
            sq: SpinLock::new(None),
            rq: SpinLock::new(None),
        }
    }

    /// The `Qp` around an `ibv_qp`.
    ///
    /// # Safety
    ///
    /// `ibqp` is the `ibv_qp` of a live `Qp` that stays live for `'a`.
    unsafe fn from_ibv<'a>(ibqp: *mut ibv::Qp) -> &'a Self {
        // SAFETY: `ibv_qp` is at offset 0 of the union at offset 0 of
        // `verbs_qp`, which is the `vqp` field of a live `Qp`.
        unsafe { &*ibqp.byte_sub(offset_of!(Qp, vqp)).cast::<Self>() }
    }

    /// This QP as libibverbs' `ibv_qp`.
    fn ibv(&self) -> *mut ibv::Qp {
        self.vqp.get().cast()
    }
}

/// Checks the kernel's description of the rings and maps them: the send
/// ring, and the receive ring unless the QP has an SRQ. `cap` holds the
/// limits the kernel granted.
fn map_queues(
    fd: c_int,
    resp: &roxe_uapi::CreateQpResp,
    cap: &ibv::QpCap,
    has_srq: bool,
) -> Result<(SendQueue<WqMapping>, Option<RecvQueue<WqMapping>>), Errno> {
    // Both descriptions are checked before anything is mapped.
    let sq = wq::Geometry::new(&resp.sq, SEND_WQE_HEADER)?;
    let rq = match check_rq_presence(&resp.rq, has_srq)? {
        true => Some(wq::Geometry::new(&resp.rq, RECV_WQE_HEADER)?),
        false => None,
    };
    let sq = SendQueue::new(
        Producer::new(WqMapping::new(fd, sq)?)?,
        cap.max_send_sge,
        cap.max_inline_data,
    )?;
    let rq = match rq {
        Some(g) => Some(RecvQueue::new(
            Producer::new(WqMapping::new(fd, g)?)?,
            cap.max_recv_sge,
        )?),
        None => None,
    };
    Ok((sq, rq))
}

/// Creates a QP for both create ops.
///
/// On success `attr.cap` holds what the kernel granted.
///
/// # Safety
///
/// `context` is an open roxe context; the pointers in `attr` are NULL or
/// objects of that context (`ibv_cmd_create_qp_ex` reads them), and its PD
/// is a live roxe PD.
unsafe fn create(
    context: *mut ibv::Context,
    attr: &mut ibv::QpInitAttrEx,
) -> Result<*mut ibv::Qp, Errno> {
    check_init_attr(attr.qp_type, attr.comp_mask, attr.create_flags)?;
    let qp = try_box(Qp::new(attr.qp_type)).ok_or(Errno::ENOMEM)?;
    // SAFETY: `qp` is live and only this thread knows it.
    let qp_ref = unsafe { qp.as_ref() };
    // `ibv_cmd_create_qp_ex` refuses the creation-flags bit; the flags are
    // all zero here (checked above), so the bit means nothing.
    let mut kattr = ibv::QpInitAttrEx {
        comp_mask: attr.comp_mask & ibv::QP_INIT_ATTR_PD,
        ..*attr
    };
    let mut cmd = ibv::CreateQp::default();
    let mut resp = driver::CreateQpResp::default();
    // SAFETY: `context` and the objects `kattr` names are valid per the
    // contract; `vqp` is a zeroed `verbs_qp` at its final address (its
    // address is the QP's user handle in the kernel); `cmd` is writable for
    // its core size (no driver input); `resp` is writable for its full
    // size, and the driver part follows `ibv_resp` directly.
    let ret = unsafe {
        ibv_cmd_create_qp_ex(
            context,
            qp_ref.vqp.get(),
            &raw mut kattr,
            &raw mut cmd,
            size_of_val(&cmd),
            &raw mut resp.ibv_resp,
            size_of_val(&resp),
        )
    };
    if let Err(err) = cmd_result(ret) {
        // SAFETY: `qp` came from `try_box` and was never published.
        unsafe { drop_box(qp) };
        return Err(err);
    }
    attr.cap = kattr.cap;
    // SAFETY: `context` is open per the contract.
    let fd = unsafe { (*context).cmd_fd };
    match map_queues(fd, &resp.drv, &kattr.cap, !attr.srq.is_null()) {
        Ok((sq, rq)) => {
            *qp_ref.sq.lock() = Some(sq);
            *qp_ref.rq.lock() = rq;
            Ok(qp_ref.ibv())
        }
        Err(err) => {
            // SAFETY: the kernel QP exists and nothing else knows it. If
            // this fails too, the mapping error is still the one to
            // report; the kernel frees the QP with the context at the
            // latest.
            unsafe { ibv_cmd_destroy_qp(qp_ref.ibv()) };
            // SAFETY: `qp` is unpublished, and the kernel QP is gone.
            unsafe { drop_box(qp) };
            Err(err)
        }
    }
}

/// `verbs_context_ops.create_qp`.
///
/// Returns NULL with `errno` set on failure: `EOPNOTSUPP` for QP types
/// other than RC, UC and UD, `EPROTO` if the kernel's ring description is
/// invalid, or the kernel's or `mmap`'s errno. On success `attr->cap` holds
/// what the kernel granted.
///
/// # Safety
///
/// `pd` is a live roxe PD; `attr` points to a readable and writable
/// `ibv_qp_init_attr` whose CQs and SRQ are NULL or objects of the PD's
/// context.
pub(super) unsafe extern "C" fn create_qp(
    pd: *mut ibv::Pd,
    attr: *mut ibv::QpInitAttr,
) -> *mut ibv::Qp {
    // SAFETY: NULL or valid per the contract.
    let (Some(pd_ref), Some(a)) = (unsafe { pd.as_ref() }, unsafe { attr.as_mut() }) else {
        set_errno(Errno::EINVAL);
        return ptr::null_mut();
    };
    let mut ex = ibv::QpInitAttrEx {
        qp_context: a.qp_context,
        send_cq: a.send_cq,
        recv_cq: a.recv_cq,
        srq: a.srq,
        cap: a.cap,
        qp_type: a.qp_type,
        sq_sig_all: a.sq_sig_all,
        comp_mask: ibv::QP_INIT_ATTR_PD,
        pd,
        xrcd: ptr::null_mut(),
        create_flags: 0,
        max_tso_header: 0,
        rwq_ind_tbl: ptr::null_mut(),
        rx_hash_conf: ibv::RxHashConf {
            rx_hash_function: 0,
            rx_hash_key_len: 0,
            rx_hash_key: ptr::null_mut(),
            rx_hash_fields_mask: 0,
        },
        source_qpn: 0,
        send_ops_flags: 0,
    };
    // SAFETY: the PD's context is open; the objects are as the contract
    // says.
    match unsafe { create(pd_ref.context, &mut ex) } {
        Ok(qp) => {
            a.cap = ex.cap;
            qp
        }
        Err(err) => {
            set_errno(err);
            ptr::null_mut()
        }
    }
}

/// `verbs_context_ops.create_qp_ex`. libibverbs' `ibv_create_qp_ex` calls
/// it only when `comp_mask` is more than `IBV_QP_INIT_ATTR_PD`.
///
/// Returns NULL with `errno` set on failure: `EOPNOTSUPP` for XRC, TSO,
/// RSS, the `ibv_wr_*` send interface (`IBV_QP_INIT_ATTR_SEND_OPS_FLAGS`)
/// and any creation flag, `EINVAL` without a PD, and otherwise as
/// [`create_qp`].
///
/// # Safety
///
/// `context` is an open roxe context; `attr` is NULL or points to a
/// readable and writable `ibv_qp_init_attr_ex` whose objects belong to
/// `context`.
pub(super) unsafe extern "C" fn create_qp_ex(
    context: *mut ibv::Context,
    attr: *mut ibv::QpInitAttrEx,
) -> *mut ibv::Qp {
    // SAFETY: NULL or valid per the contract.
    let Some(a) = (unsafe { attr.as_mut() }) else {
        set_errno(Errno::EINVAL);
        return ptr::null_mut();
    };
    // SAFETY: per the contract.
    match unsafe { create(context, a) } {
        Ok(qp) => qp,
        Err(err) => {
            set_errno(err);
            ptr::null_mut()
        }
    }
}

/// `verbs_context_ops.modify_qp`: returns 0 or a positive errno, which
/// `ibv_modify_qp` returns unchanged.
///
/// # Safety
///
/// `ibqp` is a live roxe QP and `attr` a readable `ibv_qp_attr`.
pub(super) unsafe extern "C" fn modify_qp(
    ibqp: *mut ibv::Qp,
    attr: *mut ibv::QpAttr,
    attr_mask: c_int,
) -> c_int {
    let mut cmd = ibv::ModifyQp::default();
    // SAFETY: `ibqp` is a live QP of an open context and `attr` readable
    // per the contract; `cmd` is writable for its core size (no driver
    // input).
    let ret = unsafe { ibv_cmd_modify_qp(ibqp, attr, attr_mask, &raw mut cmd, size_of_val(&cmd)) };
    if ret == 0 && attr_mask & ibv::QP_STATE != 0 {
        // SAFETY: as above.
        let (qp, state) = unsafe { (Qp::from_ibv(ibqp), (*attr).qp_state) };
        qp.state.store(state, Ordering::Release);
    }
    errno_ret(cmd_result(ret))
}

/// `verbs_context_ops.query_qp`: returns 0 or a positive errno, which
/// `ibv_query_qp` returns unchanged.
///
/// # Safety
///
/// `ibqp` is a live roxe QP; `attr` and `init_attr` are writable.
pub(super) unsafe extern "C" fn query_qp(
    ibqp: *mut ibv::Qp,
    attr: *mut ibv::QpAttr,
    attr_mask: c_int,
    init_attr: *mut ibv::QpInitAttr,
) -> c_int {
    let mut cmd = ibv::QueryQp::default();
    // SAFETY: per the contract; `cmd` is writable for its core size.
    let ret = unsafe {
        ibv_cmd_query_qp(
            ibqp,
            attr,
            attr_mask,
            init_attr,
            &raw mut cmd,
            size_of_val(&cmd),
        )
    };
    if ret == 0 && attr_mask & ibv::QP_STATE != 0 {
        // SAFETY: the command filled in `attr`; `ibqp` is live.
        let (qp, state) = unsafe { (Qp::from_ibv(ibqp), (*attr).qp_state) };
        qp.state.store(state, Ordering::Release);
    }
    errno_ret(cmd_result(ret))
}

/// `verbs_context_ops.destroy_qp`: destroys the kernel QP, then unmaps the
/// rings and frees the QP. Returns 0 or a positive errno, which
/// `ibv_destroy_qp` returns unchanged; on failure the QP stays valid.
///
/// # Safety
///
/// `ibqp` is a live roxe QP that no other thread uses; the caller does not
/// use it after a successful call.
pub(super) unsafe extern "C" fn destroy_qp(ibqp: *mut ibv::Qp) -> c_int {
    // SAFETY: `ibqp` is a live QP of an open context per the contract.
    let ret = unsafe { ibv_cmd_destroy_qp(ibqp) };
    if let Err(err) = cmd_result(ret) {
        return err.get();
    }
    // SAFETY: as in `Qp::from_ibv`.
    let qp = unsafe { ibqp.byte_sub(offset_of!(Qp, vqp)) }.cast::<Qp>();
    if let Some(qp) = NonNull::new(qp) {
        // SAFETY: every roxe QP comes from `try_box` in `create`; the
        // kernel QP is gone and nothing uses it.
        unsafe { drop_box(qp) };
    }
    0
}

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

/// Writes one send work request into the send ring (not published).
///
/// # Safety
///
/// `wr` is a valid `ibv_send_wr` as `ibv_post_send` requires: its SGE list
/// holds `num_sge` entries; with `IBV_SEND_INLINE` they describe readable
/// memory; on a UD QP `wr.ud.ah` is NULL or a live roxe AH.
unsafe fn post_one_send(
    qp_type: u32,
    sq: &mut SendQueue<WqMapping>,
    wr: &ibv::SendWr,
) -> Result<(), Errno> {
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
    };
    let wqe = send_wqe(wr.wr_id, wr.opcode, wr.send_flags, wr.imm_data, fields);
    sq.push(wqe, sges, |sge, dst| {
        // CAST: this is C's `(void *)(uintptr_t)sge->addr`; `usize` is 64
        // bits on the only target this crate builds for.
        let src = ptr::with_exposed_provenance::<u8>(sge.addr as usize);
        // SAFETY: with `IBV_SEND_INLINE` the caller's SGEs describe
        // readable memory (the contract); `dst` is exactly `sge.length`
        // bytes of the provider's own scratch slot, so they do not overlap.
        unsafe { ptr::copy_nonoverlapping(src, dst.as_mut_ptr(), dst.len()) };
    })
}

/// Rings the send doorbell: an `ibv_post_send` command with no work
/// requests. The kernel then checks every WQE published since the last
/// time; one it refuses completes with an error and moves the QP to ERR.
///
/// # Safety
///
/// `ibqp` is a live roxe QP.
unsafe fn kick(ibqp: *mut ibv::Qp) -> Result<(), Errno> {
    let mut ignored = ptr::null_mut();
    // SAFETY: `ibqp` is a live QP of an open context. With an empty list,
    // `ibv_cmd_post_send` sends `wr_count = 0`, `sge_count = 0` and
    // `wqe_size = sizeof(struct ib_uverbs_send_wr)` (which the kernel
    // requires as a minimum) and never reads `wr`; it writes `ignored`
    // only on failure.
    cmd_result(unsafe { ibv_cmd_post_send(ibqp, ptr::null_mut(), &raw mut ignored) })
}

/// `verbs_context_ops.post_send`: writes the work requests into the send
/// ring, publishes them, and rings the doorbell.
///
/// Returns 0, or a positive errno with `*bad_wr` set to the first work
/// request that was not posted; those before it were. `EINVAL` for a QP
/// that is not yet in RTS (nothing is posted), too many SGEs or too much
/// inline data, or a UD work request without an AH; `ENOMEM` when the ring
/// is full; `EOPNOTSUPP` for memory-window binds. If the doorbell itself
/// fails, the work requests are in the ring already, but `*bad_wr` is the
/// first of this call and the doorbell's errno is returned: the kernel
/// flushes them when the QP enters ERR, and discards them on RESET.
///
/// # Safety
///
/// `ibqp` is a live roxe QP; `wr` is NULL or a valid list of
/// `ibv_send_wr` (see `post_one_send`); `bad_wr` is NULL or writable.
pub(super) unsafe extern "C" fn post_send(
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
    // SAFETY: `ibqp` is a live roxe QP per the contract.
    let qp = unsafe { Qp::from_ibv(ibqp) };
    if !can_post_send(qp.state.load(Ordering::Acquire)) {
        *bad_wr = wr;
        return Errno::EINVAL.get();
    }
    let (result, posted) = {
        let mut guard = qp.sq.lock();
        let Some(sq) = guard.as_mut() else {
            *bad_wr = wr;
            return Errno::EINVAL.get();
        };
        let mut result = Ok(());
        let mut cur = wr;
        // SAFETY: each element of the caller's list is valid per the
        // contract.
        while let Some(w) = unsafe { cur.as_ref() } {
            // SAFETY: as above.
            if let Err(err) = unsafe { post_one_send(qp.qp_type, sq, w) } {
                *bad_wr = cur;
                result = Err(err);
                break;
            }
            cur = w.next;
        }
        (result, sq.publish())
    };
    if posted {
        // SAFETY: `ibqp` is live.
        if let Err(err) = unsafe { kick(ibqp) } {
            if result.is_ok() {
                *bad_wr = wr;
                return err.get();
            }
        }
    }
    errno_ret(result)
}

/// Writes the receive work requests of `wr` into `rq` and publishes them.
/// Shared by QPs and SRQs.
///
/// Returns 0, or a positive errno with `*bad_wr` set to the first work
/// request that was not posted (`EINVAL` for too many SGEs, `ENOMEM` when
/// the ring is full, `EIO` for a corrupt consumer index).
///
/// # Safety
///
/// `wr` is a valid, non-NULL list of `ibv_recv_wr` whose SGE lists hold
/// `num_sge` entries each.
pub(super) unsafe fn post_recv_list(
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

/// `verbs_context_ops.post_recv`: writes the work requests into the
/// receive ring and publishes them, without entering the kernel.
///
/// Returns 0, or a positive errno with `*bad_wr` set to the first work
/// request that was not posted: `EINVAL` for a QP in RESET or one with an
/// SRQ (nothing is posted), and otherwise as `post_recv_list`.
///
/// # Safety
///
/// `ibqp` is a live roxe QP; `wr` is NULL or a valid list of
/// `ibv_recv_wr`; `bad_wr` is NULL or writable.
pub(super) unsafe extern "C" fn post_recv(
    ibqp: *mut ibv::Qp,
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
    // SAFETY: `ibqp` is a live roxe QP per the contract.
    let qp = unsafe { Qp::from_ibv(ibqp) };
    if !can_post_recv(qp.state.load(Ordering::Acquire)) {
        *bad_wr = wr;
        return Errno::EINVAL.get();
    }
    let mut guard = qp.rq.lock();
    let Some(rq) = guard.as_mut() else {
        *bad_wr = wr;
        return Errno::EINVAL.get();
    };
    // SAFETY: `wr` is a valid non-NULL list per the contract.
    unsafe { post_recv_list(rq, wr, bad_wr) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ffi::mapping::tests::Backing;
    use roxe_uapi::{RING_HEADER_SIZE, RingInfo};

    /// A QP over file-backed rings, as `create` leaves it, without a
    /// kernel. The send ring has 4 slots of 128 bytes (1 SGE, 56 inline
    /// bytes), the receive ring 4 slots of 64 bytes (3 SGEs).
    struct TestQp {
        qp: NonNull<Qp>,
        sq: Backing,
        rq: Backing,
    }

    fn ring(num_slots: u32, slot_size: u32) -> RingInfo {
        RingInfo {
            mmap_offset: 0,
            mmap_size: 4096,
            num_slots,
            slot_size,
        }
    }

    impl TestQp {
        fn new(qp_type: u32, state: u32) -> Self {
            let (sq, rq) = (Backing::new(4096), Backing::new(4096));
            let qp = try_box(Qp::new(qp_type)).expect("allocate a QP");
            let cap = ibv::QpCap {
                max_send_wr: 4,
                max_recv_wr: 4,
                max_send_sge: 1,
                max_recv_sge: 3,
                max_inline_data: 56,
            };
            let sq_geo = wq::Geometry::new(&ring(4, 128), SEND_WQE_HEADER).expect("valid");
            let rq_geo = wq::Geometry::new(&ring(4, 64), RECV_WQE_HEADER).expect("valid");
            let send = SendQueue::new(
                Producer::new(WqMapping::new(sq.fd(), sq_geo).expect("mmap")).expect("producer"),
                cap.max_send_sge,
                cap.max_inline_data,
            )
            .expect("limits fit");
            let recv = RecvQueue::new(
                Producer::new(WqMapping::new(rq.fd(), rq_geo).expect("mmap")).expect("producer"),
                cap.max_recv_sge,
            )
            .expect("limits fit");
            // SAFETY: `qp` is live and only this test uses it.
            let q = unsafe { qp.as_ref() };
            *q.sq.lock() = Some(send);
            *q.rq.lock() = Some(recv);
            q.state.store(state, Ordering::Relaxed);
            Self { qp, sq, rq }
        }

        fn ibv(&self) -> *mut ibv::Qp {
            // SAFETY: `qp` is live until `drop`.
            unsafe { self.qp.as_ref() }.ibv()
        }

        fn recv(&self, wrs: &mut [ibv::RecvWr]) -> (c_int, *mut ibv::RecvWr) {
            link_recv(wrs);
            let mut bad = ptr::dangling_mut();
            // SAFETY: the QP is live; the list is valid.
            let ret = unsafe { post_recv(self.ibv(), wrs.as_mut_ptr(), &raw mut bad) };
            (ret, bad)
        }
    }

    impl Drop for TestQp {
        fn drop(&mut self) {
            // SAFETY: `qp` came from `try_box` and is no longer used.
            unsafe { drop_box(self.qp) };
        }
    }

    fn link_recv(wrs: &mut [ibv::RecvWr]) {
        let n = wrs.len();
        let base = wrs.as_mut_ptr();
        for (i, w) in wrs.iter_mut().enumerate() {
            w.next = if i + 1 < n {
                base.wrapping_add(i + 1)
            } else {
                ptr::null_mut()
            };
        }
    }

    fn recv_wr(wr_id: u64, sges: &mut [ibv::Sge]) -> ibv::RecvWr {
        ibv::RecvWr {
            wr_id,
            next: ptr::null_mut(),
            sg_list: sges.as_mut_ptr(),
            // CAST: a handful of SGEs.
            num_sge: sges.len() as c_int,
        }
    }

    fn slot_bytes(b: &Backing, slot: u64, slot_size: u64, len: usize) -> Vec<u8> {
        b.read_at(RING_HEADER_SIZE as u64 + slot * slot_size, len)
    }

    #[test]
    fn post_recv_fills_the_ring_and_publishes_once() {
        let qp = TestQp::new(ibv::QPT_RC, ibv::QPS_INIT);
        let mut s = [ibv::Sge {
            addr: 0x1000,
            length: 64,
            lkey: 5,
        }];
        let mut wrs = [recv_wr(11, &mut s), recv_wr(12, &mut [])];
        let (ret, bad) = qp.recv(&mut wrs);
        assert_eq!((ret, bad), (0, ptr::null_mut()));
        assert_eq!(qp.rq.producer(), 2);
        let slot = slot_bytes(&qp.rq, 0, 64, 32);
        assert_eq!(u64::from_ne_bytes(slot[..8].try_into().expect("8")), 11);
        assert_eq!(u32::from_ne_bytes(slot[8..12].try_into().expect("4")), 1);
        assert_eq!(
            u64::from_ne_bytes(slot[16..24].try_into().expect("8")),
            0x1000
        );
        let slot = slot_bytes(&qp.rq, 1, 64, 16);
        assert_eq!(u64::from_ne_bytes(slot[..8].try_into().expect("8")), 12);
    }

    #[test]
    fn post_recv_stops_at_the_first_bad_wr() {
        let qp = TestQp::new(ibv::QPT_RC, ibv::QPS_RTS);
        let mut four = [ibv::Sge::default(); 4];
        let mut wrs = [
            recv_wr(1, &mut []),
            recv_wr(2, &mut four),
            recv_wr(3, &mut []),
        ];
        let (ret, bad) = qp.recv(&mut wrs);
        assert_eq!(ret, Errno::EINVAL.get());
        assert_eq!(bad, &raw mut wrs[1]);
        assert_eq!(qp.rq.producer(), 1, "the WR before the bad one is posted");

        // A full ring: 3 more fit, the fourth is refused.
        let mut wrs: Vec<_> = (10..14).map(|id| recv_wr(id, &mut [])).collect();
        let (ret, bad) = qp.recv(&mut wrs);
        assert_eq!(ret, Errno::ENOMEM.get());
        assert_eq!(bad, &raw mut wrs[3]);
        assert_eq!(qp.rq.producer(), 4);
        // The kernel frees two slots; two fit again.
        qp.rq.set_consumer(2);
        let mut wrs: Vec<_> = (20..22).map(|id| recv_wr(id, &mut [])).collect();
        assert_eq!(qp.recv(&mut wrs).0, 0);
        assert_eq!(qp.rq.producer(), 6);
    }

    #[test]
    fn post_recv_refuses_a_reset_qp_and_a_qp_without_rq() {
        let qp = TestQp::new(ibv::QPT_UD, ibv::QPS_RESET);
        let mut wrs = [recv_wr(1, &mut [])];
        let (ret, bad) = qp.recv(&mut wrs);
        assert_eq!((ret, bad), (Errno::EINVAL.get(), &raw mut wrs[0]));
        // SAFETY: `qp` is live and only this test uses it.
        let q = unsafe { qp.qp.as_ref() };
        q.state.store(ibv::QPS_RTR, Ordering::Relaxed);
        *q.rq.lock() = None; // as on a QP with an SRQ
        let (ret, bad) = qp.recv(&mut wrs);
        assert_eq!((ret, bad), (Errno::EINVAL.get(), &raw mut wrs[0]));
        assert_eq!(qp.rq.producer(), 0);
        // SAFETY: a NULL `bad_wr` is refused before anything is read.
        let ret = unsafe { post_recv(qp.ibv(), wrs.as_mut_ptr(), ptr::null_mut()) };
        assert_eq!(ret, Errno::EINVAL.get());
        // An empty list posts nothing and succeeds.
        let mut bad = ptr::dangling_mut();
        // SAFETY: the QP is live.
        let ret = unsafe { post_recv(qp.ibv(), ptr::null_mut(), &raw mut bad) };
        assert_eq!((ret, bad), (0, ptr::null_mut()));
    }

    #[test]
    fn post_recv_does_not_wait_for_the_send_lock() {
        let qp = TestQp::new(ibv::QPT_RC, ibv::QPS_RTS);
        // SAFETY: `qp` is live until the end of the test.
        let q = unsafe { qp.qp.as_ref() };
        let sending = q.sq.lock();
        let ibqp = qp.ibv().expose_provenance();
        let other = std::thread::spawn(move || {
            let mut wr = recv_wr(7, &mut []);
            let mut bad = ptr::null_mut();
            // SAFETY: the QP outlives this thread (joined below); the list
            // is valid.
            unsafe {
                post_recv(
                    ptr::with_exposed_provenance_mut(ibqp),
                    &raw mut wr,
                    &raw mut bad,
                )
            }
        });
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !other.is_finished() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let finished = other.is_finished();
        drop(sending);
        assert!(finished, "post_recv waited for the send lock");
        assert_eq!(other.join().expect("poster"), 0);
        assert_eq!(qp.rq.producer(), 1);
    }

    #[test]
    fn post_send_before_rts_posts_nothing() {
        for state in [ibv::QPS_RESET, ibv::QPS_INIT, ibv::QPS_RTR] {
            let qp = TestQp::new(ibv::QPT_RC, state);
            let mut wr = send_wr(1, ibv::WR_SEND, 0, &mut []);
            let mut bad = ptr::null_mut();
            // SAFETY: the QP is live and the list valid; refused before the
            // doorbell, which would need a kernel.
            let ret = unsafe { post_send(qp.ibv(), &raw mut wr, &raw mut bad) };
            assert_eq!(
                (ret, bad),
                (Errno::EINVAL.get(), &raw mut wr),
                "state {state}"
            );
            assert_eq!(qp.sq.producer(), 0);
        }
    }

    #[test]
    fn post_send_stops_before_the_bad_wr_and_publishes_the_rest() {
        // Errors in the first work request leave nothing to publish, so no
        // doorbell (which needs a kernel) is rung.
        let qp = TestQp::new(ibv::QPT_UD, ibv::QPS_RTS);
        let mut two = [ibv::Sge::default(); 2];
        let cases: [(ibv::SendWr, Errno); 3] = [
            // Two SGEs, one granted.
            (send_wr(1, ibv::WR_SEND, 0, &mut two), Errno::EINVAL),
            // UD without an AH.
            (send_wr(2, ibv::WR_SEND, 0, &mut []), Errno::EINVAL),
            // A bind.
            (send_wr(3, ibv::WR_BIND_MW, 0, &mut []), Errno::EOPNOTSUPP),
        ];
        for (mut wr, err) in cases {
            let mut bad = ptr::null_mut();
            // SAFETY: the QP is live and the list valid.
            let ret = unsafe { post_send(qp.ibv(), &raw mut wr, &raw mut bad) };
            assert_eq!((ret, bad), (err.get(), &raw mut wr), "wr {}", wr.wr_id);
        }
        assert_eq!(qp.sq.producer(), 0);
        // SAFETY: a NULL `bad_wr` is refused first.
        let ret = unsafe { post_send(qp.ibv(), ptr::null_mut(), ptr::null_mut()) };
        assert_eq!(ret, Errno::EINVAL.get());
    }

    #[test]
    fn one_send_writes_the_inline_bytes() {
        let qp = TestQp::new(ibv::QPT_RC, ibv::QPS_RTS);
        let data = *b"hello, ring";
        let mut s = [ibv::Sge {
            addr: data.as_ptr().addr() as u64,
            length: data.len() as u32,
            lkey: 0,
        }];
        let wr = send_wr(42, ibv::WR_SEND, ibv::SEND_INLINE, &mut s);
        // SAFETY: `qp` is live and only this test uses it.
        let q = unsafe { qp.qp.as_ref() };
        let mut guard = q.sq.lock();
        let sq = guard.as_mut().expect("mapped");
        // SAFETY: `wr` is valid and its inline SGE points at `data`.
        unsafe { post_one_send(ibv::QPT_RC, sq, &wr) }.expect("fits");
        // A 57-byte inline send does not.
        let big = [0u8; 57];
        let mut s = [ibv::Sge {
            addr: big.as_ptr().addr() as u64,
            length: 57,
            lkey: 0,
        }];
        let wr = send_wr(43, ibv::WR_SEND, ibv::SEND_INLINE, &mut s);
        // SAFETY: as above.
        let too_big = unsafe { post_one_send(ibv::QPT_RC, sq, &wr) };
        assert_eq!(too_big, Err(Errno::EINVAL));
        assert!(sq.publish());
        drop(guard);
        assert_eq!(qp.sq.producer(), 1);
        let slot = slot_bytes(&qp.sq, 0, 128, 72 + data.len());
        assert_eq!(u64::from_ne_bytes(slot[..8].try_into().expect("8")), 42);
        assert_eq!(
            u32::from_ne_bytes(slot[20..24].try_into().expect("4")),
            0,
            "num_sge"
        );
        assert_eq!(
            u32::from_ne_bytes(slot[24..28].try_into().expect("4")),
            11,
            "inline_len"
        );
        assert_eq!(slot[72..], data);
    }

    fn send_wr(wr_id: u64, opcode: u32, send_flags: u32, sges: &mut [ibv::Sge]) -> ibv::SendWr {
        ibv::SendWr {
            wr_id,
            next: ptr::null_mut(),
            sg_list: sges.as_mut_ptr(),
            // CAST: a handful of SGEs.
            num_sge: sges.len() as c_int,
            opcode,
            send_flags,
            imm_data: 0,
            wr: ibv::SendWrWr {
                ud: ibv::UdWr {
                    ah: ptr::null_mut(),
                    remote_qpn: 0,
                    remote_qkey: 0,
                },
            },
            remote_srqn: 0,
            extra: ibv::SendWrExtra {
                tso: ibv::TsoWr {
                    hdr: ptr::null_mut(),
                    hdr_sz: 0,
                    mss: 0,
                },
            },
        }
    }

    #[test]
    fn map_queues_checks_the_response_before_mapping() {
        let cap = ibv::QpCap {
            max_send_sge: 1,
            max_recv_sge: 3,
            max_inline_data: 56,
            ..ibv::QpCap::default()
        };
        let good = roxe_uapi::CreateQpResp {
            sq: ring(4, 128),
            rq: ring(4, 64),
        };
        // fd -1 would make mmap fail with EBADF; EPROTO shows it never ran.
        let bad_sq = roxe_uapi::CreateQpResp {
            sq: ring(3, 128),
            ..good
        };
        let bad_rq = roxe_uapi::CreateQpResp {
            rq: ring(4, 32),
            ..good
        };
        for (resp, has_srq) in [(bad_sq, false), (bad_rq, false), (good, true)] {
            assert_eq!(
                map_queues(-1, &resp, &cap, has_srq).map(|_| ()),
                Err(Errno::EPROTO)
            );
        }
        let no_rq = roxe_uapi::CreateQpResp {
            rq: RingInfo::default(),
            ..good
        };
        assert_eq!(
            map_queues(-1, &no_rq, &cap, false).map(|_| ()),
            Err(Errno::EPROTO)
        );
        assert_eq!(
            map_queues(-1, &good, &cap, false).map(|_| ()),
            Err(Errno::from_raw(9))
        );
        // Granted limits beyond the slot.
        let sq = Backing::new(4096);
        let greedy = ibv::QpCap {
            max_send_sge: 4,
            ..cap
        };
        assert_eq!(
            map_queues(sq.fd(), &no_rq, &greedy, true).map(|_| ()),
            Err(Errno::EPROTO)
        );
        assert!(map_queues(sq.fd(), &no_rq, &cap, true).is_ok_and(|(_, rq)| rq.is_none()));
    }
}
