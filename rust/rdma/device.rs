// SPDX-License-Identifier: GPL-2.0

//! RDMA devices (`struct ib_device`).
//!
//! A driver describes itself with [`Driver`]. [`NewDevice`] allocates the C
//! device with the driver's data placed right after it, the way
//! `ib_alloc_device()` expects, and [`NewDevice::register`] hands it to the
//! RDMA core. From then on the core owns the device: it calls back through
//! the `ib_device_ops` built here, and it frees the device after
//! unregistration, dropping the driver data in `dealloc_driver`.

use super::ah::{Ah, AhOps};
use super::attr::{DeviceAttr, PortAttr, PortImmutable};
use super::cq::{Cq, CqOps};
use super::mr::{Mr, MrOps};
use super::mw::{Mw, MwOps};
use super::pd::{Pd, PdOps};
use super::qp::{Qp, QpOps};
use super::srq::{Srq, SrqOps};
use super::sysfs::{Buffer, MAX_ATTRS};
use super::udata::UData;
use crate::bindings;
use crate::net::NetDevice;
use core::marker::PhantomData;
use core::mem::{offset_of, size_of, MaybeUninit};
use core::ptr::{addr_of_mut, NonNull};
use kernel::error::{code::*, from_result, Error, Result};
use kernel::ffi::{c_char, c_int};
use kernel::init::PinInit;
use kernel::macros::vtable;
use kernel::str::CStr;
use kernel::types::{ARef, AlwaysRefCounted, Opaque};
use kernel::ThisModule;

/// A driver identifier from `enum rdma_driver_id`.
pub(crate) type DriverId = bindings::rdma_driver_id;

/// `RDMA_DRIVER_UNKNOWN`: the kernel's enum has no entry for out-of-tree drivers.
pub(crate) const DRIVER_ID_UNKNOWN: DriverId = bindings::rdma_driver_id_RDMA_DRIVER_UNKNOWN;

/// An RDMA device driver: the device's own verbs here, and each object's
/// verbs in the ops trait of its state type ([`PdOps`], [`CqOps`],
/// [`MrOps`], [`AhOps`], [`QpOps`], [`SrqOps`], [`MwOps`]).
///
/// These are `#[vtable]` traits: the verbs with a default body are
/// optional, and `HAS_<VERB>` (generated) says whether the driver has one.
/// The ops table ([`Device::OPS`]) offers the core only the verbs a driver
/// has; a default body is never called (it fails the build if it could
/// be).
#[vtable]
pub(crate) trait Driver: Sized + Send + Sync + 'static {
    /// Per-device state, stored in the same allocation as `struct ib_device`.
    type Data: Send + Sync;

    /// The driver's `rdma_driver_id`, which user space sees over netlink.
    const DRIVER_ID: DriverId;

    /// The uverbs ABI version the user-space provider checks.
    const UVERBS_ABI_VER: u32;

    /// Names of the read-only sysfs attributes shown by [`Driver::show_attr`].
    const ATTRS: &'static [&'static CStr];

    /// Reports device attributes.
    fn query_device(dev: &Device<Self>) -> Result<DeviceAttr>;

    /// Reports the attributes of `port` (1-based).
    fn query_port(dev: &Device<Self>, port: u32) -> Result<PortAttr>;

    /// Reports the properties of `port` that never change.
    fn port_immutable(dev: &Device<Self>, port: u32) -> Result<PortImmutable>;

    /// Returns the P_Key at `index` of `port`.
    fn query_pkey(dev: &Device<Self>, port: u32, index: u16) -> Result<u16>;

    /// Writes the value of attribute `ATTRS[index]`.
    fn show_attr(dev: &Device<Self>, index: usize, out: &mut Buffer<'_>) -> Result;

    /// Per-PD state, and its verbs.
    type Pd: PdOps<Self>;

    /// Per-CQ state (dropped when the CQ is destroyed), and its verbs.
    type Cq: CqOps<Self>;

    /// Per-MR state (dropped after a successful `dereg_mr`), and its verbs.
    type Mr: MrOps<Self>;

    /// Per-AH state, and its verbs.
    type Ah: AhOps<Self>;

    /// Per-QP state (dropped when the QP is destroyed), and its verbs.
    type Qp: QpOps<Self>;

    /// Per-SRQ state (dropped when the SRQ is destroyed), and its verbs.
    type Srq: SrqOps<Self>;

    /// Per-MW state, and its verbs (none: [`NoMw`]).
    type Mw: MwOps<Self>;

    /// Per-flow state (`ibv_create_flow`), whose drop stops the steering.
    type Flow: super::flow::FlowOps<Self>;

    /// Per-WQ state of receive work queues (`ibv_create_wq`).
    type Wq: super::wq::WqOps<Self>;

    /// Per-table state of receive WQ indirection tables, which RSS QPs
    /// receive through.
    type IndTable: super::wq::IndTableOps<Self>;

    /// Allocates an XRC domain (the core shares it between processes; see
    /// [`xrcd`](super::xrcd)). A driver that has it offers XRC: XRC SRQs
    /// and XRC initiator and target QPs.
    fn alloc_xrcd(_dev: &Device<Self>, _udata: Option<&UData<'_>>) -> Result {
        kernel::build_error(kernel::error::VTABLE_DEFAULT_ERROR)
    }

    /// Releases an XRC domain that nothing uses any more.
    fn dealloc_xrcd(_dev: &Device<Self>) {
        kernel::build_error(kernel::error::VTABLE_DEFAULT_ERROR)
    }

    /// Names of the per-port counters the core shows in sysfs
    /// (`ports/N/hw_counters`) and `rdma statistic`.
    const HW_COUNTERS: &'static [&'static CStr] = &[];

    /// Reads the counters named by `HW_COUNTERS`, in that order.
    fn hw_counters(_dev: &Device<Self>, _out: &mut [u64]) {
        kernel::build_error(kernel::error::VTABLE_DEFAULT_ERROR)
    }

    /// Looks at `mad`, a MAD for `port` that arrived on QP1 or that the
    /// core built itself (the PMA's sysfs files), and writes a reply to
    /// `out` if the driver answers it. Returns whether it did; a MAD it
    /// leaves goes on to the core's agents.
    fn process_mad(
        _dev: &Device<Self>,
        _port: u32,
        _mad: &[u8; MAD_LEN],
        _out: &mut [u8; MAD_LEN],
    ) -> bool {
        kernel::build_error(kernel::error::VTABLE_DEFAULT_ERROR)
    }
}

