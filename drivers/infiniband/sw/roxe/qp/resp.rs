// SPDX-License-Identifier: GPL-2.0

//! The responder: request packets (SEND, RDMA WRITE, RDMA READ, atomics,
//! Atomic Write, FLUSH, UD datagrams) to memory, receive completions,
//! ACKs, NAKs and read responses. It runs from the UDP receive hook
//! (softirq) under the QP's state lock. Its state is [`RespState`].

use super::req::RESPONSE_BURST;
use super::QpState;
use crate::counters::{Drop, Event};
use crate::cq;
use crate::device::Roxe;
use crate::keys::{self, KeyError};
use crate::limits::MAX_QP_RD_ATOM;
use crate::limits::PORT;
use crate::proto::access::{
    FLUSH_GLOBAL, FLUSH_PERSISTENT, REMOTE_ATOMIC, REMOTE_READ, REMOTE_WRITE,
};
use crate::proto::aeth::{NakCode, Syndrome};
use crate::proto::headers::{self, Aeth, Bth, Ext, Packet, DEFAULT_PKEY};
use crate::proto::ip;
use crate::proto::mtu::IbMtu;
use crate::proto::opcode::{Opcode, Operation, Position};
use crate::proto::psn::Psn;
use crate::proto::qp::State;
use crate::proto::recent::Recent;
use crate::proto::resp::ReadResources;
use crate::proto::resp::{self, ReadRequest};
use crate::proto::seg;
use crate::proto::udp;
use crate::proto::wr::{WcOp, WcStatus};
use crate::rdma::qp::{Qp, QpType};
use crate::uapi::{flush as flush_wqe, wc_flags, Cqe};
use crate::wqe::{take_recv, RecvCopy, MAX_MSG};
use kernel::alloc::flags::GFP_KERNEL_ACCOUNT;
use kernel::prelude::*;

/// How many atomic results the responder keeps for replay: as many as a
/// requester may have in flight (`max_dest_rd_atomic` is at most this), so
/// the duplicate of any atomic still unanswered finds its result. With
/// fewer, a requester with more atomics in flight than that, on a lossy
/// link, resent ones whose results were gone and ran out of retries
/// (`rust/proto` `many_atomics_in_flight`).
const ATOMIC_REPLAY: usize = MAX_QP_RD_ATOM as usize;

/// The atomics the responder executed, the newest `ATOMIC_REPLAY`.
type AtomicReplay = Recent<AtomicDone, ATOMIC_REPLAY>;

/// A SEND (or the last packet of an RDMA WRITE with immediate) being
/// received: its receive WQE and how many bytes of the message it holds.
pub(crate) struct RecvProgress {
    pub(crate) wqe: RecvCopy,
    /// At most `wqe::MAX_MSG`.
    pub(crate) off: u64,
}

/// An RDMA WRITE being received.
pub(crate) struct WriteProgress {
    pub(crate) rkey: u32,
    pub(crate) va: u64,
    pub(crate) len: u32,
    pub(crate) off: u32,
}

/// An atomic the responder executed: what a duplicate must ask again,
/// and the answer it gets.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct AtomicDone {
    /// The request's PSN.
    pub(crate) psn: Psn,
    pub(crate) rkey: u32,
    pub(crate) va: u64,
    /// The value the target held before.
    pub(crate) orig: u64,
}

impl AtomicDone {
    /// What unused slots hold; never read.
    const UNUSED: Self = Self {
        psn: Psn::ZERO,
        rkey: 0,
        va: 0,
        orig: 0,
    };
}

/// The responder's memory of the reads it served.
pub(crate) type Reads = ReadResources<{ MAX_QP_RD_ATOM as usize }>;

/// An empty [`Reads`] on the heap, charged to the caller's memory cgroup.
/// Not inlined, so its stack temporary lives only in its own frame. The
/// empty value is a `const`: built at run time (`ReadResources::new()`),
/// its array and then the struct each took a temporary, twice the stack
/// (6 KiB for [`new_atomic_replay`], which overflowed the stack of QP1's
/// create deep in `rdma link add`).
#[inline(never)]
fn new_reads() -> Result<KBox<Reads>> {
    const EMPTY: Reads = ReadResources::new();
    Ok(KBox::new(EMPTY, GFP_KERNEL_ACCOUNT)?)
}

/// An empty [`AtomicReplay`] on the heap (3 KiB), as [`new_reads`].
#[inline(never)]
fn new_atomic_replay() -> Result<KBox<AtomicReplay>> {
    const EMPTY: AtomicReplay = Recent::new(AtomicDone::UNUSED);
    Ok(KBox::new(EMPTY, GFP_KERNEL_ACCOUNT)?)
}

