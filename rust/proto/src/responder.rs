// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The RC, XRC and UC responder's transport logic as a pure state machine.
//!
//! [`Responder`] takes request packets and decides what each does: the
//! expected PSN, duplicates (SEND and WRITE acknowledged again, READ
//! answered again only for a request it served and remembers, atomics
//! answered from their remembered result and never executed twice), one
//! PSN sequence NAK per gap, the opcode sequence, payload sizes, the
//! message sequence number, when to acknowledge (the AckReq bit; atomics,
//! reads, Atomic Write and FLUSH are answered by their responses), RNR
//! NAKs, and the NAKs that move the QP to ERR. Memory, receive WQEs and
//! packets are the kernel's, reached through [`Io`]. The per-packet rules
//! on lengths and placement are [`super::resp`]'s.
//!
//! # In the driver
//!
//! The driver runs this machine for every RC, XRC and UC request packet
//! (`drivers/infiniband/sw/roxe/qp/resp/mod.rs`, `respond`), with its
//! kernel side as the [`Io`] implementation. What stays in the driver: the
//! checks before the responder (transport, QP state, addresses), UD
//! receives (`recv_ud`), the receive queues (`Io::pop_recv`), memory
//! (`Io::scatter`, `Io::write`, `Io::atomic`, `Io::check_key`,
//! `Io::flush`, `Io::invalidate`), building and sending the answers,
//! completion queue entries, moving the QP to ERR (`Io::fatal`) and
//! flushing. `modify` calls the `set_*` methods, `flush` on the move to
//! ERR, and `reset` on the move to RESET.
//!
//! Atomic results are remembered like reads: the newest
//! `max_dest_rd_atomic` of them, up to `A` (128, the driver's
//! `MAX_QP_RD_ATOM`, by default), so the duplicate of any atomic a
//! requester may still have in flight finds its result.

use super::access::{FLUSH_GLOBAL, FLUSH_PERSISTENT, REMOTE_ATOMIC, REMOTE_READ, REMOTE_WRITE};
use super::aeth::{NakCode, RnrTimer, Syndrome};
use super::headers::Packet;
use super::opcode::{Opcode, Operation, Position, Transport};
use super::psn::{self, Psn};
use super::recent::Recent;
use super::req::{MAX_MSG, RESPONSE_BURST};
use super::resp::{self, ReadRequest, ReadResources};
use super::seg;
use super::wr::{WcOp, WcStatus};

/// FETH placement types and the MR selectivity level (`IB_FLUSH_*`).
const FLUSH_GLOBAL_TYPE: u8 = 1;
const FLUSH_PERSISTENT_TYPE: u8 = 2;
const FLUSH_LEVEL_MR: u8 = 1;

/// The responder's settings: the QP's attributes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// RC, XRC (a target QP) or UC.
    pub transport: Transport,
    /// The path MTU request packets are cut at, in bytes.
    pub mtu: u32,
    /// The QP's access flags (`IB_ACCESS_REMOTE_*`, `IB_ACCESS_FLUSH_*`).
    pub access: u32,
    /// Reads and atomics it takes at once (`max_dest_rd_atomic`).
    pub max_dest_rd_atomic: u8,
    /// The RNR NAK timer code (`min_rnr_timer`).
    pub min_rnr_timer: u8,
    /// Read response packets sent per request at most ([`RESPONSE_BURST`]).
    pub read_burst: u32,
}

impl Config {
    /// Settings for `transport` at path MTU `mtu`, with no remote access
    /// and no responder resources (a QP fresh out of RESET).
    pub const fn new(transport: Transport, mtu: u32) -> Config {
        Config {
            transport,
            mtu,
            access: 0,
            max_dest_rd_atomic: 0,
            min_rnr_timer: 0,
            read_burst: RESPONSE_BURST,
        }
    }
}

/// A remote atomic operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AtomicOp {
    /// Compare and swap.
    CmpSwap {
        /// Swapped in if the target equals `compare`.
        swap: u64,
        /// The value to compare with.
        compare: u64,
    },
    /// Fetch and add.
    FetchAdd {
        /// Added, wrapping.
        add: u64,
    },
}

impl AtomicOp {
    /// The value the target holds after the operation, if it held `v`.
    pub fn apply(self, v: u64) -> u64 {
        match self {
            AtomicOp::CmpSwap { swap, compare } => {
                if v == compare {
                    swap
                } else {
                    v
                }
            }
            AtomicOp::FetchAdd { add } => v.wrapping_add(add),
        }
    }
}

/// An RDMA READ response packet to build and send, with its payload read
/// from `len` bytes at `va` under `rkey` (nothing when `len` is 0). Also
/// the empty response that answers an Atomic Write or a FLUSH.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadSegment {
    /// First, Middle, Last or Only.
    pub opcode: Opcode,
    /// The packet's PSN.
    pub psn: Psn,
    /// The key the data is read under.
    pub rkey: u32,
    /// Where the payload starts.
    pub va: u64,
    /// Payload bytes.
    pub len: u32,
    /// The AETH's MSN, for every packet but a Middle one.
    pub msn: Option<u32>,
}

/// A work completion for a receive WQE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecvCompletion {
    /// `Recv`, or `RecvRdmaImm` for an RDMA WRITE with immediate.
    pub op: WcOp,
    /// The status.
    pub status: WcStatus,
    /// Bytes received (an RDMA WRITE with immediate: the write's length).
    pub byte_len: u32,
    /// Immediate data, as the ImmDt header reads.
    pub imm: Option<u32>,
    /// The key a SEND with Invalidate invalidated.
    pub invalidated: Option<u32>,
    /// The completion is solicited (for CQ notification).
    pub solicited: bool,
}

/// Why a request packet was not taken; the driver counts each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Discard {
    /// The responder stopped (an error, a flush).
    State,
    /// Out of sequence, or a duplicate (answered again or not).
    Psn,
    /// No receive WQE (RC and XRC answered with an RNR NAK).
    NoRecv,
    /// Memory the request needs is not mapped yet: an on-demand-paging MR
    /// whose pages the driver is faulting in (RC and XRC answered with an
    /// RNR NAK, nothing done).
    NotPresent,
    /// A bad R_Key, access or range.
    Key,
    /// A payload, DMA length or message size that breaks the rules.
    Length,
    /// A duplicate READ, atomic, Atomic Write or FLUSH that matches nothing
    /// served and remembered, or that the QP or key no longer allows.
    Duplicate,
    /// An invalid request: an opcode out of sequence, an operation the QP
    /// does not take, a read or atomic with no responder resources. A
    /// packet of another transport than the QP's is dropped as this too,
    /// unanswered.
    Invalid,
}

/// Why the kernel side did not make a memory access.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemError {
    /// The key does not allow it.
    Refused,
    /// The memory is not mapped yet (on-demand paging): nothing was
    /// touched; the driver is faulting it in, and the request comes again.
    NotPresent,
}

/// Why a SEND's payload did not land in its receive buffers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScatterError {
    /// The buffers are too short (`LOC_LEN_ERR`) or a key is bad
    /// (`LOC_PROT_ERR`): the receive completes with this status.
    Failed(WcStatus),
    /// As [`MemError::NotPresent`]: nothing was written.
    NotPresent,
}

/// The kernel side of the responder.
pub trait Io {
    /// A receive WQE copied out of its queue.
    type Recv;

    /// Takes the next receive WQE from the RQ or SRQ.
    fn pop_recv(&mut self) -> Option<Self::Recv>;

    /// Scatters `data` into `r`'s buffers at message offset `off`:
    /// `LOC_LEN_ERR` if they are too short, `LOC_PROT_ERR` for a bad lkey.
    fn scatter(&mut self, r: &Self::Recv, off: u64, data: &[u8]) -> Result<(), ScatterError>;

    /// Completes receive WQE `r`.
    fn complete_recv(&mut self, r: Self::Recv, c: &RecvCompletion);

    /// Whether `rkey` grants `access` to `len` bytes at `va`.
    fn check_key(&mut self, rkey: u32, va: u64, len: u32, access: u32) -> bool;

