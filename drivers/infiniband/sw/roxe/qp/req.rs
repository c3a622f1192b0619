// SPDX-License-Identifier: GPL-2.0

//! The requester: turns the send queue into packets. It runs from the
//! doorbell (process context), from the completer when an ACK opens the
//! window, and from the QP timer when its budget ran out, always under the
//! QP's state lock (bottom halves off). Its state is [`ReqState`].

use super::{QpState, RoxeQp};
use crate::cq;
use crate::device::Roxe;
use crate::keys;
use crate::limits::PORT;
use crate::net::NetDevice;
use crate::proto::headers::{self, Bth, Deth, Ext, ImmDt, Reth, DEFAULT_PKEY};
use crate::proto::mtu::IbMtu;
use crate::proto::opcode::{Opcode, Operation, Position, Transport as Wire};
use crate::proto::psn::Psn;
use crate::proto::qp::State;
use crate::proto::qp::{SEND_WQE_HEADER, SGE_SIZE};
use crate::proto::responder::ScatterError;
use crate::proto::seg;
use crate::proto::udp;
use crate::proto::wr::MAX_SGE;
use crate::proto::wr::{SendOp, WcStatus};
use crate::rdma::qp::{Qp, QpType};
use crate::tx::{wire, Path};
use crate::uapi::Sge;
use crate::uapi::{flush, send_flags, Cqe, SendWqe};
use crate::wqe::{for_pieces, MAX_MSG};
use kernel::alloc::flags::GFP_ATOMIC;
use kernel::alloc::{KVVec, KVec};

/// The requester's state: where it is in the send queue and the PSN
/// space, and the read credits it holds.
pub(crate) struct ReqState {
    /// The next WQE to send (RC keeps sent WQEs until ACKed).
    pub(crate) sq_sent: u32,
    /// The next PSN to send.
    pub(crate) npsn: Psn,
    /// The next packet of WQE `sq_sent` (which is only counted
    /// as sent once all its packets are).
    pub(crate) sq_pkt: u32,
    /// The budget ran out with work left; the timer continues.
    pub(crate) kick: bool,
    /// Per SQ slot, the first and last PSN of the sent WQE and
    /// whether it is a read. Sized at creation; nothing is allocated per
    /// packet.
    wqe_psns: KVVec<u64>,
    /// A WQE behind unacknowledged ones failed locally with this
    /// status; it completes once they do.
    pub(crate) sq_blocked: Option<WcStatus>,
    /// RDMA READs sent and not yet answered.
    pub(crate) reads_out: u32,
    /// The device's read-response credits this QP holds (one
    /// per response packet asked for and not yet received).
    read_held: u32,
    /// A read waits for the device's credits; the timer polls.
    credit_wait: bool,
    /// When (monotonic ms) a read of this QP last found the
    /// pool short with a normal take since; a read that has starved
    /// [`crate::limits::CREDIT_STARVED_MS`] overdraws it.
    credit_short_since: Option<i64>,
    /// FLUSH packets carry rxe's ICRC rather than the standard
    /// one (switched by FLUSH timeouts until `flush_icrc_known`).
    pub(crate) flush_icrc_rxe: bool,
    /// A FLUSH of this QP was answered, so the peer takes the
    /// ICRC `flush_icrc_rxe` chooses.
    pub(crate) flush_icrc_known: bool,
    /// A message's data is in memory paged on demand that is not mapped
    /// yet; the timer tries again while the fault runs.
    odp_wait: bool,
    /// The QP's DCQCN rate held the next packet back for this many
    /// microseconds (0: it did not); the timer sends it.
    pace_us: u32,
}

/// Why sending a WQE stopped at the packet it was building.
enum Halt {
    /// The WQE fails with this status.
    Fail(WcStatus),
    /// Its data is in memory paged on demand that is not mapped: a fault
    /// was asked for, nothing was sent or recorded for this packet, and it
    /// goes once the memory is in.
    Fault,
}

impl From<WcStatus> for Halt {
    fn from(s: WcStatus) -> Self {
        Halt::Fail(s)
    }
}

impl From<ScatterError> for Halt {
    fn from(e: ScatterError) -> Self {
        match e {
            ScatterError::Failed(s) => Halt::Fail(s),
            ScatterError::NotPresent => Halt::Fault,
        }
    }
}

impl ReqState {
    /// Nothing sent; `wqe_psns` has a slot per SQ WQE.
    pub(crate) fn new(wqe_psns: KVVec<u64>) -> Self {
        Self {
            sq_sent: 0,
            npsn: Psn::ZERO,
            sq_pkt: 0,
            kick: false,
            wqe_psns,
            sq_blocked: None,
            reads_out: 0,
            read_held: 0,
            credit_wait: false,
            credit_short_since: None,
            flush_icrc_rxe: false,
            flush_icrc_known: false,
            odp_wait: false,
            pace_us: 0,
        }
    }

