// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The C boundary: libibverbs' provider entry points, the callbacks
//! libibverbs calls, and the constructor that registers the provider.
//!
//! This is the only module with `unsafe` code. The callbacks check what they
//! can and hand the real work to the safe modules.
//!
//! - this file: the imports, registration, devices and contexts;
//! - [`pd`]: protection domains and memory regions;
//! - [`cq`]: completion queues, their mapped rings and polling;
//! - [`ah`]: address handles;
//! - [`qp`]: queue pairs (raw packet and RSS QPs among them), their
//!   mapped rings, posting (`post_send` and the `ibv_wr_*` interface) and
//!   the doorbell;
//! - [`flow`]: flow steering rules;
//! - [`srq`]: shared receive queues, basic and XRC;
//! - [`rwq`]: receive work queues and their indirection tables;
//! - [`xrcd`]: XRC domains;
//! - [`mw`]: memory windows and `ibv_bind_mw`;
//! - [`lock`], [`mapping`]: the spin lock of CQs, QPs, SRQs and WQs, and
//!   the `mmap` of a ring.
//!
//! The contracts quoted in the `SAFETY` comments are those of rdma-core
//! v44.0: `libibverbs/init.c` (`try_driver`, `match_device`,
//! `ibverbs_device_put`), `libibverbs/device.c` (`verbs_open_device`,
//! `_verbs_init_and_alloc_context`, `verbs_uninit_context`,
//! `ibv_close_device`, `verbs_init_cq`), `libibverbs/verbs.c` (the public
//! verbs that call the ops), and the `ibv_cmd_*` helpers in
//! `libibverbs/cmd.c` (also `ibv_cmd_open_xrcd`, `ibv_cmd_open_qp` and
//! `ibv_cmd_create_flow`), `cmd_pd.c`, `cmd_mr.c`, `cmd_cq.c`, `cmd_ah.c`,
//! `cmd_qp.c`, `cmd_srq.c`, `cmd_mw.c`, `cmd_xrcd.c`, `cmd_flow.c`,
//! `cmd_wq.c`, `cmd_rwq_ind.c` and `cmd_device.c` (also
//! `ibv_cmd_modify_wq` and `ibv_cmd_create_rwq_ind_table` in `cmd.c`), and
//! the inline `ibv_create_flow`, `ibv_destroy_flow`, `ibv_create_wq`,
//! `ibv_post_wq_recv` and the other WQ and indirection table verbs of
//! `libibverbs/verbs.h`.

mod ah;
mod cq;
mod flow;
mod lock;
mod mapping;
mod mw;
mod pd;
mod qp;
mod rwq;
mod srq;
mod xrcd;

use core::alloc::Layout;
use core::ffi::{CStr, c_char, c_int, c_void};
use core::mem::{offset_of, size_of, size_of_val};
use core::ptr::{self, NonNull};

use crate::abi::{ibv, uverbs, verbs};
use crate::context::Context;
use crate::device::Device;
use crate::errno::Errno;
use crate::{attr, matching};

