//! Bad WQEs with a valid producer: the doorbell succeeds, the bad WQE
//! completes in error (IBV_WC_LOC_QP_OP_ERR for an opcode the QP cannot
//! run, IBV_WC_LOC_LEN_ERR for lengths beyond the QP's caps), the QP enters
//! ERR, and every WQE posted after it is flushed. Every WQE completes
//! exactly once, in the order it was posted (IBTA: completions of one work
//! queue are returned in order).

use super::*;
use crate::uverbs::QpCaps;

struct Case {
    name: &'static str,
    ty: QpType,
    wqe: fn(&QpCaps) -> SendWqe,
    status: u32,
}

const BAD: u64 = 0xbad0;

const CASES: &[Case] = &[
    Case {
        name: "unknown opcode 0xdeadbeef",
        ty: QpType::Rc,
        wqe: |_| SendWqe {
            opcode: 0xdead_beef,
            ..send(BAD)
        },
        status: wc::LOC_QP_OP_ERR,
    },
    Case {
        name: "opcode 10 (TSO), which roxe does not know",
        ty: QpType::Rc,
        wqe: |_| SendWqe {
            opcode: wr::TSO,
            ..send(BAD)
        },
        status: wc::LOC_QP_OP_ERR,
    },
    Case {
        name: "num_sge = 0xffffffff",
        ty: QpType::Rc,
        wqe: |_| SendWqe {
            num_sge: u32::MAX,
            ..send(BAD)
        },
        status: wc::LOC_LEN_ERR,
    },
    Case {
        name: "num_sge = max_send_sge + 1",
        ty: QpType::Rc,
        wqe: |c| SendWqe {
            num_sge: c.max_send_sge + 1,
            ..send(BAD)
        },
        status: wc::LOC_LEN_ERR,
    },
    Case {
        name: "inline_len = 0xffffffff",
        ty: QpType::Rc,
        wqe: |_| SendWqe {
            send_flags: wr::SIGNALED | wr::INLINE,
            inline_len: u32::MAX,
            ..send(BAD)
        },
        status: wc::LOC_LEN_ERR,
    },
    Case {
        name: "inline_len = max_inline_data + 1",
        ty: QpType::Rc,
        wqe: |c| SendWqe {
            send_flags: wr::SIGNALED | wr::INLINE,
            inline_len: c.max_inline_data + 1,
            ..send(BAD)
        },
        status: wc::LOC_LEN_ERR,
    },
    Case {
        name: "RDMA_WRITE on a UD QP",
        ty: QpType::Ud,
        wqe: |_| SendWqe {
            opcode: wr::RDMA_WRITE,
            remote_addr: 0x1000,
            rkey: 0x1234,
            ..send(BAD)
        },
        status: wc::LOC_QP_OP_ERR,
    },
    Case {
        name: "ATOMIC_CMP_AND_SWP on a UD QP",
        ty: QpType::Ud,
        wqe: |_| SendWqe {
            opcode: wr::ATOMIC_CMP_AND_SWP,
            ..send(BAD)
        },
        status: wc::LOC_QP_OP_ERR,
    },
    Case {
        name: "RDMA_READ on a UC QP",
        ty: QpType::Uc,
        wqe: |_| SendWqe {
            opcode: wr::RDMA_READ,
            ..send(BAD)
        },
        status: wc::LOC_QP_OP_ERR,
    },
];

