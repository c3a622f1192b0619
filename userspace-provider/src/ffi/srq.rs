// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Shared receive queues: creation with a mapped ring, modify, query and
//! destroy through the kernel, and posting receives into the ring without
//! entering the kernel (as for a QP's own receive queue).
//!
//! Basic SRQs come from `create_srq` (or `create_srq_ex`), XRC SRQs from
//! `create_srq_ex`. Both get the same driver response and the same ring,
//! and post the same way; an XRC SRQ also belongs to an XRC domain, has a
//! CQ of its own, and is addressed by its number ([`get_srq_num`]), which
//! XRC send QPs put into their work requests.

use core::cell::UnsafeCell;
use core::ffi::c_int;
use core::mem::{offset_of, size_of_val};
use core::ptr::{self, NonNull};

use super::lock::SpinLock;
use super::mapping::{WqMapping, map_recv_queue};
use super::qp::post_recv_to;
use super::{
    cmd_result, drop_box, errno_ret, ibv_cmd_create_srq, ibv_cmd_create_srq_ex,
    ibv_cmd_destroy_srq, ibv_cmd_modify_srq, ibv_cmd_query_srq, set_errno, try_box,
};
use crate::abi::{driver, ibv, verbs};
use crate::errno::Errno;
use crate::qp::{RECV_WQE_HEADER, RecvQueue, check_srq_init_attr};
use crate::wq::{self, Producer};

/// A roxe SRQ: libibverbs' `verbs_srq`, then the ring.
///
/// [`create_srq`] and [`create_srq_ex`] allocate it with `try_box`,
/// [`destroy_srq`] frees it. Basic SRQs are whole `verbs_srq`s too:
/// libibverbs' inline `ibv_get_srq_num` hands [`get_srq_num`] any SRQ,
/// which reads `srq_num` there.
///
/// # Invariants
///
/// `vsrq.srq_num` holds the SRQ's number once creation has succeeded, and
/// does not change after that.
#[repr(C)]
pub(super) struct Srq {
    /// libibverbs' part. libibverbs writes `srq.events_completed` from any
    /// thread (under `srq->mutex`), so it is an `UnsafeCell`, and roxe
    /// touches it only through raw pointers.
    vsrq: UnsafeCell<verbs::Srq>,
    /// The ring; `None` until creation has mapped it.
    rq: SpinLock<Option<RecvQueue<WqMapping>>>,
}

impl Srq {
    /// An SRQ before the kernel knows it: `vsrq` (zeroed, as libibverbs
    /// expects from `calloc`, but for what the provider fills in), no ring.
    fn new(vsrq: verbs::Srq) -> Self {
        Self {
            vsrq: UnsafeCell::new(vsrq),
            rq: SpinLock::new(None),
        }
    }

    /// The `Srq` around an `ibv_srq`.
    ///
    /// # Safety
    ///
    /// `ibsrq` is the `ibv_srq` of a live `Srq` that stays live for `'a`.
    unsafe fn from_ibv<'a>(ibsrq: *mut ibv::Srq) -> &'a Self {
        let offset = offset_of!(Srq, vsrq) + offset_of!(verbs::Srq, srq);
        // SAFETY: `ibv_srq` is the `srq` field of the `vsrq` field of a live
        // `Srq` per the contract.
        unsafe { &*ibsrq.byte_sub(offset).cast::<Self>() }
    }

    /// This SRQ as libibverbs' `ibv_srq`.
    fn ibv(&self) -> *mut ibv::Srq {
        // SAFETY: a field projection within this live `Srq`; nothing is
        // read or written.
        unsafe { &raw mut (*self.vsrq.get()).srq }
    }
}

