//! Receive WQs, their indirection tables and RSS QPs, all through the
//! extended commands: WQs with types, flags, sizes and driver input roxe
//! does not offer; `MODIFY_WQ` with illegal transitions, a wrong current
//! state, flags and unknown states; tables too large or listing what is
//! not a WQ; RSS QPs with forged `CreateRssQpCmd`s, queues, an SRQ or the
//! wrong QP type; destroying a WQ or a table that is still in use; and
//! random bytes over a WQ's ring (header included) with impossible and
//! valid producers, flushed by ERR. No frame is delivered here: that needs
//! a flow and a peer (`tests/guest/raw-qp.py`).

use super::*;
use crate::abi;
use crate::errno::{EBUSY, EINVAL, ENOENT, ENOSPC, EOPNOTSUPP};
use crate::uverbs::{
    wq_mask, wq_state, wq_type, IndTable, QpExArgs, Wq, WqArgs, WqModify, CREATE_QP_MASK_IND_TABLE,
};
use roxe_proto::rss::{fields, FUNC_TOEPLITZ};
use roxe_uapi::{CreateRssQpCmd, RingInfo, RSS_KEY_MAX};

/// roxe's largest WQ (`MAX_QP_WR`).
const MAX_WQ_WR: u32 = 1 << 20;
/// roxe's most SGEs per receive (`MAX_SGE`).
const MAX_SGE: u32 = 32;
/// roxe's largest indirection table (`MAX_IND_TABLE_LOG`).
const MAX_IND_TABLE_LOG: u32 = 10;
/// The core's largest (`IB_USER_VERBS_MAX_LOG_IND_TBL_SIZE`).
const CORE_MAX_IND_TABLE_LOG: u32 = 13;
/// A WQ handle that names nothing.
const NO_HANDLE: u32 = 0xdead;

/// Where a garbage round puts a fresh WQ's producer index, given its
/// `num_slots` and a count of receives `k` (the kernel's consumer is 0).
type Producer = fn(u32, u32) -> u32;

/// Destroys what a command that should have failed made anyway.
fn undo_wq(fx: &Fx, r: &Result<Wq, Errno>) {
    if let Ok(w) = r {
        let _ = fx.v.destroy_wq(w.handle);
    }
}

fn undo_table(fx: &Fx, r: &Result<IndTable, Errno>) {
    if let Ok(t) = r {
        let _ = fx.v.destroy_ind_table(t.handle);
    }
}

fn undo_qp(fx: &Fx, r: &Result<Qp, Errno>) {
    if let Ok(q) = r {
        let _ = fx.v.destroy_qp(q.handle);
    }
}

/// Maps a WQ's ring.
fn map(fx: &Fx, i: &RingInfo) -> Result<Ring, Errno> {
    Ring::map(&fx.v, i.mmap_offset, i.mmap_size, i.num_slots, i.slot_size)
}

/// `MODIFY_WQ` naming the current state `cur` as well.
fn modify_from(fx: &Fx, wq: &Wq, cur: u32, to: u32) -> Result<(), Errno> {
    fx.v.modify_wq(
        wq.handle,
        &WqModify {
            attr_mask: wq_mask::STATE | wq_mask::CUR_STATE,
            wq_state: to,
            curr_wq_state: cur,
            ..WqModify::default()
        },
    )
}

