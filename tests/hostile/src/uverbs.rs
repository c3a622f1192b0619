//! The uverbs `write()` command interface, spoken directly: every command
//! is laid out here byte by byte, following Linux 6.12's
//! `include/uapi/rdma/ib_user_verbs.h`, with roxe's driver data (the
//! `roxe-uapi` structs) after the core response.
//!
//! Most are legacy commands (`struct ib_uverbs_cmd_hdr`). For them the
//! kernel (`ib_uverbs_write` in `uverbs_main.c`) counts `in_words` and
//! `out_words` in 4-byte words, `in_words` including the header. Of a
//! command that takes driver data, what follows the core request struct is
//! the driver's input, and the driver's response starts right after the
//! core response struct at the `response` address.
//!
//! Receive WQs, their indirection tables and RSS QPs exist only as
//! extended commands (`IB_USER_VERBS_CMD_FLAG_EXTENDED`, then `struct
//! ib_uverbs_ex_cmd_hdr`). They count in 8-byte words, without the
//! headers, and give the core and the driver separate word counts for
//! input and for output ([`sys::command_ex`]).

use crate::abi;
use crate::errno::Errno;
use crate::sys::{self, Mapping, Share};
use roxe_uapi::{CreateCqResp, CreateQpResp, CreateSrqResp, CreateWqResp};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::Path;

/// `enum ib_uverbs_write_cmds`.
pub mod cmd {
    pub const GET_CONTEXT: u32 = 0;
    pub const QUERY_DEVICE: u32 = 1;
    pub const ALLOC_PD: u32 = 3;
    pub const DEALLOC_PD: u32 = 4;
    pub const CREATE_AH: u32 = 5;
    pub const DESTROY_AH: u32 = 8;
    pub const REG_MR: u32 = 9;
    pub const REREG_MR: u32 = 11;
    pub const DEREG_MR: u32 = 13;
    pub const ALLOC_MW: u32 = 14;
    pub const DEALLOC_MW: u32 = 16;
    pub const CREATE_COMP_CHANNEL: u32 = 17;
    pub const CREATE_CQ: u32 = 18;
    pub const RESIZE_CQ: u32 = 19;
    pub const DESTROY_CQ: u32 = 20;
    pub const REQ_NOTIFY_CQ: u32 = 23;
    pub const CREATE_QP: u32 = 24;
    pub const QUERY_QP: u32 = 25;
    pub const MODIFY_QP: u32 = 26;
    pub const DESTROY_QP: u32 = 27;
    pub const POST_SEND: u32 = 28;
    pub const CREATE_SRQ: u32 = 32;
    pub const MODIFY_SRQ: u32 = 33;
    pub const QUERY_SRQ: u32 = 34;
    pub const DESTROY_SRQ: u32 = 35;
}

/// `enum ib_uverbs_write_cmds` of the extended commands (sent with
/// `IB_USER_VERBS_CMD_FLAG_EXTENDED`).
pub mod ex_cmd {
    pub const CREATE_QP: u32 = 24;
    pub const CREATE_WQ: u32 = 52;
    pub const MODIFY_WQ: u32 = 53;
    pub const DESTROY_WQ: u32 = 54;
    pub const CREATE_RWQ_IND_TBL: u32 = 55;
    pub const DESTROY_RWQ_IND_TBL: u32 = 56;
}

/// Core response sizes (`sizeof(struct ib_uverbs_*_resp)`): the driver's
/// response starts at these offsets.
const GET_CONTEXT_RESP: usize = 8;
const QUERY_DEVICE_RESP: usize = 176;
const ALLOC_PD_RESP: usize = 4;
const REG_MR_RESP: usize = 12;
const REREG_MR_RESP: usize = 8;
const ALLOC_MW_RESP: usize = 8;
const CREATE_AH_RESP: usize = 4;
const CREATE_COMP_CHANNEL_RESP: usize = 4;
const CREATE_CQ_RESP: usize = 8;
const RESIZE_CQ_RESP: usize = 8;
const DESTROY_CQ_RESP: usize = 8;
const CREATE_QP_RESP: usize = 32;
const QUERY_QP_RESP: usize = 128;
const DESTROY_QP_RESP: usize = 4;
const POST_SEND_RESP: usize = 4;
const CREATE_SRQ_RESP: usize = 16;
const QUERY_SRQ_RESP: usize = 16;
const DESTROY_SRQ_RESP: usize = 4;
/// `sizeof(struct ib_uverbs_ex_create_qp_resp)`.
const EX_CREATE_QP_RESP: usize = 40;
/// `sizeof(struct ib_uverbs_ex_create_wq_resp)`.
const EX_CREATE_WQ_RESP: usize = 24;
/// `sizeof(struct ib_uverbs_ex_destroy_wq_resp)`.
const EX_DESTROY_WQ_RESP: usize = 16;
/// `sizeof(struct ib_uverbs_ex_create_rwq_ind_table_resp)`.
const EX_CREATE_RWQ_IND_TBL_RESP: usize = 16;
/// `sizeof(struct ib_uverbs_send_wr)`.
const UVERBS_SEND_WR: u32 = 56;
/// `sizeof(struct ib_uverbs_async_event_desc)`.
const ASYNC_EVENT_DESC: usize = 16;
/// `sizeof(struct ib_uverbs_comp_event_desc)`.
const COMP_EVENT_DESC: usize = 8;

