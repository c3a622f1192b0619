//! The largest queues the device grants, filled to the brim, then the
//! doorbell and ERR: the kernel walks a million WQEs in each direction
//! under its locks. It must finish, overflow the CQ at exactly its size
//! (IB_EVENT_CQ_ERR), consume both queues, and not stall the machine (the
//! rig's dmesg check catches soft lockups and RCU stalls).
//!
//! The slots are left as the kernel zeroed them: a zeroed send slot is a
//! valid RDMA WRITE of nothing, a zeroed receive slot a valid receive.

use super::*;
use crate::uverbs::event;
use std::time::Instant;

pub fn run(c: &mut Ctx<'_>) -> Result<(), Fail> {
    let fx = Fx::new(c.opts)?;
    let n = fx.caps.max_qp_wr;
    let (cq, ring) = fx.cq(fx.caps.max_cqe)?;
    let slots = ring.0.num_slots();
    let spec = QpSpec {
        send_wr: n,
        recv_wr: n,
        send_sge: 1,
        inline: 0,
        ..QpSpec::new(QpType::Rc, &cq, &cq)
    };
    let q = fx.qp_in(spec, state::RTS)?;
    c.r.eq(
        "the QP gets max_qp_wr slots in each queue",
        (q.sq.num_slots(), q.rq.num_slots()),
        (n, n),
    );
    q.sq.set_producer(n);
    q.rq.set_producer(n);

    let t = Instant::now();
    let rung = fx.v.doorbell(q.qp.handle);
    let doorbell_time = t.elapsed();
    match rung {
        Ok(()) => {
            c.r.check(true, format!("a doorbell over {n} zeroed WQEs succeeds"));
            expect_state(
                &fx,
                c.r,
                "a full SQ of zeroed WQEs leaves the QP",
                &q,
                state::RTS,
            );
        }
        Err(e) => c.r.info(format!(
            "the doorbell failed with {e}; the flush below still runs"
        )),
    }
    let t = Instant::now();
    c.r.ok(
        format!("MODIFY_QP to ERR with {n} sends and {n} receives outstanding"),
        fx.modify(&q, state::ERR),
    );
    let flush_time = t.elapsed();
    c.r.info(format!("doorbell {doorbell_time:?}, flush {flush_time:?}"));
    c.r.eq(
        "the CQ filled exactly to its size before overflowing",
        ring.0.producer(),
        slots,
    );
    c.r.eq(
        "the flush consumed both queues",
        (q.sq.consumer(), q.rq.consumer()),
        (n, n),
    );
    expect_event(
        &fx,
        c.r,
        "the overflow raised an error event",
        cq.user_handle,
        event::CQ_ERR,
    )?;
    let first = ring.poll();
    c.r.check(
        first.is_some_and(|e| e.status == wc::WR_FLUSH_ERR && e.qp_num == q.qp.qpn),
        format!("the first completion is a flush of the QP: {first:?}"),
    );
    // Again and again, in ERR with the CQ overflowed: each doorbell over a
    // full queue of new WQEs is consumed at once (no completions can be
    // made, so none are tried beyond the first).
    let t = Instant::now();
    for round in 2..=8u32 {
        q.sq.set_producer(n.wrapping_mul(round));
        c.r.ok(
            format!("doorbell {round} in ERR over {n} more WQEs"),
            fx.v.doorbell(q.qp.handle),
        );
    }
    c.r.info(format!(
        "7 doorbells in ERR with the CQ broken: {:?}",
        t.elapsed()
    ));
    c.r.eq(
        "the SQ is consumed after each",
        q.sq.consumer(),
        n.wrapping_mul(8),
    );
    c.r.ok("DESTROY_QP", fx.destroy_qp(q));
    c.r.ok("DESTROY_CQ", fx.destroy_cq(cq, ring));
    c.r.ok("DEALLOC_PD", fx.v.dealloc_pd(fx.pd));
    Ok(())
}
