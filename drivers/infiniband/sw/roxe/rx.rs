// SPDX-License-Identifier: GPL-2.0

//! The receive hook: finds the device and QP a RoCEv2 datagram is for,
//! checks it, and hands it to the completer (responses) or the responder
//! (requests and datagrams). Every packet that is not
//! delivered is counted by the reason it was dropped.

use crate::comp::complete;
use crate::device::Roxe;
use crate::net::skb::RxSkb;
use crate::net::udp::Receive;
use crate::proto::headers::Packet;
use crate::proto::headers::{self, ParseError};
use crate::proto::icrc::{self, Icrc, IpHeader};
use crate::proto::ip;
use crate::proto::qp::State;
use crate::rdma::device::Device;
use crate::rdma::qp::{Qp, QpType};
use crate::resp::{recv_ud, respond};
use crate::tx::wire;
use core::sync::atomic::{AtomicU64, Ordering};
use kernel::c_str;
use kernel::prelude::*;
use kernel::types::ARef;

/// Counters that are not a parse error or a data-path drop.
#[derive(Clone, Copy)]
pub(crate) enum Event {
    /// Packets delivered to a QP.
    RxDelivered = 0,
    /// Packets whose ICRC did not match.
    RxBadIcrc,
    /// Packets for a QP number that does not exist.
    RxUnknownQp,
    /// Packets with an IP header roxe does not take (options, not UDP).
    RxBadIp,
    /// Packets the kernel could not make linear.
    RxNoMemory,
    /// Read requests sent on overdrawn read-response credits, by QPs that
    /// starved for them (`limits::CREDIT_STARVED_MS`).
    ReadCreditOverdraft,
    /// RC FLUSH requests taken with rxe's ICRC (`Icrc::finish_rxe_flush`).
    RxFlushIcrcRxe,
    /// RC FLUSH requests sent with rxe's ICRC.
    TxFlushIcrcRxe,
}

const EVENTS: usize = 8;
const PARSE: usize = ParseError::ALL.len();
const DROPS: usize = Drop::ALL.len();
/// How many counters a device has.
const COUNT: usize = EVENTS + PARSE + DROPS;

/// The counters' names, in order: the events, the parse errors in
/// `ParseError::ALL` order, then the data path's drops in `Drop::ALL` order.
pub(crate) const NAMES: [&CStr; COUNT] = [
    c_str!("rx_delivered"),
    c_str!("rx_drop_icrc"),
    c_str!("rx_drop_unknown_qp"),
    c_str!("rx_drop_ip"),
    c_str!("rx_drop_nomem"),
    c_str!("read_credit_overdraft"),
    c_str!("rx_flush_icrc_rxe"),
    c_str!("tx_flush_icrc_rxe"),
    c_str!("rx_drop_parse_too_short"),
    c_str!("rx_drop_parse_unknown_opcode"),
    c_str!("rx_drop_parse_bad_version"),
    c_str!("rx_drop_parse_truncated"),
    c_str!("rx_drop_parse_unexpected_payload"),
    c_str!("rx_drop_parse_misaligned"),
    c_str!("rx_drop_transport"),
    c_str!("rx_drop_qp_state"),
    c_str!("rx_drop_qkey"),
    c_str!("rx_drop_psn"),
    c_str!("rx_drop_no_recv"),
    c_str!("rx_drop_key"),
    c_str!("rx_drop_unexpected"),
    c_str!("rx_drop_length"),
    c_str!("rx_drop_duplicate"),
    c_str!("rx_drop_address"),
    c_str!("rx_drop_invalid"),
];

/// A device's packet counters.
pub(crate) struct Counters {
    c: [AtomicU64; COUNT],
}

impl Counters {
    pub(crate) fn new() -> Self {
        Self {
            c: [const { AtomicU64::new(0) }; COUNT],
        }
    }