#[link(name = "ibverbs")]
unsafe extern "C" {
    // All of these carry the symbol version IBVERBS_PRIVATE_34.
    fn verbs_register_driver_34(ops: *const verbs::DeviceOps);
    fn _verbs_init_and_alloc_context(
        device: *mut ibv::Device,
        cmd_fd: c_int,
        alloc_size: usize,
        context_offset: *mut verbs::Context,
        driver_id: u32,
    ) -> *mut c_void;
    fn verbs_uninit_context(context: *mut verbs::Context);
    fn verbs_set_ops(vctx: *mut verbs::Context, ops: *const verbs::ContextOps);
    fn ibv_cmd_get_context(
        context: *mut verbs::Context,
        cmd: *mut ibv::GetContext,
        cmd_size: usize,
        resp: *mut uverbs::GetContextResp,
        resp_size: usize,
    ) -> c_int;
    fn ibv_cmd_query_device_any(
        context: *mut ibv::Context,
        input: *const ibv::QueryDeviceExInput,
        attr: *mut ibv::DeviceAttrEx,
        attr_size: usize,
        resp: *mut uverbs::ExQueryDeviceResp,
        resp_size: *mut usize,
    ) -> c_int;
    fn ibv_cmd_advise_mr(
        pd: *mut ibv::Pd,
        advice: u32,
        flags: u32,
        sg_list: *mut ibv::Sge,
        num_sge: u32,
    ) -> c_int;
    fn ibv_cmd_query_port(
        context: *mut ibv::Context,
        port_num: u8,
        port_attr: *mut ibv::PortAttr,
        cmd: *mut ibv::QueryPort,
        cmd_size: usize,
    ) -> c_int;
    fn ibv_cmd_alloc_pd(
        context: *mut ibv::Context,
        pd: *mut ibv::Pd,
        cmd: *mut ibv::AllocPd,
        cmd_size: usize,
        resp: *mut uverbs::AllocPdResp,
        resp_size: usize,
    ) -> c_int;
    fn ibv_cmd_dealloc_pd(pd: *mut ibv::Pd) -> c_int;
    fn ibv_cmd_open_xrcd(
        context: *mut ibv::Context,
        xrcd: *mut verbs::Xrcd,
        vxrcd_size: c_int,
        attr: *mut ibv::XrcdInitAttr,
        cmd: *mut ibv::OpenXrcd,
        cmd_size: usize,
        resp: *mut uverbs::OpenXrcdResp,
        resp_size: usize,
    ) -> c_int;
    fn ibv_cmd_close_xrcd(xrcd: *mut verbs::Xrcd) -> c_int;
    fn ibv_cmd_reg_mr(
        pd: *mut ibv::Pd,
        addr: *mut c_void,
        length: usize,
        hca_va: u64,
        access: c_int,
        vmr: *mut verbs::Mr,
        cmd: *mut ibv::RegMr,
        cmd_size: usize,
        resp: *mut uverbs::RegMrResp,
        resp_size: usize,
    ) -> c_int;
    // rdma-core 44 declares seven arguments; later releases add `driver`,
    // a driver command buffer. Passing it as NULL suits both: in the
    // x86-64 and AArch64 C conventions the caller owns the argument area,
    // so a callee that takes seven never sees the eighth.
    fn ibv_cmd_reg_dmabuf_mr(
        pd: *mut ibv::Pd,
        offset: u64,
        length: usize,
        iova: u64,
        fd: c_int,
        access: c_int,
        vmr: *mut verbs::Mr,
        driver: *mut c_void,
    ) -> c_int;
    fn ibv_cmd_rereg_mr(
        vmr: *mut verbs::Mr,
        flags: u32,
        addr: *mut c_void,
        length: usize,
        hca_va: u64,
        access: c_int,
        pd: *mut ibv::Pd,
        cmd: *mut ibv::ReregMr,
        cmd_sz: usize,
        resp: *mut uverbs::ReregMrResp,
        resp_sz: usize,
    ) -> c_int;
    fn ibv_cmd_dereg_mr(vmr: *mut verbs::Mr) -> c_int;
    fn ibv_cmd_query_mr(pd: *mut ibv::Pd, vmr: *mut verbs::Mr, mr_handle: u32) -> c_int;
    fn ibv_cmd_query_context(context: *mut ibv::Context, driver: *mut c_void) -> c_int;
    fn ibv_cmd_create_cq(
        context: *mut ibv::Context,
        cqe: c_int,
        channel: *mut ibv::CompChannel,
        comp_vector: c_int,
        cq: *mut ibv::Cq,
        cmd: *mut ibv::CreateCq,
        cmd_size: usize,
        resp: *mut uverbs::CreateCqResp,
        resp_size: usize,
    ) -> c_int;
    fn ibv_cmd_create_cq_ex(
        context: *mut ibv::Context,
        cq_attr: *const ibv::CqInitAttrEx,
        cq: *mut verbs::Cq,
        cmd: *mut ibv::CreateCqEx,
        cmd_size: usize,
        resp: *mut uverbs::ExCreateCqResp,
        resp_size: usize,
        cmd_flags: u32,
    ) -> c_int;
    fn ibv_cmd_req_notify_cq(cq: *mut ibv::Cq, solicited_only: c_int) -> c_int;
    fn ibv_cmd_resize_cq(
        cq: *mut ibv::Cq,
        cqe: c_int,
        cmd: *mut ibv::ResizeCq,
        cmd_size: usize,
        resp: *mut uverbs::ResizeCqResp,
        resp_size: usize,
    ) -> c_int;
    fn ibv_cmd_destroy_cq(cq: *mut ibv::Cq) -> c_int;
    fn ibv_cmd_create_ah(
        pd: *mut ibv::Pd,
        ah: *mut ibv::Ah,
        attr: *mut ibv::AhAttr,
        resp: *mut uverbs::CreateAhResp,
        resp_size: usize,
    ) -> c_int;
    fn ibv_cmd_destroy_ah(ah: *mut ibv::Ah) -> c_int;
    fn ibv_cmd_create_qp_ex(
        context: *mut ibv::Context,
        qp: *mut verbs::Qp,
        attr_ex: *mut ibv::QpInitAttrEx,
        cmd: *mut ibv::CreateQp,
        cmd_size: usize,
        resp: *mut uverbs::CreateQpResp,
        resp_size: usize,
    ) -> c_int;
    fn ibv_cmd_create_qp_ex2(
        context: *mut ibv::Context,
        qp: *mut verbs::Qp,
        attr_ex: *mut ibv::QpInitAttrEx,
        cmd: *mut ibv::CreateQpEx,
        cmd_size: usize,
        resp: *mut uverbs::ExCreateQpResp,
        resp_size: usize,
    ) -> c_int;
    fn ibv_cmd_modify_qp(
        qp: *mut ibv::Qp,
        attr: *mut ibv::QpAttr,
        attr_mask: c_int,
        cmd: *mut ibv::ModifyQp,
        cmd_size: usize,
    ) -> c_int;
    fn ibv_cmd_query_qp(
        qp: *mut ibv::Qp,
        qp_attr: *mut ibv::QpAttr,
        attr_mask: c_int,
        qp_init_attr: *mut ibv::QpInitAttr,
        cmd: *mut ibv::QueryQp,
        cmd_size: usize,
    ) -> c_int;
    fn ibv_cmd_open_qp(
        context: *mut ibv::Context,
        qp: *mut verbs::Qp,
        vqp_sz: c_int,
        attr: *mut ibv::QpOpenAttr,
        cmd: *mut ibv::OpenQp,
        cmd_size: usize,
        resp: *mut uverbs::CreateQpResp,
        resp_size: usize,
    ) -> c_int;
    fn ibv_cmd_destroy_qp(qp: *mut ibv::Qp) -> c_int;
    fn ibv_cmd_create_flow(
        qp: *mut ibv::Qp,
        flow_id: *mut ibv::Flow,
        flow_attr: *mut ibv::FlowAttr,
        ucmd: *mut c_void,
        ucmd_size: usize,
    ) -> c_int;
    fn ibv_cmd_destroy_flow(flow_id: *mut ibv::Flow) -> c_int;
    fn ibv_cmd_attach_mcast(qp: *mut ibv::Qp, gid: *const ibv::Gid, lid: u16) -> c_int;
    fn ibv_cmd_detach_mcast(qp: *mut ibv::Qp, gid: *const ibv::Gid, lid: u16) -> c_int;
    fn ibv_cmd_post_send(
        ibqp: *mut ibv::Qp,
        wr: *mut ibv::SendWr,
        bad_wr: *mut *mut ibv::SendWr,
    ) -> c_int;
    fn ibv_cmd_create_srq(
        pd: *mut ibv::Pd,
        srq: *mut ibv::Srq,
        attr: *mut ibv::SrqInitAttr,
        cmd: *mut ibv::CreateSrq,
        cmd_size: usize,
        resp: *mut uverbs::CreateSrqResp,
        resp_size: usize,
    ) -> c_int;
    fn ibv_cmd_create_srq_ex(
        context: *mut ibv::Context,
        srq: *mut verbs::Srq,
        attr_ex: *mut ibv::SrqInitAttrEx,
        cmd: *mut ibv::CreateXsrq,
        cmd_size: usize,
        resp: *mut uverbs::CreateSrqResp,
        resp_size: usize,
    ) -> c_int;
    fn ibv_cmd_modify_srq(
        srq: *mut ibv::Srq,
        srq_attr: *mut ibv::SrqAttr,
        srq_attr_mask: c_int,
        cmd: *mut ibv::ModifySrq,
        cmd_size: usize,
    ) -> c_int;
    fn ibv_cmd_query_srq(
        srq: *mut ibv::Srq,
        srq_attr: *mut ibv::SrqAttr,
        cmd: *mut ibv::QuerySrq,
        cmd_size: usize,
    ) -> c_int;
    fn ibv_cmd_destroy_srq(srq: *mut ibv::Srq) -> c_int;
    fn ibv_cmd_create_wq(
        context: *mut ibv::Context,
        wq_init_attr: *mut ibv::WqInitAttr,
        wq: *mut ibv::Wq,
        cmd: *mut ibv::CreateWq,
        cmd_size: usize,
        resp: *mut uverbs::ExCreateWqResp,
        resp_size: usize,
    ) -> c_int;
    fn ibv_cmd_modify_wq(
        wq: *mut ibv::Wq,
        attr: *mut ibv::WqAttr,
        cmd: *mut ibv::ModifyWq,
        cmd_size: usize,
    ) -> c_int;
    fn ibv_cmd_destroy_wq(wq: *mut ibv::Wq) -> c_int;
    fn ibv_cmd_create_rwq_ind_table(
        context: *mut ibv::Context,
        init_attr: *mut ibv::RwqIndTableInitAttr,
        rwq_ind_table: *mut ibv::RwqIndTable,
        resp: *mut uverbs::ExCreateRwqIndTableResp,
        resp_size: usize,
    ) -> c_int;
    fn ibv_cmd_destroy_rwq_ind_table(rwq_ind_table: *mut ibv::RwqIndTable) -> c_int;
    fn ibv_cmd_alloc_mw(
        pd: *mut ibv::Pd,
        mw_type: ibv::MwType,
        mw: *mut ibv::Mw,
        cmd: *mut ibv::AllocMw,
        cmd_size: usize,
        resp: *mut uverbs::AllocMwResp,
        resp_size: usize,
    ) -> c_int;
    fn ibv_cmd_dealloc_mw(mw: *mut ibv::Mw) -> c_int;
}

