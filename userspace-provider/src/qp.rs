// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Queue pairs and shared receive queues: which creation attributes roxe
//! accepts, which QP states allow posting, and how work requests become
//! the WQEs of `roxe_uapi` in the rings of [`crate::wq`].
//!
//! A send WQE is a [`SendWqe`] followed by `num_sge` [`Sge`]s, or by
//! `inline_len` bytes of inline data with `IBV_SEND_INLINE`; a receive WQE
//! is a [`RecvWqe`] followed by its [`Sge`]s. Every length is checked
//! against what the kernel granted, and against the slot the WQE goes into,
//! before anything is written.
//!
//! [`SendQueue`] and [`RecvQueue`] are the parts of a QP (or SRQ) that its
//! send lock and its receive lock guard; the `ffi` module owns the locks,
//! walks the caller's work-request lists and rings the doorbell. A
//! `SendQueue` can also collect a batch of the `ibv_wr_*` interface
//! (`SendQueue::wr_start` to `SendQueue::wr_complete`), which it writes
//! into the same ring and publishes all at once, or not at all.
//!
//! Memory-window binds travel as send WQEs too: [`bind_fields`] checks one
//! and gives the fields `roxe_uapi` defines for it.
//!
//! XRC: an XRC send QP is an RC send queue whose WQEs each carry the number
//! of the remote XRC SRQ that receives them (in `SendWqe::remote_qpn`,
//! [`xrc_wqe`]); an XRC receive QP has no rings at all ([`rings`]). The
//! checks of `ibv_create_srq_ex` and `ibv_open_qp` are here as well
//! ([`check_srq_init_attr`], [`check_open_attr`]).
//!
//! Raw packet: a raw packet QP has the rings of a UD QP but no SRQ
//! ([`check_srq_use`]). Each send work request is a plain `IBV_WR_SEND`
//! whose data is a whole Ethernet frame, from the destination MAC on, so
//! its WQE names no destination ([`raw_wqe`]); receives are ordinary
//! receive WQEs. A raw packet QP created over a receive WQ indirection
//! table ([`RSS_INIT_ATTR_MASK`]) is an RSS QP instead: no rings, no CQs
//! ([`KernelCqs::NONE`]), checked further by [`crate::rwq`].

use core::ffi::c_int;
use core::mem::{offset_of, size_of};

use roxe_uapi::{BIND_TYPE1, RecvWqe, RingInfo, SendWqe, Sge};

use crate::abi::ibv;
use crate::errno::Errno;
use crate::wq::{Producer, WqMemory};

/// Bytes of the fixed part of a send WQE.
pub const SEND_WQE_HEADER: usize = size_of::<SendWqe>();
/// Bytes of the fixed part of a receive WQE.
pub const RECV_WQE_HEADER: usize = size_of::<RecvWqe>();
/// Bytes of one scatter/gather element in a WQE.
pub const SGE_SIZE: usize = size_of::<Sge>();

/// The `ibv_qp_init_attr_ex.comp_mask` bits that make an RSS QP
/// (`IBV_QP_INIT_ATTR_IND_TABLE` and `IBV_QP_INIT_ATTR_RX_HASH`, always
/// together; see [`crate::rwq`]).
pub const RSS_INIT_ATTR_MASK: u32 = ibv::QP_INIT_ATTR_IND_TABLE | ibv::QP_INIT_ATTR_RX_HASH;

/// The `ibv_qp_init_attr_ex.comp_mask` bits roxe accepts: the PD (which a
/// QP other than an XRC receive QP must have), the XRC domain (which an XRC
/// receive QP must have), creation flags as long as none is set, the send
/// ops of the `ibv_wr_*` interface, and the indirection table and hash of
/// an RSS QP.
pub const SUPPORTED_INIT_ATTR_MASK: u32 = ibv::QP_INIT_ATTR_PD
    | ibv::QP_INIT_ATTR_XRCD
    | ibv::QP_INIT_ATTR_CREATE_FLAGS
    | ibv::QP_INIT_ATTR_SEND_OPS_FLAGS
    | RSS_INIT_ATTR_MASK;

/// The `ibv_wr_*` builders an RC QP offers: every operation but TSO (an
/// Ethernet-only feature).
pub const RC_SEND_OPS: u64 = ibv::QP_EX_WITH_RDMA_WRITE
    | ibv::QP_EX_WITH_ATOMIC_WRITE
    | ibv::QP_EX_WITH_RDMA_WRITE_WITH_IMM
    | ibv::QP_EX_WITH_SEND
    | ibv::QP_EX_WITH_SEND_WITH_IMM
    | ibv::QP_EX_WITH_RDMA_READ
    | ibv::QP_EX_WITH_ATOMIC_CMP_AND_SWP
    | ibv::QP_EX_WITH_ATOMIC_FETCH_AND_ADD
    | ibv::QP_EX_WITH_LOCAL_INV
    | ibv::QP_EX_WITH_BIND_MW
    | ibv::QP_EX_WITH_SEND_WITH_INV;

/// The `ibv_wr_*` builders a UC QP offers: no RDMA Read and no atomics,
/// which UC does not have, and, as in rdma-core's rxe provider, no local
/// invalidate.
pub const UC_SEND_OPS: u64 = ibv::QP_EX_WITH_RDMA_WRITE
    | ibv::QP_EX_WITH_RDMA_WRITE_WITH_IMM
    | ibv::QP_EX_WITH_SEND
    | ibv::QP_EX_WITH_SEND_WITH_IMM
    | ibv::QP_EX_WITH_BIND_MW
    | ibv::QP_EX_WITH_SEND_WITH_INV;

/// The `ibv_wr_*` builders a UD QP offers: sends.
pub const UD_SEND_OPS: u64 = ibv::QP_EX_WITH_SEND | ibv::QP_EX_WITH_SEND_WITH_IMM;

/// The `ibv_wr_*` builders an XRC send QP offers: those of RC but atomic
/// write, which roxe's XRC transport does not carry.
pub const XRC_SEND_OPS: u64 = RC_SEND_OPS & !ibv::QP_EX_WITH_ATOMIC_WRITE;

/// The `ibv_wr_*` builders a raw packet QP offers: plain sends, each a
/// whole frame. No immediate data (a frame has nowhere to carry it) and
/// no TSO.
pub const RAW_SEND_OPS: u64 = ibv::QP_EX_WITH_SEND;

/// Checks the fields of an `ibv_qp_init_attr_ex` that roxe interprets.
///
/// Fails with `EOPNOTSUPP` for QP types other than RC, UC, UD, raw packet,
/// XRC send and XRC receive, for `comp_mask` bits roxe does not support
/// (TSO, ...), for any creation flag (among them the raw packet
/// offloads), for RSS ([`RSS_INIT_ATTR_MASK`]) on a QP other than a raw
/// packet QP, with `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS` for a
/// `send_ops_flags` bit that is not in [`RC_SEND_OPS`], [`UC_SEND_OPS`],
/// [`UD_SEND_OPS`], [`RAW_SEND_OPS`] or [`XRC_SEND_OPS`] for the QP's
/// type, and for an XRC receive QP, which has no send queue, with the bit
/// at all. Fails with `EINVAL` for one RSS bit without the other, for an
/// RSS QP with `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS` (it sends nothing), if an
/// XRC receive QP names no XRC domain, or another QP no PD or an XRC
/// domain (which only XRC receive QPs belong to). A raw packet QP's SRQ is
/// checked by [`check_srq_use`], the rest of an RSS QP by
/// [`crate::rwq::check_rss_qp`] and [`crate::rwq::check_rx_hash`].
pub fn check_init_attr(
    qp_type: u32,
    comp_mask: u32,
    create_flags: u32,
    send_ops_flags: u64,
) -> Result<(), Errno> {
    if comp_mask & !SUPPORTED_INIT_ATTR_MASK != 0 {
        return Err(Errno::EOPNOTSUPP);
    }
    if comp_mask & ibv::QP_INIT_ATTR_CREATE_FLAGS != 0 && create_flags != 0 {
        return Err(Errno::EOPNOTSUPP);
    }
    let send_ops = match qp_type {
        ibv::QPT_RC => Some(RC_SEND_OPS),
        ibv::QPT_UC => Some(UC_SEND_OPS),
        ibv::QPT_UD => Some(UD_SEND_OPS),
        ibv::QPT_RAW_PACKET => Some(RAW_SEND_OPS),
        ibv::QPT_XRC_SEND => Some(XRC_SEND_OPS),
        ibv::QPT_XRC_RECV => None,
        _ => return Err(Errno::EOPNOTSUPP),
    };
    let send_ops_bit = comp_mask & ibv::QP_INIT_ATTR_SEND_OPS_FLAGS != 0;
    match comp_mask & RSS_INIT_ATTR_MASK {
        0 => {}
        RSS_INIT_ATTR_MASK if qp_type != ibv::QPT_RAW_PACKET => return Err(Errno::EOPNOTSUPP),
        RSS_INIT_ATTR_MASK if send_ops_bit => return Err(Errno::EINVAL),
        RSS_INIT_ATTR_MASK => {}
        _ => return Err(Errno::EINVAL),
    }
    if send_ops_bit && send_ops.is_none_or(|ops| send_ops_flags & !ops != 0) {
        return Err(Errno::EOPNOTSUPP);
    }
    // An XRC receive QP belongs to its domain, not to a PD (libibverbs
    // sends no PD for it); every other QP belongs to a PD.
    let (needs, refuses) = match qp_type {
        ibv::QPT_XRC_RECV => (ibv::QP_INIT_ATTR_XRCD, 0),
        _ => (ibv::QP_INIT_ATTR_PD, ibv::QP_INIT_ATTR_XRCD),
    };
    if comp_mask & needs == 0 || comp_mask & refuses != 0 {
        return Err(Errno::EINVAL);
    }
    Ok(())
}

/// Checks whether a QP of `qp_type` may have an SRQ (`has_srq`).
///
/// A raw packet QP receives its frames into its own receive ring only:
/// with an SRQ it fails with `EINVAL`. Whether other QP types may have one
/// is the kernel's to decide.
pub fn check_srq_use(qp_type: u32, has_srq: bool) -> Result<(), Errno> {
    if qp_type == ibv::QPT_RAW_PACKET && has_srq {
        return Err(Errno::EINVAL);
    }
    Ok(())
}

/// Which rings a QP has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rings {
    /// A send ring.
    pub send: bool,
    /// A receive ring of its own.
    pub recv: bool,
}

/// The rings a new QP of `qp_type` gets from the kernel.
///
/// An XRC receive QP has none: the kernel creates it without driver data
/// (so there is no driver response to read), and what it receives goes
/// into the XRC SRQs of its domain. Every other QP has a send ring, and a
/// receive ring unless it has an SRQ or is an XRC send QP, which receives
/// nothing. A raw packet QP has both, like a UD QP ([`check_srq_use`]
/// refuses an SRQ for it).
pub fn rings(qp_type: u32, has_srq: bool) -> Rings {
    match qp_type {
        ibv::QPT_XRC_RECV => Rings {
            send: false,
            recv: false,
        },
        ibv::QPT_XRC_SEND => Rings {
            send: true,
            recv: false,
        },
        _ => Rings {
            send: true,
            recv: !has_srq,
        },
    }
}

/// Checks that the kernel's create response describes a ring exactly when
/// the QP should have one (`wanted`, [`Rings`]): a ring with no slots is
/// no ring. Fails with `EPROTO` if not.
pub fn check_ring_presence(ring: &RingInfo, wanted: bool) -> Result<(), Errno> {
    if (ring.num_slots != 0) != wanted {
        return Err(Errno::EPROTO);
    }
    Ok(())
}

/// Which of the CQs libibverbs records for a QP (`ibv_qp.send_cq` and
/// `ibv_qp.recv_cq`) the kernel took.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelCqs {
    /// The send CQ.
    pub send: bool,
    /// The receive CQ.
    pub recv: bool,
}

impl KernelCqs {
    /// Neither: an XRC receive QP's, and an RSS QP's (libibverbs sends no
    /// CQ for a QP with an indirection table and no send queue; its
    /// receives complete on the CQs of its WQs).
    pub const NONE: Self = Self {
        send: false,
        recv: false,
    };
}

/// The CQs the kernel took for a QP of `qp_type`, and so the only ones
/// that are sure to be live roxe CQs while the QP is.
///
/// libibverbs records whatever CQs the caller passed, but sends only some
/// of them (`ibv_icmd_create_qp`): none for an XRC receive QP, whose
/// receives complete on the CQs of the XRC SRQs, and no receive CQ for an
/// XRC send QP, which receives nothing. The caller may have destroyed the
/// CQs the kernel never saw, or passed another device's. Every other QP
/// (raw packet QPs among them) has both.
pub fn kernel_cqs(qp_type: u32) -> KernelCqs {
    match qp_type {
        ibv::QPT_XRC_RECV => KernelCqs::NONE,
        ibv::QPT_XRC_SEND => KernelCqs {
            send: true,
            recv: false,
        },
        _ => KernelCqs {
            send: true,
            recv: true,
        },
    }
}

/// The `ibv_srq_init_attr_ex.comp_mask` bits roxe accepts.
pub const SUPPORTED_SRQ_INIT_ATTR_MASK: u32 = ibv::SRQ_INIT_ATTR_TYPE
    | ibv::SRQ_INIT_ATTR_PD
    | ibv::SRQ_INIT_ATTR_XRCD
    | ibv::SRQ_INIT_ATTR_CQ;