/// `enum ib_qp_type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QpType {
    Rc = 2,
    Uc = 3,
    Ud = 4,
    /// `IB_QPT_RAW_PACKET` (needs `CAP_NET_RAW`).
    RawPacket = 8,
}

/// `enum ib_qp_state`.
pub mod state {
    pub const RESET: u8 = 0;
    pub const INIT: u8 = 1;
    pub const RTR: u8 = 2;
    pub const RTS: u8 = 3;
    pub const ERR: u8 = 6;

    /// The state's name, for messages.
    pub fn name(s: u8) -> &'static str {
        ["RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"]
            .get(usize::from(s))
            .copied()
            .unwrap_or("?")
    }
}

/// `enum ib_qp_attr_mask`.
pub mod mask {
    pub const STATE: u32 = 1 << 0;
    pub const ACCESS_FLAGS: u32 = 1 << 3;
    pub const PKEY_INDEX: u32 = 1 << 4;
    pub const PORT: u32 = 1 << 5;
    pub const QKEY: u32 = 1 << 6;
    pub const AV: u32 = 1 << 7;
    pub const PATH_MTU: u32 = 1 << 8;
    pub const TIMEOUT: u32 = 1 << 9;
    pub const RETRY_CNT: u32 = 1 << 10;
    pub const RNR_RETRY: u32 = 1 << 11;
    pub const RQ_PSN: u32 = 1 << 12;
    pub const MAX_QP_RD_ATOMIC: u32 = 1 << 13;
    pub const MIN_RNR_TIMER: u32 = 1 << 15;
    pub const SQ_PSN: u32 = 1 << 16;
    pub const MAX_DEST_RD_ATOMIC: u32 = 1 << 17;
    pub const DEST_QPN: u32 = 1 << 20;
}

/// `enum ib_srq_attr_mask`.
pub mod srq_mask {
    /// `IB_SRQ_MAX_WR`: resize.
    pub const MAX_WR: u32 = 1 << 0;
    /// `IB_SRQ_LIMIT`: arm the limit event.
    pub const LIMIT: u32 = 1 << 1;
}

/// `enum ib_event_type` values this program waits for.
pub mod event {
    pub const CQ_ERR: u32 = 0;
    pub const QP_FATAL: u32 = 1;

    /// The event's name, for messages.
    pub fn name(e: u32) -> String {
        match e {
            CQ_ERR => "IB_EVENT_CQ_ERR".into(),
            QP_FATAL => "IB_EVENT_QP_FATAL".into(),
            n => format!("event {n}"),
        }
    }
}

/// A request under construction: native-endian fields in ABI order.
#[derive(Default)]
pub struct Req(Vec<u8>);

impl Req {
    pub fn new() -> Req {
        Req(Vec::with_capacity(128))
    }
    pub fn u8(mut self, v: u8) -> Req {
        self.0.push(v);
        self
    }
    pub fn u16(mut self, v: u16) -> Req {
        self.0.extend_from_slice(&v.to_ne_bytes());
        self
    }
    pub fn u32(mut self, v: u32) -> Req {
        self.0.extend_from_slice(&v.to_ne_bytes());
        self
    }
    pub fn u64(mut self, v: u64) -> Req {
        self.0.extend_from_slice(&v.to_ne_bytes());
        self
    }
    pub fn bytes(mut self, v: &[u8]) -> Req {
        self.0.extend_from_slice(v);
        self
    }
    fn done(self, expected: usize) -> Vec<u8> {
        assert_eq!(
            self.0.len(),
            expected,
            "request layout does not match its C struct"
        );
        self.0
    }
}

fn rd_u32(b: &[u8], off: usize) -> u32 {
    u32::from_ne_bytes(b[off..off + 4].try_into().expect("4 bytes"))
}

fn rd_u64(b: &[u8], off: usize) -> u64 {
    u64::from_ne_bytes(b[off..off + 8].try_into().expect("8 bytes"))
}

/// The fields `struct ib_uverbs_create_qp` and `struct
/// ib_uverbs_ex_create_qp` share, after the legacy one's `response`.
fn create_qp_body(a: &QpArgs) -> Vec<u8> {
    Req::new()
        .u64(a.user_handle)
        .u32(a.pd)
        .u32(a.send_cq)
        .u32(a.recv_cq)
        .u32(a.srq.unwrap_or(0))
        .u32(a.max_send_wr)
        .u32(a.max_recv_wr)
        .u32(a.max_send_sge)
        .u32(a.max_recv_sge)
        .u32(a.max_inline_data)
        .u8(0)
        .u8(a.qp_type as u8)
        .u8(u8::from(a.srq.is_some()))
        .u8(0)
        .done(48)
}

