// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Queue pairs: creation with mapped send and receive rings, modify, query
//! and destroy through the kernel, and posting work requests into the
//! rings.
//!
//! This file holds the QP object and its life cycle. Receives never enter
//! the kernel: `post_recv` writes the WQEs and publishes them with the
//! producer index. Sends do the same, then ring the doorbell: an empty
//! `ibv_cmd_post_send` (no work requests), which makes the kernel look at
//! the send ring ([`post`]). QPs created with
//! `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS` also offer the `ibv_wr_*` interface
//! (`wr_start`, the builders and setters, `wr_complete`), which fills the
//! same ring ([`ex`]). The checks and the WQE layout are in the safe
//! modules `qp` and `wq`.
//!
//! XRC send QPs are such QPs with a send ring only. XRC receive QPs, made
//! by `create_qp_ex` or opened by [`open_qp`], have no rings: the kernel
//! creates them without driver data, and the posting ops refuse them.
//!
//! Raw packet QPs are made like UD QPs, with the same command and driver
//! response and both rings, but never with an SRQ; they send whole
//! Ethernet frames (`IBV_WR_SEND` only). Flow steering rules, which
//! deliver frames to them, are in the `flow` module. A raw packet QP
//! created over a receive WQ indirection table is an RSS QP ([`rss`]):
//! no rings, no CQs, receives only into the WQs of its table.

mod ex;
mod post;
mod rss;
#[cfg(test)]
mod tests;

use core::cell::UnsafeCell;
use core::ffi::c_int;
use core::mem::{offset_of, size_of, size_of_val};
use core::ptr::{self, NonNull};
use core::sync::atomic::{AtomicU32, Ordering};

use super::lock::SpinLock;
use super::mapping::WqMapping;
use super::{
    cmd_result, drop_box, errno_ret, ibv_cmd_create_qp_ex, ibv_cmd_destroy_qp, ibv_cmd_modify_qp,
    ibv_cmd_open_qp, ibv_cmd_query_qp, set_errno, try_box,
};
use crate::abi::{driver, ibv, uverbs, verbs};
use crate::errno::Errno;
use crate::qp::{
    Dest, KernelCqs, RECV_WQE_HEADER, RSS_INIT_ATTR_MASK, RecvQueue, SEND_WQE_HEADER, SendQueue,
    check_init_attr, check_open_attr, check_ring_presence, check_srq_use, kernel_cqs, rings,
};
use crate::wq::{self, Producer};
use ex::install_wr_ops;
pub(super) use post::{post_recv, post_recv_to, post_send, post_single};

/// A roxe QP: libibverbs' `verbs_qp`, then the rings and their state.
///
/// [`create_qp`], [`create_qp_ex`] and [`open_qp`] allocate it with
/// `try_box`, [`destroy_qp`] frees it.
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
    /// The CQs the kernel took for the QP, fixed at creation: the only
    /// ones of `ibv_qp.send_cq` and `ibv_qp.recv_cq` that are sure to be
    /// live roxe CQs while the QP is.
    cqs: KernelCqs,
    /// The send queue; `None` until creation has mapped it, and for ever
    /// on an XRC receive QP.
    sq: SpinLock<Option<SendQueue<WqMapping>>>,
    /// The receive queue; `None` until creation has mapped it, and for
    /// ever on a QP with an SRQ and on XRC QPs.
    rq: SpinLock<Option<RecvQueue<WqMapping>>>,
}

