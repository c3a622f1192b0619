// SPDX-License-Identifier: GPL-2.0

//! Shared receive queues: a ring of receive WQEs that several QPs draw
//! from, with the limit event armed through `ibv_modify_srq`.

use crate::device::Roxe;
use crate::limits::{MAX_SRQ_SGE, MAX_SRQ_WR};
use crate::proto::qp as qpx;
use crate::proto::ring::Geometry;
use crate::rdma::device::Device;
use crate::rdma::errno::eopnotsupp;
use crate::rdma::ring::Ring;
use crate::rdma::srq::{Srq, SrqAttr, SrqModify};
use crate::rdma::udata::UData;
use crate::uapi::{CreateSrqResp, RecvWqe, RingInfo};
use kernel::error::code::EINVAL;
use crate::sync::{new_spinlock_bh, new_spinlock_irq, SpinLockBh, SpinLockIrq};
use kernel::error::code::ENOMEM;
use kernel::prelude::*;

/// Per-SRQ state.
#[pin_data]
pub(crate) struct RoxeSrq {
    /// Number in the device's SRQ table.
    num: u32,
    ring: Ring<RecvWqe>,
    granted: SrqAttr,
    #[pin]
    state: SpinLockBh<SrqState>,
    /// Serialises kernel consumers' posts, which may come with interrupts
    /// off. (User SRQs are posted to from user space.)
    #[pin]
    post_lock: SpinLockIrq<()>,
}

struct SrqState {
    /// The kernel's own consumer index.
    consumer: u32,
    /// The armed limit; 0 when disarmed.
    limit: u32,
}

pub(crate) fn create(
    dev: &Device<Roxe>,
    attr: &SrqAttr,
    udata: Option<&UData<'_>>,
) -> Result<(impl PinInit<RoxeSrq, Error>, SrqAttr)> {
    if attr.max_wr == 0 || attr.max_wr > MAX_SRQ_WR || attr.max_sge > MAX_SRQ_SGE || attr.srq_limit > attr.max_wr {
        return Err(EINVAL);
    }
    if let Some(u) = udata {
        u.expect_no_input()?;
    }
    let slot = qpx::recv_slot_size(attr.max_sge.max(1)).ok_or(EINVAL)?;
    let g = Geometry::for_entries(attr.max_wr, MAX_SRQ_WR).ok_or(EINVAL)?;
    let ring: Ring<RecvWqe> = match udata {
        Some(u) => Ring::new_user(u, g, slot as usize)?,
        None => Ring::new_kernel(g, slot as usize)?,
    };
    let granted = SrqAttr {
        max_wr: g.num_slots(),
        max_sge: qpx::recv_sge_capacity(slot).min(MAX_SRQ_SGE),
        srq_limit: attr.srq_limit,
    };
    let d = dev.data();
    d.srqs.take()?;
    let num = match d.srq_table.insert(()) {
        Ok(n) => n,
        Err(e) => {
            d.srqs.give_back();
            return Err(e);
        }
    };
    if let Some(u) = udata {
        let info = ring.mmap_info().ok_or(EINVAL).and_then(|(mmap_offset, mmap_size)| {
            u.respond(&CreateSrqResp {
                rq: RingInfo {
                    mmap_offset,
                    mmap_size,
                    num_slots: g.num_slots(),
                    slot_size: slot,
                },
                srq_num: num,
                _reserved: 0,
            })
        });
        if let Err(e) = info {
            d.srq_table.remove(num);
            d.srqs.give_back();
            return Err(e);
        }
    }
    let state = SrqState { consumer: 0, limit: attr.srq_limit };
    Ok((
        try_pin_init!(RoxeSrq {
            num,
            ring,
            granted,
            state <- new_spinlock_bh!(state, "roxe_srq"),
            post_lock <- new_spinlock_irq!((), "roxe_srq_post"),
        }),
        granted,
    ))
}

pub(crate) fn modify(srq: &Srq<Roxe>, attr: &SrqAttr, what: SrqModify, udata: Option<&UData<'_>>) -> Result {
    if let Some(u) = udata {
        u.expect_no_input()?;
    }
    if what.resize {
        // Growing the ring would need a new mapping; not offered yet.
        return Err(eopnotsupp());
    }
    let this = srq.data();
    if what.limit {
        if attr.srq_limit > this.granted.max_wr {
            return Err(EINVAL);
        }
        this.state.lock().limit = attr.srq_limit;
    }
    Ok(())
}

pub(crate) fn query(srq: &Srq<Roxe>) -> Result<SrqAttr> {
    let this = srq.data();
    let limit = this.state.lock().limit;
    Ok(SrqAttr { srq_limit: limit, ..this.granted })
}

pub(crate) fn destroy(srq: &Srq<Roxe>) {
    let d = srq.device().data();
    d.srq_table.remove(srq.data().num);
    d.srqs.give_back();
}

/// A kernel consumer's receive, written to the SRQ's kernel ring. QPs on
/// the SRQ take it when a message arrives.
pub(crate) fn post_kernel_recv(srq: &Srq<Roxe>, wr_id: u64, sges: &[crate::uapi::Sge]) -> Result {
    let this = srq.data();
    if sges.len() > this.granted.max_sge as usize {
        return Err(EINVAL);
    }
    let _post = this.post_lock.lock();
    let ring = &this.ring;
    let prod = ring.producer();
    if ring.geometry().free(prod, ring.consumer()).map_err(|_| EINVAL)? == 0 {
        return Err(ENOMEM);
    }
    // CAST: at most MAX_SRQ_SGE.
    ring.write(prod, RecvWqe { wr_id, num_sge: sges.len() as u32, _reserved: 0 });
    for (i, s) in sges.iter().enumerate() {
        let off = (qpx::RECV_WQE_HEADER + qpx::SGE_SIZE * i as u32) as usize;
        ring.write_at(prod, off, *s).ok_or(EINVAL)?;
    }
    ring.set_producer(prod.wrapping_add(1));
    Ok(())
}

/// Takes the next receive WQE for a QP on this SRQ, and raises the limit
/// event when that leaves fewer WQEs than the armed limit.
pub(crate) fn pop(srq: &Srq<Roxe>) -> Option<crate::datapath::RecvCopy> {
    let this = srq.data();
    let mut st = this.state.lock();
    let r = crate::datapath::take_recv(&this.ring, &mut st.consumer).ok().flatten()?;
    let left = this.ring.geometry().used(this.ring.producer(), st.consumer).unwrap_or(0);
    let fire = st.limit != 0 && left < st.limit;
    if fire {
        // The limit disarms once it fires.
        st.limit = 0;
    }
    drop(st);
    if fire {
        srq.report_limit_reached();
    }
    Some(r)
}
