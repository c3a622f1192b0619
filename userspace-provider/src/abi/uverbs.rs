// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Kernel uverbs structures from `rdma/ib_user_verbs.h`, and the driver id
//! from `rdma/ib_user_ioctl_verbs.h`.
//!
//! Flexible `driver_data[]` tails are left out: they add no size, and the
//! 8-byte alignment they give the C struct is restated with `align(8)`.

/// `RDMA_DRIVER_UNKNOWN` of `enum rdma_driver_id`. The kernel's enum has no
/// roxe entry, so roxe devices register with this id.
pub const RDMA_DRIVER_UNKNOWN: u32 = 0;

/// `struct ib_uverbs_cmd_hdr`.
#[repr(C)]
#[derive(Default)]
pub struct CmdHdr {
    /// `command`.
    pub command: u32,
    /// `in_words`.
    pub in_words: u16,
    /// `out_words`.
    pub out_words: u16,
}

/// `struct ib_uverbs_get_context`.
#[repr(C)]
#[derive(Default)]
pub struct GetContext {
    /// `response`.
    pub response: u64,
}

/// `struct ib_uverbs_get_context_resp`.
#[repr(C, align(8))]
#[derive(Default)]
pub struct GetContextResp {
    /// `async_fd`.
    pub async_fd: u32,
    /// `num_comp_vectors`.
    pub num_comp_vectors: u32,
}

/// `struct ib_uverbs_query_port`.
#[repr(C)]
#[derive(Default)]
pub struct QueryPort {
    /// `response`.
    pub response: u64,
    /// `port_num`.
    pub port_num: u8,
    /// `reserved`.
    pub reserved: [u8; 7],
}

/// `struct ib_uverbs_query_device_resp`.
#[repr(C)]
#[derive(Default)]
pub struct QueryDeviceResp {
    /// `fw_ver`: the device's raw 64-bit firmware version.
    pub fw_ver: u64,
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
    pub max_qp: u32,
    /// `max_qp_wr`.
    pub max_qp_wr: u32,
    /// `device_cap_flags`.
    pub device_cap_flags: u32,
    /// `max_sge`.
    pub max_sge: u32,
    /// `max_sge_rd`.
    pub max_sge_rd: u32,
    /// `max_cq`.
    pub max_cq: u32,
    /// `max_cqe`.
    pub max_cqe: u32,
    /// `max_mr`.
    pub max_mr: u32,
    /// `max_pd`.
    pub max_pd: u32,
    /// `max_qp_rd_atom`.
    pub max_qp_rd_atom: u32,
    /// `max_ee_rd_atom`.
    pub max_ee_rd_atom: u32,
    /// `max_res_rd_atom`.
    pub max_res_rd_atom: u32,
    /// `max_qp_init_rd_atom`.
    pub max_qp_init_rd_atom: u32,
    /// `max_ee_init_rd_atom`.
    pub max_ee_init_rd_atom: u32,
    /// `atomic_cap`.
    pub atomic_cap: u32,
    /// `max_ee`.
    pub max_ee: u32,
    /// `max_rdd`.
    pub max_rdd: u32,
    /// `max_mw`.
    pub max_mw: u32,
    /// `max_raw_ipv6_qp`.
    pub max_raw_ipv6_qp: u32,
    /// `max_raw_ethy_qp`.
    pub max_raw_ethy_qp: u32,
    /// `max_mcast_grp`.
    pub max_mcast_grp: u32,
    /// `max_mcast_qp_attach`.
    pub max_mcast_qp_attach: u32,
    /// `max_total_mcast_qp_attach`.
    pub max_total_mcast_qp_attach: u32,
    /// `max_ah`.
    pub max_ah: u32,
    /// `max_fmr`.
    pub max_fmr: u32,
    /// `max_map_per_fmr`.
    pub max_map_per_fmr: u32,
    /// `max_srq`.
    pub max_srq: u32,
    /// `max_srq_wr`.
    pub max_srq_wr: u32,
    /// `max_srq_sge`.
    pub max_srq_sge: u32,
    /// `max_pkeys`.
    pub max_pkeys: u16,
    /// `local_ca_ack_delay`.
    pub local_ca_ack_delay: u8,
    /// `phys_port_cnt`.
    pub phys_port_cnt: u8,
    /// `reserved`.
    pub reserved: [u8; 4],
}