/// Checks the fields of an `ibv_srq_init_attr_ex` that roxe interprets,
/// and returns the SRQ's type (`IBV_SRQT_BASIC` without
/// `IBV_SRQ_INIT_ATTR_TYPE`).
///
/// Basic and XRC SRQs are supported. Fails with `EOPNOTSUPP` for a tag
/// matching SRQ and for `comp_mask` bits roxe does not support (tag
/// matching, unknown bits); with `EINVAL` for an unknown type, without a
/// PD, and for an XRC SRQ without an XRC domain or a CQ. The XRC domain
/// and the CQ of a basic SRQ are not looked at, as libibverbs does not
/// send them.
pub fn check_srq_init_attr(comp_mask: u32, srq_type: u32) -> Result<u32, Errno> {
    if comp_mask & !SUPPORTED_SRQ_INIT_ATTR_MASK != 0 {
        return Err(Errno::EOPNOTSUPP);
    }
    let srq_type = match comp_mask & ibv::SRQ_INIT_ATTR_TYPE {
        0 => ibv::SRQT_BASIC,
        _ => srq_type,
    };
    let needs = match srq_type {
        ibv::SRQT_BASIC => ibv::SRQ_INIT_ATTR_PD,
        ibv::SRQT_XRC => ibv::SRQ_INIT_ATTR_PD | ibv::SRQ_INIT_ATTR_XRCD | ibv::SRQ_INIT_ATTR_CQ,
        ibv::SRQT_TM => return Err(Errno::EOPNOTSUPP),
        _ => return Err(Errno::EINVAL),
    };
    if comp_mask & needs != needs {
        return Err(Errno::EINVAL);
    }
    Ok(srq_type)
}

/// The `ibv_qp_open_attr.comp_mask` bits `ibv_open_qp` needs.
pub const REQUIRED_OPEN_ATTR_MASK: u32 =
    ibv::QP_OPEN_ATTR_NUM | ibv::QP_OPEN_ATTR_XRCD | ibv::QP_OPEN_ATTR_TYPE;

/// Checks an `ibv_qp_open_attr`: the QP number, XRC domain and type must
/// be given (`EINVAL`), the type must be XRC receive, the only shareable
/// QP (`EINVAL`), and no unknown `comp_mask` bit may be set
/// (`EOPNOTSUPP`).
pub fn check_open_attr(comp_mask: u32, qp_type: u32) -> Result<(), Errno> {
    if comp_mask & !(REQUIRED_OPEN_ATTR_MASK | ibv::QP_OPEN_ATTR_CONTEXT) != 0 {
        return Err(Errno::EOPNOTSUPP);
    }
    if comp_mask & REQUIRED_OPEN_ATTR_MASK != REQUIRED_OPEN_ATTR_MASK
        || qp_type != ibv::QPT_XRC_RECV
    {
        return Err(Errno::EINVAL);
    }
    Ok(())
}

/// Whether send work requests may be posted to a QP in `state`
/// (`enum ibv_qp_state`). Before RTS the kernel refuses the doorbell, so
/// the provider refuses the work requests before they reach the ring. In
/// SQE and ERR they are accepted and complete with a flush error.
pub fn can_post_send(state: u32) -> bool {
    matches!(
        state,
        ibv::QPS_RTS | ibv::QPS_SQD | ibv::QPS_SQE | ibv::QPS_ERR
    )
}

/// Whether receive work requests may be posted to a QP in `state`: in any
/// state but RESET.
pub fn can_post_recv(state: u32) -> bool {
    matches!(
        state,
        ibv::QPS_INIT | ibv::QPS_RTR | ibv::QPS_RTS | ibv::QPS_SQD | ibv::QPS_SQE | ibv::QPS_ERR
    )
}

/// The number of SGEs a work request names, if it is at most `max`.
///
/// `num_sge` comes from the caller's `int`; a negative count or one above
/// the limit fails with `EINVAL`. The `ffi` module calls this before it
/// makes a slice of the caller's SGE list.
pub fn check_num_sge(num_sge: c_int, max: u32) -> Result<usize, Errno> {
    let n = u32::try_from(num_sge).map_err(|_| Errno::EINVAL)?;
    if n > max {
        return Err(Errno::EINVAL);
    }
    usize::try_from(n).map_err(|_| Errno::EINVAL)
}

/// Which member of the `wr` union of an `ibv_send_wr` holds the
/// operation's fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WrPart {
    /// None: sends, local invalidates.
    None,
    /// `wr.rdma`: RDMA Write (with immediate), RDMA Read, atomic write.
    Rdma,
    /// `wr.atomic`: compare-and-swap and fetch-and-add.
    Atomic,
    /// `wr.ud`: every work request on a UD QP.
    Ud,
    /// `bind_mw`, the member of the last union: memory-window binds.
    Bind,
}

/// Which member of `ibv_send_wr.wr` a work request with `opcode` uses on
/// a QP of `qp_type`, as in libibverbs' `ibv_cmd_post_send`.
///
/// Memory-window binds read `bind_mw` (see [`bind_fields`]); they fail
/// with `EINVAL` on QPs other than RC, UC and XRC send, which cannot bind.
/// An XRC send QP reads the other members as RC does. A raw packet QP
/// sends frames and nothing else: `IBV_WR_SEND` reads no member, and any
/// other opcode fails with `EINVAL`. Other opcodes on the other QP types
/// (among them atomic write and flush on an XRC send QP) are passed on
/// unchecked; the kernel's doorbell completes one it does not accept with
/// an error and moves the QP to ERR.
pub fn wr_part(qp_type: u32, opcode: u32) -> Result<WrPart, Errno> {
    if qp_type == ibv::QPT_RAW_PACKET {
        return match opcode {
            ibv::WR_SEND => Ok(WrPart::None),
            _ => Err(Errno::EINVAL),
        };
    }
    if opcode == ibv::WR_BIND_MW {
        return match qp_type {
            ibv::QPT_RC | ibv::QPT_UC | ibv::QPT_XRC_SEND => Ok(WrPart::Bind),
            _ => Err(Errno::EINVAL),
        };
    }
    if qp_type == ibv::QPT_UD {
        return Ok(WrPart::Ud);
    }
    Ok(match opcode {
        ibv::WR_RDMA_WRITE | ibv::WR_RDMA_WRITE_WITH_IMM | ibv::WR_RDMA_READ => WrPart::Rdma,
        ibv::WR_ATOMIC_WRITE => WrPart::Rdma,
        ibv::WR_ATOMIC_CMP_AND_SWP | ibv::WR_ATOMIC_FETCH_AND_ADD => WrPart::Atomic,
        _ => WrPart::None,
    })
}

/// The operation's fields of a send work request, read from the member of
/// `ibv_send_wr.wr` that [`wr_part`] chose.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WrFields {
    /// No fields.
    None,
    /// `wr.rdma`.
    Rdma {
        /// Remote address.
        remote_addr: u64,
        /// Remote key.
        rkey: u32,
    },
    /// `wr.atomic`.
    Atomic {
        /// Remote address.
        remote_addr: u64,
        /// Compare (CAS) or add (FAA) operand.
        compare_add: u64,
        /// Swap operand.
        swap: u64,
        /// Remote key.
        rkey: u32,
    },
    /// `wr.ud`, with the AH already turned into roxe's AH number.
    Ud {
        /// `CreateAhResp.ah_num` of the AH.
        ah_num: u32,
        /// Destination QP number.
        remote_qpn: u32,
        /// Destination Q_Key.
        remote_qkey: u32,
    },
    /// A memory-window bind, as [`bind_fields`] checked it.
    Bind {
        /// The window's new rkey.
        rkey: u32,
        /// The lkey of the MR underneath; 0 without one.
        mr_lkey: u32,
        /// The first byte the window exposes.
        addr: u64,
        /// How many bytes it exposes.
        length: u64,
        /// The window's `IBV_ACCESS_*` rights.
        access: u32,
        /// Whether the bind came through `ibv_bind_mw`.
        type1: bool,
    },
}

/// `ibv_inc_rkey`: `rkey` with its low 8 bits (the key the consumer owns)
/// advanced by one, wrapping, and its upper 24 bits (which name the
/// window) unchanged.
pub fn inc_rkey(rkey: u32) -> u32 {
    (rkey & !0xff) | (rkey.wrapping_add(1) & 0xff)
}

/// How a memory-window bind was asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BindVia {
    /// `ibv_bind_mw`, the verb for type 1 windows.
    Verb,
    /// A bind work request (`IBV_WR_BIND_MW` in `ibv_post_send`, or
    /// `ibv_wr_bind_mw`), for type 2 windows.
    WorkRequest,
}

/// A memory-window bind as the caller described it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bind {
    /// `ibv_mw.type` (`enum ibv_mw_type`).
    pub mw_type: u32,
    /// `ibv_mw.rkey`: the window's rkey as its last `ibv_bind_mw` left it.
    pub mw_rkey: u32,
    /// The new rkey a bind work request asks for. `ibv_bind_mw` takes
    /// [`inc_rkey`] of `mw_rkey` instead and ignores this.
    pub rkey: u32,
    /// The lkey of `bind_info.mr`, or `None` if it is NULL.
    pub mr_lkey: Option<u32>,
    /// `bind_info.addr`.
    pub addr: u64,
    /// `bind_info.length`.
    pub length: u64,
    /// `bind_info.mw_access_flags`.
    pub access: u32,
}

/// Checks a memory-window bind and gives the fields of its WQE.
///
/// The kernel checks the bind again against the window, the MR and the
/// QP, and completes one it refuses with `IBV_WC_MW_BIND_ERR`; this
/// refuses, with `EINVAL`, what is wrong before the bind reaches the ring:
/// a type 2 window through `ibv_bind_mw` or a type 1 window (or an unknown
/// type) through a work request, a zero-based type 1 window, an MR-less
/// bind of a non-empty range, and a work request whose new rkey names
/// another window (its upper 24 bits differ from the window's): the kernel
/// finds the window by those bits.
pub fn bind_fields(via: BindVia, b: &Bind) -> Result<WrFields, Errno> {
    let rkey = match via {
        BindVia::Verb => {
            if b.mw_type != ibv::MW_TYPE_1 || b.access & ibv::ACCESS_ZERO_BASED != 0 {
                return Err(Errno::EINVAL);
            }
            inc_rkey(b.mw_rkey)
        }
        BindVia::WorkRequest => {
            if b.mw_type != ibv::MW_TYPE_2 || (b.rkey ^ b.mw_rkey) & !0xff != 0 {
                return Err(Errno::EINVAL);
            }
            b.rkey
        }
    };
    if b.mr_lkey.is_none() && b.length != 0 {
        return Err(Errno::EINVAL);
    }
    Ok(WrFields::Bind {
        rkey,
        mr_lkey: b.mr_lkey.unwrap_or(0),
        addr: b.addr,
        length: b.length,
        access: b.access,
        type1: via == BindVia::Verb,
    })
}

/// Checks the parts of a bind work request that a bind has no use for: it
/// carries no SGEs and no immediate data (`EINVAL` otherwise, as in
/// rdma-core's rxe provider).
pub fn check_bind_wr(num_sge: c_int, imm_data: u32) -> Result<(), Errno> {
    if num_sge != 0 || imm_data != 0 {
        return Err(Errno::EINVAL);
    }
    Ok(())
}

/// The fixed part of a send WQE for a work request, without its SGE or
/// inline counts (which [`SendQueue::push`] fills in).
///
/// `imm_data` is the union of `imm_data` and `invalidate_rkey`; it is
/// copied unchanged, and a local invalidate also carries its key in `rkey`.
/// A bind carries its MR's lkey in `imm_data` instead, and its rights and
/// `roxe_uapi::BIND_TYPE1` in `swap`.
pub fn send_wqe(
    wr_id: u64,
    opcode: u32,
    send_flags: u32,
    imm_data: u32,
    fields: WrFields,
) -> SendWqe {
    let mut w = SendWqe {
        wr_id,
        opcode,
        send_flags,
        imm_data,
        ..SendWqe::default()
    };
    match fields {
        WrFields::None => {}
        WrFields::Rdma { remote_addr, rkey } => {
            w.remote_addr = remote_addr;
            w.rkey = rkey;
        }
        WrFields::Atomic {
            remote_addr,
            compare_add,
            swap,
            rkey,
        } => {
            w.remote_addr = remote_addr;
            w.compare_add = compare_add;
            w.swap = swap;
            w.rkey = rkey;
        }
        WrFields::Ud {
            ah_num,
            remote_qpn,
            remote_qkey,
        } => {
            w.ah_num = ah_num;
            w.remote_qpn = remote_qpn;
            w.remote_qkey = remote_qkey;
        }
        WrFields::Bind {
            rkey,
            mr_lkey,
            addr,
            length,
            access,
            type1,
        } => {
            w.rkey = rkey;
            w.imm_data = mr_lkey;
            w.remote_addr = addr;
            w.compare_add = length;
            w.swap = u64::from(access) | if type1 { BIND_TYPE1 } else { 0 };
        }
    }
    if opcode == ibv::WR_LOCAL_INV {
        w.rkey = imm_data;
    }
    w
}

/// The send WQE `w` as an XRC send QP posts it: with the number of the
/// remote XRC SRQ that is to receive it, `srqn`, in
/// `SendWqe::remote_qpn`. The kernel checks the number.
pub fn xrc_wqe(w: SendWqe, srqn: u32) -> SendWqe {
    SendWqe {
        remote_qpn: srqn,
        ..w
    }
}

/// The send WQE `w` as a raw packet QP posts it: only its work request
/// id, opcode and send flags are kept. The frame in its data names the
/// destination, so there is no AH, remote QP number or Q_Key, and an
/// `IBV_WR_SEND` has no immediate data; whatever the caller left in
/// those fields of its work request does not reach the ring. The SGE and
/// inline counts are filled in by [`SendQueue::push`].
pub fn raw_wqe(w: SendWqe) -> SendWqe {
    SendWqe {
        wr_id: w.wr_id,
        opcode: w.opcode,
        send_flags: w.send_flags,
        ..SendWqe::default()
    }
}

