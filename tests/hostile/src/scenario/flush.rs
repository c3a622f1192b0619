//! RDMA FLUSH (IBTA memory placement extensions). libibverbs 44 has no
//! `ibv_wr_flush`, so the WQE goes straight into the SQ ring
//! (`roxe_uapi::SendWqe`: opcode 14, the range's length in `compare_add`,
//! the placement type in bits 0-7 of `swap` and the selectivity level in
//! bits 8-15).
//!
//! roxe advertises `IB_DEVICE_FLUSH_GLOBAL` only, so the RDMA core refuses
//! an MR that asks for `FLUSH_PERSISTENT`. On RC QPs connected to
//! themselves, an RDMA WRITE and then a global flush over the written range
//! complete in order and the bytes are in memory. Work behind a flush is
//! sent and done too, whether it is posted with the flush or after the
//! flush completed. A whole-MR flush also succeeds; its address and length
//! mean nothing. The responder refuses a range outside the MR, an MR
//! without the flush right and a bad rkey with a remote access NAK
//! (`IBV_WC_REM_ACCESS_ERR` at the requester), and a placement type the
//! QP's access flags do not allow with an invalid-request NAK
//! (`IBV_WC_REM_INV_REQ_ERR`); either way the requester enters ERR and the
//! WQE behind the flush is flushed (and the responder enters ERR too, as
//! rxe's does, so these cases use a pair of QPs, not one connected to
//! itself). A placement type or
//! level that does not exist, a length that RETH cannot carry, or a flush
//! on a UC QP never leaves the requester.

use super::*;
use crate::abi;
use crate::errno::EOPNOTSUPP;
use crate::sys::{page_size, Mapping};
use crate::uverbs::Mr;
use roxe_proto::access;
use roxe_uapi::flush::{GLOBAL, MR as WHOLE_MR, PERSISTENT, RANGE};
use roxe_uapi::Sge;
use std::time::Duration;

/// The bytes each RDMA WRITE carries. A write to offset `o` of the first
/// page takes its bytes from offset `o` of the second.
const LEN: u32 = 200;
/// Where the writes go: three ranges of the first page.
const DST: [u64; 3] = [64, 512, 1024];

/// Longer than the QP's retransmission timeout (`timeout` 14: 67 ms), so a
/// retry timer armed after a completed flush has fired.
const PAST_RETRY: Duration = Duration::from_millis(300);

/// The buffer both MRs cover (iova = address), two pages.
struct Target {
    addr: u64,
    len: u64,
    page: u64,
    /// Registered with `FLUSH_GLOBAL | REMOTE_WRITE | LOCAL_WRITE`.
    flush: Mr,
    /// Registered with `REMOTE_WRITE | LOCAL_WRITE`: no flush right.
    plain: Mr,
}

/// A signaled FLUSH of `len` bytes at `addr` through `rkey`.
pub(super) fn flush(
    wr_id: u64,
    rkey: u32,
    addr: u64,
    len: u64,
    placement: u8,
    level: u8,
) -> SendWqe {
    SendWqe {
        wr_id,
        opcode: wr::FLUSH,
        send_flags: wr::SIGNALED,
        rkey,
        remote_addr: addr,
        compare_add: len,
        swap: u64::from(placement) | u64::from(level) << 8,
        ..SendWqe::default()
    }
}

/// A global FLUSH over the range a write to `dst` covers.
fn flush_dst(t: &Target, wr_id: u64, dst: u64) -> SendWqe {
    flush(wr_id, t.flush.rkey, t.addr + dst, LEN.into(), GLOBAL, RANGE)
}

/// A signaled RDMA WRITE of nothing: the WQE behind a failing flush.
pub(super) fn empty_write(wr_id: u64) -> SendWqe {
    SendWqe {
        opcode: wr::RDMA_WRITE,
        ..send(wr_id)
    }
}

/// One RDMA WRITE of `LEN` random bytes to `dst`, with the destination
/// made different from them in every byte first.
struct Write {
    dst: u64,
    bytes: Vec<u8>,
    slot: Vec<u8>,
}

