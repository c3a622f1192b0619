//! Address handles are scoped to their PD (issue 13, finding 6).
//!
//! A UD work request names its AH by roxe's number for it (`ah_num`),
//! which user space writes into the SQ ring and can simply guess: numbers
//! are handed out in order across the whole device. A UD QP may send only
//! through an AH of its own PD, so neither another process's AH (another
//! ucontext) nor one of another PD of the same process may carry it: such
//! a send completes with a local QP operation error. Its own AH works.

use super::*;
use crate::uverbs::Ah;

/// The Q_Key the UD QPs are created with (`Fx::attrs`).
const QKEY: u32 = 0x1111_1111;

/// A signaled zero-length UD SEND through AH `ah_num` to QP `qpn`.
fn ud_send(wr_id: u64, ah_num: u32, qpn: u32) -> SendWqe {
    SendWqe {
        ah_num,
        remote_qpn: qpn,
        remote_qkey: QKEY,
        ..send(wr_id)
    }
}

/// Sends through `ah_num` on a fresh UD QP of `fx`'s PD and checks the
/// completion.
fn case(
    c: &mut Ctx<'_>,
    fx: &Fx,
    what: &str,
    ah_num: u32,
    wr_id: u64,
    want: u32,
) -> Result<(), Fail> {
    let (cq, ring) = fx.cq(16)?;
    let q = fx.qp_in(QpSpec::new(QpType::Ud, &cq, &cq), state::RTS)?;
    post_send(&q.sq, &ud_send(wr_id, ah_num, q.qp.qpn));
    c.r.ok(format!("{what}: the doorbell"), fx.v.doorbell(q.qp.handle));
    let got = ring.collect(1, WAIT);
    expect_cqes(c.r, what, &got, &[(wr_id, want)], q.qp.qpn);
    fx.destroy_qp(q).step("DESTROY_QP")?;
    fx.destroy_cq(cq, ring).step("DESTROY_CQ")?;
    Ok(())
}

pub fn run(c: &mut Ctx<'_>) -> Result<(), Fail> {
    let (gid, sgid) = (c.opts.gid, c.opts.sgid_index);
    // Another process: its own ucontext and PD, with an AH.
    let other = Fx::new(c.opts)?;
    let theirs: Ah = other
        .v
        .create_ah(other.pd, other.handle(0xa1), &gid, sgid)
        .step("CREATE_AH in the other ucontext")?;
    // This process: an AH in its PD, and one in a second PD.
    let fx = Fx::new(c.opts)?;
    let mine: Ah =
        fx.v.create_ah(fx.pd, fx.handle(0xa2), &gid, sgid)
            .step("CREATE_AH in this ucontext's PD")?;
    let pd2 = fx.v.alloc_pd(&[]).step("ALLOC_PD of a second PD")?;
    let other_pd: Ah =
        fx.v.create_ah(pd2, fx.handle(0xa3), &gid, sgid)
            .step("CREATE_AH in the second PD")?;
    c.r.info(format!(
        "AH numbers: other ucontext {}, own PD {}, second PD {}",
        theirs.ah_num, mine.ah_num, other_pd.ah_num
    ));

    case(
        c,
        &fx,
        "a UD SEND through the QP's own AH succeeds",
        mine.ah_num,
        0xa201,
        wc::SUCCESS,
    )?;
    case(
        c,
        &fx,
        "a UD SEND through another ucontext's AH fails",
        theirs.ah_num,
        0xa202,
        wc::LOC_QP_OP_ERR,
    )?;
    case(
        c,
        &fx,
        "a UD SEND through an AH of another PD of the same ucontext fails",
        other_pd.ah_num,
        0xa203,
        wc::LOC_QP_OP_ERR,
    )?;
    // The other process is not hurt: its AH still works for its own QPs.
    case(
        c,
        &other,
        "the other ucontext still sends through its own AH",
        theirs.ah_num,
        0xa204,
        wc::SUCCESS,
    )?;

    c.r.ok(
        "DESTROY_AH in the second PD",
        fx.v.destroy_ah(other_pd.handle),
    );
    c.r.ok("DEALLOC_PD of the second PD", fx.v.dealloc_pd(pd2));
    c.r.ok(
        "DESTROY_AH of this ucontext's AH",
        fx.v.destroy_ah(mine.handle),
    );
    c.r.ok(
        "DESTROY_AH in the other ucontext",
        other.v.destroy_ah(theirs.handle),
    );
    Ok(())
}
