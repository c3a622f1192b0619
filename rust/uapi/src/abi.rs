// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The user/kernel ABI items of roxe (see `lib.rs`).

use core::ffi::CStr;

/// The uverbs ABI version of roxe devices.
///
/// The kernel module sets `ib_device_ops.uverbs_abi_ver` to this value. The
/// kernel reports it in `/sys/class/infiniband_verbs/uverbsN/abi_version` and
/// in the netlink attribute `RDMA_NLDEV_ATTR_CHARDEV_ABI`, and libibverbs
/// compares it against the provider's `match_min_abi_version` and
/// `match_max_abi_version`. Bump it on every incompatible change to the
/// structures in this crate.
///
/// The value starts above the range that rdma-core's `librxe` accepts (1 and
/// 2 on 64-bit hosts). librxe claims any device whose name starts with `rxe`,
/// and libibverbs tries providers in no fixed order, so a roxe device named
/// `rxe...` would otherwise be bound to librxe. With this value librxe's
/// version check refuses such a device and roxe's provider gets it.
pub const UVERBS_ABI_VERSION: u32 = 5;

/// Name of the read-only sysfs attribute that marks an `ib_device` as roxe.
///
/// The kernel module creates it in `/sys/class/infiniband/<dev>/`. Reading it
/// yields [`UVERBS_ABI_VERSION`] in decimal followed by one newline (`"5\n"`),
/// with no other text. roxe devices register with `RDMA_DRIVER_UNKNOWN`,
/// because the kernel's `enum rdma_driver_id` has no roxe entry, so libibverbs
/// cannot match them by driver id. The provider claims a device only if this
/// attribute exists and holds a version the provider supports.
pub const ABI_VERSION_ATTR: &CStr = c"roxe_abi_version";

// ---------------------------------------------------------------------------
// Shared rings.
//
// A ring is one mapping: a `RingHeader` followed by `num_slots` fixed-size
// slots, `num_slots` a power of two. The producer and consumer indices are
// free-running `u32` counters (never masked when stored); slot `i` lives at
// `RING_HEADER_SIZE + (i & (num_slots - 1)) * slot_size`. The ring is empty
// when the indices are equal and full when they differ by `num_slots`.
//
// Each side writes only its own index, with release ordering after it has
// written (producer) or read (consumer) the slots, and reads the other
// index with acquire ordering. The side in the kernel never trusts an
// index written by user space: it keeps its own copy of its own index and
// checks that the distance to the other index is at most `num_slots`.
// ---------------------------------------------------------------------------

/// One ring index, alone on its cache line.
#[repr(C, align(64))]
#[derive(Debug, Default)]
pub struct RingIndex {
    /// The free-running counter.
    pub value: u32,
    /// Keeps the other index off this cache line.
    pub _pad: [u32; 15],
}

/// The header at the start of every mapped ring.
#[repr(C)]
#[derive(Debug, Default)]
pub struct RingHeader {
    /// Written by the producer: slots below this index are filled.
    pub producer: RingIndex,
    /// Written by the consumer: slots below this index are free again.
    pub consumer: RingIndex,
}

/// Bytes before the first slot of a ring.
pub const RING_HEADER_SIZE: usize = core::mem::size_of::<RingHeader>();

/// A work completion in a CQ ring, written by the kernel. The field values
/// are those of `struct ibv_wc` (`enum ibv_wc_status`, `enum ibv_wc_opcode`,
/// `IBV_WC_*` flags).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Cqe {
    /// The work request id the consumer posted.
    pub wr_id: u64,
    /// `enum ibv_wc_status`.
    pub status: u32,
    /// `enum ibv_wc_opcode`.
    pub opcode: u32,
    /// Driver detail for error completions.
    pub vendor_err: u32,
    /// Bytes transferred.
    pub byte_len: u32,
    /// Immediate data (network byte order) or the invalidated rkey.
    pub imm_data: u32,
    /// The local QP number.
    pub qp_num: u32,
    /// The remote QP number (UD).
    pub src_qp: u32,
    /// `IBV_WC_*` flags.
    pub wc_flags: u32,
    /// P_Key index (UD/GSI).
    pub pkey_index: u16,
    /// Source LID (always 0 on RoCE).
    pub slid: u16,
    /// Service level.
    pub sl: u8,
    /// DLID path bits (always 0 on RoCE).
    pub dlid_path_bits: u8,
    /// Port number.
    pub port_num: u8,
    /// For kernel consumers only: the `enum rdma_network_type` of a UD
    /// receive (0 when unknown). User space ignores it.
    pub network_hdr_type: u8,
    /// Must be zero; pads the CQE to 64 bytes.
    pub _reserved: [u32; 4],
}

