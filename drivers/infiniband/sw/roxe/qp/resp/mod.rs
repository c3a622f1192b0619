// SPDX-License-Identifier: GPL-2.0

//! The responder: request packets (SEND, RDMA WRITE, RDMA READ, atomics,
//! Atomic Write, FLUSH, UD datagrams) to memory, receive completions,
//! ACKs, NAKs and read responses. It runs from the UDP receive hook
//! (softirq) under the QP's state lock. Its state is [`RespState`].
//!
//! This file checks each request's PSN and place in the opcode sequence,
//! sends ACKs and NAKs, and refuses what breaks the rules; the operations
//! are in `recv` (SEND, RDMA WRITE, UD), `atomic` (atomics, Atomic Write,
//! FLUSH) and `read` (RDMA READ).

mod atomic;
mod read;
mod recv;

pub(crate) use recv::recv_ud;

use self::recv::{push_recv, recv_cqe};
use super::QpState;
use crate::counters::{Drop, Event};
use crate::device::Roxe;
use crate::keys::{self, KeyError};
use crate::limits::MAX_QP_RD_ATOM;
use crate::proto::access::{REMOTE_ATOMIC, REMOTE_READ, REMOTE_WRITE};
use crate::proto::aeth::{NakCode, Syndrome};
use crate::proto::headers::{self, Aeth, Bth, Ext, Packet, DEFAULT_PKEY};
use crate::proto::opcode::{Opcode, Operation};
use crate::proto::psn::Psn;
use crate::proto::qp::State;
use crate::proto::recent::Recent;
use crate::proto::resp::{self, ReadResources};
use crate::proto::udp;
use crate::proto::wr::{WcOp, WcStatus};
use crate::rdma::qp::{Qp, QpType};
use crate::wqe::RecvCopy;
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
        &qp.device().data().counters,
        udp::source_port(qp.qp_num(), st.attr.dest_qp_num),
        &bth,
        &ext,
        0,
        |_| true,
    );
}

/// Takes one request packet of an RC or UC QP: checks its PSN and its
/// place in the opcode sequence, executes it, and answers it.
pub(crate) fn respond(
    qp: &Qp<Roxe>,
    st: &mut QpState,
    pkt: &Packet<'_>,
) -> core::result::Result<(), Drop> {
    let rc = qp.data().qp_type == QpType::Rc;
    let psn = pkt.bth.psn;
    let pos = pkt.opcode.position();
    if psn != st.resp.epsn {
        if rc && psn.diff(st.resp.epsn) < 0 {
            return duplicate(qp, st, pkt);
        } else if rc {
            out_of_sequence(qp, st);
            return Err(Drop::Psn);
        }
        // UC: a gap loses the message in progress; a new one may start.
        drop_message(st);
        if !pos.starts_message() {
            st.resp.epsn = psn.next();
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
    match execute(qp, st, pkt, rc) {
        // A read response moved the expected PSN past the whole read.
        Ok(()) if op == Operation::RdmaReadRequest => Ok(()),
        Ok(()) => {
            st.resp.epsn = psn.next();
            if pos.ends_message() {
                st.resp.msn = (st.resp.msn + 1) & 0x00ff_ffff;
            }
            // Atomics, Atomic Write and FLUSH answered themselves.
            let answered = matches!(
                op,
                Operation::CompareSwap
                    | Operation::FetchAdd
                    | Operation::AtomicWrite
                    | Operation::Flush
            );
            if rc && pkt.bth.ack_req && !answered {
                send_ack(qp, st, psn, Syndrome::ACK);
            }
            Ok(())
        }
        Err(Nak::Rnr) => {
            let timer = crate::proto::aeth::RnrTimer::from_code(st.attr.min_rnr_timer);
            if let (true, Some(t)) = (rc, timer) {
                qp.device().data().counters.event(Event::RespRnrNak);
                send_ack(qp, st, psn, Syndrome::RnrNak(t));
            }
            Err(Drop::NoRecv)
        }
        Err(n) => Err(refuse(qp, st, psn, n)),
    }
}

/// Executes a request packet at the expected PSN, in its place in the
/// opcode sequence, if the QP takes its operation.
fn execute(
    qp: &Qp<Roxe>,
    st: &mut QpState,
    pkt: &Packet<'_>,
    rc: bool,
) -> core::result::Result<(), Nak> {
    let access = st.attr.access_flags;
    let op = pkt.opcode.operation();
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
    let need = match op {
        Operation::CompareSwap | Operation::FetchAdd => REMOTE_ATOMIC,
        Operation::AtomicWrite => REMOTE_WRITE,
        Operation::RdmaReadRequest => REMOTE_READ,
        _ => 0,
    };
    match op {
        _ if rc && needs_resource && st.attr.max_dest_rd_atomic == 0 => Err(Nak::Invalid),
        _ if rc && access & need != need => Err(Nak::Access),
        Operation::Send => recv::recv_send(qp, st, pkt),
        Operation::RdmaWrite => recv::recv_write(qp, st, pkt, access),
        Operation::CompareSwap | Operation::FetchAdd if rc => atomic::atomic(qp, st, pkt),
        Operation::AtomicWrite if rc => atomic::atomic_write(qp, st, pkt),
        // As with rxe, the QP must allow the placement type too.
        Operation::Flush if rc => atomic::flush(qp, st, pkt, access),
        Operation::RdmaReadRequest if rc => read::read_response(qp, st, pkt),
        _ => Err(Nak::Invalid),
    }
}

/// RC: a request from beyond the expected PSN (one before it was lost).
/// The first such packet is NAKed with a PSN sequence error; the rest
/// are dropped until the expected one comes.
fn out_of_sequence(qp: &Qp<Roxe>, st: &mut QpState) {
    if !st.resp.nak_sent {
        st.resp.nak_sent = true;
        qp.device().data().counters.event(Event::RespNakSeq);
        let nak = Syndrome::Nak(NakCode::PsnSequenceError);
        send_ack(qp, st, st.resp.epsn, nak);
    }
}

/// RC: a duplicate request (its PSN is behind the expected one) is
/// answered again. Reads are executed again, which only reads memory, and
/// only for a request served before; atomics are replayed, never redone;
/// other requests get the ACK of the last one received.
fn duplicate(qp: &Qp<Roxe>, st: &mut QpState, pkt: &Packet<'_>) -> core::result::Result<(), Drop> {
    match pkt.opcode.operation() {
        Operation::RdmaReadRequest => read::replay_read(qp, st, pkt),
        Operation::CompareSwap | Operation::FetchAdd => atomic::replay_atomic(qp, st, pkt),
        Operation::AtomicWrite | Operation::Flush => atomic::replay_empty(qp, st, pkt.bth.psn),
        _ => {
            send_ack(qp, st, st.resp.epsn.wrapping_sub(1), Syndrome::ACK);
            Err(Drop::Psn)
        }
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
