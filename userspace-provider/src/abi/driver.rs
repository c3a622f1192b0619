// SPDX-License-Identifier: GPL-2.0 OR MIT

//! roxe's command responses: the uverbs core response followed by roxe's
//! driver part from `roxe_uapi`, as rdma-core's `DECLARE_DRV_CMD` lays them
//! out (`struct { struct ib_uverbs_..._resp ibv_resp; <driver resp>; }`).
//!
//! libibverbs sends the kernel everything after `ibv_resp` as the driver
//! output buffer (`UVERBS_ATTR_UHW_OUT`, or the tail of a `write()`
//! response), so the kernel sees a driver `udata.outlen` of exactly
//! `size_of::<roxe_uapi::...>()`. Requests work the same way: most are
//! passed with their core size, so `udata.inlen` is 0; the two that carry
//! driver input ([`ModifySrq`], [`CreateRssQp`]) put it right after the
//! core command.

use super::uverbs;

/// Response of `ibv_cmd_create_cq`.
#[repr(C)]
#[derive(Default)]
pub struct CreateCqResp {
    /// `ibv_resp`.
    pub ibv_resp: uverbs::CreateCqResp,
    /// roxe's part: where to map the ring.
    pub drv: roxe_uapi::CreateCqResp,
}

/// Response of `ibv_cmd_create_cq_ex`.
#[repr(C)]
#[derive(Default)]
pub struct CreateCqExResp {
    /// `ibv_resp`.
    pub ibv_resp: uverbs::ExCreateCqResp,
    /// roxe's part: where to map the ring.
    pub drv: roxe_uapi::CreateCqResp,
}

/// Response of `ibv_cmd_resize_cq`.
#[repr(C)]
#[derive(Default)]
pub struct ResizeCqResp {
    /// `ibv_resp`.
    pub ibv_resp: uverbs::ResizeCqResp,
    /// roxe's part: where to map the new ring.
    pub drv: roxe_uapi::CreateCqResp,
}

/// Request of `ibv_cmd_modify_srq`: the core command, then roxe's input,
/// which the kernel sees as the driver `udata` input.
#[repr(C)]
#[derive(Default)]
pub struct ModifySrq {
    /// `ibv_cmd`.
    pub ibv_cmd: super::ibv::ModifySrq,
    /// roxe's part: where the kernel writes a resized ring's description.
    pub drv: roxe_uapi::ModifySrqCmd,
}

/// Response of `ibv_cmd_create_ah`.
#[repr(C)]
#[derive(Default)]
pub struct CreateAhResp {
    /// `ibv_resp`.
    pub ibv_resp: uverbs::CreateAhResp,
    /// roxe's part: the AH number for UD work requests.
    pub drv: roxe_uapi::CreateAhResp,
}

/// Response of `ibv_cmd_create_qp` and `ibv_cmd_create_qp_ex`.
#[repr(C)]
#[derive(Default)]
pub struct CreateQpResp {
    /// `ibv_resp`.
    pub ibv_resp: uverbs::CreateQpResp,
    /// roxe's part: where to map the send and receive rings.
    pub drv: roxe_uapi::CreateQpResp,
}

/// Response of `ibv_cmd_create_srq`.
#[repr(C)]
#[derive(Default)]
pub struct CreateSrqResp {
    /// `ibv_resp`.
    pub ibv_resp: uverbs::CreateSrqResp,
    /// roxe's part: where to map the ring, and the SRQ number.
    pub drv: roxe_uapi::CreateSrqResp,
}

/// Request of `ibv_cmd_create_qp_ex2` for an RSS QP: the core command,
/// then roxe's hash configuration, which the kernel sees as the driver
/// `udata` input.
#[repr(C)]
#[derive(Default)]
pub struct CreateRssQp {
    /// `ibv_cmd`.
    pub ibv_cmd: super::ibv::CreateQpEx,
    /// roxe's part: the hash function, fields and key.
    pub drv: roxe_uapi::CreateRssQpCmd,
}

/// Response of `ibv_cmd_create_qp_ex2`.
#[repr(C)]
#[derive(Default)]
pub struct CreateQpExResp {
    /// `ibv_resp`.
    pub ibv_resp: uverbs::ExCreateQpResp,
    /// roxe's part: the rings, both absent for an RSS QP.
    pub drv: roxe_uapi::CreateQpResp,
}

/// Response of `ibv_cmd_create_wq`.
#[repr(C)]
#[derive(Default)]
pub struct CreateWqResp {
    /// `ibv_resp`.
    pub ibv_resp: uverbs::ExCreateWqResp,
    /// roxe's part: where to map the receive ring.
    pub drv: roxe_uapi::CreateWqResp,
}