    /// Writes `data` at `va` under `rkey` (checking it for remote write).
    fn write(&mut self, rkey: u32, va: u64, data: &[u8]) -> Result<(), MemError>;

    /// Executes `op` on the 8 aligned bytes at `va` under `rkey` (checking
    /// it for remote atomics), atomically with respect to every other
    /// access; returns the value they held.
    fn atomic(&mut self, rkey: u32, va: u64, op: AtomicOp) -> Result<u64, MemError>;

    /// Whether the `len` bytes at `va` under `rkey` (already checked for
    /// remote read) can be read now; if not mapped yet, the driver starts
    /// faulting them in. Memory that is always there always can.
    fn readable_now(&mut self, _rkey: u32, _va: u64, _len: u32) -> Result<(), MemError> {
        Ok(())
    }

    /// Makes the writes before a FLUSH visible, if `rkey` grants `need`
    /// over `len` bytes at `va`, or over its whole MR if `whole_mr`.
    fn flush(&mut self, rkey: u32, va: u64, len: u32, need: u32, whole_mr: bool) -> bool;

    /// Invalidates `rkey` for a SEND with Invalidate; `false` if it cannot
    /// go.
    fn invalidate(&mut self, rkey: u32) -> bool;

    /// Sends an ACKNOWLEDGE for `psn`.
    fn send_ack(&mut self, psn: Psn, syndrome: Syndrome, msn: u32);

    /// Sends an ATOMIC ACKNOWLEDGE for `psn` with the original value.
    fn send_atomic_ack(&mut self, psn: Psn, orig: u64, msn: u32);

    /// Sends one RDMA READ response packet.
    fn send_read_response(&mut self, seg: &ReadSegment);

    /// After a NAK that ends the connection: move the QP to ERR and flush
    /// its work, `held` (a receive WQE the responder had taken) first.
    fn fatal(&mut self, held: Option<Self::Recv>);
}

/// An atomic the responder executed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct AtomicDone {
    psn: Psn,
    rkey: u32,
    va: u64,
    orig: u64,
}

impl AtomicDone {
    const EMPTY: AtomicDone = AtomicDone {
        psn: Psn::ZERO,
        rkey: 0,
        va: 0,
        orig: 0,
    };
}

/// The message in progress that took a receive WQE.
struct RecvProgress<W> {
    wqe: W,
    off: u64,
}

/// The RDMA WRITE in progress.
#[derive(Clone, Copy)]
struct WriteProgress {
    rkey: u32,
    va: u64,
    len: u32,
    off: u32,
}

/// Why the responder refuses a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Nak {
    /// No receive WQE: RNR NAK.
    Rnr,
    /// Memory not mapped yet: RNR NAK too, so the request comes again.
    NotPresent,
    /// Invalid request.
    Invalid,
    /// Invalid request for a length that breaks the rules.
    Length,
    /// Remote access error.
    Access,
    /// Remote operational error.
    Operational,
}

/// An RC, XRC or UC responder.
///
/// `W` is the driver's copy of a receive WQE; `R` and `A` bound the READ
/// requests and atomics remembered for duplicates (the driver's
/// `MAX_QP_RD_ATOM`, 128).
pub struct Responder<W, const R: usize = 128, const A: usize = 128> {
    cfg: Config,
    /// The expected PSN.
    epsn: Psn,
    /// The message sequence number.
    msn: u32,
    /// A PSN sequence NAK was sent and the gap is not filled yet.
    nak_sent: bool,
    /// The message in progress that holds a receive WQE.
    recv: Option<RecvProgress<W>>,
    /// A receive WQE whose UC message was lost; the next message takes it
    /// first. At most one of `recv` and `spare` holds one.
    spare: Option<W>,
    write: Option<WriteProgress>,
    reads: ReadResources<R>,
    atomics: Recent<AtomicDone, A>,
    stopped: bool,
}

fn is_response_answered(op: Operation) -> bool {
    matches!(
        op,
        Operation::CompareSwap | Operation::FetchAdd | Operation::AtomicWrite | Operation::Flush
    )
}

/// What the responder remembers of an Atomic Write or FLUSH executed at
/// `psn`: an empty read, whose answer is the one a duplicate gets.
fn answered_empty(psn: Psn) -> ReadRequest {
    ReadRequest {
        va: 0,
        psn,
        rkey: 0,
        len: 0,
    }
}

impl<W, const R: usize, const A: usize> Responder<W, R, A> {
    /// A responder expecting PSN `rq_psn`, with nothing in progress.
    pub const fn new(cfg: Config, rq_psn: Psn) -> Self {
        Responder {
            cfg,
            epsn: rq_psn,
            msn: 0,
            nak_sent: false,
            recv: None,
            spare: None,
            write: None,
            reads: ReadResources::new(),
            atomics: Recent::new(AtomicDone::EMPTY),
            stopped: false,
        }
    }

    /// The settings.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// `modify` with `RQ_PSN`.
    pub fn set_rq_psn(&mut self, psn: Psn) {
        self.epsn = psn;
    }

    /// `modify` with `ACCESS_FLAGS`.
    pub fn set_access(&mut self, access: u32) {
        self.cfg.access = access;
    }

    /// `modify` with `PATH_MTU` (or a new route).
    pub fn set_mtu(&mut self, mtu: u32) {
        self.cfg.mtu = mtu;
    }

    /// `modify` with `MAX_DEST_RD_ATOMIC`.
    pub fn set_max_dest_rd_atomic(&mut self, n: u8) {
        self.cfg.max_dest_rd_atomic = n;
    }

    /// `modify` with `MIN_RNR_TIMER`.
    pub fn set_min_rnr_timer(&mut self, code: u8) {
        self.cfg.min_rnr_timer = code;
    }

    /// The expected PSN.
    pub fn epsn(&self) -> Psn {
        self.epsn
    }

    /// The message sequence number.
    pub fn msn(&self) -> u32 {
        self.msn
    }

    /// Whether a sequence NAK is outstanding.
    pub fn nak_sent(&self) -> bool {
        self.nak_sent
    }

    /// Whether an error or a flush stopped it.
    pub fn is_stopped(&self) -> bool {
        self.stopped
    }

    fn forget_progress(&mut self) -> Option<W> {
        let held = self
            .recv
            .take()
            .map(|p| p.wqe)
            .or_else(|| self.spare.take());
        self.write = None;
        self.nak_sent = false;
        self.reads.clear();
        self.atomics.clear();
        held
    }

    /// The QP went to ERR: forget what is in progress and stop. Returns
    /// the receive WQE the responder held, which the driver completes with
    /// a flush error before those still queued (`qp.rs` `flush_rq`).
    pub fn flush(&mut self) -> Option<W> {
        self.stopped = true;
        self.forget_progress()
    }

    /// The QP went to RESET: as new, expecting PSN 0. Returns the receive
    /// WQE it held, which RESET discards.
    pub fn reset(&mut self) -> Option<W> {
        let held = self.forget_progress();
        self.epsn = Psn::ZERO;
        self.msn = 0;
        self.stopped = false;
        held
    }

    /// Holds receive WQE `w` for the next message, which takes it first
    /// (a UD datagram that could not land: its memory was not mapped yet).
    /// The responder then holds it as its own: `flush` and `reset` give it
    /// back. Does nothing if one is held already.
    pub fn hold(&mut self, w: W) {
        if self.recv.is_none() && self.spare.is_none() {
            self.spare = Some(w);
        }
    }

    /// The receive WQE the responder holds, if any: the one its message in
    /// progress took, or one kept for the next message.
    pub fn held_recv(&self) -> Option<&W> {
        self.recv.as_ref().map(|p| &p.wqe).or(self.spare.as_ref())
    }

    /// Takes back the receive WQE [`hold`](Self::hold) kept.
    pub fn take_held(&mut self) -> Option<W> {
        self.spare.take()
    }

    fn next_msn(&self) -> u32 {
        (self.msn + 1) & psn::MASK
    }

    /// Takes the WQE a lost UC message left, or the next from the queue.
    fn pop_recv(&mut self, io: &mut impl Io<Recv = W>) -> Option<W> {
        self.spare.take().or_else(|| io.pop_recv())
    }

