//! Ring memory is charged to the creator's memory cgroup (issue 13,
//! finding 9).
//!
//! The process moves itself into a fresh cgroup v2 group whose
//! `memory.max` is 32 MiB and creates objects whose rings need more: CQs
//! of 65,535 entries (4 MiB each) until one fails, an SRQ of 2^17 receives
//! with 16 SGEs, and a QP whose send queue alone is larger than the limit.
//! Each must fail with `ENOMEM`, the group's `memory.current` must grow by
//! the size of the first CQ's ring, and the same objects created after the
//! process has moved back to the root group must succeed: the failures
//! come from the cgroup, not from roxe's own budgets. A driver that
//! allocates its rings uncharged passes none of the in-group checks.
//!
//! Needs root and cgroup v2 at `/sys/fs/cgroup` with the memory controller
//! (the test kernel has `CONFIG_MEMCG`); without them the scenario fails.

use super::*;
use crate::errno::{Errno, ENOMEM};
use crate::uverbs::Srq;
use std::path::{Path, PathBuf};

const ROOT: &str = "/sys/fs/cgroup";
const LIMIT: u64 = 32 << 20;
/// The largest CQ roxe makes: 65,536 slots of 64 bytes.
const CQE: u32 = 0xffff;
const CQ_RING: u64 = 65536 * 64;
/// Enough 4 MiB CQs to pass the limit twice.
const CQS: usize = 16;

/// The group, and the process inside it until dropped: then the process
/// goes back to the root group and the group is removed.
struct Group {
    dir: PathBuf,
    inside: bool,
}

fn write(p: &Path, s: &str) -> Result<(), Fail> {
    std::fs::write(p, s).map_err(|e| Fail(format!("writing {s:?} to {}: {e}", p.display())))
}

impl Group {
    fn make() -> Result<Group, Fail> {
        let root = Path::new(ROOT);
        let controllers =
            std::fs::read_to_string(root.join("cgroup.controllers")).map_err(|e| {
                Fail(format!(
                    "{ROOT}/cgroup.controllers: {e} (is cgroup v2 mounted there?)"
                ))
            })?;
        if !controllers.split_whitespace().any(|c| c == "memory") {
            return Err(Fail(format!("{ROOT} offers no memory controller ({controllers:?}): a kernel without CONFIG_MEMCG")));
        }
        write(&root.join("cgroup.subtree_control"), "+memory")?;
        let dir = root.join(format!("roxe-hostile-{}", std::process::id()));
        std::fs::create_dir(&dir).map_err(|e| Fail(format!("mkdir {}: {e}", dir.display())))?;
        let g = Group { dir, inside: false };
        write(&g.dir.join("memory.max"), &LIMIT.to_string())?;
        Ok(g)
    }

    fn enter(&mut self) -> Result<(), Fail> {
        write(
            &self.dir.join("cgroup.procs"),
            &std::process::id().to_string(),
        )?;
        self.inside = true;
        Ok(())
    }

    fn leave(&mut self) -> Result<(), Fail> {
        if self.inside {
            write(
                &Path::new(ROOT).join("cgroup.procs"),
                &std::process::id().to_string(),
            )?;
            self.inside = false;
        }
        Ok(())
    }