/// The responder's state: the expected PSN, the message in progress, and
/// what it remembers to answer duplicates.
pub(crate) struct RespState {
    /// The expected PSN.
    pub(crate) epsn: Psn,
    /// The message sequence number.
    pub(crate) msn: u32,
    /// Recent atomics, to answer duplicates without executing
    /// them again.
    /// (On the heap, as `reads` is.)
    atomic_replay: KBox<AtomicReplay>,
    /// A PSN sequence NAK was sent and not yet resolved.
    nak_sent: bool,
    /// The message in progress that holds a receive WQE.
    pub(crate) recv: Option<RecvProgress>,
    /// A receive WQE taken from the RQ or SRQ whose UC message
    /// was lost (a gap, a packet that broke the rules). It is still the
    /// oldest receive: the next message takes it before the queue's, and a
    /// flush completes it first. At most one of `recv` and `recv_spare`
    /// holds a WQE.
    pub(crate) recv_spare: Option<RecvCopy>,
    wctx: Option<WriteProgress>,
    /// The RDMA READ requests served, the newest
    /// `max_dest_rd_atomic` of them; only these are answered again as
    /// duplicates.
    /// (3 KiB, so on the heap: the QP's state is built on the stack of
    /// `create`, which for QP1 runs deep in `rdma link add`.)
    reads: KBox<Reads>,
}

impl RespState {
    pub(crate) fn new() -> Result<Self> {
        Ok(Self {
            epsn: Psn::ZERO,
            msn: 0,
            atomic_replay: new_atomic_replay()?,
            nak_sent: false,
            recv: None,
            recv_spare: None,
            wctx: None,
            reads: new_reads()?,
        })
    }

    /// Forgets the message in progress and the requests served.
    pub(crate) fn reset(&mut self) {
        self.recv = None;
        self.recv_spare = None;
        self.wctx = None;
        self.nak_sent = false;
        self.reads.clear();
        self.atomic_replay.clear();
    }
}

/// Takes the next receive WQE: the one a lost UC message left
/// (`QpState::recv_spare`), or else the next from the QP's RQ or SRQ.
fn pop_recv(qp: &Qp<Roxe>, st: &mut QpState) -> Option<RecvCopy> {
    if let Some(r) = st.resp.recv_spare.take() {
        return Some(r);
    }
    let this = qp.data();
    match (&this.rq, qp.srq()) {
        (Some(rq), _) => take_recv(rq, &mut st.rq_consumer).ok().flatten(),
        (None, Some(srq)) => crate::srq::pop(srq),
        (None, None) => None,
    }
}

fn recv_cqe(qp: &Qp<Roxe>, wr_id: u64, op: WcOp, status: WcStatus, byte_len: u32) -> Cqe {
    Cqe {
        wr_id,
        status: status as u32,
        opcode: op as u32,
        byte_len,
        qp_num: qp.qp_num(),
        port_num: PORT as u8,
        ..Cqe::default()
    }
}

fn push_recv(qp: &Qp<Roxe>, cqe: Cqe, solicited: bool) {
    if let Some(rcq) = qp.recv_cq() {
        let _ = cq::push(rcq, cqe, solicited);
    }
}

pub(crate) fn recv_ud(
    qp: &Qp<Roxe>,
    st: &mut QpState,
    pkt: &Packet<'_>,
    ip: &[u8],
) -> core::result::Result<(), Drop> {
    let deth = pkt.ext.deth.ok_or(Drop::Transport)?;
    // QP1 takes any Q_Key's datagrams only with the GSI Q_Key.
    if deth.qkey != st.attr.qkey {
        return Err(Drop::Qkey);
    }
    let grh = match ip.first().map(|b| b >> 4) {
        Some(4) => ip::grh_from_ipv4(ip),
        Some(6) => ip::grh_from_ipv6(ip),
        _ => None,
    }
    .ok_or(Drop::Transport)?;
    // A datagram is one packet of at most the port's MTU; a longer one is
    // dropped before it takes a receive.
    let mtu = st
        .ndev
        .as_ref()
        .and_then(|nd| IbMtu::for_netdev_mtu(nd.mtu()));
    let mtu = mtu.unwrap_or(IbMtu::Mtu256);
    if pkt.payload.len() > mtu.bytes() as usize {
        return Err(Drop::Length);
    }
    let r = pop_recv(qp, st).ok_or(Drop::NoRecv)?;
    let pd = qp.pd_id();
    let dev = qp.device();
    // CAST: a UD payload is at most one MTU.
    let byte_len = (grh.len() + pkt.payload.len()) as u32;
    let res = if u64::from(byte_len) > r.total() {
        Err(WcStatus::LocLenErr)
    } else {
        r.scatter(dev, pd, 0, &grh)
            .and_then(|()| r.scatter(dev, pd, grh.len() as u64, pkt.payload))
    };
    let mut cqe = recv_cqe(
        qp,
        r.wr_id(),
        WcOp::Recv,
        res.err().unwrap_or(WcStatus::Success),
        byte_len,
    );
    cqe.src_qp = deth.src_qpn;
    cqe.wc_flags = wc_flags::GRH;
    // `enum rdma_network_type`: kernel consumers parse the GRH by it.
    cqe.network_hdr_type = if ip.first().map(|b| b >> 4) == Some(6) {
        3
    } else {
        2
    };
    if let Some(imm) = pkt.ext.immdt {
        cqe.wc_flags |= wc_flags::WITH_IMM;
        cqe.imm_data = imm.0.to_be();
    }
    push_recv(qp, cqe, pkt.bth.se);
    Ok(())
}