    /// First PSN, last PSN and whether it is a read, of sent WQE `idx`.
    pub(crate) fn wqe_psn(&self, idx: u32) -> (Psn, Psn, bool) {
        let n = self.wqe_psns.len();
        let v = self
            .wqe_psns
            .get(idx as usize % n.max(1))
            .copied()
            .unwrap_or(0);
        // CAST: each field is masked to 24 bits.
        (
            Psn::new((v & 0xff_ffff) as u32),
            Psn::new((v >> 24 & 0xff_ffff) as u32),
            v >> 48 & 1 != 0,
        )
    }

    /// Records the PSN span of sent WQE `idx`, and whether it waits for a
    /// response (a read or an atomic) rather than an ACK.
    pub(crate) fn set_wqe_psn(&mut self, idx: u32, first: Psn, last: Psn, waits: bool) {
        let n = self.wqe_psns.len().max(1);
        if let Some(e) = self.wqe_psns.get_mut(idx as usize % n) {
            *e = u64::from(first.get()) | u64::from(last.get()) << 24 | u64::from(waits) << 48;
        }
    }

    /// Gives back every read-response credit this QP holds: the responses
    /// still coming no longer count (the QP goes back, fails or resets).
    pub(crate) fn release_reads(&mut self, credits: &crate::limits::Credits) {
        credits.give_back(core::mem::take(&mut self.read_held));
        self.credit_wait = false;
    }

    /// A read response arrived: the credit it held goes back to the pool.
    pub(crate) fn response_arrived(&mut self, credits: &crate::limits::Credits) {
        if self.read_held != 0 {
            self.read_held -= 1;
            credits.give_back(1);
        }
    }

    /// Forgets what was sent: the next WQE to send is `sq_consumer`, the
    /// oldest not completed.
    pub(crate) fn reset(&mut self, sq_consumer: u32) {
        self.sq_sent = sq_consumer;
        self.sq_pkt = 0;
        self.kick = false;
        self.credit_short_since = None;
        self.sq_blocked = None;
        self.reads_out = 0;
        self.odp_wait = false;
        self.pace_us = 0;
    }
}

// The windows and the budget are the protocol model's (`rust/proto/src/req.rs`,
// where their reasons are written down), so the host tests run the driver's
// values.
pub(crate) use crate::proto::req::WINDOW;
use crate::proto::req::{ack_every, read_window, window, BUDGET};

/// In a bind WQE's `swap`: the bind came from `ibv_bind_mw` (type 1).
const BIND_TYPE1: u64 = crate::uapi::BIND_TYPE1;

/// The Q_Key bit that says "use the QP's own Q_Key".
const QKEY_FROM_QP: u32 = 1 << 31;

fn send_cqe(qp: &Qp<Roxe>, w: &SendWqe, op: SendOp, status: WcStatus, byte_len: u32) -> Cqe {
    Cqe {
        wr_id: w.wr_id,
        status: status as u32,
        opcode: op.completion() as u32,
        byte_len,
        qp_num: qp.qp_num(),
        port_num: PORT as u8,
        ..Cqe::default()
    }
}

fn signaled(this: &RoxeQp, w: &SendWqe) -> bool {
    this.sig_all || w.send_flags & send_flags::SIGNALED != 0
}

/// Completes send WQE `idx` (the oldest) and retires it.
pub(crate) fn complete_send(
    qp: &Qp<Roxe>,
    st: &mut QpState,
    w: &SendWqe,
    op: SendOp,
    status: WcStatus,
    byte_len: u32,
) {
    let this = qp.data();
    if status != WcStatus::Success || signaled(this, w) {
        if let Some(scq) = qp.send_cq() {
            let _ = cq::push(scq, send_cqe(qp, w, op, status, byte_len), false);
        }
    }
    st.sq_consumer = st.sq_consumer.wrapping_add(1);
    st.sq_checked = st.sq_checked.saturating_sub(1);
    this.sq.set_consumer(st.sq_consumer);
}

/// Moves the QP to ERR after a failed WQE and flushes the rest.
pub(crate) fn fail(qp: &Qp<Roxe>, st: &mut QpState, w: &SendWqe, op: SendOp, status: WcStatus) {
    // Everything before the failed WQE was completed; the failed one is the
    // oldest outstanding.
    complete_send(qp, st, w, op, status, 0);
    st.attr.state = State::Err;
    super::flush_all(qp, st);
}

/// Sends what is waiting in the SQ. Called with the state lock held, in RTS.
/// Datagrams are routed out of the netdev the QP took at its last modify.
///
/// At most [`BUDGET`] packets go out per call; the rest follow from the
/// QP's timer, so one huge message does not hold the CPU.
pub(crate) fn send_pending(qp: &Qp<Roxe>, st: &mut QpState) {
    let this = qp.data();
    st.renew_route(qp.device().data());
    let t = wire(this.qp_type);
    let mut budget = BUDGET;
    let ndev = st.ndev.clone();
    send_loop(qp, st, ndev.as_deref(), t, &mut budget);
    if budget != BUDGET {
        st.comp.active_ms = now_ms();
    }
    let pace_us = core::mem::take(&mut st.req.pace_us);
    if budget == 0 {
        st.req.kick = true;
        qp.arm_timer(0);
    } else if pace_us != 0 {
        // Held back by the QP's rate: the timer sends the next packet.
        // The retry timeout is not armed meanwhile; each kick that sends
        // moves `active_ms` on, and once nothing holds the QP back
        // `send_pending` arms it again. A wait is at most one packet's
        // time at the floor rate (33 ms at the default 1 Mbit/s).
        st.req.kick = true;
        qp.arm_timer(pace_us.div_ceil(1000));
    } else if core::mem::take(&mut st.req.odp_wait) {
        // The fault is under way on the fault queue: look again soon. (A
        // fault that fails makes the next look an error, so this ends.)
        st.req.kick = true;
        qp.arm_timer(1);
    } else if core::mem::take(&mut st.req.credit_wait) && st.comp.una == st.req.npsn {
        // Other QPs' reads hold the device's credits, and nothing this QP
        // sent is in flight to answer and resume it: try again soon, without
        // spending a retry. (With packets in flight, their answers and the
        // retry timer do.)
        st.req.kick = true;
        qp.arm_timer(1);
    } else if t.is_reliable() {
        arm_retry(qp, st);
    }
}