pub fn run(c: &mut Ctx<'_>) -> Result<(), Fail> {
    let fx = Fx::new(c.opts)?;
    let v = &fx.v;
    let (cq, cq_ring) = fx.cq(64)?;
    let good = WqArgs {
        wq_type: wq_type::RQ,
        pd: fx.pd,
        cq: cq.handle,
        max_wr: 16,
        max_sge: 1,
        create_flags: 0,
        user_handle: fx.handle(0x77),
        driver_in: Vec::new(),
    };

    // 1. WQ creation.
    for (what, a, want) in [
        (
            "wq_type 1 (not IB_WQT_RQ)",
            WqArgs {
                wq_type: 1,
                ..good.clone()
            },
            EOPNOTSUPP,
        ),
        (
            "create_flags CVLAN_STRIPPING",
            WqArgs {
                create_flags: 1,
                ..good.clone()
            },
            EOPNOTSUPP,
        ),
        (
            "max_wr 0",
            WqArgs {
                max_wr: 0,
                ..good.clone()
            },
            EINVAL,
        ),
        (
            "max_wr 2^20 + 1",
            WqArgs {
                max_wr: MAX_WQ_WR + 1,
                ..good.clone()
            },
            EINVAL,
        ),
        (
            "max_wr 2^32 - 1",
            WqArgs {
                max_wr: u32::MAX,
                ..good.clone()
            },
            EINVAL,
        ),
        (
            "max_sge 33",
            WqArgs {
                max_sge: MAX_SGE + 1,
                ..good.clone()
            },
            EINVAL,
        ),
        (
            "max_sge 2^32 - 1",
            WqArgs {
                max_sge: u32::MAX,
                ..good.clone()
            },
            EINVAL,
        ),
        (
            "non-zero driver input",
            WqArgs {
                driver_in: vec![0, 0, 0, 0, 0, 0, 0, 1],
                ..good.clone()
            },
            EOPNOTSUPP,
        ),
        (
            "the PD's handle as its CQ",
            WqArgs {
                cq: fx.pd,
                ..good.clone()
            },
            EINVAL,
        ),
    ] {
        let res = v.create_wq(&a);
        undo_wq(&fx, &res);
        c.r.errno(format!("CREATE_WQ with {what}"), res, want);
    }
    for (what, a) in [
        (
            "all-zero driver input",
            WqArgs {
                driver_in: vec![0; 16],
                ..good.clone()
            },
        ),
        (
            "max_wr 2^20 (the limit)",
            WqArgs {
                max_wr: MAX_WQ_WR,
                ..good.clone()
            },
        ),
        (
            "max_sge 32 (the limit)",
            WqArgs {
                max_sge: MAX_SGE,
                ..good.clone()
            },
        ),
    ] {
        if let Some(w) = c.r.ok(format!("CREATE_WQ with {what}"), v.create_wq(&a)) {
            c.r.check(
                w.max_wr >= a.max_wr && w.max_sge >= a.max_sge,
                format!("it grants max_wr {} and max_sge {}", w.max_wr, w.max_sge),
            );
            c.r.ok("DESTROY_WQ of it", v.destroy_wq(w.handle));
        }
    }
    let wa = v.create_wq(&good).step("CREATE_WQ max_wr=16")?;
    let wb = v
        .create_wq(&WqArgs {
            max_wr: 8,
            max_sge: 4,
            ..good.clone()
        })
        .step("CREATE_WQ max_wr=8 max_sge=4")?;
    c.r.check(
        wa.max_wr >= 16 && wa.max_sge >= 1 && wa.ring.num_slots == wa.max_wr,
        format!(
            "CREATE_WQ grants max_wr {} and max_sge {} in a ring of {} slots",
            wa.max_wr, wa.max_sge, wa.ring.num_slots
        ),
    );
    c.r.check(
        wa.wqn != wb.wqn && wa.ring.mmap_offset != wb.ring.mmap_offset,
        format!(
            "two WQs have their own numbers ({:#x}, {:#x}) and rings",
            wa.wqn, wb.wqn
        ),
    );
    match map(&fx, &wa.ring) {
        Ok(ring) => {
            c.r.eq(
                "the WQ's RingInfo maps a ring with header (producer, consumer)",
                (ring.producer(), ring.consumer()),
                (0, 0),
            );
            c.r.ok("munmap of it", ring.unmap());
        }
        Err(e) => {
            c.r.fail(format!("mmap of the WQ's RingInfo failed with {e}"))
        }
    }

    // 2. MODIFY_WQ. The WQ is in RESET; refused modifications leave it
    // there. Not tried: wq_state or curr_wq_state above IB_WQS_ERR. The
    // core refuses them with EINVAL, but Linux 6.12's
    // ib_uverbs_ex_modify_wq returns without releasing the WQ it looked
    // up: the WQ can no longer be destroyed, and closing the file hits the
    // WARN_ON in __uverbs_cleanup_ufile. That is a core bug, not roxe's.
    let refusals = [
        (
            "IB_WQ_FLAGS in the mask",
            WqModify {
                attr_mask: wq_mask::STATE | wq_mask::FLAGS,
                wq_state: wq_state::RDY,
                flags: 1,
                flags_mask: 1,
                ..WqModify::default()
            },
            EOPNOTSUPP,
        ),
        (
            "curr_wq_state RDY while it is in RESET",
            WqModify {
                attr_mask: wq_mask::STATE | wq_mask::CUR_STATE,
                wq_state: wq_state::ERR,
                curr_wq_state: wq_state::RDY,
                ..WqModify::default()
            },
            EINVAL,
        ),
        ("attr_mask 0", WqModify::default(), EINVAL),
        (
            "an unknown attr_mask bit",
            WqModify {
                attr_mask: wq_mask::STATE | 1 << 3,
                wq_state: wq_state::RDY,
                ..WqModify::default()
            },
            EINVAL,
        ),
    ];
    for (what, m, want) in refusals {
        c.r.errno(
            format!("MODIFY_WQ with {what}"),
            v.modify_wq(wa.handle, &m),
            want,
        );
    }
    c.r.ok(
        "the refused modifications left the WQ in RESET (RESET to RESET naming RESET)",
        modify_from(&fx, &wa, wq_state::RESET, wq_state::RESET),
    );
    c.r.ok(
        "MODIFY_WQ RESET to ERR",
        v.wq_state(wa.handle, wq_state::ERR),
    );
    c.r.errno(
        "MODIFY_WQ ERR to RDY",
        v.wq_state(wa.handle, wq_state::RDY),
        EINVAL,
    );
    c.r.errno(
        "MODIFY_WQ naming RESET while it is in ERR",
        modify_from(&fx, &wa, wq_state::RESET, wq_state::RESET),
        EINVAL,
    );
    c.r.ok(
        "MODIFY_WQ ERR to RESET naming ERR",
        modify_from(&fx, &wa, wq_state::ERR, wq_state::RESET),
    );
    c.r.ok(
        "MODIFY_WQ RESET to RDY, then RDY to RESET",
        v.wq_state(wa.handle, wq_state::RDY)
            .and_then(|()| v.wq_state(wa.handle, wq_state::RESET)),
    );
    c.r.check(
        cq_ring.settle().is_empty(),
        "an empty WQ's moves complete nothing",
    );

    // 3. Indirection tables.
    let big = vec![wa.handle; 1 << (MAX_IND_TABLE_LOG + 1)];
    for (what, log, wqs, want) in [
        (
            "log size 11 (roxe's largest is 10)",
            MAX_IND_TABLE_LOG + 1,
            big.as_slice(),
            EINVAL,
        ),
        (
            "log size 14 (the core's largest is 13)",
            CORE_MAX_IND_TABLE_LOG + 1,
            &[wa.handle, wb.handle][..],
            EINVAL,
        ),
        (
            "the PD's handle as an entry",
            1,
            &[wa.handle, fx.pd][..],
            EINVAL,
        ),
        (
            "the CQ's handle as an entry",
            1,
            &[cq.handle, wb.handle][..],
            EINVAL,
        ),
        (
            "a handle that names nothing",
            1,
            &[wa.handle, NO_HANDLE][..],
            ENOENT,
        ),
        (
            "fewer entries than its log size says",
            2,
            &[wa.handle, wb.handle][..],
            ENOSPC,
        ),
    ] {
        let res = v.create_ind_table(log, wqs);
        undo_table(&fx, &res);
        c.r.errno(format!("CREATE_RWQ_IND_TBL with {what}"), res, want);
    }
    if let Some(t) = c.r.ok(
        "CREATE_RWQ_IND_TBL of 2^10 entries (roxe's largest), one WQ in all",
        v.create_ind_table(MAX_IND_TABLE_LOG, &big[..1 << MAX_IND_TABLE_LOG]),
    ) {
        c.r.ok("DESTROY_RWQ_IND_TBL of it", v.destroy_ind_table(t.handle));
    }
    let table = v
        .create_ind_table(1, &[wa.handle, wb.handle])
        .step("CREATE_RWQ_IND_TBL of two WQs")?;
    c.r.info(format!(
        "a table of WQs {:#x} and {:#x}: number {:#x}",
        wa.wqn, wb.wqn, table.num
    ));

    // 4. RSS QPs.
    let mut key = [0u8; RSS_KEY_MAX];
    c.rng.fill(&mut key);
    let cmd = CreateRssQpCmd {
        hash_fields: fields::SRC_IPV4
            | fields::DST_IPV4
            | fields::SRC_PORT_UDP
            | fields::DST_PORT_UDP,
        hash_function: FUNC_TOEPLITZ,
        key_len: RSS_KEY_MAX as u8,
        _reserved: [0; 6],
        key,
    };
    let good_qp = QpExArgs {
        base: QpArgs {
            qp_type: QpType::RawPacket,
            pd: fx.pd,
            send_cq: 0,
            recv_cq: 0,
            max_send_wr: 0,
            max_recv_wr: 0,
            max_send_sge: 0,
            max_recv_sge: 0,
            max_inline_data: 0,
            user_handle: fx.handle(0x55),
            srq: None,
            driver_in: abi::create_rss_qp_cmd(&cmd),
        },
        comp_mask: CREATE_QP_MASK_IND_TABLE,
        create_flags: 0,
        ind_table: table.handle,
        source_qpn: 0,
    };
    let with_cmd = |k: CreateRssQpCmd| QpExArgs {
        base: QpArgs {
            driver_in: abi::create_rss_qp_cmd(&k),
            ..good_qp.base.clone()
        },
        ..good_qp.clone()
    };
    let with_base = |b: QpArgs| QpExArgs {
        base: b,
        ..good_qp.clone()
    };
    let mut reserved = [0u8; 6];
    reserved[5] = 0x80;
    let full = abi::create_rss_qp_cmd(&cmd);
    let mut long_dirty = full.clone();
    long_dirty.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 1]);
    let bad_qps: Vec<(&str, QpExArgs, Errno)> = vec![
        (
            "key_len 0",
            with_cmd(CreateRssQpCmd { key_len: 0, ..cmd }),
            EINVAL,
        ),
        (
            "key_len 41",
            with_cmd(CreateRssQpCmd {
                key_len: RSS_KEY_MAX as u8 + 1,
                ..cmd
            }),
            EINVAL,
        ),
        (
            "key_len 255",
            with_cmd(CreateRssQpCmd {
                key_len: u8::MAX,
                ..cmd
            }),
            EINVAL,
        ),
        (
            "hash_function 2",
            with_cmd(CreateRssQpCmd {
                hash_function: 2,
                ..cmd
            }),
            EOPNOTSUPP,
        ),
        (
            "hash_function 0",
            with_cmd(CreateRssQpCmd {
                hash_function: 0,
                ..cmd
            }),
            EOPNOTSUPP,
        ),
        (
            "hash_fields bit 8 (IPV6_FLOW_LABEL)",
            with_cmd(CreateRssQpCmd {
                hash_fields: cmd.hash_fields | 1 << 8,
                ..cmd
            }),
            EOPNOTSUPP,
        ),
        (
            "hash_fields bit 31 (INNER)",
            with_cmd(CreateRssQpCmd {
                hash_fields: cmd.hash_fields | 1 << 31,
                ..cmd
            }),
            EOPNOTSUPP,
        ),
        (
            "non-zero _reserved[0]",
            with_cmd(CreateRssQpCmd {
                _reserved: [1, 0, 0, 0, 0, 0],
                ..cmd
            }),
            EINVAL,
        ),
        (
            "non-zero _reserved[5]",
            with_cmd(CreateRssQpCmd {
                _reserved: reserved,
                ..cmd
            }),
            EINVAL,
        ),
        (
            "48 bytes of driver input (CreateRssQpCmd is 56)",
            with_base(QpArgs {
                driver_in: full[..48].to_vec(),
                ..good_qp.base.clone()
            }),
            EINVAL,
        ),
        (
            "64 bytes of driver input, non-zero past CreateRssQpCmd",
            with_base(QpArgs {
                driver_in: long_dirty,
                ..good_qp.base.clone()
            }),
            EOPNOTSUPP,
        ),
        (
            "no driver input (the hash configuration is required)",
            with_base(QpArgs {
                driver_in: Vec::new(),
                ..good_qp.base.clone()
            }),
            EINVAL,
        ),
        (
            "max_send_wr 1 (with a send CQ)",
            with_base(QpArgs {
                max_send_wr: 1,
                send_cq: cq.handle,
                ..good_qp.base.clone()
            }),
            EINVAL,
        ),
        (
            "max_send_sge 1",
            with_base(QpArgs {
                max_send_sge: 1,
                ..good_qp.base.clone()
            }),
            EINVAL,
        ),
        (
            "max_inline_data 1",
            with_base(QpArgs {
                max_inline_data: 1,
                ..good_qp.base.clone()
            }),
            EINVAL,
        ),
        (
            "max_recv_wr 1",
            with_base(QpArgs {
                max_recv_wr: 1,
                ..good_qp.base.clone()
            }),
            EINVAL,
        ),
        (
            "max_recv_sge 1",
            with_base(QpArgs {
                max_recv_sge: 1,
                ..good_qp.base.clone()
            }),
            EINVAL,
        ),
        (
            "is_srq",
            with_base(QpArgs {
                srq: Some(0),
                ..good_qp.base.clone()
            }),
            EINVAL,
        ),
        (
            "qp_type RC",
            with_base(QpArgs {
                qp_type: QpType::Rc,
                ..good_qp.base.clone()
            }),
            EINVAL,
        ),
        (
            "qp_type UD",
            with_base(QpArgs {
                qp_type: QpType::Ud,
                ..good_qp.base.clone()
            }),
            EINVAL,
        ),
        (
            "an unknown comp_mask bit",
            QpExArgs {
                comp_mask: CREATE_QP_MASK_IND_TABLE | 1 << 1,
                ..good_qp.clone()
            },
            EINVAL,
        ),
        (
            "a WQ's handle as its table",
            QpExArgs {
                ind_table: wa.handle,
                ..good_qp.clone()
            },
            EINVAL,
        ),
    ];
    for (what, a, want) in &bad_qps {
        let res = v.create_qp_ex(a);
        undo_qp(&fx, &res);
        c.r.errno(format!("CREATE_QP (RSS) with {what}"), res, *want);
    }
    if let Some(q) = c.r.ok(
        "CREATE_QP (RSS) with 64 bytes of driver input, zero past CreateRssQpCmd",
        v.create_qp_ex(&with_base(QpArgs {
            driver_in: [full.as_slice(), &[0; 8]].concat(),
            ..good_qp.base.clone()
        })),
    ) {
        c.r.ok("DESTROY_QP of it", v.destroy_qp(q.handle));
    }
    let Some(qp) = c.r.ok("CREATE_QP of an RSS QP", v.create_qp_ex(&good_qp)) else {
        return Err(Fail("no RSS QP to go on with".into()));
    };
    c.r.eq(
        "the RSS QP's CreateQpResp: (sq, rq) num_slots",
        (qp.rings.sq.num_slots, qp.rings.rq.num_slots),
        (0, 0),
    );
    c.r.check(
        qp.rings.sq == RingInfo::default() && qp.rings.rq == RingInfo::default(),
        format!("the RSS QP announces no ring to map: {:?}", qp.rings),
    );
    let cp = qp.caps;
    c.r.eq(
        "the RSS QP is granted no queues (send_wr, recv_wr, send_sge, recv_sge, inline)",
        (
            cp.max_send_wr,
            cp.max_recv_wr,
            cp.max_send_sge,
            cp.max_recv_sge,
            cp.max_inline_data,
        ),
        (0, 0, 0, 0, 0),
    );
    let init = Modify {
        qp_state: state::INIT,
        attr_mask: mask::STATE | mask::PKEY_INDEX | mask::PORT,
        port_num: 1,
        ..Modify::default()
    };
    c.r.errno(
        "MODIFY_QP of the RSS QP to INIT",
        v.modify_qp(qp.handle, &init),
        EOPNOTSUPP,
    );
    c.r.errno(
        "DESTROY_WQ of a WQ the table lists",
        v.destroy_wq(wa.handle),
        EBUSY,
    );
    c.r.errno(
        "DESTROY_RWQ_IND_TBL while the RSS QP uses it",
        v.destroy_ind_table(table.handle),
        EBUSY,
    );

    // 5. Garbage in a WQ ring: random bytes over the whole mapping, header
    // included, with an impossible producer or a valid one; RDY, then ERR,
    // then RESET, each on a fresh WQ (whose kernel consumer is 0). What ERR
    // flushes completes with WR_FLUSH_ERR under the WQ's number; an
    // impossible producer flushes nothing.
    let (gcq, gcq_ring) = fx.cq(64)?;
    let cases: [(&str, bool, Producer); 5] = [
        ("2^30 ahead", false, |_, _| 1 << 30),
        ("num_slots + 1 ahead", false, |n, _| n + 1),
        ("one behind", false, |_, _| u32::MAX),
        ("2^31 ahead", false, |_, _| 1 << 31),
        ("valid", true, |_, k| k),
    ];
    for (what, valid, ahead) in cases {
        let w = v
            .create_wq(&WqArgs {
                cq: gcq.handle,
                max_sge: 2,
                ..good.clone()
            })
            .step("CREATE_WQ for garbage")?;
        let ring = map(&fx, &w.ring).step("mmap of the WQ ring")?;
        let n = ring.num_slots();
        let k = 1 + c.rng.below(n);
        ring.overwrite(&c.rng.bytes(ring.mapping().len()));
        ring.set_producer(ahead(n, k));
        let want: Vec<(u64, u32)> = if valid {
            (0..k)
                .map(|i| (abi::recv_wr_id(&ring.read_slot(i)), wc::WR_FLUSH_ERR))
                .collect()
        } else {
            Vec::new()
        };
        let what = format!("garbage ring, producer {what}");
        let rdy = v.wq_state(w.handle, wq_state::RDY);
        let err = v.wq_state(w.handle, wq_state::ERR);
        let got = gcq_ring.collect(want.len(), WAIT);
        if valid {
            c.r.ok(format!("{what}: MODIFY_WQ RESET to RDY"), rdy);
            c.r.ok(format!("{what}: MODIFY_WQ RDY to ERR"), err);
            expect_cqes(
                c.r,
                format!("{what}: {k} receives flushed in order under the WQ's number"),
                &got,
                &want,
                w.wqn,
            );
            c.r.check(
                got.iter().all(|x| x.opcode == wc::OP_RECV),
                format!("{what}: as IBV_WC_RECV"),
            );
            c.r.eq(
                format!("{what}: the kernel's consumer index in the header"),
                ring.consumer(),
                k,
            );
        } else {
            let bad: Vec<String> = got
                .iter()
                .filter(|x| x.status != wc::WR_FLUSH_ERR || x.qp_num != w.wqn)
                .map(|x| format!("{:#x}:{}@{:#x}", x.wr_id, x.status, x.qp_num))
                .collect();
            c.r.check(
                bad.is_empty(),
                format!(
                    "{what}: RDY ({}) and ERR ({}) complete nothing but WR_FLUSH_ERR for the WQ{}",
                    rdy.err().map_or("ok".into(), |e| e.to_string()),
                    err.err().map_or("ok".into(), |e| e.to_string()),
                    if bad.is_empty() {
                        String::new()
                    } else {
                        format!(": {bad:?}")
                    }
                ),
            );
            c.r.eq(format!("{what}: flush completions"), got.len(), 0);
        }
        c.r.ok(
            format!("{what}: MODIFY_WQ to RESET"),
            v.wq_state(w.handle, wq_state::RESET),
        );
        if valid {
            // The WQ still works: one real receive after the k it
            // flushed, RDY, ERR.
            ring.set_producer(k);
            post_recv(&ring, 0x3e57);
            c.r.ok(
                format!("{what}: then RESET to RDY to ERR with one real receive"),
                v.wq_state(w.handle, wq_state::RDY)
                    .and_then(|()| v.wq_state(w.handle, wq_state::ERR)),
            );
            let got = gcq_ring.collect(1, WAIT);
            expect_cqes(
                c.r,
                format!("{what}: it flushes exactly that receive"),
                &got,
                &[(0x3e57, wc::WR_FLUSH_ERR)],
                w.wqn,
            );
        }
        c.r.ok(format!("{what}: DESTROY_WQ"), v.destroy_wq(w.handle));
        c.r.ok(format!("{what}: munmap of its ring"), ring.unmap());
    }
    c.r.ok("DESTROY_CQ of their CQ", fx.destroy_cq(gcq, gcq_ring));

    // Teardown in the right order.
    c.r.ok("DESTROY_QP of the RSS QP", v.destroy_qp(qp.handle));
    c.r.ok(
        "DESTROY_RWQ_IND_TBL once no QP uses it",
        v.destroy_ind_table(table.handle),
    );
    c.r.ok(
        "DESTROY_WQ of both WQs once no table lists them",
        v.destroy_wq(wa.handle)
            .and_then(|()| v.destroy_wq(wb.handle)),
    );
    c.r.check(
        cq_ring.settle().is_empty(),
        "the first CQ saw no completion",
    );
    c.r.ok("DESTROY_CQ", fx.destroy_cq(cq, cq_ring));
    c.r.ok("DEALLOC_PD", v.dealloc_pd(fx.pd));
    Ok(())
}
