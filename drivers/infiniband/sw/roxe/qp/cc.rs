// SPDX-License-Identifier: GPL-2.0

//! Congestion notification for connected QPs (issue 17), both ends.
//!
//! Notification point: a packet for a QP that arrives with IP ECN CE makes
//! the QP send a CNP back to its peer's QP, at most one per
//! [`Notifier::GAP_US`]. Reaction point: a CNP from the QP's peer moves
//! the QP's DCQCN rate ([`Rate::on_cnp`]), which paces the requester's
//! packets ([`Congestion::pace`], [`Congestion::sent`]) and is shown by
//! `rdma -dd res show qp` (`Documentation/congestion.md`).

use super::QpState;
use crate::counters::{Drop, Event};
use crate::device::Roxe;
use crate::proto::cnp::Notifier;
use crate::proto::dcqcn::{Cnp, Params, Rate};
use crate::proto::qp::State;
use crate::proto::udp;
use crate::rdma::qp::{Qp, ResAttrs};
use kernel::c_str;
use kernel::prelude::*;

use crate::rdma::tunables::LINE_KBPS;

/// The defaults, for a QP's first rate (the line rate, whatever the
/// parameters say).
const DEFAULTS: Params = Params::new(LINE_KBPS);

/// The reaction point's constants now: the `dcqcn_*` module parameters,
/// bounded ([`Params::tuned`]). Read on every use, so a change applies to
/// every QP at once.
fn params() -> Params {
    Params::tuned(LINE_KBPS, &crate::rdma::tunables::dcqcn())
}

/// One QP's congestion state.
pub(crate) struct Congestion {
    notifier: Notifier,
    rate: Rate,
}

impl Congestion {
    pub(crate) const fn new() -> Self {
        Congestion {
            notifier: Notifier::new(),
            rate: Rate::new(&DEFAULTS),
        }
    }
}

/// Bytes a packet takes on the wire besides its payload, for the pacing
/// clock: Ethernet, IPv4, UDP, BTH and ICRC (14 + 20 + 8 + 12 + 4). An
/// extended header or IPv6 adds a little the clock does not count.
pub(crate) const PACKET_OVERHEAD: u32 = 58;

impl Congestion {
    /// Microseconds until the requester may send its next packet, or 0.
    /// A QP that has had no CNP, or has recovered to the line rate, is
    /// never held. The schedule may run one timer tick ahead of the
    /// clock, since the QP's timer cannot wait less than a tick.
    pub(crate) fn pace(&mut self) -> u32 {
        // The line rate is not a parameter: a QP at it pays one comparison.
        if !self.rate.limited(&DEFAULTS) {
            return 0;
        }
        let p = params();
        let now = now_us();
        self.rate.advance(&p, now);
        let tick = u64::from(crate::sync::timer::tick_us());
        // CAST: a wait is at most one packet's time at the floor rate
        // (4 KiB at the lowest floor, 1 kbit/s: 33 s).
        self.rate.wait_us(&p, now, tick).min(u64::from(u32::MAX)) as u32
    }

    /// The requester sent a packet with `payload` bytes: the pacing clock
    /// and DCQCN's byte counter move on.
    pub(crate) fn sent(&mut self, payload: u32) {
        if self.rate.limited(&DEFAULTS) {
            let p = params();
            let bytes = u64::from(payload) + u64::from(PACKET_OVERHEAD);
            self.rate.sent(&p, bytes, now_us());
        }
    }
}

/// Microseconds of the monotonic clock.
fn now_us() -> u64 {
    // CAST: the monotonic clock is not negative.
    (kernel::time::Ktime::ktime_get().to_ns() / 1000) as u64
}

/// A packet for connected QP `qp` arrived marked CE, with P_Key `pkey`:
/// counts it, and sends the peer a CNP unless one went out less than
/// [`Notifier::GAP_US`] ago.
pub(crate) fn marked(qp: &Qp<Roxe>, st: &mut QpState, pkey: u16) {
    let counters = &qp.device().data().counters;
    counters.event(Event::NpEcnMarked);
    if !qp.data().qp_type.is_connected() {
        return;
    }
    let Some(path) = st.path.as_ref() else {
        return;
    };
    if !st.cc.notifier.marked(now_us()) {
        return;
    }
    let dest = st.attr.dest_qp_num;
    let sport = udp::source_port(qp.qp_num(), dest);
    path.send_cnp(counters, sport, dest, pkey);
    counters.event(Event::NpCnpSent);
}

/// A CNP arrived for `qp`, in an IP datagram with header `ip`: taken if
/// `qp` is a connected QP past RTR and the CNP came from its peer's
/// address. Counted as handled (it cut the rate) or ignored.
pub(crate) fn take_cnp(qp: &Qp<Roxe>, ip: &[u8]) -> Result<(), Drop> {
    let this = qp.data();
    let mut st = this.state.lock();
    if !this.qp_type.is_connected() {
        return Err(Drop::Transport);
    }
    if !matches!(
        st.attr.state,
        State::Rtr | State::Rts | State::Sqd | State::Sqe
    ) {
        return Err(Drop::State);
    }
    if !st.path.as_ref().is_some_and(|p| p.carries(ip)) {
        return Err(Drop::Address);
    }
    let counters = &qp.device().data().counters;
    counters.event(match st.cc.rate.on_cnp(&params(), now_us()) {
        Cnp::Handled => Event::RpCnpHandled,
        Cnp::Ignored => Event::RpCnpIgnored,
    });
    Ok(())
}

/// `rdma -dd res show qp`: an RC or UC QP's DCQCN state, brought up to
/// now, and a reliable QP's congestion window (packets; it shrinks on
/// losses, `rust/proto`'s `Requester::cwnd`).
pub(crate) fn fill_res(qp: &Qp<Roxe>, out: &mut ResAttrs<'_>) -> Result {
    let t = qp.data().qp_type;
    if !t.is_connected() {
        return Ok(());
    }
    let (rate, target, alpha, cwnd) = {
        let mut st = qp.data().state.lock();
        let cwnd = st.req.cwnd();
        let r = &mut st.cc.rate;
        r.advance(&params(), now_us());
        (r.rate_kbps(), r.target_kbps(), r.alpha(), cwnd)
    };
    out.put_u64(c_str!("dcqcn_rate_kbps"), rate)?;
    out.put_u64(c_str!("dcqcn_target_kbps"), target)?;
    out.put_u64(c_str!("dcqcn_alpha_1024"), u64::from(alpha))?;
    if t.is_reliable() {
        out.put_u64(c_str!("cwnd_packets"), u64::from(cwnd))?;
    }
    Ok(())
}