fn send_loop(qp: &Qp<Roxe>, st: &mut QpState, ndev: Option<&NetDevice>, t: Wire, budget: &mut u32) {
    let this = qp.data();
    loop {
        // After an RNR NAK nothing is sent until the timer says so.
        if st.attr.state != State::Rts || st.comp.rnr_wait || *budget == 0 {
            return;
        }
        let prod = this.sq.producer();
        let Ok(used) = this.sq.geometry().used(prod, st.sq_consumer) else {
            return;
        };
        let in_flight = st.req.sq_sent.wrapping_sub(st.sq_consumer);
        // Only what a doorbell checked is sent.
        if in_flight >= used.min(st.sq_checked) {
            return;
        }
        let idx = st.req.sq_sent;
        let w = this.sq.read(idx);
        let Some(op) = SendOp::from_raw(w.opcode).filter(|o| super::op_allowed(this.qp_type, *o))
        else {
            if in_flight == 0 {
                fail(qp, st, &w, SendOp::Send, WcStatus::LocQpOpErr);
            }
            return;
        };
        if op.is_local() {
            // Memory operations happen in order: once everything before
            // them is complete, they run and complete at once.
            if in_flight != 0 {
                return;
            }
            match local_op(qp, &w, op) {
                Ok(()) => {
                    st.req.sq_sent = st.req.sq_sent.wrapping_add(1);
                    complete_send(qp, st, &w, op, WcStatus::Success, 0);
                    continue;
                }
                Err(status) => {
                    fail(qp, st, &w, op, status);
                    return;
                }
            }
        }
        if t.is_reliable() && in_flight != 0 && st.req.sq_pkt == 0 {
            // IBV_SEND_FENCE: wait for outstanding reads.
            if st.req.reads_out != 0 && w.send_flags & send_flags::FENCE != 0 {
                return;
            }
            // No more reads and atomics in flight than the responder takes.
            let waits = matches!(
                op,
                SendOp::RdmaRead
                    | SendOp::CmpSwap
                    | SendOp::FetchAdd
                    | SendOp::AtomicWrite
                    | SendOp::Flush
            );
            if waits && st.req.reads_out >= u32::from(st.attr.max_rd_atomic).max(1) {
                return;
            }
        }
        let res = match t {
            Wire::Ud => match ndev {
                Some(nd) if this.qp_type == QpType::RawPacket => {
                    *budget -= 1;
                    send_raw(qp, idx, &w, nd).map(Some)
                }
                Some(nd) => {
                    *budget -= 1;
                    send_ud(qp, st, idx, &w, op, nd).map(Some)
                }
                None => return,
            },
            _ => send_connected(qp, st, idx, &w, op, t, budget),
        };
        match res {
            Ok(Some(len)) => {
                st.req.sq_sent = st.req.sq_sent.wrapping_add(1);
                if !t.is_reliable() {
                    // Unreliable: complete once sent.
                    complete_send(qp, st, &w, op, WcStatus::Success, len);
                }
            }
            // Stopped part-way by the window or the budget.
            Ok(None) => return,
            Err(Halt::Fault) => {
                // Where it stopped, it goes on once the memory is in.
                st.req.odp_wait = true;
                qp.device()
                    .data()
                    .counters
                    .event(crate::counters::Event::ReqOdpWait);
                return;
            }
            Err(Halt::Fail(status)) => {
                st.req.sq_pkt = 0;
                if in_flight == 0 {
                    fail(qp, st, &w, op, status);
                } else {
                    // Complete in order: the bad WQE fails once the ones
                    // before it are done.
                    st.req.sq_blocked = Some(status);
                }
                return;
            }
        }
    }
}

