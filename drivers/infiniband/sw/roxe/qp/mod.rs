// SPDX-License-Identifier: GPL-2.0

//! Queue pairs: creation with send and receive rings (mapped into user
//! space for user QPs), the IBTA state machine with per-transition
//! attribute checks, validation of what user space puts in the rings, and
//! flushing of outstanding work on entry to ERR.
//!
//! Moving data is the job of two protocol machines from `rust/proto`, the
//! requester (with its completer) and the responder, whose kernel sides are
//! `req` (and `comp`, for responses and the timer) and `resp`, over this
//! file's [`QpState`]; the doorbell hands them valid work.
//!
//! # Locks, and the order they nest in (outermost first)
//!
//! 1. The device's QP index (`rdma::qp::QpIndex`, bottom halves off), for
//!    the lookup of a packet's QP only. The lookup counts a use of the QP
//!    and releases the lock; the engines run with no device-wide lock, and
//!    `destroy` waits for the uses to drain once the QP is out of the index.
//! 2. A QP's `state` (bottom halves off): every engine runs under it, from
//!    the doorbell, the receive hook and the QP timer. One QP's state lock
//!    is never taken under another's.
//! 3. Under a QP's state lock, each on its own and released before the next
//!    is taken: the SRQ's state (`srq::pop`), a CQ's state (`cq::push`,
//!    which queues the completion handler to run later with no roxe lock
//!    held), the device's key table (`keys::with_key`, `keys::with_rkey`),
//!    its AH table (`tx::ah_with`) and its SRQ table (`srq::find_xrc`, for
//!    an XRC target QP: a counted reference is taken under it). None of
//!    these takes a QP lock.
//! 4. A QP's `post_lock` (interrupts off) is never held with any other:
//!    kernel consumers write their WQE under it, release it, and only then
//!    take the state lock (or leave the work to the timer when interrupts
//!    are off).

pub(crate) mod cc;
pub(crate) mod comp;
pub(crate) mod req;
pub(crate) mod resp;

use self::req::{with_req, Requester};
use self::resp::Responder;
use crate::cq;
use crate::device::{Roxe, RoxeDev};
use crate::limits::PORT;
use crate::limits::{MAX_QP_RD_ATOM, MAX_QP_WR};
use crate::net::NetDevice;
use crate::proto::mtu::IbMtu;
use crate::proto::psn::Psn;
use crate::proto::qp::{self as qpx, State};
use crate::proto::ring::Geometry;
use crate::proto::wr::{SendOp, Transport, WcOp, WcStatus, MAX_INLINE, MAX_SGE};
use crate::rdma::ah::{AhAttr, GidType};
use crate::rdma::errno::eopnotsupp;
use crate::rdma::qp::{
    mask, transition_ok, NewQp, Qp, QpAttr, QpCap, QpInit, QpTimer, QpType, SendWr, Sge as KSge,
};
use crate::rdma::srq::Srq;
use crate::rdma::udata::UData;
use crate::rdma::xrcd::XrcdId;
use crate::ring::Ring;
use crate::sync::SpinLockBh;
use crate::sync::{new_spinlock_bh, new_spinlock_irq, SpinLockIrq};
use crate::tx::Path;
use crate::uapi::{send_flags, Cqe, CreateQpResp, RecvWqe, RingInfo, SendWqe, Sge};
use kernel::error::code::{EBUSY, EINVAL, ENOMEM};
use kernel::prelude::*;
use kernel::types::ARef;

/// The QP number of the general services QP.
const GSI_QPN: u32 = 1;
/// QPNs below this are reserved; table index 1 maps to this QPN.
const FIRST_QPN: u32 = 16;

/// Per-QP state.
#[pin_data]
pub(crate) struct RoxeQp {
    pub(crate) qp_type: QpType,
    /// An XRC target QP's domain: it takes only packets for SRQs of it.
    pub(crate) xrcd: Option<XrcdId>,
    pub(crate) sig_all: bool,
    cap: QpCap,
    /// Index in the device's QP table; 0 for the GSI QP.
    index: u32,
    pub(crate) sq: Ring<SendWqe>,
    pub(crate) rq: Option<Ring<RecvWqe>>,
    /// An RSS QP's receive side: it receives through its indirection
    /// table's WQs, and has no queues or state of its own.
    pub(crate) rss: Option<crate::wq::RssRx>,
    /// One lock for the requester, responder and completer state: they run
    /// from verbs calls and from the receive softirq, and share the rings.
    #[pin]
    pub(crate) state: SpinLockBh<QpState>,
    /// Kernel consumers post under this lock, which is safe with interrupts
    /// off; it guards only the producer side of the kernel rings.
    #[pin]
    post_lock: SpinLockIrq<()>,
    /// A kernel consumer posted with interrupts off; the timer handles it.
    pub(crate) posted: core::sync::atomic::AtomicBool,
    /// Retry, RNR and ACK-coalescing deadlines, and deferred kernel posts
    /// ([`crate::qp::comp::on_timer`]).
    #[pin]
    pub(crate) timer: QpTimer<Roxe>,
}

