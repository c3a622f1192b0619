// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Completion queues: creation with a mapped ring, polling (plain and
//! extended) without system calls, notification, resize and destruction.
//!
//! The ring protocol is that of `Documentation/rings.md`; the checks and
//! the index arithmetic are in the safe modules `ring` and `cq`.

use core::cell::UnsafeCell;
use core::ffi::{c_int, c_uint};
use core::mem::{MaybeUninit, offset_of, size_of_val};
use core::ptr::{self, NonNull};
use core::slice;

use roxe_uapi::Cqe;

use super::lock::{SpinGuard, SpinLock};
use super::mapping::Mapping;
use super::{
    cmd_result, drop_box, errno_ret, ibv_cmd_create_cq, ibv_cmd_create_cq_ex, ibv_cmd_destroy_cq,
    ibv_cmd_req_notify_cq, ibv_cmd_resize_cq, set_errno, try_box,
};
use crate::abi::{driver, ibv, verbs};
use crate::cq::{CqState, check_init_attr};
use crate::errno::Errno;
use crate::ring::{Geometry, Ring};

/// A roxe CQ: libibverbs' `verbs_cq`, then the ring and polling state.
///
/// [`create_cq`] and [`create_cq_ex`] allocate it with `try_box`,
/// [`destroy_cq`] frees it. Both kinds are the same type; only an extended
/// CQ has its `ibv_cq_ex` ops filled in.
#[repr(C)]
pub(super) struct Cq {
    /// libibverbs' part. libibverbs and the application reach it through
    /// raw pointers whenever they like (`ibv_ack_cq_events` writes
    /// `comp_events_completed` from any thread, under `cq->mutex`), so it is
    /// an `UnsafeCell`, and roxe touches it only through raw pointers.
    vcq: UnsafeCell<verbs::Cq>,
    /// The ring and the polling state, under the CQ lock.
    state: SpinLock<CqState<Mapping>>,
}

/// The guard of a CQ's lock.
type StateGuard<'a> = SpinGuard<'a, CqState<Mapping>>;

impl Cq {
    /// A CQ before the kernel knows it: zeroed `verbs_cq` (what libibverbs
    /// expects from `calloc`), no ring.
    fn new() -> Self {
        Self {
            vcq: UnsafeCell::new(verbs::Cq::ZERO),
            state: SpinLock::new(CqState::new()),
        }
    }

    /// The `Cq` around an `ibv_cq`.
    ///
    /// # Safety
    ///
    /// `ibcq` is the `ibv_cq` of a live `Cq` that stays live for `'a`.
    unsafe fn from_ibv<'a>(ibcq: *mut ibv::Cq) -> &'a Self {
        // SAFETY: `ibv_cq` is at offset 0 of the `verbs_cq` union, which is
        // the `vcq` field of a live `Cq` per the contract.
        unsafe { &*ibcq.byte_sub(offset_of!(Cq, vcq)).cast::<Self>() }
    }
}

/// Drops the unconsumed completions of QP `qpn` from `ibcq`, under the
/// CQ lock: a QP moved to RESET starts again with no stale completions
/// (the flushes of its last life), as hardware providers arrange.
///
/// # Safety
///
/// `ibcq` is NULL or the `ibv_cq` of a live roxe CQ.
pub(super) unsafe fn discard_qp(ibcq: *mut ibv::Cq, qpn: u32) {
    if ibcq.is_null() {
        return;
    }
    // SAFETY: A live roxe CQ per the contract.
    let cq = unsafe { Cq::from_ibv(ibcq) };
    cq.state.lock().discard_qp(qpn);
}

impl Cq {
    /// The `Cq` around an `ibv_cq_ex`.
    ///
    /// # Safety
    ///
    /// As for [`Cq::from_ibv`].
    unsafe fn from_ex<'a>(ex: *mut ibv::CqEx) -> &'a Self {
        // SAFETY: `ibv_cq_ex` is at offset 0 of the union too.
        unsafe { Self::from_ibv(ex.cast()) }
    }

    /// This CQ as libibverbs' `ibv_cq`.
    fn ibv(&self) -> *mut ibv::Cq {
        self.vcq.get().cast()
    }

    /// This CQ as libibverbs' `ibv_cq_ex`.
    fn ex(&self) -> *mut ibv::CqEx {
        self.vcq.get().cast()
    }

    /// The verbs command fd of the CQ's context.
    ///
    /// # Safety
    ///
    /// The kernel command that created the CQ succeeded (it set
    /// `cq->context`), and that context is open.
    unsafe fn cmd_fd(&self) -> c_int {
        // SAFETY: per the contract `context` points to an open context;
        // neither field changes while the context is open.
        unsafe { (*(*self.ibv()).context).cmd_fd }
    }