/// The size of an IB MAD (`struct ib_mad`), the only size roxe takes.
pub(crate) const MAD_LEN: usize = 256;
const _: () = assert!(size_of::<bindings::ib_mad>() == MAD_LEN);

impl<T: Driver> Device<T> {
    /// The verbs of driver `T` for the RDMA core: every callback of the
    /// abstraction, the optional ones only where the driver has the verb
    /// (`Driver::HAS_*`). [`NewDevice::new`] copies it and adds what only a
    /// live device knows (the module, the sysfs group);
    /// `ib_set_device_ops` copies it again into the device.
    pub(crate) const OPS: bindings::ib_device_ops = {
        // SAFETY: All-zero is a valid `ib_device_ops`: every field is an
        // integer, a NULL pointer or `None`.
        let mut ops: bindings::ib_device_ops = unsafe { MaybeUninit::zeroed().assume_init() };
        ops.driver_id = T::DRIVER_ID;
        ops.uverbs_abi_ver = T::UVERBS_ABI_VER;
        ops.query_device = Some(Self::query_device_cb);
        ops.query_port = Some(Self::query_port_cb);
        ops.get_port_immutable = Some(Self::get_port_immutable_cb);
        ops.get_link_layer = Some(Self::get_link_layer_cb);
        ops.query_pkey = Some(Self::query_pkey_cb);
        ops.alloc_ucontext = Some(Self::alloc_ucontext_cb);
        ops.dealloc_ucontext = Some(Self::dealloc_ucontext_cb);
        ops.query_ucontext = Some(Self::query_ucontext_cb);
        ops.dealloc_driver = Some(Self::dealloc_driver_cb);
        ops.disassociate_ucontext = Some(Self::disassociate_ucontext_cb);
        ops.size_ib_ucontext = size_of::<bindings::ib_ucontext>();
        ops.mmap = Some(super::shared::mmap_cb);
        ops.mmap_free = Some(super::shared::mmap_free_cb);
        ops.alloc_pd = Some(Pd::<T>::alloc_cb);
        ops.dealloc_pd = Some(Pd::<T>::dealloc_cb);
        ops.size_ib_pd = size_of::<Pd<T>>();
        ops.create_cq = Some(Cq::<T>::create_cb);
        ops.destroy_cq = Some(Cq::<T>::destroy_cb);
        if <T::Cq as CqOps<T>>::HAS_RESIZE {
            ops.resize_cq = Some(Cq::<T>::resize_cb);
        }
        ops.req_notify_cq = Some(Cq::<T>::req_notify_cb);
        ops.size_ib_cq = size_of::<Cq<T>>();
        if <T::Mr as MrOps<T>>::HAS_GET_DMA {
            ops.get_dma_mr = Some(Mr::<T>::get_dma_cb);
        }
        ops.reg_user_mr = Some(Mr::<T>::reg_user_cb);
        ops.dereg_mr = Some(Mr::<T>::dereg_cb);
        if <T::Mr as MrOps<T>>::HAS_REG_DMABUF {
            ops.reg_user_mr_dmabuf = Some(Mr::<T>::reg_dmabuf_cb);
        }
        if <T::Mr as MrOps<T>>::HAS_REREG_USER {
            ops.rereg_user_mr = Some(Mr::<T>::rereg_user_cb);
        }
        if <T::Mr as MrOps<T>>::HAS_ALLOC {
            ops.alloc_mr = Some(Mr::<T>::alloc_cb);
            ops.map_mr_sg = Some(Mr::<T>::map_mr_sg_cb);
        }
        if <T::Mr as MrOps<T>>::HAS_ADVISE {
            ops.advise_mr = Some(Mr::<T>::advise_cb);
        }
        ops.create_ah = Some(Ah::<T>::create_cb);
        ops.create_user_ah = Some(Ah::<T>::create_cb);
        ops.destroy_ah = Some(Ah::<T>::destroy_cb);
        ops.query_ah = Some(Ah::<T>::query_cb);
        ops.size_ib_ah = size_of::<Ah<T>>();
        ops.create_qp = Some(Qp::<T>::create_cb);
        ops.modify_qp = Some(Qp::<T>::modify_cb);
        ops.query_qp = Some(Qp::<T>::query_cb);
        ops.destroy_qp = Some(Qp::<T>::destroy_cb);
        ops.post_send = Some(Qp::<T>::post_send_cb);
        ops.post_recv = Some(Qp::<T>::post_recv_cb);
        if <T::Qp as QpOps<T>>::HAS_ATTACH_MCAST {
            ops.attach_mcast = Some(Qp::<T>::attach_mcast_cb);
            ops.detach_mcast = Some(Qp::<T>::detach_mcast_cb);
        }
        if <T::Qp as QpOps<T>>::HAS_FILL_RES {
            ops.fill_res_qp_entry = Some(Qp::<T>::fill_res_cb);
        }
        if T::HAS_HW_COUNTERS && !T::HW_COUNTERS.is_empty() {
            ops.alloc_hw_port_stats = Some(Self::alloc_hw_port_stats_cb);
            ops.get_hw_stats = Some(Self::get_hw_stats_cb);
        }
        if T::HAS_PROCESS_MAD {
            ops.process_mad = Some(Self::process_mad_cb);
        }
        ops.poll_cq = Some(Cq::<T>::poll_cb);
        ops.size_ib_qp = size_of::<Qp<T>>();
        ops.create_srq = Some(Srq::<T>::create_cb);
        ops.modify_srq = Some(Srq::<T>::modify_cb);
        ops.query_srq = Some(Srq::<T>::query_cb);
        ops.destroy_srq = Some(Srq::<T>::destroy_cb);
        ops.post_srq_recv = Some(Srq::<T>::post_recv_cb);
        ops.size_ib_srq = size_of::<Srq<T>>();
        if <T::Flow as super::flow::FlowOps<T>>::HAS_CREATE {
            ops.create_flow = Some(super::flow::create_cb::<T>);
            ops.destroy_flow = Some(super::flow::destroy_cb::<T>);
        }
        if <T::Wq as super::wq::WqOps<T>>::HAS_CREATE {
            ops.create_wq = Some(super::wq::create_cb::<T>);
            ops.modify_wq = Some(super::wq::modify_cb::<T>);
            ops.destroy_wq = Some(super::wq::destroy_cb::<T>);
        }
        if <T::IndTable as super::wq::IndTableOps<T>>::HAS_CREATE {
            ops.create_rwq_ind_table = Some(super::wq::create_ind_cb::<T>);
            ops.destroy_rwq_ind_table = Some(super::wq::destroy_ind_cb::<T>);
            ops.size_ib_rwq_ind_table = size_of::<super::wq::IndTable<T>>();
        }
        if T::HAS_ALLOC_XRCD {
            ops.alloc_xrcd = Some(super::xrcd::alloc_cb::<T>);
            ops.dealloc_xrcd = Some(super::xrcd::dealloc_cb::<T>);
            ops.size_ib_xrcd = size_of::<bindings::ib_xrcd>();
        }
        if <T::Mw as MwOps<T>>::HAS_ALLOC {
            ops.alloc_mw = Some(Mw::<T>::alloc_cb);
            ops.dealloc_mw = Some(Mw::<T>::dealloc_cb);
        }
        ops.size_ib_mw = size_of::<Mw<T>>();
        ops
    };
}

