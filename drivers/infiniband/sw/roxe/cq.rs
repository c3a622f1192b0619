// SPDX-License-Identifier: GPL-2.0

//! Completion queues: a ring of CQEs that the kernel produces into and
//! user space (or a kernel consumer) polls. See `Documentation/rings.md`.

use crate::device::Roxe;
use crate::limits::{MAX_CQE, MAX_CQ_SLOTS};
use crate::proto::ring::Geometry;
use crate::proto::wr::{WcOp, WcStatus};
use crate::rdma::cq::{Cq, CqInit, Notify, Wc, WcExtra};
use crate::rdma::device::Device;
use crate::rdma::errno::eopnotsupp;
use crate::rdma::udata::UData;
use crate::ring::Ring;
use crate::sync::new_spinlock_bh;
use crate::sync::SpinLockBh;
use crate::uapi::{wc_flags, Cqe, CreateCqResp};
use core::mem::size_of;
use kernel::error::code::{EINVAL, EIO, ENOMEM};
use kernel::prelude::*;

/// Per-CQ state.
#[pin_data]
pub(crate) struct RoxeCq {
    #[pin]
    state: SpinLockBh<CqState>,
}

struct CqState {
    ring: Ring<Cqe>,
    /// The kernel's own copy of the producer index; the copy in the ring is
    /// only ever written from this.
    producer: u32,
    /// The arm set by `ibv_req_notify_cq`, cleared when it fires.
    armed: Option<Notify>,
    /// Set after an overflow or a corrupted consumer index. No completions
    /// are written (or, for kernel CQs, read) afterwards.
    broken: bool,
}

/// Why a completion could not be queued.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum PushError {
    /// The CQ was full; the completion is lost and `IB_EVENT_CQ_ERR` raised.
    Overflow,
    /// The CQ is in the error state.
    Broken,
}

fn ring_for(udata: Option<&UData<'_>>, geometry: Geometry) -> Result<Ring<Cqe>> {
    match udata {
        Some(u) => Ring::new_user(u, geometry, size_of::<Cqe>()),
        None => Ring::new_kernel(geometry, size_of::<Cqe>()),
    }
}

fn respond(udata: Option<&UData<'_>>, ring: &Ring<Cqe>) -> Result {
    let Some(u) = udata else { return Ok(()) };
    let (mmap_offset, mmap_size) = ring.mmap_info().ok_or(EINVAL)?;
    u.respond(&CreateCqResp {
        mmap_offset,
        mmap_size,
        num_slots: ring.geometry().num_slots(),
        // CAST: a 64-byte struct.
        slot_size: size_of::<Cqe>() as u32,
    })
}

pub(crate) fn create<'a>(
    dev: &'a Device<Roxe>,
    init: &CqInit,
    udata: Option<&UData<'_>>,
) -> Result<(impl PinInit<RoxeCq, Error> + 'a, u32)> {
    if init.flags != 0 {
        return Err(eopnotsupp());
    }
    if init.cqe == 0 || init.cqe > MAX_CQE || init.comp_vector != 0 {
        return Err(EINVAL);
    }
    if let Some(u) = udata {
        u.expect_no_input()?;
    }
    let geometry = Geometry::for_entries(init.cqe, MAX_CQ_SLOTS).ok_or(EINVAL)?;
    // Given back on every error path below, up to and including a failing
    // initialiser; kept (and given back by `destroy`) once the CQ exists.
    let unit = dev.data().cqs.take_unit()?;
    let ring = ring_for(udata, geometry)?;
    respond(udata, &ring)?;
    let state = CqState {
        ring,
        producer: 0,
        armed: None,
        broken: false,
    };
    let init = try_pin_init!(RoxeCq {
        state <- new_spinlock_bh!(state, "roxe_cq"),
    })
    .pin_chain(move |_| {
        if crate::rdma::fault::fail_cq_init() {
            return Err(ENOMEM);
        }
        unit.keep();
        Ok(())
    });
    Ok((init, geometry.num_slots()))
}

pub(crate) fn destroy(cq: &Cq<Roxe>) {
    cq.device().data().cqs.give_back();
}