/// Carries out a local memory operation: invalidate, fast registration
/// (kernel QPs only) or memory-window bind.
///
/// A bind WQE carries the new rkey in `rkey`, the MR's lkey in `imm_data`,
/// the range in `remote_addr` and `compare_add`, and the window's rights in
/// the low half of `swap`; bit 32 of `swap` marks a type 1 bind made with
/// `ibv_bind_mw`. A registration carries the new key in `rkey`, the range
/// in `remote_addr` and `compare_add`, and the rights in `swap`.
fn local_op(qp: &Qp<Roxe>, w: &SendWqe, op: SendOp) -> core::result::Result<(), WcStatus> {
    let (dev, pd) = (qp.device().data(), qp.pd_id());
    match op {
        SendOp::LocalInv => {
            keys::invalidate(&dev.mr_table, pd, None, w.rkey).map_err(|_| WcStatus::LocQpOpErr)
        }
        SendOp::RegMr if !qp.is_user() => {
            // CAST: the rights are the low half.
            keys::fast_register(
                &dev.mr_table,
                pd,
                w.rkey,
                w.swap as u32,
                w.remote_addr,
                w.compare_add,
            )
            .map_err(|_| WcStatus::LocQpOpErr)
        }
        SendOp::BindMw => {
            let a = keys::BindArgs {
                new_key: w.rkey,
                mr_lkey: w.imm_data,
                addr: w.remote_addr,
                len: w.compare_add,
                // CAST: the rights are the low half.
                access: w.swap as u32,
                type1_call: w.swap & BIND_TYPE1 != 0,
            };
            keys::bind(&dev.mr_table, pd, qp.qp_num(), &a).map_err(|_| WcStatus::MwBindErr)
        }
        _ => Err(WcStatus::LocQpOpErr),
    }
}

/// Sends a raw packet QP's SEND: its message is a whole Ethernet frame,
/// from the destination MAC on, of at most the netdev's MTU past the
/// Ethernet header (and a VLAN tag), handed to the netdev's queue as it
/// is. A frame the queue drops, or that finds no memory, is lost as on a
/// wire (`tx_err`); the WQE completes either way.
fn send_raw(
    qp: &Qp<Roxe>,
    idx: u32,
    w: &SendWqe,
    ndev: &NetDevice,
) -> core::result::Result<u32, Halt> {
    const ETH_HLEN: u32 = 14;
    const VLAN_HLEN: u32 = 4;
    let len = msg_len(qp.data(), idx, w)?;
    let max = ndev.mtu() + ETH_HLEN;
    if len < ETH_HLEN || len > max + VLAN_HLEN {
        return Err(WcStatus::LocLenErr.into());
    }
    let counters = &qp.device().data().counters;
    let Ok(mut frame) = KVec::from_elem(0u8, len as usize, GFP_ATOMIC) else {
        counters.event(crate::counters::Event::TxErr);
        return Ok(len);
    };
    match gather(qp, idx, w, 0, &mut frame) {
        Ok(()) => {}
        Err(ScatterError::NotPresent) => return Err(Halt::Fault),
        Err(ScatterError::Failed(e)) => return Err(Halt::Fail(e)),
    }
    // The room for a VLAN tag is only for a frame that carries one.
    if len > max && frame.get(12..14) != Some(&[0x81, 0x00][..]) {
        return Err(WcStatus::LocLenErr.into());
    }
    if crate::raw::xmit(qp.device(), ndev, &frame).is_err() {
        counters.event(crate::counters::Event::TxErr);
    }
    Ok(len)
}

fn send_ud(
    qp: &Qp<Roxe>,
    st: &mut QpState,
    idx: u32,
    w: &SendWqe,
    op: SendOp,
    ndev: &NetDevice,
) -> core::result::Result<u32, Halt> {
    let dev = qp.device();
    let len = msg_len(qp.data(), idx, w)?;
    // Only an AH of the QP's own PD (and user space's own, for a user QP).
    let ah = crate::tx::ah_with(
        &dev.data().ah_table,
        w.ah_num,
        qp.pd_id(),
        qp.is_user(),
        |a| (a.sgid, a.dgid, a.traffic_class, a.hop_limit, a.flow_label),
    )
    .ok_or(WcStatus::LocQpOpErr)?;
    let Ok(path) = Path::resolve(ndev, ah.0, ah.1, ah.2, ah.3, ah.4) else {
        // No route: the datagram is lost, as on a wire.
        return Ok(len);
    };
    if len > path.mtu() {
        return Err(WcStatus::LocLenErr.into());
    }
    let opcode = seg::request_opcode(Wire::Ud, op, Position::Only).ok_or(WcStatus::LocQpOpErr)?;
    let qkey = if w.remote_qkey & QKEY_FROM_QP != 0 {
        st.attr.qkey
    } else {
        w.remote_qkey
    };
    let psn = st.req.npsn;
    let mut bth = Bth::new(opcode, DEFAULT_PKEY, w.remote_qpn & headers::QPN_MASK, psn);
    bth.se = w.send_flags & send_flags::SOLICITED != 0;
    bth.pad = headers::pad_len(len as usize);
    st.req.npsn = st.req.npsn.next();
    let ext = Ext {
        deth: Some(Deth {
            qkey,
            src_qpn: qp.qp_num(),
        }),
        immdt: opcode
            .has_immediate()
            .then_some(ImmDt(u32::from_be(w.imm_data))),
        ..Ext::default()
    };
    let sport = udp::source_port(qp.qp_num(), w.remote_qpn);
    let mut err = None;
    let _ = path.send(
        &qp.device().data().counters,
        sport,
        &bth,
        &ext,
        len as usize,
        |buf| match gather(qp, idx, w, 0, buf) {
            Ok(()) => true,
            Err(e) => {
                err = Some(e);
                false
            }
        },
    );
    match err {
        Some(ScatterError::NotPresent) => {
            // Not sent: it goes with this PSN once its data is in.
            st.req.npsn = psn;
            Err(Halt::Fault)
        }
        Some(ScatterError::Failed(e)) => Err(Halt::Fail(e)),
        None => Ok(len),
    }
}