/// Sends an ACK or NAK for `psn`.
fn send_ack(qp: &Qp<Roxe>, st: &QpState, psn: Psn, syndrome: Syndrome) {
    send_bare(
        qp,
        st,
        Opcode::RcAcknowledge,
        psn,
        syndrome,
        st.resp.msn,
        None,
    );
}

/// Sends a response that carries no payload: an ACKNOWLEDGE, an ATOMIC
/// ACKNOWLEDGE (with `orig`, the value the target held) or an empty RDMA
/// READ RESPONSE ONLY, with AETH `syndrome` and `msn`.
fn send_bare(
    qp: &Qp<Roxe>,
    st: &QpState,
    opcode: Opcode,
    psn: Psn,
    syndrome: Syndrome,
    msn: u32,
    orig: Option<u64>,
) {
    let Some(path) = st.path.as_ref() else { return };
    let bth = Bth::new(opcode, DEFAULT_PKEY, st.attr.dest_qp_num, psn);
    let ext = Ext {
        aeth: Some(Aeth {
            syndrome: syndrome.to_u8(),
            msn,
        }),
        atomic_ack_eth: orig.map(|orig| headers::AtomicAckEth { orig }),
        ..Ext::default()
    };
    let _ = path.send(
        udp::source_port(qp.qp_num(), st.attr.dest_qp_num),
        &bth,
        &ext,
        0,
        |_| true,
    );
}

pub(crate) fn respond(
    qp: &Qp<Roxe>,
    st: &mut QpState,
    pkt: &Packet<'_>,
) -> core::result::Result<(), Drop> {
    let rc = qp.data().qp_type == QpType::Rc;
    let psn = pkt.bth.psn;
    let pos = pkt.opcode.position();
    if psn != st.resp.epsn {
        if !rc {
            // UC: a gap loses the message in progress; a new one may start.
            drop_message(st);
            if !pos.starts_message() {
                st.resp.epsn = psn.next();
                return Err(Drop::Psn);
            }
        } else if psn.diff(st.resp.epsn) < 0 {
            // A duplicate: answer it again (reads are re-executed, which
            // only reads memory, and only for a request served before;
            // atomics are replayed, never redone).
            if pkt.opcode == Opcode::RcRdmaReadRequest {
                return replay_read(qp, st, pkt);
            } else if matches!(
                pkt.opcode.operation(),
                Operation::CompareSwap | Operation::FetchAdd
            ) {
                return replay_atomic(qp, st, pkt);
            } else if matches!(
                pkt.opcode.operation(),
                Operation::AtomicWrite | Operation::Flush
            ) {
                // Answered again, not written again (a flush again would
                // change nothing), and only if one was executed at this
                // PSN: its answer would otherwise stand in for any read
                // response the requester still waits for there.
                if st
                    .resp
                    .reads
                    .find(&answered_empty(psn), st.path_mtu())
                    .is_none()
                {
                    return Err(Drop::Duplicate);
                }
                send_read_ack(qp, st, psn, st.resp.msn);
            } else {
                send_ack(qp, st, st.resp.epsn.wrapping_sub(1), Syndrome::ACK);
            }
            return Err(Drop::Psn);
        } else {
            if !st.resp.nak_sent {
                st.resp.nak_sent = true;
                qp.device().data().counters.event(Event::RespNakSeq);
                send_ack(
                    qp,
                    st,
                    st.resp.epsn,
                    Syndrome::Nak(NakCode::PsnSequenceError),
                );
            }
            return Err(Drop::Psn);
        }
    }
    st.resp.nak_sent = false;
    let op = pkt.opcode.operation();
    // The opcode sequence: a message continues the one in progress, and
    // only a first or only packet starts one.
    let continues = match op {
        Operation::Send => st.resp.recv.is_some(),
        Operation::RdmaWrite => st.resp.wctx.is_some(),
        _ => false,
    };
    let busy = st.resp.recv.is_some() || st.resp.wctx.is_some();
    if continues == pos.starts_message() || (pos.starts_message() && busy) {
        if rc {
            return Err(refuse(qp, st, psn, Nak::Invalid));
        }
        // UC: the message in progress is lost (its last packet never came);
        // a packet that continues none belongs to a message lost before.
        drop_message(st);
        if !pos.starts_message() {
            st.resp.epsn = psn.next();
            return Err(Drop::Psn);
        }
    }
    if matches!(op, Operation::Send | Operation::RdmaWrite)
        && !resp::payload_len_ok(pos, pkt.payload.len(), st.path_mtu())
    {
        // Checked before anything is taken or written: a packet of the
        // wrong size is an invalid request.
        return Err(refuse(qp, st, psn, Nak::Length));
    }
    let access = st.attr.access_flags;
    // Reads and atomics take a responder resource; a QP that has none
    // (`max_dest_rd_atomic` 0) takes none of them: an invalid request, as
    // rxe answers it.
    let needs_resource = matches!(
        op,
        Operation::RdmaReadRequest
            | Operation::CompareSwap
            | Operation::FetchAdd
            | Operation::AtomicWrite
            | Operation::Flush
    );
    let result = match op {
        _ if rc && needs_resource && st.attr.max_dest_rd_atomic == 0 => Err(Nak::Invalid),
        Operation::Send => recv_send(qp, st, pkt),
        Operation::RdmaWrite => recv_write(qp, st, pkt, access),
        Operation::CompareSwap | Operation::FetchAdd if rc => {
            if access & REMOTE_ATOMIC == 0 {
                Err(Nak::Access)
            } else {
                atomic(qp, st, pkt)
            }
        }
        Operation::AtomicWrite if rc => {
            if access & REMOTE_WRITE == 0 {
                Err(Nak::Access)
            } else {
                atomic_write(qp, st, pkt)
            }
        }
        // As with rxe, the QP must allow the placement type too.
        Operation::Flush if rc => flush(qp, st, pkt, access),
        Operation::RdmaReadRequest if rc => {
            if access & REMOTE_READ == 0 {
                Err(Nak::Access)
            } else {
                return read_response(qp, st, pkt).map_err(|n| refuse(qp, st, psn, n));
            }
        }
        _ => Err(Nak::Invalid),
    };
    match result {
        Ok(()) => {
            st.resp.epsn = psn.next();
            if pos.ends_message() {
                st.resp.msn = (st.resp.msn + 1) & 0x00ff_ffff;
            }
            let is_atomic = matches!(
                op,
                Operation::CompareSwap
                    | Operation::FetchAdd
                    | Operation::AtomicWrite
                    | Operation::Flush
            );
            if rc && pkt.bth.ack_req && !is_atomic {
                send_ack(qp, st, psn, Syndrome::ACK);
            }
            Ok(())
        }
        Err(Nak::Rnr) => {
            if let (true, Some(t)) = (
                rc,
                crate::proto::aeth::RnrTimer::from_code(st.attr.min_rnr_timer),
            ) {
                qp.device().data().counters.event(Event::RespRnrNak);
                send_ack(qp, st, psn, Syndrome::RnrNak(t));
            }
            Err(Drop::NoRecv)
        }
        Err(n) => Err(refuse(qp, st, psn, n)),
    }
}