pub(crate) struct QpState {
    pub(crate) attr: QpAttr,
    /// The kernel's own RQ consumer index; the copy in the ring is only
    /// ever written from it. (The SQ's is the requester's.)
    pub(crate) rq_consumer: u32,
    /// The port's netdev, which datagrams are routed out of; taken on each
    /// modify, where the core's lookup may run (never under this lock).
    pub(crate) ndev: Option<ARef<NetDevice>>,
    /// Where connected QPs send (set on the move to RTR).
    pub(crate) path: Option<Path>,
    /// The requester and completer: `rust/proto`'s machine, its kernel
    /// side in [`self::req`]. It keeps the SQ's consumer index, and how
    /// many WQEs past it earlier doorbells checked, so each doorbell only
    /// reads what is new (the data path checks each WQE again when it
    /// reads it to send it: user space may rewrite a slot at any time).
    pub(crate) req: Requester,
    /// The responder: `rust/proto`'s machine, its kernel side in
    /// [`self::resp`].
    pub(crate) resp: KBox<Responder>,
    /// UD: datagrams kept until their ODP receive buffer is mapped.
    pub(crate) park: resp::Park,
    /// ECN and CNPs ([`self::cc`]).
    pub(crate) cc: cc::Congestion,
}

impl QpState {
    /// The path MTU a connected QP cuts messages at, and so the size of the
    /// packets it takes: the QP's path MTU, or the route's if that is
    /// smaller.
    pub(crate) fn path_mtu(&self) -> u32 {
        let mtu = IbMtu::from_enum(self.attr.path_mtu).map_or(1024, IbMtu::bytes);
        self.path.as_ref().map_or(mtu, |p| mtu.min(p.mtu()))
    }

    /// Looks a connected QP's route up again if the routing tables changed
    /// under it (its device went down and came back), counted in
    /// `tx_route_renewed`. Called before the QP sends or takes a packet,
    /// so that a dead route neither discards what it sends nor cuts its
    /// packets at the blackhole device's MTU.
    pub(crate) fn renew_route(&mut self, dev: &RoxeDev) {
        if self.path.as_mut().is_some_and(Path::renew_route) {
            dev.counters.event(crate::counters::Event::RouteRenewed);
        }
    }

    /// Gives the responder the QP's attributes it works by.
    fn configure_responder(&mut self) {
        let a = &self.attr;
        self.resp.set_access(a.access_flags);
        self.resp.set_max_dest_rd_atomic(a.max_dest_rd_atomic);
        self.resp.set_min_rnr_timer(a.min_rnr_timer);
        let mtu = self.path_mtu();
        self.resp.set_mtu(mtu);
    }
}

pub(crate) fn transport(t: QpType) -> Transport {
    match t {
        QpType::Rc => Transport::Rc,
        QpType::Uc => Transport::Uc,
        QpType::Ud | QpType::Gsi | QpType::RawPacket => Transport::Ud,
        QpType::XrcIni | QpType::XrcTgt => Transport::Xrc,
    }
}

pub(crate) fn reset_attr(cap: QpCap) -> QpAttr {
    QpAttr {
        state: State::Reset,
        cur_state: None,
        path_mtu: IbMtu::Mtu1024.to_enum(),
        qkey: 0,
        rq_psn: 0,
        sq_psn: 0,
        dest_qp_num: 0,
        access_flags: 0,
        pkey_index: 0,
        port: PORT,
        en_sqd_async_notify: false,
        max_rd_atomic: 0,
        max_dest_rd_atomic: 0,
        min_rnr_timer: 0,
        timeout: 0,
        retry_cnt: 0,
        rnr_retry: 0,
        av: None,
        cap,
    }
}

fn ring_info<S: crate::rdma::udata::Plain>(r: &Ring<S>) -> Result<RingInfo> {
    let (mmap_offset, mmap_size) = r.mmap_info().ok_or(EINVAL)?;
    Ok(RingInfo {
        mmap_offset,
        mmap_size,
        num_slots: r.geometry().num_slots(),
        // CAST: slot sizes are at most a few hundred bytes.
        slot_size: r.slot_size() as u32,
    })
}

fn new_ring<S: crate::rdma::udata::Plain>(
    udata: Option<&UData<'_>>,
    entries: u32,
    slot_size: u32,
) -> Result<Ring<S>> {
    let g = Geometry::for_entries(entries, MAX_QP_WR).ok_or(EINVAL)?;
    match udata {
        Some(u) => Ring::new_user(u, g, slot_size as usize),
        None => Ring::new_kernel(g, slot_size as usize),
    }
}

