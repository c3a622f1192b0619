// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Provider structures from the private `libibverbs/driver.h`, and
//! `struct verbs_context` from `verbs.h`.
//!
//! rdma-core says of `verbs_device_ops`, `verbs_device` and
//! `verbs_context_ops`: "Must change the PRIVATE IBVERBS_PRIVATE_ symbol if
//! this is changed". A provider built for `IBVERBS_PRIVATE_34` can rely on
//! these layouts for every libibverbs that exports that version.

use core::ffi::{c_char, c_int, c_uint, c_void};
use core::mem::ManuallyDrop;
use core::sync::atomic::AtomicI32;

use super::OpaqueFn;
use super::ibv;

/// `struct list_node` from ccan's `list.h`.
#[repr(C)]
pub struct ListNode {
    /// `next`.
    pub next: *mut ListNode,
    /// `prev`.
    pub prev: *mut ListNode,
}

/// `VERBS_MATCH_SENTINEL`: ends a match table.
pub const MATCH_SENTINEL: u8 = 0;

/// The anonymous union `u` of `struct verbs_match_ent`.
#[repr(C)]
pub union MatchEntU {
    /// `modalias`: an `fnmatch` pattern, for `VERBS_MATCH_MODALIAS`.
    pub modalias: *const c_char,
    /// `driver_id`, for `VERBS_MATCH_DRIVER_ID`.
    pub driver_id: u64,
}

/// `struct verbs_match_ent`: one entry of a provider's match table.
#[repr(C)]
pub struct MatchEnt {
    /// `driver_data`.
    pub driver_data: *mut c_void,
    /// `u`.
    pub u: MatchEntU,
    /// `vendor`, for `VERBS_MATCH_PCI`.
    pub vendor: u16,
    /// `device`, for `VERBS_MATCH_PCI`.
    pub device: u16,
    /// `kind`: one of the `VERBS_MATCH_*` values.
    pub kind: u8,
}

impl MatchEnt {
    /// The all-zero entry that terminates a match table (`{}` in C).
    pub const SENTINEL: Self = Self {
        driver_data: core::ptr::null_mut(),
        u: MatchEntU { driver_id: 0 },
        vendor: 0,
        device: 0,
        kind: MATCH_SENTINEL,
    };
}

/// glibc's `struct timespec` on x86_64.
#[repr(C)]
pub struct Timespec {
    /// `tv_sec`.
    pub tv_sec: i64,
    /// `tv_nsec`.
    pub tv_nsec: i64,
}

/// `struct verbs_sysfs_dev`: an RDMA device libibverbs found, before a
/// provider claims it.
#[repr(C)]
pub struct SysfsDev {
    /// `entry`.
    pub entry: ListNode,
    /// `provider_data`.
    pub provider_data: *mut c_void,
    /// `match`: the match-table entry that matched, or NULL.
    pub match_: *const MatchEnt,
    /// `flags` (`VSYSFS_READ_*`).
    pub flags: c_uint,
    /// `sysfs_name`: the uverbs device name, for example `uverbs0`.
    pub sysfs_name: [c_char; ibv::SYSFS_NAME_MAX],
    /// `sysfs_cdev` (`dev_t`).
    pub sysfs_cdev: u64,
    /// `ibdev_name`: the kernel's IB device name, for example `roxe0`.
    pub ibdev_name: [c_char; ibv::SYSFS_NAME_MAX],
    /// `ibdev_path`: `<sysfs>/class/infiniband/<ibdev_name>`, NUL-terminated.
    pub ibdev_path: [c_char; ibv::SYSFS_PATH_MAX],
    /// `modalias`.
    pub modalias: [c_char; 512],
    /// `node_guid`.
    pub node_guid: u64,
    /// `driver_id`: the kernel's `enum rdma_driver_id`, from netlink; always
    /// `RDMA_DRIVER_UNKNOWN` when libibverbs fell back to scanning sysfs.
    pub driver_id: u32,
    /// `node_type` (`enum ibv_node_type`).
    pub node_type: c_int,
    /// `ibdev_idx`.
    pub ibdev_idx: c_int,
    /// `num_ports`.
    pub num_ports: u32,
    /// `abi_ver`: the device's uverbs ABI version (`ib_device_ops.uverbs_abi_ver`).
    pub abi_ver: u32,
    /// `time_created`.
    pub time_created: Timespec,
}

