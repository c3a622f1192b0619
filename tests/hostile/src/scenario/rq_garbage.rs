//! RQ garbage: random bytes in the receive queue (slots and the header's
//! consumer field, which belongs to the kernel) with a valid producer, then
//! ERR. Every posted receive is flushed with whatever `wr_id` its bytes
//! hold, in order. With an impossible producer nothing is read; with RESET
//! the work is discarded without completions.

use super::*;
use crate::abi;

/// Fills the RQ with random bytes (header included) and sets its
/// producer `k` ahead of `cons`, the kernel's consumer index; returns the
/// `wr_id`s the kernel will find.
fn garbage(rng: &mut Rng, rq: &Ring, cons: u32, k: u32) -> Vec<u64> {
    rq.overwrite(&rng.bytes(rq.mapping().len()));
    rq.set_producer(cons.wrapping_add(k));
    (0..k)
        .map(|i| abi::recv_wr_id(&rq.read_slot(cons.wrapping_add(i))))
        .collect()
}

pub fn run(c: &mut Ctx<'_>) -> Result<(), Fail> {
    let fx = Fx::new(c.opts)?;
    let (scq, scq_ring) = fx.cq(64)?;
    let (rcq, rcq_ring) = fx.cq(64)?;
    let rounds = c.opts.iterations.clamp(1, 20);

    // RESET cannot go to ERR (the core's `qp_state_table`).
    let starts = [state::INIT, state::RTR, state::RTS];
    let (mut flushed, mut total, mut stray) = (0, 0, 0);
    for round in 0..rounds {
        let from = starts[round as usize % starts.len()];
        let q = fx.qp_in(QpSpec::new(QpType::Rc, &scq, &rcq), from)?;
        let k = 1 + c.rng.below(q.rq.num_slots());
        let want: Vec<(u64, u32)> = garbage(&mut c.rng, &q.rq, 0, k)
            .into_iter()
            .map(|w| (w, wc::WR_FLUSH_ERR))
            .collect();
        let ok = fx.modify(&q, state::ERR).is_ok();
        let got = rcq_ring.collect(want.len(), WAIT);
        let opcodes_ok = got.iter().all(|c| c.opcode == wc::OP_RECV);
        let seen: Vec<(u64, u32)> = got.iter().map(|c| (c.wr_id, c.status)).collect();
        let consumer = q.rq.consumer();
        total += 1;
        if ok
            && opcodes_ok
            && seen == want
            && consumer == k
            && got.iter().all(|c| c.qp_num == q.qp.qpn)
        {
            flushed += 1;
        } else {
            c.r.fail(format!(
                "round {round} from {}: {k} garbage receives: modify ok={ok}, {} completions (opcodes ok={opcodes_ok}), in order={}, RQ consumer {consumer}",
                state::name(from),
                got.len(),
                seen == want
            ));
        }
        stray += scq_ring.settle().len();
        fx.destroy_qp(q).step("DESTROY_QP")?;
    }
    c.r.eq("garbage receives are flushed one for one, in order, as IBV_WC_RECV, from INIT, RTR and RTS", flushed, total);
    c.r.eq("no send completion from the empty SQs", stray, 0);

    // An impossible producer: nothing is read, nothing is completed.
    let q = fx.qp_in(QpSpec::new(QpType::Rc, &scq, &rcq), state::INIT)?;
    garbage(&mut c.rng, &q.rq, 0, 1);
    q.rq.set_producer(0x4000_0000);
    let cons = q.rq.consumer();
    c.r.ok(
        "MODIFY_QP to ERR with an impossible RQ producer succeeds",
        fx.modify(&q, state::ERR),
    );
    c.r.check(
        rcq_ring.settle().is_empty(),
        "an impossible RQ producer yields no completion",
    );
    c.r.eq(
        "and leaves the RQ consumer index alone",
        q.rq.consumer(),
        cons,
    );
    c.r.ok("DESTROY_QP", fx.destroy_qp(q));

    // RESET discards: no completions, the kernel's consumer catches up.
    let q = fx.qp_in(QpSpec::new(QpType::Rc, &scq, &rcq), state::INIT)?;
    let k = q.rq.num_slots();
    garbage(&mut c.rng, &q.rq, 0, k);
    let prod = q.rq.producer();
    c.r.ok(
        "MODIFY_QP INIT to RESET over a full garbage RQ",
        fx.modify(&q, state::RESET),
    );
    c.r.check(
        rcq_ring.settle().is_empty(),
        "RESET discards the garbage receives without completions",
    );
    c.r.eq(
        "the RQ consumer index reached the producer",
        q.rq.consumer(),
        prod,
    );
    // And the QP works from RESET again: one real receive, then ERR.
    fx.bring_up(&q, state::INIT)?;
    post_recv(&q.rq, 0x7e57);
    c.r.ok("the reset QP goes INIT to ERR", fx.modify(&q, state::ERR));
    let got = rcq_ring.collect(1, WAIT);
    expect_cqes(
        c.r,
        "the reset QP flushes exactly its new receive",
        &got,
        &[(0x7e57, wc::WR_FLUSH_ERR)],
        q.qp.qpn,
    );
    c.r.ok("DESTROY_QP", fx.destroy_qp(q));

    c.r.ok("DESTROY_CQ send", fx.destroy_cq(scq, scq_ring));
    c.r.ok("DESTROY_CQ recv", fx.destroy_cq(rcq, rcq_ring));
    c.r.ok("DEALLOC_PD", fx.v.dealloc_pd(fx.pd));
    Ok(())
}
