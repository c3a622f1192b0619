//! The attacks, one module each, and what they share: a fixture that opens
//! a ucontext with a PD, creates and maps CQs and QPs, walks QPs through
//! their states, and checks completions and asynchronous events.

pub mod ah_scope;
pub mod bad_args;
pub mod bad_wqe;
pub mod big_flush;
pub mod cq_garbage;
pub mod cq_srq_fault;
pub mod flush;
pub mod flush_peer;
pub mod memcg;
pub mod mmap;
pub mod mr_rereg;
pub mod mw_bound;
pub mod notify;
pub mod qp_fault;
pub mod random_wqe;
pub mod read_hog;
pub mod rq_garbage;
pub mod rss;
pub mod sq_producer;
pub mod srq_resize;
pub mod teardown;

use crate::errno::Errno;
use crate::report::Report;
use crate::ring::{CqRing, Ring};
use crate::rng::Rng;
use crate::uverbs::{event, mask, state, Cq, Dest, DeviceCaps, Modify, Qp, QpArgs, QpType, Verbs};
use roxe_uapi::{Cqe, RecvWqe, SendWqe};
use std::cell::Cell;
use std::fmt::Display;
use std::path::PathBuf;
use std::time::Duration;

/// `enum ibv_wc_status` values.
pub mod wc {
    pub const SUCCESS: u32 = 0;
    pub const LOC_LEN_ERR: u32 = 1;
    pub const LOC_QP_OP_ERR: u32 = 2;
    pub const WR_FLUSH_ERR: u32 = 5;
    pub const REM_ACCESS_ERR: u32 = 10;
    pub const REM_INV_REQ_ERR: u32 = 9;
    /// `IBV_WC_RDMA_WRITE`.
    pub const OP_RDMA_WRITE: u32 = 1;
    /// `IBV_WC_FLUSH`.
    pub const OP_FLUSH: u32 = 8;
    /// `IBV_WC_RECV`.
    pub const OP_RECV: u32 = 128;
}

/// `enum ibv_wr_opcode` values and `IBV_SEND_*` flags.
pub mod wr {
    pub use roxe_uapi::send_flags::{INLINE, SIGNALED};

    pub const RDMA_WRITE: u32 = 0;
    pub const SEND: u32 = 2;
    pub const RDMA_READ: u32 = 4;
    pub const ATOMIC_CMP_AND_SWP: u32 = 5;
    pub const TSO: u32 = 10;
    /// `IBV_WR_FLUSH` (libibverbs 44 has no `ibv_wr_flush` to post it).
    pub const FLUSH: u32 = 14;
}

/// How long to wait for completions and events that should come.
pub const WAIT: Duration = Duration::from_secs(2);
/// How long to wait for an asynchronous event that should come (ms).
const EVENT_WAIT_MS: i32 = 2000;
/// How long to listen for events that should not come (ms).
const QUIET_MS: i32 = 100;

/// What the command line chose.
pub struct Opts {
    pub dev: PathBuf,
    pub ibdev: String,
    pub seed: u64,
    pub iterations: u32,
    /// The source GID (and, looped back, the destination GID) for RC/UC paths.
    pub gid: [u8; 16],
    pub sgid_index: u8,
    /// Where scenarios with a peer in another guest exchange files.
    pub peer_dir: Option<PathBuf>,
}

/// What a scenario works with.
pub struct Ctx<'a> {
    pub opts: &'a Opts,
    pub r: &'a mut Report,
    pub rng: Rng,
}

/// A step a scenario needed failed; the scenario stops.
#[derive(Debug)]
pub struct Fail(pub String);

impl Display for Fail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Names the step a setup error came from.
pub trait Step<T> {
    fn step(self, what: impl Display) -> Result<T, Fail>;
}

impl<T> Step<T> for Result<T, Errno> {
    fn step(self, what: impl Display) -> Result<T, Fail> {
        self.map_err(|e| Fail(format!("{what}: {e}")))
    }
}

