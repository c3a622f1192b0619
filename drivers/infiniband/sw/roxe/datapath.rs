// SPDX-License-Identifier: GPL-2.0

//! The data path: the requester (send queue to packets), the responder
//! (request packets to memory, receive completions and ACKs) and the
//! completer (ACKs and read responses to send completions).
//!
//! Everything here runs under the QP's state lock, which disables bottom
//! halves: the requester from the doorbell (process context), the
//! responder and completer from the UDP receive hook (softirq). See
//! `Documentation/datapath.md` for what is built and what is not yet.

use crate::cq;
use crate::device::{Roxe, PORT};
use crate::mr::{self, KeyError};
use crate::net::skb::Route;
use crate::net::NetDevice;
use crate::proto::aeth::{NakCode, Syndrome};
use crate::proto::headers::{self, Aeth, Bth, Deth, Ext, ImmDt, Packet, Reth, DEFAULT_PKEY};
use crate::proto::icrc::{Icrc, IpHeader};
use crate::proto::ip;
use crate::proto::mtu::IbMtu;
use crate::proto::opcode::{Opcode, Operation, Position, Transport as Wire};
use crate::proto::psn::Psn;
use crate::proto::qp::{State, RECV_WQE_HEADER, SEND_WQE_HEADER, SGE_SIZE};
use crate::proto::resp::{self, ReadRequest};
use crate::proto::seg;
use crate::proto::udp;
use crate::proto::wr::{SendOp, WcOp, WcStatus, MAX_SGE};
use crate::qp::{AtomicDone, QpState, RoxeQp};
use crate::rdma::device::Device;
use crate::rdma::qp::{Qp, QpType};
use crate::rdma::ring::Ring;
use crate::uapi::{Cqe, RecvWqe, SendWqe, Sge};
use kernel::error::code::EINVAL;
use kernel::prelude::*;

/// `IBV_SEND_SIGNALED`.
const SEND_SIGNALED: u32 = 2;
/// `IBV_SEND_SOLICITED`.
const SEND_SOLICITED: u32 = 4;
/// `IBV_SEND_INLINE`.
const SEND_INLINE: u32 = 8;
/// `IBV_WC_GRH`.
const WC_GRH: u32 = 1;
/// `IBV_WC_WITH_IMM`.
const WC_WITH_IMM: u32 = 2;
/// `IBV_WC_WITH_INV`.
const WC_WITH_INV: u32 = 8;
/// `IB_ACCESS_LOCAL_WRITE` and friends.
use crate::proto::access::{
    FLUSH_GLOBAL, FLUSH_PERSISTENT, LOCAL_WRITE, REMOTE_ATOMIC, REMOTE_READ, REMOTE_WRITE,
};
/// Longest message (2 GiB, as IBTA's 31-bit DMA length allows).
pub(crate) const MAX_MSG: u64 = 1 << 31;
/// PSNs an RC requester keeps unacknowledged before it waits. Virtual links
/// drop long bursts.
const WINDOW: u32 = 256;
/// Response packets one RC requester's reads may have outstanding, and the
/// largest piece one read request asks for. The responders answer each
/// request in one burst, so the bursts of several QPs reading at once land
/// together in the receive queues on the way (a virtio NIC's ring holds
/// 256 packets): at 256 per QP, two QPs of `ib_read_bw -q 2` overflowed
/// them, and the retransmitted bursts collided again until the retry
/// count ran out.
const READ_WINDOW: u32 = 128;
/// Packets one call of the requester sends before it yields to the timer.
const BUDGET: u32 = 256;
/// In a bind WQE's `swap`: the bind came from `ibv_bind_mw` (type 1).
const BIND_TYPE1: u64 = crate::uapi::BIND_TYPE1;
/// The Q_Key bit that says "use the QP's own Q_Key".
const QKEY_FROM_QP: u32 = 1 << 31;

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

    /// The largest IB MTU the route carries.
    /// Whether the IP header `ip` is of a packet that came along this path
    /// the other way: from its destination to its source.
    fn carries(&self, ip: &[u8]) -> bool {
        ip::gids(ip).is_some_and(|(s, d)| s == self.dst && d == self.src)
    }

    fn mtu(&self) -> u32 {
        IbMtu::for_netdev_mtu(self.route.mtu()).map_or(256, IbMtu::bytes)
    }

    /// Builds one packet (IP, UDP, BTH and `ext`, `payload_len` bytes that
    /// `fill` writes, pad and ICRC) and sends it.
    fn send(
        &self,
        sport: u16,
        bth: &Bth,
        ext: &Ext,
        payload_len: usize,
        fill: impl FnOnce(&mut [u8]) -> bool,
    ) -> Result {
        self.send_icrc(sport, bth, ext, payload_len, fill, false)
    }

    /// [`Path::send`], with rxe's FLUSH ICRC ([`Icrc::finish_rxe_flush`])
    /// if `rxe_flush`.
    fn send_icrc(
        &self,
        sport: u16,
        bth: &Bth,
        ext: &Ext,
        payload_len: usize,
        fill: impl FnOnce(&mut [u8]) -> bool,
        rxe_flush: bool,
    ) -> Result {
        let opcode = Opcode::from_u8(bth.opcode).ok_or(EINVAL)?;
        let roce_len = headers::packet_len(opcode, payload_len).ok_or(EINVAL)?;
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
                        self.tclass,
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
                        ip::write_ipv4_header(h, s, d, udp_len, self.tclass, self.hop_limit)
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
            let Ok(hl) = headers::encode_headers(bth, ext, roce) else {
                return false;
            };
            let (body, tail) = roce[hl..].split_at_mut(payload_len);
            if !fill(body) {
                return false;
            }
            tail.fill(0);
            let icrc_at = roce_len - crate::proto::icrc::LEN;
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
        })
    }
}

/// A receive WQE copied out of its ring, with its SGEs.
pub(crate) struct RecvCopy {
    wr_id: u64,
    num_sge: usize,
    sges: [Sge; MAX_SGE as usize],
}

/// Takes the next receive WQE from `ring` at `*consumer`, copying it out and
/// checking its SGE count against the slot. `Err` if the ring's indices are
/// corrupt; `Ok(None)` if it is empty.
pub(crate) fn take_recv(
    ring: &Ring<RecvWqe>,
    consumer: &mut u32,
) -> core::result::Result<Option<RecvCopy>, ()> {
    match ring.geometry().used(ring.producer(), *consumer) {
        Err(_) => return Err(()),
        Ok(0) => return Ok(None),
        Ok(_) => {}
    }
    let w = ring.read(*consumer);
    let mut c = RecvCopy {
        wr_id: w.wr_id,
        num_sge: 0,
        sges: [Sge::default(); MAX_SGE as usize],
    };
    // A count that does not fit the slot leaves the WQE without SGEs: its
    // receive then fails with a length error rather than reading past it.
    let n = (w.num_sge as usize).min(MAX_SGE as usize);
    for i in 0..n {
        let off = RECV_WQE_HEADER as usize + i * SGE_SIZE as usize;
        match ring.read_at::<Sge>(*consumer, off) {
            Some(s) => c.sges[i] = s,
            None => break,
        }
        c.num_sge = i + 1;
    }
    if c.num_sge != w.num_sge as usize {
        c.num_sge = 0;
    }
    *consumer = consumer.wrapping_add(1);
    ring.set_consumer(*consumer);
    Ok(Some(c))
}

impl RecvCopy {
    /// The work request ID user space posted it with.
    pub(crate) fn wr_id(&self) -> u64 {
        self.wr_id
    }

    fn total(&self) -> u64 {
        self.sges[..self.num_sge]
            .iter()
            .map(|s| u64::from(s.length))
            .sum()
    }

    /// Scatters `data` at message offset `off` into the SGEs.
    fn scatter(
        &self,
        dev: &Device<Roxe>,
        pd: usize,
        off: u64,
        data: &[u8],
    ) -> core::result::Result<(), WcStatus> {
        let sges = self.sges[..self.num_sge].iter().map(|s| Ok(*s));
        for_pieces(sges, off, data.len(), |va, lkey, r| {
            let src = &data[r];
            // CAST: a piece is at most an SGE length.
            mr::with_key(dev.data(), lkey, pd, |m| {
                m.write(m.check(va, src.len() as u32, LOCAL_WRITE)?, src)
            })
        })
    }
}

/// Splits message bytes `off..off + len` over the SGEs `sges` and calls
/// `f(address, lkey, range in the message piece)` for each part, in order.
/// Fails with `LocLenErr` if the SGEs are too short and `LocProtErr` where
/// `f` reports a key error.
fn for_pieces(
    sges: impl Iterator<Item = core::result::Result<Sge, WcStatus>>,
    mut off: u64,
    len: usize,
    mut f: impl FnMut(u64, u32, core::ops::Range<usize>) -> core::result::Result<(), KeyError>,
) -> core::result::Result<(), WcStatus> {
    let mut done = 0usize;
    for s in sges {
        if done == len {
            break;
        }
        let s = s?;
        let sl = u64::from(s.length);
        if off >= sl {
            off -= sl;
            continue;
        }
        // CAST: below the SGE length, a u32.
        let n = ((sl - off) as usize).min(len - done);
        let va = s.addr.checked_add(off).ok_or(WcStatus::LocProtErr)?;
        f(va, s.lkey, done..done + n).map_err(|_| WcStatus::LocProtErr)?;
        done += n;
        off = 0;
    }
    if done == len {
        Ok(())
    } else {
        Err(WcStatus::LocLenErr)
    }
}

