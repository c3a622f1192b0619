//! Read-response credits held by reads that are never answered.
//!
//! roxe's RC requesters share a device pool of read-response credits
//! (`limits::READ_CREDITS`): a read request takes one per response packet it
//! asks for, and the responses give them back. Here "hog" QPs send reads to
//! a QP that stays in RESET, so no answer comes, with the longest
//! retransmission timeout (`timeout` 31, which roxe caps at a minute per
//! try). Their read sizes halve from 128 packets down to one, so together
//! they take every credit of any pool up to 255 (the smaller ones starve
//! and overdraw too). Once they have, a read from a fresh QP connected to
//! itself must still complete: after 200 ms without credits
//! (`CREDIT_STARVED_MS`) it overdraws the pool, which the
//! `read_credit_overdraft` counter shows. Once the hogs are destroyed the
//! pool is whole again: a 128- and a 64-packet read on two QPs at once
//! complete without another overdraft.

use super::*;
use crate::abi;
use crate::sys::Mapping;
use roxe_uapi::Sge;

/// Packets in the first hog's read; each next hog asks for half.
const HOG_MAX: u64 = 128;
/// The path MTU of every QP here (`IB_MTU_1024`).
const MTU: u64 = 1024;

/// A signaled RDMA READ of `len` bytes from `off` into `off + len` of the
/// buffer, within the same MR.
fn read(wr_id: u64, addr: u64, key: (u32, u32), off: u64, len: u64) -> Vec<u8> {
    let (lkey, rkey) = key;
    let len32 = u32::try_from(len).expect("a read within the buffer");
    let w = SendWqe {
        opcode: wr::RDMA_READ,
        num_sge: 1,
        rkey,
        remote_addr: addr + off,
        ..send(wr_id)
    };
    let sge = Sge {
        addr: addr + off + len,
        length: len32,
        lkey,
    };
    [abi::send_wqe(&w), abi::sge(&sge)].concat()
}

fn overdrafts(ibdev: &str) -> Option<u64> {
    hw_counter(ibdev, "read_credit_overdraft")
}

