// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Receive work queues (WQs) and their indirection tables.
//!
//! A WQ is created through the kernel with a mapped ring like an SRQ's,
//! takes receives into it without entering the kernel (`ibv_post_wq_recv`,
//! which calls the `post_recv` the provider puts in the `ibv_wq`), and is
//! modified (RESET, RDY, ERR) and destroyed through the kernel. The kernel
//! consumes its WQEs only while it is RDY, for the RSS QPs whose
//! indirection tables name it; on ERR it flushes them to the WQ's CQ, on
//! RESET it drops them. An indirection table is libibverbs'
//! `struct ibv_rwq_ind_table`, which the provider allocates and the kernel
//! command fills in; neither carries driver data but the WQ's ring.

use core::cell::UnsafeCell;
use core::ffi::c_int;
use core::mem::{offset_of, size_of_val};
use core::ptr::{self, NonNull};
use core::slice;

use super::lock::SpinLock;
use super::mapping::{WqMapping, map_recv_queue};
use super::qp::post_recv_to;
use super::{
    cmd_result, drop_box, errno_ret, ibv_cmd_create_rwq_ind_table, ibv_cmd_create_wq,
    ibv_cmd_destroy_rwq_ind_table, ibv_cmd_destroy_wq, ibv_cmd_modify_wq, set_errno, try_box,
};
use crate::abi::{driver, ibv, uverbs};
use crate::errno::Errno;
use crate::qp::RecvQueue;
use crate::rwq::{check_ind_table_init_attr, check_wq_attr, check_wq_init_attr};

/// A roxe WQ: libibverbs' `ibv_wq`, then the ring.
///
/// [`create_wq`] allocates it with `try_box`, [`destroy_wq`] frees it.
#[repr(C)]
pub(super) struct Wq {
    /// libibverbs' part. libibverbs writes `state` (`ibv_cmd_modify_wq`)
    /// and `events_completed` from any thread, so it is an `UnsafeCell`,
    /// and roxe touches it only through raw pointers.
    wq: UnsafeCell<ibv::Wq>,
    /// The ring; `None` until creation has mapped it.
    rq: SpinLock<Option<RecvQueue<WqMapping>>>,
}

impl Wq {
    /// A WQ before the kernel knows it: an `ibv_wq` in RESET whose
    /// `post_recv` is roxe's, no ring.
    fn new() -> Self {
        Self {
            wq: UnsafeCell::new(ibv::Wq {
                state: ibv::WQS_RESET,
                post_recv: Some(post_wq_recv),
                ..ibv::Wq::ZERO
            }),
            rq: SpinLock::new(None),
        }
    }

    /// The `Wq` around an `ibv_wq`.
    ///
    /// # Safety
    ///
    /// `ibwq` is the `ibv_wq` of a live `Wq` that stays live for `'a`.
    unsafe fn from_ibv<'a>(ibwq: *mut ibv::Wq) -> &'a Self {
        // SAFETY: `ibv_wq` is the `wq` field of a live `Wq` per the
        // contract.
        unsafe { &*ibwq.byte_sub(offset_of!(Wq, wq)).cast::<Self>() }
    }

    /// This WQ as libibverbs' `ibv_wq`.
    fn ibv(&self) -> *mut ibv::Wq {
        self.wq.get()
    }
}

/// The attributes `create_wq` hands `ibv_cmd_create_wq`: the caller's,
/// without `comp_mask` and creation flags (which [`check_wq_init_attr`]
/// has found empty or unset). The write fallback of the command sends
/// `create_flags` whatever `comp_mask` says.
fn command_attr(a: &ibv::WqInitAttr) -> ibv::WqInitAttr {
    ibv::WqInitAttr {
        comp_mask: 0,
        create_flags: 0,
        ..*a
    }
}

