// SPDX-License-Identifier: GPL-2.0

//! Receive work queues, their indirection tables, and RSS QPs.
//!
//! A WQ (`ibv_create_wq`) is a receive ring of its own, mapped into user
//! space like an SRQ's, with a PD and a CQ. It takes frames only while RDY.
//! An indirection table (`ibv_create_rwq_ind_table`) lists `2^n` WQs. An
//! RSS QP is a raw packet QP created over a table with a hash
//! configuration (`uapi::CreateRssQpCmd`): it has no queues of its own,
//! and each frame a flow steers to it goes to the WQ of the table entry
//! its Toeplitz hash picks (`rust/proto` `rss`), completing to that WQ's
//! CQ with the WQ's number as `qp_num`.
//!
//! An RSS QP has no state of its own (the core's table refuses to move
//! it: `qp::modify`), as a NIC's receive-side scaling object has none;
//! whether a frame lands is the chosen WQ's state.
//!
//! Locks: a WQ's ring lock (bottom halves off), then a CQ's lock: a WQ's
//! completions are pushed under its lock, so they keep its order.

use crate::counters::Event;
use crate::cq;
use crate::device::{Roxe, RoxeDev};
use crate::limits::{MAX_QP_WR, PORT};
use crate::proto::qp as qpx;
use crate::proto::responder::ScatterError;
use crate::proto::ring::Geometry;
use crate::proto::rss::{Rss, RssError};
use crate::proto::wr::{WcOp, WcStatus, MAX_SGE};
use crate::rdma::cq::Cq;
use crate::rdma::device::Device;
use crate::rdma::pd::Pd;
use crate::rdma::udata::UData;
use crate::rdma::wq::{IndTableOps, Wq, WqOps, WqRef, WqSize, WqState};
use crate::ring::Ring;
use crate::sync::{new_spinlock_bh, SpinLockBh};
use crate::uapi::{Cqe, CreateRssQpCmd, CreateWqResp, RecvWqe, RingInfo};
use crate::wqe::{take_recv, RecvCopy};
use kernel::alloc::flags::GFP_KERNEL;
use kernel::alloc::KVec;
use kernel::error::code::EINVAL;
use kernel::prelude::*;
use kernel::sync::Arc;
use kernel::types::ARef;

/// Per-WQ state.
#[pin_data]
pub(crate) struct RoxeWq {
    /// Index in the device's WQ table; the WQ number is [`WQN_BASE`] on.
    num: u32,
    #[pin]
    st: SpinLockBh<WqRing>,
}

struct WqRing {
    ring: Ring<RecvWqe>,
    /// The kernel's own consumer index.
    consumer: u32,
    state: WqState,
    /// A WQE taken for a frame whose buffer, paged on demand, was not
    /// mapped: the next frame uses it first.
    held: Option<RecvCopy>,
}

/// WQ numbers start past every QP number, so a completion's `qp_num`
/// on a CQ that QPs and WQs share names one of them only.
const WQN_BASE: u32 = 1 << 20;
const _: () = assert!(crate::limits::MAX_QP + 16 <= WQN_BASE);
const _: () = assert!(WQN_BASE + crate::limits::MAX_WQ < 1 << 24);

/// A WQ number and the budget unit taken with it, given back on drop
/// unless the WQ keeps them.
struct WqNumber<'a> {
    dev: &'a RoxeDev,
    num: u32,
}

impl<'a> WqNumber<'a> {
    fn take(dev: &'a RoxeDev) -> Result<Self> {
        let unit = dev.wqs.take_unit()?;
        let num = dev.wq_table.insert(())?;
        unit.keep();
        Ok(WqNumber { dev, num })
    }

    fn keep(self) {
        core::mem::forget(self);
    }
}

impl Drop for WqNumber<'_> {
    fn drop(&mut self) {
        release_number(self.dev, self.num);
    }
}

fn release_number(dev: &RoxeDev, num: u32) {
    dev.wq_table.remove(num);
    dev.wqs.give_back();
}