/// The SGEs of send WQE `idx`, read from the ring one at a time.
fn send_sges<'a>(
    this: &'a RoxeQp,
    idx: u32,
    w: &SendWqe,
) -> impl Iterator<Item = core::result::Result<Sge, WcStatus>> + 'a {
    (0..w.num_sge.min(MAX_SGE)).map(move |i| {
        this.sq
            .read_at(
                idx,
                SEND_WQE_HEADER as usize + i as usize * SGE_SIZE as usize,
            )
            .ok_or(WcStatus::LocLenErr)
    })
}

fn wire(t: QpType) -> Wire {
    match t {
        QpType::Rc => Wire::Rc,
        QpType::Uc => Wire::Uc,
        QpType::Ud | QpType::Gsi => Wire::Ud,
    }
}

/// The length of a send WQE's message, checked.
fn msg_len(this: &RoxeQp, idx: u32, w: &SendWqe) -> core::result::Result<u32, WcStatus> {
    let total = if w.send_flags & SEND_INLINE != 0 {
        u64::from(w.inline_len)
    } else {
        let mut t = 0u64;
        for s in send_sges(this, idx, w) {
            t += u64::from(s?.length);
        }
        t
    };
    if total > MAX_MSG {
        return Err(WcStatus::LocLenErr);
    }
    // CAST: at most 2^31.
    Ok(total as u32)
}

/// Copies `dst.len()` bytes of the message of send WQE `idx`, from message
/// offset `off`, into `dst`.
fn gather(
    qp: &Qp<Roxe>,
    idx: u32,
    w: &SendWqe,
    off: u32,
    dst: &mut [u8],
) -> core::result::Result<(), WcStatus> {
    let this = qp.data();
    if w.send_flags & SEND_INLINE != 0 {
        return this
            .sq
            .read_bytes(idx, SEND_WQE_HEADER as usize + off as usize, dst)
            .ok_or(WcStatus::LocLenErr);
    }
    let (dev, pd) = (qp.device().data(), qp.pd_id());
    let len = dst.len();
    for_pieces(
        send_sges(this, idx, w),
        u64::from(off),
        len,
        |va, lkey, r| {
            let out = &mut dst[r];
            // CAST: a piece is at most an SGE length.
            mr::with_key(dev, lkey, pd, |m| {
                m.read(m.check(va, out.len() as u32, 0)?, out)
            })
        },
    )
}

fn send_cqe(qp: &Qp<Roxe>, w: &SendWqe, op: SendOp, status: WcStatus, byte_len: u32) -> Cqe {
    Cqe {
        wr_id: w.wr_id,
        status: status as u32,
        opcode: op.completion() as u32,
        byte_len,
        qp_num: qp.qp_num(),
        port_num: PORT as u8,
        ..Cqe::default()
    }
}

fn signaled(this: &RoxeQp, w: &SendWqe) -> bool {
    this.sig_all || w.send_flags & SEND_SIGNALED != 0
}

/// Completes send WQE `idx` (the oldest) and retires it.
fn complete_send(
    qp: &Qp<Roxe>,
    st: &mut QpState,
    w: &SendWqe,
    op: SendOp,
    status: WcStatus,
    byte_len: u32,
) {
    let this = qp.data();
    if status != WcStatus::Success || signaled(this, w) {
        if let Some(scq) = qp.send_cq() {
            let _ = cq::push(scq, send_cqe(qp, w, op, status, byte_len), false);
        }
    }
    st.sq_consumer = st.sq_consumer.wrapping_add(1);
    st.sq_checked = st.sq_checked.saturating_sub(1);
    this.sq.set_consumer(st.sq_consumer);
}

/// Moves the QP to ERR after a failed WQE and flushes the rest.
fn fail(qp: &Qp<Roxe>, st: &mut QpState, w: &SendWqe, op: SendOp, status: WcStatus) {
    // Everything before the failed WQE was completed; the failed one is the
    // oldest outstanding.
    complete_send(qp, st, w, op, status, 0);
    st.attr.state = State::Err;
    crate::qp::flush_all(qp, st);
}

/// Sends what is waiting in the SQ. Called with the state lock held, in RTS.
/// Datagrams are routed out of the netdev the QP took at its last modify.
///
/// At most [`BUDGET`] packets go out per call; the rest follow from the
/// QP's timer, so one huge message does not hold the CPU.
pub(crate) fn send_pending(qp: &Qp<Roxe>, st: &mut QpState) {
    let this = qp.data();
    let t = wire(this.qp_type);
    let mut budget = BUDGET;
    let ndev = st.ndev.clone();
    send_loop(qp, st, ndev.as_deref(), t, &mut budget);
    if budget == 0 {
        st.kick = true;
        qp.arm_timer(0);
    } else if core::mem::take(&mut st.credit_wait) && st.una == st.npsn {
        // Other QPs' reads hold the device's credits, and nothing this QP
        // sent is in flight to answer and resume it: try again soon, without
        // spending a retry. (With packets in flight, their answers and the
        // retry timer do.)
        st.kick = true;
        qp.arm_timer(1);
    } else if t == Wire::Rc {
        arm_retry(qp, st);
    }
}

fn send_loop(qp: &Qp<Roxe>, st: &mut QpState, ndev: Option<&NetDevice>, t: Wire, budget: &mut u32) {
    let this = qp.data();
    loop {
        // After an RNR NAK nothing is sent until the timer says so.
        if st.attr.state != State::Rts || st.rnr_wait || *budget == 0 {
            return;
        }
        let prod = this.sq.producer();
        let Ok(used) = this.sq.geometry().used(prod, st.sq_consumer) else {
            return;
        };
        let in_flight = st.sq_sent.wrapping_sub(st.sq_consumer);
        // Only what a doorbell checked is sent.
        if in_flight >= used.min(st.sq_checked) {
            return;
        }
        let idx = st.sq_sent;
        let w = this.sq.read(idx);
        let Some(op) =
            SendOp::from_raw(w.opcode).filter(|o| o.allowed_on(crate::qp::transport(this.qp_type)))
        else {
            if in_flight == 0 {
                fail(qp, st, &w, SendOp::Send, WcStatus::LocQpOpErr);
            }
            return;
        };
        if op.is_local() {
            // Memory operations happen in order: once everything before
            // them is complete, they run and complete at once.
            if in_flight != 0 {
                return;
            }
            match local_op(qp, &w, op) {
                Ok(()) => {
                    st.sq_sent = st.sq_sent.wrapping_add(1);
                    complete_send(qp, st, &w, op, WcStatus::Success, 0);
                    continue;
                }
                Err(status) => {
                    fail(qp, st, &w, op, status);
                    return;
                }
            }
        }
        if t == Wire::Rc && in_flight != 0 && st.sq_pkt == 0 {
            // IBV_SEND_FENCE: wait for outstanding reads.
            if st.reads_out != 0 && w.send_flags & 1 != 0 {
                return;
            }
            // No more reads and atomics in flight than the responder takes.
            let waits = matches!(
                op,
                SendOp::RdmaRead
                    | SendOp::CmpSwap
                    | SendOp::FetchAdd
                    | SendOp::AtomicWrite
                    | SendOp::Flush
            );
            if waits && st.reads_out >= u32::from(st.attr.max_rd_atomic).max(1) {
                return;
            }
        }
        let res = match t {
            Wire::Ud => match ndev {
                Some(nd) => {
                    *budget -= 1;
                    send_ud(qp, st, idx, &w, op, nd).map(Some)
                }
                None => return,
            },
            _ => send_connected(qp, st, idx, &w, op, t, budget),
        };
        match res {
            Ok(Some(len)) => {
                st.sq_sent = st.sq_sent.wrapping_add(1);
                if t != Wire::Rc {
                    // Unreliable: complete once sent.
                    complete_send(qp, st, &w, op, WcStatus::Success, len);
                }
            }
            // Stopped part-way by the window or the budget.
            Ok(None) => return,
            Err(status) => {
                st.sq_pkt = 0;
                if in_flight == 0 {
                    fail(qp, st, &w, op, status);
                } else {
                    // Complete in order: the bad WQE fails once the ones
                    // before it are done.
                    st.sq_blocked = Some(status);
                }
                return;
            }
        }
    }
}

/// Carries out a local memory operation: invalidate, fast registration
/// (kernel QPs only) or memory-window bind.
///
/// A bind WQE carries the new rkey in `rkey`, the MR's lkey in `imm_data`,
/// the range in `remote_addr` and `compare_add`, and the window's rights in
/// the low half of `swap`; bit 32 of `swap` marks a type 1 bind made with
/// `ibv_bind_mw`. A registration carries the new key in `rkey`, the range
/// in `remote_addr` and `compare_add`, and the rights in `swap`.
fn local_op(qp: &Qp<Roxe>, w: &SendWqe, op: SendOp) -> core::result::Result<(), WcStatus> {
    let (dev, pd) = (qp.device().data(), qp.pd_id());
    match op {
        SendOp::LocalInv => mr::invalidate(dev, pd, None, w.rkey).map_err(|_| WcStatus::LocQpOpErr),
        SendOp::RegMr if !qp.is_user() => {
            // CAST: the rights are the low half.
            mr::fast_register(dev, pd, w.rkey, w.swap as u32, w.remote_addr, w.compare_add)
                .map_err(|_| WcStatus::LocQpOpErr)
        }
        SendOp::BindMw => {
            let a = mr::BindArgs {
                new_key: w.rkey,
                mr_lkey: w.imm_data,
                addr: w.remote_addr,
                len: w.compare_add,
                // CAST: the rights are the low half.
                access: w.swap as u32,
                type1_call: w.swap & BIND_TYPE1 != 0,
            };
            mr::bind(dev, pd, qp.qp_num(), &a).map_err(|_| WcStatus::MwBindErr)
        }
        _ => Err(WcStatus::LocQpOpErr),
    }
}