/// What a work request of the `ibv_wr_*` interface must name besides its
/// operation's fields, by QP type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dest {
    /// Nothing: RC and UC QPs send to their connected peer.
    Connected,
    /// A UD address, through `ibv_wr_set_ud_addr`.
    Ud,
    /// A remote XRC SRQ, through `ibv_wr_set_xrc_srqn`, unless the
    /// operation is local (a local invalidate or a bind).
    XrcSrq,
    /// Nothing: a raw packet QP's frame carries its own destination.
    Frame,
}

impl Dest {
    /// The destination work requests of a QP of `qp_type` name.
    pub fn of(qp_type: u32) -> Self {
        match qp_type {
            ibv::QPT_UD => Self::Ud,
            ibv::QPT_RAW_PACKET => Self::Frame,
            ibv::QPT_XRC_SEND => Self::XrcSrq,
            _ => Self::Connected,
        }
    }

    /// Whether a work request with `opcode` must name this destination
    /// (the "QP" setters of the `ibv_wr_post` man page): all but local
    /// invalidates and binds, which do not leave the node.
    fn needed_by(self, opcode: u32) -> bool {
        matches!(self, Self::Ud | Self::XrcSrq)
            && !matches!(opcode, ibv::WR_LOCAL_INV | ibv::WR_BIND_MW)
    }
}

/// A slot being filled: bounds-checked writes of native-endian fields.
struct SlotWriter<'a> {
    buf: &'a mut [u8],
}

impl SlotWriter<'_> {
    /// The `len` bytes at `offset`, or `EINVAL` if they are not all inside
    /// the slot.
    fn region(&mut self, offset: usize, len: usize) -> Result<&mut [u8], Errno> {
        let end = offset.checked_add(len).ok_or(Errno::EINVAL)?;
        self.buf.get_mut(offset..end).ok_or(Errno::EINVAL)
    }

    fn put(&mut self, offset: usize, bytes: &[u8]) -> Result<(), Errno> {
        self.region(offset, bytes.len())?.copy_from_slice(bytes);
        Ok(())
    }

    fn put_u32(&mut self, offset: usize, value: u32) -> Result<(), Errno> {
        self.put(offset, &value.to_ne_bytes())
    }

    fn put_u64(&mut self, offset: usize, value: u64) -> Result<(), Errno> {
        self.put(offset, &value.to_ne_bytes())
    }

    /// Writes `w` at offset 0, field by field in `SendWqe`'s layout.
    fn send_header(&mut self, w: &SendWqe) -> Result<(), Errno> {
        self.put_u64(offset_of!(SendWqe, wr_id), w.wr_id)?;
        self.put_u32(offset_of!(SendWqe, opcode), w.opcode)?;
        self.put_u32(offset_of!(SendWqe, send_flags), w.send_flags)?;
        self.put_u32(offset_of!(SendWqe, imm_data), w.imm_data)?;
        self.put_u32(offset_of!(SendWqe, num_sge), w.num_sge)?;
        self.put_u32(offset_of!(SendWqe, inline_len), w.inline_len)?;
        self.put_u32(offset_of!(SendWqe, rkey), w.rkey)?;
        self.put_u64(offset_of!(SendWqe, remote_addr), w.remote_addr)?;
        self.put_u64(offset_of!(SendWqe, compare_add), w.compare_add)?;
        self.put_u64(offset_of!(SendWqe, swap), w.swap)?;
        self.put_u32(offset_of!(SendWqe, ah_num), w.ah_num)?;
        self.put_u32(offset_of!(SendWqe, remote_qpn), w.remote_qpn)?;
        self.put_u32(offset_of!(SendWqe, remote_qkey), w.remote_qkey)?;
        self.put_u32(offset_of!(SendWqe, _reserved), 0)
    }

    /// Writes `w` at offset 0, field by field in `RecvWqe`'s layout.
    fn recv_header(&mut self, w: &RecvWqe) -> Result<(), Errno> {
        self.put_u64(offset_of!(RecvWqe, wr_id), w.wr_id)?;
        self.put_u32(offset_of!(RecvWqe, num_sge), w.num_sge)?;
        self.put_u32(offset_of!(RecvWqe, _reserved), 0)
    }

    /// Writes `sges` as `Sge`s starting at `offset`.
    fn sges(&mut self, offset: usize, sges: &[ibv::Sge]) -> Result<(), Errno> {
        let mut at = offset;
        for s in sges {
            self.put_u64(at + offset_of!(Sge, addr), s.addr)?;
            self.put_u32(at + offset_of!(Sge, length), s.length)?;
            self.put_u32(at + offset_of!(Sge, lkey), s.lkey)?;
            at = at.checked_add(SGE_SIZE).ok_or(Errno::EINVAL)?;
        }
        Ok(())
    }
}

/// Bytes a WQE with a `header`-byte fixed part and `n` SGEs takes.
fn wqe_len(header: usize, n: usize) -> Result<usize, Errno> {
    n.checked_mul(SGE_SIZE)
        .and_then(|b| b.checked_add(header))
        .ok_or(Errno::EINVAL)
}

/// The total length of the buffers an inline send gathers, or `EINVAL` if
/// it exceeds `max_inline` (or `u32`).
pub fn inline_len(sges: &[ibv::Sge], max_inline: u32) -> Result<u32, Errno> {
    let total = sges
        .iter()
        .try_fold(0u32, |acc, s| acc.checked_add(s.length))
        .ok_or(Errno::EINVAL)?;
    if total > max_inline {
        return Err(Errno::EINVAL);
    }
    Ok(total)
}

/// A QP's send queue: its ring, the limits the kernel granted, and the
/// state of the `ibv_wr_*` interface if the QP offers it.
///
/// # Invariants
///
/// A send WQE with `max_sge` SGEs, or with `max_inline` bytes of inline
/// data, fits one slot of the ring.
#[derive(Debug)]
pub struct SendQueue<M> {
    ring: Producer<M>,
    max_sge: u32,
    max_inline: u32,
    wr: Option<WrBuilder>,
}

/// The `ibv_wr_*` interface of a send queue: the work request being
/// built, and the first error since `wr_start`.
///
/// A builder (`ibv_wr_send`, `ibv_wr_rdma_write`, ...) starts a work
/// request; the setters that follow (`ibv_wr_set_sge`,
/// `ibv_wr_set_ud_addr`, ...) fill it in, in any order. It goes into the
/// ring when the next builder starts or the batch completes, and becomes
/// visible to the kernel only when the whole batch does. Its SGEs and
/// inline bytes wait in buffers sized when the QP was created, so building
/// never allocates.
///
/// # Invariants
///
/// `sges` has room for `max_sge` entries and `inline` for `max_inline`
/// bytes, allocated up front.
#[derive(Debug)]
struct WrBuilder {
    /// The work request the last builder started.
    pending: Option<Pending>,
    /// The first error since `wr_start`; the batch fails with it.
    error: Option<Errno>,
    /// What the QP's work requests must name besides their operation.
    dest: Dest,
    /// The pending work request's SGEs, with [`Payload::Sges`].
    sges: Vec<ibv::Sge>,
    /// The pending work request's inline bytes, with [`Payload::Inline`].
    inline: Vec<u8>,
}

/// A work request a builder started.
#[derive(Clone, Copy, Debug)]
struct Pending {
    /// Its fixed part; the counts are filled in when it is written.
    wqe: SendWqe,
    /// Where its data is.
    payload: Payload,
    /// Whether `ibv_wr_set_ud_addr` or `ibv_wr_set_xrc_srqn` gave it a
    /// destination.
    has_dest: bool,
}

/// The data of a pending work request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Payload {
    /// None (yet).
    None,
    /// The SGEs in `WrBuilder::sges`.
    Sges,
    /// The bytes in `WrBuilder::inline`.
    Inline,
}

impl<M: WqMemory> SendQueue<M> {
    /// A send queue over `ring` with the granted `max_sge` and `max_inline`
    /// (`ibv_qp_cap.max_send_sge` and `max_inline_data` after creation).
    ///
    /// Fails with `EPROTO` if the kernel granted more than a slot holds.
    pub fn new(ring: Producer<M>, max_sge: u32, max_inline: u32) -> Result<Self, Errno> {
        let slot = ring.memory().geometry().slot_size();
        let sges = usize::try_from(max_sge).map_err(|_| Errno::EPROTO)?;
        let inline = usize::try_from(max_inline).map_err(|_| Errno::EPROTO)?;
        let fits = |body: Option<usize>| {
            body.and_then(|b| b.checked_add(SEND_WQE_HEADER))
                .is_some_and(|len| len <= slot)
        };
        if !fits(sges.checked_mul(SGE_SIZE)) || !fits(Some(inline)) {
            return Err(Errno::EPROTO);
        }
        // INVARIANT: both limits were just checked against the slot size.
        Ok(Self {
            ring,
            max_sge,
            max_inline,
            wr: None,
        })
    }

    /// The most SGEs one work request may carry.
    pub fn max_sge(&self) -> u32 {
        self.max_sge
    }

    /// The most inline bytes one work request may carry.
    pub fn max_inline(&self) -> u32 {
        self.max_inline
    }

    /// Writes one send WQE: `wqe` (whose `num_sge` and `inline_len` are
    /// replaced) and then either the `sges`, or with `IBV_SEND_INLINE` in
    /// `wqe.send_flags` the bytes they describe, which `copy_inline` copies
    /// into the slice it is given (exactly `sge.length` bytes, for every
    /// SGE with a non-zero length, in order).
    ///
    /// Fails, with nothing written, with `EINVAL` if there are more than
    /// [`SendQueue::max_sge`] SGEs or (inline) more than
    /// [`SendQueue::max_inline`] bytes, and as [`Producer::push`] does.
    pub fn push(
        &mut self,
        wqe: SendWqe,
        sges: &[ibv::Sge],
        mut copy_inline: impl FnMut(&ibv::Sge, &mut [u8]),
    ) -> Result<(), Errno> {
        let num_sge = u32::try_from(sges.len()).map_err(|_| Errno::EINVAL)?;
        if num_sge > self.max_sge {
            return Err(Errno::EINVAL);
        }
        let inline = wqe.send_flags & ibv::SEND_INLINE != 0;
        let w = if inline {
            SendWqe {
                num_sge: 0,
                inline_len: inline_len(sges, self.max_inline)?,
                ..wqe
            }
        } else {
            SendWqe {
                num_sge,
                inline_len: 0,
                ..wqe
            }
        };
        self.ring.push(|out| {
            let mut slot = SlotWriter { buf: out };
            slot.send_header(&w)?;
            if inline {
                let mut at = SEND_WQE_HEADER;
                for s in sges.iter().filter(|s| s.length != 0) {
                    // CAST: lengths add up to at most `max_inline`.
                    let len = s.length as usize;
                    copy_inline(s, slot.region(at, len)?);
                    at += len;
                }
                Ok(at)
            } else {
                slot.sges(SEND_WQE_HEADER, sges)?;
                wqe_len(SEND_WQE_HEADER, sges.len())
            }
        })
    }

    /// Makes the pushed WQEs visible to the kernel; returns whether there
    /// were any.
    pub fn publish(&mut self) -> bool {
        self.ring.publish()
    }

    /// The ring.
    pub fn ring(&self) -> &Producer<M> {
        &self.ring
    }

    /// Offers the `ibv_wr_*` interface on this queue, for a QP whose work
    /// requests name `dest`: allocates room for the SGEs and inline bytes
    /// of one work request.
    ///
    /// Fails with `ENOMEM`.
    pub fn enable_wr(&mut self, dest: Dest) -> Result<(), Errno> {
        let sges = usize::try_from(self.max_sge).map_err(|_| Errno::ENOMEM)?;
        let bytes = usize::try_from(self.max_inline).map_err(|_| Errno::ENOMEM)?;
        let mut b = WrBuilder {
            pending: None,
            error: None,
            dest,
            sges: Vec::new(),
            inline: Vec::new(),
        };
        b.sges.try_reserve_exact(sges).map_err(|_| Errno::ENOMEM)?;
        b.inline
            .try_reserve_exact(bytes)
            .map_err(|_| Errno::ENOMEM)?;
        // INVARIANT: the room was just reserved.
        self.wr = Some(b);
        Ok(())
    }

    /// `ibv_wr_start`: starts a batch with no work request and no error.
    pub fn wr_start(&mut self) {
        self.wr_abort();
    }

    /// A builder: writes the pending work request into the ring (not
    /// published) and starts `wqe`, or keeps the builder's error.
    ///
    /// The counts of `wqe` are replaced, and `IBV_SEND_INLINE` in its send
    /// flags is set or cleared, by the setters that follow.
    pub fn wr_build(&mut self, wqe: Result<SendWqe, Errno>) {
        self.wr_flush();
        let Some(b) = self.wr.as_mut() else {
            return;
        };
        match wqe {
            Ok(wqe) => {
                b.pending = Some(Pending {
                    wqe,
                    payload: Payload::None,
                    has_dest: false,
                });
            }
            Err(err) => {
                b.pending = None;
                b.error.get_or_insert(err);
            }
        }
    }

    /// Fails the batch with `err`, unless it failed already.
    pub fn wr_fail(&mut self, err: Errno) {
        if let Some(b) = self.wr.as_mut() {
            b.error.get_or_insert(err);
        }
    }

    /// The builder, if a work request is pending and the batch has not
    /// failed; fails the batch with `EINVAL` if there is no work request
    /// to set anything on.
    fn wr_target(&mut self) -> Option<&mut WrBuilder> {
        let b = self.wr.as_mut()?;
        if b.error.is_some() {
            return None;
        }
        if b.pending.is_none() {
            b.error = Some(Errno::EINVAL);
            return None;
        }
        Some(b)
    }

    /// `ibv_wr_set_ud_addr` with the AH already turned into roxe's AH
    /// number. Fails the batch with `EINVAL` on a QP that is not UD.
    pub fn wr_set_ud(&mut self, ah_num: u32, remote_qpn: u32, remote_qkey: u32) {
        let Some(b) = self.wr_target() else {
            return;
        };
        if b.dest != Dest::Ud {
            b.error = Some(Errno::EINVAL);
            return;
        }
        if let Some(p) = b.pending.as_mut() {
            p.wqe.ah_num = ah_num;
            p.wqe.remote_qpn = remote_qpn;
            p.wqe.remote_qkey = remote_qkey;
            p.has_dest = true;
        }
    }