pub(crate) fn create(
    qp: &NewQp<'_, Roxe>,
    init: &QpInit,
    udata: Option<&UData<'_>>,
) -> Result<(impl PinInit<RoxeQp>, QpCap, u32)> {
    if init.create_flags != 0 {
        return Err(eopnotsupp());
    }
    // An XRC target QP has no queues of its own and no CQs: what it
    // receives goes to the SRQ each packet names. An XRC initiator has a
    // send queue only.
    let tgt = init.qp_type == QpType::XrcTgt;
    let ini = init.qp_type == QpType::XrcIni;
    let cqs_ok = if tgt {
        udata.is_none() && init.xrcd.is_some()
    } else {
        qp.has_send_cq() && (init.has_srq || ini || qp.has_recv_cq())
    };
    let raw = init.qp_type == QpType::RawPacket;
    // An RSS QP: a raw packet QP over an indirection table, with no queues
    // and no CQs of its own.
    let table = qp.ind_table();
    let rss_qp = table.is_some();
    if rss_qp && (!raw || init.has_srq || init.cap != QpCap::default()) {
        return Err(EINVAL);
    }
    if !(cqs_ok || rss_qp) || ((tgt || ini || raw) && init.has_srq) {
        return Err(EINVAL);
    }
    let c = if tgt || rss_qp {
        QpCap::default()
    } else {
        init.cap
    };
    let no_rq = init.has_srq || tgt || ini || rss_qp;
    if c.max_send_wr > MAX_QP_WR
        || c.max_send_sge > MAX_SGE
        || c.max_inline_data > MAX_INLINE
        || (!no_rq && (c.max_recv_wr > MAX_QP_WR || c.max_recv_sge > MAX_SGE))
    {
        return Err(EINVAL);
    }
    let rss = match (table, udata) {
        (Some(t), Some(u)) => {
            // The hash configuration is required, not optional fields.
            if u.inlen() < core::mem::size_of::<crate::uapi::CreateRssQpCmd>() {
                return Err(EINVAL);
            }
            Some(crate::wq::RssRx::new(t.data(), &u.read_input()?)?)
        }
        // Only user space has raw packet QPs.
        (Some(_), None) => return Err(EINVAL),
        (None, Some(u)) => {
            u.expect_no_input()?;
            None
        }
        (None, None) => None,
    };
    let dev = qp.device().data();

    // The GSI QP is QP1 and exists once per port, for kernel use only.
    let is_gsi = init.qp_type == QpType::Gsi;
    if is_gsi && (udata.is_some() || init.port != PORT) {
        return Err(EINVAL);
    }

    let send_slot = qpx::send_slot_size(c.max_send_sge.max(1), c.max_inline_data).ok_or(EINVAL)?;
    // An RSS QP's unused send ring is the kernel's: user space cannot map
    // it and write to it.
    let sq: Ring<SendWqe> = new_ring(if rss_qp { None } else { udata }, c.max_send_wr, send_slot)?;
    let rq: Option<Ring<RecvWqe>> = if no_rq {
        None
    } else {
        let recv_slot = qpx::recv_slot_size(c.max_recv_sge.max(1)).ok_or(EINVAL)?;
        Some(new_ring(udata, c.max_recv_wr, recv_slot)?)
    };
    let granted = QpCap {
        max_send_wr: sq.geometry().num_slots(),
        max_send_sge: qpx::send_sge_capacity(send_slot).min(MAX_SGE),
        max_inline_data: qpx::send_inline_capacity(send_slot).min(MAX_INLINE),
        max_recv_wr: rq.as_ref().map_or(0, |r| r.geometry().num_slots()),
        max_recv_sge: rq.as_ref().map_or(0, |r| {
            qpx::recv_sge_capacity(r.slot_size() as u32).min(MAX_SGE)
        }),
    };
    // The target's and an RSS QP's one-slot send ring is never used, and
    // an RSS QP's user is not told of it.
    let granted = if tgt || rss_qp {
        QpCap::default()
    } else {
        granted
    };
    if let Some(u) = udata {
        u.respond(&CreateQpResp {
            sq: if rss_qp {
                RingInfo::default()
            } else {
                ring_info(&sq)?
            },
            rq: match &rq {
                Some(r) => ring_info(r)?,
                None => RingInfo::default(),
            },
        })?;
    }

    // From here on every error return gives the QP number back (the guard).
    let number = QpNumber::take(dev, is_gsi)?;
    if crate::rdma::fault::fail_qp_table() {
        return Err(ENOMEM);
    }
    // Sized by the caller: charged to its memory cgroup, like the rings.
    let attr = reset_attr(granted);
    let mut req = req::new_requester(init.qp_type, sq.geometry().num_slots())?;
    req::reset_settings(&mut req, &attr);
    let mut cc = cc::Congestion::new();
    if init.qp_type == QpType::Ud {
        cc.for_datagrams()?;
    }
    let state = QpState {
        attr,
        rq_consumer: 0,
        ndev: None,
        path: None,
        req,
        resp: resp::new_responder(crate::tx::wire(init.qp_type))?,
        park: resp::Park::new(),
        cc,
    };
    let (qp_type, sig_all, xrcd) = (init.qp_type, init.sq_sig_all, init.xrcd);
    let qpn = number.qpn();
    // Nothing fails after this (the initialiser is infallible): the QP
    // keeps its number until `destroy`.
    let index = number.keep();
    Ok((
        pin_init!(RoxeQp {
            qp_type,
            xrcd,
            sig_all,
            cap: granted,
            index,
            sq,
            rq,
            rss,
            state <- new_spinlock_bh!(state, "roxe_qp"),
            post_lock <- new_spinlock_irq!((), "roxe_qp_post"),
            posted: core::sync::atomic::AtomicBool::new(false),
            timer <- QpTimer::new(),
        }),
        granted,
        qpn,
    ))
}

