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
