// SPDX-License-Identifier: GPL-2.0

//! Queue pairs (`struct ib_qp`).

use super::ah::AhAttr;
use super::cq::Cq;
use super::device::{Device, Driver};
use super::udata::UData;
use crate::bindings;
use crate::proto::qp::State;
use crate::sync::timer::{impl_has_timer, HasTimer, Timer, TimerCallback};
use core::marker::PhantomData;
use core::ptr::addr_of_mut;
use kernel::error::{code::*, from_result, Result};
use kernel::ffi::c_int;
use kernel::init::PinInit;
use kernel::macros::vtable;
use kernel::prelude::{pin_data, pinned_drop};
use kernel::types::Opaque;

/// The verbs of a QP, implemented by the driver's per-QP state.
#[vtable]
pub(crate) trait QpOps<T: Driver>: Send + Sync + Sized {
    /// Creates a QP. Returns the initialiser of its state, the queue sizes
    /// actually granted, and the QP number. Everything that can fail
    /// happens here: the initialiser cannot, so once this returns the QP
    /// exists and `destroy` gives back what it holds.
    fn create(
        qp: &NewQp<'_, T>,
        init: &QpInit,
        udata: Option<&UData<'_>>,
    ) -> Result<(impl PinInit<Self>, QpCap, u32)>;

    /// Changes QP attributes and state; `mask` says which fields of `attr`
    /// are meant.
    fn modify(qp: &Qp<T>, attr: &QpAttr, mask: u32, udata: Option<&UData<'_>>) -> Result;

    /// Reports the QP's attributes and whether every send is signalled.
    fn query(qp: &Qp<T>) -> Result<(QpAttr, bool)>;

    /// The QP is initialised and about to be handed to the core: a driver
    /// that finds QPs by number (for incoming packets) takes a [`QpRef`]
    /// into its index here. On an error the QP is torn down again (through
    /// `destroy`, not `unpublish`) and creation fails with it, so a failed
    /// `publish` must keep no reference: teardown waits for every one.
    fn publish(_qp: &Qp<T>) -> Result {
        Ok(())
    }

    /// The QP's destruction begins: the driver drops every [`QpRef`] to it
    /// that it keeps (its index entry), so that no new use can start. Uses
    /// already running keep theirs; the abstraction waits for them, and
    /// for the QP's timer, before it calls `destroy`.
    fn unpublish(_qp: &Qp<T>) {}

    /// Called just before a QP's state is dropped, once no [`QpRef`] to it
    /// is left and its timer can no longer fire.
    fn destroy(qp: &Qp<T>);

    /// Attaches a UD QP to the multicast group `gid` (the core has checked
    /// that the QP is UD and the GID multicast).
    /// A driver that has it has `detach_mcast` too.
    fn attach_mcast(_qp: &Qp<T>, _gid: &[u8; 16]) -> Result {
        kernel::build_error(kernel::error::VTABLE_DEFAULT_ERROR)
    }

    /// Detaches a QP from the multicast group `gid`.
    fn detach_mcast(_qp: &Qp<T>, _gid: &[u8; 16]) -> Result {
        kernel::build_error(kernel::error::VTABLE_DEFAULT_ERROR)
    }

    /// Adds the driver's own attributes of a QP to what `rdma -dd res
    /// show qp` prints (netlink's restrack dump).
    fn fill_res(_qp: &Qp<T>, _out: &mut ResAttrs<'_>) -> Result {
        kernel::build_error(kernel::error::VTABLE_DEFAULT_ERROR)
    }

    /// A user QP's `POST_SEND` command with no work requests: the provider
    /// wrote its work into send-queue memory it shares with the driver and
    /// asks the driver to take it (the doorbell of a soft provider with
    /// mapped queues, as rxe's and siw's). Without it, user QPs cannot post
    /// sends through the `POST_SEND` command.
    fn post_send_user(_qp: &Qp<T>) -> Result {
        kernel::build_error(kernel::error::VTABLE_DEFAULT_ERROR)
    }

    /// A kernel consumer posts a send work request.
    fn post_send(qp: &Qp<T>, wr: &SendWr<'_, T>) -> Result;

    /// A kernel consumer posts a receive work request.
    fn post_recv(qp: &Qp<T>, wr_id: u64, sges: &[Sge]) -> Result;

    /// The QP's timer: a [`QpTimer`] field of the driver's state, which
    /// [`Qp::arm_timer`] arms. Asked once, when the QP is created; a QP
    /// without one has `arm_timer` do nothing.
    fn qp_timer(&self) -> Option<&QpTimer<T>> {
        None
    }

    /// The QP's timer fired; runs in softirq.
    fn timer(_qp: &Qp<T>) {}
}

/// A timer in a driver's per-QP state that calls [`QpOps::timer`] on its QP:
/// the driver embeds one (`timer <- QpTimer::new()`) and names it in
/// [`QpOps::qp_timer`]; only [`Qp::arm_timer`] arms it, and the abstraction
/// shuts it down before the QP's state is dropped.
///
/// # Invariants
///
/// `owner` is null until `create_cb` stores the QP whose memory holds this
/// timer, before anything can arm it; so when the timer fires, `owner` is
/// that QP, which shuts the timer down before its state goes.
#[pin_data(PinnedDrop)]
pub(crate) struct QpTimer<T: Driver> {
    #[pin]
    timer: Timer<Self>,
    owner: core::sync::atomic::AtomicPtr<Qp<T>>,
}

impl_has_timer! { impl{T: Driver} HasTimer for QpTimer<T> { self.timer } }

impl<T: Driver> TimerCallback for QpTimer<T> {
    fn fired(this: &Self) {
        let owner = this.owner.load(core::sync::atomic::Ordering::Acquire);
        // SAFETY: Only `Qp::arm_timer` arms the timer, after `create_cb`
        // stored its QP here; the QP shuts the timer down before its state
        // is dropped or its memory freed, so it is live while this runs.
        if let Some(qp) = unsafe { owner.as_ref() } {
            <T::Qp as QpOps<T>>::timer(qp);
        }
    }
}

impl<T: Driver> QpTimer<T> {
    /// A timer with no QP yet; it does not fire until armed.
    pub(crate) fn new() -> impl PinInit<Self> {
        let init = |slot: *mut Self| {
            // SAFETY: `slot` is the pinned memory being initialised; a
            // pinned `QpTimer` stays at its address until dropped, and its
            // `drop` shuts the timer down first (the pinning guarantee keeps
            // the memory until then).
            unsafe {
                Timer::init(addr_of_mut!((*slot).timer));
                addr_of_mut!((*slot).owner)
                    .write(core::sync::atomic::AtomicPtr::new(core::ptr::null_mut()));
            }
            Ok(())
        };
        // SAFETY: The closure initialises every field, and cannot fail.
        unsafe { kernel::init::pin_init_from_closure(init) }
    }
}

#[pinned_drop]
impl<T: Driver> PinnedDrop for QpTimer<T> {
    fn drop(self: core::pin::Pin<&mut Self>) {
        self.timer().shutdown_sync();
    }
}

/// The QP transport types roxe knows (`enum ib_qp_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum QpType {
    /// Reliable connected.
    Rc,
    /// Unreliable connected.
    Uc,
    /// Unreliable datagram.
    Ud,
    /// The general services QP (QP1), used by the CM over UD.
    Gsi,
    /// XRC initiator: an RC send queue whose messages name the remote SRQ
    /// they are for; no receive side.
    XrcIni,
    /// XRC target: the responder end of an XRC connection, created by the
    /// core with no udata, PD, CQs or queues; what it receives goes to an
    /// SRQ of its XRC domain that each packet names.
    XrcTgt,
    /// Raw packet: whole Ethernet frames out of the port's netdev, and in
    /// as flow rules steer them (the core lets only `CAP_NET_RAW` make
    /// one).
    RawPacket,
}

impl QpType {
    /// Whether the QP is connected to one remote QP (RC, UC, XRC).
    pub(crate) fn is_connected(self) -> bool {
        !matches!(self, QpType::Ud | QpType::Gsi | QpType::RawPacket)
    }