    fn bump(&self, i: usize) {
        if let Some(c) = self.c.get(i) {
            c.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub(crate) fn event(&self, e: Event) {
        self.bump(e as usize);
    }

    fn parse(&self, e: ParseError) {
        self.bump(EVENTS + e.index());
    }

    fn drop(&self, d: Drop) {
        if let Some(i) = Drop::ALL.iter().position(|x| *x == d) {
            self.bump(EVENTS + PARSE + i);
        }
    }

    /// The counters' values, in [`NAMES`] order.
    pub(crate) fn read(&self, out: &mut [u64]) {
        for (o, c) in out.iter_mut().zip(self.c.iter()) {
            *o = c.load(Ordering::Relaxed);
        }
    }
}

/// The tunnel socket's receive handler.
pub(crate) struct Rx;

/// The roxe device of the netdev a packet arrived on. Nothing that arrives
/// on `lo` is taken: any local process can send there with a UDP socket.
/// roxe's own packets to a local address never go through `lo`; the
/// netdev they are for receives them (`Route::send`).
fn device_for(skb: &RxSkb) -> Option<ARef<Device<Roxe>>> {
    Device::<Roxe>::get_by_netdev(skb.dev()?)
}

/// Delivers a multicast datagram to every QP attached to its group, which
/// the destination IP address names. `None` when no QP is attached.
fn multicast(
    dev: &Device<Roxe>,
    pkt: &headers::Packet<'_>,
    meta: &Meta<'_>,
    v6: bool,
) -> Option<core::result::Result<(), Drop>> {
    let gid = if v6 {
        ip::ipv6_addrs(meta.ip)?.1
    } else {
        ip::gid_from_ipv4(ip::ipv4_addrs(meta.ip)?.1)
    };
    // A copy: the QPs are looked up and fed without the group lock.
    let members = dev.data().mcast.members(&gid)?;
    let mut result = None;
    for &qpn in members.qpns() {
        let r = dev.data().qp_index.with(qpn, |qp| receive(qp, pkt, meta));
        // Delivered if any member took it; otherwise the last reason.
        result = match (result, r) {
            (Some(Ok(())), _) => Some(Ok(())),
            (_, Some(r)) => Some(r),
            (prev, None) => prev,
        };
    }
    result
}

impl Receive for Rx {
    fn receive(mut skb: RxSkb) {
        // Packets for no roxe device are not ours to count.
        let Some(dev) = device_for(&skb) else { return };
        let c = &dev.data().counters;
        let to_host = skb.to_host();
        let multicast_frame = skb.multicast_frame();
        let Ok(lin) = skb.linear() else {
            c.event(Event::RxNoMemory);
            return;
        };
        let (ip_hdr, v6) = match lin.ip.first().map(|b| b >> 4) {
            Some(4)
                if ip::Ipv4View::new(lin.ip)
                    .is_some_and(|v| v.header_len() == ip::IPV4_HDR_LEN) =>
            {
                (&lin.ip[..ip::IPV4_HDR_LEN], false)
            }
            Some(6) if lin.ip.len() >= ip::IPV6_HDR_LEN => (&lin.ip[..ip::IPV6_HDR_LEN], true),
            _ => {
                c.event(Event::RxBadIp);
                return;
            }
        };
        let Some(roce) = lin.udp.get(ip::UDP_HDR_LEN..) else {
            c.event(Event::RxBadIp);
            return;
        };
        let pkt = match headers::parse(roce) {
            Ok(p) => p,
            Err(e) => {
                c.parse(e);
                return;
            }
        };
        let body = lin.udp.len() - icrc::LEN;
        let mut crc = Icrc::new(if v6 {
            IpHeader::V6(ip_hdr)
        } else {
            IpHeader::V4(ip_hdr)
        });
        crc.update(&lin.udp[..body]);
        if crc.finish() != pkt.icrc {
            // rxe's FLUSH carries an ICRC of its own making; take that too,
            // for FLUSH only.
            let rxe_flush = pkt.opcode == crate::proto::opcode::Opcode::RcFlush
                && roce
                    .get(..pkt.opcode.header_len())
                    .is_some_and(|h| crc.finish_rxe_flush(h) == pkt.icrc);
            if !rxe_flush {
                c.event(Event::RxBadIcrc);
                return;
            }
            c.event(Event::RxFlushIcrcRxe);
        }
        let meta = Meta { ip: ip_hdr };
        // Multicast QP number if and only if multicast address; a unicast
        // QP takes only what was sent to this host alone, the multicast QP
        // that or a multicast frame. Neither takes a broadcast, or a packet
        // a local socket looped back (roxe's own copies to local members
        // come as sent to this host: `Route::send`).
        let mcast_qpn = pkt.bth.dest_qpn == crate::mcast::MULTICAST_QPN;
        let mcast_ip = ip::gids(ip_hdr).is_some_and(|(_, d)| ip::is_multicast(&d));
        let frame_ok = to_host || (mcast_qpn && multicast_frame);
        let res = if mcast_qpn != mcast_ip || !frame_ok {
            Some(Err(Drop::Address))
        } else if mcast_qpn {
            multicast(&dev, &pkt, &meta, v6)
        } else {
            dev.data()
                .qp_index
                .with(pkt.bth.dest_qpn, |qp| receive(qp, &pkt, &meta))
        };
        match res {
            None => c.event(Event::RxUnknownQp),
            Some(Err(d)) => c.drop(d),
            Some(Ok(())) => {
                c.event(Event::RxDelivered);
                drop(dev);
                skb.consume();
            }
        }
    }
}

/// What the receive hook learnt about a packet besides its RoCE part.
pub(crate) struct Meta<'a> {
    /// The IP header as received.
    pub(crate) ip: &'a [u8],
}

/// Handles a verified packet for QP `qp`.
fn receive(qp: &Qp<Roxe>, pkt: &Packet<'_>, meta: &Meta<'_>) -> core::result::Result<(), Drop> {
    let this = qp.data();
    let mut st = this.state.lock();
    if wire(this.qp_type) != pkt.opcode.transport() {
        return Err(Drop::Transport);
    }
    if !matches!(
        st.attr.state,
        State::Rtr | State::Rts | State::Sqd | State::Sqe
    ) {
        return Err(Drop::State);
    }
    // A connected QP hears only its peer, at the address it was given.
    let connected = matches!(this.qp_type, QpType::Rc | QpType::Uc);
    if connected && !st.path.as_ref().is_some_and(|p| p.carries(meta.ip)) {
        return Err(Drop::Address);
    }
    if pkt.opcode.is_response() {
        return complete(qp, &mut st, pkt);
    }
    match this.qp_type {
        QpType::Ud | QpType::Gsi => recv_ud(qp, &mut st, pkt, meta),
        _ => respond(qp, &mut st, pkt),
    }
}

/// Why a packet that parsed was dropped (each has a counter).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Drop {
    /// The opcode's transport is not the QP's.
    Transport,
    /// The QP is not in a state that receives.
    State,
    /// A UD packet with the wrong Q_Key.
    Qkey,
    /// Out of sequence.
    Psn,
    /// No receive WQE was posted.
    NoRecv,
    /// A bad R_Key, access or range.
    Key,
    /// A response nothing waits for.
    Unexpected,
    /// A request packet whose payload is not the size its place in the
    /// message demands, or that runs past (or stops short of) its RDMA
    /// WRITE's DMA length, or a DMA length over 2^31; a SEND that overruns
    /// its receive buffer or 2^31 bytes; a datagram longer than the port's
    /// MTU.
    Length,
    /// A duplicate RDMA READ request that matches no request the responder
    /// served and remembers, or that the QP or the key no longer allows.
    Duplicate,
    /// An RC or UC packet whose IP source and destination are not its QP's
    /// peer and own address; a packet for a unicast QP that was not sent
    /// to this host alone (a broadcast, a looped-back multicast); a
    /// multicast QP number without a multicast address, or the reverse.
    Address,
    /// An invalid request: an opcode out of sequence (an RC message that
    /// starts inside another or continues none), an operation the QP does
    /// not take, or an RDMA READ or atomic for a QP with no responder
    /// resources (`max_dest_rd_atomic` 0).
    Invalid,
}

impl Drop {
    /// All reasons, in counter order.
    const ALL: [Drop; 11] = [
        Drop::Transport,
        Drop::State,
        Drop::Qkey,
        Drop::Psn,
        Drop::NoRecv,
        Drop::Key,
        Drop::Unexpected,
        Drop::Length,
        Drop::Duplicate,
        Drop::Address,
        Drop::Invalid,
    ];
}