pub(crate) fn destroy(qp: &Qp<Roxe>) {
    let this = qp.data();
    let dev = qp.device().data();
    {
        let mut st = this.state.lock();
        with_req(qp, &mut st, |r, io| r.release_credits(io));
    }
    release_number(dev, this.index);
}

/// A QP number taken for a QP being created: an entry of the device's QP
/// table and a unit of its QP budget, or for the GSI QP the device's one
/// GSI slot. Dropping it gives them back, so every error return of
/// `create` releases what it took; [`QpNumber::keep`] hands it to the new
/// QP, which gives it back in [`destroy`].
struct QpNumber<'a> {
    dev: &'a RoxeDev,
    /// Index in the QP table; 0 for the GSI QP.
    index: u32,
}

impl<'a> QpNumber<'a> {
    fn take(dev: &'a RoxeDev, gsi: bool) -> Result<Self> {
        if gsi {
            if dev
                .gsi_taken
                .swap(true, core::sync::atomic::Ordering::AcqRel)
            {
                return Err(EBUSY);
            }
            return Ok(QpNumber { dev, index: 0 });
        }
        dev.qps.take()?;
        match dev.qp_table.insert(()) {
            Ok(index) => Ok(QpNumber { dev, index }),
            Err(e) => {
                dev.qps.give_back();
                Err(e)
            }
        }
    }

    fn qpn(&self) -> u32 {
        if self.index == 0 {
            GSI_QPN
        } else {
            self.index + FIRST_QPN - 1
        }
    }

    /// The QP keeps the number: returns its index, for `destroy`.
    fn keep(self) -> u32 {
        let index = self.index;
        core::mem::forget(self);
        index
    }
}

impl Drop for QpNumber<'_> {
    fn drop(&mut self) {
        release_number(self.dev, self.index);
    }
}

/// Gives back QP table index `index` and its budget unit, or the GSI slot
/// for index 0.
fn release_number(dev: &RoxeDev, index: u32) {
    if index == 0 {
        dev.gsi_taken
            .store(false, core::sync::atomic::Ordering::Release);
    } else {
        dev.qp_table.remove(index);
        dev.qps.give_back();
    }
}

fn check_av(av: &Option<AhAttr>) -> Result {
    let av = av.as_ref().ok_or(EINVAL)?;
    if !av.is_roce || !av.has_grh || av.port != PORT {
        return Err(EINVAL);
    }
    match av.sgid {
        Some((_, GidType::RoceV2)) => Ok(()),
        _ => Err(EINVAL),
    }
}

/// Checks the individual attributes that `mask` selects.
fn check_attrs(this: &RoxeQp, a: &QpAttr, m: u32) -> Result {
    if m & (mask::CAP | mask::RATE_LIMIT | mask::ALT_PATH | mask::PATH_MIG_STATE) != 0 {
        // Resizing queues, rate limits and path migration are not offered.
        return Err(eopnotsupp());
    }
    let bad = (m & mask::PORT != 0 && a.port != PORT)
        || (m & mask::PKEY_INDEX != 0 && a.pkey_index != 0)
        || (m & mask::PATH_MTU != 0 && IbMtu::from_enum(a.path_mtu).is_none())
        || (m & mask::MAX_QP_RD_ATOMIC != 0 && u32::from(a.max_rd_atomic) > MAX_QP_RD_ATOM)
        || (m & mask::MAX_DEST_RD_ATOMIC != 0 && u32::from(a.max_dest_rd_atomic) > MAX_QP_RD_ATOM)
        || (m & mask::TIMEOUT != 0 && a.timeout > 31)
        || (m & mask::MIN_RNR_TIMER != 0 && a.min_rnr_timer > 31)
        || (m & mask::RETRY_CNT != 0 && a.retry_cnt > 7)
        || (m & mask::RNR_RETRY != 0 && a.rnr_retry > 7)
        || (m & mask::DEST_QPN != 0 && a.dest_qp_num >= 1 << 24)
        || (m & mask::ACCESS_FLAGS != 0
            && a.access_flags
                & !(crate::proto::access::LOCAL_WRITE
                    | crate::proto::access::REMOTE_WRITE
                    | crate::proto::access::REMOTE_READ
                    | crate::proto::access::REMOTE_ATOMIC
                    | crate::proto::access::FLUSH_GLOBAL
                    | crate::proto::access::FLUSH_PERSISTENT
                    // An MR flag that rxe and hardware drivers ignore on a
                    // QP (pyverbs' ODP tests pass their MR's flags).
                    | crate::proto::access::ON_DEMAND)
                != 0);
    if bad {
        return Err(EINVAL);
    }
    if m & mask::AV != 0 {
        if this.qp_type == QpType::Ud || this.qp_type == QpType::Gsi {
            return Err(EINVAL);
        }
        check_av(&a.av)?;
    }
    Ok(())
}