    /// Whether the QP's transport is reliable (RC, XRC): acknowledged,
    /// retried, with reads and atomics.
    pub(crate) fn is_reliable(self) -> bool {
        matches!(self, QpType::Rc | QpType::XrcIni | QpType::XrcTgt)
    }

    fn from_raw(t: bindings::ib_qp_type) -> Option<Self> {
        Some(match t {
            bindings::ib_qp_type_IB_QPT_RC => QpType::Rc,
            bindings::ib_qp_type_IB_QPT_UC => QpType::Uc,
            bindings::ib_qp_type_IB_QPT_UD => QpType::Ud,
            bindings::ib_qp_type_IB_QPT_GSI => QpType::Gsi,
            bindings::ib_qp_type_IB_QPT_XRC_INI => QpType::XrcIni,
            bindings::ib_qp_type_IB_QPT_XRC_TGT => QpType::XrcTgt,
            bindings::ib_qp_type_IB_QPT_RAW_PACKET => QpType::RawPacket,
            _ => return None,
        })
    }

    fn to_raw(self) -> bindings::ib_qp_type {
        match self {
            QpType::Rc => bindings::ib_qp_type_IB_QPT_RC,
            QpType::Uc => bindings::ib_qp_type_IB_QPT_UC,
            QpType::Ud => bindings::ib_qp_type_IB_QPT_UD,
            QpType::Gsi => bindings::ib_qp_type_IB_QPT_GSI,
            QpType::XrcIni => bindings::ib_qp_type_IB_QPT_XRC_INI,
            QpType::XrcTgt => bindings::ib_qp_type_IB_QPT_XRC_TGT,
            QpType::RawPacket => bindings::ib_qp_type_IB_QPT_RAW_PACKET,
        }
    }
}

/// Queue sizes (`struct ib_qp_cap`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct QpCap {
    pub(crate) max_send_wr: u32,
    pub(crate) max_recv_wr: u32,
    pub(crate) max_send_sge: u32,
    pub(crate) max_recv_sge: u32,
    pub(crate) max_inline_data: u32,
}

impl QpCap {
    fn from_raw(c: &bindings::ib_qp_cap) -> Self {
        Self {
            max_send_wr: c.max_send_wr,
            max_recv_wr: c.max_recv_wr,
            max_send_sge: c.max_send_sge,
            max_recv_sge: c.max_recv_sge,
            max_inline_data: c.max_inline_data,
        }
    }

    fn write_to(&self, c: &mut bindings::ib_qp_cap) {
        c.max_send_wr = self.max_send_wr;
        c.max_recv_wr = self.max_recv_wr;
        c.max_send_sge = self.max_send_sge;
        c.max_recv_sge = self.max_recv_sge;
        c.max_inline_data = self.max_inline_data;
    }
}

/// Creation parameters (`struct ib_qp_init_attr`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct QpInit {
    pub(crate) qp_type: QpType,
    pub(crate) cap: QpCap,
    /// Every send WR generates a completion (`IB_SIGNAL_ALL_WR`).
    pub(crate) sq_sig_all: bool,
    /// The QP receives through an SRQ.
    pub(crate) has_srq: bool,
    /// `IB_QP_CREATE_*` flags.
    pub(crate) create_flags: u32,
    pub(crate) port: u32,
    /// An XRC target QP's domain.
    pub(crate) xrcd: Option<super::xrcd::XrcdId>,
}

/// The attribute mask bits of `ib_modify_qp` (`enum ib_qp_attr_mask`).
pub(crate) mod mask {
    use crate::bindings;
    pub(crate) const STATE: u32 = bindings::ib_qp_attr_mask_IB_QP_STATE;
    pub(crate) const CUR_STATE: u32 = bindings::ib_qp_attr_mask_IB_QP_CUR_STATE;
    pub(crate) const EN_SQD_ASYNC_NOTIFY: u32 = bindings::ib_qp_attr_mask_IB_QP_EN_SQD_ASYNC_NOTIFY;
    pub(crate) const ACCESS_FLAGS: u32 = bindings::ib_qp_attr_mask_IB_QP_ACCESS_FLAGS;
    pub(crate) const PKEY_INDEX: u32 = bindings::ib_qp_attr_mask_IB_QP_PKEY_INDEX;
    pub(crate) const PORT: u32 = bindings::ib_qp_attr_mask_IB_QP_PORT;
    pub(crate) const QKEY: u32 = bindings::ib_qp_attr_mask_IB_QP_QKEY;
    pub(crate) const AV: u32 = bindings::ib_qp_attr_mask_IB_QP_AV;
    pub(crate) const PATH_MTU: u32 = bindings::ib_qp_attr_mask_IB_QP_PATH_MTU;
    pub(crate) const TIMEOUT: u32 = bindings::ib_qp_attr_mask_IB_QP_TIMEOUT;
    pub(crate) const RETRY_CNT: u32 = bindings::ib_qp_attr_mask_IB_QP_RETRY_CNT;
    pub(crate) const RNR_RETRY: u32 = bindings::ib_qp_attr_mask_IB_QP_RNR_RETRY;
    pub(crate) const RQ_PSN: u32 = bindings::ib_qp_attr_mask_IB_QP_RQ_PSN;
    pub(crate) const MAX_QP_RD_ATOMIC: u32 = bindings::ib_qp_attr_mask_IB_QP_MAX_QP_RD_ATOMIC;
    pub(crate) const ALT_PATH: u32 = bindings::ib_qp_attr_mask_IB_QP_ALT_PATH;
    pub(crate) const MIN_RNR_TIMER: u32 = bindings::ib_qp_attr_mask_IB_QP_MIN_RNR_TIMER;
    pub(crate) const SQ_PSN: u32 = bindings::ib_qp_attr_mask_IB_QP_SQ_PSN;
    pub(crate) const MAX_DEST_RD_ATOMIC: u32 = bindings::ib_qp_attr_mask_IB_QP_MAX_DEST_RD_ATOMIC;
    pub(crate) const PATH_MIG_STATE: u32 = bindings::ib_qp_attr_mask_IB_QP_PATH_MIG_STATE;
    pub(crate) const CAP: u32 = bindings::ib_qp_attr_mask_IB_QP_CAP;
    pub(crate) const DEST_QPN: u32 = bindings::ib_qp_attr_mask_IB_QP_DEST_QPN;
    pub(crate) const RATE_LIMIT: u32 = bindings::ib_qp_attr_mask_IB_QP_RATE_LIMIT;
}

