// SPDX-License-Identifier: GPL-2.0

//! Device and port attributes as plain Rust values.
//!
//! Drivers fill these; the device adapter copies them into the C structs
//! the RDMA core reads, so drivers never touch `ib_device_attr` directly.

use crate::bindings;

/// Port state (`enum ib_port_state`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PortState {
    /// No link.
    Down,
    /// Link up and usable.
    Active,
}

/// Physical port state (`enum ib_port_phys_state`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PhysState {
    /// Administratively or physically disabled.
    Disabled,
    /// Link is up.
    LinkUp,
}

/// Attributes of the device as a whole (`struct ib_device_attr`). Limits
/// for resources that the driver does not implement stay zero.
#[derive(Clone, Debug, Default)]
pub(crate) struct DeviceAttr {
    pub(crate) fw_ver: u64,
    /// Big-endian, as on the wire.
    pub(crate) sys_image_guid: [u8; 8],
    pub(crate) max_mr_size: u64,
    pub(crate) page_size_cap: u64,
    pub(crate) vendor_id: u32,
    pub(crate) vendor_part_id: u32,
    pub(crate) hw_ver: u32,
    pub(crate) max_qp: u32,
    pub(crate) max_qp_wr: u32,
    pub(crate) max_send_sge: u32,
    pub(crate) max_recv_sge: u32,
    pub(crate) max_sge_rd: u32,
    pub(crate) max_cq: u32,
    pub(crate) max_cqe: u32,
    pub(crate) max_mr: u32,
    pub(crate) max_pd: u32,
    pub(crate) max_qp_rd_atom: u32,
    pub(crate) max_qp_init_rd_atom: u32,
    pub(crate) max_res_rd_atom: u32,
    pub(crate) max_mw: u32,
    pub(crate) max_ah: u32,
    pub(crate) max_srq: u32,
    pub(crate) max_srq_wr: u32,
    pub(crate) max_srq_sge: u32,
    pub(crate) max_fast_reg_page_list_len: u32,
    /// Multicast groups, QPs per group, and attachments in all.
    pub(crate) max_mcast_grp: u32,
    pub(crate) max_mcast_qp_attach: u32,
    pub(crate) max_total_mcast_qp_attach: u32,
    pub(crate) max_pkeys: u16,
    pub(crate) local_ca_ack_delay: u8,
    /// `IB_DEVICE_*` capability flags.
    pub(crate) device_cap_flags: u64,
    /// Whether `rdma link delete` may remove the device.
    pub(crate) allow_user_unregister: bool,
    /// Whether remote atomics are atomic across the whole device
    /// (`IB_ATOMIC_HCA`), or not offered.
    pub(crate) atomic_hca: bool,
    /// On-demand paging: what it supports, all zero for none.
    pub(crate) odp: OdpCaps,
    /// Receive WQs (`max_wq_type_rq`), 0 for none.
    pub(crate) max_wq_type_rq: u32,
    /// RSS: indirection tables, and the entries of one (0 for no RSS);
    /// RSS QPs are raw packet QPs.
    pub(crate) max_rwq_indirection_tables: u32,
    pub(crate) max_rwq_indirection_table_size: u32,
}

/// On-demand-paging capabilities (`struct ib_odp_caps`): `general` holds
/// `IB_ODP_SUPPORT*`, the others per transport the operations an ODP MR
/// may serve (`IB_ODP_SUPPORT_SEND` ...).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct OdpCaps {
    pub(crate) general: u64,
    pub(crate) rc: u32,
    pub(crate) uc: u32,
    pub(crate) ud: u32,
    pub(crate) xrc: u32,
}

/// `IB_ODP_SUPPORT`: ODP MRs over a given range.
pub(crate) const ODP_SUPPORT: u64 = bindings::ib_odp_general_cap_bits_IB_ODP_SUPPORT as u64;
/// `IB_ODP_SUPPORT_IMPLICIT`: ODP MRs over the whole address space.
pub(crate) const ODP_SUPPORT_IMPLICIT: u64 =
    bindings::ib_odp_general_cap_bits_IB_ODP_SUPPORT_IMPLICIT as u64;
/// Per-transport ODP operations (`ib_odp_transport_cap_bits`).
pub(crate) const ODP_SEND: u32 = bindings::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_SEND;
pub(crate) const ODP_RECV: u32 = bindings::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_RECV;
pub(crate) const ODP_WRITE: u32 = bindings::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_WRITE;
pub(crate) const ODP_READ: u32 = bindings::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_READ;
pub(crate) const ODP_ATOMIC: u32 = bindings::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_ATOMIC;
pub(crate) const ODP_SRQ_RECV: u32 = bindings::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_SRQ_RECV;
/// rdma-core's `IBV_ODP_SUPPORT_FLUSH` and `IBV_ODP_SUPPORT_ATOMIC_WRITE`,
/// which 6.12 passes through to user space but does not name.
pub(crate) const ODP_FLUSH: u32 = 1 << 6;
pub(crate) const ODP_ATOMIC_WRITE: u32 = 1 << 7;