fn send_ud(
    qp: &Qp<Roxe>,
    st: &mut QpState,
    idx: u32,
    w: &SendWqe,
    op: SendOp,
    ndev: &NetDevice,
) -> core::result::Result<u32, WcStatus> {
    let dev = qp.device();
    let len = msg_len(qp.data(), idx, w)?;
    // Only an AH of the QP's own PD (and user space's own, for a user QP).
    let ah = crate::ah::with(dev.data(), w.ah_num, qp.pd_id(), qp.is_user(), |a| {
        (a.sgid, a.dgid, a.traffic_class, a.hop_limit, a.flow_label)
    })
    .ok_or(WcStatus::LocQpOpErr)?;
    let Ok(path) = Path::resolve(ndev, ah.0, ah.1, ah.2, ah.3, ah.4) else {
        // No route: the datagram is lost, as on a wire.
        return Ok(len);
    };
    if len > path.mtu() {
        return Err(WcStatus::LocLenErr);
    }
    let opcode = seg::request_opcode(Wire::Ud, op, Position::Only).ok_or(WcStatus::LocQpOpErr)?;
    let qkey = if w.remote_qkey & QKEY_FROM_QP != 0 {
        st.attr.qkey
    } else {
        w.remote_qkey
    };
    let mut bth = Bth::new(
        opcode,
        DEFAULT_PKEY,
        w.remote_qpn & headers::QPN_MASK,
        st.npsn,
    );
    bth.se = w.send_flags & SEND_SOLICITED != 0;
    bth.pad = headers::pad_len(len as usize);
    st.npsn = st.npsn.next();
    let ext = Ext {
        deth: Some(Deth {
            qkey,
            src_qpn: qp.qp_num(),
        }),
        immdt: opcode
            .has_immediate()
            .then_some(ImmDt(u32::from_be(w.imm_data))),
        ..Ext::default()
    };
    let sport = udp::source_port(qp.qp_num(), w.remote_qpn);
    let mut err = None;
    let _ = path.send(sport, &bth, &ext, len as usize, |buf| {
        match gather(qp, idx, w, 0, buf) {
            Ok(()) => true,
            Err(e) => {
                err = Some(e);
                false
            }
        }
    });
    match err {
        Some(e) => Err(e),
        None => Ok(len),
    }
}

/// Sends a FLUSH: one packet, FETH then RETH, answered like a read (an
/// empty RDMA READ response). The WQE holds the range's length in
/// `compare_add` and the placement type and selectivity level in `swap`
/// (`uapi::SendWqe`).
fn send_flush(
    qp: &Qp<Roxe>,
    st: &mut QpState,
    idx: u32,
    w: &SendWqe,
    t: Wire,
    budget: &mut u32,
) -> core::result::Result<Option<u32>, WcStatus> {
    if t != Wire::Rc {
        return Err(WcStatus::LocQpOpErr);
    }
    let len = u32::try_from(w.compare_add).map_err(|_| WcStatus::LocLenErr)?;
    // CAST: the low two bytes, as the WQE format says.
    let (placement_type, selectivity) = ((w.swap & 0xff) as u8, ((w.swap >> 8) & 0xff) as u8);
    if !matches!(placement_type, FLUSH_GLOBAL_TYPE | FLUSH_PERSISTENT_TYPE)
        || selectivity > FLUSH_LEVEL_MR
    {
        return Err(WcStatus::LocQpOpErr);
    }
    if *budget == 0 || st.una.distance(st.npsn) >= WINDOW {
        return Ok(None);
    }
    if st.path.is_none() {
        return Err(WcStatus::LocQpOpErr);
    }
    *budget -= 1;
    st.set_wqe_psn(idx, st.npsn, st.npsn, true);
    st.reads_out += 1;
    let Some(path) = st.path.as_ref() else {
        return Err(WcStatus::LocQpOpErr);
    };
    let mut bth = Bth::new(Opcode::RcFlush, DEFAULT_PKEY, st.attr.dest_qp_num, st.npsn);
    bth.ack_req = true;
    let ext = Ext {
        feth: Some(headers::Feth {
            selectivity,
            placement_type,
        }),
        reth: Some(Reth {
            va: w.remote_addr,
            rkey: w.rkey,
            dma_len: len,
        }),
        ..Ext::default()
    };
    let sport = udp::source_port(qp.qp_num(), st.attr.dest_qp_num);
    let _ = path.send_icrc(sport, &bth, &ext, 0, |_| true, st.flush_icrc_rxe);
    if st.flush_icrc_rxe {
        qp.device()
            .data()
            .counters
            .event(crate::rx::Event::TxFlushIcrcRxe);
    }
    // One packet: the WQE is wholly sent, as `send_connected` leaves it.
    st.sq_pkt = 0;
    st.npsn = st.npsn.next();
    Ok(Some(0))
}

/// The device's pool of read-response credits.
fn this_dev_credits(qp: &Qp<Roxe>) -> &crate::limits::Credits {
    &qp.device().data().read_credits
}

/// Takes `n` read-response credits for a read request, or marks the QP as
/// waiting for them. A QP that holds none and has found the pool short
/// for [`crate::limits::CREDIT_STARVED_MS`] overdraws it, and keeps doing so
/// while the pool stays short, so other QPs' reads that never end cannot
/// starve it.
/// (`held`, `wait` and `short_since` are the QP state's `read_held`,
/// `credit_wait` and `credit_short_since`; the caller holds a borrow of
/// its path.)
fn take_read_credits(
    qp: &Qp<Roxe>,
    held: &mut u32,
    wait: &mut bool,
    short_since: &mut Option<i64>,
    n: u32,
) -> bool {
    let pool = this_dev_credits(qp);
    if pool.take(n) {
        *held += n;
        *short_since = None;
        return true;
    }
    let now = kernel::time::Ktime::ktime_get().to_ms();
    let since = *short_since.get_or_insert(now);
    if *held == 0 && now - since >= crate::limits::CREDIT_STARVED_MS && pool.overdraw(n) {
        *held += n;
        qp.device()
            .data()
            .counters
            .event(crate::rx::Event::ReadCreditOverdraft);
        return true;
    }
    *wait = true;
    false
}

/// FETH placement types and selectivity levels (`IB_FLUSH_*`).
const FLUSH_GLOBAL_TYPE: u8 = 1;
const FLUSH_PERSISTENT_TYPE: u8 = 2;
const FLUSH_LEVEL_MR: u8 = 1;