impl Qp {
    /// A QP before the kernel knows it: zeroed `verbs_qp` (what libibverbs
    /// expects from `calloc`), no rings, and the CQs a QP of `qp_type`
    /// gives the kernel.
    fn new(qp_type: u32) -> Self {
        Self {
            vqp: UnsafeCell::new(verbs::Qp::ZERO),
            state: AtomicU32::new(ibv::QPS_RESET),
            qp_type,
            cqs: kernel_cqs(qp_type),
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
/// ring, and the receive ring if the QP has one (`has_rq`: no SRQ, not
/// XRC). `cap` holds the limits the kernel granted.
fn map_queues(
    fd: c_int,
    resp: &roxe_uapi::CreateQpResp,
    cap: &ibv::QpCap,
    has_rq: bool,
) -> Result<(SendQueue<WqMapping>, Option<RecvQueue<WqMapping>>), Errno> {
    // Both descriptions are checked before anything is mapped.
    let sq = wq::Geometry::new(&resp.sq, SEND_WQE_HEADER)?;
    check_ring_presence(&resp.rq, has_rq)?;
    let rq = match has_rq {
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

/// Moves `qp` to the heap and runs `command`, the kernel command that
/// creates or opens it, on its `verbs_qp` (zeroed, at its final address,
/// which is the QP's user handle in the kernel). `command` returns 0 or a
/// positive errno, as the `ibv_cmd_*` calls do.
///
/// Returns the QP, which nothing else knows yet; if the command fails,
/// frees it and returns the command's errno. Fails with `ENOMEM` if the
/// QP cannot be allocated.
fn new_kernel_qp(
    qp: Qp,
    command: impl FnOnce(*mut verbs::Qp) -> c_int,
) -> Result<NonNull<Qp>, Errno> {
    let qp = try_box(qp).ok_or(Errno::ENOMEM)?;
    // SAFETY: `qp` is live and only this thread knows it.
    let vqp = unsafe { qp.as_ref() }.vqp.get();
    if let Err(err) = cmd_result(command(vqp)) {
        // SAFETY: `qp` came from `try_box`, and without a kernel QP nothing
        // refers to it.
        unsafe { drop_box(qp) };
        return Err(err);
    }
    Ok(qp)
}

/// Undoes [`new_kernel_qp`] after the kernel created the QP but the
/// provider cannot complete it: destroys the kernel QP, then frees `qp`.
///
/// If the destroy fails too, the error that led here is still the one to
/// report; the kernel frees the QP with the context at the latest.
///
/// # Safety
///
/// `qp` came from a successful `new_kernel_qp` and was never published.
unsafe fn destroy_unpublished(qp: NonNull<Qp>) {
    // SAFETY: the kernel QP exists and nothing else knows it.
    unsafe { ibv_cmd_destroy_qp(qp.as_ref().ibv()) };
    // SAFETY: `qp` is unpublished, and the kernel QP is gone.
    unsafe { drop_box(qp) };
}

/// Creates a QP for both create ops; an RSS QP is made by [`rss::create`].
///
/// On success `attr.cap` holds what the kernel granted.
///
/// # Safety
///
/// `context` is an open roxe context; the pointers in `attr` are NULL or
/// objects of that context (`ibv_cmd_create_qp_ex` reads them), its PD is
/// a live roxe PD, its XRC domain NULL or a live roxe XRC domain, and its
/// indirection table and hash key as [`rss::create`] requires.
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
    check_srq_use(attr.qp_type, !attr.srq.is_null())?;
    // `ibv_cmd_create_qp_ex` finds the domain's handle through the
    // pointer without looking at it first.
    if attr.comp_mask & ibv::QP_INIT_ATTR_XRCD != 0 && attr.xrcd.is_null() {
        return Err(Errno::EINVAL);
    }
    if attr.comp_mask & RSS_INIT_ATTR_MASK != 0 {
        // SAFETY: per the contract.
        return unsafe { rss::create(context, attr) };
    }
    let wr_api = attr.comp_mask & ibv::QP_INIT_ATTR_SEND_OPS_FLAGS != 0;
    let has = rings(attr.qp_type, !attr.srq.is_null());
    // `ibv_cmd_create_qp_ex` refuses the creation-flags bit; the flags are
    // all zero here (checked above), so the bit means nothing. The send
    // ops are the provider's business alone.
    let mut kattr = ibv::QpInitAttrEx {
        comp_mask: attr.comp_mask & (ibv::QP_INIT_ATTR_PD | ibv::QP_INIT_ATTR_XRCD),
        ..*attr
    };
    let mut cmd = ibv::CreateQp::default();
    let mut resp = driver::CreateQpResp::default();
    // The kernel gives a QP without rings (an XRC receive QP) no driver
    // data, so nothing past the core response is asked for.
    let resp_size = match has.send {
        true => size_of_val(&resp),
        false => size_of_val(&resp.ibv_resp),
    };
    let qp = new_kernel_qp(Qp::new(attr.qp_type), |vqp| {
        // SAFETY: `context` and the objects `kattr` names are valid per the
        // contract; `vqp` is as `new_kernel_qp` describes; `cmd` is
        // writable for its core size (no driver input); `resp` is writable
        // for its full size, at least `resp_size`, and the driver part
        // follows `ibv_resp` directly.
        unsafe {
            ibv_cmd_create_qp_ex(
                context,
                vqp,
                &raw mut kattr,
                &raw mut cmd,
                size_of_val(&cmd),
                &raw mut resp.ibv_resp,
                resp_size,
            )
        }
    })?;
    // SAFETY: `qp` is live and only this thread knows it.
    let qp_ref = unsafe { qp.as_ref() };
    attr.cap = kattr.cap;
    if !has.send {
        // Nothing to map: the posting ops find no queue and refuse.
        return Ok(qp_ref.ibv());
    }
    // SAFETY: `context` is open per the contract.
    let fd = unsafe { (*context).cmd_fd };
    let queues = map_queues(fd, &resp.drv, &kattr.cap, has.recv).and_then(|(mut sq, rq)| {
        if wr_api {
            sq.enable_wr(Dest::of(attr.qp_type))?;
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
            // SAFETY: the create command succeeded, and `qp` was never
            // published.
            unsafe { destroy_unpublished(qp) };
            Err(err)
        }
    }
}

/// `verbs_context_ops.create_qp`. libibverbs' `ibv_create_qp_ex` calls it
/// too when `comp_mask` is only `IBV_QP_INIT_ATTR_PD`, which is how XRC
/// send QPs are usually created.
///
/// Returns NULL with `errno` set on failure: `EOPNOTSUPP` for QP types
/// other than RC, UC, UD, raw packet and XRC send, `EINVAL` for an XRC
/// receive QP (which needs `create_qp_ex` and an XRC domain) and for a raw
/// packet QP with an SRQ, `EPROTO` if the kernel's ring description is
/// invalid, or the kernel's or `mmap`'s errno (`EPERM` for a raw packet QP
/// without `CAP_NET_RAW`). On success `attr->cap` holds what the kernel
/// granted.
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
/// An XRC receive QP (`IBV_QPT_XRC_RECV`, with `IBV_QP_INIT_ATTR_XRCD`
/// and its domain) gets no rings; an XRC send QP a send ring only.
///
/// With `IBV_QP_INIT_ATTR_IND_TABLE` and `IBV_QP_INIT_ATTR_RX_HASH` a raw
/// packet QP is an RSS QP ([`rss::create`]).
///
/// Returns NULL with `errno` set on failure: `EOPNOTSUPP` for TSO, RSS on
/// a QP other than a raw packet QP, any creation flag and send ops the QP
/// type does not offer ([`check_init_attr`]), `EINVAL` without a PD (or,
/// for an XRC receive QP, without an XRC domain) and for a raw packet QP
/// with an SRQ, as [`rss::create`] for an RSS QP, and otherwise as
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
        // Only the CQs the kernel took are cleaned: the CQ pointers
        // libibverbs keeps are whatever the caller passed, and an XRC
        // receive QP (no CQs of its own), an XRC send QP (no receive CQ)
        // and an RSS QP (none) never sent some of them, so those may be
        // freed or foreign.
        if state == ibv::QPS_RESET {
            let cqs = qp.cqs;
            // SAFETY: `ibqp` is live; only the pointers are read.
            let (send_cq, recv_cq, qpn) =
                unsafe { ((*ibqp).send_cq, (*ibqp).recv_cq, (*ibqp).qp_num) };
            let scq = if cqs.send { send_cq } else { ptr::null_mut() };
            let rcq = if cqs.recv { recv_cq } else { ptr::null_mut() };
            // SAFETY: the CQs the kernel took for the QP are NULL or live
            // roxe CQs that outlive it; the others are now NULL.
            unsafe {
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
        // SAFETY: every roxe QP comes from `try_box` in `new_kernel_qp`;
        // the kernel QP is gone and nothing uses it.
        unsafe { drop_box(qp) };
    }
    0
}

/// `verbs_context_ops.open_qp`: opens the XRC receive QP `attr->qp_num` of
/// the XRC domain `attr->xrcd` (`ibv_open_qp`), which another process (or
/// this one) created. The result is a QP handle like the one
/// `create_qp_ex` gives for an XRC receive QP: no rings, modify, query and
/// destroy through the kernel (destroying it closes this handle only).
///
/// Returns NULL with `errno` set on failure: `EINVAL` without the QP
/// number, domain or type, or for a type other than XRC receive;
/// `EOPNOTSUPP` for unknown `comp_mask` bits; or the kernel's errno.
///
/// # Safety
///
/// `context` is an open roxe context; `attr` is NULL or points to a
/// readable `ibv_qp_open_attr` whose `xrcd` is NULL or a live roxe XRC
/// domain of `context`.
pub(super) unsafe extern "C" fn open_qp(
    context: *mut ibv::Context,
    attr: *mut ibv::QpOpenAttr,
) -> *mut ibv::Qp {
    // SAFETY: NULL or valid per the contract.
    let Some(a) = (unsafe { attr.as_mut() }) else {
        set_errno(Errno::EINVAL);
        return ptr::null_mut();
    };
    if let Err(err) = check_open_attr(a.comp_mask, a.qp_type) {
        set_errno(err);
        return ptr::null_mut();
    }
    // `ibv_cmd_open_qp` reads the domain's handle through the pointer.
    if a.xrcd.is_null() {
        set_errno(Errno::EINVAL);
        return ptr::null_mut();
    }
    let mut cmd = ibv::OpenQp::default();
    let mut resp = uverbs::CreateQpResp::default();
    // CAST: `verbs_qp` is a few hundred bytes.
    let vqp_size = size_of::<verbs::Qp>() as c_int;
    let opened = new_kernel_qp(Qp::new(a.qp_type), |vqp| {
        // SAFETY: `context` and the domain are live per the contract and
        // the check above; `vqp` is as `new_kernel_qp` describes, of
        // `vqp_size` bytes; `cmd` and `resp` are writable for exactly the
        // (core) sizes passed, so there is no driver data either way.
        unsafe {
            ibv_cmd_open_qp(
                context,
                vqp,
                vqp_size,
                a,
                &raw mut cmd,
                size_of_val(&cmd),
                &raw mut resp,
                size_of_val(&resp),
            )
        }
    });
    match opened {
        // SAFETY: the QP is live.
        Ok(qp) => unsafe { qp.as_ref() }.ibv(),
        Err(err) => {
            set_errno(err);
            ptr::null_mut()
        }
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
