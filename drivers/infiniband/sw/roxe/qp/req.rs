// SPDX-License-Identifier: GPL-2.0

//! The requester's kernel side. `rust/proto`'s [`Requester`] machine
//! decides what a QP's send queue puts on the wire and what the answers do
//! to it (PSNs, windows, read credits, go-back-N, retries, completion
//! order); this file gives it the QP's rings, memory, packets, timer and
//! counters through [`SendIo`], its [`Io`]. It runs under the QP's state
//! lock (bottom halves off), from the doorbell, the receive hook
//! (`qp/comp.rs`) and the QP timer.

use super::{QpState, RoxeQp};
use crate::counters::Event as Count;
use crate::cq;
use crate::device::Roxe;
use crate::keys;
use crate::limits::PORT;
use crate::net::NetDevice;
use crate::proto::headers::{self, Bth, Deth, Ext, ImmDt, Reth, DEFAULT_PKEY};
use crate::proto::opcode::{Operation, Position, Transport as Wire};
use crate::proto::psn::Psn;
use crate::proto::qp::State;
use crate::proto::qp::{SEND_WQE_HEADER, SGE_SIZE};
use crate::proto::req::{self as model, Completion, Event, Io, Segment, Span, Wqe};
use crate::proto::responder::ScatterError;
use crate::proto::seg;
use crate::proto::udp;
use crate::proto::wr::MAX_SGE;
use crate::proto::wr::{SendOp, WcStatus};
use crate::rdma::qp::{Qp, QpAttr, QpType};
use crate::tx::{wire, Path};
use crate::uapi::Sge;
use crate::uapi::{flush, send_flags, Cqe, SendWqe};
use crate::wqe::{for_pieces, MAX_MSG};
use kernel::alloc::flags::GFP_ATOMIC;
use kernel::alloc::{KVVec, KVec};
use kernel::prelude::*;

/// A QP's requester: the protocol machine over one [`Span`] per SQ slot.
pub(crate) type Requester = model::Requester<KVVec<Span>>;

/// A requester for a QP of type `t` with `slots` SQ slots; the spans are
/// charged to the caller's memory cgroup. [`reset_settings`] gives it the
/// QP's attributes.
pub(crate) fn new_requester(t: QpType, slots: u32) -> Result<Requester> {
    let mut spans = KVVec::with_capacity(slots as usize, GFP_KERNEL_ACCOUNT)?;
    for _ in 0..slots {
        spans.push(Span::EMPTY, GFP_KERNEL_ACCOUNT)?;
    }
    Ok(Requester::new(
        model::Config::new(wire(t), 1024),
        spans,
        Psn::ZERO,
    ))
}

/// Gives the requester the attributes of a QP in RESET.
pub(crate) fn reset_settings(r: &mut Requester, a: &QpAttr) {
    r.set_retry_cnt(a.retry_cnt);
    r.set_rnr_retry(a.rnr_retry);
    r.set_timeout(a.timeout);
    r.set_max_rd_atomic(a.max_rd_atomic);
}

/// In a bind WQE's `swap`: the bind came from `ibv_bind_mw` (type 1).
const BIND_TYPE1: u64 = crate::uapi::BIND_TYPE1;

/// The Q_Key bit that says "use the QP's own Q_Key".
const QKEY_FROM_QP: u32 = 1 << 31;

/// The time in milliseconds, for the machine's clock.
pub(crate) fn now_ms() -> i64 {
    kernel::time::Ktime::ktime_get().to_ms()
}

/// The requester's kernel side for one call: what it reads of the QP,
/// and what it leaves for the caller to do once the machine returns.
pub(crate) struct SendIo<'a> {
    qp: &'a Qp<Roxe>,
    attr: &'a QpAttr,
    path: Option<&'a Path>,
    ndev: Option<&'a NetDevice>,
    cc: &'a mut super::cc::Congestion,
    /// The last WQE read from the ring, by SQ index: the packets of one
    /// message in one call read its header once.
    last: Option<(u32, SendWqe)>,
    /// A failed WQE moved the QP to ERR: the send queue from the first
    /// index up to the second (the producer the machine was told of), and
    /// the receive queue, are to be flushed.
    fatal: Option<(u32, u32)>,
}