pub fn run(c: &mut Ctx<'_>) -> Result<(), Fail> {
    let fx = Fx::new(c.opts)?;
    let (scq, scq_ring) = fx.cq(64)?;
    let (rcq, rcq_ring) = fx.cq(64)?;
    require_doorbell(&fx, c.r, &scq)?;

    for case in CASES {
        let n = case.name;
        let q = fx.qp_in(QpSpec::new(case.ty, &scq, &rcq), state::RTS)?;
        let qpn = q.qp.qpn;
        post_send(&q.sq, &(case.wqe)(&q.qp.caps));
        post_send(&q.sq, &send(0x600d1));
        post_send(&q.sq, &send(0x600d2));
        c.r.ok(
            format!("{n}: the doorbell accepts the ring"),
            fx.v.doorbell(q.qp.handle),
        );
        let got = scq_ring.collect(3, WAIT);
        expect_cqes(
            c.r,
            format!(
                "{n}: the bad WQE completes with status {}, the rest are flushed",
                case.status
            ),
            &got,
            &[
                (BAD, case.status),
                (0x600d1, wc::WR_FLUSH_ERR),
                (0x600d2, wc::WR_FLUSH_ERR),
            ],
            qpn,
        );
        expect_state(&fx, c.r, format!("{n}: the QP"), &q, state::ERR);
        c.r.eq(
            format!("{n}: the SQ consumer index reached the producer"),
            q.sq.consumer(),
            q.sq.producer(),
        );
        // Work posted to a QP in ERR is flushed at once.
        post_send(&q.sq, &send(0x600d3));
        c.r.ok(
            format!("{n}: a doorbell on the QP in ERR succeeds"),
            fx.v.doorbell(q.qp.handle),
        );
        let got = scq_ring.collect(1, WAIT);
        expect_cqes(
            c.r,
            format!("{n}: and flushes the new WQE"),
            &got,
            &[(0x600d3, wc::WR_FLUSH_ERR)],
            qpn,
        );
        c.r.check(
            rcq_ring.settle().is_empty(),
            format!("{n}: nothing on the receive CQ"),
        );
        c.r.ok(format!("{n}: DESTROY_QP"), fx.destroy_qp(q));
    }

    // WQEs exactly at the QP's limits are valid: they wait in the SQ.
    let q = fx.qp_in(QpSpec::new(QpType::Rc, &scq, &rcq), state::RTS)?;
    let caps = q.qp.caps;
    c.r.info(format!("granted caps: {caps:?}"));
    post_send(
        &q.sq,
        &SendWqe {
            num_sge: caps.max_send_sge,
            ..send(0x11)
        },
    );
    post_send(
        &q.sq,
        &SendWqe {
            send_flags: wr::INLINE,
            inline_len: caps.max_inline_data,
            ..send(0x12)
        },
    );
    c.r.ok(
        "WQEs at max_send_sge and max_inline_data: the doorbell succeeds",
        fx.v.doorbell(q.qp.handle),
    );
    expect_state(&fx, c.r, "WQEs at the limits leave the QP", &q, state::RTS);
    c.r.check(
        scq_ring.settle().is_empty(),
        "WQEs at the limits wait in the SQ: no completion",
    );

    // A bad WQE behind WQEs that are already queued: the QP enters ERR, so
    // the queued ones must be flushed, ahead of the bad one's completion.
    post_send(
        &q.sq,
        &SendWqe {
            opcode: 0x7777,
            ..send(BAD)
        },
    );
    post_send(&q.sq, &send(0x13));
    c.r.ok(
        "a bad WQE behind queued ones: the doorbell succeeds",
        fx.v.doorbell(q.qp.handle),
    );
    let got = scq_ring.collect(4, WAIT);
    expect_cqes(
        c.r,
        "a bad WQE behind queued ones: every WQE completes once, in posting order",
        &got,
        &[
            (0x11, wc::WR_FLUSH_ERR),
            (0x12, wc::WR_FLUSH_ERR),
            (BAD, wc::LOC_QP_OP_ERR),
            (0x13, wc::WR_FLUSH_ERR),
        ],
        q.qp.qpn,
    );
    expect_state(&fx, c.r, "a bad WQE behind queued ones", &q, state::ERR);
    c.r.ok("DESTROY_QP", fx.destroy_qp(q));

    c.r.ok("DESTROY_CQ send", fx.destroy_cq(scq, scq_ring));
    c.r.ok("DESTROY_CQ recv", fx.destroy_cq(rcq, rcq_ring));
    c.r.ok("DEALLOC_PD", fx.v.dealloc_pd(fx.pd));
    Ok(())
}