/// What a QP is created with.
#[derive(Clone, Copy, Debug)]
pub struct QpSpec {
    pub ty: QpType,
    pub send_cq: u32,
    pub recv_cq: u32,
    pub send_wr: u32,
    pub recv_wr: u32,
    pub send_sge: u32,
    pub inline: u32,
}

impl QpSpec {
    /// A QP of type `ty` with small queues.
    pub fn new(ty: QpType, send_cq: &Cq, recv_cq: &Cq) -> QpSpec {
        QpSpec {
            ty,
            send_cq: send_cq.handle,
            recv_cq: recv_cq.handle,
            send_wr: 16,
            recv_wr: 16,
            send_sge: 2,
            inline: 64,
        }
    }
}

/// A QP with its rings mapped.
pub struct QpRings {
    pub qp: Qp,
    pub ty: QpType,
    pub sq: Ring,
    pub rq: Ring,
}

/// One ucontext with a PD.
pub struct Fx {
    pub v: Verbs,
    pub pd: u32,
    pub caps: DeviceCaps,
    gid: [u8; 16],
    sgid_index: u8,
    next: Cell<u64>,
}

impl Fx {
    /// Opens the device, creates a ucontext and a PD.
    pub fn new(o: &Opts) -> Result<Fx, Fail> {
        let v = Verbs::open_with_context(&o.dev)
            .step(format!("open {} and GET_CONTEXT", o.dev.display()))?;
        let caps = v.query_device().step("QUERY_DEVICE")?;
        let pd = v.alloc_pd(&[]).step("ALLOC_PD")?;
        Ok(Fx {
            v,
            pd,
            caps,
            gid: o.gid,
            sgid_index: o.sgid_index,
            next: Cell::new(1),
        })
    }

    /// A fresh `user_handle` with a recognisable tag in the top byte.
    pub fn handle(&self, tag: u8) -> u64 {
        let n = self.next.get();
        self.next.set(n + 1);
        u64::from(tag) << 56 | n
    }

    /// Creates a CQ of `cqe` entries and maps its ring.
    pub fn cq(&self, cqe: u32) -> Result<(Cq, CqRing), Fail> {
        let cq = self
            .v
            .create_cq(cqe, 0, self.handle(0xcc), &[])
            .step(format!("CREATE_CQ cqe={cqe}"))?;
        let ring = Ring::map(
            &self.v,
            cq.ring.mmap_offset,
            cq.ring.mmap_size,
            cq.ring.num_slots,
            cq.ring.slot_size,
        )
        .step("mmap of the CQ ring")?;
        Ok((cq, CqRing(ring)))
    }

    /// Creates a QP and maps both its rings.
    pub fn qp(&self, s: QpSpec) -> Result<QpRings, Fail> {
        let qp = self
            .v
            .create_qp(&QpArgs {
                qp_type: s.ty,
                pd: self.pd,
                send_cq: s.send_cq,
                recv_cq: s.recv_cq,
                max_send_wr: s.send_wr,
                max_recv_wr: s.recv_wr,
                max_send_sge: s.send_sge,
                max_recv_sge: 1,
                max_inline_data: s.inline,
                user_handle: self.handle(0x99),
                srq: None,
                driver_in: Vec::new(),
            })
            .step(format!("CREATE_QP {:?}", s.ty))?;
        let (sq, rq) = (qp.rings.sq, qp.rings.rq);
        let sq = Ring::map(
            &self.v,
            sq.mmap_offset,
            sq.mmap_size,
            sq.num_slots,
            sq.slot_size,
        )
        .step("mmap of the SQ")?;
        let rq = Ring::map(
            &self.v,
            rq.mmap_offset,
            rq.mmap_size,
            rq.num_slots,
            rq.slot_size,
        )
        .step("mmap of the RQ")?;
        Ok(QpRings {
            qp,
            ty: s.ty,
            sq,
            rq,
        })
    }