    /// `ibv_wr_set_xrc_srqn`: the remote XRC SRQ of the pending work
    /// request, as [`xrc_wqe`] places it. Fails the batch with `EINVAL` on
    /// a QP that is not an XRC send QP.
    pub fn wr_set_xrc_srqn(&mut self, srqn: u32) {
        let Some(b) = self.wr_target() else {
            return;
        };
        if b.dest != Dest::XrcSrq {
            b.error = Some(Errno::EINVAL);
            return;
        }
        if let Some(p) = b.pending.as_mut() {
            p.wqe = xrc_wqe(p.wqe, srqn);
            p.has_dest = true;
        }
    }

    /// `ibv_wr_set_sge`: one SGE, or none if its length is 0 (as in
    /// rdma-core's rxe provider).
    pub fn wr_set_sge(&mut self, sge: ibv::Sge) {
        if sge.length == 0 {
            self.wr_set_sge_list(&[]);
        } else {
            self.wr_set_sge_list(&[sge]);
        }
    }

    /// `ibv_wr_set_sge_list`. Fails the batch with `EINVAL` for more than
    /// [`SendQueue::max_sge`] SGEs.
    pub fn wr_set_sge_list(&mut self, sges: &[ibv::Sge]) {
        let max = self.max_sge;
        let Some(b) = self.wr_target() else {
            return;
        };
        if u32::try_from(sges.len()).map_or(true, |n| n > max) {
            b.error = Some(Errno::EINVAL);
            return;
        }
        b.sges.clear();
        // No allocation: `sges` has room for `max_sge` (invariant).
        b.sges.extend_from_slice(sges);
        if let Some(p) = b.pending.as_mut() {
            p.payload = Payload::Sges;
        }
    }

    /// `ibv_wr_set_inline_data` and `ibv_wr_set_inline_data_list`: copies
    /// the bytes of `bufs` now, so the caller may reuse them at once.
    /// `copy` copies one buffer into the slice it is given (exactly
    /// `buf.length` bytes, for every buffer with a non-zero length, in
    /// order).
    ///
    /// Fails the batch, with nothing copied, with `EINVAL` if the buffers
    /// hold more than [`SendQueue::max_inline`] bytes.
    pub fn wr_set_inline(
        &mut self,
        bufs: &[ibv::DataBuf],
        mut copy: impl FnMut(&ibv::DataBuf, &mut [u8]),
    ) {
        let max = self.max_inline;
        let Some(b) = self.wr_target() else {
            return;
        };
        let total = bufs
            .iter()
            .try_fold(0usize, |acc, d| acc.checked_add(d.length));
        if total.is_none_or(|t| u32::try_from(t).map_or(true, |t| t > max)) {
            b.error = Some(Errno::EINVAL);
            return;
        }
        b.inline.clear();
        for d in bufs.iter().filter(|d| d.length != 0) {
            let start = b.inline.len();
            // No allocation: the total fits `max_inline` (invariant).
            b.inline.resize(start + d.length, 0);
            if let Some(dst) = b.inline.get_mut(start..) {
                copy(d, dst);
            }
        }
        if let Some(p) = b.pending.as_mut() {
            p.payload = Payload::Inline;
        }
    }

    /// Writes the pending work request into the ring (not published),
    /// unless the batch has failed; fails the batch if that does not work:
    /// `EINVAL` for a UD or XRC work request without the destination
    /// [`Dest`] asks for, and as [`Producer::push`] fails (`ENOMEM` for a
    /// full ring).
    fn wr_flush(&mut self) {
        let Some(b) = self.wr.as_mut() else {
            return;
        };
        let Some(p) = b.pending.take() else {
            return;
        };
        if b.error.is_some() {
            return;
        }
        if b.dest.needed_by(p.wqe.opcode) && !p.has_dest {
            b.error = Some(Errno::EINVAL);
            return;
        }
        let (sges, inline): (&[ibv::Sge], &[u8]) = match p.payload {
            Payload::None => (&[], &[]),
            Payload::Sges => (&b.sges, &[]),
            Payload::Inline => (&[], &b.inline),
        };
        if let Err(err) = write_pending(&mut self.ring, &p, sges, inline) {
            b.error = Some(err);
        }
    }

    /// `ibv_wr_complete`, up to the doorbell: writes the pending work
    /// request and publishes the batch; returns whether there was anything
    /// to publish.
    ///
    /// If the batch failed, nothing of it is published, the error it
    /// failed with is returned, and its WQEs are discarded. Fails with
    /// `EINVAL` on a queue without the `ibv_wr_*` interface.
    pub fn wr_complete(&mut self) -> Result<bool, Errno> {
        self.wr_flush();
        let failed = match self.wr.as_mut() {
            Some(b) => b.error.take(),
            None => Some(Errno::EINVAL),
        };
        if let Some(err) = failed {
            self.ring.discard();
            return Err(err);
        }
        Ok(self.ring.publish())
    }

    /// `ibv_wr_abort`: discards every work request of the batch.
    pub fn wr_abort(&mut self) {
        if let Some(b) = self.wr.as_mut() {
            b.pending = None;
            b.error = None;
        }
        self.ring.discard();
    }
}

/// Writes the pending work request `p` into `ring`, with `sges` or
/// `inline` bytes (at most one of them non-empty). `IBV_SEND_INLINE` is
/// set in the WQE exactly when its data is inline.
fn write_pending<M: WqMemory>(
    ring: &mut Producer<M>,
    p: &Pending,
    sges: &[ibv::Sge],
    inline: &[u8],
) -> Result<(), Errno> {
    let w = SendWqe {
        send_flags: match p.payload {
            Payload::Inline => p.wqe.send_flags | ibv::SEND_INLINE,
            Payload::None | Payload::Sges => p.wqe.send_flags & !ibv::SEND_INLINE,
        },
        num_sge: u32::try_from(sges.len()).map_err(|_| Errno::EINVAL)?,
        inline_len: u32::try_from(inline.len()).map_err(|_| Errno::EINVAL)?,
        ..p.wqe
    };
    ring.push(|out| {
        let mut slot = SlotWriter { buf: out };
        slot.send_header(&w)?;
        slot.sges(SEND_WQE_HEADER, sges)?;
        let data = wqe_len(SEND_WQE_HEADER, sges.len())?;
        slot.put(data, inline)?;
        data.checked_add(inline.len()).ok_or(Errno::EINVAL)
    })
}

/// A receive queue (a QP's own, or an SRQ): its ring, and the SGE limit
/// the kernel granted.
///
/// # Invariants
///
/// A receive WQE with `max_sge` SGEs fits one slot of the ring.
#[derive(Debug)]
pub struct RecvQueue<M> {
    ring: Producer<M>,
    max_sge: u32,
}

impl<M: WqMemory> RecvQueue<M> {
    /// A receive queue over `ring` with the granted `max_sge`
    /// (`ibv_qp_cap.max_recv_sge` or `ibv_srq_attr.max_sge`).
    ///
    /// Fails with `EPROTO` if the kernel granted more than a slot holds.
    pub fn new(ring: Producer<M>, max_sge: u32) -> Result<Self, Errno> {
        let slot = ring.memory().geometry().slot_size();
        let len = usize::try_from(max_sge)
            .ok()
            .and_then(|n| wqe_len(RECV_WQE_HEADER, n).ok());
        if len.is_none_or(|len| len > slot) {
            return Err(Errno::EPROTO);
        }
        // INVARIANT: checked just above.
        Ok(Self { ring, max_sge })
    }

    /// The most SGEs one work request may carry.
    pub fn max_sge(&self) -> u32 {
        self.max_sge
    }

    /// Writes one receive WQE.
    ///
    /// Fails, with nothing written, with `EINVAL` if there are more than
    /// [`RecvQueue::max_sge`] SGEs, and as [`Producer::push`] does.
    pub fn push(&mut self, wr_id: u64, sges: &[ibv::Sge]) -> Result<(), Errno> {
        let num_sge = u32::try_from(sges.len()).map_err(|_| Errno::EINVAL)?;
        if num_sge > self.max_sge {
            return Err(Errno::EINVAL);
        }
        let w = RecvWqe {
            wr_id,
            num_sge,
            _reserved: 0,
        };
        self.ring.push(|out| {
            let mut slot = SlotWriter { buf: out };
            slot.recv_header(&w)?;
            slot.sges(RECV_WQE_HEADER, sges)?;
            wqe_len(RECV_WQE_HEADER, sges.len())
        })
    }

    /// Makes the pushed WQEs visible to the kernel; returns whether there
    /// were any.
    pub fn publish(&mut self) -> bool {
        self.ring.publish()
    }

