// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Tests of the QP ops over file-backed rings, without a kernel.

use super::ex::install_wr_ops;
use super::post::post_one_send;
use super::*;
use crate::ffi::mapping::tests::Backing;
use crate::qp::BindVia;
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
            .enable_wr(Dest::of(qp_type))
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
    let u32_at = |b: &[u8], off: usize| u32::from_ne_bytes(b[off..off + 4].try_into().expect("4"));
    let u64_at = |b: &[u8], off: usize| u64::from_ne_bytes(b[off..off + 8].try_into().expect("8"));
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
    assert!(o.wr_set_ud_addr.is_some() && o.wr_set_xrc_srqn.is_some());
    assert!(o.wr_send.is_some() && o.wr_rdma_write.is_some() && o.wr_bind_mw.is_some());
    assert!(o.wr_send_imm.is_none() && o.wr_rdma_read.is_none());
    assert!(o.wr_atomic_cmp_swp.is_none() && o.wr_local_inv.is_none());
    assert!(o.wr_send_tso.is_none());
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
    let u32_at = |b: &[u8], off: usize| u32::from_ne_bytes(b[off..off + 4].try_into().expect("4"));
    let u64_at = |b: &[u8], off: usize| u64::from_ne_bytes(b[off..off + 8].try_into().expect("8"));
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
    // A receive ring with an SRQ, and one for an XRC send QP.
    let xrc = rings(ibv::QPT_XRC_SEND, false).recv;
    for (resp, has_rq) in [(bad_sq, true), (bad_rq, true), (good, false), (good, xrc)] {
        assert_eq!(
            map_queues(-1, &resp, &cap, has_rq).map(|_| ()),
            Err(Errno::EPROTO)
        );
    }
    let no_rq = roxe_uapi::CreateQpResp {
        rq: RingInfo::default(),
        ..good
    };
    assert_eq!(
        map_queues(-1, &no_rq, &cap, true).map(|_| ()),
        Err(Errno::EPROTO)
    );
    assert_eq!(
        map_queues(-1, &good, &cap, true).map(|_| ()),
        Err(Errno::from_raw(9))
    );
    // Granted limits beyond the slot.
    let sq = Backing::new(4096);
    let greedy = ibv::QpCap {
        max_send_sge: 4,
        ..cap
    };
    assert_eq!(
        map_queues(sq.fd(), &no_rq, &greedy, false).map(|_| ()),
        Err(Errno::EPROTO)
    );
    assert!(map_queues(sq.fd(), &no_rq, &cap, false).is_ok_and(|(_, rq)| rq.is_none()));
    // An XRC send QP's response: the send ring, an all-zero receive ring.
    assert!(map_queues(sq.fd(), &no_rq, &cap, xrc).is_ok_and(|(_, rq)| rq.is_none()));
}

/// An XRC send QP as `create` leaves it: the send ring of [`TestQp`]
/// (with the `ibv_wr_*` interface and the builders of `ops`, if given),
/// no receive ring.
fn xrc_send_qp(state: u32, ops: Option<u64>) -> TestQp {
    let qp = match ops {
        Some(ops) => TestQp::with_wr(ibv::QPT_XRC_SEND, state, ops),
        None => TestQp::new(ibv::QPT_XRC_SEND, state),
    };
    // SAFETY: `qp` is live and only this test uses it.
    *unsafe { qp.qp.as_ref() }.rq.lock() = None;
    qp
}

