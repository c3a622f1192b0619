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
    let o = match (t, op, pos) {
        (Transport::Ud, SendOp::Send, Only) => UdSendOnly,
        (Transport::Ud, SendOp::SendImm, Only) => UdSendOnlyImm,
        (Transport::Ud, _, _) => return None,
        (_, SendOp::Send | SendOp::SendImm | SendOp::SendInv, First) => {
            pick(t, RcSendFirst, UcSendFirst)
        }
        (_, SendOp::Send | SendOp::SendImm | SendOp::SendInv, Middle) => {
            pick(t, RcSendMiddle, UcSendMiddle)
        }
        (_, SendOp::Send, Last) => pick(t, RcSendLast, UcSendLast),
        (_, SendOp::Send, Only) => pick(t, RcSendOnly, UcSendOnly),
        (_, SendOp::SendImm, Last) => pick(t, RcSendLastImm, UcSendLastImm),
        (_, SendOp::SendImm, Only) => pick(t, RcSendOnlyImm, UcSendOnlyImm),
        (Transport::Rc, SendOp::SendInv, Last) => RcSendLastInv,
        (Transport::Rc, SendOp::SendInv, Only) => RcSendOnlyInv,
        (_, SendOp::RdmaWrite | SendOp::RdmaWriteImm, First) => {
            pick(t, RcRdmaWriteFirst, UcRdmaWriteFirst)
        }
        (_, SendOp::RdmaWrite | SendOp::RdmaWriteImm, Middle) => {
            pick(t, RcRdmaWriteMiddle, UcRdmaWriteMiddle)
        }
        (_, SendOp::RdmaWrite, Last) => pick(t, RcRdmaWriteLast, UcRdmaWriteLast),
        (_, SendOp::RdmaWrite, Only) => pick(t, RcRdmaWriteOnly, UcRdmaWriteOnly),
        (_, SendOp::RdmaWriteImm, Last) => pick(t, RcRdmaWriteLastImm, UcRdmaWriteLastImm),
        (_, SendOp::RdmaWriteImm, Only) => pick(t, RcRdmaWriteOnlyImm, UcRdmaWriteOnlyImm),
        (Transport::Rc, SendOp::RdmaRead, Only) => RcRdmaReadRequest,
        (Transport::Rc, SendOp::CmpSwap, Only) => RcCompareSwap,
        (Transport::Rc, SendOp::FetchAdd, Only) => RcFetchAdd,
        (Transport::Rc, SendOp::AtomicWrite, Only) => RcAtomicWrite,
        (Transport::Rc, SendOp::Flush, Only) => RcFlush,
        _ => return None,
    };
    Some(o)
}

/// The opcode of RDMA READ response packet `pos`.
pub fn read_response_opcode(pos: Position) -> Opcode {
    match pos {
        Position::First => Opcode::RcRdmaReadResponseFirst,
        Position::Middle => Opcode::RcRdmaReadResponseMiddle,
        Position::Last => Opcode::RcRdmaReadResponseLast,
        Position::Only => Opcode::RcRdmaReadResponseOnly,
    }
}

const fn pick(t: Transport, rc: Opcode, uc: Opcode) -> Opcode {
    match t {
        Transport::Uc => uc,
        _ => rc,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        for t in [Transport::Rc, Transport::Uc, Transport::Ud] {
            for op in ops {
                for pos in positions {
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
        for pos in positions {
            assert_eq!(read_response_opcode(pos).position(), pos);
            assert!(read_response_opcode(pos).is_response());
        }
    }
}