// glibc.
unsafe extern "C" {
    fn calloc(nmemb: usize, size: usize) -> *mut c_void;
    fn free(ptr: *mut c_void);
    fn __errno_location() -> *mut c_int;
    fn mmap(
        addr: *mut c_void,
        length: usize,
        prot: c_int,
        flags: c_int,
        fd: c_int,
        offset: i64,
    ) -> *mut c_void;
    fn munmap(addr: *mut c_void, length: usize) -> c_int;
}

/// A `static` table of raw pointers.
#[repr(transparent)]
struct Table<T>(T);

// SAFETY: `Table` wraps only the two statics below. They are never written,
// and their pointers lead to other immutable statics (a C string literal and
// `MATCH_TABLE`), so sharing them between threads cannot race.
unsafe impl<T> Sync for Table<T> {}

/// roxe's match table: only the sentinel.
///
/// It must not be NULL: when a device has a real driver id, libibverbs'
/// `try_drivers` calls `match_driver_id` for every provider, and that walks
/// `match_table` without a NULL check. An empty table matches nothing, so
/// the decision falls to `match_device`.
static MATCH_TABLE: Table<[verbs::MatchEnt; 1]> = Table([verbs::MatchEnt::SENTINEL]);

/// The provider, as registered with libibverbs.
static DEVICE_OPS: Table<verbs::DeviceOps> = Table(verbs::DeviceOps {
    name: c"roxe".as_ptr(),
    match_min_abi_version: matching::MIN_ABI_VERSION,
    match_max_abi_version: matching::MAX_ABI_VERSION,
    match_table: (&raw const MATCH_TABLE.0).cast(),
    static_providers: ptr::null(),
    match_device: Some(match_device),
    alloc_context: Some(alloc_context),
    import_context: Some(import_context),
    alloc_device: Some(alloc_device),
    uninit_device: Some(uninit_device),
});

