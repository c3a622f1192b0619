//! Teardown with everything live: the device file is closed while QPs
//! hold work, CQs hold garbage, an MR is registered, asynchronous events
//! are unread, and (in the first round) the rings are still mapped, so that
//! the kernel tears the ucontext down only at the last `munmap`. Afterwards
//! a fresh ucontext must find the device working.

use super::*;
use crate::sys::{page_size, Mapping};
use roxe_proto::access;

/// Builds a messy ucontext and returns its mapped rings.
fn mess(c: &mut Ctx<'_>, fx: &Fx, buf: &Mapping) -> Result<Vec<Ring>, Fail> {
    let (a, a_ring) = fx.cq(16)?;
    let (b, b_ring) = fx.cq(16)?;
    a_ring.0.overwrite(&c.rng.bytes(a_ring.0.mapping().len()));
    a_ring.0.set_consumer(0x8000_0000);
    let lw = access::LOCAL_WRITE;
    fx.v.reg_mr(fx.pd, buf.addr(), buf.len() as u64, buf.addr(), lw, &[])
        .step("REG_MR")?;
    // Work waiting in an SQ, garbage in its RQ.
    let q1 = fx.qp_in(QpSpec::new(QpType::Rc, &b, &b), state::RTS)?;
    for i in 0..4 {
        post_send(&q1.sq, &send(i));
    }
    // The doorbell's own checks are elsewhere (sq-producer, bad-wqe); here
    // it only leaves state behind, so its result does not matter.
    let _ = fx.v.doorbell(q1.qp.handle);
    q1.rq.overwrite(&c.rng.bytes(q1.rq.mapping().len()));
    q1.rq.set_producer(3);
    // A QP on the garbage CQ in ERR (an unread CQ error event).
    let q2 = fx.qp_in(QpSpec::new(QpType::Ud, &a, &b), state::INIT)?;
    post_send(&q2.sq, &send(9));
    fx.modify(&q2, state::ERR).step("MODIFY_QP to ERR")?;
    // A QP with an impossible producer (an unread fatal event).
    let q3 = fx.qp_in(QpSpec::new(QpType::Uc, &b, &a), state::RTS)?;
    q3.sq.set_producer(0x9000_0000);
    let _ = fx.v.doorbell(q3.qp.handle);
    let mut rings = vec![a_ring.0, b_ring.0];
    for q in [q1, q2, q3] {
        rings.push(q.sq);
        rings.push(q.rq);
    }
    Ok(rings)
}

/// A fresh ucontext can run a QP through its states and flush it.
fn works(c: &mut Ctx<'_>, what: &str) -> Result<(), Fail> {
    let fx = Fx::new(c.opts)?;
    let (cq, ring) = fx.cq(16)?;
    let q = fx.qp_in(QpSpec::new(QpType::Rc, &cq, &cq), state::RTS)?;
    post_send(&q.sq, &send(0x77));
    c.r.ok(
        format!("{what}: MODIFY_QP to ERR"),
        fx.modify(&q, state::ERR),
    );
    let got = ring.collect(1, WAIT);
    expect_cqes(
        c.r,
        format!("{what}: a fresh QP flushes its work"),
        &got,
        &[(0x77, wc::WR_FLUSH_ERR)],
        q.qp.qpn,
    );
    c.r.ok(format!("{what}: DESTROY_QP"), fx.destroy_qp(q));
    c.r.ok(format!("{what}: DESTROY_CQ"), fx.destroy_cq(cq, ring));
    Ok(())
}

pub fn run(c: &mut Ctx<'_>) -> Result<(), Fail> {
    let buf = Mapping::anon(16 * page_size()).step("an anonymous buffer")?;

    // Round 1: close with the rings mapped; the ucontext goes at the last munmap.
    let fx = Fx::new(c.opts)?;
    let rings = mess(c, &fx, &buf)?;
    drop(fx);
    let mut alive = true;
    for r in &rings {
        let junk = c.rng.bytes(r.mapping().len());
        r.overwrite(&junk);
        alive &= r.snapshot() == junk;
    }
    c.r.check(
        alive,
        "after close, the still-mapped rings are ordinary memory",
    );
    let mut unmapped = true;
    for r in rings {
        unmapped &= r.unmap().is_ok();
    }
    c.r.check(
        unmapped,
        "munmap of every ring after close (the last one releases the ucontext)",
    );
    works(c, "after a teardown at the last munmap")?;

    // Round 2: unmap first, then close with the objects live.
    let fx = Fx::new(c.opts)?;
    let rings = mess(c, &fx, &buf)?;
    let mut unmapped = true;
    for r in rings {
        unmapped &= r.unmap().is_ok();
    }
    c.r.check(unmapped, "munmap of every ring before close");
    drop(fx);
    works(c, "after a teardown at close")?;
    Ok(())
}