/// Sends a FLUSH: one packet, FETH then RETH, answered like a read (an
/// empty RDMA READ response). The WQE holds the range's length in
/// `compare_add` and the placement type and selectivity level in `swap`
/// (`uapi::SendWqe`).
fn send_flush(
    qp: &Qp<Roxe>,
    st: &mut QpState,
    idx: u32,
    w: &SendWqe,
    t: Wire,
    budget: &mut u32,
) -> core::result::Result<Option<u32>, WcStatus> {
    if t != Wire::Rc {
        return Err(WcStatus::LocQpOpErr);
    }
    let len = u32::try_from(w.compare_add).map_err(|_| WcStatus::LocLenErr)?;
    // CAST: the low two bytes, as the WQE format says.
    let (placement_type, selectivity) = ((w.swap & 0xff) as u8, ((w.swap >> 8) & 0xff) as u8);
    if !matches!(placement_type, flush::GLOBAL | flush::PERSISTENT) || selectivity > flush::MR {
        return Err(WcStatus::LocQpOpErr);
    }
    if *budget == 0 || st.comp.una.distance(st.req.npsn) >= WINDOW {
        return Ok(None);
    }
    if st.path.is_none() {
        return Err(WcStatus::LocQpOpErr);
    }
    *budget -= 1;
    st.req.set_wqe_psn(idx, st.req.npsn, st.req.npsn, true);
    st.req.reads_out += 1;
    let Some(path) = st.path.as_ref() else {
        return Err(WcStatus::LocQpOpErr);
    };
    let mut bth = Bth::new(
        Opcode::RcFlush,
        DEFAULT_PKEY,
        st.attr.dest_qp_num,
        st.req.npsn,
    );
    bth.ack_req = true;
    let ext = Ext {
        feth: Some(headers::Feth {
            selectivity,
            placement_type,
        }),
        reth: Some(Reth {
            va: w.remote_addr,
            rkey: w.rkey,
            dma_len: len,
        }),
        ..Ext::default()
    };
    let sport = udp::source_port(qp.qp_num(), st.attr.dest_qp_num);
    let _ = path.send_icrc(
        &qp.device().data().counters,
        sport,
        &bth,
        &ext,
        0,
        |_| true,
        st.req.flush_icrc_rxe,
    );
    if st.req.flush_icrc_rxe {
        qp.device()
            .data()
            .counters
            .event(crate::counters::Event::TxFlushIcrcRxe);
    }
    // One packet: the WQE is wholly sent, as `send_connected` leaves it.
    st.req.sq_pkt = 0;
    st.req.npsn = st.req.npsn.next();
    Ok(Some(0))
}

/// The device's pool of read-response credits.
pub(crate) fn this_dev_credits(qp: &Qp<Roxe>) -> &crate::limits::Credits {
    &qp.device().data().read_credits
}

impl ReqState {
    /// Takes `n` read-response credits of `qp`'s device for a read
    /// request, or marks the QP as waiting for them. A QP that holds none
    /// and has found the pool short for [`crate::limits::CREDIT_STARVED_MS`]
    /// overdraws it, and keeps doing so while the pool stays short, so
    /// other QPs' reads that never end cannot starve it.
    fn take_read_credits(&mut self, qp: &Qp<Roxe>, n: u32) -> bool {
        let pool = this_dev_credits(qp);
        if pool.take(n) {
            self.read_held += n;
            self.credit_short_since = None;
            return true;
        }
        let now = kernel::time::Ktime::ktime_get().to_ms();
        let since = *self.credit_short_since.get_or_insert(now);
        if self.read_held == 0
            && now - since >= crate::limits::CREDIT_STARVED_MS
            && pool.overdraw(n)
        {
            self.read_held += n;
            qp.device()
                .data()
                .counters
                .event(crate::counters::Event::ReadCreditOverdraft);
            return true;
        }
        self.credit_wait = true;
        false
    }
}