/// Fixed identity of a new device.
pub(crate) struct DeviceInfo<'a> {
    /// Node description, shown as `node_desc` (truncated to 63 bytes).
    pub(crate) node_desc: &'a CStr,
    /// Node GUID, big-endian.
    pub(crate) node_guid: [u8; 8],
    /// Number of ports.
    pub(crate) phys_port_cnt: u32,
    /// Number of completion vectors.
    pub(crate) num_comp_vectors: u32,
}

/// The sysfs attribute group of one device.
#[repr(C)]
struct SysfsGroup {
    attrs: [Opaque<bindings::device_attribute>; MAX_ATTRS],
    ptrs: Opaque<[*mut bindings::attribute; MAX_ATTRS + 1]>,
    group: Opaque<bindings::attribute_group>,
}

/// An RDMA device of driver `T`.
///
/// # Invariants
///
/// `ib` is a `struct ib_device` allocated by `_ib_alloc_device` with the
/// size of `Self`, whose ops were set by [`NewDevice::new`] for `T`, and
/// `data` is initialised until `dealloc_driver` (or [`NewDevice`]'s drop)
/// drops it. References to a `Device` exist only while the device is
/// allocated: in a core callback, through [`ARef`], or inside [`NewDevice`].
#[repr(C)]
pub(crate) struct Device<T: Driver> {
    ib: Opaque<bindings::ib_device>,
    sysfs: SysfsGroup,
    /// Descriptors of `T::HW_COUNTERS`, which the core's counter structs
    /// point at; they live as long as the device.
    stat_descs: [bindings::rdma_stat_desc; MAX_HW_COUNTERS],
    data: T::Data,
}

/// The most hardware counters a driver may name.
const MAX_HW_COUNTERS: usize = 64;

// SAFETY: The RDMA core lets any thread use a device it holds a reference
// on; the driver data is `Send + Sync`.
unsafe impl<T: Driver> Send for Device<T> {}
// SAFETY: See `Send`.
unsafe impl<T: Driver> Sync for Device<T> {}

// SAFETY: `ib_device_put` and the `refcount` field manage the lifetime of
// registered devices; the memory stays valid while the count is non-zero.
unsafe impl<T: Driver> AlwaysRefCounted for Device<T> {
    fn inc_ref(&self) {
        // SAFETY: `self` is valid and already holds a reference, so the
        // count is non-zero.
        unsafe { bindings::roxe_ib_device_get(self.as_raw()) };
    }

    unsafe fn dec_ref(obj: NonNull<Self>) {
        // SAFETY: The caller owns one reference.
        unsafe { bindings::ib_device_put(obj.cast::<bindings::ib_device>().as_ptr()) };
    }
}

/// The port event to report with [`Device::dispatch_port_event`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PortEvent {
    /// `IB_EVENT_PORT_ACTIVE`.
    Active,
    /// `IB_EVENT_PORT_ERR`.
    Error,
}

impl<T: Driver> Device<T> {
    // The C allocator aligns to `ARCH_KMALLOC_MINALIGN` (8 on x86-64).
    const ALIGN_OK: () = assert!(core::mem::align_of::<Self>() <= 8);
    // A driver with more attributes or counters than there is room for
    // does not build.
    const TABLES_FIT: () =
        assert!(T::ATTRS.len() <= MAX_ATTRS && T::HW_COUNTERS.len() <= MAX_HW_COUNTERS);

