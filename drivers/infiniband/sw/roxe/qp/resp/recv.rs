// SPDX-License-Identifier: GPL-2.0

//! The responder's receive side: SEND and RDMA WRITE packets placed in
//! memory, receive WQEs taken and completed, UD datagrams.

use super::{check_remote, with_remote, Nak, RecvProgress, WriteProgress};
use crate::counters::Drop;
use crate::cq;
use crate::device::Roxe;
use crate::keys::{self, KeyError};
use crate::limits::PORT;
use crate::proto::access::REMOTE_WRITE;
use crate::proto::headers::Packet;
use crate::proto::ip;
use crate::proto::mtu::IbMtu;
use crate::proto::resp;
use crate::proto::wr::{WcOp, WcStatus};
use crate::qp::QpState;
use crate::rdma::qp::Qp;
use crate::uapi::{wc_flags, Cqe};
use crate::wqe::{take_recv, RecvCopy, MAX_MSG};

/// Takes the next receive WQE: the one a lost UC message left
/// (`QpState::recv_spare`), or else the next from the QP's RQ or SRQ.
fn pop_recv(qp: &Qp<Roxe>, st: &mut QpState) -> Option<RecvCopy> {
    if let Some(r) = st.resp.recv_spare.take() {
        return Some(r);
    }
    let this = qp.data();
    match (&this.rq, qp.srq()) {
        (Some(rq), _) => take_recv(rq, &mut st.rq_consumer).ok().flatten(),
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

/// A SEND packet: the payload goes to the receive WQE the first packet took.
///
/// A receive buffer that cannot take the payload (too short, a bad lkey)
/// completes its WQE at once with the local error, and the request is
/// refused (a length error is an invalid request, as in rxe); so is a
/// message that would pass [`MAX_MSG`] bytes.
pub(super) fn recv_send(
    qp: &Qp<Roxe>,
    st: &mut QpState,
    pkt: &Packet<'_>,
) -> core::result::Result<(), Nak> {
    let pos = pkt.opcode.position();
    if pos.starts_message() {
        let r = pop_recv(qp, st).ok_or(Nak::Rnr)?;
        st.resp.recv = Some(RecvProgress { wqe: r, off: 0 });
    }
    let dev = qp.device();
    let pd = qp.pd_id();
    let Some(p) = st.resp.recv.as_mut() else {
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
        let Some(p) = st.resp.recv.take() else {
            return Err(Nak::Invalid);
        };
        // CAST: `off` is at most MAX_MSG (2^31).
        let mut cqe = recv_cqe(qp, p.wqe.wr_id(), WcOp::Recv, status, p.off as u32);
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
    let Some(p) = st.resp.recv.take() else {
        return Err(Nak::Invalid);
    };
    // CAST: at most MAX_MSG (2^31).
    let mut cqe = recv_cqe(
        qp,
        p.wqe.wr_id(),
        WcOp::Recv,
        WcStatus::Success,
        p.off as u32,
    );
    cqe.src_qp = st.attr.dest_qp_num;
    if let Some(imm) = pkt.ext.immdt {
        cqe.wc_flags |= wc_flags::WITH_IMM;
        cqe.imm_data = imm.0.to_be();
    }
    let mut status = WcStatus::Success;
    if let Some(ieth) = pkt.ext.ieth {
        // Send with Invalidate: the key goes once the data is in.
        if keys::invalidate(&dev.data().mr_table, pd, Some(qp.qp_num()), ieth.rkey).is_ok() {
            cqe.wc_flags |= wc_flags::WITH_INV;
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
pub(super) fn recv_write(
    qp: &Qp<Roxe>,
    st: &mut QpState,
    pkt: &Packet<'_>,
    access: u32,
) -> core::result::Result<(), Nak> {
    let pos = pkt.opcode.position();
    if pos.starts_message() {
        if st.resp.wctx.is_some() {
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
            check_remote(qp, reth.rkey, reth.va, reth.dma_len, REMOTE_WRITE)
                .map_err(|_| Nak::Access)?;
        }
        st.resp.wctx = Some(WriteProgress {
            rkey: reth.rkey,
            va: reth.va,
            len: reth.dma_len,
            off: 0,
        });
    }
    let Some(w) = st.resp.wctx.as_mut() else {
        return Err(Nak::Invalid);
    };
    // CAST: a payload is at most one MTU (`resp::payload_len_ok`).
    let n = pkt.payload.len() as u32;
    let Some((va, end)) = resp::write_place(w.va, w.off, n, w.len, pos) else {
        st.resp.wctx = None;
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
            check_remote(qp, rkey, va, n, REMOTE_WRITE).map_err(|_| Nak::Access)?;
        }
        let Some(r) = pop_recv(qp, st) else {
            // The requester sends this packet again after the RNR wait:
            // if it starts the message, it must find none in progress.
            if pos.starts_message() {
                st.resp.wctx = None;
            }
            return Err(Nak::Rnr);
        };
        st.resp.recv = Some(RecvProgress { wqe: r, off: 0 });
    }
    if n != 0 {
        with_remote(qp, rkey, va, n, REMOTE_WRITE, |m, o| {
            m.write(o, pkt.payload)
        })
        .map_err(|_: KeyError| Nak::Access)?;
    }
    let Some(w) = st.resp.wctx.as_mut() else {
        return Err(Nak::Invalid);
    };
    w.off = end;
    if !pos.ends_message() {
        return Ok(());
    }
    let Some(w) = st.resp.wctx.take() else {
        return Err(Nak::Invalid);
    };
    if let (Some(imm), Some(r)) = (imm, st.resp.recv.take()) {
        let mut cqe = recv_cqe(
            qp,
            r.wqe.wr_id(),
            WcOp::RecvRdmaImm,
            WcStatus::Success,
            w.len,
        );
        cqe.src_qp = st.attr.dest_qp_num;
        cqe.wc_flags = wc_flags::WITH_IMM;
        cqe.imm_data = imm.0.to_be();
        push_recv(qp, cqe, pkt.bth.se);
    }
    Ok(())
}
