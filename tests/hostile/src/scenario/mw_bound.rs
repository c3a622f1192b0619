//! Deregistering or re-registering an MR that memory windows are bound to.
//!
//! A bound window refers to its MR. Were the MR deregistered, its key
//! index could come to hold another MR, which the window would then reach;
//! re-registered, the window would keep rights and a range the MR no
//! longer has. So, as rxe does (IBA 10.6.7.2.6), `DEREG_MR` and `REREG_MR`
//! fail with `EINVAL` while a window is bound, and work again once it is
//! unbound or deallocated.

use super::mr_rereg::{bind_slot, one_wqe};
use super::*;
use crate::errno::EINVAL;
use crate::sys::{page_size, Mapping};
use crate::uverbs::rereg;
use roxe_proto::access::{LOCAL_WRITE, MW_BIND, REMOTE_READ, REMOTE_WRITE};

pub fn run(c: &mut Ctx<'_>) -> Result<(), Fail> {
    let fx = Fx::new(c.opts)?;
    let (cq, ring) = fx.cq(64)?;
    let page = page_size();
    let buf = Mapping::anon(2 * page).step("a buffer to register")?;
    let (addr, len) = (buf.addr(), buf.len() as u64);
    let all = LOCAL_WRITE | REMOTE_WRITE | REMOTE_READ | MW_BIND;
    let mr =
        fx.v.reg_mr(fx.pd, addr, len, addr, all, &[])
            .step("REG_MR with MW_BIND")?;
    let mw = fx.v.alloc_mw(fx.pd, 1).step("ALLOC_MW of type 1")?;
    let got = one_wqe(
        &fx,
        &cq,
        &ring,
        &bind_slot(0x61, mw.rkey, mr.lkey, addr, page as u64, REMOTE_READ),
    )?;
    c.r.eq(
        "a type 1 window binds to the MR",
        got,
        Some((0x61, wc::SUCCESS)),
    );

    c.r.errno(
        "DEREG_MR with a window bound",
        fx.v.dereg_mr(mr.handle),
        EINVAL,
    );
    let r = fx.v.rereg_mr(
        mr.handle,
        rereg::ACCESS,
        0,
        0,
        0,
        0,
        LOCAL_WRITE | REMOTE_READ | MW_BIND,
    );
    c.r.errno("REREG_MR of the rights with a window bound", r, EINVAL);
    let r = fx.v.rereg_mr(
        mr.handle,
        rereg::TRANS,
        addr + page as u64,
        page as u64,
        addr,
        0,
        0,
    );
    c.r.errno("REREG_MR of the translation with a window bound", r, EINVAL);

    // A zero-length type 1 bind unbinds: the MR is free again.
    let got = one_wqe(
        &fx,
        &cq,
        &ring,
        &bind_slot(0x62, mw.rkey, mr.lkey, addr, 0, 0),
    )?;
    c.r.eq(
        "a zero-length bind unbinds the window",
        got,
        Some((0x62, wc::SUCCESS)),
    );
    let r = fx.v.rereg_mr(mr.handle, rereg::ACCESS, 0, 0, 0, 0, all);
    c.r.ok("REREG_MR of the rights once the window is unbound", r);

    // Bound again, then deallocated: the MR is free again too.
    let got = one_wqe(
        &fx,
        &cq,
        &ring,
        &bind_slot(0x63, mw.rkey, mr.lkey, addr, len, REMOTE_READ),
    )?;
    c.r.eq("the window binds again", got, Some((0x63, wc::SUCCESS)));
    c.r.errno(
        "DEREG_MR with the window bound again",
        fx.v.dereg_mr(mr.handle),
        EINVAL,
    );
    c.r.ok("DEALLOC_MW of the bound window", fx.v.dealloc_mw(mw.handle));
    c.r.ok("DEREG_MR once the window is gone", fx.v.dereg_mr(mr.handle));
    fx.destroy_cq(cq, ring).step("DESTROY_CQ")?;
    Ok(())
}