/// `struct verbs_device_ops`: what a provider registers with
/// `verbs_register_driver_34`.
#[repr(C)]
pub struct DeviceOps {
    /// `name`.
    pub name: *const c_char,
    /// `match_min_abi_version`.
    pub match_min_abi_version: u32,
    /// `match_max_abi_version`.
    pub match_max_abi_version: u32,
    /// `match_table`: must not be NULL (see `ffi`), may hold only the sentinel.
    pub match_table: *const MatchEnt,
    /// `static_providers`.
    pub static_providers: *const *const DeviceOps,
    /// `match_device`.
    pub match_device: Option<unsafe extern "C" fn(sysfs_dev: *mut SysfsDev) -> bool>,
    /// `alloc_context`.
    pub alloc_context: Option<
        unsafe extern "C" fn(
            device: *mut ibv::Device,
            cmd_fd: c_int,
            private_data: *mut c_void,
        ) -> *mut Context,
    >,
    /// `import_context`.
    pub import_context:
        Option<unsafe extern "C" fn(device: *mut ibv::Device, cmd_fd: c_int) -> *mut Context>,
    /// `alloc_device`.
    pub alloc_device: Option<unsafe extern "C" fn(sysfs_dev: *mut SysfsDev) -> *mut Device>,
    /// `uninit_device`.
    pub uninit_device: Option<unsafe extern "C" fn(device: *mut Device)>,
}

/// `struct verbs_device`: a provider's device; `ibv_device` comes first.
#[repr(C)]
pub struct Device {
    /// `device`.
    pub device: ibv::Device,
    /// `ops`.
    pub ops: *const DeviceOps,
    /// `refcount` (`atomic_int`).
    pub refcount: AtomicI32,
    /// `entry`.
    pub entry: ListNode,
    /// `sysfs`.
    pub sysfs: *mut SysfsDev,
    /// `core_support`.
    pub core_support: u64,
}