    /// Shows `cqe` as the current completion in the `ibv_cq_ex` fields that
    /// the application reads directly.
    ///
    /// `_held` proves that this thread runs the CQ's polling batch.
    fn publish_current(&self, _held: &StateGuard<'_>, cqe: &Cqe) {
        let ex = self.ex();
        // SAFETY: `ex` points into this live CQ. libibverbs never touches
        // `status` and `wr_id`; the application reads them only inside a
        // polling batch, which runs on the thread holding the lock.
        unsafe {
            (*ex).status = cqe.status;
            (*ex).wr_id = cqe.wr_id;
        }
    }
}

/// Checks the kernel's ring description and maps the ring.
fn map_ring(fd: c_int, resp: &roxe_uapi::CreateCqResp) -> Result<Ring<Mapping>, Errno> {
    let geometry = Geometry::new(resp)?;
    Ok(Ring::new(Mapping::new(fd, geometry)?))
}

/// Completes a CQ after its kernel create command returned `created`:
/// maps the ring, or on any failure frees `cq` (destroying the kernel CQ
/// first if it exists).
///
/// # Safety
///
/// `cq` came from `try_box` and is not published. If `created` is `Ok`, the
/// kernel created the CQ and its context is open.
unsafe fn finish_create(
    cq: NonNull<Cq>,
    created: Result<(), Errno>,
    resp: &roxe_uapi::CreateCqResp,
) -> Result<(), Errno> {
    if let Err(err) = created {
        // SAFETY: per the contract; the kernel has no CQ to destroy.
        unsafe { drop_box(cq) };
        return Err(err);
    }
    // SAFETY: `cq` is live and only this thread knows it.
    let cq_ref = unsafe { cq.as_ref() };
    // SAFETY: the create command succeeded in an open context.
    let fd = unsafe { cq_ref.cmd_fd() };
    match map_ring(fd, resp) {
        Ok(ring) => {
            cq_ref.state.lock().replace_ring(Some(ring));
            Ok(())
        }
        Err(err) => {
            // SAFETY: the kernel CQ exists and nothing else uses it. If this
            // fails too, the mapping error is still the one to report; the
            // kernel frees the CQ with the context at the latest, and cannot
            // raise a completion event for it before (no QP uses it).
            unsafe { ibv_cmd_destroy_cq(cq_ref.ibv()) };
            // SAFETY: per the contract, and the kernel CQ is gone.
            unsafe { drop_box(cq) };
            Err(err)
        }
    }
}

/// `verbs_context_ops.create_cq`.
///
/// Returns NULL with `errno` set on failure. libibverbs' `ibv_create_cq`
/// then runs `verbs_init_cq` on the result.
///
/// # Safety
///
/// `context` is an open roxe context; `channel` is NULL or a completion
/// channel of it.
pub(super) unsafe extern "C" fn create_cq(
    context: *mut ibv::Context,
    cqe: c_int,
    channel: *mut ibv::CompChannel,
    comp_vector: c_int,
) -> *mut ibv::Cq {
    let Some(cq) = try_box(Cq::new()) else {
        set_errno(Errno::ENOMEM);
        return ptr::null_mut();
    };
    // SAFETY: `cq` is live.
    let ibcq = unsafe { cq.as_ref() }.ibv();
    let mut cmd = ibv::CreateCq::default();
    let mut resp = driver::CreateCqResp::default();
    // SAFETY: `context` and `channel` are valid per the contract; `ibcq` is
    // a zeroed `ibv_cq`; `cmd` is writable for the size passed (its core
    // size: no driver input); `resp` is writable for its full size, and the
    // driver part follows `ibv_resp` directly (see `abi::driver`).
    let ret = unsafe {
        ibv_cmd_create_cq(
            context,
            cqe,
            channel,
            comp_vector,
            ibcq,
            &raw mut cmd,
            size_of_val(&cmd),
            &raw mut resp.ibv_resp,
            size_of_val(&resp),
        )
    };
    // SAFETY: `cq` is unpublished; `context` is open.
    match unsafe { finish_create(cq, cmd_result(ret), &resp.drv) } {
        Ok(()) => ibcq,
        Err(err) => {
            set_errno(err);
            ptr::null_mut()
        }
    }
}

