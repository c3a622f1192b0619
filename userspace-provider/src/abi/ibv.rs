// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Public `libibverbs/verbs.h` structures, and the `kern-abi.h` command
//! wrappers roxe hands to libibverbs.

use core::ffi::{c_char, c_int, c_uint, c_void};

use super::OpaqueFn;
use super::uverbs;

/// `IBV_SYSFS_NAME_MAX`: size of the device name buffers.
pub const SYSFS_NAME_MAX: usize = 64;

/// `IBV_SYSFS_PATH_MAX`: size of the sysfs path buffers.
pub const SYSFS_PATH_MAX: usize = 256;

/// `struct _ibv_device_ops`: two legacy slots that must stay NULL.
#[repr(C)]
pub struct DeviceOpsCompat {
    /// `_dummy1`.
    pub _dummy1: OpaqueFn,
    /// `_dummy2`.
    pub _dummy2: OpaqueFn,
}

/// `struct ibv_device`. libibverbs fills it in after `alloc_device`.
#[repr(C)]
pub struct Device {
    /// `_ops`.
    pub _ops: DeviceOpsCompat,
    /// `node_type` (`enum ibv_node_type`).
    pub node_type: c_int,
    /// `transport_type` (`enum ibv_transport_type`).
    pub transport_type: c_int,
    /// `name`: the kernel's IB device name, for example `roxe0`.
    pub name: [c_char; SYSFS_NAME_MAX],
    /// `dev_name`: the uverbs device name, for example `uverbs0`.
    pub dev_name: [c_char; SYSFS_NAME_MAX],
    /// `dev_path`: path of the `infiniband_verbs` class device in sysfs.
    pub dev_path: [c_char; SYSFS_PATH_MAX],
    /// `ibdev_path`: path of the `infiniband` class device in sysfs.
    pub ibdev_path: [c_char; SYSFS_PATH_MAX],
}

/// `struct ibv_context_ops`: the legacy op table inside `ibv_context`.
///
/// libibverbs' `verbs_set_ops` fills it from `verbs_context_ops`; providers
/// never write it directly.
#[repr(C)]
pub struct ContextOps {
    /// `_compat_query_device`.
    pub _compat_query_device: OpaqueFn,
    /// `_compat_query_port`.
    pub _compat_query_port: OpaqueFn,
    /// `_compat_alloc_pd`.
    pub _compat_alloc_pd: OpaqueFn,
    /// `_compat_dealloc_pd`.
    pub _compat_dealloc_pd: OpaqueFn,
    /// `_compat_reg_mr`.
    pub _compat_reg_mr: OpaqueFn,
    /// `_compat_rereg_mr`.
    pub _compat_rereg_mr: OpaqueFn,
    /// `_compat_dereg_mr`.
    pub _compat_dereg_mr: OpaqueFn,
    /// `alloc_mw`.
    pub alloc_mw: OpaqueFn,
    /// `bind_mw`.
    pub bind_mw: OpaqueFn,
    /// `dealloc_mw`.
    pub dealloc_mw: OpaqueFn,
    /// `_compat_create_cq`.
    pub _compat_create_cq: OpaqueFn,
    /// `poll_cq`.
    pub poll_cq: OpaqueFn,
    /// `req_notify_cq`.
    pub req_notify_cq: OpaqueFn,
    /// `_compat_cq_event`.
    pub _compat_cq_event: OpaqueFn,
    /// `_compat_resize_cq`.
    pub _compat_resize_cq: OpaqueFn,
    /// `_compat_destroy_cq`.
    pub _compat_destroy_cq: OpaqueFn,
    /// `_compat_create_srq`.
    pub _compat_create_srq: OpaqueFn,
    /// `_compat_modify_srq`.
    pub _compat_modify_srq: OpaqueFn,
    /// `_compat_query_srq`.
    pub _compat_query_srq: OpaqueFn,
    /// `_compat_destroy_srq`.
    pub _compat_destroy_srq: OpaqueFn,
    /// `post_srq_recv`.
    pub post_srq_recv: OpaqueFn,
    /// `_compat_create_qp`.
    pub _compat_create_qp: OpaqueFn,
    /// `_compat_query_qp`.
    pub _compat_query_qp: OpaqueFn,
    /// `_compat_modify_qp`.
    pub _compat_modify_qp: OpaqueFn,
    /// `_compat_destroy_qp`.
    pub _compat_destroy_qp: OpaqueFn,
    /// `post_send`.
    pub post_send: OpaqueFn,
    /// `post_recv`.
    pub post_recv: OpaqueFn,
    /// `_compat_create_ah`.
    pub _compat_create_ah: OpaqueFn,
    /// `_compat_destroy_ah`.
    pub _compat_destroy_ah: OpaqueFn,
    /// `_compat_attach_mcast`.
    pub _compat_attach_mcast: OpaqueFn,
    /// `_compat_detach_mcast`.
    pub _compat_detach_mcast: OpaqueFn,
    /// `_compat_async_event`.
    pub _compat_async_event: OpaqueFn,
}

/// glibc's `pthread_mutex_t` on x86_64: 40 opaque bytes, 8-byte aligned.
#[repr(C)]
pub struct PthreadMutex {
    _opaque: [u64; 5],
}

impl PthreadMutex {
    /// `PTHREAD_MUTEX_INITIALIZER`, which is all zero in glibc.
    pub const INITIALIZER: Self = Self { _opaque: [0; 5] };
}

/// glibc's `pthread_cond_t` on x86_64: 48 opaque bytes, 8-byte aligned.
#[repr(C)]
pub struct PthreadCond {
    _opaque: [u64; 6],
}

impl PthreadCond {
    /// `PTHREAD_COND_INITIALIZER`, which is all zero in glibc.
    pub const INITIALIZER: Self = Self { _opaque: [0; 6] };
}

/// `struct ibv_context`: the application-visible part of a context.
#[repr(C)]
pub struct Context {
    /// `device`.
    pub device: *mut Device,
    /// `ops`.
    pub ops: ContextOps,
    /// `cmd_fd`: the open uverbs character device.
    pub cmd_fd: c_int,
    /// `async_fd`.
    pub async_fd: c_int,
    /// `num_comp_vectors`.
    pub num_comp_vectors: c_int,
    /// `mutex`.
    pub mutex: PthreadMutex,
    /// `abi_compat`.
    pub abi_compat: *mut c_void,
}

/// `struct ibv_device_attr`.
#[repr(C)]
pub struct DeviceAttr {
    /// `fw_ver`: NUL-terminated firmware version text.
    pub fw_ver: [c_char; 64],
    /// `node_guid` (big endian).
    pub node_guid: u64,
    /// `sys_image_guid` (big endian).
    pub sys_image_guid: u64,
    /// `max_mr_size`.
    pub max_mr_size: u64,
    /// `page_size_cap`.
    pub page_size_cap: u64,
    /// `vendor_id`.
    pub vendor_id: u32,
    /// `vendor_part_id`.
    pub vendor_part_id: u32,
    /// `hw_ver`.
    pub hw_ver: u32,
    /// `max_qp`.
    pub max_qp: c_int,
    /// `max_qp_wr`.
    pub max_qp_wr: c_int,
    /// `device_cap_flags`.
    pub device_cap_flags: c_uint,
    /// `max_sge`.
    pub max_sge: c_int,
    /// `max_sge_rd`.
    pub max_sge_rd: c_int,
    /// `max_cq`.
    pub max_cq: c_int,
    /// `max_cqe`.
    pub max_cqe: c_int,
    /// `max_mr`.
    pub max_mr: c_int,
    /// `max_pd`.
    pub max_pd: c_int,
    /// `max_qp_rd_atom`.
    pub max_qp_rd_atom: c_int,
    /// `max_ee_rd_atom`.
    pub max_ee_rd_atom: c_int,
    /// `max_res_rd_atom`.
    pub max_res_rd_atom: c_int,
    /// `max_qp_init_rd_atom`.
    pub max_qp_init_rd_atom: c_int,
    /// `max_ee_init_rd_atom`.
    pub max_ee_init_rd_atom: c_int,
    /// `atomic_cap` (`enum ibv_atomic_cap`).
    pub atomic_cap: c_int,
    /// `max_ee`.
    pub max_ee: c_int,
    /// `max_rdd`.
    pub max_rdd: c_int,
    /// `max_mw`.
    pub max_mw: c_int,
    /// `max_raw_ipv6_qp`.
    pub max_raw_ipv6_qp: c_int,
    /// `max_raw_ethy_qp`.
    pub max_raw_ethy_qp: c_int,
    /// `max_mcast_grp`.
    pub max_mcast_grp: c_int,
    /// `max_mcast_qp_attach`.
    pub max_mcast_qp_attach: c_int,
    /// `max_total_mcast_qp_attach`.
    pub max_total_mcast_qp_attach: c_int,
    /// `max_ah`.
    pub max_ah: c_int,
    /// `max_fmr`.
    pub max_fmr: c_int,
    /// `max_map_per_fmr`.
    pub max_map_per_fmr: c_int,
    /// `max_srq`.
    pub max_srq: c_int,
    /// `max_srq_wr`.
    pub max_srq_wr: c_int,
    /// `max_srq_sge`.
    pub max_srq_sge: c_int,
    /// `max_pkeys`.
    pub max_pkeys: u16,
    /// `local_ca_ack_delay`.
    pub local_ca_ack_delay: u8,
    /// `phys_port_cnt`.
    pub phys_port_cnt: u8,
}