/// Sends (more of) WQE `idx` on a connected QP, from packet `st.req.sq_pkt`
/// on. Returns the message length once every packet is out, or `None`
/// when the RC window or `budget` stopped it part-way.
///
/// An RDMA READ goes out as one read request per read window (`read_window`) of
/// response, so no responder answers with a longer burst than that.
fn send_connected(
    qp: &Qp<Roxe>,
    st: &mut QpState,
    idx: u32,
    w: &SendWqe,
    op: SendOp,
    t: Wire,
    budget: &mut u32,
) -> core::result::Result<Option<u32>, Halt> {
    if op == SendOp::Flush {
        return Ok(send_flush(qp, st, idx, w, t, budget)?);
    }
    let atomic = matches!(op, SendOp::CmpSwap | SendOp::FetchAdd);
    // Atomic Write's 8 bytes come from the message, or (with no SGE and no
    // inline data, as `ibv_wr_atomic_write` posts it) from `compare_add`.
    let value_in_wqe =
        op == SendOp::AtomicWrite && w.num_sge == 0 && w.send_flags & send_flags::INLINE == 0;
    let len = if value_in_wqe {
        8
    } else {
        msg_len(qp.data(), idx, w)?
    };
    if atomic && (len < 8 || w.remote_addr % 8 != 0) {
        return Err(WcStatus::LocLenErr.into());
    }
    // Atomic Write puts exactly 8 bytes, in one packet answered like a read.
    let atomic_write = op == SendOp::AtomicWrite;
    if atomic_write && len != 8 {
        return Err(WcStatus::LocLenErr.into());
    }
    let route_mtu = st
        .path
        .as_ref()
        .map(Path::mtu)
        .ok_or(WcStatus::LocQpOpErr)?;
    let mtu = IbMtu::from_enum(st.attr.path_mtu)
        .map_or(1024, IbMtu::bytes)
        .min(route_mtu);
    let n = if atomic {
        1
    } else {
        seg::packet_count(len, mtu).ok_or(WcStatus::LocLenErr)?
    };
    let rc = t.is_reliable();
    let waits = op == SendOp::RdmaRead || atomic || atomic_write;
    // The first piece of a read took its credits before anything of the
    // WQE was recorded.
    let mut prepaid = false;
    if st.req.sq_pkt == 0 {
        // Nothing is recorded for a WQE that cannot start yet: it is
        // counted in `reads_out` once, when its first packet goes out.
        let rw = read_window(mtu);
        let read_full = op == SendOp::RdmaRead
            && st.comp.una != st.req.npsn
            && st.comp.una.distance(st.req.npsn) + n.min(rw) > rw;
        if *budget == 0
            || (rc && st.comp.una.distance(st.req.npsn) >= window(mtu))
            || read_full
            || paced(&mut st.req, &mut st.cc)
        {
            return Ok(None);
        }
        if op == SendOp::RdmaRead && !st.req.take_read_credits(qp, n.min(rw)) {
            return Ok(None);
        }
        prepaid = op == SendOp::RdmaRead;
        st.req
            .set_wqe_psn(idx, st.req.npsn, st.req.npsn.wrapping_add(n - 1), waits);
        if waits {
            st.req.reads_out += 1;
        }
    }
    let Some(path) = st.path.as_ref() else {
        return Err(WcStatus::LocQpOpErr.into());
    };
    let (first, _, _) = st.req.wqe_psn(idx);
    let dqpn = st.attr.dest_qp_num;
    let m = Message {
        idx,
        w,
        op,
        len,
        mtu,
        n,
        t,
        value_in_wqe,
        first,
        dqpn,
        sport: udp::source_port(qp.qp_num(), dqpn),
    };
    while st.req.sq_pkt < n {
        if *budget == 0
            || (rc && st.comp.una.distance(st.req.npsn) >= window(mtu))
            || paced(&mut st.req, &mut st.cc)
        {
            return Ok(None);
        }
        *budget -= 1;
        // The pacing clock counts what each packet carries past the
        // headers every packet has: an AtomicETH, a RETH, the payload.
        let carried = if atomic {
            atomic_packet(qp, path, &mut st.req, &m)?;
            // CAST: 28.
            headers::AtomicEth::LEN as u32
        } else if op == SendOp::RdmaRead {
            if !read_request(qp, path, &mut st.req, st.comp.una, &m, &mut prepaid) {
                // Not now: the packet was not spent.
                *budget += 1;
                return Ok(None);
            }
            // CAST: 16.
            Reth::LEN as u32
        } else {
            // Below 2^31 + MTU: fits.
            let plen = (len - st.req.sq_pkt * mtu).min(mtu);
            if let Err(h) = data_packet(qp, path, &mut st.req, &m) {
                if matches!(h, Halt::Fault) && st.req.sq_pkt == 0 && waits {
                    // Counted as started above; it starts again once its
                    // data is in.
                    st.req.reads_out = st.req.reads_out.saturating_sub(1);
                }
                return Err(h);
            }
            plen
        };
        st.cc.sent(carried);
    }
    st.req.sq_pkt = 0;
    Ok(Some(len))
}

/// Whether the QP's DCQCN rate holds its next packet back
/// ([`super::cc::Congestion::pace`]); if so, `req` records the wait for
/// [`send_pending`] to arm the timer with.
fn paced(req: &mut ReqState, cc: &mut super::cc::Congestion) -> bool {
    let us = cc.pace();
    if us != 0 {
        req.pace_us = us;
    }
    us != 0
}

/// What the packets of one connected-QP message share.
struct Message<'a> {
    idx: u32,
    w: &'a SendWqe,
    op: SendOp,
    len: u32,
    mtu: u32,
    /// Packets (for a read, response packets) in the message.
    n: u32,
    t: Wire,
    /// Atomic Write's value is `compare_add`, not the message.
    value_in_wqe: bool,
    /// The message's first PSN.
    first: Psn,
    dqpn: u32,
    sport: u16,
}

