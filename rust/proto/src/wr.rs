// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Work-request and work-completion codes, with the values of
//! `enum ibv_wr_opcode`, `enum ibv_wc_opcode` and `enum ibv_wc_status`
//! (the same numbers the kernel's `IB_WR_*`/`IB_WC_*` use).

/// The QP types, as far as opcode rules go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// Reliable connected.
    Rc,
    /// Unreliable connected.
    Uc,
    /// Unreliable datagram (including the GSI QP).
    Ud,
    /// Extended reliable connected (the initiator side: an XRC INI QP).
    Xrc,
}

/// Send work-request opcodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum SendOp {
    /// RDMA Write.
    RdmaWrite = 0,
    /// RDMA Write with immediate.
    RdmaWriteImm = 1,
    /// Send.
    Send = 2,
    /// Send with immediate.
    SendImm = 3,
    /// RDMA Read.
    RdmaRead = 4,
    /// Atomic compare and swap.
    CmpSwap = 5,
    /// Atomic fetch and add.
    FetchAdd = 6,
    /// Local invalidate.
    LocalInv = 7,
    /// Memory-window bind.
    BindMw = 8,
    /// Send with invalidate.
    SendInv = 9,
    /// Flush.
    Flush = 14,
    /// Atomic write.
    AtomicWrite = 15,
    /// Fast registration of an MR (`IB_WR_REG_MR`): kernel consumers only.
    RegMr = 0x20,
}

impl SendOp {
    /// Parses an opcode.
    pub fn from_raw(v: u32) -> Option<SendOp> {
        use SendOp::*;
        Some(match v {
            0 => RdmaWrite,
            1 => RdmaWriteImm,
            2 => Send,
            3 => SendImm,
            4 => RdmaRead,
            5 => CmpSwap,
            6 => FetchAdd,
            7 => LocalInv,
            8 => BindMw,
            9 => SendInv,
            14 => Flush,
            15 => AtomicWrite,
            0x20 => RegMr,
            _ => return None,
        })
    }

    /// Whether a QP of transport `t` may post this opcode.
    pub fn allowed_on(self, t: Transport) -> bool {
        use SendOp::*;
        match t {
            Transport::Rc => true,
            // XRC has every RC opcode but FLUSH and ATOMIC WRITE.
            Transport::Xrc => !matches!(self, Flush | AtomicWrite),
            Transport::Uc => matches!(
                self,
                RdmaWrite | RdmaWriteImm | Send | SendImm | LocalInv | BindMw | RegMr
            ),
            Transport::Ud => matches!(self, Send | SendImm),
        }
    }

    /// Whether the operation only changes local state (no packets).
    pub fn is_local(self) -> bool {
        matches!(self, SendOp::LocalInv | SendOp::BindMw | SendOp::RegMr)
    }

    /// Whether only kernel consumers may post the operation.
    pub fn kernel_only(self) -> bool {
        self == SendOp::RegMr
    }

    /// The completion opcode a successful or flushed WR reports.
    pub fn completion(self) -> WcOp {
        use SendOp::*;
        match self {
            RdmaWrite | RdmaWriteImm => WcOp::RdmaWrite,
            Send | SendImm | SendInv => WcOp::Send,
            RdmaRead => WcOp::RdmaRead,
            CmpSwap => WcOp::CompSwap,
            FetchAdd => WcOp::FetchAdd,
            LocalInv => WcOp::LocalInv,
            BindMw => WcOp::BindMw,
            Flush => WcOp::Flush,
            AtomicWrite => WcOp::AtomicWrite,
            RegMr => WcOp::RegMr,
        }
    }
}

/// Work-completion opcodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum WcOp {
    /// A send completed.
    Send = 0,
    /// An RDMA Write completed.
    RdmaWrite = 1,
    /// An RDMA Read completed.
    RdmaRead = 2,
    /// A compare-and-swap completed.
    CompSwap = 3,
    /// A fetch-and-add completed.
    FetchAdd = 4,
    /// A memory-window bind completed.
    BindMw = 5,
    /// A local invalidate completed.
    LocalInv = 6,
    /// A flush completed.
    Flush = 8,
    /// An atomic write completed.
    AtomicWrite = 9,
    /// A fast registration completed (`IB_WC_REG_MR`).
    RegMr = 10,
    /// A receive completed.
    Recv = 128,
    /// A receive of an RDMA Write with immediate completed.
    RecvRdmaImm = 129,
}

