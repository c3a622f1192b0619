// SPDX-License-Identifier: GPL-2.0

//! The completer's and the QP timer's kernel side: ACKs, NAKs, atomic
//! acknowledgements and read responses go to the requester machine
//! (`rust/proto`'s [`crate::proto::req::Requester`], which turns them into
//! send completions), and so does the QP timer (retransmission timeout,
//! end of an RNR wait, a requester kick), after the work the timer does
//! for the rest of the QP. Both run under the QP's state lock.

use super::req::{now_ms, with_req};
use super::QpState;
use crate::counters::Drop;
use crate::device::Roxe;
use crate::proto::headers::Packet;
use crate::proto::qp::State;
use crate::proto::req::Discard;
use crate::rdma::qp::{Qp, QpType};

/// Hands a response packet to the requester machine.
pub(crate) fn complete(
    qp: &Qp<Roxe>,
    st: &mut QpState,
    pkt: &Packet<'_>,
) -> core::result::Result<(), Drop> {
    // An XRC target QP only responds; its initiator takes the answers.
    let t = qp.data().qp_type;
    if !t.is_reliable() || t == QpType::XrcTgt {
        return Err(Drop::Transport);
    }
    with_req(qp, st, |r, io| r.on_response(pkt, now_ms(), io)).map_err(|d| match d {
        Discard::Transport => Drop::Transport,
        Discard::State => Drop::State,
        Discard::Psn => Drop::Psn,
        Discard::Unexpected => Drop::Unexpected,
        Discard::Length => Drop::Length,
        Discard::NotPresent => Drop::NotPresent,
    })
}

/// The QP's timer: kernel posts made with interrupts off, kept packets,
/// then the requester's kick, RNR wait or retransmission timeout.
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
    // Packets kept for ODP memory or for the QP's rate (their timer
    // re-arms while any are left; the requester below may arm it sooner,
    // which only looks again early).
    super::resp::land_parked(qp, st);
    // Only a QP that sends, or drains (SQD), has requester work due.
    if matches!(st.attr.state, State::Rts | State::Sqd) {
        st.renew_route(qp.device().data());
        with_req(qp, st, |r, io| r.on_timer(now_ms(), io));
    }
}