    /// The ring.
    pub fn ring(&self) -> &Producer<M> {
        &self.ring
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wq::tests::FakeWq;

    // The offsets the kernel reads, written out by hand (not through
    // `offset_of!`), so that a layout change cannot go unnoticed.
    fn u32_at(b: &[u8], off: usize) -> u32 {
        u32::from_ne_bytes(b[off..off + 4].try_into().expect("4 bytes"))
    }
    fn u64_at(b: &[u8], off: usize) -> u64 {
        u64::from_ne_bytes(b[off..off + 8].try_into().expect("8 bytes"))
    }

    fn decode_send(b: &[u8]) -> SendWqe {
        SendWqe {
            wr_id: u64_at(b, 0),
            opcode: u32_at(b, 8),
            send_flags: u32_at(b, 12),
            imm_data: u32_at(b, 16),
            num_sge: u32_at(b, 20),
            inline_len: u32_at(b, 24),
            rkey: u32_at(b, 28),
            remote_addr: u64_at(b, 32),
            compare_add: u64_at(b, 40),
            swap: u64_at(b, 48),
            ah_num: u32_at(b, 56),
            remote_qpn: u32_at(b, 60),
            remote_qkey: u32_at(b, 64),
            _reserved: u32_at(b, 68),
        }
    }

    fn decode_sge(b: &[u8], off: usize) -> ibv::Sge {
        ibv::Sge {
            addr: u64_at(b, off),
            length: u32_at(b, off + 8),
            lkey: u32_at(b, off + 12),
        }
    }

    fn sge(n: u32, length: u32) -> ibv::Sge {
        ibv::Sge {
            addr: 0x1000_0000_0000 + u64::from(n) * 0x100,
            length,
            lkey: 0x40 + n,
        }
    }

    /// A send queue as the kernel grants one for `max_send_sge = 2` and
    /// `max_inline_data = 100`: 192-byte slots (72 + max(32, 100), rounded
    /// up), 2 SGEs, 100 inline bytes.
    fn send_queue(num_slots: u32) -> SendQueue<FakeWq> {
        let ring = Producer::new(FakeWq::new(num_slots, 192, 0)).expect("producer");
        SendQueue::new(ring, 2, 100).expect("limits fit")
    }

    fn recv_queue(num_slots: u32, max_sge: u32) -> RecvQueue<FakeWq> {
        let ring = Producer::new(FakeWq::new(num_slots, 64, 0)).expect("producer");
        RecvQueue::new(ring, max_sge).expect("limits fit")
    }

    /// Copies inline data from a fake address space: SGE `n`'s bytes are
    /// all `n`.
    fn fake_copy(s: &ibv::Sge, dst: &mut [u8]) {
        assert_eq!(dst.len(), s.length as usize);
        dst.fill((s.addr >> 8) as u8);
    }

    fn no_copy(_: &ibv::Sge, _: &mut [u8]) {
        panic!("not an inline send");
    }

    #[test]
    fn header_sizes_follow_the_uapi() {
        assert_eq!((SEND_WQE_HEADER, RECV_WQE_HEADER, SGE_SIZE), (72, 16, 16));
    }

    #[test]
    fn init_attr_checks() {
        let pd = ibv::QP_INIT_ATTR_PD;
        for t in [ibv::QPT_RC, ibv::QPT_UC, ibv::QPT_UD, ibv::QPT_RAW_PACKET] {
            assert_eq!(check_init_attr(t, pd, 0, 0), Ok(()));
            assert_eq!(
                check_init_attr(t, pd | ibv::QP_INIT_ATTR_CREATE_FLAGS, 0, 0),
                Ok(())
            );
        }
        // Driver and unknown QPs (IB_QPT_SMI and IB_QPT_GSI are 0 and 1).
        for t in [0xff, 0, 1, 5, 7, 11] {
            assert_eq!(
                check_init_attr(t, pd, 0, 0),
                Err(Errno::EOPNOTSUPP),
                "type {t}"
            );
        }
        for bit in [ibv::QP_INIT_ATTR_MAX_TSO_HEADER, RSS_INIT_ATTR_MASK, 1 << 7] {
            assert_eq!(
                check_init_attr(ibv::QPT_RC, pd | bit, 0, 0),
                Err(Errno::EOPNOTSUPP),
                "mask {bit:#x}"
            );
        }
        // IBV_QP_CREATE_BLOCK_SELF_MCAST_LB, IBV_QP_CREATE_SOURCE_QPN.
        for flag in [1 << 1, 1 << 10] {
            let mask = pd | ibv::QP_INIT_ATTR_CREATE_FLAGS;
            assert_eq!(
                check_init_attr(ibv::QPT_UD, mask, flag, 0),
                Err(Errno::EOPNOTSUPP)
            );
        }
        // Flags without the mask bit are not looked at.
        assert_eq!(check_init_attr(ibv::QPT_UD, pd, 1 << 1, 0), Ok(()));
        assert_eq!(check_init_attr(ibv::QPT_RC, 0, 0, 0), Err(Errno::EINVAL));
    }

    #[test]
    fn raw_packet_qps_are_created_like_ud_qps_without_an_srq() {
        let (pd, raw) = (ibv::QP_INIT_ATTR_PD, ibv::QPT_RAW_PACKET);
        assert_eq!(check_init_attr(raw, pd, 0, 0), Ok(()));
        assert_eq!(check_srq_use(raw, false), Ok(()));
        assert_eq!(check_srq_use(raw, true), Err(Errno::EINVAL));
        // Other QPs' SRQs are the kernel's to judge.
        for t in [ibv::QPT_RC, ibv::QPT_UC, ibv::QPT_UD, ibv::QPT_XRC_SEND] {
            assert_eq!(check_srq_use(t, true), Ok(()), "type {t}");
        }
        // A PD is needed, an XRC domain refused.
        assert_eq!(check_init_attr(raw, 0, 0, 0), Err(Errno::EINVAL));
        let xrcd = ibv::QP_INIT_ATTR_XRCD;
        assert_eq!(check_init_attr(raw, pd | xrcd, 0, 0), Err(Errno::EINVAL));
        // No offloads: IBV_QP_CREATE_SCATTER_FCS, _CVLAN_STRIPPING,
        // _PCI_WRITE_END_PADDING; no TSO.
        let flags = pd | ibv::QP_INIT_ATTR_CREATE_FLAGS;
        for flag in [1 << 8, 1 << 9, 1 << 11] {
            assert_eq!(
                check_init_attr(raw, flags, flag, 0),
                Err(Errno::EOPNOTSUPP),
                "flag {flag:#x}"
            );
        }
        assert_eq!(
            check_init_attr(raw, pd | ibv::QP_INIT_ATTR_MAX_TSO_HEADER, 0, 0),
            Err(Errno::EOPNOTSUPP),
        );
        // Both rings, as a UD QP has.
        let both = Rings {
            send: true,
            recv: true,
        };
        assert_eq!(rings(raw, false), both);
    }

    #[test]
    fn xrc_qps_need_their_own_attributes() {
        let (pd, xrcd) = (ibv::QP_INIT_ATTR_PD, ibv::QP_INIT_ATTR_XRCD);
        let flags = ibv::QP_INIT_ATTR_CREATE_FLAGS;
        // An XRC send QP is created like an RC QP, with a PD.
        assert_eq!(check_init_attr(ibv::QPT_XRC_SEND, pd, 0, 0), Ok(()));
        assert_eq!(check_init_attr(ibv::QPT_XRC_SEND, pd | flags, 0, 0), Ok(()));
        assert_eq!(
            check_init_attr(ibv::QPT_XRC_SEND, 0, 0, 0),
            Err(Errno::EINVAL)
        );
        // An XRC receive QP needs its domain; a PD does not matter.
        assert_eq!(check_init_attr(ibv::QPT_XRC_RECV, xrcd, 0, 0), Ok(()));
        assert_eq!(check_init_attr(ibv::QPT_XRC_RECV, xrcd | pd, 0, 0), Ok(()));
        assert_eq!(
            check_init_attr(ibv::QPT_XRC_RECV, pd, 0, 0),
            Err(Errno::EINVAL)
        );
        // Only XRC receive QPs belong to a domain.
        for t in [ibv::QPT_RC, ibv::QPT_UC, ibv::QPT_UD, ibv::QPT_XRC_SEND] {
            assert_eq!(
                check_init_attr(t, pd | xrcd, 0, 0),
                Err(Errno::EINVAL),
                "type {t}"
            );
        }
        // No send queue, so no `ibv_wr_*` interface, even with no ops.
        let ops = ibv::QP_INIT_ATTR_SEND_OPS_FLAGS;
        assert_eq!(
            check_init_attr(ibv::QPT_XRC_RECV, xrcd | ops, 0, 0),
            Err(Errno::EOPNOTSUPP)
        );
        // What stays unsupported does so for XRC too.
        assert_eq!(
            check_init_attr(ibv::QPT_XRC_SEND, pd | flags, 1, 0),
            Err(Errno::EOPNOTSUPP)
        );
        assert_eq!(
            check_init_attr(ibv::QPT_XRC_RECV, xrcd | RSS_INIT_ATTR_MASK, 0, 0),
            Err(Errno::EOPNOTSUPP)
        );
    }

    #[test]
    fn rss_is_for_raw_packet_qps_with_both_bits() {
        let (pd, raw) = (ibv::QP_INIT_ATTR_PD, ibv::QPT_RAW_PACKET);
        let rss = pd | RSS_INIT_ATTR_MASK;
        assert_eq!(check_init_attr(raw, rss, 0, 0), Ok(()));
        // With creation flags as long as there are none (as pyverbs asks).
        let flags = rss | ibv::QP_INIT_ATTR_CREATE_FLAGS;
        assert_eq!(check_init_attr(raw, flags, 0, 0), Ok(()));
        assert_eq!(
            check_init_attr(raw, flags, 1 << 8, 0),
            Err(Errno::EOPNOTSUPP)
        );
        // One without the other, on any type.
        for bit in [ibv::QP_INIT_ATTR_IND_TABLE, ibv::QP_INIT_ATTR_RX_HASH] {
            for t in [raw, ibv::QPT_RC, ibv::QPT_UD] {
                assert_eq!(
                    check_init_attr(t, pd | bit, 0, 0),
                    Err(Errno::EINVAL),
                    "type {t} mask {bit:#x}"
                );
            }
        }
        // Other QP types have no RSS.
        for t in [ibv::QPT_RC, ibv::QPT_UC, ibv::QPT_UD, ibv::QPT_XRC_SEND] {
            assert_eq!(
                check_init_attr(t, rss, 0, 0),
                Err(Errno::EOPNOTSUPP),
                "type {t}"
            );
        }
        // It sends nothing, so no `ibv_wr_*` interface, even with no ops.
        let ops = rss | ibv::QP_INIT_ATTR_SEND_OPS_FLAGS;
        assert_eq!(check_init_attr(raw, ops, 0, 0), Err(Errno::EINVAL));
        assert_eq!(
            check_init_attr(raw, ops, 0, RAW_SEND_OPS),
            Err(Errno::EINVAL)
        );
        // It still needs a PD and takes no XRC domain.
        assert_eq!(
            check_init_attr(raw, RSS_INIT_ATTR_MASK, 0, 0),
            Err(Errno::EINVAL)
        );
        assert_eq!(
            check_init_attr(raw, rss | ibv::QP_INIT_ATTR_XRCD, 0, 0),
            Err(Errno::EINVAL)
        );
        // TSO stays unsupported.
        assert_eq!(
            check_init_attr(raw, rss | ibv::QP_INIT_ATTR_MAX_TSO_HEADER, 0, 0),
            Err(Errno::EOPNOTSUPP)
        );
    }

    #[test]
    fn rings_follow_the_qp_type() {
        let both = Rings {
            send: true,
            recv: true,
        };
        let send_only = Rings {
            send: true,
            recv: false,
        };
        for t in [ibv::QPT_RC, ibv::QPT_UC, ibv::QPT_UD] {
            assert_eq!(rings(t, false), both);
            assert_eq!(rings(t, true), send_only);
        }
        assert_eq!(rings(ibv::QPT_XRC_SEND, false), send_only);
        let none = Rings {
            send: false,
            recv: false,
        };
        assert_eq!(rings(ibv::QPT_XRC_RECV, false), none);
        assert_eq!(rings(ibv::QPT_XRC_RECV, true), none);
    }

    #[test]
    fn only_the_cqs_the_kernel_took_are_cleaned() {
        let both = KernelCqs {
            send: true,
            recv: true,
        };
        for t in [ibv::QPT_RC, ibv::QPT_UC, ibv::QPT_UD, ibv::QPT_RAW_PACKET] {
            assert_eq!(kernel_cqs(t), both);
        }
        let send_only = KernelCqs {
            send: true,
            recv: false,
        };
        assert_eq!(kernel_cqs(ibv::QPT_XRC_SEND), send_only);
        let none = KernelCqs {
            send: false,
            recv: false,
        };
        assert_eq!(kernel_cqs(ibv::QPT_XRC_RECV), none);
    }

    #[test]
    fn srq_init_attr_checks() {
        let (ty, pd, xrcd, cq) = (
            ibv::SRQ_INIT_ATTR_TYPE,
            ibv::SRQ_INIT_ATTR_PD,
            ibv::SRQ_INIT_ATTR_XRCD,
            ibv::SRQ_INIT_ATTR_CQ,
        );
        let xrc = ty | pd | xrcd | cq;
        // Basic SRQs, with or without the type bit; the domain and CQ are
        // not a basic SRQ's business.
        assert_eq!(check_srq_init_attr(pd, 7), Ok(ibv::SRQT_BASIC));
        assert_eq!(check_srq_init_attr(ty | pd, 0), Ok(ibv::SRQT_BASIC));
        assert_eq!(check_srq_init_attr(pd | cq | xrcd, 1), Ok(ibv::SRQT_BASIC));
        assert_eq!(check_srq_init_attr(ty, 0), Err(Errno::EINVAL));
        // XRC SRQs need a PD, a domain and a CQ.
        assert_eq!(check_srq_init_attr(xrc, ibv::SRQT_XRC), Ok(ibv::SRQT_XRC));
        for missing in [pd, xrcd, cq] {
            assert_eq!(
                check_srq_init_attr(xrc & !missing, ibv::SRQT_XRC),
                Err(Errno::EINVAL),
                "without {missing:#x}"
            );
        }
        // Tag matching is not offered; unknown types are invalid.
        assert_eq!(
            check_srq_init_attr(xrc, ibv::SRQT_TM),
            Err(Errno::EOPNOTSUPP)
        );
        assert_eq!(
            check_srq_init_attr(xrc | ibv::SRQ_INIT_ATTR_TM, ibv::SRQT_XRC),
            Err(Errno::EOPNOTSUPP)
        );
        assert_eq!(check_srq_init_attr(xrc | 1 << 5, 1), Err(Errno::EOPNOTSUPP));
        assert_eq!(check_srq_init_attr(xrc, 3), Err(Errno::EINVAL));
    }

    #[test]
    fn open_attr_checks() {
        let all = REQUIRED_OPEN_ATTR_MASK;
        assert_eq!(check_open_attr(all, ibv::QPT_XRC_RECV), Ok(()));
        let ctx = ibv::QP_OPEN_ATTR_CONTEXT;
        assert_eq!(check_open_attr(all | ctx, ibv::QPT_XRC_RECV), Ok(()));
        for missing in [
            ibv::QP_OPEN_ATTR_NUM,
            ibv::QP_OPEN_ATTR_XRCD,
            ibv::QP_OPEN_ATTR_TYPE,
        ] {
            assert_eq!(
                check_open_attr(all & !missing, ibv::QPT_XRC_RECV),
                Err(Errno::EINVAL)
            );
        }
        for t in [ibv::QPT_RC, ibv::QPT_XRC_SEND] {
            assert_eq!(check_open_attr(all, t), Err(Errno::EINVAL));
        }
        assert_eq!(
            check_open_attr(all | 1 << 4, ibv::QPT_XRC_RECV),
            Err(Errno::EOPNOTSUPP)
        );
    }

    #[test]
    fn send_ops_depend_on_the_qp_type() {
        let mask = ibv::QP_INIT_ATTR_PD | ibv::QP_INIT_ATTR_SEND_OPS_FLAGS;
        let ok = |t, ops| check_init_attr(t, mask, 0, ops) == Ok(());
        // Every single op, on each type: what rdma-core's rxe offers,
        // without TSO.
        let types = [
            ibv::QPT_RC,
            ibv::QPT_UC,
            ibv::QPT_UD,
            ibv::QPT_RAW_PACKET,
            ibv::QPT_XRC_SEND,
        ];
        let offered: Vec<(u32, Vec<u32>)> = types
            .into_iter()
            .map(|t| (t, (0..64).filter(|&b| ok(t, 1u64 << b)).collect()))
            .collect();
        assert_eq!(
            offered,
            [
                (ibv::QPT_RC, vec![0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 12]),
                (ibv::QPT_UC, vec![0, 1, 2, 3, 8, 9]),
                (ibv::QPT_UD, vec![2, 3]),
                // Plain sends only.
                (ibv::QPT_RAW_PACKET, vec![2]),
                // RC's, but atomic write.
                (ibv::QPT_XRC_SEND, vec![0, 1, 2, 3, 4, 5, 6, 7, 8, 9]),
            ]
        );
        // All at once, none, and one too many.
        assert!(ok(ibv::QPT_RC, RC_SEND_OPS));
        assert!(ok(ibv::QPT_UC, 0));
        assert!(ok(ibv::QPT_RC, RC_SEND_OPS | ibv::QP_EX_WITH_ATOMIC_WRITE));
        assert!(!ok(ibv::QPT_UC, UC_SEND_OPS | ibv::QP_EX_WITH_ATOMIC_WRITE));
        assert!(!ok(ibv::QPT_RC, ibv::QP_EX_WITH_TSO));
        assert!(!ok(ibv::QPT_UD, UD_SEND_OPS | ibv::QP_EX_WITH_RDMA_WRITE));
        assert!(ok(ibv::QPT_RAW_PACKET, RAW_SEND_OPS));
        assert!(!ok(ibv::QPT_RAW_PACKET, ibv::QP_EX_WITH_TSO));
        assert!(!ok(ibv::QPT_RAW_PACKET, UD_SEND_OPS));
        // Without the mask bit the flags are not looked at.
        assert_eq!(
            check_init_attr(ibv::QPT_UD, ibv::QP_INIT_ATTR_PD, 0, u64::MAX),
            Ok(())
        );
        // The type is checked first.
        assert_eq!(check_init_attr(0xff, mask, 0, 0), Err(Errno::EOPNOTSUPP));
    }

    #[test]
    fn ring_presence_must_match_the_qp() {
        let ring = RingInfo {
            num_slots: 4,
            ..RingInfo::default()
        };
        let none = RingInfo::default();
        assert_eq!(check_ring_presence(&ring, true), Ok(()));
        assert_eq!(check_ring_presence(&none, false), Ok(()));
        assert_eq!(check_ring_presence(&none, true), Err(Errno::EPROTO));
        assert_eq!(check_ring_presence(&ring, false), Err(Errno::EPROTO));
        // An XRC send QP gets no receive ring, SRQ or not.
        let xrc = rings(ibv::QPT_XRC_SEND, false).recv;
        assert_eq!(check_ring_presence(&none, xrc), Ok(()));
        assert_eq!(check_ring_presence(&ring, xrc), Err(Errno::EPROTO));
    }

    #[test]
    fn posting_depends_on_the_state() {
        let send: Vec<u32> = (0..8).filter(|&s| can_post_send(s)).collect();
        assert_eq!(
            send,
            [ibv::QPS_RTS, ibv::QPS_SQD, ibv::QPS_SQE, ibv::QPS_ERR]
        );
        let recv: Vec<u32> = (0..8).filter(|&s| can_post_recv(s)).collect();
        assert_eq!(recv, [1, 2, 3, 4, 5, 6]);
    }

    #[test]
    fn num_sge_limits() {
        assert_eq!(check_num_sge(0, 0), Ok(0));
        assert_eq!(check_num_sge(2, 2), Ok(2));
        assert_eq!(check_num_sge(3, 2), Err(Errno::EINVAL));
        assert_eq!(check_num_sge(-1, 32), Err(Errno::EINVAL));
        assert_eq!(check_num_sge(c_int::MIN, 32), Err(Errno::EINVAL));
        assert_eq!(check_num_sge(c_int::MAX, u32::MAX), Ok(c_int::MAX as usize));
    }

    #[test]
    fn wr_parts_follow_ibv_cmd_post_send() {
        use WrPart::*;
        let rc = |op| wr_part(ibv::QPT_RC, op);
        assert_eq!(rc(ibv::WR_SEND), Ok(None));
        assert_eq!(rc(ibv::WR_SEND_WITH_IMM), Ok(None));
        assert_eq!(rc(ibv::WR_SEND_WITH_INV), Ok(None));
        assert_eq!(rc(ibv::WR_LOCAL_INV), Ok(None));
        assert_eq!(rc(ibv::WR_RDMA_WRITE), Ok(Rdma));
        assert_eq!(rc(ibv::WR_RDMA_WRITE_WITH_IMM), Ok(Rdma));
        assert_eq!(rc(ibv::WR_RDMA_READ), Ok(Rdma));
        assert_eq!(rc(ibv::WR_ATOMIC_WRITE), Ok(Rdma));
        assert_eq!(rc(ibv::WR_ATOMIC_CMP_AND_SWP), Ok(Atomic));
        assert_eq!(rc(ibv::WR_ATOMIC_FETCH_AND_ADD), Ok(Atomic));
        assert_eq!(wr_part(ibv::QPT_UC, ibv::WR_RDMA_WRITE), Ok(Rdma));
        // Unknown opcodes are the kernel's to refuse.
        assert_eq!(rc(200), Ok(None));
        // Every UD work request reads `wr.ud`, whatever its opcode.
        assert_eq!(wr_part(ibv::QPT_UD, ibv::WR_SEND), Ok(Ud));
        assert_eq!(wr_part(ibv::QPT_UD, ibv::WR_RDMA_WRITE), Ok(Ud));
        // Binds read `bind_mw`, and only RC and UC QPs bind.
        assert_eq!(rc(ibv::WR_BIND_MW), Ok(Bind));
        assert_eq!(wr_part(ibv::QPT_UC, ibv::WR_BIND_MW), Ok(Bind));
        assert_eq!(wr_part(ibv::QPT_UD, ibv::WR_BIND_MW), Err(Errno::EINVAL));
        assert_eq!(
            wr_part(ibv::QPT_XRC_RECV, ibv::WR_BIND_MW),
            Err(Errno::EINVAL)
        );
        // An XRC send QP reads the union as RC does, binds included; atomic
        // write (15) and flush (14, rdma-core 45) are the kernel's to
        // refuse, as unknown opcodes are on RC.
        let xrc = |op| wr_part(ibv::QPT_XRC_SEND, op);
        for op in 0..16 {
            assert_eq!(xrc(op), rc(op), "opcode {op}");
        }
        assert_eq!(xrc(ibv::WR_BIND_MW), Ok(Bind));
        // A raw packet QP sends frames: `IBV_WR_SEND` reads no member (not
        // even `wr.ud`), and every other opcode is refused here.
        let raw = |op| wr_part(ibv::QPT_RAW_PACKET, op);
        assert_eq!(raw(ibv::WR_SEND), Ok(None));
        for op in (0..=255).chain([u32::MAX]) {
            if op != ibv::WR_SEND {
                assert_eq!(raw(op), Err(Errno::EINVAL), "opcode {op}");
            }
        }
    }

    #[test]
    fn a_raw_wqe_names_no_destination() {
        // Whatever the caller left in `imm_data` and the `wr` union.
        let w = SendWqe {
            wr_id: 9,
            opcode: ibv::WR_SEND,
            send_flags: ibv::SEND_SIGNALED | ibv::SEND_INLINE,
            imm_data: 0x1234_5678,
            num_sge: 1,
            inline_len: 60,
            rkey: 0x77,
            remote_addr: 0xfeed_0000,
            compare_add: 1,
            swap: 2,
            ah_num: 17,
            remote_qpn: 0x00ab_cdef,
            remote_qkey: 0x1111_2222,
            _reserved: 3,
        };
        assert_eq!(
            raw_wqe(w),
            SendWqe {
                wr_id: 9,
                opcode: ibv::WR_SEND,
                send_flags: ibv::SEND_SIGNALED | ibv::SEND_INLINE,
                ..SendWqe::default()
            }
        );
        // In the slot: the frame, and zero where a destination would be.
        let mut sq = send_queue(2);
        let frame = send_wqe(9, ibv::WR_SEND, 0, 0x1234_5678, WrFields::None);
        sq.push(raw_wqe(frame), &[sge(1, 64)], no_copy)
            .expect("room");
        let slot = sq.ring().memory().slot(0);
        assert_eq!((u64_at(slot, 0), u32_at(slot, 8)), (9, ibv::WR_SEND));
        assert_eq!(u32_at(slot, 16), 0, "no immediate data");
        assert_eq!(
            (u32_at(slot, 56), u32_at(slot, 60), u32_at(slot, 64)),
            (0, 0, 0),
            "no AH, remote QPN or Q_Key"
        );
        assert_eq!((u32_at(slot, 20), decode_sge(slot, 72)), (1, sge(1, 64)));
    }

    #[test]
    fn an_xrc_wqe_carries_the_srq_number() {
        let rdma = WrFields::Rdma {
            remote_addr: 0xfeed_0000,
            rkey: 0x77,
        };
        let w = send_wqe(1, ibv::WR_RDMA_WRITE, ibv::SEND_SIGNALED, 0, rdma);
        let x = xrc_wqe(w, 0x00ab_cdef);
        assert_eq!(
            x,
            SendWqe {
                remote_qpn: 0x00ab_cdef,
                ..w
            }
        );
        // It lands where the kernel reads it.
        let mut sq = send_queue(2);
        sq.push(x, &[sge(1, 8)], no_copy).expect("room");
        let slot = sq.ring().memory().slot(0);
        assert_eq!(u32_at(slot, 60), 0x00ab_cdef);
        assert_eq!((u32_at(slot, 28), u64_at(slot, 32)), (0x77, 0xfeed_0000));
        assert_eq!((u32_at(slot, 56), u32_at(slot, 64)), (0, 0), "no UD fields");
    }

    #[test]
    fn inc_rkey_steps_the_low_byte_only() {
        assert_eq!(inc_rkey(0x1234_5600), 0x1234_5601);
        assert_eq!(inc_rkey(0x1234_56fe), 0x1234_56ff);
        assert_eq!(inc_rkey(0x1234_56ff), 0x1234_5600);
        assert_eq!(inc_rkey(u32::MAX), 0xffff_ff00);
        assert_eq!(inc_rkey(0), 1);
    }

    /// A bind of 4 KiB of an MR, with remote write, as both paths see it.
    fn bind(mw_type: u32) -> super::Bind {
        super::Bind {
            mw_type,
            mw_rkey: 0x0000_4217,
            rkey: 0x0000_4218,
            mr_lkey: Some(0x0000_0905),
            addr: 0x7f00_0000_1000,
            length: 4096,
            access: ibv::ACCESS_REMOTE_WRITE,
        }
    }

    #[test]
    fn a_type1_bind_takes_the_next_rkey() {
        // The verb ignores `rkey` and steps the window's own.
        let b = super::Bind {
            rkey: 0xdead_beef,
            ..bind(ibv::MW_TYPE_1)
        };
        assert_eq!(
            bind_fields(BindVia::Verb, &b),
            Ok(WrFields::Bind {
                rkey: 0x0000_4218,
                mr_lkey: 0x905,
                addr: 0x7f00_0000_1000,
                length: 4096,
                access: ibv::ACCESS_REMOTE_WRITE,
                type1: true,
            })
        );
        let wrap = super::Bind {
            mw_rkey: 0x0000_42ff,
            ..b
        };
        assert!(matches!(
            bind_fields(BindVia::Verb, &wrap),
            Ok(WrFields::Bind {
                rkey: 0x0000_4200,
                ..
            })
        ));
    }

    #[test]
    fn a_type2_bind_takes_the_callers_rkey() {
        assert_eq!(
            bind_fields(BindVia::WorkRequest, &bind(ibv::MW_TYPE_2)),
            Ok(WrFields::Bind {
                rkey: 0x0000_4218,
                mr_lkey: 0x905,
                addr: 0x7f00_0000_1000,
                length: 4096,
                access: ibv::ACCESS_REMOTE_WRITE,
                type1: false,
            })
        );
        // Any key byte will do, even the current one (the kernel refuses
        // that one: `mw_rkey` may be stale after earlier type 2 binds).
        for rkey in [0x0000_4200, 0x0000_42ff, 0x0000_4217] {
            let b = super::Bind {
                rkey,
                ..bind(ibv::MW_TYPE_2)
            };
            assert!(bind_fields(BindVia::WorkRequest, &b).is_ok(), "{rkey:#x}");
        }
        // Zero-based windows are a type 2 feature.
        let zero_based = super::Bind {
            access: ibv::ACCESS_ZERO_BASED | ibv::ACCESS_REMOTE_READ,
            ..bind(ibv::MW_TYPE_2)
        };
        assert!(bind_fields(BindVia::WorkRequest, &zero_based).is_ok());
    }

    #[test]
    fn binds_the_provider_refuses() {
        let einval = Err(Errno::EINVAL);
        // Each window type has its own path; unknown types have none.
        assert_eq!(
            bind_fields(BindVia::WorkRequest, &bind(ibv::MW_TYPE_1)),
            einval
        );
        assert_eq!(bind_fields(BindVia::Verb, &bind(ibv::MW_TYPE_2)), einval);
        for t in [0, 3, u32::MAX] {
            assert_eq!(bind_fields(BindVia::Verb, &bind(t)), einval, "{t}");
            assert_eq!(bind_fields(BindVia::WorkRequest, &bind(t)), einval, "{t}");
        }
        // No zero-based type 1 windows.
        let zero_based = super::Bind {
            access: ibv::ACCESS_ZERO_BASED,
            ..bind(ibv::MW_TYPE_1)
        };
        assert_eq!(bind_fields(BindVia::Verb, &zero_based), einval);
        // A new rkey that names another window.
        let other = super::Bind {
            rkey: 0x0000_4318,
            ..bind(ibv::MW_TYPE_2)
        };
        assert_eq!(bind_fields(BindVia::WorkRequest, &other), einval);
        // No MR, but a range.
        for via in [BindVia::Verb, BindVia::WorkRequest] {
            let t = match via {
                BindVia::Verb => ibv::MW_TYPE_1,
                BindVia::WorkRequest => ibv::MW_TYPE_2,
            };
            let no_mr = super::Bind {
                mr_lkey: None,
                ..bind(t)
            };
            assert_eq!(bind_fields(via, &no_mr), einval);
        }
    }

    #[test]
    fn an_empty_bind_needs_no_mr() {
        // `ibv_bind_mw` with a zero length unbinds a type 1 window.
        let unbind = super::Bind {
            mr_lkey: None,
            addr: 0,
            length: 0,
            access: 0,
            ..bind(ibv::MW_TYPE_1)
        };
        assert_eq!(
            bind_fields(BindVia::Verb, &unbind),
            Ok(WrFields::Bind {
                rkey: 0x0000_4218,
                mr_lkey: 0,
                addr: 0,
                length: 0,
                access: 0,
                type1: true,
            })
        );
        // Type 2 windows are the kernel's to refuse.
        let empty2 = super::Bind {
            mr_lkey: None,
            length: 0,
            ..bind(ibv::MW_TYPE_2)
        };
        assert!(bind_fields(BindVia::WorkRequest, &empty2).is_ok());
    }

    #[test]
    fn bind_work_requests_carry_no_data() {
        assert_eq!(check_bind_wr(0, 0), Ok(()));
        assert_eq!(check_bind_wr(1, 0), Err(Errno::EINVAL));
        assert_eq!(check_bind_wr(-1, 0), Err(Errno::EINVAL));
        assert_eq!(check_bind_wr(0, 5), Err(Errno::EINVAL));
    }

    #[test]
    fn a_bind_lands_in_the_slot() {
        let mut sq = send_queue(4);
        for (via, t) in [
            (BindVia::Verb, ibv::MW_TYPE_1),
            (BindVia::WorkRequest, ibv::MW_TYPE_2),
        ] {
            let fields = bind_fields(via, &bind(t)).expect("a good bind");
            let wqe = send_wqe(0x77, ibv::WR_BIND_MW, ibv::SEND_SIGNALED, 0, fields);
            sq.push(wqe, &[], no_copy).expect("room");
        }
        assert!(sq.publish());
        for (i, type1_bit) in [BIND_TYPE1, 0].into_iter().enumerate() {
            let slot = sq.ring().memory().slot(i as u32);
            assert_eq!(
                decode_send(slot),
                SendWqe {
                    wr_id: 0x77,
                    opcode: 8,
                    send_flags: 2,
                    imm_data: 0x905,
                    rkey: 0x0000_4218,
                    remote_addr: 0x7f00_0000_1000,
                    compare_add: 4096,
                    swap: 2 | type1_bit,
                    ..SendWqe::default()
                },
                "slot {i}"
            );
            // Bit 32 of `swap`, at byte 48 + 4.
            assert_eq!(u32_at(slot, 52), (type1_bit >> 32) as u32);
        }
    }

    #[test]
    fn send_wqe_fields() {
        let rdma = send_wqe(
            7,
            ibv::WR_RDMA_WRITE_WITH_IMM,
            2,
            0x1234,
            WrFields::Rdma {
                remote_addr: 0xdead_0000,
                rkey: 0x99,
            },
        );
        assert_eq!(
            rdma,
            SendWqe {
                wr_id: 7,
                opcode: ibv::WR_RDMA_WRITE_WITH_IMM,
                send_flags: 2,
                imm_data: 0x1234,
                rkey: 0x99,
                remote_addr: 0xdead_0000,
                ..SendWqe::default()
            }
        );
        let atomic = send_wqe(
            8,
            ibv::WR_ATOMIC_CMP_AND_SWP,
            0,
            0,
            WrFields::Atomic {
                remote_addr: 0x1000,
                compare_add: 1,
                swap: 2,
                rkey: 3,
            },
        );
        assert_eq!(
            (
                atomic.remote_addr,
                atomic.compare_add,
                atomic.swap,
                atomic.rkey
            ),
            (0x1000, 1, 2, 3)
        );
        let inv = send_wqe(9, ibv::WR_LOCAL_INV, 0, 0xabcd, WrFields::None);
        assert_eq!((inv.imm_data, inv.rkey), (0xabcd, 0xabcd));
        // A bind's MR lkey replaces the immediate data.
        let bind = send_wqe(
            10,
            ibv::WR_BIND_MW,
            0,
            0x5555,
            WrFields::Bind {
                rkey: 0x301,
                mr_lkey: 0x44,
                addr: 0x1000,
                length: 0x20,
                access: 0xffff_ffff,
                type1: true,
            },
        );
        assert_eq!(
            (
                bind.rkey,
                bind.imm_data,
                bind.remote_addr,
                bind.compare_add,
                bind.swap
            ),
            (0x301, 0x44, 0x1000, 0x20, 0x1_ffff_ffff)
        );
        let send_inv = send_wqe(9, ibv::WR_SEND_WITH_INV, 0, 0xabcd, WrFields::None);
        assert_eq!((send_inv.imm_data, send_inv.rkey), (0xabcd, 0));
    }

    #[test]
    fn a_send_lands_in_the_slot_with_its_sges() {
        let mut sq = send_queue(4);
        let wqe = send_wqe(
            0x1122_3344_5566_7788,
            ibv::WR_RDMA_WRITE,
            2, // IBV_SEND_SIGNALED
            0,
            WrFields::Rdma {
                remote_addr: 0xfeed_0000,
                rkey: 0x77,
            },
        );
        let sges = [sge(1, 100), sge(2, 200)];
        sq.push(wqe, &sges, no_copy).expect("fits");
        assert!(sq.publish());
        let slot = sq.ring().memory().slot(0);
        assert_eq!(decode_send(slot), SendWqe { num_sge: 2, ..wqe });
        assert_eq!(decode_sge(slot, 72), sges[0]);
        assert_eq!(decode_sge(slot, 88), sges[1]);
        assert_eq!(*sq.ring().memory().producer_stores.borrow(), [1]);
    }

    #[test]
    fn ud_fields_land_in_the_slot() {
        let mut sq = send_queue(4);
        let wqe = send_wqe(
            5,
            ibv::WR_SEND_WITH_IMM,
            0,
            0x0a0b_0c0d,
            WrFields::Ud {
                ah_num: 17,
                remote_qpn: 0x00ab_cdef,
                remote_qkey: 0x1111_2222,
            },
        );
        sq.push(wqe, &[sge(0, 64)], no_copy).expect("fits");
        let w = decode_send(sq.ring().memory().slot(0));
        assert_eq!(
            (w.ah_num, w.remote_qpn, w.remote_qkey, w.imm_data, w.num_sge),
            (17, 0x00ab_cdef, 0x1111_2222, 0x0a0b_0c0d, 1)
        );
        assert_eq!((w.remote_addr, w.rkey, w._reserved), (0, 0, 0));
    }

    #[test]
    fn too_many_sges_are_refused() {
        let mut sq = send_queue(4);
        let wqe = send_wqe(1, ibv::WR_SEND, 0, 0, WrFields::None);
        let sges = [sge(0, 1), sge(1, 1), sge(2, 1)];
        assert_eq!(sq.push(wqe, &sges, no_copy), Err(Errno::EINVAL));
        let mut rq = recv_queue(4, 3);
        let four = [sge(0, 1), sge(1, 1), sge(2, 1), sge(3, 1)];
        assert_eq!(rq.push(1, &four), Err(Errno::EINVAL));
        rq.push(2, &four[..3]).expect("three fit");
        assert!(sq.ring().memory().writes.is_empty());
        assert_eq!(rq.ring().memory().writes, [0]);
    }

    #[test]
    fn inline_data_is_gathered_into_the_slot() {
        let ring = Producer::new(FakeWq::new(4, 192, 0)).expect("producer");
        let mut sq = SendQueue::new(ring, 3, 100).expect("limits fit");
        let wqe = send_wqe(3, ibv::WR_SEND, ibv::SEND_INLINE, 0, WrFields::None);
        // An empty SGE in the middle is skipped, not copied.
        let sges = [sge(1, 60), sge(9, 0), sge(2, 40)];
        sq.push(wqe, &sges, fake_copy).expect("100 bytes fit");
        let slot = sq.ring().memory().slot(0);
        let w = decode_send(slot);
        assert_eq!(
            (w.num_sge, w.inline_len, w.send_flags),
            (0, 100, ibv::SEND_INLINE)
        );
        assert_eq!(slot[72..132], [1; 60]);
        assert_eq!(slot[132..172], [2; 40]);
    }

    #[test]
    fn inline_length_is_limited() {
        let mut sq = send_queue(4);
        let wqe = send_wqe(3, ibv::WR_SEND, ibv::SEND_INLINE, 0, WrFields::None);
        assert_eq!(
            sq.push(wqe, &[sge(1, 60), sge(2, 41)], fake_copy),
            Err(Errno::EINVAL)
        );
        // Lengths whose sum overflows 32 bits.
        assert_eq!(
            sq.push(wqe, &[sge(1, u32::MAX), sge(2, 2)], fake_copy),
            Err(Errno::EINVAL)
        );
        // The SGE limit holds for inline sends too.
        let three = [sge(1, 1), sge(2, 1), sge(3, 1)];
        assert_eq!(sq.push(wqe, &three, fake_copy), Err(Errno::EINVAL));
        assert!(sq.ring().memory().writes.is_empty());
        assert_eq!(inline_len(&[sge(1, 60), sge(2, 40)], 100), Ok(100));
        assert_eq!(inline_len(&[], 0), Ok(0));
        // An empty inline send is fine, even with no inline room at all.
        let ring = Producer::new(FakeWq::new(2, 128, 0)).expect("producer");
        let mut no_inline = SendQueue::new(ring, 1, 0).expect("fits");
        no_inline
            .push(wqe, &[sge(1, 0)], fake_copy)
            .expect("zero bytes");
        assert_eq!(
            no_inline.push(wqe, &[sge(1, 1)], fake_copy),
            Err(Errno::EINVAL)
        );
    }

    #[test]
    fn the_send_ring_fills_and_wraps() {
        let mut sq = send_queue(2);
        let wqe = |id| send_wqe(id, ibv::WR_SEND, 0, 0, WrFields::None);
        sq.push(wqe(1), &[], no_copy).expect("room");
        sq.push(wqe(2), &[], no_copy).expect("room");
        assert_eq!(sq.push(wqe(3), &[], no_copy), Err(Errno::ENOMEM));
        assert!(sq.publish());
        sq.ring().memory().consume(1);
        sq.push(wqe(3), &[sge(4, 8)], no_copy)
            .expect("one slot free");
        assert_eq!(decode_send(sq.ring().memory().slot(2)).wr_id, 3);
        assert_eq!(decode_send(sq.ring().memory().slot(1)).wr_id, 2);
        assert_eq!(sq.push(wqe(4), &[], no_copy), Err(Errno::ENOMEM));
    }

    #[test]
    fn a_receive_lands_in_the_slot() {
        let mut rq = recv_queue(2, 3);
        let sges = [sge(1, 4096), sge(2, 8)];
        rq.push(0xabc, &sges).expect("fits");
        rq.push(0xdef, &[]).expect("fits");
        assert_eq!(rq.push(0x123, &[]), Err(Errno::ENOMEM));
        assert!(rq.publish());
        let m = rq.ring().memory();
        let s0 = m.slot(0);
        assert_eq!(
            (u64_at(s0, 0), u32_at(s0, 8), u32_at(s0, 12)),
            (0xabc, 2, 0)
        );
        assert_eq!(decode_sge(s0, 16), sges[0]);
        assert_eq!(decode_sge(s0, 32), sges[1]);
        let s1 = m.slot(1);
        assert_eq!((u64_at(s1, 0), u32_at(s1, 8)), (0xdef, 0));
        assert_eq!(*m.producer_stores.borrow(), [2]);
    }

    /// A send queue as [`send_queue`], with the `ibv_wr_*` interface.
    fn wr_queue(num_slots: u32, dest: Dest) -> SendQueue<FakeWq> {
        let mut sq = send_queue(num_slots);
        sq.enable_wr(dest).expect("room for one work request");
        sq
    }

    /// A buffer of `length` bytes, all `n`, in a fake address space.
    fn data_buf(n: u8, length: usize) -> ibv::DataBuf {
        ibv::DataBuf {
            addr: core::ptr::without_provenance_mut(usize::from(n) << 12),
            length,
        }
    }

    /// Copies inline data from the fake address space of [`data_buf`].
    fn copy_buf(d: &ibv::DataBuf, dst: &mut [u8]) {
        assert_eq!(dst.len(), d.length);
        dst.fill((d.addr.addr() >> 12) as u8);
    }

    fn no_buf(_: &ibv::DataBuf, _: &mut [u8]) {
        panic!("nothing should be copied");
    }

    #[test]
    fn a_batch_lands_in_the_ring_and_publishes_once() {
        let mut sq = wr_queue(4, Dest::Connected);
        sq.wr_start();
        let send = send_wqe(1, ibv::WR_SEND, ibv::SEND_SIGNALED, 0, WrFields::None);
        sq.wr_build(Ok(send));
        sq.wr_set_sge(sge(1, 100));
        let write = send_wqe(
            2,
            ibv::WR_RDMA_WRITE_WITH_IMM,
            0,
            0x0102_0304,
            WrFields::Rdma {
                remote_addr: 0xfeed_0000,
                rkey: 0x77,
            },
        );
        sq.wr_build(Ok(write));
        sq.wr_set_sge_list(&[sge(2, 8), sge(3, 9)]);
        // Nothing is visible until the batch completes.
        assert!(sq.ring().memory().producer_stores.borrow().is_empty());
        assert_eq!(sq.wr_complete(), Ok(true));
        assert_eq!(*sq.ring().memory().producer_stores.borrow(), [2]);
        let m = sq.ring().memory();
        assert_eq!(decode_send(m.slot(0)), SendWqe { num_sge: 1, ..send });
        assert_eq!(decode_sge(m.slot(0), 72), sge(1, 100));
        assert_eq!(
            decode_send(m.slot(1)),
            SendWqe {
                num_sge: 2,
                ..write
            }
        );
        assert_eq!(decode_sge(m.slot(1), 72), sge(2, 8));
        assert_eq!(decode_sge(m.slot(1), 88), sge(3, 9));
        // An empty batch publishes nothing.
        sq.wr_start();
        assert_eq!(sq.wr_complete(), Ok(false));
        assert_eq!(sq.ring().memory().producer_stores.borrow().len(), 1);
    }

    #[test]
    fn setters_apply_to_the_last_builder_in_any_order() {
        let mut sq = wr_queue(4, Dest::Ud);
        sq.wr_start();
        let wqe = send_wqe(5, ibv::WR_SEND_WITH_IMM, 0, 0xabcd, WrFields::None);
        sq.wr_build(Ok(wqe));
        sq.wr_set_sge(sge(1, 64));
        sq.wr_set_ud(17, 0x00ab_cdef, 0x1111_2222);
        sq.wr_build(Ok(SendWqe { wr_id: 6, ..wqe }));
        sq.wr_set_ud(18, 0x12, 0x34);
        // A zero-length SGE is no SGE.
        sq.wr_set_sge(sge(2, 0));
        assert_eq!(sq.wr_complete(), Ok(true));
        let m = sq.ring().memory();
        let (w0, w1) = (decode_send(m.slot(0)), decode_send(m.slot(1)));
        assert_eq!(
            (
                w0.wr_id,
                w0.ah_num,
                w0.remote_qpn,
                w0.remote_qkey,
                w0.num_sge
            ),
            (5, 17, 0x00ab_cdef, 0x1111_2222, 1)
        );
        assert_eq!(w0.imm_data, 0xabcd);
        assert_eq!(
            (
                w1.wr_id,
                w1.ah_num,
                w1.remote_qpn,
                w1.remote_qkey,
                w1.num_sge
            ),
            (6, 18, 0x12, 0x34, 0)
        );
    }

    #[test]
    fn inline_data_is_copied_at_once() {
        let mut sq = wr_queue(4, Dest::Connected);
        sq.wr_start();
        // `IBV_SEND_INLINE` in `wr_flags` does not matter: the setter does.
        let wqe = send_wqe(3, ibv::WR_SEND, ibv::SEND_INLINE, 0, WrFields::None);
        sq.wr_build(Ok(wqe));
        // The bytes are copied by the setter: the caller may reuse its
        // buffers right away.
        let mut copied = 0;
        let bufs = [data_buf(1, 60), data_buf(7, 0), data_buf(2, 40)];
        sq.wr_set_inline(&bufs, |d, dst| {
            copied += 1;
            copy_buf(d, dst);
        });
        assert_eq!(copied, 2, "empty buffers are skipped");
        sq.wr_build(Ok(SendWqe { wr_id: 4, ..wqe }));
        sq.wr_set_sge(sge(5, 10));
        assert_eq!(sq.wr_complete(), Ok(true));
        let m = sq.ring().memory();
        let w = decode_send(m.slot(0));
        assert_eq!(
            (w.num_sge, w.inline_len, w.send_flags),
            (0, 100, ibv::SEND_INLINE)
        );
        assert_eq!(m.slot(0)[72..132], [1; 60]);
        assert_eq!(m.slot(0)[132..172], [2; 40]);
        let w = decode_send(m.slot(1));
        assert_eq!((w.num_sge, w.inline_len, w.send_flags), (1, 0, 0));
    }

    #[test]
    fn a_failed_batch_publishes_nothing() {
        let fails = |f: &dyn Fn(&mut SendQueue<FakeWq>)| {
            let mut sq = wr_queue(4, Dest::Connected);
            sq.wr_start();
            sq.wr_build(Ok(send_wqe(1, ibv::WR_SEND, 0, 0, WrFields::None)));
            sq.wr_set_sge(sge(1, 8));
            f(&mut sq);
            sq.wr_build(Ok(send_wqe(9, ibv::WR_SEND, 0, 0, WrFields::None)));
            let result = sq.wr_complete();
            assert!(sq.ring().memory().producer_stores.borrow().is_empty());
            // The slots are free again, from the first.
            sq.wr_start();
            sq.wr_build(Ok(send_wqe(2, ibv::WR_SEND, 0, 0, WrFields::None)));
            assert_eq!(sq.wr_complete(), Ok(true));
            assert_eq!(decode_send(sq.ring().memory().slot(0)).wr_id, 2);
            result
        };
        let einval = Err(Errno::EINVAL);
        // Too many SGEs; too many inline bytes (101, or beyond `usize`).
        let three = [sge(1, 1), sge(2, 1), sge(3, 1)];
        assert_eq!(fails(&|sq| sq.wr_set_sge_list(&three)), einval);
        assert_eq!(
            fails(&|sq| sq.wr_set_inline(&[data_buf(1, 60), data_buf(2, 41)], no_buf)),
            einval
        );
        let (one, huge) = (data_buf(1, 1), data_buf(2, usize::MAX));
        assert_eq!(fails(&|sq| sq.wr_set_inline(&[one, huge], no_buf)), einval);
        // A builder's own error.
        assert_eq!(
            fails(&|sq| sq.wr_build(Err(Errno::from_raw(1)))),
            Err(Errno::from_raw(1))
        );
        // A UD destination on an RC QP.
        assert_eq!(fails(&|sq| sq.wr_set_ud(1, 2, 3)), einval);
        // The first error wins.
        let two = |sq: &mut SendQueue<FakeWq>| {
            sq.wr_fail(Errno::from_raw(28));
            sq.wr_fail(Errno::EINVAL);
        };
        assert_eq!(fails(&two), Err(Errno::from_raw(28)));
    }

    #[test]
    fn setters_need_a_builder() {
        let mut sq = wr_queue(4, Dest::Connected);
        sq.wr_start();
        sq.wr_set_sge(sge(1, 8));
        assert_eq!(sq.wr_complete(), Err(Errno::EINVAL));
        // After a failed builder too.
        sq.wr_start();
        sq.wr_build(Err(Errno::EINVAL));
        sq.wr_set_sge(sge(1, 8));
        assert_eq!(sq.wr_complete(), Err(Errno::EINVAL));
        assert!(sq.ring().memory().writes.is_empty());
    }

    #[test]
    fn ud_work_requests_need_a_destination() {
        let mut sq = wr_queue(4, Dest::Ud);
        sq.wr_start();
        sq.wr_build(Ok(send_wqe(1, ibv::WR_SEND, 0, 0, WrFields::None)));
        sq.wr_set_sge(sge(1, 8));
        assert_eq!(sq.wr_complete(), Err(Errno::EINVAL));
        assert!(sq.ring().memory().writes.is_empty());
    }

    #[test]
    fn xrc_work_requests_need_an_srq() {
        let send = |id| send_wqe(id, ibv::WR_SEND, 0, 0, WrFields::None);
        let mut sq = wr_queue(4, Dest::XrcSrq);
        sq.wr_start();
        sq.wr_build(Ok(send(1)));
        sq.wr_set_xrc_srqn(0x12);
        sq.wr_set_sge(sge(1, 8));
        // Setters apply in any order.
        sq.wr_build(Ok(send(2)));
        sq.wr_set_sge(sge(2, 8));
        sq.wr_set_xrc_srqn(0x34);
        // Local operations need no SRQ.
        sq.wr_build(Ok(send_wqe(3, ibv::WR_LOCAL_INV, 0, 0x99, WrFields::None)));
        assert_eq!(sq.wr_complete(), Ok(true));
        let m = sq.ring().memory();
        let srqns: Vec<u32> = (0..3).map(|i| decode_send(m.slot(i)).remote_qpn).collect();
        assert_eq!(srqns, [0x12, 0x34, 0]);
        // A send without one fails the batch.
        sq.wr_start();
        sq.wr_build(Ok(send(4)));
        sq.wr_set_xrc_srqn(0x56);
        sq.wr_build(Ok(send(5)));
        assert_eq!(sq.wr_complete(), Err(Errno::EINVAL));
        assert_eq!(*sq.ring().memory().producer_stores.borrow(), [3]);
        // No UD address on an XRC QP, and no SRQ on an RC or UD QP.
        sq.wr_start();
        sq.wr_build(Ok(send(6)));
        sq.wr_set_xrc_srqn(0x56);
        sq.wr_set_ud(1, 2, 3);
        assert_eq!(sq.wr_complete(), Err(Errno::EINVAL));
        for dest in [Dest::Connected, Dest::Ud] {
            let mut sq = wr_queue(4, dest);
            sq.wr_start();
            sq.wr_build(Ok(send(7)));
            sq.wr_set_ud(1, 2, 3);
            sq.wr_set_xrc_srqn(0x56);
            assert_eq!(sq.wr_complete(), Err(Errno::EINVAL), "{dest:?}");
            assert!(sq.ring().memory().writes.is_empty());
        }
    }

    #[test]
    fn destinations_follow_the_qp_type() {
        assert_eq!(Dest::of(ibv::QPT_RC), Dest::Connected);
        assert_eq!(Dest::of(ibv::QPT_UC), Dest::Connected);
        assert_eq!(Dest::of(ibv::QPT_UD), Dest::Ud);
        assert_eq!(Dest::of(ibv::QPT_XRC_SEND), Dest::XrcSrq);
        assert_eq!(Dest::of(ibv::QPT_RAW_PACKET), Dest::Frame);
        let needs = |d: Dest, op| d.needed_by(op);
        assert!(!needs(Dest::Connected, ibv::WR_SEND));
        assert!(!needs(Dest::Frame, ibv::WR_SEND));
        assert!(needs(Dest::Ud, ibv::WR_SEND));
        assert!(needs(Dest::XrcSrq, ibv::WR_RDMA_READ));
        assert!(needs(Dest::XrcSrq, ibv::WR_ATOMIC_CMP_AND_SWP));
        assert!(!needs(Dest::XrcSrq, ibv::WR_LOCAL_INV));
        assert!(!needs(Dest::XrcSrq, ibv::WR_BIND_MW));
    }

    #[test]
    fn raw_work_requests_need_no_destination_and_take_none() {
        let send = |id| send_wqe(id, ibv::WR_SEND, 0, 0, WrFields::None);
        let mut sq = wr_queue(4, Dest::Frame);
        sq.wr_start();
        sq.wr_build(Ok(send(1)));
        sq.wr_set_sge(sge(1, 60));
        sq.wr_build(Ok(send(2)));
        sq.wr_set_inline(&[data_buf(3, 14), data_buf(4, 46)], copy_buf);
        assert_eq!(sq.wr_complete(), Ok(true));
        let m = sq.ring().memory();
        let w = decode_send(m.slot(0));
        assert_eq!((w.wr_id, w.num_sge, w.inline_len), (1, 1, 0));
        assert_eq!((w.ah_num, w.remote_qpn, w.remote_qkey), (0, 0, 0));
        let w = decode_send(m.slot(1));
        assert_eq!((w.wr_id, w.num_sge, w.inline_len), (2, 0, 60));
        assert_eq!(m.slot(1)[72..86], [3; 14], "the frame's MAC header");
        // A UD address or an XRC SRQ fails the batch.
        for ud in [true, false] {
            sq.wr_start();
            sq.wr_build(Ok(send(5)));
            sq.wr_set_sge(sge(1, 60));
            if ud {
                sq.wr_set_ud(1, 2, 3);
            } else {
                sq.wr_set_xrc_srqn(4);
            }
            assert_eq!(sq.wr_complete(), Err(Errno::EINVAL), "UD address: {ud}");
        }
        assert_eq!(*sq.ring().memory().producer_stores.borrow(), [2]);
    }

    #[test]
    fn a_full_ring_fails_the_batch() {
        let mut sq = wr_queue(2, Dest::Connected);
        sq.wr_start();
        for id in 0..3 {
            sq.wr_build(Ok(send_wqe(id, ibv::WR_SEND, 0, 0, WrFields::None)));
        }
        assert_eq!(sq.wr_complete(), Err(Errno::ENOMEM));
        assert!(sq.ring().memory().producer_stores.borrow().is_empty());
        // Two still fit.
        sq.wr_start();
        for id in 0..2 {
            sq.wr_build(Ok(send_wqe(id, ibv::WR_SEND, 0, 0, WrFields::None)));
        }
        assert_eq!(sq.wr_complete(), Ok(true));
    }

    #[test]
    fn abort_drops_the_batch() {
        let mut sq = wr_queue(4, Dest::Connected);
        sq.wr_start();
        sq.wr_build(Ok(send_wqe(1, ibv::WR_SEND, 0, 0, WrFields::None)));
        sq.wr_build(Ok(send_wqe(2, ibv::WR_SEND, 0, 0, WrFields::None)));
        sq.wr_fail(Errno::EINVAL);
        sq.wr_abort();
        // The error went with it.
        sq.wr_start();
        sq.wr_build(Ok(send_wqe(3, ibv::WR_SEND, 0, 0, WrFields::None)));
        assert_eq!(sq.wr_complete(), Ok(true));
        assert_eq!(*sq.ring().memory().producer_stores.borrow(), [1]);
        assert_eq!(decode_send(sq.ring().memory().slot(0)).wr_id, 3);
    }

    #[test]
    fn a_queue_without_the_interface_refuses_it() {
        let mut sq = send_queue(4);
        sq.wr_start();
        sq.wr_build(Ok(send_wqe(1, ibv::WR_SEND, 0, 0, WrFields::None)));
        sq.wr_set_sge(sge(1, 8));
        assert_eq!(sq.wr_complete(), Err(Errno::EINVAL));
        assert!(sq.ring().memory().writes.is_empty());
    }

    #[test]
    fn a_bind_builder_needs_no_data() {
        let mut sq = wr_queue(4, Dest::Connected);
        sq.wr_start();
        let fields = bind_fields(BindVia::WorkRequest, &bind(ibv::MW_TYPE_2));
        let wqe = fields.map(|f| send_wqe(7, ibv::WR_BIND_MW, ibv::SEND_SIGNALED, 0, f));
        sq.wr_build(wqe);
        assert_eq!(sq.wr_complete(), Ok(true));
        let w = decode_send(sq.ring().memory().slot(0));
        assert_eq!(
            (
                w.opcode,
                w.rkey,
                w.imm_data,
                w.swap,
                w.num_sge,
                w.inline_len
            ),
            (ibv::WR_BIND_MW, 0x4218, 0x905, 2, 0, 0)
        );
    }

    #[test]
    fn granted_limits_must_fit_the_slot() {
        let ring = |size| Producer::new(FakeWq::new(2, size, 0)).expect("producer");
        // 128-byte send slots: 72 + 3 * 16 = 120 fits, 4 SGEs do not;
        // 56 inline bytes fit, 57 do not.
        assert!(SendQueue::new(ring(128), 3, 56).is_ok());
        assert_eq!(
            SendQueue::new(ring(128), 4, 0).map(|_| ()),
            Err(Errno::EPROTO)
        );
        assert_eq!(
            SendQueue::new(ring(128), 0, 57).map(|_| ()),
            Err(Errno::EPROTO)
        );
        assert_eq!(
            SendQueue::new(ring(128), u32::MAX, 0).map(|_| ()),
            Err(Errno::EPROTO)
        );
        // 64-byte receive slots: 16 + 3 * 16 fits, 4 SGEs do not.
        assert!(RecvQueue::new(ring(64), 3).is_ok());
        assert_eq!(RecvQueue::new(ring(64), 4).map(|_| ()), Err(Errno::EPROTO));
        assert_eq!(
            RecvQueue::new(ring(64), u32::MAX).map(|_| ()),
            Err(Errno::EPROTO)
        );
    }
}