/// The context ops roxe implements; `verbs_set_ops` skips the NULL rest.
static CONTEXT_OPS: verbs::ContextOps = verbs::ContextOps {
    // Prefetch into on-demand-paging MRs: the kernel does it all.
    advise_mr: Some(ibv_cmd_advise_mr),
    free_context: Some(free_context),
    // Shared PDs and MRs (`ibv_import_pd`, `ibv_import_mr`): libibverbs
    // fills an imported MR from the kernel.
    import_pd: Some(pd::import_pd),
    unimport_pd: Some(pd::unimport_pd),
    import_mr: Some(pd::import_mr),
    unimport_mr: Some(pd::unimport_mr),
    query_device_ex: Some(query_device_ex),
    query_port: Some(query_port),
    alloc_pd: Some(pd::alloc_pd),
    alloc_parent_domain: Some(pd::alloc_parent_domain),
    dealloc_pd: Some(pd::dealloc_pd),
    reg_mr: Some(pd::reg_mr),
    reg_dmabuf_mr: Some(pd::reg_dmabuf_mr),
    rereg_mr: Some(pd::rereg_mr),
    dereg_mr: Some(pd::dereg_mr),
    create_cq: Some(cq::create_cq),
    create_cq_ex: Some(cq::create_cq_ex),
    poll_cq: Some(cq::poll_cq),
    req_notify_cq: Some(cq::req_notify_cq),
    resize_cq: Some(cq::resize_cq),
    destroy_cq: Some(cq::destroy_cq),
    create_ah: Some(ah::create_ah),
    destroy_ah: Some(ah::destroy_ah),
    create_qp: Some(qp::create_qp),
    create_qp_ex: Some(qp::create_qp_ex),
    modify_qp: Some(qp::modify_qp),
    query_qp: Some(qp::query_qp),
    destroy_qp: Some(qp::destroy_qp),
    open_qp: Some(qp::open_qp),
    attach_mcast: Some(qp::attach_mcast),
    detach_mcast: Some(qp::detach_mcast),
    // Flow steering, for raw packet QPs.
    create_flow: Some(flow::create_flow),
    destroy_flow: Some(flow::destroy_flow),
    post_send: Some(qp::post_send),
    post_recv: Some(qp::post_recv),
    create_srq: Some(srq::create_srq),
    create_srq_ex: Some(srq::create_srq_ex),
    get_srq_num: Some(srq::get_srq_num),
    modify_srq: Some(srq::modify_srq),
    query_srq: Some(srq::query_srq),
    destroy_srq: Some(srq::destroy_srq),
    post_srq_recv: Some(srq::post_srq_recv),
    alloc_mw: Some(mw::alloc_mw),
    bind_mw: Some(mw::bind_mw),
    dealloc_mw: Some(mw::dealloc_mw),
    open_xrcd: Some(xrcd::open_xrcd),
    close_xrcd: Some(xrcd::close_xrcd),
    // Receive WQs and indirection tables, for RSS QPs. `ibv_post_wq_recv`
    // calls the `post_recv` each WQ carries.
    create_wq: Some(rwq::create_wq),
    modify_wq: Some(rwq::modify_wq),
    destroy_wq: Some(rwq::destroy_wq),
    create_rwq_ind_table: Some(rwq::create_rwq_ind_table),
    destroy_rwq_ind_table: Some(rwq::destroy_rwq_ind_table),
    ..verbs::ContextOps::EMPTY
};

