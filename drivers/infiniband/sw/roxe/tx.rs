// SPDX-License-Identifier: GPL-2.0

//! The transmit path: where a QP's packets go ([`Path`], the route
//! resolved once per modify) and how one packet is built (IP, UDP, BTH,
//! extended headers, payload, pad, ICRC) straight into the skb that goes
//! out. Every engine sends through it. UD work requests name their
//! destination by address handle: [`AhInfo`], looked up by [`ah_with`].

use crate::counters::{Counters, Event};
use crate::net::skb::Route;
use crate::net::NetDevice;
use crate::proto::cnp;
use crate::proto::headers::{self, Bth, Ext};
use crate::proto::icrc::{Icrc, IpHeader};
use crate::proto::ip;
use crate::proto::mtu::IbMtu;
use crate::proto::opcode::{Opcode, Transport as Wire};
use crate::proto::udp;
use crate::rdma::qp::QpType;
use crate::table::Table;
use kernel::error::code::{EINVAL, EIO};
use kernel::prelude::*;

/// Where a QP's (or a datagram's) packets go, with the route resolved.
pub(crate) struct Path {
    route: Route,
    src: [u8; 16],
    dst: [u8; 16],
    tclass: u8,
    hop_limit: u8,
    flow_label: u32,
}

impl Path {
    /// Resolves the route out of `ndev` from source GID `sgid` to `dgid`.
    pub(crate) fn resolve(
        ndev: &NetDevice,
        sgid: [u8; 16],
        dgid: [u8; 16],
        tclass: u8,
        hop_limit: u8,
        flow_label: u32,
    ) -> Result<Path> {
        let route = match (ip::ipv4_mapped(&sgid), ip::ipv4_mapped(&dgid)) {
            (Some(s), Some(d)) => Route::ipv4(ndev, s, d)?,
            (None, None) => Route::ipv6(ndev, sgid, dgid)?,
            _ => return Err(EINVAL),
        };
        Ok(Path {
            route,
            src: sgid,
            dst: dgid,
            tclass,
            hop_limit: hop_limit.max(1),
            flow_label,
        })
    }

    /// Whether the IP header `ip` is of a packet that came along this path
    /// the other way: from its destination to its source.
    pub(crate) fn carries(&self, ip: &[u8]) -> bool {
        ip::gids(ip).is_some_and(|(s, d)| s == self.dst && d == self.src)
    }

    /// Looks the route up again if the routing tables changed under it
    /// (its device went down and up, say), so later packets need not.
    /// Until then each packet is sent on a route looked up for it.
    pub(crate) fn renew_route(&mut self) -> bool {
        self.route.renew()
    }

    /// The largest IB MTU the route carries.
    pub(crate) fn mtu(&self) -> u32 {
        IbMtu::for_netdev_mtu(self.route.mtu()).map_or(256, IbMtu::bytes)
    }

    /// Builds one packet (IP, UDP, BTH and `ext`, `payload_len` bytes that
    /// `fill` writes, pad and ICRC) and sends it, counted in `counters` as
    /// sent or not.
    pub(crate) fn send(
        &self,
        counters: &Counters,
        sport: u16,
        bth: &Bth,
        ext: &Ext,
        payload_len: usize,
        fill: impl FnOnce(&mut [u8]) -> bool,
    ) -> Result {
        self.send_icrc(counters, sport, bth, ext, payload_len, fill, false)
    }