#[test]
fn an_xrc_send_wqe_carries_the_remote_srq_number() {
    let qp = xrc_send_qp(ibv::QPS_RTS, None);
    let mut s = [ibv::Sge {
        addr: 0x1000,
        length: 8,
        lkey: 5,
    }];
    let mut write = send_wr(1, ibv::WR_RDMA_WRITE, ibv::SEND_SIGNALED, &mut s);
    write.wr = ibv::SendWrWr {
        rdma: ibv::RdmaWr {
            remote_addr: 0xfeed_0000,
            rkey: 0x77,
        },
    };
    write.remote_srqn = 0x00ab_cdef;
    let mut send = send_wr(2, ibv::WR_SEND, 0, &mut []);
    send.remote_srqn = 0x42;
    // SAFETY: `qp` is live and only this test uses it.
    let q = unsafe { qp.qp.as_ref() };
    let mut guard = q.sq.lock();
    let sq = guard.as_mut().expect("mapped");
    for wr in [&write, &send] {
        // SAFETY: the work requests are valid.
        unsafe { post_one_send(ibv::QPT_XRC_SEND, sq, wr, BindVia::WorkRequest) }.expect("fits");
    }
    assert!(sq.publish());
    drop(guard);
    let u32_at = |b: &[u8], off: usize| u32::from_ne_bytes(b[off..off + 4].try_into().expect("4"));
    let u64_at = |b: &[u8], off: usize| u64::from_ne_bytes(b[off..off + 8].try_into().expect("8"));
    let w = slot_bytes(&qp.sq, 0, 128, 88);
    assert_eq!((u64_at(&w, 0), u32_at(&w, 8)), (1, ibv::WR_RDMA_WRITE));
    assert_eq!(u32_at(&w, 60), 0x00ab_cdef, "remote_qpn: the SRQ number");
    assert_eq!((u32_at(&w, 28), u64_at(&w, 32)), (0x77, 0xfeed_0000));
    assert_eq!((u32_at(&w, 56), u32_at(&w, 64)), (0, 0), "no UD fields");
    assert_eq!(u64_at(&w, 72), 0x1000, "the SGE");
    let w = slot_bytes(&qp.sq, 1, 128, 72);
    assert_eq!((u64_at(&w, 0), u32_at(&w, 60)), (2, 0x42));
    // The same work request on an RC QP carries no number.
    let rc = TestQp::new(ibv::QPT_RC, ibv::QPS_RTS);
    // SAFETY: as above.
    let q = unsafe { rc.qp.as_ref() };
    let mut guard = q.sq.lock();
    let sq = guard.as_mut().expect("mapped");
    // SAFETY: as above.
    unsafe { post_one_send(ibv::QPT_RC, sq, &send, BindVia::WorkRequest) }.expect("fits");
    assert!(sq.publish());
    drop(guard);
    assert_eq!(u32_at(&slot_bytes(&rc.sq, 0, 128, 72), 60), 0);
}

#[test]
fn the_xrc_builder_sets_the_remote_srq_number() {
    let ops = crate::qp::XRC_SEND_OPS;
    let qp = xrc_send_qp(ibv::QPS_RTS, Some(ops));
    let o = qp.ops();
    assert!(o.wr_set_xrc_srqn.is_some() && o.wr_rdma_read.is_some());
    assert!(o.wr_atomic_write.is_none(), "no atomic write on XRC");
    let ex = qp.ex();
    // SAFETY: the QP is live and offers these ops; the batch is opened
    // and ended on this thread. It is aborted: completing it would ring
    // a doorbell, which needs a kernel.
    unsafe {
        (o.wr_start.expect("set"))(ex);
        qp.set_wr(7, 0);
        (o.wr_rdma_read.expect("set"))(ex, 0x77, 0xfeed_0000);
        (o.wr_set_xrc_srqn.expect("set"))(ex, 0x00ab_cdef);
        (o.wr_set_sge.expect("set"))(ex, 0x905, 0x1000, 64);
        // Starting the next writes the first into the ring.
        (o.wr_send.expect("set"))(ex);
    }
    let w = slot_bytes(&qp.sq, 0, 128, 72);
    let u32_at = |off: usize| u32::from_ne_bytes(w[off..off + 4].try_into().expect("4"));
    assert_eq!((u32_at(8), u32_at(60)), (ibv::WR_RDMA_READ, 0x00ab_cdef));
    // SAFETY: as above.
    unsafe { (o.wr_abort.expect("set"))(ex) };
    assert_eq!(qp.sq.producer(), 0, "nothing was published");
    // A send without `wr_set_xrc_srqn` fails the batch.
    // SAFETY: as above.
    let ret = refused_batch(&qp, |o, ex| unsafe {
        (o.wr_send.expect("set"))(ex);
        (o.wr_set_sge.expect("set"))(ex, 1, 0x1000, 8);
    });
    assert_eq!(ret, Errno::EINVAL.get());
    // On an RC QP the setter fails the batch.
    let rc = TestQp::with_wr(ibv::QPT_RC, ibv::QPS_RTS, ibv::QP_EX_WITH_SEND);
    // SAFETY: as above.
    let ret = refused_batch(&rc, |o, ex| unsafe {
        (o.wr_send.expect("set"))(ex);
        (o.wr_set_xrc_srqn.expect("set"))(ex, 1);
    });
    assert_eq!(ret, Errno::EINVAL.get());
}