/// Work-completion status codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum WcStatus {
    /// Success.
    Success = 0,
    /// Local length error.
    LocLenErr = 1,
    /// Local QP operation error (a malformed work request).
    LocQpOpErr = 2,
    /// Local protection error.
    LocProtErr = 4,
    /// Flushed because the QP is in the error state.
    WrFlushErr = 5,
    /// Memory-window bind error.
    MwBindErr = 6,
    /// Bad response.
    BadRespErr = 7,
    /// Local access error.
    LocAccessErr = 8,
    /// Remote invalid request.
    RemInvReqErr = 9,
    /// Remote access error.
    RemAccessErr = 10,
    /// Remote operational error.
    RemOpErr = 11,
    /// Transport retry counter exceeded.
    RetryExcErr = 12,
    /// RNR retry counter exceeded.
    RnrRetryExcErr = 13,
    /// General error.
    GeneralErr = 21,
}

impl WcOp {
    /// Parses a completion opcode.
    pub fn from_raw(v: u32) -> Option<WcOp> {
        use WcOp::*;
        Some(match v {
            0 => Send,
            1 => RdmaWrite,
            2 => RdmaRead,
            3 => CompSwap,
            4 => FetchAdd,
            5 => BindMw,
            6 => LocalInv,
            8 => Flush,
            9 => AtomicWrite,
            10 => RegMr,
            128 => Recv,
            129 => RecvRdmaImm,
            _ => return None,
        })
    }
}

impl WcStatus {
    /// Parses a completion status.
    pub fn from_raw(v: u32) -> Option<WcStatus> {
        use WcStatus::*;
        Some(match v {
            0 => Success,
            1 => LocLenErr,
            2 => LocQpOpErr,
            4 => LocProtErr,
            5 => WrFlushErr,
            6 => MwBindErr,
            7 => BadRespErr,
            8 => LocAccessErr,
            9 => RemInvReqErr,
            10 => RemAccessErr,
            11 => RemOpErr,
            12 => RetryExcErr,
            13 => RnrRetryExcErr,
            21 => GeneralErr,
            _ => return None,
        })
    }
}

/// The largest number of SGEs a work request may carry.
pub const MAX_SGE: u32 = 32;
/// The largest inline payload of a send.
pub const MAX_INLINE: u32 = 512;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opcodes_round_trip() {
        for v in 0..32 {
            if let Some(op) = SendOp::from_raw(v) {
                assert_eq!(op as u32, v);
            }
        }
        assert_eq!(SendOp::from_raw(10), None); // TSO: raw packet QPs only
        assert_eq!(SendOp::from_raw(11), None);
        assert_eq!(SendOp::from_raw(u32::MAX), None);
    }

    #[test]
    fn completion_codes_round_trip() {
        let mut ops = 0;
        let mut statuses = 0;
        for v in 0..256 {
            if let Some(op) = WcOp::from_raw(v) {
                assert_eq!(op as u32, v);
                ops += 1;
            }
            if let Some(st) = WcStatus::from_raw(v) {
                assert_eq!(st as u32, v);
                statuses += 1;
            }
        }
        assert_eq!((ops, statuses), (12, 14));
    }

    #[test]
    fn transport_rules() {
        assert!(SendOp::Send.allowed_on(Transport::Ud));
        assert!(!SendOp::RdmaWrite.allowed_on(Transport::Ud));
        assert!(SendOp::RdmaWriteImm.allowed_on(Transport::Uc));
        assert!(!SendOp::RdmaRead.allowed_on(Transport::Uc));
        assert!(!SendOp::CmpSwap.allowed_on(Transport::Uc));
        assert!(SendOp::AtomicWrite.allowed_on(Transport::Rc));
        for op in (0..64).filter_map(SendOp::from_raw) {
            let xrc = !matches!(op, SendOp::Flush | SendOp::AtomicWrite);
            assert_eq!(op.allowed_on(Transport::Xrc), xrc, "{op:?}");
            // Whatever UC allows, XRC allows too.
            assert!(!op.allowed_on(Transport::Uc) || op.allowed_on(Transport::Xrc));
        }
        assert!(SendOp::RdmaRead.allowed_on(Transport::Xrc));
        assert!(SendOp::SendInv.allowed_on(Transport::Xrc));
    }

    #[test]
    fn completions() {
        assert_eq!(SendOp::SendInv.completion(), WcOp::Send);
        assert_eq!(SendOp::RdmaWriteImm.completion(), WcOp::RdmaWrite);
        assert_eq!(WcOp::Recv as u32, 128);
        assert_eq!(WcStatus::WrFlushErr as u32, 5);
    }
}