/// Declares `struct verbs_context_ops` and its all-NULL value.
macro_rules! context_ops {
    ($($(#[$doc:meta])* $name:ident: $ty:ty,)*) => {
        /// `struct verbs_context_ops`: every op a provider can implement.
        ///
        /// `verbs_set_ops` copies only the non-NULL entries. An op left NULL
        /// keeps libibverbs' dummy from `verbs_dummy_ops`, which fails with
        /// `EOPNOTSUPP` (or does nothing, for the `void` ones).
        #[repr(C)]
        pub struct ContextOps {
            $($(#[$doc])* pub $name: $ty,)*
        }

        impl ContextOps {
            /// The table with every op NULL.
            pub const EMPTY: Self = Self { $($name: None,)* };
        }
    };
}

context_ops! {
    /// `advise_mr`: `ibv_advise_mr`, an errno on failure.
    advise_mr: Option<
        unsafe extern "C" fn(
            pd: *mut ibv::Pd,
            advice: u32,
            flags: u32,
            sg_list: *mut ibv::Sge,
            num_sge: u32,
        ) -> c_int,
    >,
    /// `alloc_dm`.
    alloc_dm: OpaqueFn,
    /// `alloc_mw`: returns NULL with `errno` set on failure.
    alloc_mw: Option<unsafe extern "C" fn(pd: *mut ibv::Pd, mw_type: ibv::MwType) -> *mut ibv::Mw>,
    /// `alloc_null_mr`.
    alloc_null_mr: OpaqueFn,
    /// `alloc_parent_domain`: returns NULL with `errno` set on failure.
    alloc_parent_domain:
        Option<unsafe extern "C" fn(context: *mut ibv::Context, attr: *mut ibv::ParentDomainInitAttr) -> *mut ibv::Pd>,
    /// `alloc_pd`: returns NULL with `errno` set on failure.
    alloc_pd: Option<unsafe extern "C" fn(context: *mut ibv::Context) -> *mut ibv::Pd>,
    /// `alloc_td`.
    alloc_td: OpaqueFn,
    /// `async_event`.
    async_event: OpaqueFn,
    /// `attach_counters_point_flow`.
    attach_counters_point_flow: OpaqueFn,
    /// `attach_mcast`: returns 0 or a positive errno.
    attach_mcast:
        Option<unsafe extern "C" fn(qp: *mut ibv::Qp, gid: *const ibv::Gid, lid: u16) -> c_int>,
    /// `bind_mw`: returns 0 or a positive errno. libibverbs' inline
    /// `ibv_bind_mw` calls it (through `ibv_context_ops`, which
    /// `verbs_set_ops` fills in too) after its own checks.
    bind_mw: Option<
        unsafe extern "C" fn(qp: *mut ibv::Qp, mw: *mut ibv::Mw, mw_bind: *mut ibv::MwBind) -> c_int,
    >,
    /// `close_xrcd`: returns 0 or a positive errno.
    close_xrcd: Option<unsafe extern "C" fn(xrcd: *mut ibv::Xrcd) -> c_int>,
    /// `cq_event`.
    cq_event: OpaqueFn,
    /// `create_ah`: returns NULL with `errno` set on failure.
    create_ah: Option<unsafe extern "C" fn(pd: *mut ibv::Pd, attr: *mut ibv::AhAttr) -> *mut ibv::Ah>,
    /// `create_counters`.
    create_counters: OpaqueFn,
    /// `create_cq`: returns NULL with `errno` set on failure.
    create_cq: Option<
        unsafe extern "C" fn(
            context: *mut ibv::Context,
            cqe: c_int,
            channel: *mut ibv::CompChannel,
            comp_vector: c_int,
        ) -> *mut ibv::Cq,
    >,
    /// `create_cq_ex`: returns NULL with `errno` set on failure.
    create_cq_ex: Option<
        unsafe extern "C" fn(
            context: *mut ibv::Context,
            init_attr: *mut ibv::CqInitAttrEx,
        ) -> *mut ibv::CqEx,
    >,
    /// `create_flow`: returns NULL with `errno` set on failure.
    /// libibverbs' inline `ibv_create_flow` calls it (as `verbs_context`'s
    /// `ibv_create_flow`, which `verbs_set_ops` fills in).
    create_flow: Option<
        unsafe extern "C" fn(qp: *mut ibv::Qp, flow_attr: *mut ibv::FlowAttr) -> *mut ibv::Flow,
    >,
    /// `create_flow_action_esp`.
    create_flow_action_esp: OpaqueFn,
    /// `create_qp`: returns NULL with `errno` set on failure.
    create_qp: Option<
        unsafe extern "C" fn(pd: *mut ibv::Pd, attr: *mut ibv::QpInitAttr) -> *mut ibv::Qp,
    >,
    /// `create_qp_ex`: returns NULL with `errno` set on failure.
    create_qp_ex: Option<
        unsafe extern "C" fn(
            context: *mut ibv::Context,
            attr: *mut ibv::QpInitAttrEx,
        ) -> *mut ibv::Qp,
    >,
    /// `create_rwq_ind_table`: returns NULL with `errno` set on failure.
    /// libibverbs' inline `ibv_create_rwq_ind_table` calls it.
    create_rwq_ind_table: Option<
        unsafe extern "C" fn(
            context: *mut ibv::Context,
            init_attr: *mut ibv::RwqIndTableInitAttr,
        ) -> *mut ibv::RwqIndTable,
    >,
    /// `create_srq`: returns NULL with `errno` set on failure.
    create_srq: Option<
        unsafe extern "C" fn(pd: *mut ibv::Pd, attr: *mut ibv::SrqInitAttr) -> *mut ibv::Srq,
    >,
    /// `create_srq_ex`: returns NULL with `errno` set on failure.
    /// libibverbs' inline `ibv_create_srq_ex` calls it for every SRQ but a
    /// basic one with no `comp_mask` bits besides PD and type.
    create_srq_ex: Option<
        unsafe extern "C" fn(
            context: *mut ibv::Context,
            attr: *mut ibv::SrqInitAttrEx,
        ) -> *mut ibv::Srq,
    >,
    /// `create_wq`: returns NULL with `errno` set on failure. libibverbs'
    /// inline `ibv_create_wq` calls it.
    create_wq: Option<
        unsafe extern "C" fn(
            context: *mut ibv::Context,
            wq_init_attr: *mut ibv::WqInitAttr,
        ) -> *mut ibv::Wq,
    >,
    /// `dealloc_mw`: returns 0 or a positive errno.
    dealloc_mw: Option<unsafe extern "C" fn(mw: *mut ibv::Mw) -> c_int>,
    /// `dealloc_pd`: returns 0 or a positive errno.
    dealloc_pd: Option<unsafe extern "C" fn(pd: *mut ibv::Pd) -> c_int>,
    /// `dealloc_td`.
    dealloc_td: OpaqueFn,
    /// `dereg_mr`: returns 0 or a positive errno.
    dereg_mr: Option<unsafe extern "C" fn(vmr: *mut Mr) -> c_int>,
    /// `destroy_ah`: returns 0 or a positive errno.
    destroy_ah: Option<unsafe extern "C" fn(ah: *mut ibv::Ah) -> c_int>,
    /// `destroy_counters`.
    destroy_counters: OpaqueFn,
    /// `destroy_cq`: returns 0 or a positive errno.
    destroy_cq: Option<unsafe extern "C" fn(cq: *mut ibv::Cq) -> c_int>,
    /// `destroy_flow`: returns 0 or a positive errno. libibverbs' inline
    /// `ibv_destroy_flow` calls it (as `verbs_context`'s
    /// `ibv_destroy_flow`).
    destroy_flow: Option<unsafe extern "C" fn(flow: *mut ibv::Flow) -> c_int>,
    /// `destroy_flow_action`.
    destroy_flow_action: OpaqueFn,
    /// `destroy_qp`: returns 0 or a positive errno.
    destroy_qp: Option<unsafe extern "C" fn(qp: *mut ibv::Qp) -> c_int>,
    /// `destroy_rwq_ind_table`: returns 0 or a positive errno.
    destroy_rwq_ind_table: Option<unsafe extern "C" fn(rwq_ind_table: *mut ibv::RwqIndTable) -> c_int>,
    /// `destroy_srq`: returns 0 or a positive errno.
    destroy_srq: Option<unsafe extern "C" fn(srq: *mut ibv::Srq) -> c_int>,
    /// `destroy_wq`: returns 0 or a positive errno.
    destroy_wq: Option<unsafe extern "C" fn(wq: *mut ibv::Wq) -> c_int>,
    /// `detach_mcast`: returns 0 or a positive errno.
    detach_mcast:
        Option<unsafe extern "C" fn(qp: *mut ibv::Qp, gid: *const ibv::Gid, lid: u16) -> c_int>,
    /// `free_context`: releases everything `alloc_context` made. libibverbs'
    /// dummy does nothing, so a provider must set it or leak the context.
    free_context: Option<unsafe extern "C" fn(context: *mut ibv::Context)>,
    /// `free_dm`.
    free_dm: OpaqueFn,
    /// `get_srq_num`: returns 0 or a positive errno. libibverbs' inline
    /// `ibv_get_srq_num` calls it for any SRQ of the context.
    get_srq_num: Option<unsafe extern "C" fn(srq: *mut ibv::Srq, srq_num: *mut u32) -> c_int>,
    /// `import_dm`.
    import_dm: OpaqueFn,
    /// `import_mr`: NULL with `errno` set on failure.
    import_mr: Option<unsafe extern "C" fn(pd: *mut ibv::Pd, mr_handle: u32) -> *mut ibv::Mr>,
    /// `import_pd`: NULL with `errno` set on failure.
    import_pd: Option<unsafe extern "C" fn(context: *mut ibv::Context, pd_handle: u32) -> *mut ibv::Pd>,
    /// `modify_cq`.
    modify_cq: OpaqueFn,
    /// `modify_flow_action_esp`.
    modify_flow_action_esp: OpaqueFn,
    /// `modify_qp`: returns 0 or a positive errno.
    modify_qp: Option<
        unsafe extern "C" fn(qp: *mut ibv::Qp, attr: *mut ibv::QpAttr, attr_mask: c_int) -> c_int,
    >,
    /// `modify_qp_rate_limit`.
    modify_qp_rate_limit: OpaqueFn,
    /// `modify_srq`: returns 0 or a positive errno.
    modify_srq: Option<
        unsafe extern "C" fn(srq: *mut ibv::Srq, attr: *mut ibv::SrqAttr, attr_mask: c_int) -> c_int,
    >,
    /// `modify_wq`: returns 0 or a positive errno.
    modify_wq: Option<unsafe extern "C" fn(wq: *mut ibv::Wq, wq_attr: *mut ibv::WqAttr) -> c_int>,
    /// `open_qp`: returns NULL with `errno` set on failure.
    open_qp: Option<
        unsafe extern "C" fn(context: *mut ibv::Context, attr: *mut ibv::QpOpenAttr) -> *mut ibv::Qp,
    >,
    /// `open_xrcd`: returns NULL with `errno` set on failure.
    open_xrcd: Option<
        unsafe extern "C" fn(
            context: *mut ibv::Context,
            attr: *mut ibv::XrcdInitAttr,
        ) -> *mut ibv::Xrcd,
    >,
    /// `poll_cq`: returns the number of completions written, or -1 with
    /// `errno` set.
    poll_cq: Option<
        unsafe extern "C" fn(cq: *mut ibv::Cq, num_entries: c_int, wc: *mut ibv::Wc) -> c_int,
    >,
    /// `post_recv`: returns 0, or a positive errno with `*bad_wr` set.
    post_recv: Option<
        unsafe extern "C" fn(
            qp: *mut ibv::Qp,
            wr: *mut ibv::RecvWr,
            bad_wr: *mut *mut ibv::RecvWr,
        ) -> c_int,
    >,
    /// `post_send`: returns 0, or a positive errno with `*bad_wr` set.
    post_send: Option<
        unsafe extern "C" fn(
            qp: *mut ibv::Qp,
            wr: *mut ibv::SendWr,
            bad_wr: *mut *mut ibv::SendWr,
        ) -> c_int,
    >,
    /// `post_srq_ops`.
    post_srq_ops: OpaqueFn,
    /// `post_srq_recv`: returns 0, or a positive errno with `*bad_wr` set.
    post_srq_recv: Option<
        unsafe extern "C" fn(
            srq: *mut ibv::Srq,
            wr: *mut ibv::RecvWr,
            bad_wr: *mut *mut ibv::RecvWr,
        ) -> c_int,
    >,
    /// `query_device_ex`: returns 0 or a positive errno.
    query_device_ex: Option<
        unsafe extern "C" fn(
            context: *mut ibv::Context,
            input: *const ibv::QueryDeviceExInput,
            attr: *mut ibv::DeviceAttrEx,
            attr_size: usize,
        ) -> c_int,
    >,
    /// `query_ece`.
    query_ece: OpaqueFn,
    /// `query_port`: returns 0 or a positive errno.
    query_port: Option<
        unsafe extern "C" fn(
            context: *mut ibv::Context,
            port_num: u8,
            port_attr: *mut ibv::PortAttr,
        ) -> c_int,
    >,
    /// `query_qp`: returns 0 or a positive errno.
    query_qp: Option<
        unsafe extern "C" fn(
            qp: *mut ibv::Qp,
            attr: *mut ibv::QpAttr,
            attr_mask: c_int,
            init_attr: *mut ibv::QpInitAttr,
        ) -> c_int,
    >,
    /// `query_qp_data_in_order`.
    query_qp_data_in_order: OpaqueFn,
    /// `query_rt_values`.
    query_rt_values: OpaqueFn,
    /// `query_srq`: returns 0 or a positive errno.
    query_srq: Option<unsafe extern "C" fn(srq: *mut ibv::Srq, attr: *mut ibv::SrqAttr) -> c_int>,
    /// `read_counters`.
    read_counters: OpaqueFn,
    /// `reg_dm_mr`.
    reg_dm_mr: OpaqueFn,
    /// `reg_dmabuf_mr`: returns NULL with `errno` set on failure.
    reg_dmabuf_mr: Option<
        unsafe extern "C" fn(
            pd: *mut ibv::Pd,
            offset: u64,
            length: usize,
            iova: u64,
            fd: c_int,
            access: c_int,
        ) -> *mut ibv::Mr,
    >,
    /// `reg_mr`: returns NULL with `errno` set on failure.
    reg_mr: Option<
        unsafe extern "C" fn(
            pd: *mut ibv::Pd,
            addr: *mut c_void,
            length: usize,
            hca_va: u64,
            access: c_int,
        ) -> *mut ibv::Mr,
    >,
    /// `req_notify_cq`: returns 0 or a positive errno.
    req_notify_cq: Option<unsafe extern "C" fn(cq: *mut ibv::Cq, solicited_only: c_int) -> c_int>,
    /// `rereg_mr`: returns 0, or non-zero with `errno` set (libibverbs
    /// turns any failure into `IBV_REREG_MR_ERR_CMD`).
    rereg_mr: Option<
        unsafe extern "C" fn(
            vmr: *mut Mr,
            flags: c_int,
            pd: *mut ibv::Pd,
            addr: *mut c_void,
            length: usize,
            access: c_int,
        ) -> c_int,
    >,
    /// `resize_cq`: returns 0 or a positive errno.
    resize_cq: Option<unsafe extern "C" fn(cq: *mut ibv::Cq, cqe: c_int) -> c_int>,
    /// `set_ece`.
    set_ece: OpaqueFn,
    /// `unimport_dm`.
    unimport_dm: OpaqueFn,
    /// `unimport_mr`.
    unimport_mr: Option<unsafe extern "C" fn(mr: *mut ibv::Mr)>,
    /// `unimport_pd`.
    unimport_pd: Option<unsafe extern "C" fn(pd: *mut ibv::Pd)>,
}

/// `struct verbs_context` (public `verbs.h`): libibverbs' extended context.
///
/// libibverbs owns every field; a provider embeds it in its own context and
/// hands it to `_verbs_init_and_alloc_context`, `verbs_set_ops` and
/// `verbs_uninit_context`.
#[repr(C)]
pub struct Context {
    /// `query_port`.
    pub query_port: OpaqueFn,
    /// `advise_mr`.
    pub advise_mr: OpaqueFn,
    /// `alloc_null_mr`.
    pub alloc_null_mr: OpaqueFn,
    /// `read_counters`.
    pub read_counters: OpaqueFn,
    /// `attach_counters_point_flow`.
    pub attach_counters_point_flow: OpaqueFn,
    /// `create_counters`.
    pub create_counters: OpaqueFn,
    /// `destroy_counters`.
    pub destroy_counters: OpaqueFn,
    /// `reg_dm_mr`.
    pub reg_dm_mr: OpaqueFn,
    /// `alloc_dm`.
    pub alloc_dm: OpaqueFn,
    /// `free_dm`.
    pub free_dm: OpaqueFn,
    /// `modify_flow_action_esp`.
    pub modify_flow_action_esp: OpaqueFn,
    /// `destroy_flow_action`.
    pub destroy_flow_action: OpaqueFn,
    /// `create_flow_action_esp`.
    pub create_flow_action_esp: OpaqueFn,
    /// `modify_qp_rate_limit`.
    pub modify_qp_rate_limit: OpaqueFn,
    /// `alloc_parent_domain`.
    pub alloc_parent_domain: OpaqueFn,
    /// `dealloc_td`.
    pub dealloc_td: OpaqueFn,
    /// `alloc_td`.
    pub alloc_td: OpaqueFn,
    /// `modify_cq`.
    pub modify_cq: OpaqueFn,
    /// `post_srq_ops`.
    pub post_srq_ops: OpaqueFn,
    /// `destroy_rwq_ind_table`.
    pub destroy_rwq_ind_table: OpaqueFn,
    /// `create_rwq_ind_table`.
    pub create_rwq_ind_table: OpaqueFn,
    /// `destroy_wq`.
    pub destroy_wq: OpaqueFn,
    /// `modify_wq`.
    pub modify_wq: OpaqueFn,
    /// `create_wq`.
    pub create_wq: OpaqueFn,
    /// `query_rt_values`.
    pub query_rt_values: OpaqueFn,
    /// `create_cq_ex`.
    pub create_cq_ex: OpaqueFn,
    /// `priv`: libibverbs' private `struct verbs_ex_private`.
    pub priv_: *mut c_void,
    /// `query_device_ex`.
    pub query_device_ex: OpaqueFn,
    /// `ibv_destroy_flow`.
    pub ibv_destroy_flow: OpaqueFn,
    /// `ABI_placeholder2`.
    pub abi_placeholder2: OpaqueFn,
    /// `ibv_create_flow`.
    pub ibv_create_flow: OpaqueFn,
    /// `ABI_placeholder1`.
    pub abi_placeholder1: OpaqueFn,
    /// `open_qp`.
    pub open_qp: OpaqueFn,
    /// `create_qp_ex`.
    pub create_qp_ex: OpaqueFn,
    /// `get_srq_num`.
    pub get_srq_num: OpaqueFn,
    /// `create_srq_ex`.
    pub create_srq_ex: OpaqueFn,
    /// `open_xrcd`.
    pub open_xrcd: OpaqueFn,
    /// `close_xrcd`.
    pub close_xrcd: OpaqueFn,
    /// `_ABI_placeholder3`.
    pub _abi_placeholder3: u64,
    /// `sz`: must come immediately before `context`.
    pub sz: usize,
    /// `context`: must be the last field.
    pub context: ibv::Context,
}

/// `enum ibv_mr_type`: `IBV_MR_TYPE_MR`, a memory region over user memory.
pub const MR_TYPE_MR: c_int = 0;

/// `struct verbs_mr`: a provider's memory region; `ibv_mr` comes first.
#[repr(C)]
pub struct Mr {
    /// `ibv_mr`.
    pub ibv_mr: ibv::Mr,
    /// `mr_type` (`enum ibv_mr_type`).
    pub mr_type: c_int,
    /// `access`: the access flags the MR was registered with.
    pub access: c_int,
}

impl Mr {
    /// The all-zero value.
    pub const ZERO: Self = Self {
        ibv_mr: ibv::Mr::ZERO,
        mr_type: 0,
        access: 0,
    };
}

/// `struct verbs_cq`: a provider's CQ, seen as a plain or an extended CQ.
///
/// `ibv_cq` is a prefix of `ibv_cq_ex`, and libibverbs converts between the
/// two by casting (`ibv_cq_ex_to_cq`), so every CQ roxe makes is the full
/// size, whichever verb created it.
#[repr(C)]
pub union Cq {
    /// `cq`.
    pub cq: ManuallyDrop<ibv::Cq>,
    /// `cq_ex`.
    pub cq_ex: ManuallyDrop<ibv::CqEx>,
}

impl Cq {
    /// The all-zero value (the larger member zeroed).
    pub const ZERO: Self = Self {
        cq_ex: ManuallyDrop::new(ibv::CqEx::ZERO),
    };
}

/// `VERBS_QP_XRCD` of `enum verbs_qp_mask`: `xrcd` is valid (an XRC
/// receive QP).
pub const QP_XRCD: u32 = 1 << 0;
/// `VERBS_QP_EX`: `qp_ex` is valid, and `ibv_qp_to_qp_ex` returns it.
pub const QP_EX: u32 = 1 << 1;

/// `struct verbs_qp`: a provider's QP, seen as a plain or an extended QP,
/// then libibverbs' own fields.
///
/// `ibv_qp_to_qp_ex` reads `comp_mask` of every QP it is given, so every
/// QP roxe makes is a whole `verbs_qp`, whichever verb created it.
#[repr(C)]
pub struct Qp {
    /// The anonymous union of `qp` and `qp_ex`.
    pub qp: QpUnion,
    /// `comp_mask` (`enum verbs_qp_mask`). libibverbs' create commands
    /// reset it; roxe then sets [`QP_EX`] on QPs created with
    /// `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS`.
    pub comp_mask: u32,
    /// `xrcd`: an XRC receive QP's domain, with [`QP_XRCD`].
    pub xrcd: *mut Xrcd,
}

/// The anonymous union at the start of `struct verbs_qp`.
#[repr(C)]
pub union QpUnion {
    /// `qp`.
    pub qp: ManuallyDrop<ibv::Qp>,
    /// `qp_ex`.
    pub qp_ex: ManuallyDrop<ibv::QpEx>,
}

impl Qp {
    /// The all-zero value (the larger member zeroed).
    pub const ZERO: Self = Self {
        qp: QpUnion {
            qp_ex: ManuallyDrop::new(ibv::QpEx::ZERO),
        },
        comp_mask: 0,
        xrcd: core::ptr::null_mut(),
    };
}

/// `VERBS_XRCD_HANDLE` of `enum verbs_xrcd_mask`: `handle` is valid.
pub const XRCD_HANDLE: u32 = 1 << 0;

/// `struct verbs_xrcd`: a provider's XRC domain; `ibv_xrcd` comes first.
///
/// `ibv_cmd_open_xrcd` fills it in; the other commands that name a domain
/// (XRC SRQs, XRC receive QPs, `ibv_open_qp`) send its `handle`.
#[repr(C)]
pub struct Xrcd {
    /// `xrcd`.
    pub xrcd: ibv::Xrcd,
    /// `comp_mask` (`enum verbs_xrcd_mask`).
    pub comp_mask: u32,
    /// `handle`: the kernel's handle.
    pub handle: u32,
}

impl Xrcd {
    /// The all-zero value.
    pub const ZERO: Self = Self {
        xrcd: ibv::Xrcd {
            context: core::ptr::null_mut(),
        },
        comp_mask: 0,
        handle: 0,
    };
}

/// `struct verbs_srq`: a provider's SRQ; `ibv_srq` comes first, then what
/// `ibv_cmd_create_srq_ex` records of an extended SRQ.
///
/// libibverbs reads none of these fields itself, but its inline
/// `ibv_get_srq_num` reaches every SRQ, so every SRQ roxe makes is a whole
/// `verbs_srq`, whichever verb created it.
#[repr(C)]
pub struct Srq {
    /// `srq`.
    pub srq: ibv::Srq,
    /// `srq_type` (`enum ibv_srq_type`).
    pub srq_type: u32,
    /// `xrcd`: an XRC SRQ's domain.
    pub xrcd: *mut Xrcd,
    /// `cq`: the CQ `IBV_SRQ_INIT_ATTR_CQ` named.
    pub cq: *mut ibv::Cq,
    /// `srq_num`: the SRQ number, which `ibv_cmd_create_srq_ex` sets for
    /// an XRC SRQ.
    pub srq_num: u32,
}

impl Srq {
    /// The all-zero value.
    pub const ZERO: Self = Self {
        srq: ibv::Srq::ZERO,
        srq_type: 0,
        xrcd: core::ptr::null_mut(),
        cq: core::ptr::null_mut(),
        srq_num: 0,
    };
}