/// Attributes of one port (`struct ib_port_attr`).
#[derive(Clone, Debug)]
pub(crate) struct PortAttr {
    pub(crate) state: PortState,
    pub(crate) phys_state: PhysState,
    /// IB MTU enum values (1 = 256 bytes ... 5 = 4096 bytes).
    pub(crate) max_mtu: u32,
    pub(crate) active_mtu: u32,
    /// The MTU of the underlying link in bytes.
    pub(crate) phys_mtu: u32,
    pub(crate) gid_tbl_len: u32,
    pub(crate) pkey_tbl_len: u16,
    pub(crate) port_cap_flags: u32,
    pub(crate) max_msg_sz: u32,
    pub(crate) max_vl_num: u8,
    pub(crate) active_speed: u16,
    pub(crate) active_width: u8,
}

/// Port properties fixed at registration (`struct ib_port_immutable`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct PortImmutable {
    pub(crate) pkey_tbl_len: u32,
    pub(crate) gid_tbl_len: u32,
    pub(crate) roce_v2: bool,
    pub(crate) max_mad_size: u32,
}

/// The port capability bit for connection management support.
pub(crate) const PORT_CM_SUP: u32 = bindings::ib_port_capability_mask_bits_IB_PORT_CM_SUP;
/// The device reports port state changes (`IB_DEVICE_PORT_ACTIVE_EVENT`).
pub(crate) const CAP_PORT_ACTIVE_EVENT: u64 =
    bindings::ib_device_cap_flags_IB_DEVICE_PORT_ACTIVE_EVENT as u64;
/// The device sets a system image GUID (`IB_DEVICE_SYS_IMAGE_GUID`).
pub(crate) const CAP_SYS_IMAGE_GUID: u64 =
    bindings::ib_device_cap_flags_IB_DEVICE_SYS_IMAGE_GUID as u64;
/// `IB_DEVICE_ATOMIC_WRITE`: the RC Atomic Write operation.
pub(crate) const CAP_ATOMIC_WRITE: u64 =
    bindings::ib_device_cap_flags_IB_DEVICE_ATOMIC_WRITE as u64;
/// `IB_DEVICE_RC_RNR_NAK_GEN`: RNR NAKs when no receive is posted.
pub(crate) const CAP_RC_RNR_NAK_GEN: u64 =
    bindings::ib_device_cap_flags_IB_DEVICE_RC_RNR_NAK_GEN as u64;
/// `IB_DEVICE_MEM_MGT_EXTENSIONS`: fast registration and local invalidate.
pub(crate) const CAP_MEM_MGT_EXTENSIONS: u64 =
    bindings::ib_device_cap_flags_IB_DEVICE_MEM_MGT_EXTENSIONS as u64;
/// `IB_DEVICE_XRC`: XRC domains, SRQs and QPs.
pub(crate) const CAP_XRC: u64 = bindings::ib_device_cap_flags_IB_DEVICE_XRC as u64;
/// `IB_DEVICE_MEM_WINDOW`: memory windows.
pub(crate) const CAP_MEM_WINDOW: u64 = bindings::ib_device_cap_flags_IB_DEVICE_MEM_WINDOW as u64;
/// `IB_DEVICE_FLUSH_GLOBAL`: FLUSH to global visibility.
pub(crate) const CAP_FLUSH_GLOBAL: u64 =
    bindings::ib_device_cap_flags_IB_DEVICE_FLUSH_GLOBAL as u64;
/// `IB_DEVICE_SRQ_RESIZE`: `modify_srq` with `IB_SRQ_MAX_WR`.
pub(crate) const CAP_SRQ_RESIZE: u64 = bindings::ib_device_cap_flags_IB_DEVICE_SRQ_RESIZE as u64;
/// `IB_DEVICE_MEM_WINDOW_TYPE_2B`: type 2B windows (bound to one QP).
pub(crate) const CAP_MEM_WINDOW_TYPE_2B: u64 =
    bindings::ib_device_cap_flags_IB_DEVICE_MEM_WINDOW_TYPE_2B as u64;
/// The size of a management datagram.
pub(crate) const MGMT_MAD_SIZE: u32 = bindings::IB_MGMT_MAD_SIZE;

fn clamp_int(v: u32) -> i32 {
    i32::try_from(v).unwrap_or(i32::MAX)
}

