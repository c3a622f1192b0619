// SPDX-License-Identifier: GPL-2.0

//! Work requests as the data path sees them: receive WQEs copied out of
//! their ring ([`RecvCopy`]), a send WQE's SGEs and length, and gathering
//! and scattering message bytes through lkeys. User space may rewrite a
//! slot at any time, so everything here reads a slot once and checks it.

use crate::device::Roxe;
use crate::mr::{self, KeyError};
use crate::proto::access::LOCAL_WRITE;
use crate::proto::qp::{RECV_WQE_HEADER, SEND_WQE_HEADER, SGE_SIZE};
use crate::proto::wr::{WcStatus, MAX_SGE};
use crate::qp::RoxeQp;
use crate::rdma::device::Device;
use crate::rdma::qp::Qp;
use crate::rdma::ring::Ring;
use crate::uapi::{send_flags, RecvWqe, SendWqe, Sge};

/// Longest message (2 GiB, as IBTA's 31-bit DMA length allows).
pub(crate) const MAX_MSG: u64 = 1 << 31;

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

    pub(crate) fn total(&self) -> u64 {
        self.sges[..self.num_sge]
            .iter()
            .map(|s| u64::from(s.length))
            .sum()
    }

    /// Scatters `data` at message offset `off` into the SGEs.
    pub(crate) fn scatter(
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
pub(crate) fn for_pieces(
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
pub(crate) fn send_sges<'a>(
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

/// The length of a send WQE's message, checked.
pub(crate) fn msg_len(this: &RoxeQp, idx: u32, w: &SendWqe) -> core::result::Result<u32, WcStatus> {
    let total = if w.send_flags & send_flags::INLINE != 0 {
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
pub(crate) fn gather(
    qp: &Qp<Roxe>,
    idx: u32,
    w: &SendWqe,
    off: u32,
    dst: &mut [u8],
) -> core::result::Result<(), WcStatus> {
    let this = qp.data();
    if w.send_flags & send_flags::INLINE != 0 {
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