// ---------------------------------------------------------------------------
// Verbs command responses (the driver-specific `udata` parts). Requests
// that have no driver-specific part send none; the kernel rejects any
// driver input it does not expect.
// ---------------------------------------------------------------------------

/// Driver part of the `ibv_cmd_create_cq` and `ibv_cmd_resize_cq` responses:
/// where to map the CQ ring (`slot_size` is `size_of::<Cqe>()`).
pub type CreateCqResp = RingInfo;

/// Driver part of the `ibv_cmd_create_ah` response.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CreateAhResp {
    /// The kernel's handle for the AH, which UD work requests name.
    pub ah_num: u32,
    /// Must be zero.
    pub _reserved: u32,
}

/// Where one ring of a QP or SRQ is mapped, and its shape.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RingInfo {
    /// Offset to pass to `mmap` on the verbs command fd.
    pub mmap_offset: u64,
    /// Length of the mapping in bytes.
    pub mmap_size: u64,
    /// Slots in the ring, a power of two.
    pub num_slots: u32,
    /// Bytes per slot (a multiple of 64).
    pub slot_size: u32,
}

/// Driver part of the `ibv_cmd_create_qp` response. A ring whose
/// `num_slots` is 0 does not exist (the RQ of a QP on an SRQ).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CreateQpResp {
    /// The send queue: user space produces [`SendWqe`]s, the kernel consumes.
    pub sq: RingInfo,
    /// The receive queue: user space produces [`RecvWqe`]s, the kernel consumes.
    pub rq: RingInfo,
}

/// Driver part of the `ibv_cmd_create_srq` response.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CreateSrqResp {
    /// The shared receive queue ring.
    pub rq: RingInfo,
    /// The SRQ number.
    pub srq_num: u32,
    /// Must be zero.
    pub _reserved: u32,
}

/// Driver input of `ibv_cmd_modify_srq`.
///
/// A resize (`IBV_SRQ_MAX_WR`) moves the outstanding receive WQEs into a new
/// ring. The kernel writes that ring's [`RingInfo`] to `ring_info_addr`, a
/// user address, because the modify command has no response buffer. The new
/// ring starts with consumer index 0 and, in its header, a producer index
/// equal to the number of WQEs it took over; user space continues from there
/// and unmaps the old ring.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ModifySrqCmd {
    /// Where the kernel writes the new [`RingInfo`]; required for a resize.
    pub ring_info_addr: u64,
}

/// Driver part of the `ibv_cmd_create_wq` response: where to map the
/// work queue's receive ring (user space produces [`RecvWqe`]s into it, as
/// into an SRQ's). The WQ number is in the core's part of the response.
pub type CreateWqResp = RingInfo;

/// Longest RSS hash key (`rx_hash_key_len`): the 40 bytes of a Toeplitz
/// key that hashes IPv6 addresses and both ports.
pub const RSS_KEY_MAX: usize = 40;

/// Driver input of `ibv_cmd_create_qp_ex2` for an RSS QP: a raw packet QP
/// created over a receive WQ indirection table (`IBV_QP_INIT_ATTR_IND_TABLE`
/// with `IBV_QP_INIT_ATTR_RX_HASH`). The kernel hashes the fields of each
/// frame the QP receives and puts the frame in the WQ the hash selects.
/// Any other QP sends no driver input.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CreateRssQpCmd {
    /// `enum ibv_rx_hash_fields`: which header fields the hash covers.
    pub hash_fields: u64,
    /// `enum ibv_rx_hash_function_flags`: only `IBV_RX_HASH_FUNC_TOEPLITZ`.
    pub hash_function: u8,
    /// Bytes of `key` in use, 1 to [`RSS_KEY_MAX`].
    pub key_len: u8,
    /// Must be zero.
    pub _reserved: [u8; 6],
    /// The Toeplitz key.
    pub key: [u8; RSS_KEY_MAX],
}