/// `verbs_context_ops.create_srq`.
///
/// Returns NULL with `errno` set on failure: `EPROTO` if the kernel's ring
/// description is invalid, or the kernel's or `mmap`'s errno. On success
/// `attr->attr` holds the granted `max_wr` and `max_sge`. libibverbs'
/// `ibv_create_srq` then fills in `context`, `srq_context` and `pd`.
///
/// # Safety
///
/// `pd` is a live roxe PD and `attr` is NULL or a readable and writable
/// `ibv_srq_init_attr`.
pub(super) unsafe extern "C" fn create_srq(
    pd: *mut ibv::Pd,
    attr: *mut ibv::SrqInitAttr,
) -> *mut ibv::Srq {
    if attr.is_null() {
        set_errno(Errno::EINVAL);
        return ptr::null_mut();
    }
    let Some(srq) = try_box(Srq::new(verbs::Srq::ZERO)) else {
        set_errno(Errno::ENOMEM);
        return ptr::null_mut();
    };
    // SAFETY: `srq` is live and only this thread knows it.
    let srq_ref = unsafe { srq.as_ref() };
    let ibsrq = srq_ref.ibv();
    let mut cmd = ibv::CreateSrq::default();
    let mut resp = driver::CreateSrqResp::default();
    // SAFETY: `pd` and `attr` are valid per the contract; `ibsrq` is a
    // zeroed `ibv_srq` at its final address (the kernel's user handle);
    // `cmd` is writable for its core size (no driver input); `resp` is
    // writable for its full size, with the driver part right after
    // `ibv_resp`.
    let ret = unsafe {
        ibv_cmd_create_srq(
            pd,
            ibsrq,
            attr,
            &raw mut cmd,
            size_of_val(&cmd),
            &raw mut resp.ibv_resp,
            size_of_val(&resp),
        )
    };
    if let Err(err) = cmd_result(ret) {
        // SAFETY: `srq` came from `try_box` and was never published.
        unsafe { drop_box(srq) };
        set_errno(err);
        return ptr::null_mut();
    }
    // INVARIANT: libibverbs records no number for a basic SRQ; the
    // driver's is its number.
    // SAFETY: `srq` is live and unpublished.
    unsafe { (*srq_ref.vsrq.get()).srq_num = resp.drv.srq_num };
    // SAFETY: the command succeeded; `attr` holds the granted limits.
    unsafe { map_created(srq, &resp.drv, (*attr).attr.max_sge) }
}

/// Maps the ring of an SRQ the kernel has just created, and returns the
/// SRQ; or, if that fails, destroys the kernel SRQ again, frees `srq` and
/// returns NULL with `errno` set.
///
/// # Safety
///
/// `srq` came from `try_box`, is unpublished, and the create command for
/// it succeeded (so `ibv_srq.context` is its open context). `max_sge` is
/// what the kernel granted.
unsafe fn map_created(
    srq: NonNull<Srq>,
    resp: &roxe_uapi::CreateSrqResp,
    max_sge: u32,
) -> *mut ibv::Srq {
    // SAFETY: `srq` is live per the contract.
    let srq_ref = unsafe { srq.as_ref() };
    let ibsrq = srq_ref.ibv();
    // SAFETY: the command succeeded, so `ibsrq->context` is open.
    let fd = unsafe { (*(*ibsrq).context).cmd_fd };
    match map_recv_queue(fd, &resp.rq, max_sge) {
        Ok(rq) => {
            *srq_ref.rq.lock() = Some(rq);
            ibsrq
        }
        Err(err) => {
            // SAFETY: the kernel SRQ exists and nothing else knows it; as
            // for QPs, a failure here leaves it to the context's cleanup.
            unsafe { ibv_cmd_destroy_srq(ibsrq) };
            // SAFETY: `srq` is unpublished, and the kernel SRQ is gone.
            unsafe { drop_box(srq) };
            set_errno(err);
            ptr::null_mut()
        }
    }
}