/// The anonymous `per_transport_caps` member of `struct ib_uverbs_odp_caps`.
#[repr(C)]
#[derive(Default)]
pub struct OdpPerTransportCaps {
    /// `rc_odp_caps`.
    pub rc_odp_caps: u32,
    /// `uc_odp_caps`.
    pub uc_odp_caps: u32,
    /// `ud_odp_caps`.
    pub ud_odp_caps: u32,
}

/// `struct ib_uverbs_odp_caps`.
#[repr(C)]
#[derive(Default)]
pub struct OdpCaps {
    /// `general_caps`.
    pub general_caps: u64,
    /// `per_transport_caps`.
    pub per_transport_caps: OdpPerTransportCaps,
    /// `reserved`.
    pub reserved: u32,
}

/// `struct ib_uverbs_rss_caps`.
#[repr(C)]
#[derive(Default)]
pub struct RssCaps {
    /// `supported_qpts`.
    pub supported_qpts: u32,
    /// `max_rwq_indirection_tables`.
    pub max_rwq_indirection_tables: u32,
    /// `max_rwq_indirection_table_size`.
    pub max_rwq_indirection_table_size: u32,
    /// `reserved`.
    pub reserved: u32,
}

/// `struct ib_uverbs_tm_caps`.
#[repr(C)]
#[derive(Default)]
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
    /// `reserved`.
    pub reserved: u32,
}

/// `struct ib_uverbs_cq_moderation_caps`.
#[repr(C)]
#[derive(Default)]
pub struct CqModerationCaps {
    /// `max_cq_moderation_count`.
    pub max_cq_moderation_count: u16,
    /// `max_cq_moderation_period`.
    pub max_cq_moderation_period: u16,
    /// `reserved`.
    pub reserved: u32,
}

/// `struct ib_uverbs_ex_query_device_resp`.
#[repr(C)]
#[derive(Default)]
pub struct ExQueryDeviceResp {
    /// `base`.
    pub base: QueryDeviceResp,
    /// `comp_mask`.
    pub comp_mask: u32,
    /// `response_length`: how many bytes the kernel wrote.
    pub response_length: u32,
    /// `odp_caps`.
    pub odp_caps: OdpCaps,
    /// `timestamp_mask`.
    pub timestamp_mask: u64,
    /// `hca_core_clock` (kHz).
    pub hca_core_clock: u64,
    /// `device_cap_flags_ex`.
    pub device_cap_flags_ex: u64,
    /// `rss_caps`.
    pub rss_caps: RssCaps,
    /// `max_wq_type_rq`.
    pub max_wq_type_rq: u32,
    /// `raw_packet_caps`.
    pub raw_packet_caps: u32,
    /// `tm_caps`.
    pub tm_caps: TmCaps,
    /// `cq_moderation_caps`.
    pub cq_moderation_caps: CqModerationCaps,
    /// `max_dm_size`.
    pub max_dm_size: u64,
    /// `xrc_odp_caps`.
    pub xrc_odp_caps: u32,
    /// `reserved`.
    pub reserved: u32,
}

/// `struct ib_uverbs_ex_cmd_hdr`: the second header of `_ex` write commands.
#[repr(C)]
#[derive(Default)]
pub struct ExCmdHdr {
    /// `response`.
    pub response: u64,
    /// `provider_in_words`.
    pub provider_in_words: u16,
    /// `provider_out_words`.
    pub provider_out_words: u16,
    /// `cmd_hdr_reserved`.
    pub cmd_hdr_reserved: u32,
}