/// `verbs_context_ops.create_wq`: a receive WQ (`ibv_create_wq`).
///
/// Returns NULL with `errno` set on failure: `EINVAL` for unknown
/// `comp_mask` bits or a missing PD or CQ, `EOPNOTSUPP` for a type other
/// than `IBV_WQT_RQ` or any creation flag ([`check_wq_init_attr`]),
/// `EPROTO` if the kernel's ring description is invalid, or the kernel's
/// or `mmap`'s errno. On success `attr->max_wr` and `attr->max_sge` hold
/// what the kernel granted, and the WQ is in RESET. libibverbs' inline
/// `ibv_create_wq` then fills in `wq_context`, the mutex, the condition
/// variable and the event count.
///
/// # Safety
///
/// `context` is an open roxe context; `attr` is NULL or a readable and
/// writable `ibv_wq_init_attr` whose PD and CQ are NULL or live roxe
/// objects of `context`.
pub(super) unsafe extern "C" fn create_wq(
    context: *mut ibv::Context,
    attr: *mut ibv::WqInitAttr,
) -> *mut ibv::Wq {
    // SAFETY: NULL or valid per the contract.
    let Some(a) = (unsafe { attr.as_mut() }) else {
        set_errno(Errno::EINVAL);
        return ptr::null_mut();
    };
    if let Err(err) = check_wq_init_attr(a.comp_mask, a.wq_type, a.create_flags) {
        set_errno(err);
        return ptr::null_mut();
    }
    // `ibv_cmd_create_wq` reads both handles through these pointers.
    if a.pd.is_null() || a.cq.is_null() {
        set_errno(Errno::EINVAL);
        return ptr::null_mut();
    }
    let Some(wq) = try_box(Wq::new()) else {
        set_errno(Errno::ENOMEM);
        return ptr::null_mut();
    };
    // SAFETY: `wq` is live and only this thread knows it.
    let wq_ref = unsafe { wq.as_ref() };
    let mut kattr = command_attr(a);
    let mut cmd = ibv::CreateWq::default();
    let mut resp = driver::CreateWqResp::default();
    // SAFETY: `context`, the PD and the CQ are live per the contract and
    // the checks above; the `ibv_wq` is at its final address (the kernel's
    // user handle); `cmd` is writable for its core size (no driver input);
    // `resp` is writable for its full size, with the driver part right
    // after `ibv_resp`.
    let ret = unsafe {
        ibv_cmd_create_wq(
            context,
            &raw mut kattr,
            wq_ref.ibv(),
            &raw mut cmd,
            size_of_val(&cmd),
            &raw mut resp.ibv_resp,
            size_of_val(&resp),
        )
    };
    if let Err(err) = cmd_result(ret) {
        // SAFETY: `wq` came from `try_box` and was never published.
        unsafe { drop_box(wq) };
        set_errno(err);
        return ptr::null_mut();
    }
    // What the command wrote back: the granted limits.
    a.max_wr = kattr.max_wr;
    a.max_sge = kattr.max_sge;
    // SAFETY: `context` is open per the contract.
    let fd = unsafe { (*context).cmd_fd };
    match map_recv_queue(fd, &resp.drv, kattr.max_sge) {
        Ok(rq) => {
            *wq_ref.rq.lock() = Some(rq);
            wq_ref.ibv()
        }
        Err(err) => {
            // SAFETY: the kernel WQ exists and nothing else knows it; as
            // for QPs, a failure here leaves it to the context's cleanup.
            unsafe { ibv_cmd_destroy_wq(wq_ref.ibv()) };
            // SAFETY: `wq` is unpublished, and the kernel WQ is gone.
            unsafe { drop_box(wq) };
            set_errno(err);
            ptr::null_mut()
        }
    }
}