#[vtable]
impl WqOps<Roxe> for RoxeWq {
    fn create(
        pd: &Pd<Roxe>,
        _cq: &Cq<Roxe>,
        size: WqSize,
        udata: Option<&UData<'_>>,
    ) -> Result<(impl PinInit<Self, Error>, WqSize, u32)> {
        // Only user space makes WQs: the RSS QPs that read them are raw
        // packet QPs, which only user space has.
        let u = udata.ok_or_else(crate::rdma::errno::eopnotsupp)?;
        if size.max_wr == 0 || size.max_wr > MAX_QP_WR || size.max_sge > MAX_SGE {
            return Err(EINVAL);
        }
        u.expect_no_input()?;
        let slot = qpx::recv_slot_size(size.max_sge.max(1)).ok_or(EINVAL)?;
        let g = Geometry::for_entries(size.max_wr, MAX_QP_WR).ok_or(EINVAL)?;
        let ring: Ring<RecvWqe> = Ring::new_user(u, g, slot as usize)?;
        let granted = WqSize {
            max_wr: g.num_slots(),
            max_sge: qpx::recv_sge_capacity(slot).min(MAX_SGE),
        };
        let number = WqNumber::take(pd.device().data())?;
        let num = number.num;
        let (mmap_offset, mmap_size) = ring.mmap_info().ok_or(EINVAL)?;
        let resp: CreateWqResp = RingInfo {
            mmap_offset,
            mmap_size,
            num_slots: g.num_slots(),
            slot_size: slot,
        };
        u.respond(&resp)?;
        let st = WqRing {
            ring,
            consumer: 0,
            state: WqState::Reset,
            held: None,
        };
        let init = try_pin_init!(RoxeWq {
            num,
            st <- new_spinlock_bh!(st, "roxe_wq"),
        })
        .pin_chain(move |_| {
            number.keep();
            Ok(())
        });
        Ok((init, granted, WQN_BASE + num))
    }

    fn modify(wq: &Wq<Roxe>, cur: Option<WqState>, to: WqState) -> Result {
        let mut g = wq.data().st.lock();
        let st = &mut *g;
        if cur.is_some_and(|c| c != st.state) || !st.state.may_move(to) {
            return Err(EINVAL);
        }
        match to {
            // Every outstanding WQE completes flushed, on each move to ERR
            // (so receives posted while in ERR are flushed by the next),
            // until the CQ takes no more.
            WqState::Err => {
                if let Some(c) = wq.cq() {
                    while let Some(r) = st
                        .held
                        .take()
                        .or_else(|| take_recv(&st.ring, &mut st.consumer))
                    {
                        let cqe = wq_cqe(wq, r.wr_id(), WcStatus::WrFlushErr, 0);
                        if cq::push(c, cqe, false).is_err() {
                            break;
                        }
                    }
                }
            }
            WqState::Reset => {
                // The outstanding WQEs are dropped, with no completions,
                // whatever producer index user space wrote.
                st.held = None;
                let prod = st.ring.producer();
                st.consumer = prod;
                st.ring.set_consumer(prod);
            }
            WqState::Rdy => {}
        }
        st.state = to;
        Ok(())
    }

    fn destroy(wq: &Wq<Roxe>) {
        release_number(wq.device().data(), wq.data().num);
    }
}

fn wq_cqe(wq: &Wq<Roxe>, wr_id: u64, status: WcStatus, byte_len: u32) -> Cqe {
    Cqe {
        wr_id,
        status: status as u32,
        opcode: WcOp::Recv as u32,
        byte_len,
        qp_num: wq.wq_num(),
        port_num: PORT as u8,
        ..Cqe::default()
    }
}