/// `verbs_context_ops.create_srq_ex`: a basic or an XRC SRQ
/// (`ibv_create_srq_ex`; libibverbs turns the simplest basic ones into
/// `ibv_create_srq` itself).
///
/// An XRC SRQ (`IBV_SRQT_XRC` with a PD, an XRC domain and a CQ) gets the
/// same kind of ring as a basic one, and `ibv_cmd_create_srq_ex` records
/// its domain, CQ and number in the `verbs_srq`. Unlike `ibv_create_srq`,
/// libibverbs fills in neither `srq_context` nor `pd` afterwards, so this
/// does.
///
/// Returns NULL with `errno` set on failure: `EOPNOTSUPP` for tag matching
/// SRQs and unknown `comp_mask` bits, `EINVAL` for an unknown type or a
/// missing PD (or, for XRC, domain or CQ) ([`check_srq_init_attr`]), and
/// otherwise as [`create_srq`]. On success `attr->attr` holds the granted
/// `max_wr` and `max_sge`.
///
/// # Safety
///
/// `context` is an open roxe context; `attr` is NULL or a readable and
/// writable `ibv_srq_init_attr_ex` whose PD, XRC domain and CQ are NULL or
/// live roxe objects of `context`.
pub(super) unsafe extern "C" fn create_srq_ex(
    context: *mut ibv::Context,
    attr: *mut ibv::SrqInitAttrEx,
) -> *mut ibv::Srq {
    // SAFETY: NULL or valid per the contract.
    let Some(a) = (unsafe { attr.as_mut() }) else {
        set_errno(Errno::EINVAL);
        return ptr::null_mut();
    };
    let srq_type = match check_srq_init_attr(a.comp_mask, a.srq_type) {
        Ok(t) => t,
        Err(err) => {
            set_errno(err);
            return ptr::null_mut();
        }
    };
    // `ibv_cmd_create_srq_ex` reads the handles through these pointers
    // without looking at them first.
    let xrc = srq_type == ibv::SRQT_XRC;
    if a.pd.is_null() || xrc && (a.xrcd.is_null() || a.cq.is_null()) {
        set_errno(Errno::EINVAL);
        return ptr::null_mut();
    }
    let mut cmd_attr = command_attr(a, srq_type);
    let vsrq = verbs::Srq {
        srq: ibv::Srq {
            srq_context: a.srq_context,
            pd: a.pd,
            ..ibv::Srq::ZERO
        },
        ..verbs::Srq::ZERO
    };
    let Some(srq) = try_box(Srq::new(vsrq)) else {
        set_errno(Errno::ENOMEM);
        return ptr::null_mut();
    };
    // SAFETY: `srq` is live and only this thread knows it.
    let srq_ref = unsafe { srq.as_ref() };
    let mut cmd = ibv::CreateXsrq::default();
    let mut resp = driver::CreateSrqResp::default();
    // SAFETY: `context` and the objects `cmd_attr` names (the caller's) are
    // valid per the contract and the checks above; `vsrq` is a `verbs_srq`
    // at its final address (the kernel's user handle); `cmd` is writable
    // for its core size (no driver input); `resp` is writable for its full
    // size, with the driver part right after `ibv_resp`, as for
    // `create_srq`.
    let ret = unsafe {
        ibv_cmd_create_srq_ex(
            context,
            srq_ref.vsrq.get(),
            &raw mut cmd_attr,
            &raw mut cmd,
            size_of_val(&cmd),
            &raw mut resp.ibv_resp,
            size_of_val(&resp),
        )
    };
    if let Err(err) = cmd_result(ret) {
        // SAFETY: `srq` came from `try_box` and was never published.
        unsafe { drop_box(srq) };
        set_errno(err);
        return ptr::null_mut();
    }
    // What the command wrote back: the granted limits.
    a.attr.max_wr = cmd_attr.attr.max_wr;
    a.attr.max_sge = cmd_attr.attr.max_sge;
    if !xrc {
        // INVARIANT: as in `create_srq`. For an XRC SRQ,
        // `ibv_cmd_create_srq_ex` has stored the kernel's number.
        // SAFETY: `srq` is live and unpublished.
        unsafe { (*srq_ref.vsrq.get()).srq_num = resp.drv.srq_num };
    }
    // SAFETY: the command succeeded; `cmd_attr` holds the granted limits.
    unsafe { map_created(srq, &resp.drv, cmd_attr.attr.max_sge) }
}

