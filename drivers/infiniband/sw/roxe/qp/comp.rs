// SPDX-License-Identifier: GPL-2.0

//! The completer: ACKs, NAKs, atomic acknowledgements and read responses
//! for the requester, turned into send completions; and the QP timer
//! (retransmission timeout, end of an RNR wait, a requester kick). It runs
//! under the QP's state lock, from the receive hook and the timer. Its
//! state is [`CompState`].

use super::req::{
    complete_send, fail, msg_len, now_ms, outstanding, retry_due_in, send_pending, send_sges,
    this_dev_credits, WINDOW,
};
use super::QpState;
use crate::counters::{Drop, Event};
use crate::device::Roxe;
use crate::keys;
use crate::proto::access::LOCAL_WRITE;
use crate::proto::aeth::{NakCode, Syndrome};
use crate::proto::headers::Packet;
use crate::proto::opcode::Operation;
use crate::proto::psn::Psn;
use crate::proto::qp::State;
use crate::proto::responder::ScatterError;
use crate::proto::wr::{SendOp, WcStatus};
use crate::rdma::qp::{Qp, QpType};
use crate::uapi::SendWqe;
use crate::wqe::for_pieces;

/// The completer's state: what the responder has acknowledged, and the
/// retry budgets.
pub(crate) struct CompState {
    /// The oldest PSN not yet acknowledged.
    pub(crate) una: Psn,
    /// The next read response packet expected, counted from the
    /// read's first PSN.
    read_next: u32,
    /// Retries left after a timeout, and after an RNR NAK.
    pub(crate) retry_left: u8,
    pub(crate) rnr_left: u8,
    /// Waiting out an RNR NAK's delay.
    pub(crate) rnr_wait: bool,
    /// Went back after a gap and has not heard of progress since.
    retrying: bool,
    /// When (ms, `ktime_get`) the requester last sent a packet or heard of
    /// progress: the retry timeout counts from here, so that calls that
    /// send nothing (a duplicate ACK, a doorbell with the window full)
    /// cannot put it off.
    pub(crate) active_ms: i64,
}

impl CompState {
    pub(crate) const fn new() -> Self {
        Self {
            una: Psn::ZERO,
            read_next: 0,
            retry_left: 0,
            rnr_left: 0,
            rnr_wait: false,
            retrying: false,
            active_ms: 0,
        }
    }

    /// Nothing is outstanding: the requester's next PSN is `npsn`.
    pub(crate) fn reset(&mut self, npsn: Psn) {
        self.una = npsn;
        self.read_next = 0;
        self.rnr_wait = false;
        self.retrying = false;
    }
}

/// The completer: ACKs, NAKs and read responses for the requester.
pub(crate) fn complete(
    qp: &Qp<Roxe>,
    st: &mut QpState,
    pkt: &Packet<'_>,
) -> core::result::Result<(), Drop> {
    let this = qp.data();
    // An XRC target QP only responds; its initiator takes the answers.
    if !this.qp_type.is_reliable() || this.qp_type == QpType::XrcTgt {
        return Err(Drop::Transport);
    }
    let psn = pkt.bth.psn;
    if pkt.opcode.operation() == Operation::RdmaReadResponse {
        read_response(qp, st, pkt, psn)
    } else if pkt.opcode.operation() == Operation::AtomicAcknowledge {
        atomic_ack(qp, st, pkt, psn)
    } else {
        ack(qp, st, pkt, psn)
    }
}