/// `struct ib_uverbs_alloc_pd`.
#[repr(C)]
#[derive(Default)]
pub struct AllocPd {
    /// `response`.
    pub response: u64,
}

/// `struct ib_uverbs_alloc_pd_resp`.
#[repr(C)]
#[derive(Default)]
pub struct AllocPdResp {
    /// `pd_handle`.
    pub pd_handle: u32,
}

/// `struct ib_uverbs_reg_mr`.
#[repr(C)]
#[derive(Default)]
pub struct RegMr {
    /// `response`.
    pub response: u64,
    /// `start`.
    pub start: u64,
    /// `length`.
    pub length: u64,
    /// `hca_va`.
    pub hca_va: u64,
    /// `pd_handle`.
    pub pd_handle: u32,
    /// `access_flags`.
    pub access_flags: u32,
}

/// `struct ib_uverbs_reg_mr_resp`.
#[repr(C)]
#[derive(Default)]
pub struct RegMrResp {
    /// `mr_handle`.
    pub mr_handle: u32,
    /// `lkey`.
    pub lkey: u32,
    /// `rkey`.
    pub rkey: u32,
}

/// `struct ib_uverbs_rereg_mr`.
#[repr(C)]
#[derive(Default)]
pub struct ReregMr {
    /// `response`.
    pub response: u64,
    /// `mr_handle`.
    pub mr_handle: u32,
    /// `flags`.
    pub flags: u32,
    /// `start`.
    pub start: u64,
    /// `length`.
    pub length: u64,
    /// `hca_va`.
    pub hca_va: u64,
    /// `pd_handle`.
    pub pd_handle: u32,
    /// `access_flags`.
    pub access_flags: u32,
}

/// `struct ib_uverbs_rereg_mr_resp`.
#[repr(C, align(8))]
#[derive(Default)]
pub struct ReregMrResp {
    /// `lkey`.
    pub lkey: u32,
    /// `rkey`.
    pub rkey: u32,
}

/// `struct ib_uverbs_create_cq`.
#[repr(C)]
#[derive(Default)]
pub struct CreateCq {
    /// `response`.
    pub response: u64,
    /// `user_handle`.
    pub user_handle: u64,
    /// `cqe`.
    pub cqe: u32,
    /// `comp_vector`.
    pub comp_vector: u32,
    /// `comp_channel`.
    pub comp_channel: i32,
    /// `reserved`.
    pub reserved: u32,
}

/// `struct ib_uverbs_create_cq_resp`.
#[repr(C, align(8))]
#[derive(Default)]
pub struct CreateCqResp {
    /// `cq_handle`.
    pub cq_handle: u32,
    /// `cqe`.
    pub cqe: u32,
}

/// `struct ib_uverbs_ex_create_cq`.
#[repr(C)]
#[derive(Default)]
pub struct ExCreateCq {
    /// `user_handle`.
    pub user_handle: u64,
    /// `cqe`.
    pub cqe: u32,
    /// `comp_vector`.
    pub comp_vector: u32,
    /// `comp_channel`.
    pub comp_channel: i32,
    /// `comp_mask`.
    pub comp_mask: u32,
    /// `flags` (`enum ib_uverbs_ex_create_cq_flags`).
    pub flags: u32,
    /// `reserved`.
    pub reserved: u32,
}

/// `struct ib_uverbs_ex_create_cq_resp`.
#[repr(C)]
#[derive(Default)]
pub struct ExCreateCqResp {
    /// `base`.
    pub base: CreateCqResp,
    /// `comp_mask`.
    pub comp_mask: u32,
    /// `response_length`.
    pub response_length: u32,
}

/// `struct ib_uverbs_resize_cq`.
#[repr(C)]
#[derive(Default)]
pub struct ResizeCq {
    /// `response`.
    pub response: u64,
    /// `cq_handle`.
    pub cq_handle: u32,
    /// `cqe`.
    pub cqe: u32,
}

