// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Segmentation of a request message into packets: how many packets a
//! message of a given length takes at a path MTU, and which opcode each
//! packet carries.

use super::opcode::{Opcode, Position, Transport};
use super::wr::SendOp;

/// How many packets carry `len` bytes at path MTU `mtu` (at least one, for
/// zero-length messages). `None` if `mtu` is zero or the count does not fit
/// a 24-bit PSN span.
pub fn packet_count(len: u32, mtu: u32) -> Option<u32> {
    if mtu == 0 {
        return None;
    }
    let n = len.div_ceil(mtu).max(1);
    (n <= super::psn::HALF).then_some(n)
}

/// The position of packet `i` of `n`.
pub fn position(i: u32, n: u32) -> Position {
    match (i == 0, i + 1 >= n) {
        (true, true) => Position::Only,
        (true, false) => Position::First,
        (false, true) => Position::Last,
        (false, false) => Position::Middle,
    }
}

/// The opcode of a request packet of `op` at `pos`, on transport `t`;
/// `None` where the transport has no such operation or position.
pub fn request_opcode(t: Transport, op: SendOp, pos: Position) -> Option<Opcode> {
    use Opcode::*;
    use Position::*;
    // The RC opcode. The other transports use the same low five bits where
    // they have the opcode at all, which `Opcode::on_transport` knows: UD
    // only SEND Only, UC no READ, atomics or SEND with Invalidate, XRC no
    // FLUSH or ATOMIC WRITE.
    let rc = match (op, pos) {
        (SendOp::Send | SendOp::SendImm | SendOp::SendInv, First) => RcSendFirst,
        (SendOp::Send | SendOp::SendImm | SendOp::SendInv, Middle) => RcSendMiddle,
        (SendOp::Send, Last) => RcSendLast,
        (SendOp::Send, Only) => RcSendOnly,
        (SendOp::SendImm, Last) => RcSendLastImm,
        (SendOp::SendImm, Only) => RcSendOnlyImm,
        (SendOp::SendInv, Last) => RcSendLastInv,
        (SendOp::SendInv, Only) => RcSendOnlyInv,
        (SendOp::RdmaWrite | SendOp::RdmaWriteImm, First) => RcRdmaWriteFirst,
        (SendOp::RdmaWrite | SendOp::RdmaWriteImm, Middle) => RcRdmaWriteMiddle,
        (SendOp::RdmaWrite, Last) => RcRdmaWriteLast,
        (SendOp::RdmaWrite, Only) => RcRdmaWriteOnly,
        (SendOp::RdmaWriteImm, Last) => RcRdmaWriteLastImm,
        (SendOp::RdmaWriteImm, Only) => RcRdmaWriteOnlyImm,
        (SendOp::RdmaRead, Only) => RcRdmaReadRequest,
        (SendOp::CmpSwap, Only) => RcCompareSwap,
        (SendOp::FetchAdd, Only) => RcFetchAdd,
        (SendOp::AtomicWrite, Only) => RcAtomicWrite,
        (SendOp::Flush, Only) => RcFlush,
        _ => return None,
    };
    rc.on_transport(t)
}