/// `verbs_context_ops.create_cq_ex`.
///
/// Returns NULL with `errno` set on failure: `EOPNOTSUPP` for completion
/// fields or creation flags roxe does not support (see
/// [`check_init_attr`]), `EINVAL` for a `parent_domain` that is not one.
/// libibverbs runs `verbs_init_cq` on the result.
///
/// # Safety
///
/// `context` is an open roxe context; `init_attr` is NULL or points to a
/// readable `ibv_cq_init_attr_ex` whose `channel` is NULL or a completion
/// channel of `context`.
pub(super) unsafe extern "C" fn create_cq_ex(
    context: *mut ibv::Context,
    init_attr: *mut ibv::CqInitAttrEx,
) -> *mut ibv::CqEx {
    // SAFETY: NULL or readable per the contract.
    let Some(attr) = (unsafe { init_attr.as_ref() }) else {
        set_errno(Errno::EINVAL);
        return ptr::null_mut();
    };
    let wc_flags = attr.wc_flags;
    if let Err(err) = check_init_attr(wc_flags, attr.comp_mask, attr.flags) {
        set_errno(err);
        return ptr::null_mut();
    }
    // A CQ has no PD; a parent domain given to it only carries allocators,
    // which roxe's kernel-allocated ring does not use. It must be one.
    if attr.comp_mask & ibv::CQ_INIT_ATTR_MASK_PD != 0 {
        // SAFETY: `parent_domain` is NULL or a live PD of some provider, as
        // libibverbs hands it on from the application.
        let is_pd = unsafe { super::pd::is_parent_domain(attr.parent_domain, context) };
        if !is_pd {
            set_errno(Errno::EINVAL);
            return ptr::null_mut();
        }
    }
    let Some(cq) = try_box(Cq::new()) else {
        set_errno(Errno::ENOMEM);
        return ptr::null_mut();
    };
    // SAFETY: `cq` is live.
    let cq_ref = unsafe { cq.as_ref() };
    let (vcq, ex) = (cq_ref.vcq.get(), cq_ref.ex());
    let mut cmd = ibv::CreateCqEx::default();
    let mut resp = driver::CreateCqExResp::default();
    // SAFETY: as in `create_cq`; `init_attr` is readable, `vcq` is a zeroed
    // `verbs_cq`. No command flags: roxe asks for no timestamps.
    let ret = unsafe {
        ibv_cmd_create_cq_ex(
            context,
            init_attr,
            vcq,
            &raw mut cmd,
            size_of_val(&cmd),
            &raw mut resp.ibv_resp,
            size_of_val(&resp),
            0,
        )
    };
    // SAFETY: `cq` is unpublished; `context` is open.
    if let Err(err) = unsafe { finish_create(cq, cmd_result(ret), &resp.drv) } {
        set_errno(err);
        return ptr::null_mut();
    }
    // SAFETY: `ex` points into the live, still unpublished CQ.
    unsafe { install_ex_ops(ex, wc_flags) };
    ex
}

/// Fills in the extended polling ops of an `ibv_cq_ex`: the batch calls and
/// the three readers every CQ has, plus a reader for each field `wc_flags`
/// asks for. The readers of fields not asked for stay NULL, as in
/// rdma-core's providers.
///
/// # Safety
///
/// `ex` is the `ibv_cq_ex` of a live [`Cq`] that nothing else uses yet.
unsafe fn install_ex_ops(ex: *mut ibv::CqEx, wc_flags: u64) {
    let with = |flag: u64| wc_flags & flag != 0;
    // SAFETY: per the contract the CQ is live and exclusively ours.
    let ex = unsafe { &mut *ex };
    ex.start_poll = Some(start_poll);
    ex.next_poll = Some(next_poll);
    ex.end_poll = Some(end_poll);
    ex.read_opcode = Some(read_opcode);
    ex.read_vendor_err = Some(read_vendor_err);
    ex.read_wc_flags = Some(read_wc_flags);
    ex.read_byte_len = with(ibv::WC_EX_WITH_BYTE_LEN).then_some(read_byte_len as _);
    ex.read_imm_data = with(ibv::WC_EX_WITH_IMM).then_some(read_imm_data as _);
    ex.read_qp_num = with(ibv::WC_EX_WITH_QP_NUM).then_some(read_qp_num as _);
    ex.read_src_qp = with(ibv::WC_EX_WITH_SRC_QP).then_some(read_src_qp as _);
    ex.read_slid = with(ibv::WC_EX_WITH_SLID).then_some(read_slid as _);
    ex.read_sl = with(ibv::WC_EX_WITH_SL).then_some(read_sl as _);
    ex.read_dlid_path_bits =
        with(ibv::WC_EX_WITH_DLID_PATH_BITS).then_some(read_dlid_path_bits as _);
}

