//! Random WQE bytes: SQ slots full of random bytes (or of WQEs whose
//! fields are drawn from the interesting values), a valid producer, the
//! doorbell, then ERR; a fresh QP each iteration. Whatever the bytes, the
//! kernel must not crash, the doorbell must succeed, and every WQE must
//! complete exactly once, in order, with a status a malformed or flushed
//! WQE can have.

use super::*;
use crate::abi;
use crate::uverbs::QpCaps;

/// A WQE with each field drawn from values near the limits, or random.
fn structured(rng: &mut Rng, caps: &QpCaps, wr_id: u64, slot_size: usize) -> Vec<u8> {
    let mut pick = |interesting: &[u32]| {
        if rng.one_in(4) {
            rng.u32()
        } else {
            interesting[rng.below(interesting.len() as u32) as usize]
        }
    };
    let opcode = pick(&[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16]);
    let send_flags = pick(&[0, 1, 2, 4, 8, 16, 8 | 2]);
    let num_sge = pick(&[0, 1, caps.max_send_sge, caps.max_send_sge + 1, u32::MAX]);
    let inline_len = pick(&[
        0,
        1,
        caps.max_inline_data,
        caps.max_inline_data + 1,
        u32::MAX,
    ]);
    let wqe = SendWqe {
        wr_id,
        opcode,
        send_flags,
        num_sge,
        inline_len,
        imm_data: rng.u32(),
        rkey: rng.u32(),
        remote_addr: rng.u64(),
        compare_add: rng.u64(),
        swap: rng.u64(),
        ah_num: rng.u32(),
        remote_qpn: rng.u32(),
        remote_qkey: rng.u32(),
        _reserved: rng.u32(),
    };
    let mut b = abi::send_wqe(&wqe);
    // Random SGEs or inline bytes fill the rest of the slot.
    b.extend(rng.bytes(slot_size - b.len()));
    b
}

/// Tallies of one property over all iterations.
#[derive(Default)]
struct Tally {
    bad: u32,
    first: Option<String>,
}

impl Tally {
    fn record(&mut self, ok: bool, iteration: u32, detail: impl FnOnce() -> String) {
        if !ok {
            self.bad += 1;
            if self.first.is_none() {
                self.first = Some(format!("iteration {iteration}: {}", detail()));
            }
        }
    }

    fn report(self, r: &mut Report, n: u32, what: &str) {
        match self.first {
            None => r.check(true, format!("{what} ({n} iterations)")),
            Some(f) => r.check(
                false,
                format!(
                    "{what}: wrong in {} of {n} iterations; first: {f}",
                    self.bad
                ),
            ),
        };
    }
}

/// The properties checked in every iteration.
#[derive(Default)]
struct Tallies {
    doorbell: Tally,
    state_err: Tally,
    statuses: Tally,
    one_error: Tally,
    qpns: Tally,
    ordered: Tally,
    complete: Tally,
    consumed: Tally,
    destroy: Tally,
}

pub fn run(c: &mut Ctx<'_>) -> Result<(), Fail> {
    let fx = Fx::new(c.opts)?;
    let (scq, scq_ring) = fx.cq(64)?;
    let (rcq, rcq_ring) = fx.cq(64)?;
    require_doorbell(&fx, c.r, &scq)?;
    let n = c.opts.iterations;
    let mut t = Tallies::default();
    let mut total_cqes = 0usize;

    for it in 0..n {
        let q = fx.qp_in(QpSpec::new(QpType::Rc, &scq, &rcq), state::RTS)?;
        let slots = q.sq.num_slots();
        let k = 1 + c.rng.below(slots);
        let mut posted = Vec::new();
        for i in 0..k {
            let bytes = if c.rng.one_in(2) {
                c.rng.bytes(q.sq.slot_size())
            } else {
                structured(
                    &mut c.rng,
                    &q.qp.caps,
                    u64::from(it) << 32 | u64::from(i),
                    q.sq.slot_size(),
                )
            };
            posted.push(abi::send_wr_id(&bytes));
            q.sq.write_slot(i, &bytes);
        }
        q.sq.set_producer(k);
        let r = fx.v.doorbell(q.qp.handle);
        t.doorbell.record(r.is_ok(), it, || {
            format!("doorbell failed with {:?}", r.err())
        });
        let r = fx.modify(&q, state::ERR);
        t.state_err.record(r.is_ok(), it, || {
            format!("MODIFY_QP to ERR failed with {:?}", r.err())
        });
        let got = scq_ring.collect(posted.len(), WAIT);
        total_cqes += got.len();

        let bad_status: Vec<_> = got
            .iter()
            .filter(|c| ![wc::LOC_LEN_ERR, wc::LOC_QP_OP_ERR, wc::WR_FLUSH_ERR].contains(&c.status))
            .collect();
        t.statuses.record(bad_status.is_empty(), it, || {
            format!(
                "statuses {:?}",
                bad_status.iter().map(|c| c.status).collect::<Vec<_>>()
            )
        });
        let errors = got.iter().filter(|c| c.status != wc::WR_FLUSH_ERR).count();
        t.one_error
            .record(errors <= 1, it, || format!("{errors} non-flush errors"));
        t.qpns
            .record(got.iter().all(|c| c.qp_num == q.qp.qpn), it, || {
                "a CQE for another QP".into()
            });
        // Each completion names the next posted WQE not yet completed:
        // `got` must be a subsequence of `posted` (wr_ids may repeat).
        let mut rest = posted.iter();
        let in_order = got.iter().all(|cqe| rest.any(|&w| w == cqe.wr_id));
        t.ordered.record(in_order, it, || {
            format!(
                "wr_ids {:x?} are not a subsequence of the posted {:x?}",
                got.iter().map(|c| c.wr_id).collect::<Vec<_>>(),
                posted
            )
        });
        t.complete.record(got.len() == posted.len(), it, || {
            format!("{} of {} WQEs completed", got.len(), posted.len())
        });
        t.consumed.record(q.sq.consumer() == k, it, || {
            format!("SQ consumer {} after {k} WQEs", q.sq.consumer())
        });
        let r = fx.destroy_qp(q);
        t.destroy.record(r.is_ok(), it, || {
            format!("DESTROY_QP failed with {:?}", r.err())
        });
    }
    c.r.info(format!("{total_cqes} completions in {n} iterations"));
    t.doorbell.report(
        c.r,
        n,
        "the doorbell accepts random WQEs behind a valid producer",
    );
    t.state_err
        .report(c.r, n, "MODIFY_QP to ERR succeeds afterwards");
    t.statuses.report(
        c.r,
        n,
        "every status is LOC_LEN_ERR, LOC_QP_OP_ERR or WR_FLUSH_ERR",
    );
    t.one_error.report(
        c.r,
        n,
        "at most one WQE per QP completes with a non-flush error",
    );
    t.qpns.report(c.r, n, "every completion names the QP");
    t.ordered
        .report(c.r, n, "completions come in posting order, none twice");
    t.complete.report(c.r, n, "every posted WQE completes");
    t.consumed
        .report(c.r, n, "the SQ consumer index reaches the producer");
    t.destroy.report(c.r, n, "DESTROY_QP succeeds");
    c.r.check(rcq_ring.settle().is_empty(), "nothing on the receive CQ");
    c.r.ok("DESTROY_CQ send", fx.destroy_cq(scq, scq_ring));
    c.r.ok("DESTROY_CQ recv", fx.destroy_cq(rcq, rcq_ring));
    c.r.ok("DEALLOC_PD", fx.v.dealloc_pd(fx.pd));
    Ok(())
}