impl Write {
    fn new(c: &mut Ctx<'_>, buf: &Mapping, t: &Target, wr_id: u64, dst: u64) -> Write {
        let bytes = c.rng.bytes(LEN as usize);
        let at = |o: u64| usize::try_from(o).expect("an offset into a two-page buffer");
        buf.write(at(t.page + dst), &bytes);
        buf.write(at(dst), &bytes.iter().map(|b| !b).collect::<Vec<u8>>());
        let wqe = SendWqe {
            opcode: wr::RDMA_WRITE,
            num_sge: 1,
            rkey: t.flush.rkey,
            remote_addr: t.addr + dst,
            ..send(wr_id)
        };
        let sge = Sge {
            addr: t.addr + t.page + dst,
            length: LEN,
            lkey: t.flush.lkey,
        };
        Write {
            dst,
            bytes,
            slot: [abi::send_wqe(&wqe), abi::sge(&sge)].concat(),
        }
    }

    /// Whether the bytes are at the destination.
    fn landed(&self, buf: &Mapping) -> bool {
        let mut got = vec![0u8; self.bytes.len()];
        buf.read(
            usize::try_from(self.dst).expect("an offset into the first page"),
            &mut got,
        );
        got == self.bytes
    }
}

/// Rings the doorbell and checks that the WQEs `want` names complete in
/// order, each successfully with its completion opcode.
fn expect_done(
    c: &mut Ctx<'_>,
    fx: &Fx,
    cq: &CqRing,
    q: &QpRings,
    what: &str,
    want: &[(u64, u32)],
) {
    c.r.ok(format!("{what}: the doorbell"), fx.v.doorbell(q.qp.handle));
    let got = cq.collect(want.len(), WAIT);
    let ids: Vec<(u64, u32)> = want.iter().map(|&(id, _)| (id, wc::SUCCESS)).collect();
    expect_cqes(
        c.r,
        format!("{what}: every WQE succeeds, in order"),
        &got,
        &ids,
        q.qp.qpn,
    );
    let ops: Vec<u32> = got.iter().map(|x| x.opcode).collect();
    let want_ops: Vec<u32> = want.iter().map(|&(_, op)| op).collect();
    c.r.eq(format!("{what}: the completion opcodes"), ops, want_ops);
}

/// A flush that must fail, on a fresh QP of type `ty`; with `lead`, a good
/// whole-MR flush goes just before it.
struct Case {
    name: &'static str,
    ty: QpType,
    lead: bool,
    wqe: fn(&Target) -> SendWqe,
    status: u32,
}

const GOOD: u64 = 0xf1af;
const BAD: u64 = 0xf1b0;
const AFTER: u64 = 0xf1b1;