/// `verbs_context_ops.modify_wq`: moves the WQ to another state
/// (`IBV_WQ_ATTR_STATE`, optionally with `IBV_WQ_ATTR_CURR_STATE`).
/// Returns 0 or a positive errno, which `ibv_modify_wq` returns unchanged.
///
/// Fails with `EINVAL` for unknown `attr_mask` bits and `EOPNOTSUPP` for
/// `IBV_WQ_ATTR_FLAGS` ([`check_wq_attr`]), before the kernel; the kernel
/// judges the transition. On success `ibv_cmd_modify_wq` has recorded the
/// new state in `wq->state`. The ring needs nothing from the provider:
/// the kernel flushes the outstanding WQEs on ERR and drops them on RESET
/// by moving its consumer index, and posting goes on from the provider's
/// producer index either way.
///
/// # Safety
///
/// `ibwq` is a live roxe WQ and `attr` NULL or a readable `ibv_wq_attr`.
pub(super) unsafe extern "C" fn modify_wq(ibwq: *mut ibv::Wq, attr: *mut ibv::WqAttr) -> c_int {
    // SAFETY: NULL or readable per the contract.
    let Some(a) = (unsafe { attr.as_ref() }) else {
        return Errno::EINVAL.get();
    };
    if let Err(err) = check_wq_attr(a.attr_mask) {
        return err.get();
    }
    let mut cmd = ibv::ModifyWq::default();
    // SAFETY: `ibwq` is a live WQ of an open context and `attr` readable
    // per the contract; `cmd` is writable for its core size (no driver
    // input).
    errno_ret(cmd_result(unsafe {
        ibv_cmd_modify_wq(ibwq, attr, &raw mut cmd, size_of_val(&cmd))
    }))
}

/// `verbs_context_ops.destroy_wq`: destroys the kernel WQ, then unmaps
/// the ring and frees the WQ. Returns 0 or a positive errno; on failure
/// (for example while an indirection table still names it) the WQ stays
/// valid.
///
/// # Safety
///
/// `ibwq` is a live roxe WQ that no other thread uses; the caller does not
/// use it after a successful call.
pub(super) unsafe extern "C" fn destroy_wq(ibwq: *mut ibv::Wq) -> c_int {
    // SAFETY: `ibwq` is a live WQ of an open context per the contract.
    let ret = unsafe { ibv_cmd_destroy_wq(ibwq) };
    if let Err(err) = cmd_result(ret) {
        return err.get();
    }
    // SAFETY: as in `Wq::from_ibv`.
    let wq = unsafe { ibwq.byte_sub(offset_of!(Wq, wq)) }.cast::<Wq>();
    if let Some(wq) = NonNull::new(wq) {
        // SAFETY: every roxe WQ comes from `try_box` in `create_wq`; the
        // kernel WQ is gone and nothing uses it.
        unsafe { drop_box(wq) };
    }
    0
}

/// `ibv_wq.post_recv`, which `ibv_post_wq_recv` calls: writes the work
/// requests into the WQ's ring and publishes them, without entering the
/// kernel, exactly as `ibv_post_srq_recv` does for an SRQ. Posting is
/// allowed in every state; the kernel takes the WQEs while the WQ is RDY.
///
/// Returns 0, or a positive errno with `*bad_wr` set to the first work
/// request that was not posted: `EINVAL` for too many SGEs, `ENOMEM` when
/// the ring is full.
///
/// # Safety
///
/// `ibwq` is a live roxe WQ; `wr` is NULL or a valid list of
/// `ibv_recv_wr`; `bad_wr` is NULL or writable.
unsafe extern "C" fn post_wq_recv(
    ibwq: *mut ibv::Wq,
    wr: *mut ibv::RecvWr,
    bad_wr: *mut *mut ibv::RecvWr,
) -> c_int {
    // SAFETY: `ibwq` is a live roxe WQ per the contract.
    let wq = unsafe { Wq::from_ibv(ibwq) };
    // SAFETY: per the contract.
    unsafe { post_recv_to(&wq.rq, true, wr, bad_wr) }
}

