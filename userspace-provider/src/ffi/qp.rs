// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Queue pairs: creation with mapped send and receive rings, modify, query
//! and destroy through the kernel, and posting work requests into the
//! rings.
//!
//! Receives never enter the kernel: `post_recv` writes the WQEs and
//! publishes them with the producer index. Sends do the same, then ring
//! the doorbell: an empty `ibv_cmd_post_send` (no work requests), which
//! makes the kernel look at the send ring. QPs created with
//! `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS` also offer the `ibv_wr_*` interface
//! (`wr_start`, the builders and setters, `wr_complete`), which fills the
//! same ring. The checks and the WQE layout are in the safe modules `qp`
//! and `wq`.

use core::cell::UnsafeCell;
use core::ffi::{c_int, c_void};
use core::mem::{offset_of, size_of_val};
use core::ptr::{self, NonNull};
use core::slice;
use core::sync::atomic::{AtomicU32, Ordering};

use roxe_uapi::SendWqe;

use super::lock::SpinLock;
use super::mapping::WqMapping;
use super::{
    ah, cmd_result, drop_box, errno_ret, ibv_cmd_create_qp_ex, ibv_cmd_destroy_qp,
    ibv_cmd_modify_qp, ibv_cmd_post_send, ibv_cmd_query_qp, mw, set_errno, try_box,
};
use crate::abi::{driver, ibv, verbs};
use crate::errno::Errno;
use crate::qp::{
    BindVia, RECV_WQE_HEADER, RecvQueue, SEND_WQE_HEADER, SendQueue, WrFields, WrPart, bind_fields,
    can_post_recv, can_post_send, check_bind_wr, check_init_attr, check_num_sge, check_rq_presence,
    send_wqe, wr_part,
};
use crate::wq::{self, Producer};