    fn current(&self) -> Result<u64, Fail> {
        let p = self.dir.join("memory.current");
        let s = std::fs::read_to_string(&p).map_err(|e| Fail(format!("{}: {e}", p.display())))?;
        s.trim()
            .parse()
            .map_err(|e| Fail(format!("{} holds {s:?}: {e}", p.display())))
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        let _ = self.leave();
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// Creates CQs of `CQE` entries until `CQS` exist or one fails; returns
/// those made and the first error.
fn fill_cqs(fx: &Fx) -> (Vec<Cq>, Option<Errno>) {
    let mut made = Vec::new();
    for i in 0..CQS {
        match fx.v.create_cq(CQE, 0, fx.handle(0xa0 | i as u8), &[]) {
            Ok(cq) => made.push(cq),
            Err(e) => return (made, Some(e)),
        }
    }
    (made, None)
}

fn big_srq(fx: &Fx) -> Result<Srq, Errno> {
    fx.v.create_srq(fx.pd, 1 << 17, 16, fx.handle(0x5b), &[])
}

/// A UD QP with 2^18 send WQEs of 16 SGEs (more than the limit on its
/// own) on a small CQ.
fn big_qp(fx: &Fx, cq: &Cq) -> Result<Qp, Errno> {
    fx.v.create_qp(&QpArgs {
        qp_type: QpType::Ud,
        pd: fx.pd,
        send_cq: cq.handle,
        recv_cq: cq.handle,
        max_send_wr: 1 << 18,
        max_recv_wr: 1,
        max_send_sge: 16,
        max_recv_sge: 1,
        max_inline_data: 0,
        user_handle: fx.handle(0x9b),
        srq: None,
        driver_in: Vec::new(),
    })
}

pub fn run(c: &mut Ctx<'_>) -> Result<(), Fail> {
    let fx = Fx::new(c.opts)?;
    let small =
        fx.v.create_cq(16, 0, fx.handle(0x5c), &[])
            .map_err(|e| Fail(format!("CREATE_CQ(16): {e}")))?;
    let mut g = Group::make()?;
    g.enter()?;

    // Inside: the first CQ is charged, and the limit stops the rest.
    let before = g.current()?;
    let first = fx.v.create_cq(CQE, 0, fx.handle(0x9f), &[]);
    let after = g.current()?;
    c.r.check(
        first.is_ok(),
        format!(
            "in a {} MiB cgroup: one CREATE_CQ({CQE}) succeeds",
            LIMIT >> 20
        ),
    );
    c.r.check(
        after >= before + CQ_RING,
        format!(
            "the group's memory.current grew by the CQ ring ({} KiB): {before} -> {after}",
            CQ_RING >> 10
        ),
    );
    let (cqs, err) = fill_cqs(&fx);
    c.r.check(
        err == Some(ENOMEM) && cqs.len() < CQS,
        format!("in the group: CREATE_CQ({CQE}) fails with ENOMEM before {CQS} more exist (made {}, then {err:?})", cqs.len()),
    );
    for cq in cqs.into_iter().chain(first) {
        c.r.ok(
            "destroying a CQ made in the group",
            fx.v.destroy_cq(cq.handle),
        );
    }
    let srq = big_srq(&fx);
    c.r.check(
        matches!(srq, Err(e) if e == ENOMEM),
        format!(
            "in the group: CREATE_SRQ(2^17 receives, 16 SGEs) fails with ENOMEM ({:?})",
            srq.as_ref().err()
        ),
    );
    if let Ok(s) = srq {
        let _ = fx.v.destroy_srq(s.handle);
    }
    let qp = big_qp(&fx, &small);
    c.r.check(
        matches!(qp, Err(e) if e == ENOMEM),
        format!(
            "in the group: CREATE_QP(2^18 send WQEs, 16 SGEs) fails with ENOMEM ({:?})",
            qp.as_ref().err()
        ),
    );
    if let Ok(q) = qp {
        let _ = fx.v.destroy_qp(q.handle);
    }

    // Outside: the same creations succeed.
    g.leave()?;
    let (cqs, err) = fill_cqs(&fx);
    c.r.check(
        err.is_none() && cqs.len() == CQS,
        format!(
            "in the root group: {CQS} CREATE_CQ({CQE}) succeed (made {}, {err:?})",
            cqs.len()
        ),
    );
    for cq in cqs {
        c.r.ok(
            "destroying a CQ made in the root group",
            fx.v.destroy_cq(cq.handle),
        );
    }
    match big_srq(&fx) {
        Ok(s) => {
            c.r.check(true, "in the root group: the big CREATE_SRQ succeeds");
            c.r.ok("destroying the big SRQ", fx.v.destroy_srq(s.handle));
        }
        Err(e) => {
            c.r.fail(format!("in the root group: the big CREATE_SRQ failed: {e}"))
        }
    }
    match big_qp(&fx, &small) {
        Ok(q) => {
            c.r.check(true, "in the root group: the big CREATE_QP succeeds");
            c.r.ok("destroying the big QP", fx.v.destroy_qp(q.handle));
        }
        Err(e) => {
            c.r.fail(format!("in the root group: the big CREATE_QP failed: {e}"))
        }
    }
    c.r.ok("destroying the small CQ", fx.v.destroy_cq(small.handle));
    Ok(())
}