/// Registers the provider when the dynamic loader maps this library, as
/// rdma-core's `PROVIDER_DRIVER` macro does with a constructor.
extern "C" fn register_driver() {
    // SAFETY: `DEVICE_OPS` is a `struct verbs_device_ops` (layout checked in
    // `abi::tests`) that lives and stays unchanged for the life of the
    // process; libibverbs keeps the pointer and never frees it, and never
    // unloads providers it loaded.
    unsafe { verbs_register_driver_34(&raw const DEVICE_OPS.0) };
}

/// The ELF constructor entry for [`register_driver`].
#[used]
#[unsafe(link_section = ".init_array")]
static REGISTER_DRIVER: extern "C" fn() = register_driver;

/// Sets the calling thread's `errno`.
fn set_errno(err: Errno) {
    // SAFETY: glibc's `__errno_location` returns a valid pointer to the
    // calling thread's `errno`, which only this thread accesses.
    unsafe { *__errno_location() = err.get() };
}

/// The calling thread's `errno`, after a C library call failed.
fn last_errno() -> Errno {
    // SAFETY: as in `set_errno`.
    Errno::from_raw(unsafe { *__errno_location() })
}

/// The result of a libibverbs `ibv_cmd_*` call, which returns 0 or a
/// positive errno.
fn cmd_result(ret: c_int) -> Result<(), Errno> {
    if ret == 0 {
        Ok(())
    } else {
        Err(Errno::from_raw(ret))
    }
}

/// An op's `int` return value for `result`: 0 or a positive errno.
fn errno_ret(result: Result<(), Errno>) -> c_int {
    match result {
        Ok(()) => 0,
        Err(err) => err.get(),
    }
}

/// Moves `value` to the heap, like `Box::new`, but reports allocation
/// failure instead of aborting. [`drop_box`] frees it.
///
/// The provider's verbs objects live here: libibverbs and the application
/// hold raw pointers into them until the matching destroy op.
fn try_box<T>(value: T) -> Option<NonNull<T>> {
    const { assert!(size_of::<T>() != 0) };
    let layout = Layout::new::<T>();
    // SAFETY: `layout` has a non-zero size (asserted above).
    let ptr = NonNull::new(unsafe { std::alloc::alloc(layout) }.cast::<T>())?;
    // SAFETY: `ptr` is a fresh allocation with the size and alignment of `T`.
    unsafe { ptr.write(value) };
    Some(ptr)
}

/// Drops and frees what [`try_box`] allocated.
///
/// # Safety
///
/// `ptr` came from `try_box::<T>`, has not been freed, and nothing uses it
/// after this call.
unsafe fn drop_box<T>(ptr: NonNull<T>) {
    // SAFETY: `try_box` allocated `ptr` with the global allocator and
    // `Layout::new::<T>()` and initialised it, which is what `Box` expects;
    // per the contract nothing else owns it.
    drop(unsafe { Box::from_raw(ptr.as_ptr()) });
}

