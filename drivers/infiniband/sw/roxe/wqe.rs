// SPDX-License-Identifier: GPL-2.0

//! Work requests as the data path sees them: receive WQEs copied out of
//! their ring ([`RecvCopy`]), scattering message bytes into their SGEs
//! through lkeys, and splitting a message over SGEs ([`for_pieces`]; the
//! send side's gather is in the requester). User space may rewrite a slot
//! at any time, so everything here reads a slot once and checks it.

use crate::device::Roxe;
use crate::keys::{self, KeyError};
use crate::proto::access::LOCAL_WRITE;
use crate::proto::qp::{RECV_WQE_HEADER, SGE_SIZE};
use crate::proto::responder::ScatterError;
use crate::proto::wr::{WcStatus, MAX_SGE};
use crate::rdma::device::Device;
use crate::rdma::qp::Sge as KSge;
use crate::ring::Ring;
use crate::uapi::{RecvWqe, Sge};
use kernel::error::code::{EINVAL, ENOMEM};
use kernel::prelude::*;

/// Longest message (2 GiB, as IBTA's 31-bit DMA length allows).
pub(crate) const MAX_MSG: u64 = 1 << 31;

/// A receive WQE copied out of its ring, with its SGEs.
pub(crate) struct RecvCopy {
    wr_id: u64,
    /// Taken from an SRQ: its number and its id (`srq.rs` `pop`).
    origin: Option<(u32, u64)>,
    num_sge: usize,
    sges: [Sge; MAX_SGE as usize],
}

/// A kernel work request's SGE as a ring slot holds it.
impl From<KSge> for Sge {
    fn from(s: KSge) -> Self {
        Sge {
            addr: s.addr,
            length: s.length,
            lkey: s.lkey,
        }
    }
}

/// Writes a kernel consumer's receive (`wr_id` and `sges`) into the kernel
/// ring `ring` at its producer index and publishes it. The caller holds
/// the lock that serialises posts to the ring and has checked the SGE
/// count against what the queue was created with. `ENOMEM` if the ring is
/// full.
pub(crate) fn post_kernel_recv(ring: &Ring<RecvWqe>, wr_id: u64, sges: &[KSge]) -> Result {
    let prod = ring.producer();
    if ring
        .geometry()
        .free(prod, ring.consumer())
        .map_err(|_| EINVAL)?
        == 0
    {
        return Err(ENOMEM);
    }
    ring.write(
        prod,
        RecvWqe {
            wr_id,
            // CAST: the caller checked the count, at most MAX_SGE.
            num_sge: sges.len() as u32,
            _reserved: 0,
        },
    );
    for (i, s) in sges.iter().enumerate() {
        let off = RECV_WQE_HEADER as usize + SGE_SIZE as usize * i;
        ring.write_at(prod, off, Sge::from(*s)).ok_or(EINVAL)?;
    }
    ring.set_producer(prod.wrapping_add(1));
    Ok(())
}

/// Takes the next receive WQE from `ring` at `*consumer`, copying it out and
/// checking its SGE count against the slot. `None` if the ring is empty or
/// its indices are corrupt (user space sees its own garbage: nothing is
/// taken).
///
/// Built in place in the return slot, with no other copy on the stack: the
/// receive path, which runs in softirq, calls this through several layers.
pub(crate) fn take_recv(ring: &Ring<RecvWqe>, consumer: &mut u32) -> Option<RecvCopy> {
    match ring.geometry().used(ring.producer(), *consumer) {
        Ok(0) | Err(_) => return None,
        Ok(_) => {}
    }
    let w = ring.read(*consumer);
    let mut c = RecvCopy {
        wr_id: w.wr_id,
        origin: None,
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
    Some(c)
}

impl RecvCopy {
    /// Marks the WQE as taken from SRQ number `num` with id `uid`.
    pub(crate) fn taken_from_srq(mut self, num: u32, uid: u64) -> Self {
        self.origin = Some((num, uid));
        self
    }

    /// The number and id of the SRQ the WQE came from, if it came from one.
    pub(crate) fn origin(&self) -> Option<(u32, u64)> {
        self.origin
    }

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
    ) -> core::result::Result<(), ScatterError> {
        let sges = self.sges[..self.num_sge].iter().map(|s| Ok(*s));
        for_pieces(sges, off, data.len(), |va, lkey, r| {
            let src = &data[r];
            // CAST: a piece is at most an SGE length.
            keys::with_key(&dev.data().mr_table, lkey, pd, |m| {
                m.write(m.check(va, src.len() as u32, LOCAL_WRITE)?, src)
            })
        })
    }
}

/// Splits message bytes `off..off + len` over the SGEs `sges` and calls
/// `f(address, lkey, range in the message piece)` for each part, in order.
/// Fails with `LocLenErr` if the SGEs are too short and `LocProtErr` where
/// `f` reports a key error, and stops with `NotPresent` where it reports
/// memory paged on demand that is not mapped yet (a fault was asked for).
pub(crate) fn for_pieces(
    sges: impl Iterator<Item = core::result::Result<Sge, WcStatus>>,
    mut off: u64,
    len: usize,
    mut f: impl FnMut(u64, u32, core::ops::Range<usize>) -> core::result::Result<(), KeyError>,
) -> core::result::Result<(), ScatterError> {
    let mut done = 0usize;
    for s in sges {
        if done == len {
            break;
        }
        let s = s.map_err(ScatterError::Failed)?;
        let sl = u64::from(s.length);
        if off >= sl {
            off -= sl;
            continue;
        }
        // CAST: below the SGE length, a u32.
        let n = ((sl - off) as usize).min(len - done);
        let va = s
            .addr
            .checked_add(off)
            .ok_or(ScatterError::Failed(WcStatus::LocProtErr))?;
        f(va, s.lkey, done..done + n).map_err(|e| match e {
            KeyError::Absent { .. } => ScatterError::NotPresent,
            _ => ScatterError::Failed(WcStatus::LocProtErr),
        })?;
        done += n;
        off = 0;
    }
    if done == len {
        Ok(())
    } else {
        Err(ScatterError::Failed(WcStatus::LocLenErr))
    }
}
