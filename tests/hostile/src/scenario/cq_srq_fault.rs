//! `CREATE_CQ` and `CREATE_SRQ` failing after their budget unit (and, for
//! an SRQ, its number) was taken.
//!
//! roxe's test-only knobs `/sys/module/roxe/parameters/fail_cq_init` and
//! `fail_srq_init` make the Nth creation from then on fail with `ENOMEM` in
//! its last step, the initialiser of its state. Each such creation must
//! give back what it took. `tests/guest/hostile.sh` checks that where it
//! shows: it deletes the device afterwards, and roxe reports any budget
//! still taken then ("still accounted") in the kernel log. Here the
//! failures are driven, and creations around them must still work.

use super::*;
use crate::errno::{Errno, ENOMEM};
use std::path::Path;

const CQ_KNOB: &str = "/sys/module/roxe/parameters/fail_cq_init";
const SRQ_KNOB: &str = "/sys/module/roxe/parameters/fail_srq_init";

/// Sets a knob; puts it back to 0 on drop, whatever happened.
struct Knob(&'static str);

impl Knob {
    fn set(path: &'static str, n: u32) -> Result<Knob, Fail> {
        std::fs::write(path, format!("{n}\n"))
            .map_err(|e| Fail(format!("writing {n} to {path}: {e}")))?;
        Ok(Knob(path))
    }

    fn get(&self) -> Result<u32, Fail> {
        let s = std::fs::read_to_string(self.0)
            .map_err(|e| Fail(format!("reading {}: {e}", self.0)))?;
        s.trim()
            .parse()
            .map_err(|e| Fail(format!("{} holds {s:?}: {e}", self.0)))
    }
}

impl Drop for Knob {
    fn drop(&mut self) {
        let _ = std::fs::write(self.0, "0\n");
    }
}

fn try_cq(fx: &Fx, cqe: u32) -> Result<(), Errno> {
    let cq = fx.v.create_cq(cqe, 0, fx.handle(0xc1), &[])?;
    fx.v.destroy_cq(cq.handle)
}

fn try_srq(fx: &Fx, max_wr: u32) -> Result<(), Errno> {
    let srq = fx.v.create_srq(fx.pd, max_wr, 1, fx.handle(0x51), &[])?;
    fx.v.destroy_srq(srq.handle)
}

pub fn run(c: &mut Ctx<'_>) -> Result<(), Fail> {
    for knob in [CQ_KNOB, SRQ_KNOB] {
        if !Path::new(knob).exists() {
            return Err(Fail(format!(
                "{knob} does not exist: this roxe.ko has no CQ/SRQ fault knob"
            )));
        }
    }
    let fx = Fx::new(c.opts)?;
    for (round, n) in [16, 1000, 16].into_iter().enumerate() {
        let knob = Knob::set(CQ_KNOB, 1)?;
        c.r.errno(
            format!("round {round}: CREATE_CQ({n}) with its initialisation failing"),
            try_cq(&fx, n),
            ENOMEM,
        );
        c.r.eq(
            format!("round {round}: the CQ knob fired once"),
            knob.get()?,
            0,
        );
        drop(knob);
        c.r.ok(
            format!("round {round}: the next CREATE_CQ({n}) succeeds"),
            try_cq(&fx, n),
        );

        let knob = Knob::set(SRQ_KNOB, 1)?;
        c.r.errno(
            format!("round {round}: CREATE_SRQ({n}) with its initialisation failing"),
            try_srq(&fx, n),
            ENOMEM,
        );
        c.r.eq(
            format!("round {round}: the SRQ knob fired once"),
            knob.get()?,
            0,
        );
        drop(knob);
        c.r.ok(
            format!("round {round}: the next CREATE_SRQ({n}) succeeds"),
            try_srq(&fx, n),
        );
    }
    // The second creation from now fails; the first and third do not, and
    // the first stays usable.
    let knob = Knob::set(CQ_KNOB, 2)?;
    let first = fx.v.create_cq(16, 0, fx.handle(0xc2), &[]);
    c.r.check(
        first.is_ok(),
        "with the CQ knob at 2: the first CREATE_CQ succeeds",
    );
    c.r.errno(
        "with the CQ knob at 2: the second CREATE_CQ fails",
        try_cq(&fx, 16),
        ENOMEM,
    );
    c.r.ok(
        "with the CQ knob at 2: the third CREATE_CQ succeeds",
        try_cq(&fx, 16),
    );
    drop(knob);
    if let Ok(cq) = first {
        c.r.ok(
            "the CQ made before the failure is destroyed",
            fx.v.destroy_cq(cq.handle),
        );
    }
    Ok(())
}
