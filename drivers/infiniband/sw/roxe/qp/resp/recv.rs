// SPDX-License-Identifier: GPL-2.0

//! The responder's receive queues: receive WQEs taken from the RQ or SRQ,
//! receive completions, and UD datagrams.

use crate::counters::{Drop, Event};
use crate::cq;
use crate::device::Roxe;
use crate::limits::PORT;
use crate::proto::headers::Packet;
use crate::proto::ip::{self, GRH_LEN};
use crate::proto::mtu::IbMtu;
use crate::proto::qp::State;
use crate::proto::responder::ScatterError;
use crate::proto::wr::{WcOp, WcStatus};
use crate::qp::QpState;
use crate::rdma::qp::Qp;
use crate::uapi::{wc_flags, Cqe};
use crate::wqe::{take_recv, RecvCopy};
use kernel::alloc::flags::GFP_ATOMIC;
use kernel::prelude::*;

/// Takes the next receive WQE from the QP's RQ (whose consumer index is
/// `rq_consumer`) or SRQ.
pub(super) fn pop_queue(qp: &Qp<Roxe>, rq_consumer: &mut u32) -> Option<RecvCopy> {
    let this = qp.data();
    match (&this.rq, qp.srq()) {
        (Some(rq), _) => take_recv(rq, rq_consumer),
        (None, Some(srq)) => crate::srq::pop(srq),
        (None, None) => None,
    }
}