/// QP attributes (`struct ib_qp_attr`), as far as roxe keeps them.
#[derive(Clone, Copy, Debug)]
pub(crate) struct QpAttr {
    pub(crate) state: State,
    pub(crate) cur_state: Option<State>,
    pub(crate) path_mtu: u32,
    pub(crate) qkey: u32,
    pub(crate) rq_psn: u32,
    pub(crate) sq_psn: u32,
    pub(crate) dest_qp_num: u32,
    pub(crate) access_flags: u32,
    pub(crate) pkey_index: u16,
    pub(crate) port: u32,
    pub(crate) en_sqd_async_notify: bool,
    pub(crate) max_rd_atomic: u8,
    pub(crate) max_dest_rd_atomic: u8,
    pub(crate) min_rnr_timer: u8,
    pub(crate) timeout: u8,
    pub(crate) retry_cnt: u8,
    pub(crate) rnr_retry: u8,
    pub(crate) av: Option<AhAttr>,
    pub(crate) cap: QpCap,
}

impl QpAttr {
    /// # Safety
    ///
    /// `a` must be a valid `ib_qp_attr`; `ah_attr` is read only when
    /// `with_av` and must then be valid.
    unsafe fn from_raw(a: &bindings::ib_qp_attr, with_av: bool) -> Result<Self> {
        Ok(Self {
            state: State::from_raw(a.qp_state).ok_or(EINVAL)?,
            cur_state: State::from_raw(a.cur_qp_state),
            path_mtu: a.path_mtu,
            qkey: a.qkey,
            rq_psn: a.rq_psn,
            sq_psn: a.sq_psn,
            dest_qp_num: a.dest_qp_num,
            access_flags: a.qp_access_flags as u32,
            pkey_index: a.pkey_index,
            port: a.port_num,
            en_sqd_async_notify: a.en_sqd_async_notify != 0,
            max_rd_atomic: a.max_rd_atomic,
            max_dest_rd_atomic: a.max_dest_rd_atomic,
            min_rnr_timer: a.min_rnr_timer,
            timeout: a.timeout,
            retry_cnt: a.retry_cnt,
            rnr_retry: a.rnr_retry,
            av: if with_av {
                // SAFETY: Per the function's contract.
                Some(unsafe { AhAttr::from_raw(&a.ah_attr) })
            } else {
                None
            },
            cap: QpCap::from_raw(&a.cap),
        })
    }

    fn write_to(&self, a: &mut bindings::ib_qp_attr) {
        a.qp_state = self.state as u32;
        a.cur_qp_state = self.state as u32;
        a.path_mtu = self.path_mtu;
        a.qkey = self.qkey;
        a.rq_psn = self.rq_psn;
        a.sq_psn = self.sq_psn;
        a.dest_qp_num = self.dest_qp_num;
        a.qp_access_flags = self.access_flags as i32;
        a.pkey_index = self.pkey_index;
        a.port_num = self.port;
        a.en_sqd_async_notify = u8::from(self.en_sqd_async_notify);
        a.max_rd_atomic = self.max_rd_atomic;
        a.max_dest_rd_atomic = self.max_dest_rd_atomic;
        a.min_rnr_timer = self.min_rnr_timer;
        a.timeout = self.timeout;
        a.retry_cnt = self.retry_cnt;
        a.rnr_retry = self.rnr_retry;
        self.cap.write_to(&mut a.cap);
        if let Some(av) = &self.av {
            av.write_to(&mut a.ah_attr);
        }
    }
}

/// Whether the IB specification allows moving from `cur` to `next` with
/// exactly the attributes in `mask`, for a QP of type `qp_type`. This is
/// the RDMA core's own table (`ib_modify_qp_is_ok`).
pub(crate) fn transition_ok(cur: State, next: State, qp_type: QpType, mask: u32) -> bool {
    // SAFETY: A pure function of its arguments.
    unsafe { bindings::ib_modify_qp_is_ok(cur as u32, next as u32, qp_type.to_raw(), mask) }
}

/// A QP during creation: its C part is set up by the core, its driver
/// data is not yet.
///
/// # Invariants
///
/// `ib` is the `ib_qp` being created, with `device`, `pd`, the CQs and
/// `uobject` set by the core.
pub(crate) struct NewQp<'a, T: Driver> {
    ib: &'a Opaque<bindings::ib_qp>,
    _p: PhantomData<T>,
}

