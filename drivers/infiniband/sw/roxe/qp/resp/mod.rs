// SPDX-License-Identifier: GPL-2.0

//! The responder: request packets (SEND, RDMA WRITE, RDMA READ, atomics,
//! Atomic Write, FLUSH, UD datagrams) to memory, receive completions,
//! ACKs, NAKs and read responses. It runs from the UDP receive hook
//! (softirq) under the QP's state lock.
//!
//! The RC and UC decisions (the expected PSN, duplicates, the opcode
//! sequence, lengths, what is answered and how, what moves the QP to ERR)
//! are `rust/proto`'s [`Responder`](proto::responder::Responder), the
//! machine the host tests run against the requester over a lossy link.
//! This file is its kernel side ([`Io`]): receive WQEs from the RQ or SRQ,
//! memory through the key table, and the answers on the wire. `recv`
//! holds the receive queues, the receive completions and UD.

mod recv;

pub(crate) use recv::{land_parked, recv_raw, recv_ud, Park};

use self::recv::{pop_queue, push_recv, recv_cqe};
use super::QpState;
use crate::counters::{Drop, Event};
use crate::device::Roxe;
use crate::keys::{self, KeyError};
use crate::limits::MAX_QP_RD_ATOM;
use crate::proto::access::{REMOTE_ATOMIC, REMOTE_READ, REMOTE_WRITE};
use crate::proto::aeth::{NakCode, Syndrome};
use crate::proto::headers::{self, Aeth, AtomicAckEth, Bth, Ext, Packet, DEFAULT_PKEY};
use crate::proto::opcode::{Opcode, Operation, Transport};
use crate::proto::psn::Psn;
use crate::proto::responder::{
    self as proto_resp, AtomicOp, Discard, Io, MemError, ReadSegment, RecvCompletion, ScatterError,
};
use crate::proto::udp;
use crate::rdma::qp::{Qp, QpType};
use crate::rdma::srq::{Srq, SrqRef};
use crate::tx::Path;
use crate::uapi::wc_flags;
use crate::wqe::RecvCopy;
use kernel::alloc::flags::GFP_KERNEL_ACCOUNT;
use kernel::prelude::*;

/// The responder of one QP: the `rust/proto` machine over the driver's
/// copies of receive WQEs, remembering as many reads and atomics as a QP
/// may grant (`max_dest_rd_atomic` is at most [`MAX_QP_RD_ATOM`]).
pub(crate) type Responder =
    proto_resp::Responder<RecvCopy, { MAX_QP_RD_ATOM as usize }, { MAX_QP_RD_ATOM as usize }>;

/// A fresh responder for `transport` (RESET, expecting PSN 0).
const fn fresh(transport: Transport) -> Responder {
    Responder::new(proto_resp::Config::new(transport, 1024), Psn::ZERO)
}

/// A fresh responder for transport `t` (UD QPs never use theirs: they get
/// an RC one), on the heap (about 7 KiB, for its memory of reads and
/// atomics), charged to the caller's memory cgroup. Built from constants
/// and not inlined, so no temporary of it lands on the stack of `create`,
/// which for QP1 runs deep in `rdma link add`.
#[inline(never)]
pub(crate) fn new_responder(t: Transport) -> Result<KBox<Responder>> {
    Ok(match t {
        Transport::Uc => KBox::new(const { fresh(Transport::Uc) }, GFP_KERNEL_ACCOUNT)?,
        Transport::Xrc => KBox::new(const { fresh(Transport::Xrc) }, GFP_KERNEL_ACCOUNT)?,
        _ => KBox::new(const { fresh(Transport::Rc) }, GFP_KERNEL_ACCOUNT)?,
    })
}

/// The kernel side of one QP's responder, for one packet.
struct Kernel<'a> {
    qp: &'a Qp<Roxe>,
    /// For an XRC target QP, the SRQ the packet names: receives come from
    /// it and complete to its CQ, and memory is checked against its PD.
    xrc: Option<&'a Srq<Roxe>>,
    /// The transport the answers go out on (RC or XRC).
    wire: Transport,
    path: Option<&'a Path>,
    dest_qpn: u32,
    rq_consumer: &'a mut u32,
    /// The QP's DCQCN state: read responses count against its rate.
    cc: &'a mut crate::qp::cc::Congestion,
    /// The responder refused a request and stopped: the QP goes to ERR,
    /// this receive WQE (if any) flushed first.
    fatal: Option<Option<RecvCopy>>,
}