/// The anonymous `per_transport_caps` member of `struct ibv_odp_caps`.
#[repr(C)]
pub struct OdpPerTransportCaps {
    /// `rc_odp_caps`.
    pub rc_odp_caps: u32,
    /// `uc_odp_caps`.
    pub uc_odp_caps: u32,
    /// `ud_odp_caps`.
    pub ud_odp_caps: u32,
}

/// `struct ibv_odp_caps`.
#[repr(C)]
pub struct OdpCaps {
    /// `general_caps`.
    pub general_caps: u64,
    /// `per_transport_caps`.
    pub per_transport_caps: OdpPerTransportCaps,
}

/// `struct ibv_tso_caps`.
#[repr(C)]
pub struct TsoCaps {
    /// `max_tso`.
    pub max_tso: u32,
    /// `supported_qpts`.
    pub supported_qpts: u32,
}

/// `struct ibv_rss_caps`.
#[repr(C)]
pub struct RssCaps {
    /// `supported_qpts`.
    pub supported_qpts: u32,
    /// `max_rwq_indirection_tables`.
    pub max_rwq_indirection_tables: u32,
    /// `max_rwq_indirection_table_size`.
    pub max_rwq_indirection_table_size: u32,
    /// `rx_hash_fields_mask`.
    pub rx_hash_fields_mask: u64,
    /// `rx_hash_function`.
    pub rx_hash_function: u8,
}

/// `struct ibv_packet_pacing_caps`.
#[repr(C)]
pub struct PacketPacingCaps {
    /// `qp_rate_limit_min`.
    pub qp_rate_limit_min: u32,
    /// `qp_rate_limit_max` (kbit/s).
    pub qp_rate_limit_max: u32,
    /// `supported_qpts`.
    pub supported_qpts: u32,
}

/// `struct ibv_tm_caps`.
#[repr(C)]
pub struct TmCaps {
    /// `max_rndv_hdr_size`.
    pub max_rndv_hdr_size: u32,
    /// `max_num_tags`.
    pub max_num_tags: u32,
    /// `flags`.
    pub flags: u32,
    /// `max_ops`.
    pub max_ops: u32,
    /// `max_sge`.
    pub max_sge: u32,
}

/// `struct ibv_cq_moderation_caps`.
#[repr(C)]
pub struct CqModerationCaps {
    /// `max_cq_count`.
    pub max_cq_count: u16,
    /// `max_cq_period` (microseconds).
    pub max_cq_period: u16,
}

/// `struct ibv_pci_atomic_caps`.
#[repr(C)]
pub struct PciAtomicCaps {
    /// `fetch_add`.
    pub fetch_add: u16,
    /// `swap`.
    pub swap: u16,
    /// `compare_swap`.
    pub compare_swap: u16,
}

/// `struct ibv_device_attr_ex`.
///
/// Callers may pass a shorter buffer (as small as `orig_attr`); the
/// `query_device_ex` op receives its real size and must not write past it.
#[repr(C)]
pub struct DeviceAttrEx {
    /// `orig_attr`.
    pub orig_attr: DeviceAttr,
    /// `comp_mask`.
    pub comp_mask: u32,
    /// `odp_caps`.
    pub odp_caps: OdpCaps,
    /// `completion_timestamp_mask`.
    pub completion_timestamp_mask: u64,
    /// `hca_core_clock`.
    pub hca_core_clock: u64,
    /// `device_cap_flags_ex`.
    pub device_cap_flags_ex: u64,
    /// `tso_caps`.
    pub tso_caps: TsoCaps,
    /// `rss_caps`.
    pub rss_caps: RssCaps,
    /// `max_wq_type_rq`.
    pub max_wq_type_rq: u32,
    /// `packet_pacing_caps`.
    pub packet_pacing_caps: PacketPacingCaps,
    /// `raw_packet_caps`.
    pub raw_packet_caps: u32,
    /// `tm_caps`.
    pub tm_caps: TmCaps,
    /// `cq_mod_caps`.
    pub cq_mod_caps: CqModerationCaps,
    /// `max_dm_size`.
    pub max_dm_size: u64,
    /// `pci_atomic_caps`.
    pub pci_atomic_caps: PciAtomicCaps,
    /// `xrc_odp_caps`.
    pub xrc_odp_caps: u32,
    /// `phys_port_cnt_ex`.
    pub phys_port_cnt_ex: u32,
}

/// `struct ibv_port_attr`.
#[repr(C)]
pub struct PortAttr {
    /// `state` (`enum ibv_port_state`).
    pub state: c_int,
    /// `max_mtu` (`enum ibv_mtu`).
    pub max_mtu: c_int,
    /// `active_mtu` (`enum ibv_mtu`).
    pub active_mtu: c_int,
    /// `gid_tbl_len`.
    pub gid_tbl_len: c_int,
    /// `port_cap_flags`.
    pub port_cap_flags: u32,
    /// `max_msg_sz`.
    pub max_msg_sz: u32,
    /// `bad_pkey_cntr`.
    pub bad_pkey_cntr: u32,
    /// `qkey_viol_cntr`.
    pub qkey_viol_cntr: u32,
    /// `pkey_tbl_len`.
    pub pkey_tbl_len: u16,
    /// `lid`.
    pub lid: u16,
    /// `sm_lid`.
    pub sm_lid: u16,
    /// `lmc`.
    pub lmc: u8,
    /// `max_vl_num`.
    pub max_vl_num: u8,
    /// `sm_sl`.
    pub sm_sl: u8,
    /// `subnet_timeout`.
    pub subnet_timeout: u8,
    /// `init_type_reply`.
    pub init_type_reply: u8,
    /// `active_width`.
    pub active_width: u8,
    /// `active_speed`.
    pub active_speed: u8,
    /// `phys_state`.
    pub phys_state: u8,
    /// `link_layer`.
    pub link_layer: u8,
    /// `flags`.
    pub flags: u8,
    /// `port_cap_flags2`.
    pub port_cap_flags2: u16,
}

/// `struct ibv_query_device_ex_input`.
#[repr(C)]
pub struct QueryDeviceExInput {
    /// `comp_mask`.
    pub comp_mask: u32,
}

/// `struct ibv_get_context` from the private `kern-abi.h`: the legacy write
/// header followed by the kernel's `ib_uverbs_get_context`.
///
/// A provider with driver-private request data would append it after
/// `core_payload`; roxe has none yet.
#[repr(C)]
#[derive(Default)]
pub struct GetContext {
    /// `hdr`.
    pub hdr: uverbs::CmdHdr,
    /// `core_payload`.
    pub core_payload: uverbs::GetContext,
}

/// `struct ibv_query_port` from the private `kern-abi.h`.
#[repr(C)]
#[derive(Default)]
pub struct QueryPort {
    /// `hdr`.
    pub hdr: uverbs::CmdHdr,
    /// `core_payload`.
    pub core_payload: uverbs::QueryPort,
}

/// `IBV_REREG_MR_CHANGE_TRANSLATION` of `enum ibv_rereg_mr_flags`.
pub const REREG_MR_CHANGE_TRANSLATION: u32 = 1 << 0;
/// `IBV_REREG_MR_CHANGE_PD`.
pub const REREG_MR_CHANGE_PD: u32 = 1 << 1;
/// `IBV_REREG_MR_CHANGE_ACCESS`.
pub const REREG_MR_CHANGE_ACCESS: u32 = 1 << 2;

/// `IBV_WC_EX_WITH_BYTE_LEN` of `enum ibv_create_cq_wc_flags`.
pub const WC_EX_WITH_BYTE_LEN: u64 = 1 << 0;
/// `IBV_WC_EX_WITH_IMM`.
pub const WC_EX_WITH_IMM: u64 = 1 << 1;
/// `IBV_WC_EX_WITH_QP_NUM`.
pub const WC_EX_WITH_QP_NUM: u64 = 1 << 2;
/// `IBV_WC_EX_WITH_SRC_QP`.
pub const WC_EX_WITH_SRC_QP: u64 = 1 << 3;
/// `IBV_WC_EX_WITH_SLID`.
pub const WC_EX_WITH_SLID: u64 = 1 << 4;
/// `IBV_WC_EX_WITH_SL`.
pub const WC_EX_WITH_SL: u64 = 1 << 5;
/// `IBV_WC_EX_WITH_DLID_PATH_BITS`.
pub const WC_EX_WITH_DLID_PATH_BITS: u64 = 1 << 6;
/// `IBV_WC_STANDARD_FLAGS`: the seven flags above, the fields of
/// `struct ibv_wc`.
pub const WC_STANDARD_FLAGS: u64 = WC_EX_WITH_BYTE_LEN
    | WC_EX_WITH_IMM
    | WC_EX_WITH_QP_NUM
    | WC_EX_WITH_SRC_QP
    | WC_EX_WITH_SLID
    | WC_EX_WITH_SL
    | WC_EX_WITH_DLID_PATH_BITS;

/// `IBV_CQ_INIT_ATTR_MASK_FLAGS` of `enum ibv_cq_init_attr_mask`.
pub const CQ_INIT_ATTR_MASK_FLAGS: u32 = 1 << 0;
/// `IBV_CQ_INIT_ATTR_MASK_PD`.
pub const CQ_INIT_ATTR_MASK_PD: u32 = 1 << 1;

/// `IBV_CREATE_CQ_ATTR_SINGLE_THREADED` of `enum ibv_create_cq_attr_flags`.
pub const CREATE_CQ_ATTR_SINGLE_THREADED: u32 = 1 << 0;
/// `IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN`.
pub const CREATE_CQ_ATTR_IGNORE_OVERRUN: u32 = 1 << 1;

