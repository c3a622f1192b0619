//! RDMA FLUSH from roxe to another RoCE device in a second guest (rxe in
//! `tests/guest/flush-interop.sh`): roxe is the requester, the peer the
//! responder. libibverbs 44 has no `ibv_wr_flush`, so the WQEs go straight
//! into roxe's SQ ring, as in the `flush` scenario.
//!
//! The peer's half is `tests/guest/flush-peer.py`. The two meet through
//! files in `--peer-dir`, each written under a temporary name and renamed:
//!
//! 1. the peer writes `peer.info`: its GID, three MRs (`f` with
//!    `FLUSH_GLOBAL`, `p` without a flush right, `o` with `FLUSH_GLOBAL` and
//!    local write only) and, for every case, a QP in INIT whose access
//!    flags the case chose (`qp.NAME QPN PSN`);
//! 2. this side creates one QP per case, connects it to the peer's and
//!    writes `roxe.info`: its GID and `qp.NAME QPN PSN`;
//! 3. the peer connects its QPs and writes `peer.ready`;
//! 4. this side runs the cases and writes `roxe.done`: the bytes the
//!    first case wrote, so that the peer can check its memory, and the
//!    QP state each case should leave the peer's QP in.
//!
//! Every case runs on its own QP pair, since a failing flush moves both
//! QPs to ERR. After a failing flush an empty RDMA WRITE must come back
//! flushed. The statuses are those of the IBTA rules both rxe and roxe
//! follow: a key, right or range the MR refuses is a remote access error,
//! a placement type the QP does not allow is an invalid request (checked
//! before the key), and so is a length above 2^31 at rxe.

use super::flush::{empty_write, flush};
use super::*;
use crate::abi;
use crate::sys::{page_size, Mapping};
use roxe_proto::access;
use roxe_uapi::flush::{GLOBAL, MR as WHOLE_MR, PERSISTENT, RANGE};
use roxe_uapi::Sge;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::Path;
use std::time::Instant;

/// How long to wait for the peer's files.
const PEER_WAIT: Duration = Duration::from_secs(180);
/// The PSN every QP of this side starts sending from.
const SQ_PSN: u32 = 0x456;
/// The first case's RDMA WRITE: this many bytes at this offset of MR `f`.
const WRITE_LEN: u32 = 200;
const WRITE_OFF: u64 = 64;

const GOOD: u64 = 0xfe01;
const BAD: u64 = 0xfe02;
const AFTER: u64 = 0xfe03;

/// One of the peer's MRs.
#[derive(Clone, Copy)]
struct PeerMr {
    addr: u64,
    len: u64,
    rkey: u32,
}

/// What `peer.info` says.
struct Peer {
    gid: [u8; 16],
    f: PeerMr,
    p: PeerMr,
    o: PeerMr,
    qps: HashMap<String, (u32, u32)>,
}

/// A case: what goes into the SQ and how each WQE must complete; the
/// peer's QP ends in RTS when every WQE succeeds, in ERR otherwise.
struct Case {
    name: &'static str,
    about: &'static str,
    /// The WQEs after the first case's write, with the statuses they must
    /// complete with.
    wqes: fn(&Peer) -> Vec<(SendWqe, u32)>,
}

/// A failing flush and the empty write behind it, which is flushed.
fn failing(w: SendWqe, status: u32) -> Vec<(SendWqe, u32)> {
    vec![(w, status), (empty_write(AFTER), wc::WR_FLUSH_ERR)]
}