/// A QP from a `CREATE_QP` response: `struct ib_uverbs_create_qp_resp`
/// first (also the start of the extended response), roxe's `CreateQpResp`
/// at `driver`.
fn qp_from_resp(resp: &[u8], driver: usize, user_handle: u64) -> Qp {
    Qp {
        handle: rd_u32(resp, 0),
        qpn: rd_u32(resp, 4),
        user_handle,
        caps: QpCaps {
            max_send_wr: rd_u32(resp, 8),
            max_recv_wr: rd_u32(resp, 12),
            max_send_sge: rd_u32(resp, 16),
            max_recv_sge: rd_u32(resp, 20),
            max_inline_data: rd_u32(resp, 24),
        },
        rings: abi::create_qp_resp(&resp[driver..]),
    }
}

/// Device limits from `QUERY_DEVICE`.
#[derive(Clone, Copy, Debug)]
pub struct DeviceCaps {
    pub max_qp_wr: u32,
    pub max_sge: u32,
    pub max_cqe: u32,
    pub max_mr_size: u64,
}

/// A memory region.
#[derive(Clone, Copy, Debug)]
pub struct Mr {
    pub handle: u32,
    pub lkey: u32,
    pub rkey: u32,
}

/// `enum ib_mr_rereg_flags`.
pub mod rereg {
    pub const TRANS: u32 = 1;
    #[allow(dead_code)]
    pub const PD: u32 = 2;
    pub const ACCESS: u32 = 4;
}

/// A memory window as `ALLOC_MW` returned it.
#[derive(Clone, Copy, Debug)]
pub struct Mw {
    pub handle: u32,
    pub rkey: u32,
}

/// An address handle as `CREATE_AH` returned it, with roxe's number for it.
#[derive(Clone, Copy, Debug)]
pub struct Ah {
    pub handle: u32,
    pub ah_num: u32,
}

/// A completion queue as `CREATE_CQ` returned it.
#[derive(Clone, Copy, Debug)]
pub struct Cq {
    pub handle: u32,
    pub cqe: u32,
    pub user_handle: u64,
    pub ring: CreateCqResp,
}

/// What `CREATE_QP` asks for.
#[derive(Clone, Debug)]
pub struct QpArgs {
    pub qp_type: QpType,
    pub pd: u32,
    pub send_cq: u32,
    pub recv_cq: u32,
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
    pub max_send_sge: u32,
    pub max_recv_sge: u32,
    pub max_inline_data: u32,
    pub user_handle: u64,
    /// The SRQ the QP receives from (`is_srq`, `srq_handle`), if any.
    pub srq: Option<u32>,
    /// Bytes of driver input appended after the core request.
    pub driver_in: Vec<u8>,
}

/// The queue sizes the kernel granted.
#[derive(Clone, Copy, Debug)]
pub struct QpCaps {
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
    pub max_send_sge: u32,
    pub max_recv_sge: u32,
    pub max_inline_data: u32,
}

/// A queue pair as `CREATE_QP` returned it.
#[derive(Clone, Copy, Debug)]
pub struct Qp {
    pub handle: u32,
    pub qpn: u32,
    pub user_handle: u64,
    pub caps: QpCaps,
    pub rings: CreateQpResp,
}

/// A shared receive queue as `CREATE_SRQ` returned it.
#[derive(Clone, Copy, Debug)]
pub struct Srq {
    pub handle: u32,
    pub max_wr: u32,
    pub max_sge: u32,
    pub ring: CreateSrqResp,
}

/// What `QUERY_SRQ` reports (`struct ib_uverbs_query_srq_resp`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SrqAttr {
    pub max_wr: u32,
    pub max_sge: u32,
    pub srq_limit: u32,
}

/// `IB_UVERBS_CREATE_QP_MASK_IND_TABLE`: the extended `CREATE_QP` names
/// an indirection table.
pub const CREATE_QP_MASK_IND_TABLE: u32 = 1;

/// What the extended `CREATE_QP` asks for beyond the legacy command.
#[derive(Clone, Debug)]
pub struct QpExArgs {
    pub base: QpArgs,
    pub comp_mask: u32,
    pub create_flags: u32,
    /// `rwq_ind_tbl_handle`.
    pub ind_table: u32,
    pub source_qpn: u32,
}

/// `enum ib_wq_type`.
pub mod wq_type {
    /// `IB_WQT_RQ`, the only type.
    pub const RQ: u32 = 0;
}

/// `enum ib_wq_state`.
pub mod wq_state {
    pub const RESET: u32 = 0;
    pub const RDY: u32 = 1;
    pub const ERR: u32 = 2;
}

/// `enum ib_wq_attr_mask`.
pub mod wq_mask {
    pub const STATE: u32 = 1 << 0;
    pub const CUR_STATE: u32 = 1 << 1;
    pub const FLAGS: u32 = 1 << 2;
}

/// What `EX_CREATE_WQ` asks for (`struct ib_uverbs_ex_create_wq`).
#[derive(Clone, Debug)]
pub struct WqArgs {
    pub wq_type: u32,
    pub pd: u32,
    pub cq: u32,
    pub max_wr: u32,
    pub max_sge: u32,
    pub create_flags: u32,
    pub user_handle: u64,
    /// Bytes of driver input (whole 8-byte words).
    pub driver_in: Vec<u8>,
}