/// `struct ibv_parent_domain_init_attr`.
#[repr(C)]
pub struct ParentDomainInitAttr {
    /// `pd`: the protection domain the parent domain stands for.
    pub pd: *mut Pd,
    /// `td`: a thread domain, or NULL.
    pub td: *mut c_void,
    /// `comp_mask`: `IBV_PARENT_DOMAIN_INIT_ATTR_*` bits.
    pub comp_mask: u32,
    /// `alloc`: the application's allocator for provider buffers.
    pub alloc: OpaqueFn,
    /// `free`: its counterpart.
    pub free: OpaqueFn,
    /// `pd_context`: passed to `alloc` and `free`.
    pub pd_context: *mut c_void,
}

/// `IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS`.
pub const PARENT_DOMAIN_INIT_ATTR_ALLOCATORS: u32 = 1 << 0;
/// `IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT`.
pub const PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT: u32 = 1 << 1;

/// `struct ibv_pd`.
#[repr(C)]
pub struct Pd {
    /// `context`.
    pub context: *mut Context,
    /// `handle`: the kernel's handle.
    pub handle: u32,
}

impl Pd {
    /// The all-zero value, as `calloc` would hand it over.
    pub const ZERO: Self = Self {
        context: core::ptr::null_mut(),
        handle: 0,
    };
}

/// `struct ibv_mr`.
#[repr(C)]
pub struct Mr {
    /// `context`.
    pub context: *mut Context,
    /// `pd`.
    pub pd: *mut Pd,
    /// `addr`.
    pub addr: *mut c_void,
    /// `length`.
    pub length: usize,
    /// `handle`: the kernel's handle.
    pub handle: u32,
    /// `lkey`.
    pub lkey: u32,
    /// `rkey`.
    pub rkey: u32,
}

impl Mr {
    /// The all-zero value.
    pub const ZERO: Self = Self {
        context: core::ptr::null_mut(),
        pd: core::ptr::null_mut(),
        addr: core::ptr::null_mut(),
        length: 0,
        handle: 0,
        lkey: 0,
        rkey: 0,
    };
}

/// `struct ibv_comp_channel`. roxe passes it on to the kernel untouched.
#[repr(C)]
pub struct CompChannel {
    /// `context`.
    pub context: *mut Context,
    /// `fd`.
    pub fd: c_int,
    /// `refcnt`.
    pub refcnt: c_int,
}

/// `union ibv_gid`: 16 raw bytes. The union's other member,
/// `struct { __be64 subnet_prefix, interface_id; } global`, is left out;
/// the alignment it gives is restated with `align(8)`.
#[repr(C, align(8))]
pub struct Gid {
    /// `raw`.
    pub raw: [u8; 16],
}

/// `struct ibv_global_route`.
#[repr(C)]
pub struct GlobalRoute {
    /// `dgid`.
    pub dgid: Gid,
    /// `flow_label`.
    pub flow_label: u32,
    /// `sgid_index`.
    pub sgid_index: u8,
    /// `hop_limit`.
    pub hop_limit: u8,
    /// `traffic_class`.
    pub traffic_class: u8,
}

/// `struct ibv_ah_attr`. `ibv_cmd_create_ah` reads it; roxe passes it on.
#[repr(C)]
pub struct AhAttr {
    /// `grh`.
    pub grh: GlobalRoute,
    /// `dlid`.
    pub dlid: u16,
    /// `sl`.
    pub sl: u8,
    /// `src_path_bits`.
    pub src_path_bits: u8,
    /// `static_rate`.
    pub static_rate: u8,
    /// `is_global`.
    pub is_global: u8,
    /// `port_num`.
    pub port_num: u8,
}

/// `struct ibv_cq`.
#[repr(C)]
pub struct Cq {
    /// `context`.
    pub context: *mut Context,
    /// `channel`.
    pub channel: *mut CompChannel,
    /// `cq_context`.
    pub cq_context: *mut c_void,
    /// `handle`: the kernel's handle.
    pub handle: u32,
    /// `cqe`: the CQ's capacity, as the kernel reported it.
    pub cqe: c_int,
    /// `mutex`.
    pub mutex: PthreadMutex,
    /// `cond`.
    pub cond: PthreadCond,
    /// `comp_events_completed`.
    pub comp_events_completed: u32,
    /// `async_events_completed`.
    pub async_events_completed: u32,
}

/// `struct ibv_poll_cq_attr`.
#[repr(C)]
pub struct PollCqAttr {
    /// `comp_mask`: must be zero.
    pub comp_mask: u32,
}

/// `struct ibv_cq_ex`: `struct ibv_cq`'s fields, then the extended polling
/// interface that the provider fills in.
#[repr(C)]
pub struct CqEx {
    /// `context`.
    pub context: *mut Context,
    /// `channel`.
    pub channel: *mut CompChannel,
    /// `cq_context`.
    pub cq_context: *mut c_void,
    /// `handle`.
    pub handle: u32,
    /// `cqe`.
    pub cqe: c_int,
    /// `mutex`.
    pub mutex: PthreadMutex,
    /// `cond`.
    pub cond: PthreadCond,
    /// `comp_events_completed`.
    pub comp_events_completed: u32,
    /// `async_events_completed`.
    pub async_events_completed: u32,
    /// `comp_mask`.
    pub comp_mask: u32,
    /// `status` (`enum ibv_wc_status`) of the current completion.
    pub status: u32,
    /// `wr_id` of the current completion.
    pub wr_id: u64,
    /// `start_poll`: returns 0, `ENOENT` or another errno.
    pub start_poll:
        Option<unsafe extern "C" fn(current: *mut CqEx, attr: *mut PollCqAttr) -> c_int>,
    /// `next_poll`: returns 0, `ENOENT` or another errno.
    pub next_poll: Option<unsafe extern "C" fn(current: *mut CqEx) -> c_int>,
    /// `end_poll`.
    pub end_poll: Option<unsafe extern "C" fn(current: *mut CqEx)>,
    /// `read_opcode`: returns an `enum ibv_wc_opcode`.
    pub read_opcode: Option<unsafe extern "C" fn(current: *mut CqEx) -> u32>,
    /// `read_vendor_err`.
    pub read_vendor_err: Option<unsafe extern "C" fn(current: *mut CqEx) -> u32>,
    /// `read_byte_len`.
    pub read_byte_len: Option<unsafe extern "C" fn(current: *mut CqEx) -> u32>,
    /// `read_imm_data`: returns a `__be32`.
    pub read_imm_data: Option<unsafe extern "C" fn(current: *mut CqEx) -> u32>,
    /// `read_qp_num`.
    pub read_qp_num: Option<unsafe extern "C" fn(current: *mut CqEx) -> u32>,
    /// `read_src_qp`.
    pub read_src_qp: Option<unsafe extern "C" fn(current: *mut CqEx) -> u32>,
    /// `read_wc_flags`.
    pub read_wc_flags: Option<unsafe extern "C" fn(current: *mut CqEx) -> c_uint>,
    /// `read_slid`.
    pub read_slid: Option<unsafe extern "C" fn(current: *mut CqEx) -> u32>,
    /// `read_sl`.
    pub read_sl: Option<unsafe extern "C" fn(current: *mut CqEx) -> u8>,
    /// `read_dlid_path_bits`.
    pub read_dlid_path_bits: Option<unsafe extern "C" fn(current: *mut CqEx) -> u8>,
    /// `read_completion_ts`.
    pub read_completion_ts: OpaqueFn,
    /// `read_cvlan`.
    pub read_cvlan: OpaqueFn,
    /// `read_flow_tag`.
    pub read_flow_tag: OpaqueFn,
    /// `read_tm_info`.
    pub read_tm_info: OpaqueFn,
    /// `read_completion_wallclock_ns`.
    pub read_completion_wallclock_ns: OpaqueFn,
}

impl CqEx {
    /// The all-zero value: no pointers, initialiser-state mutex and
    /// condition variable, no ops.
    pub const ZERO: Self = Self {
        context: core::ptr::null_mut(),
        channel: core::ptr::null_mut(),
        cq_context: core::ptr::null_mut(),
        handle: 0,
        cqe: 0,
        mutex: PthreadMutex::INITIALIZER,
        cond: PthreadCond::INITIALIZER,
        comp_events_completed: 0,
        async_events_completed: 0,
        comp_mask: 0,
        status: 0,
        wr_id: 0,
        start_poll: None,
        next_poll: None,
        end_poll: None,
        read_opcode: None,
        read_vendor_err: None,
        read_byte_len: None,
        read_imm_data: None,
        read_qp_num: None,
        read_src_qp: None,
        read_wc_flags: None,
        read_slid: None,
        read_sl: None,
        read_dlid_path_bits: None,
        read_completion_ts: None,
        read_cvlan: None,
        read_flow_tag: None,
        read_tm_info: None,
        read_completion_wallclock_ns: None,
    };
}

/// `struct ibv_cq_init_attr_ex`.
#[repr(C)]
pub struct CqInitAttrEx {
    /// `cqe`: the minimum number of entries.
    pub cqe: u32,
    /// `cq_context`.
    pub cq_context: *mut c_void,
    /// `channel`.
    pub channel: *mut CompChannel,
    /// `comp_vector`.
    pub comp_vector: u32,
    /// `wc_flags`: `IBV_WC_EX_WITH_*` bits.
    pub wc_flags: u64,
    /// `comp_mask`: `IBV_CQ_INIT_ATTR_MASK_*` bits.
    pub comp_mask: u32,
    /// `flags`: `IBV_CREATE_CQ_ATTR_*` bits.
    pub flags: u32,
    /// `parent_domain`.
    pub parent_domain: *mut Pd,
}

