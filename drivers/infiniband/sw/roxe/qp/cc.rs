// SPDX-License-Identifier: GPL-2.0

//! Congestion notification (issue 17), both ends.
//!
//! Notification point: a packet for a QP that arrives with IP ECN CE makes
//! the QP send a CNP back to the QP that sent it (a connected QP's peer, a
//! datagram's source QP and address), at most one per
//! [`Notifier::GAP_US`]. Reaction point: a CNP from the QP's peer moves
//! the QP's DCQCN rate ([`Rate::on_cnp`]), which paces the requester's
//! packets ([`Congestion::pace`], [`Congestion::sent`]) and is shown by
//! `rdma -dd res show qp` (`Documentation/congestion.md`). A UD QP keeps a
//! rate per destination address it sent to lately ([`Dest`]): a CNP from
//! one of them slows down only the datagrams to it.

use super::QpState;
use crate::counters::{Drop, Event};
use crate::device::Roxe;
use crate::proto::cnp::Notifier;
use crate::proto::dcqcn::{Cnp, Params, Rate};
use crate::proto::headers::{Packet, QPN_MASK};
use crate::proto::ip;
use crate::proto::qp::State;
use crate::proto::udp;
use crate::rdma::qp::{Qp, QpType, ResAttrs};
use crate::tx::Path;
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

/// How many destinations a UD QP keeps a rate for.
pub(crate) const UD_DESTS: usize = 8;

/// A destination a UD QP sent to, and its rate.
#[derive(Clone, Copy)]
struct Dest {
    /// The destination's GID (its IP address; IPv4 mapped).
    addr: [u8; 16],
    rate: Rate,
    /// When a datagram last went to it (us), to pick whom to forget.
    used: u64,
}

/// One QP's congestion state.
pub(crate) struct Congestion {
    notifier: Notifier,
    rate: Rate,
    /// A UD QP's destinations: [`UD_DESTS`] slots, made when the QP is
    /// created; none for other QPs.
    dests: KVec<Option<Dest>>,
}

impl Congestion {
    pub(crate) const fn new() -> Self {
        Congestion {
            notifier: Notifier::new(),
            rate: Rate::new(&DEFAULTS),
            dests: KVec::new(),
        }
    }

    /// Makes a UD QP's destination slots, charged to the caller.
    pub(crate) fn for_datagrams(&mut self) -> Result {
        self.dests
            .extend_with(UD_DESTS, None, GFP_KERNEL_ACCOUNT)
            .map_err(|_| ENOMEM)
    }

    /// Back to a new QP's state, keeping the destination slots.
    pub(crate) fn reset(&mut self) {
        self.notifier = Notifier::new();
        self.rate = Rate::new(&DEFAULTS);
        for d in self.dests.iter_mut() {
            *d = None;
        }
    }

    fn dest(&mut self, addr: &[u8; 16]) -> Option<&mut Dest> {
        self.dests.iter_mut().flatten().find(|d| d.addr == *addr)
    }

    /// Whether any destination of a UD QP is held below the line rate: if
    /// none is, no datagram waits and none needs its address looked up.
    pub(crate) fn any_dest_limited(&self) -> bool {
        self.dests
            .iter()
            .flatten()
            .any(|d| d.rate.limited(&DEFAULTS))
    }

    /// How many destinations a UD QP keeps a rate for, and the lowest of
    /// those rates (kbit/s), brought up to now.
    fn dests_now(&mut self) -> (u32, u64) {
        let (p, now) = (params(), now_us());
        let mut n = 0;
        let mut low = LINE_KBPS;
        for d in self.dests.iter_mut().flatten() {
            d.rate.advance(&p, now);
            n += 1;
            low = low.min(d.rate.rate_kbps());
        }
        (n, low)
    }

    /// Microseconds until a UD QP may send to `addr`, or 0.
    pub(crate) fn pace_to(&mut self, addr: &[u8; 16]) -> u32 {
        match self.dest(addr) {
            Some(d) => wait(&mut d.rate),
            None => 0,
        }
    }

    /// A UD QP sent a datagram of `payload` bytes to `addr`: that
    /// destination's pacing clock moves on. A destination not known yet
    /// is recorded, in place of the one used longest ago among those at
    /// the line rate; while all [`UD_DESTS`] are held below it, a new one
    /// is not recorded, and a CNP from it is not taken.
    pub(crate) fn sent_to(&mut self, addr: &[u8; 16], payload: u32) {
        let now = now_us();
        if let Some(d) = self.dest(addr) {
            d.used = now;
            sent(&mut d.rate, payload, now);
            return;
        }
        let d = Dest {
            addr: *addr,
            rate: Rate::new(&DEFAULTS),
            used: now,
        };
        // An empty slot, or the one used longest ago at the line rate.
        if let Some(slot) = self
            .dests
            .iter_mut()
            .filter(|s| !matches!(s, Some(d) if d.rate.limited(&DEFAULTS)))
            .min_by_key(|s| s.map_or(0, |d| d.used))
        {
            *slot = Some(d);
        }
    }
}

/// Microseconds until `rate` lets the next packet go, or 0. A rate that
/// has had no CNP, or has recovered to the line rate, never holds a packet.
/// The schedule may run one timer tick ahead of the clock, since a QP's
/// timer cannot wait less than a tick.
fn wait(rate: &mut Rate) -> u32 {
    // The line rate is not a parameter: a QP at it pays one comparison.
    if !rate.limited(&DEFAULTS) {
        return 0;
    }
    let p = params();
    let now = now_us();
    rate.advance(&p, now);
    let tick = u64::from(crate::sync::timer::tick_us());
    // CAST: a wait is at most one packet's time at the floor rate
    // (4 KiB at the lowest floor, 1 kbit/s: 33 s).
    rate.wait_us(&p, now, tick).min(u64::from(u32::MAX)) as u32
}