impl Message<'_> {
    /// The XRCETH every request of an XRC initiator carries: the remote
    /// SRQ the message is for, which the WQE names in `remote_qpn`.
    fn xrceth(&self) -> Option<headers::Xrceth> {
        (self.t == Wire::Xrc).then_some(headers::Xrceth {
            srqn: self.w.remote_qpn & headers::QPN_MASK,
        })
    }
}

/// Sends the one packet of a CmpSwap or FetchAdd.
fn atomic_packet(
    qp: &Qp<Roxe>,
    path: &Path,
    req: &mut ReqState,
    m: &Message<'_>,
) -> core::result::Result<(), WcStatus> {
    let (w, op) = (m.w, m.op);
    let opcode = seg::request_opcode(m.t, op, Position::Only).ok_or(WcStatus::LocQpOpErr)?;
    let mut bth = Bth::new(opcode, DEFAULT_PKEY, m.dqpn, req.npsn);
    bth.ack_req = true;
    let (swap_add, compare) = if op == SendOp::CmpSwap {
        (w.swap, w.compare_add)
    } else {
        (w.compare_add, 0)
    };
    let aeth = headers::AtomicEth {
        va: w.remote_addr,
        rkey: w.rkey,
        swap_add,
        compare,
    };
    let ext = Ext {
        atomic_eth: Some(aeth),
        xrceth: m.xrceth(),
        ..Ext::default()
    };
    let _ = path.send(&qp.device().data().counters, m.sport, &bth, &ext, 0, |_| {
        true
    });
    req.sq_pkt = 1;
    req.npsn = req.npsn.next();
    Ok(())
}

/// Sends the read request for the next piece of an RDMA READ, from
/// response packet `req.sq_pkt` on. `false` if it must wait: for the
/// pieces before it to be answered, or for the device's read credits
/// (`prepaid` says the first piece already took them).
fn read_request(
    qp: &Qp<Roxe>,
    path: &Path,
    req: &mut ReqState,
    una: Psn,
    m: &Message<'_>,
    prepaid: &mut bool,
) -> bool {
    let i = req.sq_pkt;
    let rw = read_window(m.mtu);
    if i % rw == 0 && i != 0 && una != req.npsn {
        // The pieces of one read go one at a time: each is a request the
        // responder keeps a resource for, and it may keep as few as one
        // (`max_dest_rd_atomic`).
        return false;
    }
    // Requests cover fixed pieces of the read (the read window at the
    // path MTU, which does not change while the read is outstanding), so
    // one asked again part-way (after a loss) is a subset of the one sent
    // first, which is what responders accept as a duplicate.
    let span = (m.n - i).min(rw - i % rw);
    if !core::mem::take(prepaid) {
        if una != req.npsn && una.distance(req.npsn) + span > rw {
            // Resumed by the responses (`comp::complete`).
            return false;
        }
        if !req.take_read_credits(qp, span) {
            return false;
        }
    }
    // Below 2^31 + MTU: fits.
    let off = i * m.mtu;
    let sub_len = (m.len - off).min(span * m.mtu);
    let Some(opcode) = seg::request_opcode(m.t, SendOp::RdmaRead, Position::Only) else {
        return false;
    };
    let mut bth = Bth::new(opcode, DEFAULT_PKEY, m.dqpn, m.first.wrapping_add(i));
    bth.ack_req = true;
    let reth = Reth {
        va: m.w.remote_addr.wrapping_add(u64::from(off)),
        rkey: m.w.rkey,
        dma_len: sub_len,
    };
    let ext = Ext {
        reth: Some(reth),
        xrceth: m.xrceth(),
        ..Ext::default()
    };
    let _ = path.send(&qp.device().data().counters, m.sport, &bth, &ext, 0, |_| {
        true
    });
    req.sq_pkt += span;
    req.npsn = m.first.wrapping_add(req.sq_pkt);
    true
}

/// Sends packet `req.sq_pkt` of a SEND, RDMA WRITE or Atomic Write, with
/// its payload gathered from the WQE's SGEs or inline data.
fn data_packet(
    qp: &Qp<Roxe>,
    path: &Path,
    req: &mut ReqState,
    m: &Message<'_>,
) -> core::result::Result<(), Halt> {
    let (w, i) = (m.w, req.sq_pkt);
    // Below 2^31 + MTU: fits.
    let off = i * m.mtu;
    let pos = seg::position(i, m.n);
    let opcode = seg::request_opcode(m.t, m.op, pos).ok_or(WcStatus::LocQpOpErr)?;
    let plen = (m.len - off).min(m.mtu);
    let mut bth = Bth::new(opcode, DEFAULT_PKEY, m.dqpn, req.npsn);
    bth.pad = headers::pad_len(plen as usize);
    if pos.ends_message() {
        bth.se = w.send_flags & send_flags::SOLICITED != 0;
    }
    // RC asks for an ACK at the end of each message and twice per window,
    // so the window keeps opening inside long messages.
    bth.ack_req = m.t.is_reliable() && (pos.ends_message() || (i + 1) % ack_every(m.mtu) == 0);
    let ext = Ext {
        reth: (matches!(
            opcode.operation(),
            Operation::RdmaWrite | Operation::AtomicWrite
        ) && pos.starts_message())
        .then_some(Reth {
            va: w.remote_addr,
            rkey: w.rkey,
            dma_len: m.len,
        }),
        immdt: opcode
            .has_immediate()
            .then_some(ImmDt(u32::from_be(w.imm_data))),
        ieth: opcode
            .has_invalidate()
            .then_some(headers::Ieth { rkey: w.imm_data }),
        xrceth: m.xrceth(),
        ..Ext::default()
    };
    let mut err = None;
    let _ = path.send(
        &qp.device().data().counters,
        m.sport,
        &bth,
        &ext,
        plen as usize,
        |buf| {
            let got = if m.value_in_wqe {
                buf.get_mut(..8)
                    .map(|b| b.copy_from_slice(&w.compare_add.to_ne_bytes()))
                    .ok_or(ScatterError::Failed(WcStatus::LocLenErr))
            } else {
                gather(qp, m.idx, w, off, buf)
            };
            match got {
                Ok(()) => true,
                Err(e) => {
                    err = Some(e);
                    false
                }
            }
        },
    );
    if let Some(e) = err {
        return Err(e.into());
    }
    req.sq_pkt += 1;
    req.npsn = req.npsn.next();
    Ok(())
}