impl Kernel<'_> {
    /// The PD memory is checked against: the QP's, or for an XRC target
    /// QP (which has none) the SRQ's.
    fn pd(&self) -> usize {
        self.xrc.map_or_else(|| self.qp.pd_id(), |s| s.pd_id())
    }

    fn asker(&self) -> keys::Asker {
        keys::Asker {
            pd: self.pd(),
            qpn: self.qp.qp_num(),
        }
    }

    /// Runs `f(mr, offset)` over `len` bytes at `va` through remote key
    /// `rkey` (checked against this QP's PD, and its QPN for a type 2
    /// window), if the key grants `need`.
    fn with_remote<R>(
        &self,
        rkey: u32,
        va: u64,
        len: u32,
        need: u32,
        f: impl FnOnce(&keys::MrData, usize) -> core::result::Result<R, KeyError>,
    ) -> core::result::Result<R, KeyError> {
        let table = &self.qp.device().data().mr_table;
        keys::with_rkey(table, self.asker(), rkey, va, len, need, f)
    }

    /// Sends a response with `ext` and `len` payload bytes read from `va`
    /// under `rkey`. Nothing goes out without a path (a QP before RTR
    /// never gets here).
    fn send(&self, bth: &Bth, ext: &Ext, rkey: u32, va: u64, len: u32) {
        let Some(path) = self.path else { return };
        let sport = udp::source_port(self.qp.qp_num(), self.dest_qpn);
        let counters = &self.qp.device().data().counters;
        let _ = path.send(counters, sport, bth, ext, len as usize, |buf| {
            buf.is_empty()
                || self
                    .with_remote(rkey, va, len, REMOTE_READ, |m, o| m.read(o, buf))
                    .is_ok()
        });
    }

    fn bare(&self, opcode: Opcode, psn: Psn, syndrome: Syndrome, msn: u32, orig: Option<u64>) {
        let bth = Bth::new(opcode, DEFAULT_PKEY, self.dest_qpn, psn);
        let ext = Ext {
            aeth: Some(Aeth {
                syndrome: syndrome.to_u8(),
                msn,
            }),
            atomic_ack_eth: orig.map(|orig| AtomicAckEth { orig }),
            ..Ext::default()
        };
        self.send(&bth, &ext, 0, 0, 0);
    }
}