/// Sends (more of) WQE `idx` on a connected QP, from packet `st.sq_pkt`
/// on. Returns the message length once every packet is out, or `None`
/// when the RC window or `budget` stopped it part-way.
///
/// An RDMA READ goes out as one read request per [`READ_WINDOW`] packets of
/// response, so no responder answers with a longer burst than that.
fn send_connected(
    qp: &Qp<Roxe>,
    st: &mut QpState,
    idx: u32,
    w: &SendWqe,
    op: SendOp,
    t: Wire,
    budget: &mut u32,
) -> core::result::Result<Option<u32>, WcStatus> {
    if op == SendOp::Flush {
        return send_flush(qp, st, idx, w, t, budget);
    }
    let atomic = matches!(op, SendOp::CmpSwap | SendOp::FetchAdd);
    // Atomic Write's 8 bytes come from the message, or (with no SGE and no
    // inline data, as `ibv_wr_atomic_write` posts it) from `compare_add`.
    let value_in_wqe =
        op == SendOp::AtomicWrite && w.num_sge == 0 && w.send_flags & SEND_INLINE == 0;
    let len = if value_in_wqe {
        8
    } else {
        msg_len(qp.data(), idx, w)?
    };
    if atomic && (len < 8 || w.remote_addr % 8 != 0) {
        return Err(WcStatus::LocLenErr);
    }
    // Atomic Write puts exactly 8 bytes, in one packet answered like a read.
    let atomic_write = op == SendOp::AtomicWrite;
    if atomic_write && len != 8 {
        return Err(WcStatus::LocLenErr);
    }
    let route_mtu = st
        .path
        .as_ref()
        .map(Path::mtu)
        .ok_or(WcStatus::LocQpOpErr)?;
    let mtu = IbMtu::from_enum(st.attr.path_mtu)
        .map_or(1024, IbMtu::bytes)
        .min(route_mtu);
    let n = if atomic {
        1
    } else {
        seg::packet_count(len, mtu).ok_or(WcStatus::LocLenErr)?
    };
    let rc = t == Wire::Rc;
    let waits = op == SendOp::RdmaRead || atomic || atomic_write;
    // The first piece of a read took its credits before anything of the
    // WQE was recorded.
    let mut prepaid = false;
    if st.sq_pkt == 0 {
        // Nothing is recorded for a WQE that cannot start yet: it is
        // counted in `reads_out` once, when its first packet goes out.
        let read_full = op == SendOp::RdmaRead
            && st.una != st.npsn
            && st.una.distance(st.npsn) + n.min(READ_WINDOW) > READ_WINDOW;
        if *budget == 0 || (rc && st.una.distance(st.npsn) >= WINDOW) || read_full {
            return Ok(None);
        }
        if op == SendOp::RdmaRead
            && !take_read_credits(
                qp,
                &mut st.read_held,
                &mut st.credit_wait,
                &mut st.credit_short_since,
                n.min(READ_WINDOW),
            )
        {
            return Ok(None);
        }
        prepaid = op == SendOp::RdmaRead;
        st.set_wqe_psn(idx, st.npsn, st.npsn.wrapping_add(n - 1), waits);
        if waits {
            st.reads_out += 1;
        }
    }
    let Some(path) = st.path.as_ref() else {
        return Err(WcStatus::LocQpOpErr);
    };
    let (first, _, _) = st.wqe_psn(idx);
    let dqpn = st.attr.dest_qp_num;
    let sport = udp::source_port(qp.qp_num(), dqpn);
    let imm = ImmDt(u32::from_be(w.imm_data));
    while st.sq_pkt < n {
        if *budget == 0 || (rc && st.una.distance(st.npsn) >= WINDOW) {
            return Ok(None);
        }
        *budget -= 1;
        let i = st.sq_pkt;
        // Below 2^31 + MTU: fits.
        let off = i * mtu;
        if matches!(op, SendOp::CmpSwap | SendOp::FetchAdd) {
            let opcode = seg::request_opcode(t, op, Position::Only).ok_or(WcStatus::LocQpOpErr)?;
            let mut bth = Bth::new(opcode, DEFAULT_PKEY, dqpn, st.npsn);
            bth.ack_req = true;
            let (swap_add, compare) = if op == SendOp::CmpSwap {
                (w.swap, w.compare_add)
            } else {
                (w.compare_add, 0)
            };
            let aeth = headers::AtomicEth {
                va: w.remote_addr,
                rkey: w.rkey,
                swap_add,
                compare,
            };
            let ext = Ext {
                atomic_eth: Some(aeth),
                ..Ext::default()
            };
            let _ = path.send(sport, &bth, &ext, 0, |_| true);
            st.sq_pkt = 1;
            st.npsn = st.npsn.next();
            continue;
        }
        if op == SendOp::RdmaRead && i % READ_WINDOW == 0 && i != 0 && st.una != st.npsn {
            // The pieces of one read go one at a time: each is a request
            // the responder keeps a resource for, and it may keep as few
            // as one (`max_dest_rd_atomic`).
            *budget += 1;
            return Ok(None);
        }
        if op == SendOp::RdmaRead {
            // Requests cover fixed READ_WINDOW-packet pieces of the read,
            // so one asked again part-way (after a loss) is a subset of the
            // one sent first, which is what responders accept as a
            // duplicate.
            let span = (n - i).min(READ_WINDOW - i % READ_WINDOW);
            if !core::mem::take(&mut prepaid) {
                if st.una != st.npsn && st.una.distance(st.npsn) + span > READ_WINDOW {
                    // Resumed by the responses (`complete`).
                    *budget += 1;
                    return Ok(None);
                }
                if !take_read_credits(
                    qp,
                    &mut st.read_held,
                    &mut st.credit_wait,
                    &mut st.credit_short_since,
                    span,
                ) {
                    *budget += 1;
                    return Ok(None);
                }
            }
            let sub_len = (len - off).min(span * mtu);
            let mut bth = Bth::new(
                Opcode::RcRdmaReadRequest,
                DEFAULT_PKEY,
                dqpn,
                first.wrapping_add(i),
            );
            bth.ack_req = true;
            let reth = Reth {
                va: w.remote_addr.wrapping_add(u64::from(off)),
                rkey: w.rkey,
                dma_len: sub_len,
            };
            let ext = Ext {
                reth: Some(reth),
                ..Ext::default()
            };
            let _ = path.send(sport, &bth, &ext, 0, |_| true);
            st.sq_pkt += span;
            st.npsn = first.wrapping_add(st.sq_pkt);
            continue;
        }
        let pos = seg::position(i, n);
        let opcode = seg::request_opcode(t, op, pos).ok_or(WcStatus::LocQpOpErr)?;
        let plen = (len - off).min(mtu);
        let mut bth = Bth::new(opcode, DEFAULT_PKEY, dqpn, st.npsn);
        bth.pad = headers::pad_len(plen as usize);
        if pos.ends_message() {
            bth.se = w.send_flags & SEND_SOLICITED != 0;
        }
        // RC asks for an ACK at the end of each message and twice per
        // window, so the window keeps opening inside long messages.
        bth.ack_req = rc && (pos.ends_message() || (i + 1) % (WINDOW / 2) == 0);
        let ext = Ext {
            reth: (matches!(
                opcode.operation(),
                Operation::RdmaWrite | Operation::AtomicWrite
            ) && pos.starts_message())
            .then_some(Reth {
                va: w.remote_addr,
                rkey: w.rkey,
                dma_len: len,
            }),
            immdt: opcode.has_immediate().then_some(imm),
            ieth: opcode
                .has_invalidate()
                .then_some(headers::Ieth { rkey: w.imm_data }),
            ..Ext::default()
        };
        let mut err = None;
        let _ = path.send(sport, &bth, &ext, plen as usize, |buf| {
            let got = if value_in_wqe {
                buf.get_mut(..8)
                    .map(|b| b.copy_from_slice(&w.compare_add.to_ne_bytes()))
                    .ok_or(WcStatus::LocLenErr)
            } else {
                gather(qp, idx, w, off, buf)
            };
            match got {
                Ok(()) => true,
                Err(e) => {
                    err = Some(e);
                    false
                }
            }
        });
        if let Some(e) = err {
            return Err(e);
        }
        st.sq_pkt += 1;
        st.npsn = st.npsn.next();
    }
    st.sq_pkt = 0;
    Ok(Some(len))
}

/// What the receive hook learnt about a packet besides its RoCE part.
pub(crate) struct Meta<'a> {
    /// The IP header as received.
    pub(crate) ip: &'a [u8],
}