/// `verbs_device_ops.match_device`: whether `sysfs_dev` is a roxe device.
///
/// # Safety
///
/// `sysfs_dev` is NULL or points to a `verbs_sysfs_dev` that is valid for
/// reads for the duration of the call, as libibverbs' `match_device`
/// guarantees.
unsafe extern "C" fn match_device(sysfs_dev: *mut verbs::SysfsDev) -> bool {
    // SAFETY: per this function's contract the pointer is NULL or valid for
    // reads; libibverbs matches devices under its `dev_list_lock`, so
    // nothing writes it during the call.
    let Some(dev) = (unsafe { sysfs_dev.as_ref() }) else {
        return false;
    };
    // CAST: c_char to u8 reinterprets each byte; no value is lost.
    let path_bytes = dev.ibdev_path.map(|c| c as u8);
    let Ok(path) = CStr::from_bytes_until_nul(&path_bytes) else {
        return false;
    };
    matching::claims(dev.driver_id, path)
}

/// `verbs_device_ops.alloc_device`: allocates a zero-filled [`Device`].
///
/// On failure returns NULL with `errno` set by `calloc`; libibverbs then
/// skips the device.
unsafe extern "C" fn alloc_device(_sysfs_dev: *mut verbs::SysfsDev) -> *mut verbs::Device {
    // SAFETY: `calloc` has no preconditions; NULL is checked below.
    let dev = unsafe { calloc(1, size_of::<Device>()) }.cast::<Device>();
    if dev.is_null() {
        return ptr::null_mut();
    }
    // INVARIANT: all-zero is a valid `Device` (see its `# Invariants`).
    // SAFETY: `dev` is a live allocation of `size_of::<Device>()` bytes, so
    // projecting to its `verbs` field stays in bounds.
    unsafe { &raw mut (*dev).verbs }
}

/// `verbs_device_ops.uninit_device`: frees a [`Device`].
///
/// # Safety
///
/// `vdev` is NULL or the `verbs` field of a `Device` that [`alloc_device`]
/// returned and that is no longer used. libibverbs calls this once, when the
/// device's last reference is dropped (`ibverbs_device_put`) or when
/// `try_driver` gives up on a device it just allocated.
unsafe extern "C" fn uninit_device(vdev: *mut verbs::Device) {
    if vdev.is_null() {
        return;
    }
    // SAFETY: per the contract `vdev` points to the `verbs` field of a
    // `Device`, so stepping back by that field's offset yields the pointer
    // `alloc_device` got from `calloc`.
    let dev = unsafe { vdev.byte_sub(offset_of!(Device, verbs)) }.cast::<Device>();
    // SAFETY: `dev` came from `calloc` and nothing uses it any more.
    unsafe { free(dev.cast()) };
}

/// `verbs_device_ops.alloc_context`: opens a context on `cmd_fd`.
///
/// Allocates a [`Context`] through libibverbs, asks the kernel for a user
/// context, and installs roxe's ops. On failure returns NULL with `errno`
/// set; `cmd_fd` is closed either way, as libibverbs expects.
///
/// # Safety
///
/// `ibdev` is the `device` field of a live [`Device`] and `cmd_fd` an open
/// uverbs file descriptor whose ownership passes to this call, as in
/// libibverbs' `verbs_open_device`.
unsafe extern "C" fn alloc_context(
    ibdev: *mut ibv::Device,
    cmd_fd: c_int,
    _private_data: *mut c_void,
) -> *mut verbs::Context {
    // SAFETY: As this function's contract.
    unsafe { open_context(ibdev, cmd_fd, false) }
}

/// `verbs_device_ops.import_context`: a context over `cmd_fd`, a duplicate
/// of another context's command fd (`ibv_import_device`). The kernel's
/// context exists already, so it is queried, not made. Returns NULL with
/// `errno` set on failure.
///
/// # Safety
///
/// As for [`alloc_context`].
unsafe extern "C" fn import_context(ibdev: *mut ibv::Device, cmd_fd: c_int) -> *mut verbs::Context {
    // SAFETY: As this function's contract.
    unsafe { open_context(ibdev, cmd_fd, true) }
}