/// The QP's local ACK timeout in milliseconds, or `None` for `timeout` 0
/// (infinite); see [`crate::proto::req::timeout_ms`].
pub(crate) fn timeout_ms(st: &QpState) -> Option<u32> {
    crate::proto::req::timeout_ms(st.attr.timeout)
}

/// The time in milliseconds, for the retry timeout.
pub(crate) fn now_ms() -> i64 {
    kernel::time::Ktime::ktime_get().to_ms()
}

/// How long (ms) until the retry timeout is due, or `None` if it is due
/// now (or the QP waits forever).
pub(crate) fn retry_due_in(st: &QpState) -> Option<u32> {
    let ms = timeout_ms(st)?;
    let left = st.comp.active_ms.saturating_add(i64::from(ms)) - now_ms();
    // CAST: between 1 and `ms`.
    (left > 0).then(|| left.min(i64::from(ms)) as u32)
}

/// Whether sent work waits for acknowledgement.
pub(crate) fn outstanding(st: &QpState) -> bool {
    st.req.sq_sent != st.sq_consumer || st.req.sq_pkt != 0
}

/// Starts the retry timer while work waits for acknowledgement, to go off
/// one timeout after the last packet sent or the last progress heard of
/// (`CompState::active_ms`), however often this is called in between.
pub(crate) fn arm_retry(qp: &Qp<Roxe>, st: &mut QpState) {
    if outstanding(st) && !st.comp.rnr_wait && timeout_ms(st).is_some() {
        // This replaces a pending kick's expiry; the send it was for has
        // just run.
        st.req.kick = false;
        qp.arm_timer(retry_due_in(st).unwrap_or(0));
    }
}

/// The SGEs of send WQE `idx`, read from the ring one at a time.
pub(crate) fn send_sges<'a>(
    this: &'a RoxeQp,
    idx: u32,
    w: &SendWqe,
) -> impl Iterator<Item = core::result::Result<Sge, WcStatus>> + 'a {
    (0..w.num_sge.min(MAX_SGE)).map(move |i| {
        this.sq
            .read_at(
                idx,
                SEND_WQE_HEADER as usize + i as usize * SGE_SIZE as usize,
            )
            .ok_or(WcStatus::LocLenErr)
    })
}

/// The length of a send WQE's message, checked.
pub(crate) fn msg_len(this: &RoxeQp, idx: u32, w: &SendWqe) -> core::result::Result<u32, WcStatus> {
    let total = if w.send_flags & send_flags::INLINE != 0 {
        u64::from(w.inline_len)
    } else {
        let mut t = 0u64;
        for s in send_sges(this, idx, w) {
            t += u64::from(s?.length);
        }
        t
    };
    if total > MAX_MSG {
        return Err(WcStatus::LocLenErr);
    }
    // CAST: at most 2^31.
    Ok(total as u32)
}

/// Copies `dst.len()` bytes of the message of send WQE `idx`, from message
/// offset `off`, into `dst`.
pub(crate) fn gather(
    qp: &Qp<Roxe>,
    idx: u32,
    w: &SendWqe,
    off: u32,
    dst: &mut [u8],
) -> core::result::Result<(), ScatterError> {
    let this = qp.data();
    if w.send_flags & send_flags::INLINE != 0 {
        return this
            .sq
            .read_bytes(idx, SEND_WQE_HEADER as usize + off as usize, dst)
            .ok_or(ScatterError::Failed(WcStatus::LocLenErr));
    }
    let (dev, pd) = (qp.device().data(), qp.pd_id());
    let len = dst.len();
    for_pieces(
        send_sges(this, idx, w),
        u64::from(off),
        len,
        |va, lkey, r| {
            let out = &mut dst[r];
            // CAST: a piece is at most an SGE length.
            keys::with_key(&dev.mr_table, lkey, pd, |m| {
                m.read(m.check(va, out.len() as u32, 0)?, out)
            })
        },
    )
}