const CASES: &[Case] = &[
    Case {
        name: "a range that runs 64 bytes past the MR's end",
        ty: QpType::Rc,
        lead: false,
        wqe: |t| flush(BAD, t.flush.rkey, t.addr + t.len - 64, 128, GLOBAL, RANGE),
        status: wc::REM_ACCESS_ERR,
    },
    Case {
        name: "a range that starts 64 bytes before the MR",
        ty: QpType::Rc,
        lead: false,
        wqe: |t| flush(BAD, t.flush.rkey, t.addr - 64, 128, GLOBAL, RANGE),
        status: wc::REM_ACCESS_ERR,
    },
    Case {
        name: "a good whole-MR flush, then a range that runs past the MR's end",
        ty: QpType::Rc,
        lead: true,
        wqe: |t| flush(BAD, t.flush.rkey, t.addr + t.len - 64, 128, GLOBAL, RANGE),
        status: wc::REM_ACCESS_ERR,
    },
    Case {
        name: "global over a range of an MR without FLUSH_GLOBAL",
        ty: QpType::Rc,
        lead: false,
        wqe: |t| flush(BAD, t.plain.rkey, t.addr + DST[0], LEN.into(), GLOBAL, RANGE),
        status: wc::REM_ACCESS_ERR,
    },
    Case {
        name: "global over the whole of an MR without FLUSH_GLOBAL",
        ty: QpType::Rc,
        lead: false,
        wqe: |t| flush(BAD, t.plain.rkey, t.addr, 0, GLOBAL, WHOLE_MR),
        status: wc::REM_ACCESS_ERR,
    },
    Case {
        // The QP allows FLUSH_GLOBAL only: the responder refuses the
        // placement type (invalid request) before it looks at the key.
        name: "placement type persistent over a range of the FLUSH_GLOBAL MR, on a QP that allows only FLUSH_GLOBAL",
        ty: QpType::Rc,
        lead: false,
        wqe: |t| flush(BAD, t.flush.rkey, t.addr + DST[0], LEN.into(), PERSISTENT, RANGE),
        status: wc::REM_INV_REQ_ERR,
    },
    Case {
        // The QP allows FLUSH_GLOBAL only: the responder refuses the
        // placement type (invalid request) before it looks at the key.
        name: "placement type persistent over the whole FLUSH_GLOBAL MR, on a QP that allows only FLUSH_GLOBAL",
        ty: QpType::Rc,
        lead: false,
        wqe: |t| flush(BAD, t.flush.rkey, t.addr, 0, PERSISTENT, WHOLE_MR),
        status: wc::REM_INV_REQ_ERR,
    },
    Case {
        name: "an rkey with the wrong key byte, over a range",
        ty: QpType::Rc,
        lead: false,
        wqe: |t| flush(BAD, t.flush.rkey ^ 0x80, t.addr + DST[0], LEN.into(), GLOBAL, RANGE),
        status: wc::REM_ACCESS_ERR,
    },
    Case {
        name: "an rkey with the wrong key byte, over the whole MR",
        ty: QpType::Rc,
        lead: false,
        wqe: |t| flush(BAD, t.flush.rkey ^ 0x80, t.addr, 0, GLOBAL, WHOLE_MR),
        status: wc::REM_ACCESS_ERR,
    },
    Case {
        name: "placement type 0",
        ty: QpType::Rc,
        lead: false,
        wqe: |t| flush(BAD, t.flush.rkey, t.addr + DST[0], LEN.into(), 0, RANGE),
        status: wc::LOC_QP_OP_ERR,
    },
    Case {
        name: "placement type 3 (global | persistent)",
        ty: QpType::Rc,
        lead: false,
        wqe: |t| flush(BAD, t.flush.rkey, t.addr + DST[0], LEN.into(), GLOBAL | PERSISTENT, RANGE),
        status: wc::LOC_QP_OP_ERR,
    },
    Case {
        name: "selectivity level 2",
        ty: QpType::Rc,
        lead: false,
        wqe: |t| flush(BAD, t.flush.rkey, t.addr + DST[0], LEN.into(), GLOBAL, 2),
        status: wc::LOC_QP_OP_ERR,
    },
    Case {
        name: "a length of 2^32, which RETH cannot carry",
        ty: QpType::Rc,
        lead: false,
        wqe: |t| flush(BAD, t.flush.rkey, t.addr, 1 << 32, GLOBAL, RANGE),
        status: wc::LOC_LEN_ERR,
    },
    Case {
        name: "a valid global flush on a UC QP",
        ty: QpType::Uc,
        lead: false,
        wqe: |t| flush(BAD, t.flush.rkey, t.addr + DST[0], LEN.into(), GLOBAL, RANGE),
        status: wc::LOC_QP_OP_ERR,
    },
];

/// Registers the buffer: the flush right the device has, and the one it
/// has not.
fn register(c: &mut Ctx<'_>, fx: &Fx, buf: &Mapping) -> Result<Target, Fail> {
    let v = &fx.v;
    let (addr, len) = (buf.addr(), buf.len() as u64);
    let rw = access::LOCAL_WRITE | access::REMOTE_WRITE;
    let flush_mr = v.reg_mr(fx.pd, addr, len, addr, rw | access::FLUSH_GLOBAL, &[]);
    let flush_mr = c.r.ok(
        "REG_MR with FLUSH_GLOBAL | REMOTE_WRITE | LOCAL_WRITE",
        flush_mr,
    );
    for (what, flags) in [
        (
            "FLUSH_PERSISTENT | REMOTE_WRITE | LOCAL_WRITE",
            rw | access::FLUSH_PERSISTENT,
        ),
        (
            "FLUSH_GLOBAL | FLUSH_PERSISTENT | REMOTE_WRITE | LOCAL_WRITE",
            rw | access::FLUSH_GLOBAL | access::FLUSH_PERSISTENT,
        ),
    ] {
        let res = v.reg_mr(fx.pd, addr, len, addr, flags, &[]);
        if let Ok(mr) = &res {
            // Granted by mistake: do not leave it behind.
            let _ = v.dereg_mr(mr.handle);
        }
        c.r.errno(
            format!("REG_MR with {what} is refused: the device has no IB_DEVICE_FLUSH_PERSISTENT"),
            res,
            EOPNOTSUPP,
        );
    }
    let plain_mr = c.r.ok(
        "REG_MR with REMOTE_WRITE | LOCAL_WRITE (no flush right)",
        v.reg_mr(fx.pd, addr, len, addr, rw, &[]),
    );
    let (Some(flush), Some(plain)) = (flush_mr, plain_mr) else {
        return Err(Fail("no MRs to flush".into()));
    };
    Ok(Target {
        addr,
        len,
        page: len / 2,
        flush,
        plain,
    })
}

