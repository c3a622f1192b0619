// SPDX-License-Identifier: GPL-2.0

//! The responder's RDMA READs: response packets, and the duplicate
//! requests answered again.

use super::{check_remote, with_remote, Nak};
use crate::counters::Drop;
use crate::device::Roxe;
use crate::proto::access::REMOTE_READ;
use crate::proto::aeth::Syndrome;
use crate::proto::headers::{self, Aeth, Bth, Ext, Packet, DEFAULT_PKEY};
use crate::proto::opcode::Position;
use crate::proto::resp::{self, ReadRequest};
use crate::proto::seg;
use crate::proto::udp;
use crate::qp::req::RESPONSE_BURST;
use crate::qp::QpState;
use crate::rdma::qp::Qp;

/// Answers an RDMA READ request with response packets.
///
/// A request at the expected PSN is remembered, so that a duplicate of it
/// can be answered again ([`replay_read`]).
pub(super) fn read_response(
    qp: &Qp<Roxe>,
    st: &mut QpState,
    pkt: &Packet<'_>,
) -> core::result::Result<(), Nak> {
    let reth = pkt.ext.reth.ok_or(Nak::Invalid)?;
    if reth.dma_len > resp::MAX_DMA_LEN {
        return Err(Nak::Length);
    }
    let mtu = st.path_mtu();
    let Some(path) = st.path.as_ref() else {
        return Err(Nak::Invalid);
    };
    let n = seg::packet_count(reth.dma_len, mtu).ok_or(Nak::Invalid)?;
    if reth.dma_len != 0 {
        check_remote(qp, reth.rkey, reth.va, reth.dma_len, REMOTE_READ).map_err(|_| Nak::Access)?;
    }
    let msn = if pkt.bth.psn == st.resp.epsn {
        (st.resp.msn + 1) & 0x00ff_ffff
    } else {
        st.resp.msn
    };
    let sport = udp::source_port(qp.qp_num(), st.attr.dest_qp_num);
    // At most a burst of responses goes out per request: a requester
    // that asks for megabytes at once would otherwise get thousands of
    // packets in one burst, more than the queues on the way hold. What is
    // held back looks like loss to the requester, which asks again from
    // the first missing PSN (a duplicate, answered the same way).
    for i in 0..n.min(RESPONSE_BURST) {
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
        let _ = path.send(
            &qp.device().data().counters,
            sport,
            &bth,
            &ext,
            plen as usize,
            |buf| {
                buf.is_empty()
                    || with_remote(qp, reth.rkey, va, plen, REMOTE_READ, |m, o| m.read(o, buf))
                        .is_ok()
            },
        );
    }
    if pkt.bth.psn == st.resp.epsn {
        st.resp.epsn = pkt.bth.psn.wrapping_add(n);
        st.resp.msn = msn;
        let req = ReadRequest {
            va: reth.va,
            psn: pkt.bth.psn,
            rkey: reth.rkey,
            len: reth.dma_len,
        };
        st.resp
            .reads
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
pub(super) fn replay_read(
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
    if st.attr.access_flags & REMOTE_READ == 0 || st.resp.reads.find(&dup, st.path_mtu()).is_none()
    {
        return Err(Drop::Duplicate);
    }
    match read_response(qp, st, pkt) {
        Ok(()) => Err(Drop::Psn),
        Err(_) => Err(Drop::Duplicate),
    }
}