    /// UC: the message in progress is lost; its receive WQE takes the next
    /// message, as if never taken (IBTA's class D).
    fn drop_message(&mut self) {
        if let Some(p) = self.recv.take() {
            self.spare = Some(p.wqe);
        }
        self.write = None;
    }

    /// Takes a request packet addressed to this QP, whose ICRC, addresses
    /// and QP state the driver has checked.
    pub fn on_request(
        &mut self,
        pkt: &Packet<'_>,
        io: &mut impl Io<Recv = W>,
    ) -> Result<(), Discard> {
        if self.stopped {
            return Err(Discard::State);
        }
        // The driver takes only the QP's own transport; nothing else may
        // touch this machine's state.
        if pkt.opcode.transport() != self.cfg.transport {
            return Err(Discard::Invalid);
        }
        let reliable = self.cfg.transport.is_reliable();
        let psn = pkt.bth.psn;
        let pos = pkt.opcode.position();
        if psn != self.epsn {
            if !reliable {
                // UC: a gap loses the message in progress; a new one may
                // start.
                self.drop_message();
                if !pos.starts_message() {
                    self.epsn = psn.next();
                    return Err(Discard::Psn);
                }
            } else if psn.diff(self.epsn) < 0 {
                return self.duplicate(pkt, io);
            } else {
                // One NAK per gap: the requester goes back to `epsn`.
                if !self.nak_sent {
                    self.nak_sent = true;
                    let nak = Syndrome::Nak(NakCode::PsnSequenceError);
                    io.send_ack(self.epsn, nak, self.msn);
                }
                return Err(Discard::Psn);
            }
        }
        self.nak_sent = false;
        let op = pkt.opcode.operation();
        // A message continues the one in progress, and only a First or Only
        // packet starts one.
        let continues = match op {
            Operation::Send => self.recv.is_some(),
            Operation::RdmaWrite => self.write.is_some(),
            _ => false,
        };
        let busy = self.recv.is_some() || self.write.is_some();
        if continues == pos.starts_message() || (pos.starts_message() && busy) {
            if reliable {
                return Err(self.refuse(io, psn, Nak::Invalid));
            }
            self.drop_message();
            if !pos.starts_message() {
                self.epsn = psn.next();
                return Err(Discard::Psn);
            }
        }
        if matches!(op, Operation::Send | Operation::RdmaWrite)
            && !resp::payload_len_ok(pos, pkt.payload.len(), self.cfg.mtu)
        {
            return Err(self.refuse(io, psn, Nak::Length));
        }
        let access = self.cfg.access;
        let needs_resource = is_response_answered(op) || op == Operation::RdmaReadRequest;
        let result = match op {
            _ if reliable && needs_resource && self.cfg.max_dest_rd_atomic == 0 => {
                Err(Nak::Invalid)
            }
            Operation::Send => self.recv_send(pkt, io),
            Operation::RdmaWrite => self.recv_write(pkt, io),
            Operation::CompareSwap | Operation::FetchAdd if reliable => {
                if access & REMOTE_ATOMIC == 0 {
                    Err(Nak::Access)
                } else {
                    self.atomic(pkt, io)
                }
            }
            Operation::AtomicWrite if reliable => {
                if access & REMOTE_WRITE == 0 {
                    Err(Nak::Access)
                } else {
                    self.atomic_write(pkt, io)
                }
            }
            Operation::Flush if reliable => self.flush_request(pkt, io),
            Operation::RdmaReadRequest if reliable => {
                if access & REMOTE_READ == 0 {
                    Err(Nak::Access)
                } else {
                    // Answered by its responses; `read_response` moves the
                    // expected PSN past all of them.
                    return match self.read_response(pkt, io) {
                        Ok(()) => Ok(()),
                        Err(Nak::NotPresent) => Err(self.not_now(io, psn, Nak::NotPresent)),
                        Err(n) => Err(self.refuse(io, psn, n)),
                    };
                }
            }
            _ => Err(Nak::Invalid),
        };
        match result {
            Ok(()) => {
                self.epsn = psn.next();
                if pos.ends_message() {
                    self.msn = self.next_msn();
                }
                if reliable && pkt.bth.ack_req && !is_response_answered(op) {
                    io.send_ack(psn, Syndrome::ACK, self.msn);
                }
                Ok(())
            }
            Err(n @ (Nak::Rnr | Nak::NotPresent)) => Err(self.not_now(io, psn, n)),
            Err(n) => Err(self.refuse(io, psn, n)),
        }
    }

    /// A request behind the expected PSN: answered again, never executed
    /// again.
    fn duplicate(&mut self, pkt: &Packet<'_>, io: &mut impl Io<Recv = W>) -> Result<(), Discard> {
        let psn = pkt.bth.psn;
        match pkt.opcode.operation() {
            Operation::RdmaReadRequest => self.replay_read(pkt, io),
            Operation::CompareSwap | Operation::FetchAdd => self.replay_atomic(pkt, io),
            Operation::AtomicWrite | Operation::Flush => {
                // Answered again only if one was executed at this PSN: its
                // answer would otherwise stand in for a read response.
                if self
                    .reads
                    .find(&answered_empty(psn), self.cfg.mtu)
                    .is_none()
                {
                    return Err(Discard::Duplicate);
                }
                io.send_read_response(&ReadSegment {
                    opcode: seg::read_response_opcode(self.cfg.transport, Position::Only),
                    psn,
                    rkey: 0,
                    va: 0,
                    len: 0,
                    msn: Some(self.msn),
                });
                Err(Discard::Psn)
            }
            _ => {
                io.send_ack(self.epsn.wrapping_sub(1), Syndrome::ACK, self.msn);
                Err(Discard::Psn)
            }
        }
    }

    /// Answers the request at `psn`, which could not be taken now (no
    /// receive WQE, or memory not mapped yet), with an RNR NAK (RC, XRC), so
    /// that it comes again after the QP's `min_rnr_timer`.
    fn not_now(&mut self, io: &mut impl Io<Recv = W>, psn: Psn, n: Nak) -> Discard {
        if let (true, Some(t)) = (
            self.cfg.transport.is_reliable(),
            RnrTimer::from_code(self.cfg.min_rnr_timer),
        ) {
            io.send_ack(psn, Syndrome::RnrNak(t), self.msn);
        }
        if n == Nak::NotPresent {
            Discard::NotPresent
        } else {
            Discard::NoRecv
        }
    }

    /// Refuses the request at `psn` for reason `n` (not [`Nak::Rnr`] or
    /// [`Nak::NotPresent`]).
    ///
    /// RC and XRC: NAK it, complete the receive WQE of the message in
    /// progress with the matching error, and stop (the QP goes to ERR). UC:
    /// the message is lost, silently.
    fn refuse(&mut self, io: &mut impl Io<Recv = W>, psn: Psn, n: Nak) -> Discard {
        let (code, status) = match n {
            Nak::Invalid | Nak::Length | Nak::Rnr | Nak::NotPresent => {
                (NakCode::InvalidRequest, WcStatus::RemInvReqErr)
            }
            Nak::Access => (NakCode::RemoteAccessError, WcStatus::RemAccessErr),
            Nak::Operational => (NakCode::RemoteOperationalError, WcStatus::RemOpErr),
        };
        let discard = match n {
            Nak::Length => Discard::Length,
            Nak::Invalid => Discard::Invalid,
            Nak::Rnr => Discard::NoRecv,
            Nak::NotPresent => Discard::NotPresent,
            Nak::Access | Nak::Operational => Discard::Key,
        };
        if !self.cfg.transport.is_reliable() {
            self.drop_message();
            return discard;
        }
        io.send_ack(psn, Syndrome::Nak(code), self.msn);
        if let Some(p) = self.recv.take() {
            io.complete_recv(
                p.wqe,
                &RecvCompletion {
                    op: WcOp::Recv,
                    status,
                    byte_len: 0,
                    imm: None,
                    invalidated: None,
                    solicited: true,
                },
            );
        }
        let held = self.flush();
        io.fatal(held);
        discard
    }