/// Why the responder refuses a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Nak {
    /// No receive WQE: RNR NAK.
    Rnr,
    /// Invalid request (bad opcode sequence, an operation the QP does not
    /// take).
    Invalid,
    /// Invalid request: a length that breaks the rules of
    /// [`resp::payload_len_ok`] or [`resp::write_place`], a DMA length
    /// over [`resp::MAX_DMA_LEN`], or a SEND longer than its receive
    /// buffer. Counted apart from the others.
    Length,
    /// Remote access error (key, rights, bounds).
    Access,
    /// Remote operational error (the local write failed).
    Operational,
}

/// UC: the message in progress is lost. Its receive WQE, if it took one,
/// takes the next message, as if it had never been taken (IBTA's class D:
/// the WQE is not completed).
fn drop_message(st: &mut QpState) {
    if let Some(p) = st.resp.recv.take() {
        st.resp.recv_spare = Some(p.wqe);
    }
    st.resp.wctx = None;
}

/// Refuses the request at `psn` for reason `n` (not [`Nak::Rnr`]) and
/// returns the drop it counts as.
///
/// RC (IBTA's class A and C errors, as rxe): NAKs it, completes the
/// receive WQE of the message in progress with the matching error, and
/// moves the QP to ERR, which flushes every other receive (and the send
/// queue) with `IB_WC_WR_FLUSH_ERR`. UC sends nothing back: the message is
/// lost and its receive WQE takes the next one ([`drop_message`]).
fn refuse(qp: &Qp<Roxe>, st: &mut QpState, psn: Psn, n: Nak) -> Drop {
    let (code, status) = match n {
        Nak::Invalid | Nak::Length | Nak::Rnr => (NakCode::InvalidRequest, WcStatus::RemInvReqErr),
        Nak::Access => (NakCode::RemoteAccessError, WcStatus::RemAccessErr),
        Nak::Operational => (NakCode::RemoteOperationalError, WcStatus::RemOpErr),
    };
    let drop = match n {
        Nak::Length => Drop::Length,
        Nak::Invalid => Drop::Invalid,
        Nak::Rnr => Drop::NoRecv,
        Nak::Access | Nak::Operational => Drop::Key,
    };
    if qp.data().qp_type != QpType::Rc {
        drop_message(st);
        return drop;
    }
    send_ack(qp, st, psn, Syndrome::Nak(code));
    if let Some(p) = st.resp.recv.take() {
        let mut cqe = recv_cqe(qp, p.wqe.wr_id(), WcOp::Recv, status, 0);
        cqe.src_qp = st.attr.dest_qp_num;
        push_recv(qp, cqe, true);
    }
    st.resp.wctx = None;
    st.attr.state = State::Err;
    super::flush_all(qp, st);
    drop
}