    /// [`Path::send`], with rxe's FLUSH ICRC ([`Icrc::finish_rxe_flush`])
    /// if `rxe_flush`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn send_icrc(
        &self,
        counters: &Counters,
        sport: u16,
        bth: &Bth,
        ext: &Ext,
        payload_len: usize,
        fill: impl FnOnce(&mut [u8]) -> bool,
        rxe_flush: bool,
    ) -> Result {
        match self.build_and_send(sport, bth, ext, payload_len, fill, rxe_flush) {
            Ok(roce_len) => {
                counters.event(Event::TxPackets);
                // CAST: a packet's length.
                counters.add(Event::TxBytes, roce_len as u64);
                if ip::is_multicast(&self.dst) {
                    counters.event(Event::TxMulticast);
                }
                Ok(())
            }
            // `fill` refused the packet (a local error the caller reports).
            Err(e) if e == EIO => Err(e),
            Err(e) => {
                counters.event(Event::TxErr);
                Err(e)
            }
        }
    }

    /// Builds and sends one packet; returns its RoCE length (BTH to ICRC).
    fn build_and_send(
        &self,
        sport: u16,
        bth: &Bth,
        ext: &Ext,
        payload_len: usize,
        fill: impl FnOnce(&mut [u8]) -> bool,
        rxe_flush: bool,
    ) -> Result<usize> {
        let opcode = Opcode::from_u8(bth.opcode).ok_or(EINVAL)?;
        let roce_len = headers::packet_len(opcode, payload_len).ok_or(EINVAL)?;
        let tclass = cnp::mark_ect(self.tclass);
        self.emit(sport, tclass, roce_len, rxe_flush, |roce| {
            let hl = headers::encode_headers(bth, ext, roce).ok()?;
            let rest = roce.get_mut(hl..)?;
            if payload_len > rest.len() {
                return None;
            }
            let (body, tail) = rest.split_at_mut(payload_len);
            if !fill(body) {
                return None;
            }
            tail.fill(0);
            Some(hl)
        })
    }

    /// Sends a CNP for QP `dest_qpn` (P_Key `pkey`) along this path,
    /// counted as sent or not. It goes Not-ECT: a queue that marks has
    /// nothing to mark on it.
    pub(crate) fn send_cnp(&self, counters: &Counters, sport: u16, dest_qpn: u32, pkey: u16) {
        let body = cnp::encode(dest_qpn, pkey);
        let tclass = self.tclass & !cnp::ECN_MASK;
        let r = self.emit(sport, tclass, cnp::LEN, false, |roce| {
            roce.get_mut(..body.len())?.copy_from_slice(&body);
            Some(body.len())
        });
        counters.event(match r {
            Ok(_) => Event::TxPackets,
            Err(_) => Event::TxErr,
        });
        if r.is_ok() {
            // CAST: a CNP's length.
            counters.add(Event::TxBytes, cnp::LEN as u64);
        }
    }

    /// Builds IP and UDP headers for `roce_len` bytes of RoCE with traffic
    /// class `tclass`, lets `write` write them up to the ICRC (it returns
    /// the length of their headers, or `None` to send nothing), adds the
    /// ICRC (rxe's FLUSH ICRC if `rxe_flush`) and sends the packet;
    /// returns `roce_len`.
    fn emit(
        &self,
        sport: u16,
        tclass: u8,
        roce_len: usize,
        rxe_flush: bool,
        write: impl FnOnce(&mut [u8]) -> Option<usize>,
    ) -> Result<usize> {
        let v6 = self.route.is_ipv6();
        let ip_len = if v6 {
            ip::IPV6_HDR_LEN
        } else {
            ip::IPV4_HDR_LEN
        };
        let udp_len = ip::UDP_HDR_LEN + roce_len;
        self.route.send(ip_len + udp_len, |buf| {
            let (iph, rest) = buf.split_at_mut(ip_len);
            let (udph, roce) = rest.split_at_mut(ip::UDP_HDR_LEN);
            let ok = if v6 {
                iph.try_into().is_ok_and(|h| {
                    ip::write_ipv6_header(
                        h,
                        self.src,
                        self.dst,
                        udp_len,
                        tclass,
                        self.flow_label,
                        self.hop_limit,
                    )
                })
            } else {
                match (
                    ip::ipv4_mapped(&self.src),
                    ip::ipv4_mapped(&self.dst),
                    iph.try_into(),
                ) {
                    (Some(s), Some(d), Ok(h)) => {
                        ip::write_ipv4_header(h, s, d, udp_len, tclass, self.hop_limit)
                    }
                    _ => false,
                }
            };
            let sport_ok = udph
                .try_into()
                .is_ok_and(|h| ip::write_udp_header(h, sport, udp::ROCE_V2_PORT, roce_len));
            if !ok || !sport_ok {
                return false;
            }
            let icrc_at = roce_len - crate::proto::icrc::LEN;
            let Some(hl) = roce.get_mut(..icrc_at).and_then(write) else {
                return false;
            };
            let mut c = Icrc::new(if v6 {
                IpHeader::V6(iph)
            } else {
                IpHeader::V4(iph)
            });
            c.update(udph);
            c.update(&roce[..icrc_at]);
            let icrc = if rxe_flush {
                c.finish_rxe_flush(&roce[..hl])
            } else {
                c.finish()
            };
            roce[icrc_at..].copy_from_slice(&icrc.to_le_bytes());
            if v6 {
                // The ICRC masks the UDP checksum, so it can come last.
                let sum = ip::udp6_checksum(&self.src, &self.dst, &buf[ip_len..]);
                buf[ip_len + 6..ip_len + 8].copy_from_slice(&sum.to_be_bytes());
            }
            true
        })?;
        Ok(roce_len)
    }
}

pub(crate) fn wire(t: QpType) -> Wire {
    match t {
        QpType::Rc => Wire::Rc,
        QpType::Uc => Wire::Uc,
        // A raw packet QP has no RoCE transport; it sends as UD does (one
        // message, no acknowledgement) but its own way (`qp::req`).
        QpType::Ud | QpType::Gsi | QpType::RawPacket => Wire::Ud,
        QpType::XrcIni | QpType::XrcTgt => Wire::Xrc,
    }
}

/// Where an AH sends: everything the transmit path needs.
#[allow(dead_code)] // `dmac` and `sl` are kept for a future L2 path.
pub(crate) struct AhInfo {
    pub(crate) dgid: [u8; 16],
    pub(crate) sgid: [u8; 16],
    pub(crate) dmac: [u8; 6],
    pub(crate) flow_label: u32,
    pub(crate) hop_limit: u8,
    pub(crate) traffic_class: u8,
    pub(crate) sl: u8,
    /// The PD the AH was created in (`Pd::id`).
    pub(crate) pd: usize,
    /// Whether user space created it (through a ucontext).
    pub(crate) user: bool,
}

/// The device's address handles by number.
pub(crate) type AhTable = Table<AhInfo>;

/// Runs `f` on AH `num` if a QP of PD `pd` (a user QP if `user`) may send
/// through it: the AH must be of the same PD, and of user space exactly
/// when the QP is. PDs are per ucontext, so this also keeps each process
/// to its own AHs.
pub(crate) fn ah_with<R>(
    table: &AhTable,
    num: u32,
    pd: usize,
    user: bool,
    f: impl FnOnce(&AhInfo) -> R,
) -> Option<R> {
    table
        .with(num, |a| (a.pd == pd && a.user == user).then(|| f(a)))
        .flatten()
}