/// The opcode of RDMA READ response packet `pos` from a responder of
/// transport `t`: XRC's for XRC, RC's otherwise (only reliable transports
/// read).
pub fn read_response_opcode(t: Transport, pos: Position) -> Opcode {
    let rc = match pos {
        Position::First => Opcode::RcRdmaReadResponseFirst,
        Position::Middle => Opcode::RcRdmaReadResponseMiddle,
        Position::Last => Opcode::RcRdmaReadResponseLast,
        Position::Only => Opcode::RcRdmaReadResponseOnly,
    };
    match t {
        Transport::Xrc => rc.on_transport(t).unwrap_or(rc),
        _ => rc,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::opcode::Operation;

    #[test]
    fn counts() {
        assert_eq!(packet_count(0, 1024), Some(1));
        assert_eq!(packet_count(1, 1024), Some(1));
        assert_eq!(packet_count(1024, 1024), Some(1));
        assert_eq!(packet_count(1025, 1024), Some(2));
        assert_eq!(packet_count(u32::MAX, 256), None);
        assert_eq!(packet_count(10, 0), None);
    }

    #[test]
    fn positions() {
        assert_eq!(position(0, 1), Position::Only);
        assert_eq!(position(0, 3), Position::First);
        assert_eq!(position(1, 3), Position::Middle);
        assert_eq!(position(2, 3), Position::Last);
    }

    #[test]
    fn opcodes_agree_with_the_table() {
        let ops = [
            SendOp::Send,
            SendOp::SendImm,
            SendOp::SendInv,
            SendOp::RdmaWrite,
            SendOp::RdmaWriteImm,
            SendOp::RdmaRead,
            SendOp::CmpSwap,
            SendOp::FetchAdd,
            SendOp::AtomicWrite,
            SendOp::Flush,
        ];
        let positions = [
            Position::First,
            Position::Middle,
            Position::Last,
            Position::Only,
        ];
        for t in [Transport::Rc, Transport::Uc, Transport::Ud, Transport::Xrc] {
            for op in ops {
                for pos in positions {
                    if t == Transport::Xrc {
                        // XRC has what RC has, with its own opcodes, but no
                        // FLUSH or ATOMIC WRITE.
                        let rc = request_opcode(Transport::Rc, op, pos);
                        let xrc = request_opcode(t, op, pos);
                        let none = matches!(op, SendOp::Flush | SendOp::AtomicWrite);
                        assert_eq!(xrc.is_none(), rc.is_none() || none, "{op:?} {pos:?}");
                        if let (Some(x), Some(r)) = (xrc, rc) {
                            assert_eq!(x.to_u8(), r.to_u8() | 0xa0);
                        }
                    }
                    if let Some(o) = request_opcode(t, op, pos) {
                        assert_eq!(o.transport(), t, "{op:?} {pos:?}");
                        assert_eq!(o.position(), pos, "{t:?} {op:?}");
                        assert!(o.is_request());
                        let imm = matches!(pos, Position::Last | Position::Only)
                            && matches!(op, SendOp::SendImm | SendOp::RdmaWriteImm);
                        assert_eq!(o.has_immediate(), imm, "{t:?} {op:?} {pos:?}");
                    }
                }
            }
        }
        assert_eq!(
            request_opcode(Transport::Ud, SendOp::Send, Position::First),
            None
        );
        assert_eq!(
            request_opcode(Transport::Uc, SendOp::RdmaRead, Position::Only),
            None
        );
        assert_eq!(
            request_opcode(Transport::Uc, SendOp::SendInv, Position::Only),
            None
        );
        // Atomic Write is one RC packet; never UC, never segmented.
        assert_eq!(
            request_opcode(Transport::Rc, SendOp::AtomicWrite, Position::Only),
            Some(Opcode::RcAtomicWrite)
        );
        assert_eq!(
            request_opcode(Transport::Uc, SendOp::AtomicWrite, Position::Only),
            None
        );
        assert_eq!(
            request_opcode(Transport::Rc, SendOp::AtomicWrite, Position::First),
            None
        );
        assert_eq!(
            request_opcode(Transport::Rc, SendOp::Flush, Position::Only),
            Some(Opcode::RcFlush)
        );
        assert_eq!(
            request_opcode(Transport::Uc, SendOp::Flush, Position::Only),
            None
        );
        // Local operations have no packets.
        for op in [SendOp::LocalInv, SendOp::BindMw, SendOp::RegMr] {
            assert!(op.is_local());
            assert_eq!(request_opcode(Transport::Rc, op, Position::Only), None);
        }
        assert_eq!(
            request_opcode(Transport::Xrc, SendOp::SendInv, Position::Only),
            Some(Opcode::XrcSendOnlyInv)
        );
        assert_eq!(
            request_opcode(Transport::Xrc, SendOp::CmpSwap, Position::Only),
            Some(Opcode::XrcCompareSwap)
        );
        assert_eq!(
            request_opcode(Transport::Xrc, SendOp::Flush, Position::Only),
            None
        );
        assert_eq!(
            request_opcode(Transport::Xrc, SendOp::AtomicWrite, Position::Only),
            None
        );
        for pos in positions {
            for t in [Transport::Rc, Transport::Xrc] {
                let o = read_response_opcode(t, pos);
                assert_eq!(o.position(), pos);
                assert_eq!(o.transport(), t);
                assert_eq!(o.operation(), Operation::RdmaReadResponse);
            }
            assert_eq!(
                read_response_opcode(Transport::Uc, pos),
                read_response_opcode(Transport::Rc, pos)
            );
        }
    }
}