/// `struct ibv_wc`: one work completion as `ibv_poll_cq` returns it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Wc {
    /// `wr_id`.
    pub wr_id: u64,
    /// `status` (`enum ibv_wc_status`).
    pub status: u32,
    /// `opcode` (`enum ibv_wc_opcode`).
    pub opcode: u32,
    /// `vendor_err`.
    pub vendor_err: u32,
    /// `byte_len`.
    pub byte_len: u32,
    /// The anonymous union of `imm_data` (`__be32`) and `invalidated_rkey`;
    /// both are 32 bits passed through unchanged.
    pub imm_data: u32,
    /// `qp_num`.
    pub qp_num: u32,
    /// `src_qp`.
    pub src_qp: u32,
    /// `wc_flags`.
    pub wc_flags: c_uint,
    /// `pkey_index`.
    pub pkey_index: u16,
    /// `slid`.
    pub slid: u16,
    /// `sl`.
    pub sl: u8,
    /// `dlid_path_bits`.
    pub dlid_path_bits: u8,
}

/// `struct ibv_ah`.
#[repr(C)]
pub struct Ah {
    /// `context`.
    pub context: *mut Context,
    /// `pd`.
    pub pd: *mut Pd,
    /// `handle`: the kernel's handle.
    pub handle: u32,
}

impl Ah {
    /// The all-zero value.
    pub const ZERO: Self = Self {
        context: core::ptr::null_mut(),
        pd: core::ptr::null_mut(),
        handle: 0,
    };
}

/// `struct ibv_alloc_pd` from the private `kern-abi.h`.
#[repr(C)]
#[derive(Default)]
pub struct AllocPd {
    /// `hdr`.
    pub hdr: uverbs::CmdHdr,
    /// `core_payload`.
    pub core_payload: uverbs::AllocPd,
}

/// `struct ibv_reg_mr` from the private `kern-abi.h`.
#[repr(C)]
#[derive(Default)]
pub struct RegMr {
    /// `hdr`.
    pub hdr: uverbs::CmdHdr,
    /// `core_payload`.
    pub core_payload: uverbs::RegMr,
}

/// `struct ibv_rereg_mr` from the private `kern-abi.h`.
#[repr(C)]
#[derive(Default)]
pub struct ReregMr {
    /// `hdr`.
    pub hdr: uverbs::CmdHdr,
    /// `core_payload`.
    pub core_payload: uverbs::ReregMr,
}

/// `struct ibv_create_cq` from the private `kern-abi.h`.
#[repr(C)]
#[derive(Default)]
pub struct CreateCq {
    /// `hdr`.
    pub hdr: uverbs::CmdHdr,
    /// `core_payload`.
    pub core_payload: uverbs::CreateCq,
}

/// `struct ibv_resize_cq` from the private `kern-abi.h`.
#[repr(C)]
#[derive(Default)]
pub struct ResizeCq {
    /// `hdr`.
    pub hdr: uverbs::CmdHdr,
    /// `core_payload`.
    pub core_payload: uverbs::ResizeCq,
}

/// `struct ex_hdr` from the private `kern-abi.h`: the headers of an `_ex`
/// write command.
#[repr(C)]
#[derive(Default)]
pub struct ExHdr {
    /// `hdr`.
    pub hdr: uverbs::CmdHdr,
    /// `ex_hdr`.
    pub ex_hdr: uverbs::ExCmdHdr,
}

/// `struct ibv_create_cq_ex` from the private `kern-abi.h`.
#[repr(C)]
#[derive(Default)]
pub struct CreateCqEx {
    /// `hdr`.
    pub hdr: ExHdr,
    /// `core_payload`.
    pub core_payload: uverbs::ExCreateCq,
}

/// `enum ibv_qp_type`: `IBV_QPT_RC`.
pub const QPT_RC: u32 = 2;
/// `IBV_QPT_UC`.
pub const QPT_UC: u32 = 3;
/// `IBV_QPT_UD`.
pub const QPT_UD: u32 = 4;
/// `IBV_QPT_RAW_PACKET`: whole Ethernet frames, sent as the work request
/// gives them and received as flow steering delivers them.
pub const QPT_RAW_PACKET: u32 = 8;
/// `IBV_QPT_XRC_SEND`: an XRC initiator, a send queue whose work requests
/// each name a remote XRC SRQ.
pub const QPT_XRC_SEND: u32 = 9;
/// `IBV_QPT_XRC_RECV`: an XRC target, which receives into the XRC SRQs of
/// its domain and has no queues of its own.
pub const QPT_XRC_RECV: u32 = 10;

/// `enum ibv_qp_state`: `IBV_QPS_RESET`.
pub const QPS_RESET: u32 = 0;
/// `IBV_QPS_INIT`.
pub const QPS_INIT: u32 = 1;
/// `IBV_QPS_RTR`.
pub const QPS_RTR: u32 = 2;
/// `IBV_QPS_RTS`.
pub const QPS_RTS: u32 = 3;
/// `IBV_QPS_SQD`.
pub const QPS_SQD: u32 = 4;
/// `IBV_QPS_SQE`.
pub const QPS_SQE: u32 = 5;
/// `IBV_QPS_ERR`.
pub const QPS_ERR: u32 = 6;

/// `enum ibv_qp_attr_mask`: `IBV_QP_STATE`.
pub const QP_STATE: c_int = 1 << 0;

/// `enum ibv_qp_init_attr_mask`: `IBV_QP_INIT_ATTR_PD`.
pub const QP_INIT_ATTR_PD: u32 = 1 << 0;
/// `IBV_QP_INIT_ATTR_XRCD`.
pub const QP_INIT_ATTR_XRCD: u32 = 1 << 1;
/// `IBV_QP_INIT_ATTR_CREATE_FLAGS`.
pub const QP_INIT_ATTR_CREATE_FLAGS: u32 = 1 << 2;
/// `IBV_QP_INIT_ATTR_MAX_TSO_HEADER`.
pub const QP_INIT_ATTR_MAX_TSO_HEADER: u32 = 1 << 3;
/// `IBV_QP_INIT_ATTR_IND_TABLE`.
pub const QP_INIT_ATTR_IND_TABLE: u32 = 1 << 4;
/// `IBV_QP_INIT_ATTR_RX_HASH`.
pub const QP_INIT_ATTR_RX_HASH: u32 = 1 << 5;
/// `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS`: asks for the `ibv_wr_*` interface.
pub const QP_INIT_ATTR_SEND_OPS_FLAGS: u32 = 1 << 6;

/// `enum ibv_qp_create_send_ops_flags`: `IBV_QP_EX_WITH_RDMA_WRITE`.
pub const QP_EX_WITH_RDMA_WRITE: u64 = 1 << 0;
/// `IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM`.
pub const QP_EX_WITH_RDMA_WRITE_WITH_IMM: u64 = 1 << 1;
/// `IBV_QP_EX_WITH_SEND`.
pub const QP_EX_WITH_SEND: u64 = 1 << 2;
/// `IBV_QP_EX_WITH_SEND_WITH_IMM`.
pub const QP_EX_WITH_SEND_WITH_IMM: u64 = 1 << 3;
/// `IBV_QP_EX_WITH_RDMA_READ`.
pub const QP_EX_WITH_RDMA_READ: u64 = 1 << 4;
/// `IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP`.
pub const QP_EX_WITH_ATOMIC_CMP_AND_SWP: u64 = 1 << 5;
/// `IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD`.
pub const QP_EX_WITH_ATOMIC_FETCH_AND_ADD: u64 = 1 << 6;
/// `IBV_QP_EX_WITH_LOCAL_INV`.
pub const QP_EX_WITH_LOCAL_INV: u64 = 1 << 7;
/// `IBV_QP_EX_WITH_BIND_MW`.
pub const QP_EX_WITH_BIND_MW: u64 = 1 << 8;
/// `IBV_QP_EX_WITH_SEND_WITH_INV`.
pub const QP_EX_WITH_SEND_WITH_INV: u64 = 1 << 9;
/// `IBV_QP_EX_WITH_TSO`.
pub const QP_EX_WITH_TSO: u64 = 1 << 10;
/// `IBV_QP_EX_WITH_ATOMIC_WRITE`.
pub const QP_EX_WITH_ATOMIC_WRITE: u64 = 1 << 12;

/// `enum ibv_wr_opcode`: `IBV_WR_RDMA_WRITE`.
pub const WR_RDMA_WRITE: u32 = 0;
/// `IBV_WR_RDMA_WRITE_WITH_IMM`.
pub const WR_RDMA_WRITE_WITH_IMM: u32 = 1;
/// `IBV_WR_SEND`.
pub const WR_SEND: u32 = 2;
/// `IBV_WR_SEND_WITH_IMM`.
pub const WR_SEND_WITH_IMM: u32 = 3;
/// `IBV_WR_RDMA_READ`.
pub const WR_RDMA_READ: u32 = 4;
/// `IBV_WR_ATOMIC_CMP_AND_SWP`.
pub const WR_ATOMIC_CMP_AND_SWP: u32 = 5;
/// `IBV_WR_ATOMIC_FETCH_AND_ADD`.
pub const WR_ATOMIC_FETCH_AND_ADD: u32 = 6;
/// `IBV_WR_LOCAL_INV`.
pub const WR_LOCAL_INV: u32 = 7;
/// `IBV_WR_BIND_MW`.
pub const WR_BIND_MW: u32 = 8;
/// `IBV_WR_SEND_WITH_INV`.
pub const WR_SEND_WITH_INV: u32 = 9;
/// `IBV_WR_ATOMIC_WRITE`.
pub const WR_ATOMIC_WRITE: u32 = 15;