/// `struct ib_uverbs_resize_cq_resp`.
#[repr(C, align(8))]
#[derive(Default)]
pub struct ResizeCqResp {
    /// `cqe`.
    pub cqe: u32,
    /// `reserved`.
    pub reserved: u32,
}

/// `struct ib_uverbs_create_ah_resp`.
#[repr(C)]
#[derive(Default)]
pub struct CreateAhResp {
    /// `ah_handle`.
    pub ah_handle: u32,
}

/// `struct ib_uverbs_create_qp`.
#[repr(C)]
#[derive(Default)]
pub struct CreateQp {
    /// `response`.
    pub response: u64,
    /// `user_handle`.
    pub user_handle: u64,
    /// `pd_handle`.
    pub pd_handle: u32,
    /// `send_cq_handle`.
    pub send_cq_handle: u32,
    /// `recv_cq_handle`.
    pub recv_cq_handle: u32,
    /// `srq_handle`.
    pub srq_handle: u32,
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
    /// `sq_sig_all`.
    pub sq_sig_all: u8,
    /// `qp_type`.
    pub qp_type: u8,
    /// `is_srq`.
    pub is_srq: u8,
    /// `reserved`.
    pub reserved: u8,
}

/// `struct ib_uverbs_create_qp_resp`.
#[repr(C)]
#[derive(Default)]
pub struct CreateQpResp {
    /// `qp_handle`.
    pub qp_handle: u32,
    /// `qpn`.
    pub qpn: u32,
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
    /// `reserved`.
    pub reserved: u32,
}

