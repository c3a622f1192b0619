// SPDX-License-Identifier: GPL-2.0

//! The responder's atomics: CmpSwap and FetchAdd (executed once, their
//! results kept to answer duplicates), Atomic Write and FLUSH.

use super::{check_remote, send_bare, with_remote, AtomicDone, Nak, ATOMIC_REPLAY};
use crate::counters::Drop;
use crate::device::Roxe;
use crate::keys;
use crate::proto::access::{FLUSH_GLOBAL, FLUSH_PERSISTENT, REMOTE_ATOMIC, REMOTE_WRITE};
use crate::proto::aeth::Syndrome;
use crate::proto::headers::Packet;
use crate::proto::opcode::{Opcode, Operation};
use crate::proto::psn::Psn;
use crate::proto::resp::ReadRequest;
use crate::qp::QpState;
use crate::rdma::qp::Qp;
use crate::uapi::flush as flush_wqe;

/// Sends the ATOMIC ACKNOWLEDGE for `psn` with the original value.
fn send_atomic_ack(qp: &Qp<Roxe>, st: &QpState, psn: Psn, orig: u64) {
    let (op, msn) = (Opcode::RcAtomicAcknowledge, st.resp.msn);
    send_bare(qp, st, op, psn, Syndrome::ACK, msn, Some(orig));
}

/// Executes a CmpSwap or FetchAdd on 8 aligned bytes of an MR, answers it,
/// and keeps the result to replay for a duplicate.
pub(super) fn atomic(
    qp: &Qp<Roxe>,
    st: &mut QpState,
    pkt: &Packet<'_>,
) -> core::result::Result<(), Nak> {
    let a = pkt.ext.atomic_eth.ok_or(Nak::Invalid)?;
    if a.va % 8 != 0 {
        return Err(Nak::Invalid);
    }
    let swap = pkt.opcode.operation() == Operation::CompareSwap;
    let orig = with_remote(qp, a.rkey, a.va, 8, REMOTE_ATOMIC, |m, off| {
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
    })
    .map_err(|_| Nak::Access)?;
    let psn = pkt.bth.psn;
    st.resp.atomic_replay.remember(
        AtomicDone {
            psn,
            rkey: a.rkey,
            va: a.va,
            orig,
        },
        ATOMIC_REPLAY,
    );
    // The ACK carries the MSN of this message.
    st.resp.msn = (st.resp.msn + 1) & 0x00ff_ffff;
    send_atomic_ack(qp, st, psn, orig);
    st.resp.msn = (st.resp.msn + 0x00ff_ffff) & 0x00ff_ffff;
    Ok(())
}

/// Answers a duplicate CmpSwap or FetchAdd with the value its original
/// found, without executing it again: only if an atomic was executed at
/// its PSN with the same rkey and address, and the QP and the key still
/// grant remote atomics there, as they did for the original.
pub(super) fn replay_atomic(
    qp: &Qp<Roxe>,
    st: &mut QpState,
    pkt: &Packet<'_>,
) -> core::result::Result<(), Drop> {
    let a = pkt.ext.atomic_eth.ok_or(Drop::Duplicate)?;
    let psn = pkt.bth.psn;
    let done = st
        .resp
        .atomic_replay
        .find(|d| d.psn == psn && d.rkey == a.rkey && d.va == a.va);
    let Some(AtomicDone { orig, .. }) = done else {
        return Err(Drop::Duplicate);
    };
    if st.attr.access_flags & REMOTE_ATOMIC == 0 {
        return Err(Drop::Duplicate);
    }
    if check_remote(qp, a.rkey, a.va, 8, REMOTE_ATOMIC).is_err() {
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
    let op = Opcode::RcRdmaReadResponseOnly;
    send_bare(qp, st, op, psn, Syndrome::ACK, msn, None);
}

/// Executes an Atomic Write: 8 bytes to an aligned address, in one store
/// under the key-table lock, so no reader or remote atomic sees half of it.
pub(super) fn atomic_write(
    qp: &Qp<Roxe>,
    st: &mut QpState,
    pkt: &Packet<'_>,
) -> core::result::Result<(), Nak> {
    let reth = pkt.ext.reth.ok_or(Nak::Invalid)?;
    if reth.dma_len != 8 || pkt.payload.len() != 8 || reth.va % 8 != 0 {
        return Err(Nak::Invalid);
    }
    with_remote(qp, reth.rkey, reth.va, 8, REMOTE_WRITE, |m, o| {
        m.write(o, pkt.payload)
    })
    .map_err(|_| Nak::Access)?;
    // The response carries the MSN of this message.
    send_read_ack(qp, st, pkt.bth.psn, (st.resp.msn + 1) & 0x00ff_ffff);
    st.resp.reads.remember(
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
pub(super) fn flush(
    qp: &Qp<Roxe>,
    st: &mut QpState,
    pkt: &Packet<'_>,
    qp_access: u32,
) -> core::result::Result<(), Nak> {
    let feth = pkt.ext.feth.ok_or(Nak::Invalid)?;
    let reth = pkt.ext.reth.ok_or(Nak::Invalid)?;
    let need = match feth.placement_type {
        flush_wqe::GLOBAL => FLUSH_GLOBAL,
        flush_wqe::PERSISTENT => FLUSH_PERSISTENT,
        _ => return Err(Nak::Invalid),
    };
    if qp_access & need == 0 {
        return Err(Nak::Invalid);
    }
    let (dev, pd) = (qp.device().data(), qp.pd_id());
    if feth.selectivity > flush_wqe::MR {
        return Err(Nak::Invalid);
    }
    let checked = if feth.selectivity == flush_wqe::MR {
        keys::check_whole(&dev.mr_table, reth.rkey, pd, need)
    } else {
        check_remote(qp, reth.rkey, reth.va, reth.dma_len, need)
    };
    checked.map_err(|_| Nak::Access)?;
    core::sync::atomic::fence(core::sync::atomic::Ordering::SeqCst);
    send_read_ack(qp, st, pkt.bth.psn, (st.resp.msn + 1) & 0x00ff_ffff);
    st.resp.reads.remember(
        answered_empty(pkt.bth.psn),
        usize::from(st.attr.max_dest_rd_atomic),
    );
    Ok(())
}

/// Answers a duplicate Atomic Write or FLUSH again (it is not executed
/// again: a flush again would change nothing), and only if one was
/// executed at `psn`: its answer would otherwise stand in for any read
/// response the requester still waits for there.
pub(super) fn replay_empty(
    qp: &Qp<Roxe>,
    st: &mut QpState,
    psn: Psn,
) -> core::result::Result<(), Drop> {
    let served = st.resp.reads.find(&answered_empty(psn), st.path_mtu());
    if served.is_none() {
        return Err(Drop::Duplicate);
    }
    send_read_ack(qp, st, psn, st.resp.msn);
    Err(Drop::Psn)
}