/// A receive work queue as `EX_CREATE_WQ` returned it.
#[derive(Clone, Copy, Debug)]
pub struct Wq {
    pub handle: u32,
    pub max_wr: u32,
    pub max_sge: u32,
    /// The WQ number: the `qp_num` of its completions.
    pub wqn: u32,
    pub ring: CreateWqResp,
}

/// An `EX_MODIFY_WQ` request (`struct ib_uverbs_ex_modify_wq`).
#[derive(Clone, Copy, Debug, Default)]
pub struct WqModify {
    pub attr_mask: u32,
    pub wq_state: u32,
    pub curr_wq_state: u32,
    pub flags: u32,
    pub flags_mask: u32,
}

/// A receive WQ indirection table as `EX_CREATE_RWQ_IND_TBL` returned it.
#[derive(Clone, Copy, Debug)]
pub struct IndTable {
    pub handle: u32,
    pub num: u32,
}

/// The primary path (`struct ib_uverbs_qp_dest`).
#[derive(Clone, Copy, Debug, Default)]
pub struct Dest {
    pub dgid: [u8; 16],
    pub flow_label: u32,
    pub sgid_index: u8,
    pub hop_limit: u8,
    pub traffic_class: u8,
    pub sl: u8,
    pub is_global: u8,
    pub port_num: u8,
}

/// A `MODIFY_QP` request (`struct ib_uverbs_modify_qp`).
#[derive(Clone, Copy, Debug, Default)]
pub struct Modify {
    pub dest: Dest,
    pub attr_mask: u32,
    pub qkey: u32,
    pub rq_psn: u32,
    pub sq_psn: u32,
    pub dest_qp_num: u32,
    pub access_flags: u32,
    pub pkey_index: u16,
    pub qp_state: u8,
    pub path_mtu: u8,
    pub max_rd_atomic: u8,
    pub max_dest_rd_atomic: u8,
    pub min_rnr_timer: u8,
    pub port_num: u8,
    pub timeout: u8,
    pub retry_cnt: u8,
    pub rnr_retry: u8,
}

/// An asynchronous event (`struct ib_uverbs_async_event_desc`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AsyncEvent {
    /// The object's `user_handle` (or the port number for port events).
    pub element: u64,
    pub event_type: u32,
}

/// An open uverbs device file.
pub struct Verbs {
    fd: OwnedFd,
    async_fd: Option<OwnedFd>,
}