/// The attributes `create_srq_ex` hands `ibv_cmd_create_srq_ex`: the
/// caller's `a`, with `srq_type` the type [`check_srq_init_attr`] found and
/// `comp_mask` naming exactly what an SRQ of that type uses (the type, the
/// PD, and for XRC the domain and the CQ).
///
/// Without `IBV_SRQ_INIT_ATTR_TYPE` the SRQ is basic, but the caller's
/// `srq_type` may hold anything. The ioctl path of `ibv_cmd_create_srq_ex`
/// looks at `comp_mask` first; its write fallback (a kernel without the SRQ
/// ioctl) tests `srq_type` alone, and for anything but basic would send the
/// XRC domain and CQ, which need not exist. A basic SRQ's domain and CQ,
/// which libibverbs would otherwise record in the `verbs_srq`, are NULL.
fn command_attr(a: &ibv::SrqInitAttrEx, srq_type: u32) -> ibv::SrqInitAttrEx {
    let xrc = srq_type == ibv::SRQT_XRC;
    let mut comp_mask = ibv::SRQ_INIT_ATTR_TYPE | ibv::SRQ_INIT_ATTR_PD;
    if xrc {
        comp_mask |= ibv::SRQ_INIT_ATTR_XRCD | ibv::SRQ_INIT_ATTR_CQ;
    }
    ibv::SrqInitAttrEx {
        srq_context: a.srq_context,
        attr: a.attr,
        comp_mask,
        srq_type,
        pd: a.pd,
        xrcd: if xrc { a.xrcd } else { ptr::null_mut() },
        cq: if xrc { a.cq } else { ptr::null_mut() },
        tm_cap: ibv::TmCap::default(),
    }
}

/// `verbs_context_ops.get_srq_num`: the SRQ's number (`ibv_get_srq_num`),
/// which XRC send QPs name to reach an XRC SRQ. Every roxe SRQ has one,
/// basic SRQs too (as with mlx5). Returns 0, or `EINVAL` if `srq_num` is
/// NULL.
///
/// # Safety
///
/// `ibsrq` is a live roxe SRQ and `srq_num` NULL or writable.
pub(super) unsafe extern "C" fn get_srq_num(ibsrq: *mut ibv::Srq, srq_num: *mut u32) -> c_int {
    // SAFETY: NULL or writable per the contract.
    let Some(out) = (unsafe { srq_num.as_mut() }) else {
        return Errno::EINVAL.get();
    };
    // SAFETY: `ibsrq` is a live roxe SRQ per the contract.
    let srq = unsafe { Srq::from_ibv(ibsrq) };
    // SAFETY: `srq_num` does not change after creation (the invariant), and
    // libibverbs writes only other fields; the read goes through a raw
    // pointer, so it makes no reference to those.
    *out = unsafe { (*srq.vsrq.get()).srq_num };
    0
}

/// `ibv_srq_attr_mask`'s `IBV_SRQ_MAX_WR`: resize.
const IBV_SRQ_MAX_WR: c_int = 1;

/// `verbs_context_ops.modify_srq`: arms the limit and/or resizes. Returns 0
/// or a positive errno, which `ibv_modify_srq` returns unchanged.
///
/// A resize holds the SRQ lock throughout, so nothing is posted while the
/// kernel moves the outstanding WQEs into a new ring. The kernel writes the
/// new ring's description into `info` (`roxe_uapi::ModifySrqCmd`) and
/// leaves its producer index in the ring header; posting continues from
/// there. If the kernel refuses, the old ring stays in use. If it resized
/// but the new ring cannot be mapped, the SRQ is left without a ring and
/// posts fail with `EINVAL`.
///
/// # Safety
///
/// `ibsrq` is a live roxe SRQ and `attr` a readable `ibv_srq_attr`.
pub(super) unsafe extern "C" fn modify_srq(
    ibsrq: *mut ibv::Srq,
    attr: *mut ibv::SrqAttr,
    attr_mask: c_int,
) -> c_int {
    // SAFETY: `ibsrq` is a live roxe SRQ per the contract.
    let srq = unsafe { Srq::from_ibv(ibsrq) };
    let mut guard = srq.rq.lock();
    let mut info = roxe_uapi::RingInfo::default();
    let mut cmd = driver::ModifySrq::default();
    let resize = attr_mask & IBV_SRQ_MAX_WR != 0;
    if resize {
        cmd.drv.ring_info_addr = (&raw mut info) as u64;
    }
    // SAFETY: per the contract; `cmd` is writable for its full size, the
    // core command first and roxe's input right after it; `info` outlives
    // the call.
    let ret = unsafe {
        ibv_cmd_modify_srq(
            ibsrq,
            attr,
            attr_mask,
            &raw mut cmd.ibv_cmd,
            size_of_val(&cmd),
        )
    };
    if let Err(err) = cmd_result(ret) {
        return err.get();
    }
    if !resize {
        return 0;
    }
    let Some(max_sge) = guard.as_ref().map(RecvQueue::max_sge) else {
        return Errno::EINVAL.get();
    };
    // SAFETY: the SRQ was created, so its context is open.
    let fd = unsafe { (*(*srq.ibv()).context).cmd_fd };
    // The old ring is unmapped when it is replaced.
    match remap_queue(fd, &info, max_sge) {
        Ok(rq) => {
            *guard = Some(rq);
            0
        }
        Err(err) => {
            *guard = None;
            err.get()
        }
    }
}

