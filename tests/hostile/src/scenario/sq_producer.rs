//! SQ producer out of range: user space sets the SQ producer index further
//! from the kernel's consumer than the ring holds, and rings the doorbell.
//! The doorbell must fail with EINVAL, the QP must enter ERR (with
//! `IB_EVENT_QP_FATAL`), its receives must be flushed, and nothing must be
//! read from the SQ until the index is sane again. A producer exactly one
//! ring ahead (a full SQ) is legal.

use super::*;
use crate::uverbs::event;

pub fn run(c: &mut Ctx<'_>) -> Result<(), Fail> {
    let fx = Fx::new(c.opts)?;
    let (scq, scq_ring) = fx.cq(64)?;
    let (rcq, rcq_ring) = fx.cq(64)?;
    require_doorbell(&fx, c.r, &scq)?;

    for (label, delta) in [
        ("consumer + 2^31", Some(0x8000_0000u32)),
        ("consumer + num_slots + 1", None),
        ("consumer - 1", Some(u32::MAX)),
    ] {
        let q = fx.qp_in(QpSpec::new(QpType::Rc, &scq, &rcq), state::RTS)?;
        let n = q.sq.num_slots();
        let delta = delta.unwrap_or(n + 1);
        post_recv(&q.rq, 0x51);
        post_recv(&q.rq, 0x52);
        let cons = q.sq.consumer();
        q.sq.write_slot(cons, &crate::abi::send_wqe(&send(0x5e)));
        q.sq.set_producer(cons.wrapping_add(delta));
        c.r.errno(
            format!("doorbell with SQ producer {label} fails"),
            fx.v.doorbell(q.qp.handle),
            crate::errno::EINVAL,
        );
        expect_state(
            &fx,
            c.r,
            format!("producer {label}: the QP is in ERR"),
            &q,
            state::ERR,
        );
        expect_event(
            &fx,
            c.r,
            format!("producer {label}: the QP raised a fatal event"),
            q.qp.user_handle,
            event::QP_FATAL,
        )?;
        let got = rcq_ring.collect(2, WAIT);
        expect_cqes(
            c.r,
            format!("producer {label}: both receives are flushed"),
            &got,
            &[(0x51, wc::WR_FLUSH_ERR), (0x52, wc::WR_FLUSH_ERR)],
            q.qp.qpn,
        );
        c.r.check(
            scq_ring.settle().is_empty(),
            format!("producer {label}: no send completion from an untrusted SQ"),
        );
        c.r.eq(
            format!("producer {label}: the SQ consumer index is unchanged"),
            q.sq.consumer(),
            cons,
        );
        c.r.errno(
            format!("producer {label}: a second doorbell fails too"),
            fx.v.doorbell(q.qp.handle),
            crate::errno::EINVAL,
        );
        expect_no_event(&fx, c.r, format!("producer {label}: no second fatal event"))?;

        // A sane producer again: the QP is in ERR, so the WQE is flushed.
        q.sq.set_producer(cons.wrapping_add(1));
        c.r.ok(
            format!("producer {label}: the doorbell works again with a sane producer"),
            fx.v.doorbell(q.qp.handle),
        );
        let got = scq_ring.collect(1, WAIT);
        expect_cqes(
            c.r,
            format!("producer {label}: the WQE then completes with a flush error"),
            &got,
            &[(0x5e, wc::WR_FLUSH_ERR)],
            q.qp.qpn,
        );
        c.r.ok(format!("producer {label}: DESTROY_QP"), fx.destroy_qp(q));
    }

    // The boundary: a completely full SQ is legal.
    let q = fx.qp_in(QpSpec::new(QpType::Rc, &scq, &rcq), state::RTS)?;
    let n = q.sq.num_slots();
    for i in 0..n {
        post_send(&q.sq, &send(0xf00 + u64::from(i)));
    }
    c.r.ok(
        format!("doorbell with a full SQ ({n} WQEs) succeeds"),
        fx.v.doorbell(q.qp.handle),
    );
    expect_state(&fx, c.r, "a full SQ leaves the QP in RTS", &q, state::RTS);
    c.r.check(
        scq_ring.settle().is_empty(),
        "valid WQEs wait in the SQ: no completion yet",
    );
    c.r.ok("MODIFY_QP of the full QP to ERR", fx.modify(&q, state::ERR));
    let want: Vec<(u64, u32)> = (0..n)
        .map(|i| (0xf00 + u64::from(i), wc::WR_FLUSH_ERR))
        .collect();
    let got = scq_ring.collect(want.len(), WAIT);
    expect_cqes(
        c.r,
        format!("all {n} WQEs of the full SQ are flushed in order"),
        &got,
        &want,
        q.qp.qpn,
    );
    c.r.ok("DESTROY_QP of the full QP", fx.destroy_qp(q));

    c.r.ok("DESTROY_CQ send", fx.destroy_cq(scq, scq_ring));
    c.r.ok("DESTROY_CQ recv", fx.destroy_cq(rcq, rcq_ring));
    c.r.ok("DEALLOC_PD", fx.v.dealloc_pd(fx.pd));
    Ok(())
}