    /// The attributes of the transition into `to` that the IBTA requires
    /// for a QP of type `ty` (`qp_state_table` in `verbs.c`).
    pub fn attrs(&self, qp: &Qp, ty: QpType, to: u8) -> Modify {
        let mut m = Modify {
            qp_state: to,
            attr_mask: mask::STATE,
            ..Modify::default()
        };
        match to {
            state::INIT => {
                m.attr_mask |= mask::PKEY_INDEX | mask::PORT;
                m.port_num = 1;
                if ty == QpType::Ud {
                    m.attr_mask |= mask::QKEY;
                    m.qkey = 0x1111_1111;
                } else {
                    m.attr_mask |= mask::ACCESS_FLAGS;
                    // LOCAL_WRITE | REMOTE_WRITE | REMOTE_READ | FLUSH_GLOBAL
                    m.access_flags = 7 | 1 << 8;
                }
            }
            state::RTR if ty != QpType::Ud => {
                m.attr_mask |= mask::AV | mask::PATH_MTU | mask::DEST_QPN | mask::RQ_PSN;
                m.dest = Dest {
                    dgid: self.gid,
                    sgid_index: self.sgid_index,
                    hop_limit: 64,
                    is_global: 1,
                    port_num: 1,
                    ..Dest::default()
                };
                m.path_mtu = 3; // IB_MTU_1024
                m.dest_qp_num = qp.qpn;
                m.rq_psn = 0x123;
                if ty == QpType::Rc {
                    m.attr_mask |= mask::MAX_DEST_RD_ATOMIC | mask::MIN_RNR_TIMER;
                    m.max_dest_rd_atomic = 1;
                    m.min_rnr_timer = 12;
                }
            }
            state::RTS => {
                m.attr_mask |= mask::SQ_PSN;
                m.sq_psn = 0x456;
                if ty == QpType::Rc {
                    m.attr_mask |=
                        mask::TIMEOUT | mask::RETRY_CNT | mask::RNR_RETRY | mask::MAX_QP_RD_ATOMIC;
                    m.timeout = 14;
                    m.retry_cnt = 7;
                    m.rnr_retry = 7;
                    m.max_rd_atomic = 1;
                }
            }
            _ => {}
        }
        m
    }

    /// `MODIFY_QP` into `to` with the required attributes.
    pub fn modify(&self, q: &QpRings, to: u8) -> Result<(), Errno> {
        self.v.modify_qp(q.qp.handle, &self.attrs(&q.qp, q.ty, to))
    }

    /// Walks a QP from RESET up to `target` (INIT, RTR or RTS).
    pub fn bring_up(&self, q: &QpRings, target: u8) -> Result<(), Fail> {
        for s in [state::INIT, state::RTR, state::RTS] {
            self.modify(q, s)
                .step(format!("MODIFY_QP to {}", state::name(s)))?;
            if s == target {
                break;
            }
        }
        Ok(())
    }

    /// Creates a QP and walks it up to `target`.
    pub fn qp_in(&self, s: QpSpec, target: u8) -> Result<QpRings, Fail> {
        let q = self.qp(s)?;
        self.bring_up(&q, target)?;
        Ok(q)
    }

    /// Creates an RC or UC QP connected to itself and walks it up to RTS.
    /// Its responder expects the PSN its requester starts from.
    pub fn loopback(&self, s: QpSpec) -> Result<QpRings, Fail> {
        let q = self.qp(s)?;
        let rts = self.attrs(&q.qp, q.ty, state::RTS);
        let rtr = Modify {
            rq_psn: rts.sq_psn,
            ..self.attrs(&q.qp, q.ty, state::RTR)
        };
        for (to, m) in [
            (state::INIT, self.attrs(&q.qp, q.ty, state::INIT)),
            (state::RTR, rtr),
            (state::RTS, rts),
        ] {
            self.v.modify_qp(q.qp.handle, &m).step(format!(
                "MODIFY_QP of a loopback {:?} QP to {}",
                q.ty,
                state::name(to)
            ))?;
        }
        Ok(q)
    }