/// A packet with `payload` bytes went at `now` by `rate`: the pacing clock
/// and DCQCN's byte counter move on.
fn sent(rate: &mut Rate, payload: u32, now: u64) {
    if rate.limited(&DEFAULTS) {
        let bytes = u64::from(payload) + u64::from(PACKET_OVERHEAD);
        rate.sent(&params(), bytes, now);
    }
}

/// Bytes a packet takes on the wire besides its payload, for the pacing
/// clock: Ethernet, IPv4, UDP, BTH and ICRC (14 + 20 + 8 + 12 + 4). An
/// extended header or IPv6 adds a little the clock does not count.
pub(crate) const PACKET_OVERHEAD: u32 = 58;

impl Congestion {
    /// Microseconds until a connected QP's requester may send its next
    /// packet, or 0.
    pub(crate) fn pace(&mut self) -> u32 {
        wait(&mut self.rate)
    }

    /// A connected QP sent a packet with `payload` bytes.
    pub(crate) fn sent(&mut self, payload: u32) {
        // Unpaced, no clock is read.
        if self.rate.limited(&DEFAULTS) {
            sent(&mut self.rate, payload, now_us());
        }
    }
}

/// Microseconds of the monotonic clock.
fn now_us() -> u64 {
    // CAST: the monotonic clock is not negative.
    (kernel::time::Ktime::ktime_get().to_ns() / 1000) as u64
}

/// Packet `pkt` for `qp` arrived marked CE, in an IP datagram with header
/// `ip`: counts it, and sends a CNP to the QP that sent it, unless one
/// went out less than [`Notifier::GAP_US`] ago. A connected QP's goes to
/// its peer. A UD QP's goes to the datagram's source QP and address, for a
/// datagram the QP takes (its Q_Key) sent to this host alone; not for
/// GSI, whose management datagrams no rate applies to.
pub(crate) fn marked(qp: &Qp<Roxe>, st: &mut QpState, pkt: &Packet<'_>, ip: &[u8]) {
    let counters = &qp.device().data().counters;
    counters.event(Event::NpEcnMarked);
    let pkey = pkt.bth.pkey;
    let t = qp.data().qp_type;
    if t.is_connected() {
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
        return;
    }
    if t != QpType::Ud {
        return;
    }
    let Some(deth) = pkt.ext.deth.filter(|d| d.qkey == st.attr.qkey) else {
        return;
    };
    let Some((src, dst)) = ip::gids(ip) else {
        return;
    };
    if ip::is_multicast(&dst) || ip::is_multicast(&src) {
        return;
    }
    let Some(ndev) = st.ndev.as_deref() else {
        return;
    };
    if !st.cc.notifier.marked(now_us()) {
        return;
    }
    // Back the way the datagram came: from the address it was sent to.
    let Ok(path) = Path::resolve(ndev, dst, src, 0, CNP_HOP_LIMIT, 0) else {
        return;
    };
    let dest = deth.src_qpn & QPN_MASK;
    path.send_cnp(counters, udp::source_port(qp.qp_num(), dest), dest, pkey);
    counters.event(Event::NpCnpSent);
}

/// The hop limit (IPv4 TTL) of a UD QP's CNPs.
const CNP_HOP_LIMIT: u8 = 64;

/// A CNP arrived for `qp`, in an IP datagram with header `ip`: taken if
/// `qp` is past RTR and the CNP came from its peer's address (a connected
/// QP) or from a destination it keeps a rate for (a UD QP), whose rate it
/// then moves. Counted as handled (it cut the rate) or ignored.
pub(crate) fn take_cnp(qp: &Qp<Roxe>, ip: &[u8]) -> Result<(), Drop> {
    let this = qp.data();
    let mut st = this.state.lock();
    let t = this.qp_type;
    if !t.is_connected() && t != QpType::Ud {
        return Err(Drop::Transport);
    }
    if !matches!(
        st.attr.state,
        State::Rtr | State::Rts | State::Sqd | State::Sqe
    ) {
        return Err(Drop::State);
    }
    let rate = if t.is_connected() {
        if !st.path.as_ref().is_some_and(|p| p.carries(ip)) {
            return Err(Drop::Address);
        }
        &mut st.cc.rate
    } else {
        let src = ip::gids(ip).ok_or(Drop::Address)?.0;
        &mut st.cc.dest(&src).ok_or(Drop::Address)?.rate
    };
    let counters = &qp.device().data().counters;
    counters.event(match rate.on_cnp(&params(), now_us()) {
        Cnp::Handled => Event::RpCnpHandled,
        Cnp::Ignored => Event::RpCnpIgnored,
    });
    Ok(())
}

/// `rdma -dd res show qp`: an RC or UC QP's DCQCN state, brought up to
/// now (a UD QP's: how many destinations it keeps a rate for, and the
/// lowest), and a reliable QP's congestion window (packets; it shrinks on
/// losses, `rust/proto`'s `Requester::cwnd`).
pub(crate) fn fill_res(qp: &Qp<Roxe>, out: &mut ResAttrs<'_>) -> Result {
    let t = qp.data().qp_type;
    if t == QpType::Ud {
        // A rate per destination: how many, and the lowest.
        let (n, low) = qp.data().state.lock().cc.dests_now();
        out.put_u64(c_str!("dcqcn_dests"), u64::from(n))?;
        out.put_u64(c_str!("dcqcn_rate_kbps"), low)?;
        return Ok(());
    }
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