/// Maps the ring a resize produced, and continues at the producer index
/// the kernel left in its header.
fn remap_queue(
    fd: c_int,
    info: &roxe_uapi::RingInfo,
    max_sge: u32,
) -> Result<RecvQueue<WqMapping>, Errno> {
    let geometry = wq::Geometry::new(info, RECV_WQE_HEADER)?;
    let mapping = WqMapping::new(fd, geometry)?;
    let start = mapping.load_producer();
    if start > geometry.num_slots() {
        return Err(Errno::EPROTO);
    }
    RecvQueue::new(Producer::starting_at(mapping, start)?, max_sge)
}

/// `verbs_context_ops.query_srq`: returns 0 or a positive errno.
///
/// # Safety
///
/// `ibsrq` is a live roxe SRQ and `attr` a writable `ibv_srq_attr`.
pub(super) unsafe extern "C" fn query_srq(ibsrq: *mut ibv::Srq, attr: *mut ibv::SrqAttr) -> c_int {
    let mut cmd = ibv::QuerySrq::default();
    // SAFETY: per the contract; `cmd` is writable for its core size.
    errno_ret(cmd_result(unsafe {
        ibv_cmd_query_srq(ibsrq, attr, &raw mut cmd, size_of_val(&cmd))
    }))
}

/// `verbs_context_ops.destroy_srq`: destroys the kernel SRQ, then unmaps
/// the ring and frees the SRQ. Returns 0 or a positive errno; on failure
/// (for example while a QP still uses it) the SRQ stays valid.
///
/// # Safety
///
/// `ibsrq` is a live roxe SRQ that no other thread uses; the caller does
/// not use it after a successful call.
pub(super) unsafe extern "C" fn destroy_srq(ibsrq: *mut ibv::Srq) -> c_int {
    // SAFETY: `ibsrq` is a live SRQ of an open context per the contract.
    let ret = unsafe { ibv_cmd_destroy_srq(ibsrq) };
    if let Err(err) = cmd_result(ret) {
        return err.get();
    }
    let offset = offset_of!(Srq, vsrq) + offset_of!(verbs::Srq, srq);
    // SAFETY: as in `Srq::from_ibv`.
    let srq = unsafe { ibsrq.byte_sub(offset) }.cast::<Srq>();
    if let Some(srq) = NonNull::new(srq) {
        // SAFETY: every roxe SRQ comes from `try_box` in `create_srq` or
        // `create_srq_ex`; the kernel SRQ is gone and nothing uses it.
        unsafe { drop_box(srq) };
    }
    0
}