/// A SEND packet: the payload goes to the receive WQE the first packet took.
///
/// A receive buffer that cannot take the payload (too short, a bad lkey)
/// completes its WQE at once with the local error, and the request is
/// refused (a length error is an invalid request, as in rxe); so is a
/// message that would pass [`MAX_MSG`] bytes.
fn recv_send(qp: &Qp<Roxe>, st: &mut QpState, pkt: &Packet<'_>) -> core::result::Result<(), Nak> {
    let pos = pkt.opcode.position();
    if pos.starts_message() {
        let r = pop_recv(qp, st).ok_or(Nak::Rnr)?;
        st.resp.recv = Some(RecvProgress { wqe: r, off: 0 });
    }
    let dev = qp.device();
    let pd = qp.pd_id();
    let Some(p) = st.resp.recv.as_mut() else {
        return Err(Nak::Invalid);
    };
    let end = p
        .off
        .checked_add(pkt.payload.len() as u64)
        .filter(|e| *e <= MAX_MSG);
    let placed = match end {
        Some(_) => p.wqe.scatter(dev, pd, p.off, pkt.payload),
        None => Err(WcStatus::LocLenErr),
    };
    if let Err(status) = placed {
        let Some(p) = st.resp.recv.take() else {
            return Err(Nak::Invalid);
        };
        // CAST: `off` is at most MAX_MSG (2^31).
        let mut cqe = recv_cqe(qp, p.wqe.wr_id(), WcOp::Recv, status, p.off as u32);
        cqe.src_qp = st.attr.dest_qp_num;
        push_recv(qp, cqe, true);
        return Err(if status == WcStatus::LocLenErr {
            Nak::Length
        } else {
            Nak::Operational
        });
    }
    p.off = end.unwrap_or(p.off);
    if !pos.ends_message() {
        return Ok(());
    }
    let Some(p) = st.resp.recv.take() else {
        return Err(Nak::Invalid);
    };
    // CAST: at most MAX_MSG (2^31).
    let mut cqe = recv_cqe(
        qp,
        p.wqe.wr_id(),
        WcOp::Recv,
        WcStatus::Success,
        p.off as u32,
    );
    cqe.src_qp = st.attr.dest_qp_num;
    if let Some(imm) = pkt.ext.immdt {
        cqe.wc_flags |= wc_flags::WITH_IMM;
        cqe.imm_data = imm.0.to_be();
    }
    let mut status = WcStatus::Success;
    if let Some(ieth) = pkt.ext.ieth {
        // Send with Invalidate: the key goes once the data is in.
        if keys::invalidate(&dev.data().mr_table, pd, Some(qp.qp_num()), ieth.rkey).is_ok() {
            cqe.wc_flags |= wc_flags::WITH_INV;
            cqe.imm_data = ieth.rkey;
        } else {
            status = WcStatus::RemInvReqErr;
            cqe.status = status as u32;
        }
    }
    push_recv(qp, cqe, pkt.bth.se);
    match status {
        WcStatus::Success => Ok(()),
        _ => Err(Nak::Operational),
    }
}

/// Runs `f(mr, offset)` over `len` bytes at `va` through remote key `rkey`,
/// asked for by `qp` (its PD, and its QPN for a type 2 window), if the key
/// grants `need`.
fn with_remote<R>(
    qp: &Qp<Roxe>,
    rkey: u32,
    va: u64,
    len: u32,
    need: u32,
    f: impl FnOnce(&keys::MrData, usize) -> core::result::Result<R, KeyError>,
) -> core::result::Result<R, KeyError> {
    let asker = keys::Asker {
        pd: qp.pd_id(),
        qpn: qp.qp_num(),
    };
    keys::with_rkey(&qp.device().data().mr_table, asker, rkey, va, len, need, f)
}

/// Whether remote key `rkey` grants `qp` the right `need` over `len` bytes
/// at `va`.
fn check_remote(
    qp: &Qp<Roxe>,
    rkey: u32,
    va: u64,
    len: u32,
    need: u32,
) -> core::result::Result<(), KeyError> {
    with_remote(qp, rkey, va, len, need, |_, _| Ok(()))
}