// `enum ibv_send_flags` and `enum ibv_access_flags` (`IBV_SEND_*`,
// `IBV_ACCESS_*`) under the names of this file. The values are defined
// once, in the crates the kernel module builds from as well. For memory
// windows, `IBV_ACCESS_ZERO_BASED` means window addresses start at 0 (type
// 2 windows only).
pub use roxe_proto::access::{
    LOCAL_WRITE as ACCESS_LOCAL_WRITE, REMOTE_READ as ACCESS_REMOTE_READ,
    REMOTE_WRITE as ACCESS_REMOTE_WRITE, ZERO_BASED as ACCESS_ZERO_BASED,
};
pub use roxe_uapi::send_flags::{INLINE as SEND_INLINE, SIGNALED as SEND_SIGNALED};

/// `struct ibv_qp`.
#[repr(C)]
pub struct Qp {
    /// `context`.
    pub context: *mut Context,
    /// `qp_context`.
    pub qp_context: *mut c_void,
    /// `pd`.
    pub pd: *mut Pd,
    /// `send_cq`.
    pub send_cq: *mut Cq,
    /// `recv_cq`.
    pub recv_cq: *mut Cq,
    /// `srq`.
    pub srq: *mut Srq,
    /// `handle`: the kernel's handle.
    pub handle: u32,
    /// `qp_num`.
    pub qp_num: u32,
    /// `state` (`enum ibv_qp_state`), kept by libibverbs.
    pub state: u32,
    /// `qp_type` (`enum ibv_qp_type`).
    pub qp_type: u32,
    /// `mutex`.
    pub mutex: PthreadMutex,
    /// `cond`.
    pub cond: PthreadCond,
    /// `events_completed`.
    pub events_completed: u32,
}

impl Qp {
    /// The all-zero value.
    pub const ZERO: Self = Self {
        context: core::ptr::null_mut(),
        qp_context: core::ptr::null_mut(),
        pd: core::ptr::null_mut(),
        send_cq: core::ptr::null_mut(),
        recv_cq: core::ptr::null_mut(),
        srq: core::ptr::null_mut(),
        handle: 0,
        qp_num: 0,
        state: 0,
        qp_type: 0,
        mutex: PthreadMutex::INITIALIZER,
        cond: PthreadCond::INITIALIZER,
        events_completed: 0,
    };
}

/// `struct ibv_qp_ex`: `struct ibv_qp`, then the `ibv_wr_*` interface.
///
/// A QP created with `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS` gets the ops its
/// `send_ops_flags` ask for; the others, and every op of other QPs, stay
/// NULL. The builders and setters return nothing: an error is kept and
/// returned by `wr_complete`.
#[repr(C)]
pub struct QpEx {
    /// `qp_base`.
    pub qp_base: Qp,
    /// `comp_mask`.
    pub comp_mask: u64,
    /// `wr_id`: the application sets it before each builder call.
    pub wr_id: u64,
    /// `wr_flags` (`enum ibv_send_flags`): likewise.
    pub wr_flags: c_uint,
    /// `wr_atomic_cmp_swp`.
    pub wr_atomic_cmp_swp: Option<
        unsafe extern "C" fn(qp: *mut QpEx, rkey: u32, remote_addr: u64, compare: u64, swap: u64),
    >,
    /// `wr_atomic_fetch_add`.
    pub wr_atomic_fetch_add:
        Option<unsafe extern "C" fn(qp: *mut QpEx, rkey: u32, remote_addr: u64, add: u64)>,
    /// `wr_bind_mw`.
    pub wr_bind_mw: Option<
        unsafe extern "C" fn(qp: *mut QpEx, mw: *mut Mw, rkey: u32, bind_info: *const MwBindInfo),
    >,
    /// `wr_local_inv`.
    pub wr_local_inv: Option<unsafe extern "C" fn(qp: *mut QpEx, invalidate_rkey: u32)>,
    /// `wr_rdma_read`.
    pub wr_rdma_read: Option<unsafe extern "C" fn(qp: *mut QpEx, rkey: u32, remote_addr: u64)>,
    /// `wr_rdma_write`.
    pub wr_rdma_write: Option<unsafe extern "C" fn(qp: *mut QpEx, rkey: u32, remote_addr: u64)>,
    /// `wr_rdma_write_imm`: `imm_data` is a `__be32`.
    pub wr_rdma_write_imm:
        Option<unsafe extern "C" fn(qp: *mut QpEx, rkey: u32, remote_addr: u64, imm_data: u32)>,
    /// `wr_send`.
    pub wr_send: Option<unsafe extern "C" fn(qp: *mut QpEx)>,
    /// `wr_send_imm`: `imm_data` is a `__be32`.
    pub wr_send_imm: Option<unsafe extern "C" fn(qp: *mut QpEx, imm_data: u32)>,
    /// `wr_send_inv`.
    pub wr_send_inv: Option<unsafe extern "C" fn(qp: *mut QpEx, invalidate_rkey: u32)>,
    /// `wr_send_tso`.
    pub wr_send_tso: OpaqueFn,
    /// `wr_set_ud_addr`.
    pub wr_set_ud_addr:
        Option<unsafe extern "C" fn(qp: *mut QpEx, ah: *mut Ah, remote_qpn: u32, remote_qkey: u32)>,
    /// `wr_set_xrc_srqn`.
    pub wr_set_xrc_srqn: Option<unsafe extern "C" fn(qp: *mut QpEx, remote_srqn: u32)>,
    /// `wr_set_inline_data`.
    pub wr_set_inline_data:
        Option<unsafe extern "C" fn(qp: *mut QpEx, addr: *mut c_void, length: usize)>,
    /// `wr_set_inline_data_list`.
    pub wr_set_inline_data_list:
        Option<unsafe extern "C" fn(qp: *mut QpEx, num_buf: usize, buf_list: *const DataBuf)>,
    /// `wr_set_sge`.
    pub wr_set_sge: Option<unsafe extern "C" fn(qp: *mut QpEx, lkey: u32, addr: u64, length: u32)>,
    /// `wr_set_sge_list`.
    pub wr_set_sge_list:
        Option<unsafe extern "C" fn(qp: *mut QpEx, num_sge: usize, sg_list: *const Sge)>,
    /// `wr_start`.
    pub wr_start: Option<unsafe extern "C" fn(qp: *mut QpEx)>,
    /// `wr_complete`: returns 0 or a positive errno.
    pub wr_complete: Option<unsafe extern "C" fn(qp: *mut QpEx) -> c_int>,
    /// `wr_abort`.
    pub wr_abort: Option<unsafe extern "C" fn(qp: *mut QpEx)>,
    /// `wr_atomic_write`: `atomic_wr` points to the 8 bytes to store.
    pub wr_atomic_write: Option<
        unsafe extern "C" fn(qp: *mut QpEx, rkey: u32, remote_addr: u64, atomic_wr: *const c_void),
    >,
}

impl QpEx {
    /// The all-zero value.
    pub const ZERO: Self = Self {
        qp_base: Qp::ZERO,
        comp_mask: 0,
        wr_id: 0,
        wr_flags: 0,
        wr_atomic_cmp_swp: None,
        wr_atomic_fetch_add: None,
        wr_bind_mw: None,
        wr_local_inv: None,
        wr_rdma_read: None,
        wr_rdma_write: None,
        wr_rdma_write_imm: None,
        wr_send: None,
        wr_send_imm: None,
        wr_send_inv: None,
        wr_send_tso: None,
        wr_set_ud_addr: None,
        wr_set_xrc_srqn: None,
        wr_set_inline_data: None,
        wr_set_inline_data_list: None,
        wr_set_sge: None,
        wr_set_sge_list: None,
        wr_start: None,
        wr_complete: None,
        wr_abort: None,
        wr_atomic_write: None,
    };
}

/// `struct ibv_data_buf`: one buffer of `ibv_wr_set_inline_data_list`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct DataBuf {
    /// `addr`.
    pub addr: *mut c_void,
    /// `length`.
    pub length: usize,
}

/// `struct ibv_qp_cap`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QpCap {
    /// `max_send_wr`.
    pub max_send_wr: u32,
    /// `max_recv_wr`.
    pub max_recv_wr: u32,
    /// `max_send_sge`.
    pub max_send_sge: u32,
    /// `max_recv_sge`.
    pub max_recv_sge: u32,
    /// `max_inline_data`.
    pub max_inline_data: u32,
}

/// `struct ibv_qp_init_attr`.
#[repr(C)]
pub struct QpInitAttr {
    /// `qp_context`.
    pub qp_context: *mut c_void,
    /// `send_cq`.
    pub send_cq: *mut Cq,
    /// `recv_cq`.
    pub recv_cq: *mut Cq,
    /// `srq`.
    pub srq: *mut Srq,
    /// `cap`: what the caller asks for; set to what it got on success.
    pub cap: QpCap,
    /// `qp_type` (`enum ibv_qp_type`).
    pub qp_type: u32,
    /// `sq_sig_all`.
    pub sq_sig_all: c_int,
}