/// `verbs_context_ops.poll_cq` (also `ibv_context_ops.poll_cq`, which the
/// inline `ibv_poll_cq` calls): moves up to `num_entries` completions into
/// `wc` without a system call.
///
/// Returns the number written, or -1 with `errno` set: `EIO` if the CQ's
/// ring is corrupt (its producer index is impossible) or gone (a failed
/// resize), `EINVAL` for a NULL `wc`.
///
/// # Safety
///
/// `ibcq` is a live roxe CQ; `wc` is NULL or writable for `num_entries`
/// entries (which need not be initialised).
pub(super) unsafe extern "C" fn poll_cq(
    ibcq: *mut ibv::Cq,
    num_entries: c_int,
    wc: *mut ibv::Wc,
) -> c_int {
    // A negative count asks for nothing, as in rdma-core's providers.
    let Ok(max) = usize::try_from(num_entries) else {
        return 0;
    };
    if max == 0 {
        return 0;
    }
    if wc.is_null() {
        set_errno(Errno::EINVAL);
        return -1;
    }
    // SAFETY: `ibcq` is a live roxe CQ per the contract.
    let cq = unsafe { Cq::from_ibv(ibcq) };
    // SAFETY: `wc` is writable for `max` entries per the contract, and the
    // caller does not touch them during the call; `MaybeUninit` because
    // they need not be initialised.
    let out = unsafe { slice::from_raw_parts_mut(wc.cast::<MaybeUninit<ibv::Wc>>(), max) };
    let mut slots = out.iter_mut();
    let polled = cq.state.lock().poll(max, |entry| {
        if let Some(slot) = slots.next() {
            slot.write(entry);
        }
    });
    match polled {
        // CAST: `count <= max`, which came from a `c_int`.
        Ok(count) => count as c_int,
        Err(err) => {
            set_errno(err);
            -1
        }
    }
}

/// `ibv_cq_ex.start_poll`: starts a polling batch and takes the CQ lock.
///
/// Returns 0 with the oldest completion current (`wr_id` and `status` set,
/// the lock held until [`end_poll`]), or an errno with the lock released
/// and no batch: `ENOENT` if the CQ is empty, `EIO` as for [`poll_cq`],
/// `EINVAL` for a non-zero `attr->comp_mask`.
///
/// # Safety
///
/// `current` is a live extended roxe CQ; `attr` is NULL or readable. The
/// calling thread is not in a batch on this CQ already.
unsafe extern "C" fn start_poll(current: *mut ibv::CqEx, attr: *mut ibv::PollCqAttr) -> c_int {
    // SAFETY: NULL or readable per the contract.
    if unsafe { attr.as_ref() }.is_some_and(|attr| attr.comp_mask != 0) {
        return Errno::EINVAL.get();
    }
    // SAFETY: `current` is a live roxe CQ per the contract.
    let cq = unsafe { Cq::from_ex(current) };
    let mut state = cq.state.lock();
    match state.start_poll() {
        Ok(cqe) => {
            cq.publish_current(&state, &cqe);
            state.park();
            0
        }
        Err(err) => err.get(),
    }
}

/// `ibv_cq_ex.next_poll`: consumes the current completion and makes the
/// next one current.
///
/// Returns 0, or `ENOENT` if there is no next one, or `EIO` as for
/// [`poll_cq`]; the batch stays open either way.
///
/// # Safety
///
/// `current` is a live extended roxe CQ, and the calling thread is in a
/// batch on it that [`start_poll`] opened (as the `ibv_next_poll` man page
/// requires).
unsafe extern "C" fn next_poll(current: *mut ibv::CqEx) -> c_int {
    // SAFETY: `current` is a live roxe CQ per the contract.
    let cq = unsafe { Cq::from_ex(current) };
    // SAFETY: per the contract this thread parked the guard in `start_poll`.
    let Some(mut state) = (unsafe { cq.state.resume() }) else {
        return Errno::EINVAL.get();
    };
    let ret = match state.next_poll() {
        Ok(cqe) => {
            cq.publish_current(&state, &cqe);
            0
        }
        Err(err) => err.get(),
    };
    state.park();
    ret
}

/// `ibv_cq_ex.end_poll`: consumes the current completion, if any, and ends
/// the batch, releasing the CQ lock.
///
/// # Safety
///
/// As for [`next_poll`].
unsafe extern "C" fn end_poll(current: *mut ibv::CqEx) {
    // SAFETY: `current` is a live roxe CQ per the contract.
    let cq = unsafe { Cq::from_ex(current) };
    // SAFETY: as in `next_poll`.
    if let Some(mut state) = unsafe { cq.state.resume() } {
        state.end_poll();
    }
}

/// Reads a field of the current completion of the calling thread's batch;
/// the type's default (0) outside a batch or after `ENOENT`.
///
/// # Safety
///
/// As for [`next_poll`].
unsafe fn read_current<T: Default>(current: *mut ibv::CqEx, field: impl FnOnce(&Cqe) -> T) -> T {
    // SAFETY: `current` is a live roxe CQ per the contract.
    let cq = unsafe { Cq::from_ex(current) };
    // SAFETY: as in `next_poll`.
    let Some(state) = (unsafe { cq.state.resume() }) else {
        return T::default();
    };
    let value = state.current().map(field).unwrap_or_default();
    state.park();
    value
}

/// `ibv_cq_ex.read_opcode`.
///
/// # Safety
///
/// As for [`next_poll`].
unsafe extern "C" fn read_opcode(current: *mut ibv::CqEx) -> u32 {
    // SAFETY: the same contract.
    unsafe { read_current(current, |c| c.opcode) }
}