/// An RDMA WRITE packet: the first names the target, each writes its part.
fn recv_write(
    qp: &Qp<Roxe>,
    st: &mut QpState,
    pkt: &Packet<'_>,
    access: u32,
) -> core::result::Result<(), Nak> {
    let pos = pkt.opcode.position();
    if pos.starts_message() {
        if st.resp.wctx.is_some() {
            return Err(Nak::Invalid);
        }
        let reth = pkt.ext.reth.ok_or(Nak::Invalid)?;
        if reth.dma_len > resp::MAX_DMA_LEN {
            return Err(Nak::Length);
        }
        if access & REMOTE_WRITE == 0 {
            return Err(Nak::Access);
        }
        if reth.dma_len != 0 {
            check_remote(qp, reth.rkey, reth.va, reth.dma_len, REMOTE_WRITE)
                .map_err(|_| Nak::Access)?;
        }
        st.resp.wctx = Some(WriteProgress {
            rkey: reth.rkey,
            va: reth.va,
            len: reth.dma_len,
            off: 0,
        });
    }
    let Some(w) = st.resp.wctx.as_mut() else {
        return Err(Nak::Invalid);
    };
    // CAST: a payload is at most one MTU (`resp::payload_len_ok`).
    let n = pkt.payload.len() as u32;
    let Some((va, end)) = resp::write_place(w.va, w.off, n, w.len, pos) else {
        st.resp.wctx = None;
        return Err(Nak::Length);
    };
    let (rkey, imm) = (w.rkey, pkt.ext.immdt.filter(|_| pos.ends_message()));
    // Write with immediate consumes a receive WQE (with no data) at its
    // last packet. It is taken before anything changes, once the key has
    // been checked, so that an RNR NAK leaves the write where it was and
    // the requester's resend of this packet is accepted. Until the write
    // is done it is the message's (`recv`), so that a failed write
    // completes it with the error (RC) or leaves it for the next message
    // (UC), as `refuse` does.
    if imm.is_some() {
        if n != 0 {
            check_remote(qp, rkey, va, n, REMOTE_WRITE).map_err(|_| Nak::Access)?;
        }
        let Some(r) = pop_recv(qp, st) else {
            // The requester sends this packet again after the RNR wait:
            // if it starts the message, it must find none in progress.
            if pos.starts_message() {
                st.resp.wctx = None;
            }
            return Err(Nak::Rnr);
        };
        st.resp.recv = Some(RecvProgress { wqe: r, off: 0 });
    }
    if n != 0 {
        with_remote(qp, rkey, va, n, REMOTE_WRITE, |m, o| {
            m.write(o, pkt.payload)
        })
        .map_err(|_: KeyError| Nak::Access)?;
    }
    let Some(w) = st.resp.wctx.as_mut() else {
        return Err(Nak::Invalid);
    };
    w.off = end;
    if !pos.ends_message() {
        return Ok(());
    }
    let Some(w) = st.resp.wctx.take() else {
        return Err(Nak::Invalid);
    };
    if let (Some(imm), Some(r)) = (imm, st.resp.recv.take()) {
        let mut cqe = recv_cqe(
            qp,
            r.wqe.wr_id(),
            WcOp::RecvRdmaImm,
            WcStatus::Success,
            w.len,
        );
        cqe.src_qp = st.attr.dest_qp_num;
        cqe.wc_flags = wc_flags::WITH_IMM;
        cqe.imm_data = imm.0.to_be();
        push_recv(qp, cqe, pkt.bth.se);
    }
    Ok(())
}

/// Sends the ATOMIC ACKNOWLEDGE for `psn` with the original value.
fn send_atomic_ack(qp: &Qp<Roxe>, st: &QpState, psn: Psn, orig: u64) {
    let (op, msn) = (Opcode::RcAtomicAcknowledge, st.resp.msn);
    send_bare(qp, st, op, psn, Syndrome::ACK, msn, Some(orig));
}

/// Executes a CmpSwap or FetchAdd on 8 aligned bytes of an MR, answers it,
/// and keeps the result to replay for a duplicate.
pub(crate) fn atomic(
    qp: &Qp<Roxe>,
    st: &mut QpState,
    pkt: &Packet<'_>,
) -> core::result::Result<(), Nak> {
    let a = pkt.ext.atomic_eth.ok_or(Nak::Invalid)?;
    if a.va % 8 != 0 {
        return Err(Nak::Invalid);
    }
    let swap = pkt.opcode.operation() == Operation::CompareSwap;
    let orig = with_remote(qp, a.rkey, a.va, 8, REMOTE_ATOMIC, |m, off| {
        m.atomic(off, |v| {
            if swap {
                if v == a.compare {
                    a.swap_add
                } else {
                    v
                }
            } else {
                v.wrapping_add(a.swap_add)
            }
        })
    })
    .map_err(|_| Nak::Access)?;
    let psn = pkt.bth.psn;
    st.resp.atomic_replay.remember(
        AtomicDone {
            psn,
            rkey: a.rkey,
            va: a.va,
            orig,
        },
        ATOMIC_REPLAY,
    );
    // The ACK carries the MSN of this message.
    st.resp.msn = (st.resp.msn + 1) & 0x00ff_ffff;
    send_atomic_ack(qp, st, psn, orig);
    st.resp.msn = (st.resp.msn + 0x00ff_ffff) & 0x00ff_ffff;
    Ok(())
}