/// `verbs_context_ops.post_srq_recv`: writes the work requests into the
/// ring and publishes them, without entering the kernel.
///
/// Returns 0, or a positive errno with `*bad_wr` set to the first work
/// request that was not posted: `EINVAL` for too many SGEs, `ENOMEM` when
/// the ring is full.
///
/// # Safety
///
/// `ibsrq` is a live roxe SRQ; `wr` is NULL or a valid list of
/// `ibv_recv_wr`; `bad_wr` is NULL or writable.
pub(super) unsafe extern "C" fn post_srq_recv(
    ibsrq: *mut ibv::Srq,
    wr: *mut ibv::RecvWr,
    bad_wr: *mut *mut ibv::RecvWr,
) -> c_int {
    // SAFETY: `ibsrq` is a live roxe SRQ per the contract.
    let srq = unsafe { Srq::from_ibv(ibsrq) };
    // SAFETY: per the contract.
    unsafe { post_recv_to(&srq.rq, true, wr, bad_wr) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ffi::mapping::tests::Backing;
    use roxe_uapi::RingInfo;

    #[test]
    fn post_srq_recv_writes_the_ring() {
        let backing = Backing::new(4096);
        let resp = roxe_uapi::CreateSrqResp {
            rq: RingInfo {
                mmap_offset: 0,
                mmap_size: 4096,
                num_slots: 2,
                slot_size: 64,
            },
            srq_num: 1,
            _reserved: 0,
        };
        let srq = try_box(Srq::new(verbs::Srq::ZERO)).expect("allocate an SRQ");
        // SAFETY: `srq` is live and only this test uses it.
        let srq_ref = unsafe { srq.as_ref() };
        *srq_ref.rq.lock() = Some(map_recv_queue(backing.fd(), &resp.rq, 3).expect("maps"));
        let ibsrq = srq_ref.ibv();
        let mut wrs: Vec<ibv::RecvWr> = (1..=3)
            .map(|id| ibv::RecvWr {
                wr_id: id,
                next: ptr::null_mut(),
                sg_list: ptr::null_mut(),
                num_sge: 0,
            })
            .collect();
        let base = wrs.as_mut_ptr();
        wrs[0].next = base.wrapping_add(1);
        wrs[1].next = base.wrapping_add(2);
        let mut bad = ptr::null_mut();
        // SAFETY: the SRQ is live and the list valid.
        let ret = unsafe { post_srq_recv(ibsrq, base, &raw mut bad) };
        assert_eq!(ret, Errno::ENOMEM.get(), "two slots for three WRs");
        assert_eq!(bad, base.wrapping_add(2));
        assert_eq!(backing.producer(), 2);
        let first = backing.read_at(roxe_uapi::RING_HEADER_SIZE as u64, 8);
        assert_eq!(u64::from_ne_bytes(first.try_into().expect("8")), 1);
        // SAFETY: `srq` came from `try_box` and is no longer used.
        unsafe { drop_box(srq) };
    }

    #[test]
    fn get_srq_num_reads_the_verbs_srq() {
        let vsrq = verbs::Srq {
            srq_type: ibv::SRQT_XRC,
            srq_num: 0x00ab_cdef,
            ..verbs::Srq::ZERO
        };
        let srq = try_box(Srq::new(vsrq)).expect("allocate an SRQ");
        // SAFETY: `srq` is live and only this test uses it.
        let ibsrq = unsafe { srq.as_ref() }.ibv();
        let mut num = 0;
        // SAFETY: the SRQ is live; `num` is writable, or NULL.
        let (ret, null) = unsafe {
            (
                get_srq_num(ibsrq, &raw mut num),
                get_srq_num(ibsrq, ptr::null_mut()),
            )
        };
        assert_eq!((ret, num), (0, 0x00ab_cdef));
        assert_eq!(null, Errno::EINVAL.get());
        // SAFETY: `srq` came from `try_box` and is no longer used.
        unsafe { drop_box(srq) };
    }

    #[test]
    fn create_srq_ex_refuses_before_the_kernel() {
        use crate::ffi::last_errno;
        let mut pd = ibv::Pd::ZERO;
        let pd = &raw mut pd;
        let mut xrcd = verbs::Xrcd::ZERO;
        let create = |comp_mask, srq_type, xrcd: *mut ibv::Xrcd, cq: *mut ibv::Cq| {
            let mut attr = ibv::SrqInitAttrEx {
                srq_context: ptr::null_mut(),
                attr: ibv::SrqAttr::default(),
                comp_mask,
                srq_type,
                pd,
                xrcd,
                cq,
                tm_cap: ibv::TmCap::default(),
            };
            // SAFETY: every case fails its checks before the context
            // (NULL here) or the objects are used.
            let srq = unsafe { create_srq_ex(ptr::null_mut(), &raw mut attr) };
            assert!(srq.is_null());
            last_errno()
        };
        let xrc = ibv::SRQ_INIT_ATTR_TYPE
            | ibv::SRQ_INIT_ATTR_PD
            | ibv::SRQ_INIT_ATTR_XRCD
            | ibv::SRQ_INIT_ATTR_CQ;
        let x = &raw mut xrcd.xrcd;
        let tm = ibv::SRQT_TM;
        assert_eq!(create(xrc, tm, x, ptr::null_mut()), Errno::EOPNOTSUPP);
        let tm_bit = xrc | ibv::SRQ_INIT_ATTR_TM;
        assert_eq!(
            create(tm_bit, ibv::SRQT_XRC, x, ptr::null_mut()),
            Errno::EOPNOTSUPP
        );
        // An XRC SRQ without the CQ bit, and with the bit but no CQ.
        let no_cq = xrc & !ibv::SRQ_INIT_ATTR_CQ;
        assert_eq!(
            create(no_cq, ibv::SRQT_XRC, x, ptr::null_mut()),
            Errno::EINVAL
        );
        assert_eq!(
            create(xrc, ibv::SRQT_XRC, x, ptr::null_mut()),
            Errno::EINVAL
        );
        // SAFETY: a NULL attribute is refused first.
        assert!(unsafe { create_srq_ex(ptr::null_mut(), ptr::null_mut()) }.is_null());
        assert_eq!(last_errno(), Errno::EINVAL);
    }

    #[test]
    fn the_command_gets_the_checked_type() {
        let (mut pd, mut xrcd) = (ibv::Pd::ZERO, verbs::Xrcd::ZERO);
        // Never dereferenced: only passed along, or not.
        let cq = ptr::dangling_mut::<ibv::Cq>();
        let (pd, xrcd) = (&raw mut pd, &raw mut xrcd.xrcd);
        let attr = |comp_mask, srq_type| ibv::SrqInitAttrEx {
            srq_context: ptr::null_mut(),
            attr: ibv::SrqAttr {
                max_wr: 16,
                max_sge: 2,
                srq_limit: 4,
            },
            comp_mask,
            srq_type,
            pd,
            xrcd,
            cq,
            tm_cap: ibv::TmCap::default(),
        };
        let (ty, with_pd) = (ibv::SRQ_INIT_ATTR_TYPE, ibv::SRQ_INIT_ATTR_PD);
        let xrc = ty | with_pd | ibv::SRQ_INIT_ATTR_XRCD | ibv::SRQ_INIT_ATTR_CQ;
        // No type bit, a stale XRC type, and the XRC bits without it: a
        // basic SRQ, with the type said and no domain or CQ.
        let stale = attr(xrc & !ty, ibv::SRQT_XRC);
        let t = check_srq_init_attr(stale.comp_mask, stale.srq_type).expect("basic");
        let c = command_attr(&stale, t);
        assert_eq!((c.srq_type, c.comp_mask), (ibv::SRQT_BASIC, ty | with_pd));
        assert!(c.xrcd.is_null() && c.cq.is_null());
        assert_eq!(c.pd, pd);
        let limits = (c.attr.max_wr, c.attr.max_sge, c.attr.srq_limit);
        assert_eq!(limits, (16, 2, 4));
        // An XRC SRQ keeps its domain and CQ.
        let x = attr(xrc, ibv::SRQT_XRC);
        let t = check_srq_init_attr(x.comp_mask, x.srq_type).expect("XRC");
        let c = command_attr(&x, t);
        assert_eq!((c.srq_type, c.comp_mask), (ibv::SRQT_XRC, xrc));
        assert_eq!((c.pd, c.xrcd, c.cq), (pd, xrcd, cq));
    }

    #[test]
    fn a_bad_ring_description_is_refused_before_mmap() {
        let resp = roxe_uapi::CreateSrqResp {
            rq: RingInfo {
                mmap_offset: 0,
                mmap_size: 4096,
                num_slots: 2,
                slot_size: 48,
            },
            srq_num: 1,
            _reserved: 0,
        };
        assert_eq!(
            map_recv_queue(-1, &resp.rq, 1).map(|_| ()),
            Err(Errno::EPROTO)
        );
    }
}