impl Default for CreateRssQpCmd {
    fn default() -> Self {
        Self {
            hash_fields: 0,
            hash_function: 0,
            key_len: 0,
            _reserved: [0; 6],
            key: [0; RSS_KEY_MAX],
        }
    }
}

/// A scatter/gather element (`struct ibv_sge`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sge {
    /// Virtual address in the MR.
    pub addr: u64,
    /// Length in bytes.
    pub length: u32,
    /// The MR's lkey.
    pub lkey: u32,
}

/// In a bind WQE's `swap`: the bind was made with `ibv_bind_mw`, which
/// only type 1 windows accept; a bind work request (`IBV_WR_BIND_MW`)
/// leaves it clear and only binds type 2 windows.
pub const BIND_TYPE1: u64 = 1 << 32;

/// The fixed part of a send work request in an SQ slot. `num_sge` [`Sge`]s,
/// or `inline_len` bytes of inline data (with `IBV_SEND_INLINE`), follow it
/// in the same slot. Field values are those of `struct ibv_send_wr`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SendWqe {
    /// The work request id.
    pub wr_id: u64,
    /// `enum ibv_wr_opcode`.
    pub opcode: u32,
    /// `IBV_SEND_*`.
    pub send_flags: u32,
    /// Immediate data (network byte order), the rkey to invalidate, or for
    /// a memory-window bind the lkey of the MR underneath.
    pub imm_data: u32,
    /// Number of [`Sge`]s that follow.
    pub num_sge: u32,
    /// Bytes of inline data that follow (with `IBV_SEND_INLINE`).
    pub inline_len: u32,
    /// Remote key (RDMA, atomics) or the key for MW binds and local
    /// invalidates.
    pub rkey: u32,
    /// Remote address (RDMA, atomics), or the first byte a bind exposes.
    pub remote_addr: u64,
    /// Compare or add operand (atomics), or the length a bind exposes. An
    /// Atomic Write with neither SGEs nor inline data stores these 8 bytes
    /// (as they lie in memory); otherwise its message is its 8 bytes. For
    /// a Flush: the length of the range.
    pub compare_add: u64,
    /// Swap operand (atomic compare-and-swap). For a bind: the window's
    /// `IBV_ACCESS_*` rights in the low 32 bits, and [`BIND_TYPE1`]. For a
    /// Flush: the placement type (`IBV_FLUSH_GLOBAL` 1, `_PERSISTENT` 2) in
    /// bits 0-7 and the selectivity level (`IBV_FLUSH_RANGE` 0, `_MR` 1) in
    /// bits 8-15.
    pub swap: u64,
    /// UD: the AH number from [`CreateAhResp`].
    pub ah_num: u32,
    /// UD: the destination QP number; XRC: the remote XRC SRQ number.
    pub remote_qpn: u32,
    /// UD: the destination Q_Key.
    pub remote_qkey: u32,
    /// Must be zero.
    pub _reserved: u32,
}

/// The fixed part of a receive work request in an RQ or SRQ slot; `num_sge`
/// [`Sge`]s follow it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecvWqe {
    /// The work request id.
    pub wr_id: u64,
    /// Number of [`Sge`]s that follow.
    pub num_sge: u32,
    /// Must be zero.
    pub _reserved: u32,
}

// ---------------------------------------------------------------------------
// Flag values carried in the rings. They are libibverbs' (`IBV_*`) values,
// which user space writes and reads; the kernel module uses these same
// definitions. The memory access rights (`IBV_ACCESS_*`, equal to the
// kernel's `IB_ACCESS_*`) are in `roxe_proto::access`, with their checks.
// ---------------------------------------------------------------------------