/// Answers a duplicate CmpSwap or FetchAdd with the value its original
/// found, without executing it again: only if an atomic was executed at
/// its PSN with the same rkey and address, and the QP and the key still
/// grant remote atomics there, as they did for the original.
fn replay_atomic(
    qp: &Qp<Roxe>,
    st: &mut QpState,
    pkt: &Packet<'_>,
) -> core::result::Result<(), Drop> {
    let a = pkt.ext.atomic_eth.ok_or(Drop::Duplicate)?;
    let psn = pkt.bth.psn;
    let done = st
        .resp
        .atomic_replay
        .find(|d| d.psn == psn && d.rkey == a.rkey && d.va == a.va);
    let Some(AtomicDone { orig, .. }) = done else {
        return Err(Drop::Duplicate);
    };
    if st.attr.access_flags & REMOTE_ATOMIC == 0 {
        return Err(Drop::Duplicate);
    }
    if check_remote(qp, a.rkey, a.va, 8, REMOTE_ATOMIC).is_err() {
        return Err(Drop::Duplicate);
    }
    send_atomic_ack(qp, st, psn, orig);
    Err(Drop::Psn)
}

/// What the responder remembers of an Atomic Write or FLUSH it executed at
/// `psn`, among its read requests: an empty read, whose answer is the same
/// empty RDMA READ RESPONSE ONLY that a duplicate of it gets.
fn answered_empty(psn: Psn) -> ReadRequest {
    ReadRequest {
        va: 0,
        psn,
        rkey: 0,
        len: 0,
    }
}

/// Sends the empty RDMA READ RESPONSE ONLY that acknowledges an Atomic
/// Write at `psn`, with MSN `msn`.
fn send_read_ack(qp: &Qp<Roxe>, st: &QpState, psn: Psn, msn: u32) {
    let op = Opcode::RcRdmaReadResponseOnly;
    send_bare(qp, st, op, psn, Syndrome::ACK, msn, None);
}

/// Executes an Atomic Write: 8 bytes to an aligned address, in one store
/// under the key-table lock, so no reader or remote atomic sees half of it.
pub(crate) fn atomic_write(
    qp: &Qp<Roxe>,
    st: &mut QpState,
    pkt: &Packet<'_>,
) -> core::result::Result<(), Nak> {
    let reth = pkt.ext.reth.ok_or(Nak::Invalid)?;
    if reth.dma_len != 8 || pkt.payload.len() != 8 || reth.va % 8 != 0 {
        return Err(Nak::Invalid);
    }
    with_remote(qp, reth.rkey, reth.va, 8, REMOTE_WRITE, |m, o| {
        m.write(o, pkt.payload)
    })
    .map_err(|_| Nak::Access)?;
    // The response carries the MSN of this message.
    send_read_ack(qp, st, pkt.bth.psn, (st.resp.msn + 1) & 0x00ff_ffff);
    st.resp.reads.remember(
        answered_empty(pkt.bth.psn),
        usize::from(st.attr.max_dest_rd_atomic),
    );
    Ok(())
}

/// Executes a FLUSH. Every write before it has already been copied into
/// memory by this same receive path, so making them globally visible
/// takes only a full fence. The QP must allow the placement type (an
/// invalid-request NAK otherwise), and the key must grant the matching
/// flush right (for the range, or with the MR selectivity level for the
/// whole MR; a remote access NAK otherwise). The answer is an empty read
/// response, as for Atomic Write.
pub(crate) fn flush(
    qp: &Qp<Roxe>,
    st: &mut QpState,
    pkt: &Packet<'_>,
    qp_access: u32,
) -> core::result::Result<(), Nak> {
    let feth = pkt.ext.feth.ok_or(Nak::Invalid)?;
    let reth = pkt.ext.reth.ok_or(Nak::Invalid)?;
    let need = match feth.placement_type {
        flush_wqe::GLOBAL => FLUSH_GLOBAL,
        flush_wqe::PERSISTENT => FLUSH_PERSISTENT,
        _ => return Err(Nak::Invalid),
    };
    if qp_access & need == 0 {
        return Err(Nak::Invalid);
    }
    let (dev, pd) = (qp.device().data(), qp.pd_id());
    if feth.selectivity > flush_wqe::MR {
        return Err(Nak::Invalid);
    }
    let checked = if feth.selectivity == flush_wqe::MR {
        keys::check_whole(&dev.mr_table, reth.rkey, pd, need)
    } else {
        check_remote(qp, reth.rkey, reth.va, reth.dma_len, need)
    };
    checked.map_err(|_| Nak::Access)?;
    core::sync::atomic::fence(core::sync::atomic::Ordering::SeqCst);
    send_read_ack(qp, st, pkt.bth.psn, (st.resp.msn + 1) & 0x00ff_ffff);
    st.resp.reads.remember(
        answered_empty(pkt.bth.psn),
        usize::from(st.attr.max_dest_rd_atomic),
    );
    Ok(())
}