pub fn run(c: &mut Ctx<'_>) -> Result<(), Fail> {
    let fx = Fx::new(c.opts)?;
    let v = &fx.v;
    let (cq, cq_ring) = fx.cq(64)?;
    require_doorbell(&fx, c.r, &cq)?;

    // 1. Registration.
    let buf = Mapping::anon(2 * page_size()).step("a buffer to register")?;
    let t = register(c, &fx, &buf)?;

    // The responder wants the placement type in the QP's access flags too
    // (as rxe's does), so MODIFY_QP must take FLUSH_GLOBAL there.
    let q = fx.qp(QpSpec::new(QpType::Rc, &cq, &cq))?;
    let init = Modify {
        access_flags: access::LOCAL_WRITE
            | access::REMOTE_WRITE
            | access::REMOTE_READ
            | access::FLUSH_GLOBAL,
        ..fx.attrs(&q.qp, QpType::Rc, state::INIT)
    };
    c.r.ok(
        "MODIFY_QP to INIT with FLUSH_GLOBAL in qp_access_flags",
        v.modify_qp(q.qp.handle, &init),
    );
    c.r.ok("DESTROY_QP of that QP", fx.destroy_qp(q));

    // A QP whose access flags lack FLUSH_GLOBAL answers a global flush with
    // an invalid-request NAK: IBV_WC_REM_INV_REQ_ERR at the requester.
    let (q, responder) = fx.pair(QpSpec::new(QpType::Rc, &cq, &cq))?;
    let rts = Modify {
        qp_state: state::RTS,
        attr_mask: mask::STATE | mask::ACCESS_FLAGS,
        access_flags: access::LOCAL_WRITE | access::REMOTE_WRITE | access::REMOTE_READ,
        ..Modify::default()
    };
    c.r.ok(
        "MODIFY_QP RTS to RTS dropping FLUSH_GLOBAL from qp_access_flags",
        v.modify_qp(responder.qp.handle, &rts),
    );
    post_send(&q.sq, &flush_dst(&t, BAD, DST[0]));
    post_send(&q.sq, &empty_write(AFTER));
    c.r.ok(
        "a flush to a QP without FLUSH_GLOBAL: the doorbell",
        v.doorbell(q.qp.handle),
    );
    let got = cq_ring.collect(2, WAIT);
    expect_cqes(
        c.r,
        "a flush to a QP without FLUSH_GLOBAL completes with REM_INV_REQ_ERR, the WQE behind it is flushed",
        &got,
        &[(BAD, wc::REM_INV_REQ_ERR), (AFTER, wc::WR_FLUSH_ERR)],
        q.qp.qpn,
    );
    expect_state(
        &fx,
        c.r,
        "a flush to a QP without FLUSH_GLOBAL: the QP",
        &q,
        state::ERR,
    );
    expect_state(
        &fx,
        c.r,
        "a flush to a QP without FLUSH_GLOBAL: the responder",
        &responder,
        state::ERR,
    );
    c.r.ok("DESTROY_QP", fx.destroy_qp(q));
    c.r.ok("DESTROY_QP of the responder", fx.destroy_qp(responder));

    // 2. An RDMA WRITE, then a global flush over exactly the bytes it
    // wrote. Once the QP's retry timer would have fired, another write.
    let q = fx.loopback(QpSpec::new(QpType::Rc, &cq, &cq))?;
    let w = Write::new(c, &buf, &t, 0xf1a1, DST[0]);
    post_raw(&q.sq, &w.slot);
    post_send(&q.sq, &flush_dst(&t, 0xf1a2, DST[0]));
    expect_done(
        c,
        &fx,
        &cq_ring,
        &q,
        "RDMA WRITE, then FLUSH over its bytes",
        &[(0xf1a1, wc::OP_RDMA_WRITE), (0xf1a2, wc::OP_FLUSH)],
    );
    c.r.check(
        w.landed(&buf),
        "RDMA WRITE, then FLUSH over its bytes: the bytes are in the MR",
    );
    std::thread::sleep(PAST_RETRY);
    let w = Write::new(c, &buf, &t, 0xf1a3, DST[1]);
    post_raw(&q.sq, &w.slot);
    expect_done(
        c,
        &fx,
        &cq_ring,
        &q,
        "an RDMA WRITE 300 ms after the FLUSH completed",
        &[(0xf1a3, wc::OP_RDMA_WRITE)],
    );
    c.r.check(
        w.landed(&buf),
        "an RDMA WRITE 300 ms after the FLUSH completed: its bytes are in the MR",
    );
    expect_state(&fx, c.r, "after the write and the flushes", &q, state::RTS);
    c.r.ok("DESTROY_QP", fx.destroy_qp(q));

    // Work posted together with a flush, behind it.
    let q = fx.loopback(QpSpec::new(QpType::Rc, &cq, &cq))?;
    let w = Write::new(c, &buf, &t, 0xf1a5, DST[2]);
    post_send(&q.sq, &flush_dst(&t, 0xf1a4, DST[0]));
    post_raw(&q.sq, &w.slot);
    post_send(&q.sq, &flush_dst(&t, 0xf1a6, DST[2]));
    let what = "FLUSH, RDMA WRITE, FLUSH over the write's bytes";
    expect_done(
        c,
        &fx,
        &cq_ring,
        &q,
        what,
        &[
            (0xf1a4, wc::OP_FLUSH),
            (0xf1a5, wc::OP_RDMA_WRITE),
            (0xf1a6, wc::OP_FLUSH),
        ],
    );
    c.r.check(
        w.landed(&buf),
        format!("{what}: the write's bytes are in the MR"),
    );
    c.r.ok("DESTROY_QP", fx.destroy_qp(q));

    // 3. A whole-MR flush names no range: its address and length mean
    // nothing. A range that ends exactly at the MR's end is inside it.
    let q = fx.loopback(QpSpec::new(QpType::Rc, &cq, &cq))?;
    let far = t.addr + t.len + 0x10_0000;
    post_send(
        &q.sq,
        &flush(0xf1a7, t.flush.rkey, far, 0, GLOBAL, WHOLE_MR),
    );
    post_send(
        &q.sq,
        &flush(0xf1a8, t.flush.rkey, t.addr + t.len - 64, 64, GLOBAL, RANGE),
    );
    let what = format!("a whole-MR FLUSH at {far:#x} (outside the MR) of length 0, then one over the MR's last 64 bytes");
    expect_done(
        c,
        &fx,
        &cq_ring,
        &q,
        &what,
        &[(0xf1a7, wc::OP_FLUSH), (0xf1a8, wc::OP_FLUSH)],
    );
    expect_state(&fx, c.r, "after the successful flushes", &q, state::RTS);
    c.r.ok("DESTROY_QP", fx.destroy_qp(q));

    // rxe's FLUSH ICRC (Documentation/datapath.md): a FLUSH that times out
    // goes again with rxe's ICRC, which roxe's responder takes too. The
    // responder QP stays in INIT (dropping the first try) until after the
    // first send; the retry (timeout 16: 268 ms) finds it in RTR.
    rxe_icrc(c, &fx, &cq, &cq_ring, &t)?;

    // 4-9. Flushes that fail, each on a fresh QP since the QP ends in ERR.
    for case in CASES {
        let n = case.name;
        let (q, responder) = fx.pair(QpSpec::new(case.ty, &cq, &cq))?;
        let mut want = Vec::new();
        if case.lead {
            post_send(
                &q.sq,
                &flush(GOOD, t.flush.rkey, t.addr, 0, GLOBAL, WHOLE_MR),
            );
            want.push((GOOD, wc::SUCCESS));
        }
        post_send(&q.sq, &(case.wqe)(&t));
        post_send(&q.sq, &empty_write(AFTER));
        want.extend([(BAD, case.status), (AFTER, wc::WR_FLUSH_ERR)]);
        c.r.ok(format!("{n}: the doorbell"), v.doorbell(q.qp.handle));
        let got = cq_ring.collect(want.len(), WAIT);
        expect_cqes(
            c.r,
            format!(
                "{n}: the FLUSH completes with status {}, the WQE behind it is flushed",
                case.status
            ),
            &got,
            &want,
            q.qp.qpn,
        );
        if case.ty != QpType::Rc {
            if let Some(x) = got.first() {
                c.r.info(format!(
                    "{n}: the error completion says opcode {}",
                    x.opcode
                ));
            }
        }
        expect_state(&fx, c.r, format!("{n}: the QP"), &q, state::ERR);
        c.r.ok(format!("{n}: DESTROY_QP"), fx.destroy_qp(q));
        c.r.ok(
            format!("{n}: DESTROY_QP of the responder"),
            fx.destroy_qp(responder),
        );
    }

    c.r.ok(
        "DEREG_MR of the FLUSH_GLOBAL MR",
        v.dereg_mr(t.flush.handle),
    );
    c.r.ok("DEREG_MR of the plain MR", v.dereg_mr(t.plain.handle));
    c.r.ok("munmap of the buffer", buf.unmap());
    c.r.ok("DESTROY_CQ", fx.destroy_cq(cq, cq_ring));
    c.r.ok("DEALLOC_PD", v.dealloc_pd(fx.pd));
    Ok(())
}