/// An RDMA READ RESPONSE (or the empty one that answers an Atomic Write
/// or FLUSH): its data goes where the oldest WQE wants it, and the last
/// one completes that WQE.
fn read_response(
    qp: &Qp<Roxe>,
    st: &mut QpState,
    pkt: &Packet<'_>,
    psn: Psn,
) -> core::result::Result<(), Drop> {
    let this = qp.data();
    // The oldest unfinished WQE must be a read whose range holds `psn`.
    let idx = oldest_waiting(qp, st, psn)?;
    let (first, last, is_read) = st.req.wqe_psn(idx);
    if !is_read || !psn.in_range(first, last.next()) {
        return Err(Drop::Unexpected);
    }
    if psn.diff(st.req.npsn) >= 0 {
        // Not asked for (any more): after going back, a read waiting
        // for credits has not asked again, and what is still arriving
        // from before must not complete it.
        return Err(Drop::Unexpected);
    }
    let i = first.distance(psn);
    if i != st.comp.read_next {
        // A gap: ask again from the start of the read.
        if i > st.comp.read_next && go_back_once(qp, st) {
            count(qp, Event::ReqResponseGap);
        }
        return Err(Drop::Psn);
    }
    // Its place in the answer: a Last or Only at the read's last PSN,
    // a First or Only at its first. (In between anything goes: a read
    // asked for in parts, or again part-way, is answered in parts, each
    // from a First to a Last.)
    let pos = pkt.opcode.position();
    if (psn == last && !pos.ends_message()) || (i == 0 && !pos.starts_message()) {
        return Err(Drop::Unexpected);
    }
    let w = this.sq.read(idx);
    let op = SendOp::from_raw(w.opcode).unwrap_or(SendOp::RdmaRead);
    let mtu = st.path_mtu();
    let off = i.saturating_mul(mtu);
    if op == SendOp::RdmaRead {
        // Each response carries what the responder cuts at this path
        // MTU: a full MTU, or the rest at the end. Anything else would
        // put the bytes in the wrong place or complete the read short.
        let total = msg_len(this, idx, &w).unwrap_or(0);
        if pkt.payload.len() != total.saturating_sub(off).min(mtu) as usize {
            return Err(Drop::Length);
        }
    }
    let status = match op {
        SendOp::RdmaRead => match scatter_read(qp, idx, &w, off, pkt.payload) {
            Ok(()) => Ok(()),
            Err(ScatterError::Failed(e)) => Err(e),
            Err(ScatterError::NotPresent) => {
                wait_for_fault(qp, st);
                return Err(Drop::NotPresent);
            }
        },
        // An Atomic Write's answer carries no data: its SGE is the
        // source, never written.
        SendOp::AtomicWrite | SendOp::Flush if pkt.payload.is_empty() => Ok(()),
        _ => return Err(Drop::Unexpected),
    };
    st.comp.read_next += 1;
    st.comp.una = psn.next();
    progress(st);
    if op == SendOp::Flush {
        // The peer takes this QP's FLUSH ICRC: keep it.
        st.req.flush_icrc_known = true;
    }
    if op == SendOp::RdmaRead {
        st.req.response_arrived(this_dev_credits(qp));
    }
    if let Err(e) = status {
        st.comp.read_next = 0;
        fail(qp, st, &w, op, e);
        return Ok(());
    }
    if psn == last {
        st.comp.read_next = 0;
        st.req.reads_out = st.req.reads_out.saturating_sub(1);
        // CAST: messages are at most 2 GiB.
        let len = msg_len(this, idx, &w).unwrap_or(0);
        complete_send(qp, st, &w, op, WcStatus::Success, len);
        ack_up_to(qp, st, psn);
        if !outstanding(st) {
            // Nothing asked for is still due: a responder that answered
            // short leaves nothing held.
            st.req.release_reads(this_dev_credits(qp));
        }
        send_pending(qp, st);
    } else if st.req.sq_pkt != 0 {
        // The window moved: more of this read may be requested.
        send_pending(qp, st);
    }
    Ok(())
}

/// An ATOMIC ACKNOWLEDGE: the original value goes to the oldest WQE, a
/// CmpSwap or FetchAdd, which completes.
fn atomic_ack(
    qp: &Qp<Roxe>,
    st: &mut QpState,
    pkt: &Packet<'_>,
    psn: Psn,
) -> core::result::Result<(), Drop> {
    let this = qp.data();
    let idx = oldest_waiting(qp, st, psn)?;
    let (first, _, waits) = st.req.wqe_psn(idx);
    let w = this.sq.read(idx);
    let op = SendOp::from_raw(w.opcode).unwrap_or(SendOp::Send);
    if !waits || first != psn || !matches!(op, SendOp::CmpSwap | SendOp::FetchAdd) {
        return Err(Drop::Unexpected);
    }
    let orig = pkt.ext.atomic_ack_eth.ok_or(Drop::Unexpected)?.orig;
    let placed = scatter_read(qp, idx, &w, 0, &orig.to_ne_bytes());
    if placed == Err(ScatterError::NotPresent) {
        // Asked again, the responder answers from its memory of the
        // atomic and does not run it twice.
        wait_for_fault(qp, st);
        return Err(Drop::NotPresent);
    }
    st.comp.una = psn.next();
    progress(st);
    st.req.reads_out = st.req.reads_out.saturating_sub(1);
    match placed {
        Ok(()) => complete_send(qp, st, &w, op, WcStatus::Success, 8),
        Err(ScatterError::Failed(e)) => {
            fail(qp, st, &w, op, e);
            return Ok(());
        }
        Err(ScatterError::NotPresent) => return Err(Drop::NotPresent),
    }
    ack_up_to(qp, st, psn);
    send_pending(qp, st);
    Ok(())
}