pub(crate) fn resize(cq: &Cq<Roxe>, cqe: u32, udata: Option<&UData<'_>>) -> Result<u32> {
    if cqe == 0 || cqe > MAX_CQE {
        return Err(EINVAL);
    }
    if let Some(u) = udata {
        u.expect_no_input()?;
    }
    let this = cq.data();
    let geometry = Geometry::for_entries(cqe, MAX_CQ_SLOTS).ok_or(EINVAL)?;
    // Allocate and answer before taking the lock: both may sleep. Nothing
    // observes the new ring until it is swapped in below.
    let new = ring_for(udata, geometry)?;
    respond(udata, &new)?;
    let mut st = this.state.lock();
    if st.broken {
        return Err(EIO);
    }
    let consumer = st.ring.consumer();
    let used = st
        .ring
        .geometry()
        .used(st.producer, consumer)
        .map_err(|_| EINVAL)?;
    if used > geometry.num_slots() {
        return Err(EINVAL);
    }
    for i in 0..used {
        new.write(i, st.ring.read(consumer.wrapping_add(i)));
    }
    new.set_consumer(0);
    new.set_producer(used);
    st.producer = used;
    // The old ring is dropped (and its mmap entry removed) with `old`.
    let old = core::mem::replace(&mut st.ring, new);
    drop(st);
    drop(old);
    Ok(geometry.num_slots())
}

pub(crate) fn req_notify(cq: &Cq<Roxe>, kind: Notify) -> Result<bool> {
    let mut st = cq.data().state.lock();
    st.armed = match (st.armed, kind) {
        // An arm for any completion already covers solicited ones.
        (Some(Notify::NextCompletion), _) => Some(Notify::NextCompletion),
        _ => Some(kind),
    };
    Ok(st.producer != st.ring.consumer())
}

/// Queues a completion. The data path calls this; it has the completion
/// handler run when the CQ is armed for this kind of completion.
pub(crate) fn push(
    cq: &Cq<Roxe>,
    cqe: Cqe,
    solicited: bool,
) -> core::result::Result<(), PushError> {
    let mut newly_broken = false;
    let mut fire = false;
    let result = {
        let mut st = cq.data().state.lock();
        if st.broken {
            Err(PushError::Broken)
        } else {
            match st.ring.geometry().free(st.producer, st.ring.consumer()) {
                Ok(0) => {
                    st.broken = true;
                    newly_broken = true;
                    Err(PushError::Overflow)
                }
                Ok(_) => {
                    let p = st.producer;
                    st.ring.write(p, cqe);
                    st.producer = p.wrapping_add(1);
                    st.ring.set_producer(st.producer);
                    fire = match st.armed {
                        Some(Notify::NextCompletion) => true,
                        Some(Notify::Solicited) => solicited || cqe.status != 0,
                        None => false,
                    };
                    if fire {
                        st.armed = None;
                    }
                    Ok(())
                }
                Err(_) => {
                    // User space wrote an impossible consumer index.
                    st.broken = true;
                    newly_broken = true;
                    Err(PushError::Broken)
                }
            }
        }
    };
    // The handlers run later from a work item, with none of roxe's locks
    // held (our callers hold the QP's): they may call back into verbs.
    if newly_broken {
        cq.report_error();
    } else if fire {
        cq.call_comp_handler();
    }
    result
}

/// Takes the next completion from a kernel consumer's CQ.
pub(crate) fn pop(cq: &Cq<Roxe>) -> Option<Wc<Roxe>> {
    let e = {
        let st = cq.data().state.lock();
        let c = st.ring.consumer();
        if c == st.producer || st.broken {
            return None;
        }
        let e = st.ring.read(c);
        st.ring.set_consumer(c.wrapping_add(1));
        e
    };
    // The QP is looked up with the CQ's lock let go.
    Some(to_wc(cq, &e))
}

/// A CQE as the RDMA core's work completion. A kernel CQ's ring is the
/// driver's alone, so its codes are ones the data path wrote; an unknown
/// one would be a driver bug and reads as a general error. The QP is looked
/// up by number: one destroyed since is named by no QP.
fn to_wc(cq: &Cq<Roxe>, c: &Cqe) -> Wc<Roxe> {
    let extra = if c.wc_flags & wc_flags::WITH_INV != 0 {
        WcExtra::Invalidated(c.imm_data)
    } else if c.wc_flags & wc_flags::WITH_IMM != 0 {
        WcExtra::Imm(c.imm_data)
    } else {
        WcExtra::None
    };
    Wc {
        wr_id: c.wr_id,
        status: WcStatus::from_raw(c.status).unwrap_or(WcStatus::GeneralErr),
        opcode: WcOp::from_raw(c.opcode).unwrap_or(WcOp::Send),
        vendor_err: c.vendor_err,
        byte_len: c.byte_len,
        qp: cq.device().data().qp_index.get(c.qp_num),
        src_qp: c.src_qp,
        extra,
        grh: c.wc_flags & wc_flags::GRH != 0,
        network_hdr_type: (c.network_hdr_type != 0).then_some(c.network_hdr_type),
        pkey_index: c.pkey_index,
        sl: c.sl,
        port_num: c.port_num,
    }
}