impl DeviceAttr {
    pub(super) fn write_to(&self, out: &mut bindings::ib_device_attr) {
        *out = bindings::ib_device_attr::default();
        out.fw_ver = self.fw_ver;
        out.sys_image_guid = u64::from_ne_bytes(self.sys_image_guid);
        out.max_mr_size = self.max_mr_size;
        out.page_size_cap = self.page_size_cap;
        out.vendor_id = self.vendor_id;
        out.vendor_part_id = self.vendor_part_id;
        out.hw_ver = self.hw_ver;
        out.max_qp = clamp_int(self.max_qp);
        out.max_qp_wr = clamp_int(self.max_qp_wr);
        out.max_send_sge = clamp_int(self.max_send_sge);
        out.max_recv_sge = clamp_int(self.max_recv_sge);
        out.max_sge_rd = clamp_int(self.max_sge_rd);
        out.max_cq = clamp_int(self.max_cq);
        out.max_cqe = clamp_int(self.max_cqe);
        out.max_mr = clamp_int(self.max_mr);
        out.max_pd = clamp_int(self.max_pd);
        out.max_qp_rd_atom = clamp_int(self.max_qp_rd_atom);
        out.max_qp_init_rd_atom = clamp_int(self.max_qp_init_rd_atom);
        out.max_res_rd_atom = clamp_int(self.max_res_rd_atom);
        out.max_mw = clamp_int(self.max_mw);
        out.max_ah = clamp_int(self.max_ah);
        out.max_srq = clamp_int(self.max_srq);
        out.max_srq_wr = clamp_int(self.max_srq_wr);
        out.max_srq_sge = clamp_int(self.max_srq_sge);
        out.max_fast_reg_page_list_len = self.max_fast_reg_page_list_len;
        out.max_mcast_grp = clamp_int(self.max_mcast_grp);
        out.max_mcast_qp_attach = clamp_int(self.max_mcast_qp_attach);
        out.max_total_mcast_qp_attach = clamp_int(self.max_total_mcast_qp_attach);
        out.max_pkeys = self.max_pkeys;
        out.local_ca_ack_delay = self.local_ca_ack_delay;
        out.device_cap_flags = self.device_cap_flags;
        out.atomic_cap = if self.atomic_hca {
            bindings::ib_atomic_cap_IB_ATOMIC_HCA
        } else {
            bindings::ib_atomic_cap_IB_ATOMIC_NONE
        };
        out.masked_atomic_cap = bindings::ib_atomic_cap_IB_ATOMIC_NONE;
        if self.allow_user_unregister {
            out.kernel_cap_flags |= u64::from(bindings::ib_kernel_cap_flags_IBK_ALLOW_USER_UNREG);
        }
        if self.odp.general != 0 {
            out.kernel_cap_flags |= u64::from(bindings::ib_kernel_cap_flags_IBK_ON_DEMAND_PAGING);
        }
        out.odp_caps.general_caps = self.odp.general;
        out.odp_caps.per_transport_caps.rc_odp_caps = self.odp.rc;
        out.odp_caps.per_transport_caps.uc_odp_caps = self.odp.uc;
        out.odp_caps.per_transport_caps.ud_odp_caps = self.odp.ud;
        out.odp_caps.per_transport_caps.xrc_odp_caps = self.odp.xrc;
        out.max_wq_type_rq = self.max_wq_type_rq;
        if self.max_rwq_indirection_tables != 0 {
            out.rss_caps.supported_qpts = 1 << bindings::ib_qp_type_IB_QPT_RAW_PACKET;
            out.rss_caps.max_rwq_indirection_tables = self.max_rwq_indirection_tables;
            out.rss_caps.max_rwq_indirection_table_size = self.max_rwq_indirection_table_size;
        }
    }
}

impl PortAttr {
    pub(super) fn write_to(&self, out: &mut bindings::ib_port_attr) {
        *out = bindings::ib_port_attr::default();
        out.state = match self.state {
            PortState::Down => bindings::ib_port_state_IB_PORT_DOWN,
            PortState::Active => bindings::ib_port_state_IB_PORT_ACTIVE,
        };
        out.phys_state = match self.phys_state {
            PhysState::Disabled => bindings::ib_port_phys_state_IB_PORT_PHYS_STATE_DISABLED,
            PhysState::LinkUp => bindings::ib_port_phys_state_IB_PORT_PHYS_STATE_LINK_UP,
        } as u8;
        out.max_mtu = self.max_mtu;
        out.active_mtu = self.active_mtu;
        out.phys_mtu = self.phys_mtu;
        out.gid_tbl_len = clamp_int(self.gid_tbl_len);
        out.pkey_tbl_len = self.pkey_tbl_len;
        out.port_cap_flags = self.port_cap_flags;
        out.max_msg_sz = self.max_msg_sz;
        out.max_vl_num = self.max_vl_num;
        out.active_speed = self.active_speed;
        out.active_width = self.active_width;
    }
}

impl PortImmutable {
    pub(super) fn write_to(&self, out: &mut bindings::ib_port_immutable) {
        out.pkey_tbl_len = clamp_int(self.pkey_tbl_len);
        out.gid_tbl_len = clamp_int(self.gid_tbl_len);
        out.core_cap_flags = if self.roce_v2 {
            bindings::RDMA_CORE_PORT_IBA_ROCE_UDP_ENCAP
        } else {
            0
        };
        out.max_mad_size = self.max_mad_size;
    }
}