impl Io for Kernel<'_> {
    type Recv = RecvCopy;

    fn pop_recv(&mut self) -> Option<RecvCopy> {
        match self.xrc {
            Some(srq) => crate::srq::pop(srq),
            None => pop_queue(self.qp, self.rq_consumer),
        }
    }

    fn scatter(&mut self, r: &RecvCopy, off: u64, data: &[u8]) -> Result<(), ScatterError> {
        r.scatter(self.qp.device(), self.pd(), off, data)
    }

    fn complete_recv(&mut self, r: RecvCopy, c: &RecvCompletion) {
        let mut cqe = recv_cqe(self.qp, r.wr_id(), c.op, c.status, c.byte_len);
        cqe.src_qp = self.dest_qpn;
        if let Some(imm) = c.imm {
            cqe.wc_flags |= wc_flags::WITH_IMM;
            cqe.imm_data = imm.to_be();
        }
        if let Some(rkey) = c.invalidated {
            cqe.wc_flags |= wc_flags::WITH_INV;
            cqe.imm_data = rkey;
        }
        match self.xrc.and_then(|s| s.xrc_cq()) {
            Some(cq) => {
                let _ = crate::cq::push(cq, cqe, c.solicited);
            }
            None => push_recv(self.qp, cqe, c.solicited),
        }
    }

    fn check_key(&mut self, rkey: u32, va: u64, len: u32, access: u32) -> bool {
        self.with_remote(rkey, va, len, access, |_, _| Ok(()))
            .is_ok()
    }

    fn write(&mut self, rkey: u32, va: u64, data: &[u8]) -> Result<(), MemError> {
        // CAST: a payload is at most one MTU.
        let len = data.len() as u32;
        self.with_remote(rkey, va, len, REMOTE_WRITE, |m, o| m.write(o, data))
            .map_err(mem_error)
    }

    fn atomic(&mut self, rkey: u32, va: u64, op: AtomicOp) -> Result<u64, MemError> {
        // Under the key table's lock, so no other atomic or Atomic Write
        // sees half of it.
        self.with_remote(rkey, va, 8, REMOTE_ATOMIC, |m, o| {
            m.atomic(o, |v| op.apply(v))
        })
        .map_err(mem_error)
    }

    fn readable_now(&mut self, rkey: u32, va: u64, len: u32) -> Result<(), MemError> {
        // An ODP MR: every page of the burst mapped. (A miss asks for the
        // fault; a fault that kept failing is an access error.)
        self.with_remote(rkey, va, len, REMOTE_READ, |m, o| m.probe(o, len as usize))
            .map_err(mem_error)
    }

    fn flush(&mut self, rkey: u32, va: u64, len: u32, need: u32, whole_mr: bool) -> bool {
        let checked = if whole_mr {
            let table = &self.qp.device().data().mr_table;
            keys::check_whole(table, rkey, self.pd(), need)
        } else {
            self.with_remote(rkey, va, len, need, |_, _| Ok(()))
        };
        if checked.is_err() {
            return false;
        }
        // Every write before the FLUSH was copied into memory by this same
        // receive path: a full fence makes them globally visible.
        core::sync::atomic::fence(core::sync::atomic::Ordering::SeqCst);
        true
    }

    fn invalidate(&mut self, rkey: u32) -> bool {
        let table = &self.qp.device().data().mr_table;
        keys::invalidate(table, self.pd(), Some(self.qp.qp_num()), rkey).is_ok()
    }

    fn send_ack(&mut self, psn: Psn, syndrome: Syndrome, msn: u32) {
        let counters = &self.qp.device().data().counters;
        match syndrome {
            Syndrome::Nak(NakCode::PsnSequenceError) => counters.event(Event::RespNakSeq),
            Syndrome::RnrNak(_) => counters.event(Event::RespRnrNak),
            _ => {}
        }
        self.bare(Opcode::acknowledge(self.wire), psn, syndrome, msn, None);
    }

    fn send_atomic_ack(&mut self, psn: Psn, orig: u64, msn: u32) {
        let op = Opcode::atomic_acknowledge(self.wire);
        self.bare(op, psn, Syndrome::ACK, msn, Some(orig));
    }

    fn send_read_response(&mut self, seg: &ReadSegment) {
        let mut bth = Bth::new(seg.opcode, DEFAULT_PKEY, self.dest_qpn, seg.psn);
        bth.pad = headers::pad_len(seg.len as usize);
        let ext = Ext {
            aeth: seg.msn.map(|msn| Aeth {
                syndrome: Syndrome::ACK.to_u8(),
                msn,
            }),
            ..Ext::default()
        };
        self.send(&bth, &ext, seg.rkey, seg.va, seg.len);
        // The payload and the AETH a First, Last or Only carries.
        let aeth = if seg.msn.is_some() { Aeth::LEN } else { 0 };
        // CAST: 4.
        self.cc.sent(seg.len.saturating_add(aeth as u32));
    }

    fn fatal(&mut self, held: Option<RecvCopy>) {
        self.fatal = Some(held);
    }
}

/// A refused access (a bad key) or a miss on memory paged on demand.
fn mem_error(e: KeyError) -> MemError {
    match e {
        KeyError::Absent { .. } => MemError::NotPresent,
        _ => MemError::Refused,
    }
}

/// Why the driver counts a packet the responder did not take.
fn drop_reason(d: Discard) -> Drop {
    match d {
        Discard::State => Drop::State,
        Discard::Psn => Drop::Psn,
        Discard::NoRecv => Drop::NoRecv,
        Discard::NotPresent => Drop::NotPresent,
        Discard::Key => Drop::Key,
        Discard::Length => Drop::Length,
        Discard::Duplicate => Drop::Duplicate,
        Discard::Invalid => Drop::Invalid,
    }
}