/// Answers an RDMA READ request with response packets.
///
/// A request at the expected PSN is remembered, so that a duplicate of it
/// can be answered again ([`replay_read`]).
fn read_response(
    qp: &Qp<Roxe>,
    st: &mut QpState,
    pkt: &Packet<'_>,
) -> core::result::Result<(), Nak> {
    let reth = pkt.ext.reth.ok_or(Nak::Invalid)?;
    if reth.dma_len > resp::MAX_DMA_LEN {
        return Err(Nak::Length);
    }
    let mtu = st.path_mtu();
    let Some(path) = st.path.as_ref() else {
        return Err(Nak::Invalid);
    };
    let n = seg::packet_count(reth.dma_len, mtu).ok_or(Nak::Invalid)?;
    if reth.dma_len != 0 {
        check_remote(qp, reth.rkey, reth.va, reth.dma_len, REMOTE_READ).map_err(|_| Nak::Access)?;
    }
    let msn = if pkt.bth.psn == st.resp.epsn {
        (st.resp.msn + 1) & 0x00ff_ffff
    } else {
        st.resp.msn
    };
    let sport = udp::source_port(qp.qp_num(), st.attr.dest_qp_num);
    // At most a burst of responses goes out per request: a requester
    // that asks for megabytes at once would otherwise get thousands of
    // packets in one burst, more than the queues on the way hold. What is
    // held back looks like loss to the requester, which asks again from
    // the first missing PSN (a duplicate, answered the same way).
    for i in 0..n.min(RESPONSE_BURST) {
        let pos = seg::position(i, n);
        let opcode = seg::read_response_opcode(pos);
        let off = i * mtu;
        // `off` is below the DMA length, or both are 0.
        let plen = reth.dma_len.saturating_sub(off).min(mtu);
        let mut bth = Bth::new(
            opcode,
            DEFAULT_PKEY,
            st.attr.dest_qp_num,
            pkt.bth.psn.wrapping_add(i),
        );
        bth.pad = headers::pad_len(plen as usize);
        let ext = Ext {
            aeth: (pos != Position::Middle).then_some(Aeth {
                syndrome: Syndrome::ACK.to_u8(),
                msn,
            }),
            ..Ext::default()
        };
        // Below the end of the range the key check passed (an empty read
        // sends one empty packet at offset 0), so this does not wrap.
        let va = reth.va.wrapping_add(u64::from(off));
        let _ = path.send(sport, &bth, &ext, plen as usize, |buf| {
            buf.is_empty()
                || with_remote(qp, reth.rkey, va, plen, REMOTE_READ, |m, o| m.read(o, buf)).is_ok()
        });
    }
    if pkt.bth.psn == st.resp.epsn {
        st.resp.epsn = pkt.bth.psn.wrapping_add(n);
        st.resp.msn = msn;
        let req = ReadRequest {
            va: reth.va,
            psn: pkt.bth.psn,
            rkey: reth.rkey,
            len: reth.dma_len,
        };
        st.resp
            .reads
            .remember(req, usize::from(st.attr.max_dest_rd_atomic));
    }
    Ok(())
}

/// Answers a duplicate RDMA READ request (its PSN is behind the expected
/// one) again, if it asks for a request this responder served and still
/// remembers, or for the tail of one ([`ReadRequest::covers`]), and if the
/// QP and the key still allow it: `read_response` checks the key and range
/// again. Anything else is dropped unanswered, as `Drop::Duplicate`; an
/// answered duplicate counts as `Drop::Psn`, as other duplicates do.
fn replay_read(
    qp: &Qp<Roxe>,
    st: &mut QpState,
    pkt: &Packet<'_>,
) -> core::result::Result<(), Drop> {
    let reth = pkt.ext.reth.ok_or(Drop::Duplicate)?;
    let dup = ReadRequest {
        va: reth.va,
        psn: pkt.bth.psn,
        rkey: reth.rkey,
        len: reth.dma_len,
    };
    if st.attr.access_flags & REMOTE_READ == 0 || st.resp.reads.find(&dup, st.path_mtu()).is_none()
    {
        return Err(Drop::Duplicate);
    }
    match read_response(qp, st, pkt) {
        Ok(()) => Err(Drop::Psn),
        Err(_) => Err(Drop::Duplicate),
    }
}