pub(crate) fn modify(qp: &Qp<Roxe>, a: &QpAttr, m: u32, udata: Option<&UData<'_>>) -> Result {
    if let Some(u) = udata {
        u.expect_no_input()?;
    }
    let this = qp.data();
    // An RSS QP has no state to move: its WQs' states say what it takes.
    if this.rss.is_some() {
        return Err(eopnotsupp());
    }
    check_attrs(this, a, m)?;
    // Resolve the route before taking the lock. A destination without a
    // route is no error here (rxe accepts it too); sends retry the lookup.
    let ndev = qp.device().netdev(PORT);
    let path = match (&a.av, m & mask::AV != 0, &ndev) {
        (Some(av), true, Some(nd)) => path_for(nd, av),
        _ => None,
    };
    let mut st = this.state.lock();
    // Dropping a netdev reference is allowed under a spinlock.
    let _old_ndev = core::mem::replace(&mut st.ndev, ndev);
    let cur = if m & mask::CUR_STATE != 0 {
        let claimed = a.cur_state.ok_or(EINVAL)?;
        // Only the two states the IBTA lets a consumer name may differ
        // from what the QP really is in.
        if claimed != st.attr.state && !(claimed == State::Sqe || st.attr.state == State::Sqe) {
            return Err(EINVAL);
        }
        st.attr.state
    } else {
        st.attr.state
    };
    let next = if m & mask::STATE != 0 { a.state } else { cur };
    if !transition_ok(cur, next, this.qp_type, m) {
        return Err(EINVAL);
    }

    // Each attribute the mask names, once: into `attr`, and where an engine
    // starts from it, into that engine's state too.
    let st = &mut *st;
    let s = &mut st.attr;
    if m & mask::PKEY_INDEX != 0 {
        s.pkey_index = a.pkey_index;
    }
    if m & mask::PORT != 0 {
        s.port = a.port;
    }
    if m & mask::QKEY != 0 {
        s.qkey = a.qkey;
    }
    if m & mask::AV != 0 {
        s.av = a.av;
        st.path = path;
    }
    if m & mask::PATH_MTU != 0 {
        s.path_mtu = a.path_mtu;
    }
    if m & mask::TIMEOUT != 0 {
        s.timeout = a.timeout;
        st.req.set_timeout(a.timeout);
    }
    if m & mask::RETRY_CNT != 0 {
        s.retry_cnt = a.retry_cnt;
        st.req.set_retry_cnt(a.retry_cnt);
    }
    if m & mask::RNR_RETRY != 0 {
        s.rnr_retry = a.rnr_retry;
        st.req.set_rnr_retry(a.rnr_retry);
    }
    if m & mask::RQ_PSN != 0 {
        s.rq_psn = a.rq_psn & 0xff_ffff;
        st.resp.set_rq_psn(Psn::new(s.rq_psn));
    }
    if m & mask::SQ_PSN != 0 {
        s.sq_psn = a.sq_psn & 0xff_ffff;
        st.req.set_sq_psn(Psn::new(s.sq_psn));
    }
    if m & mask::MAX_QP_RD_ATOMIC != 0 {
        s.max_rd_atomic = a.max_rd_atomic;
        st.req.set_max_rd_atomic(a.max_rd_atomic);
    }
    if m & mask::MAX_DEST_RD_ATOMIC != 0 {
        s.max_dest_rd_atomic = a.max_dest_rd_atomic;
    }
    if m & mask::MIN_RNR_TIMER != 0 {
        s.min_rnr_timer = a.min_rnr_timer;
    }
    if m & mask::DEST_QPN != 0 {
        s.dest_qp_num = a.dest_qp_num;
    }
    if m & mask::ACCESS_FLAGS != 0 {
        s.access_flags = a.access_flags;
    }
    if m & mask::EN_SQD_ASYNC_NOTIFY != 0 {
        s.en_sqd_async_notify = a.en_sqd_async_notify;
    }
    s.state = next;

    match next {
        State::Reset => {
            // Outstanding work is discarded without completions, and the
            // requester starts again as new, from PSN 0.
            let consumer = discard(this, st);
            st.attr = reset_attr(this.cap);
            with_req(qp, st, |r, io| r.reset(consumer, io));
            req::reset_settings(&mut st.req, &st.attr);
            st.path = None;
            // A receive WQE the responder held goes without a completion.
            let _discarded = st.resp.reset();
            st.park.clear();
            st.cc.reset();
        }
        State::Err if cur != State::Err => flush(qp, st),
        _ => {}
    }
    st.configure_responder();
    if cur == State::Sqd && next == State::Rts {
        // Nothing was sent in SQD: WQEs posted meanwhile, and a timer kick
        // (budget, pacing) that found the QP draining, wait for this.
        req::send_pending(qp, st);
    }
    Ok(())
}