/// The SRQ an XRC request names in its XRCETH, if it is an XRC SRQ of the
/// target QP's own domain and, while the responder holds a receive WQE
/// (a SEND in progress, or one kept for a message to come again), the SRQ
/// that WQE came from. Anything else is dropped and counted
/// (`rx_drop_xrc_srq`) before the responder sees the packet: so a WQE is
/// only ever scattered into, completed or flushed with the SRQ it was
/// taken from.
fn xrc_srq(
    qp: &Qp<Roxe>,
    st: &QpState,
    pkt: &Packet<'_>,
) -> core::result::Result<SrqRef<Roxe>, Drop> {
    let num = pkt.ext.xrceth.ok_or(Drop::XrcSrq)?.srqn;
    let xrcd = qp.data().xrcd.ok_or(Drop::XrcSrq)?;
    let srq = crate::srq::find_xrc(qp.device(), num, xrcd).ok_or(Drop::XrcSrq)?;
    if let Some(w) = st.resp.held_recv() {
        if !crate::srq::came_from(w, &srq) {
            return Err(Drop::XrcSrq);
        }
    }
    Ok(srq)
}

/// Whether `pkt` asks `qp` for read responses that its DCQCN rate paces:
/// an RDMA READ request to an RC QP (the QPs that take CNPs).
pub(super) fn reads_paced(qp: &Qp<Roxe>, pkt: &Packet<'_>) -> bool {
    qp.data().qp_type == QpType::Rc && pkt.opcode.operation() == Operation::RdmaReadRequest
}

/// Takes one request packet of an RC, UC or XRC target QP; `roce` is the
/// packet as it arrived, BTH to ICRC.
///
/// An RC QP whose rate a CNP cut sends its read responses by that rate
/// too: a read request that would go over it is kept, with every request
/// after it (their answers must follow its responses), and the QP's timer
/// hands them to the responder when the rate allows. The responses of one
/// request go out together, and count against the rate
/// ([`Kernel::send_read_response`]): the rate holds over requests, not
/// within one (at most a read window, 64 KiB, from roxe's requester).
pub(crate) fn respond(
    qp: &Qp<Roxe>,
    st: &mut QpState,
    pkt: &Packet<'_>,
    roce: &[u8],
) -> core::result::Result<(), Drop> {
    if qp.data().qp_type == QpType::Rc {
        land_parked(qp, st);
        if !st.park.is_empty() {
            return recv::park_request(qp, st, roce, 0);
        }
        if reads_paced(qp, pkt) {
            let wait = st.cc.pace();
            if wait != 0 {
                return recv::park_request(qp, st, roce, wait);
            }
        }
    }
    respond_now(qp, st, pkt)
}

/// Hands one request packet to the responder now.
pub(super) fn respond_now(
    qp: &Qp<Roxe>,
    st: &mut QpState,
    pkt: &Packet<'_>,
) -> core::result::Result<(), Drop> {
    let xrc = if qp.data().qp_type == QpType::XrcTgt {
        Some(xrc_srq(qp, st, pkt)?)
    } else {
        None
    };
    // The path MTU follows the route, which may shrink after `modify`.
    let mtu = st.path_mtu();
    let (res, fatal) = {
        let QpState {
            resp,
            path,
            attr,
            rq_consumer,
            cc,
            ..
        } = st;
        resp.set_mtu(mtu);
        let mut io = Kernel {
            qp,
            xrc: xrc.as_deref(),
            wire: pkt.opcode.transport(),
            path: path.as_ref(),
            dest_qpn: attr.dest_qp_num,
            rq_consumer,
            cc,
            fatal: None,
        };
        let res = resp.on_request(pkt, &mut io);
        (res, io.fatal)
    };
    if let Some(held) = fatal {
        // IBTA's class A and C errors, as rxe: the NAK went out, and the QP
        // goes to ERR, which flushes every other receive (the one the
        // responder held first) and the send queue.
        super::flush_held(qp, xrc.as_deref(), held);
        st.attr.state = crate::proto::qp::State::Err;
        super::flush_all(qp, st);
    }
    res.map_err(drop_reason)
}