/// The case names and the access flags of the peer's QP are in
/// `flush-peer.py`; the names must match.
const CASES: &[Case] = &[
    Case {
        name: "write-flush",
        about: "an RDMA WRITE, then a global flush over its bytes",
        wqes: |p| vec![(flush(GOOD, p.f.rkey, p.f.addr + WRITE_OFF, WRITE_LEN.into(), GLOBAL, RANGE), wc::SUCCESS)],
    },
    Case {
        name: "whole-mr",
        about: "a whole-MR flush at an address outside the MR (which means nothing), then one over the MR's last 64 bytes",
        wqes: |p| {
            vec![
                (flush(GOOD, p.f.rkey, p.f.addr + p.f.len + 0x10_0000, 0, GLOBAL, WHOLE_MR), wc::SUCCESS),
                (flush(GOOD + 0x10, p.f.rkey, p.f.addr + p.f.len - 64, 64, GLOBAL, RANGE), wc::SUCCESS),
            ]
        },
    },
    Case {
        name: "flush-only",
        about: "a global flush to a QP and an MR that have the flush right and no remote access right",
        wqes: |p| vec![(flush(GOOD, p.o.rkey, p.o.addr, 64, GLOBAL, RANGE), wc::SUCCESS)],
    },
    Case {
        name: "mr-no-right",
        about: "a global flush over a range of an MR without FLUSH_GLOBAL",
        wqes: |p| failing(flush(BAD, p.p.rkey, p.p.addr + 64, 64, GLOBAL, RANGE), wc::REM_ACCESS_ERR),
    },
    Case {
        name: "mr-no-right-whole",
        about: "a global flush over the whole of an MR without FLUSH_GLOBAL",
        wqes: |p| failing(flush(BAD, p.p.rkey, p.p.addr, 0, GLOBAL, WHOLE_MR), wc::REM_ACCESS_ERR),
    },
    Case {
        name: "past-end",
        about: "a range that runs 32 bytes past the MR's end",
        wqes: |p| failing(flush(BAD, p.f.rkey, p.f.addr + p.f.len - 32, 64, GLOBAL, RANGE), wc::REM_ACCESS_ERR),
    },
    Case {
        name: "bad-rkey",
        about: "an rkey with the wrong key byte",
        wqes: |p| failing(flush(BAD, p.f.rkey ^ 0x80, p.f.addr, 64, GLOBAL, RANGE), wc::REM_ACCESS_ERR),
    },
    Case {
        name: "qp-no-right",
        about: "a global flush to a QP without FLUSH_GLOBAL in its access flags",
        wqes: |p| failing(flush(BAD, p.f.rkey, p.f.addr, 64, GLOBAL, RANGE), wc::REM_INV_REQ_ERR),
    },
    Case {
        name: "persistent-qp",
        about: "placement type persistent to a QP that allows only global",
        wqes: |p| failing(flush(BAD, p.f.rkey, p.f.addr, 64, PERSISTENT, RANGE), wc::REM_INV_REQ_ERR),
    },
    Case {
        name: "persistent-mr",
        about: "placement type persistent to a QP that allows it, over an MR that has only FLUSH_GLOBAL",
        wqes: |p| failing(flush(BAD, p.f.rkey, p.f.addr, 64, PERSISTENT, RANGE), wc::REM_ACCESS_ERR),
    },
    Case {
        name: "huge-len",
        about: "a range of 2^31 + 1 bytes (longer than any message may be)",
        wqes: |p| failing(flush(BAD, p.f.rkey, p.f.addr, (1 << 31) + 1, GLOBAL, RANGE), wc::REM_INV_REQ_ERR),
    },
    Case {
        name: "lead-past-end",
        about: "a good whole-MR flush, then a range past the MR's end",
        wqes: |p| {
            let mut v = vec![(flush(GOOD, p.f.rkey, p.f.addr, 0, GLOBAL, WHOLE_MR), wc::SUCCESS)];
            v.extend(failing(flush(BAD, p.f.rkey, p.f.addr + p.f.len - 32, 64, GLOBAL, RANGE), wc::REM_ACCESS_ERR));
            v
        },
    },
];

/// Waits for `name` in `dir` and returns its `key value...` lines.
fn wait_file(dir: &Path, name: &str) -> Result<HashMap<String, Vec<String>>, Fail> {
    let path = dir.join(name);
    let start = Instant::now();
    // TIMEOUT: bounded by PEER_WAIT.
    let text = loop {
        match std::fs::read_to_string(&path) {
            Ok(t) => break t,
            Err(_) if start.elapsed() < PEER_WAIT => std::thread::sleep(Duration::from_millis(100)),
            Err(e) => {
                return Err(Fail(format!(
                    "{} did not appear within {} s: {e}",
                    path.display(),
                    PEER_WAIT.as_secs()
                )))
            }
        }
    };
    Ok(text
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace().map(str::to_string);
            Some((w.next()?, w.collect()))
        })
        .collect())
}