/// An ACKNOWLEDGE: an ACK completes what it covers, a NAK fails the
/// oldest WQE or rewinds the requester, an RNR NAK makes it wait.
fn ack(
    qp: &Qp<Roxe>,
    st: &mut QpState,
    pkt: &Packet<'_>,
    psn: Psn,
) -> core::result::Result<(), Drop> {
    let this = qp.data();
    let aeth = pkt.ext.aeth.ok_or(Drop::Unexpected)?;
    let syndrome = Syndrome::from_u8(aeth.syndrome);
    // A NAK names a packet sent and not yet acknowledged: at or after
    // `una`, and within the window (`npsn` itself may have gone back
    // behind a NAK still in flight). An older one (delayed, duplicated) or
    // one out of reach (forged without the live PSN) must not fail or
    // rewind today's work. An ACK may also repeat the last one (`una - 1`,
    // what a responder answers a duplicate with); one further out would
    // complete everything sent, and a blind forger's random PSN lies ahead
    // half the time.
    let window_end = Psn::new(st.comp.una.get().wrapping_add(WINDOW + 1));
    let from = match syndrome {
        Some(Syndrome::Ack(_)) => Some(st.comp.una.wrapping_sub(1)),
        Some(Syndrome::Nak(_) | Syndrome::RnrNak(_)) => Some(st.comp.una),
        None => None,
    };
    if from.is_some_and(|f| !psn.in_range(f, window_end)) {
        return Err(Drop::Psn);
    }
    match syndrome {
        Some(Syndrome::Ack(_)) => {
            ack_up_to(qp, st, psn);
            send_pending(qp, st);
            Ok(())
        }
        Some(Syndrome::Nak(code)) => {
            // Everything before the NAKed PSN was done.
            ack_up_to(qp, st, psn.wrapping_sub(1));
            if code == NakCode::PsnSequenceError {
                // Resend from the oldest unacknowledged WQE.
                if go_back_once(qp, st) {
                    count(qp, Event::ReqNakSeq);
                }
                return Ok(());
            }
            // The oldest WQE may be part-sent (a message longer than the
            // window): it counts as outstanding, as `outstanding` says.
            if !outstanding(st) {
                return Err(Drop::Unexpected);
            }
            let w = this.sq.read(st.sq_consumer);
            let op = SendOp::from_raw(w.opcode).unwrap_or(SendOp::Send);
            let status = match code {
                NakCode::RemoteAccessError => WcStatus::RemAccessErr,
                NakCode::RemoteOperationalError => WcStatus::RemOpErr,
                _ => WcStatus::RemInvReqErr,
            };
            fail(qp, st, &w, op, status);
            Ok(())
        }
        Some(Syndrome::RnrNak(_)) if st.comp.rnr_wait && psn == st.comp.una => {
            // The same RNR NAK again (duplicated on the way) while its wait
            // runs: it must not cost a second retry.
            Err(Drop::Psn)
        }
        Some(Syndrome::RnrNak(t)) => {
            ack_up_to(qp, st, psn.wrapping_sub(1));
            // The oldest WQE may be part-sent (a message longer than the
            // window): it counts as outstanding, as `outstanding` says.
            if !outstanding(st) {
                return Err(Drop::Unexpected);
            }
            count(qp, Event::ReqRnrNak);
            rnr_nak(qp, st, t.usecs());
            Ok(())
        }
        None => Err(Drop::Unexpected),
    }
}

/// A response (read or atomic) at `psn`: if the requester still awaits it,
/// the sends before the oldest read or atomic are acknowledged by it, and
/// that WQE's index is returned. Only an awaited response stands for such
/// an ACK: a stale one (duplicated, or from before a go-back) must not
/// complete sends that may never have arrived.
fn oldest_waiting(qp: &Qp<Roxe>, st: &mut QpState, psn: Psn) -> core::result::Result<u32, Drop> {
    if !awaited(st, psn) {
        return Err(Drop::Unexpected);
    }
    ack_before_read(qp, st);
    if !outstanding(st) {
        return Err(Drop::Unexpected);
    }
    Ok(st.sq_consumer)
}