    pub(super) fn as_raw(&self) -> *mut bindings::ib_device {
        self.ib.get()
    }

    /// # Safety
    ///
    /// `ib` must be a device of driver `T` (its ops were set by
    /// [`NewDevice::new`]) that stays allocated for `'a`, with `data` initialised.
    pub(super) unsafe fn from_raw<'a>(ib: *mut bindings::ib_device) -> &'a Self {
        // SAFETY: `ib` is the first field of the `#[repr(C)]` `Device<T>`
        // that `NewDevice::new` allocated, per the caller's guarantee.
        unsafe { &*ib.cast::<Self>() }
    }

    /// The driver's per-device data.
    pub(crate) fn data(&self) -> &T::Data {
        &self.data
    }

    /// The device name, such as `roxe0`.
    pub(crate) fn name(&self) -> &CStr {
        // SAFETY: `name` is a NUL-terminated array of the valid device.
        unsafe { CStr::from_char_ptr((*self.as_raw()).name.as_ptr()) }
    }

    /// The netdev bound to `port`, with a reference held.
    pub(crate) fn netdev(&self, port: u32) -> Option<ARef<NetDevice>> {
        // SAFETY: The device is valid; the call returns NULL or a netdev
        // with a reference taken for us.
        let raw = unsafe { bindings::ib_device_get_netdev(self.as_raw(), port) };
        // SAFETY: A non-NULL result carries one reference that we own.
        NonNull::new(raw).map(|p| unsafe { ARef::from_raw(p.cast::<NetDevice>()) })
    }

    /// Speed and width of `port`, as the RDMA core derives them from the
    /// netdev's ethtool link settings.
    pub(crate) fn eth_speed(&self, port: u32) -> Result<(u16, u8)> {
        let mut speed = 0u16;
        let mut width = 0u8;
        // SAFETY: The device is valid and the out-pointers are live locals.
        kernel::error::to_result(unsafe {
            bindings::ib_get_eth_speed(self.as_raw(), port, &mut speed, &mut width)
        })?;
        Ok((speed, width))
    }

    /// Reports a port state change to the RDMA core and its clients.
    pub(crate) fn dispatch_port_event(&self, port: u32, event: PortEvent) {
        let mut ev = bindings::ib_event {
            device: self.as_raw(),
            event: match event {
                PortEvent::Active => bindings::ib_event_type_IB_EVENT_PORT_ACTIVE,
                PortEvent::Error => bindings::ib_event_type_IB_EVENT_PORT_ERR,
            },
            ..Default::default()
        };
        ev.element.port_num = port;
        // SAFETY: `ev` is a fully initialised event for a valid device.
        unsafe { bindings::ib_dispatch_event(&ev) };
    }

