// SPDX-License-Identifier: GPL-2.0

//! The receive hook: finds the device and QP a RoCEv2 datagram is for,
//! checks it, and hands it to the completer (responses) or the responder
//! (requests and datagrams). Every packet that is not
//! delivered is counted by the reason it was dropped.

use crate::counters::{Drop, Event};
use crate::device::Roxe;
use crate::net::skb::RxSkb;
use crate::net::udp::Receive;
use crate::proto::cnp;
use crate::proto::headers::Packet;
use crate::proto::headers::{self, ParseError};
use crate::proto::icrc::{self, Icrc, IpHeader};
use crate::proto::ip;
use crate::proto::qp::State;
use crate::qp::comp::complete;
use crate::qp::resp::{recv_ud, respond};
use crate::rdma::device::Device;
use crate::rdma::qp::{Qp, QpType};
use crate::tx::wire;
use kernel::types::ARef;

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
        let r = dev
            .data()
            .qp_index
            .get(qpn)
            .map(|qp| receive(&qp, pkt, meta));
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
        let mcast_ip = ip::gids(ip_hdr).is_some_and(|(_, d)| ip::is_multicast(&d));
        c.event(Event::RxPackets);
        // CAST: a packet's length.
        c.add(Event::RxBytes, roce.len() as u64);
        if mcast_ip {
            c.event(Event::RxMulticast);
        }
        if roce.first() == Some(&cnp::OPCODE) {
            // A CNP is for a unicast QP: only what was sent to this host.
            if !to_host || mcast_ip {
                c.drop(Drop::Address);
                return;
            }
            if receive_cnp(&dev, roce, ip_hdr, v6, lin.udp) {
                drop(dev);
                skb.consume();
            }
            return;
        }
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
        let meta = Meta { ip: ip_hdr, roce };
        // Multicast QP number if and only if multicast address; a unicast
        // QP takes only what was sent to this host alone, the multicast QP
        // that or a multicast frame. Neither takes a broadcast, or a packet
        // a local socket looped back (roxe's own copies to local members
        // come as sent to this host: `Route::send`).
        let mcast_qpn = pkt.bth.dest_qpn == crate::mcast::MULTICAST_QPN;
        let frame_ok = to_host || (mcast_qpn && multicast_frame);
        let res = if mcast_qpn != mcast_ip || !frame_ok {
            Some(Err(Drop::Address))
        } else if mcast_qpn {
            multicast(&dev, &pkt, &meta, v6)
        } else {
            dev.data()
                .qp_index
                .get(pkt.bth.dest_qpn)
                .map(|qp| receive(&qp, &pkt, &meta))
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

/// Takes a packet that starts with the CNP opcode: `roce` is its RoCE
/// part, `udp` the whole UDP datagram. Counts what became of it; `true`
/// if a QP took it.
fn receive_cnp(dev: &Device<Roxe>, roce: &[u8], ip_hdr: &[u8], v6: bool, udp: &[u8]) -> bool {
    let c = &dev.data().counters;
    let n = match cnp::parse(roce) {
        Ok(n) => n,
        Err(e) => {
            c.parse(match e {
                cnp::CnpError::Length if roce.len() < cnp::LEN => ParseError::Truncated,
                cnp::CnpError::Length => ParseError::UnexpectedPayload,
                cnp::CnpError::Header => ParseError::BadVersion,
                cnp::CnpError::Opcode => ParseError::UnknownOpcode,
            });
            return false;
        }
    };
    // `roce` is the datagram after its UDP header, and `cnp::parse` took
    // it as LEN bytes: the ICRC is its last four.
    let Some(body) = udp.len().checked_sub(icrc::LEN) else {
        return false;
    };
    let mut crc = Icrc::new(if v6 {
        IpHeader::V6(ip_hdr)
    } else {
        IpHeader::V4(ip_hdr)
    });
    crc.update(&udp[..body]);
    let sent = udp[body..]
        .iter()
        .rev()
        .fold(0u32, |a, b| a << 8 | u32::from(*b));
    if crc.finish() != sent {
        c.event(Event::RxBadIcrc);
        return false;
    }
    match dev
        .data()
        .qp_index
        .get(n.dest_qpn)
        .map(|qp| crate::qp::cc::take_cnp(&qp, ip_hdr))
    {
        None => c.event(Event::RxUnknownQp),
        Some(Err(d)) => c.drop(d),
        Some(Ok(())) => {
            c.event(Event::RxDelivered);
            return true;
        }
    }
    false
}

/// What the receive hook learnt about a packet besides its RoCE part.
pub(crate) struct Meta<'a> {
    /// The IP header as received.
    pub(crate) ip: &'a [u8],
    /// The RoCE packet as received, BTH to ICRC.
    pub(crate) roce: &'a [u8],
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
    let connected = this.qp_type.is_connected();
    if connected && !st.path.as_ref().is_some_and(|p| p.carries(meta.ip)) {
        return Err(Drop::Address);
    }
    if connected {
        st.renew_route(qp.device().data());
    }
    if cnp::ecn(meta.ip) == cnp::CE {
        crate::qp::cc::marked(qp, &mut st, pkt, meta.ip);
    }
    if pkt.opcode.is_response() {
        return complete(qp, &mut st, pkt);
    }
    match this.qp_type {
        QpType::Ud | QpType::Gsi => recv_ud(qp, &mut st, pkt, meta.ip),
        // An XRC initiator has no receive side: requests go to targets. A
        // raw packet QP takes frames from its flows, not RoCE packets.
        QpType::XrcIni | QpType::RawPacket => Err(Drop::Transport),
        _ => respond(qp, &mut st, pkt, meta.roce),
    }
}