/// A roxe QP: libibverbs' `verbs_qp`, then the rings and their state.
///
/// [`create_qp`] and [`create_qp_ex`] allocate it with `try_box`,
/// [`destroy_qp`] frees it.
///
/// The send and the receive queue have a lock each, so that one thread can
/// post sends while another posts receives, as the verbs allow; nothing
/// ever holds both. A batch of the `ibv_wr_*` interface holds the send
/// lock from `wr_start` to `wr_complete` or `wr_abort` (parked in between,
/// see [`SpinLock`]), as `post_send` holds it for one call.
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

    /// The `Qp` around an `ibv_qp_ex`.
    ///
    /// # Safety
    ///
    /// As for [`Qp::from_ibv`].
    unsafe fn from_ex<'a>(qpx: *mut ibv::QpEx) -> &'a Self {
        // SAFETY: `ibv_qp_ex` starts with its `ibv_qp`, at offset 0 of the
        // same union.
        unsafe { Self::from_ibv(qpx.cast()) }
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
    check_init_attr(
        attr.qp_type,
        attr.comp_mask,
        attr.create_flags,
        attr.send_ops_flags,
    )?;
    let wr_api = attr.comp_mask & ibv::QP_INIT_ATTR_SEND_OPS_FLAGS != 0;
    let qp = try_box(Qp::new(attr.qp_type)).ok_or(Errno::ENOMEM)?;
    // SAFETY: `qp` is live and only this thread knows it.
    let qp_ref = unsafe { qp.as_ref() };
    // `ibv_cmd_create_qp_ex` refuses the creation-flags bit; the flags are
    // all zero here (checked above), so the bit means nothing. The send
    // ops are the provider's business alone.
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
    let queues =
        map_queues(fd, &resp.drv, &kattr.cap, !attr.srq.is_null()).and_then(|(mut sq, rq)| {
            if wr_api {
                sq.enable_wr(attr.qp_type == ibv::QPT_UD)?;
            }
            Ok((sq, rq))
        });
    match queues {
        Ok((sq, rq)) => {
            *qp_ref.sq.lock() = Some(sq);
            *qp_ref.rq.lock() = rq;
            if wr_api {
                // SAFETY: the QP is live and still unpublished; the command
                // has set `comp_mask`, which must now gain `VERBS_QP_EX`.
                unsafe { install_wr_ops(qp_ref.vqp.get(), attr.send_ops_flags) };
            }
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
/// With `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS` the QP offers the `ibv_wr_*`
/// interface (`ibv_qp_to_qp_ex` returns it), with a builder for each
/// operation `send_ops_flags` names (see [`install_wr_ops`]).
///
/// Returns NULL with `errno` set on failure: `EOPNOTSUPP` for XRC, TSO,
/// RSS, any creation flag and send ops the QP type does not offer
/// ([`check_init_attr`]), `EINVAL` without a PD, and otherwise as
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
        if state == ibv::QPS_RESET {
            // SAFETY: `ibqp` is live, and its CQs are NULL or live roxe CQs
            // that outlive it.
            unsafe {
                let (scq, rcq, qpn) = ((*ibqp).send_cq, (*ibqp).recv_cq, (*ibqp).qp_num);
                super::cq::discard_qp(scq, qpn);
                if rcq != scq {
                    super::cq::discard_qp(rcq, qpn);
                }
            }
        }
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

/// Writes one send work request into the send ring (not published), and
/// returns the fixed part of the WQE it wrote (without its SGE and inline
/// counts).
///
/// A memory-window bind is checked as [`bind_fields`] does for a bind
/// asked for `via`: `ibv_post_send` posts type 2 binds,
/// [`super::mw::bind_mw`] posts type 1 binds through here too.
///
/// # Safety
///
/// `wr` is a valid `ibv_send_wr` as `ibv_post_send` requires: its SGE list
/// holds `num_sge` entries; with `IBV_SEND_INLINE` they describe readable
/// memory; on a UD QP `wr.ud.ah` is NULL or a live roxe AH; for a bind,
/// `bind_mw.mw` is NULL or a live `ibv_mw` and `bind_mw.bind_info.mr` NULL
/// or a live `ibv_mr`.
unsafe fn post_one_send(
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
unsafe fn kick(ibqp: *mut ibv::Qp) -> Result<(), Errno> {
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
pub(super) unsafe fn post_single(
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
/// Returns 0, or a positive errno with `*bad_wr` set to the first work
/// request that was not posted; those before it were. `EINVAL` for a QP
/// that is not yet in RTS (nothing is posted), too many SGEs or too much
/// inline data, a UD work request without an AH, or a memory-window bind
/// that [`bind_fields`] refuses (only type 2 windows, on RC and UC QPs;
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

// The `ibv_wr_*` interface.
//
// Each op gets the `ibv_qp_ex` of a roxe QP created with
// `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS`. Their common contract, that of the
// `ibv_wr_post` man page: `wr_start` is called by a thread that has no
// batch open on the QP and holds no lock of it; every other op only by
// the thread whose batch is open, between its `wr_start` and its
// `wr_complete` or `wr_abort`. The batch holds the send lock throughout,
// so other threads' `post_send` and `wr_start` on the QP wait for it (and
// the batch's own thread must not call them). The builders and setters
// keep any error in the batch, and `wr_complete` returns it.

/// Fills in the `ibv_wr_*` ops of a QP and sets `VERBS_QP_EX`, so that
/// `ibv_qp_to_qp_ex` returns its `ibv_qp_ex`.
///
/// Every QP gets `wr_start`, `wr_complete`, `wr_abort` and the setters
/// (`wr_set_ud_addr` fails the batch on QPs that are not UD); a builder
/// only if `send_ops` names its operation (which [`check_init_attr`] has
/// checked against the QP type). `wr_send_tso`, `wr_set_xrc_srqn` and
/// stay NULL: roxe has no TSO or XRC.
///
/// # Safety
///
/// `vqp` is the `verbs_qp` of a live [`Qp`] that nothing else uses yet,
/// whose send queue offers the `ibv_wr_*` interface
/// ([`SendQueue::enable_wr`]).
unsafe fn install_wr_ops(vqp: *mut verbs::Qp, send_ops: u64) {
    let with = |flag: u64| send_ops & flag != 0;
    // SAFETY: per the contract the QP is live and only this thread uses
    // it; `qp_ex` is at offset 0 of the union at offset 0.
    let ex = unsafe { &mut *vqp.cast::<ibv::QpEx>() };
    ex.wr_start = Some(wr_start);
    ex.wr_complete = Some(wr_complete);
    ex.wr_abort = Some(wr_abort);
    ex.wr_set_ud_addr = Some(wr_set_ud_addr);
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
/// bind `bind_fields` refuses; `ENOMEM` if the ring filled up. If the
/// doorbell fails, the batch is in the ring already and its errno is
/// returned (as for `post_send`). `EINVAL` outside a batch.
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

        /// A QP as `create_qp_ex` makes it with `send_ops_flags` `ops`.
        fn with_wr(qp_type: u32, state: u32, ops: u64) -> Self {
            let qp = Self::new(qp_type, state);
            // SAFETY: `qp` is live and only this test uses it.
            let q = unsafe { qp.qp.as_ref() };
            q.sq.lock()
                .as_mut()
                .expect("mapped")
                .enable_wr(qp_type == ibv::QPT_UD)
                .expect("room");
            // SAFETY: the QP is live, unused elsewhere, and offers the
            // interface.
            unsafe { install_wr_ops(q.vqp.get(), ops) };
            qp
        }

        /// The `ibv_qp_ex`, as `ibv_qp_to_qp_ex` would return it.
        fn ex(&self) -> *mut ibv::QpEx {
            self.ibv().cast()
        }

        /// The installed `ibv_qp_ex` ops, as libibverbs' inline
        /// `ibv_wr_*` calls read them.
        fn ops(&self) -> &ibv::QpEx {
            // SAFETY: the QP is live; only the test thread touches it.
            unsafe { &*self.ex() }
        }

        /// Sets `wr_id` and `wr_flags` as the application does.
        fn set_wr(&self, wr_id: u64, wr_flags: u32) {
            // SAFETY: as in `ops`.
            unsafe {
                (*self.ex()).wr_id = wr_id;
                (*self.ex()).wr_flags = wr_flags;
            }
        }

        /// Whether the send lock is free (no batch is open). Leaves the
        /// lock as it was.
        fn sq_unlocked(&self) -> bool {
            // SAFETY: `qp` is live; only the test thread uses it, so if the
            // lock is held, it is by the batch this thread opened.
            match unsafe { self.qp.as_ref().sq.resume() } {
                Some(batch) => {
                    batch.park();
                    false
                }
                None => true,
            }
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
            // A bind, which UD QPs cannot do.
            (send_wr(3, ibv::WR_BIND_MW, 0, &mut []), Errno::EINVAL),
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
        unsafe { post_one_send(ibv::QPT_RC, sq, &wr, BindVia::WorkRequest) }.expect("fits");
        // A 57-byte inline send does not.
        let big = [0u8; 57];
        let mut s = [ibv::Sge {
            addr: big.as_ptr().addr() as u64,
            length: 57,
            lkey: 0,
        }];
        let wr = send_wr(43, ibv::WR_SEND, ibv::SEND_INLINE, &mut s);
        // SAFETY: as above.
        let too_big = unsafe { post_one_send(ibv::QPT_RC, sq, &wr, BindVia::WorkRequest) };
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

    /// A window as `ibv_alloc_mw` leaves it: index 0x42, key byte 0x17.
    fn window(mw_type: u32) -> ibv::Mw {
        ibv::Mw {
            rkey: 0x4217,
            type_: mw_type,
            ..ibv::Mw::ZERO
        }
    }

    fn mr(lkey: u32) -> ibv::Mr {
        ibv::Mr {
            lkey,
            ..ibv::Mr::ZERO
        }
    }

    fn bind_info(mr: &mut ibv::Mr, length: u64, access: u32) -> ibv::MwBindInfo {
        ibv::MwBindInfo {
            mr,
            addr: 0x7f00_0000_2000,
            length,
            mw_access_flags: access,
        }
    }

    /// An `IBV_WR_BIND_MW` work request for `mw`, asking for `rkey`.
    fn bind_wr(wr_id: u64, mw: &mut ibv::Mw, rkey: u32, info: ibv::MwBindInfo) -> ibv::SendWr {
        let mut wr = send_wr(wr_id, ibv::WR_BIND_MW, ibv::SEND_SIGNALED, &mut []);
        wr.extra = ibv::SendWrExtra {
            bind_mw: ibv::BindMwWr {
                mw,
                rkey,
                bind_info: info,
            },
        };
        wr
    }

    #[test]
    fn bind_work_requests_become_bind_wqes() {
        let qp = TestQp::new(ibv::QPT_RC, ibv::QPS_RTS);
        let (mut mw1, mut mw2, mut m) = (window(1), window(2), mr(0x905));
        let wr2 = bind_wr(1, &mut mw2, 0x4218, bind_info(&mut m, 64, 2));
        let wr1 = bind_wr(2, &mut mw1, 0, bind_info(&mut m, 64, 6));
        // SAFETY: `qp` is live and only this test uses it.
        let q = unsafe { qp.qp.as_ref() };
        let mut guard = q.sq.lock();
        let sq = guard.as_mut().expect("mapped");
        // SAFETY: both work requests are valid, with a live window and MR.
        let posted = unsafe {
            (
                post_one_send(ibv::QPT_RC, sq, &wr2, BindVia::WorkRequest),
                post_one_send(ibv::QPT_RC, sq, &wr1, BindVia::Verb),
            )
        };
        let (w2, w1) = (posted.0.expect("type 2"), posted.1.expect("type 1"));
        assert_eq!((w2.rkey, w1.rkey), (0x4218, 0x4218));
        assert!(sq.publish());
        drop(guard);
        // Posting changes neither window: the caller of a bind work
        // request keeps its new rkey itself, and `bind_mw` stores its own.
        assert_eq!((mw1.rkey, mw2.rkey), (0x4217, 0x4217));
        let u32_at =
            |b: &[u8], off: usize| u32::from_ne_bytes(b[off..off + 4].try_into().expect("4"));
        let u64_at =
            |b: &[u8], off: usize| u64::from_ne_bytes(b[off..off + 8].try_into().expect("8"));
        for (slot, wr_id, swap) in [(0, 1, 2), (1, 2, roxe_uapi::BIND_TYPE1 | 6)] {
            let b = slot_bytes(&qp.sq, slot, 128, 72);
            assert_eq!(u64_at(&b, 0), wr_id);
            assert_eq!(u32_at(&b, 8), ibv::WR_BIND_MW, "opcode");
            assert_eq!(u32_at(&b, 12), ibv::SEND_SIGNALED, "send_flags");
            assert_eq!(u32_at(&b, 16), 0x905, "imm_data: the MR's lkey");
            assert_eq!((u32_at(&b, 20), u32_at(&b, 24)), (0, 0), "no data");
            assert_eq!(u32_at(&b, 28), 0x4218, "rkey");
            assert_eq!(u64_at(&b, 32), 0x7f00_0000_2000, "remote_addr");
            assert_eq!(u64_at(&b, 40), 64, "compare_add: the length");
            assert_eq!(u64_at(&b, 48), swap, "swap: rights and BIND_TYPE1");
        }
    }

    #[test]
    fn post_send_refuses_bad_binds_before_the_ring() {
        let qp = TestQp::new(ibv::QPT_UC, ibv::QPS_RTS);
        let (mut mw1, mut mw2, mut m) = (window(1), window(2), mr(0x905));
        let mut one = [ibv::Sge::default()];
        let mut cases = vec![
            // `ibv_post_send` binds type 2 windows only.
            bind_wr(1, &mut mw1, 0x4218, bind_info(&mut m, 64, 2)),
            // A NULL window.
            bind_wr(2, &mut mw2, 0x4218, bind_info(&mut m, 64, 2)),
            // No MR for 64 bytes.
            bind_wr(3, &mut mw2, 0x4218, bind_info(&mut m, 64, 2)),
            // A new rkey of another window.
            bind_wr(4, &mut mw2, 0x4318, bind_info(&mut m, 64, 2)),
            // SGEs, and immediate data.
            bind_wr(5, &mut mw2, 0x4218, bind_info(&mut m, 64, 2)),
            bind_wr(6, &mut mw2, 0x4218, bind_info(&mut m, 64, 2)),
        ];
        cases[1].extra.bind_mw.mw = ptr::null_mut();
        cases[2].extra.bind_mw.bind_info.mr = ptr::null_mut();
        cases[4].sg_list = one.as_mut_ptr();
        cases[4].num_sge = 1;
        cases[5].imm_data = 1;
        for wr in &mut cases {
            let mut bad = ptr::null_mut();
            // SAFETY: the QP is live; the work request is valid, its window
            // and MR NULL or live; it fails before the doorbell.
            let ret = unsafe { post_send(qp.ibv(), wr, &raw mut bad) };
            assert_eq!(
                (ret, bad),
                (Errno::EINVAL.get(), ptr::from_mut(wr)),
                "wr {}",
                wr.wr_id
            );
        }
        assert_eq!(qp.sq.producer(), 0);
        assert_eq!((mw1.rkey, mw2.rkey), (0x4217, 0x4217));
    }

    #[test]
    fn bind_mw_refuses_before_the_ring() {
        use crate::ffi::mw::bind_mw;
        let rc = TestQp::new(ibv::QPT_RC, ibv::QPS_RTS);
        let ud = TestQp::new(ibv::QPT_UD, ibv::QPS_RTS);
        let reset = TestQp::new(ibv::QPT_RC, ibv::QPS_RESET);
        let mut m = mr(0x905);
        let good = ibv::MwBind {
            wr_id: 9,
            send_flags: ibv::SEND_SIGNALED,
            bind_info: bind_info(&mut m, 64, ibv::ACCESS_REMOTE_WRITE),
        };
        let with_info = |f: fn(&mut ibv::MwBindInfo)| {
            let mut b = good;
            f(&mut b.bind_info);
            b
        };
        let cases = [
            ("a type 2 window", &rc, 2, good),
            (
                "a zero-based window",
                &rc,
                1,
                with_info(|i| i.mw_access_flags |= ibv::ACCESS_ZERO_BASED),
            ),
            (
                "a range without an MR",
                &rc,
                1,
                with_info(|i| i.mr = ptr::null_mut()),
            ),
            ("a UD QP", &ud, 1, good),
            ("a QP in RESET", &reset, 1, good),
        ];
        for (what, qp, t, mut b) in cases {
            let mut mw = window(t);
            // SAFETY: the QP, the window and the MR are live; every case
            // fails before the doorbell.
            let ret = unsafe { bind_mw(qp.ibv(), &raw mut mw, &raw mut b) };
            assert_eq!(ret, Errno::EINVAL.get(), "{what}");
            assert_eq!(mw.rkey, 0x4217, "{what}: the rkey is kept");
        }
        let (mut mw, mut b) = (window(1), good);
        // SAFETY: the QP is live; NULL arguments are refused first.
        let (no_mw, no_bind) = unsafe {
            (
                bind_mw(rc.ibv(), ptr::null_mut(), &raw mut b),
                bind_mw(rc.ibv(), &raw mut mw, ptr::null_mut()),
            )
        };
        assert_eq!((no_mw, no_bind), (Errno::EINVAL.get(), Errno::EINVAL.get()));
        for qp in [&rc, &ud, &reset] {
            assert_eq!(qp.sq.producer(), 0);
        }
    }

    #[test]
    fn wr_ops_follow_the_send_ops_flags() {
        let plain = TestQp::new(ibv::QPT_RC, ibv::QPS_RTS);
        // SAFETY: `plain` is live; only this thread uses it.
        let comp_mask = |qp: &TestQp| unsafe { (*qp.qp.as_ref().vqp.get()).comp_mask };
        assert_eq!(comp_mask(&plain), 0, "ibv_qp_to_qp_ex gives NULL");
        assert!(plain.ops().wr_start.is_none());
        let ops = ibv::QP_EX_WITH_SEND | ibv::QP_EX_WITH_RDMA_WRITE | ibv::QP_EX_WITH_BIND_MW;
        let qp = TestQp::with_wr(ibv::QPT_RC, ibv::QPS_RTS, ops);
        assert_eq!(comp_mask(&qp), verbs::QP_EX);
        let o = qp.ops();
        assert!(o.wr_start.is_some() && o.wr_complete.is_some() && o.wr_abort.is_some());
        assert!(o.wr_set_sge.is_some() && o.wr_set_sge_list.is_some());
        assert!(o.wr_set_inline_data.is_some() && o.wr_set_inline_data_list.is_some());
        assert!(o.wr_set_ud_addr.is_some());
        assert!(o.wr_send.is_some() && o.wr_rdma_write.is_some() && o.wr_bind_mw.is_some());
        assert!(o.wr_send_imm.is_none() && o.wr_rdma_read.is_none());
        assert!(o.wr_atomic_cmp_swp.is_none() && o.wr_local_inv.is_none());
        assert!(o.wr_send_tso.is_none() && o.wr_set_xrc_srqn.is_none());
        assert!(o.wr_atomic_write.is_none());
        // Every builder of RC.
        let all = TestQp::with_wr(ibv::QPT_RC, ibv::QPS_RTS, crate::qp::RC_SEND_OPS);
        let o = all.ops();
        assert!(
            o.wr_send_imm.is_some()
                && o.wr_send_inv.is_some()
                && o.wr_rdma_write_imm.is_some()
                && o.wr_rdma_read.is_some()
                && o.wr_atomic_cmp_swp.is_some()
                && o.wr_atomic_fetch_add.is_some()
                && o.wr_local_inv.is_some()
                && o.wr_atomic_write.is_some()
        );
    }

    #[test]
    fn wr_builders_fill_the_slots() {
        let ops = ibv::QP_EX_WITH_RDMA_WRITE | ibv::QP_EX_WITH_SEND | ibv::QP_EX_WITH_LOCAL_INV;
        let qp = TestQp::with_wr(ibv::QPT_RC, ibv::QPS_RTS, ops);
        let (o, ex) = (qp.ops(), qp.ex());
        let data = *b"inline bytes";
        // SAFETY: the QP is live and offers these ops; the batch is opened
        // and ended on this thread; the inline data is readable. It is
        // aborted: completing it would ring a doorbell, which needs a kernel.
        unsafe {
            (o.wr_start.expect("set"))(ex);
            qp.set_wr(0x42, ibv::SEND_SIGNALED);
            (o.wr_rdma_write.expect("set"))(ex, 0x77, 0xfeed_0000);
            (o.wr_set_sge.expect("set"))(ex, 0x905, 0x1000, 64);
            qp.set_wr(0x43, 0);
            (o.wr_send.expect("set"))(ex);
            (o.wr_set_inline_data.expect("set"))(ex, data.as_ptr().cast_mut().cast(), data.len());
            // Starting the third writes the second into the ring.
            (o.wr_local_inv.expect("set"))(ex, 0x1234);
        }
        let u32_at =
            |b: &[u8], off: usize| u32::from_ne_bytes(b[off..off + 4].try_into().expect("4"));
        let u64_at =
            |b: &[u8], off: usize| u64::from_ne_bytes(b[off..off + 8].try_into().expect("8"));
        let w = slot_bytes(&qp.sq, 0, 128, 88);
        assert_eq!(
            (u64_at(&w, 0), u32_at(&w, 8), u32_at(&w, 12)),
            (0x42, ibv::WR_RDMA_WRITE, 2)
        );
        assert_eq!(
            (u32_at(&w, 20), u32_at(&w, 28), u64_at(&w, 32)),
            (1, 0x77, 0xfeed_0000)
        );
        assert_eq!(
            (u64_at(&w, 72), u32_at(&w, 80), u32_at(&w, 84)),
            (0x1000, 64, 0x905)
        );
        let w = slot_bytes(&qp.sq, 1, 128, 72 + data.len());
        assert_eq!((u64_at(&w, 0), u32_at(&w, 8)), (0x43, ibv::WR_SEND));
        assert_eq!(
            (u32_at(&w, 12), u32_at(&w, 24)),
            (ibv::SEND_INLINE, 12),
            "flags, inline_len"
        );
        assert_eq!(w[72..], data);
        assert!(!qp.sq_unlocked(), "the batch holds the send lock");
        // SAFETY: as above.
        unsafe { (o.wr_abort.expect("set"))(ex) };
        assert!(qp.sq_unlocked());
        assert_eq!(qp.sq.producer(), 0, "nothing was published");
    }

    /// Runs a batch that `wr_complete` must refuse before the doorbell,
    /// and returns what it returned.
    fn refused_batch(qp: &TestQp, body: impl FnOnce(&ibv::QpEx, *mut ibv::QpEx)) -> c_int {
        let (o, ex) = (qp.ops(), qp.ex());
        // SAFETY: the QP is live and offers the ops the body calls; the
        // batch is opened and ended on this thread.
        let ret = unsafe {
            (o.wr_start.expect("set"))(ex);
            body(o, ex);
            (o.wr_complete.expect("set"))(ex)
        };
        assert!(qp.sq_unlocked(), "wr_complete released the lock");
        assert_eq!(qp.sq.producer(), 0, "nothing was published");
        ret
    }

    #[test]
    fn wr_complete_refuses_failed_batches() {
        let einval = Errno::EINVAL.get();
        let ops = ibv::QP_EX_WITH_SEND | ibv::QP_EX_WITH_BIND_MW;
        let rc = TestQp::with_wr(ibv::QPT_RC, ibv::QPS_RTS, ops);
        let two = [ibv::Sge::default(); 2];
        let big = [0u8; 57];
        // The ops of every batch below are called inside the batch, with
        // readable arguments, or NULL where the op allows it.
        // SAFETY: see above.
        let ret = refused_batch(&rc, |o, ex| unsafe {
            (o.wr_send.expect("set"))(ex);
            (o.wr_set_sge_list.expect("set"))(ex, 2, two.as_ptr());
        });
        assert_eq!(ret, einval, "two SGEs, one granted");
        // SAFETY: see above.
        let ret = refused_batch(&rc, |o, ex| unsafe {
            (o.wr_send.expect("set"))(ex);
            (o.wr_set_sge_list.expect("set"))(ex, 1, ptr::null());
        });
        assert_eq!(ret, einval, "a NULL SGE list");
        // SAFETY: see above.
        let ret = refused_batch(&rc, |o, ex| unsafe {
            (o.wr_send.expect("set"))(ex);
            (o.wr_set_inline_data.expect("set"))(ex, big.as_ptr().cast_mut().cast(), 57);
        });
        assert_eq!(ret, einval, "57 inline bytes, 56 granted");
        // SAFETY: see above.
        let ret = refused_batch(&rc, |o, ex| unsafe {
            (o.wr_set_sge.expect("set"))(ex, 1, 0x1000, 8);
            (o.wr_send.expect("set"))(ex);
        });
        assert_eq!(ret, einval, "a setter before any builder");
        // SAFETY: see above.
        let ret = refused_batch(&rc, |o, ex| unsafe {
            (o.wr_send.expect("set"))(ex);
            (o.wr_set_ud_addr.expect("set"))(ex, ptr::null_mut(), 1, 2);
        });
        assert_eq!(ret, einval, "a UD destination on RC");
        // Binds: a type 1 window, no bind info, no window.
        let (mut mw1, mut mw2, mut m) = (window(1), window(2), mr(0x905));
        let info = bind_info(&mut m, 64, ibv::ACCESS_REMOTE_WRITE);
        for (what, mw, info) in [
            ("a type 1 window", &raw mut mw1, &raw const info),
            ("no bind info", &raw mut mw2, ptr::null()),
            ("no window", ptr::null_mut(), &raw const info),
        ] {
            // SAFETY: the window and the info are live or NULL.
            let ret = refused_batch(&rc, |o, ex| unsafe {
                (o.wr_bind_mw.expect("set"))(ex, mw, 0x4218, info);
            });
            assert_eq!(ret, einval, "{what}");
        }
        // A UD QP: a NULL AH, and no destination at all.
        let ud = TestQp::with_wr(ibv::QPT_UD, ibv::QPS_RTS, ibv::QP_EX_WITH_SEND);
        // SAFETY: as above.
        let ret = refused_batch(&ud, |o, ex| unsafe {
            (o.wr_send.expect("set"))(ex);
            (o.wr_set_ud_addr.expect("set"))(ex, ptr::null_mut(), 1, 2);
        });
        assert_eq!(ret, einval);
        // SAFETY: as above.
        let ret = refused_batch(&ud, |o, ex| unsafe { (o.wr_send.expect("set"))(ex) });
        assert_eq!(ret, einval);
        // A full ring: 4 slots.
        // SAFETY: as above.
        let ret = refused_batch(&rc, |o, ex| unsafe {
            for _ in 0..5 {
                (o.wr_send.expect("set"))(ex);
            }
        });
        assert_eq!(ret, Errno::ENOMEM.get());
    }

    #[test]
    fn wr_complete_before_rts_posts_nothing() {
        for state in [ibv::QPS_RESET, ibv::QPS_INIT, ibv::QPS_RTR] {
            let qp = TestQp::with_wr(ibv::QPT_UD, state, ibv::QP_EX_WITH_SEND);
            // SAFETY: a well-formed batch; only the state is wrong.
            let ret = refused_batch(&qp, |o, ex| unsafe {
                (o.wr_send.expect("set"))(ex);
                (o.wr_set_sge.expect("set"))(ex, 1, 0x1000, 8);
            });
            assert_eq!(ret, Errno::EINVAL.get(), "state {state}");
        }
    }

    #[test]
    fn wr_ops_outside_a_batch_do_nothing() {
        let qp = TestQp::with_wr(ibv::QPT_RC, ibv::QPS_RTS, ibv::QP_EX_WITH_SEND);
        let (o, ex) = (qp.ops(), qp.ex());
        // SAFETY: the QP is live; no batch is open, and no other thread
        // holds the send lock, so each op finds it free.
        let ret = unsafe {
            (o.wr_send.expect("set"))(ex);
            (o.wr_set_sge.expect("set"))(ex, 1, 0x1000, 8);
            (o.wr_abort.expect("set"))(ex);
            (o.wr_complete.expect("set"))(ex)
        };
        assert_eq!(ret, Errno::EINVAL.get());
        assert!(qp.sq_unlocked());
        assert_eq!(qp.sq.producer(), 0);
        // A batch still works afterwards, and `post_send` waits for none.
        assert_eq!(refused_batch(&qp, |_, _| ()), 0, "an empty batch");
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

/// `verbs_context_ops.attach_mcast`: attaches a UD QP to a multicast group
/// through the kernel. Returns 0 or a positive errno, which
/// `ibv_attach_mcast` returns unchanged.
///
/// # Safety
///
/// `qp` is a live roxe QP and `gid` a readable `ibv_gid`.
pub(super) unsafe extern "C" fn attach_mcast(
    qp: *mut ibv::Qp,
    gid: *const ibv::Gid,
    lid: u16,
) -> c_int {
    // SAFETY: per the contract.
    errno_ret(cmd_result(unsafe {
        super::ibv_cmd_attach_mcast(qp, gid, lid)
    }))
}

/// `verbs_context_ops.detach_mcast`: the reverse of [`attach_mcast`].
///
/// # Safety
///
/// As for [`attach_mcast`].
pub(super) unsafe extern "C" fn detach_mcast(
    qp: *mut ibv::Qp,
    gid: *const ibv::Gid,
    lid: u16,
) -> c_int {
    // SAFETY: per the contract.
    errno_ret(cmd_result(unsafe {
        super::ibv_cmd_detach_mcast(qp, gid, lid)
    }))
}