pub fn run(c: &mut Ctx<'_>) -> Result<(), Fail> {
    let fx = Fx::new(c.opts)?;
    let v = &fx.v;
    let (cq, cq_ring) = fx.cq(64)?;
    let len = 4 * HOG_MAX * MTU;
    let buf = Mapping::anon(usize::try_from(len).expect("a small buffer"))
        .step("a buffer to register")?;
    // LOCAL_WRITE | REMOTE_READ
    let mr = v
        .reg_mr(fx.pd, buf.addr(), len, buf.addr(), 1 | 4, &[])
        .step("REG_MR")?;
    let key = (mr.lkey, mr.rkey);
    c.r.check(
        overdrafts(&c.opts.ibdev).is_some(),
        "the port has the read_credit_overdraft counter",
    );

    // The hogs' reads go to a QP that never leaves RESET.
    let sink = fx.qp(QpSpec::new(QpType::Rc, &cq, &cq))?;
    let mut hogs = Vec::new();
    let mut pkts = HOG_MAX;
    // Bounded: the size halves each round.
    while pkts >= 1 {
        let q = fx.qp(QpSpec::new(QpType::Rc, &cq, &cq))?;
        fx.modify(&q, state::INIT)
            .step("MODIFY_QP of a hog to INIT")?;
        let rtr = Modify {
            dest_qp_num: sink.qp.qpn,
            ..fx.attrs(&q.qp, q.ty, state::RTR)
        };
        v.modify_qp(q.qp.handle, &rtr)
            .step("MODIFY_QP of a hog to RTR")?;
        let rts = Modify {
            timeout: 31,
            ..fx.attrs(&q.qp, q.ty, state::RTS)
        };
        v.modify_qp(q.qp.handle, &rts)
            .step("MODIFY_QP of a hog to RTS, timeout 31")?;
        post_raw(&q.sq, &read(0x4000 + pkts, buf.addr(), key, 0, pkts * MTU));
        c.r.ok(
            format!("a hog's read of {pkts} packets: the doorbell"),
            v.doorbell(q.qp.handle),
        );
        hogs.push(q);
        pkts /= 2;
    }
    c.r.info(format!(
        "{} hogs wait for answers that never come",
        hogs.len()
    ));
    // The smaller hogs starve and overdraw too; let them, so that the
    // counter below moves for the victim alone.
    std::thread::sleep(std::time::Duration::from_millis(400));
    let before = overdrafts(&c.opts.ibdev);

    let q = fx.loopback(QpSpec::new(QpType::Rc, &cq, &cq))?;
    post_raw(&q.sq, &read(0x4001_0000, buf.addr(), key, 0, 4 * MTU));
    let start = std::time::Instant::now();
    c.r.ok(
        "the victim's read of 4 packets: the doorbell",
        v.doorbell(q.qp.handle),
    );
    let got = cq_ring.collect(1, WAIT);
    expect_cqes(
        c.r,
        "the victim's read completes while the hogs hold the credits",
        &got,
        &[(0x4001_0000, wc::SUCCESS)],
        q.qp.qpn,
    );
    c.r.info(format!(
        "the victim's read took {} ms",
        start.elapsed().as_millis()
    ));
    let during = overdrafts(&c.opts.ibdev);
    c.r.check(
        matches!((before, during), (Some(b), Some(d)) if d > b),
        format!("read_credit_overdraft went up: {before:?} -> {during:?}"),
    );
    c.r.check(cq_ring.poll().is_none(), "no hog's read completed");
    c.r.ok("DESTROY_QP of the victim", fx.destroy_qp(q));

    for h in hogs {
        c.r.ok("DESTROY_QP of a hog", fx.destroy_qp(h));
    }
    c.r.ok("DESTROY_QP of the sink", fx.destroy_qp(sink));

    // The hogs gave their credits back, the overdrafts included: reads of
    // 128 and 64 packets at once (the whole pool) need no overdraft.
    let q1 = fx.loopback(QpSpec::new(QpType::Rc, &cq, &cq))?;
    let q2 = fx.loopback(QpSpec::new(QpType::Rc, &cq, &cq))?;
    post_raw(
        &q1.sq,
        &read(0x4002_0000, buf.addr(), key, 0, HOG_MAX * MTU),
    );
    post_raw(
        &q2.sq,
        &read(
            0x4003_0000,
            buf.addr(),
            key,
            2 * HOG_MAX * MTU,
            HOG_MAX / 2 * MTU,
        ),
    );
    c.r.ok(
        "a read of 128 packets after the hogs are gone: the doorbell",
        v.doorbell(q1.qp.handle),
    );
    c.r.ok(
        "and one of 64 packets on another QP: the doorbell",
        v.doorbell(q2.qp.handle),
    );
    let mut got: Vec<(u64, u32)> = cq_ring
        .collect(2, WAIT)
        .iter()
        .map(|x| (x.wr_id, x.status))
        .collect();
    got.sort_unstable();
    c.r.eq(
        "both complete",
        got,
        vec![(0x4002_0000, wc::SUCCESS), (0x4003_0000, wc::SUCCESS)],
    );
    let after = overdrafts(&c.opts.ibdev);
    c.r.eq(
        "read_credit_overdraft did not move for them: the pool is whole",
        after,
        during,
    );
    c.r.ok("DESTROY_QP", fx.destroy_qp(q1));
    c.r.ok("DESTROY_QP", fx.destroy_qp(q2));

    c.r.ok("DEREG_MR", v.dereg_mr(mr.handle));
    c.r.ok("munmap of the buffer", buf.unmap());
    c.r.ok("DESTROY_CQ", fx.destroy_cq(cq, cq_ring));
    c.r.ok("DEALLOC_PD", v.dealloc_pd(fx.pd));
    Ok(())
}
