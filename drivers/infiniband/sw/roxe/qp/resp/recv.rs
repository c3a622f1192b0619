// SPDX-License-Identifier: GPL-2.0

//! The responder's receive queues: receive WQEs taken from the RQ or SRQ,
//! receive completions, and UD datagrams.

use crate::counters::Drop;
use crate::cq;
use crate::device::Roxe;
use crate::limits::PORT;
use crate::proto::headers::Packet;
use crate::proto::ip;
use crate::proto::mtu::IbMtu;
use crate::proto::responder::ScatterError;
use crate::proto::wr::{WcOp, WcStatus};
use crate::qp::QpState;
use crate::rdma::qp::Qp;
use crate::uapi::{wc_flags, Cqe};
use crate::wqe::{take_recv, RecvCopy};

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
    // The WQE a datagram that missed ODP memory left comes first.
    let r = match st.resp.take_held() {
        Some(r) => r,
        None => pop_queue(qp, &mut st.rq_consumer).ok_or(Drop::NoRecv)?,
    };
    let pd = qp.pd_id();
    let dev = qp.device();
    // CAST: a UD payload is at most one MTU.
    let byte_len = (grh.len() + pkt.payload.len()) as u32;
    let res = if u64::from(byte_len) > r.total() {
        Err(WcStatus::LocLenErr)
    } else {
        match r
            .scatter(dev, pd, 0, &grh)
            .and_then(|()| r.scatter(dev, pd, grh.len() as u64, pkt.payload))
        {
            Ok(()) => Ok(()),
            Err(ScatterError::Failed(s)) => Err(s),
            Err(ScatterError::NotPresent) => {
                // Its buffer is paged on demand and not mapped yet: the
                // datagram is lost (as UD may lose any), the WQE waits for
                // the next one, and the fault is under way.
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
    cqe.src_qp = deth.src_qpn;
    cqe.wc_flags = wc_flags::GRH;
    // `enum rdma_network_type`: kernel consumers parse the GRH by it.
    cqe.network_hdr_type = if ip.first().map(|b| b >> 4) == Some(6) {
        3
    } else {
        2
    };
    if let Some(imm) = pkt.ext.immdt {
        cqe.wc_flags |= wc_flags::WITH_IMM;
        cqe.imm_data = imm.0.to_be();
    }
    push_recv(qp, cqe, pkt.bth.se);
    Ok(())
}