/// A FLUSH from QP `a` to QP `b`, whose first try `b` drops (it is still in
/// INIT), completes by its retry with rxe's ICRC; the next FLUSH of `a`
/// keeps that ICRC. Both sides' counters show it.
fn rxe_icrc(c: &mut Ctx<'_>, fx: &Fx, cq: &Cq, cq_ring: &CqRing, t: &Target) -> Result<(), Fail> {
    let v = &fx.v;
    let ibdev = c.opts.ibdev.clone();
    let counters = || {
        (
            hw_counter(&ibdev, "tx_flush_icrc_rxe"),
            hw_counter(&ibdev, "rx_flush_icrc_rxe"),
        )
    };
    let a = fx.qp(QpSpec::new(QpType::Rc, cq, cq))?;
    let b = fx.qp(QpSpec::new(QpType::Rc, cq, cq))?;
    fx.modify(&a, state::INIT)
        .step("MODIFY_QP of the requester to INIT")?;
    fx.modify(&b, state::INIT)
        .step("MODIFY_QP of the responder to INIT")?;
    let rts = fx.attrs(&a.qp, a.ty, state::RTS);
    let rtr_a = Modify {
        dest_qp_num: b.qp.qpn,
        rq_psn: rts.sq_psn,
        ..fx.attrs(&a.qp, a.ty, state::RTR)
    };
    v.modify_qp(a.qp.handle, &rtr_a)
        .step("MODIFY_QP of the requester to RTR")?;
    v.modify_qp(a.qp.handle, &Modify { timeout: 16, ..rts })
        .step("MODIFY_QP of the requester to RTS, timeout 16")?;
    let before = counters();
    post_send(&a.sq, &flush_dst(t, 0xf1c1, DST[0]));
    c.r.ok(
        "a FLUSH to a QP still in INIT: the doorbell",
        v.doorbell(a.qp.handle),
    );
    std::thread::sleep(Duration::from_millis(80));
    let rtr_b = Modify {
        dest_qp_num: a.qp.qpn,
        rq_psn: rts.sq_psn,
        ..fx.attrs(&b.qp, b.ty, state::RTR)
    };
    c.r.ok(
        "the responder moves to RTR before the retry",
        v.modify_qp(b.qp.handle, &rtr_b),
    );
    let got = cq_ring.collect(1, WAIT);
    expect_cqes(
        c.r,
        "the FLUSH completes by its retry",
        &got,
        &[(0xf1c1, wc::SUCCESS)],
        a.qp.qpn,
    );
    let retried = counters();
    post_send(&a.sq, &flush_dst(t, 0xf1c2, DST[1]));
    c.r.ok("a second FLUSH: the doorbell", v.doorbell(a.qp.handle));
    let got = cq_ring.collect(1, WAIT);
    expect_cqes(
        c.r,
        "the second FLUSH completes",
        &got,
        &[(0xf1c2, wc::SUCCESS)],
        a.qp.qpn,
    );
    let after = counters();
    let rise = |x: Option<u64>, y: Option<u64>| y.zip(x).map(|(y, x)| y.saturating_sub(x));
    c.r.eq(
        "the retry went with rxe's ICRC and was taken (tx_flush_icrc_rxe, rx_flush_icrc_rxe rose by 1)",
        (rise(before.0, retried.0), rise(before.1, retried.1)),
        (Some(1), Some(1)),
    );
    c.r.eq(
        "the second FLUSH kept rxe's ICRC (both rose by 1 more)",
        (rise(retried.0, after.0), rise(retried.1, after.1)),
        (Some(1), Some(1)),
    );
    c.r.ok("DESTROY_QP of the requester", fx.destroy_qp(a));
    c.r.ok("DESTROY_QP of the responder", fx.destroy_qp(b));
    Ok(())
}