/// `verbs_context_ops.create_rwq_ind_table`: a table of
/// `1 << log_ind_tbl_size` WQs for RSS QPs (`ibv_create_rwq_ind_table`).
///
/// Returns NULL with `errno` set on failure: `EINVAL` for a `comp_mask`
/// bit, a table larger than the kernel takes
/// ([`check_ind_table_init_attr`]) or a NULL table or entry; `ENOMEM`; or
/// the kernel's errno (for example `EINVAL` for a WQ of another context).
///
/// # Safety
///
/// `context` is an open roxe context; `init_attr` is NULL or a readable
/// `ibv_rwq_ind_table_init_attr` whose `ind_tbl` is NULL or points to
/// `1 << log_ind_tbl_size` readable entries, each NULL or a live WQ.
pub(super) unsafe extern "C" fn create_rwq_ind_table(
    context: *mut ibv::Context,
    init_attr: *mut ibv::RwqIndTableInitAttr,
) -> *mut ibv::RwqIndTable {
    // SAFETY: NULL or readable per the contract; the reference ends
    // before the command reads the attributes again.
    let Some(a) = (unsafe { init_attr.as_ref() }) else {
        set_errno(Errno::EINVAL);
        return ptr::null_mut();
    };
    let checked = check_ind_table_init_attr(a.comp_mask, a.log_ind_tbl_size).and_then(|n| {
        if a.ind_tbl.is_null() {
            Err(Errno::EINVAL)
        } else {
            Ok(n)
        }
    });
    let entries = match checked {
        Ok(n) => n,
        Err(err) => {
            set_errno(err);
            return ptr::null_mut();
        }
    };
    // SAFETY: `ind_tbl` is not NULL and holds `1 << log_ind_tbl_size`
    // entries per the contract, which `entries` is.
    let wqs = unsafe { slice::from_raw_parts(a.ind_tbl, entries) };
    // `ibv_cmd_create_rwq_ind_table` reads each WQ's handle.
    if wqs.iter().any(|wq| wq.is_null()) {
        set_errno(Errno::EINVAL);
        return ptr::null_mut();
    }
    let Some(table) = try_box(ibv::RwqIndTable::ZERO) else {
        set_errno(Errno::ENOMEM);
        return ptr::null_mut();
    };
    let mut resp = uverbs::ExCreateRwqIndTableResp::default();
    // SAFETY: `context` is open and the attributes valid with every entry
    // a live WQ (the contract and the checks above), and the table is at
    // most `1 << 13` entries, so the command's stack copy is small;
    // `table` is a live, zeroed `ibv_rwq_ind_table` the command fills in;
    // `resp` is writable for its core size (no driver output). The
    // command returns 0 or a positive errno.
    let ret = unsafe {
        ibv_cmd_create_rwq_ind_table(
            context,
            init_attr,
            table.as_ptr(),
            &raw mut resp,
            size_of_val(&resp),
        )
    };
    if let Err(err) = cmd_result(ret) {
        // SAFETY: `table` came from `try_box` and was never published.
        unsafe { drop_box(table) };
        set_errno(err);
        return ptr::null_mut();
    }
    table.as_ptr()
}