/// Runs `f` on `st`'s requester with its kernel side, and then does what
/// a failure left to do: the QP goes to ERR and its queues are flushed.
pub(crate) fn with_req<R>(
    qp: &Qp<Roxe>,
    st: &mut QpState,
    f: impl FnOnce(&mut Requester, &mut SendIo<'_>) -> R,
) -> R {
    let mtu = st.path_mtu();
    let QpState {
        req,
        attr,
        path,
        ndev,
        cc,
        ..
    } = st;
    req.set_sending(attr.state == State::Rts);
    if qp.data().qp_type.is_connected() {
        req.set_mtu(mtu);
    }
    let mut io = SendIo {
        qp,
        attr,
        path: path.as_ref(),
        ndev: ndev.as_deref(),
        cc,
        last: None,
        fatal: None,
    };
    let r = f(req, &mut io);
    if let Some((from, to)) = io.fatal {
        st.attr.state = State::Err;
        super::flush_sq(qp, from, to);
        super::flush_rq(qp, st);
    }
    r
}

/// Sends what is waiting in the SQ, as far as the machine allows, and
/// arms the QP's timer for the rest. Called with the state lock held.
pub(crate) fn send_pending(qp: &Qp<Roxe>, st: &mut QpState) {
    st.renew_route(qp.device().data());
    with_req(qp, st, |r, io| r.send_pending(now_ms(), io));
}

impl SendIo<'_> {
    fn read(&mut self, idx: u32) -> SendWqe {
        match self.last {
            Some((i, w)) if i == idx => w,
            _ => {
                let w = self.qp.data().sq.read(idx);
                self.last = Some((idx, w));
                w
            }
        }
    }

    fn count(&self, e: Count) {
        self.qp.device().data().counters.event(e);
    }

    fn sport(&self) -> u16 {
        udp::source_port(self.qp.qp_num(), self.attr.dest_qp_num)
    }

    /// The length of a connected QP's message, with the checks each
    /// operation makes of its WQE.
    fn message_len(
        &self,
        idx: u32,
        w: &SendWqe,
        op: SendOp,
    ) -> core::result::Result<u32, WcStatus> {
        let this = self.qp.data();
        if op.is_local() || wire(this.qp_type) == Wire::Ud {
            // Local operations carry no message; a datagram is checked
            // when it is sent.
            return Ok(0);
        }
        if self.path.is_none() {
            return Err(WcStatus::LocQpOpErr);
        }
        match op {
            SendOp::Flush => {
                // The range's length is in `compare_add`, the placement
                // type and selectivity level in `swap` (`uapi::SendWqe`).
                let len = u32::try_from(w.compare_add).map_err(|_| WcStatus::LocLenErr)?;
                let (placement, level) = flush_args(w);
                if !matches!(placement, flush::GLOBAL | flush::PERSISTENT) || level > flush::MR {
                    return Err(WcStatus::LocQpOpErr);
                }
                Ok(len)
            }
            // Atomic Write puts exactly 8 bytes, from the message or (with
            // no SGE and no inline data, as `ibv_wr_atomic_write` posts it)
            // from `compare_add`.
            SendOp::AtomicWrite if value_in_wqe(w) => Ok(8),
            SendOp::AtomicWrite => match msg_len(this, idx, w)? {
                8 => Ok(8),
                _ => Err(WcStatus::LocLenErr),
            },
            SendOp::CmpSwap | SendOp::FetchAdd => {
                let len = msg_len(this, idx, w)?;
                if len < 8 || w.remote_addr % 8 != 0 {
                    return Err(WcStatus::LocLenErr);
                }
                Ok(len)
            }
            _ => msg_len(this, idx, w),
        }
    }

    /// The XRCETH every request of an XRC initiator carries: the remote
    /// SRQ the message is for, which the WQE names in `remote_qpn`.
    fn xrceth(&self, w: &SendWqe) -> Option<headers::Xrceth> {
        (self.qp.data().qp_type == QpType::XrcIni).then_some(headers::Xrceth {
            srqn: w.remote_qpn & headers::QPN_MASK,
        })
    }

    fn bth(&self, seg: &Segment) -> Bth {
        let mut bth = Bth::new(seg.opcode, DEFAULT_PKEY, self.attr.dest_qp_num, seg.psn);
        bth.ack_req = seg.ack_req;
        bth
    }
}