impl<T: Driver> NewQp<'_, T> {
    /// The device.
    pub(crate) fn device(&self) -> &Device<T> {
        // SAFETY: Set by the core before the driver is called.
        unsafe { Device::from_raw((*self.ib.get()).device) }
    }

    /// Whether the QP belongs to a user process.
    pub(crate) fn is_user(&self) -> bool {
        // SAFETY: Set by the core before the driver is called.
        unsafe { !(*self.ib.get()).uobject.is_null() }
    }

    /// Whether the QP has a send CQ.
    pub(crate) fn has_send_cq(&self) -> bool {
        // SAFETY: Set by the core before the driver is called.
        unsafe { !(*self.ib.get()).send_cq.is_null() }
    }

    /// Whether the QP has a receive CQ.
    pub(crate) fn has_recv_cq(&self) -> bool {
        // SAFETY: Set by the core before the driver is called.
        unsafe { !(*self.ib.get()).recv_cq.is_null() }
    }

    /// The indirection table of an RSS QP, which receives through it.
    pub(crate) fn ind_table(&self) -> Option<&super::wq::IndTable<T>> {
        // SAFETY: Set by the core before the driver is called, to NULL or
        // an initialised table of this device that the core holds (its
        // uobject's read lock) for the call; the driver keeps only counted
        // references to what it reads from it.
        unsafe {
            let t = (*self.ib.get()).rwq_ind_tbl;
            (!t.is_null()).then(|| super::wq::IndTable::from_raw(t))
        }
    }
}

/// A queue pair of driver `T`.
///
/// # Invariants
///
/// `ib` is a live `ib_qp` of a device of `T`, whose `pd`, `send_cq`,
/// `recv_cq` and `srq` the core keeps alive (by use counts) until the QP
/// is destroyed; `data` is initialised between create and destroy.
///
/// `timer` is null or the driver's [`QpTimer`] inside this QP's memory
/// (both checked in `create_cb`), which teardown shuts down before `data`
/// is dropped.
#[repr(C)]
pub(crate) struct Qp<T: Driver> {
    ib: Opaque<bindings::ib_qp>,
    data: T::Qp,
    timer: *const QpTimer<T>,
    upcalls: super::upcall::Upcalls,
    /// The live [`QpRef`]s to this QP. `destroy_cb` has the driver drop
    /// the ones it keeps, then waits for this to reach zero.
    users: core::sync::atomic::AtomicU32,
}

// SAFETY: The C part is written only before the QP is published
// (`create_cb`) or by the core under its own locks; what the driver shares
// is `T::Qp`, which is `Sync`, and atomics.
unsafe impl<T: Driver> Sync for Qp<T> {}

/// [`Upcalls`](super::upcall::Upcalls) bits of a QP: `IB_EVENT_QP_FATAL`
/// is due.
const UPCALL_FATAL: u32 = 1;

impl<T: Driver> Qp<T> {
    /// A counted reference to this QP, which the driver may keep (in its
    /// index of QPs by number) or hand to another context: while it lives,
    /// the QP is not freed.
    pub(crate) fn new_ref(&self) -> QpRef<T> {
        self.users
            .fetch_add(1, core::sync::atomic::Ordering::Relaxed);
        QpRef(core::ptr::NonNull::from(self))
    }

    /// Waits until no [`QpRef`] to this QP is left. Sleeps.
    fn wait_unused(&self) {
        let mut waited_ms = 0u32;
        while self.users.load(core::sync::atomic::Ordering::Acquire) != 0 {
            // SAFETY: `destroy_cb` runs in process context, where sleeping
            // is allowed.
            unsafe { bindings::msleep(1) };
            waited_ms = waited_ms.saturating_add(1);
            if waited_ms == 5000 {
                // A reference the driver keeps and never drops: say so,
                // rather than hang in silence.
                kernel::pr_warn!(
                    "QP {}: destroy waits for references still held\n",
                    self.qp_num()
                );
            }
        }
    }

    /// The driver's data.
    pub(crate) fn data(&self) -> &T::Qp {
        &self.data
    }

    /// The device.
    pub(crate) fn device(&self) -> &Device<T> {
        // SAFETY: Set by the core before the driver is called; the device
        // outlives its QPs.
        unsafe { Device::from_raw((*self.ib.get()).device) }
    }

    /// The QP number.
    pub(crate) fn qp_num(&self) -> u32 {
        // SAFETY: Written once in `create_cb` before the QP is visible.
        unsafe { (*self.ib.get()).qp_num }
    }

    /// The send CQ.
    pub(crate) fn send_cq(&self) -> Option<&Cq<T>> {
        // SAFETY: By the type invariant the CQ outlives the QP and is a CQ
        // of this device.
        unsafe {
            (*self.ib.get())
                .send_cq
                .as_ref()
                .map(|c| &*(c as *const bindings::ib_cq).cast::<Cq<T>>())
        }
    }

    /// The receive CQ.
    pub(crate) fn recv_cq(&self) -> Option<&Cq<T>> {
        // SAFETY: As for `send_cq`.
        unsafe {
            (*self.ib.get())
                .recv_cq
                .as_ref()
                .map(|c| &*(c as *const bindings::ib_cq).cast::<Cq<T>>())
        }
    }

    /// Whether the QP belongs to a user process.
    pub(crate) fn is_user(&self) -> bool {
        // SAFETY: Set by the core before the driver is called.
        unsafe { !(*self.ib.get()).uobject.is_null() }
    }

    /// Whether the QP is UD or GSI.
    fn is_datagram(&self) -> bool {
        // SAFETY: Set by the core before the driver is called.
        let t = unsafe { (*self.ib.get()).qp_type };
        t == bindings::ib_qp_type_IB_QPT_UD || t == bindings::ib_qp_type_IB_QPT_GSI
    }

    /// The raw QP, for completions that name it.
    pub(super) fn as_raw(&self) -> *mut bindings::ib_qp {
        self.ib.get()
    }

    /// The id of the QP's PD (see [`Pd::id`]).
    ///
    /// [`Pd::id`]: super::pd::Pd::id
    pub(crate) fn pd_id(&self) -> usize {
        // SAFETY: Set by the core before the driver is called; the PD
        // outlives the QP. Only the address is taken.
        unsafe { (*self.ib.get()).pd as usize }
    }

    /// The QP's SRQ, if it has one.
    pub(crate) fn srq(&self) -> Option<&super::srq::Srq<T>> {
        // SAFETY: By the type invariant the SRQ outlives the QP and is an SRQ
        // of this device.
        unsafe {
            (*self.ib.get())
                .srq
                .as_ref()
                .map(|s| &*(s as *const bindings::ib_srq).cast::<super::srq::Srq<T>>())
        }
    }

    /// The driver's timer, if it has one.
    fn qp_timer(&self) -> Option<&QpTimer<T>> {
        // SAFETY: By the type invariant, null or a timer inside this QP,
        // alive until the state is dropped (after every use of `&self`).
        unsafe { self.timer.as_ref() }
    }

    /// Starts (or restarts) the QP's timer ([`QpOps::qp_timer`]) to call
    /// [`QpOps::timer`] in `msecs` milliseconds, in softirq context. Once
    /// the QP is being destroyed, or if it has no timer, this does nothing.
    pub(crate) fn arm_timer(&self, msecs: u32) {
        if let Some(t) = self.qp_timer() {
            t.timer().arm(msecs);
        }
    }