/// Counts a requester event on `qp`'s device.
fn count(qp: &Qp<Roxe>, e: Event) {
    qp.device().data().counters.event(e);
}

/// Whether `psn` is one the requester sent and still waits to hear of:
/// at or after `una`, before `npsn`.
fn awaited(st: &QpState, psn: Psn) -> bool {
    psn.in_range(st.comp.una, st.req.npsn)
}

/// Rewinds the requester to the first unacknowledged PSN (go-back-N): the
/// oldest unfinished WQE is sent again from the packet the responder has
/// not acknowledged (a read asks again for the rest), and everything after
/// it again in full.
fn go_back(qp: &Qp<Roxe>, st: &mut QpState) {
    // The reads asked again take their credits again.
    st.req.release_reads(&qp.device().data().read_credits);
    if outstanding(st) {
        let (first, last, waits) = st.req.wqe_psn(st.sq_consumer);
        let resume = if st.comp.una.in_range(first, last.next()) {
            st.comp.una
        } else {
            first
        };
        st.req.sq_sent = st.sq_consumer;
        // A WQE that failed locally behind the unacknowledged ones is
        // found again when sending reaches it; until then an ACK that
        // completes everything resent must not fail the oldest WQE, still
        // to be resent, with its status.
        st.req.sq_blocked = None;
        st.req.sq_pkt = first.distance(resume);
        st.req.npsn = resume;
        st.comp.una = resume;
        // A read resumed part-way is still outstanding; its responses so
        // far count.
        st.comp.read_next = if waits { st.req.sq_pkt } else { 0 };
        st.req.reads_out = u32::from(waits && st.req.sq_pkt != 0);
    }
}

/// Goes back after a gap, unless a go-back is already under way: the
/// packets still arriving from before it would each trigger another.
/// Returns whether it went back.
fn go_back_once(qp: &Qp<Roxe>, st: &mut QpState) -> bool {
    if st.comp.retrying {
        return false;
    }
    st.comp.retrying = true;
    go_back(qp, st);
    send_pending(qp, st);
    true
}

/// The QP's timer: a retransmission timeout or the end of an RNR wait.
pub(crate) fn on_timer(qp: &Qp<Roxe>) {
    let this = qp.data();
    let mut st = this.state.lock();
    let st = &mut *st;
    if this
        .posted
        .swap(false, core::sync::atomic::Ordering::AcqRel)
    {
        // A kernel consumer posted with interrupts off.
        super::run_kernel_posts(qp, st);
    }
    // UD datagrams kept for ODP memory (their timer re-arms while any are
    // left; a kick below may arm it sooner, which only looks again early).
    super::resp::land_parked(qp, st);
    if core::mem::take(&mut st.req.kick) {
        // More to send after a full budget.
        send_pending(qp, st);
        return;
    }
    if !this.qp_type.is_reliable() {
        return;
    }
    if !matches!(st.attr.state, State::Rts | State::Sqd) {
        st.comp.rnr_wait = false;
        return;
    }
    if st.comp.rnr_wait {
        // The RNR NAK already rewound the requester, so nothing counts as
        // outstanding now: send again from there.
        st.comp.rnr_wait = false;
    } else if !outstanding(st) {
        return;
    } else if let Some(left) = retry_due_in(st) {
        // Armed early (a kick's timer that found nothing to send), or the
        // QP sent or heard something since.
        qp.arm_timer(left);
        return;
    } else if st.comp.retry_left == 0 {
        count(qp, Event::ReqRetryExceeded);
        let w = this.sq.read(st.sq_consumer);
        let op = SendOp::from_raw(w.opcode).unwrap_or(SendOp::Send);
        fail(qp, st, &w, op, WcStatus::RetryExcErr);
        return;
    } else {
        count(qp, Event::ReqTimeout);
        st.comp.retry_left -= 1;
        // The next timeout counts from this retry, whether or not
        // anything can be sent now (in SQD nothing is).
        st.comp.active_ms = now_ms();
        // A FLUSH that went unanswered may have met rxe, which drops the
        // standard ICRC on FLUSH and wants its own: until a FLUSH of this
        // QP is answered, each timeout of one switches between the two
        // (Documentation/datapath.md, Flush).
        if !st.req.flush_icrc_known
            && SendOp::from_raw(this.sq.read(st.sq_consumer).opcode) == Some(SendOp::Flush)
        {
            st.req.flush_icrc_rxe = !st.req.flush_icrc_rxe;
        }
    }
    st.comp.retrying = true;
    go_back(qp, st);
    send_pending(qp, st);
}