pub(crate) fn query(qp: &Qp<Roxe>) -> Result<(QpAttr, bool)> {
    let this = qp.data();
    let st = this.state.lock();
    let mut a = st.attr;
    a.cap = this.cap;
    Ok((a, this.sig_all))
}

fn flush_cqe(qp_num: u32, wr_id: u64, opcode: WcOp) -> Cqe {
    Cqe {
        wr_id,
        status: WcStatus::WrFlushErr as u32,
        opcode: opcode as u32,
        qp_num,
        port_num: PORT as u8,
        ..Cqe::default()
    }
}

/// Drops outstanding work without completions (entry to RESET). Returns
/// the SQ's consumer index after it, for the requester.
fn discard(this: &RoxeQp, st: &mut QpState) -> u32 {
    // A corrupt producer index leaves the consumer where it is; user space
    // sees its own garbage, the kernel reads nothing.
    let sq_consumer = sq_end(this, st.req.consumer());
    this.sq.set_consumer(sq_consumer);
    if let Some(rq) = &this.rq {
        if rq.geometry().used(rq.producer(), st.rq_consumer).is_ok() {
            st.rq_consumer = rq.producer();
            rq.set_consumer(st.rq_consumer);
        }
    }
    sq_consumer
}

/// The route for a connected QP's address vector, if there is one.
fn path_for(ndev: &crate::net::NetDevice, av: &AhAttr) -> Option<Path> {
    let (sgid, _) = av.sgid?;
    Path::resolve(
        ndev,
        sgid,
        av.dgid,
        av.traffic_class,
        av.hop_limit,
        av.flow_label,
    )
    .ok()
}

/// Completes every outstanding work request with a flush error.
pub(crate) fn flush_all(qp: &Qp<Roxe>, st: &mut QpState) {
    flush(qp, st)
}

/// Completes every outstanding work request with a flush error; the
/// requester stops, and gives back its read credits.
fn flush(qp: &Qp<Roxe>, st: &mut QpState) {
    let from = st.req.consumer();
    let to = sq_end(qp.data(), from);
    flush_sq(qp, from, to);
    with_req(qp, st, |r, io| r.flush(to, io));
    flush_rq(qp, st);
}

/// Where flushing or discarding the SQ from index `from` ends: the
/// producer index, or `from` itself if user space corrupted the producer
/// (the kernel then reads nothing).
pub(crate) fn sq_end(this: &RoxeQp, from: u32) -> u32 {
    let prod = this.sq.producer();
    if this.sq.geometry().used(prod, from).is_ok() {
        prod
    } else {
        from
    }
}

/// Completes send WQEs `from..to` with a flush error, and moves the SQ's
/// consumer index in the ring to `to` (the requester's is the caller's).
pub(crate) fn flush_sq(qp: &Qp<Roxe>, from: u32, to: u32) {
    let this = qp.data();
    if let Some(scq) = qp.send_cq() {
        let mut i = from;
        while i != to {
            let w = this.sq.read(i);
            let op = SendOp::from_raw(w.opcode).map_or(WcOp::Send, SendOp::completion);
            // A full CQ is reported by `push` itself (IB_EVENT_CQ_ERR) and
            // takes nothing more: the rest go without completions, so one
            // call does no more work than the CQ has room for.
            if cq::push(scq, flush_cqe(qp.qp_num(), w.wr_id, op), false).is_err() {
                break;
            }
            i = i.wrapping_add(1);
        }
    }
    this.sq.set_consumer(to);
}

/// Completes receive WQE `held`, which the responder took from the RQ or
/// SRQ for a message (the oldest receive; an SRQ's belongs to this QP once
/// taken), with a flush error. An XRC target QP's came from `xrc`, and
/// completes to that SRQ's CQ.
pub(crate) fn flush_held(
    qp: &Qp<Roxe>,
    xrc: Option<&Srq<Roxe>>,
    held: Option<crate::wqe::RecvCopy>,
) {
    let rcq = match xrc {
        Some(s) => s.xrc_cq(),
        None => qp.recv_cq(),
    };
    if let (Some(w), Some(rcq)) = (held, rcq) {
        let _ = cq::push(rcq, flush_cqe(qp.qp_num(), w.wr_id(), WcOp::Recv), false);
    }
}