    /// Has the driver's timer fire within `msecs` milliseconds, without
    /// putting off a sooner expiry ([`crate::sync::timer::Timer::arm_by`]).
    pub(crate) fn arm_timer_by(&self, msecs: u32) {
        if let Some(t) = self.qp_timer() {
            t.timer().arm_by(msecs);
        }
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, through the ops table of a device registered with this
    /// type, for the `attach_mcast` verb: every pointer is valid for the call and its objects
    /// belong to this driver.
    pub(super) unsafe extern "C" fn attach_mcast_cb(
        qp: *mut bindings::ib_qp,
        gid: *mut bindings::ib_gid,
        _lid: u16,
    ) -> kernel::ffi::c_int {
        // SAFETY: The core passes an initialised QP it holds, and a GID.
        let (this, gid) = unsafe { (&*qp.cast::<Self>(), (*gid).raw) };
        kernel::error::from_result(|| <T::Qp as QpOps<T>>::attach_mcast(this, &gid).map(|()| 0))
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, through the ops table of a device registered with this
    /// type, for the `detach_mcast` verb: every pointer is valid for the call and its objects
    /// belong to this driver.
    pub(super) unsafe extern "C" fn detach_mcast_cb(
        qp: *mut bindings::ib_qp,
        gid: *mut bindings::ib_gid,
        _lid: u16,
    ) -> kernel::ffi::c_int {
        // SAFETY: As in `attach_mcast_cb`.
        let (this, gid) = unsafe { (&*qp.cast::<Self>(), (*gid).raw) };
        kernel::error::from_result(|| <T::Qp as QpOps<T>>::detach_mcast(this, &gid).map(|()| 0))
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, through the ops table of a device registered with this
    /// type, for a restrack dump (`fill_res_qp_entry`): `msg` is the netlink message being
    /// built and `qp` a live QP of this driver, both valid for the call.
    pub(super) unsafe extern "C" fn fill_res_cb(
        msg: *mut bindings::sk_buff,
        qp: *mut bindings::ib_qp,
    ) -> kernel::ffi::c_int {
        // SAFETY: The core passes an initialised QP of this driver, and its
        // driver data is alive for the call: the core removes a QP from
        // restrack (`rdma_restrack_begin_del`, which waits for running
        // dumps) before it calls `destroy_qp`.
        let this = unsafe { &*qp.cast::<Self>() };
        // SAFETY: `msg` is the message under construction (see above).
        let table = unsafe { bindings::roxe_res_driver_begin(msg) };
        if table.is_null() {
            // CAST: a small positive errno constant.
            return -(kernel::bindings::EMSGSIZE as c_int);
        }
        let mut out = ResAttrs {
            msg,
            _call: PhantomData,
        };
        let r = <T::Qp as QpOps<T>>::fill_res(this, &mut out);
        // SAFETY: `table` was opened in `msg` above and nothing closed it.
        unsafe { bindings::roxe_res_driver_end(msg, table, r.is_ok()) };
        kernel::error::from_result(|| r.map(|()| 0))
    }

    /// Reports `IB_EVENT_QP_FATAL`. The event handler runs from a work
    /// item, with no driver lock held, so this may be called under any.
    pub(crate) fn report_fatal(&self) {
        self.upcalls.raise(UPCALL_FATAL);
    }

    /// # Safety
    ///
    /// Only the workqueue calls this, for the work item `create_cb` set up in
    /// the `upcalls` of a QP: `work` is that field of a live QP.
    unsafe extern "C" fn upcall_cb(work: *mut bindings::work_struct) {
        // SAFETY: Only `create_cb` sets this function up, for the `upcalls`
        // of a `Qp<T>`; the work item runs only while the QP is live
        // (`destroy_cb` cancels it first).
        let up = unsafe { super::upcall::Upcalls::from_work(work) };
        let off = core::mem::offset_of!(Self, upcalls);
        let base = (up as *const super::upcall::Upcalls).cast::<u8>();
        // SAFETY: As above: `up` is the `upcalls` field of a live `Qp<T>`.
        let this = unsafe { &*base.sub(off).cast::<Self>() };
        if up.take() & UPCALL_FATAL == 0 {
            return;
        }
        let mut ev = bindings::ib_event {
            device: this.device().as_raw(),
            event: bindings::ib_event_type_IB_EVENT_QP_FATAL,
            ..Default::default()
        };
        ev.element.qp = this.ib.get();
        // SAFETY: The QP is live; the core's handler (set at creation)
        // forwards to the consumer's.
        unsafe {
            if let Some(h) = (*this.ib.get()).event_handler {
                h(&mut ev, (*this.ib.get()).qp_context);
            }
        }
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, through the ops table of a device registered with this
    /// type, for the `create` verb: every pointer is valid for the call and its objects belong
    /// to this driver.
    pub(super) unsafe extern "C" fn create_cb(
        qp: *mut bindings::ib_qp,
        init: *mut bindings::ib_qp_init_attr,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: The core passes valid attributes.
            let ia = unsafe { &mut *init };
            let qp_type = QpType::from_raw(ia.qp_type).ok_or_else(super::errno::eopnotsupp)?;
            let qinit = QpInit {
                qp_type,
                cap: QpCap::from_raw(&ia.cap),
                sq_sig_all: ia.sq_sig_type == bindings::ib_sig_type_IB_SIGNAL_ALL_WR,
                has_srq: !ia.srq.is_null(),
                create_flags: ia.create_flags,
                port: ia.port_num,
                xrcd: if qp_type == QpType::XrcTgt {
                    // An XRC target QP cannot be made without its domain
                    // (the core looked it up and holds it).
                    Some(super::xrcd::XrcdId::from_raw(ia.xrcd).ok_or(EINVAL)?)
                } else {
                    None
                },
            };
            // SAFETY: NULL or the call's valid udata.
            let udata = unsafe { UData::from_raw(udata) };
            let this = qp.cast::<Self>();
            let new = NewQp::<T> {
                // SAFETY: The core filled the C part; `NewQp` exposes only that.
                ib: unsafe { &*qp.cast::<Opaque<bindings::ib_qp>>() },
                _p: PhantomData,
            };
            let (data, cap, qpn) = <T::Qp as QpOps<T>>::create(&new, &qinit, udata.as_ref())?;
            // SAFETY: Room for `data` (`size_ib_qp`); pinned by the core.
            // The initialiser cannot fail (`Infallible`): what `create_qp`
            // took is owned by the QP from here on.
            if let Err(never) = unsafe { data.__pinned_init(addr_of_mut!((*this).data)) } {
                match never {}
            }
            // The driver's timer, taken only if it lies inside this QP (so
            // it lives exactly as long), and told its QP before anything can
            // arm it.
            let start = this as usize;
            let end = start + core::mem::size_of::<Self>();
            // SAFETY: `data` was initialised just above.
            let named = <T::Qp as QpOps<T>>::qp_timer(unsafe { &(*this).data });
            let timer = match named {
                Some(t) if (start..end).contains(&(t as *const QpTimer<T> as usize)) => {
                    t.owner.store(this, core::sync::atomic::Ordering::Release);
                    t as *const QpTimer<T>
                }
                _ => core::ptr::null(),
            };
            // A timer elsewhere is a driver bug: creation fails below.
            let misplaced = named.is_some() && timer.is_null();
            // SAFETY: The field is ours and the QP not yet published.
            // INVARIANT: null or a timer inside this QP, owned by it.
            unsafe { addr_of_mut!((*this).timer).write(timer) };
            // SAFETY: The field is ours, pinned with the QP, and unused until
            // the QP is published below; every path that frees the QP after
            // this (`destroy_cb`, the failed insert) cancels the work first.
            unsafe { super::upcall::Upcalls::init(addr_of_mut!((*this).upcalls), Self::upcall_cb) };
            // SAFETY: The field is ours and the QP not yet published.
            unsafe { addr_of_mut!((*this).users).write(core::sync::atomic::AtomicU32::new(0)) };
            // SAFETY: The QP is not visible to anyone else yet.
            unsafe { (*qp).qp_num = qpn };
            // SAFETY: Initialised just above; the core keeps the memory until
            // `destroy_cb`, which removes the QP from the index first.
            let done = unsafe { &*this };
            if misplaced {
                kernel::pr_warn!("QP {}: the driver's timer is not in the QP\n", qpn);
                // SAFETY: As below: the core has not seen the QP.
                unsafe { Self::teardown(this) };
                return Err(EINVAL);
            }
            if let Err(e) = <T::Qp as QpOps<T>>::publish(done) {
                // SAFETY: The core has not seen the QP, and frees the memory
                // when creation fails.
                unsafe { Self::teardown(this) };
                return Err(e);
            }
            cap.write_to(&mut ia.cap);
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, through the ops table of a device registered with this
    /// type, for the `modify` verb: every pointer is valid for the call and its objects belong
    /// to this driver.
    pub(super) unsafe extern "C" fn modify_cb(
        qp: *mut bindings::ib_qp,
        attr: *mut bindings::ib_qp_attr,
        mask: c_int,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            let mask = mask as u32;
            // SAFETY: The core passes valid attributes; the AV is resolved
            // (with its source GID) whenever `IB_QP_AV` is set.
            let a = unsafe { QpAttr::from_raw(&*attr, mask & mask::AV != 0)? };
            // SAFETY: NULL or the call's valid udata.
            let udata = unsafe { UData::from_raw(udata) };
            // SAFETY: Initialised; the core holds the QP.
            let this = unsafe { &*qp.cast::<Self>() };
            <T::Qp as QpOps<T>>::modify(this, &a, mask, udata.as_ref())?;
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, through the ops table of a device registered with this
    /// type, for the `query` verb: every pointer is valid for the call and its objects belong
    /// to this driver.
    pub(super) unsafe extern "C" fn query_cb(
        qp: *mut bindings::ib_qp,
        attr: *mut bindings::ib_qp_attr,
        _mask: c_int,
        init: *mut bindings::ib_qp_init_attr,
    ) -> c_int {
        from_result(|| {
            // SAFETY: Initialised; the core holds the QP.
            let this = unsafe { &*qp.cast::<Self>() };
            let (a, sig_all) = <T::Qp as QpOps<T>>::query(this)?;
            // SAFETY: The core passes valid, exclusive out-structs.
            let (attr, init) = unsafe { (&mut *attr, &mut *init) };
            a.write_to(attr);
            a.cap.write_to(&mut init.cap);
            init.sq_sig_type = if sig_all {
                bindings::ib_sig_type_IB_SIGNAL_ALL_WR
            } else {
                bindings::ib_sig_type_IB_SIGNAL_REQ_WR
            };
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, through the ops table of a device registered with this
    /// type, for the `destroy` verb: every pointer is valid for the call and its objects belong
    /// to this driver.
    pub(super) unsafe extern "C" fn destroy_cb(
        qp: *mut bindings::ib_qp,
        _udata: *mut bindings::ib_udata,
    ) -> c_int {
        let this = qp.cast::<Self>();
        // SAFETY: Called once, for an initialised QP.
        <T::Qp as QpOps<T>>::unpublish(unsafe { &*this });
        // SAFETY: As above; the driver has dropped the references it keeps.
        unsafe { Self::teardown(this) };
        0
    }

    /// Takes down an initialised QP the driver keeps no [`QpRef`] to: waits
    /// for the timer and the references in flight, lets the driver give
    /// back what the QP holds, and drops its state.
    ///
    /// # Safety
    ///
    /// `this` is an initialised QP, used by no verb from now on (the core
    /// calls no verb of a QP it destroys, or has not been given); its
    /// memory is freed only after this returns.
    unsafe fn teardown(this: *mut Self) {
        // SAFETY: Initialised, per the contract.
        let q = unsafe { &*this };
        // Waits for a running callback and keeps the timer from being armed
        // again, so it cannot make a new reference.
        if let Some(t) = q.qp_timer() {
            t.timer().shutdown_sync();
        }
        q.wait_unused();
        <T::Qp as QpOps<T>>::destroy(q);
        // A reference `destroy` made and handed on is waited for too.
        q.wait_unused();
        // Unreachable now: an event still due is dropped, one running is
        // waited for.
        q.upcalls.cancel_sync();
        // SAFETY: No reference, timer or upcall is left, and no verb comes
        // (the contract): nothing uses the state after this.
        unsafe { core::ptr::drop_in_place(addr_of_mut!((*this).data)) };
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, through the ops table of a device registered with this
    /// type, for the `post_send` verb: every pointer is valid for the call and its objects
    /// belong to this driver.
    pub(super) unsafe extern "C" fn post_send_cb(
        qp: *mut bindings::ib_qp,
        wr: *const bindings::ib_send_wr,
        bad: *mut *const bindings::ib_send_wr,
    ) -> c_int {
        // SAFETY: Initialised; the core holds the QP.
        let this = unsafe { &*qp.cast::<Self>() };
        if <T::Qp as QpOps<T>>::HAS_POST_SEND_USER && wr.is_null() && this.is_user() {
            // The provider's doorbell: work is in the mapped send queue.
            return match <T::Qp as QpOps<T>>::post_send_user(this) {
                Ok(()) => 0,
                Err(e) => e.to_errno(),
            };
        }
        if this.is_user() {
            // User QPs post through their rings only; work requests through
            // the write command are not offered.
            if !bad.is_null() {
                // SAFETY: `bad` is the caller's out-pointer.
                unsafe { *bad = wr };
            }
            return super::errno::eopnotsupp().to_errno();
        }
        let mut cur = wr;
        while !cur.is_null() {
            // SAFETY: A kernel consumer's chain of valid work requests, each
            // embedded in the container its opcode names (the verbs
            // contract), alive for the duration of this call.
            let res = unsafe { SendWr::<T>::from_raw(cur) }.and_then(|mut w| {
                if this.is_datagram() {
                    // SAFETY: On UD and GSI QPs, work requests are `ib_ud_wr`s.
                    unsafe { w.read_ud(cur) };
                }
                <T::Qp as QpOps<T>>::post_send(this, &w)
            });
            if let Err(e) = res {
                if !bad.is_null() {
                    // SAFETY: `bad` is the caller's out-pointer.
                    unsafe { *bad = cur };
                }
                return e.to_errno();
            }
            // SAFETY: As above.
            cur = unsafe { (*cur).next };
        }
        0
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, through the ops table of a device registered with this
    /// type, for the `post_recv` verb: every pointer is valid for the call and its objects
    /// belong to this driver.
    pub(super) unsafe extern "C" fn post_recv_cb(
        qp: *mut bindings::ib_qp,
        wr: *const bindings::ib_recv_wr,
        bad: *mut *const bindings::ib_recv_wr,
    ) -> c_int {
        // SAFETY: Initialised; the core holds the QP.
        let this = unsafe { &*qp.cast::<Self>() };
        // SAFETY: The core passes a kernel consumer's chain and out-pointer.
        unsafe {
            post_recv_chain(wr, bad, |wr_id, sges| {
                <T::Qp as QpOps<T>>::post_recv(this, wr_id, sges)
            })
        }
    }
}

/// Posts a kernel consumer's chain of receive requests one by one with
/// `post(wr_id, sges)`; on the first failure stores that request in `*bad`
/// and returns the errno.
///
/// # Safety
///
/// `wr` is NULL or a valid chain of receive requests whose `sg_list`s hold
/// `num_sge` entries; `bad` is NULL or writable.
pub(super) unsafe fn post_recv_chain(
    wr: *const bindings::ib_recv_wr,
    bad: *mut *const bindings::ib_recv_wr,
    mut post: impl FnMut(u64, &[Sge]) -> Result,
) -> c_int {
    let mut cur = wr;
    while !cur.is_null() {
        // SAFETY: Per the contract.
        let w = unsafe { &*cur };
        // SAFETY: `sg_list` holds `num_sge` entries (the contract).
        let res = unsafe { sges(w.sg_list, w.num_sge) }
            // SAFETY: Kernel receives set `wr_id` (or `wr_cqe`, the same bits).
            .and_then(|(n, list)| post(unsafe { w.__bindgen_anon_1.wr_id }, &list[..n]));
        if let Err(e) = res {
            if !bad.is_null() {
                // SAFETY: `bad` is the caller's out-pointer.
                unsafe { *bad = cur };
            }
            return e.to_errno();
        }
        cur = w.next;
    }
    0
}

/// A scatter/gather element of a kernel work request (`struct ib_sge`): a
/// range of a memory region, named by its lkey.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Sge {
    pub(crate) addr: u64,
    pub(crate) length: u32,
    pub(crate) lkey: u32,
}

/// Copies a kernel consumer's SGE list (at most `MAX_SGE` entries).
///
/// # Safety
///
/// `list` must point to `n` valid `ib_sge`s when `n > 0`.
unsafe fn sges(list: *const bindings::ib_sge, n: c_int) -> Result<(usize, [Sge; MAX_SGE])> {
    let n = usize::try_from(n).map_err(|_| EINVAL)?;
    if n > MAX_SGE {
        return Err(EINVAL);
    }
    let mut out = [Sge::default(); MAX_SGE];
    for (i, o) in out.iter_mut().enumerate().take(n) {
        // SAFETY: `i < n`, within the caller's list.
        let s = unsafe { &*list.add(i) };
        *o = Sge {
            addr: s.addr,
            length: s.length,
            lkey: s.lkey,
        };
    }
    Ok((n, out))
}

/// The most SGEs a kernel work request may carry.
const MAX_SGE: usize = crate::proto::wr::MAX_SGE as usize;

/// A kernel consumer's send work request.
pub(crate) struct SendWr<'a, T: Driver> {
    pub(crate) wr_id: u64,
    /// `enum ib_wr_opcode`; the common ones equal `IBV_WR_*`.
    pub(crate) opcode: u32,
    /// `IB_SEND_*` (equal to `IBV_SEND_*`).
    pub(crate) send_flags: u32,
    /// Immediate data as sent (big-endian bits), or the rkey to invalidate.
    pub(crate) imm_data: u32,
    sge_list: [Sge; MAX_SGE],
    num_sge: usize,
    /// RDMA and atomics: the remote address. `IB_WR_REG_MR`: the MR's
    /// first byte.
    pub(crate) remote_addr: u64,
    /// RDMA and atomics: the remote key. `IB_WR_REG_MR`: the new key.
    pub(crate) rkey: u32,
    /// Atomics: the compare or add operand. `IB_WR_REG_MR`: the length.
    pub(crate) compare_add: u64,
    /// Atomics: the swap operand. `IB_WR_REG_MR`: the access rights.
    pub(crate) swap: u64,
    /// UD: the address handle.
    pub(crate) ah: Option<&'a super::ah::Ah<T>>,
    pub(crate) remote_qpn: u32,
    pub(crate) remote_qkey: u32,
}

impl<T: Driver> SendWr<'_, T> {
    /// Reads a work request.
    ///
    /// # Safety
    ///
    /// `wr` must be a valid kernel send work request, embedded in the
    /// container its opcode and the QP type imply, living for `'a`.
    unsafe fn from_raw<'a>(wr: *const bindings::ib_send_wr) -> Result<SendWr<'a, T>> {
        // SAFETY: Per the contract.
        let w = unsafe { &*wr };
        // SAFETY: Per the contract.
        let (num_sge, sge_list) = unsafe { sges(w.sg_list, w.num_sge)? };
        let mut out = SendWr {
            // SAFETY: Either union member is plain bits.
            wr_id: unsafe { w.__bindgen_anon_1.wr_id },
            opcode: w.opcode,
            // CAST: flag bits, which mean what the user ABI's do (`SEND_FLAG_BITS_MATCH`).
            send_flags: w.send_flags as u32,
            // SAFETY: Either union member is plain bits.
            imm_data: unsafe { w.ex.imm_data },
            sge_list,
            num_sge,
            remote_addr: 0,
            rkey: 0,
            compare_add: 0,
            swap: 0,
            ah: None,
            remote_qpn: 0,
            remote_qkey: 0,
        };
        match w.opcode {
            bindings::ib_wr_opcode_IB_WR_RDMA_WRITE
            | bindings::ib_wr_opcode_IB_WR_RDMA_WRITE_WITH_IMM
            | bindings::ib_wr_opcode_IB_WR_RDMA_READ => {
                // SAFETY: RDMA opcodes come in an `ib_rdma_wr`.
                let r = unsafe { &*wr.cast::<bindings::ib_rdma_wr>() };
                out.remote_addr = r.remote_addr;
                out.rkey = r.rkey;
            }
            bindings::ib_wr_opcode_IB_WR_ATOMIC_CMP_AND_SWP
            | bindings::ib_wr_opcode_IB_WR_ATOMIC_FETCH_AND_ADD => {
                // SAFETY: Atomic opcodes come in an `ib_atomic_wr`.
                let a = unsafe { &*wr.cast::<bindings::ib_atomic_wr>() };
                out.remote_addr = a.remote_addr;
                out.rkey = a.rkey;
                out.compare_add = a.compare_add;
                out.swap = a.swap;
            }
            bindings::ib_wr_opcode_IB_WR_REG_MR => {
                // SAFETY: `IB_WR_REG_MR` comes in an `ib_reg_wr`, naming an
                // MR of this device that `ib_map_mr_sg` mapped, which set
                // its `iova` and `length`.
                let (r, iova, length) = unsafe {
                    let r = &*wr.cast::<bindings::ib_reg_wr>();
                    (r, (*r.mr).iova, (*r.mr).length)
                };
                out.rkey = r.key;
                out.remote_addr = iova;
                out.compare_add = length;
                // CAST: flag bits.
                out.swap = u64::from(r.access as u32);
            }
            _ => {}
        }
        Ok(out)
    }

    /// Fills in the UD part.
    ///
    /// # Safety
    ///
    /// `wr` must be embedded in an `ib_ud_wr` (it is on a UD or GSI QP).
    unsafe fn read_ud(&mut self, wr: *const bindings::ib_send_wr) {
        // SAFETY: Per the contract.
        let u = unsafe { &*wr.cast::<bindings::ib_ud_wr>() };
        // SAFETY: A UD work request names a live AH of this device.
        self.ah = unsafe { u.ah.cast::<super::ah::Ah<T>>().as_ref() };
        self.remote_qpn = u.remote_qpn;
        self.remote_qkey = u.remote_qkey;
    }

    /// The SGEs.
    pub(crate) fn sges(&self) -> &[Sge] {
        &self.sge_list[..self.num_sge]
    }
}

/// A counted reference to a QP ([`Qp::new_ref`]): the driver keeps these
/// in its index of QPs by number and clones them out for the data path, as
/// it would an `Arc`. The QP's destruction waits until none is left.
///
/// # Invariants
///
/// The pointer is a live, initialised `Qp<T>`, whose `users` counts this
/// reference: `destroy_cb` does not drop or free the QP while `users` is
/// above zero.
pub(crate) struct QpRef<T: Driver>(core::ptr::NonNull<Qp<T>>);

// SAFETY: `Qp<T>` is `Sync` (its data is `Send + Sync` and the C part is
// used under the core's rules), and the count is atomic, so a reference may
// be used and dropped on any thread.
unsafe impl<T: Driver> Send for QpRef<T> {}
// SAFETY: As above.
unsafe impl<T: Driver> Sync for QpRef<T> {}

impl<T: Driver> core::ops::Deref for QpRef<T> {
    type Target = Qp<T>;

    fn deref(&self) -> &Qp<T> {
        // SAFETY: By the type invariant the QP is live while this exists.
        unsafe { self.0.as_ref() }
    }
}

impl<T: Driver> Clone for QpRef<T> {
    fn clone(&self) -> Self {
        self.new_ref()
    }
}

impl<T: Driver> Drop for QpRef<T> {
    fn drop(&mut self) {
        // The release pairs with `wait_unused`'s acquire: what this user
        // did happens before the QP is dropped.
        self.users
            .fetch_sub(1, core::sync::atomic::Ordering::Release);
    }
}

/// A kernel work request's `send_flags` reach the data path unchanged, read
/// with the user ABI's meaning: the bits it uses are the same in both.
// CAST: small positive constants.
const SEND_FLAG_BITS_MATCH: () = {
    use crate::uapi::send_flags;
    assert!(bindings::ib_send_flags_IB_SEND_FENCE as u32 == send_flags::FENCE);
    assert!(bindings::ib_send_flags_IB_SEND_SIGNALED as u32 == send_flags::SIGNALED);
    assert!(bindings::ib_send_flags_IB_SEND_SOLICITED as u32 == send_flags::SOLICITED);
    assert!(bindings::ib_send_flags_IB_SEND_INLINE as u32 == send_flags::INLINE);
};
const _: () = SEND_FLAG_BITS_MATCH;

/// The netlink message of a restrack dump, for [`QpOps::fill_res`]: the
/// driver's attributes go in as named values, inside the driver table the
/// trampoline opens and closes around the call.
pub(crate) struct ResAttrs<'a> {
    msg: *mut bindings::sk_buff,
    _call: PhantomData<&'a mut bindings::sk_buff>,
}

impl ResAttrs<'_> {
    /// Adds the attribute `name` with value `v`; the core's error
    /// (`EMSGSIZE`) if the message is full.
    pub(crate) fn put_u64(&mut self, name: &kernel::str::CStr, v: u64) -> Result {
        // SAFETY: `msg` is the message the core handed to this call, and
        // `name` a NUL-terminated string that outlives it.
        let r = unsafe { bindings::rdma_nl_put_driver_u64(self.msg, name.as_char_ptr(), v) };
        if r != 0 {
            return Err(kernel::error::Error::from_errno(r));
        }
        Ok(())
    }
}
