//! Completion notification: `REQ_NOTIFY_CQ` must reach roxe, an armed CQ
//! must send exactly one event to its completion channel per arm, an
//! unarmed one none, a solicited arm must fire on an error completion
//! (IBTA: unsuccessful completions satisfy a solicited-only request), and a
//! CQ broken by a hostile consumer index must report `IB_EVENT_CQ_ERR`
//! instead of a completion event.

use super::*;
use crate::errno::{ENOENT, EOPNOTSUPP};
use crate::uverbs::event;
use std::os::fd::OwnedFd;

/// Every completion event that arrives within the wait, by CQ handle.
fn comp_events(ch: &OwnedFd, first_ms: i32) -> Result<Vec<u64>, Fail> {
    let mut v = Vec::new();
    // Bounded: a few events at most, each wait bounded.
    for _ in 0..64 {
        let wait = if v.is_empty() { first_ms } else { 100 };
        match Verbs::next_comp_event(ch, wait).step("reading the completion channel")? {
            Some(h) => v.push(h),
            None => break,
        }
    }
    Ok(v)
}

/// Flushes one receive of a fresh QP into `cq`.
fn one_flush(fx: &Fx, cq: &Cq) -> Result<(), Fail> {
    let q = fx.qp_in(QpSpec::new(QpType::Rc, cq, cq), state::INIT)?;
    post_recv(&q.rq, 0x1);
    fx.modify(&q, state::ERR).step("MODIFY_QP to ERR")?;
    fx.destroy_qp(q).step("DESTROY_QP")
}

pub fn run(c: &mut Ctx<'_>) -> Result<(), Fail> {
    let fx = Fx::new(c.opts)?;
    let v = &fx.v;
    let ch = v.create_comp_channel().step("CREATE_COMP_CHANNEL")?;
    let cq = v
        .create_cq_on(Some(&ch), 64, 0, fx.handle(0xcc), &[])
        .step("CREATE_CQ on the channel")?;
    let ring = CqRing(
        crate::ring::Ring::map(
            v,
            cq.ring.mmap_offset,
            cq.ring.mmap_size,
            cq.ring.num_slots,
            cq.ring.slot_size,
        )
        .step("mmap of the CQ ring")?,
    );

    match v.req_notify_cq(cq.handle, false) {
        Ok(()) => c.r.check(true, "REQ_NOTIFY_CQ reaches roxe"),
        Err(e) if e == EOPNOTSUPP => {
            return Err(Fail(
                "REQ_NOTIFY_CQ fails with EOPNOTSUPP in the RDMA core: the device does not set \
                 IB_USER_VERBS_CMD_REQ_NOTIFY_CQ in uverbs_cmd_mask"
                    .into(),
            ))
        }
        Err(e) => return Err(Fail(format!("REQ_NOTIFY_CQ failed with {e}"))),
    };
    c.r.ok(
        "arming it again is harmless",
        v.req_notify_cq(cq.handle, false),
    );
    one_flush(&fx, &cq)?;
    c.r.eq(
        "an armed CQ sends one completion event",
        comp_events(&ch, 2000)?,
        vec![cq.user_handle],
    );
    c.r.eq(
        "the completion is in the ring",
        ring.collect(1, WAIT).len(),
        1,
    );
    one_flush(&fx, &cq)?;
    c.r.eq(
        "the fired arm is gone: no event for the next completion",
        comp_events(&ch, 100)?,
        vec![],
    );
    ring.collect(1, WAIT);

    c.r.ok(
        "REQ_NOTIFY_CQ solicited only",
        v.req_notify_cq(cq.handle, true),
    );
    one_flush(&fx, &cq)?;
    c.r.eq(
        "a solicited arm fires on an error completion",
        comp_events(&ch, 2000)?,
        vec![cq.user_handle],
    );
    ring.collect(1, WAIT);

    // A hostile consumer index breaks the CQ: an error event, no completion event.
    c.r.ok(
        "REQ_NOTIFY_CQ before the ring is corrupted",
        v.req_notify_cq(cq.handle, false),
    );
    ring.0.set_consumer(ring.0.producer().wrapping_add(1));
    one_flush(&fx, &cq)?;
    c.r.eq(
        "a corrupted CQ sends no completion event",
        comp_events(&ch, 100)?,
        vec![],
    );
    expect_event(
        &fx,
        c.r,
        "a corrupted CQ raises an error event instead",
        cq.user_handle,
        event::CQ_ERR,
    )?;

    c.r.errno(
        "REQ_NOTIFY_CQ on a CQ handle that does not exist",
        v.req_notify_cq(cq.handle + 1000, false),
        ENOENT,
    );
    // Closing the channel first: the CQ keeps its own reference.
    drop(ch);
    c.r.ok(
        "DESTROY_CQ after its channel was closed",
        fx.destroy_cq(cq, ring),
    );
    c.r.ok("DEALLOC_PD", v.dealloc_pd(fx.pd));
    Ok(())
}