/// Handles a verified packet for QP `qp`.
pub(crate) fn receive(
    qp: &Qp<Roxe>,
    pkt: &Packet<'_>,
    meta: &Meta<'_>,
) -> core::result::Result<(), Drop> {
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
    pub(crate) const ALL: [Drop; 11] = [
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

/// The path MTU a connected QP cuts messages at, and so the size of the
/// packets it takes: the QP's path MTU, or the route's if that is smaller.
fn path_mtu(st: &QpState) -> u32 {
    let mtu = IbMtu::from_enum(st.attr.path_mtu).map_or(1024, IbMtu::bytes);
    st.path.as_ref().map_or(mtu, |p| mtu.min(p.mtu()))
}

/// Takes the next receive WQE: the one a lost UC message left
/// (`QpState::recv_spare`), or else the next from the QP's RQ or SRQ.
fn pop_recv(qp: &Qp<Roxe>, st: &mut QpState) -> Option<RecvCopy> {
    if let Some(r) = st.recv_spare.take() {
        return Some(r);
    }
    let this = qp.data();
    match (&this.rq, qp.srq()) {
        (Some(rq), _) => take_recv(rq, &mut st.rq_consumer).ok().flatten(),
        (None, Some(srq)) => crate::srq::pop(srq),
        (None, None) => None,
    }
}

fn recv_cqe(qp: &Qp<Roxe>, wr_id: u64, op: WcOp, status: WcStatus, byte_len: u32) -> Cqe {
    Cqe {
        wr_id,
        status: status as u32,
        opcode: op as u32,
        byte_len,
        qp_num: qp.qp_num(),
        port_num: PORT as u8,
        ..Cqe::default()
    }
}

fn push_recv(qp: &Qp<Roxe>, cqe: Cqe, solicited: bool) {
    if let Some(rcq) = qp.recv_cq() {
        let _ = cq::push(rcq, cqe, solicited);
    }
}

fn recv_ud(
    qp: &Qp<Roxe>,
    st: &mut QpState,
    pkt: &Packet<'_>,
    meta: &Meta<'_>,
) -> core::result::Result<(), Drop> {
    let deth = pkt.ext.deth.ok_or(Drop::Transport)?;
    // QP1 takes any Q_Key's datagrams only with the GSI Q_Key.
    if deth.qkey != st.attr.qkey {
        return Err(Drop::Qkey);
    }
    let grh = match meta.ip.first().map(|b| b >> 4) {
        Some(4) => ip::grh_from_ipv4(meta.ip),
        Some(6) => ip::grh_from_ipv6(meta.ip),
        _ => None,
    }
    .ok_or(Drop::Transport)?;
    // A datagram is one packet of at most the port's MTU; a longer one is
    // dropped before it takes a receive.
    let mtu = st
        .ndev
        .as_ref()
        .and_then(|nd| IbMtu::for_netdev_mtu(nd.mtu()));
    let mtu = mtu.unwrap_or(IbMtu::Mtu256);
    if pkt.payload.len() > mtu.bytes() as usize {
        return Err(Drop::Length);
    }
    let r = pop_recv(qp, st).ok_or(Drop::NoRecv)?;
    let pd = qp.pd_id();
    let dev = qp.device();
    // CAST: a UD payload is at most one MTU.
    let byte_len = (grh.len() + pkt.payload.len()) as u32;
    let res = if u64::from(byte_len) > r.total() {
        Err(WcStatus::LocLenErr)
    } else {
        r.scatter(dev, pd, 0, &grh)
            .and_then(|()| r.scatter(dev, pd, grh.len() as u64, pkt.payload))
    };
    let mut cqe = recv_cqe(
        qp,
        r.wr_id,
        WcOp::Recv,
        res.err().unwrap_or(WcStatus::Success),
        byte_len,
    );
    cqe.src_qp = deth.src_qpn;
    cqe.wc_flags = WC_GRH;
    // `enum rdma_network_type`: kernel consumers parse the GRH by it.
    cqe.network_hdr_type = if meta.ip.first().map(|b| b >> 4) == Some(6) {
        3
    } else {
        2
    };
    if let Some(imm) = pkt.ext.immdt {
        cqe.wc_flags |= WC_WITH_IMM;
        cqe.imm_data = imm.0.to_be();
    }
    push_recv(qp, cqe, pkt.bth.se);
    Ok(())
}

/// Sends an ACK or NAK for `psn`.
fn send_ack(qp: &Qp<Roxe>, st: &QpState, psn: Psn, syndrome: Syndrome) {
    let Some(path) = st.path.as_ref() else { return };
    let bth = Bth::new(
        Opcode::RcAcknowledge,
        DEFAULT_PKEY,
        st.attr.dest_qp_num,
        psn,
    );
    let ext = Ext {
        aeth: Some(Aeth {
            syndrome: syndrome.to_u8(),
            msn: st.msn,
        }),
        ..Ext::default()
    };
    let _ = path.send(
        udp::source_port(qp.qp_num(), st.attr.dest_qp_num),
        &bth,
        &ext,
        0,
        |_| true,
    );
}

fn respond(qp: &Qp<Roxe>, st: &mut QpState, pkt: &Packet<'_>) -> core::result::Result<(), Drop> {
    let rc = qp.data().qp_type == QpType::Rc;
    let psn = pkt.bth.psn;
    let pos = pkt.opcode.position();
    if psn != st.epsn {
        if !rc {
            // UC: a gap loses the message in progress; a new one may start.
            drop_message(st);
            if !pos.starts_message() {
                st.epsn = psn.next();
                return Err(Drop::Psn);
            }
        } else if psn.diff(st.epsn) < 0 {
            // A duplicate: answer it again (reads are re-executed, which
            // only reads memory, and only for a request served before;
            // atomics are replayed, never redone).
            if pkt.opcode == Opcode::RcRdmaReadRequest {
                return replay_read(qp, st, pkt);
            } else if matches!(
                pkt.opcode.operation(),
                Operation::CompareSwap | Operation::FetchAdd
            ) {
                return replay_atomic(qp, st, pkt);
            } else if matches!(
                pkt.opcode.operation(),
                Operation::AtomicWrite | Operation::Flush
            ) {
                // Answered again, not written again (a flush again would
                // change nothing), and only if one was executed at this
                // PSN: its answer would otherwise stand in for any read
                // response the requester still waits for there.
                if st.reads.find(&answered_empty(psn), path_mtu(st)).is_none() {
                    return Err(Drop::Duplicate);
                }
                send_read_ack(qp, st, psn, st.msn);
            } else {
                send_ack(qp, st, st.epsn.wrapping_sub(1), Syndrome::ACK);
            }
            return Err(Drop::Psn);
        } else {
            if !st.nak_sent {
                st.nak_sent = true;
                send_ack(qp, st, st.epsn, Syndrome::Nak(NakCode::PsnSequenceError));
            }
            return Err(Drop::Psn);
        }
    }
    st.nak_sent = false;
    let op = pkt.opcode.operation();
    // The opcode sequence: a message continues the one in progress, and
    // only a first or only packet starts one.
    let continues = match op {
        Operation::Send => st.recv.is_some(),
        Operation::RdmaWrite => st.wctx.is_some(),
        _ => false,
    };
    let busy = st.recv.is_some() || st.wctx.is_some();
    if continues == pos.starts_message() || (pos.starts_message() && busy) {
        if rc {
            return Err(refuse(qp, st, psn, Nak::Invalid));
        }
        // UC: the message in progress is lost (its last packet never came);
        // a packet that continues none belongs to a message lost before.
        drop_message(st);
        if !pos.starts_message() {
            st.epsn = psn.next();
            return Err(Drop::Psn);
        }
    }
    if matches!(op, Operation::Send | Operation::RdmaWrite)
        && !resp::payload_len_ok(pos, pkt.payload.len(), path_mtu(st))
    {
        // Checked before anything is taken or written: a packet of the
        // wrong size is an invalid request.
        return Err(refuse(qp, st, psn, Nak::Length));
    }
    let access = st.attr.access_flags;
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
    let result = match op {
        _ if rc && needs_resource && st.attr.max_dest_rd_atomic == 0 => Err(Nak::Invalid),
        Operation::Send => recv_send(qp, st, pkt),
        Operation::RdmaWrite => recv_write(qp, st, pkt, access),
        Operation::CompareSwap | Operation::FetchAdd if rc => {
            if access & REMOTE_ATOMIC == 0 {
                Err(Nak::Access)
            } else {
                atomic(qp, st, pkt)
            }
        }
        Operation::AtomicWrite if rc => {
            if access & REMOTE_WRITE == 0 {
                Err(Nak::Access)
            } else {
                atomic_write(qp, st, pkt)
            }
        }
        // As with rxe, the QP must allow the placement type too.
        Operation::Flush if rc => flush(qp, st, pkt, access),
        Operation::RdmaReadRequest if rc => {
            if access & REMOTE_READ == 0 {
                Err(Nak::Access)
            } else {
                return read_response(qp, st, pkt).map_err(|n| refuse(qp, st, psn, n));
            }
        }
        _ => Err(Nak::Invalid),
    };
    match result {
        Ok(()) => {
            st.epsn = psn.next();
            if pos.ends_message() {
                st.msn = (st.msn + 1) & 0x00ff_ffff;
            }
            let is_atomic = matches!(
                op,
                Operation::CompareSwap
                    | Operation::FetchAdd
                    | Operation::AtomicWrite
                    | Operation::Flush
            );
            if rc && pkt.bth.ack_req && !is_atomic {
                send_ack(qp, st, psn, Syndrome::ACK);
            }
            Ok(())
        }
        Err(Nak::Rnr) => {
            if let (true, Some(t)) = (
                rc,
                crate::proto::aeth::RnrTimer::from_code(st.attr.min_rnr_timer),
            ) {
                send_ack(qp, st, psn, Syndrome::RnrNak(t));
            }
            Err(Drop::NoRecv)
        }
        Err(n) => Err(refuse(qp, st, psn, n)),
    }
}

/// Why the responder refuses a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Nak {
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
    if let Some(p) = st.recv.take() {
        st.recv_spare = Some(p.wqe);
    }
    st.wctx = None;
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
    if let Some(p) = st.recv.take() {
        let mut cqe = recv_cqe(qp, p.wqe.wr_id, WcOp::Recv, status, 0);
        cqe.src_qp = st.attr.dest_qp_num;
        push_recv(qp, cqe, true);
    }
    st.wctx = None;
    st.attr.state = State::Err;
    crate::qp::flush_all(qp, st);
    drop
}

/// A SEND packet: the payload goes to the receive WQE the first packet took.
///
/// A receive buffer that cannot take the payload (too short, a bad lkey)
/// completes its WQE at once with the local error, and the request is
/// refused (a length error is an invalid request, as in rxe); so is a
/// message that would pass [`MAX_MSG`] bytes.
fn recv_send(qp: &Qp<Roxe>, st: &mut QpState, pkt: &Packet<'_>) -> core::result::Result<(), Nak> {
    let pos = pkt.opcode.position();
    if pos.starts_message() {
        let r = pop_recv(qp, st).ok_or(Nak::Rnr)?;
        st.recv = Some(crate::qp::RecvProgress { wqe: r, off: 0 });
    }
    let dev = qp.device();
    let pd = qp.pd_id();
    let Some(p) = st.recv.as_mut() else {
        return Err(Nak::Invalid);
    };
    let end = p
        .off
        .checked_add(pkt.payload.len() as u64)
        .filter(|e| *e <= MAX_MSG);
    let placed = match end {
        Some(_) => p.wqe.scatter(dev, pd, p.off, pkt.payload),
        None => Err(WcStatus::LocLenErr),
    };
    if let Err(status) = placed {
        let Some(p) = st.recv.take() else {
            return Err(Nak::Invalid);
        };
        // CAST: `off` is at most MAX_MSG (2^31).
        let mut cqe = recv_cqe(qp, p.wqe.wr_id, WcOp::Recv, status, p.off as u32);
        cqe.src_qp = st.attr.dest_qp_num;
        push_recv(qp, cqe, true);
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
    let Some(p) = st.recv.take() else {
        return Err(Nak::Invalid);
    };
    // CAST: at most MAX_MSG (2^31).
    let mut cqe = recv_cqe(qp, p.wqe.wr_id, WcOp::Recv, WcStatus::Success, p.off as u32);
    cqe.src_qp = st.attr.dest_qp_num;
    if let Some(imm) = pkt.ext.immdt {
        cqe.wc_flags |= WC_WITH_IMM;
        cqe.imm_data = imm.0.to_be();
    }
    let mut status = WcStatus::Success;
    if let Some(ieth) = pkt.ext.ieth {
        // Send with Invalidate: the key goes once the data is in.
        if mr::invalidate(dev.data(), pd, Some(qp.qp_num()), ieth.rkey).is_ok() {
            cqe.wc_flags |= WC_WITH_INV;
            cqe.imm_data = ieth.rkey;
        } else {
            status = WcStatus::RemInvReqErr;
            cqe.status = status as u32;
        }
    }
    push_recv(qp, cqe, pkt.bth.se);
    match status {
        WcStatus::Success => Ok(()),
        _ => Err(Nak::Operational),
    }
}

/// An RDMA WRITE packet: the first names the target, each writes its part.
fn recv_write(
    qp: &Qp<Roxe>,
    st: &mut QpState,
    pkt: &Packet<'_>,
    access: u32,
) -> core::result::Result<(), Nak> {
    let pos = pkt.opcode.position();
    let (dev, pd, qpn) = (qp.device().data(), qp.pd_id(), qp.qp_num());
    if pos.starts_message() {
        if st.wctx.is_some() {
            return Err(Nak::Invalid);
        }
        let reth = pkt.ext.reth.ok_or(Nak::Invalid)?;
        if reth.dma_len > resp::MAX_DMA_LEN {
            return Err(Nak::Length);
        }
        if access & REMOTE_WRITE == 0 {
            return Err(Nak::Access);
        }
        if reth.dma_len != 0 {
            mr::with_rkey(
                dev,
                mr::Asker { pd, qpn },
                reth.rkey,
                reth.va,
                reth.dma_len,
                REMOTE_WRITE,
                |_, _| Ok(()),
            )
            .map_err(|_| Nak::Access)?;
        }
        st.wctx = Some(crate::qp::WriteProgress {
            rkey: reth.rkey,
            va: reth.va,
            len: reth.dma_len,
            off: 0,
        });
    }
    let Some(w) = st.wctx.as_mut() else {
        return Err(Nak::Invalid);
    };
    // CAST: a payload is at most one MTU (`resp::payload_len_ok`).
    let n = pkt.payload.len() as u32;
    let Some((va, end)) = resp::write_place(w.va, w.off, n, w.len, pos) else {
        st.wctx = None;
        return Err(Nak::Length);
    };
    let (rkey, imm) = (w.rkey, pkt.ext.immdt.filter(|_| pos.ends_message()));
    // Write with immediate consumes a receive WQE (with no data) at its
    // last packet. It is taken before anything changes, once the key has
    // been checked, so that an RNR NAK leaves the write where it was and
    // the requester's resend of this packet is accepted. Until the write
    // is done it is the message's (`recv`), so that a failed write
    // completes it with the error (RC) or leaves it for the next message
    // (UC), as `refuse` does.
    if imm.is_some() {
        if n != 0 {
            mr::with_rkey(
                dev,
                mr::Asker { pd, qpn },
                rkey,
                va,
                n,
                REMOTE_WRITE,
                |_, _| Ok(()),
            )
            .map_err(|_| Nak::Access)?;
        }
        let Some(r) = pop_recv(qp, st) else {
            // The requester sends this packet again after the RNR wait:
            // if it starts the message, it must find none in progress.
            if pos.starts_message() {
                st.wctx = None;
            }
            return Err(Nak::Rnr);
        };
        st.recv = Some(crate::qp::RecvProgress { wqe: r, off: 0 });
    }
    if n != 0 {
        mr::with_rkey(
            dev,
            mr::Asker { pd, qpn },
            rkey,
            va,
            n,
            REMOTE_WRITE,
            |m, o| m.write(o, pkt.payload),
        )
        .map_err(|_: KeyError| Nak::Access)?;
    }
    let Some(w) = st.wctx.as_mut() else {
        return Err(Nak::Invalid);
    };
    w.off = end;
    if !pos.ends_message() {
        return Ok(());
    }
    let Some(w) = st.wctx.take() else {
        return Err(Nak::Invalid);
    };
    if let (Some(imm), Some(r)) = (imm, st.recv.take()) {
        let mut cqe = recv_cqe(qp, r.wqe.wr_id, WcOp::RecvRdmaImm, WcStatus::Success, w.len);
        cqe.src_qp = st.attr.dest_qp_num;
        cqe.wc_flags = WC_WITH_IMM;
        cqe.imm_data = imm.0.to_be();
        push_recv(qp, cqe, pkt.bth.se);
    }
    Ok(())
}

/// Sends the ATOMIC ACKNOWLEDGE for `psn` with the original value.
fn send_atomic_ack(qp: &Qp<Roxe>, st: &QpState, psn: Psn, orig: u64) {
    let Some(path) = st.path.as_ref() else { return };
    let bth = Bth::new(
        Opcode::RcAtomicAcknowledge,
        DEFAULT_PKEY,
        st.attr.dest_qp_num,
        psn,
    );
    let ext = Ext {
        aeth: Some(Aeth {
            syndrome: Syndrome::ACK.to_u8(),
            msn: st.msn,
        }),
        atomic_ack_eth: Some(headers::AtomicAckEth { orig }),
        ..Ext::default()
    };
    let _ = path.send(
        udp::source_port(qp.qp_num(), st.attr.dest_qp_num),
        &bth,
        &ext,
        0,
        |_| true,
    );
}

/// Executes a CmpSwap or FetchAdd on 8 aligned bytes of an MR, answers it,
/// and keeps the result to replay for a duplicate.
fn atomic(qp: &Qp<Roxe>, st: &mut QpState, pkt: &Packet<'_>) -> core::result::Result<(), Nak> {
    let a = pkt.ext.atomic_eth.ok_or(Nak::Invalid)?;
    if a.va % 8 != 0 {
        return Err(Nak::Invalid);
    }
    let swap = pkt.opcode.operation() == Operation::CompareSwap;
    let (dev, pd, qpn) = (qp.device().data(), qp.pd_id(), qp.qp_num());
    let orig = mr::with_rkey(
        dev,
        mr::Asker { pd, qpn },
        a.rkey,
        a.va,
        8,
        REMOTE_ATOMIC,
        |m, off| {
            m.atomic(off, |v| {
                if swap {
                    if v == a.compare {
                        a.swap_add
                    } else {
                        v
                    }
                } else {
                    v.wrapping_add(a.swap_add)
                }
            })
        },
    )
    .map_err(|_| Nak::Access)?;
    let psn = pkt.bth.psn;
    let slot = st.atomic_next % st.atomic_replay.len();
    st.atomic_replay[slot] = AtomicDone {
        psn: psn.get(),
        rkey: a.rkey,
        va: a.va,
        orig,
    };
    st.atomic_next = st.atomic_next.wrapping_add(1);
    // The ACK carries the MSN of this message.
    st.msn = (st.msn + 1) & 0x00ff_ffff;
    send_atomic_ack(qp, st, psn, orig);
    st.msn = (st.msn + 0x00ff_ffff) & 0x00ff_ffff;
    Ok(())
}

/// Answers a duplicate CmpSwap or FetchAdd with the value its original
/// found, without executing it again: only if an atomic was executed at
/// its PSN with the same rkey and address, and the QP and the key still
/// grant remote atomics there, as they did for the original.
fn replay_atomic(
    qp: &Qp<Roxe>,
    st: &mut QpState,
    pkt: &Packet<'_>,
) -> core::result::Result<(), Drop> {
    let a = pkt.ext.atomic_eth.ok_or(Drop::Duplicate)?;
    let psn = pkt.bth.psn;
    let done = st
        .atomic_replay
        .iter()
        .find(|d| d.psn == psn.get() && d.rkey == a.rkey && d.va == a.va);
    let Some(&AtomicDone { orig, .. }) = done else {
        return Err(Drop::Duplicate);
    };
    if st.attr.access_flags & REMOTE_ATOMIC == 0 {
        return Err(Drop::Duplicate);
    }
    let (dev, pd, qpn) = (qp.device().data(), qp.pd_id(), qp.qp_num());
    if mr::with_rkey(
        dev,
        mr::Asker { pd, qpn },
        a.rkey,
        a.va,
        8,
        REMOTE_ATOMIC,
        |_, _| Ok(()),
    )
    .is_err()
    {
        return Err(Drop::Duplicate);
    }
    send_atomic_ack(qp, st, psn, orig);
    Err(Drop::Psn)
}

/// What the responder remembers of an Atomic Write or FLUSH it executed at
/// `psn`, among its read requests: an empty read, whose answer is the same
/// empty RDMA READ RESPONSE ONLY that a duplicate of it gets.
fn answered_empty(psn: Psn) -> ReadRequest {
    ReadRequest {
        va: 0,
        psn,
        rkey: 0,
        len: 0,
    }
}

/// Sends the empty RDMA READ RESPONSE ONLY that acknowledges an Atomic
/// Write at `psn`, with MSN `msn`.
fn send_read_ack(qp: &Qp<Roxe>, st: &QpState, psn: Psn, msn: u32) {
    let Some(path) = st.path.as_ref() else { return };
    let bth = Bth::new(
        Opcode::RcRdmaReadResponseOnly,
        DEFAULT_PKEY,
        st.attr.dest_qp_num,
        psn,
    );
    let ext = Ext {
        aeth: Some(Aeth {
            syndrome: Syndrome::ACK.to_u8(),
            msn,
        }),
        ..Ext::default()
    };
    let _ = path.send(
        udp::source_port(qp.qp_num(), st.attr.dest_qp_num),
        &bth,
        &ext,
        0,
        |_| true,
    );
}

/// Executes an Atomic Write: 8 bytes to an aligned address, in one store
/// under the key-table lock, so no reader or remote atomic sees half of it.
fn atomic_write(
    qp: &Qp<Roxe>,
    st: &mut QpState,
    pkt: &Packet<'_>,
) -> core::result::Result<(), Nak> {
    let reth = pkt.ext.reth.ok_or(Nak::Invalid)?;
    if reth.dma_len != 8 || pkt.payload.len() != 8 || reth.va % 8 != 0 {
        return Err(Nak::Invalid);
    }
    let (dev, pd, qpn) = (qp.device().data(), qp.pd_id(), qp.qp_num());
    mr::with_rkey(
        dev,
        mr::Asker { pd, qpn },
        reth.rkey,
        reth.va,
        8,
        REMOTE_WRITE,
        |m, o| m.write(o, pkt.payload),
    )
    .map_err(|_| Nak::Access)?;
    // The response carries the MSN of this message.
    send_read_ack(qp, st, pkt.bth.psn, (st.msn + 1) & 0x00ff_ffff);
    st.reads.remember(
        answered_empty(pkt.bth.psn),
        usize::from(st.attr.max_dest_rd_atomic),
    );
    Ok(())
}

/// Executes a FLUSH. Every write before it has already been copied into
/// memory by this same receive path, so making them globally visible
/// takes only a full fence. The QP must allow the placement type (an
/// invalid-request NAK otherwise), and the key must grant the matching
/// flush right (for the range, or with the MR selectivity level for the
/// whole MR; a remote access NAK otherwise). The answer is an empty read
/// response, as for Atomic Write.
fn flush(
    qp: &Qp<Roxe>,
    st: &mut QpState,
    pkt: &Packet<'_>,
    qp_access: u32,
) -> core::result::Result<(), Nak> {
    let feth = pkt.ext.feth.ok_or(Nak::Invalid)?;
    let reth = pkt.ext.reth.ok_or(Nak::Invalid)?;
    let need = match feth.placement_type {
        FLUSH_GLOBAL_TYPE => FLUSH_GLOBAL,
        FLUSH_PERSISTENT_TYPE => FLUSH_PERSISTENT,
        _ => return Err(Nak::Invalid),
    };
    if qp_access & need == 0 {
        return Err(Nak::Invalid);
    }
    let (dev, pd, qpn) = (qp.device().data(), qp.pd_id(), qp.qp_num());
    if feth.selectivity > FLUSH_LEVEL_MR {
        return Err(Nak::Invalid);
    }
    let checked = if feth.selectivity == FLUSH_LEVEL_MR {
        mr::check_whole(dev, reth.rkey, pd, need)
    } else {
        mr::with_rkey(
            dev,
            mr::Asker { pd, qpn },
            reth.rkey,
            reth.va,
            reth.dma_len,
            need,
            |_, _| Ok(()),
        )
    };
    checked.map_err(|_| Nak::Access)?;
    core::sync::atomic::fence(core::sync::atomic::Ordering::SeqCst);
    send_read_ack(qp, st, pkt.bth.psn, (st.msn + 1) & 0x00ff_ffff);
    st.reads.remember(
        answered_empty(pkt.bth.psn),
        usize::from(st.attr.max_dest_rd_atomic),
    );
    Ok(())
}

/// Answers an RDMA READ request with response packets.
///
/// A request at the expected PSN is remembered, so that a duplicate of it
/// can be answered again ([`replay_read`]).
fn read_response(
    qp: &Qp<Roxe>,
    st: &mut QpState,
    pkt: &Packet<'_>,
) -> core::result::Result<(), Nak> {
    let reth = pkt.ext.reth.ok_or(Nak::Invalid)?;
    if reth.dma_len > resp::MAX_DMA_LEN {
        return Err(Nak::Length);
    }
    let mtu = path_mtu(st);
    let Some(path) = st.path.as_ref() else {
        return Err(Nak::Invalid);
    };
    let n = seg::packet_count(reth.dma_len, mtu).ok_or(Nak::Invalid)?;
    let dev = qp.device().data();
    let pd = qp.pd_id();
    let qpn = qp.qp_num();
    if reth.dma_len != 0 {
        mr::with_rkey(
            dev,
            mr::Asker { pd, qpn },
            reth.rkey,
            reth.va,
            reth.dma_len,
            REMOTE_READ,
            |_, _| Ok(()),
        )
        .map_err(|_| Nak::Access)?;
    }
    let msn = if pkt.bth.psn == st.epsn {
        (st.msn + 1) & 0x00ff_ffff
    } else {
        st.msn
    };
    let sport = udp::source_port(qp.qp_num(), st.attr.dest_qp_num);
    // At most one window of responses goes out per request: a requester
    // that asks for megabytes at once would otherwise get thousands of
    // packets in one burst, more than the queues on the way hold. What is
    // held back looks like loss to the requester, which asks again from
    // the first missing PSN (a duplicate, answered the same way).
    for i in 0..n.min(WINDOW) {
        let pos = seg::position(i, n);
        let opcode = seg::read_response_opcode(pos);
        let off = i * mtu;
        // `off` is below the DMA length, or both are 0.
        let plen = reth.dma_len.saturating_sub(off).min(mtu);
        let mut bth = Bth::new(
            opcode,
            DEFAULT_PKEY,
            st.attr.dest_qp_num,
            pkt.bth.psn.wrapping_add(i),
        );
        bth.pad = headers::pad_len(plen as usize);
        let ext = Ext {
            aeth: (pos != Position::Middle).then_some(Aeth {
                syndrome: Syndrome::ACK.to_u8(),
                msn,
            }),
            ..Ext::default()
        };
        // Below the end of the range the key check passed (an empty read
        // sends one empty packet at offset 0), so this does not wrap.
        let va = reth.va.wrapping_add(u64::from(off));
        let _ = path.send(sport, &bth, &ext, plen as usize, |buf| {
            buf.is_empty()
                || mr::with_rkey(
                    dev,
                    mr::Asker { pd, qpn },
                    reth.rkey,
                    va,
                    plen,
                    REMOTE_READ,
                    |m, o| m.read(o, buf),
                )
                .is_ok()
        });
    }
    if pkt.bth.psn == st.epsn {
        st.epsn = pkt.bth.psn.wrapping_add(n);
        st.msn = msn;
        let req = ReadRequest {
            va: reth.va,
            psn: pkt.bth.psn,
            rkey: reth.rkey,
            len: reth.dma_len,
        };
        st.reads
            .remember(req, usize::from(st.attr.max_dest_rd_atomic));
    }
    Ok(())
}

/// Answers a duplicate RDMA READ request (its PSN is behind the expected
/// one) again, if it asks for a request this responder served and still
/// remembers, or for the tail of one ([`ReadRequest::covers`]), and if the
/// QP and the key still allow it: `read_response` checks the key and range
/// again. Anything else is dropped unanswered, as `Drop::Duplicate`; an
/// answered duplicate counts as `Drop::Psn`, as other duplicates do.
fn replay_read(
    qp: &Qp<Roxe>,
    st: &mut QpState,
    pkt: &Packet<'_>,
) -> core::result::Result<(), Drop> {
    let reth = pkt.ext.reth.ok_or(Drop::Duplicate)?;
    let dup = ReadRequest {
        va: reth.va,
        psn: pkt.bth.psn,
        rkey: reth.rkey,
        len: reth.dma_len,
    };
    if st.attr.access_flags & REMOTE_READ == 0 || st.reads.find(&dup, path_mtu(st)).is_none() {
        return Err(Drop::Duplicate);
    }
    match read_response(qp, st, pkt) {
        Ok(()) => Err(Drop::Psn),
        Err(_) => Err(Drop::Duplicate),
    }
}

/// The completer: ACKs, NAKs and read responses for the requester.
fn complete(qp: &Qp<Roxe>, st: &mut QpState, pkt: &Packet<'_>) -> core::result::Result<(), Drop> {
    let this = qp.data();
    if this.qp_type != QpType::Rc {
        return Err(Drop::Transport);
    }
    let psn = pkt.bth.psn;
    if pkt.opcode.operation() == Operation::RdmaReadResponse {
        // The oldest unfinished WQE must be a read whose range holds `psn`.
        ack_before_read(qp, st);
        if !outstanding(st) {
            return Err(Drop::Unexpected);
        }
        let idx = st.sq_consumer;
        let (first, last, is_read) = st.wqe_psn(idx);
        if !is_read || !psn.in_range(first, last.next()) {
            return Err(Drop::Unexpected);
        }
        if psn.diff(st.npsn) >= 0 {
            // Not asked for (any more): after going back, a read waiting
            // for credits has not asked again, and what is still arriving
            // from before must not complete it.
            return Err(Drop::Unexpected);
        }
        let i = first.distance(psn);
        if i != st.read_next {
            // A gap: ask again from the start of the read.
            if i > st.read_next {
                go_back_once(qp, st);
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
        let mtu = path_mtu(st);
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
            SendOp::RdmaRead => scatter_read(qp, idx, &w, off, pkt.payload),
            // An Atomic Write's answer carries no data: its SGE is the
            // source, never written.
            SendOp::AtomicWrite | SendOp::Flush if pkt.payload.is_empty() => Ok(()),
            _ => return Err(Drop::Unexpected),
        };
        st.read_next += 1;
        st.una = psn.next();
        progress(st);
        if op == SendOp::Flush {
            // The peer takes this QP's FLUSH ICRC: keep it.
            st.flush_icrc_known = true;
        }
        if op == SendOp::RdmaRead && st.read_held != 0 {
            st.read_held -= 1;
            this_dev_credits(qp).give_back(1);
        }
        if let Err(e) = status {
            st.read_next = 0;
            fail(qp, st, &w, op, e);
            return Ok(());
        }
        if psn == last {
            st.read_next = 0;
            st.reads_out = st.reads_out.saturating_sub(1);
            // CAST: messages are at most 2 GiB.
            let len = msg_len(this, idx, &w).unwrap_or(0);
            complete_send(qp, st, &w, op, WcStatus::Success, len);
            ack_up_to(qp, st, psn);
            if !outstanding(st) {
                // Nothing asked for is still due: a responder that answered
                // short leaves nothing held.
                st.release_reads(this_dev_credits(qp));
            }
            send_pending(qp, st);
        } else if st.sq_pkt != 0 {
            // The window moved: more of this read may be requested.
            send_pending(qp, st);
        }
        return Ok(());
    }
    if pkt.opcode == Opcode::RcAtomicAcknowledge {
        ack_before_read(qp, st);
        if !outstanding(st) {
            return Err(Drop::Unexpected);
        }
        let idx = st.sq_consumer;
        let (first, _, waits) = st.wqe_psn(idx);
        let w = this.sq.read(idx);
        let op = SendOp::from_raw(w.opcode).unwrap_or(SendOp::Send);
        if !waits || first != psn || !matches!(op, SendOp::CmpSwap | SendOp::FetchAdd) {
            return Err(Drop::Unexpected);
        }
        let orig = pkt.ext.atomic_ack_eth.ok_or(Drop::Unexpected)?.orig;
        st.una = psn.next();
        progress(st);
        st.reads_out = st.reads_out.saturating_sub(1);
        match scatter_read(qp, idx, &w, 0, &orig.to_ne_bytes()) {
            Ok(()) => complete_send(qp, st, &w, op, WcStatus::Success, 8),
            Err(e) => {
                fail(qp, st, &w, op, e);
                return Ok(());
            }
        }
        ack_up_to(qp, st, psn);
        send_pending(qp, st);
        return Ok(());
    }
    let aeth = pkt.ext.aeth.ok_or(Drop::Unexpected)?;
    let syndrome = Syndrome::from_u8(aeth.syndrome);
    // A NAK names a packet sent and not yet acknowledged: at or after
    // `una`, and within the window (`npsn` itself may have gone back
    // behind a NAK still in flight). An older one (delayed, duplicated) or
    // one out of reach (forged without the live PSN) must not fail or
    // rewind today's work.
    let nak_window_end = Psn::new(st.una.get().wrapping_add(WINDOW + 1));
    if matches!(syndrome, Some(Syndrome::Nak(_) | Syndrome::RnrNak(_)))
        && !psn.in_range(st.una, nak_window_end)
    {
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
                go_back_once(qp, st);
                return Ok(());
            }
            if st.sq_sent == st.sq_consumer {
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
        Some(Syndrome::RnrNak(t)) => {
            ack_up_to(qp, st, psn.wrapping_sub(1));
            if st.sq_sent == st.sq_consumer {
                return Err(Drop::Unexpected);
            }
            rnr_nak(qp, st, t.usecs());
            Ok(())
        }
        None => Err(Drop::Unexpected),
    }
}

/// The local ACK timeout in milliseconds (4.096 us << `timeout`, at least
/// 10 ms so a slow virtual machine does not retry needlessly), or `None`
/// for `timeout` 0, which the standard makes infinite.
fn timeout_ms(st: &QpState) -> Option<u32> {
    let t = st.attr.timeout.min(31);
    if t == 0 {
        return None;
    }
    let ms = (4096u64 << t) / 1_000_000;
    // CAST: clamped to a minute.
    Some(ms.clamp(10, 60_000) as u32)
}

/// Whether sent work waits for acknowledgement.
fn outstanding(st: &QpState) -> bool {
    st.sq_sent != st.sq_consumer || st.sq_pkt != 0
}

/// Starts the retry timer while work waits for acknowledgement.
fn arm_retry(qp: &Qp<Roxe>, st: &mut QpState) {
    if outstanding(st) && !st.rnr_wait {
        if let Some(ms) = timeout_ms(st) {
            // This replaces a pending kick's expiry; the send it was for
            // has just run.
            st.kick = false;
            qp.arm_timer(ms);
        }
    }
}

/// Rewinds the requester to the first unacknowledged PSN (go-back-N): the
/// oldest unfinished WQE is sent again from the packet the responder has
/// not acknowledged (a read asks again for the rest), and everything after
/// it again in full.
fn go_back(qp: &Qp<Roxe>, st: &mut QpState) {
    // The reads asked again take their credits again.
    st.release_reads(&qp.device().data().read_credits);
    if outstanding(st) {
        let (first, last, waits) = st.wqe_psn(st.sq_consumer);
        let resume = if st.una.in_range(first, last.next()) {
            st.una
        } else {
            first
        };
        st.sq_sent = st.sq_consumer;
        st.sq_pkt = first.distance(resume);
        st.npsn = resume;
        st.una = resume;
        // A read resumed part-way is still outstanding; its responses so
        // far count.
        st.read_next = if waits { st.sq_pkt } else { 0 };
        st.reads_out = u32::from(waits && st.sq_pkt != 0);
    }
}

/// Goes back after a gap, unless a go-back is already under way: the
/// packets still arriving from before it would each trigger another.
fn go_back_once(qp: &Qp<Roxe>, st: &mut QpState) {
    if !st.retrying {
        st.retrying = true;
        go_back(qp, st);
        send_pending(qp, st);
    }
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
        crate::qp::run_kernel_posts(qp, st);
    }
    if core::mem::take(&mut st.kick) {
        // More to send after a full budget.
        send_pending(qp, st);
        return;
    }
    if this.qp_type != QpType::Rc {
        return;
    }
    if !matches!(st.attr.state, State::Rts | State::Sqd) {
        st.rnr_wait = false;
        return;
    }
    if st.rnr_wait {
        // The RNR NAK already rewound the requester, so nothing counts as
        // outstanding now: send again from there.
        st.rnr_wait = false;
    } else if !outstanding(st) {
        return;
    } else if st.retry_left == 0 {
        let w = this.sq.read(st.sq_consumer);
        let op = SendOp::from_raw(w.opcode).unwrap_or(SendOp::Send);
        fail(qp, st, &w, op, WcStatus::RetryExcErr);
        return;
    } else {
        st.retry_left -= 1;
        // A FLUSH that went unanswered may have met rxe, which drops the
        // standard ICRC on FLUSH and wants its own: until a FLUSH of this
        // QP is answered, each timeout of one switches between the two
        // (Documentation/datapath.md, Flush).
        if !st.flush_icrc_known
            && SendOp::from_raw(this.sq.read(st.sq_consumer).opcode) == Some(SendOp::Flush)
        {
            st.flush_icrc_rxe = !st.flush_icrc_rxe;
        }
    }
    st.retrying = true;
    go_back(qp, st);
    send_pending(qp, st);
}

/// Handles an RNR NAK: wait the time the responder asked for, then resend
/// from the oldest unacknowledged WQE, `rnr_retry` times (7 is forever).
fn rnr_nak(qp: &Qp<Roxe>, st: &mut QpState, usecs: u32) {
    if st.rnr_left == 0 {
        let w = qp.data().sq.read(st.sq_consumer);
        let op = SendOp::from_raw(w.opcode).unwrap_or(SendOp::Send);
        fail(qp, st, &w, op, WcStatus::RnrRetryExcErr);
        return;
    }
    if st.attr.rnr_retry != 7 {
        st.rnr_left -= 1;
    }
    go_back(qp, st);
    st.rnr_wait = true;
    // The RNR timer below replaces any pending kick's expiry, and its end
    // resumes sending; a kick left set would take that timer's turn and
    // send nothing (RNR wait), leaving the queue stalled.
    st.kick = false;
    qp.arm_timer(usecs.div_ceil(1000).max(1));
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
        let (first, _, waits) = st.wqe_psn(st.sq_consumer);
        if waits {
            let got = first.wrapping_add(st.read_next);
            if got.diff(acked) < 0 {
                acked = got;
            }
        }
    }
    if acked.wrapping_sub(1).in_range(st.una, st.npsn) {
        st.una = acked;
        progress(st);
    }
}

/// The responder acknowledged something new: the retry budgets start
/// again, and a later gap may trigger a new go-back.
fn progress(st: &mut QpState) {
    st.retrying = false;
    st.retry_left = st.attr.retry_cnt;
    st.rnr_left = st.attr.rnr_retry;
}

fn ack_loop(qp: &Qp<Roxe>, st: &mut QpState, psn: Psn) {
    let this = qp.data();
    while st.sq_consumer != st.sq_sent {
        let idx = st.sq_consumer;
        let (_, last, is_read) = st.wqe_psn(idx);
        if is_read || psn.diff(last) < 0 {
            break;
        }
        let w = this.sq.read(idx);
        let op = SendOp::from_raw(w.opcode).unwrap_or(SendOp::Send);
        let len = msg_len(this, idx, &w).unwrap_or(0);
        complete_send(qp, st, &w, op, WcStatus::Success, len);
    }
    if st.sq_consumer == st.sq_sent {
        if let Some(status) = st.sq_blocked.take() {
            let w = this.sq.read(st.sq_consumer);
            let op = SendOp::from_raw(w.opcode).unwrap_or(SendOp::Send);
            fail(qp, st, &w, op, status);
        }
    }
}

/// A read response implicitly acknowledges the sends before the read.
fn ack_before_read(qp: &Qp<Roxe>, st: &mut QpState) {
    while st.sq_consumer != st.sq_sent {
        let (_, last, is_read) = st.wqe_psn(st.sq_consumer);
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
) -> core::result::Result<(), WcStatus> {
    let (dev, pd) = (qp.device().data(), qp.pd_id());
    for_pieces(
        send_sges(qp.data(), idx, w),
        u64::from(off),
        data.len(),
        |va, lkey, r| {
            let src = &data[r];
            // CAST: a piece is at most an SGE length.
            mr::with_key(dev, lkey, pd, |m| {
                m.write(m.check(va, src.len() as u32, LOCAL_WRITE)?, src)
            })
        },
    )
}