/// Writes `text` to `dir/name` atomically (a temporary file, renamed).
fn put_file(dir: &Path, name: &str, text: &str) -> Result<(), Fail> {
    let tmp = dir.join(format!(".{name}.tmp"));
    std::fs::write(&tmp, text).map_err(|e| Fail(format!("writing {}: {e}", tmp.display())))?;
    std::fs::rename(&tmp, dir.join(name))
        .map_err(|e| Fail(format!("renaming {} into place: {e}", tmp.display())))
}

/// A number as the peer writes it (decimal, or hex with `0x`).
fn num(m: &HashMap<String, Vec<String>>, key: &str, i: usize) -> Result<u64, Fail> {
    let s = m
        .get(key)
        .and_then(|v| v.get(i))
        .ok_or_else(|| Fail(format!("peer.info has no value {i} for '{key}'")))?;
    let r = match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16),
        None => s.parse(),
    };
    r.map_err(|e| Fail(format!("peer.info: '{key}' value {i} '{s}': {e}")))
}

fn narrow(v: u64, what: &str) -> Result<u32, Fail> {
    u32::try_from(v).map_err(|_| Fail(format!("peer.info: {what} {v:#x} does not fit 32 bits")))
}

fn read_peer(dir: &Path) -> Result<Peer, Fail> {
    let m = wait_file(dir, "peer.info")?;
    let gid = m
        .get("gid")
        .and_then(|v| v.first())
        .and_then(|g| crate::parse_gid(g))
        .ok_or_else(|| Fail("peer.info: no readable 'gid'".into()))?;
    let mr = |k: &str| -> Result<PeerMr, Fail> {
        Ok(PeerMr {
            addr: num(&m, k, 0)?,
            len: num(&m, k, 1)?,
            rkey: narrow(num(&m, k, 2)?, k)?,
        })
    };
    let (f, p, o) = (mr("mr.f")?, mr("mr.p")?, mr("mr.o")?);
    let mut qps = HashMap::new();
    for c in CASES {
        let k = format!("qp.{}", c.name);
        qps.insert(
            c.name.to_string(),
            (narrow(num(&m, &k, 0)?, &k)?, narrow(num(&m, &k, 1)?, &k)?),
        );
    }
    Ok(Peer { gid, f, p, o, qps })
}

/// Connects `q` to the peer's QP `qpn`, which expects PSN `SQ_PSN` and
/// sends from `psn`.
fn connect(fx: &Fx, q: &QpRings, peer: &Peer, qpn: u32, psn: u32) -> Result<(), Errno> {
    fx.modify(q, state::INIT)?;
    let rtr = Modify {
        dest: Dest {
            dgid: peer.gid,
            ..fx.attrs(&q.qp, q.ty, state::RTR).dest
        },
        dest_qp_num: qpn,
        rq_psn: psn,
        ..fx.attrs(&q.qp, q.ty, state::RTR)
    };
    fx.v.modify_qp(q.qp.handle, &rtr)?;
    fx.v.modify_qp(
        q.qp.handle,
        &Modify {
            sq_psn: SQ_PSN,
            ..fx.attrs(&q.qp, q.ty, state::RTS)
        },
    )
}

