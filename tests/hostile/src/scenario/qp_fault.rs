//! `CREATE_QP` failing after the QP number was taken (issue 13, finding 7).
//!
//! roxe's test-only fault knob `/sys/module/roxe/parameters/fail_qp_table`
//! makes the Nth QP creation from then on fail its per-WQE PSN table
//! allocation, after it took a QP number (a QP table entry and a unit of
//! the QP budget). Each such creation must fail with `ENOMEM` and give
//! back what it took. That is checked where it can be seen:
//! `tests/guest/hostile.sh` deletes the device afterwards, and roxe reports
//! any budget still taken then ("still accounted") in the kernel log. Here
//! the failures are driven, and creations around them must still work.

use super::*;
use crate::errno::{Errno, ENOMEM};
use std::path::Path;

const KNOB: &str = "/sys/module/roxe/parameters/fail_qp_table";

/// Sets the knob; puts it back to 0 on drop, whatever happened.
struct Knob;

impl Knob {
    fn set(n: u32) -> Result<Knob, Fail> {
        std::fs::write(KNOB, format!("{n}\n"))
            .map_err(|e| Fail(format!("writing {n} to {KNOB}: {e}")))?;
        Ok(Knob)
    }

    fn get() -> Result<u32, Fail> {
        let s = std::fs::read_to_string(KNOB).map_err(|e| Fail(format!("reading {KNOB}: {e}")))?;
        s.trim()
            .parse()
            .map_err(|e| Fail(format!("{KNOB} holds {s:?}: {e}")))
    }
}

impl Drop for Knob {
    fn drop(&mut self) {
        let _ = std::fs::write(KNOB, "0\n");
    }
}

/// Creates a QP of type `ty` (its rings left unmapped) and destroys it.
fn try_create(fx: &Fx, cq: &Cq, ty: QpType) -> Result<(), Errno> {
    let qp = fx.v.create_qp(&QpArgs {
        qp_type: ty,
        pd: fx.pd,
        send_cq: cq.handle,
        recv_cq: cq.handle,
        max_send_wr: 16,
        max_recv_wr: 16,
        max_send_sge: 2,
        max_recv_sge: 1,
        max_inline_data: 64,
        user_handle: fx.handle(0x9f),
        srq: None,
        driver_in: Vec::new(),
    })?;
    fx.v.destroy_qp(qp.handle)
}

pub fn run(c: &mut Ctx<'_>) -> Result<(), Fail> {
    if !Path::new(KNOB).exists() {
        return Err(Fail(format!(
            "{KNOB} does not exist: this roxe.ko has no QP fault knob"
        )));
    }
    let fx = Fx::new(c.opts)?;
    let (cq, ring) = fx.cq(16)?;
    for (round, ty) in [QpType::Rc, QpType::Uc, QpType::Ud, QpType::Rc]
        .into_iter()
        .enumerate()
    {
        let knob = Knob::set(1)?;
        c.r.errno(
            format!("round {round}: CREATE_QP {ty:?} with its PSN table allocation failing"),
            try_create(&fx, &cq, ty),
            ENOMEM,
        );
        c.r.eq(
            format!("round {round}: the knob fired once"),
            Knob::get()?,
            0,
        );
        drop(knob);
        c.r.ok(
            format!("round {round}: the next CREATE_QP {ty:?} succeeds"),
            try_create(&fx, &cq, ty),
        );
    }
    // The second creation from now fails; the first and third do not.
    let knob = Knob::set(2)?;
    let first = fx.qp(QpSpec::new(QpType::Rc, &cq, &cq));
    c.r.check(
        first.is_ok(),
        "with the knob at 2: the first CREATE_QP succeeds",
    );
    c.r.errno(
        "with the knob at 2: the second CREATE_QP fails",
        try_create(&fx, &cq, QpType::Rc),
        ENOMEM,
    );
    c.r.ok(
        "with the knob at 2: the third CREATE_QP succeeds",
        try_create(&fx, &cq, QpType::Rc),
    );
    drop(knob);
    if let Ok(q) = first {
        // The QP made before the failure still works.
        fx.bring_up(&q, state::RTS)?;
        c.r.ok(
            "the QP made before the failure reaches RTS and is destroyed",
            fx.destroy_qp(q),
        );
    }
    fx.destroy_cq(cq, ring).step("DESTROY_CQ")?;
    Ok(())
}