/// Handles an RNR NAK: wait the time the responder asked for, then resend
/// from the oldest unacknowledged WQE, `rnr_retry` times (7 is forever).
fn rnr_nak(qp: &Qp<Roxe>, st: &mut QpState, usecs: u32) {
    if st.comp.rnr_left == 0 {
        count(qp, Event::ReqRnrRetryExceeded);
        let w = qp.data().sq.read(st.sq_consumer);
        let op = SendOp::from_raw(w.opcode).unwrap_or(SendOp::Send);
        fail(qp, st, &w, op, WcStatus::RnrRetryExcErr);
        return;
    }
    if st.attr.rnr_retry != 7 {
        st.comp.rnr_left -= 1;
    }
    go_back(qp, st);
    st.comp.rnr_wait = true;
    // The RNR timer below replaces any pending kick's expiry, and its end
    // resumes sending; a kick left set would take that timer's turn and
    // send nothing (RNR wait), leaving the queue stalled.
    st.req.kick = false;
    qp.arm_timer(usecs.div_ceil(1000).max(1));
}

/// A response's data could not land: the local buffer is paged on demand
/// and not mapped yet, and a fault was asked for. Ask again from the first
/// response missing after a short wait, as after an RNR NAK, without
/// spending a retry. (A fault that fails makes the next landing an error,
/// so this ends.)
fn wait_for_fault(qp: &Qp<Roxe>, st: &mut QpState) {
    go_back(qp, st);
    st.comp.rnr_wait = true;
    st.req.kick = false;
    qp.arm_timer(1);
}

/// Completes every sent WQE, up to the first read, whose last PSN is at or
/// before `psn`.
fn ack_up_to(qp: &Qp<Roxe>, st: &mut QpState, psn: Psn) {
    let before = st.sq_consumer;
    ack_loop(qp, st, psn);
    if st.sq_consumer != before {
        progress(st);
    }
    // An ACK does not stand for read responses or atomic results that never
    // arrived: `una` stops at the first of those still missing.
    let mut acked = psn.next();
    if outstanding(st) {
        let (first, _, waits) = st.req.wqe_psn(st.sq_consumer);
        if waits {
            let got = first.wrapping_add(st.comp.read_next);
            if got.diff(acked) < 0 {
                acked = got;
            }
        }
    }
    if acked.wrapping_sub(1).in_range(st.comp.una, st.req.npsn) {
        st.comp.una = acked;
        progress(st);
    }
}

/// The responder acknowledged something new: the retry budgets start
/// again, and a later gap may trigger a new go-back.
fn progress(st: &mut QpState) {
    st.comp.active_ms = now_ms();
    st.comp.retrying = false;
    st.comp.retry_left = st.attr.retry_cnt;
    st.comp.rnr_left = st.attr.rnr_retry;
}

fn ack_loop(qp: &Qp<Roxe>, st: &mut QpState, psn: Psn) {
    let this = qp.data();
    while st.sq_consumer != st.req.sq_sent {
        let idx = st.sq_consumer;
        let (_, last, is_read) = st.req.wqe_psn(idx);
        if is_read || psn.diff(last) < 0 {
            break;
        }
        let w = this.sq.read(idx);
        let op = SendOp::from_raw(w.opcode).unwrap_or(SendOp::Send);
        let len = msg_len(this, idx, &w).unwrap_or(0);
        complete_send(qp, st, &w, op, WcStatus::Success, len);
    }
    if st.sq_consumer == st.req.sq_sent {
        if let Some(status) = st.req.sq_blocked.take() {
            let w = this.sq.read(st.sq_consumer);
            let op = SendOp::from_raw(w.opcode).unwrap_or(SendOp::Send);
            fail(qp, st, &w, op, status);
        }
    }
}

/// A read response implicitly acknowledges the sends before the read.
fn ack_before_read(qp: &Qp<Roxe>, st: &mut QpState) {
    while st.sq_consumer != st.req.sq_sent {
        let (_, last, is_read) = st.req.wqe_psn(st.sq_consumer);
        if is_read {
            return;
        }
        let before = st.sq_consumer;
        ack_up_to(qp, st, last);
        if st.sq_consumer == before {
            return;
        }
    }
}

/// Writes a read response's payload into the local SGEs of read WQE `idx`.
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
                m.write(m.check(va, src.len() as u32, LOCAL_WRITE)?, src)
            })
        },
    )
}