/// `enum ibv_send_flags`: the `send_flags` of a [`SendWqe`]. The kernel's
/// `enum ib_send_flags` has the same values, so the module uses these for
/// kernel consumers' work requests too.
pub mod send_flags {
    /// `IBV_SEND_FENCE`: wait for earlier reads and atomics to complete.
    pub const FENCE: u32 = 1 << 0;
    /// `IBV_SEND_SIGNALED`: a successful completion makes a CQE.
    pub const SIGNALED: u32 = 1 << 1;
    /// `IBV_SEND_SOLICITED`: the last packet asks for a solicited event.
    pub const SOLICITED: u32 = 1 << 2;
    /// `IBV_SEND_INLINE`: the data follows the WQE in its slot.
    pub const INLINE: u32 = 1 << 3;
    /// `IBV_SEND_IP_CSUM`: checksum offload (not on roxe).
    pub const IP_CSUM: u32 = 1 << 4;
}

/// `enum ibv_wc_flags`: the `wc_flags` of a [`Cqe`]. The kernel's
/// `enum ib_wc_flags` differs from bit 2 on (`IB_WC_WITH_INVALIDATE` is
/// 1 << 2 there), so the module translates [`wc_flags::WITH_INV`] for
/// kernel consumers.
pub mod wc_flags {
    /// `IBV_WC_GRH`: the receive buffer starts with a 40-byte GRH.
    pub const GRH: u32 = 1 << 0;
    /// `IBV_WC_WITH_IMM`: `imm_data` holds immediate data.
    pub const WITH_IMM: u32 = 1 << 1;
    /// `IBV_WC_IP_CSUM_OK`: the IP checksum was checked (not on roxe).
    pub const IP_CSUM_OK: u32 = 1 << 2;
    /// `IBV_WC_WITH_INV`: `imm_data` holds the invalidated rkey.
    pub const WITH_INV: u32 = 1 << 3;
}

/// A Flush's placement type and selectivity level, in the `swap` of its
/// [`SendWqe`] (`enum ibv_placement_type`, `enum ibv_selectivity_level`;
/// the kernel's `IB_FLUSH_*` have the same values).
pub mod flush {
    /// `IBV_FLUSH_GLOBAL`: make the data globally visible.
    pub const GLOBAL: u8 = 1 << 0;
    /// `IBV_FLUSH_PERSISTENT`: make the data persistent.
    pub const PERSISTENT: u8 = 1 << 1;
    /// `IBV_FLUSH_RANGE`: flush the range the WQE names.
    pub const RANGE: u8 = 0;
    /// `IBV_FLUSH_MR`: flush the whole MR.
    pub const MR: u8 = 1;
}

/// Compile-time layout checks: the module and the provider are built by
/// different compilers for different targets, so the layout is pinned here.
const _: () = {
    use core::mem::{align_of, offset_of, size_of};
    assert!(size_of::<RingIndex>() == 64);
    assert!(size_of::<RingHeader>() == 128);
    assert!(offset_of!(RingHeader, consumer) == 64);
    assert!(size_of::<Cqe>() == 64);
    assert!(align_of::<Cqe>() == 8);
    assert!(offset_of!(Cqe, status) == 8);
    assert!(offset_of!(Cqe, byte_len) == 20);
    assert!(offset_of!(Cqe, wc_flags) == 36);
    assert!(offset_of!(Cqe, pkey_index) == 40);
    assert!(offset_of!(Cqe, sl) == 44);
    assert!(offset_of!(Cqe, _reserved) == 48);
    assert!(size_of::<CreateCqResp>() == 24);
    assert!(size_of::<CreateAhResp>() == 8);
    assert!(size_of::<RingInfo>() == 24);
    assert!(size_of::<CreateQpResp>() == 48);
    assert!(size_of::<CreateSrqResp>() == 32);
    assert!(size_of::<ModifySrqCmd>() == 8);
    assert!(size_of::<CreateRssQpCmd>() == 56);
    assert!(offset_of!(CreateRssQpCmd, key) == 16);
    assert!(size_of::<Sge>() == 16);
    assert!(size_of::<SendWqe>() == 72);
    assert!(offset_of!(SendWqe, remote_addr) == 32);
    assert!(offset_of!(SendWqe, ah_num) == 56);
    assert!(size_of::<RecvWqe>() == 16);
};