/// Completes every outstanding receive with a flush error: first the one
/// the responder holds, then the RQ's. The responder stops.
pub(crate) fn flush_rq(qp: &Qp<Roxe>, st: &mut QpState) {
    let this = qp.data();
    let held = st.resp.flush();
    // An XRC target QP's held receive completes to the CQ of the SRQ it
    // came from, if that SRQ is still there.
    let xrc = match (this.qp_type, this.xrcd, &held) {
        (QpType::XrcTgt, Some(x), Some(w)) => crate::srq::origin_of(qp.device(), w, x),
        _ => None,
    };
    if this.qp_type != QpType::XrcTgt || xrc.is_some() {
        flush_held(qp, xrc.as_deref(), held);
    }
    // Datagrams kept for ODP memory are lost with the QP's receiving.
    st.park.clear();
    if let (Some(rq), Some(rcq)) = (&this.rq, qp.recv_cq()) {
        let prod = rq.producer();
        if let Ok(n) = rq.geometry().used(prod, st.rq_consumer) {
            for i in 0..n {
                let w = rq.read(st.rq_consumer.wrapping_add(i));
                // As for the SQ (`flush`): a full or broken CQ ends it.
                if cq::push(rcq, flush_cqe(qp.qp_num(), w.wr_id, WcOp::Recv), false).is_err() {
                    break;
                }
            }
            st.rq_consumer = prod;
            rq.set_consumer(prod);
        }
    }
}

/// Whether a QP of type `t` may post `op`: its transport's operations,
/// and for a raw packet QP only SEND (its message is the frame).
pub(crate) fn op_allowed(t: QpType, op: SendOp) -> bool {
    op.allowed_on(transport(t)) && (t != QpType::RawPacket || op == SendOp::Send)
}

/// Why a send WQE is refused.
fn check_send_wqe(this: &RoxeQp, w: &SendWqe) -> core::result::Result<(), WcStatus> {
    let op = SendOp::from_raw(w.opcode).ok_or(WcStatus::LocQpOpErr)?;
    if !op_allowed(this.qp_type, op) {
        return Err(WcStatus::LocQpOpErr);
    }
    if w.send_flags & send_flags::INLINE != 0 {
        if w.inline_len > this.cap.max_inline_data {
            return Err(WcStatus::LocLenErr);
        }
    } else if w.num_sge > this.cap.max_send_sge {
        return Err(WcStatus::LocLenErr);
    }
    Ok(())
}

/// Moves the QP to ERR because the WQE `ahead` slots past the consumer is
/// bad. Completions follow posting order: the valid WQEs before it are
/// flushed (nothing can send them once the QP is in ERR), the bad one
/// completes with `status`, and everything after it is flushed.
fn fail_qp(qp: &Qp<Roxe>, st: &mut QpState, ahead: u32, bad: &SendWqe, status: WcStatus) {
    let bad_idx = st.req.consumer().wrapping_add(ahead);
    flush_sq(qp, st.req.consumer(), bad_idx);
    let op = SendOp::from_raw(bad.opcode).map_or(WcOp::Send, SendOp::completion);
    if let Some(scq) = qp.send_cq() {
        let cqe = Cqe {
            status: status as u32,
            ..flush_cqe(qp.qp_num(), bad.wr_id, op)
        };
        let _ = cq::push(scq, cqe, false);
    }
    qp.data().sq.set_consumer(bad_idx.wrapping_add(1));
    with_req(qp, st, |r, io| r.flush(bad_idx.wrapping_add(1), io));
    st.attr.state = State::Err;
    flush(qp, st);
}

/// The send doorbell: checks every new WQE user space placed in the SQ.
pub(crate) fn doorbell(qp: &Qp<Roxe>) -> Result {
    let mut st = qp.data().state.lock();
    doorbell_locked(qp, &mut st)
}

/// The doorbell's work, with the state lock held.
pub(crate) fn doorbell_locked(qp: &Qp<Roxe>, st: &mut QpState) -> Result {
    let this = qp.data();
    let prod = this.sq.producer();
    let pending = match this.sq.geometry().used(prod, st.req.consumer()) {
        Ok(n) => n,
        Err(_) => {
            // An impossible producer index: the ring cannot be trusted.
            if st.attr.state != State::Err {
                st.attr.state = State::Err;
                with_req(qp, st, |r, io| r.flush(r.consumer(), io));
                flush_rq(qp, st);
                // The event handler runs later, from a work item.
                qp.report_fatal();
            }
            return Err(EINVAL);
        }
    };
    if st.attr.state == State::Err {
        // Work posted to a QP in ERR completes with a flush error.
        flush(qp, st);
        return Ok(());
    }
    if !st.attr.state.can_post_send() {
        return Err(EINVAL);
    }
    let consumer = st.req.consumer();
    for i in st.req.checked().min(pending)..pending {
        let w = this.sq.read(consumer.wrapping_add(i));
        if let Err(status) = check_send_wqe(this, &w) {
            fail_qp(qp, st, i, &w, status);
            return Ok(());
        }
    }
    st.req.set_checked(pending);
    if st.attr.state == State::Rts {
        req::send_pending(qp, st);
    }
    Ok(())
}