pub(super) fn recv_cqe(
    qp: &Qp<Roxe>,
    wr_id: u64,
    op: WcOp,
    status: WcStatus,
    byte_len: u32,
) -> Cqe {
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

pub(super) fn push_recv(qp: &Qp<Roxe>, cqe: Cqe, solicited: bool) {
    if let Some(rcq) = qp.recv_cq() {
        let _ = cq::push(rcq, cqe, solicited);
    }
}

/// The `sl` of a user-space UD receive completion for a RoCE v2 datagram
/// over IPv4, as mlx5 devices report it.
const SL_ROCE_V2_IPV4: u8 = 2;

/// How many datagrams a UD QP keeps while the pages of its receive buffer
/// are faulted in. One more is dropped (`rx_drop_not_present`), as UD may
/// drop any datagram.
const PARK_UD: usize = 16;

/// How many packets a QP keeps in all: besides datagrams, requests an RC
/// QP keeps while its DCQCN rate holds its read responses back. One more
/// is dropped (`rx_drop_paced`), and its requester sends it again.
const PARK_MAX: usize = 64;

/// What a datagram's receive completion says besides its bytes.
#[derive(Clone, Copy)]
struct DgMeta {
    src_qpn: u32,
    imm: Option<u32>,
    solicited: bool,
    ipv6: bool,
}

/// A packet a QP keeps to take later: a datagram that met a receive
/// buffer paged on demand before its pages were mapped, or a request that
/// came while the QP's rate held its read responses back.
struct Parked {
    /// A datagram: its GRH, then its payload. A request: the RoCE packet,
    /// BTH to ICRC, as it arrived (its ICRC and addresses were checked).
    bytes: KVec<u8>,
    /// A datagram's completion fields; `None` for a request.
    meta: Option<DgMeta>,
}

/// The packets a QP keeps, oldest first. They are taken, in order, before
/// any packet that arrives after them: from the QP's timer, or when the
/// next packet comes.
///
/// - A UD QP keeps datagrams for an ODP receive buffer; the timer looks
///   again 1 ms after the miss (the fault queue is at work by then). The
///   receive WQE that missed stays with the responder
///   ([`Responder::hold`]). After three failed faults a buffer's next miss
///   is an access error, so a datagram whose buffer cannot be mapped
///   completes in error and does not wait forever.
/// - An RC QP whose DCQCN rate is below the line keeps a read request
///   until the rate lets its responses go, and every request behind it,
///   so that the answers keep their order (`super::respond`).
///
/// [`Responder::hold`]: crate::proto::responder::Responder::hold
pub(crate) struct Park {
    /// Allocated with the first datagram kept, so a QP that never meets an
    /// unmapped buffer carries one pointer.
    slots: Option<KBox<[Option<Parked>; PARK_MAX]>>,
    head: usize,
    len: usize,
}

impl Park {
    pub(crate) const fn new() -> Self {
        Park {
            slots: None,
            head: 0,
            len: 0,
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Forgets every kept packet (the QP left the receiving states).
    pub(crate) fn clear(&mut self) {
        *self = Self::new();
    }

    /// Keeps `p` last, unless `limit` packets are kept already.
    fn push_back(&mut self, p: Parked, limit: usize) -> core::result::Result<(), Parked> {
        if self.len >= limit.min(PARK_MAX) {
            return Err(p);
        }
        if self.slots.is_none() {
            match KBox::new([const { None }; PARK_MAX], GFP_ATOMIC) {
                Ok(b) => self.slots = Some(b),
                Err(_) => return Err(p),
            }
        }
        let Some(slots) = self.slots.as_mut() else {
            return Err(p);
        };
        slots[(self.head + self.len) % PARK_MAX] = Some(p);
        self.len += 1;
        Ok(())
    }

    /// Puts back the datagram [`pop_front`](Self::pop_front) just took.
    fn push_front(&mut self, p: Parked) {
        if let Some(slots) = self.slots.as_mut() {
            self.head = (self.head + PARK_MAX - 1) % PARK_MAX;
            slots[self.head] = Some(p);
            self.len += 1;
        }
    }

    fn pop_front(&mut self) -> Option<Parked> {
        if self.len == 0 {
            return None;
        }
        let p = self.slots.as_mut()?[self.head].take();
        self.head = (self.head + 1) % PARK_MAX;
        self.len -= 1;
        p
    }
}

pub(crate) fn recv_ud(
    qp: &Qp<Roxe>,
    st: &mut QpState,
    pkt: &Packet<'_>,
    ip: &[u8],
) -> core::result::Result<(), Drop> {
    let deth = pkt.ext.deth.ok_or(Drop::Transport)?;
    // QP1 takes any Q_Key's datagrams only with the GSI Q_Key.
    if deth.qkey != st.attr.qkey {
        return Err(Drop::Qkey);
    }
    let ipv6 = ip.first().map(|b| b >> 4) == Some(6);
    let grh = match ip.first().map(|b| b >> 4) {
        Some(4) => ip::grh_from_ipv4(ip),
        Some(6) => ip::grh_from_ipv6(ip),
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
    let meta = DgMeta {
        src_qpn: deth.src_qpn,
        imm: pkt.ext.immdt.map(|i| i.0),
        solicited: pkt.bth.se,
        ipv6,
    };
    // Datagrams kept for ODP memory land first, in order.
    land_parked(qp, st);
    if st.park.is_empty() {
        match land(qp, st, &grh, pkt.payload, meta) {
            Err(Drop::NotPresent) => {}
            r => return r,
        }
    }
    park(qp, st, &grh, pkt.payload, meta)
}

/// Keeps a datagram whose receive buffer is not mapped yet (or that came
/// after one that is kept), and has the QP's timer look again in 1 ms.
fn park(
    qp: &Qp<Roxe>,
    st: &mut QpState,
    grh: &[u8],
    payload: &[u8],
    meta: DgMeta,
) -> core::result::Result<(), Drop> {
    let mut bytes =
        KVec::with_capacity(grh.len() + payload.len(), GFP_ATOMIC).map_err(|_| Drop::NotPresent)?;
    // Within the capacity just reserved: these cannot fail.
    bytes
        .extend_from_slice(grh, GFP_ATOMIC)
        .map_err(|_| Drop::NotPresent)?;
    bytes
        .extend_from_slice(payload, GFP_ATOMIC)
        .map_err(|_| Drop::NotPresent)?;
    st.park
        .push_back(
            Parked {
                bytes,
                meta: Some(meta),
            },
            PARK_UD,
        )
        .map_err(|_| Drop::NotPresent)?;
    qp.device().data().counters.event(Event::RespUdParked);
    qp.arm_timer(1);
    Ok(())
}

/// Keeps request `roce` (BTH to ICRC) of an RC QP for later: it is a read
/// request the QP's rate holds back for `wait_us` (the QP's timer takes it
/// then), or it came behind one (`wait_us` 0).
pub(super) fn park_request(
    qp: &Qp<Roxe>,
    st: &mut QpState,
    roce: &[u8],
    wait_us: u32,
) -> core::result::Result<(), Drop> {
    let mut bytes = KVec::with_capacity(roce.len(), GFP_ATOMIC).map_err(|_| Drop::Paced)?;
    // Within the capacity just reserved: this cannot fail.
    bytes
        .extend_from_slice(roce, GFP_ATOMIC)
        .map_err(|_| Drop::Paced)?;
    st.park
        .push_back(Parked { bytes, meta: None }, PARK_MAX)
        .map_err(|_| Drop::Paced)?;
    qp.device().data().counters.event(Event::RespPaced);
    if wait_us != 0 {
        arm_for_rate(qp, st, wait_us);
    }
    Ok(())
}

/// Has the QP's timer take the kept requests within `wait_us`, unless an
/// RNR wait holds the timer (it takes them when that ends: an earlier
/// expiry would cut the RNR wait short).
fn arm_for_rate(qp: &Qp<Roxe>, st: &QpState, wait_us: u32) {
    if !st.req.rnr_waiting() {
        qp.arm_timer_by(wait_us.div_ceil(1000));
    }
}

/// Takes the kept packets, oldest first: lands datagrams up to one whose
/// buffer is still not mapped (the QP's timer looks again in 1 ms), and
/// hands requests to the responder up to a read request the QP's rate
/// still holds back (the timer looks again when the rate allows). Called
/// under the state lock, from the receive path and the QP's timer.
pub(crate) fn land_parked(qp: &Qp<Roxe>, st: &mut QpState) {
    let counters = &qp.device().data().counters;
    while !st.park.is_empty() {
        // A request may have moved the QP to ERR: what is left goes.
        if !matches!(
            st.attr.state,
            State::Rtr | State::Rts | State::Sqd | State::Sqe
        ) {
            st.park.clear();
            return;
        }
        let Some(p) = st.park.pop_front() else {
            return;
        };
        let Some(meta) = p.meta else {
            // Checked when it arrived; it parses as it did then.
            let Ok(pkt) = crate::proto::headers::parse(&p.bytes) else {
                continue;
            };
            if super::reads_paced(qp, &pkt) {
                let wait = st.cc.pace();
                if wait != 0 {
                    st.park.push_front(p);
                    arm_for_rate(qp, st, wait);
                    return;
                }
            }
            if let Err(d) = super::respond_now(qp, st, &pkt) {
                counters.drop(d);
            }
            continue;
        };
        let grh_len = GRH_LEN.min(p.bytes.len());
        let (grh, payload) = p.bytes.split_at(grh_len);
        match land(qp, st, grh, payload, meta) {
            Ok(()) => {}
            Err(Drop::NotPresent) => {
                st.park.push_front(p);
                qp.arm_timer(1);
                return;
            }
            Err(d) => counters.drop(d),
        }
    }
}

/// Scatters one datagram (its GRH, then its payload) into the next receive
/// WQE and completes it. `Err(NotPresent)`: the buffer is paged on demand
/// and not mapped yet; the responder holds the WQE for the next try and the
/// fault is under way.
fn land(
    qp: &Qp<Roxe>,
    st: &mut QpState,
    grh: &[u8],
    payload: &[u8],
    meta: DgMeta,
) -> core::result::Result<(), Drop> {
    // The WQE a datagram that missed ODP memory left comes first.
    let r = match st.resp.take_held() {
        Some(r) => r,
        None => pop_queue(qp, &mut st.rq_consumer).ok_or(Drop::NoRecv)?,
    };
    let pd = qp.pd_id();
    let dev = qp.device();
    // CAST: a UD payload is at most one MTU.
    let byte_len = (grh.len() + payload.len()) as u32;
    let res = if u64::from(byte_len) > r.total() {
        Err(WcStatus::LocLenErr)
    } else {
        match r
            .scatter(dev, pd, 0, grh)
            .and_then(|()| r.scatter(dev, pd, grh.len() as u64, payload))
        {
            Ok(()) => Ok(()),
            Err(ScatterError::Failed(s)) => Err(s),
            Err(ScatterError::NotPresent) => {
                st.resp.hold(r);
                return Err(Drop::NotPresent);
            }
        }
    };
    let mut cqe = recv_cqe(
        qp,
        r.wr_id(),
        WcOp::Recv,
        res.err().unwrap_or(WcStatus::Success),
        byte_len,
    );
    cqe.src_qp = meta.src_qpn;
    cqe.wc_flags = wc_flags::GRH;
    // `enum rdma_network_type`: kernel consumers parse the GRH by it.
    cqe.network_hdr_type = if meta.ipv6 { 3 } else { 2 };
    // User space has no such field in `ibv_wc`. RoCE carries no service
    // level, and RNICs of the mlx5 family report the packet's L3 type in
    // `sl` instead (2: RoCE v2 over IPv4), which UCX up to 1.18 reads to
    // find the destination address in the GRH area; with 0 it takes an
    // IPv4 datagram for IPv6 and drops every one (Documentation/verbs.md,
    // "UCX").
    if qp.is_user() && !meta.ipv6 {
        cqe.sl = SL_ROCE_V2_IPV4;
    }
    if let Some(imm) = meta.imm {
        cqe.wc_flags |= wc_flags::WITH_IMM;
        cqe.imm_data = imm.to_be();
    }
    push_recv(qp, cqe, meta.solicited);
    Ok(())
}

/// A raw packet QP's receive: `frame`, a whole Ethernet frame a flow
/// steered here, into the next receive WQE of the QP's RQ. `false` if it
/// was lost: the QP does not receive, no receive is posted, or its buffer
/// cannot take the frame (too small: the receive completes with
/// `LOC_LEN_ERR`; memory paged on demand and not mapped: the receive is
/// kept for the next frame, as a UD QP keeps it).
pub(crate) fn recv_raw(qp: &Qp<Roxe>, st: &mut QpState, frame: &[u8]) -> bool {
    if !matches!(st.attr.state, State::Rtr | State::Rts | State::Sqd) {
        return false;
    }
    let this = qp.data();
    let r = match st.resp.take_held() {
        Some(r) => r,
        None => match &this.rq {
            Some(rq) => match take_recv(rq, &mut st.rq_consumer) {
                Some(r) => r,
                None => return false,
            },
            None => return false,
        },
    };
    // CAST: a frame is at most the netdev's MTU and header.
    let len = frame.len() as u32;
    let status = if r.total() < u64::from(len) {
        WcStatus::LocLenErr
    } else {
        match r.scatter(qp.device(), qp.pd_id(), 0, frame) {
            Ok(()) => WcStatus::Success,
            Err(ScatterError::NotPresent) => {
                st.resp.hold(r);
                return false;
            }
            Err(ScatterError::Failed(s)) => s,
        }
    };
    let cqe = recv_cqe(qp, r.wr_id(), WcOp::Recv, status, len);
    push_recv(qp, cqe, false);
    status == WcStatus::Success
}