    /// Creates two RC or UC QPs connected to each other, both in RTS: a
    /// requester and a responder. A responder that refuses a request moves
    /// to ERR, as rxe's does (a QP connected to itself would flush its own
    /// request before the NAK reached it), so tests of what a requester
    /// sees for a refused request use two.
    pub fn pair(&self, s: QpSpec) -> Result<(QpRings, QpRings), Fail> {
        let (a, b) = (self.qp(s)?, self.qp(s)?);
        for (q, peer) in [(&a, &b), (&b, &a)] {
            self.modify(q, state::INIT)
                .step("MODIFY_QP of a pair's QP to INIT")?;
            let rts = self.attrs(&q.qp, q.ty, state::RTS);
            let rtr = Modify {
                dest_qp_num: peer.qp.qpn,
                rq_psn: rts.sq_psn,
                ..self.attrs(&q.qp, q.ty, state::RTR)
            };
            self.v
                .modify_qp(q.qp.handle, &rtr)
                .step("MODIFY_QP of a pair's QP to RTR")?;
            self.v
                .modify_qp(q.qp.handle, &rts)
                .step("MODIFY_QP of a pair's QP to RTS")?;
        }
        Ok((a, b))
    }

    /// Destroys a QP; the caller checks the result.
    pub fn destroy_qp(&self, q: QpRings) -> Result<(), Errno> {
        let h = q.qp.handle;
        drop(q);
        self.v.destroy_qp(h)
    }

    /// Destroys a CQ after unmapping its ring.
    pub fn destroy_cq(&self, cq: Cq, ring: CqRing) -> Result<(), Errno> {
        drop(ring);
        self.v.destroy_cq(cq.handle)
    }

    /// Asynchronous error events (`IB_EVENT_CQ_ERR` .. `QP_ACCESS_ERR`):
    /// waits up to `first_ms` for the first, then collects what follows
    /// within `QUIET_MS`. Port and GID events are skipped.
    pub fn error_events(&self, first_ms: i32) -> Result<Vec<(u64, u32)>, Fail> {
        let start = std::time::Instant::now();
        let mut v = Vec::new();
        // Bounded by the deadline and by the kernel's finite event queue.
        for _ in 0..1024 {
            let left = if v.is_empty() {
                let spent = i32::try_from(start.elapsed().as_millis()).unwrap_or(i32::MAX);
                first_ms.saturating_sub(spent).max(0)
            } else {
                QUIET_MS
            };
            match self.v.next_event(left).step("reading the async event fd")? {
                Some(e) if e.event_type <= 3 => v.push((e.element, e.event_type)),
                Some(_) => {}
                None => break,
            }
        }
        Ok(v)
    }
}

/// A signaled SEND work request with no data.
pub fn send(wr_id: u64) -> SendWqe {
    SendWqe {
        wr_id,
        opcode: wr::SEND,
        send_flags: wr::SIGNALED,
        ..SendWqe::default()
    }
}

/// Writes `wqe` into the SQ at its producer index and publishes it.
pub fn post_send(sq: &Ring, wqe: &SendWqe) {
    post_raw(sq, &crate::abi::send_wqe(wqe));
}

/// Writes raw bytes into the next slot and publishes it.
pub fn post_raw(ring: &Ring, bytes: &[u8]) {
    let p = ring.producer();
    ring.write_slot(p, bytes);
    ring.set_producer(p.wrapping_add(1));
}

/// Writes a receive WQE (no SGEs) into the RQ and publishes it.
pub fn post_recv(rq: &Ring, wr_id: u64) {
    post_raw(
        rq,
        &crate::abi::recv_wqe(&RecvWqe {
            wr_id,
            ..RecvWqe::default()
        }),
    );
}