impl Verbs {
    /// Opens the device file without creating a ucontext.
    pub fn open(path: &Path) -> Result<Verbs, Errno> {
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| Errno(e.raw_os_error().unwrap_or(libc::EIO)))?;
        Ok(Verbs {
            fd: f.into(),
            async_fd: None,
        })
    }

    /// Opens the device file and creates its ucontext.
    pub fn open_with_context(path: &Path) -> Result<Verbs, Errno> {
        let mut v = Verbs::open(path)?;
        v.get_context(&[])?;
        Ok(v)
    }

    /// Sends a raw command.
    pub fn exec(&self, command: u32, body: &[u8], resp: Option<&mut [u8]>) -> Result<(), Errno> {
        sys::command(self.fd.as_fd(), command, body, resp)
    }

    /// Sends a raw extended command: the core's request `body`, the
    /// driver's input `driver_in`, and in `resp` the core's response (its
    /// first `core_out` bytes) followed by the driver's.
    pub fn exec_ex(
        &self,
        command: u32,
        body: &[u8],
        driver_in: &[u8],
        resp: Option<&mut [u8]>,
        core_out: usize,
    ) -> Result<(), Errno> {
        sys::command_ex(self.fd.as_fd(), command, body, driver_in, resp, core_out)
    }

    /// `GET_CONTEXT`, with `driver_in` as driver input.
    pub fn get_context(&mut self, driver_in: &[u8]) -> Result<(), Errno> {
        let mut resp = vec![0u8; GET_CONTEXT_RESP];
        self.exec(cmd::GET_CONTEXT, driver_in, Some(&mut resp))?;
        self.async_fd = Some(sys::adopt_fd(rd_u32(&resp, 0))?);
        Ok(())
    }

    /// `QUERY_DEVICE`.
    pub fn query_device(&self) -> Result<DeviceCaps, Errno> {
        let mut resp = vec![0u8; QUERY_DEVICE_RESP];
        self.exec(cmd::QUERY_DEVICE, &[], Some(&mut resp))?;
        Ok(DeviceCaps {
            max_mr_size: rd_u64(&resp, 24),
            max_qp_wr: rd_u32(&resp, 56),
            max_sge: rd_u32(&resp, 64),
            max_cqe: rd_u32(&resp, 76),
        })
    }

    /// `ALLOC_PD`.
    pub fn alloc_pd(&self, driver_in: &[u8]) -> Result<u32, Errno> {
        let mut resp = vec![0u8; ALLOC_PD_RESP];
        self.exec(cmd::ALLOC_PD, driver_in, Some(&mut resp))?;
        Ok(rd_u32(&resp, 0))
    }

    /// `DEALLOC_PD`.
    pub fn dealloc_pd(&self, pd: u32) -> Result<(), Errno> {
        self.exec(cmd::DEALLOC_PD, &Req::new().u32(pd).done(4), None)
    }

    /// `REG_MR`.
    pub fn reg_mr(
        &self,
        pd: u32,
        start: u64,
        length: u64,
        iova: u64,
        access: u32,
        driver_in: &[u8],
    ) -> Result<Mr, Errno> {
        let body = Req::new()
            .u64(start)
            .u64(length)
            .u64(iova)
            .u32(pd)
            .u32(access)
            .done(32);
        let body = Req(body).bytes(driver_in).0;
        let mut resp = vec![0u8; REG_MR_RESP];
        self.exec(cmd::REG_MR, &body, Some(&mut resp))?;
        Ok(Mr {
            handle: rd_u32(&resp, 0),
            lkey: rd_u32(&resp, 4),
            rkey: rd_u32(&resp, 8),
        })
    }

    /// `REREG_MR`: the keys the MR has afterwards.
    #[allow(clippy::too_many_arguments)]
    pub fn rereg_mr(
        &self,
        mr: u32,
        flags: u32,
        start: u64,
        length: u64,
        iova: u64,
        pd: u32,
        access: u32,
    ) -> Result<(u32, u32), Errno> {
        let body = Req::new()
            .u32(mr)
            .u32(flags)
            .u64(start)
            .u64(length)
            .u64(iova)
            .u32(pd)
            .u32(access)
            .done(40);
        let mut resp = vec![0u8; REREG_MR_RESP];
        self.exec(cmd::REREG_MR, &body, Some(&mut resp))?;
        Ok((rd_u32(&resp, 0), rd_u32(&resp, 4)))
    }

    /// `ALLOC_MW` of type `mw_type` (1 or 2).
    pub fn alloc_mw(&self, pd: u32, mw_type: u8) -> Result<Mw, Errno> {
        let body = Req::new().u32(pd).u8(mw_type).bytes(&[0; 3]).done(8);
        let mut resp = vec![0u8; ALLOC_MW_RESP];
        self.exec(cmd::ALLOC_MW, &body, Some(&mut resp))?;
        Ok(Mw {
            handle: rd_u32(&resp, 0),
            rkey: rd_u32(&resp, 4),
        })
    }

    /// `DEALLOC_MW`.
    pub fn dealloc_mw(&self, mw: u32) -> Result<(), Errno> {
        self.exec(cmd::DEALLOC_MW, &Req::new().u32(mw).done(4), None)
    }

    /// `CREATE_AH` in `pd` for a global route to `dgid` from GID index
    /// `sgid_index` of port 1; roxe answers with the AH's number.
    pub fn create_ah(
        &self,
        pd: u32,
        user_handle: u64,
        dgid: &[u8; 16],
        sgid_index: u8,
    ) -> Result<Ah, Errno> {
        let body = Req::new()
            .u64(user_handle)
            .u32(pd)
            .u32(0)
            // struct ib_uverbs_ah_attr: grh, then the rest
            .bytes(dgid)
            .u32(0) // flow_label
            .u8(sgid_index)
            .u8(64) // hop_limit
            .u8(0) // traffic_class
            .u8(0)
            .u16(0) // dlid
            .u8(0) // sl
            .u8(0) // src_path_bits
            .u8(0) // static_rate
            .u8(1) // is_global
            .u8(1) // port_num
            .u8(0)
            .done(48);
        let mut resp = vec![0u8; CREATE_AH_RESP + 8];
        self.exec(cmd::CREATE_AH, &body, Some(&mut resp))?;
        Ok(Ah {
            handle: rd_u32(&resp, 0),
            ah_num: rd_u32(&resp, CREATE_AH_RESP),
        })
    }

    /// `DESTROY_AH`.
    pub fn destroy_ah(&self, ah: u32) -> Result<(), Errno> {
        self.exec(cmd::DESTROY_AH, &Req::new().u32(ah).done(4), None)
    }

    /// `DEREG_MR`.
    pub fn dereg_mr(&self, mr: u32) -> Result<(), Errno> {
        self.exec(cmd::DEREG_MR, &Req::new().u32(mr).done(4), None)
    }

    /// `CREATE_CQ` with `comp_channel = -1`, with `driver_in` as driver input.
    pub fn create_cq(
        &self,
        cqe: u32,
        comp_vector: u32,
        user_handle: u64,
        driver_in: &[u8],
    ) -> Result<Cq, Errno> {
        self.create_cq_on(None, cqe, comp_vector, user_handle, driver_in)
    }

    /// `CREATE_CQ` reporting to `channel` (`comp_channel`), if given.
    pub fn create_cq_on(
        &self,
        channel: Option<&OwnedFd>,
        cqe: u32,
        comp_vector: u32,
        user_handle: u64,
        driver_in: &[u8],
    ) -> Result<Cq, Errno> {
        // CAST: the fd number as the ABI's __s32 (-1: no channel).
        let ch = channel.map_or(-1, |f| f.as_raw_fd()) as u32;
        let body = Req::new()
            .u64(user_handle)
            .u32(cqe)
            .u32(comp_vector)
            .u32(ch)
            .u32(0)
            .done(24);
        let body = Req(body).bytes(driver_in).0;
        let mut resp = vec![0u8; CREATE_CQ_RESP + size_of::<CreateCqResp>()];
        self.exec(cmd::CREATE_CQ, &body, Some(&mut resp))?;
        Ok(Cq {
            handle: rd_u32(&resp, 0),
            cqe: rd_u32(&resp, 4),
            user_handle,
            ring: abi::create_cq_resp(&resp[CREATE_CQ_RESP..]),
        })
    }

    /// `CREATE_COMP_CHANNEL`: the channel's fd.
    pub fn create_comp_channel(&self) -> Result<OwnedFd, Errno> {
        let mut resp = vec![0u8; CREATE_COMP_CHANNEL_RESP];
        self.exec(cmd::CREATE_COMP_CHANNEL, &[], Some(&mut resp))?;
        sys::adopt_fd(rd_u32(&resp, 0))
    }

    /// `REQ_NOTIFY_CQ`: arms the CQ for the next (or the next solicited)
    /// completion.
    pub fn req_notify_cq(&self, cq: u32, solicited_only: bool) -> Result<(), Errno> {
        self.exec(
            cmd::REQ_NOTIFY_CQ,
            &Req::new().u32(cq).u32(u32::from(solicited_only)).done(8),
            None,
        )
    }

    /// The next completion event on `channel` (the CQ's `user_handle`),
    /// waiting up to `timeout_ms`.
    pub fn next_comp_event(channel: &OwnedFd, timeout_ms: i32) -> Result<Option<u64>, Errno> {
        if !sys::poll_readable(channel.as_fd(), timeout_ms)? {
            return Ok(None);
        }
        let mut buf = [0u8; COMP_EVENT_DESC];
        if sys::read(channel.as_fd(), &mut buf)? != COMP_EVENT_DESC {
            return Err(Errno(libc::EIO));
        }
        Ok(Some(rd_u64(&buf, 0)))
    }

    /// `RESIZE_CQ`: the new size and where the new ring is.
    pub fn resize_cq(&self, cq: u32, cqe: u32) -> Result<(u32, CreateCqResp), Errno> {
        let body = Req::new().u32(cq).u32(cqe).done(8);
        let mut resp = vec![0u8; RESIZE_CQ_RESP + size_of::<CreateCqResp>()];
        self.exec(cmd::RESIZE_CQ, &body, Some(&mut resp))?;
        Ok((
            rd_u32(&resp, 0),
            abi::create_cq_resp(&resp[RESIZE_CQ_RESP..]),
        ))
    }

    /// `DESTROY_CQ`.
    pub fn destroy_cq(&self, cq: u32) -> Result<(), Errno> {
        let mut resp = vec![0u8; DESTROY_CQ_RESP];
        self.exec(
            cmd::DESTROY_CQ,
            &Req::new().u32(cq).u32(0).done(8),
            Some(&mut resp),
        )
    }

    /// `CREATE_QP` (`sq_sig_all = 0`).
    pub fn create_qp(&self, a: &QpArgs) -> Result<Qp, Errno> {
        let body = Req(create_qp_body(a)).bytes(&a.driver_in).0;
        let mut resp = vec![0u8; CREATE_QP_RESP + size_of::<CreateQpResp>()];
        self.exec(cmd::CREATE_QP, &body, Some(&mut resp))?;
        Ok(qp_from_resp(&resp, CREATE_QP_RESP, a.user_handle))
    }

    /// The extended `CREATE_QP` (`struct ib_uverbs_ex_create_qp`), which
    /// can name an indirection table; `a.base.driver_in` is the driver
    /// input (whole 8-byte words).
    pub fn create_qp_ex(&self, a: &QpExArgs) -> Result<Qp, Errno> {
        let body = Req(create_qp_body(&a.base))
            .u32(a.comp_mask)
            .u32(a.create_flags)
            .u32(a.ind_table)
            .u32(a.source_qpn)
            .done(64);
        let mut resp = vec![0u8; EX_CREATE_QP_RESP + size_of::<CreateQpResp>()];
        self.exec_ex(
            ex_cmd::CREATE_QP,
            &body,
            &a.base.driver_in,
            Some(&mut resp),
            EX_CREATE_QP_RESP,
        )?;
        Ok(qp_from_resp(&resp, EX_CREATE_QP_RESP, a.base.user_handle))
    }

    /// `MODIFY_QP` (the legacy command carries no driver data).
    pub fn modify_qp(&self, qp: u32, m: &Modify) -> Result<(), Errno> {
        let d = &m.dest;
        let body = Req::new()
            // struct ib_uverbs_qp_dest dest
            .bytes(&d.dgid)
            .u32(d.flow_label)
            .u16(0) // dlid
            .u16(0)
            .u8(d.sgid_index)
            .u8(d.hop_limit)
            .u8(d.traffic_class)
            .u8(d.sl)
            .u8(0) // src_path_bits
            .u8(0) // static_rate
            .u8(d.is_global)
            .u8(d.port_num)
            // struct ib_uverbs_qp_dest alt_dest
            .bytes(&[0; 32])
            .u32(qp)
            .u32(m.attr_mask)
            .u32(m.qkey)
            .u32(m.rq_psn)
            .u32(m.sq_psn)
            .u32(m.dest_qp_num)
            .u32(m.access_flags)
            .u16(m.pkey_index)
            .u16(0) // alt_pkey_index
            .u8(m.qp_state)
            .u8(0) // cur_qp_state
            .u8(m.path_mtu)
            .u8(0) // path_mig_state
            .u8(0) // en_sqd_async_notify
            .u8(m.max_rd_atomic)
            .u8(m.max_dest_rd_atomic)
            .u8(m.min_rnr_timer)
            .u8(m.port_num)
            .u8(m.timeout)
            .u8(m.retry_cnt)
            .u8(m.rnr_retry)
            .u8(0) // alt_port_num
            .u8(0) // alt_timeout
            .u16(0)
            .done(112);
        self.exec(cmd::MODIFY_QP, &body, None)
    }

    /// `QUERY_QP`: the QP's state.
    pub fn query_qp_state(&self, qp: u32) -> Result<u8, Errno> {
        let mut resp = vec![0u8; QUERY_QP_RESP];
        self.exec(
            cmd::QUERY_QP,
            &Req::new().u32(qp).u32(mask::STATE).done(8),
            Some(&mut resp),
        )?;
        Ok(resp[108])
    }

    /// `DESTROY_QP`.
    pub fn destroy_qp(&self, qp: u32) -> Result<(), Errno> {
        let mut resp = vec![0u8; DESTROY_QP_RESP];
        self.exec(
            cmd::DESTROY_QP,
            &Req::new().u32(qp).u32(0).done(8),
            Some(&mut resp),
        )
    }

    /// `CREATE_SRQ`, with `driver_in` as driver input.
    pub fn create_srq(
        &self,
        pd: u32,
        max_wr: u32,
        max_sge: u32,
        user_handle: u64,
        driver_in: &[u8],
    ) -> Result<Srq, Errno> {
        // srq_limit 0: the limit event is not armed.
        let body = Req::new()
            .u64(user_handle)
            .u32(pd)
            .u32(max_wr)
            .u32(max_sge)
            .u32(0)
            .done(24);
        let body = Req(body).bytes(driver_in).0;
        let mut resp = vec![0u8; CREATE_SRQ_RESP + size_of::<CreateSrqResp>()];
        self.exec(cmd::CREATE_SRQ, &body, Some(&mut resp))?;
        Ok(Srq {
            handle: rd_u32(&resp, 0),
            max_wr: rd_u32(&resp, 4),
            max_sge: rd_u32(&resp, 8),
            ring: abi::create_srq_resp(&resp[CREATE_SRQ_RESP..]),
        })
    }

    /// `MODIFY_SRQ`, with `driver_in` as driver input (roxe's
    /// `ModifySrqCmd`). The command has no response.
    pub fn modify_srq(
        &self,
        srq: u32,
        attr_mask: u32,
        max_wr: u32,
        srq_limit: u32,
        driver_in: &[u8],
    ) -> Result<(), Errno> {
        let body = Req::new()
            .u32(srq)
            .u32(attr_mask)
            .u32(max_wr)
            .u32(srq_limit)
            .done(16);
        let body = Req(body).bytes(driver_in).0;
        self.exec(cmd::MODIFY_SRQ, &body, None)
    }

    /// `QUERY_SRQ`.
    pub fn query_srq(&self, srq: u32) -> Result<SrqAttr, Errno> {
        let mut resp = vec![0u8; QUERY_SRQ_RESP];
        self.exec(
            cmd::QUERY_SRQ,
            &Req::new().u32(srq).u32(0).done(8),
            Some(&mut resp),
        )?;
        Ok(SrqAttr {
            max_wr: rd_u32(&resp, 0),
            max_sge: rd_u32(&resp, 4),
            srq_limit: rd_u32(&resp, 8),
        })
    }

    /// `DESTROY_SRQ`.
    pub fn destroy_srq(&self, srq: u32) -> Result<(), Errno> {
        let mut resp = vec![0u8; DESTROY_SRQ_RESP];
        self.exec(
            cmd::DESTROY_SRQ,
            &Req::new().u32(srq).u32(0).done(8),
            Some(&mut resp),
        )
    }

    /// `EX_CREATE_WQ`, with `a.driver_in` as driver input (whole 8-byte
    /// words); roxe answers with the ring's `RingInfo`.
    pub fn create_wq(&self, a: &WqArgs) -> Result<Wq, Errno> {
        let body = Req::new()
            .u32(0) // comp_mask
            .u32(a.wq_type)
            .u64(a.user_handle)
            .u32(a.pd)
            .u32(a.cq)
            .u32(a.max_wr)
            .u32(a.max_sge)
            .u32(a.create_flags)
            .u32(0)
            .done(40);
        let mut resp = vec![0u8; EX_CREATE_WQ_RESP + size_of::<CreateWqResp>()];
        self.exec_ex(
            ex_cmd::CREATE_WQ,
            &body,
            &a.driver_in,
            Some(&mut resp),
            EX_CREATE_WQ_RESP,
        )?;
        Ok(Wq {
            handle: rd_u32(&resp, 8),
            max_wr: rd_u32(&resp, 12),
            max_sge: rd_u32(&resp, 16),
            wqn: rd_u32(&resp, 20),
            ring: abi::ring_info(&resp[EX_CREATE_WQ_RESP..]),
        })
    }

    /// `EX_MODIFY_WQ` (no response, no driver input).
    pub fn modify_wq(&self, wq: u32, m: &WqModify) -> Result<(), Errno> {
        let body = Req::new()
            .u32(m.attr_mask)
            .u32(wq)
            .u32(m.wq_state)
            .u32(m.curr_wq_state)
            .u32(m.flags)
            .u32(m.flags_mask)
            .done(24);
        self.exec_ex(ex_cmd::MODIFY_WQ, &body, &[], None, 0)
    }

    /// `EX_MODIFY_WQ` into `to`, naming no current state.
    pub fn wq_state(&self, wq: u32, to: u32) -> Result<(), Errno> {
        self.modify_wq(
            wq,
            &WqModify {
                attr_mask: wq_mask::STATE,
                wq_state: to,
                ..WqModify::default()
            },
        )
    }

    /// `EX_DESTROY_WQ`.
    pub fn destroy_wq(&self, wq: u32) -> Result<(), Errno> {
        let body = Req::new().u32(0).u32(wq).done(8);
        let mut resp = vec![0u8; EX_DESTROY_WQ_RESP];
        self.exec_ex(
            ex_cmd::DESTROY_WQ,
            &body,
            &[],
            Some(&mut resp),
            EX_DESTROY_WQ_RESP,
        )
    }

    /// `EX_CREATE_RWQ_IND_TBL` of `2^log_size` entries, `wqs` (as many
    /// handles as that; the list is padded with zeros to whole words).
    pub fn create_ind_table(&self, log_size: u32, wqs: &[u32]) -> Result<IndTable, Errno> {
        let mut body = Req::new().u32(0).u32(log_size);
        for w in wqs {
            body = body.u32(*w);
        }
        if wqs.len() % 2 == 1 {
            body = body.u32(0);
        }
        let n = body.0.len();
        let body = body.done(n);
        let mut resp = vec![0u8; EX_CREATE_RWQ_IND_TBL_RESP];
        self.exec_ex(
            ex_cmd::CREATE_RWQ_IND_TBL,
            &body,
            &[],
            Some(&mut resp),
            EX_CREATE_RWQ_IND_TBL_RESP,
        )?;
        Ok(IndTable {
            handle: rd_u32(&resp, 8),
            num: rd_u32(&resp, 12),
        })
    }

    /// `EX_DESTROY_RWQ_IND_TBL` (no response).
    pub fn destroy_ind_table(&self, table: u32) -> Result<(), Errno> {
        let body = Req::new().u32(0).u32(table).done(8);
        self.exec_ex(ex_cmd::DESTROY_RWQ_IND_TBL, &body, &[], None, 0)
    }

    /// roxe's send doorbell: `POST_SEND` with `wr_count = 0`.
    pub fn doorbell(&self, qp: u32) -> Result<(), Errno> {
        let body = Req::new()
            .u32(qp)
            .u32(0)
            .u32(0)
            .u32(UVERBS_SEND_WR)
            .done(16);
        let mut resp = vec![0u8; POST_SEND_RESP];
        self.exec(cmd::POST_SEND, &body, Some(&mut resp))
    }

    /// A real `POST_SEND` of one SEND work request without SGEs.
    pub fn post_send_wr(&self, qp: u32, wr_id: u64) -> Result<(), Errno> {
        let body = Req::new()
            .u32(qp)
            .u32(1)
            .u32(0)
            .u32(UVERBS_SEND_WR)
            // struct ib_uverbs_send_wr
            .u64(wr_id)
            .u32(0) // num_sge
            .u32(2) // IB_UVERBS_WR_SEND
            .u32(0) // send_flags
            .u32(0) // ex
            .bytes(&[0; 32])
            .done(72);
        let mut resp = vec![0u8; POST_SEND_RESP];
        self.exec(cmd::POST_SEND, &body, Some(&mut resp))
    }

    /// Maps `len` bytes of the device file at `offset`.
    pub fn mmap(&self, offset: u64, len: usize, share: Share) -> Result<Mapping, Errno> {
        Mapping::map(self.fd.as_fd(), offset, len, share)
    }

    /// The next asynchronous event, waiting up to `timeout_ms`.
    pub fn next_event(&self, timeout_ms: i32) -> Result<Option<AsyncEvent>, Errno> {
        let fd = self.async_fd.as_ref().ok_or(Errno(libc::EBADF))?;
        if !sys::poll_readable(fd.as_fd(), timeout_ms)? {
            return Ok(None);
        }
        let mut buf = [0u8; ASYNC_EVENT_DESC];
        let n = sys::read(fd.as_fd(), &mut buf)?;
        if n != ASYNC_EVENT_DESC {
            return Err(Errno(libc::EIO));
        }
        Ok(Some(AsyncEvent {
            element: rd_u64(&buf, 0),
            event_type: rd_u32(&buf, 8),
        }))
    }
}