/// `struct ibv_rx_hash_conf`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct RxHashConf {
    /// `rx_hash_function`.
    pub rx_hash_function: u8,
    /// `rx_hash_key_len`.
    pub rx_hash_key_len: u8,
    /// `rx_hash_key`.
    pub rx_hash_key: *mut u8,
    /// `rx_hash_fields_mask`.
    pub rx_hash_fields_mask: u64,
}

/// `struct ibv_qp_init_attr_ex`: `struct ibv_qp_init_attr`'s fields, then
/// the extended ones that `comp_mask` selects.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct QpInitAttrEx {
    /// `qp_context`.
    pub qp_context: *mut c_void,
    /// `send_cq`.
    pub send_cq: *mut Cq,
    /// `recv_cq`.
    pub recv_cq: *mut Cq,
    /// `srq`.
    pub srq: *mut Srq,
    /// `cap`.
    pub cap: QpCap,
    /// `qp_type` (`enum ibv_qp_type`).
    pub qp_type: u32,
    /// `sq_sig_all`.
    pub sq_sig_all: c_int,
    /// `comp_mask` (`enum ibv_qp_init_attr_mask`).
    pub comp_mask: u32,
    /// `pd`.
    pub pd: *mut Pd,
    /// `xrcd`: with `IBV_QP_INIT_ATTR_XRCD`, the domain of an XRC receive
    /// QP.
    pub xrcd: *mut Xrcd,
    /// `create_flags` (`enum ibv_qp_create_flags`).
    pub create_flags: u32,
    /// `max_tso_header`.
    pub max_tso_header: u16,
    /// `rwq_ind_tbl`: with `IBV_QP_INIT_ATTR_IND_TABLE`, the receive
    /// work queues of an RSS QP.
    pub rwq_ind_tbl: *mut RwqIndTable,
    /// `rx_hash_conf`.
    pub rx_hash_conf: RxHashConf,
    /// `source_qpn`.
    pub source_qpn: u32,
    /// `send_ops_flags` (`enum ibv_qp_create_send_ops_flags`).
    pub send_ops_flags: u64,
}

/// `struct ibv_qp_attr`. roxe reads only `qp_state`; libibverbs and the
/// kernel handle the rest.
#[repr(C)]
pub struct QpAttr {
    /// `qp_state`.
    pub qp_state: u32,
    /// `cur_qp_state`.
    pub cur_qp_state: u32,
    /// `path_mtu`.
    pub path_mtu: u32,
    /// `path_mig_state`.
    pub path_mig_state: u32,
    /// `qkey`.
    pub qkey: u32,
    /// `rq_psn`.
    pub rq_psn: u32,
    /// `sq_psn`.
    pub sq_psn: u32,
    /// `dest_qp_num`.
    pub dest_qp_num: u32,
    /// `qp_access_flags`.
    pub qp_access_flags: c_uint,
    /// `cap`.
    pub cap: QpCap,
    /// `ah_attr`.
    pub ah_attr: AhAttr,
    /// `alt_ah_attr`.
    pub alt_ah_attr: AhAttr,
    /// `pkey_index`.
    pub pkey_index: u16,
    /// `alt_pkey_index`.
    pub alt_pkey_index: u16,
    /// `en_sqd_async_notify`.
    pub en_sqd_async_notify: u8,
    /// `sq_draining`.
    pub sq_draining: u8,
    /// `max_rd_atomic`.
    pub max_rd_atomic: u8,
    /// `max_dest_rd_atomic`.
    pub max_dest_rd_atomic: u8,
    /// `min_rnr_timer`.
    pub min_rnr_timer: u8,
    /// `port_num`.
    pub port_num: u8,
    /// `timeout`.
    pub timeout: u8,
    /// `retry_cnt`.
    pub retry_cnt: u8,
    /// `rnr_retry`.
    pub rnr_retry: u8,
    /// `alt_port_num`.
    pub alt_port_num: u8,
    /// `alt_timeout`.
    pub alt_timeout: u8,
    /// `rate_limit`.
    pub rate_limit: u32,
}

/// `struct ibv_srq`.
#[repr(C)]
pub struct Srq {
    /// `context`.
    pub context: *mut Context,
    /// `srq_context`.
    pub srq_context: *mut c_void,
    /// `pd`.
    pub pd: *mut Pd,
    /// `handle`: the kernel's handle.
    pub handle: u32,
    /// `mutex`.
    pub mutex: PthreadMutex,
    /// `cond`.
    pub cond: PthreadCond,
    /// `events_completed`.
    pub events_completed: u32,
}

impl Srq {
    /// The all-zero value.
    pub const ZERO: Self = Self {
        context: core::ptr::null_mut(),
        srq_context: core::ptr::null_mut(),
        pd: core::ptr::null_mut(),
        handle: 0,
        mutex: PthreadMutex::INITIALIZER,
        cond: PthreadCond::INITIALIZER,
        events_completed: 0,
    };
}

/// `struct ibv_srq_attr`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct SrqAttr {
    /// `max_wr`.
    pub max_wr: u32,
    /// `max_sge`.
    pub max_sge: u32,
    /// `srq_limit`.
    pub srq_limit: u32,
}

/// `struct ibv_srq_init_attr`.
#[repr(C)]
pub struct SrqInitAttr {
    /// `srq_context`.
    pub srq_context: *mut c_void,
    /// `attr`: what the caller asks for; set to what it got on success.
    pub attr: SrqAttr,
}

/// `enum ibv_srq_type`: `IBV_SRQT_BASIC`.
pub const SRQT_BASIC: u32 = 0;
/// `IBV_SRQT_XRC`: an SRQ of an XRC domain, which XRC send QPs address by
/// its number.
pub const SRQT_XRC: u32 = 1;
/// `IBV_SRQT_TM`: tag matching.
pub const SRQT_TM: u32 = 2;

/// `enum ibv_srq_init_attr_mask`: `IBV_SRQ_INIT_ATTR_TYPE`.
pub const SRQ_INIT_ATTR_TYPE: u32 = 1 << 0;
/// `IBV_SRQ_INIT_ATTR_PD`.
pub const SRQ_INIT_ATTR_PD: u32 = 1 << 1;
/// `IBV_SRQ_INIT_ATTR_XRCD`.
pub const SRQ_INIT_ATTR_XRCD: u32 = 1 << 2;
/// `IBV_SRQ_INIT_ATTR_CQ`.
pub const SRQ_INIT_ATTR_CQ: u32 = 1 << 3;
/// `IBV_SRQ_INIT_ATTR_TM`.
pub const SRQ_INIT_ATTR_TM: u32 = 1 << 4;

/// `struct ibv_tm_cap`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct TmCap {
    /// `max_num_tags`.
    pub max_num_tags: u32,
    /// `max_ops`.
    pub max_ops: u32,
}

/// `struct ibv_srq_init_attr_ex`: `struct ibv_srq_init_attr`'s fields,
/// then the extended ones that `comp_mask` selects.
#[repr(C)]
pub struct SrqInitAttrEx {
    /// `srq_context`.
    pub srq_context: *mut c_void,
    /// `attr`: what the caller asks for; set to what it got on success.
    pub attr: SrqAttr,
    /// `comp_mask` (`enum ibv_srq_init_attr_mask`).
    pub comp_mask: u32,
    /// `srq_type` (`enum ibv_srq_type`); `IBV_SRQT_BASIC` without
    /// `IBV_SRQ_INIT_ATTR_TYPE`.
    pub srq_type: u32,
    /// `pd`.
    pub pd: *mut Pd,
    /// `xrcd`: the domain of an XRC SRQ.
    pub xrcd: *mut Xrcd,
    /// `cq`: the CQ of an XRC SRQ's receive completions.
    pub cq: *mut Cq,
    /// `tm_cap`.
    pub tm_cap: TmCap,
}

/// `enum ibv_xrcd_init_attr_mask`: `IBV_XRCD_INIT_ATTR_FD`.
pub const XRCD_INIT_ATTR_FD: u32 = 1 << 0;
/// `IBV_XRCD_INIT_ATTR_OFLAGS`.
pub const XRCD_INIT_ATTR_OFLAGS: u32 = 1 << 1;

/// `struct ibv_xrcd_init_attr`: `ibv_open_xrcd`'s argument.
#[repr(C)]
pub struct XrcdInitAttr {
    /// `comp_mask` (`enum ibv_xrcd_init_attr_mask`).
    pub comp_mask: u32,
    /// `fd`: the file whose inode names a shared domain, or -1.
    pub fd: c_int,
    /// `oflags`: `O_CREAT`, `O_EXCL`.
    pub oflags: c_int,
}

/// `struct ibv_xrcd`: an XRC domain.
#[repr(C)]
pub struct Xrcd {
    /// `context`.
    pub context: *mut Context,
}

/// `enum ibv_qp_open_attr_mask`: `IBV_QP_OPEN_ATTR_NUM`.
pub const QP_OPEN_ATTR_NUM: u32 = 1 << 0;
/// `IBV_QP_OPEN_ATTR_XRCD`.
pub const QP_OPEN_ATTR_XRCD: u32 = 1 << 1;
/// `IBV_QP_OPEN_ATTR_CONTEXT`.
pub const QP_OPEN_ATTR_CONTEXT: u32 = 1 << 2;
/// `IBV_QP_OPEN_ATTR_TYPE`.
pub const QP_OPEN_ATTR_TYPE: u32 = 1 << 3;