    /// A SEND packet: the payload goes to the receive WQE the first packet
    /// took, which the last completes.
    fn recv_send(&mut self, pkt: &Packet<'_>, io: &mut impl Io<Recv = W>) -> Result<(), Nak> {
        let pos = pkt.opcode.position();
        if pos.starts_message() {
            let wqe = self.pop_recv(io).ok_or(Nak::Rnr)?;
            self.recv = Some(RecvProgress { wqe, off: 0 });
        }
        let Some(p) = self.recv.as_mut() else {
            return Err(Nak::Invalid);
        };
        // CAST: usize to u64 is lossless.
        let end = p
            .off
            .checked_add(pkt.payload.len() as u64)
            .filter(|e| *e <= u64::from(MAX_MSG));
        let placed = match end {
            Some(_) => io.scatter(&p.wqe, p.off, pkt.payload),
            None => Err(ScatterError::Failed(WcStatus::LocLenErr)),
        };
        if placed == Err(ScatterError::NotPresent) {
            // Nothing landed: the packet comes again. A message that has
            // not started gives its receive WQE back, to take it then.
            if pos.starts_message() {
                if let Some(p) = self.recv.take() {
                    self.spare = Some(p.wqe);
                }
            }
            return Err(Nak::NotPresent);
        }
        if let Err(ScatterError::Failed(status)) = placed {
            // The receive buffer cannot take it: the WQE completes with the
            // local error, and the request is refused.
            if let Some(p) = self.recv.take() {
                io.complete_recv(
                    p.wqe,
                    &RecvCompletion {
                        op: WcOp::Recv,
                        status,
                        // CAST: `off` is at most 2^31.
                        byte_len: p.off as u32,
                        imm: None,
                        invalidated: None,
                        solicited: true,
                    },
                );
            }
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
        let Some(p) = self.recv.take() else {
            return Err(Nak::Invalid);
        };
        let mut c = RecvCompletion {
            op: WcOp::Recv,
            status: WcStatus::Success,
            // CAST: at most 2^31.
            byte_len: p.off as u32,
            imm: pkt.ext.immdt.map(|i| i.0),
            invalidated: None,
            solicited: pkt.bth.se,
        };
        if let Some(ieth) = pkt.ext.ieth {
            // Send with Invalidate: the key goes once the data is in.
            if io.invalidate(ieth.rkey) {
                c.invalidated = Some(ieth.rkey);
            } else {
                c.status = WcStatus::RemInvReqErr;
            }
        }
        io.complete_recv(p.wqe, &c);
        match c.status {
            WcStatus::Success => Ok(()),
            _ => Err(Nak::Operational),
        }
    }

    /// An RDMA WRITE packet: the first names the target, each writes its
    /// part; with immediate data, the last takes a receive WQE.
    fn recv_write(&mut self, pkt: &Packet<'_>, io: &mut impl Io<Recv = W>) -> Result<(), Nak> {
        let pos = pkt.opcode.position();
        if pos.starts_message() {
            if self.write.is_some() {
                return Err(Nak::Invalid);
            }
            let reth = pkt.ext.reth.ok_or(Nak::Invalid)?;
            if reth.dma_len > resp::MAX_DMA_LEN {
                return Err(Nak::Length);
            }
            if self.cfg.access & REMOTE_WRITE == 0 {
                return Err(Nak::Access);
            }
            if reth.dma_len != 0 && !io.check_key(reth.rkey, reth.va, reth.dma_len, REMOTE_WRITE) {
                return Err(Nak::Access);
            }
            self.write = Some(WriteProgress {
                rkey: reth.rkey,
                va: reth.va,
                len: reth.dma_len,
                off: 0,
            });
        }
        let Some(w) = self.write else {
            return Err(Nak::Invalid);
        };
        // CAST: a payload is at most one MTU (`resp::payload_len_ok`).
        let n = pkt.payload.len() as u32;
        let Some((va, end)) = resp::write_place(w.va, w.off, n, w.len, pos) else {
            self.write = None;
            return Err(Nak::Length);
        };
        let imm = pkt.ext.immdt.filter(|_| pos.ends_message());
        // Write with immediate takes its receive WQE at the last packet,
        // before anything changes, once the key is checked: an RNR NAK
        // leaves the write where it was, so the resend of this packet is
        // taken.
        if imm.is_some() {
            if n != 0 && !io.check_key(w.rkey, va, n, REMOTE_WRITE) {
                return Err(Nak::Access);
            }
            let Some(wqe) = self.pop_recv(io) else {
                // The resend must find no message in progress if it starts
                // one.
                if pos.starts_message() {
                    self.write = None;
                }
                return Err(Nak::Rnr);
            };
            self.recv = Some(RecvProgress { wqe, off: 0 });
        }
        let written = if n == 0 {
            Ok(())
        } else {
            io.write(w.rkey, va, pkt.payload)
        };
        match written {
            Ok(()) => {}
            Err(MemError::Refused) => return Err(Nak::Access),
            Err(MemError::NotPresent) => {
                // Nothing written: as for a missing receive WQE, the
                // resend of this packet finds everything as it was.
                if let Some(p) = self.recv.take() {
                    self.spare = Some(p.wqe);
                }
                if pos.starts_message() {
                    self.write = None;
                }
                return Err(Nak::NotPresent);
            }
        }
        if !pos.ends_message() {
            if let Some(w) = self.write.as_mut() {
                w.off = end;
            }
            return Ok(());
        }
        self.write = None;
        if let (Some(imm), Some(p)) = (imm, self.recv.take()) {
            io.complete_recv(
                p.wqe,
                &RecvCompletion {
                    op: WcOp::RecvRdmaImm,
                    status: WcStatus::Success,
                    byte_len: w.len,
                    imm: Some(imm.0),
                    invalidated: None,
                    solicited: pkt.bth.se,
                },
            );
        }
        Ok(())
    }

    /// Executes a CmpSwap or FetchAdd, answers it, and remembers the
    /// result for a duplicate.
    fn atomic(&mut self, pkt: &Packet<'_>, io: &mut impl Io<Recv = W>) -> Result<(), Nak> {
        let a = pkt.ext.atomic_eth.ok_or(Nak::Invalid)?;
        if a.va % 8 != 0 {
            return Err(Nak::Invalid);
        }
        let op = if pkt.opcode.operation() == Operation::CompareSwap {
            AtomicOp::CmpSwap {
                swap: a.swap_add,
                compare: a.compare,
            }
        } else {
            AtomicOp::FetchAdd { add: a.swap_add }
        };
        let orig = io.atomic(a.rkey, a.va, op).map_err(|e| match e {
            MemError::Refused => Nak::Access,
            MemError::NotPresent => Nak::NotPresent,
        })?;
        let psn = pkt.bth.psn;
        self.atomics.remember(
            AtomicDone {
                psn,
                rkey: a.rkey,
                va: a.va,
                orig,
            },
            usize::from(self.cfg.max_dest_rd_atomic),
        );
        // The answer carries the MSN of this message.
        io.send_atomic_ack(psn, orig, self.next_msn());
        Ok(())
    }

    /// Answers a duplicate CmpSwap or FetchAdd with the value its original
    /// found, if one was executed at its PSN on the same key and address
    /// and the QP and key still grant remote atomics there.
    fn replay_atomic(
        &mut self,
        pkt: &Packet<'_>,
        io: &mut impl Io<Recv = W>,
    ) -> Result<(), Discard> {
        let a = pkt.ext.atomic_eth.ok_or(Discard::Duplicate)?;
        let psn = pkt.bth.psn;
        let Some(done) = self
            .atomics
            .find(|d| d.psn == psn && d.rkey == a.rkey && d.va == a.va)
        else {
            return Err(Discard::Duplicate);
        };
        if self.cfg.access & REMOTE_ATOMIC == 0 || !io.check_key(a.rkey, a.va, 8, REMOTE_ATOMIC) {
            return Err(Discard::Duplicate);
        }
        io.send_atomic_ack(psn, done.orig, self.msn);
        Err(Discard::Psn)
    }

    /// The empty RDMA READ RESPONSE ONLY that answers an Atomic Write or a
    /// FLUSH at `psn`, which is remembered to answer a duplicate.
    fn answer_empty(&mut self, psn: Psn, io: &mut impl Io<Recv = W>) {
        io.send_read_response(&ReadSegment {
            opcode: seg::read_response_opcode(self.cfg.transport, Position::Only),
            psn,
            rkey: 0,
            va: 0,
            len: 0,
            msn: Some(self.next_msn()),
        });
        self.reads.remember(
            answered_empty(psn),
            usize::from(self.cfg.max_dest_rd_atomic),
        );
    }

    /// Executes an Atomic Write: 8 bytes to an aligned address.
    fn atomic_write(&mut self, pkt: &Packet<'_>, io: &mut impl Io<Recv = W>) -> Result<(), Nak> {
        let reth = pkt.ext.reth.ok_or(Nak::Invalid)?;
        if reth.dma_len != 8 || pkt.payload.len() != 8 || reth.va % 8 != 0 {
            return Err(Nak::Invalid);
        }
        io.write(reth.rkey, reth.va, pkt.payload)
            .map_err(|e| match e {
                MemError::Refused => Nak::Access,
                MemError::NotPresent => Nak::NotPresent,
            })?;
        self.answer_empty(pkt.bth.psn, io);
        Ok(())
    }

    /// Executes a FLUSH: the QP must allow the placement type, and the key
    /// the matching right over the range (or its whole MR).
    fn flush_request(&mut self, pkt: &Packet<'_>, io: &mut impl Io<Recv = W>) -> Result<(), Nak> {
        let feth = pkt.ext.feth.ok_or(Nak::Invalid)?;
        let reth = pkt.ext.reth.ok_or(Nak::Invalid)?;
        let need = match feth.placement_type {
            FLUSH_GLOBAL_TYPE => FLUSH_GLOBAL,
            FLUSH_PERSISTENT_TYPE => FLUSH_PERSISTENT,
            _ => return Err(Nak::Invalid),
        };
        if self.cfg.access & need == 0 || feth.selectivity > FLUSH_LEVEL_MR {
            return Err(Nak::Invalid);
        }
        let whole = feth.selectivity == FLUSH_LEVEL_MR;
        if !io.flush(reth.rkey, reth.va, reth.dma_len, need, whole) {
            return Err(Nak::Access);
        }
        self.answer_empty(pkt.bth.psn, io);
        Ok(())
    }

    /// Answers an RDMA READ request with up to `read_burst` response
    /// packets. A request at the expected PSN moves it past all its
    /// responses and is remembered, so that a duplicate can be answered.
    fn read_response(&mut self, pkt: &Packet<'_>, io: &mut impl Io<Recv = W>) -> Result<(), Nak> {
        let reth = pkt.ext.reth.ok_or(Nak::Invalid)?;
        if reth.dma_len > resp::MAX_DMA_LEN {
            return Err(Nak::Length);
        }
        let mtu = self.cfg.mtu;
        let n = seg::packet_count(reth.dma_len, mtu).ok_or(Nak::Invalid)?;
        if reth.dma_len != 0 && !io.check_key(reth.rkey, reth.va, reth.dma_len, REMOTE_READ) {
            return Err(Nak::Access);
        }
        let psn = pkt.bth.psn;
        // What this burst reads must be there to read: if not, nothing is
        // sent, and the request comes again.
        let burst = u64::from(n.min(self.cfg.read_burst)) * u64::from(mtu);
        // CAST: at most the DMA length, a u32.
        let burst = burst.min(u64::from(reth.dma_len)) as u32;
        if burst != 0 {
            io.readable_now(reth.rkey, reth.va, burst)
                .map_err(|e| match e {
                    MemError::Refused => Nak::Access,
                    MemError::NotPresent => Nak::NotPresent,
                })?;
        }
        let new = psn == self.epsn;
        let msn = if new { self.next_msn() } else { self.msn };
        // At most one burst per request: what is held back looks like loss
        // to the requester, which asks again from the first PSN missing.
        for i in 0..n.min(self.cfg.read_burst) {
            let pos = seg::position(i, n);
            // Below the DMA length, or both 0.
            let off = i * mtu;
            io.send_read_response(&ReadSegment {
                opcode: seg::read_response_opcode(self.cfg.transport, pos),
                psn: psn.wrapping_add(i),
                rkey: reth.rkey,
                va: reth.va.wrapping_add(u64::from(off)),
                len: reth.dma_len.saturating_sub(off).min(mtu),
                msn: (pos != Position::Middle).then_some(msn),
            });
        }
        if new {
            self.epsn = psn.wrapping_add(n);
            self.msn = msn;
            let req = ReadRequest {
                va: reth.va,
                psn,
                rkey: reth.rkey,
                len: reth.dma_len,
            };
            self.reads
                .remember(req, usize::from(self.cfg.max_dest_rd_atomic));
        }
        Ok(())
    }

    /// Answers a duplicate RDMA READ request again if it asks for a request
    /// served and remembered, or the tail of one, and the QP and key still
    /// allow it.
    fn replay_read(&mut self, pkt: &Packet<'_>, io: &mut impl Io<Recv = W>) -> Result<(), Discard> {
        let reth = pkt.ext.reth.ok_or(Discard::Duplicate)?;
        let dup = ReadRequest {
            va: reth.va,
            psn: pkt.bth.psn,
            rkey: reth.rkey,
            len: reth.dma_len,
        };
        if self.cfg.access & REMOTE_READ == 0 || self.reads.find(&dup, self.cfg.mtu).is_none() {
            return Err(Discard::Duplicate);
        }
        match self.read_response(pkt, io) {
            Ok(()) => Err(Discard::Psn),
            Err(Nak::NotPresent) => Err(self.not_now(io, pkt.bth.psn, Nak::NotPresent)),
            Err(_) => Err(Discard::Duplicate),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::headers::{AtomicEth, Bth, Ext, ImmDt, Reth, Xrceth, DEFAULT_PKEY};
    use proptest::prelude::*;
    use std::collections::VecDeque;
    use std::vec;
    use std::vec::Vec;

    const VA: u64 = 0x10_0000;
    const RKEY: u32 = 0x77;

    /// A kernel side that records what the responder does.
    #[derive(Default)]
    struct TestIo {
        rq: VecDeque<u32>,
        /// Bytes scattered per receive WQE.
        got: Vec<(u32, u64)>,
        recvs: Vec<(u32, RecvCompletion)>,
        mem: Vec<u8>,
        writes: Vec<(u64, usize)>,
        atomics: Vec<u64>,
        acks: Vec<(u32, Syndrome)>,
        atomic_acks: Vec<(u32, u64)>,
        reads: Vec<ReadSegment>,
        fatal: Option<Option<u32>>,
    }

    impl TestIo {
        fn new(recvs: u32) -> TestIo {
            TestIo {
                rq: (0..recvs).collect(),
                mem: vec![0; 1 << 16],
                ..TestIo::default()
            }
        }

        fn range(&self, rkey: u32, va: u64, len: u32) -> Option<core::ops::Range<usize>> {
            let off = usize::try_from(va.checked_sub(VA)?).ok()?;
            let end = off + len as usize;
            (rkey == RKEY && end <= self.mem.len()).then_some(off..end)
        }
    }

    impl Io for TestIo {
        type Recv = u32;

        fn pop_recv(&mut self) -> Option<u32> {
            self.rq.pop_front()
        }

        fn scatter(&mut self, r: &u32, off: u64, data: &[u8]) -> Result<(), ScatterError> {
            if off + data.len() as u64 > 4096 {
                return Err(ScatterError::Failed(WcStatus::LocLenErr));
            }
            self.got.push((*r, off));
            Ok(())
        }

        fn complete_recv(&mut self, r: u32, c: &RecvCompletion) {
            self.recvs.push((r, *c));
        }

        fn check_key(&mut self, rkey: u32, va: u64, len: u32, _access: u32) -> bool {
            self.range(rkey, va, len).is_some()
        }

        fn write(&mut self, rkey: u32, va: u64, data: &[u8]) -> Result<(), MemError> {
            match self.range(rkey, va, data.len() as u32) {
                Some(r) => {
                    self.mem[r].copy_from_slice(data);
                    self.writes.push((va, data.len()));
                    Ok(())
                }
                None => Err(MemError::Refused),
            }
        }

        fn atomic(&mut self, rkey: u32, va: u64, op: AtomicOp) -> Result<u64, MemError> {
            let r = self.range(rkey, va, 8).ok_or(MemError::Refused)?;
            let v = u64::from_le_bytes(self.mem[r.clone()].try_into().unwrap());
            self.mem[r].copy_from_slice(&op.apply(v).to_le_bytes());
            self.atomics.push(va);
            Ok(v)
        }

        fn flush(&mut self, rkey: u32, va: u64, len: u32, _need: u32, whole: bool) -> bool {
            whole || self.range(rkey, va, len).is_some()
        }

        fn invalidate(&mut self, _rkey: u32) -> bool {
            true
        }

        fn send_ack(&mut self, psn: Psn, syndrome: Syndrome, _msn: u32) {
            self.acks.push((psn.get(), syndrome));
        }

        fn send_atomic_ack(&mut self, psn: Psn, orig: u64, _msn: u32) {
            self.atomic_acks.push((psn.get(), orig));
        }

        fn send_read_response(&mut self, seg: &ReadSegment) {
            self.reads.push(*seg);
        }

        fn fatal(&mut self, held: Option<u32>) {
            self.fatal = Some(held);
        }
    }

    fn responder(mtu: u32, psn: u32) -> Responder<u32, 64, 64> {
        let mut c = Config::new(Transport::Rc, mtu);
        c.access = REMOTE_READ | REMOTE_WRITE | REMOTE_ATOMIC;
        c.max_dest_rd_atomic = 4;
        c.min_rnr_timer = 3;
        Responder::new(c, Psn::new(psn))
    }

    fn pkt(opcode: Opcode, psn: u32, ext: Ext, payload: &[u8], ack_req: bool) -> Packet<'_> {
        let mut bth = Bth::new(opcode, DEFAULT_PKEY, 1, Psn::new(psn));
        bth.ack_req = ack_req;
        Packet {
            opcode,
            bth,
            ext,
            payload,
            icrc: 0,
        }
    }

    fn reth(off: u64, len: u32) -> Ext {
        Ext {
            reth: Some(Reth {
                va: VA + off,
                rkey: RKEY,
                dma_len: len,
            }),
            ..Ext::default()
        }
    }

    fn fetch_add(psn: u32, off: u64, add: u64) -> Packet<'static> {
        let ext = Ext {
            atomic_eth: Some(AtomicEth {
                va: VA + off,
                rkey: RKEY,
                swap_add: add,
                compare: 0,
            }),
            ..Ext::default()
        };
        pkt(Opcode::RcFetchAdd, psn, ext, &[], true)
    }

    const SEQ: Syndrome = Syndrome::Nak(NakCode::PsnSequenceError);

    #[test]
    fn duplicates_are_acknowledged_not_executed() {
        let mut io = TestIo::new(4);
        let mut r = responder(256, 0xff_ffff);
        let data = [1u8; 16];
        let send = pkt(Opcode::RcSendOnly, 0xff_ffff, Ext::default(), &data, true);
        r.on_request(&send, &mut io).unwrap();
        let write = pkt(Opcode::RcRdmaWriteOnly, 0, reth(0, 16), &data, true);
        r.on_request(&write, &mut io).unwrap();
        assert_eq!(r.epsn(), Psn::new(1));
        assert_eq!(io.acks, [(0xff_ffff, Syndrome::ACK), (0, Syndrome::ACK)]);
        // Both again, across the wrap: acknowledged up to the expected PSN.
        assert_eq!(r.on_request(&send, &mut io), Err(Discard::Psn));
        assert_eq!(r.on_request(&write, &mut io), Err(Discard::Psn));
        assert_eq!(io.acks[2..], [(0, Syndrome::ACK), (0, Syndrome::ACK)]);
        assert_eq!(io.recvs.len(), 1);
        assert_eq!(io.writes.len(), 1);
        assert_eq!(r.msn(), 2);
    }

    #[test]
    fn one_nak_per_gap() {
        let mut io = TestIo::new(8);
        let mut r = responder(256, 5);
        let send = |psn| pkt(Opcode::RcSendOnly, psn, Ext::default(), &[], true);
        for psn in [7, 8, 9] {
            assert_eq!(r.on_request(&send(psn), &mut io), Err(Discard::Psn));
        }
        assert_eq!(io.acks, [(5, SEQ)]);
        assert!(r.nak_sent());
        r.on_request(&send(5), &mut io).unwrap();
        assert!(!r.nak_sent());
        // A new gap gets its own NAK.
        assert_eq!(r.on_request(&send(8), &mut io), Err(Discard::Psn));
        assert_eq!(io.acks[2..], [(6, SEQ)]);
    }

    #[test]
    fn acks_follow_the_ack_request_bit() {
        let mut io = TestIo::new(8);
        let mut r = responder(256, 0);
        let full = [0u8; 256];
        r.on_request(
            &pkt(Opcode::RcSendFirst, 0, Ext::default(), &full, false),
            &mut io,
        )
        .unwrap();
        r.on_request(
            &pkt(Opcode::RcSendMiddle, 1, Ext::default(), &full, true),
            &mut io,
        )
        .unwrap();
        r.on_request(
            &pkt(Opcode::RcSendLast, 2, Ext::default(), &full[..3], false),
            &mut io,
        )
        .unwrap();
        assert_eq!(io.acks, [(1, Syndrome::ACK)]);
        assert_eq!(io.recvs.len(), 1);
        assert_eq!(io.recvs[0].1.byte_len, 515);
        // Atomics and reads are answered by their responses alone.
        r.on_request(&fetch_add(3, 8, 1), &mut io).unwrap();
        let read = pkt(Opcode::RcRdmaReadRequest, 4, reth(0, 600), &[], true);
        r.on_request(&read, &mut io).unwrap();
        assert_eq!(io.acks.len(), 1);
        assert_eq!(io.atomic_acks, [(3, 0)]);
        let psns: Vec<u32> = io.reads.iter().map(|s| s.psn.get()).collect();
        assert_eq!(psns, [4, 5, 6]);
        assert_eq!(io.reads[1].msn, None, "no AETH on a Middle");
        assert_eq!(r.epsn(), Psn::new(7));
        assert_eq!(r.msn(), 3);
    }

    #[test]
    fn reads_are_answered_again_only_from_what_was_served() {
        let mut io = TestIo::new(0);
        let mut r = responder(1024, 10);
        r.set_max_dest_rd_atomic(1);
        let read = pkt(Opcode::RcRdmaReadRequest, 10, reth(0, 3000), &[], true);
        r.on_request(&read, &mut io).unwrap();
        assert_eq!(io.reads.len(), 3);
        assert_eq!(r.epsn(), Psn::new(13));
        // Asked again from its second response: the tail is answered.
        let tail = pkt(Opcode::RcRdmaReadRequest, 11, reth(1024, 1976), &[], true);
        assert_eq!(r.on_request(&tail, &mut io), Err(Discard::Psn));
        let psns: Vec<u32> = io.reads[3..].iter().map(|s| s.psn.get()).collect();
        assert_eq!(psns, [11, 12]);
        assert_eq!(io.reads[3].opcode, Opcode::RcRdmaReadResponseFirst);
        assert_eq!(io.reads[3].va, VA + 1024);
        // Anything it did not serve is not answered.
        let other = pkt(Opcode::RcRdmaReadRequest, 11, reth(0, 1976), &[], true);
        assert_eq!(r.on_request(&other, &mut io), Err(Discard::Duplicate));
        assert_eq!(io.reads.len(), 5);
        // With one resource, the next read makes it forget the first.
        let next = pkt(Opcode::RcRdmaReadRequest, 13, reth(0, 8), &[], true);
        r.on_request(&next, &mut io).unwrap();
        assert_eq!(r.on_request(&tail, &mut io), Err(Discard::Duplicate));
    }

    #[test]
    fn atomics_run_once_and_are_answered_again() {
        let mut io = TestIo::new(0);
        let mut r = responder(256, 0);
        r.set_max_dest_rd_atomic(32);
        // More atomics in flight than the driver's 16 remembered results.
        for psn in 0..32 {
            r.on_request(&fetch_add(psn, 8, 3), &mut io).unwrap();
        }
        assert_eq!(io.atomics.len(), 32);
        for psn in 0..32 {
            let again = r.on_request(&fetch_add(psn, 8, 3), &mut io);
            assert_eq!(again, Err(Discard::Psn));
            assert_eq!(io.atomic_acks.last(), Some(&(psn, 3 * u64::from(psn))));
        }
        assert_eq!(io.atomics.len(), 32, "never executed again");
        // Another address at the same PSN is not the same request.
        assert_eq!(
            r.on_request(&fetch_add(5, 16, 3), &mut io),
            Err(Discard::Duplicate)
        );
        // The newest max_dest_rd_atomic are kept.
        r.set_max_dest_rd_atomic(2);
        r.on_request(&fetch_add(32, 8, 3), &mut io).unwrap();
        assert_eq!(
            r.on_request(&fetch_add(30, 8, 3), &mut io),
            Err(Discard::Duplicate)
        );
        assert_eq!(
            r.on_request(&fetch_add(31, 8, 3), &mut io),
            Err(Discard::Psn)
        );
    }

    #[test]
    fn rnr_leaves_a_write_with_immediate_to_be_sent_again() {
        let mut io = TestIo::new(0);
        let mut r = responder(256, 0);
        let full = [2u8; 256];
        r.on_request(
            &pkt(Opcode::RcRdmaWriteFirst, 0, reth(0, 300), &full, false),
            &mut io,
        )
        .unwrap();
        let mut last = pkt(
            Opcode::RcRdmaWriteLastImm,
            1,
            Ext::default(),
            &full[..44],
            true,
        );
        last.ext.immdt = Some(ImmDt(9));
        assert_eq!(r.on_request(&last, &mut io), Err(Discard::NoRecv));
        let t = RnrTimer::from_code(3).unwrap();
        assert_eq!(io.acks, [(1, Syndrome::RnrNak(t))]);
        assert_eq!(r.epsn(), Psn::new(1));
        assert_eq!(io.writes.len(), 1, "the last packet wrote nothing");
        io.rq.push_back(7);
        r.on_request(&last, &mut io).unwrap();
        assert_eq!(io.recvs.len(), 1);
        let (wqe, c) = io.recvs[0];
        assert_eq!(
            (wqe, c.op, c.byte_len, c.imm),
            (7, WcOp::RecvRdmaImm, 300, Some(9))
        );
    }

    #[test]
    fn broken_requests_end_the_connection() {
        // A Middle with no First: invalid request, and the SEND in
        // progress completes with the error.
        let mut io = TestIo::new(2);
        let mut r = responder(256, 0);
        let full = [0u8; 256];
        r.on_request(
            &pkt(Opcode::RcSendFirst, 0, Ext::default(), &full, false),
            &mut io,
        )
        .unwrap();
        let bad = pkt(Opcode::RcRdmaWriteMiddle, 1, Ext::default(), &full, false);
        assert_eq!(r.on_request(&bad, &mut io), Err(Discard::Invalid));
        let inv = Syndrome::Nak(NakCode::InvalidRequest);
        assert_eq!(io.acks, [(1, inv)]);
        assert_eq!(io.recvs[0].1.status, WcStatus::RemInvReqErr);
        assert_eq!(io.fatal, Some(None));
        assert!(r.is_stopped());
        assert_eq!(r.on_request(&bad, &mut io), Err(Discard::State));
        // A First packet shorter than the MTU.
        let mut io = TestIo::new(2);
        let mut r = responder(256, 0);
        let short = pkt(Opcode::RcSendFirst, 0, Ext::default(), &full[..100], false);
        assert_eq!(r.on_request(&short, &mut io), Err(Discard::Length));
        // A key that does not cover the write.
        let mut io = TestIo::new(2);
        let mut r = responder(256, 0);
        let far = pkt(
            Opcode::RcRdmaWriteOnly,
            0,
            reth(1 << 20, 8),
            &full[..8],
            true,
        );
        assert_eq!(r.on_request(&far, &mut io), Err(Discard::Key));
        assert_eq!(io.acks, [(0, Syndrome::Nak(NakCode::RemoteAccessError))]);
        // Reads with no responder resources.
        let mut io = TestIo::new(2);
        let mut r = responder(256, 0);
        r.set_max_dest_rd_atomic(0);
        let read = pkt(Opcode::RcRdmaReadRequest, 0, reth(0, 8), &[], true);
        assert_eq!(r.on_request(&read, &mut io), Err(Discard::Invalid));
    }

    #[test]
    fn uc_loses_messages_but_not_receive_wqes() {
        let mut io = TestIo::new(3);
        let mut c = Config::new(Transport::Uc, 256);
        c.access = REMOTE_WRITE;
        let mut r: Responder<u32, 4, 4> = Responder::new(c, Psn::ZERO);
        let full = [0u8; 256];
        r.on_request(
            &pkt(Opcode::UcSendFirst, 0, Ext::default(), &full, false),
            &mut io,
        )
        .unwrap();
        // PSN 1 is lost: the message goes, its WQE waits for the next.
        let last = pkt(Opcode::UcSendLast, 2, Ext::default(), &full[..1], false);
        assert_eq!(r.on_request(&last, &mut io), Err(Discard::Psn));
        r.on_request(
            &pkt(Opcode::UcSendOnly, 3, Ext::default(), &full[..5], false),
            &mut io,
        )
        .unwrap();
        assert_eq!(io.recvs.len(), 1);
        assert_eq!((io.recvs[0].0, io.recvs[0].1.byte_len), (0, 5));
        assert!(io.acks.is_empty(), "UC answers nothing");
        // A broken UC request is dropped silently.
        let bad = pkt(Opcode::UcSendMiddle, 4, Ext::default(), &full, false);
        assert_eq!(r.on_request(&bad, &mut io), Err(Discard::Psn));
        assert!(!r.is_stopped());
    }

    #[test]
    fn xrc_answers_like_rc_with_xrc_read_responses() {
        let mut io = TestIo::new(1);
        let mut c = Config::new(Transport::Xrc, 256);
        c.access = REMOTE_READ | REMOTE_WRITE | REMOTE_ATOMIC;
        c.max_dest_rd_atomic = 4;
        c.min_rnr_timer = 3;
        let mut r: Responder<u32, 4, 4> = Responder::new(c, Psn::ZERO);
        let x = |ext: Ext| Ext {
            xrceth: Some(Xrceth { srqn: 9 }),
            ..ext
        };
        // An RC request is another transport's: dropped, unanswered.
        let rc = pkt(Opcode::RcSendOnly, 0, Ext::default(), &[], true);
        assert_eq!(r.on_request(&rc, &mut io), Err(Discard::Invalid));
        assert!(io.acks.is_empty() && io.fatal.is_none() && !r.is_stopped());
        assert_eq!((r.epsn(), io.rq.len()), (Psn::ZERO, 1));
        // A SEND with AckReq is acknowledged (the driver sends an XRC
        // ACKNOWLEDGE: `Opcode::acknowledge`).
        let send = pkt(Opcode::XrcSendOnly, 0, x(Ext::default()), b"abcd", true);
        r.on_request(&send, &mut io).unwrap();
        assert_eq!(io.acks, [(0, Syndrome::ACK)]);
        assert_eq!(io.recvs.len(), 1);
        assert_eq!(
            Opcode::acknowledge(r.config().transport),
            Opcode::XrcAcknowledge
        );
        // A read is answered with XRC read responses.
        let read = pkt(Opcode::XrcRdmaReadRequest, 1, x(reth(0, 600)), &[], true);
        r.on_request(&read, &mut io).unwrap();
        let ops: Vec<Opcode> = io.reads.iter().map(|s| s.opcode).collect();
        assert_eq!(
            ops,
            [
                Opcode::XrcRdmaReadResponseFirst,
                Opcode::XrcRdmaReadResponseMiddle,
                Opcode::XrcRdmaReadResponseLast,
            ]
        );
        assert_eq!(r.epsn(), Psn::new(4));
        // An atomic is executed and answered once.
        let mut fa = fetch_add(4, 8, 1);
        fa.opcode = Opcode::XrcFetchAdd;
        fa.ext = x(fa.ext);
        r.on_request(&fa, &mut io).unwrap();
        assert_eq!(r.on_request(&fa, &mut io), Err(Discard::Psn));
        assert_eq!(io.atomics.len(), 1);
        assert_eq!(io.atomic_acks, [(4, 0), (4, 0)]);
        // No receive WQE: an RNR NAK; a gap: one sequence NAK.
        let send = pkt(Opcode::XrcSendOnly, 5, x(Ext::default()), &[], true);
        assert_eq!(r.on_request(&send, &mut io), Err(Discard::NoRecv));
        assert!(matches!(io.acks[1], (5, Syndrome::RnrNak(_))));
        let later = pkt(Opcode::XrcSendOnly, 7, x(Ext::default()), &[], true);
        assert_eq!(r.on_request(&later, &mut io), Err(Discard::Psn));
        assert_eq!(io.acks[2], (5, SEQ));
    }

    /// A message of a request stream, as the requester would cut it.
    #[derive(Clone, Debug)]
    struct Msg {
        op: u8,
        len: u32,
    }

    /// One request packet of a stream, and what it does when executed.
    #[derive(Clone, Debug)]
    struct Req {
        opcode: Opcode,
        psn: Psn,
        ext: Ext,
        len: usize,
        ack_req: bool,
    }

    const MTU: u32 = 256;

    /// Cuts messages into packets from PSN `psn`. Returns the packets and
    /// the PSN after the last.
    fn stream(msgs: &[Msg], mut psn: Psn) -> (Vec<Req>, Psn) {
        use crate::wr::SendOp;
        let mut out = Vec::new();
        let mut off = 0u64;
        for m in msgs {
            let op = [
                SendOp::Send,
                SendOp::SendImm,
                SendOp::RdmaWrite,
                SendOp::RdmaWriteImm,
                SendOp::RdmaRead,
                SendOp::CmpSwap,
                SendOp::FetchAdd,
            ][usize::from(m.op)];
            let va = VA + off;
            off = (off + 4096) % 32768;
            match op {
                SendOp::RdmaRead => {
                    out.push(Req {
                        opcode: Opcode::RcRdmaReadRequest,
                        psn,
                        ext: reth(va - VA, m.len),
                        len: 0,
                        ack_req: true,
                    });
                    psn = psn.wrapping_add(seg::packet_count(m.len, MTU).unwrap());
                }
                SendOp::CmpSwap | SendOp::FetchAdd => {
                    let opcode = seg::request_opcode(Transport::Rc, op, Position::Only).unwrap();
                    let ext = Ext {
                        atomic_eth: Some(AtomicEth {
                            va: va & !7,
                            rkey: RKEY,
                            swap_add: u64::from(m.len),
                            compare: 0,
                        }),
                        ..Ext::default()
                    };
                    out.push(Req {
                        opcode,
                        psn,
                        ext,
                        len: 0,
                        ack_req: true,
                    });
                    psn = psn.next();
                }
                _ => {
                    let n = seg::packet_count(m.len, MTU).unwrap();
                    for i in 0..n {
                        let pos = seg::position(i, n);
                        let opcode = seg::request_opcode(Transport::Rc, op, pos).unwrap();
                        let mut ext = Ext::default();
                        if opcode.operation() == Operation::RdmaWrite && pos.starts_message() {
                            ext = reth(va - VA, m.len);
                        }
                        if opcode.has_immediate() {
                            ext.immdt = Some(ImmDt(psn.get()));
                        }
                        let len = (m.len - i * MTU).min(MTU) as usize;
                        out.push(Req {
                            opcode,
                            psn,
                            ext,
                            len,
                            ack_req: pos.ends_message() || i % 3 == 2,
                        });
                        psn = psn.next();
                    }
                }
            }
        }
        (out, psn)
    }

    fn msg() -> impl Strategy<Value = Msg> {
        (0u8..7, 0u32..900).prop_map(|(op, len)| Msg { op, len })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Request packets delivered lost, duplicated and out of order,
        /// then once more in order from the expected PSN (what a
        /// requester's go-back sends): every packet takes effect exactly
        /// once, in order; the expected PSN never goes back; one sequence
        /// NAK per gap; and the MSN counts the messages.
        #[test]
        fn each_request_takes_effect_once(
            near_wrap in any::<bool>(),
            start in any::<u32>(),
            msgs in proptest::collection::vec(msg(), 1..24),
            order in proptest::collection::vec(any::<u16>(), 0..120),
        ) {
            let start = if near_wrap { 0xff_ffff - start % 40 } else { start & 0xff_ffff };
            let (reqs, end) = stream(&msgs, Psn::new(start));
            let mut io = TestIo::new(1000);
            let mut r = responder(MTU, start);
            r.set_max_dest_rd_atomic(16);
            let payload = [0x5au8; MTU as usize];
            let deliver = |r: &mut Responder<u32, 64, 64>, io: &mut TestIo, q: &Req| {
                let before = r.epsn();
                let naks = io.acks.iter().filter(|a| a.1 == SEQ).count();
                let p = pkt(q.opcode, q.psn.get(), q.ext, &payload[..q.len], q.ack_req);
                let res = r.on_request(&p, io);
                prop_assert!(r.epsn().diff(before) >= 0, "epsn went back");
                if r.epsn() == before && before.diff(q.psn) < 0 {
                    prop_assert_eq!(res, Err(Discard::Psn));
                }
                let new_naks = io.acks.iter().filter(|a| a.1 == SEQ).count() - naks;
                prop_assert!(new_naks <= 1);
                if new_naks == 1 {
                    prop_assert_eq!(io.acks.last().map(|a| a.0), Some(before.get()));
                }
                Ok(())
            };
            let mut nak_open = false;
            for i in order {
                let q = &reqs[usize::from(i) % reqs.len()];
                let naks = io.acks.iter().filter(|a| a.1 == SEQ).count();
                let before = r.epsn();
                deliver(&mut r, &mut io, q)?;
                let sent = io.acks.iter().filter(|a| a.1 == SEQ).count() > naks;
                prop_assert!(!(sent && nak_open), "a second NAK for one gap");
                if r.epsn() != before {
                    nak_open = false;
                }
                nak_open |= sent;
            }
            let from = r.epsn();
            for q in reqs.iter().filter(|q| q.psn.diff(from) >= 0) {
                deliver(&mut r, &mut io, q)?;
            }
            prop_assert!(io.fatal.is_none());
            prop_assert_eq!(r.epsn(), end);
            // Writes, atomics and receives: each once, in stream order.
            let want_writes: Vec<usize> = reqs
                .iter()
                .filter(|q| q.opcode.operation() == Operation::RdmaWrite && q.len != 0)
                .map(|q| q.len)
                .collect();
            let got_writes: Vec<usize> = io.writes.iter().map(|w| w.1).collect();
            prop_assert_eq!(got_writes, want_writes);
            let want_atomics = reqs
                .iter()
                .filter(|q| q.ext.atomic_eth.is_some())
                .count();
            prop_assert_eq!(io.atomics.len(), want_atomics);
            let want_recvs = msgs.iter().filter(|m| matches!(m.op, 0 | 1 | 3)).count();
            prop_assert_eq!(io.recvs.len(), want_recvs);
            for (i, (wqe, c)) in io.recvs.iter().enumerate() {
                prop_assert_eq!(*wqe as usize, i);
                prop_assert_eq!(c.status, WcStatus::Success);
            }
            // CAST: fewer than 24 messages.
            prop_assert_eq!(r.msn(), msgs.len() as u32);
        }
    }
}