/// Puts `frame` in the next receive of `wq`, if it is RDY and has one.
/// Returns whether the frame landed whole. A receive too small completes
/// with `LOC_LEN_ERR`; one paged on demand and not mapped is kept for the
/// next frame. A producer index user space cannot have written honestly
/// moves the WQ to ERR and reports `IB_EVENT_WQ_FATAL`.
fn land(wq: &Wq<Roxe>, frame: &[u8]) -> bool {
    let mut g = wq.data().st.lock();
    let st = &mut *g;
    if st.state != WqState::Rdy {
        return false;
    }
    let r = match st.held.take() {
        Some(r) => r,
        None => {
            if st
                .ring
                .geometry()
                .used(st.ring.producer(), st.consumer)
                .is_err()
            {
                st.state = WqState::Err;
                drop(g);
                wq.report_fatal();
                return false;
            }
            match take_recv(&st.ring, &mut st.consumer) {
                Some(r) => r,
                None => return false,
            }
        }
    };
    // CAST: a frame is at most the netdev's MTU and header.
    let len = frame.len() as u32;
    let status = if r.total() < u64::from(len) {
        WcStatus::LocLenErr
    } else {
        match r.scatter(wq.device(), wq.pd_id(), 0, frame) {
            Ok(()) => WcStatus::Success,
            Err(ScatterError::NotPresent) => {
                st.held = Some(r);
                return false;
            }
            Err(ScatterError::Failed(s)) => s,
        }
    };
    // Pushed under the WQ's lock: completions keep the WQ's order.
    if let Some(c) = wq.cq() {
        let _ = cq::push(c, wq_cqe(wq, r.wr_id(), status, len), false);
    }
    status == WcStatus::Success
}

/// An indirection table's entries.
pub(crate) struct Indirection {
    wqs: KVec<WqRef<Roxe>>,
    log_size: u32,
}

/// An indirection table's budget unit, owned: given back when the table
/// is dropped, or when its initialisation fails part-way.
struct IndTableUnit(ARef<Device<Roxe>>);

impl IndTableUnit {
    fn take(dev: &Device<Roxe>) -> Result<Self> {
        dev.data().ind_tables.take_unit()?.keep();
        Ok(IndTableUnit(ARef::from(dev)))
    }
}

impl Drop for IndTableUnit {
    fn drop(&mut self) {
        self.0.data().ind_tables.give_back();
    }
}

/// Per-table state: the entries, shared with the RSS QPs made over it.
#[pin_data]
pub(crate) struct RoxeIndTable {
    entries: Arc<Indirection>,
    _unit: IndTableUnit,
}

#[vtable]
impl IndTableOps<Roxe> for RoxeIndTable {
    fn create(
        dev: &Device<Roxe>,
        wqs: KVec<WqRef<Roxe>>,
        log_size: u32,
    ) -> Result<(impl PinInit<Self, Error>, u32)> {
        if log_size > crate::limits::MAX_IND_TABLE_LOG {
            return Err(EINVAL);
        }
        let unit = IndTableUnit::take(dev)?;
        let entries = Arc::new(Indirection { wqs, log_size }, GFP_KERNEL)?;
        let num = dev
            .data()
            .ind_table_nums
            .fetch_add(1, core::sync::atomic::Ordering::Relaxed)
            & 0x00ff_ffff;
        Ok((
            try_pin_init!(RoxeIndTable {
                entries,
                _unit: unit
            }),
            num,
        ))
    }
}

/// An RSS QP's receive side: its hash and its table's entries.
pub(crate) struct RssRx {
    hash: Rss,
    table: Arc<Indirection>,
}

impl RssRx {
    /// The receive side of an RSS QP over `table`, configured by `cmd`
    /// (`EOPNOTSUPP` for a hash function or field roxe lacks, `EINVAL`
    /// for a bad key).
    pub(crate) fn new(table: &RoxeIndTable, cmd: &CreateRssQpCmd) -> Result<Self> {
        if cmd._reserved != [0; 6] {
            return Err(EINVAL);
        }
        let key = cmd.key.get(..usize::from(cmd.key_len)).ok_or(EINVAL)?;
        let hash = Rss::new(cmd.hash_function, key, cmd.hash_fields).map_err(|e| match e {
            RssError::Unsupported => crate::rdma::errno::eopnotsupp(),
            RssError::BadKey => EINVAL,
        })?;
        Ok(RssRx {
            hash,
            table: table.entries.clone(),
        })
    }

    /// Puts a frame steered to the RSS QP in the WQ its hash picks.
    pub(crate) fn deliver(&self, dev: &RoxeDev, frame: &[u8]) -> bool {
        let e = self.hash.entry(frame, self.table.log_size);
        let landed = self.table.wqs.get(e).is_some_and(|w| land(w, frame));
        if landed {
            dev.counters.event(Event::RawRx);
        } else {
            dev.counters.event(Event::RawRxDrop);
        }
        landed
    }
}