/// `struct ibv_qp_open_attr`: `ibv_open_qp`'s argument.
#[repr(C)]
pub struct QpOpenAttr {
    /// `comp_mask` (`enum ibv_qp_open_attr_mask`).
    pub comp_mask: u32,
    /// `qp_num`: the QP to open.
    pub qp_num: u32,
    /// `xrcd`: the domain the QP belongs to.
    pub xrcd: *mut Xrcd,
    /// `qp_context`.
    pub qp_context: *mut c_void,
    /// `qp_type` (`enum ibv_qp_type`).
    pub qp_type: u32,
}

/// `struct ibv_flow_attr`: the header of `ibv_create_flow`'s argument.
///
/// `num_of_specs` specifications (`struct ibv_flow_spec_*`, each starting
/// with its type and size) follow it directly in the caller's memory;
/// libibverbs' `ibv_cmd_create_flow` walks and converts them, so roxe
/// declares only the header.
#[repr(C)]
pub struct FlowAttr {
    /// `comp_mask`: no bits are defined.
    pub comp_mask: u32,
    /// `type` (`enum ibv_flow_attr_type`).
    pub type_: u32,
    /// `size`: this header and the specifications, in bytes.
    pub size: u16,
    /// `priority`.
    pub priority: u16,
    /// `num_of_specs`.
    pub num_of_specs: u8,
    /// `port`.
    pub port: u8,
    /// `flags` (`enum ibv_flow_flags`).
    pub flags: u32,
}

/// `struct ibv_flow`: a steering rule, which the provider allocates and
/// `ibv_cmd_create_flow` fills in.
#[repr(C)]
pub struct Flow {
    /// `comp_mask`.
    pub comp_mask: u32,
    /// `context`.
    pub context: *mut Context,
    /// `handle`: the kernel's handle.
    pub handle: u32,
}

impl Flow {
    /// The all-zero value.
    pub const ZERO: Self = Self {
        comp_mask: 0,
        context: core::ptr::null_mut(),
        handle: 0,
    };
}

/// `enum ibv_rx_hash_function_flags`: `IBV_RX_HASH_FUNC_TOEPLITZ`.
pub const RX_HASH_FUNC_TOEPLITZ: u8 = 1 << 0;

/// `enum ibv_rx_hash_fields`: `IBV_RX_HASH_SRC_IPV4`.
pub const RX_HASH_SRC_IPV4: u64 = 1 << 0;
/// `IBV_RX_HASH_DST_IPV4`.
pub const RX_HASH_DST_IPV4: u64 = 1 << 1;
/// `IBV_RX_HASH_SRC_IPV6`.
pub const RX_HASH_SRC_IPV6: u64 = 1 << 2;
/// `IBV_RX_HASH_DST_IPV6`.
pub const RX_HASH_DST_IPV6: u64 = 1 << 3;
/// `IBV_RX_HASH_SRC_PORT_TCP`.
pub const RX_HASH_SRC_PORT_TCP: u64 = 1 << 4;
/// `IBV_RX_HASH_DST_PORT_TCP`.
pub const RX_HASH_DST_PORT_TCP: u64 = 1 << 5;
/// `IBV_RX_HASH_SRC_PORT_UDP`.
pub const RX_HASH_SRC_PORT_UDP: u64 = 1 << 6;
/// `IBV_RX_HASH_DST_PORT_UDP`.
pub const RX_HASH_DST_PORT_UDP: u64 = 1 << 7;
/// `IBV_RX_HASH_IPSEC_SPI`.
pub const RX_HASH_IPSEC_SPI: u64 = 1 << 8;
/// `IBV_RX_HASH_INNER`: hash the inner headers of a tunnelled packet.
pub const RX_HASH_INNER: u64 = 1 << 31;

/// `enum ibv_wq_type`: `IBV_WQT_RQ`, a receive work queue.
pub const WQT_RQ: u32 = 0;

/// `enum ibv_wq_init_attr_mask`: `IBV_WQ_INIT_ATTR_FLAGS`.
pub const WQ_INIT_ATTR_FLAGS: u32 = 1 << 0;
/// `IBV_WQ_INIT_ATTR_RESERVED`: this bit and those above it are unknown.
pub const WQ_INIT_ATTR_RESERVED: u32 = 1 << 1;

/// `enum ibv_wq_state`: `IBV_WQS_RESET`.
pub const WQS_RESET: u32 = 0;
/// `IBV_WQS_RDY`.
pub const WQS_RDY: u32 = 1;
/// `IBV_WQS_ERR`.
pub const WQS_ERR: u32 = 2;

/// `enum ibv_wq_attr_mask`: `IBV_WQ_ATTR_STATE`.
pub const WQ_ATTR_STATE: u32 = 1 << 0;
/// `IBV_WQ_ATTR_CURR_STATE`.
pub const WQ_ATTR_CURR_STATE: u32 = 1 << 1;
/// `IBV_WQ_ATTR_FLAGS`.
pub const WQ_ATTR_FLAGS: u32 = 1 << 2;
/// `IBV_WQ_ATTR_RESERVED`: this bit and those above it are unknown.
pub const WQ_ATTR_RESERVED: u32 = 1 << 3;

/// `IBV_CREATE_IND_TABLE_RESERVED` of `enum ibv_ind_table_init_attr_mask`:
/// no `comp_mask` bit is defined.
pub const CREATE_IND_TABLE_RESERVED: u32 = 1 << 0;

/// `struct ibv_wq_init_attr`: `ibv_create_wq`'s argument.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct WqInitAttr {
    /// `wq_context`.
    pub wq_context: *mut c_void,
    /// `wq_type` (`enum ibv_wq_type`).
    pub wq_type: u32,
    /// `max_wr`: what the caller asks for; set to what it got on success.
    pub max_wr: u32,
    /// `max_sge`: likewise.
    pub max_sge: u32,
    /// `pd`.
    pub pd: *mut Pd,
    /// `cq`: where the WQ's receives complete.
    pub cq: *mut Cq,
    /// `comp_mask` (`enum ibv_wq_init_attr_mask`).
    pub comp_mask: u32,
    /// `create_flags` (`enum ibv_wq_flags`), with `IBV_WQ_INIT_ATTR_FLAGS`.
    pub create_flags: u32,
}

/// `struct ibv_wq_attr`: `ibv_modify_wq`'s argument.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct WqAttr {
    /// `attr_mask` (`enum ibv_wq_attr_mask`).
    pub attr_mask: u32,
    /// `wq_state` (`enum ibv_wq_state`): the state to move to.
    pub wq_state: u32,
    /// `curr_wq_state`: the state the caller believes the WQ is in.
    pub curr_wq_state: u32,
    /// `flags` (`enum ibv_wq_flags`).
    pub flags: u32,
    /// `flags_mask`.
    pub flags_mask: u32,
}

/// `struct ibv_wq`: a receive work queue. `ibv_cmd_create_wq` fills in
/// its context, PD, CQ, type, number and handle; `ibv_create_wq` (inline
/// in `verbs.h`) its `wq_context`, mutex, condition variable and event
/// count; `ibv_cmd_modify_wq` keeps `state`. The provider sets
/// `post_recv`, which `ibv_post_wq_recv` calls.
#[repr(C)]
pub struct Wq {
    /// `context`.
    pub context: *mut Context,
    /// `wq_context`.
    pub wq_context: *mut c_void,
    /// `pd`.
    pub pd: *mut Pd,
    /// `cq`.
    pub cq: *mut Cq,
    /// `wq_num`.
    pub wq_num: u32,
    /// `handle`: the kernel's handle.
    pub handle: u32,
    /// `state` (`enum ibv_wq_state`).
    pub state: u32,
    /// `wq_type` (`enum ibv_wq_type`).
    pub wq_type: u32,
    /// `post_recv`: returns 0, or a positive errno with `*bad_recv_wr` set.
    pub post_recv: Option<
        unsafe extern "C" fn(
            current: *mut Wq,
            recv_wr: *mut RecvWr,
            bad_recv_wr: *mut *mut RecvWr,
        ) -> c_int,
    >,
    /// `mutex`.
    pub mutex: PthreadMutex,
    /// `cond`.
    pub cond: PthreadCond,
    /// `events_completed`.
    pub events_completed: u32,
    /// `comp_mask`.
    pub comp_mask: u32,
}

impl Wq {
    /// The all-zero value (a WQ in RESET, as `calloc` would hand it over).
    pub const ZERO: Self = Self {
        context: core::ptr::null_mut(),
        wq_context: core::ptr::null_mut(),
        pd: core::ptr::null_mut(),
        cq: core::ptr::null_mut(),
        wq_num: 0,
        handle: 0,
        state: WQS_RESET,
        wq_type: 0,
        post_recv: None,
        mutex: PthreadMutex::INITIALIZER,
        cond: PthreadCond::INITIALIZER,
        events_completed: 0,
        comp_mask: 0,
    };
}

/// `struct ibv_rwq_ind_table`: a receive work queue indirection table,
/// which the provider allocates and `ibv_cmd_create_rwq_ind_table` fills
/// in.
#[repr(C)]
pub struct RwqIndTable {
    /// `context`.
    pub context: *mut Context,
    /// `ind_tbl_handle`: the kernel's handle.
    pub ind_tbl_handle: c_int,
    /// `ind_tbl_num`.
    pub ind_tbl_num: c_int,
    /// `comp_mask`.
    pub comp_mask: u32,
}

impl RwqIndTable {
    /// The all-zero value.
    pub const ZERO: Self = Self {
        context: core::ptr::null_mut(),
        ind_tbl_handle: 0,
        ind_tbl_num: 0,
        comp_mask: 0,
    };
}

