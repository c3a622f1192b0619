// SPDX-License-Identifier: GPL-2.0

//! Shared receive queues: a ring of receive WQEs that several QPs draw
//! from, with the limit event armed through `ibv_modify_srq`.

use crate::device::Roxe;
use crate::limits::{MAX_SRQ_SGE, MAX_SRQ_WR};
use crate::proto::qp as qpx;
use crate::proto::ring::Geometry;
use crate::rdma::device::Device;
use crate::rdma::qp::Sge;
use crate::rdma::srq::{Srq, SrqAttr, SrqModify, SrqRef};
use crate::rdma::udata::UData;
use crate::rdma::xrcd::XrcdId;
use crate::ring::Ring;
use crate::sync::{new_spinlock_irq, SpinLockIrq};
use crate::uapi::{CreateSrqResp, ModifySrqCmd, RecvWqe, RingInfo};
use kernel::error::code::EINVAL;
use kernel::error::code::ENOMEM;
use kernel::prelude::*;

/// Per-SRQ state.
#[pin_data]
pub(crate) struct RoxeSrq {
    /// Number in the device's SRQ table.
    num: u32,
    /// Unique among the device's SRQs for its life (numbers are reused):
    /// names where a receive WQE came from ([`RecvCopy::origin`]).
    ///
    /// [`RecvCopy::origin`]: crate::wqe::RecvCopy::origin
    uid: u64,
    max_sge: u32,
    /// The ring and the kernel's view of it. Irq-safe: kernel consumers may
    /// post with interrupts off, and a resize swaps the ring under it.
    #[pin]
    state: SpinLockIrq<SrqState>,
}

struct SrqState {
    ring: Ring<RecvWqe>,
    /// The kernel's own consumer index.
    consumer: u32,
    /// The armed limit; 0 when disarmed.
    limit: u32,
}

/// An SRQ number and the budget unit taken with it, given back on drop
/// unless the SRQ keeps them ([`SrqNumber::keep`]): no error path of
/// creation can leak them.
struct SrqNumber<'a> {
    dev: &'a crate::device::RoxeDev,
    num: u32,
}

impl<'a> SrqNumber<'a> {
    fn take(dev: &'a crate::device::RoxeDev) -> Result<Self> {
        let unit = dev.srqs.take_unit()?;
        let num = dev.srq_table.insert(None)?;
        unit.keep();
        Ok(SrqNumber { dev, num })
    }

    /// The SRQ was made and owns the number; `destroy` gives it back.
    fn keep(self) {
        core::mem::forget(self);
    }
}

impl Drop for SrqNumber<'_> {
    fn drop(&mut self) {
        self.dev.srq_table.remove(self.num);
        self.dev.srqs.give_back();
    }
}