/// `verbs_context_ops.destroy_rwq_ind_table`: destroys the kernel's table,
/// then frees it. Returns 0 or a positive errno, which
/// `ibv_destroy_rwq_ind_table` returns unchanged; on failure (for example
/// while an RSS QP still uses it) the table stays valid.
///
/// # Safety
///
/// `table` is NULL or a table [`create_rwq_ind_table`] returned that no
/// other thread uses; the caller does not use it after a successful call.
pub(super) unsafe extern "C" fn destroy_rwq_ind_table(table: *mut ibv::RwqIndTable) -> c_int {
    let Some(table) = NonNull::new(table) else {
        return Errno::EINVAL.get();
    };
    // SAFETY: a live table of an open context, per the contract.
    let ret = unsafe { ibv_cmd_destroy_rwq_ind_table(table.as_ptr()) };
    if let Err(err) = cmd_result(ret) {
        return err.get();
    }
    // SAFETY: it came from `try_box` in `create_rwq_ind_table`; the
    // kernel's table is gone and nothing uses it.
    unsafe { drop_box(table) };
    0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ffi::last_errno;
    use crate::ffi::mapping::tests::Backing;
    use roxe_uapi::{RING_HEADER_SIZE, RingInfo};

    /// A WQ as `create_wq` leaves it, over a file-backed ring of
    /// `num_slots` 64-byte slots (3 SGEs each), without a kernel.
    struct TestWq {
        wq: NonNull<Wq>,
        ring: Backing,
    }

    impl TestWq {
        fn new(num_slots: u32) -> Self {
            let len = RING_HEADER_SIZE as u64 + u64::from(num_slots) * 64;
            let ring = Backing::new(len);
            let info = RingInfo {
                mmap_offset: 0,
                mmap_size: len,
                num_slots,
                slot_size: 64,
            };
            let wq = try_box(Wq::new()).expect("allocate a WQ");
            let rq = map_recv_queue(ring.fd(), &info, 3).expect("maps");
            // SAFETY: `wq` is live and only this test uses it.
            *unsafe { wq.as_ref() }.rq.lock() = Some(rq);
            Self { wq, ring }
        }

        fn ibv(&self) -> *mut ibv::Wq {
            // SAFETY: `wq` is live.
            unsafe { self.wq.as_ref() }.ibv()
        }

        /// Posts `wrs` (linked here) as `ibv_post_wq_recv` does: through
        /// the `post_recv` in the `ibv_wq`.
        fn post(&self, wrs: &mut [ibv::RecvWr]) -> (c_int, *mut ibv::RecvWr) {
            let base = wrs.as_mut_ptr();
            let n = wrs.len();
            for (i, w) in wrs.iter_mut().enumerate() {
                w.next = if i + 1 < n {
                    base.wrapping_add(i + 1)
                } else {
                    ptr::null_mut()
                };
            }
            let mut bad = ptr::dangling_mut();
            // SAFETY: the WQ is live; only the pointer is read.
            let post = unsafe { (*self.ibv()).post_recv }.expect("roxe's post_recv");
            // SAFETY: the WQ is live and the list valid.
            let ret = unsafe { post(self.ibv(), base, &raw mut bad) };
            (ret, bad)
        }

        /// The `wr_id` in slot `slot`.
        fn wr_id(&self, slot: u64) -> u64 {
            let bytes = self.ring.read_at(RING_HEADER_SIZE as u64 + slot * 64, 8);
            u64::from_ne_bytes(bytes.try_into().expect("8 bytes"))
        }
    }

    impl Drop for TestWq {
        fn drop(&mut self) {
            // SAFETY: `wq` came from `try_box` and is no longer used.
            unsafe { drop_box(self.wq) };
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

    #[test]
    fn a_new_wq_is_in_reset_with_roxe_post_recv() {
        let wq = TestWq::new(2);
        // SAFETY: the WQ is live; only plain fields are read.
        let (state, post) = unsafe { ((*wq.ibv()).state, (*wq.ibv()).post_recv) };
        assert_eq!(state, ibv::WQS_RESET);
        // The posting tests call through it and find the ring written.
        assert!(post.is_some());
    }

    #[test]
    fn post_wq_recv_writes_the_ring_like_an_srq() {
        let wq = TestWq::new(2);
        let mut sge = [ibv::Sge {
            addr: 0x1000,
            length: 64,
            lkey: 7,
        }];
        let mut wrs = [
            recv_wr(1, &mut sge),
            recv_wr(2, &mut []),
            recv_wr(3, &mut []),
        ];
        let (ret, bad) = wq.post(&mut wrs);
        assert_eq!(ret, Errno::ENOMEM.get(), "two slots for three WRs");
        assert_eq!(bad, &raw mut wrs[2]);
        assert_eq!(wq.ring.producer(), 2, "the two are published");
        assert_eq!((wq.wr_id(0), wq.wr_id(1)), (1, 2));
        // The WQE: wr_id, num_sge, then the SGE.
        let slot = wq.ring.read_at(RING_HEADER_SIZE as u64, 32);
        assert_eq!(slot[8..12], 1u32.to_ne_bytes());
        assert_eq!(slot[16..24], 0x1000u64.to_ne_bytes());
        assert_eq!(slot[28..32], 7u32.to_ne_bytes());
        // Once the kernel has consumed one, there is room for one.
        wq.ring.set_consumer(1);
        let (ret, bad) = wq.post(&mut wrs[2..]);
        assert_eq!((ret, bad), (0, ptr::null_mut()));
        assert_eq!((wq.ring.producer(), wq.wr_id(0)), (3, 3));
    }

    #[test]
    fn post_wq_recv_refuses_like_an_srq() {
        let wq = TestWq::new(4);
        // More SGEs than the kernel granted (3): nothing is posted.
        let mut sges = [ibv::Sge::default(); 4];
        let mut wrs = [recv_wr(1, &mut sges)];
        let (ret, bad) = wq.post(&mut wrs);
        assert_eq!((ret, bad), (Errno::EINVAL.get(), &raw mut wrs[0]));
        assert_eq!(wq.ring.producer(), 0);
        // An empty list, and a NULL `bad_wr`.
        let mut bad = ptr::dangling_mut();
        // SAFETY: the WQ is live; the list is empty.
        let ret = unsafe { post_wq_recv(wq.ibv(), ptr::null_mut(), &raw mut bad) };
        assert_eq!((ret, bad), (0, ptr::null_mut()));
        let mut one = recv_wr(9, &mut []);
        // SAFETY: the WQ is live and the list valid.
        let ret = unsafe { post_wq_recv(wq.ibv(), &raw mut one, ptr::null_mut()) };
        assert_eq!(ret, Errno::EINVAL.get());
        assert_eq!(wq.ring.producer(), 0);
    }

    #[test]
    fn posting_does_not_depend_on_the_state() {
        let wq = TestWq::new(4);
        for (n, state) in [ibv::WQS_RESET, ibv::WQS_RDY, ibv::WQS_ERR]
            .into_iter()
            .enumerate()
        {
            // SAFETY: the WQ is live and only this thread uses it, as
            // `ibv_cmd_modify_wq` would write the state.
            unsafe { (*wq.ibv()).state = state };
            let mut wrs = [recv_wr(n as u64, &mut [])];
            assert_eq!(wq.post(&mut wrs), (0, ptr::null_mut()), "state {state}");
        }
        assert_eq!(wq.ring.producer(), 3);
    }

    #[test]
    fn concurrent_posts_each_get_their_own_slots() {
        const PER_THREAD: u64 = 32;
        let wq = TestWq::new(64);
        // CAST: carried across threads as an address; the WQ outlives them.
        let addr = wq.ibv() as usize;
        std::thread::scope(|s| {
            for t in 0..2u64 {
                s.spawn(move || {
                    let ibwq = ptr::with_exposed_provenance_mut::<ibv::Wq>(addr);
                    for i in 0..PER_THREAD {
                        let mut wr = recv_wr(t * 1000 + i, &mut []);
                        let mut bad = ptr::null_mut();
                        // SAFETY: the WQ is live for the whole scope, and
                        // posting takes its lock.
                        let ret = unsafe { post_wq_recv(ibwq, &raw mut wr, &raw mut bad) };
                        assert_eq!(ret, 0);
                    }
                });
            }
        });
        assert_eq!(wq.ring.producer(), 64);
        let mut ids: Vec<u64> = (0..64).map(|slot| wq.wr_id(slot)).collect();
        ids.sort_unstable();
        let expected: Vec<u64> = (0..PER_THREAD).chain(1000..1000 + PER_THREAD).collect();
        assert_eq!(ids, expected);
    }

    fn init_attr(comp_mask: u32, wq_type: u32, create_flags: u32) -> ibv::WqInitAttr {
        ibv::WqInitAttr {
            wq_context: ptr::null_mut(),
            wq_type,
            max_wr: 16,
            max_sge: 2,
            // Never dereferenced: every case is refused first.
            pd: ptr::dangling_mut(),
            cq: ptr::dangling_mut(),
            comp_mask,
            create_flags,
        }
    }

    #[test]
    fn create_wq_refuses_before_the_kernel() {
        let rq = ibv::WQT_RQ;
        let flags = ibv::WQ_INIT_ATTR_FLAGS;
        let no_pd = ibv::WqInitAttr {
            pd: ptr::null_mut(),
            ..init_attr(0, rq, 0)
        };
        let no_cq = ibv::WqInitAttr {
            cq: ptr::null_mut(),
            ..init_attr(0, rq, 0)
        };
        for (what, mut attr, err) in [
            (
                "an unknown mask bit",
                init_attr(1 << 1, rq, 0),
                Errno::EINVAL,
            ),
            ("another type", init_attr(0, 1, 0), Errno::EOPNOTSUPP),
            (
                "a creation flag",
                init_attr(flags, rq, 1),
                Errno::EOPNOTSUPP,
            ),
            ("no PD", no_pd, Errno::EINVAL),
            ("no CQ", no_cq, Errno::EINVAL),
        ] {
            // SAFETY: every case fails its checks before the context (NULL
            // here), the PD or the CQ is used.
            let wq = unsafe { create_wq(ptr::null_mut(), &raw mut attr) };
            assert!(wq.is_null(), "{what}");
            assert_eq!(last_errno(), err, "{what}");
        }
        // SAFETY: a NULL attribute is refused first.
        assert!(unsafe { create_wq(ptr::null_mut(), ptr::null_mut()) }.is_null());
        assert_eq!(last_errno(), Errno::EINVAL);
    }

    #[test]
    fn the_command_gets_no_flags() {
        let a = init_attr(ibv::WQ_INIT_ATTR_FLAGS, ibv::WQT_RQ, 0);
        let stale = ibv::WqInitAttr {
            comp_mask: 0,
            create_flags: 0xff,
            ..a
        };
        for a in [a, stale] {
            let c = command_attr(&a);
            assert_eq!((c.comp_mask, c.create_flags), (0, 0));
            assert_eq!((c.wq_type, c.max_wr, c.max_sge), (ibv::WQT_RQ, 16, 2));
            assert_eq!((c.pd, c.cq), (a.pd, a.cq));
        }
    }

    #[test]
    fn modify_wq_refuses_before_the_kernel() {
        let wq = TestWq::new(2);
        for (mask, err) in [
            (ibv::WQ_ATTR_FLAGS, Errno::EOPNOTSUPP),
            (ibv::WQ_ATTR_STATE | ibv::WQ_ATTR_FLAGS, Errno::EOPNOTSUPP),
            (ibv::WQ_ATTR_RESERVED, Errno::EINVAL),
        ] {
            let mut attr = ibv::WqAttr {
                attr_mask: mask,
                wq_state: ibv::WQS_RDY,
                ..ibv::WqAttr::default()
            };
            // SAFETY: the WQ is live; the command is never reached.
            let ret = unsafe { modify_wq(wq.ibv(), &raw mut attr) };
            assert_eq!(ret, err.get(), "mask {mask:#x}");
        }
        // SAFETY: a NULL attribute is refused first.
        let ret = unsafe { modify_wq(wq.ibv(), ptr::null_mut()) };
        assert_eq!(ret, Errno::EINVAL.get());
        // SAFETY: the WQ is live.
        assert_eq!(unsafe { (*wq.ibv()).state }, ibv::WQS_RESET);
    }

    #[test]
    fn create_rwq_ind_table_refuses_before_the_kernel() {
        // Never dereferenced: only checked for NULL.
        let live = ptr::dangling_mut::<ibv::Wq>();
        let mut two = [live, live];
        let mut holed = [live, ptr::null_mut()];
        let table = |comp_mask, log_ind_tbl_size, ind_tbl: *mut *mut ibv::Wq| {
            let mut attr = ibv::RwqIndTableInitAttr {
                log_ind_tbl_size,
                ind_tbl,
                comp_mask,
            };
            // SAFETY: every case fails its checks before the context (NULL
            // here) or a WQ is used.
            let t = unsafe { create_rwq_ind_table(ptr::null_mut(), &raw mut attr) };
            assert!(t.is_null());
            last_errno()
        };
        assert_eq!(table(1, 1, two.as_mut_ptr()), Errno::EINVAL);
        assert_eq!(table(0, 14, two.as_mut_ptr()), Errno::EINVAL);
        assert_eq!(table(0, 1, ptr::null_mut()), Errno::EINVAL);
        assert_eq!(table(0, 1, holed.as_mut_ptr()), Errno::EINVAL);
        // SAFETY: a NULL attribute is refused first.
        let t = unsafe { create_rwq_ind_table(ptr::null_mut(), ptr::null_mut()) };
        assert!(t.is_null());
        assert_eq!(last_errno(), Errno::EINVAL);
        // SAFETY: NULL is refused before the command.
        let ret = unsafe { destroy_rwq_ind_table(ptr::null_mut()) };
        assert_eq!(ret, Errno::EINVAL.get());
    }
}