/// Checks a list of completions against `(wr_id, status)` pairs, in order,
/// all for QP `qpn`.
pub fn expect_cqes(
    r: &mut Report,
    what: impl Display,
    got: &[Cqe],
    want: &[(u64, u32)],
    qpn: u32,
) -> bool {
    let seen: Vec<(u64, u32)> = got.iter().map(|c| (c.wr_id, c.status)).collect();
    let qpns_ok = got.iter().all(|c| c.qp_num == qpn);
    if seen == want && qpns_ok {
        return r.check(true, what);
    }
    let fmt = |v: &[(u64, u32)]| {
        v.iter()
            .map(|(w, s)| format!("{w:#x}:{s}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    r.check(
        false,
        format!(
            "{what}: got [{}]{}, expected [{}] (wr_id:status)",
            fmt(&seen),
            if qpns_ok {
                String::new()
            } else {
                format!(
                    ", qp_num {:?} not all {qpn:#x}",
                    got.iter().map(|c| c.qp_num).collect::<Vec<_>>()
                )
            },
            fmt(want)
        ),
    )
}

/// Checks that `element` got exactly the error event `ty` and no other
/// error event arrived.
pub fn expect_event(
    fx: &Fx,
    r: &mut Report,
    what: impl Display,
    element: u64,
    ty: u32,
) -> Result<(), Fail> {
    let evs = fx.error_events(EVENT_WAIT_MS)?;
    let want = vec![(element, ty)];
    if evs == want {
        r.check(true, format!("{what} ({})", event::name(ty)));
    } else {
        r.check(
            false,
            format!(
                "{what}: events {:?}, expected one {} for {element:#x}",
                evs.iter()
                    .map(|(e, t)| format!("{}@{e:#x}", event::name(*t)))
                    .collect::<Vec<_>>(),
                event::name(ty)
            ),
        );
    }
    Ok(())
}

/// Checks that no error event arrives.
pub fn expect_no_event(fx: &Fx, r: &mut Report, what: impl Display) -> Result<(), Fail> {
    let evs = fx.error_events(QUIET_MS)?;
    r.check(
        evs.is_empty(),
        format!(
            "{what}{}",
            if evs.is_empty() {
                String::new()
            } else {
                format!(": got {evs:x?}")
            }
        ),
    );
    Ok(())
}

/// Stops the scenario, with one clear line, unless the doorbell reaches
/// roxe: a QP in RESET must refuse it with EINVAL (the driver's answer),
/// not with EOPNOTSUPP (the RDMA core's, for a command the device did not
/// enable in its `uverbs_cmd_mask`).
pub fn require_doorbell(fx: &Fx, r: &mut Report, cq: &Cq) -> Result<(), Fail> {
    let q = fx.qp(QpSpec::new(QpType::Rc, cq, cq))?;
    let res = fx.v.doorbell(q.qp.handle);
    fx.destroy_qp(q).step("DESTROY_QP")?;
    match res {
        Err(e) if e == crate::errno::EINVAL => {
            r.check(
                true,
                "the doorbell reaches roxe (a QP in RESET refuses it with EINVAL)",
            );
            Ok(())
        }
        Err(e) if e == crate::errno::EOPNOTSUPP => Err(Fail(
            "the doorbell (POST_SEND, wr_count 0) fails with EOPNOTSUPP in the RDMA core: \
             the device does not set IB_USER_VERBS_CMD_POST_SEND in uverbs_cmd_mask"
                .into(),
        )),
        other => Err(Fail(format!(
            "the doorbell on a QP in RESET returned {other:?}, expected EINVAL"
        ))),
    }
}

/// Port 1's counter `name` (`hw_counters`), if the device has it.
pub fn hw_counter(ibdev: &str, name: &str) -> Option<u64> {
    // The RDMA core caches a port's counters for 10 ms
    // (RDMA_HW_STATS_DEFAULT_LIFESPAN): a read sooner after the last one
    // returns the old values. Wait that out so every read is fresh.
    std::thread::sleep(std::time::Duration::from_millis(20));
    let p = std::path::Path::new("/sys/class/infiniband")
        .join(ibdev)
        .join("ports/1/hw_counters")
        .join(name);
    std::fs::read_to_string(p).ok()?.trim().parse().ok()
}

/// Checks the QP's state with `QUERY_QP`.
pub fn expect_state(fx: &Fx, r: &mut Report, what: impl Display, q: &QpRings, want: u8) {
    match fx.v.query_qp_state(q.qp.handle) {
        Ok(s) => {
            r.check(
                s == want,
                format!("{what}: QUERY_QP says {}", state::name(s)),
            );
        }
        Err(e) => r.fail(format!("{what}: QUERY_QP failed with {e}")),
    }
}