#[test]
fn an_xrc_send_qp_has_no_receive_queue() {
    let qp = xrc_send_qp(ibv::QPS_RTS, None);
    let mut wrs = [recv_wr(1, &mut [])];
    let (ret, bad) = qp.recv(&mut wrs);
    assert_eq!((ret, bad), (Errno::EINVAL.get(), &raw mut wrs[0]));
}

#[test]
fn an_xrc_receive_qp_has_no_rings_and_refuses_posting() {
    // What `create` and `open_qp` leave: the kernel's QP and no rings.
    let qp = try_box(Qp::new(ibv::QPT_XRC_RECV)).expect("allocate a QP");
    // SAFETY: `qp` is live and only this test uses it.
    let q = unsafe { qp.as_ref() };
    assert!(q.sq.lock().is_none() && q.rq.lock().is_none());
    // SAFETY: as above; no `ibv_wr_*` interface.
    assert_eq!(unsafe { (*q.vqp.get()).comp_mask }, 0);
    for state in [ibv::QPS_INIT, ibv::QPS_RTS] {
        q.state.store(state, Ordering::Relaxed);
        let mut swr = send_wr(1, ibv::WR_SEND, 0, &mut []);
        let mut rwr = recv_wr(2, &mut []);
        let (mut sbad, mut rbad) = (ptr::null_mut(), ptr::null_mut());
        // SAFETY: the QP is live and the lists valid; both are refused
        // before any ring or doorbell.
        let (sret, rret) = unsafe {
            (
                post_send(q.ibv(), &raw mut swr, &raw mut sbad),
                post_recv(q.ibv(), &raw mut rwr, &raw mut rbad),
            )
        };
        assert_eq!((sret, sbad), (Errno::EINVAL.get(), &raw mut swr));
        assert_eq!((rret, rbad), (Errno::EINVAL.get(), &raw mut rwr));
    }
    // SAFETY: `qp` came from `try_box` and is no longer used.
    unsafe { drop_box(qp) };
}