/// Makes a context over `cmd_fd`: a new kernel context, or (`import`) the
/// one the fd has.
///
/// # Safety
///
/// As for [`alloc_context`].
unsafe fn open_context(
    ibdev: *mut ibv::Device,
    cmd_fd: c_int,
    import: bool,
) -> *mut verbs::Context {
    // SAFETY: `ibdev` and `cmd_fd` are valid per this function's contract.
    // `_verbs_init_and_alloc_context` callocs `alloc_size` bytes, initialises
    // the `verbs_context` found `context_offset` bytes in (passed as a
    // pointer, like C's `&((T *)NULL)->member`), and takes `cmd_fd`: on
    // failure it closes it, sets errno and returns NULL. `RDMA_DRIVER_UNKNOWN`
    // is the id the kernel checks in every ioctl header for a roxe device.
    let ctx = unsafe {
        _verbs_init_and_alloc_context(
            ibdev,
            cmd_fd,
            size_of::<Context>(),
            ptr::without_provenance_mut(offset_of!(Context, verbs)),
            uverbs::RDMA_DRIVER_UNKNOWN,
        )
    }
    .cast::<Context>();
    if ctx.is_null() {
        return ptr::null_mut();
    }
    // INVARIANT: the rest of `Context` is zero, which is valid (see its
    // `# Invariants`).
    // SAFETY: `ctx` is a live allocation of `size_of::<Context>()` bytes.
    let vctx = unsafe { &raw mut (*ctx).verbs };

    let mut cmd = ibv::GetContext::default();
    let mut resp = uverbs::GetContextResp::default();
    let ret = if import {
        // SAFETY: `vctx` was initialised above, over the imported fd; roxe
        // has no driver attributes (NULL).
        unsafe { ibv_cmd_query_context(&raw mut (*vctx).context, ptr::null_mut()) }
    } else {
        // SAFETY: `vctx` was initialised above; `cmd` and `resp` are
        // writable buffers of exactly the sizes passed. Equal core and
        // total sizes mean no driver-private data in either direction.
        unsafe {
            ibv_cmd_get_context(
                vctx,
                &raw mut cmd,
                size_of_val(&cmd),
                &raw mut resp,
                size_of_val(&resp),
            )
        }
    };
    if ret != 0 {
        // SAFETY: `vctx` was initialised by `_verbs_init_and_alloc_context`
        // and is not published; `verbs_uninit_context` closes the fds and
        // drops the device reference, then `ctx` (from libibverbs' `calloc`)
        // is freed, exactly as rdma-core's own providers unwind.
        unsafe {
            verbs_uninit_context(vctx);
            free(ctx.cast());
        }
        // After the cleanup, which may have changed errno.
        set_errno(Errno::from_raw(ret));
        return ptr::null_mut();
    }

    // SAFETY: `vctx` is initialised; `CONTEXT_OPS` is a `'static`
    // `struct verbs_context_ops` whose entries libibverbs copies.
    unsafe { verbs_set_ops(vctx, &raw const CONTEXT_OPS) };
    vctx
}

/// Recovers the [`Context`] around an `ibv_context`.
///
/// # Safety
///
/// `ibctx` is the `verbs.context` field of a live [`Context`].
unsafe fn context_of(ibctx: *mut ibv::Context) -> *mut Context {
    let offset = offset_of!(Context, verbs) + offset_of!(verbs::Context, context);
    // SAFETY: per the contract, stepping back `offset` bytes stays inside
    // the same allocation and lands on the enclosing `Context`.
    unsafe { ibctx.byte_sub(offset) }.cast()
}

/// `verbs_context_ops.free_context`: undoes [`alloc_context`].
///
/// # Safety
///
/// `ibctx` is NULL or the `ibv_context` of a context [`alloc_context`]
/// returned, which the caller no longer uses (`ibv_close_device`).
unsafe extern "C" fn free_context(ibctx: *mut ibv::Context) {
    if ibctx.is_null() {
        return;
    }
    // SAFETY: contexts libibverbs hands roxe's ops were made by
    // `alloc_context`, so `ibctx` sits inside a `Context`.
    let ctx = unsafe { context_of(ibctx) };
    // SAFETY: `ctx` is live and unused from now on; `verbs_uninit_context`
    // releases what `_verbs_init_and_alloc_context` set up, and `ctx` came
    // from libibverbs' `calloc`.
    unsafe {
        verbs_uninit_context(&raw mut (*ctx).verbs);
        free(ctx.cast());
    }
}