    /// Starts unregistering the device from a workqueue. Safe to call from
    /// netdev notifiers, where RTNL is held, and more than once.
    pub(crate) fn unregister_queued(&self) {
        // SAFETY: The device is valid and registered with a
        // `dealloc_driver`, as the call requires.
        unsafe { bindings::ib_unregister_device_queued(self.as_raw()) };
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, through the ops table of a device registered with this
    /// type, for the `alloc_hw_port_stats` verb: every pointer is valid for the call and its
    /// objects belong to this driver.
    unsafe extern "C" fn alloc_hw_port_stats_cb(
        ib: *mut bindings::ib_device,
        _port: u32,
    ) -> *mut bindings::rdma_hw_stats {
        // SAFETY: The core calls this for a device of ours.
        let this = unsafe { Self::from_raw(ib) };
        // CAST: at most MAX_HW_COUNTERS.
        let n = T::HW_COUNTERS.len() as c_int;
        // SAFETY: The descriptors live as long as the device, which
        // outlives the stats the core allocates for it.
        unsafe {
            bindings::rdma_alloc_hw_stats_struct(
                this.stat_descs.as_ptr(),
                n,
                // CAST: a small constant.
                bindings::RDMA_HW_STATS_DEFAULT_LIFESPAN as kernel::ffi::c_ulong,
            )
        }
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, through the ops table of a device registered with this
    /// type, for the `get_hw_stats` verb: every pointer is valid for the call and its objects
    /// belong to this driver.
    unsafe extern "C" fn get_hw_stats_cb(
        ib: *mut bindings::ib_device,
        stats: *mut bindings::rdma_hw_stats,
        _port: u32,
        _index: c_int,
    ) -> c_int {
        // SAFETY: The core calls this for a device of ours.
        let this = unsafe { Self::from_raw(ib) };
        let n = T::HW_COUNTERS.len();
        let mut vals = [0u64; MAX_HW_COUNTERS];
        T::hw_counters(this, &mut vals[..n]);
        // SAFETY: `stats` came from `alloc_hw_port_stats_cb`, with room for
        // `n` values; the core holds its lock.
        unsafe {
            let out = (*stats).value.as_mut_ptr();
            for (i, v) in vals[..n].iter().enumerate() {
                out.add(i).write(*v);
            }
        }
        // CAST: at most MAX_HW_COUNTERS.
        n as c_int
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, through the ops table of a device registered with this
    /// type, for the `process_mad` verb: `in_mad` points to a MAD of at least `MAD_LEN` bytes,
    /// and `out_mad` to a separate buffer of `*out_mad_size` bytes, both valid for the call.
    unsafe extern "C" fn process_mad_cb(
        ib: *mut bindings::ib_device,
        _flags: c_int,
        port: u32,
        _in_wc: *const bindings::ib_wc,
        _in_grh: *const bindings::ib_grh,
        in_mad: *const bindings::ib_mad,
        out_mad: *mut bindings::ib_mad,
        out_mad_size: *mut usize,
        _out_mad_pkey_index: *mut u16,
    ) -> c_int {
        // CAST: small enum constants.
        let pass = bindings::ib_mad_result_IB_MAD_RESULT_SUCCESS as c_int;
        let reply = (bindings::ib_mad_result_IB_MAD_RESULT_SUCCESS
            | bindings::ib_mad_result_IB_MAD_RESULT_REPLY) as c_int;
        // SAFETY: The core passes a valid `out_mad_size`.
        if in_mad.is_null() || out_mad.is_null() || unsafe { *out_mad_size } < MAD_LEN {
            return pass;
        }
        // SAFETY: Callbacks only run for registered devices of `T`.
        let dev = unsafe { Self::from_raw(ib) };
        // SAFETY: `in_mad` points to a whole `ib_mad` (`MAD_LEN` bytes, checked at build time)
        // that nobody writes during the call.
        let mad = unsafe { &*in_mad.cast::<[u8; MAD_LEN]>() };
        // SAFETY: `out_mad` has room for `MAD_LEN` bytes (checked above), is not `in_mad`, and
        // is ours until we return.
        let out = unsafe { &mut *out_mad.cast::<[u8; MAD_LEN]>() };
        if !T::process_mad(dev, port, mad, out) {
            return pass;
        }
        // SAFETY: As above; the reply is one whole MAD.
        unsafe { *out_mad_size = MAD_LEN };
        reply
    }

    /// The `disassociate_ucontext` verb: the device is going (unregistered,
    /// or moved to another network namespace) while a process still has it
    /// open. Before this the core has destroyed every object of the context
    /// through the driver's own verbs, and zapped the mappings it tracks.
    /// The only memory this abstraction maps to user space is
    /// `SharedMem`'s, mapped with `remap_vmalloc_range`: the page tables
    /// hold those pages, so the process keeps stale pages the kernel no
    /// longer reads, and nothing of the driver. There is nothing left to
    /// do. Having the verb lets the core unregister a device (and unload
    /// the module) without waiting for the process, and move the device
    /// between network namespaces (`rdma dev set ... netns`).
    ///
    /// # Safety
    ///
    /// Only the RDMA core calls this, through the ops table of a device registered with this
    /// type.
    unsafe extern "C" fn disassociate_ucontext_cb(_ctx: *mut bindings::ib_ucontext) {}

    /// Finds the registered device of driver `T` bound to `ndev`.
    pub(crate) fn get_by_netdev(ndev: &NetDevice) -> Option<ARef<Self>> {
        // SAFETY: `ndev` is valid; the call returns NULL or a device with a
        // reference taken for us.
        let raw = unsafe { bindings::ib_device_get_by_netdev(ndev.as_raw(), T::DRIVER_ID) };
        let raw = NonNull::new(raw)?;
        // Another driver may share our driver id. Only our devices point
        // their sysfs group into their own allocation, at a fixed offset.
        // Computing that address does not dereference anything.
        let own_group = raw
            .as_ptr()
            .cast::<u8>()
            .wrapping_add(offset_of!(Self, sysfs) + offset_of!(SysfsGroup, group))
            .cast::<bindings::attribute_group>()
            .cast_const();
        // SAFETY: We hold a reference, so the device and its ops are valid.
        let group = unsafe { (*raw.as_ptr()).ops.device_group };
        if group != own_group {
            // SAFETY: Drops the reference taken above.
            unsafe { bindings::ib_device_put(raw.as_ptr()) };
            return None;
        }
        // SAFETY: The device is ours (checked above), so it is a `Device<T>`;
        // we own the reference the lookup took.
        Some(unsafe { ARef::from_raw(raw.cast::<Self>()) })
    }

    // --- Callbacks from the RDMA core. ---

    /// # Safety
    ///
    /// Only the RDMA core calls this, through the ops table of a device registered with this
    /// type, for the `query_device` verb: every pointer is valid for the call and its objects
    /// belong to this driver.
    unsafe extern "C" fn query_device_cb(
        ib: *mut bindings::ib_device,
        attr: *mut bindings::ib_device_attr,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: The core passes a NULL or valid `udata`.
            if let Some(udata) = unsafe { udata.as_ref() } {
                // Nothing driver-specific is defined for this verb yet.
                if udata.inlen != 0 || udata.outlen != 0 {
                    return Err(EINVAL);
                }
            }
            // SAFETY: Callbacks only run for registered devices of `T`.
            let dev = unsafe { Self::from_raw(ib) };
            let a = T::query_device(dev)?;
            // SAFETY: The core passes a valid, exclusive `attr`.
            a.write_to(unsafe { &mut *attr });
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, through the ops table of a device registered with this
    /// type, for the `query_port` verb: every pointer is valid for the call and its objects
    /// belong to this driver.
    unsafe extern "C" fn query_port_cb(
        ib: *mut bindings::ib_device,
        port: u32,
        attr: *mut bindings::ib_port_attr,
    ) -> c_int {
        from_result(|| {
            // SAFETY: Callbacks only run for registered devices of `T`.
            let dev = unsafe { Self::from_raw(ib) };
            let a = T::query_port(dev, port)?;
            // SAFETY: The core passes a valid, exclusive `attr`.
            a.write_to(unsafe { &mut *attr });
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, through the ops table of a device registered with this
    /// type, for the `get_port_immutable` verb: every pointer is valid for the call and its
    /// objects belong to this driver.
    unsafe extern "C" fn get_port_immutable_cb(
        ib: *mut bindings::ib_device,
        port: u32,
        imm: *mut bindings::ib_port_immutable,
    ) -> c_int {
        from_result(|| {
            // SAFETY: Called during registration of a device of `T`.
            let dev = unsafe { Self::from_raw(ib) };
            let a = T::port_immutable(dev, port)?;
            // SAFETY: The core passes a valid, exclusive `imm`.
            a.write_to(unsafe { &mut *imm });
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, through the ops table of a device registered with this
    /// type, for the `get_link_layer` verb: every pointer is valid for the call and its objects
    /// belong to this driver.
    unsafe extern "C" fn get_link_layer_cb(
        _ib: *mut bindings::ib_device,
        _port: u32,
    ) -> bindings::rdma_link_layer {
        // Every port of a RoCE device is an Ethernet port.
        bindings::rdma_link_layer_IB_LINK_LAYER_ETHERNET
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, through the ops table of a device registered with this
    /// type, for the `query_pkey` verb: every pointer is valid for the call and its objects
    /// belong to this driver.
    unsafe extern "C" fn query_pkey_cb(
        ib: *mut bindings::ib_device,
        port: u32,
        index: u16,
        pkey: *mut u16,
    ) -> c_int {
        from_result(|| {
            // SAFETY: Callbacks only run for registered devices of `T`.
            let dev = unsafe { Self::from_raw(ib) };
            let v = T::query_pkey(dev, port, index)?;
            // SAFETY: The core passes a valid out-pointer.
            unsafe { pkey.write(v) };
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, through the ops table of a device registered with this
    /// type, for the `alloc_ucontext` verb: every pointer is valid for the call and its objects
    /// belong to this driver.
    unsafe extern "C" fn alloc_ucontext_cb(
        _uctx: *mut bindings::ib_ucontext,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        // The ucontext carries no driver state yet, and there is no
        // driver-specific request or response to exchange.
        // SAFETY: The core passes a NULL or valid `udata`.
        match unsafe { udata.as_ref() } {
            Some(u) if u.inlen != 0 => EINVAL.to_errno(),
            _ => 0,
        }
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, through the ops table of a device registered with this
    /// type, for the `dealloc_ucontext` verb: every pointer is valid for the call and its
    /// objects belong to this driver.
    unsafe extern "C" fn dealloc_ucontext_cb(_uctx: *mut bindings::ib_ucontext) {}

    /// # Safety
    ///
    /// Only the RDMA core calls this, through the ops table of a device registered with this
    /// type, for the `query_ucontext` verb (`ibv_import_device` asks it of the context it
    /// imports): every pointer is valid for the call. A context holds no driver data to
    /// report, as `alloc_ucontext` returns none.
    unsafe extern "C" fn query_ucontext_cb(
        _uctx: *mut bindings::ib_ucontext,
        _attrs: *mut bindings::uverbs_attr_bundle,
    ) -> kernel::ffi::c_int {
        0
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, through the ops table of a device registered with this
    /// type, for the `dealloc_driver` verb: every pointer is valid for the call and its objects
    /// belong to this driver.
    unsafe extern "C" fn dealloc_driver_cb(ib: *mut bindings::ib_device) {
        let this = ib.cast::<Self>();
        // SAFETY: `ib_dealloc_device` calls this exactly once per device,
        // both after unregistration and for a device that was never
        // registered (see `NewDevice::drop`); no other callback runs by then
        // and `data` is initialised until now.
        unsafe { core::ptr::drop_in_place(addr_of_mut!((*this).data)) };
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, through the ops table of a device registered with this
    /// type, for the `show` verb: every pointer is valid for the call and its objects belong to
    /// this driver.
    unsafe extern "C" fn show_cb(
        dev: *mut bindings::device,
        attr: *mut bindings::device_attribute,
        buf: *mut c_char,
    ) -> isize {
        // SAFETY: The attribute belongs to the `struct device` embedded in
        // a registered `ib_device` of `T`; sysfs removes the files before
        // the device is unregistered and its data dropped.
        let this = unsafe { Self::from_raw(bindings::roxe_ib_device_from_dev(dev)) };
        let base = this
            .sysfs
            .attrs
            .as_ptr()
            .cast::<bindings::device_attribute>();
        // SAFETY: `attr` is one element of `this.sysfs.attrs`.
        let index = unsafe { attr.cast_const().offset_from(base) };
        let Ok(index) = usize::try_from(index) else {
            return EINVAL.to_errno() as isize;
        };
        let (start, len) = (buf.cast::<u8>(), kernel::page::PAGE_SIZE);
        // SAFETY: sysfs hands `show` a zeroed buffer of one page.
        let page = unsafe { core::slice::from_raw_parts_mut(start, len) };
        let mut out = Buffer::new(page);
        match T::show_attr(this, index, &mut out) {
            // CAST: the length is below PAGE_SIZE.
            Ok(()) => out.len() as isize,
            Err(e) => e.to_errno() as isize,
        }
    }
}

/// A device of its own in sysfs (`/sys/devices/roxe-if<ifindex>`) to be an RDMA
/// device's parent. It holds `net/<ifname>`, a link to the netdev, so tools
/// that look for `/sys/class/infiniband/<dev>/device/net/` (rdma-core's
/// pyverbs tests, for one) find the netdev. It is not the netdev's own
/// parent: libibverbs would then match providers by that device's PCI id,
/// and a hardware RNIC's provider could claim the roxe device.
///
/// # Invariants
///
/// `dev` is a registered root device and `net` a kobject under it holding
/// a link named `link`; both are released on drop.
pub(crate) struct ParentDevice {
    dev: NonNull<bindings::device>,
    net: NonNull<bindings::kobject>,
    link: kernel::str::CString,
}

// SAFETY: The pointers name reference-counted kernel objects that any thread
// may use and release.
unsafe impl Send for ParentDevice {}
// SAFETY: As above; `&ParentDevice` only hands out the device pointer.
unsafe impl Sync for ParentDevice {}

impl ParentDevice {
    /// Creates `/sys/devices/roxe-if<ifindex>` with `net/<ndev's name>`.
    /// It is named after the netdev, which has at most one roxe device,
    /// rather than after the RDMA device, whose name the core only checks
    /// for clashes later, at registration.
    pub(crate) fn new(module: &'static ThisModule, ndev: &NetDevice) -> Result<Self> {
        let dev_name =
            kernel::str::CString::try_from_fmt(kernel::fmt!("roxe-if{}", ndev.ifindex()))?;
        let link = kernel::str::CString::try_from_fmt(kernel::fmt!("{}", ndev.name()))?;
        // SAFETY: The name is a valid C string, copied by the call; the
        // module outlives the device (it is unregistered before unload).
        let dev = kernel::error::from_err_ptr(unsafe {
            bindings::__root_device_register(dev_name.as_char_ptr(), module.as_ptr().cast())
        })?;
        let dev = NonNull::new(dev).ok_or(ENOMEM)?;
        // SAFETY: `dev` is live; the name is a static C string.
        let net = unsafe {
            bindings::kobject_create_and_add(
                kernel::c_str!("net").as_char_ptr(),
                &raw mut (*dev.as_ptr()).kobj,
            )
        };
        let Some(net) = NonNull::new(net) else {
            // SAFETY: Registered above, not used elsewhere.
            unsafe { bindings::root_device_unregister(dev.as_ptr()) };
            return Err(ENOMEM);
        };
        // SAFETY: Both kobjects are live; the name is copied.
        let ret = unsafe {
            bindings::sysfs_create_link(
                net.as_ptr(),
                &raw mut (*ndev.as_raw()).dev.kobj,
                link.as_char_ptr(),
            )
        };
        if ret != 0 {
            // SAFETY: Created above, not used elsewhere.
            unsafe {
                bindings::kobject_put(net.as_ptr());
                bindings::root_device_unregister(dev.as_ptr());
            }
            return Err(Error::from_errno(ret));
        }
        // INVARIANT: registered, with the link in place.
        Ok(Self { dev, net, link })
    }
}

impl Drop for ParentDevice {
    fn drop(&mut self) {
        // SAFETY: By the invariants all three exist and are ours to release.
        // The RDMA device under `dev` holds its own reference to it.
        unsafe {
            bindings::sysfs_remove_link(self.net.as_ptr(), self.link.as_char_ptr());
            bindings::kobject_put(self.net.as_ptr());
            bindings::root_device_unregister(self.dev.as_ptr());
        }
    }
}

/// A device that is allocated but not registered.
///
/// # Invariants
///
/// `ptr` points to a `Device<T>` allocated by `_ib_alloc_device`, with ops
/// set and `data` initialised, that the RDMA core does not know about yet.
pub(crate) struct NewDevice<T: Driver> {
    ptr: NonNull<Device<T>>,
    _p: PhantomData<T>,
}

impl<T: Driver> NewDevice<T> {
    /// Allocates a device and initialises its driver data.
    pub(crate) fn new(
        module: &'static ThisModule,
        info: &DeviceInfo<'_>,
        data: impl PinInit<T::Data, Error>,
    ) -> Result<Self> {
        #[allow(clippy::let_unit_value)]
        let () = Device::<T>::ALIGN_OK;
        #[allow(clippy::let_unit_value)]
        let () = Device::<T>::TABLES_FIT;
        // SAFETY: `Device<T>` starts with `struct ib_device`, as required.
        let raw = unsafe { bindings::_ib_alloc_device(size_of::<Device<T>>()) };
        let raw = NonNull::new(raw).ok_or(ENOMEM)?.cast::<Device<T>>();
        let this = raw.as_ptr();

        // SAFETY: `data` points into the fresh, zeroed allocation. On
        // failure the initialiser has cleaned up after itself.
        if let Err(e) = unsafe { data.__pinned_init(addr_of_mut!((*this).data)) } {
            // SAFETY: Allocated above, never registered; no data to drop.
            unsafe { bindings::ib_dealloc_device(raw.as_ptr().cast()) };
            return Err(e);
        }

        // SAFETY: We own the unregistered allocation exclusively.
        unsafe { Self::init_sysfs(this) };
        for (i, name) in T::HW_COUNTERS.iter().enumerate() {
            // SAFETY: As above; `i` is below `MAX_HW_COUNTERS` (checked).
            // The names are static.
            unsafe { (*this).stat_descs[i].name = name.as_char_ptr() };
        }

        let mut ops = Device::<T>::OPS;
        ops.owner = module.as_ptr().cast();
        // SAFETY: Only computes the address of the group inside `this`.
        ops.device_group = unsafe { (*this).sysfs.group.get() };

        // SAFETY: We own the unregistered device; `ib_set_device_ops`
        // copies `ops`, and the device fields are plain data.
        unsafe {
            let ib = raw.as_ptr().cast::<bindings::ib_device>();
            bindings::ib_set_device_ops(ib, &ops);
            let desc = info.node_desc.as_bytes();
            let n = desc.len().min((*ib).node_desc.len() - 1);
            for (d, s) in (*ib).node_desc.iter_mut().zip(&desc[..n]) {
                // CAST: a byte reinterpreted as C's `char`.
                *d = *s as c_char;
            }
            (*ib).node_type = bindings::RDMA_NODE_IB_CA as u8;
            (*ib).phys_port_cnt = info.phys_port_cnt;
            (*ib).num_comp_vectors = i32::try_from(info.num_comp_vectors).unwrap_or(1);
            (*ib).node_guid = u64::from_ne_bytes(info.node_guid);
            (*ib).local_dma_lkey = 0;
            // The name comes from `rdma link add`, as with rxe.
            (*ib).name_assign_type = bindings::rdma_nl_name_assign_type_RDMA_NAME_ASSIGN_TYPE_USER;
            // The core disables these two write commands unless the driver
            // asks for them: POST_SEND is the user SQ doorbell, and
            // REQ_NOTIFY_CQ arms a CQ for `ibv_req_notify_cq`.
            (*ib).uverbs_cmd_mask |=
                1u64 << bindings::ib_uverbs_write_cmds_IB_USER_VERBS_CMD_REQ_NOTIFY_CQ;
            if <T::Qp as QpOps<T>>::HAS_POST_SEND_USER {
                (*ib).uverbs_cmd_mask |=
                    1u64 << bindings::ib_uverbs_write_cmds_IB_USER_VERBS_CMD_POST_SEND;
            }
        }
        // INVARIANT: allocated, ops set, data initialised, not registered.
        Ok(Self {
            ptr: raw,
            _p: PhantomData,
        })
    }

    /// # Safety
    ///
    /// `this` must be an unregistered device owned by the caller.
    unsafe fn init_sysfs(this: *mut Device<T>) {
        // SAFETY: Per the function's contract we may write the group.
        unsafe {
            let s = addr_of_mut!((*this).sysfs);
            let attrs = (*s)
                .attrs
                .as_ptr()
                .cast_mut()
                .cast::<bindings::device_attribute>();
            let ptrs = (*s).ptrs.get().cast::<*mut bindings::attribute>();
            for (i, name) in T::ATTRS.iter().enumerate() {
                let a = attrs.add(i);
                (*a).attr.name = name.as_char_ptr();
                (*a).attr.mode = 0o444;
                bindings::roxe_sysfs_attr_init(addr_of_mut!((*a).attr));
                (*a).show = Some(Device::<T>::show_cb);
                *ptrs.add(i) = addr_of_mut!((*a).attr);
            }
            // The list ends with a NULL pointer; the allocation is zeroed.
            let g = (*s).group.get();
            (*g).attrs = ptrs;
        }
    }

    /// The driver's data.
    pub(crate) fn data(&self) -> &T::Data {
        // SAFETY: By the invariant the data is initialised; nothing else
        // uses the unregistered device.
        unsafe { &(*self.ptr.as_ptr()).data }
    }

    /// Makes `p` the device's parent in sysfs. `p` should live until the
    /// device is unregistered (keep it in the driver data): the device holds
    /// a reference to it either way, but removing the parent first takes
    /// the device's sysfs directory with it.
    pub(crate) fn set_parent(&self, p: &ParentDevice) {
        // SAFETY: The device is unregistered and ours; `dev` is the union's
        // active member, and `dev.parent` is read by `ib_register_device`,
        // which takes its own reference.
        unsafe {
            (*self.ptr.as_ptr().cast::<bindings::ib_device>())
                .__bindgen_anon_1
                .dev
                .parent = p.dev.as_ptr()
        };
    }

    /// Binds `ndev` to `port`; the RDMA core then manages the port's RoCE
    /// GIDs from the netdev's IP addresses.
    pub(crate) fn set_netdev(&mut self, ndev: &NetDevice, port: u32) -> Result {
        // SAFETY: The device is valid and unregistered; `ndev` is valid and
        // the core takes its own reference.
        kernel::error::to_result(unsafe {
            bindings::ib_device_set_netdev(self.ptr.as_ptr().cast(), ndev.as_raw(), port)
        })
    }

    /// Registers the device under `name`. On success the RDMA core owns it
    /// and may unregister and free it at any time; on failure it is freed.
    pub(crate) fn register(self, name: &CStr) -> Result {
        let ptr = self.ptr;
        core::mem::forget(self);
        // SAFETY: The device is fully set up. `NULL` as DMA device selects
        // the core's virtual DMA ops, as for every software RDMA device.
        let ret = unsafe {
            bindings::ib_register_device(
                ptr.as_ptr().cast(),
                name.as_char_ptr(),
                core::ptr::null_mut(),
            )
        };
        if ret != 0 {
            // On failure the core hands ownership back to us (it
            // suppresses `dealloc_driver` on this path).
            drop(NewDevice::<T> {
                ptr,
                _p: PhantomData,
            });
            return Err(Error::from_errno(ret));
        }
        Ok(())
    }
}

impl<T: Driver> Drop for NewDevice<T> {
    fn drop(&mut self) {
        // SAFETY: By the type invariant we own the device, its ops are set
        // and its data is initialised; the core never saw it (or gave it
        // back). `ib_dealloc_device` calls `dealloc_driver`, which drops the
        // data exactly once, and then frees the device.
        unsafe { bindings::ib_dealloc_device(self.ptr.as_ptr().cast()) };
    }
}

/// Claims a driver id for the lifetime of the module. Dropping it
/// unregisters every device with that id and waits until that is done.
pub(crate) struct DriverRegistration<T: Driver>(PhantomData<T>);

impl<T: Driver> DriverRegistration<T> {
    /// Creates the claim. No C state changes until drop.
    pub(crate) fn new() -> Self {
        Self(PhantomData)
    }
}

impl<T: Driver> Drop for DriverRegistration<T> {
    fn drop(&mut self) {
        // SAFETY: Every device of `T` has a `dealloc_driver`, as the call
        // requires. It unregisters synchronously, so no callback into this
        // module runs afterwards.
        unsafe { bindings::ib_unregister_driver(T::DRIVER_ID) };
    }
}