/// `ibv_cq_ex.read_vendor_err`.
///
/// # Safety
///
/// As for [`next_poll`].
unsafe extern "C" fn read_vendor_err(current: *mut ibv::CqEx) -> u32 {
    // SAFETY: the same contract.
    unsafe { read_current(current, |c| c.vendor_err) }
}

/// `ibv_cq_ex.read_byte_len`.
///
/// # Safety
///
/// As for [`next_poll`].
unsafe extern "C" fn read_byte_len(current: *mut ibv::CqEx) -> u32 {
    // SAFETY: the same contract.
    unsafe { read_current(current, |c| c.byte_len) }
}

/// `ibv_cq_ex.read_imm_data`: the immediate data, network byte order.
///
/// # Safety
///
/// As for [`next_poll`].
unsafe extern "C" fn read_imm_data(current: *mut ibv::CqEx) -> u32 {
    // SAFETY: the same contract.
    unsafe { read_current(current, |c| c.imm_data) }
}

/// `ibv_cq_ex.read_qp_num`.
///
/// # Safety
///
/// As for [`next_poll`].
unsafe extern "C" fn read_qp_num(current: *mut ibv::CqEx) -> u32 {
    // SAFETY: the same contract.
    unsafe { read_current(current, |c| c.qp_num) }
}

/// `ibv_cq_ex.read_src_qp`.
///
/// # Safety
///
/// As for [`next_poll`].
unsafe extern "C" fn read_src_qp(current: *mut ibv::CqEx) -> u32 {
    // SAFETY: the same contract.
    unsafe { read_current(current, |c| c.src_qp) }
}

/// `ibv_cq_ex.read_wc_flags`.
///
/// # Safety
///
/// As for [`next_poll`].
unsafe extern "C" fn read_wc_flags(current: *mut ibv::CqEx) -> c_uint {
    // SAFETY: the same contract.
    unsafe { read_current(current, |c| c.wc_flags) }
}

/// `ibv_cq_ex.read_slid`.
///
/// # Safety
///
/// As for [`next_poll`].
unsafe extern "C" fn read_slid(current: *mut ibv::CqEx) -> u32 {
    // SAFETY: the same contract.
    unsafe { read_current(current, |c| u32::from(c.slid)) }
}

/// `ibv_cq_ex.read_sl`.
///
/// # Safety
///
/// As for [`next_poll`].
unsafe extern "C" fn read_sl(current: *mut ibv::CqEx) -> u8 {
    // SAFETY: the same contract.
    unsafe { read_current(current, |c| c.sl) }
}

/// `ibv_cq_ex.read_dlid_path_bits`.
///
/// # Safety
///
/// As for [`next_poll`].
unsafe extern "C" fn read_dlid_path_bits(current: *mut ibv::CqEx) -> u8 {
    // SAFETY: the same contract.
    unsafe { read_current(current, |c| c.dlid_path_bits) }
}

/// `verbs_context_ops.req_notify_cq`: arms the CQ in the kernel. Returns 0
/// or a positive errno, which `ibv_req_notify_cq` returns unchanged.
///
/// # Safety
///
/// `ibcq` is a live roxe CQ.
pub(super) unsafe extern "C" fn req_notify_cq(ibcq: *mut ibv::Cq, solicited_only: c_int) -> c_int {
    // SAFETY: `ibcq` is a live CQ of an open context per the contract.
    errno_ret(cmd_result(unsafe {
        ibv_cmd_req_notify_cq(ibcq, solicited_only)
    }))
}

/// `verbs_context_ops.resize_cq`. Returns 0 or a positive errno, which
/// `ibv_resize_cq` returns unchanged.
///
/// The CQ lock is held throughout, so no poll moves the consumer index
/// while the kernel copies the unconsumed completions into slots `0..n` of
/// the new ring. If the kernel refuses, the old ring stays in use. If the
/// kernel resized but the new ring cannot be used (its description is
/// invalid, or `mmap` fails), the CQ is left without a ring: the kernel no
/// longer writes the old one, so polls fail with `EIO` from then on.
///
/// # Safety
///
/// `ibcq` is a live roxe CQ, and the calling thread is not in a polling
/// batch on it.
pub(super) unsafe extern "C" fn resize_cq(ibcq: *mut ibv::Cq, cqe: c_int) -> c_int {
    // SAFETY: `ibcq` is a live roxe CQ per the contract.
    let cq = unsafe { Cq::from_ibv(ibcq) };
    let mut state = cq.state.lock();
    let mut cmd = ibv::ResizeCq::default();
    let mut resp = driver::ResizeCqResp::default();
    // SAFETY: `ibcq` is a live CQ of an open context; `cmd` is writable for
    // its core size (no driver input), `resp` for its full size, with the
    // driver part right after `ibv_resp`. The command writes `ibcq->cqe`,
    // which is inside the `UnsafeCell`.
    let ret = unsafe {
        ibv_cmd_resize_cq(
            ibcq,
            cqe,
            &raw mut cmd,
            size_of_val(&cmd),
            &raw mut resp.ibv_resp,
            size_of_val(&resp),
        )
    };
    if let Err(err) = cmd_result(ret) {
        return err.get();
    }
    // SAFETY: the CQ was created, and its context is open.
    let fd = unsafe { cq.cmd_fd() };
    // The old ring is unmapped when it is replaced; a new one starts at
    // consumer index 0, as the kernel left it.
    match map_ring(fd, &resp.drv) {
        Ok(ring) => {
            state.replace_ring(Some(ring));
            0
        }
        Err(err) => {
            state.replace_ring(None);
            err.get()
        }
    }
}