/// `struct ib_uverbs_qp_dest`.
#[repr(C)]
#[derive(Default)]
pub struct QpDest {
    /// `dgid`.
    pub dgid: [u8; 16],
    /// `flow_label`.
    pub flow_label: u32,
    /// `dlid`.
    pub dlid: u16,
    /// `reserved`.
    pub reserved: u16,
    /// `sgid_index`.
    pub sgid_index: u8,
    /// `hop_limit`.
    pub hop_limit: u8,
    /// `traffic_class`.
    pub traffic_class: u8,
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

/// `struct ib_uverbs_modify_qp`.
#[repr(C, align(8))]
#[derive(Default)]
pub struct ModifyQp {
    /// `dest`.
    pub dest: QpDest,
    /// `alt_dest`.
    pub alt_dest: QpDest,
    /// `qp_handle`.
    pub qp_handle: u32,
    /// `attr_mask`.
    pub attr_mask: u32,
    /// `qkey`.
    pub qkey: u32,
    /// `rq_psn`.
    pub rq_psn: u32,
    /// `sq_psn`.
    pub sq_psn: u32,
    /// `dest_qp_num`.
    pub dest_qp_num: u32,
    /// `qp_access_flags`.
    pub qp_access_flags: u32,
    /// `pkey_index`.
    pub pkey_index: u16,
    /// `alt_pkey_index`.
    pub alt_pkey_index: u16,
    /// `qp_state`.
    pub qp_state: u8,
    /// `cur_qp_state`.
    pub cur_qp_state: u8,
    /// `path_mtu`.
    pub path_mtu: u8,
    /// `path_mig_state`.
    pub path_mig_state: u8,
    /// `en_sqd_async_notify`.
    pub en_sqd_async_notify: u8,
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
    /// `reserved`.
    pub reserved: [u8; 2],
}

/// `struct ib_uverbs_query_qp`.
#[repr(C)]
#[derive(Default)]
pub struct QueryQp {
    /// `response`.
    pub response: u64,
    /// `qp_handle`.
    pub qp_handle: u32,
    /// `attr_mask`.
    pub attr_mask: u32,
}

/// `struct ib_uverbs_create_srq`.
#[repr(C)]
#[derive(Default)]
pub struct CreateSrq {
    /// `response`.
    pub response: u64,
    /// `user_handle`.
    pub user_handle: u64,
    /// `pd_handle`.
    pub pd_handle: u32,
    /// `max_wr`.
    pub max_wr: u32,
    /// `max_sge`.
    pub max_sge: u32,
    /// `srq_limit`.
    pub srq_limit: u32,
}

/// `struct ib_uverbs_create_srq_resp`.
#[repr(C)]
#[derive(Default)]
pub struct CreateSrqResp {
    /// `srq_handle`.
    pub srq_handle: u32,
    /// `max_wr`.
    pub max_wr: u32,
    /// `max_sge`.
    pub max_sge: u32,
    /// `srqn`.
    pub srqn: u32,
}

/// `struct ib_uverbs_modify_srq`.
#[repr(C, align(8))]
#[derive(Default)]
pub struct ModifySrq {
    /// `srq_handle`.
    pub srq_handle: u32,
    /// `attr_mask`.
    pub attr_mask: u32,
    /// `max_wr`.
    pub max_wr: u32,
    /// `srq_limit`.
    pub srq_limit: u32,
}

/// `struct ib_uverbs_query_srq`.
#[repr(C)]
#[derive(Default)]
pub struct QuerySrq {
    /// `response`.
    pub response: u64,
    /// `srq_handle`.
    pub srq_handle: u32,
    /// `reserved`.
    pub reserved: u32,
}

/// `struct ib_uverbs_alloc_mw`.
#[repr(C)]
#[derive(Default)]
pub struct AllocMw {
    /// `response`.
    pub response: u64,
    /// `pd_handle`.
    pub pd_handle: u32,
    /// `mw_type`.
    pub mw_type: u8,
    /// `reserved`.
    pub reserved: [u8; 3],
}

/// `struct ib_uverbs_alloc_mw_resp`.
#[repr(C, align(8))]
#[derive(Default)]
pub struct AllocMwResp {
    /// `mw_handle`.
    pub mw_handle: u32,
    /// `rkey`.
    pub rkey: u32,
}

/// `struct ib_uverbs_open_xrcd`.
#[repr(C)]
#[derive(Default)]
pub struct OpenXrcd {
    /// `response`.
    pub response: u64,
    /// `fd`.
    pub fd: u32,
    /// `oflags`.
    pub oflags: u32,
}

/// `struct ib_uverbs_open_xrcd_resp`.
#[repr(C)]
#[derive(Default)]
pub struct OpenXrcdResp {
    /// `xrcd_handle`.
    pub xrcd_handle: u32,
}

/// `struct ib_uverbs_create_xsrq`.
#[repr(C)]
#[derive(Default)]
pub struct CreateXsrq {
    /// `response`.
    pub response: u64,
    /// `user_handle`.
    pub user_handle: u64,
    /// `srq_type`.
    pub srq_type: u32,
    /// `pd_handle`.
    pub pd_handle: u32,
    /// `max_wr`.
    pub max_wr: u32,
    /// `max_sge`.
    pub max_sge: u32,
    /// `srq_limit`.
    pub srq_limit: u32,
    /// `max_num_tags`.
    pub max_num_tags: u32,
    /// `xrcd_handle`.
    pub xrcd_handle: u32,
    /// `cq_handle`.
    pub cq_handle: u32,
}

/// `struct ib_uverbs_open_qp`. Its response is `struct
/// ib_uverbs_create_qp_resp` ([`CreateQpResp`]).
#[repr(C)]
#[derive(Default)]
pub struct OpenQp {
    /// `response`.
    pub response: u64,
    /// `user_handle`.
    pub user_handle: u64,
    /// `pd_handle`: the XRC domain's handle.
    pub pd_handle: u32,
    /// `qpn`.
    pub qpn: u32,
    /// `qp_type`.
    pub qp_type: u8,
    /// `reserved`.
    pub reserved: [u8; 7],
}

/// `struct ib_uverbs_ex_create_qp`: the request of `ibv_cmd_create_qp_ex2`.
#[repr(C)]
#[derive(Default)]
pub struct ExCreateQp {
    /// `user_handle`.
    pub user_handle: u64,
    /// `pd_handle`.
    pub pd_handle: u32,
    /// `send_cq_handle`.
    pub send_cq_handle: u32,
    /// `recv_cq_handle`.
    pub recv_cq_handle: u32,
    /// `srq_handle`.
    pub srq_handle: u32,
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
    /// `sq_sig_all`.
    pub sq_sig_all: u8,
    /// `qp_type`.
    pub qp_type: u8,
    /// `is_srq`.
    pub is_srq: u8,
    /// `reserved`.
    pub reserved: u8,
    /// `comp_mask`.
    pub comp_mask: u32,
    /// `create_flags`.
    pub create_flags: u32,
    /// `rwq_ind_tbl_handle`.
    pub rwq_ind_tbl_handle: u32,
    /// `source_qpn`.
    pub source_qpn: u32,
}

/// `struct ib_uverbs_ex_create_qp_resp`.
#[repr(C)]
#[derive(Default)]
pub struct ExCreateQpResp {
    /// `base`.
    pub base: CreateQpResp,
    /// `comp_mask`.
    pub comp_mask: u32,
    /// `response_length`.
    pub response_length: u32,
}

/// `struct ib_uverbs_ex_create_wq`.
#[repr(C)]
#[derive(Default)]
pub struct ExCreateWq {
    /// `comp_mask`.
    pub comp_mask: u32,
    /// `wq_type`.
    pub wq_type: u32,
    /// `user_handle`.
    pub user_handle: u64,
    /// `pd_handle`.
    pub pd_handle: u32,
    /// `cq_handle`.
    pub cq_handle: u32,
    /// `max_wr`.
    pub max_wr: u32,
    /// `max_sge`.
    pub max_sge: u32,
    /// `create_flags`.
    pub create_flags: u32,
    /// `reserved`.
    pub reserved: u32,
}

/// `struct ib_uverbs_ex_create_wq_resp`.
#[repr(C)]
#[derive(Default)]
pub struct ExCreateWqResp {
    /// `comp_mask`.
    pub comp_mask: u32,
    /// `response_length`.
    pub response_length: u32,
    /// `wq_handle`.
    pub wq_handle: u32,
    /// `max_wr`.
    pub max_wr: u32,
    /// `max_sge`.
    pub max_sge: u32,
    /// `wqn`.
    pub wqn: u32,
}

/// `struct ib_uverbs_ex_modify_wq`.
#[repr(C)]
#[derive(Default)]
pub struct ExModifyWq {
    /// `attr_mask`.
    pub attr_mask: u32,
    /// `wq_handle`.
    pub wq_handle: u32,
    /// `wq_state`.
    pub wq_state: u32,
    /// `curr_wq_state`.
    pub curr_wq_state: u32,
    /// `flags`.
    pub flags: u32,
    /// `flags_mask`.
    pub flags_mask: u32,
}

/// `IB_USER_VERBS_MAX_LOG_IND_TBL_SIZE`: the kernel refuses indirection
/// tables of more than `1 << 13` entries.
pub const MAX_LOG_IND_TBL_SIZE: u32 = 0x0d;

/// `struct ib_uverbs_ex_create_rwq_ind_table_resp`.
#[repr(C)]
#[derive(Default)]
pub struct ExCreateRwqIndTableResp {
    /// `comp_mask`.
    pub comp_mask: u32,
    /// `response_length`.
    pub response_length: u32,
    /// `ind_tbl_handle`.
    pub ind_tbl_handle: u32,
    /// `ind_tbl_num`.
    pub ind_tbl_num: u32,
}
