//! CQ ring garbage: user space owns the whole CQ mapping and may write
//! anything there, including a consumer index the kernel's producer could
//! never have reached. The kernel must then stop producing into that CQ
//! (it is broken for good), raise `IB_EVENT_CQ_ERR` once, keep every other
//! CQ working, and still destroy everything cleanly. A CQ that merely
//! overflows ends the same way (IBTA: a CQ overrun is a CQ error).

use super::*;
use crate::abi;
use crate::uverbs::event;

/// A consumer index that is impossible for a kernel producer at 0: the
/// distance `0 - consumer` exceeds the ring.
fn impossible_consumer(rng: &mut Rng, num_slots: u32) -> u32 {
    let c = rng.u32();
    if 0u32.wrapping_sub(c) <= num_slots {
        0x8000_0000
    } else {
        c
    }
}

pub fn run(c: &mut Ctx<'_>) -> Result<(), Fail> {
    let fx = Fx::new(c.opts)?;
    let (bad, bad_ring) = fx.cq(16)?;
    let (good, good_ring) = fx.cq(64)?;

    // Garbage over the whole mapping, header and slots.
    let mut garbage = c.rng.bytes(bad_ring.0.mapping().len());
    let consumer = impossible_consumer(&mut c.rng, bad_ring.0.num_slots());
    garbage[abi::CONSUMER..abi::CONSUMER + 4].copy_from_slice(&consumer.to_ne_bytes());
    bad_ring.0.overwrite(&garbage);
    c.r.info(format!(
        "garbage CQ ring: producer {:#x}, consumer {consumer:#x}",
        bad_ring.0.producer()
    ));

    // A QP that completes sends into the garbage CQ and receives into a
    // good one; ERR makes the kernel produce flush completions into both.
    let a = fx.qp_in(QpSpec::new(QpType::Rc, &bad, &good), state::INIT)?;
    for i in 0..3 {
        post_send(&a.sq, &send(0xa0 + i));
    }
    post_recv(&a.rq, 0xb0);
    post_recv(&a.rq, 0xb1);
    c.r.ok(
        "MODIFY_QP to ERR with a garbage send CQ succeeds",
        fx.modify(&a, state::ERR),
    );
    let got = good_ring.collect(2, WAIT);
    expect_cqes(
        c.r,
        "the good receive CQ gets both receive flushes",
        &got,
        &[(0xb0, wc::WR_FLUSH_ERR), (0xb1, wc::WR_FLUSH_ERR)],
        a.qp.qpn,
    );
    c.r.check(
        bad_ring.0.snapshot() == garbage,
        "the kernel wrote nothing into the CQ with the impossible consumer index",
    );
    expect_event(
        &fx,
        c.r,
        "the garbage CQ raised an error event",
        bad.user_handle,
        event::CQ_ERR,
    )?;
    expect_state(&fx, c.r, "the QP is in ERR", &a, state::ERR);
    c.r.eq(
        "the SQ consumer index covers the flushed sends",
        a.sq.consumer(),
        3,
    );

    // Repairing the indices does not revive the CQ: it is in error for good.
    bad_ring.0.set_producer(0);
    bad_ring.0.set_consumer(0);
    let repaired = bad_ring.0.snapshot();
    let b = fx.qp_in(QpSpec::new(QpType::Rc, &bad, &good), state::INIT)?;
    post_send(&b.sq, &send(0xc0));
    post_send(&b.sq, &send(0xc1));
    c.r.ok(
        "a second QP on the broken CQ goes to ERR",
        fx.modify(&b, state::ERR),
    );
    c.r.check(
        bad_ring.0.snapshot() == repaired,
        "a broken CQ stays broken after its indices are repaired: nothing written",
    );
    c.r.check(
        good_ring.settle().is_empty(),
        "nothing leaks into the good CQ",
    );
    match fx.v.resize_cq(bad.handle, 32) {
        Ok(_) => c.r.fail("RESIZE_CQ of a broken CQ succeeded"),
        Err(e) => {
            c.r.check(true, format!("RESIZE_CQ of a broken CQ fails ({e})"));
        }
    }

    // The kernel keeps its own producer index: scribbling over the copy
    // in the ring changes nothing but that copy, which the next completion
    // overwrites.
    let before = good_ring.0.producer();
    good_ring.0.set_producer(before ^ 0x5a5a_0000);
    let f = fx.qp_in(QpSpec::new(QpType::Rc, &good, &good), state::INIT)?;
    post_recv(&f.rq, 0xf0);
    c.r.ok(
        "MODIFY_QP to ERR after the CQ's producer index was scribbled over",
        fx.modify(&f, state::ERR),
    );
    c.r.eq(
        "the kernel publishes its own producer index again",
        good_ring.0.producer(),
        before.wrapping_add(1),
    );
    let got = good_ring.collect(1, WAIT);
    expect_cqes(
        c.r,
        "and the completion sits where its own index says",
        &got,
        &[(0xf0, wc::WR_FLUSH_ERR)],
        f.qp.qpn,
    );
    c.r.ok("DESTROY_QP f", fx.destroy_qp(f));

    // Overflow: one slot, three completions.
    let (over, over_ring) = fx.cq(1)?;
    c.r.eq(
        "CREATE_CQ cqe=1 gives a one-slot ring",
        (over.cqe, over_ring.0.num_slots()),
        (1, 1),
    );
    let d = fx.qp_in(QpSpec::new(QpType::Rc, &over, &good), state::INIT)?;
    for i in 0..3 {
        post_send(&d.sq, &send(0xd0 + i));
    }
    c.r.ok(
        "MODIFY_QP to ERR into a one-slot CQ succeeds",
        fx.modify(&d, state::ERR),
    );
    c.r.eq(
        "the one-slot CQ holds exactly one completion",
        over_ring.0.producer(),
        1,
    );
    let got = over_ring.collect(1, WAIT);
    expect_cqes(
        c.r,
        "and it is the first flush",
        &got,
        &[(0xd0, wc::WR_FLUSH_ERR)],
        d.qp.qpn,
    );
    expect_event(
        &fx,
        c.r,
        "the overflow raised an error event",
        over.user_handle,
        event::CQ_ERR,
    )?;
    let e = fx.qp_in(QpSpec::new(QpType::Rc, &over, &good), state::INIT)?;
    post_send(&e.sq, &send(0xe0));
    c.r.ok(
        "a QP on the overflowed CQ goes to ERR",
        fx.modify(&e, state::ERR),
    );
    c.r.eq(
        "the overflowed CQ stays in error even with room again",
        over_ring.0.producer(),
        1,
    );

    // Clean teardown of everything, broken CQs included.
    for (name, q) in [("a", a), ("b", b), ("d", d), ("e", e)] {
        c.r.ok(format!("DESTROY_QP {name}"), fx.destroy_qp(q));
    }
    c.r.ok("DESTROY_CQ of the garbage CQ", fx.destroy_cq(bad, bad_ring));
    c.r.ok(
        "DESTROY_CQ of the overflowed CQ",
        fx.destroy_cq(over, over_ring),
    );
    c.r.ok("DESTROY_CQ of the good CQ", fx.destroy_cq(good, good_ring));
    c.r.ok("DEALLOC_PD", fx.v.dealloc_pd(fx.pd));
    Ok(())
}