/// A FLUSH WQE's placement type and selectivity level.
fn flush_args(w: &SendWqe) -> (u8, u8) {
    // CAST: the low two bytes, as the WQE format says.
    ((w.swap & 0xff) as u8, ((w.swap >> 8) & 0xff) as u8)
}

/// Whether an Atomic Write's value is `compare_add` rather than the
/// message.
fn value_in_wqe(w: &SendWqe) -> bool {
    SendOp::from_raw(w.opcode) == Some(SendOp::AtomicWrite)
        && w.num_sge == 0
        && w.send_flags & send_flags::INLINE == 0
}

fn send_cqe(qp: &Qp<Roxe>, w: &SendWqe, c: &Completion) -> Cqe {
    Cqe {
        wr_id: w.wr_id,
        status: c.status as u32,
        opcode: c.op.completion() as u32,
        byte_len: c.byte_len,
        qp_num: qp.qp_num(),
        port_num: PORT as u8,
        ..Cqe::default()
    }
}

impl Io for SendIo<'_> {
    fn queued(&mut self, consumer: u32) -> Option<u32> {
        let sq = &self.qp.data().sq;
        sq.geometry().used(sq.producer(), consumer).ok()
    }

    fn wqe(&mut self, idx: u32) -> Wqe {
        let w = self.read(idx);
        let t = self.qp.data().qp_type;
        let op = SendOp::from_raw(w.opcode).filter(|o| super::op_allowed(t, *o));
        Wqe {
            op,
            len: op.map_or(Ok(0), |op| self.message_len(idx, &w, op)),
            fence: w.send_flags & send_flags::FENCE != 0,
        }
    }

    fn local_op(&mut self, idx: u32, op: SendOp) -> core::result::Result<(), WcStatus> {
        let w = self.read(idx);
        local_op(self.qp, &w, op)
    }

    fn transmit(&mut self, seg: &Segment) -> core::result::Result<(), ScatterError> {
        let w = self.read(seg.wqe);
        let path = self
            .path
            .ok_or(ScatterError::Failed(WcStatus::LocQpOpErr))?;
        let counters = &self.qp.device().data().counters;
        let sport = self.sport();
        let mut bth = self.bth(seg);
        let xrceth = self.xrceth(&w);
        // The pacing clock counts what each packet carries past the
        // headers every packet has: an AtomicETH, a RETH, the payload.
        let carried = match seg.op {
            SendOp::Flush => {
                let (placement_type, selectivity) = flush_args(&w);
                let ext = Ext {
                    feth: Some(headers::Feth {
                        selectivity,
                        placement_type,
                    }),
                    reth: Some(Reth {
                        va: w.remote_addr,
                        rkey: w.rkey,
                        dma_len: seg.len,
                    }),
                    ..Ext::default()
                };
                let rxe = seg.rxe_flush_icrc;
                let _ = path.send_icrc(counters, sport, &bth, &ext, 0, |_| true, rxe);
                if rxe {
                    self.count(Count::TxFlushIcrcRxe);
                }
                return Ok(());
            }
            SendOp::CmpSwap | SendOp::FetchAdd => {
                let (swap_add, compare) = if seg.op == SendOp::CmpSwap {
                    (w.swap, w.compare_add)
                } else {
                    (w.compare_add, 0)
                };
                let ext = Ext {
                    atomic_eth: Some(headers::AtomicEth {
                        va: w.remote_addr,
                        rkey: w.rkey,
                        swap_add,
                        compare,
                    }),
                    xrceth,
                    ..Ext::default()
                };
                let _ = path.send(counters, sport, &bth, &ext, 0, |_| true);
                // CAST: 28.
                headers::AtomicEth::LEN as u32
            }
            SendOp::RdmaRead => {
                let ext = Ext {
                    reth: Some(Reth {
                        va: w.remote_addr.wrapping_add(u64::from(seg.offset)),
                        rkey: w.rkey,
                        dma_len: seg.len,
                    }),
                    xrceth,
                    ..Ext::default()
                };
                let _ = path.send(counters, sport, &bth, &ext, 0, |_| true);
                // CAST: 16.
                Reth::LEN as u32
            }
            _ => {
                let pos = seg.position();
                bth.pad = headers::pad_len(seg.len as usize);
                if pos.ends_message() {
                    bth.se = w.send_flags & send_flags::SOLICITED != 0;
                }
                let opcode = seg.opcode;
                let ext = Ext {
                    reth: (matches!(
                        opcode.operation(),
                        Operation::RdmaWrite | Operation::AtomicWrite
                    ) && pos.starts_message())
                    .then_some(Reth {
                        va: w.remote_addr,
                        rkey: w.rkey,
                        dma_len: seg.msg_len,
                    }),
                    immdt: opcode
                        .has_immediate()
                        .then_some(ImmDt(u32::from_be(w.imm_data))),
                    ieth: opcode
                        .has_invalidate()
                        .then_some(headers::Ieth { rkey: w.imm_data }),
                    xrceth,
                    ..Ext::default()
                };
                let mut err = None;
                let qp = self.qp;
                let _ = path.send(counters, sport, &bth, &ext, seg.len as usize, |buf| {
                    let got = if value_in_wqe(&w) {
                        buf.get_mut(..8)
                            .map(|b| b.copy_from_slice(&w.compare_add.to_ne_bytes()))
                            .ok_or(ScatterError::Failed(WcStatus::LocLenErr))
                    } else {
                        gather(qp, seg.wqe, &w, seg.offset, buf)
                    };
                    match got {
                        Ok(()) => true,
                        Err(e) => {
                            err = Some(e);
                            false
                        }
                    }
                });
                if let Some(e) = err {
                    return Err(e);
                }
                seg.len
            }
        };
        self.cc.sent(carried);
        Ok(())
    }

    fn datagram(
        &mut self,
        idx: u32,
        op: SendOp,
        psn: Psn,
    ) -> core::result::Result<Option<u32>, ScatterError> {
        let w = self.read(idx);
        let Some(nd) = self.ndev else {
            return Ok(None);
        };
        let sent = if self.qp.data().qp_type == QpType::RawPacket {
            send_raw(self.qp, idx, &w, nd)
        } else {
            send_ud(self, idx, &w, op, psn, nd)
        };
        sent.map(Some)
    }

    fn hold_datagram(&mut self, idx: u32) -> u32 {
        // No destination slowed down (and every raw packet QP): no lookup.
        if !self.cc.any_dest_limited() {
            return 0;
        }
        let w = self.read(idx);
        let qp = self.qp;
        let table = &qp.device().data().ah_table;
        match crate::tx::ah_with(table, w.ah_num, qp.pd_id(), qp.is_user(), |a| a.dgid) {
            Some(dgid) => self.cc.pace_to(&dgid),
            // Sending fails it.
            None => 0,
        }
    }

    fn scatter(
        &mut self,
        idx: u32,
        off: u32,
        data: &[u8],
    ) -> core::result::Result<(), ScatterError> {
        let w = self.read(idx);
        scatter_read(self.qp, idx, &w, off, data)
    }

    fn hold(&mut self) -> u32 {
        self.cc.pace()
    }

    fn event(&mut self, e: Event) {
        self.count(match e {
            Event::Timeout => Count::ReqTimeout,
            Event::RetryExceeded => Count::ReqRetryExceeded,
            Event::NakSeq => Count::ReqNakSeq,
            Event::RnrNak => Count::ReqRnrNak,
            Event::RnrRetryExceeded => Count::ReqRnrRetryExceeded,
            Event::ResponseGap => Count::ReqResponseGap,
            Event::FaultWait => Count::ReqOdpWait,
            Event::CreditOverdraft => Count::ReadCreditOverdraft,
        });
    }

    fn complete(&mut self, c: &Completion) {
        let w = self.read(c.wqe);
        let (qp, this) = (self.qp, self.qp.data());
        if c.status != WcStatus::Success || this.sig_all || w.send_flags & send_flags::SIGNALED != 0
        {
            if let Some(scq) = qp.send_cq() {
                let _ = cq::push(scq, send_cqe(qp, &w, c), false);
            }
        }
        this.sq.set_consumer(c.wqe.wrapping_add(1));
    }

    fn fatal(&mut self, from: u32) -> u32 {
        // The flush itself waits for the machine to return (`with_req`);
        // it takes the queue up to the producer, if that index is sane.
        let to = super::sq_end(self.qp.data(), from);
        self.fatal = Some((from, to));
        to
    }

    fn arm_timer(&mut self, ms: u32) {
        self.qp.arm_timer(ms);
    }

    fn take_credits(&mut self, n: u32) -> bool {
        self.qp.device().data().read_credits.take(n)
    }

    fn overdraw_credits(&mut self, n: u32) -> bool {
        self.qp.device().data().read_credits.overdraw(n)
    }

    fn give_back_credits(&mut self, n: u32) {
        self.qp.device().data().read_credits.give_back(n);
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
) -> core::result::Result<u32, ScatterError> {
    const ETH_HLEN: u32 = 14;
    const VLAN_HLEN: u32 = 4;
    let len = msg_len(qp.data(), idx, w).map_err(ScatterError::Failed)?;
    let max = ndev.mtu() + ETH_HLEN;
    if len < ETH_HLEN || len > max + VLAN_HLEN {
        return Err(ScatterError::Failed(WcStatus::LocLenErr));
    }
    let counters = &qp.device().data().counters;
    let Ok(mut frame) = KVec::from_elem(0u8, len as usize, GFP_ATOMIC) else {
        counters.event(crate::counters::Event::TxErr);
        return Ok(len);
    };
    gather(qp, idx, w, 0, &mut frame)?;
    // The room for a VLAN tag is only for a frame that carries one.
    if len > max && frame.get(12..14) != Some(&[0x81, 0x00][..]) {
        return Err(ScatterError::Failed(WcStatus::LocLenErr));
    }
    if crate::raw::xmit(qp.device(), ndev, &frame).is_err() {
        counters.event(crate::counters::Event::TxErr);
    }
    Ok(len)
}

