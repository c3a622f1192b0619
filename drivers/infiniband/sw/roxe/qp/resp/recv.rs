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
const PARK_MAX: usize = 16;

/// What a datagram's receive completion says besides its bytes.
#[derive(Clone, Copy)]
struct DgMeta {
    src_qpn: u32,
    imm: Option<u32>,
    solicited: bool,
    ipv6: bool,
}

/// A datagram that met a receive buffer paged on demand before its pages
/// were mapped, kept until they are.
struct Parked {
    /// The GRH, then the payload.
    bytes: KVec<u8>,
    meta: DgMeta,
}

/// The datagrams a UD QP keeps for an ODP receive buffer, oldest first.
/// They land, in order, before any datagram that arrives after them: from
/// the QP's timer 1 ms after the miss (the fault queue is at work by
/// then), or when the next datagram comes. The receive WQE that missed
/// stays with the responder ([`Responder::hold`]). After three failed
/// faults a buffer's next miss is an access error, so a datagram whose
/// buffer cannot be mapped completes in error and does not wait forever.
///
/// [`Responder::hold`]: crate::proto::responder::Responder::hold
pub(crate) struct UdPark {
    /// Allocated with the first datagram kept, so a QP that never meets an
    /// unmapped buffer carries one pointer.
    slots: Option<KBox<[Option<Parked>; PARK_MAX]>>,
    head: usize,
    len: usize,
}

impl UdPark {
    pub(crate) const fn new() -> Self {
        UdPark {
            slots: None,
            head: 0,
            len: 0,
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Forgets every kept datagram (the QP left the receiving states).
    pub(crate) fn clear(&mut self) {
        *self = Self::new();
    }

    fn push_back(&mut self, p: Parked) -> core::result::Result<(), Parked> {
        if self.len == PARK_MAX {
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
    if st.ud_park.is_empty() {
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
    st.ud_park
        .push_back(Parked { bytes, meta })
        .map_err(|_| Drop::NotPresent)?;
    qp.device().data().counters.event(Event::RespUdParked);
    qp.arm_timer(1);
    Ok(())
}

/// Lands the kept datagrams, oldest first, up to one whose buffer is still
/// not mapped; if one is left, the QP's timer looks again in 1 ms. Called
/// under the state lock, from the receive path and the QP's timer.
pub(crate) fn land_parked(qp: &Qp<Roxe>, st: &mut QpState) {
    if st.ud_park.is_empty() {
        return;
    }
    if !matches!(
        st.attr.state,
        State::Rtr | State::Rts | State::Sqd | State::Sqe
    ) {
        st.ud_park.clear();
        return;
    }
    let counters = &qp.device().data().counters;
    while let Some(p) = st.ud_park.pop_front() {
        let grh_len = GRH_LEN.min(p.bytes.len());
        let (grh, payload) = p.bytes.split_at(grh_len);
        match land(qp, st, grh, payload, p.meta) {
            Ok(()) => {}
            Err(Drop::NotPresent) => {
                st.ud_park.push_front(p);
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