/// `verbs_context_ops.destroy_cq`: destroys the kernel CQ, then unmaps the
/// ring and frees the CQ. Returns 0 or a positive errno, which
/// `ibv_destroy_cq` returns unchanged; on failure the CQ stays valid.
///
/// # Safety
///
/// `ibcq` is a live roxe CQ that no other thread uses; the caller does not
/// use it after a successful call.
pub(super) unsafe extern "C" fn destroy_cq(ibcq: *mut ibv::Cq) -> c_int {
    // SAFETY: `ibcq` is a live CQ of an open context per the contract.
    let ret = unsafe { ibv_cmd_destroy_cq(ibcq) };
    if let Err(err) = cmd_result(ret) {
        return err.get();
    }
    // SAFETY: as in `Cq::from_ibv`: `ibcq` sits at `vcq` in a `Cq`.
    let cq = unsafe { ibcq.byte_sub(offset_of!(Cq, vcq)) }.cast::<Cq>();
    if let Some(cq) = NonNull::new(cq) {
        // SAFETY: every roxe CQ comes from `try_box` in `create_cq` or
        // `create_cq_ex`; the kernel CQ is gone and nothing uses it.
        unsafe { drop_box(cq) };
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ffi::last_errno;
    use crate::ffi::mapping::tests::{Backing, file_resp};
    use crate::ring::tests::cqe;
    use crate::ring::tests::resp as ring_resp;

    /// A CQ over a file-backed ring, as `create_cq_ex` leaves it, without a
    /// kernel.
    struct TestCq {
        cq: NonNull<Cq>,
        backing: Backing,
    }

    impl TestCq {
        fn new(num_slots: u32, wc_flags: u64) -> Self {
            let backing = Backing::new(4096);
            let cq = try_box(Cq::new()).expect("allocate a CQ");
            let ring = map_ring(backing.fd(), &file_resp(num_slots, 4096)).expect("map the ring");
            // SAFETY: `cq` is live and only this test uses it.
            let cq_ref = unsafe { cq.as_ref() };
            cq_ref.state.lock().replace_ring(Some(ring));
            // SAFETY: as above.
            unsafe { install_ex_ops(cq_ref.ex(), wc_flags) };
            Self { cq, backing }
        }

        fn ibv(&self) -> *mut ibv::Cq {
            // SAFETY: `cq` is live until `drop`.
            unsafe { self.cq.as_ref() }.ibv()
        }

        fn current(&self) -> *mut ibv::CqEx {
            // SAFETY: `cq` is live until `drop`.
            unsafe { self.cq.as_ref() }.ex()
        }

        /// Looks at the `ibv_cq_ex`; the reference must not outlive `f`,
        /// because the polling calls write to it.
        fn read<T>(&self, f: impl FnOnce(&ibv::CqEx) -> T) -> T {
            // SAFETY: `cq` is live until `drop`, and nothing writes to it
            // while `f` runs (this test thread is the only user).
            f(unsafe { &*self.current() })
        }

        /// Publishes completions `first..first + count` from slot `first`.
        fn produce(&self, first: u32, count: u32) {
            for n in first..first + count {
                self.backing.write_slot(n % 4, &cqe(n));
            }
            self.backing.set_producer(first + count);
        }

        fn poll(&self, max: c_int) -> (c_int, Vec<ibv::Wc>) {
            let mut wc = vec![ibv::Wc::default(); max.max(0) as usize];
            // SAFETY: the CQ is live; `wc` holds `max` entries.
            let ret = unsafe { poll_cq(self.ibv(), max, wc.as_mut_ptr()) };
            wc.truncate(ret.max(0) as usize);
            (ret, wc)
        }
    }

    impl Drop for TestCq {
        fn drop(&mut self) {
            // SAFETY: `cq` came from `try_box` and is no longer used.
            unsafe { drop_box(self.cq) };
        }
    }

    fn wc(n: u32) -> ibv::Wc {
        crate::cq::wc_from_cqe(&cqe(n))
    }

    #[test]
    fn poll_cq_copies_completions_and_frees_slots() {
        let cq = TestCq::new(4, 0);
        assert_eq!(cq.poll(8), (0, vec![]));
        cq.produce(0, 3);
        assert_eq!(cq.poll(2), (2, vec![wc(0), wc(1)]));
        assert_eq!(cq.backing.consumer(), 2);
        cq.produce(3, 3); // wraps to slots 3, 0, 1
        assert_eq!(cq.poll(8), (4, vec![wc(2), wc(3), wc(4), wc(5)]));
        assert_eq!(cq.backing.consumer(), 6);
    }

    #[test]
    fn poll_cq_leaves_entries_beyond_the_count_alone() {
        let cq = TestCq::new(4, 0);
        cq.produce(0, 1);
        let marker = ibv::Wc {
            wr_id: 0x5a5a,
            ..ibv::Wc::default()
        };
        let mut wc = vec![marker; 3];
        // SAFETY: the CQ is live; `wc` holds 3 entries.
        let ret = unsafe { poll_cq(cq.ibv(), 3, wc.as_mut_ptr()) };
        assert_eq!(ret, 1);
        assert_eq!(wc, [self::wc(0), marker, marker]);
    }

    #[test]
    fn poll_cq_fails_with_eio_on_a_corrupt_producer() {
        let cq = TestCq::new(4, 0);
        cq.produce(0, 2);
        cq.backing.set_producer(7);
        assert_eq!(cq.poll(8), (-1, vec![]));
        assert_eq!(last_errno(), Errno::EIO);
        assert_eq!(cq.backing.consumer(), 0);
    }

    #[test]
    fn poll_cq_with_nothing_to_fill() {
        let cq = TestCq::new(4, 0);
        cq.produce(0, 1);
        assert_eq!(cq.poll(0), (0, vec![]));
        assert_eq!(cq.poll(-5), (0, vec![]));
        // SAFETY: the CQ is live; a NULL array is refused before any write.
        let ret = unsafe { poll_cq(cq.ibv(), 1, ptr::null_mut()) };
        assert_eq!((ret, last_errno()), (-1, Errno::EINVAL));
        assert_eq!(cq.backing.consumer(), 0);
    }

    #[test]
    fn extended_polling_walks_a_batch() {
        let cq = TestCq::new(4, ibv::WC_STANDARD_FLAGS);
        let current = cq.current();
        let (start, next, end) = cq.read(|ex| (ex.start_poll, ex.next_poll, ex.end_poll));
        let (start, next, end) = (
            start.expect("start_poll"),
            next.expect("next_poll"),
            end.expect("end_poll"),
        );
        let mut attr = ibv::PollCqAttr { comp_mask: 0 };

        // SAFETY: the CQ is live; a start on an empty CQ opens no batch.
        let ret = unsafe { start(current, &raw mut attr) };
        assert_eq!(ret, Errno::ENOENT.get());

        cq.produce(0, 2);
        // SAFETY: the CQ is live and this thread is in no batch.
        assert_eq!(unsafe { start(current, &raw mut attr) }, 0);
        let c = cqe(0);
        assert_eq!(cq.read(|ex| (ex.wr_id, ex.status)), (c.wr_id, c.status));
        let read = |f: fn(&ibv::CqEx) -> Option<unsafe extern "C" fn(*mut ibv::CqEx) -> u32>| {
            let op = cq.read(f).expect("reader installed");
            // SAFETY: inside this thread's batch.
            unsafe { op(current) }
        };
        assert_eq!(read(|ex| ex.read_opcode), c.opcode);
        assert_eq!(read(|ex| ex.read_vendor_err), c.vendor_err);
        assert_eq!(read(|ex| ex.read_byte_len), c.byte_len);
        assert_eq!(read(|ex| ex.read_imm_data), c.imm_data);
        assert_eq!(read(|ex| ex.read_qp_num), c.qp_num);
        assert_eq!(read(|ex| ex.read_src_qp), c.src_qp);
        assert_eq!(read(|ex| ex.read_slid), u32::from(c.slid));
        let (flags, sl, bits) =
            cq.read(|ex| (ex.read_wc_flags, ex.read_sl, ex.read_dlid_path_bits));
        // SAFETY: inside this thread's batch.
        unsafe {
            assert_eq!(flags.expect("reader installed")(current), c.wc_flags);
            assert_eq!(sl.expect("reader installed")(current), c.sl);
            assert_eq!(bits.expect("reader installed")(current), c.dlid_path_bits);
        }
        assert_eq!(cq.backing.consumer(), 0, "looking does not consume");

        // SAFETY: inside this thread's batch.
        assert_eq!(unsafe { next(current) }, 0);
        assert_eq!(cq.read(|ex| ex.wr_id), cqe(1).wr_id);
        assert_eq!(cq.backing.consumer(), 1);
        // SAFETY: inside this thread's batch, which ENOENT keeps open.
        assert_eq!(unsafe { next(current) }, Errno::ENOENT.get());
        assert_eq!(cq.backing.consumer(), 2);
        // Outside a current completion the readers give 0.
        assert_eq!(read(|ex| ex.read_opcode), 0);
        // SAFETY: ends this thread's batch.
        unsafe { end(current) };
        assert_eq!(
            cq.backing.consumer(),
            2,
            "end after ENOENT consumes nothing"
        );

        // The lock is free again: a plain poll works and finds nothing.
        assert_eq!(cq.poll(4), (0, vec![]));
    }

    #[test]
    fn end_poll_consumes_the_current_completion_and_unlocks() {
        let cq = TestCq::new(4, 0);
        let current = cq.current();
        cq.produce(0, 2);
        // SAFETY: the CQ is live; start then end on this thread.
        unsafe {
            assert_eq!(start_poll(current, ptr::null_mut()), 0);
            end_poll(current);
        }
        assert_eq!(cq.backing.consumer(), 1);
        assert_eq!(cq.poll(4), (1, vec![wc(1)]));
    }

    #[test]
    fn start_poll_fails_cleanly() {
        let cq = TestCq::new(4, 0);
        let current = cq.current();
        let mut attr = ibv::PollCqAttr { comp_mask: 1 };
        cq.produce(0, 1);
        // SAFETY: the CQ is live; failed starts leave no batch open.
        unsafe {
            assert_eq!(start_poll(current, &raw mut attr), Errno::EINVAL.get());
            cq.backing.set_producer(9);
            assert_eq!(start_poll(current, ptr::null_mut()), Errno::EIO.get());
        }
        // Neither left the lock held.
        assert_eq!(cq.poll(1).0, -1);
        assert_eq!(last_errno(), Errno::EIO);
    }

    #[test]
    fn only_requested_readers_are_installed() {
        let cq = TestCq::new(4, ibv::WC_EX_WITH_BYTE_LEN | ibv::WC_EX_WITH_SL);
        cq.read(|ex| {
            assert!(ex.start_poll.is_some() && ex.next_poll.is_some() && ex.end_poll.is_some());
            assert!(ex.read_opcode.is_some() && ex.read_vendor_err.is_some());
            assert!(ex.read_wc_flags.is_some());
            assert!(ex.read_byte_len.is_some() && ex.read_sl.is_some());
            assert!(ex.read_imm_data.is_none() && ex.read_qp_num.is_none());
            assert!(ex.read_src_qp.is_none() && ex.read_slid.is_none());
            assert!(ex.read_dlid_path_bits.is_none());
            assert!(ex.read_completion_ts.is_none() && ex.read_cvlan.is_none());
            assert!(ex.read_flow_tag.is_none() && ex.read_tm_info.is_none());
            assert!(ex.read_completion_wallclock_ns.is_none());
        });
    }

    #[test]
    fn create_cq_ex_refuses_unsupported_attributes_before_the_kernel() {
        let mut attr = ibv::CqInitAttrEx {
            cqe: 4,
            cq_context: ptr::null_mut(),
            channel: ptr::null_mut(),
            comp_vector: 0,
            // IBV_WC_EX_WITH_COMPLETION_TIMESTAMP.
            wc_flags: 1 << 7,
            comp_mask: 0,
            flags: 0,
            parent_domain: ptr::null_mut(),
        };
        // SAFETY: the attributes are refused before `context` is used, so a
        // NULL context is never dereferenced.
        let cq = unsafe { create_cq_ex(ptr::null_mut(), &raw mut attr) };
        assert!(cq.is_null());
        assert_eq!(last_errno(), Errno::EOPNOTSUPP);

        attr.wc_flags = 0;
        attr.comp_mask = ibv::CQ_INIT_ATTR_MASK_FLAGS;
        attr.flags = ibv::CREATE_CQ_ATTR_IGNORE_OVERRUN;
        // SAFETY: as above.
        let cq = unsafe { create_cq_ex(ptr::null_mut(), &raw mut attr) };
        assert!(cq.is_null());
        assert_eq!(last_errno(), Errno::EOPNOTSUPP);

        // SAFETY: a NULL attribute pointer is refused first.
        let cq = unsafe { create_cq_ex(ptr::null_mut(), ptr::null_mut()) };
        assert!(cq.is_null());
        assert_eq!(last_errno(), Errno::EINVAL);
    }

    #[test]
    fn a_bad_ring_description_is_refused_before_mmap() {
        // fd -1 would make mmap fail with EBADF; EPROTO shows it never ran.
        let bad = ring_resp(3, 4096);
        assert_eq!(map_ring(-1, &bad).map(|_| ()), Err(Errno::EPROTO));
        let good = file_resp(4, 4096);
        // EBADF.
        assert_eq!(map_ring(-1, &good).map(|_| ()), Err(Errno::from_raw(9)));
    }
}