/// Sends a UD QP's WQE `idx` as one datagram with PSN `psn`, to the
/// address its AH names. A datagram with no route is lost, as on a wire.
fn send_ud(
    io: &mut SendIo<'_>,
    idx: u32,
    w: &SendWqe,
    op: SendOp,
    psn: Psn,
    ndev: &NetDevice,
) -> core::result::Result<u32, ScatterError> {
    let (qp, attr) = (io.qp, io.attr);
    let fail = ScatterError::Failed;
    let dev = qp.device();
    let len = msg_len(qp.data(), idx, w).map_err(fail)?;
    // Only an AH of the QP's own PD (and user space's own, for a user QP).
    let ah = crate::tx::ah_with(
        &dev.data().ah_table,
        w.ah_num,
        qp.pd_id(),
        qp.is_user(),
        |a| (a.sgid, a.dgid, a.traffic_class, a.hop_limit, a.flow_label),
    )
    .ok_or(fail(WcStatus::LocQpOpErr))?;
    let Ok(path) = Path::resolve(ndev, ah.0, ah.1, ah.2, ah.3, ah.4) else {
        return Ok(len);
    };
    if len > path.mtu() {
        return Err(fail(WcStatus::LocLenErr));
    }
    let opcode =
        seg::request_opcode(Wire::Ud, op, Position::Only).ok_or(fail(WcStatus::LocQpOpErr))?;
    let qkey = if w.remote_qkey & QKEY_FROM_QP != 0 {
        attr.qkey
    } else {
        w.remote_qkey
    };
    let mut bth = Bth::new(opcode, DEFAULT_PKEY, w.remote_qpn & headers::QPN_MASK, psn);
    bth.se = w.send_flags & send_flags::SOLICITED != 0;
    bth.pad = headers::pad_len(len as usize);
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
        &dev.data().counters,
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
        // Not sent: it goes with this PSN once its data is in.
        Some(e) => Err(e),
        None => {
            // A group sends no CNP back: no rate to keep for it.
            if !crate::proto::ip::is_multicast(&ah.1) {
                io.cc.sent_to(&ah.1, len);
            }
            Ok(len)
        }
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

/// Writes a read response's payload (or an atomic's original value) into
/// the local SGEs of WQE `idx`, from message offset `off`.
fn scatter_read(
    qp: &Qp<Roxe>,
    idx: u32,
    w: &SendWqe,
    off: u32,
    data: &[u8],
) -> core::result::Result<(), ScatterError> {
    let (dev, pd) = (qp.device().data(), qp.pd_id());
    for_pieces(
        send_sges(qp.data(), idx, w),
        u64::from(off),
        data.len(),
        |va, lkey, r| {
            let src = &data[r];
            // CAST: a piece is at most an SGE length.
            keys::with_key(&dev.mr_table, lkey, pd, |m| {
                m.write(
                    m.check(va, src.len() as u32, crate::proto::access::LOCAL_WRITE)?,
                    src,
                )
            })
        },
    )
}