pub(crate) fn create<'a>(
    dev: &'a Device<Roxe>,
    attr: &SrqAttr,
    udata: Option<&UData<'_>>,
) -> Result<(impl PinInit<RoxeSrq, Error> + 'a, SrqAttr, u32)> {
    if attr.max_wr == 0
        || attr.max_wr > MAX_SRQ_WR
        || attr.max_sge > MAX_SRQ_SGE
        || attr.srq_limit > attr.max_wr
    {
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
    let max_sge = qpx::recv_sge_capacity(slot).min(MAX_SRQ_SGE);
    let granted = SrqAttr {
        max_wr: g.num_slots(),
        max_sge,
        srq_limit: attr.srq_limit,
    };
    let d = dev.data();
    let number = SrqNumber::take(d)?;
    let num = number.num;
    if let Some(u) = udata {
        let info = ring
            .mmap_info()
            .ok_or(EINVAL)
            .and_then(|(mmap_offset, mmap_size)| {
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
        info?;
    }
    let state = SrqState {
        ring,
        consumer: 0,
        limit: attr.srq_limit,
    };
    let uid = d
        .srq_uids
        .fetch_add(1, core::sync::atomic::Ordering::Relaxed);
    let init = try_pin_init!(RoxeSrq {
        num,
        uid,
        max_sge,
        state <- new_spinlock_irq!(state, "roxe_srq"),
    })
    .pin_chain(move |_| {
        if crate::rdma::fault::fail_srq_init() {
            return Err(ENOMEM);
        }
        number.keep();
        Ok(())
    });
    Ok((init, granted, num))
}

/// Enters an initialised SRQ in the device's index, where XRC packets find
/// it by number ([`find_xrc`]); `destroy` takes it out.
pub(crate) fn publish(srq: &Srq<Roxe>) {
    let d = srq.device().data();
    d.srq_table.replace(srq.data().num, Some(srq.new_ref()));
}

/// The XRC SRQ numbered `num` on `dev`, if it exists and belongs to XRC
/// domain `xrcd`: an XRC target QP takes only what is sent to an SRQ of its
/// own domain. Counted: the SRQ lives while the reference does.
pub(crate) fn find_xrc(dev: &Device<Roxe>, num: u32, xrcd: XrcdId) -> Option<SrqRef<Roxe>> {
    let srq = dev.data().srq_table.with(num, |e| e.clone()).flatten()?;
    (srq.xrcd() == Some(xrcd)).then_some(srq)
}

/// The SRQ a receive WQE came from ([`RecvCopy::origin`]), if it still
/// exists (the same SRQ, not a later one with its number) and belongs to
/// XRC domain `xrcd`.
///
/// [`RecvCopy::origin`]: crate::wqe::RecvCopy::origin
pub(crate) fn origin_of(
    dev: &Device<Roxe>,
    w: &crate::wqe::RecvCopy,
    xrcd: XrcdId,
) -> Option<SrqRef<Roxe>> {
    let (num, uid) = w.origin()?;
    find_xrc(dev, num, xrcd).filter(|s| s.data().uid == uid)
}

/// Whether receive WQE `w` came from `srq`.
pub(crate) fn came_from(w: &crate::wqe::RecvCopy, srq: &Srq<Roxe>) -> bool {
    w.origin().is_some_and(|(_, uid)| uid == srq.data().uid)
}

fn ring_for(udata: Option<&UData<'_>>, g: Geometry, slot: usize) -> Result<Ring<RecvWqe>> {
    match udata {
        Some(u) => Ring::new_user(u, g, slot),
        None => Ring::new_kernel(g, slot),
    }
}

/// Arms the limit and/or resizes. A resize moves the outstanding WQEs to
/// the front of a new ring (consumer 0, producer = their count) and, for a
/// user SRQ, writes the new ring's description where the caller asked
/// (`uapi::ModifySrqCmd`). It fails with `EINVAL`, leaving the SRQ as it
/// was, if more WQEs are outstanding than the new size holds.
pub(crate) fn modify(
    srq: &Srq<Roxe>,
    attr: &SrqAttr,
    what: SrqModify,
    udata: Option<&UData<'_>>,
) -> Result {
    let cmd: ModifySrqCmd = match udata {
        Some(u) => u.read_input()?,
        None => ModifySrqCmd::default(),
    };
    let this = srq.data();
    let new = if what.resize {
        if attr.max_wr == 0 || attr.max_wr > MAX_SRQ_WR {
            return Err(EINVAL);
        }
        if udata.is_some() && cmd.ring_info_addr == 0 {
            return Err(EINVAL);
        }
        let slot = this.state.lock().ring.slot_size();
        let g = Geometry::for_entries(attr.max_wr, MAX_SRQ_WR).ok_or(EINVAL)?;
        // Allocated and announced before taking the lock: both may sleep.
        // Nothing reads the new ring until it is swapped in.
        let ring = ring_for(udata, g, slot)?;
        if let (Some(u), Some((mmap_offset, mmap_size))) = (udata, ring.mmap_info()) {
            // CAST: slot sizes are small multiples of 64.
            let info = RingInfo {
                mmap_offset,
                mmap_size,
                num_slots: g.num_slots(),
                slot_size: slot as u32,
            };
            u.write_to_user(cmd.ring_info_addr, &info)?;
        }
        Some(ring)
    } else {
        None
    };
    // Whichever ring is left over (the old one, or the new one if the
    // resize is refused) is dropped after the lock: removing its mmap entry
    // takes a lock that is not softirq-safe, and freeing it may sleep.
    let (result, leftover) = {
        let mut st = this.state.lock();
        apply(&mut st, new, what.limit.then_some(attr.srq_limit))
    };
    drop(leftover);
    result
}

/// Swaps in `new` (if any) with the outstanding WQEs moved over, and sets
/// `limit` (if any). Changes nothing on error. Returns the ring that is no
/// longer used.
fn apply(
    st: &mut SrqState,
    new: Option<Ring<RecvWqe>>,
    limit: Option<u32>,
) -> (Result, Option<Ring<RecvWqe>>) {
    let max_wr = new.as_ref().unwrap_or(&st.ring).geometry().num_slots();
    let limit = limit.unwrap_or(st.limit);
    if limit > max_wr {
        return (Err(EINVAL), new);
    }
    let Some(new) = new else {
        st.limit = limit;
        return (Ok(()), None);
    };
    let consumer = st.consumer;
    // User space may have written any producer index.
    let used = match st.ring.geometry().used(st.ring.producer(), consumer) {
        Ok(n) if n <= max_wr => n,
        _ => return (Err(EINVAL), Some(new)),
    };
    for i in 0..used {
        if new
            .copy_slot_from(i, &st.ring, consumer.wrapping_add(i))
            .is_none()
        {
            return (Err(EINVAL), Some(new));
        }
    }
    new.set_consumer(0);
    new.set_producer(used);
    st.consumer = 0;
    st.limit = limit;
    (Ok(()), Some(core::mem::replace(&mut st.ring, new)))
}

pub(crate) fn query(srq: &Srq<Roxe>) -> Result<SrqAttr> {
    let this = srq.data();
    let st = this.state.lock();
    Ok(SrqAttr {
        max_wr: st.ring.geometry().num_slots(),
        max_sge: this.max_sge,
        srq_limit: st.limit,
    })
}

pub(crate) fn destroy(srq: &Srq<Roxe>) {
    let d = srq.device().data();
    d.srq_table.remove(srq.data().num);
    d.srqs.give_back();
}

/// A kernel consumer's receive, written to the SRQ's kernel ring. QPs on
/// the SRQ take it when a message arrives.
pub(crate) fn post_kernel_recv(srq: &Srq<Roxe>, wr_id: u64, sges: &[Sge]) -> Result {
    let this = srq.data();
    if sges.len() > this.max_sge as usize {
        return Err(EINVAL);
    }
    let st = this.state.lock();
    crate::wqe::post_kernel_recv(&st.ring, wr_id, sges)
}

/// Takes the next receive WQE for a QP on this SRQ, and raises the limit
/// event when that leaves fewer WQEs than the armed limit.
pub(crate) fn pop(srq: &Srq<Roxe>) -> Option<crate::wqe::RecvCopy> {
    let this = srq.data();
    let mut fire = false;
    let r = {
        let mut guard = this.state.lock();
        let st = &mut *guard;
        let r = crate::wqe::take_recv(&st.ring, &mut st.consumer)
            .map(|r| r.taken_from_srq(this.num, this.uid));
        if r.is_some() && st.limit != 0 {
            let left = st
                .ring
                .geometry()
                .used(st.ring.producer(), st.consumer)
                .unwrap_or(0);
            // The limit disarms once it fires.
            fire = left < st.limit;
            if fire {
                st.limit = 0;
            }
        }
        r
    };
    if fire {
        srq.report_limit_reached();
    }
    r
}