#[test]
fn open_qp_and_create_qp_ex_refuse_before_the_kernel() {
    use crate::ffi::last_errno;
    let mut xrcd = verbs::Xrcd::ZERO;
    let open = |comp_mask, qp_type, xrcd: *mut ibv::Xrcd| {
        let mut attr = ibv::QpOpenAttr {
            comp_mask,
            qp_num: 0x11,
            xrcd,
            qp_context: ptr::null_mut(),
            qp_type,
        };
        // SAFETY: every case fails its checks before the context (NULL
        // here) or the domain is used.
        let qp = unsafe { open_qp(ptr::null_mut(), &raw mut attr) };
        assert!(qp.is_null());
        last_errno()
    };
    let all = crate::qp::REQUIRED_OPEN_ATTR_MASK;
    let x = &raw mut xrcd.xrcd;
    assert_eq!(open(all, ibv::QPT_RC, x), Errno::EINVAL);
    assert_eq!(
        open(ibv::QP_OPEN_ATTR_NUM, ibv::QPT_XRC_RECV, x),
        Errno::EINVAL
    );
    assert_eq!(open(all | 1 << 4, ibv::QPT_XRC_RECV, x), Errno::EOPNOTSUPP);
    assert_eq!(open(all, ibv::QPT_XRC_RECV, ptr::null_mut()), Errno::EINVAL);
    // SAFETY: a NULL attribute is refused first.
    assert!(unsafe { open_qp(ptr::null_mut(), ptr::null_mut()) }.is_null());
    assert_eq!(last_errno(), Errno::EINVAL);

    // An XRC receive QP needs a domain, by mask bit and by pointer.
    let create = |comp_mask, qp_type| {
        let mut attr = ibv::QpInitAttrEx {
            qp_context: ptr::null_mut(),
            send_cq: ptr::null_mut(),
            recv_cq: ptr::null_mut(),
            srq: ptr::null_mut(),
            cap: ibv::QpCap::default(),
            qp_type,
            sq_sig_all: 0,
            comp_mask,
            pd: ptr::null_mut(),
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
        // SAFETY: every case fails its checks before the context (NULL
        // here) is used.
        let qp = unsafe { create_qp_ex(ptr::null_mut(), &raw mut attr) };
        assert!(qp.is_null());
        last_errno()
    };
    let xrcd_bit = ibv::QP_INIT_ATTR_XRCD;
    assert_eq!(create(xrcd_bit, ibv::QPT_XRC_RECV), Errno::EINVAL);
    assert_eq!(
        create(ibv::QP_INIT_ATTR_PD, ibv::QPT_XRC_RECV),
        Errno::EINVAL
    );
    let tso = ibv::QP_INIT_ATTR_PD | ibv::QP_INIT_ATTR_MAX_TSO_HEADER;
    assert_eq!(create(tso, ibv::QPT_XRC_SEND), Errno::EOPNOTSUPP);
}

#[test]
fn a_raw_qp_posts_only_sends() {
    let qp = TestQp::new(ibv::QPT_RAW_PACKET, ibv::QPS_RTS);
    // Refused before the ring (so no doorbell, which needs a kernel):
    // immediate data, RDMA, atomics, invalidates, binds.
    for op in [
        ibv::WR_SEND_WITH_IMM,
        ibv::WR_RDMA_WRITE,
        ibv::WR_RDMA_WRITE_WITH_IMM,
        ibv::WR_RDMA_READ,
        ibv::WR_ATOMIC_CMP_AND_SWP,
        ibv::WR_ATOMIC_FETCH_AND_ADD,
        ibv::WR_LOCAL_INV,
        ibv::WR_BIND_MW,
        ibv::WR_SEND_WITH_INV,
        ibv::WR_ATOMIC_WRITE,
        200,
    ] {
        let mut wr = send_wr(1, op, 0, &mut []);
        let mut bad = ptr::null_mut();
        // SAFETY: the QP is live and the list valid.
        let ret = unsafe { post_send(qp.ibv(), &raw mut wr, &raw mut bad) };
        assert_eq!(
            (ret, bad),
            (Errno::EINVAL.get(), &raw mut wr),
            "opcode {op}"
        );
    }
    assert_eq!(qp.sq.producer(), 0);
    // Receives are ordinary receive WQEs.
    let mut s = [ibv::Sge {
        addr: 0x1000,
        length: 1514,
        lkey: 5,
    }];
    let mut wrs = [recv_wr(7, &mut s)];
    assert_eq!(qp.recv(&mut wrs), (0, ptr::null_mut()));
    assert_eq!(qp.rq.producer(), 1);
}

#[test]
fn a_raw_send_wqe_carries_the_frame_and_no_destination() {
    let qp = TestQp::new(ibv::QPT_RAW_PACKET, ibv::QPS_RTS);
    // A minimal frame header: destination MAC, source MAC, EtherType.
    let mut frame = [0u8; 14];
    frame[..6].copy_from_slice(&[0x52, 0x54, 0, 0, 0, 2]);
    frame[6..12].copy_from_slice(&[0x52, 0x54, 0, 0, 0, 1]);
    frame[12..].copy_from_slice(&[0x88, 0xb5]);
    let mut s = [ibv::Sge {
        addr: frame.as_ptr().addr() as u64,
        length: frame.len() as u32,
        lkey: 0,
    }];
    let mut inline = send_wr(1, ibv::WR_SEND, ibv::SEND_INLINE, &mut s);
    // What a careless caller leaves in the fields a frame has no use for.
    inline.imm_data = 0x1234_5678;
    inline.wr = ibv::SendWrWr {
        ud: ibv::UdWr {
            ah: ptr::dangling_mut(),
            remote_qpn: 0x00ab_cdef,
            remote_qkey: 0x1111_2222,
        },
    };
    inline.remote_srqn = 0x42;
    let mut g = [ibv::Sge {
        addr: 0x1000,
        length: 1514,
        lkey: 5,
    }];
    let gathered = send_wr(2, ibv::WR_SEND, ibv::SEND_SIGNALED, &mut g);
    // SAFETY: `qp` is live and only this test uses it.
    let q = unsafe { qp.qp.as_ref() };
    let mut guard = q.sq.lock();
    let sq = guard.as_mut().expect("mapped");
    for wr in [&inline, &gathered] {
        // SAFETY: the work requests are valid; the inline SGE points at
        // `frame`, and the AH is never looked at.
        unsafe { post_one_send(ibv::QPT_RAW_PACKET, sq, wr, BindVia::WorkRequest) }.expect("fits");
    }
    assert!(sq.publish());
    drop(guard);
    let u32_at = |b: &[u8], off: usize| u32::from_ne_bytes(b[off..off + 4].try_into().expect("4"));
    let u64_at = |b: &[u8], off: usize| u64::from_ne_bytes(b[off..off + 8].try_into().expect("8"));
    let w = slot_bytes(&qp.sq, 0, 128, 72 + frame.len());
    assert_eq!((u64_at(&w, 0), u32_at(&w, 8)), (1, ibv::WR_SEND));
    assert_eq!((u32_at(&w, 12), u32_at(&w, 24)), (ibv::SEND_INLINE, 14));
    assert_eq!(u32_at(&w, 16), 0, "no immediate data");
    assert_eq!(
        (u32_at(&w, 56), u32_at(&w, 60), u32_at(&w, 64)),
        (0, 0, 0),
        "no AH, remote QPN or Q_Key"
    );
    assert_eq!(w[72..], frame, "the frame, from the destination MAC on");
    let w = slot_bytes(&qp.sq, 1, 128, 88);
    assert_eq!((u64_at(&w, 0), u32_at(&w, 20)), (2, 1));
    assert_eq!(
        (u64_at(&w, 72), u32_at(&w, 80), u32_at(&w, 84)),
        (0x1000, 1514, 5)
    );
    // Between the flags and the SGE only `num_sge` (bytes 20..24) is set.
    assert!(
        w[16..20].iter().chain(&w[24..72]).all(|&b| b == 0),
        "nothing else is set"
    );
}

#[test]
fn a_raw_qp_builds_sends_without_a_destination() {
    let qp = TestQp::with_wr(ibv::QPT_RAW_PACKET, ibv::QPS_RTS, crate::qp::RAW_SEND_OPS);
    let o = qp.ops();
    assert!(o.wr_send.is_some() && o.wr_set_sge.is_some() && o.wr_set_sge_list.is_some());
    assert!(o.wr_set_inline_data.is_some() && o.wr_set_inline_data_list.is_some());
    assert!(o.wr_send_imm.is_none() && o.wr_send_inv.is_none() && o.wr_send_tso.is_none());
    assert!(o.wr_rdma_write.is_none() && o.wr_bind_mw.is_none());
    let ex = qp.ex();
    let frame = [0xabu8; 42];
    // SAFETY: the QP is live and offers these ops; the batch is opened
    // and ended on this thread; the frame is readable. It is aborted:
    // completing it would ring a doorbell, which needs a kernel.
    unsafe {
        (o.wr_start.expect("set"))(ex);
        qp.set_wr(0x51, ibv::SEND_SIGNALED);
        (o.wr_send.expect("set"))(ex);
        (o.wr_set_inline_data.expect("set"))(ex, frame.as_ptr().cast_mut().cast(), frame.len());
        // Starting the next writes the first into the ring.
        qp.set_wr(0x52, 0);
        (o.wr_send.expect("set"))(ex);
        (o.wr_set_sge.expect("set"))(ex, 5, 0x1000, 60);
    }
    let w = slot_bytes(&qp.sq, 0, 128, 72 + frame.len());
    let u32_at = |off: usize| u32::from_ne_bytes(w[off..off + 4].try_into().expect("4"));
    assert_eq!((u32_at(8), u32_at(24)), (ibv::WR_SEND, 42));
    assert_eq!((u32_at(56), u32_at(60), u32_at(64)), (0, 0, 0));
    assert_eq!(w[72..], frame);
    // SAFETY: as above.
    unsafe { (o.wr_abort.expect("set"))(ex) };
    assert_eq!(qp.sq.producer(), 0, "nothing was published");
    // A UD address or an XRC SRQ fails the batch.
    // SAFETY: as above; the AH is NULL, which fails the batch too.
    let ret = refused_batch(&qp, |o, ex| unsafe {
        (o.wr_send.expect("set"))(ex);
        (o.wr_set_ud_addr.expect("set"))(ex, ptr::null_mut(), 1, 2);
    });
    assert_eq!(ret, Errno::EINVAL.get());
    // SAFETY: as above.
    let ret = refused_batch(&qp, |o, ex| unsafe {
        (o.wr_send.expect("set"))(ex);
        (o.wr_set_xrc_srqn.expect("set"))(ex, 1);
    });
    assert_eq!(ret, Errno::EINVAL.get());
}

#[test]
fn a_raw_qp_with_an_srq_is_refused_before_the_kernel() {
    use crate::ffi::last_errno;
    let mut srq = ibv::Srq::ZERO;
    let mut pd = ibv::Pd::ZERO;
    let mut attr = ibv::QpInitAttr {
        qp_context: ptr::null_mut(),
        send_cq: ptr::null_mut(),
        recv_cq: ptr::null_mut(),
        srq: &raw mut srq,
        cap: ibv::QpCap::default(),
        qp_type: ibv::QPT_RAW_PACKET,
        sq_sig_all: 0,
    };
    // SAFETY: the check fails before the PD's context (NULL here) or the
    // SRQ is used.
    let qp = unsafe { create_qp(&raw mut pd, &raw mut attr) };
    assert!(qp.is_null());
    assert_eq!(last_errno(), Errno::EINVAL);
    // The same through `create_qp_ex`, with the send ops of raw QPs.
    let mut ex = ibv::QpInitAttrEx {
        qp_context: ptr::null_mut(),
        send_cq: ptr::null_mut(),
        recv_cq: ptr::null_mut(),
        srq: &raw mut srq,
        cap: ibv::QpCap::default(),
        qp_type: ibv::QPT_RAW_PACKET,
        sq_sig_all: 0,
        comp_mask: ibv::QP_INIT_ATTR_PD | ibv::QP_INIT_ATTR_SEND_OPS_FLAGS,
        pd: &raw mut pd,
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
        send_ops_flags: crate::qp::RAW_SEND_OPS,
    };
    // SAFETY: as above; the context is NULL.
    let qp = unsafe { create_qp_ex(ptr::null_mut(), &raw mut ex) };
    assert!(qp.is_null());
    assert_eq!(last_errno(), Errno::EINVAL);
    // Immediate data is not among a raw QP's send ops.
    ex.srq = ptr::null_mut();
    ex.send_ops_flags |= ibv::QP_EX_WITH_SEND_WITH_IMM;
    // SAFETY: as above.
    let qp = unsafe { create_qp_ex(ptr::null_mut(), &raw mut ex) };
    assert!(qp.is_null());
    assert_eq!(last_errno(), Errno::EOPNOTSUPP);
}

/// The attributes of an RSS QP that passes every check before the kernel,
/// over `table` with `key`.
fn rss_attr(table: *mut ibv::RwqIndTable, key: &mut [u8]) -> ibv::QpInitAttrEx {
    ibv::QpInitAttrEx {
        qp_context: ptr::null_mut(),
        send_cq: ptr::null_mut(),
        recv_cq: ptr::null_mut(),
        srq: ptr::null_mut(),
        cap: ibv::QpCap::default(),
        qp_type: ibv::QPT_RAW_PACKET,
        sq_sig_all: 0,
        comp_mask: ibv::QP_INIT_ATTR_PD
            | ibv::QP_INIT_ATTR_CREATE_FLAGS
            | crate::qp::RSS_INIT_ATTR_MASK,
        // Never dereferenced: every case below is refused first.
        pd: ptr::dangling_mut(),
        xrcd: ptr::null_mut(),
        create_flags: 0,
        max_tso_header: 0,
        rwq_ind_tbl: table,
        rx_hash_conf: ibv::RxHashConf {
            rx_hash_function: ibv::RX_HASH_FUNC_TOEPLITZ,
            // CAST: at most 40 bytes in these tests.
            rx_hash_key_len: key.len() as u8,
            rx_hash_key: key.as_mut_ptr(),
            rx_hash_fields_mask: ibv::RX_HASH_SRC_IPV4 | ibv::RX_HASH_DST_IPV4,
        },
        source_qpn: 0,
        send_ops_flags: 0,
    }
}

#[test]
fn an_rss_qp_is_refused_before_the_kernel() {
    use crate::ffi::last_errno;
    let mut table = ibv::RwqIndTable::ZERO;
    let mut srq = ibv::Srq::ZERO;
    let srq: *mut ibv::Srq = &raw mut srq;
    let mut key = [0x6d_u8; 40];
    let good = rss_attr(&raw mut table, &mut key);
    let with = |f: &dyn Fn(&mut ibv::QpInitAttrEx)| {
        let mut a = good;
        f(&mut a);
        a
    };
    let hash = |f: &dyn Fn(&mut ibv::RxHashConf)| with(&|a| f(&mut a.rx_hash_conf));
    let only = |bit| with(&|a| a.comp_mask = ibv::QP_INIT_ATTR_PD | bit);
    let cases = [
        (
            "a send queue",
            with(&|a| a.cap.max_send_wr = 1),
            Errno::EINVAL,
        ),
        (
            "a receive queue",
            with(&|a| a.cap.max_recv_wr = 1),
            Errno::EINVAL,
        ),
        (
            "send SGEs",
            with(&|a| a.cap.max_send_sge = 1),
            Errno::EINVAL,
        ),
        (
            "receive SGEs",
            with(&|a| a.cap.max_recv_sge = 1),
            Errno::EINVAL,
        ),
        (
            "inline data",
            with(&|a| a.cap.max_inline_data = 1),
            Errno::EINVAL,
        ),
        ("an SRQ", with(&|a| a.srq = srq), Errno::EINVAL),
        (
            "no table",
            with(&|a| a.rwq_ind_tbl = ptr::null_mut()),
            Errno::EINVAL,
        ),
        (
            "the table bit alone",
            only(ibv::QP_INIT_ATTR_IND_TABLE),
            Errno::EINVAL,
        ),
        (
            "the hash bit alone",
            only(ibv::QP_INIT_ATTR_RX_HASH),
            Errno::EINVAL,
        ),
        (
            "send ops",
            with(&|a| a.comp_mask |= ibv::QP_INIT_ATTR_SEND_OPS_FLAGS),
            Errno::EINVAL,
        ),
        (
            "a UD QP",
            with(&|a| a.qp_type = ibv::QPT_UD),
            Errno::EOPNOTSUPP,
        ),
        (
            "an RC QP",
            with(&|a| a.qp_type = ibv::QPT_RC),
            Errno::EOPNOTSUPP,
        ),
        (
            "a creation flag",
            with(&|a| a.create_flags = 1 << 8),
            Errno::EOPNOTSUPP,
        ),
        (
            "no hash function",
            hash(&|h| h.rx_hash_function = 0),
            Errno::EOPNOTSUPP,
        ),
        (
            "another function",
            hash(&|h| h.rx_hash_function = 2),
            Errno::EOPNOTSUPP,
        ),
        (
            "no key",
            hash(&|h| h.rx_hash_key = ptr::null_mut()),
            Errno::EINVAL,
        ),
        (
            "an empty key",
            hash(&|h| h.rx_hash_key_len = 0),
            Errno::EINVAL,
        ),
        (
            "a long key",
            hash(&|h| h.rx_hash_key_len = 41),
            Errno::EINVAL,
        ),
        (
            "IPsec SPIs",
            hash(&|h| h.rx_hash_fields_mask |= ibv::RX_HASH_IPSEC_SPI),
            Errno::EOPNOTSUPP,
        ),
        (
            "inner headers",
            hash(&|h| h.rx_hash_fields_mask |= ibv::RX_HASH_INNER),
            Errno::EOPNOTSUPP,
        ),
    ];
    for (what, mut attr, err) in cases {
        // SAFETY: every case fails its checks before the context (NULL
        // here), the PD or the table is used; the key is 40 readable bytes.
        let qp = unsafe { create_qp_ex(ptr::null_mut(), &raw mut attr) };
        assert!(qp.is_null(), "{what}");
        assert_eq!(last_errno(), err, "{what}");
    }
}

#[test]
fn an_rss_qp_has_no_rings_no_cqs_and_refuses_posting() {
    // What `rss::create` leaves: the kernel's QP and nothing to map.
    let qp = try_box(rss::new_qp()).expect("allocate a QP");
    // SAFETY: `qp` is live and only this test uses it.
    let q = unsafe { qp.as_ref() };
    assert_eq!(q.qp_type, ibv::QPT_RAW_PACKET);
    assert_eq!(q.cqs, KernelCqs::NONE);
    assert!(q.sq.lock().is_none() && q.rq.lock().is_none());
    // SAFETY: as above; no `ibv_wr_*` interface.
    assert_eq!(unsafe { (*q.vqp.get()).comp_mask }, 0);
    for state in [ibv::QPS_INIT, ibv::QPS_RTR, ibv::QPS_RTS, ibv::QPS_ERR] {
        q.state.store(state, Ordering::Relaxed);
        let mut swr = send_wr(1, ibv::WR_SEND, 0, &mut []);
        let mut rwr = recv_wr(2, &mut []);
        let (mut sbad, mut rbad) = (ptr::null_mut(), ptr::null_mut());
        // SAFETY: the QP is live and the lists valid; both are refused
        // before any ring or doorbell.
        let (sret, rret) = unsafe {
            (
                post_send(q.ibv(), &raw mut swr, &raw mut sbad),
                post_recv(q.ibv(), &raw mut rwr, &raw mut rbad),
            )
        };
        assert_eq!((sret, sbad), (Errno::EINVAL.get(), &raw mut swr), "{state}");
        assert_eq!((rret, rbad), (Errno::EINVAL.get(), &raw mut rwr), "{state}");
    }
    // A raw packet QP that is not RSS gives the kernel both CQs.
    assert_eq!(
        Qp::new(ibv::QPT_RAW_PACKET).cqs,
        KernelCqs {
            send: true,
            recv: true
        }
    );
    // SAFETY: `qp` came from `try_box` and is no longer used.
    unsafe { drop_box(qp) };
}