pub fn run(c: &mut Ctx<'_>) -> Result<(), Fail> {
    let dir = c
        .opts
        .peer_dir
        .clone()
        .ok_or_else(|| Fail("flush-peer needs --peer-dir".into()))?;
    let peer = read_peer(&dir)?;
    c.r.info(format!(
        "the peer's MR f: {:#x}+{:#x} rkey {:#x}; {} QPs",
        peer.f.addr,
        peer.f.len,
        peer.f.rkey,
        peer.qps.len()
    ));

    let fx = Fx::new(c.opts)?;
    let v = &fx.v;
    let (cq, cq_ring) = fx.cq(256)?;

    // The first case's RDMA WRITE takes its bytes from this MR.
    let buf = Mapping::anon(page_size()).step("a buffer to register")?;
    let src = v
        .reg_mr(
            fx.pd,
            buf.addr(),
            buf.len() as u64,
            buf.addr(),
            access::LOCAL_WRITE,
            &[],
        )
        .step("REG_MR of the source")?;
    let bytes = c.rng.bytes(WRITE_LEN as usize);
    buf.write(0, &bytes);

    let mut qps = Vec::new();
    let gid = c
        .opts
        .gid
        .chunks(2)
        .map(|g| format!("{:02x}{:02x}", g[0], g[1]))
        .collect::<Vec<_>>()
        .join(":");
    let mut info = format!("gid {gid}\n");
    for case in CASES {
        let q = fx.qp(QpSpec::new(QpType::Rc, &cq, &cq))?;
        let (pqpn, ppsn) = peer.qps[case.name];
        connect(&fx, &q, &peer, pqpn, ppsn).step(format!(
            "{}: connecting to the peer's QP {pqpn:#x}",
            case.name
        ))?;
        let _ = writeln!(info, "qp.{} {} {}", case.name, q.qp.qpn, SQ_PSN);
        qps.push(q);
    }
    put_file(&dir, "roxe.info", &info)?;
    wait_file(&dir, "peer.ready")?;
    let tx_rxe = || hw_counter(&c.opts.ibdev, "tx_flush_icrc_rxe");
    let before = tx_rxe();

    let mut done = format!(
        "bytes {WRITE_OFF} {}\n",
        bytes.iter().map(|b| format!("{b:02x}")).collect::<String>()
    );
    for (case, q) in CASES.iter().zip(&qps) {
        let n = case.name;
        let mut want = Vec::new();
        if n == "write-flush" {
            let w = SendWqe {
                opcode: wr::RDMA_WRITE,
                num_sge: 1,
                rkey: peer.f.rkey,
                remote_addr: peer.f.addr + WRITE_OFF,
                ..send(0xfe00)
            };
            let sge = Sge {
                addr: buf.addr(),
                length: WRITE_LEN,
                lkey: src.lkey,
            };
            post_raw(&q.sq, &[abi::send_wqe(&w), abi::sge(&sge)].concat());
            want.push((0xfe00, wc::SUCCESS));
        }
        for (w, status) in (case.wqes)(&peer) {
            post_send(&q.sq, &w);
            want.push((w.wr_id, status));
        }
        let ok = want.iter().all(|&(_, s)| s == wc::SUCCESS);
        c.r.ok(format!("{n}: the doorbell"), v.doorbell(q.qp.handle));
        let got = cq_ring.collect(want.len(), WAIT);
        let statuses = want
            .iter()
            .map(|&(_, s)| s.to_string())
            .collect::<Vec<_>>()
            .join(",");
        expect_cqes(
            c.r,
            format!("{n} ({}): statuses {statuses}", case.about),
            &got,
            &want,
            q.qp.qpn,
        );
        if ok {
            let ops: Vec<u32> = got.iter().map(|x| x.opcode).collect();
            let mut want_ops = vec![wc::OP_FLUSH; want.len()];
            if n == "write-flush" {
                want_ops[0] = wc::OP_RDMA_WRITE;
            }
            c.r.eq(format!("{n}: the completion opcodes"), ops, want_ops);
        }
        expect_state(
            &fx,
            c.r,
            format!("{n}: roxe's QP"),
            q,
            if ok { state::RTS } else { state::ERR },
        );
        let _ = writeln!(done, "state.{n} {}", if ok { "RTS" } else { "ERR" });
    }
    put_file(&dir, "roxe.done", &done)?;
    // rxe drops a FLUSH with the standard ICRC; roxe switches to rxe's
    // after a timeout (Documentation/datapath.md, Flush). flush-interop.sh
    // checks the counter.
    let after = tx_rxe();
    c.r.info(format!(
        "FLUSH packets sent with rxe's ICRC: {before:?} -> {after:?}"
    ));

    for q in qps {
        c.r.ok("DESTROY_QP", fx.destroy_qp(q));
    }
    c.r.ok("DEREG_MR of the source", v.dereg_mr(src.handle));
    c.r.ok("munmap of the buffer", buf.unmap());
    c.r.ok("DESTROY_CQ", fx.destroy_cq(cq, cq_ring));
    c.r.ok("DEALLOC_PD", v.dealloc_pd(fx.pd));
    Ok(())
}