/// Work a kernel consumer posted with interrupts off, handled from the QP
/// timer: sends are checked and sent, and a QP in ERR flushes what came.
pub(crate) fn run_kernel_posts(qp: &Qp<Roxe>, st: &mut QpState) {
    if st.attr.state == State::Err {
        flush(qp, st);
    } else if st.attr.state.can_post_send() {
        let _ = doorbell_locked(qp, st);
    }
}

/// A kernel consumer's send: written to the kernel SQ ring like a user
/// WQE, then sent as the doorbell would. Consumers may post with
/// interrupts off (the MAD layer does), where neither the QP's lock nor
/// sending is allowed: the WQE is then written under the post lock only,
/// and the QP timer does the rest.
pub(crate) fn post_kernel_send(qp: &Qp<Roxe>, wr: &SendWr<'_, Roxe>) -> Result {
    let this = qp.data();
    // A kernel work request has no place for an XRC SRQ number, and an XRC
    // target QP does not send.
    if matches!(this.qp_type, QpType::XrcIni | QpType::XrcTgt) {
        return Err(eopnotsupp());
    }
    // The common `IB_WR_*` opcodes have the `IBV_WR_*` numbers, and so
    // does roxe's `IB_WR_REG_MR`. Kernel consumers have no bind verb.
    // `IB_WR_FLUSH` and `IB_WR_ATOMIC_WRITE` have no kernel calling
    // convention in Linux 6.12 (no work-request container; `ib_send_wr` has
    // no place for a flush's placement type and level; no in-tree caller),
    // so they are refused rather than guessed at.
    let Some(op) = SendOp::from_raw(wr.opcode)
        .filter(|o| !matches!(o, SendOp::BindMw | SendOp::Flush | SendOp::AtomicWrite))
    else {
        return Err(eopnotsupp());
    };
    let sges = wr.sges();
    if sges.len() > this.cap.max_send_sge as usize {
        return Err(EINVAL);
    }
    {
        let _post = this.post_lock.lock();
        // A kernel ring's indices are the kernel's own: the consumer index
        // in it is the one the data path keeps.
        let prod = this.sq.producer();
        if this
            .sq
            .geometry()
            .free(prod, this.sq.consumer())
            .map_err(|_| EINVAL)?
            == 0
        {
            return Err(ENOMEM);
        }
        let w = SendWqe {
            wr_id: wr.wr_id,
            opcode: wr.opcode,
            // Kernel consumers' inline data is sent from their SGEs.
            send_flags: wr.send_flags & !send_flags::INLINE,
            imm_data: wr.imm_data,
            // CAST: at most MAX_SGE.
            num_sge: sges.len() as u32,
            inline_len: 0,
            // A local invalidate names its key where a send with
            // invalidate does, in `imm_data`; the data path reads `rkey`.
            rkey: if op == SendOp::LocalInv {
                wr.imm_data
            } else {
                wr.rkey
            },
            remote_addr: wr.remote_addr,
            compare_add: wr.compare_add,
            swap: wr.swap,
            ah_num: wr.ah.map_or(0, |a| a.data().num()),
            remote_qpn: wr.remote_qpn,
            remote_qkey: wr.remote_qkey,
            _reserved: 0,
        };
        this.sq.write(prod, w);
        for (i, s) in sges.iter().enumerate() {
            this.sq
                .write_at(
                    prod,
                    (qpx::SEND_WQE_HEADER + qpx::SGE_SIZE * i as u32) as usize,
                    Sge::from(*s),
                )
                .ok_or(EINVAL)?;
        }
        this.sq.set_producer(prod.wrapping_add(1));
    }
    kernel_post_done(qp)
}

/// After a kernel post: handle it now, or from the timer if interrupts are
/// off.
fn kernel_post_done(qp: &Qp<Roxe>) -> Result {
    let this = qp.data();
    if crate::rdma::irqs_disabled() {
        this.posted
            .store(true, core::sync::atomic::Ordering::Release);
        qp.arm_timer(0);
        return Ok(());
    }
    let mut st = this.state.lock();
    run_kernel_posts(qp, &mut st);
    Ok(())
}

/// A kernel consumer's receive, written to the kernel RQ ring.
pub(crate) fn post_kernel_recv(qp: &Qp<Roxe>, wr_id: u64, sges: &[KSge]) -> Result {
    let this = qp.data();
    // Kernel QPs on an SRQ post to the SRQ.
    let rq = this.rq.as_ref().ok_or(EINVAL)?;
    if sges.len() > this.cap.max_recv_sge as usize {
        return Err(EINVAL);
    }
    {
        let _post = this.post_lock.lock();
        crate::wqe::post_kernel_recv(rq, wr_id, sges)?;
    }
    kernel_post_done(qp)
}