/// `struct ibv_rwq_ind_table_init_attr`: `ibv_create_rwq_ind_table`'s
/// argument.
#[repr(C)]
pub struct RwqIndTableInitAttr {
    /// `log_ind_tbl_size`: the table has `1 << log_ind_tbl_size` entries.
    pub log_ind_tbl_size: u32,
    /// `ind_tbl`: that many WQs.
    pub ind_tbl: *mut *mut Wq,
    /// `comp_mask` (`enum ibv_ind_table_init_attr_mask`).
    pub comp_mask: u32,
}

/// `enum ibv_mw_type` is an `int`-sized enum.
pub type MwType = c_uint;
/// `IBV_MW_TYPE_1`: bound with `ibv_bind_mw`.
pub const MW_TYPE_1: MwType = 1;
/// `IBV_MW_TYPE_2`: bound with a bind work request.
pub const MW_TYPE_2: MwType = 2;

/// `struct ibv_mw`.
#[repr(C)]
pub struct Mw {
    /// `context`.
    pub context: *mut Context,
    /// `pd`.
    pub pd: *mut Pd,
    /// `rkey`.
    pub rkey: u32,
    /// `handle`: the kernel's handle.
    pub handle: u32,
    /// `type` (`enum ibv_mw_type`).
    pub type_: MwType,
}

impl Mw {
    /// The all-zero value.
    pub const ZERO: Self = Self {
        context: core::ptr::null_mut(),
        pd: core::ptr::null_mut(),
        rkey: 0,
        handle: 0,
        type_: 0,
    };
}

/// `struct ibv_mw_bind_info`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct MwBindInfo {
    /// `mr`.
    pub mr: *mut Mr,
    /// `addr`.
    pub addr: u64,
    /// `length`.
    pub length: u64,
    /// `mw_access_flags`.
    pub mw_access_flags: c_uint,
}

/// `struct ibv_mw_bind`: the argument of `ibv_bind_mw`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct MwBind {
    /// `wr_id`.
    pub wr_id: u64,
    /// `send_flags` (`enum ibv_send_flags`).
    pub send_flags: c_uint,
    /// `bind_info`.
    pub bind_info: MwBindInfo,
}

/// `struct ibv_sge`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sge {
    /// `addr`.
    pub addr: u64,
    /// `length`.
    pub length: u32,
    /// `lkey`.
    pub lkey: u32,
}

/// The `rdma` member of `ibv_send_wr.wr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct RdmaWr {
    /// `remote_addr`.
    pub remote_addr: u64,
    /// `rkey`.
    pub rkey: u32,
}

/// The `atomic` member of `ibv_send_wr.wr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct AtomicWr {
    /// `remote_addr`.
    pub remote_addr: u64,
    /// `compare_add`.
    pub compare_add: u64,
    /// `swap`.
    pub swap: u64,
    /// `rkey`.
    pub rkey: u32,
}

/// The `ud` member of `ibv_send_wr.wr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct UdWr {
    /// `ah`.
    pub ah: *mut Ah,
    /// `remote_qpn`.
    pub remote_qpn: u32,
    /// `remote_qkey`.
    pub remote_qkey: u32,
}

/// The union `wr` of `struct ibv_send_wr`: which member is meant depends
/// on the QP type and the opcode.
#[repr(C)]
#[derive(Clone, Copy)]
pub union SendWrWr {
    /// `rdma`.
    pub rdma: RdmaWr,
    /// `atomic`.
    pub atomic: AtomicWr,
    /// `ud`.
    pub ud: UdWr,
}

/// The `bind_mw` member of the last union of `struct ibv_send_wr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct BindMwWr {
    /// `mw`.
    pub mw: *mut Mw,
    /// `rkey`.
    pub rkey: u32,
    /// `bind_info`.
    pub bind_info: MwBindInfo,
}

/// The `tso` member of the last union of `struct ibv_send_wr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct TsoWr {
    /// `hdr`.
    pub hdr: *mut c_void,
    /// `hdr_sz`.
    pub hdr_sz: u16,
    /// `mss`.
    pub mss: u16,
}

/// The anonymous last union of `struct ibv_send_wr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union SendWrExtra {
    /// `bind_mw`.
    pub bind_mw: BindMwWr,
    /// `tso`.
    pub tso: TsoWr,
}

/// `struct ibv_send_wr`.
#[repr(C)]
pub struct SendWr {
    /// `wr_id`.
    pub wr_id: u64,
    /// `next`.
    pub next: *mut SendWr,
    /// `sg_list`.
    pub sg_list: *mut Sge,
    /// `num_sge`.
    pub num_sge: c_int,
    /// `opcode` (`enum ibv_wr_opcode`).
    pub opcode: u32,
    /// `send_flags` (`enum ibv_send_flags`).
    pub send_flags: c_uint,
    /// The anonymous union of `imm_data` (network byte order) and
    /// `invalidate_rkey`; both are 32 bits at the same place.
    pub imm_data: u32,
    /// `wr`.
    pub wr: SendWrWr,
    /// `qp_type.xrc.remote_srqn`, the only member of the `qp_type` union:
    /// on an XRC send QP, the number of the XRC SRQ that receives the work
    /// request.
    pub remote_srqn: u32,
    /// The anonymous union of `bind_mw` and `tso`.
    pub extra: SendWrExtra,
}

/// `struct ibv_recv_wr`.
#[repr(C)]
pub struct RecvWr {
    /// `wr_id`.
    pub wr_id: u64,
    /// `next`.
    pub next: *mut RecvWr,
    /// `sg_list`.
    pub sg_list: *mut Sge,
    /// `num_sge`.
    pub num_sge: c_int,
}

/// `struct ibv_create_qp` from the private `kern-abi.h`.
#[repr(C)]
#[derive(Default)]
pub struct CreateQp {
    /// `hdr`.
    pub hdr: uverbs::CmdHdr,
    /// `core_payload`.
    pub core_payload: uverbs::CreateQp,
}

/// `struct ibv_modify_qp` from the private `kern-abi.h`.
#[repr(C)]
#[derive(Default)]
pub struct ModifyQp {
    /// `hdr`.
    pub hdr: uverbs::CmdHdr,
    /// `core_payload`.
    pub core_payload: uverbs::ModifyQp,
}

/// `struct ibv_query_qp` from the private `kern-abi.h`.
#[repr(C)]
#[derive(Default)]
pub struct QueryQp {
    /// `hdr`.
    pub hdr: uverbs::CmdHdr,
    /// `core_payload`.
    pub core_payload: uverbs::QueryQp,
}

/// `struct ibv_create_srq` from the private `kern-abi.h`.
#[repr(C)]
#[derive(Default)]
pub struct CreateSrq {
    /// `hdr`.
    pub hdr: uverbs::CmdHdr,
    /// `core_payload`.
    pub core_payload: uverbs::CreateSrq,
}

/// `struct ibv_modify_srq` from the private `kern-abi.h`.
#[repr(C)]
#[derive(Default)]
pub struct ModifySrq {
    /// `hdr`.
    pub hdr: uverbs::CmdHdr,
    /// `core_payload`.
    pub core_payload: uverbs::ModifySrq,
}

/// `struct ibv_query_srq` from the private `kern-abi.h`.
#[repr(C)]
#[derive(Default)]
pub struct QuerySrq {
    /// `hdr`.
    pub hdr: uverbs::CmdHdr,
    /// `core_payload`.
    pub core_payload: uverbs::QuerySrq,
}

/// `struct ibv_alloc_mw` from the private `kern-abi.h`.
#[repr(C)]
#[derive(Default)]
pub struct AllocMw {
    /// `hdr`.
    pub hdr: uverbs::CmdHdr,
    /// `core_payload`.
    pub core_payload: uverbs::AllocMw,
}

/// `struct ibv_open_xrcd` from the private `kern-abi.h`.
#[repr(C)]
#[derive(Default)]
pub struct OpenXrcd {
    /// `hdr`.
    pub hdr: uverbs::CmdHdr,
    /// `core_payload`.
    pub core_payload: uverbs::OpenXrcd,
}

/// `struct ibv_create_xsrq` from the private `kern-abi.h`.
#[repr(C)]
#[derive(Default)]
pub struct CreateXsrq {
    /// `hdr`.
    pub hdr: uverbs::CmdHdr,
    /// `core_payload`.
    pub core_payload: uverbs::CreateXsrq,
}

/// `struct ibv_open_qp` from the private `kern-abi.h`.
#[repr(C)]
#[derive(Default)]
pub struct OpenQp {
    /// `hdr`.
    pub hdr: uverbs::CmdHdr,
    /// `core_payload`.
    pub core_payload: uverbs::OpenQp,
}

/// `struct ibv_create_qp_ex` from the private `kern-abi.h`: the command
/// of `ibv_cmd_create_qp_ex2`.
#[repr(C)]
#[derive(Default)]
pub struct CreateQpEx {
    /// `hdr`.
    pub hdr: ExHdr,
    /// `core_payload`.
    pub core_payload: uverbs::ExCreateQp,
}

/// `struct ibv_create_wq` from the private `kern-abi.h`.
#[repr(C)]
#[derive(Default)]
pub struct CreateWq {
    /// `hdr`.
    pub hdr: ExHdr,
    /// `core_payload`.
    pub core_payload: uverbs::ExCreateWq,
}

/// `struct ibv_modify_wq` from the private `kern-abi.h`.
#[repr(C)]
#[derive(Default)]
pub struct ModifyWq {
    /// `hdr`.
    pub hdr: ExHdr,
    /// `core_payload`.
    pub core_payload: uverbs::ExModifyWq,
}