/// `verbs_context_ops.query_device_ex`: the kernel's device attributes,
/// with the firmware version formatted and, when the kernel reports RSS
/// QPs, their hash function and fields (`rss_caps.rx_hash_function` and
/// `rx_hash_fields_mask`, which the kernel's response does not carry).
///
/// Returns 0 or a positive errno, the convention of this op.
///
/// # Safety
///
/// As for libibverbs' `ibv_query_device_ex`: `context` is an open roxe
/// context, `input` is NULL or readable, and `attr` is writable for
/// `attr_size` bytes.
unsafe extern "C" fn query_device_ex(
    context: *mut ibv::Context,
    input: *const ibv::QueryDeviceExInput,
    attr: *mut ibv::DeviceAttrEx,
    attr_size: usize,
) -> c_int {
    let mut resp = uverbs::ExQueryDeviceResp::default();
    let mut resp_size = size_of_val(&resp);
    // SAFETY: the arguments are valid per this function's contract; `resp`
    // is writable for `resp_size` bytes.
    let ret = unsafe {
        ibv_cmd_query_device_any(
            context,
            input,
            attr,
            attr_size,
            &raw mut resp,
            &raw mut resp_size,
        )
    };
    if ret != 0 {
        return ret;
    }
    // SAFETY: `ibv_cmd_query_device_any` succeeded, so `attr_size` is at
    // least `sizeof(attr->orig_attr)` (it fails with EINVAL otherwise) and it
    // has just written that struct. `orig_attr` is the first field, so `attr`
    // points to a writable `ibv_device_attr` that the caller does not touch
    // during the call.
    let fw_ver: &mut [c_char; 64] = unsafe { &mut (*attr.cast::<ibv::DeviceAttr>()).fw_ver };
    attr::format_fw_ver(resp.base.fw_ver, fw_ver);
    // The kernel's `ib_uverbs_rss_caps` has no room for the hash function
    // and fields of RSS QPs, so libibverbs leaves them alone; roxe's are
    // fixed, and reported when the kernel reports RSS QPs at all (as
    // libibverbs copies the rest of `rss_caps`: when both the caller's
    // buffer and the kernel's response reach that far).
    let rss_end = offset_of!(ibv::DeviceAttrEx, rss_caps) + size_of::<ibv::RssCaps>();
    let kernel_rss_end =
        offset_of!(uverbs::ExQueryDeviceResp, rss_caps) + size_of::<uverbs::RssCaps>();
    if attr_size >= rss_end && resp_size >= kernel_rss_end {
        if let Some(caps) = crate::rwq::rx_hash_caps(resp.rss_caps.supported_qpts) {
            // SAFETY: `attr` is writable for `attr_size` bytes (the
            // contract), which cover `rss_caps` (checked); the caller does
            // not touch it during the call, and no reference into it is
            // alive any more.
            unsafe {
                let rss = &raw mut (*attr).rss_caps;
                (*rss).rx_hash_function = caps.function;
                (*rss).rx_hash_fields_mask = caps.fields;
            }
        }
    }
    0
}

/// `verbs_context_ops.query_port`: the kernel's port attributes.
///
/// Returns 0 or a positive errno.
///
/// # Safety
///
/// `context` is an open roxe context and `port_attr` points to a writable
/// `struct ibv_port_attr` (libibverbs' `__lib_query_port` guarantees the
/// full size).
unsafe extern "C" fn query_port(
    context: *mut ibv::Context,
    port_num: u8,
    port_attr: *mut ibv::PortAttr,
) -> c_int {
    let mut cmd = ibv::QueryPort::default();
    // SAFETY: valid per this function's contract; `cmd` is writable for the
    // size passed.
    unsafe {
        ibv_cmd_query_port(
            context,
            port_num,
            port_attr,
            &raw mut cmd,
            size_of_val(&cmd),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The XRC ops reach libibverbs: `verbs_set_ops` copies only the
    /// entries that are set, and every one left NULL stays libibverbs'
    /// `EOPNOTSUPP` dummy.
    #[test]
    fn the_xrc_ops_are_set() {
        let o = &CONTEXT_OPS;
        assert!(o.open_xrcd.is_some() && o.close_xrcd.is_some());
        assert!(o.create_srq_ex.is_some() && o.get_srq_num.is_some());
        assert!(o.open_qp.is_some() && o.create_qp_ex.is_some());
        // Still unsupported.
        assert!(o.post_srq_ops.is_none());
    }

    /// The WQ and indirection table ops reach libibverbs, whose inline
    /// verbs call them through `verbs_context`.
    #[test]
    fn the_wq_ops_are_set() {
        let o = &CONTEXT_OPS;
        assert!(o.create_wq.is_some() && o.modify_wq.is_some() && o.destroy_wq.is_some());
        assert!(o.create_rwq_ind_table.is_some() && o.destroy_rwq_ind_table.is_some());
    }

    /// Flow steering reaches libibverbs, which calls these through
    /// `verbs_context`'s `ibv_create_flow` and `ibv_destroy_flow`; flow
    /// actions and counters stay unsupported.
    #[test]
    fn the_flow_ops_are_set() {
        let o = &CONTEXT_OPS;
        assert!(o.create_flow.is_some() && o.destroy_flow.is_some());
        assert!(o.create_flow_action_esp.is_none() && o.destroy_flow_action.is_none());
        assert!(o.modify_flow_action_esp.is_none());
        assert!(o.attach_counters_point_flow.is_none() && o.create_counters.is_none());
    }
}
