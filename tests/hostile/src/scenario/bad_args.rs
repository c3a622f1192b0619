//! Bad verbs arguments: sizes beyond the device's limits, memory that is
//! not there, illegal QP transitions, driver input that roxe does not
//! define, and destroying objects that are still in use. Each must fail
//! with the right errno and leave nothing behind.

use super::*;
use crate::errno::{EBUSY, EFAULT, EINVAL, ENOENT, EOPNOTSUPP};
use crate::sys::{page_size, Hole, Mapping};
use crate::uverbs::{mask, Modify, QpArgs};
use roxe_proto::access;

pub fn run(c: &mut Ctx<'_>) -> Result<(), Fail> {
    let fx = Fx::new(c.opts)?;
    let v = &fx.v;
    let caps = fx.caps;
    c.r.info(format!("device caps: {caps:?}"));

    // CREATE_CQ.
    c.r.errno("CREATE_CQ cqe=0", v.create_cq(0, 0, 1, &[]), EINVAL);
    c.r.errno(
        "CREATE_CQ cqe=2^31",
        v.create_cq(1 << 31, 0, 1, &[]),
        EINVAL,
    );
    c.r.errno(
        "CREATE_CQ cqe=max_cqe+1",
        v.create_cq(caps.max_cqe + 1, 0, 1, &[]),
        EINVAL,
    );
    c.r.errno(
        "CREATE_CQ comp_vector=1 (the device has one)",
        v.create_cq(4, 1, 1, &[]),
        EINVAL,
    );
    c.r.errno(
        "CREATE_CQ with non-zero driver input",
        v.create_cq(4, 0, 1, &[0xde, 0xad, 0xbe, 0xef, 0, 0, 0, 0]),
        EOPNOTSUPP,
    );
    if let Some(cq) = c.r.ok(
        "CREATE_CQ with all-zero driver input is accepted",
        v.create_cq(4, 0, 1, &[0; 16]),
    ) {
        c.r.ok("DESTROY_CQ of it", v.destroy_cq(cq.handle));
    }
    if let Some(cq) = c.r.ok(
        "CREATE_CQ cqe=max_cqe is accepted",
        v.create_cq(caps.max_cqe, 0, 1, &[]),
    ) {
        c.r.check(
            cq.cqe >= caps.max_cqe,
            format!("it holds {} >= max_cqe entries", cq.cqe),
        );
        c.r.ok("DESTROY_CQ of it", v.destroy_cq(cq.handle));
    }

    // ALLOC_PD and GET_CONTEXT with driver input.
    c.r.errno(
        "ALLOC_PD with non-zero driver input",
        v.alloc_pd(&[1, 0, 0, 0, 0, 0, 0, 0]),
        EOPNOTSUPP,
    );
    match Verbs::open(&c.opts.dev) {
        Ok(mut v2) => {
            c.r.errno(
                "GET_CONTEXT with driver input (roxe defines none)",
                v2.get_context(&[7, 0, 0, 0, 0, 0, 0, 0]),
                EINVAL,
            );
            c.r.ok(
                "GET_CONTEXT on the same file afterwards",
                v2.get_context(&[]),
            );
        }
        Err(e) => {
            c.r.fail(format!("a second open of the device failed with {e}"))
        }
    }

    // CREATE_QP.
    let (cq, cq_ring) = fx.cq(16)?;
    let args = QpArgs {
        qp_type: QpType::Rc,
        pd: fx.pd,
        send_cq: cq.handle,
        recv_cq: cq.handle,
        max_send_wr: 8,
        max_recv_wr: 8,
        max_send_sge: 1,
        max_recv_sge: 1,
        max_inline_data: 0,
        user_handle: 2,
        srq: None,
        driver_in: Vec::new(),
    };
    let bad_qps: [(&str, QpArgs); 6] = [
        (
            "max_send_sge=1000",
            QpArgs {
                max_send_sge: 1000,
                ..args.clone()
            },
        ),
        (
            "max_recv_sge=max_sge+1",
            QpArgs {
                max_recv_sge: caps.max_sge + 1,
                ..args.clone()
            },
        ),
        (
            "max_send_wr=max_qp_wr+1",
            QpArgs {
                max_send_wr: caps.max_qp_wr + 1,
                ..args.clone()
            },
        ),
        (
            "max_recv_wr=2^32-1",
            QpArgs {
                max_recv_wr: u32::MAX,
                ..args.clone()
            },
        ),
        (
            "max_inline_data=2^20",
            QpArgs {
                max_inline_data: 1 << 20,
                ..args.clone()
            },
        ),
        (
            "max_inline_data=2^32-1",
            QpArgs {
                max_inline_data: u32::MAX,
                ..args.clone()
            },
        ),
    ];
    for (what, a) in &bad_qps {
        c.r.errno(format!("CREATE_QP {what}"), v.create_qp(a), EINVAL);
    }
    c.r.errno(
        "CREATE_QP with non-zero driver input",
        v.create_qp(&QpArgs {
            driver_in: vec![0, 0, 0, 0, 0, 0, 0, 1],
            ..args.clone()
        }),
        EOPNOTSUPP,
    );

    // REG_MR.
    let page = page_size();
    let buf = Mapping::anon(4 * page).step("an anonymous buffer")?;
    let hole = Hole::new().step("an unmapped hole")?;
    let (len4, addr) = ((4 * page) as u64, buf.addr());
    let lw = access::LOCAL_WRITE;
    c.r.errno(
        "REG_MR length 0",
        v.reg_mr(fx.pd, addr, 0, addr, lw, &[]),
        EINVAL,
    );
    let hp = hole.page() as u64;
    c.r.errno(
        "REG_MR of an unmapped page",
        v.reg_mr(fx.pd, hole.addr(), hp, hole.addr(), lw, &[]),
        EFAULT,
    );
    c.r.errno(
        "REG_MR of a PROT_NONE page",
        v.reg_mr(
            fx.pd,
            hole.prot_none_addr(),
            hp,
            hole.prot_none_addr(),
            lw,
            &[],
        ),
        EFAULT,
    );
    let near_end = hole.addr() - 8;
    c.r.errno(
        "REG_MR from a mapped page into the unmapped one",
        v.reg_mr(fx.pd, near_end, 64, near_end, lw, &[]),
        EFAULT,
    );
    c.r.ok(
        "REG_MR of the mapped page alone works",
        v.reg_mr(fx.pd, hole.mapped_addr(), hp, hole.mapped_addr(), lw, &[]),
    )
    .map(|mr| c.r.ok("DEREG_MR of it", v.dereg_mr(mr.handle)));
    c.r.errno(
        "REG_MR whose end wraps the address space",
        v.reg_mr(fx.pd, addr, u64::MAX - addr + 2, addr, lw, &[]),
        EINVAL,
    );
    c.r.errno(
        "REG_MR longer than max_mr_size",
        v.reg_mr(fx.pd, addr, caps.max_mr_size + 1, addr, lw, &[]),
        EINVAL,
    );
    c.r.errno(
        "REG_MR whose iova's page offset differs from the address's",
        v.reg_mr(fx.pd, addr, len4, addr + 8, lw, &[]),
        EINVAL,
    );
    // REMOTE_WRITE without LOCAL_WRITE is meaningless (IBTA o10-37).
    c.r.errno(
        "REG_MR with REMOTE_WRITE but not LOCAL_WRITE",
        v.reg_mr(fx.pd, addr, len4, addr, access::REMOTE_WRITE, &[]),
        EINVAL,
    );
    c.r.errno(
        "REG_MR with non-zero driver input",
        v.reg_mr(fx.pd, addr, len4, addr, lw, &[9, 0, 0, 0, 0, 0, 0, 0]),
        EOPNOTSUPP,
    );
    if let Some(mr) = c.r.ok(
        "REG_MR of a real buffer",
        v.reg_mr(fx.pd, addr, len4, addr, lw, &[]),
    ) {
        c.r.errno("DEALLOC_PD while an MR uses it", v.dealloc_pd(fx.pd), EBUSY);
        c.r.ok("DEREG_MR", v.dereg_mr(mr.handle));
        c.r.errno(
            "DEREG_MR again (the handle is gone)",
            v.dereg_mr(mr.handle),
            ENOENT,
        );
    }
    drop(hole);

    // MODIFY_QP and the doorbell.
    let q = fx.qp(QpSpec::new(QpType::Rc, &cq, &cq))?;
    c.r.errno("doorbell in RESET", v.doorbell(q.qp.handle), EINVAL);
    let rts = fx.attrs(&q.qp, q.ty, state::RTS);
    c.r.errno(
        "MODIFY_QP RESET to RTS",
        v.modify_qp(q.qp.handle, &rts),
        EINVAL,
    );
    c.r.errno(
        "MODIFY_QP to state 7 (no such state)",
        v.modify_qp(
            q.qp.handle,
            &Modify {
                qp_state: 7,
                attr_mask: mask::STATE,
                ..Modify::default()
            },
        ),
        EINVAL,
    );
    let init = fx.attrs(&q.qp, q.ty, state::INIT);
    c.r.errno(
        "MODIFY_QP to INIT without the required PKEY_INDEX",
        v.modify_qp(
            q.qp.handle,
            &Modify {
                attr_mask: init.attr_mask & !mask::PKEY_INDEX,
                ..init
            },
        ),
        EINVAL,
    );
    c.r.errno(
        "MODIFY_QP to INIT with port 2",
        v.modify_qp(
            q.qp.handle,
            &Modify {
                port_num: 2,
                ..init
            },
        ),
        EINVAL,
    );
    c.r.errno(
        "MODIFY_QP to INIT with P_Key index 1",
        v.modify_qp(
            q.qp.handle,
            &Modify {
                pkey_index: 1,
                ..init
            },
        ),
        EINVAL,
    );
    c.r.errno(
        "MODIFY_QP to INIT with unknown access flags",
        v.modify_qp(
            q.qp.handle,
            &Modify {
                access_flags: 0x8000_0000,
                ..init
            },
        ),
        EINVAL,
    );
    expect_state(
        &fx,
        c.r,
        "refused transitions leave the QP",
        &q,
        state::RESET,
    );
    fx.modify(&q, state::INIT).step("MODIFY_QP to INIT")?;
    c.r.errno("doorbell in INIT", v.doorbell(q.qp.handle), EINVAL);
    let rtr = fx.attrs(&q.qp, q.ty, state::RTR);
    for (what, m) in [
        ("path MTU 9", Modify { path_mtu: 9, ..rtr }),
        (
            "dest QPN 2^24",
            Modify {
                dest_qp_num: 1 << 24,
                ..rtr
            },
        ),
        (
            "min_rnr_timer 32",
            Modify {
                min_rnr_timer: 32,
                ..rtr
            },
        ),
        (
            "max_dest_rd_atomic 255",
            Modify {
                max_dest_rd_atomic: 255,
                ..rtr
            },
        ),
        (
            "an AV on port 2",
            Modify {
                dest: Dest {
                    port_num: 2,
                    ..rtr.dest
                },
                ..rtr
            },
        ),
        (
            "an AV without a GRH",
            Modify {
                dest: Dest {
                    is_global: 0,
                    ..rtr.dest
                },
                ..rtr
            },
        ),
        (
            "an AV with SGID index 200 (an empty GID entry)",
            Modify {
                dest: Dest {
                    sgid_index: 200,
                    ..rtr.dest
                },
                ..rtr
            },
        ),
    ] {
        let r = v.modify_qp(q.qp.handle, &m);
        c.r.check(
            r.is_err(),
            format!(
                "MODIFY_QP to RTR with {what} fails{}",
                r.err().map(|e| format!(" ({e})")).unwrap_or_default()
            ),
        );
    }
    expect_state(
        &fx,
        c.r,
        "refused RTR transitions leave the QP",
        &q,
        state::INIT,
    );
    fx.modify(&q, state::RTR).step("MODIFY_QP to RTR")?;
    let rts = fx.attrs(&q.qp, q.ty, state::RTS);
    for (what, m) in [
        ("timeout 32", Modify { timeout: 32, ..rts }),
        (
            "retry_cnt 8",
            Modify {
                retry_cnt: 8,
                ..rts
            },
        ),
        (
            "rnr_retry 8",
            Modify {
                rnr_retry: 8,
                ..rts
            },
        ),
        (
            "max_rd_atomic 200",
            Modify {
                max_rd_atomic: 200,
                ..rts
            },
        ),
    ] {
        c.r.errno(
            format!("MODIFY_QP to RTS with {what}"),
            v.modify_qp(q.qp.handle, &m),
            EINVAL,
        );
    }
    fx.modify(&q, state::RTS).step("MODIFY_QP to RTS")?;
    c.r.errno(
        "POST_SEND with a real work request (roxe takes work from the ring)",
        v.post_send_wr(q.qp.handle, 1),
        EOPNOTSUPP,
    );
    c.r.errno(
        "doorbell on a QP handle that does not exist",
        v.doorbell(q.qp.handle + 1000),
        ENOENT,
    );

    let g = q.qp.caps;
    c.r.check(
        g.max_send_wr >= 16
            && g.max_recv_wr >= 16
            && g.max_send_sge >= 2
            && g.max_recv_sge >= 1
            && g.max_inline_data >= 64,
        format!("CREATE_QP grants at least what was asked ({g:?})"),
    );

    // Objects in use.
    c.r.errno(
        "DESTROY_CQ of a CQ a QP uses",
        v.destroy_cq(cq.handle),
        EBUSY,
    );
    c.r.errno("DEALLOC_PD of a PD a QP uses", v.dealloc_pd(fx.pd), EBUSY);
    c.r.ok("DESTROY_QP", fx.destroy_qp(q));
    c.r.ok("DESTROY_CQ once the QP is gone", fx.destroy_cq(cq, cq_ring));
    c.r.ok("DEALLOC_PD once nothing uses it", v.dealloc_pd(fx.pd));
    Ok(())
}
